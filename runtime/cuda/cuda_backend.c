/*
 * cuda/cuda_backend.c - the CUDA backend: workers with their own stream (and context) replay
 * per-iteration CUDA graphs in a device region reserved once.
 *
 * Device: one region of the budget's size (a multiple of 2 MiB, the allocator's page) is
 * reserved at start-up, cudaMalloc in the primary context; with private worker contexts it
 * comes from the virtual memory API instead (cuMemCreate + cuMemMap + cuMemSetAccess), whose
 * mappings belong to the device and so are usable from every context on it. Nothing
 * allocates device memory per tensor.
 *
 * Worker: on its own thread it binds the device's primary context (cudaSetDevice) or creates
 * a private one, then creates a non-blocking stream and a blocking-sync event for each unit
 * it may have in flight (one, or two with GR_UNITS_IN_FLIGHT=2: gr_iteration.slot). Each
 * iteration: find the template's lowered graph in the worker's cache (lower and instantiate
 * it on first use), update its node parameters in place, launch it on the slot's stream,
 * record the slot's event (cuda_launch), and sleep on the event (cuda_finish; blocking
 * sync: no spinning, however many workers wait). No runtime lock is held across any CUDA
 * call.
 *
 * Kernels: a node's kernel is resolved for the worker's context when its graph is built
 * (resolve_kernel): a __global__ entry of this CUDA runtime or a cudaKernel_t (valid in
 * every context of the process); a source kernel's library, loaded once for the process
 * (source_kernel); a CUfunction (primary contexts only), put in by the driver API; a
 * launch callback, captured into a child graph (lowering.h).
 *
 * Errors: a sticky error (illegal address, launch failure, ...) leaves the context unusable.
 * In the shared primary context the whole device is out (GR_REACH_DEVICE: the runtime marks
 * it lost, so its other work fails fast with GR_ERR_DEVICE_LOST or goes to other devices);
 * in a private context only that worker (GR_REACH_WORKER: it retires). Other CUDA errors
 * fail the one index with GR_ERR_CUDA and the call that failed. Either way the sticky error
 * is logged (log.h) with the call and the CUDA error's name.
 *
 * Tracing: with an NVTX tool attached (env->trace, trace.h), the graph update, the launch and
 * the wait for the iteration's event are ranges inside the worker's range for the unit.
 * The copies and kernels themselves run on the device inside the one cudaGraphLaunch, so no
 * host-side range can cover them one by one; Nsight Systems' CUDA trace shows those nodes.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/core/copier.h"
#include "runtime/core/pieces.h"
#include "runtime/cuda/cuda.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/lowering.h"
#include "runtime/base/fault.h"
#include "runtime/base/sync.h"
#include "runtime/base/trace.h"

#define REGION_GRANULE (2ull << 20)
#define GRAPH_CACHE 8 /* lowered templates kept per worker */
/* A streamed unit's staging buffer is cut into this many parts: while the CPU fills one,
 * the DMA engine reads the others. */
#define STREAM_PIECES GR_STREAM_PARTS

typedef struct cuda_device {
    int sm_count;
    bool vmm; /* region from the virtual memory API (private contexts) */
    CUmemGenericAllocationHandle handle;
} cuda_device;

typedef struct cuda_worker {
    CUcontext ctx; /* private context, or NULL for the primary one */
    /* A stream and an event for each unit in flight (gr_iteration.slot). A unit's copies
     * in may run beside the copies out of the one before: each slot has lowered graphs of
     * its own in the cache (gr_cuda_graph.slot), as the driver orders one graph's launches
     * one after another. So a graph is updated or rebuilt only when its slot is free: the
     * other slot's graph, in flight, is the most recently used entry, never the victim. */
    cudaStream_t stream[GR_WORKER_SLOTS];
    cudaEvent_t done[GR_WORKER_SLOTS];
    uint32_t n_slots; /* streams and events made */
    cudaStream_t capture; /* launch callbacks are captured here (lowering.h) */
    uint64_t clock; /* for least-recently-used eviction in the graph cache */
    gr_cuda_graph cache[GRAPH_CACHE];
    /* A scattered unit's copies as cudaMemcpyBatchAsync takes them, grown on demand. */
    void **batch_dst;
    const void **batch_src;
    size_t *batch_size;
    uint32_t batch_cap;
    uint32_t refusals_logged; /* log_refusal's count: the first REFUSALS_LOGGED only */
    /* A streamed unit's pieces (stream_copies): the staging buffer in
     * STREAM_PIECES parts, each with the event of the last copy that used it; made on the
     * first streamed unit. */
    cudaEvent_t piece[STREAM_PIECES];
    bool pieces_made;
} cuda_worker;

/* Refused graph updates each worker logs at debug, at most: a diagnostic, not a log per
 * unit. */
#define REFUSALS_LOGGED 4

static bool is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
        return true;
    default:
        return false;
    }
}

/* A sticky error (any CUDA call may return one, also one made by another thread of the
 * process) ruins the context: the device's shared primary context (the whole device is
 * out), or this worker's private one (the worker is; the runtime loses the device when all
 * of its workers are). Turns err into a device-lost report and says how far it reaches;
 * returns its status. */
static gr_status sticky_error(gr_worker *w, cudaError_t e, const char *call,
                              gr_fault_reach *reach, gr_error_info *err)
{
    cuda_worker *cw = w->backend_state;

    GR_LOG(w->env->log, GR_LOG_ERROR,
           "device %d, worker %u: unrecoverable CUDA error in %s: %s: %s", w->dev->ordinal,
           w->id, call, cudaGetErrorName(e), cudaGetErrorString(e));
    if (cw->ctx != NULL) {
        *reach = GR_REACH_WORKER;
        return gr__error_set(err, GR_ERR_DEVICE_LOST, GR_NO_INDEX, NULL,
                             "%s: %s: %s (worker %u's private context is ruined; it retires)",
                             call, cudaGetErrorName(e), cudaGetErrorString(e), w->id);
    }
    *reach = GR_REACH_DEVICE;
    return gr__cuda_error(err, GR_ERR_DEVICE_LOST, e, NULL, call);
}

/* A failed call during an iteration. */
static gr_status iteration_error(gr_worker *w, cudaError_t e, const char *call,
                                 gr_fault_reach *reach, gr_error_info *err)
{
    if (is_sticky(e))
        return sticky_error(w, e, call, reach, err);
    cudaGetLastError();
    return gr__cuda_error(err, GR_ERR_CUDA, e, NULL, call);
}

static gr_status cuda_probe(const gr_config *cfg, uint32_t *count, gr_error_info *err)
{
    int n = 0, major = 0, minor = 0;
    cudaError_t e;

    (void)cfg;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL,
                             "no usable CUDA driver or device (%s)", cudaGetErrorName(e));
    }
    if (n == 0)
        return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL, "no CUDA device");
    for (int d = 0; d < n; d++) {
        if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d)) !=
                cudaSuccess ||
            (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d)) !=
                cudaSuccess) {
            cudaGetLastError();
            return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL,
                                 "cannot read CUDA device %d's compute capability (%s)", d,
                                 cudaGetErrorName(e));
        }
        if (major < 9)
            return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL,
                                 "CUDA device %d has compute capability %d.%d; this build's "
                                 "kernels need 9.0 (sm_90) or later",
                                 d, major, minor);
    }
    *count = (uint32_t)n;
    return GR_OK;
}

/* The region through the virtual memory API, mapped for the whole device. */
static gr_status map_region(gr_device *dev, cuda_device *cd, gr_error_info *err)
{
    const gr_cuda_driver *drv = gr__cuda_driver_get(err);
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr ptr = 0;
    CUresult r;

    if (drv == NULL)
        return GR_ERR_UNAVAILABLE;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev->ordinal;
    r = gr__fault_hit(GR_FAULT_DEVICE_ALLOC)
            ? CUDA_ERROR_OUT_OF_MEMORY
            : drv->cuMemCreate(&cd->handle, dev->region_size, &prop, 0);
    if (r != CUDA_SUCCESS)
        return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                             "cannot reserve the budget: cuMemCreate(%llu bytes) on device %d: %s",
                             (unsigned long long)dev->region_size, dev->ordinal,
                             gr__cuda_driver_error_name(r));
    r = drv->cuMemAddressReserve(&ptr, dev->region_size, 0, 0, 0);
    if (r != CUDA_SUCCESS)
        goto out_release;
    r = drv->cuMemMap(ptr, dev->region_size, 0, cd->handle, 0);
    if (r != CUDA_SUCCESS)
        goto out_free_address;
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = drv->cuMemSetAccess(ptr, dev->region_size, &access, 1);
    if (r != CUDA_SUCCESS)
        goto out_unmap;
    dev->region = (void *)(uintptr_t)ptr;
    cd->vmm = true;
    return GR_OK;

out_unmap:
    drv->cuMemUnmap(ptr, dev->region_size);
out_free_address:
    drv->cuMemAddressFree(ptr, dev->region_size);
out_release:
    drv->cuMemRelease(cd->handle);
    return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                         "cannot map the device region on device %d: %s", dev->ordinal,
                         gr__cuda_driver_error_name(r));
}

static gr_status cuda_device_open(gr_device *dev, gr_error_info *err)
{
    const gr_config *cfg = dev->env->cfg;
    cuda_device *cd = gr__calloc(1, sizeof(*cd));
    int previous = 0;
    gr_status st = GR_OK;
    cudaError_t e;

    if (cd == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    /* The grid rule caps grids by this count: a wrong one would silently slow every kernel
     * down, so a failure to read it is a failure to open the device. */
    e = cudaDeviceGetAttribute(&cd->sm_count, cudaDevAttrMultiProcessorCount, dev->ordinal);
    if (e != cudaSuccess || cd->sm_count <= 0) {
        cudaGetLastError();
        free(cd);
        return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                             "cannot read the multiprocessor count of CUDA device %d (%s)",
                             dev->ordinal, cudaGetErrorName(e));
    }
    /* The calling thread is the caller's: leave its current device as it was. */
    cudaGetDevice(&previous);
    if (cfg->context_mode == GR_CONTEXT_PRIVATE) {
        /* No primary context is needed (or created) for the virtual memory API. */
        st = map_region(dev, cd, err);
    } else {
        e = cudaSetDevice(dev->ordinal);
        if (e != cudaSuccess) {
            st = gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaSetDevice");
            goto out;
        }
        e = gr__fault_hit(GR_FAULT_DEVICE_ALLOC) ? cudaErrorMemoryAllocation
                                                 : cudaMalloc(&dev->region, dev->region_size);
        if (e != cudaSuccess) {
            size_t free_b = 0, total_b = 0;

            cudaGetLastError();
            cudaMemGetInfo(&free_b, &total_b);
            dev->region = NULL;
            st = gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                               "cannot reserve the budget: cudaMalloc(%llu bytes) on device %d: "
                               "%s (device has %llu of %llu bytes free)",
                               (unsigned long long)dev->region_size, dev->ordinal,
                               cudaGetErrorName(e), (unsigned long long)free_b,
                               (unsigned long long)total_b);
        }
        cudaSetDevice(previous);
    }
out:
    if (st != GR_OK) {
        free(cd);
        return st;
    }
    dev->backend_state = cd;
    return GR_OK;
}

static void cuda_device_close(gr_device *dev)
{
    cuda_device *cd = dev->backend_state;
    int previous = 0;

    if (cd == NULL)
        return;
    if (cd->vmm) {
        const gr_cuda_driver *drv = gr__cuda_driver_get(NULL);
        CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)dev->region;

        drv->cuMemUnmap(ptr, dev->region_size);
        drv->cuMemAddressFree(ptr, dev->region_size);
        drv->cuMemRelease(cd->handle);
    } else {
        cudaGetDevice(&previous);
        cudaSetDevice(dev->ordinal);
        cudaFree(dev->region);
        cudaSetDevice(previous);
    }
    dev->region = NULL;
    dev->backend_state = NULL;
    free(cd);
}

static void destroy_slots(cuda_worker *cw)
{
    for (uint32_t i = 0; i < cw->n_slots; i++) {
        cudaEventDestroy(cw->done[i]);
        cudaStreamDestroy(cw->stream[i]);
    }
    cw->n_slots = 0;
}

static gr_status cuda_worker_open(gr_worker *w, gr_error_info *err)
{
    cuda_worker *cw = gr__calloc(1, sizeof(*cw));
    gr_status st = GR_OK;
    cudaError_t e;

    if (cw == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    if (w->env->cfg->context_mode == GR_CONTEXT_PRIVATE) {
        const gr_cuda_driver *drv = gr__cuda_driver_get(err);
        CUdevice dev;
        CUresult r;

        if (drv == NULL) {
            st = GR_ERR_UNAVAILABLE;
            goto out_free;
        }
        r = drv->cuDeviceGet(&dev, w->dev->ordinal);
        if (r == CUDA_SUCCESS)
            r = drv->cuCtxCreate(&cw->ctx, NULL, CU_CTX_SCHED_BLOCKING_SYNC, dev);
        if (r != CUDA_SUCCESS) {
            cw->ctx = NULL;
            st = gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                               "worker %u: cannot create a private context on device %d: %s",
                               w->id, w->dev->ordinal, gr__cuda_driver_error_name(r));
            goto out_free;
        }
    } else {
        e = cudaSetDevice(w->dev->ordinal);
        if (e != cudaSuccess) {
            st = gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaSetDevice");
            goto out_free;
        }
    }
    e = gr__fault_hit(GR_FAULT_STREAM)
            ? cudaErrorMemoryAllocation
            : cudaStreamCreateWithFlags(&cw->capture, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        st = gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaStreamCreateWithFlags");
        goto out_destroy_ctx;
    }
    for (; cw->n_slots < w->in_flight; cw->n_slots++) {
        uint32_t i = cw->n_slots;

        e = gr__fault_hit(GR_FAULT_STREAM)
                ? cudaErrorMemoryAllocation
                : cudaStreamCreateWithFlags(&cw->stream[i], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            st = gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaStreamCreateWithFlags");
            goto out_destroy_slots;
        }
        e = gr__fault_hit(GR_FAULT_EVENT)
                ? cudaErrorMemoryAllocation
                : cudaEventCreateWithFlags(&cw->done[i],
                                           cudaEventBlockingSync | cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaStreamDestroy(cw->stream[i]);
            st = gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaEventCreateWithFlags");
            goto out_destroy_slots;
        }
    }
    w->backend_state = cw;
    return GR_OK;

out_destroy_slots:
    destroy_slots(cw);
    cudaStreamDestroy(cw->capture);
out_destroy_ctx:
    if (cw->ctx)
        gr__cuda_driver_get(NULL)->cuCtxDestroy(cw->ctx);
out_free:
    free(cw);
    return st;
}

static void cuda_worker_close(gr_worker *w)
{
    cuda_worker *cw = w->backend_state;

    if (cw == NULL)
        return;
    for (int i = 0; i < GRAPH_CACHE; i++)
        gr__cuda_graph_release(&cw->cache[i]);
    destroy_slots(cw);
    for (int i = 0; cw->pieces_made && i < STREAM_PIECES; i++)
        cudaEventDestroy(cw->piece[i]);
    cudaStreamDestroy(cw->capture);
    if (cw->ctx)
        gr__cuda_driver_get(NULL)->cuCtxDestroy(cw->ctx);
    w->backend_state = NULL;
    free(cw->batch_dst);
    free(cw->batch_src);
    free(cw->batch_size);
    free(cw);
}

/* Source kernels' modules, for the process: a library per compiled text (the kernels of one
 * file share it), loaded from its PTX (the driver compiles it for each device's
 * architecture when a context first uses it) and never unloaded: the PTX is NVRTC's cache's,
 * which outlives unregistered kernels, and a worker's cached CUDA graph may still name a
 * kernel of it. Libraries are independent of contexts, so every runtime and every context
 * of the process shares one. Loading (a JIT that can take long) runs outside the lock; two
 * threads loading one text both load it, and the one that comes second unloads its copy. */
typedef struct loaded_source {
    const char *ptx; /* the registry's (kernels/nvrtc.c: one per text) */
    cudaLibrary_t lib;
} loaded_source;

static pthread_mutex_t sources_mu = PTHREAD_MUTEX_INITIALIZER;
static loaded_source *sources;
static uint32_t n_sources, sources_cap;

static cudaLibrary_t find_library(const char *ptx)
{
    for (uint32_t i = 0; i < n_sources; i++)
        if (sources[i].ptx == ptx)
            return sources[i].lib;
    return NULL;
}

static gr_status source_kernel(const gr_kernel *k, const void **func, gr_error_info *err)
{
    cudaLibrary_t lib, mine = NULL;
    cudaKernel_t kernel = NULL;
    cudaError_t e;

    pthread_mutex_lock(&sources_mu);
    lib = find_library(k->ptx);
    pthread_mutex_unlock(&sources_mu);
    if (lib == NULL) {
        e = cudaLibraryLoadData(&mine, k->ptx, NULL, NULL, 0, NULL, NULL, 0);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                                 "kernel '%s': cannot load its compiled source: %s: %s",
                                 k->name, cudaGetErrorName(e), cudaGetErrorString(e));
        }
        pthread_mutex_lock(&sources_mu);
        if ((lib = find_library(k->ptx)) == NULL && n_sources == sources_cap) {
            uint32_t cap = sources_cap ? 2 * sources_cap : 16;
            loaded_source *grown = realloc(sources, cap * sizeof(*grown));

            if (grown != NULL) {
                sources = grown;
                sources_cap = cap;
            }
        }
        if (lib == NULL && n_sources < sources_cap) {
            sources[n_sources++] = (loaded_source){k->ptx, mine};
            lib = mine;
            mine = NULL;
        }
        pthread_mutex_unlock(&sources_mu);
        if (mine != NULL)
            cudaLibraryUnload(mine); /* another thread's copy won, or no memory to keep it */
        if (lib == NULL)
            return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    }
    e = cudaLibraryGetKernel(&kernel, lib, k->cuda_name);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                             "kernel '%s': no entry '%s' in its compiled source: %s", k->name,
                             k->cuda_name, cudaGetErrorName(e));
    }
    *func = (const void *)kernel;
    return GR_OK;
}

static const char *cuda_kernel_missing(const gr_backend_env *env, const gr_kernel *k)
{
    switch (k->def.cuda_kind) {
    case GR_CUDA_NONE:
        return "has no CUDA implementation";
    case GR_CUDA_SOURCE:
        return k->ptx == NULL ? k->cuda_unavailable : NULL;
    case GR_CUDA_FUNCTION:
        if (env->cfg->context_mode == GR_CONTEXT_PRIVATE)
            return "is a CUfunction, which only its own context can launch, and workers have "
                   "private contexts (use GR_CUDA_KERNEL, or primary contexts)";
        return env->n_devices > 1 ? "is a CUfunction, which only its own context can launch, "
                                    "and this runtime has several devices (use "
                                    "GR_CUDA_KERNEL, or one device)"
                                  : NULL;
    default:
        return NULL;
    }
}

/* How this worker's context launches kernel k (lowering.h: gr_cuda_resolve_fn). Entries,
 * cudaKernel_t handles and loaded sources are valid in every context; a CUfunction only in
 * the primary context (kernel_missing keeps it from private ones). */
static gr_status resolve_kernel(void *ctx, const gr_kernel *k, gr_cuda_impl *impl,
                                gr_error_info *err)
{
    gr_worker *w = ctx;
    const char *missing = cuda_kernel_missing(w->env, k);

    impl->how = GR_CUDA_NODE_KERNEL;
    impl->func = k->def.cuda;
    if (missing != NULL)
        return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL, "kernel '%s' %s",
                             k->name, missing);
    switch (k->def.cuda_kind) {
    case GR_CUDA_SOURCE:
        return source_kernel(k, &impl->func, err);
    case GR_CUDA_FUNCTION:
        impl->how = GR_CUDA_NODE_FUNCTION;
        return GR_OK;
    case GR_CUDA_LAUNCH:
        impl->how = GR_CUDA_NODE_CAPTURE;
        return GR_OK;
    case GR_CUDA_STREAM:
        impl->how = GR_CUDA_NODE_STREAM;
        return GR_OK;
    default:
        return GR_OK;
    }
}

/* The context memory at p was made under, as text ("none" for memory no context knows:
 * pageable, or not the driver's), for log_refusal. */
static void context_of(const void *p, char *buf, size_t size)
{
    const gr_cuda_driver *drv = gr__cuda_driver_get(NULL);
    CUcontext ctx = NULL;

    if (drv == NULL || drv->cuPointerGetAttribute == NULL ||
        drv->cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT,
                                   (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
        snprintf(buf, size, "none");
        return;
    }
    snprintf(buf, size, "%p", (void *)ctx);
}

/* With GR_LOG=debug (or a debug log level), for the first REFUSALS_LOGGED of a worker:
 * which copy update the driver refused, its operands before and after and the contexts
 * they were made under, beside the worker's own. The driver refuses moving a copy between
 * memory of two contexts, and in a private context a second move of a graph's copies
 * (tools/bench/probes/graph_update_contexts.cu), which gr__cuda_graph_update rebuilds for without
 * asking (gr_cuda_target.copies_move_once); a refusal still seen costs a rebuild and counts
 * in gr_device.graph_update_refusals. */
static void log_refusal(const gr_worker *w, const cuda_worker *cw, const gr_graph *g,
                        const gr_cuda_refusal *why)
{
    char c[4][32];

    context_of(why->from.dst, c[0], sizeof(c[0]));
    context_of(why->from.src, c[1], sizeof(c[1]));
    context_of(why->to.dst, c[2], sizeof(c[2]));
    context_of(why->to.src, c[3], sizeof(c[3]));
    GR_LOG(w->env->log, GR_LOG_DEBUG,
           "worker %u: graph %llu, node '%s': the driver refused to update its copy (%s), "
           "rebuilt: dst %p [context %s] src %p [context %s] %llu bytes, then dst %p "
           "[context %s] src %p [context %s] %llu bytes; the worker's context %p%s",
           w->id, (unsigned long long)g->id, g->nodes[why->node].name,
           cudaGetErrorName(why->error), why->from.dst, c[0], why->from.src, c[1],
           (unsigned long long)why->from.bytes, why->to.dst, c[2], why->to.src, c[3],
           (unsigned long long)why->to.bytes, (void *)cw->ctx,
           cw->ctx == NULL ? " (primary)" : "");
}

/* Whether the cache entry was lowered for `it`'s template, these host memory kinds and
 * `it`'s slot (under whichever registration epoch). */
static bool lowered_for(const gr_cuda_graph *cg, const gr_iteration *it, uint32_t kinds)
{
    return cg->graph_id == it->graph->id && cg->host_kinds == kinds && cg->slot == it->slot;
}

/* The worker's lowered graph for this template, these host memory kinds and `it`'s slot,
 * updated to `it`; lowered and instantiated on first use, evicting the least recently used
 * (of either slot; with two units in flight a template takes two of the entries). */
static gr_status prepare_graph(gr_worker *w, cuda_worker *cw, const gr_iteration *it,
                               gr_cuda_graph **out, gr_error_info *err)
{
    cuda_device *cd = w->dev->backend_state;
    gr_cuda_target target = {cd->sm_count, resolve_kernel, w, cw->capture, cw->ctx != NULL};
    uint32_t kinds = gr__cuda_host_kinds(w->env, it);
    /* Graphs with no host operand (a scattered unit's) do not depend on the cache. */
    uint64_t epoch = w->env->host_epoch != NULL && kinds != GR_CUDA_DEVICE_ONLY
                         ? w->env->host_epoch(w->env)
                         : 0;
    gr_cuda_graph *victim = &cw->cache[0];
    gr_status st;

    for (int i = 0; i < GRAPH_CACHE; i++) {
        gr_cuda_graph *cg = &cw->cache[i];

        if (lowered_for(cg, it, kinds) && cg->host_epoch == epoch) {
            gr_cuda_refusal why = {.copy = false};
            bool rebuilt, refused;

            cg->last_use = ++cw->clock;
            *out = cg;
            st = gr__cuda_graph_update(cg, it, &target, &rebuilt, &why, err);
            /* The driver said no to a copy (not a fault injected, not a rebuild unasked),
             * counted whether or not the rebuild then worked. */
            refused = why.copy && !why.injected && !why.unasked && why.error != cudaSuccess;
            if (refused)
                atomic_fetch_add_explicit(&w->dev->graph_update_refusals, 1,
                                          memory_order_relaxed);
            if (rebuilt && refused && gr__log_enabled(w->env->log, GR_LOG_DEBUG) &&
                cw->refusals_logged < REFUSALS_LOGGED) {
                cw->refusals_logged++;
                log_refusal(w, cw, it->graph, &why);
            }
            atomic_fetch_add_explicit(rebuilt ? &w->dev->graph_instantiations
                                              : &w->dev->graph_updates,
                                      st == GR_OK, memory_order_relaxed);
            return st;
        }
        if (cg->last_use < victim->last_use)
            victim = cg;
    }
    /* A graph of this template and slot lowered under an older epoch goes first: it is
     * stale. */
    for (int i = 0; i < GRAPH_CACHE; i++)
        if (lowered_for(&cw->cache[i], it, kinds) && cw->cache[i].host_epoch != epoch)
            victim = &cw->cache[i];
    gr__cuda_graph_release(victim);
    st = gr__cuda_graph_build(victim, it, &target, kinds, err);
    victim->host_epoch = epoch;
    victim->slot = it->slot;
    atomic_fetch_add_explicit(&w->dev->graph_instantiations, st == GR_OK, memory_order_relaxed);
    victim->last_use = ++cw->clock;
    *out = victim;
    return st;
}

/* The copies `c[0 .. n)` in one cudaMemcpyBatchAsync on `stream` (the unit's slot's), in
 * stream order (after what came before on it, before what comes after). */
static cudaError_t batch_copy(cuda_worker *cw, cudaStream_t stream, const gr_copy *c,
                              uint32_t n)
{
    struct cudaMemcpyAttributes attr;
    size_t first = 0;

    if (n == 0)
        return cudaSuccess;
    if (n > cw->batch_cap) {
        void **d = realloc(cw->batch_dst, n * sizeof(*d));
        const void **s = d ? realloc(cw->batch_src, n * sizeof(*s)) : NULL;
        size_t *z = s ? realloc(cw->batch_size, n * sizeof(*z)) : NULL;

        if (d)
            cw->batch_dst = d;
        if (s)
            cw->batch_src = s;
        if (z == NULL)
            return cudaErrorMemoryAllocation;
        cw->batch_size = z;
        cw->batch_cap = n;
    }
    for (uint32_t i = 0; i < n; i++) {
        cw->batch_dst[i] = c[i].dst;
        cw->batch_src[i] = c[i].src;
        cw->batch_size[i] = c[i].bytes;
    }
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    if (gr__fault_hit(GR_FAULT_COPY))
        return cudaErrorInvalidValue;
    return cudaMemcpyBatchAsync(cw->batch_dst, cw->batch_src, cw->batch_size, n, &attr, &first,
                                1, stream);
}

/*
 * Streamed copies (gr_iteration.streamed): each copy whose host side is DMA-ready goes as
 * it lies; each other one through the worker's pinned staging buffer in pieces, on the
 * schedule of pieces.h: the copier (its threads and this one) moves a piece into a part
 * while the DMA engine reads the parts before it (in), and empties each part as its copy
 * from the device ends (out). A part's event marks the last copy that used it. Out returns
 * once every output is in host memory and every part's last copy has ended: nothing of the
 * unit uses the staging buffer after launch returns (its kernels may still run).
 */
typedef struct streaming {
    gr_worker *w;
    cuda_worker *cw;
    cudaStream_t stream;
    enum cudaMemcpyKind kind;
    const char *call; /* the call that failed */
} streaming;

static int piece_queue(void *ctx, uint32_t part, void *dst, const void *src, uint64_t bytes)
{
    streaming *x = ctx;
    cudaError_t e;

    x->call = "cudaMemcpyAsync";
    if ((e = cudaMemcpyAsync(dst, src, bytes, x->kind, x->stream)) != cudaSuccess)
        return (int)e;
    x->call = "cudaEventRecord";
    return (int)cudaEventRecord(x->cw->piece[part], x->stream);
}

static int piece_wait(void *ctx, uint32_t part)
{
    streaming *x = ctx;

    x->call = "cudaEventSynchronize";
    return (int)cudaEventSynchronize(x->cw->piece[part]);
}

static void piece_host_copy(void *ctx, void *dst, const void *src, uint64_t bytes)
{
    streaming *x = ctx;
    gr_copy c = {dst, src, bytes};

    gr__copier_copy(x->w->copier, &c, 1, x->w->copy_ends);
}

/* Which copies of the list go as they lie (a bit per copy): those whose host side is
 * DMA-ready, each queued here. */
static cudaError_t direct_copies(gr_worker *w, const gr_iteration *it, cudaStream_t stream,
                                 const gr_copy *list, uint32_t n, bool in, uint64_t *direct)
{
    *direct = 0;
    for (uint32_t i = 0; i < n && i < 64; i++) {
        const void *host = in ? list[i].src : list[i].dst;
        cudaError_t e;

        if (!w->env->host_ready(w->env, it->host_hold, host, list[i].bytes))
            continue;
        *direct |= 1ull << i;
        e = cudaMemcpyAsync(list[i].dst, list[i].src, list[i].bytes,
                            in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

static cudaError_t make_pieces(cuda_worker *cw)
{
    for (int i = 0; !cw->pieces_made && i < STREAM_PIECES; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&cw->piece[i], cudaEventBlockingSync |
                                                                    cudaEventDisableTiming);

        if (e != cudaSuccess) {
            while (i-- > 0)
                cudaEventDestroy(cw->piece[i]);
            return e;
        }
    }
    cw->pieces_made = true;
    return cudaSuccess;
}

/* The staging part size: a quarter of the buffer, whole pages (the worker streams only
 * with a buffer of a page a part at least). */
static uint64_t piece_bytes(const gr_worker *w)
{
    return w->staging_bytes / STREAM_PIECES / 4096 * 4096;
}

/* A streamed unit's copies in (`in`) or out, on its stream; *call names a failed call,
 * and *laid_out is set when it was a copy of the tensors as they lie (not a piece). Out
 * returns once no copy uses the staging buffer (pieces.h), in also when out has no piece:
 * the worker hands the buffer to its next unit once launch returns. */
static cudaError_t stream_copies(gr_worker *w, const gr_iteration *it, cudaStream_t stream,
                                 bool in, const char **call, bool *laid_out)
{
    streaming x = {w, w->backend_state, stream,
                   in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, NULL};
    gr_piece_ops ops = {&x, piece_queue, piece_wait, piece_host_copy};
    const gr_copy *list = in ? it->h2d : it->d2h;
    uint32_t n = in ? it->n_h2d : it->n_d2h;
    uint64_t part = piece_bytes(w), direct;
    cudaError_t e;

    *call = "cudaMemcpyAsync";
    if ((e = direct_copies(w, it, stream, list, n, in, &direct)) != cudaSuccess) {
        *laid_out = true;
        return e;
    }
    *call = "cudaEventCreateWithFlags";
    if ((e = make_pieces(x.cw)) != cudaSuccess)
        return e;
    e = (cudaError_t)(in ? gr__pieces_in(&ops, w->staging, part, STREAM_PIECES, list, n, direct)
                         : gr__pieces_out(&ops, w->staging, part, STREAM_PIECES, list, n,
                                          direct));
    if (x.call != NULL)
        *call = x.call;
    return e;
}

/* After a failed call on the slot's stream, whose launched work may still be copying: the
 * caller gives the unit's arena block back (and a later iteration may reuse it) once this
 * returns, so wait for the stream to drain first. If even that fails, nobody can say when
 * the copies stop: a sticky error (the worker or the device goes out of service), so that
 * no later iteration of this context writes into a block still being copied. */
static gr_status failed_on_stream(gr_worker *w, uint32_t slot, cudaError_t e,
                                  const char *call, gr_fault_reach *reach, gr_error_info *err)
{
    cuda_worker *cw = w->backend_state;

    if (!is_sticky(e)) {
        cudaError_t drained;

        cudaGetLastError();
        drained = cudaStreamSynchronize(cw->stream[slot]);
        if (drained != cudaSuccess)
            return sticky_error(w, drained, "cudaStreamSynchronize", reach, err);
    }
    return iteration_error(w, e, call, reach, err);
}

/* An eager iteration failed part way (gr__cuda_run_eager): what it enqueued drains before
 * the caller frees its block; a sticky error found then goes as far as it reaches. */
static gr_status eager_failed(gr_worker *w, uint32_t slot, gr_status st,
                              gr_fault_reach *reach, gr_error_info *err)
{
    cuda_worker *cw = w->backend_state;
    cudaError_t e = cudaStreamSynchronize(cw->stream[slot]);

    if (e != cudaSuccess)
        return failed_on_stream(w, slot, e, "cudaStreamSynchronize", reach, err);
    cudaGetLastError();
    return st;
}

/* The unit's work on the stream of its slot: its graph updated (or lowered), then a
 * scattered unit's batched copies in, the graph, the copies out, and the slot's event. A
 * template with an eager kernel (GR_CUDA_STREAM) has no graph: its nodes are enqueued one
 * by one in the graph's place. */
static gr_status cuda_launch(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                             gr_error_info *err)
{
    cuda_worker *cw = w->backend_state;
    cuda_device *cd = w->dev->backend_state;
    cudaStream_t stream = cw->stream[it->slot];
    gr_cuda_target target = {cd->sm_count, resolve_kernel, w, cw->capture, cw->ctx != NULL};
    bool eager = gr__cuda_graph_is_eager(it->graph), laid_out = false;
    const char *call;
    bool trace = w->env->trace;
    gr_cuda_graph *cg = NULL;
    gr_status st = GR_OK;
    cudaError_t e;

    *reach = GR_REACH_ITERATION;
    if (trace)
        gr__trace_push("graph update");
    if (!eager)
        st = prepare_graph(w, cw, it, &cg, err);
    if (trace)
        gr__trace_pop();
    if (st != GR_OK) {
        if (is_sticky(cg->error))
            return sticky_error(w, cg->error, "lowering the graph", reach, err);
        if (cg->copy_refused)
            *reach = GR_REACH_REFUSED_COPY;
        return st;
    }
    /* Injected failures (fault.h) use error codes that are not sticky, as a real
     * transient failure of these calls would be. A scattered unit's copies go in and out
     * around the graph, on the same stream (its graph has no copy nodes). */
    if (trace)
        gr__trace_push("launch");
    call = "cudaMemcpyBatchAsync";
    e = it->streamed ? stream_copies(w, it, stream, true, &call, &laid_out)
                     : batch_copy(cw, stream, it->h2d, it->n_h2d);
    laid_out |= !it->streamed && e != cudaSuccess;
    if (e == cudaSuccess && eager) {
        if ((st = gr__cuda_run_eager(it, &target, stream, err)) != GR_OK) {
            if (trace)
                gr__trace_pop();
            return eager_failed(w, it->slot, st, reach, err);
        }
    } else if (e == cudaSuccess) {
        call = "cudaGraphLaunch";
        e = gr__fault_hit(GR_FAULT_GRAPH_LAUNCH) ? cudaErrorLaunchOutOfResources
                                                 : cudaGraphLaunch(cg->exec, stream);
    }
    if (e == cudaSuccess) {
        call = "cudaMemcpyBatchAsync";
        e = it->streamed ? stream_copies(w, it, stream, false, &call, &laid_out)
                         : batch_copy(cw, stream, it->d2h, it->n_d2h);
        laid_out |= !it->streamed && e != cudaSuccess;
    }
    if (e == cudaSuccess) {
        call = "cudaEventRecord";
        e = gr__fault_hit(GR_FAULT_EVENT) ? cudaErrorNotPermitted
                                          : cudaEventRecord(cw->done[it->slot], stream);
    }
    if (trace)
        gr__trace_pop();
    if (e != cudaSuccess) {
        /* A copy of the tensors refused as laid out (a batched one, or a streamed unit's
         * copy of DMA-ready memory, not a piece through the staging buffer): the unit runs
         * again staged, which rewrites whatever of its outputs was copied. */
        bool refused = e == cudaErrorInvalidValue && it->n_h2d != 0 && laid_out;

        st = failed_on_stream(w, it->slot, e, call, reach, err);
        if (refused && *reach == GR_REACH_ITERATION)
            *reach = GR_REACH_REFUSED_COPY;
        return st;
    }
    return GR_OK;
}

/* Wait for the slot's launched unit (its event). */
static gr_status cuda_finish(gr_worker *w, uint32_t slot, gr_fault_reach *reach,
                             gr_error_info *err)
{
    cuda_worker *cw = w->backend_state;
    cudaError_t e;

    *reach = GR_REACH_ITERATION;
    e = gr__fault_hit(GR_FAULT_EVENT) ? cudaErrorNotPermitted
                                      : cudaEventSynchronize(cw->done[slot]);
    if (e != cudaSuccess)
        return failed_on_stream(w, slot, e, "cudaEventSynchronize", reach, err);
    return GR_OK;
}

static gr_status cuda_run(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                          gr_error_info *err)
{
    gr_status st = cuda_launch(w, it, reach, err);
    bool trace = w->env->trace;

    if (st != GR_OK)
        return st;
    if (trace)
        gr__trace_push("wait");
    st = cuda_finish(w, it->slot, reach, err);
    if (trace)
        gr__trace_pop();
    return st;
}

/* On slot 0's stream, which is idle: the worker has no unit in flight (backend.h). Pageable
 * sources are fine: the driver stages them. */
static gr_status cuda_upload(gr_worker *w, void *dst, const void *src, uint64_t bytes,
                             gr_fault_reach *reach, gr_error_info *err)
{
    cuda_worker *cw = w->backend_state;
    cudaError_t e;

    *reach = GR_REACH_ITERATION;
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cw->stream[0]);
    if (e != cudaSuccess)
        return failed_on_stream(w, 0, e, "cudaMemcpyAsync", reach, err);
    e = cudaStreamSynchronize(cw->stream[0]);
    if (e != cudaSuccess)
        return failed_on_stream(w, 0, e, "cudaStreamSynchronize", reach, err);
    return GR_OK;
}

/* A copy path on unless environment variable `var` is "0", read once per process (*known:
 * 0 not read yet, 1 off, 2 on): the switches that turn a path off to compare with it. */
static bool path_on(const char *var, atomic_int *known)
{
    int v = atomic_load(known);

    if (v == 0) {
        const char *env = getenv(var);

        v = env == NULL || strcmp(env, "0") != 0 ? 2 : 1;
        atomic_store(known, v);
    }
    return v == 2;
}

/* Batched copies (cudaMemcpyBatchAsync) came with CUDA 12.8; the CUDA 13 runtime linked in
 * runs only on drivers that have them. GR_BATCH_COPIES=0 turns the path off (the batches
 * are staged as before), to compare the two. */
static bool cuda_batch_copies(void)
{
    static atomic_int known;

    return path_on("GR_BATCH_COPIES", &known);
}

/* Streamed copies need nothing of the driver but plain copies and events. GR_STREAMED_COPIES=0
 * turns them off (such units' copies then go to the driver as they lie), to compare the
 * two. */
static bool cuda_streamed_copies(void)
{
    static atomic_int known;

    return path_on("GR_STREAMED_COPIES", &known);
}

/* The driver's allocation around p, from its address range. A host pointer the driver
 * does not describe, or a range that does not hold p (an answer in another address space),
 * gives false: the planner then copies nothing past the tensor at p. */
static bool cuda_host_span(const void *p, uintptr_t *lo, uintptr_t *hi)
{
    const gr_cuda_driver *drv = gr__cuda_driver_get(NULL);
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr start = 0;
    size_t size = 0;
    void *data[2] = {&start, &size};
    uintptr_t a = (uintptr_t)p;

    if (drv == NULL || drv->cuPointerGetAttributes == NULL ||
        drv->cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)a) != CUDA_SUCCESS)
        return false;
    if (start > a || a - start >= size)
        return false;
    *lo = (uintptr_t)start;
    *hi = (uintptr_t)start + size;
    return true;
}

static bool cuda_dma_ready(const void *p)
{
    struct cudaPointerAttributes a;

    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

const gr_backend_ops gr__backend_cuda = {
    .kind = GR_BACKEND_CUDA,
    .name = "cuda",
    .region_granule = REGION_GRANULE,
    .traced = true,
    .probe = cuda_probe,
    .device_open = cuda_device_open,
    .device_close = cuda_device_close,
    .worker_open = cuda_worker_open,
    .worker_close = cuda_worker_close,
    .kernel_missing = cuda_kernel_missing,
    .run = cuda_run,
    .launch = cuda_launch,
    .finish = cuda_finish,
    .upload = cuda_upload,
    .dma_ready = cuda_dma_ready,
    .host_span = cuda_host_span,
    .batch_copies = cuda_batch_copies,
    .streamed_copies = cuda_streamed_copies,
    .pinned = &gr__cuda_pinned,
};

/*
 * host/host_backend.c - the host backend: the same runtime, executed on the CPU.
 *
 * Each device's region is anonymous memory reserved once (pages are committed only when
 * touched); H2D and D2H are memcpy into and out of the iteration's block, and kernels are
 * the CPU versions from kernels/. Nodes run one at a time in the template's topological
 * order, which respects every dependency. It is what CI tests and what a machine without a
 * GPU runs, so it keeps the device semantics: iterations only touch their own block, and
 * host outputs are written only by the D2H of their own index. A device marked lost runs
 * nothing more, as a CUDA device whose context a sticky error ruined: an iteration running
 * on it stops before its next node and fails with GR_ERR_DEVICE_LOST (its outputs untouched
 * unless their D2H had already run).
 *
 * Launched apart (launch, finish: GR_UNITS_IN_FLIGHT=2, what the tests of the worker's
 * two-unit path use), an iteration runs at finish: so whatever the worker changed of an
 * iteration in flight before finishing it shows in its outputs, and the order of launches
 * and finishes is checked (a finish out of turn fails with GR_ERR_INTERNAL).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/backend.h"
#include "runtime/fault.h"
#include "runtime/sync.h"

#define HOST_MAX_DEVICES 64

static gr_status host_probe(const gr_config *cfg, uint32_t *count, gr_error_info *err)
{
    if (cfg->host_devices == 0 || cfg->host_devices > HOST_MAX_DEVICES)
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "host_devices must be 1..%d, got %u", HOST_MAX_DEVICES,
                            cfg->host_devices);
    *count = cfg->host_devices;
    return GR_OK;
}

static gr_status host_device_open(gr_device *dev, gr_error_info *err)
{
    void *p = gr__fault_hit(GR_FAULT_DEVICE_ALLOC)
            ? MAP_FAILED
            : mmap(NULL, dev->region_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                            "host backend: cannot reserve %llu bytes for device %u's arena",
                            (unsigned long long)dev->region_size, dev->id);
    dev->region = p;
    return GR_OK;
}

static void host_device_close(gr_device *dev)
{
    if (dev->region != NULL)
        munmap(dev->region, dev->region_size);
    dev->region = NULL;
}

/* A worker's iterations launched and not finished, oldest first. */
typedef struct host_worker {
    const gr_iteration *launched[GR_WORKER_SLOTS];
    uint32_t n_launched;
} host_worker;

static gr_status host_worker_open(gr_worker *w, gr_error_info *err)
{
    host_worker *hw = calloc(1, sizeof(*hw));

    if (hw == NULL)
        return gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    w->backend_state = hw;
    return GR_OK;
}

static void host_worker_close(gr_worker *w)
{
    free(w->backend_state);
    w->backend_state = NULL;
}

static gr_status host_run(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                          gr_error_info *err)
{
    const gr_graph *g = it->graph;

    /* A lost host device was marked by someone else (a test): the runtime already knows. */
    *reach = GR_REACH_ITERATION;
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        const gr_node *node = &g->nodes[g->order[k]];

        /* Relaxed is enough: the flag guards no data, it only has to be seen soon. */
        if (atomic_load_explicit(&w->dev->lost, memory_order_relaxed))
            return gr_error_set(err, GR_ERR_DEVICE_LOST, GR_NO_INDEX, node->name,
                                "host device %d was marked lost while this iteration ran",
                                w->dev->ordinal);
        if (node->kind == GR_NODE_KERNEL) {
            gr_kernel_args a;

            gr_graph_node_args(it, node, &a);
            node->kernel->def.cpu(&a, node->kernel->def.user);
        } else {
            const void *src;
            uint64_t bytes;
            void *dst;

            gr_graph_node_copy(it, node, &dst, &src, &bytes);
            memcpy(dst, src, bytes);
        }
    }
    return GR_OK;
}

static gr_status host_launch(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                             gr_error_info *err)
{
    host_worker *hw = w->backend_state;

    *reach = GR_REACH_ITERATION;
    for (uint32_t i = 0; i < hw->n_launched; i++)
        if (hw->launched[i]->slot == it->slot)
            return gr_error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, NULL,
                                "worker %u launched slot %u while it was in flight", w->id,
                                it->slot);
    if (hw->n_launched == GR_WORKER_SLOTS)
        return gr_error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, NULL,
                            "worker %u launched more than %d units", w->id, GR_WORKER_SLOTS);
    hw->launched[hw->n_launched++] = it;
    return GR_OK;
}

static gr_status host_finish(gr_worker *w, uint32_t slot, gr_fault_reach *reach,
                             gr_error_info *err)
{
    host_worker *hw = w->backend_state;
    const gr_iteration *it;

    *reach = GR_REACH_ITERATION;
    if (hw->n_launched == 0 || hw->launched[0]->slot != slot)
        return gr_error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, NULL,
                            "worker %u finished slot %u out of turn", w->id, slot);
    it = hw->launched[0];
    memmove(&hw->launched[0], &hw->launched[1], (hw->n_launched - 1) * sizeof(it));
    hw->n_launched--;
    return host_run(w, it, reach, err);
}

static const char *host_kernel_missing(const gr_backend_env *env, const gr_kernel *k)
{
    (void)env;
    return k->def.cpu == NULL ? "has no CPU implementation" : NULL;
}

static bool host_dma_ready(const void *p)
{
    (void)p; /* the host backend copies with memcpy: any memory is as fast as any other */
    return true;
}

const gr_backend_ops gr_backend_host = {
    .kind = GR_BACKEND_HOST,
    .name = "host",
    .region_granule = GR_BUFFER_ALIGN,
    .probe = host_probe,
    .device_open = host_device_open,
    .device_close = host_device_close,
    .worker_open = host_worker_open,
    .worker_close = host_worker_close,
    .kernel_missing = host_kernel_missing,
    .run = host_run,
    .launch = host_launch,
    .finish = host_finish,
    .dma_ready = host_dma_ready,
    .pinned = NULL, /* memory is memory: gr_host_alloc gives ordinary pages */
};

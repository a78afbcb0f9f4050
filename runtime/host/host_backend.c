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
 *
 * Allocations (host.h): memcpy copies any range, but the CUDA driver refuses a copy that
 * runs from one allocation into the next, and the runtime must never hand it one. So that
 * tests without a GPU hold the runtime to that rule, a test marks the allocations it makes;
 * the backend then answers host_span from the marks, and refuses, as the driver does, an
 * iteration whose copy runs over a mark's edge, before any of its nodes run (at launch, as
 * the driver refuses a copy when it is handed over, not when it runs).
 *
 * Streamed iterations (gr_iteration.streamed: only where a test's emulated registration
 * cache says memory is not DMA-ready, since to this backend all memory is) move their
 * copies through the worker's staging buffer on the schedule the CUDA backend uses
 * (pieces.h), the device's copies done as they are queued, and run whole at launch (the
 * CUDA backend's copies end by then too): the worker reuses the staging buffer once launch
 * returns.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/backend.h"
#include "runtime/base/fault.h"
#include "runtime/core/pieces.h"
#include "runtime/host/host.h"
#include "runtime/base/sync.h"

#define HOST_MAX_DEVICES 64

static gr_status host_probe(const gr_config *cfg, uint32_t *count, gr_error_info *err)
{
    if (cfg->host_devices == 0 || cfg->host_devices > HOST_MAX_DEVICES)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
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
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
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

/* The marked allocations, sorted by address and disjoint, under marks_mu; marks_on spares
 * the lock where no test marked any. Lock order: marks_mu before nothing else. */
typedef struct host_mark {
    uintptr_t lo, hi;
} host_mark;

static pthread_mutex_t marks_mu = PTHREAD_MUTEX_INITIALIZER;
static host_mark *marks;
static size_t n_marks, marks_cap;
static atomic_bool marks_on;

/* The first mark that ends after address a (n_marks when none). marks_mu held. */
static size_t mark_after(uintptr_t a)
{
    size_t lo = 0, hi = n_marks;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (marks[mid].hi <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

gr_status gr__host_mark_allocation(const void *p, uint64_t bytes)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    gr_status st = GR_OK;
    size_t k;

    if (p == NULL || bytes == 0 || hi < lo)
        return GR_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&marks_mu);
    k = mark_after(lo);
    if (k < n_marks && marks[k].lo < hi) {
        st = GR_ERR_INVALID_ARGUMENT; /* overlaps a mark */
        goto out_unlock;
    }
    if (n_marks == marks_cap) {
        size_t cap = marks_cap ? 2 * marks_cap : 64;
        host_mark *m = realloc(marks, cap * sizeof(*m));

        if (m == NULL) {
            st = GR_ERR_OUT_OF_MEMORY;
            goto out_unlock;
        }
        marks = m;
        marks_cap = cap;
    }
    memmove(&marks[k + 1], &marks[k], (n_marks - k) * sizeof(*marks));
    marks[k] = (host_mark){lo, hi};
    n_marks++;
    atomic_store(&marks_on, true);
out_unlock:
    pthread_mutex_unlock(&marks_mu);
    return st;
}

void gr__host_clear_allocations(void)
{
    pthread_mutex_lock(&marks_mu);
    atomic_store(&marks_on, false);
    free(marks);
    marks = NULL;
    n_marks = marks_cap = 0;
    pthread_mutex_unlock(&marks_mu);
}

/* Inside a mark: the mark. Outside: the gap between the marks around p, so that a range of
 * unmarked memory never runs into a marked allocation either. */
static bool host_span(const void *p, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t a = (uintptr_t)p;
    size_t k;

    *lo = 0;
    *hi = UINTPTR_MAX;
    if (!atomic_load(&marks_on))
        return true;
    pthread_mutex_lock(&marks_mu);
    k = mark_after(a);
    if (k < n_marks && marks[k].lo <= a) {
        *lo = marks[k].lo;
        *hi = marks[k].hi;
    } else {
        if (k > 0)
            *lo = marks[k - 1].hi;
        if (k < n_marks)
            *hi = marks[k].lo;
    }
    pthread_mutex_unlock(&marks_mu);
    return true;
}

/* What the CUDA driver would say of `it`'s copies when handed them: each copy's host range
 * inside one span (host_span), and none refused by the "copy" fault site. The worker's
 * staging buffer is graphrun's own single allocation, which neither refuses. */
static gr_status refused_copy(const gr_iteration *it, gr_fault_reach *reach,
                              gr_error_info *err)
{
    const gr_graph *g = it->graph;

    if (it->staged)
        return GR_OK;
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        const gr_node *node = &g->nodes[k];
        const void *src, *host;
        uintptr_t lo, hi;
        uint64_t bytes;
        void *dst;

        if (node->kind == GR_NODE_KERNEL)
            continue;
        gr__graph_node_copy(it, node, &dst, &src, &bytes);
        host = node->kind == GR_NODE_H2D ? src : (const void *)dst;
        host_span(host, &lo, &hi);
        if (gr__fault_hit(GR_FAULT_COPY)) {
            *reach = GR_REACH_REFUSED_COPY;
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, node->name,
                                 "host backend: copy of %llu bytes at %p refused (injected "
                                 "fault)", (unsigned long long)bytes, host);
        }
        if (bytes > hi - (uintptr_t)host) {
            *reach = GR_REACH_REFUSED_COPY;
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, node->name,
                                 "host backend: copy of %llu bytes at %p refused: it runs "
                                 "past its allocation, which ends at %p (as the CUDA driver "
                                 "refuses it: invalid value)",
                                 (unsigned long long)bytes, host, (void *)hi);
        }
    }
    return GR_OK;
}

/* A worker's iterations launched and not finished, oldest first (a streamed one already
 * run: ran). */
typedef struct host_worker {
    const gr_iteration *launched[GR_WORKER_SLOTS];
    bool ran[GR_WORKER_SLOTS];
    uint32_t n_launched;
} host_worker;

/* A streamed iteration's device copies: done as queued, so nothing is left to wait for. */
static int piece_queue(void *ctx, uint32_t part, void *dst, const void *src, uint64_t bytes)
{
    (void)ctx;
    (void)part;
    memcpy(dst, src, bytes);
    return 0;
}

static int piece_wait(void *ctx, uint32_t part)
{
    (void)ctx;
    (void)part;
    return 0;
}

static void piece_host_copy(void *ctx, void *dst, const void *src, uint64_t bytes)
{
    gr_worker *w = ctx;
    gr_copy c = {dst, src, bytes};

    gr__copier_copy(w->copier, &c, 1, w->copy_ends);
}

/* A streamed iteration's copies in (`in`) or out: those whose host side is DMA-ready as
 * they lie, the others through the staging buffer in GR_STREAM_PARTS parts, each a whole
 * number of pages, as the CUDA backend does them. */
static void stream_copies(gr_worker *w, const gr_iteration *it, bool in)
{
    gr_piece_ops ops = {w, piece_queue, piece_wait, piece_host_copy};
    uint64_t part = w->staging_bytes / GR_STREAM_PARTS / 4096 * 4096, direct = 0;
    const gr_copy *list = in ? it->h2d : it->d2h;
    uint32_t n = in ? it->n_h2d : it->n_d2h;

    for (uint32_t i = 0; i < n && i < 64; i++)
        if (w->env->host_ready(w->env, it->host_hold, in ? list[i].src : list[i].dst,
                               list[i].bytes)) {
            direct |= 1ull << i;
            memcpy(list[i].dst, list[i].src, list[i].bytes);
        }
    if (in)
        gr__pieces_in(&ops, w->staging, part, GR_STREAM_PARTS, list, n, direct);
    else
        gr__pieces_out(&ops, w->staging, part, GR_STREAM_PARTS, list, n, direct);
}

static gr_status host_worker_open(gr_worker *w, gr_error_info *err)
{
    host_worker *hw = calloc(1, sizeof(*hw));

    if (hw == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    w->backend_state = hw;
    return GR_OK;
}

static void host_worker_close(gr_worker *w)
{
    free(w->backend_state);
    w->backend_state = NULL;
}

/* Iteration `it`'s nodes, in order (its copies already checked: refused_copy). */
static gr_status host_execute(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                              gr_error_info *err)
{
    const gr_graph *g = it->graph;

    /* A lost host device was marked by someone else (a test): the runtime already knows. */
    *reach = GR_REACH_ITERATION;
    if (it->streamed) /* its copies are streamed around the kernels: none of its copy nodes */
        stream_copies(w, it, true);
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        const gr_node *node = &g->nodes[g->order[k]];

        /* Relaxed is enough: the flag guards no data, it only has to be seen soon. */
        if (atomic_load_explicit(&w->dev->lost, memory_order_relaxed))
            return gr__error_set(err, GR_ERR_DEVICE_LOST, GR_NO_INDEX, node->name,
                                 "host device %d was marked lost while this iteration ran",
                                 w->dev->ordinal);
        if (node->kind == GR_NODE_KERNEL) {
            gr_kernel_args a;

            gr__graph_node_args(it, node, &a);
            node->kernel->def.cpu(&a, node->kernel->def.user);
        } else if (!it->streamed) {
            const void *src;
            uint64_t bytes;
            void *dst;

            gr__graph_node_copy(it, node, &dst, &src, &bytes);
            memcpy(dst, src, bytes);
        }
    }
    if (it->streamed)
        stream_copies(w, it, false);
    return GR_OK;
}

static gr_status host_run(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                          gr_error_info *err)
{
    gr_status st;

    *reach = GR_REACH_ITERATION;
    if ((st = refused_copy(it, reach, err)) != GR_OK)
        return st;
    return host_execute(w, it, reach, err);
}

static gr_status host_launch(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                             gr_error_info *err)
{
    host_worker *hw = w->backend_state;
    gr_status st;

    *reach = GR_REACH_ITERATION;
    if ((st = refused_copy(it, reach, err)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < hw->n_launched; i++)
        if (hw->launched[i]->slot == it->slot)
            return gr__error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, NULL,
                                 "worker %u launched slot %u while it was in flight", w->id,
                                 it->slot);
    if (hw->n_launched == GR_WORKER_SLOTS)
        return gr__error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, NULL,
                             "worker %u launched more than %d units", w->id, GR_WORKER_SLOTS);
    if (it->streamed && (st = host_execute(w, it, reach, err)) != GR_OK)
        return st;
    hw->ran[hw->n_launched] = it->streamed;
    hw->launched[hw->n_launched++] = it;
    return GR_OK;
}

static gr_status host_finish(gr_worker *w, uint32_t slot, gr_fault_reach *reach,
                             gr_error_info *err)
{
    host_worker *hw = w->backend_state;
    const gr_iteration *it;
    bool ran;

    *reach = GR_REACH_ITERATION;
    if (hw->n_launched == 0 || hw->launched[0]->slot != slot)
        return gr__error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, NULL,
                             "worker %u finished slot %u out of turn", w->id, slot);
    it = hw->launched[0];
    ran = hw->ran[0];
    memmove(&hw->launched[0], &hw->launched[1], (hw->n_launched - 1) * sizeof(it));
    memmove(&hw->ran[0], &hw->ran[1], (hw->n_launched - 1) * sizeof(ran));
    hw->n_launched--;
    return ran ? GR_OK : host_execute(w, it, reach, err);
}

static gr_status host_upload(gr_worker *w, void *dst, const void *src, uint64_t bytes,
                             gr_fault_reach *reach, gr_error_info *err)
{
    *reach = GR_REACH_ITERATION;
    if (atomic_load_explicit(&w->dev->lost, memory_order_relaxed))
        return gr__error_set(err, GR_ERR_DEVICE_LOST, GR_NO_INDEX, NULL,
                             "host device %d was marked lost", w->dev->ordinal);
    memcpy(dst, src, bytes);
    return GR_OK;
}

static const char *host_kernel_missing(const gr_backend_env *env, const gr_kernel *k)
{
    (void)env;
    return k->def.cpu == NULL ? "has no CPU implementation" : NULL;
}

static bool host_streamed_copies(void)
{
    return true;
}

static bool host_dma_ready(const void *p)
{
    (void)p; /* the host backend copies with memcpy: any memory is as fast as any other */
    return true;
}

const gr_backend_ops gr__backend_host = {
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
    .upload = host_upload,
    .dma_ready = host_dma_ready,
    .host_span = host_span,
    .streamed_copies = host_streamed_copies,
    .pinned = NULL, /* memory is memory: gr_host_alloc gives ordinary pages */
};

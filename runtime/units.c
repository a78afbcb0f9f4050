/*
 * units.c - cutting a job into units (see units.h).
 *
 * The plan walks the tensors once, in order. A tensor of at least `batch_below` elements is
 * cut into the fewest equal chunks that each fit the unit limit and the pipelining size (the
 * staging limit instead when its memory is not DMA-ready); when it fits whole and is
 * DMA-ready it stays one direct unit, exactly as an unsplittable graph would run it. Smaller
 * tensors are packed, in order, into batches that end when the next tensor would overflow the
 * staging limit or GR_UNIT_MAX_TENSORS. A batch whose tensors lie back to back in DMA-ready
 * memory of one allocation (rows of one array, say) is one contiguous range and goes direct;
 * any other batch is scattered (each tensor copied where it lies) or staged. When nothing was
 * cut or packed the plan is dropped (identity), so the common case costs no memory.
 */
#include "runtime/units.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/base/fault.h"
#include "runtime/hostcache.h"

uint64_t gr__unit_staged_most(const gr_graph *g, uint64_t staging_bytes)
{
    uint64_t host_bytes = gr_graph_port_bytes(g, false, GR_ALL_PORTS, 1) +
                          gr_graph_port_bytes(g, true, GR_ALL_PORTS, 1);
    uint64_t most = staging_bytes / (host_bytes ? host_bytes : 1);

    return most ? most : 1;
}

gr_unit_limits gr__unit_limits(const gr_graph *g, uint64_t arena_bytes, uint32_t workers,
                               uint64_t staging_bytes, uint64_t batch_below_bytes,
                               uint64_t pipeline_bytes)
{
    uint64_t share = workers > 1 ? arena_bytes / workers : arena_bytes;
    uint64_t host_bytes = gr_graph_port_bytes(g, false, GR_ALL_PORTS, 1) +
                          gr_graph_port_bytes(g, true, GR_ALL_PORTS, 1);
    uint64_t group_elems, group_bytes;
    gr_unit_limits lim;

    /* Every buffer of a splittable graph is the tensor's size, each rounded up to
     * GR_BUFFER_ALIGN: whole groups (graph.h) fill the device memory exactly. */
    gr__graph_unit_group(g, &group_elems, &group_bytes);
    lim.max_elems = share / group_bytes * group_elems;
    if (lim.max_elems == 0) /* the share is too small: one unit at a time, of the arena */
        lim.max_elems = arena_bytes / group_bytes * group_elems;
    if (lim.max_elems == 0)
        lim.max_elems = 1;
    lim.pipe_elems = lim.max_elems;
    if (pipeline_bytes != 0 && host_bytes != 0 && pipeline_bytes / host_bytes < lim.max_elems)
        lim.pipe_elems = pipeline_bytes / host_bytes ? pipeline_bytes / host_bytes : 1;
    lim.stage_elems = gr__unit_staged_most(g, staging_bytes);
    if (lim.stage_elems > lim.max_elems)
        lim.stage_elems = lim.max_elems;
    /* A tensor's size, for batching, is its elements in its widest port's type. */
    lim.scatter = false; /* the runtime's to set: it knows the backend */
    lim.batch_below = batch_below_bytes / gr__graph_widest_port(g);
    lim.scatter_from = GR_SCATTER_FROM_BYTES / gr__graph_widest_port(g);
    lim.scatter_below = GR_SCATTER_BELOW_BYTES / gr__graph_widest_port(g);
    if (lim.scatter_below > lim.stage_elems)
        lim.scatter_below = lim.stage_elems;
    if (lim.batch_below > lim.stage_elems)
        lim.batch_below = lim.stage_elems;
    lim.spread = 4 * (workers ? workers : 1);
    lim.spread_floor = GR_SPREAD_FLOOR_BYTES / gr__graph_widest_port(g);
    lim.cut = 1;
    return lim;
}

static uint64_t whole_runs(uint64_t elems, uint64_t cut)
{
    return elems < cut ? cut : elems / cut * cut;
}

void gr__unit_limits_cut(gr_unit_limits *lim, uint64_t cut)
{
    if (cut <= 1)
        return;
    lim->cut = cut;
    lim->max_elems = whole_runs(lim->max_elems, cut);
    lim->pipe_elems = whole_runs(lim->pipe_elems, cut);
    lim->stage_elems = whole_runs(lim->stage_elems, cut);
}

static bool all_ready(const gr_backend_env *env, const struct gr_host_hold *hold,
                      const void *p, uint64_t bytes)
{
    (void)env, (void)hold, (void)p, (void)bytes;
    return true;
}

static bool none_ready(const gr_backend_env *env, const struct gr_host_hold *hold,
                       const void *p, uint64_t bytes)
{
    (void)env, (void)hold, (void)p, (void)bytes;
    return false;
}

const gr_backend_env gr__units_all_ready = {.host_ready = all_ready},
                     gr__units_none_ready = {.host_ready = none_ready};

/* Where one copy may reach on each port (inputs, then outputs): the span of the allocation
 * last asked about (env->host_span), kept while the tensors go on lying in it, so that a
 * run of tensors of one allocation costs one question, and tensors apart in memory none. */
typedef struct spans {
    uintptr_t lo[2 * GR_MAX_PORTS], hi[2 * GR_MAX_PORTS];
} spans;


/* Whether tensor b starts, on every port, right where tensor a ends, inside the allocation
 * a lies in: then one copy covers both. The driver refuses a copy that runs from one
 * allocation into the next even where the two lie back to back (two cudaHostAlloc calls,
 * PyTorch's pin_memory() blocks), so lying back to back is not enough. */
static bool one_range(const gr_graph *g, const gr_tensor *a, const gr_tensor *b,
                      const gr_backend_env *env, spans *sp)
{
    uint32_t ports = g->n_inputs + g->n_outputs;

    for (uint32_t q = 0; q < ports; q++)
        if (gr_graph_tensor_port_at(g, a, q) + gr_graph_tensor_port_bytes(g, a, q) !=
            gr_graph_tensor_port_at(g, b, q))
            return false;
    if (env->host_span == NULL)
        return true;
    for (uint32_t q = 0; q < ports; q++) {
        uintptr_t pa = gr_graph_tensor_port_at(g, a, q), pb = gr_graph_tensor_port_at(g, b, q);

        if ((pa < sp->lo[q] || pa >= sp->hi[q]) &&
            !env->host_span((const void *)pa, &sp->lo[q], &sp->hi[q])) {
            sp->lo[q] = sp->hi[q] = 0; /* unknown: nothing past the tensor */
            return false;
        }
        if (pb < sp->lo[q] || gr_graph_tensor_port_bytes(g, b, q) > sp->hi[q] - pb)
            return false;
    }
    return true;
}

static bool tensor_dma_ready(const gr_graph *g, const gr_tensor *t, const gr_backend_env *env,
                             const struct gr_host_hold *hold)
{
    for (uint32_t p = 0; p < g->n_inputs; p++)
        if (!env->host_ready(env, hold, t->in[p], gr_graph_port_bytes(g, false, p, t->elems)))
            return false;
    for (uint32_t p = 0; p < g->n_outputs; p++)
        if (!env->host_ready(env, hold, t->out[p], gr_graph_port_bytes(g, true, p, t->elems)))
            return false;
    return true;
}

/* Where each port of tensor t lies, as the registration cache sees it (env->host_class):
 * a batch that the DMA engine takes as it lies (direct or scattered) holds only tensors
 * whose ports lie alike, each port inside one entry the job holds registered (the same one
 * for a direct batch: one copy spans it) or all outside the cache; the first tensor's
 * memory stands for the rest only among those. */
typedef struct host_where {
    int cls[2 * GR_MAX_PORTS];
    uintptr_t key[2 * GR_MAX_PORTS];
} host_where;

static void where_of(const gr_graph *g, const gr_tensor *t, const gr_backend_env *env,
                     const struct gr_host_hold *hold, host_where *w)
{
    for (uint32_t p = 0; p < g->n_inputs + g->n_outputs; p++) {
        bool out = p >= g->n_inputs;
        uint32_t port = out ? p - g->n_inputs : p;

        w->cls[p] = env->host_class(env, hold, out ? t->out[port] : t->in[port],
                                    gr_graph_port_bytes(g, out, port, t->elems), &w->key[p]);
    }
}

/* Whether tensor t may join a batch whose first tensor lies as `first` does. */
static bool lies_alike(const gr_graph *g, const host_where *first, const host_where *t,
                       bool direct)
{
    for (uint32_t p = 0; p < g->n_inputs + g->n_outputs; p++)
        if (t->cls[p] == GR_HOST_OTHER || t->cls[p] != first->cls[p] ||
            (direct && t->key[p] != first->key[p]))
            return false;
    return true;
}

typedef struct plan {
    gr_unit *v;
    uint64_t n, cap;
} plan;

static bool push(plan *p, gr_unit u)
{
    if (p->n == p->cap) {
        uint64_t cap = p->cap ? 2 * p->cap : 256;
        gr_unit *v = gr__realloc(p->v, cap * sizeof(*v));

        if (v == NULL)
            return false;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = u;
    return true;
}

gr_status gr__units_plan(const gr_graph *g, const gr_tensor *t, uint64_t count,
                         const gr_unit_limits *lim, const gr_backend_env *env,
                         const struct gr_host_hold *hold, gr_unit **units, uint64_t *n_units,
                         uint32_t **pending)
{
    plan p = {0};
    gr_unit batch = {0};
    uint32_t *pend = NULL;
    bool identity = true;
    uint64_t batch_elems = lim->stage_elems; /* a batch's elements at most */
    uint64_t cut = lim->cut > 1 ? lim->cut : 1; /* units of whole runs of this many */
    bool cache = env->host_class != NULL;
    host_where first, here;
    spans sp;

    memset(&first, 0, sizeof(first));
    memset(&here, 0, sizeof(here));
    memset(&sp, 0, sizeof(sp));

    *units = NULL;
    *pending = NULL;
    *n_units = count;
    if (!g->splittable)
        return GR_OK;
    pend = gr__calloc(count, sizeof(*pend));
    if (pend == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    if (lim->spread > 1 && count > 1) {
        /* A short job of many tensors: smaller batches, so that the workers overlap. (A
         * tensor is not cut finer for it: its chunks would each be one more part that a
         * shutdown or a cancel can stop after the tensor started.) */
        uint64_t total = 0, per;

        for (uint64_t i = 0; i < count; i++)
            total += t[i].elems;
        per = total / lim->spread;
        if (per < lim->spread_floor)
            per = lim->spread_floor;
        if (per < batch_elems)
            batch_elems = per;
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t n = t[i].elems;
        bool ready = n >= lim->batch_below && tensor_dma_ready(g, &t[i], env, hold);
        /* batch_below 0 is the config's "never batch": no rule below packs tensors then. */
        bool batching = lim->batch_below != 0;
        /* A medium tensor, batched only where the DMA engine takes each where it lies. */
        bool medium = batching && lim->scatter && ready && n < lim->scatter_below &&
                      n <= lim->pipe_elems;
        /* A medium tensor in pageable memory, gathered with others into staged units of at
         * most half the staging buffer: staged alone, each paid a whole unit's fixed costs
         * for little data. On the H200 pageable 1 MiB tensors alone went at 7.8 GB/s each
         * way and gathered into full staging buffers at 20.6; 16 MiB ones alone at 24.7
         * and two to a full buffer at 16.7, on another machine (pageable copies vary that
         * much between machines too: docs/PERFORMANCE.md): hence the cautious half. */
        bool pageable_medium = batching && n >= lim->batch_below && !ready &&
                               4 * n <= lim->stage_elems;
        bool contiguous;

        if (n >= lim->batch_below && !medium && !pageable_medium) {
            uint64_t limit = ready ? lim->pipe_elems : lim->stage_elems;
            uint64_t chunks = (n + limit - 1) / limit;

            if (batch.tensors && !push(&p, batch))
                goto out_nomem;
            batch = (gr_unit){0};
            if (chunks > 1 || !ready)
                identity = false;
            for (uint64_t c = 0; c < chunks; c++) {
                /* Even chunks of whole runs (the run divides n and the limit). */
                uint64_t runs = n / cut;
                uint64_t first = runs * c / chunks * cut, last = runs * (c + 1) / chunks * cut;
                gr_unit u = {i, first, last - first, 1, !ready, false};

                if (!push(&p, u))
                    goto out_nomem;
            }
            pend[i] = (uint32_t)chunks;
            continue;
        }
        identity = false;
        /* Joins a direct batch's one range (asked only of a batch that copies as it lies). */
        contiguous = batch.tensors != 0 && !batch.staged && !batch.scattered &&
                     one_range(g, &t[i - 1], &t[i], env, &sp);
        if (cache && (batch.tensors == 0 || !batch.staged))
            where_of(g, &t[i], env, hold, &here);
        if (batch.tensors != 0 && !batch.staged && cache &&
            !lies_alike(g, &first, &here, contiguous)) {
            if (!push(&p, batch)) /* lies otherwise: a batch of its own */
                goto out_nomem;
            batch = (gr_unit){0};
        }
        if (batch.tensors != 0 &&
            (batch.tensors == GR_UNIT_MAX_TENSORS || batch.elems + n > batch_elems ||
             (pageable_medium && batch.elems + n > lim->stage_elems / 2) ||
             (medium && batch.staged) || (pageable_medium && !batch.staged) ||
             (batch.scattered && n < lim->scatter_from))) {
            if (!push(&p, batch))
                goto out_nomem;
            batch = (gr_unit){0};
        }
        if (batch.tensors == 0) {
            /* Direct while the batch is one contiguous range of DMA-ready memory. */
            bool first_ready = n >= lim->batch_below ? ready  /* asked above already */
                                                     : tensor_dma_ready(g, &t[i], env, hold);

            batch = (gr_unit){i, 0, 0, 0, !first_ready, false};
            if (cache)
                first = here;
        } else if (!batch.staged && !batch.scattered && !contiguous) {
            /* DMA-ready memory apart (or in another allocation): the DMA engine can take
             * each piece where it lies.
             * The first tensor's memory stands for the batch's: tensors of one job come
             * from one allocator (and a pageable one among them is still copied right by
             * the driver, only slower), where asking the driver about each one would cost
             * about as much as copying a small tensor. */
            if (lim->scatter && n >= lim->scatter_from)
                batch.scattered = true;
            else
                batch.staged = true;
        }
        batch.elems += n;
        batch.tensors++;
        pend[i] = 1;
    }
    if (batch.tensors && !push(&p, batch))
        goto out_nomem;
    if (identity) { /* every tensor one direct unit, as given */
        free(p.v);
        free(pend);
        return GR_OK;
    }
    *units = p.v;
    *n_units = p.n;
    *pending = pend;
    return GR_OK;

out_nomem:
    free(p.v);
    free(pend);
    return GR_ERR_OUT_OF_MEMORY;
}

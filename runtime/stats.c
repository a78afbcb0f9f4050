/*
 * stats.c - statistics: the counters (stats.h) and gr_runtime_stats_get.
 *
 * Why a snapshot is right without locks: every cell is an atomic that only grows (written
 * by one worker with load-and-store, or by anyone with an atomic add), so each value read is
 * one the cell really had. A snapshot is taken field by field while work goes on, as
 * graphrun.h says; after gr_job_wait has returned for a job, that job's counts are all in,
 * because every count happens before the index's end is published (acq_rel on the job's
 * `ended` counter, then the job's lock), which the wait observes.
 *
 * Histograms: a duration goes to bucket floor(log2(us)) + 1 (0 under 1 us), a count of
 * leading zeros, no loop, no division but the one by 1000.
 */
#include "runtime/stats.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "runtime/runtime.h"

/* The calling thread's block, when it is a worker (NULL otherwise). */
static __thread gr_counters *thread_counters;

gr_status gr__stats_create(uint32_t n_workers, gr_stats_state **out)
{
    /* aligned_alloc: gr_counters is over-aligned (a cache line), which calloc ignores; the
     * state holds one too. Sizes are multiples of the alignment, as aligned_alloc wants. */
    gr_stats_state *s = aligned_alloc(_Alignof(gr_stats_state), sizeof(*s));
    size_t bytes = (size_t)(n_workers ? n_workers : 1) * sizeof(gr_counters);

    *out = NULL;
    if (s == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    memset(s, 0, sizeof(*s));
    s->workers = aligned_alloc(_Alignof(gr_counters), bytes);
    if (s->workers == NULL) {
        free(s);
        return GR_ERR_OUT_OF_MEMORY;
    }
    memset(s->workers, 0, bytes);
    s->n_workers = n_workers;
    s->shared.owner = s;
    for (uint32_t i = 0; i < n_workers; i++)
        s->workers[i].owner = s;
    *out = s;
    return GR_OK;
}

void gr__stats_destroy(gr_stats_state *s)
{
    if (s == NULL)
        return;
    free(s->workers);
    free(s);
}

void gr__stats_bind_worker(gr_stats_state *s, uint32_t worker)
{
    thread_counters = &s->workers[worker];
}

void gr__stats_unbind(void)
{
    thread_counters = NULL;
}

uint32_t gr__stats_bucket(int64_t ns)
{
    uint64_t us = ns > 0 ? (uint64_t)ns / 1000 : 0;
    uint32_t b = us == 0 ? 0 : 64 - (uint32_t)__builtin_clzll(us);

    return b < GR_HISTOGRAM_BUCKETS ? b : GR_HISTOGRAM_BUCKETS - 1;
}

void gr__stats_observe(gr_hist_cells *h, int64_t ns)
{
    gr__stats_add(&h->sum_ns, ns > 0 ? (uint64_t)ns : 0);
    gr__stats_add(&h->buckets[gr__stats_bucket(ns)], 1);
}

void gr__stats_tensor_ended(gr_stats_state *s, gr_index_state to)
{
    gr_counters *c = thread_counters;
    _Atomic uint64_t *cell;
    bool mine = c != NULL && c->owner == s;

    if (!mine)
        c = &s->shared;
    cell = to == GR_INDEX_DONE     ? &c->tensors_done
           : to == GR_INDEX_FAILED ? &c->tensors_failed
                                   : &c->tensors_canceled;
    if (mine)
        gr__stats_add(cell, 1);
    else
        atomic_fetch_add_explicit(cell, 1, memory_order_relaxed); /* a count, no order */
}

void gr__stats_copied(gr_counters *c, const gr_graph *g, uint64_t elems)
{
    uint64_t in = 0, out = 0;

    /* Every copy node moves one tensor's worth (graph.h), whatever its buffer's ratio. */
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        if (g->nodes[k].kind == GR_NODE_H2D)
            in++;
        else if (g->nodes[k].kind == GR_NODE_D2H)
            out++;
    }
    gr__stats_add(&c->bytes_h2d, in * elems * sizeof(float));
    gr__stats_add(&c->bytes_d2h, out * elems * sizeof(float));
}

uint64_t gr__stats_job_submitted(gr_stats_state *s)
{
    atomic_fetch_add_explicit(&s->jobs_submitted, 1, memory_order_relaxed);
    return atomic_fetch_add_explicit(&s->last_job_id, 1, memory_order_relaxed) + 1;
}

void gr__stats_job_completed(gr_stats_state *s, gr_status result)
{
    atomic_fetch_add_explicit(&s->jobs_completed, 1, memory_order_relaxed);
    if (result != GR_OK)
        atomic_fetch_add_explicit(&s->jobs_failed, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------------------------------- */
/* Snapshots.                                                                             */

static uint64_t load(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* The count is the sum of the buckets as read, so the two always agree (Prometheus wants
 * the +Inf bucket equal to the count); sum_ns is read apart and may be a moment off. */
static void add_hist(gr_histogram *h, const gr_hist_cells *c)
{
    h->sum_ns += load(&c->sum_ns);
    for (uint32_t b = 0; b < GR_HISTOGRAM_BUCKETS; b++) {
        uint64_t n = load(&c->buckets[b]);

        h->buckets[b] += n;
        h->count += n;
    }
}

/* The end of the first version of gr_stats: callers must know at least that much. */
#define STATS_V1_SIZE (offsetof(gr_stats, iteration) + sizeof(gr_histogram))

gr_status gr_runtime_stats_get(const gr_runtime *handle, uint32_t device, gr_stats *out)
{
    const gr_stats_state *st;
    const gr_device *dev;
    gr_status status;
    gr_runtime *rt;
    gr_stats s;

    if (out == NULL || out->magic != GR_STATS_MAGIC || out->struct_size < STATS_V1_SIZE)
        return GR_ERR_INVALID_ARGUMENT;
    if ((rt = gr__runtime_get(handle, &status)) == NULL)
        return status;
    if (device >= rt->n_devices)
        return GR_ERR_INVALID_ARGUMENT;
    st = rt->stats;
    dev = &rt->devices[device];
    memset(&s, 0, sizeof(s));
    s.struct_size = out->struct_size;
    s.magic = GR_STATS_MAGIC;

    s.device_count = rt->n_devices;
    s.devices_lost = atomic_load_explicit(&rt->devices_lost, memory_order_relaxed);
    s.jobs_submitted = load(&st->jobs_submitted);
    s.jobs_completed = load(&st->jobs_completed);
    s.jobs_failed = load(&st->jobs_failed);
    s.nodevice_failed = load(&st->shared.tensors_failed);
    s.nodevice_canceled = load(&st->shared.tensors_canceled);
    s.staging_pageable = load(&rt->pinned_fallbacks);

    s.device = device;
    s.lost = atomic_load_explicit(&dev->lost, memory_order_relaxed) ? 1 : 0;
    s.workers = rt->cfg.workers_per_device;
    s.workers_retired = atomic_load_explicit(&dev->workers_retired, memory_order_relaxed);
    for (uint32_t i = 0; i < rt->n_workers; i++) {
        const gr_counters *c = &st->workers[i];

        if (rt->workers[i].dev != dev)
            continue;
        s.tensors_done += load(&c->tensors_done);
        s.tensors_failed += load(&c->tensors_failed);
        s.tensors_canceled += load(&c->tensors_canceled);
        s.bytes_h2d += load(&c->bytes_h2d);
        s.bytes_d2h += load(&c->bytes_d2h);
        add_hist(&s.budget_wait, &c->budget_wait);
        add_hist(&s.iteration, &c->iteration);
    }
    s.iterations_done = load(&dev->iterations_done);
    s.iterations_failed = load(&dev->iterations_failed);
    s.graph_instantiations = load(&dev->graph_instantiations);
    s.graph_updates = load(&dev->graph_updates);
    s.budget_bytes = gr_budget_capacity(dev->budget);
    s.budget_in_use = gr_budget_in_use(dev->budget);
    s.budget_peak = gr_budget_peak(dev->budget);

    memcpy(out, &s, out->struct_size < sizeof(s) ? out->struct_size : sizeof(s));
    return GR_OK;
}

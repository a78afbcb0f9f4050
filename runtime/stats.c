/*
 * stats.c - statistics: the counters (stats.h). The snapshots that add them up are in
 * introspect.c.
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

void gr__stats_tensors_ended(gr_stats_state *s, uint64_t done, uint64_t failed,
                             uint64_t canceled)
{
    gr_counters *c = thread_counters;
    const uint64_t n[3] = {done, failed, canceled};

    if (c != NULL && c->owner == s) {
        _Atomic uint64_t *cells[3] = {&c->tensors_done, &c->tensors_failed,
                                      &c->tensors_canceled};

        for (int k = 0; k < 3; k++)
            if (n[k])
                gr__stats_add(cells[k], n[k]);
    } else {
        _Atomic uint64_t *cells[3] = {&s->shared.tensors_done, &s->shared.tensors_failed,
                                      &s->shared.tensors_canceled};

        for (int k = 0; k < 3; k++)
            if (n[k]) /* a count, no order */
                atomic_fetch_add_explicit(cells[k], n[k], memory_order_relaxed);
    }
}

void gr__stats_copied(gr_counters *c, const gr_graph *g, uint64_t elems)
{
    uint64_t in = 0, out = 0;

    /* Every copy node moves one tensor's worth of its port (graph.h), whatever its buffer's
     * ratio. */
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        const gr_node *n = &g->nodes[k];

        if (n->kind == GR_NODE_H2D)
            in += gr_graph_port_bytes(g, false, n->port, elems);
        else if (n->kind == GR_NODE_D2H)
            out += gr_graph_port_bytes(g, true, n->port, elems);
    }
    gr__stats_add(&c->bytes_h2d, in);
    gr__stats_add(&c->bytes_d2h, out);
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

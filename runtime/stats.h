/*
 * stats.h - the statistics counters behind gr_runtime_stats_get (graphrun.h: gr_stats).
 *
 * Each worker counts in a block of its own (one cache line or more, never shared), and is
 * the only thread that writes it: its updates are a relaxed load and a relaxed store, no
 * read-modify-write and no cache line bouncing between workers, which keeps counting off
 * the hot path of a million small tensors a second. Threads that are not workers (cancel,
 * the deadline thread, shutdown, submit) count in one shared block with atomic adds; they
 * end tensors only when a job stops, which is rare. A snapshot adds the blocks up with
 * relaxed loads: each field is exact for the moment it was read.
 *
 * The thread's block is found through a thread-local pointer that a worker sets when it
 * starts; it names the runtime it belongs to, so a worker of one runtime that ends another
 * runtime's index (say, canceling a job from a completion callback) counts it there as a
 * non-worker.
 */
#ifndef GR_STATS_H
#define GR_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include <graphrun.h>

struct gr_graph;

typedef struct gr_hist_cells {
    _Atomic uint64_t sum_ns;
    _Atomic uint64_t buckets[GR_HISTOGRAM_BUCKETS];
} gr_hist_cells;

typedef struct gr_counters {
    _Alignas(64) const struct gr_stats_state *owner;
    _Atomic uint64_t tensors_done, tensors_failed, tensors_canceled;
    _Atomic uint64_t bytes_h2d, bytes_d2h;
    gr_hist_cells budget_wait, iteration;
    /* Iterations that succeeded, by how their host memory was copied. */
    _Atomic uint64_t units_direct, units_staged, units_scattered;
    _Atomic uint64_t units_streamed;
    _Atomic uint64_t units_overlapped; /* launched with the worker's previous one in flight */
    _Atomic uint64_t copies_refused; /* units run again staged (worker.c: unit_restage) */
    _Atomic uint64_t constants_copied, constant_bytes; /* jobs' constants in (constants.h) */
} gr_counters;

typedef struct gr_stats_state {
    _Atomic uint64_t jobs_submitted, jobs_completed, jobs_failed;
    _Atomic uint64_t last_job_id;
    gr_counters shared; /* threads that are not this runtime's workers */
    uint32_t n_workers;
    gr_counters *workers; /* [n_workers], indexed by worker id */
} gr_stats_state;

/* Counters for n_workers workers, all zero. GR_ERR_OUT_OF_MEMORY. */
gr_status gr__stats_create(uint32_t n_workers, gr_stats_state **out);
void gr__stats_destroy(gr_stats_state *s); /* NULL is a no-op */

/* On worker `worker`'s own thread, before its first task: its block becomes the thread's.
 * Unbind before the thread ends. */
void gr__stats_bind_worker(gr_stats_state *s, uint32_t worker);
void gr__stats_unbind(void);

/* The counters of worker `worker`: to be written only by its own thread. */
static inline gr_counters *gr__stats_worker(gr_stats_state *s, uint32_t worker)
{
    return &s->workers[worker];
}

/* Single-writer add: for the calling worker's own block only. */
static inline void gr__stats_add(_Atomic uint64_t *c, uint64_t v)
{
    /* relaxed: only this thread writes the cell; readers want each value, not an order. */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

/* One observation of `ns` nanoseconds into the calling worker's own histogram. */
void gr__stats_observe(gr_hist_cells *h, int64_t ns);

/* Bucket of a duration (graphrun.h: gr_histogram). */
uint32_t gr__stats_bucket(int64_t ns);

/* Indices of jobs of this runtime ended, `done`, `failed` and `canceled` of them, on the
 * calling thread. Any thread. */
void gr__stats_tensors_ended(gr_stats_state *s, uint64_t done, uint64_t failed,
                             uint64_t canceled);

/* An iteration of graph `g` over `elems` elements succeeded on the calling worker: count
 * the bytes its copy nodes moved. */
void gr__stats_copied(gr_counters *c, const struct gr_graph *g, uint64_t elems);

/* A job was accepted (returns its id), or completed with `result`. Any thread. */
uint64_t gr__stats_job_submitted(gr_stats_state *s);
void gr__stats_job_completed(gr_stats_state *s, gr_status result);

#endif /* GR_STATS_H */

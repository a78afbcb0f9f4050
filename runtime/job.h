/*
 * job.h - jobs as the runtime sees them: per-index state machine, completion, references.
 *
 * Index states move only forward, each move a compare-and-swap, so an index ends exactly
 * once however workers, cancel, deadline and shutdown race:
 *
 *   QUEUED --worker--> RUNNING --worker--> DONE | FAILED | CANCELED
 *   QUEUED --cancel, deadline, shutdown, submit that cannot queue--> CANCELED | FAILED
 *   RUNNING --worker, whose device was lost before the iteration reached it--> QUEUED
 *
 * The one move back is made by the worker that moved the index to RUNNING, which alone may
 * end it from there, and only for a whole-tensor unit whose task it then puts back in the
 * ring for another device's workers (gr__job_unstart_piece).
 *
 * Completion: when the last index ends, the callback runs, then the job is complete, its
 * waiters wake and its completion descriptor (if asked for) becomes readable, so a wait
 * that returns, or a poll that sees the descriptor readable, has seen the callback's effects.
 *
 * References: the caller's handle, one while the job is incomplete, and one per task in the
 * ring (a canceled index's task may still be queued after the job completed). The job is
 * freed when the last one goes.
 */
#ifndef GR_JOB_H
#define GR_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include <graphrun.h>
#include "runtime/constants.h"
#include "runtime/hostcache.h"
#include "runtime/core/ring.h"
#include "runtime/units.h"

struct gr_runtime;

struct gr_job {
    struct gr_runtime *rt;
    uint64_t id;           /* gr_job_id: the runtime's count of accepted jobs */
    gr_graph *graph;       /* a reference */
    gr_tensor *tensors;    /* the caller's array, copied */
    uint64_t count;
    int64_t deadline_ns;   /* GR_NO_DEADLINE for none */
    gr_job_callback on_complete;
    void *user;

    /* Per index: gr_index_state in the low byte, and once ended its gr_status in the high
     * byte, changed together by one compare-and-swap. */
    _Atomic uint16_t *slot;

    /* 0 while running; once stopped, the status its queued indices end with
     * (GR_ERR_CANCELED, GR_ERR_TIMEOUT or GR_ERR_SHUTDOWN) and every wait returns. */
    gr_cancel_flag stop;

    _Atomic uint64_t started;       /* QUEUED -> RUNNING moves */
    _Atomic uint64_t ended_running; /* ends from RUNNING */
    _Atomic uint64_t ended_queued;  /* ends from QUEUED (never ran) */
    _Atomic uint64_t done, failed, canceled;
    _Atomic uint64_t ended;     /* done + failed + canceled, the completion trigger */
    _Atomic uint64_t anomalies; /* attempts to end an index twice: must stay 0 */
    _Atomic uint64_t refs;

    /* Units (units.h): what each task covers. NULL when every unit is one whole tensor
     * (unit k is index k). Otherwise `pending` counts the units of each index still to
     * finish, and `piece_failed` holds the first failure among them (0 while none). */
    gr_unit *units;
    uint64_t n_units;
    /* The registration cache's entries its host memory lies in (hostcache.h), kept from
     * eviction until every index has ended. */
    gr_host_hold host_hold;
    /* The graph's constants (constants.h): their contents as the caller gave them, and
     * where they stand on each device (consts[device id]; NULL without constants). */
    const void *const_src[GR_MAX_CONSTS];
    gr_const_block *consts;
    _Atomic uint32_t *pending;
    _Atomic uint8_t *piece_failed;
    uintptr_t handle;        /* what the caller and the callback see (handle.h) */
    _Atomic uint32_t handle_refs; /* the caller's and the incomplete job's (job.c) */
    atomic_bool handle_held; /* the caller still holds the handle gr_job_submit returned */

    pthread_mutex_t mu; /* guards the fields below */
    pthread_cond_t cond;
    bool all_ended;        /* every index has ended */
    bool complete;         /* ... and the callback has returned: waiters may go */
    bool submitting;       /* gr_job_submit has not returned yet */
    bool callback_pending; /* all ended while submitting: submit runs the callback */
    bool in_callback;      /* the callback is running, on callback_thread */
    pthread_t callback_thread;
    bool has_error;
    gr_error_info first_error;
    /* The job's eventfd (gr_job_completion_fd), made on the first call, -1 before and once
     * gr_job_destroy has closed it. Written (and closed) only under mu, so job_finish never
     * writes to a number that a destroy has closed and the process has since reused. */
    int completion_fd;

    /* gr_job_options.notify: queued for gr_runtime_reap once complete. Set before the job
     * is shared. reap_next, reap_prev and reap_queued are guarded by the runtime's reap_mu. */
    bool notify;
    bool reap_queued;
    struct gr_job *reap_next, *reap_prev;

    /* The runtime's list of live jobs, guarded by the runtime's mu. */
    struct gr_job *live_next, *live_prev;
    bool tracked;
};

/* Move index i from `from` to the terminal state for `st` (GR_OK: DONE; CANCELED or
 * SHUTDOWN: CANCELED; else FAILED). Records the first error (detail may be NULL) and
 * completes the job with its last index. Returns false when the index was not in `from`:
 * someone else moved it first. Any thread; takes no runtime lock while calling back. */
bool gr__job_end_index(gr_job *job, uint64_t i, gr_index_state from, gr_status st,
                       const gr_error_info *detail);

/* The unit a task covers. */
void gr__job_unit(const gr_job *job, uint64_t unit, gr_unit *out);

/* A unit that never ran (its task could not be queued, was put back and refused, or was
 * left in the ring at shutdown) ends with `st`: its whole-tensor index ends from QUEUED,
 * or each of its parts finishes as failed with `st` (an index that another unit started
 * then ends once that unit is done too). Any thread. */
void gr__job_drop_unit(gr_job *job, uint64_t unit, gr_status st);

/* A unit covering the n indices from `index` starts: each moves QUEUED -> RUNNING if this
 * is its first unit. live[k] says whether the unit must do index + k's part (false when
 * the index has already ended, or an earlier part of it failed); returns how many must.
 * The job's shared counters take one add for them all (every worker's units contend for
 * them). */
uint32_t gr__job_start_pieces(gr_job *job, uint64_t index, uint32_t n, uint8_t *live);

/* Undo gr__job_start_pieces for index i, covered by this one unit alone (the job has no
 * unit plan): RUNNING -> QUEUED, before the iteration has touched any device. Only the worker
 * that started it may call this, and it must queue the task again (or end the index). For a
 * job with a unit plan it does nothing: the index stays RUNNING, and whichever worker takes
 * the unit again does its part (gr__job_start_pieces lets it). */
void gr__job_unstart_piece(gr_job *job, uint64_t i);

/* A unit's parts of the n indices from `index` are over: live[k] is what
 * gr__job_start_pieces said for index + k (NULL: all live), `st` how the unit went. The
 * last part of an index to finish ends it: done if every part was, else with the first
 * part's failure. The job's shared counters take one add per kind of end for them all,
 * and the job completes after the last of them, if they were its last. */
void gr__job_finish_pieces(gr_job *job, uint64_t index, uint32_t n, const uint8_t *live,
                           gr_status st, const gr_error_info *detail);

/* Stop the job: its queued indices end with `why`, every wait on its behalf wakes. The
 * first stop wins; later ones do nothing. Any thread. */
void gr__job_stop(gr_job *job, gr_status why);

void gr__job_unref(gr_job *job);

/* The job behind a live handle (NULL for a stale one), for tests and tools that look
 * inside. */
gr_job *gr__job_from_handle(const gr_job *handle);

/* Attempts to end an index that was already ended: a broken invariant if nonzero. Takes
 * the caller's handle. */
uint64_t gr__job_anomalies(const gr_job *handle);

#endif /* GR_JOB_H */

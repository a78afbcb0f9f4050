/*
 * job.c - job submission, validation, the per-index state machine, completion, waiting.
 *
 * Exactly once: an index ends by one compare-and-swap of its slot (state and status
 * together) from QUEUED or RUNNING to a terminal state; whoever loses the race does nothing.
 * Only the worker that moved an index to RUNNING may end it from there, so a failed CAS from
 * RUNNING is a broken invariant and is counted in `anomalies`.
 *
 * Completion: the thread whose end makes `ended` reach `count` runs the callback with no
 * lock held, then marks the job complete and wakes its waiters. If gr_job_submit is still
 * queuing (the job can finish, or be stopped, while submit sleeps on a full ring), that is
 * left to submit, which does it after storing the handle, so a callback never sees a job
 * whose submit has not returned it.
 *
 * Handles: the caller (and the callback) see a job only through its generational handle
 * (handle.h), given back once the job is complete and the caller has destroyed it, so a
 * call with the handle of a destroyed job is refused with GR_ERR_INVALID_USAGE instead of
 * reading freed memory. Public functions take
 * `handle` and look the job up; everything inside works on the job itself.
 *
 * Completion descriptor: an eventfd made on demand (gr_job_completion_fd). Its counter is
 * 1 exactly when `complete` is set: made with 1 if the job is already complete, else with 0
 * and written 1 by job_finish in the same critical section that sets `complete`. Both
 * happen under job->mu, as does the close in gr_job_destroy, so the descriptor is
 * readable only once gr_job_wait would return at once, and job_finish never writes to a
 * closed (possibly reused) descriptor number.
 *
 * Completion queue (gr_runtime_reap): a notify job is appended to the runtime's queue by
 * job_finish in the critical section of job->mu that sets `complete`, so a reaped job
 * obeys the descriptor's rule above, and a job whose wait has returned is queued already.
 * The queue, its links in each job and the runtime's eventfd are guarded by rt->reap_mu,
 * a leaf lock (taken inside job->mu, or alone); the
 * eventfd's counter is 1 exactly while the queue is not empty (written on the push into
 * an empty queue, read back by whatever empties it). The queue holds no reference: a job
 * in it is kept alive by its caller's handle, and gr_job_destroy, after giving up
 * handle_held, takes it off; job_finish queues a job only while handle_held is set, read
 * under rt->reap_mu, so a job destroyed first is never queued.
 *
 * Lock order: job->mu, then rt->reap_mu, then nothing (the runtime's mu is taken only
 * without job->mu).
 */
#include "runtime/job.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/base/fault.h"
#include "runtime/handle.h"
#include "runtime/runtime.h"
#include "runtime/base/sync.h"

#define SLOT(state, status) ((uint16_t)((state) | ((unsigned)(status) << 8)))

/* Completion callbacks running on this thread (gr_job_submit refuses inside one). */
static __thread unsigned callback_depth;

static gr_index_state terminal_state(gr_status st)
{
    if (st == GR_OK)
        return GR_INDEX_DONE;
    if (st == GR_ERR_CANCELED || st == GR_ERR_SHUTDOWN)
        return GR_INDEX_CANCELED;
    return GR_INDEX_FAILED;
}

static const char *stop_message(gr_status why)
{
    switch (why) {
    case GR_ERR_CANCELED:
        return "job canceled before this index started";
    case GR_ERR_TIMEOUT:
        return "job deadline passed before this index finished";
    case GR_ERR_SHUTDOWN:
        return "runtime shut down before this index started";
    default:
        return gr_status_str(why);
    }
}

/* The job's memory, once nothing uses it (job_free) or it was never shared (job_alloc). */
static void job_free_memory(gr_job *job)
{
    free(job->consts);
    free(job->units);
    free(job->pending);
    free(job->piece_failed);
    free(job->slot);
    free(job->tensors);
    free(job);
}

static void job_free(gr_job *job)
{
    gr_runtime *rt = job->rt;

    gr__graph_unref(job->graph);
    pthread_cond_destroy(&job->cond);
    pthread_mutex_destroy(&job->mu);
    job_free_memory(job);
    gr__runtime_unref(rt);
}

void gr__job_unref(gr_job *job)
{
    /* acq_rel: the last reference must see every other thread's writes before freeing. */
    if (atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) == 1)
        job_free(job);
}

/* The handle lives while the caller holds it or the job is incomplete (its callback uses
 * it): the last of the two gives it back, so once a complete job is destroyed its handle
 * is refused at once, however long the job's memory lingers. */
static void drop_handle(gr_job *job)
{
    if (atomic_fetch_sub_explicit(&job->handle_refs, 1, memory_order_acq_rel) == 1)
        gr__handle_release(job->handle);
}

static void job_ref(gr_job *job)
{
    atomic_fetch_add_explicit(&job->refs, 1, memory_order_relaxed);
}

static gr_status job_result_locked(const gr_job *job)
{
    return job->has_error ? job->first_error.status : GR_OK;
}

/* The counter from 0 to 1: the descriptor becomes readable. It cannot block (the counter
 * is far from its maximum) and cannot fail on a descriptor we own. */
static void signal_completion_fd(int fd)
{
    uint64_t one = 1;

    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

/* Empty the eventfd: not readable until the next signal. Nonblocking: a counter already 0
 * just says EAGAIN. */
static void drain_completion_fd(int fd)
{
    uint64_t v;

    while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
}

/* Append a complete notify job to the runtime's completion queue, unless its handle was
 * given back (nobody could reap it). job->mu held. */
static void reap_push_locked(gr_job *job)
{
    gr_runtime *rt = job->rt;

    pthread_mutex_lock(&rt->reap_mu);
    if (atomic_load(&job->handle_held)) {
        job->reap_prev = rt->reap_tail;
        job->reap_next = NULL;
        if (rt->reap_tail != NULL)
            rt->reap_tail->reap_next = job;
        else
            rt->reap_head = job;
        rt->reap_tail = job;
        job->reap_queued = true;
        if (job->reap_prev == NULL && rt->completion_fd >= 0)
            signal_completion_fd(rt->completion_fd);
    }
    pthread_mutex_unlock(&rt->reap_mu);
}

/* Take a job off the completion queue; rt->reap_mu held. */
static void reap_unlink_locked(gr_runtime *rt, gr_job *job)
{
    if (job->reap_prev != NULL)
        job->reap_prev->reap_next = job->reap_next;
    else
        rt->reap_head = job->reap_next;
    if (job->reap_next != NULL)
        job->reap_next->reap_prev = job->reap_prev;
    else
        rt->reap_tail = job->reap_prev;
    job->reap_next = job->reap_prev = NULL;
    job->reap_queued = false;
    if (rt->reap_head == NULL && rt->completion_fd >= 0)
        drain_completion_fd(rt->completion_fd);
}

/* Run the callback (if any), then mark the job complete and wake its waiters, then drop the
 * reference held while incomplete. */
static void job_finish(gr_job *job, gr_status result)
{
    gr_runtime *rt = job->rt;

    /* Counted and logged before the waiters wake, so a wait that returns sees the count. */
    gr__stats_job_completed(rt->stats, result);
    GR_LOG(&rt->log, GR_LOG_DEBUG,
           "job %llu complete: %s (%llu done, %llu failed, %llu canceled of %llu)",
           (unsigned long long)job->id, gr_status_str(result),
           (unsigned long long)atomic_load(&job->done),
           (unsigned long long)atomic_load(&job->failed),
           (unsigned long long)atomic_load(&job->canceled), (unsigned long long)job->count);
    if (job->on_complete) {
        pthread_mutex_lock(&job->mu);
        job->in_callback = true;
        job->callback_thread = pthread_self();
        pthread_mutex_unlock(&job->mu);
        callback_depth++;
        job->on_complete((gr_job *)job->handle, result, job->user);
        callback_depth--;
    }
    drop_handle(job); /* before the waiters wake: a destroy right after a wait releases it */
    pthread_mutex_lock(&job->mu);
    job->in_callback = false;
    job->complete = true;
    pthread_cond_broadcast(&job->cond);
    if (job->completion_fd >= 0)
        signal_completion_fd(job->completion_fd);
    /* With `complete`, under job->mu: a reaped job's wait answers at once, and a wait that
     * returned finds the job queued already. */
    if (job->notify)
        reap_push_locked(job);
    pthread_mutex_unlock(&job->mu);
    gr__runtime_job_finished(rt); /* the job's runtime reference keeps rt alive here */
    gr__job_unref(job);
}

/* The last index has ended. */
static void job_all_ended(gr_job *job)
{
    bool deferred;
    gr_status result;

    gr__runtime_untrack_job(job->rt, job);
    /* No iteration of the job copies any more: its registered ranges may be evicted, and
     * its constants leave the devices. */
    gr__host_cache_release(job->rt->host_cache, &job->host_hold, false);
    gr__const_release_job(job);
    pthread_mutex_lock(&job->mu);
    job->all_ended = true;
    result = job_result_locked(job);
    deferred = job->submitting;
    if (deferred)
        job->callback_pending = true;
    pthread_mutex_unlock(&job->mu);
    if (!deferred)
        job_finish(job, result);
}

void gr__job_unit(const gr_job *job, uint64_t unit, gr_unit *out)
{
    if (job->units != NULL) {
        *out = job->units[unit];
        return;
    }
    out->index = unit;
    out->offset = 0;
    out->elems = job->tensors[unit].elems;
    out->tensors = 1;
    out->staged = false;
    out->scattered = false;
}

void gr__job_drop_unit(gr_job *job, uint64_t unit, gr_status st)
{
    gr_unit u;

    gr__job_unit(job, unit, &u);
    if (job->units == NULL) {
        gr__job_end_index(job, u.index, GR_INDEX_QUEUED, st, NULL);
        return;
    }
    gr__job_finish_pieces(job, u.index, u.tensors, NULL, st, NULL);
}

/* Index i QUEUED -> RUNNING if no other unit of it came first (*first set then); whether
 * this unit must do its part. */
static bool start_slot(gr_job *job, uint64_t i, bool *first)
{
    uint16_t expected = SLOT(GR_INDEX_QUEUED, GR_OK);

    *first = atomic_compare_exchange_strong_explicit(&job->slot[i], &expected,
                                                     SLOT(GR_INDEX_RUNNING, GR_OK),
                                                     memory_order_acq_rel, memory_order_acquire);
    if (*first)
        return true;
    /* Another unit of this index started it: go on unless a part of it has failed. Ended
     * indices (stopped while queued) are skipped. Whole-tensor units cannot meet RUNNING. */
    return (expected & 0xff) == GR_INDEX_RUNNING && job->units != NULL &&
           atomic_load_explicit(&job->piece_failed[i], memory_order_acquire) == 0;
}

uint32_t gr__job_start_pieces(gr_job *job, uint64_t index, uint32_t n, uint8_t *live)
{
    uint64_t started = 0;
    uint32_t n_live = 0;

    for (uint32_t k = 0; k < n; k++) {
        bool first;

        n_live += live[k] = start_slot(job, index + k, &first);
        started += first;
    }
    if (started) /* one add for the unit: every worker's units share this counter */
        atomic_fetch_add_explicit(&job->started, started, memory_order_relaxed);
    return n_live;
}

void gr__job_unstart_piece(gr_job *job, uint64_t i)
{
    uint16_t expected = SLOT(GR_INDEX_RUNNING, GR_OK);

    if (job->units != NULL)
        return;
    /* Nobody else moves an index out of RUNNING, so this cannot fail; release: a worker that
     * starts the index again sees it as it was before the first start. */
    if (atomic_compare_exchange_strong_explicit(&job->slot[i], &expected,
                                                SLOT(GR_INDEX_QUEUED, GR_OK),
                                                memory_order_release, memory_order_relaxed))
        atomic_fetch_sub_explicit(&job->started, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&job->anomalies, 1, memory_order_relaxed);
}

static void record_error(gr_job *job, uint64_t i, gr_status st, const gr_error_info *detail);

/* Ends of indices whose slots have moved but whose counts are not yet in the job's shared
 * counters. A unit ends its indices slot by slot and adds their counts once (add_ends):
 * a unit of 512 tensors makes six shared atomic adds instead of about 2,500, which every
 * worker's units contend for. */
typedef struct ends {
    uint64_t running, queued; /* from RUNNING, from QUEUED */
    uint64_t done, failed, canceled;
} ends;

/* Index i from `from` to the terminal state for `st`, counted in *e (not yet in the job's
 * counters); records a failure. False when the index was not in `from`. */
static bool end_slot(gr_job *job, uint64_t i, gr_index_state from, gr_status st,
                     const gr_error_info *detail, ends *e)
{
    uint16_t expected = SLOT(from, GR_OK);
    gr_index_state to = terminal_state(st);

    /* acq_rel: the end publishes the outputs the worker wrote to whoever reads the state. */
    if (!atomic_compare_exchange_strong_explicit(&job->slot[i], &expected, SLOT(to, st),
                                                 memory_order_acq_rel, memory_order_acquire)) {
        if (from == GR_INDEX_RUNNING)
            atomic_fetch_add_explicit(&job->anomalies, 1, memory_order_relaxed);
        return false;
    }
    *(from == GR_INDEX_RUNNING ? &e->running : &e->queued) += 1;
    *(to == GR_INDEX_DONE ? &e->done : to == GR_INDEX_FAILED ? &e->failed : &e->canceled) += 1;
    if (st != GR_OK)
        record_error(job, i, st, detail);
    return true;
}

/* The counts of ends in e into the job's counters, `ended` last (the completion trigger);
 * completes the job when they were its last. */
static void add_ends(gr_job *job, const ends *e)
{
    uint64_t n = e->done + e->failed + e->canceled;

    if (n == 0)
        return;
    if (e->running)
        atomic_fetch_add_explicit(&job->ended_running, e->running, memory_order_relaxed);
    if (e->queued)
        atomic_fetch_add_explicit(&job->ended_queued, e->queued, memory_order_relaxed);
    if (e->done)
        atomic_fetch_add_explicit(&job->done, e->done, memory_order_relaxed);
    if (e->failed)
        atomic_fetch_add_explicit(&job->failed, e->failed, memory_order_relaxed);
    if (e->canceled)
        atomic_fetch_add_explicit(&job->canceled, e->canceled, memory_order_relaxed);
    gr__stats_tensors_ended(job->rt->stats, e->done, e->failed, e->canceled);
    /* acq_rel: the completing thread must see every other index's end. */
    if (atomic_fetch_add_explicit(&job->ended, n, memory_order_acq_rel) + n == job->count)
        job_all_ended(job);
}

/* A unit's part of index i is over (gr__job_finish_pieces), its end counted in *e. */
static void finish_piece(gr_job *job, uint64_t i, bool live, gr_status st,
                         const gr_error_info *detail, ends *e)
{
    uint8_t none = 0;
    gr_status final;

    if (job->units == NULL) { /* the index is this one unit */
        if (live)
            end_slot(job, i, GR_INDEX_RUNNING, st, detail, e);
        return;
    }
    if (live && st != GR_OK &&
        atomic_compare_exchange_strong(&job->piece_failed[i], &none, (uint8_t)st))
        record_error(job, i, st, detail);
    /* acq_rel: the last part must see every other part's outputs and failure. */
    if (atomic_fetch_sub_explicit(&job->pending[i], 1, memory_order_acq_rel) != 1)
        return;
    final = (gr_status)atomic_load_explicit(&job->piece_failed[i], memory_order_acquire);
    if ((atomic_load_explicit(&job->slot[i], memory_order_acquire) & 0xff) ==
        GR_INDEX_RUNNING)
        end_slot(job, i, GR_INDEX_RUNNING, final, NULL, e);
}

void gr__job_finish_pieces(gr_job *job, uint64_t index, uint32_t n, const uint8_t *live,
                           gr_status st, const gr_error_info *detail)
{
    ends e = {0};

    for (uint32_t k = 0; k < n; k++)
        finish_piece(job, index + k, live == NULL || live[k], st, detail, &e);
    add_ends(job, &e);
}

bool gr__job_end_index(gr_job *job, uint64_t i, gr_index_state from, gr_status st,
                       const gr_error_info *detail)
{
    ends e = {0};
    bool ended = end_slot(job, i, from, st, detail, &e);

    add_ends(job, &e);
    return ended;
}

/* Keep the job's first failure: index, node and reason; and log it, after the lock. */
static void record_error(gr_job *job, uint64_t i, gr_status st, const gr_error_info *detail)
{
    const gr_logger *lg = &job->rt->log;
    gr_log_level level = st == GR_ERR_CANCELED || st == GR_ERR_SHUTDOWN ? GR_LOG_DEBUG
                                                                          : GR_LOG_WARN;
    gr_error_info first;
    bool is_first = false;

    pthread_mutex_lock(&job->mu);
    if (!job->has_error) {
        job->has_error = true;
        is_first = true;
        if (detail != NULL && detail->status == st) {
            job->first_error = *detail;
            job->first_error.index = i;
        } else {
            gr__error_set(&job->first_error, st, i, NULL, "%s", stop_message(st));
        }
        first = job->first_error;
    }
    pthread_mutex_unlock(&job->mu);
    if (is_first && gr__log_enabled(lg, level))
        gr__log_write(lg, level, "job %llu: first failure, index %llu%s%s: %s: %s",
                      (unsigned long long)job->id, (unsigned long long)i,
                      first.node[0] ? " node " : "", first.node, gr_status_str(st),
                      first.message);
}

void gr__job_stop(gr_job *job, gr_status why)
{
    int expected = 0;
    ends e = {0};

    if (!atomic_compare_exchange_strong(&job->stop, &expected, (int)why))
        return;
    job_ref(job); /* the last end below may complete the job, whose callback may drop the
                     caller's reference */
    gr__runtime_wake_waiters(job->rt);
    for (uint64_t i = 0; i < job->count; i++)
        end_slot(job, i, GR_INDEX_QUEUED, why, NULL, &e);
    add_ends(job, &e);
    gr__job_unref(job);
}

uint64_t gr__job_anomalies(const gr_job *handle)
{
    const gr_job *job = gr__handle_get((uintptr_t)handle, GR_HANDLE_JOB);

    return job == NULL ? UINT64_MAX : atomic_load_explicit(&job->anomalies, memory_order_relaxed);
}

bool gr__in_callback(void)
{
    return callback_depth > 0;
}

/* ------------------------------------------------------------------------------------- */
/* Submission.                                                                            */

typedef struct span {
    uintptr_t lo, hi;
    uint64_t index;
    uint32_t port;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

/* The first of the sorted, disjoint spans `s` that ends after `lo` (n when none). Inputs
 * come mostly in the outputs' order (in place, or the same layout): the answer is then at
 * the previous input's or just after it, so those two are tried before a binary search,
 * which costs a cache miss per step over a large job's spans. */
static uint64_t first_ending_after(const span *s, uint64_t n, uintptr_t lo, uint64_t hint)
{
    uint64_t a = 0, b = n;

    for (uint64_t h = hint; h <= hint + 1 && h <= n; h++)
        if ((h == 0 || s[h - 1].hi <= lo) && (h == n || s[h].hi > lo))
            return h;
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (s[m].hi <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/*
 * Host memory rules (invariant 6: output memory is written only by the D2H of its own
 * index): output ranges must not overlap each other, nor any other index's inputs. An
 * output may be the very same range as an input of its own index (in place) when the graph
 * orders that input's H2D before the output's D2H. Inputs may overlap freely.
 */
static gr_status check_aliasing(const gr_graph *g, const gr_tensor *t, uint64_t count,
                                gr_error_info *err)
{
    uint64_t n_out = count * g->n_outputs;
    uintptr_t max_hi = 0;
    gr_status st = GR_OK;
    span *outs;

    outs = gr__malloc(n_out * sizeof(*outs));
    if (outs == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                             "no memory to check %llu output ranges", (unsigned long long)n_out);
    for (uint64_t i = 0, k = 0; i < count; i++) {
        for (uint32_t p = 0; p < g->n_outputs; p++, k++) {
            outs[k].lo = (uintptr_t)t[i].out[p];
            outs[k].hi = outs[k].lo + gr_graph_port_bytes(g, true, p, t[i].elems);
            outs[k].index = i;
            outs[k].port = p;
        }
    }
    /* Tensors are mostly given in address order (one allocation cut in turn, or allocations
     * made one after another): then there is nothing to sort. */
    for (uint64_t k = 1; k < n_out; k++)
        if (outs[k].lo < outs[k - 1].lo) {
            qsort(outs, n_out, sizeof(*outs), span_cmp);
            break;
        }
    for (uint64_t k = 0; k < n_out; k++) {
        if (k > 0 && outs[k].lo < max_hi) {
            st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, outs[k].index, NULL,
                               "output %u of index %llu overlaps another output of this job",
                               outs[k].port, (unsigned long long)outs[k].index);
            goto out_free;
        }
        if (outs[k].hi > max_hi)
            max_hi = outs[k].hi;
    }
    /* Outputs are now disjoint and sorted (by their ends too); find the outputs each input
     * overlaps. */
    for (uint64_t i = 0, hint = 0; i < count; i++) {
        for (uint32_t q = 0; q < g->n_inputs; q++) {
            uintptr_t lo = (uintptr_t)t[i].in[q];
            uintptr_t hi = lo + gr_graph_port_bytes(g, false, q, t[i].elems);
            uint64_t a = first_ending_after(outs, n_out, lo, hint);

            hint = a;
            for (uint64_t k = a; k < n_out && outs[k].lo < hi; k++) {
                const span *o = &outs[k];
                bool in_place = o->index == i && o->lo == lo && o->hi == hi &&
                                ((g->inplace_ok[o->port] >> q) & 1);
                if (!in_place) {
                    st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                       "input %u of index %llu overlaps output %u of index %llu%s",
                                       q, (unsigned long long)i, o->port,
                                       (unsigned long long)o->index,
                                       o->index == i
                                          ? " (in place needs the very same range, and the "
                                            "graph must copy that input in before it copies "
                                            "that output out)"
                                          : "");
                    goto out_free;
                }
            }
        }
    }
out_free:
    free(outs);
    return st;
}

/* The bytes of the smallest device's arena: what one device can hold. */
static uint64_t smallest_arena(const gr_runtime *rt)
{
    uint64_t capacity = UINT64_MAX;

    for (uint32_t d = 0; d < rt->n_devices; d++)
        if (gr__arena_size(rt->devices[d].arena) < capacity)
            capacity = gr__arena_size(rt->devices[d].arena);
    return capacity;
}

static gr_status check_tensors(gr_runtime *rt, const gr_graph *g, const gr_tensor *t,
                               uint64_t count, gr_error_info *err)
{
    /* What an iteration may take: the device, less the job's constants beside it. */
    uint64_t capacity = smallest_arena(rt) - g->const_bytes;

    uint64_t widest = gr__graph_widest_port(g), last_elems = 0, bytes = 0;

    for (uint64_t i = 0; i < count; i++) {
        if (t[i].elems == 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu has 0 elements", (unsigned long long)i);
        for (uint32_t p = 0; p < GR_MAX_PORTS; p++) {
            if ((t[i].in[p] == NULL) != (p >= g->n_inputs))
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                     "index %llu: input %u is %s (the graph has %u input(s))",
                                     (unsigned long long)i, p, t[i].in[p] ? "set" : "NULL",
                                     g->n_inputs);
            if ((t[i].out[p] == NULL) != (p >= g->n_outputs))
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                     "index %llu: output %u is %s (the graph has %u output(s))",
                                     (unsigned long long)i, p, t[i].out[p] ? "set" : "NULL",
                                     g->n_outputs);
        }
        if (t[i].rank > GR_MAX_DIMS)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: rank %u (at most %d dimensions)",
                                 (unsigned long long)i, t[i].rank, GR_MAX_DIMS);
        if (t[i].rank > 0) {
            unsigned __int128 product = 1;

            for (uint32_t d = 0; d < t[i].rank; d++)
                product = t[i].shape[d] == 0 || product > UINT64_MAX ? 0
                                                                     : product * t[i].shape[d];
            if (product != t[i].elems)
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                     "index %llu: the shape's dimensions must multiply to its %llu "
                                     "elements, and none be 0",
                                     (unsigned long long)i, (unsigned long long)t[i].elems);
        }
        /* The footprint depends on the size alone, and a job's tensors mostly share one. */
        if (t[i].elems != last_elems &&
            (t[i].elems > (UINTPTR_MAX / 2) / widest ||
             gr__graph_layout(g, t[i].elems, NULL, &bytes) != GR_OK))
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: %llu elements is too large",
                                 (unsigned long long)i, (unsigned long long)t[i].elems);
        last_elems = t[i].elems;
        /* A splittable graph runs a tensor larger than the budget in chunks (units.h). */
        if (bytes > capacity && !(g->splittable && rt->cfg.split_tensors))
            return gr__error_set(err, GR_ERR_OVER_BUDGET, i, NULL,
                                 "index %llu: one iteration needs %llu device bytes but the "
                                 "budget is %llu%s, and %s",
                                 (unsigned long long)i, (unsigned long long)bytes,
                                 (unsigned long long)capacity,
                                 g->const_bytes ? " beside the job's constants" : "",
                                 g->splittable ? "splitting tensors is off (split_tensors)"
                                              : "the graph cannot be split (a kernel is not "
                                                "elementwise or a buffer is not the tensor's "
                                                "size)");
    }
    return check_aliasing(g, t, count, err);
}

static gr_status job_alloc(gr_runtime *rt, gr_graph *g, const gr_tensor *tensors,
                           uint64_t count, const gr_job_options *opts, gr_job **out)
{
    gr_job *job = gr__calloc(1, sizeof(*job));
    uint32_t *pending;

    if (job == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    job->tensors = gr__malloc(count * sizeof(*job->tensors));
    job->slot = gr__calloc(count, sizeof(*job->slot)); /* all QUEUED, status 0 */
    if (job->tensors == NULL || job->slot == NULL)
        goto out_free;
    if (g->n_consts > 0) {
        job->consts = gr__calloc(rt->n_devices, sizeof(*job->consts));
        if (job->consts == NULL)
            goto out_free;
        for (uint32_t d = 0; d < rt->n_devices; d++)
            job->consts[d].job = job;
        memcpy(job->const_src, opts->constants, g->n_consts * sizeof(*job->const_src));
    }
    if (pthread_mutex_init(&job->mu, NULL) != 0)
        goto out_free;
    if (gr__cond_init(&job->cond) != 0)
        goto out_destroy_mu;
    memcpy(job->tensors, tensors, count * sizeof(*tensors));
    /* Held before planning: what the plan finds registered stays so while the job runs. */
    if (gr__host_cache_hold(rt->host_cache, g, job->tensors, count, opts->deadline_ns,
                            &job->host_hold) != GR_OK)
        goto out_destroy_cond;
    if (gr__runtime_plan_units(rt, g, job->tensors, count, &job->host_hold, &job->units,
                               &job->n_units, &pending) != GR_OK)
        goto out_release;
    /* Counted before the job is shared, so plain stores are published with it. */
    job->pending = (_Atomic uint32_t *)pending;
    if (job->units != NULL) {
        job->piece_failed = gr__calloc(count, sizeof(*job->piece_failed));
        if (job->piece_failed == NULL)
            goto out_release;
    }
    job->rt = rt;
    job->graph = g;
    job->count = count;
    job->deadline_ns = opts->deadline_ns;
    job->on_complete = opts->on_complete;
    job->user = opts->user;
    job->submitting = true;
    job->completion_fd = -1;
    if (gr__handle_new(job, GR_HANDLE_JOB, &job->handle) != GR_OK)
        goto out_release;
    gr__graph_ref(g);
    gr__runtime_ref(rt);
    /* The caller's handle (kept by submit until it returns), the incomplete reference, and
     * one per task that will be in the ring. */
    atomic_init(&job->refs, 2);
    atomic_init(&job->handle_refs, 2); /* the caller's, and the incomplete job's */
    *out = job;
    return GR_OK;

out_release:
    gr__host_cache_release(rt->host_cache, &job->host_hold, true); /* never accepted */
out_destroy_cond:
    pthread_cond_destroy(&job->cond);
out_destroy_mu:
    pthread_mutex_destroy(&job->mu);
out_free:
    job_free_memory(job);
    return GR_ERR_OUT_OF_MEMORY;
}

/* One pointer for each of the graph's constants, and room for them on every device with
 * some left for the iterations (which check_tensors sizes against what is left). */
static gr_status check_constants(gr_runtime *rt, const gr_graph *g, const gr_job_options *opts,
                                 gr_error_info *err)
{
    bool given = opts->struct_size >= offsetof(gr_job_options, n_constants) +
                                           sizeof(opts->n_constants);
    uint32_t n = given ? opts->n_constants : 0;

    if (n != g->n_consts || (n > 0 && opts->constants == NULL))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "the graph has %u constant(s), the job options give %u "
                             "(gr_job_options.constants, n_constants)",
                             g->n_consts, n > 0 && opts->constants == NULL ? 0 : n);
    for (uint32_t c = 0; c < n; c++)
        if (opts->constants[c] == NULL)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "constant %u ('%s') is NULL", c,
                                 g->buffers[g->const_buffer[c]].name);
    if (n > 0 && g->const_bytes >= smallest_arena(rt))
        return gr__error_set(err, GR_ERR_OVER_BUDGET, GR_NO_INDEX, NULL,
                             "the graph's constants alone take %llu device bytes, and the "
                             "budget is %llu: nothing would be left for the iterations",
                             (unsigned long long)g->const_bytes,
                             (unsigned long long)smallest_arena(rt));
    return GR_OK;
}

/* The checks that need no runtime state beyond the devices' sizes. */
static gr_status check_request(gr_runtime *rt, gr_graph *g, const gr_tensor *tensors,
                               uint64_t count, const gr_job_options *opts, gr_error_info *err)
{
    gr_status st;

    if (opts->magic != GR_JOB_OPTIONS_MAGIC ||
        opts->struct_size < offsetof(gr_job_options, constants))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "job options not initialized with GR_JOB_OPTIONS_INIT");
    if (count == 0)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "a job needs at least one tensor");
    if (count > UINT32_MAX)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "at most %u tensors per job", UINT32_MAX);
    if (!g->finalized)
        return gr__error_set(err, GR_ERR_INVALID_USAGE, GR_NO_INDEX, NULL,
                             "graph is not finalized (call gr_graph_finalize)");
    if ((st = check_constants(rt, g, opts, err)) != GR_OK)
        return st;
    if (callback_depth > 0)
        return gr__error_set(err, GR_ERR_INVALID_USAGE, GR_NO_INDEX, NULL,
                             "gr_job_submit from a completion callback could wait on the "
                             "runtime's own threads forever; submit from another thread");
    if (atomic_load(&rt->shutdown))
        return gr__error_set(err, GR_ERR_SHUTDOWN, GR_NO_INDEX, NULL, "runtime is shut down");
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        const char *missing;

        if (n->kind == GR_NODE_KERNEL &&
            (missing = rt->backend->kernel_missing(&rt->env, n->kernel)) != NULL)
            return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, n->name,
                                 "node '%s': kernel '%s' %s, which the %s backend needs",
                                 n->name, n->kernel->name, missing, rt->backend->name);
    }
    return check_tensors(rt, g, tensors, count, err);
}

/* Queue every unit. On a deadline, stop or shutdown while sleeping on a full ring, the job
 * is accepted all the same: the parts of the units that never reached the ring fail with
 * that reason (an index a queued unit already started then ends failed, once its queued
 * units are done), and the stop ends the indices that no unit started. */
static void queue_tasks(gr_runtime *rt, gr_job *job)
{
    uint64_t pushed;
    gr_status st = GR_OK, why;

    atomic_fetch_add_explicit(&job->refs, job->n_units, memory_order_relaxed);
    for (pushed = 0; pushed < job->n_units; pushed++) {
        gr_task t = {job, pushed};

        st = gr__ring_push(rt->ring, &t, job->deadline_ns, &job->stop);
        if (st != GR_OK)
            break;
    }
    if (pushed == job->n_units)
        return;
    why = st == GR_ERR_TIMEOUT || st == GR_ERR_SHUTDOWN ? st : GR_ERR_CANCELED;
    for (uint64_t k = pushed; k < job->n_units; k++)
        gr__job_drop_unit(job, k, why);
    atomic_fetch_sub_explicit(&job->refs, job->n_units - pushed, memory_order_relaxed);
    gr__job_stop(job, why);
}

gr_status gr_job_submit(gr_runtime *handle, gr_graph *g, const gr_tensor *tensors,
                        uint64_t count, const gr_job_options *opts, gr_job **out,
                        gr_error_info *err)
{
    static const gr_job_options defaults = GR_JOB_OPTIONS_INIT;
    gr_status st, result;
    bool run_callback, notify;
    gr_runtime *rt;
    gr_job *job;

    if (out != NULL)
        *out = NULL;
    if (handle == NULL || g == NULL || tensors == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "runtime, graph and tensors must not be NULL");
    /* Before touching anything else: the reference, taken with the lookup, keeps the
     * runtime's memory alive however gr_runtime_destroy races with this call, and the count
     * (seq_cst, paired with the shutdown store) makes destroy wait for this submitter, or
     * this submitter see the shutdown. */
    if ((rt = gr__runtime_enter(handle, &st)) == NULL)
        return gr__error_set(err, st, GR_NO_INDEX, NULL,
                             gr__handle_get((uintptr_t)handle, GR_HANDLE_RUNTIME) != NULL
                                ? "the runtime was created by the parent of this forked "
                                  "process: a child cannot use it (create one of its own)"
                                : "not a live runtime: it was destroyed (or never created)");
    if ((st = check_request(rt, g, tensors, count, opts ? opts : &defaults, err)) != GR_OK)
        goto out_leave;
    notify = opts != NULL && opts->struct_size >= offsetof(gr_job_options, notify) +
                                                       sizeof(opts->notify) &&
             opts->notify != 0;
    if (notify && out == NULL) {
        st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                           "gr_job_options.notify needs a handle to reap: out is NULL");
        goto out_leave;
    }
    if ((st = job_alloc(rt, g, tensors, count, opts ? opts : &defaults, &job)) != GR_OK) {
        gr__error_set(err, st, GR_NO_INDEX, NULL, "no memory for a job of %llu tensors",
                      (unsigned long long)count);
        goto out_leave;
    }
    job->notify = notify; /* before the job is shared: it may complete while queuing */
    job->id = gr__stats_job_submitted(rt->stats);
    GR_LOG(&rt->log, GR_LOG_DEBUG, "job %llu submitted: %llu tensor(s) in %llu unit(s)",
           (unsigned long long)job->id, (unsigned long long)count,
           (unsigned long long)job->n_units);
    gr__runtime_track_job(rt, job);
    queue_tasks(rt, job);
    if (out != NULL) {
        atomic_store(&job->handle_held, true);
        *out = (gr_job *)job->handle;
    }

    pthread_mutex_lock(&job->mu);
    job->submitting = false;
    run_callback = job->callback_pending;
    result = job_result_locked(job);
    pthread_mutex_unlock(&job->mu);
    if (run_callback)
        job_finish(job, result); /* left to us by job_all_ended */
    if (out == NULL) { /* detached: the handle's references, which nobody holds */
        drop_handle(job);
        gr__job_unref(job);
    }

out_leave:
    gr__runtime_leave(rt);
    return st;
}

/* ------------------------------------------------------------------------------------- */
/* The caller's view.                                                                     */

/* The job behind a caller's handle, or NULL (with *st saying why) for NULL, a handle of a
 * freed job, or a call from a forked child. */
static gr_job *job_get(const gr_job *handle, gr_status *st)
{
    gr_job *job;

    if (handle == NULL) {
        *st = GR_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    job = gr__handle_get((uintptr_t)handle, GR_HANDLE_JOB);
    if (job == NULL || gr__forked(job->rt)) {
        *st = GR_ERR_INVALID_USAGE;
        return NULL;
    }
    return job;
}

gr_job *gr__job_from_handle(const gr_job *handle)
{
    return gr__handle_get((uintptr_t)handle, GR_HANDLE_JOB);
}

gr_status gr_job_wait(gr_job *handle, int64_t timeout_ns, gr_status *result)
{
    int64_t deadline = gr__deadline_after(timeout_ns);
    bool timed_out = false;
    gr_status st;
    gr_job *job;

    if ((job = job_get(handle, &st)) == NULL)
        return st;
    pthread_mutex_lock(&job->mu);
    for (;;) {
        /* A callback waiting for its own job: every index has ended and the callback is all
         * that is left, so answer now instead of deadlocking. */
        if (job->complete ||
            (job->in_callback && pthread_equal(job->callback_thread, pthread_self()))) {
            if (result)
                *result = job_result_locked(job);
            st = GR_OK;
            break;
        }
        if (timed_out || timeout_ns == 0) {
            st = GR_ERR_TIMEOUT;
            break;
        }
        timed_out = gr__cond_wait_until(&job->cond, &job->mu, deadline);
    }
    pthread_mutex_unlock(&job->mu);
    return st;
}

gr_status gr_job_cancel(gr_job *handle)
{
    gr_status st;
    gr_job *job;

    if ((job = job_get(handle, &st)) == NULL)
        return st;
    gr__job_stop(job, GR_ERR_CANCELED);
    return GR_OK;
}

/* The end of the first version of gr_job_progress (0.3's, the first with a struct_size):
 * callers must know at least that much. */
#define JOB_PROGRESS_V1_SIZE (offsetof(gr_job_progress, canceled) + sizeof(uint64_t))

gr_status gr_job_progress_get(const gr_job *handle, gr_job_progress *out)
{
    uint64_t started, ended_running, ended_queued;
    gr_job_progress p;
    gr_status st;
    gr_job *job;

    if (!gr__sized_out_ok(out, GR_JOB_PROGRESS_MAGIC, JOB_PROGRESS_V1_SIZE))
        return GR_ERR_INVALID_ARGUMENT;
    if ((job = job_get(handle, &st)) == NULL)
        return st;
    memset(&p, 0, sizeof(p));
    p.total = job->count;
    p.done = atomic_load_explicit(&job->done, memory_order_relaxed);
    p.failed = atomic_load_explicit(&job->failed, memory_order_relaxed);
    p.canceled = atomic_load_explicit(&job->canceled, memory_order_relaxed);
    ended_queued = atomic_load_explicit(&job->ended_queued, memory_order_relaxed);
    ended_running = atomic_load_explicit(&job->ended_running, memory_order_relaxed);
    started = atomic_load_explicit(&job->started, memory_order_relaxed);
    /* Loaded in this order, each counter can only have grown past the ones before it; clamp
     * the differences so a snapshot taken mid-transition never wraps around. */
    p.in_flight = started > ended_running ? started - ended_running : 0;
    p.queued = job->count > started + ended_queued ? job->count - started - ended_queued : 0;
    gr__sized_out_fill(out, &p, sizeof(p));
    return GR_OK;
}

gr_status gr_job_index_get(const gr_job *handle, uint64_t index, gr_index_state *state,
                           gr_status *status)
{
    gr_status st;
    gr_job *job;
    uint16_t s;

    if ((job = job_get(handle, &st)) == NULL)
        return st;
    if (index >= job->count)
        return GR_ERR_INVALID_ARGUMENT;
    s = atomic_load_explicit(&job->slot[index], memory_order_acquire);
    if (state)
        *state = (gr_index_state)(s & 0xff);
    if (status)
        *status = (gr_status)(s >> 8);
    return GR_OK;
}

gr_status gr_job_error_get(const gr_job *handle, gr_error_info *out)
{
    gr_status st;
    gr_job *job;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    if ((job = job_get(handle, &st)) == NULL)
        return gr__error_set(out, st, GR_NO_INDEX, NULL,
                             "not a live job handle: its job was destroyed, or it belongs to "
                             "the parent of this forked process");
    pthread_mutex_lock(&job->mu);
    if (job->has_error)
        *out = job->first_error;
    else
        gr__error_set(out, GR_OK, GR_NO_INDEX, NULL, "no error");
    pthread_mutex_unlock(&job->mu);
    return GR_OK;
}

uint64_t gr_job_id(const gr_job *handle)
{
    gr_status st;
    gr_job *job = job_get(handle, &st);

    return job ? job->id : 0;
}

int gr_job_is_complete(const gr_job *handle)
{
    gr_status st;
    gr_job *job;

    if ((job = job_get(handle, &st)) == NULL)
        return 0;
    return atomic_load_explicit(&job->ended, memory_order_acquire) == job->count;
}

gr_status gr_job_completion_fd(gr_job *handle, int *fd)
{
    gr_status st;
    gr_job *job;

    if (fd == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    *fd = -1;
    if ((job = job_get(handle, &st)) == NULL)
        return st;
    st = GR_OK;
    pthread_mutex_lock(&job->mu);
    /* Only gr_job_destroy closes the descriptor: once the handle is given back (or for a
     * detached job, which never had one held) nobody would, so that is refused. Checked
     * under mu, which destroy takes after clearing handle_held, so a descriptor made here
     * is always one destroy will find. */
    if (!atomic_load(&job->handle_held)) {
        st = GR_ERR_INVALID_USAGE;
    } else {
        if (job->completion_fd < 0)
            job->completion_fd = eventfd(job->complete ? 1 : 0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (job->completion_fd < 0) /* EMFILE, ENFILE, ENOMEM: out of resources */
            st = GR_ERR_OUT_OF_MEMORY;
        else
            *fd = job->completion_fd;
    }
    pthread_mutex_unlock(&job->mu);
    return st;
}

void gr_job_destroy(gr_job *handle)
{
    gr_status st;
    gr_job *job = job_get(handle, &st);
    int fd;

    /* Only the handle gr_job_submit returned holds a reference to give back: a second
     * destroy of a job still alive, or a destroy of a detached job from its callback,
     * does nothing. */
    if (job != NULL && atomic_exchange(&job->handle_held, false)) {
        pthread_mutex_lock(&job->mu);
        fd = job->completion_fd;
        job->completion_fd = -1;
        pthread_mutex_unlock(&job->mu);
        if (fd >= 0)
            close(fd);
        if (job->notify) {
            pthread_mutex_lock(&job->rt->reap_mu);
            if (job->reap_queued)
                reap_unlink_locked(job->rt, job);
            pthread_mutex_unlock(&job->rt->reap_mu);
        }
        drop_handle(job);
        gr__job_unref(job);
    }
}

/* ------------------------------------------------------------------------------------- */
/* The runtime's completion queue.                                                        */

gr_status gr_runtime_completion_fd(gr_runtime *handle, int *fd)
{
    gr_status st = GR_OK;
    gr_runtime *rt;

    if (fd == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    *fd = -1;
    /* A reference, not a lookup alone: an event loop calls this while another thread may
     * destroy the runtime, and the lock below must outlive that. */
    if ((rt = gr__runtime_acquire(handle, &st)) == NULL)
        return st;
    pthread_mutex_lock(&rt->reap_mu);
    if (rt->reap_closed) { /* a destroy racing this call has closed it for good */
        st = GR_ERR_INVALID_USAGE;
    } else {
        if (rt->completion_fd < 0)
            rt->completion_fd = eventfd(rt->reap_head != NULL ? 1 : 0,
                                        EFD_CLOEXEC | EFD_NONBLOCK);
        if (rt->completion_fd < 0) /* EMFILE, ENFILE, ENOMEM: out of resources */
            st = GR_ERR_OUT_OF_MEMORY;
        else
            *fd = rt->completion_fd;
    }
    pthread_mutex_unlock(&rt->reap_mu);
    gr__runtime_unref(rt);
    return st;
}

gr_status gr_runtime_reap(gr_runtime *handle, gr_job **jobs, size_t max, size_t *n)
{
    gr_status st = GR_OK;
    gr_runtime *rt;
    size_t got = 0;

    if (n == NULL || (jobs == NULL && max > 0))
        return GR_ERR_INVALID_ARGUMENT;
    *n = 0;
    if ((rt = gr__runtime_acquire(handle, &st)) == NULL) /* as gr_runtime_completion_fd */
        return st;
    pthread_mutex_lock(&rt->reap_mu);
    while (got < max && rt->reap_head != NULL) {
        gr_job *job = rt->reap_head;

        reap_unlink_locked(rt, job);
        jobs[got++] = (gr_job *)job->handle;
    }
    pthread_mutex_unlock(&rt->reap_mu);
    gr__runtime_unref(rt);
    *n = got;
    return GR_OK;
}

void gr__runtime_close_completion_fd(gr_runtime *rt)
{
    int fd;

    pthread_mutex_lock(&rt->reap_mu);
    fd = rt->completion_fd;
    rt->completion_fd = -1;
    rt->reap_closed = true;
    pthread_mutex_unlock(&rt->reap_mu);
    if (fd >= 0)
        close(fd);
}

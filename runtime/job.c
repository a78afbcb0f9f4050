/*
 * job.c - a job once accepted: the per-index state machine, completion, waiting, the
 * caller's queries, and the runtime's completion queue. Submission, which checks a request
 * and builds the job, is job_submit.c.
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
 * and written 1 by gr__job_finish in the same critical section that sets `complete`. Both
 * happen under job->mu, as does the close in gr_job_destroy, so the descriptor is readable
 * only once gr_job_wait would return at once, and gr__job_finish never writes to a closed
 * (possibly reused) descriptor number.
 *
 * Completion queue (gr_runtime_reap): a notify job is appended to the runtime's queue by
 * gr__job_finish in the critical section of job->mu that sets `complete`, so a reaped job
 * obeys the descriptor's rule above, and a job whose wait has returned is queued already.
 * The queue, its links in each job and the runtime's eventfd are guarded by rt->reap_mu,
 * a leaf lock (taken inside job->mu, or alone); the
 * eventfd's counter is 1 exactly while the queue is not empty (written on the push into
 * an empty queue, read back by whatever empties it). The queue holds no reference: a job
 * in it is kept alive by its caller's handle, and gr_job_destroy, after giving up
 * handle_held, takes it off; gr__job_finish queues a job only while handle_held is set,
 * read under rt->reap_mu, so a job destroyed first is never queued.
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
#include "runtime/job_impl.h"
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

void gr__job_free_memory(gr_job *job)
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
    gr__job_free_memory(job);
    gr__runtime_unref(rt);
}

void gr__job_unref(gr_job *job)
{
    /* acq_rel: the last reference must see every other thread's writes before freeing. */
    if (atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) == 1)
        job_free(job);
}

void gr__job_drop_handle(gr_job *job)
{
    if (atomic_fetch_sub_explicit(&job->handle_refs, 1, memory_order_acq_rel) == 1)
        gr__handle_release(job->handle);
}

static void job_ref(gr_job *job)
{
    atomic_fetch_add_explicit(&job->refs, 1, memory_order_relaxed);
}

gr_status gr__job_result_locked(const gr_job *job)
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

void gr__job_finish(gr_job *job, gr_status result)
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
    /* Before the waiters wake: a destroy right after a wait releases it. */
    gr__job_drop_handle(job);
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
    result = gr__job_result_locked(job);
    deferred = job->submitting;
    if (deferred)
        job->callback_pending = true;
    pthread_mutex_unlock(&job->mu);
    if (!deferred)
        gr__job_finish(job, result);
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
                *result = gr__job_result_locked(job);
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
    else /* as gr_graph_error_get says "no refusal": status GR_OK, message "" */
        *out = (gr_error_info){.status = GR_OK, .index = GR_NO_INDEX};
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
        gr__job_drop_handle(job);
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

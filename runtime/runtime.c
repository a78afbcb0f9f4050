/*
 * runtime.c - the runtime's lifecycle: create (devices, workers, the deadline thread),
 * live jobs and deadlines, devices lost and workers retired, shutdown and destroy. The
 * config's checks are in config.c, the backend's choice in backends.c, what callers can
 * ask of a running runtime in introspect.c.
 *
 * Shutdown order (gr_runtime_shutdown does steps 1-3, gr_runtime_destroy all of them), and
 * why it leaves nothing behind:
 *   1. set `shutdown`: new submissions are refused;
 *   2. shut the ring, budgets and arenas: every sleeper wakes with GR_ERR_SHUTDOWN;
 *   3. stop every live job: their indices that have not started end as canceled now;
 *   4. wait for submitters still inside gr_job_submit to leave (a job they are still
 *      queuing may have been accepted after step 3; they stop it when the ring refuses),
 *      and for threads inside gr_runtime_shutdown (whose log line must come first);
 *   5. join the workers: running iterations finish, and tasks left in the ring are popped
 *      and dropped (their indices already ended, or end now as canceled);
 *   6. drain the ring once more: a push racing with step 2 may have landed after the last
 *      worker left (ring.h); then wait for completion callbacks still running on other
 *      threads (a thread that cancels a job runs its callback);
 *   7. stop the deadline thread, close the devices (their memory is freed here), and drop
 *      the caller's reference. Jobs the caller still holds keep the small remaining state
 *      (locks, ring, budgets) alive until their last gr_job_destroy.
 * After step 6 every index of every accepted job has ended, so every job is complete.
 *
 * The caller holds a generational handle (handle.h), released when gr_runtime_destroy
 * starts: any later call with it (a second destroy, a submit after destroy) is refused
 * rather than reading freed memory. Jobs keep the runtime itself, by reference.
 *
 * Lock order: rt->mu is taken alone; job->mu is never held while taking it. rt->reap_mu
 * (the completion queue, job.c) is a leaf: taken alone or inside job->mu, nothing inside
 * it.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "runtime/config.h"
#include "runtime/core/copier.h"
#include "runtime/hostcache.h"
#include "runtime/base/fault.h"
#include "runtime/handle.h"
#include "runtime/base/sync.h"
#include "runtime/base/trace.h"


void gr__runtime_ref(gr_runtime *rt)
{
    atomic_fetch_add_explicit(&rt->refs, 1, memory_order_relaxed);
}

static void runtime_free(gr_runtime *rt)
{
    for (uint32_t d = 0; rt->devices != NULL && d < rt->n_devices; d++) {
        gr__arena_destroy(rt->devices[d].arena);
        gr__budget_destroy(rt->devices[d].budget);
    }
    for (uint32_t d = 0; d < rt->const_devs_ready; d++)
        gr__const_dev_destroy(&rt->const_devs[d]);
    free(rt->const_devs);
    gr__ring_destroy(rt->ring);
    gr__copier_destroy(rt->copier);
    gr__host_cache_free(rt->host_cache);
    gr__stats_destroy(rt->stats);
    pthread_cond_destroy(&rt->deadline_cond);
    pthread_cond_destroy(&rt->cond);
    pthread_mutex_destroy(&rt->reap_mu);
    pthread_mutex_destroy(&rt->mu);
    free(rt->workers);
    free(rt->devices);
    free(rt);
}

void gr__runtime_unref(gr_runtime *rt)
{
    /* acq_rel: the last reference must see every other thread's writes before freeing. */
    if (atomic_fetch_sub_explicit(&rt->refs, 1, memory_order_acq_rel) == 1)
        runtime_free(rt);
}

void gr__runtime_wake_waiters(gr_runtime *rt)
{
    for (uint32_t d = 0; d < rt->n_devices; d++) {
        gr__budget_wake(rt->devices[d].budget);
        gr__arena_wake(rt->devices[d].arena);
    }
    gr__const_wake(rt);
    gr__ring_wake_producers(rt->ring);
}

/* ------------------------------------------------------------------------------------- */
/* Live jobs: shutdown stops them all at once, and one thread sleeps until the earliest
 * deadline among them and stops the jobs whose deadline passed, so queued indices end on
 * time even while every worker is busy elsewhere. A job on the list is incomplete, hence
 * alive (it holds its incomplete reference until it has left the list).                 */

void gr__runtime_track_job(gr_runtime *rt, gr_job *job)
{
    pthread_mutex_lock(&rt->mu);
    job->live_prev = NULL;
    job->live_next = rt->live_jobs;
    if (rt->live_jobs)
        rt->live_jobs->live_prev = job;
    rt->live_jobs = job;
    job->tracked = true;
    rt->unfinished_jobs++;
    if (job->deadline_ns != GR_NO_DEADLINE)
        pthread_cond_signal(&rt->deadline_cond);
    pthread_mutex_unlock(&rt->mu);
}

void gr__runtime_untrack_job(gr_runtime *rt, gr_job *job)
{
    pthread_mutex_lock(&rt->mu);
    if (job->tracked) {
        if (job->live_prev)
            job->live_prev->live_next = job->live_next;
        else
            rt->live_jobs = job->live_next;
        if (job->live_next)
            job->live_next->live_prev = job->live_prev;
        job->live_next = job->live_prev = NULL;
        job->tracked = false;
    }
    pthread_mutex_unlock(&rt->mu);
}

/* Stop, with `why`, the first live job that `pick` selects and that is not stopped yet;
 * false when there is none. Called with rt->mu held, which it drops while stopping (the
 * stop may complete the job, and completion takes rt->mu). */
static bool stop_one_locked(gr_runtime *rt, bool (*pick)(const gr_job *, int64_t), int64_t now,
                            gr_status why)
{
    for (gr_job *j = rt->live_jobs; j != NULL; j = j->live_next) {
        if (atomic_load(&j->stop) != 0 || !pick(j, now))
            continue;
        atomic_fetch_add_explicit(&j->refs, 1, memory_order_relaxed);
        pthread_mutex_unlock(&rt->mu);
        gr__job_stop(j, why);
        gr__job_unref(j);
        pthread_mutex_lock(&rt->mu);
        return true;
    }
    return false;
}

gr_status gr__runtime_plan_units(gr_runtime *rt, const gr_graph *g, const gr_tensor *t,
                                 uint64_t count, const gr_host_hold *hold, uint64_t cut,
                                 gr_unit **units, uint64_t *n_units, uint32_t **pending)
{
    uint64_t arena = UINT64_MAX;
    gr_unit_limits lim;

    for (uint32_t d = 0; d < rt->n_devices; d++)
        if (gr__arena_size(rt->devices[d].arena) < arena)
            arena = gr__arena_size(rt->devices[d].arena);
    if (!rt->cfg.split_tensors) {
        *units = NULL;
        *pending = NULL;
        *n_units = count;
        return GR_OK;
    }
    /* The job's constants take their room on each device first (job_submit.c checked it
     * is there). */
    lim = gr__unit_limits(g, arena - g->const_bytes, rt->cfg.workers_per_device,
                          rt->cfg.staging_bytes, rt->cfg.batch_below_bytes,
                          rt->cfg.pipeline_bytes);
    lim.scatter = g->copies_at_ends && rt->backend->batch_copies != NULL &&
                  rt->backend->batch_copies();
    gr__unit_limits_cut(&lim, cut);
    return gr__units_plan(g, t, count, &lim, &rt->env, hold, units, n_units, pending);
}

void gr__runtime_job_finished(gr_runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    if (--rt->unfinished_jobs == 0)
        pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->mu);
}

void gr__runtime_device_lost(gr_runtime *rt, gr_device *dev)
{
    bool was = false;
    unsigned lost;

    if (!atomic_compare_exchange_strong(&dev->lost, &was, true))
        return;
    lost = atomic_fetch_add(&rt->devices_lost, 1) + 1;
    GR_LOG(&rt->log, GR_LOG_ERROR, "device %u (%s device %d) lost: %s", dev->id,
           rt->backend->name, dev->ordinal,
           lost < rt->n_devices ? "its work goes to the other devices"
                                : "every device is lost; all work fails with 'device lost'");
    /* Wake the parked workers of other lost devices: this may have been the last one. */
    pthread_mutex_lock(&rt->mu);
    pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->mu);
}

void gr__runtime_worker_retired(gr_runtime *rt, gr_worker *w)
{
    unsigned retired;

    if (atomic_exchange(&w->retired, true))
        return;
    retired = atomic_fetch_add(&w->dev->workers_retired, 1) + 1;
    GR_LOG(&rt->log, GR_LOG_WARN,
           "worker %u of device %u retired (a fault ruined its private context); %u of %u "
           "workers of the device left",
           w->id, w->dev->id, rt->cfg.workers_per_device - retired,
           rt->cfg.workers_per_device);
    if (retired == rt->cfg.workers_per_device)
        gr__runtime_device_lost(rt, w->dev);
}

static bool pick_any(const gr_job *j, int64_t now)
{
    (void)j;
    (void)now;
    return true;
}

static bool pick_expired(const gr_job *j, int64_t now)
{
    return gr_deadline_passed(j->deadline_ns, now);
}

static void *deadline_main(void *arg)
{
    gr_runtime *rt = arg;

    pthread_mutex_lock(&rt->mu);
    while (!rt->deadline_stop) {
        int64_t earliest = GR_NO_DEADLINE;

        if (stop_one_locked(rt, pick_expired, gr_now_ns(), GR_ERR_TIMEOUT))
            continue;
        for (gr_job *j = rt->live_jobs; j != NULL; j = j->live_next)
            if (atomic_load(&j->stop) == 0)
                earliest = gr__deadline_min(earliest, j->deadline_ns);
        gr__cond_wait_until(&rt->deadline_cond, &rt->mu, earliest);
    }
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* Counts the forks that made this process a child (pthread_atfork, registered once). */
static _Atomic uint64_t fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
    atomic_fetch_add_explicit(&fork_generation, 1, memory_order_relaxed);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
}

gr_runtime *gr__runtime_get(const gr_runtime *handle, gr_status *st)
{
    gr_runtime *rt;

    if (handle == NULL) {
        *st = GR_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    rt = gr__handle_get((uintptr_t)handle, GR_HANDLE_RUNTIME);
    if (rt == NULL || gr__forked(rt)) {
        *st = GR_ERR_INVALID_USAGE;
        return NULL;
    }
    return rt;
}

static void ref_runtime(void *rt)
{
    gr__runtime_ref(rt);
}

gr_runtime *gr__runtime_acquire(const gr_runtime *handle, gr_status *st)
{
    gr_runtime *rt;

    if (handle == NULL) {
        *st = GR_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    rt = gr__handle_get_ref((uintptr_t)handle, GR_HANDLE_RUNTIME, ref_runtime);
    if (rt != NULL && gr__forked(rt)) {
        /* The parent's: nothing of it may be touched, its reference count included (the
         * child's copy of it is the child's alone, so this is only bookkeeping). */
        atomic_fetch_sub_explicit(&rt->refs, 1, memory_order_relaxed);
        rt = NULL;
    }
    if (rt == NULL)
        *st = GR_ERR_INVALID_USAGE;
    return rt;
}

gr_runtime *gr__runtime_enter(const gr_runtime *handle, gr_status *st)
{
    gr_runtime *rt = gr__runtime_acquire(handle, st);

    if (rt != NULL)
        atomic_fetch_add(&rt->active_calls, 1);
    return rt;
}

void gr__runtime_leave(gr_runtime *rt)
{
    /* Under the lock, so gr_runtime_destroy's wait cannot miss the last call. */
    pthread_mutex_lock(&rt->mu);
    if (atomic_fetch_sub(&rt->active_calls, 1) == 1)
        pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->mu);
    gr__runtime_unref(rt);
}

gr_device *gr__runtime_device(const gr_runtime *handle, uint32_t device, gr_status *st)
{
    gr_runtime *rt = gr__runtime_get(handle, st);

    if (rt == NULL)
        return NULL;
    if (device >= rt->n_devices) {
        *st = GR_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    return &rt->devices[device];
}

bool gr__forked(const gr_runtime *rt)
{
    /* Relaxed: the child's increment runs on its only thread, before any call of its. */
    return atomic_load_explicit(&fork_generation, memory_order_relaxed) != rt->fork_generation;
}

void gr__runtime_copy_refused(gr_runtime *rt, uint64_t index, const gr_error_info *why)
{
    if (atomic_exchange_explicit(&rt->copy_refusal_logged, true, memory_order_relaxed))
        return;
    GR_LOG(&rt->log, GR_LOG_DEBUG,
           "index %llu%s%s%s: the driver refused a copy as laid out (%s); the unit runs again "
           "through a staging buffer (counted in gr_stats.copies_refused; logged once)",
           (unsigned long long)index, why->node[0] ? ", node '" : "", why->node,
           why->node[0] ? "'" : "", why->message);
}

void gr__runtime_pinned_fallback(gr_runtime *rt, uint64_t bytes)
{
    struct rlimit lim;
    char limit[48] = "unknown";

    if (atomic_fetch_add_explicit(&rt->pinned_fallbacks, 1, memory_order_relaxed) != 0)
        return;
    if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0) {
        if (lim.rlim_cur == RLIM_INFINITY)
            snprintf(limit, sizeof(limit), "unlimited");
        else
            snprintf(limit, sizeof(limit), "%llu bytes", (unsigned long long)lim.rlim_cur);
    }
    GR_LOG(&rt->log, GR_LOG_WARN,
           "cannot pin %llu bytes for a staging buffer (RLIMIT_MEMLOCK: %s): staging uses "
           "ordinary memory instead; results are the same, copies slower (said once; "
           "gr_stats.staging_pageable counts them)",
           (unsigned long long)bytes, limit);
}

/* ------------------------------------------------------------------------------------- */
/* Create and destroy.                                                                    */

/* Narrow the backend's devices (rt->n_devices of them) to the configured list. The list
 * itself is not kept: open_devices copies it into the devices' ordinals. */
static gr_status select_devices(gr_runtime *rt, gr_error_info *err)
{
    for (uint32_t i = 0; i < rt->cfg.device_count; i++)
        if ((uint32_t)rt->cfg.devices[i] >= rt->n_devices)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "devices: device %d is not present: the %s backend has %u "
                                 "device(s), numbered 0..%u%s (%s)",
                                 rt->cfg.devices[i], rt->backend->name, rt->n_devices,
                                 rt->n_devices - 1,
                                 rt->backend->kind == GR_BACKEND_HOST ? ", as host_devices says"
                                                                     : "",
                                rt->backend_note);
    if (rt->cfg.device_count != 0)
        rt->n_devices = rt->cfg.device_count;
    rt->env.n_devices = rt->n_devices;
    return GR_OK;
}

static gr_status open_devices(gr_runtime *rt, gr_error_info *err)
{
    uint64_t granule = rt->backend->region_granule;
    uint64_t region = rt->cfg.budget_bytes / granule * granule;

    if (region == 0)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "budget_bytes %llu is smaller than the %s backend's allocation "
                             "granule (%llu bytes)",
                             (unsigned long long)rt->cfg.budget_bytes, rt->backend->name,
                             (unsigned long long)granule);
    rt->devices = gr__calloc(rt->n_devices, sizeof(*rt->devices));
    rt->const_devs = gr__calloc(rt->n_devices, sizeof(*rt->const_devs));
    if (rt->devices == NULL || rt->const_devs == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    for (; rt->const_devs_ready < rt->n_devices; rt->const_devs_ready++)
        if (gr__const_dev_init(&rt->const_devs[rt->const_devs_ready],
                               rt->n_devices * rt->cfg.workers_per_device) != GR_OK)
            return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    for (uint32_t d = 0; d < rt->n_devices; d++) {
        gr_device *dev = &rt->devices[d];
        gr_status st;

        dev->id = d;
        dev->ordinal = rt->cfg.devices ? rt->cfg.devices[d] : (int)d;
        dev->env = &rt->env;
        if (gr__arena_create(region, &dev->arena) != GR_OK ||
            gr__budget_create(gr__arena_size(dev->arena), &dev->budget) != GR_OK)
            return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
        dev->region_size = gr__arena_size(dev->arena);
        st = rt->backend->device_open(dev, err);
        if (st != GR_OK)
            return st;
    }
    return GR_OK;
}

/* The process's one registration cache (a registration is the whole process's): a runtime
 * without a cache asks it too, so that it never copies by DMA memory that the other
 * runtime's cache may unregister under it (such memory is staged). Guarded by the mutex;
 * the flag spares runtimes the lock while there is none. Lock order: this before the
 * cache's own. */
static pthread_mutex_t process_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static gr_host_cache *process_cache;
static atomic_bool process_cache_on;
/* gr__host_cache_emulate's pins, for a backend without pinned memory; read at create. */
static const gr_host_cache_ops *_Atomic emulated_pins;

void gr__host_cache_emulate(const gr_host_cache_ops *ops)
{
    atomic_store(&emulated_pins, ops);
}

static bool host_ready(const gr_backend_env *env, const gr_host_hold *hold, const void *p,
                       uint64_t bytes)
{
    const gr_runtime *rt = (const gr_runtime *)((const char *)env - offsetof(gr_runtime, env));
    bool ready;

    if (env->host_cache != NULL)
        return gr__host_cache_ready(env->host_cache, hold, p, bytes);
    if (!atomic_load(&process_cache_on))
        return rt->backend->dma_ready(p);
    pthread_mutex_lock(&process_cache_mu);
    ready = process_cache != NULL ? gr__host_cache_ready(process_cache, NULL, p, bytes)
                                  : rt->backend->dma_ready(p);
    pthread_mutex_unlock(&process_cache_mu);
    return ready;
}

static int host_class(const gr_backend_env *env, const gr_host_hold *hold, const void *p,
                      uint64_t bytes, uintptr_t *key)
{
    return gr__host_cache_class(env->host_cache, hold, p, bytes, key);
}

static uint64_t host_epoch(const gr_backend_env *env)
{
    return gr__host_cache_epoch(env->host_cache);
}

/* The backend, its devices, and what it is told of the runtime (its environment). */
static gr_status choose_backend(gr_runtime *rt, gr_error_info *err)
{
    gr_status st = gr__backend_choose(&rt->cfg, &rt->backend, &rt->n_devices, rt->backend_note,
                                      sizeof(rt->backend_note), &rt->fell_back, err);

    if (st != GR_OK)
        return st;
    rt->env.cfg = &rt->cfg;
    rt->env.log = &rt->log;
    rt->env.trace = (rt->backend->traced || gr__trace_all_backends) && gr__trace_wanted();
    rt->env.host_ready = host_ready;
    rt->env.host_span = rt->backend->host_span;
    /* The registration cache, where memory can be pinned at all (a backend with pinned
     * memory and a device to pin it for), or where a test emulates pinning (a backend
     * without pinned memory: gr__host_cache_emulate). */
    const gr_host_cache_ops *emulated = atomic_load(&emulated_pins);
    bool pinnable = rt->backend->pinned != NULL && rt->backend->pinned->available();

    if (rt->cfg.host_cache_bytes != 0 &&
        (pinnable || (rt->backend->pinned == NULL && emulated != NULL))) {
        rt->cache_ops = pinnable ? (gr_host_cache_ops){rt->backend->pinned->pin,
                                                       rt->backend->pinned->unpin,
                                                       rt->backend->dma_ready}
                                 : *emulated;
        pthread_mutex_lock(&process_cache_mu);
        if (process_cache != NULL) {
            pthread_mutex_unlock(&process_cache_mu);
            return gr__error_set(err, GR_ERR_INVALID_USAGE, GR_NO_INDEX, NULL,
                                 "host_cache_bytes: another runtime of this process has a "
                                 "registration cache; one per process (a registration is "
                                 "the whole process's)");
        }
        if (gr__host_cache_create(rt->cfg.host_cache_bytes, &rt->cache_ops,
                                  &rt->host_cache) != GR_OK) {
            pthread_mutex_unlock(&process_cache_mu);
            return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
        }
        process_cache = rt->host_cache;
        atomic_store(&process_cache_on, true);
        pthread_mutex_unlock(&process_cache_mu);
        rt->env.host_cache = rt->host_cache;
        rt->env.host_class = host_class;
        rt->env.host_epoch = host_epoch;
    }
    return GR_OK;
}

/* Counters for every worker: before the workers start. */
static gr_status observe_open(gr_runtime *rt, gr_error_info *err)
{
    if (gr__stats_create(rt->n_devices * rt->cfg.workers_per_device, &rt->stats) != GR_OK)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    return GR_OK;
}

/* Units each worker may have in flight (worker.c): one, unless GR_UNITS_IN_FLIGHT=2 in the
 * environment and the backend launches apart (the next unit's submission then runs under
 * the copies of the one before). On the H200 two are no faster than one on the separate
 * pinned rows with three workers (docs/PERFORMANCE.md, "Defaults"), so one is the
 * default; the host backend's tests use two to run the worker's two-unit path. With
 * NVTX ranges on, one: a unit's ranges must nest. */
static uint32_t units_in_flight(const gr_runtime *rt)
{
    const char *env = getenv("GR_UNITS_IN_FLIGHT");
    bool apart = rt->backend->launch != NULL && rt->backend->finish != NULL;

    if (rt->env.trace || !apart || env == NULL || strcmp(env, "2") != 0)
        return 1;
    return GR_WORKER_SLOTS;
}

static gr_status start_workers(gr_runtime *rt, gr_error_info *err)
{
    uint32_t n = rt->n_devices * rt->cfg.workers_per_device;
    uint32_t in_flight = units_in_flight(rt);
    gr_status st = GR_OK;

    rt->workers = gr__calloc(n, sizeof(*rt->workers));
    if (rt->workers == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    for (uint32_t i = 0; i < n; i++) {
        gr_worker *w = &rt->workers[i];

        w->rt = rt;
        w->env = &rt->env;
        w->copier = rt->copier;
        w->id = i;
        w->dev = &rt->devices[i % rt->n_devices];
        w->in_flight = in_flight;
        if (gr__thread_create(&w->thread, "gr-worker", gr__worker_main, w) != 0) {
            st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                               "cannot create worker thread %u of %u", i, n);
            break;
        }
        w->started = true;
        rt->n_workers = i + 1;
    }
    /* Every started worker reports once, ready or failed (worker.c). */
    pthread_mutex_lock(&rt->mu);
    while (rt->workers_ready + rt->workers_failed < rt->n_workers)
        pthread_cond_wait(&rt->cond, &rt->mu);
    if (st == GR_OK && rt->workers_failed > 0) {
        st = rt->worker_error.status;
        if (err)
            *err = rt->worker_error;
    }
    pthread_mutex_unlock(&rt->mu);
    return st;
}

/* Steps 1 to 3 of the shutdown order (see the top of this file). */
static void runtime_shutdown(gr_runtime *rt)
{
    atomic_store(&rt->shutdown, true);
    gr__ring_shutdown(rt->ring);
    for (uint32_t d = 0; rt->devices != NULL && d < rt->n_devices; d++) {
        if (rt->devices[d].budget)
            gr__budget_shutdown(rt->devices[d].budget);
        if (rt->devices[d].arena)
            gr__arena_shutdown(rt->devices[d].arena);
    }
    pthread_mutex_lock(&rt->mu);
    while (stop_one_locked(rt, pick_any, 0, GR_ERR_SHUTDOWN))
        ;
    pthread_cond_broadcast(&rt->cond); /* workers parked on a lost device */
    pthread_mutex_unlock(&rt->mu);
}

/* Once per runtime, from the public calls only (a create that fails tears down too). */
static void log_shutdown(gr_runtime *rt)
{
    if (gr__log_enabled(&rt->log, GR_LOG_INFO) && !atomic_exchange(&rt->shutdown_logged, true)) {
        uint64_t live = 0;

        pthread_mutex_lock(&rt->mu);
        for (const gr_job *j = rt->live_jobs; j != NULL; j = j->live_next)
            live++;
        pthread_mutex_unlock(&rt->mu);
        gr__log_write(&rt->log, GR_LOG_INFO,
                      "runtime shutting down: %llu job(s) with indices still to end; queued "
                      "indices end as canceled, running iterations finish",
                      (unsigned long long)live);
    }
}

void gr_runtime_shutdown(gr_runtime *handle)
{
    gr_status st;
    /* Counted as a submitter is: a destroy racing on another thread claims the log line
     * (log_shutdown), then waits for the count to be zero; so either it waits for this
     * call, log line included, or it claimed the line before this call tries to, and no log
     * call of this runtime comes after the destroy returns (graphrun.h). */
    gr_runtime *rt = gr__runtime_enter(handle, &st);

    if (rt == NULL)
        return;
    log_shutdown(rt);
    runtime_shutdown(rt);
    gr__runtime_leave(rt);
}

/* The whole shutdown order (see the top of this file); also undoes a partial create. */
static void runtime_teardown(gr_runtime *rt)
{
    gr_task t;

    runtime_shutdown(rt);
    pthread_mutex_lock(&rt->mu);
    while (atomic_load(&rt->active_calls) > 0)
        pthread_cond_wait(&rt->cond, &rt->mu);
    pthread_mutex_unlock(&rt->mu);

    for (uint32_t i = 0; i < rt->n_workers; i++)
        if (rt->workers[i].started)
            pthread_join(rt->workers[i].thread, NULL);
    /* No copy runs any more: what the cache registered goes now, so that the caller may
     * free its memory once destroy returns (graphrun.h: host_cache_bytes). Other runtimes
     * stop asking it first. */
    pthread_mutex_lock(&process_cache_mu);
    if (rt->host_cache != NULL && process_cache == rt->host_cache) {
        process_cache = NULL;
        atomic_store(&process_cache_on, false);
    }
    pthread_mutex_unlock(&process_cache_mu);
    gr__host_cache_close(rt->host_cache);
    while (gr__ring_try_pop(rt->ring, &t)) {
        /* A task is a unit (units.h), not an index: its parts end as those of a hand back
         * the ring refused (worker.c), so an index that another unit started still ends. */
        gr__job_drop_unit(t.job, t.index, GR_ERR_SHUTDOWN);
        gr__job_unref(t.job);
    }
    /* Every index has ended; wait for the callbacks still running on other threads (a
     * thread that canceled a job runs its callback itself). */
    pthread_mutex_lock(&rt->mu);
    while (rt->unfinished_jobs > 0)
        pthread_cond_wait(&rt->cond, &rt->mu);
    pthread_mutex_unlock(&rt->mu);
    gr__runtime_close_completion_fd(rt);
    if (rt->deadline_started) {
        pthread_mutex_lock(&rt->mu);
        rt->deadline_stop = true;
        pthread_cond_signal(&rt->deadline_cond);
        pthread_mutex_unlock(&rt->mu);
        pthread_join(rt->deadline_thread, NULL);
        rt->deadline_started = false;
    }
    for (uint32_t d = 0; rt->devices != NULL && d < rt->n_devices; d++)
        if (rt->devices[d].region)
            rt->backend->device_close(&rt->devices[d]);
}

static gr_status runtime_create(const gr_config *cfg, gr_runtime **out, gr_error_info *err)
{
    gr_config full;
    uint64_t fault_token = 0;
    const char *plan;
    gr_runtime *rt;
    gr_status st;

    if (out != NULL)
        *out = NULL;
    if (cfg == NULL || out == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "config and out must not be NULL");
    if ((st = gr__config_check(cfg, &full, err)) != GR_OK)
        return st;
    cfg = &full;
    plan = cfg->testing_ != NULL ? cfg->testing_ : getenv("GR_FAULT");
    if (plan != NULL && (st = gr__fault_arm(plan, &fault_token, err)) != GR_OK)
        return st;
    rt = gr__calloc(1, sizeof(*rt));
    if (rt == NULL) {
        gr__fault_disarm(fault_token);
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    }
    rt->cfg = *cfg;
    rt->cfg.testing_ = NULL; /* the caller's plan need not outlive this call */
    pthread_once(&atfork_once, register_atfork);
    rt->fork_generation = atomic_load(&fork_generation);
    rt->fault_token = fault_token;
    gr__logger_init(&rt->log, cfg);
    atomic_init(&rt->refs, 1);
    rt->completion_fd = -1;
    if (pthread_mutex_init(&rt->mu, NULL) != 0)
        goto out_free_rt;
    if (pthread_mutex_init(&rt->reap_mu, NULL) != 0)
        goto out_destroy_mu;
    if (gr__cond_init(&rt->cond) != 0)
        goto out_destroy_reap_mu;
    if (gr__cond_init(&rt->deadline_cond) != 0)
        goto out_destroy_cond;
    if (gr__ring_create(cfg->ring_capacity, &rt->ring) != GR_OK)
        goto out_destroy_deadline_cond;
    if (gr__copier_create(gr__config_copy_threads(cfg), &rt->copier) != GR_OK) {
        gr__ring_destroy(rt->ring);
        goto out_destroy_deadline_cond;
    }

    if ((st = choose_backend(rt, err)) != GR_OK || (st = select_devices(rt, err)) != GR_OK ||
        (st = open_devices(rt, err)) != GR_OK)
        goto out_teardown;
    rt->cfg.devices = NULL; /* the caller's array: copied into the devices' ordinals */
    if ((st = observe_open(rt, err)) != GR_OK || (st = start_workers(rt, err)) != GR_OK)
        goto out_teardown;
    if (gr__thread_create(&rt->deadline_thread, "gr-deadline", deadline_main, rt) != 0) {
        st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                           "cannot create the deadline thread");
        goto out_teardown;
    }
    rt->deadline_started = true;
    if (gr__handle_new(rt, GR_HANDLE_RUNTIME, &rt->handle) != GR_OK) {
        st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                           "no memory for the runtime's handle");
        goto out_teardown;
    }
    *out = (gr_runtime *)rt->handle;
    return GR_OK;

out_teardown:
    runtime_teardown(rt);
    gr__runtime_unref(rt);
    gr__fault_disarm(fault_token);
    return st;
out_destroy_deadline_cond:
    pthread_cond_destroy(&rt->deadline_cond);
out_destroy_cond:
    pthread_cond_destroy(&rt->cond);
out_destroy_reap_mu:
    pthread_mutex_destroy(&rt->reap_mu);
out_destroy_mu:
    pthread_mutex_destroy(&rt->mu);
out_free_rt:
    free(rt);
    gr__fault_disarm(fault_token);
    return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
}

static void log_units(char *buf, size_t size, uint64_t bytes)
{
    if (bytes >= (1ull << 30) && bytes % (1ull << 20) == 0)
        snprintf(buf, size, "%.2f GiB", (double)bytes / (1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, size, "%.2f MiB", (double)bytes / (1ull << 20));
    else
        snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
}

gr_status gr_runtime_create(const gr_config *cfg, gr_runtime **out, gr_error_info *err)
{
    gr_error_info local;
    gr_error_info *e = err ? err : &local;
    gr_status st = runtime_create(cfg, out, e);
    gr_runtime *rt = out && *out ? gr__runtime_get(*out, &(gr_status){GR_OK}) : NULL;
    gr_logger lg;
    char budget[32];

    if (st != GR_OK) {
        /* The callback in a config that failed its checks may be garbage: only a config
         * that passed them gets a message. */
        gr_config full;

        if (cfg != NULL && gr__config_check(cfg, &full, NULL) == GR_OK) {
            gr__logger_init(&lg, &full);
            GR_LOG(&lg, GR_LOG_ERROR, "runtime could not start: %s: %s", gr_status_str(st),
                   e->message);
        }
        return st;
    }
    if (rt->fell_back)
        GR_LOG(&rt->log, GR_LOG_WARN, "%s", rt->backend_note);
    if (gr__log_enabled(&rt->log, GR_LOG_INFO)) {
        log_units(budget, sizeof(budget), gr__arena_size(rt->devices[0].arena));
        gr__log_write(&rt->log, GR_LOG_INFO,
                      "runtime started: %s backend (%s), %u device(s), %u worker(s) per "
                      "device, budget %s per device, ring %u, split_tensors %u%s",
                      rt->backend->name, rt->backend_note, rt->n_devices,
                      rt->cfg.workers_per_device, budget, rt->cfg.ring_capacity,
                      rt->cfg.split_tensors, rt->env.trace ? ", NVTX ranges on" : "");
    }
    return GR_OK;
}

void gr_runtime_destroy(gr_runtime *handle)
{
    uint64_t fault_token;
    gr_status st;
    gr_runtime *rt;

    /* NULL, a second destroy, or a forked child (where the runtime's threads do not exist
     * and its locks may be held forever: the parent owns it, and the child's exit returns
     * the memory): nothing to do. */
    if ((rt = gr__runtime_acquire(handle, &st)) == NULL)
        return;
    if (gr__in_callback()) {
        /* Destroy waits for every callback to return, this one included: it would never
         * return. Shut down instead, and leave the handle to a destroy from elsewhere. */
        log_shutdown(rt);
        runtime_shutdown(rt);
        gr__runtime_unref(rt);
        return;
    }
    /* Two destroys racing on different threads: only the one that releases the handle goes
     * on; the other returns, as a second destroy does. */
    if (!gr__handle_release(rt->handle)) {
        gr__runtime_unref(rt);
        return;
    }
    gr__runtime_unref(rt); /* the creator's reference, below, keeps it until the end */
    fault_token = rt->fault_token;
    log_shutdown(rt);
    runtime_teardown(rt);
    if (gr__log_enabled(&rt->log, GR_LOG_INFO)) {
        const gr_stats_state *s = rt->stats;

        gr__log_write(&rt->log, GR_LOG_INFO,
                      "runtime stopped: %llu job(s) submitted, %llu completed, %llu failed",
                      (unsigned long long)atomic_load(&s->jobs_submitted),
                      (unsigned long long)atomic_load(&s->jobs_completed),
                      (unsigned long long)atomic_load(&s->jobs_failed));
    }
    gr__runtime_unref(rt);
    gr__fault_disarm(fault_token);
}

/*
 * runtime.h - the runtime object as its modules (runtime.c, job.c, worker.c) see it.
 */
#ifndef GR_RUNTIME_H
#define GR_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "runtime/constants.h"
#include "runtime/hostcache.h"
#include <graphrun.h>
#include "runtime/job.h"
#include "runtime/base/log.h"
#include "runtime/core/ring.h"
#include "runtime/stats.h"
#include "runtime/units.h"

struct gr_runtime {
    /* The caller's reference plus one per job not yet freed: jobs may outlive
     * gr_runtime_destroy, and their calls (cancel, destroy) still touch the budgets, the
     * arenas, the ring and the lock below, which are freed with the last reference. */
    atomic_uint refs;
    gr_config cfg;
    const gr_backend_ops *backend;
    gr_backend_env env;     /* what the backend is told of the runtime (backend.h) */
    char backend_note[128]; /* how the backend was chosen */
    bool fell_back;         /* AUTO passed over a backend that could not run (the note: why) */
    uint64_t fault_token;   /* the fault plan this runtime armed (fault.h), 0 if none */
    uint64_t fork_generation; /* the process's fork generation at create (gr__forked) */
    uintptr_t handle;         /* what the caller holds (handle.h); released by destroy */

    uint32_t n_devices;
    gr_device *devices;
    gr_const_dev *const_devs; /* [n_devices]: each device's resident constants */
    uint32_t const_devs_ready; /* how many of them are initialized */
    uint32_t n_workers;
    gr_worker *workers;
    gr_ring *ring;
    struct gr_copier *copier; /* gathers and scatters staged units */
    struct gr_host_cache *host_cache; /* the registration cache; NULL when off */
    gr_host_cache_ops cache_ops;      /* how it pins: the backend's pinned memory */

    atomic_bool shutdown;
    atomic_uint active_calls;    /* threads inside gr_job_submit or gr_runtime_shutdown */
    atomic_uint devices_lost;    /* devices marked lost (sticky device error) */
    _Atomic uint64_t pinned_fallbacks; /* staging buffers that had to be pageable */
    atomic_bool copy_refusal_logged;   /* gr__runtime_copy_refused logged one already */

    /* Lock order: rt->mu before nothing else; never held across a backend call or a
     * callback. Guards the fields below. */
    pthread_mutex_t mu;
    pthread_cond_t cond;          /* worker start-up, submit drain */
    pthread_cond_t deadline_cond; /* wakes the deadline thread */
    uint32_t workers_ready, workers_failed;
    gr_error_info worker_error;
    gr_job *live_jobs;      /* accepted jobs that still have indices to end */
    uint64_t unfinished_jobs; /* accepted jobs not yet complete (callback not returned) */
    bool deadline_stop;
    pthread_t deadline_thread;
    bool deadline_started;

    /* The completion queue (job.c), guarded by reap_mu, a leaf lock (taken inside a
     * job's mu, so that a job is queued in the same moment it becomes complete): complete
     * notify jobs not yet reaped or destroyed, in completion order, and its eventfd,
     * readable exactly while the queue is not empty (-1 until asked for; closed, and
     * reap_closed set, by destroy). */
    pthread_mutex_t reap_mu;
    gr_job *reap_head, *reap_tail;
    int completion_fd;
    bool reap_closed;

    /* Observability, set up before the workers start and read-only after. */
    gr_logger log;          /* the config's callback and level, GR_LOG applied */
    gr_stats_state *stats;  /* counters (stats.h) */
    atomic_bool shutdown_logged;
};

void gr__runtime_ref(struct gr_runtime *rt);
void gr__runtime_unref(struct gr_runtime *rt);

/* The list of live jobs, which shutdown stops and the deadline thread watches: add a job
 * before its tasks are queued; remove it when it completes. Any thread. */
void gr__runtime_track_job(struct gr_runtime *rt, gr_job *job);
void gr__runtime_untrack_job(struct gr_runtime *rt, gr_job *job);

/* A job has completed: its callback has returned and its waiters are woken. */
void gr__runtime_job_finished(struct gr_runtime *rt);

/* Close the completion queue's descriptor (gr_runtime_destroy, once every job is
 * complete). */
void gr__runtime_close_completion_fd(struct gr_runtime *rt);

/* Mark a device lost (idempotent): its workers stop taking work while another device
 * remains; when every device is lost they fail what is left. Any thread. */
void gr__runtime_device_lost(struct gr_runtime *rt, gr_device *dev);

/* A sticky error ruined worker `w`'s private context: it takes no more work; when every
 * worker of its device has retired, the device is lost. Called on the worker's thread. */
void gr__runtime_worker_retired(struct gr_runtime *rt, gr_worker *w);

/* The runtime behind a caller's handle, or NULL with *st set: GR_ERR_INVALID_ARGUMENT for
 * NULL, GR_ERR_INVALID_USAGE for a destroyed runtime's handle or a call from a forked
 * child. Any thread. */
struct gr_runtime *gr__runtime_get(const struct gr_runtime *handle, gr_status *st);

/* The same, with a reference taken (give it back with gr__runtime_unref) under the handle
 * table's lock: safe against a gr_runtime_destroy racing on another thread, which either
 * comes after (and the reference keeps the memory alive) or before (and this returns NULL).
 * For the calls that many threads make while one may destroy: gr_job_submit,
 * gr_runtime_shutdown. Any thread. */
struct gr_runtime *gr__runtime_acquire(const struct gr_runtime *handle, gr_status *st);

/* gr__runtime_acquire for a call that gr_runtime_destroy must wait for (gr_job_submit,
 * gr_runtime_shutdown): also counted in active_calls. seq_cst, paired with the shutdown
 * store: either the destroy waits for this call, or the call sees the shutdown. End it with
 * gr__runtime_leave, which gives the reference back too. Any thread. */
struct gr_runtime *gr__runtime_enter(const struct gr_runtime *handle, gr_status *st);
void gr__runtime_leave(struct gr_runtime *rt);

/* Device `device` of the runtime behind a caller's handle, or NULL with *st set: as
 * gr__runtime_get, and GR_ERR_INVALID_ARGUMENT for a device out of range. Any thread. */
struct gr_device *gr__runtime_device(const struct gr_runtime *handle, uint32_t device,
                                     gr_status *st);

/* Whether the calling thread is running a job's completion callback. */
bool gr__in_callback(void);

/* Whether this is a child forked after the runtime was created. The child has a copy of the
 * runtime's memory (locks possibly held by threads that do not exist in it) but none of its
 * threads, and CUDA cannot be used in it: every call from the child must be refused, before
 * it takes any lock. Any thread. */
bool gr__forked(const struct gr_runtime *rt);

/* A staging buffer of `bytes` had to be ordinary memory: pinned memory could not be had.
 * Counted (gr_stats.staging_pageable); the first one is logged as a warning. Any thread. */
void gr__runtime_pinned_fallback(struct gr_runtime *rt, uint64_t bytes);

/* The driver refused the copies of a unit (its first tensor `index`) as laid out (`why`),
 * and the worker runs it again
 * staged (worker.c): the first time in the runtime's life it is logged at debug, with the
 * driver's words. Any thread. */
void gr__runtime_copy_refused(struct gr_runtime *rt, uint64_t index, const gr_error_info *why);

/* Wake every sleeper that may be waiting on behalf of a stopped job. Any thread. */
void gr__runtime_wake_waiters(struct gr_runtime *rt);

/* Plan the units of a job's tensors (units.h) for this runtime's budget, workers, staging
 * and batching settings, cut only at multiples of `cut` elements (gr_job_options.cut_elems;
 * 0 or 1: anywhere). */
gr_status gr__runtime_plan_units(struct gr_runtime *rt, const gr_graph *g, const gr_tensor *t,
                                 uint64_t count, const gr_host_hold *hold, uint64_t cut,
                                 gr_unit **units, uint64_t *n_units, uint32_t **pending);

/* The worker thread's body (worker.c). */
void *gr__worker_main(void *arg);

#endif /* GR_RUNTIME_H */

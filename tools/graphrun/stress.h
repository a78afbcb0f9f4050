/*
 * stress.h - the runtime under many submitting threads, for `graphrun stress` and
 * tests/stress_runtime: random tensor sizes, a budget of a few tensors, a small ring, and
 * jobs that are waited for, canceled, given short deadlines, detached or released early;
 * through the built-in seed kernel, the same as an expression kernel, a kernel registered
 * as a user would (a C function for the host backend, CUDA C compiled by NVRTC for the
 * GPU) and a float16 graph. Beside them, three concurrent features: the completion queue
 * (notify jobs left to reaper threads polling gr_runtime_completion_fd, some destroyed before
 * they can be reaped; waits on a job's gr_job_completion_fd), kernel registration churn
 * (kernels registered, used, and unregistered while their jobs run; each destroy callback
 * once, and only after its last graph and job), and the registration cache (jobs over the
 * same pageable ranges again and again, registered, hit and evicted; its pins emulated and
 * checked on the host backend). Optionally with a fault plan armed for the whole run (random
 * rules, runtime/base/fault.h): faults then land amid the jobs in flight, and a failed index
 * must have failed with a status the plan's sites produce. Every promise is checked and
 * every breach counted (see gr_stress_report).
 */
#ifndef GR_STRESS_H
#define GR_STRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/tensor_set.h"

typedef struct gr_stress_config {
    gr_config cfg;           /* backend, devices (host), workers, contexts; budget computed */
    unsigned threads;        /* submitting threads */
    double duration_s;
    uint64_t seed;
    uint64_t max_elems;      /* 0: 16384 on the host backend, 1M on CUDA */
    unsigned budget_tensors; /* budget = this many largest iterations (default 3) */
    gr_mem_kind memory;
    bool mixed_memory;       /* submitters take pinned, pageable, registered in turn */
    /* A fault plan armed for the whole run (gr_testing_set_fault_plan sets it), or NULL. */
    const char *faults;
} gr_stress_config;

/* The plan `graphrun stress --fault-rate N` arms: a random one in every N calls of each
 * transient site the run reaches after create (arena placement, graph instantiate, update
 * and launch), seeded by `seed`. Sites that create also calls (alloc, thread, event,
 * stream, device_alloc, pin, register) are left out: a fault there would fail create or
 * be recovered before any job runs. Writes at most `size` bytes to `plan`. */
void gr_stress_fault_plan(uint64_t one_in, uint64_t seed, char *plan, size_t size);

typedef struct gr_stress_report {
    uint64_t jobs, done, failed, canceled; /* indices by final state */
    /* Jobs of the user kernel's graph (the rest are the seed's), or why none ran. */
    uint64_t user_jobs;
    char user_skipped[256];
    uint64_t half_jobs; /* jobs of the float16 graph */
    uint64_t expr_jobs; /* jobs of the seed as an expression kernel */
    uint64_t memory_jobs[3]; /* jobs by memory kind asked for: pageable, pinned, registered */
    /* The completion queue: jobs submitted with notify and not waited for; of those, reaped
     * by the reapers (polling gr_runtime_completion_fd) and destroyed by their submitter
     * before any reaper could take them; waits on a job's own gr_job_completion_fd. */
    uint64_t notify_jobs, notify_reaped, notify_destroyed_early, fd_waits;
    /* Kernel registration churn: kernels registered and unregistered while their jobs
     * ran, jobs of them, destroy callbacks run. */
    uint64_t churn_kernels, churn_jobs, churn_destroys;
    /* The registration cache: jobs over the cache submitters' reused ranges, the runtime's
     * counters at the end (gr_stats host_cache_*), gr_host_forget calls that succeeded, and
     * whether the pins were the stress's emulation (host backend). */
    uint64_t cache_jobs, cache_registrations, cache_hits, cache_evictions, cache_failures;
    uint64_t cache_forgets;
    bool cache_emulated;
    /* Faults: injected by the plan, per site (runtime/base/fault.h's order); indices failed
     * with a status the plan's sites produce; submissions refused for an injected fault. */
    uint64_t injected[16];
    uint64_t fault_failed, fault_refused;
    /* Host memory (resident set) after create, its peak, at a quarter of the run (after
     * the warm-up) and at the end before destroy; process threads before create and after
     * destroy, and graphrun's own running (gr__threads_live: runtime/base/fault.h). */
    uint64_t rss_start, rss_peak, rss_quarter, rss_end;
    long threads_before, threads_after, gr_threads_before, gr_threads_after;
    uint64_t budget_bytes, peak_budget, budget_samples;
    /* Breaches: every one must be 0. */
    uint64_t budget_violations; /* budget in use above the budget, at a sample */
    uint64_t wrong_outputs;     /* a done index whose output is not the reference */
    uint64_t written_unfinished; /* an unfinished index with an element that is neither its
                                    input nor its result (chunks done before a stop are) */
    uint64_t callback_errors;   /* a job whose callback did not run exactly once */
    uint64_t count_errors;      /* progress counts that do not add up, states not final */
    uint64_t anomalies;         /* the runtime's own count of indices ended twice */
    uint64_t submit_errors;     /* submissions refused for no reason */
    uint64_t leftover;          /* budget still in use at the end */
    uint64_t wrong_status;      /* a failed index whose status nothing in the run explains */
    uint64_t threads_left;      /* more of graphrun's threads after destroy than before
                                   create (the CUDA driver's and tsan's are not counted) */
    uint64_t rss_growth;        /* runs of 60 s or more: the resident set grew from the
                                   quarter to the end by over max(64 MiB, a quarter) */
    uint64_t reap_errors;       /* a reaped job not complete, reaped twice, not a live notify
                                   job (destroyed, or without notify); a notify job complete
                                   for a second and never reaped; the queue not empty or its
                                   descriptor readable at the end */
    uint64_t fd_errors;         /* a job's completion descriptor readable before the job was
                                   complete and its callback returned, or none to be had */
    uint64_t churn_errors;      /* a kernel's destroy run before it was unregistered, its
                                   graph destroyed and its jobs ended, or not exactly once; a
                                   name a graph could still use after unregister; register
                                   or unregister refused */
    uint64_t cache_errors;      /* the cache above its capacity; gr_host_forget refused once
                                   the jobs over a range ended; with emulated pins, a range
                                   pinned twice, unpinned when not pinned, left pinned after
                                   destroy, or a failed registration */
    char first_breach[256];
} gr_stress_report;

/* Run it. Returns GR_OK when it ran (breaches are in the report), or why it could not start
 * (runtime create). A job that does not complete within duration + 60 s is a hang: the
 * process prints what it waited for and exits with status 1. */
gr_status gr_stress_run(const gr_stress_config *c, gr_stress_report *r, gr_error_info *err);

/* The sum of the breaches. */
uint64_t gr_stress_breaches(const gr_stress_report *r);

/* One line: what ran and every count. */
void gr_stress_print(const gr_stress_config *c, const gr_stress_report *r);

#endif /* GR_STRESS_H */

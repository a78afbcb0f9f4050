/*
 * stress_runtime.c - the whole runtime under many submitting threads, on the host backend:
 * 32+ submitters, 16 workers on two devices, random sizes, a budget of three tensors, a
 * small ring, random cancellations, deadlines, detached and released jobs. What is checked,
 * and how, is in tools/graphrun/stress.c; this binary fails unless every breach count is 0.
 * `stress_runtime_faults` does the same with graphrun stress --fault-rate's plan armed for
 * the whole run (one in 50 calls of each transient site: on the host backend the arena's
 * placements), pinned, pageable and registered tensors mixed: faults land amid the jobs in
 * flight, and every promise still holds. Both runs also cover the completion queue (notify
 * jobs reaped by threads polling the runtime's descriptor, some destroyed before they could
 * be; waits on a job's own descriptor), kernels registered and unregistered while their jobs
 * run, and the registration cache with its pins emulated: each of these must have run.
 *
 *   stress_runtime [--threads N] [--duration SECONDS] [--seed X]
 */
#include "runtime/base/fault.h"
#include "tests/testing.h"
#include "tools/graphrun/stress.h"

static gr_stress_opts opt = {32, 1.0, 1};

static void run(const char *faults)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_stress_config c;
    gr_stress_report r;
    gr_error_info err;

    memset(&c, 0, sizeof(c));
    cfg.backend = GR_BACKEND_HOST;
    cfg.host_devices = 2;
    cfg.workers_per_device = 8;
    cfg.ring_capacity = 64;
    c.cfg = cfg;
    c.threads = opt.threads;
    c.duration_s = opt.duration_s;
    c.seed = opt.seed;
    c.budget_tensors = 3;
    c.memory = GR_MEM_PAGEABLE;
    c.mixed_memory = faults != NULL;
    c.faults = faults;
    if (gr_stress_run(&c, &r, &err) != GR_OK)
        GR_TEST_FAIL("cannot start: %s", err.message);
    gr_stress_print(&c, &r);
    ASSERT_GT(r.jobs, 0);
    ASSERT_GT(r.done, 0);
    /* The host backend runs the user kernel's C version: a quarter of the jobs go through
     * it, and a quarter through the float16 graph, drawn at random. A sixteenth is over
     * four standard deviations below a quarter from 100 jobs on (a short run under a
     * sanitizer makes a few hundred). */
    ASSERT_STR_EQ(r.user_skipped, "");
    ASSERT_GT(r.user_jobs, 0);
    ASSERT_GT(r.half_jobs, 0);
    if (r.jobs >= 100) {
        ASSERT_GT(r.user_jobs, r.jobs / 16);
        ASSERT_GT(r.half_jobs, r.jobs / 16);
    }
    ASSERT_LT(r.user_jobs + r.half_jobs + r.expr_jobs, r.jobs);
    ASSERT_GT(r.expr_jobs, 0);
    /* The completion queue: notify jobs reaped, some destroyed before they could be, and
     * waits on a job's own descriptor; every notify job accounted for. */
    ASSERT_GT(r.notify_jobs, 0);
    ASSERT_GT(r.notify_reaped, 0);
    ASSERT_GT(r.notify_destroyed_early, 0);
    ASSERT_EQ_U64(r.notify_reaped + r.notify_destroyed_early, r.notify_jobs);
    ASSERT_GT(r.fd_waits, 0);
    /* Kernel churn: kernels registered, used, unregistered, each destroyed once. */
    ASSERT_GT(r.churn_kernels, 0);
    ASSERT_GT(r.churn_jobs, 0);
    ASSERT_EQ_U64(r.churn_destroys, r.churn_kernels);
    /* The registration cache, its pins emulated on the host backend: ranges registered,
     * hit and evicted, and forgotten at the end. */
    ASSERT_TRUE(r.cache_emulated);
    ASSERT_GT(r.cache_jobs, 0);
    ASSERT_GT(r.cache_registrations, 0);
    ASSERT_GT(r.cache_hits, 0);
    ASSERT_GT(r.cache_evictions, 0);
    ASSERT_GT(r.cache_forgets, 0);
    ASSERT_EQ_U64(r.cache_failures, 0);
    ASSERT_EQ_U64(gr_stress_breaches(&r), 0);
    if (faults != NULL) {
        ASSERT_GT(r.injected[GR_FAULT_ARENA], 0);
        ASSERT_GT(r.fault_failed, 0);
        for (int k = 0; k < 3; k++)
            ASSERT_GT(r.memory_jobs[k], 0);
    }
}

static void stress(void)
{
    run(NULL);
}

static void stress_faults(void)
{
    char plan[256];

    gr_stress_fault_plan(50, opt.seed, plan, sizeof(plan));
    run(plan);
}

int main(int argc, char **argv)
{
    static const gr_test_case cases[] = {{"stress_runtime", stress},
                                         {"stress_runtime_faults", stress_faults}};

    gr_stress_parse(argc, argv, &opt);
    return gr_test_run(cases, 2, 1, argv, gr_stress_timeout_s(&opt));
}

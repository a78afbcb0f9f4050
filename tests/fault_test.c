/*
 * fault_test.c - the fault-injection sweep on the host backend: for every site
 * the host backend reaches, and every call N of it that one job makes, fail that call (once,
 * and from then on) and check that the runtime keeps its promises:
 *
 *   - runtime create and job submit either succeed or fail with a clear status and message;
 *   - an accepted job completes (no hang: every wait is bounded), every index ends exactly
 *     once, done indices hold the right result and failed ones were not written (chunks of
 *     a split tensor excepted: each is then either untouched or right);
 *   - failures that can be recovered from are: a pinned allocation that fails falls back to
 *     ordinary memory and the job is done; a copy-pool thread that cannot start leaves a
 *     smaller pool; a copy the driver refuses as laid out runs again staged, and the job is
 *     done;
 *   - afterwards the budget in use is zero, and destroy returns (bounded by an alarm);
 *     leaks are caught by the asan config of tools/test.
 *
 * How many calls each site gets is learned first from a run with the empty plan, which
 * counts without failing; a site the workload never reaches fails the test, so the sweep
 * cannot pass by testing nothing. `cuda_fault_sweep` does the same with the CUDA backend
 * and every CUDA site; it SKIPs without a GPU and runs on the GPU machine (tools/gpu_suite).
 *
 * The random rules (SITE:~N, seed=S) are checked here on their own: parsing and refusals,
 * the rate within statistical bounds, the same failing call numbers for the same seed
 * (from one thread or from several), and the workload's job under a random arena plan.
 * Under load, with hundreds of jobs in flight, they are graphrun stress --fault-rate's
 * (tests/stress_runtime's fault_rate case).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/fault.h"
#include "runtime/handle.h"
#include "runtime/job.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

#define SEED 61
#define MAX_CALLS 400 /* a sweep covers calls 1..min(count, MAX_CALLS) */
/* The copy site's calls are all alike, one per copy of a unit handed to the backend, and a
 * refusal at any of them takes the same path (the unit runs again staged): its first calls
 * cover what the others would. */
#define MAX_COPY_CALLS 16
#define JOB_TIMEOUT_NS (30ll * 1000000000)

/* The workload: tensors larger than a worker's share of the budget (cut into chunks), small
 * ones in separate allocations (packed into batches, gathered through staging), and medium
 * ones that run whole. */
static const uint64_t sizes[] = {400000, 700, 20000, 900, 1500, 400000, 800, 20000,
                                 600,    1000, 1200, 700, 20000, 950, 650, 30000};
#define COUNT (sizeof(sizes) / sizeof(sizes[0]))

typedef struct outcome {
    gr_status create, submit, result;
    uint64_t done, failed;
} outcome;

static float *data[COUNT];
static bool pinned[COUNT]; /* data[i] from gr_host_alloc, else malloc */
static gr_tensor tensors[COUNT];
static gr_backend backend = GR_BACKEND_HOST;

static void on_alarm(int sig)
{
    (void)sig;
    gr_test_fail_from_signal("a wait or destroy hung (alarm)");
}

/* On CUDA, malloc'd tensors are always staged, and the copy site spares staging: the even
 * tensors are pinned (gr_host_alloc), so that units copy them directly and a worker's first
 * graph, built for the first tensor's chunks, adds copy nodes of their memory. */
static void fill(void)
{
    for (uint64_t i = 0; i < COUNT; i++) {
        if (data[i] == NULL) {
            pinned[i] = backend == GR_BACKEND_CUDA && i % 2 == 0;
            if (pinned[i])
                ASSERT_STATUS(gr_host_alloc(sizes[i] * sizeof(float), (void **)&data[i]), GR_OK);
            else
                data[i] = malloc(sizes[i] * sizeof(float));
            ASSERT_TRUE(data[i] != NULL);
        }
        gr_workload_fill(data[i], 0, sizes[i], SEED, i);
        tensors[i] = (gr_tensor){{data[i]}, {data[i]}, sizes[i], 0, {0}};
    }
}

/* Host: 2 emulated devices of 256 KiB. CUDA: the GPU's 2 MiB allocation granule is the
 * smallest budget; either way a worker's share is under 1.6 MB, so the largest tensors are
 * cut into chunks. */
static gr_config config(const char *plan)
{
    gr_config cfg = GR_CONFIG_INIT;

    cfg.backend = backend;
    cfg.host_devices = 2;
    cfg.workers_per_device = 2;
    cfg.budget_bytes = backend == GR_BACKEND_CUDA ? 2 << 20 : 256 << 10;
    cfg.copy_threads = 2;
    cfg.staging_bytes = 64 << 10;
    cfg.batch_below_bytes = 8 << 10;
    gr_testing_set_fault_plan(&cfg, plan);
    return cfg;
}

/* Check one finished job's indices against the reference; count them into *o. */
static void check_indices(gr_job *job, outcome *o, const char *plan)
{
    for (uint64_t i = 0; i < COUNT; i++) {
        gr_index_state state;
        gr_status status;
        uint64_t bad, where;

        ASSERT_STATUS(gr_job_index_get(job, i, &state, &status), GR_OK);
        if (state == GR_INDEX_DONE) {
            o->done++;
            bad = gr_workload_check_seed(data[i], 0, sizes[i], SEED, i, &where);
        } else {
            if (state != GR_INDEX_FAILED)
                GR_TEST_FAIL("plan %s: index %llu ended in state %d", plan,
                             (unsigned long long)i, (int)state);
            o->failed++;
            bad = gr_workload_check_partial(data[i], 0, sizes[i], SEED, i, &where);
        }
        if (bad != 0)
            GR_TEST_FAIL("plan %s: index %llu (state %d): %llu elements wrong, first at %llu",
                         plan, (unsigned long long)i, (int)state, (unsigned long long)bad,
                         (unsigned long long)where);
    }
}

/* Run the workload once under `plan`; every promise above is checked here. */
static outcome run_plan(const char *plan)
{
    gr_config cfg = config(plan);
    outcome o = {GR_OK, GR_OK, GR_OK, 0, 0};
    gr_device_stats stats;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    fill();
    memset(&err, 0, sizeof(err));
    alarm(120);
    o.create = gr_runtime_create(&cfg, &rt, &err);
    if (o.create != GR_OK) {
        ASSERT_PTR_EQ(rt, NULL);
        if (err.message[0] == '\0')
            GR_TEST_FAIL("plan %s: create failed (%s) without a message", plan,
                         gr_status_str(o.create));
        alarm(0);
        return o;
    }
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    o.submit = gr_job_submit(rt, g, tensors, COUNT, NULL, &job, &err);
    if (o.submit != GR_OK) {
        ASSERT_PTR_EQ(job, NULL);
        if (err.message[0] == '\0')
            GR_TEST_FAIL("plan %s: submit failed (%s) without a message", plan,
                         gr_status_str(o.submit));
        for (uint64_t i = 0; i < COUNT; i++) /* a refused job touches nothing */
            ASSERT_EQ_U64(gr_workload_check_input(data[i], 0, sizes[i], SEED, i, NULL), 0);
    } else {
        if (gr_job_wait(job, JOB_TIMEOUT_NS, &o.result) != GR_OK)
            GR_TEST_FAIL("plan %s: the job did not complete in 30 s", plan);
        ASSERT_EQ_U64(gr__job_anomalies(job), 0);
        check_indices(job, &o, plan);
        if (o.result != GR_OK) {
            gr_error_info first;

            ASSERT_STATUS(gr_job_error_get(job, &first), GR_OK);
            ASSERT_STATUS(first.status, o.result);
            if (first.message[0] == '\0')
                GR_TEST_FAIL("plan %s: job failed (%s) without a message", plan,
                             gr_status_str(o.result));
        }
        gr_job_destroy(job);
        gr_runtime_info info = GR_RUNTIME_INFO_INIT;

        ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_OK);
        for (uint32_t d = 0; d < info.device_count; d++) {
            ASSERT_STATUS(gr_runtime_device_stats(rt, d, &stats), GR_OK);
            if (stats.budget_in_use != 0)
                GR_TEST_FAIL("plan %s: device %u still holds %llu bytes of budget", plan, d,
                             (unsigned long long)stats.budget_in_use);
        }
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    alarm(0);
    return o;
}

/* The statuses each site may produce: it fails what it must, and nothing else. */
static void check_outcome(gr_fault_site site, const char *plan, const outcome *o)
{
    gr_status worst = o->create != GR_OK ? o->create : o->submit != GR_OK ? o->submit : o->result;

    if (worst != GR_OK && worst != GR_ERR_OUT_OF_MEMORY &&
        !(backend == GR_BACKEND_CUDA && worst == GR_ERR_CUDA))
        GR_TEST_FAIL("plan %s: unexpected status %s", plan, gr_status_str(worst));
    switch (site) {
    case GR_FAULT_PIN: /* recoverable: pageable staging instead */
        if (worst != GR_OK || o->done != COUNT)
            GR_TEST_FAIL("plan %s: %s, %llu of %zu done: a pinned allocation failure must "
                         "fall back, not fail", plan, gr_status_str(worst),
                         (unsigned long long)o->done, COUNT);
        break;
    case GR_FAULT_ARENA: /* only iterations need the arena */
        ASSERT_STATUS(o->create, GR_OK);
        ASSERT_STATUS(o->submit, GR_OK);
        ASSERT_TRUE(o->failed > 0);
        break;
    case GR_FAULT_DEVICE_ALLOC: /* only create reserves arenas */
        ASSERT_TRUE(o->create != GR_OK);
        break;
    case GR_FAULT_COPY: /* recoverable: the unit runs again staged */
        if (worst != GR_OK || o->done != COUNT)
            GR_TEST_FAIL("plan %s: %s, %llu of %zu done: a refused copy must be recovered by "
                         "running the unit staged", plan, gr_status_str(worst),
                         (unsigned long long)o->done, COUNT);
        break;
    case GR_FAULT_GRAPH_UPDATE: /* recoverable: the graph is built again */
        if (worst != GR_OK || o->done != COUNT)
            GR_TEST_FAIL("plan %s: %s, %llu of %zu done: a refused graph update must be "
                         "recovered by building the graph again", plan, gr_status_str(worst),
                         (unsigned long long)o->done, COUNT);
        break;
    case GR_FAULT_STREAM: /* only workers create streams, at create */
        ASSERT_TRUE(o->create != GR_OK);
        break;
    case GR_FAULT_GRAPH_INSTANTIATE:
    case GR_FAULT_GRAPH_LAUNCH: /* an iteration fails, the runtime goes on */
        ASSERT_STATUS(o->create, GR_OK);
        ASSERT_STATUS(o->submit, GR_OK);
        ASSERT_TRUE(o->failed > 0);
        break;
    case GR_FAULT_THREAD: /* create (workers, deadline thread) or a smaller copy pool */
        ASSERT_STATUS(o->submit, GR_OK);
        ASSERT_STATUS(o->result, GR_OK);
        break;
    default:
        break;
    }
}

static void sweep(const gr_fault_site *sites, size_t n_sites)
{
    uint64_t calls[GR_FAULT_SITE_COUNT];
    uint64_t runs = 0, failures = 0;
    outcome o;

    signal(SIGALRM, on_alarm);
    o = run_plan(""); /* counts only */
    ASSERT_STATUS(o.result, GR_OK);
    ASSERT_EQ_U64(o.done, COUNT);
    for (int s = 0; s < GR_FAULT_SITE_COUNT; s++)
        calls[s] = gr__fault_calls((gr_fault_site)s);
    for (size_t k = 0; k < n_sites; k++) {
        gr_fault_site site = sites[k];
        uint64_t cap = site == GR_FAULT_COPY ? MAX_COPY_CALLS : MAX_CALLS;
        uint64_t n_max = calls[site] < cap ? calls[site] : cap;

        if (calls[site] == 0)
            GR_TEST_FAIL("the workload never reaches site %s", gr__fault_site_name(site));
        printf("    site %-12s %4llu calls in a clean run, sweeping 1..%llu once and from "
               "then on\n", gr__fault_site_name(site), (unsigned long long)calls[site],
               (unsigned long long)n_max);
        for (uint64_t n = 1; n <= n_max; n++) {
            for (int always = 0; always < 2; always++) {
                char plan[64];

                snprintf(plan, sizeof(plan), "%s:%llu%s", gr__fault_site_name(site),
                         (unsigned long long)n, always ? "+" : "");
                o = run_plan(plan);
                check_outcome(site, plan, &o);
                runs++;
                failures += o.create != GR_OK || o.submit != GR_OK || o.result != GR_OK;
            }
        }
    }
    printf("    %llu faulty runs, %llu ended with a failure status, every one checked\n",
           (unsigned long long)runs, (unsigned long long)failures);
    ASSERT_TRUE(failures > 0);
    for (uint64_t i = 0; i < COUNT; i++) {
        if (pinned[i])
            gr_host_free(data[i]);
        else
            free(data[i]);
        data[i] = NULL;
    }
}

static void fault_sweep(void)
{
    static const gr_fault_site sites[] = {GR_FAULT_ALLOC, GR_FAULT_PIN, GR_FAULT_THREAD,
                                          GR_FAULT_ARENA, GR_FAULT_DEVICE_ALLOC, GR_FAULT_COPY};

    backend = GR_BACKEND_HOST;
    sweep(sites, sizeof(sites) / sizeof(sites[0]));
}

/* The same on the GPU, over every site the CUDA backend adds. */
static void cuda_fault_sweep(void)
{
    static const gr_fault_site sites[] = {
        GR_FAULT_ALLOC,  GR_FAULT_PIN,   GR_FAULT_THREAD,
        GR_FAULT_ARENA,  GR_FAULT_DEVICE_ALLOC, GR_FAULT_STREAM,
        GR_FAULT_EVENT,  GR_FAULT_GRAPH_INSTANTIATE, GR_FAULT_GRAPH_UPDATE,
        GR_FAULT_GRAPH_LAUNCH, GR_FAULT_COPY};

    REQUIRE_GPU();
    backend = GR_BACKEND_CUDA;
    sweep(sites, sizeof(sites) / sizeof(sites[0]));
    backend = GR_BACKEND_HOST;
}

/* The plan itself: malformed plans are refused with a message naming what is wrong, and
 * nothing is armed; a site named twice fails both calls. */
static void fault_plan_parsing(void)
{
    static const char *const bad[] = {"alloc",     "alloc:",  "alloc:0",  "alloc:x",
                                       "nosuch:1", "alloc:1x", ":1",       "alloc:-1",
                                       "alloc:1,", "alloc:99999999999999999999"};
    gr_error_info err;
    gr_runtime *rt;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gr_config cfg = config(bad[i]);

        /* "alloc:1," is a rule followed by an empty one: refused too. */
        ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(err.message, "fault plan");
        ASSERT_PTR_EQ(rt, NULL);
    }
    {
        gr_config cfg = config("pin:1,arena:2");
        uint64_t token;

        ASSERT_STATUS(gr__fault_arm("arena:1,arena:3+", &token, &err), GR_OK);
        ASSERT_TRUE(!gr__fault_hit(GR_FAULT_PIN));
        ASSERT_TRUE(gr__fault_hit(GR_FAULT_ARENA));
        ASSERT_TRUE(!gr__fault_hit(GR_FAULT_ARENA));
        ASSERT_TRUE(gr__fault_hit(GR_FAULT_ARENA));
        ASSERT_TRUE(gr__fault_hit(GR_FAULT_ARENA));
        ASSERT_EQ_U64(gr__fault_calls(GR_FAULT_ARENA), 4);
        ASSERT_EQ_U64(gr__fault_calls(GR_FAULT_PIN), 1);
        gr__fault_disarm(token);
        ASSERT_TRUE(!gr__fault_hit(GR_FAULT_ARENA));
        /* A valid plan through the config: the runtime starts and disarms it at destroy. */
        ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
        gr_runtime_destroy(rt);
        ASSERT_TRUE(!atomic_load(&gr__fault_armed));
    }
}

/* Random rules: what is refused, with the rule and the accepted forms in the message. */
static void fault_rate_parsing(void)
{
    static const char *const bad[] = {"arena:~",       "arena:~0",      "arena:~x",
                                       "arena:~5+",     "arena:~-3",     "arena:~~3",
                                       "seed=",         "seed=x",        "seed=-1",
                                       "seed=1,seed=2", "seed=1,arena:", "arena:~1e3"};
    gr_error_info err;
    uint64_t token;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        ASSERT_STATUS(gr__fault_arm(bad[i], &token, &err), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(err.message, "fault plan");
        ASSERT_STR_CONTAINS(err.message, bad[i]);
        ASSERT_STR_CONTAINS(err.message, "SITE:~N");
        ASSERT_TRUE(!atomic_load(&gr__fault_armed));
    }
    ASSERT_STATUS(gr__fault_arm("arena:~5", &token, &err), GR_OK);
    gr__fault_disarm(token);
    ASSERT_STATUS(gr__fault_arm("seed=18446744073709551615,pin:2,arena:~1", &token, &err),
                  GR_OK);
    ASSERT_TRUE(gr__fault_hit(GR_FAULT_ARENA)); /* one in 1: every call */
    ASSERT_TRUE(gr__fault_hit(GR_FAULT_ARENA));
    ASSERT_TRUE(!gr__fault_hit(GR_FAULT_PIN));
    ASSERT_TRUE(gr__fault_hit(GR_FAULT_PIN));
    ASSERT_TRUE(!gr__fault_hit(GR_FAULT_PIN));
    ASSERT_EQ_U64(gr__fault_injected(GR_FAULT_ARENA), 2);
    ASSERT_EQ_U64(gr__fault_injected(GR_FAULT_PIN), 1);
    gr__fault_disarm(token);
    /* A bad GR_FAULT_SEED is refused by name; a seed rule wins over it. */
    ASSERT_EQ(setenv("GR_FAULT_SEED", "twelve", 1), 0);
    ASSERT_STATUS(gr__fault_arm("arena:~5", &token, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "GR_FAULT_SEED 'twelve'");
    ASSERT_STATUS(gr__fault_arm("seed=4,arena:~5", &token, &err), GR_OK);
    gr__fault_disarm(token);
    ASSERT_EQ(unsetenv("GR_FAULT_SEED"), 0);
    {
        gr_config cfg = config("arena:~0");
        gr_runtime *rt;

        ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(err.message, "bad rate");
        ASSERT_PTR_EQ(rt, NULL);
    }
}

#define RATE_CALLS 200000

/* Arm `plan`, make `calls` calls of `site`, set bit k-1 of `failed` for each call k that
 * failed (when not NULL); return how many failed. */
static uint64_t count_failures(const char *plan, gr_fault_site site, uint64_t calls,
                               uint8_t *failed)
{
    gr_error_info err;
    uint64_t token, n = 0;

    ASSERT_STATUS(gr__fault_arm(plan, &token, &err), GR_OK);
    if (failed != NULL)
        memset(failed, 0, (calls + 7) / 8);
    for (uint64_t k = 1; k <= calls; k++) {
        if (gr__fault_hit(site)) {
            n++;
            if (failed != NULL)
                failed[(k - 1) / 8] |= (uint8_t)(1u << ((k - 1) % 8));
        }
    }
    ASSERT_EQ_U64(gr__fault_calls(site), calls);
    ASSERT_EQ_U64(gr__fault_injected(site), n);
    gr__fault_disarm(token);
    return n;
}

/* SITE:~N fails about calls / N: within 5 standard deviations of the binomial's mean (a
 * false failure once in some 3.5 million seeds), for rates from 1 in 2 to 1 in 5000, each
 * site on its own counter, and exactly the calls gr__fault_random_fails names. */
static void fault_rate_holds(void)
{
    static const uint64_t rates[] = {2, 10, 100, 1000, 5000};
    uint8_t *failed = malloc(RATE_CALLS / 8 + 1);
    gr_error_info err;
    uint64_t token;

    ASSERT_TRUE(failed != NULL);
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            double p = 1.0 / (double)rates[i], mean = RATE_CALLS * p;
            double sd = __builtin_sqrt(RATE_CALLS * p * (1 - p));
            char plan[64];
            uint64_t n;

            snprintf(plan, sizeof(plan), "seed=%llu,graph_launch:~%llu",
                     (unsigned long long)seed, (unsigned long long)rates[i]);
            n = count_failures(plan, GR_FAULT_GRAPH_LAUNCH, RATE_CALLS, failed);
            printf("    %-32s %6llu of %d calls failed (expected %.0f +- %.0f)\n", plan,
                   (unsigned long long)n, RATE_CALLS, mean, 5 * sd);
            ASSERT_DOUBLE_NEAR((double)n, mean, 5 * sd);
            for (uint64_t k = 1; k <= RATE_CALLS; k++)
                if (gr__fault_random_fails(seed, GR_FAULT_GRAPH_LAUNCH, k, rates[i]) !=
                    ((failed[(k - 1) / 8] >> ((k - 1) % 8)) & 1))
                    GR_TEST_FAIL("%s: call %llu decided unlike gr__fault_random_fails", plan,
                                 (unsigned long long)k);
        }
    }
    /* Two sites, two rates, interleaved: each keeps its own. */
    ASSERT_STATUS(gr__fault_arm("seed=9,arena:~10,alloc:~1000", &token, &err), GR_OK);
    for (int k = 0; k < RATE_CALLS; k++) {
        gr__fault_hit(GR_FAULT_ARENA);
        gr__fault_hit(GR_FAULT_ALLOC);
        gr__fault_hit(GR_FAULT_PIN);
    }
    ASSERT_DOUBLE_NEAR((double)gr__fault_injected(GR_FAULT_ARENA), RATE_CALLS / 10.0,
                       5 * __builtin_sqrt(RATE_CALLS * 0.1 * 0.9));
    ASSERT_DOUBLE_NEAR((double)gr__fault_injected(GR_FAULT_ALLOC), RATE_CALLS / 1000.0,
                       5 * __builtin_sqrt(RATE_CALLS * 0.001 * 0.999));
    ASSERT_EQ_U64(gr__fault_injected(GR_FAULT_PIN), 0);
    gr__fault_disarm(token);
    free(failed);
}

typedef struct hammer {
    pthread_barrier_t *start;
    uint64_t calls, failed;
} hammer;

static void *hammer_main(void *p)
{
    hammer *h = p;

    pthread_barrier_wait(h->start);
    for (uint64_t k = 0; k < h->calls; k++)
        h->failed += gr__fault_hit(GR_FAULT_ARENA);
    return NULL;
}

/* The same seed fails the same call numbers; another seed others; GR_FAULT_SEED seeds a
 * plan without seed=. From several threads at once the calls are shared out differently
 * every time, but the number that fail is the one-thread run's. */
static void fault_rate_replays(void)
{
    enum { THREADS = 4 };
    uint8_t *a = malloc(RATE_CALLS / 8 + 1), *b = malloc(RATE_CALLS / 8 + 1);
    pthread_barrier_t start;
    pthread_t th[THREADS];
    hammer h[THREADS];
    gr_error_info err;
    uint64_t token, n, total = 0;

    ASSERT_TRUE(a != NULL && b != NULL);
    n = count_failures("seed=42,arena:~50", GR_FAULT_ARENA, RATE_CALLS, a);
    ASSERT_EQ_U64(count_failures("seed=42,arena:~50", GR_FAULT_ARENA, RATE_CALLS, b), n);
    ASSERT_TRUE(memcmp(a, b, RATE_CALLS / 8) == 0);
    count_failures("seed=43,arena:~50", GR_FAULT_ARENA, RATE_CALLS, b);
    ASSERT_TRUE(memcmp(a, b, RATE_CALLS / 8) != 0);
    ASSERT_EQ(setenv("GR_FAULT_SEED", "42", 1), 0);
    count_failures("arena:~50", GR_FAULT_ARENA, RATE_CALLS, b);
    ASSERT_TRUE(memcmp(a, b, RATE_CALLS / 8) == 0);
    ASSERT_EQ(unsetenv("GR_FAULT_SEED"), 0);
    count_failures("arena:~50", GR_FAULT_ARENA, RATE_CALLS, b); /* seed 0 */
    ASSERT_TRUE(memcmp(a, b, RATE_CALLS / 8) != 0);

    ASSERT_STATUS(gr__fault_arm("seed=42,arena:~50", &token, &err), GR_OK);
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        h[i] = (hammer){&start, RATE_CALLS / THREADS, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, hammer_main, &h[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += h[i].failed;
    }
    pthread_barrier_destroy(&start);
    ASSERT_EQ_U64(gr__fault_calls(GR_FAULT_ARENA), RATE_CALLS);
    ASSERT_EQ_U64(total, n);
    ASSERT_EQ_U64(gr__fault_injected(GR_FAULT_ARENA), n);
    gr__fault_disarm(token);
    free(a);
    free(b);
}

/* The workload's job with a random arena plan through the config: the faults land in
 * some units, which fail with GR_ERR_OUT_OF_MEMORY, the rest is done and right, and the
 * budget is back to 0 (run_plan's checks). Several seeds, each replayed once. */
static void fault_rate_in_a_job(void)
{
    uint64_t faults = 0;

    signal(SIGALRM, on_alarm);
    for (int seed = 1; seed <= 4; seed++) {
        for (int replay = 0; replay < 2; replay++) {
            char plan[64];
            outcome o;

            snprintf(plan, sizeof(plan), "seed=%d,arena:~8", seed);
            o = run_plan(plan);
            ASSERT_STATUS(o.create, GR_OK);
            ASSERT_STATUS(o.submit, GR_OK);
            if (o.result != GR_OK && o.result != GR_ERR_OUT_OF_MEMORY)
                GR_TEST_FAIL("plan %s: the job ended with %s", plan, gr_status_str(o.result));
            ASSERT_EQ_U64(o.done + o.failed, COUNT);
            ASSERT_EQ(o.failed > 0, o.result != GR_OK);
            faults += gr__fault_injected(GR_FAULT_ARENA);
        }
    }
    printf("    %llu arena faults injected over 8 jobs\n", (unsigned long long)faults);
    ASSERT_GT(faults, 0);
    for (uint64_t i = 0; i < COUNT; i++) {
        if (pinned[i])
            gr_host_free(data[i]);
        else
            free(data[i]);
        data[i] = NULL;
    }
}

/* <graphrun_testing.h>'s setter: it refuses a config not made by GR_CONFIG_INIT, puts the
 * plan in the config's private slot, where gr_runtime_create finds it, and NULL takes it
 * out again. The slot is the one the plan has always had, so gr_config's layout did not
 * change: every field after it stays where 0.3 put it. */
static void fault_plan_setter(void)
{
    gr_config cfg = config(NULL), zeroed;
    gr_error_info err;
    gr_runtime *rt;

    memset(&zeroed, 0, sizeof(zeroed));
    ASSERT_STATUS(gr_testing_set_fault_plan(NULL, "alloc:1"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_testing_set_fault_plan(&zeroed, "alloc:1"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(zeroed.testing_, NULL);
    ASSERT_EQ(offsetof(gr_config, testing_), offsetof(gr_config, split_tensors) + 8);
    ASSERT_EQ(offsetof(gr_config, log_callback), offsetof(gr_config, testing_) + sizeof(void *));

    ASSERT_STATUS(gr_testing_set_fault_plan(&cfg, "device_alloc:1"), GR_OK);
    ASSERT_STR_EQ(cfg.testing_, "device_alloc:1");
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_OUT_OF_MEMORY);
    ASSERT_PTR_EQ(rt, NULL);
    ASSERT_STATUS(gr_testing_set_fault_plan(&cfg, NULL), GR_OK);
    ASSERT_PTR_EQ(cfg.testing_, NULL);
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    gr_runtime_destroy(rt);
}

/* GR_FAULT applies when the config has no plan, and a bad one is refused with its name. */
static void fault_plan_from_environment(void)
{
    gr_config cfg = config(NULL);
    gr_error_info err;
    gr_runtime *rt;

    ASSERT_EQ(setenv("GR_FAULT", "device_alloc:1", 1), 0);
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_OUT_OF_MEMORY);
    ASSERT_EQ(setenv("GR_FAULT", "bogus", 1), 0);
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "bogus");
    gr_testing_set_fault_plan(&cfg, ""); /* the config wins over the environment */
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    gr_runtime_destroy(rt);
    ASSERT_EQ(unsetenv("GR_FAULT"), 0);
}

/*
 * The handle table (runtime/handle.h) grows by a chunk of 4096 slots when a handle needs a
 * slot past the last chunk. A submit whose handle cannot be had (that chunk's allocation
 * fails: the "alloc" site, or a table of 2^24 live handles) is refused with
 * GR_ERR_OUT_OF_MEMORY and gives back everything it allocated. The sweep never gets there:
 * its submits find a slot in a chunk that exists. Here the test takes handles until the
 * table's last slot is taken, then fails the submit's allocation of the next chunk; the
 * asan config checks that nothing leaked.
 */
static void submit_refused_when_the_handle_table_cannot_grow(void)
{
    enum { CHUNK = 4096, MAX_HELD = 3 * CHUNK };
    uintptr_t *held = malloc(MAX_HELD * sizeof(*held));
    gr_config cfg = config(NULL);
    uint64_t token, per_submit, before;
    size_t n = 0, first_of_chunk = MAX_HELD;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    uintptr_t h;

    ASSERT_TRUE(held != NULL);
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    fill();
    /* The allocations of one submit of the workload, with a free slot at hand. */
    ASSERT_STATUS(gr__handle_new(held, GR_HANDLE_JOB, &h), GR_OK);
    gr__handle_release(h);
    ASSERT_STATUS(gr__fault_arm("", &token, &err), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, tensors, COUNT, NULL, &job, &err), GR_OK);
    per_submit = gr__fault_calls(GR_FAULT_ALLOC);
    ASSERT_TRUE(gr__job_from_handle(job)->units != NULL); /* the plan the leak was in */
    ASSERT_STATUS(gr_job_wait(job, JOB_TIMEOUT_NS, NULL), GR_OK);
    gr_job_destroy(job);
    /* Take handles until a whole chunk, allocated by one of them, is taken. */
    while (n - first_of_chunk != CHUNK || first_of_chunk == MAX_HELD) {
        ASSERT_LT(n, MAX_HELD);
        before = gr__fault_calls(GR_FAULT_ALLOC);
        ASSERT_STATUS(gr__handle_new(held, GR_HANDLE_JOB, &held[n]), GR_OK);
        if (gr__fault_calls(GR_FAULT_ALLOC) != before) {
            ASSERT_EQ_U64(((uint32_t)held[n] - 1) % CHUNK, 0);
            first_of_chunk = n;
        }
        n++;
    }
    /* The next handle needs a new chunk: its allocation comes right after the submit's. */
    {
        char plan[32];

        snprintf(plan, sizeof(plan), "alloc:%llu", (unsigned long long)per_submit + 1);
        ASSERT_STATUS(gr__fault_arm(plan, &token, &err), GR_OK);
    }
    fill();
    ASSERT_STATUS(gr_job_submit(rt, g, tensors, COUNT, NULL, &job, &err),
                  GR_ERR_OUT_OF_MEMORY);
    ASSERT_PTR_EQ(job, NULL);
    ASSERT_STR_CONTAINS(err.message, "no memory for a job");
    ASSERT_EQ_U64(gr__fault_calls(GR_FAULT_ALLOC), per_submit + 1);
    gr__fault_disarm(token);
    while (n > 0)
        gr__handle_release(held[--n]);
    /* The table grows on the next try. */
    ASSERT_STATUS(gr_job_submit(rt, g, tensors, COUNT, NULL, &job, &err), GR_OK);
    ASSERT_STATUS(gr_job_wait(job, JOB_TIMEOUT_NS, NULL), GR_OK);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    free(held);
}

GR_TEST_MAIN(GR_TEST(fault_plan_parsing), GR_TEST(fault_plan_setter),
             GR_TEST(fault_rate_parsing), GR_TEST(fault_rate_holds), GR_TEST(fault_rate_replays),
             GR_TEST(fault_rate_in_a_job), GR_TEST(fault_plan_from_environment),
             GR_TEST(fault_sweep), GR_TEST(cuda_fault_sweep),
             GR_TEST(submit_refused_when_the_handle_table_cannot_grow))

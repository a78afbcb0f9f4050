/*
 * runtime_test.c - the embedding API on the host backend: configuration and submission
 * refusals with their messages, jobs, progress, per-index results, callbacks, cancellation,
 * deadlines, shutdown, host-memory aliasing rules, the version the library says, and the
 * output structs the library fills as far as the caller's struct_size says.
 *
 * To hold the workers still deterministically, a test takes the device's whole budget
 * itself: with one worker, that worker sleeps in the budget's queue with the first task it
 * popped, and everything behind it stays queued until the test gives the budget back.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/graph.h"
#include "runtime/job.h"
#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

/* The runtime behind a handle, for the checks that look inside. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

#define SEED 7

/* Whole tensors: these tests count iterations per tensor (units: units_test.c). */
static gr_runtime *make_runtime(uint32_t workers, uint64_t budget)
{
    return gr_test_runtime(
        (gr_test_shape){.workers = workers, .budget = budget, .whole_tensors = true});
}

/* Take the device's whole budget, so the runtime's worker sleeps in the budget's queue with
 * the first task it pops; returns once `sleepers` workers sleep there (0: do not wait). */
static gr_budget *hold_budget(gr_runtime *rt)
{
    gr_budget *b = RT(rt)->devices[0].budget;

    ASSERT_STATUS(gr__budget_acquire(b, gr__budget_capacity(b), GR_NO_DEADLINE, NULL), GR_OK);
    return b;
}

static void wait_budget_sleepers(gr_budget *b, uint32_t n)
{
    for (int i = 0; i < 5000 && gr__budget_waiters(b) != n; i++)
        usleep(1000);
    ASSERT_EQ(gr__budget_waiters(b), n);
}

static void release_budget(gr_budget *b)
{
    gr__budget_release(b, gr__budget_capacity(b));
}

/* ------------------------------------------------------------------------------------- */

static void config_refusals(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_error_info err;
    gr_runtime *rt = (gr_runtime *)&cfg;

    ASSERT_STATUS(gr_runtime_create(NULL, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(rt, NULL);
    ASSERT_STATUS(gr_runtime_create(&cfg, NULL, NULL), GR_ERR_INVALID_ARGUMENT);

    cfg.backend = GR_BACKEND_HOST;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "budget_bytes must be set");
    cfg.budget_bytes = 1 << 20;

    cfg.magic = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "GR_CONFIG_INIT");
    cfg.magic = GR_CONFIG_MAGIC;

    /* A caller of 0.1 (a config ending at device_count) gets the later fields' defaults,
     * not what lies past its struct; one shorter still is refused. */
    {
        gr_config *old = malloc(sizeof(gr_config));
        uint32_t v1 = (uint32_t)offsetof(gr_config, pipeline_bytes);

        ASSERT_TRUE(old != NULL);
        memset(old, 0xff, sizeof(*old)); /* what an older caller's memory might hold */
        memcpy(old, &cfg, v1);
        old->struct_size = v1;
        ASSERT_STATUS(gr_runtime_create(old, &rt, &err), GR_OK);
        ASSERT_EQ_U64(RT(rt)->cfg.pipeline_bytes, 128ull << 20);
        ASSERT_EQ_U64(RT(rt)->cfg.host_cache_bytes, 0);
        gr_runtime_destroy(rt);
        /* 0.2's ends at pipeline_bytes: the registration cache stays off for it. */
        memset(old, 0xff, sizeof(*old));
        memcpy(old, &cfg, offsetof(gr_config, host_cache_bytes));
        old->struct_size = (uint32_t)offsetof(gr_config, host_cache_bytes);
        ASSERT_STATUS(gr_runtime_create(old, &rt, &err), GR_OK);
        ASSERT_EQ_U64(RT(rt)->cfg.pipeline_bytes, cfg.pipeline_bytes);
        ASSERT_EQ_U64(RT(rt)->cfg.host_cache_bytes, 0);
        gr_runtime_destroy(rt);
        old->struct_size = (uint32_t)offsetof(gr_config, device_count);
        ASSERT_STATUS(gr_runtime_create(old, &rt, &err), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(err.message, "GR_CONFIG_INIT");
        free(old);
    }

    cfg.pipeline_bytes = 8; /* as if it were a switch */
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "pipeline_bytes must be 0 (off) or at least 1 MiB");
    cfg.pipeline_bytes = 128ull << 20;

    cfg.workers_per_device = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "workers_per_device");
    cfg.workers_per_device = 2;

    cfg.ring_capacity = 1000;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "power of two");
    cfg.ring_capacity = 1024;

    cfg.host_devices = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "host_devices");
    cfg.host_devices = 1;

    cfg.backend = (gr_backend)42;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "unknown backend");
    ASSERT_PTR_EQ(rt, NULL);

    cfg.backend = GR_BACKEND_HOST;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    gr_runtime_destroy(rt);
    gr_runtime_destroy(NULL);
}

static void cuda_backend_refused_or_present(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_error_info err;
    gr_runtime *rt;
    gr_status st;

    cfg.backend = GR_BACKEND_CUDA;
    cfg.budget_bytes = 64 << 20;
    st = gr_runtime_create(&cfg, &rt, &err);
    if (st == GR_OK) {
        gr_runtime_destroy(rt);
        SKIP("a CUDA device is present");
    }
    /* No GPU here: a clear refusal, never a crash or a silent host fallback. */
    ASSERT_STATUS(st, GR_ERR_UNAVAILABLE);
    ASSERT_TRUE(err.message[0] != '\0');
    ASSERT_PTR_EQ(rt, NULL);
}

/* The library's version is the header's it was built with (this test's), in both forms, and
 * the header's string spells its numbers. */
static void version_of_header_and_library(void)
{
    char spelled[32];
    unsigned major, minor, patch;

    snprintf(spelled, sizeof(spelled), "%d.%d.%d", GR_VERSION_MAJOR, GR_VERSION_MINOR,
             GR_VERSION_PATCH);
    ASSERT_STR_EQ(GR_VERSION, spelled);
    ASSERT_STR_EQ(gr_version(), GR_VERSION);
    ASSERT_EQ(gr_version_number(), (uint32_t)GR_VERSION_NUMBER);
    ASSERT_EQ(sscanf(gr_version(), "%u.%u.%u", &major, &minor, &patch), 3);
    ASSERT_EQ(gr_version_number(), major * 1000000 + minor * 1000 + patch);
    ASSERT_TRUE(GR_VERSION_NUMBER >= 3000); /* 0.3.0 added them */
}

/* A struct of a newer caller, `extra` bytes past what this library knows, set to 0xA5. */
#define NEWER(type)                                                                         \
    struct {                                                                                \
        type known;                                                                         \
        unsigned char extra[24];                                                            \
    }

static void assert_untouched(const unsigned char *extra, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (extra[i] != 0xA5)
            GR_TEST_FAIL("byte %zu past the library's struct written: %#x", i, extra[i]);
}

/* gr_runtime_info, gr_job_progress and gr_kernel_info: refused when not from their *_INIT
 * (magic) or shorter than the first version with a struct_size; filled only up to the
 * library's own size when the caller's is larger (a caller compiled against a newer
 * header), the caller's struct_size kept. */
static void output_structs_sized_by_the_caller(void)
{
    gr_runtime *rt = make_runtime(1, 1 << 20);
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_kernel_info k = GR_KERNEL_INFO_INIT;
    NEWER(gr_runtime_info) ni;
    NEWER(gr_job_progress) np;
    NEWER(gr_kernel_info) nk;
    gr_graph *g;
    float x[64] = {0};
    gr_tensor t = {.in = {x}, .out = {x}, .elems = 64};
    gr_job *job;

    info.magic = 0;
    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_ERR_INVALID_ARGUMENT);
    info = (gr_runtime_info)GR_RUNTIME_INFO_INIT;
    info.struct_size = offsetof(gr_runtime_info, backend_note);
    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_ERR_INVALID_ARGUMENT);
    memset(&ni, 0xA5, sizeof(ni));
    ni.known.struct_size = sizeof(ni);
    ni.known.magic = GR_RUNTIME_INFO_MAGIC;
    ASSERT_STATUS(gr_runtime_info_get(rt, &ni.known), GR_OK);
    ASSERT_EQ(ni.known.struct_size, sizeof(ni));
    ASSERT_EQ(ni.known.backend, GR_BACKEND_HOST);
    ASSERT_EQ(ni.known.workers_per_device, 1);
    assert_untouched(ni.extra, sizeof(ni.extra));

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, NULL), GR_OK);
    p.magic = 0;
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_ERR_INVALID_ARGUMENT);
    p = (gr_job_progress)GR_JOB_PROGRESS_INIT;
    p.struct_size = offsetof(gr_job_progress, canceled);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_ERR_INVALID_ARGUMENT);
    memset(&np, 0xA5, sizeof(np));
    np.known.struct_size = sizeof(np);
    np.known.magic = GR_JOB_PROGRESS_MAGIC;
    ASSERT_STATUS(gr_job_progress_get(job, &np.known), GR_OK);
    ASSERT_EQ(np.known.struct_size, sizeof(np));
    ASSERT_EQ_U64(np.known.total, 1);
    ASSERT_EQ_U64(np.known.done, 1);
    ASSERT_EQ_U64(np.known.canceled, 0);
    assert_untouched(np.extra, sizeof(np.extra));
    gr_job_destroy(job);

    k.magic = 0;
    ASSERT_STATUS(gr_kernel_info_get(0, &k), GR_ERR_INVALID_ARGUMENT);
    k = (gr_kernel_info)GR_KERNEL_INFO_INIT;
    k.struct_size = offsetof(gr_kernel_info, in_dtype);
    ASSERT_STATUS(gr_kernel_info_get(0, &k), GR_ERR_INVALID_ARGUMENT);
    memset(&nk, 0xA5, sizeof(nk));
    nk.known.struct_size = sizeof(nk);
    nk.known.magic = GR_KERNEL_INFO_MAGIC;
    ASSERT_STATUS(gr_kernel_info_get(0, &nk.known), GR_OK);
    ASSERT_EQ(nk.known.struct_size, sizeof(nk));
    ASSERT_TRUE(nk.known.name != NULL && nk.known.name[0] != '\0');
    assert_untouched(nk.extra, sizeof(nk.extra));

    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

static void info_and_budget_rounding(void)
{
    gr_runtime *rt = make_runtime(2, 10000);
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats st;

    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_OK);
    ASSERT_EQ(info.backend, GR_BACKEND_HOST);
    ASSERT_EQ(info.device_count, 1);
    ASSERT_EQ(info.workers_per_device, 2);
    ASSERT_EQ_U64(info.budget_bytes, 9984); /* rounded down to 256: never above the budget */
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.budget_bytes, 9984);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 1, &st), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_info_get(NULL, &info), GR_ERR_INVALID_ARGUMENT);
    gr_runtime_destroy(rt);
}

static void submit_refusals(void)
{
    gr_runtime *rt = make_runtime(2, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 4, 100);
    gr_job_options bad_opts = GR_JOB_OPTIONS_INIT;
    gr_graph *g, *unfinished;
    gr_error_info err;
    gr_job *job = (gr_job *)&err;
    gr_tensor t[4];

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_graph_create(&unfinished), GR_OK);

    ASSERT_STATUS(gr_job_submit(NULL, g, s.t, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(job, NULL);
    ASSERT_STATUS(gr_job_submit(rt, NULL, s.t, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_submit(rt, g, NULL, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 0, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "at least one tensor");
    ASSERT_STATUS(gr_job_submit(rt, unfinished, s.t, 4, NULL, &job, &err),
                  GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(err.message, "not finalized");
    bad_opts.magic = 0;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 4, &bad_opts, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "GR_JOB_OPTIONS_INIT");

    memcpy(t, s.t, sizeof(t));
    t[2].elems = 0;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ_U64(err.index, 2);
    ASSERT_STR_CONTAINS(err.message, "index 2 has 0 elements");

    memcpy(t, s.t, sizeof(t));
    t[1].in[0] = NULL;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "index 1: input 0 is NULL");

    memcpy(t, s.t, sizeof(t));
    t[3].out[1] = s.data[0];
    ASSERT_STATUS(gr_job_submit(rt, g, t, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "index 3: output 1 is set (the graph has 1 output(s))");

    /* An iteration that cannot fit the budget, of a graph that cannot be split (its scratch
     * buffer is twice the tensor); a splittable graph would run it in chunks. */
    {
        const char *x = "x";
        const float two = 2.0f;
        gr_graph *wide;
        float *big = calloc(300000, sizeof(float));
        gr_tensor tb[1] = {{{big}, {big}, 300000, 0, {0}}};

        ASSERT_STATUS(gr_graph_create(&wide), GR_OK);
        ASSERT_STATUS(gr_graph_add_buffer(wide, "x", 1, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_buffer(wide, "scratch", 2, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_h2d(wide, "load", 0, "x"), GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel(wide, "k", "mul", &x, 1, "scratch", &two, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_d2h(wide, "store", "scratch", 0), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(wide, "load", "k"), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(wide, "k", "store"), GR_OK);
        ASSERT_STATUS(gr_graph_finalize(wide), GR_OK);
        ASSERT_TRUE(!wide->splittable);
        ASSERT_STATUS(gr_job_submit(rt, wide, tb, 1, NULL, &job, &err), GR_ERR_OVER_BUDGET);
        ASSERT_EQ_U64(err.index, 0);
        ASSERT_STR_CONTAINS(err.message, "needs 3600128 device bytes but the budget is 1048576");
        ASSERT_STR_CONTAINS(err.message, "cannot be split");
        gr_graph_destroy(wide);
        free(big);
    }

    memcpy(t, s.t, sizeof(t));
    t[0].elems = UINT64_MAX / 2;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 4, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "too large");

    ASSERT_PTR_EQ(job, NULL);
    /* Nothing was queued by any refusal: all inputs untouched. */
    for (uint64_t i = 0; i < 4; i++)
        gr_test_expect_untouched(&s, i);
    gr_graph_destroy(unfinished);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&s);
}

static void aliasing_refusals(void)
{
    gr_runtime *rt = make_runtime(2, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 3, 100);
    float *other = malloc(200 * sizeof(float));
    gr_graph *g;
    gr_error_info err;
    gr_job *job;
    gr_tensor t[3];

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);

    /* Two indices writing the same output. */
    memcpy(t, s.t, sizeof(t));
    t[2].out[0] = t[0].out[0];
    t[2].in[0] = other;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 3, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "overlaps another output");

    /* An output overlapping another index's input. */
    memcpy(t, s.t, sizeof(t));
    t[1].out[0] = other;
    t[2].in[0] = other + 50;
    t[2].out[0] = s.data[2];
    ASSERT_STATUS(gr_job_submit(rt, g, t, 3, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "overlaps output 0 of index 1");

    /* In place must be the very same range. */
    memcpy(t, s.t, sizeof(t));
    t[0].in[0] = s.data[0] + 1;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 3, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "in place needs the very same range");

    /* Inputs may be shared freely; out of place into separate buffers is fine. */
    memcpy(t, s.t, sizeof(t));
    for (int i = 0; i < 3; i++)
        t[i].in[0] = other;
    t[0].elems = t[1].elems = t[2].elems = 50;
    gr_workload_fill(other, 0, 50, SEED, 0);
    ASSERT_STATUS(gr_job_submit(rt, g, t, 3, NULL, &job, &err), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(s.data[i], 0, 50, SEED, 0, NULL), 0);
    gr_job_destroy(job);

    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(other);
    gr_test_tensors_free(&s);
}

static atomic_int callback_calls;
static gr_status callback_status;

static void count_callback(gr_job *job, gr_status st, void *user)
{
    gr_job_progress p = GR_JOB_PROGRESS_INIT;

    ASSERT_PTR_EQ(user, &callback_calls);
    /* The job is complete when its callback runs. */
    ASSERT_TRUE(gr_job_is_complete(job));
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.failed + p.canceled, p.total);
    /* Waiting for its own job from the callback answers at once, with the same result. */
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), st);
    callback_status = st;
    atomic_fetch_add(&callback_calls, 1);
}

static void job_runs_reports_and_calls_back(void)
{
    gr_runtime *rt = make_runtime(3, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 10, 1000);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_index_state state;
    gr_status status;
    gr_error_info err;
    gr_device_stats ds;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    atomic_store(&callback_calls, 0);
    o.on_complete = count_callback;
    o.user = &callback_calls;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 10, &o, &job, &err), GR_OK);
    gr_graph_destroy(g); /* the job keeps its own reference */
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.total, 10);
    ASSERT_EQ_U64(p.done, 10);
    ASSERT_EQ_U64(p.failed + p.canceled + p.queued + p.in_flight, 0);
    for (uint64_t i = 0; i < 10; i++) {
        ASSERT_STATUS(gr_job_index_get(job, i, &state, &status), GR_OK);
        ASSERT_EQ(state, GR_INDEX_DONE);
        ASSERT_STATUS(status, GR_OK);
        gr_test_expect_processed(&s, i);
    }
    ASSERT_STATUS(gr_job_index_get(job, 10, &state, &status), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_wait(NULL, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_cancel(NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_progress_get(NULL, &p), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_error_get(job, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(gr_job_is_complete(NULL), 0);
    memset(&err, 0x5a, sizeof(err)); /* no error reads as gr_graph_error_get's does */
    ASSERT_STATUS(gr_job_error_get(job, &err), GR_OK);
    ASSERT_STATUS(err.status, GR_OK);
    ASSERT_EQ_U64(err.index, GR_NO_INDEX);
    ASSERT_STR_EQ(err.node, "");
    ASSERT_STR_EQ(err.message, "");
    ASSERT_EQ(gr__job_anomalies(job), 0);
    /* A completed job waits no more, however many times it is asked. */
    ASSERT_STATUS(gr_test_wait(job, 0), GR_OK);
    gr_job_destroy(job);
    /* The callback ran exactly once, before or after wait returned: wait for it briefly. */
    for (int i = 0; i < 1000 && atomic_load(&callback_calls) == 0; i++)
        usleep(1000);
    ASSERT_EQ(atomic_load(&callback_calls), 1);
    ASSERT_STATUS(callback_status, GR_OK);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &ds), GR_OK);
    ASSERT_EQ_U64(ds.iterations_done, 10);
    ASSERT_EQ_U64(ds.budget_in_use, 0);
    ASSERT_LE_U64(ds.budget_peak, ds.budget_bytes);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&s);
}

static void detached_job_calls_back(void)
{
    gr_runtime *rt = make_runtime(2, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 5, 333);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    atomic_store(&callback_calls, 0);
    o.on_complete = count_callback;
    o.user = &callback_calls;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 5, &o, NULL, NULL), GR_OK);
    gr_graph_destroy(g);
    for (int i = 0; i < 5000 && atomic_load(&callback_calls) == 0; i++)
        usleep(1000);
    ASSERT_EQ(atomic_load(&callback_calls), 1);
    for (uint64_t i = 0; i < 5; i++)
        gr_test_expect_processed(&s, i);
    gr_runtime_destroy(rt);
    ASSERT_EQ(atomic_load(&callback_calls), 1);
    gr_test_tensors_free(&s);
}

static void cancel_ends_queued_indices_at_once(void)
{
    gr_runtime *rt = make_runtime(1, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 50, 100);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_budget *budget = hold_budget(rt);
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_index_state state;
    gr_status status;
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    atomic_store(&callback_calls, 0);
    o.on_complete = count_callback;
    o.user = &callback_calls;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 50, &o, &job, NULL), GR_OK);
    wait_budget_sleepers(budget, 1); /* the worker holds index 0 and sleeps */
    ASSERT_STATUS(gr_job_wait(job, 20 * 1000000, NULL), GR_ERR_TIMEOUT); /* still running */
    ASSERT_TRUE(!gr_job_is_complete(job));
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.queued, 49);
    ASSERT_EQ_U64(p.in_flight, 1);

    /* Cancel wakes the worker out of the budget queue and ends the queued rest at once. */
    ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    ASSERT_STATUS(gr_job_cancel(job), GR_OK); /* idempotent */
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_CANCELED);
    ASSERT_EQ(atomic_load(&callback_calls), 1);
    ASSERT_STATUS(callback_status, GR_ERR_CANCELED);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.canceled, 50);
    ASSERT_EQ_U64(p.queued + p.in_flight + p.done + p.failed, 0);
    ASSERT_STATUS(gr_job_index_get(job, 17, &state, &status), GR_OK);
    ASSERT_EQ(state, GR_INDEX_CANCELED);
    ASSERT_STATUS(status, GR_ERR_CANCELED);
    ASSERT_STATUS(gr_job_error_get(job, &err), GR_OK);
    ASSERT_STATUS(err.status, GR_ERR_CANCELED);
    ASSERT_STR_CONTAINS(err.message, "canceled");
    ASSERT_EQ(gr__budget_waiters(budget), 0);

    release_budget(budget);
    gr_runtime_destroy(rt); /* drains the canceled tasks still in the ring */
    for (uint64_t i = 0; i < 50; i++)
        gr_test_expect_untouched(&s, i);
    ASSERT_EQ(atomic_load(&callback_calls), 1);
    ASSERT_EQ(gr__job_anomalies(job), 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static void deadline_fails_unstarted_indices(void)
{
    gr_runtime *rt = make_runtime(1, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 20, 100);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_budget *budget = hold_budget(rt);
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_error_info err;
    gr_graph *g;
    gr_job *job;
    int64_t start;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    start = gr_now_ns();
    o.deadline_ns = start + 50 * 1000000;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 20, &o, &job, NULL), GR_OK);
    /* Completed by the deadline, though no budget was ever free. */
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_TIMEOUT);
    ASSERT_TRUE(gr_job_is_complete(job));
    ASSERT_GE(gr_now_ns() - start, 50 * 1000000);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.failed, 20);
    ASSERT_STATUS(gr_job_error_get(job, &err), GR_OK);
    ASSERT_STATUS(err.status, GR_ERR_TIMEOUT);
    ASSERT_STR_CONTAINS(err.message, "deadline");
    gr_job_destroy(job);

    /* A deadline already past at submission: accepted, and every index times out. */
    o.deadline_ns = gr_now_ns() - 1;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 20, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_TIMEOUT);
    ASSERT_TRUE(gr_job_is_complete(job));
    gr_job_destroy(job);

    release_budget(budget);
    gr_runtime_destroy(rt);
    for (uint64_t i = 0; i < 20; i++)
        gr_test_expect_untouched(&s, i);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static void shutdown_cancels_queued_and_refuses_new(void)
{
    gr_runtime *rt = make_runtime(1, 1 << 20);
    gr_test_tensors s = gr_test_tensors_make(SEED, 30, 100);
    gr_budget *budget = hold_budget(rt);
    gr_job *job, *late = NULL;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_error_info err;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 30, NULL, &job, NULL), GR_OK);
    wait_budget_sleepers(budget, 1);
    gr_runtime_shutdown(rt);
    gr_runtime_shutdown(rt); /* idempotent */
    /* Every index ends, the one the worker held included, with no budget ever freed. */
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_SHUTDOWN);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.canceled, 30);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 1, NULL, &late, &err), GR_ERR_SHUTDOWN);
    ASSERT_STR_CONTAINS(err.message, "shut down");
    ASSERT_PTR_EQ(late, NULL);
    release_budget(budget);
    gr_runtime_destroy(rt);
    for (uint64_t i = 0; i < 30; i++)
        gr_test_expect_untouched(&s, i);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

/* The ring is tiny and the only worker parked, so submit sleeps on backpressure; shutdown
 * from another thread wakes it, and the job it returns is accepted and complete, with every
 * index ended exactly once. */
typedef struct submit_arg {
    gr_runtime *rt;
    gr_graph *g;
    gr_test_tensors *s;
    gr_job *job;
    gr_status st;
} submit_arg;

static void *submit_thread(void *p)
{
    submit_arg *a = p;

    a->st = gr_job_submit(a->rt, a->g, a->s->t, a->s->count, NULL, &a->job, NULL);
    return NULL;
}

static void shutdown_wakes_submit_sleeping_on_full_ring(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_test_tensors s = gr_test_tensors_make(SEED, 64, 10);
    submit_arg a = {.s = &s};
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_budget *budget;
    pthread_t th;

    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = 1 << 20;
    cfg.workers_per_device = 1;
    cfg.ring_capacity = 4;
    cfg.split_tensors = 0; /* one task per tensor, so 64 tasks overflow the ring */
    ASSERT_STATUS(gr_runtime_create(&cfg, &a.rt, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_create_seed(&a.g), GR_OK);
    budget = hold_budget(a.rt);
    pthread_create(&th, NULL, submit_thread, &a);
    wait_budget_sleepers(budget, 1);
    for (int i = 0; i < 5000 && gr__ring_count(RT(a.rt)->ring) < 3; i++)
        usleep(1000);
    ASSERT_EQ(gr__ring_count(RT(a.rt)->ring), 3); /* full: the submitter sleeps */
    usleep(20000);
    gr_runtime_shutdown(a.rt);
    pthread_join(th, NULL);
    ASSERT_STATUS(a.st, GR_OK);
    ASSERT_STATUS(gr_test_wait(a.job, 10ll * 1000000000), GR_ERR_SHUTDOWN);
    ASSERT_STATUS(gr_job_progress_get(a.job, &p), GR_OK);
    ASSERT_EQ_U64(p.canceled, 64);
    release_budget(budget);
    gr_runtime_destroy(a.rt);
    ASSERT_EQ(gr__job_anomalies(a.job), 0);
    for (uint64_t i = 0; i < 64; i++)
        gr_test_expect_untouched(&s, i);
    gr_job_destroy(a.job);
    gr_graph_destroy(a.g);
    gr_test_tensors_free(&s);
}

/* out = 2x + s0 + *user: a kernel of the test's own, on the CPU. */
static void twice_plus(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, add = a->s[0].f32 + *(const float *)user;

    for (uint64_t i = 0; i < a->n; i++)
        out[i] = 2.0f * x[i] + add;
}

/* A kernel registered by the caller runs on the host backend like a built-in: whole
 * tensors, chunks of a tensor larger than a worker's share of the budget, and batches of
 * small tensors, each output exactly what the CPU function computes, with its scalar and
 * its user pointer. */
static void user_kernel_runs_in_chunks_and_batches(void)
{
    static const float user_add = 0.25f, scalar = 1.5f;
    static const uint64_t sizes[] = {1, 3, 1000, 250000, 17, 65536, 5};
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_tensor t[7];
    float *data[7];
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    d.name = "rt_twice_plus";
    d.n_inputs = 1;
    d.n_scalars = 1;
    d.elementwise = 1;
    d.cpu = twice_plus;
    d.user = (void *)&user_add;
    ASSERT_STATUS(gr_kernel_register(&d, NULL), GR_OK);
    g = gr_test_kernel_graph("rt_twice_plus", 1, &scalar, 1, true);
    /* 256 KiB of budget over 2 workers: the 250000-element tensor (1 MB) goes in chunks,
     * the small ones in batches. */
    rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 256 << 10});
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 7; i++) {
        data[i] = malloc(sizes[i] * sizeof(float));
        ASSERT_TRUE(data[i] != NULL);
        for (uint64_t j = 0; j < sizes[i]; j++)
            data[i][j] = (float)(i * 1000 + (int)(j % 977)) * 0.125f;
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = sizes[i];
    }
    ASSERT_STATUS(gr_job_submit(rt, g, t, 7, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_GT(RT(rt)->devices[0].iterations_done, 7); /* cut into more units than tensors */
    for (int i = 0; i < 7; i++) {
        for (uint64_t j = 0; j < sizes[i]; j++) {
            float in = (float)(i * 1000 + (int)(j % 977)) * 0.125f;
            float want = 2.0f * in + (scalar + user_add);

            if (data[i][j] != want)
                GR_TEST_FAIL("tensor %d element %llu: %.9g, want %.9g", i,
                             (unsigned long long)j, data[i][j], want);
        }
        free(data[i]);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* out = x + 1, counting calls whose elements are not whole runs of 7 (rows). */
static atomic_int part_rows, row_calls;
static void plus_one_rows(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;

    (void)user;
    atomic_fetch_add(&row_calls, 1);
    if (a->n % 7 != 0)
        atomic_fetch_add(&part_rows, 1);
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] + 1.0f;
}

/* gr_job_options.cut_elems: a tensor larger than a worker's share is cut, batches are
 * made, and every call gets whole runs of 7 elements; outputs right. Refused: tensors not
 * of whole runs (naming the index), a graph that cannot be cut, one run over the budget. */
static void cut_elems_cuts_between_runs(void)
{
    static const uint64_t sizes[] = {7 * 40000, 7, 7 * 3, 7 * 9000, 7 * 2};
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_error_info err;
    gr_tensor t[5];
    float *data[5];
    gr_runtime *rt;
    gr_graph *g, *whole;
    gr_job *job;

    d.name = "rt_plus_one_rows";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = plus_one_rows;
    ASSERT_STATUS(gr_kernel_register(&d, NULL), GR_OK);
    g = gr_test_kernel_graph("rt_plus_one_rows", 1, NULL, 0, true);
    /* 256 KiB over 2 workers: the 1.12 MB tensor goes in chunks, the small ones batched. */
    rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 256 << 10});
    memset(t, 0, sizeof(t));
    for (int i = 0; i < 5; i++) {
        data[i] = malloc(sizes[i] * sizeof(float));
        ASSERT_TRUE(data[i] != NULL);
        for (uint64_t j = 0; j < sizes[i]; j++)
            data[i][j] = (float)(i * 100 + (int)(j % 97));
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = sizes[i];
    }
    o.cut_elems = 7;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 5, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    gr_job_destroy(job);
    ASSERT_GT(atomic_load(&row_calls), 5); /* cut: more calls than tensors */
    ASSERT_EQ(atomic_load(&part_rows), 0);
    for (int i = 0; i < 5; i++)
        for (uint64_t j = 0; j < sizes[i]; j++)
            if (data[i][j] != (float)(i * 100 + (int)(j % 97)) + 1.0f)
                GR_TEST_FAIL("tensor %d element %llu: %.9g", i, (unsigned long long)j,
                             data[i][j]);
    t[3].elems = 7 * 9000 - 1;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 5, &o, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ_U64(err.index, 3);
    ASSERT_TRUE(strstr(err.message, "cut_elems 7") != NULL);
    t[3].elems = 7 * 9000;
    o.cut_elems = 7 * 40000; /* one run of 1.12 MB: over the 256 KiB budget */
    ASSERT_STATUS(gr_job_submit(rt, g, t, 1, &o, &job, &err), GR_ERR_OVER_BUDGET);
    ASSERT_STATUS(gr_graph_create(&whole), GR_OK); /* softmax: rows of its own, not cut */
    ASSERT_STATUS(gr_graph_add_buffer(whole, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(whole, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(whole, "k", "softmax", (const char *[]){"x"}, 1, "x",
                                      NULL, 0),
                  GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(whole, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(whole, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(whole, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(whole), GR_OK);
    o.cut_elems = 7;
    ASSERT_STATUS(gr_job_submit(rt, whole, t + 1, 1, &o, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(err.message, "cannot be cut") != NULL);
    gr_runtime_destroy(rt);
    /* A run larger than a staged unit (4 KiB of staging: 512 elements in and out) would
     * grow every worker's pinned staging buffer to it: refused, naming staging_bytes. */
    {
        gr_config cfg = GR_CONFIG_INIT;

        cfg.backend = GR_BACKEND_HOST;
        cfg.budget_bytes = 1 << 20;
        cfg.workers_per_device = 1;
        cfg.staging_bytes = 4096;
        ASSERT_STATUS(gr_runtime_create(&cfg, &rt, NULL), GR_OK);
        o.cut_elems = 7 * 100;
        t[3].elems = 7 * 100 * 90;
        ASSERT_STATUS(gr_job_submit(rt, g, t + 3, 1, &o, &job, &err),
                      GR_ERR_INVALID_ARGUMENT);
        ASSERT_TRUE(strstr(err.message, "staging_bytes 4096") != NULL);
        o.cut_elems = 7; /* whole runs fit: it runs */
        ASSERT_STATUS(gr_job_submit(rt, g, t + 3, 1, &o, &job, &err), GR_OK);
        ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
        gr_job_destroy(job);
        gr_runtime_destroy(rt);
    }
    for (int i = 0; i < 5; i++)
        free(data[i]);
    gr_graph_destroy(whole);
    gr_graph_destroy(g);
}

/* One job of `n` whole seed tensors of `elems` on one worker under GR_UNITS_IN_FLIGHT=
 * `in_flight`: every output checked; returns the units launched with the worker's previous
 * one in flight (gr_stats.units_overlapped), after checking the worker's slot count. */
static uint64_t overlapped_units(const char *in_flight, uint32_t n, uint64_t elems)
{
    gr_stats st = GR_STATS_INIT;
    gr_tensor *t = calloc(n, sizeof(*t));
    float **data = calloc(n, sizeof(*data));
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    ASSERT_TRUE(t != NULL && data != NULL);
    rt = gr_test_runtime((gr_test_shape){
        .workers = 1, .budget = 1 << 20, .whole_tensors = true, .in_flight = in_flight});
    ASSERT_EQ_U64(RT(rt)->workers[0].in_flight, (uint64_t)atoi(in_flight));
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (uint32_t i = 0; i < n; i++) {
        data[i] = malloc(elems * sizeof(float));
        ASSERT_TRUE(data[i] != NULL);
        gr_workload_fill(data[i], 0, elems, SEED, i);
        t[i] = (gr_tensor){{data[i]}, {data[i]}, elems, 0, {0}};
    }
    ASSERT_STATUS(gr_job_submit(rt, g, t, n, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t where = 0, bad = gr_workload_check_seed(data[i], 0, elems, SEED, i, &where);

        if (bad != 0)
            GR_TEST_FAIL("in flight %s: tensor %u: %llu elements wrong, first at %llu",
                         in_flight, i, (unsigned long long)bad, (unsigned long long)where);
        free(data[i]);
    }
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.iterations_done, n);
    ASSERT_EQ_U64(st.budget_in_use, 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(data);
    free(t);
    return st.units_overlapped;
}

/* Two units in flight per worker (worker.c), asked for through GR_UNITS_IN_FLIGHT on the
 * host backend, whose launched iterations run at finish: a worker launches the next unit
 * before it finishes the one before, and each output is still its own tensor's; with one,
 * no unit is ever launched under another. */
static void two_units_in_flight(void)
{
    ASSERT_GT(overlapped_units("2", 200, 1000), 0);
    ASSERT_EQ_U64(overlapped_units("1", 200, 1000), 0);
}

/* A graph whose kernel has no implementation for the runtime's backend is refused at
 * submit, naming the node and the kernel, and nothing runs. */
static void kernel_missing_on_backend_refused(void)
{
    static const int handle = 1; /* never launched: the host backend refuses first */
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    float x[64];
    gr_tensor t = {{x}, {x}, 64, 0, {0}};
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job = (gr_job *)&handle;

    d.name = "rt_cuda_only";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cuda_kind = GR_CUDA_KERNEL;
    d.cuda = &handle;
    ASSERT_STATUS(gr_kernel_register(&d, NULL), GR_OK);
    g = gr_test_kernel_graph("rt_cuda_only", 1, NULL, 0, true);
    rt = make_runtime(1, 1 << 20);
    for (int i = 0; i < 64; i++)
        x[i] = (float)i;
    ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, &err), GR_ERR_UNAVAILABLE);
    ASSERT_TRUE(job == NULL);
    ASSERT_STR_CONTAINS(err.message, "node 'k': kernel 'rt_cuda_only' has no CPU "
                                     "implementation, which the host backend needs");
    ASSERT_STR_EQ(err.node, "k");
    for (int i = 0; i < 64; i++)
        ASSERT_FLOAT_BITS_EQ(x[i], (float)i);
    ASSERT_EQ(RT(rt)->stats->jobs_submitted, 0);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* The aliasing check on a large job in every order the tensors may come in: ascending (no
 * sort, each input found next to the last), descending and shuffled (sorted first, inputs
 * found by search): a clean job is accepted, and one input planted inside another index's
 * output is refused, naming both, wherever it is. */
static void aliasing_checked_in_any_order(void)
{
    enum { N = 3000, ELEMS = 16 };
    gr_runtime *rt = make_runtime(2, 1 << 20);
    float *block = calloc((size_t)N * ELEMS, sizeof(float));
    gr_tensor *t = calloc(N, sizeof(*t));
    uint32_t *order = malloc(N * sizeof(*order));
    uint64_t state = 5;
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    ASSERT_TRUE(block != NULL && t != NULL && order != NULL);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (int how = 0; how < 3; how++) {
        for (uint32_t i = 0; i < N; i++)
            order[i] = how == 1 ? N - 1 - i : i;
        for (uint32_t i = N - 1; how == 2 && i > 0; i--) { /* Fisher-Yates */
            uint32_t j = (uint32_t)(gr_test_rand(&state) % (i + 1)), x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        for (uint32_t i = 0; i < N; i++) {
            float *p = block + (size_t)order[i] * ELEMS;

            t[i] = (gr_tensor){{p}, {p}, ELEMS, 0, {0}};
        }
        ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, &err), GR_OK);
        ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
        gr_job_destroy(job);
        for (int plant = 0; plant < 4; plant++) {
            uint32_t victim = (uint32_t)(gr_test_rand(&state) % N), k;
            char want[96];

            do
                k = (uint32_t)(gr_test_rand(&state) % N);
            while (k == victim);
            t[victim].in[0] = (const float *)t[k].out[0] + 3; /* inside index k's output */
            ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, &err),
                          GR_ERR_INVALID_ARGUMENT);
            snprintf(want, sizeof(want), "input 0 of index %u overlaps output 0 of index %u",
                     victim, k);
            ASSERT_STR_CONTAINS(err.message, want);
            t[victim].in[0] = t[victim].out[0];
        }
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(order);
    free(t);
    free(block);
}

GR_TEST_MAIN(GR_TEST(two_units_in_flight), GR_TEST(config_refusals),
             GR_TEST(cuda_backend_refused_or_present),
             GR_TEST(info_and_budget_rounding), GR_TEST(submit_refusals),
             GR_TEST(aliasing_refusals), GR_TEST(aliasing_checked_in_any_order),
             GR_TEST(job_runs_reports_and_calls_back),
             GR_TEST(detached_job_calls_back), GR_TEST(cancel_ends_queued_indices_at_once),
             GR_TEST(deadline_fails_unstarted_indices),
             GR_TEST(shutdown_cancels_queued_and_refuses_new),
             GR_TEST(shutdown_wakes_submit_sleeping_on_full_ring),
             GR_TEST(user_kernel_runs_in_chunks_and_batches),
             GR_TEST(cut_elems_cuts_between_runs),
             GR_TEST(kernel_missing_on_backend_refused),
             GR_TEST(version_of_header_and_library),
             GR_TEST(output_structs_sized_by_the_caller))

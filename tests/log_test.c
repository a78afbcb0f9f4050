/*
 * log_test.c - logging on the host backend: silent by default; the callback gets the
 * runtime's start, AUTO's fallback, a job's first failure, shutdown and end, at the right
 * levels and never per tensor; the threshold filters; GR_LOG overrides the level and sends
 * messages to stderr when there is no callback; a runtime that cannot start says why, but
 * a config that failed its checks never has its callback called.
 */
#include <pthread.h>
#include <stdarg.h>

#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

/* The runtime behind a handle, for the checks that look inside. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

#define MS 1000000ll
#define MAX_LINES 256

typedef struct sink {
    pthread_mutex_t mu;
    int n;
    gr_log_level level[MAX_LINES];
    char text[MAX_LINES][512];
} sink;

static void collect(gr_log_level level, const char *message, void *user)
{
    sink *s = user;

    pthread_mutex_lock(&s->mu);
    if (s->n < MAX_LINES) {
        s->level[s->n] = level;
        snprintf(s->text[s->n], sizeof(s->text[0]), "%s", message);
        s->n++;
    }
    pthread_mutex_unlock(&s->mu);
}

static sink *sink_new(void)
{
    sink *s = calloc(1, sizeof(*s));

    ASSERT_TRUE(s != NULL);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void sink_free(sink *s)
{
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Lines at `level` containing `needle`. */
static int count(const sink *s, gr_log_level level, const char *needle)
{
    int n = 0;

    for (int i = 0; i < s->n; i++)
        if (s->level[i] == level && strstr(s->text[i], needle) != NULL)
            n++;
    return n;
}

static void dump(const sink *s)
{
    for (int i = 0; i < s->n; i++)
        printf("  [%s] %s\n", gr_log_level_name(s->level[i]), s->text[i]);
}

#define EXPECT_COUNT(s, level, needle, want)                                                \
    do {                                                                                    \
        int got_ = count((s), (level), (needle));                                           \
        if (got_ != (want)) {                                                               \
            dump(s);                                                                        \
            GR_TEST_FAIL("expected %d %s line(s) with \"%s\", got %d", (want),              \
                         gr_log_level_name(level), (needle), got_);                         \
        }                                                                                   \
    } while (0)

static gr_config host_config(uint64_t budget)
{
    gr_config cfg = GR_CONFIG_INIT;

    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = budget;
    cfg.workers_per_device = 2;
    return cfg;
}

/* host_config(budget) whose messages go to sink `s`, with GR_LOG cleared so that nothing
 * in the environment overrides the callback or its level. */
static gr_config collecting_config(uint64_t budget, sink *s)
{
    gr_config cfg = host_config(budget);

    unsetenv("GR_LOG");
    cfg.log_callback = collect;
    cfg.log_user = s;
    return cfg;
}

static gr_runtime *create(const gr_config *cfg)
{
    gr_runtime *rt;
    gr_error_info err;

    if (gr_runtime_create(cfg, &rt, &err) != GR_OK)
        GR_TEST_FAIL("runtime create: %s", err.message);
    return rt;
}

/* Run `count` small tensors; with `expired`, under a deadline that has already passed. */
static gr_status run_job(gr_runtime *rt, uint64_t count, bool expired)
{
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    float *data = calloc(count, 64 * sizeof(float));
    gr_tensor *t = calloc(count, sizeof(gr_tensor));
    gr_status result;
    gr_graph *g;
    gr_job *job;

    ASSERT_TRUE(data != NULL && t != NULL);
    for (uint64_t i = 0; i < count; i++) {
        t[i].in[0] = t[i].out[0] = data + i * 64;
        t[i].elems = 64;
    }
    if (expired)
        o.deadline_ns = gr_now_ns() - 1;
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, count, &o, &job, NULL), GR_OK);
    result = gr_test_wait(job, 60000 * MS);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free(t);
    free(data);
    return result;
}

/* Run `fn` with fd 2 redirected to a temporary file; returns what was written there. */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    FILE *f = tmpfile();
    int saved;
    long len;
    char *text;

    ASSERT_TRUE(f != NULL);
    fflush(stderr);
    saved = dup(2);
    ASSERT_TRUE(saved >= 0);
    ASSERT_TRUE(dup2(fileno(f), 2) >= 0);
    fn(arg);
    fflush(stderr);
    ASSERT_TRUE(dup2(saved, 2) >= 0);
    close(saved);
    len = ftell(f) >= 0 ? (fseek(f, 0, SEEK_END), ftell(f)) : 0;
    text = calloc(1, (size_t)len + 1);
    rewind(f);
    ASSERT_EQ((long)fread(text, 1, (size_t)len, f), len);
    fclose(f);
    return text;
}

/* ------------------------------------------------------------------------------------- */

static void lifecycle_of(void *arg)
{
    gr_config *cfg = arg;
    gr_runtime *rt = create(cfg);

    ASSERT_STATUS(run_job(rt, 5, false), GR_OK);
    ASSERT_STATUS(run_job(rt, 5, true), GR_ERR_TIMEOUT);
    gr_runtime_destroy(rt);
}

static void silent_by_default(void)
{
    gr_config cfg = host_config(1 << 20);
    char *err;

    unsetenv("GR_LOG");
    err = capture_stderr(lifecycle_of, &cfg);
    ASSERT_EQ_U64(strlen(err), 0);
    free(err);
}

static void callback_events(void)
{
    sink *s = sink_new();
    gr_config cfg = collecting_config(1 << 20, s);
    gr_runtime *rt;

    rt = create(&cfg);
    EXPECT_COUNT(s, GR_LOG_INFO,
                 "runtime started: host backend (host backend, as configured), 1 device(s), 2 "
                 "worker(s) per device, budget 1.00 MiB per device",
                 1);
    ASSERT_STATUS(run_job(rt, 1000, false), GR_OK);
    ASSERT_STATUS(run_job(rt, 5, true), GR_ERR_TIMEOUT);
    EXPECT_COUNT(s, GR_LOG_WARN, "job 2: first failure, index ", 1);
    EXPECT_COUNT(s, GR_LOG_WARN, "deadline passed", 1);
    EXPECT_COUNT(s, GR_LOG_DEBUG, "", 0); /* the default threshold is info */
    gr_runtime_destroy(rt);
    EXPECT_COUNT(s, GR_LOG_INFO, "runtime shutting down: 0 job(s) with indices still to end", 1);
    EXPECT_COUNT(s, GR_LOG_INFO,
                 "runtime stopped: 2 job(s) submitted, 2 completed, 1 failed", 1);
    /* Started, the failure, shutting down, stopped: nothing about the 1005 tensors. */
    if (s->n != 4) {
        dump(s);
        GR_TEST_FAIL("expected 4 lines, got %d", s->n);
    }
    sink_free(s);
}

/* At debug: one line per job submitted and completed, a canceled job's first cancel, and
 * still nothing per tensor. */
static void debug_per_job_not_per_tensor(void)
{
    sink *s = sink_new();
    gr_config cfg = collecting_config(1 << 20, s);
    gr_runtime *rt;

    cfg.log_level = GR_LOG_DEBUG;
    rt = create(&cfg);
    ASSERT_STATUS(run_job(rt, 3000, false), GR_OK);
    EXPECT_COUNT(s, GR_LOG_DEBUG, "job 1 submitted: 3000 tensor(s)", 1);
    EXPECT_COUNT(s, GR_LOG_DEBUG, "job 1 complete: ok (3000 done, 0 failed, 0 canceled of 3000)",
                 1);
    gr_runtime_shutdown(rt);
    gr_runtime_shutdown(rt); /* idempotent: logged once */
    gr_runtime_destroy(rt);
    EXPECT_COUNT(s, GR_LOG_INFO, "runtime shutting down", 1);
    if (s->n > 8) {
        dump(s);
        GR_TEST_FAIL("expected a handful of lines for one job, got %d", s->n);
    }
    sink_free(s);
}

static void threshold_filters(void)
{
    sink *s = sink_new();
    gr_config cfg = collecting_config(1 << 20, s);
    gr_runtime *rt;

    cfg.log_level = GR_LOG_WARN;
    rt = create(&cfg);
    ASSERT_STATUS(run_job(rt, 5, false), GR_OK);
    ASSERT_STATUS(run_job(rt, 5, true), GR_ERR_TIMEOUT);
    gr_runtime_destroy(rt);
    EXPECT_COUNT(s, GR_LOG_WARN, "first failure", 1);
    ASSERT_EQ(s->n, 1);

    cfg.log_level = (gr_log_level)7;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(s->n, 1); /* a config that fails its checks is not trusted to log */
    sink_free(s);
}

/* AUTO says why it chose the host backend, when it does (a machine without a usable GPU);
 * with a GPU it chose CUDA and says nothing of the kind. */
static void auto_fallback(void)
{
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    sink *s = sink_new();
    gr_config cfg = collecting_config(4 << 20, s);
    gr_runtime *rt;

    cfg.backend = GR_BACKEND_AUTO;
    rt = create(&cfg);
    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_OK);
    if (info.backend == GR_BACKEND_HOST)
        EXPECT_COUNT(s, GR_LOG_WARN, "auto chose the host backend: ", 1);
    else
        EXPECT_COUNT(s, GR_LOG_WARN, "auto chose", 0);
    gr_runtime_destroy(rt);
    sink_free(s);
}

static void create_failure(void)
{
    sink *s = sink_new();
    gr_config cfg = collecting_config(1 << 20, s);
    gr_runtime *rt;

    cfg.host_devices = 0; /* passes the config checks, refused by the backend */
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, NULL), GR_ERR_INVALID_ARGUMENT);
    EXPECT_COUNT(s, GR_LOG_ERROR, "runtime could not start: invalid argument: host_devices", 1);
    ASSERT_EQ(s->n, 1);
    cfg.magic = 0; /* an uninitialized config: its callback may be garbage */
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(s->n, 1);
    sink_free(s);
}

static void env_to_stderr(void)
{
    gr_config cfg = host_config(1 << 20);
    char *err;

    setenv("GR_LOG", "Debug", 1);
    err = capture_stderr(lifecycle_of, &cfg);
    ASSERT_STR_CONTAINS(err, "graphrun: info: runtime started: host backend");
    ASSERT_STR_CONTAINS(err, "graphrun: debug: job 1 submitted: 5 tensor(s)");
    ASSERT_STR_CONTAINS(err, "graphrun: warn: job 2: first failure");
    ASSERT_STR_CONTAINS(err, "graphrun: info: runtime stopped: 2 job(s) submitted");
    free(err);

    setenv("GR_LOG", "error", 1);
    err = capture_stderr(lifecycle_of, &cfg);
    ASSERT_EQ_U64(strlen(err), 0); /* nothing at error in a healthy run */
    free(err);

    setenv("GR_LOG", "loud", 1);
    err = capture_stderr(lifecycle_of, &cfg);
    ASSERT_STR_CONTAINS(err, "graphrun: warn: GR_LOG=loud is not a log level");
    ASSERT_STR_CONTAINS(err, "graphrun: warn: job 2: first failure");
    ASSERT_TRUE(strstr(err, "info:") == NULL);
    free(err);
    unsetenv("GR_LOG");
}

/* GR_LOG overrides the config's level, also for a callback; off silences it. */
static void env_overrides_callback(void)
{
    gr_config cfg = host_config(1 << 20);
    sink *s = sink_new();

    cfg.log_callback = collect;
    cfg.log_user = s;
    cfg.log_level = GR_LOG_DEBUG;
    setenv("GR_LOG", "off", 1);
    lifecycle_of(&cfg);
    ASSERT_EQ(s->n, 0);
    setenv("GR_LOG", "warn", 1);
    lifecycle_of(&cfg);
    EXPECT_COUNT(s, GR_LOG_WARN, "first failure", 1);
    ASSERT_EQ(s->n, 1);
    unsetenv("GR_LOG");
    sink_free(s);
}

/* A fault that retires workers (private contexts) and then loses the device, as the CUDA
 * backend reports it, through the runtime's own calls on the host backend. */
static void faults_logged(void)
{
    sink *s = sink_new();
    gr_config cfg = collecting_config(1 << 20, s);
    gr_runtime *rt;

    rt = create(&cfg);
    gr__runtime_worker_retired(RT(rt), &RT(rt)->workers[0]);
    EXPECT_COUNT(s, GR_LOG_WARN,
                 "worker 0 of device 0 retired (a fault ruined its private context); 1 of 2 "
                 "workers of the device left",
                 1);
    EXPECT_COUNT(s, GR_LOG_ERROR, "lost", 0);
    gr__runtime_worker_retired(RT(rt), &RT(rt)->workers[0]); /* once only */
    gr__runtime_worker_retired(RT(rt), &RT(rt)->workers[1]);
    EXPECT_COUNT(s, GR_LOG_WARN, "retired", 2);
    EXPECT_COUNT(s, GR_LOG_ERROR,
                 "device 0 (host device 0) lost: every device is lost; all work fails with "
                 "'device lost'",
                 1);
    ASSERT_STATUS(run_job(rt, 3, false), GR_ERR_DEVICE_LOST);
    EXPECT_COUNT(s, GR_LOG_WARN, "job 1: first failure, index ", 1);
    EXPECT_COUNT(s, GR_LOG_WARN, "device lost", 1);
    gr_runtime_destroy(rt);
    sink_free(s);
}

/* Pinned memory cannot be had (every pinned allocation fails): staged units use ordinary
 * memory, the first such staging buffer is logged once as a warning naming RLIMIT_MEMLOCK,
 * the statistics and the Prometheus text count them, and the job still succeeds with the
 * seed pipeline's results. */
static void staging_fallback_logged_once(void)
{
    enum { N = 40, ELEMS = 64, STRIDE = 128 }; /* gaps between tensors: batches are staged */
    gr_stats st = GR_STATS_INIT;
    float *data = calloc(N, STRIDE * sizeof(float)), *want = calloc(N, STRIDE * sizeof(float));
    gr_tensor t[N];
    gr_status result;
    sink *s = sink_new();
    gr_config cfg = collecting_config(1 << 20, s);
    char text[16384];
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    ASSERT_TRUE(data != NULL && want != NULL);
    gr_testing_set_fault_plan(&cfg, "pin:1+");
    rt = create(&cfg);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < ELEMS; j++) {
            data[i * STRIDE + j] = (float)(i + j) * 0.25f;
            want[i * STRIDE + j] = gr__seed_ref(data[i * STRIDE + j]);
        }
        t[i] = (gr_tensor){.in = {data + i * STRIDE}, .out = {data + i * STRIDE}, .elems = ELEMS};
    }
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (int round = 0; round < 3; round++) { /* later staging buffers are counted, not logged */
        ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
        result = gr_test_wait(job, 60000 * MS);
        gr_job_destroy(job);
        ASSERT_STATUS(result, GR_OK);
        if (round == 0) {
            for (int k = 0; k < N * STRIDE; k++)
                ASSERT_FLOAT_BITS_EQ(data[k], want[k]);
        }
    }
    EXPECT_COUNT(s, GR_LOG_WARN, "cannot pin ", 1);
    EXPECT_COUNT(s, GR_LOG_WARN, "RLIMIT_MEMLOCK", 1);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_GE(st.staging_pageable, 1);
    ASSERT_LE(st.staging_pageable, cfg.workers_per_device); /* one buffer per worker, kept */
    ASSERT_TRUE(gr_runtime_stats_prometheus(rt, text, sizeof(text)) < sizeof(text));
    ASSERT_TRUE(strstr(text, "\ngraphrun_staging_pageable_total ") != NULL);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    sink_free(s);
    free(data);
    free(want);
}

static void level_names(void)
{
    ASSERT_STR_EQ(gr_log_level_name(GR_LOG_DEBUG), "debug");
    ASSERT_STR_EQ(gr_log_level_name(GR_LOG_INFO), "info");
    ASSERT_STR_EQ(gr_log_level_name(GR_LOG_WARN), "warn");
    ASSERT_STR_EQ(gr_log_level_name(GR_LOG_ERROR), "error");
    ASSERT_STR_EQ(gr_log_level_name(GR_LOG_OFF), "off");
    ASSERT_STR_EQ(gr_log_level_name((gr_log_level)99), "unknown");
}

GR_TEST_MAIN(GR_TEST(silent_by_default), GR_TEST(callback_events),
             GR_TEST(debug_per_job_not_per_tensor), GR_TEST(threshold_filters),
             GR_TEST(auto_fallback), GR_TEST(create_failure), GR_TEST(env_to_stderr),
             GR_TEST(env_overrides_callback), GR_TEST(faults_logged),
             GR_TEST(staging_fallback_logged_once), GR_TEST(level_names))

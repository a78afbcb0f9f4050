/*
 * stats_test.c - statistics on the host backend: exact counter values after known jobs
 * (tensors by outcome and by where they ended, iterations, bytes, jobs, budget, histogram
 * counts and placement), the struct-size rule, counts under many submitting threads, and
 * the Prometheus text: exact samples, snprintf-style sizing, and its syntax line by line.
 *
 * Workers are held still as in runtime_test.c: the test takes the device's whole budget,
 * so the one worker sleeps in the budget's queue with the first task it popped.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

/* The runtime behind a handle, for the checks that look inside. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

#define SEED 11
#define MS 1000000ll

static void expect_line(const char *text, const char *line);

static gr_stats stats_of(gr_runtime *rt, uint32_t device)
{
    gr_stats s = GR_STATS_INIT;

    ASSERT_STATUS(gr_runtime_stats_get(rt, device, &s), GR_OK);
    return s;
}

static uint64_t bucket_sum(const gr_histogram *h, uint32_t from)
{
    uint64_t n = 0;

    for (uint32_t b = from; b < GR_HISTOGRAM_BUCKETS; b++)
        n += h->buckets[b];
    return n;
}

static void run_job(gr_runtime *rt, gr_graph *g, const gr_test_tensors *s, gr_status want)
{
    gr_job *job;
    gr_error_info err;

    ASSERT_STATUS(gr_job_submit(rt, g, s->t, s->count, NULL, &job, &err), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 60000 * MS), want);
    gr_job_destroy(job);
}

/* ------------------------------------------------------------------------------------- */

static void bucket_bounds(void)
{
    /* Bucket 0: under 1 us; bucket i: [2^(i-1), 2^i) us; the last: 2^26 us and more. */
    ASSERT_EQ(gr__stats_bucket(-5), 0);
    ASSERT_EQ(gr__stats_bucket(0), 0);
    ASSERT_EQ(gr__stats_bucket(999), 0);
    ASSERT_EQ(gr__stats_bucket(1000), 1);
    ASSERT_EQ(gr__stats_bucket(1999), 1);
    ASSERT_EQ(gr__stats_bucket(2000), 2);
    ASSERT_EQ(gr__stats_bucket(3999), 2);
    ASSERT_EQ(gr__stats_bucket(4000), 3);
    ASSERT_EQ(gr__stats_bucket(20 * MS), 15); /* 20000 us: 2^14 <= 20000 < 2^15 */
    ASSERT_EQ(gr__stats_bucket((1ll << 26) * 1000 - 1000), 26);
    ASSERT_EQ(gr__stats_bucket((1ll << 26) * 1000), GR_HISTOGRAM_BUCKETS - 1);
    ASSERT_EQ(gr__stats_bucket(INT64_MAX), GR_HISTOGRAM_BUCKETS - 1);
}

/* One job of 10 whole tensors on 1 device with 2 workers: every counter is exact. */
static void exact_after_job(void)
{
    gr_runtime *rt = gr_test_runtime(
        (gr_test_shape){.workers = 2, .budget = 1 << 20, .whole_tensors = true});
    gr_test_tensors s = gr_test_tensors_make(SEED, 10, 1000);
    uint64_t footprint;
    gr_graph *g;
    gr_stats st;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_graph_footprint(g, 1000, &footprint), GR_OK);
    ASSERT_EQ_U64(footprint, 4096); /* 4000 bytes, rounded to the 256-byte alignment */

    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.jobs_submitted, 0);
    ASSERT_EQ_U64(st.tensors_done, 0);
    ASSERT_EQ_U64(st.budget_wait.count, 0);
    ASSERT_EQ_U64(st.budget_peak, 0);

    run_job(rt, g, &s, GR_OK);
    gr_test_expect_all_processed(&s);
    st = stats_of(rt, 0);
    ASSERT_EQ(st.device_count, 1);
    ASSERT_EQ(st.device, 0);
    ASSERT_EQ(st.devices_lost, 0);
    ASSERT_EQ(st.lost, 0);
    ASSERT_EQ(st.workers, 2);
    ASSERT_EQ(st.workers_retired, 0);
    ASSERT_EQ_U64(st.jobs_submitted, 1);
    ASSERT_EQ_U64(st.jobs_completed, 1);
    ASSERT_EQ_U64(st.jobs_failed, 0);
    ASSERT_EQ_U64(st.tensors_done, 10);
    ASSERT_EQ_U64(st.tensors_failed, 0);
    ASSERT_EQ_U64(st.tensors_canceled, 0);
    ASSERT_EQ_U64(st.nodevice_failed, 0);
    ASSERT_EQ_U64(st.nodevice_canceled, 0);
    ASSERT_EQ_U64(st.iterations_done, 10);
    ASSERT_EQ_U64(st.iterations_failed, 0);
    ASSERT_EQ_U64(st.bytes_h2d, 10 * 1000 * 4);
    ASSERT_EQ_U64(st.bytes_d2h, 10 * 1000 * 4);
    ASSERT_EQ_U64(st.budget_bytes, 1 << 20);
    ASSERT_EQ_U64(st.budget_in_use, 0);
    /* One or both workers held an iteration's footprint at once (each up to its units in
     * flight: two under GR_UNITS_IN_FLIGHT=2). */
    ASSERT_TRUE(st.budget_peak % footprint == 0 && st.budget_peak >= footprint &&
                st.budget_peak <= 2 * RT(rt)->workers[0].in_flight * footprint);
    ASSERT_EQ_U64(st.budget_wait.count, 10);
    ASSERT_EQ_U64(bucket_sum(&st.budget_wait, 0), 10);
    ASSERT_EQ_U64(st.iteration.count, 10);
    ASSERT_EQ_U64(bucket_sum(&st.iteration, 0), 10);
    ASSERT_GT(st.iteration.sum_ns, 0);
    ASSERT_EQ_U64(st.graph_instantiations, 0); /* host backend */

    /* The old call agrees with the new one. */
    {
        gr_device_stats old;

        ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &old), GR_OK);
        ASSERT_EQ_U64(old.iterations_done, st.iterations_done);
        ASSERT_EQ_U64(old.budget_peak, st.budget_peak);
    }

    /* A second job adds up, and its id is the next one. */
    {
        gr_job *job;

        ASSERT_STATUS(gr_job_submit(rt, g, s.t, 4, NULL, &job, NULL), GR_OK);
        ASSERT_EQ_U64(gr_job_id(job), 2);
        ASSERT_STATUS(gr_test_wait(job, 60000 * MS), GR_OK);
        gr_job_destroy(job);
    }
    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.jobs_submitted, 2);
    ASSERT_EQ_U64(st.jobs_completed, 2);
    ASSERT_EQ_U64(st.tensors_done, 14);
    ASSERT_EQ_U64(st.bytes_h2d, 14 * 1000 * 4);
    ASSERT_EQ_U64(st.iteration.count, 14);
    ASSERT_EQ_U64(gr_job_id(NULL), 0);

    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&s);
}

/* Small tensors batched and large ones chunked: iterations differ from tensors, bytes do
 * not (every element crosses once each way), and two devices split the work. */
static void units_and_devices(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.devices = 2, .workers = 2,
                                                     .budget = 256 << 10});
    gr_test_tensors small = gr_test_tensors_make(SEED, 200, 100);     /* 400 B each: batched */
    gr_test_tensors large = gr_test_tensors_make(SEED, 3, 100000);    /* 400 KB each: over the 256 KiB budget */
    uint64_t done = 0, iterations = 0, h2d = 0, d2h = 0;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    run_job(rt, g, &small, GR_OK);
    run_job(rt, g, &large, GR_OK);
    gr_test_expect_all_processed(&small);
    gr_test_expect_all_processed(&large);
    for (uint32_t d = 0; d < 2; d++) {
        gr_stats st = stats_of(rt, d);

        ASSERT_EQ(st.device_count, 2);
        ASSERT_EQ(st.device, d);
        ASSERT_EQ(st.workers, 2);
        ASSERT_EQ_U64(st.tensors_failed + st.tensors_canceled, 0);
        ASSERT_EQ_U64(st.iteration.count, st.iterations_done);
        ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
        ASSERT_EQ_U64(st.budget_in_use, 0);
        ASSERT_EQ_U64(st.jobs_submitted, 2);
        ASSERT_EQ_U64(st.jobs_completed, 2);
        done += st.tensors_done;
        iterations += st.iterations_done;
        h2d += st.bytes_h2d;
        d2h += st.bytes_d2h;
    }
    ASSERT_EQ_U64(done, 203);
    ASSERT_EQ_U64(h2d, (200 * 100 + 3 * 100000) * 4ull);
    ASSERT_EQ_U64(d2h, h2d);
    ASSERT_LT(iterations, 200); /* the small ones went in batches */
    ASSERT_GT(iterations, 3 * 2); /* each large one took at least two chunks */
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&small);
    gr_test_tensors_free(&large);
}

/* Where stopped indices are counted. One worker is held in the budget's queue with job A's
 * only task, so job B's tasks stay in the ring: canceling B, or B's deadline, ends them on
 * the canceling thread or the deadline thread (no device); canceling A wakes the worker,
 * which ends A's index itself (its device). A's budget wait is in the histogram. */
static void canceled_and_waits(void)
{
    gr_runtime *rt = gr_test_runtime(
        (gr_test_shape){.workers = 1, .budget = 1 << 20, .whole_tensors = true});
    gr_budget *b = RT(rt)->devices[0].budget;
    gr_test_tensors s = gr_test_tensors_make(SEED, 8, 1000);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_job *a, *job;
    gr_graph *g;
    gr_stats st;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr__budget_acquire(b, gr__budget_capacity(b), GR_NO_DEADLINE, NULL), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 1, NULL, &a, NULL), GR_OK);
    for (int i = 0; i < 5000 && gr__budget_waiters(b) != 1; i++)
        usleep(1000);
    ASSERT_EQ(gr__budget_waiters(b), 1);
    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.budget_in_use, 1 << 20); /* the test's own hold counts */

    ASSERT_STATUS(gr_job_submit(rt, g, s.t + 1, 7, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 60000 * MS), GR_ERR_CANCELED);
    gr_job_destroy(job);
    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.nodevice_canceled, 7);
    ASSERT_EQ_U64(st.tensors_canceled, 0);

    o.deadline_ns = gr_now_ns() + 30 * MS;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t + 1, 7, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 60000 * MS), GR_ERR_TIMEOUT);
    gr_job_destroy(job);
    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.nodevice_failed, 7);
    ASSERT_EQ_U64(st.tensors_failed, 0);
    ASSERT_EQ_U64(st.budget_wait.count, 0); /* A's request is still waiting */

    ASSERT_STATUS(gr_job_cancel(a), GR_OK); /* A has waited 30 ms and more by now */
    ASSERT_STATUS(gr_test_wait(a, 60000 * MS), GR_ERR_CANCELED);
    gr_job_destroy(a);
    gr__budget_release(b, gr__budget_capacity(b));

    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.jobs_submitted, 3);
    ASSERT_EQ_U64(st.jobs_completed, 3);
    ASSERT_EQ_U64(st.jobs_failed, 3);
    ASSERT_EQ_U64(st.tensors_done, 0);
    ASSERT_EQ_U64(st.tensors_canceled, 1);
    ASSERT_EQ_U64(st.nodevice_canceled, 7);
    ASSERT_EQ_U64(st.nodevice_failed, 7);
    ASSERT_EQ_U64(st.iterations_done + st.iterations_failed, 0);
    ASSERT_EQ_U64(st.bytes_h2d, 0);
    /* One request, refused by the cancel after at least 30 ms: bucket 15 ([16.4, 32.8) ms)
     * or later. */
    ASSERT_EQ_U64(st.budget_wait.count, 1);
    ASSERT_EQ_U64(bucket_sum(&st.budget_wait, 15), 1);
    ASSERT_GE(st.budget_wait.sum_ns, 30 * MS);
    ASSERT_EQ_U64(st.iteration.count, 0);

    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&s);
}

static void struct_size_rule(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 1 << 20});
    struct {
        gr_stats s;
        unsigned char tail[64];
    } big;
    gr_stats s = GR_STATS_INIT;

    ASSERT_STATUS(gr_runtime_stats_get(NULL, 0, &s), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 1, &s), GR_ERR_INVALID_ARGUMENT);
    s.magic = 0;
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &s), GR_ERR_INVALID_ARGUMENT);
    s.magic = GR_STATS_MAGIC;
    s.struct_size = 8;
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &s), GR_ERR_INVALID_ARGUMENT);

    /* A caller built against a longer gr_stats (a newer header): what this library knows is
     * filled, the rest left alone. */
    memset(&big, 0xab, sizeof(big));
    big.s.struct_size = sizeof(big);
    big.s.magic = GR_STATS_MAGIC;
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &big.s), GR_OK);
    ASSERT_EQ(big.s.struct_size, sizeof(big));
    ASSERT_EQ(big.s.device_count, 1);
    ASSERT_EQ_U64(big.s.budget_bytes, 1 << 20);
    for (size_t i = 0; i < sizeof(big.tail); i++)
        ASSERT_EQ(big.tail[i], 0xab);

    /* A caller built against the first gr_stats, which ended with the histograms: still
     * served, and nothing written past what it knows. */
    memset(&big, 0xab, sizeof(big));
    big.s.struct_size = (uint32_t)offsetof(gr_stats, staging_pageable);
    big.s.magic = GR_STATS_MAGIC;
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &big.s), GR_OK);
    ASSERT_EQ_U64(big.s.budget_bytes, 1 << 20);
    for (size_t i = offsetof(gr_stats, staging_pageable); i < sizeof(big); i++)
        ASSERT_EQ(((unsigned char *)&big)[i], 0xab);
    gr_runtime_destroy(rt);
}

/* Many threads submit at once; every count adds up exactly. */
#define THREADS 8
#define JOBS_PER_THREAD 25
#define TENSORS_PER_JOB 6

typedef struct submitter {
    gr_runtime *rt;
    gr_graph *g;
    pthread_barrier_t *start;
    gr_test_tensors s;
} submitter;

static void *submit_main(void *arg)
{
    submitter *sub = arg;

    pthread_barrier_wait(sub->start);
    for (int j = 0; j < JOBS_PER_THREAD; j++) {
        gr_job *job;
        gr_status result = GR_ERR_INTERNAL;

        if (gr_job_submit(sub->rt, sub->g, sub->s.t, sub->s.count, NULL, &job, NULL) != GR_OK)
            return (void *)1;
        gr_job_wait(job, GR_WAIT_FOREVER, &result);
        gr_job_destroy(job);
        if (result != GR_OK)
            return (void *)1;
    }
    return NULL;
}

static void counts_under_threads(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.devices = 2, .workers = 3,
                                                     .budget = 1 << 20});
    pthread_barrier_t start;
    pthread_t th[THREADS];
    submitter sub[THREADS];
    uint64_t done = 0, h2d = 0, waits = 0;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        sub[i] = (submitter){rt, g, &start, gr_test_tensors_make(SEED, TENSORS_PER_JOB, 64 + 32 * i)};
        ASSERT_EQ(pthread_create(&th[i], NULL, submit_main, &sub[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *ret;

        pthread_join(th[i], &ret);
        ASSERT_PTR_EQ(ret, NULL);
    }
    for (uint32_t d = 0; d < 2; d++) {
        gr_stats st = stats_of(rt, d);

        ASSERT_EQ_U64(st.jobs_submitted, THREADS * JOBS_PER_THREAD);
        ASSERT_EQ_U64(st.jobs_completed, THREADS * JOBS_PER_THREAD);
        done += st.tensors_done;
        h2d += st.bytes_h2d;
        waits += st.budget_wait.count;
        ASSERT_EQ_U64(st.budget_wait.count, st.iterations_done);
    }
    ASSERT_EQ_U64(done, THREADS * JOBS_PER_THREAD * TENSORS_PER_JOB);
    {
        uint64_t want = 0;

        for (int i = 0; i < THREADS; i++)
            want += (uint64_t)JOBS_PER_THREAD * TENSORS_PER_JOB * (64 + 32 * i) * 4;
        ASSERT_EQ_U64(h2d, want);
    }
    ASSERT_GT(waits, 0);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; i++)
        gr_test_tensors_free(&sub[i].s);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* ------------------------------------------------------------------------------------- */
/* Prometheus text.                                                                       */

static char *render(gr_runtime *rt)
{
    size_t need = gr_runtime_stats_prometheus(rt, NULL, 0);
    char *buf;

    ASSERT_GT(need, 0);
    buf = malloc(need + 1);
    ASSERT_TRUE(buf != NULL);
    ASSERT_EQ_U64(gr_runtime_stats_prometheus(rt, buf, need + 1), need);
    ASSERT_EQ_U64(strlen(buf), need);
    return buf;
}

static void expect_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return;
    GR_TEST_FAIL("no line \"%s\" in:\n%s", line, text);
}

static bool name_char(int c, bool first)
{
    return isalpha(c) || c == '_' || c == ':' || (!first && isdigit(c));
}

/* The exposition format, checked line by line: comments are HELP or TYPE with a valid
 * name (TYPE one of the known types, at most once per name, before its samples); a sample is
 * name{label="value",...} value, whose name is a declared family or, for a histogram, the
 * family's _bucket, _sum or _count; a value reads as a number; every line ends in '\n'.
 * Returns the number of samples. The graphserve test also parses /metrics with the
 * Prometheus client library's own parser. */
static int check_syntax(const char *text)
{
    char family[128] = "", type[16] = "";
    int samples = 0, line_no = 0;
    const char *p = text;

    while (*p) {
        const char *end = strchr(p, '\n');
        char line[512], name[128];
        size_t len, k = 0;

        line_no++;
        if (end == NULL)
            GR_TEST_FAIL("line %d does not end in a newline", line_no);
        len = (size_t)(end - p);
        ASSERT_LT(len, sizeof(line));
        memcpy(line, p, len);
        line[len] = '\0';
        p = end + 1;
        if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
            const char *q = line + 7;
            size_t nlen = 0;

            while (name_char(q[nlen], nlen == 0))
                nlen++;
            if (nlen == 0 || q[nlen] != ' ')
                GR_TEST_FAIL("line %d: bad metric name: %s", line_no, line);
            if (line[2] == 'T') {
                const char *t = q + nlen + 1;

                if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram"))
                    GR_TEST_FAIL("line %d: unknown type: %s", line_no, line);
                if (strncmp(family, q, nlen) == 0 && family[nlen] == '\0' && type[0])
                    GR_TEST_FAIL("line %d: second TYPE for %s", line_no, family);
                memcpy(family, q, nlen);
                family[nlen] = '\0';
                snprintf(type, sizeof(type), "%s", t);
            }
            continue;
        }
        ASSERT_TRUE(line[0] != '#');
        while (name_char(line[k], k == 0))
            k++;
        if (k == 0 || k >= sizeof(name))
            GR_TEST_FAIL("line %d: bad sample name: %s", line_no, line);
        memcpy(name, line, k);
        name[k] = '\0';
        if (strcmp(name, family) != 0) {
            size_t f = strlen(family);
            bool suffix = strcmp(type, "histogram") == 0 && strncmp(name, family, f) == 0 &&
                          (!strcmp(name + f, "_bucket") || !strcmp(name + f, "_sum") ||
                           !strcmp(name + f, "_count"));
            if (!suffix)
                GR_TEST_FAIL("line %d: sample %s outside its family %s", line_no, name, family);
        }
        if (line[k] == '{') {
            k++;
            while (line[k] != '}') {
                size_t l0 = k;

                while (name_char(line[k], k == l0))
                    k++;
                if (k == l0 || line[k] != '=' || line[k + 1] != '"')
                    GR_TEST_FAIL("line %d: bad label at column %zu: %s", line_no, k + 1, line);
                k += 2;
                while (line[k] && line[k] != '"' && line[k] != '\\' && line[k] != '\n')
                    k++;
                if (line[k] != '"')
                    GR_TEST_FAIL("line %d: unterminated label value: %s", line_no, line);
                k++;
                if (line[k] == ',')
                    k++;
                else if (line[k] != '}')
                    GR_TEST_FAIL("line %d: expected ',' or '}': %s", line_no, line);
            }
            k++;
        }
        if (line[k] != ' ')
            GR_TEST_FAIL("line %d: expected a space before the value: %s", line_no, line);
        {
            char *vend;

            strtod(line + k + 1, &vend);
            if (vend == line + k + 1 || *vend != '\0')
                GR_TEST_FAIL("line %d: value is not a number: %s", line_no, line);
        }
        samples++;
    }
    return samples;
}

static void prometheus_text(void)
{
    gr_runtime *rt = gr_test_runtime(
        (gr_test_shape){.devices = 2, .workers = 1, .budget = 1 << 20, .whole_tensors = true});
    gr_test_tensors s = gr_test_tensors_make(SEED, 10, 1000);
    gr_stats st0, st1;
    char line[160];
    gr_graph *g;
    char *text;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    run_job(rt, g, &s, GR_OK);
    st0 = stats_of(rt, 0);
    st1 = stats_of(rt, 1);
    ASSERT_EQ_U64(st0.tensors_done + st1.tensors_done, 10);
    text = render(rt);

    expect_line(text, "# TYPE graphrun_tensors_total counter");
    expect_line(text, "graphrun_info{backend=\"host\",version=\"" GR_VERSION "\"} 1");
    expect_line(text, "graphrun_devices 2");
    expect_line(text, "graphrun_jobs_submitted_total 1");
    expect_line(text, "graphrun_jobs_completed_total 1");
    expect_line(text, "graphrun_jobs_failed_total 0");
    for (uint32_t d = 0; d < 2; d++) {
        const gr_stats *st = d ? &st1 : &st0;

        snprintf(line, sizeof(line), "graphrun_tensors_total{device=\"%u\",outcome=\"done\"} %llu",
                 d, (unsigned long long)st->tensors_done);
        expect_line(text, line);
        snprintf(line, sizeof(line),
                 "graphrun_transfer_bytes_total{device=\"%u\",direction=\"h2d\"} %llu", d,
                 (unsigned long long)st->tensors_done * 4000);
        expect_line(text, line);
        snprintf(line, sizeof(line), "graphrun_iteration_seconds_count{device=\"%u\"} %llu", d,
                 (unsigned long long)st->tensors_done);
        expect_line(text, line);
        snprintf(line, sizeof(line),
                 "graphrun_iteration_seconds_bucket{device=\"%u\",le=\"+Inf\"} %llu", d,
                 (unsigned long long)st->tensors_done);
        expect_line(text, line);
        snprintf(line, sizeof(line), "graphrun_budget_bytes{device=\"%u\"} %d", d, 1 << 20);
        expect_line(text, line);
        snprintf(line, sizeof(line), "graphrun_budget_in_use_bytes{device=\"%u\"} 0", d);
        expect_line(text, line);
    }
    expect_line(text, "graphrun_tensors_total{device=\"none\",outcome=\"canceled\"} 0");
    expect_line(text, "# TYPE graphrun_budget_wait_seconds histogram");
    snprintf(line, sizeof(line), "graphrun_budget_wait_seconds_count{device=\"0\"} %llu",
             (unsigned long long)st0.budget_wait.count);
    expect_line(text, line);
    ASSERT_EQ_U64(st0.budget_wait.count, st0.tensors_done);

    /* Buckets: bounds 1 us, 2 us, ... 2^26 us = 67.108864 s, then +Inf; cumulative. */
    {
        const char *b =
            strstr(text, "graphrun_iteration_seconds_bucket{device=\"0\",le=\"0.000001\"}");
        unsigned long long prev = 0;
        int n = 0;

        ASSERT_TRUE(b != NULL);
        ASSERT_TRUE(strstr(text, "le=\"67.108864\"}") != NULL);
        ASSERT_TRUE(strstr(text, "le=\"134.217728\"}") == NULL);
        while ((b = strstr(b, "graphrun_iteration_seconds_bucket{device=\"0\"")) != NULL) {
            unsigned long long v = strtoull(strchr(b, '}') + 2, NULL, 10);

            ASSERT_GE(v, prev);
            prev = v;
            n++;
            b++;
        }
        ASSERT_EQ(n, GR_HISTOGRAM_BUCKETS);
        ASSERT_EQ_U64(prev, st0.tensors_done);
    }
    ASSERT_GT(check_syntax(text), 50);
    free(text);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&s);
}

/* snprintf-style: the length is the same whatever the buffer, the text is cut short and
 * terminated in a short buffer, and nothing is written with size 0. */
static void prometheus_sizing(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 1 << 20});
    char *full = render(rt);
    size_t need = strlen(full);
    char small[40], none[1] = {'x'};

    ASSERT_EQ_U64(gr_runtime_stats_prometheus(rt, NULL, 0), need);
    ASSERT_EQ_U64(gr_runtime_stats_prometheus(rt, none, 0), need);
    ASSERT_EQ(none[0], 'x');
    ASSERT_EQ_U64(gr_runtime_stats_prometheus(rt, small, sizeof(small)), need);
    ASSERT_EQ_U64(strlen(small), sizeof(small) - 1);
    ASSERT_EQ(memcmp(small, full, sizeof(small) - 1), 0);
    ASSERT_EQ_U64(gr_runtime_stats_prometheus(NULL, small, sizeof(small)), 0);
    /* A buffer of exactly the length has no room for the NUL: cut by one. */
    {
        char *exact = malloc(need);

        ASSERT_EQ_U64(gr_runtime_stats_prometheus(rt, exact, need), need);
        ASSERT_EQ_U64(strlen(exact), need - 1);
        free(exact);
    }
    free(full);
    gr_runtime_destroy(rt);
}

/* A lost device (marked as a sticky CUDA error would mark it; on the host backend through
 * the runtime's own call) shows in the struct and the text; the other device does the work. */
static void device_lost_reported(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.devices = 2, .workers = 2,
                                                     .budget = 1 << 20, .whole_tensors = true});
    gr_test_tensors s = gr_test_tensors_make(SEED, 20, 100);
    gr_stats st0, st1;
    gr_graph *g;
    char *text;

    gr__runtime_device_lost(RT(rt), &RT(rt)->devices[1]);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    run_job(rt, g, &s, GR_OK);
    gr_test_expect_all_processed(&s);
    st0 = stats_of(rt, 0);
    st1 = stats_of(rt, 1);
    ASSERT_EQ(st0.devices_lost, 1);
    ASSERT_EQ(st0.lost, 0);
    ASSERT_EQ(st1.lost, 1);
    ASSERT_EQ_U64(st0.tensors_done, 20);
    ASSERT_EQ_U64(st1.tensors_done + st1.iterations_done, 0);
    text = render(rt);
    expect_line(text, "graphrun_devices_lost 1");
    expect_line(text, "graphrun_device_lost{device=\"0\"} 0");
    expect_line(text, "graphrun_device_lost{device=\"1\"} 1");
    free(text);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    gr_test_tensors_free(&s);
}

GR_TEST_MAIN(GR_TEST(bucket_bounds), GR_TEST(device_lost_reported), GR_TEST(exact_after_job),
             GR_TEST(units_and_devices),
             GR_TEST(canceled_and_waits), GR_TEST(struct_size_rule),
             GR_TEST(counts_under_threads), GR_TEST(prometheus_text),
             GR_TEST(prometheus_sizing))

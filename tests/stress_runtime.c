/*
 * stress_runtime.c - the whole runtime under many submitting threads.
 *
 * N submitter threads (default 32) start behind a barrier and, until the duration is up,
 * submit jobs of 1..16 in-place seed tensors of random sizes to a runtime with 16 workers on
 * two host devices, a budget of a few tensors and a small ring. Jobs are randomly: waited
 * for, canceled after a random delay, given a short deadline, detached (no handle kept),
 * or released right after submission. Every job has a completion callback that records
 * every index's final state.
 *
 * Checked for every job: the callback ran exactly once; every index ended exactly once
 * (terminal state, counts add up, no anomaly inside the runtime); every DONE output equals
 * the seed reference bit for bit (so an index run twice in place is caught); every index
 * that did not finish was never written. Throughout: a monitor samples the budget in use,
 * which must never exceed the budget; at the end nothing is held.
 *
 *   stress_runtime [--threads N] [--duration SECONDS] [--seed X]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "runtime/job.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

#define DEVICES 2
#define WORKERS_PER_DEVICE 8
#define MAX_TENSORS 16
#define MAX_ELEMS 16384
#define BUDGET_TENSORS 3

typedef struct record {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int calls;
    uint64_t count;
    uint8_t state[MAX_TENSORS];
    gr_job_progress progress;
    uint64_t anomalies;
} record;

typedef struct shared {
    gr_runtime *rt;
    gr_graph *g;
    pthread_barrier_t start;
    int64_t stop_at;
    atomic_bool monitor_stop;
    _Atomic uint64_t jobs, done, failed, canceled, violations, budget_samples;
} shared;

typedef struct submitter {
    shared *s;
    unsigned id;
    uint64_t rng;
} submitter;

static void on_complete(gr_job *job, gr_status st, void *user)
{
    record *r = user;

    (void)st;
    for (uint64_t i = 0; i < r->count; i++) {
        gr_index_state state;
        gr_job_index_get(job, i, &state, NULL);
        r->state[i] = (uint8_t)state;
    }
    gr_job_progress_get(job, &r->progress);
    r->anomalies = gr__job_anomalies(job);
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&r->calls, 1);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    nanosleep(&ts, NULL);
}

static void one_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems, uint64_t id)
{
    shared *s = w->s;
    uint64_t count = 1 + gr_test_below(&w->rng, MAX_TENSORS);
    uint64_t kind = gr_test_below(&w->rng, 10);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_error_info err;
    gr_job *job = NULL;
    record r;

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.count = count;
    for (uint64_t i = 0; i < count; i++) {
        elems[i] = gr_test_below(&w->rng, 4) == 0 ? 1 + gr_test_below(&w->rng, 16)
                                                  : 1 + gr_test_below(&w->rng, MAX_ELEMS);
        gr_workload_fill(data[i], 0, elems[i], id, i);
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = elems[i];
    }
    o.on_complete = on_complete;
    o.user = &r;
    if (kind == 7)
        o.deadline_ns = gr_now_ns() + (int64_t)gr_test_below(&w->rng, 3000000);
    if (gr_job_submit(s->rt, s->g, t, count, &o, kind == 8 ? NULL : &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (kind == 6) {
        sleep_ns(gr_test_below(&w->rng, 2000000));
        ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    }
    if (kind == 9) {
        gr_job_destroy(job); /* released at once: runs on, calls back */
        job = NULL;
    }
    if (job != NULL && gr_test_below(&w->rng, 2) == 0) {
        ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, NULL), GR_OK);
        ASSERT_EQ(atomic_load(&r.calls), 1); /* the callback returned before the wait */
    }
    pthread_mutex_lock(&r.mu);
    while (atomic_load(&r.calls) == 0)
        pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
    gr_job_destroy(job);

    ASSERT_EQ(atomic_load(&r.calls), 1);
    ASSERT_EQ_U64(r.anomalies, 0);
    ASSERT_EQ_U64(r.progress.total, count);
    ASSERT_EQ_U64(r.progress.done + r.progress.failed + r.progress.canceled, count);
    ASSERT_EQ_U64(r.progress.queued + r.progress.in_flight, 0);
    if (kind < 6 || kind == 8 || kind == 9)
        ASSERT_EQ_U64(r.progress.done, count); /* nothing stopped these */
    for (uint64_t i = 0; i < count; i++) {
        uint64_t where, bad;

        if (r.state[i] == GR_INDEX_DONE) {
            bad = gr_workload_check_seed(data[i], 0, elems[i], id, i, &where);
            atomic_fetch_add(&s->done, 1);
        } else {
            ASSERT_TRUE(r.state[i] == GR_INDEX_FAILED || r.state[i] == GR_INDEX_CANCELED);
            bad = gr_workload_check_input(data[i], 0, elems[i], id, i, &where);
            atomic_fetch_add(r.state[i] == GR_INDEX_FAILED ? &s->failed : &s->canceled, 1);
        }
        if (bad)
            GR_TEST_FAIL("job %llu index %llu (state %d, %llu elements): %llu wrong elements, "
                         "first %llu",
                         (unsigned long long)id, (unsigned long long)i, r.state[i],
                         (unsigned long long)elems[i], (unsigned long long)bad,
                         (unsigned long long)where);
    }
    /* A little more time for a callback that might (wrongly) run twice. */
    ASSERT_EQ(atomic_load(&r.calls), 1);
    atomic_fetch_add(&s->jobs, 1);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
}

static void *submit_main(void *p)
{
    submitter *w = p;
    float *data[MAX_TENSORS];
    gr_tensor t[MAX_TENSORS];
    uint64_t elems[MAX_TENSORS];

    memset(t, 0, sizeof(t));
    for (int i = 0; i < MAX_TENSORS; i++)
        data[i] = malloc(MAX_ELEMS * sizeof(float));
    pthread_barrier_wait(&w->s->start);
    for (uint64_t n = 0; gr_now_ns() < w->s->stop_at; n++)
        one_job(w, data, t, elems, ((uint64_t)w->id << 32) | n);
    for (int i = 0; i < MAX_TENSORS; i++)
        free(data[i]);
    return NULL;
}

static void *monitor_main(void *p)
{
    shared *s = p;
    gr_device_stats st;

    while (!atomic_load(&s->monitor_stop)) {
        for (uint32_t d = 0; d < DEVICES; d++) {
            gr_runtime_device_stats(s->rt, d, &st);
            if (st.budget_in_use > st.budget_bytes)
                atomic_fetch_add(&s->violations, 1);
            atomic_fetch_add(&s->budget_samples, 1);
        }
        sleep_ns(100000);
    }
    return NULL;
}

static gr_stress_opts opt = {32, 1.0, 1};

static void stress(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    unsigned n = opt.threads;
    submitter *w = calloc(n, sizeof(*w));
    pthread_t *th = calloc(n, sizeof(*th)), mon;
    uint64_t footprint, violations, peak_max = 0;
    gr_device_stats st;
    gr_error_info err;
    shared s;

    memset(&s, 0, sizeof(s));
    ASSERT_STATUS(gr_graph_create_seed(&s.g), GR_OK);
    ASSERT_STATUS(gr_graph_footprint(s.g, MAX_ELEMS, &footprint), GR_OK);
    cfg.backend = GR_BACKEND_HOST;
    cfg.host_devices = DEVICES;
    cfg.workers_per_device = WORKERS_PER_DEVICE;
    cfg.budget_bytes = BUDGET_TENSORS * footprint;
    cfg.ring_capacity = 64;
    if (gr_runtime_create(&cfg, &s.rt, &err) != GR_OK)
        GR_TEST_FAIL("create: %s", err.message);
    pthread_barrier_init(&s.start, NULL, n + 1);
    for (unsigned i = 0; i < n; i++) {
        w[i] = (submitter){&s, i, opt.seed * 104729 + i};
        ASSERT_EQ(pthread_create(&th[i], NULL, submit_main, &w[i]), 0);
    }
    ASSERT_EQ(pthread_create(&mon, NULL, monitor_main, &s), 0);
    s.stop_at = gr_now_ns() + (int64_t)(opt.duration_s * 1e9);
    pthread_barrier_wait(&s.start);
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    atomic_store(&s.monitor_stop, true);
    pthread_join(mon, NULL);

    for (uint32_t d = 0; d < DEVICES; d++) {
        ASSERT_STATUS(gr_runtime_device_stats(s.rt, d, &st), GR_OK);
        ASSERT_EQ_U64(st.budget_in_use, 0);
        ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
        if (st.budget_peak > peak_max)
            peak_max = st.budget_peak;
    }
    violations = atomic_load(&s.violations);
    printf("stress_runtime: %u submitters, %d workers on %d devices, budget %llu bytes "
           "(%d tensors): %llu jobs, %llu indices done, %llu failed, %llu canceled; peak "
           "budget %llu; %llu budget samples, %llu violations\n",
           n, DEVICES * WORKERS_PER_DEVICE, DEVICES, (unsigned long long)cfg.budget_bytes,
           BUDGET_TENSORS, (unsigned long long)atomic_load(&s.jobs),
           (unsigned long long)atomic_load(&s.done), (unsigned long long)atomic_load(&s.failed),
           (unsigned long long)atomic_load(&s.canceled), (unsigned long long)peak_max,
           (unsigned long long)atomic_load(&s.budget_samples), (unsigned long long)violations);
    ASSERT_EQ_U64(violations, 0);
    ASSERT_GT(atomic_load(&s.jobs), 0);
    gr_runtime_destroy(s.rt);
    gr_graph_destroy(s.g);
    pthread_barrier_destroy(&s.start);
    free(w);
    free(th);
}

int main(int argc, char **argv)
{
    static const gr_test_case cases[] = {{"stress_runtime", stress}};

    gr_stress_parse(argc, argv, &opt);
    return gr_test_run_all(cases, 1, 1, argv);
}

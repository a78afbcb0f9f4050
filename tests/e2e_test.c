/*
 * e2e_test.c - whole jobs on the host backend, every output checked bit for bit against the
 * C reference: odd and prime sizes, one worker and many, a budget that fits exactly one
 * iteration, several devices, a two-input DAG, and several threads submitting jobs with
 * different graphs at once.
 */
#include <pthread.h>

#include "graph/graph.h"
#include "runtime/job.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

/* One unit per tensor, so iteration counts can be checked against tensor counts (units
 * are tested by units_e2e_test.c). */
static gr_runtime *runtime_with(uint32_t devices, uint32_t workers, uint64_t budget)
{
    return gr_test_runtime((gr_test_shape){
        .devices = devices, .workers = workers, .budget = budget, .whole_tensors = true});
}

/* Run the seed graph in place over tensors of the given sizes, check every output. */
static void run_seed(gr_runtime *rt, const uint64_t *elems, uint64_t count, uint64_t seed)
{
    float **data = calloc(count, sizeof(float *));
    gr_tensor *t = calloc(count, sizeof(gr_tensor));
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (uint64_t i = 0; i < count; i++) {
        data[i] = malloc(elems[i] * sizeof(float));
        ASSERT_TRUE(data[i] != NULL);
        gr_workload_fill(data[i], 0, elems[i], seed, i);
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = elems[i];
    }
    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_EQ(gr__job_anomalies(job), 0);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t where, bad = gr_workload_check_seed(data[i], 0, elems[i], seed, i, &where);
        if (bad)
            GR_TEST_FAIL("index %llu (%llu elements): %llu wrong, first at %llu",
                         (unsigned long long)i, (unsigned long long)elems[i],
                         (unsigned long long)bad, (unsigned long long)where);
        free(data[i]);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free(data);
    free(t);
}

static void check_budget_never_exceeded(gr_runtime *rt)
{
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats st;

    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_OK);
    for (uint32_t d = 0; d < info.device_count; d++) {
        ASSERT_STATUS(gr_runtime_device_stats(rt, d, &st), GR_OK);
        ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
        ASSERT_EQ_U64(st.budget_in_use, 0);
    }
}

static void odd_and_prime_sizes(void)
{
    const uint64_t sizes[] = {1, 2, 3, 7, 63, 64, 65, 255, 256, 257, 1021, 4099, 65537, 100003};
    const uint64_t n = sizeof(sizes) / sizeof(sizes[0]);
    gr_runtime *rt = runtime_with(1, 4, 4 << 20);

    run_seed(rt, sizes, n, 11);
    check_budget_never_exceeded(rt);
    gr_runtime_destroy(rt);
}

/* 97 tensors (a prime count) of random odd sizes, through 1 worker and through 16. */
static void one_worker_and_sixteen(void)
{
    uint64_t elems[97], rng = 5;
    const uint32_t workers[] = {1, 16};

    for (int i = 0; i < 97; i++)
        elems[i] = 1 + 2 * gr_test_below(&rng, 20000);
    for (int w = 0; w < 2; w++) {
        gr_runtime *rt = runtime_with(1, workers[w], 512 * 1024);
        gr_device_stats st;

        run_seed(rt, elems, 97, 20 + w);
        check_budget_never_exceeded(rt);
        ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
        ASSERT_EQ_U64(st.iterations_done, 97);
        gr_runtime_destroy(rt);
    }
}

/* A budget of exactly one iteration of the largest tensor: 8 workers take turns, the peak is
 * exactly that iteration, and nothing deadlocks. */
static void budget_fits_exactly_one_iteration(void)
{
    uint64_t elems[40], footprint;
    gr_device_stats st;
    gr_graph *g;
    gr_runtime *rt;

    for (int i = 0; i < 40; i++)
        elems[i] = 100000;
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_graph_footprint(g, 100000, &footprint), GR_OK);
    gr_graph_destroy(g);
    rt = runtime_with(1, 8, footprint);
    run_seed(rt, elems, 40, 3);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.budget_bytes, footprint);
    ASSERT_EQ_U64(st.budget_peak, footprint);
    check_budget_never_exceeded(rt);
    gr_runtime_destroy(rt);
}

static void several_devices(void)
{
    uint64_t elems[60], total = 0;
    gr_runtime *rt = runtime_with(3, 2, 256 * 1024);
    gr_device_stats st;

    for (int i = 0; i < 60; i++)
        elems[i] = 1000 + 37 * i;
    run_seed(rt, elems, 60, 8);
    for (uint32_t d = 0; d < 3; d++) {
        ASSERT_STATUS(gr_runtime_device_stats(rt, d, &st), GR_OK);
        total += st.iterations_done;
    }
    ASSERT_EQ_U64(total, 60);
    check_budget_never_exceeded(rt);
    gr_runtime_destroy(rt);
}

typedef struct dag_job {
    float *a, *b, *o0, *o1;
    uint64_t n;
} dag_job;

static void run_dag(gr_runtime *rt, gr_graph *g, uint64_t count, uint64_t seed)
{
    dag_job *d = calloc(count, sizeof(*d));
    gr_tensor *t = calloc(count, sizeof(*t));
    gr_error_info err;
    gr_job *job;

    for (uint64_t i = 0; i < count; i++) {
        d[i].n = 1 + (i * 7919) % 5000;
        d[i].a = malloc(d[i].n * sizeof(float));
        d[i].b = malloc(d[i].n * sizeof(float));
        d[i].o0 = malloc(d[i].n * sizeof(float));
        d[i].o1 = malloc(d[i].n * sizeof(float));
        gr_workload_fill(d[i].a, 0, d[i].n, seed, 2 * i);
        gr_workload_fill(d[i].b, 0, d[i].n, seed, 2 * i + 1);
        t[i].in[0] = d[i].a;
        t[i].in[1] = d[i].b;
        t[i].out[0] = d[i].o0;
        t[i].out[1] = d[i].o1;
        t[i].elems = d[i].n;
    }
    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    for (uint64_t i = 0; i < count; i++) {
        for (uint64_t j = 0; j < d[i].n; j++) {
            float ax = 2.0f * d[i].a[j], by = -1.0f * d[i].b[j];
            float want0 = gr__seed_ref(ax + by), want1 = d[i].a[j] * 3.0f;
            if (memcmp(&d[i].o0[j], &want0, 4) != 0 || memcmp(&d[i].o1[j], &want1, 4) != 0)
                GR_TEST_FAIL("index %llu element %llu: got %a %a want %a %a",
                             (unsigned long long)i, (unsigned long long)j, d[i].o0[j],
                             d[i].o1[j], want0, want1);
        }
        /* Inputs are never written. */
        ASSERT_EQ_U64(gr_workload_check_input(d[i].a, 0, d[i].n, seed, 2 * i, NULL), 0);
        ASSERT_EQ_U64(gr_workload_check_input(d[i].b, 0, d[i].n, seed, 2 * i + 1, NULL), 0);
        free(d[i].a);
        free(d[i].b);
        free(d[i].o0);
        free(d[i].o1);
    }
    gr_job_destroy(job);
    free(d);
    free(t);
}

static void two_input_dag_out_of_place(void)
{
    gr_runtime *rt = runtime_with(1, 3, 1 << 20);
    gr_graph *g = gr_test_dag_graph();

    run_dag(rt, g, 31, 4);
    check_budget_never_exceeded(rt);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* Several threads, each submitting jobs of one of two graphs, all at once. */
typedef struct submitter {
    gr_runtime *rt;
    gr_graph *dag;
    int id;
    pthread_barrier_t *start;
} submitter;

static void *submit_main(void *p)
{
    submitter *s = p;
    uint64_t elems[9];

    pthread_barrier_wait(s->start);
    for (int round = 0; round < 3; round++) {
        if ((s->id + round) % 2) {
            run_dag(s->rt, s->dag, 9, 100 + s->id * 10 + round);
        } else {
            for (int i = 0; i < 9; i++)
                elems[i] = 1 + (uint64_t)(s->id * 131 + i * 977 + round) % 7000;
            run_seed(s->rt, elems, 9, 200 + s->id * 10 + round);
        }
    }
    return NULL;
}

static void concurrent_jobs_with_two_graphs(void)
{
    enum { THREADS = 8 };
    gr_runtime *rt = runtime_with(1, 4, 96 * 1024);
    gr_graph *dag = gr_test_dag_graph();
    pthread_barrier_t start;
    submitter s[THREADS];
    pthread_t th[THREADS];

    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        s[i] = (submitter){rt, dag, i, &start};
        pthread_create(&th[i], NULL, submit_main, &s[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    check_budget_never_exceeded(rt);
    gr_graph_destroy(dag);
    gr_runtime_destroy(rt);
}

GR_TEST_MAIN(GR_TEST(odd_and_prime_sizes), GR_TEST(one_worker_and_sixteen),
             GR_TEST(budget_fits_exactly_one_iteration), GR_TEST(several_devices),
             GR_TEST(two_input_dag_out_of_place), GR_TEST(concurrent_jobs_with_two_graphs))

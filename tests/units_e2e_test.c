/*
 * units_e2e_test.c - jobs cut into units, end to end on the host backend, every output
 * checked bit for bit: tensors far larger than the budget (chunks), thousands of tiny
 * tensors (batches through staging and the copy pool), mixed sizes in one job, a two-input
 * graph out of place, a worker's staging meeting graphs with more ports, a stop in the
 * middle of chunked tensors, and split_tensors = 0.
 */
#include "graph/graph.h"
#include "runtime/job.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

/* The job behind a handle, for the checks that look inside. */
#define JOB(handle) gr__job_from_handle(handle)

#define SEED 21

typedef struct set {
    float **data;
    gr_tensor *t;
    uint64_t *elems;
    uint64_t count;
} set;

static set make_set(const uint64_t *elems, uint64_t count)
{
    set s = {calloc(count, sizeof(float *)), calloc(count, sizeof(gr_tensor)),
             calloc(count, sizeof(uint64_t)), count};

    for (uint64_t i = 0; i < count; i++) {
        s.elems[i] = elems[i];
        s.data[i] = malloc(elems[i] * sizeof(float));
        ASSERT_TRUE(s.data[i] != NULL);
        gr_workload_fill(s.data[i], 0, elems[i], SEED, i);
        s.t[i] = (gr_tensor){{s.data[i]}, {s.data[i]}, elems[i], 0, {0}};
    }
    return s;
}

static void free_set(set *s)
{
    for (uint64_t i = 0; i < s->count; i++)
        free(s->data[i]);
    free(s->data);
    free(s->t);
    free(s->elems);
}

static void check_done(const set *s)
{
    for (uint64_t i = 0; i < s->count; i++) {
        uint64_t where, bad = gr_workload_check_seed(s->data[i], 0, s->elems[i], SEED, i, &where);
        if (bad)
            GR_TEST_FAIL("index %llu (%llu elements): %llu wrong, first at %llu",
                         (unsigned long long)i, (unsigned long long)s->elems[i],
                         (unsigned long long)bad, (unsigned long long)where);
    }
}

/* Run the seed graph over the set; returns the job's number of units. */
static uint64_t run_seed(gr_runtime *rt, set *s)
{
    gr_error_info err;
    uint64_t units;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    if (gr_job_submit(rt, g, s->t, s->count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_EQ(gr__job_anomalies(job), 0);
    units = JOB(job)->n_units;
    gr_job_destroy(job);
    gr_graph_destroy(g);
    check_done(s);
    return units;
}

static void check_budget(gr_runtime *rt)
{
    gr_device_stats st;

    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
    ASSERT_EQ_U64(st.budget_in_use, 0);
}

static void tensors_larger_than_the_budget(void)
{
    const uint64_t elems[] = {1000003, 250000, 777777, 3};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 256 * 1024});
    set s = make_set(elems, 4);
    gr_device_stats st;

    /* 4 MB tensors, 256 KiB budget: chunks of at most a third of it. */
    ASSERT_GT(run_seed(rt, &s), 4 * 1000003 / (256 * 1024 / 3));
    check_budget(rt);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_GT(st.budget_peak, 0);
    free_set(&s);
    gr_runtime_destroy(rt);
}

static void thousands_of_tiny_tensors(void)
{
    enum { N = 20000 };
    uint64_t elems[N], rng = 9, units;
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 4, .budget = 4 << 20});
    set s;

    for (int i = 0; i < N; i++)
        elems[i] = 1 + gr_test_below(&rng, 7);
    s = make_set(elems, N);
    units = run_seed(rt, &s);
    ASSERT_LT(units, N / 100); /* packed in batches */
    check_budget(rt);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* Rows of one array: back to back, so batches go direct (no gathering). */
static void contiguous_tiny_tensors(void)
{
    enum { N = 30000, E = 5 };
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 1 << 20});
    float *slab = malloc(N * E * sizeof(float));
    gr_tensor *t = calloc(N, sizeof(*t));
    gr_graph *g;
    gr_job *job;

    for (uint64_t i = 0; i < N; i++) {
        gr_workload_fill(slab + i * E, 0, E, SEED, i);
        t[i] = (gr_tensor){{slab + i * E}, {slab + i * E}, E, 0, {0}};
    }
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_LT(JOB(job)->n_units, N / GR_UNIT_MAX_TENSORS + 2);
    for (uint64_t k = 0; k < JOB(job)->n_units; k++)
        ASSERT_TRUE(!JOB(job)->units[k].staged);
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(slab + i * E, 0, E, SEED, i, NULL), 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    check_budget(rt);
    gr_runtime_destroy(rt);
    free(t);
    free(slab);
}

static void mixed_sizes(void)
{
    enum { N = 500 };
    uint64_t elems[N], rng = 10;
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 5, .budget = 1 << 20});
    set s;

    for (int i = 0; i < N; i++)
        elems[i] = gr_test_below(&rng, 4) == 0 ? 50000 + gr_test_below(&rng, 400000)
                                               : 1 + gr_test_below(&rng, 3000);
    s = make_set(elems, N);
    run_seed(rt, &s);
    check_budget(rt);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* The fixtures' DAG, whose buffers are all the tensor's size, so it can be split. */
static gr_graph *splittable_dag(void)
{
    gr_graph *g = gr_test_dag_graph();

    ASSERT_TRUE(g->splittable);
    return g;
}

/* Tensors for gr_test_dag_graph, each port in memory of its own; checked and freed by
 * dag_check_and_free. */
static void dag_tensors(gr_tensor *t, int n, const uint64_t *elems)
{
    for (int i = 0; i < n; i++) {
        float *in0 = malloc(elems[i] * 4), *in1 = malloc(elems[i] * 4);
        float *o0 = malloc(elems[i] * 4), *o1 = malloc(elems[i] * 4);

        ASSERT_TRUE(in0 && in1 && o0 && o1);
        gr_workload_fill(in0, 0, elems[i], 12, 2 * (uint64_t)i);
        gr_workload_fill(in1, 0, elems[i], 12, 2 * (uint64_t)i + 1);
        t[i] = (gr_tensor){{in0, in1}, {o0, o1}, elems[i], 0, {0}};
    }
}

static void dag_check_and_free(gr_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        const float *in0 = t[i].in[0], *in1 = t[i].in[1];
        float *o0 = t[i].out[0], *o1 = t[i].out[1];

        for (uint64_t j = 0; j < t[i].elems; j++) {
            float ax = 2.0f * in0[j], by = -1.0f * in1[j];
            float w0 = gr__seed_ref(ax + by), w1 = in0[j] * 3.0f;
            if (memcmp(&w0, &o0[j], 4) != 0 || memcmp(&w1, &o1[j], 4) != 0)
                GR_TEST_FAIL("index %d element %llu: got %a %a want %a %a", i,
                             (unsigned long long)j, o0[j], o1[j], w0, w1);
        }
        free((void *)t[i].in[0]);
        free((void *)t[i].in[1]);
        free(t[i].out[0]);
        free(t[i].out[1]);
    }
}

/* Two inputs, two outputs, out of place, chunked and batched. */
static void two_inputs_out_of_place(void)
{
    enum { N = 300 };
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 512 * 1024});
    gr_graph *g = splittable_dag();
    uint64_t elems[N], rng = 11;
    gr_tensor t[N];
    gr_job *job;

    for (int i = 0; i < N; i++)
        elems[i] = gr_test_below(&rng, 3) == 0 ? 100000 + gr_test_below(&rng, 100000)
                                               : 1 + gr_test_below(&rng, 999);
    dag_tensors(t, N, elems);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_GT(JOB(job)->n_units, 0);
    dag_check_and_free(t, N);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

/* A worker's staging buffer lays its ports out staging_elems apart. A staged batch of a
 * graph with more ports, after one of a graph with fewer and at least as many elements,
 * needs the buffer grown: reusing it wrote the last ports past its end (a heap overflow
 * that ASan reports; without ASan it corrupted memory, or crashed, now and then). One
 * worker, so both jobs' batches meet the same buffer. */
static void staging_grows_with_the_ports(void)
{
    const uint64_t seed_elems[] = {100000, 100000}, dag_elems[] = {90000, 90000};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 64 << 20});
    set s = make_set(seed_elems, 2);
    gr_graph *g = splittable_dag();
    gr_tensor t[2];
    gr_job *job;

    /* One staged batch of 200000 elements on 2 ports (the tensors are apart in memory). */
    ASSERT_EQ(run_seed(rt, &s), 1);
    /* Then one of 180000 elements on 4 ports. */
    dag_tensors(t, 2, dag_elems);
    ASSERT_STATUS(gr_job_submit(rt, g, t, 2, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_EQ(JOB(job)->n_units, 1);
    ASSERT_TRUE(JOB(job)->units[0].staged);
    dag_check_and_free(t, 2);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    check_budget(rt);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* Stop a job of chunked tensors midway: every index ends exactly once; done ones are right;
 * the others hold, element by element, their input or their result (chunks that finished
 * before the stop are written), never anything else. */
static void cancel_in_the_middle_of_chunked_tensors(void)
{
    enum { N = 40 };
    uint64_t elems[N];
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 64 * 1024});
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_graph *g;
    gr_job *job;
    set s;

    for (int i = 0; i < N; i++)
        elems[i] = 200000; /* 800 KB each in 32 KiB chunks */
    s = make_set(elems, N);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, N, NULL, &job, NULL), GR_OK);
    do {
        ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    } while (p.done < 3);
    ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_ERR_CANCELED);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.canceled + p.failed, N);
    ASSERT_GE(p.done, 3);
    ASSERT_GT(p.canceled, 0);
    ASSERT_EQ(gr__job_anomalies(job), 0);
    for (uint64_t i = 0; i < N; i++) {
        gr_index_state st;
        uint64_t bad;

        ASSERT_STATUS(gr_job_index_get(job, i, &st, NULL), GR_OK);
        bad = st == GR_INDEX_DONE
                  ? gr_workload_check_seed(s.data[i], 0, elems[i], SEED, i, NULL)
                  : gr_workload_check_partial(s.data[i], 0, elems[i], SEED, i, NULL);
        if (bad)
            GR_TEST_FAIL("index %llu (state %d): %llu bad elements", (unsigned long long)i, st,
                         (unsigned long long)bad);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    check_budget(rt);
    free_set(&s);
    gr_runtime_destroy(rt);
}

static void splitting_off_refuses_what_does_not_fit(void)
{
    const uint64_t elems[] = {100000};
    gr_runtime *rt = gr_test_runtime(
        (gr_test_shape){.workers = 2, .budget = 64 * 1024, .whole_tensors = true});
    set s = make_set(elems, 1);
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 1, NULL, &job, &err), GR_ERR_OVER_BUDGET);
    ASSERT_STR_CONTAINS(err.message, "splitting tensors is off");
    gr_graph_destroy(g);
    free_set(&s);
    gr_runtime_destroy(rt);
}

GR_TEST_MAIN(GR_TEST(tensors_larger_than_the_budget), GR_TEST(thousands_of_tiny_tensors),
             GR_TEST(contiguous_tiny_tensors),
             GR_TEST(mixed_sizes), GR_TEST(two_inputs_out_of_place),
             GR_TEST(staging_grows_with_the_ports),
             GR_TEST(cancel_in_the_middle_of_chunked_tensors),
             GR_TEST(splitting_off_refuses_what_does_not_fit))

/*
 * constants_test.c - a job's constants (gr_graph_add_const) on the host backend: the graph
 * rules, the submission checks, outputs of kernels that read a constant (chunks and batches
 * see it whole), the constants copied to each device once and counted in the budget, two
 * jobs whose constants cannot both stay resident beside their units (both finish: the idle
 * ones are evicted and copied in again), a stop while units wait, and several devices.
 * Outputs are checked against plain C loops written here, never against the kernels.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "graph/graph.h"
#include "runtime/job.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

/* out = x * w[0] + w[1]: elementwise in x, w a small input of two floats, read whole;
 * each operation rounded to float32 (no fused multiply-add), on the CPU and in CUDA C. */
static void affine_cpu(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0], *w = a->in[1];
    float *out = a->out;

    (void)user;
    ASSERT_GE(a->in_n[1], 2); /* the constant, whole: at least w[0] and w[1] */
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] * w[0] + w[1]; /* -ffp-contract=off: two roundings, as in CUDA */
}

static const char affine_cuda[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void test_affine(gr_kernel_args a)\n"
    "{\n"
    "    const float *w = GR_IN(a, 1, float);\n"
    "    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] =\n"
    "        __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], w[0]), w[1]);\n"
    "}\n";

static void register_affine(void)
{
    static bool done;
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_error_info err;

    if (done)
        return;
    done = true;
    d.name = "test_affine";
    d.n_inputs = 2;
    d.out_dtype = GR_DTYPE_FLOAT32;
    d.in_dtype[0] = d.in_dtype[1] = GR_DTYPE_FLOAT32;
    d.elementwise = 1;
    d.small_inputs = 0x2;
    d.cpu = affine_cpu;
    /* Its CUDA version where NVRTC is here (the GPU machine): the CPU one serves the host. */
    if (gr_test_no_gpu() == NULL) {
        d.cuda_kind = GR_CUDA_SOURCE;
        d.cuda = affine_cuda;
        d.cuda_name = "test_affine";
    }
    if (gr_kernel_register(&d, &err) != GR_OK)
        GR_TEST_FAIL("register: %s", err.message);
}

/* x -> test_affine(x, w) -> x, with w a constant of `elems` floats (2 for the kernel). */
static gr_graph *affine_graph(uint64_t w_elems)
{
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;
    const char *ins[2] = {"x", "w"};
    gr_graph *g;

    register_affine();
    d.fixed_elems = w_elems;
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 0, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "test_affine", ins, 2, "x", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("finalize: %s", GRAPH_ERROR(g));
    return g;
}

/* In-place tensors x, their inputs as made (in) and what the affine kernel must make of
 * them with w (want). */
typedef struct set {
    float **x, **in, **want;
    gr_tensor *t;
    uint64_t count;
} set;

static set make_set(uint64_t count, uint64_t seed, const float *w, uint64_t max_elems)
{
    set s = {calloc(count, sizeof(float *)), calloc(count, sizeof(float *)),
             calloc(count, sizeof(float *)), calloc(count, sizeof(gr_tensor)), count};
    uint64_t rng = seed;

    for (uint64_t i = 0; i < count; i++) {
        uint64_t n = 1 + gr_test_below(&rng, max_elems);

        s.x[i] = malloc(n * sizeof(float));
        s.in[i] = malloc(n * sizeof(float));
        s.want[i] = malloc(n * sizeof(float));
        ASSERT_TRUE(s.x[i] != NULL && s.in[i] != NULL && s.want[i] != NULL);
        for (uint64_t j = 0; j < n; j++) {
            s.in[i][j] = (float)((i * 31 + j * 7) % 1000) / 100.0f;
            s.want[i][j] = s.in[i][j] * w[0] + w[1];
        }
        memcpy(s.x[i], s.in[i], n * sizeof(float));
        s.t[i] = (gr_tensor){{s.x[i]}, {s.x[i]}, n, 0, {0}};
    }
    return s;
}

/* The tensors back to their inputs, for another job. */
static void refill(set *s)
{
    for (uint64_t i = 0; i < s->count; i++)
        memcpy(s->x[i], s->in[i], s->t[i].elems * sizeof(float));
}

static void expect_untouched(const set *s)
{
    for (uint64_t i = 0; i < s->count; i++)
        if (memcmp(s->x[i], s->in[i], s->t[i].elems * sizeof(float)) != 0)
            GR_TEST_FAIL("index %llu was written", (unsigned long long)i);
}

static void check_set(const set *s)
{
    for (uint64_t i = 0; i < s->count; i++)
        if (memcmp(s->x[i], s->want[i], s->t[i].elems * sizeof(float)) != 0)
            GR_TEST_FAIL("index %llu (%llu elements) is wrong", (unsigned long long)i,
                         (unsigned long long)s->t[i].elems);
}

static void free_set(set *s)
{
    for (uint64_t i = 0; i < s->count; i++) {
        free(s->x[i]);
        free(s->in[i]);
        free(s->want[i]);
    }
    free(s->x);
    free(s->in);
    free(s->want);
    free(s->t);
}

static gr_job *submit(gr_runtime *rt, gr_graph *g, set *s, const float *w)
{
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    const void *consts[1] = {w};
    gr_error_info err;
    gr_job *job;

    o.constants = consts;
    o.n_constants = 1;
    if (gr_job_submit(rt, g, s->t, s->count, &o, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    return job;
}

static gr_stats stats_of(gr_runtime *rt, uint32_t device)
{
    gr_stats st = GR_STATS_INIT;

    ASSERT_STATUS(gr_runtime_stats_get(rt, device, &st), GR_OK);
    return st;
}

static void graph_rules(void)
{
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;
    const uint64_t shape[2] = {3, 4}, bad_shape[2] = {3, 5};
    const char *ins[2] = {"x", "w"};
    gr_const_info info;
    gr_graph *g;

    register_affine();
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "give its size in elements");
    d.fixed_elems = 12;
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 2, bad_shape), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "its shape holds 15 elements, its size says 12");
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 2, shape), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "test_affine", ins, 2, "x", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    ASSERT_TRUE(g->splittable); /* a constant does not stop the tensors being cut */
    ASSERT_EQ(gr_graph_const_count(g), 1);
    ASSERT_STATUS(gr_graph_const_get(g, 0, &info), GR_OK);
    ASSERT_STR_EQ(info.name, "w");
    ASSERT_EQ_U64(info.elems, 12);
    ASSERT_EQ_U64(info.bytes, 48);
    ASSERT_EQ(info.rank, 2);
    ASSERT_EQ_U64(info.shape[1], 4);
    ASSERT_STATUS(gr_graph_const_get(g, 1, &info), GR_ERR_INVALID_ARGUMENT);
    gr_graph_destroy(g);

    /* Read only: a node writing a constant, or copying one out, is refused. */
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 0, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "w"), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "w", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "node 'load' writes constant 'w'");
    gr_graph_destroy(g);
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "w", &d, 0, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "w", 0), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "copies constant 'w' out");
    gr_graph_destroy(g);
}

static void submission_checks(void)
{
    const float w[2] = {2.0f, 1.0f};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 64 << 10});
    gr_graph *g = affine_graph(2), *big = affine_graph(64 << 10);
    set s = make_set(4, 1, w, 100);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    const void *none[1] = {NULL}, *one[1] = {w};
    gr_error_info err;
    gr_job *job;

    ASSERT_STATUS(gr_job_submit(rt, g, s.t, s.count, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "the graph has 1 constant(s), the job options give 0");
    o.constants = none;
    o.n_constants = 1;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, s.count, &o, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "constant 0 ('w') is NULL");
    /* 256 KiB of constant against a 64 KiB budget. */
    o.constants = one;
    ASSERT_STATUS(gr_job_submit(rt, big, s.t, s.count, &o, &job, &err), GR_ERR_OVER_BUDGET);
    ASSERT_STR_CONTAINS(err.message, "constants alone take 262144 device bytes");
    expect_untouched(&s); /* refused: nothing ran */
    gr_graph_destroy(big);
    gr_graph_destroy(g);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* Tensors small (batched) and large (chunked: a worker's share of 64 KiB less the constant
 * is far below them), every output right; the constant copied in once, counted in the
 * budget, given back when the job ends. */
static void chunks_and_batches_read_it_whole(void)
{
    const float w[2] = {1.5f, -0.25f};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 64 << 10});
    gr_graph *g = affine_graph(2);
    set s = make_set(600, 2, w, 40000);
    gr_job *job = submit(rt, g, &s, w);
    gr_stats st;

    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_GT(gr__job_from_handle(job)->n_units, 600 / 4);
    check_set(&s);
    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.constants_copied, 1);
    ASSERT_EQ_U64(st.constant_bytes, GR_BUFFER_ALIGN);
    ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
    ASSERT_EQ_U64(st.budget_in_use, 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* normalize (not elementwise: whole tensors) with its mean and std as constants. */
static void normalize_with_constant_statistics(void)
{
    enum { C = 3, N = 50 };
    const float mean[C] = {0.5f, 1.0f, -2.0f}, sd[C] = {2.0f, 0.5f, 4.0f};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 1 << 20});
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;
    const char *ins[3] = {"x", "mean", "sd"};
    const void *consts[2] = {mean, sd};
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    float *x[N], *want[N];
    gr_tensor t[N];
    gr_graph *g;
    gr_job *job;

    d.fixed_elems = C;
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "mean", &d, 0, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_add_const(g, "sd", &d, 0, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "normalize", ins, 3, "y", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "y", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("finalize: %s", GRAPH_ERROR(g));
    ASSERT_TRUE(!g->splittable);
    for (int i = 0; i < N; i++) {
        uint64_t n = C * (uint64_t)(10 + i * 37);

        x[i] = malloc(n * sizeof(float));
        want[i] = malloc(n * sizeof(float));
        for (uint64_t j = 0; j < n; j++) {
            x[i][j] = (float)(j % 17) - 3.0f + (float)i;
            want[i][j] = (x[i][j] - mean[j % C]) / sd[j % C];
        }
        t[i] = (gr_tensor){{x[i]}, {x[i]}, n, 0, {0}};
    }
    o.constants = consts;
    o.n_constants = 2;
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    for (int i = 0; i < N; i++) {
        if (memcmp(x[i], want[i], t[i].elems * sizeof(float)) != 0)
            GR_TEST_FAIL("index %d is wrong", i);
        free(x[i]);
        free(want[i]);
    }
    ASSERT_EQ_U64(stats_of(rt, 0).constants_copied, 1);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* Two jobs at once, each with a constant of 24 KiB, on a 48 KiB budget: both constants
 * cannot stay beside a unit of either job. Submitted from two threads through a small ring,
 * so that their units interleave: a unit of one job then waits for budget while the other
 * job's constant sits unused, and unless that constant is evicted the two jobs wait for each
 * other forever. Every tensor is its own unit (batch_below_bytes 0). */
typedef struct submitter {
    gr_runtime *rt;
    gr_graph *g;
    set *s;
    const float *w;
    gr_status result;
} submitter;

static void *submit_and_wait(void *arg)
{
    submitter *sub = arg;
    gr_job *job = submit(sub->rt, sub->g, sub->s, sub->w);

    sub->result = gr_test_wait(job, 60ll * 1000000000);
    gr_job_destroy(job);
    return NULL;
}

static void two_jobs_whose_constants_do_not_fit_together(void)
{
    const float w1[2] = {2.0f, 0.5f}, w2[2] = {-1.0f, 3.0f};
    gr_config cfg = GR_CONFIG_INIT;
    gr_graph *g = affine_graph(6 << 10); /* 24 KiB: only w[0], w[1] are read */
    set s1 = make_set(400, 3, w1, 3000), s2 = make_set(400, 4, w2, 3000);
    float *c1 = calloc(6 << 10, sizeof(float)), *c2 = calloc(6 << 10, sizeof(float));
    gr_error_info err;
    gr_runtime *rt;
    gr_stats st;

    cfg.backend = GR_BACKEND_HOST;
    cfg.workers_per_device = 3;
    cfg.budget_bytes = 48 << 10;
    cfg.ring_capacity = 4;
    cfg.batch_below_bytes = 0;
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK)
        GR_TEST_FAIL("create: %s", err.message);
    memcpy(c1, w1, sizeof(w1));
    memcpy(c2, w2, sizeof(w2));
    for (int round = 0; round < 3; round++) {
        submitter a = {rt, g, &s1, c1, GR_ERR_INTERNAL}, b = {rt, g, &s2, c2, GR_ERR_INTERNAL};
        pthread_t ta, tb;

        ASSERT_EQ(pthread_create(&ta, NULL, submit_and_wait, &a), 0);
        ASSERT_EQ(pthread_create(&tb, NULL, submit_and_wait, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        ASSERT_STATUS(a.result, GR_OK);
        ASSERT_STATUS(b.result, GR_OK);
        check_set(&s1);
        check_set(&s2);
        refill(&s1);
        refill(&s2);
    }
    st = stats_of(rt, 0);
    printf("    constants copied in %llu times for 6 jobs\n",
           (unsigned long long)st.constants_copied);
    ASSERT_GT(st.constants_copied, 6); /* evicted and copied in again */
    ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
    ASSERT_EQ_U64(st.budget_in_use, 0);
    gr_graph_destroy(g);
    free(c1);
    free(c2);
    free_set(&s1);
    free_set(&s2);
    gr_runtime_destroy(rt);
}

/* Three emulated devices: each copies the constant in once, and every output is right. */
static void each_device_copies_it_once(void)
{
    const float w[2] = {0.5f, 2.0f};
    gr_runtime *rt =
        gr_test_runtime((gr_test_shape){.devices = 3, .workers = 2, .budget = 256 << 10});
    gr_graph *g = affine_graph(2);
    set s = make_set(3000, 5, w, 2000);
    gr_job *job = submit(rt, g, &s, w);
    uint64_t copied = 0;

    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    check_set(&s);
    for (uint32_t d = 0; d < 3; d++) {
        gr_stats st = stats_of(rt, d);

        ASSERT_LE_U64(st.constants_copied, 1);
        ASSERT_EQ_U64(st.constants_copied, st.iterations_done > 0 ? 1 : 0);
        copied += st.constants_copied;
        ASSERT_EQ_U64(st.budget_in_use, 0);
    }
    ASSERT_GE(copied, 1);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* A cancel while units wait for budget behind the constant: every index ends once, done
 * ones are right, and nothing of the budget stays held. */
static void cancel_while_waiting(void)
{
    const float w[2] = {3.0f, -1.0f};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 4, .budget = 16 << 10});
    gr_graph *g = affine_graph(2);
    set s = make_set(2000, 6, w, 3000);
    gr_job *job = submit(rt, g, &s, w);
    gr_job_progress p = GR_JOB_PROGRESS_INIT;

    ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_ERR_CANCELED);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.canceled + p.failed, s.count);
    ASSERT_EQ(gr__job_anomalies(job), 0);
    for (uint64_t i = 0; i < s.count; i++) {
        gr_index_state state;

        ASSERT_STATUS(gr_job_index_get(job, i, &state, NULL), GR_OK);
        if (state == GR_INDEX_DONE &&
            memcmp(s.x[i], s.want[i], s.t[i].elems * sizeof(float)) != 0)
            GR_TEST_FAIL("index %llu is done but wrong", (unsigned long long)i);
    }
    ASSERT_EQ_U64(stats_of(rt, 0).budget_in_use, 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free_set(&s);
    gr_runtime_destroy(rt);
}

/* On the GPU: a 64 MiB constant (of which the kernel reads two floats) copied in once for a
 * job of 300 tensors of up to 16 MiB under a budget of 96 MiB, so that the largest are cut
 * into chunks (a worker's share of the 32 MiB beside the constant) and small ones batched;
 * every output right, the device's memory within the budget. */
static void cuda_constant_copied_once(void)
{
    enum { W_ELEMS = 16 << 20 };
    const float w[2] = {1.25f, -0.5f};
    float *big;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_stats st;
    set s;

    REQUIRE_GPU();
    big = calloc(W_ELEMS, sizeof(float));
    ASSERT_TRUE(big != NULL);
    rt = gr_test_runtime(
        (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3, .budget = 96 << 20});
    g = affine_graph(W_ELEMS);
    memcpy(big, w, sizeof(w));
    s = make_set(300, 7, w, 4 << 20);
    job = submit(rt, g, &s, big);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    check_set(&s);
    st = stats_of(rt, 0);
    ASSERT_EQ_U64(st.constants_copied, 1);
    ASSERT_EQ_U64(st.constant_bytes, (uint64_t)W_ELEMS * sizeof(float));
    ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
    ASSERT_EQ_U64(st.budget_in_use, 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free_set(&s);
    free(big);
    gr_runtime_destroy(rt);
}

GR_TEST_MAIN(GR_TEST(graph_rules), GR_TEST(submission_checks),
             GR_TEST(chunks_and_batches_read_it_whole),
             GR_TEST(normalize_with_constant_statistics),
             GR_TEST(two_jobs_whose_constants_do_not_fit_together),
             GR_TEST(each_device_copies_it_once), GR_TEST(cancel_while_waiting),
             GR_TEST(cuda_constant_copied_once))

/*
 * kernels_e2e_test.c - the kernels that are not elementwise, fixed-size buffers and
 * tensor shapes, through the whole runtime on the host backend: softmax per row, sum to one
 * element per tensor, per-channel normalisation with small vector inputs; and the refusals
 * that keep them safe (shapes that do not match, fixed buffers where a whole tensor is
 * needed, a graph that cannot be split larger than the budget). Every output is checked
 * against a reference computed here, in double where the kernel sums. And the seed as an
 * expression kernel (graph/examples/seed_expr.graph), whole, chunked and batched.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

static gr_graph *finalized(gr_graph *g)
{
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("finalize: %s", GRAPH_ERROR(g));
    return g;
}

static void add_fixed(gr_graph *g, const char *name, uint64_t elems)
{
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;

    d.fixed_elems = elems;
    if (gr_graph_add_buffer_desc(g, name, &d) != GR_OK)
        GR_TEST_FAIL("add buffer %s: %s", name, GRAPH_ERROR(g));
}

/* load: in0 -> x; k: KERNEL(x) -> y; store: y -> out0, y a buffer of the tensor's size or
 * of `fixed` elements. */
static gr_graph *one_kernel(const char *kernel, uint64_t fixed)
{
    const char *x = "x";
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    if (fixed)
        add_fixed(g, "y", fixed);
    else
        ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", kernel, &x, 1, "y", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "y", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    return finalized(g);
}

static float value(uint64_t t, uint64_t i)
{
    uint64_t s = t * 1000003u + i;

    return (float)(gr_test_rand(&s) >> 40) / (float)(1 << 20) - 8.0f; /* [-8, 8) */
}

static void run_job(gr_runtime *rt, gr_graph *g, const gr_tensor *t, uint64_t n)
{
    gr_error_info err;
    gr_job *job;

    if (gr_job_submit(rt, g, t, n, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        gr_job_error_get(job, &err);
        GR_TEST_FAIL("job: index %llu: %s", (unsigned long long)err.index, err.message);
    }
    gr_job_destroy(job);
}

/* softmax over the rows of each tensor's last dimension, shapes of 1 to 4 dimensions and a
 * tensor without one (one row), every element against a reference in double. */
static void softmax_per_row(void)
{
    static const uint64_t shapes[][5] = {
        /* rank, dims... */
        {2, 3, 5}, {1, 17}, {3, 2, 3, 7}, {4, 2, 1, 3, 4}, {2, 1000, 33}, {0, 999},
    };
    enum { T = sizeof(shapes) / sizeof(shapes[0]) };
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 1 << 20});
    gr_graph *g = one_kernel("softmax", 0);
    gr_tensor t[T];
    float *in[T], *out[T];

    memset(t, 0, sizeof(t));
    for (int k = 0; k < T; k++) {
        uint64_t elems = 1;

        t[k].rank = (uint32_t)shapes[k][0];
        for (uint32_t d = 0; d < t[k].rank; d++)
            elems *= t[k].shape[d] = shapes[k][1 + d];
        if (t[k].rank == 0)
            elems = shapes[k][1];
        t[k].elems = elems;
        in[k] = malloc(elems * sizeof(float));
        out[k] = malloc(elems * sizeof(float));
        ASSERT_TRUE(in[k] != NULL && out[k] != NULL);
        for (uint64_t i = 0; i < elems; i++)
            in[k][i] = value((uint64_t)k, i);
        memset(out[k], 0xff, elems * sizeof(float)); /* NaN: every element must be written */
        t[k].in[0] = in[k];
        t[k].out[0] = out[k];
    }
    run_job(rt, g, t, T);
    for (int k = 0; k < T; k++) {
        uint64_t cols = t[k].rank ? t[k].shape[t[k].rank - 1] : t[k].elems;

        for (uint64_t r = 0; r < t[k].elems / cols; r++) {
            const float *x = in[k] + r * cols;
            double max = x[0], sum = 0;

            for (uint64_t j = 0; j < cols; j++)
                max = fmax(max, x[j]);
            for (uint64_t j = 0; j < cols; j++)
                sum += exp(x[j] - max);
            for (uint64_t j = 0; j < cols; j++)
                ASSERT_DOUBLE_NEAR(out[k][r * cols + j], exp(x[j] - max) / sum,
                                   1e-6 * exp(x[j] - max) / sum + 1e-38);
        }
        free(in[k]);
        free(out[k]);
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* sum: one float per tensor, D2H'd from a fixed buffer of one element into an output of one
 * element; outputs side by side in one array. */
static void sum_to_one_element(void)
{
    enum { T = 9 };
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 1 << 20});
    gr_graph *g = one_kernel("sum", 1);
    float sums[T + 1], *in[T];
    gr_tensor t[T];
    gr_error_info err;
    gr_job *job = NULL;

    memset(t, 0, sizeof(t));
    for (int k = 0; k < T; k++) {
        uint64_t elems = 1 + (uint64_t)k * 7919;

        in[k] = malloc(elems * sizeof(float));
        ASSERT_TRUE(in[k] != NULL);
        for (uint64_t i = 0; i < elems; i++)
            in[k][i] = value((uint64_t)k + 100, i);
        t[k] = (gr_tensor){{in[k]}, {&sums[k]}, elems, 0, {0}};
    }
    sums[T] = 12345.0f;
    ASSERT_EQ_U64(gr_graph_port_bytes(g, true, 0, 1000), 4); /* the port holds one float */
    run_job(rt, g, t, T);
    for (int k = 0; k < T; k++) {
        double want = 0;

        for (uint64_t i = 0; i < t[k].elems; i++)
            want += in[k][i];
        ASSERT_FLOAT_BITS_EQ(sums[k], (float)want);
    }
    ASSERT_FLOAT_BITS_EQ(sums[T], 12345.0f); /* nothing written past the last output */
    /* Two indices writing the same one-element output overlap. */
    t[1].out[0] = &sums[0];
    ASSERT_STATUS(gr_job_submit(rt, g, t, 2, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "overlaps another output");
    ASSERT_TRUE(job == NULL);
    for (int k = 0; k < T; k++)
        free(in[k]);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* normalize with per-channel constants given as inputs: fixed buffers of 3 elements, copied
 * in from host ports that every tensor points at the same small arrays for. */
static void normalize_with_small_inputs(void)
{
    enum { T = 4, C = 3 };
    const float mean[C] = {0.5f, -1.0f, 2.0f}, sd[C] = {2.0f, 0.25f, 8.0f};
    const char *in3[] = {"x", "m", "s"};
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 1 << 20});
    float *data[T], *want[T];
    gr_tensor t[T];
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    add_fixed(g, "m", C);
    add_fixed(g, "s", C);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "mean", 1, "m"), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "std", 2, "s"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "norm", "normalize", in3, 3, "x", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "norm"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "mean", "norm"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "std", "norm"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "norm", "store"), GR_OK);
    finalized(g);
    ASSERT_EQ(gr_graph_input_count(g), 3);
    ASSERT_EQ_U64(gr_graph_port_bytes(g, false, 1, 1 << 20), C * sizeof(float));
    memset(t, 0, sizeof(t));
    for (int k = 0; k < T; k++) {
        uint64_t elems = (uint64_t)C * (10 + 1000 * (uint64_t)k);

        data[k] = malloc(elems * sizeof(float));
        want[k] = malloc(elems * sizeof(float));
        ASSERT_TRUE(data[k] != NULL && want[k] != NULL);
        for (uint64_t i = 0; i < elems; i++) {
            data[k][i] = value((uint64_t)k + 200, i);
            want[k][i] = (data[k][i] - mean[i % C]) / sd[i % C];
        }
        t[k] = (gr_tensor){{data[k], mean, sd}, {data[k]}, elems, 2, {elems / C, C}};
    }
    run_job(rt, g, t, T);
    for (int k = 0; k < T; k++) {
        for (uint64_t i = 0; i < t[k].elems; i++)
            ASSERT_FLOAT_BITS_EQ(data[k][i], want[k][i]);
        free(data[k]);
        free(want[k]);
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* Shapes that do not describe the tensor are refused at submit, naming the index. */
static void bad_shapes_refused(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 1 << 20});
    gr_graph *g = one_kernel("softmax", 0);
    float x[12], y[12];
    gr_tensor t[2] = {{{x}, {y}, 12, 2, {3, 4}}, {{x}, {y + 6}, 6, 2, {2, 3}}};
    gr_error_info err;
    gr_job *job;

    t[1].shape[1] = 4; /* 2 x 4 is not 6 */
    ASSERT_STATUS(gr_job_submit(rt, g, t, 2, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ_U64(err.index, 1);
    ASSERT_STR_CONTAINS(err.message, "index 1: the shape's dimensions must multiply to its 6");
    t[1].shape[1] = 3;
    t[1].rank = GR_MAX_DIMS + 1;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 2, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "index 1: rank 5 (at most 4 dimensions)");
    t[1].rank = 2;
    t[0].shape[0] = 0;
    ASSERT_STATUS(gr_job_submit(rt, g, t, 2, NULL, &job, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "index 0: the shape's dimensions must multiply");
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* A fixed buffer where a whole tensor is read or written is refused at finalize, pointing
 * at the buffer; a reduction may write to one, and a kernel's small inputs may be one. */
static void fixed_buffers_only_where_they_fit(void)
{
    const char *x = "x", *f = "f";
    gr_graph *g;

    /* softmax writes the whole tensor: not into a fixed buffer. */
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    add_fixed(g, "f", 16);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "softmax", &x, 1, "f", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "f", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "node 'k' works on the whole tensor, but buffer 'f' "
                                           "has a fixed size (16 elements)");
    ASSERT_EQ(g->error_buffer, 1);
    gr_graph_destroy(g);
    /* sum reads the whole tensor: not from a fixed buffer (only small inputs may be). */
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    add_fixed(g, "f", 16);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "f"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "sum", &f, 1, "x", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "buffer 'f' has a fixed size");
    gr_graph_destroy(g);
    /* A small input reads what its buffer holds: a fixed size, or else the whole tensor, so
     * a ratio buffer below 1/1 is refused there too (normalize would read past it). */
    {
        const char *in3[] = {"x", "m", "m"};

        ASSERT_STATUS(gr_graph_create(&g), GR_OK);
        ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_buffer(g, "m", 1, 4), GR_OK);
        ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel(g, "s", "sum", &x, 1, "m", NULL, 0), GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel(g, "n", "normalize", in3, 3, "x", NULL, 0), GR_OK);
        ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "load", "s"), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "s", "n"), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "n", "store"), GR_OK);
        ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "node 'n' works on the whole tensor, but buffer "
                                               "'m' (1/4) is smaller than the tensor");
        gr_graph_destroy(g);
    }
    /* A bad description is refused by the builder. */
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "x", NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "GR_BUFFER_DESC_INIT");
    {
        gr_buffer_desc d = GR_BUFFER_DESC_INIT;

        d.dtype = GR_DTYPE_COUNT_;
        ASSERT_STATUS(gr_graph_add_buffer_desc(g, "x", &d), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "unknown element type");
    }
    gr_graph_destroy(g);
}

/* A graph with a kernel that is not elementwise cannot be cut: a tensor larger than the
 * budget is refused at submit, saying so, instead of being chunked. */
static void unsplittable_over_budget_refused(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 64 << 10});
    gr_graph *g = one_kernel("softmax", 0);
    enum { E = 64 << 10 };
    float *x = malloc(E * sizeof(float));
    gr_tensor t = {{x}, {x}, E, 0, {0}};
    gr_error_info err;
    gr_job *job;

    ASSERT_TRUE(x != NULL);
    ASSERT_TRUE(!g->splittable);
    ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, &err), GR_ERR_OVER_BUDGET);
    ASSERT_STR_CONTAINS(err.message, "the graph cannot be split");
    free(x);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* Iterations run so far on device 0. */
static uint64_t iterations(gr_runtime *rt)
{
    gr_stats st = GR_STATS_INIT;

    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    return st.iterations_done;
}

/* graph/examples/seed_expr.graph, the seed written as one expression, through the host
 * backend: the built-in seed's result bit for bit (gr__seed_ref), as an elementwise kernel
 * should be, in chunks of a tensor larger than the budget and in batches of small ones. */
static void seed_expression_graph_equals_seed(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 1 << 20});
    gr_test_tensors big = gr_test_tensors_make(5, 1, (1 << 20) + 3);
    gr_test_tensors small = gr_test_tensors_make(6, 64, 301);
    gr_test_tensors odd = gr_test_tensors_make(7, 5, 4099);
    gr_error_info err;
    uint64_t before;
    gr_graph *g;

    if (gr_graph_load("graph/examples/seed_expr.graph", &g, &err) != GR_OK)
        GR_TEST_FAIL("%s", err.message);
    before = iterations(rt);
    run_job(rt, g, big.t, big.count);
    gr_test_expect_all_processed(&big);
    ASSERT_GT_U64(iterations(rt) - before, 1); /* chunks */
    before = iterations(rt);
    run_job(rt, g, small.t, small.count);
    gr_test_expect_all_processed(&small);
    ASSERT_LT_U64(iterations(rt) - before, small.count); /* batches */
    run_job(rt, g, odd.t, odd.count);
    gr_test_expect_all_processed(&odd);
    gr_test_tensors_free(&big);
    gr_test_tensors_free(&small);
    gr_test_tensors_free(&odd);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

GR_TEST_MAIN(GR_TEST(seed_expression_graph_equals_seed), GR_TEST(softmax_per_row),
             GR_TEST(sum_to_one_element),
             GR_TEST(normalize_with_small_inputs), GR_TEST(bad_shapes_refused),
             GR_TEST(fixed_buffers_only_where_they_fit),
             GR_TEST(unsplittable_over_budget_refused))

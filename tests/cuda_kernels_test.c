/*
 * cuda_kernels_test.c - kernels on a real GPU beyond the seed: every way of bringing a
 * user's CUDA kernel (an entry of this program, a cudaKernel_t, a CUfunction, a launch
 * callback captured or called eagerly, NVRTC source), whole, chunked and batched, against its
 * CPU version bit for bit; an eager kernel beside built-ins, doing what capture forbids;
 * the built-ins added with them (exact ones bit for bit, CUDA's exp and log within 2 ulp of
 * the C library's, tanh and sigmoid within 4, softmax and the double sum within a relative
 * 1e-6); private contexts; and the device memory that source kernels' modules take. And
 * expression kernels (kernels/expr*.c): their generated CUDA against their CPU evaluator, bit
 * for bit for the exact operations and casts of every type, within the math libraries'
 * ulps for the others; the seed as an expression against the built-in seed. Every case
 * says SKIP without a GPU.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/dtype.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tests/user_kernels.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/workload.h"

#define MiB (1ull << 20)
#define STATED_OVERHEAD (32 * MiB) /* docs/API.md: device memory beyond the budget */

static gr_runtime *cuda_runtime(uint32_t workers, uint64_t budget, gr_context_mode mode)
{
    return gr_test_runtime((gr_test_shape){
        .backend = GR_BACKEND_CUDA, .workers = workers, .budget = budget, .contexts = mode});
}

static void need_user_kernels(void)
{
    gr_error_info err;

    if (gr_test_register_user_kernels(&err) != GR_OK)
        GR_TEST_FAIL("registering the user kernels: %s", err.message);
}

static gr_status run(gr_runtime *rt, gr_graph *g, gr_tensor *t, uint64_t n, gr_error_info *err)
{
    gr_job *job;
    gr_status st = gr_job_submit(rt, g, t, n, NULL, &job, err);

    if (st != GR_OK)
        return st;
    st = gr_test_wait(job, GR_WAIT_FOREVER);
    if (st != GR_OK && err)
        gr_job_error_get(job, err);
    gr_job_destroy(job);
    return st;
}

/* One user kernel over: odd sizes whole, one tensor in chunks (larger than a worker's
 * share of an 8 MiB budget), 3000 small separate pinned tensors (staged batches). */
static void user_kernel_everywhere(gr_runtime *rt, const char *name)
{
    static const uint64_t odd[] = {1, 3, 255, 257, 4099, 100003};
    enum { SMALL = 3000, SMALL_ELEMS = 300, BIG = 3 * (1 << 20) + 5 };
    const float s = 1.5f;
    gr_graph *g = gr_test_kernel_graph(name, 1, &s, 1, true);
    uint64_t n = sizeof(odd) / sizeof(odd[0]) + 1 + SMALL;
    gr_tensor *t = calloc(n, sizeof(*t));
    float **data = calloc(n, sizeof(*data));
    gr_error_info err;

    ASSERT_TRUE(t != NULL && data != NULL);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t elems = i < 6 ? odd[i] : i == 6 ? BIG : SMALL_ELEMS + i % 7;

        ASSERT_STATUS(gr_host_alloc(elems * 4, (void **)&data[i]), GR_OK);
        gr_workload_fill(data[i], 0, elems, 41, i);
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = elems;
    }
    if (run(rt, g, t, n, &err) != GR_OK)
        GR_TEST_FAIL("%s: index %llu node '%s': %s", name, (unsigned long long)err.index,
                     err.node, err.message);
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t j = 0; j < t[i].elems; j++) {
            float want = gr_test_user_ref(gr_workload_value(41, i, j), s);

            if (memcmp(&data[i][j], &want, 4) != 0)
                GR_TEST_FAIL("%s: tensor %llu element %llu: GPU %.9g, CPU %.9g", name,
                             (unsigned long long)i, (unsigned long long)j, data[i][j], want);
        }
        gr_host_free(data[i]);
    }
    free(data);
    free(t);
    gr_graph_destroy(g);
}

static void user_kernels_every_way(void)
{
    gr_runtime *rt;

    REQUIRE_GPU();
    need_user_kernels();
    rt = cuda_runtime(2, 8 * MiB, GR_CONTEXT_PRIMARY);
    for (int w = 0; w < GR_TEST_USER_WAYS; w++) {
        user_kernel_everywhere(rt, gr_test_user_kernels[w]);
        printf("    %s: whole, chunked and batched tensors right\n", gr_test_user_kernels[w]);
    }
    gr_runtime_destroy(rt);
}

/* With private contexts: the context-independent kinds run; a CUfunction (bound to the
 * primary context it came from) is refused at submit, saying why. */
static void user_kernels_private_contexts(void)
{
    const float s = 2.0f;
    float *x;
    gr_tensor t = {{0}, {0}, 1024, 0, {0}};
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;

    REQUIRE_GPU();
    need_user_kernels();
    rt = cuda_runtime(2, 8 * MiB, GR_CONTEXT_PRIVATE);
    user_kernel_everywhere(rt, "u_kernel");
    user_kernel_everywhere(rt, "u_source");
    user_kernel_everywhere(rt, "u_launch");
    user_kernel_everywhere(rt, "u_entry");
    user_kernel_everywhere(rt, "u_stream");
    g = gr_test_kernel_graph("u_function", 1, &s, 1, true);
    ASSERT_STATUS(gr_host_alloc(1024 * 4, (void **)&x), GR_OK);
    t.in[0] = t.out[0] = x;
    ASSERT_STATUS(run(rt, g, &t, 1, &err), GR_ERR_UNAVAILABLE);
    ASSERT_STR_CONTAINS(err.message, "kernel 'u_function' is a CUfunction, which only its own "
                                     "context can launch");
    /* No copy update refused: a private context's second move is rebuilt without asking
     * (runtime/cuda/lowering.h: copies_move_once). */
    ASSERT_EQ_U64(atomic_load(&gr__runtime_device(rt, 0, &(gr_status){GR_OK})
                                   ->graph_update_refusals),
                  0);
    gr_host_free(x);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* The built-ins beyond the seed, against their CPU versions. */
/* An eager kernel (GR_CUDA_STREAM) may do what a CUDA graph cannot hold: this one copies
 * its input to its output and waits for the stream, which under capture fails. */
static int copy_and_wait(void *stream, const gr_kernel_args *a, void *user)
{
    (void)user;
    if (cudaMemcpyAsync(a->out, a->in[0], a->n * sizeof(float), cudaMemcpyDeviceToDevice,
                        (cudaStream_t)stream) != cudaSuccess)
        return 1;
    return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : 2;
}

static void copy_cpu(const gr_kernel_args *a, void *user)
{
    (void)user;
    memcpy(a->out, a->in[0], a->n * sizeof(float));
}

/* load -> seed (a built-in, launched by graphrun) -> copy_and_wait (eager) -> u_stream
 * (eager, the user kernel) -> store: the eager path runs the template node by node, every
 * output right, whole, chunked and batched; the same copy_and_wait as a captured launch
 * callback (GR_CUDA_LAUNCH) fails the iteration, as capture forbids the wait. */
static void eager_kernels_beside_builtins(void)
{
    const char *x = "x";
    const float s = 0.75f;
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_tensor *t;
    float **data;
    enum { N = 400 };

    REQUIRE_GPU();
    need_user_kernels();
    d.name = "copy_and_wait";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = copy_cpu;
    d.cuda_kind = GR_CUDA_STREAM;
    d.cuda = (const void *)copy_and_wait;
    if (gr_kernel_register(&d, &err) != GR_OK)
        GR_TEST_FAIL("register: %s", err.message);
    d.name = "copy_and_wait_captured";
    d.cuda_kind = GR_CUDA_LAUNCH;
    if (gr_kernel_register(&d, &err) != GR_OK)
        GR_TEST_FAIL("register: %s", err.message);
    rt = cuda_runtime(3, 8 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "seed", "seed", &x, 1, "x", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "copy", "copy_and_wait", &x, 1, "y", NULL, 0), GR_OK);
    x = "y";
    ASSERT_STATUS(gr_graph_add_kernel(g, "user", "u_stream", &x, 1, "x", &s, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "seed"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "seed", "copy"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "copy", "user"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "user", "store"), GR_OK);
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("finalize: %s", GRAPH_ERROR(g));
    t = calloc(N, sizeof(*t));
    data = calloc(N, sizeof(*data));
    for (uint64_t i = 0; i < N; i++) {
        uint64_t elems = i == 0 ? 3 * (1 << 20) + 7 : 1 + (i * 997) % 70000;

        ASSERT_STATUS(gr_host_alloc(elems * 4, (void **)&data[i]), GR_OK);
        gr_workload_fill(data[i], 0, elems, 43, i);
        t[i] = (gr_tensor){{data[i]}, {data[i]}, elems, 0, {0}};
    }
    if (run(rt, g, t, N, &err) != GR_OK)
        GR_TEST_FAIL("index %llu node '%s': %s", (unsigned long long)err.index, err.node,
                     err.message);
    for (uint64_t i = 0; i < N; i++) {
        for (uint64_t j = 0; j < t[i].elems; j++) {
            float want = gr_test_user_ref(gr__seed_ref(gr_workload_value(43, i, j)), s);

            if (memcmp(&data[i][j], &want, 4) != 0)
                GR_TEST_FAIL("tensor %llu element %llu: GPU %.9g, CPU %.9g",
                             (unsigned long long)i, (unsigned long long)j, data[i][j], want);
        }
    }
    gr_graph_destroy(g);
    /* Captured, the wait breaks the capture: the iteration fails, nothing hangs. */
    x = "x";
    g = gr_test_kernel_graph("copy_and_wait_captured", 1, NULL, 0, false);
    t[1].out[0] = data[2];
    ASSERT_STATUS(run(rt, g, &t[1], 1, &err), GR_ERR_CUDA);
    ASSERT_STR_CONTAINS(err.message, "callback returned 2");
    gr_graph_destroy(g);
    for (uint64_t i = 0; i < N; i++)
        gr_host_free(data[i]);
    free(data);
    free(t);
    gr_runtime_destroy(rt);
}

static void new_builtins_match_cpu(void)
{
    enum { N = (1 << 20) + 3 };
    static const gr_test_kernel_case cases[] = {
        {"sub", 1, {0.25f}, 1, 0},  {"div", 1, {3.0f}, 1, 0},     {"exp", 1, {0}, 0, 2},
        {"tanh", 1, {0}, 0, 4},     {"sigmoid", 1, {0}, 0, 4},    {"clamp", 1, {0.2f, 0.7f}, 2, 0},
        {"mul2", 2, {0}, 0, 0},     {"add2", 2, {0}, 0, 0},
        {"log", 1, {0}, 0, 2}, /* last: its inputs are made positive in place */
    };
    float *x, *y;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime(2, 64 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_host_alloc(N * 4, (void **)&x), GR_OK);
    ASSERT_STATUS(gr_host_alloc(N * 4, (void **)&y), GR_OK);
    gr_workload_fill(x, 0, N, 6, 0);
    gr_workload_fill(y, 0, N, 6, 1);
    for (uint64_t i = 0; i < N; i++)
        x[i] = x[i] * 8.0f - 4.0f + 1e-3f; /* [-4, 4), and log's inputs > 0 below */
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        if (strcmp(cases[c].kernel, "log") == 0)
            for (uint64_t i = 0; i < N; i++)
                x[i] = fabsf(x[i]);
        gr_test_expect_kernel_matches_cpu(rt, &cases[c], x, y, N);
    }
    gr_runtime_destroy(rt);
    gr_host_free(x);
    gr_host_free(y);
}

/* A graph that cannot be cut (softmax per row) over whole tensors in pageable memory: each
 * is streamed through its worker's pinned staging buffer in pieces (8 MiB a buffer: parts of
 * 2 MiB, so the 12 MB tensors go in six and wrap around the four parts), one with a pinned
 * input copied where it lies and a pageable output streamed, one all pinned (direct, the
 * reference path). Every output equals, bit for bit, the same tensor's output through
 * pinned memory, and the CPU's softmax within a relative 1e-6; the statistics say which
 * path each unit took. */
static void pageable_whole_tensors_streamed_through_staging(void)
{
    static const uint64_t shapes[][2] = {{3000, 1000}, {3001, 999}, {1, (1 << 20) + 3},
                                         {3, 5},       {3000, 1000}, {2000, 1000}};
    enum { T = sizeof(shapes) / sizeof(shapes[0]), MIXED = 4, PINNED = 5 };
    static const char spec[] = "buffer x\nbuffer y\nh2d l: in0 -> x\n"
                               "kernel k: softmax(x) -> y\nd2h s: y -> out0\nl -> k -> s\n";
    const gr_kernel *sm = gr__kernel_find("softmax");
    gr_config cfg = GR_CONFIG_INIT;
    gr_stats st = GR_STATS_INIT;
    gr_runtime *rt;
    gr_graph *g;
    gr_error_info err;
    gr_tensor t[T], ref[T];
    float *x[T], *y[T], *px[T], *py[T];

    REQUIRE_GPU();
    cfg.backend = GR_BACKEND_CUDA;
    cfg.workers_per_device = 3;
    cfg.budget_bytes = 256 * MiB;
    cfg.staging_bytes = 8 * MiB;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    ASSERT_STATUS(gr_graph_parse(spec, strlen(spec), "softmax", &g, &err), GR_OK);
    for (int k = 0; k < T; k++) {
        uint64_t e = shapes[k][0] * shapes[k][1];

        ASSERT_STATUS(gr_host_alloc(e * 4, (void **)&px[k]), GR_OK);
        ASSERT_STATUS(gr_host_alloc(e * 4, (void **)&py[k]), GR_OK);
        gr_workload_fill(px[k], 0, e, 9, (uint64_t)k + 100);
        for (uint64_t i = 0; i < e; i++)
            px[k][i] = px[k][i] * 20.0f - 10.0f;
        x[k] = k == MIXED || k == PINNED ? px[k] : malloc(e * 4);
        y[k] = k == PINNED ? py[k] : malloc(e * 4);
        ASSERT_TRUE(x[k] != NULL && y[k] != NULL);
        if (x[k] != px[k])
            memcpy(x[k], px[k], e * 4);
        memset(y[k], 0xff, e * 4); /* NaN: every element must be written */
        ref[k] = (gr_tensor){{px[k]}, {py[k]}, e, 2, {shapes[k][0], shapes[k][1]}};
        t[k] = (gr_tensor){{x[k]}, {y[k]}, e, 2, {shapes[k][0], shapes[k][1]}};
    }
    if (run(rt, g, t, T, &err) != GR_OK)
        GR_TEST_FAIL("streamed: %s", err.message);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.units_streamed, T - 1);
    ASSERT_EQ_U64(st.units_direct, 1);
    ASSERT_EQ_U64(st.units_staged + st.units_scattered, 0);
    if (run(rt, g, ref, T, &err) != GR_OK) /* all pinned: direct */
        GR_TEST_FAIL("pinned: %s", err.message);
    for (int k = 0; k < T; k++) {
        uint64_t e = shapes[k][0] * shapes[k][1];
        float *want = malloc(e * 4);
        gr_kernel_args a = {.out = want, .in = {px[k]}, .n = e, .in_n = {e},
                            .shape = {shapes[k][0], shapes[k][1]}, .rank = 2};

        ASSERT_TRUE(want != NULL);
        if (memcmp(y[k], py[k], e * 4) != 0)
            GR_TEST_FAIL("tensor %d: the streamed output differs from the pinned one's", k);
        sm->def.cpu(&a, NULL);
        for (uint64_t i = 0; i < e; i++)
            if (!(fabs((double)y[k][i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-37))
                GR_TEST_FAIL("tensor %d element %llu: GPU %.9g, CPU %.9g", k,
                             (unsigned long long)i, y[k][i], want[i]);
        if (memcmp(x[k], px[k], e * 4) != 0)
            GR_TEST_FAIL("tensor %d: the input changed", k);
        free(want);
        if (x[k] != px[k])
            free(x[k]);
        if (y[k] != py[k])
            free(y[k]);
        gr_host_free(px[k]);
        gr_host_free(py[k]);
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* softmax per row and sum to one element, on shapes the GPU's blocks divide unevenly, and
 * normalize with small inputs: against the CPU versions. */
static void reductions_match_cpu(void)
{
    static const uint64_t shapes[][2] = {{1, 1}, {3, 1000}, {1000, 3}, {257, 4099}, {1, 1 << 20}};
    enum { T = sizeof(shapes) / sizeof(shapes[0]) };
    const gr_kernel *sm = gr__kernel_find("softmax"), *su = gr__kernel_find("sum");
    gr_runtime *rt;
    gr_graph *gsm, *gsu;
    gr_error_info err;
    gr_tensor t[T], ts[T];
    float *x[T], *y[T], sums[T];
    static const char softmax_spec[] = "buffer x\nbuffer y\nh2d l: in0 -> x\n"
                                       "kernel k: softmax(x) -> y\nd2h s: y -> out0\n"
                                       "l -> k -> s\n";
    static const char sum_spec[] = "buffer x\nbuffer t [1]\nh2d l: in0 -> x\n"
                                   "kernel k: sum(x) -> t\nd2h s: t -> out0\nl -> k -> s\n";

    REQUIRE_GPU();
    rt = cuda_runtime(3, 128 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_graph_parse(softmax_spec, strlen(softmax_spec), "softmax", &gsm, &err),
                  GR_OK);
    ASSERT_STATUS(gr_graph_parse(sum_spec, strlen(sum_spec), "sum", &gsu, &err), GR_OK);
    memset(t, 0, sizeof(t));
    memset(ts, 0, sizeof(ts));
    memset(sums, 0xff, sizeof(sums));
    for (int k = 0; k < T; k++) {
        uint64_t e = shapes[k][0] * shapes[k][1];

        ASSERT_STATUS(gr_host_alloc(e * 4, (void **)&x[k]), GR_OK);
        ASSERT_STATUS(gr_host_alloc(e * 4, (void **)&y[k]), GR_OK);
        gr_workload_fill(x[k], 0, e, 9, (uint64_t)k);
        for (uint64_t i = 0; i < e; i++)
            x[k][i] = x[k][i] * 20.0f - 10.0f;
        memset(y[k], 0xff, e * 4); /* NaN: every element must be written */
        t[k] = (gr_tensor){{x[k]}, {y[k]}, e, 2, {shapes[k][0], shapes[k][1]}};
        ts[k] = (gr_tensor){{x[k]}, {&sums[k]}, e, 0, {0}};
    }
    if (run(rt, gsm, t, T, &err) != GR_OK || run(rt, gsu, ts, T, &err) != GR_OK)
        GR_TEST_FAIL("%s", err.message);
    for (int k = 0; k < T; k++) {
        uint64_t e = t[k].elems;
        float *want = malloc(e * 4), one;
        gr_kernel_args a = {.out = want, .in = {x[k]}, .n = e, .in_n = {e},
                            .shape = {shapes[k][0], shapes[k][1]}, .rank = 2};

        sm->def.cpu(&a, NULL);
        for (uint64_t i = 0; i < e; i++)
            if (!(fabs((double)y[k][i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-37)) /* NaN too */
                GR_TEST_FAIL("softmax %llux%llu element %llu: GPU %.9g, CPU %.9g",
                             (unsigned long long)shapes[k][0], (unsigned long long)shapes[k][1],
                             (unsigned long long)i, y[k][i], want[i]);
        a.out = &one;
        a.n = 1;
        su->def.cpu(&a, NULL);
        if (!(fabs((double)sums[k] - one) <= 1e-6 * fabs(one) + 1e-6))
            GR_TEST_FAIL("sum of %llu: GPU %.9g, CPU %.9g", (unsigned long long)e, sums[k], one);
        free(want);
        gr_host_free(x[k]);
        gr_host_free(y[k]);
    }
    gr_graph_destroy(gsm);
    gr_graph_destroy(gsu);
    gr_runtime_destroy(rt);
}

/* Many source kernels, each loaded and run: the modules stay within the device memory the
 * docs state beyond the budget (STATED_OVERHEAD), with the budget itself. */
static void source_modules_stay_within_overhead(void)
{
    enum { K = 64, E = 4096 };
    const uint64_t budget = 64 * MiB;
    uint64_t baseline, peak, total;
    gr_devmem_sampler *sampler;
    gr_error_info err;
    gr_runtime *rt;
    float *x;

    REQUIRE_GPU();
    ASSERT_STATUS(gr_devmem_start(0, 100, &sampler, &err), GR_OK);
    rt = cuda_runtime(3, budget, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_host_alloc(E * 4, (void **)&x), GR_OK);
    for (int k = 0; k < K; k++) {
        char name[32], src[512];
        gr_kernel_def d;
        const float s = 1.0f;
        gr_tensor t = {{x}, {x}, E, 0, {0}};
        gr_graph *g;

        snprintf(name, sizeof(name), "many_%d", k);
        snprintf(src, sizeof(src),
                 "#include \"graphrun_kernel.h\"\n"
                 "extern \"C\" __global__ void many_%d(gr_kernel_args a)\n"
                 "{ GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = GR_IN(a, 0, float)[i] + %d.0f; }\n",
                 k, k);
        d = gr_test_source_def(name, name, src);
        if (gr_kernel_register(&d, &err) != GR_OK)
            GR_TEST_FAIL("register %s: %s", name, err.message);
        for (int i = 0; i < E; i++)
            x[i] = (float)i;
        g = gr_test_kernel_graph(name, 1, &s, 1, true);
        if (run(rt, g, &t, 1, &err) != GR_OK)
            GR_TEST_FAIL("%s: %s", name, err.message);
        for (int i = 0; i < E; i++)
            if (x[i] != (float)(i + k))
                GR_TEST_FAIL("%s: element %d: %.9g, want %d", name, i, x[i], i + k);
        gr_graph_destroy(g);
    }
    gr_runtime_destroy(rt);
    gr_devmem_stop(sampler, &baseline, &peak, &total);
    printf("    %d source kernels: device memory %.1f MiB above the baseline (budget %.0f MiB, "
           "stated overhead %.0f MiB)\n",
           K, (peak - baseline) / 1048576.0, budget / 1048576.0, STATED_OVERHEAD / 1048576.0);
    ASSERT_LE_U64(peak - baseline, budget + STATED_OVERHEAD);
    gr_host_free(x);
}

/* An expression case: text over x and y of types tx and ty into out, and how far apart (in
 * ulps of the output) the GPU's and the CPU's results may be: 0 for the exact operations. */
typedef struct expr_case {
    const char *text;
    gr_dtype tx, ty, out;
    int ulps;
} expr_case;

/* Whether a (GPU) and b (CPU), elements of type t, agree within `ulps` (any NaN is a NaN:
 * the payloads differ, CUDA making the canonical one). */
static bool expr_agree(gr_dtype t, const void *a, const void *b, uint64_t i, int ulps)
{
    double x = gr__load_f64(t, a, i), y = gr__load_f64(t, b, i);

    if (x != x || y != y)
        return x != x && y != y;
    if (t == GR_DTYPE_FLOAT32 || t == GR_DTYPE_FLOAT64) {
        int64_t ia, ib;

        if (t == GR_DTYPE_FLOAT32) {
            int32_t fa, fb;

            memcpy(&fa, (const float *)a + i, 4);
            memcpy(&fb, (const float *)b + i, 4);
            ia = fa;
            ib = fb;
        } else {
            memcpy(&ia, (const double *)a + i, 8);
            memcpy(&ib, (const double *)b + i, 8);
        }
        if ((ia < 0) != (ib < 0)) /* opposite signs: only +0 and -0 may meet */
            return ulps > 0 && x == y;
        return (ia > ib ? ia - ib : ib - ia) <= ulps;
    }
    /* float16, bfloat16 and the integers: their bits, exactly. */
    return memcmp((const char *)a + i * gr_dtype_size(t), (const char *)b + i * gr_dtype_size(t),
                  gr_dtype_size(t)) == 0;
}

/* Register c's expression, run it on `rt` over n elements of xv and yv (converted to the
 * inputs' types), one tensor whole and the same again cut into chunks by a graph of
 * buffers the tensor's size, and compare with the CPU version. */
static void expect_expr_matches_cpu(gr_runtime *rt, const expr_case *c, const double *xv,
                                    const double *yv, uint64_t n)
{
    gr_expr_def d = GR_EXPR_DEF_INIT;
    gr_buffer_desc bx = GR_BUFFER_DESC_INIT, by = GR_BUFFER_DESC_INIT, bo = GR_BUFFER_DESC_INIT;
    const char *ins[] = {"x", "y"};
    char name[GR_NAME_MAX + 1];
    uint32_t sx = gr_dtype_size(c->tx), sy = gr_dtype_size(c->ty), so = gr_dtype_size(c->out);
    void *x, *y, *out, *want = malloc(n * so);
    const gr_kernel *k;
    gr_error_info err;
    gr_tensor t;
    gr_graph *g;

    d.text = c->text;
    d.n_inputs = 2;
    d.input_names[0] = "x";
    d.input_names[1] = "y";
    d.input_dtype[0] = c->tx;
    d.input_dtype[1] = c->ty;
    d.out_dtype = c->out;
    if (gr_kernel_register_expr(&d, name, sizeof(name), &err) != GR_OK)
        GR_TEST_FAIL("'%s': %s", c->text, err.message);
    k = gr__kernel_find(name);
    ASSERT_TRUE(want != NULL && k != NULL);
    ASSERT_STATUS(gr_host_alloc(n * sx, &x), GR_OK);
    ASSERT_STATUS(gr_host_alloc(n * sy, &y), GR_OK);
    ASSERT_STATUS(gr_host_alloc(n * so, &out), GR_OK);
    for (uint64_t i = 0; i < n; i++) {
        gr__store_cast(c->tx, x, i, GR_DTYPE_FLOAT64, xv[i]);
        gr__store_cast(c->ty, y, i, GR_DTYPE_FLOAT64, yv[i]);
    }
    bx.dtype = c->tx;
    by.dtype = c->ty;
    bo.dtype = c->out;
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "x", &bx), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "y", &by), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "o", &bo), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "lx", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "ly", 1, "y"), GR_OK);
    if (gr_graph_add_kernel(g, "k", name, ins, 2, "o", NULL, 0) != GR_OK)
        GR_TEST_FAIL("'%s': %s", c->text, GRAPH_ERROR(g));
    ASSERT_STATUS(gr_graph_add_d2h(g, "s", "o", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "lx", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "ly", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "s"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    t = (gr_tensor){{x, y}, {out}, n, 0, {0}};
    memset(out, 0xff, n * so); /* every element must be written */
    if (run(rt, g, &t, 1, &err) != GR_OK)
        GR_TEST_FAIL("'%s': %s", c->text, err.message);
    {
        gr_kernel_args a = {.out = want, .in = {x, y}, .n = n, .in_n = {n, n}};

        k->def.cpu(&a, k->def.user);
    }
    for (uint64_t i = 0; i < n; i++)
        if (!expr_agree(c->out, out, want, i, c->ulps))
            GR_TEST_FAIL("'%s' (%s, %s -> %s) element %llu (x %.9g, y %.9g): GPU %.17g, CPU "
                         "%.17g (%d ulps allowed)",
                         c->text, gr_dtype_name(c->tx), gr_dtype_name(c->ty),
                         gr_dtype_name(c->out), (unsigned long long)i, xv[i], yv[i],
                         gr__load_f64(c->out, out, i), gr__load_f64(c->out, want, i), c->ulps);
    gr_graph_destroy(g);
    gr_host_free(x);
    gr_host_free(y);
    gr_host_free(out);
    free(want);
}

/* Expression kernels on the GPU against their CPU versions: the exact operations bit for
 * bit, in float32 and float64, over inputs with signed zeros, infinities, NaNs, subnormals
 * and values near every type's limits; every cast between every pair of types; the math
 * functions within the two libraries' ulps (docs/GRAPH_SPEC.md). Whole tensors, and chunks
 * (a tensor larger than a worker's share of the 8 MiB budget). */
static void expressions_match_cpu(void)
{
    enum { N = (1 << 20) + 7 };
    static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, INFINITY, -INFINITY, NAN,
                                     1e-40, -1e-40, 3e38, -3e38, 65504.0, 65520.0, 255.5, 256.0,
                                     -128.7, 2147483648.0, -2147483904.0, 1e300, 1e-310};
    const gr_dtype F = GR_DTYPE_FLOAT32, D = GR_DTYPE_FLOAT64;
    static const char *const exact[] = {
        "x + y", "x - y", "x * y", "x / y", "-x", "(x - 0.5) * 2.0", "x * 1.01 + 1.01",
        "x / 3 - y * 0.1", "sqrt(x)", "sqrt(abs(x)) + floor(y)", "pow(x, 0.5) + pow(y, 2)",
        "pow(x, 1) - pow(y, 2)", "pow(x, select(y > 0, 2, 0.5))", "min(x, y)", "max(x, y)", "clamp(x, -0.5, y)",
        "select(x < y, x, y)", "select(x <= y, 1, 0) + select(x > y, 2, 0)",
        "where(x >= y, x, -y) + select(x == y, 4, 8) * select(x != y, 1, 3)",
        "select(x > 0, sqrt(x), -sqrt(-x))", "floor(x * 7) / 7",
    };
    static const expr_case inexact[] = {
        {"exp(x)", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, 2},
        {"log(abs(x))", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, 2},
        {"tanh(x)", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, 4},
        {"sigmoid(x)", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, 4},
        {"pow(abs(x), y)", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, 5},
        {"exp(x)", GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, 2},
        {"log(abs(x))", GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, 2},
        {"tanh(x)", GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, 4},
        {"sigmoid(x)", GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, 4},
        {"pow(abs(x), y)", GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64, 3},
    };
    size_t ns = sizeof(special) / sizeof(special[0]);
    double *xv, *yv;
    gr_runtime *rt;

    REQUIRE_GPU();
    xv = malloc(N * sizeof(double));
    yv = malloc(N * sizeof(double));
    ASSERT_TRUE(xv != NULL && yv != NULL);
    for (uint64_t i = 0; i < N; i++) {
        xv[i] = (gr_workload_value(21, 0, i) * 8.0 - 4.0) * pow(10.0, (double)(i % 9) - 4.0);
        yv[i] = (gr_workload_value(21, 1, i) * 8.0 - 4.0) * pow(10.0, (double)(i % 5) - 2.0);
    }
    for (size_t i = 0; i < ns * ns; i++) { /* every pair of special values */
        xv[i] = special[i % ns];
        yv[i] = special[i / ns];
    }
    rt = cuda_runtime(2, 8 * MiB, GR_CONTEXT_PRIMARY);
    for (size_t e = 0; e < sizeof(exact) / sizeof(exact[0]); e++) {
        expr_case c32 = {exact[e], F, F, F, 0}, c64 = {exact[e], D, D, D, 0};

        expect_expr_matches_cpu(rt, &c32, xv, yv, N);
        expect_expr_matches_cpu(rt, &c64, xv, yv, N);
    }
    printf("    %zu exact expressions bit for bit in float32 and float64\n",
           sizeof(exact) / sizeof(exact[0]));
    for (int from = 0; from < GR_DTYPE_COUNT_; from++)
        for (int to = 0; to < GR_DTYPE_COUNT_; to++) {
            char text[64];
            expr_case c = {text, (gr_dtype)from, (gr_dtype)to, (gr_dtype)to, 0};

            /* The cast of an input, and of an operation's result mixed with the other input
             * (of the output's type, so also read as one). */
            snprintf(text, sizeof(text), "%s(x)", gr_dtype_name((gr_dtype)to));
            expect_expr_matches_cpu(rt, &c, xv, yv, N);
            snprintf(text, sizeof(text), "%s(select(x < 1, %s(x * 3 + y), y))",
                     gr_dtype_name((gr_dtype)to), gr_dtype_name((gr_dtype)to));
            expect_expr_matches_cpu(rt, &c, xv, yv, N);
        }
    printf("    casts between every pair of types bit for bit\n");
    for (size_t e = 0; e < sizeof(inexact) / sizeof(inexact[0]); e++)
        expect_expr_matches_cpu(rt, &inexact[e], xv, yv, N);
    printf("    exp, log, tanh, sigmoid, pow within their ulps\n");
    gr_runtime_destroy(rt);
    free(xv);
    free(yv);
}

/* graph/examples/seed_expr.graph (run from the repository root) on the GPU: bit for bit the
 * built-in fused seed's output, for tensors whole, chunked and batched. */
static void seed_expression_equals_builtin_seed(void)
{
    gr_test_tensors sets[3];
    gr_graph *expr, *seed;
    gr_error_info err;
    gr_runtime *rt;

    REQUIRE_GPU();
    if (gr_graph_load("graph/examples/seed_expr.graph", &expr, &err) != GR_OK)
        GR_TEST_FAIL("%s", err.message);
    ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
    rt = cuda_runtime(2, 8 * MiB, GR_CONTEXT_PRIMARY);
    sets[0] = gr_test_tensors_make(31, 3, 3 * (1 << 20) + 5); /* chunked */
    sets[1] = gr_test_tensors_make(32, 500, 301);             /* batched */
    sets[2] = gr_test_tensors_make(33, 6, 100003);
    for (int k = 0; k < 3; k++) {
        gr_test_tensors *s = &sets[k];
        float **copy = calloc(s->count, sizeof(float *));
        gr_tensor *t = calloc(s->count, sizeof(gr_tensor));

        ASSERT_TRUE(copy != NULL && t != NULL);
        for (uint64_t i = 0; i < s->count; i++) {
            copy[i] = malloc(s->elems * sizeof(float));
            ASSERT_TRUE(copy[i] != NULL);
            memcpy(copy[i], s->data[i], s->elems * sizeof(float));
            t[i] = s->t[i];
            t[i].in[0] = t[i].out[0] = copy[i];
        }
        if (run(rt, expr, s->t, s->count, &err) != GR_OK ||
            run(rt, seed, t, s->count, &err) != GR_OK)
            GR_TEST_FAIL("%s", err.message);
        for (uint64_t i = 0; i < s->count; i++) {
            for (uint64_t j = 0; j < s->elems; j++)
                if (memcmp(&s->data[i][j], &copy[i][j], 4) != 0)
                    GR_TEST_FAIL("tensor %llu element %llu: expression %a, built-in seed %a",
                                 (unsigned long long)i, (unsigned long long)j, s->data[i][j],
                                 copy[i][j]);
            free(copy[i]);
        }
        gr_test_expect_all_processed(s);
        gr_test_tensors_free(s);
        free(copy);
        free(t);
    }
    gr_graph_destroy(expr);
    gr_graph_destroy(seed);
    gr_runtime_destroy(rt);
}

GR_TEST_MAIN(GR_TEST(user_kernels_every_way), GR_TEST(user_kernels_private_contexts),
             GR_TEST(eager_kernels_beside_builtins),
             GR_TEST(new_builtins_match_cpu), GR_TEST(reductions_match_cpu),
             GR_TEST(pageable_whole_tensors_streamed_through_staging),
             GR_TEST(source_modules_stay_within_overhead), GR_TEST(expressions_match_cpu),
             GR_TEST(seed_expression_equals_builtin_seed))

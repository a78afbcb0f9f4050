/*
 * matmul_cublas.c - y = W x for every row x of every tensor, W one matrix the whole job
 * shares: W is a constant of the graph (gr_graph_add_const), copied to each device once and
 * counted in the budget once, and the product is cuBLAS's SGEMM in an eager kernel
 * (GR_CUDA_STREAM), enqueued on each iteration's stream. (Captured into the iteration's CUDA
 * graph as a launch callback, GR_CUDA_LAUNCH, cuBLAS's work cannot become the graph's child
 * node: on the H200 cudaGraphAddChildGraphNode refused it, cudaErrorNotSupported.) cuBLAS is
 * loaded at run time
 * (dlopen), as graphrun loads NVRTC: the program starts, and runs on the host backend with
 * its CPU version, where there is no GPU or no cuBLAS. Builds against the installed library
 * with any C compiler (no CUDA headers needed):
 *
 *     cc -std=c11 -o matmul_cublas docs/examples/matmul_cublas.c \
 *        $(pkg-config --cflags --libs graphrun) -ldl -lm -Wl,-rpath,$PREFIX/lib
 *     ./matmul_cublas [--backend host|cuda] [--n N] [--rows R] [--count C] [--budget MIB]
 *
 * Defaults: N 256, R 64, C 128 (8 MiB of tensors), a budget of 4 MiB.
 *
 * Each tensor is R rows of N floats (row-major), its output the same shape; W is N x N. The
 * tensors together are larger than the budget, so they stream through it. Every output is
 * checked against a plain C product (within a relative 1e-4: SGEMM sums in another order).
 * Prints PASS lines for what it checked and the time, the bytes over the link and how often
 * W was copied to the device; exits 0 when every output was right.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <graphrun.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The few cuBLAS entry points used, declared here so that no CUDA header is needed. */
typedef int (*cublas_create_fn)(void **handle);
typedef int (*cublas_set_stream_fn)(void *handle, void *stream);
typedef int (*cublas_set_workspace_fn)(void *handle, void *workspace, size_t bytes);
typedef int (*cublas_sgemm_fn)(void *handle, int transa, int transb, int m, int n, int k,
                               const float *alpha, const float *a, int lda, const float *b,
                               int ldb, const float *beta, float *c, int ldc);
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

static struct {
    cublas_create_fn create;
    cublas_set_stream_fn set_stream;
    cublas_set_workspace_fn set_workspace;
    cublas_sgemm_fn sgemm;
} cublas;

/* cuBLAS, if this machine has it: false (and the CUDA version is not registered) if not. */
static int load_cublas(void)
{
    void *lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL)
        lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return 0;
    cublas.create = (cublas_create_fn)dlsym(lib, "cublasCreate_v2");
    cublas.set_stream = (cublas_set_stream_fn)dlsym(lib, "cublasSetStream_v2");
    cublas.set_workspace = (cublas_set_workspace_fn)dlsym(lib, "cublasSetWorkspace_v2");
    cublas.sgemm = (cublas_sgemm_fn)dlsym(lib, "cublasSgemm_v2");
    return cublas.create && cublas.set_stream && cublas.set_workspace && cublas.sgemm;
}

/* A cuBLAS handle per worker thread (a handle is not to be used by two threads at once),
 * made before the job (make_handles: one per worker, without workspace, so that cuBLAS
 * allocates nothing while the job runs beside graphrun's budget), each worker thread taking
 * one at its first call. */
enum { MAX_HANDLES = 64 };
static void *handles[MAX_HANDLES];
static _Atomic unsigned next_handle;
static pthread_key_t handle_key;

static int make_handles(unsigned n)
{
    for (unsigned i = 0; i < n && i < MAX_HANDLES; i++)
        if (cublas.create(&handles[i]) != 0 || cublas.set_workspace(handles[i], NULL, 0) != 0)
            return 0;
    return 1;
}

static void *thread_handle(void)
{
    void *h = pthread_getspecific(handle_key);

    if (h == NULL) {
        unsigned i = atomic_fetch_add(&next_handle, 1);

        if (i >= MAX_HANDLES || (h = handles[i]) == NULL)
            return NULL;
        pthread_setspecific(handle_key, h);
    }
    return h;
}

/* The CUDA version: Y (rows x n, row-major) = X W^T, which column-major SGEMM computes as
 * Y^T = W X^T: W's row-major memory is its transpose in column-major. */
static int matmul_launch(void *stream, const gr_kernel_args *a, void *user)
{
    int n = (int)(uintptr_t)user, rows = (int)(a->n / (uint64_t)n);
    const float one = 1.0f, zero = 0.0f;
    void *h = thread_handle();

    if (h == NULL || cublas.set_stream(h, stream) != 0)
        return 1;
    return cublas.sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, n, &one, a->in[1], n, a->in[0], n,
                        &zero, a->out, n) == 0 ? 0 : 2;
}

/* The CPU version, and the reference: the same product, summed in double. */
static void matmul_rows(const float *x, const float *w, float *y, uint64_t rows, uint64_t n)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t i = 0; i < n; i++) {
            double s = 0;

            for (uint64_t k = 0; k < n; k++)
                s += (double)w[i * n + k] * x[r * n + k];
            y[r * n + i] = (float)s;
        }
}

static void matmul_cpu(const gr_kernel_args *a, void *user)
{
    uint64_t n = (uint64_t)(uintptr_t)user;

    matmul_rows(a->in[0], a->in[1], a->out, a->n / n, n);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long arg(int argc, char **argv, const char *flag, unsigned long fallback)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], flag) == 0)
            return strtoul(argv[i + 1], NULL, 10);
    return fallback;
}

int main(int argc, char **argv)
{
    uint64_t n = arg(argc, argv, "--n", 256), rows = arg(argc, argv, "--rows", 64);
    uint64_t count = arg(argc, argv, "--count", 128), elems = n * rows;
    gr_kernel_def def = GR_KERNEL_DEF_INIT;
    gr_buffer_desc wdesc = GR_BUFFER_DESC_INIT;
    gr_config cfg = GR_CONFIG_INIT;
    gr_job_options opts = GR_JOB_OPTIONS_INIT;
    gr_stats st = GR_STATS_INIT;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    const uint64_t wshape[2] = {n, n};
    const char *ins[2] = {"x", "W"};
    const void *consts[1];
    float *w, **x, *want;
    gr_tensor *t;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_status result;
    uint64_t wrong = 0;
    double t0, secs;

    cfg.backend = GR_BACKEND_AUTO;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--backend") == 0)
            cfg.backend = strcmp(argv[i + 1], "cuda") == 0 ? GR_BACKEND_CUDA : GR_BACKEND_HOST;
    cfg.budget_bytes = arg(argc, argv, "--budget", 4) << 20; /* the tensors: 8 MiB */
    pthread_key_create(&handle_key, NULL);

    def.name = "matmul_rows";
    def.doc = "out = x W^T, x rows of n floats, W an n x n constant";
    def.n_inputs = 2;
    def.small_inputs = 0x2; /* W: read whole */
    def.cpu = matmul_cpu;
    def.user = (void *)(uintptr_t)n;
    if (load_cublas()) {
        def.cuda_kind = GR_CUDA_STREAM;
        def.cuda = (const void *)matmul_launch;
    } else {
        printf("matmul_cublas: no cuBLAS here: the host backend's CPU version only\n");
    }
    if (gr_kernel_register(&def, &err) != GR_OK) {
        fprintf(stderr, "matmul_cublas: %s\n", err.message);
        return 1;
    }
    wdesc.fixed_elems = n * n;
    if (gr_graph_create(&g) != GR_OK || gr_graph_add_buffer(g, "x", 1, 1) != GR_OK ||
        gr_graph_add_buffer(g, "y", 1, 1) != GR_OK ||
        gr_graph_add_const(g, "W", &wdesc, 2, wshape) != GR_OK ||
        gr_graph_add_h2d(g, "load", 0, "x") != GR_OK ||
        gr_graph_add_kernel(g, "mm", "matmul_rows", ins, 2, "y", NULL, 0) != GR_OK ||
        gr_graph_add_d2h(g, "store", "y", 0) != GR_OK ||
        gr_graph_add_dep(g, "load", "mm") != GR_OK || gr_graph_add_dep(g, "mm", "store") != GR_OK ||
        gr_graph_finalize(g) != GR_OK) {
        gr_graph_error_get(g, &err); /* the refusal: its status, node and reason */
        fprintf(stderr, "matmul_cublas: graph: %s\n", err.message);
        return 1;
    }
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
        fprintf(stderr, "matmul_cublas: %s\n", err.message);
        return 1;
    }
    gr_runtime_info_get(rt, &info);
    if (info.backend == GR_BACKEND_CUDA &&
        !make_handles(info.device_count * info.workers_per_device)) {
        fprintf(stderr, "matmul_cublas: cublasCreate failed\n");
        return 1;
    }
    w = malloc(n * n * sizeof(float));
    x = calloc(count, sizeof(*x));
    t = calloc(count, sizeof(*t));
    want = malloc(elems * sizeof(float));
    if (w == NULL || x == NULL || t == NULL || want == NULL)
        return 1;
    for (uint64_t i = 0; i < n * n; i++)
        w[i] = (float)((int64_t)((i * 7919) % 2001) - 1000) / 1000.0f / (float)n;
    for (uint64_t i = 0; i < count; i++) {
        /* In place: each tensor's output over its input (the graph reads x before it writes
         * y's copy out). Pinned, so the copies run at the link's speed. */
        if (gr_host_alloc(elems * sizeof(float), (void **)&x[i]) != GR_OK)
            return 1;
        for (uint64_t j = 0; j < elems; j++)
            x[i][j] = (float)((int64_t)((i * 31 + j * 17) % 1001) - 500) / 500.0f;
        t[i].in[0] = t[i].out[0] = x[i];
        t[i].elems = elems;
    }
    consts[0] = w;
    opts.constants = consts;
    opts.n_constants = 1;
    t0 = now_s();
    if (gr_job_submit(rt, g, t, count, &opts, &job, &err) != GR_OK) {
        fprintf(stderr, "matmul_cublas: submit: %s\n", err.message);
        return 1;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &result);
    secs = now_s() - t0;
    if (result != GR_OK) {
        gr_job_error_get(job, &err);
        fprintf(stderr, "matmul_cublas: job: index %llu: %s\n", (unsigned long long)err.index,
                err.message);
        return 1;
    }
    printf("PASS ran %llu tensors of %llu x %llu on the %s backend\n",
           (unsigned long long)count, (unsigned long long)rows, (unsigned long long)n,
           gr_backend_name(info.backend));
    for (uint64_t i = 0; i < count; i++) {
        float *in = malloc(elems * sizeof(float));

        for (uint64_t j = 0; j < elems; j++)
            in[j] = (float)((int64_t)((i * 31 + j * 17) % 1001) - 500) / 500.0f;
        matmul_rows(in, w, want, rows, n);
        for (uint64_t j = 0; j < elems; j++)
            if (!(fabsf(x[i][j] - want[j]) <= 1e-4f * (fabsf(want[j]) + 1e-3f)))
                wrong++;
        free(in);
        gr_host_free(x[i]);
    }
    gr_runtime_stats_get(rt, 0, &st);
    printf("%s outputs: %llu wrong elements\n", wrong ? "FAIL" : "PASS",
           (unsigned long long)wrong);
    printf("%s W copied to the device %llu time(s), %llu bytes\n",
           st.constants_copied == 1 ? "PASS" : "FAIL", (unsigned long long)st.constants_copied,
           (unsigned long long)st.constant_bytes);
    printf("time %.3f s, %.2f GB/s in and out, budget peak %llu of %llu bytes\n", secs,
           2.0 * (double)count * (double)elems * sizeof(float) / secs / 1e9,
           (unsigned long long)st.budget_peak, (unsigned long long)st.budget_bytes);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    free(w);
    free(want);
    free(x);
    free(t);
    return wrong || st.constants_copied != 1 ? 1 : 0;
}

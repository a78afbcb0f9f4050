/*
 * fft_cufft.c - |rfft(x)| of every row of every tensor: cuFFT's real-to-complex transform,
 * then the magnitudes, per tensor, streamed through a device-memory budget smaller than the
 * data. The transform is an eager kernel (GR_CUDA_STREAM): called on the worker's thread for
 * every iteration with the iteration's stream, it makes its cuFFT plan on first use, which
 * no CUDA graph capture would allow. The magnitudes are a kernel in CUDA C that graphrun
 * compiles with NVRTC. cuFFT is loaded at run time (dlopen), as graphrun loads NVRTC: the
 * program starts, and runs on the host backend with the CPU versions, where there is no GPU
 * or no cuFFT. Builds against the installed library with any C compiler:
 *
 *     cc -std=c11 -o fft_cufft docs/examples/fft_cufft.c \
 *        $(pkg-config --cflags --libs graphrun) -ldl -lm -Wl,-rpath,$PREFIX/lib
 *     ./fft_cufft [--backend host|cuda] [--n N] [--rows R] [--count C] [--budget MIB]
 *
 * Each tensor is R rows of N floats; its output, R rows of N/2 + 1 magnitudes. Defaults:
 * N 1024, R 16, C 64 (4 MiB of tensors in, 2 MiB out), a budget of 2 MiB (the CUDA
 * backend's smallest: its allocation granule). Every output is checked against a plain
 * discrete Fourier transform in double (within 1e-4 of the row's largest magnitude: the FFT
 * sums in float, in another order). Prints PASS lines and the time; exits 0 when
 * every output was right.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <graphrun.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The few cuFFT entry points used, declared here so that no CUDA header is needed. */
typedef int (*cufft_plan_many_fn)(int *plan, int rank, int *n, int *inembed, int istride,
                                  int idist, int *onembed, int ostride, int odist, int type,
                                  int batch);
typedef int (*cufft_set_stream_fn)(int plan, void *stream);
typedef int (*cufft_exec_r2c_fn)(int plan, float *in, void *out);
enum { CUFFT_R2C = 0x2a };

static struct {
    cufft_plan_many_fn plan_many;
    cufft_set_stream_fn set_stream;
    cufft_exec_r2c_fn exec_r2c;
} cufft;

static int load_cufft(void)
{
    static const char *const names[] = {"libcufft.so.12", "libcufft.so.11", "libcufft.so"};
    void *lib = NULL;

    for (size_t i = 0; lib == NULL && i < sizeof(names) / sizeof(names[0]); i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return 0;
    cufft.plan_many = (cufft_plan_many_fn)dlsym(lib, "cufftPlanMany");
    cufft.set_stream = (cufft_set_stream_fn)dlsym(lib, "cufftSetStream");
    cufft.exec_r2c = (cufft_exec_r2c_fn)dlsym(lib, "cufftExecR2C");
    return cufft.plan_many && cufft.set_stream && cufft.exec_r2c;
}

/* A plan per worker thread (a plan is not to be run by two threads at once), for the one
 * shape of this program's tensors, made by the thread's first call. */
typedef struct shape {
    int n, rows;
} shape;

static pthread_key_t plan_key;

static int thread_plan(const shape *s, int *plan)
{
    int *p = pthread_getspecific(plan_key);

    if (p == NULL) {
        int n = s->n;

        p = malloc(sizeof(*p));
        if (p == NULL || cufft.plan_many(p, 1, &n, NULL, 1, n, NULL, 1, n / 2 + 1, CUFFT_R2C,
                                         s->rows) != 0) {
            free(p);
            return -1;
        }
        pthread_setspecific(plan_key, p);
    }
    *plan = *p;
    return 0;
}

/* The eager CUDA version of the transform: rows of n floats into rows of n/2 + 1 complex
 * values (interleaved re, im). */
static int rfft_stream(void *stream, const gr_kernel_args *a, void *user)
{
    int plan;

    if (thread_plan(user, &plan) != 0 || cufft.set_stream(plan, stream) != 0)
        return 1;
    return cufft.exec_r2c(plan, (float *)a->in[0], a->out) == 0 ? 0 : 2;
}

/* The CPU version, and the reference: a plain DFT in double. */
static void rfft_rows(const float *x, float *c, uint64_t rows, uint64_t n)
{
    const double two_pi = 6.283185307179586;

    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t k = 0; k <= n / 2; k++) {
            double re = 0, im = 0;

            for (uint64_t j = 0; j < n; j++) {
                double phase = two_pi * (double)((k * j) % n) / (double)n;

                re += x[r * n + j] * cos(phase);
                im -= x[r * n + j] * sin(phase);
            }
            c[r * (n + 2) + 2 * k] = (float)re;
            c[r * (n + 2) + 2 * k + 1] = (float)im;
        }
}

static void rfft_cpu(const gr_kernel_args *a, void *user)
{
    const shape *s = user;

    rfft_rows(a->in[0], a->out, (uint64_t)s->rows, (uint64_t)s->n);
}

static void magnitude_cpu(const gr_kernel_args *a, void *user)
{
    const float *c = a->in[0];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = hypotf(c[2 * i], c[2 * i + 1]);
}

static const char magnitude_cuda[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void magnitude(gr_kernel_args a)\n"
    "{\n"
    "    const float *c = GR_IN(a, 0, float);\n"
    "    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = hypotf(c[2 * i], c[2 * i + 1]);\n"
    "}\n";

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

static float input(uint64_t i, uint64_t j)
{
    return sinf(0.01f * (float)(j * (i + 1))) + (float)((int64_t)((i * 7 + j * 13) % 101) - 50) /
                                                    100.0f;
}

int main(int argc, char **argv)
{
    shape s = {(int)arg(argc, argv, "--n", 1024), (int)arg(argc, argv, "--rows", 16)};
    uint64_t n = (uint64_t)s.n, rows = (uint64_t)s.rows, count = arg(argc, argv, "--count", 64);
    uint64_t elems = n * rows, half = n / 2 + 1;
    gr_kernel_def fft = GR_KERNEL_DEF_INIT, mag = GR_KERNEL_DEF_INIT;
    gr_buffer_desc odesc = GR_BUFFER_DESC_INIT;
    gr_config cfg = GR_CONFIG_INIT;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    const char *x = "x", *c = "c";
    float **in, **out, *spec;
    gr_tensor *t;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_status result;
    uint64_t wrong = 0;
    double t0, secs;

    if (s.n < 2 || s.n % 2 != 0 || s.rows < 1) {
        fprintf(stderr, "fft_cufft: --n must be even and at least 2, --rows at least 1\n");
        return 2;
    }
    cfg.backend = GR_BACKEND_AUTO;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--backend") == 0)
            cfg.backend = strcmp(argv[i + 1], "cuda") == 0 ? GR_BACKEND_CUDA : GR_BACKEND_HOST;
    cfg.budget_bytes = arg(argc, argv, "--budget", 2) << 20;
    pthread_key_create(&plan_key, NULL);

    fft.name = "rfft_rows";
    fft.doc = "the real-to-complex transform of each row";
    fft.n_inputs = 1;
    fft.cpu = rfft_cpu;
    fft.user = &s;
    if (load_cufft()) {
        fft.cuda_kind = GR_CUDA_STREAM;
        fft.cuda = (const void *)rfft_stream;
    } else {
        printf("fft_cufft: no cuFFT here: the host backend's CPU version only\n");
    }
    mag.name = "magnitude";
    mag.doc = "out[i] = |c[i]|, c complex (interleaved)";
    mag.n_inputs = 1;
    mag.out_size = GR_OUT_BUFFER; /* as many as its (fixed) output buffer holds */
    mag.cpu = magnitude_cpu;
    mag.cuda_kind = GR_CUDA_SOURCE; /* without NVRTC it still registers, for the host */
    mag.cuda = magnitude_cuda;
    mag.cuda_name = "magnitude";
    if (gr_kernel_register(&fft, &err) != GR_OK || gr_kernel_register(&mag, &err) != GR_OK) {
        fprintf(stderr, "fft_cufft: %s\n", err.message);
        return 1;
    }
    /* The spectrum: (n + 2) / n of the tensor's floats, n/2 + 1 complex a row. The
     * magnitudes: a size of their own, fixed by this program's one shape. */
    odesc.fixed_elems = rows * half;
    if (gr_graph_create(&g) != GR_OK || gr_graph_add_buffer(g, "x", 1, 1) != GR_OK ||
        gr_graph_add_buffer(g, "c", (uint32_t)n + 2, (uint32_t)n) != GR_OK ||
        gr_graph_add_buffer_desc(g, "mag", &odesc) != GR_OK ||
        gr_graph_add_h2d(g, "load", 0, "x") != GR_OK ||
        gr_graph_add_kernel(g, "fft", "rfft_rows", &x, 1, "c", NULL, 0) != GR_OK ||
        gr_graph_add_kernel(g, "abs", "magnitude", &c, 1, "mag", NULL, 0) != GR_OK ||
        gr_graph_add_d2h(g, "store", "mag", 0) != GR_OK ||
        gr_graph_add_dep(g, "load", "fft") != GR_OK || gr_graph_add_dep(g, "fft", "abs") != GR_OK ||
        gr_graph_add_dep(g, "abs", "store") != GR_OK || gr_graph_finalize(g) != GR_OK) {
        gr_graph_error_get(g, &err); /* the refusal: its status, node and reason */
        fprintf(stderr, "fft_cufft: graph: %s\n", err.message);
        return 1;
    }
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
        fprintf(stderr, "fft_cufft: %s\n", err.message);
        return 1;
    }
    in = calloc(count, sizeof(*in));
    out = calloc(count, sizeof(*out));
    t = calloc(count, sizeof(*t));
    spec = malloc(rows * (n + 2) * sizeof(float));
    if (in == NULL || out == NULL || t == NULL || spec == NULL)
        return 1;
    for (uint64_t i = 0; i < count; i++) {
        if (gr_host_alloc(elems * sizeof(float), (void **)&in[i]) != GR_OK ||
            gr_host_alloc(rows * half * sizeof(float), (void **)&out[i]) != GR_OK)
            return 1;
        for (uint64_t j = 0; j < elems; j++)
            in[i][j] = input(i, j % n + j / n * 3);
        t[i].in[0] = in[i];
        t[i].out[0] = out[i];
        t[i].elems = elems;
    }
    t0 = now_s();
    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK) {
        fprintf(stderr, "fft_cufft: submit: %s\n", err.message);
        return 1;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &result);
    secs = now_s() - t0;
    if (result != GR_OK) {
        gr_job_error_get(job, &err);
        fprintf(stderr, "fft_cufft: job: index %llu, node '%s': %s\n",
                (unsigned long long)err.index, err.node, err.message);
        return 1;
    }
    gr_runtime_info_get(rt, &info);
    printf("PASS ran %llu tensors of %llu x %llu on the %s backend\n",
           (unsigned long long)count, (unsigned long long)rows, (unsigned long long)n,
           gr_backend_name(info.backend));
    for (uint64_t i = 0; i < count; i++) {
        rfft_rows(in[i], spec, rows, n);
        for (uint64_t r = 0; r < rows; r++) {
            float top = 0;

            for (uint64_t k = 0; k < half; k++)
                top = fmaxf(top, hypotf(spec[r * (n + 2) + 2 * k], spec[r * (n + 2) + 2 * k + 1]));
            for (uint64_t k = 0; k < half; k++) {
                float want = hypotf(spec[r * (n + 2) + 2 * k], spec[r * (n + 2) + 2 * k + 1]);

                if (!(fabsf(out[i][r * half + k] - want) <= 1e-4f * top))
                    wrong++;
            }
        }
        gr_host_free(in[i]);
        gr_host_free(out[i]);
    }
    printf("%s outputs: %llu wrong elements\n", wrong ? "FAIL" : "PASS",
           (unsigned long long)wrong);
    printf("time %.3f s, %.2f GB/s in\n", secs,
           (double)count * (double)elems * sizeof(float) / secs / 1e9);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    free(spec);
    free(in);
    free(out);
    free(t);
    return wrong ? 1 : 0;
}

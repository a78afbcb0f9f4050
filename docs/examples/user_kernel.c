/*
 * user_kernel.c - a kernel of one's own, registered from C: a CPU version for the host
 * backend, and the same computation in CUDA C that graphrun compiles with NVRTC for the
 * GPU. Builds against the installed library with any C compiler (no nvcc needed):
 *
 *     cc -std=c11 -o user_kernel docs/examples/user_kernel.c \
 *        $(pkg-config --cflags --libs graphrun) -lm -Wl,-rpath,$PREFIX/lib
 *     ./user_kernel [--backend host|cuda]
 *
 * The kernel, "softplus_scaled": out = s0 * log(1 + exp(x)), elementwise, so graphrun may
 * cut a large tensor into chunks and pack small ones into batches. A program that compiles
 * its own .cu with nvcc registers its __global__ function instead, as a cudaKernel_t from
 * cudaGetKernel (GR_CUDA_KERNEL: docs/API.md).
 *
 * Prints PASS lines for what it checked; exits 0 when every output was right.
 */
#include <graphrun.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CPU version: what the host backend runs, and this program's reference. */
static void softplus_cpu(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;
    float s = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = s * log1pf(expf(x[i]));
}

/* The CUDA version, compiled by NVRTC when the kernel is registered. */
static const char softplus_cuda[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void softplus_scaled(gr_kernel_args a)\n"
    "{\n"
    "    float s = a.s[0].f32;\n"
    "    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = s * log1pf(expf(GR_IN(a, 0, float)[i]));\n"
    "}\n";

int main(int argc, char **argv)
{
    enum { COUNT = 8 };
    gr_kernel_def def = GR_KERNEL_DEF_INIT;
    gr_config cfg = GR_CONFIG_INIT;
    const char *x = "x";
    const float scale = 0.5f;
    float *data[COUNT];
    gr_tensor t[COUNT];
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_status result;
    int wrong = 0;

    cfg.backend = argc == 3 && strcmp(argv[1], "--backend") == 0 && strcmp(argv[2], "cuda") == 0
                      ? GR_BACKEND_CUDA
                      : argc == 3 && strcmp(argv[2], "host") == 0 ? GR_BACKEND_HOST
                                                                   : GR_BACKEND_AUTO;
    def.name = "softplus_scaled";
    def.doc = "out = s0 * log(1 + exp(x))";
    def.n_inputs = 1;
    def.n_scalars = 1;
    def.elementwise = 1;
    def.cpu = softplus_cpu;
    def.cuda_kind = GR_CUDA_SOURCE;
    def.cuda = softplus_cuda;
    def.cuda_name = "softplus_scaled";
    /* Without NVRTC on this machine the kernel still registers, for the host backend. */
    if (gr_kernel_register(&def, &err) != GR_OK) {
        fprintf(stderr, "user_kernel: %s\n", err.message);
        return 1;
    }
    printf("PASS registered\n");

    if (gr_graph_create(&g) != GR_OK || gr_graph_add_buffer(g, "x", 1, 1) != GR_OK ||
        gr_graph_add_h2d(g, "load", 0, "x") != GR_OK ||
        gr_graph_add_kernel(g, "k", "softplus_scaled", &x, 1, "x", &scale, 1) != GR_OK ||
        gr_graph_add_d2h(g, "store", "x", 0) != GR_OK ||
        gr_graph_add_dep(g, "load", "k") != GR_OK || gr_graph_add_dep(g, "k", "store") != GR_OK ||
        gr_graph_finalize(g) != GR_OK) {
        gr_graph_error_get(g, &err); /* the refusal: its status, node and reason */
        fprintf(stderr, "user_kernel: graph: %s\n", err.message);
        return 1;
    }
    printf("PASS graph\n");

    cfg.budget_bytes = 8u << 20;
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
        fprintf(stderr, "user_kernel: %s\n", err.message);
        return 1;
    }
    memset(t, 0, sizeof(t));
    for (int i = 0; i < COUNT; i++) {
        uint64_t n = 1000 + (uint64_t)i * 500000; /* small ones batched, large ones chunked */

        if (gr_host_alloc(n * sizeof(float), (void **)&data[i]) != GR_OK)
            return 1;
        for (uint64_t j = 0; j < n; j++)
            data[i][j] = (float)((int64_t)(j % 2001) - 1000) / 100.0f; /* [-10, 10] */
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = n;
    }
    if (gr_job_submit(rt, g, t, COUNT, NULL, &job, &err) != GR_OK) {
        fprintf(stderr, "user_kernel: submit: %s\n", err.message);
        return 1;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &result);
    if (result != GR_OK) {
        gr_job_error_get(job, &err);
        fprintf(stderr, "user_kernel: job: index %llu: %s\n", (unsigned long long)err.index,
                err.message);
        return 1;
    }
    printf("PASS ran\n");
    for (int i = 0; i < COUNT; i++) {
        for (uint64_t j = 0; j < t[i].elems; j++) {
            float in = (float)((int64_t)(j % 2001) - 1000) / 100.0f;
            float want = scale * log1pf(expf(in));

            /* The GPU's expf and log1pf are within a few ulp of the C library's. */
            if (!(fabsf(data[i][j] - want) <= 4e-7f * fabsf(want) + 1e-37f))
                wrong++;
        }
        gr_host_free(data[i]);
    }
    printf("%s outputs: %d wrong elements\n", wrong ? "FAIL" : "PASS", wrong);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    return wrong ? 1 : 0;
}

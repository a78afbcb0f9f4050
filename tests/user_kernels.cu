/*
 * user_kernels.cu - the tests' user kernel in every form a CUDA implementation can take
 * (user_kernels.h).
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "tests/user_kernels.h"

extern "C" __global__ void gr_test_user_affine(gr_kernel_args a)
{
    const float *x = (const float *)a.in[0];
    float *out = (float *)a.out, s = a.s[0].f32;

    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (uint64_t)gridDim.x * blockDim.x)
        out[i] = __fadd_rn(__fmul_rn(x[i], s), 1.0f);
}

extern "C" float gr_test_user_ref(float x, float s)
{
    volatile float p = x * s; /* two roundings, as the kernels do */
    return p + 1.0f;
}

static void cpu_affine(const gr_kernel_args *a, void *user)
{
    const float *x = (const float *)a->in[0];
    float *out = (float *)a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = gr_test_user_ref(x[i], a->s[0].f32);
}

/* GR_CUDA_LAUNCH (captured) and GR_CUDA_STREAM (called for every iteration): its own
 * launch, with a grid of its own choosing. */
static int launch_affine(void *stream, const gr_kernel_args *a, void *user)
{
    uint64_t blocks = (a->n + 255) / 256;

    (void)user;
    gr_test_user_affine<<<(unsigned)(blocks < 2048 ? blocks : 2048), 256, 0,
                          (cudaStream_t)stream>>>(*a);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

static const char affine_source[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void affine_src(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a)\n"
    "    GR_OUT(a, float)[i] = __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], a.s[0].f32), 1.0f);\n"
    "}\n";

extern "C" const char *const gr_test_user_kernels[GR_TEST_USER_WAYS] = {
    "u_entry", "u_kernel", "u_function", "u_launch", "u_source", "u_stream",
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gr_status result;
static gr_error_info why;

static void register_all(void)
{
    cudaKernel_t kernel = NULL;
    cudaFunction_t function = NULL;
    cudaError_t e;

    if ((e = cudaGetKernel(&kernel, (const void *)gr_test_user_affine)) != cudaSuccess ||
        (e = cudaGetFuncBySymbol(&function, (const void *)gr_test_user_affine)) != cudaSuccess) {
        result = GR_ERR_CUDA;
        why.status = GR_ERR_CUDA;
        snprintf(why.message, sizeof(why.message), "cudaGetKernel/cudaGetFuncBySymbol: %s",
                 cudaGetErrorName(e));
        return;
    }
    for (int w = 0; w < GR_TEST_USER_WAYS; w++) {
        gr_kernel_def d = GR_KERNEL_DEF_INIT;

        d.name = gr_test_user_kernels[w];
        d.doc = "out = x * s0 + 1 (tests/user_kernels.cu)";
        d.n_inputs = 1;
        d.n_scalars = 1;
        d.elementwise = 1;
        d.cpu = cpu_affine;
        switch (w) {
        case 0:
            d.cuda_kind = GR_CUDA_ENTRY;
            d.cuda = (const void *)gr_test_user_affine;
            break;
        case 1:
            d.cuda_kind = GR_CUDA_KERNEL;
            d.cuda = (const void *)kernel;
            break;
        case 2:
            d.cuda_kind = GR_CUDA_FUNCTION;
            d.cuda = (const void *)function;
            break;
        case 3:
            d.cuda_kind = GR_CUDA_LAUNCH;
            d.cuda = (const void *)launch_affine;
            break;
        case 5:
            d.cuda_kind = GR_CUDA_STREAM;
            d.cuda = (const void *)launch_affine;
            break;
        default:
            d.cuda_kind = GR_CUDA_SOURCE;
            d.cuda = affine_source;
            d.cuda_name = "affine_src";
            break;
        }
        if ((result = gr_kernel_register(&d, &why)) != GR_OK)
            return;
    }
}

extern "C" gr_status gr_test_register_user_kernels(gr_error_info *err)
{
    pthread_once(&once, register_all);
    if (result != GR_OK && err != NULL)
        *err = why;
    return result;
}

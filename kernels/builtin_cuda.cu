/*
 * builtin_cuda.cu - CUDA versions of the built-in kernels (builtin.h), each a
 * `__global__ void f(gr_kernel_args)` as the registry's GR_CUDA_ENTRY expects.
 *
 * Each is a grid-stride loop over [0, n), so any grid covers any n (the launch rule of
 * graphrun.h). Arithmetic uses the _rn intrinsics so nvcc cannot contract x * a + b into one
 * FMA: the results then equal the CPU versions bit for bit (sqrtf is correctly rounded with
 * nvcc's default -prec-sqrt=true).
 */
#include "kernels/builtin.h"
#include "kernels/kernels.h"

#define GRID_STRIDE_LOOP(i, n)                                                              \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n);             \
         i += (uint64_t)gridDim.x * blockDim.x)

#define IN(a, k) ((const float *)(a).in[k])
#define OUT(a) ((float *)(a).out)

__device__ static inline float pow_scalar(float x, float e)
{
    if (e == 0.5f)
        return sqrtf(x);
    if (e == 1.0f)
        return x;
    if (e == 2.0f)
        return __fmul_rn(x, x);
    return powf(x, e);
}

extern "C" __global__ void gr__cuda_mul(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = __fmul_rn(IN(a, 0)[i], a.s[0].f32);
}

extern "C" __global__ void gr__cuda_add(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = __fadd_rn(IN(a, 0)[i], a.s[0].f32);
}

extern "C" __global__ void gr__cuda_pow(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = pow_scalar(IN(a, 0)[i], a.s[0].f32);
}

extern "C" __global__ void gr__cuda_axpby(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n)
    OUT(a)[i] = __fadd_rn(__fmul_rn(a.s[0].f32, IN(a, 0)[i]), __fmul_rn(a.s[1].f32, IN(a, 1)[i]));
}

extern "C" __global__ void gr__cuda_seed(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n)
    {
        float x = IN(a, 0)[i];
#pragma unroll
        for (int r = 0; r < GR_SEED_ROUNDS; r++)
            x = sqrtf(__fadd_rn(__fmul_rn(x, GR_SEED_MUL), GR_SEED_ADD));
        OUT(a)[i] = x;
    }
}

#define UNARY_CUDA(name, expr)                                                              \
    extern "C" __global__ void gr__cuda_##name(gr_kernel_args a)                             \
    {                                                                                       \
        GRID_STRIDE_LOOP(i, a.n)                                                            \
        {                                                                                   \
            float x = IN(a, 0)[i];                                                          \
            OUT(a)[i] = (expr);                                                             \
        }                                                                                   \
    }

/* Exact operations are written with the _rn intrinsics (no contraction), so they equal the
 * CPU's bit for bit; expf, logf and tanhf are CUDA's, within 2 ulp of the CPU's. */
UNARY_CUDA(sub, __fsub_rn(x, a.s[0].f32))
UNARY_CUDA(div, __fdiv_rn(x, a.s[0].f32))
UNARY_CUDA(exp, expf(x))
UNARY_CUDA(log, logf(x))
UNARY_CUDA(tanh, tanhf(x))
UNARY_CUDA(sigmoid, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))))
UNARY_CUDA(clamp, fminf(fmaxf(x, a.s[0].f32), a.s[1].f32))

extern "C" __global__ void gr__cuda_mul2(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = __fmul_rn(IN(a, 0)[i], IN(a, 1)[i]);
}

extern "C" __global__ void gr__cuda_add2(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = __fadd_rn(IN(a, 0)[i], IN(a, 1)[i]);
}

/* A block's reduction of one value per thread (blockDim.x a power of two, at most 1024):
 * every thread gets the result. */
template <typename T, typename Op> __device__ static T block_reduce(T v, Op op)
{
    __shared__ T part[1024];

    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] = op(part[threadIdx.x], part[threadIdx.x + half]);
        __syncthreads();
    }
    v = part[0];
    __syncthreads(); /* before the next reduction reuses `part` */
    return v;
}

struct max_op {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct sum_op {
    __device__ double operator()(double a, double b) const { return a + b; }
};

/* One block per row (a grid-stride loop over rows): the row's max, the sum of exp(x - max)
 * in double, then each element. The same arithmetic as the CPU version but for the order
 * of the sum and CUDA's expf: within a few ulp of it. */
extern "C" __global__ void gr__cuda_softmax(gr_kernel_args a)
{
    uint64_t len = a.rank ? a.shape[a.rank - 1] : a.in_n[0], rows = a.n / len;

    for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *row = IN(a, 0) + r * len;
        float *o = OUT(a) + r * len, m = -INFINITY;
        double sum = 0.0;

        for (uint64_t j = threadIdx.x; j < len; j += blockDim.x)
            m = fmaxf(m, row[j]);
        m = block_reduce(m, max_op());
        for (uint64_t j = threadIdx.x; j < len; j += blockDim.x)
            sum += (double)expf(__fsub_rn(row[j], m));
        sum = block_reduce(sum, sum_op());
        for (uint64_t j = threadIdx.x; j < len; j += blockDim.x)
            o[j] = (float)((double)expf(__fsub_rn(row[j], m)) / sum);
    }
}

/* The whole tensor into out[0], in double, by one block (the definition caps the grid at
 * one), so the result is the same from run to run. */
extern "C" __global__ void gr__cuda_sum(gr_kernel_args a)
{
    double sum = 0.0;

    for (uint64_t i = threadIdx.x; i < a.in_n[0]; i += blockDim.x)
        sum += (double)IN(a, 0)[i];
    sum = block_reduce(sum, sum_op());
    if (threadIdx.x == 0)
        OUT(a)[0] = (float)sum;
}

extern "C" __global__ void gr__cuda_normalize(gr_kernel_args a)
{
    uint64_t cm = a.in_n[1], cs = a.in_n[2];

    /* One 64-bit remainder per element where the two vectors are as long (the usual case):
     * the division is most of this kernel's instructions. */
    GRID_STRIDE_LOOP(i, a.n)
    {
        uint64_t c = i % cm;

        OUT(a)[i] = __fdiv_rn(__fsub_rn(IN(a, 0)[i], IN(a, 1)[c]), IN(a, 2)[cs == cm ? c : i % cs]);
    }
}

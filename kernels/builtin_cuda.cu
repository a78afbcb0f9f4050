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

extern "C" __global__ void gr_cuda_mul(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = __fmul_rn(IN(a, 0)[i], a.s[0].f32);
}

extern "C" __global__ void gr_cuda_add(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = __fadd_rn(IN(a, 0)[i], a.s[0].f32);
}

extern "C" __global__ void gr_cuda_pow(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) OUT(a)[i] = pow_scalar(IN(a, 0)[i], a.s[0].f32);
}

extern "C" __global__ void gr_cuda_axpby(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n)
    OUT(a)[i] = __fadd_rn(__fmul_rn(a.s[0].f32, IN(a, 0)[i]), __fmul_rn(a.s[1].f32, IN(a, 1)[i]));
}

extern "C" __global__ void gr_cuda_seed(gr_kernel_args a)
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

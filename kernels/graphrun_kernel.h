/*
 * graphrun_kernel.h - what CUDA C source compiled by graphrun's NVRTC path sees: the
 * argument block every kernel gets (graphrun.h: gr_kernel_args, with the same layout, which
 * tests/nvrtc_test.c checks field by field) and a grid-stride loop.
 *
 * NVRTC has no standard headers, so this names only built-in types. A kernel file includes
 * it as "graphrun_kernel.h" and defines `extern "C" __global__ void NAME(gr_kernel_args a)`:
 *
 *     #include "graphrun_kernel.h"
 *     // graphrun: kernel scale inputs=1 scalars=1 elementwise
 *     extern "C" __global__ void scale(gr_kernel_args a)
 *     {
 *         GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = GR_IN(a, 0, float)[i] * a.s[0].f32;
 *     }
 */
#ifndef GRAPHRUN_KERNEL_H
#define GRAPHRUN_KERNEL_H

/* graphrun's own CUDA files have gr_kernel_args from graphrun.h and take only the
 * conversions below. */
#ifndef GR_KERNEL_HEADER_CONVERSIONS_ONLY
#define GR_MAX_KERNEL_INPUTS 4
#define GR_MAX_SCALARS 8
#define GR_MAX_DIMS 4

typedef union gr_scalar {
    float f32;
    double f64;
    int i32;
    long long i64;
} gr_scalar;

typedef struct gr_kernel_args {
    void *out;
    const void *in[GR_MAX_KERNEL_INPUTS];
    unsigned long long n;
    unsigned long long in_n[GR_MAX_KERNEL_INPUTS];
    gr_scalar s[GR_MAX_SCALARS];
    unsigned long long shape[GR_MAX_DIMS];
    unsigned int rank;
    unsigned int reserved_;
} gr_kernel_args;

/* Every i in [0, a.n), whatever the grid (the launch rule gives no other promise). */
#define GR_FOR_EACH(i, a)                                                                   \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;  \
         i < (a).n; i += (unsigned long long)gridDim.x * blockDim.x)

/* The output, and input k, as arrays of `type`. */
#define GR_OUT(a, type) ((type *)(a).out)
#define GR_IN(a, k, type) ((const type *)(a).in[k])
#endif /* GR_KERNEL_HEADER_CONVERSIONS_ONLY */

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/*
 * Conversions between element types, bit for bit what graphrun's CPU versions compute
 * (kernels/dtype.h has the rules): float16 and bfloat16 are unsigned short bit patterns;
 * to them, round to nearest even from float32, a NaN becoming 0x7fff; from them, exact
 * (a float16 NaN becomes a quiet one with its payload); a float to an integer rounds toward
 * zero and
 * saturates, NaN giving 0.
 */
static __device__ __forceinline__ float gr_f16_to_f32(unsigned short h)
{
    float f;

    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) /* quiet, the payload kept */
        return __uint_as_float(((unsigned)(h & 0x8000u) << 16) | 0x7fc00000u |
                               ((unsigned)(h & 0x3ffu) << 13));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

static __device__ __forceinline__ unsigned short gr_f32_to_f16(float f)
{
    unsigned short h;

    if (f != f)
        return 0x7fff;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

static __device__ __forceinline__ float gr_bf16_to_f32(unsigned short h)
{
    return __uint_as_float((unsigned)h << 16);
}

static __device__ __forceinline__ unsigned short gr_f32_to_bf16(float f)
{
    unsigned u = __float_as_uint(f);

    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fff;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

static __device__ __forceinline__ int gr_f64_to_i32(double d)
{
    if (d != d)
        return 0;
    if (d >= 2147483647.0)
        return 2147483647;
    if (d <= -2147483648.0)
        return -2147483647 - 1;
    return (int)d;
}

static __device__ __forceinline__ unsigned char gr_f64_to_u8(double d)
{
    if (d != d || d <= 0)
        return 0;
    if (d >= 255.0)
        return 255;
    return (unsigned char)d;
}
#endif /* CUDA */

#endif /* GRAPHRUN_KERNEL_H */

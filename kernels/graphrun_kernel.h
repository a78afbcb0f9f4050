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

#endif /* GRAPHRUN_KERNEL_H */

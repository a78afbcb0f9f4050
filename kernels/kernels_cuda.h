/*
 * kernels_cuda.h - the CUDA versions of the built-in kernels, for the CUDA backend.
 */
#ifndef GR_KERNELS_CUDA_H
#define GR_KERNELS_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* The __global__ entry of the kernel called `name` (for cudaKernelNodeParams.func), or
 * NULL. Every entry takes one gr_kargs by value. Any thread. */
const void *gr_cuda_kernel_entry(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_CUDA_H */

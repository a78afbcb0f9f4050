/* Host API of smoke_cuda.cu (C-callable). */
#ifndef TOOLS_BAZEL_SMOKE_SMOKE_CUDA_H
#define TOOLS_BAZEL_SMOKE_SMOKE_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices, or -1 if the runtime reports an error
 * (no driver / no device). */
int smoke_cuda_device_count(void);

/* The cudaError_t of the last smoke_cuda_device_count() call. */
int smoke_cuda_last_error(void);

/* Runs a one-thread kernel computing x + 1 on device 0.
 * Returns the result, or -1 on any CUDA error. */
int smoke_cuda_add_one(int x);

#ifdef __cplusplus
}
#endif

#endif

// Smoke test for //tools/bazel:cuda.bzl: one kernel plus C-callable host code.
#include <cuda_runtime.h>

#include "tools/bazel/smoke/smoke_cuda.h"
#include "tools/bazel/smoke/smoke_defs.h"

__global__ void smoke_add_one_kernel(const int *in, int *out) { *out = *in + SMOKE_INCREMENT; }

static int last_error;

extern "C" int smoke_cuda_device_count(void) {
  int n = 0;
  last_error = cudaGetDeviceCount(&n);
  return last_error == cudaSuccess ? n : -1;
}

extern "C" int smoke_cuda_last_error(void) { return last_error; }

extern "C" int smoke_cuda_add_one(int x) {
  int *d = nullptr;
  int result = -1;
  if (cudaMalloc(&d, 2 * sizeof(int)) != cudaSuccess) return -1;
  if (cudaMemcpy(d, &x, sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess) {
    smoke_add_one_kernel<<<1, 1>>>(d, d + 1);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpy(&result, d + 1, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
      result = -1;
  }
  cudaFree(d);
  return result;
}

// probe_common.h - what the probes share (unit_chain.cu, zero_copy.cu, pin_cost.cu): a clock,
// a checked CUDA call, the seed-like kernel the link probes' units run (2x + 1), and the
// bidirectional ceiling their ratios are against. Header-only: each probe is one nvcc command (tools/gpu_suite build).
#ifndef GR_PROBE_COMMON_H
#define GR_PROBE_COMMON_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

// A CUDA call that must succeed: the probe says which and exits 1 otherwise.
#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

__global__ void twice_plus_one(float *x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = 2.0f * x[i] + 1.0f;
}

// Both ways at once, one large copy each on two streams: the ceiling the ratio is against.
static double bidir_gbs() {
  const size_t bytes = 256u << 20;
  void *h_in, *h_out, *d_in, *d_out;
  cudaHostAlloc(&h_in, bytes, cudaHostAllocPortable);
  cudaHostAlloc(&h_out, bytes, cudaHostAllocPortable);
  cudaMalloc(&d_in, bytes);
  cudaMalloc(&d_out, bytes);
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  std::vector<double> gbs;
  for (int k = 0; k < 6; k++) {
    double t0 = now_s();
    cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, a);
    cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, b);
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    if (k > 0) gbs.push_back(2.0 * bytes / (now_s() - t0) / 1e9);
  }
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFreeHost(h_in);
  cudaFreeHost(h_out);
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

#endif // GR_PROBE_COMMON_H

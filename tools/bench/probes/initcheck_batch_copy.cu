// initcheck_batch_copy.cu - does compute-sanitizer's initcheck see device memory written by
// cudaMemcpyBatchAsync? One pinned buffer copied in (by cudaMemcpyAsync, or in 8 ranges by
// cudaMemcpyBatchAsync), doubled by a kernel, copied out and checked.
//   nvcc -O2 -arch=sm_90 -o probe initcheck_batch_copy.cu
//   compute-sanitizer --tool initcheck ./probe memcpy   # 0 errors
//   compute-sanitizer --tool initcheck ./probe batch    # on the H200, CUDA 13.0: 65,536
// (every element "uninitialized", the output right): initcheck does not track the batched
// copies, so tools/gpu_suite sanitize runs initcheck with GR_BATCH_COPIES=0.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
__global__ void twice(const float *in, float *out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * in[i];
}
int main(int argc, char **argv) {
  const size_t n = 1 << 16, k = 8, each = n / k;
  bool batch = argc > 1 && strcmp(argv[1], "batch") == 0;
  float *h, *d_in, *d_out; cudaStream_t s;
  cudaStreamCreate(&s);
  cudaHostAlloc((void **)&h, n * sizeof(float), cudaHostAllocPortable);
  for (size_t i = 0; i < n; i++) h[i] = (float)i;
  cudaMalloc(&d_in, n * sizeof(float)); cudaMalloc(&d_out, n * sizeof(float));
  cudaError_t e;
  if (batch) {
    void *dst[k]; const void *src[k]; size_t sz[k];
    for (size_t j = 0; j < k; j++) { dst[j] = d_in + j * each; src[j] = h + j * each; sz[j] = each * sizeof(float); }
    cudaMemcpyAttributes attr; memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream; size_t first = 0;
    e = cudaMemcpyBatchAsync(dst, src, sz, k, &attr, &first, 1, s);
  } else {
    e = cudaMemcpyAsync(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice, s);
  }
  twice<<<(n + 255) / 256, 256, 0, s>>>(d_in, d_out, n);
  cudaMemcpyAsync(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaError_t e2 = cudaStreamSynchronize(s);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += h[i] != 2.0f * (float)i;
  printf("%s: copy %s, sync %s, %zu wrong\n", batch ? "batch" : "memcpy", cudaGetErrorName(e), cudaGetErrorName(e2), bad);
  return bad != 0 || e != cudaSuccess;
}

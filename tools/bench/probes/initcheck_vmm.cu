// initcheck_vmm.cu - does compute-sanitizer's initcheck see device memory that a copy wrote
// when the memory comes from the virtual memory API (cuMemCreate + cuMemMap, as the arena of
// private worker contexts does), or when the work runs in a private context (cuCtxCreate)?
// One pinned buffer copied in, doubled by a kernel, copied out and checked, in four modes:
//   malloc        cudaMalloc in the primary context (the control)
//   vmm           cuMemCreate + cuMemMap in the primary context
//   private       cudaMalloc in a context of its own (cuCtxCreate)
//   private_vmm   cuMemCreate + cuMemMap, the work in a context of its own (graphrun's
//                 --contexts private)
//   nvcc -O2 -arch=sm_90 -o probe initcheck_vmm.cu -lcuda
//   compute-sanitizer --tool initcheck ./probe MODE
// A mode that prints "0 wrong" under the tool and still has errors reported shows the tool's
// blind spot: the output proves every element was written before the kernel read it.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void twice(const float *in, float *out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * in[i];
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    CUresult r_ = (call);                                                                \
    if (r_ != CUDA_SUCCESS) {                                                            \
      const char *s_ = "?";                                                              \
      cuGetErrorName(r_, &s_);                                                           \
      printf("%s: %s\n", #call, s_);                                                     \
      return 2;                                                                          \
    }                                                                                    \
  } while (0)

// Two buffers of `bytes` each from the virtual memory API, mapped for device 0.
static int vmm_alloc(size_t bytes, CUdeviceptr *a, CUdeviceptr *b) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t size = (2 * bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CUdeviceptr p;
  CHECK(cuMemCreate(&h, size, &prop, 0));
  CHECK(cuMemAddressReserve(&p, size, 0, 0, 0));
  CHECK(cuMemMap(p, size, 0, h, 0));
  CUmemAccessDesc access;
  memset(&access, 0, sizeof(access));
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(p, size, &access, 1));
  *a = p;
  *b = p + bytes;
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "malloc";
  bool vmm = strcmp(mode, "vmm") == 0 || strcmp(mode, "private_vmm") == 0;
  bool priv = strncmp(mode, "private", 7) == 0;
  if (!vmm && !priv && strcmp(mode, "malloc") != 0) {
    printf("usage: %s malloc|vmm|private|private_vmm\n", argv[0]);
    return 2;
  }
  const size_t n = 1 << 16, bytes = n * sizeof(float);
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  cudaFree(0); // the primary context, current on this thread
  if (priv) {
    CUcontext ctx;
#if CUDA_VERSION >= 12050
    CHECK(cuCtxCreate(&ctx, NULL, CU_CTX_SCHED_BLOCKING_SYNC, dev));
#else
    CHECK(cuCtxCreate(&ctx, CU_CTX_SCHED_BLOCKING_SYNC, dev));
#endif
  }
  float *h, *d_in, *d_out;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaHostAlloc((void **)&h, bytes, cudaHostAllocPortable);
  for (size_t i = 0; i < n; i++) h[i] = (float)i;
  if (vmm) {
    CUdeviceptr a, b;
    if (vmm_alloc(bytes, &a, &b) != 0) return 2;
    d_in = (float *)a;
    d_out = (float *)b;
  } else {
    cudaMalloc(&d_in, bytes);
    cudaMalloc(&d_out, bytes);
  }
  cudaError_t e = cudaMemcpyAsync(d_in, h, bytes, cudaMemcpyHostToDevice, s);
  twice<<<(n + 255) / 256, 256, 0, s>>>(d_in, d_out, n);
  cudaMemcpyAsync(h, d_out, bytes, cudaMemcpyDeviceToHost, s);
  cudaError_t e2 = cudaStreamSynchronize(s);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += h[i] != 2.0f * (float)i;
  printf("%s: copy %s, sync %s, %zu wrong\n", mode, cudaGetErrorName(e), cudaGetErrorName(e2),
         bad);
  return bad != 0 || e != cudaSuccess || e2 != cudaSuccess;
}

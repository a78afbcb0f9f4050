// graph_update_contexts.cu - which memcpy-node updates does the driver refuse once a worker
// has a private context, and does destroying a context free pinned memory made under it?
// docs: cudaGraphExecMemcpyNodeSetParams1D wants src and dst "allocated from the same
// contexts as the original"; which memory counts as whose is not said. The runtime's
// private-context cases showed refused updates under memcheck (docs/RELIABILITY.md).
//   nvcc -O2 -arch=sm_90 -o probe graph_update_contexts.cu -lcuda
//   ./probe        # one line per case: what the graph was made with, the update, the result
// An update that is taken is launched and its destination checked byte for byte (each
// buffer holds a value of its own); the probe exits 1 when one copies wrong.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <csetjmp>
#include <csignal>

static const size_t BYTES = 4 << 20;
static int wrong_copies;
static sigjmp_buf jump;
static void on_segv(int) { siglongjmp(jump, 1); }

// Pinned memory under the current context (none: the primary one), every byte `value`.
static void *pinned_here(const char *what, int value) {
  void *p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, BYTES, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    printf("cudaHostAlloc (%s): %s\n", what, cudaGetErrorName(e));
    exit(1);
  }
  memset(p, value, BYTES);
  return p;
}

// Device memory through the virtual memory API, as the runtime's private mode has it, every
// byte `value`.
static CUdeviceptr vmm(CUdevice dev, int value) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  size_t size = (BYTES + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CUdeviceptr p = 0;
  if (cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS ||
      cuMemAddressReserve(&p, size, 0, 0, 0) || cuMemMap(p, size, 0, h, 0)) {
    printf("vmm failed\n");
    exit(1);
  }
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  cuMemSetAccess(p, size, &acc, 1);
  cudaMemset((void *)p, value, BYTES);
  cudaDeviceSynchronize();
  return p;
}

// In the current context: a graph of one copy node from src0 to dst0 (`bytes0`), then
// updated to (src1, dst1, `bytes1`); the update's result.
static void try_update_sized(const char *name, void *dst0, const void *src0, size_t bytes0,
                             void *dst1, const void *src1, size_t bytes1) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  cudaGraphNode_t n;
  cudaGraphCreate(&g, 0);
  cudaError_t e = cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, dst0, src0, bytes0,
                                           cudaMemcpyDefault);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
  if (e != cudaSuccess) {
    printf("%-48s build: %s\n", name, cudaGetErrorName(e));
    cudaGetLastError();
    return;
  }
  e = cudaGraphExecMemcpyNodeSetParams1D(x, n, dst1, src1, bytes1, cudaMemcpyDefault);
  cudaGetLastError();
  const char *copied = "";
  if (e == cudaSuccess) { // launched: dst1 must now hold src1's value, all bytes1 of it
    static unsigned char zero[BYTES], got[BYTES];
    unsigned char want = 0;
    cudaMemcpy(&want, src1, 1, cudaMemcpyDefault);
    cudaMemcpy(dst1, zero, bytes1, cudaMemcpyDefault);
    cudaError_t l = cudaGraphLaunch(x, 0);
    if (l == cudaSuccess) l = cudaStreamSynchronize(0);
    cudaMemcpy(got, dst1, bytes1, cudaMemcpyDefault);
    size_t bad = 0;
    for (size_t i = 0; i < bytes1; i++) bad += got[i] != want;
    copied = l != cudaSuccess ? " (launch failed)" : bad ? " (copied WRONG)" : " (copied right)";
    wrong_copies += l != cudaSuccess || bad != 0;
  }
  printf("%-48s update: %s%s\n", name, cudaGetErrorName(e), copied);
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
}

static void try_update(const char *name, void *dst0, const void *src0, void *dst1,
                       const void *src1) {
  try_update_sized(name, dst0, src0, 65536, dst1, src1, 65536);
}

int main() {
  CUdevice dev;
  CUcontext x, y, z;
  cuInit(0);
  cuDeviceGet(&dev, 0);
  // Memory made on a thread with no current context: the runtime API's primary context.
  void *prim_a = pinned_here("primary a", 0x11), *prim_b = pinned_here("primary b", 0x12);
  void *pageable = aligned_alloc(4096, BYTES);
  memset(pageable, 0x13, BYTES);
  cuCtxCreate(&y, nullptr, 0, dev);
  void *y_a = pinned_here("private y", 0x14);
  cuCtxCreate(&x, nullptr, 0, dev); // current from here on: the "worker"
  void *x_a = pinned_here("private x a", 0x15), *x_b = pinned_here("private x b", 0x16);
  CUdeviceptr v0 = vmm(dev, 0x21), v1 = vmm(dev, 0x22), m0 = 0;
  cuMemAlloc(&m0, BYTES);
  cudaMemset((void *)m0, 0x23, BYTES);
  cudaDeviceSynchronize();
  void *d0 = (void *)v0, *d1 = (void *)v1, *dm = (void *)m0;

  try_update("primary a -> primary a+64K (vmm same)", d0, prim_a, d0, (char *)prim_a + 65536);
  try_update("primary a -> primary b", d0, prim_a, d0, prim_b);
  try_update("primary a -> private x a", d0, prim_a, d0, x_a);
  try_update("private x a -> private x b", d0, x_a, d0, x_b);
  try_update("private x a -> private y", d0, x_a, d0, y_a);
  try_update("private x a -> primary a", d0, x_a, d0, prim_a);
  try_update("primary a -> private y", d0, prim_a, d0, y_a);
  try_update("primary a -> pageable", d0, prim_a, d0, pageable);
  try_update("pageable -> primary a", d0, pageable, d0, prim_a);
  try_update("vmm 0 -> vmm 0+64K (primary a)", d0, prim_a, (char *)d0 + 65536, prim_a);
  try_update("vmm 0 -> vmm 1 (primary a)", d0, prim_a, d1, prim_a);
  try_update("vmm 0 -> cuMemAlloc of x (primary a)", d0, prim_a, dm, prim_a);
  // Device to host, as a unit's copies out: the host side moves.
  try_update("D2H: vmm -> primary a, then primary b", prim_a, d0, prim_b, d0);
  try_update("D2H: vmm -> primary a, then a+64K", prim_a, d0, (char *)prim_a + 65536, d0);
  try_update("D2H: vmm -> private x a, then primary a", x_a, d0, prim_a, d0);
  // Sizes change between a tensor's chunks and between tensors.
  try_update_sized("H2D: primary a 64K, then primary b 32K", d0, prim_a, 65536, d0, prim_b,
                   32768);
  try_update_sized("D2H: primary a 64K, then primary b 1M", prim_a, d0, 65536, prim_b, d0,
                   1 << 20);

  // Destroying a context: is pinned memory made under it still there?
  cuCtxCreate(&z, nullptr, 0, dev);
  char *z_a = (char *)pinned_here("private z", 0x17);
  cuCtxDestroy(z);
  cuCtxSetCurrent(x);
  cudaPointerAttributes at;
  cudaError_t e = cudaPointerGetAttributes(&at, z_a);
  printf("after destroying z: cudaPointerGetAttributes %s, type %d (0 unregistered, 1 host)\n",
         cudaGetErrorName(e), e == cudaSuccess ? (int)at.type : -1);
  cudaGetLastError();
  // (Not in a forked child: pinned memory is not inherited across fork.)
  signal(SIGSEGV, on_segv);
  signal(SIGBUS, on_segv);
  bool faulted = sigsetjmp(jump, 1) != 0;
  if (!faulted) { volatile char c = z_a[0]; (void)c; }
  printf("after destroying z: reading its pinned memory %s\n",
         faulted ? "faults (freed with the context)" : "works (still mapped)");
  if (wrong_copies) printf("%d updates taken but copied wrong\n", wrong_copies);
  return wrong_copies != 0;
}

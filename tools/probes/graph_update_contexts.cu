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
#include <pthread.h>

static const size_t BYTES = 4 << 20, BIG = 40000076; // BIG: cuda_test's private_contexts
static int wrong_copies;
static sigjmp_buf jump;
static void on_segv(int) { siglongjmp(jump, 1); }

// Pinned memory under the current context (none: the primary one), every byte `value`.
static void *pinned_sized(const char *what, int value, size_t bytes) {
  void *p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    printf("cudaHostAlloc (%s): %s\n", what, cudaGetErrorName(e));
    exit(1);
  }
  memset(p, value, bytes);
  return p;
}

static void *pinned_here(const char *what, int value) { return pinned_sized(what, value, BYTES); }

// `bytes` of device memory through the virtual memory API alone (created, reserved, mapped,
// readable and writable by the device), as the runtime's private mode has its region; 0 when
// the driver refuses.
static CUdeviceptr vmm_map(CUdevice dev, size_t bytes) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  size_t size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CUdeviceptr p = 0;
  if (cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS ||
      cuMemAddressReserve(&p, size, 0, 0, 0) || cuMemMap(p, size, 0, h, 0))
    return 0;
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  cuMemSetAccess(p, size, &acc, 1);
  return p;
}

// Device memory through the virtual memory API, mapped in the current context, every byte
// `value`.
static CUdeviceptr vmm(CUdevice dev, int value, size_t bytes = BYTES) {
  CUdeviceptr p = vmm_map(dev, bytes);
  if (p == 0) {
    printf("vmm failed\n");
    exit(1);
  }
  cudaMemset((void *)p, value, bytes);
  cudaDeviceSynchronize();
  return p;
}

// In the current context: a graph of one copy node from src0 to dst0 (`bytes0`), then
// updated to (src1, dst1, `bytes1`); the update's result.
static cudaMemcpyKind kind = cudaMemcpyDefault; // of the nodes try_update_sized makes

static void try_update_sized(const char *name, void *dst0, const void *src0, size_t bytes0,
                             void *dst1, const void *src1, size_t bytes1) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  cudaGraphNode_t n;
  cudaGraphCreate(&g, 0);
  cudaError_t e = cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, dst0, src0, bytes0, kind);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
  if (e != cudaSuccess) {
    printf("%-48s build: %s\n", name, cudaGetErrorName(e));
    cudaGetLastError();
    return;
  }
  e = cudaGraphExecMemcpyNodeSetParams1D(x, n, dst1, src1, bytes1, kind);
  cudaGetLastError();
  const char *copied = "";
  if (e == cudaSuccess) { // launched: dst1 must now hold src1's value, all bytes1 of it
    // The reference is src1 as it is now, all of it: earlier cases copied into the device
    // buffers, so a source need not hold one value throughout.
    unsigned char *want = (unsigned char *)calloc(2, bytes1), *got = want + bytes1;
    cudaMemcpy(want, src1, bytes1, cudaMemcpyDefault);
    cudaMemcpy(dst1, got, bytes1, cudaMemcpyDefault); // zeros
    cudaError_t l = cudaGraphLaunch(x, 0);
    if (l == cudaSuccess) l = cudaStreamSynchronize(0);
    cudaMemcpy(got, dst1, bytes1, cudaMemcpyDefault);
    size_t bad = 0;
    for (size_t i = 0; i < bytes1; i++) bad += got[i] != want[i];
    free(want);
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

__global__ void add_one(unsigned char *d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    d[i] += 1;
}

// As the runtime lowers a unit: copy in, a kernel, copy out, in the current context; then
// both copies moved to other host buffers (in from b, out to out_b). Checks out_b = b + 1.
static void try_update_unit(const char *name, unsigned char *d, const void *a, void *out_a,
                            const void *b, void *out_b, size_t bytes) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  cudaGraphNode_t in, k, out;
  size_t n = bytes;
  void *args[] = {&d, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)add_one;
  kp.gridDim = dim3(132);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  cudaGraphCreate(&g, 0);
  cudaError_t e = cudaGraphAddMemcpyNode1D(&in, g, nullptr, 0, d, a, bytes, cudaMemcpyDefault);
  if (e == cudaSuccess) e = cudaGraphAddKernelNode(&k, g, &in, 1, &kp);
  if (e == cudaSuccess)
    e = cudaGraphAddMemcpyNode1D(&out, g, &k, 1, out_a, d, bytes, cudaMemcpyDefault);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
  if (e == cudaSuccess) e = cudaGraphLaunch(x, 0);
  if (e == cudaSuccess) e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) {
    printf("%-48s build: %s\n", name, cudaGetErrorName(e));
    cudaGetLastError();
    return;
  }
  cudaError_t e1 = cudaGraphExecMemcpyNodeSetParams1D(x, in, d, b, bytes, cudaMemcpyDefault);
  cudaGetLastError();
  cudaError_t e2 = cudaGraphExecMemcpyNodeSetParams1D(x, out, out_b, d, bytes,
                                                      cudaMemcpyDefault);
  cudaGetLastError();
  const char *copied = "";
  if (e1 == cudaSuccess && e2 == cudaSuccess) {
    unsigned char *want = (unsigned char *)malloc(2 * bytes), *got = want + bytes;
    cudaMemcpy(want, b, bytes, cudaMemcpyDefault);
    cudaError_t l = cudaGraphLaunch(x, 0);
    if (l == cudaSuccess) l = cudaStreamSynchronize(0);
    cudaMemcpy(got, out_b, bytes, cudaMemcpyDefault);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += got[i] != (unsigned char)(want[i] + 1);
    copied = l != cudaSuccess ? " (launch failed)" : bad ? " (copied WRONG)" : " (copied right)";
    wrong_copies += l != cudaSuccess || bad != 0;
    free(want);
  }
  printf("%-48s update: in %s, out %s%s\n", name, cudaGetErrorName(e1), cudaGetErrorName(e2),
         copied);
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
}

// The runtime's private-context worker: a thread of its own that never had the primary
// context current makes a context, and its graphs copy from portable pinned memory the main
// thread made. cuda_test's private_contexts saw every such update refused, where the same
// moves on the main thread (below) are taken: which of the thread, the size, is it?
struct worker_args {
  CUdevice dev;
  void *a, *b, *big_a, *big_b, *out_a, *out_b;
  unsigned flags;
};

static void *worker_thread(void *p) {
  worker_args *w = (worker_args *)p;
  CUcontext c;
  cuCtxCreate(&c, nullptr, w->flags, w->dev);
  void *d = (void *)vmm(w->dev, 0x31, BIG);
  CUcontext mine = nullptr, theirs = nullptr;
  cuCtxGetCurrent(&mine);
  cuPointerGetAttribute(&theirs, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)w->big_a);
  printf("thread (flags %u): context %p; big a made under %p\n", w->flags, (void *)mine,
         (void *)theirs);
  try_update("thread: primary a -> primary b (64K)", d, w->a, d, w->b);
  try_update_sized("thread: big a -> big b (40 MB)", d, w->big_a, BIG, d, w->big_b, BIG);
  try_update_unit("thread: unit big a, then big b (40 MB)", (unsigned char *)d, w->big_a,
                  w->out_a, w->big_b, w->out_b, BIG);
  // With the copy's kind said (cudaMemcpyHostToDevice), as the runtime had it.
  kind = cudaMemcpyHostToDevice;
  try_update("thread, kind H2D: primary a -> primary b", d, w->a, d, w->b);
  try_update_sized("thread, kind H2D: big a -> big b (40 MB)", d, w->big_a, BIG, d, w->big_b,
                   BIG);
  kind = cudaMemcpyDefault;
  cudaDeviceSynchronize();
  cuCtxDestroy(c);
  return nullptr;
}

// The device region as the runtime's private mode maps it (cuda_backend.c: map_region): by
// the driver's virtual memory calls alone, on a thread where no context is current (the
// runtime makes no primary context for it). The debug log named such memory's context
// "none" as the destination of every refused update; the probe's other regions are mapped
// with a context current.
static void *map_without_context(void *p) {
  CUdevice dev = *(CUdevice *)p;
  CUcontext none = nullptr;
  cuCtxGetCurrent(&none);
  CUdeviceptr d = none == nullptr ? vmm_map(dev, BIG) : 0;
  if (d == 0)
    printf("map without a context: failed (current %p)\n", (void *)none);
  return (void *)d;
}

static void *contextless_region(CUdevice dev) {
  pthread_t t;
  void *d = nullptr;
  pthread_create(&t, nullptr, map_without_context, &dev);
  pthread_join(t, &d);
  return d;
}

// As cuda_test's private_contexts has it: the workers' private contexts exist before the
// primary one, which the main thread's first cudaHostAlloc makes; then a worker's graphs
// copy from that memory.
struct early_args {
  CUdevice dev;
  pthread_barrier_t *made, *allocated;
  void **a, **b;
};

static void *early_worker(void *p) {
  early_args *e = (early_args *)p;
  CUcontext c;
  cuCtxCreate(&c, nullptr, CU_CTX_SCHED_BLOCKING_SYNC, e->dev);
  pthread_barrier_wait(e->made);
  pthread_barrier_wait(e->allocated);
  void *d = (void *)vmm(e->dev, 0x41, BIG);
  try_update("early context: late primary a -> late b (64K)", d, *e->a, d, *e->b);
  try_update_sized("early context: late a -> late b (40 MB)", d, *e->a, BIG, d, *e->b, BIG);
  cudaDeviceSynchronize();
  cuCtxDestroy(c);
  return nullptr;
}

int main() {
  CUdevice dev;
  CUcontext x, y, z;
  cuInit(0);
  cuDeviceGet(&dev, 0);
  {
    pthread_barrier_t made, allocated;
    void *late_a = nullptr, *late_b = nullptr;
    early_args ea = {dev, &made, &allocated, &late_a, &late_b};
    pthread_t t;
    pthread_barrier_init(&made, nullptr, 2);
    pthread_barrier_init(&allocated, nullptr, 2);
    pthread_create(&t, nullptr, early_worker, &ea);
    pthread_barrier_wait(&made); // the worker's context exists; no primary one yet
    late_a = pinned_sized("late a", 0x51, BIG);
    late_b = pinned_sized("late b", 0x52, BIG);
    pthread_barrier_wait(&allocated);
    pthread_join(t, nullptr);
  }
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

  // 40 MB tensors, as cuda_test's private_contexts has them, on this thread and on a
  // worker's thread of its own.
  void *big_a = pinned_sized("big a", 0x18, BIG), *big_b = pinned_sized("big b", 0x19, BIG);
  void *dbig = (void *)vmm(dev, 0x24, BIG);
  try_update_sized("main: big a -> big b (40 MB)", dbig, big_a, BIG, dbig, big_b, BIG);
  kind = cudaMemcpyHostToDevice;
  try_update("main, kind H2D: primary a -> primary b", d0, prim_a, d0, prim_b);
  kind = cudaMemcpyDefault;
  void *out_a = pinned_sized("out a", 0, BIG), *out_b = pinned_sized("out b", 0, BIG);
  try_update_unit("main: unit big a, then big b (40 MB)", (unsigned char *)dbig, big_a, out_a,
                  big_b, out_b, BIG);
  CUcontext primary = nullptr;
  cuDevicePrimaryCtxRetain(&primary, dev);
  printf("primary context %p\n", (void *)primary);
  // The runtime's workers: BLOCKING_SYNC contexts (cuda_backend.c).
  for (unsigned flags : {0u, (unsigned)CU_CTX_SCHED_BLOCKING_SYNC}) {
    worker_args wa = {dev, prim_a, prim_b, big_a, big_b, out_a, out_b, flags};
    pthread_t t;
    pthread_create(&t, nullptr, worker_thread, &wa);
    pthread_join(t, nullptr);
  }
  cuCtxSetCurrent(x);

  // Into a region mapped with no context current, from this (private) context.
  void *dn = contextless_region(dev);
  if (dn != nullptr) {
    CUcontext owner = (CUcontext)1;
    CUresult r = cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)dn);
    printf("region mapped without a context: its context %p (%s)\n", (void *)owner,
           r == CUDA_SUCCESS ? "asked" : "not known");
    cudaMemset(dn, 0x61, BIG);
    cudaDeviceSynchronize();
    try_update("no-context vmm: primary a -> primary b", dn, prim_a, dn, prim_b);
    try_update_sized("no-context vmm: big a -> big b (40 MB)", dn, big_a, BIG, dn, big_b, BIG);
    kind = cudaMemcpyHostToDevice;
    try_update("no-context vmm, kind H2D: primary a -> b", dn, prim_a, dn, prim_b);
    try_update_sized("no-context vmm, kind H2D: big a -> big b", dn, big_a, BIG, dn, big_b,
                     BIG);
    kind = cudaMemcpyDefault;
    try_update_unit("no-context vmm: unit big a, then big b", (unsigned char *)dn, big_a,
                    out_a, big_b, out_b, BIG);
  }

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

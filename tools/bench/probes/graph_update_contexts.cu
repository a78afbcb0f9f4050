// graph_update_contexts.cu - which memcpy-node updates does the driver refuse once a worker
// has a private context, and does destroying a context free pinned memory made under it?
// docs: cudaGraphExecMemcpyNodeSetParams1D wants src and dst "allocated from the same
// contexts as the original"; which memory counts as whose is not said. The runtime's
// private-context cases showed refused updates under memcheck (docs/RELIABILITY.md).
//   nvcc -O2 -arch=sm_90 -o probe graph_update_contexts.cu -lcuda
//   ./probe        # one line per case: what the graph was made with, the update, the result
//   ./probe seq K  # only the Kth of the runtime-like sequences (0: the first), e.g. to put
//                  # one under compute-sanitizer --tool initcheck at a time
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

// add_one over the n bytes at d as a kernel node of g after `dep` (none when NULL), as the
// runtime launches the seed: 132 blocks of 256 threads.
static cudaKernelNodeParams add_one_params(void **args) {
  cudaKernelNodeParams kp = {};
  kp.func = (void *)add_one;
  kp.gridDim = dim3(132);
  kp.blockDim = dim3(256);
  kp.kernelParams = args; // copied by the call the params are given to
  return kp;
}

static cudaError_t add_one_node(cudaGraphNode_t *k, cudaGraph_t g, const cudaGraphNode_t *dep,
                                unsigned char *d, size_t n) {
  void *args[] = {&d, &n};
  cudaKernelNodeParams kp = add_one_params(args);
  return cudaGraphAddKernelNode(k, g, dep, dep != nullptr, &kp);
}

// As the runtime lowers a unit: copy in, a kernel, copy out, in the current context; then
// both copies moved to other host buffers (in from b, out to out_b). Checks out_b = b + 1.
static void try_update_unit(const char *name, unsigned char *d, const void *a, void *out_a,
                            const void *b, void *out_b, size_t bytes) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  cudaGraphNode_t in, k, out;
  cudaGraphCreate(&g, 0);
  cudaError_t e = cudaGraphAddMemcpyNode1D(&in, g, nullptr, 0, d, a, bytes, cudaMemcpyDefault);
  if (e == cudaSuccess) e = add_one_node(&k, g, &in, d, bytes);
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
struct contextless_args {
  CUdevice dev;
  size_t bytes;
};

static void *map_without_context(void *p) {
  contextless_args *c = (contextless_args *)p;
  CUcontext none = nullptr;
  cuCtxGetCurrent(&none);
  CUdeviceptr d = none == nullptr ? vmm_map(c->dev, c->bytes) : 0;
  if (d == 0)
    printf("map without a context: failed (current %p)\n", (void *)none);
  return (void *)d;
}

static void *contextless_region(CUdevice dev, size_t bytes = BIG) {
  pthread_t t;
  void *d = nullptr;
  contextless_args c = {dev, bytes};
  pthread_create(&t, nullptr, map_without_context, &c);
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

// cuda_test's private_contexts as the runtime runs it, which no case above reproduced: 24
// tensors of BIG bytes, each cudaHostAlloc'd (portable) with a page in front as
// gr_host_alloc has it, after the workers' contexts exist; four worker threads at once,
// each with its private BLOCKING_SYNC context and its own block of one region mapped with
// no context current; each lowers one unit graph (copy in, kernel, copy out, kinds given)
// for its first tensor and then moves both copies to every fourth tensor, rebuilding when
// an update is refused, as runtime/cuda/lowering.c does. Prints each worker's sequence
// (b: built, u: updated, R: refused and rebuilt) and checks every output.
static const int SEQ_TENSORS = 24, SEQ_WORKERS = 4;
// What a sequence varies, to tell the rule apart: workers at once, memory made before the
// workers' contexts, the copies' kind, how the update is asked, a launch between updates,
// the primary context instead of private ones.
enum seq_update { SEQ_RUNTIME, SEQ_DRIVER_HOST, SEQ_DRIVER_UNIFIED, SEQ_EXEC_UPDATE };
// Where the device blocks come from: a VMM region mapped with no context current (the
// private mode's map_region), one mapped on the main thread with the primary context
// current, one each worker maps with its own context current, or cudaMalloc (the primary
// mode's region; primary contexts only).
enum seq_region { SEQ_CONTEXTLESS, SEQ_MAIN_VMM, SEQ_WORKER_VMM, SEQ_CUDAMALLOC };
struct seq_opts {
  const char *name;
  int workers;
  bool memory_first;
  cudaMemcpyKind kind;
  seq_update how;
  bool launch, primary;
  seq_region region;
  bool apart;     // outputs in buffers of their own (else in place, as the test's)
  bool out_first; // the copy out updated before the copy in
  // The blocks of one contextless region shared by the workers and passed on at every step
  // (worker w's kth tensor in block (w + k) mod workers), as the arena's blocks go from
  // unit to unit and from one worker's context to another's; the kernel node moves too.
  bool rotate;
  // Rebuilt before a second move without asking, as the backend does since the rule was
  // found (runtime/cuda/lowering.h: copies_move_once): b u b u ...
  bool rule;
  // With rotate: the blocks back to back at 256 bytes (GR_ARENA_ALIGN), as the arena packs
  // units, so that neighbours share a 2 MiB granule of the region; else each block on
  // granules of its own.
  bool packed;
};
static seq_opts seq;

// The kind of a sequence's copy in (to_device) or out: cudaMemcpyDefault, or said.
static cudaMemcpyKind seq_kind(bool to_device) {
  if (seq.kind == cudaMemcpyDefault) return cudaMemcpyDefault;
  return to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}
struct seq_args {
  CUdevice dev;
  int id;
  unsigned char *block;
  unsigned char **in, **out;
  pthread_barrier_t *made, *allocated;
  char trace[64];
  int wrong;
  unsigned char *shared; // with seq.rotate: the region whose blocks the workers pass on
  size_t stride;
  pthread_barrier_t *step;
  int failed; // graphs not built ('F') or not run ('L'): nothing checked
};

// The unit's graph from src through d to dst: instantiated into *x, or with `update` the
// whole graph given to cudaGraphExecUpdate of *x.
static bool seq_build(cudaGraphExec_t *x, cudaGraphNode_t *in, cudaGraphNode_t *out,
                      unsigned char *d, const void *src, void *dst,
                      cudaGraphExecUpdateResultInfo *update = nullptr,
                      cudaGraphNode_t *kernel = nullptr) {
  cudaGraph_t g;
  cudaGraphNode_t k;
  if (kernel == nullptr) kernel = &k;
  cudaGraphCreate(&g, 0);
  bool ok = cudaGraphAddMemcpyNode1D(in, g, nullptr, 0, d, src, BIG, seq_kind(true)) ==
                cudaSuccess &&
            add_one_node(kernel, g, in, d, BIG) == cudaSuccess &&
            cudaGraphAddMemcpyNode1D(out, g, kernel, 1, dst, d, BIG, seq_kind(false)) ==
                cudaSuccess &&
            (update == nullptr ? cudaGraphInstantiate(x, g, 0) == cudaSuccess
                               : cudaGraphExecUpdate(*x, g, update) == cudaSuccess);
  // The nodes' later updates name them in this graph: it lives as long as the exec (the
  // previous one's graph, if any, goes).
  static thread_local cudaGraph_t kept = nullptr;
  if (kept) cudaGraphDestroy(kept);
  kept = g;
  return ok;
}

// A 1D copy of BIG bytes for the driver's cuGraphExecMemcpyNodeSetParams; the host side as
// host memory or as unified (the address alone).
static CUDA_MEMCPY3D seq_copy(void *dst, const void *src, bool to_device, bool unified) {
  CUDA_MEMCPY3D c = {};
  CUmemorytype host = unified ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
  c.srcMemoryType = to_device ? host : CU_MEMORYTYPE_DEVICE;
  c.dstMemoryType = to_device ? CU_MEMORYTYPE_DEVICE : host;
  if (to_device && !unified) c.srcHost = src; else c.srcDevice = (CUdeviceptr)src;
  if (!to_device && !unified) c.dstHost = dst; else c.dstDevice = (CUdeviceptr)dst;
  c.WidthInBytes = BIG;
  c.Height = 1;
  c.Depth = 1;
  return c;
}

// Both copies of exec x moved to (src, dst) as seq.how asks, and with seq.rotate the
// kernel node to the block d too; true when taken.
static bool seq_move(cudaGraphExec_t x, cudaGraphNode_t in, cudaGraphNode_t out,
                     unsigned char *d, const void *src, void *dst,
                     cudaGraphNode_t kernel = nullptr) {
  cudaMemcpyKind in_kind = seq_kind(true), out_kind = seq_kind(false);
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  switch (seq.how) {
  case SEQ_RUNTIME:
    if (kernel != nullptr) {
      size_t n = BIG;
      void *args[] = {&d, &n};
      cudaKernelNodeParams kp = add_one_params(args);
      if (cudaGraphExecKernelNodeSetParams(x, kernel, &kp) != cudaSuccess) return false;
    }
    if (seq.out_first)
      return cudaGraphExecMemcpyNodeSetParams1D(x, out, dst, d, BIG, out_kind) == cudaSuccess &&
             cudaGraphExecMemcpyNodeSetParams1D(x, in, d, src, BIG, in_kind) == cudaSuccess;
    return cudaGraphExecMemcpyNodeSetParams1D(x, in, d, src, BIG, in_kind) == cudaSuccess &&
           cudaGraphExecMemcpyNodeSetParams1D(x, out, dst, d, BIG, out_kind) == cudaSuccess;
  case SEQ_DRIVER_HOST:
  case SEQ_DRIVER_UNIFIED: {
    bool unified = seq.how == SEQ_DRIVER_UNIFIED;
    CUDA_MEMCPY3D ci = seq_copy(d, src, true, unified), co = seq_copy(dst, d, false, unified);
    return cuGraphExecMemcpyNodeSetParams((CUgraphExec)x, (CUgraphNode)in, &ci, ctx) ==
               CUDA_SUCCESS &&
           cuGraphExecMemcpyNodeSetParams((CUgraphExec)x, (CUgraphNode)out, &co, ctx) ==
               CUDA_SUCCESS;
  }
  case SEQ_EXEC_UPDATE: {
    cudaGraphExec_t same = x;
    cudaGraphNode_t i2, o2;
    cudaGraphExecUpdateResultInfo info;
    return seq_build(&same, &i2, &o2, d, src, dst, &info);
  }
  }
  return false;
}

static void *seq_worker(void *p) {
  seq_args *a = (seq_args *)p;
  CUcontext c = nullptr;
  if (seq.primary)
    cudaSetDevice(0);
  else
    cuCtxCreate(&c, nullptr, CU_CTX_SCHED_BLOCKING_SYNC, a->dev);
  if (seq.region == SEQ_WORKER_VMM)
    a->block = (unsigned char *)vmm_map(a->dev, BIG);
  else if (seq.region == SEQ_CUDAMALLOC && cudaMalloc((void **)&a->block, BIG) != cudaSuccess)
    a->block = nullptr;
  pthread_barrier_wait(a->made);
  pthread_barrier_wait(a->allocated);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraphExec_t x = nullptr;
  cudaGraphNode_t in, out, kernel;
  int len = 0;
  bool moved = false; // since the graph was built
  for (int t = a->id, k = 0; t < SEQ_TENSORS; t += seq.workers, k++) {
    char what = 'b';
    unsigned char *d = a->block;
    if (seq.rotate) d = a->shared + (size_t)((a->id + k) % seq.workers) * a->stride;
    if (x != nullptr && seq.rule && moved) {
      cudaGraphExecDestroy(x);
      x = nullptr;
    }
    if (x == nullptr) {
      if (!seq_build(&x, &in, &out, d, a->in[t], a->out[t], nullptr, &kernel)) what = 'F';
      moved = false;
    } else if (!seq_move(x, in, out, d, a->in[t], a->out[t], seq.rotate ? kernel : nullptr)) {
      cudaGetLastError();
      cudaGraphExecDestroy(x);
      x = nullptr;
      what = seq_build(&x, &in, &out, d, a->in[t], a->out[t], nullptr, &kernel) ? 'R' : 'F';
      moved = false;
    } else {
      what = 'u';
      moved = true;
    }
    bool last = t + seq.workers >= SEQ_TENSORS;
    if (what != 'F' && (seq.launch || last)) {
      // Without launches between updates only the last is launched: its output alone is
      // checked, and the others keep their value.
      if (cudaGraphLaunch(x, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)
        what = 'L';
      for (size_t i = 0; what != 'L' && i < BIG; i += 4093)
        a->wrong += a->out[t][i] != (unsigned char)(0x31 + t); // filled 0x30 + t, plus one
    }
    // A graph not built or not run is a failure of the probe too: it checked nothing.
    a->failed += what == 'F' || what == 'L';
    if (what == 'F') x = nullptr; // a failed instantiation leaves no exec to move
    a->trace[len++] = what;
    // With the blocks passed on, nobody takes this step's block for the next step before
    // every worker is done with its own.
    if (seq.rotate) pthread_barrier_wait(a->step);
  }
  a->trace[len] = 0;
  if (x) cudaGraphExecDestroy(x);
  cudaStreamDestroy(s);
  if (c) cuCtxDestroy(c);
  return nullptr;
}

static void runtime_sequence(CUdevice dev, size_t offset, seq_opts opts) {
  seq = opts;
  // Passed-on blocks need every worker at every step (the barrier) and the kernel node
  // moved with the copies (SEQ_RUNTIME's move alone does that).
  if (seq.rotate && (SEQ_TENSORS % seq.workers != 0 || seq.how != SEQ_RUNTIME)) {
    printf("sequence %s: blocks passed on need workers dividing %d and runtime updates\n",
           seq.name, SEQ_TENSORS);
    wrong_copies++;
    return;
  }
  pthread_barrier_t made, allocated;
  unsigned char *in[SEQ_TENSORS], *out[SEQ_TENSORS], *base[SEQ_TENSORS];
  unsigned char *regions[SEQ_WORKERS] = {nullptr};
  unsigned char *apart[SEQ_TENSORS] = {nullptr};
  if (seq.region == SEQ_MAIN_VMM) cudaFree(nullptr); // the primary context, current here
  for (int w = 0; w < SEQ_WORKERS; w++)
    regions[w] = seq.rotate                    ? nullptr // the shared region below
                 : seq.region == SEQ_CONTEXTLESS ? (unsigned char *)contextless_region(dev)
                 : seq.region == SEQ_MAIN_VMM    ? (unsigned char *)vmm_map(dev, BIG)
                                                 : nullptr; // the workers make their own
  // With seq.rotate: one contextless region of a block a worker, the blocks 2 MiB-aligned
  // or packed at 256 bytes.
  const size_t align = seq.packed ? 256 : 2u << 20, stride = (BIG + align - 1) / align * align;
  unsigned char *shared =
      seq.rotate ? (unsigned char *)contextless_region(dev, stride * seq.workers) : nullptr;
  pthread_barrier_t step;
  pthread_barrier_init(&step, nullptr, seq.workers);
  seq_args a[SEQ_WORKERS];
  pthread_t t[SEQ_WORKERS];
  auto allocate = [&] {
    for (int i = 0; i < SEQ_TENSORS; i++) {
      base[i] = (unsigned char *)pinned_sized("sequence", 0x30 + i, BIG + offset);
      in[i] = out[i] = base[i] + offset; // in place, as the test's tensors are
      if (seq.apart) out[i] = apart[i] = (unsigned char *)pinned_sized("apart", 0, BIG);
    }
  };
  pthread_barrier_init(&made, nullptr, seq.workers + 1);
  pthread_barrier_init(&allocated, nullptr, seq.workers + 1);
  if (seq.memory_first) allocate();
  for (int w = 0; w < seq.workers; w++) {
    a[w] = seq_args{dev, w, regions[w], in, out, &made, &allocated, {0}, 0,
                    shared, stride, &step};
    pthread_create(&t[w], nullptr, seq_worker, &a[w]);
  }
  pthread_barrier_wait(&made);
  if (!seq.memory_first) allocate();
  pthread_barrier_wait(&allocated);
  int wrong = 0;
  printf("sequence %-34s (offset %4zu):", seq.name, offset);
  for (int w = 0; w < seq.workers; w++) {
    pthread_join(t[w], nullptr);
    printf(" %s%s%s", a[w].trace, a[w].wrong ? " (copied WRONG)" : "",
           a[w].failed ? " (FAILED to build or run)" : "");
    wrong += a[w].wrong != 0 || a[w].failed != 0;
  }
  printf("\n");
  wrong_copies += wrong;
  for (int i = 0; i < SEQ_TENSORS; i++) {
    cudaFreeHost(base[i]);
    if (apart[i]) cudaFreeHost(apart[i]);
  }
}

int main(int argc, char **argv) {
  CUdevice dev;
  CUcontext x, y, z;
  cuInit(0);
  cuDeviceGet(&dev, 0);
  const cudaMemcpyKind H2D = cudaMemcpyHostToDevice, ANY = cudaMemcpyDefault;
  const seq_opts seqs[] = {
      {"as the runtime (4 workers)", 4, false, H2D, SEQ_RUNTIME, true, false},
      {"one worker", 1, false, H2D, SEQ_RUNTIME, true, false},
      {"memory before the contexts", 4, true, H2D, SEQ_RUNTIME, true, false},
      {"kind default", 4, false, ANY, SEQ_RUNTIME, true, false},
      {"no launch between updates", 4, false, H2D, SEQ_RUNTIME, false, false},
      {"driver update, host memtype, ctx", 4, false, H2D, SEQ_DRIVER_HOST, true, false},
      {"driver update, unified memtype, ctx", 4, false, H2D, SEQ_DRIVER_UNIFIED, true, false},
      {"cudaGraphExecUpdate of a new graph", 4, false, H2D, SEQ_EXEC_UPDATE, true, false},
      {"primary context, contextless vmm", 4, false, H2D, SEQ_RUNTIME, true, true},
      {"primary context, cudaMalloc blocks", 4, false, H2D, SEQ_RUNTIME, true, true,
       SEQ_CUDAMALLOC},
      {"outputs apart", 4, false, H2D, SEQ_RUNTIME, true, false, SEQ_CONTEXTLESS, true},
      {"copy out updated first", 4, false, H2D, SEQ_RUNTIME, true, false, SEQ_CONTEXTLESS,
       false, true},
      {"vmm mapped under the primary context", 4, false, H2D, SEQ_RUNTIME, true, false,
       SEQ_MAIN_VMM},
      {"vmm mapped by each worker", 4, false, H2D, SEQ_RUNTIME, true, false, SEQ_WORKER_VMM},
      {"primary, vmm by each worker", 4, false, H2D, SEQ_RUNTIME, true, true, SEQ_WORKER_VMM},
      // The runtime's way since the rule (rebuilt before a second move), then with the
      // blocks of one region passed from worker to worker, private and primary.
      {"the rule", 4, false, H2D, SEQ_RUNTIME, true, false, SEQ_CONTEXTLESS, false, false,
       false, true},
      {"the rule, blocks passed on", 4, false, H2D, SEQ_RUNTIME, true, false, SEQ_CONTEXTLESS,
       false, false, true, true},
      {"blocks passed on, moves asked", 4, false, H2D, SEQ_RUNTIME, true, false,
       SEQ_CONTEXTLESS, false, false, true, false},
      {"primary, blocks passed on", 4, false, H2D, SEQ_RUNTIME, true, true, SEQ_CONTEXTLESS,
       false, false, true, false},
      // The blocks packed as the arena packs them (neighbours in one 2 MiB granule): the
      // rule in private contexts, then primary ones. The first reads initcheck flags in
      // cuda_test private_contexts lie near a block's start, in the granule it shares with
      // the block before.
      {"the rule, packed blocks passed on", 4, false, H2D, SEQ_RUNTIME, true, false,
       SEQ_CONTEXTLESS, false, false, true, true, true},
      {"primary, packed blocks passed on", 4, false, H2D, SEQ_RUNTIME, true, true,
       SEQ_CONTEXTLESS, false, false, true, false, true},
  };
  const int n_seqs = (int)(sizeof(seqs) / sizeof(seqs[0]));
  if (argc == 3 && strcmp(argv[1], "seq") == 0) {
    char *end = nullptr;
    long k = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != 0 || k < 0 || k >= n_seqs) {
      printf("seq %s: not a sequence (0 to %d)\n", argv[2], n_seqs - 1);
      return 2;
    }
    runtime_sequence(dev, 0, seqs[k]);
    return wrong_copies ? 1 : 0;
  }
  runtime_sequence(dev, 4096, seqs[0]);
  for (const seq_opts &o : seqs) runtime_sequence(dev, 0, o);
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

// zero_copy.cu - can the SMs move separate small tensors across the link faster than the
// copy engines fed by cudaMemcpyBatchAsync? graphrun's 64 KiB row stays near 0.78 of the
// link (docs/PERFORMANCE.md), bound by the driver's cost per range (about 0.45 us a range on
// one thread, serialised across threads: tools/bench/probes/batch_submit_cost.cu). A kernel that
// reads each tensor from pinned host memory where it lies (host memory is mapped for the
// device under unified addressing) and one that writes each back pays no such cost: one
// launch per unit and direction, its table of ranges in pinned host memory too.
//   nvcc -O2 -arch=sm_90 -o probe zero_copy.cu
//   ./probe [tensors=12800] [bytes=65536] [per_unit=512] [ways|layout|separate]
// `layout` (the batched ways only) asks what graphrun adds to the plain batch way: its
// kernel as a one-node graph whose node is updated for every unit and launched between the
// batches (as the CUDA backend runs a scattered unit), tensors starting 64 bytes past a
// page (tools/graphrun/hostbuf.c's header) and host time between a unit's end and the next
// submission (a worker's accounting). Each line also gives a unit's mean submission time
// (launch; the graph way's node update included, which graphrun's profile counts apart as
// "graph update") and, with one unit in flight, the time from its last call to its event
// (wait), as tools/nvtx_profile gives graphrun's.
// `separate` runs the batched, kernel and fused ways over tensors of one cudaHostAlloc each
// (as PyTorch's pin_memory() and a program's own allocations lie). Otherwise tensors lie as
// graphrun's pool has them (slabs of 64 MiB, a page between tensors); in place (outputs
// over inputs) either way. Three threads take units from a shared counter, as workers
// take tasks, each with `depth` slots (a stream and a device block each). Ways:
//   batch:  cudaMemcpyBatchAsync in, the seed kernel (2x + 1), cudaMemcpyBatchAsync out
//   graph:  the same with the kernel as a graph (node updated, then cudaGraphLaunch)
//   kernel: a gather kernel in, the seed kernel, a scatter kernel out
//   fused:  one kernel reading each tensor from the host, 2x + 1, writing it back
// Every element of every tensor is checked after every repetition; exits 1 on a wrong one.
// The ratio is the bytes both ways over the time at the bidirectional ceiling of two large
// cudaMemcpyAsync measured first.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#include "probe_common.h"

struct range {
  char *host;   // the tensor where it lies
  size_t dev;   // its offset in the unit's device block
  size_t bytes; // a multiple of 16 here
};

static const size_t CHUNK = 16384; // bytes a block moves of one range

// Blocks per range is fixed by the probe's one size: block b moves chunk b % per of range
// b / per. 16-byte loads, four in flight per thread.
__global__ void gather(const range *__restrict__ r, int per, char *dev) {
  const range t = r[blockIdx.x / per];
  size_t first = (size_t)(blockIdx.x % per) * CHUNK;
  size_t last = min(t.bytes, first + CHUNK);
  const uint4 *src = (const uint4 *)(t.host + first);
  uint4 *dst = (uint4 *)(dev + t.dev + first);
  size_t n = (last - first) / 16;
  for (size_t i = threadIdx.x; i < n; i += 4 * blockDim.x) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (i + k * blockDim.x < n) v[k] = src[i + k * blockDim.x];
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (i + k * blockDim.x < n) dst[i + k * blockDim.x] = v[k];
  }
}

__global__ void scatter(const range *__restrict__ r, int per, const char *dev) {
  const range t = r[blockIdx.x / per];
  size_t first = (size_t)(blockIdx.x % per) * CHUNK;
  size_t last = min(t.bytes, first + CHUNK);
  const uint4 *src = (const uint4 *)(dev + t.dev + first);
  uint4 *dst = (uint4 *)(t.host + first);
  size_t n = (last - first) / 16;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

__device__ __forceinline__ float4 seed4(float4 v) {
  return make_float4(2.f * v.x + 1.f, 2.f * v.y + 1.f, 2.f * v.z + 1.f, 2.f * v.w + 1.f);
}

__global__ void fused(const range *__restrict__ r, int per) {
  const range t = r[blockIdx.x / per];
  size_t first = (size_t)(blockIdx.x % per) * CHUNK;
  size_t last = min(t.bytes, first + CHUNK);
  float4 *p = (float4 *)(t.host + first);
  size_t n = (last - first) / 16;
  for (size_t i = threadIdx.x; i < n; i += 4 * blockDim.x) {
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (i + k * blockDim.x < n) v[k] = p[i + k * blockDim.x];
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (i + k * blockDim.x < n) p[i + k * blockDim.x] = seed4(v[k]);
  }
}

enum way { BATCH, KERNEL, FUSED, GRAPH };
static const char *way_name[] = {"batch", "kernel", "fused", "graph"};

struct tensors {
  size_t count, bytes;
  size_t offset = 0;     // where a tensor starts past its page
  bool separate = false; // each its own cudaHostAlloc, as PyTorch's pin_memory() makes them
  std::vector<char *> slabs, at;
};

static void tensors_make(tensors &t) {
  for (char *s : t.slabs) cudaFreeHost(s);
  t.slabs.clear();
  t.at.clear();
  if (t.separate) {
    for (size_t i = 0; i < t.count; i++) {
      char *s;
      if (cudaHostAlloc((void **)&s, t.bytes, cudaHostAllocPortable) != cudaSuccess) exit(2);
      t.slabs.push_back(s);
      t.at.push_back(s);
    }
    return;
  }
  const size_t slab = 64u << 20, stride = (t.bytes + t.offset + 4095) / 4096 * 4096 + 4096;
  const size_t per_slab = slab / stride;
  for (size_t i = 0; i < t.count; i++) {
    if (i % per_slab == 0) {
      char *s;
      if (cudaHostAlloc((void **)&s, slab, cudaHostAllocPortable) != cudaSuccess) exit(2);
      t.slabs.push_back(s);
    }
    t.at.push_back(t.slabs.back() + (i % per_slab) * stride + t.offset);
  }
}

static float value(size_t i, size_t j) { return (float)((i * 7 + j) % 1000); }

static void tensors_fill(tensors &t) {
  for (size_t i = 0; i < t.count; i++) {
    float *f = (float *)t.at[i];
    for (size_t j = 0; j < t.bytes / 4; j++) f[j] = value(i, j);
  }
}

static size_t tensors_wrong(const tensors &t) {
  size_t wrong = 0;
  for (size_t i = 0; i < t.count; i++) {
    const float *f = (const float *)t.at[i];
    for (size_t j = 0; j < t.bytes / 4; j++) wrong += f[j] != 2.0f * value(i, j) + 1.0f;
  }
  return wrong;
}

struct slot {
  cudaStream_t stream;
  cudaEvent_t done;
  char *dev;
  range *table; // pinned host: the kernels read it where it lies
  bool busy = false;
  // The graph way's one-kernel graph and its node; the graph lives as long as the exec,
  // as an update names the node in it (a freed graph's nodes are refused).
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphNode_t node;
};

struct worker {
  std::vector<slot> slots;
  std::vector<void *> dst, dout;
  std::vector<const void *> src, sout;
  std::vector<size_t> sizes;
  double launch_s = 0, wait_s = 0; // summed over the pass
  size_t units = 0;
};

// The seed over n floats at d as the graph way launches it: a one-kernel graph made once a
// slot, its node's parameters set for every unit (graphrun's "graph update"), launched.
static void graph_kernel(slot &s, float *d, size_t n) {
  void *args[] = {&d, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)twice_plus_one;
  kp.gridDim = dim3(132);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  if (s.exec == nullptr) {
    cudaGraphCreate(&s.graph, 0);
    cudaGraphAddKernelNode(&s.node, s.graph, nullptr, 0, &kp);
    cudaGraphInstantiate(&s.exec, s.graph, 0);
  } else {
    cudaGraphExecKernelNodeSetParams(s.exec, s.node, &kp);
  }
  cudaGraphLaunch(s.exec, s.stream);
}

static void run_unit(worker &w, slot &s, way how, const tensors &t, size_t first, size_t n) {
  const int per = (int)((t.bytes + CHUNK - 1) / CHUNK);
  for (size_t i = 0; i < n; i++) s.table[i] = range{t.at[first + i], i * t.bytes, t.bytes};
  if (how == BATCH || how == GRAPH) {
    cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t zero = 0;
    for (size_t i = 0; i < n; i++) {
      w.dst[i] = s.dev + i * t.bytes;
      w.src[i] = t.at[first + i];
      w.dout[i] = t.at[first + i];
      w.sout[i] = s.dev + i * t.bytes;
    }
    cudaMemcpyBatchAsync(w.dst.data(), w.src.data(), w.sizes.data(), n, &attr, &zero, 1,
                         s.stream);
    if (how == GRAPH)
      graph_kernel(s, (float *)s.dev, n * t.bytes / 4);
    else
      twice_plus_one<<<132, 256, 0, s.stream>>>((float *)s.dev, n * t.bytes / 4);
    cudaMemcpyBatchAsync(w.dout.data(), w.sout.data(), w.sizes.data(), n, &attr, &zero, 1,
                         s.stream);
  } else if (how == KERNEL) {
    gather<<<(unsigned)(n * per), 256, 0, s.stream>>>(s.table, per, s.dev);
    twice_plus_one<<<132, 256, 0, s.stream>>>((float *)s.dev, n * t.bytes / 4);
    scatter<<<(unsigned)(n * per), 256, 0, s.stream>>>(s.table, per, s.dev);
  } else {
    fused<<<(unsigned)(n * per), 256, 0, s.stream>>>(s.table, per);
  }
  cudaEventRecord(s.done, s.stream);
}

static void spin_us(double us) {
  double until = now_s() + us * 1e-6;
  while (now_s() < until) {
  }
}

// One pass over every tensor: `threads` workers, `depth` slots each, units of `per_unit`;
// `delay_us` of host time after each unit's end before the worker goes on.
static double one_pass(std::vector<worker> &ws, way how, const tensors &t, size_t per_unit,
                       double delay_us) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> th;
  double t0 = now_s();
  for (auto &w : ws)
    th.emplace_back([&, wp = &w] {
      worker &w = *wp;
      auto wait = [&w](slot &s) {
        double w0 = now_s();
        cudaEventSynchronize(s.done);
        w.wait_s += now_s() - w0;
        s.busy = false;
      };
      size_t k = 0;
      for (;;) {
        slot &s = w.slots[k++ % w.slots.size()];
        if (s.busy) {
          wait(s);
          spin_us(delay_us);
        }
        s.busy = false;
        size_t first = next.fetch_add(per_unit);
        if (first >= t.count) break;
        double l0 = now_s();
        run_unit(w, s, how, t, first, std::min(per_unit, t.count - first));
        w.launch_s += now_s() - l0;
        w.units++;
        s.busy = true;
      }
      for (auto &s : w.slots)
        if (s.busy) wait(s);
    });
  for (auto &x : th) x.join();
  return now_s() - t0;
}

int main(int argc, char **argv) {
  tensors t;
  t.count = argc > 1 ? strtoul(argv[1], nullptr, 10) : 12800;
  t.bytes = argc > 2 ? strtoul(argv[2], nullptr, 10) : 65536;
  size_t per_unit = argc > 3 ? strtoul(argv[3], nullptr, 10) : 512;
  bool layout = argc > 4 && strcmp(argv[4], "layout") == 0;
  t.separate = argc > 4 && strcmp(argv[4], "separate") == 0;
  double ceiling = bidir_gbs();
  tensors_make(t);
  printf("%zu tensors of %zu bytes, units of %zu; both ways at once %.1f GB/s\n", t.count,
         t.bytes, per_unit, ceiling);
  size_t failures = 0;
  struct config {
    way how;
    int threads, depth;
    size_t per_unit, offset;
    double delay_us;
  };
  const std::vector<config> ways = {
      {BATCH, 3, 1, per_unit, 0, 0},       {BATCH, 3, 2, per_unit, 0, 0},
      {KERNEL, 3, 1, per_unit, 0, 0},      {KERNEL, 3, 2, per_unit, 0, 0},
      {KERNEL, 1, 2, per_unit, 0, 0},      {KERNEL, 3, 2, per_unit / 8, 0, 0},
      {KERNEL, 3, 2, per_unit / 32, 0, 0}, {FUSED, 3, 2, per_unit, 0, 0},
      {FUSED, 1, 2, per_unit / 8, 0, 0}};
  // Interleaved, the plain batch way against the graph way, then each with graphrun's ~60
  // us of host time between units, then the graph way with the tensors 64 bytes past a page
  // too.
  const std::vector<config> layouts = {
      {BATCH, 3, 1, per_unit, 0, 0},  {GRAPH, 3, 1, per_unit, 0, 0},
      {BATCH, 3, 1, per_unit, 0, 0},  {GRAPH, 3, 1, per_unit, 0, 0},
      {BATCH, 3, 1, per_unit, 0, 60}, {GRAPH, 3, 1, per_unit, 0, 60},
      {GRAPH, 3, 1, per_unit, 64, 60}, {BATCH, 3, 1, per_unit, 0, 0},
      {GRAPH, 3, 1, per_unit, 0, 0}};
  // Separate allocations (PERFORMANCE, "Separate pinned tensors": batched copies of them
  // at 0.556 of the link at 64 KiB, 0.791 from the pool): do the SMs pay the driver's cost
  // per allocation that the copy engines' batches do?
  const std::vector<config> separate = {
      {BATCH, 3, 1, per_unit, 0, 0}, {BATCH, 3, 2, per_unit, 0, 0},
      {KERNEL, 3, 2, per_unit, 0, 0}, {FUSED, 3, 2, per_unit, 0, 0},
      {FUSED, 1, 2, per_unit / 8, 0, 0}};
  for (const config &c : layout ? layouts : t.separate ? separate : ways) {
    if (c.offset != t.offset) {
      t.offset = c.offset;
      tensors_make(t);
    }
    size_t pu = std::max<size_t>(1, c.per_unit);
    std::vector<worker> ws(c.threads);
    for (auto &w : ws) {
      w.slots.resize(c.depth);
      for (auto &s : w.slots) {
        cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&s.done, cudaEventBlockingSync | cudaEventDisableTiming);
        cudaMalloc((void **)&s.dev, pu * t.bytes);
        cudaHostAlloc((void **)&s.table, pu * sizeof(range), cudaHostAllocPortable);
      }
      w.dst.resize(pu), w.dout.resize(pu), w.src.resize(pu), w.sout.resize(pu);
      w.sizes.assign(pu, t.bytes);
    }
    std::vector<double> ratios;
    size_t wrong = 0, units = 0;
    double launch_s = 0, wait_s = 0;
    for (int rep = 0; rep < 4; rep++) {
      tensors_fill(t);
      for (auto &w : ws) w.launch_s = w.wait_s = 0, w.units = 0;
      double secs = one_pass(ws, c.how, t, pu, c.delay_us);
      wrong += tensors_wrong(t);
      if (rep == 0) continue; // the first pass warms up
      ratios.push_back(2.0 * t.count * t.bytes / (ceiling * 1e9) / secs);
      for (auto &w : ws) launch_s += w.launch_s, wait_s += w.wait_s, units += w.units;
    }
    cudaError_t e = cudaGetLastError();
    failures += wrong + (e != cudaSuccess);
    std::sort(ratios.begin(), ratios.end());
    printf("%-6s threads %d, in flight %d, units of %4zu, offset %2zu, %3.0f us between: "
           "ratio %.3f (%.3f-%.3f), a unit: launch %.0f us, wait %.0f us; %zu wrong%s%s\n",
           way_name[c.how], c.threads, c.depth, pu, c.offset, c.delay_us, ratios[1], ratios[0],
           ratios.back(), 1e6 * launch_s / units, 1e6 * wait_s / units, wrong,
           e != cudaSuccess ? ", error " : "", e != cudaSuccess ? cudaGetErrorName(e) : "");
    for (auto &w : ws)
      for (auto &s : w.slots) {
        cudaStreamDestroy(s.stream);
        cudaEventDestroy(s.done);
        cudaFree(s.dev);
        cudaFreeHost(s.table);
        if (s.exec) cudaGraphExecDestroy(s.exec);
        if (s.graph) cudaGraphDestroy(s.graph);
      }
  }
  return failures != 0;
}

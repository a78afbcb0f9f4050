// unit_chain.cu - how near the link do units of separate small tensors get, as graphrun's
// workers run them (worker.c, cuda_backend.c: a batched copy in of n ranges, a kernel over
// the unit's device block, a batched copy out, an event), by submitting threads and by
// units each keeps in flight? batch_submit_cost.cu's threads reach 0.96 of the link with
// 64 KiB ranges when each queues 41 pairs of batches and no kernel; graphrun's 64 KiB row
// stays near 0.78 with one or two units in flight per worker (docs/PERFORMANCE.md,
// "Defaults"). This tells which of the depth and the kernel between the copies costs it.
//   nvcc -O2 -arch=sm_90 -o probe unit_chain.cu
//   ./probe [ranges=512] [bytes=65536] [units=16]
// Each thread has `depth` streams (one per unit in flight, as graphrun's slots) and waits
// for unit u - depth's event before it submits unit u. Host ranges lie apart (a page
// between them, as the pool's do); every unit has outputs of its own, and every byte of
// every output is checked at the end (2x + 1 of its input). The ratio is the time the
// bytes need at the bidirectional ceiling measured first in the same run over the time the
// units took; the median of 3 repetitions. Exits 1 when an output is wrong.
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


struct config {
  int threads, depth;
  bool kernel;
};

struct thread_state {
  size_t n, bytes, stride;
  int units, depth;
  bool kernel;
  char *in = nullptr, *out = nullptr; // host: n ranges apart; out: one set per unit
  std::vector<char *> dev;            // a block per slot
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> done;      // per unit
  std::vector<void *> dst, src_in, src_out, dst_out;
  std::vector<size_t> sizes;
};

static void setup(thread_state &t, int id) {
  size_t host = t.n * t.stride;
  cudaHostAlloc((void **)&t.in, host, cudaHostAllocPortable);
  cudaHostAlloc((void **)&t.out, host * t.units, cudaHostAllocPortable);
  for (size_t i = 0; i < t.n; i++) {
    float *f = (float *)(t.in + i * t.stride);
    for (size_t j = 0; j < t.bytes / 4; j++) f[j] = (float)((i * 7 + j + id) % 1000);
  }
  memset(t.out, 0, host * t.units);
  t.dev.resize(t.depth);
  t.streams.resize(t.depth);
  for (int s = 0; s < t.depth; s++) {
    cudaMalloc((void **)&t.dev[s], t.n * t.bytes);
    cudaStreamCreateWithFlags(&t.streams[s], cudaStreamNonBlocking);
  }
  t.done.resize(t.units);
  for (auto &e : t.done)
    cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming);
  t.sizes.assign(t.n, t.bytes);
}

static void teardown(thread_state &t) {
  for (auto e : t.done) cudaEventDestroy(e);
  for (int s = 0; s < t.depth; s++) {
    cudaFree(t.dev[s]);
    cudaStreamDestroy(t.streams[s]);
  }
  cudaFreeHost(t.in);
  cudaFreeHost(t.out);
}

// One repetition of a thread's units, as a worker with `depth` slots runs them.
static void run_units(thread_state &t) {
  cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t first = 0;
  std::vector<void *> dst(t.n), dout(t.n);
  std::vector<const void *> src(t.n), sout(t.n);
  for (int u = 0; u < t.units; u++) {
    int s = u % t.depth;
    if (u >= t.depth) cudaEventSynchronize(t.done[u - t.depth]);
    char *out = t.out + (size_t)u * t.n * t.stride;
    for (size_t i = 0; i < t.n; i++) {
      dst[i] = t.dev[s] + i * t.bytes;
      src[i] = t.in + i * t.stride;
      dout[i] = out + i * t.stride;
      sout[i] = t.dev[s] + i * t.bytes;
    }
    cudaMemcpyBatchAsync(dst.data(), src.data(), t.sizes.data(), t.n, &attr, &first, 1,
                         t.streams[s]);
    if (t.kernel)
      twice_plus_one<<<132, 256, 0, t.streams[s]>>>((float *)t.dev[s], t.n * t.bytes / 4);
    cudaMemcpyBatchAsync(dout.data(), sout.data(), t.sizes.data(), t.n, &attr, &first, 1,
                         t.streams[s]);
    cudaEventRecord(t.done[u], t.streams[s]);
  }
  for (int u = std::max(0, t.units - t.depth); u < t.units; u++) cudaEventSynchronize(t.done[u]);
}

static size_t check(const thread_state &t) {
  size_t wrong = 0;
  for (int u = 0; u < t.units; u++)
    for (size_t i = 0; i < t.n; i++) {
      const float *in = (const float *)(t.in + i * t.stride);
      const float *out = (const float *)(t.out + ((size_t)u * t.n + i) * t.stride);
      for (size_t j = 0; j < t.bytes / 4; j++)
        wrong += out[j] != (t.kernel ? 2.0f * in[j] + 1.0f : in[j]);
    }
  return wrong;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], nullptr, 10) : 512;
  size_t bytes = argc > 2 ? strtoul(argv[2], nullptr, 10) : 65536;
  int units = argc > 3 ? atoi(argv[3]) : 16;
  double ceiling = bidir_gbs();
  printf("%zu ranges of %zu bytes a unit, %d units a thread; both ways at once %.1f GB/s\n", n,
         bytes, units, ceiling);
  const config configs[] = {{3, 1, true},  {3, 2, true}, {3, 4, true}, {3, units, true},
                            {3, 2, false}, {3, units, false}, {2, 2, true}, {6, 1, true}};
  size_t failures = 0;
  for (const config &c : configs) {
    std::vector<thread_state> ts(c.threads);
    for (int id = 0; id < c.threads; id++) {
      ts[id].n = n;
      ts[id].bytes = bytes;
      ts[id].stride = bytes + 4096;
      ts[id].units = units;
      ts[id].depth = std::min(c.depth, units);
      ts[id].kernel = c.kernel;
      setup(ts[id], id);
    }
    cudaDeviceSynchronize();
    std::vector<double> ratios;
    for (int rep = 0; rep < 3; rep++) {
      std::atomic<int> ready{0};
      std::vector<std::thread> th;
      double t0 = 0;
      for (int id = 0; id < c.threads; id++)
        th.emplace_back([&, id] {
          ready.fetch_add(1);
          while (ready.load() < c.threads) std::this_thread::yield();
          run_units(ts[id]);
        });
      while (ready.load() < c.threads) std::this_thread::yield();
      t0 = now_s();
      for (auto &x : th) x.join();
      double secs = now_s() - t0;
      double each_way = (double)c.threads * units * n * bytes;
      ratios.push_back(2.0 * each_way / (ceiling * 1e9) / secs);
    }
    size_t wrong = 0;
    for (auto &t : ts) wrong += check(t);
    failures += wrong;
    std::sort(ratios.begin(), ratios.end());
    printf("threads %d, units in flight %2d, %-9s ratio %.3f (%.3f-%.3f), %zu wrong\n",
           c.threads, std::min(c.depth, units), c.kernel ? "kernel," : "no kernel,",
           ratios[1], ratios[0], ratios[2], wrong);
    for (auto &t : ts) teardown(t);
  }
  return failures != 0;
}

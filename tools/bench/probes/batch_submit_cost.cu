// batch_submit_cost.cu - what one range of cudaMemcpyBatchAsync costs the submitting thread,
// by how the host memory was allocated and by the batch's attributes. The runtime's 64 KiB
// rows are bound by it (docs/PERFORMANCE.md, "Separate pinned tensors": a unit's submission
// is most of its time); 0.90 of the link leaves about 1.3 us a range.
//   nvcc -O2 -arch=sm_90 -o probe batch_submit_cost.cu
//   ./probe [ranges=256] [bytes=65536] [threads=1]
// Each line: the memory, the attributes, the direction, the median submission time per
// range over 40 batches (CPU), and the batch's copy bandwidth (stream time: each batch is
// submitted behind a kernel that holds the stream, so its events time only the copies),
// every byte of every range checked.
// With threads > 1, then: that many threads at once, each with its own stream and memory
// (separate allocations), each submitting a batch in and a batch out 40 times: the median
// submission per range and the bandwidth of all of them together, each way; to tell the
// driver's contention between threads from what one stream's copies cost.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <atomic>
#include <thread>
#include <vector>

static double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct order { const char *name; cudaMemcpySrcAccessOrder o; unsigned flags; };

static std::atomic<int> ready{0};

// One of `threads` submitters: n ranges in and n out, 40 times after a first, on its own
// stream, starting once every thread has its memory; *per_us its median submission per
// range, [*t0, *t1] when it copied, *wrong the ranges copied wrong.
static void submitter(size_t n, size_t bytes, int id, int threads, double *per_us,
                      double *t0_us, double *t1_us, size_t *wrong) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  char *dev = nullptr;
  cudaMalloc(&dev, n * bytes);
  std::vector<char *> in(n), out(n);
  std::vector<void *> d_in(n), d_out(n);
  std::vector<const void *> s_in(n), s_out(n);
  std::vector<size_t> sz(n, bytes);
  for (size_t i = 0; i < n; i++) {
    cudaHostAlloc((void **)&in[i], bytes, cudaHostAllocPortable);
    cudaHostAlloc((void **)&out[i], bytes, cudaHostAllocPortable);
    memset(in[i], (int)((i + id) & 0x7f), bytes);
    memset(out[i], 0xff, bytes);
    d_in[i] = dev + i * bytes; s_in[i] = in[i];
    d_out[i] = out[i]; s_out[i] = dev + i * bytes;
  }
  cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t first = 0;
  std::vector<double> per;
  cudaDeviceSynchronize();
  ready.fetch_add(1);
  while (ready.load() < threads) std::this_thread::yield();
  *t0_us = now_us();
  for (int k = 0; k < 41; k++) {
    double t0 = now_us();
    cudaMemcpyBatchAsync(d_in.data(), s_in.data(), sz.data(), n, &attr, &first, 1, s);
    cudaMemcpyBatchAsync(d_out.data(), s_out.data(), sz.data(), n, &attr, &first, 1, s);
    double t1 = now_us();
    if (k > 0) per.push_back((t1 - t0) / (2 * n));
  }
  cudaStreamSynchronize(s);
  *t1_us = now_us();
  std::sort(per.begin(), per.end());
  *per_us = per[per.size() / 2];
  *wrong = 0;
  for (size_t i = 0; i < n; i++) *wrong += out[i][bytes - 1] != (char)((i + id) & 0x7f);
  for (size_t i = 0; i < n; i++) { cudaFreeHost(in[i]); cudaFreeHost(out[i]); }
  cudaFree(dev);
  cudaStreamDestroy(s);
}

static int many_threads(size_t n, size_t bytes, int threads) {
  std::vector<double> per(threads), t0(threads), t1(threads);
  std::vector<size_t> wrong(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++)
    ts.emplace_back(submitter, n, bytes, t, threads, &per[t], &t0[t], &t1[t], &wrong[t]);
  for (auto &t : ts) t.join();
  double start = *std::min_element(t0.begin(), t0.end());
  double end = *std::max_element(t1.begin(), t1.end());
  size_t bad = 0;
  for (size_t w : wrong) bad += w;
  std::sort(per.begin(), per.end());
  // 41 batches of n ranges each way per thread, all of them together over [start, end].
  double gbs = 41.0 * n * bytes * threads / ((end - start) * 1e3);
  printf("%d threads: submission %.2f us/range (the threads' medians %.2f-%.2f), "
         "%.1f GB/s each way together, %zu wrong\n", threads, per[threads / 2], per[0],
         per[threads - 1], gbs, bad);
  return bad != 0;
}

// Holds its stream for `ns` nanoseconds: the batch is submitted behind it, so that the
// events around the batch time its copies, not the CPU's submission.
__global__ void hold(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

static void need(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    printf("%s: %s\n", what, cudaGetErrorName(e));
    exit(2);
  }
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], nullptr, 10) : 256;
  size_t bytes = argc > 2 ? strtoul(argv[2], nullptr, 10) : 65536;
  int threads = argc > 3 ? atoi(argv[3]) : 1;
  size_t stride = bytes + 4096; // apart, as separate tensors are
  const unsigned long long hold_ns = 5000000; // longer than any submission seen (1 us x 256)
  cudaStream_t s;
  need(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  char *dev = nullptr, *one = nullptr;
  need(cudaMalloc(&dev, n * bytes), "cudaMalloc");
  need(cudaHostAlloc((void **)&one, n * stride, cudaHostAllocPortable), "cudaHostAlloc");
  std::vector<char *> sep(n);
  for (size_t i = 0; i < n; i++)
    need(cudaHostAlloc((void **)&sep[i], bytes, cudaHostAllocPortable), "cudaHostAlloc");
  std::vector<unsigned char> back(n * bytes);
  const order orders[] = {
      {"stream", cudaMemcpySrcAccessOrderStream, 0},
      {"any", cudaMemcpySrcAccessOrderAny, 0},
      {"stream+overlap", cudaMemcpySrcAccessOrderStream, cudaMemcpyFlagPreferOverlapWithCompute},
  };
  std::vector<void *> dst(n);
  std::vector<const void *> src(n);
  std::vector<size_t> sz(n, bytes);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  int failures = 0, row = 0;
  for (int mem = 0; mem < 2; mem++) {
    for (int h2d = 1; h2d >= 0; h2d--) {
      for (const order &o : orders) {
        if (!h2d && o.o == cudaMemcpySrcAccessOrderAny) continue; // device source: stream order
        // Each row's ranges hold a value of their own, the destination something else.
        row++;
        auto value = [row](size_t i) { return (unsigned char)((row * 37 + i) % 251); };
        for (size_t i = 0; i < n; i++) {
          char *host = mem == 0 ? one + i * stride : sep[i];
          if (h2d) {
            memset(host, value(i), bytes);
            dst[i] = dev + i * bytes;
            src[i] = host;
          } else {
            memset(host, 0xff, bytes);
            need(cudaMemset(dev + i * bytes, value(i), bytes), "cudaMemset");
            dst[i] = host;
            src[i] = dev + i * bytes;
          }
        }
        if (h2d) need(cudaMemset(dev, 0xff, n * bytes), "cudaMemset");
        need(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        cudaMemcpyAttributes attr;
        memset(&attr, 0, sizeof(attr));
        attr.srcAccessOrder = o.o;
        attr.flags = o.flags;
        size_t first = 0;
        std::vector<double> per;
        double gpu_ms = 0;
        int late = 0;
        for (int k = 0; k < 41; k++) {
          hold<<<1, 1, 0, s>>>(hold_ns);
          cudaEventRecord(a, s);
          double t0 = now_us();
          cudaError_t e = cudaMemcpyBatchAsync(dst.data(), src.data(), sz.data(), n, &attr,
                                               &first, 1, s);
          double t1 = now_us();
          cudaEventRecord(b, s);
          need(e, "cudaMemcpyBatchAsync");
          need(cudaStreamSynchronize(s), "cudaStreamSynchronize");
          float ms = 0;
          cudaEventElapsedTime(&ms, a, b);
          late += (t1 - t0) * 1e3 > hold_ns / 2; // the hold may not have covered it
          if (k > 0) {
            per.push_back((t1 - t0) / n);
            gpu_ms += ms;
          }
        }
        std::sort(per.begin(), per.end());
        size_t wrong = 0; // ranges with any byte wrong
        if (h2d) {
          need(cudaMemcpy(back.data(), dev, n * bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
          for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < bytes; j++)
              if (back[i * bytes + j] != value(i)) {
                wrong++;
                break;
              }
        } else {
          for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < bytes; j++)
              if (((unsigned char *)dst[i])[j] != value(i)) {
                wrong++;
                break;
              }
        }
        failures += wrong != 0 || late != 0;
        printf("%-9s %-15s %s  %6.2f us/range (p10 %.2f, p90 %.2f)  %6.1f GB/s  %zu wrong%s\n",
               mem == 0 ? "one-alloc" : "separate", o.name, h2d ? "H2D" : "D2H",
               per[per.size() / 2], per[per.size() / 10], per[per.size() * 9 / 10],
               n * bytes * 40 / (gpu_ms * 1e6), wrong,
               late ? " (a submission outlasted the hold: GB/s not trusted)" : "");
      }
    }
  }
  if (threads > 1) failures += many_threads(n, bytes, threads);
  return failures != 0;
}

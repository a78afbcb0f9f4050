// register_stall.cu - what cudaHostRegister on one thread does to another thread's copies:
// whether the registration cache's work beside a job slows the job through the driver
// (calls that wait while a range is being pinned), the copy engines, or the CPU's staging.
//   nvcc -O2 -arch=sm_90 -o probe register_stall.cu
//   ./probe [ranges=10] [bytes=400000000]
// The copier thread runs one workload for a fixed number of rounds, alone and then while
// the registrar thread registers `ranges` pageable ranges of `bytes` (each registered,
// timed, and unregistered at the end):
//   dma     H2D and D2H of 64 MiB between pinned buffers and the device, each round
//           synchronized (what a job over pinned or registered memory does);
//   staged  a CPU memcpy of 64 MiB from a pageable buffer into a pinned one, then its H2D,
//           and the reverse (what a job over pageable memory does: the staging path).
// Each line: the workload, alone or beside registration, its GB/s (bytes over wall time),
// the longest single cudaMemcpyAsync call (the submitting thread's wait) and the longest
// CPU memcpy; then the registrations' own rate. Every byte copied to the device and back is
// checked at the end of each run; the probe exits 1 on a wrong byte or a refused call.
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

static const size_t CHUNK = 64ull << 20;
static const int ROUNDS = 150;

struct result {
  double gbs, max_call_ms, max_memcpy_ms;
  bool right;
};

static result copier(bool staged, unsigned char *pinned_in, unsigned char *pinned_out,
                     unsigned char *pageable, unsigned char *dev, cudaStream_t s,
                     std::atomic<bool> *go) {
  result r = {0, 0, 0, true};
  while (go && !go->load()) std::this_thread::yield();
  double t0 = now_s();
  for (int i = 0; i < ROUNDS; i++) {
    double a = now_s();
    if (staged) memcpy(pinned_in, pageable, CHUNK);
    double b = now_s();
    CK(cudaMemcpyAsync(dev, pinned_in, CHUNK, cudaMemcpyHostToDevice, s));
    double c = now_s();
    CK(cudaMemcpyAsync(pinned_out, dev, CHUNK, cudaMemcpyDeviceToHost, s));
    double d = now_s();
    CK(cudaStreamSynchronize(s));
    double e = now_s();
    if (staged) memcpy(pageable, pinned_out, CHUNK);
    double f = now_s();
    r.max_call_ms = std::max({r.max_call_ms, (c - b) * 1e3, (d - c) * 1e3});
    r.max_memcpy_ms = std::max({r.max_memcpy_ms, (b - a) * 1e3, (f - e) * 1e3});
  }
  r.gbs = 2.0 * CHUNK * ROUNDS / (now_s() - t0) / 1e9;
  r.right = memcmp(pinned_in, pinned_out, CHUNK) == 0;
  return r;
}

int main(int argc, char **argv) {
  int ranges = argc > 1 ? atoi(argv[1]) : 10;
  size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : 400000000ull;
  unsigned char *pin_in, *pin_out, *dev;
  unsigned char *pageable = (unsigned char *)malloc(CHUNK);
  cudaStream_t s;
  CK(cudaSetDevice(0));
  CK(cudaHostAlloc(&pin_in, CHUNK, cudaHostAllocDefault));
  CK(cudaHostAlloc(&pin_out, CHUNK, cudaHostAllocDefault));
  CK(cudaMalloc(&dev, CHUNK));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t i = 0; i < CHUNK; i++) pageable[i] = pin_in[i] = (unsigned char)(i * 7 + 3);
  std::vector<unsigned char *> regions(ranges);
  for (auto &p : regions) {
    p = (unsigned char *)aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    memset(p, 1, bytes); // faulted in, as a user's tensors are
  }
  int bad = 0;
  for (int staged = 0; staged < 2; staged++) {
    const char *name = staged ? "staged" : "dma";
    copier(staged, pin_in, pin_out, pageable, dev, s, nullptr); // warm
    result alone = copier(staged, pin_in, pin_out, pageable, dev, s, nullptr);
    printf("%-6s alone          %6.1f GB/s, longest call %7.2f ms, longest memcpy %6.2f ms\n",
           name, alone.gbs, alone.max_call_ms, alone.max_memcpy_ms);
    std::atomic<bool> go(false);
    double reg_s = 0;
    std::thread registrar([&] {
      go = true;
      double t0 = now_s();
      for (auto p : regions) CK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
      reg_s = now_s() - t0;
    });
    result beside = copier(staged, pin_in, pin_out, pageable, dev, s, &go);
    registrar.join();
    printf("%-6s beside regist. %6.1f GB/s, longest call %7.2f ms, longest memcpy %6.2f ms; "
           "registering %d x %zu B took %.3f s (%.1f GB/s)\n",
           name, beside.gbs, beside.max_call_ms, beside.max_memcpy_ms, ranges, bytes, reg_s,
           ranges * (double)bytes / reg_s / 1e9);
    bad += !alone.right + !beside.right;
    for (auto p : regions) CK(cudaHostUnregister(p));
  }
  if (bad) printf("WRONG bytes in %d run(s)\n", bad);
  return bad ? 1 : 0;
}

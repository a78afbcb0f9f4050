// pin_cost.cu - how long page-locking host memory takes, and letting it go, by each way a
// program can ask for it: what `graphrun run` pays before its stream starts (the window's
// first segment) and after its last output (the window freed). On the H100 at e26aa02 the
// start of a run of 400 MB files took 0.76 s, with 800 MB pinned in it, and the end 0.22 s.
//   nvcc -O2 -arch=sm_90 -o probe pin_cost.cu
//   ./probe [bytes=838860800] [reps=3]
// Ways:
//   hostalloc   cudaHostAlloc (what gr_host_alloc does for a large block), cudaFreeHost
//   register    mmap of 4 KiB pages, every page touched, cudaHostRegister; unregister, munmap
//   huge        the same with MADV_HUGEPAGE first (transparent huge pages: a 2 MiB page is
//               one entry where 4 KiB pages are 512)
//   huge_cold   MADV_HUGEPAGE, cudaHostRegister on pages never touched (the driver faults
//               them in itself)
// Each line: the way, GB/s of pinning (bytes over the time from asking to pinned), the
// time to let go, and the rate of a copy of the whole buffer to the device and back (the
// pinned memory must be as fast as the driver's own). The first CUDA call (the context) is
// made before any timing. Each buffer is filled, copied to the device and back, and checked
// byte for byte; the probe exits 1 on a wrong byte or a refused call.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <vector>

#include "probe_common.h"

enum way { HOSTALLOC, REGISTER, HUGE, HUGE_COLD, WAYS };
static const char *const names[WAYS] = {"hostalloc", "register", "huge", "huge_cold"};

static unsigned char *pin(way w, size_t bytes) {
  void *p = nullptr;
  if (w == HOSTALLOC) {
    CK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    return (unsigned char *)p;
  }
  p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  if (w == HUGE || w == HUGE_COLD)
    madvise(p, bytes, MADV_HUGEPAGE);
  if (w != HUGE_COLD)
    for (size_t i = 0; i < bytes; i += 4096)
      ((volatile unsigned char *)p)[i] = 0;
  CK(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
  return (unsigned char *)p;
}

static void unpin(way w, unsigned char *p, size_t bytes) {
  if (w == HOSTALLOC) {
    CK(cudaFreeHost(p));
    return;
  }
  CK(cudaHostUnregister(p));
  munmap(p, bytes);
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], nullptr, 10) : (size_t)800 << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  bytes = (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  void *dev;
  CK(cudaFree(0));
  CK(cudaMalloc(&dev, bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int wrong = 0;
  printf("pin_cost: %zu bytes a buffer, %d repetitions each, interleaved\n", bytes, reps);
  std::vector<double> pin_s[WAYS], free_s[WAYS], copy_gbs[WAYS];
  for (int r = 0; r < reps; r++) {
    for (int w = 0; w < WAYS; w++) {
      double t0 = now_s();
      unsigned char *h = pin((way)w, bytes);
      pin_s[w].push_back(now_s() - t0);
      memset(h, 0x5a + w + r, bytes);
      t0 = now_s();
      CK(cudaMemcpyAsync(dev, h, bytes, cudaMemcpyHostToDevice, s));
      CK(cudaStreamSynchronize(s));
      double in_s = now_s() - t0;
      memset(h, 0, bytes);
      t0 = now_s();
      CK(cudaMemcpyAsync(h, dev, bytes, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      copy_gbs[w].push_back(2.0 * bytes / (in_s + now_s() - t0) / 1e9);
      for (size_t i = 0; i < bytes; i++)
        if (h[i] != (unsigned char)(0x5a + w + r)) {
          fprintf(stderr, "%s: byte %zu wrong\n", names[w], i);
          wrong = 1;
          break;
        }
      t0 = now_s();
      unpin((way)w, h, bytes);
      free_s[w].push_back(now_s() - t0);
    }
  }
  for (int w = 0; w < WAYS; w++) {
    std::sort(pin_s[w].begin(), pin_s[w].end());
    std::sort(free_s[w].begin(), free_s[w].end());
    std::sort(copy_gbs[w].begin(), copy_gbs[w].end());
    double p = pin_s[w][pin_s[w].size() / 2], f = free_s[w][free_s[w].size() / 2];
    printf("%-10s pin %.3f s (%.2f GB/s), let go %.3f s, copy in and out %.1f GB/s "
           "(medians)\n",
           names[w], p, bytes / p / 1e9, f, copy_gbs[w][copy_gbs[w].size() / 2]);
  }
  CK(cudaFree(dev));
  return wrong;
}

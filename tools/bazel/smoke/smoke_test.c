/* Regression test of the build rules: a C test linking a cuda_library (static
 * cudart) and @ck//:ck.  Must start and pass on machines without a GPU or
 * driver, and under --config=asan/tsan/ubsan.  Output follows the tools/test
 * format: PASS/FAIL/SKIP <name>. */
#include <ck_ring.h>
#include <cuda_runtime_api.h> /* C API of the static cudart (@local_cuda) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* TSan cannot see ck's atomics: @ck//:ck suppresses reports inside ck, and
 * the hand-over of data through the ring is annotated here. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define HANDOVER_RELEASE(p) __tsan_release(p)
#define HANDOVER_ACQUIRE(p) __tsan_acquire(p)
#else
#define HANDOVER_RELEASE(p) ((void)(p))
#define HANDOVER_ACQUIRE(p) ((void)(p))
#endif

#include "tools/bazel/smoke/smoke_cuda.h"

static int failures;

#define CHECK(name, cond)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      printf("FAIL %s %s:%d: %s\n", name, __FILE__, __LINE__, #cond);       \
      failures++;                                                           \
      return;                                                               \
    }                                                                       \
  } while (0)

static void smoke_cuda(void) {
  int n = smoke_cuda_device_count();
  int err = smoke_cuda_last_error();
  /* No driver or no GPU: skip.  Any other error is a real failure (e.g. ASan
   * without protect_shadow_gap=0 breaks the driver on GPU machines). */
  if (n == 0 || err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    printf("SKIP smoke_cuda: no CUDA device\n");
    return;
  }
  if (n < 0) {
    printf("FAIL smoke_cuda cudaGetDeviceCount: %s (%d)\n",
           cudaGetErrorName((cudaError_t)err), err);
    failures++;
    return;
  }
  CHECK("smoke_cuda", smoke_cuda_add_one(41) == 42);
  printf("PASS smoke_cuda\n");
}

static void smoke_ck_ring(void) {
  enum { SIZE = 8 }; /* power of two; holds SIZE - 1 items */
  static ck_ring_t ring;
  static ck_ring_buffer_t buf[SIZE];
  void *out = NULL;
  ck_ring_init(&ring, SIZE);
  CHECK("smoke_ck_ring", ck_ring_capacity(&ring) == SIZE);
  CHECK("smoke_ck_ring", !ck_ring_dequeue_spsc(&ring, buf, &out));
  for (uintptr_t i = 1; i < SIZE; i++)
    CHECK("smoke_ck_ring", ck_ring_enqueue_spsc(&ring, buf, (void *)i));
  CHECK("smoke_ck_ring", !ck_ring_enqueue_spsc(&ring, buf, (void *)99));
  CHECK("smoke_ck_ring", ck_ring_size(&ring) == SIZE - 1);
  for (uintptr_t i = 1; i < SIZE; i++) {
    CHECK("smoke_ck_ring", ck_ring_dequeue_spsc(&ring, buf, &out));
    CHECK("smoke_ck_ring", (uintptr_t)out == i);
  }
  CHECK("smoke_ck_ring", !ck_ring_dequeue_spsc(&ring, buf, &out));
  printf("PASS smoke_ck_ring\n");
}

enum { THREAD_RING = 64, THREAD_ITEMS = 10000 };
static ck_ring_t thread_ring;
static ck_ring_buffer_t thread_buf[THREAD_RING];

static void *producer(void *arg) {
  (void)arg;
  for (int i = 1; i <= THREAD_ITEMS; i++) {
    int *item = malloc(sizeof *item);
    *item = i;
    HANDOVER_RELEASE(&thread_ring);
    while (!ck_ring_enqueue_spsc(&thread_ring, thread_buf, item))
      ;
  }
  return NULL;
}

/* One producer thread, one consumer (this thread), heap items handed over. */
static void smoke_ck_ring_threads(void) {
  pthread_t t;
  long sum = 0;
  ck_ring_init(&thread_ring, THREAD_RING);
  CHECK("smoke_ck_ring_threads", pthread_create(&t, NULL, producer, NULL) == 0);
  for (int got = 0; got < THREAD_ITEMS;) {
    void *item;
    if (!ck_ring_dequeue_spsc(&thread_ring, thread_buf, &item)) continue;
    HANDOVER_ACQUIRE(&thread_ring);
    sum += *(int *)item;
    free(item);
    got++;
  }
  CHECK("smoke_ck_ring_threads", pthread_join(t, NULL) == 0);
  CHECK("smoke_ck_ring_threads", sum == (long)THREAD_ITEMS * (THREAD_ITEMS + 1) / 2);
  printf("PASS smoke_ck_ring_threads\n");
}

int main(void) {
  /* Line-buffered, so PASS lines survive a sanitizer abort later on. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  smoke_cuda();
  smoke_ck_ring();
  smoke_ck_ring_threads();
  return failures != 0;
}

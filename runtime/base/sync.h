/*
 * sync.h - small helpers shared by every module that sleeps: the monotonic clock, condition
 * variables on that clock, deadline arithmetic, and happens-before annotations for
 * ThreadSanitizer where synchronization goes through code it cannot see (Concurrency Kit's
 * inline-assembly atomics).
 */
#ifndef GR_SYNC_H
#define GR_SYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>

#include "runtime/base/sanitizers.h"

/* A cancellation flag: 0 while running; a nonzero gr_status once the owner is stopped (the
 * status every wait on it returns). */
typedef _Atomic int gr_cancel_flag;

/* A condition variable that measures deadlines on CLOCK_MONOTONIC, so a wall-clock step
 * never shortens or stretches a wait. Returns 0 or an errno value. */
int gr__cond_init(pthread_cond_t *cond);

/* Wait on `cond` (with `mu` held) until signaled or `deadline_ns` (gr_now_ns clock;
 * GR_NO_DEADLINE: no limit). Returns true when the deadline has passed. Spurious wakeups
 * return false: callers loop on their predicate. */
bool gr__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline_ns);

/* The absolute deadline `timeout_ns` from now; GR_WAIT_FOREVER (any negative) gives
 * GR_NO_DEADLINE. Saturates instead of overflowing. */
int64_t gr__deadline_after(int64_t timeout_ns);

/* The earlier of two deadlines, GR_NO_DEADLINE meaning "none". */
int64_t gr__deadline_min(int64_t a, int64_t b);

static inline bool gr_deadline_passed(int64_t deadline_ns, int64_t now_ns)
{
    return deadline_ns != GR_NO_DEADLINE && now_ns >= deadline_ns;
}

/* ThreadSanitizer cannot see Concurrency Kit's atomics. Code that hands data over through
 * them marks the hand-over: GR_TSAN_RELEASE(x) before publishing, GR_TSAN_ACQUIRE(x) after
 * receiving, on the same address. Functions that run ck code are GR_NO_TSAN so tsan does not
 * report the ring's own slot accesses, whose ordering it cannot see either. */
#ifdef GR_TSAN
#include <sanitizer/tsan_interface.h>
#define GR_TSAN_RELEASE(addr) __tsan_release((void *)(addr))
#define GR_TSAN_ACQUIRE(addr) __tsan_acquire((void *)(addr))
#define GR_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define GR_TSAN_RELEASE(addr) ((void)(addr))
#define GR_TSAN_ACQUIRE(addr) ((void)(addr))
#define GR_NO_TSAN
#endif

/* Copy a string into a fixed buffer, always NUL-terminated, truncating. */
void gr__strlcpy(char *dst, const char *src, size_t size);

/* The output structs that grow (gr_stats, gr_runtime_info, gr_job_progress, gr_kernel_info)
 * begin with uint32_t struct_size and magic, which the caller's INIT macro sets.
 * gr__sized_out_ok: `out` is not NULL, has `magic`, and covers at least the struct's first
 * version (`v1_size` bytes). gr__sized_out_fill: the library's whole struct `full`
 * (`full_size` bytes) into `out` past that header, no further than the caller's
 * struct_size: fields appended later than the caller's header stay untouched. */
bool gr__sized_out_ok(const void *out, uint32_t magic, size_t v1_size);
void gr__sized_out_fill(void *out, const void *full, size_t full_size);

/* Fill `err` (when not NULL): status, index, node and a printf-style message. Returns
 * `status` so callers can write `return gr__error_set(err, ...)`. */
gr_status gr__error_set(gr_error_info *err, gr_status status, uint64_t index, const char *node,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Put a printf-style prefix in front of err->message (when err is not NULL), cutting the
 * end of the message if the two do not fit: for callers that say where an inner failure
 * happened ("FILE:LINE:COL: ", "kernel 'x': "). */
void gr__error_prefix(gr_error_info *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* GR_SYNC_H */

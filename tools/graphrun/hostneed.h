/*
 * hostneed.h - the host memory a `graphrun run` needs, told before it runs (graphrun check)
 * and when a run fails for want of it (what it needs, what limit it met, what to do).
 *
 * A run holds, besides its window (window.h): the runtime's budget, which on the host
 * backend is host memory (one arena per device, reserved at start); each worker's staging
 * buffer (the runtime's staging_bytes, made when the worker starts); and its threads
 * (workers, copy helpers, the deadline thread, the driver's I/O threads, the read-ahead
 * thread while the runtime starts), each with a stack
 * and, with glibc, a malloc arena of its own that reserves 64 MiB of address space. The
 * figures are upper bounds: under an address-space limit (prlimit --as, ulimit -v) what is
 * optional gives way first (a malloc arena not had is shared, a staging buffer not had is
 * made when a unit needs it, the window grows only as far as the system lets it), so a run
 * may start in less; but the least (the largest tensor's buffers and the host backend's
 * budget, both held at once, beside what the process already maps) cannot be done without.
 *
 * Any thread: pure functions of their arguments and of what the system says at the call.
 */
#ifndef GR_HOSTNEED_H
#define GR_HOSTNEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/io.h"

/* The address space glibc reserves for each malloc arena beyond the main one. */
#define GR_HOSTNEED_MALLOC_ARENA (64ull << 20)

typedef struct gr_host_need {
    uint64_t least;        /* the largest tensor's buffers: the least window */
    uint64_t window;       /* the window at most: its bound, or all the tensors' need if less */
    uint64_t limit;        /* the window's bound (--host-memory or the default) */
    uint64_t arena;        /* the budget held in host memory: budget x devices on the host
                              backend, 0 on CUDA (device memory) */
    uint64_t staging;      /* the workers' staging buffers */
    uint64_t staging_each; /* one worker's */
    uint32_t workers;      /* workers in all (per device x devices) */
    uint32_t threads;      /* the runtime's and the driver's threads */
    uint64_t threads_bytes; /* their stacks and malloc arenas: address space */
    uint64_t thread_each;  /* one thread's */
    uint64_t program;      /* what the process maps already (VmSize at the estimate: make
                              it before the window is opened) */
    uint64_t memory;       /* window + arena + staging: memory the run may fill */
    uint64_t address;      /* memory + threads_bytes + program: address space it may reserve */
    uint64_t floor;        /* least + arena + program: address space no run of these flags
                              starts in */
    uint64_t as_limit;     /* RLIMIT_AS, 0: none */
    uint64_t cg_limit;     /* the cgroup's memory.max, 0: none */
    uint64_t available;    /* MemAvailable, 0: unknown */
} gr_host_need;

/* The need of the run `plan` describes (skip: NULL, or the tensors not to run) with a window
 * bounded by `limit`, on backend `backend` (never AUTO) with `devices` devices in use and
 * the runtime configured by cfg (budget_bytes, workers_per_device, staging_bytes,
 * copy_threads), and the limits the system sets now. */
void gr_host_need_of(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                     const gr_config *cfg, gr_backend backend, uint32_t devices,
                     gr_host_need *out);

/* One line of what the run needs, part by part, and the limits ("up to 1.05 GiB of address
 * space: the window ..., ...; limits: ..."). `limit_how` names the window's bound (NULL:
 * --host-memory). Returns buf. */
const char *gr_host_need_describe(const gr_host_need *n, const char *limit_how, char *buf,
                                  size_t len);

/* What to do when the run needs more than it can have: which flags to lower (a figure for
 * --host-memory where lowering it is enough) and how far to raise the limit. Returns buf. */
const char *gr_host_need_advice(const gr_host_need *n, char *buf, size_t len);

/* Whether the need exceeds a limit: then true, with buf saying which ("needs ... more than
 * the address-space limit ...": `certain` when even the least exceeds it, else the run may
 * fail), followed by the advice. False with buf empty when it fits. */
bool gr_host_need_over(const gr_host_need *n, bool *certain, char *buf, size_t len);

/* For a run that failed for want of memory: what it needs (gr_host_need_describe), the
 * limits the system set, and what to do (gr_host_need_advice). Returns buf. */
const char *gr_host_need_failure(const gr_host_need *n, const char *limit_how, char *buf,
                                 size_t len);

#endif /* GR_HOSTNEED_H */

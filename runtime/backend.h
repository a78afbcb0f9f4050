/*
 * backend.h - the table of operations a backend provides, what the runtime gives it, and
 * the device and worker records both work with.
 *
 * The runtime owns scheduling (ring, budget, arena, jobs, workers' loops); a backend owns
 * execution. It reserves each device's region once, sets each worker up on the worker's own
 * thread (the CUDA backend binds a context and creates streams there), and runs iterations
 * from that worker: to completion one at a time (run), or, where it can, launched and
 * finished apart (launch, finish), so that the worker launches its next unit while the
 * copies of the one before still run (worker.c: at most GR_WORKER_SLOTS in flight). A
 * backend sees the runtime only through its environment (gr_backend_env: the config, the
 * logger, whether to trace): it includes no runtime header, takes no runtime lock and calls
 * nothing back. When a failure ruins more than the iteration, the backend says how far it
 * reaches (gr_fault_reach) and the worker acts on it (worker.c): it retires, or marks its
 * device lost.
 *
 * The backends are listed, in the order AUTO tries them, in backends.c; each lives in a
 * folder of its own (runtime/cuda/, runtime/host/). Adding one: a folder with its ops
 * table, a gr_backend value in graphrun.h, a row in backends.c.
 */
#ifndef GR_BACKEND_H
#define GR_BACKEND_H

#include <graphrun.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "runtime/core/arena.h"
#include "runtime/core/budget.h"
#include "runtime/base/log.h"

/* What a backend may know of the runtime that runs it. Read-only, and valid from
 * device_open to device_close. */
typedef struct gr_backend_env {
    const gr_config *cfg;  /* the runtime's validated copy of the caller's config */
    uint32_t n_devices;    /* devices the runtime uses */
    const gr_logger *log;
    bool trace;            /* mark NVTX ranges (trace.h): a tool is attached */
    /* Whether host memory [p, p + bytes) can be copied by DMA as it lies, for the job
     * holding `hold` (its gr_iteration.host_hold; NULL: a job without one): the backend's
     * dma_ready, or for ranges the registration cache knows its answer for that job
     * (hostcache.h), the only safe one for them. Any thread. */
    bool (*host_ready)(const struct gr_backend_env *env, const struct gr_host_hold *hold,
                       const void *p, uint64_t bytes);
    void *host_cache; /* the runtime's gr_host_cache, NULL when off: host_ready's state */
    /* With the cache: where a job's host range lies (hostcache.h, gr__host_cache_class:
     * GR_HOST_OUTSIDE, GR_HOST_HELD with *key its entry, GR_HOST_OTHER), so that the
     * planner batches only ranges the DMA engine may take alike; and the cache's epoch,
     * which a backend keeping lowered graphs over host memory compares (lowering.h).
     * NULL without a cache. */
    int (*host_class)(const struct gr_backend_env *env, const struct gr_host_hold *hold,
                      const void *p, uint64_t bytes, uintptr_t *key);
    uint64_t (*host_epoch)(const struct gr_backend_env *env);
    /* The backend's host_span (below): the range around host address p that one copy may
     * cover. NULL: any range (plans made without asking about real memory). Any thread. */
    bool (*host_span)(const void *p, uintptr_t *lo, uintptr_t *hi);
} gr_backend_env;

/* How far a failure of `run` reaches, as the backend judges it. */
typedef enum gr_fault_reach {
    GR_REACH_ITERATION = 0, /* only this iteration failed; everything goes on */
    GR_REACH_WORKER,        /* the worker's own context is ruined: it must take no more work */
    GR_REACH_DEVICE,        /* the device's shared context is ruined: the device is lost */
    /* Less than the iteration: the driver refused one of its copies as laid out (a range
     * it does not take as one allocation: cudaErrorInvalidValue) before any of its copies
     * out could write host memory. Nothing is ruined; the worker runs the unit again
     * through its staging buffer, whose copies the driver always takes (worker.c). */
    GR_REACH_REFUSED_COPY,
} gr_fault_reach;

struct gr_runtime;

typedef struct gr_device {
    uint32_t id;          /* index within the runtime */
    int ordinal;          /* the backend's device number (CUDA device ordinal) */
    const gr_backend_env *env;
    gr_budget *budget;    /* bytes, capacity = the arena's size */
    gr_arena *arena;      /* offsets into `region` */
    void *region;         /* base of the arena's memory, reserved by the backend */
    uint64_t region_size; /* = gr__arena_size(arena) */
    void *backend_state;
    atomic_bool lost;     /* set on a sticky device error: its work fails fast */
    atomic_uint workers_retired; /* workers whose private context a fault ruined */
    _Atomic uint64_t iterations_done;
    _Atomic uint64_t iterations_failed;
    _Atomic uint64_t graph_instantiations; /* counted by the CUDA backend */
    _Atomic uint64_t graph_updates;
    /* Copy-node updates the driver refused (the graph then rebuilt, or failed): none
     * expected, since the CUDA backend rebuilds without asking where the driver is known to
     * refuse. */
    _Atomic uint64_t graph_update_refusals;
} gr_device;

/* The parts a streamed unit's staging buffer is cut into (gr_backend_ops.streamed_copies). */
#define GR_STREAM_PARTS 4

/* Units a worker may have in flight at once: one launched while the one before it still
 * copies (worker.c). */
#define GR_WORKER_SLOTS 2

/* What a worker keeps for one unit in flight, from its placement to its end. */
typedef struct gr_slot {
    gr_arena_block block; /* the unit's placement in the arena */
    gr_tensor view;       /* the host side of the unit, as the backend sees it */
    uint8_t *live;        /* GR_UNIT_MAX_TENSORS: which parts are live */
    struct gr_copy *copies;     /* GR_UNIT_MAX_TENSORS * GR_MAX_PORTS: the copy list */
    struct gr_copy *copies_out; /* as many: a scattered unit's copies out */
} gr_slot;

typedef struct gr_worker {
    struct gr_runtime *rt; /* the runtime's, never the backend's */
    gr_device *dev;
    const gr_backend_env *env;
    uint32_t id; /* index within the runtime */
    pthread_t thread;
    bool started; /* the thread exists and must be joined */
    atomic_bool retired; /* its private context is ruined: it takes no more work */
    void *backend_state;
    gr_slot slots[GR_WORKER_SLOTS];
    uint32_t in_flight; /* 1 or GR_WORKER_SLOTS: units it may have in flight (worker.c) */
    /* Staging (host memory for units that are gathered and scattered; pinned when it can
     * be), made when the worker starts (worker.c): one staged unit in flight at a time. */
    unsigned char *staging;
    uint64_t staging_bytes;  /* what it holds */
    uint64_t staging_at[2 * GR_MAX_PORTS]; /* where each port (inputs, then outputs) of the
                                              current unit lies in it */
    bool staging_pageable;   /* pinned memory could not be had: malloc'd (worker.c) */
    struct gr_copier *copier; /* the runtime's copy pool (copier.h), for streamed copies */
    uint64_t *copy_ends; /* GR_UNIT_MAX_TENSORS * GR_MAX_PORTS: gr__copier_copy's scratch */
} gr_worker;

/* Pinned host memory, where a backend can make it (graphrun.h: gr_host_alloc). */
typedef struct gr_pinned_ops {
    /* Whether pinned memory can be had on this machine (a usable device is present). */
    bool (*available)(void);
    gr_status (*alloc)(uint64_t bytes, void **out);
    void (*free)(void *p);
    gr_status (*pin)(void *p, uint64_t bytes);
    gr_status (*unpin)(void *p);
} gr_pinned_ops;

typedef struct gr_backend_ops {
    gr_backend kind;
    const char *name;
    /* Device regions are a multiple of this (the device allocator's page): the budget is
     * rounded down to it, so the memory really allocated never exceeds the budget. */
    uint64_t region_granule;
    /* Whether its workers' phases are worth NVTX ranges when a tool is attached. */
    bool traced;
    /* Devices usable on this machine (without reserving anything). GR_ERR_UNAVAILABLE with
     * a reason when there are none. */
    gr_status (*probe)(const gr_config *cfg, uint32_t *count, gr_error_info *err);
    /* Reserve dev->region_size bytes for the arena (dev->ordinal and dev->env set). */
    gr_status (*device_open)(gr_device *dev, gr_error_info *err);
    void (*device_close)(gr_device *dev);
    /* On the worker's own thread, before its first iteration, and after its last. */
    gr_status (*worker_open)(gr_worker *w, gr_error_info *err);
    void (*worker_close)(gr_worker *w);
    /* NULL when this backend, set up as `env` says, can run kernel k; else why not, a
     * phrase that lives as long as k ("has no CUDA implementation"). Any thread. */
    const char *(*kernel_missing)(const gr_backend_env *env, const gr_kernel *k);
    /* Run one iteration to completion: inputs copied in, kernels run, outputs copied out.
     * On failure fills err (node and reason) and *reach (how far the failure goes). */
    gr_status (*run)(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                     gr_error_info *err);
    /* The same in two halves, NULL where the backend has only run: launch starts iteration
     * `it` (its it->slot free: nothing of that slot in flight) and returns without waiting;
     * on failure nothing of it is left in flight. finish waits for the slot's launched
     * iteration to end, and then what run would return. The worker calls finish once for
     * each launch that succeeded, in launch order, and has at most GR_WORKER_SLOTS
     * launched and not finished; `it` and what it points at stay valid until finish. */
    gr_status (*launch)(gr_worker *w, const gr_iteration *it, gr_fault_reach *reach,
                        gr_error_info *err);
    gr_status (*finish)(gr_worker *w, uint32_t slot, gr_fault_reach *reach,
                        gr_error_info *err);
    /* Copy `bytes` of host memory `src` (any kind) to `dst` in the device's region, and wait
     * for the copy: a job's constants (constants.h), from the worker's thread while it has
     * no unit in flight. On failure fills err and *reach as run does. */
    gr_status (*upload)(gr_worker *w, void *dst, const void *src, uint64_t bytes,
                        gr_fault_reach *reach, gr_error_info *err);
    /* Whether host memory at p can be copied to the device as it is, at full speed (it is
     * page-locked). Any thread. */
    bool (*dma_ready)(const void *p);
    /* The range [*lo, *hi) around host address p that one copy may cover: the driver
     * allocation p lies in (cudaHostAlloc, cudaMallocHost, a registration), since the
     * driver refuses a copy that runs from one allocation into the next even where the two
     * lie back to back. False when the backend cannot say (the planner then copies no
     * range past the tensor at p). NULL: any range, as for the host backend's memcpy. Any
     * thread. */
    bool (*host_span)(const void *p, uintptr_t *lo, uintptr_t *hi);
    /* Whether run() can do an iteration's copies itself, many separate ranges in one call
     * (gr_iteration.h2d); NULL: never. */
    bool (*batch_copies)(void);
    /* Whether run() takes streamed iterations (gr_iteration.streamed), whose copies it moves
     * through the worker's staging buffer, in GR_STREAM_PARTS parts of at least a page, with
     * the worker's copier; NULL: never. */
    bool (*streamed_copies)(void);
    /* Pinned host memory; NULL when the backend has no notion of it. */
    const gr_pinned_ops *pinned;
} gr_backend_ops;

/* Each backend's table, defined in its folder. */
extern const gr_backend_ops gr__backend_host;
extern const gr_backend_ops gr__backend_cuda;

/* The backends in the order AUTO tries them, NULL-terminated (backends.c). */
extern const gr_backend_ops *const gr__backends[];

/*
 * Pick the backend `cfg->backend` asks for and count its devices: the one of that kind, or
 * for AUTO the first in gr__backends whose probe succeeds. `note` (note_size bytes) says how
 * it was chosen, and *fell_back whether AUTO passed over a backend that could not run
 * (the note then says why). Any thread.
 */
gr_status gr__backend_choose(const gr_config *cfg, const gr_backend_ops **out,
                             uint32_t *n_devices, char *note, size_t note_size, bool *fell_back,
                             gr_error_info *err);

#endif /* GR_BACKEND_H */

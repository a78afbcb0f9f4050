/*
 * graphrun.h - the embedding API of graphrun. Two more headers go beside it, each including
 * this one: <graphrun_workloads.h>, the example workloads (the seed pipeline of the demo,
 * benchmarks and docs), and <graphrun_testing.h>, fault injection, which only tests use.
 *
 * graphrun streams host-resident tensors through a device: for every tensor it copies the
 * inputs in, runs a graph of kernels on them and copies the outputs out, with different
 * tensors overlapped across worker threads, while the device memory it holds never exceeds
 * the budget the caller sets.
 *
 * Objects:
 *   gr_runtime  workers, a task ring, and per device a budget and an arena.
 *   gr_graph    the template of one iteration: buffers sized relative to the tensor, and
 *               H2D, kernel and D2H nodes with their dependencies. Built by one thread,
 *               then finalized (validated and frozen); a finalized graph is read-only and
 *               may be shared by any number of jobs and threads.
 *   gr_job      one graph applied to N tensors. Every index of an accepted job ends exactly
 *               once: done, failed (with a reason) or canceled.
 *
 * Thread safety is stated per function: "any thread" means concurrently from any number of
 * threads; "owner" means the single thread that builds the object, until it is finalized.
 *
 * Handles are opaque. Every _destroy(NULL) is a no-op. Calls that can fail return a
 * gr_status; detail always comes as a gr_error_info: filled by the call itself through its
 * optional `err`, or, for calls without one, kept on the handle and read with
 * gr_graph_error_get or gr_job_error_get. Never in a process-wide global.
 *
 * Runtime and job handles are checked: once a runtime is destroyed, or a job is complete
 * and destroyed, every call with its handle returns GR_ERR_INVALID_USAGE (destroys do
 * nothing) instead of touching freed memory; only a call racing on another thread with the
 * destroy itself is undefined. In a child forked from a process with a running runtime,
 * every call on the parent's runtime and jobs returns GR_ERR_INVALID_USAGE (the destroys do
 * nothing): the child has none of the runtime's threads and cannot use its CUDA context.
 * docs/RELIABILITY.md lists every misuse and its status.
 */
#ifndef GRAPHRUN_H
#define GRAPHRUN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. The library's own is gr_version() and gr_version_number():
 * a program linked with the shared library may run with another build than the one whose
 * header it was compiled with, and may compare the two (the soname guarantees only the
 * same major version). GR_VERSION spells the three numbers (version_test checks). */
#define GR_VERSION_MAJOR 0
#define GR_VERSION_MINOR 4
#define GR_VERSION_PATCH 0
#define GR_VERSION "0.4.0"
/* major * 1000000 + minor * 1000 + patch: 4000 for 0.4.0, so versions compare as numbers. */
#define GR_VERSION_NUMBER                                                                   \
    (GR_VERSION_MAJOR * 1000000 + GR_VERSION_MINOR * 1000 + GR_VERSION_PATCH)

/* The library's version, "MAJOR.MINOR.PATCH" (static text), and the same as
 * GR_VERSION_NUMBER computes it: the GR_VERSION and GR_VERSION_NUMBER of the header the
 * library was built with, whatever header the caller was compiled with (as SQLite's
 * sqlite3_libversion and sqlite3_libversion_number). Any thread. */
const char *gr_version(void);
uint32_t gr_version_number(void);

/* ---------------------------------------------------------------------------------------
 * Status codes. Each one says whose fault a failure is.
 * ------------------------------------------------------------------------------------- */
typedef enum gr_status {
    GR_OK = 0,
    GR_ERR_INVALID_ARGUMENT, /* the caller passed a bad value: NULL, zero, malformed */
    GR_ERR_INVALID_USAGE,    /* the call is not allowed in the object's current state */
    GR_ERR_OUT_OF_MEMORY,    /* host memory could not be allocated */
    GR_ERR_OVER_BUDGET,      /* the request can never fit the device budget */
    GR_ERR_CUDA,             /* a CUDA call failed; the detail names it */
    GR_ERR_DEVICE_LOST,      /* the device hit a sticky error; its work fails */
    GR_ERR_TIMEOUT,          /* a deadline passed */
    GR_ERR_CANCELED,         /* the job was canceled */
    GR_ERR_SHUTDOWN,         /* the runtime is shutting down */
    GR_ERR_UNAVAILABLE,      /* the backend or device is not present on this machine */
    GR_ERR_INTERNAL,         /* a broken invariant inside graphrun: a bug, please report */
    GR_STATUS_COUNT_
} gr_status;

/* Static text for a status; never NULL, also for out-of-range values. Any thread. */
const char *gr_status_str(gr_status s);

/* Detail of a failure: which tensor index, which graph node, and why.
 *
 * Frozen: unlike the structs the library fills through an *_INIT macro (gr_stats,
 * gr_runtime_info, gr_job_progress, gr_kernel_info), it has no struct_size and never grows.
 * It is the optional `err` of most calls, which callers declare without initializing, and a
 * size read from such a struct could not be trusted. More detail, if ever, comes through
 * calls of its own. */
typedef struct gr_error_info {
    gr_status status;
    uint64_t index;    /* tensor index, or GR_NO_INDEX when the failure is not about one */
    char node[32];     /* graph node name, "" when not about a node */
    char message[256]; /* human-readable reason, NUL-terminated */
} gr_error_info;

#define GR_NO_INDEX UINT64_MAX

/* Monotonic clock in nanoseconds: the clock of every deadline in this API. Any thread. */
int64_t gr_now_ns(void);

/* Timeouts and deadlines. */
#define GR_WAIT_FOREVER (-1) /* as a timeout: no time limit (cancel and shutdown still wake) */
#define GR_NO_DEADLINE 0     /* as an absolute deadline: none */

/* ---------------------------------------------------------------------------------------
 * Runtime.
 * ------------------------------------------------------------------------------------- */
typedef struct gr_runtime gr_runtime;

typedef enum gr_backend {
    GR_BACKEND_AUTO = 0, /* CUDA when a usable GPU is present, else host */
    GR_BACKEND_HOST,     /* the CPU: same workers, ring, budget, arena and graphs */
    GR_BACKEND_CUDA,     /* NVIDIA GPUs through the CUDA runtime and CUDA Graphs */
} gr_backend;

const char *gr_backend_name(gr_backend b);

/* Whether backend `b` can run here, and on how many devices, without starting anything.
 * AUTO answers for the backend AUTO would choose. GR_ERR_UNAVAILABLE with the reason in
 * `err` when it cannot. Any thread. */
gr_status gr_backend_probe(gr_backend b, uint32_t *devices, gr_backend *chosen,
                           gr_error_info *err);

/*
 * CUDA contexts of the workers. PRIMARY: every worker binds the device's primary context
 * (the one the CUDA runtime API uses), so it shares it with the rest of the process.
 * PRIVATE: every worker creates a context of its own (driver API); a fault in one worker's
 * context leaves the others usable, at the cost of memory and start-up time per worker and
 * of kernels of different workers time-sliced rather than concurrent (docs/PERFORMANCE.md
 * has the measurements).
 */
typedef enum gr_context_mode {
    GR_CONTEXT_PRIMARY = 0,
    GR_CONTEXT_PRIVATE,
} gr_context_mode;

/* ---------------------------------------------------------------------------------------
 * Logging.
 *
 * A runtime is silent unless the config sets log_callback, or the GR_LOG environment
 * variable is set (debug, info, warn, error or off, read once by gr_runtime_create): GR_LOG
 * overrides log_level, and with no callback it sends the messages to stderr, one line each
 * ("graphrun: warn: ..."). An unreadable GR_LOG value logs at warn to stderr, and says so.
 *
 * What is logged: at info, the runtime's start (backend, devices, workers, budget), its
 * shutdown and its end (totals); at warn, AUTO falling back to the host backend, a worker
 * retired by a fault in its private context, the first failure of each job (deadline, CUDA
 * error, ...); at error, a device lost (with the CUDA error that lost it) and a runtime that
 * could not start; at debug, each job submitted and completed, the first cancellation of
 * each canceled job, and the first four graph updates the CUDA driver refused on each
 * worker (with the contexts of the copies' operands: a rebuild each). Nothing is ever
 * logged per tensor above debug, and nothing per tensor at debug either.
 * ------------------------------------------------------------------------------------- */
typedef enum gr_log_level {
    GR_LOG_DEBUG = 0,
    GR_LOG_INFO,
    GR_LOG_WARN,
    GR_LOG_ERROR,
    GR_LOG_OFF, /* as a threshold: nothing */
} gr_log_level;

/* "debug", "info", "warn", "error", "off"; "unknown" for other values. Any thread. */
const char *gr_log_level_name(gr_log_level level);

/*
 * Receives each message at or above the threshold. `message` is one line, without a
 * trailing newline, valid only during the call.
 *
 * Threading contract: it is called on whichever thread the event happens: a worker, the
 * deadline thread, or a caller's thread inside gr_runtime_create, gr_runtime_shutdown,
 * gr_runtime_destroy, gr_job_submit or gr_job_cancel; possibly on several threads at once,
 * so it must be thread-safe. No runtime lock is held while it runs, but it must not call
 * back into the runtime that logs (no gr_runtime_*, gr_job_* or gr_graph_* call on it or its
 * jobs; pure functions such as gr_status_str, gr_log_level_name and gr_now_ns are fine), must
 * not block for long (a worker may be waiting on it), and must not unwind (longjmp, C++
 * exceptions). The last call for a runtime happens before gr_runtime_destroy returns (for a
 * runtime that could not start, before gr_runtime_create returns).
 */
typedef void (*gr_log_callback)(gr_log_level level, const char *message, void *user);

/*
 * Runtime configuration. Always start from GR_CONFIG_INIT and change fields: new fields are
 * only ever appended, with defaults in the initializer, so code written against an older
 * header keeps compiling and working.
 */
typedef struct gr_config {
    uint32_t struct_size; /* sizeof(gr_config) at the caller's compile time */
    uint32_t magic;       /* GR_CONFIG_MAGIC: catches uninitialized structs */
    gr_backend backend;
    /* Device memory the runtime may hold, per device, in bytes. Required (0 is refused).
     * The runtime reserves one arena of this size per device at create time, rounded down
     * to the backend's allocation granule (256 bytes on the host backend, 2 MiB on CUDA,
     * whose allocations come in 2 MiB pages), and allocates no device memory per tensor. */
    uint64_t budget_bytes;
    uint32_t workers_per_device; /* worker threads per device; default 3 */
    uint32_t ring_capacity;      /* task ring entries, a power of two; default 4096 */
    uint32_t host_devices;       /* host backend: number of devices to emulate; default 1 */
    gr_context_mode context_mode; /* CUDA backend: which context workers use */
    /* Graphs whose kernels are all elementwise (and buffers the tensor's size) are cut into
     * units of work (docs/PERFORMANCE.md): tensors larger than a worker's share of the
     * budget in chunks, tensors smaller than batch_below_bytes packed together. A unit that
     * is not one piece of DMA-ready memory goes through a pinned staging buffer of
     * staging_bytes per worker, gathered and scattered by copy_threads host threads. Each
     * worker pins its buffer when the runtime is created, so that the first staged job
     * does not pay for it: workers_per_device * staging_bytes of pinned host memory per
     * device. It also bounds batches of small tensors (units.c), so setting it small
     * suits only a runtime whose tensors are pinned and at least batch_below_bytes. */
    uint32_t copy_threads;      /* 0: one per CPU, at most 16 */
    uint64_t staging_bytes;     /* per worker; default 64 MiB */
    uint64_t batch_below_bytes; /* default 1 MiB; 0: never batch */
    /* 0: never cut or pack: every tensor is one iteration, and a tensor whose iteration does
     * not fit the budget is refused. Its outputs are then all or nothing even when the job
     * is stopped. Default 1. */
    uint32_t split_tensors;
    /* Private to <graphrun_testing.h> (gr_testing_set_fault_plan sets it): leave it as
     * GR_CONFIG_INIT leaves it, NULL. The slot keeps the fields after it where they were. */
    const char *testing_;
    /* Logging (see "Logging" above): messages at log_level and above go to log_callback
     * (default NULL: none), with log_user passed through. Default level GR_LOG_INFO. */
    gr_log_callback log_callback;
    void *log_user;
    gr_log_level log_level;
    /* Which devices to use, by the backend's own numbers: CUDA device ordinals, or on the
     * host backend indices among its host_devices emulated devices. Runtime device d (as
     * gr_runtime_device_stats numbers them) is devices[d]. NULL with device_count 0, the
     * default: every device, in order. Every number listed must be present and listed once;
     * anything else is refused by gr_runtime_create (GR_ERR_INVALID_ARGUMENT, saying which
     * entry and why). The list is copied: it need not outlive gr_runtime_create. */
    const int *devices;
    uint32_t device_count; /* entries in devices */
    /* Appended in 0.2. Splittable graphs: a tensor whose host bytes (inputs and outputs
     * together) are above this is cut into chunks of about this size even when it would fit
     * a worker's share whole, so that its copies in, kernels and copies out overlap with
     * each other's instead of the first copy in and the last copy out of a job running
     * alone for a whole tensor's time. Default 128 MiB; 0: cut only what does not fit. */
    uint64_t pipeline_bytes;
    /* Appended in 0.3. The registration cache: at most this many bytes of pageable host
     * memory that jobs use (port buffers of 1 MiB or more) are page-locked in place, in the
     * background, and kept, so that later jobs over the same memory copy it by DMA at the
     * link's speed instead of staging it through the CPU (the first job over a range runs
     * staged, as without the cache, and the range is registered once no job is live; a job
     * that uses it again before then waits in gr_job_submit for its registration, up to its
     * deadline; ranges no live job uses are evicted least recently used first). Only on a
     * backend with pinned
     * memory (CUDA). Default 0: off.
     * The promise it needs from the caller: memory a job used stays allocated and mapped
     * until gr_host_forget has returned for it (or the runtime is destroyed). Freeing it
     * earlier leaves a registration of pages the memory no longer has, and later jobs over
     * memory reallocated there would copy the old pages. Off by default for that reason:
     * a library cannot see its caller free memory. One runtime per process may have it (a
     * registration is the whole process's): a second asking for it is refused with
     * GR_ERR_INVALID_USAGE; other runtimes stage memory the cache holds. */
    uint64_t host_cache_bytes;
} gr_config;

#define GR_CONFIG_MAGIC 0x67724346u /* "grCF" */
/* Every *_INIT macro is designated in C, so that each default stands beside its field's
 * name and a field's place cannot shift its value, and positional in C++ (designated
 * initializers arrived only in C++20), in the fields' order; tests/initializers_test
 * checks that the two agree. */
#ifdef __cplusplus
#define GR_CONFIG_INIT                                                                      \
    {                                                                                       \
        sizeof(gr_config), GR_CONFIG_MAGIC, GR_BACKEND_AUTO, 0, 3, 4096, 1,                 \
            GR_CONTEXT_PRIMARY, 0, 64ull << 20, 1ull << 20, 1, NULL, NULL, NULL, GR_LOG_INFO, \
            NULL, 0, 128ull << 20, 0                                                        \
    }
#else
#define GR_CONFIG_INIT                                                                      \
    {                                                                                       \
        .struct_size = sizeof(gr_config), .magic = GR_CONFIG_MAGIC,                         \
        .backend = GR_BACKEND_AUTO, .budget_bytes = 0, .workers_per_device = 3,             \
        .ring_capacity = 4096, .host_devices = 1, .context_mode = GR_CONTEXT_PRIMARY,       \
        .copy_threads = 0, .staging_bytes = 64ull << 20, .batch_below_bytes = 1ull << 20,   \
        .split_tensors = 1, .testing_ = NULL, .log_callback = NULL, .log_user = NULL,       \
        .log_level = GR_LOG_INFO, .devices = NULL, .device_count = 0,                       \
        .pipeline_bytes = 128ull << 20, .host_cache_bytes = 0                               \
    }
#endif

/*
 * Device memory the CUDA backend holds per device beyond the budget and the CUDA context,
 * at most, with `workers` workers per device and graphs of a few dozen nodes: each
 * worker's stream, events and cache of up to 8 instantiated graphs, and the kernels'
 * modules. What the device reports with 3 to 64 workers is in docs/PERFORMANCE.md, "Device
 * memory the runtime holds". Graphs of hundreds of nodes, many kernels of one's own, or
 * more than 8 graph templates per worker in turn (4 with two units in flight: each has
 * graphs of its own) can take more: measure with `graphrun stress` or the bench's device
 * sampling.
 */
#define GR_CUDA_OVERHEAD_BOUND(workers) ((8ull << 20) + (uint64_t)(workers) * (5ull << 19))

/*
 * Create a runtime: reserves each device's arena and starts the workers. On failure *out is
 * NULL and, when err is not NULL, err says why. Any thread.
 */
gr_status gr_runtime_create(const gr_config *cfg, gr_runtime **out, gr_error_info *err);

/*
 * Begin shutting down, without waiting: submissions from now on get GR_ERR_SHUTDOWN, every
 * sleeping wait wakes, and every index that has not started ends as canceled with status
 * GR_ERR_SHUTDOWN (iterations already running finish). For servers that stop taking work
 * on a signal and destroy later. Idempotent. Any thread, also a completion callback.
 */
void gr_runtime_shutdown(gr_runtime *rt);

/*
 * Shut down (as gr_runtime_shutdown), wait for running iterations, for threads still inside
 * gr_job_submit or gr_runtime_shutdown and for completion callbacks still running, join the
 * workers, free the devices' memory, and drop the handle. On return every job is complete
 * and no callback is running. Jobs still held by the caller stay valid until
 * gr_job_destroy. A second call does nothing. From a completion callback (where waiting for
 * every callback would wait for itself) it only shuts down, as gr_runtime_shutdown, and the
 * handle stays valid for a destroy from another thread. NULL is a no-op.
 */
void gr_runtime_destroy(gr_runtime *rt);

/* How a runtime was set up. Initialize with GR_RUNTIME_INFO_INIT: fields are only ever
 * appended, and a caller compiled against an older, shorter struct gets the fields it
 * knows (as gr_stats). */
typedef struct gr_runtime_info {
    uint32_t struct_size;         /* sizeof(gr_runtime_info) at the caller's compile time */
    uint32_t magic;               /* GR_RUNTIME_INFO_MAGIC */
    gr_backend backend;           /* the backend actually in use (never AUTO) */
    uint32_t device_count;        /* devices in use */
    uint32_t workers_per_device;
    uint64_t budget_bytes;        /* per device, as the arenas really hold it */
    char backend_note[128];       /* how the backend was chosen (why AUTO fell back) */
} gr_runtime_info;

#define GR_RUNTIME_INFO_MAGIC 0x67725249u /* "grRI" */
#ifdef __cplusplus
#define GR_RUNTIME_INFO_INIT                                                                \
    {sizeof(gr_runtime_info), GR_RUNTIME_INFO_MAGIC, GR_BACKEND_AUTO, 0, 0, 0, {0}}
#else
#define GR_RUNTIME_INFO_INIT                                                                \
    {.struct_size = sizeof(gr_runtime_info), .magic = GR_RUNTIME_INFO_MAGIC}
#endif

/* Fill `out` (initialized with GR_RUNTIME_INFO_INIT) up to its struct_size.
 * GR_ERR_INVALID_ARGUMENT for NULL or an uninitialized struct. Any thread. */
gr_status gr_runtime_info_get(const gr_runtime *rt, gr_runtime_info *out);

typedef struct gr_device_stats {
    uint64_t budget_bytes;      /* capacity of this device's budget */
    uint64_t budget_in_use;     /* bytes granted right now */
    uint64_t budget_peak;       /* high-water mark of budget_in_use since create */
    uint64_t iterations_done;   /* iterations that completed on this device */
    uint64_t iterations_failed; /* iterations that failed on this device */
    uint64_t graph_instantiations; /* CUDA graphs lowered and instantiated */
    uint64_t graph_updates;        /* iterations replayed by updating an instantiated graph */
} gr_device_stats;

/* Statistics of one device, a consistent snapshot per field. Any thread. (The first
 * statistics call, kept as it was; gr_runtime_stats_get below has these and more.
 * gr_device_stats is frozen: it has no struct_size and never grows; new statistics go to
 * gr_stats.) */
gr_status gr_runtime_device_stats(const gr_runtime *rt, uint32_t device, gr_device_stats *out);

/* The backend's number of runtime device `device` (0 .. device_count - 1): its CUDA ordinal,
 * or its index among the host backend's emulated devices; config.devices[device] when a
 * list was given. Any thread. */
gr_status gr_runtime_device_ordinal(const gr_runtime *rt, uint32_t device, int *ordinal);

/*
 * Statistics: counters, gauges and histograms, per device and for the whole runtime.
 *
 * Counting costs the workers a few uncontended stores per iteration (each worker counts in
 * memory of its own; a snapshot adds them up). Counters only grow. Once gr_job_wait has
 * returned GR_OK for a job, everything that job did is in the counters.
 */

/* Durations in fixed power-of-two buckets: buckets[0] counts those under 1 us, buckets[i]
 * (0 < i < GR_HISTOGRAM_BUCKETS - 1) those from 2^(i-1) us up to but excluding 2^i us, and
 * the last one those of 2^(GR_HISTOGRAM_BUCKETS - 2) us (67 s) and more. Not cumulative. */
#define GR_HISTOGRAM_BUCKETS 28
typedef struct gr_histogram {
    uint64_t count;  /* observations: the sum of the buckets */
    uint64_t sum_ns; /* their total duration, in nanoseconds */
    uint64_t buckets[GR_HISTOGRAM_BUCKETS];
} gr_histogram;

/*
 * One device's statistics, with the runtime-wide ones beside them. Initialize with
 * GR_STATS_INIT: fields are only ever appended, and a caller compiled against an older,
 * shorter gr_stats gets the fields it knows.
 *
 * Where tensors are counted: an index is counted once, when it ends, by the thread that
 * ends it. A worker counts it for its device (tensors_*): the index ran there, or the
 * worker found it stopped or its device lost. Any other thread (gr_job_cancel, the deadline
 * thread, shutdown, a gr_job_submit that could not queue) counts it in nodevice_*: it was
 * stopped before it could finish, so it failed (a deadline) or was canceled. The sum of
 * tensors_* over the devices plus nodevice_* is every ended index.
 * Jobs are counted for the runtime only: one job's tensors spread over every device.
 */
typedef struct gr_stats {
    uint32_t struct_size; /* sizeof(gr_stats) at the caller's compile time */
    uint32_t magic;       /* GR_STATS_MAGIC */

    /* The whole runtime: the same whichever device is asked for. */
    uint32_t device_count;
    uint32_t devices_lost;
    uint64_t jobs_submitted; /* accepted by gr_job_submit */
    uint64_t jobs_completed; /* every index ended and the callback (if any) returned */
    uint64_t jobs_failed;    /* of the completed, those whose result is not GR_OK */
    uint64_t nodevice_failed, nodevice_canceled; /* ended off the devices */

    /* Device `device`. */
    uint32_t device;
    uint32_t lost;            /* nonzero once the device is lost */
    uint32_t workers;         /* worker threads of the device */
    uint32_t workers_retired; /* workers a fault in their private context retired */
    uint64_t tensors_done, tensors_failed, tensors_canceled; /* indices ended here */
    uint64_t iterations_done, iterations_failed; /* units run (a chunk or a batch is one) */
    uint64_t graph_instantiations, graph_updates; /* CUDA backend, as in gr_device_stats */
    uint64_t bytes_h2d, bytes_d2h; /* copied by iterations that succeeded */
    uint64_t budget_bytes;  /* capacity */
    uint64_t budget_in_use; /* granted right now */
    uint64_t budget_peak;   /* high-water mark of budget_in_use since create */
    gr_histogram budget_wait; /* per budget request (granted or not): time until answered */
    gr_histogram iteration;   /* per iteration run: inputs staged to outputs written */

    /* Appended in 0.1 (after the histograms): the whole runtime again. Staging buffers that
     * had to be ordinary memory because pinned memory could not be had (RLIMIT_MEMLOCK, the
     * system out of pinned memory): results are the same, copies slower. The first one is
     * also logged, once, as a warning. */
    uint64_t staging_pageable;
    /* Appended in 0.2: device `device` again. The iterations that succeeded by how their
     * host memory was copied: straight from one range (a tensor, a chunk, tensors back to
     * back), through a staging buffer (gathered and scattered by the CPU), or tensor by
     * tensor where each lies, many in one batched copy (CUDA's cudaMemcpyBatchAsync). */
    uint64_t units_direct, units_staged, units_scattered;
    /* Appended in 0.3: the whole runtime again. The registration cache
     * (gr_config.host_cache_bytes): bytes it holds page-locked now; ranges it registered,
     * evicted, and failed to register (the system refused: RLIMIT_MEMLOCK, say); holds of
     * a job on a range found registered (a job's range copied by DMA thanks to the cache);
     * and the time registering took, so that its cost per byte can be read off. */
    uint64_t host_cache_bytes, host_cache_registrations, host_cache_evictions;
    uint64_t host_cache_failures, host_cache_hits, host_cache_register_ns;
    /* Appended in 0.3: device `device` again. Iterations launched while the same worker's
     * previous one was still running on the device (its submission under the other's
     * copies: two units in flight per worker, GR_UNITS_IN_FLIGHT=2, docs/API.md). */
    uint64_t units_overlapped;
    /* Appended in 0.3: device `device` again. Units whose copies the driver refused as laid
     * out (a range it did not take as one allocation: cudaErrorInvalidValue), each then run
     * again through a staging buffer, which it always takes, and counted by that path: the
     * work never fails for it. The planner copies no range over two allocations, so none is
     * expected; the first is also logged, once, at debug. */
    uint64_t copies_refused;
    /* Appended in 0.3: device `device` again. Jobs' constants (gr_graph_add_const) copied to
     * the device, and their bytes: once per job and device, and again only after they were
     * evicted to let another job's work have their memory (constants.h). */
    uint64_t constants_copied, constant_bytes;
} gr_stats;

#define GR_STATS_MAGIC 0x67725354u /* "grST" */
#ifdef __cplusplus
#define GR_STATS_INIT {sizeof(gr_stats), GR_STATS_MAGIC}
#else /* designated, so -Wmissing-field-initializers stays quiet about the rest */
#define GR_STATS_INIT {.struct_size = sizeof(gr_stats), .magic = GR_STATS_MAGIC}
#endif

/* Fill `out` (initialized with GR_STATS_INIT) with a snapshot of device `device`
 * (< device_count) and of the runtime; each field is read atomically, one after another,
 * while work goes on. GR_ERR_INVALID_ARGUMENT for NULL, an uninitialized struct or a device
 * out of range. Any thread. */
gr_status gr_runtime_stats_get(const gr_runtime *rt, uint32_t device, gr_stats *out);

/*
 * Render every statistic of every device in the Prometheus text exposition format
 * (version 0.0.4; metric names start with "graphrun_", per-device series carry a
 * device="N" label, histograms are in seconds) into buf, snprintf-style: writes at most
 * `size` bytes including a terminating NUL (nothing when size is 0; buf may then be NULL)
 * and returns the length of the whole text, without the NUL. A return >= size means the
 * text was cut short: call again with a larger buffer (the counters move between calls, so
 * leave some room, say a quarter more). Returns 0 only for a NULL runtime or when no host
 * memory was left for the snapshot. Any thread.
 */
size_t gr_runtime_stats_prometheus(const gr_runtime *rt, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------
 * Host memory.
 *
 * Copies from and to page-locked ("pinned") host memory run as real asynchronous DMA at the
 * speed of the link; copies of ordinary (pageable) memory go through the driver's staging
 * and are much slower. Tensors may live in either; these calls make pinned memory. On a
 * machine without a usable GPU they still work: gr_host_alloc returns ordinary page-aligned
 * memory, and register and unregister do nothing.
 * ------------------------------------------------------------------------------------- */

/* `bytes` (> 0) of pinned host memory, 4096-byte aligned, usable from every device and
 * context. Free with gr_host_free. GR_ERR_OUT_OF_MEMORY when the system cannot pin that
 * much. Any thread. Requests of up to 2 MiB are carved, whole pages each, from a few larger
 * pinned allocations that the process keeps while any of their blocks lives (and one empty
 * one after): the driver copies many tensors of few allocations faster than of many. Two
 * such blocks may therefore lie back to back, and a job copies adjacent tensors as one
 * range. GR_HOST_POOL=0 in the environment gives every request an allocation of its own. */
gr_status gr_host_alloc(uint64_t bytes, void **out);

/* Free memory from gr_host_alloc. NULL is a no-op; anything else not from gr_host_alloc,
 * or freed already, is undefined. Any thread. */
void gr_host_free(void *p);

/* Pin existing memory [p, p + bytes) in place, for every device and context; it must stay
 * allocated until gr_host_unregister. Any thread. */
gr_status gr_host_register(void *p, uint64_t bytes);
gr_status gr_host_unregister(void *p);

/* With the registration cache (gr_config.host_cache_bytes): unregister whatever the cache
 * of `rt` registered within [p, p + bytes) and forget it, so that the memory may be freed.
 * Call it before freeing memory that a job of this runtime used. Waits for a registration
 * of that memory in progress; GR_ERR_INVALID_USAGE (nothing forgotten) while a job that has
 * not ended uses the memory. GR_OK also when the cache is off or holds none of it. Any
 * thread. */
gr_status gr_host_forget(gr_runtime *rt, const void *p, uint64_t bytes);

/* ---------------------------------------------------------------------------------------
 * Element types. Every buffer, host port and kernel argument has one (float32 unless said).
 * float16 is IEEE binary16, bfloat16 the upper half of a float32 (both stored as uint16_t
 * bit patterns); the integer types are two's complement. docs/GRAPH_SPEC.md, "Element
 * types", has the conversion rules that `cast` and expressions follow.
 * ------------------------------------------------------------------------------------- */
typedef enum gr_dtype {
    GR_DTYPE_FLOAT32 = 0,
    GR_DTYPE_FLOAT16,
    GR_DTYPE_BFLOAT16,
    GR_DTYPE_FLOAT64,
    GR_DTYPE_INT32,
    GR_DTYPE_UINT8,
    GR_DTYPE_COUNT_
} gr_dtype;

/* "float32", "float16", "bfloat16", "float64", "int32", "uint8"; "unknown" for other
 * values. Any thread. */
const char *gr_dtype_name(gr_dtype t);

/* Bytes per element; 0 for an unknown type. Any thread. */
uint32_t gr_dtype_size(gr_dtype t);

/* The type a name (as gr_dtype_name spells it) stands for, in *out: GR_OK, or
 * GR_ERR_INVALID_ARGUMENT for a name that is no type. Any thread. */
gr_status gr_dtype_parse(const char *name, gr_dtype *out);

/* Nonzero when every value of `from` is a value of `to` (a "safe" cast in NumPy's words:
 * uint8 to any wider type, int32 to float64, float16 or bfloat16 to float32 or float64,
 * float32 to float64). Any thread. */
int gr_dtype_safe_cast(gr_dtype from, gr_dtype to);

/* ---------------------------------------------------------------------------------------
 * Graph templates.
 *
 * A graph describes one iteration, for one tensor: named device buffers whose sizes are a
 * ratio of the tensor's element count; H2D nodes that copy a host input into a buffer;
 * kernel nodes (registered kernels by name, with scalar arguments: see "Kernels" below);
 * D2H nodes that copy a buffer to a host output; and dependencies between nodes. Each buffer
 * has an element type (gr_dtype, float32 by default); a host port holds its buffer's.
 *
 * Finalizing validates: no cycles, no unknown names, every buffer a node reads was written
 * by a node it depends on, no two unordered nodes touching a buffer that one of them
 * writes, input and output ports numbered 0..n-1 without gaps, each output written once.
 * ------------------------------------------------------------------------------------- */
typedef struct gr_graph gr_graph;

#define GR_MAX_PORTS 4    /* host inputs (and outputs) per tensor */
#define GR_MAX_NODES 64   /* nodes per graph */
#define GR_MAX_BUFFERS 32 /* buffers per graph */
#define GR_MAX_SCALARS 8  /* scalar arguments per kernel node */
#define GR_MAX_KERNEL_INPUTS 4 /* input buffers per kernel node */
#define GR_NAME_MAX 31 /* longest buffer or node name */
#define GR_MAX_DIMS 4  /* dimensions of a tensor's shape (gr_tensor) */
#define GR_MAX_CONSTS 8 /* constants per graph (gr_graph_add_const) */

/* Every device buffer starts on, and is sized to, a multiple of this many bytes: enough for
 * coalesced and vectorized device access (cudaMalloc itself aligns to 256). */
#define GR_BUFFER_ALIGN 256u

/* Owner. */
gr_status gr_graph_create(gr_graph **out);

/* Drops the caller's reference; jobs still using the graph keep it alive. NULL is a no-op. */
void gr_graph_destroy(gr_graph *g);

/* The last refusal by a graph call (gr_graph_add_*, gr_graph_finalize), as every other
 * call gives its detail: out->status the status it returned, index GR_NO_INDEX, node the
 * node it concerns when it concerns one ("" otherwise), message the reason. Each builder
 * call forgets the refusal before it, so after a call that succeeded: status GR_OK and
 * message "". Returns GR_OK, or GR_ERR_INVALID_ARGUMENT for a NULL graph or out (out then
 * holds that status and a message, when not NULL). Owner (or any thread once finalized). */
gr_status gr_graph_error_get(const gr_graph *g, gr_error_info *out);

/* Deprecated: gr_graph_error_get's message alone, "" when none ("no graph" for NULL); the
 * text lives as long as the graph. Kept so that programs written for 0.3 compile; use
 * gr_graph_error_get. Owner (or any thread once finalized). */
const char *gr_graph_error(const gr_graph *g);

/* A buffer of ceil(tensor_elems * num / den) float32 elements (gr_graph_add_buffer_desc
 * for other types). Owner. */
gr_status gr_graph_add_buffer(gr_graph *g, const char *name, uint32_t num, uint32_t den);

/* A buffer described in full: its element type, and its size, either relative to the
 * tensor (ceil(tensor_elems * num / den) elements, the default 1/1) or, with fixed_elems
 * nonzero, exactly fixed_elems elements whatever the tensor (a reduction's result, a small
 * vector of per-channel constants). Host ports copied to or from a fixed buffer move its
 * fixed_elems elements per tensor. Start from GR_BUFFER_DESC_INIT. */
typedef struct gr_buffer_desc {
    uint32_t struct_size;
    uint32_t magic; /* GR_BUFFER_DESC_MAGIC */
    gr_dtype dtype;
    uint32_t num, den;
    uint64_t fixed_elems;
} gr_buffer_desc;

#define GR_BUFFER_DESC_MAGIC 0x67724244u /* "grBD" */
#ifdef __cplusplus
#define GR_BUFFER_DESC_INIT                                                                 \
    {                                                                                       \
        sizeof(gr_buffer_desc), GR_BUFFER_DESC_MAGIC, GR_DTYPE_FLOAT32, 1, 1, 0             \
    }
#else
#define GR_BUFFER_DESC_INIT                                                                 \
    {                                                                                       \
        .struct_size = sizeof(gr_buffer_desc), .magic = GR_BUFFER_DESC_MAGIC,               \
        .dtype = GR_DTYPE_FLOAT32, .num = 1, .den = 1, .fixed_elems = 0                     \
    }
#endif

/* Owner. */
gr_status gr_graph_add_buffer_desc(gr_graph *g, const char *name, const gr_buffer_desc *desc);

/* Copy host input `port` (tensor_elems elements, or a fixed buffer's fixed_elems) into
 * `buffer`. Owner. */
gr_status gr_graph_add_h2d(gr_graph *g, const char *node, uint32_t port, const char *buffer);

/* Run a registered kernel over tensor_elems elements: reads `inputs`, writes `output`
 * (which may be one of the inputs: in place). Of the kernels called `kernel`, the one whose
 * input and output element types are those of the buffers runs (refused, naming the types
 * it has, when none is). The scalars are converted to the kernel's scalar types. Owner. */
gr_status gr_graph_add_kernel(gr_graph *g, const char *node, const char *kernel,
                              const char *const *inputs, uint32_t n_inputs, const char *output,
                              const float *scalars, uint32_t n_scalars);

/* gr_graph_add_kernel with the scalars as doubles, for kernels whose scalars are float64 or
 * int32: each must be a value of the scalar's type (an int32 scalar an integer in range, a
 * float32 one finite and within float32's range; it is rounded to nearest). Owner. */
gr_status gr_graph_add_kernel_f64(gr_graph *g, const char *node, const char *kernel,
                                  const char *const *inputs, uint32_t n_inputs,
                                  const char *output, const double *scalars,
                                  uint32_t n_scalars);

/* Copy `buffer` (tensor_elems elements, or a fixed buffer's fixed_elems) to host output
 * `port`. Owner. */
gr_status gr_graph_add_d2h(gr_graph *g, const char *node, const char *buffer, uint32_t port);

/* Node `after` starts only when node `before` has finished. Owner. */
gr_status gr_graph_add_dep(gr_graph *g, const char *before, const char *after);

/* Validate and freeze. After GR_OK the graph is immutable and may be used by any thread.
 * Owner. */
gr_status gr_graph_finalize(gr_graph *g);

/*
 * A constant: a buffer of desc->fixed_elems elements of desc->dtype (desc->num and den are
 * ignored) that every iteration of a job reads and no node writes, such as a weight matrix
 * or a lookup table. Each job gives its contents (gr_job_options.constants, in the order
 * the constants were added); the runtime copies them to each device once, holds them there
 * for the job's life, counted in the budget once (not per iteration), and every iteration
 * reads that one copy: kernels take it as a small input (gr_kernel_def.small_inputs), whole,
 * also when the tensors are cut into chunks or batches. `shape` (rank 0..GR_MAX_DIMS, the
 * product of whose dimensions must be fixed_elems; rank 0: one dimension) is what
 * gr_graph_const_get reports, for callers that check or view the data by shape. At most
 * GR_MAX_CONSTS per graph. Owner.
 */
gr_status gr_graph_add_const(gr_graph *g, const char *name, const gr_buffer_desc *desc,
                             uint32_t rank, const uint64_t *shape);

/* The constants of a finalized graph: how many, and constant i's name, element type,
 * elements, bytes (as its contents are given) and shape. GR_ERR_INVALID_ARGUMENT for NULL, a
 * graph not finalized or i out of range. Any thread. */
typedef struct gr_const_info {
    char name[GR_NAME_MAX + 1];
    gr_dtype dtype;
    uint64_t elems;
    uint64_t bytes;
    uint32_t rank;
    uint64_t shape[GR_MAX_DIMS];
} gr_const_info;
uint32_t gr_graph_const_count(const gr_graph *g);
gr_status gr_graph_const_get(const gr_graph *g, uint32_t i, gr_const_info *out);

/* Input and output port counts of a finalized graph. Any thread. */
uint32_t gr_graph_input_count(const gr_graph *g);
uint32_t gr_graph_output_count(const gr_graph *g);

/* What host port `port` (an output port when `output` is nonzero) of a finalized graph
 * holds per tensor: its element type, and fixed_elems when its buffers have a fixed size
 * (0: the tensor's own size). GR_ERR_INVALID_ARGUMENT for NULL, a graph not finalized or a
 * port out of range. Any thread. */
typedef struct gr_port_info {
    gr_dtype dtype;
    uint64_t fixed_elems;
} gr_port_info;
gr_status gr_graph_port_get(const gr_graph *g, int output, uint32_t port, gr_port_info *out);

/*
 * Device bytes one iteration of this graph needs for a tensor of `elems` elements, as the
 * arena really allocates them (each buffer rounded to the arena alignment). Returns
 * GR_ERR_INVALID_ARGUMENT on overflow or a graph that is not finalized. Any thread.
 */
gr_status gr_graph_footprint(const gr_graph *g, uint64_t elems, uint64_t *bytes);

/*
 * How a runtime made from `cfg` would cut a job of `count` tensors, of elems[i] elements
 * each, into units of work (one iteration each), without creating the runtime: for a dry
 * run (`graphrun check`). It is the runtime's own planner on the runtime's own terms: cfg is
 * checked as gr_runtime_create checks it, an AUTO backend is chosen as it would be (by
 * probing), the budget is rounded down to that backend's granule, and split_tensors,
 * workers_per_device, staging_bytes, batch_below_bytes and pipeline_bytes apply. What it
 * cannot see is the tensors' memory: they are taken to be separate allocations (none right
 * after another), all DMA-ready (pinned or registered, for CUDA) when `dma_ready` is nonzero;
 * host backend memory always is.
 *
 * On GR_OK, *out holds the totals and cut[i] (when cut is not NULL: count entries) how tensor
 * i would run. GR_ERR_OVER_BUDGET when gr_job_submit would refuse the job (a tensor whose
 * iteration does not fit and cannot be cut: err names the index), with *out's backend,
 * arena_bytes, splittable and least_budget filled, cut untouched. GR_ERR_UNAVAILABLE, as
 * gr_job_submit refuses it, for a kernel the backend cannot run (err names the node).
 * GR_ERR_INVALID_ARGUMENT for
 * NULL, a graph not finalized, a config gr_runtime_create refuses, a tensor of 0 elements or
 * one too large; the probe's status when the backend is not there; GR_ERR_OUT_OF_MEMORY.
 * Creates nothing and allocates no device memory. Any thread.
 */
typedef struct gr_unit_cut {
    uint64_t pieces;  /* units that cover the tensor: 1 whole or in a batch, more: chunks */
    uint64_t batch;   /* tensors in its unit: 1 alone (whole or chunked), more: a batch */
    uint64_t largest; /* elements of its largest unit's share of it (its largest chunk) */
    int staged;       /* its units go through a worker's pinned staging buffer */
} gr_unit_cut;

typedef struct gr_units_plan_info {
    gr_backend backend;    /* the backend planned for (AUTO resolved) */
    uint64_t arena_bytes;  /* each device's arena: the budget rounded down to its granule */
    uint64_t units;        /* units the job would run */
    /* The smallest budget_bytes with which gr_job_submit takes these tensors on this
     * backend (a multiple of its granule): the largest iteration for a graph that cannot be
     * cut, one unit of the smallest size for one that can. */
    uint64_t least_budget;
    int splittable;        /* the graph can be cut (elementwise kernels, tensor-sized buffers) */
} gr_units_plan_info;

gr_status gr_graph_plan_units(const gr_graph *g, const gr_config *cfg, const uint64_t *elems,
                              uint64_t count, int dma_ready, gr_unit_cut *cut,
                              gr_units_plan_info *out, gr_error_info *err);

/*
 * Parse a graph spec: the text format of docs/GRAPH_SPEC.md (buffers, h2d, kernel, d2h
 * and dependency lines). `name` names the text in messages (a file's path, say). On success
 * *out holds a finalized graph. On failure *out is NULL and err->message reads
 * "NAME:LINE:COL: what is wrong", pointing at the offending token (for problems found when
 * validating the whole graph, at the statement that declared the node or buffer involved).
 * Any thread.
 */
gr_status gr_graph_parse(const char *text, size_t len, const char *name, gr_graph **out,
                         gr_error_info *err);

/* Read the file at `path` and parse it (messages are named by `path`). Any thread. */
gr_status gr_graph_load(const char *path, gr_graph **out, gr_error_info *err);

/* ---------------------------------------------------------------------------------------
 * Kernels.
 *
 * One process-wide registry of kernel definitions, which graphs name. The built-in kernels
 * (`mul`, `add`, ..., `seed`, `softmax`, `sum`, `normalize`: docs/API.md lists them) are
 * registered through the same checks and insertion as gr_kernel_register, the first time
 * the registry is used. A definition says everything the runtime
 * needs: the signature (inputs, scalars and their element types), whether the kernel is
 * elementwise (which lets the runtime cut a tensor into chunks and pack small tensors into
 * batches), a CPU implementation (the host backend's, and the reference of tests) and a
 * CUDA implementation with its launch rule.
 *
 * Why process-wide: a definition is immutable data (a name, a signature, function
 * addresses), like the CUDA runtime's own table of kernels; everything that belongs to one
 * runtime (a kernel resolved in a context, a module loaded) lives in that runtime's
 * backend. Two runtimes in one process see the same kernels and share nothing else.
 *
 * Lifetime: a kernel is registered until gr_kernel_unregister removes its name, which may
 * then be registered again. A graph holds each kernel its nodes resolved until the graph is
 * freed (gr_graph_destroy and the end of its last job), so a graph never sees its kernels
 * change: an unregistered kernel that graphs still use is only unnamed, and is freed (its
 * destroy called) when the last of them goes. At most GR_MAX_KERNELS definitions are
 * registered at once; unregistered ones waiting for their graphs do not count.
 * ------------------------------------------------------------------------------------- */

/* A scalar argument of a kernel, in the member its signature names (f32 for float32). */
typedef union gr_scalar {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
} gr_scalar;

/*
 * The arguments of one kernel launch, the same for the CPU and the CUDA implementation:
 * a CPU implementation gets a pointer to them, a CUDA kernel gets them by value as its only
 * parameter (`__global__ void k(gr_kernel_args a)`). Pointers are the buffers of one
 * iteration in the device's memory (host memory on the host backend), each aligned to
 * GR_BUFFER_ALIGN bytes; element types are the kernel's signature. The kernel computes
 * elements [0, n) of `out` from in[0 .. n_inputs - 1]; for an elementwise kernel the unit
 * may be a chunk of a tensor or a batch of several, so element i of the output may depend
 * on element i of the inputs only. Fields may be appended in later versions, never
 * reordered.
 */
typedef struct gr_kernel_args {
    void *out;                            /* the output buffer */
    const void *in[GR_MAX_KERNEL_INPUTS]; /* the input buffers; unused ones NULL */
    uint64_t n;                           /* elements of `out` to compute */
    uint64_t in_n[GR_MAX_KERNEL_INPUTS];  /* elements of each input: the tensor's, or a
                                             fixed buffer's (gr_buffer_desc) */
    gr_scalar s[GR_MAX_SCALARS];          /* the node's scalar arguments */
    /* The tensor's shape (gr_tensor): rank 0 for an elementwise kernel's chunk or batch, and
     * for a tensor given without one; then the data is one dimension of in_n[0] elements. */
    uint64_t shape[GR_MAX_DIMS];
    uint32_t rank;
    uint32_t reserved_; /* zero */
} gr_kernel_args;

/* A CPU implementation: compute what `a` says; `user` is the definition's user pointer. */
typedef void (*gr_kernel_cpu_fn)(const gr_kernel_args *a, void *user);

/* A CUDA implementation as a launch callback (GR_CUDA_LAUNCH): enqueue the kernel's work
 * on `stream` for the arguments `a` (device pointers), and return 0, or nonzero to fail
 * the iteration. The calls are captured into the iteration's CUDA graph (stream capture,
 * thread-local mode), and the capture is replayed; the callback runs again, and its capture
 * replaces the old one, only when the arguments change. So it must enqueue the same kind
 * of work for the same arguments, only stream-ordered work on `stream` (kernel launches,
 * async copies and memsets, library calls that support capture, such as cuBLAS), and never
 * synchronize. `stream` is a cudaStream_t (a CUstream), passed as a pointer so that this
 * header needs no CUDA header. */
typedef int (*gr_kernel_launch_fn)(void *stream, const gr_kernel_args *a, void *user);

/* What gr_kernel_def.cuda holds. */
typedef enum gr_cuda_kind {
    GR_CUDA_NONE = 0, /* no CUDA implementation: the CUDA backend refuses graphs using it */
    /* The address of a `__global__ void f(gr_kernel_args)` compiled into the same program as
     * graphrun's CUDA runtime (a program linked with the static library, as the built-ins
     * are); to the shared library, pass a GR_CUDA_KERNEL handle instead. */
    GR_CUDA_ENTRY,
    /* A cudaKernel_t (CUkernel): from cudaGetKernel(&k, f) in the caller's own CUDA runtime,
     * or cudaLibraryGetKernel / cuLibraryGetKernel. Valid in every context and with every
     * CUDA runtime of the process. */
    GR_CUDA_KERNEL,
    /* A CUfunction (cudaFunction_t, from cudaGetFuncBySymbol or cuModuleGetFunction): valid
     * only in the context it was loaded in, so only with primary contexts on one device (the
     * CUDA backend refuses it with GR_CONTEXT_PRIVATE or several devices). */
    GR_CUDA_FUNCTION,
    /* A gr_kernel_launch_fn (cast to const void *), with `user` passed to it. */
    GR_CUDA_LAUNCH,
    /* CUDA C source text (NUL-terminated; copied), compiled at run time by NVRTC, with
     * cuda_name naming its `extern "C" __global__ void NAME(gr_kernel_args)`. The source
     * may #include "graphrun_kernel.h", which defines gr_kernel_args, gr_scalar and
     * GR_FOR_EACH (docs/API.md). */
    GR_CUDA_SOURCE,
    /* A gr_kernel_launch_fn (cast to const void *) called eagerly, on the worker's thread,
     * for every iteration: it enqueues its work on the stream it is given (the iteration's,
     * after the node's inputs are there and before its output is copied out) and returns;
     * nothing is captured, so the work may be anything stream-ordered, even what a CUDA
     * graph cannot hold (code that allocates, PyTorch functions, libraries). A graph with
     * such a node runs without a CUDA graph: its copies and kernels are enqueued one by one
     * on the stream (its GR_CUDA_FUNCTION kernels cannot run that way and are refused). */
    GR_CUDA_STREAM,
} gr_cuda_kind;

/* How many elements a kernel writes to its output. */
typedef enum gr_out_size {
    GR_OUT_ELEMS = 0, /* as many as the tensor has: n = the tensor's elements */
    GR_OUT_ONE,       /* one: a reduction of the whole tensor (n = 1) */
    /* As many as its output buffer holds, which must be a fixed buffer: n = its fixed_elems
     * (a spectrum, per-row statistics: a result of a size of its own). */
    GR_OUT_BUFFER,
} gr_out_size;

typedef struct gr_kernel_def {
    uint32_t struct_size; /* sizeof(gr_kernel_def) at the caller's compile time */
    uint32_t magic;       /* GR_KERNEL_DEF_MAGIC */
    const char *name;     /* 1 to GR_NAME_MAX characters of [A-Za-z0-9_.-]; copied */
    const char *doc;      /* one line for listings; optional; copied */
    uint32_t n_inputs;    /* 0 .. GR_MAX_KERNEL_INPUTS */
    uint32_t n_scalars;   /* 0 .. GR_MAX_SCALARS */
    gr_dtype out_dtype;
    gr_dtype in_dtype[GR_MAX_KERNEL_INPUTS];
    gr_dtype scalar_dtype[GR_MAX_SCALARS];
    /* Nonzero: element i of the output depends only on element i of each input (and on the
     * whole of each small input), so any part of a tensor may be computed alone. A graph is
     * cut into parts only where its kernels' small inputs are constants (gr_graph_add_const),
     * which every part sees whole. */
    int elementwise;
    gr_kernel_cpu_fn cpu; /* NULL: the host backend refuses graphs using the kernel */
    gr_cuda_kind cuda_kind;
    const void *cuda; /* as cuda_kind says */
    /* The launch rule on CUDA: blocks of cuda_block threads (0: 256, at most 1024), and
     * ceil(n / cuda_block) blocks, at most cuda_blocks_per_sm (0: 8) per multiprocessor of
     * the device and at most cuda_max_blocks (0: no such cap); the kernel must cover [0, n)
     * whatever the grid (a grid-stride loop). */
    uint32_t cuda_block;
    uint32_t cuda_blocks_per_sm;
    void *user; /* passed to cpu (and to a launch callback) */
    /* Appended in 0.2. */
    gr_out_size out_size;    /* GR_OUT_ELEMS unless a reduction; elementwise needs ELEMS */
    /* Bit i set: input i may be of any size (a small vector, a fixed buffer); the kernel
     * reads in_n[i] elements of it. Clear: the input holds at least the tensor's elements. */
    uint32_t small_inputs;
    uint32_t cuda_max_blocks;
    const char *cuda_name;   /* GR_CUDA_SOURCE: the entry's name; copied */
    /* Appended in 0.3. Called once with `user` when the kernel is freed: after
     * gr_kernel_unregister, once no graph uses it any more (on whichever thread unregisters
     * it or frees its last graph, which may be a runtime's worker ending the graph's last
     * job, with no runtime lock held: keep it short). Never for a registration that
     * fails (the caller keeps `user`), nor at process exit for a kernel still registered.
     * It must not call back into the kernel registry. NULL: nothing to free. */
    void (*destroy)(void *user);
} gr_kernel_def;

#define GR_MAX_KERNELS 4096
#define GR_KERNEL_DEF_MAGIC 0x67724b44u /* "grKD" */
#ifdef __cplusplus
#define GR_KERNEL_DEF_INIT {sizeof(gr_kernel_def), GR_KERNEL_DEF_MAGIC}
#else
#define GR_KERNEL_DEF_INIT {.struct_size = sizeof(gr_kernel_def), .magic = GR_KERNEL_DEF_MAGIC}
#endif

/*
 * Register a kernel: the definition is copied (its strings too); the functions and handles
 * it names must stay valid until its destroy is called (for the life of the process when it
 * is never unregistered). From then on graphs may name it
 * (gr_graph_add_kernel, graph specs). A name may be registered again for other element
 * types (an overload, with the same counts of inputs and scalars): a graph node gets the
 * definition whose input and output types are its buffers'. Refused with
 * GR_ERR_INVALID_ARGUMENT (and the reason in err): an uninitialized definition, a bad name,
 * a built-in's name, a name taken for the same types or other counts, counts or types out
 * of range,
 * an unknown cuda_kind, a block size over 1024, no implementation at all; GR_ERR_OVER_BUDGET
 * with GR_MAX_KERNELS registered; GR_ERR_OUT_OF_MEMORY. Any thread.
 */
gr_status gr_kernel_register(const gr_kernel_def *def, gr_error_info *err);

/*
 * Unregister every definition called `name` (all its overloads): from now on graphs cannot
 * name it, and the name may be registered again, for the same types or others. Graphs
 * built before keep the definitions they resolved, unchanged, and can still run; each
 * definition is freed, and its destroy called, once no graph holds it: now when none
 * does, else when the last one is freed. GR_ERR_INVALID_ARGUMENT for a NULL or unknown
 * name or a built-in's. Any thread; a kernel's gr_kernel_info_get strings are valid only
 * until it is unregistered (a spec's expression kernel, registered by gr_graph_parse, until
 * the last graph holding it is freed).
 */
gr_status gr_kernel_unregister(const char *name, gr_error_info *err);

/*
 * Register the kernels that the CUDA C source file at `path` declares, each compiled by
 * NVRTC (GR_CUDA_SOURCE, no CPU implementation): a line of the form
 *
 *     // graphrun: kernel NAME [inputs=N] [scalars=N] [elementwise] [out=elems|one]
 *     //           [block=N] [blocks_per_sm=N] [max_blocks=N]   (all on one line)
 *
 * declares `extern "C" __global__ void NAME(gr_kernel_args a)` of the file, with its
 * signature (inputs default 1, scalars 0, every type float32). A kernel of that name
 * already registered from the very same file text and declaration is left as it is (so
 * specs naming one file may be loaded many times); any other taken name is refused.
 * GR_ERR_INVALID_ARGUMENT with "PATH:LINE:COL: reason" in err for a file that cannot be
 * read, a malformed declaration, no declaration at all, or source NVRTC refuses (its log's
 * first lines); GR_ERR_UNAVAILABLE when NVRTC cannot be loaded (the message says what to
 * install). Kernels registered before a failure stay registered. Any thread.
 */
gr_status gr_kernel_load_file(const char *path, gr_error_info *err);

/*
 * An elementwise expression over named inputs, as a kernel (docs/GRAPH_SPEC.md, "Expression
 * kernels", has the language, its types and how closely CPU and CUDA agree): "x * 2 - y"
 * over inputs x and y. Start from GR_EXPR_DEF_INIT; fields are only ever appended.
 */
#define GR_EXPR_MAX_TEXT 4096  /* bytes of an expression */
#define GR_EXPR_MAX_PARAMS 64  /* named constants of one expression */
typedef struct gr_expr_def {
    uint32_t struct_size; /* sizeof(gr_expr_def) at the caller's compile time */
    uint32_t magic;       /* GR_EXPR_DEF_MAGIC */
    const char *text;     /* the expression, NUL-terminated */
    uint32_t n_inputs;    /* 1 .. GR_MAX_KERNEL_INPUTS */
    /* Input k's name in the text ([A-Za-z_][A-Za-z0-9_.]*, at most GR_NAME_MAX characters)
     * and element type (the type of the buffer the graph gives it). */
    const char *input_names[GR_MAX_KERNEL_INPUTS];
    gr_dtype input_dtype[GR_MAX_KERNEL_INPUTS];
    gr_dtype out_dtype;   /* the output buffer's type */
    /* Named constants the text may use, with finite values (NULL with n_params 0). */
    uint32_t n_params;
    const char *const *param_names;
    const double *param_values;
} gr_expr_def;

#define GR_EXPR_DEF_MAGIC 0x67724558u /* "grEX" */
#ifdef __cplusplus
#define GR_EXPR_DEF_INIT {sizeof(gr_expr_def), GR_EXPR_DEF_MAGIC}
#else
#define GR_EXPR_DEF_INIT {.struct_size = sizeof(gr_expr_def), .magic = GR_EXPR_DEF_MAGIC}
#endif

/*
 * Compile the expression and register it as an elementwise kernel with a CPU and a CUDA
 * implementation (NVRTC; where NVRTC cannot be loaded, the CPU one only), with no scalars,
 * or find the one an earlier call registered for the same computation (the same operations,
 * constants and types, whatever the names). Its name, "expr." and 16 hex digits, goes to
 * `name` (at least GR_NAME_MAX + 1 bytes), for gr_graph_add_kernel with the inputs in
 * order. GR_ERR_INVALID_ARGUMENT for a bad definition, or text that does not parse or type
 * (err->message "expr:LINE:COL: reason", COL the byte in the line of the text, from 1);
 * GR_ERR_OVER_BUDGET with GR_MAX_KERNELS registered; GR_ERR_OUT_OF_MEMORY. The kernel stays
 * registered until gr_kernel_unregister(name). Any thread.
 */
gr_status gr_kernel_register_expr(const gr_expr_def *def, char *name, size_t name_size,
                                  gr_error_info *err);

/* Registered kernels, for listing (the built-ins first, then in registration order).
 * Initialize with GR_KERNEL_INFO_INIT: fields are only ever appended, and a caller compiled
 * against an older, shorter struct gets the fields it knows (as gr_stats). */
typedef struct gr_kernel_info {
    uint32_t struct_size; /* sizeof(gr_kernel_info) at the caller's compile time */
    uint32_t magic;       /* GR_KERNEL_INFO_MAGIC */
    const char *name;
    uint32_t n_inputs;
    uint32_t n_scalars;
    int elementwise; /* nonzero: may run on any part of a tensor independently */
    const char *doc;
    /* Its element types. A name may have several definitions (overloads) for other types:
     * each is listed, the built-ins' float32 one first. */
    gr_dtype out_dtype;
    gr_dtype in_dtype[GR_MAX_KERNEL_INPUTS];
} gr_kernel_info;

#define GR_KERNEL_INFO_MAGIC 0x67724b49u /* "grKI" */
#ifdef __cplusplus
#define GR_KERNEL_INFO_INIT                                                                 \
    {sizeof(gr_kernel_info), GR_KERNEL_INFO_MAGIC, NULL, 0, 0, 0, NULL, GR_DTYPE_FLOAT32, \
     {GR_DTYPE_FLOAT32}}
#else
#define GR_KERNEL_INFO_INIT                                                                 \
    {.struct_size = sizeof(gr_kernel_info), .magic = GR_KERNEL_INFO_MAGIC}
#endif

/* How many kernels are registered now (unregistered ones not counted). Any thread. */
uint32_t gr_kernel_count(void);

/* The i-th registered kernel (i < gr_kernel_count()) into `out` (initialized with
 * GR_KERNEL_INFO_INIT), up to its struct_size; its strings are valid until it is
 * unregistered (for the life of the process if it never is). Unregistering a kernel moves
 * those after it down by one. GR_ERR_INVALID_ARGUMENT for i out of range, NULL or an
 * uninitialized struct. Any thread. */
gr_status gr_kernel_info_get(uint32_t i, gr_kernel_info *out);

/* ---------------------------------------------------------------------------------------
 * Jobs.
 * ------------------------------------------------------------------------------------- */
typedef struct gr_job gr_job;

/* One tensor: host pointers per port and its size. in[i] is read by the H2D nodes of input
 * port i, out[i] written by the D2H of output port i; each holds `elems` elements of the
 * port's type (a port copied to or from a fixed buffer holds that buffer's fixed_elems).
 * out[i] may equal in[j] (in place). Unused ports must be NULL.
 *
 * The shape is optional: rank 0 (the zeroed default) means one dimension of `elems`;
 * otherwise shape[0 .. rank-1] (rank <= GR_MAX_DIMS, the last dimension the fastest
 * varying, as in C and NumPy) must multiply to `elems`. Elementwise kernels ignore it;
 * kernels that are not elementwise see it (gr_kernel_args), row-wise ones take their rows
 * from the last dimension. */
typedef struct gr_tensor {
    const void *in[GR_MAX_PORTS];
    void *out[GR_MAX_PORTS];
    uint64_t elems;
    uint32_t rank;
    uint64_t shape[GR_MAX_DIMS];
} gr_tensor;

/* Called exactly once per accepted job, when its last index has ended, with no runtime
 * lock held, on whichever thread ended that index: a worker, the deadline thread, a thread
 * that canceled the job or shut the runtime down, or the submitting thread itself just
 * before gr_job_submit returns (when the job ended while it was still queuing). It never
 * runs before the handle is stored in gr_job_submit's *out. It may call gr_job_* functions
 * on this job (gr_job_destroy gives back the caller's handle; a detached job has none), but
 * must not block for long, and must not call gr_job_submit (refused: it could wait on the
 * runtime's own threads forever) or gr_runtime_destroy. gr_job_wait returns only after it
 * has returned. */
typedef void (*gr_job_callback)(gr_job *job, gr_status status, void *user);

typedef struct gr_job_options {
    uint32_t struct_size;
    uint32_t magic;        /* GR_JOB_OPTIONS_MAGIC */
    int64_t deadline_ns;   /* absolute gr_now_ns() time; GR_NO_DEADLINE for none. Indices
                              not executing by then (queued, or waiting for device memory)
                              end as failed with GR_ERR_TIMEOUT; iterations already
                              executing finish. */
    gr_job_callback on_complete; /* optional */
    void *user;                  /* passed to on_complete */
    /* Appended in 0.3: the contents of the graph's constants (gr_graph_add_const), one host
     * pointer each in the order they were added (gr_graph_const_get says each one's bytes),
     * n_constants of them: exactly as many as the graph has. Read by the job's workers, once
     * per device, until the job completes; the memory must stay valid until then. NULL and
     * 0 for a graph without constants. */
    const void *const *constants;
    uint32_t n_constants;
    /* Appended after n_constants (options whose struct_size ends before it mean 0):
     * nonzero to queue the job, once complete, for gr_runtime_reap (which makes
     * gr_runtime_completion_fd readable). Needs a handle: a detached job (out NULL) with
     * notify is refused (GR_ERR_INVALID_ARGUMENT). */
    uint32_t notify;
} gr_job_options;

#define GR_JOB_OPTIONS_MAGIC 0x67724a4fu /* "grJO" */
#ifdef __cplusplus
#define GR_JOB_OPTIONS_INIT                                                                 \
    {sizeof(gr_job_options), GR_JOB_OPTIONS_MAGIC, GR_NO_DEADLINE, NULL, NULL, NULL, 0, 0}
#else /* designated, so -Wmissing-field-initializers stays quiet about the rest */
#define GR_JOB_OPTIONS_INIT                                                                 \
    {.struct_size = sizeof(gr_job_options), .magic = GR_JOB_OPTIONS_MAGIC,                  \
     .deadline_ns = GR_NO_DEADLINE}
#endif

/*
 * Submit `count` tensors through finalized graph `g`. The tensor array is copied; the host
 * memory it points to must stay valid, and outputs untouched by the caller, until the job
 * completes. Validates everything first: on a refusal nothing is queued, *out is NULL and
 * `err` (optional) names the index and reason. Refusals: NULL arguments, count 0, a graph
 * not finalized, a missing or extra port pointer, elems 0, a shape that does not describe
 * the tensor, outputs that overlap each other or another index's input, a tensor whose
 * iteration cannot fit the budget (GR_ERR_OVER_BUDGET), constants missing or not fitting the
 * budget (gr_job_options.constants: GR_ERR_INVALID_ARGUMENT, GR_ERR_OVER_BUDGET), a kernel the
 * backend cannot run
 * (GR_ERR_UNAVAILABLE), a call from a completion callback (GR_ERR_INVALID_USAGE), shutdown
 * (GR_ERR_SHUTDOWN).
 *
 * On GR_OK the job is accepted: all indices will end, even if the job's deadline passes or
 * the runtime shuts down while this call is still queuing them. *out receives the handle,
 * to be given back with gr_job_destroy; with out == NULL the job is detached (it runs to its
 * end, its callback is its only report, and it frees itself). Sleeps while the task ring is
 * full (backpressure). Any thread.
 */
gr_status gr_job_submit(gr_runtime *rt, gr_graph *g, const gr_tensor *tensors, uint64_t count,
                        const gr_job_options *opts, gr_job **out, gr_error_info *err);

/*
 * Wait until the job completes (every index has ended and the completion callback, if any,
 * has returned) or `timeout_ns` passes (GR_WAIT_FOREVER: no limit; runtime shutdown
 * completes every job, so that wait ends too; 0: just look).
 *
 * Returns GR_OK when the job is complete, GR_ERR_TIMEOUT when it is not (yet). The two are
 * never confused with the job's own outcome, which goes to `result` (optional) once
 * complete: GR_OK when every index is done, otherwise the status of the first index that
 * did not finish (GR_ERR_CANCELED, GR_ERR_TIMEOUT for the job's deadline, ...). Any thread,
 * any number of waiters; from the job's own callback it answers at once.
 */
gr_status gr_job_wait(gr_job *job, int64_t timeout_ns, gr_status *result);

/* Cancel: indices not yet started end as canceled at once; running iterations finish (done)
 * and their outputs are written. Idempotent. Any thread.
 *
 * Outputs of an index that did not finish (canceled, failed, timed out) are untouched, with
 * one exception: a tensor that a splittable graph processes in chunks (it is larger than a
 * worker's share of the budget) may have the chunks that finished before the stop written,
 * each with its correct result. */
gr_status gr_job_cancel(gr_job *job);

/* Initialize with GR_JOB_PROGRESS_INIT: fields are only ever appended, and a caller
 * compiled against an older, shorter struct gets the fields it knows (as gr_stats). */
typedef struct gr_job_progress {
    uint32_t struct_size; /* sizeof(gr_job_progress) at the caller's compile time */
    uint32_t magic;       /* GR_JOB_PROGRESS_MAGIC */
    uint64_t total;
    uint64_t queued;    /* not started */
    uint64_t in_flight; /* started, not ended */
    uint64_t done;
    uint64_t failed;
    uint64_t canceled;
} gr_job_progress;

#define GR_JOB_PROGRESS_MAGIC 0x67724a50u /* "grJP" */
#ifdef __cplusplus
#define GR_JOB_PROGRESS_INIT                                                                \
    {sizeof(gr_job_progress), GR_JOB_PROGRESS_MAGIC, 0, 0, 0, 0, 0, 0}
#else
#define GR_JOB_PROGRESS_INIT                                                                \
    {.struct_size = sizeof(gr_job_progress), .magic = GR_JOB_PROGRESS_MAGIC}
#endif

/* A snapshot into `out` (initialized with GR_JOB_PROGRESS_INIT), up to its struct_size;
 * GR_ERR_INVALID_ARGUMENT for NULL or an uninitialized struct. The fields are read one
 * after another while work goes on, so they may be off by in-progress transitions, and they
 * lag gr_job_index_get by up to a unit's tensors (a unit counts its indices' ends together;
 * a stop, all of the job's queued ones). done + failed + canceled == total exactly once the
 * job is complete. Any thread. */
gr_status gr_job_progress_get(const gr_job *job, gr_job_progress *out);

typedef enum gr_index_state {
    GR_INDEX_QUEUED = 0,
    GR_INDEX_RUNNING,
    GR_INDEX_DONE,
    GR_INDEX_FAILED,
    GR_INDEX_CANCELED,
} gr_index_state;

/* State of one index and, once it has ended, its status (GR_OK when done). Any thread. */
gr_status gr_job_index_get(const gr_job *job, uint64_t index, gr_index_state *state,
                           gr_status *status);

/* The first failure of the job (status GR_OK when none). Any thread. */
gr_status gr_job_error_get(const gr_job *job, gr_error_info *out);

/* Nonzero once every index has ended (the callback may still be running). Any thread. */
int gr_job_is_complete(const gr_job *job);

/* The job's number in its runtime's log messages and NVTX ranges: 1 for the runtime's first
 * accepted job, counting up. 0 for NULL. Any thread. */
uint64_t gr_job_id(const gr_job *job);

/*
 * A file descriptor that becomes readable when the job completes, for event loops (epoll,
 * poll, libuv's uv_poll_t, asyncio's add_reader): put it in the poll set, and when it is
 * readable the job's result is final, gr_job_wait returns at once and the completion
 * callback, if any, has returned. It is never readable before then. It is an eventfd
 * (EFD_CLOEXEC | EFD_NONBLOCK) whose counter goes from 0 to 1 once, made on the first call
 * (readable at once if the job is already complete); later calls give the same one. It
 * belongs to the job: do not close it; remove it from your poll set before gr_job_destroy,
 * which closes it. Reading it is not needed, and resets it to not readable (the job stays
 * complete); a level-triggered poll set should drop it, or the job be destroyed, once seen.
 *
 * One descriptor per job: a server with many jobs in flight holds that many descriptors
 * (mind RLIMIT_NOFILE), and pays an eventfd and two epoll_ctl calls per job.
 *
 * GR_ERR_INVALID_ARGUMENT for a NULL fd; GR_ERR_INVALID_USAGE for a destroyed job, a job
 * whose handle was given back (also from its callback), or a detached one; GR_ERR_OUT_OF_MEMORY
 * when no descriptor can be made (the process or system limit on descriptors, or memory).
 * *fd is -1 on a failure. Linux only. Any thread.
 */
gr_status gr_job_completion_fd(gr_job *job, int *fd);

/*
 * The runtime's completion queue, for servers with many jobs in flight: one descriptor in
 * the poll set for all of them. A job submitted with gr_job_options.notify is queued when
 * it completes, under the same rule as gr_job_completion_fd (its result final, gr_job_wait
 * answering at once, its callback returned), in the order jobs complete.
 *
 * gr_runtime_completion_fd: an eventfd (EFD_CLOEXEC | EFD_NONBLOCK), made on the first call,
 * the same one later, readable exactly while the queue holds a job (gr_runtime_reap
 * resets it when it takes the last; level-triggered use needs nothing more, edge-triggered
 * use must reap until *n < max). It belongs to the runtime: gr_runtime_destroy closes it;
 * do not close or read it. GR_ERR_OUT_OF_MEMORY when no descriptor can be made;
 * GR_ERR_INVALID_USAGE for a destroyed runtime. Linux only. Any thread.
 *
 * gr_runtime_reap: takes up to `max` completed notify jobs off the queue into jobs[0 ..
 * *n - 1], oldest first, without blocking (*n is 0 when there are none). Each is the
 * handle gr_job_submit returned, still the caller's to gr_job_destroy. A job destroyed
 * before it is reaped leaves the queue. GR_ERR_INVALID_ARGUMENT for NULL jobs (with max >
 * 0) or n. Any thread; reapers on several threads each get different jobs.
 */
gr_status gr_runtime_completion_fd(gr_runtime *rt, int *fd);
gr_status gr_runtime_reap(gr_runtime *rt, gr_job **jobs, size_t max, size_t *n);

/* Give back the handle gr_job_submit returned. A job still running keeps running to its
 * end (its callback still runs, and may still use the handle; call gr_job_cancel first to
 * stop it); the host memory it uses must stay valid until then. Once the job is complete
 * and destroyed, every call with the handle returns GR_ERR_INVALID_USAGE. Closes the job's
 * completion descriptor (gr_job_completion_fd), at once even if the job is still running,
 * and takes it off the runtime's completion queue (gr_runtime_reap) or keeps it from it.
 * NULL is a no-op; so is a second call. */
void gr_job_destroy(gr_job *job);

#ifdef __cplusplus
}
#endif

#endif /* GRAPHRUN_H */

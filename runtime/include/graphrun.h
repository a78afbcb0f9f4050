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
 * threads, on the same handle too; "owner" means the single thread that builds the object,
 * until it is finalized (a graph is not locked: two threads building one graph race). A
 * destroy is called once per handle (or reference) by whoever holds it, after the holder's
 * other calls on it have returned.
 *
 * Handles are opaque. Every _destroy(NULL) is a no-op. Calls that can fail return a
 * gr_status; detail always comes as a gr_error_info: filled by the call itself through its
 * optional `err`, or, for calls without one, kept on the handle and read with
 * gr_graph_error_get or gr_job_error_get. Never in a process-wide global.
 *
 * Runtime and job handles are checked: once a runtime is destroyed, or a job is complete
 * and destroyed, every call with its handle returns GR_ERR_INVALID_USAGE (destroys do
 * nothing) instead of touching freed memory, and so does a runtime handle passed for a job
 * or the other way round; only a call racing on another thread with the destroy itself is
 * undefined. A gr_graph is a plain reference-counted object, not checked: do not use it
 * after gr_graph_destroy. In a child forked from a process with a running runtime, every
 * call on the parent's runtime and jobs returns GR_ERR_INVALID_USAGE (the destroys do
 * nothing; the child's exit gives the memory back): the child has none of the runtime's
 * threads and cannot use its CUDA context. The child may create a runtime of its own.
 * docs/RELIABILITY.md lists every misuse and its status.
 *
 * Memory: graphrun never frees what the caller owns and never hands the caller memory to
 * free with free(); gr_host_alloc memory goes back with gr_host_free. Strings it returns
 * are static (the names of statuses, backends, levels and types) or owned by a graph or a kernel
 * registration, as each call says. Structs the caller passes are the caller's, filled in
 * place. Those the library fills that may grow (gr_stats, gr_runtime_info,
 * gr_job_progress, gr_kernel_info) start with struct_size and magic, set by their *_INIT
 * macro: the library refuses one not made from it (GR_ERR_INVALID_ARGUMENT) and writes no
 * further than its struct_size, so a program compiled against an older header gets the
 * fields it knows. Structs the caller gives (gr_config, gr_job_options, gr_buffer_desc,
 * gr_kernel_def, gr_expr_def) carry the same two fields: the library refuses one not made
 * from its initializer, and takes one made by an earlier release's header, giving the
 * fields it lacks their defaults, so a program built against an older header runs. The
 * library never calls exit() or abort(), and prints nothing (logging goes to the caller's
 * callback, or to stderr only when GR_LOG asks).
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
    gr_status status;  /* the status the call returned: err is filled on failure only */
    uint64_t index;    /* tensor index, or GR_NO_INDEX when the failure is not about one */
    char node[32];     /* graph node name, "" when not about a node */
    char message[256]; /* human-readable reason, NUL-terminated, at most 255 characters */
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

/* "auto", "host", "cuda"; "unknown" for other values. Static text. Any thread. */
const char *gr_backend_name(gr_backend b);

/* Whether backend `b` can run here, and on how many devices (*devices), without creating a
 * runtime (for CUDA and AUTO it initializes the CUDA runtime to count the devices).
 * `devices`, `chosen` and `err` are optional; *chosen is the backend `b` resolves to (AUTO
 * resolves to CUDA or HOST). GR_OK: HOST always (one device: the default host_devices);
 * CUDA when at least one device is present and every device has compute capability 9.0 or
 * later; AUTO always (it falls back to HOST); a value that is none of the three is answered
 * as AUTO. GR_ERR_UNAVAILABLE (CUDA only) for no usable driver or device, or a device older
 * than sm_90, with the reason in `err`. Any thread. */
gr_status gr_backend_probe(gr_backend b, uint32_t *devices, gr_backend *chosen,
                           gr_error_info *err);

/*
 * CUDA contexts of the workers. PRIMARY: every worker binds the device's primary context
 * (the one the CUDA runtime API uses), so it shares it with the rest of the process.
 * PRIVATE: every worker creates a context of its own (driver API); a fault in one worker's
 * context leaves the others usable, at the cost of memory and start-up time per worker and
 * of kernels of different workers time-sliced rather than concurrent (docs/PERFORMANCE.md
 * has the measurements). A worker whose private context faults retires. Where the driver
 * poisons every context of the process on a device after a sticky fault (the H200's does),
 * PRIVATE isolates nothing: docs/RELIABILITY.md.
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
 * header keeps compiling and working. gr_runtime_create checks every field and refuses a
 * bad one with GR_ERR_INVALID_ARGUMENT and a message naming it; the ranges below are what
 * it takes.
 */
typedef struct gr_config {
    uint32_t struct_size; /* sizeof(gr_config) at the caller's compile time */
    uint32_t magic;       /* GR_CONFIG_MAGIC: catches uninitialized structs ("config not
                             initialized with GR_CONFIG_INIT") */
    /* Default AUTO: CUDA when a usable GPU (compute capability 9.0 or later) is present,
     * else the host backend, with the reason in gr_runtime_info.backend_note. */
    gr_backend backend;
    /* Device memory the runtime may hold, per device, in bytes. Required (0 is refused).
     * The runtime reserves one arena of this size per device at create time, rounded down
     * to the backend's allocation granule (256 bytes on the host backend, 2 MiB on CUDA,
     * whose allocations come in 2 MiB pages; a budget below the granule is refused), and
     * allocates no device memory per tensor. The CUDA backend holds up to
     * GR_CUDA_OVERHEAD_BOUND beside it: size the budget so that the two fit the device. */
    uint64_t budget_bytes;
    /* Worker threads per device, 1 to 1024, each with its own stream (and, with
     * GR_CONTEXT_PRIVATE, context); default 3. */
    uint32_t workers_per_device;
    /* Task ring entries, a power of two from 2 to 2^30; default 4096. gr_job_submit sleeps
     * while the ring is full. */
    uint32_t ring_capacity;
    /* Host backend only: devices to emulate, 1 to 64, each with its own budget and workers;
     * default 1. */
    uint32_t host_devices;
    gr_context_mode context_mode; /* CUDA backend: which context workers use; PRIMARY */
    /* Graphs whose kernels are all elementwise (and buffers the tensor's size) are cut into
     * units of work (docs/PERFORMANCE.md): tensors larger than a worker's share of the
     * budget in chunks, tensors smaller than batch_below_bytes packed together. A unit that
     * is not one piece of DMA-ready memory goes through a pinned staging buffer of
     * staging_bytes per worker, gathered and scattered by copy_threads host threads. Each
     * worker pins its buffer when the runtime is created, so that the first staged job
     * does not pay for it: workers_per_device * staging_bytes of pinned host memory per
     * device. It also bounds a staged unit and batches of small tensors (units.c), so
     * setting it small suits only a runtime whose tensors are pinned and at least
     * batch_below_bytes. Where the backend copies tensors where they lie (CUDA, pinned
     * memory), tensors up to 16 MiB are batched too, each copied by the DMA engine from
     * 32 KiB (gathered by the CPU below that). */
    uint32_t copy_threads;      /* 0 to 256; default 0: one per CPU but one, at most 16 */
    uint64_t staging_bytes;     /* per worker, at least 4096; default 64 MiB */
    uint64_t batch_below_bytes; /* default 1 MiB; 0: never batch */
    /* 0: never cut or pack: every tensor is one iteration, and a tensor whose iteration does
     * not fit the budget is refused. Its outputs are then all or nothing even when the job
     * is stopped. Default 1. */
    uint32_t split_tensors;
    /* Private to <graphrun_testing.h> (gr_testing_set_fault_plan sets it): leave it as
     * GR_CONFIG_INIT leaves it, NULL. The slot keeps the fields after it where they were. */
    const char *testing_;
    /* Logging (see "Logging" above): messages at log_level and above go to log_callback
     * (default NULL: none, unless GR_LOG is set), with log_user passed through. Default
     * level GR_LOG_INFO; GR_LOG overrides it. */
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
    uint32_t device_count; /* entries in devices: 0 with NULL, else 1 to 1024 */
    /* Appended in 0.2. Splittable graphs: a tensor whose host bytes (inputs and outputs
     * together) are above this is cut into chunks of about this size even when it would fit
     * a worker's share whole, so that its copies in, kernels and copies out overlap with
     * each other's instead of the first copy in and the last copy out of a job running
     * alone for a whole tensor's time. Default 128 MiB; 0: cut only what does not fit;
     * otherwise at least 1 MiB. */
    uint64_t pipeline_bytes;
    /* Appended in 0.3. The registration cache: at most this many bytes of pageable host
     * memory that jobs use (port buffers of 1 MiB or more) are page-locked in place, in the
     * background, and kept, so that later jobs over the same memory copy it by DMA at the
     * link's speed instead of staging it through the CPU (the first job over a range runs
     * staged, as without the cache, and the range is registered by a background thread
     * once no job is live, because registering stalls other threads' CUDA calls; a job that
     * uses it again before then has it registered at once and waits in gr_job_submit for
     * that, about one staged pass over it, never past its deadline; ranges no live job uses
     * are evicted least recently used first). A job copies by DMA only ranges registered,
     * whole, when it was submitted: a range that overlaps a registered one without lying
     * inside it is staged, never handed to the DMA engine half page-locked (ranges that
     * share a page and are not yet registered are registered as one). Only on a
     * backend with pinned memory (CUDA); elsewhere it does nothing. Default 0: off.
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
 * at most (8 MiB + 2.5 MiB per worker), with `workers` workers per device and graphs of a
 * few dozen nodes: each
 * worker's stream, events and cache of up to 8 instantiated graphs, and the kernels'
 * modules. What the device reports with 3 to 64 workers is in docs/PERFORMANCE.md, "Device
 * memory the runtime holds". Graphs of hundreds of nodes, many kernels of one's own, or
 * more than 8 graph templates per worker in turn (4 with two units in flight: each has
 * graphs of its own) can take more: measure with `graphrun stress` or the bench's device
 * sampling.
 */
#define GR_CUDA_OVERHEAD_BOUND(workers) ((8ull << 20) + (uint64_t)(workers) * (5ull << 19))

/*
 * Create a runtime: checks the configuration, arms a fault plan if one is set
 * (graphrun_testing.h), chooses the backend, reserves each device's arena (the whole
 * budget, once), starts the workers and waits until each is ready (on CUDA: its context,
 * stream and event exist), and starts the deadline thread. On success *out is the
 * caller's until gr_runtime_destroy. On failure *out is NULL (when out is not), everything
 * started is undone and, when err is not NULL, err says why. cfg is copied. Any thread.
 *
 * GR_ERR_INVALID_ARGUMENT: cfg or out NULL, a field out of range (gr_config), a malformed
 * fault plan, a device list with a negative, repeated or absent number (the message names
 * the entry and the devices there are). GR_ERR_INVALID_USAGE: host_cache_bytes set while
 * another runtime of the process has the cache. GR_ERR_UNAVAILABLE: backend CUDA with no
 * usable GPU or driver (AUTO falls back to the host backend instead, and says so in
 * backend_note). GR_ERR_OUT_OF_MEMORY: host memory or a thread could not be had, or the
 * host backend could not reserve the arena's address space. GR_ERR_CUDA: the device memory
 * could not be reserved (the message gives the free and total memory), or a worker's
 * context, stream or event could not be created.
 */
gr_status gr_runtime_create(const gr_config *cfg, gr_runtime **out, gr_error_info *err);

/*
 * Begin shutting down, without waiting: submissions from now on get GR_ERR_SHUTDOWN, every
 * sleeping wait wakes, and every index that has not started ends as canceled with status
 * GR_ERR_SHUTDOWN (iterations already running finish, and their outputs are written). For
 * servers that stop taking work on a signal and destroy later. Idempotent; a NULL or
 * destroyed handle does nothing. Any thread, also a completion callback.
 */
void gr_runtime_shutdown(gr_runtime *rt);

/*
 * Shut down (as gr_runtime_shutdown), wait for running iterations, for threads still inside
 * gr_job_submit or gr_runtime_shutdown and for completion callbacks still running, join the
 * workers, free the devices' memory, and drop the handle. On return every job is complete
 * and no callback is running. Jobs still held by the caller stay valid until
 * gr_job_destroy. Threads still calling gr_job_submit or gr_runtime_shutdown meanwhile are
 * served or refused, never read freed memory. Of several destroys, also racing on different
 * threads, one does the work and the others return; a later call does nothing, and so does
 * a forked child's. From a completion callback (where waiting for every callback would
 * wait for itself) it only shuts down, as gr_runtime_shutdown, and the handle stays valid
 * for a destroy from another thread. NULL is a no-op.
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
 * GR_ERR_INVALID_ARGUMENT for NULL or an uninitialized struct (its magic wrong, or a
 * struct_size shorter than 0.3's); GR_ERR_INVALID_USAGE for a destroyed runtime or a
 * forked child's. Any thread. */
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

/* Statistics of one device: each field read atomically, one after another while work
 * goes on. An iteration is one unit of work: a whole tensor, a chunk of one, or a batch of
 * small ones. GR_ERR_INVALID_ARGUMENT for NULL or a device not below the device count;
 * GR_ERR_INVALID_USAGE for a destroyed runtime or a forked child's. Any thread. (The first
 * statistics call, kept as it was; gr_runtime_stats_get below has these and more.
 * gr_device_stats is frozen: it has no struct_size and never grows; new statistics go to
 * gr_stats.) */
gr_status gr_runtime_device_stats(const gr_runtime *rt, uint32_t device, gr_device_stats *out);

/* The backend's number of runtime device `device` (0 .. device_count - 1): its CUDA ordinal,
 * or its index among the host backend's emulated devices; config.devices[device] when a
 * list was given, else `device`. Statistics number devices as the runtime does.
 * GR_ERR_INVALID_ARGUMENT for NULL or a device out of range; GR_ERR_INVALID_USAGE for a
 * destroyed runtime or a forked child's. Any thread. */
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
    /* Appended in 0.4: device `device` again. Iterations that succeeded whose host memory,
     * some of it pageable, was streamed through the worker's pinned staging buffer in pieces
     * (the CPU moving one while the DMA engine moves the one before): a whole tensor of a
     * graph that cannot be cut into chunks (a map function's, a softmax), which the staged
     * path, in chunks, cannot take. Counted apart from units_direct, units_staged and
     * units_scattered, so that the four add up to the iterations done. */
    uint64_t units_streamed;
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
 * out of range; GR_ERR_INVALID_USAGE for a destroyed runtime or a forked child's. Any
 * thread. */
gr_status gr_runtime_stats_get(const gr_runtime *rt, uint32_t device, gr_stats *out);

/*
 * Render every statistic of every device in the Prometheus text exposition format
 * (version 0.0.4; metric names start with "graphrun_", per-device series carry a
 * device="N" label, histograms are in seconds) into buf, snprintf-style: writes at most
 * `size` bytes including a terminating NUL (nothing when size is 0; buf may then be NULL)
 * and returns the length of the whole text, without the NUL. A return >= size means the
 * text was cut short: call again with a larger buffer (the counters move between calls, so
 * leave some room, say a quarter more). Returns 0 only for a NULL, destroyed or forked
 * child's runtime, or when no host memory was left for the snapshot. The fields appended
 * after the histograms appear as graphrun_units_total{device,path},
 * graphrun_units_overlapped_total{device}, graphrun_copies_refused_total{device},
 * graphrun_host_cache_bytes, graphrun_host_cache_events_total{event} and
 * graphrun_host_cache_register_seconds_total. `buf` is the caller's. Any thread.
 */
size_t gr_runtime_stats_prometheus(const gr_runtime *rt, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------
 * Host memory.
 *
 * Copies from and to page-locked ("pinned") host memory run as real asynchronous DMA at the
 * speed of the link; copies of ordinary (pageable) memory go through the driver's staging
 * and are much slower. Tensors may live in either; these calls make pinned memory. On a
 * machine without a usable GPU they still work: gr_host_alloc returns ordinary page-aligned
 * memory, and register and unregister do nothing and return GR_OK. They need no runtime,
 * before, during or after any runtime's life.
 * ------------------------------------------------------------------------------------- */

/* `bytes` (> 0) of pinned host memory, 4096-byte aligned, usable from every device and
 * context. Free with gr_host_free. GR_ERR_OUT_OF_MEMORY when the system cannot pin that
 * much. Any thread. Requests of up to 2 MiB are carved, whole pages each, from a few larger
 * pinned allocations that the process keeps while any of their blocks lives (and one empty
 * one after): the driver copies many tensors of few allocations faster than of many. Two
 * such blocks may therefore lie back to back, and a job copies adjacent tensors as one
 * range; blocks of two such allocations never do. GR_HOST_POOL=0 in the environment gives
 * every request an allocation of its own.
 *
 * The memory is made under the CUDA context current on the calling thread (the device's
 * primary context when none is), and destroying a context frees the pinned memory made
 * under it: call it where no context of your own that you will destroy is current. On a
 * GR_CONTEXT_PRIVATE runtime's threads (its completion callbacks) what it returns lives only
 * until gr_runtime_destroy. In a child forked from a process that has used CUDA, requests
 * may fail with GR_ERR_OUT_OF_MEMORY (they neither hang nor carve the parent's blocks).
 * GR_ERR_INVALID_ARGUMENT for out NULL or bytes 0 (or too large to add a page to); on a
 * failure *out is NULL. */
gr_status gr_host_alloc(uint64_t bytes, void **out);

/* Free memory from gr_host_alloc. NULL is a no-op; anything else not from gr_host_alloc,
 * or freed already, is undefined. Any thread. */
void gr_host_free(void *p);

/* Pin existing memory [p, p + bytes) in place, for every device and context, and unpin it;
 * the memory stays the caller's and must stay allocated until gr_host_unregister.
 * GR_ERR_INVALID_ARGUMENT for p NULL or bytes 0; GR_ERR_INVALID_USAGE to register a range
 * already registered or unregister a p that is not; GR_ERR_OUT_OF_MEMORY when the system
 * cannot pin that much; GR_ERR_CUDA for any other CUDA failure. Any thread. */
gr_status gr_host_register(void *p, uint64_t bytes);
gr_status gr_host_unregister(void *p);

/* With the registration cache (gr_config.host_cache_bytes): unregister whatever the cache
 * of `rt` registered within [p, p + bytes) and forget it, so that the memory may be freed.
 * Call it before freeing memory that a job of this runtime used. Waits for a registration
 * of that memory in progress; GR_ERR_INVALID_USAGE (nothing forgotten) while a job that has
 * not ended uses the memory (wait for the job first), or for a destroyed runtime;
 * GR_ERR_INVALID_ARGUMENT for rt or p NULL or bytes 0. GR_OK also when the cache is off or
 * holds none of it. Any thread. */
gr_status gr_host_forget(gr_runtime *rt, const void *p, uint64_t bytes);

/* ---------------------------------------------------------------------------------------
 * Element types. Every buffer, host port and kernel argument has one (float32 unless said).
 * float16 is IEEE binary16, bfloat16 the upper half of a float32 (both stored as uint16_t
 * bit patterns: NumPy's float16 and ml_dtypes' bfloat16 layouts); the integer types are two's
 * complement. docs/GRAPH_SPEC.md, "Element
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
 * Nodes run in no other order than their dependencies give.
 *
 * Names of buffers and nodes are 1 to GR_NAME_MAX characters of [A-Za-z0-9_.-], unique
 * among buffers and among nodes (a node and a buffer may share one). Every builder call
 * (gr_graph_add_*, gr_graph_finalize) that refuses changes nothing: the graph can still be
 * built, and gr_graph_error_get says why. Each refuses with GR_ERR_INVALID_USAGE once the
 * graph is finalized, and with GR_ERR_INVALID_ARGUMENT a NULL graph, a bad or duplicate
 * name, an unknown buffer or node, or one past a GR_MAX_* limit. A job holds its own
 * reference to its graph, so the caller may destroy a graph while jobs still use it.
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

/* An empty graph, the caller's until gr_graph_destroy; the calling thread becomes its
 * owner. GR_ERR_INVALID_ARGUMENT for out NULL; GR_ERR_OUT_OF_MEMORY (*out NULL). */
gr_status gr_graph_create(gr_graph **out);

/* Drops the caller's reference; jobs still using the graph keep it alive, and it is freed
 * with the last. Once per reference (gr_graph_create, gr_graph_parse, gr_graph_load and
 * gr_graph_create_seed each give one), by any thread that holds it. NULL is a no-op. */
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
 * for other types). GR_ERR_INVALID_ARGUMENT also for num or den 0. Owner. */
gr_status gr_graph_add_buffer(gr_graph *g, const char *name, uint32_t num, uint32_t den);

/* A buffer described in full: its element type, and its size, either relative to the
 * tensor (ceil(tensor_elems * num / den) elements, the default 1/1) or, with fixed_elems
 * nonzero, exactly fixed_elems elements whatever the tensor (a reduction's result, a small
 * vector of per-channel constants). Host ports copied to or from a fixed buffer move its
 * fixed_elems elements per tensor, and a graph with one is never cut into chunks or
 * batches. Only a kernel's small inputs and the output of a kernel that writes one element
 * (or GR_OUT_BUFFER) may be fixed buffers: finalize refuses anything else, naming the
 * buffer. Start from GR_BUFFER_DESC_INIT. */
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

/* GR_ERR_INVALID_ARGUMENT also for desc NULL or not from GR_BUFFER_DESC_INIT, an unknown
 * element type, a ratio term 0 without fixed_elems, or fixed_elems over 2^60. Owner. */
gr_status gr_graph_add_buffer_desc(gr_graph *g, const char *name, const gr_buffer_desc *desc);

/* Copy host input `port` (< GR_MAX_PORTS; tensor_elems elements, or a fixed buffer's
 * fixed_elems) into `buffer`. Owner. */
gr_status gr_graph_add_h2d(gr_graph *g, const char *node, uint32_t port, const char *buffer);

/* Run a registered kernel over tensor_elems elements: reads `inputs`, writes `output`
 * (which may be one of the inputs: in place). Of the kernels called `kernel`, the one whose
 * input and output element types are those of the buffers runs (refused, naming the types
 * it has, when none is). The scalars are converted to the kernel's scalar types. The
 * arrays are copied. GR_ERR_INVALID_ARGUMENT also for an unknown kernel (the message lists
 * the known ones), or n_inputs or n_scalars not what the kernel takes (gr_kernel_info_get),
 * or an array NULL while its count is not 0. Owner. */
gr_status gr_graph_add_kernel(gr_graph *g, const char *node, const char *kernel,
                              const char *const *inputs, uint32_t n_inputs, const char *output,
                              const float *scalars, uint32_t n_scalars);

/* gr_graph_add_kernel with the scalars as doubles, for kernels whose scalars are float64 or
 * int32: each must be a value of the scalar's type (an int32 scalar an integer in range, a
 * float32 one finite and within float32's range, rounded to nearest; a float64 one not NaN),
 * else GR_ERR_INVALID_ARGUMENT naming the scalar. Graph specs build their nodes with it.
 * Owner. */
gr_status gr_graph_add_kernel_f64(gr_graph *g, const char *node, const char *kernel,
                                  const char *const *inputs, uint32_t n_inputs,
                                  const char *output, const double *scalars,
                                  uint32_t n_scalars);

/* Copy `buffer` (tensor_elems elements, or a fixed buffer's fixed_elems) to host output
 * `port`. Owner. */
gr_status gr_graph_add_d2h(gr_graph *g, const char *node, const char *buffer, uint32_t port);

/* Node `after` starts only when node `before` has finished: a node that reads a buffer needs
 * a dependency (direct or through others) on a node that writes it.
 * GR_ERR_INVALID_ARGUMENT also for `before` equal to `after`. Owner. */
gr_status gr_graph_add_dep(gr_graph *g, const char *before, const char *after);

/* Validate and freeze. After GR_OK the graph is immutable and may be used by any thread.
 * GR_ERR_INVALID_ARGUMENT (the graph stays unfinalized, and gr_graph_error_get says which)
 * for what "Graph templates" above lists, and for no nodes, no D2H node, a node using a
 * buffer smaller than the tensor (ratio below 1), a buffer no node uses, a node that
 * writes a constant or copies one out; a cycle is spelled out. GR_ERR_INVALID_USAGE when
 * already finalized. Owner. */
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
 * GR_MAX_CONSTS per graph. GR_ERR_INVALID_ARGUMENT also for no fixed_elems or a shape that
 * does not multiply to it. A graph spec declares one with `const`. Owner.
 *
 * On each device the first worker to run a unit of a job takes budget for all the job's
 * constants (one block at the end of the arena, each rounded up to GR_BUFFER_ALIGN) and
 * copies them in; the job's units are sized to the budget less that block, and a job whose
 * constants alone fill the smallest device's budget is refused (GR_ERR_OVER_BUDGET). A
 * device holds one job's constants at a time: another job's units wait to load theirs, and
 * a unit of any other job that waits for memory makes them go as soon as no unit of their
 * job runs there; they are copied in again when their job's next unit comes
 * (gr_stats.constants_copied). So no job waits for another's constants forever: two jobs
 * with constants on one device take turns, at the price of copies.
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

/* Input and output port counts of a finalized graph: what each gr_tensor must set. 0 for
 * NULL or a graph not finalized. Any thread. */
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
 * arena really allocates them (each buffer rounded up to GR_BUFFER_ALIGN): compare it with
 * the budget to know whether a graph that cannot be split takes a tensor. Returns
 * GR_ERR_INVALID_ARGUMENT for NULL, elems 0, overflow or a graph that is not finalized.
 * Any thread.
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
 * i would run, for a job without gr_job_options.cut_elems (a job with it may cut its tensors
 * into more units). GR_ERR_OVER_BUDGET when gr_job_submit would refuse the job (a tensor whose
 * iteration does not fit and cannot be cut: err names the index), with *out's backend,
 * arena_bytes, splittable and least_budget filled, cut untouched. GR_ERR_UNAVAILABLE, as
 * gr_job_submit refuses it, for a kernel the backend cannot run (err names the node).
 * GR_ERR_INVALID_ARGUMENT for NULL (elems with count > 0), a graph not finalized, a config
 * gr_runtime_create refuses (its message), a tensor of 0 elements or one too large; the
 * probe's status when the backend is not there; GR_ERR_OUT_OF_MEMORY.
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
 * and dependency lines), exactly `len` bytes of `text` (no NUL needed). `name` names the
 * text in messages (a file's path, say; NULL: "<graph spec>"). On success *out holds a
 * finalized graph, the caller's. On failure *out is NULL and err->message reads
 * "NAME:LINE:COL: what is wrong", pointing at the offending token (for problems found when
 * validating the whole graph, at the statement that declared the node or buffer involved,
 * with err->node set for a node). GR_ERR_INVALID_ARGUMENT for out NULL, text NULL with len
 * not 0, any syntax error, unknown name or kernel, wrong arity, bad number or validation
 * failure (an empty text has no nodes), and for a `cuda "FILE"` statement, which only
 * gr_graph_load honours: text in memory may come from anyone, and must not make the
 * process read its files. GR_ERR_OUT_OF_MEMORY. Any thread.
 */
gr_status gr_graph_parse(const char *text, size_t len, const char *name, gr_graph **out,
                         gr_error_info *err);

/* Read the file at `path` (at most 1 MiB) and parse it as gr_graph_parse does, messages
 * named by `path`, with `cuda "FILE"` statements honoured: each registers the kernels of a
 * CUDA C file (a relative path is the spec's directory's) as gr_kernel_load_file does.
 * GR_ERR_INVALID_ARGUMENT also for a file that cannot be opened or read (the message gives
 * the system's reason) or is too large. Any thread. */
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
 * registered at once, the built-ins included; unregistered ones waiting for their graphs do
 * not count. An expression a spec registers (`expr`, docs/GRAPH_SPEC.md) is registered for
 * the spec's graphs only, and goes with the last of them.
 *
 * A graph that uses a kernel with no implementation for the runtime's backend is refused
 * by gr_job_submit with GR_ERR_UNAVAILABLE, naming the node and the kernel.
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
 * on element i of the inputs only. A kernel that is not elementwise always gets whole
 * tensors, with the shape they were submitted with. Fields may be appended in later
 * versions, never reordered.
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
 * synchronize. Its captured work may run twice at once (for two units of one worker with
 * GR_UNITS_IN_FLIGHT=2, and for units of two workers always): device scratch it keeps
 * between calls must not be shared by them. `stream` is a cudaStream_t (a CUstream),
 * passed as a pointer so that this header needs no CUDA header. */
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
    /* CUDA C source text (NUL-terminated; copied), compiled by NVRTC when it is registered
     * (so source NVRTC refuses is refused then, with the first lines of its log), with
     * cuda_name naming its `extern "C" __global__ void NAME(gr_kernel_args)`. The PTX
     * (compute capability 9.0) is cached for the process by the source's text, also after
     * the kernel is unregistered; the driver finishes it for each device. NVRTC is loaded
     * at run time (libnvrtc.so.13, else 12; $GR_NVRTC_LIBRARY alone when set): where it
     * cannot be, a source kernel with a CPU implementation still registers (the CUDA
     * backend refuses it, saying what to install) and one without is refused with
     * GR_ERR_UNAVAILABLE. The source may #include "graphrun_kernel.h", which defines
     * gr_kernel_args, gr_scalar, GR_FOR_EACH, GR_OUT and GR_IN (docs/API.md). */
    GR_CUDA_SOURCE,
    /* A gr_kernel_launch_fn (cast to const void *) called eagerly, on the worker's thread,
     * for every iteration: it enqueues its work on the stream it is given (the iteration's,
     * after the node's inputs are there and before its output is copied out) and returns;
     * nothing is captured, so the work may be anything stream-ordered, even what a CUDA
     * graph cannot hold (code that allocates, PyTorch functions, libraries); it may wait for
     * its work. A graph with such a node runs without a CUDA graph: its copies and kernels
     * are enqueued one by one on the stream, a few microseconds a node more than a replay
     * (its GR_CUDA_FUNCTION kernels cannot run that way and are refused). Its work may run
     * for two units at once, as a GR_CUDA_LAUNCH callback's. */
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
    /* 1 to GR_NAME_MAX characters of [A-Za-z0-9_.-], starting with a letter or '_' (so a
     * spec can name it), unique in the process for one set of element types; copied. */
    const char *name;
    const char *doc;      /* one line for listings, at most 159 characters; optional; copied */
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
 * of range, an unknown cuda_kind or out_size, `cuda` set with GR_CUDA_NONE (or not set
 * without), a source kernel without a C identifier as cuda_name or with source NVRTC
 * refuses, small_inputs past the inputs, an elementwise kernel whose out_size is not
 * GR_OUT_ELEMS, a block size over 1024, no implementation at all, a doc too long;
 * GR_ERR_UNAVAILABLE for a source kernel without a CPU implementation where NVRTC cannot be
 * loaded; GR_ERR_OVER_BUDGET with GR_MAX_KERNELS registered; GR_ERR_OUT_OF_MEMORY. A caller
 * compiled against an older, shorter gr_kernel_def gets the defaults of the fields it does
 * not know. Any thread: registrations of one name from many threads at once take it once.
 */
gr_status gr_kernel_register(const gr_kernel_def *def, gr_error_info *err);

/*
 * Unregister every definition called `name` (all its overloads, whoever registered them:
 * gr_kernel_register, gr_kernel_load_file, gr_kernel_register_expr): from now on graphs
 * cannot name it, and the name, and its room under GR_MAX_KERNELS, may be taken again, for
 * the same types or others. Graphs built before keep the definitions they resolved,
 * unchanged, and can still run; each definition is freed, and its destroy called, once no
 * graph holds it: now when none does, else when the last one is freed. It does not refuse
 * while graphs use the kernel because a job holds its graph until it ends, which the caller
 * does not see: "destroy the graph, then unregister" would fail or not by a race.
 * GR_ERR_INVALID_ARGUMENT for a NULL or unknown name or a built-in's. Any thread; a kernel's
 * gr_kernel_info_get strings are valid only until it is unregistered (a spec's expression
 * kernel, registered by gr_graph_parse, until the last graph holding it is freed).
 */
gr_status gr_kernel_unregister(const char *name, gr_error_info *err);

/*
 * Register the kernels that the CUDA C source file at `path` declares, each compiled by
 * NVRTC (GR_CUDA_SOURCE, no CPU implementation): a line of the form
 *
 *     // graphrun: kernel NAME [inputs=N] [scalars=N] [elementwise] [out=elems|one|buffer]
 *     //           [block=N] [blocks_per_sm=N] [max_blocks=N]   (all on one line)
 *
 * declares `extern "C" __global__ void NAME(gr_kernel_args a)` of the file, before or after
 * it, with its signature (inputs default 1, scalars 0, every type float32). The file stays
 * plain CUDA C that nvcc compiles too; it compiles once, its path being NVRTC's name for it
 * ("PATH(LINE): error: ..."). A kernel of that name
 * already registered from the very same file text and declaration is left as it is (so
 * specs naming one file may be loaded many times); any other taken name is refused.
 * GR_ERR_INVALID_ARGUMENT with "PATH:LINE:COL: reason" in err for a file that cannot be
 * read, is larger than 4 MiB or holds a NUL byte, a malformed declaration, no declaration
 * at all, or source NVRTC refuses (its log's first lines); GR_ERR_UNAVAILABLE when NVRTC
 * cannot be loaded (the message says what to install). Kernels registered before a failure
 * stay registered. Any thread.
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
 * constants and types, whatever the names or spacing: nothing new is registered, and threads
 * registering one computation at once register it once). Its name, "expr." and 16 hex
 * digits of a hash of the computation, goes to `name` (at least GR_NAME_MAX + 1 bytes), for
 * gr_graph_add_kernel with the inputs in the definition's order and no scalars. Input names
 * may not be a function's name of the language. GR_ERR_INVALID_ARGUMENT for a bad
 * definition (a count out of range, a name given twice, a param not finite, name_size too
 * small), or text that does not parse or type
 * (err->message "expr:LINE:COL: reason", COL the byte in the line of the text, from 1);
 * GR_ERR_OVER_BUDGET with GR_MAX_KERNELS registered; GR_ERR_OUT_OF_MEMORY. The kernel stays
 * registered until gr_kernel_unregister(name), also one a spec's `expr` registered for its
 * graphs when this registers the same computation. Any thread.
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

/* How many kernel definitions are registered now, the built-ins included (unregistered
 * ones not counted). Any thread. */
uint32_t gr_kernel_count(void);

/* The i-th registered kernel (i < gr_kernel_count()) into `out` (initialized with
 * GR_KERNEL_INFO_INIT), up to its struct_size: the built-ins first (their float32 versions,
 * then the other types'), then in registration order, a name with several versions once
 * for each. Its strings are valid until it is unregistered (for the life of the process if
 * it never is). Unregistering a kernel moves those after it down by one, so a listing taken
 * while graphs are freed on other threads may skip or repeat one. GR_ERR_INVALID_ARGUMENT
 * for i out of range, NULL or an uninitialized struct. Any thread. */
gr_status gr_kernel_info_get(uint32_t i, gr_kernel_info *out);

/* ---------------------------------------------------------------------------------------
 * Jobs.
 * ------------------------------------------------------------------------------------- */
typedef struct gr_job gr_job;

/* One tensor: host pointers per port and its size. in[i] is read by the H2D nodes of input
 * port i, out[i] written by the D2H of output port i; each holds `elems` elements of the
 * port's type (a port copied to or from a fixed buffer holds that buffer's fixed_elems).
 * out[i] may be the very same range as in[j] of the same tensor (in place) when the graph
 * copies that input in before it copies that output out. Unused ports must be NULL. An
 * index's outputs are written only by its own iterations.
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
 * runs before the handle is stored in gr_job_submit's *out. `status` is the job's result, as
 * gr_job_wait's `result`. It may call gr_job_* functions on this job (gr_job_destroy gives
 * back the caller's handle; a detached job has none) and gr_runtime_shutdown, but must not
 * block for long (it may run on a worker), and must not call gr_job_submit (refused: it
 * could wait on the runtime's own threads forever) or gr_runtime_destroy (which there only
 * shuts down). gr_job_wait returns only after it has returned. */
typedef void (*gr_job_callback)(gr_job *job, gr_status status, void *user);

typedef struct gr_job_options {
    uint32_t struct_size;
    uint32_t magic;        /* GR_JOB_OPTIONS_MAGIC */
    int64_t deadline_ns;   /* absolute gr_now_ns() time; GR_NO_DEADLINE for none. Indices
                              not executing by then (queued, or waiting for device memory)
                              end as failed with GR_ERR_TIMEOUT; iterations already
                              executing finish. With two units in flight per worker
                              (GR_UNITS_IN_FLIGHT=2) an iteration executes once launched,
                              so up to two per worker finish after the deadline. */
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
    /* Appended after notify (options whose struct_size ends before it mean 0): for a graph
     * that can be cut (gr_units_plan_info.splittable), cut each tensor only at multiples of
     * this many elements, so that every unit (a chunk of a tensor, or a batch of whole
     * tensors) holds whole runs of cut_elems: for kernels that compute each row of the
     * tensor (its last dimensions, cut_elems elements) from that row alone, as a function
     * applied to every sample of a batch does. Refused (GR_ERR_INVALID_ARGUMENT): a tensor
     * whose elems is not a multiple of it, a graph that cannot be cut, and one run larger
     * than a unit staged through a worker's staging buffer holds (staging_bytes: pageable
     * tensors are staged); one run that does not fit the budget (less the job's constants)
     * is GR_ERR_OVER_BUDGET. 0 or 1: any element. gr_graph_plan_units plans as without
     * it. */
    uint64_t cut_elems;
} gr_job_options;

#define GR_JOB_OPTIONS_MAGIC 0x67724a4fu /* "grJO" */
#ifdef __cplusplus
#define GR_JOB_OPTIONS_INIT                                                                 \
    {sizeof(gr_job_options), GR_JOB_OPTIONS_MAGIC, GR_NO_DEADLINE, NULL, NULL, NULL, 0, 0, 0}
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
 * (GR_ERR_UNAVAILABLE: no CPU version on the host backend; none, a source without NVRTC, or a
 * CUfunction with private contexts on CUDA), a call from a completion callback or with a
 * destroyed or forked child's runtime (GR_ERR_INVALID_USAGE), shutdown (GR_ERR_SHUTDOWN), no
 * host memory for the job's bookkeeping (GR_ERR_OUT_OF_MEMORY). Also GR_ERR_INVALID_ARGUMENT:
 * opts not from GR_JOB_OPTIONS_INIT, count above 2^32 - 1, rank above GR_MAX_DIMS or a
 * dimension 0, an output overlapping an input other than its own in-place input. opts NULL
 * means the defaults.
 *
 * On GR_OK the job is accepted: all indices will end, even if the job's deadline passes or
 * the runtime shuts down while this call is still queuing them. *out receives the handle,
 * to be given back with gr_job_destroy; with out == NULL the job is detached (it runs to its
 * end, its callback is its only report, and it frees itself after the callback). Sleeps
 * while the task ring is full (backpressure), until there is room, the job's deadline, a
 * cancel or shutdown; with the registration cache on, also while ranges the job uses again
 * are being registered, up to its deadline (gr_config.host_cache_bytes). Any thread.
 *
 * Once accepted, each index ends with GR_OK (done), GR_ERR_CANCELED (canceled before it
 * started), GR_ERR_SHUTDOWN (the runtime shut down before it started), GR_ERR_TIMEOUT (the
 * deadline passed before it executed), GR_ERR_DEVICE_LOST (it was running on a device that
 * hit a sticky error, or every device is lost; what had not reached a lost device goes to
 * the others), GR_ERR_CUDA (a CUDA call of its iteration failed; the detail names it),
 * GR_ERR_OUT_OF_MEMORY (no staging memory, pinned or not) or GR_ERR_INTERNAL (a bug).
 */
gr_status gr_job_submit(gr_runtime *rt, gr_graph *g, const gr_tensor *tensors, uint64_t count,
                        const gr_job_options *opts, gr_job **out, gr_error_info *err);

/*
 * Wait until the job completes (every index has ended and the completion callback, if any,
 * has returned) or `timeout_ns` passes (GR_WAIT_FOREVER or any negative value: no limit;
 * runtime shutdown completes every job, so that wait ends too; 0: just look).
 *
 * Returns GR_OK when the job is complete, GR_ERR_TIMEOUT when it is not (yet). The two are
 * never confused with the job's own outcome, which goes to `result` (optional) once
 * complete: GR_OK when every index is done, otherwise the status of the first index that
 * did not finish, in time (GR_ERR_CANCELED, GR_ERR_TIMEOUT for the job's deadline, ...).
 * GR_ERR_INVALID_ARGUMENT for job NULL; GR_ERR_INVALID_USAGE for a job complete and
 * destroyed, a forked child's, or a handle that is no job's. Any thread, any number of
 * waiters; from the job's own callback it answers at once.
 */
gr_status gr_job_wait(gr_job *job, int64_t timeout_ns, gr_status *result);

/* Cancel: indices not yet started end as canceled at once; running iterations finish (done)
 * and their outputs are written. Idempotent. When the cancel ends the job, its callback runs
 * on this thread before the call returns. GR_ERR_INVALID_ARGUMENT for NULL;
 * GR_ERR_INVALID_USAGE for a destroyed job's handle or a forked child's. Any thread.
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
 * job is complete. GR_ERR_INVALID_USAGE for a destroyed job's handle or a forked child's.
 * Any thread. */
gr_status gr_job_progress_get(const gr_job *job, gr_job_progress *out);

typedef enum gr_index_state {
    GR_INDEX_QUEUED = 0,
    GR_INDEX_RUNNING,
    GR_INDEX_DONE,
    GR_INDEX_FAILED,
    GR_INDEX_CANCELED,
} gr_index_state;

/* State of one index and, once it has ended, its status (GR_OK when done, and while queued
 * or running); `state` and `status` are optional. GR_ERR_INVALID_ARGUMENT for job NULL or an
 * index not below the job's count; GR_ERR_INVALID_USAGE for a destroyed job's handle or a
 * forked child's. Any thread. */
gr_status gr_job_index_get(const gr_job *job, uint64_t index, gr_index_state *state,
                           gr_status *status);

/* The first failure of the job, in time: its status, index, node (when it is about one)
 * and reason; status GR_OK, index GR_NO_INDEX and node and message "" when there is none
 * (as gr_graph_error_get for a graph without a refusal).
 * GR_ERR_INVALID_ARGUMENT for out NULL, or job NULL (out says so too); GR_ERR_INVALID_USAGE
 * for a destroyed job's handle or a forked child's (out says so). Any thread. */
gr_status gr_job_error_get(const gr_job *job, gr_error_info *out);

/* Nonzero once every index has ended (the callback may still be running: gr_job_wait waits
 * for it too). 0 for NULL, a destroyed job's handle or a forked child's. Any thread. */
int gr_job_is_complete(const gr_job *job);

/* The job's number in its runtime's log messages and NVTX ranges: 1 for the runtime's first
 * accepted job, counting up. 0 for NULL, a destroyed job's handle or a forked child's. Any
 * thread. */
uint64_t gr_job_id(const gr_job *job);

/*
 * A file descriptor that becomes readable when the job completes, for event loops (epoll,
 * poll, libuv's uv_poll_t, asyncio's add_reader): put it in the poll set, and when it is
 * readable the job's result is final, gr_job_wait returns at once and the completion
 * callback, if any, has returned. It is never readable before then, and a job that ends
 * canceled, failed, past its deadline or by shutdown completes like any other. It is an
 * eventfd
 * (EFD_CLOEXEC | EFD_NONBLOCK) whose counter goes from 0 to 1 once, made on the first call
 * (readable at once if the job is already complete); later calls give the same one. It
 * belongs to the job: do not close it; remove it from your poll set before gr_job_destroy,
 * which closes it (the number may be reused at once, and epoll keeps a registration until
 * every descriptor of its file is closed, which a child forked without exec holds). Reading
 * it is not needed, and resets it to not readable (the job stays
 * complete); a level-triggered poll set should drop it, or the job be destroyed, once seen.
 *
 * One descriptor per job: a server with many jobs in flight holds that many descriptors
 * (mind RLIMIT_NOFILE), and pays an eventfd and two epoll_ctl calls per job.
 *
 * GR_ERR_INVALID_ARGUMENT for a NULL job or fd; GR_ERR_INVALID_USAGE for a destroyed or
 * forked child's job, a job
 * whose handle was given back (also from its callback), or a detached one; GR_ERR_OUT_OF_MEMORY
 * when no descriptor can be made (the process or system limit on descriptors, or memory).
 * *fd is -1 on a failure. Linux only. Any thread.
 */
gr_status gr_job_completion_fd(gr_job *job, int *fd);

/*
 * The runtime's completion queue, for servers with many jobs in flight: one descriptor in
 * the poll set for all of them. A job submitted with gr_job_options.notify is queued when
 * it completes, under the same rule as gr_job_completion_fd (its result final, gr_job_wait
 * answering at once, its callback returned), in the order jobs complete, whatever their
 * outcome.
 *
 * gr_runtime_completion_fd: an eventfd (EFD_CLOEXEC | EFD_NONBLOCK), made on the first call,
 * the same one later, readable exactly while the queue holds a job (at once if jobs
 * completed before it was asked for; the gr_runtime_reap or gr_job_destroy that empties the
 * queue resets it; level-triggered use needs nothing more, edge-triggered use must reap
 * until *n < max). It belongs to the runtime: gr_runtime_destroy closes it; do not close or
 * read it. GR_ERR_INVALID_ARGUMENT for rt or fd NULL (*fd is -1 on a failure);
 * GR_ERR_OUT_OF_MEMORY when no descriptor can be made; GR_ERR_INVALID_USAGE for a destroyed
 * runtime or a forked child's. Linux only. Any thread.
 *
 * gr_runtime_reap: takes up to `max` completed notify jobs off the queue into jobs[0 ..
 * *n - 1], oldest first, without blocking (*n is 0 when there are none). Each is the
 * handle gr_job_submit returned, still the caller's to gr_job_destroy. A job destroyed
 * before it is reaped (from any thread, or its own callback) leaves the queue, or never
 * enters it. After gr_runtime_destroy the queue is gone: jobs left in it are still the
 * caller's to destroy. GR_ERR_INVALID_ARGUMENT for rt or n NULL, or jobs NULL with max > 0;
 * GR_ERR_INVALID_USAGE as above. Any thread; reapers on several threads each get different
 * jobs.
 */
gr_status gr_runtime_completion_fd(gr_runtime *rt, int *fd);
gr_status gr_runtime_reap(gr_runtime *rt, gr_job **jobs, size_t max, size_t *n);

/* Give back the handle gr_job_submit returned. A job still running keeps running to its
 * end (its callback still runs, and may still use the handle; call gr_job_cancel first to
 * stop it); the host memory it uses must stay valid until then. Once the job is complete
 * and destroyed, every call with the handle returns GR_ERR_INVALID_USAGE. Closes the job's
 * completion descriptor (gr_job_completion_fd), at once even if the job is still running,
 * and takes it off the runtime's completion queue (gr_runtime_reap) or keeps it from it.
 * NULL is a no-op; so is a second call. Once, by the holder of the handle. */
void gr_job_destroy(gr_job *job);

#ifdef __cplusplus
}
#endif

#endif /* GRAPHRUN_H */

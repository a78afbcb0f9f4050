/*
 * stream.h - `graphrun run`'s pipeline: every tensor of a plan read from its files, run,
 * and written, with host memory bounded by --host-memory whatever the size of the dataset.
 *
 *   read ahead   inputs are read (fileio.h: io_uring, or pread threads; O_DIRECT where the
 *                file system allows it) into buffers of the window (window.h), several
 *                files at once, as long as the window has room;
 *   submit       tensors whose inputs are in are submitted as jobs (gr_job_submit), a job
 *                per group of tensors: at once while the device has nothing to do, else
 *                once a group holds an eighth of the window or the reads have to wait for
 *                room; the runtime takes many jobs in flight, so no job waits for another;
 *   write behind each tensor the runtime has done is written into temporary files beside
 *                its outputs, synced (--sync), and renamed into place (per tensor) or kept
 *                for the end (--all-or-nothing); its buffers then take the next reads.
 *
 * What the driver promises holds as it did when every input was loaded first: a tensor
 * that fails stops the run unless keep_going (no new tensor is read or submitted; the jobs
 * in flight are canceled, so what has not started is not run; what the runtime has done is
 * written), and so does *stop (Ctrl-C). A failure to read an input or write an output fails
 * that tensor, with the reason, like a failure in the runtime.
 *
 * Durability (--sync), the guarantee the manifest and --resume rely on:
 *   each  every output is fsynced before it is renamed into place, and a tensor is done
 *         (hooks.done, which the manifest records) only once its directory is fsynced too,
 *         a batch of tensors at a time: what the manifest calls done is on disk, and no
 *         output name ever holds a partial file, even after a power loss;
 *   end   outputs are renamed into place unsynced, and the run syncs their file systems
 *         once at the end, only then calling those tensors done: a killed process still
 *         leaves only whole files under the outputs' names (the page cache has them), a
 *         power loss may leave the ones not yet synced empty or partial, and the manifest
 *         calls none of them done;
 *   none  never synced; done as soon as renamed.
 *
 * Owner only: the caller's thread drives it; the runtime's completion callbacks only wake
 * it. gr_stream_signal may be called from a signal handler.
 */
#ifndef GR_STREAM_H
#define GR_STREAM_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/fileio.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/readahead.h"
#include "tools/graphrun/window.h"

/* What a tensor's failure is counted under: a gr_status (the runtime's), or one of the
 * driver's own kinds, which come after them (names: run_report.h, gr_run_error_name). */
typedef enum gr_run_error {
    GR_RUN_ERR_BAD_INPUT = GR_STATUS_COUNT_, /* its files cannot be read as its ports need */
    GR_RUN_ERR_INPUT,                        /* reading an input failed while streaming */
    GR_RUN_ERR_OUTPUT,                       /* writing an output failed (a full disk) */
    GR_RUN_ERR_COUNT_
} gr_run_error;

typedef enum gr_sync_mode {
    GR_SYNC_EACH = 0,
    GR_SYNC_END,
    GR_SYNC_NONE,
} gr_sync_mode;

const char *gr_sync_name(gr_sync_mode m);

/* Files of at least this many data bytes go through O_DIRECT (smaller ones gain from the
 * page cache more than they lose). */
#define GR_STREAM_DIRECT_MIN (1u << 20)

typedef struct gr_stream_hooks {
    void *arg;
    /* Tensor i is done: its outputs written, placed and as durable as the sync mode says. */
    void (*done)(void *arg, uint64_t i);
    /* Tensor i failed: kind is a gr_status or a gr_run_error; node and message may be
     * NULL. */
    void (*failed)(void *arg, uint64_t i, int kind, const char *node, const char *message);
    /* Between events, at least every few tens of milliseconds (the manifest's turn). */
    void (*tick)(void *arg);
} gr_stream_hooks;

typedef struct gr_stream_config {
    gr_runtime *rt;
    gr_graph *g;
    /* The graph's constants (gr_job_options.constants), given to every job submitted: host
     * memory that stays valid until gr_stream_run returns. NULL and 0: none. */
    const void *const *constants;
    uint32_t n_constants;
    gr_io_plan *plan;
    const bool *skip;          /* plan->count: tensors not to run (resumed, or bad inputs) */
    bool keep_going, all_or_nothing;
    gr_sync_mode sync;
    gr_window *win;            /* the host memory (gr_window_open: holds the largest tensor) */
    /* Grow the window beside the stream up to this many bytes (gr_window_grow_ahead, once
     * the stream's own threads have started); 0: only as reads find no room. */
    uint64_t grow_to;
    gr_fio_engine engine;
    bool direct;               /* O_DIRECT where the file system allows it */
    /* The files read into the page cache while the run started (NULL: none): read
     * buffered, from memory, and then dropped from the cache. */
    const gr_readahead *warm;
    volatile sig_atomic_t *stop; /* nonzero: stop as on a failure (Ctrl-C) */
    int progress;              /* the progress line: -1 never, 0 on a terminal, 1 always */
    gr_stream_hooks hooks;
} gr_stream_config;

typedef struct gr_stream_result {
    gr_status status;        /* GR_OK once every tensor ended; else why the pipeline itself
                                could not go on (out of memory): why[] */
    char why[512];
    uint64_t done, failed, not_run; /* of the tensors it was given (not the skipped) */
    uint64_t bytes_in, bytes_out;   /* tensor bytes of the tensors done */
    uint64_t read_bytes, written_bytes; /* bytes moved to and from the disk */
    uint64_t direct_reads, buffered_reads, direct_writes, buffered_writes; /* files */
    uint64_t warm_reads;     /* of the buffered reads, files the page cache had (warm) */
    char engine[16];         /* "io_uring" or "pread" */
    char fallback[160];      /* why not io_uring ("" when it was used or not asked for) */
    char buffered_why[160];  /* why the first file of DIRECT_MIN bytes went buffered */
    gr_window_stats window;
    int64_t ns;              /* from the first read to the last output */
} gr_stream_result;

/* Stream every tensor the config does not skip. Returns out->status. */
gr_status gr_stream_run(const gr_stream_config *cfg, gr_stream_result *out);

/* Wake the running pipeline (after setting *stop). Async-signal-safe. */
void gr_stream_signal(void);

#endif /* GR_STREAM_H */

/*
 * run_report.h - what `graphrun run` reports: one record per rank (a single process is rank
 * 0 of 1), the summary built from all of them (text or JSON), and the manifest file of a run
 * of several ranks: which rank wrote which tensor, the counts, bytes and seconds.
 *
 * A record is plain data of fixed size, so that MPI can gather the ranks' records as bytes
 * (every rank runs the same binary).
 */
#ifndef GR_RUN_REPORT_H
#define GR_RUN_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/stream.h"

/* gr_status_str's text for a gr_status, or for the driver's own kinds of failure
 * (stream.h: gr_run_error) "bad input", "input not read", "output not written". */
const char *gr_run_error_name(int64_t kind);

typedef struct gr_run_report {
    int64_t tensors;  /* this rank's share of the run */
    int64_t done;     /* outputs in place: done by this run, or by the one it resumed */
    int64_t resumed;  /* of those, done by the run --resume resumed (not run again) */
    int64_t failed;
    int64_t canceled; /* not run: stopped (a failure, or a signal) before they started */
    int64_t outputs;  /* files this rank wrote (per tensor), or writes when the run succeeds
                         (--all-or-nothing) */
    int64_t bytes_in, bytes_out; /* of the tensors this run did, and nothing else */
    int64_t setup_ns;  /* the command's start to the first read: the graph, the inputs'
                          headers, the outputs staged, the runtime started */
    int64_t stream_ns; /* the first read to the last output written; 0 when nothing ran */
    int64_t runtime_ns;  /* of setup: the runtime started (on CUDA, the device's context made,
                            its arena reserved, the staging buffers pinned) */
    int64_t teardown_ns; /* after the last output: the runtime and the window given back
                            (pinned memory unpinned), which `seconds` leaves out */
    int64_t backend, devices, workers_per_device, ordinal; /* ordinal: its first device */
    int64_t budget_bytes, budget_peak;
    int64_t errors[GR_RUN_ERR_COUNT_]; /* failed tensors by kind: they add up to failed */
    int64_t have_ceilings, have_devmem, devmem_above;
    double bidir_gbs;
    /* The disk and host memory (stream.h). */
    int64_t read_bytes, written_bytes;
    int64_t direct_reads, buffered_reads, direct_writes, buffered_writes;
    int64_t warm_reads;                       /* buffered reads the page cache had */
    int64_t read_ahead_files, read_ahead_bytes; /* read while the runtime started */
    double read_ahead_seconds;                  /* the read-ahead thread's time reading */
    int64_t host_memory, host_memory_peak, host_memory_kind; /* gr_mem_kind */
    int64_t host_memory_segments, host_memory_grown_ahead, host_memory_segments_grown;
    int64_t host_memory_segments_huge; /* mapped for huge pages (hostbuf.h) */
    double host_memory_first_seconds, host_memory_more_seconds; /* allocating segments */
    int64_t peak_rss;  /* the process's own peak resident set (gr_cli_peak_rss_bytes) */
    int64_t sync;      /* gr_sync_mode */
    char io_engine[16];
    char io_fallback[160];     /* why not io_uring, or "" */
    char io_buffered_why[160]; /* why a large file went through the page cache, or "" */
    int64_t first_status, first_index; /* a kind as errors[]; the index among all the run's
                                          tensors */
    char first_node[32];
    char first_message[256];
    char host[64];
} gr_run_report;

/* What the reports alone do not say. */
typedef struct gr_run_facts {
    const char *status;        /* "ok", "failed", "interrupted" */
    int ranks;                 /* 1 unless --mpi */
    bool mpi;                  /* --mpi: the summary of ranks (also for one rank) */
    int64_t outputs_written;
    const char *manifest;      /* its path, or NULL */
} gr_run_facts;

/* The summary on stdout. Without --mpi, exactly what `graphrun run` always printed. */
void gr_run_report_print(const gr_run_report *all, const gr_run_facts *f);

/* The summary as JSON (the caller owns it). Without --mpi, the single-process fields; with
 * it, the same fields over all ranks plus "ranks" and "per_rank". */
json_t *gr_run_report_json(const gr_run_report *all, const gr_run_facts *f);

/* What --json prints for a run that ended before its job ran: {"status": STATUS (e.g.
 * "refused" for a mistake in the command line or its inputs, "error" for a runtime that
 * could not start, "interrupted"), "exit": RC, "error": WHY}. */
json_t *gr_run_refusal_json(const char *status, int rc, const char *why);

/*
 * The manifest: a JSON file written like the outputs, to a temporary file beside it
 * (".NAME.graphrun-tmp.XXXXXX") first and renamed into place, so that it is always whole:
 * as the run goes (write then publish, again and again), or only once every output is in
 * place (--all-or-nothing). stage checks the path (an existing file needs `force`, and a
 * file must be creatable beside it); write creates the temporary file and fills it; publish
 * renames it; abort removes it (idempotent).
 */
typedef struct gr_manifest {
    char *path, *tmp;
} gr_manifest;

gr_status gr_manifest_stage(gr_manifest *m, const char *path, bool force, char *why,
                            size_t why_len);
gr_status gr_manifest_write(gr_manifest *m, json_t *doc, char *why, size_t why_len);
gr_status gr_manifest_publish(gr_manifest *m, char *why, size_t why_len);
void gr_manifest_abort(gr_manifest *m);
void gr_manifest_free(gr_manifest *m);

#endif /* GR_RUN_REPORT_H */

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

typedef struct gr_run_report {
    int64_t tensors;  /* this rank's share of the run */
    int64_t done;     /* outputs in place: done by this run, or by the one it resumed */
    int64_t resumed;  /* of those, done by the run --resume resumed (not run again) */
    int64_t failed;
    int64_t canceled; /* not run: stopped (a failure, or a signal) before they started */
    int64_t outputs;  /* files this rank wrote (per tensor), or writes when the run succeeds
                         (--all-or-nothing) */
    int64_t bytes_in, bytes_out; /* of the tensors this run did, and nothing else */
    int64_t job_ns; /* submission to completion; 0 when nothing ran */
    int64_t backend, devices, workers_per_device, ordinal; /* ordinal: its first device */
    int64_t budget_bytes, budget_peak;
    int64_t errors[GR_STATUS_COUNT_];
    int64_t have_ceilings, have_devmem, devmem_above;
    double bidir_gbs;
    int64_t first_status, first_index; /* the index among all the run's tensors */
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

/*
 * ledger.h - what became of every tensor of one `graphrun run` (one rank's shard with
 * --mpi): done (its outputs in place), failed (with the status and, when the runtime kept
 * them, the node and message) or not run; the manifest's "files" list made from it; and
 * --resume, which reads an earlier run's manifest and marks the tensors it may skip.
 *
 * A tensor of an earlier run is skipped when the manifest records it as done with this
 * run's input paths (by which its entry is found: not by index, which a file added to a
 * directory moves), name and output paths, every input file still has the size and
 * modification time (st_mtim, in nanoseconds) the manifest records, and every output file
 * still exists with the size it records. Size and mtime, not a hash: a hash would read every
 * input again, which is what resuming saves. The graph file is checked the same way, and a
 * changed graph refuses the resume (every output would be stale). The paths are those the
 * inputs resolve to (inputs.h: a directory's files, a list's lines), with stdin and stdout
 * named `-` (the driver refuses --resume with them: they are read and written anew).
 *
 * Owner only: one thread (the driver's main thread) per ledger.
 */
#ifndef GR_LEDGER_H
#define GR_LEDGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/io.h"
#include "tools/graphrun/run_report.h"

typedef enum gr_outcome {
    GR_OUTCOME_NOT_RUN = 0,
    GR_OUTCOME_DONE,
    GR_OUTCOME_FAILED,
} gr_outcome;

typedef struct gr_ledger_entry {
    gr_outcome outcome;
    bool earlier;      /* done by the run that --resume resumed: not run again */
    int kind;          /* failed: a gr_status or a gr_run_error (run_report.h) */
    char status[40];   /* failed: gr_run_error_name(kind) */
    char node[32];     /* failed: the node, when known */
    char *message;     /* failed: the reason, when known (malloc'd) */
    int64_t in_size[GR_MAX_PORTS], in_mtime_ns[GR_MAX_PORTS];
    int64_t out_size[GR_MAX_PORTS]; /* done */
} gr_ledger_entry;

typedef struct gr_ledger {
    const gr_io_plan *plan;
    int ranks;                /* tensor i (among all) is rank i % ranks's */
    gr_ledger_entry *e;       /* plan->count */
    uint64_t done, earlier, failed; /* done counts the earlier ones too */
    int64_t graph_size, graph_mtime_ns;
} gr_ledger;

/* Every tensor not run yet, with its inputs' sizes and mtimes (and the graph's) as they are
 * now (-1 for a file that is not there: a bad input, io.h). GR_ERR_OUT_OF_MEMORY with
 * why[]. */
gr_status gr_ledger_init(gr_ledger *l, const gr_io_plan *plan, const char *graph, int ranks,
                         char *why, size_t why_len);
void gr_ledger_free(gr_ledger *l);

/* Tensor i (of the plan) is done, its outputs in place (their sizes are looked up). */
void gr_ledger_done(gr_ledger *l, uint64_t i);

/* Tensor i failed, counted under `kind` (a gr_status, or a gr_run_error). node and message
 * may be NULL (not known). */
void gr_ledger_failed(gr_ledger *l, uint64_t i, int kind, const char *node,
                      const char *message);

/* The manifest's fields of this ledger: "graph_file" (size, mtime_ns) and "files" (one
 * entry per tensor of the plan, in order), set on `doc`. */
void gr_ledger_set_json(const gr_ledger *l, json_t *doc);

/* An earlier run's manifest: its JSON, NULL with GR_OK when there is no file at `path`, or
 * GR_ERR_INVALID_ARGUMENT with why[] when it cannot be read or is not a manifest. */
gr_status gr_ledger_load(const char *path, json_t **doc, char *why, size_t why_len);

/* Every output path `doc` lists (the outputs its run claimed), for gr_io_options'
 * replaceable: appended to *paths (realloc'd, the strings strdup'd), *n counting. */
gr_status gr_ledger_claimed(const json_t *doc, char ***paths, uint64_t *n);

/* Mark the tensors `doc` lets this run skip (see above) as done earlier, and set
 * plan->skip for them (`skip`: the plan's count of flags, the caller's). The graph changed:
 * GR_ERR_INVALID_ARGUMENT with why[]. */
gr_status gr_ledger_resume(gr_ledger *l, const json_t *doc, const char *path, bool *skip,
                           char *why, size_t why_len);

#endif /* GR_LEDGER_H */

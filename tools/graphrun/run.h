/*
 * run.h - what the files of `graphrun run` share: its command line (run_cli.c), the state
 * of one run (run.c drives it), and its manifests (run_manifest.c). Internal to the
 * command; the main thread only.
 */
#ifndef GR_RUN_H
#define GR_RUN_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/consts.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/fileio.h"
#include "tools/graphrun/hostneed.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/ledger.h"
#include "tools/graphrun/ranks.h"
#include "tools/graphrun/readahead.h"
#include "tools/graphrun/run_report.h"
#include "tools/graphrun/runopts.h"
#include "tools/graphrun/stream.h"
#include "tools/graphrun/window.h"

#define GR_RUN_DEFAULT_MPI_TIMEOUT_S 600

typedef struct run_args {
    gr_run_opts o; /* what check shares (runopts.h), --host-memory among it */
    bool ceilings, mpi, have_timeout;
    bool resume, keep_going, all_or_nothing;
    bool to_stdout; /* an --output is `-` */
    bool no_direct; /* --no-direct */
    bool no_read_ahead; /* --no-read-ahead */
    int progress;
    double mpi_timeout;
    const char *manifest;
    gr_sync_mode sync;
    gr_fio_engine engine;
} run_args;

/* Parse run's command line into *a (zeroed but for a->o, which gr_run_opts_init made):
 * -1 to go on, else the exit status, after printing the mistake (or the help). With
 * `json`, the mistake's first line is also kept in why[len], for --json's object. */
int gr_run_parse(int argc, char **argv, run_args *a, bool json, char *why, size_t why_len);

/* Whether --json is asked for anywhere on the command line (before a "--"), abbreviated
 * or not, and not with --output - (stdout then holds the tensor alone or nothing). */
bool gr_run_wants_json(int argc, char **argv);

/* Everything one run holds, so that any step can clean up after the others. */
typedef struct run_state {
    run_args a;
    int64_t started_ns;   /* the command's start */
    gr_ranks ranks;
    gr_graph *g;
    gr_consts consts;     /* the graph's, from --const: planned in step 1, loaded in 3 */
    gr_backend chosen;
    uint32_t backend_devices; /* the chosen backend's devices (CUDA: those present) */
    gr_io_plan plan;
    gr_manifest manifest; /* the run's (rank 0's) */
    char *manifest_path;  /* when one is written */
    gr_manifest own;      /* --mpi, per tensor: this rank's, MANIFEST.rankK, as it goes */
    char *own_path;
    gr_ledger ledger;
    bool *skip;           /* plan.count: done by the run --resume resumed, or a bad input */
    uint64_t host_memory; /* the window's bound: --host-memory, or the default */
    char host_memory_how[160]; /* where the default comes from ("" for --host-memory) */
    json_t *earlier[2];   /* --resume: the manifests read (the run's, this rank's) */
    json_t *settings;     /* settings_json, as the run started */
    char **claimed;       /* --resume: the outputs they list, sorted */
    uint64_t n_claimed;
    int64_t manifest_at, manifest_cost; /* when it was last written, and what it took */
    bool manifest_failed;                /* a write failed (said once) */
    bool manifest_dirty;                 /* a tensor ended since it was last written */
    bool reported;        /* the summary (or --json's object) is out */
    bool refused;         /* the job was refused (on some rank): nothing was written */
    bool resume_from_nothing; /* --resume found no manifest (said once the run goes ahead) */
    gr_host_need need;    /* what the run needs, reckoned before the window is opened */
    gr_window *win;       /* the host memory the tensors stream through */
    gr_readahead *ahead;  /* the first inputs, read while the runtime starts (or NULL) */
    gr_runtime *rt;
    gr_devmem_sampler *sampler;
    gr_run_report report; /* this rank's */
    char why[1024]; /* room for what a run short of memory needs (hostneed.h) */
} run_state;

/* "ok", "interrupted" or "failed" for an exit status. */
const char *gr_run_status_name(int rc);

/* The manifests' paths, and their files staged: the run's (rank 0's), and with --mpi per
 * tensor this rank's own, MANIFEST.rankK; with --resume, the earlier run's read first (its
 * outputs are the run's own to replace). GR_EXIT_OK, or an exit status with s->why. */
int gr_run_stage_manifests(run_state *s);

/* What decides the outputs besides the graph file and the inputs (--dtype, --shape, --raw,
 * the kernel files, the constants' files), as the manifest records it for --resume; NULL
 * when out of memory. */
json_t *gr_run_settings_json(const run_args *a);

/* --resume: refused (GR_EXIT_USAGE, s->why) when the settings differ from those of the run
 * that wrote `doc` at `path`. */
int gr_run_same_settings(run_state *s, const json_t *doc, const char *path);

/* Replace the manifest this rank keeps as the run goes; `now` forces it, else only when it
 * is due (at most every 250 ms, and at most a twentieth of the time). A failure is said
 * once and the run goes on (its outputs are whole; only resuming it needs the manifest). */
gr_status gr_run_write_live_manifest(run_state *s, const char *status, bool now);

/* The run's manifest: the summary, the run, and every tensor (tensor i: rank i % ranks). */
json_t *gr_run_manifest_json(const run_state *s, const gr_run_report *all,
                             const gr_run_facts *f);

/* On leaving early (ranks.h cleanup, or a run that failed): remove every temporary file of
 * this rank's, outputs and manifests, so that nothing stays behind but whole outputs. */
void gr_run_remove_temporaries(void *arg);

/* Planned tensor i's first input, as messages name it ("stdin" for `-`, as io.c does). */
const char *gr_run_input_name(const gr_io_plan *plan, uint64_t i);

/* What the input directories held that is not a tensor (inputs.h), on `doc`, when any. */
void gr_run_add_skipped(json_t *doc, const gr_inputs *in);

/* Step 4's end and step 5 (run.c), per tensor or --all-or-nothing: agree on the outcome,
 * write the run's manifest, report; the exit status. */
int gr_run_finish_per_tensor(run_state *s, int rc);
int gr_run_finish_all_or_nothing(run_state *s, int rc);

#endif /* GR_RUN_H */

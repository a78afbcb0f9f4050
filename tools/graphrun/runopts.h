/*
 * runopts.h - the command line that `graphrun run` and `graphrun check` share: the graph
 * and its kernels, the input and output paths and how to read them (--dtype, --shape, --raw,
 * --force), --json, and the runtime options (opts.h). Both commands parse these flags, check
 * them, load the graph, resolve the backend and describe the job to io.h with the functions
 * below, so that check refuses exactly what run refuses, in the same words and with the same
 * exit status. What only run has (--mpi, --resume, ...) stays in run.c. Called from the
 * command's main thread (getopt's state is global).
 */
#ifndef GR_RUNOPTS_H
#define GR_RUNOPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/consts.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/opts.h"

#define GR_RUN_MAX_KERNELS 16 /* --kernels files */

typedef struct gr_run_opts {
    const char *graph;
    const char *kernels[GR_RUN_MAX_KERNELS];
    uint32_t n_kernels;
    const char *inputs[GR_MAX_PORTS], *outputs[GR_MAX_PORTS];
    uint32_t n_inputs, n_outputs;
    const char *consts[GR_CONSTS_MAX_ARGS]; /* --const NAME=FILE, as given */
    uint32_t n_consts;
    const char *dtype;
    gr_io_shape shape;
    bool have_shape, raw, force, json;
    uint64_t host_memory; /* --host-memory; 0: the default (window.h) */
    gr_runtime_opts rt;
} gr_run_opts;

/* Option letters 'g' 'K' 'i' 'o' 'N' 'd' 'S' 'f' 'j' 'Z', after the runtime options' (opts.h); each
 * command adds {"raw", no_argument, NULL, 'R'} where its table has always had it: getopt lists
 * an ambiguous abbreviation's candidates in the table's order (run's --r: --resume, --raw). */
#define GR_RUN_LONGOPTS                                                                     \
    GR_RUNTIME_LONGOPTS,                                                                    \
    {"graph", required_argument, NULL, 'g'},                                                \
    {"kernels", required_argument, NULL, 'K'},                                              \
    {"input", required_argument, NULL, 'i'},                                                \
    {"output", required_argument, NULL, 'o'},                                               \
    {"const", required_argument, NULL, 'N'},                                                \
    {"dtype", required_argument, NULL, 'd'},                                                \
    {"shape", required_argument, NULL, 'S'},                                                \
    {"force", no_argument, NULL, 'f'},                                                      \
    {"json", no_argument, NULL, 'j'},                                                       \
    {"host-memory", required_argument, NULL, 'Z'}

#define GR_RUN_HOST_MEMORY_HELP                                                             \
    "  --host-memory SIZE\n"                                                                 \
    "                   host memory for the tensors being read, run and written: a\n"       \
    "                   bound whatever the size of the dataset (each tensor needs its\n"    \
    "                   inputs and outputs at once); default a quarter of this\n"           \
    "                   machine's memory, at most 2GiB, and at most a quarter of\n"         \
    "                   RLIMIT_AS or half of the cgroup's memory.max when those are set\n"

/* The letters of these options that take one value, given once (gr_cli_once). */
#define GR_RUN_ONCE "gdSZ"

/* Zeroes o and reads the runtime options' defaults (gr_runtime_opts_init: false after
 * printing a bad GR_* variable). CMD: "run" or "check", for messages. */
bool gr_run_opts_init(gr_run_opts *o, const char *cmd);

/* Apply option `opt` with argument `arg`, one of the above or a runtime option. Returns 1
 * when it was one of them and valid, 0 when it is not one of them, -1 after printing
 * "graphrun CMD: ..." (too many files, a bad --shape, a bad runtime value). */
int gr_run_opt(const char *cmd, int opt, const char *arg, gr_run_opts *o);

/* After the options (argv[optind...]): -1 when the command line is whole, else GR_EXIT_USAGE
 * after printing why (an argument left over, --graph or --input missing, or --output missing
 * when `need_outputs`). */
int gr_run_opts_finish(const char *cmd, int argc, char **argv, const gr_run_opts *o,
                       bool need_outputs);

/* Loads the --kernels files, then the graph into *g (the caller destroys it), checks the
 * inputs and outputs (when any are given) against its ports, and plans its constants from
 * the --const files into *consts (consts.h: checked, not loaded). GR_EXIT_OK, or
 * GR_EXIT_USAGE with the reason in why[len]. */
int gr_run_opts_graph(const gr_run_opts *o, gr_graph **g, gr_consts *consts, char *why,
                      size_t len);

/* The budget per device: --budget, else room for three iterations of the largest tensor
 * (of `largest` elements) beside the graph's constants (consts->device_bytes; at least
 * the backend's granule on CUDA). */
uint64_t gr_run_opts_budget(const gr_run_opts *o, gr_backend chosen, const gr_graph *g,
                            const gr_consts *consts, uint64_t largest);

/* Each worker's staging buffer (gr_config.staging_bytes) for a run: GR_RUN_STAGING_BYTES on
 * CUDA with tensors in a pinned window (run falls back to the default when the window
 * could not be pinned), else the runtime's default. Such tensors are copied where they
 * lie, staging is left only batches of the smallest files, and a run goes at the disk's
 * pace, not the link's: 64 MiB a worker would be resident memory beside --host-memory for
 * no speed. The price: the planner also bounds batches by it, so files of up to 4 MiB go
 * several to a unit and larger ones one a unit, each unit costing tens of microseconds
 * where the disk takes milliseconds for such a file. A unit that needs more staging grows
 * the buffer. */
#define GR_RUN_STAGING_BYTES (8ull << 20)
uint64_t gr_run_opts_staging(const gr_run_opts *o, gr_backend chosen);

/* Resolves the backend (gr_runtime_opts_resolve) into *chosen and probes it, counting its
 * devices into *count (NULL: not wanted). GR_EXIT_OK; GR_EXIT_USAGE for a mistake of the
 * command line, GR_EXIT_RUNTIME for a backend that is not there ("backend B: ..."), with the
 * reason in why[len]. */
int gr_run_opts_backend(gr_run_opts *o, gr_backend *chosen, uint32_t *count, char *why,
                        size_t len);

/* The paths, raw-mode flags, memory kind and graph g's ports in *io; what a command adds
 * (staging, shards, replaceable outputs) it sets itself. io keeps pointers into o. */
void gr_run_opts_io(const gr_run_opts *o, const gr_graph *g, gr_io_options *io);

#endif /* GR_RUNOPTS_H */

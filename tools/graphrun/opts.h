/*
 * opts.h - command-line options the driver's subcommands share.
 *
 * Runtime options (every subcommand that starts a runtime): --budget, --workers, --backend,
 * --contexts, --memory, --devices, --host-devices, with environment variables as defaults:
 * GR_BUDGET, GR_WORKERS, GR_BACKEND, GR_CONTEXTS, GR_MEMORY, GR_DEVICES, GR_HOST_DEVICES. A
 * flag beats the variable; a bad value in either is a usage error that names it, and so is a
 * flag given twice (the second would silently replace the first). Whether each listed device
 * is present is a usage error of --devices too (gr_runtime_opts_resolve). A flag that does
 * not apply to the backend (--contexts private on the host backend, --host-devices on
 * CUDA) is refused when the backend was named (--backend or GR_BACKEND),
 * and warned about when auto chose it; the variables are defaults, not asked for, and only
 * the flags are held to that.
 *
 * Seed-workload options (demo, bench): --count, --elems, --seed, --no-verify.
 */
#ifndef GR_OPTS_H
#define GR_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/tensor_set.h"

#define GR_OPTS_MAX_DEVICES 64

typedef struct gr_runtime_opts {
    gr_config cfg;   /* backend, workers, contexts, devices (pointing into `devices` below:
                        do not copy the struct); budget_bytes filled by the command */
    uint64_t budget; /* 0: the command's default */
    int memory;      /* gr_mem_kind, or -1: pinned on CUDA, pageable on the host backend */
    int devices[GR_OPTS_MAX_DEVICES]; /* --devices; cfg.device_count of them, 0: all */
    const char *cmd; /* the subcommand, for messages */
    uint32_t given;  /* the flags given on the command line (not the variables), a bit each */
} gr_runtime_opts;

typedef struct gr_seed_opts {
    gr_runtime_opts rt;
    uint64_t count;
    uint64_t elems; /* 0: the backend's default */
    uint64_t seed;
    bool verify;
} gr_seed_opts;

/* Option letters 'b' 'w' 'k' 'x' 'm' 'V' 'H'. */
#define GR_RUNTIME_LONGOPTS                                                                 \
    {"budget", required_argument, NULL, 'b'}, {"workers", required_argument, NULL, 'w'},    \
        {"backend", required_argument, NULL, 'k'},                                          \
        {"contexts", required_argument, NULL, 'x'},                                         \
        {"memory", required_argument, NULL, 'm'},                                           \
        {"devices", required_argument, NULL, 'V'}, {                                        \
        "host-devices", required_argument, NULL, 'H'                                        \
    }

#define GR_RUNTIME_OPTIONS_HELP                                                             \
    "  --budget SIZE    device memory budget per device, e.g. 2GiB, 512M, 1.5GB [GR_BUDGET]\n" \
    "  --workers N      worker threads per device (default 3) [GR_WORKERS]\n"             \
    "  --backend B      host, cuda or auto (default auto) [GR_BACKEND]\n"                 \
    "  --contexts C     CUDA worker contexts: primary or private (default primary)\n"     \
    "                   [GR_CONTEXTS]\n"                                                  \
    "  --memory M       host memory for tensors: pinned, pageable or registered (default\n" \
    "                   pinned on CUDA, pageable on the host backend); bench and demo\n"   \
    "                   also hostalloc (one cudaHostAlloc per tensor) [GR_MEMORY]\n"       \
    "  --devices LIST   devices to use, e.g. 0,1: CUDA ordinals, or on the host backend\n" \
    "                   emulated devices; all (the default) for every one [GR_DEVICES]\n" \
    "  --host-devices N host backend: devices to emulate (default 1) [GR_HOST_DEVICES]\n"

/* Option letters 'c' 'e' 's' 'n'. */
#define GR_SEED_LONGOPTS                                                                    \
    GR_RUNTIME_LONGOPTS, {"count", required_argument, NULL, 'c'},                           \
        {"elems", required_argument, NULL, 'e'}, {"seed", required_argument, NULL, 's'}, {   \
        "no-verify", no_argument, NULL, 'n'                                                 \
    }

#define GR_SEED_OPTIONS_HELP                                                                \
    "  --count N        tensors\n"                                                          \
    "  --elems N        float32 elements per tensor\n"                                      \
    "  --seed X         seed of the synthetic data (default 1)\n"                           \
    "  --no-verify      skip the bit-exact check of the outputs\n" GR_RUNTIME_OPTIONS_HELP

/* Defaults, then the GR_* environment variables. Returns false after printing
 * "graphrun CMD: GR_X=value: invalid value" for a bad variable. */
bool gr_runtime_opts_init(gr_runtime_opts *o, const char *cmd);
bool gr_seed_opts_init(gr_seed_opts *o, const char *cmd, uint64_t default_count);

/* Apply option `opt` with argument `arg`. Returns 1 when it was one of these options and
 * valid, 0 when it is not one of them, -1 after printing "graphrun CMD: invalid value" (or
 * "--budget given twice"). */
int gr_runtime_opt(const char *cmd, int opt, const char *arg, gr_runtime_opts *o);
int gr_seed_opt(const char *cmd, int opt, const char *arg, gr_seed_opts *o);

/* Probe the backend (AUTO resolves to what it would choose) and fill the defaults that
 * depend on it (memory kind). GR_OK, or the probe's failure with `err` filled;
 * GR_ERR_INVALID_ARGUMENT, in the flag's terms, for a device that is not there or a flag that
 * does not apply to the backend named (see above: under auto, a warning on stderr). */
gr_status gr_runtime_opts_resolve(gr_runtime_opts *o, gr_backend *chosen, gr_error_info *err);

/* The budget `graphrun run` and `graphrun check` use on backend `chosen` when the largest
 * tensor's iteration takes `footprint` device bytes: --budget (GR_BUDGET), else room for
 * GR_OPTS_BUDGET_ITERATIONS such iterations, and on CUDA at least its 2 MiB allocation
 * granule (the runtime refuses less; a budget the user gave is theirs to fix). */
#define GR_OPTS_BUDGET_ITERATIONS 3
uint64_t gr_runtime_opts_budget(const gr_runtime_opts *o, gr_backend chosen, uint64_t footprint);

/* gr_runtime_opts_resolve, then the seed defaults (elements per tensor). */
gr_status gr_seed_opts_resolve(gr_seed_opts *o, gr_backend *chosen, gr_error_info *err);

#endif /* GR_OPTS_H */

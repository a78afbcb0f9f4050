/*
 * seed_opts.h - the command-line options that `graphrun demo` and `graphrun bench` share:
 * the seed workload's shape, the runtime's configuration, and where tensors live.
 */
#ifndef GR_SEED_OPTS_H
#define GR_SEED_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/graphrun.h"
#include "tools/graphrun/tensor_set.h"

typedef struct gr_seed_opts {
    uint64_t count;
    uint64_t elems;  /* 0: the backend's default */
    uint64_t budget; /* 0: the command's default */
    uint64_t seed;
    int memory; /* gr_mem_kind, or -1: pinned on CUDA, pageable on the host backend */
    bool verify;
    gr_config cfg;
} gr_seed_opts;

/* Option letters 'c' 'e' 'b' 'w' 'k' 's' 'm' 'x' 'n'; add them to a command's table. */
#define GR_SEED_LONGOPTS                                                                    \
    {"count", required_argument, NULL, 'c'}, {"elems", required_argument, NULL, 'e'},       \
        {"budget", required_argument, NULL, 'b'}, {"workers", required_argument, NULL, 'w'}, \
        {"backend", required_argument, NULL, 'k'}, {"seed", required_argument, NULL, 's'},  \
        {"memory", required_argument, NULL, 'm'}, {"contexts", required_argument, NULL, 'x'}, \
        {"no-verify", no_argument, NULL, 'n'}

/* Help lines for those options. */
#define GR_SEED_OPTIONS_HELP                                                                \
    "  --count N        tensors\n"                                                          \
    "  --elems N        float32 elements per tensor\n"                                      \
    "  --budget SIZE    device memory budget per device, e.g. 2GiB, 512M, 1.5GB\n"           \
    "  --workers N      worker threads per device (default 3)\n"                            \
    "  --backend B      host, cuda or auto (default auto)\n"                                \
    "  --seed X         seed of the synthetic data (default 1)\n"                           \
    "  --memory M       where tensors live: pinned, pageable or registered\n"              \
    "                   (default pinned on CUDA, pageable on the host backend)\n"          \
    "  --contexts C     CUDA worker contexts: primary or private (default primary)\n"      \
    "  --no-verify      skip the bit-exact check of the outputs\n"

void gr_seed_opts_init(gr_seed_opts *o, uint64_t default_count);

/* Apply option `opt` with argument `arg`. Returns 1 when it was one of the shared options
 * and valid, 0 when it is not a shared option, -1 after printing "<cmd>: invalid value". */
int gr_seed_opt(const char *cmd, int opt, const char *arg, gr_seed_opts *o);

/* Resolve the defaults that depend on the backend actually chosen (elems, memory kind).
 * Returns GR_OK, or the probe's failure with `err` filled. */
gr_status gr_seed_opts_resolve(gr_seed_opts *o, gr_backend *chosen, gr_error_info *err);

#endif /* GR_SEED_OPTS_H */

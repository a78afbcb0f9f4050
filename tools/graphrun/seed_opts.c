/*
 * seed_opts.c - options shared by `graphrun demo` and `graphrun bench` (see seed_opts.h).
 */
#include "tools/graphrun/seed_opts.h"

#include <stdio.h>
#include <string.h>

#include "tools/graphrun/cli.h"

#define HOST_DEFAULT_ELEMS (1ull << 20) /* 4 MiB tensors on the CPU */
#define CUDA_DEFAULT_ELEMS 100000000ull /* the seed's 400 MB tensors on a GPU */

void gr_seed_opts_init(gr_seed_opts *o, uint64_t default_count)
{
    gr_config cfg = GR_CONFIG_INIT;

    memset(o, 0, sizeof(*o));
    o->count = default_count;
    o->seed = 1;
    o->memory = -1;
    o->verify = true;
    o->cfg = cfg;
}

static int bad(const char *cmd, const char *flag, const char *value)
{
    fprintf(stderr, "graphrun %s: invalid value '%s' for %s\n", cmd, value, flag);
    return -1;
}

int gr_seed_opt(const char *cmd, int opt, const char *arg, gr_seed_opts *o)
{
    uint64_t v;

    switch (opt) {
    case 'c':
        if (!gr_cli_parse_u64(arg, &o->count) || o->count == 0)
            return bad(cmd, "--count", arg);
        return 1;
    case 'e':
        if (!gr_cli_parse_u64(arg, &o->elems) || o->elems == 0)
            return bad(cmd, "--elems", arg);
        return 1;
    case 'b':
        if (!gr_cli_parse_size(arg, &o->budget) || o->budget == 0)
            return bad(cmd, "--budget", arg);
        return 1;
    case 'w':
        if (!gr_cli_parse_u64(arg, &v) || v == 0 || v > 1024)
            return bad(cmd, "--workers", arg);
        o->cfg.workers_per_device = (uint32_t)v;
        return 1;
    case 'k':
        if (strcmp(arg, "host") == 0)
            o->cfg.backend = GR_BACKEND_HOST;
        else if (strcmp(arg, "cuda") == 0)
            o->cfg.backend = GR_BACKEND_CUDA;
        else if (strcmp(arg, "auto") == 0)
            o->cfg.backend = GR_BACKEND_AUTO;
        else
            return bad(cmd, "--backend", arg);
        return 1;
    case 's':
        if (!gr_cli_parse_u64(arg, &o->seed))
            return bad(cmd, "--seed", arg);
        return 1;
    case 'm':
        if (strcmp(arg, "pinned") == 0)
            o->memory = GR_MEM_PINNED;
        else if (strcmp(arg, "pageable") == 0)
            o->memory = GR_MEM_PAGEABLE;
        else if (strcmp(arg, "registered") == 0)
            o->memory = GR_MEM_REGISTERED;
        else
            return bad(cmd, "--memory", arg);
        return 1;
    case 'x':
        if (strcmp(arg, "primary") == 0)
            o->cfg.context_mode = GR_CONTEXT_PRIMARY;
        else if (strcmp(arg, "private") == 0)
            o->cfg.context_mode = GR_CONTEXT_PRIVATE;
        else
            return bad(cmd, "--contexts", arg);
        return 1;
    case 'n':
        o->verify = false;
        return 1;
    default:
        return 0;
    }
}

gr_status gr_seed_opts_resolve(gr_seed_opts *o, gr_backend *chosen, gr_error_info *err)
{
    gr_status st = gr_backend_probe(o->cfg.backend, NULL, chosen, err);

    if (st != GR_OK)
        return st;
    if (o->elems == 0)
        o->elems = *chosen == GR_BACKEND_CUDA ? CUDA_DEFAULT_ELEMS : HOST_DEFAULT_ELEMS;
    if (o->memory < 0)
        o->memory = *chosen == GR_BACKEND_CUDA ? GR_MEM_PINNED : GR_MEM_PAGEABLE;
    return GR_OK;
}

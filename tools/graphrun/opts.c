/*
 * opts.c - options shared by the driver's subcommands (see opts.h).
 */
#include "tools/graphrun/opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/graphrun/cli.h"

#define HOST_DEFAULT_ELEMS (1ull << 20) /* 4 MiB tensors on the CPU */
#define CUDA_DEFAULT_ELEMS 100000000ull /* the seed's 400 MB tensors on a GPU */
#define CUDA_GRANULE (2ull << 20)       /* the smallest budget CUDA takes (graphrun.h) */

static const struct {
    const char *var;
    int opt;
} env_defaults[] = {
    {"GR_BUDGET", 'b'},   {"GR_WORKERS", 'w'}, {"GR_BACKEND", 'k'},
    {"GR_CONTEXTS", 'x'}, {"GR_MEMORY", 'm'},  {"GR_DEVICES", 'V'},
    {"GR_HOST_DEVICES", 'H'},
};

static const char *const flag_name[128] = {
    ['b'] = "--budget", ['w'] = "--workers", ['k'] = "--backend", ['x'] = "--contexts",
    ['m'] = "--memory", ['c'] = "--count", ['e'] = "--elems", ['s'] = "--seed",
    ['V'] = "--devices", ['H'] = "--host-devices",
};

/* What a valid value looks like, where the flag's name does not say it. */
static const char *hint(int opt)
{
    return opt == 'V'   ? " (want distinct device numbers such as 0,1, or all)"
           : opt == 'H' ? " (want 1..64)"
           : opt == 'b' ? GR_CLI_SIZE_FORMS "; at least 256 bytes, 2 MiB on CUDA"
                        : "";
}

/* One bit per flag of these options, for "given twice". */
static uint32_t flag_bit(int opt)
{
    static const char letters[] = "bwkxmVHces";
    const char *at = opt > 0 && opt < 128 ? strchr(letters, opt) : NULL;

    return at ? 1u << (at - letters) : 0;
}

/* A flag given a second time would replace the first without a word: refused. */
static bool twice(const char *cmd, int opt, gr_runtime_opts *o)
{
    uint32_t bit = flag_bit(opt);

    if (bit && (o->given & bit)) {
        fprintf(stderr, "graphrun %s: %s given twice: give it once (the second would replace "
                        "the first)\n",
                cmd, flag_name[opt]);
        return true;
    }
    o->given |= bit;
    return false;
}

static int bad(const char *cmd, int opt, const char *value)
{
    fprintf(stderr, "graphrun %s: invalid value '%s' for %s%s\n", cmd, value, flag_name[opt],
            hint(opt));
    return -1;
}

/* A device list: "all", or distinct numbers separated by commas ("0,1"). */
static bool parse_devices(const char *arg, gr_runtime_opts *o)
{
    const char *p = arg;
    uint32_t n = 0;

    if (strcmp(arg, "all") == 0) {
        o->cfg.devices = NULL;
        o->cfg.device_count = 0;
        return true;
    }
    for (;;) {
        char num[16];
        size_t len = strcspn(p, ",");
        uint64_t v;

        if (len == 0 || len >= sizeof(num) || n == GR_OPTS_MAX_DEVICES)
            return false;
        memcpy(num, p, len);
        num[len] = '\0';
        if (num[0] < '0' || num[0] > '9' || !gr_cli_parse_u64(num, &v) || v > 65535)
            return false;
        for (uint32_t i = 0; i < n; i++)
            if (o->devices[i] == (int)v)
                return false; /* listed twice */
        o->devices[n++] = (int)v;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    o->cfg.devices = o->devices;
    o->cfg.device_count = n;
    return true;
}

/* Apply a runtime option: 1 applied, 0 not a runtime option, -1 bad value (silent: the
 * caller names the flag or the environment variable). */
static int apply_runtime(int opt, const char *arg, gr_runtime_opts *o)
{
    uint64_t v;

    switch (opt) {
    case 'b':
        /* The runtime's floor, refused here in the flag's terms (CUDA's 2 MiB granule
         * needs the backend, which the runtime checks). */
        return gr_cli_parse_size(arg, &o->budget) && o->budget >= GR_BUFFER_ALIGN ? 1 : -1;
    case 'w':
        if (!gr_cli_parse_u64(arg, &v) || v == 0 || v > 1024)
            return -1;
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
            return -1;
        return 1;
    case 'x':
        if (strcmp(arg, "primary") == 0)
            o->cfg.context_mode = GR_CONTEXT_PRIMARY;
        else if (strcmp(arg, "private") == 0)
            o->cfg.context_mode = GR_CONTEXT_PRIVATE;
        else
            return -1;
        return 1;
    case 'V':
        return parse_devices(arg, o) ? 1 : -1;
    case 'H':
        if (!gr_cli_parse_u64(arg, &v) || v == 0 || v > 64)
            return -1;
        o->cfg.host_devices = (uint32_t)v;
        return 1;
    case 'm':
        if (strcmp(arg, "pinned") == 0)
            o->memory = GR_MEM_PINNED;
        else if (strcmp(arg, "pageable") == 0)
            o->memory = GR_MEM_PAGEABLE;
        else if (strcmp(arg, "registered") == 0)
            o->memory = GR_MEM_REGISTERED;
        else if (strcmp(arg, "hostalloc") == 0)
            o->memory = GR_MEM_HOSTALLOC;
        else
            return -1;
        return 1;
    default:
        return 0;
    }
}

bool gr_runtime_opts_init(gr_runtime_opts *o, const char *cmd)
{
    gr_config cfg = GR_CONFIG_INIT;

    memset(o, 0, sizeof(*o));
    o->cfg = cfg;
    o->memory = -1;
    o->cmd = cmd;
    for (size_t i = 0; i < sizeof(env_defaults) / sizeof(env_defaults[0]); i++) {
        const char *v = getenv(env_defaults[i].var);

        if (v == NULL || *v == '\0')
            continue;
        if (apply_runtime(env_defaults[i].opt, v, o) != 1) {
            fprintf(stderr, "graphrun %s: %s=%s: invalid value%s\n", cmd, env_defaults[i].var, v,
                    hint(env_defaults[i].opt));
            return false;
        }
    }
    return true;
}

bool gr_seed_opts_init(gr_seed_opts *o, const char *cmd, uint64_t default_count)
{
    memset(o, 0, sizeof(*o));
    o->count = default_count;
    o->seed = 1;
    o->verify = true;
    return gr_runtime_opts_init(&o->rt, cmd);
}

int gr_runtime_opt(const char *cmd, int opt, const char *arg, gr_runtime_opts *o)
{
    int r;

    if (flag_bit(opt) && twice(cmd, opt, o))
        return -1;
    r = apply_runtime(opt, arg, o);
    return r < 0 ? bad(cmd, opt, arg) : r;
}

int gr_seed_opt(const char *cmd, int opt, const char *arg, gr_seed_opts *o)
{
    if ((opt == 'c' || opt == 'e' || opt == 's') && twice(cmd, opt, &o->rt))
        return -1;
    switch (opt) {
    case 'c':
        if (!gr_cli_parse_u64(arg, &o->count) || o->count == 0)
            return bad(cmd, opt, arg);
        return 1;
    case 'e':
        if (!gr_cli_parse_u64(arg, &o->elems) || o->elems == 0)
            return bad(cmd, opt, arg);
        return 1;
    case 's':
        if (!gr_cli_parse_u64(arg, &o->seed))
            return bad(cmd, opt, arg);
        return 1;
    case 'n':
        o->verify = false;
        return 1;
    default:
        return gr_runtime_opt(cmd, opt, arg, &o->rt);
    }
}

/* A flag given for a backend other than `chosen`: false with err filled when the backend
 * was named; a warning when auto chose it. */
static bool flags_apply(gr_runtime_opts *o, gr_backend chosen, gr_error_info *err)
{
    const char *flag = NULL, *why = NULL;

    if (chosen == GR_BACKEND_HOST && (o->given & flag_bit('x')) &&
        o->cfg.context_mode == GR_CONTEXT_PRIVATE) {
        flag = "--contexts private";
        why = "CUDA contexts; the host backend has none";
    } else if (chosen == GR_BACKEND_CUDA && (o->given & flag_bit('H'))) {
        flag = "--host-devices";
        why = "the host backend's emulated devices; CUDA uses its GPUs (--devices picks them)";
    }
    if (flag == NULL)
        return true;
    if (o->cfg.backend == GR_BACKEND_AUTO) {
        fprintf(stderr, "graphrun %s: warning: %s does not apply: it is about %s (auto chose "
                        "the %s backend)\n",
                o->cmd ? o->cmd : "", flag, why, gr_backend_name(chosen));
        return true;
    }
    memset(err, 0, sizeof(*err));
    err->status = GR_ERR_INVALID_ARGUMENT;
    err->index = GR_NO_INDEX;
    snprintf(err->message, sizeof(err->message),
             "%s does not apply to the %s backend: it is about %s; drop it", flag,
             gr_backend_name(chosen), why);
    return false;
}

gr_status gr_runtime_opts_resolve(gr_runtime_opts *o, gr_backend *chosen, gr_error_info *err)
{
    uint32_t count = 0;
    gr_status st = gr_backend_probe(o->cfg.backend, NULL, chosen, err);

    if (st != GR_OK)
        return st;
    /* Devices that are not there are a mistake on the command line, said in its terms
     * (the runtime would refuse them too, as a failure to start). */
    if (*chosen == GR_BACKEND_HOST)
        count = o->cfg.host_devices;
    else if (gr_backend_probe(*chosen, &count, NULL, err) != GR_OK)
        count = 0;
    for (uint32_t i = 0; i < o->cfg.device_count; i++)
        if (o->cfg.devices[i] < 0 || (uint32_t)o->cfg.devices[i] >= count) {
            memset(err, 0, sizeof(*err));
            err->status = GR_ERR_INVALID_ARGUMENT;
            err->index = GR_NO_INDEX;
            snprintf(err->message, sizeof(err->message),
                     "invalid value for --devices: device %d is not there (the %s backend has "
                     "%u device%s%s)",
                     o->cfg.devices[i], gr_backend_name(*chosen), count, count == 1 ? "" : "s",
                     *chosen == GR_BACKEND_HOST ? "; --host-devices emulates more" : "");
            return GR_ERR_INVALID_ARGUMENT;
        }
    if (!flags_apply(o, *chosen, err))
        return GR_ERR_INVALID_ARGUMENT;
    if (o->memory < 0)
        o->memory = *chosen == GR_BACKEND_CUDA ? GR_MEM_PINNED : GR_MEM_PAGEABLE;
    return GR_OK;
}

uint64_t gr_runtime_opts_budget(const gr_runtime_opts *o, gr_backend chosen, uint64_t footprint)
{
    uint64_t b = footprint * GR_OPTS_BUDGET_ITERATIONS;

    if (o->budget)
        return o->budget;
    return chosen == GR_BACKEND_CUDA && b < CUDA_GRANULE ? CUDA_GRANULE : b;
}

gr_status gr_seed_opts_resolve(gr_seed_opts *o, gr_backend *chosen, gr_error_info *err)
{
    gr_status st = gr_runtime_opts_resolve(&o->rt, chosen, err);

    if (st == GR_OK && o->elems == 0)
        o->elems = *chosen == GR_BACKEND_CUDA ? CUDA_DEFAULT_ELEMS : HOST_DEFAULT_ELEMS;
    return st;
}

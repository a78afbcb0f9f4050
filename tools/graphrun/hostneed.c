/*
 * hostneed.c - the host memory a run needs (see hostneed.h).
 *
 * The figures mirror what the runtime and the driver allocate, not what they have touched:
 * a limit on the address space counts reservations, and the window and the arenas are
 * reserved whole. The thread count mirrors the runtime's defaults (copy helpers: one per CPU
 * but the caller's, at most 16, as runtime/config.c picks them) and counts the pread engine's
 * threads whether or not io_uring spares them, so that the figure stays an upper bound.
 */
#define _GNU_SOURCE
#include "tools/graphrun/hostneed.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/graphrun/cli.h"
#include "tools/graphrun/fileio.h"
#include "tools/graphrun/window.h"

/* A "Key:   N kB" line of a /proc file, in bytes (0: absent). */
static uint64_t proc_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    size_t n = strlen(key);
    unsigned long long v = 0;
    char line[256];

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            if (sscanf(line + n + 1, "%llu", &v) != 1)
                v = 0;
            break;
        }
    fclose(f);
    return (uint64_t)v * 1024;
}

/* The cgroup's memory.max ("max" or absent: 0). */
static uint64_t cgroup_max(void)
{
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    unsigned long long v = 0;

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

static uint32_t copy_threads(const gr_config *cfg)
{
    long cpus;

    if (cfg->copy_threads != 0)
        return cfg->copy_threads;
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 17 ? 16 : cpus > 1 ? (uint32_t)cpus - 1 : 0;
}

/* A new thread's stack and guard, as pthread_create makes them by default. */
static uint64_t thread_stack(void)
{
    pthread_attr_t attr;
    size_t stack = 8u << 20, guard = 4096;

    if (pthread_getattr_default_np(&attr) == 0) {
        pthread_attr_getstacksize(&attr, &stack);
        pthread_attr_getguardsize(&attr, &guard);
        pthread_attr_destroy(&attr);
    }
    return (uint64_t)stack + guard;
}

void gr_host_need_of(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                     const gr_config *cfg, gr_backend backend, uint32_t devices,
                     gr_host_need *out)
{
    uint64_t sum = 0, arenas;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct rlimit as;

    memset(out, 0, sizeof(*out));
    devices = devices ? devices : 1;
    gr_window_need(plan, skip, &out->least, &sum);
    out->limit = limit;
    out->window = gr_window_most(plan, skip, limit);
    if (out->window < out->least)
        out->window = out->least;
    if (backend == GR_BACKEND_HOST)
        out->arena = cfg->budget_bytes / 256 * 256 * devices;
    out->workers = (cfg->workers_per_device ? cfg->workers_per_device : 3) * devices;
    /* runtime/worker.c: staging_bytes and the ports' alignment, whole pages. */
    out->staging_each = (cfg->staging_bytes + 2u * GR_MAX_PORTS * GR_BUFFER_ALIGN + 4095) /
                        4096 * 4096;
    out->staging = out->staging_each * out->workers;
    /* The workers, the copy helpers, the deadline thread, the driver's I/O threads, and
     * the read-ahead thread (readahead.h: while the runtime starts) or the window's grower
     * (window.h: while the stream runs; the two never overlap). */
    out->threads = out->workers + copy_threads(cfg) + 1 + GR_FIO_PREAD_THREADS + 1;
    out->thread_each = thread_stack();
    arenas = out->threads;
    if (cpus > 0 && arenas > 8 * (uint64_t)cpus) /* glibc's default arena_max */
        arenas = 8 * (uint64_t)cpus;
    out->threads_bytes = out->threads * out->thread_each + arenas * GR_HOSTNEED_MALLOC_ARENA;
    out->thread_each += GR_HOSTNEED_MALLOC_ARENA;
    out->program = proc_kb("/proc/self/status", "VmSize");
    out->memory = out->window + out->arena + out->staging;
    out->address = out->memory + out->threads_bytes + out->program;
    out->floor = out->least + out->arena + out->program;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
        out->as_limit = as.rlim_cur;
    out->cg_limit = cgroup_max();
    out->available = proc_kb("/proc/meminfo", "MemAvailable");
}

const char *gr_host_need_describe(const gr_host_need *n, const char *limit_how, char *buf,
                                  size_t len)
{
    char m[32], w[32], l[32], b[32], s[32], e[32], a[32], t[32], p[32], arena[96] = "";

    if (n->arena)
        snprintf(arena, sizeof(arena), ", the budget %s (host memory on the host backend)",
                 gr_cli_bytes(n->arena, b, sizeof(b)));
    snprintf(buf, len,
             "up to %s of memory: the window %s (within %s %s)%s, %u workers' staging %s (%s "
             "each); and up to %s of address space, with %u threads' stacks and malloc arenas "
             "(%s) and what the program maps already (%s)",
             gr_cli_bytes(n->memory, m, sizeof(m)), gr_cli_bytes(n->window, w, sizeof(w)),
             limit_how ? "the default" : "--host-memory", gr_cli_bytes(n->limit, l, sizeof(l)),
             arena, n->workers, gr_cli_bytes(n->staging, s, sizeof(s)),
             gr_cli_bytes(n->staging_each, e, sizeof(e)), gr_cli_bytes(n->address, a, sizeof(a)),
             n->threads, gr_cli_bytes(n->threads_bytes, t, sizeof(t)),
             gr_cli_bytes(n->program, p, sizeof(p)));
    return buf;
}

const char *gr_host_need_advice(const gr_host_need *n, char *buf, size_t len)
{
    uint64_t excess = 0, to;
    char hm[64] = "", raise[128] = "", b1[32], b2[32], b3[32];
    size_t at;

    if (n->as_limit && n->floor > n->as_limit) { /* the window is at its least already */
        snprintf(buf, len, "%sraise the limit to %s at the very least, %s for every part of "
                 "the run (prlimit --as, ulimit -v)",
                 n->arena && n->floor - n->arena < n->as_limit ? "lower --budget, or " : "",
                 gr_cli_bytes(n->floor, b1, sizeof(b1)),
                 gr_cli_bytes(n->address, b2, sizeof(b2)));
        return buf;
    }
    if (n->as_limit && n->address > n->as_limit) {
        excess = n->address - n->as_limit;
        snprintf(raise, sizeof(raise), "raise the limit to %s or more (prlimit --as, ulimit -v)",
                 gr_cli_bytes(n->address, b1, sizeof(b1)));
    } else if (n->cg_limit && n->memory > n->cg_limit) {
        excess = n->memory - n->cg_limit;
        snprintf(raise, sizeof(raise), "raise the cgroup's memory.max to %s or more",
                 gr_cli_bytes(n->memory, b1, sizeof(b1)));
    } else if (n->available && n->memory > n->available) {
        excess = n->memory - n->available;
        snprintf(raise, sizeof(raise), "free memory");
    } else {
        snprintf(raise, sizeof(raise), "free memory or raise the limit");
    }
    if (n->window > n->least) {
        to = excess && n->window - n->least > excess ? (n->window - excess) >> 20 << 20 : 0;
        if (to >= n->least)
            snprintf(hm, sizeof(hm), "--host-memory to %s", gr_cli_bytes(to, b1, sizeof(b1)));
        else
            snprintf(hm, sizeof(hm), "--host-memory (down to %s, the largest tensor's need)",
                     gr_cli_bytes(n->least, b1, sizeof(b1)));
    }
    at = (size_t)snprintf(buf, len, "lower %s%s%s", hm, hm[0] ? ", " : "",
                          n->arena ? "--budget" : "");
    if (at < len && n->workers > 1)
        at += (size_t)snprintf(buf + at, len - at,
                               "%s--workers (each worker holds %s of staging and reserves %s "
                               "of address space for its thread)",
                               hm[0] || n->arena ? " or " : "",
                               gr_cli_bytes(n->staging_each, b2, sizeof(b2)),
                               gr_cli_bytes(n->thread_each, b3, sizeof(b3)));
    if (at == strlen("lower ")) /* nothing to lower */
        snprintf(buf, len, "%s", raise);
    else if (at < len)
        snprintf(buf + at, len - at, ", or %s", raise);
    return buf;
}

bool gr_host_need_over(const gr_host_need *n, bool *certain, char *buf, size_t len)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], advice[512];
    size_t at;

    *certain = false;
    buf[0] = '\0';
    if (n->as_limit && n->floor > n->as_limit) {
        *certain = true;
        at = (size_t)snprintf(
            buf, len,
            "the run needs at least %s of address space at once (the largest tensor's %s, "
            "the budget's %s and what the program maps already, %s), more than the "
            "address-space limit, RLIMIT_AS %s: ",
            gr_cli_bytes(n->floor, b1, sizeof(b1)), gr_cli_bytes(n->least, b2, sizeof(b2)),
            gr_cli_bytes(n->arena, b3, sizeof(b3)), gr_cli_bytes(n->program, b4, sizeof(b4)),
            gr_cli_bytes(n->as_limit, b5, sizeof(b5)));
    } else if (n->as_limit && n->address > n->as_limit) {
        at = (size_t)snprintf(buf, len,
                              "the run may reserve up to %s of address space, more than the "
                              "address-space limit, RLIMIT_AS %s, and then fail to start: ",
                              gr_cli_bytes(n->address, b1, sizeof(b1)),
                              gr_cli_bytes(n->as_limit, b2, sizeof(b2)));
    } else if (n->cg_limit && n->memory > n->cg_limit) {
        at = (size_t)snprintf(buf, len,
                              "the run may use up to %s of memory, more than the cgroup's "
                              "memory.max, %s: ",
                              gr_cli_bytes(n->memory, b1, sizeof(b1)),
                              gr_cli_bytes(n->cg_limit, b2, sizeof(b2)));
    } else if (n->available && n->memory > n->available) {
        at = (size_t)snprintf(buf, len,
                              "the run may use up to %s of memory, more than the %s this "
                              "machine has available: ",
                              gr_cli_bytes(n->memory, b1, sizeof(b1)),
                              gr_cli_bytes(n->available, b2, sizeof(b2)));
    } else {
        return false;
    }
    if (at < len)
        snprintf(buf + at, len - at, "%s", gr_host_need_advice(n, advice, sizeof(advice)));
    return true;
}

const char *gr_host_need_failure(const gr_host_need *n, const char *limit_how, char *buf,
                                 size_t len)
{
    char need[512], advice[512], b1[32], b2[32], limit[128] = "";

    if (n->as_limit)
        snprintf(limit, sizeof(limit), "; the address space is limited to %s (RLIMIT_AS)",
                 gr_cli_bytes(n->as_limit, b1, sizeof(b1)));
    if (n->cg_limit)
        snprintf(limit + strlen(limit), sizeof(limit) - strlen(limit),
                 "; the cgroup's memory.max is %s", gr_cli_bytes(n->cg_limit, b1, sizeof(b1)));
    if (n->available && (n->memory > n->available || limit[0] == '\0'))
        snprintf(limit + strlen(limit), sizeof(limit) - strlen(limit),
                 "; %s of memory was available", gr_cli_bytes(n->available, b2, sizeof(b2)));
    snprintf(buf, len, "this run needs %s%s: %s",
             gr_host_need_describe(n, limit_how, need, sizeof(need)), limit,
             gr_host_need_advice(n, advice, sizeof(advice)));
    return buf;
}

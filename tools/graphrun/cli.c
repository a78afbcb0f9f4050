/*
 * cli.c - command-line helpers (see cli.h).
 */
#include "tools/graphrun/cli.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

bool gr_cli_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
        return false;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

bool gr_cli_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit; /* compared without case */
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"B", 1},
        {"K", 1ull << 10},  {"Ki", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1000ull},
        {"M", 1ull << 20},  {"Mi", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1000000ull},
        {"G", 1ull << 30},  {"Gi", 1ull << 30}, {"GiB", 1ull << 30}, {"GB", 1000000000ull},
        {"T", 1ull << 40},  {"Ti", 1ull << 40}, {"TiB", 1ull << 40}, {"TB", 1000000000000ull},
    };
    uint64_t whole = 0, frac = 0, scale = 1;
    const char *p = s;

    /* Digits, an optional fraction, an optional unit: nothing else (no sign, exponent,
     * hexadecimal, "inf" or "nan", which strtod would take). */
    if (s == NULL || !isdigit((unsigned char)*p))
        return false;
    for (; isdigit((unsigned char)*p); p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return false;
        for (; isdigit((unsigned char)*p); p++) {
            if (scale >= 1000000000000ull) /* more digits than any unit can use */
                return false;
            frac = frac * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        unsigned __int128 bytes;

        if (strcasecmp(p, units[i].unit) != 0)
            continue;
        /* A whole number of bytes, or it is refused: 0.3K is not one. */
        bytes = (unsigned __int128)whole * units[i].mult;
        if ((unsigned __int128)frac * units[i].mult % scale != 0)
            return false;
        bytes += (unsigned __int128)frac * units[i].mult / scale;
        if (bytes > UINT64_MAX)
            return false;
        *out = (uint64_t)bytes;
        return true;
    }
    return false;
}

mode_t gr_cli_file_mode(void)
{
    static mode_t mode = (mode_t)-1;

    if (mode == (mode_t)-1) { /* umask can only be read by setting it: put it back */
        mode_t mask = umask(022);

        umask(mask);
        mode = 0666 & ~mask;
    }
    return mode;
}

uint64_t gr_cli_rss_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t gr_cli_peak_rss_bytes(void)
{
    unsigned long long kib = 0;
    struct rusage ru;
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");

    if (f != NULL) {
        while (fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
                break;
        fclose(f);
    }
    if (kib == 0 && getrusage(RUSAGE_SELF, &ru) == 0)
        kib = (unsigned long long)ru.ru_maxrss;
    return (uint64_t)kib * 1024;
}

bool gr_cli_once(uint32_t *seen, int opt, const char *letters, const char *who,
                 const struct option *longopts)
{
    const char *at = opt > 0 ? strchr(letters, opt) : NULL;
    uint32_t bit;

    if (at == NULL || at - letters >= 32)
        return true;
    bit = 1u << (at - letters);
    if ((*seen & bit) == 0) {
        *seen |= bit;
        return true;
    }
    for (const struct option *o = longopts; o->name != NULL; o++)
        if (o->flag == NULL && o->val == opt) {
            fprintf(stderr, "%s: --%s given twice: give it once (the second would replace "
                            "the first)\n",
                    who, o->name);
            return false;
        }
    fprintf(stderr, "%s: an option given twice: give it once\n", who);
    return false;
}

void gr_cli_try_help(const char *cmd)
{
    fprintf(stderr, "graphrun %s: see 'graphrun %s --help' for the options\n", cmd, cmd);
}

const char *gr_cli_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;

    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, size, "%.2f %s", v, unit[u]);
    return buf;
}

typedef struct pfor {
    uint64_t n;
    _Atomic uint64_t next;
    void (*fn)(uint64_t, void *);
    void *arg;
} pfor;

static void *pfor_main(void *p)
{
    pfor *f = p;
    uint64_t i;

    while ((i = atomic_fetch_add(&f->next, 1)) < f->n)
        f->fn(i, f->arg);
    return NULL;
}

void gr_cli_parallel_for(uint64_t n, unsigned threads, void (*fn)(uint64_t i, void *arg),
                         void *arg)
{
    pthread_t tid[64];
    pfor f = {.n = n, .fn = fn, .arg = arg};
    unsigned started = 0;

    if (threads == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? (unsigned)cpus : 1;
    }
    if (threads > 64)
        threads = 64;
    if (threads > n)
        threads = (unsigned)n;
    for (unsigned t = 1; t < threads; t++)
        if (pthread_create(&tid[started], NULL, pfor_main, &f) == 0)
            started++;
    pfor_main(&f); /* the caller works too, so this finishes even if no thread started */
    for (unsigned t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
}


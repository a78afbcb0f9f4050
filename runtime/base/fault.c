/*
 * fault.c - the armed fault plan and its counters (see fault.h).
 *
 * Counters are atomics, so concurrent calls of a site each get a distinct ordinal and
 * exactly the planned calls fail. The plan itself is written only while no call reads it:
 * gr__fault_arm clears gr__fault_armed first, and gr_runtime_create arms before it starts
 * the threads that call sites (a faulty runtime is the only one, as fault.h asks).
 *
 * A random rule (SITE:~N) decides each call from its ordinal alone: call k of the site
 * fails when a hash of (seed, site, k) is 0 modulo N. No state is shared beyond the
 * counter, so the decision costs one fetch-add and a few multiplies, and the set of
 * ordinals that fail is a function of the seed: the same in every run. Which thread makes
 * call k depends on the interleaving, so which job a fault lands in can differ between two
 * runs of the same seed; the count of faults for the same number of calls cannot.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "runtime/base/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun_testing.h>

#include "runtime/base/sync.h"

#define MAX_RULES 16

typedef struct rule {
    gr_fault_site site;
    uint64_t nth;      /* SITE:N, SITE:N+: the call; SITE:~N: one in nth */
    bool from_then_on;
    bool random;
} rule;

atomic_bool gr__fault_armed;
static rule rules[MAX_RULES];
static uint32_t n_rules;
static uint64_t seed;
static _Atomic uint64_t calls[GR_FAULT_SITE_COUNT];
static _Atomic uint64_t injected[GR_FAULT_SITE_COUNT];
static _Atomic uint64_t armed_token; /* 0: none */
static _Atomic uint64_t next_token = 1;

static const char *const site_names[GR_FAULT_SITE_COUNT] = {
    [GR_FAULT_ALLOC] = "alloc",
    [GR_FAULT_PIN] = "pin",
    [GR_FAULT_THREAD] = "thread",
    [GR_FAULT_ARENA] = "arena",
    [GR_FAULT_DEVICE_ALLOC] = "device_alloc",
    [GR_FAULT_REGISTER] = "register",
    [GR_FAULT_STREAM] = "stream",
    [GR_FAULT_EVENT] = "event",
    [GR_FAULT_GRAPH_INSTANTIATE] = "graph_instantiate",
    [GR_FAULT_GRAPH_UPDATE] = "graph_update",
    [GR_FAULT_GRAPH_LAUNCH] = "graph_launch",
    [GR_FAULT_COPY] = "copy",
};

gr_status gr_testing_set_fault_plan(gr_config *cfg, const char *plan)
{
    if (cfg == NULL || cfg->magic != GR_CONFIG_MAGIC)
        return GR_ERR_INVALID_ARGUMENT;
    cfg->testing_ = plan;
    return GR_OK;
}

const char *gr__fault_site_name(gr_fault_site site)
{
    return (unsigned)site < GR_FAULT_SITE_COUNT ? site_names[site] : NULL;
}

static gr_status bad_plan(gr_error_info *err, const char *plan, const char *why, size_t len,
                          const char *what)
{
    return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                         "fault plan '%.120s': %s '%.*s' (expected SITE:N, SITE:N+, SITE:~N or "
                         "seed=S; sites: alloc pin thread arena device_alloc register stream "
                         "event graph_instantiate graph_update graph_launch copy)",
                         plan, why, (int)len, what);
}

/* A whole number of 1 or more in s[0, len), or false. */
static bool parse_count(const char *s, size_t len, uint64_t *out)
{
    unsigned long long n;
    char num[24], *end;

    if (len == 0 || len >= sizeof(num) || s[0] < '0' || s[0] > '9')
        return false;
    memcpy(num, s, len);
    num[len] = '\0';
    errno = 0;
    n = strtoull(num, &end, 10);
    if (errno != 0 || *end != '\0' || n == 0)
        return false;
    *out = n;
    return true;
}

/* Parse one SITE:N, SITE:N+ or SITE:~N rule of length len at s. */
static gr_status parse_rule(const char *plan, const char *s, size_t len, rule *out,
                            gr_error_info *err)
{
    const char *colon = memchr(s, ':', len), *num;
    size_t name_len, num_len;
    int site = -1;

    if (colon == NULL)
        return bad_plan(err, plan, "no ':' in", len, s);
    name_len = (size_t)(colon - s);
    for (int i = 0; i < GR_FAULT_SITE_COUNT; i++)
        if (strlen(site_names[i]) == name_len && memcmp(site_names[i], s, name_len) == 0)
            site = i;
    if (site < 0)
        return bad_plan(err, plan, "unknown site", name_len, s);
    num = colon + 1;
    num_len = len - name_len - 1;
    out->random = num_len > 0 && num[0] == '~';
    if (out->random) {
        num++;
        num_len--;
    }
    out->from_then_on = !out->random && num_len > 0 && num[num_len - 1] == '+';
    if (out->from_then_on)
        num_len--;
    if (!parse_count(num, num_len, &out->nth))
        return bad_plan(err, plan,
                        out->random ? "bad rate (one in N calls, N 1 or more) in"
                                    : "bad call number (1 or more) in",
                        len, s);
    out->site = (gr_fault_site)site;
    return GR_OK;
}

/* The seed of the random rules: seed=S in the plan, else GR_FAULT_SEED, else 0. */
static gr_status parse_seed(const char *plan, const char *s, size_t len, uint64_t *out,
                            gr_error_info *err)
{
    unsigned long long n;
    char num[24], *end;

    if (len == 0 || len >= sizeof(num) || s[0] < '0' || s[0] > '9')
        return bad_plan(err, plan, "bad seed (a whole number) in", len, s);
    memcpy(num, s, len);
    num[len] = '\0';
    errno = 0;
    n = strtoull(num, &end, 10);
    if (errno != 0 || *end != '\0')
        return bad_plan(err, plan, "bad seed (a whole number) in", len, s);
    *out = n;
    return GR_OK;
}

gr_status gr__fault_arm(const char *plan, uint64_t *token, gr_error_info *err)
{
    rule parsed[MAX_RULES];
    uint32_t n = 0;
    const char *s = plan, *env = getenv("GR_FAULT_SEED");
    uint64_t parsed_seed = 0;
    bool seeded = false;
    gr_status st;

    while (*s != '\0') {
        size_t len = strcspn(s, ",");

        if (len >= 5 && memcmp(s, "seed=", 5) == 0) {
            if (seeded)
                return bad_plan(err, plan, "a second seed in", len, s);
            if ((st = parse_seed(plan, s + 5, len - 5, &parsed_seed, err)) != GR_OK)
                return st;
            seeded = true;
        } else {
            if (n == MAX_RULES)
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                     "fault plan '%.120s': more than %d rules", plan, MAX_RULES);
            if ((st = parse_rule(plan, s, len, &parsed[n++], err)) != GR_OK)
                return st;
        }
        s += len;
        if (*s == ',' && *++s == '\0')
            return bad_plan(err, plan, "empty rule after", 0, "");
    }
    if (!seeded && env != NULL && *env != '\0' &&
        parse_seed(env, env, strlen(env), &parsed_seed, err) != GR_OK)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "fault plan '%.120s': GR_FAULT_SEED '%.40s' is not a whole number",
                             plan, env);
    atomic_store(&gr__fault_armed, false);
    memcpy(rules, parsed, sizeof(parsed[0]) * n);
    n_rules = n;
    seed = parsed_seed;
    for (int i = 0; i < GR_FAULT_SITE_COUNT; i++) {
        atomic_store(&calls[i], 0);
        atomic_store(&injected[i], 0);
    }
    *token = atomic_fetch_add(&next_token, 1);
    atomic_store(&armed_token, *token);
    atomic_store(&gr__fault_armed, true); /* seq_cst: after the plan and counters */
    return GR_OK;
}

void gr__fault_disarm(uint64_t token)
{
    uint64_t expected = token;

    if (token != 0 && atomic_compare_exchange_strong(&armed_token, &expected, 0))
        atomic_store(&gr__fault_armed, false);
}

uint64_t gr__fault_calls(gr_fault_site site)
{
    return (unsigned)site < GR_FAULT_SITE_COUNT ? atomic_load(&calls[site]) : 0;
}

uint64_t gr__fault_injected(gr_fault_site site)
{
    return (unsigned)site < GR_FAULT_SITE_COUNT ? atomic_load(&injected[site]) : 0;
}

/* splitmix64's finalizer: every input bit reaches every output bit. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool gr__fault_random_fails(uint64_t s, gr_fault_site site, uint64_t k, uint64_t one_in)
{
    uint64_t h = mix(mix(s + 0x9e3779b97f4a7c15ull * ((uint64_t)site + 1)) + k);

    return one_in != 0 && h % one_in == 0;
}

bool gr__fault_hit_slow(gr_fault_site site)
{
    /* Relaxed: the count only needs to be unique per call. */
    uint64_t k = atomic_fetch_add_explicit(&calls[site], 1, memory_order_relaxed) + 1;

    for (uint32_t i = 0; i < n_rules; i++) {
        const rule *r = &rules[i];

        if (r->site == site &&
            (r->random ? gr__fault_random_fails(seed, site, k, r->nth)
                       : k == r->nth || (r->from_then_on && k > r->nth))) {
            /* Relaxed: a statistic, read after the threads that count are joined. */
            atomic_fetch_add_explicit(&injected[site], 1, memory_order_relaxed);
            return true;
        }
    }
    return false;
}

void *gr__malloc(size_t bytes)
{
    return gr__fault_hit(GR_FAULT_ALLOC) ? NULL : malloc(bytes);
}

void *gr__calloc(size_t n, size_t size)
{
    return gr__fault_hit(GR_FAULT_ALLOC) ? NULL : calloc(n, size);
}

void *gr__realloc(void *p, size_t bytes)
{
    return gr__fault_hit(GR_FAULT_ALLOC) ? NULL : realloc(p, bytes);
}

int gr__thread_create(pthread_t *thread, const char *name, void *(*start)(void *), void *arg)
{
    return gr__fault_hit(GR_FAULT_THREAD) ? EAGAIN : gr__thread_start(thread, name, start, arg);
}

static atomic_uint threads_live;

typedef struct thread_start {
    void *(*start)(void *);
    void *arg;
    char name[16];
} thread_start;

static void *thread_main(void *p)
{
    thread_start s = *(thread_start *)p;
    void *ret;

    free(p);
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), s.name); /* for itself: prctl, cannot fail */
#endif
    ret = s.start(s.arg);
    atomic_fetch_sub(&threads_live, 1);
    return ret;
}

int gr__thread_start(pthread_t *thread, const char *name, void *(*start)(void *), void *arg)
{
    /* Plain malloc: starting a thread is no call of the "alloc" site, so a plan counting
     * those calls fails the same runtime allocations however many threads start. */
    thread_start *s = malloc(sizeof(*s));
    int e;

    if (s == NULL)
        return EAGAIN;
    s->start = start;
    s->arg = arg;
    snprintf(s->name, sizeof(s->name), "%s", name);
    atomic_fetch_add(&threads_live, 1);
    if ((e = pthread_create(thread, NULL, thread_main, s)) != 0) {
        atomic_fetch_sub(&threads_live, 1);
        free(s);
    }
    return e;
}

unsigned gr__threads_live(void)
{
    return atomic_load(&threads_live);
}

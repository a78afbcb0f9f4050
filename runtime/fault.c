/*
 * fault.c - the armed fault plan and its counters (see fault.h).
 *
 * Counters are atomics, so concurrent calls of a site each get a distinct ordinal and
 * exactly the planned calls fail. The plan itself is written only while no call reads it:
 * gr__fault_arm clears gr__fault_armed first, and gr_runtime_create arms before it starts
 * the threads that call sites (a faulty runtime is the only one, as fault.h asks).
 */
#include "runtime/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sync.h"

#define MAX_RULES 16

typedef struct rule {
    gr_fault_site site;
    uint64_t nth;
    bool from_then_on;
} rule;

atomic_bool gr__fault_armed;
static rule rules[MAX_RULES];
static uint32_t n_rules;
static _Atomic uint64_t calls[GR_FAULT_SITE_COUNT];
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
};

const char *gr__fault_site_name(gr_fault_site site)
{
    return (unsigned)site < GR_FAULT_SITE_COUNT ? site_names[site] : NULL;
}

static gr_status bad_plan(gr_error_info *err, const char *plan, const char *why, size_t len,
                          const char *what)
{
    return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                        "fault plan '%.120s': %s '%.*s' (expected SITE:N or SITE:N+, sites: "
                        "alloc pin thread arena device_alloc register stream event "
                        "graph_instantiate graph_update graph_launch)",
                        plan, why, (int)len, what);
}

/* Parse one SITE:N[+] rule of length len at s. */
static gr_status parse_rule(const char *plan, const char *s, size_t len, rule *out,
                            gr_error_info *err)
{
    const char *colon = memchr(s, ':', len);
    size_t name_len, num_len;
    unsigned long long n;
    char num[24], *end;
    int site = -1;

    if (colon == NULL)
        return bad_plan(err, plan, "no ':' in", len, s);
    name_len = (size_t)(colon - s);
    for (int i = 0; i < GR_FAULT_SITE_COUNT; i++)
        if (strlen(site_names[i]) == name_len && memcmp(site_names[i], s, name_len) == 0)
            site = i;
    if (site < 0)
        return bad_plan(err, plan, "unknown site", name_len, s);
    num_len = len - name_len - 1;
    out->from_then_on = num_len > 0 && colon[num_len] == '+';
    if (out->from_then_on)
        num_len--;
    if (num_len == 0 || num_len >= sizeof(num) || colon[1] < '0' || colon[1] > '9')
        return bad_plan(err, plan, "bad call number in", len, s);
    memcpy(num, colon + 1, num_len);
    num[num_len] = '\0';
    errno = 0;
    n = strtoull(num, &end, 10);
    if (errno != 0 || *end != '\0' || n == 0)
        return bad_plan(err, plan, "bad call number (1 or more) in", len, s);
    out->site = (gr_fault_site)site;
    out->nth = n;
    return GR_OK;
}

gr_status gr__fault_arm(const char *plan, uint64_t *token, gr_error_info *err)
{
    rule parsed[MAX_RULES];
    uint32_t n = 0;
    const char *s = plan;
    gr_status st;

    while (*s != '\0') {
        size_t len = strcspn(s, ",");

        if (n == MAX_RULES)
            return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                "fault plan '%.120s': more than %d rules", plan, MAX_RULES);
        if ((st = parse_rule(plan, s, len, &parsed[n++], err)) != GR_OK)
            return st;
        s += len;
        if (*s == ',' && *++s == '\0')
            return bad_plan(err, plan, "empty rule after", 0, "");
    }
    atomic_store(&gr__fault_armed, false);
    memcpy(rules, parsed, sizeof(parsed[0]) * n);
    n_rules = n;
    for (int i = 0; i < GR_FAULT_SITE_COUNT; i++)
        atomic_store(&calls[i], 0);
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

bool gr__fault_hit_slow(gr_fault_site site)
{
    /* Relaxed: the count only needs to be unique per call. */
    uint64_t k = atomic_fetch_add_explicit(&calls[site], 1, memory_order_relaxed) + 1;

    for (uint32_t i = 0; i < n_rules; i++)
        if (rules[i].site == site &&
            (k == rules[i].nth || (rules[i].from_then_on && k > rules[i].nth)))
            return true;
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

int gr__thread_create(pthread_t *thread, void *(*start)(void *), void *arg)
{
    return gr__fault_hit(GR_FAULT_THREAD) ? EAGAIN : pthread_create(thread, NULL, start, arg);
}

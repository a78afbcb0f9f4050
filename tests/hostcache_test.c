/*
 * hostcache_test.c - the registration cache (runtime/hostcache.c) with a fake pinner that
 * records every pin and unpin: ranges registered in the background and then DMA-ready,
 * whole or as views inside; never a view that runs past a registration; least recently
 * used eviction within the capacity, never of a range a job holds; forget; failures;
 * memory its owner registered left alone; close; and many threads at once (run under
 * tsan too) with a check, inside unpin, that no holder of the range is still using it.
 * Ranges wait for a moment with no live job, unless a second job uses them while queued:
 * that job waits for the registration (up to its deadline) and copies them by DMA.
 * On the GPU, cuda_test's host_cache_* cases run it against cudaHostRegister.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "runtime/hostcache.h"
#include "runtime/base/sync.h"
#include "tests/testing.h"

#define MIB (1ull << 20)
#define RANGES 8

/* The fake machine: RANGES page-aligned regions of 2 MiB; what is pinned; whose owner
 * pinned it; how many test threads use each region right now. */
static unsigned char *region[RANGES];
static atomic_int pinned[RANGES], owner_pinned[RANGES], in_use[RANGES];
static atomic_int pins, unpins, unpin_while_used, fail_pins;
static atomic_bool pin_gate_shut; /* pins wait while it is set: a registration in progress */

static int which(const void *p)
{
    for (int i = 0; i < RANGES; i++)
        if ((const unsigned char *)p >= region[i] && (const unsigned char *)p < region[i] + 2 * MIB)
            return i;
    return -1;
}

static gr_status fake_pin(void *p, uint64_t bytes)
{
    int i = which(p);

    ASSERT_TRUE(i >= 0 && (unsigned char *)p == region[i] && bytes == 2 * MIB);
    while (atomic_load(&pin_gate_shut))
        usleep(1000);
    if (atomic_load(&fail_pins))
        return GR_ERR_OUT_OF_MEMORY;
    ASSERT_EQ(atomic_fetch_add(&pinned[i], 1), 0); /* never registered twice */
    atomic_fetch_add(&pins, 1);
    return GR_OK;
}

static gr_status fake_unpin(void *p)
{
    int i = which(p);

    ASSERT_TRUE(i >= 0);
    if (atomic_load(&in_use[i]) > 0)
        atomic_fetch_add(&unpin_while_used, 1);
    ASSERT_EQ(atomic_fetch_sub(&pinned[i], 1), 1);
    atomic_fetch_add(&unpins, 1);
    return GR_OK;
}

static bool fake_dma_ready(const void *p)
{
    int i = which(p);

    return i >= 0 && atomic_load(&owner_pinned[i]);
}

static const gr_host_cache_ops ops = {fake_pin, fake_unpin, fake_dma_ready};

static gr_graph *seed;

static void setup(void)
{
    for (int i = 0; i < RANGES; i++) {
        ASSERT_EQ(posix_memalign((void **)&region[i], 2 * MIB, 2 * MIB), 0);
        atomic_store(&pinned[i], 0);
        atomic_store(&owner_pinned[i], 0);
        atomic_store(&in_use[i], 0);
    }
    atomic_store(&pins, 0);
    atomic_store(&unpins, 0);
    atomic_store(&unpin_while_used, 0);
    atomic_store(&fail_pins, 0);
    atomic_store(&pin_gate_shut, false);
    if (seed == NULL)
        ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
}

static void teardown(void)
{
    for (int i = 0; i < RANGES; i++)
        free(region[i]);
}

/* One in-place seed tensor over `bytes` at p. */
static gr_tensor tensor_at(void *p, uint64_t bytes)
{
    gr_tensor t = {{p}, {p}, bytes / sizeof(float), 0, {0}};

    return t;
}

static void hold_one(gr_host_cache *c, int r, gr_host_hold *h)
{
    gr_tensor t = tensor_at(region[r], 2 * MIB);

    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t, 1, GR_NO_DEADLINE, h), GR_OK);
}

static void registered_in_background_then_ready(void)
{
    gr_host_cache *c;
    gr_host_hold h;
    gr_host_cache_stats s;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    ASSERT_TRUE(!gr__host_cache_ready(c, NULL, region[0], 2 * MIB)); /* unknown, pageable */
    hold_one(c, 0, &h);
    ASSERT_EQ_U64(h.n, 1); /* in place: input and output are one range */
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 0); /* not while the job that saw it runs */
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c); /* no live job: its turn */
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_TRUE(!gr__host_cache_ready(c, NULL, region[0], 2 * MIB)); /* not held: staged */
    hold_one(c, 0, &h); /* the next job finds it registered */
    ASSERT_TRUE(gr__host_cache_ready(c, &h, region[0], 2 * MIB));
    ASSERT_TRUE(gr__host_cache_ready(c, &h, region[0] + 4096, 16384)); /* a view inside */
    ASSERT_TRUE(!gr__host_cache_ready(c, &h, region[0] + 4096, 2 * MIB)); /* runs past it */
    gr__host_cache_stats_get(c, &s);
    ASSERT_EQ_U64(s.hits, 1);
    ASSERT_EQ_U64(s.registrations, 1);
    ASSERT_EQ_U64(s.registered_bytes, 2 * MIB);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&pins), 1);
    ASSERT_EQ(atomic_load(&unpins), 1); /* closing unregistered it */
    teardown();
}

/* The epoch moves with every registration and unregistration (the CUDA backend lowers its
 * graphs over host memory again when it does); a hold given back with discard (its job was
 * never accepted) leaves nothing queued behind. */
static void epoch_and_discard(void)
{
    gr_host_cache *c;
    gr_host_hold h;
    uint64_t e0, e1;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    e0 = gr__host_cache_epoch(c);
    hold_one(c, 0, &h);
    gr__host_cache_release(c, &h, true); /* discarded: never registered */
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pins), 0);
    ASSERT_EQ_U64(gr__host_cache_epoch(c), e0);
    hold_one(c, 0, &h);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pins), 1);
    e1 = gr__host_cache_epoch(c);
    ASSERT_GT(e1, e0);
    ASSERT_STATUS(gr__host_cache_forget(c, region[0], 2 * MIB, NULL), GR_OK);
    ASSERT_GT(gr__host_cache_epoch(c), e1);
    gr__host_cache_free(c);
    teardown();
}

/* Jobs back to back with no idle moment: a second job over a queued range has it
 * registered at once, beside the live job, and waits for that, so that it copies the range
 * by DMA (the first job, which never held it registered, stays staged). */
static void used_again_while_queued_registers_at_once(void)
{
    gr_host_cache *c;
    gr_host_hold a, b;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &a);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 0);
    hold_one(c, 0, &b); /* returns once it is registered */
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_TRUE(gr__host_cache_ready(c, &b, region[0], 2 * MIB));
    ASSERT_TRUE(!gr__host_cache_ready(c, &a, region[0], 2 * MIB));
    gr__host_cache_release(c, &a, false);
    gr__host_cache_release(c, &b, false);
    hold_one(c, 0, &a);
    ASSERT_TRUE(gr__host_cache_ready(c, &a, region[0], 2 * MIB));
    gr__host_cache_release(c, &a, false);
    gr__host_cache_free(c);
    teardown();
}

/* A job over a range another job queued is its second use even when its hold lies where
 * the other's did (a job's memory is often where the last one's was): registered at once
 * beside the live job, and waited for. */
static void a_later_job_at_the_same_address_is_another_use(void)
{
    gr_host_cache *c;
    gr_host_hold a, d;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 1, &d); /* a live job all along: no idle moment to register in */
    hold_one(c, 0, &a);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 0); /* queued, d still live */
    hold_one(c, 0, &a); /* the same gr_host_hold, a new job */
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_TRUE(gr__host_cache_ready(c, &a, region[0], 2 * MIB));
    gr__host_cache_release(c, &a, false);
    gr__host_cache_release(c, &d, false);
    gr__host_cache_free(c);
    teardown();
}

/* A job whose range is being registered waits no longer than its deadline: past it, it
 * runs the range staged (the pin here never ends until the test lets it). A job over a
 * range only it has seen never waits. */
static void waiting_for_a_registration_ends_at_the_deadline(void)
{
    gr_host_cache *c;
    gr_host_hold a, b, d;
    gr_tensor t;

    setup();
    t = tensor_at(region[0], 2 * MIB);
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    atomic_store(&pin_gate_shut, true);
    hold_one(c, 0, &a);  /* first seen: queued, no wait */
    hold_one(c, 1, &d);  /* another range, first seen: no wait either */
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t, 1, gr__deadline_after(20 * 1000 * 1000), &b),
                  GR_OK); /* used again: registering, the pin held shut */
    ASSERT_EQ(atomic_load(&pins), 0);
    ASSERT_TRUE(!gr__host_cache_ready(c, &b, region[0], 2 * MIB));
    atomic_store(&pin_gate_shut, false);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_release(c, &b, false);
    gr__host_cache_release(c, &d, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_EQ(atomic_load(&pinned[1]), 1);
    gr__host_cache_free(c);
    teardown();
}

/* A job that meets one of its own ranges again (here after sixteen others, past any short
 * look-back) has not used it twice: it is neither registered beside that job nor waited
 * for. (Half regions: the fake pinner refuses them, so a registration would fail here.) */
static void a_job_meeting_its_own_range_does_not_wait(void)
{
    gr_host_cache *c;
    gr_host_hold h;
    gr_tensor t[2 * RANGES + 1];

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    for (int i = 0; i < 2 * RANGES; i++)
        t[i] = tensor_at(region[i / 2] + (i % 2) * MIB, MIB);
    t[2 * RANGES] = t[0];
    ASSERT_STATUS(gr__host_cache_hold(c, seed, t, 2 * RANGES + 1, GR_NO_DEADLINE, &h), GR_OK);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pins), 0);
    gr__host_cache_release(c, &h, true); /* discarded: the halves are never registered */
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pins), 0);
    gr__host_cache_free(c);
    teardown();
}

static void small_ranges_are_not_registered(void)
{
    gr_host_cache *c;
    gr_host_hold h;
    gr_tensor t;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    t = tensor_at(region[1], MIB / 2);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t, 1, GR_NO_DEADLINE, &h), GR_OK);
    gr__host_cache_settle(c);
    ASSERT_EQ_U64(h.n, 0);
    ASSERT_EQ(atomic_load(&pins), 0);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_free(c);
    teardown();
}

/* Capacity for two: the third evicts the least recently held, never one a job holds. */
static void least_recently_used_goes_never_a_held_one(void)
{
    gr_host_cache *c;
    gr_host_hold a, b, b2, d, d2;
    gr_host_cache_stats s;

    setup();
    ASSERT_STATUS(gr__host_cache_create(5 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &a);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_settle(c);
    hold_one(c, 1, &b);
    gr__host_cache_release(c, &b, false);
    gr__host_cache_settle(c);
    hold_one(c, 0, &a); /* 0 is now the more recent */
    gr__host_cache_release(c, &a, false);
    hold_one(c, 2, &d);
    gr__host_cache_release(c, &d, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[1]), 0); /* evicted */
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_EQ(atomic_load(&pinned[2]), 1);
    ASSERT_TRUE(!gr__host_cache_ready(c, NULL, region[1], 2 * MIB));

    /* 0 held: 3 (wanted at once: two jobs use it) can only take 2's place. */
    hold_one(c, 0, &a);
    hold_one(c, 3, &d);
    hold_one(c, 3, &d2);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_EQ(atomic_load(&pinned[2]), 0);
    ASSERT_EQ(atomic_load(&pinned[3]), 1);
    /* 0 and 3 held: 4 finds no room and stays pageable (staged), registered by a later job. */
    hold_one(c, 4, &b);
    hold_one(c, 4, &b2);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[4]), 0);
    ASSERT_TRUE(!gr__host_cache_ready(c, &b, region[4], 2 * MIB));
    gr__host_cache_release(c, &b, false);
    gr__host_cache_release(c, &b2, false);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_release(c, &d, false);
    gr__host_cache_release(c, &d2, false);
    hold_one(c, 4, &b);
    gr__host_cache_release(c, &b, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[4]), 1);
    ASSERT_EQ(atomic_load(&pinned[0]), 0); /* the least recently held of 0 and 3 */
    gr__host_cache_stats_get(c, &s);
    ASSERT_EQ_U64(s.evictions, 3);
    ASSERT_LE_U64(s.registered_bytes, 5 * MIB);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&pins), atomic_load(&unpins));
    teardown();
}

/* A small tensor inside a registered range holds it: no eviction under its copies. */
static void views_hold_their_range(void)
{
    gr_host_cache *c;
    gr_host_hold a, b, v;
    gr_tensor t;

    setup();
    ASSERT_STATUS(gr__host_cache_create(3 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &a);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_settle(c);
    t = tensor_at(region[0] + 8192, 16384);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t, 1, GR_NO_DEADLINE, &v), GR_OK);
    ASSERT_EQ_U64(v.n, 1);
    hold_one(c, 1, &a); /* twice: wanted at once; would evict 0, which the view holds */
    hold_one(c, 1, &b);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    ASSERT_EQ(atomic_load(&pinned[1]), 0);
    gr__host_cache_release(c, &v, false);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_release(c, &b, false);
    gr__host_cache_free(c);
    teardown();
}

static void forget_refuses_held_memory_and_unregisters(void)
{
    gr_host_cache *c;
    gr_host_hold h;
    gr_error_info err;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &h);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c);
    hold_one(c, 0, &h); /* a live job uses it */
    ASSERT_STATUS(gr__host_cache_forget(c, region[0] + 100, 10, &err), GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(err.message, "in use by a job");
    ASSERT_EQ(atomic_load(&pinned[0]), 1); /* nothing changed */
    gr__host_cache_release(c, &h, false);
    ASSERT_STATUS(gr__host_cache_forget(c, region[0] + 100, 10, &err), GR_OK);
    ASSERT_EQ(atomic_load(&pinned[0]), 0);
    ASSERT_TRUE(!gr__host_cache_ready(c, NULL, region[0], 2 * MIB));
    ASSERT_STATUS(gr__host_cache_forget(c, region[5], 2 * MIB, &err), GR_OK); /* unknown */
    hold_one(c, 0, &h); /* known afresh, registered again */
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 1);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&pins), 2);
    ASSERT_EQ(atomic_load(&unpins), 2);
    teardown();
}

static void refused_registration_stays_pageable(void)
{
    gr_host_cache *c;
    gr_host_hold h;
    gr_host_cache_stats s;

    setup();
    atomic_store(&fail_pins, 1);
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &h);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c);
    ASSERT_TRUE(!gr__host_cache_ready(c, NULL, region[0], 2 * MIB));
    gr__host_cache_stats_get(c, &s);
    ASSERT_EQ_U64(s.failures, 1);
    ASSERT_EQ_U64(s.registered_bytes, 0);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&unpins), 0);
    teardown();
}

static void owners_registration_left_alone(void)
{
    gr_host_cache *c;
    gr_host_hold h;

    setup();
    atomic_store(&owner_pinned[2], 1);
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 2, &h);
    gr__host_cache_settle(c);
    ASSERT_EQ_U64(h.n, 0);
    ASSERT_EQ(atomic_load(&pins), 0);
    ASSERT_TRUE(gr__host_cache_ready(c, &h, region[2], 2 * MIB)); /* the owner's answer */
    gr__host_cache_release(c, &h, false);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&unpins), 0);
    teardown();
}

/* A range overlapping an entry without lying inside it is not registered, and a view that
 * starts inside a registration and runs past it is never DMA-ready. */
static void overlapping_ranges_stay_pageable(void)
{
    gr_host_cache *c;
    gr_host_hold a, b;
    gr_tensor t;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &a);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_settle(c);
    hold_one(c, 0, &a);
    /* From the middle of region 0 for 2 MiB: overlaps its entry, not inside it. */
    t = tensor_at(region[0] + MIB, 2 * MIB);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t, 1, GR_NO_DEADLINE, &b), GR_OK);
    gr__host_cache_settle(c);
    /* Not registered itself, but it holds the entry it overlaps: the driver sees those
     * pages page-locked, and they must stay so while its job runs. */
    ASSERT_EQ_U64(b.n, 1);
    ASSERT_EQ(atomic_load(&pins), 1);
    gr__host_cache_release(c, &a, false);
    ASSERT_STATUS(gr__host_cache_forget(c, region[0], 2 * MIB, NULL), GR_ERR_INVALID_USAGE);
    hold_one(c, 0, &a);
    ASSERT_TRUE(!gr__host_cache_ready(c, &a, region[0] + MIB, 2 * MIB));
    ASSERT_TRUE(gr__host_cache_ready(c, &a, region[0] + MIB, MIB)); /* inside: yes */
    gr__host_cache_release(c, &b, false);
    gr__host_cache_release(c, &a, false);
    gr__host_cache_free(c);
    teardown();
}

/* A pinner of any range, for arrays laid out as a test likes: what it pinned last, and
 * how many ranges are pinned now. */
static uintptr_t span_base, span_end;
static atomic_int spans_pinned;

static gr_status span_pin(void *p, uint64_t bytes)
{
    span_base = (uintptr_t)p;
    span_end = (uintptr_t)p + bytes;
    atomic_fetch_add(&spans_pinned, 1);
    return GR_OK;
}

static gr_status span_unpin(void *p)
{
    (void)p;
    atomic_fetch_sub(&spans_pinned, 1);
    return GR_OK;
}

static bool span_dma_ready(const void *p)
{
    (void)p;
    return false;
}

static const gr_host_cache_ops span_ops = {span_pin, span_unpin, span_dma_ready};

/* Two arrays back to back that share a page, as the heap lays them out: one registration
 * of both, so that both are copied by DMA (a page is registered once, so two registrations
 * could not be). Not while the neighbour is already registered, or held by another job. */
static void arrays_sharing_a_page_register_as_one(void)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    unsigned char *buf;
    gr_host_cache *c;
    gr_host_hold h, other;
    gr_host_cache_stats s;
    gr_tensor t[2];
    uint64_t a_bytes = 3 * MIB - 4096, b_bytes = 3 * MIB - 2048;
    unsigned char *a, *b;

    setup();
    ASSERT_EQ(posix_memalign((void **)&buf, page, 8 * MIB), 0);
    a = buf + 64;             /* a heap block's data, after its header */
    b = a + a_bytes + 64;     /* the next block: its first page is a's last */
    ASSERT_EQ_U64(((uintptr_t)a + a_bytes - 1) / page, (uintptr_t)b / page);
    t[0] = tensor_at(a, a_bytes);
    t[1] = tensor_at(b, b_bytes);
    atomic_store(&spans_pinned, 0);

    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &span_ops, &c), GR_OK);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, t, 2, GR_NO_DEADLINE, &h), GR_OK);
    ASSERT_EQ_U64(h.n, 1); /* one entry over both */
    gr__host_cache_stats_get(c, &s);
    ASSERT_EQ_U64(s.merges, 1);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&spans_pinned), 1);
    ASSERT_EQ_U64(span_base, (uintptr_t)buf);
    ASSERT_EQ_U64(span_end, ((uintptr_t)b + b_bytes + page - 1) / page * page);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, t, 2, GR_NO_DEADLINE, &h), GR_OK);
    ASSERT_TRUE(gr__host_cache_ready(c, &h, a, a_bytes)); /* both by DMA */
    ASSERT_TRUE(gr__host_cache_ready(c, &h, b, b_bytes));
    gr__host_cache_release(c, &h, false);
    /* Forgetting one array unregisters the registration it shares with the other. */
    ASSERT_STATUS(gr__host_cache_forget(c, a, a_bytes, NULL), GR_OK);
    ASSERT_EQ(atomic_load(&spans_pinned), 0);

    /* a held by a live job when b comes: left apart, b staged; then a is registered alone,
     * and b, overlapping a registered entry, stays staged. */
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t[0], 1, GR_NO_DEADLINE, &other), GR_OK);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t[1], 1, GR_NO_DEADLINE, &h), GR_OK);
    ASSERT_TRUE(!gr__host_cache_ready(c, &h, b, b_bytes));
    gr__host_cache_release(c, &h, false);
    gr__host_cache_release(c, &other, false);
    gr__host_cache_settle(c);
    ASSERT_EQ(atomic_load(&spans_pinned), 1);
    ASSERT_EQ_U64(span_base, (uintptr_t)buf);
    ASSERT_EQ_U64(span_end, ((uintptr_t)a + a_bytes + page - 1) / page * page);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t[1], 1, GR_NO_DEADLINE, &h), GR_OK);
    ASSERT_TRUE(!gr__host_cache_ready(c, &h, b, b_bytes));
    gr__host_cache_release(c, &h, false);
    gr__host_cache_stats_get(c, &s);
    ASSERT_EQ_U64(s.merges, 1);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&spans_pinned), 0);
    free(buf);
    teardown();
}

/* Only a job's own ranges merge. A neighbour an earlier job queued is not merged into by a
 * job that uses only the other array: the whole would count as a second use and be
 * registered beside live jobs, where this job's use is a first one. A job over both, the
 * queued one first, gets that one registered at once (a second use); its neighbour stays
 * staged, overlapping it. */
static void a_neighbour_another_job_queued_is_left_apart(void)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    unsigned char *buf;
    gr_host_cache *c;
    gr_host_hold live, first, h;
    gr_host_cache_stats s;
    gr_tensor t[2], elsewhere;
    uint64_t bytes = 2 * MIB;
    unsigned char *a, *b;

    setup();
    ASSERT_EQ(posix_memalign((void **)&buf, page, 16 * MIB), 0);
    a = buf + 64;
    b = a + bytes + 64; /* its first page is a's last */
    t[0] = tensor_at(a, bytes);
    t[1] = tensor_at(b, bytes);
    elsewhere = tensor_at(buf + 8 * MIB, bytes);
    atomic_store(&spans_pinned, 0);
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &span_ops, &c), GR_OK);
    /* Another job stays live throughout: nothing is registered for a queued range alone. */
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &elsewhere, 1, GR_NO_DEADLINE, &live), GR_OK);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t[0], 1, GR_NO_DEADLINE, &first), GR_OK);
    gr__host_cache_release(c, &first, false);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, &t[1], 1, GR_NO_DEADLINE, &h), GR_OK);
    ASSERT_EQ(atomic_load(&spans_pinned), 0); /* no registration beside the live job */
    ASSERT_TRUE(!gr__host_cache_ready(c, &h, b, bytes));
    gr__host_cache_release(c, &h, false);
    ASSERT_STATUS(gr__host_cache_hold(c, seed, t, 2, GR_NO_DEADLINE, &h), GR_OK);
    ASSERT_EQ(atomic_load(&spans_pinned), 1); /* a, used again: registered before planning */
    ASSERT_EQ_U64(span_base, (uintptr_t)buf);
    ASSERT_EQ_U64(span_end, ((uintptr_t)a + bytes + page - 1) / page * page);
    ASSERT_TRUE(gr__host_cache_ready(c, &h, a, bytes));
    ASSERT_TRUE(!gr__host_cache_ready(c, &h, b, bytes));
    gr__host_cache_release(c, &h, false);
    gr__host_cache_stats_get(c, &s);
    ASSERT_EQ_U64(s.merges, 0);
    gr__host_cache_release(c, &live, false);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&spans_pinned), 0);
    free(buf);
    teardown();
}

static void close_unregisters_what_jobs_still_hold(void)
{
    gr_host_cache *c;
    gr_host_hold h;

    setup();
    ASSERT_STATUS(gr__host_cache_create(64 * MIB, &ops, &c), GR_OK);
    hold_one(c, 0, &h);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_settle(c);
    hold_one(c, 0, &h);
    ASSERT_TRUE(gr__host_cache_ready(c, &h, region[0], 2 * MIB));
    gr__host_cache_close(c);
    ASSERT_EQ(atomic_load(&pinned[0]), 0);
    ASSERT_TRUE(!gr__host_cache_ready(c, NULL, region[0], 2 * MIB));
    gr__host_cache_release(c, &h, false); /* still valid after close */
    hold_one(c, 1, &h);             /* and holds after close register nothing */
    ASSERT_EQ_U64(h.n, 0);
    gr__host_cache_release(c, &h, false);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&pins), 1);
    ASSERT_EQ(atomic_load(&unpins), 1);
    teardown();
}

/* Threads holding, checking, releasing and forgetting at random over more ranges than the
 * capacity holds: no range is ever unregistered while a thread that held it uses it. */
typedef struct worker_arg {
    gr_host_cache *c;
    unsigned seed;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *w = arg;

    for (int k = 0; k < 400; k++) {
        int r = (int)(rand_r(&w->seed) % RANGES);
        gr_host_hold h;
        bool held;

        if (rand_r(&w->seed) % 8 == 0) {
            gr__host_cache_forget(w->c, region[r], 2 * MIB, NULL);
            continue;
        }
        hold_one(w->c, r, &h);
        /* Used only when held: a range being unregistered is held by no one (staged). */
        held = h.n > 0;
        if (held)
            atomic_fetch_add(&in_use[r], 1);
        if (k % 4 == 0) { /* a second job over it: registered at once, even while busy */
            gr_host_hold h2;

            hold_one(w->c, r, &h2);
            gr__host_cache_release(w->c, &h2, false);
        }
        if (!held)
            ASSERT_TRUE(!gr__host_cache_ready(w->c, &h, region[r], 2 * MIB));
        else
            atomic_fetch_sub(&in_use[r], 1);
        gr__host_cache_release(w->c, &h, false);
    }
    return NULL;
}

static void many_threads_at_once(void)
{
    pthread_t t[6];
    worker_arg a[6];
    gr_host_cache *c;

    setup();
    ASSERT_STATUS(gr__host_cache_create(7 * MIB, &ops, &c), GR_OK);
    for (int i = 0; i < 6; i++) {
        a[i] = (worker_arg){c, 17u * (unsigned)i + 1};
        ASSERT_EQ(pthread_create(&t[i], NULL, worker, &a[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    /* Whatever the threads left queued is registered now that no job is live (how much
     * was registered while they ran depends on the scheduler: on a loaded machine the
     * registrar may not have run at all). */
    gr__host_cache_settle(c);
    {
        gr_host_hold h;

        hold_one(c, 7, &h);
        gr__host_cache_release(c, &h, false);
        gr__host_cache_settle(c);
        ASSERT_EQ(atomic_load(&pinned[7]), 1);
    }
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&unpin_while_used), 0);
    ASSERT_EQ(atomic_load(&pins), atomic_load(&unpins));
    ASSERT_GT(atomic_load(&pins), 0);
    for (int i = 0; i < RANGES; i++)
        ASSERT_EQ(atomic_load(&pinned[i]), 0);
    teardown();
}

/* Many threads over arrays back to back that share pages, one, two or three neighbours a
 * job, with forgets and evictions (the capacity holds half of them): the pinner checks that
 * no page is ever pinned twice, and that no range is unpinned while a job that found an
 * array of it ready (and would copy it by DMA) still holds it. Under tsan in CI. */
#define SHARED_ARRAYS 8
#define SHARED_BYTES (3 * MIB / 2 + 100)
#define SHARED_PAGES (16 * MIB / 4096)
static unsigned char *shared_buf;
static atomic_int page_pinned[SHARED_PAGES], page_used[SHARED_PAGES];
static atomic_int shared_violations;
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t shared_pins[SHARED_PAGES][2]; /* [base, end) of each pinned range */

static unsigned char *shared_array(int i)
{
    return shared_buf + 64 + (uint64_t)i * (SHARED_BYTES + 64);
}

static uint64_t page_of(uintptr_t a)
{
    return (a - (uintptr_t)shared_buf) / 4096;
}

static gr_status shared_pin(void *p, uint64_t bytes)
{
    uintptr_t a = (uintptr_t)p;

    for (uint64_t q = page_of(a); q < page_of(a + bytes); q++)
        if (atomic_fetch_add(&page_pinned[q], 1) != 0)
            atomic_fetch_add(&shared_violations, 1);
    pthread_mutex_lock(&shared_mu);
    shared_pins[page_of(a)][0] = a;
    shared_pins[page_of(a)][1] = a + bytes;
    pthread_mutex_unlock(&shared_mu);
    return GR_OK;
}

static gr_status shared_unpin(void *p)
{
    uintptr_t a = (uintptr_t)p, end;

    pthread_mutex_lock(&shared_mu);
    end = shared_pins[page_of(a)][1];
    shared_pins[page_of(a)][1] = 0;
    pthread_mutex_unlock(&shared_mu);
    if (end == 0)
        atomic_fetch_add(&shared_violations, 1); /* never pinned there */
    for (uint64_t q = page_of(a); q < page_of(end); q++) {
        if (atomic_load(&page_used[q]) > 0)
            atomic_fetch_add(&shared_violations, 1);
        atomic_fetch_sub(&page_pinned[q], 1);
    }
    return GR_OK;
}

static const gr_host_cache_ops shared_ops = {shared_pin, shared_unpin, span_dma_ready};

static void mark_pages(const unsigned char *p, uint64_t bytes, int by)
{
    for (uint64_t q = page_of((uintptr_t)p); q <= page_of((uintptr_t)p + bytes - 1); q++)
        atomic_fetch_add(&page_used[q], by);
}

static void *shared_worker(void *arg)
{
    worker_arg *w = arg;

    for (int k = 0; k < 300; k++) {
        int r = (int)(rand_r(&w->seed) % SHARED_ARRAYS);
        int n = 1 + (int)(rand_r(&w->seed) % 3);
        bool ready[3] = {false, false, false};
        gr_tensor t[3];
        gr_host_hold h;

        if (r + n > SHARED_ARRAYS)
            n = SHARED_ARRAYS - r;
        if (rand_r(&w->seed) % 8 == 0) {
            gr__host_cache_forget(w->c, shared_array(r), SHARED_BYTES, NULL);
            continue;
        }
        for (int i = 0; i < n; i++)
            t[i] = tensor_at(shared_array(r + i), SHARED_BYTES);
        ASSERT_STATUS(gr__host_cache_hold(w->c, seed, t, (uint64_t)n, GR_NO_DEADLINE, &h),
                      GR_OK);
        for (int i = 0; i < n; i++)
            if ((ready[i] = gr__host_cache_ready(w->c, &h, shared_array(r + i), SHARED_BYTES)))
                mark_pages(shared_array(r + i), SHARED_BYTES, 1);
        for (int i = 0; i < n; i++)
            if (ready[i])
                mark_pages(shared_array(r + i), SHARED_BYTES, -1);
        gr__host_cache_release(w->c, &h, false);
    }
    return NULL;
}

static void many_threads_over_arrays_sharing_pages(void)
{
    pthread_t t[6];
    worker_arg a[6];
    gr_host_cache *c;
    gr_host_cache_stats s;

    setup();
    ASSERT_EQ(posix_memalign((void **)&shared_buf, 4096, 16 * MIB), 0);
    ASSERT_TRUE(shared_array(SHARED_ARRAYS) < shared_buf + 16 * MIB);
    ASSERT_STATUS(gr__host_cache_create(SHARED_ARRAYS / 2 * (SHARED_BYTES + 8192), &shared_ops,
                                        &c), GR_OK);
    for (int i = 0; i < 6; i++) {
        a[i] = (worker_arg){c, 29u * (unsigned)i + 5};
        ASSERT_EQ(pthread_create(&t[i], NULL, shared_worker, &a[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    gr__host_cache_settle(c);
    gr__host_cache_stats_get(c, &s);
    gr__host_cache_free(c);
    ASSERT_EQ(atomic_load(&shared_violations), 0);
    for (uint64_t q = 0; q < SHARED_PAGES; q++)
        ASSERT_EQ(atomic_load(&page_pinned[q]), 0);
    printf("    %llu registrations, %llu entries merged, %llu evictions\n",
           (unsigned long long)s.registrations, (unsigned long long)s.merges,
           (unsigned long long)s.evictions);
    ASSERT_GT(s.merges, 0);
    free(shared_buf);
    teardown();
}

/* Through the public API on the host backend, which has no pinned memory: the cache is
 * off whatever the config says, jobs run as ever, and gr_host_forget has nothing to do. */
static void public_api_without_pinned_memory(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_stats st = GR_STATS_INIT;
    static float x[1 << 19];
    gr_tensor t = tensor_at(x, sizeof(x));
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = 8 * MIB;
    cfg.host_cache_bytes = 64 * MIB;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, NULL), GR_OK);
    gr_job_destroy(job);
    ASSERT_STATUS(gr_host_forget(rt, x, sizeof(x)), GR_OK);
    ASSERT_STATUS(gr_host_forget(rt, NULL, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_host_forget(rt, x, 0), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.host_cache_bytes, 0);
    ASSERT_EQ_U64(st.host_cache_registrations, 0);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    ASSERT_STATUS(gr_host_forget(rt, x, sizeof(x)), GR_ERR_INVALID_USAGE); /* destroyed */
}

GR_TEST_MAIN(GR_TEST(public_api_without_pinned_memory),
             GR_TEST(registered_in_background_then_ready),
             GR_TEST(used_again_while_queued_registers_at_once),
             GR_TEST(a_later_job_at_the_same_address_is_another_use),
             GR_TEST(waiting_for_a_registration_ends_at_the_deadline),
             GR_TEST(a_job_meeting_its_own_range_does_not_wait), GR_TEST(epoch_and_discard),
             GR_TEST(small_ranges_are_not_registered),
             GR_TEST(least_recently_used_goes_never_a_held_one), GR_TEST(views_hold_their_range),
             GR_TEST(forget_refuses_held_memory_and_unregisters),
             GR_TEST(refused_registration_stays_pageable), GR_TEST(owners_registration_left_alone),
             GR_TEST(overlapping_ranges_stay_pageable),
             GR_TEST(arrays_sharing_a_page_register_as_one),
             GR_TEST(a_neighbour_another_job_queued_is_left_apart),
             GR_TEST(close_unregisters_what_jobs_still_hold), GR_TEST(many_threads_at_once),
             GR_TEST(many_threads_over_arrays_sharing_pages))

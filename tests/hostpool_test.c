/*
 * hostpool_test.c - gr_host_alloc's pool of small blocks (runtime/hostpool.c): blocks
 * page-aligned, apart and in order, a 64 KiB request exactly 16 pages; thousands of them in
 * a few slabs; slabs given back when emptied, one kept; a free of something not a block's
 * start, or twice, changes nothing; requests above GR_HOST_POOL_MAX and GR_HOST_POOL=0 go
 * around the pool; the pin fault still fails a request; a fork while another thread
 * allocates; a runtime's staging buffers made at create, outside the pool; no slab made on
 * a thread that says its context dies with a runtime; many threads at once, each block
 * filled and checked (run under tsan and asan too). On a machine without a GPU the slabs are
 * ordinary memory; tools/gpu_suite runs the same cases against cudaHostAlloc.
 */
#include <graphrun.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/base/fault.h"
#include "runtime/hostpool.h"
#include "runtime/runtime.h"
#include "tests/testing.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define PAGE GR_HOST_POOL_PAGE

#define GUARD GR_HOST_POOL_GUARD_PAGES

static uint64_t pages_of(uint64_t bytes)
{
    return (bytes + PAGE - 1) / PAGE + GUARD;
}

static void blocks_are_aligned_apart_and_in_order(void)
{
    enum { N = 80, IN_FIRST = 60 }; /* the first slab (4 MiB) holds 60-64 of them */
    unsigned char *b[N];
    gr_host_pool_stats st;

    for (int i = 0; i < N; i++) {
        ASSERT_STATUS(gr_host_alloc(64 * KIB, (void **)&b[i]), GR_OK);
        ASSERT_EQ_U64((uintptr_t)b[i] % PAGE, 0);
        memset(b[i], i, 64 * KIB);
    }
    for (int i = 1; i < IN_FIRST; i++) /* next fit: one after another, nothing between */
        ASSERT_PTR_EQ((void *)b[i], (void *)(b[i - 1] + pages_of(64 * KIB) * PAGE));
    for (int i = 0; i < N; i++)
        for (uint64_t j = 0; j < 64 * KIB; j += 4093)
            ASSERT_EQ(b[i][j], i);
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, N);
    ASSERT_EQ_U64(st.block_bytes, N * pages_of(64 * KIB) * PAGE);
    ASSERT_EQ_U64(st.slabs, 2); /* 4 MiB, then 8 MiB */
    ASSERT_EQ_U64(st.slab_bytes, GR_HOST_POOL_FIRST_SLAB * 3);
    for (int i = 0; i < N; i++)
        gr_host_free(b[i]);
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, 0);
    ASSERT_EQ_U64(st.block_bytes, 0);
    ASSERT_EQ_U64(st.slabs, 1); /* one empty slab kept */
}

/* 2,000 separate 64 KiB allocations: what costs the driver a lookup each as allocations of
 * their own lies in a handful. */
static void thousands_of_blocks_in_few_slabs(void)
{
    enum { N = 2000 };
    void **b = calloc(N, sizeof(*b));
    void *again;
    gr_host_pool_stats st;

    ASSERT_TRUE(b != NULL);
    for (int i = 0; i < N; i++)
        ASSERT_STATUS(gr_host_alloc(64 * KIB + 16, &b[i]), GR_OK); /* 17 pages each */
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, N);
    ASSERT_LE_U64(st.slabs, 8);
    ASSERT_GE_U64(st.slab_bytes, st.block_bytes);
    ASSERT_LE_U64(st.slab_bytes, st.block_bytes + 2 * GR_HOST_POOL_SLAB);
    gr_host_free(b[N / 2]);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, N - 1);
    ASSERT_EQ_U64(gr__host_pool_stats().block_bytes,
                  st.block_bytes - pages_of(64 * KIB + 16) * PAGE);
    ASSERT_STATUS(gr_host_alloc(64 * KIB, &again), GR_OK);
    b[N / 2] = again;
    for (int i = 0; i < N; i++)
        gr_host_free(b[i]);
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, 0);
    ASSERT_EQ_U64(st.slabs, 1);
    free(b);
}

/* Eleven blocks of 93 pages fill the first slab (1,024 pages, its last never given); one
 * freed, the next request of its size takes its pages (the search goes round the slab before
 * another is made). A twelfth goes to a second slab and does not start where the eleventh
 * ends, even if the two slabs lie back to back: a range never spans two allocations. */
static void freed_pages_are_given_again(void)
{
    uint64_t bytes = (93 - GUARD) * PAGE;
    unsigned char *b[12], *again;

    ASSERT_EQ_U64(GR_HOST_POOL_FIRST_SLAB / PAGE, 1024);
    for (int i = 0; i < 11; i++)
        ASSERT_STATUS(gr_host_alloc(bytes, (void **)&b[i]), GR_OK);
    ASSERT_EQ_U64(gr__host_pool_stats().slabs, 1);
    ASSERT_EQ_U64(gr__host_pool_stats().block_bytes, GR_HOST_POOL_FIRST_SLAB - PAGE);
    gr_host_free(b[3]);
    ASSERT_STATUS(gr_host_alloc(bytes, (void **)&again), GR_OK);
    ASSERT_PTR_EQ((void *)again, (void *)b[3]);
    ASSERT_EQ_U64(gr__host_pool_stats().slabs, 1);
    b[3] = again;
    ASSERT_STATUS(gr_host_alloc(PAGE, (void **)&b[11]), GR_OK);
    ASSERT_EQ_U64(gr__host_pool_stats().slabs, 2);
    for (int i = 0; i < 11; i++)
        ASSERT_TRUE(b[11] != b[i] + 93 * PAGE);
    for (int i = 0; i < 12; i++)
        gr_host_free(b[i]);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
}

static void wrong_frees_change_nothing(void)
{
    unsigned char *a, *b;
    gr_host_pool_stats st;

    ASSERT_STATUS(gr_host_alloc(3 * PAGE, (void **)&a), GR_OK);
    ASSERT_STATUS(gr_host_alloc(PAGE, (void **)&b), GR_OK);
    gr_host_free(a + PAGE);  /* inside a block */
    gr_host_free(a + 8);     /* not a page's start */
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, 2);
    gr_host_free(a);
    gr_host_free(a); /* twice */
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, 1);
    ASSERT_EQ_U64(st.block_bytes, pages_of(PAGE) * PAGE);
    memset(b, 7, PAGE); /* the other block is untouched and still usable */
    ASSERT_EQ(b[PAGE - 1], 7);
    gr_host_free(b);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
}

static void large_requests_go_around_the_pool(void)
{
    void *big, *edge;
    gr_host_pool_stats st;

    ASSERT_TRUE(gr__host_pool_takes(GR_HOST_POOL_MAX));
    ASSERT_TRUE(!gr__host_pool_takes(GR_HOST_POOL_MAX + 1));
    ASSERT_TRUE(!gr__host_pool_takes(0));
    ASSERT_STATUS(gr_host_alloc(GR_HOST_POOL_MAX + 1, &big), GR_OK);
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.blocks, 0);
    ASSERT_EQ_U64(st.slabs, 0);
    memset(big, 1, GR_HOST_POOL_MAX + 1);
    ASSERT_STATUS(gr_host_alloc(GR_HOST_POOL_MAX, &edge), GR_OK);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 1);
    memset(edge, 2, GR_HOST_POOL_MAX);
    gr_host_free(big);
    gr_host_free(edge);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
}

static void pin_fault_still_fails_a_request(void)
{
    void *p = (void *)1;
    gr_error_info err;
    uint64_t token;

    ASSERT_STATUS(gr__fault_arm("pin:1", &token, &err), GR_OK);
    ASSERT_STATUS(gr_host_alloc(PAGE, &p), GR_ERR_OUT_OF_MEMORY);
    ASSERT_PTR_EQ(p, NULL);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
    ASSERT_STATUS(gr_host_alloc(PAGE, &p), GR_OK); /* the plan failed the first call only */
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 1);
    gr__fault_disarm(token);
    gr_host_free(p);
}

enum { THREADS = 8, ROUNDS = 3000, HELD = 16 };

static pthread_barrier_t start_together;

/* Each thread keeps up to HELD blocks of sizes from 1 byte to GR_HOST_POOL_MAX, each filled
 * with its thread and slot, checked before it is freed: a page given twice shows. */
static void *churn(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    unsigned seed = (unsigned)id * 7919u + 1;
    unsigned char *held[HELD] = {0};
    uint64_t size[HELD] = {0};
    bool ok = true;

    pthread_barrier_wait(&start_together); /* all at once: the most contention */
    for (int r = 0; r < ROUNDS && ok; r++) {
        int k = rand_r(&seed) % HELD;
        unsigned char mark = (unsigned char)(id * HELD + (unsigned)k + 1);

        if (held[k] != NULL) {
            for (uint64_t j = 0; j < size[k]; j += 509)
                ok = ok && held[k][j] == mark;
            ok = ok && held[k][size[k] - 1] == mark;
            gr_host_free(held[k]);
            held[k] = NULL;
            continue;
        }
        size[k] = rand_r(&seed) % 4 == 0 ? 1 + (uint64_t)rand_r(&seed) % GR_HOST_POOL_MAX
                                         : 1 + (uint64_t)rand_r(&seed) % (96 * KIB);
        if (gr_host_alloc(size[k], (void **)&held[k]) != GR_OK)
            return (void *)0;
        memset(held[k], mark, size[k]);
    }
    for (int k = 0; k < HELD; k++)
        gr_host_free(held[k]);
    return (void *)(uintptr_t)ok;
}

static void many_threads_at_once(void)
{
    pthread_t t[THREADS];

    ASSERT_EQ(pthread_barrier_init(&start_together, NULL, THREADS), 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        ASSERT_EQ(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *ok;

        ASSERT_EQ(pthread_join(t[i], &ok), 0);
        ASSERT_TRUE(ok != NULL);
    }
    pthread_barrier_destroy(&start_together);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
    ASSERT_LE_U64(gr__host_pool_stats().slabs, 1);
}

/* In a child: touch a block's memory `at` bytes past its start, after freeing it when
 * `freed`. Whether AddressSanitizer stopped the child. */
static bool asan_stops(uint64_t bytes, uint64_t at, bool freed)
{
    int status;
    pid_t pid = fork();

    if (pid == 0) {
        volatile unsigned char *p;

        if (freopen("/dev/null", "w", stderr) == NULL) /* the report is expected */
            _exit(3);
        if (gr_host_alloc(bytes, (void **)&p) != GR_OK)
            _exit(2);
        if (freed)
            gr_host_free((void *)p);
        p[at] = 1;
        _exit(0);
    }
    /* ASan aborts (abort_on_error=1) or exits 1; 2 and 3 are the child's own failures. */
    return pid > 0 && waitpid(pid, &status, 0) == pid &&
           (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 1));
}

/* Under AddressSanitizer the pool keeps its checks: use after free, overflow past the
 * bytes asked for (within the last page, and into the page after). */
static void asan_sees_use_after_free_and_overflow(void)
{
    if (!GUARD)
        SKIP("not built with AddressSanitizer");
    ASSERT_TRUE(!asan_stops(100, 99, false)); /* the child itself is sound */
    ASSERT_TRUE(asan_stops(100, 0, true));
    ASSERT_TRUE(asan_stops(100, 100, false));
    ASSERT_TRUE(asan_stops(PAGE, PAGE, false));
}

static atomic_bool churning;

static void *alloc_free_loop(void *arg)
{
    (void)arg;
    while (atomic_load(&churning)) {
        void *p;

        if (gr_host_alloc(PAGE, &p) == GR_OK)
            gr_host_free(p);
    }
    return NULL;
}

/* fork() while another thread allocates and frees: the child never finds the pool's lock
 * held by a thread it lacks; it allocates and frees its own blocks, carves none from the
 * parent's slabs, and freeing a block of them there changes nothing for the parent. Where
 * the parent's slabs are cudaHostAlloc's, CUDA cannot be used in the child: its requests
 * may fail (GR_ERR_OUT_OF_MEMORY, and nothing else), promptly, carving nothing. The
 * child's exit status says which check failed. */
static void fork_while_another_thread_allocates(void)
{
    pthread_t t;
    void *held;

    ASSERT_STATUS(gr_host_alloc(64 * KIB, &held), GR_OK);
    atomic_store(&churning, true);
    ASSERT_EQ(pthread_create(&t, NULL, alloc_free_loop, NULL), 0);
    for (int round = 0; round < 20; round++) {
        int status;
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
            gr_host_pool_stats before = gr__host_pool_stats();
            void *p, *q;
            gr_status st;

            alarm(10); /* a hang fails the case rather than the run */
            st = gr_host_alloc(64 * KIB, &p);
            if (st != GR_OK) { /* no pinned memory in the child */
                gr_host_free(held); /* the parent's: nothing */
                _exit(st != GR_ERR_OUT_OF_MEMORY ? 2
                      : gr__host_pool_stats().blocks != before.blocks ? 3 : 0);
            }
            if (gr_host_alloc(100, &q) != GR_OK)
                _exit(4);
            if (gr__host_pool_stats().slabs != before.slabs + 1) /* its own slab */
                _exit(5);
            memset(p, 1, 64 * KIB);
            gr_host_free(held); /* the parent's: nothing */
            gr_host_free(p);
            gr_host_free(q);
            _exit(gr__host_pool_stats().blocks == before.blocks ? 0 : 6);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            GR_TEST_FAIL("round %d: the child %s %d", round,
                         WIFEXITED(status) ? "exited with" : "was killed by signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    atomic_store(&churning, false);
    ASSERT_EQ(pthread_join(t, NULL), 0);
    memset(held, 2, 64 * KIB); /* still the parent's */
    gr_host_free(held);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
}

/* Each worker's staging buffer is made while gr_runtime_create runs, of the planner's bound
 * (staging_bytes and the ports' alignment), and never from the pool, though small enough
 * for it: a slab is made under the calling thread's context, and a worker's private one
 * would take a slab that others share with it when it is destroyed. Both context modes
 * (the host backend has none: the same either way). */
static void staging_made_at_create_outside_the_pool(void)
{
    for (int mode = 0; mode < 2; mode++) {
        gr_config cfg = GR_CONFIG_INIT;
        gr_host_pool_stats before, after;
        gr_runtime *rt, *in;
        gr_error_info err;
        gr_status st;

        cfg.budget_bytes = 64 * MIB;
        cfg.workers_per_device = 3;
        cfg.staging_bytes = 1 * MIB; /* under GR_HOST_POOL_MAX */
        cfg.context_mode = mode ? GR_CONTEXT_PRIVATE : GR_CONTEXT_PRIMARY;
        before = gr__host_pool_stats();
        if (gr_runtime_create(&cfg, &rt, &err) != GR_OK)
            GR_TEST_FAIL("create: %s", err.message);
        in = gr__runtime_get(rt, &st);
        ASSERT_TRUE(in != NULL);
        after = gr__host_pool_stats();
        ASSERT_EQ_U64(after.blocks, before.blocks);
        ASSERT_EQ_U64(in->n_workers, cfg.workers_per_device * in->n_devices);
        for (uint32_t i = 0; i < in->n_workers; i++) {
            ASSERT_TRUE(in->workers[i].staging != NULL);
            ASSERT_GE(in->workers[i].staging_bytes, cfg.staging_bytes);
            /* Pinned on CUDA, ordinary memory on the host backend: no fallback either way. */
            ASSERT_TRUE(!in->workers[i].staging_pageable);
            memset(in->workers[i].staging, 7, in->workers[i].staging_bytes);
        }
        gr_runtime_destroy(rt);
        ASSERT_EQ_U64(gr__host_pool_stats().blocks, before.blocks);
    }
}

static void *alloc_where_no_slabs_are_made(void *arg)
{
    void **out = arg;

    gr__host_pool_no_slabs_here();
    if (gr_host_alloc(64 * KIB, out) != GR_OK)
        *out = NULL;
    return NULL;
}

/* 64 KiB from a thread of its own that has said no slab is to be made on it. */
static void *alloc_on_a_no_slab_thread(void)
{
    void *got = NULL;
    pthread_t t;

    ASSERT_EQ(pthread_create(&t, NULL, alloc_where_no_slabs_are_made, &got), 0);
    ASSERT_EQ(pthread_join(t, NULL), 0);
    ASSERT_TRUE(got != NULL);
    return got;
}

/* A thread whose context a runtime destroys (a private-context worker, where completion
 * callbacks run) makes no slab: with none to carve from, its request is an allocation of
 * its own; with one made elsewhere, it is carved from that. */
static void no_slab_made_on_a_workers_thread(void)
{
    gr_host_pool_stats st;
    void *got, *other;

    ASSERT_EQ_U64(gr__host_pool_stats().slabs, 0); /* the case's own process */
    got = alloc_on_a_no_slab_thread();
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.slabs, 0);
    ASSERT_EQ_U64(st.blocks, 0);
    memset(got, 3, 64 * KIB);
    gr_host_free(got);
    ASSERT_STATUS(gr_host_alloc(64 * KIB, &other), GR_OK); /* this thread makes one */
    ASSERT_EQ_U64(gr__host_pool_stats().slabs, 1);
    got = alloc_on_a_no_slab_thread();
    st = gr__host_pool_stats();
    ASSERT_EQ_U64(st.slabs, 1);
    ASSERT_EQ_U64(st.blocks, 2);
    gr_host_free(got);
    gr_host_free(other);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
}

/* Run in a process of its own (the runner forks each case): the switch is read once. */
static void off_switch_gives_allocations_their_own(void)
{
    void *a, *b;

    ASSERT_EQ(setenv("GR_HOST_POOL", "0", 1), 0);
    ASSERT_TRUE(!gr__host_pool_takes(PAGE));
    ASSERT_STATUS(gr_host_alloc(64 * KIB, &a), GR_OK);
    ASSERT_STATUS(gr_host_alloc(64 * KIB, &b), GR_OK);
    ASSERT_EQ_U64(gr__host_pool_stats().slabs, 0);
    ASSERT_EQ_U64(gr__host_pool_stats().blocks, 0);
    memset(a, 1, 64 * KIB);
    memset(b, 2, 64 * KIB);
    gr_host_free(a);
    gr_host_free(b);
}

GR_TEST_MAIN(GR_TEST(blocks_are_aligned_apart_and_in_order),
             GR_TEST(thousands_of_blocks_in_few_slabs), GR_TEST(freed_pages_are_given_again),
             GR_TEST(wrong_frees_change_nothing),
             GR_TEST(large_requests_go_around_the_pool),
             GR_TEST(pin_fault_still_fails_a_request), GR_TEST(many_threads_at_once),
             GR_TEST(asan_sees_use_after_free_and_overflow),
             GR_TEST(fork_while_another_thread_allocates),
             GR_TEST(staging_made_at_create_outside_the_pool),
             GR_TEST(no_slab_made_on_a_workers_thread),
             GR_TEST(off_switch_gives_allocations_their_own))

/*
 * stress_ring.c - the task ring under many producers and consumers.
 *
 * N producers and N consumers start behind a barrier on a small ring, so both sides sleep
 * often; some pushes and pops use short deadlines to exercise the timeout and wake-up
 * hand-over paths. Every entry carries a magic value tied to its producer and a sequence
 * number. Checked: nothing lost (every pushed entry popped), nothing duplicated (a bit per
 * entry), nothing corrupted (magic and ranges), and per consumer, each producer's entries
 * arrive in the order they were pushed (the ring is FIFO).
 *
 *   stress_ring [--threads N] [--duration SECONDS] [--seed X]
 */
#include <pthread.h>
#include <stdatomic.h>

#include "runtime/core/ring.h"
#include "runtime/base/sync.h"
#include "tests/testing.h"

#define MAGIC 0x67725f72696e6700ull
#define MAX_PER_PRODUCER (1u << 18)
#define RING_CAPACITY 64

typedef struct shared {
    gr_ring *ring;
    gr_stress_opts opt;
    pthread_barrier_t start;
    int64_t stop_at;
    _Atomic uint64_t *seen; /* bit per (producer, seq) */
    uint64_t *pushed;       /* per producer, written by that producer */
    _Atomic uint64_t popped, duplicated, corrupted, reordered, push_timeouts, pop_timeouts;
} shared;

typedef struct worker {
    shared *s;
    unsigned id;
    uint64_t rng;
} worker;

static void *producer(void *p)
{
    worker *w = p;
    shared *s = w->s;
    uint64_t seq = 0;

    pthread_barrier_wait(&s->start);
    while (seq < MAX_PER_PRODUCER && gr_now_ns() < s->stop_at) {
        gr_task t = {(struct gr_job *)(uintptr_t)(MAGIC ^ w->id), ((uint64_t)w->id << 32) | seq};
        /* One push in eight has a 1 ms deadline: timeouts must not lose or duplicate. */
        int64_t deadline = gr_test_below(&w->rng, 8) == 0 ? gr_now_ns() + 1000000 : 0;
        gr_status st = gr__ring_push(s->ring, &t, deadline, NULL);

        if (st == GR_ERR_TIMEOUT) {
            atomic_fetch_add(&s->push_timeouts, 1);
            continue; /* retry the same entry */
        }
        if (st != GR_OK)
            GR_TEST_FAIL("producer %u: push returned %s", w->id, gr_status_str(st));
        seq++;
    }
    s->pushed[w->id] = seq;
    return NULL;
}

static void *consumer(void *p)
{
    worker *w = p;
    shared *s = w->s;
    unsigned n = s->opt.threads;
    uint64_t *last = malloc(n * sizeof(uint64_t));
    gr_task t;

    for (unsigned i = 0; i < n; i++)
        last[i] = UINT64_MAX;
    pthread_barrier_wait(&s->start);
    for (;;) {
        int64_t deadline = gr_test_below(&w->rng, 8) == 0 ? gr_now_ns() + 1000000 : 0;
        gr_status st = gr__ring_pop(s->ring, &t, deadline);
        uint64_t prod, seq, bit, old;

        if (st == GR_ERR_TIMEOUT) {
            atomic_fetch_add(&s->pop_timeouts, 1);
            continue;
        }
        if (st == GR_ERR_SHUTDOWN)
            break;
        prod = t.index >> 32;
        seq = t.index & 0xffffffffu;
        if (prod >= n || seq >= MAX_PER_PRODUCER ||
            (uintptr_t)t.job != (uintptr_t)(MAGIC ^ prod)) {
            atomic_fetch_add(&s->corrupted, 1);
            continue;
        }
        if (last[prod] != UINT64_MAX && seq <= last[prod])
            atomic_fetch_add(&s->reordered, 1);
        last[prod] = seq;
        bit = prod * MAX_PER_PRODUCER + seq;
        old = atomic_fetch_or(&s->seen[bit / 64], 1ull << (bit % 64));
        if (old & (1ull << (bit % 64)))
            atomic_fetch_add(&s->duplicated, 1);
        atomic_fetch_add(&s->popped, 1);
    }
    free(last);
    return NULL;
}

static gr_stress_opts opt = {64, 1.0, 1};

static void stress(void)
{
    shared s;
    unsigned n;
    worker *w;
    pthread_t *th;
    uint64_t pushed = 0, lost = 0;

    memset(&s, 0, sizeof(s));
    s.opt = opt;
    n = opt.threads;
    ASSERT_STATUS(gr__ring_create(RING_CAPACITY, &s.ring), GR_OK);
    s.seen = calloc((size_t)n * MAX_PER_PRODUCER / 64, sizeof(uint64_t));
    s.pushed = calloc(n, sizeof(uint64_t));
    w = calloc(2 * n, sizeof(*w));
    th = calloc(2 * n, sizeof(*th));
    ASSERT_TRUE(s.seen && s.pushed && w && th);
    pthread_barrier_init(&s.start, NULL, 2 * n + 1);
    for (unsigned i = 0; i < 2 * n; i++) {
        w[i] = (worker){&s, i % n, opt.seed * 1000003 + i};
        ASSERT_EQ(pthread_create(&th[i], NULL, i < n ? producer : consumer, &w[i]), 0);
    }
    s.stop_at = gr_now_ns() + (int64_t)(opt.duration_s * 1e9);
    pthread_barrier_wait(&s.start);
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    gr__ring_shutdown(s.ring); /* consumers drain what is left, then leave */
    for (unsigned i = n; i < 2 * n; i++)
        pthread_join(th[i], NULL);

    for (unsigned p = 0; p < n; p++) {
        pushed += s.pushed[p];
        for (uint64_t q = 0; q < s.pushed[p]; q++) {
            uint64_t bit = p * MAX_PER_PRODUCER + q;
            if (!(atomic_load(&s.seen[bit / 64]) & (1ull << (bit % 64))))
                lost++;
        }
    }
    uint64_t popped = atomic_load(&s.popped), duplicated = atomic_load(&s.duplicated);
    uint64_t corrupted = atomic_load(&s.corrupted), reordered = atomic_load(&s.reordered);

    printf("stress_ring: %u producers, %u consumers, ring of %d: %llu pushed, %llu popped, "
           "%llu push / %llu pop timeouts; %llu lost, %llu duplicated, %llu corrupted, "
           "%llu reordered\n",
           n, n, RING_CAPACITY, (unsigned long long)pushed, (unsigned long long)popped,
           (unsigned long long)atomic_load(&s.push_timeouts),
           (unsigned long long)atomic_load(&s.pop_timeouts), (unsigned long long)lost,
           (unsigned long long)duplicated, (unsigned long long)corrupted,
           (unsigned long long)reordered);
    ASSERT_GT(pushed, 0);
    ASSERT_EQ_U64(lost, 0);
    ASSERT_EQ_U64(duplicated, 0);
    ASSERT_EQ_U64(corrupted, 0);
    ASSERT_EQ_U64(reordered, 0);
    ASSERT_EQ_U64(popped, pushed);
    ASSERT_EQ(gr__ring_count(s.ring), 0);
    pthread_barrier_destroy(&s.start);
    gr__ring_destroy(s.ring);
    free(s.seen);
    free(s.pushed);
    free(w);
    free(th);
}

int main(int argc, char **argv)
{
    static const gr_test_case cases[] = {{"stress_ring", stress}};

    gr_stress_parse(argc, argv, &opt);
    return gr_test_run(cases, 1, 1, argv, gr_stress_timeout_s(&opt));
}

/*
 * stress_budget.c - the budget semaphore under many threads.
 *
 * N threads start behind a barrier and take random amounts (up to a quarter of the budget)
 * for random short times; some with short deadlines, some canceled. Each grant adds its
 * bytes to an independent counter kept by the test and checks it never exceeds the budget
 * (the semaphore's own counters are not trusted). One more thread repeatedly asks for the
 * whole budget amid the flood: FIFO order means it waits only for the holders ahead of it,
 * so each of its grants must come within LARGE_BOUND_NS (1 s); an unfair semaphore starves
 * it for the whole run, which must therefore last well over that bound for the check to
 * mean anything (tests/BUILD runs 3 s). At the end nothing is held or queued.
 *
 *   stress_budget [--threads N] [--duration SECONDS] [--seed X]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "runtime/core/budget.h"
#include "runtime/base/sync.h"
#include "tests/testing.h"

#define CAPACITY (1u << 20)
#define LARGE_BOUND_NS (1000ll * 1000000)

typedef struct shared {
    gr_budget *b;
    pthread_barrier_t start;
    int64_t stop_at;
    _Atomic uint64_t in_use;  /* the test's own count of granted bytes */
    _Atomic uint64_t max_in_use;
    _Atomic uint64_t grants, timeouts, cancels, violations;
    _Atomic uint64_t large_grants, large_late;
    _Atomic int64_t large_max_wait;
} shared;

typedef struct worker {
    shared *s;
    uint64_t rng;
} worker;

static void hold_for(uint64_t ns)
{
    struct timespec ts = {0, (long)ns};
    if (ns)
        nanosleep(&ts, NULL);
}

static void take(shared *s, uint64_t bytes)
{
    uint64_t now = atomic_fetch_add(&s->in_use, bytes) + bytes;
    uint64_t max = atomic_load(&s->max_in_use);

    if (now > CAPACITY)
        atomic_fetch_add(&s->violations, 1);
    while (now > max && !atomic_compare_exchange_weak(&s->max_in_use, &max, now))
        ;
    atomic_fetch_add(&s->grants, 1);
}

static void give(shared *s, uint64_t bytes)
{
    atomic_fetch_sub(&s->in_use, bytes);
    gr__budget_release(s->b, bytes);
}

static void *small_main(void *p)
{
    worker *w = p;
    shared *s = w->s;

    pthread_barrier_wait(&s->start);
    while (gr_now_ns() < s->stop_at) {
        uint64_t bytes = 1 + gr_test_below(&w->rng, CAPACITY / 4);
        uint64_t kind = gr_test_below(&w->rng, 16);
        int64_t deadline = kind == 0 ? gr_now_ns() + 200000 : GR_NO_DEADLINE;
        gr_cancel_flag flag = kind == 1 ? GR_ERR_CANCELED : 0;
        gr_status st = gr__budget_acquire(s->b, bytes, deadline, &flag);

        if (st == GR_ERR_TIMEOUT) {
            atomic_fetch_add(&s->timeouts, 1);
            continue;
        }
        if (st == GR_ERR_CANCELED) {
            atomic_fetch_add(&s->cancels, 1);
            continue;
        }
        if (st != GR_OK)
            GR_TEST_FAIL("acquire %llu: %s", (unsigned long long)bytes, gr_status_str(st));
        take(s, bytes);
        hold_for(gr_test_below(&w->rng, 100000));
        give(s, bytes);
    }
    return NULL;
}

static void *large_main(void *p)
{
    worker *w = p;
    shared *s = w->s;

    pthread_barrier_wait(&s->start);
    while (gr_now_ns() < s->stop_at) {
        int64_t t0, waited, max;
        gr_status st;

        hold_for(1000000 + gr_test_below(&w->rng, 10000000));
        t0 = gr_now_ns();
        st = gr__budget_acquire(s->b, CAPACITY, t0 + 30ll * 1000000000, NULL);
        if (st != GR_OK)
            GR_TEST_FAIL("large acquire: %s after %lld ms", gr_status_str(st),
                         (long long)((gr_now_ns() - t0) / 1000000));
        waited = gr_now_ns() - t0;
        take(s, CAPACITY);
        atomic_fetch_add(&s->large_grants, 1);
        if (waited > LARGE_BOUND_NS)
            atomic_fetch_add(&s->large_late, 1);
        max = atomic_load(&s->large_max_wait);
        while (waited > max && !atomic_compare_exchange_weak(&s->large_max_wait, &max, waited))
            ;
        hold_for(100000);
        give(s, CAPACITY);
    }
    return NULL;
}

static gr_stress_opts opt = {64, 1.0, 1};

static void stress(void)
{
    unsigned n = opt.threads;
    worker *w = calloc(n + 1, sizeof(*w));
    pthread_t *th = calloc(n + 1, sizeof(*th));
    shared s;

    memset(&s, 0, sizeof(s));
    ASSERT_STATUS(gr__budget_create(CAPACITY, &s.b), GR_OK);
    pthread_barrier_init(&s.start, NULL, n + 2);
    for (unsigned i = 0; i <= n; i++) {
        w[i] = (worker){&s, opt.seed * 7919 + i};
        ASSERT_EQ(pthread_create(&th[i], NULL, i < n ? small_main : large_main, &w[i]), 0);
    }
    s.stop_at = gr_now_ns() + (int64_t)(opt.duration_s * 1e9);
    pthread_barrier_wait(&s.start);
    for (unsigned i = 0; i <= n; i++)
        pthread_join(th[i], NULL);

    uint64_t violations = atomic_load(&s.violations), max_in_use = atomic_load(&s.max_in_use);
    uint64_t large_grants = atomic_load(&s.large_grants), late = atomic_load(&s.large_late);
    uint64_t test_in_use = atomic_load(&s.in_use);

    printf("stress_budget: %u threads + 1 large, budget %u: %llu grants (%llu of the whole "
           "budget, longest wait %.1f ms), %llu timeouts, %llu cancels; max in use %llu; "
           "%llu violations, %llu late large grants\n",
           n, CAPACITY, (unsigned long long)atomic_load(&s.grants),
           (unsigned long long)large_grants, (double)atomic_load(&s.large_max_wait) / 1e6,
           (unsigned long long)atomic_load(&s.timeouts),
           (unsigned long long)atomic_load(&s.cancels), (unsigned long long)max_in_use,
           (unsigned long long)violations, (unsigned long long)late);
    ASSERT_EQ_U64(violations, 0);
    ASSERT_LE_U64(max_in_use, CAPACITY);
    ASSERT_GE(large_grants, 1);
    ASSERT_EQ_U64(late, 0);
    ASSERT_EQ_U64(gr__budget_in_use(s.b), 0);
    ASSERT_EQ_U64(test_in_use, 0);
    ASSERT_EQ(gr__budget_waiters(s.b), 0);
    ASSERT_LE_U64(gr__budget_peak(s.b), CAPACITY);
    pthread_barrier_destroy(&s.start);
    gr__budget_destroy(s.b);
    free(w);
    free(th);
}

int main(int argc, char **argv)
{
    static const gr_test_case cases[] = {{"stress_budget", stress}};

    gr_stress_parse(argc, argv, &opt);
    return gr_test_run(cases, 1, 1, argv, gr_stress_timeout_s(&opt));
}

/*
 * ring_test.c - the task ring: capacity, order, sleeping on full and empty, deadlines,
 * cancellation and shutdown.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "runtime/core/ring.h"
#include "runtime/base/sync.h"
#include "tests/testing.h"

static gr_task task(uint64_t i)
{
    gr_task t = {(struct gr_job *)(uintptr_t)(0x1000 + i), i};
    return t;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void create_refuses_bad_capacity(void)
{
    gr_ring *r;
    const uint32_t bad[] = {0, 1, 3, 6, 100, 0x80000000u};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_STATUS(gr__ring_create(bad[i], &r), GR_ERR_INVALID_ARGUMENT);
        ASSERT_PTR_EQ(r, NULL);
    }
    ASSERT_STATUS(gr__ring_create(2, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr__ring_create(2, &r), GR_OK);
    ASSERT_EQ(gr__ring_capacity(r), 2);
    gr__ring_destroy(r);
    gr__ring_destroy(NULL);
}

static void fifo_order_and_capacity(void)
{
    gr_ring *r;
    gr_task t;

    ASSERT_STATUS(gr__ring_create(8, &r), GR_OK);
    for (uint64_t i = 0; i < 7; i++) {
        gr_task in = task(i);
        ASSERT_TRUE(gr__ring_try_push(r, &in));
    }
    t = task(99);
    ASSERT_TRUE(!gr__ring_try_push(r, &t)); /* holds capacity - 1 */
    ASSERT_EQ(gr__ring_count(r), 7);
    for (uint64_t i = 0; i < 7; i++) {
        ASSERT_STATUS(gr__ring_pop(r, &t, GR_NO_DEADLINE), GR_OK);
        ASSERT_EQ_U64(t.index, i);
        ASSERT_PTR_EQ(t.job, task(i).job);
    }
    ASSERT_TRUE(!gr__ring_try_pop(r, &t));
    ASSERT_EQ(gr__ring_count(r), 0);
    gr__ring_destroy(r);
}

typedef struct push_arg {
    gr_ring *r;
    gr_task t;
    int64_t deadline;
    gr_cancel_flag *cancel;
    atomic_int done;
    gr_status st;
} push_arg;

static void *push_thread(void *p)
{
    push_arg *a = p;

    a->st = gr__ring_push(a->r, &a->t, a->deadline, a->cancel);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Wait until n producers are asleep on the full ring (at most 10 s). */
static void wait_for_producers(gr_ring *r, uint32_t n)
{
    for (int ms = 0; gr__ring_producers_waiting(r) != n; ms++) {
        if (ms == 10000)
            GR_TEST_FAIL("waited 10 s for %u producer(s) to sleep, %u do", n,
                         gr__ring_producers_waiting(r));
        sleep_ms(1);
    }
}

static void fill(gr_ring *r)
{
    for (uint64_t i = 0;; i++) {
        gr_task t = task(i);
        if (!gr__ring_try_push(r, &t))
            break;
    }
}

static void push_sleeps_while_full_until_pop(void)
{
    push_arg a = {.t = task(42), .deadline = GR_NO_DEADLINE};
    pthread_t th;
    gr_task t;

    ASSERT_STATUS(gr__ring_create(4, &a.r), GR_OK);
    fill(a.r);
    pthread_create(&th, NULL, push_thread, &a);
    sleep_ms(50);
    ASSERT_EQ(atomic_load(&a.done), 0); /* still asleep: the ring is full */
    ASSERT_STATUS(gr__ring_pop(a.r, &t, GR_NO_DEADLINE), GR_OK);
    ASSERT_EQ_U64(t.index, 0);
    pthread_join(th, NULL);
    ASSERT_STATUS(a.st, GR_OK);
    ASSERT_STATUS(gr__ring_pop(a.r, &t, GR_NO_DEADLINE), GR_OK);
    ASSERT_STATUS(gr__ring_pop(a.r, &t, GR_NO_DEADLINE), GR_OK);
    ASSERT_STATUS(gr__ring_pop(a.r, &t, GR_NO_DEADLINE), GR_OK);
    ASSERT_EQ_U64(t.index, 42); /* FIFO: the late push came last */
    gr__ring_destroy(a.r);
}

static void push_deadline_on_full_ring(void)
{
    gr_ring *r;
    gr_task t = task(1);
    int64_t start;

    ASSERT_STATUS(gr__ring_create(2, &r), GR_OK);
    fill(r);
    start = gr_now_ns();
    ASSERT_STATUS(gr__ring_push(r, &t, start + 50 * 1000000, NULL), GR_ERR_TIMEOUT);
    ASSERT_GE(gr_now_ns() - start, 50 * 1000000);
    gr__ring_destroy(r);
}

static void pop_deadline_on_empty_ring(void)
{
    gr_ring *r;
    gr_task t;
    int64_t start;

    ASSERT_STATUS(gr__ring_create(2, &r), GR_OK);
    start = gr_now_ns();
    ASSERT_STATUS(gr__ring_pop(r, &t, start + 30 * 1000000), GR_ERR_TIMEOUT);
    ASSERT_GE(gr_now_ns() - start, 30 * 1000000);
    gr__ring_destroy(r);
}

static void push_wakes_on_cancel(void)
{
    gr_cancel_flag flag = 0;
    push_arg a = {.t = task(7), .deadline = GR_NO_DEADLINE, .cancel = &flag};
    pthread_t th;

    ASSERT_STATUS(gr__ring_create(2, &a.r), GR_OK);
    fill(a.r);
    pthread_create(&th, NULL, push_thread, &a);
    sleep_ms(20);
    atomic_store(&flag, GR_ERR_CANCELED);
    gr__ring_wake_producers(a.r);
    pthread_join(th, NULL);
    ASSERT_STATUS(a.st, GR_ERR_CANCELED);
    ASSERT_EQ(gr__ring_count(a.r), 1); /* nothing was added */
    gr__ring_destroy(a.r);
}

typedef struct pop_arg {
    gr_ring *r;
    gr_status st;
} pop_arg;

static void *pop_thread(void *p)
{
    pop_arg *a = p;
    gr_task t;

    a->st = gr__ring_pop(a->r, &t, GR_NO_DEADLINE);
    return NULL;
}

static void shutdown_wakes_both_sides_and_drains(void)
{
    push_arg a = {.t = task(9), .deadline = GR_NO_DEADLINE};
    pop_arg c;
    pthread_t pt, ct;
    gr_ring *empty;
    gr_task t;

    /* A consumer asleep on an empty ring wakes with SHUTDOWN. */
    ASSERT_STATUS(gr__ring_create(4, &empty), GR_OK);
    c.r = empty;
    pthread_create(&ct, NULL, pop_thread, &c);
    sleep_ms(20);
    gr__ring_shutdown(empty);
    pthread_join(ct, NULL);
    ASSERT_STATUS(c.st, GR_ERR_SHUTDOWN);
    gr__ring_destroy(empty);

    /* A producer asleep on a full ring wakes with SHUTDOWN; what was queued still drains,
     * then pops say SHUTDOWN; pushes are refused. */
    ASSERT_STATUS(gr__ring_create(4, &a.r), GR_OK);
    fill(a.r);
    pthread_create(&pt, NULL, push_thread, &a);
    sleep_ms(20);
    gr__ring_shutdown(a.r);
    pthread_join(pt, NULL);
    ASSERT_STATUS(a.st, GR_ERR_SHUTDOWN);
    for (uint64_t i = 0; i < 3; i++) {
        ASSERT_STATUS(gr__ring_pop(a.r, &t, GR_NO_DEADLINE), GR_OK);
        ASSERT_EQ_U64(t.index, i);
    }
    ASSERT_STATUS(gr__ring_pop(a.r, &t, GR_NO_DEADLINE), GR_ERR_SHUTDOWN);
    t = task(5);
    ASSERT_STATUS(gr__ring_push(a.r, &t, GR_NO_DEADLINE, NULL), GR_ERR_SHUTDOWN);
    gr__ring_destroy(a.r);
}

/* One slot frees while two producers sleep, and one of them has been canceled: it leaves
 * without the slot, and the other takes it (woken with it, or by the wakeup the leaver
 * passes on). */
static void producer_that_leaves_passes_the_wakeup_on(void)
{
    gr_cancel_flag flag = 0;
    push_arg a, b;
    pthread_t ta, tb;
    gr_ring *r;
    gr_task t;

    ASSERT_STATUS(gr__ring_create(2, &r), GR_OK);
    fill(r);
    a = (push_arg){.r = r, .t = task(1), .deadline = GR_NO_DEADLINE, .cancel = &flag};
    b = (push_arg){.r = r, .t = task(2), .deadline = GR_NO_DEADLINE};
    pthread_create(&ta, NULL, push_thread, &a);
    wait_for_producers(r, 1);
    pthread_create(&tb, NULL, push_thread, &b);
    wait_for_producers(r, 2);
    atomic_store(&flag, GR_ERR_CANCELED); /* no wake: a notices only when signaled */
    ASSERT_TRUE(gr__ring_try_pop(r, &t));  /* frees the one slot: the ring is half empty */
    pthread_join(ta, NULL);
    ASSERT_STATUS(a.st, GR_ERR_CANCELED);
    for (int i = 0; i < 2000 && !atomic_load(&b.done); i++)
        sleep_ms(1);
    ASSERT_EQ(atomic_load(&b.done), 1);
    pthread_join(tb, NULL);
    ASSERT_STATUS(b.st, GR_OK);
    gr__ring_destroy(r);
}

/* Hysteresis: a producer asleep on a full ring is not woken for each freed slot, only once
 * the ring is at most half full (16 slots: 15 tasks; half is 8). */
static void producer_sleeps_until_the_ring_is_half_empty(void)
{
    push_arg a = {.t = task(99), .deadline = GR_NO_DEADLINE};
    pthread_t th;
    gr_task t;

    ASSERT_STATUS(gr__ring_create(16, &a.r), GR_OK);
    fill(a.r);
    ASSERT_EQ(gr__ring_count(a.r), 15);
    pthread_create(&th, NULL, push_thread, &a);
    wait_for_producers(a.r, 1);
    for (int i = 0; i < 6; i++)
        ASSERT_TRUE(gr__ring_try_pop(a.r, &t)); /* 9 left: above half */
    sleep_ms(50);
    ASSERT_EQ(atomic_load(&a.done), 0); /* not woken for those slots */
    ASSERT_TRUE(gr__ring_try_pop(a.r, &t)); /* 8 left: half, wakes it */
    pthread_join(th, NULL);
    ASSERT_STATUS(a.st, GR_OK);
    ASSERT_EQ(gr__ring_count(a.r), 9);
    gr__ring_destroy(a.r);
}

/* Every producer asleep on the full ring wakes when it reaches half, and none is left
 * asleep beside free slots. */
static void every_sleeping_producer_wakes_at_half(void)
{
    enum { N = 4 };
    push_arg a[N];
    pthread_t th[N];
    gr_ring *r;
    gr_task t;

    ASSERT_STATUS(gr__ring_create(16, &r), GR_OK);
    fill(r);
    for (int i = 0; i < N; i++) {
        a[i] = (push_arg){.r = r, .t = task(100 + i), .deadline = GR_NO_DEADLINE};
        pthread_create(&th[i], NULL, push_thread, &a[i]);
    }
    wait_for_producers(r, N);
    for (int i = 0; i < 7; i++)
        ASSERT_TRUE(gr__ring_try_pop(r, &t)); /* 8 left */
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ASSERT_STATUS(a[i].st, GR_OK);
    }
    ASSERT_EQ(gr__ring_count(r), 8 + N);
    gr__ring_destroy(r);
}

GR_TEST_MAIN(GR_TEST(create_refuses_bad_capacity), GR_TEST(fifo_order_and_capacity),
             GR_TEST(push_sleeps_while_full_until_pop), GR_TEST(push_deadline_on_full_ring),
             GR_TEST(pop_deadline_on_empty_ring), GR_TEST(push_wakes_on_cancel),
             GR_TEST(shutdown_wakes_both_sides_and_drains),
             GR_TEST(producer_that_leaves_passes_the_wakeup_on),
             GR_TEST(producer_sleeps_until_the_ring_is_half_empty),
             GR_TEST(every_sleeping_producer_wakes_at_half))

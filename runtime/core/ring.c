/*
 * ring.c - the task ring (see ring.h).
 *
 * Sleeping protocol (the same on both ends; shown for a producer facing a full ring):
 *
 *   producer (slow path)                consumer (after a successful pop)
 *   lock(mu)                            ck pop (a CAS on c_head)
 *   prod_waiters += 1   (seq_cst)       seq_cst fence
 *   try push again  -> fails            if prod_waiters > 0 (and, for producers, the ring
 *   cond_wait(not_full)  [unlocks mu]   is at most half full: below): lock(mu); wake; unlock
 *
 * No lost wakeup: the two seq_cst operations order "waiters += 1" against the consumer's
 * CAS. Either the consumer's load sees the waiter (then it takes mu, which it can only get
 * once the producer sleeps or has not yet re-tried, and signals), or the producer's retry
 * comes after the CAS and sees the free slot. A woken thread that leaves without using the
 * slot (deadline, cancel, shutdown) passes the signal on, so no waiter is stranded by a
 * wakeup that another one used up.
 *
 * Producers are woken with hysteresis: a consumer wakes them (all of them) only once its pop
 * has left the ring at most half full, not after every pop. A job of more tasks than the ring
 * holds keeps its submitter on the full ring for most of its life; waking it for every freed
 * slot cost each worker's pop a futex wake and the submitter a context switch per task
 * (thousands per 10,000 tasks), and a half-empty ring still gives the workers plenty to do
 * while it refills. Nothing is lost: after a producer's retry found the ring full, every pop
 * sees its waiter count (as above), and consumers that go on popping while tasks are left
 * (the workers sleep only on an empty ring) cannot stop above half without pushes from
 * someone else, so the pop that crosses the mark (or a later one) wakes it. The price: a
 * producer sleeps beside free slots until then, and until its deadline, cancel or shutdown
 * if the consumers stop popping above half (ring.h). Consumers are woken for every push, as
 * before: an idle worker must start at once.
 *
 * Lock order: only r->mu; nothing else is taken while it is held.
 *
 * ThreadSanitizer cannot see ck's inline-assembly atomics, so the functions that run ck code
 * are GR_NO_TSAN and the hand-over of the task's payload (the job it points to) is marked
 * with a release before publishing and an acquire after receiving.
 */
#include "runtime/core/ring.h"

#include <ck_ring.h>
#include <pthread.h>
#include <stdlib.h>

#include "runtime/base/fault.h"
#include "runtime/base/sync.h"

CK_RING_PROTOTYPE(gr_task, gr_task)

struct gr_ring {
    ck_ring_t ring;
    struct gr_task *slots;
    uint32_t capacity;

    pthread_mutex_t mu;
    pthread_cond_t not_full;  /* producers sleep here */
    pthread_cond_t not_empty; /* consumers sleep here */
    atomic_uint prod_waiters; /* producers in the slow path (incremented under mu) */
    atomic_uint cons_waiters; /* consumers in the slow path (incremented under mu) */
    atomic_bool shutdown;

    char tsan_sync; /* address for the tsan hand-over annotations */
};

gr_status gr__ring_create(uint32_t capacity, gr_ring **out)
{
    gr_ring *r;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (capacity < 2 || (capacity & (capacity - 1)) != 0 || capacity > (1u << 30))
        return GR_ERR_INVALID_ARGUMENT;
    r = gr__calloc(1, sizeof(*r));
    if (r == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    r->slots = gr__calloc(capacity, sizeof(*r->slots));
    if (r->slots == NULL)
        goto out_free_ring;
    if (pthread_mutex_init(&r->mu, NULL) != 0)
        goto out_free_slots;
    if (gr__cond_init(&r->not_full) != 0)
        goto out_destroy_mu;
    if (gr__cond_init(&r->not_empty) != 0)
        goto out_destroy_not_full;
    ck_ring_init(&r->ring, capacity);
    r->capacity = capacity;
    *out = r;
    return GR_OK;

out_destroy_not_full:
    pthread_cond_destroy(&r->not_full);
out_destroy_mu:
    pthread_mutex_destroy(&r->mu);
out_free_slots:
    free(r->slots);
out_free_ring:
    free(r);
    return GR_ERR_OUT_OF_MEMORY;
}

void gr__ring_destroy(gr_ring *r)
{
    if (r == NULL)
        return;
    pthread_cond_destroy(&r->not_empty);
    pthread_cond_destroy(&r->not_full);
    pthread_mutex_destroy(&r->mu);
    free(r->slots);
    free(r);
}

GR_NO_TSAN static bool ring_enqueue(gr_ring *r, const gr_task *t)
{
    gr_task copy = *t;

    return ck_ring_enqueue_mpmc_gr_task(&r->ring, r->slots, &copy);
}

GR_NO_TSAN static bool ring_dequeue(gr_ring *r, gr_task *out)
{
    return ck_ring_dequeue_mpmc_gr_task(&r->ring, r->slots, out);
}

GR_NO_TSAN static uint32_t ring_size(gr_ring *r)
{
    return ck_ring_size(&r->ring);
}

/* Wake one sleeping consumer, if there is one, after a push. The fence orders our ck
 * operation before the load of the waiter count (see the protocol at the top). */
static void wake_consumer(gr_ring *r)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->cons_waiters, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&r->mu);
    pthread_cond_signal(&r->not_empty);
    pthread_mutex_unlock(&r->mu);
}

/* After a pop: wake every sleeping producer once the ring is at most half full (the
 * hysteresis above). */
static void wake_producers(gr_ring *r)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->prod_waiters, memory_order_relaxed) == 0 ||
        ring_size(r) > r->capacity / 2)
        return;
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->not_full);
    pthread_mutex_unlock(&r->mu);
}

bool gr__ring_try_push(gr_ring *r, const gr_task *t)
{
    GR_TSAN_RELEASE(&r->tsan_sync);
    if (!ring_enqueue(r, t))
        return false;
    wake_consumer(r);
    return true;
}

bool gr__ring_try_pop(gr_ring *r, gr_task *out)
{
    if (!ring_dequeue(r, out))
        return false;
    GR_TSAN_ACQUIRE(&r->tsan_sync);
    wake_producers(r);
    return true;
}

gr_status gr__ring_push(gr_ring *r, const gr_task *t, int64_t deadline_ns,
                        const gr_cancel_flag *cancel)
{
    gr_status st = GR_OK;
    bool timed_out = false;
    int why;

    if (atomic_load_explicit(&r->shutdown, memory_order_acquire))
        return GR_ERR_SHUTDOWN;
    if (gr__ring_try_push(r, t))
        return GR_OK;

    pthread_mutex_lock(&r->mu);
    atomic_fetch_add_explicit(&r->prod_waiters, 1, memory_order_seq_cst);
    for (;;) {
        if (atomic_load_explicit(&r->shutdown, memory_order_acquire)) {
            st = GR_ERR_SHUTDOWN;
            break;
        }
        why = cancel ? atomic_load_explicit(cancel, memory_order_acquire) : 0;
        if (why != 0) {
            st = (gr_status)why;
            break;
        }
        GR_TSAN_RELEASE(&r->tsan_sync);
        if (ring_enqueue(r, t))
            break;
        if (timed_out) {
            st = GR_ERR_TIMEOUT;
            break;
        }
        timed_out = gr__cond_wait_until(&r->not_full, &r->mu, deadline_ns);
    }
    atomic_fetch_sub_explicit(&r->prod_waiters, 1, memory_order_relaxed);
    /* Leaving without the slot we may have been signaled for: pass the wakeup on. */
    if (st != GR_OK && atomic_load_explicit(&r->prod_waiters, memory_order_relaxed) > 0)
        pthread_cond_signal(&r->not_full);
    pthread_mutex_unlock(&r->mu);
    if (st == GR_OK)
        wake_consumer(r);
    return st;
}

gr_status gr__ring_pop(gr_ring *r, gr_task *out, int64_t deadline_ns)
{
    gr_status st = GR_OK;
    bool timed_out = false;

    if (gr__ring_try_pop(r, out))
        return GR_OK;

    pthread_mutex_lock(&r->mu);
    atomic_fetch_add_explicit(&r->cons_waiters, 1, memory_order_seq_cst);
    for (;;) {
        if (ring_dequeue(r, out)) {
            GR_TSAN_ACQUIRE(&r->tsan_sync);
            break;
        }
        /* Checked after the dequeue attempt, so tasks pushed before shutdown drain. A push
         * racing with shutdown can still land after the last consumer has left: the owner
         * stops its producers, then empties the ring with gr__ring_try_pop (ring.h). */
        if (atomic_load_explicit(&r->shutdown, memory_order_acquire)) {
            st = GR_ERR_SHUTDOWN;
            break;
        }
        if (timed_out) {
            st = GR_ERR_TIMEOUT;
            break;
        }
        timed_out = gr__cond_wait_until(&r->not_empty, &r->mu, deadline_ns);
    }
    atomic_fetch_sub_explicit(&r->cons_waiters, 1, memory_order_relaxed);
    if (st != GR_OK && atomic_load_explicit(&r->cons_waiters, memory_order_relaxed) > 0)
        pthread_cond_signal(&r->not_empty);
    pthread_mutex_unlock(&r->mu);
    if (st == GR_OK)
        wake_producers(r);
    return st;
}

void gr__ring_wake_producers(gr_ring *r)
{
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->not_full);
    pthread_mutex_unlock(&r->mu);
}

void gr__ring_shutdown(gr_ring *r)
{
    pthread_mutex_lock(&r->mu);
    atomic_store_explicit(&r->shutdown, true, memory_order_release);
    pthread_cond_broadcast(&r->not_full);
    pthread_cond_broadcast(&r->not_empty);
    pthread_mutex_unlock(&r->mu);
}

uint32_t gr__ring_count(gr_ring *r)
{
    return ring_size(r);
}

uint32_t gr__ring_producers_waiting(gr_ring *r)
{
    return atomic_load_explicit(&r->prod_waiters, memory_order_relaxed);
}

uint32_t gr__ring_capacity(const gr_ring *r)
{
    return r->capacity;
}

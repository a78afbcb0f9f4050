/*
 * budget.c - FIFO byte semaphore (see budget.h).
 *
 * All state changes happen under b->mu. A request that fits while nobody is queued is
 * granted at once; otherwise it sleeps in a FIFO wait queue (waitq.h) whose grant function
 * is "fits under the capacity", so a release wakes exactly the waiters it grants.
 *
 * Lock order: only b->mu.
 */
#include "runtime/core/budget.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "runtime/base/fault.h"
#include "runtime/base/sync.h"
#include "runtime/core/waitq.h"

struct gr_budget {
    pthread_mutex_t mu;
    uint64_t capacity;
    /* Written under mu; atomic so statistics can read them without the lock. */
    _Atomic uint64_t in_use;
    _Atomic uint64_t peak;
    gr_waitq queue;
    bool shutdown;
};

/* The grant function of the wait queue, and the fast path. Called with mu held. */
static bool try_take(void *owner, void *request)
{
    gr_budget *b = owner;
    uint64_t bytes = *(const uint64_t *)request;
    uint64_t now = atomic_load_explicit(&b->in_use, memory_order_relaxed);

    if (now + bytes > b->capacity)
        return false;
    now += bytes;
    atomic_store_explicit(&b->in_use, now, memory_order_relaxed);
    if (now > atomic_load_explicit(&b->peak, memory_order_relaxed))
        atomic_store_explicit(&b->peak, now, memory_order_relaxed);
    return true;
}

gr_status gr__budget_create(uint64_t capacity, gr_budget **out)
{
    gr_budget *b;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (capacity == 0)
        return GR_ERR_INVALID_ARGUMENT;
    b = gr__calloc(1, sizeof(*b));
    if (b == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        return GR_ERR_OUT_OF_MEMORY;
    }
    b->capacity = capacity;
    gr__waitq_init(&b->queue, try_take, b);
    *out = b;
    return GR_OK;
}

void gr__budget_destroy(gr_budget *b)
{
    if (b == NULL)
        return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Both ways of taking bytes: with `wait`, sleeping FIFO until they fit; without, only what
 * fits now with nobody queued ahead (GR_ERR_TIMEOUT otherwise). */
static gr_status take(gr_budget *b, uint64_t bytes, bool wait, int64_t deadline_ns,
                      const gr_cancel_flag *cancel)
{
    gr_status st;

    if (bytes == 0)
        return GR_ERR_INVALID_ARGUMENT;
    if (bytes > b->capacity)
        return GR_ERR_OVER_BUDGET;

    pthread_mutex_lock(&b->mu);
    if (b->shutdown)
        st = GR_ERR_SHUTDOWN;
    else if (cancel != NULL && atomic_load_explicit(cancel, memory_order_acquire) != 0)
        st = (gr_status)atomic_load_explicit(cancel, memory_order_acquire);
    else if (b->queue.head == NULL && try_take(b, &bytes))
        st = GR_OK;
    else if (!wait)
        st = GR_ERR_TIMEOUT;
    else
        st = gr__waitq_wait(&b->queue, &b->mu, &bytes, deadline_ns, cancel, &b->shutdown);
    pthread_mutex_unlock(&b->mu);
    return st;
}

gr_status gr__budget_acquire(gr_budget *b, uint64_t bytes, int64_t deadline_ns,
                             const gr_cancel_flag *cancel)
{
    return take(b, bytes, true, deadline_ns, cancel);
}

gr_status gr__budget_try_acquire(gr_budget *b, uint64_t bytes)
{
    return take(b, bytes, false, GR_NO_DEADLINE, NULL);
}

void gr__budget_release(gr_budget *b, uint64_t bytes)
{
    uint64_t in_use;

    pthread_mutex_lock(&b->mu);
    in_use = atomic_load_explicit(&b->in_use, memory_order_relaxed);
    /* Releasing more than is held is a caller bug; clamp so the semaphore stays sane. */
    atomic_store_explicit(&b->in_use, bytes <= in_use ? in_use - bytes : 0,
                          memory_order_relaxed);
    gr__waitq_grant_head(&b->queue);
    pthread_mutex_unlock(&b->mu);
}

void gr__budget_wake(gr_budget *b)
{
    pthread_mutex_lock(&b->mu);
    gr__waitq_signal_all(&b->queue);
    pthread_mutex_unlock(&b->mu);
}

void gr__budget_shutdown(gr_budget *b)
{
    pthread_mutex_lock(&b->mu);
    b->shutdown = true;
    gr__waitq_signal_all(&b->queue);
    pthread_mutex_unlock(&b->mu);
}

uint64_t gr__budget_capacity(const gr_budget *b)
{
    return b->capacity;
}

uint64_t gr__budget_in_use(const gr_budget *b)
{
    return atomic_load_explicit(&b->in_use, memory_order_relaxed);
}

uint64_t gr__budget_peak(const gr_budget *b)
{
    return atomic_load_explicit(&b->peak, memory_order_relaxed);
}

uint32_t gr__budget_waiters(gr_budget *b)
{
    uint32_t n;

    pthread_mutex_lock(&b->mu);
    n = b->queue.count;
    pthread_mutex_unlock(&b->mu);
    return n;
}

/*
 * arena.c - first-fit placement of blocks in one region, with FIFO waiting (see arena.h).
 *
 * The placed blocks form a list sorted by offset; the gaps between them are the free space,
 * so freeing needs no allocation and coalescing is implicit. A top block (a job's constants)
 * takes the end of the highest gap that fits it, the others the start of the lowest. An iteration takes one block
 * for all of its buffers, so there are at most as many blocks as workers, and a linear scan
 * is cheap.
 *
 * Lock order: only a->mu.
 */
#include "runtime/core/arena.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "runtime/base/fault.h"
#include "runtime/core/waitq.h"

struct gr_arena {
    pthread_mutex_t mu;
    uint64_t size;
    gr_arena_block *blocks; /* placed, sorted by offset */
    _Atomic uint64_t used;  /* written under mu; atomic for lock-free statistics */
    gr_waitq queue;
    bool shutdown;
};

uint64_t gr__arena_round(uint64_t bytes)
{
    if (bytes > UINT64_MAX - (GR_ARENA_ALIGN - 1))
        return UINT64_MAX;
    return (bytes + GR_ARENA_ALIGN - 1) / GR_ARENA_ALIGN * GR_ARENA_ALIGN;
}

/* First fit: link `blk` (size set) into the lowest gap that holds it, or for a top block
 * at the end of the highest one. Called with mu held; the grant function of the wait
 * queue. */
static bool try_place(void *owner, void *request)
{
    gr_arena *a = owner;
    gr_arena_block *blk = request;
    gr_arena_block **link = &a->blocks, **fit = NULL;
    uint64_t start = 0, fit_start = 0, fit_end = 0;

    for (;;) {
        gr_arena_block *next = *link;
        uint64_t end = next ? next->offset : a->size;

        if (end - start >= blk->size) {
            fit = link;
            fit_start = start;
            fit_end = end;
            if (!blk->top)
                break;
        }
        if (next == NULL)
            break;
        start = next->offset + next->size;
        link = &next->next;
    }
    if (fit == NULL)
        return false;
    blk->offset = blk->top ? fit_end - blk->size : fit_start;
    blk->next = *fit;
    *fit = blk;
    atomic_store_explicit(&a->used,
                          atomic_load_explicit(&a->used, memory_order_relaxed) + blk->size,
                          memory_order_relaxed);
    return true;
}

gr_status gr__arena_create(uint64_t size, gr_arena **out)
{
    gr_arena *a;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    *out = NULL;
    size = size / GR_ARENA_ALIGN * GR_ARENA_ALIGN;
    if (size == 0)
        return GR_ERR_INVALID_ARGUMENT;
    a = gr__calloc(1, sizeof(*a));
    if (a == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        return GR_ERR_OUT_OF_MEMORY;
    }
    a->size = size;
    gr__waitq_init(&a->queue, try_place, a);
    *out = a;
    return GR_OK;
}

void gr__arena_destroy(gr_arena *a)
{
    if (a == NULL)
        return;
    pthread_mutex_destroy(&a->mu);
    free(a);
}

uint64_t gr__arena_size(const gr_arena *a)
{
    return a->size;
}

/* The block's rounded size, refused at once when it cannot be placed at all. */
static gr_status size_block(const gr_arena *a, uint64_t bytes, gr_arena_block *blk)
{
    if (bytes == 0 || blk == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    blk->size = gr__arena_round(bytes);
    blk->next = NULL;
    blk->top = false;
    return blk->size > a->size ? GR_ERR_OVER_BUDGET : GR_OK;
}

/* Both ways of placing a sized block: with `wait`, sleeping FIFO until a gap fits it;
 * without, only where it fits now with nobody queued ahead (GR_ERR_TIMEOUT otherwise). */
static gr_status place(gr_arena *a, gr_arena_block *blk, bool wait, int64_t deadline_ns,
                       const gr_cancel_flag *cancel)
{
    gr_status st;

    pthread_mutex_lock(&a->mu);
    if (a->shutdown)
        st = GR_ERR_SHUTDOWN;
    else if (cancel != NULL && atomic_load_explicit(cancel, memory_order_acquire) != 0)
        st = (gr_status)atomic_load_explicit(cancel, memory_order_acquire);
    else if (a->queue.head == NULL && try_place(a, blk))
        st = GR_OK;
    else if (!wait)
        st = GR_ERR_TIMEOUT;
    else
        st = gr__waitq_wait(&a->queue, &a->mu, blk, deadline_ns, cancel, &a->shutdown);
    pthread_mutex_unlock(&a->mu);
    return st;
}

gr_status gr__arena_alloc(gr_arena *a, uint64_t bytes, int64_t deadline_ns,
                          const gr_cancel_flag *cancel, gr_arena_block *blk)
{
    gr_status st = size_block(a, bytes, blk);

    if (st != GR_OK)
        return st;
    if (gr__fault_hit(GR_FAULT_ARENA))
        return GR_ERR_OUT_OF_MEMORY;
    return place(a, blk, true, deadline_ns, cancel);
}

gr_status gr__arena_alloc_top(gr_arena *a, uint64_t bytes, int64_t deadline_ns,
                              const gr_cancel_flag *cancel, gr_arena_block *blk)
{
    gr_status st = size_block(a, bytes, blk);

    if (st != GR_OK)
        return st;
    blk->top = true;
    if (gr__fault_hit(GR_FAULT_ARENA))
        return GR_ERR_OUT_OF_MEMORY;
    return place(a, blk, true, deadline_ns, cancel);
}

gr_status gr__arena_try_alloc(gr_arena *a, uint64_t bytes, gr_arena_block *blk)
{
    gr_status st = size_block(a, bytes, blk);

    if (st == GR_OK)
        st = place(a, blk, false, GR_NO_DEADLINE, NULL);
    if (st != GR_OK)
        return st;
    /* The fault site is asked only for a block placed here: a request that would wait,
     * and then goes through gr__arena_alloc (which asks it first), counts once, not twice. */
    if (gr__fault_hit(GR_FAULT_ARENA)) {
        gr__arena_free(a, blk);
        return GR_ERR_OUT_OF_MEMORY;
    }
    return GR_OK;
}

void gr__arena_free(gr_arena *a, gr_arena_block *blk)
{
    gr_arena_block **link;

    pthread_mutex_lock(&a->mu);
    for (link = &a->blocks; *link != NULL; link = &(*link)->next) {
        if (*link == blk) {
            *link = blk->next;
            atomic_store_explicit(&a->used,
                                  atomic_load_explicit(&a->used, memory_order_relaxed) -
                                      blk->size,
                                  memory_order_relaxed);
            break;
        }
    }
    blk->next = NULL;
    gr__waitq_grant_head(&a->queue);
    pthread_mutex_unlock(&a->mu);
}

void gr__arena_wake(gr_arena *a)
{
    pthread_mutex_lock(&a->mu);
    gr__waitq_signal_all(&a->queue);
    pthread_mutex_unlock(&a->mu);
}

void gr__arena_shutdown(gr_arena *a)
{
    pthread_mutex_lock(&a->mu);
    a->shutdown = true;
    gr__waitq_signal_all(&a->queue);
    pthread_mutex_unlock(&a->mu);
}

uint64_t gr__arena_used(const gr_arena *a)
{
    return atomic_load_explicit(&a->used, memory_order_relaxed);
}

uint32_t gr__arena_waiters(gr_arena *a)
{
    uint32_t n;

    pthread_mutex_lock(&a->mu);
    n = a->queue.count;
    pthread_mutex_unlock(&a->mu);
    return n;
}

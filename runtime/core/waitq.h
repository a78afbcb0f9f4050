/*
 * waitq.h - a FIFO queue of sleeping requests, shared by the budget and the arena.
 *
 * Each waiter lives on its own thread's stack with its own condition variable. The owner's
 * "grant" function decides whether the request at the head can be satisfied now and, if so,
 * does the accounting; the queue then unlinks the waiter and signals exactly that thread.
 * Strict FIFO: granting stops at the first request that cannot be satisfied, so no request
 * is overtaken by a later one. Every function here is called with the owner's mutex held.
 */
#ifndef GR_WAITQ_H
#define GR_WAITQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "runtime/base/sync.h"

typedef struct gr_waiter {
    struct gr_waiter *next, *prev;
    void *request; /* the owner's description of what is asked for */
    bool granted;
    pthread_cond_t cond;
} gr_waiter;

/* Returns true when `request` was satisfied (and accounted for) now. */
typedef bool (*gr_waitq_grant_fn)(void *owner, void *request);

typedef struct gr_waitq {
    gr_waiter *head, *tail;
    uint32_t count;
    gr_waitq_grant_fn grant;
    void *owner;
} gr_waitq;

void gr__waitq_init(gr_waitq *q, gr_waitq_grant_fn grant, void *owner);

/*
 * Queue `request` at the tail and sleep (releasing `mu` while asleep) until it is granted,
 * `*shutdown` becomes true, `*cancel` becomes nonzero, or the deadline passes. Returns
 * GR_OK when granted (a grant racing with the other outcomes wins), else GR_ERR_SHUTDOWN,
 * the cancel status, GR_ERR_TIMEOUT, or GR_ERR_OUT_OF_MEMORY if no condition variable could
 * be made. A request that gives up leaves the queue and lets the ones behind it be granted.
 */
gr_status gr__waitq_wait(gr_waitq *q, pthread_mutex_t *mu, void *request, int64_t deadline_ns,
                         const gr_cancel_flag *cancel, const bool *shutdown);

/* Grant from the head while the grant function succeeds. */
void gr__waitq_grant_head(gr_waitq *q);

/* Wake every waiter to re-check its cancel flag and the shutdown flag. */
void gr__waitq_signal_all(gr_waitq *q);

#endif /* GR_WAITQ_H */

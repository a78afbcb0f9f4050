/*
 * waitq.c - FIFO wait queue (see waitq.h).
 *
 * The granter unlinks a waiter and marks it granted before signaling it, all under the
 * owner's mutex, so a grant is applied exactly once and never lost: the waiter checks
 * `granted` first whenever it wakes, before any reason to give up.
 */
#include "runtime/core/waitq.h"

#include "runtime/base/sync.h"

void gr__waitq_init(gr_waitq *q, gr_waitq_grant_fn grant, void *owner)
{
    q->head = q->tail = NULL;
    q->count = 0;
    q->grant = grant;
    q->owner = owner;
}

static void unlink_waiter(gr_waitq *q, gr_waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->next = w->prev = NULL;
    q->count--;
}

void gr__waitq_grant_head(gr_waitq *q)
{
    gr_waiter *w;

    while ((w = q->head) != NULL && q->grant(q->owner, w->request)) {
        unlink_waiter(q, w);
        w->granted = true;
        pthread_cond_signal(&w->cond);
    }
}

void gr__waitq_signal_all(gr_waitq *q)
{
    for (gr_waiter *w = q->head; w != NULL; w = w->next)
        pthread_cond_signal(&w->cond);
}

gr_status gr__waitq_wait(gr_waitq *q, pthread_mutex_t *mu, void *request, int64_t deadline_ns,
                         const gr_cancel_flag *cancel, const bool *shutdown)
{
    gr_status st = GR_OK;
    bool timed_out = false;
    gr_waiter w;
    int why;

    if (gr__cond_init(&w.cond) != 0)
        return GR_ERR_OUT_OF_MEMORY;
    w.request = request;
    w.granted = false;
    w.next = NULL;
    w.prev = q->tail;
    if (q->tail)
        q->tail->next = &w;
    else
        q->head = &w;
    q->tail = &w;
    q->count++;

    for (;;) {
        if (w.granted)
            break;
        if (*shutdown) {
            st = GR_ERR_SHUTDOWN;
            break;
        }
        why = cancel ? atomic_load_explicit(cancel, memory_order_acquire) : 0;
        if (why != 0) {
            st = (gr_status)why;
            break;
        }
        if (timed_out) {
            st = GR_ERR_TIMEOUT;
            break;
        }
        timed_out = gr__cond_wait_until(&w.cond, mu, deadline_ns);
    }
    if (st != GR_OK) {
        unlink_waiter(q, &w);
        gr__waitq_grant_head(q);
    }
    pthread_cond_destroy(&w.cond);
    return st;
}

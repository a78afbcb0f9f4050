/*
 * ring.h - the task ring: a bounded lock-free MPMC queue of (job, index) tasks, with
 * sleeping on both ends.
 *
 * The fast path of push and pop is Concurrency Kit's ck_ring (lock-free, no syscalls).
 * Only a producer that finds the ring full, or a consumer that finds it empty, takes the
 * ring's mutex and sleeps on a condition variable; the other side wakes it. Every sleeping
 * call has a deadline, a cancellation flag (producers) and the shutdown path.
 */
#ifndef GR_RING_H
#define GR_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "runtime/base/sync.h"

struct gr_job;

/* One unit of work: iteration `index` of `job`. */
typedef struct gr_task {
    struct gr_job *job;
    uint64_t index;
} gr_task;

typedef struct gr_ring gr_ring;

/* A ring of `capacity` slots (a power of two, at least 2), holding up to capacity - 1
 * tasks. Returns GR_ERR_INVALID_ARGUMENT for other capacities. */
gr_status gr__ring_create(uint32_t capacity, gr_ring **out);

/* Only when no thread uses the ring any more. NULL is a no-op. */
void gr__ring_destroy(gr_ring *r);

/*
 * Push one task, sleeping while the ring is full. Once it has found the ring full it is
 * woken only when a pop leaves the ring at most half full (ring.c), so it may sleep beside
 * free slots while consumers stop popping with more than half the ring left: it relies on
 * consumers that go on popping while tasks are left, as the workers do. Any thread. Returns
 * GR_OK, GR_ERR_TIMEOUT (deadline passed), the flag's status once *cancel is nonzero (cancel
 * may be NULL), or GR_ERR_SHUTDOWN. Whoever sets a cancel flag calls gr__ring_wake_producers
 * afterwards.
 */
gr_status gr__ring_push(gr_ring *r, const gr_task *t, int64_t deadline_ns,
                        const gr_cancel_flag *cancel);

/*
 * Pop one task, sleeping while the ring is empty. Any thread. After shutdown, tasks still
 * in the ring are returned until it is empty, then GR_ERR_SHUTDOWN. GR_ERR_TIMEOUT when the
 * deadline passes first. A task is popped at most once. A push that races with shutdown may
 * land after every consumer has seen GR_ERR_SHUTDOWN: once its producers have returned, the
 * owner empties the ring with gr__ring_try_pop so that every task is popped exactly once.
 */
gr_status gr__ring_pop(gr_ring *r, gr_task *out, int64_t deadline_ns);

/* Non-sleeping variants. Any thread. */
bool gr__ring_try_push(gr_ring *r, const gr_task *t);
bool gr__ring_try_pop(gr_ring *r, gr_task *out);

/* Wake sleeping producers so they re-check their cancel flags. Any thread. */
void gr__ring_wake_producers(gr_ring *r);

/* Refuse further pushes and wake every sleeper. Idempotent. Any thread. */
void gr__ring_shutdown(gr_ring *r);

/* Tasks in the ring now (a snapshot). */
uint32_t gr__ring_count(gr_ring *r);
/* Producers asleep (or about to sleep) on a full ring now (a snapshot; for tests). */
uint32_t gr__ring_producers_waiting(gr_ring *r);
uint32_t gr__ring_capacity(const gr_ring *r);

#endif /* GR_RING_H */

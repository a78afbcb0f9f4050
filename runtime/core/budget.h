/*
 * budget.h - the device-memory budget: a counting semaphore in bytes, one per device.
 *
 * Guarantees:
 *   - bytes granted and not yet released never exceed the capacity, at any instant;
 *   - grants are FIFO: a request is never overtaken by a later one, so a large request
 *     waits only for the holders ahead of it, never behind an endless flood of small ones;
 *   - a request larger than the whole capacity is refused at once (GR_ERR_OVER_BUDGET);
 *   - every wait ends on its deadline, on its cancel flag, or on shutdown.
 */
#ifndef GR_BUDGET_H
#define GR_BUDGET_H

#include <stdint.h>

#include <graphrun.h>
#include "runtime/base/sync.h"

typedef struct gr_budget gr_budget;

/* capacity > 0. */
gr_status gr__budget_create(uint64_t capacity, gr_budget **out);

/* Only when no thread waits or holds bytes. NULL is a no-op. */
void gr__budget_destroy(gr_budget *b);

/*
 * Take `bytes` (> 0), sleeping FIFO until they fit. Any thread. Returns GR_OK (the bytes are
 * held until gr__budget_release), GR_ERR_INVALID_ARGUMENT (0 bytes), GR_ERR_OVER_BUDGET (more
 * than the capacity; at once), GR_ERR_TIMEOUT, the cancel flag's status, or GR_ERR_SHUTDOWN.
 * A grant that races with a timeout or cancel wins: GR_OK is returned and must be released.
 */
gr_status gr__budget_acquire(gr_budget *b, uint64_t bytes, int64_t deadline_ns,
                             const gr_cancel_flag *cancel);

/* Take `bytes` only if that needs no wait: nobody queued ahead and they fit now. GR_OK (held
 * as from gr__budget_acquire), GR_ERR_TIMEOUT (it would wait: nothing taken), or what
 * gr__budget_acquire returns at once for 0 bytes, over the capacity or after shutdown (no
 * cancel flag is asked: the caller checks its own). For a holder
 * that must not sleep while it holds bytes others may wait for (worker.c's second unit). */
gr_status gr__budget_try_acquire(gr_budget *b, uint64_t bytes);

/* Give back bytes from a successful acquire, and grant waiters that now fit. Any thread. */
void gr__budget_release(gr_budget *b, uint64_t bytes);

/* Wake every waiter to re-check its cancel flag (call after setting one). Any thread. */
void gr__budget_wake(gr_budget *b);

/* Fail every current and future acquire with GR_ERR_SHUTDOWN. Releases still work. */
void gr__budget_shutdown(gr_budget *b);

uint64_t gr__budget_capacity(const gr_budget *b);
uint64_t gr__budget_in_use(const gr_budget *b); /* snapshot */
uint64_t gr__budget_peak(const gr_budget *b);   /* high-water mark since create */
uint32_t gr__budget_waiters(gr_budget *b);      /* requests queued now */

#endif /* GR_BUDGET_H */

/*
 * arena.h - the device arena: placement of iteration blocks inside one region per device.
 *
 * The backend reserves one region of the budget's size per device at start-up; the arena
 * hands out offsets into it and never touches the memory itself, so it works the same for
 * device memory and for the host backend, and nothing allocates memory on the per-tensor
 * path. Sizes are rounded up to the arena's alignment, and the budget counts those rounded
 * sizes, so the budget is the memory really held.
 *
 * A request whose bytes the budget granted may still find no contiguous gap (fragmentation).
 * It then sleeps in FIFO order until frees make room, instead of failing. This cannot
 * deadlock: holders of placed blocks never wait for anything before freeing them, and
 * requests behind the head are not placed before it, so once the blocks placed before the
 * head are freed the region is empty and the head (at most the region's size) fits. The one
 * long-lived block, a job's constants (constants.h: at most one job's on a device), sits at
 * the region's end (gr__arena_alloc_top), and the blocks of that job's units are sized to fit
 * the rest, which is then one gap; any other request waits for it to be evicted.
 */
#ifndef GR_ARENA_H
#define GR_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "runtime/base/sync.h"

/* Alignment and size granule of every block (see GR_BUFFER_ALIGN). */
#define GR_ARENA_ALIGN GR_BUFFER_ALIGN

/* A placed block. The caller owns the storage (it lives in the worker) from alloc to free;
 * the arena links it into its list of placed blocks. */
typedef struct gr_arena_block {
    struct gr_arena_block *next;
    uint64_t offset;
    uint64_t size; /* rounded */
    bool top;      /* placed at the highest offset where it fits (gr__arena_alloc_top) */
} gr_arena_block;

typedef struct gr_arena gr_arena;

/* An arena over `size` bytes (rounded down to GR_ARENA_ALIGN; must leave at least one). */
gr_status gr__arena_create(uint64_t size, gr_arena **out);

/* Only when no block is placed and no thread waits. NULL is a no-op. */
void gr__arena_destroy(gr_arena *a);

/* Usable size of the region: a multiple of GR_ARENA_ALIGN. */
uint64_t gr__arena_size(const gr_arena *a);

/* `bytes` rounded up to GR_ARENA_ALIGN; UINT64_MAX on overflow. */
uint64_t gr__arena_round(uint64_t bytes);

/*
 * Place a block of `bytes` (rounded) at the lowest offset where it fits, sleeping FIFO while
 * no gap is large enough. Any thread. Returns GR_OK (blk->offset and blk->size set),
 * GR_ERR_INVALID_ARGUMENT (0 bytes), GR_ERR_OVER_BUDGET (larger than the region; at once),
 * GR_ERR_TIMEOUT, the cancel flag's status, or GR_ERR_SHUTDOWN; GR_ERR_OUT_OF_MEMORY only
 * when the fault plan fails the "arena" site (fault.h).
 */
gr_status gr__arena_alloc(gr_arena *a, uint64_t bytes, int64_t deadline_ns,
                          const gr_cancel_flag *cancel, gr_arena_block *blk);

/* Place a block only if that needs no wait (nobody queued ahead, a gap fits it now): GR_OK,
 * GR_ERR_TIMEOUT (it would wait: nothing placed), or what gr__arena_alloc returns at once.
 * The fault plan's "arena" site is asked only for a block it could place, so that a
 * request tried and then made with gr__arena_alloc counts once. */
gr_status gr__arena_try_alloc(gr_arena *a, uint64_t bytes, gr_arena_block *blk);

/* The same as gr__arena_alloc, but at the highest offset where the block fits: for a block
 * held long beside the short-lived ones (a job's constants, constants.h), which stays out
 * of the way at the region's end, so that the rest is one gap once the short-lived blocks
 * are freed. */
gr_status gr__arena_alloc_top(gr_arena *a, uint64_t bytes, int64_t deadline_ns,
                              const gr_cancel_flag *cancel, gr_arena_block *blk);

/* Free a placed block and place waiters that now fit. Any thread. */
void gr__arena_free(gr_arena *a, gr_arena_block *blk);

/* Wake every waiter to re-check its cancel flag. Any thread. */
void gr__arena_wake(gr_arena *a);

/* Fail every current and future alloc with GR_ERR_SHUTDOWN. Frees still work. */
void gr__arena_shutdown(gr_arena *a);

uint64_t gr__arena_used(const gr_arena *a); /* bytes placed now (snapshot) */
uint32_t gr__arena_waiters(gr_arena *a);    /* requests waiting now */

#endif /* GR_ARENA_H */

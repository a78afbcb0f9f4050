/*
 * hostpool.h - small host allocations carved from a few large ones, for gr_host_alloc.
 *
 * Why: cudaMemcpyBatchAsync pays, for each range it copies, the driver's lookup of the
 * allocation the range lies in, and that lookup costs more the more allocations the process
 * holds: separate 64 KiB tensors, one driver allocation each, go at 0.514 of the link on
 * the H200 where the pool's go at 0.725, and the same tensors apart in one allocation at
 * 0.858 (docs/PERFORMANCE.md, "Defaults"). So gr_host_alloc serves requests of at most
 * GR_HOST_POOL_MAX bytes from slabs of pinned memory (the same provider, portable, as a
 * direct allocation), a whole number of 4096-byte pages each, with no header: a 64 KiB
 * request takes 16 pages.
 *
 * Slabs grow from GR_HOST_POOL_FIRST_SLAB to GR_HOST_POOL_SLAB bytes as the pool fills, so a
 * process that asks for a few small blocks pins little; one that held many keeps a slab
 * pinned while any block of it lives, up to 64 MiB for one small block. A slab whose blocks
 * are all freed goes back to the system unless it is the only empty one (kept against
 * alloc/free cycles).
 * Slabs are made and released outside the pool's lock (a pinned allocation can take
 * milliseconds). Under AddressSanitizer free pages are poisoned and every block is followed
 * by a poisoned page, so use after free and overflow into a neighbour are still reported.
 *
 * GR_HOST_POOL=0 in the environment (read once) turns the pool off: every gr_host_alloc is
 * then one allocation of its own, as before it existed (the bench compares both).
 */
#ifndef GR_RUNTIME_HOSTPOOL_H
#define GR_RUNTIME_HOSTPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "runtime/base/sanitizers.h"

#define GR_HOST_POOL_MAX (2ull << 20)          /* the largest request carved from a slab */
#define GR_HOST_POOL_FIRST_SLAB (4ull << 20)   /* the first slab's size; each next doubles */
#define GR_HOST_POOL_SLAB (64ull << 20)        /* up to this */
#define GR_HOST_POOL_PAGE 4096ull

/* Pages after each block that no block is given, poisoned: one under AddressSanitizer (so
 * that an overflow into the next block is still reported), else none. */
#ifdef GR_ASAN
#define GR_HOST_POOL_GUARD_PAGES 1u
#else
#define GR_HOST_POOL_GUARD_PAGES 0u
#endif

/* Whether the pool serves requests of `bytes` (on, and bytes <= GR_HOST_POOL_MAX). */
bool gr__host_pool_takes(uint64_t bytes);

/* `bytes` (1..GR_HOST_POOL_MAX) from a slab, page-aligned; slabs come from `pinned`
 * (posix_memalign when NULL). GR_ERR_OUT_OF_MEMORY when no slab can be had. Any thread. */
gr_status gr__host_pool_alloc(const gr_pinned_ops *pinned, uint64_t bytes, void **out);

/* If p lies in a slab: frees the block starting at p and returns true (nothing is freed
 * when p is no live block's start; a pointer freed twice may meanwhile be another block's,
 * as with free()). False when p is not the pool's. Any thread. */
bool gr__host_pool_free(void *p);

/* The calling thread has a CUDA context current that a runtime destroys (a worker's private
 * one): no slab is made on this thread from now on. Its requests carve slabs made on other
 * threads, else get an allocation of their own (which goes with that context: gr_host_alloc
 * in graphrun.h says so for completion callbacks). Destroying a context frees the pinned
 * memory made under it, and a slab is shared. The worker thread's own, for its life. */
void gr__host_pool_no_slabs_here(void);

/* gr_host_alloc's memory (hostmem.c) from `pinned` (NULL: ordinary memory), never carved
 * from a slab: for one long-lived buffer made on a worker's thread, its staging buffer,
 * through the worker's own backend (a host-backend runtime starts no CUDA for it). A slab
 * is made under the calling thread's CUDA context, and destroying a context frees the
 * pinned memory made under it (tools/bench/probes/graph_update_contexts.cu): a worker's private
 * context would take a slab that others share with it. Nor does one buffer gain from
 * sharing a slab. Freed with gr_host_free. Any thread. */
gr_status gr__host_alloc_unpooled(const gr_pinned_ops *pinned, uint64_t bytes, void **out);

typedef struct gr_host_pool_stats {
    uint64_t slabs;       /* slabs held */
    uint64_t slab_bytes;  /* their bytes (what the pool has pinned) */
    uint64_t blocks;      /* blocks given out and not freed */
    uint64_t block_bytes; /* their pages' bytes */
} gr_host_pool_stats;

/* A consistent snapshot (for tests and diagnostics). Any thread. */
gr_host_pool_stats gr__host_pool_stats(void);

#endif

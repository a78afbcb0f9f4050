/*
 * hostcache.h - the registration cache (graphrun.h: gr_config.host_cache_bytes): pageable
 * host ranges that jobs use are page-locked in place (the pinned provider's pin, i.e.
 * cudaHostRegister) by a background thread and kept, so that the next job over the same
 * memory copies it by DMA at the link's speed instead of staging it through the CPU.
 *
 * When: registering costs about as long as staging the range once (cudaHostRegister of 400
 * MB takes 23 ms on an H200, 17 GB/s), and while the driver registers, other threads' calls
 * into it wait: tools/bench/probes/register_stall.cu measures a copy submission blocked for the
 * whole of a registration beside it, and DMA copies beside registrations at 0.6 of their
 * speed alone. So a range first seen by a job is queued, and registered by a background
 * thread only while no job of the runtime is live (between jobs): a job that runs once is
 * never slowed. A range that a later job uses again while it is still queued or being
 * registered (jobs back to back, no idle moment) is evidently used again: that job's
 * submission waits until it is registered (up to the job's deadline), then runs it by DMA.
 * Waiting costs the registration's time, about one staged pass; registering beside the job
 * instead would leave that job staged and stalled both.
 *
 * What it guarantees: a range is never unregistered while a job that could copy it by DMA
 * is live. Every job holds (gr__host_cache_hold) each cache entry that its port ranges lie
 * in, create or overlap, from submission until its last index has ended
 * (gr__host_cache_release);
 * eviction (least recently used, to stay within the capacity) and gr_host_forget take only
 * entries no job holds. And a range is DMA-ready for a job only when it lies whole inside
 * one entry that was registered when the job took its hold (gr__host_cache_ready): a view
 * that starts in a registered range and runs past it is staged, never handed to the DMA
 * engine half pinned, and a range registered while the job runs waits for the next job.
 *
 * What the caller must promise (graphrun.h says it too): memory a job used stays mapped
 * until gr_host_forget has returned for it or the runtime is destroyed; freeing it before
 * then would leave the device reading the old pages through a stale registration.
 *
 * Entries are the page-rounded ranges of port buffers of at least GR_HOST_CACHE_MIN_BYTES,
 * kept disjoint, in one array sorted by address under one mutex. A range that overlaps
 * entries it is not inside (arrays back to back on the heap share a page) becomes one entry
 * with them while only its job knows them (not registered, not queued or held by another
 * job); otherwise it is left alone, staged. In the array, lookups are a binary search, and the number of
 * entries is small (the capacity over the minimum size at most).
 */
#ifndef GR_HOSTCACHE_H
#define GR_HOSTCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include <graphrun.h>

/* Smaller port ranges are not registered: the per-call cost of registering dominates, and
 * small tensors are batched anyway. */
#define GR_HOST_CACHE_MIN_BYTES (1ull << 20)

typedef struct gr_host_cache gr_host_cache;

/* How ranges are pinned: the machine's pinned memory provider, or a test's. */
typedef struct gr_host_cache_ops {
    gr_status (*pin)(void *p, uint64_t bytes);
    gr_status (*unpin)(void *p);
    /* Whether memory at p is page-locked already (outside the cache: the caller's own). */
    bool (*dma_ready)(const void *p);
} gr_host_cache_ops;

/* Tests and `graphrun stress`: make a runtime created from now on, on a backend without
 * pinned memory (the host backend, whose copies are memcpy whatever the memory), give
 * gr_config.host_cache_bytes a cache whose pins and unpins are `ops`'s, so that holds,
 * registrations, hits, evictions and gr_host_forget run beside real jobs without a GPU.
 * NULL (the default): such a backend has no cache. `ops` must outlive every runtime
 * created with it. Process-wide; any thread. */
void gr__host_cache_emulate(const gr_host_cache_ops *ops);

/* The counters behind gr_stats' host_cache_* fields. */
typedef struct gr_host_cache_stats {
    uint64_t registered_bytes; /* page-locked by the cache now */
    uint64_t registrations, evictions, failures, hits;
    uint64_t register_ns; /* time spent registering, in all */
    uint64_t merges;      /* entries merged into a range that overlapped them */
} gr_host_cache_stats;

/* A job's hold: the entries it keeps from eviction. */
typedef struct gr_host_hold {
    struct gr_host_entry **v;
    uint64_t n, cap;
    bool live; /* counted among the cache's live jobs */
    uint64_t id; /* the cache's number for this hold, never reused (a hold's address is) */
    /* The held entries that were registered when the job was submitted, as [lo, hi)
     * ranges sorted by address: all the job may copy by DMA of what the cache knows (one
     * registered later is not the job's to use: its plan was made without it, and a
     * lookup of the driver's between the two would disagree with the plan). */
    uintptr_t (*ready)[2];
    uint64_t n_ready;
} gr_host_hold;

/* A cache of at most `capacity` page-locked bytes (> 0). The thread starts on first use. */
gr_status gr__host_cache_create(uint64_t capacity, const gr_host_cache_ops *ops,
                                gr_host_cache **out);

/* Stop registering and unregister everything, whoever holds it: the caller guarantees no
 * copy runs any more (the workers are joined). Holds and releases stay valid. Idempotent. */
void gr__host_cache_close(gr_host_cache *c);

/* Close, then free. NULL is a no-op. */
void gr__host_cache_free(gr_host_cache *c);

/* Hold every entry the port ranges of `t[0 .. count)` lie in, creating (and queueing for
 * registration, capacity allowing) entries for those not in the cache yet. Entries queued
 * by an earlier job, or being registered, are waited for until registered (or until
 * `wait_until_ns`, a gr_now_ns deadline; GR_NO_DEADLINE: no limit), so the job finds them
 * ready. Cheap for ranges below GR_HOST_CACHE_MIN_BYTES (skipped). GR_ERR_OUT_OF_MEMORY
 * leaves nothing held. */
gr_status gr__host_cache_hold(gr_host_cache *c, const gr_graph *g, const gr_tensor *t,
                              uint64_t count, int64_t wait_until_ns, gr_host_hold *out);

/* Give back a hold (every index of its job has ended). With `discard` (the job was never
 * accepted: its memory was not the runtime's to keep), entries left queued and held by no
 * one are dropped rather than registered later. */
void gr__host_cache_release(gr_host_cache *c, gr_host_hold *h, bool discard);

/* Where [p, p + bytes) lies for the job holding `hold`, so that the planner puts in one
 * batch only ranges that the DMA engine may take alike: GR_HOST_OUTSIDE (in no entry: its
 * owner's memory, as the driver says), GR_HOST_HELD (inside one entry the job holds
 * registered; *key is that entry's base) or GR_HOST_OTHER (anything else: to be staged).
 * Any thread. */
enum { GR_HOST_OUTSIDE, GR_HOST_HELD, GR_HOST_OTHER };
int gr__host_cache_class(gr_host_cache *c, const gr_host_hold *hold, const void *p,
                         uint64_t bytes, uintptr_t *key);

/* Changes each time the cache registers or unregisters a range: a CUDA graph lowered over
 * host memory under an older value is lowered again (the driver's view of that memory may
 * have changed under it). Any thread. */
uint64_t gr__host_cache_epoch(const gr_host_cache *c);

/* Whether [p, p + bytes) can be copied by DMA as it lies for the job holding `hold` (NULL:
 * none): inside one entry registered in its hold, or (outside every entry) page-locked by
 * its owner as ops->dma_ready says. Any thread. */
bool gr__host_cache_ready(gr_host_cache *c, const gr_host_hold *hold, const void *p,
                          uint64_t bytes);

/* Unregister and drop every entry overlapping [p, p + bytes), waiting for one being
 * registered. GR_ERR_INVALID_USAGE (nothing changed) when a live job holds one of them. */
gr_status gr__host_cache_forget(gr_host_cache *c, const void *p, uint64_t bytes,
                                gr_error_info *err);

/* Wait until no registration runs or could start now (queued ones may wait for the live
 * jobs to end). Tests. */
void gr__host_cache_settle(gr_host_cache *c);

void gr__host_cache_stats_get(gr_host_cache *c, gr_host_cache_stats *out);

#endif /* GR_HOSTCACHE_H */

/*
 * copier.h - a pool of threads for large host memory copies: gathering tensors into pinned
 * staging buffers and scattering results back, at the speed of the host's memory rather
 * than of one core.
 */
#ifndef GR_COPIER_H
#define GR_COPIER_H

#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>

/* One host copy: the pool's unit of work, and one of a scattered unit's copies that a
 * backend does itself (graph.h: gr_iteration.h2d). */
typedef struct gr_copy {
    void *dst;
    const void *src;
    uint64_t bytes;
} gr_copy;

typedef struct gr_copier gr_copier;

/* A pool of `threads` helper threads (0: the calling threads copy alone). */
gr_status gr__copier_create(unsigned threads, gr_copier **out);

/* Joins the threads. Only when no copy is in progress. NULL is a no-op. */
void gr__copier_destroy(gr_copier *c);

/*
 * Do every copy of `ops`, in pieces of about a megabyte (a large copy cut up, small ones
 * grouped) so that the pool's threads and the caller share the work; returns when all are
 * done. `ends` is the caller's scratch space of n entries (the copies' end offsets in the
 * stream of all their bytes, so pieces are found by binary search). Any thread; concurrent
 * calls share the pool fairly (oldest first). The caller always works too, so a call
 * completes even if every helper is busy elsewhere.
 */
void gr__copier_copy(gr_copier *c, const gr_copy *ops, size_t n, uint64_t *ends);

#endif /* GR_COPIER_H */

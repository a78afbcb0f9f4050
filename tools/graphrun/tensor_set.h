/*
 * tensor_set.h - a set of same-size synthetic seed-workload tensors, processed in place:
 * allocation in the chosen kind of host memory, parallel fill, parallel bit-exact check.
 * Shared by `graphrun demo`, `graphrun bench` and the GPU tests.
 */
#ifndef GR_TENSOR_SET_H
#define GR_TENSOR_SET_H

#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/hostbuf.h"

typedef struct gr_tensor_set {
    uint64_t count, elems, seed;
    gr_mem_kind kind;   /* as asked for; pinned memory that could not be had is pageable */
    float **data;
    gr_tensor *tensors; /* in place: in[0] == out[0] == data[i] */
    float *slab;        /* the one allocation of a contiguous or pooled set, else NULL */
} gr_tensor_set;

/* Allocate `count` tensors of `elems` floats, each its own allocation; GR_ERR_OUT_OF_MEMORY
 * (nothing left allocated) when the host cannot provide them. */
gr_status gr_tensor_set_alloc(gr_tensor_set *s, uint64_t count, uint64_t elems,
                              gr_mem_kind kind, uint64_t seed);

/* The same, all in one allocation, back to back (rows of one array). */
gr_status gr_tensor_set_alloc_contiguous(gr_tensor_set *s, uint64_t count, uint64_t elems,
                                         gr_mem_kind kind, uint64_t seed);

/* The same, all in one allocation, each tensor starting a whole number of pages after the
 * previous one's start with at least a page (4096 bytes) between it and the next: apart, as
 * separate allocations are, but in one pinned region, as tensors from a pooled allocator
 * (PyTorch's pinned caching allocator) are. Measures what the driver's
 * per-allocation lookups cost a batch of separate tensors. */
#define GR_TENSOR_SET_POOL_GAP 4096u
gr_status gr_tensor_set_alloc_pooled(gr_tensor_set *s, uint64_t count, uint64_t elems,
                                     gr_mem_kind kind, uint64_t seed);

/* Fill every tensor with its synthetic input, on all CPUs. */
void gr_tensor_set_fill(gr_tensor_set *s);

/* Check every tensor against the seed reference, bit for bit, on all CPUs. Returns how many
 * tensors are wrong; *first_bad (optional) is the lowest wrong index. Prints one line per
 * wrong tensor to stderr. */
uint64_t gr_tensor_set_check(const gr_tensor_set *s, uint64_t *first_bad);

void gr_tensor_set_free(gr_tensor_set *s);

#endif /* GR_TENSOR_SET_H */

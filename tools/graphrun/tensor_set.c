/*
 * tensor_set.c - synthetic tensor sets (see tensor_set.h).
 *
 * Fill and check are split into work items of CHUNK elements so that a few large tensors
 * still use every CPU.
 */
#include "tools/graphrun/tensor_set.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/graphrun/cli.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/workload.h"

#define CHUNK (1ull << 20)

/* The set's description and its two arrays, not yet the tensors' memory. False when the
 * arrays cannot be had. */
static bool set_begin(gr_tensor_set *s, uint64_t count, uint64_t elems, gr_mem_kind kind,
                      uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    s->count = count;
    s->elems = elems;
    s->seed = seed;
    s->kind = kind;
    s->data = calloc(count, sizeof(*s->data));
    s->tensors = calloc(count, sizeof(*s->tensors));
    return s->data != NULL && s->tensors != NULL;
}

/* The set in one allocation, tensor i at i * stride bytes from its start. */
static gr_status alloc_in_one(gr_tensor_set *s, uint64_t count, uint64_t elems,
                              gr_mem_kind kind, uint64_t seed, uint64_t stride)
{
    if (set_begin(s, count, elems, kind, seed))
        s->slab = gr_hostbuf_alloc(kind, count * stride);
    if (s->slab == NULL) {
        gr_tensor_set_free(s);
        return GR_ERR_OUT_OF_MEMORY;
    }
    for (uint64_t i = 0; i < count; i++) {
        s->data[i] = (float *)((unsigned char *)s->slab + i * stride);
        s->tensors[i].in[0] = s->tensors[i].out[0] = s->data[i];
        s->tensors[i].elems = elems;
    }
    return GR_OK;
}

gr_status gr_tensor_set_alloc_contiguous(gr_tensor_set *s, uint64_t count, uint64_t elems,
                                         gr_mem_kind kind, uint64_t seed)
{
    return alloc_in_one(s, count, elems, kind, seed, elems * sizeof(float));
}

gr_status gr_tensor_set_alloc_pooled(gr_tensor_set *s, uint64_t count, uint64_t elems,
                                     gr_mem_kind kind, uint64_t seed)
{
    uint64_t pages = (elems * sizeof(float) + GR_TENSOR_SET_POOL_GAP - 1) /
                     GR_TENSOR_SET_POOL_GAP;

    return alloc_in_one(s, count, elems, kind, seed, (pages + 1) * GR_TENSOR_SET_POOL_GAP);
}

gr_status gr_tensor_set_alloc(gr_tensor_set *s, uint64_t count, uint64_t elems,
                              gr_mem_kind kind, uint64_t seed)
{
    uint64_t bytes = elems * sizeof(float);

    if (!set_begin(s, count, elems, kind, seed))
        goto out_nomem;
    for (uint64_t i = 0; i < count; i++) {
        if (kind == GR_MEM_HOSTALLOC) {
            if (gr_cuda_host_alloc(bytes, (void **)&s->data[i]) != GR_OK)
                goto out_nomem;
        } else if ((s->data[i] = gr_hostbuf_alloc(kind, bytes)) == NULL) {
            goto out_nomem;
        }
        s->tensors[i].in[0] = s->tensors[i].out[0] = s->data[i];
        s->tensors[i].elems = elems;
    }
    return GR_OK;

out_nomem:
    gr_tensor_set_free(s);
    return GR_ERR_OUT_OF_MEMORY;
}

void gr_tensor_set_free(gr_tensor_set *s)
{
    if (s->slab != NULL)
        gr_hostbuf_free(s->slab);
    for (uint64_t i = 0; s->slab == NULL && s->data != NULL && i < s->count; i++) {
        if (s->kind == GR_MEM_HOSTALLOC)
            gr_cuda_host_free(s->data[i]);
        else
            gr_hostbuf_free(s->data[i]);
    }
    free(s->data);
    free(s->tensors);
    s->data = NULL;
    s->tensors = NULL;
    s->slab = NULL;
}

typedef struct work {
    const gr_tensor_set *s;
    uint64_t per_tensor;
    _Atomic uint64_t *bad; /* wrong elements per tensor */
} work;

static void item_range(const work *w, uint64_t item, uint64_t *t, uint64_t *first, uint64_t *n)
{
    *t = item / w->per_tensor;
    *first = (item % w->per_tensor) * CHUNK;
    *n = w->s->elems - *first < CHUNK ? w->s->elems - *first : CHUNK;
}

static void fill_item(uint64_t item, void *arg)
{
    work *w = arg;
    uint64_t t, first, n;

    item_range(w, item, &t, &first, &n);
    gr_workload_fill(w->s->data[t] + first, first, n, w->s->seed, t);
}

static void check_item(uint64_t item, void *arg)
{
    work *w = arg;
    uint64_t t, first, n, bad;

    item_range(w, item, &t, &first, &n);
    bad = gr_workload_check_seed(w->s->data[t] + first, first, n, w->s->seed, t, NULL);
    if (bad)
        atomic_fetch_add(&w->bad[t], bad);
}

void gr_tensor_set_fill(gr_tensor_set *s)
{
    work w = {s, (s->elems + CHUNK - 1) / CHUNK, NULL};

    gr_cli_parallel_for(s->count * w.per_tensor, 0, fill_item, &w);
}

uint64_t gr_tensor_set_check(const gr_tensor_set *s, uint64_t *first_bad)
{
    work w = {s, (s->elems + CHUNK - 1) / CHUNK, calloc(s->count, sizeof(uint64_t))};
    uint64_t wrong = 0;

    if (first_bad)
        *first_bad = UINT64_MAX;
    if (w.bad == NULL)
        return s->count; /* cannot check: count everything as unverified */
    gr_cli_parallel_for(s->count * w.per_tensor, 0, check_item, &w);
    for (uint64_t t = 0; t < s->count; t++) {
        uint64_t bad = atomic_load(&w.bad[t]);

        if (bad == 0)
            continue;
        if (wrong++ == 0 && first_bad)
            *first_bad = t;
        fprintf(stderr, "MISMATCH: tensor %llu: %llu of %llu elements wrong\n",
                (unsigned long long)t, (unsigned long long)bad, (unsigned long long)s->elems);
    }
    free(w.bad);
    return wrong;
}

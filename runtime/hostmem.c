/*
 * hostmem.c - pinned host memory: allocation and registration (see graphrun.h), through
 * the first backend of the table (backends.c) that can pin memory on this machine; where
 * none can (no usable GPU), ordinary page-aligned memory, and registration does nothing.
 *
 * Requests of up to GR_HOST_POOL_MAX bytes are carved from slabs (hostpool.h: the driver's
 * batched copies cost less the fewer allocations there are), falling back to an allocation
 * of their own when no slab can be had; gr__host_alloc_unpooled (hostpool.h) never uses
 * them, for a worker's staging buffer. Any other gr_host_alloc gets a one-page header in
 * front recording who made it. So gr_host_free needs no runtime handle and works before,
 * during and after any runtime's life.
 */
#include <graphrun.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/base/fault.h"
#include "runtime/hostcache.h"
#include "runtime/hostpool.h"
#include "runtime/runtime.h"

#define HEADER 4096u
#define HEADER_MAGIC 0x67724d454d4f5259ull /* "grMEMORY" */

typedef struct header {
    uint64_t magic;
    uint64_t bytes;
    const gr_pinned_ops *pinned; /* who allocated it; NULL: posix_memalign */
} header;

static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static const gr_pinned_ops *pinner;

static void pick(void)
{
    for (const gr_backend_ops *const *b = gr__backends; *b != NULL; b++)
        if ((*b)->pinned != NULL && (*b)->pinned->available()) {
            pinner = (*b)->pinned;
            return;
        }
}

/* The pinned memory provider of this machine, or NULL. */
static const gr_pinned_ops *provider(void)
{
    pthread_once(&pick_once, pick);
    return pinner;
}

/* gr_host_alloc through `pinned` (NULL: ordinary memory), from the pool (`pooled`) or
 * always an allocation of its own. */
static gr_status host_alloc(const gr_pinned_ops *pinned, uint64_t bytes, void **out,
                            bool pooled)
{
    void *base = NULL;
    header *h;

    if (out == NULL || bytes == 0 || bytes > UINT64_MAX - HEADER)
        return GR_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (gr__fault_hit(GR_FAULT_PIN))
        return GR_ERR_OUT_OF_MEMORY;
    if (pooled && gr__host_pool_takes(bytes) && gr__host_pool_alloc(pinned, bytes, out) == GR_OK)
        return GR_OK;
    if (pinned != NULL) {
        if (pinned->alloc(bytes + HEADER, &base) != GR_OK)
            return GR_ERR_OUT_OF_MEMORY;
    } else if (posix_memalign(&base, HEADER, bytes + HEADER) != 0) {
        return GR_ERR_OUT_OF_MEMORY;
    }
    h = base;
    h->magic = HEADER_MAGIC;
    h->bytes = bytes;
    h->pinned = pinned;
    *out = (char *)base + HEADER;
    return GR_OK;
}

gr_status gr_host_alloc(uint64_t bytes, void **out)
{
    return host_alloc(provider(), bytes, out, true);
}

gr_status gr__host_alloc_unpooled(const gr_pinned_ops *pinned, uint64_t bytes, void **out)
{
    return host_alloc(pinned, bytes, out, false);
}

void gr_host_free(void *p)
{
    header *h;

    if (p == NULL || gr__host_pool_free(p))
        return;
    h = (header *)((char *)p - HEADER);
    if (h->magic != HEADER_MAGIC)
        return; /* not ours: leave it alone rather than corrupt the heap */
    h->magic = 0;
    if (h->pinned != NULL)
        h->pinned->free(h);
    else
        free(h);
}

gr_status gr_host_register(void *p, uint64_t bytes)
{
    const gr_pinned_ops *pinned;

    if (p == NULL || bytes == 0)
        return GR_ERR_INVALID_ARGUMENT;
    pinned = provider();
    return pinned != NULL ? pinned->pin(p, bytes) : GR_OK;
}

gr_status gr_host_unregister(void *p)
{
    const gr_pinned_ops *pinned;

    if (p == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    pinned = provider();
    return pinned != NULL ? pinned->unpin(p) : GR_OK;
}

gr_status gr_host_forget(gr_runtime *handle, const void *p, uint64_t bytes)
{
    gr_status st;
    gr_runtime *rt;

    if (p == NULL || bytes == 0)
        return GR_ERR_INVALID_ARGUMENT;
    /* A reference: a destroy racing on another thread frees nothing under this call. */
    if ((rt = gr__runtime_acquire(handle, &st)) == NULL)
        return st;
    st = gr__host_cache_forget(rt->host_cache, p, bytes, NULL);
    gr__runtime_unref(rt);
    return st;
}

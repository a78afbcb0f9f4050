/*
 * hostbuf.c - host buffers of a chosen kind (see hostbuf.h).
 *
 * Each buffer starts with a 64-byte header recording how it was made, so that freeing needs
 * nothing but the pointer and a buffer that fell back is freed the right way. The data after
 * it stays 64-byte aligned (every allocation here is at least page aligned).
 */
#include "tools/graphrun/hostbuf.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <graphrun.h>

#define HEADER 64u
#define PAGE 4096u

typedef struct header {
    void *base; /* what to free */
    uint64_t bytes;
    gr_mem_kind kind;
} header;

_Static_assert(sizeof(header) <= HEADER, "the header fits in front of the data");

static _Atomic uint64_t fallbacks;

const char *gr_mem_kind_name(gr_mem_kind k)
{
    switch (k) {
    case GR_MEM_PAGEABLE:
        return "pageable";
    case GR_MEM_PINNED:
        return "pinned";
    case GR_MEM_REGISTERED:
        return "registered";
    case GR_MEM_HOSTALLOC:
        return "hostalloc";
    }
    return "unknown";
}

static void warn_fallback(gr_mem_kind want, uint64_t bytes)
{
    struct rlimit lim;
    char limit[64] = "unknown";

    if (atomic_fetch_add(&fallbacks, 1) != 0)
        return;
    if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0) {
        if (lim.rlim_cur == RLIM_INFINITY)
            snprintf(limit, sizeof(limit), "unlimited");
        else
            snprintf(limit, sizeof(limit), "%llu bytes", (unsigned long long)lim.rlim_cur);
    }
    fprintf(stderr,
            "graphrun: warning: cannot get %llu bytes of %s host memory (RLIMIT_MEMLOCK: %s); "
            "using pageable memory instead, which the GPU reads more slowly (results are the "
            "same)\n",
            (unsigned long long)bytes, gr_mem_kind_name(want), limit);
}

void *gr_hostbuf_alloc(gr_mem_kind want, uint64_t bytes)
{
    gr_mem_kind kind = want;
    void *base = NULL;
    header *h;

    if (bytes == 0 || bytes > UINT64_MAX - HEADER)
        return NULL;
    if (want == GR_MEM_HOSTALLOC) /* tensor_set.c makes those itself: the header needs room */
        want = kind = GR_MEM_PINNED;
    if (want == GR_MEM_PINNED && gr_host_alloc(bytes + HEADER, &base) != GR_OK)
        base = NULL;
    if (want != GR_MEM_PINNED && posix_memalign(&base, PAGE, bytes + HEADER) != 0)
        return NULL;
    if (want == GR_MEM_REGISTERED && base != NULL &&
        gr_host_register(base, bytes + HEADER) != GR_OK) {
        free(base);
        base = NULL;
    }
    if (base == NULL) {
        if (posix_memalign(&base, PAGE, bytes + HEADER) != 0)
            return NULL;
        kind = GR_MEM_PAGEABLE;
        warn_fallback(want, bytes);
    }
    h = base;
    h->base = base;
    h->bytes = bytes + HEADER;
    h->kind = kind;
    return (char *)base + HEADER;
}

gr_mem_kind gr_hostbuf_kind(const void *p)
{
    return ((const header *)((const char *)p - HEADER))->kind;
}

uint64_t gr_hostbuf_fallbacks(void)
{
    return atomic_load(&fallbacks);
}

void gr_hostbuf_free(void *p)
{
    header *h;

    if (p == NULL)
        return;
    h = (header *)((char *)p - HEADER);
    switch (h->kind) {
    case GR_MEM_PINNED:
        gr_host_free(h->base);
        break;
    case GR_MEM_REGISTERED:
        gr_host_unregister(h->base);
        free(h->base);
        break;
    default:
        free(h->base);
        break;
    }
}

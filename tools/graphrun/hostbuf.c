/*
 * hostbuf.c - host buffers of a chosen kind (see hostbuf.h).
 *
 * Each buffer starts with a 64-byte header recording how it was made, so that freeing needs
 * nothing but the pointer and a buffer that fell back is freed the right way. The data after
 * it stays 64-byte aligned (every allocation here is at least page aligned).
 */
#define _GNU_SOURCE
#include "tools/graphrun/hostbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <graphrun.h>

#define HEADER 64u
#define PAGE 4096u
#define HUGE_PAGE (2u << 20)

typedef struct header {
    void *base; /* what to free */
    uint64_t bytes;
    gr_mem_kind kind;
    bool huge; /* base is a mapping of `bytes` whose data (after the header's page) is on
                  huge pages, registered */
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
    h->huge = false;
    return (char *)base + HEADER;
}

static pthread_once_t thp_once = PTHREAD_ONCE_INIT;
static bool thp_on_request;

static void thp_probe(void)
{
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

    if (f != NULL) {
        if (fgets(mode, sizeof(mode), f) == NULL)
            mode[0] = '\0';
        fclose(f);
    }
    thp_on_request = strstr(mode, "[always]") != NULL || strstr(mode, "[madvise]") != NULL;
}

/* Pinned memory on huge pages, or NULL (the caller then takes the ordinary way): a
 * mapping of one page for the header and then `bytes` in whole pages, starting on a 2 MiB
 * boundary so that each whole 2 MiB of it can be one huge page. Only the data is
 * registered, and no more of it than asked for to the page: the window counts what it
 * pins. MADV_DONTFORK keeps a child from sharing pages the device writes.
 * GR_TEST_HUGE_PAGES=0 takes the ordinary way; =refuse has the registration refused, as
 * a system that will not pin more would. */
static void *huge_alloc(uint64_t bytes)
{
    const char *test = getenv("GR_TEST_HUGE_PAGES");
    bool refuse = test != NULL && strcmp(test, "refuse") == 0;
    uint64_t need, map;
    uintptr_t at, lo, hi;
    char *p, *data;
    header *h;

    pthread_once(&thp_once, thp_probe);
    if (!thp_on_request || (test != NULL && strcmp(test, "0") == 0) ||
        bytes > UINT64_MAX - 2ull * HUGE_PAGE - PAGE)
        return NULL;
    need = (bytes + PAGE - 1) / PAGE * PAGE;
    map = PAGE + need + HUGE_PAGE;
    p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    at = (uintptr_t)p;
    data = (char *)((at + PAGE + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    lo = (uintptr_t)data - PAGE;
    hi = (uintptr_t)data + need;
    if (lo > at)
        munmap(p, lo - at);
    if (hi < at + map)
        munmap((void *)hi, at + map - hi);
    if (madvise(data, need, MADV_HUGEPAGE) != 0 ||
        madvise((void *)lo, hi - lo, MADV_DONTFORK) != 0 || refuse ||
        gr_host_register(data, need) != GR_OK) {
        munmap((void *)lo, hi - lo);
        return NULL;
    }
    h = (header *)(data - HEADER);
    h->base = (void *)lo;
    h->bytes = hi - lo;
    h->kind = GR_MEM_PINNED;
    h->huge = true;
    return data;
}

void *gr_hostbuf_alloc_large(gr_mem_kind want, uint64_t bytes)
{
    void *p = NULL;

    if (want == GR_MEM_PINNED && bytes != 0)
        p = huge_alloc(bytes);
    return p != NULL ? p : gr_hostbuf_alloc(want, bytes);
}

bool gr_hostbuf_huge(const void *p)
{
    return ((const header *)((const char *)p - HEADER))->huge;
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
    if (h->huge) {
        /* Unmapped even if the driver will not unregister (it then keeps its pages). */
        gr_host_unregister(p);
        munmap(h->base, h->bytes);
        return;
    }
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

/*
 * hostpool.c - small host allocations carved from slabs (see hostpool.h).
 *
 * Each slab keeps a bit per page (set: in a block) and, at each block's first page, the
 * block's length in pages; a search for free pages starts where the last block of that slab
 * ended (next fit), so blocks asked for one after another lie in order, and goes round once.
 * The slabs are kept sorted by address so that a free finds its slab by binary search.
 *
 * Correctness: every slab and every counter changes under `pool.lock` only, and a block is
 * handed out by one carve under it, so no two live blocks share a page. A slab's last page is
 * never given: two slabs may lie back to back in memory, and a block at the end of one and
 * another at the start of the next would look adjacent to the planner, which copies adjacent
 * tensors as one range; a range must not span two driver allocations.
 *
 * fork(): the lock is held across a fork (pthread_atfork, registered with the first slab), so
 * a child never inherits it held by a thread it does not have. The child's slabs are the
 * parent's pinned memory, not its own: it carves no block from them and releases none of
 * them; freeing one of their blocks there does nothing. Slabs are made before
 * the lock is taken and put in under it; an emptied slab is taken out under it and released
 * after, so no pinned allocation or release runs under the lock (STYLE.md: no lock across a
 * call that can block), and nothing can carve from a slab being released.
 */
#include "runtime/hostpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef GR_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#define PAGE GR_HOST_POOL_PAGE

typedef struct slab {
    unsigned char *base;
    uint64_t pages;
    uint64_t used;               /* pages in blocks, guards included */
    uint64_t cursor;             /* where the next search starts */
    uint64_t *map;               /* a bit per page: set in a block */
    uint32_t *run;               /* at a block's first page: its pages; else 0 */
    const gr_pinned_ops *pinned; /* who made it; NULL: posix_memalign */
    bool inherited;              /* the parent's, in a forked child */
} slab;

static struct {
    pthread_mutex_t lock;
    slab **v; /* by base address */
    uint64_t n, cap;
    uint64_t next_bytes; /* the next slab's size */
    uint64_t blocks, block_pages;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_bytes = GR_HOST_POOL_FIRST_SLAB};

static pthread_once_t env_once = PTHREAD_ONCE_INIT, atfork_once = PTHREAD_ONCE_INIT;
static bool pool_off;

static void lock_for_fork(void)
{
    pthread_mutex_lock(&pool.lock);
}

static void unlock_in_parent(void)
{
    pthread_mutex_unlock(&pool.lock);
}

static void unlock_in_child(void)
{
    for (uint64_t i = 0; i < pool.n; i++)
        pool.v[i]->inherited = true;
    pthread_mutex_unlock(&pool.lock);
}

static void register_atfork(void)
{
    pthread_atfork(lock_for_fork, unlock_in_parent, unlock_in_child);
}

static void read_env(void)
{
    const char *env = getenv("GR_HOST_POOL");

    pool_off = env != NULL && strcmp(env, "0") == 0;
}

bool gr__host_pool_takes(uint64_t bytes)
{
    pthread_once(&env_once, read_env);
    return !pool_off && bytes != 0 && bytes <= GR_HOST_POOL_MAX;
}

static void slab_release(slab *s)
{
    if (s == NULL)
        return;
    if (s->base != NULL) {
        ASAN_UNPOISON_MEMORY_REGION(s->base, s->pages * PAGE);
        if (s->pinned != NULL)
            s->pinned->free(s->base);
        else
            free(s->base);
    }
    free(s->map);
    free(s->run);
    free(s);
}

static slab *slab_make(const gr_pinned_ops *pinned, uint64_t bytes)
{
    slab *s = calloc(1, sizeof(*s));
    void *base = NULL;

    if (s == NULL)
        return NULL;
    s->pages = bytes / PAGE;
    s->pinned = pinned;
    s->map = calloc((s->pages + 63) / 64, sizeof(*s->map));
    s->run = calloc(s->pages, sizeof(*s->run));
    if (s->map == NULL || s->run == NULL)
        goto out_free;
    if (pinned != NULL ? pinned->alloc(bytes, &base) != GR_OK
                       : posix_memalign(&base, PAGE, bytes) != 0)
        goto out_free;
    s->base = base;
    s->map[(s->pages - 1) / 64] |= 1ull << ((s->pages - 1) % 64); /* the last page: top */
    ASAN_POISON_MEMORY_REGION(s->base, bytes);
    return s;

out_free:
    slab_release(s);
    return NULL;
}

static bool page_used(const slab *s, uint64_t i)
{
    return s->map[i / 64] >> (i % 64) & 1u;
}

/* The first run of `need` free pages at or after page `from`. */
static bool find_free(const slab *s, uint64_t need, uint64_t from, uint64_t *at)
{
    uint64_t run = 0;

    for (uint64_t i = from; i < s->pages; i++) {
        if (i % 64 == 0 && s->map[i / 64] == UINT64_MAX) { /* a full word: skip it */
            run = 0;
            i += 63;
            continue;
        }
        if (page_used(s, i)) {
            run = 0;
            continue;
        }
        if (++run == need) {
            *at = i + 1 - need;
            return true;
        }
    }
    return false;
}

static void mark(slab *s, uint64_t at, uint64_t pages, bool used)
{
    for (uint64_t i = at; i < at + pages; i++) {
        if (used)
            s->map[i / 64] |= 1ull << (i % 64);
        else
            s->map[i / 64] &= ~(1ull << (i % 64));
    }
}

/* Under the lock. */
static void *carve(slab *s, uint64_t pages)
{
    uint64_t at;

    if (s->inherited || s->pages - 1 - s->used < pages ||
        !(find_free(s, pages, s->cursor, &at) || (s->cursor != 0 && find_free(s, pages, 0, &at))))
        return NULL;
    mark(s, at, pages, true);
    s->run[at] = (uint32_t)pages;
    s->used += pages;
    s->cursor = at + pages < s->pages ? at + pages : 0;
    pool.blocks++;
    pool.block_pages += pages;
    return s->base + at * PAGE;
}

/* Under the lock. False when the table cannot grow. */
static bool insert(slab *s)
{
    uint64_t at = 0;

    if (pool.n == pool.cap) {
        uint64_t cap = pool.cap ? 2 * pool.cap : 16;
        slab **v = realloc(pool.v, cap * sizeof(*v));

        if (v == NULL)
            return false;
        pool.v = v;
        pool.cap = cap;
    }
    while (at < pool.n && pool.v[at]->base < s->base)
        at++;
    memmove(&pool.v[at + 1], &pool.v[at], (pool.n - at) * sizeof(*pool.v));
    pool.v[at] = s;
    pool.n++;
    return true;
}

static _Thread_local bool no_slabs_here;

void gr__host_pool_no_slabs_here(void)
{
    no_slabs_here = true;
}

gr_status gr__host_pool_alloc(const gr_pinned_ops *pinned, uint64_t bytes, void **out)
{
    uint64_t pages = (bytes + PAGE - 1) / PAGE + GR_HOST_POOL_GUARD_PAGES;
    slab *fresh = NULL, *spare = NULL;

    if (bytes == 0 || bytes > GR_HOST_POOL_MAX)
        return GR_ERR_INVALID_ARGUMENT;
    pthread_once(&atfork_once, register_atfork); /* before the first slab: see the top */
    for (;;) {
        uint64_t size;
        void *p = NULL;

        pthread_mutex_lock(&pool.lock);
        /* The slabs held first: another thread's new one may have room by now. */
        for (uint64_t i = 0; p == NULL && i < pool.n; i++)
            if (pool.v[i]->pinned == pinned)
                p = carve(pool.v[i], pages);
        if (fresh != NULL) {
            bool empty_held = false;

            for (uint64_t i = 0; i < pool.n && !empty_held; i++)
                empty_held = pool.v[i]->used == 0 && !pool.v[i]->inherited;
            if ((p == NULL || !empty_held) && insert(fresh)) {
                if (pool.next_bytes < GR_HOST_POOL_SLAB) /* grow only on success */
                    pool.next_bytes *= 2;
                if (p == NULL)
                    p = carve(fresh, pages); /* empty and large enough: cannot fail */
            } else {
                spare = fresh; /* not needed after all, or the table cannot grow */
            }
            fresh = NULL;
        }
        if (p != NULL || spare != NULL) {
            pthread_mutex_unlock(&pool.lock);
            slab_release(spare);
            if (p == NULL)
                return GR_ERR_OUT_OF_MEMORY;
            ASAN_UNPOISON_MEMORY_REGION(p, bytes);
            *out = p;
            return GR_OK;
        }
        size = pool.next_bytes;
        pthread_mutex_unlock(&pool.lock);
        if (no_slabs_here) /* gr__host_pool_no_slabs_here */
            return GR_ERR_OUT_OF_MEMORY;
        if ((fresh = slab_make(pinned, size)) == NULL) {
            pthread_mutex_lock(&pool.lock);
            pool.next_bytes = GR_HOST_POOL_FIRST_SLAB; /* the next try asks for little */
            pthread_mutex_unlock(&pool.lock);
            return GR_ERR_OUT_OF_MEMORY;
        }
    }
}

/* Under the lock: the index of the slab holding p; *found false when none does. */
static uint64_t slab_of(const void *p, bool *found)
{
    uint64_t lo = 0, hi = pool.n;
    uintptr_t c = (uintptr_t)p; /* addresses of unrelated objects: compared as integers */

    while (lo < hi) { /* the first slab whose base is above p */
        uint64_t mid = lo + (hi - lo) / 2;

        if ((uintptr_t)pool.v[mid]->base <= c)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo > 0 && c < (uintptr_t)pool.v[lo - 1]->base + pool.v[lo - 1]->pages * PAGE;
    return lo - 1;
}

bool gr__host_pool_free(void *p)
{
    slab *s, *release = NULL;
    uint64_t i, page, pages;
    bool found;

    pthread_mutex_lock(&pool.lock);
    i = slab_of(p, &found);
    if (!found) {
        pthread_mutex_unlock(&pool.lock);
        return false;
    }
    s = pool.v[i];
    page = (uint64_t)((unsigned char *)p - s->base) / PAGE;
    if (s->inherited || ((uint64_t)((unsigned char *)p - s->base)) % PAGE != 0 ||
        s->run[page] == 0) {
        pthread_mutex_unlock(&pool.lock); /* not a live block's start here: leave it */
        return true;
    }
    pages = s->run[page];
    ASAN_POISON_MEMORY_REGION(p, pages * PAGE);
    mark(s, page, pages, false);
    s->run[page] = 0;
    s->used -= pages;
    pool.blocks--;
    pool.block_pages -= pages;
    if (s->used == 0) {
        /* Keep one empty slab against alloc/free cycles; release any other. */
        for (uint64_t j = 0; j < pool.n && release == NULL; j++)
            if (j != i && pool.v[j]->used == 0 && !pool.v[j]->inherited)
                release = s;
        if (release != NULL) {
            memmove(&pool.v[i], &pool.v[i + 1], (pool.n - i - 1) * sizeof(*pool.v));
            pool.n--;
        }
    }
    pthread_mutex_unlock(&pool.lock);
    slab_release(release);
    return true;
}

gr_host_pool_stats gr__host_pool_stats(void)
{
    gr_host_pool_stats st = {0};

    pthread_mutex_lock(&pool.lock);
    st.slabs = pool.n;
    for (uint64_t i = 0; i < pool.n; i++)
        st.slab_bytes += pool.v[i]->pages * PAGE;
    st.blocks = pool.blocks;
    st.block_bytes = pool.block_pages * PAGE;
    pthread_mutex_unlock(&pool.lock);
    return st;
}

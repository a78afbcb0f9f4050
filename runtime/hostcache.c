/*
 * hostcache.c - the registration cache (see hostcache.h).
 *
 * An entry's life: IDLE (known, not to be registered: no room) or QUEUED -> REGISTERING (the
 * thread is pinning it, outside the lock) -> REGISTERED, or FAILED (pin refused: not tried
 * again while a job holds it), and REGISTERED -> UNPINNING (evicted or forgotten; it stays
 * in the array until unregistered, so that no lookup meanwhile takes its range for unknown
 * memory and asks the driver, which would still call it page-locked, about it: the range
 * is staged until it is gone). A QUEUED entry waits for a moment with no live job, unless
 * it is urgent (a second job held it while queued, and waits for it: hostcache.h says
 * why). Entries no job holds are dropped when IDLE or FAILED, and, when REGISTERED, kept
 * until evicted (least recently held first) or forgotten. The thread does every pin and
 * every eviction's unpin; gr_host_forget unpins on its caller's thread.
 */
#include "runtime/hostcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/fault.h"
#include "runtime/base/sync.h"

typedef enum entry_state {
    ENTRY_IDLE,
    ENTRY_QUEUED,
    ENTRY_REGISTERING,
    ENTRY_REGISTERED,
    ENTRY_FAILED,
    ENTRY_UNPINNING, /* evicted or forgotten: being unregistered, outside the lock */
} entry_state;

typedef struct gr_host_entry {
    uintptr_t base, end; /* page-rounded */
    entry_state state;
    uint32_t holds;     /* live jobs holding it */
    uint64_t last_hold; /* c->clock at its latest hold: the LRU order */
    bool dropped;       /* out of the array; freed when the thread or forget is done */
    bool urgent;        /* QUEUED, and to be registered even while jobs are live */
    /* The id of the hold that queued it: only another job's use makes it urgent (a job
     * meeting its own range again is not a second use). An id, not the hold's address:
     * the next job's hold often lies where the last one's did. */
    uint64_t queued_by;
} gr_host_entry;

struct gr_host_cache {
    const gr_host_cache_ops *ops;
    uint64_t capacity;
    uintptr_t page;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t work; /* the thread: something is queued, or close */
    pthread_cond_t idle; /* a registration ended (forget and settle wait for it) */
    gr_host_entry **v;   /* sorted by base, disjoint */
    uint64_t n, cap;
    uint64_t reserved; /* bytes of entries REGISTERING or REGISTERED */
    uint64_t queued;   /* entries QUEUED */
    uint64_t urgent;   /* of those, the urgent ones */
    uint64_t live_jobs; /* holds not yet released: jobs that may be copying */
    uint64_t holds_made; /* the last hold's id */
    bool busy;         /* the thread is pinning or unpinning, outside the lock */
    uint64_t clock;
    bool closed, thread_started;
    pthread_t thread;
    gr_host_cache_stats stats;
    /* Bumped (under mu, read without it) at every registration and unregistration. */
    _Atomic uint64_t epoch;
};

gr_status gr__host_cache_create(uint64_t capacity, const gr_host_cache_ops *ops,
                                gr_host_cache **out)
{
    gr_host_cache *c = gr__calloc(1, sizeof(*c));
    long page = sysconf(_SC_PAGESIZE);

    *out = NULL;
    if (c == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    c->ops = ops;
    c->capacity = capacity;
    c->page = page > 0 ? (uintptr_t)page : 4096;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return GR_ERR_OUT_OF_MEMORY;
    }
    if (gr__cond_init(&c->work) != 0 || gr__cond_init(&c->idle) != 0) {
        pthread_mutex_destroy(&c->mu);
        free(c);
        return GR_ERR_OUT_OF_MEMORY;
    }
    *out = c;
    return GR_OK;
}

/* The index of the first entry whose end is above `addr` (under mu). */
static uint64_t first_ending_above(const gr_host_cache *c, uintptr_t addr)
{
    uint64_t lo = 0, hi = c->n;

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (c->v[mid]->end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void remove_at(gr_host_cache *c, uint64_t i)
{
    c->v[i]->dropped = true;
    memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof(c->v[0]));
    c->n--;
}

static void drop(gr_host_cache *c, gr_host_entry *e)
{
    uint64_t i = first_ending_above(c, e->base);

    if (i < c->n && c->v[i] == e)
        remove_at(c, i);
}

/* Make room for `bytes` more pinned bytes: mark registered entries nobody holds UNPINNING,
 * least recently held first, into *victims (the caller unpins them outside the lock, then
 * drops them: unpin_victims). Returns false, marking nothing, when even all of them would
 * not make room. */
static bool make_room(gr_host_cache *c, uint64_t bytes, gr_host_entry ***victims, uint64_t *nv)
{
    uint64_t evictable = 0;

    *nv = 0;
    *victims = NULL;
    if (c->reserved + bytes <= c->capacity)
        return true;
    for (uint64_t i = 0; i < c->n; i++)
        if (c->v[i]->state == ENTRY_REGISTERED && c->v[i]->holds == 0)
            evictable += c->v[i]->end - c->v[i]->base;
    if (bytes > c->capacity || c->reserved - evictable + bytes > c->capacity)
        return false;
    if ((*victims = gr__malloc(c->n * sizeof(**victims))) == NULL)
        return false;
    while (c->reserved + bytes > c->capacity) {
        gr_host_entry *oldest = NULL;

        for (uint64_t i = 0; i < c->n; i++) {
            gr_host_entry *e = c->v[i];

            if (e->state == ENTRY_REGISTERED && e->holds == 0 &&
                (oldest == NULL || e->last_hold < oldest->last_hold))
                oldest = e;
        }
        (*victims)[(*nv)++] = oldest;
        c->reserved -= oldest->end - oldest->base;
        oldest->state = ENTRY_UNPINNING;
    }
    return true;
}

/* Unregister entries marked UNPINNING (called without the lock), then drop them. */
static void unpin_victims(gr_host_cache *c, gr_host_entry **victims, uint64_t nv)
{
    for (uint64_t i = 0; i < nv; i++)
        c->ops->unpin((void *)victims[i]->base);
    pthread_mutex_lock(&c->mu);
    for (uint64_t i = 0; i < nv; i++) {
        drop(c, victims[i]);
        free(victims[i]);
    }
    atomic_fetch_add(&c->epoch, nv);
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
    free(victims);
}

/* The thread: registers queued entries one at a time (the driver serialises registration
 * anyway), evicting first what must go to keep within the capacity. */
static void *registrar_main(void *arg)
{
    gr_host_cache *c = arg;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        gr_host_entry *e = NULL, **victims;
        uint64_t nv, bytes;
        int64_t t0;
        gr_status st;

        while (!c->closed && c->urgent == 0 && (c->queued == 0 || c->live_jobs > 0))
            pthread_cond_wait(&c->work, &c->mu);
        if (c->closed)
            break;
        for (uint64_t i = 0; i < c->n && e == NULL; i++)
            if (c->v[i]->state == ENTRY_QUEUED && (c->v[i]->urgent || c->urgent == 0))
                e = c->v[i];
        c->queued--;
        if (e->urgent)
            c->urgent--;
        e->urgent = false;
        bytes = e->end - e->base;
        if (!make_room(c, bytes, &victims, &nv)) {
            /* No room while jobs hold what is registered: a later job asks again. */
            e->state = ENTRY_IDLE;
            if (e->holds == 0)
                drop(c, e), free(e);
            pthread_cond_broadcast(&c->idle);
            continue;
        }
        c->reserved += bytes;
        e->state = ENTRY_REGISTERING;
        c->busy = true;
        pthread_mutex_unlock(&c->mu);
        unpin_victims(c, victims, nv);
        t0 = gr_now_ns();
        st = c->ops->pin((void *)e->base, bytes);
        pthread_mutex_lock(&c->mu);
        c->busy = false;
        c->stats.evictions += nv;
        if (st == GR_OK) {
            e->state = ENTRY_REGISTERED;
            atomic_fetch_add(&c->epoch, 1);
            c->stats.registrations++;
            c->stats.register_ns += (uint64_t)(gr_now_ns() - t0);
        } else {
            e->state = ENTRY_FAILED; /* not tried again while it is known */
            c->reserved -= bytes;
            c->stats.failures++;
            if (e->holds == 0)
                drop(c, e), free(e);
        }
        pthread_cond_broadcast(&c->idle);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The entry [base, end) lies inside, a conflicting one (overlapping, not containing),
 * or neither (under mu). */
static gr_host_entry *find(gr_host_cache *c, uintptr_t base, uintptr_t end, uint64_t *at,
                           bool *conflict)
{
    uint64_t i = first_ending_above(c, base);

    *at = i;
    *conflict = false;
    if (i == c->n || c->v[i]->base >= end)
        return NULL; /* nothing overlaps: insert at i */
    if (c->v[i]->base <= base && end <= c->v[i]->end)
        return c->v[i];
    *conflict = true;
    return NULL;
}

static bool held_already(const gr_host_hold *h, const gr_host_entry *e)
{
    for (uint64_t k = h->n; k-- > 0 && k + 8 >= h->n;) /* in place: in and out are one */
        if (h->v[k] == e)
            return true;
    return false;
}

/* Room for one more in the entry array *v of *cap slots, *n used (the cache's entries, a
 * hold's): doubled when full. False when host memory ran out (the array is as it was). */
static bool entries_room(gr_host_entry ***v, uint64_t n, uint64_t *cap)
{
    if (n == *cap) {
        uint64_t more = *cap ? 2 * *cap : 64;
        gr_host_entry **grown = gr__realloc(*v, more * sizeof(*grown));

        if (grown == NULL)
            return false;
        *v = grown;
        *cap = more;
    }
    return true;
}

static gr_status hold_push(gr_host_hold *h, gr_host_entry *e)
{
    if (!entries_room(&h->v, h->n, &h->cap))
        return GR_ERR_OUT_OF_MEMORY;
    e->holds++;
    h->v[h->n++] = e;
    return GR_OK;
}

/* Hold every entry overlapping [base, end) that this hold does not yet (under mu): a range
 * that overlaps entries without lying inside one is staged by the runtime, but the driver
 * sees the overlapped pages page-locked, so those registrations must not go while the job
 * runs. */
static gr_status hold_overlaps(gr_host_cache *c, uintptr_t base, uintptr_t end,
                               gr_host_hold *h)
{
    for (uint64_t i = first_ending_above(c, base); i < c->n && c->v[i]->base < end; i++) {
        gr_status st;

        if (held_already(h, c->v[i]))
            continue;
        if ((st = hold_push(h, c->v[i])) != GR_OK)
            return st;
        c->v[i]->last_hold = ++c->clock;
    }
    return GR_OK;
}

/* Whether an entry overlapping [base, end) is being unregistered (under mu). */
static bool unpinning_over(const gr_host_cache *c, uintptr_t base, uintptr_t end)
{
    for (uint64_t i = first_ending_above(c, base); i < c->n && c->v[i]->base < end; i++)
        if (c->v[i]->state == ENTRY_UNPINNING)
            return true;
    return false;
}

/* [*base, *end): [p, p + bytes) rounded out to whole pages, as entries are. */
static void page_span(const gr_host_cache *c, const void *p, uint64_t bytes, uintptr_t *base,
                      uintptr_t *end)
{
    *base = (uintptr_t)p & ~(c->page - 1);
    *end = ((uintptr_t)p + bytes + c->page - 1) & ~(c->page - 1);
}

/* The slot of h that holds e, searched from the latest (the usual place of a neighbour
 * just held), or UINT64_MAX. */
static uint64_t hold_slot(const gr_host_hold *h, const gr_host_entry *e)
{
    for (uint64_t k = h->n; k-- > 0;)
        if (h->v[k] == e)
            return k;
    return UINT64_MAX;
}

/* Ranges that share a page can be registered only as one (a registration is of whole
 * pages, and a page is registered once), and heap allocations back to back do share one:
 * left apart, one of each two such arrays would be staged every time. So [base, end) and
 * the entries it overlaps may become one entry: when each of them is known only to this
 * job (IDLE, or QUEUED by h: one queued by an earlier job would make the whole a second
 * use, registered beside live jobs, when this job may use only the new part), held by no
 * hold but h, and the whole is within the capacity. Whether they may, and the whole in
 * *span (under mu). */
static bool mergeable(const gr_host_cache *c, uintptr_t base, uintptr_t end,
                      const gr_host_hold *h, uintptr_t span[2])
{
    uintptr_t lo = base, hi = end;

    for (uint64_t i = first_ending_above(c, base); i < c->n && c->v[i]->base < end; i++) {
        const gr_host_entry *e = c->v[i];

        if (!(e->state == ENTRY_IDLE || (e->state == ENTRY_QUEUED && e->queued_by == h->id)) ||
            e->holds > 1 || (e->holds == 1 && hold_slot(h, e) == UINT64_MAX))
            return false;
        lo = e->base < lo ? e->base : lo;
        hi = e->end > hi ? e->end : hi;
    }
    span[0] = lo;
    span[1] = hi;
    return hi - lo <= c->capacity;
}

/* Replace the entries [base, end) overlaps, mergeable, by one entry over all of them (span,
 * from mergeable), keeping what they knew: queued (by h) if one was, urgent if one was (another job used it
 * while it was queued, and has ended). h's holds of them go with them; the new entry is in
 * the array, not yet held. NULL when out of memory (nothing changed). Under mu. */
static gr_host_entry *merge_overlaps(gr_host_cache *c, uintptr_t base, uintptr_t end,
                                     const uintptr_t span[2], gr_host_hold *h)
{
    uint64_t first = first_ending_above(c, base), last;
    gr_host_entry *u = gr__calloc(1, sizeof(*u));
    bool queued = false, urgent = false;

    if (u == NULL)
        return NULL;
    u->base = span[0];
    u->end = span[1];
    for (last = first; last < c->n && c->v[last]->base < end; last++) {
        gr_host_entry *e = c->v[last];

        if (e->state == ENTRY_QUEUED) {
            queued = true;
            urgent |= e->urgent;
            c->queued--, c->urgent -= e->urgent;
        }
        if (e->holds == 1) {
            uint64_t k = hold_slot(h, e);

            memmove(&h->v[k], &h->v[k + 1], (h->n - k - 1) * sizeof(h->v[0]));
            h->n--;
        }
        free(e);
    }
    u->state = queued ? ENTRY_QUEUED : ENTRY_IDLE;
    u->queued_by = h->id;
    u->urgent = urgent;
    c->queued += queued;
    c->urgent += u->urgent;
    if (queued)
        pthread_cond_signal(&c->work);
    c->v[first] = u;
    memmove(&c->v[first + 1], &c->v[last], (c->n - last) * sizeof(c->v[0]));
    c->n -= last - first - 1;
    c->stats.merges += last - first;
    return u;
}

/* Hold the entry [p, p + bytes) lies in; for a range of GR_HOST_CACHE_MIN_BYTES or more in
 * none, create one and queue it (under mu). A small range is only looked up: it may be a
 * view into a registered entry, which must not go while this job copies from it. A range
 * over an entry being unregistered waits for it to be gone: until then the driver still
 * calls its pages page-locked. */
static gr_status hold_range(gr_host_cache *c, const void *p, uint64_t bytes, gr_host_hold *h)
{
    uintptr_t base, end, span[2];
    gr_host_entry *e;
    uint64_t at;
    bool conflict;
    gr_status st;

    page_span(c, p, bytes, &base, &end);
    while (unpinning_over(c, base, end))
        pthread_cond_wait(&c->idle, &c->mu);
    e = find(c, base, end, &at, &conflict);
    if (conflict) {
        /* Memory its owner registered is never the cache's to touch (asked last: the
         * driver's answer costs more than the cache's). */
        if (bytes >= GR_HOST_CACHE_MIN_BYTES && !c->closed &&
            mergeable(c, base, end, h, span) && !c->ops->dma_ready(p))
            e = merge_overlaps(c, base, end, span, h);
        if (e == NULL)
            return hold_overlaps(c, base, end, h); /* staged; its neighbours kept */
    } else if (e == NULL && (bytes < GR_HOST_CACHE_MIN_BYTES || c->closed)) {
        return GR_OK; /* not to be cached */
    }
    if (e != NULL) {
        if (held_already(h, e))
            return GR_OK;
        if (e->state == ENTRY_REGISTERED)
            c->stats.hits++;
        if (e->state == ENTRY_QUEUED && !e->urgent && e->queued_by != h->id) { /* used again */
            e->urgent = true;
            c->urgent++;
            pthread_cond_signal(&c->work);
        }
    } else {
        /* Memory its owner registered is never the cache's to touch. */
        if (c->ops->dma_ready(p))
            return GR_OK;
        if (!entries_room(&c->v, c->n, &c->cap))
            return GR_ERR_OUT_OF_MEMORY;
        if ((e = gr__calloc(1, sizeof(*e))) == NULL)
            return GR_ERR_OUT_OF_MEMORY;
        e->base = base;
        e->end = end;
        e->state = ENTRY_IDLE;
        memmove(&c->v[at + 1], &c->v[at], (c->n - at) * sizeof(c->v[0]));
        c->v[at] = e;
        c->n++;
    }
    if ((st = hold_push(h, e)) != GR_OK)
        return st; /* a new entry stays IDLE, held by no one: dropped by the release */
    e->last_hold = ++c->clock;
    if (e->state == ENTRY_IDLE && e->end - e->base <= c->capacity && !c->closed) {
        e->state = ENTRY_QUEUED; /* the thread finds room for it, or sets it back */
        e->queued_by = h->id;
        c->queued++;
        pthread_cond_signal(&c->work);
    }
    return GR_OK;
}

static int range_cmp(const void *a, const void *b)
{
    const uintptr_t *x = a, *y = b;

    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The hold's snapshot of its registered entries (under mu): see gr_host_hold.ready. */
static gr_status snapshot_ready(gr_host_hold *h)
{
    uint64_t n = 0;

    for (uint64_t k = 0; k < h->n; k++)
        n += h->v[k]->state == ENTRY_REGISTERED;
    if (n == 0)
        return GR_OK;
    if ((h->ready = gr__malloc(n * sizeof(*h->ready))) == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    for (uint64_t k = 0; k < h->n; k++)
        if (h->v[k]->state == ENTRY_REGISTERED) {
            h->ready[h->n_ready][0] = h->v[k]->base;
            h->ready[h->n_ready][1] = h->v[k]->end;
            h->n_ready++;
        }
    qsort(h->ready, h->n_ready, sizeof(*h->ready), range_cmp);
    return GR_OK;
}

/* Whether a port range of the job lies inside an entry on its way to being registered:
 * queued and made urgent by a second job's use, or being registered now (under mu). An
 * entry held only because a range overlaps it is not waited for: that range is staged
 * whatever the entry becomes. */
static bool job_awaits_registration(gr_host_cache *c, const gr_graph *g, const gr_tensor *t,
                                    uint64_t count)
{
    uint32_t ports = g->n_inputs + g->n_outputs;

    for (uint64_t i = 0; i < count; i++) {
        for (uint32_t p = 0; p < ports; p++) {
            const void *ptr = (const void *)gr_graph_tensor_port_at(g, &t[i], p);
            uint64_t bytes = gr_graph_tensor_port_bytes(g, &t[i], p), at;
            uintptr_t base, end;
            gr_host_entry *e;
            bool conflict;

            if (bytes < GR_HOST_CACHE_MIN_BYTES)
                continue; /* never registered for itself */
            page_span(c, ptr, bytes, &base, &end);
            e = find(c, base, end, &at, &conflict);
            if (e != NULL && ((e->state == ENTRY_QUEUED && e->urgent) ||
                              e->state == ENTRY_REGISTERING))
                return true;
        }
    }
    return false;
}

gr_status gr__host_cache_hold(gr_host_cache *c, const gr_graph *g, const gr_tensor *t,
                              uint64_t count, int64_t wait_until_ns, gr_host_hold *out)
{
    uint32_t ports = g->n_inputs + g->n_outputs;
    gr_status st = GR_OK;

    out->v = NULL;
    out->n = out->cap = 0;
    out->live = false;
    out->id = 0;
    out->ready = NULL;
    out->n_ready = 0;
    if (c == NULL)
        return GR_OK;
    pthread_mutex_lock(&c->mu);
    c->live_jobs++;
    out->live = true;
    out->id = ++c->holds_made;
    if (!c->thread_started && !c->closed) {
        if (gr__thread_start(&c->thread, "gr-hostcache", registrar_main, c) != 0) {
            pthread_mutex_unlock(&c->mu);
            return GR_OK; /* no thread, no registrations: the job runs as without a cache */
        }
        c->thread_started = true;
    }
    for (uint64_t i = 0; i < count && st == GR_OK; i++) {
        for (uint32_t p = 0; p < ports && st == GR_OK; p++) {
            const void *ptr = (const void *)gr_graph_tensor_port_at(g, &t[i], p);
            uint64_t bytes = gr_graph_tensor_port_bytes(g, &t[i], p);

            if (bytes < GR_HOST_CACHE_MIN_BYTES && c->n == 0)
                continue; /* nothing to be a view into */
            st = hold_range(c, ptr, bytes, out);
        }
    }
    /* A range used again is registered before this job plans, not beside it: registering
     * beside live copies stalls them (the driver serialises the two), so the job would run
     * staged and slowed, where waiting the registration's time lets it copy by DMA. */
    while (st == GR_OK && !c->closed && c->urgent + c->busy > 0 &&
           job_awaits_registration(c, g, t, count))
        if (gr__cond_wait_until(&c->idle, &c->mu, wait_until_ns))
            break; /* the job's deadline: it runs as it finds the ranges */
    if (st == GR_OK)
        st = snapshot_ready(out);
    pthread_mutex_unlock(&c->mu);
    if (st != GR_OK)
        gr__host_cache_release(c, out, true);
    return st;
}

void gr__host_cache_release(gr_host_cache *c, gr_host_hold *h, bool discard)
{
    if (c == NULL || !h->live)
        return;
    pthread_mutex_lock(&c->mu);
    h->live = false;
    if (--c->live_jobs == 0 && c->queued > 0)
        pthread_cond_signal(&c->work); /* idle: the queued ranges' turn */
    for (uint64_t k = 0; k < h->n; k++) {
        gr_host_entry *e = h->v[k];

        /* Dropped by close while held, or known but not registered: its last hold goes
         * (and with discard one still queued: the memory was never the runtime's). */
        if (--e->holds == 0 && discard && e->state == ENTRY_QUEUED) {
            c->queued--, c->urgent -= e->urgent;
            e->state = ENTRY_IDLE;
        }
        if (e->holds == 0 && (e->state == ENTRY_IDLE || e->state == ENTRY_FAILED)) {
            if (!e->dropped)
                drop(c, e);
            free(e);
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(h->v);
    free(h->ready);
    h->v = NULL;
    h->ready = NULL;
    h->n = h->cap = h->n_ready = 0;
}

/* The snapshot range of `hold` that p lies in, or -1. Lock-free: a hold's snapshot never
 * changes. */
static int64_t in_snapshot(const gr_host_hold *hold, uintptr_t a)
{
    uint64_t lo = 0, hi;

    if (hold == NULL || hold->n_ready == 0)
        return -1;
    hi = hold->n_ready;
    while (lo < hi) { /* the first range ending above a */
        uint64_t mid = lo + (hi - lo) / 2;

        if (hold->ready[mid][1] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < hold->n_ready && hold->ready[lo][0] <= a ? (int64_t)lo : -1;
}

/* Whether any entry overlaps [a, a + bytes) (under mu). */
static bool overlaps_entry(const gr_host_cache *c, uintptr_t a, uint64_t bytes)
{
    uint64_t i = first_ending_above(c, a);

    return i < c->n && c->v[i]->base < a + bytes;
}

bool gr__host_cache_ready(gr_host_cache *c, const gr_host_hold *hold, const void *p,
                          uint64_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    int64_t k = in_snapshot(hold, a);
    uint64_t before;
    bool ready;

    if (c == NULL)
        return false;
    if (k >= 0) /* the job's own */
        return a + bytes <= hold->ready[k][1];
    /* Overlapping an entry the job did not hold registered: staged. Outside every entry:
     * the owner's memory, as the driver says; and if the cache registered anything while
     * the driver was asked (the answer could be about the cache's, not the owner's,
     * registration), staged too. */
    pthread_mutex_lock(&c->mu);
    if (overlaps_entry(c, a, bytes)) {
        pthread_mutex_unlock(&c->mu);
        return false;
    }
    before = atomic_load(&c->epoch);
    pthread_mutex_unlock(&c->mu);
    ready = c->ops->dma_ready(p);
    return ready && atomic_load(&c->epoch) == before;
}

int gr__host_cache_class(gr_host_cache *c, const gr_host_hold *hold, const void *p,
                         uint64_t bytes, uintptr_t *key)
{
    uintptr_t a = (uintptr_t)p;
    int64_t k = in_snapshot(hold, a);
    bool over;

    *key = 0;
    if (k >= 0) {
        *key = hold->ready[k][0];
        return a + bytes <= hold->ready[k][1] ? GR_HOST_HELD : GR_HOST_OTHER;
    }
    if (c == NULL)
        return GR_HOST_OUTSIDE;
    pthread_mutex_lock(&c->mu);
    over = overlaps_entry(c, a, bytes);
    pthread_mutex_unlock(&c->mu);
    return over ? GR_HOST_OTHER : GR_HOST_OUTSIDE;
}

uint64_t gr__host_cache_epoch(const gr_host_cache *c)
{
    return c != NULL ? atomic_load(&((gr_host_cache *)c)->epoch) : 0;
}

gr_status gr__host_cache_forget(gr_host_cache *c, const void *p, uint64_t bytes,
                                gr_error_info *err)
{
    uintptr_t lo, hi;
    gr_host_entry **gone = NULL;
    uint64_t n_gone = 0;

    if (c == NULL)
        return GR_OK;
    /* The whole pages of the range: an entry that shares only a boundary page with it is a
     * neighbour's (heap allocations share pages), not this memory's. */
    lo = ((uintptr_t)p + c->page - 1) & ~(c->page - 1);
    hi = ((uintptr_t)p + bytes) & ~(c->page - 1);
    if (lo >= hi) { /* less than a page of its own: then every entry it touches */
        lo = (uintptr_t)p;
        hi = lo + bytes;
    }
    pthread_mutex_lock(&c->mu);
    for (;;) { /* until nothing in the range is being registered or unregistered */
        bool busy = false;

        for (uint64_t i = first_ending_above(c, lo); i < c->n && c->v[i]->base < hi; i++) {
            if (c->v[i]->holds > 0) {
                uintptr_t b = c->v[i]->base;

                pthread_mutex_unlock(&c->mu);
                return gr__error_set(err, GR_ERR_INVALID_USAGE, GR_NO_INDEX, NULL,
                                     "gr_host_forget: memory at %p is in use by a job that "
                                     "has not ended; wait for it first", (void *)b);
            }
            busy |= c->v[i]->state == ENTRY_REGISTERING || c->v[i]->state == ENTRY_UNPINNING;
        }
        if (!busy)
            break;
        pthread_cond_wait(&c->idle, &c->mu);
    }
    gone = gr__malloc((c->n ? c->n : 1) * sizeof(*gone));
    if (gone == NULL) {
        pthread_mutex_unlock(&c->mu);
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                             "gr_host_forget: no memory");
    }
    for (uint64_t i = first_ending_above(c, lo); i < c->n && c->v[i]->base < hi;) {
        gr_host_entry *e = c->v[i];

        if (e->state == ENTRY_REGISTERED) { /* stays in the array until unregistered */
            c->reserved -= e->end - e->base;
            e->state = ENTRY_UNPINNING;
            gone[n_gone++] = e;
            i++;
            continue;
        }
        if (e->state == ENTRY_QUEUED)
            c->queued--, c->urgent -= e->urgent;
        remove_at(c, i);
        free(e);
    }
    pthread_mutex_unlock(&c->mu);
    if (n_gone > 0)
        unpin_victims(c, gone, n_gone); /* frees gone */
    else
        free(gone);
    return GR_OK;
}

void gr__host_cache_settle(gr_host_cache *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    while (c->busy || c->urgent > 0 || (c->queued > 0 && c->live_jobs == 0))
        pthread_cond_wait(&c->idle, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void gr__host_cache_close(gr_host_cache *c)
{
    gr_host_entry **v;
    uint64_t n;

    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->closed = true;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    if (c->thread_started)
        pthread_join(c->thread, NULL);
    /* The thread is gone: nothing is REGISTERING. Take every entry out of the array. */
    pthread_mutex_lock(&c->mu);
    v = c->v;
    n = c->n;
    c->v = NULL;
    c->n = c->cap = 0;
    c->reserved = 0;
    c->queued = 0;
    c->urgent = 0;
    atomic_fetch_add(&c->epoch, 1);
    pthread_cond_broadcast(&c->idle); /* settle and forget waiters: nothing is coming */
    for (uint64_t i = 0; i < n; i++) {
        gr_host_entry *e = v[i];

        if (e->state == ENTRY_UNPINNING)
            continue; /* a forget on another thread unregisters and frees it */
        e->dropped = true;
        if (e->state == ENTRY_REGISTERED)
            c->ops->unpin((void *)e->base);
        e->state = ENTRY_IDLE;
        if (e->holds == 0)
            free(e); /* else the last release frees it */
    }
    pthread_mutex_unlock(&c->mu);
    free(v);
}

void gr__host_cache_free(gr_host_cache *c)
{
    if (c == NULL)
        return;
    gr__host_cache_close(c);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void gr__host_cache_stats_get(gr_host_cache *c, gr_host_cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    out->registered_bytes = 0;
    for (uint64_t i = 0; i < c->n; i++)
        if (c->v[i]->state == ENTRY_REGISTERED)
            out->registered_bytes += c->v[i]->end - c->v[i]->base;
    pthread_mutex_unlock(&c->mu);
}

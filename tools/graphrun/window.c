/*
 * window.c - the host memory of a streaming run (see window.h).
 *
 * Each segment keeps its free extents sorted by offset, neighbours merged, so an extent
 * given back joins its free neighbours and a segment with nothing taken is one free extent
 * again. Extents are few (a window holds tens or hundreds of tensors), so first-fit by a
 * walk over the segments is cheap next to the I/O each extent serves.
 */
#define _GNU_SOURCE
#include "tools/graphrun/window.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/graphrun/cli.h"
#include "tools/graphrun/io_util.h"

typedef struct extent {
    uint64_t off, len;
} extent;

typedef struct segment {
    void *raw;  /* from gr_hostbuf_alloc */
    char *base; /* raw rounded up to a block */
    uint64_t size;
    extent *free;
    uint32_t n_free, cap;
} segment;

/* Memory a grower thread allocated for a segment, waiting for the owner to take it in. */
typedef struct grown {
    void *raw;
    uint64_t size;
} grown;

struct gr_window {
    uint64_t limit, segment, least; /* least: the smallest segment worth having */
    uint64_t held;                  /* bytes of the segments */
    bool full;                      /* no more segments: the limit, or the system said no */
    gr_mem_kind want, got;
    segment *seg;
    uint32_t n_seg, cap;
    uint32_t n_huge; /* segments mapped for huge pages (gr_hostbuf_alloc_large) */
    uint64_t in_use, peak, shortfall;
    int64_t first_ns, more_ns; /* time allocating the first segment, and the others */
    /* The grower (gr_window_grow_ahead): `mu` guards the fields below it; the grower reads
     * only the fields above that never change after create (limit, segment, least, want). */
    bool growing;   /* owner: a grower was started and not yet joined */
    bool grew;      /* owner: a grower was started */
    pthread_t grower;
    atomic_bool stop_growing;
    uint64_t grow_from, grow_to; /* the grower's: bytes held when it started, its target */
    pthread_mutex_t mu;
    grown *ready;                /* cap_ready entries */
    uint32_t n_ready, cap_ready; /* allocated by the grower; the owner takes them in order */
    uint32_t n_taken;
    bool grower_done;      /* it allocates no more */
    int64_t grow_ns;       /* its time allocating */
};

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

void gr_window_layout_of(const gr_io_plan *plan, uint64_t i, gr_window_layout *l)
{
    uint32_t ni = plan->opt.n_inputs;
    uint32_t no = plan->opt.n_outputs ? plan->opt.n_outputs : plan->opt.graph_outputs;
    char header[4096];

    memset(l, 0, sizeof(*l));
    for (uint32_t p = 0; p < ni; p++) {
        const gr_io_file *f = &plan->in[i * ni + p];
        uint64_t bytes = f->elems * gr_dtype_size(plan->opt.in_dtype[p]);

        l->in_off[p] = f->data_offset / GR_WINDOW_ALIGN * GR_WINDOW_ALIGN;
        l->in_pad[p] = f->data_offset - l->in_off[p];
        l->in_len[p] = round_up(l->in_pad[p] + bytes, GR_WINDOW_ALIGN);
        l->total += l->in_len[p];
    }
    for (uint32_t p = 0; p < no; p++) {
        uint64_t bytes = gr_io_out_elems(plan, i, p) * gr_dtype_size(plan->opt.out_dtype[p]);
        size_t hlen = gr_io_out_header(plan, i, p, header, sizeof(header));

        l->out_hlen[p] = hlen == (size_t)-1 ? 0 : (uint32_t)hlen;
        l->out_len[p] = round_up(l->out_hlen[p] + bytes, GR_WINDOW_ALIGN);
        l->total += l->out_len[p];
    }
}

void gr_window_need(const gr_io_plan *plan, const bool *skip, uint64_t *largest,
                    uint64_t *sum)
{
    gr_window_layout l;

    *largest = *sum = 0;
    for (uint64_t i = 0; i < plan->count; i++) {
        if ((skip && skip[i]) || (plan->bad && plan->bad[i]))
            continue;
        gr_window_layout_of(plan, i, &l);
        *sum += l.total;
        if (l.total > *largest)
            *largest = l.total;
    }
}

gr_status gr_window_check(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                          const char *how, char *why, size_t len)
{
    uint64_t largest = 0, sum = 0, at = 0;
    gr_window_layout l;
    const char *name;
    char b1[32], b2[32];

    gr_window_need(plan, skip, &largest, &sum);
    if (largest <= limit)
        return GR_OK;
    for (uint64_t i = 0; i < plan->count; i++) {
        if ((skip && skip[i]) || (plan->bad && plan->bad[i]))
            continue;
        gr_window_layout_of(plan, i, &l);
        if (l.total == largest) {
            at = i;
            break;
        }
    }
    name = plan->in[at * plan->opt.n_inputs].path;
    if (gr_inputs_is_stdin(&plan->src, name))
        name = "stdin";
    gr_cli_bytes(largest, b1, sizeof(b1));
    gr_cli_bytes(limit, b2, sizeof(b2));
    if (how == NULL)
        return gr_io_fail(why, len,
                          "tensor %llu (%s) needs %s of host memory at once (its inputs and "
                          "outputs, in whole blocks), more than --host-memory %s: give "
                          "--host-memory %s or more",
                          (unsigned long long)plan->index[at], name, b1, b2, b1);
    return gr_io_fail(why, len,
                      "tensor %llu (%s) needs %s of host memory at once (its inputs and "
                      "outputs, in whole blocks), more than %s (%s): give --host-memory %s or "
                      "more",
                      (unsigned long long)plan->index[at], name, b1, b2, how, b1);
}

/* A number from the first line of `path` ("max" or absent: 0). */
static uint64_t file_number(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

uint64_t gr_window_default(char *how, size_t len)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    uint64_t d = phys / 4, cg = file_number("/sys/fs/cgroup/memory.max");
    struct rlimit as;
    char b1[32], b2[32];

    snprintf(how, len, "the default: a quarter of this machine's %s of memory",
             gr_cli_bytes(phys, b1, sizeof(b1)));
    if (phys == 0 || d > GR_WINDOW_DEFAULT_CAP) {
        d = GR_WINDOW_DEFAULT_CAP;
        snprintf(how, len, "the default: a quarter of this machine's %s of memory, at most %s",
                 gr_cli_bytes(phys, b1, sizeof(b1)), gr_cli_bytes(d, b2, sizeof(b2)));
    }
    /* The address space holds the runtime too (its budget on the host backend, its threads'
     * stacks and malloc arenas, its staging buffers): a quarter of it for the window. */
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur / 4 < d) {
        d = as.rlim_cur / 4;
        snprintf(how, len, "the default: a quarter of the address-space limit, RLIMIT_AS %s",
                 gr_cli_bytes(as.rlim_cur, b1, sizeof(b1)));
    }
    if (cg > 0 && cg / 2 < d) {
        d = cg / 2;
        snprintf(how, len, "the default: half of the cgroup's memory.max, %s",
                 gr_cli_bytes(cg, b1, sizeof(b1)));
    }
    return d / GR_WINDOW_ALIGN * GR_WINDOW_ALIGN;
}

gr_status gr_window_create(uint64_t limit, uint64_t segment, uint64_t least, gr_mem_kind kind,
                           gr_window **out)
{
    gr_window *w;

    *out = NULL;
    if (segment == 0 || segment % GR_WINDOW_ALIGN != 0 || segment > limit || least == 0 ||
        least % GR_WINDOW_ALIGN != 0 || least > segment)
        return GR_ERR_INVALID_ARGUMENT;
    if ((w = calloc(1, sizeof(*w))) == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    w->limit = limit;
    w->segment = segment;
    w->least = least;
    w->want = w->got = kind;
    pthread_mutex_init(&w->mu, NULL);
    *out = w;
    return GR_OK;
}

/* `size` bytes of a segment's memory, room to align its start to a block included, of the
 * kind the window wants (read only what create set: the grower calls it too). */
static void *segment_alloc(const gr_window *w, uint64_t size)
{
    return gr_hostbuf_alloc_large(w->want, size + GR_WINDOW_ALIGN);
}

/* Memory for a segment of `size`, trying halves of it down to w->least when the system
 * will not give that much at once (an address-space limit, a cgroup): *size gets what was
 * had. NULL when not even w->least can be had. */
static void *segment_memory(gr_window *w, uint64_t *size)
{
    for (;;) {
        void *raw = segment_alloc(w, *size);

        if (raw != NULL || *size == w->least)
            return raw;
        *size = round_up(*size / 2, GR_WINDOW_ALIGN);
        if (*size < w->least)
            *size = w->least;
    }
}

/* Room in the segment array for one more. */
static bool seg_room(gr_window *w)
{
    if (w->n_seg == w->cap) {
        uint32_t cap = w->cap ? w->cap * 2 : 8;
        segment *v = realloc(w->seg, cap * sizeof(*v));

        if (v == NULL)
            return false;
        w->seg = v;
        w->cap = cap;
    }
    return true;
}

/* Segment n_seg over `raw` (from segment_memory) of `size` bytes; its free list in `free8`
 * (8 extents). */
static void seg_add(gr_window *w, void *raw, uint64_t size, extent *free8)
{
    segment *s = &w->seg[w->n_seg];

    memset(s, 0, sizeof(*s));
    w->got = gr_hostbuf_kind(raw);
    w->n_huge += gr_hostbuf_huge(raw);
    s->raw = raw;
    s->free = free8;
    s->base = (char *)round_up((uintptr_t)raw, GR_WINDOW_ALIGN);
    s->size = size;
    s->cap = 8;
    s->n_free = 1;
    s->free[0] = (extent){0, size};
    w->held += size;
    w->n_seg++;
}

/* The size of the next segment of a window holding `held` bytes: a segment, or what is
 * left of the bound; less than w->least means no more (the owner's and the grower's rule). */
static uint64_t next_segment(const gr_window *w, uint64_t held)
{
    return w->limit - held < w->segment ? w->limit - held : w->segment;
}

/* A new segment, or false (the window stays as large as it is: the limit, or all the
 * system would give). */
static bool add_segment(gr_window *w)
{
    uint64_t size = next_segment(w, w->held);
    extent *free8;
    void *raw;
    int64_t t0;

    if (w->full || size < w->least) {
        w->full = true;
        return false;
    }
    if (!seg_room(w))
        return false;
    free8 = malloc(8 * sizeof(*free8));
    t0 = gr_now_ns();
    raw = free8 ? segment_memory(w, &size) : NULL;
    *(w->n_seg ? &w->more_ns : &w->first_ns) += gr_now_ns() - t0;
    if (raw == NULL) {
        free(free8);
        w->shortfall = w->limit - w->held;
        w->full = true;
        return false;
    }
    seg_add(w, raw, size, free8);
    return true;
}

/* The grower's thread: segments as add_segment sizes them, one after another, until the
 * window holds grow_to bytes, the system will not give a whole segment at once, or it is
 * told to stop. It takes no less than a segment (add_segment tries halves): under an
 * address-space limit what is left goes to the threads and allocations that need it, and
 * the owner grows the window by halves only when a read needs the room. */
static void *grower_main(void *arg)
{
    gr_window *w = arg;
    uint64_t held = w->grow_from;

    while (!atomic_load(&w->stop_growing)) {
        uint64_t size = next_segment(w, held);
        int64_t t0 = gr_now_ns();
        void *raw;
        bool kept;

        if (held >= w->grow_to || size < w->least)
            break;
        raw = segment_alloc(w, size);
        pthread_mutex_lock(&w->mu);
        w->grow_ns += gr_now_ns() - t0;
        kept = raw != NULL && w->n_ready < w->cap_ready;
        if (kept)
            w->ready[w->n_ready++] = (grown){raw, size};
        pthread_mutex_unlock(&w->mu);
        if (!kept) {
            gr_hostbuf_free(raw);
            break;
        }
        held += size;
    }
    pthread_mutex_lock(&w->mu);
    w->grower_done = true;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The owner takes in what the grower has allocated since it last looked. Returns whether
 * the grower may still give more. */
static bool take_grown(gr_window *w)
{
    bool done;

    if (!w->growing)
        return false;
    pthread_mutex_lock(&w->mu);
    while (w->n_taken < w->n_ready) {
        grown g = w->ready[w->n_taken];
        extent *free8 = seg_room(w) ? malloc(8 * sizeof(*free8)) : NULL;

        if (free8 == NULL)
            break; /* taken at the next look, or freed by destroy */
        seg_add(w, g.raw, g.size, free8);
        w->n_taken++;
    }
    done = w->grower_done && w->n_taken == w->n_ready;
    w->more_ns = w->grow_ns;
    pthread_mutex_unlock(&w->mu);
    return !done;
}

/* Stops and joins the grower (once the segment it is allocating, if any, is had); what it
 * allocated and the owner did not take is freed. */
static void stop_grower(gr_window *w)
{
    if (!w->growing)
        return;
    atomic_store(&w->stop_growing, true);
    pthread_join(w->grower, NULL);
    take_grown(w);
    for (uint32_t k = w->n_taken; k < w->n_ready; k++)
        gr_hostbuf_free(w->ready[k].raw);
    w->n_taken = w->n_ready;
    w->growing = false;
}

void gr_window_grow_stop(gr_window *w, bool wait)
{
    if (!w->growing)
        return;
    atomic_store(&w->stop_growing, true);
    if (wait)
        stop_grower(w);
}

void gr_window_grow_ahead(gr_window *w, uint64_t upto)
{
    pthread_attr_t attr;
    sigset_t all, old;
    uint32_t n;

    if (w->grew || w->full || upto <= w->held || getenv("GR_TEST_WINDOW_GROWTH") != NULL)
        return; /* once a window */
    if (upto > w->limit)
        upto = w->limit;
    n = (uint32_t)((upto - w->held) / w->least + 1);
    if ((w->ready = calloc(n, sizeof(*w->ready))) == NULL)
        return;
    w->cap_ready = n;
    w->grow_from = w->held;
    w->grow_to = upto;
    atomic_init(&w->stop_growing, false);
    /* Every signal blocked (SIGINT and SIGTERM go to the owner); the stack the system's
     * default: the allocation runs the CUDA driver's code. */
    pthread_attr_init(&attr);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    w->growing = w->grew = pthread_create(&w->grower, &attr, grower_main, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

/* The segment size of a run's window (gr_window_open), from its tensors' largest need and
 * their sum, and its bound (a multiple of GR_WINDOW_ALIGN). */
static uint64_t segment_of(uint64_t largest, uint64_t sum, uint64_t limit)
{
    uint64_t seg = limit / 4 < GR_WINDOW_SEGMENT_MAX ? limit / 4 : GR_WINDOW_SEGMENT_MAX;

    seg = sum < seg ? sum : seg;
    /* Whole tensors of the largest size: a segment's remainder would fit none of them. */
    return seg < largest ? largest : seg / largest * largest;
}

uint64_t gr_window_most(const gr_io_plan *plan, const bool *skip, uint64_t limit)
{
    uint64_t largest = 0, sum = 0, seg, most;

    gr_window_need(plan, skip, &largest, &sum);
    limit = limit / GR_WINDOW_ALIGN * GR_WINDOW_ALIGN;
    if (largest == 0)
        largest = sum = GR_WINDOW_ALIGN;
    seg = segment_of(largest, sum, limit);
    /* As add_segment grows it: a segment at a time while the tensors need more, the last
     * one cut to the bound when a tensor still fits in what is left. */
    for (most = 0; most < sum && limit - most >= largest;)
        most += limit - most < seg ? limit - most : seg;
    return most;
}

gr_status gr_window_open(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                         gr_mem_kind kind, gr_window **out)
{
    uint64_t largest = 0, sum = 0, seg;
    gr_status st;

    gr_window_need(plan, skip, &largest, &sum);
    limit = limit / GR_WINDOW_ALIGN * GR_WINDOW_ALIGN;
    if (largest == 0)
        largest = sum = GR_WINDOW_ALIGN;
    seg = segment_of(largest, sum, limit);
    if (seg > limit)
        return GR_ERR_INVALID_ARGUMENT; /* gr_window_check refuses such a run first */
    if ((st = gr_window_create(limit, seg, largest, kind, out)) != GR_OK)
        return st;
    if (!add_segment(*out)) {
        gr_window_destroy(*out);
        *out = NULL;
        return GR_ERR_OUT_OF_MEMORY;
    }
    return GR_OK;
}

static bool take(segment *s, uint64_t bytes, void **out)
{
    for (uint32_t k = 0; k < s->n_free; k++) {
        extent *e = &s->free[k];

        if (e->len < bytes)
            continue;
        *out = s->base + e->off;
        e->off += bytes;
        e->len -= bytes;
        if (e->len == 0) {
            memmove(e, e + 1, (s->n_free - k - 1) * sizeof(*e));
            s->n_free--;
        }
        return true;
    }
    return false;
}

gr_status gr_window_alloc(gr_window *w, uint64_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0 || bytes % GR_WINDOW_ALIGN != 0 || bytes > w->least)
        return GR_ERR_INVALID_ARGUMENT;
    for (uint32_t k = 0; k < w->n_seg; k++)
        if (take(&w->seg[k], bytes, out))
            goto out;
    if (w->growing) {
        uint32_t had = w->n_seg;
        bool more = take_grown(w);

        for (uint32_t k = had; k < w->n_seg; k++)
            if (take(&w->seg[k], bytes, out))
                goto out;
        if (more)
            return GR_ERR_UNAVAILABLE; /* room comes from the grower or a tensor's end */
        stop_grower(w);
    }
    if (!add_segment(w))
        return w->n_seg == 0 ? GR_ERR_OUT_OF_MEMORY : GR_ERR_UNAVAILABLE;
    take(&w->seg[w->n_seg - 1], bytes, out);
out:
    w->in_use += bytes;
    if (w->in_use > w->peak)
        w->peak = w->in_use;
    return GR_OK;
}

void gr_window_free(gr_window *w, void *p, uint64_t bytes)
{
    segment *s = NULL;
    uint64_t off;
    uint32_t k;

    if (p == NULL)
        return;
    for (k = 0; k < w->n_seg && s == NULL; k++)
        if ((char *)p >= w->seg[k].base && (char *)p < w->seg[k].base + w->seg[k].size)
            s = &w->seg[k];
    if (s == NULL)
        return;
    off = (uint64_t)((char *)p - s->base);
    w->in_use -= bytes;
    for (k = 0; k < s->n_free && s->free[k].off < off; k++)
        ;
    /* Joins the free extent before it, after it, or both; else a new one at k. */
    if (k > 0 && s->free[k - 1].off + s->free[k - 1].len == off) {
        s->free[k - 1].len += bytes;
        if (k < s->n_free && off + bytes == s->free[k].off) {
            s->free[k - 1].len += s->free[k].len;
            memmove(&s->free[k], &s->free[k + 1], (s->n_free - k - 1) * sizeof(extent));
            s->n_free--;
        }
        return;
    }
    if (k < s->n_free && off + bytes == s->free[k].off) {
        s->free[k].off = off;
        s->free[k].len += bytes;
        return;
    }
    if (s->n_free == s->cap) {
        extent *v = realloc(s->free, s->cap * 2 * sizeof(*v));

        if (v == NULL) /* the extent is lost to this run: the window holds less */
            return;
        s->free = v;
        s->cap *= 2;
    }
    memmove(&s->free[k + 1], &s->free[k], (s->n_free - k) * sizeof(extent));
    s->free[k] = (extent){off, bytes};
    s->n_free++;
}

void gr_window_stats_get(gr_window *w, gr_window_stats *out)
{
    take_grown(w);
    out->limit = w->limit;
    out->segment = w->segment;
    out->held = w->held;
    out->in_use = w->in_use;
    out->peak_in_use = w->peak;
    out->shortfall = w->shortfall;
    out->kind = w->got;
    out->segments = w->n_seg;
    out->first_ns = w->first_ns;
    out->more_ns = w->more_ns;
    out->grown_ahead = w->grew;
    out->segments_grown = w->n_taken;
    out->segments_huge = w->n_huge;
}

void gr_window_destroy(gr_window *w)
{
    if (w == NULL)
        return;
    stop_grower(w);
    for (uint32_t k = 0; k < w->n_seg; k++) {
        gr_hostbuf_free(w->seg[k].raw);
        free(w->seg[k].free);
    }
    free(w->seg);
    free(w->ready);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/*
 * copier.c - the copy pool (see copier.h).
 *
 * A call becomes a "batch": its copies, laid end to end as one stream of bytes, cut into pieces of
 * PIECE bytes (the last one shorter), handed out by an atomic cursor. A piece may span many small
 * copies (a batch of 16 KiB tensors: 64 of them per piece) or be part of one large copy; either way
 * each handout is about PIECE bytes of work. The piece's first copy is found by binary search over
 * the copies' end offsets, so a batch of n copies costs O(n log n) to hand out, not O(n^2) (finding
 * piece k by walking the copies from the first took a millisecond per gather of 2048 tensors). The
 * batch is queued for the helpers and the caller takes pieces too. Helpers take pieces from the
 * oldest queued batch that has any left, so concurrent callers are served in order and none
 * starves. When the caller finds the cursor exhausted it takes the batch off the queue (so no
 * helper can join any more) and waits, under the mutex, for the helpers that joined (`active`) to
 * finish their last pieces: every piece is then copied, and the mutex orders those copies before
 * the caller's return. The batch lives on the caller's stack, which is why the caller must wait for
 * them.
 *
 * Lock order: only c->mu.
 */
#include "runtime/core/copier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/fault.h"
#include "runtime/base/sync.h"

#define PIECE (1u << 20) /* large enough to amortize a handout, small enough to balance */

typedef struct batch {
    struct batch *next;
    const gr_copy *ops;
    const uint64_t *ends;   /* ends[i]: bytes of ops[0..i] together */
    size_t n;
    uint64_t bytes;         /* of all the copies */
    uint64_t pieces;        /* total pieces */
    _Atomic uint64_t cursor; /* next piece to hand out */
    unsigned active;        /* helpers working on it (under mu) */
    pthread_cond_t finished;
} batch;

struct gr_copier {
    pthread_mutex_t mu;
    pthread_cond_t work; /* helpers sleep here */
    batch *head, *tail;  /* batches with pieces left */
    bool stop;
    unsigned n_threads;
    pthread_t *threads;
};

/* Copy piece `k` of the batch: bytes [k * PIECE, (k + 1) * PIECE) of the stream. */
static void copy_piece(const batch *b, uint64_t k)
{
    uint64_t pos = k * PIECE, end = b->bytes - pos < PIECE ? b->bytes : pos + PIECE;
    size_t lo = 0, hi = b->n;

    /* The first copy that ends after pos. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (b->ends[mid] > pos)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (size_t i = lo; pos < end; i++) {
        uint64_t start = b->ends[i] - b->ops[i].bytes;
        uint64_t stop = b->ends[i] < end ? b->ends[i] : end;

        if (stop > pos) /* an empty copy may have NULL pointers */
            memcpy((char *)b->ops[i].dst + (pos - start),
                   (const char *)b->ops[i].src + (pos - start), stop - pos);
        pos = stop;
    }
}

/* Take and copy pieces of `b` until none is left. */
static void drain(batch *b)
{
    uint64_t k;

    while ((k = atomic_fetch_add_explicit(&b->cursor, 1, memory_order_relaxed)) < b->pieces)
        copy_piece(b, k);
}

static void unlink_batch(gr_copier *c, batch *b)
{
    batch **link = &c->head;

    while (*link && *link != b)
        link = &(*link)->next;
    if (*link == NULL)
        return;
    *link = b->next;
    if (c->tail == b) {
        c->tail = NULL;
        for (batch *x = c->head; x; x = x->next)
            c->tail = x;
    }
}

static void *helper_main(void *arg)
{
    gr_copier *c = arg;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        batch *b = c->head;

        if (c->stop)
            break;
        if (b == NULL) {
            pthread_cond_wait(&c->work, &c->mu);
            continue;
        }
        b->active++;
        pthread_mutex_unlock(&c->mu);
        drain(b);
        pthread_mutex_lock(&c->mu);
        unlink_batch(c, b); /* its cursor ran out */
        if (--b->active == 0)
            pthread_cond_signal(&b->finished);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

gr_status gr__copier_create(unsigned threads, gr_copier **out)
{
    gr_copier *c = gr__calloc(1, sizeof(*c));

    *out = NULL;
    if (c == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        goto out_free;
    if (pthread_cond_init(&c->work, NULL) != 0)
        goto out_destroy_mu;
    c->threads = gr__calloc(threads ? threads : 1, sizeof(*c->threads));
    if (c->threads == NULL)
        goto out_destroy_work;
    /* Fewer helpers than asked for (the system is out of threads) only slow copies down:
     * the caller of gr__copier_copy always works too. */
    for (unsigned i = 0; i < threads; i++) {
        if (gr__thread_create(&c->threads[i], "gr-copy", helper_main, c) != 0)
            break;
        c->n_threads++;
    }
    *out = c;
    return GR_OK;

out_destroy_work:
    pthread_cond_destroy(&c->work);
out_destroy_mu:
    pthread_mutex_destroy(&c->mu);
out_free:
    free(c);
    return GR_ERR_OUT_OF_MEMORY;
}

void gr__copier_destroy(gr_copier *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    for (unsigned i = 0; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->mu);
    free(c->threads);
    free(c);
}

void gr__copier_copy(gr_copier *c, const gr_copy *ops, size_t n, uint64_t *ends)
{
    batch b;

    memset(&b, 0, sizeof(b));
    b.ops = ops;
    b.ends = ends;
    b.n = n;
    for (size_t i = 0; i < n; i++)
        ends[i] = b.bytes += ops[i].bytes;
    b.pieces = (b.bytes + PIECE - 1) / PIECE;
    if (b.pieces == 0)
        return;
    if (b.pieces == 1 || c->n_threads == 0) {
        drain(&b); /* not worth waking anyone */
        return;
    }
    pthread_cond_init(&b.finished, NULL);
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = &b;
    else
        c->head = &b;
    c->tail = &b;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);

    drain(&b);
    pthread_mutex_lock(&c->mu);
    unlink_batch(c, &b);
    while (b.active > 0)
        pthread_cond_wait(&b.finished, &c->mu);
    pthread_mutex_unlock(&c->mu);
    pthread_cond_destroy(&b.finished);
}

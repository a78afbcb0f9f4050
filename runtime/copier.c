/*
 * copier.c - the copy pool (see copier.h).
 *
 * A call becomes a "batch": its copies cut into pieces of at most PIECE bytes, handed out
 * by an atomic cursor. The batch is queued for the helpers and the caller takes pieces too.
 * Helpers take pieces from the oldest queued batch that has any left, so concurrent callers
 * are served in order and none starves. When the caller finds the cursor exhausted it takes
 * the batch off the queue (so no helper can join any more) and waits, under the mutex, for
 * the helpers that joined (`active`) to finish their last pieces: every piece is then
 * copied, and the mutex orders those copies before the caller's return. The batch lives on
 * the caller's stack, which is why the caller must wait for them.
 *
 * Lock order: only c->mu.
 */
#include "runtime/copier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fault.h"
#include "runtime/sync.h"

#define PIECE (1u << 20) /* large enough to amortize a handout, small enough to balance */

typedef struct batch {
    struct batch *next;
    const gr_copy *ops;
    size_t n;
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

/* Pieces of one copy. */
static uint64_t pieces_of(uint64_t bytes)
{
    return bytes == 0 ? 0 : (bytes + PIECE - 1) / PIECE;
}

/* Copy piece `k` of the batch (pieces are numbered across its copies in order). */
static void copy_piece(const batch *b, uint64_t k)
{
    for (size_t i = 0; i < b->n; i++) {
        uint64_t p = pieces_of(b->ops[i].bytes);

        if (k < p) {
            uint64_t off = k * PIECE;
            uint64_t len = b->ops[i].bytes - off < PIECE ? b->ops[i].bytes - off : PIECE;
            memcpy((char *)b->ops[i].dst + off, (const char *)b->ops[i].src + off, len);
            return;
        }
        k -= p;
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

gr_status gr_copier_create(unsigned threads, gr_copier **out)
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
     * the caller of gr_copier_copy always works too. */
    for (unsigned i = 0; i < threads; i++) {
        if (gr__thread_create(&c->threads[i], helper_main, c) != 0)
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

void gr_copier_destroy(gr_copier *c)
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

void gr_copier_copy(gr_copier *c, const gr_copy *ops, size_t n)
{
    batch b;

    memset(&b, 0, sizeof(b));
    b.ops = ops;
    b.n = n;
    for (size_t i = 0; i < n; i++)
        b.pieces += pieces_of(ops[i].bytes);
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

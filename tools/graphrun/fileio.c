/*
 * fileio.c - asynchronous file I/O through io_uring or a few pread threads (see fileio.h).
 *
 * io_uring: each operation takes a slot (its index is the SQE's user_data) so that its
 * completion gives back the caller's op whole; the eventfd is registered with the ring, so
 * the kernel writes it for every completion. Submission is batched: operations queued by
 * gr_fio_submit go to the kernel at the next flush, reap or wait, in one io_uring_enter.
 *
 * pread: PREAD_THREADS threads take operations from a FIFO under one mutex (the only lock:
 * no order to keep), run them with every signal blocked (the owner's thread takes SIGINT),
 * and put them on the done list, then write the eventfd. A completion is on the done list
 * before the eventfd is written, and the owner clears the eventfd before it reaps, so no
 * wake-up is lost between the two.
 */
#define _GNU_SOURCE
#include "tools/graphrun/fileio.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PREAD_THREADS GR_FIO_PREAD_THREADS

struct gr_fio {
    bool uring;
    int efd;
    unsigned depth, in_flight;
    /* io_uring */
    struct io_uring ring;
    bool ring_up;
    gr_fio_op *slots;     /* depth */
    unsigned *free_slot;  /* depth: a stack of free slot indices */
    unsigned n_free;
    unsigned unsubmitted; /* SQEs prepared, not yet handed to the kernel */
    /* pread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t threads[PREAD_THREADS];
    unsigned n_threads;
    gr_fio_op *queue, *done; /* depth each: a FIFO ring, and a list */
    unsigned q_head, q_count, n_done;
    bool stop;
};

const char *gr_fio_engine_name(const gr_fio *f)
{
    return f->uring ? "io_uring" : "pread";
}

static gr_status fail(char *why, size_t len, gr_status st, const char *fmt, int e)
{
    snprintf(why, len, fmt, strerror(e));
    return st;
}

static gr_status uring_create(gr_fio *f, bool refuse, char *why, size_t len)
{
    int r = refuse ? -EPERM : io_uring_queue_init(f->depth, &f->ring, 0);

    if (r < 0)
        return fail(why, len, GR_ERR_UNAVAILABLE, "io_uring_setup: %s", -r);
    f->ring_up = true;
    if ((r = io_uring_register_eventfd(&f->ring, f->efd)) < 0)
        return fail(why, len, GR_ERR_UNAVAILABLE, "io_uring_register_eventfd: %s", -r);
    f->slots = calloc(f->depth, sizeof(*f->slots));
    f->free_slot = calloc(f->depth, sizeof(*f->free_slot));
    if (f->slots == NULL || f->free_slot == NULL)
        return fail(why, len, GR_ERR_OUT_OF_MEMORY, "%s", ENOMEM);
    for (unsigned k = 0; k < f->depth; k++)
        f->free_slot[f->n_free++] = f->depth - 1 - k;
    f->uring = true;
    return GR_OK;
}

static void uring_teardown(gr_fio *f)
{
    if (f->ring_up)
        io_uring_queue_exit(&f->ring);
    f->ring_up = false;
    free(f->slots);
    free(f->free_slot);
    f->slots = NULL;
    f->free_slot = NULL;
    f->n_free = 0;
    f->uring = false;
}

/* One operation, synchronously, on a pread thread. */
static int64_t run_op(const gr_fio_op *op)
{
    ssize_t r;

    do {
        switch (op->kind) {
        case GR_FIO_READ:
            r = pread(op->fd, op->buf, op->len, (off_t)op->off);
            break;
        case GR_FIO_WRITE:
            r = pwrite(op->fd, op->buf, op->len, (off_t)op->off);
            break;
        default:
            r = fsync(op->fd);
            break;
        }
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -(int64_t)errno : (int64_t)r;
}

static void *pread_main(void *arg)
{
    gr_fio *f = arg;
    uint64_t one = 1;

    pthread_mutex_lock(&f->mu);
    for (;;) {
        gr_fio_op op;

        while (!f->stop && f->q_count == 0)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->q_count == 0) /* stopping, and nothing left */
            break;
        op = f->queue[f->q_head];
        f->q_head = (f->q_head + 1) % f->depth;
        f->q_count--;
        pthread_mutex_unlock(&f->mu);
        op.result = run_op(&op);
        pthread_mutex_lock(&f->mu);
        f->done[f->n_done++] = op;
        if (write(f->efd, &one, sizeof(one)) < 0) {
            /* The counter is at its maximum: a wake-up is pending anyway. */
        }
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static gr_status pread_create(gr_fio *f, char *why, size_t len)
{
    sigset_t all, old;

    f->queue = calloc(f->depth, sizeof(*f->queue));
    f->done = calloc(f->depth, sizeof(*f->done));
    if (f->queue == NULL || f->done == NULL)
        return fail(why, len, GR_ERR_OUT_OF_MEMORY, "%s", ENOMEM);
    /* The threads start with every signal blocked: SIGINT and SIGTERM go to the owner. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned k = 0; k < PREAD_THREADS; k++) {
        int e = pthread_create(&f->threads[k], NULL, pread_main, f);

        if (e != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            return fail(why, len, GR_ERR_OUT_OF_MEMORY, "cannot start an I/O thread: %s", e);
        }
        f->n_threads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return GR_OK;
}

gr_status gr_fio_create(gr_fio_engine want, unsigned depth, bool refuse_uring, gr_fio **out,
                        char *fallback, size_t len)
{
    gr_fio *f = calloc(1, sizeof(*f));
    gr_status st = GR_OK;

    *out = NULL;
    fallback[0] = '\0';
    if (f == NULL)
        return fail(fallback, len, GR_ERR_OUT_OF_MEMORY, "%s", ENOMEM);
    f->depth = depth ? depth : 1;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if ((f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        st = fail(fallback, len, GR_ERR_OUT_OF_MEMORY, "eventfd: %s", errno);
        goto out_free;
    }
    if (want != GR_FIO_PREAD) {
        if ((st = uring_create(f, refuse_uring, fallback, len)) == GR_OK)
            goto out;
        uring_teardown(f);
        if (want == GR_FIO_URING || st == GR_ERR_OUT_OF_MEMORY)
            goto out_close;
    }
    {
        char why[256];

        if ((st = pread_create(f, why, sizeof(why))) == GR_OK)
            goto out;
        snprintf(fallback, len, "%s", why);
    }
    gr_fio_destroy(f);
    return st;
out:
    *out = f;
    return GR_OK;
out_close:
    close(f->efd);
out_free:
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
    return st;
}

gr_status gr_fio_submit(gr_fio *f, const gr_fio_op *op)
{
    if (op->len > GR_FIO_MAX_LEN)
        return GR_ERR_INVALID_ARGUMENT;
    if (f->in_flight >= f->depth)
        return GR_ERR_INVALID_USAGE;
    f->in_flight++;
    if (f->uring) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);
        unsigned slot;

        if (sqe == NULL) { /* full of prepared entries: hand them over, then one is free */
            gr_fio_flush(f);
            sqe = io_uring_get_sqe(&f->ring);
        }
        if (sqe == NULL) {
            f->in_flight--;
            return GR_ERR_INVALID_USAGE;
        }
        slot = f->free_slot[--f->n_free];
        f->slots[slot] = *op;
        if (op->kind == GR_FIO_READ)
            io_uring_prep_read(sqe, op->fd, op->buf, op->len, op->off);
        else if (op->kind == GR_FIO_WRITE)
            io_uring_prep_write(sqe, op->fd, op->buf, op->len, op->off);
        else
            io_uring_prep_fsync(sqe, op->fd, 0);
        io_uring_sqe_set_data64(sqe, slot);
        f->unsubmitted++;
        return GR_OK;
    }
    pthread_mutex_lock(&f->mu);
    f->queue[(f->q_head + f->q_count) % f->depth] = *op;
    f->q_count++;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return GR_OK;
}

void gr_fio_flush(gr_fio *f)
{
    int r;

    if (!f->uring || f->unsubmitted == 0)
        return;
    /* EINTR, EAGAIN, EBUSY: the entries stay in the submission ring, and the next flush
     * hands them over. */
    r = io_uring_submit(&f->ring);
    if (r > 0)
        f->unsubmitted -= (unsigned)r < f->unsubmitted ? (unsigned)r : f->unsubmitted;
}

unsigned gr_fio_reap(gr_fio *f, gr_fio_op *done, unsigned max)
{
    unsigned n = 0;

    if (f->uring) {
        struct io_uring_cqe *cqe;

        gr_fio_flush(f);
        while (n < max && io_uring_peek_cqe(&f->ring, &cqe) == 0) {
            unsigned slot = (unsigned)io_uring_cqe_get_data64(cqe);

            done[n] = f->slots[slot];
            done[n++].result = cqe->res;
            io_uring_cqe_seen(&f->ring, cqe);
            f->free_slot[f->n_free++] = slot;
        }
    } else {
        pthread_mutex_lock(&f->mu);
        while (n < max && f->n_done > 0)
            done[n++] = f->done[--f->n_done];
        pthread_mutex_unlock(&f->mu);
    }
    f->in_flight -= n;
    return n;
}

unsigned gr_fio_in_flight(const gr_fio *f)
{
    return f->in_flight;
}

void gr_fio_wait(gr_fio *f, int timeout_ms)
{
    struct pollfd p = {.fd = f->efd, .events = POLLIN};
    uint64_t count;

    gr_fio_flush(f);
    /* EINTR: a signal, which the caller looks at. */
    if (poll(&p, 1, timeout_ms) > 0 && read(f->efd, &count, sizeof(count)) < 0) {
        /* EAGAIN: another reader cleared it first; nothing is lost. */
    }
}

void gr_fio_wake(gr_fio *f)
{
    uint64_t one = 1;
    int saved = errno; /* from a signal handler: errno is the interrupted code's */

    if (write(f->efd, &one, sizeof(one)) < 0) {
        /* The counter is at its maximum: a wake-up is pending anyway. */
    }
    errno = saved;
}

void gr_fio_destroy(gr_fio *f)
{
    gr_fio_op sink[64];

    if (f == NULL)
        return;
    while (f->in_flight > 0) {
        if (gr_fio_reap(f, sink, 64) == 0)
            gr_fio_wait(f, 100);
    }
    if (f->uring)
        uring_teardown(f);
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    for (unsigned k = 0; k < f->n_threads; k++)
        pthread_join(f->threads[k], NULL);
    free(f->queue);
    free(f->done);
    close(f->efd);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

/*
 * fileio_test.c - tools/graphrun/fileio.c, the driver's asynchronous file I/O, through both
 * engines: io_uring (where this kernel allows it: SKIP otherwise, saying why) and the pread
 * threads, which every case runs whatever the kernel allows. Files are written with many
 * operations in flight and read back with the other engine and with plain pread, so that
 * neither engine is checked against itself only; with O_DIRECT where the file system
 * takes it. Errors come back as -errno on the operation that failed, a short read at the
 * end of a file as the bytes there were, and a refused io_uring as a fallback with its
 * reason.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testing.h"
#include "tools/graphrun/fileio.h"

#define FILES 8
#define PIECES 16
#define PIECE (64 * 1024)
#define ALIGN 4096

static char *tmp_path(const char *name)
{
    const char *dir = getenv("TEST_TMPDIR");
    char *p = NULL;

    ASSERT_TRUE(asprintf(&p, "%s/%s", dir ? dir : "/tmp", name) > 0);
    return p;
}

/* An engine of `want`, or NULL with the case skipped when io_uring is not here. */
static gr_fio *engine(gr_fio_engine want, char *why, size_t len)
{
    gr_fio *f = NULL;
    gr_status st = gr_fio_create(want, 64, false, &f, why, len);

    if (want == GR_FIO_URING && st == GR_ERR_UNAVAILABLE)
        return NULL;
    ASSERT_EQ(st, GR_OK);
    return f;
}

/* Every operation submitted, then every completion reaped (waiting between), each checked
 * to have moved all its bytes. */
static void run_all(gr_fio *f, gr_fio_op *ops, unsigned n)
{
    unsigned sent = 0, got = 0;
    gr_fio_op done[16];

    while (got < n) {
        while (sent < n && gr_fio_in_flight(f) < 64)
            ASSERT_EQ(gr_fio_submit(f, &ops[sent++]), GR_OK);
        unsigned k = gr_fio_reap(f, done, 16);

        if (k == 0)
            gr_fio_wait(f, 1000);
        for (unsigned q = 0; q < k; q++) {
            const gr_fio_op *o = &done[q];

            ASSERT_EQ(o->result, o->kind == GR_FIO_FSYNC ? 0 : (int64_t)o->len);
            ASSERT_LT_U64(o->tag, n); /* the caller's op, whole */
            ASSERT_EQ(o->off, ops[o->tag].off);
            ASSERT_TRUE(o->buf == ops[o->tag].buf);
        }
        got += k;
    }
    ASSERT_EQ(gr_fio_in_flight(f), 0);
}

/* FILES files of PIECES pieces, written by engine `w` (each piece an operation, all in
 * flight at once, out of order), fsynced, then read back by engine `r` and by pread. */
static void round_trip(gr_fio_engine w, gr_fio_engine r, bool direct)
{
    unsigned n = FILES * PIECES;
    gr_fio_op *ops = calloc(n + FILES, sizeof(*ops));
    char *data, *back, why[256], *path[FILES];
    int fd[FILES];
    uint64_t seed = 7;
    gr_fio *f;

    ASSERT_TRUE(ops != NULL);
    ASSERT_EQ(posix_memalign((void **)&data, ALIGN, (size_t)n * PIECE), 0);
    ASSERT_EQ(posix_memalign((void **)&back, ALIGN, (size_t)n * PIECE), 0);
    for (size_t k = 0; k < (size_t)n * PIECE / 8; k++)
        ((uint64_t *)data)[k] = gr_test_rand(&seed);
    memset(back, 0, (size_t)n * PIECE);
    for (unsigned i = 0; i < FILES; i++) {
        char name[64];

        snprintf(name, sizeof(name), "fio_%d_%d_%d_%u", w, r, direct, i);
        path[i] = tmp_path(name);
        fd[i] = open(path[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0),
                     0600);
        if (fd[i] < 0 && direct && errno == EINVAL) {
            free(ops);
            free(data);
            free(back);
            SKIP("this file system refuses O_DIRECT");
        }
        ASSERT_TRUE(fd[i] >= 0);
    }
    /* Pieces in a shuffled order, so completions come back out of order. */
    for (unsigned k = 0; k < n; k++)
        ops[k] = (gr_fio_op){GR_FIO_WRITE, fd[k % FILES], data + (size_t)k * PIECE, PIECE,
                             (uint64_t)(k / FILES) * PIECE, k, 0};
    for (unsigned k = n - 1; k > 0; k--) {
        unsigned j = (unsigned)gr_test_below(&seed, k + 1);
        gr_fio_op t = ops[k];

        ops[k] = ops[j];
        ops[j] = t;
    }
    for (unsigned k = 0; k < n; k++)
        ops[k].tag = k;
    ASSERT_TRUE((f = engine(w, why, sizeof(why))) != NULL);
    run_all(f, ops, n);
    for (unsigned i = 0; i < FILES; i++)
        ops[i] = (gr_fio_op){GR_FIO_FSYNC, fd[i], NULL, 0, 0, i, 0};
    run_all(f, ops, FILES);
    gr_fio_destroy(f);
    for (unsigned k = 0; k < n; k++)
        ops[k] = (gr_fio_op){GR_FIO_READ, fd[k % FILES], back + (size_t)k * PIECE, PIECE,
                             (uint64_t)(k / FILES) * PIECE, k, 0};
    ASSERT_TRUE((f = engine(r, why, sizeof(why))) != NULL);
    run_all(f, ops, n);
    gr_fio_destroy(f);
    ASSERT_TRUE(memcmp(data, back, (size_t)n * PIECE) == 0);
    /* And as plain pread sees the files. */
    for (unsigned k = 0; k < n; k++) {
        ASSERT_EQ(pread(fd[k % FILES], back, PIECE, (off_t)(k / FILES) * PIECE), PIECE);
        ASSERT_TRUE(memcmp(back, data + (size_t)k * PIECE, PIECE) == 0);
    }
    for (unsigned i = 0; i < FILES; i++) {
        close(fd[i]);
        unlink(path[i]);
        free(path[i]);
    }
    free(ops);
    free(data);
    free(back);
}

static bool have_uring(void)
{
    char why[256];
    gr_fio *f = NULL;

    if (gr_fio_create(GR_FIO_URING, 4, false, &f, why, sizeof(why)) != GR_OK)
        return false;
    gr_fio_destroy(f);
    return true;
}

static void pread_round_trip(void)
{
    round_trip(GR_FIO_PREAD, GR_FIO_PREAD, false);
}

static void pread_round_trip_direct(void)
{
    round_trip(GR_FIO_PREAD, GR_FIO_PREAD, true);
}

static void uring_writes_pread_reads(void)
{
    if (!have_uring())
        SKIP("io_uring is not available here (the pread cases cover the fallback)");
    round_trip(GR_FIO_URING, GR_FIO_PREAD, false);
    round_trip(GR_FIO_PREAD, GR_FIO_URING, true);
}

static void uring_round_trip_direct(void)
{
    if (!have_uring())
        SKIP("io_uring is not available here (the pread cases cover the fallback)");
    round_trip(GR_FIO_URING, GR_FIO_URING, true);
}

/* Errors are the failed operation's own result; a read past the end is short, then 0. */
static void errors_and_short_reads(gr_fio_engine e)
{
    char *path = tmp_path("fio_short"), buf[256], why[256];
    gr_fio_op ops[3], done[3];
    unsigned got = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    gr_fio *f;

    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(write(fd, "0123456789", 10), 10);
    ASSERT_TRUE((f = engine(e, why, sizeof(why))) != NULL);
    ops[0] = (gr_fio_op){GR_FIO_READ, fd, buf, sizeof(buf), 4, 0, 0};
    ops[1] = (gr_fio_op){GR_FIO_READ, fd, buf + 128, 64, 100, 1, 0};
    ops[2] = (gr_fio_op){GR_FIO_READ, -1, buf, 10, 0, 2, 0};
    for (int k = 0; k < 3; k++)
        ASSERT_EQ(gr_fio_submit(f, &ops[k]), GR_OK);
    while (got < 3) {
        unsigned n = gr_fio_reap(f, done + got, 3 - got);

        if (n == 0)
            gr_fio_wait(f, 1000);
        got += n;
    }
    for (int k = 0; k < 3; k++) {
        int64_t want = done[k].tag == 0 ? 6 : done[k].tag == 1 ? 0 : -EBADF;

        ASSERT_EQ(done[k].result, want);
    }
    ASSERT_TRUE(memcmp(buf, "456789", 6) == 0);
    gr_fio_destroy(f);
    close(fd);
    unlink(path);
    free(path);
}

static void pread_errors_and_short_reads(void)
{
    errors_and_short_reads(GR_FIO_PREAD);
}

static void uring_errors_and_short_reads(void)
{
    if (!have_uring())
        SKIP("io_uring is not available here (the pread cases cover the fallback)");
    errors_and_short_reads(GR_FIO_URING);
}

/* A kernel that refuses io_uring: auto falls back and says why; io_uring alone fails. */
static void refused_uring_falls_back(void)
{
    char why[256];
    gr_fio *f = NULL;

    ASSERT_EQ(gr_fio_create(GR_FIO_AUTO, 8, true, &f, why, sizeof(why)), GR_OK);
    ASSERT_STR_EQ(gr_fio_engine_name(f), "pread");
    ASSERT_STR_CONTAINS(why, "io_uring_setup: Operation not permitted");
    gr_fio_destroy(f);
    ASSERT_EQ(gr_fio_create(GR_FIO_URING, 8, true, &f, why, sizeof(why)), GR_ERR_UNAVAILABLE);
    ASSERT_TRUE(f == NULL);
    ASSERT_EQ(gr_fio_create(GR_FIO_PREAD, 8, false, &f, why, sizeof(why)), GR_OK);
    ASSERT_STR_EQ(why, "");
    gr_fio_destroy(f);
}

/* No more than depth in flight; no operation over GR_FIO_MAX_LEN. */
static void limits(void)
{
    char why[256], buf[8];
    gr_fio_op op = {GR_FIO_FSYNC, -1, NULL, 0, 0, 0, 0}, done[2];
    gr_fio *f;

    ASSERT_EQ(gr_fio_create(GR_FIO_AUTO, 2, false, &f, why, sizeof(why)), GR_OK);
    ASSERT_EQ(gr_fio_submit(f, &op), GR_OK);
    ASSERT_EQ(gr_fio_submit(f, &op), GR_OK);
    ASSERT_EQ(gr_fio_submit(f, &op), GR_ERR_INVALID_USAGE);
    op = (gr_fio_op){GR_FIO_READ, -1, buf, GR_FIO_MAX_LEN + 1u, 0, 0, 0};
    ASSERT_EQ(gr_fio_submit(f, &op), GR_ERR_INVALID_ARGUMENT);
    for (unsigned got = 0; got < 2;) {
        unsigned n = gr_fio_reap(f, done, 2);

        if (n == 0)
            gr_fio_wait(f, 1000);
        got += n;
    }
    ASSERT_EQ(done[0].result, -EBADF);
    gr_fio_destroy(f);
}

static void *wake_later(void *arg)
{
    usleep(20000);
    gr_fio_wake(arg);
    return NULL;
}

/* Another thread's wake ends a wait with no limit. */
static void wake_from_another_thread(void)
{
    char why[256];
    pthread_t th;
    gr_fio *f;

    for (int e = GR_FIO_AUTO; e <= GR_FIO_PREAD; e += 2) {
        ASSERT_TRUE((f = engine((gr_fio_engine)e, why, sizeof(why))) != NULL);
        ASSERT_EQ(pthread_create(&th, NULL, wake_later, f), 0);
        gr_fio_wait(f, -1);
        ASSERT_EQ(pthread_join(th, NULL), 0);
        gr_fio_destroy(f);
    }
}

GR_TEST_MAIN(GR_TEST(pread_round_trip), GR_TEST(pread_round_trip_direct),
             GR_TEST(uring_writes_pread_reads), GR_TEST(uring_round_trip_direct),
             GR_TEST(pread_errors_and_short_reads), GR_TEST(uring_errors_and_short_reads),
             GR_TEST(refused_uring_falls_back), GR_TEST(limits),
             GR_TEST(wake_from_another_thread))

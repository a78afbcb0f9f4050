/*
 * readahead.c - the first inputs read into the page cache while the run starts
 * (readahead.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/graphrun/readahead.h"

/* The scratch buffer the files are read through: large enough that the kernel's own
 * read-ahead keeps the disk's queue full, small enough to stop soon when asked. */
#define PIECE (4u << 20)
#define STACK (256u << 10)

struct gr_readahead {
    const gr_io_plan *plan;
    const bool *skip;
    uint64_t limit;
    pthread_t thread;
    bool joined;
    atomic_bool stop;
    /* Written by the thread, read by the owner once the thread is joined. */
    uint8_t *warm;            /* plan->count * n_inputs: read whole */
    uint64_t files, bytes;    /* read whole */
    char *buf;                /* PIECE: the owner's allocation, so that the thread makes no
                                 malloc arena of its own (address space under RLIMIT_AS) */
    uint64_t total;           /* bytes read, whole files or not */
    int64_t started_ns;       /* when the thread started */
    int64_t reading_ns;       /* from then to the end of the last file read whole */
    /* Tests (GR_TEST_READ_AHEAD): stop once this many bytes are read (0: never), and let
     * the thread run to its end however soon the owner stops it. */
    uint64_t stop_after;
    bool finish;
};

static uint64_t file_bytes(const gr_io_plan *plan, uint64_t k)
{
    const gr_io_file *f = &plan->in[k];

    return f->data_offset + f->elems * gr_dtype_size(plan->opt.in_dtype[k % plan->opt.n_inputs]);
}

/* Read file k through the page cache; true when it was read whole (a file that has changed
 * size since it was planned is the stream's to refuse). A file read in part (stopped, or
 * shorter than planned) is of no use to the stream, which reads it whole with O_DIRECT:
 * it leaves the page cache at once, all of it, for the kernel's own read-ahead may have
 * gone past what was read. */
static bool read_file(gr_readahead *r, uint64_t k)
{
    const gr_io_file *f = &r->plan->in[k];
    uint64_t size = file_bytes(r->plan, k), off = 0;
    struct stat sb;
    int fd;

    /* Not blocking on a path swapped for a FIFO since it was planned: the stream refuses
     * what is not the file it planned. */
    if ((fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
        return false;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return false;
    }
    /* The kernel's read-ahead for a file read in order, twice its default window: on dev
     * (virtio disk) this thread read 4 x 400 MB at 1.5-2.0 GB/s with it, 0.5-1.55 without;
     * the disk gives 2.3 to O_DIRECT reads. */
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    while (off < size && !atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        size_t want = size - off < PIECE ? (size_t)(size - off) : PIECE;
        ssize_t got;

        if (r->stop_after && want > r->stop_after - r->total)
            want = (size_t)(r->stop_after - r->total);
        got = pread(fd, r->buf, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        off += (uint64_t)got;
        r->total += (uint64_t)got;
        if (r->stop_after && r->total >= r->stop_after)
            atomic_store(&r->stop, true); /* as the owner would, in the middle of a file */
    }
    if (off != size && off != 0)
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return off == size;
}

static void read_ahead(gr_readahead *r)
{
    uint32_t ni = r->plan->opt.n_inputs;
    uint64_t used = 0;

    for (uint64_t i = 0; i < r->plan->count; i++) {
        if (r->skip && r->skip[i])
            continue;
        for (uint32_t p = 0; p < ni; p++) {
            uint64_t k = i * ni + p, size = file_bytes(r->plan, k);

            if (gr_inputs_is_stdin(&r->plan->src, r->plan->in[k].path))
                continue; /* held in memory already */
            if (atomic_load_explicit(&r->stop, memory_order_relaxed) || used + size > r->limit)
                return;
            used += size;
            if (read_file(r, k)) {
                r->warm[k] = 1;
                r->files++;
                r->bytes += size;
                r->reading_ns = gr_now_ns() - r->started_ns;
            }
        }
    }
}

static void *readahead_main(void *arg)
{
    gr_readahead *r = arg;

    r->started_ns = gr_now_ns();
    read_ahead(r);
    return NULL;
}

/* GR_TEST_READ_AHEAD, for tests only: "whole", the owner's stop waits for the thread to
 * read up to its bound, however soon the runtime started, so that what it read is known;
 * "part:N", the same but the thread stops itself once it has read N bytes, in the middle
 * of a file, as a runtime that started then would stop it. */
static void test_knob(gr_readahead *r)
{
    const char *v = getenv("GR_TEST_READ_AHEAD");

    if (v != NULL && strncmp(v, "part:", 5) == 0)
        r->stop_after = strtoull(v + 5, NULL, 10);
    r->finish = v != NULL && (strcmp(v, "whole") == 0 || r->stop_after != 0);
}

gr_status gr_readahead_start(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                             gr_readahead **out)
{
    uint64_t n = plan->count * plan->opt.n_inputs;
    gr_readahead *r = calloc(1, sizeof(*r));
    pthread_attr_t attr;
    sigset_t all, old;
    bool started;

    *out = NULL;
    if (r == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    r->plan = plan;
    r->skip = skip;
    r->limit = limit;
    r->warm = calloc(n + 1, 1);
    r->buf = malloc(PIECE);
    test_knob(r);
    atomic_init(&r->stop, false);
    /* A small stack: under an address-space limit (prlimit --as) the window and the runtime
     * starting beside this thread need the room more. Every signal blocked: SIGINT and
     * SIGTERM go to the owner. */
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    started = r->warm != NULL && r->buf != NULL &&
              pthread_create(&r->thread, &attr, readahead_main, r) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (!started) {
        free(r->buf);
        free(r->warm);
        free(r);
        return GR_ERR_OUT_OF_MEMORY;
    }
    *out = r;
    return GR_OK;
}

void gr_readahead_stop(gr_readahead *r)
{
    if (r == NULL || r->joined)
        return;
    if (!r->finish)
        atomic_store(&r->stop, true);
    pthread_join(r->thread, NULL);
    r->joined = true;
    free(r->buf); /* the thread is done with it */
    r->buf = NULL;
}

bool gr_readahead_warm(const gr_readahead *r, uint64_t k)
{
    return r != NULL && r->joined && r->warm[k];
}

void gr_readahead_counts(const gr_readahead *r, uint64_t *files, uint64_t *bytes,
                         double *seconds)
{
    *files = r && r->joined ? r->files : 0;
    *bytes = r && r->joined ? r->bytes : 0;
    *seconds = r && r->joined ? (double)r->reading_ns / 1e9 : 0;
}

void gr_readahead_destroy(gr_readahead *r)
{
    if (r == NULL)
        return;
    r->finish = false;
    gr_readahead_stop(r); /* frees the buffer */
    free(r->warm);
    free(r);
}

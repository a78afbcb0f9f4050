/*
 * fileio.h - asynchronous file reads, writes and fsyncs for `graphrun run`'s streaming
 * pipeline (stream.h): several files in flight at once, their completions collected by the
 * one thread that drives the pipeline.
 *
 * Two engines behind one interface:
 *   - io_uring (liburing): the kernel does the I/O; one ring, submitted and reaped by the
 *     owner. Chosen by GR_FIO_AUTO where the kernel allows it.
 *   - pread: a few threads doing pread, pwrite and fsync, for kernels or sandboxes that
 *     refuse io_uring (io_uring_setup fails: ENOSYS, EPERM under seccomp, or
 *     kernel.io_uring_disabled), or when asked for (--io pread).
 * Either way an eventfd (gr_fio_wake_fd) is written whenever an operation completes, so the
 * owner sleeps in one place (gr_fio_wait) for I/O and for anything else that writes it (a
 * job's completion callback, a signal handler: gr_fio_wake is async-signal-safe).
 *
 * An operation is at most GR_FIO_MAX_LEN bytes and completes exactly once, with the bytes
 * moved or -errno. Short transfers are reported as they are (a read at the end of a file);
 * the caller submits the rest.
 *
 * Threads: gr_fio_submit, gr_fio_reap, gr_fio_wait and gr_fio_destroy are owner only (one
 * thread per gr_fio); gr_fio_wake any thread, and signal handlers.
 */
#ifndef GR_FILEIO_H
#define GR_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>

#define GR_FIO_MAX_LEN (1u << 30)

/* The pread engine's threads (hostneed.h counts them). */
#define GR_FIO_PREAD_THREADS 4u

typedef enum gr_fio_engine {
    GR_FIO_AUTO = 0, /* io_uring, else pread (saying why) */
    GR_FIO_URING,    /* io_uring or nothing */
    GR_FIO_PREAD,    /* threads doing pread and pwrite */
} gr_fio_engine;

typedef enum gr_fio_kind {
    GR_FIO_READ,
    GR_FIO_WRITE,
    GR_FIO_FSYNC,
} gr_fio_kind;

typedef struct gr_fio_op {
    gr_fio_kind kind;
    int fd;
    void *buf;       /* READ, WRITE */
    uint32_t len;    /* READ, WRITE: at most GR_FIO_MAX_LEN */
    uint64_t off;    /* file offset */
    uint64_t tag;    /* the caller's, given back */
    int64_t result;  /* on completion: bytes moved (0 for FSYNC), or -errno */
} gr_fio_op;

typedef struct gr_fio gr_fio;

/* An engine with room for `depth` operations in flight (the caller keeps to it). `want`
 * GR_FIO_AUTO falls back to pread when io_uring cannot be set up, with the reason in
 * fallback[len] ("" when there was none); `refuse_uring` makes io_uring's setup fail as a
 * refusing kernel's would (tests of the fallback). GR_ERR_UNAVAILABLE (GR_FIO_URING and no
 * io_uring) or GR_ERR_OUT_OF_MEMORY with the reason in fallback. */
gr_status gr_fio_create(gr_fio_engine want, unsigned depth, bool refuse_uring, gr_fio **out,
                        char *fallback, size_t len);

/* "io_uring" or "pread". */
const char *gr_fio_engine_name(const gr_fio *f);

/* Queue one operation (copied). GR_ERR_INVALID_ARGUMENT for a length over GR_FIO_MAX_LEN;
 * GR_ERR_INVALID_USAGE when `depth` are already in flight. */
gr_status gr_fio_submit(gr_fio *f, const gr_fio_op *op);

/* Hand queued operations to the kernel (io_uring) now; gr_fio_wait and gr_fio_reap do it
 * too. */
void gr_fio_flush(gr_fio *f);

/* Completed operations, at most `max` of them into done[], without waiting. */
unsigned gr_fio_reap(gr_fio *f, gr_fio_op *done, unsigned max);

/* Operations in flight (submitted, not yet reaped). */
unsigned gr_fio_in_flight(const gr_fio *f);

/* Sleep until an operation completes or anything writes the wake fd (gr_fio_wake), or
 * `timeout_ms` pass (-1: no limit). Returns at once when either happened since the last
 * wait. */
void gr_fio_wait(gr_fio *f, int timeout_ms);

/* Wake gr_fio_wait. Any thread; async-signal-safe. */
void gr_fio_wake(gr_fio *f);

/* Wait for every operation in flight, then free everything. NULL is a no-op. */
void gr_fio_destroy(gr_fio *f);

#endif /* GR_FILEIO_H */

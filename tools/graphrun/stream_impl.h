/*
 * stream_impl.h - what the two halves of the streaming pipeline share (stream.h): the
 * records of a tensor on its way through (stream.c: reading, submitting, the jobs, the loop)
 * and of its outputs (stream_out.c: writing, placing, making durable). Internal to them;
 * the pipeline's one thread only.
 */
#ifndef GR_STREAM_IMPL_H
#define GR_STREAM_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/graphrun/fileio.h"
#include "tools/graphrun/progress.h"
#include "tools/graphrun/stream.h"

#define WRITE_FILES 32              /* tensors being written at once */
#define DURABLE_NS (50 * 1000000ll) /* --sync each: a directory sync per batch, at most */

enum { T_READING, T_READY, T_RUNNING, T_TO_WRITE, T_WRITING };

struct tensor;

/* One file of a tensor, read or written in pieces: memory base + x is file offset
 * file0 + x, and [next, end) is still to be handed to the engine. */
typedef struct port_io {
    struct tensor *t;
    uint32_t port;
    bool out;
    int fd;
    bool direct, want_fsync, done;
    bool warm; /* a read of a file the page cache has (readahead.h): dropped once in */
    char *base;
    uint64_t file0, next, end;
    uint64_t need;      /* reads: bytes up to here must arrive; writes: the file's length */
    uint32_t in_flight;
    struct port_io *qnext;
} port_io;

typedef struct tensor {
    uint64_t i;
    int state;
    bool failed, abandoned;  /* failed: its failure is said; abandoned: ends not run */
    gr_window_layout lay;
    char *ext_in[GR_MAX_PORTS], *ext_out[GR_MAX_PORTS];
    port_io in[GR_MAX_PORTS], out[GR_MAX_PORTS];
    uint32_t ports_left; /* files not yet read (READING) or written (WRITING) */
    uint32_t ops;        /* I/O in flight */
    struct tensor *next; /* the ready or to-write list */
} tensor;

typedef struct job_rec {
    gr_job *job;
    uint64_t n, seen;
    tensor **t; /* by job index; NULL once its end is handled */
} job_rec;

typedef struct out_dir {
    char *path;
    int fd;
    bool dirty;
} out_dir;

typedef struct stream {
    const gr_stream_config *cfg;
    gr_io_plan *plan;
    gr_stream_result *res;
    gr_fio *fio;
    gr_window *win;
    uint64_t next_i, next_submit, to_run, active, reading, writing;
    uint8_t *gone;          /* plan->count: ended before its submission (a read failed) */
    tensor *ready, *to_write, *to_write_tail; /* ready: sorted by index */
    uint64_t group_target;
    job_rec *jobs;
    uint32_t n_jobs, cap_jobs;
    port_io *rq, *rq_tail, *wq, *wq_tail; /* files with pieces to hand over */
    uint32_t reads_in_flight;
    bool stopping, blocked; /* blocked: the next read waits for room in the window */
    uint64_t *pending;      /* placed, waiting to be made durable */
    uint64_t n_pending, cap_pending;
    int64_t durable_at;
    out_dir *dirs;
    uint32_t n_dirs, cap_dirs;
    bool refuse_direct;     /* GR_TEST_IO_FAULT=direct */
    uint64_t enospc_at, writes_done; /* GR_TEST_IO_FAULT=enospc:N: the Nth write fails */
    gr_progress progress;
    uint64_t total_bytes, done_bytes;
} stream;

/* The first file that went through the page cache for want of O_DIRECT, said once. */
void gr__stream_note_buffered(stream *s, const char *path, int e);

/* Tensor i's bytes on input port p, output port p, and in all (in and out). */
uint64_t gr__stream_in_bytes(const stream *s, uint64_t i, uint32_t p);
uint64_t gr__stream_out_bytes(const stream *s, uint64_t i, uint32_t p);
uint64_t gr__stream_tensor_bytes(const stream *s, uint64_t i);

/* File p at the tail of a queue of files with pieces to hand over. */
void gr__stream_enqueue(port_io **head, port_io **tail, port_io *p);

/* Tensor t's failure, said once (hooks.failed); the run stops unless keep_going. */
void gr__stream_fail(stream *s, tensor *t, int kind, const char *node, const char *message);

/* The tensor is over and no I/O on it is in flight: closed, its unplaced temporary files
 * removed, its extents given back, freed. */
void gr__stream_end_tensor(stream *s, tensor *t);

/* A failed or abandoned tensor ends once its I/O is in. */
void gr__stream_settle(stream *s, tensor *t);

/* stream_out.c: start the writes of the tensors the runtime has done (WRITE_FILES at a
 * time); a write or fsync that came back (the tensor, or NULL once it is placed and gone);
 * the placed tensors made done once durable (`last`: now, whatever the sync mode). */
void gr__stream_start_writes(stream *s);
tensor *gr__stream_write_done(stream *s, gr_fio_op *op);
void gr__stream_make_durable(stream *s, bool last);

#endif /* GR_STREAM_IMPL_H */

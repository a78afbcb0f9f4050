/*
 * stream.c - the streaming pipeline of `graphrun run` (see stream.h).
 *
 * One thread drives everything through one loop: it reaps the I/O that completed, looks at
 * the jobs whose counters moved, starts reads while the window has room, submits a group,
 * starts writes, hands the queued pieces to the I/O engine, makes finished tensors durable,
 * and then sleeps on the engine's eventfd, which I/O completions and the jobs' completion
 * callbacks write, for at most TICK_MS (the tensors a job ends one by one are seen on the
 * tick; a job's end, or any I/O, wakes the loop at once). Nothing here is shared with
 * another thread but the eventfd, so nothing is locked.
 *
 * A tensor goes: READING (its files being read into its extents), READY (waiting for its
 * group's submission), RUNNING (in a job), TO_WRITE and WRITING (its outputs into their
 * temporary files, synced, then placed), and ends done, failed or not run; its extents go
 * back to the window when it ends, once no I/O on them is in flight. Files are opened only
 * while they are read or written, READ_FILES and WRITE_FILES tensors at a time, so a
 * dataset of many small files never runs out of descriptors.
 *
 * Why the window cannot deadlock: a segment holds the largest tensor, and every tensor
 * holding window memory is on its way out (I/O in flight ends, a ready group is submitted as
 * soon as the reads wait for room, a job ends), so room always comes back; the window's
 * grower only adds room, and always finishes.
 */
#define _GNU_SOURCE
#include "tools/graphrun/stream.h"
#include "tools/graphrun/stream_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/graphrun/npy.h"

#define DEPTH 64                     /* I/O operations in flight */
#define READ_OPS 32                  /* of them reads, at most: writes always find room */
#define READ_FILES 32                /* tensors being read at once */
#define PIECE (64u << 20)            /* the most one read or write moves */
#define TICK_MS 25

const char *gr_sync_name(gr_sync_mode m)
{
    return m == GR_SYNC_END ? "end" : m == GR_SYNC_NONE ? "none" : "each";
}

void gr__stream_note_buffered(stream *s, const char *path, int e)
{
    if (s->res->buffered_why[0] == '\0')
        snprintf(s->res->buffered_why, sizeof(s->res->buffered_why),
                 "the file system refused O_DIRECT (%s): %s", strerror(e), path);
}

uint64_t gr__stream_in_bytes(const stream *s, uint64_t i, uint32_t p)
{
    return s->plan->in[i * s->plan->opt.n_inputs + p].elems *
           gr_dtype_size(s->plan->opt.in_dtype[p]);
}

uint64_t gr__stream_out_bytes(const stream *s, uint64_t i, uint32_t p)
{
    return gr_io_out_elems(s->plan, i, p) * gr_dtype_size(s->plan->opt.out_dtype[p]);
}

uint64_t gr__stream_tensor_bytes(const stream *s, uint64_t i)
{
    uint64_t b = 0;

    for (uint32_t p = 0; p < s->plan->opt.n_inputs; p++)
        b += gr__stream_in_bytes(s, i, p);
    for (uint32_t p = 0; p < s->plan->opt.n_outputs; p++)
        b += gr__stream_out_bytes(s, i, p);
    return b;
}

void gr__stream_enqueue(port_io **head, port_io **tail, port_io *p)
{
    p->qnext = NULL;
    if (*tail)
        (*tail)->qnext = p;
    else
        *head = p;
    *tail = p;
}

static void begin_stop(stream *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    gr_window_grow_stop(s->win, false); /* no read starts any more: the window is enough */
    /* What has not started is not run; iterations running finish and are written. */
    for (uint32_t k = 0; k < s->n_jobs; k++)
        gr_job_cancel(s->jobs[k].job);
}

/* Tensor t's failure, said once; the run stops unless keep_going. */
void gr__stream_fail(stream *s, tensor *t, int kind, const char *node, const char *message)
{
    if (t->failed)
        return;
    t->failed = true;
    s->res->failed++;
    s->cfg->hooks.failed(s->cfg->hooks.arg, t->i, kind, node, message);
    if (!s->cfg->keep_going)
        begin_stop(s);
}

/* Take t's files off a queue of files with pieces to hand over. */
static void unqueue(port_io **head, port_io **tail, const tensor *t)
{
    port_io *kept = NULL;

    for (port_io *q = *head, *next; q; q = next) {
        next = q->qnext;
        if (q->t == t)
            continue;
        q->qnext = NULL;
        if (kept)
            kept->qnext = q;
        else
            *head = q;
        kept = q;
    }
    if (kept == NULL)
        *head = NULL;
    *tail = kept;
}

/* The tensor is over (done, failed or not run) and no I/O on it is in flight: close what
 * is open, remove its unplaced temporary files, give its extents back. */
void gr__stream_end_tensor(stream *s, tensor *t)
{
    uint32_t ni = s->plan->opt.n_inputs, no = s->plan->opt.n_outputs;

    unqueue(&s->rq, &s->rq_tail, t);
    unqueue(&s->wq, &s->wq_tail, t);

    for (uint32_t p = 0; p < ni; p++) {
        if (t->in[p].fd >= 0)
            close(t->in[p].fd);
        gr_window_free(s->win, t->ext_in[p], t->lay.in_len[p]);
    }
    for (uint32_t p = 0; p < no; p++) {
        if (t->out[p].fd >= 0)
            gr_io_output_discard(s->plan, t->i * no + p, t->out[p].fd);
        gr_window_free(s->win, t->ext_out[p], t->lay.out_len[p]);
    }
    if (t->state == T_READING)
        s->reading--;
    if (t->state == T_WRITING)
        s->writing--;
    if (t->state == T_READING || t->state == T_READY)
        s->gone[t->i] = 1;
    s->active--;
    free(t);
}

/* A failed or abandoned tensor ends once its I/O is in. */
void gr__stream_settle(stream *s, tensor *t)
{
    if ((t->failed || t->abandoned) && t->ops == 0)
        gr__stream_end_tensor(s, t);
}

/* ------------------------------------------------------------------------------------ */
/* Reading.                                                                              */

static bool open_input(stream *s, tensor *t, uint32_t p)
{
    const gr_io_file *f = &s->plan->in[t->i * s->plan->opt.n_inputs + p];
    const char *name = gr_inputs_is_stdin(&s->plan->src, f->path) ? "stdin" : f->path;
    uint64_t bytes = gr__stream_in_bytes(s, t->i, p);
    port_io *io = &t->in[p];
    bool warm = gr_readahead_warm(s->cfg->warm, t->i * s->plan->opt.n_inputs + p);
    bool direct = s->cfg->direct && bytes >= GR_STREAM_DIRECT_MIN && !warm;
    struct stat sb;
    char why[600];
    int fd = -1;

    if (direct && !s->refuse_direct)
        fd = open(f->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (direct && fd < 0) {
        gr__stream_note_buffered(s, f->path, s->refuse_direct ? EINVAL : errno);
        direct = false;
    }
    if (fd < 0 && (fd = open(f->path, O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(why, sizeof(why), "%s: cannot open: %s", name, strerror(errno));
        gr__stream_fail(s, t, GR_RUN_ERR_INPUT, NULL, why);
        return false;
    }
    io->fd = fd;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != f->data_offset + bytes) {
        snprintf(why, sizeof(why),
                 "%s: changed since it was checked (%lld bytes, %llu when checked): run "
                 "again",
                 name, (long long)sb.st_size, (unsigned long long)(f->data_offset + bytes));
        gr__stream_fail(s, t, GR_RUN_ERR_INPUT, NULL, why);
        return false;
    }
    *io = (port_io){.t = t, .port = p, .out = false, .fd = fd, .direct = direct, .warm = warm,
                    .base = t->ext_in[p], .file0 = t->lay.in_off[p],
                    .need = t->lay.in_pad[p] + bytes};
    /* Direct: whole blocks from the one the data starts in; buffered: the data alone. */
    io->next = direct ? 0 : t->lay.in_pad[p];
    io->end = direct ? t->lay.in_len[p] : io->need;
    if (direct)
        s->res->direct_reads++;
    else
        s->res->buffered_reads++;
    s->res->warm_reads += warm;
    gr__stream_enqueue(&s->rq, &s->rq_tail, io);
    return true;
}

/* The next tensors' reads, while the window has room and READ_FILES allow. */
static void start_reads(stream *s)
{
    uint32_t ni = s->plan->opt.n_inputs, no = s->plan->opt.n_outputs;

    s->blocked = false;
    if (s->next_i >= s->plan->count) /* every read started: the window needs no more */
        gr_window_grow_stop(s->win, false);
    while (!s->stopping && s->next_i < s->plan->count && s->reading < READ_FILES) {
        uint64_t i = s->next_i;
        tensor *t;
        gr_status st = GR_OK;

        if (s->cfg->skip && s->cfg->skip[i]) {
            s->next_i++;
            continue;
        }
        if ((t = calloc(1, sizeof(*t))) == NULL) {
            s->res->status = GR_ERR_OUT_OF_MEMORY;
            snprintf(s->res->why, sizeof(s->res->why), "out of memory");
            begin_stop(s);
            return;
        }
        t->i = i;
        gr_window_layout_of(s->plan, i, &t->lay);
        for (uint32_t p = 0; p < GR_MAX_PORTS; p++)
            t->in[p].fd = t->out[p].fd = -1;
        for (uint32_t p = 0; p < ni && st == GR_OK; p++)
            st = gr_window_alloc(s->win, t->lay.in_len[p], (void **)&t->ext_in[p]);
        for (uint32_t p = 0; p < no && st == GR_OK; p++)
            if (t->lay.out_len[p])
                st = gr_window_alloc(s->win, t->lay.out_len[p], (void **)&t->ext_out[p]);
        if (st != GR_OK) {
            for (uint32_t p = 0; p < GR_MAX_PORTS; p++) {
                gr_window_free(s->win, t->ext_in[p], t->lay.in_len[p]);
                gr_window_free(s->win, t->ext_out[p], t->lay.out_len[p]);
            }
            free(t);
            if (st == GR_ERR_UNAVAILABLE) {
                s->blocked = true;
                return;
            }
            s->res->status = GR_ERR_OUT_OF_MEMORY;
            snprintf(s->res->why, sizeof(s->res->why), "no host memory for the window");
            begin_stop(s);
            return;
        }
        s->next_i++;
        s->active++;
        s->reading++;
        t->state = T_READING;
        for (uint32_t p = 0; p < ni; p++) {
            if (!open_input(s, t, p))
                break;
            t->ports_left++;
        }
        if (t->failed)
            gr__stream_end_tensor(s, t); /* nothing of it is in flight yet */
    }
}

/* Into the ready list, in index order (reads mostly end in the order they started, so
 * the walk is short). */
static void ready(stream *s, tensor *t)
{
    tensor **at = &s->ready;

    s->reading--;
    t->state = T_READY;
    while (*at && (*at)->i < t->i)
        at = &(*at)->next;
    t->next = *at;
    *at = t;
}

/* A piece of a read came back. The tensor stays (ready, still reading, or failed). */
static void read_done(stream *s, gr_fio_op *op)
{
    port_io *io = (port_io *)(uintptr_t)op->tag;
    tensor *t = io->t;
    const gr_io_file *f = &s->plan->in[t->i * s->plan->opt.n_inputs + io->port];
    const char *name = gr_inputs_is_stdin(&s->plan->src, f->path) ? "stdin" : f->path;
    uint64_t rel = op->off - io->file0, want;
    char why[600];

    if (t->failed || t->abandoned)
        return;
    if (op->result == -EINVAL && io->direct) {
        /* Refused for this file after all (alignment): the rest of it buffered. */
        gr__stream_note_buffered(s, f->path, EINVAL);
        io->direct = false;
        fcntl(io->fd, F_SETFL, fcntl(io->fd, F_GETFL) & ~O_DIRECT);
        goto again;
    }
    if (op->result < 0) {
        snprintf(why, sizeof(why), "%s: cannot read: %s", name, strerror((int)-op->result));
        gr__stream_fail(s, t, GR_RUN_ERR_INPUT, NULL, why);
        return;
    }
    s->res->read_bytes += (uint64_t)op->result;
    want = rel + op->len < io->need ? op->len : io->need > rel ? io->need - rel : 0;
    if ((uint64_t)op->result < want) {
        if (op->result == 0) {
            snprintf(why, sizeof(why), "%s: shorter than when it was checked (truncated "
                     "since?): run again", name);
            gr__stream_fail(s, t, GR_RUN_ERR_INPUT, NULL, why);
            return;
        }
        op->buf = (char *)op->buf + op->result;
        op->off += (uint64_t)op->result;
        op->len -= (uint32_t)op->result;
        if (io->direct && op->result % GR_WINDOW_ALIGN != 0) {
            io->direct = false;
            fcntl(io->fd, F_SETFL, fcntl(io->fd, F_GETFL) & ~O_DIRECT);
        }
        goto again;
    }
    if (io->in_flight > 0 || io->next < io->end)
        return;
    /* The whole file is in. A file read ahead leaves the page cache now: data read once
     * does not stay there (readahead.h). */
    if (io->warm)
        posix_fadvise(io->fd, 0, 0, POSIX_FADV_DONTNEED);
    close(io->fd);
    io->fd = -1;
    io->done = true;
    if (f->swap)
        gr_npy_swap(t->ext_in[io->port] + t->lay.in_pad[io->port], f->elems,
                    gr_dtype_size(s->plan->opt.in_dtype[io->port]));
    if (--t->ports_left == 0)
        ready(s, t);
    return;
again:
    if (gr_fio_submit(s->fio, op) == GR_OK) {
        io->in_flight++;
        t->ops++;
        s->reads_in_flight++;
        return;
    }
    gr__stream_fail(s, t, GR_RUN_ERR_INPUT, NULL, "no room to read again");
}

/* ------------------------------------------------------------------------------------ */
/* Submitting.                                                                           */

static void job_ended(gr_job *job, gr_status status, void *user)
{
    (void)job;
    (void)status;
    gr_fio_wake(user);
}

/* Submit the first n of the ready list as one job. */
static void submit_group(stream *s, uint64_t n)
{
    uint32_t ni = s->plan->opt.n_inputs, no = s->plan->opt.n_outputs;
    gr_job_options opts = GR_JOB_OPTIONS_INIT;
    gr_tensor *v = calloc(n, sizeof(*v));
    tensor **ts = calloc(n, sizeof(*ts));
    gr_error_info err;
    gr_job *job = NULL;
    gr_status st;

    if (s->n_jobs == s->cap_jobs) {
        uint32_t cap = s->cap_jobs ? s->cap_jobs * 2 : 16;
        job_rec *j = realloc(s->jobs, cap * sizeof(*j));

        if (j != NULL) {
            s->jobs = j;
            s->cap_jobs = cap;
        }
    }
    if (v == NULL || ts == NULL || s->n_jobs == s->cap_jobs) {
        free(v);
        free(ts);
        s->res->status = GR_ERR_OUT_OF_MEMORY;
        snprintf(s->res->why, sizeof(s->res->why), "out of memory");
        begin_stop(s);
        return;
    }
    for (uint64_t k = 0; k < n; k++) {
        tensor *t = s->ready;
        gr_tensor *x = &v[k];

        s->ready = t->next;
        ts[k] = t;
        for (uint32_t p = 0; p < ni; p++)
            x->in[p] = t->ext_in[p] + t->lay.in_pad[p];
        for (uint32_t p = 0; p < no; p++)
            x->out[p] = t->ext_out[p] + t->lay.out_hlen[p];
        gr_io_tensor_shape(s->plan, t->i, x);
    }
    opts.on_complete = job_ended;
    opts.user = s->fio;
    opts.constants = s->cfg->constants;
    opts.n_constants = s->cfg->n_constants;
    st = gr_job_submit(s->cfg->rt, s->cfg->g, v, n, &opts, &job, &err);
    free(v);
    if (st != GR_OK) {
        for (uint64_t k = 0; k < n; k++) {
            gr__stream_fail(s, ts[k], st, err.node[0] ? err.node : NULL, err.message);
            gr__stream_end_tensor(s, ts[k]);
        }
        free(ts);
        return;
    }
    for (uint64_t k = 0; k < n; k++)
        ts[k]->state = T_RUNNING;
    s->jobs[s->n_jobs++] = (job_rec){job, n, 0, ts};
}

/* Tensors are submitted in index order, so that they start in the order of the dataset
 * (as a single job of them all would) whatever order their reads end in: a group is the
 * ready tensors that follow the last one submitted without a gap. It goes now when the
 * device would otherwise wait (nothing is in flight, the reads wait for room in the window,
 * or nothing is left to read), else once it is large enough to batch well. */
static void maybe_submit(stream *s)
{
    uint64_t idx = s->next_submit, n = 0, bytes = 0;
    bool all_read = s->next_i >= s->plan->count && s->reading == 0;

    if (s->stopping) {
        while (s->ready) {
            tensor *t = s->ready;

            s->ready = t->next;
            gr__stream_end_tensor(s, t);
        }
        return;
    }
    for (tensor *t = s->ready;; t = t->next, idx++) {
        while (idx < s->next_i && ((s->cfg->skip && s->cfg->skip[idx]) || s->gone[idx]))
            idx++;
        if (t == NULL || t->i != idx)
            break;
        n++;
        bytes += t->lay.total;
    }
    if (n > 0 && (bytes >= s->group_target || s->n_jobs == 0 || s->blocked || all_read)) {
        s->next_submit = idx;
        submit_group(s, n);
    }
}

/* ------------------------------------------------------------------------------------ */
/* The engine and the jobs.                                                              */

static void hand_over(stream *s)
{
    /* Stopping: what is still to read is not; a tensor with nothing in flight ends now. */
    while (s->rq && (s->stopping || s->rq->t->failed)) {
        tensor *t = s->rq->t;

        t->abandoned = true;
        unqueue(&s->rq, &s->rq_tail, t);
        gr__stream_settle(s, t);
    }
    while (s->wq && s->wq->t->failed)
        unqueue(&s->wq, &s->wq_tail, s->wq->t);
    while (s->rq && s->reads_in_flight < READ_OPS && gr_fio_in_flight(s->fio) < DEPTH) {
        port_io *io = s->rq;
        uint64_t len = io->end - io->next < PIECE ? io->end - io->next : PIECE;
        gr_fio_op op = {GR_FIO_READ, io->fd, io->base + io->next, (uint32_t)len,
                        io->file0 + io->next, (uintptr_t)io, 0};

        if (gr_fio_submit(s->fio, &op) != GR_OK)
            break;
        io->next += len;
        io->in_flight++;
        io->t->ops++;
        s->reads_in_flight++;
        if (io->next == io->end && (s->rq = io->qnext) == NULL)
            s->rq_tail = NULL;
    }
    while (s->wq && gr_fio_in_flight(s->fio) < DEPTH) {
        port_io *io = s->wq;
        gr_fio_op op = {GR_FIO_FSYNC, io->fd, NULL, 0, 0, (uintptr_t)io, 0};

        if (!io->want_fsync) {
            uint64_t len = io->end - io->next < PIECE ? io->end - io->next : PIECE;

            op = (gr_fio_op){GR_FIO_WRITE, io->fd, io->base + io->next, (uint32_t)len,
                             io->file0 + io->next, (uintptr_t)io, 0};
        }
        if (gr_fio_submit(s->fio, &op) != GR_OK)
            break;
        io->in_flight++;
        io->t->ops++;
        if (op.kind == GR_FIO_WRITE)
            io->next += op.len;
        if ((op.kind == GR_FIO_FSYNC || io->next == io->end) && (s->wq = io->qnext) == NULL)
            s->wq_tail = NULL;
    }
}

static void reap(stream *s)
{
    gr_fio_op done[64];
    unsigned n;

    while ((n = gr_fio_reap(s->fio, done, 64)) > 0)
        for (unsigned k = 0; k < n; k++) {
            port_io *io = (port_io *)(uintptr_t)done[k].tag;
            tensor *t = io->t;

            io->in_flight--;
            t->ops--;
            if (!io->out) {
                s->reads_in_flight--;
                read_done(s, &done[k]);
            } else if ((t = gr__stream_write_done(s, &done[k])) == NULL) {
                continue;
            }
            gr__stream_settle(s, t);
        }
}

/* The indices of job j that ended since last looked at. Returns false once the job is
 * over (every index handled, its callback returned) and destroyed. */
static bool collect(stream *s, job_rec *j)
{
    gr_job_progress jp = GR_JOB_PROGRESS_INIT;
    bool over = gr_job_wait(j->job, 0, NULL) == GR_OK;

    gr_job_progress_get(j->job, &jp);
    if (!over && jp.done + jp.failed + jp.canceled <= j->seen)
        return true;
    for (uint64_t x = 0; x < j->n; x++) {
        tensor *t = j->t[x];
        gr_index_state state = GR_INDEX_QUEUED;
        gr_status st = GR_OK;
        gr_error_info first;

        if (t == NULL)
            continue;
        gr_job_index_get(j->job, x, &state, &st);
        if (state == GR_INDEX_QUEUED || state == GR_INDEX_RUNNING)
            continue;
        j->t[x] = NULL;
        j->seen++;
        if (state == GR_INDEX_DONE) {
            t->state = T_TO_WRITE;
            t->next = NULL;
            if (s->to_write_tail)
                s->to_write_tail->next = t;
            else
                s->to_write = t;
            s->to_write_tail = t;
            continue;
        }
        if (state == GR_INDEX_FAILED) {
            /* The runtime keeps the node and message of a job's first failure only. */
            gr_job_error_get(j->job, &first);
            if (first.index == x)
                gr__stream_fail(s, t, st, first.node, first.message);
            else
                gr__stream_fail(s, t, st, NULL, NULL);
        }
        gr__stream_end_tensor(s, t); /* canceled: not run */
    }
    if (!over || j->seen < j->n)
        return true;
    gr_job_destroy(j->job);
    free(j->t);
    return false;
}

static void collect_jobs(stream *s)
{
    uint32_t kept = 0;

    for (uint32_t k = 0; k < s->n_jobs; k++)
        if (collect(s, &s->jobs[k]))
            s->jobs[kept++] = s->jobs[k];
    s->n_jobs = kept;
}

/* ------------------------------------------------------------------------------------ */

/* GR_TEST_IO_FAULT, for tests only: "direct" (every O_DIRECT refused, as a file system
 * without it refuses it), "uring" (io_uring refused, as a kernel or sandbox may), and
 * "enospc:N" (the Nth write of an output fails as on a full disk), comma-separated. */
static void test_faults(stream *s, bool *refuse_uring)
{
    const char *v = getenv("GR_TEST_IO_FAULT");

    *refuse_uring = false;
    for (; v && *v; v += strcspn(v, ","), v += *v == ',') {
        if (strncmp(v, "direct", 6) == 0)
            s->refuse_direct = true;
        else if (strncmp(v, "uring", 5) == 0)
            *refuse_uring = true;
        else if (strncmp(v, "enospc:", 7) == 0)
            s->enospc_at = strtoull(v + 7, NULL, 10);
    }
}

static void draw(stream *s, int64_t t0, bool last)
{
    gr_progress_info pi = {0};
    gr_window_stats ws;

    gr_window_stats_get(s->win, &ws);
    pi.tensors = s->to_run;
    pi.done = s->res->done;
    pi.failed = s->res->failed;
    pi.read_bytes = s->res->read_bytes;
    pi.written_bytes = s->res->written_bytes;
    pi.done_bytes = s->done_bytes;
    pi.total_bytes = s->total_bytes;
    pi.host_in_use = ws.in_use;
    pi.host_limit = ws.limit;
    pi.seconds = (double)(gr_now_ns() - t0) / 1e9;
    gr_progress_draw(&s->progress, &pi, last);
}

gr_status gr_stream_run(const gr_stream_config *cfg, gr_stream_result *out)
{
    stream s = {.cfg = cfg, .plan = cfg->plan, .res = out};
    gr_window_stats ws;
    bool refuse_uring;
    int64_t t0 = gr_now_ns();
    gr_status st;

    memset(out, 0, sizeof(*out));
    test_faults(&s, &refuse_uring);
    for (uint64_t i = 0; i < s.plan->count; i++)
        if (!(cfg->skip && cfg->skip[i])) {
            s.to_run++;
            s.total_bytes += gr__stream_tensor_bytes(&s, i);
        }
    s.win = cfg->win;
    gr_window_stats_get(s.win, &ws);
    s.group_target = ws.limit / 8;
    if ((st = gr_fio_create(cfg->engine, DEPTH, refuse_uring, &s.fio, out->fallback,
                            sizeof(out->fallback))) != GR_OK) {
        out->status = st;
        snprintf(out->why, sizeof(out->why), "file I/O: %s", out->fallback);
        return st;
    }
    snprintf(out->engine, sizeof(out->engine), "%s", gr_fio_engine_name(s.fio));
    if ((s.gone = calloc(s.plan->count + 1, 1)) == NULL) {
        out->status = GR_ERR_OUT_OF_MEMORY;
        snprintf(out->why, sizeof(out->why), "out of memory");
        gr_fio_destroy(s.fio);
        return out->status;
    }
    /* The grower after the I/O engine's threads: under an address-space limit those need
     * their stacks more than the window needs its last segment. */
    if (cfg->grow_to)
        gr_window_grow_ahead(s.win, cfg->grow_to);
    gr_progress_start(&s.progress, cfg->progress);
    s.durable_at = t0;
    while (s.to_run > 0) {
        if (*cfg->stop)
            begin_stop(&s);
        reap(&s);
        collect_jobs(&s);
        gr__stream_start_writes(&s);
        start_reads(&s);
        maybe_submit(&s);
        hand_over(&s);
        gr__stream_make_durable(&s, false);
        cfg->hooks.tick(cfg->hooks.arg);
        draw(&s, t0, false);
        if (s.active == 0 && s.n_jobs == 0 && gr_fio_in_flight(s.fio) == 0 &&
            (s.stopping || s.next_i >= s.plan->count))
            break;
        gr_fio_wait(s.fio, TICK_MS);
    }
    gr__stream_make_durable(&s, true);
    draw(&s, t0, true);
    gr_progress_end(&s.progress);
    out->not_run = s.to_run - out->done - out->failed;
    out->ns = gr_now_ns() - t0;
    gr_window_grow_stop(s.win, true);
    gr_window_stats_get(s.win, &out->window);
    for (uint32_t k = 0; k < s.n_dirs; k++) {
        if (s.dirs[k].fd >= 0)
            close(s.dirs[k].fd);
        free(s.dirs[k].path);
    }
    free(s.dirs);
    free(s.pending);
    free(s.jobs);
    free(s.gone);
    gr_fio_destroy(s.fio);
    return out->status;
}

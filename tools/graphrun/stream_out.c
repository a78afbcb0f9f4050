/*
 * stream_out.c - the outputs of the streaming pipeline (see stream.h, stream_impl.h): each
 * tensor the runtime has done has its outputs written into temporary files beside them
 * (whole blocks with O_DIRECT from the .npy header laid before the data, window.h; cut to
 * their length after), fsynced (--sync each), then placed together: renamed at once, or
 * kept for the end (--all-or-nothing). A placed tensor is done (hooks.done) once durable:
 * at once without sync; after its directory's fsync, a batch every DURABLE_NS at most
 * (each); after its file system's syncfs and its directory's fsync at the end (end).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/stream_impl.h"

/* Tensor t's outputs into their temporary files: each opened (O_DIRECT where it is taken),
 * its header laid before its data, queued for the engine. */
static void start_write(stream *s, tensor *t)
{
    uint32_t no = s->plan->opt.n_outputs;
    char header[4096], why[600];

    t->state = T_WRITING;
    s->writing++;
    for (uint32_t p = 0; p < no; p++) {
        uint64_t k = t->i * no + p, bytes = gr__stream_out_bytes(s, t->i, p);
        int fd, flags;
        uint32_t hlen = t->lay.out_hlen[p];
        char *data = t->ext_out[p] + hlen;
        port_io *io = &t->out[p];
        bool direct = s->cfg->direct && bytes >= GR_STREAM_DIRECT_MIN;

        if (gr_io_output_create(s->plan, k, &fd, why, sizeof(why)) != GR_OK) {
            gr__stream_fail(s, t, GR_RUN_ERR_OUTPUT, NULL, why);
            return;
        }
        *io = (port_io){.t = t, .port = p, .out = true, .fd = fd, .base = data - hlen,
                        .file0 = 0, .next = 0, .need = hlen + bytes};
        if (hlen) {
            gr_io_out_header(s->plan, t->i, p, header, sizeof(header));
            memcpy(data - hlen, header, hlen);
        }
        if (direct) {
            flags = fcntl(fd, F_GETFL);
            if (s->refuse_direct || flags < 0 || fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) {
                gr__stream_note_buffered(s, s->plan->out[k], s->refuse_direct ? EINVAL : errno);
                direct = false;
            }
        }
        io->direct = direct;
        /* Direct: whole blocks, the file cut to its length once written. */
        io->end = direct ? (io->need + GR_WINDOW_ALIGN - 1) / GR_WINDOW_ALIGN * GR_WINDOW_ALIGN
                         : io->need;
        if (direct)
            s->res->direct_writes++;
        else
            s->res->buffered_writes++;
        t->ports_left++;
        gr__stream_enqueue(&s->wq, &s->wq_tail, io);
    }
}

void gr__stream_start_writes(stream *s)
{
    while (s->to_write && s->writing < WRITE_FILES) {
        tensor *t = s->to_write;

        s->to_write = t->next;
        if (s->to_write == NULL)
            s->to_write_tail = NULL;
        start_write(s, t);
        gr__stream_settle(s, t);
    }
}

/* The directory `path` lies in, opened once (for its fsync). NULL when out of memory. */
static out_dir *dir_of(stream *s, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *d = slash == NULL ? strdup(".") : slash == path ? strdup("/")
                                                          : strndup(path, (size_t)(slash - path));

    if (d == NULL)
        return NULL;
    for (uint32_t k = 0; k < s->n_dirs; k++)
        if (strcmp(s->dirs[k].path, d) == 0) {
            free(d);
            return &s->dirs[k];
        }
    if (s->n_dirs == s->cap_dirs) {
        uint32_t cap = s->cap_dirs ? s->cap_dirs * 2 : 4;
        out_dir *v = realloc(s->dirs, cap * sizeof(*v));

        if (v == NULL) {
            free(d);
            return NULL;
        }
        s->dirs = v;
        s->cap_dirs = cap;
    }
    s->dirs[s->n_dirs] = (out_dir){d, open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC), false};
    return &s->dirs[s->n_dirs++];
}

static void tensor_done(stream *s, uint64_t i)
{
    s->res->done++;
    s->done_bytes += gr__stream_tensor_bytes(s, i);
    s->cfg->hooks.done(s->cfg->hooks.arg, i);
}

/* Every output of t is written (and synced): into place together. */
static void place(stream *s, tensor *t)
{
    uint32_t no = s->plan->opt.n_outputs;
    bool later = !s->cfg->all_or_nothing && s->cfg->sync != GR_SYNC_NONE;
    char why[600];

    for (uint32_t p = 0; p < no; p++) {
        uint64_t k = t->i * no + p;
        out_dir *d = later && s->plan->tmp[k] ? dir_of(s, s->plan->out[k]) : NULL;
        int fd = t->out[p].fd;

        t->out[p].fd = -1;
        if (later && s->plan->tmp[k] && d == NULL) {
            gr_io_output_discard(s->plan, k, fd);
            gr__stream_fail(s, t, GR_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            return;
        }
        if (gr_io_output_place(s->plan, k, fd, s->cfg->all_or_nothing, why, sizeof(why)) !=
            GR_OK) {
            gr__stream_fail(s, t, GR_RUN_ERR_OUTPUT, NULL, why);
            return;
        }
        if (d)
            d->dirty = true;
    }
    if (!later) {
        tensor_done(s, t->i);
        return;
    }
    if (s->n_pending == s->cap_pending) {
        uint64_t cap = s->cap_pending ? s->cap_pending * 2 : 64;
        uint64_t *v = realloc(s->pending, cap * sizeof(*v));

        if (v == NULL) {
            gr__stream_fail(s, t, GR_ERR_OUT_OF_MEMORY, NULL, "out of memory");
            return;
        }
        s->pending = v;
        s->cap_pending = cap;
    }
    s->pending[s->n_pending++] = t->i;
}

/* The placed tensors become done once durable: their directories fsynced (each), after
 * their file systems are synced (end, at the end only). */
void gr__stream_make_durable(stream *s, bool last)
{
    int64_t now = gr_now_ns();
    bool ok = true;

    if (s->n_pending == 0 || (!last && (s->cfg->sync == GR_SYNC_END ||
                                        now - s->durable_at < DURABLE_NS)))
        return;
    for (uint32_t k = 0; k < s->n_dirs; k++) {
        out_dir *d = &s->dirs[k];

        if (!d->dirty)
            continue;
        if (d->fd < 0 || (s->cfg->sync == GR_SYNC_END && syncfs(d->fd) != 0) ||
            fsync(d->fd) != 0) {
            char why[600];

            snprintf(why, sizeof(why), "output directory %s: cannot sync: %s", d->path,
                     d->fd < 0 ? "cannot open it" : strerror(errno));
            for (uint64_t q = 0; q < s->n_pending; q++) {
                tensor t = {.i = s->pending[q]};

                gr__stream_fail(s, &t, GR_RUN_ERR_OUTPUT, NULL, why);
            }
            ok = false;
            break;
        }
        d->dirty = false;
    }
    for (uint64_t q = 0; ok && q < s->n_pending; q++)
        tensor_done(s, s->pending[q]);
    s->n_pending = 0;
    s->durable_at = now;
}

/* A write or fsync came back. Returns the tensor, or NULL once it is placed and gone. */
tensor *gr__stream_write_done(stream *s, gr_fio_op *op)
{
    port_io *io = (port_io *)(uintptr_t)op->tag;
    tensor *t = io->t;
    uint64_t k = t->i * s->plan->opt.n_outputs + io->port;
    char why[600];

    if (op->kind == GR_FIO_WRITE && s->enospc_at && ++s->writes_done == s->enospc_at)
        op->result = -ENOSPC;
    if (t->failed)
        return t;
    if (op->result < 0) {
        snprintf(why, sizeof(why), "output %s: cannot %s: %s", s->plan->out[k],
                 op->kind == GR_FIO_FSYNC ? "sync" : "write", strerror((int)-op->result));
        gr__stream_fail(s, t, GR_RUN_ERR_OUTPUT, NULL, why);
        return t;
    }
    if (op->kind == GR_FIO_FSYNC) {
        io->want_fsync = false;
    } else {
        s->res->written_bytes += (uint64_t)op->result;
        if ((uint64_t)op->result < op->len) {
            op->buf = (char *)op->buf + op->result;
            op->off += (uint64_t)op->result;
            op->len -= (uint32_t)op->result;
            if (io->direct && op->result % GR_WINDOW_ALIGN != 0) {
                io->direct = false;
                fcntl(io->fd, F_SETFL, fcntl(io->fd, F_GETFL) & ~O_DIRECT);
            }
            if (gr_fio_submit(s->fio, op) == GR_OK) {
                io->in_flight++;
                t->ops++;
            } else {
                gr__stream_fail(s, t, GR_RUN_ERR_OUTPUT, NULL, "no room to write again");
            }
            return t;
        }
        if (io->in_flight > 0 || io->next < io->end)
            return t;
        if (io->end != io->need && ftruncate(io->fd, (off_t)io->need) != 0) {
            snprintf(why, sizeof(why), "output %s: cannot write: %s", s->plan->out[k],
                     strerror(errno));
            gr__stream_fail(s, t, GR_RUN_ERR_OUTPUT, NULL, why);
            return t;
        }
        if (s->cfg->sync == GR_SYNC_EACH) {
            io->want_fsync = true;
            gr__stream_enqueue(&s->wq, &s->wq_tail, io);
            return t;
        }
    }
    io->done = true;
    if (--t->ports_left > 0)
        return t;
    place(s, t);
    if (t->failed)
        return t;
    gr__stream_end_tensor(s, t);
    return NULL;
}

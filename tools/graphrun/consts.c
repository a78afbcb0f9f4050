/*
 * consts.c - the constants of `graphrun run` and `graphrun check` (see consts.h).
 *
 * A constant is checked as an input is (io.c): a .npy by its header, against the file's
 * size, a raw file by its size alone; but against the graph's declaration rather than a
 * port: the declared element type, and the declared element count whatever the file's
 * shape (the runtime takes a constant as that many elements, as gr_job_options.constants
 * and Python's constants= do). Everything is checked before anything is loaded, and by the
 * same function for check and run, so that check refuses what run refuses in the same
 * words. The data is read once per run, not per tensor or per job: every job the run
 * submits points at the same host copy, which stays until the run ends (after the last
 * job is complete).
 */
#include "tools/graphrun/consts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/graphrun/io_util.h"
#include "tools/graphrun/npy.h"

#define HEADER_PROBE 65536 /* bytes read to parse a .npy header, as io.c */

/* NAME's length in "NAME=FILE". */
static size_t name_len(const char *arg)
{
    return strcspn(arg, "=");
}

int gr_consts_check_arg(const char *cmd, const char *arg, const char *const *args, uint32_t n)
{
    size_t len = name_len(arg);

    if (len == 0 || arg[len] != '=' || arg[len + 1] == '\0') {
        fprintf(stderr, "graphrun %s: invalid value '%s' for --const (want NAME=FILE: a "
                        "constant the graph declares, and a .npy or raw file of its type)\n",
                cmd, arg);
        return 0;
    }
    for (uint32_t k = 0; k < n; k++)
        if (name_len(args[k]) == len && strncmp(args[k], arg, len) == 0) {
            fprintf(stderr, "graphrun %s: --const %.*s given twice (%s and %s): give each "
                            "constant once\n",
                    cmd, (int)len, arg, args[k] + len + 1, arg + len + 1);
            return 0;
        }
    if (n == GR_CONSTS_MAX_ARGS) {
        fprintf(stderr, "graphrun %s: at most %d --const (a graph has at most %d constants)\n",
                cmd, GR_CONSTS_MAX_ARGS, GR_MAX_CONSTS);
        return 0;
    }
    return 1;
}

/* "float32 [2, 3]": a declaration as the spec writes it. */
static const char *decl_text(const gr_const_info *d, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "%s [", gr_dtype_name(d->dtype));

    for (uint32_t k = 0; k < (d->rank ? d->rank : 1) && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%llu", k ? ", " : "",
                               (unsigned long long)(d->rank ? d->shape[k] : d->elems));
    if (at < len)
        snprintf(buf + at, len - at, "]");
    return buf;
}

/* "(4, 3)": a .npy header's shape as NumPy prints it. */
static const char *npy_shape_text(const gr_npy_header *h, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "(");

    for (uint32_t k = 0; k < h->ndim && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%llu", k ? ", " : "",
                               (unsigned long long)h->shape[k]);
    if (at < len)
        snprintf(buf + at, len - at, h->ndim == 1 ? ",)" : ")");
    return buf;
}

/* Check constant f's file (f->decl and f->path set) and fill in the rest of *f. */
static gr_status check_file(gr_const_file *f, const char *graph_path, char *why, size_t len)
{
    const gr_const_info *d = &f->decl;
    char buf[HEADER_PROBE], decl[160], shape[256], hwhy[512];
    gr_npy_header h;
    struct stat sb;
    ssize_t got;
    int fd;

    decl_text(d, decl, sizeof(decl));
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gr_io_fail(why, len, "--const %s=%s: cannot open: %s", d->name, f->path,
                          strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gr_io_fail(why, len, "--const %s=%s: not a regular file", d->name, f->path);
    }
    f->npy = gr_io_ends_with(f->path, ".npy");
    if (!f->npy) {
        close(fd);
        if ((uint64_t)sb.st_size != d->bytes)
            return gr_io_fail(why, len,
                              "--const %s=%s: %s declares %s %s, %llu bytes of raw data, but "
                              "the file has %llu bytes (a raw constant holds exactly its "
                              "elements, this machine's byte order; or give a .npy)",
                              d->name, f->path, graph_path, d->name, decl,
                              (unsigned long long)d->bytes, (unsigned long long)sb.st_size);
        return GR_OK;
    }
    got = pread(fd, buf, sizeof(buf), 0);
    close(fd);
    if (got < 0)
        return gr_io_fail(why, len, "--const %s=%s: cannot read: %s", d->name, f->path,
                          strerror(errno));
    if (gr_npy_parse_header(buf, (size_t)got, &h, hwhy, sizeof(hwhy)) != GR_OK)
        return gr_io_fail(why, len, "--const %s=%s: %s", d->name, f->path, hwhy);
    /* The type before the count: a file of another type is that, not a wrong size. */
    if (h.dtype != d->dtype)
        return gr_io_fail(why, len,
                          "--const %s=%s: the file holds %s ('%s') but %s declares %s %s: "
                          "convert with %s, or change the spec's const line",
                          d->name, f->path, gr_dtype_name(h.dtype), h.descr, graph_path,
                          d->name, decl, gr_npy_astype(d->dtype));
    if (h.elems != d->elems)
        return gr_io_fail(why, len,
                          "--const %s=%s: the file holds %llu elements (shape %s) but %s "
                          "declares %s %s, %llu elements",
                          d->name, f->path, (unsigned long long)h.elems,
                          npy_shape_text(&h, shape, sizeof(shape)), graph_path, d->name, decl,
                          (unsigned long long)d->elems);
    if ((uint64_t)sb.st_size != h.data_offset + d->bytes)
        return gr_io_fail(why, len,
                          "--const %s=%s: the header says %llu bytes of %s data after a "
                          "%llu-byte header but the file has %llu bytes: %s",
                          d->name, f->path, (unsigned long long)d->bytes,
                          gr_dtype_name(d->dtype), (unsigned long long)h.data_offset,
                          (unsigned long long)sb.st_size,
                          (uint64_t)sb.st_size < h.data_offset + d->bytes ? "truncated"
                                                                          : "trailing bytes");
    f->swap = h.swap;
    f->data_offset = h.data_offset;
    return GR_OK;
}

gr_status gr_consts_plan(gr_consts *c, const char *const *args, uint32_t n, const gr_graph *g,
                         const char *graph_path, char *why, size_t len)
{
    char decl[160], names[GR_MAX_CONSTS * (GR_NAME_MAX + 2) + 1] = "";
    gr_status st;

    memset(c, 0, sizeof(*c));
    c->count = gr_graph_const_count(g);
    for (uint32_t k = 0; k < c->count; k++) {
        gr_graph_const_get(g, k, &c->c[k].decl);
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", k ? ", " : "",
                 c->c[k].decl.name);
        c->device_bytes += (c->c[k].decl.bytes + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN *
                           GR_BUFFER_ALIGN;
    }
    for (uint32_t a = 0; a < n; a++) {
        size_t nl = name_len(args[a]);
        uint32_t k = 0;

        while (k < c->count &&
               !(strlen(c->c[k].decl.name) == nl && strncmp(c->c[k].decl.name, args[a], nl) == 0))
            k++;
        if (k == c->count)
            return gr_io_fail(why, len, "--const %s: %s has no constant '%.*s' (%s%s)", args[a],
                              graph_path, (int)nl, args[a],
                              c->count ? "it declares " : "it declares none",
                              c->count ? names : "");
        c->c[k].path = args[a] + nl + 1;
    }
    for (uint32_t k = 0; k < c->count; k++) {
        gr_const_file *f = &c->c[k];

        if (f->path == NULL)
            return gr_io_fail(why, len,
                              "%s declares constant '%s' (%s) but no --const %s=FILE gives it "
                              "(a .npy or raw file of %llu %s elements)",
                              graph_path, f->decl.name, decl_text(&f->decl, decl, sizeof(decl)),
                              f->decl.name, (unsigned long long)f->decl.elems,
                              gr_dtype_name(f->decl.dtype));
        if ((st = check_file(f, graph_path, why, len)) != GR_OK)
            return st;
    }
    return GR_OK;
}

gr_status gr_consts_load(gr_consts *c, char *why, size_t len)
{
    for (uint32_t k = 0; k < c->count; k++) {
        gr_const_file *f = &c->c[k];
        uint64_t done = 0;
        int fd;

        if (f->data != NULL)
            continue;
        if ((f->data = malloc(f->decl.bytes ? f->decl.bytes : 1)) == NULL) {
            snprintf(why, len, "out of memory: constant %s needs %llu bytes", f->decl.name,
                     (unsigned long long)f->decl.bytes);
            return GR_ERR_OUT_OF_MEMORY;
        }
        if ((fd = open(f->path, O_RDONLY | O_CLOEXEC)) < 0)
            return gr_io_fail(why, len, "--const %s=%s: cannot open: %s", f->decl.name,
                              f->path, strerror(errno));
        while (done < f->decl.bytes) {
            ssize_t got = pread(fd, (char *)f->data + done, f->decl.bytes - done,
                                (off_t)(f->data_offset + done));

            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                int e = errno;

                close(fd);
                return gr_io_fail(why, len, "--const %s=%s: cannot read: %s", f->decl.name,
                                  f->path, got < 0 ? strerror(e) : "the file was truncated");
            }
            done += (uint64_t)got;
        }
        close(fd);
        if (f->swap)
            gr_npy_swap(f->data, f->decl.elems, gr_dtype_size(f->decl.dtype));
        c->data[k] = f->data;
    }
    return GR_OK;
}

json_t *gr_consts_json(const gr_consts *c)
{
    json_t *all = json_array();

    for (uint32_t k = 0; k < c->count; k++) {
        const gr_const_info *d = &c->c[k].decl;
        json_t *shape = json_array();

        for (uint32_t r = 0; r < (d->rank ? d->rank : 1); r++)
            json_array_append_new(shape, json_integer((json_int_t)(d->rank ? d->shape[r]
                                                                           : d->elems)));
        json_array_append_new(all, json_pack("{s:s,s:s,s:o,s:I,s:I,s:s}", "name", d->name,
                                             "dtype", gr_dtype_name(d->dtype), "shape", shape,
                                             "elems", (json_int_t)d->elems, "bytes",
                                             (json_int_t)d->bytes, "file", c->c[k].path));
    }
    return all;
}

void gr_consts_print(const gr_consts *c, FILE *f)
{
    char decl[160];

    for (uint32_t k = 0; k < c->count; k++)
        fprintf(f, "constant %s: %s, %llu bytes, from %s (%s)\n", c->c[k].decl.name,
                decl_text(&c->c[k].decl, decl, sizeof(decl)),
                (unsigned long long)c->c[k].decl.bytes, c->c[k].path,
                c->c[k].npy ? ".npy" : "raw");
}

json_t *gr_consts_settings_json(const char *const *args, uint32_t n)
{
    json_t *all = json_object();

    for (uint32_t a = 0; all && a < n; a++) {
        const char *path = args[a] + name_len(args[a]) + 1;
        char name[GR_NAME_MAX + 1];
        struct stat sb;
        bool there = stat(path, &sb) == 0;

        snprintf(name, sizeof(name), "%.*s", (int)name_len(args[a]), args[a]);
        json_object_set_new(
            all, name,
            json_pack("{s:s,s:I,s:I}", "path", path, "size",
                      (json_int_t)(there ? sb.st_size : -1), "mtime_ns",
                      (json_int_t)(there ? (int64_t)sb.st_mtim.tv_sec * 1000000000ll +
                                               sb.st_mtim.tv_nsec
                                         : -1)));
    }
    return all;
}

void gr_consts_free(gr_consts *c)
{
    for (uint32_t k = 0; k < c->count; k++) {
        free(c->c[k].data);
        c->c[k].data = NULL;
        c->data[k] = NULL;
    }
}

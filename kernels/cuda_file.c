/*
 * cuda_file.c - kernels declared in a CUDA C source file (graphrun.h: gr_kernel_load_file).
 *
 * The file must be a regular file that declares at least one kernel, which is checked before
 * anything compiles it (a spec could name any file). It is then compiled once, by its
 * text, with its path as NVRTC's name for it, so that a compile error's log points into the
 * file ("PATH(LINE): error: ..."); the registrations of its kernels then find that
 * compilation in NVRTC's cache. Declarations are comment lines, so the file stays plain
 * CUDA C that nvcc compiles too:
 *
 *     // graphrun: kernel NAME [inputs=N] [scalars=N] [elementwise] [out=elems|one]
 *     //                       [block=N] [blocks_per_sm=N] [max_blocks=N]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/nvrtc.h"
#include "runtime/base/sync.h"

#define FILE_MAX_BYTES (4u << 20)
#define MARK "// graphrun: kernel"

/* The whole of a regular file: opened without blocking (a FIFO or a device named by a spec
 * must not hold the caller), and refused unless it is a regular file of at most
 * FILE_MAX_BYTES without a NUL byte. */
static gr_status read_text(const char *path, char **out, gr_error_info *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    size_t n = 0;
    char *buf;

    if (fd < 0)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > FILE_MAX_BYTES) {
        close(fd);
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "%s: larger than %u bytes", path, FILE_MAX_BYTES);
    }
    if ((buf = malloc((size_t)sb.st_size + 1)) == NULL) {
        close(fd);
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    }
    while (n < (size_t)sb.st_size) {
        ssize_t got = read(fd, buf + n, (size_t)sb.st_size - n);

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            int e = got < 0 ? errno : EIO;

            free(buf);
            close(fd);
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "%s: cannot read: %s", path,
                                 got < 0 ? strerror(e) : "the file shrank while being read");
        }
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "%s: holds a NUL byte: not CUDA C source", path);
    }
    *out = buf;
    return GR_OK;
}

/* A decimal number after "key=" in [p, end), in [lo, hi]. */
static bool number(const char *p, const char *end, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v = 0;

    if (p == end)
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9' || (v = v * 10 + (uint64_t)(*p - '0')) > hi)
            return false;
    }
    if (v < lo)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* One declaration, the words after MARK in [p, end) on line `line` (its column `col0`
 * where p is), into `d` (name into `name`). */
static gr_status parse_decl(const char *path, size_t line, const char *text, const char *p,
                            const char *end, gr_kernel_def *d, char *name, size_t name_size,
                            gr_error_info *err)
{
    bool have_name = false;

    while (p < end) {
        const char *w, *eq;
        size_t col, len;

        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        if (p == end)
            break;
        w = p;
        while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        len = (size_t)(p - w);
        col = (size_t)(w - text) + 1;
        eq = memchr(w, '=', len);
        if (!have_name) {
            if (eq != NULL || len >= name_size) {
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                     "%s:%zu:%zu: expected the kernel's name after '" MARK "'",
                                     path, line, col);
            }
            memcpy(name, w, len);
            name[len] = '\0';
            have_name = true;
            continue;
        }
#define KEY(k) (eq != NULL && (size_t)(eq - w) == strlen(k) && strncmp(w, k, strlen(k)) == 0)
        if (len == 11 && strncmp(w, "elementwise", 11) == 0) {
            d->elementwise = 1;
        } else if (KEY("inputs") && number(eq + 1, p, 0, GR_MAX_KERNEL_INPUTS, &d->n_inputs)) {
        } else if (KEY("scalars") && number(eq + 1, p, 0, GR_MAX_SCALARS, &d->n_scalars)) {
        } else if (KEY("block") && number(eq + 1, p, 1, 1024, &d->cuda_block)) {
        } else if (KEY("blocks_per_sm") &&
                   number(eq + 1, p, 1, 1u << 20, &d->cuda_blocks_per_sm)) {
        } else if (KEY("max_blocks") && number(eq + 1, p, 1, 1u << 30, &d->cuda_max_blocks)) {
        } else if (KEY("out") && (size_t)(p - eq - 1) == 5 && strncmp(eq + 1, "elems", 5) == 0) {
            d->out_size = GR_OUT_ELEMS;
        } else if (KEY("out") && (size_t)(p - eq - 1) == 3 && strncmp(eq + 1, "one", 3) == 0) {
            d->out_size = GR_OUT_ONE;
        } else if (KEY("out") && (size_t)(p - eq - 1) == 6 &&
                   strncmp(eq + 1, "buffer", 6) == 0) {
            d->out_size = GR_OUT_BUFFER;
        } else {
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "%s:%zu:%zu: unknown or bad '%.*s' (expected inputs=0..%d, "
                                 "scalars=0..%d, elementwise, out=elems|one, block=1..1024, "
                                 "blocks_per_sm=N, max_blocks=N)",
                                 path, line, col, (int)(len > 32 ? 32 : len), w,
                                 GR_MAX_KERNEL_INPUTS, GR_MAX_SCALARS);
        }
#undef KEY
    }
    if (!have_name)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "%s:%zu:%zu: expected the kernel's name after '" MARK "'", path,
                             line, (size_t)(end - text) + 1);
    return GR_OK;
}

/* The declaration on the line [p, eol), if it is one (*found); its def into `d`. */
static gr_status line_decl(const char *path, size_t line, const char *p, const char *eol,
                           bool *found, gr_kernel_def *d, char *name, size_t name_size,
                           gr_error_info *err)
{
    const char *q = p;

    *found = false;
    while (q < eol && (*q == ' ' || *q == '\t'))
        q++;
    if ((size_t)(eol - q) < strlen(MARK) || strncmp(q, MARK, strlen(MARK)) != 0 ||
        !(q + strlen(MARK) == eol || q[strlen(MARK)] == ' ' || q[strlen(MARK)] == '\t'))
        return GR_OK;
    *found = true;
    d->n_inputs = 1;
    return parse_decl(path, line, p, q + strlen(MARK), eol, d, name, name_size, err);
}

/* Every declaration of the file, in order: checked and counted, or (with `add`) registered.
 * The very same kernel registered already (this file loaded before, perhaps by another
 * thread at this moment) is fine; the registry decides that under its lock. */
static gr_status each_decl(const char *path, const char *text, bool add, size_t *declared,
                           gr_error_info *err)
{
    size_t line = 0;
    gr_status st = GR_OK;

    *declared = 0;
    for (const char *p = text; *p && st == GR_OK;) {
        const char *eol = strchr(p, '\n');
        char name[GR_NAME_MAX + 2];
        gr_kernel_def d = GR_KERNEL_DEF_INIT;
        bool found;

        if (eol == NULL)
            eol = p + strlen(p);
        st = line_decl(path, ++line, p, eol, &found, &d, name, sizeof(name), err);
        if (st == GR_OK && found && add) {
            const char *q = p;

            d.name = name;
            d.doc = "CUDA C source, compiled by NVRTC";
            d.cuda_kind = GR_CUDA_SOURCE;
            d.cuda = text;
            d.cuda_name = name;
            if ((st = gr__kernel_register_same_ok(&d, err)) != GR_OK) {
                while (*q == ' ' || *q == '\t')
                    q++;
                gr__error_prefix(err, "%s:%zu:%zu: ", path, line, (size_t)(q - p) + 1);
            }
        }
        *declared += found;
        p = *eol ? eol + 1 : eol;
    }
    return st;
}

gr_status gr_kernel_load_file(const char *path, gr_error_info *err)
{
    const char *ptx;
    char *text = NULL;
    size_t declared = 0;
    gr_status st;

    if (path == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL, "path is NULL");
    if ((st = read_text(path, &text, err)) != GR_OK)
        return st;
    /* The declarations first: a file that declares nothing (not a kernel file at all) is
     * refused before any compiler sees it, and so never echoed back in a log. */
    st = each_decl(path, text, false, &declared, err);
    if (st == GR_OK && declared == 0)
        st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                           "%s: declares no kernel (no '" MARK " NAME ...' line)", path);
    if (st == GR_OK)
        st = gr__nvrtc_compile(text, path, &ptx, err);
    if (st == GR_OK)
        st = each_decl(path, text, true, &declared, err);
    free(text);
    return st;
}

/*
 * cuda_file.c - kernels declared in a CUDA C source file (graphrun.h: gr_kernel_load_file).
 *
 * The file is compiled once, by its text, with its path as NVRTC's name for it, so that a
 * compile error's log points into the file ("PATH(LINE): error: ..."); the registrations
 * of its kernels then find that compilation in NVRTC's cache. Declarations are comment
 * lines, so the file stays plain CUDA C that nvcc compiles too:
 *
 *     // graphrun: kernel NAME [inputs=N] [scalars=N] [elementwise] [out=elems|one]
 *     //                       [block=N] [blocks_per_sm=N] [max_blocks=N]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/nvrtc.h"
#include "runtime/sync.h"

#define FILE_MAX_BYTES (4u << 20)
#define MARK "// graphrun: kernel"

static gr_status read_text(const char *path, char **out, gr_error_info *err)
{
    FILE *f = fopen(path, "rb");
    size_t n = 0, cap = 0;
    char *buf = NULL;

    if (f == NULL)
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "%s: cannot open: %s", path, strerror(errno));
    for (;;) {
        size_t got;

        if (n + 1 >= cap) {
            char *grown;

            cap = cap ? 2 * cap : 65536;
            if (cap > FILE_MAX_BYTES + 1) {
                free(buf);
                fclose(f);
                return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                    "%s: larger than %u bytes", path, FILE_MAX_BYTES);
            }
            if ((grown = realloc(buf, cap)) == NULL) {
                free(buf);
                fclose(f);
                return gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
            }
            buf = grown;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        free(buf);
        fclose(f);
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "%s: cannot read: %s", path, strerror(errno));
    }
    fclose(f);
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
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
                return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
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
        } else {
            return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                "%s:%zu:%zu: unknown or bad '%.*s' (expected inputs=0..%d, "
                                "scalars=0..%d, elementwise, out=elems|one, block=1..1024, "
                                "blocks_per_sm=N, max_blocks=N)",
                                path, line, col, (int)(len > 32 ? 32 : len), w,
                                GR_MAX_KERNEL_INPUTS, GR_MAX_SCALARS);
        }
#undef KEY
    }
    if (!have_name)
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "%s:%zu:%zu: expected the kernel's name after '" MARK "'", path,
                            line, (size_t)(end - text) + 1);
    return GR_OK;
}

gr_status gr_kernel_load_file(const char *path, gr_error_info *err)
{
    const char *ptx;
    char *text = NULL;
    size_t line = 0, declared = 0;
    gr_status st;

    if (path == NULL)
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL, "path is NULL");
    if ((st = read_text(path, &text, err)) != GR_OK)
        return st;
    if ((st = gr__nvrtc_compile(text, path, &ptx, err)) != GR_OK)
        goto out;
    for (const char *p = text; *p; ) {
        const char *eol = strchr(p, '\n'), *q = p;
        char name[GR_NAME_MAX + 2];
        gr_kernel_def d = GR_KERNEL_DEF_INIT;
        const gr_kernel *existing;

        if (eol == NULL)
            eol = p + strlen(p);
        line++;
        while (q < eol && (*q == ' ' || *q == '\t'))
            q++;
        if ((size_t)(eol - q) >= strlen(MARK) && strncmp(q, MARK, strlen(MARK)) == 0 &&
            (q + strlen(MARK) == eol || q[strlen(MARK)] == ' ' || q[strlen(MARK)] == '\t')) {
            d.n_inputs = 1;
            if ((st = parse_decl(path, line, p, q + strlen(MARK), eol, &d, name, sizeof(name),
                                 err)) != GR_OK)
                goto out;
            d.name = name;
            d.doc = "CUDA C source, compiled by NVRTC";
            d.cuda_kind = GR_CUDA_SOURCE;
            d.cuda = text;
            d.cuda_name = name;
            declared++;
            existing = gr__kernel_find(name);
            if (existing == NULL || !gr__kernel_same(existing, &d)) {
                st = gr_kernel_register(&d, err);
                if (st != GR_OK) {
                    gr_error_prefix(err, "%s:%zu:%zu: ", path, line, (size_t)(q - p) + 1);
                    goto out;
                }
            }
        }
        p = *eol ? eol + 1 : eol;
    }
    if (declared == 0)
        st = gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                          "%s: declares no kernel (no '" MARK " NAME ...' line)", path);
out:
    free(text);
    return st;
}

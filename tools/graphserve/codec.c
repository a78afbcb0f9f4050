/*
 * codec.c - request and response bodies (codec.h).
 *
 * The body is untrusted. The .npy header goes through graphrun's strict parser (the same
 * one `graphrun run` and its fuzz target use), which bounds every read by the length and
 * checks every size for overflow, and its type must be the port's (the same check and
 * message as `graphrun run`); here the data's length must then match the header exactly,
 * so a truncated upload or trailing bytes are refused rather than guessed at. A shape given
 * for a raw body is checked the same way: digits only, no zero or overflowing dimension, a
 * product equal to the element count.
 */
#include "tools/graphserve/codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define NPY_MAGIC "\x93NUMPY"

static int refuse(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return 400;
}

/* Content-Type without parameters ("; charset=..."), compared without case. */
static bool type_is(const char *content_type, const char *type)
{
    size_t n = strlen(type);

    return content_type != NULL && strncasecmp(content_type, type, n) == 0 &&
           (content_type[n] == '\0' || content_type[n] == ';' || content_type[n] == ' ');
}

static int parse_shape(const char *s, gs_tensor_desc *t, char *why, size_t why_len)
{
    uint64_t product = 1;
    const char *p = s;

    t->ndim = 0;
    while (*p) {
        uint64_t d = 0;

        if (*p < '0' || *p > '9')
            return refuse(why, why_len, "shape \"%.64s\": expected dimensions like 3,4", s);
        while (*p >= '0' && *p <= '9') {
            if (d > (UINT64_MAX - 9) / 10)
                return refuse(why, why_len, "shape \"%.64s\": dimension too large", s);
            d = d * 10 + (uint64_t)(*p++ - '0');
        }
        if (d == 0)
            return refuse(why, why_len, "shape \"%.64s\": a dimension is 0", s);
        if (t->ndim == GR_NPY_MAX_DIMS)
            return refuse(why, why_len, "shape \"%.64s\": more than %d dimensions", s,
                          GR_NPY_MAX_DIMS);
        if (product > UINT64_MAX / d)
            return refuse(why, why_len, "shape \"%.64s\": too many elements", s);
        product *= d;
        t->shape[t->ndim++] = d;
        if (*p == ',' && p[1] != '\0')
            p++;
        else if (*p != '\0')
            return refuse(why, why_len, "shape \"%.64s\": expected dimensions like 3,4", s);
    }
    if (t->ndim == 0)
        return refuse(why, why_len, "shape is empty: expected dimensions like 3,4");
    if (product != t->elems)
        return refuse(why, why_len,
                      "shape %.64s has %llu elements but the body holds %llu %s values", s,
                      (unsigned long long)product, (unsigned long long)t->elems,
                      gr_dtype_name(t->dtype));
    return 0;
}

int gs_decode(const void *body, size_t len, const char *content_type, const char *shape,
              gr_dtype dtype, const char *port, gs_tensor_desc *out, char *why,
              size_t why_len)
{
    uint32_t size = gr_dtype_size(dtype);
    const char *name = gr_dtype_name(dtype);
    gs_tensor_desc t;

    memset(&t, 0, sizeof(t));
    memset(out, 0, sizeof(*out));
    t.dtype = dtype;
    if (size == 0)
        return refuse(why, why_len, "%s has no element type graphserve knows", port);
    if (len == 0)
        return refuse(why, why_len, "empty body: send one %s tensor, as .npy or raw", name);
    if (type_is(content_type, "application/x-npy") || type_is(content_type, "application/npy"))
        t.npy = true;
    else if (type_is(content_type, "application/octet-stream"))
        t.npy = false;
    else
        t.npy = len >= 6 && memcmp(body, NPY_MAGIC, 6) == 0;

    if (t.npy) {
        gr_npy_header h;
        char npy_why[512];

        if (shape != NULL)
            return refuse(why, why_len, "a .npy body carries its own shape: drop the shape "
                                        "argument");
        if (gr_npy_parse_header(body, len, &h, npy_why, sizeof(npy_why)) != GR_OK)
            return refuse(why, why_len, "bad .npy: %s", npy_why);
        if (gr_npy_check_dtype(&h, dtype, "the body", port, npy_why, sizeof(npy_why)) != GR_OK)
            return refuse(why, why_len, "%s", npy_why);
        /* The parser proved data_offset + elems * size fits in 64 bits. */
        if (h.data_offset + h.elems * size != len)
            return refuse(why, why_len,
                          "bad .npy: the header says %llu %s values (%llu bytes of data) but "
                          "the body holds %llu bytes after the header",
                          (unsigned long long)h.elems, name,
                          (unsigned long long)(h.elems * size),
                          (unsigned long long)(len - (h.data_offset < len ? h.data_offset
                                                                          : len)));
        t.ndim = h.ndim;
        memcpy(t.shape, h.shape, sizeof(t.shape));
        t.elems = h.elems;
        t.offset = (size_t)h.data_offset;
        t.swap = h.swap;
    } else {
        if (len % size != 0)
            return refuse(why, why_len,
                          "raw body of %zu bytes is not whole %s values (a multiple of %u "
                          "bytes), the type of %s; send .npy with Content-Type: "
                          "application/x-npy for anything else",
                          len, name, size, port);
        t.elems = len / size;
        t.offset = 0;
        if (shape != NULL) {
            int code = parse_shape(shape, &t, why, why_len);

            if (code != 0)
                return code;
        } else {
            t.ndim = 1;
            t.shape[0] = t.elems;
        }
    }
    if (t.elems == 0)
        return refuse(why, why_len, "the tensor has 0 elements");
    *out = t;
    return 0;
}

size_t gs_encode_header(const gs_tensor_desc *t, char *buf, size_t size)
{
    size_t n;

    if (!t->npy)
        return 0;
    n = gr_npy_format_header(t->dtype, t->shape, t->ndim, buf, size);
    return n == 0 ? SIZE_MAX : n;
}

const char *gs_content_type(const gs_tensor_desc *t)
{
    return t->npy ? "application/x-npy" : "application/octet-stream";
}

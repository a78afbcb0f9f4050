/*
 * npy_fuzz.c - libFuzzer target: any bytes through gr_npy_parse_header
 * (tools/graphrun/npy.c).
 *
 * Beyond not crashing or reading past the input: an accepted header lies within the input,
 * its element type is one of graphrun's, its element count is the product of its shape, its
 * data size does not overflow, a port of its own type accepts it and every other type is
 * refused with a message, and the header gr_npy_format_header writes for the same type and
 * shape parses back to the same type (in the host's order) and shape.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/graphrun/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "npy_fuzz: broken invariant: %s\n", what);
        abort();
    }
}

/* Bytes per element, by the target's own account (npy.c's must agree). */
static uint64_t size_of(gr_dtype t)
{
    switch (t) {
    case GR_DTYPE_UINT8:
        return 1;
    case GR_DTYPE_FLOAT16:
    case GR_DTYPE_BFLOAT16:
        return 2;
    case GR_DTYPE_FLOAT64:
        return 8;
    default:
        return 4;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_npy_header h, back;
    char why[256], buf[2048];
    unsigned __int128 product = 1;
    size_t n;

    memset(why, 0x5a, sizeof(why));
    if (gr_npy_parse_header(data, size, &h, why, sizeof(why)) != GR_OK) {
        check(memchr(why, '\0', sizeof(why)) != NULL && why[0] != '\0',
              "refusal without a message");
        return 0;
    }
    check(h.data_offset <= size, "data_offset past the input");
    check(h.ndim <= GR_NPY_MAX_DIMS, "ndim");
    for (uint32_t i = 0; i < h.ndim; i++) {
        product *= h.shape[i];
        if (product > UINT64_MAX)
            product = (unsigned __int128)UINT64_MAX + 1; /* stays "overflowed", or 0 */
    }
    check(product == h.elems, "elems is not the product of the shape");
    check(h.dtype < GR_DTYPE_COUNT_, "dtype");
    check(h.elems <= (UINT64_MAX - h.data_offset) / size_of(h.dtype), "data size overflows");
    for (int t = 0; t < GR_DTYPE_COUNT_; t++) {
        why[0] = 'x';
        if (gr_npy_check_dtype(&h, (gr_dtype)t, "f", "p", why, sizeof(why)) == GR_OK)
            check(t == (int)h.dtype, "a port of another type accepted it");
        else
            check(t != (int)h.dtype && why[0] == 'f', "a port of its type refused it");
    }
    n = gr_npy_format_header(h.dtype, h.shape, h.ndim, buf, sizeof(buf));
    check(n > 0 && n % 64 == 0 && buf[n - 1] == '\n', "format");
    if (h.elems > (UINT64_MAX - n) / size_of(h.dtype)) {
        /* Formatted, the header came out longer than the input's (its own spacing of the
         * shape): the data would then end past 2^64 bytes, which the parser refuses. */
        check(n > h.data_offset, "a size that fit overflows behind a header no longer");
        check(gr_npy_parse_header(buf, n, &back, why, sizeof(why)) != GR_OK,
              "re-parse of an overflowing size accepted");
        return 0;
    }
    check(gr_npy_parse_header(buf, n, &back, why, sizeof(why)) == GR_OK, "re-parse refused");
    check(back.ndim == h.ndim && back.elems == h.elems && back.data_offset == n, "re-parse");
    check(back.dtype == h.dtype && !back.swap, "re-parsed type");
    check(memcmp(back.shape, h.shape, h.ndim * sizeof(h.shape[0])) == 0, "re-parsed shape");
    return 0;
}

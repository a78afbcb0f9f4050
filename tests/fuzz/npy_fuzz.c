/*
 * npy_fuzz.c - libFuzzer target: any bytes through gr_npy_parse_header
 * (tools/graphrun/npy.c).
 *
 * Beyond not crashing or reading past the input: an accepted header lies within the input,
 * its element count is the product of its shape, its data size does not overflow, and the
 * header gr_npy_format_header writes for the same shape parses back to the same shape.
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
    check(h.elems <= (UINT64_MAX - h.data_offset) / 4, "data size overflows");
    n = gr_npy_format_header(h.shape, h.ndim, buf, sizeof(buf));
    check(n > 0 && n % 64 == 0 && buf[n - 1] == '\n', "format");
    check(gr_npy_parse_header(buf, n, &back, why, sizeof(why)) == GR_OK, "re-parse refused");
    check(back.ndim == h.ndim && back.elems == h.elems && back.data_offset == n, "re-parse");
    check(memcmp(back.shape, h.shape, h.ndim * sizeof(h.shape[0])) == 0, "re-parsed shape");
    return 0;
}

/*
 * npy.h - NumPy .npy headers for float32 C-order arrays: parsing and writing, no file I/O.
 *
 * The format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
 * ("\x93NUMPY", a version, a little-endian header length, then a Python dict literal with
 * the keys 'descr', 'fortran_order' and 'shape'). Pure functions: any thread.
 */
#ifndef GR_NPY_H
#define GR_NPY_H

#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>

#define GR_NPY_MAX_DIMS 32

typedef struct gr_npy_header {
    uint32_t ndim;
    uint64_t shape[GR_NPY_MAX_DIMS];
    uint64_t elems;       /* product of the shape; 1 for a 0-d array */
    uint64_t data_offset; /* bytes from the start of the file to the data */
} gr_npy_header;

/*
 * Parse the header at the start of `buf` (`len` bytes: the file's first bytes, at least up
 * to the end of the header). Accepts format versions 1.0, 2.0 and 3.0 holding a C-order
 * little-endian float32 array ('<f4'; '=f4' too, see npy.c for why). Reads nothing past
 * `len`. On GR_OK, `out` is filled and data_offset + elems * 4 fits in a uint64, so callers
 * may compute the file's expected size without overflow. Anything else (other dtypes,
 * fortran_order True, a malformed, truncated or oversized header) is GR_ERR_INVALID_ARGUMENT
 * with one line in `why` (NUL-terminated, truncated to why_len; `why` may be NULL) saying
 * what was found and what to do about it.
 */
gr_status gr_npy_parse_header(const void *buf, size_t len, gr_npy_header *out, char *why,
                              size_t why_len);

/*
 * Format the version 1.0 header of a C-order little-endian float32 array of this shape
 * (ndim <= GR_NPY_MAX_DIMS), byte for byte as NumPy's np.save writes it: the dict, spare
 * room to grow the first dimension, then spaces and '\n' up to a multiple of 64 bytes.
 * Returns the header's length (the data goes right after it), or 0 when it does not fit in
 * `size` bytes (a 32-dimension header of 20-digit sizes needs under 1 KiB) or ndim is too
 * large.
 */
size_t gr_npy_format_header(const uint64_t *shape, uint32_t ndim, char *buf, size_t size);

#endif /* GR_NPY_H */

/*
 * npy.h - NumPy .npy headers for C-order arrays of graphrun's element types: parsing,
 * checking against the type a port takes, writing, and byte order; no file I/O.
 *
 * The format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
 * ("\x93NUMPY", a version, a little-endian header length, then a Python dict literal with
 * the keys 'descr', 'fortran_order' and 'shape'). Pure functions: any thread.
 *
 * Element types, by the header's 'descr' (the first character is the byte order: '<'
 * little, '>' big, '=' this host's, '|' none):
 *
 *   float32  '<f4' '>f4' '=f4'       float64  '<f8' '>f8' '=f8'
 *   float16  '<f2' '>f2' '=f2'       int32    '<i4' '>i4' '=i4'
 *   uint8    '|u1' (also '<u1' '>u1' '=u1': one byte has no order)
 *   bfloat16 '<V2' '>V2' '=V2' '|V2': two raw bytes
 *
 * bfloat16: NumPy has none of its own. np.save of an ml_dtypes.bfloat16 array writes
 * '<V2' (its dtype.str: "two bytes of anything") and np.load reads that back as '|V2' raw
 * bytes (a.view(ml_dtypes.bfloat16) makes them bfloat16 again); saving those writes '|V2',
 * the bytes still in the order they were read in, little-endian as np.save wrote them on
 * every little-endian machine, and so '|V2' is read as little-endian. Since V2 says nothing
 * about what the bytes mean, the parser calls a V2 array bfloat16 (its only 2-byte reading
 * here) and gr_npy_check_dtype accepts it for a bfloat16 port only. uint16 ('<u2') is
 * not taken as bfloat16 bit patterns: its values are numbers (16-bit images), and reading
 * them as bit patterns would turn them silently into other numbers; the refusal says how to
 * convert either way. Every other dtype is refused with a message saying how to convert.
 */
#ifndef GR_NPY_H
#define GR_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>

#define GR_NPY_MAX_DIMS 32

typedef struct gr_npy_header {
    uint32_t ndim;
    uint64_t shape[GR_NPY_MAX_DIMS];
    uint64_t elems;       /* product of the shape; 1 for a 0-d array */
    uint64_t data_offset; /* bytes from the start of the file to the data */
    gr_dtype dtype;       /* the element type (a V2 array: bfloat16, see above) */
    bool swap;            /* the data's byte order is not this host's: swap every element */
    char descr[8];        /* the header's dtype string, for messages */
} gr_npy_header;

/*
 * Parse the header at the start of `buf` (`len` bytes: the file's first bytes, at least up
 * to the end of the header). Accepts format versions 1.0, 2.0 and 3.0 holding a C-order
 * array of one of the dtypes above. Reads nothing past `len`. On GR_OK, `out` is filled
 * and data_offset + elems * gr_dtype_size(dtype) fits in a uint64, so callers may compute
 * the file's expected size without overflow. Anything else (other dtypes, fortran_order
 * True, a malformed, truncated or oversized header) is GR_ERR_INVALID_ARGUMENT with one
 * line in `why` (NUL-terminated, truncated to why_len; `why` may be NULL) saying what was
 * found and what to do about it.
 */
gr_status gr_npy_parse_header(const void *buf, size_t len, gr_npy_header *out, char *why,
                              size_t why_len);

/*
 * Whether the array of header `h` can be read by a port of type `want`: the same type
 * (so a V2 array for bfloat16 only). GR_OK, or GR_ERR_INVALID_ARGUMENT with one line in `why`
 * of the form "WHAT holds float32 but PORT is uint8: convert with a.astype(np.uint8) or
 * change the spec's buffer type", where `what` names the array (a file's path, "the body")
 * and `port` the port ("the graph's in0").
 */
gr_status gr_npy_check_dtype(const gr_npy_header *h, gr_dtype want, const char *what,
                             const char *port, char *why, size_t why_len);

/* How NumPy converts an array `a` to type t, for messages: "a.astype(np.uint8)",
 * "a.astype(ml_dtypes.bfloat16)". */
const char *gr_npy_astype(gr_dtype t);

/*
 * Format the version 1.0 header of a C-order array of type `dtype` and this shape
 * (ndim <= GR_NPY_MAX_DIMS), in this host's byte order ('<' on little-endian hosts), byte
 * for byte as NumPy's np.save writes it (for bfloat16: '<V2', as np.save writes an
 * ml_dtypes.bfloat16 array): the dict, spare room to grow the first dimension, then spaces
 * and '\n' up to a multiple of 64 bytes. Returns the header's length (the data goes right
 * after it), or 0 when it does not fit in `size` bytes (a 32-dimension header of 20-digit
 * sizes needs under 1 KiB), ndim is too large or dtype is not a type.
 */
size_t gr_npy_format_header(gr_dtype dtype, const uint64_t *shape, uint32_t ndim, char *buf,
                            size_t size);

/* Reverse the bytes of each of `elems` elements of `size` bytes (1, 2, 4 or 8) in place:
 * a header's data in the other byte order into this host's. */
void gr_npy_swap(void *data, uint64_t elems, uint32_t size);

#endif /* GR_NPY_H */

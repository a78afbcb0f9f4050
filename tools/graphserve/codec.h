/*
 * codec.h - a tensor in an HTTP body, and the body of the result: NumPy .npy (float32, C
 * order) or raw little-endian float32. Pure functions on memory: any thread.
 *
 * The format of a request body: "application/x-npy" (or "application/npy") means .npy,
 * "application/octet-stream" raw; any other Content-Type, or none, is decided by the body:
 * .npy when it starts with NumPy's magic ("\x93NUMPY"), raw otherwise. A raw body is 1-D
 * unless the request gives a shape ("3,4": the product must be the element count). The
 * result goes back in the same format, with the same shape.
 */
#ifndef GS_CODEC_H
#define GS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/graphrun/npy.h"

typedef struct gs_tensor_desc {
    bool npy;        /* .npy, else raw float32 */
    uint32_t ndim;   /* the shape (raw without a shape: 1-D) */
    uint64_t shape[GR_NPY_MAX_DIMS];
    uint64_t elems;  /* > 0 */
    size_t offset;   /* where the float32 data starts in the body */
} gs_tensor_desc;

/*
 * Describe the tensor in `body` (`len` bytes). `content_type` and `shape` (the request's
 * shape argument) may be NULL. Returns 0, or the HTTP status to answer (400) with a one-line
 * reason in `why`: an empty body, a malformed or unsupported .npy header (the parser's own
 * words: dtype, order, truncation), data shorter or longer than the header says, a raw body
 * that is not whole float32s, a bad shape or one that does not match, 0 elements.
 */
int gs_decode(const void *body, size_t len, const char *content_type, const char *shape,
              gs_tensor_desc *out, char *why, size_t why_len);

/* The bytes that go before the result's data: a .npy header for this shape (as np.save
 * writes it), or nothing for raw. Returns its length (0 for raw), or SIZE_MAX when it does
 * not fit in `size` (1 KiB always does). */
size_t gs_encode_header(const gs_tensor_desc *t, char *buf, size_t size);

/* "application/x-npy" or "application/octet-stream". */
const char *gs_content_type(const gs_tensor_desc *t);

#endif /* GS_CODEC_H */

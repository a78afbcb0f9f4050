/*
 * codec.h - a tensor in an HTTP body, and the body of the result: NumPy .npy (C order) or
 * raw (this host's byte order, little-endian on every host graphserve runs on), of the
 * element type of the pipeline's port. Pure functions on memory: any thread.
 *
 * The format of a request body: "application/x-npy" (or "application/npy") means .npy,
 * "application/octet-stream" raw; any other Content-Type, or none, is decided by the body:
 * .npy when it starts with NumPy's magic ("\x93NUMPY"), raw otherwise. A .npy body must
 * hold the input port's type (either byte order: tools/graphrun/npy.h lists the dtypes), a
 * raw body is read as that type. A raw body is 1-D unless the request gives a shape ("3,4":
 * the product must be the element count). The result goes back in the same format, in the
 * output port's type, with the same shape (1-D of its size for a port of a fixed size).
 */
#ifndef GS_CODEC_H
#define GS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/npy.h"

typedef struct gs_tensor_desc {
    bool npy;        /* .npy, else raw */
    gr_dtype dtype;  /* the element type */
    bool swap;       /* .npy data in the other byte order: swap before use */
    uint32_t ndim;   /* the shape (raw without a shape: 1-D) */
    uint64_t shape[GR_NPY_MAX_DIMS];
    uint64_t elems;  /* > 0 */
    size_t offset;   /* where the data starts in the body */
} gs_tensor_desc;

/*
 * Describe the tensor in `body` (`len` bytes) for an input port of type `dtype`, named
 * `port` in messages ("pipeline seed's in0"). `content_type` and `shape` (the request's
 * shape argument) may be NULL. Returns 0, or the HTTP status to answer (400) with a one-line
 * reason in `why`: an empty body, a malformed or unsupported .npy header (the parser's own
 * words: dtype, order, truncation), a .npy of another type than the port's (saying how to
 * convert it), data shorter or longer than the header says, a raw body that is not whole
 * values of the type, a bad shape or one that does not match, 0 elements.
 */
int gs_decode(const void *body, size_t len, const char *content_type, const char *shape,
              gr_dtype dtype, const char *port, gs_tensor_desc *out, char *why,
              size_t why_len);

/* The bytes that go before the result's data: a .npy header for this type and shape (as
 * np.save writes it), or nothing for raw. Returns its length (0 for raw), or SIZE_MAX when
 * it does not fit in `size` (1 KiB always does). */
size_t gs_encode_header(const gs_tensor_desc *t, char *buf, size_t size);

/* "application/x-npy" or "application/octet-stream". */
const char *gs_content_type(const gs_tensor_desc *t);

#endif /* GS_CODEC_H */

/*
 * pieces.h - copies between the host and a device moved through a staging buffer in
 * pieces, with the CPU's part of the work overlapping the device's: the schedule of a
 * streamed unit (graph.h: gr_iteration.streamed), apart from the calls that carry it out.
 *
 * The staging buffer is cut into `parts` parts of `part` bytes, used in turn. In (host to
 * device): a piece is copied by the host into the next part, then its copy to the device is
 * queued; a part is filled again only once the copy queued on it last has ended (wait), so
 * the host fills one part while the device reads the others. Out (device to host): copies
 * of the first pieces into the parts are queued; then, piece by piece, its part's copy is
 * waited for, the host moves it to its destination, and the part takes the piece `parts`
 * ahead. Out returns once every piece is at its destination and every part's last copy,
 * in or out, has ended: the staging buffer is free for other use then, even where nothing
 * went out through it. The device's copies are queued in order on one queue (a CUDA
 * stream), so a copy out queued after the copies in never overwrites a part before the
 * device has read it.
 *
 * The copies whose bit is set in `direct` are not moved here (the caller copies those where
 * they lie); bits exist for the first 64 copies.
 */
#ifndef GR_PIECES_H
#define GR_PIECES_H

#include <stdint.h>

#include "runtime/core/copier.h"

typedef struct gr_piece_ops {
    void *ctx;
    /* Queue the device's copy of `bytes` from src to dst, using part `part` of the staging
     * buffer (its source going in, its destination coming out); 0, or the failure. */
    int (*queue)(void *ctx, uint32_t part, void *dst, const void *src, uint64_t bytes);
    /* Wait until the copy queued last on part `part` has ended; 0, or the failure. */
    int (*wait)(void *ctx, uint32_t part);
    /* The host's copy (a copy pool's, copier.h): done when it returns. */
    void (*host_copy)(void *ctx, void *dst, const void *src, uint64_t bytes);
} gr_piece_ops;

/* Move list[0 .. n) (host sources, device destinations) but the direct ones, through
 * `staging` cut into `parts` parts of `part` bytes (both > 0). Returns 0, or the first
 * failure of queue or wait (the device may still be copying pieces queued before it). */
int gr__pieces_in(const gr_piece_ops *ops, unsigned char *staging, uint64_t part,
                  uint32_t parts, const gr_copy *list, uint32_t n, uint64_t direct);

/* The same out: device sources, host destinations; when it returns 0, every piece is at
 * its destination and no copy queued on a part, in or out, is still running. */
int gr__pieces_out(const gr_piece_ops *ops, unsigned char *staging, uint64_t part,
                   uint32_t parts, const gr_copy *list, uint32_t n, uint64_t direct);

#endif /* GR_PIECES_H */

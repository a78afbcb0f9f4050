/*
 * pieces.c - the schedule of copies moved through a staging buffer in pieces (pieces.h).
 */
#include "runtime/core/pieces.h"

/* Where the next piece of a copy list starts. */
typedef struct cursor {
    uint32_t copy; /* the copy the next piece is of */
    uint64_t at;   /* its bytes already cut into pieces */
} cursor;

/* The next piece (at most `part` bytes) of the copies not in `direct`, into *c; false
 * after the last. */
static int next_piece(cursor *k, const gr_copy *list, uint32_t n, uint64_t direct,
                      uint64_t part, gr_copy *c)
{
    while (k->copy < n && ((k->copy < 64 && (direct >> k->copy) & 1) ||
                           k->at >= list[k->copy].bytes)) {
        k->copy++;
        k->at = 0;
    }
    if (k->copy == n)
        return 0;
    c->dst = (char *)list[k->copy].dst + k->at;
    c->src = (const char *)list[k->copy].src + k->at;
    c->bytes = list[k->copy].bytes - k->at < part ? list[k->copy].bytes - k->at : part;
    k->at += c->bytes;
    return 1;
}

int gr__pieces_in(const gr_piece_ops *ops, unsigned char *staging, uint64_t part,
                  uint32_t parts, const gr_copy *list, uint32_t n, uint64_t direct)
{
    cursor k = {0, 0};
    gr_copy c;
    int e;

    for (uint64_t j = 0; next_piece(&k, list, n, direct, part, &c); j++) {
        uint32_t s = (uint32_t)(j % parts);
        unsigned char *p = staging + s * part;

        if (j >= parts && (e = ops->wait(ops->ctx, s)) != 0) /* the device read it */
            return e;
        ops->host_copy(ops->ctx, p, c.src, c.bytes);
        if ((e = ops->queue(ops->ctx, s, c.dst, p, c.bytes)) != 0)
            return e;
    }
    return 0;
}

int gr__pieces_out(const gr_piece_ops *ops, unsigned char *staging, uint64_t part,
                   uint32_t parts, const gr_copy *list, uint32_t n, uint64_t direct)
{
    cursor queued = {0, 0}, moved = {0, 0};
    uint64_t n_queued = 0;
    gr_copy c;
    int e;

    for (uint64_t j = 0;; j++) {
        uint32_t s = (uint32_t)(j % parts);

        /* Every part busy: pieces queued up to `parts` ahead of the one moved next. Piece
         * n_queued's part held piece n_queued - parts, moved already (it is < j). */
        while (n_queued < j + parts && next_piece(&queued, list, n, direct, part, &c)) {
            uint32_t q = (uint32_t)(n_queued++ % parts);

            if ((e = ops->queue(ops->ctx, q, staging + q * part, c.src, c.bytes)) != 0)
                return e;
        }
        if (!next_piece(&moved, list, n, direct, part, &c)) {
            /* Copies in may still read parts that no piece out reused: none is left. */
            for (uint32_t q = 0; q < parts; q++)
                if ((e = ops->wait(ops->ctx, q)) != 0)
                    return e;
            return 0;
        }
        if ((e = ops->wait(ops->ctx, s)) != 0)
            return e;
        ops->host_copy(ops->ctx, c.dst, staging + s * part, c.bytes);
    }
}

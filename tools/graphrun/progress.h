/*
 * progress.h - the live progress line of a streaming run, for a terminal: tensors done of
 * total, the disk's read and write rates, the rate over the link (the tensors' bytes in and
 * out done), host memory in use against its bound, and the time to go. Drawn on stderr,
 * redrawn in place at most every PROGRESS_EVERY_MS; nothing at all when stderr is not a
 * terminal (unless forced), so logs and pipes stay clean.
 */
#ifndef GR_PROGRESS_H
#define GR_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gr_progress {
    bool enabled;
    int64_t drawn_ns;
    int last_len;
} gr_progress;

typedef struct gr_progress_info {
    uint64_t tensors, done, failed;
    uint64_t read_bytes, written_bytes; /* to and from the disk so far */
    uint64_t done_bytes, total_bytes;   /* the tensors' bytes in and out: done, all */
    uint64_t host_in_use, host_limit;
    double seconds;                     /* since the run started */
} gr_progress_info;

/* mode: 0 auto (a terminal), 1 always, -1 never. */
void gr_progress_start(gr_progress *p, int mode);

/* Redraw, unless it was drawn less than PROGRESS_EVERY_MS ago and not `force`d (the last
 * draw, so that the line shows the end before it is erased). */
void gr_progress_draw(gr_progress *p, const gr_progress_info *pi, bool force);

/* Erase the line (before other output). */
void gr_progress_end(gr_progress *p);

#endif /* GR_PROGRESS_H */

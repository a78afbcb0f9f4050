/*
 * progress.h - the live progress line of a running job, for a terminal: tensors done of
 * total, throughput, budget in use, time to go. Drawn on stderr, redrawn in place; nothing
 * at all when stderr is not a terminal (unless forced), so logs and pipes stay clean.
 */
#ifndef GR_PROGRESS_H
#define GR_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>

typedef struct gr_progress {
    bool enabled;
    int64_t start_ns;
    uint64_t bytes_per_tensor; /* in + out, for the throughput */
    int last_len;
} gr_progress;

/* mode: 0 auto (a terminal), 1 always, -1 never. */
void gr_progress_start(gr_progress *p, int mode, uint64_t bytes_per_tensor);

/* Redraw from the job's progress and the runtime's device statistics. */
void gr_progress_draw(gr_progress *p, const gr_job_progress *jp, const gr_runtime *rt);

/* Erase the line (before other output). */
void gr_progress_end(gr_progress *p);

#endif /* GR_PROGRESS_H */

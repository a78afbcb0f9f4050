/*
 * readahead.h - the first inputs of a `graphrun run` read into the page cache while the run
 * starts, so that the disk is busy from the first moment.
 *
 * Before the stream (stream.h) reads anything, the run opens its window of pinned memory
 * and starts the runtime: the CUDA driver, a context per worker, the arena. On a GPU that is
 * a third of a second or more, during which the disk would sit idle, and a run that streams
 * at the disk's speed ends that much later than the disk alone would. A thread of its own
 * reads the first tensors' input files meanwhile, whole, in order, through the page cache
 * (into a scratch buffer that is thrown away), up to a bound; the stream then reads those
 * files buffered (from memory) rather than with O_DIRECT (from the disk again), and drops
 * each from the page cache once it has it: data read once does not stay there, as with
 * O_DIRECT (a file the cache held before the run is dropped too). stdin, held in memory
 * already, is not read ahead.
 *
 * The bound is the run's --host-memory: what the user allows the run to hold. The page
 * cache is not the run's resident set and the kernel may reclaim it; a file it reclaimed is
 * read from the disk again, only slower. A file is called warm only when all of it was read
 * before the stream started (gr_readahead_stop); what the thread read of a file it could
 * not read whole (the one it was in when stopped, one shorter than planned) is dropped at
 * once.
 *
 * Owner only, but for the thread it starts: start, stop and destroy from one thread.
 */
#ifndef GR_READAHEAD_H
#define GR_READAHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/io.h"

typedef struct gr_readahead gr_readahead;

/* Start reading the input files of the plan's tensors in index order (skip: NULL, or
 * plan->count flags of tensors not to run), at most `limit` bytes of files. The plan must
 * outlive it. GR_ERR_OUT_OF_MEMORY, or a thread that cannot start: *out is NULL, and the run
 * goes on without (nothing depends on it but speed). */
gr_status gr_readahead_start(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                             gr_readahead **out);

/* Stop reading (within one piece of a file; what was read of that file leaves the page
 * cache) and wait for the thread. Then the warm files are known. NULL is a no-op. */
void gr_readahead_stop(gr_readahead *r);

/* Whether input file `k` (plan->in[k]) was read whole before gr_readahead_stop: the page
 * cache has it. NULL: false. */
bool gr_readahead_warm(const gr_readahead *r, uint64_t k);

/* Files read whole, the bytes of them, and the thread's time from its start to the end of
 * the last of them (bytes over seconds: the disk's rate through the page cache). */
void gr_readahead_counts(const gr_readahead *r, uint64_t *files, uint64_t *bytes,
                         double *seconds);

/* Stop and free it. The warm files stay in the page cache until the stream reads them (a
 * run stopped before it read them leaves them there, clean, for the kernel to reclaim).
 * NULL is a no-op. */
void gr_readahead_destroy(gr_readahead *r);

#endif /* GR_READAHEAD_H */

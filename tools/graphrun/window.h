/*
 * window.h - the host memory of a streaming `graphrun run`: how much each tensor holds
 * while it is read, run and written (its layout), the default bound (--host-memory), and
 * the window those buffers are carved from, so that the run's host memory stays within the
 * bound whatever the size of the dataset.
 *
 * Layout. Every buffer starts on a GR_WINDOW_ALIGN boundary and spans whole blocks, so that
 * files can be read and written with O_DIRECT: an input's extent holds its file from the
 * block its data starts in (a .npy file's data lies at its header's offset, not on a block:
 * the extent starts `in_pad` bytes before it) to the end of the data rounded up to a block.
 * An output's extent holds its .npy header right before its data, so that one write from
 * the extent's start covers the file. Outputs are not computed in place over their inputs:
 * the public API does not say which of a graph's outputs may alias which input (the
 * runtime refuses an output whose input is not copied in before it is copied out), so each
 * has an extent of its own, as a tensor's outputs always had.
 *
 * The window. Segments of host memory of the kind the run asked for (pinned on CUDA,
 * through gr_hostbuf_alloc_large, so that the copies in and out are DMA; registered; or
 * pageable),
 * the first when the window opens, the others by a thread of the window's own while the
 * stream runs (gr_window_grow_ahead), or when the buffers already held leave no room, up to
 * the bound; extents are
 * taken first-fit from them and given back for the next read. A segment is at least one
 * tensor's worth (`least`), so any tensor fits once the tensors before it are written; when
 * the system will not give a segment's size at once, halves of it are tried down to that.
 *
 * Owner only: one thread per window (the grower's thread is the window's own).
 */
#ifndef GR_WINDOW_H
#define GR_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/hostbuf.h"
#include "tools/graphrun/io.h"

#define GR_WINDOW_ALIGN 4096u

typedef struct gr_window_layout {
    uint64_t in_off[GR_MAX_PORTS]; /* the file offset its extent starts at (block aligned) */
    uint64_t in_pad[GR_MAX_PORTS]; /* where the data starts in the extent */
    uint64_t in_len[GR_MAX_PORTS]; /* the extent: in_pad + data, in whole blocks */
    uint32_t out_hlen[GR_MAX_PORTS]; /* the output file's header (0: raw) */
    uint64_t out_len[GR_MAX_PORTS];  /* its extent, header and data in whole blocks */
    uint64_t total;                  /* host bytes the tensor holds */
} gr_window_layout;

/* Planned tensor i's layout. */
void gr_window_layout_of(const gr_io_plan *plan, uint64_t i, gr_window_layout *l);

/* The largest layout total among the tensors the plan will run (skip: NULL, or the
 * tensors not to run), and the sum of them all. */
void gr_window_need(const gr_io_plan *plan, const bool *skip, uint64_t *largest,
                    uint64_t *sum);

/* Whether the largest tensor to run (skip as above) fits in `limit` bytes: GR_OK, or
 * GR_ERR_INVALID_ARGUMENT with why[len] naming the tensor, what it needs and what to give;
 * `how` says where a default limit comes from (gr_window_default), NULL when --host-memory
 * gave it. `graphrun run` and `graphrun check` refuse alike with it. */
gr_status gr_window_check(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                          const char *how, char *why, size_t len);

/* The default bound: a quarter of this machine's memory, at most GR_WINDOW_DEFAULT_CAP, and
 * at most a quarter of the address-space limit (RLIMIT_AS: the runtime's threads and budget
 * need address space too) and half of the cgroup's memory.max where those are set. how[len]
 * says which applied ("the default: ..."). The cap is 2 GiB, not more: against the disk's
 * own time, larger windows ran slower (docs/PERFORMANCE.md, "graphrun run against the
 * disk"), and 2 GiB still holds two 400 MB tensors with their outputs. */
#define GR_WINDOW_DEFAULT_CAP (2ull << 30)
uint64_t gr_window_default(char *how, size_t len);

typedef struct gr_window gr_window;

/* A window of at most `limit` bytes in segments of `segment` bytes, or of no less than
 * `least` when the system gives no more at once (multiples of GR_WINDOW_ALIGN, least <=
 * segment <= limit), of memory kind `kind`. Allocates no segment yet. */
gr_status gr_window_create(uint64_t limit, uint64_t segment, uint64_t least, gr_mem_kind kind,
                           gr_window **out);

/* The window of a run: at most `limit` bytes (at least the largest tensor's need), in
 * segments of a quarter of it, at most GR_WINDOW_SEGMENT_MAX (pinned memory is allocated a
 * segment at a time: gr_window_grow_ahead), at most what all the tensors to run need, in
 * whole multiples of the largest tensor's need (at least one); with its first segment
 * allocated, so that a run that cannot
 * have even that learns it before anything starts. GR_ERR_OUT_OF_MEMORY then. */
#define GR_WINDOW_SEGMENT_MAX (256ull << 20)
gr_status gr_window_open(const gr_io_plan *plan, const bool *skip, uint64_t limit,
                         gr_mem_kind kind, gr_window **out);

/* The most host memory the window of such a run holds: its bound, or, when every tensor to
 * run fits in less, their need in whole segments. */
uint64_t gr_window_most(const gr_io_plan *plan, const bool *skip, uint64_t limit);

/* An extent of `bytes` (a multiple of GR_WINDOW_ALIGN, at most `least`), block aligned,
 * into *out. GR_ERR_UNAVAILABLE when there is no room until some extent is given
 * back or the grower gives a segment; GR_ERR_OUT_OF_MEMORY when the system gives no memory for the first segment (later
 * segments that cannot be had shrink the window to those it has, and say so in
 * gr_window_shortfall). */
gr_status gr_window_alloc(gr_window *w, uint64_t bytes, void **out);

/* Give back an extent of `bytes` from gr_window_alloc. */
void gr_window_free(gr_window *w, void *p, uint64_t bytes);

typedef struct gr_window_stats {
    uint64_t limit, segment;
    uint64_t held;      /* bytes of the segments allocated */
    uint64_t in_use, peak_in_use;
    uint64_t shortfall; /* bytes of the bound the system would not give (0: none) */
    gr_mem_kind kind;   /* what the segments are (pageable when pinning failed) */
    uint32_t segments;  /* allocated */
    /* Time spent allocating segments (pinning them, on CUDA): the first, which the run's
     * setup waits for, and the others (the grower's, beside the stream; else the owner's,
     * whose stream waits for them). */
    int64_t first_ns, more_ns;
    bool grown_ahead;        /* a grower thread ran (gr_window_grow_ahead) */
    uint32_t segments_grown; /* of `segments`, the grower's */
    uint32_t segments_huge;  /* of `segments`, those mapped for huge pages (hostbuf.h) */
} gr_window_stats;

/* Also takes in what the grower has allocated: the owner's thread only. */
void gr_window_stats_get(gr_window *w, gr_window_stats *out);

/* Allocate the window's further segments on a thread of its own until it holds `upto`
 * bytes (gr_window_most: what the run's tensors need, at most the bound), rather than on
 * the owner's thread when an extent finds no room. Pinning a segment of hundreds of MB
 * takes a tenth of a second or more (about 0.5 ms a MiB on the H200), time in which the
 * owner would start no read, submit no tensor and reap nothing; the grower takes it off
 * the stream. gr_window_alloc takes in each segment the grower has finished and answers
 * GR_ERR_UNAVAILABLE while the grower may still give room (the stream retries on its
 * next turn); once the grower is done (or stopped), the owner grows the window itself as
 * before, halves of a segment included: the grower takes whole segments only, and stops
 * at the first the system will not give. The window may then hold `upto` bytes whether
 * or not the run would have filled them: the bound is what the user allows. Nothing
 * happens when the thread cannot start or with GR_TEST_WINDOW_GROWTH set in the
 * environment (a test and bench knob: the owner's growth alone, for comparison). Call it
 * once the runtime and the stream's own threads have started, so that they get their
 * memory before the window takes the rest of what a limit allows. Once a window. */
void gr_window_grow_ahead(gr_window *w, uint64_t upto);

/* Tell the grower, when there is one, to allocate no further segment, and with `wait`
 * wait for it (the segment it is allocating, if any, is kept). Idempotent;
 * gr_window_destroy stops it too. */
void gr_window_grow_stop(gr_window *w, bool wait);

/* Free every segment (after stopping the grower). NULL is a no-op. */
void gr_window_destroy(gr_window *w);

#endif /* GR_WINDOW_H */

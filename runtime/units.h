/*
 * units.h - how a job's tensors are cut into units of work (one task, one iteration each).
 *
 * For a graph that cannot be split (a kernel that is not elementwise, a buffer not the
 * tensor's size), every tensor is one unit, as it is given. For a splittable graph the
 * planner cuts the job to fit the budget and to move data in large pieces:
 *   - a tensor larger than a worker's share of the budget becomes chunks, each a unit; so
 *     does one of more than pipeline_bytes of host memory, so that a job's copies in and
 *     out overlap from its start to its end;
 *   - consecutive small tensors are packed into one unit (a batch), so one graph launch and
 *     one transfer each way serve many of them;
 *   - a unit is "staged" when its host memory cannot be read by DMA as it is (a batch of
 *     tensors apart in memory, or pageable memory): the worker gathers its inputs into a
 *     pinned staging buffer and scatters its outputs back; where the backend can copy
 *     many ranges in one call (CUDA's cudaMemcpyBatchAsync), a batch of tensors apart in
 *     DMA-ready memory is "scattered" instead: the DMA engine reads and writes each tensor
 *     where it lies, and no CPU copies it.
 * An index ends when the last unit covering it has finished.
 */
#ifndef GR_UNITS_H
#define GR_UNITS_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "runtime/backend.h"
#include <graphrun.h>

/* Most tensors one batch may hold (bounds the worker's gather and scatter lists). */
#define GR_UNIT_MAX_TENSORS 4096

typedef struct gr_unit {
    uint64_t index;   /* first tensor */
    uint64_t offset;  /* first element within it (a chunk); 0 for a batch */
    uint64_t elems;   /* elements in the unit */
    uint32_t tensors; /* 1 for a chunk or a whole tensor; more for a batch */
    bool staged;      /* through the worker's staging buffer (else straight from the tensors:
                         one tensor, a chunk of one, or a batch lying back to back) */
    bool scattered;   /* a batch of tensors apart in DMA-ready memory, which the backend
                         copies one by one in a batched copy (gr_iteration.h2d) */
} gr_unit;

typedef struct gr_unit_limits {
    uint64_t max_elems;    /* a unit's elements: fits a worker's share of the budget */
    uint64_t pipe_elems;   /* a direct chunk's elements, for pipelining (<= max_elems) */
    uint64_t stage_elems;  /* a staged unit's elements: fits the staging buffer */
    uint64_t batch_below;  /* tensors with fewer elements than this are batched */
    /* The backend copies many separate ranges in one call and the graph's copies come
     * first and last (graph.copies_at_ends): a batch of tensors apart in DMA-ready memory
     * is then scattered rather than staged. */
    bool scatter;
    /* With scatter: tensors below scatter_below elements in DMA-ready memory are batched
     * too (the DMA engine copies each, so medium ones gain from sharing one iteration), and
     * a batch is scattered only when its tensors have scatter_from elements or more (below
     * that a CPU gather into staging costs less than a copy descriptor each). */
    uint64_t scatter_below, scatter_from;
    /* A short job of many tensors is batched into at least `spread` units where its tensors
     * allow (0: no such rule), none smaller than `spread_floor` elements (its tensors are
     * not chunked finer for it): in 5 units on 3 workers, a job of 100 tensors of 1 MiB
     * spends most of its time filling and draining the pipeline (its first copy in and
     * last copy out run alone): on the H200 0.726 of the link in 5 units, 0.766 in 13
     * (docs/PERFORMANCE.md, "Defaults"). The units are of one size: ramped ones (small at
     * the start and the end) are no faster. */
    uint32_t spread;
    uint64_t spread_floor;
    /* Units begin and end only at multiples of this many elements of a tensor (1: at any
     * element): gr_job_options.cut_elems, for kernels of whole rows. gr__unit_limits_cut
     * sets it. */
    uint64_t cut;
} gr_unit_limits;

/* The measured sizes behind gr_unit_limits.scatter_below and scatter_from, per tensor on
 * its widest port: on an H200, 16 KiB tensors gathered by the CPU went at 357,000 a second
 * and scattered at 284,000; 64 KiB ones at 45,000 and 414,000 (docs/PERFORMANCE.md). */
#define GR_SCATTER_FROM_BYTES (32u << 10)
#define GR_SCATTER_BELOW_BYTES (16u << 20)
/* The smallest unit the spread rule (gr_unit_limits.spread) cuts a short job into. */
#define GR_SPREAD_FLOOR_BYTES (1u << 20)

/* The limits for graph `g` on devices whose smallest arena is `arena_bytes`, shared by
 * `workers` workers, each with a staging buffer of `staging_bytes`, batching tensors below
 * `batch_below_bytes`, cutting tensors of more host bytes than `pipeline_bytes` (0: no such
 * cut) into chunks of about that size. */
gr_unit_limits gr__unit_limits(const gr_graph *g, uint64_t arena_bytes, uint32_t workers,
                               uint64_t staging_bytes, uint64_t batch_below_bytes,
                               uint64_t pipeline_bytes);

/* The most elements of graph `g` a unit staged through a worker's staging buffer of
 * `staging_bytes` holds, inputs and outputs together (at least 1): gr_unit_limits.stage_elems
 * before it is held to a worker's share of the budget. */
uint64_t gr__unit_staged_most(const gr_graph *g, uint64_t staging_bytes);

/* Limits `lim` for units of whole runs of `cut` elements (0 or 1: any element): the
 * sizes of a chunk rounded down to whole runs, at least one run (job_submit.c refuses a
 * run that does not fit the device or a staged unit). Batches hold whole tensors,
 * themselves whole runs. */
void gr__unit_limits_cut(gr_unit_limits *lim, uint64_t cut);

/* Planner environments for plans made without asking about real memory (a dry run,
 * dryrun.c; the tests): every host range DMA-ready, or none. */
extern const gr_backend_env gr__units_all_ready, gr__units_none_ready;

/*
 * Plan the units of `count` tensors. `env->host_ready(env, hold, p, bytes)` says whether
 * host memory [p, p + bytes) can be read by DMA as it is, for the job holding `hold`
 * (page-locked; always true on the host backend). On GR_OK:
 * *units is NULL when every tensor is one unit as given (then unit k is tensor k, and
 * *pending is NULL too), else an array of *n_units units and *pending the number of units
 * covering each tensor. GR_ERR_OUT_OF_MEMORY when the plan does not fit in host memory.
 */
gr_status gr__units_plan(const gr_graph *g, const gr_tensor *t, uint64_t count,
                         const gr_unit_limits *lim, const gr_backend_env *env,
                         const struct gr_host_hold *hold, gr_unit **units, uint64_t *n_units,
                         uint32_t **pending);

#endif /* GR_UNITS_H */

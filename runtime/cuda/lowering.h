/*
 * cuda/lowering.h - lowering an iteration template to an explicit CUDA graph, and replaying
 * it.
 *
 * A template is lowered once per worker and slot (gr_cuda_graph.slot) into a cudaGraph
 * (memcpy H2D nodes, kernel nodes, memcpy D2H nodes, with the template's dependencies as
 * edges, built with the graph API, not stream capture) and instantiated once. Every later
 * iteration only updates the node parameters of the instantiated graph in place (host and
 * device addresses, copy sizes, kernel arguments and grid) and launches it. When the
 * driver refuses an in-place update (for example, a host operand of another memory kind),
 * the graph is rebuilt with the new parameters and instantiated again, and replay
 * continues.
 *
 * Everything here runs on one worker thread, with that worker's CUDA context current.
 */
#ifndef GR_CUDA_LOWERING_H
#define GR_CUDA_LOWERING_H

#include <cuda_runtime_api.h>
#include <graphrun.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "runtime/backend.h"

/* How a kernel node is put into the graph, by its kernel's CUDA implementation. */
typedef enum gr_cuda_node_how {
    GR_CUDA_NODE_KERNEL = 0, /* a kernel node of the runtime API; func: a __global__ entry of
                                this CUDA runtime, or a cudaKernel_t */
    GR_CUDA_NODE_FUNCTION,   /* a kernel node of the driver API; func: a CUfunction */
    GR_CUDA_NODE_CAPTURE,    /* a child graph captured from func, a gr_kernel_launch_fn */
    GR_CUDA_NODE_STREAM,     /* func, a gr_kernel_launch_fn, called eagerly (no graph) */
} gr_cuda_node_how;

typedef struct gr_cuda_impl {
    gr_cuda_node_how how;
    const void *func;
} gr_cuda_impl;

/* The parameters one node was last given, to skip updates that change nothing. */
typedef struct gr_cuda_node_state {
    void *dst;
    const void *src;
    uint64_t bytes;
    gr_kernel_args args;
    gr_cuda_impl impl; /* the kernel as this context launches it (gr_cuda_resolve_fn) */
    unsigned grid, block;
} gr_cuda_node_state;

/* How the worker's context launches kernel `k`. GR_ERR_UNAVAILABLE (or the status of what
 * failed: loading a module, say) with the reason when it cannot. */
typedef gr_status (*gr_cuda_resolve_fn)(void *ctx, const gr_kernel *k, gr_cuda_impl *impl,
                                        gr_error_info *err);

/* What lowering needs of the worker: its device's multiprocessors, for the grid rule; its
 * kernel resolver; the stream it captures launch callbacks on (never the one it launches
 * graphs on, which must stay free of captures). */
typedef struct gr_cuda_target {
    int sm_count;
    gr_cuda_resolve_fn resolve;
    void *resolve_ctx;
    cudaStream_t capture_stream;
    /* A private context: there the driver moves an instantiated graph's copies once and
     * refuses (invalid value) the next move until the graph is instantiated again, in every
     * variant the probe tried (tools/bench/probes/graph_update_contexts.cu, its "sequence" cases:
     * "buRuRu" against the primary context's "buuuuu"). Its sequences move both of a
     * unit's copies each time, so whether the driver allows one move per node or per graph
     * is not told apart; gr__cuda_graph_update rebuilds before a graph's second move, which
     * asks nothing the driver refuses under either rule. */
    bool copies_move_once;
} gr_cuda_target;

typedef struct gr_cuda_graph {
    uint64_t graph_id; /* the template's gr_graph.id; 0 while unused */
    /* The worker's slot (gr_iteration.slot) whose units it runs. The driver orders an
     * executable graph's launches one after another, so of two units in flight sharing
     * one, the second's copies in (nodes of it) would wait for the first's copies out:
     * each slot lowers its own. */
    uint32_t slot;
    uint32_t host_kinds; /* bit per host operand: 1 = page-locked, or GR_CUDA_DEVICE_ONLY
                            (see gr__cuda_host_kinds) */
    uint64_t last_use;   /* for least-recently-used eviction */
    /* The registration cache's epoch when lowered (gr_backend_env.host_epoch; 0 without
     * one): a graph over host memory is lowered again once the cache has registered or
     * unregistered anything since, so no copy node keeps a view of host memory the driver
     * no longer has. */
    uint64_t host_epoch;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t nodes[GR_MAX_NODES];
    gr_cuda_node_state state[GR_MAX_NODES];
    cudaError_t error; /* the CUDA error of the last failed build or update */
    /* The last failed build failed at a copy node the driver refused (invalid value: its
     * range, say over two allocations), or the "copy" fault site did: a unit over the
     * worker's staging buffer would go in (backend.h: GR_REACH_REFUSED_COPY). */
    bool copy_refused;
    bool copies_moved; /* an update since the instantiation moved a copy node */
} gr_cuda_graph;

/* The launch rule's defaults (graphrun.h: gr_kernel_def.cuda_block, cuda_blocks_per_sm):
 * blocks of 256 threads, grids of at most 8 blocks per multiprocessor. */
#define GR_CUDA_BLOCK 256
#define GR_CUDA_BLOCKS_PER_SM 8

/*
 * Lower `it`'s template with `it`'s parameters, and instantiate. On failure `cg` holds
 * nothing and `err` names the node and the CUDA error.
 */
gr_status gr__cuda_graph_build(gr_cuda_graph *cg, const gr_iteration *it,
                               const gr_cuda_target *target, uint32_t host_kinds,
                               gr_error_info *err);

/* What made gr__cuda_graph_update rebuild: the node the driver would not change in place
 * (or an injected failure), with its parameters before and after, for a report. */
typedef struct gr_cuda_refusal {
    bool copy;         /* a copy node (else a kernel node) */
    bool injected;     /* GR_FAULT_GRAPH_UPDATE, not the driver */
    bool unasked;      /* a second move under gr_cuda_target.copies_move_once: rebuilt
                          without asking the driver (error is cudaSuccess) */
    uint32_t node;     /* its index in the template */
    cudaError_t error; /* a copy node's: what the driver said */
    gr_cuda_node_state from, to;
} gr_cuda_refusal;

/* Point the instantiated graph at iteration `it` (same template): update in place, or
 * rebuild when the driver refuses or would (target->copies_move_once; *rebuilt set to true
 * then, and *why, when not NULL, says what was refused). */
gr_status gr__cuda_graph_update(gr_cuda_graph *cg, const gr_iteration *it,
                                const gr_cuda_target *target, bool *rebuilt,
                                gr_cuda_refusal *why, gr_error_info *err);

/* Whether `g` has a node that runs eagerly (GR_CUDA_STREAM), so that its iterations are
 * enqueued node by node (gr__cuda_run_eager) rather than as a CUDA graph. */
bool gr__cuda_graph_is_eager(const gr_graph *g);

/* Enqueue iteration `it` on `stream` node by node, in the template's order: each copy a
 * cudaMemcpyAsync (none of a graph lowered without its copies: `it->h2d` set), each kernel
 * launched or called as it resolves (a launch callback called, not captured). On failure
 * `err` names the node; work already enqueued stays on the stream (the caller drains it). */
gr_status gr__cuda_run_eager(const gr_iteration *it, const gr_cuda_target *target,
                             cudaStream_t stream, gr_error_info *err);

/* Release the graph and its instantiation. Idempotent. */
void gr__cuda_graph_release(gr_cuda_graph *cg);

/* Bit p (inputs) and bit GR_MAX_PORTS + p (outputs) set for each host operand of `it` that
 * is page-locked (cudaHostAlloc or cudaHostRegister, all of it: env->host_ready); with
 * private contexts or several devices, GR_CUDA_STAGED too when the operands are the
 * worker's staging buffer; or, for an iteration whose copies the backend does itself
 * (gr_iteration.h2d), GR_CUDA_DEVICE_ONLY alone: the graph is lowered without its copy
 * nodes. Iterations of one template and the same kinds on one slot share a graph, updated
 * in place: the driver refuses to move a copy node between memory of two kinds, or pinned
 * memory of two contexts (tools/bench/probes/graph_update_contexts.cu: invalid value). A
 * worker's staging buffer is made under its context (its private one, or its device's
 * primary one), the tensors' pinned memory usually under the first device's primary
 * context. */
#define GR_CUDA_DEVICE_ONLY (1u << 31)
#define GR_CUDA_STAGED (1u << 30)
uint32_t gr__cuda_host_kinds(const gr_backend_env *env, const gr_iteration *it);

#endif /* GR_CUDA_LOWERING_H */

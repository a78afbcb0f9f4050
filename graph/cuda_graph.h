/*
 * cuda_graph.h - lowering an iteration template to an explicit CUDA graph, and replaying it.
 *
 * A template is lowered once per worker into a cudaGraph (memcpy H2D nodes, kernel nodes,
 * memcpy D2H nodes, with the template's dependencies as edges, built with the graph API,
 * not stream capture) and instantiated once. Every later iteration only updates the node
 * parameters of the instantiated graph in place (host and device addresses, copy sizes,
 * kernel arguments and grid) and launches it. When the driver refuses an in-place update
 * (for example, a host operand of another memory kind), the graph is rebuilt with the new
 * parameters and instantiated again, and replay continues.
 *
 * Everything here runs on one worker thread, with that worker's CUDA context current.
 */
#ifndef GR_CUDA_GRAPH_H
#define GR_CUDA_GRAPH_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "runtime/graphrun.h"

/* The parameters one node was last given, to skip updates that change nothing. */
typedef struct gr_cuda_node_state {
    void *dst;
    const void *src;
    uint64_t bytes;
    gr_kargs kargs;
    unsigned grid;
} gr_cuda_node_state;

typedef struct gr_cuda_graph {
    uint64_t graph_id; /* the template's gr_graph.id; 0 while unused */
    uint32_t host_kinds; /* bit per host operand: 1 = page-locked (see gr_cuda_host_kinds) */
    uint64_t last_use;   /* for least-recently-used eviction */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t nodes[GR_MAX_NODES];
    gr_cuda_node_state state[GR_MAX_NODES];
    cudaError_t error; /* the CUDA error of the last failed build or update */
} gr_cuda_graph;

/* Blocks of 256 threads; grids of at most `sm_count` * this many blocks (grid-stride
 * kernels cover any size). */
#define GR_CUDA_BLOCK 256
#define GR_CUDA_BLOCKS_PER_SM 8

/*
 * Lower `it`'s template with `it`'s parameters, and instantiate. On failure `cg` holds
 * nothing and `err` names the node and the CUDA error.
 */
gr_status gr_cuda_graph_build(gr_cuda_graph *cg, const gr_iteration *it, int sm_count,
                              uint32_t host_kinds, gr_error_info *err);

/* Point the instantiated graph at iteration `it` (same template): update in place, or
 * rebuild when the driver refuses (*rebuilt set to true then). */
gr_status gr_cuda_graph_update(gr_cuda_graph *cg, const gr_iteration *it, int sm_count,
                               bool *rebuilt, gr_error_info *err);

/* Release the graph and its instantiation. Idempotent. */
void gr_cuda_graph_release(gr_cuda_graph *cg);

/* Bit p (inputs) and bit GR_MAX_PORTS + p (outputs) set for each host operand of `it` that
 * is page-locked (cudaHostAlloc or cudaHostRegister). */
uint32_t gr_cuda_host_kinds(const gr_iteration *it);

/* Fill `err` from a CUDA error: "<call>: <cudaErrorName>: <description>". Returns `st`. */
gr_status gr_cuda_error(gr_error_info *err, gr_status st, cudaError_t e, const char *node,
                        const char *call);

#endif /* GR_CUDA_GRAPH_H */

/*
 * graph.h - the graph template of one iteration, as the runtime and backends see it.
 *
 * The public API (graphrun.h) builds a template by name; finalizing validates it and
 * computes a topological order and each node's ancestors, which is all an executor needs:
 * run the nodes in `order`, or hand the dependency edges to a CUDA graph. A finalized
 * template is immutable and shared by reference counting between the caller and its jobs.
 */
#ifndef GR_GRAPH_H
#define GR_GRAPH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>

#include "kernels/kernels.h"

typedef enum gr_node_kind {
    GR_NODE_H2D,
    GR_NODE_KERNEL,
    GR_NODE_D2H,
} gr_node_kind;

typedef struct gr_buffer_def {
    char name[GR_NAME_MAX + 1];
    uint32_t num, den; /* elements = ceil(tensor_elems * num / den), unless fixed */
    uint64_t fixed;    /* nonzero: exactly this many elements, whatever the tensor */
    gr_dtype dtype;
    /* A constant (gr_graph_add_const): its index among the graph's constants, else -1. It
     * lies in the job's constant block on the device (gr_iteration.constants), not in the
     * iteration's, and no node writes it. */
    int32_t constant;
    uint32_t rank;                /* a constant's shape as declared (rank 0: 1-D) */
    uint64_t shape[GR_MAX_DIMS];
} gr_buffer_def;

#define GR_NO_BUFFER (-1)

typedef struct gr_node {
    gr_node_kind kind;
    char name[GR_NAME_MAX + 1];
    uint32_t port;                /* H2D: host input port; D2H: host output port */
    const gr_kernel *kernel;      /* KERNEL only */
    uint32_t n_reads;             /* buffers read: KERNEL its inputs, D2H its source */
    int32_t reads[GR_MAX_KERNEL_INPUTS];
    int32_t write;                /* buffer written: H2D and KERNEL; GR_NO_BUFFER for D2H */
    gr_scalar scalars[GR_MAX_SCALARS]; /* in the kernel's scalar types */
    uint64_t preds;               /* direct dependencies: bit i = node i */
} gr_node;

struct gr_graph {
    atomic_uint refs;
    uint64_t id; /* unique in the process, never reused: a key for caches of lowered graphs */
    bool finalized;
    uint32_t n_buffers;
    uint32_t n_nodes;
    gr_buffer_def buffers[GR_MAX_BUFFERS];
    gr_node nodes[GR_MAX_NODES];

    /* Computed by finalize. */
    uint32_t order[GR_MAX_NODES];     /* a topological order */
    uint64_t ancestors[GR_MAX_NODES]; /* transitive dependencies of each node */
    uint32_t n_inputs, n_outputs;     /* host ports */
    /* Constants, in the order they were added: const_buffer[i] is constant i's buffer,
     * const_offset[i] where it lies in a job's constant block, const_bytes the block's size
     * (each constant rounded up to GR_BUFFER_ALIGN). */
    uint32_t n_consts;
    uint32_t const_buffer[GR_MAX_CONSTS];
    uint64_t const_offset[GR_MAX_CONSTS];
    uint64_t const_bytes;
    /* Bytes per element of each host port (its buffers' element type), and its elements
     * per tensor when its buffers are fixed (0: the tensor's). */
    uint32_t in_size[GR_MAX_PORTS], out_size[GR_MAX_PORTS];
    uint64_t in_fixed[GR_MAX_PORTS], out_fixed[GR_MAX_PORTS];
    bool splittable; /* every kernel elementwise and every buffer 1:1 with the tensor */
    /* Every H2D node comes first (no predecessors) and every D2H node last (no successors),
     * at most GR_MAX_PORTS of each: the copies may be done apart from the kernels, all in
     * before and all out after (a backend's batched copies: gr_iteration.h2d). */
    bool copies_at_ends;
    /* inplace_ok[p]: bit q set when every H2D of input port q is an ancestor of the D2H of
     * output port p, so out[p] may be the very same memory as in[q] (in place). */
    uint32_t inplace_ok[GR_MAX_PORTS];

    char error[256]; /* reason for the last refusal */
    gr_status error_status; /* its status: GR_OK when error is "" */
    /* The declaration the last refusal points at, for callers that can show where it was
     * written (the spec parser): the node, else the buffer, to fix; -1 when the refusal is
     * about the graph as a whole (no nodes, no D2H). At most one of the two is set. */
    int32_t error_node, error_buffer;
};

/* One iteration of a graph: the tensor, and where its buffers are in device memory. */
/* Whether a scalar given as a double is a value of scalar type `t`, and if not why: the one
 * rule of gr_graph_add_kernel_f64 and of graph specs (which say it at the number). */
typedef enum gr_scalar_fit {
    GR_SCALAR_FITS = 0,
    GR_SCALAR_NAN,      /* not a number */
    GR_SCALAR_OVERFLOW, /* float32: rounds to infinity */
    GR_SCALAR_ZERO,     /* float32: nonzero, but rounds to 0 */
    GR_SCALAR_NOT_INT,  /* int32: not an integer in range */
} gr_scalar_fit;
gr_scalar_fit gr__scalar_fit(double v, gr_dtype t);

struct gr_copy;      /* runtime/core/copier.h */
struct gr_host_hold; /* runtime/hostcache.h */

typedef struct gr_iteration {
    const gr_graph *graph;
    const gr_tensor *tensor;
    uint64_t index;
    unsigned char *base;              /* the iteration's block in the device region */
    uint64_t offsets[GR_MAX_BUFFERS]; /* of each buffer within the block */
    /* A batch of tensors apart in DMA-ready memory (gr_unit.scattered): the backend copies
     * h2d[0 .. n_h2d) in before the graph's kernels, d2h[0 .. n_d2h) out after, and runs
     * none of the graph's copy nodes (graph.copies_at_ends). NULL and 0 otherwise. */
    const struct gr_copy *h2d, *d2h;
    uint32_t n_h2d, n_d2h;
    /* The job's hold on the registration cache (NULL: none): what of its host memory the
     * job may copy by DMA (gr_backend_env.host_ready). */
    const struct gr_host_hold *host_hold;
    /* The host side is the worker's staging buffer (gr_unit.staged), not the tensors. */
    bool staged;
    /* A whole tensor whose host memory is not all DMA-ready, in a graph that copies only
     * first and last (graph.copies_at_ends): the backend does h2d and d2h itself (as for a
     * scattered unit), each copy from memory that is not DMA-ready through the worker's
     * pinned staging buffer in pieces, the CPU moving one piece while the DMA engine moves
     * the one before (gr_backend_ops.streamed_copies). */
    bool streamed;
    /* Which of the worker's units in flight this is (runtime/backend.h, GR_WORKER_SLOTS):
     * the backend keeps its per-unit state (a stream, an event) by it. */
    uint32_t slot;
    /* The job's constant block on this device (graph.const_bytes, NULL when none): every
     * iteration of the job reads the same one. */
    unsigned char *constants;
} gr_iteration;

/* The copy node `node` does in iteration `it` (H2D or D2H): destination, source, bytes. */
void gr__graph_node_copy(const gr_iteration *it, const gr_node *node, void **dst,
                         const void **src, uint64_t *bytes);

/* The kernel arguments of kernel node `node` in iteration `it`. */
void gr__graph_node_args(const gr_iteration *it, const gr_node *node, gr_kernel_args *out);

/* Bytes host input port `port` (output port when `output`) moves for a tensor of `elems`
 * elements (a port of fixed buffers: their fixed size), or every input (or output) port
 * together when `port` is GR_ALL_PORTS. Finalized graphs. */
#define GR_ALL_PORTS UINT32_MAX
static inline uint64_t gr_graph_port_bytes(const gr_graph *g, bool output, uint32_t port,
                                           uint64_t elems)
{
    const uint32_t *size = output ? g->out_size : g->in_size;
    const uint64_t *fixed = output ? g->out_fixed : g->in_fixed;
    uint32_t ports = output ? g->n_outputs : g->n_inputs;
    uint64_t total = 0;

    /* Inline: submission asks it for every port of every tensor of a job. */
    if (port != GR_ALL_PORTS)
        return (fixed[port] ? fixed[port] : elems) * size[port];
    for (uint32_t p = 0; p < ports; p++)
        total += (fixed[p] ? fixed[p] : elems) * size[p];
    return total;
}

/* Host port `q` of tensor `t`, counting the graph's inputs first and then its outputs
 * (0 .. n_inputs + n_outputs): its address, and the bytes it moves. For the loops that
 * treat every port of a tensor alike. */
static inline uintptr_t gr_graph_tensor_port_at(const gr_graph *g, const gr_tensor *t,
                                                uint32_t q)
{
    return q < g->n_inputs ? (uintptr_t)t->in[q] : (uintptr_t)t->out[q - g->n_inputs];
}

static inline uint64_t gr_graph_tensor_port_bytes(const gr_graph *g, const gr_tensor *t,
                                                  uint32_t q)
{
    bool out = q >= g->n_inputs;

    return gr_graph_port_bytes(g, out, out ? q - g->n_inputs : q, t->elems);
}

/* Where element `elems` of host port `port` (an output port when `output`) lies, in bytes
 * from the port's start: an offset within one tensor (a chunk's start), or a batch's. */
static inline uint64_t gr_graph_port_offset(const gr_graph *g, bool output, uint32_t port,
                                            uint64_t elems)
{
    return elems * (output ? g->out_size[port] : g->in_size[port]);
}

/* Bytes per element of the widest host port (at least 1). Finalized graphs. */
uint32_t gr__graph_widest_port(const gr_graph *g);

/* For cutting a splittable graph's tensors (every buffer the tensor's size): a group of
 * *elems elements takes exactly *bytes bytes of device memory, alignment included, and
 * n groups take n times as much. Finalized graphs. */
void gr__graph_unit_group(const gr_graph *g, uint64_t *elems, uint64_t *bytes);

/* Index of the buffer or node called `name` (NUL-terminated), or -1. Owner. */
int gr__graph_buffer_index(const gr_graph *g, const char *name);
int gr__graph_node_index(const gr_graph *g, const char *name);

/* Reference counting: jobs hold a reference to their (finalized) graph. Any thread. */
void gr__graph_ref(gr_graph *g);
void gr__graph_unref(gr_graph *g);

/* Elements of buffer `b` for a tensor of `elems`; UINT64_MAX on overflow. */
uint64_t gr__graph_buffer_elems(const gr_graph *g, uint32_t b, uint64_t elems);

/*
 * Layout of one iteration's buffers inside its block: offsets[b] (GR_MAX_BUFFERS entries)
 * and the total, each buffer rounded up to GR_BUFFER_ALIGN; constants take no room there
 * (their offsets are left as they were). Returns GR_ERR_INVALID_ARGUMENT on overflow.
 * Finalized graphs only. Any thread.
 */
gr_status gr__graph_layout(const gr_graph *g, uint64_t elems, uint64_t *offsets,
                           uint64_t *total);

#endif /* GR_GRAPH_H */

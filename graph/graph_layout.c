/*
 * graph_layout.c - what a finalized template answers: its host ports, each buffer's
 * elements and bytes, the layout of one iteration in device memory, and the operands of
 * each node for one iteration. Apart from building and checking because the runtime and
 * the backends call it for every job and unit, and it never changes the graph.
 */
#include "graph/graph.h"

#include <string.h>

uint32_t gr_graph_input_count(const gr_graph *g)
{
    return g && g->finalized ? g->n_inputs : 0;
}

uint32_t gr_graph_output_count(const gr_graph *g)
{
    return g && g->finalized ? g->n_outputs : 0;
}

gr_status gr_graph_port_get(const gr_graph *g, int output, uint32_t port, gr_port_info *out)
{
    if (g == NULL || !g->finalized || out == NULL ||
        port >= (output ? g->n_outputs : g->n_inputs))
        return GR_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        if (n->kind == (output ? GR_NODE_D2H : GR_NODE_H2D) && n->port == port) {
            const gr_buffer_def *b = &g->buffers[output ? n->reads[0] : n->write];

            out->dtype = b->dtype;
            out->fixed_elems = b->fixed;
            break;
        }
    }
    return GR_OK;
}

uint64_t gr__graph_buffer_elems(const gr_graph *g, uint32_t b, uint64_t elems)
{
    const gr_buffer_def *d = &g->buffers[b];
    unsigned __int128 e = (unsigned __int128)elems * d->num;

    if (d->fixed)
        return d->fixed;
    e = (e + d->den - 1) / d->den;
    return e > UINT64_MAX ? UINT64_MAX : (uint64_t)e;
}

gr_status gr__graph_layout(const gr_graph *g, uint64_t elems, uint64_t *offsets,
                           uint64_t *total)
{
    uint64_t off = 0;

    if (g == NULL || !g->finalized || elems == 0)
        return GR_ERR_INVALID_ARGUMENT;
    for (uint32_t b = 0; b < g->n_buffers; b++) {
        uint64_t n = gr__graph_buffer_elems(g, b, elems);
        uint32_t size = gr_dtype_size(g->buffers[b].dtype);
        uint64_t bytes;

        if (g->buffers[b].constant >= 0) /* in the job's constant block */
            continue;
        if (n > UINT64_MAX / size)
            return GR_ERR_INVALID_ARGUMENT;
        bytes = n * size;
        if (bytes > UINT64_MAX - GR_BUFFER_ALIGN)
            return GR_ERR_INVALID_ARGUMENT;
        bytes = (bytes + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;
        if (off > UINT64_MAX - bytes)
            return GR_ERR_INVALID_ARGUMENT;
        if (offsets)
            offsets[b] = off;
        off += bytes;
    }
    *total = off;
    return GR_OK;
}

uint32_t gr__graph_widest_port(const gr_graph *g)
{
    uint32_t widest = 1;

    for (uint32_t p = 0; p < g->n_inputs; p++)
        widest = g->in_size[p] > widest ? g->in_size[p] : widest;
    for (uint32_t p = 0; p < g->n_outputs; p++)
        widest = g->out_size[p] > widest ? g->out_size[p] : widest;
    return widest;
}

void gr__graph_unit_group(const gr_graph *g, uint64_t *elems, uint64_t *bytes)
{
    uint32_t smallest = UINT32_MAX;
    uint64_t group, total = 0;

    for (uint32_t b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].constant < 0 && gr_dtype_size(g->buffers[b].dtype) < smallest)
            smallest = gr_dtype_size(g->buffers[b].dtype);
    /* Element sizes are powers of two, so a group of GR_BUFFER_ALIGN bytes of the smallest
     * type is a whole number of alignment granules of every buffer: no rounding within. */
    group = GR_BUFFER_ALIGN / smallest;
    for (uint32_t b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].constant < 0)
            total += group * gr_dtype_size(g->buffers[b].dtype);
    *elems = group;
    *bytes = total;
}

void gr__graph_node_copy(const gr_iteration *it, const gr_node *node, void **dst,
                         const void **src, uint64_t *bytes)
{
    const gr_graph *g = it->graph;
    bool output = node->kind == GR_NODE_D2H;

    *bytes = gr_graph_port_bytes(g, output, node->port, it->tensor->elems);
    if (!output) {
        *dst = it->base + it->offsets[node->write];
        *src = it->tensor->in[node->port];
    } else {
        *dst = it->tensor->out[node->port];
        *src = it->base + it->offsets[node->reads[0]];
    }
}

void gr__graph_node_args(const gr_iteration *it, const gr_node *node, gr_kernel_args *out)
{
    const gr_tensor *t = it->tensor;

    memset(out, 0, sizeof(*out));
    for (uint32_t r = 0; r < node->n_reads; r++) {
        const gr_buffer_def *b = &it->graph->buffers[node->reads[r]];

        out->in[r] = b->constant >= 0
                         ? it->constants + it->graph->const_offset[b->constant]
                         : it->base + it->offsets[node->reads[r]];
        out->in_n[r] = b->fixed ? b->fixed : t->elems;
    }
    out->out = it->base + it->offsets[node->write];
    memcpy(out->s, node->scalars, sizeof(out->s));
    out->rank = t->rank;
    memcpy(out->shape, t->shape, sizeof(out->shape));
    switch (node->kernel->def.out_size) {
    case GR_OUT_ONE:
        out->n = 1;
        break;
    case GR_OUT_BUFFER:
        out->n = it->graph->buffers[node->write].fixed;
        break;
    case GR_OUT_ELEMS:
    default:
        out->n = t->elems;
        break;
    }
}

gr_status gr_graph_footprint(const gr_graph *g, uint64_t elems, uint64_t *bytes)
{
    if (bytes == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    return gr__graph_layout(g, elems, NULL, bytes);
}

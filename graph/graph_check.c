/*
 * graph_check.c - gr_graph_finalize: the checks that need the whole template, then what
 * finalizing computes (the order, each node's ancestors, which inputs may be written in
 * place, whether copies come first and last, whether the graph can be cut, the constants'
 * offsets). Apart from building (graph.c) because it runs once per graph, over all of it.
 *
 * Validation happens once, at finalize, so every job and every worker can trust a finalized
 * template: it is acyclic, every read is ordered after a write of the same buffer, no two
 * unordered nodes race on a buffer, and the host ports are dense. Dependencies are bit sets
 * over at most GR_MAX_NODES (64) nodes, which keeps the closure computation trivial.
 */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

#include "graph/graph_impl.h"

/*
 * Refuse a graph whose nodes outside `done` all wait on one another. Every such node has a
 * predecessor outside `done`, so walking predecessors from any of them must, within n_nodes
 * steps, stand on a cycle; the message names the first-declared node on it (not merely one
 * downstream of it) and spells the cycle out from there, as far as the message holds it.
 */
static gr_status fail_cycle(gr_graph *g, uint64_t done)
{
    uint32_t cyc[GR_MAX_NODES], len = 0, start = 0, first = 0, at;
    char path[128];
    size_t used = 0;

    while ((done >> start) & 1)
        start++;
    for (uint32_t step = 0; step < g->n_nodes; step++)
        start = (uint32_t)__builtin_ctzll(g->nodes[start].preds & ~done);
    /* Walking predecessors lists the cycle backwards; it is printed in dependency order. */
    at = start;
    do {
        cyc[len++] = at;
        at = (uint32_t)__builtin_ctzll(g->nodes[at].preds & ~done);
    } while (at != start && len < GR_MAX_NODES);
    for (uint32_t k = 1; k < len; k++)
        if (cyc[k] < cyc[first])
            first = k;
    /* cyc[k - 1] is the node after cyc[k]. */
    path[0] = '\0';
    for (uint32_t k = 0; k <= len; k++) {
        const char *name = g->nodes[cyc[(first + len - k % len) % len]].name;
        int n = snprintf(path + used, sizeof(path) - used, "%s%s", k ? " -> " : "", name);

        if (n < 0 || (size_t)n >= sizeof(path) - used) {
            snprintf(path + sizeof(path) - 5, 5, "...");
            break;
        }
        used += (size_t)n;
    }
    return fail_at(g, (int32_t)cyc[first], -1, GR_ERR_INVALID_ARGUMENT,
                   "dependency cycle through node '%s' (%s)", g->nodes[cyc[first]].name, path);
}

/* Kahn's algorithm over the bit-set edges. */
static gr_status topo_sort(gr_graph *g)
{
    uint64_t done = 0;
    uint32_t n = 0;

    while (n < g->n_nodes) {
        bool progress = false;

        for (uint32_t i = 0; i < g->n_nodes; i++) {
            if ((done >> i) & 1)
                continue;
            if ((g->nodes[i].preds & ~done) == 0) {
                g->order[n++] = i;
                done |= 1ull << i;
                progress = true;
            }
        }
        if (!progress)
            return fail_cycle(g, done);
    }
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        uint32_t i = g->order[k];
        uint64_t anc = g->nodes[i].preds;

        for (uint32_t p = 0; p < g->n_nodes; p++)
            if ((g->nodes[i].preds >> p) & 1)
                anc |= g->ancestors[p];
        g->ancestors[i] = anc;
    }
    return GR_OK;
}

static bool node_uses(const gr_node *n, int32_t b, bool *writes)
{
    bool used = false;

    *writes = n->write == b;
    used = *writes;
    for (uint32_t r = 0; r < n->n_reads; r++)
        used |= n->reads[r] == b;
    return used;
}

static bool ordered(const gr_graph *g, uint32_t a, uint32_t b)
{
    return ((g->ancestors[a] >> b) & 1) || ((g->ancestors[b] >> a) & 1);
}

/* Whether buffer b holds at least the tensor's elements, whatever the tensor: a ratio of at
 * least 1/1. */
static bool holds_tensor(const gr_buffer_def *b)
{
    return b->fixed == 0 && b->num >= b->den;
}

/* The refusal of buffer b, too small for node n, which works on the whole tensor. */
static gr_status too_small(gr_graph *g, const gr_node *n, int32_t b)
{
    const gr_buffer_def *d = &g->buffers[b];

    if (d->fixed)
        return fail_at(g, -1, b, GR_ERR_INVALID_ARGUMENT,
                       "node '%s' works on the whole tensor, but buffer '%s' has a fixed size "
                       "(%llu elements): only a kernel's small inputs and one-element results "
                       "may",
                       n->name, d->name, (unsigned long long)d->fixed);
    return fail_at(g, -1, b, GR_ERR_INVALID_ARGUMENT,
                   "node '%s' works on the whole tensor, but buffer '%s' (%u/%u) is smaller "
                   "than the tensor",
                   n->name, d->name, d->num, d->den);
}

/* Node i's buffers are large enough for what it moves: a copy moves the tensor (or a fixed
 * buffer's fixed size, which its port then has); a kernel reads whole tensors except from
 * its small inputs, and writes what its out_size says. The message points at the buffer:
 * its size is what to fix. */
static gr_status check_sizes(gr_graph *g, uint32_t i)
{
    const gr_node *n = &g->nodes[i];
    const gr_kernel_def *k = n->kind == GR_NODE_KERNEL ? &n->kernel->def : NULL;

    /* A fixed buffer is read whole (its fixed size is in_n), by a copy or as a kernel's
     * small input; any other read is of the tensor's elements, which the buffer must hold
     * (a small input of ratio below 1/1 included: the kernel would read in_n = the tensor's
     * elements of it). */
    for (uint32_t r = 0; r < n->n_reads; r++) {
        const gr_buffer_def *b = &g->buffers[n->reads[r]];
        bool fixed_ok = b->fixed != 0 && (k == NULL || ((k->small_inputs >> r) & 1));

        if (!fixed_ok && !holds_tensor(b))
            return too_small(g, n, n->reads[r]);
    }
    /* A copy into a fixed buffer moves its fixed size; a kernel writing one element fits
     * any buffer (every buffer holds at least one), one writing its buffer's size needs a
     * fixed one; anything else writes the tensor. */
    if (n->write != GR_NO_BUFFER) {
        const gr_buffer_def *b = &g->buffers[n->write];
        bool any_size = k == NULL ? b->fixed != 0 : k->out_size == GR_OUT_ONE;

        if (k != NULL && k->out_size == GR_OUT_BUFFER) {
            if (b->fixed == 0)
                return fail_at(g, -1, n->write, GR_ERR_INVALID_ARGUMENT,
                               "node '%s' writes as many elements as its output buffer holds "
                               "(kernel '%s'), so buffer '%s' must have a fixed size",
                               n->name, n->kernel->name, b->name);
            any_size = true;
        }
        if (!any_size && !holds_tensor(b))
            return too_small(g, n, n->write);
    }
    return GR_OK;
}

static gr_status check_buffers(gr_graph *g)
{
    gr_status st;

    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        /* A constant is the job's: written before the first iteration, read by kernels. */
        if (n->write != GR_NO_BUFFER && g->buffers[n->write].constant >= 0)
            return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                           "node '%s' writes constant '%s': constants are read only (each job "
                           "gives their contents)",
                           n->name, g->buffers[n->write].name);
        if (n->kind == GR_NODE_D2H && g->buffers[n->reads[0]].constant >= 0)
            return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                           "node '%s' copies constant '%s' out: only kernels read constants",
                           n->name, g->buffers[n->reads[0]].name);
        /* Every read is ordered after some write of the same buffer (a constant's is the
         * job's, before every node). */
        for (uint32_t r = 0; r < n->n_reads; r++) {
            int32_t b = n->reads[r];
            bool written = g->buffers[b].constant >= 0;

            for (uint32_t w = 0; w < g->n_nodes && !written; w++)
                written = ((g->ancestors[i] >> w) & 1) && g->nodes[w].write == b;
            if (!written)
                return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                               "node '%s' reads buffer '%s', which no node it depends on writes",
                               n->name, g->buffers[b].name);
        }
        if ((st = check_sizes(g, i)) != GR_OK)
            return st;
    }
    /* No two unordered nodes may touch a buffer that one of them writes. */
    for (uint32_t b = 0; b < g->n_buffers; b++) {
        bool used = false;

        for (uint32_t i = 0; i < g->n_nodes; i++) {
            bool wi;
            if (!node_uses(&g->nodes[i], (int32_t)b, &wi))
                continue;
            used = true;
            for (uint32_t j = i + 1; j < g->n_nodes; j++) {
                bool wj;
                if (node_uses(&g->nodes[j], (int32_t)b, &wj) && (wi || wj) && !ordered(g, i, j))
                    return fail_at(g, (int32_t)j, -1, GR_ERR_INVALID_ARGUMENT,
                                   "nodes '%s' and '%s' both use buffer '%s' and one writes it, "
                                   "but no dependency orders them",
                                   g->nodes[i].name, g->nodes[j].name, g->buffers[b].name);
            }
        }
        if (!used)
            return fail_at(g, -1, (int32_t)b, GR_ERR_INVALID_ARGUMENT,
                           "buffer '%s' is never used (it would only take device memory)",
                           g->buffers[b].name);
    }
    return GR_OK;
}

/* Every copy of one host port moves the same element type: the port's. */
static gr_status check_port_types(gr_graph *g)
{
    int32_t first[2][GR_MAX_PORTS];

    memset(first, 0xff, sizeof(first)); /* -1: no copy of the port seen yet */
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        bool out = n->kind == GR_NODE_D2H;
        int32_t b = out ? n->reads[0] : n->write;
        int32_t *seen;
        const gr_buffer_def *mine, *theirs;

        if (n->kind == GR_NODE_KERNEL)
            continue;
        seen = &first[out][n->port];
        mine = &g->buffers[b];
        if (*seen < 0) {
            *seen = (int32_t)i;
            *(out ? &g->out_size[n->port] : &g->in_size[n->port]) = gr_dtype_size(mine->dtype);
            *(out ? &g->out_fixed[n->port] : &g->in_fixed[n->port]) = mine->fixed;
            continue;
        }
        theirs = &g->buffers[out ? g->nodes[*seen].reads[0] : g->nodes[*seen].write];
        if (mine->dtype != theirs->dtype || mine->fixed != theirs->fixed)
            return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                           "nodes '%s' and '%s' copy %s port %u with different element types "
                           "or sizes",
                           g->nodes[*seen].name, n->name, out ? "output" : "input", n->port);
    }
    return GR_OK;
}

static gr_status check_ports(gr_graph *g)
{
    uint32_t in_used = 0, out_used = 0, max_in = 0, max_out = 0;
    int32_t top_in = -1, top_out = -1; /* the nodes of the highest ports, blamed for gaps */

    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        if (n->kind == GR_NODE_H2D) {
            in_used |= 1u << n->port;
            if (n->port + 1 > max_in) {
                max_in = n->port + 1;
                top_in = (int32_t)i;
            }
        } else if (n->kind == GR_NODE_D2H) {
            if ((out_used >> n->port) & 1)
                return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                               "output port %u is written by more than one D2H node ('%s')",
                               n->port, n->name);
            out_used |= 1u << n->port;
            if (n->port + 1 > max_out) {
                max_out = n->port + 1;
                top_out = (int32_t)i;
            }
        }
    }
    if (max_out == 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "graph has no D2H node: it produces nothing");
    if (in_used != (1u << max_in) - 1)
        return fail_at(g, top_in, -1, GR_ERR_INVALID_ARGUMENT,
                       "input ports must be numbered 0..n-1 without gaps (highest is %u)",
                       max_in - 1);
    if (out_used != (1u << max_out) - 1)
        return fail_at(g, top_out, -1, GR_ERR_INVALID_ARGUMENT,
                       "output ports must be numbered 0..n-1 without gaps (highest is %u)",
                       max_out - 1);
    g->n_inputs = max_in;
    g->n_outputs = max_out;
    return check_port_types(g);
}

gr_status gr_graph_finalize(gr_graph *g)
{
    gr_status st = gr__graph_check_mutable(g);

    if (st != GR_OK)
        return st;
    if (g->n_nodes == 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "graph has no nodes");
    if ((st = topo_sort(g)) != GR_OK)
        return st;
    if ((st = check_ports(g)) != GR_OK)
        return st;
    if ((st = check_buffers(g)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *d = &g->nodes[i];
        uint32_t ok = (1u << GR_MAX_PORTS) - 1;

        if (d->kind != GR_NODE_D2H)
            continue;
        for (uint32_t j = 0; j < g->n_nodes; j++)
            if (g->nodes[j].kind == GR_NODE_H2D && !((g->ancestors[i] >> j) & 1))
                ok &= ~(1u << g->nodes[j].port);
        g->inplace_ok[d->port] = ok;
    }
    {
        uint32_t h2d = 0, d2h = 0;

        g->copies_at_ends = true;
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            const gr_node *n = &g->nodes[i];

            h2d += n->kind == GR_NODE_H2D;
            d2h += n->kind == GR_NODE_D2H;
            if (n->kind == GR_NODE_H2D && n->preds != 0)
                g->copies_at_ends = false;
            for (uint32_t j = 0; n->kind == GR_NODE_D2H && j < g->n_nodes; j++)
                if ((g->nodes[j].preds >> i) & 1)
                    g->copies_at_ends = false;
        }
        if (h2d > GR_MAX_PORTS || d2h > GR_MAX_PORTS)
            g->copies_at_ends = false;
    }
    /* Constants are seen whole by every unit, so they do not stop a graph from being cut. */
    g->splittable = true;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        if (n->kind != GR_NODE_KERNEL)
            continue;
        if (!n->kernel->def.elementwise)
            g->splittable = false;
        /* A part of a tensor sees a small input whole only when it is a constant. */
        for (uint32_t r = 0; r < n->n_reads; r++)
            if (((n->kernel->def.small_inputs >> r) & 1) &&
                g->buffers[n->reads[r]].constant < 0)
                g->splittable = false;
    }
    for (uint32_t b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].constant < 0 &&
            (g->buffers[b].fixed != 0 || g->buffers[b].num != g->buffers[b].den))
            g->splittable = false;
    g->const_bytes = 0;
    for (uint32_t c = 0; c < g->n_consts; c++) {
        const gr_buffer_def *b = &g->buffers[g->const_buffer[c]];
        uint64_t bytes = b->fixed * gr_dtype_size(b->dtype);

        g->const_offset[c] = g->const_bytes;
        g->const_bytes += (bytes + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;
    }
    g->finalized = true;
    return GR_OK;
}

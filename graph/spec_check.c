/*
 * spec_check.c - the dependencies the data flow of a spec implies, and the checks against
 * them: a dependency line that contradicts them, and a node reading a buffer that only a
 * node below it writes. The text is read as a program, nodes that share a buffer running in
 * its order, so every implied edge points down the text and they make no cycle.
 */
#include "graph/spec_impl.h"

/* ------------------------------------------------------------------------------------
 * Dependencies.
 * ---------------------------------------------------------------------------------- */

/* Node j follows node i because of buffer b (the first reason found is kept). */
static void note_flow(parser *p, uint64_t *cand, uint32_t j, int32_t i, int kind, int32_t b)
{
    if (i < 0 || (uint32_t)i == j || ((*cand >> i) & 1))
        return;
    *cand |= 1ull << i;
    p->flow[j][i].kind = (uint8_t)kind;
    p->flow[j][i].buffer = (uint8_t)b;
}

/*
 * The dependencies the data flow implies, in the order of the text (nodes are numbered in
 * it): a node that reads a buffer follows the last node above it that wrote it; a node
 * that writes one follows the last writer and every reader since. So every implied edge
 * goes down the text (they cannot make a cycle), and no two nodes that share a buffer one
 * of them writes are left unordered. The graph gets the edges no other implied edge
 * already covers: a reader that the next writer follows through another reader needs no
 * edge of its own.
 */
gr_status add_implied_deps(parser *p)
{
    gr_graph *g = p->g;
    int32_t writer[GR_MAX_BUFFERS];
    uint64_t readers[GR_MAX_BUFFERS] = {0}, anc[GR_MAX_NODES];

    for (uint32_t b = 0; b < GR_MAX_BUFFERS; b++)
        writer[b] = -1;
    for (uint32_t j = 0; j < g->n_nodes; j++) {
        const gr_node *n = &g->nodes[j];
        uint64_t cand = 0, keep;

        for (uint32_t r = 0; r < n->n_reads; r++)
            note_flow(p, &cand, j, writer[n->reads[r]], FLOW_READ_AFTER_WRITE, n->reads[r]);
        for (uint32_t r = 0; r < n->n_reads; r++)
            readers[n->reads[r]] |= 1ull << j;
        if (n->write != GR_NO_BUFFER) {
            int32_t b = n->write;

            note_flow(p, &cand, j, writer[b], FLOW_WRITE_AFTER_WRITE, b);
            for (uint32_t i = 0; i < j; i++)
                if ((readers[b] >> i) & 1)
                    note_flow(p, &cand, j, (int32_t)i, FLOW_WRITE_AFTER_READ, b);
            writer[b] = (int32_t)j;
            readers[b] = 0;
        }
        anc[j] = 0;
        keep = cand;
        for (uint32_t i = 0; i < j; i++)
            if ((cand >> i) & 1) {
                anc[j] |= (1ull << i) | anc[i];
                keep &= ~anc[i];
            }
        p->implied[j] = keep;
        for (uint32_t i = 0; i < j; i++)
            if (((keep >> i) & 1) && gr_graph_add_dep(g, g->nodes[i].name, n->name) != GR_OK)
                return builder_refused(p, &(tok){T_WORD, NULL, 0, p->node_pos[j]});
    }
    return GR_OK;
}

/* Why node j follows node i, for messages. */
static void flow_text(const parser *p, uint32_t j, uint32_t i, char *buf, size_t size)
{
    const gr_graph *g = p->g;
    int kind = p->flow[j][i].kind;

    snprintf(buf, size, "node '%s' (line %zu) %s buffer '%s', which '%s' (line %zu) %s above it",
             g->nodes[j].name, p->node_pos[j].line,
             kind == FLOW_READ_AFTER_WRITE ? "reads" : "writes",
             g->buffers[p->flow[j][i].buffer].name, g->nodes[i].name, p->node_pos[i].line,
             kind == FLOW_WRITE_AFTER_READ ? "reads" : kind == FLOW_WRITE_AFTER_WRITE
                                                           ? "also writes" : "writes");
}

/*
 * Before the explicit dependency `before -> after` (written at `at`) is added: refuse it
 * when `after` already comes before `before` through an edge the data flow implies. A
 * cycle of explicit edges alone is left to finalize, which spells it out.
 */
gr_status check_contradiction(parser *p, spec_pos at, uint32_t before, uint32_t after)
{
    const gr_graph *g = p->g;
    uint32_t queue[GR_MAX_NODES], head = 0, tail = 0;
    int32_t next_on_path[GR_MAX_NODES];
    uint64_t seen = 1ull << before;
    char why[200], path[160];
    size_t used = 0;

    /* Breadth first from `before` back along predecessors: the shortest path from `after`,
     * each node's successor on it in next_on_path. */
    queue[tail++] = before;
    while (head < tail && !((seen >> after) & 1)) {
        uint32_t v = queue[head++];

        for (uint32_t u = 0; u < g->n_nodes; u++)
            if (((g->nodes[v].preds >> u) & 1) && !((seen >> u) & 1)) {
                seen |= 1ull << u;
                next_on_path[u] = (int32_t)v;
                queue[tail++] = u;
            }
    }
    if (!((seen >> after) & 1))
        return GR_OK;
    for (uint32_t u = after; u != before; u = (uint32_t)next_on_path[u]) {
        uint32_t v = (uint32_t)next_on_path[u];
        int n;

        if (!((p->implied[v] >> u) & 1))
            continue;
        flow_text(p, v, u, why, sizeof(why));
        path[0] = '\0';
        if (!(u == after && v == before)) {
            for (uint32_t w = after;; w = (uint32_t)next_on_path[w]) {
                n = snprintf(path + used, sizeof(path) - used, "%s%s", w == after ? " (" : " -> ",
                             g->nodes[w].name);
                if (n < 0 || (size_t)n >= sizeof(path) - used) {
                    snprintf(path + sizeof(path) - 6, 6, "...)");
                    break;
                }
                used += (size_t)n;
                if (w == before) {
                    snprintf(path + used, sizeof(path) - used, ")");
                    break;
                }
            }
        }
        return perr(p, at, "dependency '%s -> %s' contradicts the data flow: %s, so '%s' runs "
                           "before '%s'%s",
                    g->nodes[before].name, g->nodes[after].name, why, g->nodes[after].name,
                    g->nodes[before].name, path);
    }
    return GR_OK;
}

/* A node that reads a buffer no node above it writes, while one below does: the data flow
 * puts the writer after it, so it can never read what that writes. Refused here, with the
 * reason; a buffer no node writes at all is finalize's to refuse. */
gr_status check_reads_follow_writes(parser *p)
{
    const gr_graph *g = p->g;

    for (uint32_t j = 0; j < g->n_nodes; j++)
        for (uint32_t r = 0; r < g->nodes[j].n_reads; r++) {
            int32_t b = g->nodes[j].reads[r];
            int32_t above = -1, below = -1;

            for (uint32_t i = 0; i < g->n_nodes; i++)
                if (g->nodes[i].write == b && i != j) {
                    if (i < j)
                        above = (int32_t)i;
                    else if (below < 0)
                        below = (int32_t)i;
                }
            if (above >= 0 || below < 0)
                continue;
            if (p->err != NULL)
                gr__strlcpy(p->err->node, g->nodes[j].name, sizeof(p->err->node));
            return perr(p, p->node_pos[j],
                        "node '%s' reads buffer '%s' before any node writes it: '%s' (line "
                        "%zu) writes it below, and nodes that share a buffer run in the order "
                        "of the text",
                        g->nodes[j].name, g->buffers[b].name, g->nodes[below].name,
                        p->node_pos[below].line);
        }
    return GR_OK;
}

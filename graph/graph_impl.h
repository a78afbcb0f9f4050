/*
 * graph_impl.h - what the graph's files (graph.c, graph_check.c) share and nothing outside
 * them uses: how a refusal is recorded on the graph, and the check that opens every
 * builder call.
 */
#ifndef GR_GRAPH_IMPL_H
#define GR_GRAPH_IMPL_H

#include <stdarg.h>
#include <stdio.h>

#include "graph/graph.h"

static inline gr_status fail(gr_graph *g, gr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline gr_status fail_at(gr_graph *g, int32_t node, int32_t buffer, gr_status st,
                                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Record a refusal: its reason, and the node or buffer (or neither, -1) it points at. */
static inline gr_status vfail(gr_graph *g, int32_t node, int32_t buffer, gr_status st,
                              const char *fmt, va_list ap)
{
    vsnprintf(g->error, sizeof(g->error), fmt, ap);
    g->error_status = st;
    g->error_node = node;
    g->error_buffer = buffer;
    return st;
}

static inline gr_status fail(gr_graph *g, gr_status st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    st = vfail(g, -1, -1, st, fmt, ap);
    va_end(ap);
    return st;
}

static inline gr_status fail_at(gr_graph *g, int32_t node, int32_t buffer, gr_status st,
                                const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    st = vfail(g, node, buffer, st, fmt, ap);
    va_end(ap);
    return st;
}

/* Common checks of every builder call: a graph, not yet finalized; clears the last
 * refusal. */
gr_status gr__graph_check_mutable(gr_graph *g);

#endif /* GR_GRAPH_IMPL_H */

/*
 * spec_fuzz.c - libFuzzer target: any bytes through gr_graph_parse (graph/spec.c).
 *
 * The parser must never crash, read past the input, leak or hang, and must keep its
 * contract: on GR_OK a finalized graph that lays out; on a refusal *out NULL and a message
 * "fuzz:LINE:COL: ..." with positions inside the input. A broken contract aborts, which
 * libFuzzer reports as a crash with the input that caused it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what, const gr_error_info *err)
{
    if (!ok) {
        fprintf(stderr, "spec_fuzz: broken contract: %s (message: %s)\n", what,
                err ? err->message : "-");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_graph *g = (gr_graph *)&g, *g2 = (gr_graph *)&g;
    gr_error_info err;
    unsigned long line = 0, col = 0;
    uint64_t bytes;
    gr_status st, st2;
    int n = 0;

    memset(&err, 0xa5, sizeof(err));
    st = gr_graph_parse((const char *)data, size, "fuzz", &g, &err);
    /* Without error info: the same verdict. */
    st2 = gr_graph_parse((const char *)data, size, "fuzz", &g2, NULL);
    check(st == st2, "verdict depends on err being given", &err);
    gr_graph_destroy(g2);
    if (st == GR_OK) {
        check(g != NULL && g->finalized, "GR_OK without a finalized graph", NULL);
        check(g->n_nodes > 0 && g->n_nodes <= GR_MAX_NODES, "node count", NULL);
        check(gr_graph_footprint(g, 1000, &bytes) == GR_OK && bytes > 0, "layout", NULL);
        gr_graph_destroy(g);
        return 0;
    }
    check(g == NULL, "refusal left *out set", &err);
    check(st == GR_ERR_INVALID_ARGUMENT && err.status == st, "status", &err);
    check(memchr(err.message, '\0', sizeof(err.message)) != NULL, "message not terminated",
          NULL);
    check(sscanf(err.message, "fuzz:%lu:%lu: %n", &line, &col, &n) == 2 && n > 0,
          "message is not NAME:LINE:COL: reason", &err);
    /* Positions lie inside the text, or just past its end. */
    check(line >= 1 && col >= 1 && line <= size + 1 && col <= size + 1, "position", &err);
    return 0;
}

/*
 * spec_fuzz.c - libFuzzer target: any bytes through gr_graph_parse (graph/spec*.c).
 *
 * The parser must never crash, read past the input, leak or hang, and must keep its
 * contract: on GR_OK a finalized graph that lays out; on a refusal *out NULL and a message
 * "fuzz:LINE:COL: ..." with positions inside the input (GR_ERR_INVALID_ARGUMENT, or
 * GR_ERR_OVER_BUDGET once expressions have filled the kernel registry). A broken contract
 * aborts, which libFuzzer reports as a crash with the input that caused it.
 *
 * The expression kernels a graph holds (kernels/expr*.c) also run, on the CPU, over a few
 * elements of every kind of value, so the sanitizers watch the evaluator too. They are
 * registered without CUDA: NVRTC would cost tens of milliseconds a new program.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/dtype.h"
#include "kernels/expr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what, const gr_error_info *err)
{
    if (!ok) {
        fprintf(stderr, "spec_fuzz: broken contract: %s (message: %s)\n", what,
                err ? err->message : "-");
        abort();
    }
}

/* Every expression kernel of g over values of every kind, in its inputs' types. */
static void run_expressions(const gr_graph *g)
{
    static const double values[] = {0.0, -0.0, 1.0, -1.5, 0.5, 2.0, 1e30, -1e30, 65520.0,
                                    300.7, -300.7, 2147483648.0, -3e9, 1e-40, 1e300, -1e-310,
                                    INFINITY, -INFINITY, NAN, 255.0, 7.25, -0.75, 3.0};
    enum { N = sizeof(values) / sizeof(values[0]) };
    static double in[GR_MAX_KERNEL_INPUTS][N], out[N];

    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_kernel *k = g->nodes[i].kernel;
        gr_kernel_args a;

        if (k == NULL || strncmp(k->name, "expr.", 5) != 0)
            continue;
        check(k->def.cpu != NULL && k->def.elementwise, "expression kernel incomplete", NULL);
        memset(&a, 0, sizeof(a));
        for (uint32_t r = 0; r < k->def.n_inputs; r++) {
            for (uint32_t j = 0; j < N; j++)
                gr__store_cast(k->def.in_dtype[r], in[r], j, GR_DTYPE_FLOAT64,
                               values[(j + 5 * r) % N]);
            a.in[r] = in[r];
            a.in_n[r] = N;
        }
        a.out = out;
        a.n = N;
        k->def.cpu(&a, k->def.user);
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

    gr__expr_without_cuda();
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
        run_expressions(g);
        gr_graph_destroy(g);
        return 0;
    }
    check(g == NULL, "refusal left *out set", &err);
    check((st == GR_ERR_INVALID_ARGUMENT ||
           (st == GR_ERR_OVER_BUDGET && strstr(err.message, "the registry is full"))) &&
              err.status == st,
          "status", &err);
    check(memchr(err.message, '\0', sizeof(err.message)) != NULL, "message not terminated",
          NULL);
    check(sscanf(err.message, "fuzz:%lu:%lu: %n", &line, &col, &n) == 2 && n > 0,
          "message is not NAME:LINE:COL: reason", &err);
    /* Positions lie inside the text, or just past its end. */
    check(line >= 1 && col >= 1 && line <= size + 1 && col <= size + 1, "position", &err);
    return 0;
}

/*
 * spec_test.c - the graph spec parser (graph/spec*.c, docs/GRAPH_SPEC.md): the shipped
 * examples parse into the graphs they describe, every accepted form is read as written, and
 * every refusal names the right line and column with its exact message.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/dtype.h"
#include "tests/testing.h"

/* Parse `len` bytes of `text` named "t.graph", expecting success. */
static gr_graph *parse_ok(const char *text, size_t len)
{
    gr_error_info err;
    gr_graph *g = NULL;
    gr_status st;

    memset(&err, 0, sizeof(err));
    st = gr_graph_parse(text, len, "t.graph", &g, &err);
    if (st != GR_OK)
        GR_TEST_FAIL("refused:\n%s\n  with: %s", text, err.message);
    ASSERT_TRUE(g != NULL && g->finalized);
    return g;
}

#define PARSE_OK(text) parse_ok((text), sizeof(text) - 1)

/* Parse `len` bytes of `text`, expecting the refusal "t.graph:" `want` (exactly). */
static void refuse(const char *text, size_t len, const char *want)
{
    gr_error_info err;
    gr_graph *g = (gr_graph *)&err; /* must come back NULL */
    char full[320];
    gr_status st;

    memset(&err, 0, sizeof(err));
    st = gr_graph_parse(text, len, "t.graph", &g, &err);
    snprintf(full, sizeof(full), "t.graph:%s", want);
    if (st != GR_ERR_INVALID_ARGUMENT || err.status != GR_ERR_INVALID_ARGUMENT ||
        strcmp(err.message, full) != 0)
        GR_TEST_FAIL("text:\n%.*s\n  status %s, message:\n  got:  %s\n  want: %s", (int)len,
                     text, gr_status_str(st), err.message, full);
    ASSERT_PTR_EQ(g, NULL);
}

#define REFUSE(text, want) refuse((text), sizeof(text) - 1, (want))

/* A valid graph that refusal cases extend or break. */
#define BASE                                                                                \
    "buffer x\n"                                                                            \
    "h2d load: in0 -> x\n"                                                                  \
    "kernel k: mul(x, 2) -> x\n"                                                            \
    "d2h store: x -> out0\n"

#define BASE_DEPS "load -> k -> store\n"

static gr_graph *load_example(const char *path)
{
    gr_error_info err;
    gr_graph *g = NULL;

    memset(&err, 0, sizeof(err));
    if (gr_graph_load(path, &g, &err) != GR_OK)
        GR_TEST_FAIL("%s refused: %s", path, err.message);
    ASSERT_TRUE(g != NULL && g->finalized);
    return g;
}

static void expect_node(const gr_graph *g, uint32_t i, gr_node_kind kind, const char *name,
                        uint64_t preds)
{
    ASSERT_TRUE(i < g->n_nodes);
    if (strcmp(g->nodes[i].name, name) != 0)
        GR_TEST_FAIL("node %u is '%s', expected '%s'", i, g->nodes[i].name, name);
    ASSERT_EQ(g->nodes[i].kind, kind);
    ASSERT_EQ_U64(g->nodes[i].preds, preds);
}

static void example_seed_is_the_seed_graph(void)
{
    gr_graph *g = load_example("graph/examples/seed.graph"), *ref;

    ASSERT_STATUS(gr_graph_create_seed(&ref), GR_OK);
    ASSERT_EQ(g->n_buffers, ref->n_buffers);
    ASSERT_EQ(g->n_nodes, ref->n_nodes);
    for (uint32_t b = 0; b < g->n_buffers; b++) {
        ASSERT_STR_EQ(g->buffers[b].name, ref->buffers[b].name);
        ASSERT_EQ(g->buffers[b].num, ref->buffers[b].num);
        ASSERT_EQ(g->buffers[b].den, ref->buffers[b].den);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *a = &g->nodes[i], *r = &ref->nodes[i];

        expect_node(g, i, r->kind, r->name, r->preds);
        ASSERT_EQ(a->port, r->port);
        ASSERT_PTR_EQ(a->kernel, r->kernel);
        ASSERT_EQ(a->n_reads, r->n_reads);
        for (uint32_t k = 0; k < a->n_reads; k++)
            ASSERT_EQ(a->reads[k], r->reads[k]);
        ASSERT_EQ(a->write, r->write);
        ASSERT_EQ(g->order[i], ref->order[i]);
        ASSERT_EQ_U64(g->ancestors[i], ref->ancestors[i]);
    }
    ASSERT_EQ(g->n_inputs, 1);
    ASSERT_EQ(g->n_outputs, 1);
    ASSERT_EQ(g->splittable, ref->splittable);
    ASSERT_EQ(g->inplace_ok[0], ref->inplace_ok[0]);
    gr_graph_destroy(ref);
    gr_graph_destroy(g);
}

static void example_seed_unfused_is_thirty_kernels_in_a_chain(void)
{
    gr_graph *g = load_example("graph/examples/seed_unfused.graph");
    static const char *const ops[] = {"mul", "add", "pow"};
    static const float scalars[] = {1.01f, 1.01f, 0.5f};
    char name[16];

    ASSERT_EQ(g->n_buffers, 1);
    ASSERT_EQ(g->n_nodes, 32);
    expect_node(g, 0, GR_NODE_H2D, "load", 0);
    ASSERT_EQ(g->nodes[0].port, 0);
    for (uint32_t i = 1; i <= 30; i++) {
        const gr_node *n = &g->nodes[i];

        snprintf(name, sizeof(name), "%s%u", ops[(i - 1) % 3], (i - 1) / 3);
        expect_node(g, i, GR_NODE_KERNEL, name, 1ull << (i - 1));
        ASSERT_STR_EQ(n->kernel->name, ops[(i - 1) % 3]);
        ASSERT_EQ(n->n_reads, 1);
        ASSERT_EQ(n->reads[0], 0);
        ASSERT_EQ(n->write, 0);
        ASSERT_FLOAT_BITS_EQ(n->scalars[0].f32, scalars[(i - 1) % 3]);
    }
    expect_node(g, 31, GR_NODE_D2H, "store", 1ull << 30);
    for (uint32_t i = 0; i < 32; i++)
        ASSERT_EQ(g->order[i], i);
    ASSERT_TRUE(g->splittable);
    ASSERT_EQ(g->inplace_ok[0] & 1, 1);
    gr_graph_destroy(g);
}

/* The seed as one expression: the seed graph's nodes and dependencies (implied: the file has
 * no dependency line), its kernel an elementwise expression kernel. */
static void example_seed_expr_is_the_seed_graph(void)
{
    gr_graph *g = load_example("graph/examples/seed_expr.graph"), *ref;

    ASSERT_STATUS(gr_graph_create_seed(&ref), GR_OK);
    ASSERT_EQ(g->n_nodes, ref->n_nodes);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        expect_node(g, i, ref->nodes[i].kind, ref->nodes[i].name, ref->nodes[i].preds);
        ASSERT_EQ(g->nodes[i].write, ref->nodes[i].write);
    }
    ASSERT_STR_CONTAINS(g->nodes[1].kernel->name, "expr.");
    ASSERT_TRUE(g->nodes[1].kernel->def.elementwise);
    ASSERT_TRUE(g->splittable);
    gr_graph_destroy(ref);
    gr_graph_destroy(g);
}

static void example_dag_has_two_branches(void)
{
    gr_graph *g = load_example("graph/examples/dag.graph");
    const gr_node *n;

    ASSERT_EQ(g->n_buffers, 4);
    ASSERT_EQ(g->n_nodes, 7);
    ASSERT_EQ(g->n_inputs, 2);
    ASSERT_EQ(g->n_outputs, 2);
    /* Declared order: load_a load_b diff seed triple store_d store_t. */
    expect_node(g, 0, GR_NODE_H2D, "load_a", 0);
    expect_node(g, 1, GR_NODE_H2D, "load_b", 0);
    expect_node(g, 2, GR_NODE_KERNEL, "diff", 0x3);
    expect_node(g, 3, GR_NODE_KERNEL, "seed", 1ull << 2);
    expect_node(g, 4, GR_NODE_KERNEL, "triple", 0x1);
    expect_node(g, 5, GR_NODE_D2H, "store_d", 1ull << 3);
    expect_node(g, 6, GR_NODE_D2H, "store_t", 1ull << 4);
    ASSERT_EQ(g->nodes[1].port, 1);
    ASSERT_EQ(g->nodes[6].port, 1);
    n = &g->nodes[2];
    ASSERT_STR_EQ(n->kernel->name, "axpby");
    ASSERT_EQ(n->n_reads, 2);
    ASSERT_EQ(n->reads[0], 0); /* a */
    ASSERT_EQ(n->reads[1], 1); /* b */
    ASSERT_EQ(n->write, 2);    /* d */
    ASSERT_FLOAT_BITS_EQ(n->scalars[0].f32, 2.0f);
    ASSERT_FLOAT_BITS_EQ(n->scalars[1].f32, -1.0f);
    n = &g->nodes[4];
    ASSERT_STR_EQ(n->kernel->name, "mul");
    ASSERT_EQ(n->reads[0], 0);
    ASSERT_EQ(n->write, 3);
    ASSERT_FLOAT_BITS_EQ(n->scalars[0].f32, 3.0f);
    /* out0 comes from both inputs, out1 from input 0 only. */
    ASSERT_EQ(g->inplace_ok[0] & 3, 3);
    ASSERT_EQ(g->inplace_ok[1] & 3, 1);
    ASSERT_EQ_U64(g->ancestors[5], 0xf);
    ASSERT_EQ_U64(g->ancestors[6], 0x11);
    gr_graph_destroy(g);
}

static void accepted_forms(void)
{
    gr_graph *g;

    /* CRLF, tabs, comments everywhere, no final newline, chains and buffers anywhere (nodes
     * in the order the data flows), arrows without spaces, ratios, C float forms. */
    g = PARSE_OK("# header\r\n"
                 "load->k1->k2 # chain before the nodes\r\n"
                 "k2 -> k3->store\n"
                 "\n"
                 "\t\n"
                 "h2d load:in0->x\n"
                 "kernel k1: mul(x,-1e-3)->x\n"
                 "kernel k2: add(x, .5) -> y\n"
                 "kernel k3: axpby(x, y, +2.5, 0x1p-2) -> y\n"
                 "d2h store: y -> out0\n"
                 "buffer x 1/1\n"
                 "buffer y\t3   # comment right after\n"
                 "buffer _spare.v-2 2/1\n"
                 "kernel k4: pow(y, 1E+1) -> _spare.v-2\n"
                 "k3 -> k4 -> store");
    ASSERT_EQ(g->n_buffers, 3);
    ASSERT_EQ(g->buffers[1].num, 3);
    ASSERT_EQ(g->buffers[1].den, 1);
    ASSERT_EQ(g->buffers[2].num, 2);
    ASSERT_EQ(g->n_nodes, 6);
    /* Nodes are numbered in the order they are declared; store follows k3 by the data flow
     * (and the chain) and k4, declared below it, by the chain alone. */
    expect_node(g, 0, GR_NODE_H2D, "load", 0);
    expect_node(g, 4, GR_NODE_D2H, "store", (1ull << 3) | (1ull << 5));
    ASSERT_FLOAT_BITS_EQ(g->nodes[1].scalars[0].f32, -1e-3f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[2].scalars[0].f32, 0.5f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[3].scalars[0].f32, 2.5f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[3].scalars[1].f32, 0.25f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[5].scalars[0].f32, 10.0f);
    gr_graph_destroy(g);

    /* A name may be as long as GR_NAME_MAX; a name may spell a port or a kernel. */
    g = PARSE_OK("buffer in0\n"
                 "h2d abcdefghijklmnopqrstuvwxyz01234: in0 -> in0\n"
                 "kernel seed: seed(in0) -> in0\n"
                 "d2h out0: in0 -> out0\n"
                 "abcdefghijklmnopqrstuvwxyz01234 -> seed -> out0\n");
    gr_graph_destroy(g);

    /* The text need not be NUL-terminated: only len bytes are read. */
    {
        static const char text[] = BASE BASE_DEPS "garbage that is not read";
        g = parse_ok(text, sizeof(text) - 1 - strlen("garbage that is not read"));
        gr_graph_destroy(g);
    }
}

static void refuses_unknown_statements(void)
{
    REFUSE("bufer x\n", "1:1: unknown statement 'bufer': expected buffer, const, h2d, kernel, "
                        "d2h, cuda, param or a dependency chain 'a -> b'");
    REFUSE(BASE "load\n", "5:1: unknown statement 'load': expected buffer, const, h2d, kernel, "
                          "d2h, cuda, param or a dependency chain 'a -> b'");
    REFUSE("  -> x\n", "1:3: expected a statement (buffer, const, h2d, kernel, d2h, cuda, param) "
                       "or a dependency chain, found '->'");
    REFUSE("buffer x\n2x\n", "2:1: expected a statement (buffer, const, h2d, kernel, d2h, cuda, "
                             "param) or a dependency chain, found '2x'");
    REFUSE("buffer x\n  @\n", "2:3: unexpected '@'");
    REFUSE("buffer x # caf\xc3\xa9 is fine in a comment\n\xc3\xa9\n",
           "2:1: unexpected byte 0xc3");
}

static void refuses_missing_punctuation(void)
{
    REFUSE("buffer x\nh2d load in0 -> x\n",
           "2:10: expected ':' after node name 'load', found 'in0'");
    REFUSE("buffer x\nh2d load: in0 x\n",
           "2:15: expected '->' after input port 'in0', found 'x'");
    REFUSE("buffer x\nd2h store: x out0\n",
           "2:14: expected '->' after buffer 'x', found 'out0'");
    REFUSE("buffer x\nkernel k: mul x, 2) -> x\n",
           "2:15: expected '(' after kernel name 'mul', found 'x'");
    REFUSE("buffer x\nkernel k: mul(x, 2) x\n",
           "2:21: expected '->' and the output buffer after ')', found 'x'");
    REFUSE("buffer x\nkernel k: mul(x 2) -> x\n",
           "2:17: expected ',' or ')' after argument 'x', found '2'");
    REFUSE("buffer x\nkernel k: mul(x, 2,) -> x\n",
           "2:20: expected an argument (a buffer name or a number), found ')'");
    REFUSE("buffer x\nkernel k: mul(x, 2) -> \n",
           "2:24: expected an output buffer name after '->', found end of line");
    REFUSE("buffer x\nkernel k: (x, 2) -> x\n",
           "2:11: expected a kernel name after ':', found '('");
    REFUSE("buffer\n", "1:7: expected a buffer name after 'buffer', found end of line");
    REFUSE("h2d : in0 -> x\n", "1:5: expected a node name after 'h2d', found ':'");
    REFUSE("buffer x\nh2d load: in0 -> x y\n",
           "2:20: expected the end of the line after buffer 'x', found 'y'");
    REFUSE("buffer x\nd2h s: x -> out0 out1\n",
           "2:18: expected the end of the line after output port 'out0', found 'out1'");
    REFUSE(BASE "load -> k store\n",
           "5:11: expected '->' or the end of the line after 'k', found 'store'");
    REFUSE(BASE "load -> \n", "5:9: expected a node name after '->', found end of line");
    REFUSE(BASE "load -> -> k\n", "5:9: expected a node name after '->', found '->'");
}

static void refuses_bad_ports(void)
{
    REFUSE("buffer x\nh2d load: in -> x\n",
           "2:11: expected an input port in0..in3 after ':', found 'in'");
    REFUSE("buffer x\nh2d load: inX -> x\n",
           "2:11: expected an input port in0..in3 after ':', found 'inX'");
    REFUSE("buffer x\nh2d load: out0 -> x\n",
           "2:11: expected an input port in0..in3 after ':', found 'out0'");
    REFUSE("buffer x\nh2d load: 0 -> x\n",
           "2:11: expected an input port in0..in3 after ':', found '0'");
    REFUSE("buffer x\nh2d load: in4 -> x\n", "2:11: input port 'in4' is out of range (in0..in3)");
    REFUSE("buffer x\nh2d load: in99999999999999999999 -> x\n",
           "2:11: input port 'in99999999999999999999' is out of range (in0..in3)");
    REFUSE("buffer x\nd2h s: x -> out-1\n",
           "2:13: expected an output port out0..out3 after '->', found 'out-1'");
    REFUSE("buffer x\nd2h s: x -> out\n",
           "2:13: expected an output port out0..out3 after '->', found 'out'");
    REFUSE("buffer x\nd2h s: x -> in0\n",
           "2:13: expected an output port out0..out3 after '->', found 'in0'");
    REFUSE("buffer x\nd2h s: x -> out4\n", "2:13: output port 'out4' is out of range (out0..out3)");
}

static void refuses_bad_ratios(void)
{
    REFUSE("buffer w 0/1\n", "1:10: buffer 'w': size ratio 0/1 must be positive");
    REFUSE("buffer w 1/0\n", "1:12: buffer 'w': size ratio 1/0 must be positive");
    REFUSE("buffer w 0\n", "1:10: buffer 'w': size ratio 0/1 must be positive");
    REFUSE("buffer w 3/\n", "1:12: expected a denominator after '/', found end of line");
    REFUSE("buffer w 3/", "1:12: expected a denominator after '/', found end of file");
    REFUSE("buffer w x/2\n", "1:10: unknown element type 'x' (types: float32, float16, "
                             "bfloat16, float64, int32, uint8)");
    REFUSE("buffer w uint8 x\n", "1:16: expected an element type, a size ratio NUM/DEN, a fixed "
                                 "size [COUNT] or the end of the line after buffer 'w', found "
                                 "'x'");
    REFUSE("buffer w 2 uint8\n", "1:12: expected the end of the line after the size ratio, found "
                                 "'uint8'");
    REFUSE("buffer w 1.5/2\n",
           "1:10: expected a size ratio NUM/DEN of positive integers, found '1.5'");
    REFUSE("buffer w -1/2\n",
           "1:10: expected a size ratio NUM/DEN of positive integers, found '-1'");
    REFUSE("buffer w 2/1/2\n",
           "1:13: expected the end of the line after the size ratio, found '/'");
    REFUSE("buffer w 4294967296\n",
           "1:10: size ratio term '4294967296' is too large (at most 4294967295)");
    REFUSE("buffer w 1/99999999999999999999999999999\n",
           "1:12: size ratio term '999999999999999999999999...' is too large (at most "
           "4294967295)");
}

/* The built-ins, as a message lists the kernels that are known. */
#define KNOWN                                                                               \
    "mul, add, pow, axpby, seed, sub, div, exp, log, tanh, sigmoid, clamp, mul2, add2, "    \
    "softmax, sum, normalize, cast"

static void refuses_unknown_kernels_and_arity(void)
{
    REFUSE("buffer x\nkernel m: mull(x, 1.01) -> x\n",
           "2:11: unknown kernel 'mull' (kernels: " KNOWN ")");
    REFUSE("buffer x\nkernel m: abcdefghijklmnopqrstuvwxyz0123456789(x) -> x\n",
           "2:11: unknown kernel 'abcdefghijklmnopqrstuvwxyz012345' (kernels: " KNOWN ")");
    REFUSE("buffer x\nbuffer y\nkernel m: mul(x, y) -> x\n",
           "3:11: kernel 'mul' takes 1 input buffer and 1 scalar, got 2 buffers");
    REFUSE("buffer x\nkernel s: seed(x, 1) -> x\n",
           "2:11: kernel 'seed' takes 1 input buffer and no scalars, got 1 buffer and 1 scalar");
    REFUSE("buffer x\nkernel s: seed() -> x\n",
           "2:11: kernel 'seed' takes 1 input buffer and no scalars, got no arguments");
    REFUSE("buffer x\nkernel a: axpby(x, 1, 2) -> x\n",
           "2:11: kernel 'axpby' takes 2 input buffers and 2 scalars, got 1 buffer and 2 "
           "scalars");
    REFUSE("buffer x\nkernel a: add(1, 2, 3, 4, 5, 6) -> x\n",
           "2:11: kernel 'add' takes 1 input buffer and 1 scalar, got 6 scalars");
    REFUSE("buffer x\nkernel a: axpby(x, 2.0, x, 1.0) -> x\n",
           "2:25: buffer 'x' after a scalar: buffers come first, then scalars");
}

static void refuses_bad_numbers(void)
{
    REFUSE("buffer x\nkernel m: mul(x, 1.2.3) -> x\n",
           "2:18: invalid number '1.2.3' (scalars are C floats: 2, -0.5, 1e-3)");
    REFUSE("buffer x\nkernel m: mul(x, 1.01f) -> x\n",
           "2:18: invalid number '1.01f' (scalars are C floats: 2, -0.5, 1e-3)");
    REFUSE("buffer x\nkernel m: mul(x, nan) -> x\n",
           "2:18: number 'nan' is not finite (scalars must be finite)");
    REFUSE("buffer x\nkernel m: mul(x, INF) -> x\n",
           "2:18: number 'INF' is not finite (scalars must be finite)");
    REFUSE("buffer x\nkernel m: mul(x, -inf) -> x\n",
           "2:18: number '-inf' is not finite (scalars must be finite)");
    REFUSE("buffer x\nkernel m: mul(x, 1e99999) -> x\n",
           "2:18: number '1e99999' is out of range (at most 1.8e308)");
    REFUSE("buffer x\nkernel m: mul(x, 1e39) -> x\n",
           "2:18: number '1e39' is out of float32 range (at most 3.4e38)");
    REFUSE("buffer x\nkernel m: mul(x, 1e-99999) -> x\n",
           "2:18: number '1e-99999' is too small (it would be 0)");
    REFUSE("buffer x\nkernel m: mul(x, 1e-50) -> x\n",
           "2:18: number '1e-50' is too small for float32 (it would be 0)");
    REFUSE("buffer x\nkernel m: mul(x, 1$) -> x\n", "2:19: unexpected '$' in a number");
    REFUSE("buffer x\nkernel m: mul(x, 1111111111111111111111111111111111111111111111111111111"
           "111111111) -> x\n",
           "2:18: number '111111111111111111111111...' is too long (at most 63 characters)");
}

static void refuses_bad_names(void)
{
    REFUSE("buffer x$y\n",
           "1:9: unexpected '$' in a name (names are letters, digits, '_', '.' and '-')");
    REFUSE("buffer x\nh2d lo\xff: in0 -> x\n",
           "2:7: unexpected byte 0xff in a name (names are letters, digits, '_', '.' and '-')");
    REFUSE("buffer abcdefghijklmnopqrstuvwxyz012345\n",
           "1:8: name 'abcdefghijklmnopqrstuvwx...' is too long (32 characters, at most 31)");
    REFUSE(BASE "load -> abcdefghijklmnopqrstuvwxyz0123456789\n",
           "5:9: name 'abcdefghijklmnopqrstuvwx...' is too long (36 characters, at most 31)");
    REFUSE("buffer kernel\n", "1:8: 'kernel' is a keyword and cannot be a name");
    REFUSE("buffer x\nh2d buffer: in0 -> x\n", "2:5: 'buffer' is a keyword and cannot be a name");
    REFUSE("buffer Infinity\n", "1:8: 'Infinity' reads as a number and cannot be a name");
}

static void refuses_unknown_and_duplicate_names(void)
{
    REFUSE("buffer x\nh2d load: in0 -> y\n", "2:18: unknown buffer 'y'");
    REFUSE("buffer x\nkernel k: axpby(x, z, 1, 2) -> x\n", "2:20: unknown buffer 'z'");
    REFUSE("buffer x\nkernel k: mul(x, 2) -> z\n", "2:24: unknown buffer 'z'");
    REFUSE("buffer x\nd2h s: z -> out0\n", "2:8: unknown buffer 'z'");
    REFUSE(BASE "d2h s2: load -> out1\n", "5:9: unknown buffer 'load' (it is a node)");
    REFUSE(BASE BASE_DEPS "h2d load: in1 -> x\n",
           "6:5: node 'load' is defined twice (first on line 2)");
    REFUSE(BASE BASE_DEPS "kernel store: add(x, 1) -> x\n",
           "6:8: node 'store' is defined twice (first on line 4)");
    REFUSE(BASE BASE_DEPS "\n\nbuffer x 2\n", "8:8: buffer 'x' is defined twice (first on line 1)");
    REFUSE(BASE "load -> nope -> store\n", "5:9: dependency on unknown node 'nope'");
    REFUSE(BASE "nope -> store\n", "5:1: dependency on unknown node 'nope'");
    REFUSE(BASE "load -> x\n",
           "5:9: dependency on unknown node 'x' (it is a buffer: dependencies order nodes)");
    REFUSE(BASE "load -> k -> k\n", "5:14: node 'k' cannot depend on itself");
}

static void refuses_invalid_graphs_at_their_declaration(void)
{
    /* A cycle of explicit dependencies between nodes the data flow leaves unordered (both
     * only read x): a -> b -> a; 'after' is declared first and waits on it, but is not on
     * it. */
    REFUSE("buffer x\n"
           "buffer y\n"
           "buffer z\n"
           "h2d load: in0 -> x\n"
           "d2h after: x -> out0\n"
           "kernel a: mul(x, 2) -> y\n"
           "kernel b: add(x, 1) -> z\n"
           "d2h sy: y -> out1\n"
           "d2h sz: z -> out2\n"
           "a -> b -> a\n"
           "b -> after\n",
           "6:8: dependency cycle through node 'a' (a -> b -> a)");
    /* A cycle too long for the message is cut short, visibly. */
    {
        char text[2048];
        size_t used = (size_t)snprintf(text, sizeof(text), "buffer x\nh2d l: in0 -> x\n"
                                                           "d2h s: x -> out0\nl -> s\n");
        gr_error_info err;
        gr_graph *g;

        for (int i = 0; i < 8; i++)
            used += (size_t)snprintf(text + used, sizeof(text) - used,
                                     "buffer y%d\n"
                                     "kernel a_long_name_to_fill_the_msg%d: add(x, 1) -> y%d\n"
                                     "a_long_name_to_fill_the_msg%d -> "
                                     "a_long_name_to_fill_the_msg%d\n",
                                     i, i, i, i, (i + 1) % 8);
        ASSERT_STATUS(gr_graph_parse(text, used, "t.graph", &g, &err), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(err.message, "t.graph:6:8: dependency cycle through node "
                                         "'a_long_name_to_fill_the_msg0' "
                                         "(a_long_name_to_fill_the_msg0 -> "
                                         "a_long_name_to_fill_the_msg1 -> ");
        ASSERT_STR_CONTAINS(err.message, "...)");
    }
    REFUSE("buffer x\n"
           "buffer y\n"
           "h2d load: in0 -> x\n"
           "kernel k: add(y, 1) -> x\n"
           "d2h store: x -> out0\n"
           "load -> k -> store\n",
           "4:8: node 'k' reads buffer 'y', which no node it depends on writes");
    REFUSE(BASE BASE_DEPS "d2h store2: x -> out0\nk -> store2\n",
           "6:5: output port 0 is written by more than one D2H node ('store2')");
    REFUSE("buffer x\nh2d load: in1 -> x\nd2h store: x -> out0\nload -> store\n",
           "2:5: input ports must be numbered 0..n-1 without gaps (highest is 1)");
    REFUSE("buffer x\nh2d load: in0 -> x\nd2h store: x -> out2\nload -> store\n",
           "3:5: output ports must be numbered 0..n-1 without gaps (highest is 2)");
    REFUSE(BASE BASE_DEPS "buffer spare # never used\n",
           "6:8: buffer 'spare' is never used (it would only take device memory)");
    REFUSE("buffer h 1/2\nh2d load: in0 -> h\nd2h store: h -> out0\nload -> store\n",
           "1:8: node 'load' works on the whole tensor, but buffer 'h' (1/2) is smaller than "
           "the tensor");
    /* Problems of the whole graph are reported where the text ends. */
    REFUSE("buffer x\nh2d load: in0 -> x\n",
           "3:1: graph has no D2H node: it produces nothing");
    REFUSE("", "1:1: graph has no nodes");
    REFUSE("# nothing here\n\n", "3:1: graph has no nodes");
    REFUSE("buffer x", "1:9: graph has no nodes");
}

/* Dependencies the data flow implies, in the order of the text: a reader follows the last
 * writer above it, a writer the last writer and every reader since; edges other implied
 * ones cover are left out, and explicit lines may repeat or add to them. */
static void implied_dependencies(void)
{
    gr_graph *g, *ex;

    /* No dependency lines at all. */
    g = PARSE_OK(BASE);
    expect_node(g, 0, GR_NODE_H2D, "load", 0);
    expect_node(g, 1, GR_NODE_KERNEL, "k", 1ull << 0);
    expect_node(g, 2, GR_NODE_D2H, "store", 1ull << 1);
    gr_graph_destroy(g);

    /* The DAG example without its dependency lines is the same graph. */
    g = PARSE_OK("buffer a\nbuffer b\nbuffer d\nbuffer t\n"
                 "h2d load_a: in0 -> a\nh2d load_b: in1 -> b\n"
                 "kernel diff: axpby(a, b, 2.0, -1.0) -> d\nkernel seed: seed(d) -> d\n"
                 "kernel triple: mul(a, 3.0) -> t\n"
                 "d2h store_d: d -> out0\nd2h store_t: t -> out1\n");
    ex = load_example("graph/examples/dag.graph");
    ASSERT_EQ(g->n_nodes, ex->n_nodes);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        expect_node(g, i, ex->nodes[i].kind, ex->nodes[i].name, ex->nodes[i].preds);
        ASSERT_EQ_U64(g->ancestors[i], ex->ancestors[i]);
    }
    gr_graph_destroy(ex);
    gr_graph_destroy(g);

    /* Write after read: k waits for s, which read x before k overwrites it; s2 reads k's x.
     * Readers between two writes are not ordered among themselves (a, b); the writer after
     * them follows both, and needs no edge from load, which both follow. Explicit lines
     * may repeat implied edges (a -> c) and add others (a -> b). */
    g = PARSE_OK("buffer x\n"
                 "h2d load: in0 -> x\n"   /* 0 */
                 "d2h s: x -> out0\n"     /* 1 */
                 "kernel k: add(x, 1) -> x\n" /* 2 */
                 "d2h s2: x -> out1\n");  /* 3 */
    expect_node(g, 1, GR_NODE_D2H, "s", 1ull << 0);
    expect_node(g, 2, GR_NODE_KERNEL, "k", 1ull << 1);
    expect_node(g, 3, GR_NODE_D2H, "s2", 1ull << 2);
    gr_graph_destroy(g);
    g = PARSE_OK("buffer x\nbuffer y\nbuffer z\n"
                 "h2d load: in0 -> x\n"          /* 0 */
                 "kernel a: mul(x, 2) -> y\n"    /* 1 */
                 "kernel b: mul(x, 3) -> z\n"    /* 2 */
                 "kernel c: add(x, 1) -> x\n"    /* 3 */
                 "d2h sx: x -> out0\nd2h sy: y -> out1\nd2h sz: z -> out2\n");
    expect_node(g, 1, GR_NODE_KERNEL, "a", 1ull << 0);
    expect_node(g, 2, GR_NODE_KERNEL, "b", 1ull << 0);
    expect_node(g, 3, GR_NODE_KERNEL, "c", (1ull << 1) | (1ull << 2));
    ASSERT_EQ_U64(g->ancestors[3], 0x7);
    gr_graph_destroy(g);
    g = PARSE_OK("buffer x\nbuffer y\nbuffer z\n"
                 "h2d load: in0 -> x\nkernel a: mul(x, 2) -> y\nkernel b: mul(x, 3) -> z\n"
                 "kernel c: add(x, 1) -> x\n"
                 "d2h sx: x -> out0\nd2h sy: y -> out1\nd2h sz: z -> out2\n"
                 "a -> c\na -> b\nload -> a\n");
    expect_node(g, 2, GR_NODE_KERNEL, "b", (1ull << 0) | (1ull << 1));
    expect_node(g, 3, GR_NODE_KERNEL, "c", (1ull << 1) | (1ull << 2));
    gr_graph_destroy(g);

    /* What the data flow does not order stays refused: a read of a buffer nothing writes. */
    REFUSE("buffer x\nbuffer y\nh2d load: in0 -> x\nkernel k: add(y, 1) -> x\n"
           "d2h store: x -> out0\n",
           "4:8: node 'k' reads buffer 'y', which no node it depends on writes");
}

/* An explicit dependency that, with the implied ones, would make a cycle is refused at the
 * dependency line, naming the line whose data flow implies the other order. */
static void refuses_contradictions(void)
{
    REFUSE("buffer x\n"
           "h2d load: in0 -> x\n"
           "d2h after: x -> out0\n"
           "kernel a: mul(x, 2) -> x\n"
           "kernel b: add(x, 1) -> x\n"
           "load -> a -> b -> a\n",
           "6:14: dependency 'b -> a' contradicts the data flow: node 'b' (line 5) reads buffer "
           "'x', which 'a' (line 4) writes above it, so 'a' runs before 'b'");
    /* Through several implied edges: the first one is named, and the path spelled out. */
    REFUSE(BASE BASE_DEPS "store -> load\n",
           "6:1: dependency 'store -> load' contradicts the data flow: node 'k' (line 3) reads "
           "buffer 'x', which 'load' (line 2) writes above it, so 'load' runs before 'store' "
           "(load -> k -> store)");
    /* A write after a read, and after a write. */
    REFUSE(BASE BASE_DEPS "kernel k2: add(x, 1) -> x\nload -> k2 -> store\n",
           "7:9: dependency 'k2 -> store' contradicts the data flow: node 'k2' (line 6) writes "
           "buffer 'x', which 'store' (line 4) reads above it, so 'store' runs before 'k2'");
    REFUSE("buffer x\nbuffer y\n"
           "d2h store: y -> out0\n"
           "kernel k2: add(x, .5) -> y\n"
           "kernel k1: mul(x, 2) -> x\n"
           "h2d load: in0 -> x\n"
           "load -> k1 -> k2 -> store\n",
           "7:1: dependency 'load -> k1' contradicts the data flow: node 'load' (line 6) writes "
           "buffer 'x', which 'k1' (line 5) also writes above it, so 'k1' runs before 'load'");
    /* A read above every write of its buffer: refused with the reason, whether or not a
     * dependency line tries to order it (then that line is the contradiction). */
    REFUSE("buffer x\nbuffer y\nh2d load: in0 -> x\nd2h s: y -> out0\n"
           "kernel k: add(x, 1) -> y\n",
           "4:5: node 's' reads buffer 'y' before any node writes it: 'k' (line 5) writes it "
           "below, and nodes that share a buffer run in the order of the text");
    REFUSE("buffer x\nbuffer y\nh2d load: in0 -> x\nd2h s: y -> out0\n"
           "kernel k: add(x, 1) -> y\nk -> s\n",
           "6:1: dependency 'k -> s' contradicts the data flow: node 'k' (line 5) writes "
           "buffer 'y', which 's' (line 4) reads above it, so 's' runs before 'k'");
}

/* param lines and constant expressions as scalars: evaluated in float64, then checked
 * against the kernel's scalar type. */
static void params_and_constant_scalars(void)
{
    gr_graph *g;

    g = PARSE_OK("param scale = 2 * 3  # six\n"
                 "param half=scale/12\n"
                 "param big = 1e30 * 1e30\n"
                 "buffer x\n"
                 "h2d load: in0 -> x\n"
                 "kernel a: mul(x, 1/0.25) -> x\n"
                 "kernel b: mul(x, scale * 2) -> x\n"
                 "kernel c: add(x, -half) -> x\n"
                 "kernel d: clamp(x, -scale, (scale + 1) / 7) -> x\n"
                 "kernel e: pow(x, sqrt(0.25)) -> x\n"
                 "kernel f: axpby(x, x, scale, - 2) -> x\n"
                 "kernel g: mul(x, scale) -> x\n"
                 "kernel h: mul(x, big / 1e50 + 0.1) -> x\n"
                 "kernel i: add(x, 2 -1) -> x\n"
                 "d2h store: x -> out0\n");
    ASSERT_FLOAT_BITS_EQ(g->nodes[1].scalars[0].f32, 4.0f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[2].scalars[0].f32, 12.0f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[3].scalars[0].f32, -0.5f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[4].scalars[0].f32, -6.0f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[4].scalars[1].f32, 1.0f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[5].scalars[0].f32, 0.5f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[6].scalars[0].f32, 6.0f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[6].scalars[1].f32, -2.0f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[7].scalars[0].f32, 6.0f);
    /* In float64: 1e60 / 1e50 + 0.1 is exact there, then rounded once to float32. */
    ASSERT_FLOAT_BITS_EQ(g->nodes[8].scalars[0].f32, (float)(1e30 * 1e30 / 1e50 + 0.1));
    ASSERT_FLOAT_BITS_EQ(g->nodes[9].scalars[0].f32, 1.0f);
    gr_graph_destroy(g);

    REFUSE("param = 2\n", "1:7: expected a param name after 'param', found '='");
    REFUSE("param s 2\n", "1:9: expected '=' after param name 's', found '2'");
    REFUSE("param s =\n", "1:10: expected a constant after '=', found end of line");
    REFUSE("param s = # nothing\n", "1:11: expected a constant after '=', found end of line");
    REFUSE("param s = 1 +\n", "1:14: expected a value (a number, a name or '('), found the end "
                              "of the expression");
    REFUSE("param s = (1 + 2\n", "1:17: expected ')', found the end of the expression");
    REFUSE("param s = 1/0\n", "1:12: this constant part of the expression is not finite (inf)");
    REFUSE("param s = t\n", "1:11: unknown name 't' (a constant is made of numbers and params)");
    REFUSE("param s = t\nparam t = 1\n", "1:11: unknown name 't' (a constant is made of "
                                         "numbers and params)");
    REFUSE("param s = 1\nparam s = 2\n", "2:7: param 's' is defined twice (first on line 1)");
    REFUSE("buffer s\nparam s = 1\n", "2:7: param 's' has the name of buffer 's' (line 1): "
                                      "params and buffers share names");
    REFUSE("param s = 1\nbuffer s\n", "2:8: buffer 's' has the name of param 's' (line 1): "
                                      "params and buffers share names");
    REFUSE("param kernel = 1\n", "1:7: 'kernel' is a keyword and cannot be a name");
    REFUSE("buffer param\n", "1:8: 'param' is a keyword and cannot be a name");
    REFUSE("param a-b = 1\n", "1:7: param 'a-b' cannot be named in an expression ('-' would "
                              "read as a minus)");
    REFUSE("param sqrt = 1\n", "1:7: param 'sqrt' cannot be named in an expression (it is a "
                               "function's name)");
    REFUSE("param s = 1 2\n", "1:13: expected an operator or the end of the expression, found "
                              "'2'");
    REFUSE("param s = 1 < 2\n", "1:13: a comparison is not a value: use it as select's "
                                "condition, select(a < b, x, y)");
    /* Scalars: positions inside the expression, the kernel's type, names. */
    REFUSE("param scale = 2\nbuffer x\nkernel k: mul(x, scale * ) -> x\n",
           "3:25: expected a value (a number, a name or '('), found the end of the expression");
    REFUSE("buffer x\nkernel k: mul(x, 1e30 * 1e30) -> x\n",
           "2:18: scalar '1e30 * 1e30' (1e+60) is out of float32 range (at most 3.4e38)");
    REFUSE("buffer x\nkernel k: mul(x, 1e-30 / 1e30) -> x\n",
           "2:18: scalar '1e-30 / 1e30' (1e-60) is too small for float32 (it would be 0)");
    REFUSE("buffer x\nbuffer y\nkernel k: mul(x, y * 2) -> x\n",
           "3:18: unknown name 'y' (a constant is made of numbers and params): 'y' is a buffer, "
           "and a scalar is a constant (for arithmetic on buffers, use expr)");
    REFUSE("buffer x\nkernel k: mul(x, s) -> x\nparam s = 2\n",
           "2:18: unknown name 's' (a constant is made of numbers and params): param 's' is "
           "declared below, and must be above its use");
    REFUSE("buffer x\nkernel k: mul(x, 2 * s) -> x\nparam s = 2\n",
           "2:22: unknown name 's' (a constant is made of numbers and params): param 's' is "
           "declared below, and must be above its use");
    REFUSE("param scale = 2\nbuffer x\nkernel k: mul(x, scale-1) -> x\n",
           "3:11: kernel 'mul' takes 1 input buffer and 1 scalar, got 2 buffers ('scale-1' is one "
           "name: for param 'scale' minus something, put spaces around the '-')");
    REFUSE("param scale = 2\nbuffer x\nkernel k: axpby(x, scale-1, 1, 2) -> x\n",
           "3:20: unknown buffer 'scale-1' (for param 'scale' minus something, put spaces "
           "around the '-': names may contain '-')");
    REFUSE("param s = 2\nbuffer x\nkernel k: axpby(x, s, x, 1) -> x\n",
           "3:23: buffer 'x' after a scalar: buffers come first, then scalars");
    REFUSE("buffer x\nkernel k: mul(x, 2 3) -> x\n",
           "2:20: expected ',' or ')' after argument '2', found '3'");
    /* The limit on params. */
    {
        char text[4096];
        size_t used = 0;

        for (int i = 0; i <= 64; i++)
            used += (size_t)snprintf(text + used, sizeof(text) - used, "param p%d = %d\n", i, i);
        refuse(text, used, "65:7: too many params (at most 64)");
    }
}

/* Run node i's kernel (an expression's) on the CPU over x (and y) of n floats. */
static void run_node(const gr_graph *g, uint32_t i, const float *x, const float *y, float *out,
                     uint64_t n)
{
    const gr_kernel *k = g->nodes[i].kernel;
    gr_kernel_args a;

    memset(&a, 0, sizeof(a));
    a.in[0] = x;
    a.in[1] = y;
    a.in_n[0] = a.in_n[1] = n;
    a.out = out;
    a.n = n;
    ASSERT_TRUE(k != NULL && k->def.cpu != NULL);
    k->def.cpu(&a, k->def.user);
}

/* kernel NODE: expr(BUFFERS, "TEXT") -> OUT: an elementwise kernel made of the text, for the
 * buffers' types, registered once per computation. */
static void expression_kernels(void)
{
    static const float x[] = {0.0f, 0.25f, 1.0f, -3.0f, 1e6f};
    static const float y[] = {1.0f, -2.0f, 0.5f, 8.0f, 3.0f};
    float out[5];
    uint32_t count;
    gr_graph *g, *g2;

    g = PARSE_OK("param scale = 0.5\n"
                 "buffer x\nbuffer y\nbuffer d\nbuffer h float16\n"
                 "h2d la: in0 -> x\nh2d lb: in1 -> y\n"
                 "kernel norm: expr(x, \"(x - 0.5) * 2.0\") -> d\n"
                 "kernel diff: expr(d, y, \"d * 2 - y\") -> d\n"
                 "kernel half: expr(x,\"float16(x * scale)\")->h\n"
                 "kernel same: expr(y, \"(y-0.5)*2.0\") -> y\n"
                 "d2h sd: d -> out0\nd2h sh: h -> out1\nd2h sy: y -> out2\n");
    ASSERT_EQ(g->n_nodes, 9);
    ASSERT_STR_CONTAINS(g->nodes[2].kernel->name, "expr.");
    ASSERT_EQ(g->nodes[2].n_reads, 1);
    ASSERT_EQ(g->nodes[3].n_reads, 2);
    ASSERT_EQ(g->nodes[3].reads[0], 2); /* d */
    ASSERT_EQ(g->nodes[3].reads[1], 1); /* y */
    ASSERT_EQ(g->nodes[3].write, 2);
    ASSERT_EQ(g->nodes[4].kernel->def.out_dtype, GR_DTYPE_FLOAT16);
    /* The same computation over another buffer is the same kernel. */
    ASSERT_PTR_EQ(g->nodes[5].kernel, g->nodes[2].kernel);
    /* Implied: diff after norm (d) and lb (y), same after diff (it overwrites y). */
    ASSERT_EQ_U64(g->nodes[3].preds, (1ull << 1) | (1ull << 2));
    ASSERT_EQ_U64(g->nodes[5].preds, 1ull << 3);
    ASSERT_TRUE(g->splittable);
    run_node(g, 2, x, NULL, out, 5);
    for (int i = 0; i < 5; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], (x[i] - 0.5f) * 2.0f);
    run_node(g, 3, x, y, out, 5);
    for (int i = 0; i < 5; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], x[i] * 2.0f - y[i]);
    {
        uint16_t h[5];

        run_node(g, 4, x, NULL, (float *)h, 5);
        for (int i = 0; i < 5; i++)
            ASSERT_EQ(h[i], gr__f32_to_f16(x[i] * 0.5f));
    }
    /* Parsing again registers nothing new. */
    count = gr_kernel_count();
    g2 = PARSE_OK("buffer a\nh2d l: in0 -> a\nkernel k: expr(a, \"(a - 0.5) * 2.0\") -> a\n"
                  "d2h s: a -> out0\n");
    ASSERT_PTR_EQ(g2->nodes[1].kernel, g->nodes[2].kernel);
    ASSERT_EQ(gr_kernel_count(), count);
    gr_graph_destroy(g2);
    gr_graph_destroy(g);

#define EXPR_SPEC(line) "buffer x\nbuffer y\nh2d l: in0 -> x\n" line "\nd2h s: y -> out0\n"
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"(x - 0.5 * 2.0\") -> y"),
           "4:34: expected ')', found the end of the expression");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x + \") -> y"),
           "4:24: expected a value (a number, a name or '('), found the end of the expression");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x $ 2\") -> y"), "4:22: unexpected '$'");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"sqr(x)\") -> y"),
           "4:20: unknown function 'sqr' (functions: sqrt, exp, log, pow, abs, min, max, tanh, "
           "sigmoid, floor, clamp, select, where; casts: float32, float16, bfloat16, float64, "
           "int32, uint8)");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"pow(x)\") -> y"),
           "4:20: 'pow' takes 2 arguments, got 1");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x * q\") -> y"),
           "4:24: unknown name 'q' (not an input of the expression, nor a param)");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x * y\") -> y"),
           "4:24: unknown name 'y' (not an input of the expression, nor a param): buffer 'y' is "
           "not an input; list it before the expression");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x * s\") -> y\nparam s = 2"),
           "4:24: unknown name 's' (not an input of the expression, nor a param): param 's' is "
           "declared below, and must be above its use");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x < 1\") -> y"),
           "4:22: the expression is a comparison, not a value: write select(a < b, 1, 0) for a "
           "number");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"(x < 1) * 2\") -> y"),
           "4:23: a comparison is not a value: use it as select's condition, select(a < b, x, "
           "y)");
    REFUSE("buffer x\nbuffer y uint8\nh2d l: in0 -> x\nkernel k: expr(x, \"x * 2\") -> y\n"
           "d2h s: y -> out0\n",
           "4:20: the expression's value is float32, which does not convert safely to uint8 (the "
           "output's type): write uint8(...) around it");
    REFUSE(EXPR_SPEC("kernel k: expr(\"x\") -> y"),
           "4:11: expr takes its input buffers before the expression: expr(x, \"x * 2\")");
    REFUSE(EXPR_SPEC("kernel k: expr(x) -> y"),
           "4:17: expected ',' and the expression in double quotes after input buffer 'x', found "
           "')'");
    REFUSE(EXPR_SPEC("kernel k: expr(x, 2) -> y"),
           "4:19: expected an input buffer, or the expression in double quotes, found '2'");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x\", y) -> y"),
           "4:22: expected ')' after the expression, found ','");
    REFUSE(EXPR_SPEC("kernel k: expr(x, \"x * 2) -> y"),
           "4:19: a string that the line does not close with '\"'");
    REFUSE(EXPR_SPEC("kernel k: expr(x, x, x, x, x, \"x\") -> y"),
           "4:11: expr takes at most 4 input buffers, got 5");
    REFUSE(EXPR_SPEC("kernel k: expr(x, x, \"x\") -> y"),
           "4:19: buffer 'x' is an input of expr twice");
    REFUSE(EXPR_SPEC("kernel k: expr(z, \"z\") -> y"), "4:16: unknown buffer 'z'");
    REFUSE("buffer x-1\nbuffer y\nh2d l: in0 -> x-1\nkernel k: expr(x-1, \"x\") -> y\n"
           "d2h s: y -> out0\n",
           "4:16: buffer 'x-1' cannot be named in an expression ('-' would read as a minus): "
           "rename it");
    /* Syntax is checked with the other lines' syntax, before names are resolved. */
    REFUSE("buffer x\nkernel k: expr(x, \"x +\") -> nothing\nbuffer w 0\n",
           "2:23: expected a value (a number, a name or '('), found the end of the expression");
}

/* `const NAME [TYPE] [D0, D1, ...]`: a constant of the job, read by a kernel's small input;
 * no dependency is implied for it (the job writes it before every node). */
static void constants(void)
{
    static const char text[] = "buffer x\n"
                               "buffer y\n"
                               "const mean [3]\n"
                               "const sd float32 [1, 3]\n"
                               "h2d load: in0 -> x\n"
                               "kernel k: normalize(x, mean, sd) -> y\n"
                               "d2h store: y -> out0\n";
    gr_graph *g = parse_ok(text, sizeof(text) - 1);
    gr_const_info info;

    ASSERT_EQ(gr_graph_const_count(g), 2);
    ASSERT_STATUS(gr_graph_const_get(g, 1, &info), GR_OK);
    ASSERT_STR_EQ(info.name, "sd");
    ASSERT_EQ_U64(info.elems, 3);
    ASSERT_EQ(info.rank, 2);
    ASSERT_EQ_U64(info.shape[0], 1);
    ASSERT_EQ_U64(info.shape[1], 3);
    ASSERT_EQ_U64(g->nodes[1].preds, 1); /* k after load only */
    gr_graph_destroy(g);
    REFUSE("const w\n", "1:8: expected its shape in brackets, such as [4096, 4096], after "
                        "constant 'w', found end of line");
    REFUSE("const w [2, 0]\n", "1:13: a fixed buffer holds at least one element");
    REFUSE("const w [2 3]\n", "1:12: expected ',' or ']' in the shape of constant 'w', found '3'");
    REFUSE("const w [1, 2, 3, 4, 5]\n", "1:22: constant 'w': at most 4 dimensions");
    REFUSE("buffer w\nconst w [2]\n", "2:7: buffer 'w' is defined twice (first on line 1)");
    REFUSE("const w [2]\n" BASE "h2d l2: in1 -> w\n",
           "6:5: node 'l2' writes constant 'w': constants are read only (each job gives their "
           "contents)");
}

static void refuses_cut_off_statements_and_nul_bytes(void)
{
    REFUSE("buffer x\nkernel k: mul(x, 2", "2:19: expected ',' or ')' after argument '2', found "
                                           "end of file");
    REFUSE("buffer x\nh2d load: in0 ->", "2:17: expected a buffer name after '->', found end "
                                         "of file");
    REFUSE("buffer x\nh2d load", "2:9: expected ':' after node name 'load', found end of file");
    REFUSE("buffer x\0y\n", "1:9: NUL byte in the text (a graph spec is text, not binary data)");
    REFUSE("buffer x # a comment \0 with a NUL\n",
           "1:22: NUL byte in the text (a graph spec is text, not binary data)");
    REFUSE("\0", "1:1: NUL byte in the text (a graph spec is text, not binary data)");
}

static void refuses_too_many(void)
{
    char text[8192], want[96];
    size_t used = 0;

    used += (size_t)snprintf(text + used, sizeof(text) - used, "buffer x\n");
    for (int i = 0; i <= GR_MAX_NODES; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "h2d n%d: in0 -> x\n", i);
    ASSERT_LT(used, sizeof(text));
    snprintf(want, sizeof(want), "%d:5: too many nodes (at most %d)", GR_MAX_NODES + 2,
             GR_MAX_NODES);
    refuse(text, used, want);

    used = 0;
    for (int i = 0; i <= GR_MAX_BUFFERS; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "buffer b%d\n", i);
    snprintf(want, sizeof(want), "%d:8: too many buffers (at most %d)", GR_MAX_BUFFERS + 1,
             GR_MAX_BUFFERS);
    refuse(text, used, want);
}

static void refuses_bad_arguments(void)
{
    gr_error_info err;
    gr_graph *g = (gr_graph *)&err;

    ASSERT_STATUS(gr_graph_parse("buffer x\n", 9, "t", NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_parse(NULL, 1, "t", &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(g, NULL);
    ASSERT_STR_CONTAINS(err.message, "text is NULL");
    /* No name and no error info: still refused, with a default name. */
    ASSERT_STATUS(gr_graph_parse("x", 1, NULL, &g, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_parse("x", 1, NULL, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "<graph spec>:1:1: unknown statement 'x'");
    ASSERT_STATUS(gr_graph_load(NULL, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "path is NULL");
}

static void load_reports_the_path(void)
{
    const char *dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    char path[512], want[600];
    gr_error_info err;
    gr_graph *g = (gr_graph *)&err;
    FILE *f;

    snprintf(path, sizeof(path), "%s/no/such.graph", dir);
    ASSERT_STATUS(gr_graph_load(path, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(g, NULL);
    snprintf(want, sizeof(want), "%s: cannot read: %s", path, strerror(ENOENT));
    if (strcmp(err.message, want) != 0)
        GR_TEST_FAIL("got '%s', want '%s'", err.message, want);

    ASSERT_STATUS(gr_graph_load(dir, &g, &err), GR_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof(want), "%s: cannot read: %s", dir, strerror(EISDIR));
    if (strcmp(err.message, want) != 0)
        GR_TEST_FAIL("got '%s', want '%s'", err.message, want);

    /* Errors in a file are named by its path; a file of more than 4 KiB reads whole. */
    snprintf(path, sizeof(path), "%s/bad.graph", dir);
    f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    for (int i = 0; i < 500; i++)
        fprintf(f, "# comment line %d\n", i);
    fprintf(f, BASE BASE_DEPS "kernel k: add(x, 1) -> x\n");
    fclose(f);
    ASSERT_STATUS(gr_graph_load(path, &g, &err), GR_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof(want), "%s:506:8: node 'k' is defined twice (first on line 503)",
             path);
    if (strcmp(err.message, want) != 0)
        GR_TEST_FAIL("got '%s', want '%s'", err.message, want);
    /* err->node names the node of a finalize refusal. */
    f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    fprintf(f, "buffer x\nbuffer y\nh2d load: in0 -> x\nkernel k: add(y, 1) -> x\n"
               "d2h store: x -> out0\n");
    fclose(f);
    ASSERT_STATUS(gr_graph_load(path, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, ":4:8: node 'k' reads buffer 'y'");
    ASSERT_STR_EQ(err.node, "k");

    /* Larger than the limit: refused without parsing. */
    f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    for (int i = 0; i < (1 << 20) / 16 + 1; i++)
        fputs("# 16 bytes ....\n", f);
    fclose(f);
    ASSERT_STATUS(gr_graph_load(path, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "larger than 1048576 bytes");
    remove(path);
}

GR_TEST_MAIN(GR_TEST(example_seed_is_the_seed_graph),
             GR_TEST(example_seed_unfused_is_thirty_kernels_in_a_chain),
             GR_TEST(example_seed_expr_is_the_seed_graph),
             GR_TEST(example_dag_has_two_branches), GR_TEST(accepted_forms),
             GR_TEST(refuses_unknown_statements), GR_TEST(refuses_missing_punctuation),
             GR_TEST(refuses_bad_ports), GR_TEST(refuses_bad_ratios),
             GR_TEST(refuses_unknown_kernels_and_arity), GR_TEST(refuses_bad_numbers),
             GR_TEST(refuses_bad_names), GR_TEST(refuses_unknown_and_duplicate_names),
             GR_TEST(refuses_invalid_graphs_at_their_declaration),
             GR_TEST(implied_dependencies), GR_TEST(refuses_contradictions),
             GR_TEST(params_and_constant_scalars), GR_TEST(expression_kernels),
             GR_TEST(constants),
             GR_TEST(refuses_cut_off_statements_and_nul_bytes), GR_TEST(refuses_too_many),
             GR_TEST(refuses_bad_arguments), GR_TEST(load_reports_the_path))

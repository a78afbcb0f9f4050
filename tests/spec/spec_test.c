/*
 * spec_test.c - the graph spec parser (graph/spec.c, docs/GRAPH_SPEC.md): the shipped
 * examples parse into the graphs they describe, every accepted form is read as written, and
 * every refusal names the right line and column with its exact message.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
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

    /* CRLF, tabs, comments everywhere, no final newline, statements in any order,
     * arrows without spaces, ratios, C float forms. */
    g = PARSE_OK("# header\r\n"
                 "load->k1->k2 # chain before the nodes\r\n"
                 "k2 -> k3->store\n"
                 "\n"
                 "\t\n"
                 "d2h store: y -> out0\n"
                 "kernel k3: axpby(x, y, +2.5, 0x1p-2) -> y\n"
                 "kernel k2: add(x, .5) -> y\n"
                 "kernel k1: mul(x,-1e-3)->x\n"
                 "h2d load:in0->x\n"
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
    /* Nodes are numbered in the order they are declared. */
    expect_node(g, 0, GR_NODE_D2H, "store", (1ull << 1) | (1ull << 5));
    expect_node(g, 4, GR_NODE_H2D, "load", 0);
    ASSERT_FLOAT_BITS_EQ(g->nodes[3].scalars[0].f32, -1e-3f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[2].scalars[0].f32, 0.5f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[1].scalars[0].f32, 2.5f);
    ASSERT_FLOAT_BITS_EQ(g->nodes[1].scalars[1].f32, 0.25f);
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
    REFUSE("bufer x\n", "1:1: unknown statement 'bufer': expected buffer, h2d, kernel, d2h, "
                        "cuda or a dependency chain 'a -> b'");
    REFUSE(BASE "load\n", "5:1: unknown statement 'load': expected buffer, h2d, kernel, d2h, "
                          "cuda or a dependency chain 'a -> b'");
    REFUSE("  -> x\n", "1:3: expected a statement (buffer, h2d, kernel, d2h, cuda) or a dependency "
                       "chain, found '->'");
    REFUSE("buffer x\n2x\n", "2:1: expected a statement (buffer, h2d, kernel, d2h, cuda) or a "
                             "dependency chain, found '2x'");
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
    /* The cycle b -> a -> b; 'after' is declared first and waits on it, but is not on it. */
    REFUSE("buffer x\n"
           "h2d load: in0 -> x\n"
           "d2h after: x -> out0\n"
           "kernel a: mul(x, 2) -> x\n"
           "kernel b: add(x, 1) -> x\n"
           "load -> a -> b -> a\n"
           "b -> after\n",
           "4:8: dependency cycle through node 'a' (a -> b -> a)");
    REFUSE(BASE BASE_DEPS "store -> load\n",
           "2:5: dependency cycle through node 'load' (load -> k -> store -> load)");
    /* A cycle too long for the message is cut short, visibly. */
    {
        char text[2048];
        size_t used = (size_t)snprintf(text, sizeof(text), "buffer x\nh2d l: in0 -> x\n"
                                                           "d2h s: x -> out0\nl -> s\n");
        gr_error_info err;
        gr_graph *g;

        for (int i = 0; i < 8; i++)
            used += (size_t)snprintf(text + used, sizeof(text) - used,
                                     "kernel a_long_name_to_fill_the_msg%d: add(x, 1) -> x\n"
                                     "a_long_name_to_fill_the_msg%d -> "
                                     "a_long_name_to_fill_the_msg%d\n",
                                     i, i, (i + 1) % 8);
        ASSERT_STATUS(gr_graph_parse(text, used, "t.graph", &g, &err), GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(err.message, "t.graph:5:8: dependency cycle through node "
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
    REFUSE(BASE BASE_DEPS "kernel k2: add(x, 1) -> x\nload -> k2 -> store\n",
           "6:8: nodes 'k' and 'k2' both use buffer 'x' and one writes it, but no dependency "
           "orders them");
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
    fprintf(f, BASE "load -> store\n");
    fclose(f);
    ASSERT_STATUS(gr_graph_load(path, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, ":3:8: node 'k' reads buffer 'x'");
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
             GR_TEST(example_dag_has_two_branches), GR_TEST(accepted_forms),
             GR_TEST(refuses_unknown_statements), GR_TEST(refuses_missing_punctuation),
             GR_TEST(refuses_bad_ports), GR_TEST(refuses_bad_ratios),
             GR_TEST(refuses_unknown_kernels_and_arity), GR_TEST(refuses_bad_numbers),
             GR_TEST(refuses_bad_names), GR_TEST(refuses_unknown_and_duplicate_names),
             GR_TEST(refuses_invalid_graphs_at_their_declaration),
             GR_TEST(refuses_cut_off_statements_and_nul_bytes), GR_TEST(refuses_too_many),
             GR_TEST(refuses_bad_arguments), GR_TEST(load_reports_the_path))

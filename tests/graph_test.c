/*
 * graph_test.c - graph templates: building, every refusal with its message, validation at
 * finalize, layout and footprint.
 */
#include "graph/graph.h"
#include "tests/testing.h"

static const char *X[] = {"x"};

/* h2d(in0 -> x) -> kernel -> d2h(x -> out0), with the dependencies. */
static gr_graph *chain(void)
{
    gr_graph *g;
    const float s = 2.0f;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "x", &s, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    return g;
}

static void seed_graph_and_footprint(void)
{
    gr_graph *g;
    uint64_t bytes;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_EQ(gr_graph_input_count(g), 1);
    ASSERT_EQ(gr_graph_output_count(g), 1);
    ASSERT_TRUE(g->splittable);
    ASSERT_STATUS(gr_graph_footprint(g, 1, &bytes), GR_OK);
    ASSERT_EQ_U64(bytes, GR_BUFFER_ALIGN); /* 4 bytes, rounded */
    ASSERT_STATUS(gr_graph_footprint(g, 64, &bytes), GR_OK);
    ASSERT_EQ_U64(bytes, 256);
    ASSERT_STATUS(gr_graph_footprint(g, 65, &bytes), GR_OK);
    ASSERT_EQ_U64(bytes, 512);
    ASSERT_STATUS(gr_graph_footprint(g, 100000000, &bytes), GR_OK);
    ASSERT_EQ_U64(bytes, 400000000);
    ASSERT_STATUS(gr_graph_footprint(g, 0, &bytes), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_footprint(g, UINT64_MAX / 2, &bytes), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_footprint(g, 1, NULL), GR_ERR_INVALID_ARGUMENT);
    /* The only input may be the very same memory as the only output. */
    ASSERT_EQ(g->inplace_ok[0] & 1, 1);
    gr_graph_destroy(g);
    gr_graph_destroy(NULL);
}

static void builder_refusals(void)
{
    const float s[2] = {1, 2};
    const char *two[] = {"x", "x"};
    const char *unknown[] = {"nope"};
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "", 1, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "buffer name");
    ASSERT_STATUS(gr_graph_add_buffer(g, "a b", 1, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_buffer(g, NULL, 1, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_buffer(g, "abcdefghijklmnopqrstuvwxyz0123456", 1, 1),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 0, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "must be positive");
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 0), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), ""); /* cleared by a successful call */
    ASSERT_EQ(GRAPH_ERROR(g)[0], '\0');
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "buffer 'x' is defined twice");

    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "nope"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "unknown buffer 'nope'");
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", GR_MAX_PORTS, "x"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "input port");
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "node 'load' is defined twice");

    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "frobnicate", X, 1, "x", s, 1),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "unknown kernel 'frobnicate'");
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", two, 2, "x", s, 1),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "takes 1 input(s), got 2");
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "x", s, 2), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "takes 1 scalar(s), got 2");
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "x", NULL, 1),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", unknown, 1, "x", s, 1),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "unknown buffer 'nope'");
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "y", s, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "x", s, 1), GR_OK);

    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", GR_MAX_PORTS), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "output port");
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);

    ASSERT_STATUS(gr_graph_add_dep(g, "load", "nowhere"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "unknown node 'nowhere'");
    ASSERT_STATUS(gr_graph_add_dep(g, NULL, "k"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "k"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "cannot depend on itself");
    gr_graph_destroy(g);

    ASSERT_STATUS(gr_graph_add_buffer(NULL, "x", 1, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_finalize(NULL), GR_ERR_INVALID_ARGUMENT);
}

/* gr_graph_error_get gives a refusal as every other call gives its detail: the status the
 * call returned, no index, the node when the refusal is about one, and the reason; GR_OK
 * and "" before any refusal and after a call that succeeded. gr_graph_error, deprecated,
 * is its message alone. */
static void error_get(void)
{
    static const char *Y[] = {"y"};
    const float s = 1.0f;
    gr_error_info info;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    memset(&info, 0x5a, sizeof(info));
    ASSERT_STATUS(gr_graph_error_get(g, &info), GR_OK);
    ASSERT_STATUS(info.status, GR_OK);
    ASSERT_EQ_U64(info.index, GR_NO_INDEX);
    ASSERT_STR_EQ(info.node, "");
    ASSERT_STR_EQ(info.message, "");

    /* Invalid argument, about no node. */
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 0, 1), GR_ERR_INVALID_ARGUMENT);
    memset(&info, 0x5a, sizeof(info));
    ASSERT_STATUS(gr_graph_error_get(g, &info), GR_OK);
    ASSERT_STATUS(info.status, GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ_U64(info.index, GR_NO_INDEX);
    ASSERT_STR_EQ(info.node, "");
    ASSERT_STR_CONTAINS(info.message, "must be positive");
    ASSERT_STR_EQ(info.message, gr_graph_error(g));

    /* A success forgets it. */
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_error_get(g, &info), GR_OK);
    ASSERT_STATUS(info.status, GR_OK);
    ASSERT_STR_EQ(info.message, "");
    ASSERT_STR_EQ(gr_graph_error(g), "");

    /* Finalize refuses a node that reads what nothing wrote: the node is named. */
    ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", Y, 1, "x", &s, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_error_get(g, &info), GR_OK);
    ASSERT_STATUS(info.status, GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ_U64(info.index, GR_NO_INDEX);
    ASSERT_STR_EQ(info.node, "k");
    ASSERT_STR_CONTAINS(info.message, "node 'k' reads buffer 'y'");
    ASSERT_STR_EQ(info.message, gr_graph_error(g));
    gr_graph_destroy(g);

    /* Invalid usage: a finalized graph changed. */
    g = chain();
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_graph_error_get(g, &info), GR_OK);
    ASSERT_STATUS(info.status, GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(info.message, "finalized");
    ASSERT_STR_EQ(info.message, gr_graph_error(g));

    /* NULL: refused, and said so in out when there is one. */
    ASSERT_STATUS(gr_graph_error_get(g, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_error_get(NULL, &info), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(info.status, GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(info.message, "no graph");
    gr_graph_destroy(g);
}

static void limits(void)
{
    char name[16];
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    for (int i = 0; i < GR_MAX_BUFFERS; i++) {
        snprintf(name, sizeof(name), "b%d", i);
        ASSERT_STATUS(gr_graph_add_buffer(g, name, 1, 1), GR_OK);
    }
    ASSERT_STATUS(gr_graph_add_buffer(g, "one_more", 1, 1), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "too many buffers");
    for (int i = 0; i < GR_MAX_NODES; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        ASSERT_STATUS(gr_graph_add_h2d(g, name, 0, "b0"), GR_OK);
    }
    ASSERT_STATUS(gr_graph_add_h2d(g, "one_more", 0, "b0"), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "too many nodes");
    gr_graph_destroy(g);
}

/* Finalize `g` expecting a refusal whose message contains `why`. */
static void expect_refused(gr_graph *g, const char *why)
{
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), why);
    ASSERT_TRUE(!g->finalized);
    gr_graph_destroy(g);
}

static void finalize_refusals(void)
{
    const float s = 1.0f;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    expect_refused(g, "no nodes");

    g = chain();
    ASSERT_STATUS(gr_graph_add_dep(g, "store", "load"), GR_OK);
    expect_refused(g, "dependency cycle");

    /* The kernel reads x, but nothing it depends on writes x. */
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "x", &s, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    expect_refused(g, "node 'k' reads buffer 'x', which no node it depends on writes");

    /* Ordered reads, but two writers of x with no order between them. */
    g = chain();
    ASSERT_STATUS(gr_graph_add_kernel(g, "k2", "add", X, 1, "x", &s, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k2"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k2", "store"), GR_OK);
    expect_refused(g, "no dependency orders them");

    /* A D2H racing with the kernel that writes its buffer. */
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", X, 1, "x", &s, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "store"), GR_OK);
    expect_refused(g, "nodes 'k' and 'store' both use buffer 'x'");

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    expect_refused(g, "no D2H node");

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 1, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "store"), GR_OK);
    expect_refused(g, "input ports must be numbered 0..n-1");

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "store"), GR_OK);
    expect_refused(g, "output ports must be numbered 0..n-1");

    g = chain();
    ASSERT_STATUS(gr_graph_add_d2h(g, "store2", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store2"), GR_OK);
    expect_refused(g, "output port 0 is written by more than one D2H node");

    g = chain();
    ASSERT_STATUS(gr_graph_add_buffer(g, "spare", 1, 1), GR_OK);
    expect_refused(g, "buffer 'spare' is never used");

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "half", 1, 2), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "half"), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "half", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "store"), GR_OK);
    expect_refused(g, "smaller than the tensor");
}

static void frozen_after_finalize(void)
{
    gr_graph *g = chain();
    const float s = 1.0f;

    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "finalized");
    ASSERT_STATUS(gr_graph_add_kernel(g, "k9", "mul", X, 1, "x", &s, 1), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "store"), GR_ERR_INVALID_USAGE);
    gr_graph_destroy(g);
}

/* Two inputs, a scratch buffer twice the tensor, and a DAG: layout and in-place rules. */
static void dag_layout_and_in_place_rules(void)
{
    const char *ab[] = {"a", "b"};
    const float s[2] = {2, 3};
    uint64_t off[GR_MAX_BUFFERS], total;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "a", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "b", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "wide", 2, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "la", 0, "a"), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "lb", 1, "b"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "sum", "axpby", ab, 2, "wide", s, 2), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "out0", "wide", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "out1", "a", 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "la", "sum"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "lb", "sum"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "sum", "out0"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "la", "out1"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    ASSERT_EQ(gr_graph_input_count(g), 2);
    ASSERT_EQ(gr_graph_output_count(g), 2);
    ASSERT_TRUE(!g->splittable); /* "wide" is not 1:1 with the tensor */
    /* out0 comes after both loads; out1 only after la. */
    ASSERT_EQ(g->inplace_ok[0] & 3, 3);
    ASSERT_EQ(g->inplace_ok[1] & 3, 1);
    ASSERT_STATUS(gr__graph_layout(g, 100, off, &total), GR_OK);
    ASSERT_EQ_U64(off[0], 0);
    ASSERT_EQ_U64(off[1], 512);  /* 400 bytes rounded */
    ASSERT_EQ_U64(off[2], 1024);
    ASSERT_EQ_U64(total, 1024 + 1024); /* 800 bytes rounded */
    ASSERT_EQ_U64(gr__graph_buffer_elems(g, 2, 3), 6);
    /* The topological order respects every dependency. */
    for (uint32_t k = 0; k < g->n_nodes; k++)
        for (uint32_t j = k + 1; j < g->n_nodes; j++)
            ASSERT_EQ((g->ancestors[g->order[k]] >> g->order[j]) & 1, 0);
    gr_graph_destroy(g);
}

static void kernel_listing(void)
{
    gr_kernel_info info = GR_KERNEL_INFO_INIT;
    int found_seed = 0;

    ASSERT_GE(gr_kernel_count(), 5);
    for (uint32_t i = 0; i < gr_kernel_count(); i++) {
        ASSERT_STATUS(gr_kernel_info_get(i, &info), GR_OK);
        ASSERT_TRUE(info.name != NULL && info.doc != NULL);
        if (strcmp(info.name, "seed") == 0)
            found_seed = info.elementwise && info.n_inputs == 1 && info.n_scalars == 0;
    }
    ASSERT_TRUE(found_seed);
    ASSERT_STATUS(gr_kernel_info_get(gr_kernel_count(), &info), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_kernel_info_get(0, NULL), GR_ERR_INVALID_ARGUMENT);
}

/* A kernel that writes as many elements as its output buffer holds (GR_OUT_BUFFER): its
 * buffer must be fixed, and its n is that size, whatever the tensor. */
static void output_of_its_own_size(void)
{
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_buffer_desc fixed = GR_BUFFER_DESC_INIT;
    unsigned char block[4096];
    float in[100];
    gr_tensor t = {{in}, {in}, 100, 0, {0}};
    gr_iteration it;
    gr_kernel_args a;
    gr_error_info err;
    gr_graph *g;

    d.name = "first_three";
    d.n_inputs = 1;
    d.out_size = GR_OUT_BUFFER;
    d.cpu = (gr_kernel_cpu_fn)(uintptr_t)1; /* never called here */
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    d.name = "first_three_ew";
    d.elementwise = 1;
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "an elementwise kernel writes one element per element");

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "y", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "first_three", X, 1, "y", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "y", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    expect_refused(g, "so buffer 'y' must have a fixed size");

    fixed.fixed_elems = 3;
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "y", &fixed), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "first_three", X, 1, "y", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "y", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    memset(&it, 0, sizeof(it));
    it.graph = g;
    it.tensor = &t;
    it.base = block;
    ASSERT_STATUS(gr__graph_layout(g, t.elems, it.offsets, &(uint64_t){0}), GR_OK);
    gr__graph_node_args(&it, &g->nodes[1], &a);
    ASSERT_EQ_U64(a.n, 3);
    ASSERT_EQ_U64(a.in_n[0], 100);
    gr_graph_destroy(g);
}

GR_TEST_MAIN(GR_TEST(seed_graph_and_footprint), GR_TEST(builder_refusals), GR_TEST(error_get),
             GR_TEST(limits),
             GR_TEST(output_of_its_own_size),
             GR_TEST(finalize_refusals), GR_TEST(frozen_after_finalize),
             GR_TEST(dag_layout_and_in_place_rules), GR_TEST(kernel_listing))

/*
 * kernel_registry_test.c - the registry's lifetimes (kernels/registry.c): unregister, the
 * holds graphs take, destroy called exactly once, the cap counting registered kernels,
 * expressions a spec registers going with its graph, and registration, use and
 * unregistration from many threads at once (run it under tsan).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/kernels.h"
#include "tests/testing.h"

#define MAGIC 0x6b726567u /* "kreg" */

/* A kernel's user data: its destroy checks the magic and counts its calls. */
typedef struct owned {
    uint32_t magic;
    atomic_int destroyed;
    float factor;
    bool free_on_destroy; /* the stress's: nothing looks at it after its destroy */
} owned;

static atomic_int destroys; /* every owned's destroy, for the stress */

static void scale(const gr_kernel_args *a, void *user)
{
    const owned *o = user;
    const float *in = a->in[0];
    float *out = a->out;

    for (uint64_t i = 0; i < a->n; i++)
        out[i] = in[i] * o->factor;
}

static void destroy_owned(void *user)
{
    owned *o = user;

    if (o->magic != MAGIC)
        GR_TEST_FAIL("destroy of user data without its magic (%#x)", o->magic);
    atomic_fetch_add(&destroys, 1);
    if (o->free_on_destroy) {
        o->magic = 0; /* a second destroy (or a use after it) finds no magic */
        free(o);
        return;
    }
    atomic_fetch_add(&o->destroyed, 1);
}

static gr_kernel_def owned_def(const char *name, owned *o)
{
    gr_kernel_def d = GR_KERNEL_DEF_INIT;

    d.name = name;
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = scale;
    d.user = o;
    d.destroy = destroy_owned;
    return d;
}

static owned *owned_new(float factor)
{
    owned *o = calloc(1, sizeof(*o));

    ASSERT_TRUE(o != NULL);
    o->magic = MAGIC;
    o->factor = factor;
    return o;
}

/* in0 -> x, kernel(x) -> x, x -> out0; NULL when the builder refuses. */
static gr_graph *graph_using(const char *kernel)
{
    const char *in[] = {"x"};
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "in", 0, "x"), GR_OK);
    if (gr_graph_add_kernel(g, "k", kernel, in, 1, "x", NULL, 0) != GR_OK ||
        gr_graph_add_d2h(g, "out", "x", 0) != GR_OK || gr_graph_add_dep(g, "in", "k") != GR_OK ||
        gr_graph_add_dep(g, "k", "out") != GR_OK || gr_graph_finalize(g) != GR_OK) {
        gr_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* Runs node 1 (the kernel) of g on the host: the kernel the graph resolved, as it was. */
static float run_kernel_node(const gr_graph *g, float x)
{
    const gr_kernel *k = g->nodes[1].kernel;
    gr_kernel_args a;
    float out = 0;

    memset(&a, 0, sizeof(a));
    a.in[0] = &x;
    a.in_n[0] = 1;
    a.out = &out;
    a.n = 1;
    k->def.cpu(&a, k->def.user);
    return out;
}

static void unregister_unused_frees_at_once(void)
{
    owned *o = owned_new(2.0f);
    gr_kernel_def d = owned_def("unused_k", o);
    uint32_t before = gr_kernel_count();
    gr_error_info err;

    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    ASSERT_EQ(gr_kernel_count(), before + 1);
    ASSERT_STATUS(gr_kernel_unregister("unused_k", &err), GR_OK);
    ASSERT_EQ(atomic_load(&o->destroyed), 1);
    ASSERT_EQ(gr_kernel_count(), before);
    ASSERT_TRUE(gr__kernel_find("unused_k") == NULL);
    ASSERT_STATUS(gr_kernel_unregister("unused_k", &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "no kernel 'unused_k'");
    ASSERT_STATUS(gr_kernel_unregister("mul", &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "built-in");
    ASSERT_STATUS(gr_kernel_unregister(NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(gr__kernel_find("mul") != NULL);
    ASSERT_EQ(atomic_load(&o->destroyed), 1);
    free(o);
}

/* A failed registration leaves the user data with the caller: no destroy. */
static void refused_registration_keeps_user_data(void)
{
    owned *o = owned_new(1.0f);
    gr_kernel_def d = owned_def("mul", o);
    gr_error_info err;

    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(atomic_load(&o->destroyed), 0);
    free(o);
}

/* Unregistered while a graph uses it: the name goes at once and may be registered again,
 * the graph keeps (and runs) the definition it resolved, freed with the graph. */
static void graph_keeps_its_kernel(void)
{
    owned *old = owned_new(2.0f), *new = owned_new(3.0f);
    gr_kernel_def d = owned_def("held_k", old);
    gr_graph *g, *g2;
    gr_error_info err;

    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    g = graph_using("held_k");
    ASSERT_TRUE(g != NULL);
    ASSERT_STATUS(gr_kernel_unregister("held_k", &err), GR_OK);
    ASSERT_EQ(atomic_load(&old->destroyed), 0);
    ASSERT_TRUE(gr__kernel_find("held_k") == NULL);
    ASSERT_TRUE(graph_using("held_k") == NULL);
    ASSERT_FLOAT_BITS_EQ(run_kernel_node(g, 1.5f), 3.0f);

    d = owned_def("held_k", new);
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    g2 = graph_using("held_k");
    ASSERT_TRUE(g2 != NULL);
    ASSERT_FLOAT_BITS_EQ(run_kernel_node(g, 1.5f), 3.0f);
    ASSERT_FLOAT_BITS_EQ(run_kernel_node(g2, 1.5f), 4.5f);

    /* A job's reference (gr__graph_ref) keeps it as the caller's does. */
    gr__graph_ref(g);
    gr_graph_destroy(g);
    ASSERT_EQ(atomic_load(&old->destroyed), 0);
    gr__graph_unref(g);
    ASSERT_EQ(atomic_load(&old->destroyed), 1);

    ASSERT_STATUS(gr_kernel_unregister("held_k", &err), GR_OK);
    ASSERT_EQ(atomic_load(&new->destroyed), 0);
    gr_graph_destroy(g2);
    ASSERT_EQ(atomic_load(&new->destroyed), 1);
    ASSERT_EQ(atomic_load(&old->destroyed), 1);
    free(old);
    free(new);
}

/* GR_MAX_KERNELS bounds the kernels registered now: unregistering makes room. */
static void cap_counts_registered_kernels(void)
{
    uint32_t before = gr_kernel_count(), added = 0;
    owned *o = owned_new(1.0f);
    gr_error_info err;
    gr_status st = GR_OK;
    char name[32];

    while (st == GR_OK) {
        gr_kernel_def d;

        snprintf(name, sizeof(name), "cap_%u", added);
        d = owned_def(name, o);
        if ((st = gr_kernel_register(&d, &err)) == GR_OK)
            added++;
    }
    ASSERT_STATUS(st, GR_ERR_OVER_BUDGET);
    ASSERT_EQ(before + added, GR_MAX_KERNELS);
    ASSERT_STATUS(gr_kernel_unregister("cap_7", &err), GR_OK);
    {
        gr_kernel_def d = owned_def("cap_again", o);

        ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
        ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
        d.name = "cap_full";
        ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_OVER_BUDGET);
        ASSERT_STATUS(gr_kernel_unregister("cap_again", &err), GR_OK);
    }
    for (uint32_t i = 0; i < added; i++) {
        snprintf(name, sizeof(name), "cap_%u", i);
        ASSERT_STATUS(gr_kernel_unregister(name, &err), i == 7 ? GR_ERR_INVALID_ARGUMENT : GR_OK);
    }
    ASSERT_EQ(gr_kernel_count(), before);
    ASSERT_EQ(atomic_load(&o->destroyed), (int)added + 1);
    free(o);
}

#define EXPR_SPEC(text)                                                                     \
    "buffer a\nh2d l: in0 -> a\nkernel k: expr(a, \"" text "\") -> a\nd2h s: a -> out0\n"

static gr_graph *parse(const char *text)
{
    gr_error_info err;
    gr_graph *g = NULL;

    if (gr_graph_parse(text, strlen(text), "t.graph", &g, &err) != GR_OK)
        GR_TEST_FAIL("parse: %s", err.message);
    return g;
}

/* A spec's expression is registered for its graphs only: it goes with the last of them. A
 * gr_kernel_register_expr of the same program keeps it registered. */
static void spec_expressions_go_with_their_graphs(void)
{
    uint32_t before = gr_kernel_count();
    gr_graph *g1 = parse(EXPR_SPEC("a * 7.25 + 1")), *g2, *g3;
    char name[GR_NAME_MAX + 1];
    const char *names[] = {"a"};
    gr_expr_def e = GR_EXPR_DEF_INIT;
    gr_error_info err;

    ASSERT_EQ(gr_kernel_count(), before + 1);
    g2 = parse(EXPR_SPEC("a * 7.25 + 1"));
    ASSERT_PTR_EQ(g2->nodes[1].kernel, g1->nodes[1].kernel);
    ASSERT_EQ(gr_kernel_count(), before + 1);
    gr_graph_destroy(g1);
    ASSERT_EQ(gr_kernel_count(), before + 1);
    gr_graph_destroy(g2);
    ASSERT_EQ(gr_kernel_count(), before);

    /* Unregistered by name while a graph uses it: a new parse registers it again. */
    g1 = parse(EXPR_SPEC("a * 7.25 + 1"));
    ASSERT_EQ(gr_kernel_count(), before + 1);
    snprintf(name, sizeof(name), "%s", g1->nodes[1].kernel->name);
    ASSERT_STATUS(gr_kernel_unregister(name, &err), GR_OK);
    ASSERT_EQ(gr_kernel_count(), before);
    g2 = parse(EXPR_SPEC("a * 7.25 + 1"));
    ASSERT_EQ(gr_kernel_count(), before + 1);
    ASSERT_NE(g2->nodes[1].kernel->id, g1->nodes[1].kernel->id);
    ASSERT_STR_EQ(g2->nodes[1].kernel->name, name);
    ASSERT_FLOAT_BITS_EQ(run_kernel_node(g1, 2.0f), 15.5f);
    gr_graph_destroy(g1);
    ASSERT_FLOAT_BITS_EQ(run_kernel_node(g2, 2.0f), 15.5f);

    /* Registered through the API while a spec's graph holds it: it stays. */
    e.text = "a * 7.25 + 1";
    e.n_inputs = 1;
    e.input_names[0] = names[0];
    ASSERT_STATUS(gr_kernel_register_expr(&e, name, sizeof(name), &err), GR_OK);
    ASSERT_STR_EQ(name, g2->nodes[1].kernel->name);
    gr_graph_destroy(g2);
    ASSERT_EQ(gr_kernel_count(), before + 1);
    g3 = parse(EXPR_SPEC("a * 7.25 + 1"));
    gr_graph_destroy(g3);
    ASSERT_EQ(gr_kernel_count(), before + 1);
    ASSERT_STATUS(gr_kernel_unregister(name, &err), GR_OK);
    ASSERT_EQ(gr_kernel_count(), before);

    /* A parse that fails after registering leaves nothing behind. */
    {
        static const char bad[] = "buffer a\nh2d l: in0 -> a\nkernel k: expr(a, \"a + 3\") -> a\n";
        gr_graph *g = NULL;

        ASSERT_TRUE(gr_graph_parse(bad, sizeof(bad) - 1, "t.graph", &g, &err) != GR_OK);
        ASSERT_EQ(gr_kernel_count(), before);
    }
}

/* Many threads register, use, unregister and drop, each its own names and one shared name,
 * started behind a barrier: every registration is destroyed exactly once, and no graph
 * sees its kernel change (the factor its user data carries). */
static uint32_t threads = 8, rounds = 300;
static pthread_barrier_t start;
static atomic_int registered;

static void *churn(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (t + 1);

    pthread_barrier_wait(&start);
    for (uint32_t r = 0; r < rounds; r++) {
        char name[32];
        owned *o = owned_new((float)(t * 1000 + r));
        gr_kernel_def d;
        gr_error_info err;
        gr_graph *g, *shared;
        bool mine = gr_test_rand(&seed) & 1;

        o->free_on_destroy = true;
        snprintf(name, sizeof(name), mine ? "churn_%u_%u" : "churn_shared", (unsigned)t,
                 (unsigned)(r % 4));
        d = owned_def(name, o);
        if (gr_kernel_register(&d, &err) == GR_OK) {
            atomic_fetch_add(&registered, 1);
        } else {
            ASSERT_TRUE(!mine);
            free(o);
            o = NULL;
        }
        g = graph_using(name);
        shared = graph_using("churn_shared");
        if (mine)
            ASSERT_TRUE(g != NULL && g->nodes[1].kernel->def.user == o);
        if (g != NULL) {
            const owned *u = g->nodes[1].kernel->def.user;
            float want = u->factor * 2.0f;

            ASSERT_EQ(u->magic, MAGIC);
            (void)gr_kernel_unregister(name, &err); /* the shared one: maybe another's */
            ASSERT_FLOAT_BITS_EQ(run_kernel_node(g, 2.0f), want);
        } else {
            (void)gr_kernel_unregister(name, &err);
        }
        if (shared != NULL)
            ASSERT_EQ(((const owned *)shared->nodes[1].kernel->def.user)->magic, MAGIC);
        gr_graph_destroy(g);
        gr_graph_destroy(shared);
    }
    return NULL;
}

static void concurrent_register_use_unregister(void)
{
    pthread_t th[64];
    uint32_t before = gr_kernel_count();
    gr_error_info err;

    if (threads > 64)
        threads = 64;
    atomic_store(&destroys, 0);
    ASSERT_EQ(pthread_barrier_init(&start, NULL, threads + 1), 0);
    for (uintptr_t t = 0; t < threads; t++)
        ASSERT_EQ(pthread_create(&th[t], NULL, churn, (void *)t), 0);
    pthread_barrier_wait(&start);
    for (uint32_t t = 0; t < threads; t++)
        ASSERT_EQ(pthread_join(th[t], NULL), 0);
    ASSERT_EQ(pthread_barrier_destroy(&start), 0);
    (void)gr_kernel_unregister("churn_shared", &err);
    printf("    %d registrations, %d destroys\n", atomic_load(&registered),
           atomic_load(&destroys));
    ASSERT_EQ(atomic_load(&destroys), atomic_load(&registered));
    ASSERT_EQ(gr_kernel_count(), before);
}

GR_TEST_MAIN(GR_TEST(unregister_unused_frees_at_once), GR_TEST(refused_registration_keeps_user_data),
             GR_TEST(graph_keeps_its_kernel), GR_TEST(cap_counts_registered_kernels),
             GR_TEST(spec_expressions_go_with_their_graphs),
             GR_TEST(concurrent_register_use_unregister))

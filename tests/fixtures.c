/*
 * fixtures.c - shared test helpers (see fixtures.h).
 */
#include "tests/fixtures.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

gr_runtime *gr_test_runtime(gr_test_shape shape)
{
    gr_config cfg = GR_CONFIG_INIT;
    const char *was = getenv("GR_UNITS_IN_FLIGHT");
    char saved[16] = "";
    gr_error_info err;
    gr_runtime *rt;
    gr_status st;

    cfg.backend = shape.backend == GR_BACKEND_AUTO ? GR_BACKEND_HOST : shape.backend;
    cfg.host_devices = shape.devices ? shape.devices : 1;
    cfg.workers_per_device = shape.workers ? shape.workers : 3;
    cfg.budget_bytes = shape.budget;
    if (shape.ring)
        cfg.ring_capacity = shape.ring;
    cfg.context_mode = shape.contexts;
    if (shape.whole_tensors)
        cfg.split_tensors = 0;
    /* The runtime reads GR_UNITS_IN_FLIGHT as it is created: set it for that alone. */
    if (shape.in_flight != NULL) {
        if (was != NULL)
            snprintf(saved, sizeof(saved), "%s", was);
        setenv("GR_UNITS_IN_FLIGHT", shape.in_flight, 1);
    }
    st = gr_runtime_create(&cfg, &rt, &err);
    if (shape.in_flight != NULL) {
        if (was != NULL)
            setenv("GR_UNITS_IN_FLIGHT", saved, 1);
        else
            unsetenv("GR_UNITS_IN_FLIGHT");
    }
    if (st != GR_OK)
        GR_TEST_FAIL("runtime create: %s: %s", gr_status_str(err.status), err.message);
    return rt;
}

gr_graph *gr_test_kernel_graph(const char *kernel, uint32_t n_inputs, const float *scalars,
                               uint32_t n_scalars, bool in_place)
{
    const char *ins[2] = {"a", "b"}, *loads[2] = {"la", "lb"}, *x = "x";
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    if (in_place) {
        ASSERT_EQ(n_inputs, 1);
        ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_h2d(g, "la", 0, "x"), GR_OK);
        ins[0] = x;
    } else {
        ASSERT_TRUE(n_inputs <= 2);
        for (uint32_t i = 0; i < n_inputs; i++) {
            ASSERT_STATUS(gr_graph_add_buffer(g, ins[i], 1, 1), GR_OK);
            ASSERT_STATUS(gr_graph_add_h2d(g, loads[i], i, ins[i]), GR_OK);
        }
        ASSERT_STATUS(gr_graph_add_buffer(g, "o", 1, 1), GR_OK);
    }
    if (gr_graph_add_kernel(g, "k", kernel, ins, n_inputs, in_place ? "x" : "o", scalars,
                            n_scalars) != GR_OK)
        GR_TEST_FAIL("kernel node '%s': %s", kernel, GRAPH_ERROR(g));
    ASSERT_STATUS(gr_graph_add_d2h(g, "st", in_place ? "x" : "o", 0), GR_OK);
    for (uint32_t i = 0; i < n_inputs; i++)
        ASSERT_STATUS(gr_graph_add_dep(g, loads[i], "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "st"), GR_OK);
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("finalize: %s", GRAPH_ERROR(g));
    return g;
}

gr_kernel_def gr_test_source_def(const char *name, const char *entry, const char *src)
{
    gr_kernel_def d = GR_KERNEL_DEF_INIT;

    d.name = name;
    d.n_inputs = 1;
    d.n_scalars = 1;
    d.elementwise = 1;
    d.cuda_kind = GR_CUDA_SOURCE;
    d.cuda = src;
    d.cuda_name = entry;
    return d;
}

void gr_test_expect_kernel_matches_cpu(gr_runtime *rt, const gr_test_kernel_case *c,
                                       const float *x, const float *y, uint64_t n)
{
    const gr_kernel *k = gr__kernel_find(c->kernel);
    gr_graph *g = gr_test_kernel_graph(c->kernel, c->n_in, c->s, c->n_s, false);
    float *out = NULL, *want = malloc(n * sizeof(float));
    gr_tensor t;
    gr_kernel_args a = {.out = want, .in = {x, y}, .n = n, .in_n = {n, n},
                        .s = {{c->s[0]}, {c->s[1]}}};
    gr_error_info err;
    gr_status st;
    gr_job *job;

    ASSERT_TRUE(k != NULL && k->def.cpu != NULL && want != NULL);
    ASSERT_STATUS(gr_host_alloc(n * sizeof(float), (void **)&out), GR_OK);
    t = (gr_tensor){{x, c->n_in > 1 ? y : NULL}, {out}, n, 0, {0}};
    memset(out, 0xff, n * sizeof(float));
    if (gr_job_submit(rt, g, &t, 1, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("%s: submit: %s", c->kernel, err.message);
    if ((st = gr_test_wait(job, GR_WAIT_FOREVER)) != GR_OK) {
        gr_job_error_get(job, &err);
        GR_TEST_FAIL("%s: %s: %s", c->kernel, gr_status_str(st), err.message);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    k->def.cpu(&a, k->def.user);
    for (uint64_t i = 0; i < n; i++) {
        int32_t gi, wi;
        int64_t ulps;

        memcpy(&gi, &out[i], 4);
        memcpy(&wi, &want[i], 4);
        ulps = (int64_t)gi - wi;
        if (ulps < -c->ulps || ulps > c->ulps)
            GR_TEST_FAIL("%s(%g): element %llu (x %.9g): GPU %.9g (%a), CPU %.9g (%a)",
                         c->kernel, c->s[0], (unsigned long long)i, x[i], out[i], out[i],
                         want[i], want[i]);
    }
    gr_host_free(out);
    free(want);
}

gr_status gr_test_wait(gr_job *job, int64_t timeout_ns)
{
    gr_status result = GR_ERR_INTERNAL;

    ASSERT_STATUS(gr_job_wait(job, timeout_ns, &result), GR_OK);
    return result;
}

gr_test_tensors gr_test_tensors_make(uint64_t seed, uint64_t count, uint64_t elems)
{
    gr_test_tensors s = {calloc(count, sizeof(float *)), calloc(count, sizeof(gr_tensor)), count,
                         elems, seed};

    ASSERT_TRUE(s.data != NULL && s.t != NULL);
    for (uint64_t i = 0; i < count; i++) {
        s.data[i] = malloc(elems * sizeof(float));
        ASSERT_TRUE(s.data[i] != NULL);
        gr_workload_fill(s.data[i], 0, elems, seed, i);
        s.t[i].in[0] = s.data[i];
        s.t[i].out[0] = s.data[i];
        s.t[i].elems = elems;
    }
    return s;
}

void gr_test_tensors_free(gr_test_tensors *s)
{
    for (uint64_t i = 0; i < s->count; i++)
        free(s->data[i]);
    free(s->data);
    free(s->t);
}

void gr_test_expect_processed(const gr_test_tensors *s, uint64_t i)
{
    uint64_t where;
    uint64_t bad = gr_workload_check_seed(s->data[i], 0, s->elems, s->seed, i, &where);

    if (bad != 0)
        GR_TEST_FAIL("index %llu: %llu wrong elements, first %llu", (unsigned long long)i,
                     (unsigned long long)bad, (unsigned long long)where);
}

void gr_test_expect_all_processed(const gr_test_tensors *s)
{
    for (uint64_t i = 0; i < s->count; i++)
        gr_test_expect_processed(s, i);
}

void gr_test_expect_untouched(const gr_test_tensors *s, uint64_t i)
{
    uint64_t where;
    uint64_t bad = gr_workload_check_input(s->data[i], 0, s->elems, s->seed, i, &where);

    if (bad != 0)
        GR_TEST_FAIL("index %llu was written: %llu changed elements, first %llu",
                     (unsigned long long)i, (unsigned long long)bad, (unsigned long long)where);
}

gr_graph *gr_test_dag_graph(void)
{
    const char *ab[] = {"a", "b"}, *d[] = {"d"}, *a[] = {"a"};
    const float two_minus_one[2] = {2.0f, -1.0f}, three = 3.0f;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "a", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "b", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "d", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "t", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load_a", 0, "a"), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load_b", 1, "b"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "diff", "axpby", ab, 2, "d", two_minus_one, 2), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "seed", "seed", d, 1, "d", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "triple", "mul", a, 1, "t", &three, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store0", "d", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store1", "t", 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load_a", "diff"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load_b", "diff"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "diff", "seed"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "seed", "store0"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load_a", "triple"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "triple", "store1"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    return g;
}

const char *gr_test_no_gpu(void)
{
    static char why[300];
    gr_error_info err;

    if (gr_backend_probe(GR_BACKEND_CUDA, NULL, NULL, &err) == GR_OK)
        return NULL;
    snprintf(why, sizeof(why), "no usable CUDA device: %s", err.message);
    return why;
}

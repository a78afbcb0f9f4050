/*
 * dryrun_test.c - gr_graph_plan_units (runtime/dryrun.c), the dry run of a job's cutting,
 * against the runtime itself on the host backend: the units it says a job takes are the
 * units a real runtime of the same config runs, its least budget is one the runtime takes
 * (and 256 bytes less is refused by gr_job_submit, for a graph that cannot be cut), and its
 * refusals are gr_job_submit's.
 */
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include "tests/testing.h"

static const char softmax_spec[] = "buffer x\nbuffer y\nh2d load: in0 -> x\n"
                                   "kernel sm: softmax(x) -> y\nd2h store: y -> out0\n";

static gr_config host_config(uint64_t budget)
{
    gr_config cfg = GR_CONFIG_INIT;

    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = budget;
    cfg.workers_per_device = 2;
    return cfg;
}

/* Run `count` tensors of elems[i] float32 elements (each its own allocation) through g on a
 * host runtime of `cfg`: the job's status; *units the iterations the device ran. */
static gr_status run_real(gr_graph *g, const gr_config *cfg, const uint64_t *elems,
                          uint64_t count, uint64_t *units)
{
    gr_tensor *t = calloc(count, sizeof(*t));
    gr_runtime *rt = NULL;
    gr_job *job = NULL;
    gr_error_info err;
    gr_device_stats ds;
    gr_status st, result = GR_OK;

    ASSERT_TRUE(t != NULL);
    ASSERT_EQ(gr_runtime_create(cfg, &rt, &err), GR_OK);
    for (uint64_t i = 0; i < count; i++) {
        t[i].elems = elems[i];
        t[i].in[0] = calloc(elems[i], sizeof(float));
        t[i].out[0] = calloc(elems[i], sizeof(float));
        ASSERT_TRUE(t[i].in[0] != NULL && t[i].out[0] != NULL);
    }
    st = gr_job_submit(rt, g, t, count, NULL, &job, &err);
    if (st == GR_OK) {
        ASSERT_EQ(gr_job_wait(job, GR_WAIT_FOREVER, &result), GR_OK);
        st = result;
        gr_job_destroy(job);
    }
    ASSERT_EQ(gr_runtime_device_stats(rt, 0, &ds), GR_OK);
    *units = ds.iterations_done;
    gr_runtime_destroy(rt);
    for (uint64_t i = 0; i < count; i++) {
        free((void *)t[i].in[0]); /* gr_tensor's in[] is const: ours to free */
        free(t[i].out[0]);
    }
    free(t);
    return st;
}

/* Chunks, batches and whole tensors, each as the runtime runs them. */
static void units_are_the_runtimes(void)
{
    /* Small ones batched, a large one chunked, medium ones whole. */
    static const uint64_t elems[] = {10, 12, 9, 30000, 700, 700, 11, 5};
    const uint64_t n = sizeof(elems) / sizeof(elems[0]);
    gr_config cfg = host_config(16 << 10);
    gr_unit_cut cut[sizeof(elems) / sizeof(elems[0])];
    gr_units_plan_info info;
    gr_error_info err;
    uint64_t real = 0;
    gr_graph *g;

    cfg.batch_below_bytes = 1024; /* tensors under 256 float32 elements are batched */
    ASSERT_EQ(gr_graph_create_seed(&g), GR_OK);
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, n, 0, cut, &info, &err), GR_OK);
    ASSERT_EQ(run_real(g, &cfg, elems, n, &real), GR_OK);
    ASSERT_EQ_U64(info.units, real);
    ASSERT_EQ(info.backend, GR_BACKEND_HOST);
    ASSERT_TRUE(info.splittable);
    ASSERT_EQ_U64(info.arena_bytes, 16 << 10);
    ASSERT_EQ_U64(cut[0].batch, 3); /* 10, 12, 9 in one batch */
    ASSERT_EQ_U64(cut[0].pieces, 1);
    ASSERT_GT_U64(cut[3].pieces, 1); /* 30000 floats do not fit a worker's 8 KiB */
    ASSERT_EQ_U64(cut[3].batch, 1);
    ASSERT_LE_U64(cut[3].largest * sizeof(float), 8 << 10); /* one buffer, in place */
    ASSERT_EQ_U64(cut[4].pieces, 1);
    ASSERT_EQ_U64(cut[4].batch, 1);
    ASSERT_EQ_U64(cut[4].largest, 700);
    ASSERT_EQ_U64(cut[6].batch, 2);
    /* The least budget is one the runtime takes, and runs the job with. */
    cfg.budget_bytes = info.least_budget;
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, n, 0, cut, &info, &err), GR_OK);
    ASSERT_EQ(run_real(g, &cfg, elems, n, &real), GR_OK);
    ASSERT_EQ_U64(info.units, real);
    gr_graph_destroy(g);
}

/* A graph that cannot be cut: its least budget is its largest iteration's, and a budget
 * below it is refused here as gr_job_submit refuses it. */
static void least_budget_of_a_graph_that_cannot_be_cut(void)
{
    static const uint64_t elems[] = {1000, 5000, 3000};
    gr_config cfg = host_config(1 << 20);
    gr_units_plan_info info;
    gr_unit_cut cut[3];
    gr_error_info err;
    uint64_t footprint = 0, real = 0;
    gr_graph *g;

    ASSERT_EQ(gr_graph_parse(softmax_spec, sizeof(softmax_spec) - 1, "sm", &g, &err), GR_OK);
    ASSERT_EQ(gr_graph_footprint(g, 5000, &footprint), GR_OK);
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, 3, 0, cut, &info, &err), GR_OK);
    ASSERT_TRUE(!info.splittable);
    ASSERT_EQ_U64(info.units, 3);
    ASSERT_EQ_U64(info.least_budget, footprint);
    ASSERT_EQ_U64(cut[1].pieces, 1);
    ASSERT_EQ_U64(cut[1].batch, 1);
    cfg.budget_bytes = info.least_budget;
    ASSERT_EQ(run_real(g, &cfg, elems, 3, &real), GR_OK);
    ASSERT_EQ_U64(real, 3);
    cfg.budget_bytes = info.least_budget - 256;
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, 3, 0, cut, &info, &err), GR_ERR_OVER_BUDGET);
    ASSERT_EQ_U64(err.index, 1);
    ASSERT_TRUE(strstr(err.message, "cannot be split") != NULL);
    ASSERT_EQ_U64(info.least_budget, footprint);
    ASSERT_EQ(run_real(g, &cfg, elems, 3, &real), GR_ERR_OVER_BUDGET);
    gr_graph_destroy(g);
}

static void refusals(void)
{
    static const uint64_t elems[] = {10, 0};
    gr_config cfg = host_config(1 << 20), bad = host_config(100);
    gr_units_plan_info info;
    gr_error_info err;
    gr_graph *g;

    ASSERT_EQ(gr_graph_create_seed(&g), GR_OK);
    ASSERT_EQ(gr_graph_plan_units(NULL, &cfg, elems, 1, 0, NULL, &info, &err),
              GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(gr_graph_plan_units(g, NULL, elems, 1, 0, NULL, &info, &err),
              GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, 1, 0, NULL, NULL, &err),
              GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(gr_graph_plan_units(g, &bad, elems, 1, 0, NULL, &info, &err),
              GR_ERR_INVALID_ARGUMENT); /* as gr_runtime_create says */
    ASSERT_TRUE(strstr(err.message, "budget") != NULL);
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, 2, 0, NULL, &info, &err),
              GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ_U64(err.index, 1);
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, 0, 0, NULL, &info, NULL), GR_OK);
    ASSERT_EQ_U64(info.units, 0);
    gr_graph_destroy(g);
}

/* A CUDA-only kernel: what a user registers without a CPU version. Never launched here. */
static void cuda_only_entry(void)
{
}

/* A kernel the backend cannot run: refused as gr_job_submit refuses it (the CLI's check
 * promises to refuse what run refuses). */
static void kernel_the_backend_cannot_run(void)
{
    static const char spec[] = "buffer x\nh2d load: in0 -> x\nkernel k: cuda_only(x) -> x\n"
                               "d2h store: x -> out0\n";
    static const uint64_t elems[] = {1000};
    gr_kernel_def def = GR_KERNEL_DEF_INIT;
    gr_config cfg = host_config(1 << 20);
    gr_units_plan_info info;
    gr_error_info err, real;
    gr_runtime *rt = NULL;
    gr_job *job = NULL;
    gr_tensor t = {{NULL}, {NULL}, 0, 0, {0}};
    float x[1000] = {0};
    gr_graph *g;

    def.name = "cuda_only";
    def.n_inputs = 1;
    def.elementwise = 1;
    def.cuda_kind = GR_CUDA_ENTRY;
    def.cuda = (const void *)cuda_only_entry;
    ASSERT_EQ(gr_kernel_register(&def, &err), GR_OK);
    ASSERT_EQ(gr_graph_parse(spec, sizeof(spec) - 1, "cuda_only", &g, &err), GR_OK);
    ASSERT_EQ(gr_graph_plan_units(g, &cfg, elems, 1, 0, NULL, &info, &err), GR_ERR_UNAVAILABLE);
    ASSERT_STR_CONTAINS(err.message, "kernel 'cuda_only' has no CPU implementation");
    ASSERT_STR_EQ(err.node, "k");
    t.in[0] = x;
    t.out[0] = x;
    t.elems = 1000;
    ASSERT_EQ(gr_runtime_create(&cfg, &rt, &real), GR_OK);
    ASSERT_EQ(gr_job_submit(rt, g, &t, 1, NULL, &job, &real), GR_ERR_UNAVAILABLE);
    ASSERT_STR_EQ(err.message, real.message);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
}

GR_TEST_MAIN(GR_TEST(units_are_the_runtimes), GR_TEST(least_budget_of_a_graph_that_cannot_be_cut),
             GR_TEST(refusals), GR_TEST(kernel_the_backend_cannot_run))

/*
 * cuda_fault_test.c - real GPU faults: a test-only kernel writes to an unmapped address,
 * a sticky error that ruins the CUDA context it runs in. SKIPs without a usable GPU.
 *
 * 1. Private contexts: the fault ruins one worker's context; that worker retires and the
 *    others keep working (what private contexts isolate, measured).
 * 2. The shared primary context (the default): the fault ruins it, the device is marked
 *    lost, running and queued work fails with GR_ERR_DEVICE_LOST within a second, new work
 *    fails at once, and destroy returns. It ruins this process's CUDA state too, so it runs
 *    last.
 */
#include <stdlib.h>

#include "graph/graph.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/tensor_set.h"
#include "tools/graphrun/workload.h"

#define MiB (1ull << 20)

static const char *no_gpu(void)
{
    static char why[300];
    gr_error_info err;

    if (gr_backend_probe(GR_BACKEND_CUDA, NULL, NULL, &err) == GR_OK)
        return NULL;
    snprintf(why, sizeof(why), "no usable CUDA device: %s", err.message);
    return why;
}

#define REQUIRE_GPU()                                                                       \
    do {                                                                                    \
        const char *why_ = no_gpu();                                                        \
        if (why_)                                                                           \
            SKIP(why_);                                                                     \
    } while (0)

static gr_graph *fault_graph(void)
{
    const char *x = "x";
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "boom", "fault", &x, 1, "x", NULL, 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "boom"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "boom", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    return g;
}

static gr_status run_fault(gr_runtime *rt, gr_graph *fg, gr_error_info *err)
{
    float *x;
    gr_tensor t;
    gr_job *job;
    gr_status st;

    ASSERT_STATUS(gr_host_alloc(1024 * 4, (void **)&x), GR_OK);
    memset(x, 0, 1024 * 4);
    t = (gr_tensor){{x}, {x}, 1024};
    ASSERT_STATUS(gr_job_submit(rt, fg, &t, 1, NULL, &job, NULL), GR_OK);
    st = gr_test_wait(job, 30ll * 1000000000);
    gr_job_error_get(job, err);
    gr_job_destroy(job);
    gr_host_free(x);
    return st;
}

static void private_context_fault_retires_one_worker(void)
{
    gr_graph *fg, *seed;
    gr_tensor_set set;
    gr_device_stats st;
    gr_error_info err;
    gr_runtime *rt;
    gr_job *job;

    REQUIRE_GPU();
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA,
                                         .workers = 3,
                                         .budget = 256 * MiB,
                                         .contexts = GR_CONTEXT_PRIVATE});
    fg = fault_graph();
    ASSERT_STATUS(run_fault(rt, fg, &err), GR_ERR_DEVICE_LOST);
    printf("    fault in a private context: %s\n", err.message);
    ASSERT_STR_CONTAINS(err.message, "cudaErrorIllegalAddress");
    ASSERT_STR_CONTAINS(err.message, "retires");
    /* The other two workers, in their own contexts, do all of the next job. */
    ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 30, 4000037, GR_MEM_PINNED, 5), GR_OK);
    gr_tensor_set_fill(&set);
    ASSERT_STATUS(gr_job_submit(rt, seed, set.tensors, 30, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 60ll * 1000000000), GR_OK);
    ASSERT_EQ_U64(gr_tensor_set_check(&set, NULL), 0);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.iterations_done, 30);
    ASSERT_EQ_U64(st.iterations_failed, 1);
    printf("    after the fault: 30 of 30 tensors done and verified by the 2 other workers\n");
    gr_job_destroy(job);
    gr_tensor_set_free(&set);
    gr_graph_destroy(seed);
    gr_graph_destroy(fg);
    gr_runtime_destroy(rt);
}

/* Last: ruins the primary context of this process. */
static void primary_context_fault_loses_device(void)
{
    gr_graph *fg, *seed;
    gr_tensor_set set;
    gr_job_progress p;
    gr_error_info err;
    gr_runtime *rt;
    gr_job *job, *late;
    int64_t fault_done, t0, destroy_ms;

    REQUIRE_GPU();
    rt = gr_test_runtime(
        (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3, .budget = 512 * MiB});
    fg = fault_graph();
    ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 200, 16 << 20, GR_MEM_PINNED, 6), GR_OK);
    gr_tensor_set_fill(&set);
    /* A long job running while another worker faults. */
    ASSERT_STATUS(gr_job_submit(rt, seed, set.tensors, 200, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(run_fault(rt, fg, &err), GR_ERR_DEVICE_LOST);
    fault_done = gr_now_ns();
    printf("    fault in the primary context: %s\n", err.message);
    ASSERT_STR_CONTAINS(err.message, "cudaErrorIllegalAddress");
    /* Every waiter wakes within a second: the long job ends (what ran before is done). */
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_DEVICE_LOST);
    printf("    running job ended %.1f ms after the fault\n",
           (double)(gr_now_ns() - fault_done) / 1e6);
    ASSERT_LT(gr_now_ns() - fault_done, 1000000000);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.failed + p.canceled, 200);
    ASSERT_GT(p.failed, 0);
    /* Outputs of indices that did not finish were never written. */
    for (uint64_t i = 0; i < 200; i++) {
        gr_index_state s;
        ASSERT_STATUS(gr_job_index_get(job, i, &s, NULL), GR_OK);
        if (s != GR_INDEX_DONE)
            ASSERT_EQ_U64(gr_workload_check_input(set.data[i], 0, set.elems, set.seed, i, NULL),
                          0);
    }
    /* New work fails at once. */
    t0 = gr_now_ns();
    ASSERT_STATUS(gr_job_submit(rt, seed, set.tensors, 10, NULL, &late, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(late, 10ll * 1000000000), GR_ERR_DEVICE_LOST);
    ASSERT_LT(gr_now_ns() - t0, 1000000000);
    gr_job_destroy(late);
    gr_job_destroy(job);
    t0 = gr_now_ns();
    gr_runtime_destroy(rt);
    destroy_ms = (gr_now_ns() - t0) / 1000000;
    printf("    %llu done before the fault, %llu failed; destroy returned in %lld ms\n",
           (unsigned long long)p.done, (unsigned long long)p.failed, (long long)destroy_ms);
    ASSERT_LT(destroy_ms, 5000);
    gr_tensor_set_free(&set);
    gr_graph_destroy(seed);
    gr_graph_destroy(fg);
}

int main(int argc, char **argv)
{
    static const gr_test_case cases[] = {
        GR_TEST(private_context_fault_retires_one_worker),
        GR_TEST(primary_context_fault_loses_device),
    };

    setenv("GR_TEST_KERNELS", "1", 1); /* the test-only "fault" kernel */
    return gr_test_run_all(cases, 2, argc, argv);
}

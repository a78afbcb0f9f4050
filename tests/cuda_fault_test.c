/*
 * cuda_fault_test.c - real GPU faults: a test-only kernel writes to an unmapped address,
 * a sticky error that ruins the CUDA context it runs in. SKIPs without a usable GPU.
 *
 * 1. Private contexts: the fault ruins one worker's context; that worker retires. Whether
 *    the other workers' contexts, and the process's primary context, keep working is
 *    measured and printed (docs/PERFORMANCE.md records it).
 * 2. The shared primary context (the default): the fault ruins it, the device is marked
 *    lost, running and queued work fails with GR_ERR_DEVICE_LOST within a second, new work
 *    fails at once, and destroy returns.
 * 3. Most of the GPU's memory held by someone else (an earlier allocation of this process,
 *    standing in for another process): a runtime whose budget cannot be reserved is refused
 *    with a clear status and message, and a running runtime keeps working in its arena.
 * 4. A tiny RLIMIT_MEMLOCK: whatever the driver does with it, staged work stays right; what
 *    the driver did (pinned allocations refused or not) is printed.
 * A fault can leave the process's CUDA state unusable, and a resource limit stays for the
 * process's life, so each case needs a process of its own: the runner gives it one
 * (testing.h; not with --no-fork, which runs them all in one). A case may take 240 s: the
 * larger ones pin and copy tens of GiB.
 */
#define GR_TEST_TIMEOUT_S 240
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "graph/graph.h"
#include "tests/fault_kernel.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/tensor_set.h"
#include "tools/graphrun/workload.h"

#define MiB (1ull << 20)

static gr_graph *fault_graph(void)
{
    gr_test_register_fault_kernel();
    return gr_test_kernel_graph("fault", 1, NULL, 0, true);
}

static gr_status run_fault(gr_runtime *rt, gr_graph *fg, gr_error_info *err)
{
    float *x;
    gr_tensor t;
    gr_job *job;
    gr_status st;

    ASSERT_STATUS(gr_host_alloc(1024 * 4, (void **)&x), GR_OK);
    memset(x, 0, 1024 * 4);
    t = (gr_tensor){{x}, {x}, 1024, 0, {0}};
    ASSERT_STATUS(gr_job_submit(rt, fg, &t, 1, NULL, &job, NULL), GR_OK);
    st = gr_test_wait(job, 30ll * 1000000000);
    gr_job_error_get(job, err);
    gr_job_destroy(job);
    gr_host_free(x);
    return st;
}

/* What a private context isolates, measured: after one worker's context faults, does the
 * rest of the runtime (the other workers' contexts) and the process (its primary context)
 * keep working? It reports what it finds; what it asserts holds either way: the fault is
 * reported as device lost naming the worker, the next job completes (no hang) with every
 * index ended, and every index reported done has the right output. */
static void private_context_fault_isolation(void)
{
    gr_graph *fg, *seed;
    gr_tensor_set set;
    gr_device_stats st;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_error_info err;
    gr_runtime *rt;
    gr_job *job;
    gr_status result;
    void *probe = NULL;
    gr_status probe_st;
    uint64_t wrong = 0;

    REQUIRE_GPU();
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA,
                                         .workers = 3,
                                         .budget = 256 * MiB,
                                         .contexts = GR_CONTEXT_PRIVATE});
    fg = fault_graph();
    ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
    /* Everything the measurement needs is allocated before the fault. */
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 30, 4000037, GR_MEM_PINNED, 5), GR_OK);
    gr_tensor_set_fill(&set);
    ASSERT_STATUS(run_fault(rt, fg, &err), GR_ERR_DEVICE_LOST);
    printf("    fault in a private context: %s\n", err.message);
    ASSERT_STR_CONTAINS(err.message, "cudaErrorIllegalAddress");
    ASSERT_STR_CONTAINS(err.message, "retires");

    ASSERT_STATUS(gr_job_submit(rt, seed, set.tensors, 30, NULL, &job, NULL), GR_OK);
    result = gr_test_wait(job, 60ll * 1000000000);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.failed + p.canceled, 30);
    for (uint64_t i = 0; i < 30; i++) {
        gr_index_state s;
        ASSERT_STATUS(gr_job_index_get(job, i, &s, NULL), GR_OK);
        if (s == GR_INDEX_DONE)
            wrong += gr_workload_check_seed(set.data[i], 0, set.elems, set.seed, i, NULL) != 0;
    }
    ASSERT_EQ_U64(wrong, 0);
    gr_job_error_get(job, &err);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    printf("    the other 2 workers after the fault: %llu of 30 tensors done and verified, "
           "%llu failed%s%s\n",
           (unsigned long long)p.done, (unsigned long long)p.failed,
           result == GR_OK ? "" : "; first error: ", result == GR_OK ? "" : err.message);
    probe_st = gr_host_alloc(1 << 20, &probe);
    printf("    the process's primary context after the fault: gr_host_alloc %s\n",
           gr_status_str(probe_st));
    gr_host_free(probe);
    gr_job_destroy(job);
    gr_tensor_set_free(&set);
    gr_graph_destroy(seed);
    gr_graph_destroy(fg);
    gr_runtime_destroy(rt);
}

/* A fault in the shared primary context while a long job runs. The fault comes from a
 * second runtime of the same process (the same primary context): within one runtime the
 * ring is FIFO, so a fault job would only run after the long job's queued tensors. */
static void primary_context_fault_loses_device(void)
{
    gr_graph *fg, *seed;
    gr_tensor_set set;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_error_info err;
    gr_runtime *rt, *other;
    gr_job *job, *late;
    int64_t fault_done, t0, destroy_ms;

    REQUIRE_GPU();
    rt = gr_test_runtime(
        (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3, .budget = 512 * MiB});
    other = gr_test_runtime(
        (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 1, .budget = 64 * MiB});
    fg = fault_graph();
    ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 400, 16 << 20, GR_MEM_PINNED, 6), GR_OK);
    gr_tensor_set_fill(&set);
    ASSERT_STATUS(gr_job_submit(rt, seed, set.tensors, 400, NULL, &job, NULL), GR_OK);
    do {
        ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    } while (p.done < 20);
    ASSERT_STATUS(run_fault(other, fg, &err), GR_ERR_DEVICE_LOST);
    fault_done = gr_now_ns();
    printf("    fault in the primary context: %s\n", err.message);
    ASSERT_STR_CONTAINS(err.message, "cudaErrorIllegalAddress");
    /* The long job's workers meet the ruined context: it ends within a second. */
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_DEVICE_LOST);
    printf("    the running job ended %.1f ms after the fault\n",
           (double)(gr_now_ns() - fault_done) / 1e6);
    ASSERT_LT(gr_now_ns() - fault_done, 1000000000);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.failed + p.canceled, 400);
    ASSERT_GE(p.done, 20);
    ASSERT_GT(p.failed, 0);
    /* Done outputs are right; outputs of indices that did not finish were never written. */
    for (uint64_t i = 0; i < 400; i++) {
        gr_index_state s;
        ASSERT_STATUS(gr_job_index_get(job, i, &s, NULL), GR_OK);
        if (s == GR_INDEX_DONE)
            ASSERT_EQ_U64(gr_workload_check_seed(set.data[i], 0, set.elems, set.seed, i, NULL), 0);
        else
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
    gr_runtime_destroy(other);
    destroy_ms = (gr_now_ns() - t0) / 1000000;
    printf("    %llu done before the fault, %llu failed; both runtimes destroyed in %lld ms\n",
           (unsigned long long)p.done, (unsigned long long)p.failed, (long long)destroy_ms);
    ASSERT_LT(destroy_ms, 5000);
    gr_tensor_set_free(&set);
    gr_graph_destroy(seed);
    gr_graph_destroy(fg);
}

/* Run the seed graph over `set` and check every output. */
static void run_and_check(gr_runtime *rt, gr_tensor_set *set)
{
    gr_error_info err;
    gr_graph *seed;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&seed), GR_OK);
    gr_tensor_set_fill(set);
    if (gr_job_submit(rt, seed, set->tensors, set->count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    ASSERT_STATUS(gr_test_wait(job, 120ll * 1000000000), GR_OK);
    ASSERT_EQ_U64(gr_tensor_set_check(set, NULL), 0);
    gr_job_destroy(job);
    gr_graph_destroy(seed);
}

static void budget_cannot_be_reserved(void)
{
    size_t free_b = 0, total_b = 0, hog_bytes;
    gr_config cfg = GR_CONFIG_INIT;
    gr_tensor_set set;
    gr_error_info err;
    gr_runtime *rt, *big;
    void *hog = NULL, *hog2 = NULL;

    REQUIRE_GPU();
    /* A runtime started before memory runs short keeps its arena. */
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 256 * MiB});
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    hog_bytes = free_b - 1024 * MiB; /* leave 1 GiB */
    ASSERT_EQ(cudaMalloc(&hog, hog_bytes), cudaSuccess);
    printf("    holding %.1f GiB of %.1f GiB; %.1f GiB left free\n", (double)hog_bytes / (1 << 30),
           (double)total_b / (1 << 30), (double)(free_b - hog_bytes) / (1 << 30));
    cfg.backend = GR_BACKEND_CUDA;
    cfg.budget_bytes = 4096 * MiB;
    ASSERT_STATUS(gr_runtime_create(&cfg, &big, &err), GR_ERR_CUDA);
    ASSERT_PTR_EQ(big, NULL);
    printf("    a 4 GiB budget: %s\n", err.message);
    ASSERT_STR_CONTAINS(err.message, "cannot reserve the budget");
    ASSERT_STR_CONTAINS(err.message, "bytes free");
    /* And the running runtime, with the rest taken as well, still works. */
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    if (free_b > 64 * MiB)
        ASSERT_EQ(cudaMalloc(&hog2, free_b - 64 * MiB), cudaSuccess);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 24, 16 << 20, GR_MEM_PINNED, 3), GR_OK);
    run_and_check(rt, &set);
    gr_tensor_set_free(&set);
    gr_runtime_destroy(rt);
    cudaFree(hog2);
    cudaFree(hog);
}

static void tiny_memlock(void)
{
    struct rlimit lim = {64 << 10, 64 << 10};
    gr_tensor_set set;
    gr_runtime *rt;
    gr_status pin;
    void *p = NULL;

    REQUIRE_GPU();
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &lim), 0);
    pin = gr_host_alloc(64 * MiB, &p);
    printf("    RLIMIT_MEMLOCK 64 KiB: gr_host_alloc(64 MiB) %s\n", gr_status_str(pin));
    gr_host_free(p);
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 256 * MiB});
    /* Pageable tensors, all staged through the workers' (pinned, if it can be had) buffers;
     * small ones batched, large ones chunked. */
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 2000, 4096, GR_MEM_PAGEABLE, 4), GR_OK);
    run_and_check(rt, &set);
    gr_tensor_set_free(&set);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 6, 40 << 20, GR_MEM_PAGEABLE, 5), GR_OK);
    run_and_check(rt, &set);
    gr_tensor_set_free(&set);
    gr_runtime_destroy(rt);
}

int main(int argc, char **argv)
{
    static const gr_test_case cases[] = {
        GR_TEST(private_context_fault_isolation),
        GR_TEST(primary_context_fault_loses_device),
        GR_TEST(budget_cannot_be_reserved),
        GR_TEST(tiny_memlock),
    };
    return gr_test_run_all(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

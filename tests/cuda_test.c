/*
 * cuda_test.c - the CUDA backend on a real GPU. Every case says SKIP where no usable CUDA
 * device is present (CI), and runs for real on the GPU machine (tools/gpu_suite).
 *
 * Every output is checked bit for bit against the C reference (kernels are written so the
 * CPU and GPU round identically), except pow with a general exponent, which is within
 * 2 ulp (CUDA's powf is not correctly rounded).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "graph/graph.h"
#include "runtime/job.h"
#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/tensor_set.h"
#include "tools/graphrun/workload.h"

#define MiB (1ull << 20)
/* Device memory the runtime may use beyond its budget, besides the process's primary
 * context: streams, events, instantiated graphs and the kernels' module (docs/
 * PERFORMANCE.md has the measured figure). */
#define STATED_OVERHEAD (32 * MiB)

static gr_runtime *cuda_runtime(uint32_t workers, uint64_t budget, gr_context_mode mode)
{
    return gr_test_runtime((gr_test_shape){
        .backend = GR_BACKEND_CUDA, .workers = workers, .budget = budget, .contexts = mode});
}

/* The same with one unit in flight a worker, whatever GR_UNITS_IN_FLIGHT says: for cases
 * that count graph instantiations (with two, each slot lowers graphs of its own). */
static gr_runtime *cuda_runtime_one_in_flight(uint32_t workers, uint64_t budget,
                                              gr_context_mode mode)
{
    return gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = workers,
                                           .budget = budget, .contexts = mode,
                                           .in_flight = "1"});
}

/* Run the seed graph over a tensor set and check every output. */
static void run_set(gr_runtime *rt, gr_tensor_set *set)
{
    gr_error_info err;
    gr_graph *g;
    gr_job *job;
    uint64_t first;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    gr_tensor_set_fill(set);
    if (gr_job_submit(rt, g, set->tensors, set->count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        gr_job_error_get(job, &err);
        GR_TEST_FAIL("job failed at index %llu, node '%s': %s: %s",
                     (unsigned long long)err.index, err.node, gr_status_str(err.status),
                     err.message);
    }
    ASSERT_EQ(gr__job_anomalies(job), 0);
    ASSERT_EQ_U64(gr_tensor_set_check(set, &first), 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
}

static void check_budget(gr_runtime *rt)
{
    gr_device_stats st;

    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_LE_U64(st.budget_peak, st.budget_bytes);
    ASSERT_EQ_U64(st.budget_in_use, 0);
}

/* Device 0's copy-node updates: the driver refused none (a refusal costs a rebuild and is
 * an API error under compute-sanitizer), at least `moved_at_least` were taken, and no more
 * than `built_at_most` graphs were instantiated. */
static void check_updates_taken(gr_runtime *rt, uint64_t moved_at_least, uint64_t built_at_most)
{
    gr_device *dev = gr__runtime_device(rt, 0, &(gr_status){GR_OK});

    ASSERT_TRUE(dev != NULL);
    ASSERT_EQ_U64(atomic_load(&dev->graph_update_refusals), 0);
    ASSERT_GE_U64(atomic_load(&dev->graph_updates), moved_at_least);
    ASSERT_LE_U64(atomic_load(&dev->graph_instantiations), built_at_most);
}

/* ------------------------------------------------------------------------------------- */

/* Each kernel through a one-kernel graph (out of place), against its CPU version. */
static void kernels_match_cpu(void)
{
    enum { N = (1 << 20) + 3 };
    static const gr_test_kernel_case cases[] = {
        {"mul", 1, {1.01f}, 1, 0},     {"add", 1, {1.01f}, 1, 0},
        {"pow", 1, {0.5f}, 1, 0},      {"pow", 1, {2.0f}, 1, 0},
        {"pow", 1, {3.0f}, 1, 2},      {"axpby", 2, {2.0f, -1.0f}, 2, 0},
        {"seed", 1, {0}, 0, 0},
    };
    gr_runtime *rt;
    float *x, *y;

    REQUIRE_GPU();
    rt = cuda_runtime(2, 64 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_host_alloc(N * 4, (void **)&x), GR_OK);
    ASSERT_STATUS(gr_host_alloc(N * 4, (void **)&y), GR_OK);
    gr_workload_fill(x, 0, N, 5, 0);
    gr_workload_fill(y, 0, N, 5, 1);
    x[0] = 0.0f;
    x[1] = 1.0f;
    x[2] = 1e-30f;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        gr_test_expect_kernel_matches_cpu(rt, &cases[c], x, y, N);
    gr_runtime_destroy(rt);
    gr_host_free(x);
    gr_host_free(y);
}

static void seed_odd_and_prime_sizes(void)
{
    const uint64_t sizes[] = {1, 2, 3, 255, 256, 257, 1021, 4099, 65537, 100003, (1 << 20) + 7};
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime(3, 64 * MiB, GR_CONTEXT_PRIMARY);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        gr_tensor_set set;
        ASSERT_STATUS(gr_tensor_set_alloc(&set, 5, sizes[i], GR_MEM_PINNED, 100 + i), GR_OK);
        run_set(rt, &set);
        gr_tensor_set_free(&set);
    }
    check_budget(rt);
    gr_runtime_destroy(rt);
}

static void seed_large_tensors(void)
{
    gr_tensor_set set;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime(3, 2048 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 6, 100000000, GR_MEM_PINNED, 7), GR_OK);
    run_set(rt, &set);
    gr_tensor_set_free(&set);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

/* Pageable, registered and pinned host memory, each in its own job and mixed in one. */
static void pageable_registered_and_pinned(void)
{
    const gr_mem_kind kinds[] = {GR_MEM_PAGEABLE, GR_MEM_REGISTERED, GR_MEM_PINNED};
    gr_tensor_set sets[3];
    gr_tensor mixed[12];
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    REQUIRE_GPU();
    rt = cuda_runtime(3, 256 * MiB, GR_CONTEXT_PRIMARY);
    for (int k = 0; k < 3; k++) {
        ASSERT_STATUS(gr_tensor_set_alloc(&sets[k], 4, 4000037, kinds[k], 30 + k), GR_OK);
        run_set(rt, &sets[k]);
    }
    /* One job mixing the three kinds: the graph is rebuilt or updated as the kinds change. */
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (int k = 0; k < 3; k++) {
        sets[k].seed += 10;
        gr_tensor_set_fill(&sets[k]);
    }
    for (int i = 0; i < 12; i++)
        mixed[i] = sets[i % 3].tensors[i / 3];
    ASSERT_STATUS(gr_job_submit(rt, g, mixed, 12, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    for (int k = 0; k < 3; k++) {
        ASSERT_EQ_U64(gr_tensor_set_check(&sets[k], NULL), 0);
        gr_tensor_set_free(&sets[k]);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

static void one_worker_and_sixteen(void)
{
    const uint32_t workers[] = {1, 16};

    REQUIRE_GPU();
    for (int w = 0; w < 2; w++) {
        gr_runtime *rt = cuda_runtime_one_in_flight(workers[w], 128 * MiB, GR_CONTEXT_PRIMARY);
        gr_tensor_set set;
        gr_device_stats st;

        ASSERT_STATUS(gr_tensor_set_alloc(&set, 64, 1000003, GR_MEM_PINNED, 40 + w), GR_OK);
        run_set(rt, &set);
        ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
        /* 4 MB tensors in pinned memory: batched by twos or so, scattered (units.h). */
        ASSERT_GT(st.iterations_done, 0);
        ASSERT_LE_U64(st.iterations_done, 64);
        /* Replay by in-place update: one instantiation per worker, at most. */
        ASSERT_LE_U64(st.graph_instantiations, workers[w]);
        ASSERT_EQ_U64(st.graph_instantiations + st.graph_updates, st.iterations_done);
        gr_tensor_set_free(&set);
        check_budget(rt);
        gr_runtime_destroy(rt);
    }
}

/* 2 MiB tensors under a 2 MiB budget (the allocation granule): 4 workers take turns. */
static void budget_fits_exactly_one_iteration(void)
{
    gr_tensor_set set;
    gr_device_stats st;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime(4, 2 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 24, 512 * 1024, GR_MEM_PINNED, 50), GR_OK);
    run_set(rt, &set);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.budget_bytes, 2 * MiB);
    ASSERT_EQ_U64(st.budget_peak, 2 * MiB);
    gr_tensor_set_free(&set);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

static void cancel_mid_job(void)
{
    gr_tensor_set set;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    REQUIRE_GPU();
    rt = cuda_runtime(2, 128 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 200, 8 << 20, GR_MEM_PINNED, 60), GR_OK);
    gr_tensor_set_fill(&set);
    ASSERT_STATUS(gr_job_submit(rt, g, set.tensors, 200, NULL, &job, NULL), GR_OK);
    do {
        ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    } while (p.done < 5);
    ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_ERR_CANCELED);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.canceled, 200);
    ASSERT_GE(p.done, 5);
    ASSERT_GT(p.canceled, 0);
    for (uint64_t i = 0; i < 200; i++) {
        gr_index_state state;
        uint64_t bad;

        ASSERT_STATUS(gr_job_index_get(job, i, &state, NULL), GR_OK);
        bad = state == GR_INDEX_DONE
                  ? gr_workload_check_seed(set.data[i], 0, set.elems, set.seed, i, NULL)
                  : gr_workload_check_input(set.data[i], 0, set.elems, set.seed, i, NULL);
        if (bad)
            GR_TEST_FAIL("index %llu (state %d): %llu wrong elements", (unsigned long long)i,
                         state, (unsigned long long)bad);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_tensor_set_free(&set);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

typedef struct submitter {
    gr_runtime *rt;
    int id;
    pthread_barrier_t *start;
    atomic_int *failures;
} submitter;

static void *submit_main(void *p)
{
    submitter *s = p;

    pthread_barrier_wait(s->start);
    for (int round = 0; round < 4; round++) {
        gr_tensor_set set;
        gr_graph *g;
        gr_job *job;
        gr_status result = GR_ERR_INTERNAL;
        uint64_t elems = 1 + (uint64_t)(s->id * 7919 + round * 104729) % 1000000;

        if (gr_tensor_set_alloc(&set, 4, elems, GR_MEM_PINNED, 1000 + s->id * 10 + round) !=
                GR_OK ||
            gr_graph_create_seed(&g) != GR_OK) {
            atomic_fetch_add(s->failures, 1);
            return NULL;
        }
        gr_tensor_set_fill(&set);
        if (gr_job_submit(s->rt, g, set.tensors, 4, NULL, &job, NULL) != GR_OK ||
            gr_job_wait(job, GR_WAIT_FOREVER, &result) != GR_OK || result != GR_OK ||
            gr_tensor_set_check(&set, NULL) != 0)
            atomic_fetch_add(s->failures, 1);
        gr_job_destroy(job);
        gr_graph_destroy(g);
        gr_tensor_set_free(&set);
    }
    return NULL;
}

static void thirty_two_submitting_threads(void)
{
    enum { THREADS = 32 };
    submitter s[THREADS];
    pthread_t th[THREADS];
    pthread_barrier_t start;
    atomic_int failures = 0;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime(4, 64 * MiB, GR_CONTEXT_PRIMARY);
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        s[i] = (submitter){rt, i, &start, &failures};
        pthread_create(&th[i], NULL, submit_main, &s[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    ASSERT_EQ(atomic_load(&failures), 0);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

/* A seed job and a two-input DAG job (out = seed(2a - b)) running at once. */
typedef struct dag_arg {
    gr_runtime *rt;
    int ok;
} dag_arg;

static void *dag_main(void *p)
{
    dag_arg *d = p;
    enum { COUNT = 16, N = 3000017 };
    const char *ab[] = {"a", "b"}, *dd[] = {"d"};
    const float s[2] = {2.0f, -1.0f};
    float *a[COUNT], *b[COUNT], *o[COUNT];
    gr_tensor t[COUNT];
    gr_status result = GR_ERR_INTERNAL;
    gr_graph *g;
    gr_job *job;

    d->ok = 0;
    if (gr_graph_create(&g) != GR_OK)
        return NULL;
    gr_graph_add_buffer(g, "a", 1, 1);
    gr_graph_add_buffer(g, "b", 1, 1);
    gr_graph_add_buffer(g, "d", 1, 1);
    gr_graph_add_h2d(g, "la", 0, "a");
    gr_graph_add_h2d(g, "lb", 1, "b");
    gr_graph_add_kernel(g, "diff", "axpby", ab, 2, "d", s, 2);
    gr_graph_add_kernel(g, "seed", "seed", dd, 1, "d", NULL, 0);
    gr_graph_add_d2h(g, "st", "d", 0);
    gr_graph_add_dep(g, "la", "diff");
    gr_graph_add_dep(g, "lb", "diff");
    gr_graph_add_dep(g, "diff", "seed");
    gr_graph_add_dep(g, "seed", "st");
    if (gr_graph_finalize(g) != GR_OK)
        return NULL;
    for (int i = 0; i < COUNT; i++) {
        gr_host_alloc(N * 4, (void **)&a[i]);
        gr_host_alloc(N * 4, (void **)&b[i]);
        gr_host_alloc(N * 4, (void **)&o[i]);
        gr_workload_fill(a[i], 0, N, 70, 2 * i);
        gr_workload_fill(b[i], 0, N, 70, 2 * i + 1);
        t[i] = (gr_tensor){{a[i], b[i]}, {o[i]}, N, 0, {0}};
    }
    if (gr_job_submit(d->rt, g, t, COUNT, NULL, &job, NULL) == GR_OK &&
        gr_job_wait(job, GR_WAIT_FOREVER, &result) == GR_OK && result == GR_OK) {
        d->ok = 1;
        for (int i = 0; i < COUNT && d->ok; i++)
            for (uint64_t j = 0; j < N; j++) {
                float ax = 2.0f * a[i][j], by = -1.0f * b[i][j], want = gr__seed_ref(ax + by);
                if (memcmp(&want, &o[i][j], 4) != 0) {
                    d->ok = 0;
                    break;
                }
            }
        gr_job_destroy(job);
    }
    for (int i = 0; i < COUNT; i++) {
        gr_host_free(a[i]);
        gr_host_free(b[i]);
        gr_host_free(o[i]);
    }
    gr_graph_destroy(g);
    return NULL;
}

static void two_templates_at_once(void)
{
    gr_tensor_set set;
    dag_arg d;
    pthread_t th;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime(4, 256 * MiB, GR_CONTEXT_PRIMARY);
    d.rt = rt;
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 16, 3000017, GR_MEM_PINNED, 80), GR_OK);
    pthread_create(&th, NULL, dag_main, &d);
    run_set(rt, &set);
    pthread_join(th, NULL);
    ASSERT_TRUE(d.ok);
    gr_tensor_set_free(&set);
    check_budget(rt);
    gr_runtime_destroy(rt);
}

/* Device memory as the device reports it: the runtime never holds more than its budget plus
 * the stated fixed overhead, also with more workers than the budget can feed at once. */
static void device_memory_stays_within_budget(void)
{
    const uint64_t budget = 256 * MiB;
    uint64_t baseline, peak, total;
    gr_devmem_sampler *s;
    gr_tensor_set set;
    gr_error_info err;
    gr_runtime *rt;

    REQUIRE_GPU();
    ASSERT_STATUS(gr_devmem_start(0, 100, &s, &err), GR_OK);
    rt = cuda_runtime(8, budget, GR_CONTEXT_PRIMARY); /* 8 workers, room for 2 at once */
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 32, 100 * MiB / 4, GR_MEM_PINNED, 90), GR_OK);
    run_set(rt, &set);
    gr_runtime_destroy(rt);
    gr_devmem_stop(s, &baseline, &peak, &total);
    printf("    device memory: baseline %.1f MiB, peak %.1f MiB: %.1f MiB above, budget %.1f MiB, "
           "overhead %.1f MiB (stated bound %.1f MiB)\n",
           baseline / 1048576.0, peak / 1048576.0, (peak - baseline) / 1048576.0,
           budget / 1048576.0, ((double)peak - baseline - budget) / 1048576.0,
           STATED_OVERHEAD / 1048576.0);
    ASSERT_LE_U64(peak - baseline, budget + STATED_OVERHEAD);
    ASSERT_GE(peak - baseline, budget); /* the arena really was there */
    gr_tensor_set_free(&set);
}

/* Private contexts: 24 pinned tensors of `elems` floats (about 40 MB) on four workers. */
static void run_private_contexts(uint64_t elems)
{
    gr_tensor_set set;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = cuda_runtime_one_in_flight(4, 256 * MiB, GR_CONTEXT_PRIVATE);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 24, elems, GR_MEM_PINNED, 95), GR_OK);
    run_set(rt, &set);
    gr_tensor_set_free(&set);
    check_budget(rt);
    /* In a private context the driver moves a graph's copies once per instantiation and
     * refuses the next move: the backend rebuilds for it without asking (lowering.h:
     * copies_move_once), so every other move is taken. A worker of k of the 24 tensors
     * (one unit each: 40 MB fits a worker's 64 MiB share and the 128 MiB pipeline cut)
     * moves its graph k - 1 times, ceil((k - 1) / 2) of them in place, and instantiates it
     * 1 + floor((k - 1) / 2) times: over w <= 4 workers at least (24 - w) / 2 >= 10 moves
     * in place and at most w + (24 - w) / 2 <= 14 instantiations, however they shared the
     * tensors (more would be rebuilds the rule does not need). */
    check_updates_taken(rt, 10, 14);
    gr_runtime_destroy(rt);
}

static void private_contexts(void)
{
    run_private_contexts(10000019);
}

/* The same with tensors of exactly 40 MiB, so that every unit's arena block starts on a
 * 2 MiB granule of the region: at the odd size the blocks lie back to back at 256 bytes
 * and neighbours, often other workers' units in other contexts, share a granule. The reads
 * initcheck flags in private_contexts lie near a block's start (docs/RELIABILITY.md): the
 * two cases under the tool tell whether the shared granules are what it loses track of. */
static void private_contexts_granule_blocks(void)
{
    run_private_contexts(40 * MiB / 4);
}

/* Two units in flight on one worker: each slot lowers a graph of its own, since the driver
 * orders one graph's launches one after another, so that with one graph between them the
 * second unit's copies in would wait for the first's copies out. 16 tensors of 4 MiB, each
 * a unit of its own with its copies in the graph (whole_tensors: split_tensors = 0, no
 * planning into batches), one template: exactly two instantiations (one a slot), the other
 * 14 units updates in place, units launched under another, every output right. */
static void two_units_in_flight_have_graphs_of_their_own(void)
{
    gr_tensor_set set;
    gr_stats st = GR_STATS_INIT;
    gr_runtime *rt;
    gr_device *dev;

    REQUIRE_GPU();
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 1,
                                         .budget = 64 * MiB, .whole_tensors = true,
                                         .in_flight = "2"});
    ASSERT_EQ_U64(gr__runtime_get(rt, &(gr_status){GR_OK})->workers[0].in_flight, 2);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 16, MiB, GR_MEM_PINNED, 97), GR_OK);
    run_set(rt, &set);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.iterations_done, 16);
    ASSERT_GT(st.units_overlapped, 0);
    check_updates_taken(rt, 14, 2);
    dev = gr__runtime_device(rt, 0, &(gr_status){GR_OK});
    ASSERT_EQ_U64(atomic_load(&dev->graph_instantiations), 2);
    ASSERT_EQ_U64(atomic_load(&dev->graph_updates), 14);
    gr_tensor_set_free(&set);
    gr_runtime_destroy(rt);
}

/* Private contexts with staged units (pageable tensors are gathered into each worker's
 * pinned staging buffer, allocated on the worker's thread while its private context is
 * current). Destroy gives those buffers back; several runtimes in turn, every output
 * checked, so a crash or a double free at destroy fails here. */
static void private_contexts_with_staging(void)
{
    REQUIRE_GPU();
    for (int round = 0; round < 3; round++) {
        gr_tensor_set set;
        gr_runtime *rt = cuda_runtime(2, 64 * MiB, GR_CONTEXT_PRIVATE);
        gr_runtime *in = gr__runtime_get(rt, &(gr_status){GR_OK});
        gr_stats st = GR_STATS_INIT;
        uint32_t staged = 0;

        ASSERT_STATUS(gr_tensor_set_alloc(&set, 8, 1000003, GR_MEM_PAGEABLE, 40 + round),
                      GR_OK);
        run_set(rt, &set);
        for (uint32_t i = 0; i < in->n_workers; i++)
            staged += in->workers[i].staging != NULL && !in->workers[i].staging_pageable;
        ASSERT_GT(staged, 0); /* the case is about pinned staging buffers */
        ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
        ASSERT_GT(st.units_staged, 0); /* and units that went through them */
        check_updates_taken(rt, 0, UINT64_MAX);
        gr_tensor_set_free(&set);
        gr_runtime_destroy(rt);
    }
}

/* Small tensors each in their own pinned allocation: batched, and copied by the DMA
 * engine where each lies (cudaMemcpyBatchAsync, no CPU gather); one batch whose first
 * tensor is pinned and the others pageable is copied right too (the driver takes the
 * pageable ones its slow way). Every output checked; the statistics say which path ran. */
static void separate_tensors_scattered_by_dma(void)
{
    gr_runtime *rt;
    gr_tensor_set set;
    gr_stats st = GR_STATS_INIT;

    REQUIRE_GPU();
    rt = cuda_runtime(3, 64 * MiB, GR_CONTEXT_PRIMARY);
    /* 36 KB each: over GR_SCATTER_FROM_BYTES, under which the CPU gathers them. */
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 1000, 9001, GR_MEM_PINNED, 71), GR_OK);
    run_set(rt, &set);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_GT(st.units_scattered, 0);
    ASSERT_EQ_U64(st.units_staged, 0);
    gr_tensor_set_free(&set);

    /* Pinned, then pageable, all in one batch. */
    {
        enum { N = 64, E = 10000 };
        float *mem[N];
        gr_tensor t[N];
        gr_error_info err;
        gr_graph *g;
        gr_job *job;

        for (int i = 0; i < N; i++) {
            if (i == 0)
                ASSERT_STATUS(gr_host_alloc(E * sizeof(float), (void **)&mem[i]), GR_OK);
            else
                mem[i] = malloc(E * sizeof(float));
            gr_workload_fill(mem[i], 0, E, 9, (uint64_t)i);
            t[i] = (gr_tensor){{mem[i]}, {mem[i]}, E, 0, {0}};
        }
        ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
        ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, &err), GR_OK);
        ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
        gr_job_destroy(job);
        for (int i = 0; i < N; i++) {
            ASSERT_EQ_U64(gr_workload_check_seed(mem[i], 0, E, 9, (uint64_t)i, NULL), 0);
            if (i == 0)
                gr_host_free(mem[i]);
            else
                free(mem[i]);
        }
        gr_graph_destroy(g);
    }
    check_budget(rt);
    gr_runtime_destroy(rt);

}

/* GR_BATCH_COPIES=0 (read once per process: set here, in this case's own process, before
 * any runtime): the same separate tensors are staged instead, with the same results. */
static void separate_tensors_staged_without_batch_copies(void)
{
    gr_runtime *rt;
    gr_tensor_set set;
    gr_stats st = GR_STATS_INIT;

    REQUIRE_GPU();
    setenv("GR_BATCH_COPIES", "0", 1);
    rt = cuda_runtime(3, 64 * MiB, GR_CONTEXT_PRIMARY);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, 1000, 9001, GR_MEM_PINNED, 72), GR_OK);
    run_set(rt, &set);
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    ASSERT_GT(st.units_staged, 0);
    ASSERT_EQ_U64(st.units_scattered, 0);
    gr_tensor_set_free(&set);
    gr_runtime_destroy(rt);
}

static void stats_now(gr_runtime *rt, gr_stats *st)
{
    *st = (gr_stats)GR_STATS_INIT;
    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, st), GR_OK);
}

/* The registration cache (gr_config.host_cache_bytes) with cudaHostRegister: the first job
 * over pageable tensors is staged while they are registered beside it, the next copies
 * them by DMA, gr_host_forget unregisters them, and destroy leaves nothing registered. */
static void host_cache_registers_pageable_tensors_used_again(void)
{
    enum { N = 6, E = 4000037 };
    gr_config cfg = GR_CONFIG_INIT;
    struct cudaPointerAttributes a;
    gr_stats s1, s2, s3;
    gr_tensor_set set;
    gr_runtime *rt;
    int waited = 0;

    REQUIRE_GPU();
    cfg.backend = GR_BACKEND_CUDA;
    cfg.budget_bytes = 256 * MiB;
    cfg.host_cache_bytes = 256 * MiB;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, NULL), GR_OK);
    ASSERT_STATUS(gr_tensor_set_alloc(&set, N, E, GR_MEM_PAGEABLE, 81), GR_OK);
    run_set(rt, &set);
    stats_now(rt, &s1);
    ASSERT_GT(s1.units_staged, 0);
    ASSERT_EQ_U64(s1.host_cache_hits, 0);
    while (s1.host_cache_registrations < N && waited++ < 1000) { /* 10 s at most */
        struct timespec ts = {0, 10000000};

        nanosleep(&ts, NULL);
        stats_now(rt, &s1);
    }
    ASSERT_EQ_U64(s1.host_cache_registrations, N);
    ASSERT_EQ_U64(s1.host_cache_failures, 0);
    ASSERT_GE_U64(s1.host_cache_bytes, (uint64_t)N * E * sizeof(float));
    ASSERT_GT(s1.host_cache_register_ns, 0);

    run_set(rt, &set); /* every tensor registered: nothing staged */
    stats_now(rt, &s2);
    ASSERT_EQ_U64(s2.units_staged, s1.units_staged);
    ASSERT_GT(s2.units_direct + s2.units_scattered, s1.units_direct + s1.units_scattered);
    ASSERT_EQ_U64(s2.host_cache_hits, N);

    for (int i = 0; i < N; i++)
        ASSERT_STATUS(gr_host_forget(rt, set.tensors[i].in[0], E * sizeof(float)), GR_OK);
    stats_now(rt, &s3);
    ASSERT_EQ_U64(s3.host_cache_bytes, 0);
    ASSERT_EQ(cudaPointerGetAttributes(&a, set.tensors[0].in[0]), cudaSuccess);
    ASSERT_TRUE(a.type != cudaMemoryTypeHost);

    run_set(rt, &set); /* staged again, and registered again beside it */
    check_budget(rt);
    gr_runtime_destroy(rt);
    for (int i = 0; i < N; i++) { /* destroy unregistered what the cache held */
        ASSERT_EQ(cudaPointerGetAttributes(&a, set.tensors[i].in[0]), cudaSuccess);
        ASSERT_TRUE(a.type != cudaMemoryTypeHost);
    }
    gr_tensor_set_free(&set);
}

/* One registration cache per process: a second runtime asking for one is refused, one
 * without is made (and asks the first one's cache about host memory). */
static void host_cache_one_per_process(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_runtime *a, *b = NULL;
    gr_error_info err;

    REQUIRE_GPU();
    cfg.backend = GR_BACKEND_CUDA;
    cfg.budget_bytes = 64 * MiB;
    cfg.host_cache_bytes = 64 * MiB;
    ASSERT_STATUS(gr_runtime_create(&cfg, &a, NULL), GR_OK);
    ASSERT_STATUS(gr_runtime_create(&cfg, &b, &err), GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(err.message, "one per process");
    cfg.host_cache_bytes = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &b, NULL), GR_OK);
    gr_runtime_destroy(b);
    gr_runtime_destroy(a);
    cfg.host_cache_bytes = 64 * MiB; /* the first one's gone: a cache again */
    ASSERT_STATUS(gr_runtime_create(&cfg, &a, NULL), GR_OK);
    gr_runtime_destroy(a);
}

/* The caller's current device is left as it was by runtime create and destroy. */
static void caller_device_untouched(void)
{
    int n = 0, before = -1, after = -1;
    gr_runtime *rt;

    REQUIRE_GPU();
    cudaGetDeviceCount(&n);
    cudaSetDevice(n - 1);
    cudaGetDevice(&before);
    rt = cuda_runtime(2, 16 * MiB, GR_CONTEXT_PRIMARY);
    cudaGetDevice(&after);
    ASSERT_EQ(after, before);
    gr_runtime_destroy(rt);
    cudaGetDevice(&after);
    ASSERT_EQ(after, before);
}

GR_TEST_MAIN(GR_TEST(kernels_match_cpu), GR_TEST(host_cache_registers_pageable_tensors_used_again),
             GR_TEST(host_cache_one_per_process), GR_TEST(seed_odd_and_prime_sizes),
             GR_TEST(seed_large_tensors), GR_TEST(pageable_registered_and_pinned),
             GR_TEST(one_worker_and_sixteen), GR_TEST(budget_fits_exactly_one_iteration),
             GR_TEST(cancel_mid_job), GR_TEST(thirty_two_submitting_threads),
             GR_TEST(two_templates_at_once), GR_TEST(device_memory_stays_within_budget),
             GR_TEST(private_contexts), GR_TEST(private_contexts_granule_blocks),
             GR_TEST(private_contexts_with_staging),
             GR_TEST(two_units_in_flight_have_graphs_of_their_own),
             GR_TEST(separate_tensors_scattered_by_dma),
             GR_TEST(separate_tensors_staged_without_batch_copies),
             GR_TEST(caller_device_untouched))

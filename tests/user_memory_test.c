/*
 * user_memory_test.c - jobs over host memory laid out as users allocate it, on the host
 * backend, every output checked against the seed workload's CPU reference.
 *
 * The CUDA driver refuses a copy that runs from one allocation into the next, even where
 * the two lie back to back: two cudaHostAlloc calls, PyTorch's pin_memory() blocks. The host
 * backend holds the runtime to the same rule once a test marks its allocations
 * (runtime/host/host.h), so these cases fail where the planner copies tensors of two
 * allocations as one range, as it did when it only asked whether they were adjacent:
 *   - tensors each in an allocation of its own, back to back, at several sizes, alone and
 *     beside tensors of one shared allocation, pageable ones apart, pooled ones, and chunks;
 *   - tensors of one allocation still go direct in batches (a contiguous array keeps its
 *     one copy), and no batch over allocations of a few tensors each crosses their edges;
 *   - a copy the driver refuses anyway (one tensor over two allocations; the "copy" fault
 *     site) never fails the work: the unit runs again through the staging buffer, counted
 *     in gr_stats.copies_refused.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "runtime/hostcache.h"
#include "runtime/host/host.h"
#include "runtime/job.h"
#include "runtime/units.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

#define SEED 33
#define JOB(handle) gr__job_from_handle(handle)

/* `count` in-place tensors of `elems` floats, back to back in one slab, filled with the seed
 * workload's inputs; the tensors [k * per, (k + 1) * per) are marked as allocation k (per 0:
 * nothing marked). */
typedef struct slab {
    float *base;
    gr_tensor *t;
    uint64_t count, elems;
} slab;

static slab make_slab(uint64_t count, uint64_t elems, uint64_t per)
{
    slab s = {malloc(count * elems * sizeof(float)), calloc(count, sizeof(gr_tensor)), count,
              elems};

    ASSERT_TRUE(s.base != NULL && s.t != NULL);
    for (uint64_t i = 0; i < count; i++) {
        float *x = s.base + i * elems;

        gr_workload_fill(x, 0, elems, SEED, i);
        s.t[i] = (gr_tensor){{x}, {x}, elems, 0, {0}};
    }
    for (uint64_t k = 0; per != 0 && k * per < count; k++) {
        uint64_t n = count - k * per < per ? count - k * per : per;

        ASSERT_STATUS(gr__host_mark_allocation(s.base + k * per * elems,
                                               n * elems * sizeof(float)),
                      GR_OK);
    }
    return s;
}

static void free_slab(slab *s)
{
    free(s->base);
    free(s->t);
}

static void expect_seed(const gr_tensor *t, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        uint64_t where, bad = gr_workload_check_seed(t[i].out[0], 0, t[i].elems, SEED, i,
                                                     &where);
        if (bad)
            GR_TEST_FAIL("index %llu (%llu elements): %llu wrong, first at %llu",
                         (unsigned long long)i, (unsigned long long)t[i].elems,
                         (unsigned long long)bad, (unsigned long long)where);
    }
}

static gr_stats stats_of(gr_runtime *rt)
{
    gr_stats st = GR_STATS_INIT;

    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    return st;
}

/* Runs the seed over t[0 .. count) on rt; the job must succeed. Returns the job, still to be
 * destroyed, for the checks of its units. */
static gr_job *run_seed(gr_runtime *rt, gr_graph *g, gr_tensor *t, uint64_t count)
{
    gr_error_info err;
    gr_job *job;

    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        ASSERT_STATUS(gr_job_error_get(job, &err), GR_OK);
        GR_TEST_FAIL("job failed: index %llu, node '%s': %s", (unsigned long long)err.index,
                     err.node, err.message);
    }
    ASSERT_EQ(gr__job_anomalies(job), 0);
    expect_seed(t, count);
    return job;
}

/* Units of `job` that copy one range of several tensors (direct batches): how many, and
 * that none of them runs over the edge of a group of `per` tensors (each group one
 * allocation; per 0: no edges). */
static uint64_t direct_batches(gr_job *job, uint64_t per)
{
    const gr_job *j = JOB(job);
    uint64_t n = 0;

    for (uint64_t k = 0; k < j->n_units; k++) {
        const gr_unit *u = &j->units[k];

        if (u->staged || u->scattered || u->tensors < 2)
            continue;
        n++;
        if (per != 0 && u->index / per != (u->index + u->tensors - 1) / per)
            GR_TEST_FAIL("unit %llu copies tensors %llu..%llu as one range, over the edge of "
                         "an allocation of %llu tensors",
                         (unsigned long long)k, (unsigned long long)u->index,
                         (unsigned long long)(u->index + u->tensors - 1),
                         (unsigned long long)per);
    }
    return n;
}

/* One job per size, each tensor its own allocation, back to back; then the same tensors
 * in one allocation: batched direct, as a contiguous array should be. */
static void back_to_back_allocations(void)
{
    static const uint64_t sizes[] = {4 << 10, 16 << 10, 64 << 10}; /* floats: 16-256 KiB */
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 8 << 20});
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int shared = 0; shared < 2; shared++) {
            uint64_t count = (4u << 20) / sizes[k];
            slab s = make_slab(count, sizes[k], shared ? count : 1);
            gr_job *job = run_seed(rt, g, s.t, count);

            if (shared)
                ASSERT_GT(direct_batches(job, 0), 0);
            else
                ASSERT_EQ(direct_batches(job, 1), 0);
            gr_job_destroy(job);
            gr__host_clear_allocations();
            free_slab(&s);
        }
    }
    ASSERT_EQ_U64(stats_of(rt).copies_refused, 0);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* Allocations of five tensors each, back to back: no batch copies a range over an edge
 * (the batch that meets one is gathered through staging instead, on this backend, or
 * scattered where the backend copies tensors where they lie). */
static void batches_never_cross_allocation_edges(void)
{
    enum { COUNT = 600, ELEMS = 3000, PER = 5 };
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 4 << 20});
    slab s = make_slab(COUNT, ELEMS, PER);
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = run_seed(rt, g, s.t, COUNT);
    direct_batches(job, PER);
    ASSERT_EQ_U64(stats_of(rt).copies_refused, 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free_slab(&s);
}

/* One job of every origin: tensors in allocations of their own back to back, rows of one
 * shared allocation, malloc'd tensors apart, pool blocks (gr_host_alloc), and tensors larger
 * than a worker's share of the budget (chunks). */
static void every_origin_in_one_job(void)
{
    enum { OWN = 120, ROWS = 120, APART = 60, POOLED = 60, LARGE = 4 };
    enum { COUNT = OWN + ROWS + APART + POOLED + LARGE, E = 2000, BIG = 300000 };
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 1 << 20});
    slab own = make_slab(OWN, E, 1), rows = make_slab(ROWS, E, ROWS);
    gr_tensor *t = calloc(COUNT, sizeof(*t));
    float *apart[APART], *pooled[POOLED], *large[LARGE];
    uint64_t n = 0, from_own = 0, from_rows = 0, from_apart = 0, from_pooled = 0,
             from_large = 0;
    gr_graph *g;
    gr_job *job;

    ASSERT_TRUE(t != NULL);
    for (uint64_t i = 0; i < APART; i++)
        ASSERT_TRUE((apart[i] = malloc(E * sizeof(float))) != NULL);
    for (uint64_t i = 0; i < POOLED; i++)
        ASSERT_STATUS(gr_host_alloc(E * sizeof(float), (void **)&pooled[i]), GR_OK);
    for (uint64_t i = 0; i < LARGE; i++)
        ASSERT_TRUE((large[i] = malloc(BIG * sizeof(float))) != NULL);
    /* Runs of up to ten from each origin in turn (a run of one allocation's rows or of back
     * to back allocations is what the planner could copy as one range); each index gets its
     * own inputs. */
    for (uint64_t run = 0; n < COUNT; run++) {
        for (uint64_t k = 0; k < 10 && n < COUNT; k++) {
            uint64_t elems = E;
            float *x;

            if (run % 5 == 0 && from_own < OWN)
                x = own.base + E * from_own++;
            else if (run % 5 == 1 && from_rows < ROWS)
                x = rows.base + E * from_rows++;
            else if (run % 5 == 2 && from_apart < APART)
                x = apart[from_apart++];
            else if (run % 5 == 3 && from_pooled < POOLED)
                x = pooled[from_pooled++];
            else if (run % 5 == 4 && from_large < LARGE)
                x = large[from_large++], elems = BIG;
            else
                break; /* this origin is used up: the next run's */
            gr_workload_fill(x, 0, elems, SEED, n);
            t[n] = (gr_tensor){{x}, {x}, elems, 0, {0}};
            n++;
        }
    }
    ASSERT_EQ_U64(from_own + from_rows + from_apart + from_pooled + from_large, COUNT);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = run_seed(rt, g, t, COUNT);
    ASSERT_EQ_U64(stats_of(rt).copies_refused, 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    for (uint64_t i = 0; i < APART; i++)
        free(apart[i]);
    for (uint64_t i = 0; i < POOLED; i++)
        gr_host_free(pooled[i]);
    for (uint64_t i = 0; i < LARGE; i++)
        free(large[i]);
    free(t);
    free_slab(&own);
    free_slab(&rows);
}

/* Each tensor lies over two allocations (its halves marked apart): no planner can copy it
 * as one range, and the driver refuses it. It runs staged instead, every one done. */
static void tensor_over_two_allocations_runs_staged(void)
{
    enum { COUNT = 8, ELEMS = 400000 }; /* 1.6 MB: one unit each, not batched */
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 16 << 20});
    slab s = make_slab(COUNT, ELEMS, 0);
    gr_stats st;
    gr_graph *g;
    gr_job *job;

    for (uint64_t i = 0; i < COUNT; i++) {
        const char *x = s.t[i].in[0];

        ASSERT_STATUS(gr__host_mark_allocation(x, ELEMS * 2), GR_OK);
        ASSERT_STATUS(gr__host_mark_allocation(x + ELEMS * 2, ELEMS * 2), GR_OK);
    }
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = run_seed(rt, g, s.t, COUNT);
    st = stats_of(rt);
    ASSERT_EQ_U64(st.copies_refused, COUNT);
    ASSERT_EQ_U64(st.units_staged, COUNT);
    ASSERT_EQ_U64(st.tensors_done, COUNT);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free_slab(&s);
}

/* The "copy" fault site refuses copies the planner made right: the first one only, then
 * every one from the third on (the first unit's two pass). Every index is done; the refused
 * units ran staged. One worker, so that which unit makes which call is known. */
static void refused_copies_never_fail_the_job(void)
{
    static const char *const plans[] = {"copy:1", "copy:3+"};

    for (size_t k = 0; k < sizeof(plans) / sizeof(plans[0]); k++) {
        enum { COUNT = 3000, ELEMS = 300 };
        gr_config cfg = GR_CONFIG_INIT;
        slab s = make_slab(COUNT, ELEMS, COUNT); /* rows of one allocation: direct batches */
        gr_error_info err;
        gr_runtime *rt;
        gr_stats st;
        gr_graph *g;
        gr_job *job;

        cfg.backend = GR_BACKEND_HOST;
        cfg.workers_per_device = 1;
        cfg.budget_bytes = 1 << 20;
        gr_testing_set_fault_plan(&cfg, plans[k]);
        if (gr_runtime_create(&cfg, &rt, &err) != GR_OK)
            GR_TEST_FAIL("create: %s", err.message);
        ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
        job = run_seed(rt, g, s.t, COUNT);
        st = stats_of(rt);
        ASSERT_GT(JOB(job)->n_units, 2);
        if (k == 0)
            ASSERT_EQ_U64(st.copies_refused, 1);
        else
            ASSERT_EQ_U64(st.copies_refused + 1, JOB(job)->n_units);
        ASSERT_EQ_U64(st.units_staged, st.copies_refused);
        gr_job_destroy(job);
        gr_graph_destroy(g);
        gr_runtime_destroy(rt);
        gr__host_clear_allocations();
        free_slab(&s);
    }
}

/* The memory the emulated registration cache calls pinned (the rest is pageable to it, as
 * the CUDA driver would call a malloc'd range): [pinned_lo, pinned_hi). */
static uintptr_t pinned_lo, pinned_hi;

static gr_status fake_pin(void *p, uint64_t bytes)
{
    (void)p;
    (void)bytes;
    return GR_OK;
}

static gr_status fake_unpin(void *p)
{
    (void)p;
    return GR_OK;
}

static bool fake_dma_ready(const void *p)
{
    return (uintptr_t)p >= pinned_lo && (uintptr_t)p < pinned_hi;
}

/* Whole tensors of a graph that cannot be cut (softmax per row), in memory that is not
 * DMA-ready (an emulated registration cache says which is: gr__host_cache_emulate), are
 * streamed through the worker's staging buffer in pieces (64 KiB a buffer: parts of
 * 16 KiB, so a 400 KB tensor goes in 25 around the four parts), one with a "pinned" input
 * copied as it lies: every output equals the CPU softmax's, bit for bit, every input is
 * untouched, and the statistics count each unit streamed. */
static void pageable_whole_tensors_are_streamed(void)
{
    static const uint64_t shapes[][2] = {{100, 1000}, {37, 1001}, {1, 70001}, {3, 5},
                                         {100, 1000}};
    enum { T = sizeof(shapes) / sizeof(shapes[0]), MIXED = 4 };
    static const gr_host_cache_ops ops = {fake_pin, fake_unpin, fake_dma_ready};
    static const char spec[] = "buffer x\nbuffer y\nh2d l: in0 -> x\n"
                               "kernel k: softmax(x) -> y\nd2h s: y -> out0\nl -> k -> s\n";
    const gr_kernel *sm = gr__kernel_find("softmax");
    gr_config cfg = GR_CONFIG_INIT;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_error_info err;
    gr_tensor t[T];
    float *x[T], *y[T];
    gr_stats st;

    ASSERT_TRUE(sm != NULL);
    cfg.backend = GR_BACKEND_HOST;
    cfg.workers_per_device = 2;
    cfg.budget_bytes = 16 << 20;
    cfg.staging_bytes = 64 << 10;
    cfg.host_cache_bytes = 64 << 20;
    gr__host_cache_emulate(&ops);
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    gr__host_cache_emulate(NULL); /* read at create */
    ASSERT_STATUS(gr_graph_parse(spec, strlen(spec), "softmax", &g, &err), GR_OK);
    for (int k = 0; k < T; k++) {
        uint64_t e = shapes[k][0] * shapes[k][1];

        x[k] = malloc(e * sizeof(float));
        y[k] = malloc(e * sizeof(float));
        ASSERT_TRUE(x[k] != NULL && y[k] != NULL);
        gr_workload_fill(x[k], 0, e, SEED, (uint64_t)k);
        for (uint64_t i = 0; i < e; i++)
            x[k][i] = x[k][i] * 20.0f - 10.0f;
        memset(y[k], 0xff, e * sizeof(float)); /* NaN: every element must be written */
        t[k] = (gr_tensor){{x[k]}, {y[k]}, e, 2, {shapes[k][0], shapes[k][1]}};
    }
    pinned_lo = (uintptr_t)x[MIXED];
    pinned_hi = pinned_lo + shapes[MIXED][0] * shapes[MIXED][1] * sizeof(float);
    if (gr_job_submit(rt, g, t, T, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        ASSERT_STATUS(gr_job_error_get(job, &err), GR_OK);
        GR_TEST_FAIL("job failed: index %llu: %s", (unsigned long long)err.index, err.message);
    }
    gr_job_destroy(job);
    st = stats_of(rt);
    ASSERT_EQ_U64(st.units_streamed, T);
    ASSERT_EQ_U64(st.units_direct + st.units_staged + st.units_scattered, 0);
    for (int k = 0; k < T; k++) {
        uint64_t e = shapes[k][0] * shapes[k][1];
        float *want = malloc(e * sizeof(float)), *in = malloc(e * sizeof(float));
        gr_kernel_args a = {.out = want, .in = {x[k]}, .n = e, .in_n = {e},
                            .shape = {shapes[k][0], shapes[k][1]}, .rank = 2};

        ASSERT_TRUE(want != NULL && in != NULL);
        sm->def.cpu(&a, NULL);
        if (memcmp(y[k], want, e * sizeof(float)) != 0)
            GR_TEST_FAIL("tensor %d: the output differs from the CPU softmax's", k);
        gr_workload_fill(in, 0, e, SEED, (uint64_t)k);
        for (uint64_t i = 0; i < e; i++)
            in[i] = in[i] * 20.0f - 10.0f;
        if (memcmp(x[k], in, e * sizeof(float)) != 0)
            GR_TEST_FAIL("tensor %d: the input changed", k);
        free(want);
        free(in);
        free(x[k]);
        free(y[k]);
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

GR_TEST_MAIN(GR_TEST(back_to_back_allocations), GR_TEST(batches_never_cross_allocation_edges),
             GR_TEST(every_origin_in_one_job), GR_TEST(tensor_over_two_allocations_runs_staged),
             GR_TEST(refused_copies_never_fail_the_job),
             GR_TEST(pageable_whole_tensors_are_streamed))

/*
 * cuda_user_memory_test.c - jobs over host memory as users bring it, on a real GPU: one
 * cudaHostAlloc per tensor (back to back, as the driver places them), cudaMallocHost,
 * malloc'd pieces each registered on its own (back to back by construction), graphrun's
 * pool, pageable memory, and all of them in one job. Every output is checked bit for bit
 * against the seed workload's CPU reference. SKIP without a usable GPU.
 *
 * The driver refuses a copy that runs from one allocation into the next, however they lie
 * (cudaErrorInvalidValue); the planner asks the backend where each allocation ends
 * (gr_backend_ops.host_span) and copies no range over an edge, and a copy refused anyway
 * runs again staged (gr_stats.copies_refused). host_span_of_each_origin checks the spans
 * themselves against what each allocator was asked for.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/backend.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

#define SEED 44
#define KiB (1ull << 10)
#define MiB (1ull << 20)

typedef enum origin {
    HOST_ALLOC,     /* cudaHostAlloc, one per tensor */
    MALLOC_HOST,    /* cudaMallocHost, one per tensor */
    REGISTERED,     /* pieces of one mapping, each gr_host_register'd on its own */
    POOLED,         /* gr_host_alloc */
    PAGEABLE,       /* malloc */
} origin;

static const char *const origin_names[] = {"cudaHostAlloc", "cudaMallocHost",
                                           "registered pieces", "gr_host_alloc", "malloc"};

/* `count` tensors of `bytes` each from one origin. */
typedef struct tensors {
    origin from;
    uint64_t count, bytes;
    float **x;
    void *mapping; /* REGISTERED: the one mapping the pieces are cut from */
} tensors;

static tensors make(origin from, uint64_t count, uint64_t bytes)
{
    tensors s = {from, count, bytes, calloc(count, sizeof(float *)), NULL};

    ASSERT_TRUE(s.x != NULL);
    if (from == REGISTERED) {
        s.mapping = mmap(NULL, count * bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_TRUE(s.mapping != MAP_FAILED);
    }
    for (uint64_t i = 0; i < count; i++) {
        void *p = NULL;

        switch (from) {
        case HOST_ALLOC:
            ASSERT_EQ(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), cudaSuccess);
            break;
        case MALLOC_HOST:
            ASSERT_EQ(cudaMallocHost(&p, bytes), cudaSuccess);
            break;
        case REGISTERED:
            p = (char *)s.mapping + i * bytes;
            ASSERT_STATUS(gr_host_register(p, bytes), GR_OK);
            break;
        case POOLED:
            ASSERT_STATUS(gr_host_alloc(bytes, &p), GR_OK);
            break;
        case PAGEABLE:
            p = malloc(bytes);
            ASSERT_TRUE(p != NULL);
            break;
        }
        s.x[i] = p;
    }
    return s;
}

static void release(tensors *s)
{
    for (uint64_t i = 0; i < s->count; i++) {
        switch (s->from) {
        case HOST_ALLOC:
        case MALLOC_HOST:
            ASSERT_EQ(cudaFreeHost(s->x[i]), cudaSuccess);
            break;
        case REGISTERED:
            ASSERT_STATUS(gr_host_unregister(s->x[i]), GR_OK);
            break;
        case POOLED:
            gr_host_free(s->x[i]);
            break;
        case PAGEABLE:
            free(s->x[i]);
            break;
        }
    }
    if (s->mapping != NULL)
        munmap(s->mapping, s->count * s->bytes);
    free(s->x);
}

/* How many of the tensors start right where the one before ends: the layout that a planner
 * blind to allocations copies as one range. */
static uint64_t back_to_back(const tensors *s)
{
    uint64_t n = 0;

    for (uint64_t i = 1; i < s->count; i++)
        n += (char *)s->x[i - 1] + s->bytes == (char *)s->x[i];
    return n;
}

static gr_stats stats_of(gr_runtime *rt)
{
    gr_stats st = GR_STATS_INIT;

    ASSERT_STATUS(gr_runtime_stats_get(rt, 0, &st), GR_OK);
    return st;
}

/* The seed over every tensor of sets[0 .. n) in one job, in order; every output checked. */
static void run_seed(gr_runtime *rt, tensors *sets, size_t n)
{
    uint64_t count = 0, k = 0;
    gr_error_info err;
    gr_tensor *t;
    gr_graph *g;
    gr_job *job;

    for (size_t j = 0; j < n; j++)
        count += sets[j].count;
    t = calloc(count, sizeof(*t));
    ASSERT_TRUE(t != NULL);
    for (size_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < sets[j].count; i++, k++) {
            uint64_t elems = sets[j].bytes / sizeof(float);

            gr_workload_fill(sets[j].x[i], 0, elems, SEED, k);
            t[k] = (gr_tensor){{sets[j].x[i]}, {sets[j].x[i]}, elems, 0, {0}};
        }
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        ASSERT_STATUS(gr_job_error_get(job, &err), GR_OK);
        GR_TEST_FAIL("job failed at index %llu, node '%s': %s: %s",
                     (unsigned long long)err.index, err.node, gr_status_str(err.status),
                     err.message);
    }
    for (k = 0; k < count; k++) {
        uint64_t where, bad = gr_workload_check_seed(t[k].out[0], 0, t[k].elems, SEED, k, &where);

        if (bad)
            GR_TEST_FAIL("index %llu: %llu elements wrong, first at %llu", (unsigned long long)k,
                         (unsigned long long)bad, (unsigned long long)where);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free(t);
}

/* One origin at one size: the job is right, and the driver refused nothing. */
static void one_origin(origin from, uint64_t bytes, uint64_t total)
{
    gr_runtime *rt = gr_test_runtime(
        (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3, .budget = 256 * MiB});
    tensors s = make(from, total / bytes, bytes);

    printf("    %s, %llu x %llu KiB: %llu back to back\n", origin_names[from],
           (unsigned long long)s.count, (unsigned long long)(bytes / KiB),
           (unsigned long long)back_to_back(&s));
    run_seed(rt, &s, 1);
    ASSERT_EQ_U64(stats_of(rt).copies_refused, 0);
    gr_runtime_destroy(rt);
    release(&s);
}

static void own_host_alloc_per_tensor(void)
{
    static const uint64_t sizes[] = {16 * KiB, 64 * KiB, 1 * MiB, 16 * MiB};

    REQUIRE_GPU();
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        one_origin(HOST_ALLOC, sizes[k], sizes[k] < MiB ? 64 * MiB : 256 * MiB);
}

static void own_malloc_host_per_tensor(void)
{
    REQUIRE_GPU();
    one_origin(MALLOC_HOST, 64 * KiB, 64 * MiB);
    one_origin(MALLOC_HOST, 1 * MiB, 128 * MiB);
}

/* Back to back by construction: pieces of one mapping, each registered on its own. */
static void registered_pieces_back_to_back(void)
{
    static const uint64_t sizes[] = {64 * KiB, 1 * MiB};

    REQUIRE_GPU();
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        gr_runtime *rt = gr_test_runtime(
            (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3, .budget = 256 * MiB});
        tensors s = make(REGISTERED, 64 * MiB / sizes[k], sizes[k]);

        ASSERT_EQ_U64(back_to_back(&s), s.count - 1);
        run_seed(rt, &s, 1);
        ASSERT_EQ_U64(stats_of(rt).copies_refused, 0);
        gr_runtime_destroy(rt);
        release(&s);
    }
}

/* Every origin in one job, each in a run of its own, 64 KiB and 1 MiB tensors. */
static void every_origin_in_one_job(void)
{
    gr_runtime *rt;
    tensors sets[10];
    size_t n = 0;

    REQUIRE_GPU();
    rt = gr_test_runtime(
        (gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3, .budget = 128 * MiB});
    for (int big = 0; big < 2; big++)
        for (origin from = HOST_ALLOC; from <= PAGEABLE; from++)
            sets[n++] = make(from, big ? 16 : 256, big ? MiB : 64 * KiB);
    run_seed(rt, sets, n);
    ASSERT_EQ_U64(stats_of(rt).copies_refused, 0);
    gr_runtime_destroy(rt);
    for (size_t j = 0; j < n; j++)
        release(&sets[j]);
}

/* The "copy" fault site refuses copies the planner made right (rows of one cudaHostAlloc
 * array go direct; tensors apart go scattered): every index is still done, and the refused
 * units ran staged. */
static void refused_copies_run_staged(void)
{
    static const char *const plans[] = {"copy:1", "copy:2+"};

    REQUIRE_GPU();
    for (size_t k = 0; k < sizeof(plans) / sizeof(plans[0]); k++) {
        gr_config cfg = GR_CONFIG_INIT;
        tensors sets[2];
        gr_error_info err;
        gr_runtime *rt;
        gr_stats st;
        void *rows;

        cfg.backend = GR_BACKEND_CUDA;
        cfg.workers_per_device = 1;
        cfg.budget_bytes = 64 * MiB;
        gr_testing_set_fault_plan(&cfg, plans[k]);
        if (gr_runtime_create(&cfg, &rt, &err) != GR_OK)
            GR_TEST_FAIL("create: %s", err.message);
        ASSERT_EQ(cudaHostAlloc(&rows, 512 * 64 * KiB, cudaHostAllocPortable), cudaSuccess);
        sets[0] = (tensors){PAGEABLE, 512, 64 * KiB, calloc(512, sizeof(float *)), NULL};
        for (uint64_t i = 0; i < 512; i++)
            sets[0].x[i] = (float *)((char *)rows + i * 64 * KiB);
        sets[1] = make(POOLED, 512, 64 * KiB);
        run_seed(rt, sets, 2);
        st = stats_of(rt);
        ASSERT_GE(st.copies_refused, 1);
        if (k == 0)
            ASSERT_EQ_U64(st.copies_refused, 1);
        ASSERT_GE(st.units_staged, st.copies_refused);
        gr_runtime_destroy(rt);
        free(sets[0].x);
        ASSERT_EQ(cudaFreeHost(rows), cudaSuccess);
        release(&sets[1]);
    }
}

/* What the CUDA backend says of each origin's allocations: the span holds the whole
 * allocation and stops at its end, so that the next allocation, back to back or not, is
 * never inside it; pageable memory has none. */
static void host_span_of_each_origin(void)
{
    REQUIRE_GPU();
    for (origin from = HOST_ALLOC; from <= PAGEABLE; from++) {
        tensors s = make(from, 4, 64 * KiB);

        for (uint64_t i = 0; i < s.count; i++) {
            uintptr_t p = (uintptr_t)s.x[i], lo = 0, hi = 0;
            bool known = gr__backend_cuda.host_span(s.x[i], &lo, &hi);

            printf("    %s %llu: %s [%#llx, %#llx) for [%#llx, %#llx)\n", origin_names[from],
                   (unsigned long long)i, known ? "span" : "no span", (unsigned long long)lo,
                   (unsigned long long)hi, (unsigned long long)p,
                   (unsigned long long)(p + s.bytes));
            if (from == PAGEABLE) {
                ASSERT_TRUE(!known);
                continue;
            }
            ASSERT_TRUE(known);
            ASSERT_LE_U64(lo, p);
            ASSERT_LE_U64(p + s.bytes, hi);
            /* Pool blocks share slabs; every other tensor here is an allocation of its own,
             * outside the span whether it lies next to this one or not. */
            for (uint64_t j = 0; from != POOLED && j < s.count; j++)
                if (j != i && (uintptr_t)s.x[j] >= lo && (uintptr_t)s.x[j] < hi)
                    GR_TEST_FAIL("the span of tensor %llu holds tensor %llu's allocation",
                                 (unsigned long long)i, (unsigned long long)j);
        }
        release(&s);
    }
}

GR_TEST_MAIN(GR_TEST(host_span_of_each_origin), GR_TEST(own_host_alloc_per_tensor),
             GR_TEST(own_malloc_host_per_tensor), GR_TEST(registered_pieces_back_to_back),
             GR_TEST(every_origin_in_one_job), GR_TEST(refused_copies_run_staged))

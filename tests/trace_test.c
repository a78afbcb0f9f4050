/*
 * trace_test.c - NVTX ranges as a tool sees them. tests/nvtx_recorder.c is a real NVTX tool,
 * loaded by NVTX3's own loader through NVTX_INJECTION64_PATH (as Nsight Systems is), that
 * records every push and pop. The worker's ranges are marked on the CUDA backend only;
 * here, without a GPU, gr__trace_all_backends turns them on for the host backend, so the
 * same worker code is checked: one range per unit named by job and index (payload: the
 * index), phases nested inside it, pushes and pops balanced on every thread, and nothing
 * at all while no tool is attached. The CUDA backend's own phases, "graph update",
 * "launch" and "wait", run only on a GPU: `cuda_ranges` checks them there, with the ranges
 * on by themselves (no test switch), whole tensors, batches and chunks; it SKIPs without a
 * GPU (tools/gpu_suite nvtx runs it, with GR_NVTX_RECORDER naming the recorder).
 */
#include <dlfcn.h>
#include <stdio.h>

#include "runtime/runtime.h"
#include "runtime/base/trace.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

/* The runtime behind a handle, for the checks that look inside. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

#define MS 1000000ll
#define MAX_THREADS 64

static char recorder[4096];
static char *record;

static const char *recorder_path(void)
{
    const char *root = getenv("TEST_SRCDIR"), *given = getenv("GR_NVTX_RECORDER");

    if (given != NULL && *given != '\0') { /* outside Bazel: tools/gpu_suite nvtx */
        snprintf(recorder, sizeof(recorder), "%s", given);
        return recorder;
    }
    snprintf(recorder, sizeof(recorder), "%s/graphrun/tests/libnvtx_recorder.so",
             root ? root : ".");
    return recorder;
}

/* The record so far, from the recorder NVTX loaded (NULL when it is not loaded). */
static const char *record_text(void)
{
    void *lib = dlopen(recorder_path(), RTLD_NOW | RTLD_NOLOAD);
    size_t (*text)(char *, size_t);

    if (lib == NULL)
        return NULL;
    *(void **)&text = dlsym(lib, "gr_nvtx_recorder_text");
    ASSERT_TRUE(text != NULL);
    if (record == NULL)
        record = malloc(1 << 20);
    text(record, 1 << 20);
    dlclose(lib);
    return record;
}

static void run(gr_runtime *rt, uint64_t count, uint64_t elems)
{
    float *data = calloc(count, elems * sizeof(float));
    gr_tensor *t = calloc(count, sizeof(*t));
    gr_graph *g;
    gr_job *job;

    for (uint64_t i = 0; i < count; i++) {
        t[i].in[0] = t[i].out[0] = data + i * elems;
        t[i].elems = elems;
    }
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, count, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 60000 * MS), GR_OK);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free(t);
    free(data);
}

static void no_tool_no_ranges(void)
{
    gr_runtime *rt;

    unsetenv("NVTX_INJECTION64_PATH");
    gr__trace_all_backends = true;
    rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 1 << 20});
    ASSERT_TRUE(!RT(rt)->env.trace);
    run(rt, 20, 100);
    gr_runtime_destroy(rt);
    ASSERT_TRUE(record_text() == NULL); /* NVTX never initialized: no tool loaded */

    /* A tool attached, but the host backend: no ranges unless a test asks. */
    setenv("NVTX_INJECTION64_PATH", recorder_path(), 1);
    gr__trace_all_backends = false;
    rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 1 << 20});
    ASSERT_TRUE(!RT(rt)->env.trace);
    gr_runtime_destroy(rt);
    ASSERT_TRUE(record_text() == NULL);
}

typedef struct tally {
    int units;          /* top-level ranges */
    int budget_waits;   /* "budget wait" ranges inside them */
    int other_phases;   /* gather, scatter */
    int ends;           /* "end": a unit's memory given back and its parts ended */
    int cuda_phases[3]; /* graph update, launch, wait */
    uint64_t seen[64];  /* bit per index of job 1, for whole tensors */
    uint64_t covered;   /* indices covered by batch ranges */
    int chunks;
} tally;

/* Check the record from `from` on: domain, nesting, balance, names and payloads. */
static tally check_record(const char *text, uint64_t job)
{
    long tid[MAX_THREADS];
    int depth[MAX_THREADS], n_threads = 0;
    tally t;
    char line[512];

    memset(&t, 0, sizeof(t));
    while (*text) {
        const char *end = strchr(text, '\n');
        char kind[8], domain[32], name[128], payload[32], color[16];
        long thread;
        int k, fields;

        ASSERT_TRUE(end != NULL && (size_t)(end - text) < sizeof(line));
        memcpy(line, text, (size_t)(end - text));
        line[end - text] = '\0';
        text = end + 1;
        fields = sscanf(line, "%7s %ld %31s \"%127[^\"]\" payload=%31s color=%15s", kind, &thread,
                        domain, name, payload, color);
        if (strcmp(domain, "graphrun") != 0)
            GR_TEST_FAIL("range outside the graphrun domain: %s", line);
        for (k = 0; k < n_threads && tid[k] != thread; k++)
            ;
        if (k == n_threads) {
            ASSERT_LT(n_threads, MAX_THREADS);
            tid[n_threads] = thread;
            depth[n_threads++] = 0;
        }
        if (strcmp(kind, "pop") == 0) {
            if (--depth[k] < 0)
                GR_TEST_FAIL("pop without a push on thread %ld", thread);
            continue;
        }
        ASSERT_EQ(fields, 6);
        if (depth[k]++ == 0) { /* a unit */
            unsigned long long j, a, b, off, n;
            char extra;

            t.units++;
            if (strcmp(color, "none") == 0)
                GR_TEST_FAIL("unit range without a colour: %s", line);
            if (sscanf(name, "job %llu index %llu-%llu%c", &j, &a, &b, &extra) == 3) {
                ASSERT_EQ_U64(j, job);
                ASSERT_EQ_U64(strtoull(payload, NULL, 10), a);
                t.covered += b - a + 1;
            } else if (sscanf(name, "job %llu index %llu elems %llu+%llu%c", &j, &a, &off, &n,
                              &extra) == 4) {
                ASSERT_EQ_U64(j, job);
                ASSERT_EQ_U64(strtoull(payload, NULL, 10), a);
                t.chunks++;
            } else if (sscanf(name, "job %llu index %llu%c", &j, &a, &extra) == 2) {
                ASSERT_EQ_U64(j, job);
                ASSERT_EQ_U64(strtoull(payload, NULL, 10), a);
                ASSERT_LT(a, 64 * 64);
                if (t.seen[a / 64] & (1ull << (a % 64)))
                    GR_TEST_FAIL("index %llu marked twice", a);
                t.seen[a / 64] |= 1ull << (a % 64);
                t.covered++;
            } else {
                GR_TEST_FAIL("unit range with an unexpected name: %s", line);
            }
        } else if (strcmp(name, "budget wait") == 0) {
            ASSERT_STR_EQ(payload, "none");
            t.budget_waits++;
        } else if (strcmp(name, "gather") == 0 || strcmp(name, "scatter") == 0) {
            t.other_phases++;
        } else if (strcmp(name, "end") == 0) {
            ASSERT_STR_EQ(payload, "none");
            t.ends++;
        } else if (strcmp(name, "graph update") == 0 || strcmp(name, "launch") == 0 ||
                   strcmp(name, "wait") == 0) {
            ASSERT_STR_EQ(payload, "none");
            t.cuda_phases[name[0] == 'g' ? 0 : name[0] == 'l' ? 1 : 2]++;
        } else {
            GR_TEST_FAIL("unexpected range inside a unit: %s", line);
        }
    }
    for (int k = 0; k < n_threads; k++)
        if (depth[k] != 0)
            GR_TEST_FAIL("thread %ld ends with %d range(s) open", tid[k], depth[k]);
    return t;
}

static void ranges_by_job_and_index(void)
{
    gr_runtime *rt;
    const char *text;
    size_t before;
    tally t;

    setenv("NVTX_INJECTION64_PATH", recorder_path(), 1);
    gr__trace_all_backends = true;

    /* Whole tensors: one unit per index. */
    rt = gr_test_runtime((gr_test_shape){.workers = 3, .budget = 1 << 20, .whole_tensors = true});
    ASSERT_TRUE(RT(rt)->env.trace);
    run(rt, 40, 1000);
    gr_runtime_destroy(rt);
    text = record_text();
    if (text == NULL)
        GR_TEST_FAIL("NVTX did not load the recorder from %s", recorder_path());
    t = check_record(text, 1);
    ASSERT_EQ(t.units, 40);
    ASSERT_EQ(t.budget_waits, 40);
    ASSERT_EQ(t.ends, 40);
    ASSERT_EQ(t.other_phases, 0);
    ASSERT_EQ_U64(t.covered, 40);
    ASSERT_EQ_U64(t.seen[0], (1ull << 40) - 1);
    before = strlen(text);

    /* Split units: small tensors in batches, large ones in chunks, gathered and scattered. */
    rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 256 << 10});
    run(rt, 300, 50);
    gr_runtime_destroy(rt);
    text = record_text();
    t = check_record(text + before, 1);
    ASSERT_EQ_U64(t.covered, 300);
    ASSERT_LT(t.units, 300);
    ASSERT_EQ(t.budget_waits, t.units);
    ASSERT_EQ(t.ends, t.units);
    before = strlen(text);

    rt = gr_test_runtime((gr_test_shape){.workers = 2, .budget = 256 << 10});
    run(rt, 2, 100000); /* 400 KB each, over the 256 KiB budget */
    gr_runtime_destroy(rt);
    t = check_record(record_text() + before, 1);
    ASSERT_GE(t.chunks, 4);
    ASSERT_EQ(t.units, t.chunks);
    ASSERT_EQ(t.budget_waits, t.units);
    ASSERT_EQ(t.ends, t.units);
    gr__trace_all_backends = false;
}

/* The same on the CUDA backend, whose ranges need no test switch: every unit has its
 * budget wait, graph update, launch and wait, one each, nested in it. */
static void cuda_ranges(void)
{
    const uint64_t MiB = 1 << 20;
    gr_runtime *rt;
    const char *text;
    size_t before;
    tally t;

    REQUIRE_GPU();
    setenv("NVTX_INJECTION64_PATH", recorder_path(), 1);
    gr__trace_all_backends = false;
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 3,
                                         .budget = 64 * MiB, .whole_tensors = true});
    ASSERT_TRUE(RT(rt)->env.trace);
    run(rt, 40, 1000);
    gr_runtime_destroy(rt);
    text = record_text();
    if (text == NULL)
        GR_TEST_FAIL("NVTX did not load the recorder from %s", recorder_path());
    t = check_record(text, 1);
    printf("    whole tensors: %d units, phases: %d budget waits, %d graph updates, %d launches, "
           "%d waits, %d ends\n", t.units, t.budget_waits, t.cuda_phases[0], t.cuda_phases[1],
           t.cuda_phases[2], t.ends);
    ASSERT_EQ(t.units, 40);
    ASSERT_EQ_U64(t.seen[0], (1ull << 40) - 1);
    ASSERT_EQ(t.budget_waits, 40);
    ASSERT_EQ(t.ends, 40);
    for (int k = 0; k < 3; k++)
        ASSERT_EQ(t.cuda_phases[k], 40);
    before = strlen(text);

    /* Batches of small tensors, gathered through staging (pageable memory). */
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 2,
                                         .budget = 2 * MiB});
    run(rt, 300, 50);
    gr_runtime_destroy(rt);
    text = record_text();
    t = check_record(text + before, 1);
    printf("    batches: %d units over 300 tensors, %d gathers and scatters\n", t.units,
           t.other_phases);
    ASSERT_EQ_U64(t.covered, 300);
    ASSERT_LT(t.units, 300);
    ASSERT_EQ(t.budget_waits, t.units);
    ASSERT_EQ(t.ends, t.units);
    for (int k = 0; k < 3; k++)
        ASSERT_EQ(t.cuda_phases[k], t.units);
    before = strlen(text);

    /* Chunks of tensors over a worker's share of the budget. */
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .workers = 2,
                                         .budget = 2 * MiB});
    run(rt, 2, 1000000); /* 4 MB each, over the 2 MiB budget */
    gr_runtime_destroy(rt);
    t = check_record(record_text() + before, 1);
    printf("    chunks: %d units over 2 tensors, %d ends\n", t.chunks, t.ends);
    ASSERT_GE(t.chunks, 4);
    ASSERT_EQ(t.units, t.chunks);
    ASSERT_EQ(t.ends, t.units);
    for (int k = 0; k < 3; k++)
        ASSERT_EQ(t.cuda_phases[k], t.units);
}

GR_TEST_MAIN(GR_TEST(no_tool_no_ranges), GR_TEST(ranges_by_job_and_index), GR_TEST(cuda_ranges))

/*
 * embed.c - graphrun embedded in a C program: the complete example of docs/API.md.
 *
 * Built against an installed graphrun (tools/install PREFIX), outside Bazel:
 *
 *     export PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
 *     cc -std=c11 -o embed embed.c $(pkg-config --cflags --libs graphrun) -lm
 *     ./embed --backend host        (host, cuda, or auto: the default)
 *
 * (-lm is for this program's own reference, sqrtf; the static link line is in docs/API.md.)
 *
 * What it does, every result checked against plain C:
 *   1. starts a runtime with a small device-memory budget;
 *   2. builds the seed pipeline with the builder calls (ten rounds of mul, add and pow: 30
 *      kernel nodes) and runs tensors of mixed sizes through it in place, in pinned memory;
 *      one tensor is larger than the whole budget, so the runtime runs it in chunks;
 *   3. parses a graph spec with two inputs and two outputs and runs tensors in ordinary
 *      (pageable) memory through it, with a completion callback;
 *   4. shows bad input refused with a status and a reason: a graph spec with an unknown
 *      kernel, a job with an empty tensor;
 *   5. reads the device statistics: the budget in use never went above the budget.
 * Each step prints "PASS name" or "FAIL name: why" (the line format of graphrun's tests,
 * which build and run this file: tools/install_test); the exit status is 0 only if all pass.
 */
#include <graphrun.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Device memory the runtime may hold: two of the CUDA allocator's 2 MiB pages. */
#define BUDGET_BYTES (4ull << 20)
#define SEED_ROUNDS 10
#define WAIT_NS (120ll * 1000000000) /* the jobs' deadline: a few seconds' work at most */

static char why[512]; /* the reason the current step failed */
static int failures;

static int fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return -1;
}

static void report(const char *step, int rc)
{
    if (rc == 0) {
        printf("PASS %s\n", step);
    } else {
        printf("FAIL %s: %s\n", step, why);
        failures++;
    }
    fflush(stdout);
}

/* The test data: a value in [0.5, 10.5) for element j of tensor i of input port p. */
static float input_value(int p, int i, size_t j)
{
    return 0.5f + (float)((j * 7 + (size_t)i * 13 + (size_t)p * 101) % 1000) * 0.01f;
}

/* Ten rounds of x = sqrt(x * 1.01 + 1.01) in float32, each operation rounded on its own as
 * graphrun's kernels do. The volatile keeps the compiler from fusing the multiply and the
 * add into one FMA instruction, which it may do on targets that have one (-march=native). */
static float seed_ref(float x)
{
    for (int r = 0; r < SEED_ROUNDS; r++) {
        volatile float m = x * 1.01f;
        x = sqrtf(m + 1.01f);
    }
    return x;
}

/* Bit for bit: a different rounding anywhere shows. */
static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Wait for the job and check that every index is done. */
static int wait_all_done(gr_job *job, uint64_t count)
{
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_error_info e;
    gr_status result;

    /* The job's deadline bounds this wait: by then every index has ended. */
    if (gr_job_wait(job, GR_WAIT_FOREVER, &result) != GR_OK)
        return fail("gr_job_wait did not see the job complete");
    if (result != GR_OK) {
        gr_job_error_get(job, &e);
        return fail("job failed: %s: index %llu, node '%s': %s", gr_status_str(result),
                    (unsigned long long)e.index, e.node, e.message);
    }
    if (gr_job_progress_get(job, &p) != GR_OK || p.done != count || p.total != count)
        return fail("progress says %llu of %llu done, expected %llu",
                    (unsigned long long)p.done, (unsigned long long)p.total,
                    (unsigned long long)count);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Step 2: a graph from the builder calls, in place, in pinned memory.
 * ------------------------------------------------------------------------------------- */

/* The seed pipeline unfused: load -> mul0 -> add0 -> pow0 -> ... -> pow9 -> store, all in
 * place on one tensor-sized buffer. (gr_graph_create_seed, <graphrun_workloads.h>, builds the
 * same with one fused kernel.) */
static int build_seed_graph(gr_graph **out)
{
    static const char *const kernel[3] = {"mul", "add", "pow"};
    static const float scalar[3] = {1.01f, 1.01f, 0.5f};
    const char *x = "x";
    char prev[16] = "load", node[16];
    gr_graph *g;
    gr_status st;

    *out = NULL;
    if ((st = gr_graph_create(&g)) != GR_OK)
        return fail("gr_graph_create: %s", gr_status_str(st));
    st = gr_graph_add_buffer(g, "x", 1, 1); /* as many floats as the tensor */
    if (st == GR_OK)
        st = gr_graph_add_h2d(g, "load", 0, "x"); /* host input port 0 into x */
    for (int r = 0; r < SEED_ROUNDS && st == GR_OK; r++) {
        for (int k = 0; k < 3 && st == GR_OK; k++) {
            snprintf(node, sizeof(node), "%s%d", kernel[k], r);
            st = gr_graph_add_kernel(g, node, kernel[k], &x, 1, "x", &scalar[k], 1);
            if (st == GR_OK)
                st = gr_graph_add_dep(g, prev, node);
            memcpy(prev, node, sizeof(prev));
        }
    }
    if (st == GR_OK)
        st = gr_graph_add_d2h(g, "store", "x", 0); /* x to host output port 0 */
    if (st == GR_OK)
        st = gr_graph_add_dep(g, prev, "store");
    if (st == GR_OK)
        st = gr_graph_finalize(g); /* validated and frozen: usable by any thread */
    if (st != GR_OK) {
        gr_error_info err; /* the refusal, as every call gives its detail */

        gr_graph_error_get(g, &err);
        fail("building the seed graph: %s: %s", gr_status_str(err.status), err.message);
        gr_graph_destroy(g);
        return -1;
    }
    if (gr_graph_input_count(g) != 1 || gr_graph_output_count(g) != 1) {
        fail("the seed graph has %u input(s) and %u output(s), expected 1 and 1",
             gr_graph_input_count(g), gr_graph_output_count(g));
        gr_graph_destroy(g);
        return -1;
    }
    *out = g;
    return 0;
}

static int run_seed_job(gr_runtime *rt, gr_graph *g)
{
    /* 1.5 M floats (6 MB) is more than the whole budget: it runs in chunks. */
    static const uint64_t elems[] = {1, 1000, 4097, 65536, 1500000, 250000};
    enum { N = sizeof(elems) / sizeof(elems[0]) };
    gr_job_options opts = GR_JOB_OPTIONS_INIT;
    float *data[N] = {NULL};
    gr_tensor t[N];
    gr_error_info err;
    gr_job *job = NULL;
    int rc = 0;

    memset(t, 0, sizeof(t)); /* unused ports must be NULL */
    for (int i = 0; i < N; i++) {
        void *p;
        gr_status st = gr_host_alloc(elems[i] * sizeof(float), &p);

        if (st != GR_OK) {
            rc = fail("gr_host_alloc(%llu floats): %s", (unsigned long long)elems[i],
                      gr_status_str(st));
            goto out_free;
        }
        data[i] = p;
        for (uint64_t j = 0; j < elems[i]; j++)
            data[i][j] = input_value(0, i, j);
        t[i].in[0] = data[i];
        t[i].out[0] = data[i]; /* in place: the graph copies x in before it copies x out */
        t[i].elems = elems[i];
    }
    opts.deadline_ns = gr_now_ns() + WAIT_NS;
    if (gr_job_submit(rt, g, t, N, &opts, &job, &err) != GR_OK) {
        rc = fail("gr_job_submit: %s: %s", gr_status_str(err.status), err.message);
        goto out_free;
    }
    if ((rc = wait_all_done(job, N)) != 0)
        goto out_destroy_job;
    for (int i = 0; i < N && rc == 0; i++) {
        for (uint64_t j = 0; j < elems[i]; j++) {
            float want = seed_ref(input_value(0, i, j));

            if (!same_bits(data[i][j], want)) {
                rc = fail("tensor %d element %llu: got %.9g, expected %.9g", i,
                          (unsigned long long)j, data[i][j], want);
                break;
            }
        }
    }

out_destroy_job:
    gr_job_destroy(job);
out_free:
    for (int i = 0; i < N; i++)
        gr_host_free(data[i]);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Step 3: a graph from a spec, two inputs and two outputs, pageable memory, a callback.
 * ------------------------------------------------------------------------------------- */

static const char dag_spec[] =
    "# out0 = seed(2 a - b), out1 = a * 3: two branches that both read a\n"
    "buffer a\n"
    "buffer b\n"
    "buffer d\n"
    "buffer t\n"
    "h2d load_a: in0 -> a\n"
    "h2d load_b: in1 -> b\n"
    "kernel diff: axpby(a, b, 2.0, -1.0) -> d\n"
    "kernel seed: seed(d) -> d\n"
    "kernel triple: mul(a, 3) -> t\n"
    "d2h store_d: d -> out0\n"
    "d2h store_t: t -> out1\n"
    "load_a -> diff -> seed -> store_d\n"
    "load_b -> diff\n"
    "load_a -> triple -> store_t\n";

typedef struct completion {
    int calls;
    gr_status status;
} completion;

/* Runs once, when the job's last index has ended, on whichever thread ended it. It must be
 * short and must not submit work; gr_job_wait returns only after it has returned, so the
 * waiting thread reads `calls` safely. */
static void on_complete(gr_job *job, gr_status status, void *user)
{
    completion *c = user;

    (void)job;
    c->calls++;
    c->status = status;
}

static int run_dag_job(gr_runtime *rt)
{
    static const uint64_t elems[] = {3, 7, 1024, 33333, 100000};
    enum { N = sizeof(elems) / sizeof(elems[0]) };
    gr_job_options opts = GR_JOB_OPTIONS_INIT;
    float *a[N] = {NULL}, *b[N] = {NULL}, *o0[N] = {NULL}, *o1[N] = {NULL};
    completion done = {0, GR_OK};
    gr_graph *g = NULL;
    gr_tensor t[N];
    gr_error_info err;
    gr_job *job = NULL;
    int rc = 0;

    if (gr_graph_parse(dag_spec, strlen(dag_spec), "dag.graph", &g, &err) != GR_OK)
        return fail("gr_graph_parse: %s", err.message);
    if (gr_graph_input_count(g) != 2 || gr_graph_output_count(g) != 2) {
        rc = fail("the parsed graph has %u input(s) and %u output(s), expected 2 and 2",
                  gr_graph_input_count(g), gr_graph_output_count(g));
        goto out_destroy_graph;
    }
    memset(t, 0, sizeof(t));
    for (int i = 0; i < N; i++) {
        a[i] = malloc(elems[i] * sizeof(float));
        b[i] = malloc(elems[i] * sizeof(float));
        o0[i] = malloc(elems[i] * sizeof(float));
        o1[i] = malloc(elems[i] * sizeof(float));
        if (!a[i] || !b[i] || !o0[i] || !o1[i]) {
            rc = fail("out of memory");
            goto out_free;
        }
        for (uint64_t j = 0; j < elems[i]; j++) {
            a[i][j] = input_value(0, i, j);
            b[i][j] = input_value(1, i, j);
        }
        t[i].in[0] = a[i];
        t[i].in[1] = b[i];
        t[i].out[0] = o0[i];
        t[i].out[1] = o1[i];
        t[i].elems = elems[i];
    }
    opts.deadline_ns = gr_now_ns() + WAIT_NS;
    opts.on_complete = on_complete;
    opts.user = &done;
    if (gr_job_submit(rt, g, t, N, &opts, &job, &err) != GR_OK) {
        rc = fail("gr_job_submit: %s: %s", gr_status_str(err.status), err.message);
        goto out_free;
    }
    /* The job holds its own reference to the graph: the caller's may go now. */
    gr_graph_destroy(g);
    g = NULL;
    if ((rc = wait_all_done(job, N)) != 0)
        goto out_destroy_job;
    if (done.calls != 1 || done.status != GR_OK) {
        rc = fail("the completion callback ran %d time(s) with '%s', expected once with 'ok'",
                  done.calls, gr_status_str(done.status));
        goto out_destroy_job;
    }
    for (int i = 0; i < N && rc == 0; i++) {
        for (uint64_t j = 0; j < elems[i]; j++) {
            /* axpby rounds 2a and -b on their own, both exact, then their sum. */
            float want0 = seed_ref(2.0f * a[i][j] - b[i][j]);
            float want1 = a[i][j] * 3.0f;

            if (!same_bits(o0[i][j], want0) || !same_bits(o1[i][j], want1)) {
                rc = fail("tensor %d element %llu: got (%.9g, %.9g), expected (%.9g, %.9g)", i,
                          (unsigned long long)j, o0[i][j], o1[i][j], want0, want1);
                break;
            }
        }
    }

out_destroy_job:
    gr_job_destroy(job);
out_free:
    for (int i = 0; i < N; i++) {
        free(a[i]);
        free(b[i]);
        free(o0[i]);
        free(o1[i]);
    }
out_destroy_graph:
    gr_graph_destroy(g);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Step 4: bad input is refused before anything runs, with the place and the reason.
 * ------------------------------------------------------------------------------------- */

static int check_refusals(gr_runtime *rt, gr_graph *g)
{
    static const char bad_spec[] = "buffer x\n"
                                   "h2d load: in0 -> x\n"
                                   "kernel k: frobnicate(x) -> x\n";
    float x[4] = {1, 2, 3, 4}, y[4];
    gr_graph *parsed = NULL;
    gr_error_info err;
    gr_tensor t[2];
    gr_job *job = NULL;
    gr_status st;

    st = gr_graph_parse(bad_spec, strlen(bad_spec), "bad.graph", &parsed, &err);
    if (st != GR_ERR_INVALID_ARGUMENT || parsed != NULL ||
        strncmp(err.message, "bad.graph:3:", 12) != 0) {
        gr_graph_destroy(parsed);
        return fail("a spec with an unknown kernel: got '%s' (%s), expected invalid argument "
                    "at bad.graph:3",
                    gr_status_str(st), st == GR_OK ? "accepted" : err.message);
    }
    memset(t, 0, sizeof(t));
    t[0].in[0] = x;
    t[0].out[0] = x;
    t[0].elems = 4;
    t[1].in[0] = y;
    t[1].out[0] = y;
    t[1].elems = 0; /* refused: a tensor needs at least one element */
    st = gr_job_submit(rt, g, t, 2, NULL, &job, &err);
    if (st != GR_ERR_INVALID_ARGUMENT || job != NULL || err.index != 1) {
        gr_job_destroy(job);
        return fail("a job with an empty tensor at index 1: got '%s', index %llu: %s",
                    gr_status_str(st), (unsigned long long)err.index, err.message);
    }
    if (x[0] != 1.0f)
        return fail("a refused job wrote its outputs");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Step 5: what the runtime reports about itself.
 * ------------------------------------------------------------------------------------- */

static int check_stats(const gr_runtime *rt)
{
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats s;

    if (gr_runtime_info_get(rt, &info) != GR_OK)
        return fail("gr_runtime_info_get failed");
    printf("embed: %s backend (%s), %u device(s), %u workers each, budget %llu bytes\n",
           gr_backend_name(info.backend), info.backend_note, info.device_count,
           info.workers_per_device, (unsigned long long)info.budget_bytes);
    for (uint32_t d = 0; d < info.device_count; d++) {
        if (gr_runtime_device_stats(rt, d, &s) != GR_OK)
            return fail("gr_runtime_device_stats(%u) failed", d);
        printf("embed: device %u: peak budget in use %llu of %llu bytes, %llu iterations\n", d,
               (unsigned long long)s.budget_peak, (unsigned long long)s.budget_bytes,
               (unsigned long long)s.iterations_done);
        /* Every job has completed, and a job gives its memory back before it completes. */
        if (s.budget_peak > s.budget_bytes || s.budget_in_use != 0 || s.iterations_failed != 0)
            return fail("device %u: peak %llu of %llu bytes, %llu in use, %llu failed", d,
                        (unsigned long long)s.budget_peak, (unsigned long long)s.budget_bytes,
                        (unsigned long long)s.budget_in_use,
                        (unsigned long long)s.iterations_failed);
    }
    if (gr_runtime_device_stats(rt, 0, &s) != GR_OK || s.iterations_done == 0 ||
        s.budget_peak == 0)
        return fail("device 0 reports no work done");
    return 0;
}

int main(int argc, char **argv)
{
    gr_config cfg = GR_CONFIG_INIT; /* every field has its default; change what you need */
    gr_runtime *rt = NULL;
    gr_graph *seed = NULL;
    gr_error_info err;
    gr_status st;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            const char *b = argv[++i];

            if (strcmp(b, "host") == 0)
                cfg.backend = GR_BACKEND_HOST;
            else if (strcmp(b, "cuda") == 0)
                cfg.backend = GR_BACKEND_CUDA;
            else if (strcmp(b, "auto") != 0)
                goto usage;
        } else {
            goto usage;
        }
    }
    cfg.budget_bytes = BUDGET_BYTES;

    st = gr_runtime_create(&cfg, &rt, &err);
    if (st != GR_OK) {
        fail("gr_runtime_create: %s: %s", gr_status_str(st), err.message);
        report("embed_runtime_create", -1);
        return 1;
    }
    report("embed_runtime_create", 0);

    report("embed_builder_graph", build_seed_graph(&seed));
    if (seed != NULL) {
        report("embed_seed_job_in_place", run_seed_job(rt, seed));
        report("embed_refusals", check_refusals(rt, seed));
    }
    report("embed_parsed_graph_job", run_dag_job(rt));
    report("embed_budget_stats", check_stats(rt));

    gr_graph_destroy(seed);
    gr_runtime_destroy(rt); /* joins the workers and frees the device memory */
    return failures == 0 ? 0 : 1;

usage:
    fprintf(stderr, "usage: %s [--backend host|cuda|auto]\n", argv[0]);
    return 2;
}

/*
 * scale_bench.c - the scale target on any backend: does a job of many tensors run at
 * the throughput of a small one? In one run, on one runtime, alternately: all --count
 * tensors in jobs of --small tensors (consecutive slices, one job after another), and all of
 * them in one job. The same tensors, the same memory; only the size of the job differs.
 * Every tensor is checked bit for bit against the seed reference after each pass (they are
 * refilled before each). The small jobs run one after another, each waited for before the
 * next (what a caller that needs each result before the next step sees), or with
 * --in-flight all submitted at once and then waited for (a server with many requests in
 * flight): the first pays each job's pipeline fill and drain, the second lets the runtime
 * overlap one job's tail with the next one's head.
 *
 *   scale_bench [--count N] [--small N] [--elems N] [--backend host|cuda] [--budget BYTES]
 *               [--ring N] [--batch-below BYTES] [--trials N] [--in-flight] [--json]
 *
 * Prints, per trial, microseconds per tensor of both and the large job's throughput over the
 * small one's (1.0: the same; the target is at least 0.97), and the submitting thread's
 * voluntary context switches during the large job (sleeps on the full task ring); with
 * --json one JSON object per trial instead (small_over_one: the small jobs' throughput over
 * the one job's, 1.0 the same). Defaults:
 * host backend, 10,000 and 100 tensors of 1024 floats, batching off (every tensor its own
 * iteration, like the 1 MiB tensors of the GPU measurement), a 64 MiB budget.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <graphrun.h>
#include <graphrun_workloads.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/tensor_set.h"

static uint64_t parse(const char *name, const char *s)
{
    uint64_t v;

    if (!gr_cli_parse_u64(s, &v)) {
        fprintf(stderr, "scale_bench: invalid value '%s' for --%s\n", s, name);
        exit(2);
    }
    return v;
}

static long switches(void)
{
    struct rusage ru;

    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

/* Wait for `job`, destroy it; false (said on stderr) when it failed. */
static bool finish(gr_job *job)
{
    gr_status res;

    gr_job_wait(job, GR_WAIT_FOREVER, &res);
    gr_job_destroy(job);
    if (res != GR_OK)
        fprintf(stderr, "scale_bench: job failed: %s\n", gr_status_str(res));
    return res == GR_OK;
}

/* Run every tensor of the set once, in jobs of `n` tensors (consecutive slices): one after
 * another, each waited for before the next, or (in_flight) all submitted, then waited for
 * in order; seconds, or -1 when a job failed or an output is wrong. */
static double run_jobs(gr_runtime *rt, gr_graph *g, gr_tensor_set *set, uint64_t n,
                       bool in_flight)
{
    uint64_t n_jobs = set->count / n, submitted = 0;
    gr_job **jobs = calloc(n_jobs, sizeof(*jobs));
    bool ok = jobs != NULL;
    int64_t t0;
    double s;

    gr_tensor_set_fill(set);
    t0 = gr_now_ns();
    for (uint64_t k = 0; ok && k < n_jobs; k++) {
        gr_error_info err;

        if (gr_job_submit(rt, g, set->tensors + k * n, n, NULL, &jobs[k], &err) != GR_OK) {
            fprintf(stderr, "scale_bench: submit: %s\n", err.message);
            ok = false;
            break;
        }
        submitted = k + 1;
        if (!in_flight)
            ok = finish(jobs[k]);
    }
    for (uint64_t k = 0; in_flight && k < submitted; k++)
        ok = finish(jobs[k]) && ok;
    s = (double)(gr_now_ns() - t0) / 1e9;
    free(jobs);
    return ok && gr_tensor_set_check(set, NULL) == 0 ? s : -1;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'n'},  {"small", required_argument, NULL, 's'},
        {"elems", required_argument, NULL, 'e'},  {"backend", required_argument, NULL, 'B'},
        {"budget", required_argument, NULL, 'b'}, {"ring", required_argument, NULL, 'r'},
        {"batch-below", required_argument, NULL, 'a'},
        {"trials", required_argument, NULL, 't'}, {"in-flight", no_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},         {NULL, 0, NULL, 0},
    };
    bool in_flight = false, json = false;
    uint64_t count = 10000, small = 100, elems = 1024, trials = 3;
    gr_config cfg = GR_CONFIG_INIT;
    gr_tensor_set set = {0};
    gr_runtime *rt = NULL;
    gr_graph *g = NULL;
    gr_error_info err;
    int opt, rc = 0;

    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = 64ull << 20;
    cfg.batch_below_bytes = 0;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': count = parse("count", optarg); break;
        case 's': small = parse("small", optarg); break;
        case 'e': elems = parse("elems", optarg); break;
        case 'b': cfg.budget_bytes = parse("budget", optarg); break;
        case 'r': cfg.ring_capacity = (uint32_t)parse("ring", optarg); break;
        case 'a': cfg.batch_below_bytes = parse("batch-below", optarg); break;
        case 't': trials = parse("trials", optarg); break;
        case 'i': in_flight = true; break;
        case 'j': json = true; break;
        case 'B':
            if (strcmp(optarg, "host") != 0 && strcmp(optarg, "cuda") != 0) {
                fprintf(stderr, "scale_bench: --backend is host or cuda\n");
                return 2;
            }
            cfg.backend = optarg[0] == 'h' ? GR_BACKEND_HOST : GR_BACKEND_CUDA;
            break;
        default: return 2;
        }
    }
    if (small == 0 || small > count || count % small != 0 || elems == 0 || trials == 0) {
        fprintf(stderr, "scale_bench: --small must divide --count; counts and --elems > 0\n");
        return 2;
    }
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
        fprintf(stderr, "scale_bench: %s\n", err.message);
        return 3;
    }
    if (gr_graph_create_seed(&g) != GR_OK ||
        gr_tensor_set_alloc(&set, count, elems,
                            cfg.backend == GR_BACKEND_CUDA ? GR_MEM_PINNED : GR_MEM_PAGEABLE,
                            1) != GR_OK) {
        fprintf(stderr, "scale_bench: out of memory\n");
        gr_graph_destroy(g);
        gr_runtime_destroy(rt);
        return 3;
    }
    if (!json)
        printf("scale_bench: %s backend, %llu tensors of %llu floats against %llu (%s), budget "
               "%llu bytes, ring %u, batch below %llu bytes\n",
               gr_backend_name(cfg.backend), (unsigned long long)count,
               (unsigned long long)elems, (unsigned long long)small,
               in_flight ? "in flight together" : "one after another",
               (unsigned long long)cfg.budget_bytes, cfg.ring_capacity,
               (unsigned long long)cfg.batch_below_bytes);
    for (uint64_t t = 0; t < trials && rc == 0; t++) {
        double a = run_jobs(rt, g, &set, small, in_flight), b;
        long sw = switches();

        b = run_jobs(rt, g, &set, count, false);
        sw = switches() - sw;
        if (a < 0 || b < 0) {
            printf(json ? "{\"trial\": %llu, \"verified\": false}\n"
                        : "FAIL scale_bench: trial %llu: a job failed or its outputs are wrong\n",
                   (unsigned long long)t + 1);
            rc = 1;
            break;
        }
        if (json)
            printf("{\"trial\": %llu, \"backend\": \"%s\", \"count\": %llu, \"small\": %llu, "
                   "\"elems\": %llu, \"in_flight\": %s, \"small_jobs_s\": %.6f, "
                   "\"one_job_s\": %.6f, \"small_over_one\": %.4f, \"submitter_switches\": %ld, "
                   "\"verified\": true}\n",
                   (unsigned long long)t + 1, gr_backend_name(cfg.backend),
                   (unsigned long long)count, (unsigned long long)small,
                   (unsigned long long)elems, in_flight ? "true" : "false", a, b, b / a, sw);
        else
            printf("trial %llu: %llu x %llu tensors %.3f us per tensor; %llu tensors %.3f us "
                   "per tensor; throughput ratio %.3f; %ld voluntary switches of the "
                   "submitter; all outputs verified\n",
                   (unsigned long long)t + 1, (unsigned long long)(count / small),
                   (unsigned long long)small, a * 1e6 / (double)count,
                   (unsigned long long)count, b * 1e6 / (double)count, a / b, sw);
    }
    gr_tensor_set_free(&set);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    return rc;
}

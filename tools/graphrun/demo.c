/*
 * demo.c - `graphrun demo`: the seed workload on synthetic tensors, end to end.
 *
 * Every tensor is processed in place by the seed pipeline (H2D -> seed kernel -> D2H) and
 * then compared, bit for bit, with the C reference computed from the same synthetic input.
 * Exit status 0 only when every output is right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include <graphrun_workloads.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/tensor_set.h"

#define DEFAULT_COUNT 64
#define DEFAULT_BUDGET_ITERATIONS 3

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun demo [options]\n"
            "\n"
            "Run the seed workload (ten rounds of x = pow(x * 1.01 + 1.01, 0.5), in place) on\n"
            "synthetic float32 tensors and verify every output against the C reference.\n"
            "\n" GR_SEED_OPTIONS_HELP
            "  --help           this text\n"
            "\n"
            "Defaults: %d tensors of 1048576 elements on the host backend, of 100000000 on\n"
            "CUDA; a budget of %d iterations.\n"
            "Exit status: 0 all outputs verified, 1 wrong outputs or failed tensors,\n"
            "2 bad command line, 3 the runtime could not start.\n",
            DEFAULT_COUNT, DEFAULT_BUDGET_ITERATIONS);
}

int gr_cmd_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        GR_SEED_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gr_seed_opts o;
    gr_tensor_set set = {0};
    gr_runtime *rt = NULL;
    gr_graph *graph = NULL;
    gr_job *job = NULL;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats stats;
    gr_job_progress prog = GR_JOB_PROGRESS_INIT;
    gr_error_info err;
    gr_backend chosen;
    uint64_t footprint, wrong, first_wrong;
    gr_status st;
    int64_t t0;
    double secs;
    char b1[32], b2[32], b3[32];
    int rc = GR_EXIT_FAILED, opt, r;

    if (!gr_seed_opts_init(&o, "demo", DEFAULT_COUNT))
        return GR_EXIT_USAGE;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return GR_EXIT_OK;
        }
        r = gr_seed_opt("demo", opt, optarg, &o);
        if (r < 0)
            return GR_EXIT_USAGE;
        if (r == 0) {
            gr_cli_try_help("demo");
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun demo: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if ((st = gr_seed_opts_resolve(&o, &chosen, &err)) != GR_OK) {
        if (st == GR_ERR_INVALID_ARGUMENT) {
            fprintf(stderr, "graphrun demo: %s\n", err.message);
            return GR_EXIT_USAGE;
        }
        fprintf(stderr, "graphrun demo: backend %s: %s: %s\n", gr_backend_name(o.rt.cfg.backend),
                gr_status_str(st), err.message);
        return GR_EXIT_RUNTIME;
    }
    if ((st = gr_graph_create_seed(&graph)) != GR_OK ||
        (st = gr_graph_footprint(graph, o.elems, &footprint)) != GR_OK) {
        fprintf(stderr, "graphrun demo: %llu elements per tensor: %s\n",
                (unsigned long long)o.elems, gr_status_str(st));
        gr_graph_destroy(graph);
        return GR_EXIT_USAGE;
    }
    o.rt.cfg.budget_bytes = o.rt.budget ? o.rt.budget : footprint * DEFAULT_BUDGET_ITERATIONS;
    if ((st = gr_runtime_create(&o.rt.cfg, &rt, &err)) != GR_OK) {
        fprintf(stderr, "graphrun demo: cannot start the runtime: %s: %s\n", gr_status_str(st),
                err.message);
        gr_graph_destroy(graph);
        return GR_EXIT_RUNTIME;
    }
    gr_runtime_info_get(rt, &info);
    if (gr_tensor_set_alloc(&set, o.count, o.elems, (gr_mem_kind)o.rt.memory, o.seed) != GR_OK) {
        fprintf(stderr, "graphrun demo: not enough %s host memory for %llu tensors of %s\n",
                gr_mem_kind_name((gr_mem_kind)o.rt.memory), (unsigned long long)o.count,
                gr_cli_bytes(o.elems * sizeof(float), b1, sizeof(b1)));
        rc = GR_EXIT_RUNTIME;
        goto out;
    }
    gr_tensor_set_fill(&set);

    printf("graphrun demo: seed workload, %llu tensors x %llu float32 (%s each, %s), in place\n",
           (unsigned long long)o.count, (unsigned long long)o.elems,
           gr_cli_bytes(o.elems * sizeof(float), b1, sizeof(b1)),
           gr_mem_kind_name((gr_mem_kind)o.rt.memory));
    printf("backend: %s (%s)\n", gr_backend_name(info.backend), info.backend_note);
    printf("budget: %s per device (one iteration needs %s), %u device(s) x %u workers\n",
           gr_cli_bytes(info.budget_bytes, b1, sizeof(b1)),
           gr_cli_bytes(footprint, b2, sizeof(b2)), info.device_count, info.workers_per_device);
    fflush(stdout);

    t0 = gr_now_ns();
    st = gr_job_submit(rt, graph, set.tensors, o.count, NULL, &job, &err);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun demo: submission refused: %s: %s\n", gr_status_str(st),
                err.message);
        rc = GR_EXIT_USAGE;
        goto out;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &st); /* cannot time out; st is the job's result */
    secs = (double)(gr_now_ns() - t0) / 1e9;
    gr_job_progress_get(job, &prog);
    printf("done in %.3f s: %.1f tensors/s, %.2f GB/s in+out\n", secs, (double)o.count / secs,
           2.0 * (double)o.count * (double)o.elems * sizeof(float) / secs / 1e9);
    for (uint32_t dev = 0; dev < info.device_count; dev++) {
        int ordinal = 0;

        gr_runtime_device_stats(rt, dev, &stats);
        gr_runtime_device_ordinal(rt, dev, &ordinal);
        printf("device %d: %llu iterations, peak budget in use %s of %s, %s in use now\n",
               ordinal, (unsigned long long)stats.iterations_done,
               gr_cli_bytes(stats.budget_peak, b1, sizeof(b1)),
               gr_cli_bytes(stats.budget_bytes, b2, sizeof(b2)),
               gr_cli_bytes(stats.budget_in_use, b3, sizeof(b3)));
    }
    if (st != GR_OK) {
        gr_job_error_get(job, &err);
        fprintf(stderr, "graphrun demo: %llu done, %llu failed, %llu canceled; first error at "
                        "index %llu: %s: %s\n",
                (unsigned long long)prog.done, (unsigned long long)prog.failed,
                (unsigned long long)prog.canceled, (unsigned long long)err.index,
                gr_status_str(err.status), err.message);
        goto out;
    }
    if (!o.verify) {
        printf("verified: skipped (--no-verify)\n");
        rc = GR_EXIT_OK;
        goto out;
    }
    wrong = gr_tensor_set_check(&set, &first_wrong);
    if (wrong != 0) {
        printf("verified: %llu of %llu tensors WRONG (first: tensor %llu)\n",
               (unsigned long long)wrong, (unsigned long long)o.count,
               (unsigned long long)first_wrong);
        goto out;
    }
    printf("verified: %llu of %llu tensors equal the C reference bit for bit\n",
           (unsigned long long)o.count, (unsigned long long)o.count);
    rc = GR_EXIT_OK;
out:
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(graph);
    gr_tensor_set_free(&set);
    return rc;
}

/*
 * demo.c - `graphrun demo`: the seed workload on synthetic tensors, end to end.
 *
 * Every tensor is processed in place by the seed pipeline (H2D -> seed kernel -> D2H) and
 * then compared, bit for bit, with the C reference computed from the same synthetic input.
 * Exit status 0 only when every output is right.
 */
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graphrun.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/workload.h"

#define HOST_DEFAULT_ELEMS (1ull << 20)  /* 4 MiB tensors on the CPU */
#define CUDA_DEFAULT_ELEMS 100000000ull  /* the seed's 400 MB tensors on a GPU */
#define DEFAULT_COUNT 64
#define DEFAULT_BUDGET_ITERATIONS 3
#define CHUNK_ELEMS (1ull << 20) /* work item of the parallel fill and check */

typedef struct demo {
    float **tensors;
    uint64_t count, elems, seed;
    _Atomic uint64_t bad_tensors;
    _Atomic uint64_t first_bad_index;
} demo;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun demo [options]\n"
            "\n"
            "Run the seed workload (ten rounds of x = pow(x * 1.01 + 1.01, 0.5), in place) on\n"
            "synthetic float32 tensors and verify every output against the C reference.\n"
            "\n"
            "  --count N        tensors (default %d)\n"
            "  --elems N        elements per tensor (default %llu on the host backend,\n"
            "                   %llu on CUDA)\n"
            "  --budget SIZE    device memory budget per device, e.g. 2GiB, 512M\n"
            "                   (default: %d iterations' worth)\n"
            "  --workers N      worker threads per device (default 3)\n"
            "  --backend B      host, cuda or auto (default auto)\n"
            "  --seed X         seed of the synthetic data (default 1)\n"
            "  --no-verify      skip the output check\n"
            "  --help           this text\n"
            "\n"
            "Exit status: 0 all outputs verified, 1 wrong outputs or failed tensors,\n"
            "2 bad command line, 3 the runtime could not start.\n",
            DEFAULT_COUNT, (unsigned long long)HOST_DEFAULT_ELEMS,
            (unsigned long long)CUDA_DEFAULT_ELEMS, DEFAULT_BUDGET_ITERATIONS);
}

static int bad_value(const char *flag, const char *value)
{
    fprintf(stderr, "graphrun demo: invalid value '%s' for %s\n", value, flag);
    return GR_EXIT_USAGE;
}

static void fill_chunk(uint64_t item, void *arg)
{
    demo *d = arg;
    uint64_t per = (d->elems + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
    uint64_t t = item / per, first = (item % per) * CHUNK_ELEMS;
    uint64_t n = d->elems - first < CHUNK_ELEMS ? d->elems - first : CHUNK_ELEMS;

    gr_workload_fill(d->tensors[t] + first, first, n, d->seed, t);
}

static void check_tensor(uint64_t t, void *arg)
{
    demo *d = arg;
    uint64_t bad, where;

    bad = gr_workload_check_seed(d->tensors[t], 0, d->elems, d->seed, t, &where);
    if (bad != 0) {
        if (atomic_fetch_add(&d->bad_tensors, 1) == 0)
            atomic_store(&d->first_bad_index, t);
        fprintf(stderr, "MISMATCH: tensor %llu: %llu wrong elements, first at %llu\n",
                (unsigned long long)t, (unsigned long long)bad, (unsigned long long)where);
    }
}

int gr_cmd_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'c'},  {"elems", required_argument, NULL, 'e'},
        {"budget", required_argument, NULL, 'b'}, {"workers", required_argument, NULL, 'w'},
        {"backend", required_argument, NULL, 'k'}, {"seed", required_argument, NULL, 's'},
        {"no-verify", no_argument, NULL, 'n'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gr_config cfg = GR_CONFIG_INIT;
    uint64_t count = DEFAULT_COUNT, elems = 0, budget = 0, workers = 3, footprint;
    bool verify = true;
    demo d = {.seed = 1};
    gr_runtime *rt = NULL;
    gr_graph *graph = NULL;
    gr_tensor *tensors = NULL;
    gr_job *job = NULL;
    gr_runtime_info info;
    gr_device_stats stats;
    gr_job_progress prog;
    gr_error_info err;
    gr_backend chosen;
    gr_status st;
    int64_t t0, t1;
    double secs;
    char b1[32], b2[32], b3[32];
    int rc = GR_EXIT_FAILED, opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            if (!gr_cli_parse_u64(optarg, &count) || count == 0)
                return bad_value("--count", optarg);
            break;
        case 'e':
            if (!gr_cli_parse_u64(optarg, &elems) || elems == 0)
                return bad_value("--elems", optarg);
            break;
        case 'b':
            if (!gr_cli_parse_size(optarg, &budget) || budget == 0)
                return bad_value("--budget", optarg);
            break;
        case 'w':
            if (!gr_cli_parse_u64(optarg, &workers) || workers == 0 || workers > 1024)
                return bad_value("--workers", optarg);
            break;
        case 'k':
            if (strcmp(optarg, "host") == 0)
                cfg.backend = GR_BACKEND_HOST;
            else if (strcmp(optarg, "cuda") == 0)
                cfg.backend = GR_BACKEND_CUDA;
            else if (strcmp(optarg, "auto") == 0)
                cfg.backend = GR_BACKEND_AUTO;
            else
                return bad_value("--backend", optarg);
            break;
        case 's':
            if (!gr_cli_parse_u64(optarg, &d.seed))
                return bad_value("--seed", optarg);
            break;
        case 'n':
            verify = false;
            break;
        case 'h':
            usage(stdout);
            return GR_EXIT_OK;
        default:
            usage(stderr);
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun demo: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }

    st = gr_backend_probe(cfg.backend, NULL, &chosen, &err);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun demo: backend %s: %s: %s\n", gr_backend_name(cfg.backend),
                gr_status_str(st), err.message);
        return GR_EXIT_RUNTIME;
    }
    if (elems == 0)
        elems = chosen == GR_BACKEND_CUDA ? CUDA_DEFAULT_ELEMS : HOST_DEFAULT_ELEMS;
    if ((st = gr_graph_create_seed(&graph)) != GR_OK ||
        (st = gr_graph_footprint(graph, elems, &footprint)) != GR_OK) {
        fprintf(stderr, "graphrun demo: %llu elements per tensor: %s\n",
                (unsigned long long)elems, gr_status_str(st));
        gr_graph_destroy(graph);
        return GR_EXIT_USAGE;
    }
    if (budget == 0)
        budget = footprint * DEFAULT_BUDGET_ITERATIONS;
    cfg.budget_bytes = budget;
    cfg.workers_per_device = (uint32_t)workers;
    if ((st = gr_runtime_create(&cfg, &rt, &err)) != GR_OK) {
        fprintf(stderr, "graphrun demo: cannot start the runtime: %s: %s\n", gr_status_str(st),
                err.message);
        gr_graph_destroy(graph);
        return GR_EXIT_RUNTIME;
    }
    gr_runtime_info_get(rt, &info);

    d.count = count;
    d.elems = elems;
    d.tensors = calloc(count, sizeof(*d.tensors));
    tensors = calloc(count, sizeof(*tensors));
    if (d.tensors == NULL || tensors == NULL)
        goto out_nomem;
    for (uint64_t i = 0; i < count; i++) {
        d.tensors[i] = malloc(elems * sizeof(float));
        if (d.tensors[i] == NULL)
            goto out_nomem;
        tensors[i].in[0] = d.tensors[i];
        tensors[i].out[0] = d.tensors[i];
        tensors[i].elems = elems;
    }
    gr_cli_parallel_for(count * ((elems + CHUNK_ELEMS - 1) / CHUNK_ELEMS), 0, fill_chunk, &d);

    printf("graphrun demo: seed workload, %llu tensors x %llu float32 (%s each), in place\n",
           (unsigned long long)count, (unsigned long long)elems,
           gr_cli_bytes(elems * sizeof(float), b1, sizeof(b1)));
    printf("backend: %s (%s)\n", gr_backend_name(info.backend), info.backend_note);
    printf("budget: %s per device (one iteration needs %s), %u device(s) x %u workers\n",
           gr_cli_bytes(info.budget_bytes, b1, sizeof(b1)),
           gr_cli_bytes(footprint, b2, sizeof(b2)), info.device_count, info.workers_per_device);
    fflush(stdout);

    t0 = gr_now_ns();
    st = gr_job_submit(rt, graph, tensors, count, NULL, &job, &err);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun demo: submission refused: %s: %s\n", gr_status_str(st),
                err.message);
        rc = GR_EXIT_USAGE;
        goto out;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &st); /* cannot time out; st is the job's result */
    t1 = gr_now_ns();
    secs = (double)(t1 - t0) / 1e9;
    gr_job_progress_get(job, &prog);
    printf("done in %.3f s: %.1f tensors/s, %.2f GB/s in+out\n", secs, (double)count / secs,
           2.0 * (double)count * (double)elems * sizeof(float) / secs / 1e9);
    for (uint32_t dev = 0; dev < info.device_count; dev++) {
        gr_runtime_device_stats(rt, dev, &stats);
        printf("device %u: peak budget in use %s of %s, %s in use now\n", dev,
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
    if (!verify) {
        printf("verified: skipped (--no-verify)\n");
        rc = GR_EXIT_OK;
        goto out;
    }
    gr_cli_parallel_for(count, 0, check_tensor, &d);
    if (atomic_load(&d.bad_tensors) != 0) {
        printf("verified: %llu of %llu tensors WRONG (first: tensor %llu)\n",
               (unsigned long long)atomic_load(&d.bad_tensors), (unsigned long long)count,
               (unsigned long long)atomic_load(&d.first_bad_index));
        goto out;
    }
    printf("verified: %llu of %llu tensors equal the C reference bit for bit\n",
           (unsigned long long)count, (unsigned long long)count);
    rc = GR_EXIT_OK;
    goto out;

out_nomem:
    fprintf(stderr, "graphrun demo: not enough host memory for %llu tensors of %llu elements\n",
            (unsigned long long)count, (unsigned long long)elems);
    rc = GR_EXIT_RUNTIME;
out:
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(graph);
    for (uint64_t i = 0; d.tensors && i < count; i++)
        free(d.tensors[i]);
    free(d.tensors);
    free(tensors);
    return rc;
}

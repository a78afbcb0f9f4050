/*
 * bench.c - `graphrun bench`: the seed workload on the GPU against the copy ceilings
 * measured in the same run.
 *
 * 1. Measure the pinned H2D, D2H and simultaneous bidirectional copy ceilings of the device
 *    with copies of one tensor's size.
 * 2. Run the seed workload (in place) and time it from submission to completion.
 * 3. Measure the ceilings again and keep the higher reading of each: the link's speed
 *    drifts by a few percent between measurements, and the floor must not flatter us.
 * 4. Report the time per tensor, the floor (bytes in and out over the bidirectional ceiling)
 *    and floor / achieved (1.0 = at the speed of the link), the peak device memory in use as
 *    the device reports it (sampled every 200 us) against the budget, and the graph
 *    statistics; check every output bit for bit.
 * Exit status 0 only when every output is right.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graphrun.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/tensor_set.h"

#define DEFAULT_COUNT 64
#define DEFAULT_BUDGET (2ull << 30)
#define DEFAULT_REPS 12

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun bench [options]\n"
            "\n"
            "Measure the GPU's pinned copy ceilings, then run the seed workload and report\n"
            "the time per tensor against the floor those ceilings give, and the peak device\n"
            "memory against the budget. Every output is verified.\n"
            "\n" GR_SEED_OPTIONS_HELP
            "  --reps N         copies per direction per trial when measuring ceilings\n"
            "                   (default %d)\n"
            "  --json           print one JSON object instead of text\n"
            "  --help           this text\n"
            "\n"
            "Defaults: %d tensors of 100000000 elements, pinned, budget 2 GiB.\n"
            "Exit status: 0 all outputs verified, 1 wrong outputs or failed tensors,\n"
            "2 bad command line, 3 no usable GPU or the runtime could not start.\n",
            DEFAULT_REPS, DEFAULT_COUNT);
}

typedef struct report {
    char device[128];
    int sm_count;
    gr_seed_opts o;
    gr_ceilings ceil;
    double seconds, per_tensor_ms, floor_ms, ratio;
    double start_ms; /* gr_runtime_create: arena reservation, workers, their contexts */
    uint64_t budget, mem_baseline, mem_peak, mem_total;
    gr_device_stats stats;
    gr_job_progress prog;
    gr_status result;
    gr_error_info error;
    uint64_t wrong;
} report;

static void print_text(const report *r)
{
    const gr_seed_opts *o = &r->o;
    char b1[32], b2[32], b3[32];
    uint64_t above = r->mem_peak - r->mem_baseline;

    printf("graphrun bench: device 0 (%s, %d SMs), %llu tensors x %llu float32 (%s each), %s, "
           "in place, %u workers, %s contexts\n",
           r->device, r->sm_count, (unsigned long long)o->count, (unsigned long long)o->elems,
           gr_cli_bytes(o->elems * sizeof(float), b1, sizeof(b1)),
           gr_mem_kind_name((gr_mem_kind)o->rt.memory), o->rt.cfg.workers_per_device,
           o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE ? "private" : "primary");
    printf("ceilings (pinned, %s copies, best before and after): H2D %.1f GB/s, D2H %.1f "
           "GB/s, both at once %.1f GB/s\n",
           gr_cli_bytes(r->ceil.bytes, b1, sizeof(b1)), r->ceil.h2d_gbs, r->ceil.d2h_gbs,
           r->ceil.bidir_gbs);
    printf("seed workload: %.3f s, %.2f ms per tensor; floor %.2f ms (in+out over both-at-once "
           "ceiling); ratio %.3f\n",
           r->seconds, r->per_tensor_ms, r->floor_ms, r->ratio);
    printf("device memory (from the device): peak %s above the baseline of %s; budget %s; "
           "above the budget: %s\n",
           gr_cli_bytes(above, b1, sizeof(b1)), gr_cli_bytes(r->mem_baseline, b2, sizeof(b2)),
           gr_cli_bytes(r->budget, b3, sizeof(b3)),
           above > r->budget ? gr_cli_bytes(above - r->budget, b1, sizeof(b1)) : "0 B");
    printf("runtime start: %.1f ms (arena, workers%s)\n", r->start_ms,
           o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE ? ", a private context each" : "");
    printf("graphs: %llu instantiated, %llu iterations replayed by in-place update\n",
           (unsigned long long)r->stats.graph_instantiations,
           (unsigned long long)r->stats.graph_updates);
    if (r->result != GR_OK)
        printf("FAILED: %llu done, %llu failed, %llu canceled; index %llu: %s: %s\n",
               (unsigned long long)r->prog.done, (unsigned long long)r->prog.failed,
               (unsigned long long)r->prog.canceled, (unsigned long long)r->error.index,
               gr_status_str(r->error.status), r->error.message);
    else if (!o->verify)
        printf("verified: skipped (--no-verify)\n");
    else if (r->wrong)
        printf("verified: %llu of %llu tensors WRONG\n", (unsigned long long)r->wrong,
               (unsigned long long)o->count);
    else
        printf("verified: %llu of %llu tensors equal the C reference bit for bit\n",
               (unsigned long long)o->count, (unsigned long long)o->count);
}

static void print_json(const report *r)
{
    const gr_seed_opts *o = &r->o;
    json_t *root = json_object();

    json_object_set_new(root, "device", json_string(r->device));
    json_object_set_new(root, "sm_count", json_integer(r->sm_count));
    json_object_set_new(root, "count", json_integer((json_int_t)o->count));
    json_object_set_new(root, "elems", json_integer((json_int_t)o->elems));
    json_object_set_new(root, "bytes_per_tensor",
                        json_integer((json_int_t)(o->elems * sizeof(float))));
    json_object_set_new(root, "memory", json_string(gr_mem_kind_name((gr_mem_kind)o->rt.memory)));
    json_object_set_new(root, "workers", json_integer(o->rt.cfg.workers_per_device));
    json_object_set_new(root, "contexts", json_string(o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE
                                                          ? "private"
                                                          : "primary"));
    json_object_set_new(root, "ceilings",
                        json_pack("{s:I,s:f,s:f,s:f}", "copy_bytes", (json_int_t)r->ceil.bytes,
                                  "h2d_gbs", r->ceil.h2d_gbs, "d2h_gbs", r->ceil.d2h_gbs,
                                  "bidir_gbs", r->ceil.bidir_gbs));
    json_object_set_new(root, "seconds", json_real(r->seconds));
    json_object_set_new(root, "ms_per_tensor", json_real(r->per_tensor_ms));
    json_object_set_new(root, "floor_ms", json_real(r->floor_ms));
    json_object_set_new(root, "ratio", json_real(r->ratio));
    json_object_set_new(root, "device_memory",
                        json_pack("{s:I,s:I,s:I,s:I,s:I}", "baseline", (json_int_t)r->mem_baseline,
                                  "peak", (json_int_t)r->mem_peak, "above_baseline",
                                  (json_int_t)(r->mem_peak - r->mem_baseline), "budget",
                                  (json_int_t)r->budget, "total", (json_int_t)r->mem_total));
    json_object_set_new(root, "start_ms", json_real(r->start_ms));
    json_object_set_new(root, "graph_instantiations",
                        json_integer((json_int_t)r->stats.graph_instantiations));
    json_object_set_new(root, "graph_updates", json_integer((json_int_t)r->stats.graph_updates));
    json_object_set_new(root, "done", json_integer((json_int_t)r->prog.done));
    json_object_set_new(root, "failed", json_integer((json_int_t)r->prog.failed));
    json_object_set_new(root, "canceled", json_integer((json_int_t)r->prog.canceled));
    json_object_set_new(root, "status", json_string(gr_status_str(r->result)));
    json_object_set_new(root, "verified", json_boolean(o->verify));
    json_object_set_new(root, "wrong_tensors", json_integer((json_int_t)r->wrong));
    json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
    fputc('\n', stdout);
    json_decref(root);
}

static gr_status timed_create(const gr_config *cfg, gr_runtime **rt, gr_error_info *err,
                              double *ms)
{
    int64_t t0 = gr_now_ns();
    gr_status st = gr_runtime_create(cfg, rt, err);

    *ms = (double)(gr_now_ns() - t0) / 1e6;
    return st;
}

int gr_cmd_bench(int argc, char **argv)
{
    static const struct option longopts[] = {
        GR_SEED_LONGOPTS,
        {"reps", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    report r;
    bool json = false;
    uint64_t reps = DEFAULT_REPS;
    gr_tensor_set set = {0};
    gr_devmem_sampler *sampler = NULL;
    gr_runtime *rt = NULL;
    gr_graph *graph = NULL;
    gr_job *job = NULL;
    gr_runtime_info info;
    gr_backend chosen;
    gr_status st;
    int64_t t0;
    int rc = GR_EXIT_FAILED, opt, v;

    memset(&r, 0, sizeof(r));
    if (!gr_seed_opts_init(&r.o, "bench", DEFAULT_COUNT))
        return GR_EXIT_USAGE;
    r.o.rt.cfg.backend = GR_BACKEND_CUDA;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return GR_EXIT_OK;
        } else if (opt == 'j') {
            json = true;
        } else if (opt == 'r') {
            if (!gr_cli_parse_u64(optarg, &reps) || reps == 0 || reps > 1000) {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --reps\n", optarg);
                return GR_EXIT_USAGE;
            }
        } else if ((v = gr_seed_opt("bench", opt, optarg, &r.o)) <= 0) {
            if (v == 0)
                usage(stderr);
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun bench: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if ((st = gr_seed_opts_resolve(&r.o, &chosen, &r.error)) != GR_OK ||
        chosen != GR_BACKEND_CUDA) {
        fprintf(stderr, "graphrun bench: measures the CUDA path, which is not available: %s\n",
                st != GR_OK ? r.error.message : "auto chose the host backend");
        return GR_EXIT_RUNTIME;
    }
    r.o.rt.cfg.backend = GR_BACKEND_CUDA;
    r.o.rt.cfg.budget_bytes = r.o.rt.budget ? r.o.rt.budget : DEFAULT_BUDGET;
    gr_device_describe(0, r.device, sizeof(r.device), &r.sm_count);

    st = gr_measure_ceilings(0, r.o.elems * sizeof(float), (int)reps, &r.ceil, &r.error);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun bench: measuring copy ceilings: %s\n", r.error.message);
        return GR_EXIT_RUNTIME;
    }
    if (gr_tensor_set_alloc(&set, r.o.count, r.o.elems, (gr_mem_kind)r.o.rt.memory, r.o.seed) !=
        GR_OK) {
        fprintf(stderr, "graphrun bench: not enough %s host memory for the tensors\n",
                gr_mem_kind_name((gr_mem_kind)r.o.rt.memory));
        return GR_EXIT_RUNTIME;
    }
    gr_tensor_set_fill(&set);
    /* The baseline is taken with this process's primary context already up (the sampler
     * and the ceilings made it): what rises above it is the runtime's. */
    if ((st = gr_devmem_start(0, 200, &sampler, &r.error)) != GR_OK ||
        (st = gr_graph_create_seed(&graph)) != GR_OK ||
        (st = timed_create(&r.o.rt.cfg, &rt, &r.error, &r.start_ms)) != GR_OK) {
        fprintf(stderr, "graphrun bench: cannot start: %s: %s\n", gr_status_str(st),
                r.error.message);
        rc = GR_EXIT_RUNTIME;
        goto out;
    }
    gr_runtime_info_get(rt, &info);
    r.budget = info.budget_bytes;

    t0 = gr_now_ns();
    st = gr_job_submit(rt, graph, set.tensors, r.o.count, NULL, &job, &r.error);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun bench: submission refused: %s: %s\n", gr_status_str(st),
                r.error.message);
        rc = GR_EXIT_USAGE;
        goto out;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &r.result);
    r.seconds = (double)(gr_now_ns() - t0) / 1e9;
    gr_job_progress_get(job, &r.prog);
    gr_job_error_get(job, &r.error);
    gr_runtime_device_stats(rt, 0, &r.stats);
    gr_runtime_destroy(rt);
    rt = NULL;
    gr_devmem_stop(sampler, &r.mem_baseline, &r.mem_peak, &r.mem_total);
    sampler = NULL;
    {
        gr_ceilings after;

        st = gr_measure_ceilings(0, r.o.elems * sizeof(float), (int)reps, &after, &r.error);
        if (st != GR_OK) {
            fprintf(stderr, "graphrun bench: measuring copy ceilings: %s\n", r.error.message);
            rc = GR_EXIT_RUNTIME;
            goto out;
        }
        gr_ceilings_max(&r.ceil, &after);
    }

    r.per_tensor_ms = r.seconds * 1e3 / (double)r.o.count;
    r.floor_ms = 2.0 * (double)(r.o.elems * sizeof(float)) / (r.ceil.bidir_gbs * 1e9) * 1e3;
    r.ratio = r.floor_ms / r.per_tensor_ms;
    if (r.result == GR_OK && r.o.verify)
        r.wrong = gr_tensor_set_check(&set, NULL);
    if (json)
        print_json(&r);
    else
        print_text(&r);
    rc = r.result == GR_OK && r.wrong == 0 ? GR_EXIT_OK : GR_EXIT_FAILED;
out:
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    if (sampler) {
        uint64_t a, b, c;
        gr_devmem_stop(sampler, &a, &b, &c);
    }
    gr_graph_destroy(graph);
    gr_tensor_set_free(&set);
    return rc;
}

/*
 * bench.c - `graphrun bench`: the seed workload on the GPU against the copy ceilings
 * measured in the same run.
 *
 * 1. Measure the pinned H2D, D2H and simultaneous bidirectional copy ceilings of the device
 *    with copies of one tensor's size (at most 400 MB).
 * 2. Run the seed workload (in place), timed from submission to completion; with --sweep,
 *    once per budget (1, 2, 3, 4, 8 tensors' worth) and worker count (1, 2, 3, 4, 8),
 *    refilling the inputs before each run.
 * 3. Measure the ceilings again and keep the higher reading of each: the link's speed
 *    drifts by a few percent between measurements, and the floor must not flatter us.
 * 4. Report per run: the time per tensor, tensors per second, the floor (bytes in and out
 *    over the bidirectional ceiling) and floor / achieved (1.0 = the speed of the link), the
 *    peak device memory in use as the device reports it (sampled every 200 us) against the
 *    budget, the host memory the runtime added (resident set sampled during the run, less
 *    the tensors), and the graph statistics; every output checked bit for bit.
 * Exit status 0 only when every output of every run is right.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/graphrun.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/tensor_set.h"

#define DEFAULT_COUNT 64
#define DEFAULT_BUDGET (2ull << 30)
#define DEFAULT_REPS 12
#define MAX_CEILING_COPY 400000000ull

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun bench [options]\n"
            "\n"
            "Measure the GPU's pinned copy ceilings, then run the seed workload and report\n"
            "the time per tensor against the floor those ceilings give, the peak device\n"
            "memory against the budget, and the host memory the runtime adds. Every output\n"
            "is verified.\n"
            "\n" GR_SEED_OPTIONS_HELP
            "  --layout L       separate (each tensor its own allocation, default) or\n"
            "                   contiguous (all tensors back to back in one allocation)\n"
            "  --sweep          run every budget of 1, 2, 3, 4, 8 tensors with 1, 2, 3, 4, 8\n"
            "                   workers (the table of docs/PERFORMANCE.md)\n"
            "  --reps N         copies per direction per trial when measuring ceilings\n"
            "                   (default %d)\n"
            "  --json           print JSON (one object per run) instead of text\n"
            "  --help           this text\n"
            "\n"
            "Defaults: %d tensors of 100000000 elements, pinned, budget 2 GiB.\n"
            "Exit status: 0 all outputs verified, 1 wrong outputs or failed tensors,\n"
            "2 bad command line, 3 no usable GPU or the runtime could not start.\n",
            DEFAULT_REPS, DEFAULT_COUNT);
}

typedef struct run_result {
    uint64_t budget_asked, budget;
    uint32_t workers;
    double seconds, start_ms;
    uint64_t mem_baseline, mem_peak, mem_total;
    uint64_t rss_before, rss_peak; /* bytes */
    gr_device_stats stats;
    gr_job_progress prog;
    gr_status result;
    gr_error_info error;
    uint64_t wrong;
} run_result;

/* Resident set of this process, from /proc; 0 when unknown. */
static uint64_t rss_bytes(void)
{
    unsigned long long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu %llu", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* One run: runtime up, the job, runtime down, outputs checked. GR_OK when it ran (the
 * job's own result is in r); else why it could not start. */
static gr_status run_once(const gr_seed_opts *o, gr_config cfg, gr_graph *g, gr_tensor_set *set,
                          run_result *r)
{
    gr_devmem_sampler *sampler = NULL;
    gr_runtime *rt = NULL;
    gr_job *job = NULL;
    gr_runtime_info info;
    gr_status st;
    int64_t t0;

    r->budget_asked = cfg.budget_bytes;
    r->workers = cfg.workers_per_device;
    gr_tensor_set_fill(set);
    r->rss_before = r->rss_peak = rss_bytes();
    /* The baseline is taken with this process's primary context already up (the ceilings
     * made it): what rises above it is the runtime's. */
    if ((st = gr_devmem_start(0, 200, &sampler, &r->error)) != GR_OK)
        return st;
    t0 = gr_now_ns();
    st = gr_runtime_create(&cfg, &rt, &r->error);
    r->start_ms = (double)(gr_now_ns() - t0) / 1e6;
    if (st != GR_OK)
        goto out;
    gr_runtime_info_get(rt, &info);
    r->budget = info.budget_bytes;
    t0 = gr_now_ns();
    if ((st = gr_job_submit(rt, g, set->tensors, set->count, NULL, &job, &r->error)) != GR_OK)
        goto out;
    while (gr_job_wait(job, 5000000, &r->result) == GR_ERR_TIMEOUT) {
        uint64_t rss = rss_bytes();
        if (rss > r->rss_peak)
            r->rss_peak = rss;
    }
    r->seconds = (double)(gr_now_ns() - t0) / 1e9;
    if (rss_bytes() > r->rss_peak)
        r->rss_peak = rss_bytes();
    gr_job_progress_get(job, &r->prog);
    gr_job_error_get(job, &r->error);
    gr_runtime_device_stats(rt, 0, &r->stats);
out:
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_devmem_stop(sampler, &r->mem_baseline, &r->mem_peak, &r->mem_total);
    if (st == GR_OK && r->result == GR_OK && o->verify)
        r->wrong = gr_tensor_set_check(set, NULL);
    return st;
}

typedef struct report {
    char device[128];
    int sm_count;
    const char *layout;
    gr_ceilings ceil;
} report;

static double floor_ms(const report *rep, const gr_seed_opts *o)
{
    return 2.0 * (double)(o->elems * sizeof(float)) / (rep->ceil.bidir_gbs * 1e9) * 1e3;
}

static void print_text_header(const report *rep, const gr_seed_opts *o)
{
    char b1[32];

    printf("graphrun bench: device 0 (%s, %d SMs), %llu tensors x %llu float32 (%s each), %s, "
           "%s, in place, %s contexts\n",
           rep->device, rep->sm_count, (unsigned long long)o->count,
           (unsigned long long)o->elems, gr_cli_bytes(o->elems * sizeof(float), b1, sizeof(b1)),
           gr_mem_kind_name((gr_mem_kind)o->rt.memory), rep->layout,
           o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE ? "private" : "primary");
    printf("ceilings (pinned, %s copies, best before and after): H2D %.1f GB/s, D2H %.1f "
           "GB/s, both at once %.1f GB/s; floor %.3f ms per tensor\n",
           gr_cli_bytes(rep->ceil.bytes, b1, sizeof(b1)), rep->ceil.h2d_gbs, rep->ceil.d2h_gbs,
           rep->ceil.bidir_gbs, floor_ms(rep, o));
}

static void print_text_run(const report *rep, const gr_seed_opts *o, const run_result *r)
{
    char b1[32], b2[32], b3[32];
    double per_ms = r->seconds * 1e3 / (double)o->count;
    uint64_t above = r->mem_peak - r->mem_baseline;
    uint64_t rss_added = r->rss_peak > r->rss_before ? r->rss_peak - r->rss_before : 0;

    printf("budget %s, %u workers: %.3f s, %.3f ms per tensor, %.0f tensors/s, ratio %.3f; "
           "device memory peak %s above baseline; runtime host memory %s; graphs %llu "
           "instantiated, %llu updated; start %.1f ms; %s\n",
           gr_cli_bytes(r->budget, b1, sizeof(b1)), r->workers, r->seconds, per_ms,
           (double)o->count / r->seconds, floor_ms(rep, o) / per_ms,
           gr_cli_bytes(above, b2, sizeof(b2)), gr_cli_bytes(rss_added, b3, sizeof(b3)),
           (unsigned long long)r->stats.graph_instantiations,
           (unsigned long long)r->stats.graph_updates, r->start_ms,
           r->result != GR_OK ? "FAILED"
           : !o->verify      ? "not verified"
           : r->wrong        ? "WRONG OUTPUTS"
                             : "all outputs verified");
    if (r->result != GR_OK)
        printf("  %llu done, %llu failed, %llu canceled; index %llu: %s: %s\n",
               (unsigned long long)r->prog.done, (unsigned long long)r->prog.failed,
               (unsigned long long)r->prog.canceled, (unsigned long long)r->error.index,
               gr_status_str(r->error.status), r->error.message);
}

static void print_json_run(const report *rep, const gr_seed_opts *o, const run_result *r)
{
    double per_ms = r->seconds * 1e3 / (double)o->count;
    json_t *root = json_object();

    json_object_set_new(root, "device", json_string(rep->device));
    json_object_set_new(root, "sm_count", json_integer(rep->sm_count));
    json_object_set_new(root, "count", json_integer((json_int_t)o->count));
    json_object_set_new(root, "elems", json_integer((json_int_t)o->elems));
    json_object_set_new(root, "bytes_per_tensor",
                        json_integer((json_int_t)(o->elems * sizeof(float))));
    json_object_set_new(root, "memory", json_string(gr_mem_kind_name((gr_mem_kind)o->rt.memory)));
    json_object_set_new(root, "layout", json_string(rep->layout));
    json_object_set_new(root, "workers", json_integer(r->workers));
    json_object_set_new(root, "contexts", json_string(o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE
                                                          ? "private"
                                                          : "primary"));
    json_object_set_new(root, "ceilings",
                        json_pack("{s:I,s:f,s:f,s:f}", "copy_bytes", (json_int_t)rep->ceil.bytes,
                                  "h2d_gbs", rep->ceil.h2d_gbs, "d2h_gbs", rep->ceil.d2h_gbs,
                                  "bidir_gbs", rep->ceil.bidir_gbs));
    json_object_set_new(root, "seconds", json_real(r->seconds));
    json_object_set_new(root, "ms_per_tensor", json_real(per_ms));
    json_object_set_new(root, "tensors_per_s", json_real((double)o->count / r->seconds));
    json_object_set_new(root, "floor_ms", json_real(floor_ms(rep, o)));
    json_object_set_new(root, "ratio", json_real(floor_ms(rep, o) / per_ms));
    json_object_set_new(root, "device_memory",
                        json_pack("{s:I,s:I,s:I,s:I,s:I}", "baseline", (json_int_t)r->mem_baseline,
                                  "peak", (json_int_t)r->mem_peak, "above_baseline",
                                  (json_int_t)(r->mem_peak - r->mem_baseline), "budget",
                                  (json_int_t)r->budget, "total", (json_int_t)r->mem_total));
    json_object_set_new(root, "runtime_host_memory",
                        json_integer((json_int_t)(r->rss_peak > r->rss_before
                                                      ? r->rss_peak - r->rss_before
                                                      : 0)));
    json_object_set_new(root, "start_ms", json_real(r->start_ms));
    json_object_set_new(root, "graph_instantiations",
                        json_integer((json_int_t)r->stats.graph_instantiations));
    json_object_set_new(root, "graph_updates", json_integer((json_int_t)r->stats.graph_updates));
    json_object_set_new(root, "iterations", json_integer((json_int_t)r->stats.iterations_done));
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

int gr_cmd_bench(int argc, char **argv)
{
    static const struct option longopts[] = {
        GR_SEED_LONGOPTS,
        {"layout", required_argument, NULL, 'L'},
        {"sweep", no_argument, NULL, 'W'},
        {"reps", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const uint32_t sweep_budgets[] = {1, 2, 3, 4, 8}, sweep_workers[] = {1, 2, 3, 4, 8};
    gr_seed_opts o;
    report rep = {.layout = "separate"};
    bool json = false, sweep = false, contiguous = false, all_ok = true;
    uint64_t reps = DEFAULT_REPS, footprint, copy_bytes;
    gr_tensor_set set = {0};
    gr_graph *graph = NULL;
    gr_error_info err;
    gr_backend chosen;
    gr_ceilings after;
    gr_status st;
    run_result *runs = NULL;
    size_t n_runs = 0;
    int rc = GR_EXIT_FAILED, opt, v;

    if (!gr_seed_opts_init(&o, "bench", DEFAULT_COUNT))
        return GR_EXIT_USAGE;
    o.rt.cfg.backend = GR_BACKEND_CUDA;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return GR_EXIT_OK;
        } else if (opt == 'j') {
            json = true;
        } else if (opt == 'W') {
            sweep = true;
        } else if (opt == 'L') {
            if (strcmp(optarg, "contiguous") == 0 || strcmp(optarg, "separate") == 0) {
                contiguous = optarg[0] == 'c';
                rep.layout = contiguous ? "contiguous" : "separate";
            } else {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --layout\n", optarg);
                return GR_EXIT_USAGE;
            }
        } else if (opt == 'r') {
            if (!gr_cli_parse_u64(optarg, &reps) || reps == 0 || reps > 1000) {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --reps\n", optarg);
                return GR_EXIT_USAGE;
            }
        } else if ((v = gr_seed_opt("bench", opt, optarg, &o)) <= 0) {
            if (v == 0)
                usage(stderr);
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun bench: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if ((st = gr_seed_opts_resolve(&o, &chosen, &err)) != GR_OK || chosen != GR_BACKEND_CUDA) {
        fprintf(stderr, "graphrun bench: measures the CUDA path, which is not available: %s\n",
                st != GR_OK ? err.message : "auto chose the host backend");
        return GR_EXIT_RUNTIME;
    }
    o.rt.cfg.backend = GR_BACKEND_CUDA;
    gr_device_describe(0, rep.device, sizeof(rep.device), &rep.sm_count);
    copy_bytes = o.elems * sizeof(float);
    if (copy_bytes > MAX_CEILING_COPY)
        copy_bytes = MAX_CEILING_COPY;
    if (copy_bytes < (64u << 20) && o.count * o.elems * sizeof(float) >= (64u << 20))
        copy_bytes = 64u << 20; /* small tensors: the link's ceiling for large copies */
    if ((st = gr_measure_ceilings(0, copy_bytes, (int)reps, &rep.ceil, &err)) != GR_OK) {
        fprintf(stderr, "graphrun bench: measuring copy ceilings: %s\n", err.message);
        return GR_EXIT_RUNTIME;
    }
    st = contiguous ? gr_tensor_set_alloc_contiguous(&set, o.count, o.elems,
                                                     (gr_mem_kind)o.rt.memory, o.seed)
                    : gr_tensor_set_alloc(&set, o.count, o.elems, (gr_mem_kind)o.rt.memory,
                                          o.seed);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun bench: not enough %s host memory for the tensors\n",
                gr_mem_kind_name((gr_mem_kind)o.rt.memory));
        return GR_EXIT_RUNTIME;
    }
    gr_graph_create_seed(&graph);
    gr_graph_footprint(graph, o.elems, &footprint);
    runs = calloc(sweep ? 25 : 1, sizeof(*runs));
    for (size_t b = 0; b < (sweep ? 5u : 1u); b++) {
        for (size_t w = 0; w < (sweep ? 5u : 1u); w++) {
            gr_config cfg = o.rt.cfg;
            run_result *r = &runs[n_runs];

            if (sweep) {
                /* A budget of k tensors, rounded up to the 2 MiB granule so k fit. */
                cfg.budget_bytes = (footprint * sweep_budgets[b] + (2u << 20) - 1) /
                                   (2u << 20) * (2u << 20);
                cfg.workers_per_device = sweep_workers[w];
            } else {
                cfg.budget_bytes = o.rt.budget ? o.rt.budget : DEFAULT_BUDGET;
            }
            if ((st = run_once(&o, cfg, graph, &set, r)) != GR_OK) {
                fprintf(stderr, "graphrun bench: cannot run: %s: %s\n", gr_status_str(st),
                        r->error.message);
                rc = GR_EXIT_RUNTIME;
                goto out;
            }
            all_ok &= r->result == GR_OK && r->wrong == 0;
            n_runs++;
        }
    }
    if ((st = gr_measure_ceilings(0, copy_bytes, (int)reps, &after, &err)) != GR_OK) {
        fprintf(stderr, "graphrun bench: measuring copy ceilings: %s\n", err.message);
        rc = GR_EXIT_RUNTIME;
        goto out;
    }
    gr_ceilings_max(&rep.ceil, &after);
    if (!json)
        print_text_header(&rep, &o);
    for (size_t i = 0; i < n_runs; i++) {
        if (json)
            print_json_run(&rep, &o, &runs[i]);
        else
            print_text_run(&rep, &o, &runs[i]);
    }
    rc = all_ok ? GR_EXIT_OK : GR_EXIT_FAILED;
out:
    free(runs);
    gr_graph_destroy(graph);
    gr_tensor_set_free(&set);
    return rc;
}

/*
 * run.c - `graphrun run`: stream tensors from files through a graph spec and write the
 * results, with live progress on a terminal, clean cancellation on Ctrl-C and an optional
 * JSON summary.
 *
 * Outputs are all-or-nothing (io.h): written only when every tensor is done, first to
 * temporary files, then renamed into place; a failed or interrupted run writes nothing.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graphrun.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/progress.h"

#define DEFAULT_BUDGET_ITERATIONS 3
#define POLL_NS (200 * 1000000ll)

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun run --graph FILE --input PATH... --output PATH... [options]\n"
            "\n"
            "Stream tensors from files through a graph and write the results.\n"
            "\n"
            "  --graph FILE     the graph spec (docs/GRAPH_SPEC.md), e.g.\n"
            "                   graph/examples/seed.graph\n"
            "  --input PATH     input port 0, 1, ... in order: a .npy file (float32, C order),\n"
            "                   a raw float32 file, or a directory of them (one tensor per\n"
            "                   file; every input directory holds the same file names)\n"
            "  --output PATH    output port 0, 1, ... in order: a file (.npy when the name\n"
            "                   ends in .npy, else raw float32), or a directory when the\n"
            "                   inputs are directories (files named as in the first input)\n"
            "  --dtype T        element type of raw input files: float32 (the only one)\n"
            "  --shape D0,D1..  shape of raw input files (default: 1-D, from the size)\n"
            "  --force          overwrite existing outputs\n"
            "  --ceilings       CUDA: measure the copy ceilings first and report the ratio\n"
            "  --json           print a JSON summary on stdout\n"
            "  --progress WHEN  auto (on a terminal), always or never (default auto)\n"
            "  --help           this text\n" GR_RUNTIME_OPTIONS_HELP
            "\n"
            "Outputs are all or nothing: written, complete, only when every tensor is done.\n"
            "Exit status: 0 done, 1 some tensors failed (nothing written), 2 bad command\n"
            "line, graph or input, 3 the runtime could not start, 130 interrupted (Ctrl-C or\n"
            "SIGTERM; in-flight iterations finish, nothing written).\n");
}

typedef struct run_args {
    const char *graph;
    const char **inputs, **outputs;
    uint32_t n_inputs, n_outputs;
    const char *dtype;
    gr_io_shape shape;
    bool have_shape, force, json, ceilings;
    int progress;
    gr_runtime_opts rt;
} run_args;

static int parse_args(int argc, char **argv, run_args *a)
{
    static const struct option longopts[] = {
        GR_RUNTIME_LONGOPTS,
        {"graph", required_argument, NULL, 'g'},
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"dtype", required_argument, NULL, 'd'},
        {"shape", required_argument, NULL, 'S'},
        {"force", no_argument, NULL, 'f'},
        {"ceilings", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'j'},
        {"progress", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt, r;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'g':
            a->graph = optarg;
            break;
        case 'i':
            if (a->n_inputs == GR_MAX_PORTS)
                goto too_many;
            a->inputs[a->n_inputs++] = optarg;
            break;
        case 'o':
            if (a->n_outputs == GR_MAX_PORTS)
                goto too_many;
            a->outputs[a->n_outputs++] = optarg;
            break;
        case 'd':
            a->dtype = optarg;
            break;
        case 'S':
            if (!gr_io_parse_shape(optarg, &a->shape)) {
                fprintf(stderr, "graphrun run: invalid value '%s' for --shape (want e.g. 3,4)\n",
                        optarg);
                return GR_EXIT_USAGE;
            }
            a->have_shape = true;
            break;
        case 'f':
            a->force = true;
            break;
        case 'C':
            a->ceilings = true;
            break;
        case 'j':
            a->json = true;
            break;
        case 'P':
            if (strcmp(optarg, "auto") == 0)
                a->progress = 0;
            else if (strcmp(optarg, "always") == 0)
                a->progress = 1;
            else if (strcmp(optarg, "never") == 0)
                a->progress = -1;
            else {
                fprintf(stderr, "graphrun run: invalid value '%s' for --progress\n", optarg);
                return GR_EXIT_USAGE;
            }
            break;
        case 'h':
            usage(stdout);
            return GR_EXIT_OK;
        default:
            r = gr_runtime_opt("run", opt, optarg, &a->rt);
            if (r == 1)
                break;
            if (r == 0)
                usage(stderr);
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun run: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if (a->graph == NULL || a->n_inputs == 0 || a->n_outputs == 0) {
        fprintf(stderr, "graphrun run: --graph, --input and --output are required\n");
        usage(stderr);
        return GR_EXIT_USAGE;
    }
    return -1; /* go on */
too_many:
    fprintf(stderr, "graphrun run: at most %d inputs and %d outputs\n", GR_MAX_PORTS,
            GR_MAX_PORTS);
    return GR_EXIT_USAGE;
}

typedef struct summary {
    const char *status;
    gr_job_progress prog;
    uint64_t count, bytes_in, bytes_out, outputs_written;
    double seconds;
    gr_runtime_info info;
    uint64_t budget_peak;
    uint64_t errors[GR_STATUS_COUNT_];
    gr_error_info first;
    bool have_ceilings;
    gr_ceilings ceil;
    bool have_devmem;
    uint64_t devmem_above;
} summary;

static void print_json(const summary *s)
{
    json_t *root = json_object(), *errors = json_object();

    json_object_set_new(root, "status", json_string(s->status));
    json_object_set_new(root, "tensors", json_integer((json_int_t)s->count));
    json_object_set_new(root, "done", json_integer((json_int_t)s->prog.done));
    json_object_set_new(root, "failed", json_integer((json_int_t)s->prog.failed));
    json_object_set_new(root, "canceled", json_integer((json_int_t)s->prog.canceled));
    json_object_set_new(root, "outputs_written", json_integer((json_int_t)s->outputs_written));
    json_object_set_new(root, "bytes_in", json_integer((json_int_t)s->bytes_in));
    json_object_set_new(root, "bytes_out", json_integer((json_int_t)s->bytes_out));
    json_object_set_new(root, "seconds", json_real(s->seconds));
    json_object_set_new(root, "gb_per_s", json_real(s->seconds > 0 ? (double)(s->bytes_in + s->bytes_out) / s->seconds / 1e9 : 0));
    json_object_set_new(root, "backend", json_string(gr_backend_name(s->info.backend)));
    json_object_set_new(root, "devices", json_integer(s->info.device_count));
    json_object_set_new(root, "workers_per_device", json_integer(s->info.workers_per_device));
    json_object_set_new(root, "budget_bytes", json_integer((json_int_t)s->info.budget_bytes));
    json_object_set_new(root, "budget_peak_bytes", json_integer((json_int_t)s->budget_peak));
    if (s->have_devmem)
        json_object_set_new(root, "device_memory_peak_above_baseline",
                            json_integer((json_int_t)s->devmem_above));
    if (s->have_ceilings) {
        double floor_s = (double)(s->bytes_in + s->bytes_out) / (s->ceil.bidir_gbs * 1e9);

        json_object_set_new(root, "ceiling_bidir_gbs", json_real(s->ceil.bidir_gbs));
        json_object_set_new(root, "floor_seconds", json_real(floor_s));
        json_object_set_new(root, "ratio", json_real(s->seconds > 0 ? floor_s / s->seconds : 0));
    }
    for (int st = 1; st < GR_STATUS_COUNT_; st++)
        if (s->errors[st])
            json_object_set_new(errors, gr_status_str((gr_status)st),
                                json_integer((json_int_t)s->errors[st]));
    json_object_set_new(root, "errors", errors);
    if (s->first.status != GR_OK) {
        json_t *e = json_object();

        json_object_set_new(e, "status", json_string(gr_status_str(s->first.status)));
        json_object_set_new(e, "index", json_integer((json_int_t)s->first.index));
        json_object_set_new(e, "node", json_string(s->first.node));
        json_object_set_new(e, "message", json_string(s->first.message));
        json_object_set_new(root, "first_error", e);
    }
    json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
    fputc('\n', stdout);
    json_decref(root);
}

static void print_text(const summary *s)
{
    char b1[32], b2[32];

    printf("%s: %llu of %llu tensors done, %llu failed, %llu canceled; %llu outputs written\n",
           s->status, (unsigned long long)s->prog.done, (unsigned long long)s->count,
           (unsigned long long)s->prog.failed, (unsigned long long)s->prog.canceled,
           (unsigned long long)s->outputs_written);
    printf("%.3f s, %.2f GB/s in+out; backend %s; budget %s, peak %s\n", s->seconds,
           s->seconds > 0 ? (double)(s->bytes_in + s->bytes_out) / s->seconds / 1e9 : 0,
           gr_backend_name(s->info.backend), gr_cli_bytes(s->info.budget_bytes, b1, sizeof(b1)),
           gr_cli_bytes(s->budget_peak, b2, sizeof(b2)));
    if (s->have_ceilings) {
        double floor_s = (double)(s->bytes_in + s->bytes_out) / (s->ceil.bidir_gbs * 1e9);
        printf("floor %.3f s at the both-ways ceiling of %.1f GB/s: ratio %.3f\n", floor_s,
               s->ceil.bidir_gbs, floor_s / s->seconds);
    }
    if (s->first.status != GR_OK)
        printf("first error: index %llu%s%s: %s: %s\n", (unsigned long long)s->first.index,
               s->first.node[0] ? ", node " : "", s->first.node, gr_status_str(s->first.status),
               s->first.message);
}

int gr_cmd_run(int argc, char **argv)
{
    const char *inputs[GR_MAX_PORTS], *outputs[GR_MAX_PORTS];
    run_args a = {.inputs = inputs, .outputs = outputs};
    gr_io_options io = {0};
    gr_io_plan plan = {0};
    gr_runtime *rt = NULL;
    gr_graph *g = NULL;
    gr_job *job = NULL;
    gr_devmem_sampler *sampler = NULL;
    gr_progress progress;
    struct sigaction sa;
    gr_error_info err;
    gr_backend chosen;
    summary s;
    char why[512];
    uint64_t largest = 0, footprint = 0, devmem_base = 0, devmem_peak = 0, devmem_total = 0;
    gr_status st, result = GR_OK;
    int64_t t0;
    int rc;

    memset(&s, 0, sizeof(s));
    if (!gr_runtime_opts_init(&a.rt, "run"))
        return GR_EXIT_USAGE;
    if ((rc = parse_args(argc, argv, &a)) >= 0)
        return rc;

    if ((st = gr_graph_load(a.graph, &g, &err)) != GR_OK) {
        fprintf(stderr, "graphrun run: %s\n", err.message);
        return GR_EXIT_USAGE;
    }
    if (a.n_inputs != gr_graph_input_count(g) || a.n_outputs != gr_graph_output_count(g)) {
        fprintf(stderr,
                "graphrun run: %s takes %u input(s) and %u output(s); got %u --input and %u "
                "--output\n",
                a.graph, gr_graph_input_count(g), gr_graph_output_count(g), a.n_inputs,
                a.n_outputs);
        rc = GR_EXIT_USAGE;
        goto out;
    }
    if ((st = gr_runtime_opts_resolve(&a.rt, &chosen, &err)) != GR_OK) {
        fprintf(stderr, "graphrun run: backend %s: %s\n", gr_backend_name(a.rt.cfg.backend),
                err.message);
        rc = GR_EXIT_RUNTIME;
        goto out;
    }

    io.inputs = inputs;
    io.n_inputs = a.n_inputs;
    io.outputs = outputs;
    io.n_outputs = a.n_outputs;
    io.raw_dtype = a.dtype;
    io.raw_shape = a.have_shape ? &a.shape : NULL;
    io.force = a.force;
    io.memory = (gr_mem_kind)a.rt.memory;
    if (gr_io_plan_create(&io, &plan, why, sizeof(why)) != GR_OK ||
        gr_io_stage(&plan, why, sizeof(why)) != GR_OK) {
        fprintf(stderr, "graphrun run: %s\n", why);
        rc = GR_EXIT_USAGE;
        goto out;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: waits return to look at the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    st = gr_io_load(&plan, &interrupted, why, sizeof(why));
    if (st != GR_OK) {
        if (st == GR_ERR_CANCELED)
            goto interrupted_early;
        fprintf(stderr, "graphrun run: %s\n", why);
        rc = st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
        goto out;
    }
    for (uint64_t i = 0; i < plan.count; i++)
        if (plan.tensors[i].elems > largest)
            largest = plan.tensors[i].elems;
    gr_graph_footprint(g, largest, &footprint);
    a.rt.cfg.budget_bytes = a.rt.budget ? a.rt.budget : footprint * DEFAULT_BUDGET_ITERATIONS;
    if (chosen == GR_BACKEND_CUDA && a.ceilings) {
        s.have_ceilings = gr_measure_ceilings(0, largest * sizeof(float), 8, &s.ceil, &err) ==
                          GR_OK;
        if (!s.have_ceilings)
            fprintf(stderr, "graphrun run: cannot measure ceilings: %s\n", err.message);
    }
    if (chosen == GR_BACKEND_CUDA)
        s.have_devmem = gr_devmem_start(0, 1000, &sampler, &err) == GR_OK;
    if ((st = gr_runtime_create(&a.rt.cfg, &rt, &err)) != GR_OK) {
        fprintf(stderr, "graphrun run: cannot start the runtime: %s: %s\n", gr_status_str(st),
                err.message);
        rc = GR_EXIT_RUNTIME;
        goto out;
    }
    gr_runtime_info_get(rt, &s.info);

    t0 = gr_now_ns();
    if ((st = gr_job_submit(rt, g, plan.tensors, plan.count, NULL, &job, &err)) != GR_OK) {
        fprintf(stderr, "graphrun run: refused: %s: %s\n", gr_status_str(st), err.message);
        rc = GR_EXIT_USAGE;
        goto out;
    }
    gr_progress_start(&progress, a.progress,
                      (plan.bytes_in + plan.bytes_out) / (plan.count ? plan.count : 1));
    while (gr_job_wait(job, POLL_NS, &result) == GR_ERR_TIMEOUT) {
        gr_job_progress jp;

        if (interrupted)
            gr_job_cancel(job); /* idempotent; in-flight iterations finish */
        gr_job_progress_get(job, &jp);
        gr_progress_draw(&progress, &jp, rt);
    }
    gr_progress_end(&progress);
    s.seconds = (double)(gr_now_ns() - t0) / 1e9;
    gr_job_progress_get(job, &s.prog);
    gr_job_error_get(job, &s.first);
    for (uint64_t i = 0; i < plan.count; i++) {
        gr_status ist = GR_OK;
        gr_job_index_get(job, i, NULL, &ist);
        s.errors[ist]++;
    }
    for (uint32_t d = 0; d < s.info.device_count; d++) {
        gr_device_stats ds;
        if (gr_runtime_device_stats(rt, d, &ds) == GR_OK && ds.budget_peak > s.budget_peak)
            s.budget_peak = ds.budget_peak;
    }
    gr_job_destroy(job);
    job = NULL;
    gr_runtime_destroy(rt);
    rt = NULL;
    if (sampler) {
        gr_devmem_stop(sampler, &devmem_base, &devmem_peak, &devmem_total);
        sampler = NULL;
        s.devmem_above = devmem_peak - devmem_base;
    }
    s.count = plan.count;
    s.bytes_in = plan.bytes_in;
    s.bytes_out = plan.bytes_out;

    if (interrupted) {
        s.status = "interrupted";
        rc = GR_EXIT_CANCELED;
    } else if (result != GR_OK) {
        s.status = "failed";
        rc = GR_EXIT_FAILED;
    } else if ((st = gr_io_commit(&plan, &interrupted, why, sizeof(why))) != GR_OK) {
        s.status = st == GR_ERR_CANCELED ? "interrupted" : "failed";
        rc = st == GR_ERR_CANCELED ? GR_EXIT_CANCELED : GR_EXIT_FAILED;
        if (st != GR_ERR_CANCELED)
            fprintf(stderr, "graphrun run: %s\n", why);
    } else {
        s.status = "ok";
        s.outputs_written = plan.count * plan.opt.n_outputs;
        rc = GR_EXIT_OK;
    }
    if (rc != GR_EXIT_OK) {
        gr_io_abort(&plan);
        fprintf(stderr, "graphrun run: %s: no output written\n", s.status);
    }
    if (a.json)
        print_json(&s);
    else
        print_text(&s);
    goto out;

interrupted_early:
    fprintf(stderr, "graphrun run: interrupted while loading inputs: no output written\n");
    rc = GR_EXIT_CANCELED;
out:
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    if (sampler)
        gr_devmem_stop(sampler, &devmem_base, &devmem_peak, &devmem_total);
    gr_io_plan_free(&plan);
    gr_graph_destroy(g);
    return rc;
}

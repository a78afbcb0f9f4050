/*
 * check.c - `graphrun check`: a dry run of `graphrun run`. It reads the graph and every
 * input's header (stdin whole, into memory) exactly as run does, through the same code
 * (runopts.h, io.h, inputs.h, opts.h), and asks the runtime's own planner how the job would
 * be cut (gr_graph_plan_units, which also refuses a kernel the backend cannot run), and
 * whether the host memory holds the largest tensor (window.h), and estimates all the host
 * memory the run needs against the system's limits (hostneed.h: a warning, not a refusal,
 * as those figures are upper bounds), but loads no tensor, starts no runtime and creates
 * no file: what it refuses, run refuses with the same message and
 * status, and what it accepts, run accepts (short of what only running can find: memory, a
 * device lost, a file changed meanwhile).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/hostneed.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/runopts.h"
#include "tools/graphrun/window.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun check --graph FILE --input PATH... [--output PATH...] [options]\n"
            "\n"
            "Check a `graphrun run` without running it: the graph, every input (its header,\n"
            "type and shape), the outputs when given, and the flags, as run would, with the\n"
            "same refusals (every input that cannot be read named, in one pass); then print\n"
            "each tensor's device footprint, the least budget the job needs, how the runtime\n"
            "would cut each tensor (whole, in N chunks, or batched K to a unit), and the host\n"
            "memory the run needs at once against --host-memory, and its estimate of all\n"
            "the host memory the run needs (the window, the budget on the host backend, the\n"
            "workers' staging, the threads' stacks and malloc arenas) against the\n"
            "address-space limit (RLIMIT_AS), the cgroup's memory.max and the memory\n"
            "available, with a warning on stderr, saying what to lower, where it exceeds\n"
            "one. Nothing is loaded or run, and no file is created.\n"
            "\n"
            "  --graph FILE     the graph spec\n"
            "  --kernels FILE   CUDA C kernels to register first (repeatable), as for run\n"
            "  --input PATH     input port 0, 1, ... as for run: a file, a directory, @LIST,\n"
            "                   or - (stdin, read whole)\n"
            "  --output PATH    output port 0, 1, ...: checked as run would (optional)\n"
            "  --const NAME=FILE\n"
            "                   constant NAME's file, as for run (one for each constant the\n"
            "                   spec declares): its header (or a raw file's size), type and\n"
            "                   element count checked against the declaration, not loaded\n"
            "  --dtype T        raw inputs' element type, as for run\n"
            "  --shape D0,D1..  raw inputs' shape, as for run\n"
            "  --raw            a directory's files are raw tensors, as for run\n"
            "  --force          existing outputs may be replaced, as for run\n"
            "  --json           print the check as JSON on stdout (refusals too)\n"
            "  --help           this text\n" GR_RUN_HOST_MEMORY_HELP GR_RUNTIME_OPTIONS_HELP
            "\n"
            "Run's flags that say how a run goes, not what it is, are not taken: --resume,\n"
            "--keep-going, --all-or-nothing, --manifest, --progress, --mpi and --mpi-timeout,\n"
            "--sync, --io, --no-direct, --no-read-ahead and --ceilings (drop them to check a\n"
            "run's command line).\n"
            "\n"
            "The budget is --budget, else run's default (three iterations of the largest\n"
            "tensor, and the constants). Exit status: 0 run would take the job, 2 it would\n"
            "refuse it (a bad command line, graph, input or constant, or a budget too small\n"
            "for a graph that cannot be cut), 3 the backend is not there.\n");
}

/* check takes exactly the flags it shares with run, parsed by the same code (runopts.h). */
typedef gr_run_opts check_args;

/* Whether `arg` is one of run's flags that check does not take (see usage). */
static bool run_only(const char *arg)
{
    static const char *const flags[] = {"resume",   "keep-going", "all-or-nothing",
                                        "manifest", "progress",   "mpi",
                                        "mpi-timeout", "sync",    "io",
                                        "no-direct", "no-read-ahead", "ceilings"};
    size_t n;

    if (strncmp(arg, "--", 2) != 0)
        return false;
    arg += 2;
    n = strcspn(arg, "=");
    for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
        if (strlen(flags[k]) == n && strncmp(arg, flags[k], n) == 0)
            return true;
    return false;
}

static int parse_args(int argc, char **argv, check_args *a)
{
    static const struct option longopts[] = {
        GR_RUN_LONGOPTS,
        {"raw", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint32_t seen = 0;
    int opt, r;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, GR_RUN_ONCE, "graphrun check", longopts))
            return GR_EXIT_USAGE;
        if (opt == 'h') {
            usage(stdout);
            return GR_EXIT_OK;
        }
        if (opt == '?' && optind > 1 && run_only(argv[optind - 1])) {
            fprintf(stderr, "graphrun check: %s is a flag of graphrun run (how a run goes, "
                            "not what it checks): drop it\n", argv[optind - 1]);
            return GR_EXIT_USAGE;
        }
        r = gr_run_opt("check", opt, optarg, a);
        if (r == 1)
            continue;
        if (r == 0)
            gr_cli_try_help("check");
        return GR_EXIT_USAGE;
    }
    return gr_run_opts_finish("check", argc, argv, a, false); /* -1: go on */
}

/* A refusal: its line on stderr, and with --json its document on stdout (with every bad
 * input when `plan` has them). */
static int refuse_plan(const check_args *a, int rc, const char *why, const gr_io_plan *plan)
{
    fprintf(stderr, "graphrun check: %s\n", why);
    if (a->json) {
        json_t *doc = json_pack("{s:s, s:i, s:s}", "status", "refused", "exit", rc, "error", why);

        if (plan && plan->n_bad) {
            json_t *bad = json_array();

            for (uint64_t i = 0; i < plan->count; i++) {
                const char *in = plan->in[i * plan->opt.n_inputs].path;

                if (plan->bad[i] == NULL)
                    continue;
                json_array_append_new(
                    bad, json_pack("{s:I,s:s,s:s}", "index", (json_int_t)plan->index[i],
                                   "input", gr_inputs_is_stdin(&plan->src, in) ? "-" : in,
                                   "error", plan->bad[i]));
            }
            json_object_set_new(doc, "bad_inputs", bad);
        }
        json_dumpf(doc, stdout, JSON_COMPACT);
        fputc('\n', stdout);
        json_decref(doc);
    }
    return rc;
}

static int refuse(const check_args *a, int rc, const char *why)
{
    return refuse_plan(a, rc, why, NULL);
}

/* Every bad input (io.h), one line each on stderr, and the refusal: run refuses the same
 * (and with --keep-going runs the others). */
static int refuse_bad(const check_args *a, const gr_io_plan *plan)
{
    char why[1024];

    for (uint64_t i = 0; plan->n_bad > 1 && i < plan->count; i++)
        if (plan->bad[i])
            fprintf(stderr, "graphrun check: %s\n", plan->bad[i]);
    for (uint64_t i = 0; plan->n_bad == 1 && i < plan->count; i++)
        if (plan->bad[i])
            snprintf(why, sizeof(why), "%s", plan->bad[i]);
    if (plan->n_bad > 1)
        snprintf(why, sizeof(why),
                 "%llu inputs cannot be read (listed above): run refuses them; with "
                 "--keep-going it runs the others and records these as failed",
                 (unsigned long long)plan->n_bad);
    return refuse_plan(a, GR_EXIT_USAGE, why, plan);
}

static const char *cut_name(const gr_unit_cut *c)
{
    return c->pieces > 1 ? "chunked" : c->batch > 1 ? "batched" : "whole";
}

/* The limits the run's host memory meets, in words. */
static const char *limits_text(const gr_host_need *n, char *buf, size_t len)
{
    char b1[32], b2[32], b3[32];

    snprintf(buf, len, "RLIMIT_AS %s, the cgroup's memory.max %s, %s available",
             n->as_limit ? gr_cli_bytes(n->as_limit, b1, sizeof(b1)) : "none",
             n->cg_limit ? gr_cli_bytes(n->cg_limit, b2, sizeof(b2)) : "none",
             n->available ? gr_cli_bytes(n->available, b3, sizeof(b3)) : "unknown");
    return buf;
}

/* --json's host_memory_estimate (hostneed.h); a limit not set or not known is null. */
static json_t *need_json(const gr_host_need *n, const char *over)
{
    json_t *o = json_object();

#define SET(key, v) json_object_set_new(o, key, json_integer((json_int_t)(v)))
#define SET_OR_NULL(key, v)                                                                 \
    json_object_set_new(o, key, (v) ? json_integer((json_int_t)(v)) : json_null())
    SET("window_bytes", n->window);
    SET("budget_host_bytes", n->arena);
    SET("staging_bytes", n->staging);
    SET("workers", n->workers);
    SET("threads", n->threads);
    SET("threads_address_bytes", n->threads_bytes);
    SET("program_bytes", n->program);
    SET("memory_bytes", n->memory);
    SET("address_space_bytes", n->address);
    SET("least_address_space_bytes", n->floor);
    SET_OR_NULL("address_space_limit_bytes", n->as_limit);
    SET_OR_NULL("cgroup_limit_bytes", n->cg_limit);
    SET_OR_NULL("available_bytes", n->available);
#undef SET
#undef SET_OR_NULL
    json_object_set_new(o, "warning", over && over[0] ? json_string(over) : json_null());
    return o;
}

/* The report of an accepted (or over-budget) plan. */
static void report(const check_args *a, const gr_io_plan *plan, const gr_consts *consts,
                   const uint64_t *footprint, const gr_unit_cut *cut,
                   const gr_units_plan_info *info, uint64_t budget, uint64_t host_memory,
                   const char *host_how, const gr_host_need *need, const char *over,
                   const char *refused)
{
    uint32_t ni = a->n_inputs, lead = gr_io_lead_port(&plan->opt);
    uint64_t host_least = 0, host_sum = 0;
    char b0[32], b1[32], b2[32], b3[32], text[512], limits[160];
    json_t *doc = NULL, *tensors = NULL;

    gr_window_need(plan, NULL, &host_least, &host_sum);
    if (a->json) {
        doc = json_object();
        tensors = json_array();
    }
    for (uint64_t i = 0; i < plan->count; i++) {
        const gr_io_file *f = &plan->in[i * ni + lead];
        const char *name = plan->names ? plan->names[i] : f->path;
        char shape[256] = "";
        size_t at = 0;

        if (gr_inputs_is_stdin(&plan->src, f->path))
            name = "stdin";
        for (uint32_t d = 0; d < f->shape.ndim && at < sizeof(shape); d++)
            at += (size_t)snprintf(shape + at, sizeof(shape) - at, "%s%llu", d ? "," : "",
                                   (unsigned long long)f->shape.dims[d]);
        if (doc) {
            json_t *t = json_object(), *dims = json_array(), *ins = json_array();

            for (uint32_t d = 0; d < f->shape.ndim; d++)
                json_array_append_new(dims, json_integer((json_int_t)f->shape.dims[d]));
            for (uint32_t p = 0; p < ni; p++)
                json_array_append_new(ins, json_string(gr_inputs_is_stdin(
                                                           &plan->src, plan->in[i * ni + p].path)
                                                           ? "-"
                                                           : plan->in[i * ni + p].path));
            json_object_set_new(t, "index", json_integer((json_int_t)i));
            json_object_set_new(t, "name", json_string(name));
            json_object_set_new(t, "inputs", ins);
            json_object_set_new(t, "shape", dims);
            json_object_set_new(t, "elems", json_integer((json_int_t)f->elems));
            json_object_set_new(t, "footprint_bytes", json_integer((json_int_t)footprint[i]));
            if (refused == NULL) {
                json_object_set_new(t, "cut", json_string(cut_name(&cut[i])));
                json_object_set_new(t, "pieces", json_integer((json_int_t)cut[i].pieces));
                json_object_set_new(t, "batch", json_integer((json_int_t)cut[i].batch));
                json_object_set_new(t, "largest_piece_elems",
                                    json_integer((json_int_t)cut[i].largest));
                json_object_set_new(t, "staged", json_boolean(cut[i].staged));
            }
            json_array_append_new(tensors, t);
            continue;
        }
        printf("%s: shape (%s), %llu elements, footprint %s", name, shape,
               (unsigned long long)f->elems, gr_cli_bytes(footprint[i], b0, sizeof(b0)));
        if (refused == NULL && cut[i].pieces > 1)
            printf(": chunked into %llu pieces of up to %llu elements", (unsigned long long)
                   cut[i].pieces, (unsigned long long)cut[i].largest);
        else if (refused == NULL && cut[i].batch > 1)
            printf(": batched, %llu tensors to a unit", (unsigned long long)cut[i].batch);
        else if (refused == NULL)
            printf(": whole");
        printf("%s\n", refused == NULL && cut[i].staged ? " (through staging)" : "");
    }
    if (doc) {
        json_t *skipped = json_array();

        for (uint64_t i = 0; i < plan->src.n_skipped; i++)
            json_array_append_new(skipped, json_string(plan->src.skipped[i]));
        json_object_set_new(doc, "status", json_string(refused ? "refused" : "ok"));
        if (refused) {
            json_object_set_new(doc, "exit", json_integer(GR_EXIT_USAGE));
            json_object_set_new(doc, "error", json_string(refused));
        }
        json_object_set_new(doc, "graph", json_string(a->graph));
        json_object_set_new(doc, "backend", json_string(gr_backend_name(info->backend)));
        json_object_set_new(doc, "tensors", json_integer((json_int_t)plan->count));
        json_object_set_new(doc, "bytes_in", json_integer((json_int_t)plan->bytes_in));
        json_object_set_new(doc, "bytes_out", json_integer((json_int_t)plan->bytes_out));
        json_object_set_new(doc, "budget_bytes", json_integer((json_int_t)budget));
        json_object_set_new(doc, "arena_bytes", json_integer((json_int_t)info->arena_bytes));
        json_object_set_new(doc, "least_budget_bytes",
                            json_integer((json_int_t)info->least_budget));
        json_object_set_new(doc, "splittable", json_boolean(info->splittable));
        json_object_set_new(doc, "host_memory_bytes", json_integer((json_int_t)host_memory));
        json_object_set_new(doc, "host_memory_least_bytes", json_integer((json_int_t)host_least));
        json_object_set_new(doc, "host_memory_estimate", need_json(need, over));
        if (refused == NULL)
            json_object_set_new(doc, "units", json_integer((json_int_t)info->units));
        json_object_set_new(doc, "files", tensors);
        json_object_set_new(doc, "constants", gr_consts_json(consts));
        json_object_set_new(doc, "skipped", skipped);
        json_dumpf(doc, stdout, JSON_COMPACT);
        fputc('\n', stdout);
        json_decref(doc);
        return;
    }
    gr_consts_print(consts, stdout);
    printf("host memory: %s at once for the largest tensor, %s in all; the run streams "
           "within %s (%s)\n",
           gr_cli_bytes(host_least, b0, sizeof(b0)), gr_cli_bytes(host_sum, b1, sizeof(b1)),
           gr_cli_bytes(host_memory, b2, sizeof(b2)), host_how ? host_how : "--host-memory");
    printf("host memory estimate: %s; limits: %s\n",
           gr_host_need_describe(need, host_how, text, sizeof(text)),
           limits_text(need, limits, sizeof(limits)));
    printf("%s: %llu tensor%s, %s in, %s out; backend %s; budget %s%s, least %s%s",
           refused ? "refused" : "ok", (unsigned long long)plan->count,
           plan->count == 1 ? "" : "s", gr_cli_bytes(plan->bytes_in, b0, sizeof(b0)),
           gr_cli_bytes(plan->bytes_out, b1, sizeof(b1)), gr_backend_name(info->backend),
           gr_cli_bytes(budget, b2, sizeof(b2)), a->rt.budget ? "" : " (the default)",
           gr_cli_bytes(info->least_budget, b3, sizeof(b3)),
           info->splittable ? "" : " (the graph cannot be cut)");
    if (refused == NULL)
        printf("; %llu unit%s of work\n", (unsigned long long)info->units,
               info->units == 1 ? "" : "s");
    else
        printf("\n");
}

int gr_cmd_check(int argc, char **argv)
{
    check_args *a = calloc(1, sizeof(*a));
    gr_io_options io = {0};
    gr_io_plan plan = {0};
    gr_consts consts = {0};
    gr_units_plan_info info = {0};
    gr_error_info err;
    gr_backend chosen;
    gr_graph *g = NULL;
    uint64_t *elems = NULL, *footprint = NULL, largest = 0, budget, host_memory;
    uint32_t count = 0;
    gr_host_need need;
    bool certain;
    char over[1024];
    gr_unit_cut *cut = NULL;
    gr_config cfg;
    gr_status st;
    char why[1024], how[160];
    int rc;

    if (a == NULL) {
        fprintf(stderr, "graphrun check: out of memory\n");
        return GR_EXIT_RUNTIME;
    }
    if (!gr_run_opts_init(a, "check")) {
        rc = GR_EXIT_USAGE;
        goto out;
    }
    if ((rc = parse_args(argc, argv, a)) >= 0)
        goto out;
    if ((rc = gr_run_opts_graph(a, &g, &consts, why, sizeof(why))) != GR_EXIT_OK ||
        (rc = gr_run_opts_backend(a, &chosen, &count, why, sizeof(why))) != GR_EXIT_OK) {
        rc = refuse(a, rc, why);
        goto out;
    }
    gr_run_opts_io(a, g, &io);
    if ((st = gr_io_plan_create(&io, &plan, why, sizeof(why))) != GR_OK) {
        rc = refuse(a, st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE, why);
        goto out;
    }
    gr_inputs_warn_skipped(&plan.src, "check");
    if (plan.n_bad > 0) {
        rc = refuse_bad(a, &plan);
        goto out;
    }
    host_memory = a->host_memory ? a->host_memory : gr_window_default(how, sizeof(how));
    if (gr_window_check(&plan, NULL, host_memory, a->host_memory ? NULL : how, why,
                        sizeof(why)) != GR_OK) {
        rc = refuse(a, GR_EXIT_USAGE, why);
        goto out;
    }
    elems = calloc(plan.count + 1, sizeof(*elems));
    footprint = calloc(plan.count + 1, sizeof(*footprint));
    cut = calloc(plan.count + 1, sizeof(*cut));
    if (elems == NULL || footprint == NULL || cut == NULL) {
        rc = refuse(a, GR_EXIT_RUNTIME, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < plan.count; i++) {
        elems[i] = plan.in[i * a->n_inputs + gr_io_lead_port(&io)].elems;
        gr_graph_footprint(g, elems[i], &footprint[i]);
        if (elems[i] > largest)
            largest = elems[i];
    }
    if (a->n_outputs == 0) /* what run would write, from the graph's output ports */
        for (uint64_t i = 0; i < plan.count; i++)
            for (uint32_t p = 0; p < gr_graph_output_count(g); p++) {
                gr_port_info port = {0};

                gr_graph_port_get(g, 1, p, &port);
                plan.bytes_out += (port.fixed_elems ? port.fixed_elems : elems[i]) *
                                  gr_dtype_size(port.dtype);
            }
    budget = gr_run_opts_budget(a, chosen, g, &consts, largest);
    cfg = a->rt.cfg;
    cfg.backend = chosen;
    cfg.budget_bytes = budget;
    cfg.staging_bytes = gr_run_opts_staging(a, chosen);
    st = gr_graph_plan_units(g, &cfg, elems, plan.count, a->rt.memory != GR_MEM_PAGEABLE, cut,
                             &info, &err);
    gr_host_need_of(&plan, NULL, host_memory, &cfg, chosen,
                    cfg.device_count ? cfg.device_count
                                     : chosen == GR_BACKEND_HOST ? cfg.host_devices : count,
                    &need);
    if (gr_host_need_over(&need, &certain, over, sizeof(over)))
        fprintf(stderr, "graphrun check: warning: %s%s\n", over,
                certain ? " (run would fail for want of memory, exit 3)" : "");
    if (st == GR_OK) {
        report(a, &plan, &consts, footprint, cut, &info, budget, host_memory,
               a->host_memory ? NULL : how, &need, over, NULL);
        rc = GR_EXIT_OK;
    } else if (st == GR_ERR_OVER_BUDGET) {
        snprintf(why, sizeof(why), "refused: %s: %s (the least budget is %llu bytes)",
                 gr_status_str(st), err.message, (unsigned long long)info.least_budget);
        fprintf(stderr, "graphrun check: %s\n", why);
        report(a, &plan, &consts, footprint, cut, &info, budget, host_memory,
               a->host_memory ? NULL : how, &need, over, why);
        rc = GR_EXIT_USAGE;
    } else {
        /* A kernel the backend cannot run (GR_ERR_UNAVAILABLE naming its node: the backend
         * itself was probed above) is run's refusal too. */
        bool users = st == GR_ERR_INVALID_ARGUMENT || (st == GR_ERR_UNAVAILABLE && err.node[0]);

        snprintf(why, sizeof(why), "refused: %s: %s", gr_status_str(st), err.message);
        rc = refuse(a, users ? GR_EXIT_USAGE : GR_EXIT_RUNTIME, why);
    }
out:
    free(elems);
    free(footprint);
    free(cut);
    gr_io_plan_free(&plan);
    gr_graph_destroy(g);
    free(a);
    return rc;
}

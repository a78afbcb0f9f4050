/*
 * run.c - `graphrun run`: stream tensors from files through a graph spec and write the
 * results, with live progress on a terminal, clean cancellation on Ctrl-C and an optional
 * JSON summary; with --mpi, as one rank of an MPI job that shares the tensors.
 *
 * Streaming (stream.h): inputs are read ahead into a window of host memory bounded by
 * --host-memory, tensors submitted as they arrive, outputs written behind as they are done,
 * so that a dataset of any size runs in bounded memory, at the speed of the disk or the
 * link, whichever is slower.
 *
 * Outputs per tensor (the default): each tensor's outputs are renamed into place (io.h) as
 * soon as it is done, and the manifest (ledger.h), replaced whole as the run goes, says
 * which tensors are done, failed or not run, so that an interrupted or failed run keeps
 * what is done and --resume goes on from there. A tensor failure stops the run (no new
 * tensor starts; those in flight finish and are written) unless --keep-going. With
 * --all-or-nothing: outputs renamed into place only when every tensor is done (until then
 * in temporary files); a failed or interrupted run writes nothing.
 *
 * The steps, the same for one process and for every rank of an MPI job (ranks.h):
 *   1. check the graph and the backend, and pick this rank's device;
 *   2. plan this rank's shard of the tensors (tensor i goes to rank i % ranks): every
 *      input's header checked (every bad input named), the outputs staged, what a killed
 *      run left removed, the manifest read to resume, the host memory checked;
 *   3. check the job as the runtime would take it (its own planner, gr_graph_plan_units:
 *      the budget, the kernels the backend can run), and start the runtime, while a thread
 *      reads the first inputs into the page cache (readahead.h) so that the disk does not
 *      wait for it;
 *   4. stream the tensors, writing each tensor's outputs as it is done and this rank's
 *      manifest as it goes (--all-or-nothing: into temporary files);
 *   5. agree on the outcome; rank 0 writes the run's manifest (with --mpi, merged from the
 *      ranks' own), and (--all-or-nothing) only when every rank got through 4 are the
 *      outputs renamed into place.
 * Before the job, when any rank failed a step, every rank stops with the same status,
 * nothing written, and rank 0 says which rank failed and why; during the job each rank
 * follows the rules above for its own shard. Static shards, not dynamic sharing: each rank
 * reads only its own inputs, and on equal devices equal shards finish together; within a
 * rank, the runtime already shares the work dynamically among its devices.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/inputs.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/run.h"
#include "tools/graphrun/window.h"

#define MAX_FAILURES_LISTED 10
#define MAX_BAD_LISTED 20

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* FNV-1a over the strings, each with its terminating NUL. */
static uint64_t hash_strings(uint64_t h, const char *const *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        for (const char *p = v[i] ? v[i] : "";; p++) {
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            if (*p == '\0')
                break;
        }
    return h;
}

/* Whether every rank sees the same value: false on any rank when one differs. */
static bool same_everywhere(gr_ranks *r, const char *step, int64_t v)
{
    int64_t hi = v, lo = v;

    gr_ranks_reduce(r, step, &hi, 1, GR_MPI_MAX);
    gr_ranks_reduce(r, step, &lo, 1, GR_MPI_MIN);
    return hi == lo;
}

/* Step 1: the graph, the backend, and with --mpi this rank's device: the local rank's,
 * among --devices (default all). */
static int check_setup(run_state *s)
{
    run_args *a = &s->a;
    uint32_t count = 0;
    int rc;

    if ((rc = gr_run_opts_graph(&a->o, &s->g, &s->consts, s->why, sizeof(s->why))) !=
            GR_EXIT_OK ||
        (rc = gr_run_opts_backend(&a->o, &s->chosen, &count, s->why, sizeof(s->why))) !=
            GR_EXIT_OK)
        return rc;
    s->backend_devices = s->chosen == GR_BACKEND_HOST ? a->o.rt.cfg.host_devices : count;
    if (gr_ranks_multi(&s->ranks)) {
        int pool = a->o.rt.cfg.device_count
                       ? (int)a->o.rt.cfg.device_count
                       : (int)(s->chosen == GR_BACKEND_HOST ? a->o.rt.cfg.host_devices : count);
        int mine = a->o.rt.cfg.device_count
                       ? a->o.rt.devices[s->ranks.world.local_rank % pool]
                       : s->ranks.world.local_rank % pool;

        a->o.rt.devices[0] = mine;
        a->o.rt.cfg.devices = a->o.rt.devices;
        a->o.rt.cfg.device_count = 1;
    }
    s->report.backend = s->chosen;
    s->report.ordinal = a->o.rt.cfg.device_count ? a->o.rt.devices[0] : 0;
    if (a->ceilings && s->chosen != GR_BACKEND_CUDA) {
        if (a->o.rt.cfg.backend != GR_BACKEND_AUTO) {
            snprintf(s->why, sizeof(s->why), "--ceilings does not apply to the %s backend: it "
                     "measures CUDA's copies; drop it", gr_backend_name(s->chosen));
            return GR_EXIT_USAGE;
        }
        if (s->ranks.world.rank == 0)
            fprintf(stderr, "graphrun run: warning: --ceilings does not apply: it measures "
                            "CUDA's copies (auto chose the %s backend)\n",
                    gr_backend_name(s->chosen));
    }
    return GR_EXIT_OK;
}

static void say_failure(run_state *s, uint64_t i, const char *status, const char *node,
                        const char *message)
{
    const gr_io_plan *plan = &s->plan;
    char rank[32] = "";

    if (s->ledger.failed > MAX_FAILURES_LISTED)
        return;
    if (s->ledger.failed == MAX_FAILURES_LISTED) {
        fprintf(stderr, "graphrun run: (more failures: %s)\n",
                s->manifest_path ? "the manifest lists them all" : "not listed");
        return;
    }
    if (gr_ranks_multi(&s->ranks))
        snprintf(rank, sizeof(rank), "rank %d: ", s->ranks.world.rank);
    fprintf(stderr, "graphrun run: %stensor %llu (%s) failed%s%s: %s%s%s\n", rank,
            (unsigned long long)plan->index[i],
            gr_run_input_name(plan, i), node && node[0] ? ", node " : "",
            node ? node : "", status, message ? ": " : "", message ? message : "");
}

/* Tensor i failed: said (the first few), recorded in the ledger under its kind. */
static void tensor_failed(run_state *s, uint64_t i, int kind, const char *node,
                          const char *message)
{
    say_failure(s, i, gr_run_error_name(kind), node, message);
    gr_ledger_failed(&s->ledger, i, kind, node, message);
    s->manifest_dirty = true;
}

/* Bad inputs (io.h): without --keep-going the run is refused, every one named (the first
 * MAX_BAD_LISTED on stderr); with it they are failed tensors and the others run. */
static int bad_inputs(run_state *s)
{
    const gr_io_plan *plan = &s->plan;
    uint64_t said = 0, first = plan->count;

    if (plan->n_bad == 0)
        return GR_EXIT_OK;
    for (uint64_t i = 0; i < plan->count; i++) {
        if (plan->bad[i] == NULL)
            continue;
        if (first == plan->count)
            first = i;
        if (s->a.keep_going) {
            tensor_failed(s, i, GR_RUN_ERR_BAD_INPUT, NULL, plan->bad[i]);
            s->skip[i] = true;
        } else if (said++ < MAX_BAD_LISTED && (plan->n_bad > 1 || gr_ranks_multi(&s->ranks))) {
            fprintf(stderr, "graphrun run: %s\n", plan->bad[i]);
        }
    }
    if (s->a.keep_going)
        return GR_EXIT_OK;
    if (plan->n_bad == 1)
        snprintf(s->why, sizeof(s->why), "%s", plan->bad[first]);
    else
        snprintf(s->why, sizeof(s->why),
                 "%llu inputs cannot be read (%s): nothing run; fix them, or --keep-going "
                 "runs the others and records these as failed",
                 (unsigned long long)plan->n_bad,
                 plan->n_bad > MAX_BAD_LISTED ? "the first listed above" : "listed above");
    return GR_EXIT_USAGE;
}

/* The host memory the run may use, and whether the largest tensor fits in it. */
static int check_host_memory(run_state *s)
{
    s->host_memory = s->a.o.host_memory;
    if (s->host_memory == 0)
        s->host_memory = gr_window_default(s->host_memory_how, sizeof(s->host_memory_how));
    return gr_window_check(&s->plan, s->skip, s->host_memory,
                           s->a.o.host_memory ? NULL : s->host_memory_how, s->why,
                           sizeof(s->why)) == GR_OK
               ? GR_EXIT_OK
               : GR_EXIT_USAGE;
}

/* Step 2: plan this rank's shard, stage its outputs (and the manifests), remove what a
 * killed run left, mark what --resume skips and the bad inputs, check the host memory. */
static int plan_inputs(run_state *s)
{
    run_args *a = &s->a;
    gr_io_options io = {0};
    gr_status st;
    int rc;

    gr_run_opts_io(&a->o, s->g, &io);
    io.stage_stdout = true;
    io.shard = (uint32_t)s->ranks.world.rank;
    io.shards = (uint32_t)s->ranks.world.size;
    if ((s->settings = gr_run_settings_json(a)) == NULL) {
        snprintf(s->why, sizeof(s->why), "out of memory");
        return GR_EXIT_RUNTIME;
    }
    /* The manifests first: --resume's tells which existing outputs are the run's own. */
    if ((rc = gr_run_stage_manifests(s)) != GR_EXIT_OK)
        return rc;
    io.manifest = s->manifest_path;
    io.replaceable = (const char *const *)s->claimed;
    io.n_replaceable = s->n_claimed;
    if ((st = gr_io_plan_create(&io, &s->plan, s->why, sizeof(s->why))) != GR_OK)
        return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
    if (s->ranks.world.rank == 0)
        gr_inputs_warn_skipped(&s->plan.src, "run");
    if ((s->skip = calloc(s->plan.count + 1, sizeof(*s->skip))) == NULL) {
        snprintf(s->why, sizeof(s->why), "out of memory");
        return GR_EXIT_RUNTIME;
    }
    if (s->plan.n_bad > 0 && !a->keep_going)
        return bad_inputs(s); /* before anything is created */
    if (gr_io_stage(&s->plan, s->why, sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    gr_io_clean_leftovers(&s->plan);
    if (s->ranks.world.rank == 0 && s->manifest_path)
        gr_io_remove_leftovers_of(s->manifest_path);
    if (s->own_path)
        gr_io_remove_leftovers_of(s->own_path);
    if ((st = gr_ledger_init(&s->ledger, &s->plan, a->o.graph, s->ranks.world.size, s->why,
                             sizeof(s->why))) != GR_OK)
        return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
    for (int k = 0; k < 2; k++)
        if (s->earlier[k] &&
            (rc = gr_run_same_settings(s, s->earlier[k],
                                       k == 0 ? s->manifest_path : s->own_path)) != GR_EXIT_OK)
            return rc;
    for (int k = 0; k < 2; k++)
        if (s->earlier[k] &&
            gr_ledger_resume(&s->ledger, s->earlier[k],
                             k == 0 ? s->manifest_path : s->own_path, s->skip, s->why,
                             sizeof(s->why)) != GR_OK)
            return GR_EXIT_USAGE;
    if ((rc = bad_inputs(s)) != GR_EXIT_OK || (rc = check_host_memory(s)) != GR_EXIT_OK)
        return rc;
    s->report.tensors = (int64_t)s->plan.count;
    s->report.done = s->report.resumed = (int64_t)s->ledger.earlier;
    return GR_EXIT_OK;
}

/* Step 3's check: the job as gr_job_submit would take it, asked of the runtime's own
 * planner for every tensor to run, so that a refusal (a tensor over the budget that cannot
 * be cut, a kernel the backend cannot run) comes before anything is written. */
static int check_job(run_state *s, const uint64_t *elems, const uint64_t *which, uint64_t n)
{
    gr_units_plan_info info;
    gr_error_info err;
    gr_config cfg = s->a.o.rt.cfg;
    gr_status st;

    cfg.backend = s->chosen;
    st = gr_graph_plan_units(s->g, &cfg, elems, n, s->a.o.rt.memory != GR_MEM_PAGEABLE, NULL,
                             &info, &err);
    if (st == GR_OK)
        return GR_EXIT_OK;
    if (err.index < n)
        snprintf(s->why, sizeof(s->why), "refused: %s: tensor %llu (%s): %s", gr_status_str(st),
                 (unsigned long long)s->plan.index[which[err.index]],
                 gr_run_input_name(&s->plan, which[err.index]), err.message);
    else
        snprintf(s->why, sizeof(s->why), "refused: %s: %s", gr_status_str(st), err.message);
    s->refused = true;
    return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
}

/* The window could not be had at all: how much the run needs, and what to do. */
static void say_no_window(run_state *s)
{
    const gr_host_need *n = &s->need;
    char b1[32], b2[32], b3[32], lim[80] = "", need[512], advice[512];

    if (n->as_limit)
        snprintf(lim, sizeof(lim), "; the address space is limited to %s (RLIMIT_AS)",
                 gr_cli_bytes(n->as_limit, b3, sizeof(b3)));
    snprintf(s->why, sizeof(s->why),
             "out of host memory: the system gave none of the %s of host memory%s, not even "
             "%s at once%s; this run needs at least that much (its largest tensor's inputs "
             "and outputs), and in all %s: %s",
             gr_cli_bytes(s->host_memory, b1, sizeof(b1)),
             s->a.o.host_memory ? " (--host-memory)" : " (the default)",
             gr_cli_bytes(n->least, b2, sizeof(b2)), lim,
             gr_host_need_describe(n, s->a.o.host_memory ? NULL : s->host_memory_how, need,
                                   sizeof(need)),
             gr_host_need_advice(n, advice, sizeof(advice)));
}

/* The runtime could not start for want of memory, with the window held: what the run
 * needs, the limits, and what to do, after the runtime's own reason. */
static void say_no_runtime(run_state *s, gr_status st, const char *message)
{
    gr_window_stats ws;
    char b1[32], detail[800];

    gr_window_stats_get(s->win, &ws);
    snprintf(s->why, sizeof(s->why), "cannot start the runtime: %s: %s, with the window's %s "
             "held; %s", gr_status_str(st), message, gr_cli_bytes(ws.held, b1, sizeof(b1)),
             gr_host_need_failure(&s->need, s->a.o.host_memory ? NULL : s->host_memory_how, detail,
                                  sizeof(detail)));
}

/* Step 3 (nothing to start for an empty shard: more ranks than tensors). */
static int start_runtime(run_state *s)
{
    run_args *a = &s->a;
    uint64_t largest = 0, copy = 0, n = 0, *elems, *which;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats ds;
    gr_error_info err;
    gr_status st;
    gr_ceilings ceil;
    gr_window_stats ws;
    uint64_t staging_default = a->o.rt.cfg.staging_bytes;
    int64_t t0;
    int rc;

    elems = calloc(s->plan.count + 1, sizeof(*elems));
    which = calloc(s->plan.count + 1, sizeof(*which));
    if (elems == NULL || which == NULL) {
        free(elems);
        free(which);
        snprintf(s->why, sizeof(s->why), "out of memory");
        return GR_EXIT_RUNTIME;
    }
    for (uint64_t i = 0; i < s->plan.count; i++) {
        uint32_t lead = gr_io_lead_port(&s->plan.opt);
        uint64_t e = s->plan.in[i * a->o.n_inputs + lead].elems;
        uint64_t bytes = e * gr_dtype_size(s->plan.opt.in_dtype[lead]);

        if (s->skip[i])
            continue;
        which[n] = i;
        elems[n++] = e;
        if (e > largest)
            largest = e;
        if (bytes > copy)
            copy = bytes; /* the ceilings are measured at the largest input's size */
    }
    a->o.rt.cfg.budget_bytes = gr_run_opts_budget(&a->o, s->chosen, s->g, &s->consts, largest);
    a->o.rt.cfg.staging_bytes = gr_run_opts_staging(&a->o, s->chosen);
    rc = n == 0 ? GR_EXIT_OK : check_job(s, elems, which, n);
    free(elems);
    free(which);
    if (n == 0 || rc != GR_EXIT_OK)
        return rc;
    /* Once for the run: every job it submits reads this one copy. */
    if ((st = gr_consts_load(&s->consts, s->why, sizeof(s->why))) != GR_OK)
        return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
    /* What the run needs, reckoned while the process maps only itself, for the messages of
     * a run short of memory. The window before the runtime: what memory there is goes to
     * the tensors first (the runtime's threads and staging take address space that a limit
     * then lacks). */
    gr_host_need_of(&s->plan, s->skip, s->host_memory, &a->o.rt.cfg, s->chosen,
                    a->o.rt.cfg.device_count ? a->o.rt.cfg.device_count : s->backend_devices,
                    &s->need);
    /* The disk starts now, not once the runtime has (readahead.h); after the ceilings are
     * measured when they are, so as not to load the host memory they measure. Without a
     * thread for it the run only goes slower. */
    if (!a->no_read_ahead && !a->ceilings)
        gr_readahead_start(&s->plan, s->skip, s->host_memory, &s->ahead);
    if (gr_window_open(&s->plan, s->skip, s->host_memory, (gr_mem_kind)a->o.rt.memory,
                       &s->win) != GR_OK) {
        say_no_window(s);
        return GR_EXIT_RUNTIME;
    }
    /* A window the system would not pin holds pageable tensors, which are staged: they get
     * the runtime's full staging buffers back (gr_run_opts_staging assumed pinned). */
    gr_window_stats_get(s->win, &ws);
    if (ws.kind == GR_MEM_PAGEABLE)
        a->o.rt.cfg.staging_bytes = staging_default;
    if (s->chosen == GR_BACKEND_CUDA && a->ceilings) {
        s->report.have_ceilings =
            gr_measure_ceilings((int)s->report.ordinal, copy, 8, &ceil, &err) == GR_OK;
        if (s->report.have_ceilings)
            s->report.bidir_gbs = ceil.bidir_gbs;
        else
            fprintf(stderr, "graphrun run: cannot measure ceilings: %s\n", err.message);
    }
    if (!a->no_read_ahead && a->ceilings)
        gr_readahead_start(&s->plan, s->skip, s->host_memory, &s->ahead);
    t0 = gr_now_ns();
    if (s->chosen == GR_BACKEND_CUDA)
        s->report.have_devmem =
            gr_devmem_start((int)s->report.ordinal, 1000, &s->sampler, &err) == GR_OK;
    st = gr_runtime_create(&a->o.rt.cfg, &s->rt, &err);
    s->report.runtime_ns = gr_now_ns() - t0;
    if (st != GR_OK) {
        if (st == GR_ERR_OUT_OF_MEMORY)
            say_no_runtime(s, st, err.message);
        else
            snprintf(s->why, sizeof(s->why), "cannot start the runtime: %s: %s",
                     gr_status_str(st), err.message);
        return GR_EXIT_RUNTIME;
    }
    gr_runtime_info_get(s->rt, &info);
    s->report.backend = info.backend;
    s->report.devices = info.device_count;
    s->report.workers_per_device = info.workers_per_device;
    s->report.budget_bytes = (int64_t)info.budget_bytes;
    if (gr_runtime_device_stats(s->rt, 0, &ds) == GR_OK) {
        int ordinal = 0;

        gr_runtime_device_ordinal(s->rt, 0, &ordinal);
        s->report.ordinal = ordinal;
    }
    return GR_EXIT_OK;
}

static uint64_t tensor_bytes(const gr_io_plan *plan, uint64_t i, bool out)
{
    uint64_t b = 0;

    if (!out)
        for (uint32_t p = 0; p < plan->opt.n_inputs; p++)
            b += plan->in[i * plan->opt.n_inputs + p].elems *
                 gr_dtype_size(plan->opt.in_dtype[p]);
    else
        for (uint32_t p = 0; p < plan->opt.n_outputs; p++)
            b += gr_io_out_elems(plan, i, p) * gr_dtype_size(plan->opt.out_dtype[p]);
    return b;
}

/* The stream's hooks (stream.h). */
static void on_done(void *arg, uint64_t i)
{
    run_state *s = arg;

    if (!s->a.all_or_nothing) {
        gr_ledger_done(&s->ledger, i);
        s->report.outputs += s->plan.opt.n_outputs;
    } else {
        s->ledger.done++; /* its outputs are placed at the end, when every tensor is done */
    }
    s->report.bytes_in += (int64_t)tensor_bytes(&s->plan, i, false);
    s->report.bytes_out += (int64_t)tensor_bytes(&s->plan, i, true);
    s->manifest_dirty = true;
}

static void on_failed(void *arg, uint64_t i, int kind, const char *node, const char *message)
{
    tensor_failed(arg, i, kind, node, message);
}

static void on_tick(void *arg)
{
    run_state *s = arg;

    /* Written when due, also when nothing ended since: a tensor done just after the last
     * write must not wait for the next one to end to be recorded. */
    if (s->manifest_dirty)
        gr_run_write_live_manifest(s, "running", false);
}

/* The report's errors: every failed tensor under its kind (the failures, and only them). */
static void count_failures(run_state *s)
{
    gr_run_report *r = &s->report;

    r->first_status = GR_OK;
    memset(r->errors, 0, sizeof(r->errors));
    for (uint64_t i = 0; i < s->plan.count; i++) {
        const gr_ledger_entry *e = &s->ledger.e[i];

        if (e->outcome != GR_OUTCOME_FAILED)
            continue;
        r->errors[e->kind]++;
        if (r->first_status != GR_OK)
            continue;
        r->first_status = e->kind;
        r->first_index = (int64_t)s->plan.index[i];
        snprintf(r->first_node, sizeof(r->first_node), "%s", e->node);
        snprintf(r->first_message, sizeof(r->first_message), "%s",
                 e->message ? e->message : "");
    }
}

/* Step 4: stream the tensors; per tensor, each one's outputs as it is done, and the
 * manifest as the run goes; --all-or-nothing, into temporary files. */
static int run_job(run_state *s)
{
    run_args *a = &s->a;
    gr_run_report *r = &s->report;
    gr_stream_config cfg = {0};
    gr_stream_result res = {0};
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    uint64_t base = 0, peak = 0, total = 0, n = 0, files, bytes;
    int64_t t0;
    int rc = GR_EXIT_OK;

    for (uint64_t i = 0; i < s->plan.count; i++)
        n += !s->skip[i];
    r->setup_ns = gr_now_ns() - s->started_ns;
    gr_run_write_live_manifest(s, "running", true); /* claims the outputs before any is written */
    if (n > 0) {
        cfg.rt = s->rt;
        cfg.g = s->g;
        cfg.constants = s->consts.data;
        cfg.n_constants = s->consts.count;
        cfg.plan = &s->plan;
        cfg.skip = s->skip;
        cfg.keep_going = a->keep_going;
        cfg.all_or_nothing = a->all_or_nothing;
        cfg.sync = a->sync;
        cfg.win = s->win;
        cfg.engine = a->engine;
        cfg.direct = !a->no_direct;
        gr_readahead_stop(s->ahead);
        gr_readahead_counts(s->ahead, &files, &bytes, &r->read_ahead_seconds);
        r->read_ahead_files = (int64_t)files;
        r->read_ahead_bytes = (int64_t)bytes;
        cfg.warm = s->ahead;
        cfg.stop = &interrupted;
        cfg.progress = s->ranks.world.rank == 0 && !(a->o.json && a->progress == 0)
                           ? a->progress
                           : -1;
        cfg.hooks = (gr_stream_hooks){s, on_done, on_failed, on_tick};
        cfg.grow_to = s->need.window; /* gr_window_most, reckoned by start_runtime */
        gr_stream_run(&cfg, &res);
        gr_readahead_destroy(s->ahead);
        s->ahead = NULL;
        r->stream_ns = res.ns;
        r->read_bytes = (int64_t)res.read_bytes;
        r->written_bytes = (int64_t)res.written_bytes;
        r->direct_reads = (int64_t)res.direct_reads;
        r->buffered_reads = (int64_t)res.buffered_reads;
        r->warm_reads = (int64_t)res.warm_reads;
        r->direct_writes = (int64_t)res.direct_writes;
        r->buffered_writes = (int64_t)res.buffered_writes;
        r->host_memory = (int64_t)s->host_memory;
        r->host_memory_peak = (int64_t)res.window.peak_in_use;
        r->host_memory_kind = res.window.kind;
        r->host_memory_segments = res.window.segments;
        r->host_memory_grown_ahead = res.window.grown_ahead;
        r->host_memory_segments_grown = res.window.segments_grown;
        r->host_memory_segments_huge = res.window.segments_huge;
        r->host_memory_first_seconds = (double)res.window.first_ns / 1e9;
        r->host_memory_more_seconds = (double)res.window.more_ns / 1e9;
        r->sync = a->sync;
        snprintf(r->io_engine, sizeof(r->io_engine), "%s", res.engine);
        snprintf(r->io_fallback, sizeof(r->io_fallback), "%s", res.fallback);
        snprintf(r->io_buffered_why, sizeof(r->io_buffered_why), "%s", res.buffered_why);
        if (res.fallback[0] && a->engine == GR_FIO_AUTO && s->ranks.world.rank == 0)
            fprintf(stderr, "graphrun run: note: io_uring is not available (%s): reading and "
                            "writing with pread and pwrite\n", res.fallback);
        if (res.window.shortfall && res.status == GR_OK && s->ranks.world.rank == 0) {
            char b1[32], b2[32];

            fprintf(stderr, "graphrun run: warning: the system gave %s of the %s of host "
                            "memory asked for: the run went on in that much\n",
                    gr_cli_bytes(res.window.limit - res.window.shortfall, b1, sizeof(b1)),
                    gr_cli_bytes(res.window.limit, b2, sizeof(b2)));
        }
    }
    t0 = gr_now_ns();
    r->peak_rss = (int64_t)gr_cli_peak_rss_bytes();
    r->done = (int64_t)s->ledger.done;
    r->failed = (int64_t)s->ledger.failed;
    r->canceled = r->tensors - r->done - r->failed;
    count_failures(s);
    if (s->rt) {
        gr_runtime_info_get(s->rt, &info);
        for (uint32_t d = 0; d < info.device_count; d++) {
            gr_device_stats ds;

            if (gr_runtime_device_stats(s->rt, d, &ds) == GR_OK &&
                (int64_t)ds.budget_peak > r->budget_peak)
                r->budget_peak = (int64_t)ds.budget_peak;
        }
    }
    gr_runtime_destroy(s->rt);
    s->rt = NULL;
    if (s->sampler) {
        gr_devmem_stop(s->sampler, &base, &peak, &total);
        s->sampler = NULL;
        r->devmem_above = (int64_t)(peak - base);
    }
    gr_window_destroy(s->win);
    s->win = NULL;
    r->teardown_ns = gr_now_ns() - t0;
    if (res.status != GR_OK) {
        snprintf(s->why, sizeof(s->why), "%s", res.why);
        rc = GR_EXIT_RUNTIME; /* said with the outcome (ranks.h) */
    } else if (interrupted) {
        rc = GR_EXIT_CANCELED;
    } else if (r->failed > 0) {
        rc = GR_EXIT_FAILED;
        snprintf(s->why, sizeof(s->why), "%llu of %llu tensors failed; first: tensor %llu: %s: %s",
                 (unsigned long long)r->failed, (unsigned long long)r->tensors,
                 (unsigned long long)r->first_index, gr_run_error_name(r->first_status),
                 r->first_message);
    } else if (r->canceled > 0) {
        rc = GR_EXIT_FAILED; /* not reached: only a signal or a failure stops a run */
        snprintf(s->why, sizeof(s->why), "%llu tensors not run", (unsigned long long)r->canceled);
    } else if (a->all_or_nothing) {
        s->report.outputs = (int64_t)(s->plan.count * a->o.n_outputs);
    }
    return rc;
}

/* --json's object for a run that ended before its job ran (the reason: the last line
 * printed for it), with what the input directories held that is not a tensor once they
 * were listed (src: NULL before). */
static void print_refusal(int rc, const char *why, const gr_inputs *src)
{
    const char *status = rc == GR_EXIT_USAGE      ? "refused"
                         : rc == GR_EXIT_CANCELED ? "interrupted"
                                                  : "error";
    json_t *doc = gr_run_refusal_json(status, rc, why);

    if (src)
        gr_run_add_skipped(doc, src);

    json_dumpf(doc, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(doc);
}

int gr_cmd_run(int argc, char **argv)
{
    const char *var = NULL;
    run_state *s = calloc(1, sizeof(*s));
    struct sigaction sa;
    int launched, rc, tensor_fd = -1;

    if (s == NULL) {
        fprintf(stderr, "graphrun run: out of memory\n");
        return GR_EXIT_RUNTIME;
    }
    if (!gr_run_opts_init(&s->a.o, "run")) {
        rc = GR_EXIT_USAGE;
        goto out_free;
    }
    s->started_ns = gr_now_ns();
    if ((rc = gr_run_parse(argc, argv, &s->a, gr_run_wants_json(argc, argv), s->why,
                           sizeof(s->why))) >= 0) {
        if (rc != GR_EXIT_OK && gr_run_wants_json(argc, argv))
            print_refusal(rc, s->why, NULL);
        goto out_free;
    }
    if (s->a.to_stdout) {
        /* stdout is the tensor's: every report, this command's and the runtime's, goes to
         * stderr, and the tensor to the real stdout once the run has succeeded. */
        fflush(stdout);
        if ((tensor_fd = dup(STDOUT_FILENO)) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
            fprintf(stderr, "graphrun run: --output -: cannot set stdout aside: %s\n",
                    strerror(errno));
            rc = GR_EXIT_RUNTIME;
            goto out_free;
        }
    }
    launched = gr_ranks_launched(&var);
    if (!s->a.mpi && launched > 1) {
        fprintf(stderr,
                "graphrun run: started as one of %d MPI ranks (%s is set) but without --mpi: "
                "each rank would run every tensor and write the same outputs; add --mpi to "
                "share the tensors among the ranks\n",
                launched, var);
        rc = GR_EXIT_USAGE;
        goto out_free;
    }
    if (s->a.mpi) {
        if (gr_ranks_start_mpi(&s->ranks, s->a.mpi_timeout, &interrupted, s->why,
                               sizeof(s->why)) != 0) {
            fprintf(stderr, "graphrun run: %s\n", s->why);
            rc = GR_EXIT_RUNTIME;
            goto out_free;
        }
    } else {
        gr_ranks_single(&s->ranks);
    }
    s->ranks.cleanup = gr_run_remove_temporaries;
    s->ranks.cleanup_arg = s;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: waits return to look at the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    rc = check_setup(s);
    if ((rc = gr_ranks_agree(&s->ranks, "checking the graph and the backend", rc, s->why)) != 0)
        goto out;
    if (gr_ranks_multi(&s->ranks)) {
        /* What decides the shards and the outputs must be the same on every rank. */
        const char *what[] = {s->a.o.graph,
                              s->a.o.dtype,
                              s->a.o.force ? "force" : "",
                              s->a.o.have_shape ? "shape" : "",
                              s->a.resume ? "resume" : "",
                              s->a.keep_going ? "keep-going" : "",
                              s->a.all_or_nothing ? "all-or-nothing" : "",
                              s->a.manifest};
        uint64_t h = hash_strings(0xcbf29ce484222325ull, what, 8);

        h = hash_strings(h, s->a.o.inputs, s->a.o.n_inputs);
        h = hash_strings(h, s->a.o.outputs, s->a.o.n_outputs);
        h = hash_strings(h, s->a.o.consts, s->a.o.n_consts);
        for (uint32_t d = 0; s->a.o.have_shape && d < s->a.o.shape.ndim; d++)
            h = (h ^ s->a.o.shape.dims[d]) * 0x100000001b3ull;
        rc = same_everywhere(&s->ranks, "checking the command line", (int64_t)h)
                 ? GR_EXIT_OK
                 : GR_EXIT_USAGE;
        if (rc != GR_EXIT_OK) {
            if (s->ranks.world.rank == 0)
                fprintf(stderr, "graphrun run: the ranks were not all given the same --graph, "
                                "--input, --output, --const, --dtype, --shape, --force, "
                                "--manifest, --resume, --keep-going and --all-or-nothing\n");
            goto out;
        }
    }

    rc = plan_inputs(s);
    if ((rc = gr_ranks_agree(&s->ranks, "planning inputs", rc, s->why)) != 0)
        goto out;
    if (gr_ranks_multi(&s->ranks)) {
        /* Every rank must see the same tensors (a file system shared by every node): the
         * same paths, from a directory's listing or a list's lines. */
        uint64_t h = hash_strings(s->plan.total, (const char *const *)s->plan.src.in,
                                  s->plan.total * s->a.o.n_inputs);

        if (!same_everywhere(&s->ranks, "listing inputs", (int64_t)h)) {
            if (s->ranks.world.rank == 0)
                fprintf(stderr, "graphrun run: the ranks do not see the same input files (is "
                                "%s on a file system every node shares?)\n",
                        s->a.o.inputs[0]);
            rc = GR_EXIT_USAGE;
            goto out;
        }
    }
    rc = start_runtime(s);
    if ((rc = gr_ranks_agree(&s->ranks, "starting the runtime", rc, s->why)) != 0)
        goto out;
    if (s->resume_from_nothing && s->ranks.world.rank == 0)
        fprintf(stderr, "graphrun run: --resume: no manifest at %s: running every tensor\n",
                s->manifest_path);
    rc = run_job(s);
    if (!s->refused)
        rc = s->a.all_or_nothing ? gr_run_finish_all_or_nothing(s, rc)
                                 : gr_run_finish_per_tensor(s, rc);
    if (rc == GR_EXIT_OK && tensor_fd >= 0 &&
        gr_inputs_emit_stdout(&s->plan.src, tensor_fd, s->why, sizeof(s->why)) != GR_OK) {
        fprintf(stderr, "graphrun run: %s\n", s->why);
        rc = GR_EXIT_FAILED;
    }
out:
    if (!s->reported && s->a.o.json && s->ranks.world.rank == 0 && rc != GR_EXIT_OK)
        print_refusal(rc, s->why[0] ? s->why : "a rank failed: see the messages on stderr",
                      &s->plan.src);
    gr_run_remove_temporaries(s);
    gr_io_unstage(&s->plan); /* a run that wrote nothing leaves no directory either */
    gr_readahead_destroy(s->ahead);
    gr_runtime_destroy(s->rt);
    gr_window_destroy(s->win);
    if (s->sampler) {
        uint64_t base, peak, total;
        gr_devmem_stop(s->sampler, &base, &peak, &total);
    }
    gr_ranks_finish(&s->ranks);
    gr_ledger_free(&s->ledger);
    gr_io_plan_free(&s->plan);
    gr_manifest_free(&s->manifest);
    gr_manifest_free(&s->own);
    free(s->manifest_path);
    free(s->own_path);
    free(s->skip);
    json_decref(s->earlier[0]);
    json_decref(s->earlier[1]);
    json_decref(s->settings);
    for (uint64_t k = 0; k < s->n_claimed; k++)
        free(s->claimed[k]);
    free(s->claimed);
    gr_consts_free(&s->consts); /* after the runtime: its jobs read them until then */
    gr_graph_destroy(s->g);
out_free:
    if (tensor_fd >= 0)
        close(tensor_fd);
    free(s);
    return rc;
}

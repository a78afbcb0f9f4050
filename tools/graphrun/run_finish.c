/*
 * run_finish.c - the end of `graphrun run` (step 5 of run.c): the ranks agree on the
 * outcome, rank 0 writes the run's manifest (merged from the ranks' own with --mpi) and
 * prints the summary (text, or --json's object with the failures and what the input
 * directories held that is not a tensor); per tensor, what is kept and how to go on; all or
 * nothing, the outputs published together or removed. And what any step leaves behind when
 * a rank fails: nothing but whole outputs.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/run.h"

#define MAX_FAILURES_JSON 100

/* On leaving early (ranks.h): nothing of this rank may stay behind but whole outputs. */
void gr_run_remove_temporaries(void *arg)
{
    run_state *s = arg;

    gr_io_abort(&s->plan);
    gr_manifest_abort(&s->manifest);
    gr_manifest_abort(&s->own);
}

/* Planned tensor i's first input, as messages name it ("stdin" for `-`, as io.c does). */
const char *gr_run_input_name(const gr_io_plan *plan, uint64_t i)
{
    const char *path = plan->in[i * plan->opt.n_inputs].path;

    return gr_inputs_is_stdin(&plan->src, path) ? "stdin" : path;
}

/* What the input directories held that is not a tensor (inputs.h), when there is any. */
void gr_run_add_skipped(json_t *doc, const gr_inputs *in)
{
    json_t *v;

    if (in->n_skipped == 0)
        return;
    v = json_array();
    for (uint64_t i = 0; i < in->n_skipped; i++)
        json_array_append_new(v, json_string(in->skipped[i]));
    json_object_set_new(doc, "skipped", v);
}

/* --json, one process: every failed tensor (the manifest has them all). */
static void add_failures(const run_state *s, json_t *doc)
{
    json_t *v = json_array();
    uint64_t listed = 0;

    for (uint64_t i = 0; i < s->plan.count && listed < MAX_FAILURES_JSON; i++) {
        const gr_ledger_entry *e = &s->ledger.e[i];
        json_t *t;

        if (e->outcome != GR_OUTCOME_FAILED)
            continue;
        t = json_pack("{s:I,s:s,s:s}", "index", (json_int_t)s->plan.index[i], "input",
                      gr_run_input_name(&s->plan, i), "status", e->status);
        if (e->node[0])
            json_object_set_new(t, "node", json_string(e->node));
        if (e->message)
            json_object_set_new(t, "message", json_string(e->message));
        json_array_append_new(v, t);
        listed++;
    }
    json_object_set_new(doc, "failures", v);
}

static void print_summary(run_state *s, const gr_run_report *all, const gr_run_facts *f)
{
    if (s->a.o.json) {
        json_t *doc = gr_run_report_json(all, f);

        if (!f->mpi)
            add_failures(s, doc);
        gr_run_add_skipped(doc, &s->plan.src);
        json_dumpf(doc, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        gr_run_report_print(all, f);
    }
    fflush(stdout);
    s->reported = true;
}

/* Rank 0, per tensor, a run that did not finish: what is kept, and how to go on. */
static void say_kept(const run_state *s, const gr_run_report *all, int ranks, int rc)
{
    int64_t tensors = 0, done = 0, failed = 0, not_run = 0;
    char more[96] = "";

    for (int k = 0; k < ranks; k++) {
        tensors += all[k].tensors;
        done += all[k].done;
        failed += all[k].failed;
        not_run += all[k].canceled;
    }
    if (failed)
        snprintf(more, sizeof(more), "; %lld failed", (long long)failed);
    fprintf(stderr, "graphrun run: %s: %lld of %lld done, written%s; %lld not run%s\n",
            gr_run_status_name(rc), (long long)done, (long long)tensors, more, (long long)not_run,
            s->manifest_path ? "; rerun with --resume" : "");
    if (s->plan.src.stdout_file)
        fprintf(stderr, "graphrun run: --output -: nothing written to stdout (only a run that "
                        "succeeds writes its tensor there)\n");
}

/* Step 4's end and step 5, per tensor: this rank's manifest, the agreement, the run's
 * manifest (rank 0: with --mpi merged from the ranks' own, which it then removes), the
 * report. */
int gr_run_finish_per_tensor(run_state *s, int rc)
{
    gr_ranks *r = &s->ranks;
    bool lead = r->world.rank == 0, multi = gr_ranks_multi(r);
    gr_run_report *all = NULL;
    gr_run_facts f = {.ranks = r->world.size, .mpi = multi};
    int64_t outputs;
    char why[512];

    if (multi && gr_run_write_live_manifest(s, gr_run_status_name(rc), true) != GR_OK &&
        rc == GR_EXIT_OK)
        rc = GR_EXIT_FAILED;
    snprintf(s->report.host, sizeof(s->report.host), "%s", r->world.host);
    if (lead && (all = calloc((size_t)r->world.size, sizeof(*all))) == NULL) {
        fprintf(stderr, "graphrun run: no memory for the ranks' reports\n");
        if (r->mpi)
            r->mpi->abort(GR_EXIT_RUNTIME);
        return GR_EXIT_RUNTIME;
    }
    gr_ranks_gather(r, "reporting", &s->report, sizeof(s->report), all);
    rc = gr_ranks_agree(r, "writing outputs", rc, s->why);
    outputs = s->report.outputs;
    gr_ranks_reduce(r, "reporting", &outputs, 1, GR_MPI_SUM);
    f.status = gr_run_status_name(rc);
    f.outputs_written = outputs;
    f.manifest = s->manifest_path;
    if (lead && f.manifest) {
        json_t *doc = gr_run_manifest_json(s, all, &f);

        if (gr_manifest_write(&s->manifest, doc, why, sizeof(why)) != GR_OK ||
            gr_manifest_publish(&s->manifest, why, sizeof(why)) != GR_OK) {
            fprintf(stderr, "graphrun run: %s (the outputs written are whole)\n", why);
            gr_manifest_abort(&s->manifest);
            f.manifest = NULL;
            if (rc == GR_EXIT_OK)
                rc = GR_EXIT_FAILED;
            f.status = gr_run_status_name(rc);
        } else if (multi) {
            for (int k = 0; k < r->world.size; k++) {
                snprintf(why, sizeof(why), "%s.rank%d", s->manifest_path, k);
                unlink(why);
            }
        }
        json_decref(doc);
    }
    if (lead) {
        if (rc != GR_EXIT_OK)
            say_kept(s, all, r->world.size, rc);
        print_summary(s, all, &f);
    }
    free(all);
    return rc;
}

/* Step 4's end and step 5, --all-or-nothing: gather the reports, agree, publish or remove,
 * report. */
int gr_run_finish_all_or_nothing(run_state *s, int rc)
{
    gr_ranks *r = &s->ranks;
    bool lead = r->world.rank == 0;
    gr_run_report *all = NULL;
    gr_run_facts f = {.ranks = r->world.size, .mpi = gr_ranks_multi(r)};
    int64_t outputs = (int64_t)(s->plan.count * s->a.o.n_outputs), wrote_rc = rc;
    char why[512];

    snprintf(s->report.host, sizeof(s->report.host), "%s", r->world.host);
    if (lead && (all = calloc((size_t)r->world.size, sizeof(*all))) == NULL) {
        fprintf(stderr, "graphrun run: no memory for the ranks' reports\n");
        if (r->mpi)
            r->mpi->abort(GR_EXIT_RUNTIME);
        return GR_EXIT_RUNTIME;
    }
    gr_ranks_gather(r, "reporting", &s->report, sizeof(s->report), all);
    /* Every rank's outcome so far, and every rank's output count, known to all. */
    gr_ranks_reduce(r, "reporting", &wrote_rc, 1, GR_MPI_MAX);
    gr_ranks_reduce(r, "reporting", &outputs, 1, GR_MPI_SUM);
    f.manifest = s->manifest.path;
    f.status = "ok";
    f.outputs_written = outputs;
    if (lead && wrote_rc == GR_EXIT_OK && f.manifest != NULL) {
        json_t *doc;

        for (uint64_t i = 0; i < s->plan.count; i++) { /* as they will be once renamed */
            gr_ledger_entry *e = &s->ledger.e[i];

            e->outcome = GR_OUTCOME_DONE;
            for (uint32_t p = 0; p < s->a.o.n_outputs; p++) {
                struct stat sb;
                const char *tmp = s->plan.tmp[i * s->a.o.n_outputs + p];

                e->out_size[p] = tmp && stat(tmp, &sb) == 0 ? (int64_t)sb.st_size : -1;
            }
        }
        doc = gr_run_manifest_json(s, all, &f);
        if (gr_manifest_write(&s->manifest, doc, s->why, sizeof(s->why)) != GR_OK)
            rc = GR_EXIT_FAILED;
        json_decref(doc);
    }
    rc = gr_ranks_agree(r, "writing outputs", rc, s->why);
    if (rc == GR_EXIT_OK) {
        /* Durable as --sync says before the manifest is: with end, the data before the
         * renames (the outputs were not synced one by one); with each or end, the renames
         * (their directories). */
        bool sync = s->a.sync != GR_SYNC_NONE;
        int prc = (s->a.sync != GR_SYNC_END ||
                   gr_io_sync_dirs(&s->plan, true, why, sizeof(why)) == GR_OK) &&
                          gr_io_publish(&s->plan, why, sizeof(why)) == GR_OK &&
                          (!sync || gr_io_sync_dirs(&s->plan, false, why, sizeof(why)) == GR_OK)
                      ? 0
                      : GR_EXIT_FAILED;

        rc = gr_ranks_agree(r, "publishing outputs", prc, why);
        if (rc != GR_EXIT_OK && lead && r->mpi)
            fprintf(stderr, "graphrun run: renaming outputs into place failed: the outputs of "
                            "the ranks that did not fail are in place; no manifest\n");
        if (rc == GR_EXIT_OK && lead && f.manifest &&
            gr_manifest_publish(&s->manifest, why, sizeof(why)) != GR_OK) {
            fprintf(stderr, "graphrun run: %s (the outputs are in place)\n", why);
            rc = GR_EXIT_FAILED;
        }
    }
    if (rc != GR_EXIT_OK) {
        gr_run_remove_temporaries(s);
        f.outputs_written = 0;
        f.manifest = NULL;
        if (lead)
            fprintf(stderr, "graphrun run: %s: no output written\n", gr_run_status_name(rc));
    }
    f.status = gr_run_status_name(rc);
    if (lead)
        print_summary(s, all, &f);
    free(all);
    return rc;
}


/*
 * run_manifest.c - the manifests of `graphrun run` (see run.h): where they go, the earlier
 * run's read for --resume and checked against this one (the settings that decide the
 * outputs), the one this rank replaces as the run goes, and the run's own at the end (with
 * --mpi, merged from the ranks' own).
 *
 * The manifest is replaced whole (run_report.h: a temporary file renamed into place), at
 * most every MANIFEST_MIN_NS and never more often than every MANIFEST_COST times what
 * writing it last took (a run of many tensors spends at most a twentieth of its time on
 * it), and always at the end.
 */
#define _GNU_SOURCE /* strdup */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/run.h"

#define MANIFEST_MIN_NS (250 * 1000000ll)
#define MANIFEST_COST 20

/* The manifest this rank replaces as the run goes (per tensor), or NULL. */
static gr_manifest *live_manifest(run_state *s)
{
    if (s->a.all_or_nothing || s->manifest_path == NULL)
        return NULL;
    return gr_ranks_multi(&s->ranks) ? &s->own : &s->manifest;
}

/* The manifest's path: --manifest, or with directories, lists or --mpi
 * OUTPUT.manifest.json beside the first output (a file, or a directory: never inside it,
 * where it would pass for a tensor; for an output list @FILE, FILE.manifest.json). */
static char *manifest_path(const run_args *a, bool multi)
{
    const char *out = a->o.outputs[0][0] == '@' ? a->o.outputs[0] + 1 : a->o.outputs[0];
    size_t n = strlen(out);
    struct stat sb;
    char *p;

    if (a->manifest)
        return strdup(a->manifest);
    if (!multi && a->o.inputs[0][0] != '@' &&
        !(stat(a->o.inputs[0], &sb) == 0 && S_ISDIR(sb.st_mode)))
        return NULL;
    while (n > 1 && out[n - 1] == '/')
        n--;
    if ((p = malloc(n + sizeof(".manifest.json"))) != NULL)
        snprintf(p, n + sizeof(".manifest.json"), "%.*s.manifest.json", (int)n, out);
    return p;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --resume: the earlier run's manifests (the run's, and with --mpi this rank's own, which
 * a run killed before the end leaves newer), and the outputs they list. */
static int read_earlier(run_state *s)
{
    const char *paths[2] = {s->manifest_path, s->own_path};

    if (s->manifest_path == NULL) {
        snprintf(s->why, sizeof(s->why),
                 "--resume needs the manifest of the run to resume: give its --manifest "
                 "FILE (only runs over directories or lists, or with --mpi, write one by "
                 "default)");
        return GR_EXIT_USAGE;
    }
    for (int k = 0; k < 2; k++) {
        if (paths[k] == NULL)
            continue;
        if (gr_ledger_load(paths[k], &s->earlier[k], s->why, sizeof(s->why)) != GR_OK)
            return GR_EXIT_USAGE;
        if (s->earlier[k] &&
            gr_ledger_claimed(s->earlier[k], &s->claimed, &s->n_claimed) != GR_OK) {
            snprintf(s->why, sizeof(s->why), "out of memory reading %s", paths[k]);
            return GR_EXIT_RUNTIME;
        }
    }
    if (s->claimed)
        qsort(s->claimed, s->n_claimed, sizeof(*s->claimed), str_cmp);
    s->resume_from_nothing = s->earlier[0] == NULL && s->earlier[1] == NULL;
    return GR_EXIT_OK;
}

/* The manifests' paths, and their files staged: the run's (rank 0's), and with --mpi per
 * tensor this rank's own, MANIFEST.rankK (ours by its name: replaced without --force). */
int gr_run_stage_manifests(run_state *s)
{
    run_args *a = &s->a;
    bool multi = gr_ranks_multi(&s->ranks);
    size_t n;
    int rc;

    s->manifest_path = manifest_path(a, multi);
    if (s->manifest_path == NULL)
        return a->resume ? read_earlier(s) : GR_EXIT_OK; /* which refuses */
    if (multi && !a->all_or_nothing) {
        n = strlen(s->manifest_path) + 32;
        if ((s->own_path = malloc(n)) == NULL) {
            snprintf(s->why, sizeof(s->why), "out of memory");
            return GR_EXIT_RUNTIME;
        }
        snprintf(s->own_path, n, "%s.rank%d", s->manifest_path, s->ranks.world.rank);
    }
    if (a->resume && (rc = read_earlier(s)) != GR_EXIT_OK)
        return rc;
    if (s->ranks.world.rank == 0 &&
        gr_manifest_stage(&s->manifest, s->manifest_path, a->o.force || a->resume, s->why,
                          sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    if (s->own_path &&
        gr_manifest_stage(&s->own, s->own_path, true, s->why, sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    return GR_EXIT_OK;
}

static void add_file_facts(json_t *files, const char *path)
{
    struct stat sb;
    bool there = stat(path, &sb) == 0;

    json_array_append_new(
        files, json_pack("{s:s,s:I,s:I}", "path", path, "size",
                         (json_int_t)(there ? sb.st_size : -1), "mtime_ns",
                         (json_int_t)(there ? (int64_t)sb.st_mtim.tv_sec * 1000000000ll +
                                                  sb.st_mtim.tv_nsec
                                            : -1)));
}

/* What decides the outputs besides the graph file and the inputs, as the manifest records
 * it for --resume: --dtype, --shape and --raw as given, the kernel files (--kernels, and
 * those the spec's `cuda "FILE"` lines name, from the spec's directory as its parser takes
 * them) with their size and mtime_ns, and the constants' files (--const) the same way,
 * recorded only when there are any (so that a manifest from before --const resumes). */
json_t *gr_run_settings_json(const run_args *ra)
{
    const gr_run_opts *a = &ra->o;
    json_t *files = json_array(), *shape = json_null(), *settings;
    const char *slash = strrchr(a->graph, '/');
    char line[4096], path[8192];
    FILE *spec;

    if (a->have_shape) {
        char buf[GR_NPY_MAX_DIMS * 21 + 1];
        size_t at = 0;

        for (uint32_t d = 0; d < a->shape.ndim && at < sizeof(buf); d++)
            at += (size_t)snprintf(buf + at, sizeof(buf) - at, d ? ",%llu" : "%llu",
                                   (unsigned long long)a->shape.dims[d]);
        shape = json_string(buf);
    }
    for (uint32_t k = 0; k < a->n_kernels; k++)
        add_file_facts(files, a->kernels[k]);
    if ((spec = fopen(a->graph, "r")) != NULL) {
        while (fgets(line, sizeof(line), spec)) {
            char *p = line + strspn(line, " \t"), *end;

            if (strncmp(p, "cuda", 4) != 0 || (p[4] != ' ' && p[4] != '\t'))
                continue;
            p += 4 + strspn(p + 4, " \t");
            if (*p != '"' || (end = strchr(p + 1, '"')) == NULL)
                continue;
            snprintf(path, sizeof(path), "%.*s%.*s",
                     p[1] == '/' || slash == NULL ? 0 : (int)(slash - a->graph + 1), a->graph,
                     (int)(end - p - 1), p + 1);
            add_file_facts(files, path);
        }
        fclose(spec);
    }
    settings = json_pack("{s:o,s:o,s:b,s:o}", "dtype",
                         a->dtype ? json_string(a->dtype) : json_null(), "shape", shape, "raw",
                         a->raw, "kernel_files", files);
    if (settings && a->n_consts &&
        json_object_set_new(settings, "constants",
                            gr_consts_settings_json(a->consts, a->n_consts)) != 0) {
        json_decref(settings);
        return NULL;
    }
    return settings;
}

/* Whether key k of two settings objects is the same; absent is as null. */
static bool same_setting(const json_t *then, const json_t *now, const char *key)
{
    const json_t *x = json_object_get(then, key), *y = json_object_get(now, key);

    return (x == NULL && y == NULL) || json_equal(x, y);
}

/* --resume: refused when what decides the outputs (settings_json) is not what the run that
 * wrote `doc` had, naming what differs. */
int gr_run_same_settings(run_state *s, const json_t *doc, const char *path)
{
    static const char *const key[] = {"dtype", "shape", "raw", "kernel_files", "constants"};
    static const char *const what[] = {"--dtype", "--shape", "--raw",
                                       "the kernel files (--kernels, the spec's cuda lines)",
                                       "the constants (--const: their names or files)"};
    const json_t *then = json_object_get(doc, "settings");
    const json_t *now = s->settings;
    int rc = GR_EXIT_OK;

    if (then == NULL) {
        snprintf(s->why, sizeof(s->why),
                 "--resume: %s does not record --dtype, --shape, --raw and the kernel files "
                 "(written by an older graphrun): run again without --resume (with --force)",
                 path);
        rc = GR_EXIT_USAGE;
    }
    for (int k = 0; rc == GR_EXIT_OK && k < 5; k++)
        if (!same_setting(then, now, key[k])) {
            snprintf(s->why, sizeof(s->why),
                     "--resume: %s %s the run that wrote %s: every output may be stale; run "
                     "again without --resume (with --force)",
                     what[k], k < 3 ? "differs from" : "changed since", path);
            rc = GR_EXIT_USAGE;
        }
    return rc;
}

const char *gr_run_status_name(int rc)
{
    return rc == GR_EXIT_OK ? "ok" : rc == GR_EXIT_CANCELED ? "interrupted" : "failed";
}

/* What the manifest says of the run as a whole, on `doc`. */
static void set_run_fields(const run_state *s, json_t *doc)
{
    const run_args *a = &s->a;
    json_t *v;

    json_object_set_new(doc, "graphrun", json_string(gr_version()));
    if (s->ranks.mpi)
        json_object_set_new(doc, "mpi", json_string(s->ranks.mpi->library));
    json_object_set_new(doc, "graph", json_string(a->o.graph));
    v = json_array();
    for (uint32_t p = 0; p < a->o.n_inputs; p++)
        json_array_append_new(v, json_string(a->o.inputs[p]));
    json_object_set_new(doc, "inputs", v);
    v = json_array();
    for (uint32_t p = 0; p < a->o.n_outputs; p++)
        json_array_append_new(v, json_string(a->o.outputs[p]));
    json_object_set_new(doc, "outputs", v);
    json_object_set_new(doc, "mode", json_string(a->all_or_nothing ? "all-or-nothing"
                                                                   : "per-tensor"));
    json_object_set_new(doc, "settings", json_incref(s->settings));
}

/* Replace the manifest this rank keeps as the run goes; `now` forces it, else it is written
 * only when it is due (MANIFEST_MIN_NS, MANIFEST_COST). A failure is said once and the run
 * goes on (its outputs are whole; only resuming it needs the manifest). */
gr_status gr_run_write_live_manifest(run_state *s, const char *status, bool now)
{
    gr_manifest *m = live_manifest(s);
    int64_t t0 = gr_now_ns(), gap = s->manifest_cost * MANIFEST_COST;
    char why[512];
    json_t *doc;
    gr_status st;

    if (m == NULL)
        return GR_OK;
    if (!now && t0 - s->manifest_at < (gap > MANIFEST_MIN_NS ? gap : MANIFEST_MIN_NS))
        return GR_OK;
    doc = json_object();
    json_object_set_new(doc, "status", json_string(status));
    set_run_fields(s, doc);
    if (gr_ranks_multi(&s->ranks)) {
        json_object_set_new(doc, "rank", json_integer(s->ranks.world.rank));
        json_object_set_new(doc, "ranks", json_integer(s->ranks.world.size));
    }
    gr_ledger_set_json(&s->ledger, doc);
    st = gr_manifest_write(m, doc, why, sizeof(why));
    if (st == GR_OK)
        st = gr_manifest_publish(m, why, sizeof(why));
    json_decref(doc);
    s->manifest_at = gr_now_ns();
    s->manifest_cost = s->manifest_at - t0;
    s->manifest_dirty = false;
    if (st != GR_OK && !s->manifest_failed)
        fprintf(stderr, "graphrun run: %s (the outputs are whole, but --resume cannot use "
                        "this manifest)\n", why);
    s->manifest_failed |= st != GR_OK;
    return st;
}

/* The "files" of every rank's tensors: each tensor's entry from its rank's own manifest
 * (MANIFEST.rankK, per tensor), or (--all-or-nothing, or a rank whose manifest cannot be
 * read) its index, name, rank and outputs, with the status the run's outcome implies. */
static json_t *merged_files(const run_state *s, int ranks, bool all_done)
{
    const run_args *a = &s->a;
    uint64_t total = s->plan.total;
    json_t **entry = calloc(total + 1, sizeof(*entry)), *files = json_array();

    for (int k = 0; entry && !a->all_or_nothing && k < ranks; k++) {
        char path[4096];
        json_t *doc, *f;
        size_t q;

        snprintf(path, sizeof(path), "%s.rank%d", s->manifest_path, k);
        if ((doc = json_load_file(path, 0, NULL)) == NULL)
            continue;
        json_array_foreach(json_object_get(doc, "files"), q, f)
        {
            json_int_t g = json_integer_value(json_object_get(f, "index"));

            if (g >= 0 && (uint64_t)g < total && entry[g] == NULL)
                entry[g] = json_incref(f);
        }
        json_decref(doc);
    }
    for (uint64_t i = 0; i < total; i++) {
        const char *name = s->plan.names ? s->plan.names[i] : NULL;
        json_t *t = entry ? entry[i] : NULL, *outs;

        if (t == NULL) {
            t = json_object();
            outs = json_array();
            json_object_set_new(t, "index", json_integer((json_int_t)i));
            json_object_set_new(t, "rank", json_integer((json_int_t)(i % (uint64_t)ranks)));
            if (name)
                json_object_set_new(t, "name", json_string(name));
            json_object_set_new(t, "status", json_string(all_done ? "done" : "not run"));
            for (uint32_t p = 0; p < a->o.n_outputs; p++)
                json_array_append_new(outs, json_string(s->plan.src.out[i * a->o.n_outputs + p]));
            json_object_set_new(t, "outputs", outs);
        }
        json_array_append_new(files, t);
    }
    free(entry);
    return files;
}

/* The run's manifest: the summary, the run, and every tensor (tensor i: rank i % ranks). */
json_t *gr_run_manifest_json(const run_state *s, const gr_run_report *all,
                             const gr_run_facts *f)
{
    json_t *doc = gr_run_report_json(all, f);

    set_run_fields(s, doc);
    if (!gr_ranks_multi(&s->ranks) && !(s->a.all_or_nothing && strcmp(f->status, "ok"))) {
        gr_ledger_set_json(&s->ledger, doc);
    } else {
        json_object_set_new(doc, "graph_file", json_pack("{s:I,s:I}", "size",
                                                         (json_int_t)s->ledger.graph_size,
                                                         "mtime_ns",
                                                         (json_int_t)s->ledger.graph_mtime_ns));
        json_object_set_new(doc, "files",
                            merged_files(s, f->ranks, strcmp(f->status, "ok") == 0));
    }
    return doc;
}

/*
 * ledger.c - every tensor's outcome, the manifest's "files", and --resume (see ledger.h).
 *
 * Why resuming is safe: a tensor is skipped only when everything that decided its outputs
 * and everything that shows they are whole is as the manifest recorded it. The outputs were
 * renamed into place whole (io.c) before the tensor was recorded as done, and the manifest
 * is itself replaced whole, so a recorded "done" means the files were complete then; their
 * sizes now say nobody truncated or replaced them since. A tensor done after the manifest
 * was last written (a run killed between the two) is simply run again.
 */
#define _GNU_SOURCE /* strdup */
#include "tools/graphrun/ledger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int64_t mtime_ns(const struct stat *sb)
{
    return (int64_t)sb->st_mtim.tv_sec * 1000000000ll + sb->st_mtim.tv_nsec;
}

gr_status gr_ledger_init(gr_ledger *l, const gr_io_plan *plan, const char *graph, int ranks,
                         char *why, size_t why_len)
{
    uint32_t ni = plan->opt.n_inputs;
    struct stat sb;

    memset(l, 0, sizeof(*l));
    l->plan = plan;
    l->ranks = ranks > 0 ? ranks : 1;
    if ((l->e = calloc(plan->count + 1, sizeof(*l->e))) == NULL) {
        snprintf(why, why_len, "out of memory");
        return GR_ERR_OUT_OF_MEMORY;
    }
    if (stat(graph, &sb) == 0) {
        l->graph_size = (int64_t)sb.st_size;
        l->graph_mtime_ns = mtime_ns(&sb);
    }
    for (uint64_t i = 0; i < plan->count; i++)
        for (uint32_t p = 0; p < ni; p++) {
            const char *path = plan->in[i * ni + p].path;

            bool there = stat(path, &sb) == 0;

            l->e[i].in_size[p] = there ? (int64_t)sb.st_size : -1;
            l->e[i].in_mtime_ns[p] = there ? mtime_ns(&sb) : -1;
        }
    return GR_OK;
}

void gr_ledger_free(gr_ledger *l)
{
    for (uint64_t i = 0; l->e && l->plan && i < l->plan->count; i++)
        free(l->e[i].message);
    free(l->e);
    memset(l, 0, sizeof(*l));
}

void gr_ledger_done(gr_ledger *l, uint64_t i)
{
    uint32_t no = l->plan->opt.n_outputs;
    gr_ledger_entry *e = &l->e[i];

    for (uint32_t p = 0; p < no; p++) {
        struct stat sb;

        e->out_size[p] = stat(l->plan->out[i * no + p], &sb) == 0 ? (int64_t)sb.st_size : -1;
    }
    if (e->outcome != GR_OUTCOME_DONE)
        l->done++;
    e->outcome = GR_OUTCOME_DONE;
}

void gr_ledger_failed(gr_ledger *l, uint64_t i, int kind, const char *node,
                      const char *message)
{
    gr_ledger_entry *e = &l->e[i];

    if (e->outcome != GR_OUTCOME_FAILED)
        l->failed++;
    e->outcome = GR_OUTCOME_FAILED;
    e->kind = kind;
    snprintf(e->status, sizeof(e->status), "%s", gr_run_error_name(kind));
    snprintf(e->node, sizeof(e->node), "%s", node ? node : "");
    free(e->message);
    e->message = message ? strdup(message) : NULL;
}

/* What the manifest calls input path `path`, output path `out`: `-` for stdin and stdout
 * (inputs.h: a memfd, and a temporary file of ours, neither worth naming). */
static const char *in_label(const gr_io_plan *plan, const char *path)
{
    return gr_inputs_is_stdin(&plan->src, path) ? "-" : path;
}

static const char *out_label(const gr_io_plan *plan, const char *out)
{
    return plan->src.stdout_file && strcmp(out, plan->src.stdout_file) == 0 ? "-" : out;
}

static const char *outcome_name(gr_outcome o)
{
    return o == GR_OUTCOME_DONE ? "done" : o == GR_OUTCOME_FAILED ? "failed" : "not run";
}

static json_t *entry_json(const gr_ledger *l, uint64_t i)
{
    const gr_io_plan *plan = l->plan;
    uint32_t ni = plan->opt.n_inputs, no = plan->opt.n_outputs;
    const gr_ledger_entry *e = &l->e[i];
    uint64_t g = plan->index[i];
    json_t *t = json_object(), *outs = json_array(), *ins = json_array(), *sizes;

    json_object_set_new(t, "index", json_integer((json_int_t)g));
    json_object_set_new(t, "rank", json_integer((json_int_t)(g % (uint64_t)l->ranks)));
    if (plan->names)
        json_object_set_new(t, "name", json_string(plan->names[g]));
    json_object_set_new(t, "status", json_string(outcome_name(e->outcome)));
    if (e->earlier)
        json_object_set_new(t, "earlier", json_true());
    for (uint32_t p = 0; p < no; p++)
        json_array_append_new(outs, json_string(out_label(plan, plan->out[i * no + p])));
    json_object_set_new(t, "outputs", outs);
    if (e->outcome == GR_OUTCOME_DONE) {
        sizes = json_array();
        for (uint32_t p = 0; p < no; p++)
            json_array_append_new(sizes, json_integer(e->out_size[p]));
        json_object_set_new(t, "output_sizes", sizes);
    }
    for (uint32_t p = 0; p < ni; p++)
        json_array_append_new(ins, json_pack("{s:s,s:I,s:I}", "path",
                                             in_label(plan, plan->in[i * ni + p].path), "size",
                                             (json_int_t)e->in_size[p], "mtime_ns",
                                             (json_int_t)e->in_mtime_ns[p]));
    json_object_set_new(t, "inputs", ins);
    if (e->outcome == GR_OUTCOME_FAILED) {
        json_t *err = json_object();

        json_object_set_new(err, "status", json_string(e->status));
        if (e->node[0])
            json_object_set_new(err, "node", json_string(e->node));
        if (e->message)
            json_object_set_new(err, "message", json_string(e->message));
        json_object_set_new(t, "error", err);
    }
    return t;
}

void gr_ledger_set_json(const gr_ledger *l, json_t *doc)
{
    json_t *files = json_array();

    json_object_set_new(doc, "graph_file",
                        json_pack("{s:I,s:I}", "size", (json_int_t)l->graph_size, "mtime_ns",
                                  (json_int_t)l->graph_mtime_ns));
    for (uint64_t i = 0; i < l->plan->count; i++)
        json_array_append_new(files, entry_json(l, i));
    json_object_set_new(doc, "files", files);
}

gr_status gr_ledger_load(const char *path, json_t **doc, char *why, size_t why_len)
{
    json_error_t jerr;
    struct stat sb;

    *doc = NULL;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return GR_OK;
    if ((*doc = json_load_file(path, 0, &jerr)) == NULL) {
        snprintf(why, why_len, "--resume: manifest %s: cannot read it: %s (line %d)", path,
                 jerr.text, jerr.line);
        return GR_ERR_INVALID_ARGUMENT;
    }
    if (!json_is_array(json_object_get(*doc, "files"))) {
        snprintf(why, why_len, "--resume: %s is not a graphrun manifest (no \"files\")", path);
        json_decref(*doc);
        *doc = NULL;
        return GR_ERR_INVALID_ARGUMENT;
    }
    return GR_OK;
}

gr_status gr_ledger_claimed(const json_t *doc, char ***paths, uint64_t *n)
{
    size_t k, q;
    json_t *f, *o;

    json_array_foreach(json_object_get(doc, "files"), k, f)
    {
        json_array_foreach(json_object_get(f, "outputs"), q, o)
        {
            char **v;

            if (!json_is_string(o))
                continue;
            if ((v = realloc(*paths, (*n + 1) * sizeof(*v))) == NULL)
                return GR_ERR_OUT_OF_MEMORY;
            *paths = v;
            if ((v[*n] = strdup(json_string_value(o))) == NULL)
                return GR_ERR_OUT_OF_MEMORY;
            (*n)++;
        }
    }
    return GR_OK;
}

static bool same_string(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

static bool same_int(const json_t *v, int64_t x)
{
    return json_is_integer(v) && (int64_t)json_integer_value(v) == x;
}

/* Whether manifest entry f lets tensor i be skipped (see ledger.h). */
static bool may_skip(const gr_ledger *l, uint64_t i, const json_t *f)
{
    const gr_io_plan *plan = l->plan;
    uint32_t ni = plan->opt.n_inputs, no = plan->opt.n_outputs;
    const json_t *ins = json_object_get(f, "inputs"), *outs = json_object_get(f, "outputs");
    const json_t *sizes = json_object_get(f, "output_sizes");

    if (!same_string(json_object_get(f, "status"), "done") ||
        (plan->names && !same_string(json_object_get(f, "name"), plan->names[plan->index[i]])))
        return false;
    if (json_array_size(ins) != ni || json_array_size(outs) != no ||
        json_array_size(sizes) != no)
        return false;
    for (uint32_t p = 0; p < ni; p++) {
        const json_t *in = json_array_get(ins, p);

        if (!same_string(json_object_get(in, "path"), plan->in[i * ni + p].path) ||
            !same_int(json_object_get(in, "size"), l->e[i].in_size[p]) ||
            !same_int(json_object_get(in, "mtime_ns"), l->e[i].in_mtime_ns[p]))
            return false;
    }
    for (uint32_t p = 0; p < no; p++) {
        struct stat sb;

        if (!same_string(json_array_get(outs, p), plan->out[i * no + p]) ||
            stat(plan->out[i * no + p], &sb) != 0 || !S_ISREG(sb.st_mode) ||
            !same_int(json_array_get(sizes, p), (int64_t)sb.st_size))
            return false;
    }
    return true;
}

/* Planned tensors ordered by their input paths (port 0's, then port 1's, ...). */
static int by_inputs(const void *a, const void *b, void *arg)
{
    const gr_io_plan *plan = arg;
    uint32_t ni = plan->opt.n_inputs;
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    for (uint32_t p = 0; p < ni; p++) {
        int c = strcmp(plan->in[x * ni + p].path, plan->in[y * ni + p].path);

        if (c != 0)
            return c;
    }
    return (x > y) - (x < y);
}

/* Manifest entry f's input paths against planned tensor i's: <0, 0, >0; 2 when f has not
 * as many (or not strings), which matches nothing. */
static int entry_cmp(const gr_io_plan *plan, const json_t *f, uint64_t i)
{
    uint32_t ni = plan->opt.n_inputs;
    const json_t *ins = json_object_get(f, "inputs");

    if (json_array_size(ins) != ni)
        return 2;
    for (uint32_t p = 0; p < ni; p++) {
        const json_t *path = json_object_get(json_array_get(ins, p), "path");
        int c;

        if (!json_is_string(path))
            return 2;
        if ((c = strcmp(json_string_value(path), plan->in[i * ni + p].path)) != 0)
            return c;
    }
    return 0;
}

gr_status gr_ledger_resume(gr_ledger *l, const json_t *doc, const char *path, bool *skip,
                           char *why, size_t why_len)
{
    const gr_io_plan *plan = l->plan;
    const json_t *gf = json_object_get(doc, "graph_file");
    uint64_t *order;
    size_t k;
    json_t *f;

    if (gf == NULL) {
        snprintf(why, why_len,
                 "--resume: %s does not record what became of each tensor (written by an "
                 "older graphrun): run again without --resume (with --force)",
                 path);
        return GR_ERR_INVALID_ARGUMENT;
    }
    if (!same_int(json_object_get(gf, "size"), l->graph_size) ||
        !same_int(json_object_get(gf, "mtime_ns"), l->graph_mtime_ns)) {
        snprintf(why, why_len,
                 "--resume: the graph file changed since the run that wrote %s (its size or "
                 "modification time differs): every output may be stale; run again without "
                 "--resume (with --force)",
                 path);
        return GR_ERR_INVALID_ARGUMENT;
    }
    /* Entries are found by their tensors' input paths, not by index: a directory's index is
     * its sorted position, which a file added since moves. Only this plan's tensors (this
     * rank's shard) are looked among. */
    if ((order = malloc((plan->count + 1) * sizeof(*order))) == NULL) {
        snprintf(why, why_len, "out of memory");
        return GR_ERR_OUT_OF_MEMORY;
    }
    for (uint64_t i = 0; i < plan->count; i++)
        order[i] = i;
    qsort_r(order, plan->count, sizeof(*order), by_inputs, (void *)plan);
    json_array_foreach(json_object_get(doc, "files"), k, f)
    {
        uint64_t lo = 0, hi = plan->count;

        while (lo < hi) { /* the first tensor of these inputs */
            uint64_t mid = lo + (hi - lo) / 2;

            if (entry_cmp(plan, f, order[mid]) > 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < plan->count && entry_cmp(plan, f, order[lo]) == 0; lo++) {
            uint64_t i = order[lo];

            if (l->e[i].earlier || !may_skip(l, i, f))
                continue; /* a list may name the same inputs twice, to other outputs */
            for (uint32_t p = 0; p < plan->opt.n_outputs; p++)
                l->e[i].out_size[p] = (int64_t)json_integer_value(
                    json_array_get(json_object_get(f, "output_sizes"), p));
            l->e[i].outcome = GR_OUTCOME_DONE;
            l->e[i].earlier = true;
            l->done++;
            l->earlier++;
            skip[i] = true;
            break;
        }
    }
    free(order);
    return GR_OK;
}

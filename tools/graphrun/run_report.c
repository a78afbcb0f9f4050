/*
 * run_report.c - summaries and the manifest of `graphrun run` (see run_report.h).
 *
 * Totals over ranks: counts and bytes add up; seconds is the slowest rank's job (the ranks
 * start their jobs together, just after agreeing that every runtime has started), and the
 * throughput is every rank's bytes over it; the budget is per device, so the highest is
 * shown; the first error is the first failing rank's.
 */
#define _GNU_SOURCE /* strdup */
#include "tools/graphrun/run_report.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/graphrun/cli.h"
#include "tools/graphrun/hostbuf.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/stream.h"

typedef struct totals {
    int64_t tensors, done, resumed, failed, canceled, bytes_in, bytes_out;
    int64_t errors[GR_RUN_ERR_COUNT_];
    int64_t ns, budget_bytes, budget_peak;
    const gr_run_report *first; /* the first rank with an error, or NULL */
    int first_rank;
} totals;

static void add_up(const gr_run_report *all, int n, totals *t)
{
    memset(t, 0, sizeof(*t));
    for (int k = 0; k < n; k++) {
        const gr_run_report *r = &all[k];

        t->tensors += r->tensors;
        t->done += r->done;
        t->resumed += r->resumed;
        t->failed += r->failed;
        t->canceled += r->canceled;
        t->bytes_in += r->bytes_in;
        t->bytes_out += r->bytes_out;
        for (int s = 0; s < GR_RUN_ERR_COUNT_; s++)
            t->errors[s] += r->errors[s];
        if (r->setup_ns + r->stream_ns > t->ns)
            t->ns = r->setup_ns + r->stream_ns;
        if (r->budget_bytes > t->budget_bytes)
            t->budget_bytes = r->budget_bytes;
        if (r->budget_peak > t->budget_peak)
            t->budget_peak = r->budget_peak;
        if (t->first == NULL && r->first_status != GR_OK) {
            t->first = r;
            t->first_rank = k;
        }
    }
}

const char *gr_run_error_name(int64_t kind)
{
    switch (kind) {
    case GR_RUN_ERR_BAD_INPUT:
        return "bad input";
    case GR_RUN_ERR_INPUT:
        return "input not read";
    case GR_RUN_ERR_OUTPUT:
        return "output not written";
    default:
        return gr_status_str((gr_status)kind);
    }
}

/* The run's seconds, from the command's start to its last output. */
static double seconds(const gr_run_report *r)
{
    return (double)(r->setup_ns + r->stream_ns) / 1e9;
}

static double gbs(int64_t bytes, double s)
{
    return s > 0 ? (double)bytes / s / 1e9 : 0;
}

static const char *backend_name(int64_t b)
{
    return gr_backend_name((gr_backend)b);
}

static void print_first_error(const totals *t, bool mpi)
{
    const gr_run_report *r = t->first;
    char where[48] = "";

    if (r == NULL)
        return;
    if (mpi)
        snprintf(where, sizeof(where), "rank %d, ", t->first_rank);
    printf("first error: %sindex %llu%s%s: %s: %s\n", where, (unsigned long long)r->first_index,
           r->first_node[0] ? ", node " : "", r->first_node,
           gr_run_error_name(r->first_status), r->first_message);
}

/* " (3 by an earlier run)", or "" */
static const char *earlier_str(int64_t resumed, char *buf, size_t len)
{
    if (resumed == 0)
        return "";
    snprintf(buf, len, " (%lld by an earlier run)", (long long)resumed);
    return buf;
}

void gr_run_report_print(const gr_run_report *all, const gr_run_facts *f)
{
    char b1[32], b2[32], e[48];
    totals t;

    add_up(all, f->ranks, &t);
    if (!f->mpi) {
        const gr_run_report *r = &all[0];
        double s = seconds(r);
        char b3[32], b4[32], b5[32];

        printf("%s: %llu of %llu tensors done%s, %llu failed, %llu not run; %llu outputs "
               "written\n",
               f->status, (unsigned long long)r->done, (unsigned long long)r->tensors,
               earlier_str(r->resumed, e, sizeof(e)), (unsigned long long)r->failed,
               (unsigned long long)r->canceled, (unsigned long long)f->outputs_written);
        printf("%.3f s (%.3f s of it setting up), %.2f GB/s in+out; backend %s; budget %s, "
               "peak %s\n",
               s, (double)r->setup_ns / 1e9, gbs(r->bytes_in + r->bytes_out, s),
               backend_name(r->backend), gr_cli_bytes((uint64_t)r->budget_bytes, b1, sizeof(b1)),
               gr_cli_bytes((uint64_t)r->budget_peak, b2, sizeof(b2)));
        if (r->io_engine[0])
            printf("disk: read %s, wrote %s (%s; O_DIRECT for %lld of %lld files; sync %s); "
                   "host memory: peak %s of %s, %s; peak resident set %s\n",
                   gr_cli_bytes((uint64_t)r->read_bytes, b1, sizeof(b1)),
                   gr_cli_bytes((uint64_t)r->written_bytes, b2, sizeof(b2)), r->io_engine,
                   (long long)(r->direct_reads + r->direct_writes),
                   (long long)(r->direct_reads + r->direct_writes + r->buffered_reads +
                               r->buffered_writes),
                   gr_sync_name((gr_sync_mode)r->sync),
                   gr_cli_bytes((uint64_t)r->host_memory_peak, b3, sizeof(b3)),
                   gr_cli_bytes((uint64_t)r->host_memory, b4, sizeof(b4)),
                   gr_mem_kind_name((gr_mem_kind)r->host_memory_kind),
                   gr_cli_bytes((uint64_t)r->peak_rss, b5, sizeof(b5)));
        if (r->have_ceilings) {
            double floor_s = (double)(r->bytes_in + r->bytes_out) / (r->bidir_gbs * 1e9);
            printf("floor %.3f s at the both-ways ceiling of %.1f GB/s: ratio %.3f\n", floor_s,
                   r->bidir_gbs, floor_s / s);
        }
        if (f->manifest)
            printf("manifest: %s\n", f->manifest);
        print_first_error(&t, false);
        return;
    }
    printf("%s: %llu of %llu tensors done on %d rank%s%s, %llu failed, %llu not run; %llu "
           "outputs written\n",
           f->status, (unsigned long long)t.done, (unsigned long long)t.tensors, f->ranks,
           f->ranks == 1 ? "" : "s", earlier_str(t.resumed, e, sizeof(e)),
           (unsigned long long)t.failed, (unsigned long long)t.canceled,
           (unsigned long long)f->outputs_written);
    printf("%.3f s (the slowest rank), %.2f GB/s in+out over all ranks%s%s\n",
           (double)t.ns / 1e9, gbs(t.bytes_in + t.bytes_out, (double)t.ns / 1e9),
           f->manifest ? "; manifest: " : "", f->manifest ? f->manifest : "");
    for (int k = 0; k < f->ranks; k++) {
        const gr_run_report *r = &all[k];
        double s = seconds(r);

        printf("  rank %d (%s): %llu of %llu tensors done in %.3f s, %.2f GB/s; backend %s, "
               "device %lld; budget %s, peak %s\n",
               k, r->host, (unsigned long long)r->done, (unsigned long long)r->tensors, s,
               gbs(r->bytes_in + r->bytes_out, s), backend_name(r->backend),
               (long long)r->ordinal, gr_cli_bytes((uint64_t)r->budget_bytes, b1, sizeof(b1)),
               gr_cli_bytes((uint64_t)r->budget_peak, b2, sizeof(b2)));
    }
    print_first_error(&t, true);
}

static json_t *errors_json(const int64_t *errors)
{
    json_t *o = json_object();

    for (int s = 1; s < GR_RUN_ERR_COUNT_; s++)
        if (errors[s])
            json_object_set_new(o, gr_run_error_name(s), json_integer(errors[s]));
    return o;
}

static json_t *first_error_json(const gr_run_report *r, int rank, bool multi)
{
    json_t *e = json_object();

    if (multi)
        json_object_set_new(e, "rank", json_integer(rank));
    json_object_set_new(e, "status", json_string(gr_run_error_name(r->first_status)));
    json_object_set_new(e, "index", json_integer(r->first_index));
    json_object_set_new(e, "node", json_string(r->first_node));
    json_object_set_new(e, "message", json_string(r->first_message));
    return e;
}

/* The fields of one process's run (every rank's own, or the single process's). */
static void set_rank_fields(json_t *o, const gr_run_report *r)
{
    double s = seconds(r);

    json_object_set_new(o, "tensors", json_integer(r->tensors));
    json_object_set_new(o, "done", json_integer(r->done));
    json_object_set_new(o, "resumed", json_integer(r->resumed));
    json_object_set_new(o, "failed", json_integer(r->failed));
    json_object_set_new(o, "canceled", json_integer(r->canceled));
    json_object_set_new(o, "not_run", json_integer(r->canceled));
    json_object_set_new(o, "bytes_in", json_integer(r->bytes_in));
    json_object_set_new(o, "bytes_out", json_integer(r->bytes_out));
    json_object_set_new(o, "seconds", json_real(s));
    json_object_set_new(o, "setup_seconds", json_real((double)r->setup_ns / 1e9));
    json_object_set_new(o, "stream_seconds", json_real((double)r->stream_ns / 1e9));
    json_object_set_new(o, "runtime_start_seconds", json_real((double)r->runtime_ns / 1e9));
    json_object_set_new(o, "teardown_seconds", json_real((double)r->teardown_ns / 1e9));
    json_object_set_new(o, "gb_per_s", json_real(gbs(r->bytes_in + r->bytes_out, s)));
    json_object_set_new(o, "backend", json_string(backend_name(r->backend)));
    json_object_set_new(o, "devices", json_integer(r->devices));
    json_object_set_new(o, "workers_per_device", json_integer(r->workers_per_device));
    json_object_set_new(o, "budget_bytes", json_integer(r->budget_bytes));
    json_object_set_new(o, "budget_peak_bytes", json_integer(r->budget_peak));
    if (r->io_engine[0]) {
        json_t *io = json_object();

        json_object_set_new(io, "engine", json_string(r->io_engine));
        json_object_set_new(io, "fallback",
                            r->io_fallback[0] ? json_string(r->io_fallback) : json_null());
        json_object_set_new(io, "direct_reads", json_integer(r->direct_reads));
        json_object_set_new(io, "buffered_reads", json_integer(r->buffered_reads));
        json_object_set_new(io, "direct_writes", json_integer(r->direct_writes));
        json_object_set_new(io, "buffered_writes", json_integer(r->buffered_writes));
        json_object_set_new(io, "read_ahead_files", json_integer(r->read_ahead_files));
        json_object_set_new(io, "read_ahead_bytes", json_integer(r->read_ahead_bytes));
        json_object_set_new(io, "read_ahead_seconds", json_real(r->read_ahead_seconds));
        json_object_set_new(io, "warm_reads", json_integer(r->warm_reads));
        json_object_set_new(io, "buffered_because", r->io_buffered_why[0]
                                                        ? json_string(r->io_buffered_why)
                                                        : json_null());
        json_object_set_new(io, "sync", json_string(gr_sync_name((gr_sync_mode)r->sync)));
        json_object_set_new(io, "read_bytes", json_integer(r->read_bytes));
        json_object_set_new(io, "written_bytes", json_integer(r->written_bytes));
        json_object_set_new(o, "io", io);
        json_object_set_new(o, "host_memory_bytes", json_integer(r->host_memory));
        json_object_set_new(o, "host_memory_peak_bytes", json_integer(r->host_memory_peak));
        json_object_set_new(o, "host_memory_kind",
                            json_string(gr_mem_kind_name((gr_mem_kind)r->host_memory_kind)));
        json_object_set_new(o, "host_memory_segments", json_integer(r->host_memory_segments));
        json_object_set_new(o, "host_memory_grown_ahead",
                            json_boolean(r->host_memory_grown_ahead));
        json_object_set_new(o, "host_memory_segments_grown",
                            json_integer(r->host_memory_segments_grown));
        json_object_set_new(o, "host_memory_segments_huge",
                            json_integer(r->host_memory_segments_huge));
        json_object_set_new(o, "host_memory_first_seconds",
                            json_real(r->host_memory_first_seconds));
        json_object_set_new(o, "host_memory_more_seconds",
                            json_real(r->host_memory_more_seconds));
    }
    json_object_set_new(o, "peak_rss_bytes", json_integer(r->peak_rss));
    if (r->have_devmem)
        json_object_set_new(o, "device_memory_peak_above_baseline",
                            json_integer(r->devmem_above));
    if (r->have_ceilings) {
        double floor_s = (double)(r->bytes_in + r->bytes_out) / (r->bidir_gbs * 1e9);

        json_object_set_new(o, "ceiling_bidir_gbs", json_real(r->bidir_gbs));
        json_object_set_new(o, "floor_seconds", json_real(floor_s));
        json_object_set_new(o, "ratio", json_real(s > 0 ? floor_s / s : 0));
    }
}

json_t *gr_run_report_json(const gr_run_report *all, const gr_run_facts *f)
{
    json_t *root = json_object(), *per_rank;
    totals t;

    add_up(all, f->ranks, &t);
    json_object_set_new(root, "status", json_string(f->status));
    if (!f->mpi) {
        json_object_set_new(root, "outputs_written", json_integer(f->outputs_written));
        set_rank_fields(root, &all[0]);
        json_object_set_new(root, "errors", errors_json(all[0].errors));
        if (t.first)
            json_object_set_new(root, "first_error", first_error_json(t.first, 0, false));
        if (f->manifest)
            json_object_set_new(root, "manifest", json_string(f->manifest));
        return root;
    }
    json_object_set_new(root, "ranks", json_integer(f->ranks));
    json_object_set_new(root, "tensors", json_integer(t.tensors));
    json_object_set_new(root, "done", json_integer(t.done));
    json_object_set_new(root, "resumed", json_integer(t.resumed));
    json_object_set_new(root, "failed", json_integer(t.failed));
    json_object_set_new(root, "canceled", json_integer(t.canceled));
    json_object_set_new(root, "not_run", json_integer(t.canceled));
    json_object_set_new(root, "outputs_written", json_integer(f->outputs_written));
    json_object_set_new(root, "bytes_in", json_integer(t.bytes_in));
    json_object_set_new(root, "bytes_out", json_integer(t.bytes_out));
    json_object_set_new(root, "seconds", json_real((double)t.ns / 1e9));
    json_object_set_new(root, "gb_per_s",
                        json_real(gbs(t.bytes_in + t.bytes_out, (double)t.ns / 1e9)));
    json_object_set_new(root, "budget_bytes", json_integer(t.budget_bytes));
    json_object_set_new(root, "budget_peak_bytes", json_integer(t.budget_peak));
    json_object_set_new(root, "errors", errors_json(t.errors));
    if (t.first)
        json_object_set_new(root, "first_error", first_error_json(t.first, t.first_rank, true));
    if (f->manifest)
        json_object_set_new(root, "manifest", json_string(f->manifest));
    per_rank = json_array();
    for (int k = 0; k < f->ranks; k++) {
        json_t *o = json_object();

        json_object_set_new(o, "rank", json_integer(k));
        json_object_set_new(o, "host", json_string(all[k].host));
        json_object_set_new(o, "device", json_integer(all[k].ordinal));
        set_rank_fields(o, &all[k]);
        json_array_append_new(per_rank, o);
    }
    json_object_set_new(root, "per_rank", per_rank);
    return root;
}

json_t *gr_run_refusal_json(const char *status, int rc, const char *why)
{
    return json_pack("{s:s,s:i,s:s}", "status", status, "exit", rc, "error", why ? why : "");
}

/* ------------------------------------------------------------------------------------- */
/* The manifest file.                                                                     */

/* The manifest's temporary file, ".NAME.graphrun-tmp.XXXXXX" beside it, as for the outputs
 * (io.c, whose gr_io_remove_leftovers removes those a killed run left). */
static gr_status create_tmp(gr_manifest *m, char *why, size_t why_len)
{
    int fd;

    if ((m->tmp = gr_io_tmp_template(m->path)) == NULL) {
        snprintf(why, why_len, "out of memory");
        return GR_ERR_OUT_OF_MEMORY;
    }
    fd = mkstemp(m->tmp);
    if (fd < 0) {
        snprintf(why, why_len, "manifest %s: cannot create a file beside it: %s", m->path,
                 strerror(errno));
        free(m->tmp);
        m->tmp = NULL;
        return GR_ERR_INVALID_ARGUMENT;
    }
    fchmod(fd, gr_cli_file_mode()); /* the umask's mode, not mkstemp's 0600 */
    close(fd);
    return GR_OK;
}

gr_status gr_manifest_stage(gr_manifest *m, const char *path, bool force, char *why,
                            size_t why_len)
{
    struct stat sb;
    gr_status st;

    memset(m, 0, sizeof(*m));
    if (stat(path, &sb) == 0 && (S_ISDIR(sb.st_mode) || !force)) {
        snprintf(why, why_len, "manifest %s %s", path,
                 S_ISDIR(sb.st_mode) ? "is a directory"
                                     : "exists (use --force to overwrite it, or --resume to "
                                       "go on with the run it records)");
        return GR_ERR_INVALID_ARGUMENT;
    }
    if ((m->path = strdup(path)) == NULL) {
        snprintf(why, why_len, "out of memory");
        return GR_ERR_OUT_OF_MEMORY;
    }
    /* Prove the file can be created, and leave nothing behind until it is written. */
    if ((st = create_tmp(m, why, why_len)) != GR_OK) {
        gr_manifest_free(m);
        return st;
    }
    gr_manifest_abort(m);
    return GR_OK;
}

gr_status gr_manifest_write(gr_manifest *m, json_t *doc, char *why, size_t why_len)
{
    gr_status st = m->tmp ? GR_OK : create_tmp(m, why, why_len);
    FILE *f;
    int bad;

    if (st != GR_OK)
        return st;
    if ((f = fopen(m->tmp, "w")) == NULL) {
        snprintf(why, why_len, "manifest %s: cannot write: %s", m->path, strerror(errno));
        return GR_ERR_INVALID_ARGUMENT;
    }
    bad = json_dumpf(doc, f, JSON_INDENT(1) | JSON_REAL_PRECISION(9)) != 0;
    bad |= fputc('\n', f) == EOF;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        snprintf(why, why_len, "manifest %s: cannot write: %s", m->path, strerror(errno));
        return GR_ERR_INVALID_ARGUMENT;
    }
    return GR_OK;
}

gr_status gr_manifest_publish(gr_manifest *m, char *why, size_t why_len)
{
    if (rename(m->tmp, m->path) != 0) {
        snprintf(why, why_len, "manifest %s: cannot rename into place: %s", m->path,
                 strerror(errno));
        return GR_ERR_INVALID_ARGUMENT;
    }
    free(m->tmp);
    m->tmp = NULL;
    return GR_OK;
}

void gr_manifest_abort(gr_manifest *m)
{
    if (m->tmp != NULL)
        unlink(m->tmp);
    free(m->tmp);
    m->tmp = NULL;
}

void gr_manifest_free(gr_manifest *m)
{
    gr_manifest_abort(m);
    free(m->path);
    m->path = NULL;
}

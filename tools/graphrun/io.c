/*
 * io.c - tensors in files, read and written for `graphrun run` (see io.h).
 *
 * Outputs are never torn: every output is first written in full to a temporary file beside
 * its final name (same directory, so the rename cannot cross file systems), synced as the
 * run asks (stream.h), and renamed into place. Per tensor (gr_io_output_place) that happens
 * as soon as the tensor is done; all or nothing (gr_io_publish), only when every output is
 * written, the renames with SIGINT and SIGTERM held back for that short phase, and a
 * failure or a stop before then removes every temporary file. Either way no run leaves a
 * partial output under an output's name, and existing files are only replaced by complete
 * ones (and only with --force, or --resume for the outputs of the run it resumes). A
 * process killed while it writes (SIGKILL: nothing can clean up) leaves at most its
 * temporary files, named ".NAME.graphrun-tmp.XXXXXX", which the next run over the same
 * outputs removes (gr_io_clean_leftovers).
 */
#define _GNU_SOURCE /* strdup, strndup, the dirent types */
#include "tools/graphrun/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/graphrun/cli.h"
#include "tools/graphrun/inputs.h"
#include "tools/graphrun/io_util.h"

#define HEADER_PROBE 65536 /* bytes read to parse a .npy header */

static void shape_str(const gr_io_shape *s, char *buf, size_t len)
{
    size_t at = 0;

    at += (size_t)snprintf(buf + at, len - at, "(");
    for (uint32_t d = 0; d < s->ndim && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at,
                               d + 1 == s->ndim && s->ndim > 1 ? "%llu" : "%llu,",
                               (unsigned long long)s->dims[d]);
    if (at < len)
        snprintf(buf + at, len - at, ")");
}

uint32_t gr_io_lead_port(const gr_io_options *opt)
{
    for (uint32_t p = 0; p < opt->n_inputs; p++)
        if (opt->in_fixed[p] == 0)
            return p;
    return 0;
}

uint64_t gr_io_out_elems(const gr_io_plan *plan, uint64_t i, uint32_t port)
{
    uint32_t lead = gr_io_lead_port(&plan->opt);

    return plan->opt.out_fixed[port] ? plan->opt.out_fixed[port]
                                     : plan->in[i * plan->opt.n_inputs + lead].elems;
}

bool gr_io_parse_shape(const char *s, gr_io_shape *out)
{
    const char *p = s;

    memset(out, 0, sizeof(*out));
    if (s == NULL || *s == '\0')
        return false;
    for (;;) {
        char *end;
        unsigned long long v;

        if (*p < '0' || *p > '9' || out->ndim == GR_NPY_MAX_DIMS)
            return false;
        errno = 0;
        v = strtoull(p, &end, 10);
        if (errno != 0)
            return false;
        out->dims[out->ndim++] = v;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        p = end + 1;
    }
}

/* The shape's element count, when its bytes (of `size` each) fit in 64 bits. */
static bool shape_elems(const gr_io_shape *s, uint32_t size, uint64_t *elems)
{
    unsigned __int128 n = 1;

    for (uint32_t d = 0; d < s->ndim; d++) {
        n *= s->dims[d];
        if (n > UINT64_MAX / size)
            return false;
    }
    *elems = (uint64_t)n;
    return true;
}

/* Everything about the file of input port `port`, checked against its size and the port's
 * type. `raw` is --dtype's type, or the port's own without --dtype. */
static gr_status describe(const gr_io_plan *plan, uint32_t port, gr_dtype raw,
                          const char *path, gr_io_file *f, char *why, size_t len)
{
    const gr_io_options *opt = &plan->opt;
    bool from_stdin = gr_inputs_is_stdin(&plan->src, path);
    const char *label = from_stdin ? "stdin" : path;
    char buf[HEADER_PROBE], shape[256], hwhy[512], name[32];
    gr_dtype type = opt->in_dtype[port];
    uint32_t size = gr_dtype_size(type);
    struct stat sb;
    uint64_t need;
    ssize_t got;
    int fd;

    snprintf(name, sizeof(name), "the graph's in%u", port);
    memset(f, 0, sizeof(*f));
    if ((f->path = strdup(path)) == NULL)
        return gr_io_fail(why, len, "out of memory");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gr_io_fail(why, len, "%s: cannot open: %s", label, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gr_io_fail(why, len, "%s: not a regular file", label);
    }
    f->npy = from_stdin ? plan->src.stdin_npy : gr_io_ends_with(path, ".npy");
    if (f->npy && opt->raw_flag != NULL) {
        close(fd);
        return gr_io_fail(
            why, len,
            "%s: a .npy file, whose header gives its type and shape, but %s is for raw "
            "files: drop %s",
            label, opt->raw_flag, opt->raw_flag);
    }
    if (f->npy) {
        gr_npy_header h;

        /* The header alone: the kernel's read-ahead would bring a quarter MiB of data per
         * file into the page cache (a dataset of 2,000 files: half a GB from the disk
         * before the run starts), which the run then reads again with O_DIRECT. */
        posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        got = pread(fd, buf, sizeof(buf), 0);
        close(fd);
        if (got < 0)
            return gr_io_fail(why, len, "%s: cannot read: %s", label, strerror(errno));
        if (gr_npy_parse_header(buf, (size_t)got, &h, hwhy, sizeof(hwhy)) != GR_OK)
            return gr_io_fail(why, len, "%s: %s", label, hwhy);
        /* Before the size: a file of another type is that, not a wrong size. */
        if (gr_npy_check_dtype(&h, type, label, name, why, len) != GR_OK)
            return GR_ERR_INVALID_ARGUMENT;
        f->shape.ndim = h.ndim;
        memcpy(f->shape.dims, h.shape, sizeof(h.shape[0]) * h.ndim);
        f->elems = h.elems;
        f->data_offset = h.data_offset;
        f->swap = h.swap;
        need = h.data_offset + h.elems * size;
        if ((uint64_t)sb.st_size != need) {
            shape_str(&f->shape, shape, sizeof(shape));
            return gr_io_fail(why, len,
                              "%s: the header says shape %s (%llu bytes of %s data after a "
                              "%llu-byte header) but the file has %llu bytes: %s",
                              label, shape, (unsigned long long)(h.elems * size),
                              gr_dtype_name(type), (unsigned long long)h.data_offset,
                              (unsigned long long)sb.st_size,
                              (uint64_t)sb.st_size < need ? "truncated" : "trailing bytes");
        }
    } else {
        close(fd);
        if (raw != type)
            return gr_io_fail(why, len,
                              "%s: --dtype %s, but %s is %s: a raw file holds its port's type; "
                              "convert the file (a.astype(...).tofile(path)), drop --dtype, or "
                              "change the spec's buffer type",
                              label, gr_dtype_name(raw), name, gr_dtype_name(type));
        if (opt->raw_shape != NULL) {
            f->shape = *opt->raw_shape;
            if (!shape_elems(&f->shape, size, &f->elems))
                return gr_io_fail(why, len, "%s: --shape is too large", label);
        } else {
            f->shape.ndim = 1;
            f->shape.dims[0] = f->elems = (uint64_t)sb.st_size / size;
        }
        if ((uint64_t)sb.st_size != f->elems * size) {
            shape_str(&f->shape, shape, sizeof(shape));
            return gr_io_fail(
                why, len, "%s: raw %s %s needs %llu bytes, the file has %llu (shape mismatch)",
                label, gr_dtype_name(type), opt->raw_shape ? shape : "data",
                (unsigned long long)(f->elems * size), (unsigned long long)sb.st_size);
        }
    }
    if (f->elems == 0)
        return gr_io_fail(why, len, "%s: holds no elements", label);
    return GR_OK;
}

static gr_status check_output(const gr_io_options *opt, const char *path, char *why, size_t len)
{
    struct stat sb;

    if (stat(path, &sb) != 0)
        return GR_OK;
    if (S_ISDIR(sb.st_mode))
        return gr_io_fail(why, len, "output %s is a directory", path);
    if (opt->replaceable != NULL && bsearch(&path, opt->replaceable, opt->n_replaceable,
                                            sizeof(*opt->replaceable), gr_io_name_cmp) != NULL)
        return GR_OK;
    if (!opt->force)
        return gr_io_fail(why, len, "output %s exists (use --force to overwrite it)", path);
    return GR_OK;
}

/* The length of `path`'s directory part, its final slash included (0: none). */
static size_t dir_part(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash ? (size_t)(slash - path) + 1 : 0;
}

/* What file `path` names, as one string: its directory resolved (realpath), then its base
 * name; a directory not there yet (the run creates it) is resolved from its own parent the
 * same way. Two paths name the same file when their identities are equal (a hard link by
 * another name aside). NULL: out of memory. */
static char *identity(const char *path)
{
    size_t dl = dir_part(path);
    const char *base = path + dl;
    char *dir, *real, *id;

    while (dl > 1 && path[dl - 2] == '/') /* "a//b" */
        dl--;
    dir = dl == 0 ? strdup(".") : dl == 1 ? strdup("/") : strndup(path, dl - 1);
    if (dir == NULL)
        return NULL;
    real = realpath(dir, NULL);
    if (real == NULL)
        real = errno == ENOENT && dl > 1 ? identity(dir) : strdup(dir);
    free(dir);
    if (real == NULL)
        return NULL;
    if (strcmp(base, ".") == 0 || base[0] == '\0')
        return real;
    if (strcmp(base, "..") == 0) {
        char *slash = strrchr(real, '/');

        if (slash && slash != real)
            *slash = '\0';
        return real;
    }
    id = gr_io_join(strcmp(real, "/") == 0 ? "" : real, base);
    free(real);
    return id;
}

typedef struct out_id {
    char *id;
    uint64_t k; /* among the total's outputs, tensor-major */
} out_id;

static int out_id_cmp(const void *a, const void *b)
{
    const out_id *x = a, *y = b;
    int c = strcmp(x->id, y->id);

    return c != 0 ? c : (x->k > y->k) - (x->k < y->k);
}

/* The first output (in v, sorted by identity) that is the file `id`: its index in v, or n. */
static uint64_t find_output(const out_id *v, uint64_t n, const char *id)
{
    uint64_t lo = 0, hi = n;

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (strcmp(v[mid].id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && strcmp(v[lo].id, id) == 0 ? lo : n;
}

/* Every output of every shard a file of its own, none the manifest and none an input: paths
 * compared by the files they name (identity), not by their spelling, sorted. An output over
 * an input would replace data the run has yet to read (another tensor's input, read ahead or
 * not), and over its own tensor's input it would leave --resume unable to tell a tensor done
 * from an input changed since: a resumed run would put a done tensor through the graph
 * again. */
static gr_status check_distinct(const gr_io_plan *plan, char *why, size_t why_len)
{
    uint32_t no = plan->opt.n_outputs, ni = plan->opt.n_inputs;
    uint64_t n = plan->total * no;
    out_id *v = calloc(n + 1, sizeof(*v)), key = {NULL, 0};
    gr_status st = GR_OK;

    if (v == NULL)
        return gr_io_fail(why, why_len, "out of memory");
    for (uint64_t k = 0; k < n && st == GR_OK; k++) {
        v[k].k = k;
        if ((v[k].id = identity(plan->src.out[k])) == NULL)
            st = gr_io_fail(why, why_len, "out of memory");
    }
    if (st == GR_OK)
        qsort(v, n, sizeof(*v), out_id_cmp);
    for (uint64_t k = 1; k < n && st == GR_OK; k++)
        if (strcmp(v[k - 1].id, v[k].id) == 0) {
            uint64_t a = v[k - 1].k, b = v[k].k;

            st = gr_io_fail(why, why_len,
                      "--output: %s (tensor %llu, output %u) and %s (tensor %llu, output %u) "
                      "are the same file: each output must be a file of its own",
                      plan->src.out[a], (unsigned long long)(a / no), (unsigned)(a % no),
                      plan->src.out[b], (unsigned long long)(b / no), (unsigned)(b % no));
        }
    if (st == GR_OK && plan->opt.manifest != NULL) {
        uint64_t at;

        if ((key.id = identity(plan->opt.manifest)) == NULL)
            st = gr_io_fail(why, why_len, "out of memory");
        else if ((at = find_output(v, n, key.id)) < n)
            st = gr_io_fail(why, why_len,
                      "--manifest %s is also an output (%s): the manifest would replace it; "
                      "give the manifest a file of its own",
                      plan->opt.manifest, plan->src.out[v[at].k]);
    }
    for (uint64_t k = 0; k < plan->total * ni && st == GR_OK; k++) {
        const char *in = plan->src.in[k];
        char *id;
        uint64_t at;

        if (gr_inputs_is_stdin(&plan->src, in)) /* a file of the run's own */
            continue;
        if ((id = identity(in)) == NULL) {
            st = gr_io_fail(why, why_len, "out of memory");
            break;
        }
        if ((at = find_output(v, n, id)) < n) {
            uint64_t o = v[at].k;

            st = gr_io_fail(why, why_len,
                      "--output: %s (tensor %llu, output %u) is the file of input %u of tensor "
                      "%llu (%s): an output replaces its file, so the run would overwrite "
                      "data it has yet to read, and --resume could not tell a tensor done; "
                      "write the outputs to other files",
                      plan->src.out[o], (unsigned long long)(o / no), (unsigned)(o % no),
                      (unsigned)(k % ni), (unsigned long long)(k / ni), in);
        }
        free(id);
    }
    for (uint64_t k = 0; k < n; k++)
        free(v[k].id);
    free(v);
    free(key.id);
    return st;
}

gr_status gr_io_plan_create(const gr_io_options *opt, gr_io_plan *plan, char *why,
                            size_t why_len)
{
    uint32_t ni = opt->n_inputs, no = opt->n_outputs;
    uint32_t shards = opt->shards > 1 ? opt->shards : 1;
    uint32_t lead = gr_io_lead_port(opt); /* the input whose size the tensor's is */
    gr_dtype raw[GR_MAX_PORTS];
    gr_inputs_options in_opt = {0};
    gr_status st = GR_OK;

    memset(plan, 0, sizeof(*plan));
    plan->opt = *opt;
    for (uint32_t p = 0; p < ni; p++)
        raw[p] = opt->in_dtype[p];
    if (opt->raw_dtype != NULL) {
        gr_dtype t;

        if (gr_dtype_parse(opt->raw_dtype, &t) != GR_OK)
            return gr_io_fail(
                why, why_len,
                "--dtype %s is not a type: graphrun reads float32, float16, bfloat16, "
                "float64, int32 and uint8",
                opt->raw_dtype);
        for (uint32_t p = 0; p < ni; p++)
            raw[p] = t;
    }
    if (opt->shard >= shards)
        return gr_io_fail(why, why_len, "shard %u of %u does not exist", opt->shard, shards);
    in_opt.inputs = opt->inputs;
    in_opt.n_inputs = ni;
    in_opt.outputs = opt->outputs;
    in_opt.n_outputs = no;
    in_opt.raw = opt->raw_flag != NULL;
    in_opt.stage_stdout = opt->stage_stdout;
    if ((st = gr_inputs_resolve(&in_opt, &plan->src, why, why_len)) != GR_OK)
        return st;
    plan->directories = plan->src.out_dirs;
    plan->total = plan->src.total;
    plan->names = plan->src.names;
    plan->count = plan->total / shards + (opt->shard < plan->total % shards ? 1 : 0);
    /* One element more than needed: calloc(0) may return NULL. */
    plan->index = calloc(plan->count + 1, sizeof(*plan->index));
    plan->in = calloc(plan->count * ni + 1, sizeof(*plan->in));
    plan->out = calloc(plan->count * no + 1, sizeof(*plan->out));
    plan->tmp = calloc(plan->count * no + 1, sizeof(*plan->tmp));
    plan->bad = calloc(plan->count + 1, sizeof(*plan->bad));
    if (!plan->index || !plan->in || !plan->out || !plan->tmp || !plan->bad) {
        st = gr_io_fail(why, why_len, "out of memory planning %llu tensors",
                        (unsigned long long)plan->count);
        goto out;
    }
    for (uint64_t i = 0; i < plan->count; i++) {
        uint64_t g = i * shards + opt->shard; /* its index among the total */
        char bad[1024] = "", more[1024];

        plan->index[i] = g;
        for (uint32_t p = 0; p < ni; p++) {
            const char *path = plan->src.in[g * ni + p];
            gr_io_file *f = &plan->in[i * ni + p];

            /* The first of a tensor's reasons is kept. */
            if (describe(plan, p, raw[p], path, f, bad[0] ? more : bad, sizeof(bad)) != GR_OK) {
                if (f->path == NULL) {
                    st = gr_io_fail(why, why_len, "out of memory");
                    goto out;
                }
                continue;
            }
            if (bad[0])
                continue;
            if (opt->in_fixed[p] != 0 && f->elems != opt->in_fixed[p]) {
                gr_io_fail(bad, sizeof(bad),
                           "input %u %s has %llu elements, but the graph's input port %u "
                           "takes exactly %llu per tensor (a fixed buffer)",
                           p, f->path, (unsigned long long)f->elems, p,
                           (unsigned long long)opt->in_fixed[p]);
                continue;
            }
            if (opt->in_fixed[p] == 0 && p != lead && f->elems != plan->in[i * ni + lead].elems) {
                const gr_io_file *l = &plan->in[i * ni + lead];
                char a[256], b[256];
                shape_str(&l->shape, a, sizeof(a));
                shape_str(&f->shape, b, sizeof(b));
                gr_io_fail(bad, sizeof(bad),
                           "shape mismatch: input %u %s has shape %s (%llu elements) but "
                           "input %u %s has shape %s (%llu elements)",
                           lead, l->path, a, (unsigned long long)l->elems, p, f->path, b,
                           (unsigned long long)f->elems);
            }
        }
        if (bad[0]) {
            if ((plan->bad[i] = strdup(bad)) == NULL) {
                st = gr_io_fail(why, why_len, "out of memory");
                goto out;
            }
            plan->n_bad++;
        } else {
            for (uint32_t p = 0; p < ni; p++)
                plan->bytes_in +=
                    plan->in[i * ni + p].elems * gr_dtype_size(opt->in_dtype[p]);
        }
        for (uint32_t p = 0; p < no; p++) {
            char *path = strdup(plan->src.out[g * no + p]);

            plan->out[i * no + p] = path;
            if (path == NULL) {
                st = gr_io_fail(why, why_len, "out of memory");
                goto out;
            }
            if ((st = check_output(opt, path, why, why_len)) != GR_OK)
                goto out;
            if (plan->bad[i] == NULL)
                plan->bytes_out +=
                    gr_io_out_elems(plan, i, p) * gr_dtype_size(opt->out_dtype[p]);
        }
    }
    st = check_distinct(plan, why, why_len);
out:
    if (st != GR_OK)
        gr_io_plan_free(plan);
    return st;
}

#define TMP_INFIX ".graphrun-tmp."
#define TMP_RANDOM 6 /* mkstemp's XXXXXX */
#define TMP_HASH 16  /* hex digits of a long name's hash */
#define TMP_MAX_BASE (NAME_MAX - 1 - (sizeof(TMP_INFIX) - 1) - TMP_RANDOM)

/* FNV-1a of the string. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* `path`'s directory part and TMP_INFIX, then its name's hash: the hashed temporary name
 * without its random part (malloc'd). */
static char *hashed_stem(const char *path)
{
    size_t dl = dir_part(path), n = dl + sizeof(TMP_INFIX) + TMP_HASH + 1;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%.*s" TMP_INFIX "%016llx", (int)dl, path,
                 (unsigned long long)name_hash(path + dl));
    return p;
}

char *gr_io_tmp_template(const char *path)
{
    size_t dl = dir_part(path), n = strlen(path) + 64;
    char *tmp;

    if (strlen(path + dl) > TMP_MAX_BASE) {
        char *stem = hashed_stem(path);

        if (stem == NULL || (tmp = malloc(strlen(stem) + 8)) == NULL) {
            free(stem);
            return NULL;
        }
        sprintf(tmp, "%s.XXXXXX", stem);
        free(stem);
        return tmp;
    }
    if ((tmp = malloc(n)) != NULL)
        snprintf(tmp, n, "%.*s.%s" TMP_INFIX "XXXXXX", (int)dl, path, path + dl);
    return tmp;
}

/* Create the temporary file of output `out` beside it (gr_io_tmp_template): hidden, plainly
 * ours, and never NAME itself. */
static gr_status make_tmp(const char *out, char **tmp_out, char *why, size_t why_len)
{
    const char *slash = strrchr(out, '/');
    size_t dirlen = slash ? (size_t)(slash - out) : 0;
    char *tmp = gr_io_tmp_template(out);
    int fd;

    if (tmp == NULL)
        return gr_io_fail(why, why_len, "out of memory");
    fd = mkstemp(tmp);
    if (fd < 0) {
        gr_status st = gr_io_fail(why, why_len, "output %s: cannot create a file in %.*s: %s", out,
                                  slash ? (int)dirlen : 1, slash ? out : ".", strerror(errno));
        free(tmp);
        return st;
    }
    fchmod(fd, gr_cli_file_mode()); /* the umask's mode, not mkstemp's 0600 */
    close(fd);
    *tmp_out = tmp;
    return GR_OK;
}

/* Paths ordered by their directory parts. */
static int dir_cmp(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t lx = dir_part(x), ly = dir_part(y);
    int c = memcmp(x, y, lx < ly ? lx : ly);

    return c != 0 ? c : (lx > ly) - (lx < ly);
}

/* One output of each directory that holds outputs (*n of them; malloc'd, NULL when out of
 * memory): one per port for directories, but a list's outputs may be anywhere. */
static const char **one_per_dir(const gr_io_plan *plan, uint64_t *n)
{
    uint64_t total = plan->count * plan->opt.n_outputs, kept = 0;
    const char **v = malloc((total + 1) * sizeof(*v));

    *n = 0;
    if (v == NULL)
        return NULL;
    memcpy(v, plan->out, total * sizeof(*v));
    qsort(v, total, sizeof(*v), dir_cmp);
    for (uint64_t k = 0; k < total; k++)
        if (kept == 0 || dir_cmp(&v[kept - 1], &v[k]) != 0)
            v[kept++] = v[k];
    *n = kept;
    return v;
}

gr_status gr_io_stage(gr_io_plan *plan, char *why, size_t why_len)
{
    uint32_t no = plan->opt.n_outputs;
    gr_status st = GR_OK;
    const char **dirs;
    uint64_t n;

    if (plan->directories) {
        for (uint32_t p = 0; p < no; p++) {
            struct stat sb;
            const char *dir = plan->opt.outputs[p];

            if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
                return gr_io_fail(why, why_len,
                                  "output %s: not a directory (inputs are directories)", dir);
            if (stat(dir, &sb) == 0)
                continue;
            if (mkdir(dir, 0777) == 0) {
                plan->made_dir[p] = true;
                continue;
            }
            /* EEXIST: another process of the run (--mpi) made it meanwhile. */
            if (!(errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
                return gr_io_fail(why, why_len, "output directory %s: cannot create: %s", dir,
                                  strerror(errno));
        }
    }
    /* One probe per directory that holds outputs finds an unwritable one. */
    if ((dirs = one_per_dir(plan, &n)) == NULL)
        return gr_io_fail(why, why_len, "out of memory");
    for (uint64_t d = 0; d < n && st == GR_OK; d++) {
        char *tmp;

        if ((st = make_tmp(dirs[d], &tmp, why, why_len)) == GR_OK) {
            unlink(tmp);
            free(tmp);
        }
    }
    free(dirs);
    return st;
}

void gr_io_tensor_shape(const gr_io_plan *plan, uint64_t i, gr_tensor *t)
{
    const gr_io_shape *s = &plan->in[i * plan->opt.n_inputs + gr_io_lead_port(&plan->opt)].shape;
    uint32_t fold = s->ndim > GR_MAX_DIMS ? s->ndim - GR_MAX_DIMS + 1 : 1;

    t->elems = plan->in[i * plan->opt.n_inputs + gr_io_lead_port(&plan->opt)].elems;
    t->rank = 0;
    if (s->ndim == 0)
        return;
    /* The leading dimensions folded into one, so the last ones (the rows kernels work
     * along) stay as they are. */
    t->shape[0] = 1;
    for (uint32_t d = 0; d < fold; d++)
        t->shape[0] *= s->dims[d];
    for (uint32_t d = fold; d < s->ndim; d++)
        t->shape[d - fold + 1] = s->dims[d];
    t->rank = s->ndim - fold + 1;
}

size_t gr_io_out_header(const gr_io_plan *plan, uint64_t i, uint32_t port, char *buf,
                        size_t size)
{
    const gr_io_file *lead = &plan->in[i * plan->opt.n_inputs + gr_io_lead_port(&plan->opt)];
    uint64_t elems = gr_io_out_elems(plan, i, port);
    gr_io_shape fixed = {1, {elems}};
    const gr_io_shape *shape = plan->opt.out_fixed[port] ? &fixed : &lead->shape;
    size_t n;

    if (plan->opt.n_outputs > 0 &&
        !gr_io_ends_with(plan->out[i * plan->opt.n_outputs + port], ".npy"))
        return 0;
    n = gr_npy_format_header(plan->opt.out_dtype[port], shape->dims, shape->ndim, buf, size);
    return n == 0 ? (size_t)-1 : n;
}

static bool is_stdout(const gr_io_plan *plan, uint64_t k)
{
    return plan->src.stdout_file && strcmp(plan->out[k], plan->src.stdout_file) == 0;
}

gr_status gr_io_output_create(gr_io_plan *plan, uint64_t k, int *fd, char *why,
                              size_t why_len)
{
    gr_inputs *src = &plan->src;
    char *tmp;

    *fd = -1;
    if (!is_stdout(plan, k)) {
        gr_status st = make_tmp(plan->out[k], &plan->tmp[k], why, why_len);

        if (st != GR_OK)
            return st;
        if ((*fd = open(plan->tmp[k], O_RDWR | O_CLOEXEC)) < 0) {
            st = gr_io_fail(why, why_len, "output %s: cannot write: %s", plan->out[k],
                            strerror(errno));
            unlink(plan->tmp[k]);
            free(plan->tmp[k]);
            plan->tmp[k] = NULL;
        }
        return st;
    }
    if ((tmp = gr_io_tmp_template(src->stdout_file)) == NULL)
        return gr_io_fail(why, why_len, "out of memory");
    *fd = mkostemp(tmp, O_CLOEXEC);
    if (*fd >= 0)
        unlink(tmp);
    free(tmp);
    if (*fd < 0)
        return gr_io_fail(why, why_len, "--output -: cannot create a file in %s: %s",
                          src->stdout_dir, strerror(errno));
    return GR_OK;
}

gr_status gr_io_output_place(gr_io_plan *plan, uint64_t k, int fd, bool keep, char *why,
                             size_t why_len)
{
    gr_inputs *src = &plan->src;
    gr_status st = GR_OK;

    if (is_stdout(plan, k)) {
        /* Read back through any buffer by gr_inputs_emit_stdout: no O_DIRECT. */
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) {
            st = gr_io_fail(why, why_len, "--output -: cannot keep the tensor: %s",
                            strerror(errno));
            close(fd);
            return st;
        }
        if (src->stdout_written)
            close(src->stdout_fd);
        src->stdout_fd = fd;
        src->stdout_written = true;
        return GR_OK;
    }
    if (close(fd) != 0)
        st = gr_io_fail(why, why_len, "output %s: cannot write: %s", plan->out[k],
                        strerror(errno));
    else if (!keep && rename(plan->tmp[k], plan->out[k]) != 0)
        st = gr_io_fail(why, why_len, "output %s: cannot rename into place: %s",
                        plan->out[k], strerror(errno));
    if (st != GR_OK)
        unlink(plan->tmp[k]);
    if (st != GR_OK || !keep) {
        free(plan->tmp[k]);
        plan->tmp[k] = NULL;
    }
    return st;
}

void gr_io_output_discard(gr_io_plan *plan, uint64_t k, int fd)
{
    if (fd >= 0)
        close(fd);
    if (plan->tmp[k] != NULL) {
        unlink(plan->tmp[k]);
        free(plan->tmp[k]);
        plan->tmp[k] = NULL;
    }
}

/* Whether `name` is ".NAME.graphrun-tmp.XXXXXX"; *base gets NAME's length. */
static bool is_leftover(const char *name, size_t *base)
{
    size_t n = strlen(name), m = sizeof(TMP_INFIX) - 1;

    if (name[0] != '.' || n < 1 + 1 + m + TMP_RANDOM)
        return false;
    if (memcmp(name + n - TMP_RANDOM - m, TMP_INFIX, m) != 0)
        return false;
    *base = n - TMP_RANDOM - m - 1;
    return true;
}

/* Whether `name` is the hashed form, ".graphrun-tmp.HASH.XXXXXX". */
static bool is_hashed_leftover(const char *name)
{
    size_t m = sizeof(TMP_INFIX) - 1;

    return strlen(name) == m + TMP_HASH + 1 + TMP_RANDOM && memcmp(name, TMP_INFIX, m) == 0 &&
           strspn(name + m, "0123456789abcdef") == TMP_HASH && name[m + TMP_HASH] == '.';
}

uint64_t gr_io_clean_leftovers(const gr_io_plan *plan)
{
    uint64_t n = plan->count * plan->opt.n_outputs, removed = 0, n_dirs, n_stems = 0;
    char **sorted = malloc((n + 1) * sizeof(*sorted)), **stems = NULL;
    const char **dirs = one_per_dir(plan, &n_dirs);

    if (sorted == NULL || dirs == NULL) {
        free(sorted);
        free(dirs);
        return 0;
    }
    memcpy(sorted, plan->out, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), gr_io_name_cmp);
    /* The hashed stems of the outputs whose names are too long for the plain form. */
    for (uint64_t k = 0; k < n; k++)
        if (strlen(plan->out[k] + dir_part(plan->out[k])) > TMP_MAX_BASE) {
            char **v = realloc(stems, (n_stems + 1) * sizeof(*v));

            if (v == NULL || (v[n_stems] = hashed_stem(plan->out[k])) == NULL) {
                stems = v ? v : stems;
                break;
            }
            stems = v;
            n_stems++;
        }
    if (stems)
        qsort(stems, n_stems, sizeof(*stems), gr_io_name_cmp);
    for (uint64_t k = 0; k < n_dirs; k++) {
        const char *out = dirs[k];
        size_t len = dir_part(out);
        struct dirent *e;
        char *dir;
        DIR *d;

        dir = len == 0 ? strdup(".") : len == 1 ? strdup("/") : strndup(out, len - 1);
        if (dir == NULL || (d = opendir(dir)) == NULL) {
            free(dir);
            continue;
        }
        while ((e = readdir(d)) != NULL) {
            size_t base;
            char *want, *tmp;

            char **among = sorted;
            uint64_t n_among = n;

            if (n_stems && is_hashed_leftover(e->d_name)) {
                base = strlen(e->d_name) - 1 - TMP_RANDOM; /* the stem's own part */
                if ((want = malloc(len + base + 1)) == NULL)
                    continue;
                snprintf(want, len + base + 1, "%.*s%.*s", (int)len, out, (int)base, e->d_name);
                among = stems;
                n_among = n_stems;
            } else if (!is_leftover(e->d_name, &base) ||
                       (want = malloc(len + base + 1)) == NULL) {
                continue;
            } else {
                snprintf(want, len + base + 1, "%.*s%.*s", (int)len, out, (int)base,
                         e->d_name + 1);
            }
            if (bsearch(&want, among, n_among, sizeof(*among), gr_io_name_cmp) != NULL &&
                (tmp = gr_io_join(dir, e->d_name)) != NULL) {
                removed += unlink(tmp) == 0;
                free(tmp);
            }
            free(want);
        }
        closedir(d);
        free(dir);
    }
    for (uint64_t k = 0; k < n_stems; k++)
        free(stems[k]);
    free(stems);
    free(sorted);
    free(dirs);
    return removed;
}

uint64_t gr_io_remove_leftovers_of(const char *path)
{
    gr_io_plan one;
    char *out[1] = {(char *)path};

    memset(&one, 0, sizeof(one));
    one.count = 1;
    one.opt.n_outputs = 1;
    one.out = out;
    return gr_io_clean_leftovers(&one);
}

void gr_io_unstage(gr_io_plan *plan)
{
    for (uint32_t p = 0; p < plan->opt.n_outputs && p < GR_MAX_PORTS; p++)
        if (plan->made_dir[p]) {
            rmdir(plan->opt.outputs[p]); /* fails, as it should, once a file is in it */
            plan->made_dir[p] = false;
        }
}

gr_status gr_io_sync_dirs(const gr_io_plan *plan, bool data, char *why, size_t why_len)
{
    uint64_t n;
    const char **dirs = one_per_dir(plan, &n);
    gr_status st = GR_OK;

    if (dirs == NULL)
        return gr_io_fail(why, why_len, "out of memory");
    for (uint64_t k = 0; k < n && st == GR_OK; k++) {
        size_t len = dir_part(dirs[k]);
        char *dir = len == 0 ? strdup(".") : len == 1 ? strdup("/") : strndup(dirs[k], len - 1);
        int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

        if (fd < 0 || (data && syncfs(fd) != 0) || fsync(fd) != 0)
            st = gr_io_fail(why, why_len, "output directory %s: cannot sync: %s",
                            dir ? dir : "(out of memory)", strerror(errno));
        if (fd >= 0)
            close(fd);
        free(dir);
    }
    free(dirs);
    return st;
}

gr_status gr_io_publish(gr_io_plan *plan, char *why, size_t why_len)
{
    uint32_t no = plan->opt.n_outputs;
    sigset_t hold, previous;
    gr_status st = GR_OK;

    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &hold, &previous);
    for (uint64_t k = 0; k < plan->count * no; k++) {
        if (plan->tmp[k] == NULL) /* stdout's: kept open, not renamed */
            continue;
        if (rename(plan->tmp[k], plan->out[k]) != 0) {
            st = gr_io_fail(why, why_len,
                            "output %s: cannot rename into place: %s (%llu of %llu "
                            "outputs were already in place)",
                            plan->out[k], strerror(errno), (unsigned long long)k,
                            (unsigned long long)(plan->count * no));
            break;
        }
        free(plan->tmp[k]);
        plan->tmp[k] = NULL;
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (st != GR_OK)
        gr_io_abort(plan);
    return st;
}

void gr_io_abort(gr_io_plan *plan)
{
    for (uint64_t k = 0; plan->tmp && k < plan->count * plan->opt.n_outputs; k++) {
        if (plan->tmp[k] != NULL)
            unlink(plan->tmp[k]);
        free(plan->tmp[k]);
        plan->tmp[k] = NULL;
    }
}

void gr_io_plan_free(gr_io_plan *plan)
{
    uint32_t ni = plan->opt.n_inputs, no = plan->opt.n_outputs;

    gr_io_abort(plan);
    for (uint64_t i = 0; plan->in && i < plan->count * ni; i++)
        free(plan->in[i].path);
    for (uint64_t i = 0; plan->out && i < plan->count * no; i++)
        free(plan->out[i]);
    for (uint64_t i = 0; plan->bad && i < plan->count; i++)
        free(plan->bad[i]);
    gr_inputs_free(&plan->src);
    free(plan->index);
    free(plan->in);
    free(plan->out);
    free(plan->tmp);
    free(plan->bad);
    memset(plan, 0, sizeof(*plan));
}

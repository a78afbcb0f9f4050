/*
 * inputs.c - the --input and --output arguments resolved into paths (see inputs.h).
 *
 * Everything here is decided from names and directory listings alone, before io.c opens a
 * tensor: a refused run has read nothing and created nothing (stdin, read into a memfd, is
 * memory, not a file). The one thing this module creates, the directory of stdout's
 * temporary .npy (io.c writes the tensor there into a file it unlinks at once), is made
 * only with stage_stdout (a run, never a check), and gr_inputs_free removes it whatever
 * the outcome.
 */
#define _GNU_SOURCE /* memfd_create, strdup */
#include "tools/graphrun/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/graphrun/io_util.h"

#define NPY_MAGIC "\x93NUMPY"
#define NAMES_SHOWN 3 /* names a refusal or a warning lists before "and N more" */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

/* A growing array of strings. */
typedef struct strv {
    char **v;
    uint64_t n, cap;
} strv;

static bool strv_push(strv *s, char *str)
{
    if (str == NULL)
        return false;
    if (s->n == s->cap) {
        char **nv = realloc(s->v, (s->cap = s->cap ? 2 * s->cap : 64) * sizeof(*nv));

        if (nv == NULL) {
            free(str);
            return false;
        }
        s->v = nv;
    }
    s->v[s->n++] = str;
    return true;
}

static void strv_free(strv *s)
{
    for (uint64_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

/* A directory's tensors, sorted by name; everything else not hidden goes to `skipped`. */
static gr_status list_dir(const char *dir, bool raw, strv *names, strv *skipped, char *why,
                          size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL)
        return gr_io_fail(why, len, "%s: cannot open directory: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        struct stat sb;
        char *path;
        bool ok;

        if (e->d_name[0] == '.')
            continue;
        if ((path = gr_io_join(dir, e->d_name)) == NULL)
            goto out_nomem;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (raw || gr_io_ends_with(path, ".npy"))) {
            free(path);
            ok = strv_push(names, strdup(e->d_name));
        } else if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            ok = strv_push(skipped, gr_io_join(path, ""));
            free(path);
        } else {
            ok = strv_push(skipped, path);
        }
        if (!ok)
            goto out_nomem;
    }
    closedir(d);
    if (names->n > 1)
        qsort(names->v, names->n, sizeof(*names->v), gr_io_name_cmp);
    return GR_OK;

out_nomem:
    closedir(d);
    return GR_ERR_OUT_OF_MEMORY;
}

/* "a.npy, b.npy and 3 more" of the names of `a` that `b` lacks (both sorted); the count. */
static uint64_t missing(const strv *a, const strv *b, char *buf, size_t len)
{
    uint64_t n = 0, j = 0;
    size_t at = 0;

    buf[0] = '\0';
    for (uint64_t i = 0; i < a->n; i++) {
        int c = 1;

        while (j < b->n && (c = strcmp(b->v[j], a->v[i])) < 0)
            j++;
        if (j < b->n && c == 0)
            continue;
        if (n++ < NAMES_SHOWN && at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", n > 1 ? ", " : "", a->v[i]);
    }
    if (n > NAMES_SHOWN && at < len)
        snprintf(buf + at, len - at, " and %llu more", (unsigned long long)(n - NAMES_SHOWN));
    return n;
}

/* One list file's paths (inputs.h says how lines are read). */
static gr_status read_list(const char *arg, strv *paths, char *why, size_t len)
{
    const char *file = arg + 1;
    const char *slash = strrchr(file, '/');
    FILE *f = fopen(file, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    gr_status st = GR_OK;

    if (*file == '\0')
        return gr_io_fail(why, len, "invalid value '@' for --input: want @FILE, a file of paths");
    if (f == NULL)
        return gr_io_fail(why, len, "list %s: cannot open: %s", file, strerror(errno));
    while ((got = getline(&line, &cap, f)) >= 0) {
        char *p = line, *end = line + got;
        char *path;

        while (end > p && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' ||
                           end[-1] == '\t'))
            end--;
        *end = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if (*p == '/' || slash == NULL) {
            path = strdup(p);
        } else if ((path = malloc((size_t)(slash - file) + strlen(p) + 2)) != NULL) {
            sprintf(path, "%.*s/%s", (int)(slash - file), file, p);
        }
        if (!strv_push(paths, path)) {
            st = GR_ERR_OUT_OF_MEMORY;
            break;
        }
    }
    free(line);
    fclose(f);
    if (st == GR_OK && paths->n == 0)
        return gr_io_fail(why, len, "list %s holds no paths (one per line; '#' starts a comment)",
                          file);
    return st;
}

/* stdin, read whole into a memfd. */
static gr_status read_stdin(gr_inputs *in, char *why, size_t len)
{
    char buf[1 << 16];
    ssize_t got;
    uint64_t total = 0;

    in->stdin_fd = memfd_create("graphrun-stdin", MFD_CLOEXEC);
    if (in->stdin_fd < 0)
        return gr_io_fail(why, len, "--input -: cannot hold stdin in memory: %s", strerror(errno));
    snprintf(in->stdin_path, sizeof(in->stdin_path), "/proc/self/fd/%d", in->stdin_fd);
    while ((got = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return gr_io_fail(why, len, "--input -: cannot read stdin: %s", strerror(errno));
        if (total == 0)
            in->stdin_npy = (size_t)got >= sizeof(NPY_MAGIC) - 1 &&
                            memcmp(buf, NPY_MAGIC, sizeof(NPY_MAGIC) - 1) == 0;
        for (ssize_t put = 0, w; put < got; put += w)
            if ((w = write(in->stdin_fd, buf + put, (size_t)(got - put))) < 0) {
                if (errno == EINTR) {
                    w = 0;
                    continue;
                }
                return gr_io_fail(why, len, "--input -: cannot hold stdin in memory: %s",
                                  strerror(errno));
            }
        total += (uint64_t)got;
    }
    if (total == 0)
        return gr_io_fail(why, len,
                          "--input -: stdin is empty (want one .npy, or raw data with "
                          "--dtype)");
    return GR_OK;
}

bool gr_inputs_is_stdin(const gr_inputs *in, const char *path)
{
    return in->stdin_path[0] != '\0' && strcmp(path, in->stdin_path) == 0;
}

/* Whether an output given as `path` can be the directory the inputs' form needs. */
static gr_status check_out_dir(const char *path, const char *inputs_are, char *why,
                               size_t len)
{
    struct stat sb;

    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return gr_io_fail(why, len,
                          "--output %s: the inputs are %s, so each output is a directory of one "
                          "file per tensor, and %s is a file",
                          path, inputs_are, path);
    if (stat(path, &sb) != 0 && gr_io_ends_with(path, ".npy"))
        return gr_io_fail(why, len,
                          "--output %s: the inputs are %s, so each output is a directory of one "
                          "file per tensor, and %s is named like a file: give a directory",
                          path, inputs_are, path);
    return GR_OK;
}

/* The inputs' form from the first argument; every other must be of the same form. */
static gr_status input_kind(const gr_inputs_options *opt, gr_inputs_kind *kind, char *why,
                            size_t len)
{
    uint32_t n[3] = {0, 0, 0}, stdins = 0;

    for (uint32_t p = 0; p < opt->n_inputs; p++) {
        const char *a = opt->inputs[p];
        struct stat sb;

        if (a[0] == '@') {
            n[GR_INPUTS_LISTS]++;
        } else if (strcmp(a, "-") == 0) {
            n[GR_INPUTS_FILES]++;
            stdins++;
        } else if (stat(a, &sb) != 0) {
            return gr_io_fail(why, len, "input %s: %s", a, strerror(errno));
        } else {
            n[S_ISDIR(sb.st_mode) ? GR_INPUTS_DIRECTORIES : GR_INPUTS_FILES]++;
        }
    }
    if ((n[0] != 0) + (n[1] != 0) + (n[2] != 0) > 1)
        return gr_io_fail(why, len,
                          "inputs must be all files, all directories or all lists (@FILE)");
    if (stdins > 1)
        return gr_io_fail(why, len, "--input - (stdin) given %u times: stdin holds one tensor",
                          stdins);
    *kind = n[GR_INPUTS_DIRECTORIES] ? GR_INPUTS_DIRECTORIES
            : n[GR_INPUTS_LISTS]     ? GR_INPUTS_LISTS
                                     : GR_INPUTS_FILES;
    return GR_OK;
}

/* Directories: list each, refuse a difference between their sets of names. */
static gr_status resolve_dirs(const gr_inputs_options *opt, gr_inputs *in, char *why,
                              size_t len)
{
    strv first = {0}, other = {0}, skipped = {0};
    gr_status st = GR_OK;
    uint32_t ni = opt->n_inputs;

    for (uint32_t p = 0; p < ni && st == GR_OK; p++) {
        strv *names = p == 0 ? &first : &other;
        char lacks[512], extra[512];
        uint64_t nl, ne;

        strv_free(&other);
        if ((st = list_dir(opt->inputs[p], opt->raw, names, &skipped, why, len)) != GR_OK)
            break;
        if (p == 0 && first.n == 0)
            st = gr_io_fail(why, len, "%s: no input files in this directory (%s)", opt->inputs[0],
                            opt->raw ? "every regular file is one"
                                     : "only .npy files are tensors; "
                                       "--raw reads every file");
        if (p == 0)
            continue;
        nl = missing(&first, &other, lacks, sizeof(lacks));
        ne = missing(&other, &first, extra, sizeof(extra));
        if (nl && ne)
            st = gr_io_fail(why, len,
                            "input directory %s lacks %s, which %s has, and has %s, which %s lacks "
                            "(every input directory holds the same tensor names)",
                            opt->inputs[p], lacks, opt->inputs[0], extra, opt->inputs[0]);
        else if (nl || ne)
            st = gr_io_fail(why, len,
                            "input directory %s %s %s, which %s %s (every input directory holds "
                            "the same tensor names)",
                            opt->inputs[p], nl ? "lacks" : "has", nl ? lacks : extra,
                            opt->inputs[0], nl ? "has" : "lacks");
    }
    strv_free(&other);
    if (st != GR_OK) {
        strv_free(&first);
        strv_free(&skipped);
        return st;
    }
    if (skipped.n > 1) /* none: skipped.v is NULL, which qsort must not be given */
        qsort(skipped.v, skipped.n, sizeof(*skipped.v), gr_io_name_cmp);
    in->total = first.n;
    in->names = first.v;
    in->skipped = skipped.v;
    in->n_skipped = skipped.n;
    in->in = calloc(in->total * ni + 1, sizeof(*in->in));
    if (in->in == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < in->total; i++)
        for (uint32_t p = 0; p < ni; p++)
            if ((in->in[i * ni + p] = gr_io_join(opt->inputs[p], in->names[i])) == NULL)
                return GR_ERR_OUT_OF_MEMORY;
    return GR_OK;
}

/* Lists: read each; they must be as long as the first. */
static gr_status resolve_lists(const gr_inputs_options *opt, gr_inputs *in, char *why,
                               size_t len)
{
    uint32_t ni = opt->n_inputs;
    gr_status st;

    for (uint32_t p = 0; p < ni; p++) {
        strv paths = {0};

        if ((st = read_list(opt->inputs[p], &paths, why, len)) != GR_OK) {
            strv_free(&paths);
            return st;
        }
        if (p == 0) {
            in->total = paths.n;
            in->in = calloc(in->total * ni + 1, sizeof(*in->in));
            in->names = calloc(in->total + 1, sizeof(*in->names));
            if (in->in == NULL || in->names == NULL) {
                strv_free(&paths);
                return GR_ERR_OUT_OF_MEMORY;
            }
        } else if (paths.n != in->total) {
            st = gr_io_fail(why, len,
                            "lists %s and %s differ in length: %llu and %llu paths (tensor i takes "
                            "line i of each)",
                            opt->inputs[0] + 1, opt->inputs[p] + 1, (unsigned long long)in->total,
                            (unsigned long long)paths.n);
            strv_free(&paths);
            return st;
        }
        for (uint64_t i = 0; i < paths.n; i++) {
            in->in[i * ni + p] = paths.v[i];
            if (p == 0 && (in->names[i] = strdup(base_name(paths.v[i]))) == NULL) {
                free(paths.v);
                return GR_ERR_OUT_OF_MEMORY;
            }
        }
        free(paths.v); /* the strings are the inputs' now */
    }
    return GR_OK;
}

/* The outputs: one path per tensor and port. */
static gr_status resolve_outputs(const gr_inputs_options *opt, gr_inputs *in, char *why,
                                 size_t len)
{
    uint32_t no = opt->n_outputs;
    uint32_t lists = 0, stdouts = 0;
    const char *are = in->kind == GR_INPUTS_DIRECTORIES ? "directories" : "lists";
    gr_status st;

    in->out = calloc(in->total * no + 1, sizeof(*in->out));
    if (in->out == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    for (uint32_t p = 0; p < no; p++) {
        lists += opt->outputs[p][0] == '@';
        stdouts += strcmp(opt->outputs[p], "-") == 0;
    }
    if (in->kind == GR_INPUTS_FILES && lists)
        return gr_io_fail(why, len, "--output @FILE (a list) needs inputs given as lists");
    if (in->kind == GR_INPUTS_DIRECTORIES && lists)
        return gr_io_fail(why, len,
                          "--output @FILE (a list) needs inputs given as lists; the "
                          "inputs are directories, so the outputs are too");
    if (in->kind != GR_INPUTS_FILES && stdouts)
        return gr_io_fail(why, len, "--output - (stdout) takes one tensor; the inputs are %s", are);
    if (stdouts > 1)
        return gr_io_fail(why, len, "--output - (stdout) given %u times: stdout holds one tensor",
                          stdouts);
    if (lists && lists != no)
        return gr_io_fail(why, len, "outputs must be all lists (@FILE) or all directories");
    in->out_dirs = in->kind == GR_INPUTS_DIRECTORIES || (in->kind == GR_INPUTS_LISTS && !lists);
    for (uint32_t p = 0; p < no; p++) {
        const char *o = opt->outputs[p];

        if (in->kind == GR_INPUTS_FILES) {
            if (strcmp(o, "-") != 0) {
                if ((in->out[p] = strdup(o)) == NULL)
                    return GR_ERR_OUT_OF_MEMORY;
                continue;
            }
            if (opt->stage_stdout) {
                const char *tmp = getenv("TMPDIR");
                char dir[4096];

                snprintf(dir, sizeof(dir), "%s/graphrun-stdout-XXXXXX",
                         tmp && *tmp ? tmp : "/tmp");
                if (mkdtemp(dir) == NULL)
                    return gr_io_fail(why, len,
                                      "--output -: cannot make a temporary directory in "
                                      "%s: %s",
                                      tmp && *tmp ? tmp : "/tmp", strerror(errno));
                if ((in->stdout_dir = strdup(dir)) == NULL ||
                    (in->stdout_file = gr_io_join(dir, "stdout.npy")) == NULL)
                    return GR_ERR_OUT_OF_MEMORY;
            }
            if ((in->out[p] = strdup(in->stdout_file ? in->stdout_file : "-")) == NULL)
                return GR_ERR_OUT_OF_MEMORY;
        } else if (o[0] == '@') {
            strv paths = {0};

            if ((st = read_list(o, &paths, why, len)) != GR_OK) {
                strv_free(&paths);
                return st;
            }
            if (paths.n != in->total) {
                st = gr_io_fail(why, len,
                                "--output %s lists %llu paths but the inputs are %llu tensors "
                                "(tensor i goes to line i)",
                                o, (unsigned long long)paths.n, (unsigned long long)in->total);
                strv_free(&paths);
                return st;
            }
            for (uint64_t i = 0; i < paths.n; i++)
                in->out[i * no + p] = paths.v[i];
            free(paths.v);
        } else {
            if ((st = check_out_dir(o, are, why, len)) != GR_OK)
                return st;
            for (uint64_t i = 0; i < in->total; i++)
                if ((in->out[i * no + p] = gr_io_join(o, in->names[i])) == NULL)
                    return GR_ERR_OUT_OF_MEMORY;
        }
    }
    /* Lists into a directory: the outputs take the first list's file names. */
    if (in->kind == GR_INPUTS_LISTS && in->out_dirs && in->total > 1) {
        char **sorted = malloc(in->total * sizeof(*sorted));

        if (sorted == NULL)
            return GR_ERR_OUT_OF_MEMORY;
        memcpy(sorted, in->names, in->total * sizeof(*sorted));
        qsort(sorted, in->total, sizeof(*sorted), gr_io_name_cmp);
        for (uint64_t i = 1; i < in->total; i++)
            if (strcmp(sorted[i - 1], sorted[i]) == 0) {
                st = gr_io_fail(why, len,
                                "list %s names two files called %s, whose outputs in --output %s "
                                "would be one: give the outputs as a list (--output @FILE)",
                                opt->inputs[0] + 1, sorted[i], opt->outputs[0]);
                free(sorted);
                return st;
            }
        free(sorted);
    }
    return GR_OK;
}

gr_status gr_inputs_resolve(const gr_inputs_options *opt, gr_inputs *in, char *why,
                            size_t why_len)
{
    uint32_t ni = opt->n_inputs;
    gr_status st;

    memset(in, 0, sizeof(*in));
    in->n_inputs = ni;
    in->n_outputs = opt->n_outputs;
    in->raw = opt->raw;
    if ((st = input_kind(opt, &in->kind, why, why_len)) != GR_OK)
        goto out;
    switch (in->kind) {
    case GR_INPUTS_DIRECTORIES:
        st = resolve_dirs(opt, in, why, why_len);
        break;
    case GR_INPUTS_LISTS:
        st = resolve_lists(opt, in, why, why_len);
        break;
    case GR_INPUTS_FILES:
        in->total = 1;
        if ((in->in = calloc(ni + 1, sizeof(*in->in))) == NULL) {
            st = GR_ERR_OUT_OF_MEMORY;
            break;
        }
        for (uint32_t p = 0; p < ni && st == GR_OK; p++) {
            if (strcmp(opt->inputs[p], "-") == 0 &&
                (st = read_stdin(in, why, why_len)) != GR_OK)
                break;
            in->in[p] = strdup(strcmp(opt->inputs[p], "-") == 0 ? in->stdin_path
                                                                 : opt->inputs[p]);
            if (in->in[p] == NULL)
                st = GR_ERR_OUT_OF_MEMORY;
        }
        if (st == GR_OK && in->stdin_path[0] != '\0' && !in->stdin_npy && !opt->raw)
            st = gr_io_fail(why, why_len,
                            "--input -: stdin does not start with a .npy header; raw data on stdin "
                            "needs --dtype (and --shape, else it is 1-D)");
        break;
    }
    if (st == GR_OK && opt->n_outputs > 0)
        st = resolve_outputs(opt, in, why, why_len);
out:
    if (st == GR_ERR_OUT_OF_MEMORY)
        snprintf(why, why_len, "out of memory resolving the inputs");
    if (st != GR_OK)
        gr_inputs_free(in);
    return st;
}

gr_status gr_inputs_emit_stdout(const gr_inputs *in, int fd, char *why, size_t why_len)
{
    char buf[1 << 16];
    off_t at = 0;
    ssize_t got;

    if (in->stdout_file == NULL)
        return GR_OK;
    if (!in->stdout_written)
        return gr_io_fail(why, why_len, "--output -: no tensor was written");
    while ((got = pread(in->stdout_fd, buf, sizeof(buf), at)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        at += got;
        for (ssize_t put = 0, w; put < got; put += w)
            if ((w = write(fd, buf + put, (size_t)(got - put))) < 0) {
                if (errno == EINTR) {
                    w = 0;
                    continue;
                }
                return gr_io_fail(why, why_len, "--output -: cannot write stdout: %s",
                            strerror(errno));
            }
    }
    return got < 0 ? gr_io_fail(why, why_len, "--output -: cannot read the tensor back: %s",
                          strerror(errno))
                   : GR_OK;
}

void gr_inputs_warn_skipped(const gr_inputs *in, const char *cmd)
{
    if (in->n_skipped == 0)
        return;
    fprintf(stderr, "graphrun %s: warning: skipped %llu entr%s of the input directories that "
                    "%s not tensors:",
            cmd, (unsigned long long)in->n_skipped, in->n_skipped == 1 ? "y" : "ies",
            in->n_skipped == 1 ? "is" : "are");
    for (uint64_t i = 0; i < in->n_skipped && i < NAMES_SHOWN; i++)
        fprintf(stderr, "%s %s", i ? "," : "", in->skipped[i]);
    if (in->n_skipped > NAMES_SHOWN)
        fprintf(stderr, " and %llu more", (unsigned long long)(in->n_skipped - NAMES_SHOWN));
    fprintf(stderr, " (%ssubdirectories are not read)\n",
            in->raw ? "" : "only .npy files are tensors there; --raw reads every file as raw "
                           "data; ");
}

void gr_inputs_free(gr_inputs *in)
{
    for (uint64_t i = 0; in->in && i < in->total * in->n_inputs; i++)
        free(in->in[i]);
    for (uint64_t i = 0; in->out && i < in->total * in->n_outputs; i++)
        free(in->out[i]);
    free(in->in);
    free(in->out);
    if (in->stdout_written)
        close(in->stdout_fd);
    if (in->stdout_file) {
        unlink(in->stdout_file);
        rmdir(in->stdout_dir);
    }
    free(in->stdout_file);
    free(in->stdout_dir);
    if (in->stdin_path[0] != '\0')
        close(in->stdin_fd);
    for (uint64_t i = 0; in->names && i < in->total; i++)
        free(in->names[i]);
    for (uint64_t i = 0; i < in->n_skipped; i++)
        free(in->skipped[i]);
    free(in->names);
    free(in->skipped);
    memset(in, 0, sizeof(*in));
}

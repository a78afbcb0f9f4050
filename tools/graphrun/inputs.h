/*
 * inputs.h - which files a `graphrun run` (or `graphrun check`) reads and writes: the
 * --input and --output arguments resolved into one path per tensor and port, before any file
 * is read for its contents (io.h checks and reads them).
 *
 * The forms, the same for every port of a run (mixing them is refused):
 *   - files: one tensor. `-` as an input is stdin (one .npy, or raw data with --dtype,
 *     --shape or --raw), read whole into memory (a memfd: no file is created); `-` as an
 *     output is stdout: the .npy is written to a temporary file in $TMPDIR, unlinked as soon as
 *     it is made (io.c), and copied to stdout once the run has succeeded (nothing on stdout
 *     otherwise).
 *   - directories: one tensor per file. Without raw mode only `.npy` files are tensors; in
 *     raw mode (--raw, --dtype or --shape) every regular file is one. Everything else that
 *     is there (other files, subdirectories, sockets, ...) is skipped, and listed as skipped;
 *     hidden files (a leading '.') are ignored. Every input directory must hold the same
 *     tensor names: a difference is refused naming it. Outputs are directories (created when
 *     missing), with the inputs' names: an output named like a file (`x.npy`), or an existing
 *     file, is refused.
 *   - lists, `@FILE`: one path per line, a tensor each. A line's leading and trailing blanks
 *     (spaces, tabs, a '\r') are dropped; empty lines and lines starting with '#' are
 *     skipped; a relative path is relative to the list file's directory (not the current
 *     one), so a list and its tensors can move together. Several input lists must have as
 *     many paths. Outputs are lists of as many paths (tensor i to line i), or directories,
 *     the outputs named as the first list's files (which must then differ in name).
 */
#ifndef GR_INPUTS_H
#define GR_INPUTS_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>

typedef enum gr_inputs_kind {
    GR_INPUTS_FILES,
    GR_INPUTS_DIRECTORIES,
    GR_INPUTS_LISTS,
} gr_inputs_kind;

typedef struct gr_inputs {
    gr_inputs_kind kind;
    uint32_t n_inputs, n_outputs;
    bool out_dirs;     /* the outputs are directories (of the inputs' names) */
    bool raw;          /* raw mode: a directory's every regular file was a tensor */
    uint64_t total;    /* tensors */
    char **in;         /* total * n_inputs paths, tensor-major */
    char **out;        /* total * n_outputs final paths (stdout's: its temporary file) */
    char **names;      /* directories and lists: each tensor's name (a file name); else NULL */
    char **skipped;    /* entries of input directories that are not tensors ("d/sub/") */
    uint64_t n_skipped;
    char stdin_path[64];  /* `-` input: "/proc/self/fd/N", the path io.c opens; else "" */
    int stdin_fd;      /* with stdin_path: the memfd holding stdin */
    bool stdin_npy;    /* it starts with the .npy magic */
    char *stdout_dir;  /* `-` output: a directory of ours in $TMPDIR, and the file in it */
    char *stdout_file; /* (its name as an output: io.c writes it unlinked, into stdout_fd) */
    int stdout_fd;     /* with stdout_written: the tensor, for gr_inputs_emit_stdout */
    bool stdout_written;
} gr_inputs;

typedef struct gr_inputs_options {
    const char *const *inputs;
    uint32_t n_inputs;
    const char *const *outputs; /* NULL or n_outputs 0: check without outputs */
    uint32_t n_outputs;
    bool raw;           /* raw mode: every file of a directory is a tensor */
    bool stage_stdout;  /* `-` output: make its temporary file's directory (run, not check) */
} gr_inputs_options;

/* Resolve every path. On failure GR_ERR_INVALID_ARGUMENT (GR_ERR_OUT_OF_MEMORY) with why[]
 * in the flag's terms, and nothing left behind. */
gr_status gr_inputs_resolve(const gr_inputs_options *opt, gr_inputs *in, char *why,
                            size_t why_len);

/* Whether `path` is stdin's memfd (so io.c names it "stdin"). */
bool gr_inputs_is_stdin(const gr_inputs *in, const char *path);

/* `-` output: copy its tensor (stdout_fd) to `fd` (the real stdout). GR_OK when there is
 * none. */
gr_status gr_inputs_emit_stdout(const gr_inputs *in, int fd, char *why, size_t why_len);

/* One warning line on stderr naming what was skipped (none when nothing was). */
void gr_inputs_warn_skipped(const gr_inputs *in, const char *cmd);

/* Free everything, removing stdout's temporary file and directory. Idempotent, and a no-op
 * on a zeroed struct. */
void gr_inputs_free(gr_inputs *in);

#endif /* GR_INPUTS_H */

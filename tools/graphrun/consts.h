/*
 * consts.h - the constants of `graphrun run` and `graphrun check` (--const NAME=FILE): the
 * contents of the graph's `const` declarations (docs/GRAPH_SPEC.md), one file each, a .npy
 * or a raw file of the declared type, matched against the declarations by name, dtype and
 * element count, and loaded once into host memory for every job the run submits
 * (gr_job_options.constants). check plans them (every file's header and size) without
 * loading them; run plans them the same way, then loads them. The main thread only.
 */
#ifndef GR_CONSTS_H
#define GR_CONSTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <graphrun.h>

typedef struct gr_const_file {
    gr_const_info decl;    /* the graph's declaration (gr_graph_const_get) */
    const char *path;      /* FILE of --const NAME=FILE (points into argv) */
    bool npy;              /* a .npy file (the name ends in .npy), else raw */
    bool swap;             /* a .npy in the other byte order: swapped on loading */
    uint64_t data_offset;  /* where the data starts in the file */
    void *data;            /* decl.bytes, once loaded (gr_consts_load) */
} gr_const_file;

/* The graph's constants, in its order (the order gr_job_options.constants takes). */
typedef struct gr_consts {
    uint32_t count;
    gr_const_file c[GR_MAX_CONSTS];
    const void *data[GR_MAX_CONSTS]; /* c[k].data, for gr_job_options.constants */
    uint64_t device_bytes; /* what they take on each device (each rounded up to
                              GR_BUFFER_ALIGN), counted in the budget once */
} gr_consts;

/* At most this many --const flags (a graph has at most GR_MAX_CONSTS constants). */
#define GR_CONSTS_MAX_ARGS GR_MAX_CONSTS

/* One --const argument, as the option is parsed: 1 when it has the form NAME=FILE (both
 * non-empty) and names no constant that args[0..n) already name, else 0 after printing
 * "graphrun CMD: ..." (a bad form, a NAME given twice). */
int gr_consts_check_arg(const char *cmd, const char *arg, const char *const *args, uint32_t n);

/*
 * Match the --const arguments args[0..n) to finalized graph g's declarations (graph_path
 * names the spec in messages) and check every file: that it exists and is a regular file,
 * its .npy header (or a raw file's size), its element type and element count against the
 * declaration. Fills *c (nothing loaded yet). GR_OK, or GR_ERR_INVALID_ARGUMENT with one
 * line in why[len] naming the constant, the file and what was expected and found: an
 * unknown NAME, a declared constant with no --const, a bad file.
 */
gr_status gr_consts_plan(gr_consts *c, const char *const *args, uint32_t n, const gr_graph *g,
                         const char *graph_path, char *why, size_t len);

/* Read every planned constant's data into host memory (byte-swapped as its header says),
 * once, for every job of the run. GR_OK; GR_ERR_INVALID_ARGUMENT (a file that cannot be
 * read now) or GR_ERR_OUT_OF_MEMORY, with why[len]. */
gr_status gr_consts_load(gr_consts *c, char *why, size_t len);

/* The planned constants for --json: an array of {"name", "dtype", "shape", "elems",
 * "bytes", "file"}. */
json_t *gr_consts_json(const gr_consts *c);

/* Print one line per constant ("constant W: float32 [2, 3], 24 B, from w.npy") on f. */
void gr_consts_print(const gr_consts *c, FILE *f);

/* What the files of the constants are, for --resume (size and mtime, as for the kernel
 * files): {"NAME": {"path", "size", "mtime_ns"}, ...} from the --const arguments; an empty
 * object for none. NULL when out of memory. */
json_t *gr_consts_settings_json(const char *const *args, uint32_t n);

/* Free the loaded data; idempotent. */
void gr_consts_free(gr_consts *c);

#endif /* GR_CONSTS_H */

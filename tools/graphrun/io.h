/*
 * io.h - tensors in files for `graphrun run`: NumPy .npy (C order, of the element type of
 * the graph's port, either byte order) and raw files (the port's type, this host's order),
 * given one file, directory or list per port (inputs.h), and outputs written so that no run
 * ever leaves a torn or partial output behind.
 *
 * Types: each input file must hold the element type of its port (gr_graph_port_get); a
 * file of another type is refused when the run is planned, naming the file, the port, both
 * types and how to convert (npy.h: gr_npy_check_dtype). Each output is written in its
 * port's type (.npy as np.save writes it; bfloat16 as '<V2', npy.h).
 *
 * A run goes: plan (check every path, header, shape and output before anything runs),
 * stage (create the output directories, and prove that a file can be created beside every
 * output: an unwritable output fails here), then stream (stream.h): each tensor's inputs
 * read, the tensor run, and each output written into a temporary file of its own beside it
 * (gr_io_output_create) and then either
 *   - per tensor (the default): renamed into place at once (gr_io_output_place);
 *   - all or nothing (--all-or-nothing): kept until every tensor is done, then renamed into
 *     place together (gr_io_publish) or removed (gr_io_abort). A run of several processes
 *     (--mpi) agrees between the two.
 * A tensor whose input files cannot be read as the port needs (missing, not a regular file,
 * a bad or truncated .npy, another element type, a shape that does not match) is a bad
 * input: the plan records why (plan->bad) and goes on with the others, so that every bad
 * input is found in one pass; the caller refuses the run, or (--keep-going) records them as
 * failed and runs the rest.
 * Temporary files are named ".NAME.graphrun-tmp.XXXXXX" beside output NAME (a NAME too
 * long for that: gr_io_tmp_template), never NAME itself, so a process killed at any moment
 * (SIGKILL included) leaves no partial file under an output's name; gr_io_clean_leftovers
 * removes what such a process left. stdout's (`-`) is unlinked as soon as it is made.
 *
 * Shards: several processes can share one set of inputs. Process `shard` of `shards` plans
 * only the tensors whose index i (a directory's names sorted, a list's in its order; 0 for
 * single files) has i % shards == shard; every process lists the same directory (or reads
 * the same list), so the shards are disjoint and together cover every tensor.
 */
#ifndef GR_IO_H
#define GR_IO_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphrun/inputs.h"
#include "tools/graphrun/npy.h"
#include "tools/graphrun/tensor_set.h"

typedef struct gr_io_shape {
    uint32_t ndim;
    uint64_t dims[GR_NPY_MAX_DIMS];
} gr_io_shape;

typedef struct gr_io_options {
    const char *const *inputs; /* one path per input port: all files or all directories */
    uint32_t n_inputs;
    const char *const *outputs; /* one path per output port */
    uint32_t n_outputs;
    const char *raw_dtype;   /* --dtype for raw files (gr_dtype_name's names): each raw
                                input's port must be of that type; NULL: each port's own */
    const gr_io_shape *raw_shape; /* --shape for raw files; NULL: 1-D from the size */
    /* Raw mode (inputs.h), and the flag that asked for it (--raw, --dtype or --shape): every
     * file of an input directory is a tensor, and a .npy input is refused, naming the flag.
     * NULL: a directory's tensors are its .npy files. */
    const char *raw_flag;
    bool stage_stdout; /* `-` output: stage its temporary file (inputs.h); not for a check */
    bool force;              /* overwrite existing outputs */
    gr_mem_kind memory;      /* where tensors live in host memory */
    uint32_t shard, shards;  /* this process's share (see above); shards 0 or 1: all */
    /* Ports of a fixed size (the graph's fixed buffers: gr_graph_port_get): each file of
     * such an input port holds exactly that many elements, and each output of such a port
     * is that many, 1-D; 0: the tensor's size and (outputs) input 0's shape. */
    uint64_t in_fixed[GR_MAX_PORTS], out_fixed[GR_MAX_PORTS];
    /* The ports' element types (gr_graph_port_get); zeroed: float32. */
    gr_dtype in_dtype[GR_MAX_PORTS], out_dtype[GR_MAX_PORTS];
    /* The graph's output ports: out_fixed and out_dtype describe them all, also for a check
     * given no --output (n_outputs 0), whose host memory counts the outputs a run would
     * write (as .npy files). */
    uint32_t graph_outputs;
    /* Existing outputs that may be replaced without `force`: these paths, sorted by strcmp
     * (--resume: the outputs the earlier run's manifest lists). NULL: none. */
    const char *const *replaceable;
    uint64_t n_replaceable;
    /* The run's manifest, or NULL: refused when it is also an output (the same file by any
     * spelling, as two outputs are). */
    const char *manifest;
} gr_io_options;

typedef struct gr_io_file {
    char *path;
    bool npy;
    bool swap; /* a .npy in the other byte order: swapped on loading */
    gr_io_shape shape;
    uint64_t elems;
    uint64_t data_offset;
} gr_io_file;

typedef struct gr_io_plan {
    gr_io_options opt;
    gr_inputs src;       /* every tensor's paths (inputs.h) */
    bool directories;    /* the outputs are directories */
    uint64_t total;      /* tensors in every shard together */
    char **names;        /* directories and lists: the total names (src.names); else NULL */
    uint64_t *index;     /* count: each planned tensor's index among the total */
    uint64_t count;      /* tensors of this shard */
    gr_io_file *in;      /* count * n_inputs, index-major */
    char **out;          /* count * n_outputs final paths */
    char **tmp;          /* their temporary files, once staged */
    uint64_t bytes_in, bytes_out; /* of the good tensors */
    char **bad;          /* count: why tensor i's inputs cannot be read (malloc'd), or NULL
                            for a good tensor (see above) */
    uint64_t n_bad;      /* tensors with a reason in bad[] */
    bool made_dir[GR_MAX_PORTS]; /* output directories gr_io_stage created */
} gr_io_plan;

/* Check everything and decide every path. On failure returns GR_ERR_INVALID_ARGUMENT (bad
 * input or output) with why[] naming the file and the problem; nothing is created. Bad
 * inputs (see above) are not a failure: they are in plan->bad. */
gr_status gr_io_plan_create(const gr_io_options *opt, gr_io_plan *plan, char *why,
                            size_t why_len);

/* Create missing output directories, and check that a file can be created beside every
 * output (creating one and removing it at once). */
gr_status gr_io_stage(gr_io_plan *plan, char *why, size_t why_len);

/* Output k (of tensor k / n_outputs) into a temporary file of its own, opened for writing
 * into *fd: beside the output (plan->tmp[k]), or for `-` in stdout's directory, unlinked at
 * once so that a process killed at any moment (SIGKILL) leaves no tensor in $TMPDIR.
 * GR_ERR_INVALID_ARGUMENT with why[] when it cannot be created. */
gr_status gr_io_output_create(gr_io_plan *plan, uint64_t k, int *fd, char *why,
                              size_t why_len);

/* Output k is written whole into fd (and synced as the caller chose): close it and, unless
 * `keep` (all or nothing: gr_io_publish does it later), rename it into place at once, so
 * that the output appears whole or not at all. `-`'s file is kept open for
 * gr_inputs_emit_stdout instead. On failure the temporary file is removed and
 * GR_ERR_INVALID_ARGUMENT returned with why[]. Serialized per plan. */
gr_status gr_io_output_place(gr_io_plan *plan, uint64_t k, int fd, bool keep, char *why,
                             size_t why_len);

/* Output k could not be written: close fd and remove its temporary file. */
void gr_io_output_discard(gr_io_plan *plan, uint64_t k, int fd);

/* The .npy header of output `port` of tensor i (as np.save writes it) into buf[size]: its
 * length, 0 for a raw output (a name not ending in .npy), (size_t)-1 when it does not fit.
 * Without output paths (a check), the output is taken to be a .npy file. */
size_t gr_io_out_header(const gr_io_plan *plan, uint64_t i, uint32_t port, char *buf,
                        size_t size);

/* Tensor i's size and shape (its first tensor-sized input's, the leading dimensions folded
 * together past GR_MAX_DIMS) into *t. */
void gr_io_tensor_shape(const gr_io_plan *plan, uint64_t i, gr_tensor *t);

/* fsync every directory that holds outputs (renames made durable); with `data`, first
 * syncfs its file system (the outputs' data made durable). GR_ERR_INVALID_ARGUMENT with
 * why[] naming the directory that failed. */
gr_status gr_io_sync_dirs(const gr_io_plan *plan, bool data, char *why, size_t why_len);

/* Rename every written temporary file into place, SIGINT and SIGTERM held back meanwhile.
 * A failed rename (rare: same directory, same file system) stops there, removes the
 * temporary files left and says how many outputs were already in place. */
gr_status gr_io_publish(gr_io_plan *plan, char *why, size_t why_len);

/* Remove the temporary files that an earlier process killed while writing this plan's
 * outputs left beside them (".NAME.graphrun-tmp.XXXXXX" for this plan's outputs NAME
 * only: the outputs of other shards may be another live process's). Returns how many. */
uint64_t gr_io_clean_leftovers(const gr_io_plan *plan);

/* mkstemp's template for the temporary file of `path` (malloc'd; NULL: out of memory):
 * ".NAME.graphrun-tmp.XXXXXX" beside it, or, for a NAME too long to take that within
 * NAME_MAX, ".graphrun-tmp.HASH.XXXXXX" (HASH: 16 hex digits of NAME's FNV-1a), which
 * gr_io_clean_leftovers recognises too. */
char *gr_io_tmp_template(const char *path);

/* The same for one file of ours (the manifest): its ".NAME.graphrun-tmp.XXXXXX" files. */
uint64_t gr_io_remove_leftovers_of(const char *path);

/* Remove the output directories gr_io_stage created, when they are still empty: a run
 * that wrote nothing leaves nothing. Idempotent. */
void gr_io_unstage(gr_io_plan *plan);

/* Remove every temporary file. Idempotent. */
void gr_io_abort(gr_io_plan *plan);

/* Free everything (aborting first if needed). */
void gr_io_plan_free(gr_io_plan *plan);

/* The first input port of the tensor's own size (not fixed), whose files give each
 * tensor's size and shape; 0 when every input port is fixed. */
uint32_t gr_io_lead_port(const gr_io_options *opt);

/* Elements output `port` of planned tensor i has. */
uint64_t gr_io_out_elems(const gr_io_plan *plan, uint64_t i, uint32_t port);

/* "3,4,5" into a shape; false on anything else. */
bool gr_io_parse_shape(const char *s, gr_io_shape *out);

#endif /* GR_IO_H */

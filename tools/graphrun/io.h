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
 * output: an unwritable output fails here), load (read the inputs into host memory), run the
 * job, and write the outputs one of two ways:
 *   - per tensor (the default): gr_io_write_tensor as soon as a tensor is done, each output
 *     to a temporary file beside it and renamed into place at once;
 *   - all or nothing (--all-or-nothing): commit (write every output to a temporary file
 *     beside it, then rename them all into place) or abort (remove the temporary files).
 *     Commit is write then publish; a run of several processes (--mpi) agrees between the
 *     two.
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
    void **in_data;      /* count * n_inputs, each in its port's type */
    void **out_data;     /* count * n_outputs */
    gr_tensor *tensors;  /* count, ready for gr_job_submit once loaded (with the shape of
                            their first tensor-sized input, its leading dimensions folded
                            together past GR_MAX_DIMS) */
    uint64_t bytes_in, bytes_out;
    bool *skip;          /* count, or NULL: tensors gr_io_load leaves alone (--resume: done
                            by an earlier run); the caller's to set and free */
    bool made_dir[GR_MAX_PORTS]; /* output directories gr_io_stage created */
} gr_io_plan;

/* Check everything and decide every path. On failure returns GR_ERR_INVALID_ARGUMENT (bad
 * input or output) with why[] naming the file and the problem; nothing is created. */
gr_status gr_io_plan_create(const gr_io_options *opt, gr_io_plan *plan, char *why,
                            size_t why_len);

/* Create missing output directories, and check that a file can be created beside every
 * output (creating one and removing it at once). */
gr_status gr_io_stage(gr_io_plan *plan, char *why, size_t why_len);

/* Read every input into host memory and allocate the outputs, except those of the tensors
 * plan->skip marks. `stop` (optional) is polled between files: a nonzero value ends the load
 * with GR_ERR_CANCELED. */
gr_status gr_io_load(gr_io_plan *plan, volatile const int *stop, char *why, size_t why_len);

/* Write every output into its temporary file, then rename them all into place (with
 * SIGINT and SIGTERM held back while renaming, so the set lands whole). On failure (or a
 * stop while writing) removes them all and writes nothing. gr_io_write then
 * gr_io_publish. */
gr_status gr_io_commit(gr_io_plan *plan, volatile const int *stop, char *why, size_t why_len);

/* Write every output into a temporary file of its own beside it (and fsync it). On failure
 * (or a stop) removes them all: GR_ERR_CANCELED for a stop, else GR_ERR_INVALID_ARGUMENT
 * with why[]. */
gr_status gr_io_write(gr_io_plan *plan, volatile const int *stop, char *why, size_t why_len);

/* Rename every written temporary file into place, SIGINT and SIGTERM held back meanwhile.
 * A failed rename (rare: same directory, same file system) stops there, removes the
 * temporary files left and says how many outputs were already in place. */
gr_status gr_io_publish(gr_io_plan *plan, char *why, size_t why_len);

/* Write tensor i's outputs, each into a temporary file of its own beside it (fsynced), then
 * renamed into place at once: each output file appears whole or not at all. On failure
 * removes the temporary file and returns GR_ERR_INVALID_ARGUMENT with why[] (the outputs of
 * the tensor's other ports already renamed stay: the caller records the tensor as failed).
 * Not with gr_io_write on the same plan. Serialized per plan. */
gr_status gr_io_write_tensor(gr_io_plan *plan, uint64_t i, char *why, size_t why_len);

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

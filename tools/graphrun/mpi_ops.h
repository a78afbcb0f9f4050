/*
 * mpi_ops.h - the few MPI operations `graphrun run --mpi` needs, as a table of functions.
 *
 * They are implemented in mpi.c, which is built into a shared object of its own,
 * libgraphrun_mpi.so, linked with Open MPI's libmpi. graphrun neither links nor loads MPI
 * until --mpi asks for it (gr_mpi_load, mpi_load.c): without --mpi it never calls MPI_Init,
 * runs without mpirun, and starts on machines where Open MPI is not installed (the GPU
 * machine, say), where only --mpi fails, saying why.
 *
 * Every collective here has a deadline and watches a stop flag, because MPI's own have
 * neither: a rank that never arrives (hung, or dead without mpirun noticing) must not leave
 * the others waiting forever. All calls are made from the thread that called init.
 */
#ifndef GR_MPI_OPS_H
#define GR_MPI_OPS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define GR_MPI_PLUGIN "libgraphrun_mpi.so"
#define GR_MPI_ENTRY "gr_mpi_plugin" /* the plugin's `const gr_mpi_ops` */
#define GR_MPI_ABI 1                 /* bumped whenever the table changes */

typedef struct gr_mpi_world {
    int rank, size;             /* in MPI_COMM_WORLD */
    int local_rank, local_size; /* among the ranks on this node (shared memory) */
    char host[64];              /* MPI_Get_processor_name */
} gr_mpi_world;

typedef enum gr_mpi_op { GR_MPI_MAX, GR_MPI_MIN, GR_MPI_SUM } gr_mpi_op;

/* How a collective ended. */
typedef enum gr_mpi_wait {
    GR_MPI_DONE = 0,
    GR_MPI_TIMED_OUT,   /* not every rank arrived in time */
    GR_MPI_INTERRUPTED, /* *stop became nonzero while waiting */
} gr_mpi_wait;

typedef struct gr_mpi_ops {
    uint32_t abi; /* GR_MPI_ABI */
    const char *library; /* the MPI library's version string */
    /* MPI_Init_thread (MPI_THREAD_FUNNELED: only this thread calls MPI) and the world.
     * Returns 0, or -1 with why[] filled. */
    int (*init)(gr_mpi_world *w, char *why, size_t why_len);
    /* Element-wise reduction of `n` values over every rank, result on every rank. Waits at
     * most timeout_s seconds (0: no limit), and returns early once *stop is nonzero. */
    gr_mpi_wait (*allreduce)(int64_t *values, int n, gr_mpi_op op, double timeout_s,
                             volatile const sig_atomic_t *stop);
    /* `bytes` from every rank to rank 0's `all` (size * bytes; ignored elsewhere), in rank
     * order. Same waiting rules. */
    gr_mpi_wait (*gather)(const void *mine, size_t bytes, void *all, double timeout_s,
                          volatile const sig_atomic_t *stop);
    /* MPI_Abort: end every rank of the job with `code`. Does not return. */
    void (*abort)(int code);
    /* MPI_Finalize, once every rank has agreed on the outcome. */
    void (*finalize)(void);
} gr_mpi_ops;

/* Load the plugin from beside the running graphrun binary. NULL with why[] saying what is
 * missing (the plugin, or Open MPI's libraries it needs) and how to get it. */
const gr_mpi_ops *gr_mpi_load(char *why, size_t why_len);

#endif /* GR_MPI_OPS_H */

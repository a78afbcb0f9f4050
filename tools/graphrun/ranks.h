/*
 * ranks.h - the processes that make up one `graphrun run`: a single one, or every rank of
 * an MPI job (--mpi). The run's steps are the same either way; between steps the ranks
 * agree on how far they got, so that they all go on, or all stop and write nothing.
 *
 * Agreement: every rank gives its exit status for the step (0: fine) and, when not 0, why.
 * All get the highest status of all ranks (interrupted 130 > runtime 3 > usage 2 > failed
 * 1 > 0) and rank 0 prints each failing rank's reason. A rank that does not arrive within
 * the timeout (hung, or gone without mpirun noticing) makes the rank that waited for it
 * remove its own temporary outputs (the cleanup hook) and abort the whole job with a
 * message; a signal while waiting (Ctrl-C, or mpirun ending the job because a rank died)
 * removes them too and exits with status 130. So no step waits forever, and a failed run
 * leaves no output behind on any rank.
 */
#ifndef GR_RANKS_H
#define GR_RANKS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/graphrun/mpi_ops.h"

typedef struct gr_ranks {
    const gr_mpi_ops *mpi; /* NULL: a single process */
    gr_mpi_world world;    /* rank 0 of 1 when single */
    double timeout_s;      /* longest wait for the other ranks at a step; 0: none */
    volatile const sig_atomic_t *stop;
    void (*cleanup)(void *arg); /* run before leaving on a timeout or a signal */
    void *cleanup_arg;
} gr_ranks;

/* One process, no MPI. */
void gr_ranks_single(gr_ranks *r);

/* Load the MPI plugin and initialize MPI. 0, or -1 with why[] filled ("--mpi ..."). */
int gr_ranks_start_mpi(gr_ranks *r, double timeout_s, volatile const sig_atomic_t *stop,
                       char *why, size_t why_len);

static inline bool gr_ranks_multi(const gr_ranks *r)
{
    return r->mpi != NULL;
}

/* Agree on `step` (see above): returns the highest rc of all ranks. In a single process,
 * prints "graphrun run: WHY" when rc != 0 and why is not empty, and returns rc. */
int gr_ranks_agree(gr_ranks *r, const char *step, int rc, const char *why);

/* Element-wise reduction of n values over every rank (a no-op in a single process). */
void gr_ranks_reduce(gr_ranks *r, const char *step, int64_t *values, int n, gr_mpi_op op);

/* `bytes` from every rank into rank 0's `all` (size * bytes), in rank order. */
void gr_ranks_gather(gr_ranks *r, const char *step, const void *mine, size_t bytes, void *all);

/* MPI_Finalize once every rank has agreed on the outcome (nothing in a single process). */
void gr_ranks_finish(gr_ranks *r);

/* Environment variables that mpirun (or another MPI launcher) sets in every rank: the number
 * of ranks it started, and the variable's name; 0 when not started by one. */
int gr_ranks_launched(const char **var);

#endif /* GR_RANKS_H */

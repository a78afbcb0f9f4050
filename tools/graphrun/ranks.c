/*
 * ranks.c - the processes of one `graphrun run` and their agreements (see ranks.h).
 *
 * Why every rank ends the same way: each agreement is one reduction of the ranks' exit
 * statuses, whose result every rank receives, and every rank takes the same branch on it.
 * A rank never leaves the sequence of agreements on its own except by ending the whole job
 * (MPI_Abort after a timeout) or by being ended with it (a signal); then mpirun ends the
 * others, who clean up on the SIGTERM it sends first (odls_base_sigkill_timeout, 1 s).
 */
#include "tools/graphrun/ranks.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHY_MAX 480

typedef struct report {
    int64_t rc;
    char why[WHY_MAX];
} report;

void gr_ranks_single(gr_ranks *r)
{
    memset(r, 0, sizeof(*r));
    r->world.size = 1;
    r->world.local_size = 1;
    gethostname(r->world.host, sizeof(r->world.host) - 1);
}

int gr_ranks_start_mpi(gr_ranks *r, double timeout_s, volatile const sig_atomic_t *stop,
                       char *why, size_t why_len)
{
    memset(r, 0, sizeof(*r));
    r->timeout_s = timeout_s;
    r->stop = stop;
    if ((r->mpi = gr_mpi_load(why, why_len)) == NULL)
        return -1;
    if (r->mpi->init(&r->world, why, why_len) != 0) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", why);
        snprintf(why, why_len, "--mpi: %s", detail);
        r->mpi = NULL;
        return -1;
    }
    return 0;
}

/* A collective did not complete: leave, the whole job with us. Does not return. */
static void give_up(gr_ranks *r, const char *step, gr_mpi_wait how)
{
    if (r->cleanup)
        r->cleanup(r->cleanup_arg);
    if (how == GR_MPI_INTERRUPTED) {
        fprintf(stderr,
                "graphrun run: rank %d: interrupted while waiting for the other ranks (%s): "
                "no output written\n",
                r->world.rank, step);
        _exit(130); /* without MPI_Finalize: the other ranks are not there to finalize with */
    }
    fprintf(stderr,
            "graphrun run: rank %d: the other ranks did not all reach the step '%s' within "
            "%.0f s (--mpi-timeout): one is hung or gone; aborting the whole job, no output "
            "written by this rank\n",
            r->world.rank, step, r->timeout_s);
    fflush(stderr);
    r->mpi->abort(1);
    _exit(1); /* not reached */
}

void gr_ranks_reduce(gr_ranks *r, const char *step, int64_t *values, int n, gr_mpi_op op)
{
    gr_mpi_wait how;

    if (r->mpi == NULL)
        return;
    how = r->mpi->allreduce(values, n, op, r->timeout_s, r->stop);
    if (how != GR_MPI_DONE)
        give_up(r, step, how);
}

void gr_ranks_gather(gr_ranks *r, const char *step, const void *mine, size_t bytes, void *all)
{
    gr_mpi_wait how;

    if (r->mpi == NULL) {
        memcpy(all, mine, bytes);
        return;
    }
    how = r->mpi->gather(mine, bytes, all, r->timeout_s, r->stop);
    if (how != GR_MPI_DONE)
        give_up(r, step, how);
}

/*
 * Test only: GR_TEST_RANK_FAULT=RANK:STEP:WHAT makes rank RANK, on reaching the agreement
 * whose step name starts with STEP, fail it ("fail"), die at once ("kill": SIGKILL, as a
 * crash would), or stop answering ("hang"), so that tests can show what the other ranks do.
 * Unset, as it always is outside tests, it costs one getenv per step.
 */
static int test_fault(const gr_ranks *r, const char *step, int rc, const char **why)
{
    const char *v = getenv("GR_TEST_RANK_FAULT"), *what;
    char *end;
    long rank;
    size_t n;

    if (v == NULL || r->mpi == NULL)
        return rc;
    rank = strtol(v, &end, 10);
    if (end == v || *end != ':' || rank != r->world.rank)
        return rc;
    what = strchr(end + 1, ':');
    n = what ? (size_t)(what - (end + 1)) : 0;
    if (what == NULL || n == 0 || strncmp(step, end + 1, n) != 0)
        return rc;
    what++;
    fprintf(stderr, "graphrun run: rank %d: GR_TEST_RANK_FAULT: %s at '%s'\n", r->world.rank,
            what, step);
    fflush(stderr);
    if (strcmp(what, "kill") == 0)
        raise(SIGKILL);
    if (strcmp(what, "hang") == 0)
        for (;;)
            pause(); /* until SIGKILL: a hung rank does not clean up */
    *why = "injected failure (GR_TEST_RANK_FAULT)";
    return 1;
}

int gr_ranks_agree(gr_ranks *r, const char *step, int rc, const char *why)
{
    report mine, *all = NULL;
    int64_t worst;

    rc = test_fault(r, step, rc, &why);
    worst = rc;

    if (r->mpi == NULL) {
        if (rc != 0 && why != NULL && why[0] != '\0')
            fprintf(stderr, "graphrun run: %s\n", why);
        return rc;
    }
    memset(&mine, 0, sizeof(mine));
    mine.rc = rc;
    snprintf(mine.why, sizeof(mine.why), "%s", rc != 0 && why ? why : "");
    gr_ranks_reduce(r, step, &worst, 1, GR_MPI_MAX);
    if (worst == 0)
        return 0;
    /* Someone failed: rank 0 says who and why. */
    if (r->world.rank == 0 && (all = calloc((size_t)r->world.size, sizeof(*all))) == NULL) {
        fprintf(stderr, "graphrun run: %s failed on some rank (no memory to say which)\n",
                step);
        r->mpi->abort((int)worst);
    }
    gr_ranks_gather(r, step, &mine, sizeof(mine), all);
    for (int k = 0; all != NULL && k < r->world.size; k++)
        if (all[k].rc != 0)
            fprintf(stderr, "graphrun run: rank %d of %d: %s\n", k, r->world.size,
                    all[k].why[0] ? all[k].why : all[k].rc == 130 ? "interrupted" : "failed");
    free(all);
    return (int)worst;
}

void gr_ranks_finish(gr_ranks *r)
{
    if (r->mpi != NULL)
        r->mpi->finalize();
}

int gr_ranks_launched(const char **var)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);

        if (v != NULL && atoi(v) > 0) {
            if (var)
                *var = vars[i];
            return atoi(v);
        }
    }
    return 0;
}

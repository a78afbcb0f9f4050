/*
 * mpi.c - the MPI calls of `graphrun run --mpi` (mpi_ops.h), built into
 * libgraphrun_mpi.so, the only part of graphrun that links libmpi.
 *
 * Collectives with a deadline: MPI's blocking collectives wait forever for a rank that never
 * arrives, so each one here is started non-blocking (MPI_Iallreduce, MPI_Igather) and
 * completed with MPI_Test, between which the thread sleeps, 50 us at first and at most 5 ms:
 * MPI offers no wait with a deadline to sleep on, and polling at that rate costs nothing
 * next to a collective that waits for other ranks' work. Between tests it looks at the
 * caller's stop flag (a signal handler's) and at the deadline, and returns instead of
 * waiting on. A collective left unfinished is never completed: the caller's next step is to
 * leave, by MPI_Abort or by exiting, and the request dies with the process.
 *
 * Thread level: MPI_THREAD_FUNNELED. graphrun's worker threads never call MPI; only the
 * thread that initialized it does.
 *
 * Errors: MPI's default handler stays (MPI_ERRORS_ARE_FATAL): a failed MPI call ends the
 * whole job with MPI's own message, which is the outcome a failed agreement needs anyway.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tools/graphrun/mpi_ops.h"

static MPI_Comm local_comm = MPI_COMM_NULL;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void mpi_error(int code, const char *call, char *why, size_t why_len)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "error %d", code);
    snprintf(why, why_len, "%s: %s", call, text);
}

static int mpi_init(gr_mpi_world *w, char *why, size_t why_len)
{
    int provided = 0, len = 0, e;

    memset(w, 0, sizeof(*w));
    e = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (e != MPI_SUCCESS) {
        mpi_error(e, "MPI_Init_thread", why, why_len);
        return -1;
    }
    if (provided < MPI_THREAD_FUNNELED) {
        snprintf(why, why_len, "MPI_Init_thread: the MPI library gives thread level %d, "
                               "graphrun needs MPI_THREAD_FUNNELED", provided);
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    e = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL,
                            &local_comm);
    if (e != MPI_SUCCESS) {
        mpi_error(e, "MPI_Comm_split_type", why, why_len);
        return -1;
    }
    MPI_Comm_rank(local_comm, &w->local_rank);
    MPI_Comm_size(local_comm, &w->local_size);
    {
        char name[MPI_MAX_PROCESSOR_NAME];

        if (MPI_Get_processor_name(name, &len) != MPI_SUCCESS)
            len = snprintf(name, sizeof(name), "?");
        snprintf(w->host, sizeof(w->host), "%.*s", len, name);
    }
    return 0;
}

/* Complete `req` by the deadline, unless stopped first (see the top of this file). */
static gr_mpi_wait finish(MPI_Request *req, double timeout_s, volatile const sig_atomic_t *stop)
{
    double deadline = timeout_s > 0 ? now_s() + timeout_s : 0;
    long pause_ns = 50000;
    int done = 0;

    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            return GR_MPI_DONE;
        if (stop != NULL && *stop)
            return GR_MPI_INTERRUPTED;
        if (deadline > 0 && now_s() > deadline)
            return GR_MPI_TIMED_OUT;
        nanosleep(&(struct timespec){0, pause_ns}, NULL);
        if (pause_ns < 5000000)
            pause_ns *= 2;
    }
}

static gr_mpi_wait mpi_allreduce(int64_t *values, int n, gr_mpi_op op, double timeout_s,
                                 volatile const sig_atomic_t *stop)
{
    MPI_Op mop = op == GR_MPI_MAX ? MPI_MAX : op == GR_MPI_MIN ? MPI_MIN : MPI_SUM;
    MPI_Request req;

    MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, mop, MPI_COMM_WORLD, &req);
    return finish(&req, timeout_s, stop);
}

static gr_mpi_wait mpi_gather(const void *mine, size_t bytes, void *all, double timeout_s,
                              volatile const sig_atomic_t *stop)
{
    MPI_Request req;

    if (bytes > (size_t)1 << 30) /* a caller's bug: records here are a few hundred bytes */
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Igather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    return finish(&req, timeout_s, stop);
}

static void mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void mpi_finalize(void)
{
    if (local_comm != MPI_COMM_NULL)
        MPI_Comm_free(&local_comm);
    MPI_Finalize();
}

#define GR_STR_(x) #x
#define GR_STR(x) GR_STR_(x)

const gr_mpi_ops gr_mpi_plugin = {
    .abi = GR_MPI_ABI,
#ifdef OMPI_MAJOR_VERSION
    .library = "Open MPI " GR_STR(OMPI_MAJOR_VERSION) "." GR_STR(OMPI_MINOR_VERSION) "."
        GR_STR(OMPI_RELEASE_VERSION),
#else
    .library = "MPI " GR_STR(MPI_VERSION) "." GR_STR(MPI_SUBVERSION),
#endif
    .init = mpi_init,
    .allreduce = mpi_allreduce,
    .gather = mpi_gather,
    .abort = mpi_abort,
    .finalize = mpi_finalize,
};

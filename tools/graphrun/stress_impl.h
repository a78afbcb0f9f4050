/*
 * stress_impl.h - what the files of the stress (stress.h) share: the run's shape, its state
 * and submitters, a job's record, and the calls between them. stress.c runs the stress
 * (config, submitters, monitor, report); stress_graphs.c holds the graphs a job goes
 * through and the check of its outcome; stress_notify.c the completion queue;
 * stress_churn.c the kernel registration churn; stress_cache.c the registration cache's
 * submitters and emulated pins. Internal to them.
 */
#ifndef GR_STRESS_IMPL_H
#define GR_STRESS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>

#include "runtime/hostcache.h"
#include "tools/graphrun/stress.h"

#define MAX_TENSORS 16

#define HANG_SLACK_S 60

/* The completion queue: every NOTIFY_EVERY-th submitter submits notify jobs only, at most
 * NOTIFY_OUTSTANDING in flight each, which REAPERS threads reap. */
#define NOTIFY_EVERY 4
#define NOTIFY_OUTSTANDING 4
#define REAPERS 2
#define REAP_BATCH 8
/* The registration cache: every CACHE_EVERY-th submitter (from the fourth) sends its jobs
 * over pageable ranges of its own of CACHE_ELEMS floats (page-rounded, over
 * GR_HOST_CACHE_MIN_BYTES), CACHE_RANGES of inputs used again and again, through a cache of
 * CACHE_CAPACITY: room for three, fewer than two cache submitters' inputs, so that ranges are
 * registered, hit and evicted. CACHE_JOBS jobs at once over the same inputs, each with
 * outputs of its own. */
#define CACHE_EVERY 16
#define CACHE_RANGES 2
#define CACHE_JOBS 3
#define CACHE_ELEMS ((1u << 18) + 1024)
#define CACHE_CAPACITY (7ull << 19)

typedef struct record {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int calls;
    uint64_t count;
    uint8_t state[MAX_TENSORS];
    gr_status status[MAX_TENSORS];
    gr_job_progress progress;
    uint64_t anomalies;
} record;

typedef struct notify_job notify_job;
typedef struct churn_kernel churn_kernel;

typedef struct shared {
    const gr_stress_config *c;
    gr_stress_report *r;
    gr_runtime *rt;
    gr_graph *g;
    gr_graph *user; /* the user kernel's graph, or NULL when it cannot run here */
    gr_graph *half; /* the float16 graph */
    gr_graph *expr; /* the seed as an expression kernel */
    uint64_t max_elems;
    pthread_barrier_t start;
    int64_t stop_at, hang_at;
    atomic_bool monitor_stop;
    pthread_mutex_t mu; /* guards the report's counters below the breaches line */
    /* The completion queue. nmu guards the live table (notify jobs submitted and not yet
     * reaped or destroyed), the handles reaped but not found in it yet (their submitter
     * has not come back from gr_job_submit), and each submitter's submitting and seq,
     * outstanding. Lock order: nmu, then mu (gr__stress_breach). */
    int completion_fd;
    pthread_mutex_t nmu;
    pthread_cond_t ncv;
    notify_job **live;
    uint64_t n_live, cap_live;
    gr_job **unclaimed;
    uint64_t n_unclaimed;
    atomic_bool reapers_stop;
    struct submitter *w;
    unsigned n_w;
    /* Kernel registration churn: every kernel registered, to be checked at the end. */
    churn_kernel *churned;
    /* The registration cache: pins the emulation made (host backend), under pin_mu. */
    uint64_t cache_capacity;
    bool cache_emulated;
    pthread_mutex_t pin_mu;
    uintptr_t pinned[64][2];
    unsigned n_pinned;
} shared;

typedef struct submitter {
    shared *s;
    unsigned id;
    uint64_t rng;
    bool notify, cache;
    /* The cache submitter's ranges: inputs, then two sets of outputs. */
    float *big[(1 + CACHE_JOBS) * CACHE_RANGES];
    /* Under s->nmu: inside gr_job_submit of a notify job; submissions finished; notify
     * jobs in flight. */
    bool submitting;
    uint64_t seq, outstanding;
} submitter;

/* A kernel of the churn: x * 0.5 + c, registered, used, unregistered, destroyed once. */
struct churn_kernel {
    uint64_t magic;
    shared *s;
    char name[64];
    char source[512];
    float c;
    atomic_bool unregistered, graph_gone;
    atomic_uint_fast64_t jobs, ended;
    atomic_int destroys;
    churn_kernel *next;
};

/* The graphs a job may go through: the user kernel's (when it runs here), the float16 one,
 * the expression kernel's and the seed's. */
enum { G_USER, G_HALF, G_EXPR, G_SEED, G_CHURN /* checked as G_USER, with its own c */ };

/* stress.c ------------------------------------------------------------------------------- */

/* A random number below n (0 when n is 0), from the caller's own state. */
uint64_t gr__stress_below(uint64_t *state, uint64_t n);

/* Count a breach in *counter (a field of s->r), the first one's text kept. Takes s->mu. */
void gr__stress_breach(shared *s, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The completion callback of every job: `user` is its record, filled with each index's
 * final state, then woken. */
void gr__stress_on_complete(gr_job *job, gr_status st, void *user);

/* Wait for record r's callback; exits the process with HANG past s->hang_at. */
void gr__stress_wait_callback(shared *s, record *r, uint64_t id);

/* A refused submission of job `id`: an injected allocation failure, or a breach. */
void gr__stress_refused(shared *s, uint64_t id, const gr_error_info *err);

/* stress_graphs.c ------------------------------------------------------------------------ */

/* x * 0.5 + c with two roundings, as the CUDA kernels compute it. */
float gr__stress_affine_c_ref(float x, float c);

/* The user kernel's graph, if it can run on `rt`, else NULL with the reason in `why`. */
gr_graph *gr__stress_user_graph(gr_runtime *rt, char *why, size_t size);

/* The float16 graph's and the expression kernel's specs. */
extern const char gr__stress_half_spec[];
extern const char gr__stress_expr_spec[];

/* The graph of `which` (G_USER, G_HALF, G_EXPR, else the seed). */
gr_graph *gr__stress_graph_of(shared *s, int which);

/* Fill `count` tensors of random sizes for job `id` and pick its graph, returned. */
int gr__stress_fill_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems,
                        uint64_t count, uint64_t id, bool big);

/* Check a completed job from its record and count it in s->r. */
void gr__stress_check_job(shared *s, record *r, float *const *data, const uint64_t *elems,
                          uint64_t count, uint64_t id, int which, float c, uint64_t kind);

/* stress_notify.c ------------------------------------------------------------------------ */

/* The reapers' thread (p: the shared state), until s->reapers_stop. */
void *gr__stress_reap_main(void *p);

/* One notify job of submitter w, left to the reapers or destroyed early. */
void gr__stress_notify_job_submit(submitter *w, uint64_t id);

/* The end of a notify submitter: its jobs in flight all reaped. */
void gr__stress_notify_drain(submitter *w);

/* stress_churn.c ------------------------------------------------------------------------- */

/* The churn's thread (p: its submitter), until the run's end; kernels on s->churned. */
void *gr__stress_churn_main(void *p);

/* stress_cache.c ------------------------------------------------------------------------- */

/* CACHE_JOBS jobs at once over the same input ranges of cache submitter w. */
void gr__stress_cache_group(submitter *w, uint64_t *elems, uint64_t id, uint64_t n);

/* The run whose cache the emulated pins serve (one at a time), and those pins, given to
 * gr__host_cache_emulate before create on the host backend. */
extern shared *gr__stress_emulating;
extern const gr_host_cache_ops gr__stress_emulated_ops;

#endif /* GR_STRESS_IMPL_H */

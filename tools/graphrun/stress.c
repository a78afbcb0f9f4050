/*
 * stress.c - the runtime under many submitting threads (see stress.h).
 *
 * Submitter threads start behind a barrier and, until the duration is up, submit jobs of
 * 1..16 in-place tensors of random sizes (a quarter of them tiny), through the seed graph,
 * a quarter of the time through a graph of a kernel registered as a user would
 * ("stress_affine": x * 0.5 + 0.25, a C function on the host backend, CUDA C source through
 * NVRTC on the GPU; where it cannot run, those jobs are the seed's and the report says why),
 * a quarter of the time through a float16 graph (mul then add, each rounding to
 * float16: two-byte elements through the same chunks and batches, checked against the
 * compiler's own _Float16), and a quarter of the time through the seed written as an
 * expression kernel (graph/examples/seed_expr.graph: NVRTC on the GPU, the expression
 * evaluator on the host; bit for bit the seed's reference).
 * Jobs are randomly:
 * waited for, canceled after a random delay, given a short deadline, detached (no handle),
 * or released right after submission. Every job's completion callback records each index's
 * final state. Checked per job: the callback ran exactly once; every index ended exactly
 * once (final state, counts add up, the runtime's own double-end counter is 0); every done
 * output equals the seed reference bit for bit (an index run twice in place is caught); an
 * index that did not finish was never written. A monitor samples the budget in use, which
 * must never exceed the budget, and the resident set; at the end nothing is held, and on the
 * host backend the process has no more threads than before create.
 *
 * Three concurrent features run beside them (stress.h). The completion queue: notify
 * submitters hand their jobs to reapers through a table of live notify jobs (under nmu, as
 * are the reaps themselves), so a reaped handle is known or not; one not yet there is
 * waited for until every submitter inside gr_job_submit at the reap has come back, and an
 * early destroy happens under nmu only if no reaper holds the handle: either order is then
 * a fact, never a guess. Kernel churn: each kernel's destroy callback checks that its
 * unregister, its graph's destroy and every job's callback came first (a job holds its
 * graph until it is freed, after its callback); at the end each ran exactly once. The
 * registration cache: pairs of jobs over the same inputs make the ranges urgent, so they
 * are registered amid the run's jobs; on the host backend the stress's own pins stand in
 * for cudaHostRegister and check the cache's pin and unpin calls.
 *
 * With a fault plan (c->faults) the runtime arms it at create and it stays armed to the
 * end: a failed index must then have failed with a status the faulty sites produce
 * (GR_ERR_OUT_OF_MEMORY: an arena placement or an allocation; GR_ERR_CUDA: a graph
 * instantiate, launch or event), or with GR_ERR_TIMEOUT in a job given a deadline; every
 * other check holds as without faults. Without a plan a failed index is a deadline's.
 */
#include "tools/graphrun/stress.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <graphrun_testing.h>
#include <graphrun_workloads.h>

#include "runtime/base/fault.h"
#include "runtime/hostcache.h"
#include "runtime/job.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/workload.h"

#define MAX_TENSORS 16

#define HANG_SLACK_S 60

/* The completion queue: every NOTIFY_EVERY-th submitter submits notify jobs only, at most
 * NOTIFY_OUTSTANDING in flight each, which REAPERS threads reap. */
#define NOTIFY_EVERY 4
#define NOTIFY_OUTSTANDING 4
#define REAPERS 2
#define REAP_BATCH 8
#define NOTIFY_MAGIC 0x6e6f746966794a42ull
/* The registration cache: every CACHE_EVERY-th submitter (from the fourth) sends its jobs
 * over pageable ranges of its own of CACHE_ELEMS floats (page-rounded, over
 * GR_HOST_CACHE_MIN_BYTES), CACHE_RANGES of inputs used again and again, through a cache of
 * CACHE_CAPACITY: room for three, fewer than two cache submitters' inputs, so that ranges are
 * registered, hit and evicted. */
#define CACHE_EVERY 16
#define CACHE_RANGES 2
#define CACHE_ELEMS ((1u << 18) + 1024)
#define CACHE_CAPACITY (7ull << 19)
#define CHURN_MAGIC 0x636875726e4b6e6cull

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
     * outstanding. Lock order: nmu, then mu (breach). */
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
    float *big[3 * CACHE_RANGES];
    /* Under s->nmu: inside gr_job_submit of a notify job; submissions finished; notify
     * jobs in flight. */
    bool submitting;
    uint64_t seq, outstanding;
} submitter;

/* A notify job: submitted, then the reapers' (or destroyed early by its submitter). */
struct notify_job {
    uint64_t magic;
    submitter *w;
    gr_job *job;
    uint64_t id, count, kind;
    int which;
    float *data[MAX_TENSORS];
    uint64_t elems[MAX_TENSORS];
    int reaped;
    record r;
};

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

static const char affine_source[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void stress_affine(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a)\n"
    "    GR_OUT(a, float)[i] = __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], 0.5f), 0.25f);\n"
    "}\n";

static float affine_c_ref(float x, float c)
{
    volatile float half = x * 0.5f; /* two roundings, as the CUDA version */
    return half + c;
}

static float affine_ref(float x)
{
    return affine_c_ref(x, 0.25f);
}

static void affine_cpu(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = affine_ref(x[i]);
}

static pthread_once_t affine_once = PTHREAD_ONCE_INIT;
static gr_status affine_registered;
static gr_error_info affine_why;

static void register_affine(void)
{
    gr_kernel_def d = GR_KERNEL_DEF_INIT;

    d.name = "stress_affine";
    d.doc = "graphrun stress: x * 0.5 + 0.25";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = affine_cpu;
    d.cuda_kind = GR_CUDA_SOURCE;
    d.cuda = affine_source;
    d.cuda_name = "stress_affine";
    affine_registered = gr_kernel_register(&d, &affine_why);
}

/* The user kernel's graph, if it can run on `rt` (a one-element job says so), else NULL
 * with the reason in `why`. */
static gr_graph *user_graph(gr_runtime *rt, char *why, size_t size)
{
    static const char spec[] = "buffer x\nh2d l: in0 -> x\nkernel k: stress_affine(x) -> x\n"
                               "d2h s: x -> out0\nl -> k -> s\n";
    float x = 1.0f;
    gr_tensor t = {{&x}, {&x}, 1, 0, {0}};
    gr_error_info err;
    gr_status result;
    gr_job *job = NULL;
    gr_graph *g;

    pthread_once(&affine_once, register_affine);
    if (affine_registered != GR_OK) {
        snprintf(why, size, "%s", affine_why.message);
        return NULL;
    }
    if (gr_graph_parse(spec, strlen(spec), "stress", &g, &err) != GR_OK) {
        snprintf(why, size, "%s", err.message);
        return NULL;
    }
    if (gr_job_submit(rt, g, &t, 1, NULL, &job, &err) != GR_OK ||
        gr_job_wait(job, GR_WAIT_FOREVER, &result) != GR_OK || result != GR_OK ||
        x != affine_ref(1.0f)) {
        if (job != NULL)
            gr_job_error_get(job, &err);
        snprintf(why, size, "%s", err.message);
        gr_job_destroy(job);
        gr_graph_destroy(g);
        return NULL;
    }
    gr_job_destroy(job);
    return g;
}

/* Elements of out[0, n) that are not `f` of tensor (id, index)'s input; with `partial`,
 * that are neither the input nor f of it. */
static uint64_t check_affine(const float *out, uint64_t n, uint64_t id, uint64_t index,
                             bool partial, float c, uint64_t *first_bad)
{
    uint64_t bad = 0;

    *first_bad = UINT64_MAX;
    for (uint64_t j = 0; j < n; j++) {
        float in = gr_workload_value(id, index, j), done = affine_c_ref(in, c);

        if (memcmp(&out[j], &done, 4) != 0 && !(partial && memcmp(&out[j], &in, 4) == 0)) {
            if (bad++ == 0)
                *first_bad = j;
        }
    }
    return bad;
}

/* The float16 graph: x = x * 0.5 in float16, then x = x + 0.25, in place. */
static const char half_spec[] = "buffer x float16\nh2d l: in0 -> x\nkernel m: mul(x, 0.5) -> x\n"
                                "kernel a: add(x, 0.25) -> x\nd2h s: x -> out0\n"
                                "l -> m -> a -> s\n";

/* graph/examples/seed_expr.graph: ten rounds of sqrt(x * 1.01 + 1.01), nested. */
static const char expr_spec[] =
    "buffer x\nh2d l: in0 -> x\nkernel e: expr(x, \"sqrt(sqrt(sqrt(sqrt(sqrt(sqrt(sqrt(sqrt("
    "sqrt(sqrt(x * 1.01 + 1.01) * 1.01 + 1.01) * 1.01 + 1.01) * 1.01 + 1.01) * 1.01 + 1.01) "
    "* 1.01 + 1.01) * 1.01 + 1.01) * 1.01 + 1.01) * 1.01 + 1.01) * 1.01 + 1.01)\") -> x\n"
    "d2h s: x -> out0\n";

static uint16_t half_bits(_Float16 h)
{
    uint16_t u;

    memcpy(&u, &h, 2);
    return u;
}

/* Tensor (id, index)'s float16 input: the seed workload's values, rounded. */
static uint16_t half_input(uint64_t id, uint64_t index, uint64_t j)
{
    return half_bits((_Float16)gr_workload_value(id, index, j));
}

static uint16_t half_ref(uint16_t in)
{
    _Float16 x;

    memcpy(&x, &in, 2);
    x = (_Float16)((float)x * 0.5f);
    return half_bits((_Float16)((float)x + 0.25f));
}

static void fill_half(uint16_t *p, uint64_t n, uint64_t id, uint64_t index)
{
    for (uint64_t j = 0; j < n; j++)
        p[j] = half_input(id, index, j);
}

/* check_affine for the float16 graph. */
static uint64_t check_half(const uint16_t *out, uint64_t n, uint64_t id, uint64_t index,
                           bool partial, uint64_t *first_bad)
{
    uint64_t bad = 0;

    *first_bad = UINT64_MAX;
    for (uint64_t j = 0; j < n; j++) {
        uint16_t in = half_input(id, index, j);

        if (out[j] != half_ref(in) && !(partial && out[j] == in) && bad++ == 0)
            *first_bad = j;
    }
    return bad;
}

static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *state, uint64_t n)
{
    return n ? next_rand(state) % n : 0;
}

static void breach(shared *s, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void breach(shared *s, uint64_t *counter, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&s->mu);
    if (gr_stress_breaches(s->r) == 0) {
        va_start(ap, fmt);
        vsnprintf(s->r->first_breach, sizeof(s->r->first_breach), fmt, ap);
        va_end(ap);
    }
    (*counter)++;
    pthread_mutex_unlock(&s->mu);
}

static void on_complete(gr_job *job, gr_status st, void *user)
{
    record *r = user;

    (void)st;
    for (uint64_t i = 0; i < r->count; i++) {
        gr_index_state state;
        gr_job_index_get(job, i, &state, &r->status[i]);
        r->state[i] = (uint8_t)state;
    }
    r->progress = (gr_job_progress)GR_JOB_PROGRESS_INIT;
    gr_job_progress_get(job, &r->progress);
    r->anomalies = gr__job_anomalies(job);
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&r->calls, 1);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    nanosleep(&ts, NULL);
}

static void wait_callback(shared *s, record *r, uint64_t id)
{
    struct timespec ts;

    pthread_mutex_lock(&r->mu);
    while (atomic_load(&r->calls) == 0) {
        if (gr_now_ns() > s->hang_at) {
            fprintf(stderr, "graphrun stress: HANG: job %llu (%llu tensors) did not complete "
                            "within %d s after the run's end\n",
                    (unsigned long long)id, (unsigned long long)r->count, HANG_SLACK_S);
            exit(1);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
}

/* The graphs a job may go through: the user kernel's (when it runs here), the float16 one,
 * the expression kernel's and the seed's. */
enum { G_USER, G_HALF, G_EXPR, G_SEED, G_CHURN /* checked as G_USER, with its own c */ };

static gr_graph *graph_of(shared *s, int which)
{
    return which == G_USER ? s->user : which == G_HALF ? s->half : which == G_EXPR ? s->expr
                                                                                   : s->g;
}

/* Fill tensors of random sizes for job `id` (of `big` ranges: CACHE_ELEMS each, the float16
 * graph never, as its ranges would be under the cache's minimum). */
static int fill_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems, uint64_t count,
                    uint64_t id, bool big)
{
    shared *s = w->s;
    int which = (int)below(&w->rng, 4);

    if ((which == G_USER && s->user == NULL) || (big && which == G_HALF))
        which = G_SEED;
    for (uint64_t i = 0; i < count; i++) {
        elems[i] = big                        ? CACHE_ELEMS
                   : below(&w->rng, 4) == 0 ? 1 + below(&w->rng, 16)
                                            : 1 + below(&w->rng, s->max_elems);
        if (which == G_HALF)
            fill_half((uint16_t *)data[i], elems[i], id, i);
        else
            gr_workload_fill(data[i], 0, elems[i], id, i);
        memset(&t[i], 0, sizeof(t[i]));
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = elems[i];
    }
    return which;
}

/* Check a completed job from its record: each index ended once, done outputs right,
 * unfinished ones untouched, counts adding up; then count it. `kind`: 6 canceled, 7 a
 * deadline, else neither (every index done but for injected faults). `c` is the affine
 * constant of a G_USER job. */
static void check_job(shared *s, record *r, float *const *data, const uint64_t *elems,
                      uint64_t count, uint64_t id, int which, float c, uint64_t kind)
{
    gr_stress_report *rep = s->r;
    uint64_t done = 0, failed = 0, canceled = 0, fault_failed = 0;
    bool faults = s->c->faults != NULL, user = which == G_USER || which == G_CHURN;
    bool half = which == G_HALF;

    if (atomic_load(&r->calls) != 1)
        breach(s, &rep->callback_errors, "job %llu: callback ran %d times",
               (unsigned long long)id, atomic_load(&r->calls));
    if (r->anomalies != 0)
        breach(s, &rep->anomalies, "job %llu: %llu indices ended twice", (unsigned long long)id,
               (unsigned long long)r->anomalies);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t where, bad;

        if (r->state[i] == GR_INDEX_DONE) {
            done++;
            bad = user   ? check_affine(data[i], elems[i], id, i, false, c, &where)
                  : half ? check_half((uint16_t *)data[i], elems[i], id, i, false, &where)
                         : gr_workload_check_seed(data[i], 0, elems[i], id, i, &where);
            if (bad)
                breach(s, &rep->wrong_outputs, "job %llu index %llu: %llu wrong elements, "
                                               "first %llu",
                       (unsigned long long)id, (unsigned long long)i, (unsigned long long)bad,
                       (unsigned long long)where);
            continue;
        }
        if (r->state[i] == GR_INDEX_FAILED) {
            gr_status why = r->status[i];

            failed++;
            if (faults && (why == GR_ERR_OUT_OF_MEMORY || why == GR_ERR_CUDA))
                fault_failed++;
            else if (!(kind == 7 && why == GR_ERR_TIMEOUT))
                breach(s, &rep->wrong_status, "job %llu index %llu failed with %s (%s)",
                       (unsigned long long)id, (unsigned long long)i, gr_status_str(why),
                       kind == 7 ? "a deadline job" : faults ? "not an injected status"
                                                          : "no deadline, no fault plan");
        } else if (r->state[i] == GR_INDEX_CANCELED)
            canceled++;
        else
            breach(s, &rep->count_errors, "job %llu index %llu: state %d is not final",
                   (unsigned long long)id, (unsigned long long)i, r->state[i]);
        /* Untouched, except that a tensor split into chunks may have had some chunks
         * written before it was stopped: each element is its input or its result. */
        bad = user   ? check_affine(data[i], elems[i], id, i, true, c, &where)
              : half ? check_half((uint16_t *)data[i], elems[i], id, i, true, &where)
                     : gr_workload_check_partial(data[i], 0, elems[i], id, i, &where);
        if (bad)
            breach(s, &rep->written_unfinished,
                   "job %llu index %llu (state %d): %llu elements are neither input nor "
                   "result, first %llu",
                   (unsigned long long)id, (unsigned long long)i, r->state[i],
                   (unsigned long long)bad, (unsigned long long)where);
    }
    if (r->progress.total != count ||
        r->progress.done + r->progress.failed + r->progress.canceled != count ||
        r->progress.queued + r->progress.in_flight != 0 ||
        (kind != 6 && kind != 7 && r->progress.done + fault_failed != count))
        breach(s, &rep->count_errors, "job %llu: progress %llu done %llu failed %llu canceled "
                                      "of %llu",
               (unsigned long long)id, (unsigned long long)r->progress.done,
               (unsigned long long)r->progress.failed, (unsigned long long)r->progress.canceled,
               (unsigned long long)count);
    pthread_mutex_lock(&s->mu);
    rep->jobs++;
    rep->expr_jobs += which == G_EXPR;
    rep->fault_failed += fault_failed;
    rep->user_jobs += which == G_USER;
    rep->half_jobs += half;
    rep->done += done;
    rep->failed += failed;
    rep->canceled += canceled;
    pthread_mutex_unlock(&s->mu);
}

/* A refused submission: an injected allocation failure, or a breach. */
static void refused(shared *s, uint64_t id, const gr_error_info *err)
{
    if (s->c->faults != NULL && err->status == GR_ERR_OUT_OF_MEMORY) {
        pthread_mutex_lock(&s->mu);
        s->r->fault_refused++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    breach(s, &s->r->submit_errors, "job %llu: submit refused: %s", (unsigned long long)id,
           err->message);
}

/* Wait for the job through its own completion descriptor: once readable, the job must be
 * complete and its callback returned. */
static void wait_fd(shared *s, gr_job *job, record *r, uint64_t id)
{
    struct pollfd p = {.events = POLLIN};
    gr_status result;
    int n;

    if (gr_job_completion_fd(job, &p.fd) != GR_OK) {
        breach(s, &s->r->fd_errors, "job %llu: no completion descriptor", (unsigned long long)id);
        return;
    }
    do {
        int64_t left = (s->hang_at - gr_now_ns()) / 1000000;
        n = poll(&p, 1, left > 0 ? (int)(left < 1000 ? left : 1000) : 0);
    } while ((n < 0 && errno == EINTR) || (n == 0 && gr_now_ns() < s->hang_at));
    if (n <= 0) {
        fprintf(stderr, "graphrun stress: HANG: job %llu's completion descriptor never became "
                        "readable\n", (unsigned long long)id);
        exit(1);
    }
    if (gr_job_wait(job, 0, &result) != GR_OK || atomic_load(&r->calls) != 1)
        breach(s, &s->r->fd_errors, "job %llu: completion descriptor readable before the job "
                                    "completed (callback ran %d times)",
               (unsigned long long)id, atomic_load(&r->calls));
    pthread_mutex_lock(&s->mu);
    s->r->fd_waits++;
    pthread_mutex_unlock(&s->mu);
}

static void one_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems, uint64_t id)
{
    shared *s = w->s;
    uint64_t count = 1 + below(&w->rng, MAX_TENSORS), kind = below(&w->rng, 10);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_error_info err;
    gr_job *job = NULL;
    int which;
    record r;

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.count = count;
    which = fill_job(w, data, t, elems, count, id, false);
    o.on_complete = on_complete;
    o.user = &r;
    if (kind == 7)
        o.deadline_ns = gr_now_ns() + (int64_t)below(&w->rng, 3000000);
    if (gr_job_submit(s->rt, graph_of(s, which), t, count, &o, kind == 8 ? NULL : &job, &err) !=
        GR_OK) {
        refused(s, id, &err);
        goto out;
    }
    if (kind == 6) {
        sleep_ns(below(&w->rng, 2000000));
        gr_job_cancel(job);
    }
    if (kind == 9) {
        gr_job_destroy(job); /* released at once: runs on, calls back */
        job = NULL;
    }
    if (job != NULL && below(&w->rng, 4) == 0) {
        wait_fd(s, job, &r, id);
    } else if (job != NULL && below(&w->rng, 3) == 0) {
        gr_status result;
        if (gr_job_wait(job, (int64_t)(s->hang_at - gr_now_ns()), &result) != GR_OK) {
            fprintf(stderr, "graphrun stress: HANG: gr_job_wait on job %llu\n",
                    (unsigned long long)id);
            exit(1);
        }
        if (atomic_load(&r.calls) != 1) /* the callback returns before the wait does */
            breach(s, &s->r->callback_errors, "job %llu: wait returned before the callback",
                   (unsigned long long)id);
    }
    wait_callback(s, &r, id);
    gr_job_destroy(job);
    check_job(s, &r, data, elems, count, id, which, 0.25f, kind);
out:
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
}

/* Two jobs at once over the same input ranges of the cache submitter (1 or 2 of its
 * CACHE_RANGES), each into outputs of its own. The inputs are
 * queued for registration by the first job to use them, and the second job holding them
 * meanwhile makes them urgent: they are registered while jobs run, then hit by later
 * jobs, and evicted as the submitters' inputs outgrow the cache. Each output range starts
 * as its input, so that an unfinished index is checked as in place. */
static void cache_pair(submitter *w, uint64_t *elems, uint64_t id, uint64_t n)
{
    shared *s = w->s;
    /* Two pairs in a row from the same first range: the second finds it registered. */
    uint64_t count = 1 + below(&w->rng, 2), first = n / 2 % CACHE_RANGES;
    float *out[2][2];
    gr_tensor t[2][2];
    gr_job *job[2] = {NULL, NULL};
    bool submitted[2] = {false, false};
    gr_error_info err;
    record r[2];
    int which;

    for (uint64_t i = 0; i < count; i++)
        for (int j = 0; j < 2; j++)
            out[j][i] = w->big[(1 + j) * CACHE_RANGES + (first + i) % CACHE_RANGES];
    which = fill_job(w, out[0], t[0], elems, count, id, true);
    for (uint64_t i = 0; i < count; i++) {
        float *in = w->big[(first + i) % CACHE_RANGES];

        memcpy(in, out[0][i], CACHE_ELEMS * sizeof(float));
        memcpy(out[1][i], out[0][i], CACHE_ELEMS * sizeof(float));
        t[1][i] = t[0][i];
        t[0][i].in[0] = t[1][i].in[0] = in;
        t[1][i].out[0] = out[1][i];
    }
    for (int j = 0; j < 2; j++) {
        gr_job_options o = GR_JOB_OPTIONS_INIT;

        memset(&r[j], 0, sizeof(r[j]));
        pthread_mutex_init(&r[j].mu, NULL);
        pthread_cond_init(&r[j].cv, NULL);
        r[j].count = count;
        o.on_complete = on_complete;
        o.user = &r[j];
        submitted[j] = gr_job_submit(s->rt, graph_of(s, which), t[j], count, &o, &job[j],
                                     &err) == GR_OK;
        if (!submitted[j])
            refused(s, id, &err);
    }
    for (int j = 0; j < 2; j++) {
        if (submitted[j]) {
            wait_callback(s, &r[j], id);
            gr_job_destroy(job[j]);
            check_job(s, &r[j], out[j], elems, count, id, which, 0.25f, 0);
            pthread_mutex_lock(&s->mu);
            s->r->cache_jobs++;
            pthread_mutex_unlock(&s->mu);
        }
        pthread_cond_destroy(&r[j].cv);
        pthread_mutex_destroy(&r[j].mu);
    }
}

/* The live notify job of handle `job`, taken out of the table, or NULL. s->nmu held. */
static notify_job *take_live(shared *s, gr_job *job)
{
    for (uint64_t i = 0; i < s->n_live; i++)
        if (s->live[i]->job == job) {
            notify_job *nj = s->live[i];

            s->live[i] = s->live[--s->n_live];
            return nj;
        }
    return NULL;
}

static bool in_unclaimed(const shared *s, gr_job *job)
{
    for (uint64_t i = 0; i < s->n_unclaimed; i++)
        if (s->unclaimed[i] == job)
            return true;
    return false;
}

static void drop_unclaimed(shared *s, gr_job *job)
{
    for (uint64_t i = 0; i < s->n_unclaimed; i++)
        if (s->unclaimed[i] == job) {
            s->unclaimed[i] = s->unclaimed[--s->n_unclaimed];
            return;
        }
}

/* A notify job's end, on the thread that owns it (its reaper, or its submitter when it
 * destroyed it early): check it and let its submitter send another. */
static void notify_end(shared *s, notify_job *nj)
{
    submitter *w = nj->w;

    check_job(s, &nj->r, nj->data, nj->elems, nj->count, nj->id, nj->which, 0.25f, nj->kind);
    for (uint64_t i = 0; i < nj->count; i++)
        free(nj->data[i]);
    pthread_cond_destroy(&nj->r.cv);
    pthread_mutex_destroy(&nj->r.mu);
    free(nj);
    pthread_mutex_lock(&s->nmu);
    w->outstanding--;
    pthread_cond_broadcast(&s->ncv);
    pthread_mutex_unlock(&s->nmu);
}

/* A reaped job the reaper now owns: it must be complete, its callback returned, and reaped
 * once (it was in the live table, which it has left). */
static void reaped(shared *s, notify_job *nj)
{
    gr_status result;

    if (nj->magic != NOTIFY_MAGIC || nj->reaped++ != 0)
        breach(s, &s->r->reap_errors, "job %llu reaped twice", (unsigned long long)nj->id);
    if (gr_job_wait(nj->job, 0, &result) != GR_OK || atomic_load(&nj->r.calls) != 1)
        breach(s, &s->r->reap_errors, "job %llu reaped before it completed (callback ran %d "
                                      "times)",
               (unsigned long long)nj->id, atomic_load(&nj->r.calls));
    gr_job_destroy(nj->job);
    pthread_mutex_lock(&s->mu);
    s->r->notify_reaped++;
    pthread_mutex_unlock(&s->mu);
    notify_end(s, nj);
}

/* Reap what the queue holds. A handle reaped must be a live notify job; one not in the
 * table yet may be its submitter's, still on its way back from gr_job_submit: it is waited
 * for until every submitter inside gr_job_submit at the reap has come back, and is then a
 * breach (a job reaped twice, destroyed, or never submitted with notify). */
static void reap_some(shared *s)
{
    gr_job *jobs[REAP_BATCH], *mine[REAP_BATCH];
    notify_job *got[REAP_BATCH];
    uint64_t *snap = calloc(s->n_w, sizeof(*snap));
    size_t n = 0, n_got = 0, n_mine = 0;

    pthread_mutex_lock(&s->nmu);
    if (gr_runtime_reap(s->rt, jobs, REAP_BATCH, &n) != GR_OK)
        breach(s, &s->r->reap_errors, "gr_runtime_reap refused");
    for (unsigned i = 0; snap != NULL && i < s->n_w; i++)
        snap[i] = s->w[i].submitting ? s->w[i].seq : UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        notify_job *nj = take_live(s, jobs[i]);

        if (nj != NULL)
            got[n_got++] = nj;
        else {
            mine[n_mine++] = jobs[i];
            s->unclaimed[s->n_unclaimed++] = jobs[i];
        }
    }
    while (n_mine > 0) {
        bool waiting = false;
        struct timespec ts;

        for (unsigned i = 0; snap != NULL && i < s->n_w; i++)
            waiting |= snap[i] != UINT64_MAX && s->w[i].seq == snap[i];
        for (size_t i = 0; i < n_mine;) {
            notify_job *nj = take_live(s, mine[i]);

            if (nj == NULL && waiting) {
                i++;
                continue;
            }
            drop_unclaimed(s, mine[i]);
            if (nj != NULL)
                got[n_got++] = nj;
            else
                breach(s, &s->r->reap_errors, "reaped a job that is no live notify job (reaped "
                                              "twice, destroyed, or submitted without notify)");
            mine[i] = mine[--n_mine];
        }
        if (n_mine == 0)
            break;
        if (gr_now_ns() > s->hang_at) {
            fprintf(stderr, "graphrun stress: HANG: a submitter never came back from "
                            "gr_job_submit\n");
            exit(1);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->ncv, &s->nmu, &ts);
    }
    pthread_mutex_unlock(&s->nmu);
    free(snap);
    for (size_t i = 0; i < n_got; i++)
        reaped(s, got[i]);
}

static void *reap_main(void *p)
{
    shared *s = p;
    struct pollfd pf = {.fd = s->completion_fd, .events = POLLIN};

    /* The timeout only lets the reaper see the end of the run. */
    while (!atomic_load(&s->reapers_stop))
        if (poll(&pf, 1, 20) > 0)
            reap_some(s);
    return NULL;
}

/* One notify job of submitter w: submitted and left to the reapers, or (one in eight)
 * destroyed at once, before anyone could reap it, and then waited for by its callback.
 * Its tensors are its own, freed when it ends. */
static void notify_job_submit(submitter *w, uint64_t id)
{
    shared *s = w->s;
    notify_job *nj = calloc(1, sizeof(*nj));
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_tensor t[MAX_TENSORS];
    gr_error_info err;
    bool early = w->seq == 0 || below(&w->rng, 8) == 0, ok = nj != NULL; /* its first, and more */
    gr_status st = GR_ERR_OUT_OF_MEMORY;

    pthread_mutex_lock(&s->nmu);
    while (w->outstanding >= NOTIFY_OUTSTANDING) {
        struct timespec ts;

        if (gr_now_ns() > s->hang_at) {
            fprintf(stderr, "graphrun stress: HANG: notify jobs of submitter %u never "
                            "reaped\n", w->id);
            exit(1);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->ncv, &s->nmu, &ts);
    }
    pthread_mutex_unlock(&s->nmu);
    if (ok) {
        nj->magic = NOTIFY_MAGIC;
        nj->w = w;
        nj->id = id;
        nj->count = 1 + below(&w->rng, 4);
        nj->kind = below(&w->rng, 8) == 0 ? 7 : 0;
        for (uint64_t i = 0; i < nj->count; i++)
            ok &= (nj->data[i] = malloc(s->max_elems * sizeof(float))) != NULL;
    }
    if (!ok) {
        breach(s, &s->r->submit_errors, "submitter %u: no host memory for a notify job", w->id);
        goto out_free;
    }
    pthread_mutex_init(&nj->r.mu, NULL);
    pthread_cond_init(&nj->r.cv, NULL);
    nj->r.count = nj->count;
    nj->which = fill_job(w, nj->data, t, nj->elems, nj->count, id, false);
    o.on_complete = on_complete;
    o.user = &nj->r;
    o.notify = 1;
    if (nj->kind == 7)
        o.deadline_ns = gr_now_ns() + (int64_t)below(&w->rng, 3000000);
    pthread_mutex_lock(&s->nmu);
    w->submitting = true;
    w->outstanding++;
    pthread_mutex_unlock(&s->nmu);
    st = gr_job_submit(s->rt, graph_of(s, nj->which), t, nj->count, &o, &nj->job, &err);
    pthread_mutex_lock(&s->nmu);
    w->submitting = false;
    w->seq++;
    if (st == GR_OK && early && !in_unclaimed(s, nj->job)) {
        /* Not reaped (reaps happen under nmu): the destroy takes it off the queue, or keeps
         * it from it; a reaper that meets it after this is a breach. */
        gr_job_destroy(nj->job);
    } else if (st == GR_OK) {
        early = false;
        s->live[s->n_live++] = nj;
    } else
        w->outstanding--;
    pthread_cond_broadcast(&s->ncv);
    pthread_mutex_unlock(&s->nmu);
    if (st != GR_OK) {
        refused(s, id, &err);
        pthread_cond_destroy(&nj->r.cv);
        pthread_mutex_destroy(&nj->r.mu);
        goto out_free;
    }
    pthread_mutex_lock(&s->mu);
    s->r->notify_jobs++;
    s->r->notify_destroyed_early += early;
    pthread_mutex_unlock(&s->mu);
    if (early) {
        wait_callback(s, &nj->r, id);
        notify_end(s, nj);
    }
    return;

out_free:
    for (uint64_t i = 0; nj != NULL && i < nj->count; i++)
        free(nj->data[i]);
    free(nj);
}

/* The end of a notify submitter: its jobs in flight must all be reaped. One complete yet
 * still in the table a second after it was first seen complete has been lost by the queue
 * (the reapers poll every 20 ms): a breach, and the submitter takes it back. */
static void notify_drain(submitter *w)
{
    shared *s = w->s;
    int64_t complete_since = 0;

    pthread_mutex_lock(&s->nmu);
    while (w->outstanding > 0) {
        struct timespec ts;
        notify_job *lost = NULL;
        bool all_complete = true, any = false;

        for (uint64_t i = 0; i < s->n_live; i++)
            if (s->live[i]->w == w) {
                any = true;
                all_complete &= gr_job_wait(s->live[i]->job, 0, NULL) == GR_OK;
                if (lost == NULL)
                    lost = s->live[i];
            }
        if (!any || !all_complete)
            complete_since = 0;
        else if (complete_since == 0)
            complete_since = gr_now_ns();
        else if (gr_now_ns() - complete_since > 1000000000) {
            take_live(s, lost->job);
            pthread_mutex_unlock(&s->nmu);
            breach(s, &s->r->reap_errors, "job %llu complete for a second but never reaped",
                   (unsigned long long)lost->id);
            gr_job_destroy(lost->job);
            notify_end(s, lost);
            pthread_mutex_lock(&s->nmu);
            complete_since = 0;
            continue;
        }
        if (gr_now_ns() > s->hang_at) {
            fprintf(stderr, "graphrun stress: HANG: notify jobs of submitter %u never "
                            "completed\n", w->id);
            exit(1);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->ncv, &s->nmu, &ts);
    }
    pthread_mutex_unlock(&s->nmu);
}

static void *submit_main(void *p)
{
    submitter *w = p;
    shared *s = w->s;
    float *data[MAX_TENSORS];
    gr_tensor t[MAX_TENSORS];
    uint64_t elems[MAX_TENSORS];
    static const gr_mem_kind kinds[3] = {GR_MEM_PINNED, GR_MEM_PAGEABLE, GR_MEM_REGISTERED};
    gr_mem_kind kind = s->c->mixed_memory ? kinds[w->id % 3] : s->c->memory;
    gr_tensor_set set;
    uint64_t jobs = 0;
    bool ok;

    memset(t, 0, sizeof(t));
    ok = gr_tensor_set_alloc(&set, MAX_TENSORS, s->max_elems, kind, 0) == GR_OK;
    for (int i = 0; ok && i < MAX_TENSORS; i++)
        data[i] = set.data[i];
    pthread_barrier_wait(&s->start);
    if (!ok) {
        breach(s, &s->r->submit_errors, "submitter %u: no host memory for its tensors", w->id);
        goto out;
    }
    /* A cache submitter makes four pairs however short the run (a slow build makes few):
     * each range is then registered and used again. */
    for (uint64_t n = 0; gr_now_ns() < s->stop_at || (w->cache && n < 4); n++, jobs++) {
        uint64_t id = ((uint64_t)w->id << 32) | n;

        if (w->notify)
            notify_job_submit(w, id);
        else if (w->cache)
            cache_pair(w, elems, id, n);
        else
            one_job(w, data, t, elems, id);
    }
    if (w->notify)
        notify_drain(w);
    pthread_mutex_lock(&s->mu);
    s->r->memory_jobs[(unsigned)kind % 3] += jobs;
    pthread_mutex_unlock(&s->mu);
    /* Every job over the ranges has ended: the cache must let them go. */
    for (int i = 0; w->cache && i < 3 * CACHE_RANGES; i++) {
        gr_status st = gr_host_forget(s->rt, w->big[i], CACHE_ELEMS * sizeof(float));

        if (st != GR_OK)
            breach(s, &s->r->cache_errors, "gr_host_forget of submitter %u's range %d: %s",
                   w->id, i, gr_status_str(st));
        pthread_mutex_lock(&s->mu);
        s->r->cache_forgets += st == GR_OK;
        pthread_mutex_unlock(&s->mu);
    }
out:
    gr_tensor_set_free(&set);
    return NULL;
}

/* Kernel registration churn -------------------------------------------------------------- */

static void churn_cpu(const gr_kernel_args *a, void *user)
{
    const churn_kernel *k = user;
    const float *x = a->in[0];
    float *out = a->out;

    for (uint64_t i = 0; i < a->n; i++)
        out[i] = affine_c_ref(x[i], k->c);
}

/* The kernel is freed: only once, and only after it was unregistered, its graph destroyed
 * and every job of it ended (the job holds the graph until it is freed, after its
 * callback). */
static void churn_destroy(void *user)
{
    churn_kernel *k = user;
    shared *s = k->s;

    if (k->magic != CHURN_MAGIC)
        return; /* not ours: nothing of it can be trusted */
    if (atomic_fetch_add(&k->destroys, 1) != 0)
        breach(s, &s->r->churn_errors, "kernel %s destroyed twice", k->name);
    if (!atomic_load(&k->unregistered) || !atomic_load(&k->graph_gone) ||
        atomic_load(&k->ended) != atomic_load(&k->jobs))
        breach(s, &s->r->churn_errors, "kernel %s destroyed while in use (unregistered %d, "
                                       "graph destroyed %d, %llu of %llu jobs ended)",
               k->name, (int)atomic_load(&k->unregistered), (int)atomic_load(&k->graph_gone),
               (unsigned long long)atomic_load(&k->ended),
               (unsigned long long)atomic_load(&k->jobs));
}

typedef struct churn_job {
    record r;
    churn_kernel *k;
} churn_job;

static void churn_complete(gr_job *job, gr_status st, void *user)
{
    churn_job *cj = user;

    atomic_fetch_add(&cj->k->ended, 1); /* before the record wakes the churn thread */
    on_complete(job, st, &cj->r);
}

/* Register kernel `n` of the churn (x * 0.5 + c, c its own, a name of four the churn cycles
 * through so that a name is registered again once unregistered), build a graph of it, run
 * one to three jobs of it, and unregister it and destroy the graph while they run (or,
 * one time in three, after they ended), in either order. */
static void churn_once(submitter *w, float **data, uint64_t n)
{
    static const char fmt[] = "buffer x\nh2d l: in0 -> x\nkernel k: %s(x) -> x\n"
                              "d2h s: x -> out0\nl -> k -> s\n";
    shared *s = w->s;
    churn_kernel *k = calloc(1, sizeof(*k));
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    churn_job cj[3];
    gr_job *job[3] = {NULL, NULL, NULL};
    gr_tensor t[MAX_TENSORS];
    uint64_t elems[MAX_TENSORS], per = 4, jobs = 1 + below(&w->rng, 3);
    uint64_t order = below(&w->rng, 3), id = ((uint64_t)w->id << 32) | n;
    gr_error_info err;
    gr_graph *g = NULL, *again = NULL;
    char spec[256];

    if (k == NULL) {
        breach(s, &s->r->churn_errors, "no memory for a kernel");
        return;
    }
    k->magic = CHURN_MAGIC;
    k->s = s;
    k->c = 0.125f * (float)(1 + n % 8);
    snprintf(k->name, sizeof(k->name), "stress_churn_%u_%llu", w->id,
             (unsigned long long)(n % 4));
    snprintf(k->source, sizeof(k->source),
             "#include \"graphrun_kernel.h\"\n"
             "extern \"C\" __global__ void stress_churn(gr_kernel_args a)\n"
             "{\n"
             "    GR_FOR_EACH(i, a)\n"
             "    GR_OUT(a, float)[i] = __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], 0.5f), "
             "%.6ff);\n"
             "}\n",
             (double)k->c);
    d.name = k->name;
    d.doc = "graphrun stress: registered, used and unregistered while jobs run";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = churn_cpu;
    d.cuda_kind = GR_CUDA_SOURCE;
    d.cuda = k->source;
    d.cuda_name = "stress_churn";
    d.user = k;
    d.destroy = churn_destroy;
    if (gr_kernel_register(&d, &err) != GR_OK) {
        breach(s, &s->r->churn_errors, "register %s: %s", k->name, err.message);
        free(k);
        return;
    }
    pthread_mutex_lock(&s->mu);
    k->next = s->churned; /* checked at the end: destroyed exactly once */
    s->churned = k;
    s->r->churn_kernels++;
    pthread_mutex_unlock(&s->mu);
    snprintf(spec, sizeof(spec), fmt, k->name);
    if (gr_graph_parse(spec, strlen(spec), "stress_churn", &g, &err) != GR_OK) {
        breach(s, &s->r->churn_errors, "graph of %s: %s", k->name, err.message);
        jobs = 0;
    }
    for (uint64_t j = 0; j < jobs; j++) {
        gr_job_options o = GR_JOB_OPTIONS_INIT;
        gr_job **out = below(&w->rng, 3) == 0 ? NULL : &job[j]; /* some detached */

        memset(&cj[j], 0, sizeof(cj[j]));
        pthread_mutex_init(&cj[j].r.mu, NULL);
        pthread_cond_init(&cj[j].r.cv, NULL);
        cj[j].r.count = 1 + below(&w->rng, per);
        cj[j].k = k;
        for (uint64_t i = 0; i < cj[j].r.count; i++) {
            elems[j * per + i] = 1 + below(&w->rng, s->max_elems);
            gr_workload_fill(data[j * per + i], 0, elems[j * per + i], id + j, i);
            memset(&t[i], 0, sizeof(t[i]));
            t[i].in[0] = t[i].out[0] = data[j * per + i];
            t[i].elems = elems[j * per + i];
        }
        o.on_complete = churn_complete;
        o.user = &cj[j];
        atomic_fetch_add(&k->jobs, 1);
        if (gr_job_submit(s->rt, g, t, cj[j].r.count, &o, out, &err) != GR_OK) {
            atomic_fetch_sub(&k->jobs, 1);
            refused(s, id + j, &err);
            atomic_store(&cj[j].r.calls, -1); /* nothing to wait for */
        }
    }
    if (order == 2) /* after the jobs */
        for (uint64_t j = 0; j < jobs; j++)
            if (atomic_load(&cj[j].r.calls) >= 0)
                wait_callback(s, &cj[j].r, id + j);
    if (order == 0) {
        atomic_store(&k->graph_gone, true); /* before: the destroy may run inside */
        gr_graph_destroy(g);
    }
    atomic_store(&k->unregistered, true);
    if (gr_kernel_unregister(k->name, &err) != GR_OK)
        breach(s, &s->r->churn_errors, "unregister %s: %s", k->name, err.message);
    /* The name is gone: a new graph cannot name it. */
    if (gr_graph_parse(spec, strlen(spec), "stress_churn", &again, &err) == GR_OK) {
        breach(s, &s->r->churn_errors, "a graph named %s after it was unregistered", k->name);
        gr_graph_destroy(again);
    }
    if (order != 0) {
        atomic_store(&k->graph_gone, true);
        gr_graph_destroy(g);
    }
    for (uint64_t j = 0; j < jobs; j++) {
        if (atomic_load(&cj[j].r.calls) < 0)
            continue;
        wait_callback(s, &cj[j].r, id + j);
        gr_job_destroy(job[j]);
        check_job(s, &cj[j].r, &data[j * per], &elems[j * per], cj[j].r.count, id + j, G_CHURN,
                  k->c, 0);
        pthread_mutex_lock(&s->mu);
        s->r->churn_jobs++;
        pthread_mutex_unlock(&s->mu);
    }
    for (uint64_t j = 0; j < jobs; j++) {
        pthread_cond_destroy(&cj[j].r.cv);
        pthread_mutex_destroy(&cj[j].r.mu);
    }
}

static void *churn_main(void *p)
{
    submitter *w = p;
    shared *s = w->s;
    gr_tensor_set set;
    float *data[MAX_TENSORS];
    bool ok = gr_tensor_set_alloc(&set, MAX_TENSORS, s->max_elems, GR_MEM_PAGEABLE, 0) == GR_OK;

    for (int i = 0; ok && i < MAX_TENSORS; i++)
        data[i] = set.data[i];
    pthread_barrier_wait(&s->start);
    if (!ok) {
        breach(s, &s->r->churn_errors, "the churn: no host memory for its tensors");
        return NULL;
    }
    for (uint64_t n = 0; n == 0 || gr_now_ns() < s->stop_at; n++)
        churn_once(w, data, n);
    gr_tensor_set_free(&set);
    return NULL;
}

/* The registration cache's pins on the host backend (gr__host_cache_emulate) --------------- */

static shared *emulating; /* the run whose cache these pins serve: one at a time */

static gr_status emulated_pin(void *p, uint64_t bytes)
{
    shared *s = emulating;
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    bool overlap = false;

    pthread_mutex_lock(&s->pin_mu);
    for (unsigned i = 0; i < s->n_pinned; i++)
        overlap |= lo < s->pinned[i][1] && s->pinned[i][0] < hi;
    if (!overlap && s->n_pinned < 64) {
        s->pinned[s->n_pinned][0] = lo;
        s->pinned[s->n_pinned++][1] = hi;
    }
    pthread_mutex_unlock(&s->pin_mu);
    if (overlap)
        breach(s, &s->r->cache_errors, "the cache pinned %p (%llu bytes) over a range it "
                                       "had pinned", p, (unsigned long long)bytes);
    return GR_OK;
}

static gr_status emulated_unpin(void *p)
{
    shared *s = emulating;
    bool found = false;

    pthread_mutex_lock(&s->pin_mu);
    for (unsigned i = 0; i < s->n_pinned && !found; i++)
        if (s->pinned[i][0] == (uintptr_t)p) {
            found = true;
            s->pinned[i][0] = s->pinned[--s->n_pinned][0];
            s->pinned[i][1] = s->pinned[s->n_pinned][1];
        }
    pthread_mutex_unlock(&s->pin_mu);
    if (!found)
        breach(s, &s->r->cache_errors, "the cache unpinned %p, which it had not pinned", p);
    return GR_OK;
}

/* The cache submitters' ranges are what a driver would call pageable (to be registered);
 * any other memory is as the host backend says, ready (it copies with memcpy whatever the
 * memory), so that the rest of the stress runs as without the cache. */
static bool emulated_dma_ready(const void *p)
{
    const shared *s = emulating;
    uintptr_t a = (uintptr_t)p;

    for (unsigned i = 0; i < s->n_w; i++)
        for (int k = 0; s->w[i].cache && k < 3 * CACHE_RANGES; k++)
            if (a >= (uintptr_t)s->w[i].big[k] &&
                a < (uintptr_t)s->w[i].big[k] + CACHE_ELEMS * sizeof(float))
                return false;
    return true;
}

static const gr_host_cache_ops emulated_ops = {emulated_pin, emulated_unpin,
                                               emulated_dma_ready};

/* The process's threads (0 where /proc cannot say). */
static long thread_count(void)
{
    char line[128];
    long n = 0;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Threads: %ld", &n) == 1)
            break;
    fclose(f);
    return n;
}

static void *monitor_main(void *p)
{
    shared *s = p;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats st;
    int64_t next_rss = 0, quarter = s->stop_at - (int64_t)(s->c->duration_s * 0.75e9);

    gr_runtime_info_get(s->rt, &info);
    while (!atomic_load(&s->monitor_stop)) {
        int64_t now = gr_now_ns();

        if (now >= next_rss) { /* every 50 ms: reading /proc is not free */
            uint64_t rss = gr_cli_rss_bytes();

            gr_stats hs = GR_STATS_INIT;

            if (s->cache_capacity != 0 && gr_runtime_stats_get(s->rt, 0, &hs) == GR_OK &&
                hs.host_cache_bytes > s->cache_capacity)
                breach(s, &s->r->cache_errors, "the cache holds %llu bytes, capacity %llu",
                       (unsigned long long)hs.host_cache_bytes,
                       (unsigned long long)s->cache_capacity);
            pthread_mutex_lock(&s->mu);
            if (rss > s->r->rss_peak)
                s->r->rss_peak = rss;
            if (s->r->rss_quarter == 0 && now >= quarter)
                s->r->rss_quarter = rss;
            pthread_mutex_unlock(&s->mu);
            next_rss = now + 50000000;
        }
        for (uint32_t d = 0; d < info.device_count; d++) {
            gr_runtime_device_stats(s->rt, d, &st);
            if (st.budget_in_use > st.budget_bytes)
                breach(s, &s->r->budget_violations, "device %u: %llu bytes in use, budget %llu",
                       d, (unsigned long long)st.budget_in_use,
                       (unsigned long long)st.budget_bytes);
            pthread_mutex_lock(&s->mu);
            s->r->budget_samples++;
            pthread_mutex_unlock(&s->mu);
        }
        sleep_ns(100000);
    }
    return NULL;
}

uint64_t gr_stress_breaches(const gr_stress_report *r)
{
    return r->budget_violations + r->wrong_outputs + r->written_unfinished +
           r->callback_errors + r->count_errors + r->anomalies + r->submit_errors +
           r->leftover + r->wrong_status + r->threads_left + r->rss_growth + r->reap_errors +
           r->fd_errors + r->churn_errors + r->cache_errors;
}

gr_status gr_stress_run(const gr_stress_config *c, gr_stress_report *r, gr_error_info *err)
{
    unsigned n = c->threads;
    submitter *w = calloc(n + 1, sizeof(*w)); /* the last: the kernel churn */
    pthread_t *th = calloc(n + 1, sizeof(*th)), mon, reapers[REAPERS];
    unsigned n_reapers = 0;
    bool churn = false;
    gr_config cfg = c->cfg;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    uint64_t footprint;
    gr_backend chosen;
    gr_status st;
    shared s;

    memset(r, 0, sizeof(*r));
    memset(&s, 0, sizeof(s));
    if (c->faults != NULL)
        gr_testing_set_fault_plan(&cfg, c->faults);
    r->threads_before = thread_count();
    r->gr_threads_before = (long)gr__threads_live();
    s.c = c;
    s.r = r;
    s.w = w;
    s.n_w = n;
    s.completion_fd = -1;
    pthread_mutex_init(&s.mu, NULL);
    pthread_mutex_init(&s.nmu, NULL);
    pthread_cond_init(&s.ncv, NULL);
    pthread_mutex_init(&s.pin_mu, NULL);
    s.cap_live = (uint64_t)n * NOTIFY_OUTSTANDING;
    s.live = calloc(s.cap_live, sizeof(*s.live));
    s.unclaimed = calloc(REAPERS * REAP_BATCH, sizeof(*s.unclaimed));
    if (w == NULL || th == NULL || s.live == NULL || s.unclaimed == NULL) {
        st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
        goto out;
    }
    if ((st = gr_backend_probe(cfg.backend, NULL, &chosen, err)) != GR_OK)
        goto out;
    s.max_elems = c->max_elems ? c->max_elems : chosen == GR_BACKEND_CUDA ? 1u << 20 : 16384;
    if ((st = gr_graph_create_seed(&s.g)) != GR_OK)
        goto out;
    gr_graph_footprint(s.g, s.max_elems, &footprint);
    cfg.budget_bytes = (c->budget_tensors ? c->budget_tensors : 3) * footprint;
    if (chosen == GR_BACKEND_CUDA && cfg.budget_bytes < (2u << 20))
        cfg.budget_bytes = 2u << 20; /* CUDA's allocation granule */
    for (unsigned i = 0; i < n; i++) {
        w[i] = (submitter){.s = &s, .id = i, .rng = c->seed * 104729 + i};
        w[i].notify = n >= 2 && i % NOTIFY_EVERY == 1;
        w[i].cache = i % CACHE_EVERY == 3;
        if (w[i].cache)
            cfg.host_cache_bytes = s.cache_capacity = CACHE_CAPACITY;
        /* The cache submitter's ranges: pageable, whole pages, apart; made before any
         * thread starts, as the emulated pins read them. */
        for (int k = 0; w[i].cache && k < 3 * CACHE_RANGES; k++)
            if (posix_memalign((void **)&w[i].big[k], 4096, CACHE_ELEMS * sizeof(float)) != 0) {
                st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
                goto out;
            }
    }
    /* On the host backend the cache's pins are emulated (and checked) here. */
    s.cache_emulated = s.cache_capacity != 0 && chosen == GR_BACKEND_HOST;
    if (s.cache_emulated) {
        emulating = &s;
        gr__host_cache_emulate(&emulated_ops);
    }
    st = gr_runtime_create(&cfg, &s.rt, err);
    if (s.cache_emulated)
        gr__host_cache_emulate(NULL); /* read at create */
    if (st != GR_OK)
        goto out;
    if ((st = gr_runtime_completion_fd(s.rt, &s.completion_fd)) != GR_OK) {
        gr__error_set(err, st, GR_NO_INDEX, NULL, "no completion descriptor");
        goto out;
    }
    gr_runtime_info_get(s.rt, &info);
    r->budget_bytes = info.budget_bytes;
    s.user = user_graph(s.rt, r->user_skipped, sizeof(r->user_skipped));
    if ((st = gr_graph_parse(half_spec, strlen(half_spec), "stress_half", &s.half, err)) !=
            GR_OK ||
        (st = gr_graph_parse(expr_spec, strlen(expr_spec), "stress_expr", &s.expr, err)) !=
            GR_OK)
        goto out;
    /* The churn registers kernels of the user kernel's kind: where that cannot run, neither
     * can they (the report says why). */
    churn = s.user != NULL;
    w[n] = (submitter){.s = &s, .id = n, .rng = c->seed * 104729 + n};
    pthread_barrier_init(&s.start, NULL, n + 1 + churn);
    r->rss_start = r->rss_peak = gr_cli_rss_bytes();
    for (unsigned i = 0; i < n; i++)
        pthread_create(&th[i], NULL, submit_main, &w[i]);
    if (churn)
        pthread_create(&th[n], NULL, churn_main, &w[n]);
    s.stop_at = gr_now_ns() + (int64_t)(c->duration_s * 1e9);
    s.hang_at = s.stop_at + HANG_SLACK_S * 1000000000ll;
    pthread_create(&mon, NULL, monitor_main, &s);
    for (unsigned i = 0; i < n && n_reapers < REAPERS; i++)
        if (w[i].notify)
            pthread_create(&reapers[n_reapers++], NULL, reap_main, &s);
    pthread_barrier_wait(&s.start);
    for (unsigned i = 0; i < n + churn; i++)
        pthread_join(th[i], NULL);
    atomic_store(&s.reapers_stop, true);
    for (unsigned i = 0; i < n_reapers; i++)
        pthread_join(reapers[i], NULL);
    atomic_store(&s.monitor_stop, true);
    pthread_join(mon, NULL);
    pthread_barrier_destroy(&s.start);
    {
        /* Every notify job was reaped or destroyed: the queue is empty, its descriptor not
         * readable. */
        struct pollfd pf = {.fd = s.completion_fd, .events = POLLIN};
        gr_job *left[1];
        size_t n_left = 0;

        if (poll(&pf, 1, 0) != 0 || gr_runtime_reap(s.rt, left, 1, &n_left) != GR_OK ||
            n_left != 0)
            breach(&s, &r->reap_errors, "the completion queue not empty at the end (%zu "
                                        "jobs, descriptor %s)",
                   n_left, pf.revents & POLLIN ? "readable" : "not readable");
        if (r->notify_reaped + r->notify_destroyed_early != r->notify_jobs)
            breach(&s, &r->reap_errors, "%llu notify jobs, %llu reaped, %llu destroyed early",
                   (unsigned long long)r->notify_jobs, (unsigned long long)r->notify_reaped,
                   (unsigned long long)r->notify_destroyed_early);
    }
    if (s.cache_capacity != 0) {
        gr_stats hs = GR_STATS_INIT;

        gr_runtime_stats_get(s.rt, 0, &hs);
        r->cache_registrations = hs.host_cache_registrations;
        r->cache_hits = hs.host_cache_hits;
        r->cache_evictions = hs.host_cache_evictions;
        r->cache_failures = hs.host_cache_failures;
        if (s.cache_emulated && hs.host_cache_failures != 0) /* emulated pins never fail */
            breach(&s, &r->cache_errors, "%llu registrations failed",
                   (unsigned long long)hs.host_cache_failures);
    }
    r->rss_end = gr_cli_rss_bytes();
    if (r->rss_end > r->rss_peak)
        r->rss_peak = r->rss_end;
    if (c->duration_s >= 60 && r->rss_quarter > 0 &&
        r->rss_end > r->rss_quarter +
                         (r->rss_quarter / 4 > (64u << 20) ? r->rss_quarter / 4 : 64u << 20))
        breach(&s, &r->rss_growth, "host memory grew from %llu bytes at a quarter of the run "
                                   "to %llu at the end",
               (unsigned long long)r->rss_quarter, (unsigned long long)r->rss_end);
    for (uint32_t d = 0; d < info.device_count; d++) {
        gr_device_stats ds;

        gr_runtime_device_stats(s.rt, d, &ds);
        if (ds.budget_in_use != 0)
            breach(&s, &r->leftover, "device %u: %llu bytes still in use at the end", d,
                   (unsigned long long)ds.budget_in_use);
        if (ds.budget_peak > ds.budget_bytes)
            breach(&s, &r->budget_violations, "device %u: peak %llu above the budget %llu", d,
                   (unsigned long long)ds.budget_peak, (unsigned long long)ds.budget_bytes);
        if (ds.budget_peak > r->peak_budget)
            r->peak_budget = ds.budget_peak;
    }
    for (int i = 0; i < GR_FAULT_SITE_COUNT && i < 16; i++)
        r->injected[i] = gr__fault_injected((gr_fault_site)i);
    st = GR_OK;
out:
    gr_runtime_destroy(s.rt);
    r->threads_after = thread_count();
    r->gr_threads_after = (long)gr__threads_live();
    /* Destroy joins every thread the runtime started, on every backend (runtime/base/fault.h:
     * each is counted from before it is created to its last instruction; the CUDA
     * driver's, NVRTC's and tsan's threads, which outlive a runtime, are not counted). */
    if (st == GR_OK && r->gr_threads_after > r->gr_threads_before)
        breach(&s, &r->threads_left, "%ld of graphrun's threads after destroy, %ld before create",
               r->gr_threads_after, r->gr_threads_before);
    /* Destroy unregistered everything the cache had pinned. */
    if (st == GR_OK && s.cache_emulated && s.n_pinned != 0)
        breach(&s, &r->cache_errors, "%u ranges left pinned after destroy", s.n_pinned);
    r->cache_emulated = s.cache_emulated;
    emulating = NULL;
    gr_graph_destroy(s.g);
    gr_graph_destroy(s.user);
    gr_graph_destroy(s.half);
    gr_graph_destroy(s.expr);
    /* Every job and graph is gone: each churned kernel was destroyed, exactly once. */
    while (s.churned != NULL) {
        churn_kernel *k = s.churned;
        int destroys = atomic_load(&k->destroys);

        s.churned = k->next;
        r->churn_destroys += destroys;
        if (destroys != 1)
            breach(&s, &r->churn_errors, "kernel %s destroyed %d times", k->name, destroys);
        else
            free(k); /* else the registry may still call it */
    }
    for (unsigned i = 0; w != NULL && i < n; i++)
        for (int k = 0; k < 3 * CACHE_RANGES; k++)
            free(w[i].big[k]);
    free(s.live);
    free(s.unclaimed);
    pthread_mutex_destroy(&s.pin_mu);
    pthread_cond_destroy(&s.ncv);
    pthread_mutex_destroy(&s.nmu);
    pthread_mutex_destroy(&s.mu);
    free(w);
    free(th);
    return st;
}

void gr_stress_print(const gr_stress_config *c, const gr_stress_report *r)
{
    printf("stress: %u submitters, %u workers per device, %s backend, budget %llu bytes: "
           "%llu jobs, %llu indices done, %llu failed, %llu canceled; peak budget %llu; "
           "%llu budget samples\n",
           c->threads, c->cfg.workers_per_device, gr_backend_name(c->cfg.backend),
           (unsigned long long)r->budget_bytes, (unsigned long long)r->jobs,
           (unsigned long long)r->done, (unsigned long long)r->failed,
           (unsigned long long)r->canceled, (unsigned long long)r->peak_budget,
           (unsigned long long)r->budget_samples);
    if (r->user_skipped[0])
        printf("user kernel: not run (%s)\n", r->user_skipped);
    else
        printf("user kernel: %llu of the %llu jobs ran the registered stress_affine kernel\n",
               (unsigned long long)r->user_jobs, (unsigned long long)r->jobs);
    printf("float16: %llu of the %llu jobs ran the float16 graph; expression: %llu ran the seed "
           "as an expression kernel\n",
           (unsigned long long)r->half_jobs, (unsigned long long)r->jobs,
           (unsigned long long)r->expr_jobs);
    printf("completion queue: %llu notify jobs, %llu reaped, %llu destroyed before they could "
           "be; %llu waits on a job's completion descriptor\n",
           (unsigned long long)r->notify_jobs, (unsigned long long)r->notify_reaped,
           (unsigned long long)r->notify_destroyed_early, (unsigned long long)r->fd_waits);
    printf("kernel churn: %llu kernels registered and unregistered, %llu jobs of them, %llu "
           "destroy callbacks\n",
           (unsigned long long)r->churn_kernels, (unsigned long long)r->churn_jobs,
           (unsigned long long)r->churn_destroys);
    printf("registration cache%s: %llu jobs over reused ranges, %llu registrations, %llu hits, "
           "%llu evictions, %llu failures, %llu forgets\n",
           r->cache_emulated ? " (pins emulated)" : "", (unsigned long long)r->cache_jobs,
           (unsigned long long)r->cache_registrations, (unsigned long long)r->cache_hits,
           (unsigned long long)r->cache_evictions, (unsigned long long)r->cache_failures,
           (unsigned long long)r->cache_forgets);
    printf("memory: %llu jobs on pinned, %llu on pageable, %llu on registered tensors\n",
           (unsigned long long)r->memory_jobs[GR_MEM_PINNED],
           (unsigned long long)r->memory_jobs[GR_MEM_PAGEABLE],
           (unsigned long long)r->memory_jobs[GR_MEM_REGISTERED]);
    if (c->faults != NULL) {
        uint64_t total = 0;

        printf("faults: plan %s; injected:", c->faults);
        for (int i = 0; i < GR_FAULT_SITE_COUNT && i < 16; i++) {
            total += r->injected[i];
            if (r->injected[i] != 0)
                printf(" %s %llu", gr__fault_site_name((gr_fault_site)i),
                       (unsigned long long)r->injected[i]);
        }
        printf("%s (%llu in all); %llu indices failed with an injected status, %llu submits "
               "refused for one\n",
               total == 0 ? " none" : "", (unsigned long long)total,
               (unsigned long long)r->fault_failed, (unsigned long long)r->fault_refused);
    }
    printf("host memory: resident %.1f MiB after create, %.1f MiB at a quarter of the run, "
           "peak %.1f MiB, %.1f MiB at the end; threads %ld before create, %ld after "
           "destroy (graphrun's: %ld, %ld)\n",
           (double)r->rss_start / 1048576, (double)r->rss_quarter / 1048576,
           (double)r->rss_peak / 1048576, (double)r->rss_end / 1048576, r->threads_before,
           r->threads_after, r->gr_threads_before, r->gr_threads_after);
    printf("breaches: %llu budget, %llu wrong outputs, %llu written though unfinished, %llu "
           "callback, %llu counts, %llu double ends, %llu refused submits, %llu left in use, "
           "%llu wrong statuses, %llu threads left, %llu host memory growth, %llu reaping, "
           "%llu completion descriptor, %llu kernel churn, %llu registration cache%s%s\n",
           (unsigned long long)r->budget_violations, (unsigned long long)r->wrong_outputs,
           (unsigned long long)r->written_unfinished, (unsigned long long)r->callback_errors,
           (unsigned long long)r->count_errors, (unsigned long long)r->anomalies,
           (unsigned long long)r->submit_errors, (unsigned long long)r->leftover,
           (unsigned long long)r->wrong_status, (unsigned long long)r->threads_left,
           (unsigned long long)r->rss_growth, (unsigned long long)r->reap_errors,
           (unsigned long long)r->fd_errors, (unsigned long long)r->churn_errors,
           (unsigned long long)r->cache_errors, r->first_breach[0] ? "; first: " : "",
           r->first_breach);
}

void gr_stress_fault_plan(uint64_t one_in, uint64_t seed, char *plan, size_t size)
{
    snprintf(plan, size, "seed=%llu,arena:~%llu,graph_instantiate:~%llu,graph_update:~%llu,"
             "graph_launch:~%llu",
             (unsigned long long)seed, (unsigned long long)one_in, (unsigned long long)one_in,
             (unsigned long long)one_in, (unsigned long long)one_in);
}

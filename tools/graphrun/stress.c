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
 * With a fault plan (c->faults) the runtime arms it at create and it stays armed to the
 * end: a failed index must then have failed with a status the faulty sites produce
 * (GR_ERR_OUT_OF_MEMORY: an arena placement or an allocation; GR_ERR_CUDA: a graph
 * instantiate, launch or event), or with GR_ERR_TIMEOUT in a job given a deadline; every
 * other check holds as without faults. Without a plan a failed index is a deadline's.
 */
#include "tools/graphrun/stress.h"

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
#include "runtime/job.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/workload.h"

#define MAX_TENSORS 16

#define HANG_SLACK_S 60

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
} shared;

typedef struct submitter {
    shared *s;
    unsigned id;
    uint64_t rng;
} submitter;

static const char affine_source[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void stress_affine(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a)\n"
    "    GR_OUT(a, float)[i] = __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], 0.5f), 0.25f);\n"
    "}\n";

static float affine_ref(float x)
{
    volatile float half = x * 0.5f; /* two roundings, as the CUDA version */
    return half + 0.25f;
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
                             bool partial, uint64_t *first_bad)
{
    uint64_t bad = 0;

    *first_bad = UINT64_MAX;
    for (uint64_t j = 0; j < n; j++) {
        float in = gr_workload_value(id, index, j), done = affine_ref(in);

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

static void one_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems, uint64_t id)
{
    shared *s = w->s;
    gr_stress_report *rep = s->r;
    uint64_t count = 1 + below(&w->rng, MAX_TENSORS);
    uint64_t kind = below(&w->rng, 10), which = below(&w->rng, 4);
    bool user = s->user != NULL && which == 0, half = which == 1, expr = which == 2;
    gr_graph *g = user ? s->user : half ? s->half : expr ? s->expr : s->g;
    uint64_t done = 0, failed = 0, canceled = 0, fault_failed = 0;
    bool faults = s->c->faults != NULL;
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_error_info err;
    gr_job *job = NULL;
    record r;

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.count = count;
    for (uint64_t i = 0; i < count; i++) {
        elems[i] = below(&w->rng, 4) == 0 ? 1 + below(&w->rng, 16)
                                          : 1 + below(&w->rng, s->max_elems);
        if (half)
            fill_half((uint16_t *)data[i], elems[i], id, i);
        else
            gr_workload_fill(data[i], 0, elems[i], id, i);
        t[i].in[0] = t[i].out[0] = data[i];
        t[i].elems = elems[i];
    }
    o.on_complete = on_complete;
    o.user = &r;
    if (kind == 7)
        o.deadline_ns = gr_now_ns() + (int64_t)below(&w->rng, 3000000);
    if (gr_job_submit(s->rt, g, t, count, &o, kind == 8 ? NULL : &job, &err) != GR_OK) {
        if (faults && err.status == GR_ERR_OUT_OF_MEMORY) { /* an injected "alloc" */
            pthread_mutex_lock(&s->mu);
            rep->fault_refused++;
            pthread_mutex_unlock(&s->mu);
            goto out;
        }
        breach(s, &rep->submit_errors, "job %llu: submit refused: %s", (unsigned long long)id,
               err.message);
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
    if (job != NULL && below(&w->rng, 2) == 0) {
        gr_status result;
        if (gr_job_wait(job, (int64_t)(s->hang_at - gr_now_ns()), &result) != GR_OK) {
            fprintf(stderr, "graphrun stress: HANG: gr_job_wait on job %llu\n",
                    (unsigned long long)id);
            exit(1);
        }
        if (atomic_load(&r.calls) != 1) /* the callback returns before the wait does */
            breach(s, &rep->callback_errors, "job %llu: wait returned before the callback",
                   (unsigned long long)id);
    }
    wait_callback(s, &r, id);
    gr_job_destroy(job);

    if (atomic_load(&r.calls) != 1)
        breach(s, &rep->callback_errors, "job %llu: callback ran %d times",
               (unsigned long long)id, atomic_load(&r.calls));
    if (r.anomalies != 0)
        breach(s, &rep->anomalies, "job %llu: %llu indices ended twice", (unsigned long long)id,
               (unsigned long long)r.anomalies);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t where, bad;

        if (r.state[i] == GR_INDEX_DONE) {
            done++;
            bad = user   ? check_affine(data[i], elems[i], id, i, false, &where)
                  : half ? check_half((uint16_t *)data[i], elems[i], id, i, false, &where)
                         : gr_workload_check_seed(data[i], 0, elems[i], id, i, &where);
            if (bad)
                breach(s, &rep->wrong_outputs, "job %llu index %llu: %llu wrong elements, "
                                               "first %llu",
                       (unsigned long long)id, (unsigned long long)i, (unsigned long long)bad,
                       (unsigned long long)where);
            continue;
        }
        if (r.state[i] == GR_INDEX_FAILED) {
            gr_status why = r.status[i];

            failed++;
            if (faults && (why == GR_ERR_OUT_OF_MEMORY || why == GR_ERR_CUDA))
                fault_failed++;
            else if (!(kind == 7 && why == GR_ERR_TIMEOUT))
                breach(s, &rep->wrong_status, "job %llu index %llu failed with %s (%s)",
                       (unsigned long long)id, (unsigned long long)i, gr_status_str(why),
                       kind == 7 ? "a deadline job" : faults ? "not an injected status"
                                                          : "no deadline, no fault plan");
        } else if (r.state[i] == GR_INDEX_CANCELED)
            canceled++;
        else
            breach(s, &rep->count_errors, "job %llu index %llu: state %d is not final",
                   (unsigned long long)id, (unsigned long long)i, r.state[i]);
        /* Untouched, except that a tensor split into chunks may have had some chunks
         * written before it was stopped: each element is its input or its result. */
        bad = user   ? check_affine(data[i], elems[i], id, i, true, &where)
              : half ? check_half((uint16_t *)data[i], elems[i], id, i, true, &where)
                     : gr_workload_check_partial(data[i], 0, elems[i], id, i, &where);
        if (bad)
            breach(s, &rep->written_unfinished,
                   "job %llu index %llu (state %d): %llu elements are neither input nor "
                   "result, first %llu",
                   (unsigned long long)id, (unsigned long long)i, r.state[i],
                   (unsigned long long)bad, (unsigned long long)where);
    }
    if (r.progress.total != count ||
        r.progress.done + r.progress.failed + r.progress.canceled != count ||
        r.progress.queued + r.progress.in_flight != 0 ||
        ((kind < 6 || kind == 8 || kind == 9) && r.progress.done + fault_failed != count))
        breach(s, &rep->count_errors, "job %llu: progress %llu done %llu failed %llu canceled "
                                      "of %llu",
               (unsigned long long)id, (unsigned long long)r.progress.done,
               (unsigned long long)r.progress.failed, (unsigned long long)r.progress.canceled,
               (unsigned long long)count);
    pthread_mutex_lock(&s->mu);
    rep->jobs++;
    rep->expr_jobs += expr;
    rep->fault_failed += fault_failed;
    rep->user_jobs += user;
    rep->half_jobs += half;
    rep->done += done;
    rep->failed += failed;
    rep->canceled += canceled;
    pthread_mutex_unlock(&s->mu);
out:
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
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
        return NULL;
    }
    for (uint64_t n = 0; gr_now_ns() < s->stop_at; n++, jobs++)
        one_job(w, data, t, elems, ((uint64_t)w->id << 32) | n);
    pthread_mutex_lock(&s->mu);
    s->r->memory_jobs[(unsigned)kind % 3] += jobs;
    pthread_mutex_unlock(&s->mu);
    gr_tensor_set_free(&set);
    return NULL;
}

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
           r->leftover + r->wrong_status + r->threads_left + r->rss_growth;
}

gr_status gr_stress_run(const gr_stress_config *c, gr_stress_report *r, gr_error_info *err)
{
    unsigned n = c->threads;
    submitter *w = calloc(n, sizeof(*w));
    pthread_t *th = calloc(n, sizeof(*th)), mon;
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
    pthread_mutex_init(&s.mu, NULL);
    if (w == NULL || th == NULL) {
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
    if ((st = gr_runtime_create(&cfg, &s.rt, err)) != GR_OK)
        goto out;
    gr_runtime_info_get(s.rt, &info);
    r->budget_bytes = info.budget_bytes;
    s.user = user_graph(s.rt, r->user_skipped, sizeof(r->user_skipped));
    if ((st = gr_graph_parse(half_spec, strlen(half_spec), "stress_half", &s.half, err)) !=
            GR_OK ||
        (st = gr_graph_parse(expr_spec, strlen(expr_spec), "stress_expr", &s.expr, err)) !=
            GR_OK)
        goto out;
    pthread_barrier_init(&s.start, NULL, n + 1);
    r->rss_start = r->rss_peak = gr_cli_rss_bytes();
    for (unsigned i = 0; i < n; i++) {
        w[i] = (submitter){&s, i, c->seed * 104729 + i};
        pthread_create(&th[i], NULL, submit_main, &w[i]);
    }
    s.stop_at = gr_now_ns() + (int64_t)(c->duration_s * 1e9);
    s.hang_at = s.stop_at + HANG_SLACK_S * 1000000000ll;
    pthread_create(&mon, NULL, monitor_main, &s);
    pthread_barrier_wait(&s.start);
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    atomic_store(&s.monitor_stop, true);
    pthread_join(mon, NULL);
    pthread_barrier_destroy(&s.start);
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
    gr_graph_destroy(s.g);
    gr_graph_destroy(s.user);
    gr_graph_destroy(s.half);
    gr_graph_destroy(s.expr);
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
           "%llu wrong statuses, %llu threads left, %llu host memory growth%s%s\n",
           (unsigned long long)r->budget_violations, (unsigned long long)r->wrong_outputs,
           (unsigned long long)r->written_unfinished, (unsigned long long)r->callback_errors,
           (unsigned long long)r->count_errors, (unsigned long long)r->anomalies,
           (unsigned long long)r->submit_errors, (unsigned long long)r->leftover,
           (unsigned long long)r->wrong_status, (unsigned long long)r->threads_left,
           (unsigned long long)r->rss_growth, r->first_breach[0] ? "; first: " : "",
           r->first_breach);
}

void gr_stress_fault_plan(uint64_t one_in, uint64_t seed, char *plan, size_t size)
{
    snprintf(plan, size, "seed=%llu,arena:~%llu,graph_instantiate:~%llu,graph_update:~%llu,"
             "graph_launch:~%llu",
             (unsigned long long)seed, (unsigned long long)one_in, (unsigned long long)one_in,
             (unsigned long long)one_in, (unsigned long long)one_in);
}

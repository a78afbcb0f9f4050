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
 * host backend the process has no more threads than before create. The graphs, each job's
 * inputs and the check of its outcome are stress_graphs.c's.
 *
 * Three concurrent features run beside them (stress.h), each in a file of its own. The
 * completion queue (stress_notify.c): notify submitters hand their jobs to reapers through
 * a table of live notify jobs (under nmu, as are the reaps themselves), so a reaped handle
 * is known or not; one not yet there is waited for until every submitter inside
 * gr_job_submit at the reap has come back, and an early destroy happens under nmu only if
 * no reaper holds the handle: either order is then a fact, never a guess. Kernel churn
 * (stress_churn.c): each kernel's destroy callback checks that its unregister, its graph's
 * destroy and every job's callback came first (a job holds its graph until it is freed,
 * after its callback); at the end each ran exactly once. The registration cache
 * (stress_cache.c): three jobs at once over the same inputs make the ranges urgent, so they
 * are registered amid the run's jobs and the third hits them; on the host backend the stress's own pins stand in for
 * cudaHostRegister and check the cache's pin and unpin calls.
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
#include "tools/graphrun/stress_impl.h"

static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t gr__stress_below(uint64_t *state, uint64_t n)
{
    return n ? next_rand(state) % n : 0;
}

void gr__stress_breach(shared *s, uint64_t *counter, const char *fmt, ...)
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

void gr__stress_on_complete(gr_job *job, gr_status st, void *user)
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

void gr__stress_wait_callback(shared *s, record *r, uint64_t id)
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

/* A refused submission: an injected allocation failure, or a breach. */
void gr__stress_refused(shared *s, uint64_t id, const gr_error_info *err)
{
    if (s->c->faults != NULL && err->status == GR_ERR_OUT_OF_MEMORY) {
        pthread_mutex_lock(&s->mu);
        s->r->fault_refused++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    gr__stress_breach(s, &s->r->submit_errors, "job %llu: submit refused: %s",
                      (unsigned long long)id, err->message);
}

/* Wait for the job through its own completion descriptor: once readable, the job must be
 * complete and its callback returned. */
static void wait_fd(shared *s, gr_job *job, record *r, uint64_t id)
{
    struct pollfd p = {.events = POLLIN};
    gr_status result;
    int n;

    if (gr_job_completion_fd(job, &p.fd) != GR_OK) {
        gr__stress_breach(s, &s->r->fd_errors, "job %llu: no completion descriptor",
                          (unsigned long long)id);
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
        gr__stress_breach(s, &s->r->fd_errors,
                          "job %llu: completion descriptor readable before the job "
                          "completed (callback ran %d times)",
                          (unsigned long long)id, atomic_load(&r->calls));
    pthread_mutex_lock(&s->mu);
    s->r->fd_waits++;
    pthread_mutex_unlock(&s->mu);
}

static void one_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems, uint64_t id)
{
    shared *s = w->s;
    uint64_t count = 1 + gr__stress_below(&w->rng, MAX_TENSORS),
             kind = gr__stress_below(&w->rng, 10);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_error_info err;
    gr_job *job = NULL;
    int which;
    record r;

    memset(&r, 0, sizeof(r));
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.count = count;
    which = gr__stress_fill_job(w, data, t, elems, count, id, false);
    o.on_complete = gr__stress_on_complete;
    o.user = &r;
    if (kind == 7)
        o.deadline_ns = gr_now_ns() + (int64_t)gr__stress_below(&w->rng, 3000000);
    if (gr_job_submit(s->rt, gr__stress_graph_of(s, which), t, count, &o, kind == 8 ? NULL : &job,
                      &err) != GR_OK) {
        gr__stress_refused(s, id, &err);
        goto out;
    }
    if (kind == 6) {
        sleep_ns(gr__stress_below(&w->rng, 2000000));
        gr_job_cancel(job);
    }
    if (kind == 9) {
        gr_job_destroy(job); /* released at once: runs on, calls back */
        job = NULL;
    }
    if (job != NULL && gr__stress_below(&w->rng, 4) == 0) {
        wait_fd(s, job, &r, id);
    } else if (job != NULL && gr__stress_below(&w->rng, 3) == 0) {
        gr_status result;
        if (gr_job_wait(job, (int64_t)(s->hang_at - gr_now_ns()), &result) != GR_OK) {
            fprintf(stderr, "graphrun stress: HANG: gr_job_wait on job %llu\n",
                    (unsigned long long)id);
            exit(1);
        }
        if (atomic_load(&r.calls) != 1) /* the callback returns before the wait does */
            gr__stress_breach(s, &s->r->callback_errors,
                              "job %llu: wait returned before the callback",
                              (unsigned long long)id);
    }
    gr__stress_wait_callback(s, &r, id);
    gr_job_destroy(job);
    gr__stress_check_job(s, &r, data, elems, count, id, which, 0.25f, kind);
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
        gr__stress_breach(s, &s->r->submit_errors, "submitter %u: no host memory for its tensors",
                          w->id);
        goto out;
    }
    /* A cache or notify submitter sends four groups or jobs however short the run (a slow
     * build makes few): each range is then registered and used again, and a notify
     * submitter's jobs after its first (destroyed before it can be reaped) mostly reach the
     * reapers. */
    for (uint64_t n = 0; gr_now_ns() < s->stop_at || ((w->cache || w->notify) && n < 4);
         n++, jobs++) {
        uint64_t id = ((uint64_t)w->id << 32) | n;

        if (w->notify)
            gr__stress_notify_job_submit(w, id);
        else if (w->cache)
            gr__stress_cache_group(w, elems, id, n);
        else
            one_job(w, data, t, elems, id);
    }
    if (w->notify)
        gr__stress_notify_drain(w);
    pthread_mutex_lock(&s->mu);
    s->r->memory_jobs[(unsigned)kind % 3] += jobs;
    pthread_mutex_unlock(&s->mu);
    /* Every job over the ranges has ended: the cache must let them go. */
    for (int i = 0; w->cache && i < (1 + CACHE_JOBS) * CACHE_RANGES; i++) {
        gr_status st = gr_host_forget(s->rt, w->big[i], CACHE_ELEMS * sizeof(float));

        if (st != GR_OK)
            gr__stress_breach(s, &s->r->cache_errors,
                              "gr_host_forget of submitter %u's range %d: %s", w->id, i,
                              gr_status_str(st));
        pthread_mutex_lock(&s->mu);
        s->r->cache_forgets += st == GR_OK;
        pthread_mutex_unlock(&s->mu);
    }
out:
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

            gr_stats hs = GR_STATS_INIT;

            if (s->cache_capacity != 0 && gr_runtime_stats_get(s->rt, 0, &hs) == GR_OK &&
                hs.host_cache_bytes > s->cache_capacity)
                gr__stress_breach(
                    s, &s->r->cache_errors, "the cache holds %llu bytes, capacity %llu",
                    (unsigned long long)hs.host_cache_bytes, (unsigned long long)s->cache_capacity);
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
                gr__stress_breach(
                    s, &s->r->budget_violations, "device %u: %llu bytes in use, budget %llu", d,
                    (unsigned long long)st.budget_in_use, (unsigned long long)st.budget_bytes);
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
        for (int k = 0; w[i].cache && k < (1 + CACHE_JOBS) * CACHE_RANGES; k++)
            if (posix_memalign((void **)&w[i].big[k], 4096, CACHE_ELEMS * sizeof(float)) != 0) {
                st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
                goto out;
            }
    }
    /* On the host backend the cache's pins are emulated (and checked) here. */
    s.cache_emulated = s.cache_capacity != 0 && chosen == GR_BACKEND_HOST;
    if (s.cache_emulated) {
        gr__stress_emulating = &s;
        gr__host_cache_emulate(&gr__stress_emulated_ops);
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
    s.user = gr__stress_user_graph(s.rt, r->user_skipped, sizeof(r->user_skipped));
    if ((st = gr_graph_parse(gr__stress_half_spec, strlen(gr__stress_half_spec), "stress_half",
                             &s.half, err)) != GR_OK ||
        (st = gr_graph_parse(gr__stress_expr_spec, strlen(gr__stress_expr_spec), "stress_expr",
                             &s.expr, err)) != GR_OK)
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
        pthread_create(&th[n], NULL, gr__stress_churn_main, &w[n]);
    s.stop_at = gr_now_ns() + (int64_t)(c->duration_s * 1e9);
    s.hang_at = s.stop_at + HANG_SLACK_S * 1000000000ll;
    pthread_create(&mon, NULL, monitor_main, &s);
    for (unsigned i = 0; i < n && n_reapers < REAPERS; i++)
        if (w[i].notify)
            pthread_create(&reapers[n_reapers++], NULL, gr__stress_reap_main, &s);
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
            gr__stress_breach(&s, &r->reap_errors,
                              "the completion queue not empty at the end (%zu "
                              "jobs, descriptor %s)",
                              n_left, pf.revents & POLLIN ? "readable" : "not readable");
        if (r->notify_reaped + r->notify_destroyed_early != r->notify_jobs)
            gr__stress_breach(
                &s, &r->reap_errors, "%llu notify jobs, %llu reaped, %llu destroyed early",
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
            gr__stress_breach(&s, &r->cache_errors, "%llu registrations failed",
                              (unsigned long long)hs.host_cache_failures);
    }
    r->rss_end = gr_cli_rss_bytes();
    if (r->rss_end > r->rss_peak)
        r->rss_peak = r->rss_end;
    if (c->duration_s >= 60 && r->rss_quarter > 0 &&
        r->rss_end > r->rss_quarter +
                         (r->rss_quarter / 4 > (64u << 20) ? r->rss_quarter / 4 : 64u << 20))
        gr__stress_breach(&s, &r->rss_growth,
                          "host memory grew from %llu bytes at a quarter of the run "
                          "to %llu at the end",
                          (unsigned long long)r->rss_quarter, (unsigned long long)r->rss_end);
    for (uint32_t d = 0; d < info.device_count; d++) {
        gr_device_stats ds;

        gr_runtime_device_stats(s.rt, d, &ds);
        if (ds.budget_in_use != 0)
            gr__stress_breach(&s, &r->leftover, "device %u: %llu bytes still in use at the end", d,
                              (unsigned long long)ds.budget_in_use);
        if (ds.budget_peak > ds.budget_bytes)
            gr__stress_breach(
                &s, &r->budget_violations, "device %u: peak %llu above the budget %llu", d,
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
        gr__stress_breach(&s, &r->threads_left,
                          "%ld of graphrun's threads after destroy, %ld before create",
                          r->gr_threads_after, r->gr_threads_before);
    /* Destroy unregistered everything the cache had pinned. */
    if (st == GR_OK && s.cache_emulated && s.n_pinned != 0)
        gr__stress_breach(&s, &r->cache_errors, "%u ranges left pinned after destroy", s.n_pinned);
    r->cache_emulated = s.cache_emulated;
    gr__stress_emulating = NULL;
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
            gr__stress_breach(&s, &r->churn_errors, "kernel %s destroyed %d times", k->name,
                              destroys);
        else
            free(k); /* else the registry may still call it */
    }
    for (unsigned i = 0; w != NULL && i < n; i++)
        for (int k = 0; k < (1 + CACHE_JOBS) * CACHE_RANGES; k++)
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

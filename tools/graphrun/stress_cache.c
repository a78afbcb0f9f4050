/*
 * stress_cache.c - the registration cache under the stress (stress.c): the cache
 * submitters' groups of jobs over the same pageable ranges, which make the ranges urgent so
 * that they are registered amid the run's jobs, hit and evicted; and, on the
 * host backend, the pins that stand in for cudaHostRegister (gr__host_cache_emulate) and
 * check the cache's pin and unpin calls. Apart from the other submitters, as it alone
 * reuses memory across jobs and stands between the runtime and its pins.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "runtime/hostcache.h"
#include "tools/graphrun/stress_impl.h"

/* CACHE_JOBS jobs at once over the same input ranges of the cache submitter (1 or 2 of
 * its CACHE_RANGES), each into outputs of its own. The first job to use an input queues it
 * for registration; the second makes it urgent and waits in gr_job_submit until it is
 * registered (the rule of a range used again), so the third, submitted while the second
 * still holds it (a held range is never evicted), finds it registered: a hit, whatever the
 * threads' timing. Later groups hit it again or find it evicted, as the submitters' inputs
 * outgrow the cache. Each output range starts as its input, so that an unfinished index is
 * checked as in place. */
void gr__stress_cache_group(submitter *w, uint64_t *elems, uint64_t id, uint64_t n)
{
    shared *s = w->s;
    /* Two groups in a row from the same first range: the second may find it registered. */
    uint64_t count = 1 + gr__stress_below(&w->rng, 2), first = n / 2 % CACHE_RANGES;
    float *out[CACHE_JOBS][2];
    gr_tensor t[CACHE_JOBS][2];
    gr_job *job[CACHE_JOBS] = {NULL};
    bool submitted[CACHE_JOBS] = {false};
    gr_error_info err;
    record r[CACHE_JOBS];
    int which;

    for (uint64_t i = 0; i < count; i++)
        for (int j = 0; j < CACHE_JOBS; j++)
            out[j][i] = w->big[(1 + j) * CACHE_RANGES + (first + i) % CACHE_RANGES];
    which = gr__stress_fill_job(w, out[0], t[0], elems, count, id, true);
    for (uint64_t i = 0; i < count; i++) {
        float *in = w->big[(first + i) % CACHE_RANGES];

        memcpy(in, out[0][i], CACHE_ELEMS * sizeof(float));
        for (int j = 1; j < CACHE_JOBS; j++) {
            memcpy(out[j][i], out[0][i], CACHE_ELEMS * sizeof(float));
            t[j][i] = t[0][i];
            t[j][i].in[0] = in;
            t[j][i].out[0] = out[j][i];
        }
        t[0][i].in[0] = in;
    }
    for (int j = 0; j < CACHE_JOBS; j++) {
        gr_job_options o = GR_JOB_OPTIONS_INIT;

        memset(&r[j], 0, sizeof(r[j]));
        pthread_mutex_init(&r[j].mu, NULL);
        pthread_cond_init(&r[j].cv, NULL);
        r[j].count = count;
        o.on_complete = gr__stress_on_complete;
        o.user = &r[j];
        submitted[j] = gr_job_submit(s->rt, gr__stress_graph_of(s, which), t[j], count, &o,
                                     &job[j], &err) == GR_OK;
        if (!submitted[j])
            gr__stress_refused(s, id, &err);
    }
    for (int j = 0; j < CACHE_JOBS; j++) {
        if (submitted[j]) {
            gr__stress_wait_callback(s, &r[j], id);
            gr_job_destroy(job[j]);
            gr__stress_check_job(s, &r[j], out[j], elems, count, id, which, 0.25f, 0);
            pthread_mutex_lock(&s->mu);
            s->r->cache_jobs++;
            pthread_mutex_unlock(&s->mu);
        }
        pthread_cond_destroy(&r[j].cv);
        pthread_mutex_destroy(&r[j].mu);
    }
}

/* The registration cache's pins on the host backend (gr__host_cache_emulate) --------------- */

shared *gr__stress_emulating; /* the run whose cache these pins serve: one at a time */

static gr_status emulated_pin(void *p, uint64_t bytes)
{
    shared *s = gr__stress_emulating;
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
        gr__stress_breach(s, &s->r->cache_errors,
                          "the cache pinned %p (%llu bytes) over a range it "
                          "had pinned",
                          p, (unsigned long long)bytes);
    return GR_OK;
}

static gr_status emulated_unpin(void *p)
{
    shared *s = gr__stress_emulating;
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
        gr__stress_breach(s, &s->r->cache_errors, "the cache unpinned %p, which it had not pinned",
                          p);
    return GR_OK;
}

/* The cache submitters' ranges are what a driver would call pageable (to be registered);
 * any other memory is as the host backend says, ready (it copies with memcpy whatever the
 * memory), so that the rest of the stress runs as without the cache. */
static bool emulated_dma_ready(const void *p)
{
    const shared *s = gr__stress_emulating;
    uintptr_t a = (uintptr_t)p;

    for (unsigned i = 0; i < s->n_w; i++)
        for (int k = 0; s->w[i].cache && k < (1 + CACHE_JOBS) * CACHE_RANGES; k++)
            if (a >= (uintptr_t)s->w[i].big[k] &&
                a < (uintptr_t)s->w[i].big[k] + CACHE_ELEMS * sizeof(float))
                return false;
    return true;
}

const gr_host_cache_ops gr__stress_emulated_ops = {emulated_pin, emulated_unpin,
                                               emulated_dma_ready};

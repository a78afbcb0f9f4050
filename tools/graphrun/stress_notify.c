/*
 * stress_notify.c - the completion queue under the stress (stress.c): notify submitters
 * hand their jobs to reaper threads polling gr_runtime_completion_fd, through a table of
 * live notify jobs under s->nmu, as are the reaps themselves. A reaped handle is known or
 * not: one not yet in the table is waited for until every submitter inside gr_job_submit
 * at the reap has come back, and an early destroy happens under nmu only if no reaper holds
 * the handle, so either order is a fact, never a guess. Apart from the other submitters, as
 * its jobs are never waited for by the thread that submitted them. Lock order: s->nmu, then
 * s->mu (gr__stress_breach).
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tools/graphrun/stress_impl.h"

#define NOTIFY_MAGIC 0x6e6f746966794a42ull

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

    gr__stress_check_job(s, &nj->r, nj->data, nj->elems, nj->count, nj->id, nj->which, 0.25f,
                         nj->kind);
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
        gr__stress_breach(s, &s->r->reap_errors, "job %llu reaped twice",
                          (unsigned long long)nj->id);
    if (gr_job_wait(nj->job, 0, &result) != GR_OK || atomic_load(&nj->r.calls) != 1)
        gr__stress_breach(s, &s->r->reap_errors,
                          "job %llu reaped before it completed (callback ran %d "
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
        gr__stress_breach(s, &s->r->reap_errors, "gr_runtime_reap refused");
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
                gr__stress_breach(s, &s->r->reap_errors,
                                  "reaped a job that is no live notify job (reaped "
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

void *gr__stress_reap_main(void *p)
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
void gr__stress_notify_job_submit(submitter *w, uint64_t id)
{
    shared *s = w->s;
    notify_job *nj = calloc(1, sizeof(*nj));
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_tensor t[MAX_TENSORS];
    gr_error_info err;
    bool early = w->seq == 0 || gr__stress_below(&w->rng, 8) == 0,
         ok = nj != NULL; /* its first, and more */
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
        nj->count = 1 + gr__stress_below(&w->rng, 4);
        nj->kind = gr__stress_below(&w->rng, 8) == 0 ? 7 : 0;
        for (uint64_t i = 0; i < nj->count; i++)
            ok &= (nj->data[i] = malloc(s->max_elems * sizeof(float))) != NULL;
    }
    if (!ok) {
        gr__stress_breach(s, &s->r->submit_errors, "submitter %u: no host memory for a notify job",
                          w->id);
        goto out_free;
    }
    pthread_mutex_init(&nj->r.mu, NULL);
    pthread_cond_init(&nj->r.cv, NULL);
    nj->r.count = nj->count;
    nj->which = gr__stress_fill_job(w, nj->data, t, nj->elems, nj->count, id, false);
    o.on_complete = gr__stress_on_complete;
    o.user = &nj->r;
    o.notify = 1;
    if (nj->kind == 7)
        o.deadline_ns = gr_now_ns() + (int64_t)gr__stress_below(&w->rng, 3000000);
    pthread_mutex_lock(&s->nmu);
    w->submitting = true;
    w->outstanding++;
    pthread_mutex_unlock(&s->nmu);
    st = gr_job_submit(s->rt, gr__stress_graph_of(s, nj->which), t, nj->count, &o, &nj->job, &err);
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
        gr__stress_refused(s, id, &err);
        pthread_cond_destroy(&nj->r.cv);
        pthread_mutex_destroy(&nj->r.mu);
        goto out_free;
    }
    pthread_mutex_lock(&s->mu);
    s->r->notify_jobs++;
    s->r->notify_destroyed_early += early;
    pthread_mutex_unlock(&s->mu);
    if (early) {
        gr__stress_wait_callback(s, &nj->r, id);
        notify_end(s, nj);
    }
    return;

out_free:
    for (uint64_t i = 0; nj != NULL && i < nj->count; i++)
        free(nj->data[i]);
    free(nj);
}

/* Whether the runtime's completion queue holds a job: its descriptor is readable exactly
 * then (gr_runtime_completion_fd). */
static bool queue_holds_a_job(const shared *s)
{
    struct pollfd pf = {.fd = s->completion_fd, .events = POLLIN};

    return poll(&pf, 1, 0) > 0;
}

/* The end of a notify submitter: its jobs in flight must all be reaped. A job of it that is
 * complete (so queued: a job is queued in the critical section that completes it), still
 * in the table and claimed by no reaper while the queue is empty has been lost by the
 * queue. Reaps happen under nmu, held here, so nothing is taken meanwhile; reapers that
 * fall behind (checking outputs) leave the queue non-empty, which is no loss. Seen so for
 * a second on end: a breach, and the submitter takes the job back. */
void gr__stress_notify_drain(submitter *w)
{
    shared *s = w->s;
    int64_t complete_since = 0;

    pthread_mutex_lock(&s->nmu);
    while (w->outstanding > 0) {
        struct timespec ts;
        notify_job *lost = NULL;
        bool all_complete = true, any = false;

        for (uint64_t i = 0; i < s->n_live; i++)
            if (s->live[i]->w == w && !in_unclaimed(s, s->live[i]->job)) {
                any = true;
                all_complete &= gr_job_wait(s->live[i]->job, 0, NULL) == GR_OK;
                if (lost == NULL)
                    lost = s->live[i];
            }
        if (!any || !all_complete || queue_holds_a_job(s))
            complete_since = 0;
        else if (complete_since == 0)
            complete_since = gr_now_ns();
        else if (gr_now_ns() - complete_since > 1000000000) {
            take_live(s, lost->job);
            pthread_mutex_unlock(&s->nmu);
            gr__stress_breach(s, &s->r->reap_errors,
                              "job %llu complete, the queue empty, but never reaped",
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

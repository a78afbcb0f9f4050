/*
 * constants.c - a job's constants on the devices (see constants.h for what it guarantees
 * and why no wait is forever).
 *
 * A block's arena block lives in the job (job->consts[device]), and the arena links that
 * storage into its list while it is placed. Only the loader touches it while the block is
 * LOADING; once READY it is freed under the device's const lock, before the block can be
 * taken for a new copy in. Freeing takes the arena's and the budget's locks briefly and
 * never waits.
 */
#include "runtime/constants.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/base/fault.h"
#include "runtime/job.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "runtime/base/sync.h"

gr_status gr__const_dev_init(gr_const_dev *cd, uint32_t n_workers)
{
    memset(cd, 0, sizeof(*cd));
    cd->waiting = gr__calloc(n_workers ? n_workers : 1, sizeof(*cd->waiting));
    if (cd->waiting == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    cd->n_workers = n_workers;
    if (pthread_mutex_init(&cd->mu, NULL) != 0)
        goto out_free;
    if (gr__cond_init(&cd->cond) != 0)
        goto out_destroy_mu;
    return GR_OK;

out_destroy_mu:
    pthread_mutex_destroy(&cd->mu);
out_free:
    free(cd->waiting);
    cd->waiting = NULL;
    return GR_ERR_OUT_OF_MEMORY;
}

void gr__const_dev_destroy(gr_const_dev *cd)
{
    pthread_cond_destroy(&cd->cond);
    pthread_mutex_destroy(&cd->mu);
    free(cd->waiting);
}

static gr_const_dev *home_of(gr_runtime *rt, const gr_device *dev)
{
    return &rt->const_devs[dev->id];
}

/* Give the holder's memory back: the device is free for another job's constants. Device
 * lock held; the holder READY and unused. */
static void evict_locked(gr_const_dev *cd, gr_device *dev)
{
    gr_const_block *b = cd->holder;
    uint64_t bytes = b->block.size;

    gr__arena_free(dev->arena, &b->block);
    gr__budget_release(dev->budget, bytes);
    b->state = GR_CONST_ABSENT;
    cd->holder = NULL;
    pthread_cond_broadcast(&cd->cond);
}

/* Whether a worker of the device waits for memory on behalf of a job other than `job`.
 * Device lock held. */
static bool other_job_waits(const gr_const_dev *cd, const gr_job *job)
{
    for (uint32_t i = 0; i < cd->n_workers; i++)
        if (cd->waiting[i] != NULL && cd->waiting[i] != job)
            return true;
    return false;
}

/* Why the unit must not go on waiting for its job's constants, or GR_OK. */
static gr_status stopped(const gr_worker *w, const gr_job *job)
{
    int why = atomic_load_explicit(&job->stop, memory_order_acquire);

    if (why != 0)
        return (gr_status)why;
    if (atomic_load_explicit(&w->rt->shutdown, memory_order_acquire))
        return GR_ERR_SHUTDOWN;
    if (atomic_load_explicit(&w->dev->lost, memory_order_acquire))
        return GR_ERR_DEVICE_LOST;
    if (gr_deadline_passed(job->deadline_ns, gr_now_ns()))
        return GR_ERR_TIMEOUT;
    return GR_OK;
}

/* Each constant from the caller's memory to its place in the block. */
static gr_status copy_in(gr_worker *w, gr_job *job, const gr_arena_block *blk,
                         gr_fault_reach *reach, gr_error_info *err)
{
    const gr_graph *g = job->graph;
    unsigned char *base = (unsigned char *)w->dev->region + blk->offset;
    gr_status st;

    for (uint32_t c = 0; c < g->n_consts; c++) {
        const gr_buffer_def *b = &g->buffers[g->const_buffer[c]];
        uint64_t bytes = b->fixed * gr_dtype_size(b->dtype);

        st = w->rt->backend->upload(w, base + g->const_offset[c], job->const_src[c], bytes,
                                    reach, err);
        if (st != GR_OK) {
            gr__error_prefix(err, "copying constant '%s' in: ", b->name);
            return st;
        }
    }
    return GR_OK;
}

/* Wait (device lock held) until the device may take `job`'s constants: claims the holder
 * slot (LOADING) and returns true, or returns false when they became READY (another worker
 * copied them in) or with *st set when the job stopped. */
static bool claim_locked(gr_worker *w, gr_const_dev *cd, gr_job *job, gr_status *st)
{
    gr_const_block *b = &job->consts[w->dev->id];

    for (;;) {
        if (b->state == GR_CONST_READY)
            return false;
        if ((*st = stopped(w, job)) != GR_OK)
            return false;
        if (cd->holder != NULL && cd->holder != b && cd->holder->state == GR_CONST_READY &&
            cd->holder->users == 0)
            evict_locked(cd, w->dev); /* another job's, unused */
        if (cd->holder == NULL) {
            b->state = GR_CONST_LOADING;
            cd->holder = b;
            return true;
        }
        /* Another worker copies ours in, or another job's are in use: their last user
         * sees us waiting and evicts them. */
        cd->waiting[w->id] = job;
        gr__cond_wait_until(&cd->cond, &cd->mu, job->deadline_ns);
        cd->waiting[w->id] = NULL;
    }
}

gr_status gr__const_load(gr_worker *w, gr_job *job, bool may_wait, bool *would_wait,
                         gr_fault_reach *reach, gr_error_info *err)
{
    gr_const_dev *cd = home_of(w->rt, w->dev);
    gr_const_block *b = &job->consts[w->dev->id];
    gr_counters *stats = gr__stats_worker(w->rt->stats, w->id);
    uint64_t bytes = job->graph->const_bytes;
    gr_status st = GR_OK;
    bool mine;

    *reach = GR_REACH_ITERATION;
    pthread_mutex_lock(&cd->mu);
    if (b->state == GR_CONST_READY || !may_wait) {
        *would_wait = b->state != GR_CONST_READY;
        pthread_mutex_unlock(&cd->mu);
        return GR_OK;
    }
    mine = claim_locked(w, cd, job, &st);
    pthread_mutex_unlock(&cd->mu);
    if (!mine)
        return st == GR_OK ? GR_OK
                           : gr__error_set(err, st, GR_NO_INDEX, NULL,
                                           "stopped while waiting for the job's constants");

    /* The device is ours to load: what waits ahead for its memory is units in flight. */
    st = gr__budget_acquire(w->dev->budget, bytes, job->deadline_ns, &job->stop);
    if (st == GR_OK) {
        st = gr__arena_alloc_top(w->dev->arena, bytes, job->deadline_ns, &job->stop, &b->block);
        if (st != GR_OK)
            gr__budget_release(w->dev->budget, bytes);
    }
    if (st != GR_OK) {
        gr__error_set(err, st, GR_NO_INDEX, NULL,
                      "no device memory for the job's constants (%llu bytes)%s",
                      (unsigned long long)bytes,
                      st == GR_ERR_OUT_OF_MEMORY ? " (injected fault)" : "");
        goto out_absent;
    }
    if ((st = copy_in(w, job, &b->block, reach, err)) != GR_OK) {
        gr__arena_free(w->dev->arena, &b->block);
        gr__budget_release(w->dev->budget, bytes);
        goto out_absent;
    }
    gr__stats_add(&stats->constants_copied, 1);
    gr__stats_add(&stats->constant_bytes, bytes);
    pthread_mutex_lock(&cd->mu);
    b->state = GR_CONST_READY;
    pthread_cond_broadcast(&cd->cond);
    pthread_mutex_unlock(&cd->mu);
    return GR_OK;

out_absent:
    pthread_mutex_lock(&cd->mu);
    b->state = GR_CONST_ABSENT;
    cd->holder = NULL;
    pthread_cond_broadcast(&cd->cond);
    pthread_mutex_unlock(&cd->mu);
    return st;
}

bool gr__const_use(gr_worker *w, gr_job *job, unsigned char **base)
{
    gr_const_dev *cd = home_of(w->rt, w->dev);
    gr_const_block *b = &job->consts[w->dev->id];
    bool ready;

    pthread_mutex_lock(&cd->mu);
    ready = b->state == GR_CONST_READY;
    if (ready) {
        b->users++;
        *base = (unsigned char *)w->dev->region + b->block.offset;
    }
    pthread_mutex_unlock(&cd->mu);
    return ready;
}

void gr__const_unuse(gr_worker *w, gr_job *job)
{
    gr_const_dev *cd = home_of(w->rt, w->dev);
    gr_const_block *b = &job->consts[w->dev->id];

    pthread_mutex_lock(&cd->mu);
    if (--b->users == 0 && other_job_waits(cd, job))
        evict_locked(cd, w->dev);
    pthread_mutex_unlock(&cd->mu);
}

void gr__const_wait_begin(gr_worker *w, const gr_job *job)
{
    gr_const_dev *cd = home_of(w->rt, w->dev);

    pthread_mutex_lock(&cd->mu);
    cd->waiting[w->id] = job;
    if (cd->holder != NULL && cd->holder->job != job && cd->holder->state == GR_CONST_READY &&
        cd->holder->users == 0)
        evict_locked(cd, w->dev);
    pthread_mutex_unlock(&cd->mu);
}

void gr__const_wait_end(gr_worker *w)
{
    gr_const_dev *cd = home_of(w->rt, w->dev);

    pthread_mutex_lock(&cd->mu);
    cd->waiting[w->id] = NULL;
    pthread_mutex_unlock(&cd->mu);
}

void gr__const_release_job(gr_job *job)
{
    gr_runtime *rt = job->rt;

    if (job->consts == NULL)
        return;
    for (uint32_t d = 0; d < rt->n_devices; d++) {
        gr_const_dev *cd = &rt->const_devs[d];

        pthread_mutex_lock(&cd->mu);
        if (cd->holder == &job->consts[d] && cd->holder->state == GR_CONST_READY)
            evict_locked(cd, &rt->devices[d]);
        pthread_mutex_unlock(&cd->mu);
    }
}

void gr__const_wake(gr_runtime *rt)
{
    if (rt->const_devs == NULL)
        return;
    for (uint32_t d = 0; d < rt->const_devs_ready; d++) {
        pthread_mutex_lock(&rt->const_devs[d].mu);
        pthread_cond_broadcast(&rt->const_devs[d].cond);
        pthread_mutex_unlock(&rt->const_devs[d].mu);
    }
}

/*
 * worker.c - the worker loop: pop a task, take budget and arena space, run the iteration on
 * the backend, give everything back, end the index.
 *
 * Every wait here is on behalf of the task's job, so it uses the job's deadline and stop
 * flag: a canceled, expired or shut-down job never leaves a worker asleep. The budget is
 * taken before the arena block, and both are given back before the index ends, so when a
 * job completes none of its memory is held. Nothing is held across the next pop.
 */
#include <string.h>

#include "runtime/runtime.h"
#include "runtime/sync.h"

/* Why the index must not run now, or GR_OK. */
static gr_status must_stop(gr_worker *w, gr_job *job)
{
    int why = atomic_load_explicit(&job->stop, memory_order_acquire);

    if (why != 0)
        return (gr_status)why;
    if (atomic_load_explicit(&w->rt->shutdown, memory_order_acquire))
        return GR_ERR_SHUTDOWN;
    if (atomic_load_explicit(&w->dev->lost, memory_order_acquire))
        return GR_ERR_DEVICE_LOST; /* every device is lost, or it was lost just now */
    if (gr_deadline_passed(job->deadline_ns, gr_now_ns()))
        return GR_ERR_TIMEOUT;
    return GR_OK;
}

static void run_task(gr_worker *w, const gr_task *t)
{
    gr_job *job = t->job;
    gr_device *dev = w->dev;
    gr_iteration it;
    gr_error_info detail;
    uint64_t bytes;
    gr_status st;

    if (!gr__job_start_index(job, t->index))
        return; /* ended while queued: canceled, expired or shut down */
    memset(&detail, 0, sizeof(detail));
    if ((st = must_stop(w, job)) != GR_OK)
        goto out_end;

    it.graph = job->graph;
    it.tensor = &job->tensors[t->index];
    it.index = t->index;
    st = gr_graph_layout(job->graph, it.tensor->elems, it.offsets, &bytes);
    if (st != GR_OK) { /* validated at submit: cannot happen */
        st = gr_error_set(&detail, GR_ERR_INTERNAL, t->index, NULL, "layout failed");
        goto out_end;
    }
    st = gr_budget_acquire(dev->budget, bytes, job->deadline_ns, &job->stop);
    if (st != GR_OK)
        goto out_end;
    st = gr_arena_alloc(dev->arena, bytes, job->deadline_ns, &job->stop, &w->block);
    if (st != GR_OK)
        goto out_release_budget;
    /* The waits above can be long; do not start work that is no longer wanted. */
    if ((st = must_stop(w, job)) != GR_OK)
        goto out_free_block;

    it.base = (unsigned char *)dev->region + w->block.offset;
    st = w->rt->backend->run(w, &it, &detail);
    if (st == GR_OK)
        atomic_fetch_add_explicit(&dev->iterations_done, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&dev->iterations_failed, 1, memory_order_relaxed);

out_free_block:
    gr_arena_free(dev->arena, &w->block);
out_release_budget:
    gr_budget_release(dev->budget, bytes);
out_end:
    gr__job_end_index(job, t->index, GR_INDEX_RUNNING, st, &detail);
}

/* Whether this worker must not take tasks now, which it could only fail while another
 * worker can run them: it retired (its private context is ruined) while its device's other
 * workers go on, or its device is lost while another device works. Once every device is
 * lost, every worker takes tasks again, to fail them fast. */
static bool device_out(const gr_worker *w)
{
    if (!atomic_load(&w->dev->lost))
        return atomic_load(&w->retired);
    return atomic_load(&w->rt->devices_lost) < w->rt->n_devices;
}

/* A worker that must not take tasks sleeps until shutdown, or until it may again (see
 * device_out). Returns false at shutdown. */
static bool park_while_device_lost(gr_worker *w)
{
    gr_runtime *rt = w->rt;
    bool go_on;

    if (!device_out(w))
        return true;
    pthread_mutex_lock(&rt->mu);
    while (device_out(w) && !atomic_load(&rt->shutdown))
        pthread_cond_wait(&rt->cond, &rt->mu);
    go_on = !atomic_load(&rt->shutdown);
    pthread_mutex_unlock(&rt->mu);
    return go_on;
}

/* The device was lost between the check and the pop: give the task back, still queued, to
 * the workers of the devices that work. Returns true when the task is handled. */
static bool hand_back(gr_worker *w, gr_task *t)
{
    gr_status st;

    if (!device_out(w))
        return false;
    st = gr_ring_push(w->rt->ring, t, t->job->deadline_ns, &t->job->stop);
    if (st != GR_OK) { /* the job was stopped or the runtime shut down meanwhile */
        gr__job_end_index(t->job, t->index, GR_INDEX_QUEUED, st, NULL);
        gr__job_unref(t->job);
    }
    return true;
}

void *gr__worker_main(void *arg)
{
    gr_worker *w = arg;
    gr_runtime *rt = w->rt;
    gr_error_info err;
    gr_status st;
    gr_task t;

    memset(&err, 0, sizeof(err));
    st = rt->backend->worker_open(w, &err);
    pthread_mutex_lock(&rt->mu);
    if (st == GR_OK) {
        rt->workers_ready++;
    } else {
        if (rt->workers_failed++ == 0)
            rt->worker_error = err;
    }
    pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->mu);
    if (st != GR_OK)
        return NULL;

    while (park_while_device_lost(w) && gr_ring_pop(rt->ring, &t, GR_NO_DEADLINE) == GR_OK) {
        if (hand_back(w, &t))
            continue;
        run_task(w, &t);
        gr__job_unref(t.job); /* the task's reference */
    }
    rt->backend->worker_close(w);
    return NULL;
}

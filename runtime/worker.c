/*
 * worker.c - the worker loop: pop a task (a unit of a job, units.h), take budget and arena
 * space, gather a staged unit's inputs (or list a scattered unit's copies for the backend),
 * run the iteration on the backend, scatter its outputs, give everything back, finish the
 * unit's parts.
 *
 * Every wait here is on behalf of the task's job, so it uses the job's deadline and stop
 * flag: a canceled, expired or shut-down job never leaves a worker asleep. The budget is
 * taken before the arena block, and both are given back before the index ends, so when a
 * job completes none of its memory is held. Nothing is held across the next pop.
 *
 * Statistics (stats.h) are counted in the worker's own block before the unit's parts end,
 * so a job's waiter sees them; NVTX ranges (trace.h) mark the unit and its phases when a
 * tool is attached to a traced backend (env.trace), and cost one branch otherwise.
 *
 * A lost device: its workers stop taking tasks while another device works (they park).
 * A task one of them already holds goes back to the ring, still queued, as long as its
 * iteration has not reached the device (the device was lost while the worker waited for
 * budget or arena space, say): only iterations the lost device was really running fail with
 * GR_ERR_DEVICE_LOST. Those are never retried elsewhere: their outputs may be half written,
 * and an in-place tensor's input with them.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/copier.h"
#include "runtime/fault.h"
#include "runtime/hostpool.h"
#include "runtime/runtime.h"
#include "runtime/sync.h"
#include "runtime/trace.h"

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

/* The worker's staging buffer: made when the worker starts (inside gr_runtime_create,
 * as the device arena is), of the planner's bound for the largest unit (staging_bytes, plus
 * the ports' alignment), so that a fresh runtime's first staged job does not pay for
 * pinning it (about 100 ms for three workers' 64 MiB on the H200). Grown, should a unit
 * ever need more (its ports lie one after another, each starting on GR_BUFFER_ALIGN): the
 * planner's bound says none does, so this stays a fallback, as is the retry of a buffer
 * that could not be made at start even as ordinary memory. Units of different graphs
 * differ in their ports as well as their elements, so what the buffer holds is counted in
 * bytes. Pinned memory when the backend has it and it can be had, an allocation of its
 * own (hostpool.h: gr__host_alloc_unpooled; on the host backend ordinary memory, as its
 * copies are memcpy); otherwise (a tiny RLIMIT_MEMLOCK, the system out of pinned memory)
 * ordinary memory, which the device reads through the driver's slower path: the results
 * are the same, and the runtime reports the fallback once. */
static void free_staging(gr_worker *w)
{
    if (w->staging_pageable)
        free(w->staging);
    else
        gr_host_free(w->staging);
    w->staging = NULL;
    w->staging_bytes = 0;
    w->staging_pageable = false;
}

/* Make the staging buffer `bytes` long (it holds nothing worth keeping between units). */
static gr_status grow_staging(gr_worker *w, uint64_t bytes, gr_error_info *err)
{
    void *p = NULL;

    free_staging(w);
    if (gr__host_alloc_unpooled(w->rt->backend->pinned, bytes, &p) != GR_OK) {
        p = NULL;
        if (posix_memalign(&p, 4096, bytes) != 0)
            return gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                                "cannot allocate %llu bytes of staging memory, pinned or not",
                                (unsigned long long)bytes);
        w->staging_pageable = true;
        gr__runtime_pinned_fallback(w->rt, bytes);
    }
    w->staging = p;
    w->staging_bytes = bytes;
    return GR_OK;
}

/* The staging buffer's size at start: the largest unit the planner makes (units.c bounds
 * its ports' bytes by staging_bytes), each of up to 2 * GR_MAX_PORTS ports rounded up to
 * GR_BUFFER_ALIGN. */
static uint64_t staging_at_start(const gr_worker *w)
{
    return w->rt->cfg.staging_bytes + 2u * GR_MAX_PORTS * GR_BUFFER_ALIGN;
}

static gr_status ensure_staging(gr_worker *w, const gr_graph *g, uint64_t elems,
                                gr_error_info *err)
{
    uint64_t bytes = 0;

    for (uint32_t q = 0; q < g->n_inputs + g->n_outputs; q++) {
        bool out = q >= g->n_inputs;

        w->staging_at[q] = bytes;
        bytes += gr_graph_port_bytes(g, out, out ? q - g->n_inputs : q, elems);
        bytes = (bytes + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;
    }
    if (w->staging_bytes >= bytes)
        return GR_OK;
    return grow_staging(w, bytes, err);
}

/* The host side of unit `u` as the backend sees it: the tensor itself (a whole tensor or a
 * chunk of one), or the staging buffer. */
static void set_view(gr_worker *w, const gr_job *job, const gr_unit *u)
{
    const gr_graph *g = job->graph;
    const gr_tensor *t = &job->tensors[u->index];

    memset(&w->view, 0, sizeof(w->view));
    w->view.elems = u->elems;
    /* The shape is the tensor's when the unit is the whole of it; a chunk or a batch (only
     * ever of elementwise kernels, which ignore it) is one dimension. */
    if (u->tensors == 1 && u->offset == 0 && u->elems == t->elems) {
        w->view.rank = t->rank;
        memcpy(w->view.shape, t->shape, sizeof(w->view.shape));
    }
    for (uint32_t p = 0; p < g->n_inputs; p++)
        w->view.in[p] = u->staged ? (const void *)(w->staging + w->staging_at[p])
                                  : (const void *)((const char *)t->in[p] +
                                                   gr_graph_port_offset(g, false, p, u->offset));
    for (uint32_t p = 0; p < g->n_outputs; p++)
        w->view.out[p] = u->staged ? (void *)(w->staging + w->staging_at[g->n_inputs + p])
                                   : (void *)((char *)t->out[p] +
                                              gr_graph_port_offset(g, true, p, u->offset));
}

/* Copy the live parts of a staged unit between the tensors and the staging buffer: inputs
 * in (gather), or outputs out (scatter). Each part keeps its place in the unit, live or
 * not, so the kernels see the unit's elements where the plan put them. */
static void stage(gr_worker *w, const gr_job *job, const gr_unit *u, bool gather)
{
    const gr_graph *g = job->graph;
    uint32_t ports = gather ? g->n_inputs : g->n_outputs;
    uint64_t pos = 0; /* elements of the unit before this part */
    size_t n = 0;

    for (uint32_t k = 0; k < u->tensors; k++) {
        const gr_tensor *t = &job->tensors[u->index + k];
        uint64_t elems = u->tensors == 1 ? u->elems : t->elems;
        uint64_t skip = u->tensors == 1 ? u->offset : 0;

        for (uint32_t p = 0; w->live[k] && p < ports; p++) {
            struct gr_copy *c = &w->copies[n++];
            unsigned char *staged = w->staging + w->staging_at[gather ? p : g->n_inputs + p] +
                                    gr_graph_port_offset(g, !gather, p, pos);

            c->bytes = gr_graph_port_bytes(g, !gather, p, elems);
            if (gather) {
                c->dst = staged;
                c->src = (const char *)t->in[p] + gr_graph_port_offset(g, false, p, skip);
            } else {
                c->dst = (char *)t->out[p] + gr_graph_port_offset(g, true, p, skip);
                c->src = staged;
            }
        }
        pos += elems;
    }
    gr_copier_copy(w->rt->copier, w->copies, n, w->copy_ends);
}

/* A scattered unit's copies, for the backend to do itself (gr_iteration.h2d): each live
 * part's inputs from where they lie into its place in the device buffers, and its outputs
 * back. A part keeps its place in the unit, live or not, as in a staged unit. */
static void scatter_list(gr_worker *w, const gr_job *job, const gr_unit *u, gr_iteration *it)
{
    const gr_graph *g = job->graph;
    uint64_t pos = 0;
    uint32_t n_in = 0, n_out = 0;

    for (uint32_t k = 0; k < u->tensors; k++) {
        const gr_tensor *t = &job->tensors[u->index + k];

        for (uint32_t i = 0; w->live[k] && i < g->n_nodes; i++) {
            const gr_node *n = &g->nodes[i];

            if (n->kind == GR_NODE_H2D)
                w->copies[n_in++] = (gr_copy){
                    it->base + it->offsets[n->write] + gr_graph_port_offset(g, false, n->port, pos),
                    t->in[n->port], gr_graph_port_bytes(g, false, n->port, t->elems)};
            else if (n->kind == GR_NODE_D2H)
                w->copies_out[n_out++] = (gr_copy){
                    t->out[n->port],
                    it->base + it->offsets[n->reads[0]] +
                        gr_graph_port_offset(g, true, n->port, pos),
                    gr_graph_port_bytes(g, true, n->port, t->elems)};
        }
        pos += t->elems;
    }
    it->h2d = w->copies;
    it->n_h2d = n_in;
    it->d2h = w->copies_out;
    it->n_d2h = n_out;
}

/* The elements of a unit's live parts: what a scattered unit really copies. */
static uint64_t live_elems(const gr_job *job, const gr_unit *u, const uint8_t *live)
{
    uint64_t n = 0;

    for (uint32_t k = 0; k < u->tensors; k++)
        if (live[k])
            n += job->tensors[u->index + k].elems;
    return n;
}

static bool device_out(const gr_worker *w);
static void give_back(gr_worker *w, const gr_task *t);

/* The backend says a failure ruined more than the iteration: the worker's private context
 * (it retires; with the last of its device's workers, the device is lost) or the device's
 * shared context (the device is lost). */
static void out_of_service(gr_worker *w, gr_fault_reach reach)
{
    if (reach == GR_REACH_WORKER)
        gr__runtime_worker_retired(w->rt, w);
    else
        gr__runtime_device_lost(w->rt, w->dev);
}

/* Run task t. Returns true when the task went back to the ring (its reference with it). */
static bool run_task(gr_worker *w, const gr_task *t)
{
    gr_job *job = t->job;
    gr_device *dev = w->dev;
    const gr_graph *g = job->graph;
    gr_counters *stats = gr__stats_worker(w->rt->stats, w->id);
    bool trace = w->env->trace;
    gr_iteration it;
    gr_error_info detail;
    uint64_t bytes = 0;
    uint32_t live = 0;
    bool reached_device = false;
    gr_fault_reach reach = GR_REACH_ITERATION;
    int64_t t0;
    gr_status st;
    gr_unit u;

    gr__job_unit(job, t->index, &u);
    if (trace)
        gr__trace_push_unit(job->id, u.index, u.tensors, u.offset, u.elems,
                            job->tensors[u.index].elems);
    for (uint32_t k = 0; k < u.tensors; k++)
        live += w->live[k] = gr__job_start_piece(job, u.index + k);
    memset(&detail, 0, sizeof(detail));
    st = GR_OK;
    if (live == 0)
        goto out_finish; /* every part already ended (stopped) or failed elsewhere */
    /* A direct batch copies its whole range: with parts already ended, whose outputs must
     * stay untouched, only the live ones may be copied, so stage it. (A scattered one
     * copies only its live parts anyway.) */
    if (live < u.tensors && !u.scattered)
        u.staged = true;
    if ((st = must_stop(w, job)) != GR_OK)
        goto out_finish;
    if (u.staged && (st = ensure_staging(w, g, u.elems, &detail)) != GR_OK)
        goto out_finish;

    memset(&it, 0, sizeof(it));
    it.graph = g;
    it.tensor = &w->view;
    it.index = u.index;
    it.host_hold = &job->host_hold;
    it.staged = u.staged;
    st = gr_graph_layout(g, u.elems, it.offsets, &bytes);
    if (st != GR_OK) { /* validated at submit: cannot happen */
        st = gr_error_set(&detail, GR_ERR_INTERNAL, u.index, NULL, "layout failed");
        goto out_finish;
    }
    if (trace)
        gr__trace_push("budget wait");
    t0 = gr_now_ns();
    st = gr_budget_acquire(dev->budget, bytes, job->deadline_ns, &job->stop);
    gr__stats_observe(&stats->budget_wait, gr_now_ns() - t0);
    if (trace)
        gr__trace_pop();
    if (st != GR_OK)
        goto out_finish;
    st = gr_arena_alloc(dev->arena, bytes, job->deadline_ns, &job->stop, &w->block);
    if (st == GR_ERR_OUT_OF_MEMORY)
        gr_error_set(&detail, st, u.index, NULL,
                     "cannot place %llu bytes in device %u's arena (injected fault)",
                     (unsigned long long)bytes, dev->id);
    if (st != GR_OK)
        goto out_release_budget;
    /* The waits above can be long; do not start work that is no longer wanted. */
    if ((st = must_stop(w, job)) != GR_OK)
        goto out_free_block;

    it.base = (unsigned char *)dev->region + w->block.offset;
    set_view(w, job, &u);
    if (u.scattered)
        scatter_list(w, job, &u, &it);
    t0 = gr_now_ns();
    if (u.staged) {
        if (trace)
            gr__trace_push("gather");
        stage(w, job, &u, true);
        if (trace)
            gr__trace_pop();
    }
    reached_device = true;
    st = w->rt->backend->run(w, &it, &reach, &detail);
    if (reach != GR_REACH_ITERATION)
        out_of_service(w, reach);
    if (st == GR_OK && u.staged) {
        if (trace)
            gr__trace_push("scatter");
        stage(w, job, &u, false);
        if (trace)
            gr__trace_pop();
    }
    gr__stats_observe(&stats->iteration, gr_now_ns() - t0);
    if (st == GR_OK) {
        gr__stats_copied(stats, g, u.scattered ? live_elems(job, &u, w->live) : u.elems);
        if (u.staged)
            gr__stats_add(&stats->units_staged, 1);
        else if (u.scattered)
            gr__stats_add(&stats->units_scattered, 1);
        else
            gr__stats_add(&stats->units_direct, 1);
        atomic_fetch_add_explicit(&dev->iterations_done, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&dev->iterations_failed, 1, memory_order_relaxed);
    }

out_free_block:
    gr_arena_free(dev->arena, &w->block);
out_release_budget:
    gr_budget_release(dev->budget, bytes);
out_finish:
    /* Lost before the iteration reached it: another device's workers take the unit. */
    if (st == GR_ERR_DEVICE_LOST && !reached_device && device_out(w)) {
        for (uint32_t k = 0; k < u.tensors; k++)
            if (w->live[k])
                gr__job_unstart_piece(job, u.index + k);
        give_back(w, t);
        if (trace)
            gr__trace_pop();
        return true;
    }
    for (uint32_t k = 0; k < u.tensors; k++)
        gr__job_finish_piece(job, u.index + k, w->live[k], st, &detail);
    if (trace)
        gr__trace_pop();
    return false;
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

/* Put task t, none of whose parts has reached a device, back in the ring for the workers of
 * the devices that work; its reference goes with it. When the ring refuses (the job was
 * stopped, its deadline passed, the runtime shut down), its parts end with that status, as
 * when gr_job_submit cannot queue a unit. */
static void give_back(gr_worker *w, const gr_task *t)
{
    gr_job *job = t->job;
    gr_status st = gr_ring_push(w->rt->ring, t, job->deadline_ns, &job->stop);

    if (st == GR_OK)
        return;
    gr__job_drop_unit(job, t->index, st);
    gr__job_unref(job);
}

/* The device was lost between the check and the pop: give the task back, still queued, to
 * the workers of the devices that work. Returns true when the task is handled. */
static bool hand_back(gr_worker *w, gr_task *t)
{
    if (!device_out(w))
        return false;
    give_back(w, t);
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
    w->live = gr__calloc(GR_UNIT_MAX_TENSORS, sizeof(*w->live));
    w->copies = gr__calloc((size_t)GR_UNIT_MAX_TENSORS * GR_MAX_PORTS, sizeof(*w->copies));
    w->copy_ends =
        gr__calloc((size_t)GR_UNIT_MAX_TENSORS * GR_MAX_PORTS, sizeof(*w->copy_ends));
    if (rt->backend->batch_copies != NULL)
        w->copies_out =
            gr__calloc((size_t)GR_UNIT_MAX_TENSORS * GR_MAX_PORTS, sizeof(*w->copies_out));
    if (w->live == NULL || w->copies == NULL || w->copy_ends == NULL ||
        (rt->backend->batch_copies != NULL && w->copies_out == NULL))
        st = gr_error_set(&err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    else
        st = rt->backend->worker_open(w, &err);
    /* After worker_open: with a private context, the buffer is made under it. Should it
     * fail even as ordinary memory, the first staged unit tries again (ensure_staging).
     * A private context goes with the runtime, and what is pinned under it too: a pool
     * slab, which others share, is never made on this thread (completion callbacks run
     * here and may call gr_host_alloc). */
    if (st == GR_OK) {
        gr_error_info ignored;

        if (rt->cfg.context_mode == GR_CONTEXT_PRIVATE)
            gr__host_pool_no_slabs_here();
        grow_staging(w, staging_at_start(w), &ignored);
    }
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
        goto out_free;

    gr__stats_bind_worker(rt->stats, w->id);
    while (park_while_device_lost(w) && gr_ring_pop(rt->ring, &t, GR_NO_DEADLINE) == GR_OK) {
        if (hand_back(w, &t) || run_task(w, &t))
            continue;
        gr__job_unref(t.job); /* the task's reference */
    }
    gr__stats_unbind();
    /* Before worker_close: pinned staging was allocated while the worker's context was
     * current, and a private context takes its allocations with it when it is destroyed. */
    free_staging(w);
    rt->backend->worker_close(w);
out_free:
    free(w->copies_out);
    free(w->copy_ends);
    free(w->copies);
    free(w->live);
    return NULL;
}

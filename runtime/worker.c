/*
 * worker.c - the worker loop: pop a task (a unit of a job, units.h), take budget and arena
 * space, gather a staged unit's inputs (or list a scattered unit's copies for the backend),
 * run the iteration on the backend, scatter its outputs, give everything back, finish the
 * unit's parts.
 *
 * Every wait here is on behalf of the task's job, so it uses the job's deadline and stop
 * flag: a canceled, expired or shut-down job never leaves a worker asleep. The budget is
 * taken before the arena block, and both are given back before the index ends, so when a
 * job completes none of its memory is held. Nothing is held across the next pop, but with
 * two units in flight (gr_worker.in_flight) the one launched last: then the worker never
 * sleeps while it holds it (work(), run_task), and the parts it ends in between (their
 * completion callbacks included) run while it does.
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

#include "runtime/core/copier.h"
#include "runtime/base/fault.h"
#include "runtime/hostpool.h"
#include "runtime/runtime.h"
#include "runtime/base/sync.h"
#include "runtime/base/trace.h"

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
            return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
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
static void set_view(gr_worker *w, gr_slot *sl, const gr_job *job, const gr_unit *u)
{
    const gr_graph *g = job->graph;
    const gr_tensor *t = &job->tensors[u->index];
    gr_tensor *view = &sl->view;

    memset(view, 0, sizeof(*view));
    view->elems = u->elems;
    /* The shape is the tensor's when the unit is the whole of it; a chunk or a batch (only
     * ever of elementwise kernels, which ignore it) is one dimension. */
    if (u->tensors == 1 && u->offset == 0 && u->elems == t->elems) {
        view->rank = t->rank;
        memcpy(view->shape, t->shape, sizeof(view->shape));
    }
    for (uint32_t p = 0; p < g->n_inputs; p++)
        view->in[p] = u->staged ? (const void *)(w->staging + w->staging_at[p])
                                  : (const void *)((const char *)t->in[p] +
                                                   gr_graph_port_offset(g, false, p, u->offset));
    for (uint32_t p = 0; p < g->n_outputs; p++)
        view->out[p] = u->staged ? (void *)(w->staging + w->staging_at[g->n_inputs + p])
                                   : (void *)((char *)t->out[p] +
                                              gr_graph_port_offset(g, true, p, u->offset));
}

/* Copy the live parts of a staged unit between the tensors and the staging buffer: inputs
 * in (gather), or outputs out (scatter). Each part keeps its place in the unit, live or
 * not, so the kernels see the unit's elements where the plan put them. */
static void stage(gr_worker *w, gr_slot *sl, const gr_job *job, const gr_unit *u, bool gather)
{
    const gr_graph *g = job->graph;
    uint32_t ports = gather ? g->n_inputs : g->n_outputs;
    uint64_t pos = 0; /* elements of the unit before this part */
    size_t n = 0;

    for (uint32_t k = 0; k < u->tensors; k++) {
        const gr_tensor *t = &job->tensors[u->index + k];
        uint64_t elems = u->tensors == 1 ? u->elems : t->elems;
        uint64_t skip = u->tensors == 1 ? u->offset : 0;

        for (uint32_t p = 0; sl->live[k] && p < ports; p++) {
            struct gr_copy *c = &sl->copies[n++];
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
    gr__copier_copy(w->rt->copier, sl->copies, n, w->copy_ends);
}

/* A scattered unit's copies, for the backend to do itself (gr_iteration.h2d): each live
 * part's inputs from where they lie into its place in the device buffers, and its outputs
 * back. A part keeps its place in the unit, live or not, as in a staged unit. */
static void scatter_list(gr_slot *sl, const gr_job *job, const gr_unit *u, gr_iteration *it)
{
    const gr_graph *g = job->graph;
    uint64_t pos = 0;
    uint32_t n_in = 0, n_out = 0;

    for (uint32_t k = 0; k < u->tensors; k++) {
        const gr_tensor *t = &job->tensors[u->index + k];

        for (uint32_t i = 0; sl->live[k] && i < g->n_nodes; i++) {
            const gr_node *n = &g->nodes[i];

            if (n->kind == GR_NODE_H2D)
                sl->copies[n_in++] = (gr_copy){
                    it->base + it->offsets[n->write] + gr_graph_port_offset(g, false, n->port, pos),
                    t->in[n->port], gr_graph_port_bytes(g, false, n->port, t->elems)};
            else if (n->kind == GR_NODE_D2H)
                sl->copies_out[n_out++] = (gr_copy){
                    t->out[n->port],
                    it->base + it->offsets[n->reads[0]] +
                        gr_graph_port_offset(g, true, n->port, pos),
                    gr_graph_port_bytes(g, true, n->port, t->elems)};
        }
        pos += t->elems;
    }
    it->h2d = sl->copies;
    it->n_h2d = n_in;
    it->d2h = sl->copies_out;
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

/* A unit in the worker's hands, from its pop to its end: kept across the launch of the
 * worker's next unit, so that the second is launched while the first's copies still run
 * (gr_worker.in_flight). Its phases: begin (which parts are live), prepare (staging, the
 * layout), place (budget, then arena block), launch, complete (wait, scatter, give back,
 * end its parts). */
typedef struct unit_run {
    gr_task task;
    gr_unit u;
    gr_iteration it;
    gr_slot *slot;
    gr_error_info detail;
    gr_status st;
    uint64_t bytes;      /* the unit's device bytes (its layout) */
    bool budget_held;    /* `bytes` of the budget taken */
    bool placed;         /* slot->block placed in the arena */
    bool reached_device; /* the backend got the iteration */
    bool refused;        /* the backend refused its copies as laid out (unit_restage) */
    bool const_used;     /* counted as a user of its job's constants (constants.h) */
    bool launched;       /* launched apart (gr_backend_ops.launch): finish is owed */
    bool streamed;       /* its copies streamed through the staging buffer (streams) */
    int64_t t0;          /* when its device part began (the iteration statistic) */
} unit_run;

/* Whether unit u of the job is streamed (gr_iteration.streamed): a whole tensor, neither
 * staged nor scattered, some of whose host memory is not DMA-ready, on a backend that
 * streams, with pinned staging. Such a unit comes from a graph that cannot be cut (the
 * planner stages the chunks of one that can) or one planned when its memory was ready;
 * left to the driver, its copies from pageable memory run on the worker's thread at a
 * fraction of the link's speed (a 400 MB tensor in and out took 58 ms on the H100: the
 * driver stages it through small buffers of its own on one core), while the copier's
 * threads and the staging buffer sit idle. */
static bool streams(const gr_worker *w, gr_job *job, const gr_unit *u)
{
    const gr_backend_ops *b = w->rt->backend;
    const gr_graph *g = job->graph;
    const gr_tensor *t = &job->tensors[u->index];

    if (u->staged || u->scattered || u->tensors != 1 || u->offset != 0 ||
        u->elems != t->elems || !g->copies_at_ends || w->staging_pageable ||
        w->staging_bytes < GR_STREAM_PARTS * 4096ull || b->streamed_copies == NULL ||
        !b->streamed_copies())
        return false;
    for (uint32_t q = 0; q < g->n_inputs + g->n_outputs; q++) {
        bool out = q >= g->n_inputs;
        uint32_t p = out ? q - g->n_inputs : q;
        const void *host = out ? (const void *)t->out[p] : t->in[p];
        uint64_t bytes = gr_graph_port_bytes(g, out, p, t->elems);

        if (bytes != 0 && !w->env->host_ready(w->env, &job->host_hold, host, bytes))
            return true;
    }
    return false;
}

/* The unit's parts as they start; false when none is live (each already ended, stopped or
 * failed elsewhere): the unit ends at once. */
static bool unit_begin(gr_worker *w, unit_run *r, const gr_task *t, uint32_t slot)
{
    gr_job *job = t->job;
    uint32_t live = 0;

    memset(r, 0, sizeof(*r));
    r->task = *t;
    r->slot = &w->slots[slot];
    r->it.slot = slot;
    gr__job_unit(job, t->index, &r->u);
    if (w->env->trace)
        gr__trace_push_unit(job->id, r->u.index, r->u.tensors, r->u.offset, r->u.elems,
                            job->tensors[r->u.index].elems);
    live = gr__job_start_pieces(job, r->u.index, r->u.tensors, r->slot->live);
    /* A direct batch copies its whole range: with parts already ended, whose outputs must
     * stay untouched, only the live ones may be copied, so stage it. (A scattered one
     * copies only its live parts anyway.) */
    if (live < r->u.tensors && !r->u.scattered)
        r->u.staged = true;
    r->streamed = live > 0 && streams(w, job, &r->u);
    return live > 0;
}

/* What the unit needs before it takes device memory: not stopped, staging room (the
 * worker's one buffer: no other staged unit may be in flight), its layout. */
static gr_status unit_prepare(gr_worker *w, unit_run *r)
{
    gr_job *job = r->task.job;
    const gr_graph *g = job->graph;
    gr_status st;

    if ((st = must_stop(w, job)) != GR_OK)
        return st;
    if (r->u.staged && (st = ensure_staging(w, g, r->u.elems, &r->detail)) != GR_OK)
        return st;
    r->it.graph = g;
    r->it.tensor = &r->slot->view;
    r->it.index = r->u.index;
    r->it.host_hold = &job->host_hold;
    r->it.staged = r->u.staged;
    if (gr__graph_layout(g, r->u.elems, r->it.offsets, &r->bytes) != GR_OK) /* validated at
                                                                              submit */
        return gr__error_set(&r->detail, GR_ERR_INTERNAL, r->u.index, NULL, "layout failed");
    return GR_OK;
}

/* Budget, then the arena block. With `wait` false (the worker holds another unit, whose
 * memory others may be waiting for: it must not sleep), takes them only if that needs no
 * wait, else sets *would_wait and takes nothing. */
static gr_status unit_place(gr_worker *w, unit_run *r, bool wait, bool *would_wait)
{
    gr_job *job = r->task.job;
    gr_device *dev = w->dev;
    gr_counters *stats = gr__stats_worker(w->rt->stats, w->id);
    bool trace = w->env->trace;
    int64_t t0;
    gr_status st;

    if (trace)
        gr__trace_push("budget wait");
    t0 = gr_now_ns();
    st = gr__budget_try_acquire(dev->budget, r->bytes);
    if (wait && st == GR_ERR_TIMEOUT) {
        /* Waiting, it lets another job's unused constants go (constants.h). */
        gr__const_wait_begin(w, job);
        st = gr__budget_acquire(dev->budget, r->bytes, job->deadline_ns, &job->stop);
        gr__const_wait_end(w);
    }
    if (trace)
        gr__trace_pop();
    if (!wait && st == GR_ERR_TIMEOUT) {
        *would_wait = true; /* the blocking request that follows is the one observed */
        return GR_OK;
    }
    gr__stats_observe(&stats->budget_wait, gr_now_ns() - t0);
    if (st != GR_OK)
        return st;
    r->budget_held = true;
    st = gr__arena_try_alloc(dev->arena, r->bytes, &r->slot->block);
    if (wait && st == GR_ERR_TIMEOUT) {
        gr__const_wait_begin(w, job);
        st = gr__arena_alloc(dev->arena, r->bytes, job->deadline_ns, &job->stop,
                             &r->slot->block);
        gr__const_wait_end(w);
    }
    if (!wait && st == GR_ERR_TIMEOUT) {
        gr__budget_release(dev->budget, r->bytes);
        r->budget_held = false;
        *would_wait = true;
        return GR_OK;
    }
    if (st == GR_ERR_OUT_OF_MEMORY)
        gr__error_set(&r->detail, st, r->u.index, NULL,
                      "cannot place %llu bytes in device %u's arena (injected fault)",
                      (unsigned long long)r->bytes, dev->id);
    if (st != GR_OK)
        return st;
    r->placed = true;
    /* The waits above can be long; do not start work that is no longer wanted. */
    return must_stop(w, job);
}

/* Give back what unit_place took (the unit has not reached the backend). */
static void unit_unplace(gr_worker *w, unit_run *r)
{
    if (r->placed)
        gr__arena_free(w->dev->arena, &r->slot->block);
    if (r->budget_held)
        gr__budget_release(w->dev->budget, r->bytes);
    r->placed = r->budget_held = false;
}

static void unit_complete(gr_worker *w, unit_run *r);

/* The unit's memory, and its job's constants when the graph has some: the constants made
 * resident first, then the unit's own memory, then the unit counted as their user, so that
 * no wait holds anything (constants.h). Evicted while the unit waited for its memory, they
 * are loaded again. Completes *pending first wherever the worker would have to wait. */
static gr_status unit_resources(gr_worker *w, unit_run *r, unit_run **pending)
{
    gr_job *job = r->task.job;
    bool consts = job->graph->n_consts > 0;

    for (;;) {
        bool would_wait = false;
        gr_status st;

        if (consts) {
            gr_fault_reach reach = GR_REACH_ITERATION;

            st = gr__const_load(w, job, *pending == NULL, &would_wait, &reach, &r->detail);
            if (would_wait) {
                unit_complete(w, *pending);
                *pending = NULL;
                continue;
            }
            if (reach != GR_REACH_ITERATION && reach != GR_REACH_REFUSED_COPY)
                out_of_service(w, reach);
            if (st != GR_OK)
                return st;
        }
        st = unit_place(w, r, *pending == NULL, &would_wait);
        if (would_wait) {
            unit_complete(w, *pending);
            *pending = NULL;
            st = unit_place(w, r, true, NULL);
        }
        if (st != GR_OK || !consts)
            return st;
        if ((r->const_used = gr__const_use(w, job, &r->it.constants)))
            return GR_OK;
        unit_unplace(w, r);
    }
}

/* Hand the unit to the backend: launched apart when the worker may have two in flight,
 * else run to completion. */
static gr_status unit_launch(gr_worker *w, unit_run *r)
{
    gr_job *job = r->task.job;
    gr_fault_reach reach = GR_REACH_ITERATION;
    gr_status st;

    r->it.base = (unsigned char *)w->dev->region + r->slot->block.offset;
    set_view(w, r->slot, job, &r->u);
    if (r->u.scattered || r->streamed)
        scatter_list(r->slot, job, &r->u, &r->it);
    r->it.streamed = r->streamed;
    r->t0 = gr_now_ns();
    if (r->u.staged) {
        if (w->env->trace)
            gr__trace_push("gather");
        stage(w, r->slot, job, &r->u, true);
        if (w->env->trace)
            gr__trace_pop();
    }
    r->reached_device = true;
    if (w->in_flight > 1) {
        st = w->rt->backend->launch(w, &r->it, &reach, &r->detail);
        r->launched = st == GR_OK;
    } else {
        st = w->rt->backend->run(w, &r->it, &reach, &r->detail);
    }
    /* Staged, its copies are graphrun's own: a refusal then is a failure like any other. */
    r->refused = st != GR_OK && reach == GR_REACH_REFUSED_COPY && !r->u.staged;
    if (reach != GR_REACH_ITERATION && reach != GR_REACH_REFUSED_COPY)
        out_of_service(w, reach);
    return st;
}

/* The driver refused one of the unit's copies as laid out (backend.h: GR_REACH_REFUSED_COPY),
 * before any copy out wrote host memory: the memory the planner took for one allocation was
 * not (a tensor over two, or a driver that says less than it should). Make the unit staged:
 * every copy is then between the device and the worker's staging buffer, one allocation of
 * graphrun's own, and the CPU moves the tensors, wherever they lie. The unit keeps its place
 * in the arena: a staged layout of the same elements is the same bytes. */
static gr_status unit_restage(gr_worker *w, unit_run *r)
{
    gr_counters *stats = gr__stats_worker(w->rt->stats, w->id);

    gr__stats_add(&stats->copies_refused, 1);
    gr__runtime_copy_refused(w->rt, r->u.index, &r->detail);
    r->refused = false;
    r->u.staged = true;
    r->u.scattered = false;
    r->streamed = r->it.streamed = false;
    r->it.staged = true;
    r->it.h2d = r->it.d2h = NULL;
    r->it.n_h2d = r->it.n_d2h = 0;
    memset(&r->detail, 0, sizeof(r->detail));
    return ensure_staging(w, r->task.job->graph, r->u.elems, &r->detail);
}

/* Give the unit's memory back and end its parts (or give the task back to the ring, when
 * its device was lost before the iteration reached it), and drop the task's reference. */
static void unit_end(gr_worker *w, unit_run *r)
{
    gr_job *job = r->task.job;
    gr_device *dev = w->dev;

    /* Its own range: a profile tells the worker's accounting between units apart. */
    if (w->env->trace)
        gr__trace_push("end");
    if (r->placed)
        gr__arena_free(dev->arena, &r->slot->block);
    if (r->budget_held)
        gr__budget_release(dev->budget, r->bytes);
    if (r->const_used) /* before the parts end: the job's last end releases the constants */
        gr__const_unuse(w, job);
    /* Lost before the iteration reached it: another device's workers take the unit. */
    if (r->st == GR_ERR_DEVICE_LOST && !r->reached_device && device_out(w)) {
        for (uint32_t k = 0; k < r->u.tensors; k++)
            if (r->slot->live[k])
                gr__job_unstart_piece(job, r->u.index + k);
        give_back(w, &r->task); /* the task's reference goes with it */
    } else {
        gr__job_finish_pieces(job, r->u.index, r->u.tensors, r->slot->live, r->st,
                              &r->detail);
        gr__job_unref(job); /* the task's reference */
    }
    if (w->env->trace) {
        gr__trace_pop(); /* end */
        gr__trace_pop(); /* the unit */
    }
}

/* After the backend: wait for a launched unit, scatter a staged one's outputs, count it,
 * and end it. */
static void unit_complete(gr_worker *w, unit_run *r)
{
    gr_job *job = r->task.job;
    gr_device *dev = w->dev;
    gr_counters *stats = gr__stats_worker(w->rt->stats, w->id);

    if (r->launched) { /* never with NVTX ranges on: a unit at a time then (runtime.c) */
        gr_fault_reach reach = GR_REACH_ITERATION;

        r->st = w->rt->backend->finish(w, r->it.slot, &reach, &r->detail);
        if (reach != GR_REACH_ITERATION)
            out_of_service(w, reach);
    }
    if (r->st == GR_OK && r->u.staged) {
        if (w->env->trace)
            gr__trace_push("scatter");
        stage(w, r->slot, job, &r->u, false);
        if (w->env->trace)
            gr__trace_pop();
    }
    gr__stats_observe(&stats->iteration, gr_now_ns() - r->t0);
    if (r->st == GR_OK) {
        gr__stats_copied(stats, job->graph,
                         r->u.scattered ? live_elems(job, &r->u, r->slot->live) : r->u.elems);
        if (r->u.staged)
            gr__stats_add(&stats->units_staged, 1);
        else if (r->streamed)
            gr__stats_add(&stats->units_streamed, 1);
        else if (r->u.scattered)
            gr__stats_add(&stats->units_scattered, 1);
        else
            gr__stats_add(&stats->units_direct, 1);
        atomic_fetch_add_explicit(&dev->iterations_done, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&dev->iterations_failed, 1, memory_order_relaxed);
    }
    unit_end(w, r);
}

/*
 * Run task t in r (the worker's slot `slot`), with `pending` (NULL: none) the unit the
 * worker has launched before it and not yet completed. The new unit is launched before the
 * pending one is waited for, so the device has the next unit's work queued when the
 * pending one's copies end; the pending one is completed first instead when the new one
 * could only wait for memory (the pending one's may be what it waits for) or needs the
 * staging buffer the pending one uses. Returns the unit left in flight (NULL: none).
 */
static unit_run *run_task(gr_worker *w, unit_run *r, const gr_task *t, uint32_t slot,
                          unit_run *pending)
{
    if (!unit_begin(w, r, t, slot)) {
        unit_end(w, r);
        return pending;
    }
    /* A streamed unit moves its copies through the staging buffer as it launches. */
    if (pending != NULL && (r->u.staged || r->streamed) && pending->u.staged) {
        unit_complete(w, pending);
        pending = NULL;
    }
    if ((r->st = unit_prepare(w, r)) == GR_OK)
        r->st = unit_resources(w, r, &pending);
    if (r->st != GR_OK) {
        /* Given back to the ring (its device lost before it reached it) a unit may wait
         * for room there: not with another one held. */
        if (pending != NULL && r->st == GR_ERR_DEVICE_LOST) {
            unit_complete(w, pending);
            pending = NULL;
        }
        unit_end(w, r);
        return pending;
    }
    r->st = unit_launch(w, r);
    if (r->refused) {
        /* Staged, it needs the staging buffer, which a pending staged unit still uses. */
        if (pending != NULL && pending->u.staged) {
            unit_complete(w, pending);
            pending = NULL;
        }
        if ((r->st = unit_restage(w, r)) == GR_OK)
            r->st = unit_launch(w, r);
    }
    if (!r->launched) { /* ran to completion, or failed to launch */
        unit_complete(w, r);
        return pending;
    }
    if (pending != NULL) {
        gr__stats_add(&gr__stats_worker(w->rt->stats, w->id)->units_overlapped, 1);
        unit_complete(w, pending);
    }
    return r;
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
    gr_status st = gr__ring_push(w->rt->ring, t, job->deadline_ns, &job->stop);

    if (st == GR_OK)
        return;
    gr__job_drop_unit(job, t->index, st);
    gr__job_unref(job);
}

/* The per-unit scratch of each slot the worker uses (w->in_flight), and the copier's. */
static bool alloc_slots(gr_worker *w)
{
    const size_t copies = (size_t)GR_UNIT_MAX_TENSORS * GR_MAX_PORTS;
    bool batch = w->rt->backend->batch_copies != NULL ||
                 w->rt->backend->streamed_copies != NULL; /* both need copies_out */
    bool ok;

    w->copy_ends = gr__calloc(copies, sizeof(*w->copy_ends));
    ok = w->copy_ends != NULL;
    for (uint32_t i = 0; ok && i < w->in_flight; i++) {
        gr_slot *sl = &w->slots[i];

        sl->live = gr__calloc(GR_UNIT_MAX_TENSORS, sizeof(*sl->live));
        sl->copies = gr__calloc(copies, sizeof(*sl->copies));
        if (batch)
            sl->copies_out = gr__calloc(copies, sizeof(*sl->copies_out));
        ok = sl->live != NULL && sl->copies != NULL && (!batch || sl->copies_out != NULL);
    }
    return ok;
}

static void free_slots(gr_worker *w)
{
    for (uint32_t i = 0; i < GR_WORKER_SLOTS; i++) {
        free(w->slots[i].copies_out);
        free(w->slots[i].copies);
        free(w->slots[i].live);
        memset(&w->slots[i], 0, sizeof(w->slots[i]));
    }
    free(w->copy_ends);
    w->copy_ends = NULL;
}

/* The worker's loop: pop a task, run it; with in_flight > 1 keep the last unit launched
 * while the next is popped and launched, and complete it before waiting for anything: the
 * ring when it is empty (a blocking pop), a device gone out of service. */
static void work(gr_worker *w)
{
    gr_runtime *rt = w->rt;
    unit_run runs[GR_WORKER_SLOTS], *pending = NULL;
    gr_task t;

    for (;;) {
        uint32_t slot;

        if (pending != NULL && (device_out(w) || !gr__ring_try_pop(rt->ring, &t))) {
            unit_complete(w, pending);
            pending = NULL;
            continue;
        }
        if (pending == NULL &&
            (!park_while_device_lost(w) || gr__ring_pop(rt->ring, &t, GR_NO_DEADLINE) != GR_OK))
            break;
        if (device_out(w)) { /* the device went out after the check above */
            if (pending != NULL) { /* give_back may sleep on a full ring */
                unit_complete(w, pending);
                pending = NULL;
            }
            give_back(w, &t);
            continue;
        }
        slot = pending == &runs[0] ? 1 : 0;
        pending = run_task(w, &runs[slot], &t, slot, pending);
    }
}

void *gr__worker_main(void *arg)
{
    gr_worker *w = arg;
    gr_runtime *rt = w->rt;
    gr_error_info err;
    gr_status st;

    memset(&err, 0, sizeof(err));
    st = alloc_slots(w) ? rt->backend->worker_open(w, &err)
                        : gr__error_set(&err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
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
    work(w);
    gr__stats_unbind();
    /* Before worker_close: pinned staging was allocated while the worker's context was
     * current, and a private context takes its allocations with it when it is destroyed. */
    free_staging(w);
    rt->backend->worker_close(w);
out_free:
    free_slots(w);
    return NULL;
}

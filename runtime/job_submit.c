/*
 * job_submit.c - gr_job_submit: every check of a request (options, constants, tensors,
 * the aliasing of their host memory), the job built and its units queued. Apart from
 * job.c because it runs once per job, before anything is shared, while job.c holds what
 * every worker races on once the job is accepted.
 *
 * Nothing runs before every check has passed (invariant 5). A job that completes, or is
 * stopped, while submit still queues its units leaves its callback to submit, which runs
 * it after storing the handle (job.c).
 */
#include "runtime/job.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/fault.h"
#include "runtime/handle.h"
#include "runtime/job_impl.h"
#include "runtime/runtime.h"
#include "runtime/base/sync.h"

typedef struct span {
    uintptr_t lo, hi;
    uint64_t index;
    uint32_t port;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

/* The first of the sorted, disjoint spans `s` that ends after `lo` (n when none). Inputs
 * come mostly in the outputs' order (in place, or the same layout): the answer is then at
 * the previous input's or just after it, so those two are tried before a binary search,
 * which costs a cache miss per step over a large job's spans. */
static uint64_t first_ending_after(const span *s, uint64_t n, uintptr_t lo, uint64_t hint)
{
    uint64_t a = 0, b = n;

    for (uint64_t h = hint; h <= hint + 1 && h <= n; h++)
        if ((h == 0 || s[h - 1].hi <= lo) && (h == n || s[h].hi > lo))
            return h;
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (s[m].hi <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/*
 * Host memory rules (invariant 6: output memory is written only by the D2H of its own
 * index): output ranges must not overlap each other, nor any other index's inputs. An
 * output may be the very same range as an input of its own index (in place) when the graph
 * orders that input's H2D before the output's D2H. Inputs may overlap freely.
 */
static gr_status check_aliasing(const gr_graph *g, const gr_tensor *t, uint64_t count,
                                gr_error_info *err)
{
    uint64_t n_out = count * g->n_outputs;
    uintptr_t max_hi = 0;
    gr_status st = GR_OK;
    span *outs;

    outs = gr__malloc(n_out * sizeof(*outs));
    if (outs == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                             "no memory to check %llu output ranges", (unsigned long long)n_out);
    for (uint64_t i = 0, k = 0; i < count; i++) {
        for (uint32_t p = 0; p < g->n_outputs; p++, k++) {
            outs[k].lo = (uintptr_t)t[i].out[p];
            outs[k].hi = outs[k].lo + gr_graph_port_bytes(g, true, p, t[i].elems);
            outs[k].index = i;
            outs[k].port = p;
        }
    }
    /* Tensors are mostly given in address order (one allocation cut in turn, or allocations
     * made one after another): then there is nothing to sort. */
    for (uint64_t k = 1; k < n_out; k++)
        if (outs[k].lo < outs[k - 1].lo) {
            qsort(outs, n_out, sizeof(*outs), span_cmp);
            break;
        }
    for (uint64_t k = 0; k < n_out; k++) {
        if (k > 0 && outs[k].lo < max_hi) {
            st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, outs[k].index, NULL,
                               "output %u of index %llu overlaps another output of this job",
                               outs[k].port, (unsigned long long)outs[k].index);
            goto out_free;
        }
        if (outs[k].hi > max_hi)
            max_hi = outs[k].hi;
    }
    /* Outputs are now disjoint and sorted (by their ends too); find the outputs each input
     * overlaps. */
    for (uint64_t i = 0, hint = 0; i < count; i++) {
        for (uint32_t q = 0; q < g->n_inputs; q++) {
            uintptr_t lo = (uintptr_t)t[i].in[q];
            uintptr_t hi = lo + gr_graph_port_bytes(g, false, q, t[i].elems);
            uint64_t a = first_ending_after(outs, n_out, lo, hint);

            hint = a;
            for (uint64_t k = a; k < n_out && outs[k].lo < hi; k++) {
                const span *o = &outs[k];
                bool in_place = o->index == i && o->lo == lo && o->hi == hi &&
                                ((g->inplace_ok[o->port] >> q) & 1);
                if (!in_place) {
                    st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                       "input %u of index %llu overlaps output %u of index %llu%s",
                                       q, (unsigned long long)i, o->port,
                                       (unsigned long long)o->index,
                                       o->index == i
                                          ? " (in place needs the very same range, and the "
                                            "graph must copy that input in before it copies "
                                            "that output out)"
                                          : "");
                    goto out_free;
                }
            }
        }
    }
out_free:
    free(outs);
    return st;
}

/* The bytes of the smallest device's arena: what one device can hold. */
static uint64_t smallest_arena(const gr_runtime *rt)
{
    uint64_t capacity = UINT64_MAX;

    for (uint32_t d = 0; d < rt->n_devices; d++)
        if (gr__arena_size(rt->devices[d].arena) < capacity)
            capacity = gr__arena_size(rt->devices[d].arena);
    return capacity;
}

static gr_status check_tensors(gr_runtime *rt, const gr_graph *g, const gr_tensor *t,
                               uint64_t count, gr_error_info *err)
{
    /* What an iteration may take: the device, less the job's constants beside it. */
    uint64_t capacity = smallest_arena(rt) - g->const_bytes;

    uint64_t widest = gr__graph_widest_port(g), last_elems = 0, bytes = 0;

    for (uint64_t i = 0; i < count; i++) {
        if (t[i].elems == 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu has 0 elements", (unsigned long long)i);
        for (uint32_t p = 0; p < GR_MAX_PORTS; p++) {
            if ((t[i].in[p] == NULL) != (p >= g->n_inputs))
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                     "index %llu: input %u is %s (the graph has %u input(s))",
                                     (unsigned long long)i, p, t[i].in[p] ? "set" : "NULL",
                                     g->n_inputs);
            if ((t[i].out[p] == NULL) != (p >= g->n_outputs))
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                     "index %llu: output %u is %s (the graph has %u output(s))",
                                     (unsigned long long)i, p, t[i].out[p] ? "set" : "NULL",
                                     g->n_outputs);
        }
        if (t[i].rank > GR_MAX_DIMS)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: rank %u (at most %d dimensions)",
                                 (unsigned long long)i, t[i].rank, GR_MAX_DIMS);
        if (t[i].rank > 0) {
            unsigned __int128 product = 1;

            for (uint32_t d = 0; d < t[i].rank; d++)
                product = t[i].shape[d] == 0 || product > UINT64_MAX ? 0
                                                                     : product * t[i].shape[d];
            if (product != t[i].elems)
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                     "index %llu: the shape's dimensions must multiply to its %llu "
                                     "elements, and none be 0",
                                     (unsigned long long)i, (unsigned long long)t[i].elems);
        }
        /* The footprint depends on the size alone, and a job's tensors mostly share one. */
        if (t[i].elems != last_elems &&
            (t[i].elems > (UINTPTR_MAX / 2) / widest ||
             gr__graph_layout(g, t[i].elems, NULL, &bytes) != GR_OK))
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: %llu elements is too large",
                                 (unsigned long long)i, (unsigned long long)t[i].elems);
        last_elems = t[i].elems;
        /* A splittable graph runs a tensor larger than the budget in chunks (units.h). */
        if (bytes > capacity && !(g->splittable && rt->cfg.split_tensors))
            return gr__error_set(err, GR_ERR_OVER_BUDGET, i, NULL,
                                 "index %llu: one iteration needs %llu device bytes but the "
                                 "budget is %llu%s, and %s",
                                 (unsigned long long)i, (unsigned long long)bytes,
                                 (unsigned long long)capacity,
                                 g->const_bytes ? " beside the job's constants" : "",
                                 g->splittable ? "splitting tensors is off (split_tensors)"
                                              : "the graph cannot be split (a kernel is not "
                                                "elementwise or a buffer is not the tensor's "
                                                "size)");
    }
    return check_aliasing(g, t, count, err);
}

/* gr_job_options.cut_elems, 0 where the options end before it. */
static uint64_t job_cut(const gr_job_options *opts)
{
    return opts->struct_size >= offsetof(gr_job_options, cut_elems) + sizeof(opts->cut_elems)
               ? opts->cut_elems
               : 0;
}

static gr_status job_alloc(gr_runtime *rt, gr_graph *g, const gr_tensor *tensors,
                           uint64_t count, const gr_job_options *opts, gr_job **out)
{
    gr_job *job = gr__calloc(1, sizeof(*job));
    uint32_t *pending;

    if (job == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    job->tensors = gr__malloc(count * sizeof(*job->tensors));
    job->slot = gr__calloc(count, sizeof(*job->slot)); /* all QUEUED, status 0 */
    if (job->tensors == NULL || job->slot == NULL)
        goto out_free;
    if (g->n_consts > 0) {
        job->consts = gr__calloc(rt->n_devices, sizeof(*job->consts));
        if (job->consts == NULL)
            goto out_free;
        for (uint32_t d = 0; d < rt->n_devices; d++)
            job->consts[d].job = job;
        memcpy(job->const_src, opts->constants, g->n_consts * sizeof(*job->const_src));
    }
    if (pthread_mutex_init(&job->mu, NULL) != 0)
        goto out_free;
    if (gr__cond_init(&job->cond) != 0)
        goto out_destroy_mu;
    memcpy(job->tensors, tensors, count * sizeof(*tensors));
    /* Held before planning: what the plan finds registered stays so while the job runs. */
    if (gr__host_cache_hold(rt->host_cache, g, job->tensors, count, opts->deadline_ns,
                            &job->host_hold) != GR_OK)
        goto out_destroy_cond;
    if (gr__runtime_plan_units(rt, g, job->tensors, count, &job->host_hold, job_cut(opts),
                               &job->units, &job->n_units, &pending) != GR_OK)
        goto out_release;
    /* Counted before the job is shared, so plain stores are published with it. */
    job->pending = (_Atomic uint32_t *)pending;
    if (job->units != NULL) {
        job->piece_failed = gr__calloc(count, sizeof(*job->piece_failed));
        if (job->piece_failed == NULL)
            goto out_release;
    }
    job->rt = rt;
    job->graph = g;
    job->count = count;
    job->deadline_ns = opts->deadline_ns;
    job->on_complete = opts->on_complete;
    job->user = opts->user;
    job->submitting = true;
    job->completion_fd = -1;
    if (gr__handle_new(job, GR_HANDLE_JOB, &job->handle) != GR_OK)
        goto out_release;
    gr__graph_ref(g);
    gr__runtime_ref(rt);
    /* The caller's handle (kept by submit until it returns), the incomplete reference, and
     * one per task that will be in the ring. */
    atomic_init(&job->refs, 2);
    atomic_init(&job->handle_refs, 2); /* the caller's, and the incomplete job's */
    *out = job;
    return GR_OK;

out_release:
    gr__host_cache_release(rt->host_cache, &job->host_hold, true); /* never accepted */
out_destroy_cond:
    pthread_cond_destroy(&job->cond);
out_destroy_mu:
    pthread_mutex_destroy(&job->mu);
out_free:
    gr__job_free_memory(job);
    return GR_ERR_OUT_OF_MEMORY;
}

/* One pointer for each of the graph's constants, and room for them on every device with
 * some left for the iterations (which check_tensors sizes against what is left). */
static gr_status check_constants(gr_runtime *rt, const gr_graph *g, const gr_job_options *opts,
                                 gr_error_info *err)
{
    bool given = opts->struct_size >= offsetof(gr_job_options, n_constants) +
                                           sizeof(opts->n_constants);
    uint32_t n = given ? opts->n_constants : 0;

    if (n != g->n_consts || (n > 0 && opts->constants == NULL))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "the graph has %u constant(s), the job options give %u "
                             "(gr_job_options.constants, n_constants)",
                             g->n_consts, n > 0 && opts->constants == NULL ? 0 : n);
    for (uint32_t c = 0; c < n; c++)
        if (opts->constants[c] == NULL)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "constant %u ('%s') is NULL", c,
                                 g->buffers[g->const_buffer[c]].name);
    if (n > 0 && g->const_bytes >= smallest_arena(rt))
        return gr__error_set(err, GR_ERR_OVER_BUDGET, GR_NO_INDEX, NULL,
                             "the graph's constants alone take %llu device bytes, and the "
                             "budget is %llu: nothing would be left for the iterations",
                             (unsigned long long)g->const_bytes,
                             (unsigned long long)smallest_arena(rt));
    return GR_OK;
}

/* A job cut only at multiples of `cut` elements (units.h): a graph that can be cut, tensors
 * of whole runs, and one run within what an iteration may take. */
static gr_status check_cut(gr_runtime *rt, const gr_graph *g, const gr_tensor *t,
                           uint64_t count, uint64_t cut, gr_error_info *err)
{
    uint64_t capacity = smallest_arena(rt) - g->const_bytes, bytes = 0, staged;

    if (cut <= 1)
        return GR_OK;
    if (!g->splittable)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "cut_elems %llu: the graph cannot be cut (a kernel is not "
                             "elementwise or a buffer is not the tensor's size)",
                             (unsigned long long)cut);
    for (uint64_t i = 0; i < count; i++)
        if (t[i].elems % cut != 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: %llu elements is not a whole number of runs of "
                                 "cut_elems %llu",
                                 (unsigned long long)i, (unsigned long long)t[i].elems,
                                 (unsigned long long)cut);
    if (gr__graph_layout(g, cut, NULL, &bytes) != GR_OK || bytes > capacity)
        return gr__error_set(err, GR_ERR_OVER_BUDGET, GR_NO_INDEX, NULL,
                             "one run of cut_elems %llu elements needs %llu device bytes but "
                             "the budget is %llu%s",
                             (unsigned long long)cut, (unsigned long long)bytes,
                             (unsigned long long)capacity,
                             g->const_bytes ? " beside the job's constants" : "");
    /* A pageable chunk is staged: one run must fit what a staged unit holds, or the
     * worker's staging buffer would grow to it (workers times a run of pinned memory). */
    staged = gr__unit_staged_most(g, rt->cfg.staging_bytes);
    if (cut > staged)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "cut_elems %llu: one run is more than a unit staged through a "
                             "worker's staging buffer holds (%llu elements with staging_bytes "
                             "%llu): give a larger staging_bytes",
                             (unsigned long long)cut, (unsigned long long)staged,
                             (unsigned long long)rt->cfg.staging_bytes);
    return GR_OK;
}

/* The checks that need no runtime state beyond the devices' sizes. */
static gr_status check_request(gr_runtime *rt, gr_graph *g, const gr_tensor *tensors,
                               uint64_t count, const gr_job_options *opts, gr_error_info *err)
{
    gr_status st;

    if (opts->magic != GR_JOB_OPTIONS_MAGIC ||
        opts->struct_size < offsetof(gr_job_options, constants))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "job options not initialized with GR_JOB_OPTIONS_INIT");
    if (count == 0)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "a job needs at least one tensor");
    if (count > UINT32_MAX)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "at most %u tensors per job", UINT32_MAX);
    if (!g->finalized)
        return gr__error_set(err, GR_ERR_INVALID_USAGE, GR_NO_INDEX, NULL,
                             "graph is not finalized (call gr_graph_finalize)");
    if ((st = check_constants(rt, g, opts, err)) != GR_OK)
        return st;
    if (gr__in_callback())
        return gr__error_set(err, GR_ERR_INVALID_USAGE, GR_NO_INDEX, NULL,
                             "gr_job_submit from a completion callback could wait on the "
                             "runtime's own threads forever; submit from another thread");
    if (atomic_load(&rt->shutdown))
        return gr__error_set(err, GR_ERR_SHUTDOWN, GR_NO_INDEX, NULL, "runtime is shut down");
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        const char *missing;

        if (n->kind == GR_NODE_KERNEL &&
            (missing = rt->backend->kernel_missing(&rt->env, n->kernel)) != NULL)
            return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, n->name,
                                 "node '%s': kernel '%s' %s, which the %s backend needs",
                                 n->name, n->kernel->name, missing, rt->backend->name);
    }
    if ((st = check_tensors(rt, g, tensors, count, err)) != GR_OK)
        return st;
    return check_cut(rt, g, tensors, count, job_cut(opts), err);
}

/* Queue every unit. On a deadline, stop or shutdown while sleeping on a full ring, the job
 * is accepted all the same: the parts of the units that never reached the ring fail with
 * that reason (an index a queued unit already started then ends failed, once its queued
 * units are done), and the stop ends the indices that no unit started. */
static void queue_tasks(gr_runtime *rt, gr_job *job)
{
    uint64_t pushed;
    gr_status st = GR_OK, why;

    atomic_fetch_add_explicit(&job->refs, job->n_units, memory_order_relaxed);
    for (pushed = 0; pushed < job->n_units; pushed++) {
        gr_task t = {job, pushed};

        st = gr__ring_push(rt->ring, &t, job->deadline_ns, &job->stop);
        if (st != GR_OK)
            break;
    }
    if (pushed == job->n_units)
        return;
    why = st == GR_ERR_TIMEOUT || st == GR_ERR_SHUTDOWN ? st : GR_ERR_CANCELED;
    for (uint64_t k = pushed; k < job->n_units; k++)
        gr__job_drop_unit(job, k, why);
    atomic_fetch_sub_explicit(&job->refs, job->n_units - pushed, memory_order_relaxed);
    gr__job_stop(job, why);
}

gr_status gr_job_submit(gr_runtime *handle, gr_graph *g, const gr_tensor *tensors,
                        uint64_t count, const gr_job_options *opts, gr_job **out,
                        gr_error_info *err)
{
    static const gr_job_options defaults = GR_JOB_OPTIONS_INIT;
    gr_status st, result;
    bool run_callback, notify;
    gr_runtime *rt;
    gr_job *job;

    if (out != NULL)
        *out = NULL;
    if (handle == NULL || g == NULL || tensors == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "runtime, graph and tensors must not be NULL");
    /* Before touching anything else: the reference, taken with the lookup, keeps the
     * runtime's memory alive however gr_runtime_destroy races with this call, and the count
     * (seq_cst, paired with the shutdown store) makes destroy wait for this submitter, or
     * this submitter see the shutdown. */
    if ((rt = gr__runtime_enter(handle, &st)) == NULL)
        return gr__error_set(err, st, GR_NO_INDEX, NULL,
                             gr__handle_get((uintptr_t)handle, GR_HANDLE_RUNTIME) != NULL
                                ? "the runtime was created by the parent of this forked "
                                  "process: a child cannot use it (create one of its own)"
                                : "not a live runtime: it was destroyed (or never created)");
    if ((st = check_request(rt, g, tensors, count, opts ? opts : &defaults, err)) != GR_OK)
        goto out_leave;
    notify = opts != NULL && opts->struct_size >= offsetof(gr_job_options, notify) +
                                                       sizeof(opts->notify) &&
             opts->notify != 0;
    if (notify && out == NULL) {
        st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                           "gr_job_options.notify needs a handle to reap: out is NULL");
        goto out_leave;
    }
    if ((st = job_alloc(rt, g, tensors, count, opts ? opts : &defaults, &job)) != GR_OK) {
        gr__error_set(err, st, GR_NO_INDEX, NULL, "no memory for a job of %llu tensors",
                      (unsigned long long)count);
        goto out_leave;
    }
    job->notify = notify; /* before the job is shared: it may complete while queuing */
    job->id = gr__stats_job_submitted(rt->stats);
    GR_LOG(&rt->log, GR_LOG_DEBUG, "job %llu submitted: %llu tensor(s) in %llu unit(s)",
           (unsigned long long)job->id, (unsigned long long)count,
           (unsigned long long)job->n_units);
    gr__runtime_track_job(rt, job);
    queue_tasks(rt, job);
    if (out != NULL) {
        atomic_store(&job->handle_held, true);
        *out = (gr_job *)job->handle;
    }

    pthread_mutex_lock(&job->mu);
    job->submitting = false;
    run_callback = job->callback_pending;
    result = gr__job_result_locked(job);
    pthread_mutex_unlock(&job->mu);
    if (run_callback)
        gr__job_finish(job, result); /* left to us by job_all_ended */
    if (out == NULL) { /* detached: the handle's references, which nobody holds */
        gr__job_drop_handle(job);
        gr__job_unref(job);
    }

out_leave:
    gr__runtime_leave(rt);
    return st;
}

/*
 * stress_graphs.c - what a stress job computes and how its outcome is checked (stress.c):
 * the graphs a job goes through (the seed, the user kernel "stress_affine" registered as a
 * user would, the float16 graph, the seed as an expression kernel), its tensors filled with
 * the workload's inputs, and the check of a completed job's record against each graph's
 * reference, bit for bit. Apart from the threads that submit the jobs, as every kind of
 * submitter (plain, notify, churn, cache) checks its jobs the same way. Any thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "tools/graphrun/stress_impl.h"
#include "tools/graphrun/workload.h"

static const char affine_source[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void stress_affine(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a)\n"
    "    GR_OUT(a, float)[i] = __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], 0.5f), 0.25f);\n"
    "}\n";

float gr__stress_affine_c_ref(float x, float c)
{
    volatile float half = x * 0.5f; /* two roundings, as the CUDA version */
    return half + c;
}

static float affine_ref(float x)
{
    return gr__stress_affine_c_ref(x, 0.25f);
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
gr_graph *gr__stress_user_graph(gr_runtime *rt, char *why, size_t size)
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
        if (job != NULL && err.status == GR_OK) /* done, and wrong: no error says so */
            snprintf(why, size, "the user kernel's check tensor came out %g, not %g",
                     (double)x, (double)affine_ref(1.0f));
        else
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
        float in = gr_workload_value(id, index, j), done = gr__stress_affine_c_ref(in, c);

        if (memcmp(&out[j], &done, 4) != 0 && !(partial && memcmp(&out[j], &in, 4) == 0)) {
            if (bad++ == 0)
                *first_bad = j;
        }
    }
    return bad;
}

/* The float16 graph: x = x * 0.5 in float16, then x = x + 0.25, in place. */
const char gr__stress_half_spec[] =
    "buffer x float16\nh2d l: in0 -> x\nkernel m: mul(x, 0.5) -> x\n"
    "kernel a: add(x, 0.25) -> x\nd2h s: x -> out0\n"
    "l -> m -> a -> s\n";

/* graph/examples/seed_expr.graph: ten rounds of sqrt(x * 1.01 + 1.01), nested. */
const char gr__stress_expr_spec[] =
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

gr_graph *gr__stress_graph_of(shared *s, int which)
{
    return which == G_USER ? s->user : which == G_HALF ? s->half : which == G_EXPR ? s->expr
                                                                                   : s->g;
}

/* Fill tensors of random sizes for job `id` (of `big` ranges: CACHE_ELEMS each, the float16
 * graph never, as its ranges would be under the cache's minimum). */
int gr__stress_fill_job(submitter *w, float **data, gr_tensor *t, uint64_t *elems, uint64_t count,
                    uint64_t id, bool big)
{
    shared *s = w->s;
    int which = (int)gr__stress_below(&w->rng, 4);

    if ((which == G_USER && s->user == NULL) || (big && which == G_HALF))
        which = G_SEED;
    for (uint64_t i = 0; i < count; i++) {
        elems[i] = big ? CACHE_ELEMS
                   : gr__stress_below(&w->rng, 4) == 0
                       ? 1 + gr__stress_below(&w->rng, 16)
                       : 1 + gr__stress_below(&w->rng, s->max_elems);
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
void gr__stress_check_job(shared *s, record *r, float *const *data, const uint64_t *elems,
                      uint64_t count, uint64_t id, int which, float c, uint64_t kind)
{
    gr_stress_report *rep = s->r;
    uint64_t done = 0, failed = 0, canceled = 0, fault_failed = 0;
    bool faults = s->c->faults != NULL, user = which == G_USER || which == G_CHURN;
    bool half = which == G_HALF;

    if (atomic_load(&r->calls) != 1)
        gr__stress_breach(s, &rep->callback_errors, "job %llu: callback ran %d times",
                          (unsigned long long)id, atomic_load(&r->calls));
    if (r->anomalies != 0)
        gr__stress_breach(s, &rep->anomalies, "job %llu: %llu indices ended twice",
                          (unsigned long long)id, (unsigned long long)r->anomalies);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t where, bad;

        if (r->state[i] == GR_INDEX_DONE) {
            done++;
            bad = user   ? check_affine(data[i], elems[i], id, i, false, c, &where)
                  : half ? check_half((uint16_t *)data[i], elems[i], id, i, false, &where)
                         : gr_workload_check_seed(data[i], 0, elems[i], id, i, &where);
            if (bad)
                gr__stress_breach(s, &rep->wrong_outputs,
                                  "job %llu index %llu: %llu wrong elements, "
                                  "first %llu",
                                  (unsigned long long)id, (unsigned long long)i,
                                  (unsigned long long)bad, (unsigned long long)where);
            continue;
        }
        if (r->state[i] == GR_INDEX_FAILED) {
            gr_status why = r->status[i];

            failed++;
            if (faults && (why == GR_ERR_OUT_OF_MEMORY || why == GR_ERR_CUDA))
                fault_failed++;
            else if (!(kind == 7 && why == GR_ERR_TIMEOUT))
                gr__stress_breach(s, &rep->wrong_status, "job %llu index %llu failed with %s (%s)",
                                  (unsigned long long)id, (unsigned long long)i, gr_status_str(why),
                                  kind == 7 ? "a deadline job"
                                  : faults  ? "not an injected status"
                                            : "no deadline, no fault plan");
        } else if (r->state[i] == GR_INDEX_CANCELED)
            canceled++;
        else
            gr__stress_breach(s, &rep->count_errors, "job %llu index %llu: state %d is not final",
                              (unsigned long long)id, (unsigned long long)i, r->state[i]);
        /* Untouched, except that a tensor split into chunks may have had some chunks
         * written before it was stopped: each element is its input or its result. */
        bad = user   ? check_affine(data[i], elems[i], id, i, true, c, &where)
              : half ? check_half((uint16_t *)data[i], elems[i], id, i, true, &where)
                     : gr_workload_check_partial(data[i], 0, elems[i], id, i, &where);
        if (bad)
            gr__stress_breach(s, &rep->written_unfinished,
                              "job %llu index %llu (state %d): %llu elements are neither input nor "
                              "result, first %llu",
                              (unsigned long long)id, (unsigned long long)i, r->state[i],
                              (unsigned long long)bad, (unsigned long long)where);
    }
    if (r->progress.total != count ||
        r->progress.done + r->progress.failed + r->progress.canceled != count ||
        r->progress.queued + r->progress.in_flight != 0 ||
        (kind != 6 && kind != 7 && r->progress.done + fault_failed != count))
        gr__stress_breach(s, &rep->count_errors,
                          "job %llu: progress %llu done %llu failed %llu canceled "
                          "of %llu",
                          (unsigned long long)id, (unsigned long long)r->progress.done,
                          (unsigned long long)r->progress.failed,
                          (unsigned long long)r->progress.canceled, (unsigned long long)count);
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

/*
 * stress_churn.c - kernel registration churn under the stress (stress.c): one thread
 * registers kernels (x * 0.5 + c, c their own, names cycled so that a name is registered
 * again once unregistered), runs jobs of them, and unregisters each and destroys its graph
 * while the jobs run, in either order. Each kernel's destroy callback checks that its
 * unregister, its graph's destroy and every job's callback came first (a job holds its
 * graph until it is freed, after its callback); gr_stress_run checks at the end that each
 * ran exactly once. Apart from the submitters, as it exercises the kernel registry, not
 * the jobs' memory.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/graphrun/stress_impl.h"
#include "tools/graphrun/workload.h"

#define CHURN_MAGIC 0x636875726e4b6e6cull

static void churn_cpu(const gr_kernel_args *a, void *user)
{
    const churn_kernel *k = user;
    const float *x = a->in[0];
    float *out = a->out;

    for (uint64_t i = 0; i < a->n; i++)
        out[i] = gr__stress_affine_c_ref(x[i], k->c);
}

/* The kernel is freed: only once, and only after it was unregistered, its graph destroyed
 * and every job of it ended (the job holds the graph until it is freed, after its
 * callback). */
static void churn_destroy(void *user)
{
    churn_kernel *k = user;
    shared *s = k->s;

    if (k->magic != CHURN_MAGIC)
        return; /* not ours: nothing of it can be trusted */
    if (atomic_fetch_add(&k->destroys, 1) != 0)
        gr__stress_breach(s, &s->r->churn_errors, "kernel %s destroyed twice", k->name);
    if (!atomic_load(&k->unregistered) || !atomic_load(&k->graph_gone) ||
        atomic_load(&k->ended) != atomic_load(&k->jobs))
        gr__stress_breach(
            s, &s->r->churn_errors,
            "kernel %s destroyed while in use (unregistered %d, "
            "graph destroyed %d, %llu of %llu jobs ended)",
            k->name, (int)atomic_load(&k->unregistered), (int)atomic_load(&k->graph_gone),
            (unsigned long long)atomic_load(&k->ended), (unsigned long long)atomic_load(&k->jobs));
}

typedef struct churn_job {
    record r;
    churn_kernel *k;
} churn_job;

static void churn_complete(gr_job *job, gr_status st, void *user)
{
    churn_job *cj = user;

    atomic_fetch_add(&cj->k->ended, 1); /* before the record wakes the churn thread */
    gr__stress_on_complete(job, st, &cj->r);
}

/* Register kernel `n` of the churn (x * 0.5 + c, c its own, a name of four the churn cycles
 * through so that a name is registered again once unregistered), build a graph of it, run
 * one to three jobs of it, and unregister it and destroy the graph while they run (or,
 * one time in three, after they ended), in either order. */
static void churn_once(submitter *w, float **data, uint64_t n)
{
    static const char fmt[] = "buffer x\nh2d l: in0 -> x\nkernel k: %s(x) -> x\n"
                              "d2h s: x -> out0\nl -> k -> s\n";
    shared *s = w->s;
    churn_kernel *k = calloc(1, sizeof(*k));
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    churn_job cj[3];
    gr_job *job[3] = {NULL, NULL, NULL};
    gr_tensor t[MAX_TENSORS];
    uint64_t elems[MAX_TENSORS], per = 4, jobs = 1 + gr__stress_below(&w->rng, 3);
    uint64_t order = gr__stress_below(&w->rng, 3), id = ((uint64_t)w->id << 32) | n;
    gr_error_info err;
    gr_graph *g = NULL, *again = NULL;
    char spec[256];

    if (k == NULL) {
        gr__stress_breach(s, &s->r->churn_errors, "no memory for a kernel");
        return;
    }
    k->magic = CHURN_MAGIC;
    k->s = s;
    k->c = 0.125f * (float)(1 + n % 8);
    snprintf(k->name, sizeof(k->name), "stress_churn_%u_%llu", w->id,
             (unsigned long long)(n % 4));
    snprintf(k->source, sizeof(k->source),
             "#include \"graphrun_kernel.h\"\n"
             "extern \"C\" __global__ void stress_churn(gr_kernel_args a)\n"
             "{\n"
             "    GR_FOR_EACH(i, a)\n"
             "    GR_OUT(a, float)[i] = __fadd_rn(__fmul_rn(GR_IN(a, 0, float)[i], 0.5f), "
             "%.6ff);\n"
             "}\n",
             (double)k->c);
    d.name = k->name;
    d.doc = "graphrun stress: registered, used and unregistered while jobs run";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = churn_cpu;
    d.cuda_kind = GR_CUDA_SOURCE;
    d.cuda = k->source;
    d.cuda_name = "stress_churn";
    d.user = k;
    d.destroy = churn_destroy;
    if (gr_kernel_register(&d, &err) != GR_OK) {
        gr__stress_breach(s, &s->r->churn_errors, "register %s: %s", k->name, err.message);
        free(k);
        return;
    }
    pthread_mutex_lock(&s->mu);
    k->next = s->churned; /* checked at the end: destroyed exactly once */
    s->churned = k;
    s->r->churn_kernels++;
    pthread_mutex_unlock(&s->mu);
    snprintf(spec, sizeof(spec), fmt, k->name);
    if (gr_graph_parse(spec, strlen(spec), "stress_churn", &g, &err) != GR_OK) {
        gr__stress_breach(s, &s->r->churn_errors, "graph of %s: %s", k->name, err.message);
        jobs = 0;
    }
    for (uint64_t j = 0; j < jobs; j++) {
        gr_job_options o = GR_JOB_OPTIONS_INIT;
        gr_job **out = gr__stress_below(&w->rng, 3) == 0 ? NULL : &job[j]; /* some detached */

        memset(&cj[j], 0, sizeof(cj[j]));
        pthread_mutex_init(&cj[j].r.mu, NULL);
        pthread_cond_init(&cj[j].r.cv, NULL);
        cj[j].r.count = 1 + gr__stress_below(&w->rng, per);
        cj[j].k = k;
        for (uint64_t i = 0; i < cj[j].r.count; i++) {
            elems[j * per + i] = 1 + gr__stress_below(&w->rng, s->max_elems);
            gr_workload_fill(data[j * per + i], 0, elems[j * per + i], id + j, i);
            memset(&t[i], 0, sizeof(t[i]));
            t[i].in[0] = t[i].out[0] = data[j * per + i];
            t[i].elems = elems[j * per + i];
        }
        o.on_complete = churn_complete;
        o.user = &cj[j];
        atomic_fetch_add(&k->jobs, 1);
        if (gr_job_submit(s->rt, g, t, cj[j].r.count, &o, out, &err) != GR_OK) {
            atomic_fetch_sub(&k->jobs, 1);
            gr__stress_refused(s, id + j, &err);
            atomic_store(&cj[j].r.calls, -1); /* nothing to wait for */
        }
    }
    if (order == 2) /* after the jobs */
        for (uint64_t j = 0; j < jobs; j++)
            if (atomic_load(&cj[j].r.calls) >= 0)
                gr__stress_wait_callback(s, &cj[j].r, id + j);
    if (order == 0) {
        atomic_store(&k->graph_gone, true); /* before: the destroy may run inside */
        gr_graph_destroy(g);
    }
    atomic_store(&k->unregistered, true);
    if (gr_kernel_unregister(k->name, &err) != GR_OK)
        gr__stress_breach(s, &s->r->churn_errors, "unregister %s: %s", k->name, err.message);
    /* The name is gone: a new graph cannot name it. */
    if (gr_graph_parse(spec, strlen(spec), "stress_churn", &again, &err) == GR_OK) {
        gr__stress_breach(s, &s->r->churn_errors, "a graph named %s after it was unregistered",
                          k->name);
        gr_graph_destroy(again);
    }
    if (order != 0) {
        atomic_store(&k->graph_gone, true);
        gr_graph_destroy(g);
    }
    for (uint64_t j = 0; j < jobs; j++) {
        if (atomic_load(&cj[j].r.calls) < 0)
            continue;
        gr__stress_wait_callback(s, &cj[j].r, id + j);
        gr_job_destroy(job[j]);
        gr__stress_check_job(s, &cj[j].r, &data[j * per], &elems[j * per], cj[j].r.count, id + j,
                             G_CHURN, k->c, 0);
        pthread_mutex_lock(&s->mu);
        s->r->churn_jobs++;
        pthread_mutex_unlock(&s->mu);
    }
    for (uint64_t j = 0; j < jobs; j++) {
        pthread_cond_destroy(&cj[j].r.cv);
        pthread_mutex_destroy(&cj[j].r.mu);
    }
}

void *gr__stress_churn_main(void *p)
{
    submitter *w = p;
    shared *s = w->s;
    gr_tensor_set set;
    float *data[MAX_TENSORS];
    bool ok = gr_tensor_set_alloc(&set, MAX_TENSORS, s->max_elems, GR_MEM_PAGEABLE, 0) == GR_OK;

    for (int i = 0; ok && i < MAX_TENSORS; i++)
        data[i] = set.data[i];
    pthread_barrier_wait(&s->start);
    if (!ok) {
        gr__stress_breach(s, &s->r->churn_errors, "the churn: no host memory for its tensors");
        return NULL;
    }
    for (uint64_t n = 0; n == 0 || gr_now_ns() < s->stop_at; n++)
        churn_once(w, data, n);
    gr_tensor_set_free(&set);
    return NULL;
}

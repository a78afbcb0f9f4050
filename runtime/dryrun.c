/*
 * dryrun.c - how a job would be cut into units of work, asked without a runtime
 * (gr_graph_plan_units, for `graphrun check`).
 *
 * It is right because it is the runtime's own code on the runtime's own inputs: the config
 * is checked and completed as gr_runtime_create does (gr__config_check), the backend chosen
 * as it is (gr__backend_choose), the arena is the budget rounded down to that backend's
 * granule (open_devices in runtime.c), the over-budget refusal is gr_job_submit's, so is
 * the refusal of a kernel the backend cannot run (its kernel_missing, asked with the
 * config and device count the runtime would have), and the units come from gr__unit_limits and gr__units_plan as gr__runtime_plan_units calls them.
 * The tensors' memory is what it cannot see: they are taken to be separate allocations (no
 * two back to back), all DMA-ready or none, as the caller says.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "runtime/backend.h"
#include "runtime/config.h"
#include "runtime/base/sync.h"
#include "runtime/units.h"

/* Every tensor's pointers, on each port, are the same address: no two tensors lie back to
 * back (which would let a batch go direct), as separate allocations mostly do not. */
static char fake_memory[2 * GR_MAX_PORTS];

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

gr_status gr_graph_plan_units(const gr_graph *g, const gr_config *cfg, const uint64_t *elems,
                              uint64_t count, int dma_ready, gr_unit_cut *cut,
                              gr_units_plan_info *out, gr_error_info *err)
{
    const gr_backend_ops *ops;
    gr_config full;
    gr_unit_limits lim;
    gr_unit *units = NULL;
    gr_tensor *t;
    uint32_t *pending = NULL, n_devices = 0;
    uint64_t n_units = 0, need = 0, last = 0, bytes = 0, arena;
    gr_status st, over = GR_OK;
    char note[128];
    bool fell_back, split;

    if (err)
        memset(err, 0, sizeof(*err));
    if (g == NULL || cfg == NULL || out == NULL || (count > 0 && elems == NULL) ||
        !g->finalized)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "NULL argument or a graph that is not finalized");
    if ((st = gr__config_check(cfg, &full, err)) != GR_OK)
        return st;
    if ((st = gr__backend_choose(&full, &ops, &n_devices, note, sizeof(note), &fell_back,
                                 err)) != GR_OK)
        return st;
    {
        gr_backend_env env = {.cfg = &full, .n_devices = n_devices};

        for (uint32_t k = 0; k < g->n_nodes; k++) {
            const gr_node *n = &g->nodes[k];
            const char *missing;

            if (n->kind == GR_NODE_KERNEL &&
                (missing = ops->kernel_missing(&env, n->kernel)) != NULL)
                return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, n->name,
                                     "node '%s': kernel '%s' %s, which the %s backend needs",
                                     n->name, n->kernel->name, missing, ops->name);
        }
    }
    memset(out, 0, sizeof(*out));
    out->backend = ops->kind;
    out->splittable = g->splittable;
    arena = full.budget_bytes / ops->region_granule * ops->region_granule;
    out->arena_bytes = arena;
    /* The job's constants take their room first (job_submit.c refuses a job they would fill). */
    if (g->const_bytes >= arena)
        return gr__error_set(err, GR_ERR_OVER_BUDGET, GR_NO_INDEX, NULL,
                             "the graph's constants alone take %llu device bytes, and the "
                             "budget is %llu: nothing would be left for the iterations",
                             (unsigned long long)g->const_bytes, (unsigned long long)arena);
    arena -= g->const_bytes;
    split = g->splittable && full.split_tensors;
    if (split) {
        uint64_t group_elems, group_bytes;

        gr__graph_unit_group(g, &group_elems, &group_bytes);
        need = group_bytes;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (elems[i] == 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: a tensor of 0 elements", (unsigned long long)i);
        if (elems[i] != last &&
            (elems[i] > (UINTPTR_MAX / 2) / gr__graph_widest_port(g) ||
             gr__graph_layout(g, elems[i], NULL, &bytes) != GR_OK))
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, i, NULL,
                                 "index %llu: %llu elements is too large", (unsigned long long)i,
                                 (unsigned long long)elems[i]);
        last = elems[i];
        if (!split && bytes > need)
            need = bytes;
        if (!split && bytes > arena && over == GR_OK)
            over = gr__error_set(err, GR_ERR_OVER_BUDGET, i, NULL,
                                 "index %llu: one iteration needs %llu device bytes but the "
                                 "budget is %llu, and %s",
                                 (unsigned long long)i, (unsigned long long)bytes,
                                 (unsigned long long)arena,
                                 g->splittable ? "splitting tensors is off (split_tensors)"
                                              : "the graph cannot be split (a kernel is not "
                                                "elementwise or a buffer is not the tensor's "
                                                "size)");
    }
    out->least_budget = round_up((need > GR_BUFFER_ALIGN ? need : GR_BUFFER_ALIGN) +
                                     g->const_bytes,
                                 ops->region_granule);
    if (over != GR_OK)
        return over;
    if ((t = calloc(count + 1, sizeof(*t))) == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    for (uint64_t i = 0; i < count; i++) {
        for (uint32_t p = 0; p < g->n_inputs; p++)
            t[i].in[p] = &fake_memory[p];
        for (uint32_t p = 0; p < g->n_outputs; p++)
            t[i].out[p] = &fake_memory[GR_MAX_PORTS + p];
        t[i].elems = elems[i];
    }
    if (full.split_tensors) {
        lim = gr__unit_limits(g, arena, full.workers_per_device, full.staging_bytes,
                              full.batch_below_bytes, full.pipeline_bytes);
        lim.scatter = g->copies_at_ends && ops->batch_copies != NULL && ops->batch_copies();
        st = gr__units_plan(g, t, count, &lim,
                            dma_ready || ops->kind == GR_BACKEND_HOST ? &gr__units_all_ready
                                                                  : &gr__units_none_ready,
                            NULL, &units, &n_units, &pending);
        if (st != GR_OK) {
            free(t);
            return gr__error_set(err, st, GR_NO_INDEX, NULL, "no memory for the plan");
        }
    } else {
        n_units = count;
    }
    out->units = n_units;
    for (uint64_t i = 0; cut && i < count; i++)
        cut[i] = (gr_unit_cut){.pieces = 1, .batch = 1, .largest = elems[i], .staged = 0};
    for (uint64_t k = 0; cut && units && k < n_units; k++) {
        const gr_unit *u = &units[k];

        for (uint64_t i = u->index; i < u->index + u->tensors; i++) {
            gr_unit_cut *c = &cut[i];

            c->pieces = pending[i];
            c->batch = u->tensors;
            c->staged = u->staged;
            if (u->tensors == 1 && (u->offset == 0 || u->elems > c->largest))
                c->largest = u->elems;
        }
    }
    free(units);
    free(pending);
    free(t);
    return GR_OK;
}

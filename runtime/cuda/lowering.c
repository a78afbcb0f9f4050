/*
 * cuda/lowering.c - lowering templates to CUDA graphs and updating them per iteration (see
 * lowering.h).
 */
#include "runtime/cuda/lowering.h"

#include <string.h>

#include "runtime/cuda/cuda.h"
#include "runtime/cuda/driver.h"
#include "runtime/base/fault.h"
#include "runtime/base/sync.h"

gr_status gr__cuda_error(gr_error_info *err, gr_status st, cudaError_t e, const char *node,
                         const char *call)
{
    return gr__error_set(err, st, GR_NO_INDEX, node, "%s: %s: %s", call, cudaGetErrorName(e),
                         cudaGetErrorString(e));
}

/* The launch rule (graphrun.h): ceil(n / block) blocks, at most blocks_per_sm per
 * multiprocessor and at most max_blocks. */
static void launch_shape(const gr_kernel *k, uint64_t n, int sm_count, unsigned *grid,
                         unsigned *block)
{
    uint64_t b = k->def.cuda_block ? k->def.cuda_block : GR_CUDA_BLOCK;
    uint64_t per_sm = k->def.cuda_blocks_per_sm ? k->def.cuda_blocks_per_sm
                                                : GR_CUDA_BLOCKS_PER_SM;
    uint64_t blocks = (n + b - 1) / b;
    uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * per_sm;

    if (k->def.cuda_max_blocks && cap > k->def.cuda_max_blocks)
        cap = k->def.cuda_max_blocks;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    *grid = (unsigned)(blocks < cap ? blocks : cap);
    *block = (unsigned)b;
}

/* This node's parameters in iteration `it`; a kernel's implementation is what the node had
 * (`impl`), resolved once when the graph is built. */
static void node_state(const gr_iteration *it, const gr_node *node, int sm_count,
                       const gr_cuda_impl *impl, gr_cuda_node_state *s)
{
    memset(s, 0, sizeof(*s));
    if (node->kind == GR_NODE_KERNEL) {
        gr__graph_node_args(it, node, &s->args);
        launch_shape(node->kernel, s->args.n, sm_count, &s->grid, &s->block);
        s->impl = *impl;
    } else {
        gr__graph_node_copy(it, node, &s->dst, &s->src, &s->bytes);
    }
}

static void kernel_params(gr_cuda_node_state *s, void **args, struct cudaKernelNodeParams *p)
{
    memset(p, 0, sizeof(*p));
    args[0] = &s->args;
    p->func = (void *)s->impl.func;
    p->gridDim.x = s->grid;
    p->gridDim.y = p->gridDim.z = 1;
    p->blockDim.x = s->block;
    p->blockDim.y = p->blockDim.z = 1;
    p->kernelParams = args;
}

static void function_params(gr_cuda_node_state *s, void **args, CUDA_KERNEL_NODE_PARAMS *p)
{
    memset(p, 0, sizeof(*p));
    args[0] = &s->args;
    p->func = (CUfunction)s->impl.func;
    p->gridDimX = s->grid;
    p->gridDimY = p->gridDimZ = 1;
    p->blockDimX = s->block;
    p->blockDimY = p->blockDimZ = 1;
    p->kernelParams = args;
}

/* The launch callback's work for these arguments, captured on the target's capture stream
 * into *child. The callback's nonzero return, or a capture it broke (a synchronization, a
 * call on another stream), fails the iteration. */
static gr_status capture(const gr_cuda_target *target, const gr_node *node,
                         gr_cuda_node_state *s, cudaGraph_t *child, gr_error_info *err)
{
    gr_kernel_launch_fn launch = (gr_kernel_launch_fn)(uintptr_t)s->impl.func;
    cudaError_t e = cudaStreamBeginCapture(target->capture_stream,
                                           cudaStreamCaptureModeThreadLocal);
    int rc;

    *child = NULL;
    if (e != cudaSuccess)
        return gr__cuda_error(err, GR_ERR_CUDA, e, node->name, "cudaStreamBeginCapture");
    rc = launch((void *)target->capture_stream, &s->args, node->kernel->def.user);
    e = cudaStreamEndCapture(target->capture_stream, child);
    if (rc != 0) {
        if (e == cudaSuccess)
            cudaGraphDestroy(*child);
        cudaGetLastError();
        *child = NULL;
        return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, node->name,
                             "kernel '%s': its launch callback returned %d", node->kernel->name,
                             rc);
    }
    if (e != cudaSuccess) {
        *child = NULL;
        return gr__cuda_error(err, GR_ERR_CUDA, e, node->name,
                              "cudaStreamEndCapture (the launch callback must only enqueue "
                              "work on the stream it is given)");
    }
    return GR_OK;
}

/* Add kernel node i of the template, with state s, after `deps`. */
static gr_status add_kernel(gr_cuda_graph *cg, const gr_cuda_target *target,
                            const gr_node *node, uint32_t i, const cudaGraphNode_t *deps,
                            size_t n_deps, gr_error_info *err)
{
    gr_cuda_node_state *s = &cg->state[i];
    const gr_cuda_driver *drv;
    struct cudaKernelNodeParams params;
    CUDA_KERNEL_NODE_PARAMS fparams;
    cudaGraph_t child;
    void *args[1];
    gr_status st;
    cudaError_t e;
    CUresult r;

    switch (s->impl.how) {
    case GR_CUDA_NODE_FUNCTION:
        if ((drv = gr__cuda_driver_get(err)) == NULL)
            return GR_ERR_UNAVAILABLE;
        function_params(s, args, &fparams);
        r = drv->cuGraphAddKernelNode((CUgraphNode *)&cg->nodes[i], (CUgraph)cg->graph,
                                      (const CUgraphNode *)deps, n_deps, &fparams);
        if (r != CUDA_SUCCESS)
            return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, node->name,
                                 "cuGraphAddKernelNode: %s", gr__cuda_driver_error_name(r));
        return GR_OK;
    case GR_CUDA_NODE_CAPTURE:
        if ((st = capture(target, node, s, &child, err)) != GR_OK)
            return st;
        e = cudaGraphAddChildGraphNode(&cg->nodes[i], cg->graph, deps, n_deps, child);
        cudaGraphDestroy(child); /* the node holds its own copy */
        break;
    case GR_CUDA_NODE_KERNEL:
    default:
        kernel_params(s, args, &params);
        e = cudaGraphAddKernelNode(&cg->nodes[i], cg->graph, deps, n_deps, &params);
        break;
    }
    if (e != cudaSuccess) {
        cg->error = e;
        return gr__cuda_error(err, GR_ERR_CUDA, e, node->name,
                              s->impl.how == GR_CUDA_NODE_CAPTURE ? "cudaGraphAddChildGraphNode"
                                                                  : "cudaGraphAddKernelNode");
    }
    return GR_OK;
}

/* Give kernel node i the parameters s in place. GR_OK; or a failure with *rebuild set when
 * the driver would not change the node in place (the caller builds the graph again), or
 * clear when the kernel's own launch callback failed (then nothing would help: the
 * iteration fails, and the callback is not called again for it). */
static gr_status set_kernel(gr_cuda_graph *cg, const gr_cuda_target *target,
                            const gr_node *node, uint32_t i, gr_cuda_node_state *s,
                            bool *rebuild, gr_error_info *err)
{
    const gr_cuda_driver *drv;
    struct cudaKernelNodeParams params;
    CUDA_KERNEL_NODE_PARAMS fparams;
    cudaGraph_t child;
    void *args[1];
    gr_status st;
    cudaError_t e;

    *rebuild = true;
    switch (s->impl.how) {
    case GR_CUDA_NODE_FUNCTION:
        if ((drv = gr__cuda_driver_get(err)) == NULL)
            return GR_ERR_UNAVAILABLE;
        function_params(s, args, &fparams);
        if (drv->cuGraphExecKernelNodeSetParams((CUgraphExec)cg->exec, (CUgraphNode)cg->nodes[i],
                                                &fparams) != CUDA_SUCCESS)
            return GR_ERR_CUDA;
        return GR_OK;
    case GR_CUDA_NODE_CAPTURE:
        if ((st = capture(target, node, s, &child, err)) != GR_OK) {
            *rebuild = false;
            return st;
        }
        /* The new capture must have the old one's shape; when it does not, rebuild. */
        e = cudaGraphExecChildGraphNodeSetParams(cg->exec, cg->nodes[i], child);
        cudaGraphDestroy(child);
        break;
    case GR_CUDA_NODE_KERNEL:
    default:
        kernel_params(s, args, &params);
        e = cudaGraphExecKernelNodeSetParams(cg->exec, cg->nodes[i], &params);
        break;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return GR_ERR_CUDA;
    }
    return GR_OK;
}

/* After a kernel node failed to go in (its kernel could not be resolved, the driver or a
 * capture refused it): whether the context itself is ruined, which only a query of the
 * context's state says for failures that did not come back as a cudaError_t (a callback's,
 * the driver API's). Recorded in cg->error, where the backend looks for sticky errors. */
static void note_context_state(gr_cuda_graph *cg, const gr_cuda_target *target)
{
    cudaError_t e;

    if (cg->error != cudaSuccess)
        return;
    e = cudaStreamQuery(target->capture_stream);
    if (e != cudaSuccess && e != cudaErrorNotReady) {
        cudaGetLastError();
        cg->error = e;
    }
}

static dim3 dim3_of(unsigned x)
{
    dim3 d = {x, 1, 1};

    return d;
}

static enum cudaMemcpyKind copy_kind(const gr_node *node)
{
    return node->kind == GR_NODE_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}

uint32_t gr__cuda_host_kinds(const gr_backend_env *env, const gr_iteration *it)
{
    const gr_graph *g = it->graph;
    uint32_t kinds = 0;

    if (it->h2d != NULL) /* the backend does the copies: no host operand in the graph */
        return GR_CUDA_DEVICE_ONLY;

    for (uint32_t p = 0; p < g->n_inputs + g->n_outputs; p++) {
        bool out = p >= g->n_inputs;
        uint32_t port = out ? p - g->n_inputs : p;
        const void *ptr = out ? it->tensor->out[port] : it->tensor->in[port];

        if (env->host_ready(env, it->host_hold, ptr,
                            gr_graph_port_bytes(g, out, port, it->tensor->elems)))
            kinds |= 1u << (out ? GR_MAX_PORTS + port : port);
    }
    if (it->staged && (env->cfg->context_mode == GR_CONTEXT_PRIVATE || env->n_devices > 1))
        kinds |= GR_CUDA_STAGED;
    return kinds;
}

void gr__cuda_graph_release(gr_cuda_graph *cg)
{
    if (cg->exec)
        cudaGraphExecDestroy(cg->exec);
    if (cg->graph)
        cudaGraphDestroy(cg->graph);
    cg->exec = NULL;
    cg->graph = NULL;
    cg->graph_id = 0;
}

gr_status gr__cuda_graph_build(gr_cuda_graph *cg, const gr_iteration *it,
                               const gr_cuda_target *target, uint32_t host_kinds,
                               gr_error_info *err)
{
    const gr_graph *g = it->graph;
    cudaError_t e;

    memset(cg->nodes, 0, sizeof(cg->nodes));
    cg->exec = NULL;
    cg->error = cudaSuccess;
    cg->copy_refused = false;
    cg->copies_moved = false;
    e = cudaGraphCreate(&cg->graph, 0);
    if (e != cudaSuccess) {
        cg->graph = NULL;
        cg->error = e;
        return gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaGraphCreate");
    }
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        uint32_t i = g->order[k];
        const gr_node *node = &g->nodes[i];
        gr_cuda_node_state *s = &cg->state[i];
        cudaGraphNode_t deps[GR_MAX_NODES];
        size_t n_deps = 0;

        /* The template's order is topological: every predecessor already has its node
         * (but the copies a device-only graph leaves out, which come first or last). */
        for (uint32_t p = 0; p < g->n_nodes; p++)
            if ((node->preds >> p) & 1 && cg->nodes[p] != NULL)
                deps[n_deps++] = cg->nodes[p];
        if (node->kind != GR_NODE_KERNEL && (host_kinds & GR_CUDA_DEVICE_ONLY))
            continue;
        if (node->kind == GR_NODE_KERNEL) {
            gr_cuda_impl impl;
            gr_status st = target->resolve(target->resolve_ctx, node->kernel, &impl, err);

            if (st == GR_OK) {
                node_state(it, node, target->sm_count, &impl, s);
                st = add_kernel(cg, target, node, i, deps, n_deps, err);
            }
            if (st != GR_OK) {
                cudaError_t why;

                note_context_state(cg, target);
                why = cg->error;
                gr__cuda_graph_release(cg);
                cg->error = why;
                if (err)
                    gr__strlcpy(err->node, node->name, sizeof(err->node));
                return st;
            }
        } else {
            node_state(it, node, target->sm_count, NULL, s);
            /* The staging buffer is one allocation of graphrun's: the site spares it. */
            e = !it->staged && gr__fault_hit(GR_FAULT_COPY)
                    ? cudaErrorInvalidValue
                    : cudaGraphAddMemcpyNode1D(&cg->nodes[i], cg->graph, deps, n_deps, s->dst,
                                               s->src, s->bytes, copy_kind(node));
            if (e != cudaSuccess) {
                cudaGetLastError();
                gr__cuda_graph_release(cg);
                cg->error = e;
                cg->copy_refused = e == cudaErrorInvalidValue && !it->staged;
                return gr__cuda_error(err, GR_ERR_CUDA, e, node->name,
                                      "cudaGraphAddMemcpyNode1D");
            }
        }
    }
    e = gr__fault_hit(GR_FAULT_GRAPH_INSTANTIATE) ? cudaErrorMemoryAllocation
                                                  : cudaGraphInstantiate(&cg->exec, cg->graph, 0);
    if (e != cudaSuccess) {
        cg->exec = NULL;
        gr__cuda_graph_release(cg);
        cg->error = e;
        return gr__cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaGraphInstantiate");
    }
    cg->graph_id = g->id;
    cg->host_kinds = host_kinds;
    return GR_OK;
}

gr_status gr__cuda_graph_update(gr_cuda_graph *cg, const gr_iteration *it,
                                const gr_cuda_target *target, bool *rebuilt,
                                gr_cuda_refusal *why, gr_error_info *err)
{
    const gr_graph *g = it->graph;
    uint64_t last_use = cg->last_use;
    uint32_t kinds = cg->host_kinds;
    bool moved = false;
    gr_status st;

    *rebuilt = false;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *node = &g->nodes[i];
        cudaError_t refused = cudaSuccess;
        bool rebuild = true, injected = false, unasked = false;
        gr_cuda_node_state s;

        if (node->kind != GR_NODE_KERNEL && (kinds & GR_CUDA_DEVICE_ONLY))
            continue;

        node_state(it, node, target->sm_count, &cg->state[i].impl, &s);
        if (memcmp(&s, &cg->state[i], sizeof(s)) == 0)
            continue;
        if (node->kind == GR_NODE_KERNEL) {
            st = set_kernel(cg, target, node, i, &s, &rebuild, err);
        } else if (target->copies_move_once && cg->copies_moved) {
            st = GR_ERR_CUDA; /* the driver would refuse it: rebuild without asking */
            unasked = true;
        } else {
            cudaError_t e = cudaGraphExecMemcpyNodeSetParams1D(cg->exec, cg->nodes[i], s.dst,
                                                               s.src, s.bytes, copy_kind(node));

            if (e != cudaSuccess)
                cudaGetLastError();
            st = e == cudaSuccess ? GR_OK : GR_ERR_CUDA;
            refused = e;
            moved |= st == GR_OK;
        }
        if (st == GR_OK && gr__fault_hit(GR_FAULT_GRAPH_UPDATE)) {
            st = GR_ERR_CUDA;
            injected = true;
        }
        if (st != GR_OK && !rebuild) {
            cg->copies_moved |= moved; /* the graph stays cached: a copy that moved counts */
            note_context_state(cg, target);
            if (err)
                gr__strlcpy(err->node, node->name, sizeof(err->node));
            return st;
        }
        if (st != GR_OK) {
            /* Not a device fault: the driver will not change this node in place. Lower the
             * template again with this iteration's parameters. */
            if (why != NULL)
                *why = (gr_cuda_refusal){node->kind != GR_NODE_KERNEL, injected, unasked, i,
                                         refused, cg->state[i], s};
            gr__cuda_graph_release(cg);
            st = gr__cuda_graph_build(cg, it, target, kinds, err);
            cg->last_use = last_use;
            *rebuilt = st == GR_OK;
            return st;
        }
        cg->state[i] = s;
    }
    /* Set only once the whole update is taken: the copies of one update move together. */
    cg->copies_moved |= moved;
    return GR_OK;
}

bool gr__cuda_graph_is_eager(const gr_graph *g)
{
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == GR_NODE_KERNEL &&
            g->nodes[i].kernel->def.cuda_kind == GR_CUDA_STREAM)
            return true;
    return false;
}

gr_status gr__cuda_run_eager(const gr_iteration *it, const gr_cuda_target *target,
                             cudaStream_t stream, gr_error_info *err)
{
    const gr_graph *g = it->graph;

    for (uint32_t k = 0; k < g->n_nodes; k++) {
        const gr_node *node = &g->nodes[g->order[k]];
        gr_cuda_node_state s;
        gr_cuda_impl impl;
        gr_status st;
        cudaError_t e;
        void *args[1];
        int rc;

        if (node->kind != GR_NODE_KERNEL) {
            if (it->h2d != NULL) /* the backend does a scattered unit's copies itself */
                continue;
            node_state(it, node, target->sm_count, NULL, &s);
            e = cudaMemcpyAsync(s.dst, s.src, s.bytes, copy_kind(node), stream);
            if (e != cudaSuccess)
                return gr__cuda_error(err, GR_ERR_CUDA, e, node->name, "cudaMemcpyAsync");
            continue;
        }
        if ((st = target->resolve(target->resolve_ctx, node->kernel, &impl, err)) != GR_OK) {
            if (err)
                gr__strlcpy(err->node, node->name, sizeof(err->node));
            return st;
        }
        node_state(it, node, target->sm_count, &impl, &s);
        switch (impl.how) {
        case GR_CUDA_NODE_STREAM:
        case GR_CUDA_NODE_CAPTURE:
            rc = ((gr_kernel_launch_fn)(uintptr_t)impl.func)((void *)stream, &s.args,
                                                             node->kernel->def.user);
            if (rc != 0)
                return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, node->name,
                                     "kernel '%s': its callback returned %d", node->kernel->name,
                                     rc);
            break;
        case GR_CUDA_NODE_FUNCTION:
            return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, node->name,
                                 "kernel '%s' is a CUfunction, which cannot run beside an eager "
                                 "(GR_CUDA_STREAM) kernel",
                                 node->kernel->name);
        case GR_CUDA_NODE_KERNEL:
        default:
            args[0] = &s.args;
            e = cudaLaunchKernel(impl.func, dim3_of(s.grid), dim3_of(s.block), args, 0, stream);
            if (e != cudaSuccess)
                return gr__cuda_error(err, GR_ERR_CUDA, e, node->name, "cudaLaunchKernel");
            break;
        }
    }
    return GR_OK;
}

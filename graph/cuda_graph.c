/*
 * cuda_graph.c - lowering templates to CUDA graphs and updating them per iteration (see
 * cuda_graph.h).
 */
#include "graph/cuda_graph.h"

#include <string.h>

#include "kernels/kernels_cuda.h"
#include "runtime/fault.h"
#include "runtime/sync.h"

gr_status gr_cuda_error(gr_error_info *err, gr_status st, cudaError_t e, const char *node,
                        const char *call)
{
    return gr_error_set(err, st, GR_NO_INDEX, node, "%s: %s: %s", call, cudaGetErrorName(e),
                        cudaGetErrorString(e));
}

static unsigned grid_for(uint64_t n, int sm_count)
{
    uint64_t blocks = (n + GR_CUDA_BLOCK - 1) / GR_CUDA_BLOCK;
    uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * GR_CUDA_BLOCKS_PER_SM;

    return (unsigned)(blocks < cap ? blocks : cap);
}

/* This node's parameters in iteration `it`. */
static void node_state(const gr_iteration *it, const gr_node *node, int sm_count,
                       gr_cuda_node_state *s)
{
    memset(s, 0, sizeof(*s));
    if (node->kind == GR_NODE_KERNEL) {
        gr_graph_node_kargs(it, node, &s->kargs);
        s->grid = grid_for(s->kargs.n, sm_count);
    } else {
        gr_graph_node_copy(it, node, &s->dst, &s->src, &s->bytes);
    }
}

static void kernel_params(const gr_node *node, gr_cuda_node_state *s, void **args,
                          struct cudaKernelNodeParams *p)
{
    memset(p, 0, sizeof(*p));
    args[0] = &s->kargs;
    p->func = (void *)gr_cuda_kernel_entry(node->kernel->name);
    p->gridDim.x = s->grid;
    p->gridDim.y = p->gridDim.z = 1;
    p->blockDim.x = GR_CUDA_BLOCK;
    p->blockDim.y = p->blockDim.z = 1;
    p->kernelParams = args;
}

static enum cudaMemcpyKind copy_kind(const gr_node *node)
{
    return node->kind == GR_NODE_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}

uint32_t gr_cuda_host_kinds(const gr_iteration *it)
{
    const gr_graph *g = it->graph;
    uint32_t kinds = 0;

    for (uint32_t p = 0; p < g->n_inputs + g->n_outputs; p++) {
        const void *ptr = p < g->n_inputs ? it->tensor->in[p] : it->tensor->out[p - g->n_inputs];
        struct cudaPointerAttributes a;

        if (cudaPointerGetAttributes(&a, ptr) == cudaSuccess && a.type == cudaMemoryTypeHost)
            kinds |= 1u << (p < g->n_inputs ? p : GR_MAX_PORTS + p - g->n_inputs);
        else
            cudaGetLastError(); /* unregistered memory is not an error for us */
    }
    return kinds;
}

void gr_cuda_graph_release(gr_cuda_graph *cg)
{
    if (cg->exec)
        cudaGraphExecDestroy(cg->exec);
    if (cg->graph)
        cudaGraphDestroy(cg->graph);
    cg->exec = NULL;
    cg->graph = NULL;
    cg->graph_id = 0;
}

gr_status gr_cuda_graph_build(gr_cuda_graph *cg, const gr_iteration *it, int sm_count,
                              uint32_t host_kinds, gr_error_info *err)
{
    const gr_graph *g = it->graph;
    cudaError_t e;

    memset(cg->nodes, 0, sizeof(cg->nodes));
    cg->exec = NULL;
    cg->error = cudaSuccess;
    e = cudaGraphCreate(&cg->graph, 0);
    if (e != cudaSuccess) {
        cg->graph = NULL;
        cg->error = e;
        return gr_cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaGraphCreate");
    }
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        uint32_t i = g->order[k];
        const gr_node *node = &g->nodes[i];
        gr_cuda_node_state *s = &cg->state[i];
        cudaGraphNode_t deps[GR_MAX_NODES];
        size_t n_deps = 0;

        /* The template's order is topological: every predecessor already has its node. */
        for (uint32_t p = 0; p < g->n_nodes; p++)
            if ((node->preds >> p) & 1)
                deps[n_deps++] = cg->nodes[p];
        node_state(it, node, sm_count, s);
        if (node->kind == GR_NODE_KERNEL) {
            struct cudaKernelNodeParams params;
            void *args[1];

            kernel_params(node, s, args, &params);
            if (params.func == NULL) {
                gr_cuda_graph_release(cg);
                return gr_error_set(err, GR_ERR_INTERNAL, GR_NO_INDEX, node->name,
                                    "kernel '%s' has no CUDA version", node->kernel->name);
            }
            e = cudaGraphAddKernelNode(&cg->nodes[i], cg->graph, deps, n_deps, &params);
            if (e != cudaSuccess) {
                gr_cuda_graph_release(cg);
                cg->error = e;
                return gr_cuda_error(err, GR_ERR_CUDA, e, node->name, "cudaGraphAddKernelNode");
            }
        } else {
            e = cudaGraphAddMemcpyNode1D(&cg->nodes[i], cg->graph, deps, n_deps, s->dst, s->src,
                                         s->bytes, copy_kind(node));
            if (e != cudaSuccess) {
                gr_cuda_graph_release(cg);
                cg->error = e;
                return gr_cuda_error(err, GR_ERR_CUDA, e, node->name,
                                     "cudaGraphAddMemcpyNode1D");
            }
        }
    }
    e = gr__fault_hit(GR_FAULT_GRAPH_INSTANTIATE) ? cudaErrorMemoryAllocation
                                                  : cudaGraphInstantiate(&cg->exec, cg->graph, 0);
    if (e != cudaSuccess) {
        cg->exec = NULL;
        gr_cuda_graph_release(cg);
        cg->error = e;
        return gr_cuda_error(err, GR_ERR_CUDA, e, NULL, "cudaGraphInstantiate");
    }
    cg->graph_id = g->id;
    cg->host_kinds = host_kinds;
    return GR_OK;
}

gr_status gr_cuda_graph_update(gr_cuda_graph *cg, const gr_iteration *it, int sm_count,
                               bool *rebuilt, gr_error_info *err)
{
    const gr_graph *g = it->graph;
    uint64_t last_use = cg->last_use;
    uint32_t kinds = cg->host_kinds;
    gr_status st;

    *rebuilt = false;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *node = &g->nodes[i];
        gr_cuda_node_state s;
        cudaError_t e;

        node_state(it, node, sm_count, &s);
        if (memcmp(&s, &cg->state[i], sizeof(s)) == 0)
            continue;
        if (node->kind == GR_NODE_KERNEL) {
            struct cudaKernelNodeParams params;
            void *args[1];

            kernel_params(node, &s, args, &params);
            e = cudaGraphExecKernelNodeSetParams(cg->exec, cg->nodes[i], &params);
        } else {
            e = cudaGraphExecMemcpyNodeSetParams1D(cg->exec, cg->nodes[i], s.dst, s.src,
                                                   s.bytes, copy_kind(node));
        }
        if (e == cudaSuccess && gr__fault_hit(GR_FAULT_GRAPH_UPDATE))
            e = cudaErrorGraphExecUpdateFailure;
        if (e != cudaSuccess) {
            /* Not a device fault: the driver will not change this node in place. Lower the
             * template again with this iteration's parameters. */
            cudaGetLastError();
            gr_cuda_graph_release(cg);
            st = gr_cuda_graph_build(cg, it, sm_count, kinds, err);
            cg->last_use = last_use;
            *rebuilt = st == GR_OK;
            return st;
        }
        cg->state[i] = s;
    }
    return GR_OK;
}

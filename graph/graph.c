/*
 * graph.c - building iteration templates (see graph.h): their lifecycle, buffers,
 * constants, copy and kernel nodes, dependencies. Every builder call checks its own
 * arguments and refuses with a message on the graph; what needs the whole template is
 * checked once, at finalize (graph_check.c), and the finalized template's sizes and ports
 * are graph_layout.c.
 */
#include "graph/graph.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun_workloads.h>

#include "graph/graph_impl.h"
#include "runtime/base/sync.h"

gr_status gr_graph_create(gr_graph **out)
{
    static _Atomic uint64_t next_id = 1;
    gr_graph *g;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    g = calloc(1, sizeof(*g));
    *out = g;
    if (g == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    atomic_init(&g->refs, 1);
    g->error_node = g->error_buffer = -1;
    g->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    return GR_OK;
}

void gr__graph_ref(gr_graph *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void gr__graph_unref(gr_graph *g)
{
    /* acq_rel: the last owner must see every other owner's accesses before freeing. */
    if (g == NULL || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* The holds taken by add_kernel: an unregistered kernel goes with its last graph. */
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == GR_NODE_KERNEL)
            gr__kernel_release(g->nodes[i].kernel);
    free(g);
}

void gr_graph_destroy(gr_graph *g)
{
    gr__graph_unref(g);
}

const char *gr_graph_error(const gr_graph *g)
{
    return g ? g->error : "no graph";
}

gr_status gr_graph_error_get(const gr_graph *g, gr_error_info *out)
{
    if (g == NULL || out == NULL)
        return gr__error_set(out, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             g == NULL ? "no graph" : "out must not be NULL");
    out->status = g->error[0] != '\0' ? g->error_status : GR_OK;
    out->index = GR_NO_INDEX;
    out->node[0] = '\0';
    if (g->error[0] != '\0' && g->error_node >= 0 && (uint32_t)g->error_node < g->n_nodes)
        gr__strlcpy(out->node, g->nodes[g->error_node].name, sizeof(out->node));
    gr__strlcpy(out->message, g->error, sizeof(out->message));
    return GR_OK;
}

static bool valid_name(const char *name)
{
    size_t n;

    if (name == NULL)
        return false;
    n = strlen(name);
    if (n == 0 || n > GR_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static int find_buffer(const gr_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->n_buffers; i++)
        if (strcmp(g->buffers[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int find_node(const gr_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

int gr__graph_buffer_index(const gr_graph *g, const char *name)
{
    return g && name ? find_buffer(g, name) : -1;
}

int gr__graph_node_index(const gr_graph *g, const char *name)
{
    return g && name ? find_node(g, name) : -1;
}

gr_status gr__graph_check_mutable(gr_graph *g)
{
    if (g == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    g->error[0] = '\0';
    g->error_node = g->error_buffer = -1;
    if (g->finalized)
        return fail(g, GR_ERR_INVALID_USAGE, "graph is finalized and can no longer change");
    return GR_OK;
}

gr_status gr_graph_add_buffer_desc(gr_graph *g, const char *name, const gr_buffer_desc *desc)
{
    gr_status st = gr__graph_check_mutable(g);
    gr_buffer_def *b;

    if (st != GR_OK)
        return st;
    if (desc == NULL || desc->magic != GR_BUFFER_DESC_MAGIC ||
        desc->struct_size < sizeof(gr_buffer_desc))
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "buffer description not initialized with GR_BUFFER_DESC_INIT");
    if (!valid_name(name))
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "buffer name must be 1-%d characters of [A-Za-z0-9_.-]", GR_NAME_MAX);
    if (find_buffer(g, name) >= 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "buffer '%s' is defined twice", name);
    if (gr_dtype_size(desc->dtype) == 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "buffer '%s': unknown element type %d", name,
                    (int)desc->dtype);
    if (desc->fixed_elems == 0 && (desc->num == 0 || desc->den == 0))
        return fail(g, GR_ERR_INVALID_ARGUMENT, "buffer '%s': size ratio %u/%u must be positive",
                    name, desc->num, desc->den);
    if (desc->fixed_elems > (UINT64_MAX / 2) / 8)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "buffer '%s': %llu elements is too large", name,
                    (unsigned long long)desc->fixed_elems);
    if (g->n_buffers == GR_MAX_BUFFERS)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "too many buffers (at most %d)", GR_MAX_BUFFERS);
    b = &g->buffers[g->n_buffers++];
    memset(b, 0, sizeof(*b));
    gr__strlcpy(b->name, name, sizeof(b->name));
    b->fixed = desc->fixed_elems;
    b->num = b->fixed ? 0 : desc->num;
    b->den = b->fixed ? 0 : desc->den;
    b->dtype = desc->dtype;
    b->constant = -1;
    return GR_OK;
}

gr_status gr_graph_add_const(gr_graph *g, const char *name, const gr_buffer_desc *desc,
                             uint32_t rank, const uint64_t *shape)
{
    gr_status st = gr__graph_check_mutable(g);
    gr_buffer_desc d;
    gr_buffer_def *b;
    uint64_t elems = 1;

    if (st != GR_OK)
        return st;
    if (desc == NULL || desc->magic != GR_BUFFER_DESC_MAGIC ||
        desc->struct_size < sizeof(gr_buffer_desc))
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "constant description not initialized with GR_BUFFER_DESC_INIT");
    if (desc->fixed_elems == 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "constant '%s': give its size in elements (fixed_elems)", name ? name : "");
    if (rank > GR_MAX_DIMS || (rank > 0 && shape == NULL))
        return fail(g, GR_ERR_INVALID_ARGUMENT, "constant '%s': a shape of 0 to %d dimensions",
                    name ? name : "", GR_MAX_DIMS);
    for (uint32_t k = 0; k < rank; k++) {
        if (shape[k] == 0 || elems > UINT64_MAX / shape[k])
            return fail(g, GR_ERR_INVALID_ARGUMENT, "constant '%s': dimension %u is %llu",
                        name ? name : "", k, (unsigned long long)shape[k]);
        elems *= shape[k];
    }
    if (rank > 0 && elems != desc->fixed_elems)
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "constant '%s': its shape holds %llu elements, its size says %llu",
                    name ? name : "", (unsigned long long)elems,
                    (unsigned long long)desc->fixed_elems);
    if (g->n_consts == GR_MAX_CONSTS)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "too many constants (at most %d)",
                    GR_MAX_CONSTS);
    d = *desc;
    d.num = d.den = 1;
    if ((st = gr_graph_add_buffer_desc(g, name, &d)) != GR_OK)
        return st;
    b = &g->buffers[g->n_buffers - 1];
    b->constant = (int32_t)g->n_consts;
    b->rank = rank;
    for (uint32_t k = 0; k < rank; k++)
        b->shape[k] = shape[k];
    g->const_buffer[g->n_consts++] = g->n_buffers - 1;
    return GR_OK;
}

uint32_t gr_graph_const_count(const gr_graph *g)
{
    return g && g->finalized ? g->n_consts : 0;
}

gr_status gr_graph_const_get(const gr_graph *g, uint32_t i, gr_const_info *out)
{
    const gr_buffer_def *b;

    if (g == NULL || !g->finalized || out == NULL || i >= g->n_consts)
        return GR_ERR_INVALID_ARGUMENT;
    b = &g->buffers[g->const_buffer[i]];
    memset(out, 0, sizeof(*out));
    gr__strlcpy(out->name, b->name, sizeof(out->name));
    out->dtype = b->dtype;
    out->elems = b->fixed;
    out->bytes = b->fixed * gr_dtype_size(b->dtype);
    out->rank = b->rank;
    memcpy(out->shape, b->shape, sizeof(out->shape));
    return GR_OK;
}

gr_status gr_graph_add_buffer(gr_graph *g, const char *name, uint32_t num, uint32_t den)
{
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;

    d.num = num;
    d.den = den;
    return gr_graph_add_buffer_desc(g, name, &d);
}

/* Reserve a node slot with a checked, unique name. */
static gr_status new_node(gr_graph *g, const char *name, gr_node_kind kind, gr_node **out)
{
    gr_node *n;

    if (!valid_name(name))
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "node name must be 1-%d characters of [A-Za-z0-9_.-]", GR_NAME_MAX);
    if (find_node(g, name) >= 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "node '%s' is defined twice", name);
    if (g->n_nodes == GR_MAX_NODES)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "too many nodes (at most %d)", GR_MAX_NODES);
    n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    gr__strlcpy(n->name, name, sizeof(n->name));
    n->write = GR_NO_BUFFER;
    *out = n;
    return GR_OK;
}

static gr_status lookup_buffer(gr_graph *g, const char *node, const char *buffer, int32_t *id)
{
    int b = buffer ? find_buffer(g, buffer) : -1;

    if (b < 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "node '%s': unknown buffer '%s'", node,
                    buffer ? buffer : "(null)");
    *id = b;
    return GR_OK;
}

/* An H2D node (host input `port` into `buffer`) or a D2H node (`buffer` to host output
 * `port`). */
static gr_status add_copy(gr_graph *g, const char *node, gr_node_kind kind, uint32_t port,
                          const char *buffer)
{
    gr_status st = gr__graph_check_mutable(g);
    int32_t b = GR_NO_BUFFER;
    gr_node *n;

    if (st != GR_OK)
        return st;
    if (port >= GR_MAX_PORTS)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "%s port %u out of range (at most %d ports)",
                    kind == GR_NODE_H2D ? "input" : "output", port, GR_MAX_PORTS);
    if ((st = new_node(g, node, kind, &n)) != GR_OK)
        return st;
    if ((st = lookup_buffer(g, node, buffer, &b)) != GR_OK)
        return st;
    n->port = port;
    if (kind == GR_NODE_H2D) {
        n->write = b;
    } else {
        n->n_reads = 1;
        n->reads[0] = b;
    }
    g->n_nodes++;
    return GR_OK;
}

gr_status gr_graph_add_h2d(gr_graph *g, const char *node, uint32_t port, const char *buffer)
{
    return add_copy(g, node, GR_NODE_H2D, port, buffer);
}

gr_status gr_graph_add_d2h(gr_graph *g, const char *node, const char *buffer, uint32_t port)
{
    return add_copy(g, node, GR_NODE_D2H, port, buffer);
}

/* The kernel called `name` for the element types of the node's buffers (reads[0 .. n_in),
 * write): one of its overloads, held, or a refusal naming the types it has. */
static gr_status resolve_kernel(gr_graph *g, const char *node, const char *name,
                                const gr_node *n, uint32_t n_in, const gr_kernel **out)
{
    gr_dtype in[GR_MAX_KERNEL_INPUTS];
    char have[256], got[96];
    size_t at = 0;

    for (uint32_t i = 0; i < n_in; i++)
        in[i] = g->buffers[n->reads[i]].dtype;
    *out = gr__kernel_hold_typed(name, in, n_in, g->buffers[n->write].dtype);
    if (*out != NULL)
        return GR_OK;
    got[0] = '\0';
    for (uint32_t i = 0; i < n_in; i++)
        at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%s", i ? ", " : "",
                               gr_dtype_name(in[i]));
    gr__kernel_signatures(name, have, sizeof(have));
    return fail(g, GR_ERR_INVALID_ARGUMENT,
                "node '%s': kernel '%s' has no version for (%s) -> %s, the types of its "
                "buffers; it takes %s%s",
                node, name, got, gr_dtype_name(g->buffers[n->write].dtype), have,
                strcmp(name, "cast") == 0 ? "" : " (convert with cast first)");
}

/* A scalar as the kernel's scalar type `t` takes it, or a refusal: a value the type does
 * not hold. */
gr_scalar_fit gr__scalar_fit(double v, gr_dtype t)
{
    if (v != v)
        return GR_SCALAR_NAN;
    switch (t) {
    case GR_DTYPE_INT32:
        return v >= -2147483648.0 && v <= 2147483647.0 && v == (double)(int64_t)v
                   ? GR_SCALAR_FITS
                   : GR_SCALAR_NOT_INT;
    case GR_DTYPE_FLOAT32:
        /* Finite once rounded to float32, and not so small that it rounds to 0. */
        if (isinf((float)v))
            return GR_SCALAR_OVERFLOW;
        return v != 0.0 && (float)v == 0.0f ? GR_SCALAR_ZERO : GR_SCALAR_FITS;
    default:
        return GR_SCALAR_FITS;
    }
}

static gr_status scalar_of(gr_graph *g, const char *node, uint32_t i, double v, gr_dtype t,
                          gr_scalar *s)
{
    memset(s, 0, sizeof(*s));
    if (gr__scalar_fit(v, t) != GR_SCALAR_FITS)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "node '%s': scalar %u (%g) is not a %s value",
                    node, i, v, gr_dtype_name(t));
    switch (t) {
    case GR_DTYPE_FLOAT64:
        s->f64 = v;
        break;
    case GR_DTYPE_INT32:
        s->i32 = (int32_t)v;
        break;
    default:
        s->f32 = (float)v;
        break;
    }
    return GR_OK;
}

/* The rest of add_kernel, for `k` (the first kernel of the name), held. */
static gr_status check_kernel(gr_graph *g, const char *node, const gr_kernel *k, gr_node *n,
                              const char *const *inputs, uint32_t n_inputs,
                              const char *output, const double *scalars, uint32_t n_scalars)
{
    gr_status st;

    if (n_inputs != k->def.n_inputs || (n_inputs > 0 && inputs == NULL))
        return fail(g, GR_ERR_INVALID_ARGUMENT, "node '%s': kernel '%s' takes %u input(s), got %u",
                    node, k->name, k->def.n_inputs, n_inputs);
    if (n_scalars != k->def.n_scalars || (n_scalars > 0 && scalars == NULL))
        return fail(g, GR_ERR_INVALID_ARGUMENT,
                    "node '%s': kernel '%s' takes %u scalar(s), got %u", node, k->name,
                    k->def.n_scalars, n_scalars);
    for (uint32_t i = 0; i < n_inputs; i++)
        if ((st = lookup_buffer(g, node, inputs[i], &n->reads[i])) != GR_OK)
            return st;
    if ((st = lookup_buffer(g, node, output, &n->write)) != GR_OK)
        return st;
    if ((st = resolve_kernel(g, node, k->name, n, n_inputs, &k)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < n_scalars; i++)
        if ((st = scalar_of(g, node, i, scalars[i], k->def.scalar_dtype[i], &n->scalars[i])) !=
            GR_OK) {
            gr__kernel_release(k);
            return st;
        }
    n->n_reads = n_inputs;
    n->kernel = k;
    g->n_nodes++;
    return GR_OK;
}

static gr_status add_kernel(gr_graph *g, const char *node, const char *kernel,
                            const char *const *inputs, uint32_t n_inputs, const char *output,
                            const double *scalars, uint32_t n_scalars)
{
    gr_status st = gr__graph_check_mutable(g);
    const gr_kernel *k;
    gr_node *n;

    if (st != GR_OK)
        return st;
    if ((st = new_node(g, node, GR_NODE_KERNEL, &n)) != GR_OK)
        return st;
    /* Held while it is checked, so that an unregister meanwhile cannot free it; the node
     * holds the overload it resolves until the graph is freed. */
    k = gr__kernel_hold(kernel);
    if (k == NULL) {
        char known[160];

        gr__kernel_list(known, sizeof(known));
        return fail(g, GR_ERR_INVALID_ARGUMENT, "node '%s': unknown kernel '%s' (kernels: %s)",
                    node, kernel ? kernel : "(null)", known);
    }
    st = check_kernel(g, node, k, n, inputs, n_inputs, output, scalars, n_scalars);
    gr__kernel_release(k);
    return st;
}

gr_status gr_graph_add_kernel(gr_graph *g, const char *node, const char *kernel,
                              const char *const *inputs, uint32_t n_inputs, const char *output,
                              const float *scalars, uint32_t n_scalars)
{
    double wide[GR_MAX_SCALARS];

    for (uint32_t i = 0; scalars != NULL && i < n_scalars && i < GR_MAX_SCALARS; i++)
        wide[i] = scalars[i];
    /* More than GR_MAX_SCALARS is refused by the count check before any is read. */
    return add_kernel(g, node, kernel, inputs, n_inputs, output, scalars ? wide : NULL,
                      n_scalars);
}

gr_status gr_graph_add_kernel_f64(gr_graph *g, const char *node, const char *kernel,
                                  const char *const *inputs, uint32_t n_inputs,
                                  const char *output, const double *scalars, uint32_t n_scalars)
{
    return add_kernel(g, node, kernel, inputs, n_inputs, output, scalars, n_scalars);
}

gr_status gr_graph_add_dep(gr_graph *g, const char *before, const char *after)
{
    gr_status st = gr__graph_check_mutable(g);
    int b, a;

    if (st != GR_OK)
        return st;
    b = before ? find_node(g, before) : -1;
    a = after ? find_node(g, after) : -1;
    if (b < 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "dependency: unknown node '%s'",
                    before ? before : "(null)");
    if (a < 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "dependency: unknown node '%s'",
                    after ? after : "(null)");
    if (a == b)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "node '%s' cannot depend on itself", before);
    g->nodes[a].preds |= 1ull << b;
    return GR_OK;
}

gr_status gr_graph_create_seed(gr_graph **out)
{
    const char *x = "x";
    gr_graph *g;
    gr_status st;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    if ((st = gr_graph_create(&g)) != GR_OK)
        return st;
    if ((st = gr_graph_add_buffer(g, "x", 1, 1)) != GR_OK ||
        (st = gr_graph_add_h2d(g, "load", 0, "x")) != GR_OK ||
        (st = gr_graph_add_kernel(g, "seed", "seed", &x, 1, "x", NULL, 0)) != GR_OK ||
        (st = gr_graph_add_d2h(g, "store", "x", 0)) != GR_OK ||
        (st = gr_graph_add_dep(g, "load", "seed")) != GR_OK ||
        (st = gr_graph_add_dep(g, "seed", "store")) != GR_OK ||
        (st = gr_graph_finalize(g)) != GR_OK) {
        gr_graph_destroy(g);
        *out = NULL;
        return st;
    }
    *out = g;
    return GR_OK;
}

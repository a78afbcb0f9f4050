/*
 * graph.c - building, validating and laying out iteration templates (see graph.h).
 *
 * Validation happens once, at finalize, so every job and every worker can trust a finalized
 * template: it is acyclic, every read is ordered after a write of the same buffer, no two
 * unordered nodes race on a buffer, and the host ports are dense. Dependencies are bit sets
 * over at most GR_MAX_NODES (64) nodes, which keeps the closure computation trivial.
 */
#include "graph/graph.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun_workloads.h>

#include "runtime/base/sync.h"

static gr_status fail(gr_graph *g, gr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gr_status fail_at(gr_graph *g, int32_t node, int32_t buffer, gr_status st,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Record a refusal: its reason, and the node or buffer (or neither, -1) it points at. */
static gr_status vfail(gr_graph *g, int32_t node, int32_t buffer, gr_status st,
                       const char *fmt, va_list ap)
{
    vsnprintf(g->error, sizeof(g->error), fmt, ap);
    g->error_status = st;
    g->error_node = node;
    g->error_buffer = buffer;
    return st;
}

static gr_status fail(gr_graph *g, gr_status st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    st = vfail(g, -1, -1, st, fmt, ap);
    va_end(ap);
    return st;
}

static gr_status fail_at(gr_graph *g, int32_t node, int32_t buffer, gr_status st,
                         const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    st = vfail(g, node, buffer, st, fmt, ap);
    va_end(ap);
    return st;
}

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

/* Common checks of every builder call. */
static gr_status check_mutable(gr_graph *g)
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
    gr_status st = check_mutable(g);
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
    gr_status st = check_mutable(g);
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
    gr_status st = check_mutable(g);
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
    gr_status st = check_mutable(g);
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
    gr_status st = check_mutable(g);
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

/*
 * Refuse a graph whose nodes outside `done` all wait on one another. Every such node has a
 * predecessor outside `done`, so walking predecessors from any of them must, within n_nodes
 * steps, stand on a cycle; the message names the first-declared node on it (not merely one
 * downstream of it) and spells the cycle out from there, as far as the message holds it.
 */
static gr_status fail_cycle(gr_graph *g, uint64_t done)
{
    uint32_t cyc[GR_MAX_NODES], len = 0, start = 0, first = 0, at;
    char path[128];
    size_t used = 0;

    while ((done >> start) & 1)
        start++;
    for (uint32_t step = 0; step < g->n_nodes; step++)
        start = (uint32_t)__builtin_ctzll(g->nodes[start].preds & ~done);
    /* Walking predecessors lists the cycle backwards; it is printed in dependency order. */
    at = start;
    do {
        cyc[len++] = at;
        at = (uint32_t)__builtin_ctzll(g->nodes[at].preds & ~done);
    } while (at != start && len < GR_MAX_NODES);
    for (uint32_t k = 1; k < len; k++)
        if (cyc[k] < cyc[first])
            first = k;
    /* cyc[k - 1] is the node after cyc[k]. */
    path[0] = '\0';
    for (uint32_t k = 0; k <= len; k++) {
        const char *name = g->nodes[cyc[(first + len - k % len) % len]].name;
        int n = snprintf(path + used, sizeof(path) - used, "%s%s", k ? " -> " : "", name);

        if (n < 0 || (size_t)n >= sizeof(path) - used) {
            snprintf(path + sizeof(path) - 5, 5, "...");
            break;
        }
        used += (size_t)n;
    }
    return fail_at(g, (int32_t)cyc[first], -1, GR_ERR_INVALID_ARGUMENT,
                   "dependency cycle through node '%s' (%s)", g->nodes[cyc[first]].name, path);
}

/* Kahn's algorithm over the bit-set edges. */
static gr_status topo_sort(gr_graph *g)
{
    uint64_t done = 0;
    uint32_t n = 0;

    while (n < g->n_nodes) {
        bool progress = false;

        for (uint32_t i = 0; i < g->n_nodes; i++) {
            if ((done >> i) & 1)
                continue;
            if ((g->nodes[i].preds & ~done) == 0) {
                g->order[n++] = i;
                done |= 1ull << i;
                progress = true;
            }
        }
        if (!progress)
            return fail_cycle(g, done);
    }
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        uint32_t i = g->order[k];
        uint64_t anc = g->nodes[i].preds;

        for (uint32_t p = 0; p < g->n_nodes; p++)
            if ((g->nodes[i].preds >> p) & 1)
                anc |= g->ancestors[p];
        g->ancestors[i] = anc;
    }
    return GR_OK;
}

static bool node_uses(const gr_node *n, int32_t b, bool *writes)
{
    bool used = false;

    *writes = n->write == b;
    used = *writes;
    for (uint32_t r = 0; r < n->n_reads; r++)
        used |= n->reads[r] == b;
    return used;
}

static bool ordered(const gr_graph *g, uint32_t a, uint32_t b)
{
    return ((g->ancestors[a] >> b) & 1) || ((g->ancestors[b] >> a) & 1);
}

/* Whether buffer b holds at least the tensor's elements, whatever the tensor: a ratio of at
 * least 1/1. */
static bool holds_tensor(const gr_buffer_def *b)
{
    return b->fixed == 0 && b->num >= b->den;
}

/* The refusal of buffer b, too small for node n, which works on the whole tensor. */
static gr_status too_small(gr_graph *g, const gr_node *n, int32_t b)
{
    const gr_buffer_def *d = &g->buffers[b];

    if (d->fixed)
        return fail_at(g, -1, b, GR_ERR_INVALID_ARGUMENT,
                       "node '%s' works on the whole tensor, but buffer '%s' has a fixed size "
                       "(%llu elements): only a kernel's small inputs and one-element results "
                       "may",
                       n->name, d->name, (unsigned long long)d->fixed);
    return fail_at(g, -1, b, GR_ERR_INVALID_ARGUMENT,
                   "node '%s' works on the whole tensor, but buffer '%s' (%u/%u) is smaller "
                   "than the tensor",
                   n->name, d->name, d->num, d->den);
}

/* Node i's buffers are large enough for what it moves: a copy moves the tensor (or a fixed
 * buffer's fixed size, which its port then has); a kernel reads whole tensors except from
 * its small inputs, and writes what its out_size says. The message points at the buffer:
 * its size is what to fix. */
static gr_status check_sizes(gr_graph *g, uint32_t i)
{
    const gr_node *n = &g->nodes[i];
    const gr_kernel_def *k = n->kind == GR_NODE_KERNEL ? &n->kernel->def : NULL;

    /* A fixed buffer is read whole (its fixed size is in_n), by a copy or as a kernel's
     * small input; any other read is of the tensor's elements, which the buffer must hold
     * (a small input of ratio below 1/1 included: the kernel would read in_n = the tensor's
     * elements of it). */
    for (uint32_t r = 0; r < n->n_reads; r++) {
        const gr_buffer_def *b = &g->buffers[n->reads[r]];
        bool fixed_ok = b->fixed != 0 && (k == NULL || ((k->small_inputs >> r) & 1));

        if (!fixed_ok && !holds_tensor(b))
            return too_small(g, n, n->reads[r]);
    }
    /* A copy into a fixed buffer moves its fixed size; a kernel writing one element fits
     * any buffer (every buffer holds at least one), one writing its buffer's size needs a
     * fixed one; anything else writes the tensor. */
    if (n->write != GR_NO_BUFFER) {
        const gr_buffer_def *b = &g->buffers[n->write];
        bool any_size = k == NULL ? b->fixed != 0 : k->out_size == GR_OUT_ONE;

        if (k != NULL && k->out_size == GR_OUT_BUFFER) {
            if (b->fixed == 0)
                return fail_at(g, -1, n->write, GR_ERR_INVALID_ARGUMENT,
                               "node '%s' writes as many elements as its output buffer holds "
                               "(kernel '%s'), so buffer '%s' must have a fixed size",
                               n->name, n->kernel->name, b->name);
            any_size = true;
        }
        if (!any_size && !holds_tensor(b))
            return too_small(g, n, n->write);
    }
    return GR_OK;
}

static gr_status check_buffers(gr_graph *g)
{
    gr_status st;

    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        /* A constant is the job's: written before the first iteration, read by kernels. */
        if (n->write != GR_NO_BUFFER && g->buffers[n->write].constant >= 0)
            return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                           "node '%s' writes constant '%s': constants are read only (each job "
                           "gives their contents)",
                           n->name, g->buffers[n->write].name);
        if (n->kind == GR_NODE_D2H && g->buffers[n->reads[0]].constant >= 0)
            return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                           "node '%s' copies constant '%s' out: only kernels read constants",
                           n->name, g->buffers[n->reads[0]].name);
        /* Every read is ordered after some write of the same buffer (a constant's is the
         * job's, before every node). */
        for (uint32_t r = 0; r < n->n_reads; r++) {
            int32_t b = n->reads[r];
            bool written = g->buffers[b].constant >= 0;

            for (uint32_t w = 0; w < g->n_nodes && !written; w++)
                written = ((g->ancestors[i] >> w) & 1) && g->nodes[w].write == b;
            if (!written)
                return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                               "node '%s' reads buffer '%s', which no node it depends on writes",
                               n->name, g->buffers[b].name);
        }
        if ((st = check_sizes(g, i)) != GR_OK)
            return st;
    }
    /* No two unordered nodes may touch a buffer that one of them writes. */
    for (uint32_t b = 0; b < g->n_buffers; b++) {
        bool used = false;

        for (uint32_t i = 0; i < g->n_nodes; i++) {
            bool wi;
            if (!node_uses(&g->nodes[i], (int32_t)b, &wi))
                continue;
            used = true;
            for (uint32_t j = i + 1; j < g->n_nodes; j++) {
                bool wj;
                if (node_uses(&g->nodes[j], (int32_t)b, &wj) && (wi || wj) && !ordered(g, i, j))
                    return fail_at(g, (int32_t)j, -1, GR_ERR_INVALID_ARGUMENT,
                                   "nodes '%s' and '%s' both use buffer '%s' and one writes it, "
                                   "but no dependency orders them",
                                   g->nodes[i].name, g->nodes[j].name, g->buffers[b].name);
            }
        }
        if (!used)
            return fail_at(g, -1, (int32_t)b, GR_ERR_INVALID_ARGUMENT,
                           "buffer '%s' is never used (it would only take device memory)",
                           g->buffers[b].name);
    }
    return GR_OK;
}

/* Every copy of one host port moves the same element type: the port's. */
static gr_status check_port_types(gr_graph *g)
{
    int32_t first[2][GR_MAX_PORTS];

    memset(first, 0xff, sizeof(first)); /* -1: no copy of the port seen yet */
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        bool out = n->kind == GR_NODE_D2H;
        int32_t b = out ? n->reads[0] : n->write;
        int32_t *seen;
        const gr_buffer_def *mine, *theirs;

        if (n->kind == GR_NODE_KERNEL)
            continue;
        seen = &first[out][n->port];
        mine = &g->buffers[b];
        if (*seen < 0) {
            *seen = (int32_t)i;
            *(out ? &g->out_size[n->port] : &g->in_size[n->port]) = gr_dtype_size(mine->dtype);
            *(out ? &g->out_fixed[n->port] : &g->in_fixed[n->port]) = mine->fixed;
            continue;
        }
        theirs = &g->buffers[out ? g->nodes[*seen].reads[0] : g->nodes[*seen].write];
        if (mine->dtype != theirs->dtype || mine->fixed != theirs->fixed)
            return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                           "nodes '%s' and '%s' copy %s port %u with different element types "
                           "or sizes",
                           g->nodes[*seen].name, n->name, out ? "output" : "input", n->port);
    }
    return GR_OK;
}

static gr_status check_ports(gr_graph *g)
{
    uint32_t in_used = 0, out_used = 0, max_in = 0, max_out = 0;
    int32_t top_in = -1, top_out = -1; /* the nodes of the highest ports, blamed for gaps */

    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        if (n->kind == GR_NODE_H2D) {
            in_used |= 1u << n->port;
            if (n->port + 1 > max_in) {
                max_in = n->port + 1;
                top_in = (int32_t)i;
            }
        } else if (n->kind == GR_NODE_D2H) {
            if ((out_used >> n->port) & 1)
                return fail_at(g, (int32_t)i, -1, GR_ERR_INVALID_ARGUMENT,
                               "output port %u is written by more than one D2H node ('%s')",
                               n->port, n->name);
            out_used |= 1u << n->port;
            if (n->port + 1 > max_out) {
                max_out = n->port + 1;
                top_out = (int32_t)i;
            }
        }
    }
    if (max_out == 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "graph has no D2H node: it produces nothing");
    if (in_used != (1u << max_in) - 1)
        return fail_at(g, top_in, -1, GR_ERR_INVALID_ARGUMENT,
                       "input ports must be numbered 0..n-1 without gaps (highest is %u)",
                       max_in - 1);
    if (out_used != (1u << max_out) - 1)
        return fail_at(g, top_out, -1, GR_ERR_INVALID_ARGUMENT,
                       "output ports must be numbered 0..n-1 without gaps (highest is %u)",
                       max_out - 1);
    g->n_inputs = max_in;
    g->n_outputs = max_out;
    return check_port_types(g);
}

gr_status gr_graph_finalize(gr_graph *g)
{
    gr_status st = check_mutable(g);

    if (st != GR_OK)
        return st;
    if (g->n_nodes == 0)
        return fail(g, GR_ERR_INVALID_ARGUMENT, "graph has no nodes");
    if ((st = topo_sort(g)) != GR_OK)
        return st;
    if ((st = check_ports(g)) != GR_OK)
        return st;
    if ((st = check_buffers(g)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *d = &g->nodes[i];
        uint32_t ok = (1u << GR_MAX_PORTS) - 1;

        if (d->kind != GR_NODE_D2H)
            continue;
        for (uint32_t j = 0; j < g->n_nodes; j++)
            if (g->nodes[j].kind == GR_NODE_H2D && !((g->ancestors[i] >> j) & 1))
                ok &= ~(1u << g->nodes[j].port);
        g->inplace_ok[d->port] = ok;
    }
    {
        uint32_t h2d = 0, d2h = 0;

        g->copies_at_ends = true;
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            const gr_node *n = &g->nodes[i];

            h2d += n->kind == GR_NODE_H2D;
            d2h += n->kind == GR_NODE_D2H;
            if (n->kind == GR_NODE_H2D && n->preds != 0)
                g->copies_at_ends = false;
            for (uint32_t j = 0; n->kind == GR_NODE_D2H && j < g->n_nodes; j++)
                if ((g->nodes[j].preds >> i) & 1)
                    g->copies_at_ends = false;
        }
        if (h2d > GR_MAX_PORTS || d2h > GR_MAX_PORTS)
            g->copies_at_ends = false;
    }
    /* Constants are seen whole by every unit, so they do not stop a graph from being cut. */
    g->splittable = true;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        if (n->kind != GR_NODE_KERNEL)
            continue;
        if (!n->kernel->def.elementwise)
            g->splittable = false;
        /* A part of a tensor sees a small input whole only when it is a constant. */
        for (uint32_t r = 0; r < n->n_reads; r++)
            if (((n->kernel->def.small_inputs >> r) & 1) &&
                g->buffers[n->reads[r]].constant < 0)
                g->splittable = false;
    }
    for (uint32_t b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].constant < 0 &&
            (g->buffers[b].fixed != 0 || g->buffers[b].num != g->buffers[b].den))
            g->splittable = false;
    g->const_bytes = 0;
    for (uint32_t c = 0; c < g->n_consts; c++) {
        const gr_buffer_def *b = &g->buffers[g->const_buffer[c]];
        uint64_t bytes = b->fixed * gr_dtype_size(b->dtype);

        g->const_offset[c] = g->const_bytes;
        g->const_bytes += (bytes + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;
    }
    g->finalized = true;
    return GR_OK;
}

uint32_t gr_graph_input_count(const gr_graph *g)
{
    return g && g->finalized ? g->n_inputs : 0;
}

uint32_t gr_graph_output_count(const gr_graph *g)
{
    return g && g->finalized ? g->n_outputs : 0;
}

gr_status gr_graph_port_get(const gr_graph *g, int output, uint32_t port, gr_port_info *out)
{
    if (g == NULL || !g->finalized || out == NULL ||
        port >= (output ? g->n_outputs : g->n_inputs))
        return GR_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];

        if (n->kind == (output ? GR_NODE_D2H : GR_NODE_H2D) && n->port == port) {
            const gr_buffer_def *b = &g->buffers[output ? n->reads[0] : n->write];

            out->dtype = b->dtype;
            out->fixed_elems = b->fixed;
            break;
        }
    }
    return GR_OK;
}

uint64_t gr__graph_buffer_elems(const gr_graph *g, uint32_t b, uint64_t elems)
{
    const gr_buffer_def *d = &g->buffers[b];
    unsigned __int128 e = (unsigned __int128)elems * d->num;

    if (d->fixed)
        return d->fixed;
    e = (e + d->den - 1) / d->den;
    return e > UINT64_MAX ? UINT64_MAX : (uint64_t)e;
}

gr_status gr__graph_layout(const gr_graph *g, uint64_t elems, uint64_t *offsets,
                           uint64_t *total)
{
    uint64_t off = 0;

    if (g == NULL || !g->finalized || elems == 0)
        return GR_ERR_INVALID_ARGUMENT;
    for (uint32_t b = 0; b < g->n_buffers; b++) {
        uint64_t n = gr__graph_buffer_elems(g, b, elems);
        uint32_t size = gr_dtype_size(g->buffers[b].dtype);
        uint64_t bytes;

        if (g->buffers[b].constant >= 0) /* in the job's constant block */
            continue;
        if (n > UINT64_MAX / size)
            return GR_ERR_INVALID_ARGUMENT;
        bytes = n * size;
        if (bytes > UINT64_MAX - GR_BUFFER_ALIGN)
            return GR_ERR_INVALID_ARGUMENT;
        bytes = (bytes + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;
        if (off > UINT64_MAX - bytes)
            return GR_ERR_INVALID_ARGUMENT;
        if (offsets)
            offsets[b] = off;
        off += bytes;
    }
    *total = off;
    return GR_OK;
}

uint32_t gr__graph_widest_port(const gr_graph *g)
{
    uint32_t widest = 1;

    for (uint32_t p = 0; p < g->n_inputs; p++)
        widest = g->in_size[p] > widest ? g->in_size[p] : widest;
    for (uint32_t p = 0; p < g->n_outputs; p++)
        widest = g->out_size[p] > widest ? g->out_size[p] : widest;
    return widest;
}

void gr__graph_unit_group(const gr_graph *g, uint64_t *elems, uint64_t *bytes)
{
    uint32_t smallest = UINT32_MAX;
    uint64_t group, total = 0;

    for (uint32_t b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].constant < 0 && gr_dtype_size(g->buffers[b].dtype) < smallest)
            smallest = gr_dtype_size(g->buffers[b].dtype);
    /* Element sizes are powers of two, so a group of GR_BUFFER_ALIGN bytes of the smallest
     * type is a whole number of alignment granules of every buffer: no rounding within. */
    group = GR_BUFFER_ALIGN / smallest;
    for (uint32_t b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].constant < 0)
            total += group * gr_dtype_size(g->buffers[b].dtype);
    *elems = group;
    *bytes = total;
}

void gr__graph_node_copy(const gr_iteration *it, const gr_node *node, void **dst,
                         const void **src, uint64_t *bytes)
{
    const gr_graph *g = it->graph;
    bool output = node->kind == GR_NODE_D2H;

    *bytes = gr_graph_port_bytes(g, output, node->port, it->tensor->elems);
    if (!output) {
        *dst = it->base + it->offsets[node->write];
        *src = it->tensor->in[node->port];
    } else {
        *dst = it->tensor->out[node->port];
        *src = it->base + it->offsets[node->reads[0]];
    }
}

void gr__graph_node_args(const gr_iteration *it, const gr_node *node, gr_kernel_args *out)
{
    const gr_tensor *t = it->tensor;

    memset(out, 0, sizeof(*out));
    for (uint32_t r = 0; r < node->n_reads; r++) {
        const gr_buffer_def *b = &it->graph->buffers[node->reads[r]];

        out->in[r] = b->constant >= 0
                         ? it->constants + it->graph->const_offset[b->constant]
                         : it->base + it->offsets[node->reads[r]];
        out->in_n[r] = b->fixed ? b->fixed : t->elems;
    }
    out->out = it->base + it->offsets[node->write];
    memcpy(out->s, node->scalars, sizeof(out->s));
    out->rank = t->rank;
    memcpy(out->shape, t->shape, sizeof(out->shape));
    switch (node->kernel->def.out_size) {
    case GR_OUT_ONE:
        out->n = 1;
        break;
    case GR_OUT_BUFFER:
        out->n = it->graph->buffers[node->write].fixed;
        break;
    case GR_OUT_ELEMS:
    default:
        out->n = t->elems;
        break;
    }
}

gr_status gr_graph_footprint(const gr_graph *g, uint64_t elems, uint64_t *bytes)
{
    if (bytes == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    return gr__graph_layout(g, elems, NULL, bytes);
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

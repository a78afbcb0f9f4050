/*
 * expr.c - expression kernels (expr.h; the language is docs/GRAPH_SPEC.md's "Expression
 * kernels"): the parsed tree (expr_parse.c) typed and folded here, then spelled as a CPU
 * program (expr_cpu.c) and as CUDA C (expr_cuda.c), both registered as one elementwise
 * kernel.
 *
 * The tree lives in one array in post-order (every node after its operands), so typing,
 * folding and both code generators are loops over the array: only the parser recurses, and
 * only as deep as the text nests, which GR_EXPR_MAX_DEPTH bounds (a long chain a+b+c+...
 * is a loop, not a recursion). A tree has at most GR_EXPR_MAX_NODES nodes.
 *
 * Why the backends agree: typing decides, once, the type every operation computes in
 * (float32 or float64), every conversion and every constant's value; the CPU program and
 * the CUDA source are two spellings of the same typed tree, each operation rounding as the
 * other's does (expr_cpu.c and expr_cuda.c say how). Only exp, log, tanh, sigmoid and pow
 * of exponents other than 0.5, 1 and 2 call two different math libraries.
 *
 * Registration: the key of a program is its CUDA text without the entry's name (which
 * spells every operation, constant and type, the types of unused inputs included); its
 * name is "expr." and the key's FNV-1a hash. A process-wide list maps keys to registered
 * names, so the same program is registered once however often it is parsed, and a hash
 * collision cannot make one program run another's code (the registry refuses the second
 * name). Registered programs are the kernels' `user` pointers, freed by the kernel's
 * destroy (expr_destroy) with their entry of the list.
 *
 * Locks: compile_mu, held across one registration (and its NVRTC compile), so a program
 * registers once even when many threads parse it at the same time; then the registry's
 * lock; list_mu, taken alone, for moments, guards the list. expr_destroy takes list_mu
 * only, as it runs wherever a kernel's last graph is freed (a runtime's worker, too), and
 * must not wait for a compile.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/expr_impl.h"
#include "kernels/expr_parse.h"
#include "kernels/kernels.h"
#include "runtime/base/sync.h"

#define MAX_SLOTS 2048 /* registers of a program (expr_cpu.c's bound) */

/* ------------------------------------------------------------------------------------
 * Values: the operations' definitions, shared by folding (in double), the CPU program (in
 * float or double) and, spelled in CUDA, the generated source.
 * ---------------------------------------------------------------------------------- */

static double fold(const gr_expr_node *x, const gr_expr_node *nodes)
{
    double a = x->n_args > 0 ? nodes[x->arg[0]].value : 0;
    double b = x->n_args > 1 ? nodes[x->arg[1]].value : 0;
    double c = x->n_args > 2 ? nodes[x->arg[2]].value : 0;

    switch (x->op) {
    case OP_NEG: return -a;
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    case OP_EQ: return a == b;
    case OP_NE: return a != b;
    case OP_SQRT: return sqrt(a);
    case OP_EXP: return exp(a);
    case OP_LOG: return log(a);
    case OP_TANH: return tanh(a);
    case OP_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case OP_FLOOR: return floor(a);
    case OP_ABS: return fabs(a);
    case OP_POW: return pow_d(a, b);
    case OP_MIN: return min_d(a, b);
    case OP_MAX: return max_d(a, b);
    case OP_CLAMP: return min_d(max_d(a, b), c);
    case OP_SELECT: return a != 0 ? b : c;
    case OP_CAST: return gr__expr_convert(x->dtype, nodes[x->arg[0]].vt == VT_WEAK
                                               ? GR_DTYPE_FLOAT64
                                               : nodes[x->arg[0]].vt, a);
    default: return a;
    }
}

/* ------------------------------------------------------------------------------------
 * Names and types.
 * ---------------------------------------------------------------------------------- */

static const char *vt_name(int vt)
{
    return vt == VT_WEAK ? "a number" : vt == VT_BOOL ? "a comparison" : gr_dtype_name(vt);
}

/* Whether weak value v can meet float32 values: it rounds to a finite float32, and not to
 * 0 unless it is 0. */
static gr_status weak_fits_f32(gr_expr_error *e, const gr_expr_node *x)
{
    if (isinf((float)x->value))
        return fail(e, x->pos, "the number %g is out of float32 range (at most 3.4e38), and "
                               "meets float32 values here", x->value);
    if (x->value != 0.0 && (float)x->value == 0.0f)
        return fail(e, x->pos, "the number %g is too small for float32 (it would be 0), and "
                               "meets float32 values here", x->value);
    return GR_OK;
}

/* Name node x as an input of env (NULL: none) or a param, which becomes its number. */
static gr_status resolve_name(gr_expr_node *x, const char *text, const gr_expr_env *env,
                              const gr_expr_param *params, uint32_t n_params, gr_expr_error *e)
{
    for (uint32_t k = 0; env != NULL && k < env->n_inputs; k++)
        if (strlen(env->input_names[k]) == x->len &&
            memcmp(env->input_names[k], text + x->pos, x->len) == 0) {
            x->op = OP_INPUT;
            x->input = k;
            x->vt = (uint8_t)env->input_dtype[k];
            return GR_OK;
        }
    for (uint32_t k = 0; k < n_params; k++)
        if (params[k].name_len == x->len && memcmp(params[k].name, text + x->pos, x->len) == 0) {
            x->op = OP_NUM;
            x->vt = VT_WEAK;
            x->is_const = 1;
            x->value = params[k].value;
            return GR_OK;
        }
    e->unknown_name = 1;
    e->name_len = x->len;
    return fail(e, x->pos, "unknown name '%.*s' (%s)", (int)(x->len > 31 ? 31 : x->len),
                text + x->pos,
                env ? "not an input of the expression, nor a param"
                    : "a constant is made of numbers and params");
}

/* The type of what node x computes, from its operands' (`weak`: all numbers; `f64`: one
 * is float64). */
static uint8_t result_type(const gr_expr_node *x, bool weak, bool f64)
{
    if (gr__expr_is_cmp(x->op))
        return VT_BOOL;
    if (x->op == OP_CAST)
        return x->dtype;
    return weak ? VT_WEAK : f64 ? GR_DTYPE_FLOAT64 : GR_DTYPE_FLOAT32;
}

/* Resolve names (env NULL: a constant expression, params only) and type every node, in
 * order. What numbers alone make is folded, in double, and stays a number (weak); a cast
 * of a constant folds into a constant of its type; with `all_double` (constant
 * expressions) everything folds, in double. Anything else computes in float64 when an
 * operand is float64, else in float32, which a number meeting it must fit. */
static gr_status type_nodes(gr_expr_node *nodes, uint32_t n, const char *text,
                            const gr_expr_env *env, const gr_expr_param *params,
                            uint32_t n_params, bool all_double, gr_expr_error *e)
{
    for (uint32_t i = 0; i < n; i++) {
        gr_expr_node *x = &nodes[i];
        bool all_const = true, weak = true, f64 = false;
        gr_status st;

        if (x->op == OP_NUM) {
            x->vt = VT_WEAK;
            x->is_const = 1;
            continue;
        }
        if (x->op == OP_NAME) {
            if ((st = resolve_name(x, text, env, params, n_params, e)) != GR_OK)
                return st;
            continue;
        }
        for (uint32_t k = 0; k < x->n_args; k++) {
            const gr_expr_node *a = &nodes[x->arg[k]];
            bool cond = x->op == OP_SELECT && k == 0;

            if (cond && a->vt != VT_BOOL)
                return fail(e, a->pos, "select's condition must be a comparison (a < b, "
                                       "a == b, ...), not %s", vt_name(a->vt));
            if (!cond && a->vt == VT_BOOL)
                return fail(e, a->pos, "a comparison is not a value: use it as select's "
                                       "condition, select(a < b, x, y)");
            all_const &= a->is_const;
            if (!cond) {
                weak &= a->vt == VT_WEAK;
                f64 |= a->vt == GR_DTYPE_FLOAT64;
            }
        }
        x->vt = result_type(x, weak, f64);
        if (all_const && (weak || all_double || x->op == OP_CAST)) {
            x->value = fold(x, nodes);
            x->is_const = 1;
            if (!isfinite(x->value))
                return fail(e, x->pos, "this constant part of the expression is not finite "
                                       "(%s)",
                            isnan(x->value) ? "NaN" : x->value > 0 ? "inf" : "-inf");
            continue;
        }
        if (x->vt == VT_WEAK) /* numbers, not all constant: select(x > 0, 1, 2) */
            x->vt = GR_DTYPE_FLOAT32;
        x->cls = (uint8_t)(x->op == OP_CAST ? gr__expr_cls(x->dtype) : f64 ? CLS_F64 : CLS_F32);
        for (uint32_t k = 0; k < x->n_args; k++)
            if (nodes[x->arg[k]].vt == VT_WEAK && x->cls == CLS_F32 && x->op != OP_CAST &&
                (st = weak_fits_f32(e, &nodes[x->arg[k]])) != GR_OK)
                return st;
    }
    return GR_OK;
}

/* The root against the output's type: a comparison is refused, a number takes the output's
 * type if it is one of its values, anything else must convert safely. */
static gr_status check_root(gr_expr_node *r, gr_dtype out, gr_expr_error *e)
{
    if (r->vt == VT_BOOL)
        return fail(e, r->pos, "the expression is a comparison, not a value: write "
                               "select(a < b, 1, 0) for a number");
    if (r->vt == VT_WEAK) {
        double v = gr__expr_convert(out, GR_DTYPE_FLOAT64, r->value);
        bool fits = out == GR_DTYPE_FLOAT64 ||
                    (gr__dtype_is_float(out) ? isfinite(v) && (v != 0 || r->value == 0)
                                             : v == r->value);

        if (!fits)
            return fail(e, r->pos, "the value %g is not a value of the output's type, %s: "
                                   "write %s(...) to convert it", r->value, gr_dtype_name(out),
                        gr_dtype_name(out));
        r->vt = (uint8_t)out;
        r->value = v;
        return GR_OK;
    }
    if (r->vt != out && !gr_dtype_safe_cast((gr_dtype)r->vt, out))
        return fail(e, 0, "the expression's value is %s, which does not convert safely to %s "
                          "(the output's type): write %s(...) around it",
                    gr_dtype_name(r->vt), gr_dtype_name(out), gr_dtype_name(out));
    return GR_OK;
}

/* ------------------------------------------------------------------------------------
 * The CPU program.
 * ---------------------------------------------------------------------------------- */

/* ------------------------------------------------------------------------------------
 * The CUDA source.
 * ---------------------------------------------------------------------------------- */

/* ------------------------------------------------------------------------------------
 * Parsing, typing and registering.
 * ---------------------------------------------------------------------------------- */

gr_status gr__expr_eval_const(const char *text, size_t len, const gr_expr_param *params,
                              uint32_t n_params, double *out, gr_expr_error *e)
{
    gr_expr_node *nodes = gr__expr_nodes_alloc(e);
    xp p;
    gr_status st;

    if (nodes == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    st = gr__expr_parse(&p, text, len, nodes, e);
    if (st == GR_OK)
        st = type_nodes(nodes, p.n, text, NULL, params, n_params, true, e);
    if (st == GR_OK && nodes[p.n - 1].vt == VT_BOOL)
        st = fail(e, nodes[p.n - 1].pos, "a comparison is not a value: use it as select's "
                                         "condition, select(a < b, x, y)");
    if (st == GR_OK)
        *out = nodes[p.n - 1].value;
    free(nodes);
    return st;
}

/* Programs registered and not yet freed, by key. */
typedef struct known {
    struct known *next;
    char *key;
    char name[GR_NAME_MAX + 1];
    const gr_expr_prog *prog; /* its kernel's user pointer */
} known;

static pthread_mutex_t compile_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static known *known_list; /* guarded by list_mu */

/* Take the entry of `prog` off the list (register_prog also unlinks a stale entry, inside
 * its lookup's critical section). */
static known *unlink_known(const gr_expr_prog *prog)
{
    known **at, *k = NULL;

    pthread_mutex_lock(&list_mu);
    for (at = &known_list; *at != NULL; at = &(*at)->next)
        if ((*at)->prog == prog) {
            k = *at;
            *at = k->next;
            break;
        }
    pthread_mutex_unlock(&list_mu);
    return k;
}

/* An expression kernel's destroy: its program and its entry go with it. */
static void expr_destroy(void *user)
{
    known *k = unlink_known(user);

    if (k != NULL) {
        free(k->key);
        free(k);
    }
    gr__expr_prog_free(user);
}
/* Relaxed: it only selects what later registrations make; compile_mu orders the list. */
static atomic_bool without_cuda;

void gr__expr_without_cuda(void)
{
    atomic_store_explicit(&without_cuda, true, memory_order_relaxed);
}

static uint64_t fnv1a(const char *s, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static gr_status oom(gr_expr_error *e)
{
    e->status = GR_ERR_OUT_OF_MEMORY;
    snprintf(e->why, sizeof(e->why), "out of memory compiling an expression");
    return GR_ERR_OUT_OF_MEMORY;
}

/* Register the program of `nodes` under the name its key makes, unless it is already
 * (gr__expr_register says what `held` does). */
static gr_status register_prog(const char *text, size_t len, const gr_expr_node *nodes,
                               uint32_t n, const gr_expr_env *env, char *name,
                               const gr_kernel **held, gr_expr_error *e)
{
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_expr_prog *prog = NULL;
    char entry[GR_KERNEL_ENTRY_MAX + 1], doc[160];
    char *head = NULL, *body = NULL, *src = NULL, *key = NULL;
    const gr_kernel *found = NULL, *drop = NULL;
    size_t head_len, body_len;
    gr_error_info err;
    gr_status st = GR_OK;
    bool cuda = true;
    uint64_t h;
    known *k, **at;

    if (!gr__expr_cuda(nodes, n, env, &head, &body))
        return oom(e);
    if (atomic_load_explicit(&without_cuda, memory_order_relaxed)) {
        /* The key (and so the name) says so: the CUDA text marked, and not registered. */
        char *marked = malloc(strlen(head) + sizeof("// without CUDA\n"));

        if (marked == NULL) {
            free(head);
            free(body);
            return oom(e);
        }
        snprintf(marked, strlen(head) + sizeof("// without CUDA\n"), "// without CUDA\n%s",
                 head);
        free(head);
        head = marked;
        cuda = false;
    }
    head_len = strlen(head);
    body_len = strlen(body);
    h = fnv1a(body, body_len, fnv1a(head, head_len, 0xcbf29ce484222325ull));
    snprintf(name, GR_NAME_MAX + 1, "expr.%016llx", (unsigned long long)h);
    snprintf(entry, sizeof(entry), "gr_expr_%016llx", (unsigned long long)h);
    src = malloc(head_len + strlen(entry) + body_len + 1);
    key = malloc(head_len + body_len + 1);
    if (src == NULL || key == NULL) {
        st = oom(e);
        goto out;
    }
    snprintf(src, head_len + strlen(entry) + body_len + 1, "%s%s%s", head, entry, body);
    snprintf(key, head_len + body_len + 1, "%s%s", head, body);
    pthread_mutex_lock(&compile_mu);
    /* The entry is looked up and its kernel held under list_mu: a kernel's destroy (at its
     * last hold, on any thread, a worker freeing a graph included) unlinks and frees its
     * entry under list_mu too, so the entry cannot go while it is read here. The registry's
     * lock is taken inside list_mu, never the other way (destroys run outside it). */
    pthread_mutex_lock(&list_mu);
    for (at = &known_list; *at != NULL; at = &(*at)->next)
        if (strcmp((*at)->key, key) == 0)
            break;
    k = *at;
    if (k != NULL && (found = gr__kernel_hold_user(k->name, k->prog, held == NULL)) != NULL)
        gr__strlcpy(name, k->name, GR_NAME_MAX + 1);
    else if (k != NULL)
        *at = k->next; /* its kernel unregistered, to go at its last hold: register again */
    pthread_mutex_unlock(&list_mu);
    if (found != NULL) {
        if (held != NULL)
            *held = found;
        else
            drop = found;
        goto out_unlock;
    }
    if (k != NULL) {
        free(k->key);
        free(k);
    }
    if ((prog = gr__expr_prog_build(nodes, n, env)) == NULL ||
        (k = calloc(1, sizeof(*k))) == NULL) {
        gr__expr_prog_free(prog);
        st = oom(e);
        goto out_unlock;
    }
    if (gr__expr_prog_slots(prog) > MAX_SLOTS) {
        st = fail(e, 0, "expression is too large (it needs more than %d registers)", MAX_SLOTS);
        goto out_free_prog;
    }
    snprintf(doc, sizeof(doc), "expr: %.*s%s", (int)(len > 140 ? 137 : len), text,
             len > 140 ? "..." : "");
    for (char *c = doc; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = ' ';
    d.name = name;
    d.doc = doc;
    d.n_inputs = env->n_inputs;
    d.out_dtype = env->out_dtype;
    memcpy(d.in_dtype, env->input_dtype, sizeof(d.in_dtype));
    d.elementwise = 1;
    d.cpu = gr__expr_cpu;
    d.user = prog;
    d.destroy = expr_destroy;
    if (cuda) {
        d.cuda_kind = GR_CUDA_SOURCE;
        d.cuda = src;
        d.cuda_name = entry;
    }
    k->key = key;
    k->prog = prog;
    gr__strlcpy(k->name, name, sizeof(k->name));
    /* Listed before the kernel is registered, so that its destroy, which may come as soon
     * as it is (an unregister by name), finds the entry to take off. */
    pthread_mutex_lock(&list_mu);
    k->next = known_list;
    known_list = k;
    pthread_mutex_unlock(&list_mu);
    st = held != NULL ? gr__kernel_register_held(&d, held, &err) : gr_kernel_register(&d, &err);
    if (st != GR_OK) {
        (void)unlink_known(prog);
        e->status = st;
        e->offset = 0;
        snprintf(e->why, sizeof(e->why), "cannot register the expression's kernel: %.160s",
                 err.message);
        goto out_free_prog;
    }
    key = NULL;
    goto out_unlock;

out_free_prog:
    free(k);
    gr__expr_prog_free(prog);
out_unlock:
    pthread_mutex_unlock(&compile_mu);
    /* After the locks: a registration that pinned it may see it unregistered at once. */
    gr__kernel_release(drop);
out:
    free(head);
    free(body);
    free(src);
    free(key);
    return st;
}

gr_status gr__expr_register(const char *text, size_t len, const gr_expr_env *env, char *name,
                            const gr_kernel **held, gr_expr_error *e)
{
    gr_expr_node *nodes = malloc(GR_EXPR_MAX_NODES * sizeof(gr_expr_node));
    xp p;
    gr_status st;

    memset(e, 0, sizeof(*e));
    if (nodes == NULL)
        return oom(e);
    st = gr__expr_parse(&p, text, len, nodes, e);
    if (st == GR_OK)
        st = type_nodes(nodes, p.n, text, env, env->params, env->n_params, false, e);
    if (st == GR_OK)
        st = check_root(&nodes[p.n - 1], env->out_dtype, e);
    if (st == GR_OK)
        st = register_prog(text, len, nodes, p.n, env, name, held, e);
    free(nodes);
    return st;
}

/* ------------------------------------------------------------------------------------
 * The public entry.
 * ---------------------------------------------------------------------------------- */

/* "expr:LINE:COL: why" for an error at byte `at` of `text`. */
static gr_status public_error(gr_error_info *err, const char *text, const gr_expr_error *e)
{
    size_t line = 1, col = 1;

    if (e->status != GR_ERR_INVALID_ARGUMENT)
        return gr__error_set(err, e->status, GR_NO_INDEX, NULL, "%s", e->why);
    for (size_t i = 0; i < e->offset && text[i]; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL, "expr:%zu:%zu: %s",
                         line, col, e->why);
}

/* The size of the first version of gr_expr_def: callers must know at least that much. */
#define EXPR_DEF_V1_SIZE (offsetof(gr_expr_def, param_values) + sizeof(void *))

gr_status gr_kernel_register_expr(const gr_expr_def *caller, char *name, size_t name_size,
                                  gr_error_info *err)
{
    gr_expr_def full, *def = &full;
    gr_expr_param params[GR_EXPR_MAX_PARAMS];
    char got[GR_NAME_MAX + 1];
    gr_expr_env env;
    gr_expr_error e;
    gr_status st;
    size_t len;

    if (caller == NULL || caller->magic != GR_EXPR_DEF_MAGIC ||
        caller->struct_size < EXPR_DEF_V1_SIZE)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "expression definition not initialized with GR_EXPR_DEF_INIT");
    /* A caller compiled against an older, shorter definition gets zeros (the defaults) for
     * the fields it does not know. */
    memset(&full, 0, sizeof(full));
    memcpy(&full, caller, caller->struct_size < sizeof(full) ? caller->struct_size : sizeof(full));
    if (def->text == NULL || name == NULL || name_size < sizeof(got))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "gr_kernel_register_expr: %s",
                             def->text == NULL ? "text is NULL"
                                              : "name must hold GR_NAME_MAX + 1 bytes");
    if (def->n_inputs < 1 || def->n_inputs > GR_MAX_KERNEL_INPUTS)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "an expression takes 1 to %d inputs (got %u)",
                             GR_MAX_KERNEL_INPUTS, def->n_inputs);
    if (def->n_params > GR_EXPR_MAX_PARAMS ||
        (def->n_params > 0 && (def->param_names == NULL || def->param_values == NULL)))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "an expression takes 0 to %d params, with names and values (got "
                             "%u)", GR_EXPR_MAX_PARAMS, def->n_params);
    memset(&env, 0, sizeof(env));
    env.n_inputs = def->n_inputs;
    env.out_dtype = def->out_dtype;
    if (gr_dtype_size(def->out_dtype) == 0)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "unknown output element type %d", (int)def->out_dtype);
    for (uint32_t k = 0; k < def->n_inputs + def->n_params; k++) {
        bool input = k < def->n_inputs;
        const char *nm = input ? def->input_names[k] : def->param_names[k - def->n_inputs];

        if (nm == NULL || strlen(nm) > GR_NAME_MAX || !gr__expr_name_ok(nm, strlen(nm)))
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "%s %u's name '%.32s' cannot be named in an expression (1-%d "
                                 "characters of [A-Za-z0-9_.], starting with a letter or '_', "
                                 "not a function's name)",
                                 input ? "input" : "param", input ? k : k - def->n_inputs,
                                 nm ? nm : "(null)", GR_NAME_MAX);
        for (uint32_t j = 0; j < k; j++) {
            const char *other = j < def->n_inputs ? def->input_names[j]
                                                  : def->param_names[j - def->n_inputs];
            if (strcmp(other, nm) == 0)
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                     "the name '%s' is given twice", nm);
        }
        if (input) {
            if (gr_dtype_size(def->input_dtype[k]) == 0)
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                     "input '%s': unknown element type %d", nm,
                                     (int)def->input_dtype[k]);
            env.input_names[k] = nm;
            env.input_dtype[k] = def->input_dtype[k];
        } else {
            double v = def->param_values[k - def->n_inputs];

            if (!isfinite(v))
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                     "param '%s' is not finite", nm);
            params[k - def->n_inputs] = (gr_expr_param){nm, strlen(nm), v};
        }
    }
    env.params = params;
    env.n_params = def->n_params;
    len = strnlen(def->text, GR_EXPR_MAX_TEXT + 1);
    st = gr__expr_register(def->text, len, &env, got, NULL, &e);
    if (st != GR_OK)
        return public_error(err, def->text, &e);
    gr__strlcpy(name, got, name_size);
    return GR_OK;
}

/*
 * expr_cpu.c - the CPU program of an expression (expr_impl.h): the typed tree as a list of
 * operations over registers, run a block of BLOCK elements at a time, one loop per
 * operation (numexpr's scheme), so the dispatch is paid once per block, not per element.
 *
 * A register is a block of floats or doubles: a temporary in scratch memory (released
 * once its one use has read it: the program is a tree), a constant filled once per call,
 * an input converted per block, or a float32 or float64 input read where it lies. The
 * operations compute exactly what expr_cuda.c's source does: one rounding per float32
 * operation (this file is compiled with -ffp-contract=off), sqrt correctly rounded, the
 * conversions dtype.h's, min, max and pow expr_impl.h's.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/expr_impl.h"

#define BLOCK 256      /* elements per operation */
#define MAX_SLOTS 2048 /* of a program: its blocks fit gr__expr_cpu's fallback */

typedef enum insn_op {
    I_LOAD, /* t: the input's type; a: the input */
    I_TO_F64,
    I_TO_F32,
    I_NEG,
    I_ADD,
    I_SUB,
    I_MUL,
    I_DIV,
    I_LT,
    I_LE,
    I_GT,
    I_GE,
    I_EQ,
    I_NE,
    I_SQRT,
    I_EXP,
    I_LOG,
    I_TANH,
    I_SIGMOID,
    I_FLOOR,
    I_ABS,
    I_POW,
    I_MIN,
    I_MAX,
    I_SELECT,
    I_CAST, /* t: the type cast to; t2: the operand's type */
    I_STORE, /* t: the output's type; t2: the value's */
} insn_op;

typedef struct insn {
    uint8_t op, cls, t, t2;
    uint16_t d, a, b, c;
} insn;

/* A register: a float or double per element of the block, in scratch memory, or an input
 * read where it lies. */
enum { R_SLOT, R_INPUT, R_CONST, R_LOADED };

typedef struct reg {
    uint8_t kind, cls;
    uint16_t input; /* R_INPUT */
    uint32_t slot;  /* R_SLOT, R_CONST: which BLOCK-sized slot of scratch */
    double value;   /* R_CONST */
} reg;

typedef struct gr_expr_prog {
    uint32_t n_insns, n_regs, n_slots;
    insn *insns;
    reg *regs;
    gr_dtype in_dtype[GR_MAX_KERNEL_INPUTS], out_dtype;
} gr_expr_prog;

void gr__expr_prog_free(gr_expr_prog *p)
{
    if (p != NULL) {
        free(p->insns);
        free(p->regs);
        free(p);
    }
}

typedef struct builder {
    gr_expr_prog *p;
    uint32_t cap_insns, cap_regs;
    uint16_t *free_slots; /* temporaries' slots no longer live */
    uint32_t n_free;
    int32_t input_reg[GR_MAX_KERNEL_INPUTS];
    bool oom;
} builder;

static int new_reg(builder *b, int kind, int cls)
{
    gr_expr_prog *p = b->p;
    reg *r;

    if (p->n_regs == b->cap_regs) {
        reg *g = realloc(p->regs, (b->cap_regs * 2 + 16) * sizeof(*g));

        if (g == NULL) {
            b->oom = true;
            return 0;
        }
        p->regs = g;
        b->cap_regs = b->cap_regs * 2 + 16;
    }
    r = &p->regs[p->n_regs];
    memset(r, 0, sizeof(*r));
    r->kind = (uint8_t)kind;
    r->cls = (uint8_t)cls;
    if (kind != R_INPUT)
        r->slot = kind == R_SLOT && b->n_free > 0 ? b->free_slots[--b->n_free] : p->n_slots++;
    return (int)p->n_regs++;
}

static void emit(builder *b, int o, int cls, int t, int t2, int d, int a, int x, int c)
{
    gr_expr_prog *p = b->p;
    insn *in;

    if (p->n_insns == b->cap_insns) {
        insn *g = realloc(p->insns, (b->cap_insns * 2 + 16) * sizeof(*g));

        if (g == NULL) {
            b->oom = true;
            return;
        }
        p->insns = g;
        b->cap_insns = b->cap_insns * 2 + 16;
    }
    in = &p->insns[p->n_insns++];
    *in = (insn){(uint8_t)o, (uint8_t)cls, (uint8_t)t, (uint8_t)t2,
                 (uint16_t)d, (uint16_t)a, (uint16_t)x, (uint16_t)c};
}

/* A temporary register is free again once its value was used (every value is used once:
 * the program is a tree). Callers take the result's register before releasing the
 * operands': a result never shares a slot with an operand, which a conversion between
 * float and double (of other sizes) could not survive. */
static void release(builder *b, int r)
{
    if (b->p->regs[r].kind == R_SLOT)
        b->free_slots[b->n_free++] = (uint16_t)b->p->regs[r].slot;
}

/* A register holding constant v in class cls (one per value and class). */
static int const_reg(builder *b, double v, int cls)
{
    gr_expr_prog *p = b->p;
    int r;

    if (cls == CLS_F32)
        v = (float)v;
    for (uint32_t i = 0; i < p->n_regs; i++)
        if (p->regs[i].kind == R_CONST && p->regs[i].cls == cls &&
            memcmp(&p->regs[i].value, &v, sizeof(v)) == 0)
            return (int)i;
    r = new_reg(b, R_CONST, cls);
    if (!b->oom)
        p->regs[r].value = v;
    return r;
}

/* Node i's value as an operand computed in class cls: its register, converted. */
static int operand(builder *b, const gr_expr_node *nodes, const int *val, uint32_t i, int cls)
{
    const gr_expr_node *x = &nodes[i];
    int r, d;

    if (x->is_const)
        return const_reg(b, x->value, cls);
    r = val[i];
    if (b->oom || b->p->regs[r].cls == cls)
        return r;
    d = new_reg(b, R_SLOT, cls);
    release(b, r);
    emit(b, cls == CLS_F64 ? I_TO_F64 : I_TO_F32, cls, 0, 0, d, r, 0, 0);
    return d;
}

static const uint8_t insn_of[] = {
    [OP_NEG] = I_NEG,   [OP_ADD] = I_ADD,   [OP_SUB] = I_SUB,     [OP_MUL] = I_MUL,
    [OP_DIV] = I_DIV,   [OP_LT] = I_LT,     [OP_LE] = I_LE,       [OP_GT] = I_GT,
    [OP_GE] = I_GE,     [OP_EQ] = I_EQ,     [OP_NE] = I_NE,       [OP_SQRT] = I_SQRT,
    [OP_EXP] = I_EXP,   [OP_LOG] = I_LOG,   [OP_TANH] = I_TANH,   [OP_SIGMOID] = I_SIGMOID,
    [OP_FLOOR] = I_FLOOR, [OP_ABS] = I_ABS, [OP_POW] = I_POW,     [OP_MIN] = I_MIN,
    [OP_MAX] = I_MAX,   [OP_SELECT] = I_SELECT,
};

/* Whether a cast from type `from` to `to` leaves a value's register as it is. */
static bool cast_is_relabel(int from, int to)
{
    /* float32 holds every float16, bfloat16 and uint8 value, float64 every int32 value. */
    if (gr__expr_cls(from) != gr__expr_cls(to))
        return false;
    return from == to || to == GR_DTYPE_FLOAT32 || to == GR_DTYPE_FLOAT64;
}

gr_expr_prog *gr__expr_prog_build(const gr_expr_node *nodes, uint32_t n, const gr_expr_env *env)
{
    builder b;
    int *val = calloc(n, sizeof(int));
    gr_expr_prog *p = calloc(1, sizeof(*p));
    const gr_expr_node *root = &nodes[n - 1];
    int rr;

    memset(&b, 0, sizeof(b));
    b.p = p;
    /* A node makes at most six temporaries (clamp: three conversions, max, min; the root
     * one more), so the free ones never outnumber that. */
    b.free_slots = calloc((size_t)n * 6 + 8, sizeof(uint16_t));
    if (val == NULL || p == NULL || b.free_slots == NULL)
        goto out_oom;
    for (uint32_t k = 0; k < GR_MAX_KERNEL_INPUTS; k++)
        b.input_reg[k] = -1;
    p->out_dtype = env->out_dtype;
    memcpy(p->in_dtype, env->input_dtype, sizeof(p->in_dtype));
    for (uint32_t i = 0; i < n && !b.oom; i++) {
        const gr_expr_node *x = &nodes[i];
        int a, c, d, t;

        if (x->is_const || x->op == OP_NUM)
            continue;
        if (x->op == OP_INPUT) {
            /* Each input is read once per block, however often the text names it. */
            if (b.input_reg[x->input] < 0) {
                t = p->in_dtype[x->input];
                if (t == GR_DTYPE_FLOAT32 || t == GR_DTYPE_FLOAT64) {
                    b.input_reg[x->input] = new_reg(&b, R_INPUT, gr__expr_cls(t));
                    p->regs[b.input_reg[x->input]].input = (uint16_t)x->input;
                } else {
                    /* Never released: a slot of its own for the whole block. */
                    b.input_reg[x->input] = new_reg(&b, R_LOADED, gr__expr_cls(t));
                    emit(&b, I_LOAD, gr__expr_cls(t), t, 0, b.input_reg[x->input],
                         (int)x->input, 0, 0);
                }
            }
            val[i] = b.input_reg[x->input];
            continue;
        }
        if (x->op == OP_CAST) {
            const gr_expr_node *s = &nodes[x->arg[0]];

            a = operand(&b, nodes, val, x->arg[0], gr__expr_cls(s->vt));
            if (!s->is_const && cast_is_relabel(s->vt, x->dtype) &&
                p->regs[a].cls == gr__expr_cls(x->dtype)) {
                val[i] = a;
                continue;
            }
            d = new_reg(&b, R_SLOT, gr__expr_cls(x->dtype));
            release(&b, a);
            emit(&b, I_CAST, gr__expr_cls(s->vt), x->dtype, s->vt, d, a, 0, 0);
            val[i] = d;
            continue;
        }
        if (x->op == OP_CLAMP) {
            int lo, hi, m;

            a = operand(&b, nodes, val, x->arg[0], x->cls);
            lo = operand(&b, nodes, val, x->arg[1], x->cls);
            m = new_reg(&b, R_SLOT, x->cls);
            release(&b, a);
            release(&b, lo);
            emit(&b, I_MAX, x->cls, 0, 0, m, a, lo, 0);
            hi = operand(&b, nodes, val, x->arg[2], x->cls);
            d = new_reg(&b, R_SLOT, x->cls);
            release(&b, m);
            release(&b, hi);
            emit(&b, I_MIN, x->cls, 0, 0, d, m, hi, 0);
            val[i] = d;
            continue;
        }
        if (x->op == OP_SELECT) {
            c = operand(&b, nodes, val, x->arg[0], CLS_F32);
            a = operand(&b, nodes, val, x->arg[1], x->cls);
            t = operand(&b, nodes, val, x->arg[2], x->cls);
            d = new_reg(&b, R_SLOT, x->cls);
            release(&b, c);
            release(&b, a);
            release(&b, t);
            emit(&b, I_SELECT, x->cls, 0, 0, d, c, a, t);
            val[i] = d;
            continue;
        }
        a = operand(&b, nodes, val, x->arg[0], x->cls);
        t = x->n_args > 1 ? operand(&b, nodes, val, x->arg[1], x->cls) : a;
        d = new_reg(&b, R_SLOT, gr__expr_is_cmp(x->op) ? CLS_F32 : x->cls);
        release(&b, a);
        if (x->n_args > 1)
            release(&b, t);
        emit(&b, insn_of[x->op], x->cls, 0, 0, d, a, t, 0);
        val[i] = d;
    }
    rr = b.oom ? 0 : operand(&b, nodes, val, n - 1, gr__expr_cls(root->vt));
    emit(&b, I_STORE, gr__expr_cls(root->vt), p->out_dtype, root->vt, 0, rr, 0, 0);
    if (b.oom)
        goto out_oom;
    free(val);
    free(b.free_slots);
    return p;

out_oom:
    free(val);
    free(b.free_slots);
    gr__expr_prog_free(p);
    return NULL;
}

/* One block of `m` elements starting at `base`. */
typedef struct run_ctx {
    const gr_expr_prog *p;
    const gr_kernel_args *a;
    char *scratch;
    uint64_t base;
    uint32_t block; /* elements per slot */
} run_ctx;

static void *reg_ptr(const run_ctx *x, uint32_t r)
{
    const reg *g = &x->p->regs[r];

    if (g->kind == R_INPUT)
        return (char *)x->a->in[g->input] +
               x->base * gr_dtype_size(x->p->in_dtype[g->input]);
    return x->scratch + (size_t)g->slot * x->block * sizeof(double);
}

#define LOOP(m) for (uint32_t j = 0; j < (m); j++)

/* The operation `in` over m elements: F32 and F64 spell its body for the two classes. */
#define UNARY(F32, F64)                                                                     \
    if (in->cls == CLS_F32) {                                                               \
        float *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->a);                               \
        LOOP(m) d[j] = F32;                                                                 \
    } else {                                                                                \
        double *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->a);                              \
        LOOP(m) d[j] = F64;                                                                 \
    }                                                                                       \
    break

#define BINARY(F32, F64)                                                                    \
    if (in->cls == CLS_F32) {                                                               \
        float *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->a), *b = reg_ptr(x, in->b);       \
        LOOP(m) d[j] = F32;                                                                 \
    } else {                                                                                \
        double *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->a), *b = reg_ptr(x, in->b);      \
        LOOP(m) d[j] = F64;                                                                 \
    }                                                                                       \
    break

#define COMPARE(OP)                                                                         \
    if (in->cls == CLS_F32) {                                                               \
        float *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->a), *b = reg_ptr(x, in->b);       \
        LOOP(m) d[j] = a[j] OP b[j];                                                        \
    } else {                                                                                \
        float *d = reg_ptr(x, in->d);                                                       \
        double *a = reg_ptr(x, in->a), *b = reg_ptr(x, in->b);                              \
        LOOP(m) d[j] = a[j] OP b[j];                                                        \
    }                                                                                       \
    break

static void load(const run_ctx *x, const insn *in, uint32_t m)
{
    const void *src = x->a->in[in->a];
    uint64_t o = x->base;

    if (in->cls == CLS_F64) { /* int32 */
        double *d = reg_ptr(x, in->d);
        const int32_t *s = (const int32_t *)src + o;
        LOOP(m) d[j] = s[j];
        return;
    }
    {
        float *d = reg_ptr(x, in->d);

        if (in->t == GR_DTYPE_UINT8) {
            const uint8_t *s = (const uint8_t *)src + o;
            LOOP(m) d[j] = s[j];
        } else if (in->t == GR_DTYPE_BFLOAT16) {
            const uint16_t *s = (const uint16_t *)src + o;
            LOOP(m) d[j] = gr__bf16_to_f32(s[j]);
        } else {
            const uint16_t *s = (const uint16_t *)src + o;
            LOOP(m) d[j] = gr__f16_to_f32(s[j]);
        }
    }
}

/* I_CAST: to type in->t from a value of type in->t2 (class in->cls), by convert()'s rules
 * but a block at a time. */
static void cast(const run_ctx *x, const insn *in, uint32_t m)
{
    int to = in->t, from = in->t2;
    float *sf = reg_ptr(x, in->a), *df = reg_ptr(x, in->d);
    double *sd = reg_ptr(x, in->a), *dd = reg_ptr(x, in->d);

    if (in->cls == CLS_F32) {
        switch (to) {
        case GR_DTYPE_FLOAT16: LOOP(m) df[j] = gr__f16_to_f32(gr__f32_to_f16(sf[j])); break;
        case GR_DTYPE_BFLOAT16: LOOP(m) df[j] = gr__bf16_to_f32(gr__f32_to_bf16(sf[j])); break;
        case GR_DTYPE_FLOAT64: LOOP(m) dd[j] = sf[j]; break;
        case GR_DTYPE_INT32: LOOP(m) dd[j] = from == GR_DTYPE_UINT8 ? sf[j]
                                                     : gr__f64_to_i32(sf[j]); break;
        case GR_DTYPE_UINT8: LOOP(m) df[j] = gr__f64_to_u8(sf[j]); break;
        default: LOOP(m) df[j] = sf[j]; break;
        }
        return;
    }
    switch (to) {
    case GR_DTYPE_FLOAT16: LOOP(m) df[j] = gr__f16_to_f32(gr__f32_to_f16((float)sd[j])); break;
    case GR_DTYPE_BFLOAT16: LOOP(m) df[j] = gr__bf16_to_f32(gr__f32_to_bf16((float)sd[j])); break;
    case GR_DTYPE_FLOAT32: LOOP(m) df[j] = (float)sd[j]; break;
    case GR_DTYPE_INT32: LOOP(m) dd[j] = from == GR_DTYPE_INT32 ? sd[j]
                                                 : gr__f64_to_i32(sd[j]); break;
    case GR_DTYPE_UINT8:
        if (from == GR_DTYPE_INT32)
            LOOP(m) df[j] = (uint8_t)(uint32_t)(int32_t)sd[j];
        else
            LOOP(m) df[j] = gr__f64_to_u8(sd[j]);
        break;
    default: LOOP(m) dd[j] = sd[j]; break;
    }
}

/* I_STORE: the value (type in->t2, class in->cls) into the output of type in->t. The types
 * were checked: the conversion is exact, so dtype.h's store is the whole rule. */
static void store(const run_ctx *x, const insn *in, uint32_t m)
{
    void *out = x->a->out;
    uint64_t o = x->base;

    if (in->cls == CLS_F32) {
        const float *s = reg_ptr(x, in->a);

        switch (in->t) {
        case GR_DTYPE_FLOAT32: {
            float *d = (float *)out + o;
            LOOP(m) d[j] = s[j];
            break;
        }
        case GR_DTYPE_FLOAT64: {
            double *d = (double *)out + o;
            LOOP(m) d[j] = s[j];
            break;
        }
        default:
            LOOP(m) gr__store_cast(in->t, out, o + j, in->t2, s[j]);
            break;
        }
        return;
    }
    {
        const double *s = reg_ptr(x, in->a);

        if (in->t == GR_DTYPE_FLOAT64) {
            double *d = (double *)out + o;
            LOOP(m) d[j] = s[j];
        } else {
            LOOP(m) gr__store_cast(in->t, out, o + j, in->t2, s[j]);
        }
    }
}

static void run_block(const run_ctx *x, uint32_t m)
{
    for (uint32_t k = 0; k < x->p->n_insns; k++) {
        const insn *in = &x->p->insns[k];

        switch ((insn_op)in->op) {
        case I_LOAD: load(x, in, m); break;
        case I_TO_F64: {
            double *d = reg_ptr(x, in->d);
            float *a = reg_ptr(x, in->a);
            LOOP(m) d[j] = a[j];
            break;
        }
        case I_TO_F32: {
            float *d = reg_ptr(x, in->d);
            double *a = reg_ptr(x, in->a);
            LOOP(m) d[j] = (float)a[j];
            break;
        }
        case I_NEG: UNARY(-a[j], -a[j]);
        case I_ADD: BINARY(a[j] + b[j], a[j] + b[j]);
        case I_SUB: BINARY(a[j] - b[j], a[j] - b[j]);
        case I_MUL: BINARY(a[j] * b[j], a[j] * b[j]);
        case I_DIV: BINARY(a[j] / b[j], a[j] / b[j]);
        case I_LT: COMPARE(<);
        case I_LE: COMPARE(<=);
        case I_GT: COMPARE(>);
        case I_GE: COMPARE(>=);
        case I_EQ: COMPARE(==);
        case I_NE: COMPARE(!=);
        case I_SQRT: UNARY(sqrtf(a[j]), sqrt(a[j]));
        case I_EXP: UNARY(expf(a[j]), exp(a[j]));
        case I_LOG: UNARY(logf(a[j]), log(a[j]));
        case I_TANH: UNARY(tanhf(a[j]), tanh(a[j]));
        case I_SIGMOID: UNARY(1.0f / (1.0f + expf(-a[j])), 1.0 / (1.0 + exp(-a[j])));
        case I_FLOOR: UNARY(floorf(a[j]), floor(a[j]));
        case I_ABS: UNARY(fabsf(a[j]), fabs(a[j]));
        case I_POW: BINARY(pow_f(a[j], b[j]), pow_d(a[j], b[j]));
        case I_MIN: BINARY(min_f(a[j], b[j]), min_d(a[j], b[j]));
        case I_MAX: BINARY(max_f(a[j], b[j]), max_d(a[j], b[j]));
        case I_SELECT: {
            float *c = reg_ptr(x, in->a);

            if (in->cls == CLS_F32) {
                float *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->b), *b = reg_ptr(x, in->c);
                LOOP(m) d[j] = c[j] != 0 ? a[j] : b[j];
            } else {
                double *d = reg_ptr(x, in->d), *a = reg_ptr(x, in->b), *b = reg_ptr(x, in->c);
                LOOP(m) d[j] = c[j] != 0 ? a[j] : b[j];
            }
            break;
        }
        case I_CAST: cast(x, in, m); break;
        case I_STORE: store(x, in, m); break;
        }
    }
}

void gr__expr_cpu(const gr_kernel_args *a, void *user)
{
    const gr_expr_prog *p = user;
    /* Without memory for whole blocks, smaller ones on the stack: a CPU implementation
     * cannot fail, and a program has at most a few thousand registers. */
    double fallback[2 * MAX_SLOTS];
    run_ctx x = {p, a, NULL, 0, BLOCK};

    if (p->n_slots > 0)
        x.scratch = malloc((size_t)p->n_slots * BLOCK * sizeof(double));
    if (x.scratch == NULL) {
        x.scratch = (char *)fallback;
        x.block = p->n_slots ? sizeof(fallback) / sizeof(double) / p->n_slots : BLOCK;
        if (x.block > BLOCK)
            x.block = BLOCK;
    }
    for (uint32_t r = 0; r < p->n_regs; r++) {
        const reg *g = &p->regs[r];

        if (g->kind != R_CONST)
            continue;
        if (g->cls == CLS_F32) {
            float *d = reg_ptr(&x, r), v = (float)g->value;
            LOOP(x.block) d[j] = v;
        } else {
            double *d = reg_ptr(&x, r);
            LOOP(x.block) d[j] = g->value;
        }
    }
    for (x.base = 0; x.base < a->n; x.base += x.block)
        run_block(&x, (uint32_t)(a->n - x.base < x.block ? a->n - x.base : x.block));
    if (x.scratch != (char *)fallback)
        free(x.scratch);
}


uint32_t gr__expr_prog_slots(const gr_expr_prog *p)
{
    return p->n_slots;
}

/*
 * expr_cuda.c - the CUDA C source of an expression (expr_impl.h), for NVRTC: one
 * grid-stride loop whose body is the typed tree, a constant per node, each operation the
 * one expr_cpu.c does: the _rn intrinsics (which NVCC never contracts into an FMA),
 * __fsqrt_rn, graphrun_kernel.h's conversions, and min, max and pow spelled as
 * expr_impl.h spells them for the CPU. Constants are written in hexadecimal, so they are
 * the CPU's to the bit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/expr_impl.h"

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = b->oom ? 0 : vsnprintf(b->s ? b->s + b->len : NULL, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (b->oom || n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        {
            size_t cap = (b->cap + (size_t)n) * 2 + 256;
            char *g = realloc(b->s, cap);

            if (g == NULL) {
                b->oom = true;
                return;
            }
            b->s = g;
            b->cap = cap;
        }
    }
}

/* Node i as an operand computed in class cls, as CUDA C: a literal (exact: hexadecimal),
 * or its variable (numbered in the order they are made, var[i], so that the text depends
 * on the program only, not on how the tree was written), converted. */
static void cuda_operand(sbuf *b, const gr_expr_node *nodes, const uint32_t *var, uint32_t i,
                         int cls)
{
    const gr_expr_node *x = &nodes[i];

    if (x->is_const && x->vt == VT_BOOL)
        put(b, "%s", x->value != 0 ? "true" : "false");
    else if (x->is_const && cls == CLS_F32)
        put(b, "(%af)", (double)(float)x->value);
    else if (x->is_const)
        put(b, "(%a)", x->value);
    else if (x->op == OP_INPUT && gr__expr_cls(x->vt) == cls)
        put(b, "x%u", x->input);
    else if (x->op == OP_INPUT)
        put(b, cls == CLS_F64 ? "(double)x%u" : "__double2float_rn(x%u)", x->input);
    else if (gr__expr_cls(x->vt) == cls)
        put(b, "v%u", var[i]);
    else
        put(b, cls == CLS_F64 ? "(double)v%u" : "__double2float_rn(v%u)", var[i]);
}

static const char *const cuda_f32[] = {
    [OP_NEG] = "-", [OP_ADD] = "__fadd_rn", [OP_SUB] = "__fsub_rn", [OP_MUL] = "__fmul_rn",
    [OP_DIV] = "__fdiv_rn", [OP_SQRT] = "__fsqrt_rn", [OP_EXP] = "expf", [OP_LOG] = "logf",
    [OP_TANH] = "tanhf", [OP_SIGMOID] = "gr_x_sigmoid_f", [OP_FLOOR] = "floorf",
    [OP_ABS] = "fabsf", [OP_POW] = "gr_x_pow_f", [OP_MIN] = "gr_x_min_f",
    [OP_MAX] = "gr_x_max_f",
};

static const char *const cuda_f64[] = {
    [OP_NEG] = "-", [OP_ADD] = "__dadd_rn", [OP_SUB] = "__dsub_rn", [OP_MUL] = "__dmul_rn",
    [OP_DIV] = "__ddiv_rn", [OP_SQRT] = "__dsqrt_rn", [OP_EXP] = "exp", [OP_LOG] = "log",
    [OP_TANH] = "tanh", [OP_SIGMOID] = "gr_x_sigmoid_d", [OP_FLOOR] = "floor",
    [OP_ABS] = "fabs", [OP_POW] = "gr_x_pow_d", [OP_MIN] = "gr_x_min_d",
    [OP_MAX] = "gr_x_max_d",
};

static const char *const cuda_cmp[] = {
    [OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">=", [OP_EQ] = "==", [OP_NE] = "!=",
};

/* The helpers every source has: min, max, pow and sigmoid with the CPU side's cases. */
static const char cuda_helpers[] =
    "#define GR_X_MIN(a, b, neg) ((a) != (a) ? (b) : (b) != (b) ? (a) : (a) == (b) ? "
    "(neg(a) ? (a) : (b)) : (a) < (b) ? (a) : (b))\n"
    "#define GR_X_MAX(a, b, neg) ((a) != (a) ? (b) : (b) != (b) ? (a) : (a) == (b) ? "
    "(neg(a) ? (b) : (a)) : (a) > (b) ? (a) : (b))\n"
    "#define GR_X_NEG_F(a) (__float_as_uint(a) >> 31)\n"
    "#define GR_X_NEG_D(a) (__double_as_longlong(a) < 0)\n"
    "static __device__ __forceinline__ float gr_x_min_f(float a, float b) "
    "{ return GR_X_MIN(a, b, GR_X_NEG_F); }\n"
    "static __device__ __forceinline__ float gr_x_max_f(float a, float b) "
    "{ return GR_X_MAX(a, b, GR_X_NEG_F); }\n"
    "static __device__ __forceinline__ double gr_x_min_d(double a, double b) "
    "{ return GR_X_MIN(a, b, GR_X_NEG_D); }\n"
    "static __device__ __forceinline__ double gr_x_max_d(double a, double b) "
    "{ return GR_X_MAX(a, b, GR_X_NEG_D); }\n"
    "static __device__ __forceinline__ float gr_x_pow_f(float x, float e)\n"
    "{ return e == 0.5f ? __fsqrt_rn(x) : e == 1.0f ? x : e == 2.0f ? __fmul_rn(x, x) "
    ": powf(x, e); }\n"
    "static __device__ __forceinline__ double gr_x_pow_d(double x, double e)\n"
    "{ return e == 0.5 ? __dsqrt_rn(x) : e == 1.0 ? x : e == 2.0 ? __dmul_rn(x, x) "
    ": pow(x, e); }\n"
    "static __device__ __forceinline__ float gr_x_sigmoid_f(float x)\n"
    "{ return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }\n"
    "static __device__ __forceinline__ double gr_x_sigmoid_d(double x)\n"
    "{ return __ddiv_rn(1.0, __dadd_rn(1.0, exp(-x))); }\n";

static const char *const cuda_type[] = {
    [GR_DTYPE_FLOAT32] = "float",          [GR_DTYPE_FLOAT16] = "unsigned short",
    [GR_DTYPE_BFLOAT16] = "unsigned short", [GR_DTYPE_FLOAT64] = "double",
    [GR_DTYPE_INT32] = "int",              [GR_DTYPE_UINT8] = "unsigned char",
};

/* A cast of `v` (class of `from`) to `to`, as a value of to's class. */
static void cuda_cast(sbuf *b, int to, int from, const char *v)
{
    bool f64 = gr__expr_cls(from) == CLS_F64;
    char f[48];

    snprintf(f, sizeof(f), f64 ? "__double2float_rn(%s)" : "%s", v);
    switch (to) {
    case GR_DTYPE_FLOAT16: put(b, "gr_f16_to_f32(gr_f32_to_f16(%s))", f); break;
    case GR_DTYPE_BFLOAT16: put(b, "gr_bf16_to_f32(gr_f32_to_bf16(%s))", f); break;
    case GR_DTYPE_FLOAT32: put(b, "%s", f); break;
    case GR_DTYPE_FLOAT64: put(b, "(double)%s", v); break;
    case GR_DTYPE_INT32:
        if (from == GR_DTYPE_UINT8 || from == GR_DTYPE_INT32)
            put(b, "(double)%s", v);
        else
            put(b, "(double)gr_f64_to_i32((double)%s)", v);
        break;
    case GR_DTYPE_UINT8:
        if (from == GR_DTYPE_INT32)
            put(b, "(float)(unsigned char)(unsigned)(int)%s", v);
        else
            put(b, "(float)gr_f64_to_u8((double)%s)", v);
        break;
    default: put(b, "%s", v); break;
    }
}

/* The kernel's text after its name, and before it the helpers and the types (the key of
 * the program: everything but the name, which is made from it). */
static void cuda_source(sbuf *head, sbuf *body, const gr_expr_node *nodes, uint32_t n,
                        const gr_expr_env *env, uint32_t *var)
{
    const gr_expr_node *root = &nodes[n - 1];
    bool used[GR_MAX_KERNEL_INPUTS] = {false};
    uint32_t n_vars = 0;

    put(head, "#include \"graphrun_kernel.h\"\n%s/* types:", cuda_helpers);
    for (uint32_t k = 0; k < env->n_inputs; k++)
        put(head, " %s", gr_dtype_name(env->input_dtype[k]));
    put(head, " -> %s */\nextern \"C\" __global__ void ", gr_dtype_name(env->out_dtype));
    put(body, "(gr_kernel_args a)\n{\n    GR_FOR_EACH(i, a)\n    {\n");
    for (uint32_t i = 0; i < n; i++)
        if (nodes[i].op == OP_INPUT)
            used[nodes[i].input] = true;
    for (uint32_t k = 0; k < env->n_inputs; k++) {
        gr_dtype t = env->input_dtype[k];
        const char *wrap = t == GR_DTYPE_FLOAT16 ? "gr_f16_to_f32" : t == GR_DTYPE_BFLOAT16
                               ? "gr_bf16_to_f32" : t == GR_DTYPE_UINT8 ? "(float)"
                               : t == GR_DTYPE_INT32 ? "(double)" : "";

        if (used[k])
            put(body, "        const %s x%u = %s(GR_IN(a, %u, %s)[i]);\n",
                gr__expr_cls(t) == CLS_F64 ? "double" : "float", k, wrap, k, cuda_type[t]);
    }
    for (uint32_t i = 0; i < n; i++) {
        const gr_expr_node *x = &nodes[i];
        const char *ty = x->vt == VT_BOOL ? "bool" : gr__expr_cls(x->vt) == CLS_F64 ? "double"
                                                                               : "float";

        if (x->is_const || x->op == OP_INPUT || x->op == OP_NUM)
            continue;
        var[i] = n_vars++;
        put(body, "        const %s v%u = ", ty, var[i]);
        if (x->op == OP_CAST) {
            sbuf s = {0};

            cuda_operand(&s, nodes, var, x->arg[0], gr__expr_cls(nodes[x->arg[0]].vt));
            if (s.oom) {
                body->oom = true;
                free(s.s);
                return;
            }
            cuda_cast(body, x->dtype, nodes[x->arg[0]].vt, s.s);
            free(s.s);
        } else if (x->op == OP_SELECT) {
            put(body, "(");
            cuda_operand(body, nodes, var, x->arg[0], CLS_F32);
            put(body, " ? ");
            cuda_operand(body, nodes, var, x->arg[1], x->cls);
            put(body, " : ");
            cuda_operand(body, nodes, var, x->arg[2], x->cls);
            put(body, ")");
        } else if (x->op == OP_CLAMP) {
            const char *const *f = x->cls == CLS_F64 ? cuda_f64 : cuda_f32;

            put(body, "%s(%s(", f[OP_MIN], f[OP_MAX]);
            cuda_operand(body, nodes, var, x->arg[0], x->cls);
            put(body, ", ");
            cuda_operand(body, nodes, var, x->arg[1], x->cls);
            put(body, "), ");
            cuda_operand(body, nodes, var, x->arg[2], x->cls);
            put(body, ")");
        } else if (gr__expr_is_cmp(x->op)) {
            put(body, "(");
            cuda_operand(body, nodes, var, x->arg[0], x->cls);
            put(body, " %s ", cuda_cmp[x->op]);
            cuda_operand(body, nodes, var, x->arg[1], x->cls);
            put(body, ")");
        } else {
            put(body, "%s(", (x->cls == CLS_F64 ? cuda_f64 : cuda_f32)[x->op]);
            cuda_operand(body, nodes, var, x->arg[0], x->cls);
            if (x->n_args > 1) {
                put(body, ", ");
                cuda_operand(body, nodes, var, x->arg[1], x->cls);
            }
            put(body, ")");
        }
        put(body, ";\n");
    }
    {
        sbuf s = {0};
        gr_dtype o = env->out_dtype;
        bool f64 = gr__expr_cls(root->vt) == CLS_F64;

        cuda_operand(&s, nodes, var, n - 1, gr__expr_cls(root->vt));
        if (s.oom) {
            body->oom = true;
            free(s.s);
            return;
        }
        put(body, "        const %s r = %s;\n        GR_OUT(a, %s)[i] = ",
            f64 ? "double" : "float", s.s, cuda_type[o]);
        free(s.s);
        switch (o) {
        case GR_DTYPE_FLOAT32: put(body, f64 ? "__double2float_rn(r)" : "r"); break;
        case GR_DTYPE_FLOAT64: put(body, "(double)r"); break;
        case GR_DTYPE_FLOAT16:
            put(body, f64 ? "gr_f32_to_f16(__double2float_rn(r))" : "gr_f32_to_f16(r)");
            break;
        case GR_DTYPE_BFLOAT16:
            put(body, f64 ? "gr_f32_to_bf16(__double2float_rn(r))" : "gr_f32_to_bf16(r)");
            break;
        case GR_DTYPE_INT32: put(body, "gr_f64_to_i32((double)r)"); break;
        case GR_DTYPE_UINT8:
            put(body, root->vt == GR_DTYPE_INT32 ? "(unsigned char)(unsigned)(int)r"
                                                 : "gr_f64_to_u8((double)r)");
            break;
        default: break;
        }
        put(body, ";\n    }\n}\n");
    }
}


bool gr__expr_cuda(const gr_expr_node *nodes, uint32_t n, const gr_expr_env *env, char **head,
                   char **body)
{
    sbuf h = {0}, b = {0};
    uint32_t *var = calloc(n, sizeof(*var));

    if (var != NULL)
        cuda_source(&h, &b, nodes, n, env, var);
    free(var);
    if (var == NULL || h.oom || b.oom) {
        free(h.s);
        free(b.s);
        return false;
    }
    *head = h.s;
    *body = b.s;
    return true;
}

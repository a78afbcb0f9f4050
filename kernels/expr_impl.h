/*
 * expr_impl.h - what the parts of the expression compiler share (kernels/expr_parse.c: the
 * text to the tree; expr.c: its types, folding and registration; expr_cpu.c: the CPU
 * program; expr_cuda.c: the CUDA source): the typed tree, and the definitions of the
 * operations that both sides must compute alike.
 *
 * The tree is an array in post-order: every node after its operands, the root last.
 */
#ifndef GR_KERNELS_EXPR_IMPL_H
#define GR_KERNELS_EXPR_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"
#include "kernels/expr.h"

/* A value's type: an element type (gr_dtype), or a number not yet given one ("weak": it
 * takes the type of what it meets), or a comparison's result. */
enum { VT_WEAK = GR_DTYPE_COUNT_, VT_BOOL };

/* The two ways values are held and computed: float (float32, and the types float32 holds
 * exactly: float16, bfloat16, uint8, booleans) and double (float64, int32). */
enum { CLS_F32, CLS_F64 };

typedef enum op {
    OP_NUM,
    OP_NAME,
    OP_INPUT,
    OP_NEG,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_EQ,
    OP_NE,
    OP_SQRT,
    OP_EXP,
    OP_LOG,
    OP_TANH,
    OP_SIGMOID,
    OP_FLOOR,
    OP_ABS,
    OP_POW,
    OP_MIN,
    OP_MAX,
    OP_CLAMP,
    OP_SELECT,
    OP_CAST,
} op;

typedef struct gr_expr_node {
    uint8_t op, n_args;
    uint8_t vt;       /* value type, once typed */
    uint8_t cls;      /* an operation's compute class */
    uint8_t is_const; /* value known at compile time */
    uint8_t dtype;    /* OP_CAST: the type cast to */
    uint16_t arg[3];
    uint32_t input; /* OP_INPUT */
    size_t pos, len; /* in the text: the value, the operator or the function's name */
    double value;    /* is_const: the value, of type vt (a weak one as read) */
} gr_expr_node;

static inline bool gr__expr_is_cmp(int o)
{
    return o >= OP_LT && o <= OP_NE;
}

static inline int gr__expr_cls(int vt)
{
    return vt == GR_DTYPE_FLOAT64 || vt == GR_DTYPE_INT32 ? CLS_F64 : CLS_F32;
}

/* min and max ignore a NaN operand (as C's fmin and fmax), and order -0 below +0, so that
 * every case has one answer on both sides. */
#define MIN_OF(a, b)                                                                        \
    ((a) != (a) ? (b) : (b) != (b) ? (a) : (a) == (b) ? (signbit(a) ? (a) : (b))              \
                                         : (a) < (b) ? (a) : (b))
#define MAX_OF(a, b)                                                                        \
    ((a) != (a) ? (b) : (b) != (b) ? (a) : (a) == (b) ? (signbit(a) ? (b) : (a))              \
                                         : (a) > (b) ? (a) : (b))

static inline float min_f(float a, float b) { return MIN_OF(a, b); }
static inline float max_f(float a, float b) { return MAX_OF(a, b); }
static inline double min_d(double a, double b) { return MIN_OF(a, b); }
static inline double max_d(double a, double b) { return MAX_OF(a, b); }

/* pow with kernels/cpu.c's special exponents (PyTorch's): 0.5 is sqrt, 1 and 2 exact. */
static inline float pow_f(float x, float e)
{
    return e == 0.5f ? sqrtf(x) : e == 1.0f ? x : e == 2.0f ? x * x : powf(x, e);
}

static inline double pow_d(double x, double e)
{
    return e == 0.5 ? sqrt(x) : e == 1.0 ? x : e == 2.0 ? x * x : pow(x, e);
}

/* Value v of type `from` converted to type `to` by dtype.h's rules, as a double. */
static inline double gr__expr_convert(int to, int from, double v)
{
    switch (to) {
    case GR_DTYPE_FLOAT16:
        return gr__f16_to_f32(gr__f32_to_f16((float)v));
    case GR_DTYPE_BFLOAT16:
        return gr__bf16_to_f32(gr__f32_to_bf16((float)v));
    case GR_DTYPE_FLOAT32:
        return (float)v;
    case GR_DTYPE_INT32:
        return from == GR_DTYPE_UINT8 || from == GR_DTYPE_INT32 ? v : gr__f64_to_i32(v);
    case GR_DTYPE_UINT8:
        if (from == GR_DTYPE_INT32)
            return (uint8_t)(uint32_t)(int32_t)v;
        return gr__f64_to_u8(v);
    default:
        return v;
    }
}

/* The CPU program of a typed tree that check_root accepted (the kernels' `user`), or NULL
 * without memory; its registers' scratch in slots of a block each. */
typedef struct gr_expr_prog gr_expr_prog;
gr_expr_prog *gr__expr_prog_build(const gr_expr_node *nodes, uint32_t n, const gr_expr_env *env);
uint32_t gr__expr_prog_slots(const gr_expr_prog *p);
void gr__expr_prog_free(gr_expr_prog *p);

/* The kernels' CPU implementation: `user` is a gr_expr_prog. */
void gr__expr_cpu(const gr_kernel_args *a, void *user);

/* The CUDA source of a typed tree, cut where the entry's name goes: `head` (the include,
 * the helpers, the types, "... void "), then the name, then `body` ("(gr_kernel_args a)
 * { ... }"). Both malloc'd; false without memory. */
bool gr__expr_cuda(const gr_expr_node *nodes, uint32_t n, const gr_expr_env *env, char **head,
                   char **body);

#endif /* GR_KERNELS_EXPR_IMPL_H */

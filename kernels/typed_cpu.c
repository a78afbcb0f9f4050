/*
 * typed_cpu.c - CPU versions of the typed built-ins and of `cast` (typed.h), compiled with
 * -ffp-contract=off as cpu.c is, and in blocks: a block of elements is widened into the
 * compute type, computed, and rounded back, so the conversions cost one switch a block.
 */
#include <math.h>

#include "kernels/dtype.h"
#include "kernels/typed.h"

#define BLOCK 512

/* pow with cpu.c's special cases (and the CUDA versions'). */
static inline float pow_f(float x, float e)
{
    return e == 0.5f ? sqrtf(x) : e == 1.0f ? x : e == 2.0f ? x * x : powf(x, e);
}

static inline double pow_d(double x, double e)
{
    return e == 0.5 ? sqrt(x) : e == 1.0 ? x : e == 2.0 ? x * x : pow(x, e);
}

/* One op over a block, in the compute type T with the math functions F(name). */
#define COMPUTE(T, SQ, EXPF, LOGF, TANHF, POWF, MINF, MAXF)                                 \
    switch (op) {                                                                           \
    case GR_OP_MUL: for (int j = 0; j < m; j++) r[j] = x[j] * s0; break;                    \
    case GR_OP_ADD: for (int j = 0; j < m; j++) r[j] = x[j] + s0; break;                    \
    case GR_OP_POW: for (int j = 0; j < m; j++) r[j] = POWF(x[j], s0); break;               \
    case GR_OP_AXPBY: for (int j = 0; j < m; j++) r[j] = s0 * x[j] + s1 * y[j]; break;      \
    case GR_OP_SUB: for (int j = 0; j < m; j++) r[j] = x[j] - s0; break;                    \
    case GR_OP_DIV: for (int j = 0; j < m; j++) r[j] = x[j] / s0; break;                    \
    case GR_OP_EXP: for (int j = 0; j < m; j++) r[j] = EXPF(x[j]); break;                   \
    case GR_OP_LOG: for (int j = 0; j < m; j++) r[j] = LOGF(x[j]); break;                   \
    case GR_OP_TANH: for (int j = 0; j < m; j++) r[j] = TANHF(x[j]); break;                 \
    case GR_OP_SIGMOID:                                                                     \
        for (int j = 0; j < m; j++) r[j] = (T)1 / ((T)1 + EXPF(-x[j]));                     \
        break;                                                                              \
    case GR_OP_CLAMP: for (int j = 0; j < m; j++) r[j] = MINF(MAXF(x[j], s0), s1); break;   \
    case GR_OP_MUL2: for (int j = 0; j < m; j++) r[j] = x[j] * y[j]; break;                 \
    case GR_OP_ADD2: for (int j = 0; j < m; j++) r[j] = x[j] + y[j]; break;                 \
    default: break;                                                                         \
    }

static bool two_inputs(gr_typed_op op)
{
    return op == GR_OP_AXPBY || op == GR_OP_MUL2 || op == GR_OP_ADD2;
}

static void typed_f64(const gr_kernel_args *a, gr_typed_op op)
{
    const double *in0 = a->in[0], *in1 = a->in[1];
    double *out = a->out, s0 = a->s[0].f64, s1 = a->s[1].f64;

    for (uint64_t base = 0; base < a->n; base += BLOCK) {
        int m = (int)(a->n - base < BLOCK ? a->n - base : BLOCK);
        const double *x = in0 + base, *y = two_inputs(op) ? in1 + base : NULL;
        double *r = out + base;

        COMPUTE(double, sqrt, exp, log, tanh, pow_d, gr__min, gr__max)
    }
}

/* float16 and bfloat16: widened to float32 a block at a time. */
static void typed_half(const gr_kernel_args *a, gr_typed_op op, gr_dtype t)
{
    float s0 = a->s[0].f32, s1 = a->s[1].f32;
    float x[BLOCK], y[BLOCK], r[BLOCK];
    bool bf = t == GR_DTYPE_BFLOAT16;

    for (uint64_t base = 0; base < a->n; base += BLOCK) {
        int m = (int)(a->n - base < BLOCK ? a->n - base : BLOCK);
        const uint16_t *in0 = (const uint16_t *)a->in[0] + base;
        const uint16_t *in1 = two_inputs(op) ? (const uint16_t *)a->in[1] + base : NULL;
        uint16_t *out = (uint16_t *)a->out + base;

        for (int j = 0; j < m; j++) {
            x[j] = bf ? gr__bf16_to_f32(in0[j]) : gr__f16_to_f32(in0[j]);
            y[j] = in1 == NULL ? 0.0f : bf ? gr__bf16_to_f32(in1[j]) : gr__f16_to_f32(in1[j]);
        }
        COMPUTE(float, sqrtf, expf, logf, tanhf, pow_f, gr__minf, gr__maxf)
        for (int j = 0; j < m; j++)
            out[j] = bf ? gr__f32_to_bf16(r[j]) : gr__f32_to_f16(r[j]);
    }
}

void gr__cpu_typed(const gr_kernel_args *a, void *user)
{
    const gr_typed_kernel *k = user;

    if (k->type == GR_DTYPE_FLOAT64)
        typed_f64(a, k->op);
    else
        typed_half(a, k->op, k->type);
}

void gr__cpu_cast(const gr_kernel_args *a, void *user)
{
    const gr_cast_kernel *c = user;

    /* Every value of every type is exact as a double, so one widening and one rounding by
     * dtype.h's rules is the whole conversion. */
    for (uint64_t i = 0; i < a->n; i++)
        gr__store_cast(c->to, a->out, i, c->from, gr__load_f64(c->from, a->in[0], i));
}

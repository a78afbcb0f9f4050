/*
 * cpu.c - CPU versions of the built-in kernels.
 *
 * Compiled with -ffp-contract=off (see BUILD) so that x * a + b is two roundings, as in the
 * CUDA versions, which use __fmul_rn and __fadd_rn for the same reason.
 */
#include <math.h>

#include "kernels/builtin.h"
#include "kernels/dtype.h"
#include "kernels/kernels.h"

/* pow with the exponents PyTorch special-cases, so results match torch.pow bit for bit for
 * those and the CUDA version for 0.5, 1 and 2. */
static inline float pow_scalar(float x, float e)
{
    if (e == 0.5f)
        return sqrtf(x);
    if (e == 1.0f)
        return x;
    if (e == 2.0f)
        return x * x;
    return powf(x, e);
}

float gr__seed_ref(float x)
{
    for (int r = 0; r < GR_SEED_ROUNDS; r++)
        x = sqrtf(x * GR_SEED_MUL + GR_SEED_ADD);
    return x;
}

void gr__cpu_mul(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, s = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] * s;
}

void gr__cpu_add(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, s = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] + s;
}

void gr__cpu_pow(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, e = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = pow_scalar(x[i], e);
}

void gr__cpu_axpby(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0], *y = a->in[1];
    float *out = a->out, alpha = a->s[0].f32, beta = a->s[1].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = alpha * x[i] + beta * y[i];
}

void gr__cpu_seed(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = gr__seed_ref(x[i]);
}

/* Elementwise over one input: out[i] = f(x[i]), with the scalars in `s`. */
#define UNARY_CPU(name, expr)                                                               \
    void gr__cpu_##name(const gr_kernel_args *a, void *user)                                  \
    {                                                                                       \
        const float *in = a->in[0];                                                          \
        float *out = a->out;                                                                \
        const gr_scalar *s = a->s;                                                          \
                                                                                            \
        (void)user;                                                                         \
        (void)s;                                                                            \
        for (uint64_t i = 0; i < a->n; i++) {                                               \
            float x = in[i];                                                                \
            out[i] = (expr);                                                                \
        }                                                                                   \
    }

UNARY_CPU(sub, x - s[0].f32)
UNARY_CPU(div, x / s[0].f32)
UNARY_CPU(exp, expf(x))
UNARY_CPU(log, logf(x))
UNARY_CPU(tanh, tanhf(x))
UNARY_CPU(sigmoid, 1.0f / (1.0f + expf(-x)))
UNARY_CPU(clamp, gr__minf(gr__maxf(x, s[0].f32), s[1].f32))

void gr__cpu_mul2(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0], *y = a->in[1];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] * y[i];
}

void gr__cpu_add2(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0], *y = a->in[1];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] + y[i];
}

/* Rows of the last dimension (the whole tensor without a shape). */
static uint64_t row_length(const gr_kernel_args *a)
{
    return a->rank ? a->shape[a->rank - 1] : a->in_n[0];
}

void gr__cpu_softmax(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;
    uint64_t len = row_length(a), rows = a->n / len;

    (void)user;
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = x + r * len;
        float *o = out + r * len, max = row[0];
        double sum = 0.0;

        for (uint64_t j = 1; j < len; j++)
            max = fmaxf(max, row[j]);
        for (uint64_t j = 0; j < len; j++)
            sum += (double)expf(row[j] - max);
        for (uint64_t j = 0; j < len; j++)
            o[j] = (float)((double)expf(row[j] - max) / sum);
    }
}

void gr__cpu_sum(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    double sum = 0.0;

    (void)user;
    for (uint64_t i = 0; i < a->in_n[0]; i++)
        sum += (double)x[i];
    *(float *)a->out = (float)sum;
}

void gr__cpu_normalize(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0], *mean = a->in[1], *sd = a->in[2];
    uint64_t cm = a->in_n[1], cs = a->in_n[2];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = (x[i] - mean[i % cm]) / sd[i % cs];
}

/*
 * cpu.c - CPU versions of the built-in kernels.
 *
 * Compiled with -ffp-contract=off (see BUILD) so that x * a + b is two roundings, as in the
 * CUDA versions, which use __fmul_rn and __fadd_rn for the same reason.
 */
#include <math.h>

#include "kernels/builtin.h"
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

float gr_seed_ref(float x)
{
    for (int r = 0; r < GR_SEED_ROUNDS; r++)
        x = sqrtf(x * GR_SEED_MUL + GR_SEED_ADD);
    return x;
}

void gr_cpu_mul(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, s = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] * s;
}

void gr_cpu_add(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, s = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = x[i] + s;
}

void gr_cpu_pow(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out, e = a->s[0].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = pow_scalar(x[i], e);
}

void gr_cpu_axpby(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0], *y = a->in[1];
    float *out = a->out, alpha = a->s[0].f32, beta = a->s[1].f32;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = alpha * x[i] + beta * y[i];
}

void gr_cpu_seed(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;

    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        out[i] = gr_seed_ref(x[i]);
}

/*
 * dtype.h - conversions between element types on the CPU, bit for bit what the CUDA
 * versions in graphrun_kernel.h compute (the PTX cvt instructions), so that the host
 * backend and the GPU agree and the CPU versions can be the tests' reference:
 *
 *   - to float16 and bfloat16: round to nearest even from float32 (from other types,
 *     through float32); a NaN becomes the canonical 0x7fff.
 *   - float64 to float32 and int32 to float32: round to nearest even (C's own casts).
 *   - a float to an integer: toward zero, saturating at the type's range, NaN to 0.
 *   - int32 to uint8: the low 8 bits (as NumPy's astype and C).
 */
#ifndef GR_KERNELS_DTYPE_H
#define GR_KERNELS_DTYPE_H

#include <graphrun.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nonzero for float16, bfloat16, float32 and float64. */
bool gr__dtype_is_float(gr_dtype t);

static inline uint32_t gr__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float gr__f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline float gr__bf16_to_f32(uint16_t h)
{
    return gr__f32_of_bits((uint32_t)h << 16);
}

static inline uint16_t gr__f32_to_bf16(float f)
{
    uint32_t u = gr__f32_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fff;
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static inline float gr__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

    if (exp == 0x1f) /* inf, or a NaN made quiet (as the GPU's conversion), payload kept */
        return gr__f32_of_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in float32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return gr__f32_of_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t gr__f32_to_f16(float f)
{
    uint32_t u = gr__f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;

    if (a > 0x7f800000u)
        return 0x7fff;
    if (a >= 0x477ff000u) /* 65520 and up round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: a subnormal (or zero) result */
        /* The value in units of 2^-24 (the smallest subnormal) is the significand shifted
         * right by `shift`; round what is shifted out to nearest, ties to even, with
         * integers (not the FPU, whose rounding mode is the program's). A carry into 1024
         * is the smallest normal's bit pattern, which is right. */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e, r, rest, half;

        if (e == 0 || shift > 24) /* below 2^-25: rounds to zero */
            return (uint16_t)sign;
        r = m >> shift;
        rest = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        r += rest > half || (rest == half && (r & 1));
        return (uint16_t)(sign | r);
    }
    {
        uint32_t m = a + 0xfffu + ((a >> 13) & 1u); /* round 13 bits away, ties to even */
        return (uint16_t)(sign | ((m - 0x38000000u) >> 13));
    }
}

/* max and min as CUDA's fmaxf and fminf compute them, whatever the C library does with a
 * signaling NaN (glibc's fmaxf returns NaN for one): a NaN loses to a number, and +0 is
 * above -0. */
static inline float gr__maxf(float a, float b)
{
    if (a != a)
        return b;
    if (b != b || a > b)
        return a;
    return a == b && !signbit(a) ? a : b;
}

static inline float gr__minf(float a, float b)
{
    if (a != a)
        return b;
    if (b != b || a < b)
        return a;
    return a == b && signbit(a) ? a : b;
}

static inline double gr__max(double a, double b)
{
    if (a != a)
        return b;
    if (b != b || a > b)
        return a;
    return a == b && !signbit(a) ? a : b;
}

static inline double gr__min(double a, double b)
{
    if (a != a)
        return b;
    if (b != b || a < b)
        return a;
    return a == b && signbit(a) ? a : b;
}

/* A float (as double: every type's value fits) to an integer type's range, toward zero. */
static inline int32_t gr__f64_to_i32(double d)
{
    if (d != d)
        return 0;
    if (d >= 2147483647.0)
        return INT32_MAX;
    if (d <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)d;
}

static inline uint8_t gr__f64_to_u8(double d)
{
    if (d != d || d <= 0)
        return 0;
    if (d >= 255.0)
        return 255;
    return (uint8_t)d;
}

/* Element i of `p` (of type t) as a double: exact for every type. */
static inline double gr__load_f64(gr_dtype t, const void *p, uint64_t i)
{
    switch (t) {
    case GR_DTYPE_FLOAT16:
        return gr__f16_to_f32(((const uint16_t *)p)[i]);
    case GR_DTYPE_BFLOAT16:
        return gr__bf16_to_f32(((const uint16_t *)p)[i]);
    case GR_DTYPE_FLOAT64:
        return ((const double *)p)[i];
    case GR_DTYPE_INT32:
        return ((const int32_t *)p)[i];
    case GR_DTYPE_UINT8:
        return ((const uint8_t *)p)[i];
    case GR_DTYPE_FLOAT32:
    default:
        return ((const float *)p)[i];
    }
}

/* Store `v`, a value of type `from` held as a double, into element i of `p` of type `to`,
 * by the rules above. */
static inline void gr__store_cast(gr_dtype to, void *p, uint64_t i, gr_dtype from, double v)
{
    switch (to) {
    case GR_DTYPE_FLOAT16:
        ((uint16_t *)p)[i] = gr__f32_to_f16((float)v);
        break;
    case GR_DTYPE_BFLOAT16:
        ((uint16_t *)p)[i] = gr__f32_to_bf16((float)v);
        break;
    case GR_DTYPE_FLOAT64:
        ((double *)p)[i] = v;
        break;
    case GR_DTYPE_INT32:
        ((int32_t *)p)[i] = gr__f64_to_i32(v);
        break;
    case GR_DTYPE_UINT8:
        if (from == GR_DTYPE_INT32)
            ((uint8_t *)p)[i] = (uint8_t)(uint32_t)(int32_t)v;
        else
            ((uint8_t *)p)[i] = gr__f64_to_u8(v);
        break;
    case GR_DTYPE_FLOAT32:
    default:
        ((float *)p)[i] = (float)v;
        break;
    }
}

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_DTYPE_H */

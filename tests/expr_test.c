/*
 * expr_test.c - expression kernels (kernels/expr*.c, gr_kernel_register_expr): every
 * operator and function of the language against a reference computed here in C with the
 * same roundings (this file is compiled with -ffp-contract=off, as the kernels are), bit for
 * bit; the typing rules (promotion, weak numbers, casts by kernels/dtype.h's rules, the
 * output's safe conversion); every refusal with its position; the limits; one registration
 * per program; the CUDA source NVRTC compiles for every operation and type (where NVRTC can
 * be loaded: it needs no GPU); the seed as an expression, equal to the built-in seed.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dtype.h"
#include "kernels/expr.h"
#include "kernels/kernels.h"
#include "kernels/nvrtc.h"
#include "tests/testing.h"

#define N 4099 /* prime: blocks of the evaluator end in the middle */

#define REQUIRE_NVRTC()                                                                     \
    do {                                                                                    \
        static char why_[256];                                                              \
        if (!gr__nvrtc_available(why_, sizeof(why_)))                                       \
            SKIP(why_);                                                                     \
    } while (0)

/* Inputs: special values first, then a spread of magnitudes and signs. */
static float xs[N], ys[N];
static double xd[N], yd[N];

static void fill(void)
{
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, INFINITY, -INFINITY,
                                    NAN, 1e-40f, -1e-40f, 3e38f, -3e38f, 65504.0f, 65520.0f,
                                    1e-8f, 255.5f, 256.0f, -128.7f, 2147483648.0f};
    uint64_t s = 12345;
    size_t ns = sizeof(special) / sizeof(special[0]);

    for (int i = 0; i < N; i++) {
        double u = (double)(gr_test_rand(&s) >> 11) / 9007199254740992.0; /* [0, 1) */
        double v = (double)(gr_test_rand(&s) >> 11) / 9007199254740992.0;

        xd[i] = (u - 0.5) * pow(10.0, (double)(i % 13) - 6.0);
        yd[i] = (v - 0.3) * pow(10.0, (double)(i % 7) - 3.0);
        xs[i] = (float)xd[i];
        ys[i] = (float)yd[i];
    }
    for (size_t i = 0; i < ns; i++) {
        xs[i] = special[i];
        ys[i] = special[(i * 7 + 3) % ns];
        xd[i] = special[i];
        yd[i] = special[(i * 7 + 3) % ns];
    }
    /* Pairs min, max and the comparisons must get right: zeros of both signs against each
     * other (x is 0, -0, 1, ...), a NaN on either side. */
    ys[0] = yd[0] = -0.0;
    ys[1] = yd[1] = 0.0;
    ys[2] = yd[2] = NAN;
    ys[8] = yd[8] = 5.0; /* x is NaN */
}

/* Register `text` over inputs x (and y) of the given types, into out_type. */
static const gr_kernel *compile_types(const char *text, uint32_t n_in, gr_dtype tx, gr_dtype ty,
                                      gr_dtype out)
{
    gr_expr_def d = GR_EXPR_DEF_INIT;
    char name[GR_NAME_MAX + 1];
    gr_error_info err;
    const gr_kernel *k;

    d.text = text;
    d.n_inputs = n_in;
    d.input_names[0] = "x";
    d.input_names[1] = "y";
    d.input_dtype[0] = tx;
    d.input_dtype[1] = ty;
    d.out_dtype = out;
    if (gr_kernel_register_expr(&d, name, sizeof(name), &err) != GR_OK)
        GR_TEST_FAIL("'%s': %s", text, err.message);
    k = gr__kernel_find(name);
    ASSERT_TRUE(k != NULL && k->def.cpu != NULL && k->def.elementwise);
    return k;
}

static void run(const gr_kernel *k, const void *x, const void *y, void *out, uint64_t n)
{
    gr_kernel_args a;

    memset(&a, 0, sizeof(a));
    a.in[0] = x;
    a.in[1] = y;
    a.in_n[0] = a.in_n[1] = n;
    a.out = out;
    a.n = n;
    k->def.cpu(&a, k->def.user);
}

static bool same_f(float a, float b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof(a)) == 0;
}

static bool same_d(double a, double b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof(a)) == 0;
}

/* min and max as the language defines them: a NaN operand ignored, -0 below +0. */
static float ref_min(float a, float b)
{
    if (isnan(a))
        return b;
    if (isnan(b))
        return a;
    if (a == b)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

static float ref_max(float a, float b)
{
    if (isnan(a))
        return b;
    if (isnan(b))
        return a;
    if (a == b)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

static double ref_min_d(double a, double b)
{
    return isnan(a) ? b : isnan(b) ? a : a == b ? (signbit(a) ? a : b) : a < b ? a : b;
}

static double ref_max_d(double a, double b)
{
    return isnan(a) ? b : isnan(b) ? a : a == b ? (signbit(a) ? b : a) : a > b ? a : b;
}

static float ref_pow(float x, float e)
{
    if (e == 0.5f)
        return sqrtf(x);
    if (e == 1.0f)
        return x;
    if (e == 2.0f)
        return x * x;
    return powf(x, e);
}

static double ref_pow_d(double x, double e)
{
    return e == 0.5 ? sqrt(x) : e == 1.0 ? x : e == 2.0 ? x * x : pow(x, e);
}

typedef float (*ref32)(float x, float y);
typedef double (*ref64)(double x, double y);

#define R32(name, expr)                                                                     \
    static float name(float x, float y)                                                     \
    {                                                                                       \
        (void)x;                                                                            \
        (void)y;                                                                            \
        return (expr);                                                                      \
    }
#define R64(name, expr)                                                                     \
    static double name(double x, double y)                                                  \
    {                                                                                       \
        (void)x;                                                                            \
        (void)y;                                                                            \
        return (expr);                                                                      \
    }

R32(f_add, x + y)
R32(f_sub, x - y)
R32(f_mul, x * y)
R32(f_div, x / y)
R32(f_neg, -x)
R32(f_plus, x)
R32(f_affine, (x - 0.5f) * 2.0f)
R32(f_round2, x * 1.01f + 1.01f)
R32(f_prec, x + y * 2.0f)
R32(f_left, (x - y) - 1.0f)
R32(f_negmul, (-x) * y)
R32(f_divdiv, (x / y) / 2.0f)
R32(f_fold, x * 4.0f)
R32(f_nofold, (x * 2.0f) * 3.0f)
R32(f_sqrt, sqrtf(x))
R32(f_exp, expf(x))
R32(f_log, logf(x))
R32(f_tanh, tanhf(x))
R32(f_sigmoid, 1.0f / (1.0f + expf(-x)))
R32(f_floor, floorf(x))
R32(f_abs, fabsf(x))
R32(f_pow, ref_pow(x, y))
R32(f_pow_half, sqrtf(x))
R32(f_pow_two, x * x)
R32(f_pow_three, powf(x, 3.0f))
R32(f_min, ref_min(x, y))
R32(f_max, ref_max(x, y))
R32(f_clamp, ref_min(ref_max(x, -0.5f), 0.5f))
R32(f_lt, x < y ? 1.0f : 0.0f)
R32(f_le, x <= y ? 1.0f : 0.0f)
R32(f_gt, x > y ? x : y)
R32(f_ge, x >= y ? x : -y)
R32(f_eq, x == y ? 2.0f : x)
R32(f_ne, x != y ? y : 3.0f)
R32(f_where, x > 0.0f ? x : 0.0f)
R32(f_nested, x > 0.0f ? sqrtf(x) : -sqrtf(-x))
R32(f_mixed_sel, y < x ? x * 2.0f : y - 1.0f)

R64(d_add, x + y)
R64(d_sub, x - y)
R64(d_mul, x * y)
R64(d_div, x / y)
R64(d_weak, x * 0.1)
R64(d_sqrt, sqrt(x))
R64(d_exp, exp(x))
R64(d_log, log(x))
R64(d_tanh, tanh(x))
R64(d_sigmoid, 1.0 / (1.0 + exp(-x)))
R64(d_floor, floor(x))
R64(d_abs, fabs(x))
R64(d_pow, ref_pow_d(x, y))
R64(d_min, ref_min_d(x, y))
R64(d_max, ref_max_d(x, y))
R64(d_clamp, ref_min_d(ref_max_d(x, -0.5), 0.5))
R64(d_sel, x < y ? x : y * 0.25)

static void expect_f32(const char *text, uint32_t n_in, ref32 ref)
{
    const gr_kernel *k = compile_types(text, n_in, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32,
                                       GR_DTYPE_FLOAT32);
    static float out[N];

    memset(out, 0xa5, sizeof(out));
    run(k, xs, ys, out, N);
    for (int i = 0; i < N; i++) {
        float want = ref(xs[i], ys[i]);

        if (!same_f(out[i], want))
            GR_TEST_FAIL("'%s' element %d (x %a, y %a): got %a, want %a", text, i, xs[i], ys[i],
                         out[i], want);
    }
}

static void expect_f64(const char *text, uint32_t n_in, ref64 ref)
{
    const gr_kernel *k = compile_types(text, n_in, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64,
                                       GR_DTYPE_FLOAT64);
    static double out[N];

    memset(out, 0xa5, sizeof(out));
    run(k, xd, yd, out, N);
    for (int i = 0; i < N; i++) {
        double want = ref(xd[i], yd[i]);

        if (!same_d(out[i], want))
            GR_TEST_FAIL("'%s' element %d (x %a, y %a): got %a, want %a", text, i, xd[i], yd[i],
                         out[i], want);
    }
}

static void float32_operators_and_functions(void)
{
    fill();
    expect_f32("x + y", 2, f_add);
    expect_f32("x - y", 2, f_sub);
    expect_f32("x * y", 2, f_mul);
    expect_f32("x / y", 2, f_div);
    expect_f32("-x", 1, f_neg);
    expect_f32("+x", 1, f_plus);
    expect_f32("(x - 0.5) * 2.0", 1, f_affine);
    expect_f32("x*1.01+1.01", 1, f_round2); /* two roundings: no FMA */
    expect_f32("x + y * 2", 2, f_prec);
    expect_f32("x - y - 1", 2, f_left);
    expect_f32("-x * y", 2, f_negmul);
    expect_f32("x / y / 2", 2, f_divdiv);
    expect_f32("x * (1/0.25)", 1, f_fold); /* numbers alone fold, in double */
    expect_f32("x * 2 * 3", 1, f_nofold);  /* left to right: (x * 2) * 3 */
    expect_f32("sqrt(x)", 1, f_sqrt);
    expect_f32("exp(x)", 1, f_exp);
    expect_f32("log(x)", 1, f_log);
    expect_f32("tanh(x)", 1, f_tanh);
    expect_f32("sigmoid(x)", 1, f_sigmoid);
    expect_f32("floor(x)", 1, f_floor);
    expect_f32("abs(x)", 1, f_abs);
    expect_f32("pow(x, y)", 2, f_pow);
    expect_f32("pow(x, 0.5)", 1, f_pow_half);
    expect_f32("pow(x, 2)", 1, f_pow_two);
    expect_f32("pow(x, 1)", 1, f_plus);
    expect_f32("pow(x, 3)", 1, f_pow_three);
    expect_f32("min(x, y)", 2, f_min);
    expect_f32("max(x, y)", 2, f_max);
    expect_f32("clamp(x, -0.5, 0.5)", 1, f_clamp);
    expect_f32("select(x < y, 1, 0)", 2, f_lt);
    expect_f32("select(x <= y, 1, 0)", 2, f_le);
    expect_f32("select(x > y, x, y)", 2, f_gt);
    expect_f32("select(x >= y, x, -y)", 2, f_ge);
    expect_f32("select(x == y, 2, x)", 2, f_eq);
    expect_f32("select(x != y, y, 3)", 2, f_ne);
    expect_f32("where(x > 0, x, 0)", 1, f_where);
    expect_f32("select(x > 0, sqrt(x), -sqrt(-x))", 1, f_nested);
    expect_f32("select(y < x, x * 2, y - 1)", 2, f_mixed_sel);
}

static void float64_operators_and_functions(void)
{
    fill();
    expect_f64("x + y", 2, d_add);
    expect_f64("x - y", 2, d_sub);
    expect_f64("x * y", 2, d_mul);
    expect_f64("x / y", 2, d_div);
    expect_f64("x * 0.1", 1, d_weak); /* a number is float64 where it meets float64 */
    expect_f64("sqrt(x)", 1, d_sqrt);
    expect_f64("exp(x)", 1, d_exp);
    expect_f64("log(x)", 1, d_log);
    expect_f64("tanh(x)", 1, d_tanh);
    expect_f64("sigmoid(x)", 1, d_sigmoid);
    expect_f64("floor(x)", 1, d_floor);
    expect_f64("abs(x)", 1, d_abs);
    expect_f64("pow(x, y)", 2, d_pow);
    expect_f64("min(x, y)", 2, d_min);
    expect_f64("max(x, y)", 2, d_max);
    expect_f64("clamp(x, -0.5, 0.5)", 1, d_clamp);
    expect_f64("select(x < y, x, y * 0.25)", 2, d_sel);
}

/* Every element type as an input, in memory of that type, and as the output. */
static void *typed_copy(gr_dtype t, const double *v, uint64_t n)
{
    void *p = calloc(n, 8);

    ASSERT_TRUE(p != NULL);
    for (uint64_t i = 0; i < n; i++)
        gr__store_cast(t, p, i, GR_DTYPE_FLOAT64, v[i]);
    return p;
}

/* A value of type t (a float32 value, widened, for float16 and bfloat16: as the kernels
 * widen them) from element i of p. */
static double value_of(gr_dtype t, const void *p, uint64_t i)
{
    return gr__load_f64(t, p, i);
}

/* Casts follow dtype.h's rules exactly: T(x) from every type to every type, against
 * gr__store_cast of the input's value. */
static void casts_follow_dtype_rules(void)
{
    static double src[N];

    fill();
    for (int i = 0; i < N; i++)
        src[i] = xd[i] * (i % 3 == 0 ? 1.0 : i % 3 == 1 ? 1e3 : 1e-3);
    for (int from = 0; from < GR_DTYPE_COUNT_; from++) {
        void *in = typed_copy((gr_dtype)from, src, N);

        for (int to = 0; to < GR_DTYPE_COUNT_; to++) {
            char text[32];
            const gr_kernel *k;
            void *out = calloc(N, 8), *want = calloc(N, 8);

            ASSERT_TRUE(out != NULL && want != NULL);
            snprintf(text, sizeof(text), "%s(x)", gr_dtype_name((gr_dtype)to));
            k = compile_types(text, 1, (gr_dtype)from, GR_DTYPE_FLOAT32, (gr_dtype)to);
            run(k, in, NULL, out, N);
            for (int i = 0; i < N; i++)
                gr__store_cast((gr_dtype)to, want, (uint64_t)i, (gr_dtype)from,
                               value_of((gr_dtype)from, in, (uint64_t)i));
            for (int i = 0; i < N; i++) {
                double g = value_of((gr_dtype)to, out, (uint64_t)i);
                double w = value_of((gr_dtype)to, want, (uint64_t)i);

                if (!same_d(g, w))
                    GR_TEST_FAIL("%s from %s, element %d (%a): got %a, want %a", text,
                                 gr_dtype_name((gr_dtype)from), i,
                                 value_of((gr_dtype)from, in, (uint64_t)i), g, w);
            }
            free(out);
            free(want);
        }
        free(in);
    }
}

/* Promotion: narrow types compute in float32, float64 anywhere makes float64, numbers take
 * the type of what they meet, int32 is float32 arithmetic unless cast to float64. */
static void types_promote(void)
{
    static double src[N], src2[N];
    static float f_out[N];
    static double d_out[N];
    static uint16_t h_out[N];
    void *h, *b, *i32, *u8, *f;

    fill();
    for (int i = 0; i < N; i++) {
        src[i] = xd[i] * 100.0;
        src2[i] = yd[i];
    }
    h = typed_copy(GR_DTYPE_FLOAT16, src, N);
    b = typed_copy(GR_DTYPE_BFLOAT16, src, N);
    i32 = typed_copy(GR_DTYPE_INT32, src, N);
    u8 = typed_copy(GR_DTYPE_UINT8, src, N);
    f = typed_copy(GR_DTYPE_FLOAT32, src2, N);

    /* float16 * number: float32 arithmetic, rounded to float16 by the explicit cast. */
    run(compile_types("float16(x * 0.1)", 1, GR_DTYPE_FLOAT16, 0, GR_DTYPE_FLOAT16), h, NULL,
        h_out, N);
    for (int i = 0; i < N; i++) {
        float w = gr__f16_to_f32(((uint16_t *)h)[i]) * (float)0.1;
        ASSERT_EQ(h_out[i], gr__f32_to_f16(w));
    }
    /* float16 and bfloat16 with float32: float32, into a float32 output as it is. */
    run(compile_types("x + y", 2, GR_DTYPE_FLOAT16, GR_DTYPE_BFLOAT16, GR_DTYPE_FLOAT32), h, b,
        f_out, N);
    for (int i = 0; i < N; i++) {
        float w = gr__f16_to_f32(((uint16_t *)h)[i]) + gr__bf16_to_f32(((uint16_t *)b)[i]);
        if (!same_f(f_out[i], w))
            GR_TEST_FAIL("f16 + bf16 element %d: got %a, want %a", i, f_out[i], w);
    }
    /* float32 with float64: float64 (the float32 widened exactly). */
    {
        double *dd = typed_copy(GR_DTYPE_FLOAT64, src, N);

        run(compile_types("x * y", 2, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64), f,
            dd, d_out, N);
        for (int i = 0; i < N; i++)
            if (!same_d(d_out[i], (double)((float *)f)[i] * dd[i]))
                GR_TEST_FAIL("f32 * f64 element %d: got %a", i, d_out[i]);
        /* ... and float32(...) of it rounds once. */
        run(compile_types("float32(x * y)", 2, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT64,
                          GR_DTYPE_FLOAT32),
            f, dd, f_out, N);
        for (int i = 0; i < N; i++)
            if (!same_f(f_out[i], (float)((double)((float *)f)[i] * dd[i])))
                GR_TEST_FAIL("float32(f32 * f64) element %d: got %a", i, f_out[i]);
        free(dd);
    }
    /* int32: float32 arithmetic (rounding the integer to float32 first) ... */
    run(compile_types("x + 1", 1, GR_DTYPE_INT32, 0, GR_DTYPE_FLOAT32), i32, NULL, f_out, N);
    for (int i = 0; i < N; i++)
        if (!same_f(f_out[i], (float)((int32_t *)i32)[i] + 1.0f))
            GR_TEST_FAIL("int32 + 1 element %d: got %a", i, f_out[i]);
    /* ... unless cast to float64, which holds every int32. */
    run(compile_types("float64(x) + 1", 1, GR_DTYPE_INT32, 0, GR_DTYPE_FLOAT64), i32, NULL,
        d_out, N);
    for (int i = 0; i < N; i++)
        ASSERT_TRUE(d_out[i] == (double)((int32_t *)i32)[i] + 1.0);
    /* uint8 with a number: float32. */
    run(compile_types("x * 0.5 - 3", 1, GR_DTYPE_UINT8, 0, GR_DTYPE_FLOAT32), u8, NULL, f_out,
        N);
    for (int i = 0; i < N; i++)
        if (!same_f(f_out[i], (float)((uint8_t *)u8)[i] * 0.5f - 3.0f))
            GR_TEST_FAIL("uint8 * 0.5 - 3 element %d: got %a", i, f_out[i]);
    /* A number alone takes the output's type; a float32 number stays float32 with float32
     * (0.1 is rounded to float32, not computed in float64). */
    run(compile_types("x * 0.1", 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT64), f, NULL, d_out, N);
    for (int i = 0; i < N; i++)
        if (!same_d(d_out[i], (double)(((float *)f)[i] * (float)0.1)))
            GR_TEST_FAIL("f32 * 0.1 into float64 element %d: got %a", i, d_out[i]);
    run(compile_types("7", 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_UINT8), f, NULL, h_out, N / 2);
    for (int i = 0; i < N / 2; i++)
        ASSERT_EQ(((uint8_t *)h_out)[i], 7);
    /* int32 arithmetic wrapped in int32(): toward zero, saturating. */
    run(compile_types("int32(x * 2.5)", 1, GR_DTYPE_INT32, 0, GR_DTYPE_INT32), i32, NULL, h_out,
        N / 2);
    for (int i = 0; i < N / 2; i++)
        ASSERT_EQ(((int32_t *)h_out)[i],
                  gr__f64_to_i32((float)((int32_t *)i32)[i] * 2.5f));
    free(h);
    free(b);
    free(i32);
    free(u8);
    free(f);
}

/* An expression's value goes to the output when it converts safely, or is cast; anything
 * else is refused, saying what to write. */
static void output_type_is_checked(void)
{
    for (int from = 0; from < GR_DTYPE_COUNT_; from++)
        for (int to = 0; to < GR_DTYPE_COUNT_; to++) {
            gr_expr_def d = GR_EXPR_DEF_INIT;
            char name[GR_NAME_MAX + 1], want[160];
            gr_error_info err;
            gr_status st;

            d.text = "x";
            d.n_inputs = 1;
            d.input_names[0] = "x";
            d.input_dtype[0] = (gr_dtype)from;
            d.out_dtype = (gr_dtype)to;
            st = gr_kernel_register_expr(&d, name, sizeof(name), &err);
            if (from == to || gr_dtype_safe_cast((gr_dtype)from, (gr_dtype)to)) {
                if (st != GR_OK)
                    GR_TEST_FAIL("%s to %s: %s", gr_dtype_name((gr_dtype)from),
                                 gr_dtype_name((gr_dtype)to), err.message);
                continue;
            }
            ASSERT_STATUS(st, GR_ERR_INVALID_ARGUMENT);
            snprintf(want, sizeof(want),
                     "expr:1:1: the expression's value is %s, which does not convert safely "
                     "to %s (the output's type): write %s(...) around it",
                     gr_dtype_name((gr_dtype)from), gr_dtype_name((gr_dtype)to),
                     gr_dtype_name((gr_dtype)to));
            ASSERT_STR_EQ(err.message, want);
        }
}

/* One refusal: `text` over x (float32) into float32, with exactly `want`. */
static void refuse_typed(const char *text, gr_dtype out, const char *want)
{
    gr_expr_def d = GR_EXPR_DEF_INIT;
    char name[GR_NAME_MAX + 1];
    gr_error_info err;
    gr_status st;

    d.text = text;
    d.n_inputs = 1;
    d.input_names[0] = "x";
    d.out_dtype = out;
    memset(&err, 0, sizeof(err));
    st = gr_kernel_register_expr(&d, name, sizeof(name), &err);
    if (st != GR_ERR_INVALID_ARGUMENT || strcmp(err.message, want) != 0)
        GR_TEST_FAIL("'%.60s': %s\n  got:  %s\n  want: %s", text, gr_status_str(st),
                     err.message, want);
}

#define REFUSE(text, want) refuse_typed((text), GR_DTYPE_FLOAT32, (want))

static void malformed_expressions_are_refused_at_their_column(void)
{
    REFUSE("", "expr:1:1: expected a value (a number, a name or '('), found the end of the "
               "expression");
    REFUSE("x +", "expr:1:4: expected a value (a number, a name or '('), found the end of the "
                  "expression");
    REFUSE("(x + 1", "expr:1:7: expected ')', found the end of the expression");
    REFUSE("(x + 1 2)", "expr:1:8: expected ')', found '2'");
    REFUSE("x + 1)", "expr:1:6: expected an operator or the end of the expression, found ')'");
    REFUSE("x y", "expr:1:3: expected an operator or the end of the expression, found 'y'");
    REFUSE("x * * 2", "expr:1:5: expected a value (a number, a name or '('), found '*'");
    REFUSE("pow(x 2)", "expr:1:7: expected ',' or ')' after an argument of 'pow', found '2'");
    REFUSE("pow(x,)", "expr:1:7: expected a value (a number, a name or '('), found ')'");
    REFUSE("x $ 2", "expr:1:3: unexpected '$'");
    REFUSE("x = 2", "expr:1:3: unexpected '=' (a comparison is '==')");
    REFUSE("x ! 2", "expr:1:3: unexpected '!' (not equal is '!=')");
    REFUSE("x * \xc3\xa9", "expr:1:5: unexpected byte 0xc3");
    REFUSE("x +\n  $", "expr:2:3: unexpected '$'");
    REFUSE("1.2.3 * x", "expr:1:1: invalid number '1.2.3' (numbers are C floats: 2, -0.5, "
                        "1e-3)");
    REFUSE("x * 2f", "expr:1:5: invalid number '2f' (numbers are C floats: 2, -0.5, 1e-3)");
    REFUSE("x * 1e999", "expr:1:5: number '1e999' is out of range (at most 1.8e308)");
    REFUSE("x * 1e-999", "expr:1:5: number '1e-999' is too small (it would be 0)");
    REFUSE("x * 1111111111111111111111111111111111111111111111111111111111111111",
           "expr:1:5: number '11111111111111111111...' is too long (at most 63 characters)");
    REFUSE("sqr(x)", "expr:1:1: unknown function 'sqr' (functions: sqrt, exp, log, pow, abs, "
                     "min, max, tanh, sigmoid, floor, clamp, select, where; casts: float32, "
                     "float16, bfloat16, float64, int32, uint8)");
    REFUSE("x(2)", "expr:1:1: unknown function 'x' (functions: sqrt, exp, log, pow, abs, min, "
                   "max, tanh, sigmoid, floor, clamp, select, where; casts: float32, float16, "
                   "bfloat16, float64, int32, uint8)");
    REFUSE("sqrt + x", "expr:1:1: 'sqrt' is a function: write it with its arguments, "
                       "sqrt(...)");
    REFUSE("pow(x)", "expr:1:1: 'pow' takes 2 arguments, got 1");
    REFUSE("1 + sqrt(x, 1)", "expr:1:5: 'sqrt' takes 1 argument, got 2");
    REFUSE("clamp(x, 1)", "expr:1:1: 'clamp' takes 3 arguments, got 2");
    REFUSE("select()", "expr:1:1: 'select' takes 3 arguments, got 0");
    REFUSE("x * y", "expr:1:5: unknown name 'y' (not an input of the expression, nor a param)");
    REFUSE("x * inf", "expr:1:5: unknown name 'inf' (not an input of the expression, nor a "
                      "param)");
    REFUSE("x < 1", "expr:1:3: the expression is a comparison, not a value: write "
                    "select(a < b, 1, 0) for a number");
    REFUSE("(x < 1) + 1", "expr:1:4: a comparison is not a value: use it as select's "
                          "condition, select(a < b, x, y)");
    REFUSE("x < 1 < 2", "expr:1:3: a comparison is not a value: use it as select's condition, "
                        "select(a < b, x, y)");
    REFUSE("sqrt(x == 1)", "expr:1:8: a comparison is not a value: use it as select's "
                           "condition, select(a < b, x, y)");
    REFUSE("select(x, 1, 2)", "expr:1:8: select's condition must be a comparison (a < b, "
                              "a == b, ...), not float32");
    REFUSE("select(x > 0, x > 1, 2)", "expr:1:17: a comparison is not a value: use it as "
                                      "select's condition, select(a < b, x, y)");
    REFUSE("x * 1e39", "expr:1:5: the number 1e+39 is out of float32 range (at most 3.4e38), "
                       "and meets float32 values here");
    REFUSE("x + 1e-50", "expr:1:5: the number 1e-50 is too small for float32 (it would be 0), "
                        "and meets float32 values here");
    REFUSE("x + 1/0", "expr:1:6: this constant part of the expression is not finite (inf)");
    REFUSE("x + sqrt(-1)", "expr:1:5: this constant part of the expression is not finite "
                           "(NaN)");
    refuse_typed("2.5", GR_DTYPE_INT32, "expr:1:1: the value 2.5 is not a value of the "
                                        "output's type, int32: write int32(...) to convert it");
    refuse_typed("300", GR_DTYPE_UINT8, "expr:1:1: the value 300 is not a value of the "
                                        "output's type, uint8: write uint8(...) to convert it");
    refuse_typed("1e5", GR_DTYPE_FLOAT16, "expr:1:1: the value 100000 is not a value of the "
                                          "output's type, float16: write float16(...) to "
                                          "convert it");
    refuse_typed("x * 2", GR_DTYPE_UINT8, "expr:1:1: the expression's value is float32, which "
                                          "does not convert safely to uint8 (the output's "
                                          "type): write uint8(...) around it");
}

/* The definition itself: names, counts, types. */
static void bad_definitions_are_refused(void)
{
    static const char *const pnames[] = {"k", "k"};
    static const double pvals[] = {1.0, NAN};
    gr_expr_def d = GR_EXPR_DEF_INIT, bad;
    char name[GR_NAME_MAX + 1];
    gr_error_info err;

    d.text = "x";
    d.n_inputs = 1;
    d.input_names[0] = "x";
    ASSERT_STATUS(gr_kernel_register_expr(NULL, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    bad = d;
    bad.magic = 0;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "GR_EXPR_DEF_INIT");
    ASSERT_STATUS(gr_kernel_register_expr(&d, name, 8, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "name must hold GR_NAME_MAX + 1 bytes");
    bad = d;
    bad.n_inputs = 0;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "1 to 4 inputs (got 0)");
    bad = d;
    bad.input_names[0] = "x-1";
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "input 0's name 'x-1' cannot be named in an expression");
    bad.input_names[0] = "sqrt";
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "'sqrt' cannot be named");
    bad = d;
    bad.n_inputs = 2;
    bad.input_names[1] = "x";
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "the name 'x' is given twice");
    bad = d;
    bad.input_dtype[0] = GR_DTYPE_COUNT_;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    bad = d;
    bad.out_dtype = (gr_dtype)99;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    bad = d;
    bad.n_params = 2;
    bad.param_names = pnames;
    bad.param_values = pvals;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "the name 'k' is given twice");
    bad.n_params = 1;
    bad.param_names = pnames + 1;
    bad.param_values = pvals + 1;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "param 'k' is not finite");
    bad = d;
    bad.text = NULL;
    ASSERT_STATUS(gr_kernel_register_expr(&bad, name, sizeof(name), &err),
                  GR_ERR_INVALID_ARGUMENT);
}

/* Nesting deeper than GR_EXPR_MAX_DEPTH, text longer than GR_EXPR_MAX_TEXT and trees of
 * more than GR_EXPR_MAX_NODES are refused, without exhausting the stack; just within them
 * they are fine. */
static void limits(void)
{
    char *text = malloc(GR_EXPR_MAX_TEXT + 2), want[128];
    size_t at = 0;

    ASSERT_TRUE(text != NULL);
    for (int depth = GR_EXPR_MAX_DEPTH; depth <= GR_EXPR_MAX_DEPTH + 1; depth++) {
        at = 0;
        for (int i = 0; i < depth; i++)
            text[at++] = '(';
        text[at++] = 'x';
        for (int i = 0; i < depth; i++)
            text[at++] = ')';
        text[at] = '\0';
        if (depth == GR_EXPR_MAX_DEPTH)
            compile_types(text, 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32);
        else {
            snprintf(want, sizeof(want), "expr:1:%d: expression nested too deeply (more than "
                                         "%d levels)", depth, GR_EXPR_MAX_DEPTH);
            REFUSE(text, want);
        }
    }
    /* Signs and calls nest too. */
    at = 0;
    for (int i = 0; i <= GR_EXPR_MAX_DEPTH; i++)
        text[at++] = '-';
    snprintf(text + at, 8, "x");
    snprintf(want, sizeof(want), "expr:1:%d: expression nested too deeply (more than %d "
                                 "levels)", GR_EXPR_MAX_DEPTH + 1, GR_EXPR_MAX_DEPTH);
    REFUSE(text, want);
    at = 0;
    for (int i = 0; i <= GR_EXPR_MAX_DEPTH; i++)
        at += (size_t)snprintf(text + at, 16, "abs(");
    text[at++] = 'x';
    for (int i = 0; i <= GR_EXPR_MAX_DEPTH; i++)
        text[at++] = ')';
    text[at] = '\0';
    snprintf(want, sizeof(want), "expr:1:%d: expression nested too deeply (more than %d "
                                 "levels)", 4 * GR_EXPR_MAX_DEPTH + 4, GR_EXPR_MAX_DEPTH);
    REFUSE(text, want);
    /* A long chain is a loop: 512 terms (1023 nodes) are fine, 513 are too many. */
    at = 0;
    for (int i = 0; i < 513; i++)
        at += (size_t)snprintf(text + at, 8, "%sx", i ? "+" : "");
    text[at - 2] = '\0';
    compile_types(text, 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32);
    text[at - 2] = '+';
    /* The 1025th node is the last '+' (an operator follows its operands). */
    snprintf(want, sizeof(want), "expr:1:%zu: expression is too large (more than %d values and "
                                 "operations)", at - 1, GR_EXPR_MAX_NODES);
    REFUSE(text, want);
    memset(text, ' ', GR_EXPR_MAX_TEXT + 1);
    text[0] = 'x';
    text[GR_EXPR_MAX_TEXT] = '\0';
    compile_types(text, 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32);
    text[GR_EXPR_MAX_TEXT] = ' ';
    text[GR_EXPR_MAX_TEXT + 1] = '\0';
    snprintf(want, sizeof(want), "expr:1:1: expression is too long (%d characters, at most %d)",
             GR_EXPR_MAX_TEXT + 1, GR_EXPR_MAX_TEXT);
    REFUSE(text, want);
    free(text);
}

/* Params are constants: a number of the text's, by name. */
static void params_are_constants(void)
{
    static const char *const names[] = {"scale", "offset"};
    static const double values[] = {0.25, -3.0};
    gr_expr_def d = GR_EXPR_DEF_INIT;
    char name[GR_NAME_MAX + 1], other[GR_NAME_MAX + 1];
    gr_error_info err;
    static float out[N];
    const gr_kernel *k;

    fill();
    d.text = "x * scale + offset";
    d.n_inputs = 1;
    d.input_names[0] = "x";
    d.n_params = 2;
    d.param_names = names;
    d.param_values = values;
    ASSERT_STATUS(gr_kernel_register_expr(&d, name, sizeof(name), &err), GR_OK);
    k = gr__kernel_find(name);
    run(k, xs, NULL, out, N);
    for (int i = 0; i < N; i++)
        if (!same_f(out[i], xs[i] * 0.25f + -3.0f))
            GR_TEST_FAIL("element %d: got %a", i, out[i]);
    /* The same program as the numbers written out (adding -3: subtracting 3 would be
     * another operation). */
    d.text = "x * 0.25 + -3";
    d.n_params = 0;
    ASSERT_STATUS(gr_kernel_register_expr(&d, other, sizeof(other), &err), GR_OK);
    ASSERT_STR_EQ(other, name);
}

static const char *register_x(const char *text, const char *xname, gr_dtype tx, gr_dtype ty,
                              char *name)
{
    gr_expr_def d = GR_EXPR_DEF_INIT;
    gr_error_info err;

    d.text = text;
    d.n_inputs = 2;
    d.input_names[0] = xname;
    d.input_names[1] = "other";
    d.input_dtype[0] = tx;
    d.input_dtype[1] = ty;
    if (gr_kernel_register_expr(&d, name, GR_NAME_MAX + 1, &err) != GR_OK)
        GR_TEST_FAIL("'%s': %s", text, err.message);
    return name;
}

/* The same program registers once, whatever its names and spacing; another type (of an
 * unused input too) or another constant is another kernel. */
static void same_program_registers_once(void)
{
    char a[GR_NAME_MAX + 1], b[GR_NAME_MAX + 1], c[GR_NAME_MAX + 1], e[GR_NAME_MAX + 1];
    uint32_t before;
    const gr_kernel *k;

    register_x("x * 2 - 1", "x", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, a);
    before = gr_kernel_count();
    register_x("(v*2)-1", "v", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, b);
    register_x("x * 2 - 1", "x", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, c);
    ASSERT_STR_EQ(a, b);
    ASSERT_STR_EQ(a, c);
    ASSERT_EQ(gr_kernel_count(), before);
    ASSERT_EQ(strncmp(a, "expr.", 5), 0);
    ASSERT_EQ(strlen(a), 21);
    k = gr__kernel_find(a);
    ASSERT_TRUE(k != NULL);
    ASSERT_EQ(k->def.n_inputs, 2);
    ASSERT_EQ(k->def.n_scalars, 0);
    ASSERT_EQ(k->def.cuda_kind, GR_CUDA_SOURCE);
    ASSERT_STR_CONTAINS(k->doc, "expr: x * 2 - 1");
    register_x("x * 2 - 1", "x", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT64, e);
    ASSERT_TRUE(strcmp(e, a) != 0);
    register_x("float32(x * 2 - 1)", "x", GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT32, e);
    ASSERT_TRUE(strcmp(e, a) != 0);
    register_x("x * 2 - 1.5", "x", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, e);
    ASSERT_TRUE(strcmp(e, a) != 0);
    ASSERT_EQ(gr_kernel_count(), before + 3);
}

/* Many threads registering the same new program at once: one registration. */
static void *register_main(void *arg)
{
    register_x("abs(x) * 3 + other", "x", GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32, arg);
    return NULL;
}

static void concurrent_registration_registers_once(void)
{
    enum { T = 8 };
    char names[T][GR_NAME_MAX + 1];
    pthread_t th[T];
    uint32_t before = gr_kernel_count();

    for (int i = 0; i < T; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, register_main, names[i]), 0);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int i = 1; i < T; i++)
        ASSERT_STR_EQ(names[i], names[0]);
    ASSERT_EQ(gr_kernel_count(), before + 1);
}

static void dummy_cpu(const gr_kernel_args *a, void *user)
{
    (void)a;
    (void)user;
}

/* The registry is append-only and bounded: an expression past GR_MAX_KERNELS is refused,
 * saying so. (A case runs in a process of its own: the full registry ends with it.) */
static void full_registry_is_refused(void)
{
    gr_expr_def d = GR_EXPR_DEF_INIT;
    char name[GR_NAME_MAX + 1];
    gr_error_info err;

    while (gr_kernel_count() < GR_MAX_KERNELS) {
        gr_kernel_def k = GR_KERNEL_DEF_INIT;

        snprintf(name, sizeof(name), "filler%u", gr_kernel_count());
        k.name = name;
        k.n_inputs = 1;
        k.cpu = dummy_cpu;
        ASSERT_STATUS(gr_kernel_register(&k, &err), GR_OK);
    }
    d.text = "x + 41";
    d.n_inputs = 1;
    d.input_names[0] = "x";
    ASSERT_STATUS(gr_kernel_register_expr(&d, name, sizeof(name), &err), GR_ERR_OVER_BUDGET);
    ASSERT_STR_EQ(err.message, "cannot register the expression's kernel: the registry is full "
                               "(4096 kernels registered; unregister some)");
    ASSERT_EQ(gr_kernel_count(), GR_MAX_KERNELS);
    /* Room made by unregistering is room for it. */
    ASSERT_STATUS(gr_kernel_unregister("filler4095", &err), GR_OK);
    ASSERT_STATUS(gr_kernel_register_expr(&d, name, sizeof(name), &err), GR_OK);
    ASSERT_EQ(gr_kernel_count(), GR_MAX_KERNELS);
}

/* Any number of elements, inputs anywhere (a chunk of a tensor), in place. */
static void any_size_and_in_place(void)
{
    static const uint64_t sizes[] = {1, 2, 255, 256, 257, 511, 1000, N};
    const gr_kernel *k = compile_types("sqrt(abs(x)) * y + x", 2, GR_DTYPE_FLOAT32,
                                       GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT32);
    static float out[N], io[N];

    fill();
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        uint64_t n = sizes[s], off = N - n;

        memset(out, 0xa5, sizeof(out));
        run(k, xs + off, ys + off, out, n);
        for (uint64_t i = 0; i < n; i++)
            if (!same_f(out[i], sqrtf(fabsf(xs[off + i])) * ys[off + i] + xs[off + i]))
                GR_TEST_FAIL("n %llu element %llu: got %a", (unsigned long long)n,
                             (unsigned long long)i, out[i]);
        ASSERT_EQ(((uint32_t *)out)[n < N ? n : N - 1] == 0xa5a5a5a5u, n < N);
        memcpy(io, xs, sizeof(io));
        run(k, io, ys, io, n);
        for (uint64_t i = 0; i < n; i++)
            ASSERT_TRUE(same_f(io[i], sqrtf(fabsf(xs[i])) * ys[i] + xs[i]));
    }
}

/* A long sum of conversions (every clamp widens x to float64 beside y): temporaries made
 * and released by the hundred, the result still the reference's. */
static void many_temporaries(void)
{
    enum { TERMS = 170 };
    static char text[TERMS * 24];
    static double out[N];
    size_t at = 0;
    const gr_kernel *k;

    fill();
    for (int t = 0; t < TERMS; t++)
        at += (size_t)snprintf(text + at, sizeof(text) - at, "%sclamp(x, y, %d)", t ? "+" : "",
                               t);
    ASSERT_LT(at, GR_EXPR_MAX_TEXT);
    k = compile_types(text, 2, GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT64, GR_DTYPE_FLOAT64);
    run(k, xs, yd, out, N);
    for (int i = 0; i < N; i++) {
        double want = 0;

        for (int t = 0; t < TERMS; t++) {
            double c = ref_min_d(ref_max_d((double)xs[i], yd[i]), (double)t);
            want = t ? want + c : c;
        }
        if (!same_d(out[i], want))
            GR_TEST_FAIL("element %d: got %a, want %a", i, out[i], want);
    }
}

/* "x" and the ten seed rounds spelled out, nested: sqrt(sqrt(x * 1.01 + 1.01) * 1.01 ...). */
static void seed_text(char *buf, size_t size)
{
    char inner[512];

    snprintf(inner, sizeof(inner), "x");
    for (int r = 0; r < GR_SEED_ROUNDS; r++) {
        snprintf(buf, size, "sqrt(%.480s * 1.01 + 1.01)", inner);
        snprintf(inner, sizeof(inner), "%.500s", buf);
    }
}

/* The seed written as one expression equals the built-in fused seed, bit for bit. */
static void seed_expression_equals_the_builtin(void)
{
    static float out[N], ref[N];
    const gr_kernel *seed = gr__kernel_find("seed");
    char text[1024];
    gr_kernel_args a;

    fill();
    seed_text(text, sizeof(text));
    memset(&a, 0, sizeof(a));
    a.in[0] = xs;
    a.in_n[0] = N;
    a.n = N;
    a.out = ref;
    seed->def.cpu(&a, seed->def.user);
    run(compile_types(text, 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32), xs, NULL, out, N);
    for (int i = 0; i < N; i++) {
        if (!same_f(out[i], ref[i]))
            GR_TEST_FAIL("element %d (x %a): expression %a, built-in %a", i, xs[i], out[i],
                         ref[i]);
        ASSERT_TRUE(same_f(out[i], gr__seed_ref(xs[i])));
    }
}

/* Constant expressions (the spec's scalars and params) in double. */
static void constants_evaluate_in_double(void)
{
    static const gr_expr_param params[] = {{"scale", 5, 3.0}, {"tiny", 4, 1e-300}};
    gr_expr_error e;
    double v;

#define CONST_IS(text, want)                                                                \
    do {                                                                                    \
        if (gr__expr_eval_const(text, strlen(text), params, 2, &v, &e) != GR_OK)           \
            GR_TEST_FAIL("'%s': %s", text, e.why);                                          \
        ASSERT_TRUE(same_d(v, (want)));                                                     \
    } while (0)
    CONST_IS("1/0.25", 4.0);
    CONST_IS("scale * 2", 6.0);
    CONST_IS("-scale - -1", -2.0);
    CONST_IS("1/3", 1.0 / 3.0);
    CONST_IS("tiny * tiny * 1e300", 1e-300 * 1e-300 * 1e300);
    CONST_IS("float32(0.1)", (double)(float)0.1);
    CONST_IS("float32(0.1) * 3", (double)(float)0.1 * 3.0);
    CONST_IS("int32(-2.7)", -2.0);
    CONST_IS("uint8(300)", 255.0);
    CONST_IS("uint8(int32(300))", 44.0);
    CONST_IS("float16(65504)", 65504.0);
    ASSERT_STATUS(gr__expr_eval_const("float16(65520)", 14, params, 2, &v, &e),
                  GR_ERR_INVALID_ARGUMENT); /* rounds to infinity */
    CONST_IS("select(scale > 2, 7, 8)", 7.0);
    CONST_IS("pow(2, 10) + sqrt(16) + min(1, -1) + clamp(5, 0, 2)", 1024.0 + 4.0 - 1.0 + 2.0);
    ASSERT_STATUS(gr__expr_eval_const("x + 1", 5, params, 2, &v, &e), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_EQ(e.why, "unknown name 'x' (a constant is made of numbers and params)");
    ASSERT_EQ_U64(e.offset, 0);
    ASSERT_TRUE(e.unknown_name && e.name_len == 1);
    ASSERT_STATUS(gr__expr_eval_const("1 < 2", 5, params, 2, &v, &e), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr__expr_eval_const("scale / 0", 9, params, 2, &v, &e),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_EQ(e.why, "this constant part of the expression is not finite (inf)");
    ASSERT_EQ_U64(e.offset, 6);
}

/* The CUDA source of every operation, in both compute types, and of every conversion,
 * compiles (NVRTC needs no GPU): to PTX with the generated entry. */
static void cuda_source_compiles_for_every_operation(void)
{
    static const char *const texts[] = {
        "x + y * 2 - x / y", "-x", "sqrt(x) + exp(x) + log(x) + tanh(x) + sigmoid(x)",
        "floor(x) + abs(y) + pow(x, y) + pow(x, 0.5)", "min(x, y) + max(x, 1) + clamp(x, 0, y)",
        "select(x < y, 1, 0) + select(x <= 1, x, y) + select(x > y, y, 2)",
        "select(x >= y, x, y) + where(x == y, 1, 2) + where(x != 0, x, y)",
    };
    char cast[64];

    REQUIRE_NVRTC();
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        for (int t = 0; t < 2; t++) {
            gr_dtype ty = t ? GR_DTYPE_FLOAT64 : GR_DTYPE_FLOAT32;
            const gr_kernel *k = compile_types(texts[i], 2, ty, ty, ty);

            if (k->ptx == NULL)
                GR_TEST_FAIL("'%s' (%s): no PTX", texts[i], gr_dtype_name(ty));
            ASSERT_STR_CONTAINS(k->ptx, k->def.cuda_name);
        }
    for (int from = 0; from < GR_DTYPE_COUNT_; from++)
        for (int to = 0; to < GR_DTYPE_COUNT_; to++) {
            const gr_kernel *k;

            snprintf(cast, sizeof(cast), "%s(x * 1) + %s(y)", gr_dtype_name((gr_dtype)to),
                     gr_dtype_name((gr_dtype)to));
            k = compile_types(cast, 2, (gr_dtype)from, (gr_dtype)to, GR_DTYPE_FLOAT64);
            ASSERT_TRUE(k->ptx != NULL);
            snprintf(cast, sizeof(cast), "%s(x)", gr_dtype_name((gr_dtype)to));
            k = compile_types(cast, 1, (gr_dtype)from, GR_DTYPE_FLOAT32, (gr_dtype)to);
            ASSERT_TRUE(k->ptx != NULL);
            k = compile_types("x", 1, (gr_dtype)from, GR_DTYPE_FLOAT32,
                              gr_dtype_safe_cast((gr_dtype)from, (gr_dtype)to) ? (gr_dtype)to
                                                                               : (gr_dtype)from);
            ASSERT_TRUE(k->ptx != NULL);
        }
}

/* Fuzzers register expressions without CUDA: another kernel than the same program with it,
 * with the same CPU results. (A case runs in a process of its own: the switch ends with it.) */
static void without_cuda_is_another_kernel(void)
{
    const gr_kernel *with = compile_types("x * 3 - 1", 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32);
    const gr_kernel *without;
    static float a[N], b[N];

    fill();
    gr__expr_without_cuda();
    without = compile_types("x * 3 - 1", 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32);
    ASSERT_TRUE(with != without && strcmp(with->name, without->name) != 0);
    ASSERT_EQ(with->def.cuda_kind, GR_CUDA_SOURCE);
    ASSERT_EQ(without->def.cuda_kind, GR_CUDA_NONE);
    ASSERT_PTR_EQ(compile_types("x*3-1", 1, GR_DTYPE_FLOAT32, 0, GR_DTYPE_FLOAT32), without);
    run(with, xs, NULL, a, N);
    run(without, xs, NULL, b, N);
    ASSERT_EQ(memcmp(a, b, sizeof(a)), 0);
}

GR_TEST_MAIN(GR_TEST(float32_operators_and_functions), GR_TEST(float64_operators_and_functions),
             GR_TEST(casts_follow_dtype_rules), GR_TEST(types_promote),
             GR_TEST(output_type_is_checked),
             GR_TEST(malformed_expressions_are_refused_at_their_column),
             GR_TEST(bad_definitions_are_refused), GR_TEST(limits),
             GR_TEST(params_are_constants), GR_TEST(same_program_registers_once),
             GR_TEST(concurrent_registration_registers_once), GR_TEST(full_registry_is_refused),
             GR_TEST(any_size_and_in_place), GR_TEST(seed_expression_equals_the_builtin),
             GR_TEST(constants_evaluate_in_double),
             GR_TEST(cuda_source_compiles_for_every_operation),
             GR_TEST(without_cuda_is_another_kernel), GR_TEST(many_temporaries))

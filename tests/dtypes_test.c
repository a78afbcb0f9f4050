/*
 * dtypes_test.c - the element types on the host backend: the conversions of kernels/dtype.h
 * against independent references (the compiler's own _Float16, a bfloat16 rounding found by
 * comparing neighbours), the casting rules, kernel versions per type (registration and
 * resolution), and every type through H2D, kernels and D2H in whole tensors, chunks and
 * batches, every element checked.
 */
#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dtype.h"
#include "graph/graph.h"
#include "kernels/kernels.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

static uint16_t half_bits(_Float16 h)
{
    uint16_t u;

    memcpy(&u, &h, sizeof(u));
    return u;
}

static _Float16 half_of(uint16_t u)
{
    _Float16 h;

    memcpy(&h, &u, sizeof(h));
    return h;
}

/* The bfloat16 nearest to f (ties to the even pattern), found without dtype.h's bit trick:
 * the two candidates around f compared in double. Finite f whose nearest is finite. */
static uint16_t bf16_reference(float f)
{
    uint32_t u = gr__f32_bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dlo = fabs((double)f - (double)gr__bf16_to_f32(lo));
    double dhi = fabs((double)f - (double)gr__bf16_to_f32(hi));

    if ((u & 0xffffu) == 0)
        return lo;
    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return hi;
    return (lo & 1) ? hi : lo;
}

static void names_sizes_and_parsing(void)
{
    static const struct {
        gr_dtype t;
        const char *name;
        uint32_t size;
    } want[] = {
        {GR_DTYPE_FLOAT32, "float32", 4}, {GR_DTYPE_FLOAT16, "float16", 2},
        {GR_DTYPE_BFLOAT16, "bfloat16", 2}, {GR_DTYPE_FLOAT64, "float64", 8},
        {GR_DTYPE_INT32, "int32", 4},     {GR_DTYPE_UINT8, "uint8", 1},
    };
    gr_dtype t;

    ASSERT_EQ(GR_DTYPE_COUNT_, 6);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ASSERT_STR_EQ(gr_dtype_name(want[i].t), want[i].name);
        ASSERT_EQ(gr_dtype_size(want[i].t), want[i].size);
        ASSERT_STATUS(gr_dtype_parse(want[i].name, &t), GR_OK);
        ASSERT_EQ(t, want[i].t);
    }
    ASSERT_STR_EQ(gr_dtype_name(GR_DTYPE_COUNT_), "unknown");
    ASSERT_EQ(gr_dtype_size(GR_DTYPE_COUNT_), 0);
    ASSERT_STATUS(gr_dtype_parse("float", &t), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_dtype_parse("Float32", &t), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_dtype_parse(NULL, &t), GR_ERR_INVALID_ARGUMENT);
}

/* NumPy's np.can_cast(from, to, 'safe') for these types (bfloat16 as ml_dtypes has it). */
static void safe_casts_are_numpys(void)
{
    /* Rows: from; columns: to; order float32, float16, bfloat16, float64, int32, uint8. */
    static const int safe[6][6] = {
        {1, 0, 0, 1, 0, 0}, /* float32 */
        {1, 1, 0, 1, 0, 0}, /* float16 */
        {1, 0, 1, 1, 0, 0}, /* bfloat16 */
        {0, 0, 0, 1, 0, 0}, /* float64 */
        {0, 0, 0, 1, 1, 0}, /* int32 */
        {1, 1, 1, 1, 1, 1}, /* uint8 */
    };

    for (int f = 0; f < 6; f++)
        for (int t = 0; t < 6; t++)
            if (gr_dtype_safe_cast((gr_dtype)f, (gr_dtype)t) != safe[f][t])
                GR_TEST_FAIL("safe cast %s -> %s: got %d, want %d", gr_dtype_name(f),
                             gr_dtype_name(t), gr_dtype_safe_cast(f, t), safe[f][t]);
    ASSERT_EQ(gr_dtype_safe_cast(GR_DTYPE_COUNT_, GR_DTYPE_FLOAT64), 0);
}

/* Every float16 to float32 and back, and a sweep of float32 patterns to float16, against the
 * compiler's _Float16 (IEEE conversions, rounding to nearest even). */
static void float16_conversions_match_the_compiler(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gr__f16_to_f32((uint16_t)h);

        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0) {
            ASSERT_TRUE(isnan(f));
            ASSERT_EQ(gr__f32_to_f16(f), 0x7fff);
            continue;
        }
        ASSERT_FLOAT_BITS_EQ(f, (float)half_of((uint16_t)h));
        ASSERT_EQ(gr__f32_to_f16(f), h); /* exact values come back */
    }
    /* A stride through every pattern (odd, so every bit position varies), then the
     * neighbours of each float16 and of each midpoint between two: the ties. */
    for (uint64_t u = 0; u < (1ull << 32); u += 65537 * 7) {
        float f = gr__f32_of_bits((uint32_t)u);

        if (isnan(f))
            ASSERT_EQ(gr__f32_to_f16(f), 0x7fff);
        else if (gr__f32_to_f16(f) != half_bits((_Float16)f))
            GR_TEST_FAIL("float32 0x%08x (%.9g): 0x%04x, the compiler 0x%04x", (unsigned)u,
                         f, gr__f32_to_f16(f), half_bits((_Float16)f));
    }
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double mid = ((double)gr__f16_to_f32((uint16_t)h) +
                      (double)gr__f16_to_f32((uint16_t)(h + 1))) / 2;
        float m = (float)mid;
        float around[3] = {nextafterf(m, -INFINITY), m, nextafterf(m, INFINITY)};

        for (int k = 0; k < 3; k++)
            for (int s = 0; s < 2; s++) {
                float f = s ? -around[k] : around[k];

                if (gr__f32_to_f16(f) != half_bits((_Float16)f))
                    GR_TEST_FAIL("float32 %.9g near a tie: 0x%04x, the compiler 0x%04x", f,
                                 gr__f32_to_f16(f), half_bits((_Float16)f));
            }
    }
    ASSERT_EQ(gr__f32_to_f16(65504.0f), 0x7bff);
    ASSERT_EQ(gr__f32_to_f16(65519.99f), 0x7bff);
    ASSERT_EQ(gr__f32_to_f16(65520.0f), 0x7c00);
    ASSERT_EQ(gr__f32_to_f16(-INFINITY), 0xfc00);
    ASSERT_EQ(gr__f32_to_f16(0x1p-24f), 0x0001);
    ASSERT_EQ(gr__f32_to_f16(0x1p-25f), 0x0000);                       /* tie to even: 0 */
    ASSERT_EQ(gr__f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    ASSERT_EQ(gr__f32_to_f16(-0.0f), 0x8000);
}

static void bfloat16_conversions_match_a_reference(void)
{
    uint64_t state = 42;

    for (uint32_t h = 0; h < 65536; h++) {
        float f = gr__bf16_to_f32((uint16_t)h);

        if (isnan(f))
            ASSERT_EQ(gr__f32_to_bf16(f), 0x7fff);
        else
            ASSERT_EQ(gr__f32_to_bf16(f), h);
    }
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)gr_test_rand(&state);
        float f = gr__f32_of_bits(u);

        if (isnan(f) || fabsf(f) > 0x1.fep127f)
            continue;
        if (gr__f32_to_bf16(f) != bf16_reference(f))
            GR_TEST_FAIL("float32 0x%08x: 0x%04x, the reference 0x%04x", u,
                         gr__f32_to_bf16(f), bf16_reference(f));
    }
    ASSERT_EQ(gr__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);           /* a tie: to even */
    ASSERT_EQ(gr__f32_to_bf16(1.0f + 0x1p-8f + 0x1p-9f), 0x3f81);
    ASSERT_EQ(gr__f32_to_bf16(FLT_MAX), 0x7f80); /* rounds up to infinity */
}

/* `cast` between every pair, on values chosen to hit the rules' edges. */
static void casts_follow_the_rules(void)
{
    static const double values[] = {0.0,    -0.0,   0.4,      0.5,   0.6,        1.5,
                                    2.5,    -1.7,   255.0,    255.9, 256.0,      300.0,
                                    -3.0,   65504., 65520.,   1e10,  -1e10,      2147483520.,
                                    3e9,    -3e9,   1.0 / 3., NAN,   INFINITY,   -INFINITY,
                                    1e-8,   1e-40,  16777217, 1e300, 0x1.0000001p0};
    const size_t n = sizeof(values) / sizeof(values[0]);

    for (int from = 0; from < GR_DTYPE_COUNT_; from++)
        for (int to = 0; to < GR_DTYPE_COUNT_; to++) {
            gr_dtype in[1] = {(gr_dtype)from};
            const gr_kernel *k = gr__kernel_find_typed("cast", in, 1, (gr_dtype)to);
            unsigned char src[sizeof(values) / sizeof(values[0]) * 8];
            unsigned char dst[sizeof(src)];
            gr_kernel_args a;

            ASSERT_TRUE(k != NULL);
            ASSERT_TRUE(k->def.elementwise);
            /* The inputs: each value as the source type holds it (dtype.h's store). */
            for (size_t i = 0; i < n; i++)
                gr__store_cast(from, src, i, GR_DTYPE_FLOAT64, values[i]);
            memset(dst, 0xa5, sizeof(dst));
            memset(&a, 0, sizeof(a));
            a.in[0] = src;
            a.out = dst;
            a.n = n;
            a.in_n[0] = n;
            k->def.cpu(&a, k->def.user);
            for (size_t i = 0; i < n; i++) {
                double x = gr__load_f64(from, src, i);
                double got = gr__load_f64(to, dst, i), want;

                /* The rules, written out independently of dtype.h's store. */
                if (to == GR_DTYPE_INT32)
                    want = isnan(x)                 ? 0
                           : x >= 2147483647.0      ? 2147483647.0
                           : x <= -2147483648.0     ? -2147483648.0
                                                    : trunc(x);
                else if (to == GR_DTYPE_UINT8 && from == GR_DTYPE_INT32)
                    want = (double)(uint8_t)(int64_t)x;
                else if (to == GR_DTYPE_UINT8)
                    want = isnan(x) || x <= 0 ? 0 : x >= 255 ? 255 : trunc(x);
                else if (to == GR_DTYPE_FLOAT64)
                    want = x;
                else if (to == GR_DTYPE_FLOAT32)
                    want = (double)(float)x;
                else if (to == GR_DTYPE_FLOAT16)
                    want = (double)(float)(_Float16)(float)x;
                else if (isnan(x) || isinf((float)x))
                    want = (double)(float)x;
                else
                    want = gr__bf16_to_f32(bf16_reference((float)x));
                if (isnan(want) ? !isnan(got) : got != want)
                    GR_TEST_FAIL("cast %s -> %s of %.17g: got %.17g, want %.17g",
                                 gr_dtype_name(from), gr_dtype_name(to), x, got, want);
            }
        }
}

/* The versions of one name: resolution by the buffers' types, the message when none fits,
 * and the rules for registering more. */
static void kernel_versions_by_type(void)
{
    gr_dtype f16[2] = {GR_DTYPE_FLOAT16, GR_DTYPE_FLOAT16};
    const gr_kernel *k = gr__kernel_find_typed("axpby", f16, 2, GR_DTYPE_FLOAT16);
    gr_kernel_def d = GR_KERNEL_DEF_INIT;
    gr_error_info err;
    const char *in[1] = {"x"};
    gr_buffer_desc u8 = GR_BUFFER_DESC_INIT;
    gr_graph *g;

    ASSERT_TRUE(k != NULL);
    ASSERT_EQ(k->def.scalar_dtype[0], GR_DTYPE_FLOAT32);
    k = gr__kernel_find_typed("mul", (gr_dtype[]){GR_DTYPE_FLOAT64}, 1, GR_DTYPE_FLOAT64);
    ASSERT_TRUE(k != NULL);
    ASSERT_EQ(k->def.scalar_dtype[0], GR_DTYPE_FLOAT64);
    ASSERT_TRUE(gr__kernel_find_typed("seed", (gr_dtype[]){GR_DTYPE_FLOAT16}, 1,
                                      GR_DTYPE_FLOAT16) == NULL);

    /* A uint8 buffer into mul: refused, naming the versions there are. */
    u8.dtype = GR_DTYPE_UINT8;
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "x", &u8), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", in, 1, "x", (float[]){2.0f}, 1),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "kernel 'mul' has no version for (uint8) -> uint8");
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "(float16) -> float16");
    ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "convert with cast first");
    gr_graph_destroy(g);

    /* float64 scalars through gr_graph_add_kernel_f64 keep their digits; a float32 scalar
     * out of float32's range is refused. */
    {
        gr_buffer_desc f64 = GR_BUFFER_DESC_INIT, f32 = GR_BUFFER_DESC_INIT;
        const gr_node *n;

        f64.dtype = GR_DTYPE_FLOAT64;
        ASSERT_STATUS(gr_graph_create(&g), GR_OK);
        ASSERT_STATUS(gr_graph_add_buffer_desc(g, "x", &f64), GR_OK);
        ASSERT_STATUS(gr_graph_add_buffer_desc(g, "y", &f32), GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel_f64(g, "k", "mul", in, 1, "x",
                                              (double[]){0.1}, 1),
                      GR_OK);
        n = &g->nodes[0];
        ASSERT_TRUE(n->scalars[0].f64 == 0.1);
        in[0] = "y";
        ASSERT_STATUS(gr_graph_add_kernel_f64(g, "k2", "mul", in, 1, "y",
                                              (double[]){1e39}, 1),
                      GR_ERR_INVALID_ARGUMENT);
        ASSERT_STR_CONTAINS(GRAPH_ERROR(g), "scalar 0 (1e+39) is not a float32 value");
        /* The spec's rule (a value that rounds to FLT_MAX is one; one that rounds to 0 is
         * not), so that a spec's number and the builder agree. */
        ASSERT_STATUS(gr_graph_add_kernel_f64(g, "k3", "mul", in, 1, "y",
                                              (double[]){3.4028235e38}, 1),
                      GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel_f64(g, "k4", "mul", in, 1, "y", (double[]){1e-46}, 1),
                      GR_ERR_INVALID_ARGUMENT);
        gr_graph_destroy(g);
    }

    /* Registering: a built-in's name is the built-ins' alone, for any type. */
    d.name = "mul";
    d.n_inputs = 1;
    d.n_scalars = 1;
    d.in_dtype[0] = GR_DTYPE_INT32;
    d.out_dtype = GR_DTYPE_INT32;
    d.scalar_dtype[0] = GR_DTYPE_INT32;
    d.elementwise = 1;
    d.cpu = (gr_kernel_cpu_fn)(void (*)(void))abort;
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "kernel 'mul' is already registered");
    /* One's own name: versions for other types, with the same counts. */
    d.name = "dtypes_test.scale";
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "already registered for these element types");
    d.in_dtype[0] = d.out_dtype = GR_DTYPE_UINT8;
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    d.in_dtype[0] = d.out_dtype = GR_DTYPE_FLOAT64;
    d.n_scalars = 2;
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "other counts of inputs or scalars");
    ASSERT_TRUE(gr__kernel_find_typed("dtypes_test.scale", (gr_dtype[]){GR_DTYPE_UINT8}, 1,
                                      GR_DTYPE_UINT8) != NULL);
}

/* clamp as CUDA's fminf and fmaxf: a NaN, signaling ones too, loses to the bound; +0 is
 * above -0. On every float type's CPU version. */
static void clamp_of_nans_and_zeros(void)
{
    static const gr_dtype types[] = {GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT16, GR_DTYPE_BFLOAT16,
                                     GR_DTYPE_FLOAT64};

    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        gr_dtype t = types[k];
        const gr_kernel *kern = gr__kernel_find_typed("clamp", &t, 1, t);
        unsigned char in[5 * 8], out[5 * 8];
        gr_kernel_args a;

        ASSERT_TRUE(kern != NULL);
        /* A signaling NaN, a quiet one, -0, +0, and 7. */
        if (t == GR_DTYPE_FLOAT64) {
            uint64_t snan = 0x7ff0000000000001ull;
            memcpy(in, &snan, 8);
        } else if (t == GR_DTYPE_FLOAT32) {
            uint32_t snan = 0x7f800001u;
            memcpy(in, &snan, 4);
        } else {
            uint16_t snan = t == GR_DTYPE_FLOAT16 ? 0x7c01 : 0x7f81;
            memcpy(in, &snan, 2);
        }
        gr__store_cast(t, in, 1, GR_DTYPE_FLOAT64, NAN);
        gr__store_cast(t, in, 2, GR_DTYPE_FLOAT64, -0.0);
        gr__store_cast(t, in, 3, GR_DTYPE_FLOAT64, 0.0);
        gr__store_cast(t, in, 4, GR_DTYPE_FLOAT64, 7.0);
        memset(&a, 0, sizeof(a));
        a.in[0] = in;
        a.out = out;
        a.n = a.in_n[0] = 5;
        /* clamp(x, 0, 5): NaNs give 0 (the lower bound), -0 gives +0. */
        if (t == GR_DTYPE_FLOAT64)
            a.s[0].f64 = 0.0, a.s[1].f64 = 5.0;
        else
            a.s[0].f32 = 0.0f, a.s[1].f32 = 5.0f;
        kern->def.cpu(&a, kern->def.user);
        for (int i = 0; i < 4; i++) {
            double v = gr__load_f64(t, out, (uint64_t)i);

            if (!(v == 0.0 && !signbit(v)))
                GR_TEST_FAIL("%s: clamp(element %d, 0, 5) is %g, want +0", gr_dtype_name(t), i,
                             v);
        }
        ASSERT_TRUE(gr__load_f64(t, out, 4) == 5.0);
    }
}

/* ---- every type through the runtime ---------------------------------------------------- */

/* The pipeline per type: float types `mul(x, 3) -> y` in their own type; the integer types
 * cast to float32, `mul(f, 0.5)`, and cast back, so that both directions of cast run. */
static gr_graph *typed_pipeline(gr_dtype t)
{
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;
    const char *x = "x", *f = "f";
    gr_graph *g;

    d.dtype = t;
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "x", &d), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "y", &d), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    if (gr__dtype_is_float(t)) {
        ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", &x, 1, "y", (float[]){3.0f}, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    } else {
        ASSERT_STATUS(gr_graph_add_buffer(g, "f", 1, 1), GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel(g, "in", "cast", &x, 1, "f", NULL, 0), GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", &f, 1, "f", (float[]){0.5f}, 1),
                      GR_OK);
        ASSERT_STATUS(gr_graph_add_kernel(g, "out", "cast", &f, 1, "y", NULL, 0), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "load", "in"), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "in", "k"), GR_OK);
        ASSERT_STATUS(gr_graph_add_dep(g, "k", "out"), GR_OK);
    }
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "y", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, gr__dtype_is_float(t) ? "k" : "out", "store"), GR_OK);
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("finalize: %s", GRAPH_ERROR(g));
    return g;
}

/* Element i of tensor `t` in type `type`: finite values of a few magnitudes, negative ones
 * too, integers across the type's range. */
static void fill(gr_dtype type, void *p, uint64_t n, uint64_t t)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t s = t * 7919 + i;
        uint64_t r = gr_test_rand(&s);
        double v = ((double)(r >> 11) / (double)(1ull << 53) - 0.5) * 2000.0;

        switch (type) {
        case GR_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)r; break;
        case GR_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)r; break;
        default: gr__store_cast(type, p, i, GR_DTYPE_FLOAT64, v); break;
        }
    }
}

/* What the pipeline makes of element i, computed by other means than the kernels': the
 * compiler's _Float16 arithmetic, the bfloat16 reference, plain C casts. */
static double expected(gr_dtype type, const void *in, uint64_t i)
{
    switch (type) {
    case GR_DTYPE_FLOAT32: return (double)(((const float *)in)[i] * 3.0f);
    case GR_DTYPE_FLOAT64: return ((const double *)in)[i] * 3.0;
    case GR_DTYPE_FLOAT16: {
        float x = (float)half_of(((const uint16_t *)in)[i]);
        return (double)(float)(_Float16)(x * 3.0f);
    }
    case GR_DTYPE_BFLOAT16: {
        float x = gr__bf16_to_f32(((const uint16_t *)in)[i]) * 3.0f;
        return gr__bf16_to_f32(bf16_reference(x));
    }
    case GR_DTYPE_INT32: return (double)(int32_t)((float)((const int32_t *)in)[i] * 0.5f);
    case GR_DTYPE_UINT8: return (double)(uint8_t)((float)((const uint8_t *)in)[i] * 0.5f);
    default: return NAN;
    }
}

/* `count` tensors of sizes sizes[i % n_sizes] elements on `rt`, every output element
 * checked; the output memory poisoned first, so an element not written fails. */
static void run_typed(gr_runtime *rt, gr_dtype type, uint64_t count, const uint64_t *sizes,
                      size_t n_sizes, bool pinned)
{
    gr_graph *g = typed_pipeline(type);
    gr_tensor *t = calloc(count, sizeof(*t));
    uint32_t es = gr_dtype_size(type);
    gr_error_info err;
    gr_job *job;

    ASSERT_TRUE(t != NULL);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t n = sizes[i % n_sizes];
        void *in = NULL, *out = NULL;

        if (pinned) {
            ASSERT_STATUS(gr_host_alloc(n * es, &in), GR_OK);
            ASSERT_STATUS(gr_host_alloc(n * es, &out), GR_OK);
        } else {
            in = malloc(n * es);
            out = malloc(n * es);
        }
        ASSERT_TRUE(in != NULL && out != NULL);
        fill(type, in, n, i);
        memset(out, 0x7b, n * es);
        t[i].in[0] = in;
        t[i].out[0] = out;
        t[i].elems = n;
    }
    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("%s: submit: %s", gr_dtype_name(type), err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        gr_job_error_get(job, &err);
        GR_TEST_FAIL("%s: index %llu: %s", gr_dtype_name(type), (unsigned long long)err.index,
                     err.message);
    }
    gr_job_destroy(job);
    for (uint64_t i = 0; i < count; i++) {
        for (uint64_t e = 0; e < t[i].elems; e++) {
            double got = gr__load_f64(type, t[i].out[0], e), want = expected(type, t[i].in[0], e);

            if (!(got == want || (isnan(got) && isnan(want))))
                GR_TEST_FAIL("%s: tensor %llu element %llu of %llu: got %.17g, want %.17g",
                             gr_dtype_name(type), (unsigned long long)i, (unsigned long long)e,
                             (unsigned long long)t[i].elems, got, want);
        }
        if (pinned) {
            gr_host_free((void *)t[i].in[0]);
            gr_host_free(t[i].out[0]);
        } else {
            free((void *)t[i].in[0]);
            free(t[i].out[0]);
        }
    }
    free(t);
    gr_graph_destroy(g);
}

static const gr_dtype all_types[] = {GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT16, GR_DTYPE_BFLOAT16,
                                     GR_DTYPE_FLOAT64, GR_DTYPE_INT32,   GR_DTYPE_UINT8};

/* Whole tensors of odd sizes, one iteration each. */
static void every_type_whole(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.budget = 64u << 20,
                                                     .whole_tensors = true});
    static const uint64_t sizes[] = {1, 3, 1000, 4097, 65539};

    for (size_t k = 0; k < sizeof(all_types) / sizeof(all_types[0]); k++)
        run_typed(rt, all_types[k], 10, sizes, 5, false);
    gr_runtime_destroy(rt);
}

/* Tensors many times a worker's share of a small budget: cut into chunks, whose sizes in
 * elements depend on the type's bytes (a uint8 tensor gets longer chunks than a float64). */
static void every_type_chunked(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.budget = 96u << 10, .workers = 2});
    static const uint64_t sizes[] = {200003, 131072, 77777};

    for (size_t k = 0; k < sizeof(all_types) / sizeof(all_types[0]); k++) {
        uint64_t bytes, elems = 200003;

        run_typed(rt, all_types[k], 4, sizes, 3, false);
        /* The footprint counts the type's bytes: each of the two buffers (three with the
         * integer types' float32 one) is the tensor's elements times its element size,
         * aligned. */
        {
            gr_graph *g = typed_pipeline(all_types[k]);
            uint64_t es = gr_dtype_size(all_types[k]);
            uint64_t one = (elems * es + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;
            uint64_t f32 = (elems * 4 + GR_BUFFER_ALIGN - 1) / GR_BUFFER_ALIGN * GR_BUFFER_ALIGN;

            ASSERT_STATUS(gr_graph_footprint(g, elems, &bytes), GR_OK);
            ASSERT_EQ_U64(bytes, 2 * one + (gr__dtype_is_float(all_types[k]) ? 0 : f32));
            gr_graph_destroy(g);
        }
    }
    gr_runtime_destroy(rt);
}

/* Thousands of small tensors of odd sizes: packed into batches. */
static void every_type_batched(void)
{
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.budget = 8u << 20});
    static const uint64_t sizes[] = {1, 2, 3, 5, 7, 63, 64, 65, 127, 255, 257, 1001};

    for (size_t k = 0; k < sizeof(all_types) / sizeof(all_types[0]); k++)
        run_typed(rt, all_types[k], 3000, sizes, 12, false);
    gr_runtime_destroy(rt);
}

/* graph/examples/preprocess.graph: uint8 images to normalised float32, every element bit
 * for bit (float)pixel - mean[c]) / std[c]; chunking is not possible (normalize is not
 * elementwise), so whole images. On the backend `backend`. */
static void preprocess_example(gr_backend backend)
{
    static const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f,
                                                                        57.375f};
    const uint64_t count = 6, elems = 3 * 641 * 480;
    gr_runtime *rt = gr_test_runtime((gr_test_shape){.backend = backend, .budget = 64u << 20});
    gr_tensor t[6];
    gr_error_info err;
    gr_port_info port;
    gr_graph *g;
    gr_job *job;

    if (gr_graph_load("graph/examples/preprocess.graph", &g, &err) != GR_OK)
        GR_TEST_FAIL("%s", err.message);
    ASSERT_STATUS(gr_graph_port_get(g, 0, 0, &port), GR_OK);
    ASSERT_EQ(port.dtype, GR_DTYPE_UINT8);
    ASSERT_STATUS(gr_graph_port_get(g, 1, 0, &port), GR_OK);
    ASSERT_EQ(port.dtype, GR_DTYPE_FLOAT32);
    ASSERT_STATUS(gr_graph_port_get(g, 0, 1, &port), GR_OK);
    ASSERT_EQ_U64(port.fixed_elems, 3);
    for (uint64_t i = 0; i < count; i++) {
        uint8_t *img = malloc(elems);
        float *out = malloc(elems * 4);

        ASSERT_TRUE(img != NULL && out != NULL);
        fill(GR_DTYPE_UINT8, img, elems, i);
        memset(out, 0xff, elems * 4);
        t[i] = (gr_tensor){{img, mean, sd}, {out}, elems, 3, {480, 641, 3}};
    }
    if (gr_job_submit(rt, g, t, count, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        gr_job_error_get(job, &err);
        GR_TEST_FAIL("index %llu: %s", (unsigned long long)err.index, err.message);
    }
    gr_job_destroy(job);
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *img = t[i].in[0];
        const float *out = t[i].out[0];

        for (uint64_t e = 0; e < elems; e++)
            ASSERT_FLOAT_BITS_EQ(out[e], ((float)img[e] - mean[e % 3]) / sd[e % 3]);
        free((void *)t[i].in[0]);
        free(t[i].out[0]);
    }
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

static void preprocess_example_on_the_host(void)
{
    preprocess_example(GR_BACKEND_HOST);
}

/* ---- the same on the GPU ------------------------------------------------------------- */

/* A type's bit pattern as an integer that orders like the value (sign-magnitude folded), so
 * that the difference of two is their distance in ulps. */
static int64_t ordered(gr_dtype t, const void *p, uint64_t i)
{
    int64_t v, sign;

    switch (gr_dtype_size(t)) {
    case 2: v = ((const uint16_t *)p)[i], sign = 1ll << 15; break;
    case 4: v = ((const uint32_t *)p)[i], sign = 1ll << 31; break;
    case 8: {
        uint64_t u = ((const uint64_t *)p)[i];
        return (u >> 63) ? -(int64_t)(u & ~(1ull << 63)) : (int64_t)u;
    }
    default: return ((const uint8_t *)p)[i];
    }
    if (!gr__dtype_is_float(t))
        return t == GR_DTYPE_INT32 ? (int64_t)(int32_t)(uint32_t)v : v;
    return (v & sign) ? -(v & (sign - 1)) : v;
}

/* One kernel version on the CUDA runtime `rt` over `n` elements of pinned `x` (and `y`),
 * against its CPU version on the same data: bit for bit, or within `ulps` of the output
 * type; NaN equals NaN for the float32 and float64 outputs (payloads are not promised). */
static void expect_cuda_matches_cpu(gr_runtime *rt, const char *kernel, const gr_dtype *in_t,
                                    uint32_t n_in, gr_dtype out_t, const double *s,
                                    uint32_t n_s, const void *x, const void *y, uint64_t n,
                                    int ulps)
{
    const char *names[2] = {"a", "b"};
    const gr_kernel *k = gr__kernel_find_typed(kernel, in_t, n_in, out_t);
    gr_buffer_desc d = GR_BUFFER_DESC_INIT;
    uint32_t os = gr_dtype_size(out_t);
    void *out = NULL, *want = malloc(n * os);
    gr_kernel_args a = {.out = want, .in = {x, y}, .n = n, .in_n = {n, n}};
    gr_tensor t = {{x, n_in > 1 ? y : NULL}, {NULL}, n, 0, {0}};
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    ASSERT_TRUE(k != NULL && want != NULL);
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    for (uint32_t i = 0; i < n_in; i++) {
        d.dtype = in_t[i];
        ASSERT_STATUS(gr_graph_add_buffer_desc(g, names[i], &d), GR_OK);
        ASSERT_STATUS(gr_graph_add_h2d(g, i ? "load1" : "load0", i, names[i]), GR_OK);
    }
    d.dtype = out_t;
    ASSERT_STATUS(gr_graph_add_buffer_desc(g, "o", &d), GR_OK);
    if (gr_graph_add_kernel_f64(g, "k", kernel, names, n_in, "o", s, n_s) != GR_OK)
        GR_TEST_FAIL("%s: %s", kernel, GRAPH_ERROR(g));
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "o", 0), GR_OK);
    for (uint32_t i = 0; i < n_in; i++)
        ASSERT_STATUS(gr_graph_add_dep(g, i ? "load1" : "load0", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    if (gr_graph_finalize(g) != GR_OK)
        GR_TEST_FAIL("%s: finalize: %s", kernel, GRAPH_ERROR(g));
    ASSERT_STATUS(gr_host_alloc(n * os, &out), GR_OK);
    memset(out, 0xa5, n * os);
    t.out[0] = out;
    if (gr_job_submit(rt, g, &t, 1, NULL, &job, &err) != GR_OK)
        GR_TEST_FAIL("%s: submit: %s", kernel, err.message);
    if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK) {
        gr_job_error_get(job, &err);
        GR_TEST_FAIL("%s: %s", kernel, err.message);
    }
    gr_job_destroy(job);
    gr_graph_destroy(g);
    for (uint32_t i = 0; i < n_s; i++) {
        if (k->def.scalar_dtype[i] == GR_DTYPE_FLOAT64)
            a.s[i].f64 = s[i];
        else
            a.s[i].f32 = (float)s[i];
    }
    k->def.cpu(&a, k->def.user);
    for (uint64_t i = 0; i < n; i++) {
        double gv = gr__load_f64(out_t, out, i), wv = gr__load_f64(out_t, want, i);
        int64_t diff = ordered(out_t, out, i) - ordered(out_t, want, i);
        bool any_nan = (out_t == GR_DTYPE_FLOAT32 || out_t == GR_DTYPE_FLOAT64) && isnan(gv) &&
                       isnan(wv);

        if (!any_nan && (diff < -ulps || diff > ulps))
            GR_TEST_FAIL("%s (%s -> %s): element %llu (x %.17g): GPU %.17g, CPU %.17g "
                         "(%lld apart, %d allowed)",
                         kernel, gr_dtype_name(in_t[0]), gr_dtype_name(out_t),
                         (unsigned long long)i, gr__load_f64(in_t[0], x, i), gv, wv,
                         (long long)diff, ulps);
    }
    gr_host_free(out);
    free(want);
}

/* n elements of type t in pinned memory: random finite values of many magnitudes, with
 * `specials` also every bit pattern class (NaN, infinities, subnormals, signed zeros). */
static void *pinned_values(gr_dtype t, uint64_t n, uint64_t seed, bool specials)
{
    static const double edge[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0.5, 1.5, 2.5, -2.5,
                                  255.5, 65504, 65520, 1e-7, 1e-40, 3e38, 2147483647.0,
                                  -2147483649.0, 16777217.0};
    void *p = NULL;
    uint64_t state = seed;

    ASSERT_STATUS(gr_host_alloc(n * gr_dtype_size(t), &p), GR_OK);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = gr_test_rand(&state);
        double v = ldexp((double)(r >> 11) / (double)(1ull << 53) - 0.5, (int)(r % 40) - 20);

        if (specials && i < sizeof(edge) / sizeof(edge[0]))
            v = edge[i];
        if (specials && i % 3 == 1 && gr_dtype_size(t) <= 4) { /* raw bits: every class */
            if (t == GR_DTYPE_FLOAT32 || t == GR_DTYPE_INT32)
                ((uint32_t *)p)[i] = (uint32_t)r;
            else if (gr_dtype_size(t) == 2)
                ((uint16_t *)p)[i] = (uint16_t)r;
            else
                ((uint8_t *)p)[i] = (uint8_t)r;
            continue;
        }
        if (t == GR_DTYPE_INT32)
            v = (double)(int32_t)(uint32_t)r;
        gr__store_cast(t, p, i, GR_DTYPE_FLOAT64, v);
    }
    return p;
}

static void cuda_typed_builtins_match_cpu(void)
{
    static const struct {
        const char *name;
        uint32_t n_in, n_s;
        double s[2];
        /* 0: exact operations. Else CUDA's bound from its programming guide plus the C
         * library's (each within about 1-2 ulp of the true value): expf 2 + 1, logf
         * 1 + 1, tanhf 2 + 2, sigmoid through expf and a division, powf 4 + 1. */
        int ulps;
    } ops[] = {
        {"mul", 1, 1, {1.01}, 0},        {"add", 1, 1, {-0.25}, 0},
        {"sub", 1, 1, {3.5}, 0},         {"div", 1, 1, {7.0}, 0},
        {"pow", 1, 1, {0.5}, 0},         {"pow", 1, 1, {2.0}, 0},
        {"pow", 1, 1, {1.7}, 5},         {"axpby", 2, 2, {2.0, -0.5}, 0},
        {"mul2", 2, 0, {0}, 0},          {"add2", 2, 0, {0}, 0},
        {"clamp", 1, 2, {-0.1, 0.2}, 0}, {"clamp", 1, 2, {0.0, 0.5}, 0},
        {"clamp", 1, 2, {-1.0, -0.0}, 0}, {"exp", 1, 0, {0}, 3},
        {"log", 1, 0, {0}, 2},           {"tanh", 1, 0, {0}, 4},
        {"sigmoid", 1, 0, {0}, 4},
    };
    static const gr_dtype types[] = {GR_DTYPE_FLOAT32, GR_DTYPE_FLOAT16, GR_DTYPE_BFLOAT16,
                                     GR_DTYPE_FLOAT64};
    const uint64_t n = 100003;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 256u << 20});
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        gr_dtype t = types[ti], in[2] = {t, t};
        void *x = pinned_values(t, n, 1 + ti, true), *y = pinned_values(t, n, 7 + ti, false);

        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
            expect_cuda_matches_cpu(rt, ops[i].name, in, ops[i].n_in, t, ops[i].s,
                                    ops[i].n_s, x, y, n, ops[i].ulps);
        gr_host_free(x);
        gr_host_free(y);
    }
    gr_runtime_destroy(rt);
}

/* Every cast on the GPU equals the CPU's bit for bit, on every class of input. */
static void cuda_casts_match_cpu(void)
{
    const uint64_t n = 200003;
    gr_runtime *rt;

    REQUIRE_GPU();
    rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 256u << 20});
    for (int from = 0; from < GR_DTYPE_COUNT_; from++) {
        void *x = pinned_values((gr_dtype)from, n, 100 + (uint64_t)from, true);

        for (int to = 0; to < GR_DTYPE_COUNT_; to++)
            expect_cuda_matches_cpu(rt, "cast", (gr_dtype[]){(gr_dtype)from}, 1, (gr_dtype)to,
                                    NULL, 0, x, NULL, n, 0);
        gr_host_free(x);
    }
    gr_runtime_destroy(rt);
}

/* The host backend's cases above on the GPU: whole tensors, chunks under a small budget and
 * batches of small tensors, from pinned and from pageable memory (staged). */
static void cuda_every_type_through_the_runtime(void)
{
    static const uint64_t whole[] = {1, 3, 1000, 4097, 65539}, big[] = {2000003, 1310720},
                          small[] = {1, 2, 3, 5, 7, 63, 64, 65, 127, 255, 257, 1001};
    gr_runtime *rt;

    REQUIRE_GPU();
    for (int pinned = 0; pinned < 2; pinned++) {
        rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 64u << 20,
                                             .whole_tensors = true});
        for (size_t k = 0; k < sizeof(all_types) / sizeof(all_types[0]); k++)
            run_typed(rt, all_types[k], 10, whole, 5, pinned);
        gr_runtime_destroy(rt);
        rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 4u << 20});
        for (size_t k = 0; k < sizeof(all_types) / sizeof(all_types[0]); k++) {
            run_typed(rt, all_types[k], 4, big, 2, pinned);
            run_typed(rt, all_types[k], 3000, small, 12, pinned);
        }
        gr_runtime_destroy(rt);
    }
}

static void cuda_preprocess_example(void)
{
    REQUIRE_GPU();
    preprocess_example(GR_BACKEND_CUDA);
}

GR_TEST_MAIN(GR_TEST(names_sizes_and_parsing), GR_TEST(safe_casts_are_numpys),
             GR_TEST(float16_conversions_match_the_compiler),
             GR_TEST(bfloat16_conversions_match_a_reference), GR_TEST(casts_follow_the_rules),
             GR_TEST(kernel_versions_by_type), GR_TEST(clamp_of_nans_and_zeros),
             GR_TEST(every_type_whole),
             GR_TEST(every_type_chunked), GR_TEST(every_type_batched),
             GR_TEST(cuda_typed_builtins_match_cpu), GR_TEST(cuda_casts_match_cpu),
             GR_TEST(cuda_every_type_through_the_runtime),
             GR_TEST(preprocess_example_on_the_host), GR_TEST(cuda_preprocess_example))

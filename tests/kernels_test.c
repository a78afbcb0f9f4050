/*
 * kernels_test.c - CPU kernels against their definitions, and the seed kernel against the
 * composition of the kernels it fuses, bit for bit.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "tests/testing.h"

#define N 4099 /* prime: no accidental alignment */

static float data[N];

static void fill(uint64_t seed)
{
    uint64_t s = seed;

    for (int i = 0; i < N; i++)
        data[i] = (float)(gr_test_rand(&s) >> 40) / (float)(1 << 24); /* [0, 1) */
    data[0] = 0.0f;
    data[1] = 1.0f;
    data[2] = 1e-30f;
    data[3] = 3e30f;
}

static gr_kargs args1(const float *in, float *out, float s0)
{
    gr_kargs a;

    memset(&a, 0, sizeof(a));
    a.in[0] = in;
    a.out = out;
    a.n = N;
    a.s[0] = s0;
    return a;
}

static void run(const char *name, const gr_kargs *a)
{
    const gr_kernel_def *k = gr_kernel_find(name);

    ASSERT_TRUE(k != NULL);
    k->cpu(a);
}

static void registry_lookup(void)
{
    ASSERT_TRUE(gr_kernel_find("seed") != NULL);
    ASSERT_TRUE(gr_kernel_find("mul") != NULL);
    ASSERT_TRUE(gr_kernel_find("nope") == NULL);
    /* Test-only kernels exist only with GR_TEST_KERNELS=1 (not set for this test). */
    ASSERT_TRUE(getenv("GR_TEST_KERNELS") == NULL);
    ASSERT_TRUE(gr_kernel_find("fault") == NULL);
    ASSERT_TRUE(gr_kernel_find(NULL) == NULL);
    ASSERT_TRUE(gr_kernel_def_at(gr_kernel_count()) == NULL);
    for (uint32_t i = 0; i < gr_kernel_count(); i++)
        ASSERT_PTR_EQ(gr_kernel_find(gr_kernel_def_at(i)->name), gr_kernel_def_at(i));
}

static void elementwise_kernels_match_definitions(void)
{
    static float out[N], y[N];
    volatile float two = 2.0f, three = 3.0f; /* keep the reference from being folded */
    gr_kargs a;

    fill(1);
    for (int i = 0; i < N; i++)
        y[i] = data[(i * 7) % N];

    a = args1(data, out, 1.5f);
    run("mul", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] * 1.5f);
    a = args1(data, out, -0.25f);
    run("add", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] + -0.25f);
    a = args1(data, out, 0.5f);
    run("pow", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], sqrtf(data[i]));
    a = args1(data, out, two);
    run("pow", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] * data[i]);
    a = args1(data, out, three);
    run("pow", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], powf(data[i], 3.0f));
    a = args1(data, out, 2.0f);
    a.in[1] = y;
    a.s[1] = -3.0f;
    run("axpby", &a);
    for (int i = 0; i < N; i++) {
        float ax = 2.0f * data[i], by = -3.0f * y[i];
        ASSERT_FLOAT_BITS_EQ(out[i], ax + by);
    }
}

/* The fused seed kernel equals ten rounds of the separate mul, add and pow kernels (what
 * the PyTorch seed does), bit for bit, also in place. */
static void seed_equals_composition(void)
{
    static float fused[N], step[N];
    gr_kargs a;

    for (uint64_t trial = 0; trial < 4; trial++) {
        fill(100 + trial);
        a = args1(data, fused, 0);
        run("seed", &a);
        memcpy(step, data, sizeof(step));
        for (int r = 0; r < GR_SEED_ROUNDS; r++) {
            a = args1(step, step, GR_SEED_MUL);
            run("mul", &a);
            a = args1(step, step, GR_SEED_ADD);
            run("add", &a);
            a = args1(step, step, 0.5f);
            run("pow", &a);
        }
        for (int i = 0; i < N; i++) {
            if (memcmp(&fused[i], &step[i], sizeof(float)) != 0)
                GR_TEST_FAIL("element %d: fused %a, composed %a", i, fused[i], step[i]);
            ASSERT_FLOAT_BITS_EQ(fused[i], gr_seed_ref(data[i]));
        }
        /* In place gives the same. */
        a = args1(data, data, 0);
        run("seed", &a);
        for (int i = 0; i < N; i++)
            ASSERT_FLOAT_BITS_EQ(data[i], fused[i]);
    }
    /* A known value: the fixed point of x = sqrt(1.01 x + 1.01) is about 1.6287. */
    ASSERT_DOUBLE_NEAR(gr_seed_ref(1.0f), 1.6287f, 1e-2f);
}

GR_TEST_MAIN(GR_TEST(registry_lookup), GR_TEST(elementwise_kernels_match_definitions),
             GR_TEST(seed_equals_composition))

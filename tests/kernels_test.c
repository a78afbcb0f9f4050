/*
 * kernels_test.c - CPU kernels against their definitions, and the seed kernel against the
 * composition of the kernels it fuses, bit for bit.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
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

static gr_kernel_args args1(const float *in, float *out, float s0)
{
    gr_kernel_args a;

    memset(&a, 0, sizeof(a));
    a.in[0] = in;
    a.out = out;
    a.n = N;
    a.in_n[0] = N;
    a.s[0].f32 = s0;
    return a;
}

static void run(const char *name, const gr_kernel_args *a)
{
    const gr_kernel *k = gr__kernel_find(name);

    ASSERT_TRUE(k != NULL);
    k->def.cpu(a, k->def.user);
}

static void registry_lookup(void)
{
    static const char *const builtins[] = {
        "mul", "add", "pow", "axpby", "seed", "sub", "div", "exp", "log",
        "tanh", "sigmoid", "clamp", "mul2", "add2", "softmax", "sum", "normalize",
    };
    uint32_t n = sizeof(builtins) / sizeof(builtins[0]);

    /* The built-ins come first, in their table's order, each complete: both
     * implementations, float32 throughout; elementwise all but the last three. Then the
     * overloads: 13 elementwise kernels for float16, bfloat16 and float64, and `cast`
     * between every pair of the 6 types. */
    ASSERT_EQ(gr_kernel_count(), n + 13 * 3 + 6 * 6);
    for (uint32_t i = 0; i < n; i++) {
        const gr_kernel *k = gr__kernel_at(i);

        ASSERT_TRUE(k != NULL);
        ASSERT_STR_CONTAINS(k->name, builtins[i]);
        ASSERT_EQ(strlen(k->name), strlen(builtins[i]));
        ASSERT_PTR_EQ(gr__kernel_find(builtins[i]), k);
        ASSERT_TRUE(k->def.cpu != NULL);
        ASSERT_EQ(k->def.cuda_kind, GR_CUDA_ENTRY);
        ASSERT_TRUE(k->def.cuda != NULL);
        ASSERT_EQ(k->def.elementwise, i < n - 3);
        ASSERT_EQ(k->def.out_dtype, GR_DTYPE_FLOAT32);
        ASSERT_EQ(k->id, i + 1);
    }
    ASSERT_TRUE(gr__kernel_find("nope") == NULL);
    /* The test-only fault kernel is the tests' own (tests/cuda_fault_test.c registers it). */
    ASSERT_TRUE(gr__kernel_find("fault") == NULL);
    ASSERT_TRUE(gr__kernel_find(NULL) == NULL);
    ASSERT_TRUE(gr__kernel_at(gr_kernel_count()) == NULL);
}

static void elementwise_kernels_match_definitions(void)
{
    static float out[N], y[N];
    volatile float two = 2.0f, three = 3.0f; /* keep the reference from being folded */
    gr_kernel_args a;

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
    a.in_n[1] = N;
    a.s[1].f32 = -3.0f;
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
    gr_kernel_args a;

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
            ASSERT_FLOAT_BITS_EQ(fused[i], gr__seed_ref(data[i]));
        }
        /* In place gives the same. */
        a = args1(data, data, 0);
        run("seed", &a);
        for (int i = 0; i < N; i++)
            ASSERT_FLOAT_BITS_EQ(data[i], fused[i]);
    }
    /* A known value: the fixed point of x = sqrt(1.01 x + 1.01) is about 1.6287. */
    ASSERT_DOUBLE_NEAR(gr__seed_ref(1.0f), 1.6287f, 1e-2f);
}

/* A user's kernel: out = 2x, on the CPU only. */
static void twice(const gr_kernel_args *a, void *user)
{
    const float *x = a->in[0];
    float *out = a->out;

    for (uint64_t i = 0; i < a->n; i++)
        out[i] = 2.0f * x[i] + *(const float *)user;
}

static gr_kernel_def twice_def(const char *name)
{
    static const float zero = 0.0f;
    gr_kernel_def d = GR_KERNEL_DEF_INIT;

    d.name = name;
    d.doc = "out = 2 x";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = twice;
    d.user = (void *)&zero;
    return d;
}

/* A user's kernel goes into the same registry as the built-ins, after them, and is found,
 * listed and run like them; its definition is copied. */
static void user_kernel_registered(void)
{
    char name[] = "twice";
    gr_kernel_def d = twice_def(name);
    static float out[N];
    const gr_kernel *k;
    gr_kernel_info info = GR_KERNEL_INFO_INIT;
    gr_kernel_args a;
    gr_error_info err;
    uint32_t before = gr_kernel_count();

    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    name[0] = 'X'; /* the registry holds its own copy */
    d.name = NULL;
    ASSERT_EQ(gr_kernel_count(), before + 1);
    k = gr__kernel_find("twice");
    ASSERT_TRUE(k != NULL);
    ASSERT_PTR_EQ(gr__kernel_at(before), k);
    ASSERT_GT(k->id, before);
    ASSERT_STATUS(gr_kernel_info_get(before, &info), GR_OK);
    ASSERT_STR_CONTAINS(info.name, "twice");
    ASSERT_STR_CONTAINS(info.doc, "out = 2 x");
    ASSERT_EQ(info.n_inputs, 1);
    ASSERT_EQ(info.n_scalars, 0);
    ASSERT_TRUE(info.elementwise);
    fill(7);
    a = args1(data, out, 0);
    run("twice", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], 2.0f * data[i]);
    /* A second registration of the name, and a built-in's name, are refused. */
    d = twice_def("twice");
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "kernel 'twice' is already registered");
    d.name = "seed";
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "kernel 'seed' is already registered");
    ASSERT_EQ(gr_kernel_count(), before + 1);
}

/* Every malformed definition is refused with its reason, and nothing is registered. */
static void bad_definitions_refused(void)
{
    char long_name[GR_NAME_MAX + 2], long_doc[200];
    uint32_t before = gr_kernel_count();
    gr_error_info err;
    gr_kernel_def d;

    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    memset(long_doc, 'd', sizeof(long_doc) - 1);
    long_doc[sizeof(long_doc) - 1] = '\0';

    ASSERT_STATUS(gr_kernel_register(NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "NULL");
    memset(&d, 0, sizeof(d));
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "GR_KERNEL_DEF_INIT");

#define REFUSED(change, text)                                                               \
    do {                                                                                    \
        d = twice_def("fine");                                                              \
        change;                                                                             \
        ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);               \
        ASSERT_STR_CONTAINS(err.message, text);                                             \
    } while (0)
    REFUSED(d.name = NULL, "kernel name must be");
    REFUSED(d.name = "", "kernel name must be");
    REFUSED(d.name = "9lives", "starting with a letter or '_'");
    REFUSED(d.name = "a b", "kernel name must be");
    REFUSED(d.name = long_name, "kernel name must be");
    REFUSED(d.n_inputs = GR_MAX_KERNEL_INPUTS + 1, "inputs (at most");
    REFUSED(d.n_scalars = GR_MAX_SCALARS + 1, "scalars (at most");
    REFUSED(d.out_dtype = GR_DTYPE_COUNT_, "unknown output element type");
    REFUSED(d.in_dtype[0] = (gr_dtype)77, "unknown element type 77 of input 0");
    REFUSED((d.n_scalars = 1, d.scalar_dtype[0] = (gr_dtype)-1), "of scalar 0");
    REFUSED(d.cuda_kind = (gr_cuda_kind)9, "unknown cuda_kind 9");
    REFUSED(d.cuda_kind = GR_CUDA_KERNEL, "cuda must be set exactly when");
    REFUSED(d.cuda = (const void *)twice, "cuda must be set exactly when");
    REFUSED((d.cuda_kind = GR_CUDA_ENTRY, d.cuda = (const void *)twice, d.cuda_block = 1025),
            "cuda_block 1025 is over 1024");
    REFUSED(d.cpu = NULL, "neither a CPU nor a CUDA implementation");
    REFUSED(d.doc = long_doc, "doc is longer than");
#undef REFUSED
    ASSERT_EQ(gr_kernel_count(), before);
    ASSERT_TRUE(gr__kernel_find("fine") == NULL);
    /* A definition that names the right things registers (the checks above are not too
     * strict): the name they all used. */
    d = twice_def("fine");
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
}

#define RACERS 8
#define EACH 40

static pthread_barrier_t race_start;

static void *race_register(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    gr_error_info err;
    int *won = calloc(1, sizeof(int));

    pthread_barrier_wait(&race_start);
    for (int i = 0; i < EACH; i++) {
        char name[32];
        gr_kernel_def d;

        snprintf(name, sizeof(name), "k%u_%d", (unsigned)t, i);
        d = twice_def(name);
        if (gr_kernel_register(&d, &err) != GR_OK)
            return NULL;
        /* Every thread tries the contested name once, midway. */
        if (i == EACH / 2) {
            d = twice_def("contested");
            *won = gr_kernel_register(&d, &err) == GR_OK;
        }
    }
    return won;
}

/* Registration from many threads at once: every unique name is taken exactly once, the
 * contested one by exactly one thread, and lookups during registration see whole entries. */
static void concurrent_registration(void)
{
    pthread_t th[RACERS];
    uint32_t before = gr_kernel_count(), seen = 0, last = before;
    int winners = 0;

    ASSERT_EQ(pthread_barrier_init(&race_start, NULL, RACERS + 1), 0);
    for (uintptr_t t = 0; t < RACERS; t++)
        ASSERT_EQ(pthread_create(&th[t], NULL, race_register, (void *)t), 0);
    pthread_barrier_wait(&race_start);
    /* Lookups while the racers register: the newest entry is always whole. */
    while (gr_kernel_count() < before + RACERS * EACH + 1) {
        uint32_t n = gr_kernel_count();
        const gr_kernel *k = gr__kernel_at(n - 1);

        ASSERT_TRUE(k != NULL && k->def.name == k->name);
        if (n > before) {
            ASSERT_TRUE(k->def.cpu == twice && strlen(k->name) > 1);
            seen += n != last;
        }
        last = n;
    }
    for (int t = 0; t < RACERS; t++) {
        void *won;

        ASSERT_EQ(pthread_join(th[t], &won), 0);
        ASSERT_TRUE(won != NULL);
        winners += *(int *)won;
        free(won);
    }
    ASSERT_EQ(pthread_barrier_destroy(&race_start), 0);
    printf("    looked at the registry %u times while it grew\n", seen);
    ASSERT_EQ(winners, 1);
    ASSERT_EQ(gr_kernel_count(), before + RACERS * EACH + 1);
    for (int t = 0; t < RACERS; t++)
        for (int i = 0; i < EACH; i++) {
            char name[32];

            snprintf(name, sizeof(name), "k%d_%d", t, i);
            ASSERT_TRUE(gr__kernel_find(name) != NULL);
        }
    /* Ids are unique. */
    for (uint32_t i = 1; i < gr_kernel_count(); i++)
        ASSERT_GT(gr__kernel_at(i)->id, gr__kernel_at(i - 1)->id);
}

/* The other elementwise built-ins against their formulas (the same C functions: what this
 * checks is each kernel's plumbing, its scalars and its second input). */
static void more_elementwise_kernels(void)
{
    static float out[N], y[N], pos[N];
    gr_kernel_args a;

    fill(11);
    for (int i = 0; i < N; i++) {
        y[i] = data[(i * 13) % N] - 0.5f;
        pos[i] = data[i] + 0.125f; /* > 0, for log */
    }
    a = args1(data, out, 0.75f);
    run("sub", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] - 0.75f);
    a = args1(data, out, 3.0f);
    run("div", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] / 3.0f);
    a = args1(y, out, 0);
    run("exp", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], expf(y[i]));
    a = args1(pos, out, 0);
    run("log", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], logf(pos[i]));
    a = args1(y, out, 0);
    run("tanh", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], tanhf(y[i]));
    run("sigmoid", &a);
    for (int i = 0; i < N; i++) {
        ASSERT_FLOAT_BITS_EQ(out[i], 1.0f / (1.0f + expf(-y[i])));
        ASSERT_TRUE(out[i] >= 0.0f && out[i] <= 1.0f);
    }
    a = args1(y, out, -0.25f);
    a.s[1].f32 = 0.25f;
    run("clamp", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], (y[i] < -0.25f ? -0.25f : y[i] > 0.25f ? 0.25f : y[i]));
    a = args1(data, out, 0);
    a.in[1] = y;
    a.in_n[1] = N;
    run("mul2", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] * y[i]);
    run("add2", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], data[i] + y[i]);
}

/* softmax over rows of the last dimension, against a reference in double; one row when
 * the tensor has no shape. */
static void softmax_rows(void)
{
    static const uint64_t cols_of[] = {1, 7, 4099};
    static float out[N];

    fill(12);
    for (size_t c = 0; c < sizeof(cols_of) / sizeof(cols_of[0]); c++) {
        uint64_t cols = cols_of[c], rows = N / cols, n = rows * cols;
        gr_kernel_args a = args1(data, out, 0);

        a.n = a.in_n[0] = n;
        a.rank = 2;
        a.shape[0] = rows;
        a.shape[1] = cols;
        if (cols == N)
            a.rank = 0; /* the whole tensor, one row */
        run("softmax", &a);
        for (uint64_t r = 0; r < rows; r++) {
            double max = data[r * cols], sum = 0, total = 0;

            for (uint64_t j = 0; j < cols; j++)
                max = fmax(max, data[r * cols + j]);
            for (uint64_t j = 0; j < cols; j++)
                sum += exp(data[r * cols + j] - max);
            for (uint64_t j = 0; j < cols; j++) {
                double want = exp(data[r * cols + j] - max) / sum, got = out[r * cols + j];

                if (fabs(got - want) > 1e-6 * want + 1e-30)
                    GR_TEST_FAIL("%llu columns, row %llu, column %llu: %.9g, want %.9g",
                                 (unsigned long long)cols, (unsigned long long)r,
                                 (unsigned long long)j, got, want);
                total += got;
            }
            ASSERT_TRUE(fabs(total - 1.0) < 1e-5);
        }
    }
}

/* sum writes one element, the tensor's sum (in double, rounded once). */
static void sum_of_tensor(void)
{
    float out[2] = {-1.0f, -1.0f};
    gr_kernel_args a;
    double want = 0;

    fill(13);
    for (int i = 0; i < N; i++)
        want += data[i];
    a = args1(data, out, 0);
    a.n = 1;
    run("sum", &a);
    ASSERT_FLOAT_BITS_EQ(out[0], (float)want);
    ASSERT_FLOAT_BITS_EQ(out[1], -1.0f); /* one element, no more */
}

/* normalize: (x - mean[c]) / std[c] with c = i % C, channels last. */
static void normalize_per_channel(void)
{
    static float out[N];
    const float mean[3] = {0.25f, 0.5f, 0.75f}, sd[3] = {2.0f, 0.5f, 4.0f};
    gr_kernel_args a;

    fill(14);
    a = args1(data, out, 0);
    a.in[1] = mean;
    a.in[2] = sd;
    a.in_n[1] = a.in_n[2] = 3;
    run("normalize", &a);
    for (int i = 0; i < N; i++)
        ASSERT_FLOAT_BITS_EQ(out[i], (data[i] - mean[i % 3]) / sd[i % 3]);
}

GR_TEST_MAIN(GR_TEST(registry_lookup), GR_TEST(elementwise_kernels_match_definitions),
             GR_TEST(seed_equals_composition), GR_TEST(user_kernel_registered),
             GR_TEST(bad_definitions_refused), GR_TEST(concurrent_registration),
             GR_TEST(more_elementwise_kernels), GR_TEST(softmax_rows), GR_TEST(sum_of_tensor),
             GR_TEST(normalize_per_channel))

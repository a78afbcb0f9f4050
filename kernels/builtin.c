/*
 * builtin.c - the built-in kernels: one table, each row a complete definition, registered
 * through the registry's own path (registry.c) as a user's kernel would be.
 *
 * Adding a built-in: its CPU version in cpu.c, its CUDA version in builtin_cuda.cu, both
 * declared in builtin.h, a row here, and a test in tests/kernels_test.c (CPU) and
 * tests/cuda_test.c (both agree).
 */

#include "kernels/builtin.h"
#include "kernels/kernels.h"
#include "kernels/typed.h"

typedef struct builtin {
    const char *name;
    uint32_t n_inputs, n_scalars;
    int elementwise;
    gr_out_size out_size;
    uint32_t small_inputs;
    uint32_t block, max_blocks; /* the launch rule; 0: the defaults */
    gr_kernel_cpu_fn cpu;
    void (*cuda)(gr_kernel_args);
    const char *doc;
    int typed; /* a gr_typed_op: also for float16, bfloat16 and float64 (typed.h); or -1 */
} builtin;

/* An elementwise row: the default launch rule, no small inputs, and versions for the other
 * float types. */
#define EW(name, in, sc, doc)                                                               \
    {#name, in, sc, 1, GR_OUT_ELEMS, 0, 0, 0, gr__cpu_##name, gr__cuda_##name, doc, GR_OP_##name}

/* GR_OP_##name for EW's rows (typed.h spells them in capitals). */
#define GR_OP_mul GR_OP_MUL
#define GR_OP_add GR_OP_ADD
#define GR_OP_pow GR_OP_POW
#define GR_OP_axpby GR_OP_AXPBY
#define GR_OP_sub GR_OP_SUB
#define GR_OP_div GR_OP_DIV
#define GR_OP_exp GR_OP_EXP
#define GR_OP_log GR_OP_LOG
#define GR_OP_tanh GR_OP_TANH
#define GR_OP_sigmoid GR_OP_SIGMOID
#define GR_OP_clamp GR_OP_CLAMP
#define GR_OP_mul2 GR_OP_MUL2
#define GR_OP_add2 GR_OP_ADD2
#define GR_OP_seed (-1) /* the seed workload is float32's */

static const builtin table[] = {
    EW(mul, 1, 1, "out = x * s0"),
    EW(add, 1, 1, "out = x + s0"),
    EW(pow, 1, 1, "out = pow(x, s0); s0 = 0.5 is sqrt, as in PyTorch"),
    EW(axpby, 2, 2, "out = s0 * x + s1 * y"),
    EW(seed, 1, 0, "ten rounds of x = pow(x * 1.01 + 1.01, 0.5), fused"),
    EW(sub, 1, 1, "out = x - s0"),
    EW(div, 1, 1, "out = x / s0"),
    EW(exp, 1, 0, "out = exp(x)"),
    EW(log, 1, 0, "out = log(x)"),
    EW(tanh, 1, 0, "out = tanh(x)"),
    EW(sigmoid, 1, 0, "out = 1 / (1 + exp(-x))"),
    EW(clamp, 1, 2, "out = min(max(x, s0), s1)"),
    EW(mul2, 2, 0, "out = x * y"),
    EW(add2, 2, 0, "out = x + y"),
    /* Not elementwise: each sees whole tensors (and their shapes). */
    {"softmax", 1, 0, 0, GR_OUT_ELEMS, 0, 256, 0, gr__cpu_softmax, gr__cuda_softmax,
     "softmax of each row of the last dimension (the whole tensor without a shape)", -1},
    {"sum", 1, 0, 0, GR_OUT_ONE, 0, 1024, 1, gr__cpu_sum, gr__cuda_sum,
     "out[0] = the sum of the tensor, accumulated in double", -1},
    {"normalize", 3, 0, 0, GR_OUT_ELEMS, 0x6, 0, 0, gr__cpu_normalize, gr__cuda_normalize,
     "out = (x - mean[c]) / std[c], c = i % C: per channel, channels last (mean, std: C each)",
     -1},
};

/* The other float types' versions of row `b`, overloads of its name. */
static void register_typed(const builtin *b)
{
    static gr_typed_kernel users[GR_OP_COUNT_][GR_DTYPE_COUNT_];
    static const gr_dtype types[] = {GR_DTYPE_FLOAT16, GR_DTYPE_BFLOAT16, GR_DTYPE_FLOAT64};

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        gr_dtype t = types[i];
        gr_typed_kernel *u = &users[b->typed][t];
        gr_kernel_def d = GR_KERNEL_DEF_INIT;
        gr_error_info err;

        u->op = (gr_typed_op)b->typed;
        u->type = t;
        d.name = b->name;
        d.doc = b->doc;
        d.n_inputs = b->n_inputs;
        d.n_scalars = b->n_scalars;
        d.elementwise = 1;
        d.out_dtype = t;
        for (uint32_t k = 0; k < b->n_inputs; k++)
            d.in_dtype[k] = t;
        for (uint32_t k = 0; k < b->n_scalars; k++)
            d.scalar_dtype[k] = t == GR_DTYPE_FLOAT64 ? GR_DTYPE_FLOAT64 : GR_DTYPE_FLOAT32;
        d.cpu = gr__cpu_typed;
        d.user = u;
        d.cuda_kind = GR_CUDA_ENTRY;
        d.cuda = gr__cuda_typed_entry(u->op, t);
        (void)gr__kernels_add_builtin(&d, &err);
    }
}

/* `cast` from every type to every type (the same type too: a copy). */
static void register_casts(void)
{
    static gr_cast_kernel users[GR_DTYPE_COUNT_][GR_DTYPE_COUNT_];

    for (int from = 0; from < GR_DTYPE_COUNT_; from++)
        for (int to = 0; to < GR_DTYPE_COUNT_; to++) {
            gr_cast_kernel *u = &users[from][to];
            gr_kernel_def d = GR_KERNEL_DEF_INIT;
            gr_error_info err;

            u->from = (gr_dtype)from;
            u->to = (gr_dtype)to;
            d.name = "cast";
            d.doc = "out = x converted to the output's element type (docs/GRAPH_SPEC.md)";
            d.n_inputs = 1;
            d.elementwise = 1;
            d.in_dtype[0] = u->from;
            d.out_dtype = u->to;
            d.cpu = gr__cpu_cast;
            d.user = u;
            d.cuda_kind = GR_CUDA_ENTRY;
            d.cuda = gr__cuda_cast_entry(u->from, u->to);
            (void)gr__kernels_add_builtin(&d, &err);
        }
}

void gr__kernels_register_builtins(void)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const builtin *b = &table[i];
        gr_kernel_def d = GR_KERNEL_DEF_INIT;
        gr_error_info err;

        /* Every type is float32, which is GR_DTYPE_FLOAT32 (0): the initializer's zeros. */
        d.name = b->name;
        d.doc = b->doc;
        d.n_inputs = b->n_inputs;
        d.n_scalars = b->n_scalars;
        d.elementwise = b->elementwise;
        d.out_size = b->out_size;
        d.small_inputs = b->small_inputs;
        d.cuda_block = b->block;
        d.cuda_max_blocks = b->max_blocks;
        d.cpu = b->cpu;
        d.cuda_kind = GR_CUDA_ENTRY;
        d.cuda = (const void *)b->cuda;
        /* Only a broken table is refused, and tests/kernels_test.c checks that every
         * built-in is there; the library prints nothing (docs/API.md, Conventions). */
        (void)gr__kernels_add_builtin(&d, &err);
    }
    /* The overloads after every float32 row, so that listings begin with those. */
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].typed >= 0)
            register_typed(&table[i]);
    register_casts();
}

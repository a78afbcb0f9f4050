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
} builtin;

/* An elementwise row: the default launch rule, no small inputs. */
#define EW(name, in, sc, doc)                                                               \
    {#name, in, sc, 1, GR_OUT_ELEMS, 0, 0, 0, gr_cpu_##name, gr_cuda_##name, doc}

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
    {"softmax", 1, 0, 0, GR_OUT_ELEMS, 0, 256, 0, gr_cpu_softmax, gr_cuda_softmax,
     "softmax of each row of the last dimension (the whole tensor without a shape)"},
    {"sum", 1, 0, 0, GR_OUT_ONE, 0, 1024, 1, gr_cpu_sum, gr_cuda_sum,
     "out[0] = the sum of the tensor, accumulated in double"},
    {"normalize", 3, 0, 0, GR_OUT_ELEMS, 0x6, 0, 0, gr_cpu_normalize, gr_cuda_normalize,
     "out = (x - mean[c]) / std[c], c = i % C: per channel, channels last (mean, std: C each)"},
};

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
}

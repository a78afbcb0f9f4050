/*
 * builtin.c - the built-in kernels: one table, each row a complete definition, registered
 * through the registry's own path (registry.c) as a user's kernel would be.
 *
 * Adding a built-in: its CPU version in cpu.c, its CUDA version in builtin_cuda.cu, both
 * declared in builtin.h, a row here, and a test in tests/kernels_test.c (CPU) and
 * tests/cuda_test.c (both agree).
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/builtin.h"
#include "kernels/kernels.h"

typedef struct builtin {
    const char *name;
    uint32_t n_inputs, n_scalars;
    gr_kernel_cpu_fn cpu;
    void (*cuda)(gr_kernel_args);
    const char *doc;
} builtin;

static const builtin table[] = {
    {"mul", 1, 1, gr_cpu_mul, gr_cuda_mul, "out = x * s0"},
    {"add", 1, 1, gr_cpu_add, gr_cuda_add, "out = x + s0"},
    {"pow", 1, 1, gr_cpu_pow, gr_cuda_pow, "out = pow(x, s0); s0 = 0.5 is sqrt, as in PyTorch"},
    {"axpby", 2, 2, gr_cpu_axpby, gr_cuda_axpby, "out = s0 * x + s1 * y"},
    {"seed", 1, 0, gr_cpu_seed, gr_cuda_seed,
     "ten rounds of x = pow(x * 1.01 + 1.01, 0.5), fused"},
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
        d.elementwise = 1;
        d.cpu = b->cpu;
        d.cuda_kind = GR_CUDA_ENTRY;
        d.cuda = (const void *)b->cuda;
        if (gr__kernels_add_builtin(&d, &err) != GR_OK) {
            /* Only a broken table can get here (it is checked by tests/kernels_test.c):
             * say so loudly, but leave the process to its owner. */
            fprintf(stderr, "graphrun: built-in kernel '%s' refused: %s\n", b->name,
                    err.message);
        }
    }
}

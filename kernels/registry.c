/*
 * registry.c - the table of built-in kernels, by name.
 *
 * Adding a kernel: its CPU version in cpu.c, its CUDA version and entry in kernels_cuda.cu,
 * a row here, and a test in tests/kernels_test.c that checks the two agree.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

void gr_cpu_mul(const gr_kargs *a);
void gr_cpu_add(const gr_kargs *a);
void gr_cpu_pow(const gr_kargs *a);
void gr_cpu_axpby(const gr_kargs *a);
void gr_cpu_seed(const gr_kargs *a);

void gr_cpu_fault(const gr_kargs *a);

static const gr_kernel_def kernels[] = {
    {"mul", 1, 1, true, gr_cpu_mul, "out = x * s0"},
    {"add", 1, 1, true, gr_cpu_add, "out = x + s0"},
    {"pow", 1, 1, true, gr_cpu_pow, "out = pow(x, s0); s0 = 0.5 is sqrt, as in PyTorch"},
    {"axpby", 2, 2, true, gr_cpu_axpby, "out = s0 * x + s1 * y"},
    {"seed", 1, 0, true, gr_cpu_seed, "ten rounds of x = pow(x * 1.01 + 1.01, 0.5), fused"},
    /* Test-only kernels: last, and visible only with GR_TEST_KERNELS=1 in the environment
     * (read once), so no production graph can name them. */
    {"fault", 1, 0, true, gr_cpu_fault,
     "test only: on CUDA, writes to an unmapped address (a sticky illegal-address error); "
     "on the CPU, does nothing"},
};

#define KERNEL_COUNT (sizeof(kernels) / sizeof(kernels[0]))
#define TEST_KERNELS 1 /* how many entries at the end are test-only */

static pthread_once_t test_once = PTHREAD_ONCE_INIT;
static uint32_t visible = KERNEL_COUNT - TEST_KERNELS;

static void read_test_switch(void)
{
    const char *v = getenv("GR_TEST_KERNELS");

    if (v != NULL && strcmp(v, "1") == 0)
        visible = KERNEL_COUNT;
}

uint32_t gr_kernel_count(void)
{
    pthread_once(&test_once, read_test_switch);
    return visible;
}

const gr_kernel_def *gr_kernel_find(const char *name)
{
    uint32_t n = gr_kernel_count();

    if (name == NULL)
        return NULL;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(kernels[i].name, name) == 0)
            return &kernels[i];
    return NULL;
}

const gr_kernel_def *gr_kernel_def_at(uint32_t i)
{
    return i < gr_kernel_count() ? &kernels[i] : NULL;
}

gr_status gr_kernel_info_get(uint32_t i, gr_kernel_info *out)
{
    const gr_kernel_def *k = gr_kernel_def_at(i);

    if (k == NULL || out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    out->name = k->name;
    out->n_inputs = k->n_inputs;
    out->n_scalars = k->n_scalars;
    out->elementwise = k->elementwise;
    out->doc = k->doc;
    return GR_OK;
}

/*
 * fault_kernel.cu - the tests' faulting kernel (fault_kernel.h), a GR_CUDA_ENTRY kernel of
 * the test binary's own, registered through gr_kernel_register.
 */
#include <graphrun.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "tests/fault_kernel.h"

extern "C" __global__ void gr_test_fault(gr_kernel_args a)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *(volatile float *)(uintptr_t)0x10 = (float)a.n;
}

static void cpu_nothing(const gr_kernel_args *a, void *user)
{
    (void)a;
    (void)user;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gr_status registered = GR_ERR_INTERNAL;
static gr_error_info why;

static void register_once(void)
{
    gr_kernel_def d = GR_KERNEL_DEF_INIT;

    d.name = "fault";
    d.doc = "test only: on CUDA, writes to an unmapped address; on the CPU, does nothing";
    d.n_inputs = 1;
    d.elementwise = 1;
    d.cpu = cpu_nothing;
    d.cuda_kind = GR_CUDA_ENTRY;
    d.cuda = (const void *)gr_test_fault;
    registered = gr_kernel_register(&d, &why);
}

extern "C" void gr_test_register_fault_kernel(void)
{
    pthread_once(&once, register_once);
    if (registered != GR_OK) {
        printf("FAIL: the fault kernel was refused: %s\n", why.message);
        fflush(stdout);
        _exit(1);
    }
}

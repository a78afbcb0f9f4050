/*
 * cuda/pinned.c - page-locked host memory through the CUDA runtime: what gr_host_alloc,
 * gr_host_register and their inverses use when a GPU is usable (runtime/hostmem.c).
 *
 * Allocations are portable (cudaHostAllocPortable, cudaHostRegisterPortable): pinned for
 * every context and device, since the workers that copy from them may each have their own.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "runtime/cuda/cuda.h"
#include "runtime/base/fault.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool have_gpu;

static void probe(void)
{
    int n = 0;

    have_gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    if (!have_gpu)
        cudaGetLastError();
}

static bool cuda_pinned_available(void)
{
    pthread_once(&probe_once, probe);
    return have_gpu;
}

static gr_status cuda_pinned_alloc(uint64_t bytes, void **out)
{
    if (cudaHostAlloc(out, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return GR_ERR_OUT_OF_MEMORY;
    }
    return GR_OK;
}

static void cuda_pinned_free(void *p)
{
    cudaFreeHost(p);
}

static gr_status cuda_pin(void *p, uint64_t bytes)
{
    cudaError_t e = gr__fault_hit(GR_FAULT_REGISTER)
                        ? cudaErrorMemoryAllocation
                        : cudaHostRegister(p, bytes, cudaHostRegisterPortable);

    if (e == cudaErrorHostMemoryAlreadyRegistered) {
        cudaGetLastError();
        return GR_ERR_INVALID_USAGE;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return e == cudaErrorMemoryAllocation ? GR_ERR_OUT_OF_MEMORY : GR_ERR_CUDA;
    }
    return GR_OK;
}

static gr_status cuda_unpin(void *p)
{
    cudaError_t e = cudaHostUnregister(p);

    if (e != cudaSuccess) {
        cudaGetLastError();
        return e == cudaErrorHostMemoryNotRegistered ? GR_ERR_INVALID_USAGE : GR_ERR_CUDA;
    }
    return GR_OK;
}

const gr_pinned_ops gr__cuda_pinned = {
    .available = cuda_pinned_available,
    .alloc = cuda_pinned_alloc,
    .free = cuda_pinned_free,
    .pin = cuda_pin,
    .unpin = cuda_unpin,
};

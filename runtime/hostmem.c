/*
 * hostmem.c - pinned host memory: allocation and registration (see graphrun.h).
 *
 * gr_host_alloc puts a one-page header in front of each allocation recording how it was
 * made (cudaHostAlloc, or posix_memalign where no GPU is usable), so gr_host_free needs no
 * runtime handle and works before, during and after any runtime's life.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fault.h"
#include "runtime/graphrun.h"

#define HEADER 4096u
#define HEADER_MAGIC 0x67724d454d4f5259ull /* "grMEMORY" */

typedef struct header {
    uint64_t magic;
    uint64_t bytes;
    int pinned;
} header;

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int have_gpu;

static void probe(void)
{
    int n = 0;

    have_gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    if (!have_gpu)
        cudaGetLastError();
}

static int gpu_usable(void)
{
    pthread_once(&probe_once, probe);
    return have_gpu;
}

gr_status gr_host_alloc(uint64_t bytes, void **out)
{
    void *base = NULL;
    header *h;
    int pinned = gpu_usable();

    if (out == NULL || bytes == 0 || bytes > UINT64_MAX - HEADER)
        return GR_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (gr__fault_hit(GR_FAULT_PIN))
        return GR_ERR_OUT_OF_MEMORY;
    if (pinned) {
        if (cudaHostAlloc(&base, bytes + HEADER, cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            return GR_ERR_OUT_OF_MEMORY;
        }
    } else if (posix_memalign(&base, HEADER, bytes + HEADER) != 0) {
        return GR_ERR_OUT_OF_MEMORY;
    }
    h = base;
    h->magic = HEADER_MAGIC;
    h->bytes = bytes;
    h->pinned = pinned;
    *out = (char *)base + HEADER;
    return GR_OK;
}

void gr_host_free(void *p)
{
    header *h;

    if (p == NULL)
        return;
    h = (header *)((char *)p - HEADER);
    if (h->magic != HEADER_MAGIC)
        return; /* not ours: leave it alone rather than corrupt the heap */
    h->magic = 0;
    if (h->pinned)
        cudaFreeHost(h);
    else
        free(h);
}

gr_status gr_host_register(void *p, uint64_t bytes)
{
    cudaError_t e;

    if (p == NULL || bytes == 0)
        return GR_ERR_INVALID_ARGUMENT;
    if (!gpu_usable())
        return GR_OK;
    e = gr__fault_hit(GR_FAULT_REGISTER) ? cudaErrorMemoryAllocation
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

gr_status gr_host_unregister(void *p)
{
    cudaError_t e;

    if (p == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    if (!gpu_usable())
        return GR_OK;
    e = cudaHostUnregister(p);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return e == cudaErrorHostMemoryNotRegistered ? GR_ERR_INVALID_USAGE : GR_ERR_CUDA;
    }
    return GR_OK;
}

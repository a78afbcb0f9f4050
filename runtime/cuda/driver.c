/*
 * cuda/driver.c - driver API entry points, loaded once (see driver.h).
 */
#include "runtime/cuda/driver.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>

#include "runtime/base/sync.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gr_cuda_driver driver;
static const gr_cuda_driver *loaded;
static char missing[96];

/* The CUDA version whose signatures driver.h declares (cuCtxCreate_v4 is 12.5+). */
#define DRIVER_API_VERSION 12050

static int load(const char *symbol, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;

    if (cudaGetDriverEntryPointByVersion(symbol, fn, DRIVER_API_VERSION, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || *fn == NULL) {
        cudaGetLastError();
        snprintf(missing, sizeof(missing), "%s", symbol);
        return 0;
    }
    return 1;
}

static void load_all(void)
{
#define LOAD(name) load(#name, (void **)&driver.name)
    if (LOAD(cuDeviceGet) && LOAD(cuCtxCreate) && LOAD(cuCtxDestroy) && LOAD(cuCtxSetCurrent) &&
        LOAD(cuMemCreate) && LOAD(cuMemRelease) && LOAD(cuMemAddressReserve) &&
        LOAD(cuMemAddressFree) && LOAD(cuMemMap) && LOAD(cuMemUnmap) && LOAD(cuMemSetAccess) &&
        LOAD(cuGetErrorName) && LOAD(cuGraphAddKernelNode) && LOAD(cuGraphExecKernelNodeSetParams))
        loaded = &driver;
    /* Optional: without them the rest still works (NULL then). */
    if (loaded != NULL && !LOAD(cuPointerGetAttribute))
        driver.cuPointerGetAttribute = NULL;
    if (loaded != NULL && !LOAD(cuPointerGetAttributes))
        driver.cuPointerGetAttributes = NULL;
#undef LOAD
}

const gr_cuda_driver *gr__cuda_driver_get(gr_error_info *err)
{
    pthread_once(&once, load_all);
    if (loaded == NULL)
        gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL,
                      "the CUDA driver does not provide %s", missing);
    return loaded;
}

const char *gr__cuda_driver_error_name(CUresult r)
{
    static __thread char buf[32];
    const char *name = NULL;

    if (loaded && loaded->cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
        return name;
    snprintf(buf, sizeof(buf), "CUresult %d", (int)r);
    return buf;
}

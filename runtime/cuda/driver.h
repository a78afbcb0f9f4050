/*
 * cuda/driver.h - the few CUDA driver API functions graphrun needs (private contexts and
 * their shared device region, kernel nodes of CUfunctions), reached through
 * cudaGetDriverEntryPointByVersion.
 *
 * Nothing links libcuda: the static CUDA runtime finds the driver at run time, so the same
 * binary starts on a machine without one (and then simply has no CUDA backend).
 */
#ifndef GR_CUDA_DRIVER_H
#define GR_CUDA_DRIVER_H

#include <cuda.h>

#include <graphrun.h>

typedef struct gr_cuda_driver {
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuCtxCreate)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
    CUresult (*cuCtxDestroy)(CUcontext);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                            unsigned long long);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                    unsigned long long);
    CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
    CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                         unsigned long long);
    CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
    CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    /* Kernel nodes of CUfunctions (GR_CUDA_FUNCTION), which the runtime API does not take. */
    CUresult (*cuGraphAddKernelNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                     const CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode,
                                               const CUDA_KERNEL_NODE_PARAMS *);
    /* Which context a pointer's memory was made under: for the report of a refused graph
     * update (cuda_backend.c: log_refusal). Optional: NULL where the driver lacks it. */
    CUresult (*cuPointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
    /* Where the allocation a host pointer lies in begins and ends (the backend's host_span:
     * no copy may run from one allocation into the next). Optional: NULL where the driver
     * lacks it, and then no copy covers more than one tensor. */
    CUresult (*cuPointerGetAttributes)(unsigned int, CUpointer_attribute *, void **,
                                       CUdeviceptr);
} gr_cuda_driver;

/* The driver's functions, loaded once; NULL (with `err` filled) when the driver does not
 * provide one of them. Any thread. */
const gr_cuda_driver *gr__cuda_driver_get(gr_error_info *err);

/* The name of a driver error, "CUDA_ERROR_..." or a number. */
const char *gr__cuda_driver_error_name(CUresult r);

#endif /* GR_CUDA_DRIVER_H */

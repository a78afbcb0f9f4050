/*
 * cuda/cuda.h - what the CUDA backend's files share.
 */
#ifndef GR_CUDA_CUDA_H
#define GR_CUDA_CUDA_H

#include <cuda_runtime_api.h>
#include <graphrun.h>

#include "runtime/backend.h"

/* Fill `err` from a CUDA error: "<call>: <cudaErrorName>: <description>". Returns `st`. */
gr_status gr__cuda_error(gr_error_info *err, gr_status st, cudaError_t e, const char *node,
                         const char *call);

/* Pinned host memory through the CUDA runtime (pinned.c), for gr_host_alloc and friends. */
extern const gr_pinned_ops gr__cuda_pinned;

#endif /* GR_CUDA_CUDA_H */

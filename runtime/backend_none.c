/*
 * backend_none.c - the CUDA backend's entry point in builds without it.
 */
#include "runtime/backend.h"

const gr_backend_ops *gr_backend_cuda_ops(void)
{
    return NULL;
}

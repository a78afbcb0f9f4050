/*
 * cuda/copy_kernel.h - copies done by the SMs instead of the copy engines: one kernel launch
 * moves many separate ranges between page-locked host memory (read and written through its
 * device mapping, over the link) and device memory.
 *
 * Why: a batched DMA copy (cudaMemcpyBatchAsync) costs the driver 2-6 us per range on an
 * H200 (measured with tools/nvtx_profile: 2.9 ms to submit the 512 ranges of a unit of 256
 * tensors of 64 KiB, whose bytes take 0.33 ms each way), so separate tensors of 16-256 KiB
 * spend more time being described than copied. A kernel takes the whole table in one launch.
 */
#ifndef GR_CUDA_COPY_KERNEL_H
#define GR_CUDA_COPY_KERNEL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "runtime/copier.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launch on `stream` the copies table[0 .. n), `largest` the most bytes of any of them.
 * `table` and every source and destination must be accessible from the device (device
 * memory, or host memory mapped for it: cudaHostAlloc, or cudaHostRegister with
 * cudaHostRegisterMapped). Returns the launch's error. */
cudaError_t gr_cuda_copy_ranges(const gr_copy *table, uint32_t n, uint64_t largest,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GR_CUDA_COPY_KERNEL_H */

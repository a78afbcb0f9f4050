/*
 * cuda/copy_kernel.cu - see copy_kernel.h.
 *
 * Grid: x the ranges, y slices of SLICE bytes of each (ranges shorter than the longest leave
 * their extra slices idle at once). A block reads its range's entry, then copies its slice
 * in 16-byte words when the range and its slice allow it, else byte by byte; plenty of
 * loads in flight per SM is what keeps the link busy.
 */
#include "runtime/cuda/copy_kernel.h"

#define SLICE (256u << 10)
#define THREADS 512

__global__ void __launch_bounds__(THREADS) copy_ranges(const gr_copy *table, uint64_t slice)
{
    const gr_copy c = table[blockIdx.x];
    uint64_t lo = (uint64_t)blockIdx.y * slice, hi;
    const unsigned char *s = (const unsigned char *)c.src;
    unsigned char *d = (unsigned char *)c.dst;

    if (lo >= c.bytes)
        return;
    hi = lo + slice < c.bytes ? lo + slice : c.bytes;
    if ((((uintptr_t)s | (uintptr_t)d) & 15) == 0) {
        const uint4 *s4 = (const uint4 *)(s + lo);
        uint4 *d4 = (uint4 *)(d + lo);
        uint64_t words = (hi - lo) / 16;

        for (uint64_t i = threadIdx.x; i < words; i += THREADS)
            d4[i] = s4[i];
        lo += words * 16;
    }
    for (uint64_t i = lo + threadIdx.x; i < hi; i += THREADS)
        d[i] = s[i];
}

extern "C" cudaError_t gr_cuda_copy_ranges(const gr_copy *table, uint32_t n, uint64_t largest,
                                           cudaStream_t stream)
{
    uint64_t slices = (largest + SLICE - 1) / SLICE;

    if (n == 0)
        return cudaSuccess;
    if (slices == 0)
        slices = 1;
    if (slices > 65535)
        return cudaErrorInvalidValue; /* 16 GiB in one range: never a scattered unit's */
    copy_ranges<<<dim3(n, (unsigned)slices), THREADS, 0, stream>>>(table, SLICE);
    return cudaGetLastError();
}

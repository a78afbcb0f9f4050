/*
 * workload.h - the seed workload's synthetic data and its verification, shared by the
 * driver, the benchmarks and the tests.
 *
 * Input element j of tensor `index` is a pure function of (seed, index, j), uniform in
 * [0, 1) like torch.rand, so an output can be checked against the C reference without
 * keeping a copy of its input.
 */
#ifndef GR_WORKLOAD_H
#define GR_WORKLOAD_H

#include <stdint.h>

static inline float gr_workload_value(uint64_t seed, uint64_t index, uint64_t j)
{
    uint64_t z = seed ^ (index * 0x9e3779b97f4a7c15ull) ^ (j * 0xd1b54a32d192ed03ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* dst[j] = input j of tensor `index`, for j in [first, first + n). */
void gr_workload_fill(float *dst, uint64_t first, uint64_t n, uint64_t seed, uint64_t index);

/*
 * Compare out[j] (j in [first, first + n)) with the seed computation of input j of tensor
 * `index`, bit for bit. Returns the number of mismatches; *first_bad (if not NULL) is the
 * first mismatching j, UINT64_MAX when none.
 */
uint64_t gr_workload_check_seed(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                                uint64_t index, uint64_t *first_bad);

/* The same comparison against the unprocessed input (for indices that must not have been
 * written). */
uint64_t gr_workload_check_input(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                                 uint64_t index, uint64_t *first_bad);

/* For an index that did not finish: count elements that are neither the unprocessed input
 * nor the seed result (a tensor split into chunks may have some chunks written before it
 * was stopped; anything else is corruption). */
uint64_t gr_workload_check_partial(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                                   uint64_t index, uint64_t *first_bad);

#endif /* GR_WORKLOAD_H */

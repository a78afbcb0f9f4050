/*
 * workload.c - synthetic seed-workload data and its verification (see workload.h).
 */
#include "tools/graphrun/workload.h"

#include <string.h>

#include "kernels/kernels.h"

void gr_workload_fill(float *dst, uint64_t first, uint64_t n, uint64_t seed, uint64_t index)
{
    for (uint64_t j = 0; j < n; j++)
        dst[j] = gr_workload_value(seed, index, first + j);
}

static uint64_t check(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                      uint64_t index, uint64_t *first_bad, int processed)
{
    uint64_t bad = 0;

    if (first_bad)
        *first_bad = UINT64_MAX;
    for (uint64_t j = 0; j < n; j++) {
        float want = gr_workload_value(seed, index, first + j);

        if (processed)
            want = gr__seed_ref(want);
        if (memcmp(&out[j], &want, sizeof(float)) != 0) {
            if (bad++ == 0 && first_bad)
                *first_bad = first + j;
        }
    }
    return bad;
}

uint64_t gr_workload_check_seed(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                                uint64_t index, uint64_t *first_bad)
{
    return check(out, first, n, seed, index, first_bad, 1);
}

uint64_t gr_workload_check_input(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                                 uint64_t index, uint64_t *first_bad)
{
    return check(out, first, n, seed, index, first_bad, 0);
}

uint64_t gr_workload_check_partial(const float *out, uint64_t first, uint64_t n, uint64_t seed,
                                   uint64_t index, uint64_t *first_bad)
{
    uint64_t bad = 0;

    if (first_bad)
        *first_bad = UINT64_MAX;
    for (uint64_t j = 0; j < n; j++) {
        float in = gr_workload_value(seed, index, first + j), done = gr__seed_ref(in);

        if (memcmp(&out[j], &in, sizeof(float)) != 0 &&
            memcmp(&out[j], &done, sizeof(float)) != 0) {
            if (bad++ == 0 && first_bad)
                *first_bad = first + j;
        }
    }
    return bad;
}

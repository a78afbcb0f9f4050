/*
 * fixtures.h - helpers the runtime's tests share: a runtime with a given shape, waiting for
 * a job's result, in-place seed-workload tensors and their checks, skipping without a GPU.
 * Each fails the current test on error (testing.h).
 */
#ifndef GR_FIXTURES_H
#define GR_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>

#include "tests/testing.h"

typedef struct gr_test_shape {
    gr_backend backend; /* GR_BACKEND_HOST unless set */
    uint32_t devices;   /* host backend: devices to emulate (default 1) */
    uint32_t workers;   /* per device (default 3) */
    uint64_t budget;    /* required */
    uint32_t ring;      /* ring capacity (default: the runtime's) */
    gr_context_mode contexts;
    bool whole_tensors; /* never split: one iteration per tensor (split_tensors = 0) */
    /* Units in flight per worker, "1" or "2" (GR_UNITS_IN_FLIGHT while the runtime is
     * created, then as it was); NULL: as the environment says. */
    const char *in_flight;
} gr_test_shape;

/* A runtime of that shape; fails the test with the reason if it cannot start. */
gr_runtime *gr_test_runtime(gr_test_shape shape);

/* Wait (at most `timeout_ns`) for the job to complete, failing the test if it does not;
 * returns the job's result. */
gr_status gr_test_wait(gr_job *job, int64_t timeout_ns);

/* A graph of one kernel node "k" over buffers the tensor's size, finalized: in place
 * (load in0 -> x, k(x, scalars) -> x, store x -> out0; n_inputs 1), or else out of place
 * (in0 -> a [, in1 -> b], k(a [, b], scalars) -> o, o -> out0). */
gr_graph *gr_test_kernel_graph(const char *kernel, uint32_t n_inputs, const float *scalars,
                               uint32_t n_scalars, bool in_place);

/* The definition of an elementwise kernel of one input and one scalar, given as CUDA C
 * source `src` whose extern "C" __global__ function `entry` it names. */
gr_kernel_def gr_test_source_def(const char *name, const char *entry, const char *src);

/* One row of a table of kernels checked against their CPU versions: a registered
 * elementwise kernel of one or two inputs, its scalars, and how many ULPs its result may
 * differ from the CPU version's by. */
typedef struct gr_test_kernel_case {
    const char *kernel;
    uint32_t n_in;
    float s[2];
    uint32_t n_s;
    int ulps;
} gr_test_kernel_case;

/* Run c's kernel on `rt` through gr_test_kernel_graph (out of place) over n elements of x
 * (and y, the second input), into pinned memory poisoned first (every element must be
 * written), and its CPU version; fail the test at the first element where the two differ
 * by more than c->ulps. */
void gr_test_expect_kernel_matches_cpu(gr_runtime *rt, const gr_test_kernel_case *c,
                                       const float *x, const float *y, uint64_t n);

/* out0 = seed(2a - b), out1 = 3a: a DAG of two inputs (two loads), independent branches and
 * two outputs, every buffer the tensor's size. */
gr_graph *gr_test_dag_graph(void);

/* `count` in-place tensors of `elems` elements, each its own allocation, filled with the
 * seed workload's inputs for `seed` (tools/graphrun/workload.h). */
typedef struct gr_test_tensors {
    float **data;
    gr_tensor *t;
    uint64_t count, elems, seed;
} gr_test_tensors;

gr_test_tensors gr_test_tensors_make(uint64_t seed, uint64_t count, uint64_t elems);
void gr_test_tensors_free(gr_test_tensors *s);

/* Index i holds the seed computation of its input, exactly once applied. */
void gr_test_expect_processed(const gr_test_tensors *s, uint64_t i);
/* Every index does. */
void gr_test_expect_all_processed(const gr_test_tensors *s);
/* Index i still holds its input. */
void gr_test_expect_untouched(const gr_test_tensors *s, uint64_t i);

/* NULL when a usable CUDA device is present (gr_backend_probe), else why not (static text,
 * until the next call). It calls CUDA: call it from a case, never from main. */
const char *gr_test_no_gpu(void);

/* Skip the current case, saying why, unless a usable CUDA device is present. */
#define REQUIRE_GPU()                                                                       \
    do {                                                                                    \
        const char *why_ = gr_test_no_gpu();                                                \
        if (why_)                                                                           \
            SKIP(why_);                                                                     \
    } while (0)

#endif /* GR_FIXTURES_H */

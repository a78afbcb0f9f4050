/*
 * kernels.h - built-in kernels: the registry that names them, their CPU versions, and the
 * argument block shared with their CUDA versions (kernels_cuda.cu).
 *
 * Every kernel is elementwise over float32 and takes one argument block by value, so the
 * CUDA backend can set any kernel node's parameters the same way. The CPU versions are the
 * host backend's kernels and the reference the tests verify against; they compute exactly
 * what the CUDA versions compute (no fused multiply-add unless the kernel says so, sqrt for
 * pow 0.5 as PyTorch does), so results match bit for bit.
 */
#ifndef GR_KERNELS_H
#define GR_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/graphrun.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arguments of one kernel launch over elements [0, n) of its buffers. */
typedef struct gr_kargs {
    const float *in[GR_MAX_KERNEL_INPUTS];
    float *out;
    uint64_t n;
    float s[GR_MAX_SCALARS];
} gr_kargs;

typedef void (*gr_cpu_kernel_fn)(const gr_kargs *a);

typedef struct gr_kernel_def {
    const char *name;
    uint32_t n_inputs;
    uint32_t n_scalars;
    bool elementwise; /* element i of the output depends only on element i of the inputs */
    gr_cpu_kernel_fn cpu;
    const char *doc;
} gr_kernel_def;

/* The kernel called `name`, or NULL. Any thread. */
const gr_kernel_def *gr_kernel_find(const char *name);

/* The i-th kernel (i < gr_kernel_count()), or NULL. Any thread. */
const gr_kernel_def *gr_kernel_def_at(uint32_t i);

/* The seed workload's constants: ten rounds of x = pow(x * 1.01 + 1.01, 0.5). */
#define GR_SEED_ROUNDS 10
#define GR_SEED_MUL 1.01f
#define GR_SEED_ADD 1.01f

/* The seed computation for one element: the reference every test and benchmark uses. */
float gr_seed_ref(float x);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_H */

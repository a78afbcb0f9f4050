/*
 * typed.h - the built-ins for element types other than float32 (builtin.c registers them
 * as overloads of the float32 names) and the `cast` kernel between any two types.
 *
 * float16 and bfloat16 compute in float32 and round once on the store; float64 computes
 * in float64; the scalars are float32 for the first two and float64 for the last. The CPU
 * versions (typed_cpu.c) and the CUDA ones (typed_cuda.cu) do the same operations in the
 * same order, so the exact ones (everything but exp, log, tanh, sigmoid and pow other than
 * 0.5, 1, 2) agree bit for bit, as the float32 built-ins do.
 */
#ifndef GR_KERNELS_TYPED_H
#define GR_KERNELS_TYPED_H

#include <graphrun.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gr_typed_op {
    GR_OP_MUL,
    GR_OP_ADD,
    GR_OP_POW,
    GR_OP_AXPBY,
    GR_OP_SUB,
    GR_OP_DIV,
    GR_OP_EXP,
    GR_OP_LOG,
    GR_OP_TANH,
    GR_OP_SIGMOID,
    GR_OP_CLAMP,
    GR_OP_MUL2,
    GR_OP_ADD2,
    GR_OP_COUNT_
} gr_typed_op;

/* What a typed built-in's `user` points at. */
typedef struct gr_typed_kernel {
    gr_typed_op op;
    gr_dtype type;
} gr_typed_kernel;

/* What a cast's `user` points at. */
typedef struct gr_cast_kernel {
    gr_dtype from, to;
} gr_cast_kernel;

/* CPU versions: `user` is a gr_typed_kernel / gr_cast_kernel. */
void gr__cpu_typed(const gr_kernel_args *a, void *user);
void gr__cpu_cast(const gr_kernel_args *a, void *user);

/* The CUDA versions' entries (host stubs of template instances), NULL for a pair the table
 * lacks. */
const void *gr__cuda_typed_entry(gr_typed_op op, gr_dtype type);
const void *gr__cuda_cast_entry(gr_dtype from, gr_dtype to);

/* Register the typed built-ins and the casts (builtin.c calls it from its table's
 * registration). */
void gr__kernels_register_typed(void);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_TYPED_H */

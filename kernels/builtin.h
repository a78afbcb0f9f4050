/*
 * builtin.h - the built-in kernels' two implementations, for the table in builtin.c: the
 * CPU versions (cpu.c) and the CUDA entries (builtin_cuda.cu, `extern "C"` host stubs of
 * `__global__` functions, whose addresses cudaGraphAddKernelNode takes).
 */
#ifndef GR_KERNELS_BUILTIN_H
#define GR_KERNELS_BUILTIN_H

#include <graphrun.h>

#ifdef __cplusplus
extern "C" {
#endif

void gr__cpu_mul(const gr_kernel_args *a, void *user);
void gr__cpu_add(const gr_kernel_args *a, void *user);
void gr__cpu_pow(const gr_kernel_args *a, void *user);
void gr__cpu_axpby(const gr_kernel_args *a, void *user);
void gr__cpu_seed(const gr_kernel_args *a, void *user);
void gr__cpu_sub(const gr_kernel_args *a, void *user);
void gr__cpu_div(const gr_kernel_args *a, void *user);
void gr__cpu_exp(const gr_kernel_args *a, void *user);
void gr__cpu_log(const gr_kernel_args *a, void *user);
void gr__cpu_tanh(const gr_kernel_args *a, void *user);
void gr__cpu_sigmoid(const gr_kernel_args *a, void *user);
void gr__cpu_clamp(const gr_kernel_args *a, void *user);
void gr__cpu_mul2(const gr_kernel_args *a, void *user);
void gr__cpu_add2(const gr_kernel_args *a, void *user);
void gr__cpu_softmax(const gr_kernel_args *a, void *user);
void gr__cpu_sum(const gr_kernel_args *a, void *user);
void gr__cpu_normalize(const gr_kernel_args *a, void *user);

#ifndef __CUDACC__
/* Declared here as the plain C functions nvcc makes of them (their host stubs). */
void gr__cuda_mul(gr_kernel_args a);
void gr__cuda_add(gr_kernel_args a);
void gr__cuda_pow(gr_kernel_args a);
void gr__cuda_axpby(gr_kernel_args a);
void gr__cuda_seed(gr_kernel_args a);
void gr__cuda_sub(gr_kernel_args a);
void gr__cuda_div(gr_kernel_args a);
void gr__cuda_exp(gr_kernel_args a);
void gr__cuda_log(gr_kernel_args a);
void gr__cuda_tanh(gr_kernel_args a);
void gr__cuda_sigmoid(gr_kernel_args a);
void gr__cuda_clamp(gr_kernel_args a);
void gr__cuda_mul2(gr_kernel_args a);
void gr__cuda_add2(gr_kernel_args a);
void gr__cuda_softmax(gr_kernel_args a);
void gr__cuda_sum(gr_kernel_args a);
void gr__cuda_normalize(gr_kernel_args a);
#endif

/* Register the built-ins (builtin.c), once: registry.c calls it the first time the
 * registry is used. */
void gr__kernels_register_builtins(void);

/* What gr_kernel_register does, for the built-ins' registration, which runs inside the
 * registry's one-time initialization and so cannot wait for it (registry.c). */
gr_status gr__kernels_add_builtin(const gr_kernel_def *def, gr_error_info *err);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_BUILTIN_H */

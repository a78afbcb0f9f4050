/*
 * user_kernels.h - one computation, out = x * s0 + 1 (each operation rounded to float32, so
 * the CPU and every CUDA version agree bit for bit), registered in every way a user can
 * bring a CUDA kernel, each with the same CPU version: for the GPU tests and the kernels
 * benchmark.
 */
#ifndef GR_TESTS_USER_KERNELS_H
#define GR_TESTS_USER_KERNELS_H

#include <graphrun.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels' names, one per way (GR_CUDA_ENTRY, _KERNEL, _FUNCTION, _LAUNCH, _SOURCE,
 * _STREAM). */
#define GR_TEST_USER_WAYS 6
extern const char *const gr_test_user_kernels[GR_TEST_USER_WAYS];

/* Register them all, once (idempotent, any thread; needs a usable CUDA device for the
 * handles). Returns the status of the first refusal, its reason in err. */
gr_status gr_test_register_user_kernels(gr_error_info *err);

/* The reference: x * s + 1, rounded at each step. */
float gr_test_user_ref(float x, float s);

#ifdef __cplusplus
}
#endif

#endif /* GR_TESTS_USER_KERNELS_H */

/*
 * fault_kernel.h - a kernel that faults on the GPU, registered by the tests that need one
 * through the public registry, as a user's kernel would be.
 */
#ifndef GR_TESTS_FAULT_KERNEL_H
#define GR_TESTS_FAULT_KERNEL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Register kernel "fault" (one input, elementwise; idempotent, any thread): on CUDA one
 * thread writes to an address no allocation maps, which raises cudaErrorIllegalAddress, a
 * sticky error that ruins the context it runs in; on the CPU it does nothing (the host
 * backend has no device to fault). Fails the test if the registry refuses it. */
void gr_test_register_fault_kernel(void);

#ifdef __cplusplus
}
#endif

#endif /* GR_TESTS_FAULT_KERNEL_H */

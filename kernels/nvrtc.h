/*
 * nvrtc.h - CUDA C source to PTX with NVRTC, loaded at run time (dlopen), so that
 * binaries start without it and only kernels given as source are refused where it is
 * missing.
 */
#ifndef GR_KERNELS_NVRTC_H
#define GR_KERNELS_NVRTC_H

#include <graphrun.h>
#include <stdbool.h>

/* Whether NVRTC could be loaded; when not, `why` (optional) gets what was tried and what to
 * install. Any thread. */
bool gr__nvrtc_available(char *why, size_t size);

/*
 * Compile `source` (named `name` in messages) for compute capability 9.0 as PTX, which the
 * CUDA driver finishes for each device's own architecture when it loads it. The result is
 * cached for the process by the source's text: the same text compiles once. On GR_OK *ptx
 * is NUL-terminated PTX that lives as long as the process. GR_ERR_INVALID_ARGUMENT with
 * the first lines of NVRTC's log for source it refuses; GR_ERR_UNAVAILABLE without NVRTC;
 * GR_ERR_OUT_OF_MEMORY. Any thread (compilations of different texts may run at once).
 */
gr_status gr__nvrtc_compile(const char *source, const char *name, const char **ptx,
                            gr_error_info *err);

/* The text of kernels/graphrun_kernel.h, which compiled sources may #include. */
extern const char gr__nvrtc_kernel_header[];

#endif /* GR_KERNELS_NVRTC_H */

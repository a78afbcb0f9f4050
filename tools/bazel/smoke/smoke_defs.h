/* Header-only dependency of smoke_cuda.cu: checks that cuda_library passes
 * the headers (and defines) of its cc_library deps to nvcc. */
#ifndef TOOLS_BAZEL_SMOKE_SMOKE_DEFS_H
#define TOOLS_BAZEL_SMOKE_SMOKE_DEFS_H
#ifndef SMOKE_DEFS_DEFINE
#error "SMOKE_DEFS_DEFINE (from smoke_defs' defines) did not reach the compiler"
#endif
#define SMOKE_INCREMENT 1
#endif

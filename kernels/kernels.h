/*
 * kernels.h - the kernel registry as graphs and backends see it, and the element types.
 *
 * A registered kernel is a copy of its public definition (graphrun.h: gr_kernel_def) with
 * a process-unique id. It is immutable and never freed, so graphs keep plain pointers to
 * it and backends key their per-context caches by its id.
 */
#ifndef GR_KERNELS_H
#define GR_KERNELS_H

#include <graphrun.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GR_KERNEL_ENTRY_MAX 63 /* longest cuda_name of a source kernel */

typedef struct gr_kernel {
    gr_kernel_def def;         /* name, doc, cuda_name and a source's text point at the
                                  copies below */
    uint64_t id;               /* 1, 2, ...: unique in the process, never reused */
    bool builtin;              /* registered by builtin.c: its name is reserved */
    char name[GR_NAME_MAX + 1];
    char doc[160];
    /* GR_CUDA_SOURCE: the text (def.cuda points at it), its entry, and the PTX NVRTC made
     * of it (NULL when NVRTC could not be loaded: then cuda_unavailable says why, and only
     * the CPU implementation can run). */
    char *source;
    char cuda_name[GR_KERNEL_ENTRY_MAX + 1];
    const char *ptx;
    char cuda_unavailable[256];
} gr_kernel;

/* The first kernel called `name` (NUL-terminated), or NULL. Any thread. */
const gr_kernel *gr__kernel_find(const char *name);

/* The kernel called `name` for exactly these input and output element types (one of the
 * name's overloads: a name may have several, for other types), or NULL. Any thread. */
const gr_kernel *gr__kernel_find_typed(const char *name, const gr_dtype *in, uint32_t n_in,
                                       gr_dtype out);

/* "(float32) -> float32; (float16) -> float16" into buf, the types of each kernel called
 * `name`, for messages (cut short with "..." as gr__kernel_list). Any thread. */
void gr__kernel_signatures(const char *name, char *buf, size_t size);

/* The i-th registered kernel, or NULL past the end. Any thread. */
const gr_kernel *gr__kernel_at(uint32_t i);

/* "mul, add, pow, ..." into buf (NUL-terminated, cut short with "..." when it does not
 * fit): for messages naming what is known. Any thread. */
void gr__kernel_list(char *buf, size_t size);

/* gr_kernel_register, except that a kernel of that name registered already from exactly
 * this definition (same signature, same implementations, a source kernel's same text) is
 * not an error: for loaders that may see one file twice, from several threads at once.
 * Any thread. */
gr_status gr__kernel_register_same_ok(const gr_kernel_def *def, gr_error_info *err);

/* The seed workload's constants: ten rounds of x = pow(x * 1.01 + 1.01, 0.5). */
#define GR_SEED_ROUNDS 10
#define GR_SEED_MUL 1.01f
#define GR_SEED_ADD 1.01f

/* The seed computation for one element: the reference every test and benchmark uses. */
float gr__seed_ref(float x);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_H */

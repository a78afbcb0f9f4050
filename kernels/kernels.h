/*
 * kernels.h - the kernel registry as graphs and backends see it, and the element types.
 *
 * A registered kernel is a copy of its public definition (graphrun.h: gr_kernel_def) with
 * a process-unique id. Its definition is immutable; it is freed only once it is
 * unregistered and no one holds it, so a graph holds (gr__kernel_hold) each kernel its
 * nodes use and keeps a plain pointer to it, which backends may use as long as they use the
 * graph.
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
    /* registry.c's, under its lock: holds taken (graphs, lookups in progress); whether it
     * is in the table (nameable); whether the table keeps it when holds drop to 0 (a
     * registration's; an expression a spec registered for its graph has none). */
    uint32_t holds;
    bool listed;
    bool pinned;
} gr_kernel;

/* The first kernel called `name` (NUL-terminated), held, or NULL. Any thread. */
const gr_kernel *gr__kernel_hold(const char *name);

/* The kernel called `name` for exactly these input and output element types (one of the
 * name's overloads: a name may have several, for other types), held, or NULL. Any thread. */
const gr_kernel *gr__kernel_hold_typed(const char *name, const gr_dtype *in, uint32_t n_in,
                                       gr_dtype out);

/* The kernel called `name` whose user pointer is `user`, held, or NULL; with `pin`, it is
 * also registered from now on as gr_kernel_register's are (kept with no holds). Any
 * thread. */
const gr_kernel *gr__kernel_hold_user(const char *name, const void *user, bool pin);

/* Give back a hold (NULL: nothing). The last hold of an unregistered kernel frees it and
 * calls its destroy, on this thread, so the caller must hold no lock that destroy may
 * take. Any thread. */
void gr__kernel_release(const gr_kernel *k);

/* Unheld lookups: the pointer is valid only while the kernel stays registered, so only
 * for kernels no one unregisters meanwhile (the built-ins; tests). Any thread. */
const gr_kernel *gr__kernel_find(const char *name);
const gr_kernel *gr__kernel_find_typed(const char *name, const gr_dtype *in, uint32_t n_in,
                                       gr_dtype out);
const gr_kernel *gr__kernel_at(uint32_t i); /* the i-th registered, or NULL past the end */

/* "(float32) -> float32; (float16) -> float16" into buf, the types of each kernel called
 * `name`, for messages (cut short with "..." as gr__kernel_list). Any thread. */
void gr__kernel_signatures(const char *name, char *buf, size_t size);


/* "mul, add, pow, ..." into buf (NUL-terminated, cut short with "..." when it does not
 * fit): for messages naming what is known. Any thread. */
void gr__kernel_list(char *buf, size_t size);

/* gr_kernel_register, except that a kernel of that name registered already from exactly
 * this definition (same signature, same implementations, a source kernel's same text) is
 * not an error: for loaders that may see one file twice, from several threads at once.
 * Any thread. */
gr_status gr__kernel_register_same_ok(const gr_kernel_def *def, gr_error_info *err);

/* gr_kernel_register for a kernel that lives only as long as its holds: registered with one
 * hold, given to *held, and unregistered when its last hold goes (an expression a spec
 * registers for its graph). gr__kernel_hold_user(..., true) makes it a registered one. Any
 * thread. */
gr_status gr__kernel_register_held(const gr_kernel_def *def, const gr_kernel **held,
                                   gr_error_info *err);

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

/*
 * expr.h - elementwise expressions as kernels (docs/GRAPH_SPEC.md, "Expression kernels"):
 * "(x - 0.5) * 2.0" over typed inputs, parsed, typed, and registered in the kernel registry
 * with a CPU implementation (a blocked evaluator) and a CUDA one (generated source that
 * NVRTC compiles), both doing the same operations with the same roundings.
 *
 * Errors about the text come back as a gr_expr_error: the byte offset in the text of the
 * offending character, and the reason, so that callers can point into the line the text
 * came from (the spec parser: NAME:LINE:COL; gr_kernel_register_expr: expr:1:COL).
 */
#ifndef GR_KERNELS_EXPR_H
#define GR_KERNELS_EXPR_H

#include <graphrun.h>
#include <stddef.h>
#include <stdint.h>

struct gr_kernel; /* kernels.h */

#ifdef __cplusplus
extern "C" {
#endif

#define GR_EXPR_MAX_DEPTH 64   /* nesting of parentheses, calls and unary signs */
#define GR_EXPR_MAX_NODES 1024 /* values and operations of one expression */

typedef struct gr_expr_error {
    gr_status status; /* GR_ERR_INVALID_ARGUMENT for the text; else the registry's */
    size_t offset;    /* of the offending character in the text, 0-based */
    int unknown_name; /* nonzero: the error is a name the environment does not have */
    size_t name_len;  /* its length (the name is text[offset, offset + name_len)) */
    char why[208];
} gr_expr_error;

/* A named constant: its name (name_len bytes, not NUL-terminated) and value. */
typedef struct gr_expr_param {
    const char *name;
    size_t name_len;
    double value;
} gr_expr_param;

/* What an expression's names mean and what it produces. */
typedef struct gr_expr_env {
    uint32_t n_inputs;
    const char *input_names[GR_MAX_KERNEL_INPUTS]; /* NUL-terminated */
    gr_dtype input_dtype[GR_MAX_KERNEL_INPUTS];
    gr_dtype out_dtype;
    const gr_expr_param *params;
    uint32_t n_params;
} gr_expr_env;

/* Whether `name` (len bytes) can be named inside an expression: [A-Za-z_][A-Za-z0-9_.]*,
 * not a function or type name. */
int gr__expr_name_ok(const char *name, size_t len);

/* The syntax of text[0, len), names unresolved: GR_OK or GR_ERR_INVALID_ARGUMENT with *e
 * set. Any thread. */
gr_status gr__expr_check_syntax(const char *text, size_t len, gr_expr_error *e);

/* A constant expression (numbers, params, operators, functions; no inputs), evaluated in
 * float64 (a cast rounds to its type), into *out, which is finite. Any thread. */
gr_status gr__expr_eval_const(const char *text, size_t len, const gr_expr_param *params,
                              uint32_t n_params, double *out, gr_expr_error *e);

/* Compile text[0, len) for `env` and register it as an elementwise kernel, or find the
 * kernel an earlier call registered for the same program (the same operations, constants
 * and types, whatever the names): its name ("expr." and 16 hex digits) into `name`
 * (GR_NAME_MAX + 1 bytes). With `held` NULL it is registered as gr_kernel_register's are
 * (until gr_kernel_unregister); otherwise only for its holders: it is held, into *held,
 * and unregistered when its last hold goes (a spec's, for the graphs that use it), unless
 * a registration without `held` made it a registered one meanwhile.
 * GR_ERR_INVALID_ARGUMENT for the text (e->offset, e->why); the registry's status and
 * reason (full: GR_ERR_OVER_BUDGET) otherwise. Any thread. */
gr_status gr__expr_register(const char *text, size_t len, const gr_expr_env *env,
                            char *name, const struct gr_kernel **held, gr_expr_error *e);

/* For fuzzers: from now on, expressions register without a CUDA implementation, so without
 * NVRTC (tens of milliseconds for each new program, and a large uninstrumented library in a
 * sanitized process). They are then other kernels than the same programs registered with
 * one. There is no way back. Any thread. */
void gr__expr_without_cuda(void);

#ifdef __cplusplus
}
#endif

#endif /* GR_KERNELS_EXPR_H */

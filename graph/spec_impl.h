/*
 * spec_impl.h - what the parts of the graph spec parser share (spec.c: the passes and
 * gr_graph_parse/gr_graph_load; spec_lex.c: errors, tokens, names and numbers; spec_parse.c:
 * the statements; spec_expr.c: params, constant expressions and expr kernels; spec_check.c:
 * the dependencies the data flow implies): the parser's state, a token, and the functions
 * one part calls in another.
 *
 * Those functions keep the short names they had when the parser was one file; the defines
 * below give them gr__spec_ symbols, so that nothing of the parser's collides with other
 * code linked into the same program. Everything here is the parser's own: one parser is
 * one thread's, and every function reports an error through perr into p->err.
 */
#ifndef GR_GRAPH_SPEC_IMPL_H
#define GR_GRAPH_SPEC_IMPL_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/graph.h"
#include "kernels/expr.h"
#include "kernels/lex.h"
#include "runtime/base/sync.h"

typedef struct spec_pos {
    size_t line, col;
} spec_pos;

typedef struct spec_param {
    char name[GR_NAME_MAX + 1];
    double value;
    spec_pos pos;
} spec_param;

/* Why data flow orders node j after node i. */
enum { FLOW_READ_AFTER_WRITE = 1, FLOW_WRITE_AFTER_READ, FLOW_WRITE_AFTER_WRITE };

typedef enum tok_kind {
    T_WORD,   /* [A-Za-z_][A-Za-z0-9_.-]*, ended by "->" */
    T_NUMBER, /* starts with a digit, '.', '+' or '-' */
    T_COLON,
    T_LPAREN,
    T_RPAREN,
    T_COMMA,
    T_SLASH,
    T_LBRACKET,
    T_RBRACKET,
    T_STRING, /* "...": no escapes, no newline; the token spans the quotes */
    T_ARROW,
    T_EQUALS,
    T_EOL, /* a newline, or a comment and its newline */
    T_EOF,
    T_BAD, /* a lexical error; parser.lex_why says what */
} tok_kind;

typedef struct tok {
    tok_kind kind;
    const char *p;
    size_t len;
    spec_pos pos;
} tok;

typedef enum spec_pass {
    PASS_SOURCES, /* `cuda` statements only: their kernels registered, other lines skipped */
    PASS_BUFFERS, /* syntax of every line, buffers added */
    PASS_NODES,
    PASS_DEPS,
} spec_pass;

typedef struct parser {
    const char *text;
    size_t len;
    const char *name;
    gr_error_info *err;
    gr_graph *g;
    spec_pass pass;
    bool files; /* `cuda` statements may read files: a spec from a file (gr_graph_load) */

    gr_lex lx; /* the cursor */

    char lex_why[128];
    spec_pos node_pos[GR_MAX_NODES];     /* where each node's name was declared */
    spec_pos buffer_pos[GR_MAX_BUFFERS]; /* where each buffer's name was declared */

    /* Params, in the order of the text (each usable below its line), and the same as the
     * expression compiler takes them. */
    spec_param params[GR_EXPR_MAX_PARAMS];
    gr_expr_param expr_params[GR_EXPR_MAX_PARAMS];
    uint32_t n_params;
    /* The names every param line declares, found in the first pass: a scalar argument
     * naming one is a scalar wherever the param is (and refused if it is below). */
    char param_words[GR_EXPR_MAX_PARAMS][GR_NAME_MAX + 1];
    uint32_t n_param_words;

    /* Dependencies the data flow implies: implied[j] bit i for the edge i -> j the graph got
     * (the reduced set), flow[j][i] why node j follows node i (every implied pair). */
    uint64_t implied[GR_MAX_NODES];
    struct flow {
        uint8_t kind; /* FLOW_*, 0 for none */
        uint8_t buffer;
    } flow[GR_MAX_NODES][GR_MAX_NODES];
} parser;

/* A statement's parts, as far as one pass needs them. */
typedef struct kernel_stmt {
    tok node, kernel, out;
    const gr_kernel *def;         /* held (gr__kernel_hold) */
    const gr_kernel *expr_kernel; /* an expr's, held */
    tok inputs[GR_MAX_KERNEL_INPUTS];
    double scalars[GR_MAX_SCALARS];
    tok scalar_toks[GR_MAX_SCALARS];
    bool scalar_expr[GR_MAX_SCALARS]; /* a constant expression, not one number */
    uint32_t n_inputs, n_scalars; /* as written: may exceed the arrays, checked at once */
} kernel_stmt;

#define add_implied_deps gr__spec_add_implied_deps
#define added_node gr__spec_added_node
#define builder_refused gr__spec_builder_refused
#define check_contradiction gr__spec_check_contradiction
#define check_reads_follow_writes gr__spec_check_reads_follow_writes
#define check_scalar gr__spec_check_scalar
#define check_scalars gr__spec_check_scalars
#define cursor gr__spec_cursor
#define expect_end gr__spec_expect_end
#define expected gr__spec_expected
#define find_param gr__spec_find_param
#define is_nonfinite_word gr__spec_is_nonfinite_word
#define known_buffer gr__spec_known_buffer
#define known_node gr__spec_known_node
#define new_buffer_name gr__spec_new_buffer_name
#define new_node_name gr__spec_new_node_name
#define next gr__spec_next
#define params_above gr__spec_params_above
#define parse_args gr__spec_parse_args
#define parse_expr_args gr__spec_parse_expr_args
#define parse_param gr__spec_parse_param
#define parse_statement gr__spec_parse_statement
#define peek gr__spec_peek
#define perr gr__spec_perr
#define register_expr gr__spec_register_expr
#define show gr__spec_show
#define spec_rules gr__spec_rules
#define take_name gr__spec_take_name
#define take_number gr__spec_take_number
#define take_port gr__spec_take_port
#define take_ratio_term gr__spec_take_ratio_term
#define tok_is gr__spec_tok_is

/* spec_lex.c: errors, tokens, names and numbers, names against the graph */
extern const gr_lex_rules spec_rules; /* kernels/lex.c's rules for the spec's tokens */
void added_node(parser *p, const tok *t);
gr_status builder_refused(parser *p, const tok *t);
gr_status check_scalar(parser *p, const tok *t, bool expr, double v, gr_dtype type);
spec_pos cursor(const parser *p);
gr_status expect_end(parser *p, const char *after);
gr_status expected(parser *p, const tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool is_nonfinite_word(const tok *t);
gr_status known_buffer(parser *p, const tok *t, char *name);
gr_status known_node(parser *p, const tok *t, char *name);
gr_status new_buffer_name(parser *p, const tok *t, const char *name);
gr_status new_node_name(parser *p, const tok *t, const char *name);
tok next(parser *p);
tok peek(parser *p);
gr_status perr(parser *p, spec_pos at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *show(const tok *t, char *buf, size_t size);
gr_status take_name(parser *p, const tok *t, bool declared, char *out);
gr_status take_number(parser *p, const tok *t, double *out);
gr_status take_port(parser *p, const tok *t, const char *prefix, const char *after,
                    uint32_t *out);
gr_status take_ratio_term(parser *p, const tok *t, uint32_t *out);
bool tok_is(const tok *t, const char *s);

/* spec_expr.c: params, constant expressions and expr kernels */
gr_status check_scalars(parser *p, const kernel_stmt *k, const char *kname,
                        char inputs[][GR_NAME_MAX + 1], const char *out);
int find_param(const parser *p, const char *s, size_t len, uint32_t among);
uint32_t params_above(const parser *p, size_t line);
gr_status parse_args(parser *p, kernel_stmt *k);
gr_status parse_expr_args(parser *p, kernel_stmt *k, tok *text);
gr_status parse_param(parser *p);
gr_status register_expr(parser *p, const kernel_stmt *k, const tok *text,
                        char inputs[][GR_NAME_MAX + 1], const char *out, char *kname,
                        const gr_kernel **held);

/* spec_parse.c: statements */
gr_status parse_statement(parser *p);

/* spec_check.c: the dependencies the data flow implies, and its checks */
gr_status add_implied_deps(parser *p);
gr_status check_contradiction(parser *p, spec_pos at, uint32_t before, uint32_t after);
gr_status check_reads_follow_writes(parser *p);

#endif /* GR_GRAPH_SPEC_IMPL_H */

/*
 * expr_parse.h - what the parser (expr_parse.c) and the typing and registering that follow
 * it (expr.c) share, and nothing else includes: the parser's state, whose `n` says how many
 * nodes a parse made, and how a refusal at a byte of the text is recorded.
 */
#ifndef GR_KERNELS_EXPR_PARSE_H
#define GR_KERNELS_EXPR_PARSE_H

#include <stdarg.h>
#include <stdio.h>

#include "kernels/expr_impl.h"
#include "kernels/lex.h"

typedef enum tk {
    TK_END,
    TK_NUM,
    TK_NAME,
    TK_LP,
    TK_RP,
    TK_COMMA,
    TK_PLUS,
    TK_MINUS,
    TK_STAR,
    TK_SLASH,
    TK_LT,
    TK_LE,
    TK_GT,
    TK_GE,
    TK_EQ,
    TK_NE,
    TK_BAD,
} tk;

typedef struct xp {
    const char *s;
    size_t len;
    gr_lex lx;
    gr_expr_node *nodes;
    uint32_t n;
    int depth;
    gr_expr_error *e;
    tk t; /* the current token */
    size_t tpos, tlen;
    double tnum;
} xp;

/* A refusal of the text at byte `at`, its reason in e->why. */
static inline gr_status fail(gr_expr_error *e, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline gr_status fail(gr_expr_error *e, size_t at, const char *fmt, ...)
{
    va_list ap;

    e->status = GR_ERR_INVALID_ARGUMENT;
    e->offset = at;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof(e->why), fmt, ap);
    va_end(ap);
    return GR_ERR_INVALID_ARGUMENT;
}

/* Room for an expression's nodes (GR_EXPR_MAX_NODES), to be freed; NULL with e filled
 * (GR_ERR_OUT_OF_MEMORY) when there is none. */
gr_expr_node *gr__expr_nodes_alloc(gr_expr_error *e);

/* Parse text[0, len) into p->nodes (the root last). */
gr_status gr__expr_parse(xp *p, const char *text, size_t len, gr_expr_node *nodes,
                         gr_expr_error *e);

#endif /* GR_KERNELS_EXPR_PARSE_H */

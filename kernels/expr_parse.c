/*
 * expr_parse.c - the expression language's text to its tree: the functions it knows, the
 * tokens (through kernels/lex.c's tokenizer, with the expressions' own rules), and a
 * recursive-descent parser that appends each node after its operands, so the tree comes
 * out as one array in post-order. Apart from expr.c, which types, folds and registers the
 * tree, because the grammar is read and changed on its own; the parser is the only code of
 * the expressions that recurses, as deep as the text nests (GR_EXPR_MAX_DEPTH).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/expr_impl.h"
#include "kernels/expr_parse.h"
#include "kernels/lex.h"

/* ------------------------------------------------------------------------------------
 * The tree.
 * ---------------------------------------------------------------------------------- */

static const struct func {
    const char *name;
    uint8_t op, arity;
    gr_dtype dtype; /* casts */
} funcs[] = {
    {"sqrt", OP_SQRT, 1, 0},       {"exp", OP_EXP, 1, 0},
    {"log", OP_LOG, 1, 0},         {"pow", OP_POW, 2, 0},
    {"abs", OP_ABS, 1, 0},         {"min", OP_MIN, 2, 0},
    {"max", OP_MAX, 2, 0},         {"tanh", OP_TANH, 1, 0},
    {"sigmoid", OP_SIGMOID, 1, 0}, {"floor", OP_FLOOR, 1, 0},
    {"clamp", OP_CLAMP, 3, 0},     {"select", OP_SELECT, 3, 0},
    {"where", OP_SELECT, 3, 0},    {"float32", OP_CAST, 1, GR_DTYPE_FLOAT32},
    {"float16", OP_CAST, 1, GR_DTYPE_FLOAT16}, {"bfloat16", OP_CAST, 1, GR_DTYPE_BFLOAT16},
    {"float64", OP_CAST, 1, GR_DTYPE_FLOAT64}, {"int32", OP_CAST, 1, GR_DTYPE_INT32},
    {"uint8", OP_CAST, 1, GR_DTYPE_UINT8},
};

#define N_FUNCS (sizeof(funcs) / sizeof(funcs[0]))

static const struct func *find_func(const char *s, size_t len)
{
    for (size_t i = 0; i < N_FUNCS; i++)
        if (strlen(funcs[i].name) == len && memcmp(funcs[i].name, s, len) == 0)
            return &funcs[i];
    return NULL;
}

/* ------------------------------------------------------------------------------------
 * The lexer and the parser.
 * ---------------------------------------------------------------------------------- */

/* The expression's tokens (kernels/lex.h says how they differ from the spec's). */
static const char *const expr_pairs[] = {"<=", ">=", "==", "!=", NULL};
static const gr_lex_rules expr_rules = {
    .flags = 0,
    .punct = "(),+-*/<>",
    .pairs = expr_pairs,
};

/* The current token as messages quote it. */
static const char *shown(const xp *p, char *buf, size_t size)
{
    if (p->t == TK_END)
        return "the end of the expression";
    if (p->tlen > 24)
        snprintf(buf, size, "'%.20s...'", p->s + p->tpos);
    else
        snprintf(buf, size, "'%.*s'", (int)p->tlen, p->s + p->tpos);
    return buf;
}

static gr_status bad_byte(xp *p, size_t i)
{
    unsigned char c = (unsigned char)p->s[i];

    if (c == '=')
        return fail(p->e, i, "unexpected '=' (a comparison is '==')");
    if (c == '!')
        return fail(p->e, i, "unexpected '!' (not equal is '!=')");
    if (c >= 0x20 && c < 0x7f)
        return fail(p->e, i, "unexpected '%c'", c);
    return fail(p->e, i, "unexpected byte 0x%02x", c);
}

/* The number token just read: C float syntax as strtod reads it in the C locale, whole. */
static gr_status take_number(xp *p)
{
    const char *s = p->s + p->tpos;
    int n = (int)p->tlen;

    switch (gr__lex_number(s, p->tlen, &p->tnum)) {
    case GR_LEX_NUM_OK:
        return GR_OK;
    case GR_LEX_NUM_TOO_LONG:
        return fail(p->e, p->tpos, "number '%.20s...' is too long (at most %d characters)", s,
                    GR_LEX_NUMBER_MAX);
    case GR_LEX_NUM_OVERFLOW:
        return fail(p->e, p->tpos, "number '%.*s' is out of range (at most 1.8e308)", n, s);
    case GR_LEX_NUM_UNDERFLOW:
        return fail(p->e, p->tpos, "number '%.*s' is too small (it would be 0)", n, s);
    default: /* a number token starts with a digit: never "inf" or "nan" */
        return fail(p->e, p->tpos,
                    "invalid number '%.*s' (numbers are C floats: 2, -0.5, 1e-3)", n, s);
    }
}

static gr_status lex(xp *p)
{
    gr_lex_tok t = gr__lex_next(&p->lx);

    p->tpos = t.pos;
    p->tlen = t.len;
    switch (t.kind) {
    case GR_LEX_END:
        p->t = TK_END;
        return GR_OK;
    case GR_LEX_NUMBER:
        p->t = TK_NUM;
        return take_number(p);
    case GR_LEX_WORD:
        p->t = TK_NAME;
        return GR_OK;
    case GR_LEX_PUNCT:
        break;
    default:
        p->t = TK_BAD;
        return bad_byte(p, t.bad_at);
    }
    switch (p->s[t.pos]) {
    case '(': p->t = TK_LP; break;
    case ')': p->t = TK_RP; break;
    case ',': p->t = TK_COMMA; break;
    case '+': p->t = TK_PLUS; break;
    case '-': p->t = TK_MINUS; break;
    case '*': p->t = TK_STAR; break;
    case '/': p->t = TK_SLASH; break;
    case '<': p->t = t.len == 2 ? TK_LE : TK_LT; break;
    case '>': p->t = t.len == 2 ? TK_GE : TK_GT; break;
    case '=': p->t = TK_EQ; break;
    default: p->t = TK_NE; break; /* "!=" */
    }
    return GR_OK;
}

/* A new node of kind `o` at text [pos, pos + len), operands a, b, c (-1 for none). */
static int add_node(xp *p, int o, size_t pos, size_t len, int a, int b, int c)
{
    gr_expr_node *x;

    if (p->n == GR_EXPR_MAX_NODES) {
        fail(p->e, pos, "expression is too large (more than %d values and operations)",
             GR_EXPR_MAX_NODES);
        return -1;
    }
    x = &p->nodes[p->n];
    memset(x, 0, sizeof(*x));
    x->op = (uint8_t)o;
    x->pos = pos;
    x->len = len;
    x->n_args = (uint8_t)((a >= 0) + (b >= 0) + (c >= 0));
    x->arg[0] = (uint16_t)(a >= 0 ? a : 0);
    x->arg[1] = (uint16_t)(b >= 0 ? b : 0);
    x->arg[2] = (uint16_t)(c >= 0 ? c : 0);
    return (int)p->n++;
}

static int parse_expr(xp *p);

static bool deeper(xp *p)
{
    if (++p->depth <= GR_EXPR_MAX_DEPTH)
        return true;
    fail(p->e, p->tpos, "expression nested too deeply (more than %d levels)", GR_EXPR_MAX_DEPTH);
    return false;
}

/* NAME '(' ARGS ')', at the '(' after the name at [pos, pos + len). */
static int parse_call(xp *p, size_t pos, size_t len)
{
    const struct func *f = find_func(p->s + pos, len);
    int args[3] = {-1, -1, -1}, n = 0, r;
    char buf[40];

    if (f == NULL) {
        fail(p->e, pos,
             "unknown function '%.*s' (functions: sqrt, exp, log, pow, abs, min, max, tanh, "
             "sigmoid, floor, clamp, select, where; casts: float32, float16, bfloat16, "
             "float64, int32, uint8)",
             (int)(len > 24 ? 24 : len), p->s + pos);
        return -1;
    }
    if (!deeper(p) || lex(p) != GR_OK)
        return -1;
    if (p->t != TK_RP) {
        for (;;) {
            if ((r = parse_expr(p)) < 0)
                return -1;
            if (n < 3)
                args[n] = r;
            n++;
            if (p->t == TK_RP)
                break;
            if (p->t != TK_COMMA) {
                fail(p->e, p->tpos, "expected ',' or ')' after an argument of '%s', found %s",
                     f->name, shown(p, buf, sizeof(buf)));
                return -1;
            }
            if (lex(p) != GR_OK)
                return -1;
        }
    }
    if (n != f->arity) {
        fail(p->e, pos, "'%s' takes %d argument%s, got %d", f->name, f->arity,
             f->arity == 1 ? "" : "s", n);
        return -1;
    }
    p->depth--;
    if (lex(p) != GR_OK)
        return -1;
    r = add_node(p, f->op, pos, len, args[0], args[1], args[2]);
    if (r >= 0)
        p->nodes[r].dtype = (uint8_t)f->dtype;
    return r;
}

static int parse_primary(xp *p)
{
    size_t pos = p->tpos, len = p->tlen;
    char buf[40];
    int r;

    switch (p->t) {
    case TK_NUM: {
        double v = p->tnum;

        if (lex(p) != GR_OK || (r = add_node(p, OP_NUM, pos, len, -1, -1, -1)) < 0)
            return -1;
        p->nodes[r].value = v;
        return r;
    }
    case TK_NAME:
        if (lex(p) != GR_OK)
            return -1;
        if (p->t == TK_LP)
            return parse_call(p, pos, len);
        if (find_func(p->s + pos, len) != NULL) {
            fail(p->e, pos, "'%.*s' is a function: write it with its arguments, %.*s(...)",
                 (int)len, p->s + pos, (int)len, p->s + pos);
            return -1;
        }
        return add_node(p, OP_NAME, pos, len, -1, -1, -1);
    case TK_LP:
        if (!deeper(p) || lex(p) != GR_OK || (r = parse_expr(p)) < 0)
            return -1;
        if (p->t != TK_RP) {
            fail(p->e, p->tpos, "expected ')', found %s", shown(p, buf, sizeof(buf)));
            return -1;
        }
        p->depth--;
        return lex(p) == GR_OK ? r : -1;
    default:
        fail(p->e, p->tpos, "expected a value (a number, a name or '('), found %s",
             shown(p, buf, sizeof(buf)));
        return -1;
    }
}

static int parse_unary(xp *p)
{
    size_t pos = p->tpos;
    bool neg;
    int r;

    if (p->t != TK_MINUS && p->t != TK_PLUS)
        return parse_primary(p);
    neg = p->t == TK_MINUS;
    if (!deeper(p) || lex(p) != GR_OK || (r = parse_unary(p)) < 0)
        return -1;
    p->depth--;
    return neg ? add_node(p, OP_NEG, pos, 1, r, -1, -1) : r;
}

/* One level of left-associative binary operators: `ops` maps tokens to nodes. */
static int parse_level(xp *p, int level);

static const struct {
    tk t;
    op o;
    int level;
} binops[] = {
    {TK_EQ, OP_EQ, 0},  {TK_NE, OP_NE, 0},     {TK_LT, OP_LT, 1},  {TK_LE, OP_LE, 1},
    {TK_GT, OP_GT, 1},  {TK_GE, OP_GE, 1},     {TK_PLUS, OP_ADD, 2}, {TK_MINUS, OP_SUB, 2},
    {TK_STAR, OP_MUL, 3}, {TK_SLASH, OP_DIV, 3},
};

static int parse_level(xp *p, int level)
{
    int l = level == 3 ? parse_unary(p) : parse_level(p, level + 1);

    while (l >= 0) {
        size_t pos = p->tpos, len, k;
        int r;

        for (k = 0; k < sizeof(binops) / sizeof(binops[0]); k++)
            if (binops[k].t == p->t && binops[k].level == level)
                break;
        if (k == sizeof(binops) / sizeof(binops[0]))
            return l;
        len = p->tlen;
        if (lex(p) != GR_OK)
            return -1;
        r = level == 3 ? parse_unary(p) : parse_level(p, level + 1);
        if (r < 0)
            return -1;
        l = add_node(p, binops[k].o, pos, len, l, r, -1);
    }
    return l;
}

/* Precedence as C's: unary signs, then * /, + -, < <= > >=, == !=. */
static int parse_expr(xp *p)
{
    return parse_level(p, 0);
}

gr_status gr__expr_parse(xp *p, const char *text, size_t len, gr_expr_node *nodes,
                         gr_expr_error *e)
{
    char buf[40];

    memset(p, 0, sizeof(*p));
    p->s = text;
    p->len = len;
    gr__lex_init(&p->lx, text, len, &expr_rules);
    p->nodes = nodes;
    p->e = e;
    memset(e, 0, sizeof(*e));
    if (len > GR_EXPR_MAX_TEXT)
        return fail(e, 0, "expression is too long (%zu characters, at most %d)", len,
                    GR_EXPR_MAX_TEXT);
    if (lex(p) != GR_OK || parse_expr(p) < 0)
        return GR_ERR_INVALID_ARGUMENT;
    if (p->t != TK_END)
        return fail(e, p->tpos, "expected an operator or the end of the expression, found %s",
                    shown(p, buf, sizeof(buf)));
    return GR_OK;
}

/* ------------------------------------------------------------------------------------
 * What the spec asks of the parser alone: a parameter's name, a text's syntax.
 * ---------------------------------------------------------------------------------- */

int gr__expr_name_ok(const char *name, size_t len)
{
    if (name == NULL || len == 0 || !gr__lex_is_alpha(name[0]) || find_func(name, len) != NULL)
        return 0;
    for (size_t i = 1; i < len; i++)
        if (!gr__lex_is_alpha(name[i]) && !gr__lex_is_digit(name[i]) && name[i] != '.')
            return 0;
    return 1;
}

gr_expr_node *gr__expr_nodes_alloc(gr_expr_error *e)
{
    gr_expr_node *nodes = malloc(GR_EXPR_MAX_NODES * sizeof(gr_expr_node));

    if (nodes == NULL) {
        memset(e, 0, sizeof(*e));
        e->status = GR_ERR_OUT_OF_MEMORY;
        snprintf(e->why, sizeof(e->why), "out of memory parsing an expression");
    }
    return nodes;
}

gr_status gr__expr_check_syntax(const char *text, size_t len, gr_expr_error *e)
{
    gr_expr_node *nodes = gr__expr_nodes_alloc(e);
    xp p;
    gr_status st;

    if (nodes == NULL)
        return GR_ERR_OUT_OF_MEMORY;
    st = gr__expr_parse(&p, text, len, nodes, e);
    free(nodes);
    return st;
}

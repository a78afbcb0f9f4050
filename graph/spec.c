/*
 * spec.c - the graph spec text format (docs/GRAPH_SPEC.md): text to a finalized graph.
 *
 * The text is untrusted (files, fuzzers): it is read as bytes [0, len), never as a C string,
 * so a NUL byte or a missing final newline cannot make the parser read past the end; every
 * token is a (pointer, length) slice of the text, copied only into fixed buffers after its
 * length has been checked. Nothing is allocated but the parser's state and the graph, and
 * every failure frees both (kernels/expr.c frees what it compiles with before it returns;
 * the expression kernels it registers stay, as every registered kernel does).
 *
 * The graph is built through the public builder, in passes over the text: the first loads
 * `cuda` files (and notes the params' names), the next checks the syntax of every line and
 * adds the buffers and params, the next the nodes, the last the dependency lines. So
 * buffers and chains may come anywhere (a chain may name nodes declared below it), and the
 * builder, which wants names declared before use, is still only called with names that
 * exist. Each pass re-lexes the text (a spec is small); the later passes meet no syntax
 * error, since the first would have reported it.
 *
 * Between the nodes and the dependency lines come the dependencies the data flow implies
 * (add_implied_deps): the text is read as a program, nodes that share a buffer running in
 * its order, so every implied edge points down the text and they make no cycle; a
 * dependency line that contradicts them is refused there, naming both lines.
 *
 * Expressions (params, constant scalars, `expr` kernels) are kernels/expr.c's: it parses,
 * evaluates and compiles them, reporting errors as offsets into their text, which become
 * columns of the line here.
 *
 * Every error names the text, a line and a column (1-based, in bytes) and the reason. The
 * parser checks what it can point at precisely (duplicates, unknown names, kernel arities)
 * before calling the builder; what the builder still refuses is reported at the statement's
 * name. Finalize's refusals are reported at the declaration of the node or buffer the graph
 * names in error_node / error_buffer (graph.h), or at the end of the text when the problem
 * is the graph as a whole.
 */
#define _GNU_SOURCE /* strerror_r returning the text */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/graph.h"
#include "kernels/expr.h"
#include "kernels/lex.h"
#include "runtime/sync.h"

/* The largest file gr_graph_load reads: far above any graph of GR_MAX_NODES nodes. */
#define SPEC_MAX_FILE_BYTES (1u << 20)

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
    const gr_kernel *def;
    tok inputs[GR_MAX_KERNEL_INPUTS];
    double scalars[GR_MAX_SCALARS];
    tok scalar_toks[GR_MAX_SCALARS];
    bool scalar_expr[GR_MAX_SCALARS]; /* a constant expression, not one number */
    uint32_t n_inputs, n_scalars; /* as written: may exceed the arrays, checked at once */
} kernel_stmt;

static gr_status perr(parser *p, spec_pos at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gr_status vperr(parser *p, gr_status st, spec_pos at, const char *fmt, va_list ap)
{
    char why[256];

    vsnprintf(why, sizeof(why), fmt, ap);
    return gr_error_set(p->err, st, GR_NO_INDEX, NULL, "%s:%zu:%zu: %s", p->name, at.line,
                        at.col, why);
}

static gr_status perr(parser *p, spec_pos at, const char *fmt, ...)
{
    va_list ap;
    gr_status st;

    va_start(ap, fmt);
    st = vperr(p, GR_ERR_INVALID_ARGUMENT, at, fmt, ap);
    va_end(ap);
    return st;
}

/* ------------------------------------------------------------------------------------
 * The lexer: kernels/lex.c's, with the spec's rules (kernels/lex.h says how they differ
 * from the expressions').
 * ---------------------------------------------------------------------------------- */

static const char *const spec_pairs[] = {"->", NULL};
static const gr_lex_rules spec_rules = {
    .flags = GR_LEX_LINES | GR_LEX_STRINGS | GR_LEX_DASH_IN_WORDS | GR_LEX_ARROWS |
             GR_LEX_LOOSE_NUMBERS | GR_LEX_ANY_EXPONENT_SIGN | GR_LEX_STRICT_ENDS,
    .punct = ":(),/=[]",
    .pairs = spec_pairs,
    /* Characters that may follow a word or number directly (beside blanks, a newline,
     * "->" and the end): punctuation, a comment, and the operators of expressions. */
    .enders = "#:(),/[]=*+-<>!",
};

static spec_pos cursor(const parser *p)
{
    spec_pos at = {p->lx.line, p->lx.at - p->lx.line_start + 1};
    return at;
}

/* `c` as a message shows it: 'c' when printable, else its byte value. */
static const char *show_char(char c, char *buf, size_t size)
{
    unsigned char u = (unsigned char)c;

    if (u >= 0x20 && u < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", u);
    return buf;
}

/* A lexical error: the token says where, p->lex_why what. */
static tok bad_token(parser *p, const gr_lex_tok *l)
{
    tok t = {T_BAD, p->text + l->pos, l->len, {l->line, l->col}};
    char shown[16];
    const char *where = l->bad == GR_LEX_BAD_IN_WORD
                            ? " in a name (names are letters, digits, '_', '.' and '-')"
                        : l->bad == GR_LEX_BAD_IN_NUMBER ? " in a number"
                                                         : "";

    if (l->bad == GR_LEX_BAD_STRING)
        snprintf(p->lex_why, sizeof(p->lex_why),
                 "a string that the line does not close with '\"'");
    else if (p->text[l->bad_at] == '\0')
        snprintf(p->lex_why, sizeof(p->lex_why),
                 "NUL byte in the text (a graph spec is text, not binary data)");
    else
        snprintf(p->lex_why, sizeof(p->lex_why), "unexpected %s%s",
                 show_char(p->text[l->bad_at], shown, sizeof(shown)), where);
    return t;
}

static tok next(parser *p)
{
    gr_lex_tok l = gr__lex_next(&p->lx);
    tok t = {T_EOF, p->text + l.pos, l.len, {l.line, l.col}};

    switch (l.kind) {
    case GR_LEX_END: t.kind = T_EOF; break;
    case GR_LEX_EOL: t.kind = T_EOL; break;
    case GR_LEX_WORD: t.kind = T_WORD; break;
    case GR_LEX_NUMBER: t.kind = T_NUMBER; break;
    case GR_LEX_STRING: t.kind = T_STRING; break;
    case GR_LEX_BAD: return bad_token(p, &l);
    case GR_LEX_PUNCT:
        switch (p->text[l.pos]) {
        case ':': t.kind = T_COLON; break;
        case '(': t.kind = T_LPAREN; break;
        case ')': t.kind = T_RPAREN; break;
        case ',': t.kind = T_COMMA; break;
        case '/': t.kind = T_SLASH; break;
        case '=': t.kind = T_EQUALS; break;
        case '[': t.kind = T_LBRACKET; break;
        case ']': t.kind = T_RBRACKET; break;
        default: t.kind = T_ARROW; break; /* "->" */
        }
        break;
    }
    return t;
}

/* The next token, without consuming it. */
static tok peek(parser *p)
{
    gr_lex at = p->lx;
    tok t = next(p);

    p->lx = at;
    return t;
}

static bool tok_is(const tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->kind == T_WORD && t->len == n && memcmp(t->p, s, n) == 0;
}

/* A token as messages quote it. */
static const char *show(const tok *t, char *buf, size_t size)
{
    if (t->kind == T_EOL)
        return "end of line";
    if (t->kind == T_EOF)
        return "end of file";
    if (t->len > 40)
        snprintf(buf, size, "'%.36s...'", t->p);
    else
        snprintf(buf, size, "'%.*s'", (int)t->len, t->p);
    return buf;
}

/* Refuse token `t`: the lexer's reason when it is bad, else "expected WHAT, found T". */
static gr_status expected(parser *p, const tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gr_status expected(parser *p, const tok *t, const char *fmt, ...)
{
    char what[160], shown[48];
    va_list ap;

    if (t->kind == T_BAD)
        return perr(p, t->pos, "%s", p->lex_why);
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return perr(p, t->pos, "expected %s, found %s", what, show(t, shown, sizeof(shown)));
}

/* ------------------------------------------------------------------------------------
 * Names and numbers.
 * ---------------------------------------------------------------------------------- */

static bool is_keyword(const tok *t)
{
    return tok_is(t, "buffer") || tok_is(t, "h2d") || tok_is(t, "kernel") || tok_is(t, "d2h") ||
           tok_is(t, "cuda") || tok_is(t, "param") || tok_is(t, "const");
}

/* Words strtof would read as a number: they cannot be names, or `mul(x, inf)` would be
 * ambiguous. */
static bool is_nonfinite_word(const tok *t)
{
    static const char *const words[] = {"nan", "inf", "infinity"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (t->len == strlen(words[i]) && strncasecmp(t->p, words[i], t->len) == 0)
            return true;
    return false;
}

/* Copy word `t` into `out` (GR_NAME_MAX + 1 bytes) as a name; `declared` when the statement
 * declares it, which also refuses the reserved words. */
static gr_status take_name(parser *p, const tok *t, bool declared, char *out)
{
    if (t->len > GR_NAME_MAX)
        return perr(p, t->pos, "name '%.24s...' is too long (%zu characters, at most %d)", t->p,
                    t->len, GR_NAME_MAX);
    if (declared && is_keyword(t))
        return perr(p, t->pos, "'%.*s' is a keyword and cannot be a name", (int)t->len, t->p);
    if (declared && is_nonfinite_word(t))
        return perr(p, t->pos, "'%.*s' reads as a number and cannot be a name", (int)t->len,
                    t->p);
    memcpy(out, t->p, t->len);
    out[t->len] = '\0';
    return GR_OK;
}

/* A scalar argument: C float syntax, finite as a double. Whether the kernel's scalar type
 * holds it is check_scalars' question, once the kernel is known. */
static gr_status take_number(parser *p, const tok *t, double *out)
{
    int n = (int)t->len;

    switch (gr__lex_number(t->p, t->len, out)) {
    case GR_LEX_NUM_OK:
        return GR_OK;
    case GR_LEX_NUM_TOO_LONG:
        return perr(p, t->pos, "number '%.24s...' is too long (at most %d characters)", t->p,
                    GR_LEX_NUMBER_MAX);
    case GR_LEX_NUM_INVALID:
        return perr(p, t->pos, "invalid number '%.*s' (scalars are C floats: 2, -0.5, 1e-3)",
                    n, t->p);
    case GR_LEX_NUM_NOT_FINITE:
        return perr(p, t->pos, "number '%.*s' is not finite (scalars must be finite)", n,
                    t->p);
    case GR_LEX_NUM_OVERFLOW:
        return perr(p, t->pos, "number '%.*s' is out of range (at most 1.8e308)", n, t->p);
    default:
        return perr(p, t->pos, "number '%.*s' is too small (it would be 0)", n, t->p);
    }
}

/* Whether scalar `v`, written at `t` (a number, or with `expr` a constant expression), is a
 * value of type `type`: float32 scalars are finite and not so small that they would round
 * to 0; int32 ones integers in range. */
static gr_status check_scalar(parser *p, const tok *t, bool expr, double v, gr_dtype type)
{
    char what[96];
    int n = (int)(t->len > 40 ? 40 : t->len);

    if (expr)
        snprintf(what, sizeof(what), "scalar '%.*s%s' (%g)", n, t->p, t->len > 40 ? "..." : "",
                 v);
    else
        snprintf(what, sizeof(what), "number '%.*s'", (int)t->len, t->p);
    /* The builder's rule (graph.h: gr__scalar_fit), said at the number. A number here is
     * never NaN. */
    switch (gr__scalar_fit(v, type)) {
    case GR_SCALAR_OVERFLOW:
        return perr(p, t->pos, "%s is out of float32 range (at most 3.4e38)", what);
    case GR_SCALAR_ZERO:
        return perr(p, t->pos, "%s is too small for float32 (it would be 0)", what);
    case GR_SCALAR_NOT_INT:
        return perr(p, t->pos, "%s is not an int32 (the kernel's scalar type)", what);
    default:
        return GR_OK;
    }
}

/* A term of a size ratio: a positive decimal integer of 32 bits. */
static gr_status take_ratio_term(parser *p, const tok *t, uint32_t *out)
{
    uint64_t v = 0;

    for (size_t i = 0; i < t->len; i++) {
        if (!gr__lex_is_digit(t->p[i]))
            return expected(p, t, "a size ratio NUM/DEN of positive integers");
        v = v * 10 + (uint64_t)(t->p[i] - '0');
        if (v > UINT32_MAX)
            return perr(p, t->pos, "size ratio term '%.*s%s' is too large (at most %u)",
                        (int)(t->len > 24 ? 24 : t->len), t->p, t->len > 24 ? "..." : "",
                        UINT32_MAX);
    }
    *out = (uint32_t)v;
    return GR_OK;
}

/* A host port: `prefix` ("in" or "out") and a decimal index below GR_MAX_PORTS. */
static gr_status take_port(parser *p, const tok *t, const char *prefix, const char *after,
                           uint32_t *out)
{
    size_t n = strlen(prefix), i;
    uint32_t v = 0;

    if (t->kind != T_WORD || t->len <= n || memcmp(t->p, prefix, n) != 0)
        return expected(p, t, "%s port %s0..%s%d after %s",
                        prefix[0] == 'i' ? "an input" : "an output", prefix, prefix,
                        GR_MAX_PORTS - 1, after);
    for (i = n; i < t->len; i++) {
        if (!gr__lex_is_digit(t->p[i]))
            return expected(p, t, "%s port %s0..%s%d after %s",
                            prefix[0] == 'i' ? "an input" : "an output", prefix, prefix,
                            GR_MAX_PORTS - 1, after);
        if (v < GR_MAX_PORTS)
            v = v * 10 + (uint32_t)(t->p[i] - '0');
    }
    if (v >= GR_MAX_PORTS)
        return perr(p, t->pos, "%s port '%.*s' is out of range (%s0..%s%d)",
                    prefix[0] == 'i' ? "input" : "output", (int)(t->len > 24 ? 24 : t->len),
                    t->p, prefix, prefix, GR_MAX_PORTS - 1);
    *out = v;
    return GR_OK;
}

static gr_status expect_end(parser *p, const char *after)
{
    tok t = next(p);

    if (t.kind == T_EOL || t.kind == T_EOF)
        return GR_OK;
    return expected(p, &t, "the end of the line after %s", after);
}

/* ------------------------------------------------------------------------------------
 * Name resolution against the graph being built.
 * ---------------------------------------------------------------------------------- */

static int find_param(const parser *p, const char *s, size_t len, uint32_t among);

static gr_status new_buffer_name(parser *p, const tok *t, const char *name)
{
    int b = gr_graph_buffer_index(p->g, name), q = find_param(p, t->p, t->len, p->n_params);

    if (b >= 0)
        return perr(p, t->pos, "buffer '%s' is defined twice (first on line %zu)", name,
                    p->buffer_pos[b].line);
    if (q >= 0)
        return perr(p, t->pos, "buffer '%s' has the name of param '%s' (line %zu): params and "
                               "buffers share names",
                    name, name, p->params[q].pos.line);
    return GR_OK;
}

static gr_status new_node_name(parser *p, const tok *t, const char *name)
{
    int n = gr_graph_node_index(p->g, name);

    if (n >= 0)
        return perr(p, t->pos, "node '%s' is defined twice (first on line %zu)", name,
                    p->node_pos[n].line);
    return GR_OK;
}

static gr_status known_buffer(parser *p, const tok *t, char *name)
{
    gr_status st = take_name(p, t, false, name);

    if (st != GR_OK)
        return st;
    if (gr_graph_buffer_index(p->g, name) < 0)
        return perr(p, t->pos, "unknown buffer '%s'%s", name,
                    gr_graph_node_index(p->g, name) >= 0 ? " (it is a node)" : "");
    return GR_OK;
}

static gr_status known_node(parser *p, const tok *t, char *name)
{
    gr_status st = take_name(p, t, false, name);

    if (st != GR_OK)
        return st;
    if (gr_graph_node_index(p->g, name) < 0)
        return perr(p, t->pos, "dependency on unknown node '%s'%s", name,
                    gr_graph_buffer_index(p->g, name) >= 0
                        ? " (it is a buffer: dependencies order nodes)"
                        : "");
    return GR_OK;
}

/* After the builder refused a statement the parser had checked: its reason, at the name. */
static gr_status builder_refused(parser *p, const tok *t)
{
    return perr(p, t->pos, "%s", gr_graph_error(p->g));
}

static void added_node(parser *p, const tok *t)
{
    p->node_pos[p->g->n_nodes - 1] = t->pos;
}

/* ------------------------------------------------------------------------------------
 * Statements. Each one starts after its keyword and consumes its end of line.
 * ---------------------------------------------------------------------------------- */

/* An element count: a positive decimal integer of at most 2^40 (a fixed buffer's size). */
static gr_status take_count(parser *p, const tok *t, uint64_t *out)
{
    uint64_t v = 0;

    if (t->kind != T_NUMBER)
        return expected(p, t, "an element count after '['");
    for (size_t i = 0; i < t->len; i++) {
        if (!gr__lex_is_digit(t->p[i]))
            return expected(p, t, "an element count (a positive integer) after '['");
        v = v * 10 + (uint64_t)(t->p[i] - '0');
        if (v > (1ull << 40))
            return perr(p, t->pos, "element count '%.*s%s' is too large (at most 2^40)",
                        (int)(t->len > 24 ? 24 : t->len), t->p, t->len > 24 ? "..." : "");
    }
    if (v == 0)
        return perr(p, t->pos, "a fixed buffer holds at least one element");
    *out = v;
    return GR_OK;
}

/* An element type's name (gr_dtype_name). */
static gr_status take_dtype(parser *p, const tok *t, gr_dtype *out)
{
    char word[16];

    if (t->len < sizeof(word)) {
        memcpy(word, t->p, t->len);
        word[t->len] = '\0';
        if (gr_dtype_parse(word, out) == GR_OK)
            return GR_OK;
    }
    return perr(p, t->pos,
                "unknown element type '%.*s' (types: float32, float16, bfloat16, float64, "
                "int32, uint8)",
                (int)(t->len > 24 ? 24 : t->len), t->p);
}

/* buffer NAME [TYPE] [NUM[/DEN] | '[' COUNT ']'] */
static gr_status parse_buffer(parser *p)
{
    char name[GR_NAME_MAX + 1], after[64];
    gr_buffer_desc desc = GR_BUFFER_DESC_INIT;
    uint32_t num = 1, den = 1;
    tok t = next(p), n, zero = {0};
    gr_status st;

    if (t.kind != T_WORD)
        return expected(p, &t, "a buffer name after 'buffer'");
    if ((st = take_name(p, &t, true, name)) != GR_OK)
        return st;
    n = t;
    t = next(p);
    if (t.kind == T_WORD) {
        if ((st = take_dtype(p, &t, &desc.dtype)) != GR_OK)
            return st;
        t = next(p);
    }
    if (t.kind == T_LBRACKET) {
        t = next(p);
        if ((st = take_count(p, &t, &desc.fixed_elems)) != GR_OK)
            return st;
        t = next(p);
        if (t.kind != T_RBRACKET)
            return expected(p, &t, "']' after the element count");
        t = next(p);
        if (t.kind != T_EOL && t.kind != T_EOF)
            return expected(p, &t, "the end of the line after the fixed size");
    } else if (t.kind == T_NUMBER) {
        if ((st = take_ratio_term(p, &t, &num)) != GR_OK)
            return st;
        if (num == 0)
            zero = t;
        t = next(p);
        if (t.kind == T_SLASH) {
            t = next(p);
            if (t.kind != T_NUMBER)
                return expected(p, &t, "a denominator after '/'");
            if ((st = take_ratio_term(p, &t, &den)) != GR_OK)
                return st;
            if (den == 0 && zero.p == NULL)
                zero = t;
            t = next(p);
        }
        if (zero.p != NULL)
            return perr(p, zero.pos, "buffer '%s': size ratio %u/%u must be positive", name,
                        num, den);
        if (t.kind != T_EOL && t.kind != T_EOF)
            return expected(p, &t, "the end of the line after the size ratio");
    } else if (t.kind != T_EOL && t.kind != T_EOF) {
        snprintf(after, sizeof(after), "buffer '%s'", name);
        return expected(p, &t,
                        "an element type, a size ratio NUM/DEN, a fixed size [COUNT] or the end "
                        "of the line after %s",
                        after);
    }
    if (p->pass != PASS_BUFFERS)
        return GR_OK;
    if ((st = new_buffer_name(p, &n, name)) != GR_OK)
        return st;
    desc.num = num;
    desc.den = den;
    if (gr_graph_add_buffer_desc(p->g, name, &desc) != GR_OK)
        return builder_refused(p, &n);
    p->buffer_pos[p->g->n_buffers - 1] = n.pos;
    return GR_OK;
}

/* const NAME [TYPE] '[' COUNT { ',' COUNT } ']': a constant of the job, of the shape given
 * (its elements the product of the counts). */
static gr_status parse_const(parser *p)
{
    char name[GR_NAME_MAX + 1];
    gr_buffer_desc desc = GR_BUFFER_DESC_INIT;
    uint64_t shape[GR_MAX_DIMS], elems = 1;
    uint32_t rank = 0;
    tok t = next(p), n;
    gr_status st;

    if (t.kind != T_WORD)
        return expected(p, &t, "a constant's name after 'const'");
    if ((st = take_name(p, &t, true, name)) != GR_OK)
        return st;
    n = t;
    t = next(p);
    if (t.kind == T_WORD) {
        if ((st = take_dtype(p, &t, &desc.dtype)) != GR_OK)
            return st;
        t = next(p);
    }
    if (t.kind != T_LBRACKET)
        return expected(p, &t, "its shape in brackets, such as [4096, 4096], after constant '%s'",
                        name);
    do {
        t = next(p);
        if (rank == GR_MAX_DIMS)
            return perr(p, t.pos, "constant '%s': at most %d dimensions", name, GR_MAX_DIMS);
        if ((st = take_count(p, &t, &shape[rank])) != GR_OK)
            return st;
        if (elems > (1ull << 40) / shape[rank])
            return perr(p, t.pos, "constant '%s' is too large (at most 2^40 elements)", name);
        elems *= shape[rank++];
        t = next(p);
    } while (t.kind == T_COMMA);
    if (t.kind != T_RBRACKET)
        return expected(p, &t, "',' or ']' in the shape of constant '%s'", name);
    t = next(p);
    if (t.kind != T_EOL && t.kind != T_EOF)
        return expected(p, &t, "the end of the line after the shape");
    if (p->pass != PASS_BUFFERS)
        return GR_OK;
    if ((st = new_buffer_name(p, &n, name)) != GR_OK)
        return st;
    desc.fixed_elems = elems;
    if (gr_graph_add_const(p->g, name, &desc, rank, shape) != GR_OK)
        return builder_refused(p, &n);
    p->buffer_pos[p->g->n_buffers - 1] = n.pos;
    return GR_OK;
}

/* The path a `cuda` statement names, as the process opens it: absolute as written; relative
 * to the spec's own directory when the spec was named by a path with a '/' in it (as
 * gr_graph_load names it), else to the current directory. */
static gr_status source_path(parser *p, const tok *t, char *out, size_t size)
{
    const char *slash = strrchr(p->name, '/');
    size_t dir = t->p[1] == '/' || slash == NULL ? 0 : (size_t)(slash - p->name) + 1;

    if (t->len <= 2)
        return perr(p, t->pos, "the path of a CUDA source file is empty");
    if (dir + (t->len - 2) + 1 > size)
        return perr(p, t->pos, "the path of the CUDA source file is too long");
    memcpy(out, p->name, dir);
    memcpy(out + dir, t->p + 1, t->len - 2);
    out[dir + t->len - 2] = '\0';
    return GR_OK;
}

/* cuda STRING: the kernels a CUDA C source file declares (gr_kernel_load_file), registered
 * in the first pass, so the file's kernels may be used anywhere in the spec. */
static gr_status parse_cuda(parser *p)
{
    char path[4096];
    gr_error_info inner;
    tok t = next(p);
    gr_status st;

    if (t.kind != T_STRING)
        return expected(p, &t, "a file name in double quotes after 'cuda'");
    if ((st = expect_end(p, "the file name")) != GR_OK)
        return st;
    if (p->pass != PASS_SOURCES)
        return GR_OK;
    /* Text given in memory may come from anyone (graphserve's ?spec=): it must not make
     * the process read its files, nor echo them back in a compiler's log. */
    if (!p->files)
        return perr(p, t.pos,
                    "a 'cuda' statement reads a file, which only a spec loaded from a file "
                    "may do (gr_graph_load); register the kernels first "
                    "(gr_kernel_load_file, graphrun run --kernels)");
    if ((st = source_path(p, &t, path, sizeof(path))) != GR_OK)
        return st;
    if ((st = gr_kernel_load_file(path, &inner)) != GR_OK) {
        gr_error_set(p->err, st, GR_NO_INDEX, NULL, "%s", inner.message);
        gr_error_prefix(p->err, "%s:%zu:%zu: ", p->name, t.pos.line, t.pos.col);
        return st;
    }
    return GR_OK;
}

/* The rest of the line, unread: the first pass reads only `cuda` statements. */
static void skip_line(parser *p)
{
    while (p->lx.at < p->len && p->text[p->lx.at] != '\n')
        p->lx.at++;
    if (p->lx.at < p->len) {
        p->lx.at++;
        p->lx.line++;
        p->lx.line_start = p->lx.at;
    }
}

/* The common start of node statements: NAME ':' */
static gr_status parse_node_head(parser *p, const char *keyword, tok *node, char *name)
{
    gr_status st;
    tok t;

    *node = next(p);
    if (node->kind != T_WORD)
        return expected(p, node, "a node name after '%s'", keyword);
    if ((st = take_name(p, node, true, name)) != GR_OK)
        return st;
    t = next(p);
    if (t.kind != T_COLON)
        return expected(p, &t, "':' after node name '%s'", name);
    return GR_OK;
}

/* h2d NAME ':' inN '->' BUFFER */
static gr_status parse_h2d(parser *p)
{
    char name[GR_NAME_MAX + 1], buffer[GR_NAME_MAX + 1], after[48];
    tok node, port, buf, t;
    uint32_t index;
    gr_status st;

    if ((st = parse_node_head(p, "h2d", &node, name)) != GR_OK)
        return st;
    port = next(p);
    if ((st = take_port(p, &port, "in", "':'", &index)) != GR_OK)
        return st;
    t = next(p);
    if (t.kind != T_ARROW)
        return expected(p, &t, "'->' after input port '%.*s'", (int)port.len, port.p);
    buf = next(p);
    if (buf.kind != T_WORD)
        return expected(p, &buf, "a buffer name after '->'");
    if ((st = take_name(p, &buf, false, buffer)) != GR_OK)
        return st;
    snprintf(after, sizeof(after), "buffer '%s'", buffer);
    if ((st = expect_end(p, after)) != GR_OK)
        return st;
    if (p->pass != PASS_NODES)
        return GR_OK;
    if ((st = new_node_name(p, &node, name)) != GR_OK ||
        (st = known_buffer(p, &buf, buffer)) != GR_OK)
        return st;
    if (gr_graph_add_h2d(p->g, name, index, buffer) != GR_OK)
        return builder_refused(p, &node);
    added_node(p, &node);
    return GR_OK;
}

/* d2h NAME ':' BUFFER '->' outN */
static gr_status parse_d2h(parser *p)
{
    char name[GR_NAME_MAX + 1], buffer[GR_NAME_MAX + 1], after[48];
    tok node, port, buf, t;
    uint32_t index;
    gr_status st;

    if ((st = parse_node_head(p, "d2h", &node, name)) != GR_OK)
        return st;
    buf = next(p);
    if (buf.kind != T_WORD)
        return expected(p, &buf, "a buffer name after ':'");
    if ((st = take_name(p, &buf, false, buffer)) != GR_OK)
        return st;
    t = next(p);
    if (t.kind != T_ARROW)
        return expected(p, &t, "'->' after buffer '%s'", buffer);
    port = next(p);
    if ((st = take_port(p, &port, "out", "'->'", &index)) != GR_OK)
        return st;
    snprintf(after, sizeof(after), "output port '%.*s'", (int)port.len, port.p);
    if ((st = expect_end(p, after)) != GR_OK)
        return st;
    if (p->pass != PASS_NODES)
        return GR_OK;
    if ((st = new_node_name(p, &node, name)) != GR_OK ||
        (st = known_buffer(p, &buf, buffer)) != GR_OK)
        return st;
    if (gr_graph_add_d2h(p->g, name, buffer, index) != GR_OK)
        return builder_refused(p, &node);
    added_node(p, &node);
    return GR_OK;
}

/* "1 input buffer and 2 scalars", "no scalars", ... */
static const char *count_text(uint32_t n, const char *what, char *buf, size_t size)
{
    if (n == 0)
        snprintf(buf, size, "no %ss", what);
    else
        snprintf(buf, size, "%u %s%s", n, what, n == 1 ? "" : "s");
    return buf;
}

static gr_status unknown_kernel(parser *p, const tok *t)
{
    char list[128];

    gr__kernel_list(list, sizeof(list));
    return perr(p, t->pos, "unknown kernel '%.*s' (kernels: %s)",
                (int)(t->len > 32 ? 32 : t->len), t->p, list);
}

static gr_status check_arity(parser *p, const kernel_stmt *k)
{
    const gr_kernel_def *d = &k->def->def;
    char want_in[24], want_sc[24], got[64], a[24], b[24];

    if (k->n_inputs == d->n_inputs && k->n_scalars == d->n_scalars)
        return GR_OK;
    count_text(d->n_inputs, "input buffer", want_in, sizeof(want_in));
    count_text(d->n_scalars, "scalar", want_sc, sizeof(want_sc));
    if (k->n_inputs == 0 && k->n_scalars == 0)
        snprintf(got, sizeof(got), "no arguments");
    else if (k->n_scalars == 0)
        count_text(k->n_inputs, "buffer", got, sizeof(got));
    else if (k->n_inputs == 0)
        count_text(k->n_scalars, "scalar", got, sizeof(got));
    else
        snprintf(got, sizeof(got), "%s and %s", count_text(k->n_inputs, "buffer", a, sizeof(a)),
                 count_text(k->n_scalars, "scalar", b, sizeof(b)));
    /* "scale-1" is one name, a buffer's: a param `scale` minus 1 needs spaces. */
    for (uint32_t i = 0; i < k->n_inputs && i < GR_MAX_KERNEL_INPUTS; i++) {
        const tok *t = &k->inputs[i];
        const char *minus = memchr(t->p, '-', t->len);

        for (uint32_t q = 0; minus != NULL && q < p->n_param_words; q++)
            if (strlen(p->param_words[q]) == (size_t)(minus - t->p) &&
                memcmp(p->param_words[q], t->p, (size_t)(minus - t->p)) == 0)
                return perr(p, k->kernel.pos, "kernel '%s' takes %s and %s, got %s ('%.*s' is "
                                              "one name: for param '%s' minus something, put "
                                              "spaces around the '-')",
                            d->name, want_in, want_sc, got, (int)t->len, t->p,
                            p->param_words[q]);
    }
    return perr(p, k->kernel.pos, "kernel '%s' takes %s and %s, got %s", d->name, want_in,
                want_sc, got);
}

/* ------------------------------------------------------------------------------------
 * Params and constant expressions.
 * ---------------------------------------------------------------------------------- */

/* The params declared above line `line` (params are kept in the order of the text). */
static uint32_t params_above(const parser *p, size_t line)
{
    uint32_t n = 0;

    while (n < p->n_params && p->params[n].pos.line < line)
        n++;
    return n;
}

static int find_param(const parser *p, const char *s, size_t len, uint32_t among)
{
    for (uint32_t i = 0; i < among; i++)
        if (strlen(p->params[i].name) == len && memcmp(p->params[i].name, s, len) == 0)
            return (int)i;
    return -1;
}

/* Where an expression that starts at byte `start` of the text (on the current line) has
 * its byte `offset`. */
static spec_pos pos_in_line(const parser *p, size_t start, size_t offset)
{
    spec_pos at = {p->lx.line, start + offset - p->lx.line_start + 1};
    return at;
}

/* The end of a constant expression that starts at byte `start`: the first ',' or ')' that
 * no '(' of its own opened, or the end of the line (a comment's '#' included); trailing
 * blanks are not part of it. */
static size_t const_extent(const parser *p, size_t start)
{
    size_t i = start, end;
    int depth = 0;

    for (; i < p->len; i++) {
        char c = p->text[i];

        if (c == '\n' || c == '#' || ((c == ',' || c == ')') && depth == 0))
            break;
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    }
    for (end = i; end > start && gr__lex_is_blank(p->text[end - 1]); end--)
        ;
    return end;
}

/* Refuse an expression error *e found in a text that starts at `base` (the text is on one
 * line, and a column counts bytes). */
static gr_status expr_refused(parser *p, spec_pos base, const gr_expr_error *e,
                              const char *hint)
{
    spec_pos at = {base.line, base.col + e->offset};

    if (e->status != GR_ERR_INVALID_ARGUMENT) /* the registry's: full, out of memory */
        return gr_error_set(p->err, e->status, GR_NO_INDEX, NULL, "%s:%zu:%zu: %s", p->name,
                            at.line, at.col, e->why);
    return perr(p, at, "%s%s", e->why, hint ? hint : "");
}

/* For an error naming an unknown name in the expression that starts at text[start]: a hint
 * when the name is a buffer (`buffer_fmt`, with the name) or a param declared further down;
 * "" otherwise. */
static void unknown_name_hint(parser *p, size_t start, const gr_expr_error *e,
                              const char *buffer_fmt, char *hint, size_t size)
{
    char name[GR_NAME_MAX + 1];

    hint[0] = '\0';
    if (!e->unknown_name || e->name_len > GR_NAME_MAX)
        return;
    memcpy(name, p->text + start + e->offset, e->name_len);
    name[e->name_len] = '\0';
    if (gr_graph_buffer_index(p->g, name) >= 0)
        snprintf(hint, size, buffer_fmt, name);
    else if (find_param(p, name, e->name_len, p->n_params) >= 0)
        snprintf(hint, size, ": param '%s' is declared below, and must be above its use", name);
}

/* Evaluate the constant expression text[start, end), which is at `base`, with the params
 * above its line; a name the constant cannot use gets a hint when it is a buffer. */
static gr_status eval_const(parser *p, size_t start, size_t end, spec_pos base, double *out)
{
    gr_expr_error e;
    char hint[128];
    gr_status st;

    st = gr__expr_eval_const(p->text + start, end - start, p->expr_params,
                             params_above(p, base.line), out, &e);
    if (st == GR_OK)
        return GR_OK;
    unknown_name_hint(p, start, &e,
                      ": '%s' is a buffer, and a scalar is a constant (for arithmetic on "
                      "buffers, use expr)",
                      hint, sizeof(hint));
    return expr_refused(p, base, &e, hint);
}

/* param NAME '=' CONSTANT, defined in the buffers' pass, in the order of the text. */
static gr_status parse_param(parser *p)
{
    char name[GR_NAME_MAX + 1];
    tok t = next(p), eq;
    size_t start, end;
    double v = 0;
    gr_status st;
    int other;

    if (t.kind != T_WORD)
        return expected(p, &t, "a param name after 'param'");
    if ((st = take_name(p, &t, true, name)) != GR_OK)
        return st;
    if (!gr__expr_name_ok(t.p, t.len))
        return perr(p, t.pos, "param '%s' cannot be named in an expression (%s)", name,
                    memchr(t.p, '-', t.len) ? "'-' would read as a minus"
                                            : "it is a function's name");
    eq = next(p);
    if (eq.kind != T_EQUALS)
        return expected(p, &eq, "'=' after param name '%s'", name);
    while (p->lx.at < p->len && gr__lex_is_blank(p->text[p->lx.at]))
        p->lx.at++;
    start = p->lx.at;
    end = const_extent(p, start);
    if (end == start) {
        tok none = peek(p);
        return expected(p, &none, "a constant after '='");
    }
    if (p->pass == PASS_BUFFERS) {
        int b = gr_graph_buffer_index(p->g, name);

        if ((other = find_param(p, t.p, t.len, p->n_params)) >= 0)
            return perr(p, t.pos, "param '%s' is defined twice (first on line %zu)", name,
                        p->params[other].pos.line);
        if (b >= 0)
            return perr(p, t.pos, "param '%s' has the name of buffer '%s' (line %zu): params "
                                  "and buffers share names",
                        name, name, p->buffer_pos[b].line);
        if (p->n_params == GR_EXPR_MAX_PARAMS)
            return perr(p, t.pos, "too many params (at most %d)", GR_EXPR_MAX_PARAMS);
        if ((st = eval_const(p, start, end, pos_in_line(p, start, 0), &v)) != GR_OK)
            return st;
        gr_strlcpy(p->params[p->n_params].name, name, sizeof(p->params[0].name));
        p->params[p->n_params].value = v;
        p->params[p->n_params].pos = t.pos;
        p->expr_params[p->n_params] =
            (gr_expr_param){p->params[p->n_params].name, t.len, v};
        p->n_params++;
    } else {
        gr_expr_error e;

        if (gr__expr_check_syntax(p->text + start, end - start, &e) != GR_OK)
            return expr_refused(p, pos_in_line(p, start, 0), &e, NULL);
    }
    p->lx.at = end;
    return expect_end(p, "the constant");
}

/* Whether an operator of a constant expression (or a call's '(') follows the token just
 * read. */
static bool operator_follows(const parser *p)
{
    size_t i = p->lx.at;

    while (i < p->len && gr__lex_is_blank(p->text[i]))
        i++;
    if (i >= p->len)
        return false;
    switch (p->text[i]) {
    case '*': case '/': case '+': case '(': case '<': case '>': case '=': case '!':
        return true;
    case '-':
        return !gr__lex_arrow_at(&p->lx, i);
    default:
        return false;
    }
}

/* Whether the argument that starts with token t is a constant expression rather than a
 * buffer name or a plain number. */
static bool arg_is_constant(const parser *p, const tok *t)
{
    if (t->kind == T_LPAREN)
        return true;
    if (t->kind == T_WORD) {
        for (uint32_t i = 0; i < p->n_param_words; i++)
            if (strlen(p->param_words[i]) == t->len &&
                memcmp(p->param_words[i], t->p, t->len) == 0)
                return true;
        return operator_follows(p);
    }
    if (t->kind != T_NUMBER)
        return false;
    if (operator_follows(p))
        return true;
    /* A sign before a name or a parenthesis ("-scale", "- 2"), but not "-inf". */
    if (t->p[0] == '+' || t->p[0] == '-') {
        tok rest = {T_WORD, t->p + 1, t->len - 1, t->pos};

        return t->len == 1 || (gr__lex_is_alpha(t->p[1]) && !is_nonfinite_word(&rest));
    }
    return false;
}

/* The arguments after '(': buffer names, then scalars (numbers or constant expressions of
 * numbers and params), up to and including ')'. Constant expressions are read as raw text,
 * checked in the buffers' pass and evaluated in the nodes' (when every buffer is known,
 * for the message of a buffer named in one). */
static gr_status parse_args(parser *p, kernel_stmt *k)
{
    char name[GR_NAME_MAX + 1];
    gr_status st;
    tok t = next(p), last;

    if (t.kind == T_RPAREN)
        return GR_OK;
    for (;;) {
        if (t.kind == T_WORD && is_nonfinite_word(&t))
            return perr(p, t.pos, "number '%.*s' is not finite (scalars must be finite)",
                        (int)t.len, t.p);
        if (arg_is_constant(p, &t)) {
            size_t start = (size_t)(t.p - p->text), end = const_extent(p, start);
            double v = 0.0;

            if (p->pass == PASS_NODES) {
                if ((st = eval_const(p, start, end, t.pos, &v)) != GR_OK)
                    return st;
            } else {
                gr_expr_error e;

                if (gr__expr_check_syntax(p->text + start, end - start, &e) != GR_OK)
                    return expr_refused(p, t.pos, &e, NULL);
            }
            t.len = end - start;
            p->lx.at = end;
            if (k->n_scalars < GR_MAX_SCALARS) {
                k->scalars[k->n_scalars] = v;
                k->scalar_toks[k->n_scalars] = t;
                k->scalar_expr[k->n_scalars] = true;
            }
            if (k->n_scalars < UINT32_MAX)
                k->n_scalars++;
        } else if (t.kind == T_WORD) {
            if (k->n_scalars > 0)
                return perr(p, t.pos,
                            "buffer '%.*s' after a scalar: buffers come first, then scalars",
                            (int)(t.len > GR_NAME_MAX ? GR_NAME_MAX : t.len), t.p);
            if ((st = take_name(p, &t, false, name)) != GR_OK)
                return st;
            if (k->n_inputs < GR_MAX_KERNEL_INPUTS)
                k->inputs[k->n_inputs] = t;
            if (k->n_inputs < UINT32_MAX)
                k->n_inputs++;
        } else if (t.kind == T_NUMBER) {
            double v = 0.0;

            if ((st = take_number(p, &t, &v)) != GR_OK)
                return st;
            if (k->n_scalars < GR_MAX_SCALARS) {
                k->scalars[k->n_scalars] = v;
                k->scalar_toks[k->n_scalars] = t;
            }
            if (k->n_scalars < UINT32_MAX)
                k->n_scalars++;
        } else {
            return expected(p, &t, "an argument (a buffer name or a number)");
        }
        last = t;
        t = next(p);
        if (t.kind == T_RPAREN)
            return GR_OK;
        if (t.kind != T_COMMA)
            return expected(p, &t, "',' or ')' after argument '%.*s'",
                            (int)(last.len > 32 ? 32 : last.len), last.p);
        t = next(p);
    }
}

/* Each scalar against the scalar type of the kernel version the buffers' types select,
 * pointing at the number; when no version fits, the builder refuses the node, naming the
 * types there are. */
static gr_status check_scalars(parser *p, const kernel_stmt *k, const char *kname,
                               char inputs[][GR_NAME_MAX + 1], const char *out)
{
    gr_dtype in[GR_MAX_KERNEL_INPUTS];
    const gr_kernel *def;
    gr_status st;
    int b;

    for (uint32_t i = 0; i < k->n_inputs; i++) {
        if ((b = gr_graph_buffer_index(p->g, inputs[i])) < 0)
            return GR_OK;
        in[i] = p->g->buffers[b].dtype;
    }
    if ((b = gr_graph_buffer_index(p->g, out)) < 0)
        return GR_OK;
    def = gr__kernel_find_typed(kname, in, k->n_inputs, p->g->buffers[b].dtype);
    for (uint32_t i = 0; def != NULL && i < k->n_scalars; i++)
        if ((st = check_scalar(p, &k->scalar_toks[i], k->scalar_expr[i], k->scalars[i],
                               def->def.scalar_dtype[i])) != GR_OK)
            return st;
    return GR_OK;
}

/* The arguments of expr after '(': input buffers, then the expression in double quotes,
 * then ')'; the expression's syntax is checked at once. */
static gr_status parse_expr_args(parser *p, kernel_stmt *k, tok *text)
{
    char name[GR_NAME_MAX + 1];
    gr_expr_error e;
    gr_status st;
    tok t = next(p);

    for (;;) {
        if (t.kind == T_STRING)
            break;
        if (t.kind != T_WORD)
            return expected(p, &t, "an input buffer, or the expression in double quotes");
        if ((st = take_name(p, &t, false, name)) != GR_OK)
            return st;
        if (k->n_inputs < GR_MAX_KERNEL_INPUTS)
            k->inputs[k->n_inputs] = t;
        k->n_inputs++;
        t = next(p);
        if (t.kind != T_COMMA)
            return expected(p, &t, "',' and the expression in double quotes after input "
                                   "buffer '%s'", name);
        t = next(p);
    }
    *text = t;
    if (k->n_inputs == 0)
        return perr(p, k->kernel.pos, "expr takes its input buffers before the expression: "
                                      "expr(x, \"x * 2\")");
    if (k->n_inputs > GR_MAX_KERNEL_INPUTS)
        return perr(p, k->kernel.pos, "expr takes at most %d input buffers, got %u",
                    GR_MAX_KERNEL_INPUTS, k->n_inputs);
    if (gr__expr_check_syntax(t.p + 1, t.len - 2, &e) != GR_OK) {
        spec_pos in = {t.pos.line, t.pos.col + 1};
        return expr_refused(p, in, &e, NULL);
    }
    t = next(p);
    if (t.kind != T_RPAREN)
        return expected(p, &t, "')' after the expression");
    return GR_OK;
}

/* An expr node, its names checked: compile and register the expression for the buffers'
 * types (or find it registered), into `kname`. */
static gr_status register_expr(parser *p, const kernel_stmt *k, const tok *text,
                               char inputs[][GR_NAME_MAX + 1], const char *out, char *kname)
{
    size_t start = (size_t)(text->p + 1 - p->text);
    spec_pos in = {text->pos.line, text->pos.col + 1};
    gr_expr_env env;
    gr_expr_error e;
    char hint[128];

    memset(&env, 0, sizeof(env));
    env.n_inputs = k->n_inputs;
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        const tok *in = &k->inputs[i];

        for (uint32_t j = 0; j < i; j++)
            if (strcmp(inputs[j], inputs[i]) == 0)
                return perr(p, in->pos, "buffer '%s' is an input of expr twice", inputs[i]);
        if (!gr__expr_name_ok(in->p, in->len))
            return perr(p, in->pos, "buffer '%s' cannot be named in an expression (%s): "
                                    "rename it",
                        inputs[i], memchr(in->p, '-', in->len) ? "'-' would read as a minus"
                                                               : "it is a function's name");
        env.input_names[i] = inputs[i];
        env.input_dtype[i] = p->g->buffers[gr_graph_buffer_index(p->g, inputs[i])].dtype;
    }
    env.out_dtype = p->g->buffers[gr_graph_buffer_index(p->g, out)].dtype;
    env.params = p->expr_params;
    env.n_params = params_above(p, in.line);
    if (gr__expr_register(text->p + 1, text->len - 2, &env, kname, &e) == GR_OK)
        return GR_OK;
    unknown_name_hint(p, start, &e,
                      ": buffer '%s' is not an input; list it before the expression", hint,
                      sizeof(hint));
    return expr_refused(p, in, &e, hint);
}

/* An unknown buffer among a kernel's arguments: "scale-1" (one name) after a param
 * `scale` is worth a hint. */
static gr_status known_arg_buffer(parser *p, const tok *t, char *name)
{
    const char *minus = memchr(t->p, '-', t->len);
    gr_status st = known_buffer(p, t, name);

    if (st == GR_OK)
        return GR_OK;
    if (minus != NULL &&
        find_param(p, t->p, (size_t)(minus - t->p), params_above(p, t->pos.line)) >= 0)
        return perr(p, t->pos, "unknown buffer '%s' (for param '%.*s' minus something, put "
                               "spaces around the '-': names may contain '-')",
                    name, (int)(minus - t->p), t->p);
    return st;
}

/* kernel NAME ':' KERNEL '(' ARGS ')' '->' BUFFER, or with `expr` as the KERNEL,
 * expr '(' BUFFERS ',' STRING ')' */
static gr_status parse_kernel(parser *p)
{
    char name[GR_NAME_MAX + 1], kname[GR_NAME_MAX + 1], out[GR_NAME_MAX + 1], after[48];
    char inputs[GR_MAX_KERNEL_INPUTS][GR_NAME_MAX + 1];
    const char *in_ptrs[GR_MAX_KERNEL_INPUTS];
    kernel_stmt k;
    gr_status st;
    bool expr;
    tok t, text = {0};

    memset(&k, 0, sizeof(k));
    if ((st = parse_node_head(p, "kernel", &k.node, name)) != GR_OK)
        return st;
    k.kernel = next(p);
    if (k.kernel.kind != T_WORD)
        return expected(p, &k.kernel, "a kernel name after ':'");
    expr = tok_is(&k.kernel, "expr");
    if (k.kernel.len <= GR_NAME_MAX) {
        memcpy(kname, k.kernel.p, k.kernel.len);
        kname[k.kernel.len] = '\0';
        k.def = expr ? NULL : gr__kernel_find(kname);
    }
    if (k.def == NULL && !expr)
        return unknown_kernel(p, &k.kernel);
    t = next(p);
    if (t.kind != T_LPAREN)
        return expected(p, &t, "'(' after kernel name '%s'", kname);
    if (expr) {
        if ((st = parse_expr_args(p, &k, &text)) != GR_OK)
            return st;
    } else if ((st = parse_args(p, &k)) != GR_OK || (st = check_arity(p, &k)) != GR_OK) {
        return st;
    }
    t = next(p);
    if (t.kind != T_ARROW)
        return expected(p, &t, "'->' and the output buffer after ')'");
    k.out = next(p);
    if (k.out.kind != T_WORD)
        return expected(p, &k.out, "an output buffer name after '->'");
    if ((st = take_name(p, &k.out, false, out)) != GR_OK)
        return st;
    snprintf(after, sizeof(after), "buffer '%s'", out);
    if ((st = expect_end(p, after)) != GR_OK)
        return st;
    if (p->pass != PASS_NODES)
        return GR_OK;
    if ((st = new_node_name(p, &k.node, name)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < k.n_inputs; i++) {
        if ((st = known_arg_buffer(p, &k.inputs[i], inputs[i])) != GR_OK)
            return st;
        in_ptrs[i] = inputs[i];
    }
    if ((st = known_buffer(p, &k.out, out)) != GR_OK)
        return st;
    if (expr) {
        if ((st = register_expr(p, &k, &text, inputs, out, kname)) != GR_OK)
            return st;
    } else if ((st = check_scalars(p, &k, kname, inputs, out)) != GR_OK) {
        return st;
    }
    if (gr_graph_add_kernel_f64(p->g, name, kname, in_ptrs, k.n_inputs, out, k.scalars,
                                k.n_scalars) != GR_OK)
        return builder_refused(p, &k.node);
    added_node(p, &k.node);
    return GR_OK;
}

/* ------------------------------------------------------------------------------------
 * Dependencies.
 * ---------------------------------------------------------------------------------- */

/* Node j follows node i because of buffer b (the first reason found is kept). */
static void note_flow(parser *p, uint64_t *cand, uint32_t j, int32_t i, int kind, int32_t b)
{
    if (i < 0 || (uint32_t)i == j || ((*cand >> i) & 1))
        return;
    *cand |= 1ull << i;
    p->flow[j][i].kind = (uint8_t)kind;
    p->flow[j][i].buffer = (uint8_t)b;
}

/*
 * The dependencies the data flow implies, in the order of the text (nodes are numbered in
 * it): a node that reads a buffer follows the last node above it that wrote it; a node
 * that writes one follows the last writer and every reader since. So every implied edge
 * goes down the text (they cannot make a cycle), and no two nodes that share a buffer one
 * of them writes are left unordered. The graph gets the edges no other implied edge
 * already covers: a reader that the next writer follows through another reader needs no
 * edge of its own.
 */
static gr_status add_implied_deps(parser *p)
{
    gr_graph *g = p->g;
    int32_t writer[GR_MAX_BUFFERS];
    uint64_t readers[GR_MAX_BUFFERS] = {0}, anc[GR_MAX_NODES];

    for (uint32_t b = 0; b < GR_MAX_BUFFERS; b++)
        writer[b] = -1;
    for (uint32_t j = 0; j < g->n_nodes; j++) {
        const gr_node *n = &g->nodes[j];
        uint64_t cand = 0, keep;

        for (uint32_t r = 0; r < n->n_reads; r++)
            note_flow(p, &cand, j, writer[n->reads[r]], FLOW_READ_AFTER_WRITE, n->reads[r]);
        for (uint32_t r = 0; r < n->n_reads; r++)
            readers[n->reads[r]] |= 1ull << j;
        if (n->write != GR_NO_BUFFER) {
            int32_t b = n->write;

            note_flow(p, &cand, j, writer[b], FLOW_WRITE_AFTER_WRITE, b);
            for (uint32_t i = 0; i < j; i++)
                if ((readers[b] >> i) & 1)
                    note_flow(p, &cand, j, (int32_t)i, FLOW_WRITE_AFTER_READ, b);
            writer[b] = (int32_t)j;
            readers[b] = 0;
        }
        anc[j] = 0;
        keep = cand;
        for (uint32_t i = 0; i < j; i++)
            if ((cand >> i) & 1) {
                anc[j] |= (1ull << i) | anc[i];
                keep &= ~anc[i];
            }
        p->implied[j] = keep;
        for (uint32_t i = 0; i < j; i++)
            if (((keep >> i) & 1) && gr_graph_add_dep(g, g->nodes[i].name, n->name) != GR_OK)
                return builder_refused(p, &(tok){T_WORD, NULL, 0, p->node_pos[j]});
    }
    return GR_OK;
}

/* Why node j follows node i, for messages. */
static void flow_text(const parser *p, uint32_t j, uint32_t i, char *buf, size_t size)
{
    const gr_graph *g = p->g;
    int kind = p->flow[j][i].kind;

    snprintf(buf, size, "node '%s' (line %zu) %s buffer '%s', which '%s' (line %zu) %s above it",
             g->nodes[j].name, p->node_pos[j].line,
             kind == FLOW_READ_AFTER_WRITE ? "reads" : "writes",
             g->buffers[p->flow[j][i].buffer].name, g->nodes[i].name, p->node_pos[i].line,
             kind == FLOW_WRITE_AFTER_READ ? "reads" : kind == FLOW_WRITE_AFTER_WRITE
                                                           ? "also writes" : "writes");
}

/*
 * Before the explicit dependency `before -> after` (written at `at`) is added: refuse it
 * when `after` already comes before `before` through an edge the data flow implies. A
 * cycle of explicit edges alone is left to finalize, which spells it out.
 */
static gr_status check_contradiction(parser *p, spec_pos at, uint32_t before, uint32_t after)
{
    const gr_graph *g = p->g;
    uint32_t queue[GR_MAX_NODES], head = 0, tail = 0;
    int32_t next_on_path[GR_MAX_NODES];
    uint64_t seen = 1ull << before;
    char why[200], path[160];
    size_t used = 0;

    /* Breadth first from `before` back along predecessors: the shortest path from `after`,
     * each node's successor on it in next_on_path. */
    queue[tail++] = before;
    while (head < tail && !((seen >> after) & 1)) {
        uint32_t v = queue[head++];

        for (uint32_t u = 0; u < g->n_nodes; u++)
            if (((g->nodes[v].preds >> u) & 1) && !((seen >> u) & 1)) {
                seen |= 1ull << u;
                next_on_path[u] = (int32_t)v;
                queue[tail++] = u;
            }
    }
    if (!((seen >> after) & 1))
        return GR_OK;
    for (uint32_t u = after; u != before; u = (uint32_t)next_on_path[u]) {
        uint32_t v = (uint32_t)next_on_path[u];
        int n;

        if (!((p->implied[v] >> u) & 1))
            continue;
        flow_text(p, v, u, why, sizeof(why));
        path[0] = '\0';
        if (!(u == after && v == before)) {
            for (uint32_t w = after;; w = (uint32_t)next_on_path[w]) {
                n = snprintf(path + used, sizeof(path) - used, "%s%s", w == after ? " (" : " -> ",
                             g->nodes[w].name);
                if (n < 0 || (size_t)n >= sizeof(path) - used) {
                    snprintf(path + sizeof(path) - 6, 6, "...)");
                    break;
                }
                used += (size_t)n;
                if (w == before) {
                    snprintf(path + used, sizeof(path) - used, ")");
                    break;
                }
            }
        }
        return perr(p, at, "dependency '%s -> %s' contradicts the data flow: %s, so '%s' runs "
                           "before '%s'%s",
                    g->nodes[before].name, g->nodes[after].name, why, g->nodes[after].name,
                    g->nodes[before].name, path);
    }
    return GR_OK;
}

/* A node that reads a buffer no node above it writes, while one below does: the data flow
 * puts the writer after it, so it can never read what that writes. Refused here, with the
 * reason; a buffer no node writes at all is finalize's to refuse. */
static gr_status check_reads_follow_writes(parser *p)
{
    const gr_graph *g = p->g;

    for (uint32_t j = 0; j < g->n_nodes; j++)
        for (uint32_t r = 0; r < g->nodes[j].n_reads; r++) {
            int32_t b = g->nodes[j].reads[r];
            int32_t above = -1, below = -1;

            for (uint32_t i = 0; i < g->n_nodes; i++)
                if (g->nodes[i].write == b && i != j) {
                    if (i < j)
                        above = (int32_t)i;
                    else if (below < 0)
                        below = (int32_t)i;
                }
            if (above >= 0 || below < 0)
                continue;
            if (p->err != NULL)
                gr_strlcpy(p->err->node, g->nodes[j].name, sizeof(p->err->node));
            return perr(p, p->node_pos[j],
                        "node '%s' reads buffer '%s' before any node writes it: '%s' (line "
                        "%zu) writes it below, and nodes that share a buffer run in the order "
                        "of the text",
                        g->nodes[j].name, g->buffers[b].name, g->nodes[below].name,
                        p->node_pos[below].line);
        }
    return GR_OK;
}

/* NODE '->' NODE { '->' NODE }, the first NODE already read and followed by '->'. */
static gr_status parse_chain(parser *p, tok first)
{
    char before[GR_NAME_MAX + 1], after[GR_NAME_MAX + 1];
    gr_status st;
    tok t, prev = first;

    if ((st = take_name(p, &first, false, before)) != GR_OK)
        return st;
    if (p->pass == PASS_DEPS && (st = known_node(p, &first, before)) != GR_OK)
        return st;
    for (;;) {
        t = next(p);
        if (t.kind == T_EOL || t.kind == T_EOF)
            return GR_OK;
        if (t.kind != T_ARROW)
            return expected(p, &t, "'->' or the end of the line after '%s'", before);
        t = next(p);
        if (t.kind != T_WORD)
            return expected(p, &t, "a node name after '->'");
        if ((st = take_name(p, &t, false, after)) != GR_OK)
            return st;
        if (p->pass == PASS_DEPS) {
            if ((st = known_node(p, &t, after)) != GR_OK)
                return st;
            if (strcmp(before, after) == 0)
                return perr(p, t.pos, "node '%s' cannot depend on itself", after);
            if ((st = check_contradiction(p, prev.pos,
                                          (uint32_t)gr_graph_node_index(p->g, before),
                                          (uint32_t)gr_graph_node_index(p->g, after))) != GR_OK)
                return st;
            if (gr_graph_add_dep(p->g, before, after) != GR_OK)
                return builder_refused(p, &t);
        }
        memcpy(before, after, sizeof(before));
        prev = t;
    }
}

static gr_status parse_statement(parser *p)
{
    tok t = next(p), n;
    char shown[48];

    if (p->pass == PASS_SOURCES) {
        /* Only a well-formed `cuda` line loads its file now, and param lines' names are
         * noted; the next pass reports syntax errors, every line's in text order. */
        if (tok_is(&t, "param")) {
            tok w = peek(p);

            if (w.kind == T_WORD && w.len <= GR_NAME_MAX &&
                p->n_param_words < GR_EXPR_MAX_PARAMS) {
                memcpy(p->param_words[p->n_param_words], w.p, w.len);
                p->param_words[p->n_param_words++][w.len] = '\0';
            }
        }
        if (tok_is(&t, "cuda")) {
            gr_lex at = p->lx;
            tok path = next(p), end = next(p);

            p->lx = at;
            if (path.kind == T_STRING && (end.kind == T_EOL || end.kind == T_EOF))
                return parse_cuda(p);
        }
        if (t.kind != T_EOL && t.kind != T_EOF)
            skip_line(p);
        return GR_OK;
    }
    if (t.kind == T_EOL || t.kind == T_EOF)
        return GR_OK;
    if (t.kind != T_WORD)
        return expected(p, &t, "a statement (buffer, const, h2d, kernel, d2h, cuda, param) or "
                               "a dependency chain");
    if (tok_is(&t, "buffer"))
        return parse_buffer(p);
    if (tok_is(&t, "const"))
        return parse_const(p);
    if (tok_is(&t, "h2d"))
        return parse_h2d(p);
    if (tok_is(&t, "kernel"))
        return parse_kernel(p);
    if (tok_is(&t, "d2h"))
        return parse_d2h(p);
    if (tok_is(&t, "cuda"))
        return parse_cuda(p);
    if (tok_is(&t, "param"))
        return parse_param(p);
    n = peek(p);
    if (n.kind == T_ARROW)
        return parse_chain(p, t);
    return perr(p, t.pos,
                "unknown statement %s: expected buffer, const, h2d, kernel, d2h, cuda, param or "
                "a dependency chain 'a -> b'",
                show(&t, shown, sizeof(shown)));
}

static gr_status run_pass(parser *p, spec_pass pass)
{
    gr_status st;

    p->pass = pass;
    gr__lex_init(&p->lx, p->text, p->len, &spec_rules);
    while (p->lx.at < p->len)
        if ((st = parse_statement(p)) != GR_OK)
            return st;
    return GR_OK;
}

static gr_status finalize(parser *p)
{
    const gr_graph *g = p->g;
    spec_pos at;

    if (gr_graph_finalize(p->g) == GR_OK)
        return GR_OK;
    if (g->error_node >= 0 && (uint32_t)g->error_node < g->n_nodes) {
        at = p->node_pos[g->error_node];
        perr(p, at, "%s", g->error);
        if (p->err != NULL)
            gr_strlcpy(p->err->node, g->nodes[g->error_node].name, sizeof(p->err->node));
        return GR_ERR_INVALID_ARGUMENT;
    }
    if (g->error_buffer >= 0 && (uint32_t)g->error_buffer < g->n_buffers)
        return perr(p, p->buffer_pos[g->error_buffer], "%s", g->error);
    /* The graph as a whole: where the text ends, where what is missing would go. */
    return perr(p, cursor(p), "%s", g->error);
}

/* gr_graph_parse, with `files` saying whether `cuda` statements may read files. */
static gr_status parse_spec(const char *text, size_t len, const char *name, bool files,
                            gr_graph **out, gr_error_info *err)
{
    parser *p;
    gr_status st;

    if (out != NULL)
        *out = NULL;
    if (out == NULL || (text == NULL && len > 0))
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "gr_graph_parse: %s is NULL", out == NULL ? "out" : "text");
    /* On the heap: the position tables make the parser too large for a small thread stack. */
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                            "out of memory parsing a graph spec");
    p->text = text ? text : "";
    p->len = len;
    p->name = name ? name : "<graph spec>";
    p->err = err;
    p->files = files;
    if ((st = gr_graph_create(&p->g)) != GR_OK) {
        gr_error_set(err, st, GR_NO_INDEX, NULL, "cannot create a graph: %s",
                     gr_status_str(st));
        goto out_free_parser;
    }
    if ((st = run_pass(p, PASS_SOURCES)) != GR_OK || (st = run_pass(p, PASS_BUFFERS)) != GR_OK ||
        (st = run_pass(p, PASS_NODES)) != GR_OK || (st = add_implied_deps(p)) != GR_OK ||
        (st = run_pass(p, PASS_DEPS)) != GR_OK || (st = check_reads_follow_writes(p)) != GR_OK ||
        (st = finalize(p)) != GR_OK)
        goto out_destroy_graph;
    *out = p->g;
    free(p);
    return GR_OK;

out_destroy_graph:
    gr_graph_destroy(p->g);
out_free_parser:
    free(p);
    return st;
}

gr_status gr_graph_parse(const char *text, size_t len, const char *name, gr_graph **out,
                         gr_error_info *err)
{
    return parse_spec(text, len, name, false, out, err);
}

gr_status gr_graph_load(const char *path, gr_graph **out, gr_error_info *err)
{
    size_t cap = 4096, used = 0;
    char *buf, *grown, why[96];
    gr_status st;
    FILE *f;

    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL)
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "gr_graph_load: %s is NULL", path == NULL ? "path" : "out");
    f = fopen(path, "rb");
    if (f == NULL)
        return gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                            "%s: cannot read: %s", path, strerror_r(errno, why, sizeof(why)));
    buf = malloc(cap);
    if (buf == NULL) {
        fclose(f);
        return gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                            "%s: out of memory reading it", path);
    }
    /* Read until a short read (end of file or error), doubling the buffer while it fills. */
    for (;;) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap || cap > SPEC_MAX_FILE_BYTES)
            break;
        grown = realloc(buf, cap * 2);
        if (grown == NULL) {
            st = gr_error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                              "%s: out of memory reading it", path);
            goto out_free;
        }
        buf = grown;
        cap *= 2;
    }
    if (ferror(f)) {
        /* fread leaves errno as the failed read(2) set it (EISDIR for a directory...). */
        st = gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                          "%s: cannot read: %s", path, strerror_r(errno, why, sizeof(why)));
        goto out_free;
    }
    if (used > SPEC_MAX_FILE_BYTES) {
        st = gr_error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                          "%s: larger than %u bytes: not a graph spec", path,
                          SPEC_MAX_FILE_BYTES);
        goto out_free;
    }
    st = parse_spec(buf, used, path, true, out, err);

out_free:
    free(buf);
    fclose(f);
    return st;
}

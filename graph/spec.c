/*
 * spec.c - the graph spec text format (docs/GRAPH_SPEC.md): text to a finalized graph.
 *
 * The text is untrusted (files, fuzzers): it is read as bytes [0, len), never as a C string,
 * so a NUL byte or a missing final newline cannot make the parser read past the end; every
 * token is a (pointer, length) slice of the text, copied only into fixed buffers after its
 * length has been checked. Nothing is allocated but the parser's state and the graph, and
 * every failure frees both.
 *
 * The graph is built through the public builder, in three passes over the text: the first
 * checks the syntax of every line and adds the buffers, the second adds the nodes, the third
 * the dependencies. So statements may come in any order (a chain may name nodes declared
 * below it), and the builder, which wants names declared before use, is still only called
 * with names that exist. Each pass re-lexes the text (a spec is small); passes two and three
 * meet no syntax error, since the first would have reported it.
 *
 * Every error names the text, a line and a column (1-based, in bytes) and the reason. The
 * parser checks what it can point at precisely (duplicates, unknown names, kernel arities)
 * before calling the builder; what the builder still refuses is reported at the statement's
 * name. Finalize's refusals are reported at the declaration of the node or buffer the graph
 * names in error_node / error_buffer (graph.h), or at the end of the text when the problem
 * is the graph as a whole.
 */
#define _GNU_SOURCE /* strtod_l, newlocale: numbers read the same whatever the locale */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/graph.h"
#include "runtime/sync.h"

/* The largest file gr_graph_load reads: far above any graph of GR_MAX_NODES nodes. */
#define SPEC_MAX_FILE_BYTES (1u << 20)
/* The longest number token: far more digits than a float32 needs (9 round-trip it). */
#define NUMBER_MAX 63

typedef struct spec_pos {
    size_t line, col;
} spec_pos;

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

    /* The cursor. */
    size_t at, line, line_start;

    char lex_why[128];
    spec_pos node_pos[GR_MAX_NODES];     /* where each node's name was declared */
    spec_pos buffer_pos[GR_MAX_BUFFERS]; /* where each buffer's name was declared */
} parser;

/* A statement's parts, as far as one pass needs them. */
typedef struct kernel_stmt {
    tok node, kernel, out;
    const gr_kernel *def;
    tok inputs[GR_MAX_KERNEL_INPUTS];
    double scalars[GR_MAX_SCALARS];
    tok scalar_toks[GR_MAX_SCALARS];
    uint32_t n_inputs, n_scalars; /* as written: may exceed the arrays, checked at once */
} kernel_stmt;

static gr_status perr(parser *p, spec_pos at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gr_status perr(parser *p, spec_pos at, const char *fmt, ...)
{
    char why[224];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return gr_error_set(p->err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL, "%s:%zu:%zu: %s",
                        p->name, at.line, at.col, why);
}

/* ------------------------------------------------------------------------------------
 * The lexer.
 * ---------------------------------------------------------------------------------- */

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static spec_pos cursor(const parser *p)
{
    spec_pos at = {p->line, p->at - p->line_start + 1};
    return at;
}

static bool arrow_at(const parser *p, size_t i)
{
    return i + 1 < p->len && p->text[i] == '-' && p->text[i + 1] == '>';
}

/* Characters that may follow a word or number directly. */
static bool ends_token(const parser *p, size_t i)
{
    char c;

    if (i >= p->len || arrow_at(p, i))
        return true;
    c = p->text[i];
    return is_blank(c) || c == '\n' || c == '#' || c == ':' || c == '(' || c == ')' ||
           c == ',' || c == '/' || c == '[' || c == ']';
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

static tok bad_char(parser *p, size_t i, const char *where)
{
    tok t = {T_BAD, p->text + i, 1, {p->line, i - p->line_start + 1}};
    char shown[16];

    if (p->text[i] == '\0')
        snprintf(p->lex_why, sizeof(p->lex_why),
                 "NUL byte in the text (a graph spec is text, not binary data)");
    else
        snprintf(p->lex_why, sizeof(p->lex_why), "unexpected %s%s",
                 show_char(p->text[i], shown, sizeof(shown)), where);
    return t;
}

static tok next(parser *p)
{
    tok t;
    size_t i;
    char c;

    while (p->at < p->len && is_blank(p->text[p->at]))
        p->at++;
    t.p = p->text + p->at;
    t.len = 0;
    t.pos = cursor(p);
    if (p->at >= p->len) {
        t.kind = T_EOF;
        return t;
    }
    c = p->text[p->at];
    if (c == '#' || c == '\n') {
        /* A comment runs to the end of the line; the token stands where the statement
         * stopped. A NUL byte is refused there too: it means binary data, not text. */
        for (i = p->at; i < p->len && p->text[i] != '\n'; i++)
            if (p->text[i] == '\0')
                return bad_char(p, i, "");
        if (i == p->len) {
            p->at = i;
            t.kind = T_EOF;
            return t;
        }
        p->at = i + 1;
        p->line++;
        p->line_start = p->at;
        t.kind = T_EOL;
        return t;
    }
    if (is_alpha(c)) {
        for (i = p->at + 1; i < p->len && !arrow_at(p, i); i++) {
            char d = p->text[i];
            if (!is_alpha(d) && !is_digit(d) && d != '.' && d != '-')
                break;
        }
        if (!ends_token(p, i))
            return bad_char(p, i,
                            " in a name (names are letters, digits, '_', '.' and '-')");
        t.kind = T_WORD;
    } else if (is_digit(c) || c == '.' || ((c == '+' || c == '-') && !arrow_at(p, p->at))) {
        for (i = p->at + 1; i < p->len && !arrow_at(p, i); i++) {
            char d = p->text[i], e = p->text[i - 1];
            if (!is_alpha(d) && !is_digit(d) && d != '.' &&
                !((d == '+' || d == '-') && (e == 'e' || e == 'E' || e == 'p' || e == 'P')))
                break;
        }
        if (!ends_token(p, i))
            return bad_char(p, i, " in a number");
        t.kind = T_NUMBER;
    } else {
        i = p->at + 1;
        switch (c) {
        case ':': t.kind = T_COLON; break;
        case '(': t.kind = T_LPAREN; break;
        case ')': t.kind = T_RPAREN; break;
        case ',': t.kind = T_COMMA; break;
        case '/': t.kind = T_SLASH; break;
        case '[': t.kind = T_LBRACKET; break;
        case ']': t.kind = T_RBRACKET; break;
        case '"':
            while (i < p->len && p->text[i] != '"' && p->text[i] != '\n' && p->text[i] != '\0')
                i++;
            if (i >= p->len || p->text[i] != '"') {
                snprintf(p->lex_why, sizeof(p->lex_why),
                         "a string that the line does not close with '\"'");
                t.kind = T_BAD;
                return t;
            }
            i++;
            t.kind = T_STRING;
            break;
        case '-': /* not a number: so "->" */
            t.kind = T_ARROW;
            i++;
            break;
        default:
            return bad_char(p, p->at, "");
        }
    }
    t.len = i - p->at;
    p->at = i;
    return t;
}

/* The next token, without consuming it. */
static tok peek(parser *p)
{
    size_t at = p->at, line = p->line, line_start = p->line_start;
    tok t = next(p);

    p->at = at;
    p->line = line;
    p->line_start = line_start;
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
           tok_is(t, "cuda");
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

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale = (locale_t)0;

static void make_c_locale(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* A scalar argument: C float syntax, finite as a double. Whether the kernel's scalar type
 * holds it is check_scalars' question, once the kernel is known. */
static gr_status take_number(parser *p, const tok *t, double *out)
{
    char buf[NUMBER_MAX + 1], *end;
    double v;

    if (t->len > NUMBER_MAX)
        return perr(p, t->pos, "number '%.24s...' is too long (at most %d characters)", t->p,
                    NUMBER_MAX);
    memcpy(buf, t->p, t->len);
    buf[t->len] = '\0';
    /* The C locale, so a host program that set a locale with a decimal comma still reads
     * "1.01" as written; the process locale only when no C locale could be made. */
    pthread_once(&c_locale_once, make_c_locale);
    errno = 0;
    v = c_locale != (locale_t)0 ? strtod_l(buf, &end, c_locale) : strtod(buf, &end);
    if (end != buf + t->len || t->len == 0)
        return perr(p, t->pos, "invalid number '%s' (scalars are C floats: 2, -0.5, 1e-3)",
                    buf);
    if (isnan(v) || (isinf(v) && errno != ERANGE))
        return perr(p, t->pos, "number '%s' is not finite (scalars must be finite)", buf);
    if (errno == ERANGE && isinf(v))
        return perr(p, t->pos, "number '%s' is out of range (at most 1.8e308)", buf);
    if (errno == ERANGE && v == 0.0)
        return perr(p, t->pos, "number '%s' is too small (it would be 0)", buf);
    *out = v;
    return GR_OK;
}

/* Whether scalar `v`, written at `t`, is a value of type `type`: float32 scalars are
 * finite and not so small that they would round to 0; int32 ones integers in range. */
static gr_status check_scalar(parser *p, const tok *t, double v, gr_dtype type)
{
    switch (type) {
    case GR_DTYPE_FLOAT32:
        if (isinf((float)v))
            return perr(p, t->pos, "number '%.*s' is out of float32 range (at most 3.4e38)",
                        (int)t->len, t->p);
        if (v != 0.0 && (float)v == 0.0f)
            return perr(p, t->pos, "number '%.*s' is too small for float32 (it would be 0)",
                        (int)t->len, t->p);
        return GR_OK;
    case GR_DTYPE_INT32:
        if (!(v >= -2147483648.0 && v <= 2147483647.0) || v != floor(v))
            return perr(p, t->pos, "number '%.*s' is not an int32 (the kernel's scalar type)",
                        (int)t->len, t->p);
        return GR_OK;
    default:
        return GR_OK;
    }
}

/* A term of a size ratio: a positive decimal integer of 32 bits. */
static gr_status take_ratio_term(parser *p, const tok *t, uint32_t *out)
{
    uint64_t v = 0;

    for (size_t i = 0; i < t->len; i++) {
        if (!is_digit(t->p[i]))
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
        if (!is_digit(t->p[i]))
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

static gr_status new_buffer_name(parser *p, const tok *t, const char *name)
{
    int b = gr_graph_buffer_index(p->g, name);

    if (b >= 0)
        return perr(p, t->pos, "buffer '%s' is defined twice (first on line %zu)", name,
                    p->buffer_pos[b].line);
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
        if (!is_digit(t->p[i]))
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
    while (p->at < p->len && p->text[p->at] != '\n')
        p->at++;
    if (p->at < p->len) {
        p->at++;
        p->line++;
        p->line_start = p->at;
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
    return perr(p, k->kernel.pos, "kernel '%s' takes %s and %s, got %s", d->name, want_in,
                want_sc, got);
}

/* The arguments after '(': buffer names, then numbers, up to and including ')'. */
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
        if (t.kind == T_WORD) {
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
        if ((st = check_scalar(p, &k->scalar_toks[i], k->scalars[i],
                               def->def.scalar_dtype[i])) != GR_OK)
            return st;
    return GR_OK;
}

/* kernel NAME ':' KERNEL '(' ARGS ')' '->' BUFFER */
static gr_status parse_kernel(parser *p)
{
    char name[GR_NAME_MAX + 1], kname[GR_NAME_MAX + 1], out[GR_NAME_MAX + 1], after[48];
    char inputs[GR_MAX_KERNEL_INPUTS][GR_NAME_MAX + 1];
    const char *in_ptrs[GR_MAX_KERNEL_INPUTS];
    kernel_stmt k;
    gr_status st;
    tok t;

    memset(&k, 0, sizeof(k));
    if ((st = parse_node_head(p, "kernel", &k.node, name)) != GR_OK)
        return st;
    k.kernel = next(p);
    if (k.kernel.kind != T_WORD)
        return expected(p, &k.kernel, "a kernel name after ':'");
    if (k.kernel.len <= GR_NAME_MAX) {
        memcpy(kname, k.kernel.p, k.kernel.len);
        kname[k.kernel.len] = '\0';
        k.def = gr__kernel_find(kname);
    }
    if (k.def == NULL)
        return unknown_kernel(p, &k.kernel);
    t = next(p);
    if (t.kind != T_LPAREN)
        return expected(p, &t, "'(' after kernel name '%s'", kname);
    if ((st = parse_args(p, &k)) != GR_OK)
        return st;
    if ((st = check_arity(p, &k)) != GR_OK)
        return st;
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
        if ((st = known_buffer(p, &k.inputs[i], inputs[i])) != GR_OK)
            return st;
        in_ptrs[i] = inputs[i];
    }
    if ((st = known_buffer(p, &k.out, out)) != GR_OK)
        return st;
    if ((st = check_scalars(p, &k, kname, inputs, out)) != GR_OK)
        return st;
    if (gr_graph_add_kernel_f64(p->g, name, kname, in_ptrs, k.n_inputs, out, k.scalars,
                                k.n_scalars) != GR_OK)
        return builder_refused(p, &k.node);
    added_node(p, &k.node);
    return GR_OK;
}

/* NODE '->' NODE { '->' NODE }, the first NODE already read and followed by '->'. */
static gr_status parse_chain(parser *p, tok first)
{
    char before[GR_NAME_MAX + 1], after[GR_NAME_MAX + 1];
    gr_status st;
    tok t;

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
            if (gr_graph_add_dep(p->g, before, after) != GR_OK)
                return builder_refused(p, &t);
        }
        memcpy(before, after, sizeof(before));
    }
}

static gr_status parse_statement(parser *p)
{
    tok t = next(p), n;
    char shown[48];

    if (p->pass == PASS_SOURCES) {
        /* Only a well-formed `cuda` line loads its file now; the next pass reports syntax
         * errors, every line's in text order. */
        if (tok_is(&t, "cuda")) {
            size_t at = p->at, line = p->line, line_start = p->line_start;
            tok path = next(p), end = next(p);

            p->at = at;
            p->line = line;
            p->line_start = line_start;
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
        return expected(p, &t,
                        "a statement (buffer, h2d, kernel, d2h, cuda) or a dependency chain");
    if (tok_is(&t, "buffer"))
        return parse_buffer(p);
    if (tok_is(&t, "h2d"))
        return parse_h2d(p);
    if (tok_is(&t, "kernel"))
        return parse_kernel(p);
    if (tok_is(&t, "d2h"))
        return parse_d2h(p);
    if (tok_is(&t, "cuda"))
        return parse_cuda(p);
    n = peek(p);
    if (n.kind == T_ARROW)
        return parse_chain(p, t);
    return perr(p, t.pos,
                "unknown statement %s: expected buffer, h2d, kernel, d2h, cuda or a dependency "
                "chain 'a -> b'",
                show(&t, shown, sizeof(shown)));
}

static gr_status run_pass(parser *p, spec_pass pass)
{
    gr_status st;

    p->pass = pass;
    p->at = 0;
    p->line = 1;
    p->line_start = 0;
    while (p->at < p->len)
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
        (st = run_pass(p, PASS_NODES)) != GR_OK ||
        (st = run_pass(p, PASS_DEPS)) != GR_OK || (st = finalize(p)) != GR_OK)
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

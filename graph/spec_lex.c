/*
 * spec_lex.c - the graph spec's words: errors at a line and column, the tokens (kernels/lex.c's
 * tokenizer with the spec's rules), names, numbers, ports and counts, and names checked
 * against the graph being built.
 *
 * A token is a (pointer, length) slice of the text, copied only into fixed buffers after its
 * length has been checked; a lexical error is a T_BAD token whose reason waits in
 * p->lex_why until the statement that met it reports it (expected).
 */
#include "graph/spec_impl.h"

static gr_status vperr(parser *p, gr_status st, spec_pos at, const char *fmt, va_list ap)
{
    char why[256];

    vsnprintf(why, sizeof(why), fmt, ap);
    return gr__error_set(p->err, st, GR_NO_INDEX, NULL, "%s:%zu:%zu: %s", p->name, at.line,
                         at.col, why);
}

gr_status perr(parser *p, spec_pos at, const char *fmt, ...)
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
const gr_lex_rules spec_rules = {
    .flags = GR_LEX_LINES | GR_LEX_STRINGS | GR_LEX_DASH_IN_WORDS | GR_LEX_ARROWS |
             GR_LEX_LOOSE_NUMBERS | GR_LEX_ANY_EXPONENT_SIGN | GR_LEX_STRICT_ENDS,
    .punct = ":(),/=[]",
    .pairs = spec_pairs,
    /* Characters that may follow a word or number directly (beside blanks, a newline,
     * "->" and the end): punctuation, a comment, and the operators of expressions. */
    .enders = "#:(),/[]=*+-<>!",
};

spec_pos cursor(const parser *p)
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

tok next(parser *p)
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
tok peek(parser *p)
{
    gr_lex at = p->lx;
    tok t = next(p);

    p->lx = at;
    return t;
}

bool tok_is(const tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->kind == T_WORD && t->len == n && memcmp(t->p, s, n) == 0;
}

/* A token as messages quote it. */
const char *show(const tok *t, char *buf, size_t size)
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
gr_status expected(parser *p, const tok *t, const char *fmt, ...)
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
bool is_nonfinite_word(const tok *t)
{
    static const char *const words[] = {"nan", "inf", "infinity"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (t->len == strlen(words[i]) && strncasecmp(t->p, words[i], t->len) == 0)
            return true;
    return false;
}

/* Copy word `t` into `out` (GR_NAME_MAX + 1 bytes) as a name; `declared` when the statement
 * declares it, which also refuses the reserved words. */
gr_status take_name(parser *p, const tok *t, bool declared, char *out)
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
gr_status take_number(parser *p, const tok *t, double *out)
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
gr_status check_scalar(parser *p, const tok *t, bool expr, double v, gr_dtype type)
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
gr_status take_ratio_term(parser *p, const tok *t, uint32_t *out)
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
gr_status take_port(parser *p, const tok *t, const char *prefix, const char *after,
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

gr_status expect_end(parser *p, const char *after)
{
    tok t = next(p);

    if (t.kind == T_EOL || t.kind == T_EOF)
        return GR_OK;
    return expected(p, &t, "the end of the line after %s", after);
}

/* ------------------------------------------------------------------------------------
 * Name resolution against the graph being built.
 * ---------------------------------------------------------------------------------- */

gr_status new_buffer_name(parser *p, const tok *t, const char *name)
{
    int b = gr__graph_buffer_index(p->g, name), q = find_param(p, t->p, t->len, p->n_params);

    if (b >= 0)
        return perr(p, t->pos, "buffer '%s' is defined twice (first on line %zu)", name,
                    p->buffer_pos[b].line);
    if (q >= 0)
        return perr(p, t->pos, "buffer '%s' has the name of param '%s' (line %zu): params and "
                               "buffers share names",
                    name, name, p->params[q].pos.line);
    return GR_OK;
}

gr_status new_node_name(parser *p, const tok *t, const char *name)
{
    int n = gr__graph_node_index(p->g, name);

    if (n >= 0)
        return perr(p, t->pos, "node '%s' is defined twice (first on line %zu)", name,
                    p->node_pos[n].line);
    return GR_OK;
}

gr_status known_buffer(parser *p, const tok *t, char *name)
{
    gr_status st = take_name(p, t, false, name);

    if (st != GR_OK)
        return st;
    if (gr__graph_buffer_index(p->g, name) < 0)
        return perr(p, t->pos, "unknown buffer '%s'%s", name,
                    gr__graph_node_index(p->g, name) >= 0 ? " (it is a node)" : "");
    return GR_OK;
}

gr_status known_node(parser *p, const tok *t, char *name)
{
    gr_status st = take_name(p, t, false, name);

    if (st != GR_OK)
        return st;
    if (gr__graph_node_index(p->g, name) < 0)
        return perr(p, t->pos, "dependency on unknown node '%s'%s", name,
                    gr__graph_buffer_index(p->g, name) >= 0
                        ? " (it is a buffer: dependencies order nodes)"
                        : "");
    return GR_OK;
}

/* After the builder refused a statement the parser had checked: its reason, at the name. */
gr_status builder_refused(parser *p, const tok *t)
{
    return perr(p, t->pos, "%s", gr_graph_error(p->g));
}

void added_node(parser *p, const tok *t)
{
    p->node_pos[p->g->n_nodes - 1] = t->pos;
}

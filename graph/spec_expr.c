/*
 * spec_expr.c - the graph spec's expressions: params, constant scalars and `expr` kernels,
 * which kernels/expr.c parses, evaluates and compiles. An expression is a slice of one line;
 * expr.c reports errors as byte offsets into it, which become columns of the line here.
 *
 * Params are defined in the buffers' pass, in the order of the text, and an expression sees
 * only the params above its line; a constant scalar's syntax is checked in the buffers' pass
 * and its value computed in the nodes' (when every buffer is known, for the message of a
 * buffer named in one).
 */
#include "graph/spec_impl.h"

/* ------------------------------------------------------------------------------------
 * Params and constant expressions.
 * ---------------------------------------------------------------------------------- */

/* The params declared above line `line` (params are kept in the order of the text). */
uint32_t params_above(const parser *p, size_t line)
{
    uint32_t n = 0;

    while (n < p->n_params && p->params[n].pos.line < line)
        n++;
    return n;
}

int find_param(const parser *p, const char *s, size_t len, uint32_t among)
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
        return gr__error_set(p->err, e->status, GR_NO_INDEX, NULL, "%s:%zu:%zu: %s", p->name,
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
    if (gr__graph_buffer_index(p->g, name) >= 0)
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
gr_status parse_param(parser *p)
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
        int b = gr__graph_buffer_index(p->g, name);

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
        gr__strlcpy(p->params[p->n_params].name, name, sizeof(p->params[0].name));
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
gr_status parse_args(parser *p, kernel_stmt *k)
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
gr_status check_scalars(parser *p, const kernel_stmt *k, const char *kname,
                               char inputs[][GR_NAME_MAX + 1], const char *out)
{
    gr_dtype in[GR_MAX_KERNEL_INPUTS];
    const gr_kernel *def;
    gr_status st;
    int b;

    for (uint32_t i = 0; i < k->n_inputs; i++) {
        if ((b = gr__graph_buffer_index(p->g, inputs[i])) < 0)
            return GR_OK;
        in[i] = p->g->buffers[b].dtype;
    }
    if ((b = gr__graph_buffer_index(p->g, out)) < 0)
        return GR_OK;
    def = gr__kernel_hold_typed(kname, in, k->n_inputs, p->g->buffers[b].dtype);
    st = GR_OK;
    for (uint32_t i = 0; def != NULL && i < k->n_scalars && st == GR_OK; i++)
        st = check_scalar(p, &k->scalar_toks[i], k->scalar_expr[i], k->scalars[i],
                          def->def.scalar_dtype[i]);
    gr__kernel_release(def);
    return st;
}

/* The arguments of expr after '(': input buffers, then the expression in double quotes,
 * then ')'; the expression's syntax is checked at once. */
gr_status parse_expr_args(parser *p, kernel_stmt *k, tok *text)
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
 * types (or find it registered), into `kname`, held in *held: a kernel registered only for
 * the graphs that use it (gr__expr_register), unregistered once the last one is freed. */
gr_status register_expr(parser *p, const kernel_stmt *k, const tok *text,
                               char inputs[][GR_NAME_MAX + 1], const char *out, char *kname,
                               const gr_kernel **held)
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
        env.input_dtype[i] = p->g->buffers[gr__graph_buffer_index(p->g, inputs[i])].dtype;
    }
    env.out_dtype = p->g->buffers[gr__graph_buffer_index(p->g, out)].dtype;
    env.params = p->expr_params;
    env.n_params = params_above(p, in.line);
    if (gr__expr_register(text->p + 1, text->len - 2, &env, kname, held, &e) == GR_OK)
        return GR_OK;
    unknown_name_hint(p, start, &e,
                      ": buffer '%s' is not an input; list it before the expression", hint,
                      sizeof(hint));
    return expr_refused(p, in, &e, hint);
}

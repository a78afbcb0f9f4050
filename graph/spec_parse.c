/*
 * spec_parse.c - the graph spec's statements: buffer, const, cuda, h2d, kernel, d2h, param
 * (spec_expr.c reads its constant) and dependency chains. Each statement starts after its
 * keyword and consumes its end of line; it checks its syntax in every pass and calls the
 * builder in its own (buffers, nodes or dependencies: spec.c says why).
 */
#include "graph/spec_impl.h"

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
        gr__error_set(p->err, st, GR_NO_INDEX, NULL, "%s", inner.message);
        gr__error_prefix(p->err, "%s:%zu:%zu: ", p->name, t.pos.line, t.pos.col);
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
 * expr '(' BUFFERS ',' STRING ')'. The kernels it looks up are held in k->def and
 * k->expr_kernel, which parse_kernel gives back. */
static gr_status parse_kernel_in(parser *p, kernel_stmt *k)
{
    char name[GR_NAME_MAX + 1], kname[GR_NAME_MAX + 1], out[GR_NAME_MAX + 1], after[48];
    char inputs[GR_MAX_KERNEL_INPUTS][GR_NAME_MAX + 1];
    const char *in_ptrs[GR_MAX_KERNEL_INPUTS];
    gr_status st;
    bool expr;
    tok t, text = {0};

    if ((st = parse_node_head(p, "kernel", &k->node, name)) != GR_OK)
        return st;
    k->kernel = next(p);
    if (k->kernel.kind != T_WORD)
        return expected(p, &k->kernel, "a kernel name after ':'");
    expr = tok_is(&k->kernel, "expr");
    if (k->kernel.len <= GR_NAME_MAX) {
        memcpy(kname, k->kernel.p, k->kernel.len);
        kname[k->kernel.len] = '\0';
        k->def = expr ? NULL : gr__kernel_hold(kname);
    }
    if (k->def == NULL && !expr)
        return unknown_kernel(p, &k->kernel);
    t = next(p);
    if (t.kind != T_LPAREN)
        return expected(p, &t, "'(' after kernel name '%s'", kname);
    if (expr) {
        if ((st = parse_expr_args(p, k, &text)) != GR_OK)
            return st;
    } else if ((st = parse_args(p, k)) != GR_OK || (st = check_arity(p, k)) != GR_OK) {
        return st;
    }
    t = next(p);
    if (t.kind != T_ARROW)
        return expected(p, &t, "'->' and the output buffer after ')'");
    k->out = next(p);
    if (k->out.kind != T_WORD)
        return expected(p, &k->out, "an output buffer name after '->'");
    if ((st = take_name(p, &k->out, false, out)) != GR_OK)
        return st;
    snprintf(after, sizeof(after), "buffer '%s'", out);
    if ((st = expect_end(p, after)) != GR_OK)
        return st;
    if (p->pass != PASS_NODES)
        return GR_OK;
    if ((st = new_node_name(p, &k->node, name)) != GR_OK)
        return st;
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        if ((st = known_arg_buffer(p, &k->inputs[i], inputs[i])) != GR_OK)
            return st;
        in_ptrs[i] = inputs[i];
    }
    if ((st = known_buffer(p, &k->out, out)) != GR_OK)
        return st;
    if (expr) {
        if ((st = register_expr(p, k, &text, inputs, out, kname, &k->expr_kernel)) != GR_OK)
            return st;
    } else if ((st = check_scalars(p, k, kname, inputs, out)) != GR_OK) {
        return st;
    }
    if (gr_graph_add_kernel_f64(p->g, name, kname, in_ptrs, k->n_inputs, out, k->scalars,
                                k->n_scalars) != GR_OK)
        return builder_refused(p, &k->node);
    added_node(p, &k->node);
    return GR_OK;
}

static gr_status parse_kernel(parser *p)
{
    kernel_stmt k;
    gr_status st;

    memset(&k, 0, sizeof(k));
    st = parse_kernel_in(p, &k);
    /* The graph holds what its node uses; an expression no graph took goes now. */
    gr__kernel_release(k.def);
    gr__kernel_release(k.expr_kernel);
    return st;
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
                                          (uint32_t)gr__graph_node_index(p->g, before),
                                          (uint32_t)gr__graph_node_index(p->g, after))) != GR_OK)
                return st;
            if (gr_graph_add_dep(p->g, before, after) != GR_OK)
                return builder_refused(p, &t);
        }
        memcpy(before, after, sizeof(before));
        prev = t;
    }
}

gr_status parse_statement(parser *p)
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

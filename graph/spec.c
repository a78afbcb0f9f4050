/*
 * spec.c - the graph spec text format (docs/GRAPH_SPEC.md): text to a finalized graph. This
 * file runs the passes and reads files; spec_impl.h names the parts that do the rest.
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
 * Expressions (params, constant scalars, `expr` kernels) are kernels/expr.h's: it parses,
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

#include "graph/spec_impl.h"

/* The largest file gr_graph_load reads: far above any graph of GR_MAX_NODES nodes. */
#define SPEC_MAX_FILE_BYTES (1u << 20)

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
            gr__strlcpy(p->err->node, g->nodes[g->error_node].name, sizeof(p->err->node));
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
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "gr_graph_parse: %s is NULL", out == NULL ? "out" : "text");
    /* On the heap: the position tables make the parser too large for a small thread stack. */
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                             "out of memory parsing a graph spec");
    p->text = text ? text : "";
    p->len = len;
    p->name = name ? name : "<graph spec>";
    p->err = err;
    p->files = files;
    if ((st = gr_graph_create(&p->g)) != GR_OK) {
        gr__error_set(err, st, GR_NO_INDEX, NULL, "cannot create a graph: %s",
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
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "gr_graph_load: %s is NULL", path == NULL ? "path" : "out");
    f = fopen(path, "rb");
    if (f == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "%s: cannot read: %s", path, strerror_r(errno, why, sizeof(why)));
    buf = malloc(cap);
    if (buf == NULL) {
        fclose(f);
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                             "%s: out of memory reading it", path);
    }
    /* Read until a short read (end of file or error), doubling the buffer while it fills. */
    for (;;) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap || cap > SPEC_MAX_FILE_BYTES)
            break;
        grown = realloc(buf, cap * 2);
        if (grown == NULL) {
            st = gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                               "%s: out of memory reading it", path);
            goto out_free;
        }
        buf = grown;
        cap *= 2;
    }
    if (ferror(f)) {
        /* fread leaves errno as the failed read(2) set it (EISDIR for a directory...). */
        st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                           "%s: cannot read: %s", path, strerror_r(errno, why, sizeof(why)));
        goto out_free;
    }
    if (used > SPEC_MAX_FILE_BYTES) {
        st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
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

"""Which output ports may be written in place over which input ports, from a spec's text.

The C library knows this (a graph's inplace_ok: every H2D of input port q is an ancestor of
the D2H of output port p) but graphrun.h does not expose it, so the package reads it from
the spec text again. Only the dependencies matter: those the data flow implies
(docs/GRAPH_SPEC.md, "Implied dependencies": in the order of the text, a node that reads a
buffer follows its last writer above; one that writes it follows the last writer and every
reader since) and the explicit chains. The text has already been accepted by
gr_graph_parse, so this reader checks nothing. Anything it cannot read gives no in-place
ports (outputs are then allocated: never wrong, only slower). Should it ever find an
order the library does not, the library refuses the in-place output at submit (it checks
every alias itself) and the package submits again with its outputs allocated.
python/tests/test_jobs.py holds it to the library's own answers.
"""
import re

_TOKEN = re.compile(r'\s*(?:(->)|("[^"\n]*")|([A-Za-z_](?:[A-Za-z0-9_.]|-(?!>))*)|(\S))')
_KEYWORDS = {"buffer", "h2d", "kernel", "d2h", "cuda", "param"}


def _tokens(line):
    out = []
    pos = 0
    while pos < len(line):
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        pos = m.end()
        arrow, string, word, other = m.groups()
        if other == "#":
            break
        out.append(arrow or string or word or other)
    return out


def _kernel_io(t, buffers):
    """(reads, write) of `kernel NODE : K ( ARGS ) -> OUT`: the leading arguments that are
    buffers (all buffers come before the scalars), and OUT."""
    last = len(t) - 1 - t[::-1].index("->")
    out = t[last + 1]
    args, depth, cur = [], 0, []
    for x in t[t.index("(") + 1:last]:
        if x in "([" and len(x) == 1:
            depth += 1
        elif x in ")]" and len(x) == 1:
            if depth == 0:
                break
            depth -= 1
        elif x == "," and depth == 0:
            args.append(cur)
            cur = []
            continue
        cur.append(x)
    args.append(cur)
    reads = []
    for a in args:
        if len(a) != 1 or a[0] not in buffers:
            break
        reads.append(a[0])
    return reads, out


def in_place_ports(text, n_inputs, n_outputs):
    """A tuple, per output port, of the input ports (a frozenset) it may alias; all empty
    when the text cannot be read."""
    none = tuple(frozenset() for _ in range(n_outputs))
    try:
        lines = [_tokens(line) for line in text.splitlines()]
        buffers = {t[1] for t in lines if len(t) > 1 and t[0] == "buffer"}
        h2d, d2h, edges = {}, {}, {}
        last_writer, readers = {}, {}  # buffer -> node; buffer -> nodes since that write

        def edge(a, b):
            if a != b:
                edges.setdefault(b, set()).add(a)

        def use(node, reads, writes):
            for b in reads:
                if b in last_writer:
                    edge(last_writer[b], node)
            for b in writes:
                if b in last_writer:
                    edge(last_writer[b], node)
                for r in readers.get(b, ()):
                    edge(r, node)
            for b in reads:
                readers.setdefault(b, []).append(node)
            for b in writes:
                last_writer[b] = node
                readers[b] = []

        for t in lines:
            if not t:
                continue
            if t[0] == "h2d":  # h2d NODE : inN -> BUFFER
                h2d[t[1]] = int(t[3][2:])
                use(t[1], [], [t[5]])
            elif t[0] == "d2h":  # d2h NODE : BUFFER -> outN
                d2h[int(t[5][3:])] = t[1]
                use(t[1], [t[3]], [])
            elif t[0] == "kernel":
                reads, out = _kernel_io(t, buffers)
                use(t[1], reads, [out])
            elif t[0] in _KEYWORDS:
                continue
            elif "->" in t:  # a chain
                names = [x for x in t if x != "->"]
                for a, b in zip(names, names[1:]):
                    edge(a, b)
        memo = {}

        def ancestors(n):
            if n not in memo:
                memo[n] = set()  # dependencies have no cycles (the library checked)
                acc = set()
                for a in edges.get(n, ()):
                    acc.add(a)
                    acc |= ancestors(a)
                memo[n] = acc
            return memo[n]

        out = []
        for p in range(n_outputs):
            anc = ancestors(d2h[p])
            ok = set(range(n_inputs))
            for node, q in h2d.items():
                if node not in anc:
                    ok.discard(q)
            out.append(frozenset(ok))
        return tuple(out)
    except (KeyError, ValueError, IndexError, RecursionError):
        return none

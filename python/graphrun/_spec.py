"""Which output ports may be written in place over which input ports, from a spec's text.

The C library knows this (a graph's inplace_ok: every H2D of input port q is an ancestor of
the D2H of output port p) but graphrun.h does not expose it, so the package reads it from
the spec text again: only the h2d, d2h and dependency statements matter, and the text has
already been accepted by gr_graph_parse, so this reader need not check anything. Anything
it cannot read gives no in-place ports (outputs are then allocated: never wrong, only
slower). python/tests/test_graphs.py holds it to the library's own answers.
"""
import re

_TOKEN = re.compile(r'\s*(?:(->)|("[^"\n]*")|([A-Za-z_](?:[A-Za-z0-9_.]|-(?!>))*)|(\S))')


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


def in_place_ports(text, n_inputs, n_outputs):
    """A tuple, per output port, of the input ports (a frozenset) it may alias; all empty
    when the text cannot be read."""
    none = tuple(frozenset() for _ in range(n_outputs))
    try:
        h2d, d2h, edges = {}, {}, {}
        for line in text.splitlines():
            t = _tokens(line)
            if not t:
                continue
            if t[0] == "h2d" and len(t) >= 6:  # h2d NODE : inN -> BUFFER
                h2d[t[1]] = int(t[3][2:])
            elif t[0] == "d2h" and len(t) >= 6:  # d2h NODE : BUFFER -> outN
                d2h[int(t[5][3:])] = t[1]
            elif t[0] in ("kernel", "buffer", "cuda"):
                continue
            elif "->" in t:
                names = [x for x in t if x != "->"]
                for a, b in zip(names, names[1:]):
                    edges.setdefault(b, set()).add(a)
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

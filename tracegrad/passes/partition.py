"""The forward/backward partition: what the forward saves, what the backward recomputes.

The backward graph reads forward values (its "saved" inputs). Saving all of them costs
memory; recomputing cheap elementwise values from fewer saved ones can cost less. As
AOTAutograd and Thunder do, the choice is a minimum cut on the forward graph: each
value is a pair of nodes joined by an edge weighted by its bytes; the forward's inputs
hang from the source (they are held anyway: saving them costs nothing), values that are
not cheap to recompute (reductions, matmuls, anything not elementwise) too, and the
values the backward reads hang from the sink. The cheapest cut says which values to
save; everything between the cut and what the backward reads is recomputed there.
"""
import math

import networkx as nx

from ..ir.graph import Graph, V, map_args, refs, insert
from ..ir.symbolic import hint
from ..ops.primitives import PRIMITIVES as P

INF = float("inf")
_VIEWS = frozenset({"reshape", "permute", "expand", "squeeze", "unsqueeze"})
_FREE = _VIEWS | {"convert", "clone"}
# erf's kernel is a Python loop; pow's slow path; exp costs about four elementwise passes
# (a softmax's exponentials are read back, not taken again)
_EXPENSIVE = frozenset({"erf", "pow", "exp"})
# 32 KiB: at ~0.12 ns an element a numpy pass over 8192 float32 values costs about what one
# call costs on its own (PERF-NOTES.md)
SMALL_BYTES = 32 * 1024


def recomputable(attrs):
    prim = attrs["prim"]
    if attrs["op"] in ("input", "proj") or prim is None or prim.multi:
        return False
    return (prim.elementwise or attrs["op"] in _FREE) and attrs["op"] not in _EXPENSIVE


def nbytes(attrs):
    if isinstance(attrs["dtype"], (list, tuple)):
        return INF
    # (what to save or recompute steers cost alone: a symbolic size's hint, unguarded)
    return math.prod(hint(attrs["shape"])) * attrs["dtype"].itemsize


class Partition:
    """forward: the forward graph returning (outputs..., saved...); backward: its graph;
    binds: for each backward input, ("seed", k) | ("in", forward input index) |
    ("res", index into the saved values) | ("const", tensor)."""

    def describe(self):
        lines = [f"saved ({self.saved_bytes} bytes): {', '.join(map(str, self.saved)) or '-'}",
                 f"recomputed in backward: {', '.join(map(str, self.recomputed)) or '-'}",
                 f"without recomputation the forward would save {self.naive_bytes} bytes"]
        return "\n".join(lines)


def choose_saved(fwd, required, remat=True):
    """The forward values to save so that `required` can be computed from them. A small
    value (SMALL_BYTES or less) is saved as it is: recomputing it would cost an op's
    fixed overhead (~1 µs a numpy call) to spare less memory than that time streams."""
    if not remat or not required:
        return list(dict.fromkeys(required))
    small, rest = [], []
    for r in required:
        if nbytes(fwd[r]) > SMALL_BYTES:
            rest.append(r)
            continue
        src = r
        while fwd[src]["op"] in _VIEWS:      # a view is remade from its base for free: the base is saved
            src = fwd[src]["args"][0]
        (small if nbytes(fwd[src]) <= SMALL_BYTES else rest).append(src)
    if small:
        return list(dict.fromkeys(small + (choose_saved(fwd, rest) if rest else [])))
    free = _free_cut(fwd, required)
    if free is not None:
        return free
    edges = []                     # (u, v, attrs): one add_edges_from, not a call per edge
    add = edges.append
    inputs = set(fwd.inputs)
    for n, a in fwd.nx._node.items():
        if n in inputs:
            add(("SRC", (n, 0), {}))
            add(((n, 0), (n, 1), {"capacity": 0}))
        else:
            w = nbytes(a)
            add(((n, 0), (n, 1), {} if w == INF else {"capacity": w}))
            if not recomputable(a):
                add(("SRC", (n, 0), {}))
        for u in fwd.nx._succ[n]:
            add(((n, 1), (u, 0), {}))
    for r in required:
        add(((r, 1), "SNK", {}))
    g = nx.DiGraph()
    g.add_edges_from(edges)
    try:
        _, (reach, _) = nx.minimum_cut(g, "SRC", "SNK")
    except nx.NetworkXUnbounded:
        return list(dict.fromkeys(required))
    saved = [n for n in fwd.nodes() if (n, 0) in reach and (n, 1) not in reach]
    return saved


def _free_cut(fwd, required):
    """The cut of capacity zero where there is one: when everything the backward reads is
    recomputable from the forward's inputs alone (a chain of elementwise ops), saving
    those inputs costs nothing and no cut is cheaper, so the flow need not be run (on
    long graphs it is most of the compile time). None where some value on the way would
    have to be saved at a cost."""
    inputs = set(fwd.inputs)
    seen = set()
    saved = set()
    stack = list(required)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in inputs:
            saved.add(n)
            continue
        a = fwd[n]
        if not recomputable(a):
            return None
        stack.extend(refs(a["args"]))
    return [n for n in fwd.inputs if n in saved]


def partition(fwd, bwd, remat=True):
    required = [bwd[n]["fwd"] for n in bwd.inputs if bwd[n]["role"] == "saved"]
    saved = choose_saved(fwd, required, remat)
    saved_set = set(saved)
    inputs = {n: i for i, n in enumerate(fwd.inputs)}
    # values recomputed in backward: ancestors of what it reads, down to the saved ones
    todo = set()
    stack = [r for r in required if r not in saved_set]
    while stack:
        n = stack.pop()
        if n in todo or n in saved_set:
            continue
        todo.add(n)
        stack.extend(refs(fwd[n]["args"]))
    recompute = [n for n in fwd.nodes() if n in todo]

    b = Graph(bwd.name)
    binds = []
    rename = {}
    res = []
    seed = 0
    for n in bwd.inputs:
        a = bwd[n]
        if a["role"] == "grad":
            insert(b.nx, n, a.copy(), ())
            b.inputs.append(n)
            binds.append(("seed", seed))
            seed += 1
    from_fwd = {}
    for s in saved:
        a = fwd[s]
        v = b.add_input(a["shape"], a["dtype"], "saved", name=f"s_{s}", fwd=s)
        from_fwd[s] = v
        if s in inputs:
            binds.append(("in", inputs[s]))
        else:
            binds.append(("res", len(res)))
            res.append(s)
    for n in bwd.inputs:
        a = bwd[n]
        if a["role"] not in ("grad", "saved"):
            insert(b.nx, n, a.copy(), ())
            b.inputs.append(n)
            binds.append(("const", a["value"]))
    for n in recompute:
        a = fwd[n]
        v = b.fresh("r")
        args = map_args(a["args"], lambda r: from_fwd[r])
        insert(b.nx, v, dict(a, args=args, source=(a.get("source") or "") + " (recomputed)"), refs(args))
        from_fwd[n] = V(v)
    for n in bwd.inputs:
        if bwd[n]["role"] == "saved":
            rename[n] = from_fwd[bwd[n]["fwd"]]
        else:
            rename[n] = n
    for n in bwd.nodes():
        a = bwd[n]
        if a["op"] == "input":
            continue
        name = n if n not in b.nx else b.fresh()
        args = map_args(a["args"], lambda r: rename[r])
        insert(b.nx, name, dict(a, args=args), refs(args))
        rename[n] = V(name)
    b.outputs = [None if o is None else rename[o] for o in bwd.outputs]

    f = fwd.copy()
    f.outputs = list(fwd.outputs) + [V(s) for s in res]
    p = Partition()
    p.forward, p.backward, p.binds = f, b, binds
    p.saved, p.recomputed = saved, recompute
    p.saved_bytes = sum(nbytes(fwd[s]) for s in saved if s not in inputs)
    p.naive_bytes = sum(nbytes(fwd[s]) for s in set(required) if s not in inputs)
    return p


def joint(fwd, bwd):
    """The forward and the backward as one graph, for a backward seeded with ones (the
    derivative of a scalar output): the forward's inputs, then the backward's constants as
    inputs of role "const"; the forward's outputs, then the backward's. Saved values are
    read where the forward computes them; nothing is saved or recomputed."""
    j = fwd.copy()
    j.name = f"{fwd.name}_joint"
    rename = {}
    for v in bwd.inputs:
        a = bwd[v]
        if a["role"] == "grad":
            rename[v] = j.add_op(P["full"], (), {"shape": tuple(a["shape"]), "value": 1.0, "dtype": a["dtype"]},
                                 tuple(a["shape"]), a["dtype"])
        elif a["role"] == "saved":
            rename[v] = V(a["fwd"])
        else:
            rename[v] = j.add_input(a["shape"], a["dtype"], "const", value=a["value"])
    for n in bwd.nodes():
        a = bwd[n]
        if a["op"] == "input":
            continue
        name = j.fresh()
        args = map_args(a["args"], lambda r: rename[r])
        insert(j.nx, name, dict(a, args=args), refs(args))
        rename[n] = name
    j.outputs = list(fwd.outputs) + [None if o is None else V(rename[o]) for o in bwd.outputs]
    return j

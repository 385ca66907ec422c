"""Decomposition of row ops into row reductions and elementwise ops.

    m = detach(amax(x, d))              the row maximum, a constant for the derivative
    e = exp(x - m)
    s = sum(e, d)
    log_softmax(x, d) -> (x - m) - log(s)
    softmax(x, d)     -> e / s

Both forms compute the same values, op for op as the kernels in the op table do (so the
same bits: `(x - m) - log(s)`, not `x - (log(s) + m)`, which rounds differently), but they change what the backward has to keep.
log_softmax and softmax are row reductions: the partition cannot recompute them, so
the forward saves their whole (N, C) result, and the backward of log_softmax takes its
exp again. After the decomposition the backward reads `e` (saved: the partition does
not recompute exp) and the row sums `s`, and its derivative is one product per
element, `e * (g / s)`, with no exp left in the backward. The maximum only shifts the
exponent for range; the result does not depend on it, so it is detached and gets no
derivative of its own.
"""
from .. import _dtype as D
from ..ops.primitives import PRIMITIVES as P, piecewise_mask
from ..ir.graph import V
from .rewrite import rewrite, add, unchanged, literal_key

_FLOATS = frozenset({"float32", "float64"})


def decompose_row_ops(graph):
    if not any(a["op"] in ("softmax", "log_softmax") for a in graph.nx._node.values()):
        return unchanged(graph)

    def rule(b, n, a, args):
        if a["op"] not in ("softmax", "log_softmax") or a["dtype"].name not in _FLOATS or not a["shape"] or \
                0 in a["shape"]:
            return None
        x = args[0]
        if b[x]["dtype"] is not a["dtype"]:
            return None
        dim = a["params"]["dim"] % len(a["shape"])
        row = dict(a, shape=tuple(1 if i == dim else s for i, s in enumerate(a["shape"])))
        m = add(b, P["detach"], (add(b, P["amax"], (x,), row, dims=(dim,), keepdim=True),), row)
        shifted = add(b, P["sub"], (x, m), a)
        e = add(b, P["exp"], (shifted,), a)
        s = add(b, P["sum"], (e,), row, dims=(dim,), keepdim=True)
        if a["op"] == "softmax":
            return add(b, P["div"], (e, s), a)
        return add(b, P["sub"], (shifted, add(b, P["log"], (s,), row)), a)
    return rewrite(graph, rule)


def _piecewise_select(b, a, g, x, m=None):
    """piecewise_backward(g, x) as the comparisons of x its activation's composite makes
    (nn/functional.py: the same ops, so that a step computes each mask once), or the mask m
    given, then g where the mask holds and where not, each times its slope:
    where(m, g, 0) * a + where(m, 0, g) * b, the selects that codegen writes through the mask
    (where_zero), a zero slope's term left out."""
    p = a["params"]
    parts, s_in, s_out = piecewise_mask(_Compare(b, x) if m is None else _Key(x), **p)
    if m is None:
        m = parts[0]
        for q in parts[1:]:
            m = add(b, P[_JOIN[p["nan_inside"]]], (m, q), dict(a, shape=b[x]["shape"], dtype=D.bool_))
    terms = []
    for s, sel in ((s_in, (m, g, 0)), (s_out, (m, 0, g))):
        if s != 0:
            t = add(b, P["where"], sel, a)
            terms.append(t if s == 1 else add(b, P["mul"], (t, s), a))
    if not terms:
        return add(b, P["where"], (m, 0, 0), a)
    return terms[0] if len(terms) == 1 else add(b, P["add"], tuple(terms), a)


class _Compare:
    """x of graph b under piecewise_mask's comparisons: `x <= 1.0` adds le(x, 1.0) to b."""

    def __init__(self, b, x):
        self.b, self.x = b, x

    def _op(name):
        def cmp(self, v):
            b, x = self.b, self.x
            return add(b, P[name], (x, v), dict(b[x], shape=b[x]["shape"], dtype=D.bool_))
        return cmp
    __lt__, __le__, __gt__, __ge__ = _op("lt"), _op("le"), _op("gt"), _op("ge")
    del _op


_JOIN = {True: "logical_or", False: "logical_and"}


class _Key:
    """x under piecewise_mask's comparisons as keys of graph nodes: `x <= 1.0` gives
    ('le', (x, 1.0)), the op and arguments of a node that computes it."""

    def __init__(self, x):
        self.x = x

    def _op(name):
        return lambda self, v: (name, (self.x, literal_key(v)))
    __lt__, __le__, __gt__, __ge__ = _op("lt"), _op("le"), _op("gt"), _op("ge")
    del _op


def _node_key(a):
    return a["op"], tuple(x if isinstance(x, V) else literal_key(x) for x in a["args"])


def share_forward_masks(fwd, bwd):
    """piecewise_backward(g, x) of a backward graph after autodiff, where the forward computes
    its mask (the activation's composite makes the same comparisons of x: nn/functional.py),
    as a select through that mask, read from the forward as a saved value: the forward's
    1-byte mask is what the backward then needs, not x, as when the derivative was where()'s
    of the composite (the partition keeps a small mask and the output the next layer's
    backward reads, instead of recomputing both from x in the backward). Others are left to
    decompose_derivative_ops."""
    if not any(a["op"] == "piecewise_backward" for a in bwd.nx._node.values()):
        return unchanged(bwd)
    index = {}
    for n, a in fwd.nx._node.items():
        if a["op"] in ("lt", "le", "gt", "ge", "logical_or", "logical_and"):
            index.setdefault(_node_key(a), n)
    shared = {}

    def rule(b, n, a, args):
        if a["op"] != "piecewise_backward" or b[args[1]].get("role") != "saved":
            return None
        p = a["params"]
        parts, _, _ = piecewise_mask(_Key(V(b[args[1]]["fwd"])), **p)
        found = [index.get(k) for k in parts]
        if None in found:
            return None
        m = found[0]
        for q in found[1:]:
            m = index.get((_JOIN[p["nan_inside"]], (V(m), V(q))))
            if m is None:
                return None
        if m not in shared:
            shared[m] = b.add_input(fwd[m]["shape"], fwd[m]["dtype"], "saved", name=None, fwd=V(m), srcs=[])
        return _piecewise_select(b, a, args[0], args[1], shared[m])
    return rewrite(bwd, rule)


def decompose_derivative_ops(graph):
    """The ops that make a derivative differentiable again, as plain ops in a graph nobody
    differentiates again (a backward graph after autodiff, a whole step's, a forward after
    its autodiff): relu's threshold_backward(g, x, t) as where(x <= t, 0, g), the rest of its
    family's piecewise_backward (_piecewise_select), and `piecewise(x, y)`, an activation's
    value y with its derivative for x, which is y. The same values; the partition can then keep
    the 1-byte mask instead of x, and the numpy code writes the select through it (where_zero)."""
    ops = {"threshold_backward", "piecewise_backward", "piecewise"}
    if not any(a["op"] in ops for a in graph.nx._node.values()):
        return unchanged(graph)

    def rule(b, n, a, args):
        op = a["op"]
        if op == "piecewise":
            return args[1]
        if op == "piecewise_backward":
            return _piecewise_select(b, a, *args)
        if op == "threshold_backward":
            g, x = args
            mask = add(b, P["le"], (x, a["params"]["threshold"]), dict(a, shape=b[x]["shape"], dtype=D.bool_))
            return add(b, P["where"], (mask, 0, g), a)
        return None
    return rewrite(graph, rule)

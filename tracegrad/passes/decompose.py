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
from ..ops.primitives import PRIMITIVES as P
from .rewrite import rewrite, add, unchanged

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


def decompose_threshold_backward(graph):
    """threshold_backward(g, x, t) -> where(x <= t, 0, g): relu's derivative, an op of its own
    so that a derivative of it connects x (torch's ThresholdBackwardBackward0), is the
    comparison and the select in a graph nobody differentiates again: a backward graph after
    autodiff (the next derivative is taken from the graph as traced), or a whole step's. The
    same values; the partition can then keep the 1-byte mask instead of x, and the numpy code
    writes the select through it (codegen's where_zero)."""
    if not any(a["op"] == "threshold_backward" for a in graph.nx._node.values()):
        return unchanged(graph)

    def rule(b, n, a, args):
        if a["op"] != "threshold_backward":
            return None
        g, x = args
        mask = add(b, P["le"], (x, a["params"]["threshold"]), dict(a, shape=b[x]["shape"], dtype=D.bool_))
        return add(b, P["where"], (mask, 0, g), a)
    return rewrite(graph, rule)

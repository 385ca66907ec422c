"""The IR recorded for a tensor: `graph_of(t)` gives the forward graph recorded for tensor `t`,
`backward_graph_of(t)` the backward graph the differentiation pass derives from it.

They read grad_fn nodes, so they live with the engine; `tracegrad.ir.graph_of` and
`tracegrad.ir.backward_graph_of` are these functions, put on the `ir` namespace by the package's
`__init__` (`ir/` itself imports nothing outside itself).
"""
from ..autodiff import derive
from ..tensor import Tensor
from . import engine
from .graph import AccumulateGrad


def _recorded(tensors):
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    roots = []
    for t in tensors:
        if t.grad_fn is None:
            raise RuntimeError("this tensor has no recorded graph (it is a leaf or does not require grad)")
        roots.append((t.grad_fn, t._output_nr))
    order, index = engine.walk([r[0] for r in roots])
    return order, index, roots


def graph_of(tensors):
    """The forward IR graph recorded for `tensors` (leaves and constants are its inputs)."""
    order, index, roots = _recorded(tensors)
    g, vals = engine.forward_graph(order)
    g.outputs = [vals[(id(n), s)] for n, s in roots]
    return g


def backward_graph_of(tensors, inputs=None):
    """The backward IR graph derived for `tensors`, with respect to their leaves (or `inputs`)."""
    order, index, roots = _recorded(tensors)
    g, vals = engine.forward_graph(order)
    outputs = [vals[(id(n), s)] for n, s in roots]
    if inputs is None:
        wrt = [vals[(id(n), 0)] for n in order if isinstance(n, AccumulateGrad)]
    else:
        wrt = []
        for t in inputs:
            n, s = (t.grad_fn, t._output_nr) if t.grad_fn is not None else (t._accumulator(), 0)
            wrt.append(vals[(id(n), s)])
    return derive(g, outputs, wrt)

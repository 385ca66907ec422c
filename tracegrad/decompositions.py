"""Lowering by decomposition, the front end's share of the Triton backend.

A primitive whose op-table `triton` slot is `Decompose` (pooling, einsum) is
rewritten into primitives the code generator lowers directly. Its rule is tracegrad ops run
on symbolic tensors (`Proxy`), so this lives beside the tracer, above the compiler core:
`codegen/triton_gpu.py` never imports the tracer and refuses a graph that still holds such
a node. The two-stage split of whole-tensor reductions, which the code generator chooses,
is traced here too. `lower(graph)` is the steps in order: decomposition, the split, code
generation.
"""
from .codegen.triton_gpu import _SPLIT, _lowering, _splittable, interpreting, lower as _lower_decomposed
from .ir.graph import V
from .ops.lowering import Decompose
from .ops.primitives import PRIMITIVES
from .passes.rewrite import rewrite
from .tracing import Proxy, apply, trace


def lower(graph, max_row_block=None):
    """The graph as a Triton program (`codegen.triton_gpu.TritonProgram`), its `Decompose`
    nodes rewritten and its whole-tensor reductions split in two stages first.

    max_row_block: the longest reduction row a kernel keeps whole in registers (longer
    rows loop over blocks); 64 under the interpreter, 4096 on a GPU."""
    if max_row_block is None:
        max_row_block = 64 if interpreting() else 4096
    return _lower_decomposed(_split_whole_reductions(decompose(graph), max_row_block), max_row_block)


# == decomposition =================================================================================
# A primitive whose slot is `Decompose` (pooling, einsum) is rewritten, before
# grouping, into primitives the other slots lower: its rule runs on Proxies of the graph under
# construction, so the ops it applies are traced into it with their shapes and dtypes. A rule
# may add constants (index maps such as pooling's window positions): they become graph inputs
# after the original ones, bound from their values when the program runs.

def decompose(graph):
    """The graph with every `Decompose` node rewritten (the graph itself when there is none)."""
    for _ in range(8):               # a rule may apply another decomposed primitive
        if not any(isinstance(_lowering(graph[n]), Decompose) for n in graph.ops() if graph[n]["op"] != "proj"):
            return graph
        graph = _decompose_once(graph)
    raise NotImplementedError("decompositions do not terminate")


def _decompose_once(graph):
    def rule(b, n, a, args):
        if a["op"] == "proj":
            return args[0][a["params"]["index"]] if isinstance(args[0], tuple) else None
        low = _lowering(a)
        if not isinstance(low, Decompose):
            return None
        ins = [Proxy.make(b, x, b[x]["shape"], b[x]["dtype"]) if isinstance(x, V) else x for x in args]
        b.__dict__["source_hint"] = a.get("source")
        with trace(b):
            out = low.fn(*ins, **a["params"])
            outs = out if a["prim"].multi else (out,)
            types = list(zip(a["shape"], a["dtype"])) if a["prim"].multi else [(a["shape"], a["dtype"])]
            vals = []
            for o, (shape, dtype) in zip(outs, types):
                assert tuple(o.shape) == tuple(shape), (a["op"], tuple(o.shape), tuple(shape))
                if o.dtype is not dtype:
                    o = _apply1("convert", o, dtype=dtype)
                if o.__dict__["_name"] in args or b[o.__dict__["_name"]]["op"] == "input":
                    # an argument itself (einsum("ij->ij")): a copy stands for the node
                    o = _apply1("clone", o)
                vals.append(V(o.__dict__["_name"]))
        return tuple(vals) if a["prim"].multi else vals[0]

    saved = {k: graph.__dict__[k] for k in ("constants", "origin", "source_hint") if k in graph.__dict__}
    try:
        for k in saved:
            del graph.__dict__[k]
        b = rewrite(graph, rule)
    finally:
        graph.__dict__.update(saved)
    b.__dict__.pop("source_hint", None)
    b.__dict__.pop("constants", None)
    added = [v for v in b.inputs if v not in set(graph.inputs)]
    for v in added:
        b[v]["fixed"] = True
    b.inputs = list(graph.inputs) + added
    return b


# == split whole-tensor reductions ==================================================================
# Which reductions codegen/triton_gpu.py runs in two stages (`_splittable`) is its decision; the
# rewrite traces the two reductions on Proxies, so it runs here.

def _split_whole_reductions(graph, max_row_block):
    """The graph with each whole-tensor reduction that _splittable takes done in two stages."""
    if not any(_splittable(graph, n, max_row_block) is not None for n in graph.ops()):
        return graph
    def rule(b, n, a, args):
        split = _splittable(graph, n, max_row_block)
        if split is None:
            return None
        k, rows = split
        x = args[0]
        shape = tuple(b[x]["shape"])
        op = _SPLIT[a["op"]]
        with trace(b):
            p = Proxy.make(b, x, shape, b[x]["dtype"])
            if rows is not None:
                p, shape = _apply1("reshape", p, shape=rows), rows
            part = _apply1(op, p, dims=tuple(range(k, len(shape))), keepdim=False)
            out = _apply1(op, part, dims=tuple(range(k)), keepdim=False)
            if tuple(out.shape) != tuple(a["shape"]):
                out = _apply1("reshape", out, shape=tuple(a["shape"]))
            if out.dtype is not a["dtype"]:
                out = _apply1("convert", out, dtype=a["dtype"])
        return V(out.__dict__["_name"])

    return rewrite(graph, rule)


def _apply1(name, x, **params):
    return apply(PRIMITIVES[name], (x,), params)

"""Constant folding: ops whose arguments are all Python literals or folded values are
evaluated once at compile time and become constant inputs. The kernels run on numpy
arrays, and a folded input's `value` is the array: the front end (compile.py) binds it as a
tensor once the pipeline has run.

Constant inputs that came from the caller's tensors (module parameters, captured
tensors) are never folded: they are read afresh at every call. Large results (over
`MAX_ELEMENTS`) and graph outputs are left to run, so no output aliases a constant.
"""
import numpy as np

from ..ir.graph import V, refs
from ..ir.symbolic import has_sym
from .._dtype import as_dtype_array
from .rewrite import rewrite, is_pure, unchanged

MAX_ELEMENTS = 1 << 16


def fold_constants(graph):
    outputs = set(o for o in graph.outputs if o is not None)
    folded = {}
    # only an op with no value among its arguments can start a fold (every folded value
    # comes from one); without such an op the pass has nothing to do
    if not any(a["op"] not in ("input", "proj") and n not in outputs and not refs(a["args"])
               for n, a in graph.nx._node.items()):
        return unchanged(graph)

    def rule(b, n, a, args):
        if n in outputs or a["op"] in ("proj",) or not is_pure(a) or a["prim"].multi:
            return None
        if any(r not in folded for r in refs(args)):
            return None
        if has_sym(a["shape"]) or has_sym(a["params"]):
            return None          # a value of symbolic size is made at run time, for the call's sizes
        if int(np.prod(a["shape"])) > MAX_ELEMENTS:
            return None
        vals = [folded[x] if isinstance(x, V) else x for x in args]
        out = as_dtype_array(a["prim"].impl(*vals, **a["params"]), a["dtype"])
        v = b.add_input(a["shape"], a["dtype"], "const")
        b[v]["value"] = out
        b[v]["folded"] = True
        folded[v] = out
        return v
    return rewrite(graph, rule)

"""The IR verifier: what every graph, and every pass's result, must satisfy."""
from .graph import V, refs


class VerifyError(AssertionError):
    pass


_REQUIRED = frozenset(("op", "args", "params", "shape", "dtype"))


def verify(graph):
    seen = set()
    inputs = set(graph.inputs)
    pred = graph.nx._pred
    for n, a in graph.nx._node.items():
        if not _REQUIRED <= a.keys():
            for key in ("op", "args", "params", "shape", "dtype"):
                if key not in a:
                    raise VerifyError(f"{n}: missing attribute '{key}'")
        if a["op"] == "input":
            if n not in inputs:
                raise VerifyError(f"{n}: input node not listed in graph.inputs")
        else:
            if a["op"] != "proj" and a["prim"] is None:
                raise VerifyError(f"{n}: op '{a['op']}' has no primitive")
            into = pred[n]
            for r in refs(a["args"]):
                if r not in into or r not in seen:
                    if r not in seen:
                        raise VerifyError(f"{n}: uses {r} before it is defined")
                    raise VerifyError(f"{n}: missing edge from {r}")
        seen.add(n)
    for o in graph.outputs:
        if o is not None and o not in graph.nx:
            raise VerifyError(f"output {o} is not a value of the graph")
    return True

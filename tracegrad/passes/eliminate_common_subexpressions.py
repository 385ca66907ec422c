"""Common-subexpression elimination: one value for each (op, arguments, parameters).

Literal arguments and parameters are keyed by type and bits (`literal_key`): `x + 0.0`
and `x + -0.0`, `x * 1` and `x * 1.0` are different values."""
from .rewrite import rewrite, is_pure, copy_node, literal_key, unchanged


_NO_PARAMS = literal_key({})


def _key(a, args):
    op = a["op"]
    params, dt = a["params"], a["dtype"]
    # dtypes are singletons: the object is its key (a multi-output op's list, by its text)
    return (op, literal_key(args), literal_key(params) if params else _NO_PARAMS,
            literal_key(a["shape"]) if op != "proj" else None, str(dt) if isinstance(dt, (list, tuple)) else dt)


def eliminate_common_subexpressions(graph):
    # Until two nodes merge every value keeps its name, so keys taken over the graph as it is
    # are the keys the rewrite would take: with no two alike, the pass changes nothing.
    keys = set()
    for a in graph.nx._node.values():
        if a["op"] != "input" and is_pure(a):
            k = _key(a, a["args"])
            if k in keys:
                break
            keys.add(k)
    else:
        return unchanged(graph)
    seen = {}

    def rule(b, n, a, args):
        if not is_pure(a):
            return None
        key = _key(a, args)
        hit = seen.get(key)
        if hit is None:
            hit = seen[key] = copy_node(b, n, a, args)
        return hit
    return rewrite(graph, rule)

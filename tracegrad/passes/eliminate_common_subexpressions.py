"""Common-subexpression elimination: one value for each (op, arguments, parameters).

Literal arguments and parameters are keyed by type and bits (`literal_key`): `x + 0.0`
and `x + -0.0`, `x * 1` and `x * 1.0` are different values."""
from .rewrite import rewrite, is_pure, copy_node, literal_key


_NO_PARAMS = literal_key({})


def eliminate_common_subexpressions(graph):
    seen = {}

    def rule(b, n, a, args):
        if not is_pure(a):
            return None
        op = a["op"]
        params, dt = a["params"], a["dtype"]
        # dtypes are singletons: the object is its key (a multi-output op's list, by its text)
        key = (op, literal_key(args), literal_key(params) if params else _NO_PARAMS,
               literal_key(a["shape"]) if op != "proj" else None, str(dt) if isinstance(dt, (list, tuple)) else dt)
        hit = seen.get(key)
        if hit is None:
            hit = seen[key] = copy_node(b, n, a, args)
        return hit
    return rewrite(graph, rule)

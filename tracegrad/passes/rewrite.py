"""The one graph-rebuilding walk that the rewriting passes share.

`rewrite(graph, rule)` copies `graph` node by node in order. For each op node, `rule(b,
node, attrs, args)` sees the new graph `b` under construction and the node's arguments
already renamed into `b`; it returns a value of `b` to stand for the node, or None to
copy the node as it is. Inputs and outputs keep their names.
"""
import itertools

from ..ir.graph import Graph, V, map_args, refs, insert, number_after
from ..ir.symbolic import Sym

IMPURE = frozenset({"call_hooks", "node_hooks", "node_prehooks", "function", "function_backward", "delayed_error",
                    "compiled_call", "compiled_backward", "derivative_error"})


def is_pure(attrs):
    op = attrs["op"]
    return op not in IMPURE and "rand" not in op and "dropout" not in op and "bernoulli" not in op


def rewrite(graph, rule):
    b = Graph(graph.name)
    b.__dict__.update({k: v for k, v in graph.__dict__.items() if k not in ("name", "nx", "inputs", "outputs", "_ids")})
    rename = {}
    b._ids = itertools.count(number_after(graph.nx))
    made = b.nx._succ
    for n, a in list(graph.nx._node.items()):
        if a["op"] == "input":
            insert(b.nx, n, a.copy(), ())
            b.inputs.append(n)
            rename[n] = n
            continue
        args = a["args"]
        if args.__class__ is tuple:      # the common case, without a call per argument
            args = tuple([rename[x] if x.__class__ is V else
                          map_args(x, rename.__getitem__) if isinstance(x, (V, tuple, list)) else x for x in args])
        else:
            args = map_args(args, rename.__getitem__)
        new = rule(b, n, a, args)
        if new is None:
            # copy_node, inline: most nodes of most rewrites are copied as they are
            name = n if n not in made else b.fresh()
            attrs = a.copy()
            attrs["args"] = args
            insert(b.nx, name, attrs, refs(args))
            new = name if name.__class__ is V else V(name)
        rename[n] = new
    b.outputs = [None if o is None else rename[o] for o in graph.outputs]
    return b


def unchanged(graph):
    """What a pass returns when a scan shows that its rule would change no node: the graph
    itself, as eliminate_dead_code returns a graph with nothing dead. Passes never change
    the graph they are given, so a pass's result may be its input; code that changes a
    pass's result in place copies it first (group_fusions does). A copy here was a full
    copy of a long program for each pass with nothing to do (six per compile of a chain)."""
    return graph


def literal_key(x):
    """A key under which two arguments or parameters are one value only where they are the
    same bits of the same type: 0.0 and -0.0, 1 and 1.0 and True compare equal in Python
    but give different results (the sign of a zero, the dtype)."""
    c = x.__class__             # the common exact types first, without the isinstance chain
    if c is V:
        return x
    if c is int:
        return ("int", x)
    if c is float:
        return ("float", x.hex())
    if c is tuple:
        return ("tuple",) + tuple([literal_key(v) for v in x])
    if c is Sym:
        return ("sym", x.source())      # a symbolic size by its expression (equal ones are one value)
    if isinstance(x, float):
        return ("float", x.hex())
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(literal_key(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, literal_key(v)) for k, v in x.items())
    try:
        hash(x)
        return x
    except TypeError:
        return ("id", id(x))


def copy_node(b, n, a, args):
    name = n if n not in b.nx._succ else b.fresh()
    attrs = a.copy()
    attrs["args"] = args
    insert(b.nx, name, attrs, refs(args))
    return V(name)


def add(b, prim, args, like, **params):
    """Add an op of `prim` to b with the type of node attrs `like`."""
    return b.add_op(prim, tuple(args), params, like["shape"], like["dtype"], like.get("source"))

"""The IR: a small typed DAG on networkx.

Each graph node is one value `t0, t1, ...` made by an `input` or by an op from the op
table; its attributes are the op, its arguments (value names as `V`, or Python
constants), its parameters, and its type (shape, dtype). Multi-output ops make one
tuple-valued node and a `proj` node per output, as torch.fx does with getitem.
Node insertion order is a topological order; passes keep it so.
"""
import itertools

import networkx as nx


class V(str):
    """A reference to a value of the graph, inside an argument list."""
    __slots__ = ()


def refs(args):
    """The value names an argument list refers to, in order (nested tuples included)."""
    if args.__class__ is V or isinstance(args, V):
        return [args]
    out = []
    for a in args:
        c = a.__class__
        if c is V:
            out.append(a)
        elif c is float or c is int:        # the common literals, without the isinstance calls
            continue
        elif isinstance(a, V):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(refs(a))
    return out


def map_args(args, fn):
    """Rebuild an argument list with fn applied to each value reference."""
    if isinstance(args, V):
        return fn(args)
    if isinstance(args, tuple):
        return tuple([map_args(a, fn) if isinstance(a, (V, tuple, list)) else a for a in args])
    if isinstance(args, list):
        return [map_args(a, fn) if isinstance(a, (V, tuple, list)) else a for a in args]
    return args


def exact_shape(shape):
    """shape with a user's int subclass (reshape(MyInt(3), 2)) as a plain int: shapes are
    written into generated source, where the subclass's own __repr__ must not run."""
    for d in shape:
        if type(d) is not int:
            break
    else:
        return shape
    out = [int.__index__(d) if isinstance(d, int) else exact_shape(d) if isinstance(d, (tuple, list)) else d
           for d in shape]
    return type(shape)(out) if type(shape) in (tuple, list) else tuple(out)


def insert(G, name, attrs, preds):
    """Add node `name` (new to networkx DiGraph G) with attribute dict `attrs` (taken, not
    copied) and an edge from each value in `preds`: what G.add_node and G.add_edge do,
    without their per-call checks, which cost as much as the rest of a pass."""
    if name in G._succ:
        raise ValueError(f"internal error: value {name} is already in the graph")
    succ = G._succ
    G._node[name] = attrs
    succ[name] = {}
    pred = G._pred[name] = {}
    for r in preds:
        if r not in pred:
            pred[r] = succ[r][name] = {}
    cache = G.__dict__.get("__networkx_cache__")
    if cache:
        cache.clear()


class Graph:
    """A typed DAG of values, kept in a networkx DiGraph (edges: producer -> consumer)."""

    def __init__(self, name="graph"):
        self.name = name
        self.nx = nx.DiGraph()
        self.inputs = []
        self.outputs = []
        self._ids = itertools.count()

    # -- building --------------------------------------------------------------
    def number_after(self, other):
        """Number this graph's new values after every value of `other`, so listings of the two
        side by side (a backward and its forward) never give two values one name."""
        last = -1
        for n in other.nx:
            digits = n.lstrip("abcdefghijklmnopqrstuvwxyz_")
            if digits.isdigit():
                last = max(last, int(digits))
        self._ids = itertools.count(last + 1)

    def fresh(self, prefix="t"):
        while True:
            n = V(f"{prefix}{next(self._ids)}")
            if n not in self.nx:
                return n

    def add_input(self, shape, dtype, role="input", name=None, **attrs):
        shape = exact_shape(shape)
        name = V(name) if name else self.fresh("x" if role == "input" else role[0])
        insert(self.nx, name, dict(op="input", prim=None, args=(), params={}, shape=tuple(shape), dtype=dtype,
                                   role=role, source=None, **attrs), ())
        self.inputs.append(name)
        return name

    def add_op(self, prim, args, params, shape, dtype, source=None, name=None):
        shape = exact_shape(shape)
        name = V(name) if name else self.fresh()
        insert(self.nx, name, {"op": prim.name, "prim": prim, "args": args, "params": params, "shape": shape,
                               "dtype": dtype, "role": None, "source": source}, refs(args))
        return name

    def add_proj(self, tup, index, shape, dtype):
        name = self.fresh()
        insert(self.nx, name, {"op": "proj", "prim": None, "args": (tup,), "params": {"index": index},
                               "shape": shape, "dtype": dtype, "role": None, "source": None}, (tup,))
        return name

    # -- reading ---------------------------------------------------------------
    def __getitem__(self, name):
        return self.nx._node[name]          # what nx.nodes[name] returns, without the view

    def __contains__(self, name):
        return name in self.nx

    def __len__(self):
        return self.nx.number_of_nodes()

    def nodes(self):
        """Value names in topological (insertion) order."""
        return list(self.nx._node)

    def ops(self):
        return [n for n, a in self.nx.nodes(data=True) if a["op"] != "input"]

    def users(self, name):
        return list(self.nx._succ[name])

    def type_str(self, name):
        a = self.nx.nodes[name]
        return type_str(a["shape"], a["dtype"])

    def __str__(self):
        from .printer import to_python
        return to_python(self)

    __repr__ = __str__

    def to_dot(self):
        from .printer import to_dot
        return to_dot(self)

    def copy(self, nx_graph=None):
        """A copy; with `nx_graph`, a copy of everything else holding that networkx graph."""
        g = Graph(self.name)
        g.nx = copy_nx(self.nx) if nx_graph is None else nx_graph
        g.inputs = list(self.inputs)
        g.outputs = list(self.outputs)
        g._ids = itertools.count(len(self.nx) + 1)
        return g


def copy_nx(S, keep=None):
    """networkx's DiGraph.copy (attribute dicts copied, values shared), filled in directly;
    with `keep` (a set), of those nodes only."""
    G = nx.DiGraph()
    G.graph.update(S.graph)
    node, succ, pred = G._node, G._succ, G._pred
    for n, d in S._node.items():
        if keep is None or n in keep:
            node[n] = d.copy()
            succ[n] = {}
            pred[n] = {}
    for u, nbrs in S._succ.items():
        su = succ.get(u)
        if su is None:
            continue
        for v, d in nbrs.items():
            pv = pred.get(v)
            if pv is not None:
                su[v] = pv[u] = d.copy()
    return G


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8"}


def type_str(shape, dtype):
    if isinstance(dtype, (list, tuple)):
        return "(" + ", ".join(type_str(s, d) for s, d in zip(shape, dtype)) + ")"
    return f"{_SHORT.get(dtype.name, dtype.name)}[{', '.join(map(_dim_str, shape))}]"


def _dim_str(d):
    # int's own text for a user's int subclass: its __str__ never runs (type strings go into generated source)
    return int.__repr__(d) if isinstance(d, int) else str(d)

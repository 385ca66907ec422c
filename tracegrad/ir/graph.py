"""The IR: a small typed DAG on networkx.

Each graph node is one value `t0, t1, ...` made by an `input` or by an op from the op
table; its attributes are the op, its arguments (value names as `V`, or Python
constants), its parameters, and its type (shape, dtype). Multi-output ops make one
tuple-valued node and a `proj` node per output, as torch.fx does with getitem.
Node insertion order is a topological order; passes keep it so.
"""
import itertools

import networkx as nx

from .printer import to_dot, to_python
from .values import V, exact_shape, map_args, refs, type_str  # noqa: F401  (the graph's public names)


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
        self._ids = itertools.count(number_after(other.nx))

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
        return to_python(self)

    __repr__ = __str__

    def to_dot(self):
        return to_dot(self)

    def copy(self, nx_graph=None):
        """A copy; with `nx_graph`, a copy of everything else holding that networkx graph."""
        g = Graph(self.name)
        g.nx = copy_nx(self.nx) if nx_graph is None else nx_graph
        g.inputs = list(self.inputs)
        g.outputs = list(self.outputs)
        g._ids = itertools.count(len(self.nx) + 1)
        return g


_PREFIX = "abcdefghijklmnopqrstuvwxyz_"


def number_after(G):
    """The number after the largest one that ends a value name of networkx graph G (t12,
    s_t7, x3), 0 for none: where fresh names made after all of G's begin."""
    top = -1
    for n in G._node:
        digits = n.lstrip(_PREFIX)
        if digits.isdigit():
            k = int(digits)
            if k > top:
                top = k
    return top + 1


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

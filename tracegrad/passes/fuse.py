"""Fusion grouping: mark chains of row-local ops that can run together, chunk by chunk.

A group is a set of ops whose values all have the same leading dimension N and that
compute each row from the same row of their arguments: elementwise ops, broadcasts and
reductions (and softmax-like ops) over dimensions other than the first. A sum over the
first dimension may end a group too ("col": per-chunk partial sums, added after it). Such a group can run in
chunks of rows that stay in the L2 cache (codegen/numpy_cpu.py), over several threads.
Each node of a group gets the attribute `group` (an int). The group runs where its first
member stands, so a node joins a group only if its arguments from outside the group
are all computed before the group starts. Groups of one op are not marked, nor groups
whose values are all smaller than `min_bytes`: on a few kilobytes, chunks and threads
cost more than they save, and plain numpy calls are faster.

Since a group can only take ops whose outside arguments are ready when it starts, the
graph is first put in an order that computes the small values the groups cannot take
(a loss's scalar scaling, per-example weights...) as early as their arguments allow:
two row-wise chains that only such a value separated become one group. Small values
join a group only where its rows need them: reading a wide value (a row sum, a picked
element) or feeding one (a row's mean and scale); the rest run as plain calls on whole
arrays.
"""
import heapq
import math

from ..ops.primitives import BLAS_OPS
from ..ir.graph import V, refs, insert
from ..ir.symbolic import hint
from .rewrite import is_pure

ROW_OPS = frozenset({"softmax", "log_softmax"})
ROW_SHAPE_OPS = frozenset({"full", "reshape", "unsqueeze", "squeeze", "gather", "scatter", "detach"})


def _row_shape_op(g, a, xs, shape):
    """Shape ops, fills and gathers along dimensions other than the first are row-local."""
    op, p = a["op"], a["params"]
    rows = shape[0]
    if any(not g[x]["shape"] or g[x]["shape"][0] != rows for x in xs):
        return None
    if op in ("full", "detach"):
        return "ew", rows
    if op == "reshape":
        return ("ew", rows) if len(xs) == 1 else None
    if op == "unsqueeze":
        return ("ew", rows) if p["dim"] % (len(shape)) != 0 else None
    if op == "squeeze":
        return ("ew", rows) if 0 not in _dims(a, len(g[xs[0]]["shape"])) else None
    if p.get("dim") is None or p["dim"] % len(shape) == 0 or any(len(g[x]["shape"]) != len(shape) for x in xs):
        return None
    return "ew", rows


def _dims(a, ndim):
    p = a["params"]
    if "dims" in p:
        d = p["dims"]
        if d is None:
            return None
        d = (d,) if isinstance(d, int) else tuple(d)
    elif "dim" in p:
        d = (p["dim"],)
    else:
        return None
    return tuple(x % ndim if ndim else 0 for x in d)


def row_local(g, n):
    """(kind, N) if node n is row-local with N rows: kind 'ew' elementwise, 'red' row reduction."""
    a = g[n]
    prim = a["prim"]
    if prim is None or prim.multi or not is_pure(a) or isinstance(a["dtype"], (list, tuple)) or "mem" in a:
        # (`mem`: an elementwise result eager lays out in another order than numpy's ufunc, of
        # operands in two orders; codegen lays it out so on its own, not by chunks)
        return None
    shape = a["shape"]
    xs = [x for x in a["args"] if isinstance(x, V)]
    if a["op"] == "sum" and len(xs) == 1 and a["dtype"].name not in ("float16", "bfloat16"):
        # (16-bit sums accumulate in float32: per-chunk partial sums would round in between)
        s = g[xs[0]]["shape"]
        dims = _dims(a, len(s))
        if s and s[0] > 1 and (dims is None or 0 in dims):
            return "col", s[0]
    if not shape or shape[0] <= 1:
        return None
    if a["op"] in ROW_SHAPE_OPS:
        return _row_shape_op(g, a, xs, shape)
    if a["op"] == "expand":
        s = g[xs[0]]["shape"]
        if len(s) == len(shape) and s[0] in (1, shape[0]):
            return "ew", shape[0]
        return None
    if prim.elementwise:
        for x in a["args"]:
            if isinstance(x, V):
                s = g[x]["shape"]
                if len(s) > len(shape) or (len(s) == len(shape) and s[0] not in (1, shape[0])):
                    return None
        return "ew", shape[0]
    if prim.reduction or a["op"] in ROW_OPS:
        if len(xs) != 1:
            return None
        s = g[xs[0]]["shape"]
        dims = _dims(a, len(s))
        if dims is None or 0 in dims or not s or s[0] != shape[0]:
            return None
        return "red", shape[0]
    return None


MIN_BYTES = 1 << 16


def _nbytes(a):
    # (the order and grouping of ops steer cost alone: a symbolic size's hint, unguarded)
    return math.prod(hint(a["shape"])) * a["dtype"].itemsize


def schedule_small_first(graph, min_bytes=MIN_BYTES):
    """The same graph, its nodes in a topological order that puts each small op of small
    values (fewer than `min_bytes` bytes each) as early as its arguments allow, and keeps
    the recorded order otherwise. Graphs with impure ops
    (hooks, custom Functions) keep their order as recorded."""
    order = graph.nodes()
    if any(not is_pure(graph[n]) for n in order if graph[n]["op"] != "input"):
        return graph
    index = {n: i for i, n in enumerate(order)}
    waiting = {n: len(set(refs(graph[n]["args"]))) for n in order}

    def small(n):
        a = graph[n]
        return not isinstance(a["dtype"], (list, tuple)) and _nbytes(a) < min_bytes

    def key(n):
        a = graph[n]
        early = a["op"] == "input" or (a["prim"] is not None and small(n) and
                                       all(small(x) for x in refs(a["args"])))
        return (0 if early else 1, index[n])
    ready = [key(n) + (n,) for n in order if waiting[n] == 0]
    heapq.heapify(ready)
    new = []
    while ready:
        *_, n = heapq.heappop(ready)
        new.append(n)
        for u in dict.fromkeys(graph.users(n)):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, key(u) + (u,))
    if new == order:
        return graph
    G = type(graph.nx)()
    for n in new:
        insert(G, n, dict(graph[n]), graph.nx._pred[n])
    return graph.copy(G)


def group_fusions(graph, min_size=2, min_bytes=None):
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    if not any(not isinstance(a["dtype"], (list, tuple)) and _nbytes(a) >= min_bytes
               for a in graph.nx._node.values()):
        return graph                    # no wide value: no group to form, and the order stays as it is
    g = schedule_small_first(graph, min_bytes)
    g = g.copy() if g is graph else g
    order = g.nodes()
    index = {n: i for i, n in enumerate(order)}
    group_of = {}
    groups = {}            # id -> dict(start, rows, members)
    next_id = 0
    last = None
    kinds = {}

    def wide(x):
        return _nbytes(g[x]) >= min_bytes

    def ready(x):
        """Where value x is available: its group's start for a group member."""
        gid = group_of.get(x)
        return groups[gid]["start"] if gid is not None else index[x]
    for n in order:
        if g[n]["op"] == "input":
            continue
        kind = row_local(g, n)
        if kind is None:
            continue
        _, rows = kind
        args = [x for x in g[n]["args"] if isinstance(x, V)]
        if not wide(n) and not any(wide(x) or x in group_of for x in args):
            continue                    # a small value of small values: one plain call on the whole array
        cands = []
        for x in args:
            gid = group_of.get(x)
            if gid is not None and gid not in cands:
                cands.append(gid)
        cands.sort(key=lambda k: -groups[k]["start"])
        if last is not None and last not in cands:
            cands.append(last)          # a sibling: same rows, arguments ready before it starts
        joined = None
        for gid in cands:
            grp = groups[gid]
            if grp["rows"] != rows:
                continue
            ok = True
            for x in args:
                if group_of.get(x) == gid:
                    if kinds[x] == "col" or (len(g[x]["shape"]) != len(g[n]["shape"]) and kind[0] == "ew" and
                                             g[n]["op"] not in ROW_SHAPE_OPS):
                        ok = False
                        break
                    continue
                if ready(x) >= grp["start"]:
                    ok = False
                    break
            if ok:
                joined = gid
                break
        if joined is None:
            joined = next_id
            next_id += 1
            groups[joined] = {"start": index[n], "rows": rows, "members": []}
        group_of[n] = joined
        kinds[n] = kind[0]
        groups[joined]["members"].append(n)
        last = joined
    for grp in groups.values():
        _keep_what_rows_need(g, grp, group_of, wide)
    # a program with matrix products runs its groups on the calling thread (codegen/numpy_cpu.py)
    serial = any(g[n]["op"] in BLAS_OPS for n in order)
    k = 0
    for gid, grp in groups.items():
        for members in (_chains(g, grp["members"], wide) if serial else [grp["members"]]):
            if len(members) < min_size or all(kinds[n] == "col" for n in members):
                continue
            widest = max(_nbytes(g[v]) for n in members for v in [n, *g[n]["args"]] if isinstance(v, V))
            if widest < min_bytes:
                continue
            _mark(g, k, members, grp["rows"], kinds)
            k += 1
    return g


def _chains(g, members, wide):
    """The members in groups of their own that share no value, nor read one wide value:
    chains joined only as siblings (the SGD updates of two weights). On one thread they run
    faster one after the other than chunk by chunk together, which streams all their arrays
    at once (two weights' updates in 83-row chunks: 312-376 µs together, 282-296 µs one after
    the other); each chain runs where its first member stands, after every argument of the
    group."""
    root = {n: n for n in members}

    def find(n):
        while root[n] != n:
            root[n] = root[root[n]]
            n = root[n]
        return n
    readers = {}
    for n in members:
        for x in refs(g[n]["args"]):
            if x in root:
                root[find(x)] = find(n)
            elif wide(x):                      # read from outside: one pass over it, not two
                if x in readers:
                    root[find(readers[x])] = find(n)
                readers.setdefault(x, n)
    chains = {}
    for n in members:
        chains.setdefault(find(n), []).append(n)
    return list(chains.values())


def _mark(g, k, members, rows, kinds):
    for n in members:
        g[n]["group"] = k
        g[n]["fuse_rows"] = rows
        if kinds[n] == "col":
            g[n]["fuse_kind"] = "col"


def _keep_what_rows_need(g, grp, group_of, wide):
    """Drop from a group the small members that neither read a wide value nor lead to a
    member that does (a loss's per-row tail: log of the row sums, the picked logits, the
    mean): chunk by chunk they cost a numpy call each per chunk, all holding the GIL,
    where one call on the whole small array after the group does the same work."""
    members = grp["members"]
    keep = set()
    for m in reversed(members):
        if wide(m) or any(wide(x) for x in refs(g[m]["args"])) or any(u in keep for u in g.users(m)):
            keep.add(m)
    grp["members"] = [m for m in members if m in keep]
    for m in members:
        if m not in keep:
            del group_of[m]

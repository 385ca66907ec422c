"""Dead-code elimination: drop every op whose value no output needs.

Inputs are kept unless `drop_inputs` names the roles whose unused inputs may go
(a backward graph drops the saved values its live code never reads). An op that raises
when it runs (RAISES) is kept whether or not its value is read: a derivative rule that
ignores its gradient (round's zeros) does not spare torch's engine the node that raises.
"""
import itertools

from ..ir.graph import V, refs, copy_nx


RAISES = frozenset({"derivative_error"})


def live_values(graph, drop_inputs=()):
    """The values eliminate_dead_code keeps."""
    live = set(o for o in graph.outputs if o is not None)
    node = graph.nx._node
    for n in reversed(node):
        if n not in live:
            if node[n]["op"] not in RAISES:
                continue
            live.add(n)
        args = node[n]["args"]
        if args.__class__ is tuple:     # refs(args), without the call for the common arguments
            for x in args:
                c = x.__class__
                if c is V:
                    live.add(x)
                elif c is not float and c is not int:
                    live.update(refs((x,)))
        else:
            live.update(refs(args))
    for n in graph.inputs:
        if node[n]["role"] not in drop_inputs:
            live.add(n)
    return live


def eliminate_dead_code(graph, drop_inputs=(), own=False):
    """The graph without the values no output needs. With `own`, the caller hands `graph`
    over and reads it no more (derive's backward, a third of which its rules leave dead):
    the dead values are taken out of its networkx graph instead of the live ones copied
    into a new one; the result is the same."""
    live = live_values(graph, drop_inputs)
    if len(live) == len(graph.nx):
        return graph                 # nothing to drop: the graph as it is, not a copy of it
    if not own:
        g = graph.copy(copy_nx(graph.nx, live))
    else:
        G = graph.nx
        node, succ, pred = G._node, G._succ, G._pred
        dead = [n for n in node if n not in live]
        size = len(node)
        for n in reversed(dead):        # (a dead value's users are dead: they went before it)
            for u in pred.pop(n):
                out = succ.get(u)
                if out is not None:
                    del out[n]
            for v in succ.pop(n):
                pred[v].pop(n, None)
            del node[n]
        cache = G.__dict__.get("__networkx_cache__")
        if cache:
            cache.clear()
        g = graph.copy(G)
        g._ids = itertools.count(size + 1)      # as graph.copy numbers a copy of the whole graph
    g.inputs = [n for n in g.inputs if n in live]
    return g

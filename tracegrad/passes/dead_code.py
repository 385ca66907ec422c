"""Dead-code elimination: drop every op whose value no output needs.

Inputs are kept unless `drop_inputs` names the roles whose unused inputs may go
(a backward graph drops the saved values its live code never reads).
"""
from ..ir.graph import refs, copy_nx


def live_values(graph, drop_inputs=()):
    """The values eliminate_dead_code keeps."""
    live = set(o for o in graph.outputs if o is not None)
    for n in reversed(graph.nodes()):
        if n in live:
            live.update(refs(graph[n]["args"]))
    for n in graph.inputs:
        if graph[n]["role"] not in drop_inputs:
            live.add(n)
    return live


def eliminate_dead_code(graph, drop_inputs=()):
    live = live_values(graph, drop_inputs)
    if len(live) == len(graph.nx):
        return graph                 # nothing to drop: the graph as it is, not a copy of it
    g = graph.copy(copy_nx(graph.nx, live))
    g.inputs = [n for n in g.inputs if n in live]
    return g

"""Dead-code elimination: drop every op whose value no output needs.

Inputs are kept unless `drop_inputs` names the roles whose unused inputs may go
(a backward graph drops the saved values its live code never reads).
"""
from ..ir.graph import refs


def eliminate_dead_code(graph, drop_inputs=()):
    g = graph.copy()
    live = set(o for o in g.outputs if o is not None)
    for n in reversed(g.nodes()):
        if n in live:
            live.update(refs(g[n]["args"]))
    for n in g.nodes():
        a = g[n]
        if n in live:
            continue
        if a["op"] == "input" and a["role"] not in drop_inputs:
            continue
        g.nx.remove_node(n)
        if n in g.inputs:
            g.inputs.remove(n)
    return g

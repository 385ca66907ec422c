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
    dead = [n for n, a in g.nx.nodes(data=True)
            if n not in live and (a["op"] != "input" or a["role"] in drop_inputs)]
    g.nx.remove_nodes_from(dead)
    dead = set(dead)
    g.inputs = [n for n in g.inputs if n not in dead]
    return g

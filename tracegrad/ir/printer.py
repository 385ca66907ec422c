"""IR as text: readable Python (types and source lines in comments) and Graphviz DOT."""
from .graph import V, type_str


def _arg(x):
    if isinstance(x, V):
        return str(x)
    if isinstance(x, tuple):
        return "(" + ", ".join(_arg(a) for a in x) + ("," if len(x) == 1 else "") + ")"
    return repr(x)


def _params(p):
    return "".join(f", {k}={_arg(v)}" for k, v in p.items())


def to_python(graph):
    ins = [n for n in graph.inputs]
    sig = ", ".join(f"{n}: \"{graph.type_str(n)}\"" for n in ins)
    lines = [f"def {graph.name}({sig}):"]
    for n in graph.nodes():
        a = graph[n]
        if a["op"] == "input":
            if a["role"] not in ("input", "leaf", "grad"):
                extra = f" = {a['fwd']}" if a.get("fwd") else ""
                lines.append(f"    # {n}: {a['role']}{extra}")
            continue
        if a["op"] == "proj":
            rhs = f"{a['args'][0]}[{a['params']['index']}]"
        else:
            if a.get("label"):          # a custom Function: its class name, its parameters hidden
                rhs = f"{a['label']}({', '.join(_arg(x) for x in a['args'])})"
            else:
                rhs = f"{a['op']}({', '.join(_arg(x) for x in a['args'])}{_params(a['params'])})"
        comment = type_str(a["shape"], a["dtype"])
        if a.get("source"):
            comment += f"  {a['source']}"
        lines.append(f"    {n} = {rhs}".ljust(44) + f"  # {comment}")
    outs = ", ".join(str(o) if o is not None else "None" for o in graph.outputs)
    lines.append(f"    return ({outs}{',' if len(graph.outputs) == 1 else ''})")
    return "\n".join(lines)


def to_dot(graph):
    """Graphviz DOT: inputs as ellipses, ops as boxes labelled with their types."""
    out = [f'digraph "{graph.name}" {{', '  rankdir=TB;', '  node [fontname="monospace", fontsize=10];']
    for n in graph.nodes():
        a = graph[n]
        t = type_str(a["shape"], a["dtype"])
        if a["op"] == "input":
            out.append(f'  "{n}" [shape=ellipse, style=filled, fillcolor=lightblue, label="{n}\\n{t}"];')
        else:
            out.append(f'  "{n}" [shape=box, label="{n} = {a["op"]}\\n{t}"];')
    for u, v in graph.nx.edges:
        out.append(f'  "{u}" -> "{v}";')
    for o in graph.outputs:
        if o is not None:
            out.append(f'  "{o}" [peripheries=2];')
    out.append("}")
    return "\n".join(out) + "\n"

"""IR as text: readable Python (types and source lines in comments) and Graphviz DOT.

Text that comes from the user (source lines, file names, constants of their own types)
never runs as code here or in generated source: `comment_text` escapes what goes into
a comment, `safe_repr` writes a constant without calling the user's `__repr__`.
"""
from .symbolic import Sym
from .values import V, type_str

_EXACT = (bool, int, float, str, type(None))


def safe_repr(x):
    """repr(x) for Python's own scalars, tuples and lists of them; for a subclass of one
    (an int whose __repr__ is the user's) the base type's repr; else the type's name."""
    t = type(x)
    if t in _EXACT:
        return repr(x)
    if t is Sym:
        return x.display()           # a symbolic size: its expression, no guard
    if t is tuple or t is list:
        inner = ", ".join(safe_repr(a) for a in x) + ("," if t is tuple and len(x) == 1 else "")
        return f"({inner})" if t is tuple else f"[{inner}]"
    for base in (bool, int, float, str):
        if isinstance(x, base):
            return base.__repr__(x)
    if t.__module__.split(".")[0] in ("tracegrad", "numpy"):
        return repr(x)                  # a dtype, a numpy scalar: text of tracegrad's or numpy's own
    return f"<{t.__name__}>"


def comment_text(s):
    """s made safe for a `#` comment: characters that could end the line (or are not
    printable) written as escapes."""
    s = str.__str__(s) if isinstance(s, str) else safe_repr(s)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


def _arg(x):
    if isinstance(x, V):
        return str(x)
    if isinstance(x, tuple):
        return "(" + ", ".join(_arg(a) for a in x) + ("," if len(x) == 1 else "") + ")"
    return safe_repr(x)


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
                lines.append("    # " + comment_text(f"{n}: {a['role']}{extra}"))
            continue
        if a["op"] == "proj":
            rhs = f"{a['args'][0]}[{a['params']['index']}]"
        else:
            if a.get("label"):          # a custom Function: its class name, its parameters hidden
                rhs = f"{comment_text(a['label'])}({', '.join(_arg(x) for x in a['args'])})"
            else:
                rhs = f"{a['op']}({', '.join(_arg(x) for x in a['args'])}{_params(a['params'])})"
        comment = type_str(a["shape"], a["dtype"])
        if a.get("source"):
            comment += f"  {a['source']}"
        lines.append(f"    {n} = {rhs}".ljust(44) + f"  # {comment_text(comment)}")
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

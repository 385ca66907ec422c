"""Pictures of the recorded autograd graph, drawn as torchviz's `make_dot` draws them.

`make_dot(y)` walks `y.grad_fn` and returns a `Digraph`: one box per grad_fn node
(named by its class, `MulBackward0`), a light blue box per leaf that receives a
gradient (named from `params`, with its shape), orange boxes for saved tensors
(`show_saved=True`), green boxes for the tensors drawn. `.source` is the DOT text;
`.render()` and `.pipe()` run Graphviz's `dot` program, which only they need.
"""
import os
import re
import shutil
import subprocess

from .tensor import Tensor

__all__ = ["Digraph", "make_dot", "save", "ExecutableNotFound"]

SAVED_PREFIX = "_saved_"

FORMATS = {"svg", "png", "pdf", "jpg", "jpeg", "gif", "bmp", "ps", "eps", "json", "plain", "dot", "gv", "xdot",
           "canon", "tif", "tiff", "webp"}


class ExecutableNotFound(RuntimeError):
    """Graphviz's `dot` program is not installed (rendering needs it; `.source` does not)."""

    def __init__(self):
        super().__init__("failed to execute 'dot', make sure the Graphviz executables are on your systems' PATH "
                         "(install Graphviz, e.g. `apt-get install graphviz`); the DOT text is available without it "
                         "as `.source`")


_ID = re.compile(r"^(?:[a-zA-Z_][a-zA-Z0-9_]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))$")
_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph", "strict"}


def _quote(s):
    """A DOT ID: bare when it may be, else a quoted string (newlines as DOT's `\\n`)."""
    s = str(s)
    if _ID.match(s) and s.lower() not in _KEYWORDS:
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attr_list(label=None, attrs=None):
    items = ([("label", label)] if label is not None else []) + [(k, v) for k, v in (attrs or {}).items()
                                                                 if v is not None]
    if not items:
        return ""
    return " [" + " ".join(f"{k}={_quote(v)}" for k, v in items) + "]"


class Digraph:
    """A directed graph in DOT, with the part of `graphviz.Digraph`'s API that make_dot's users reach for."""

    def __init__(self, name=None, comment=None, format=None, engine="dot", graph_attr=None, node_attr=None,
                 edge_attr=None, body=None):
        self.name = name
        self.comment = comment
        self.format = format or "pdf"
        self.engine = engine
        self.graph_attr = dict(graph_attr or {})
        self.node_attr = dict(node_attr or {})
        self.edge_attr = dict(edge_attr or {})
        self.body = list(body or [])

    def node(self, name, label=None, _attributes=None, **attrs):
        attrs.update(_attributes or {})
        self.body.append(f"\t{_quote(name)}{_attr_list(label, attrs)}\n")

    def edge(self, tail_name, head_name, label=None, _attributes=None, **attrs):
        attrs.update(_attributes or {})
        self.body.append(f"\t{_quote(tail_name)} -> {_quote(head_name)}{_attr_list(label, attrs)}\n")

    def attr(self, kw=None, _attributes=None, **attrs):
        attrs.update(_attributes or {})
        if kw is None:
            self.body.append(f"\t{_attr_list(None, attrs).strip()}\n")
        else:
            self.body.append(f"\t{kw}{_attr_list(None, attrs)}\n")

    @property
    def source(self):
        lines = [f"// {self.comment}\n"] if self.comment else []
        lines.append(f"digraph {_quote(self.name) + ' ' if self.name else ''}{{\n")
        for kw, attrs in (("graph", self.graph_attr), ("node", self.node_attr), ("edge", self.edge_attr)):
            if attrs:
                lines.append(f"\t{kw}{_attr_list(None, attrs)}\n")
        lines.extend(self.body)
        lines.append("}\n")
        return "".join(lines)

    def __str__(self):
        return self.source

    def pipe(self, format=None, engine=None):
        """The graph rendered by Graphviz, as bytes (`format` 'svg', 'png', ...)."""
        fmt = _check_format(format or self.format)
        exe = shutil.which(engine or self.engine)
        if exe is None:
            raise ExecutableNotFound()
        proc = subprocess.run([exe, f"-T{fmt}"], input=self.source.encode("utf-8"), capture_output=True)
        if proc.returncode != 0:
            raise RuntimeError(f"Graphviz's {engine or self.engine} failed (exit status {proc.returncode}): "
                               f"{proc.stderr.decode('utf-8', 'replace').strip()}")
        return proc.stdout

    def save(self, filename=None, directory=None):
        """Write the DOT text to `filename` (default 'Digraph.gv'); returns its path."""
        path = _join(directory, filename or f"{self.name or 'Digraph'}.gv")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.source)
        return path

    def render(self, filename=None, directory=None, view=False, cleanup=False, format=None, engine=None,
               outfile=None):
        """Save the DOT text to `filename` and render it beside it as `filename.<format>`; returns that path."""
        if outfile is not None:
            out = os.fspath(outfile)
            fmt = format or os.path.splitext(out)[1].lstrip(".") or self.format
            src = os.path.splitext(out)[0] + ".gv" if filename is None else _join(directory, filename)
        else:
            fmt = format or self.format
            src = _join(directory, filename or f"{self.name or 'Digraph'}.gv")
            out = f"{src}.{fmt}"
        data = self.pipe(fmt, engine)
        self.save(src)
        with open(out, "wb") as f:
            f.write(data)
        if cleanup:
            os.remove(src)
        if view:
            raise NotImplementedError("Digraph.render(view=True): opening a viewer is not supported; open the "
                                      f"returned file {out!r} instead")
        return out

    def _repr_svg_(self):
        if shutil.which(self.engine) is None:
            return None
        return self.pipe("svg").decode("utf-8")


def _check_format(fmt):
    if fmt not in FORMATS:
        raise ValueError(f"unknown format: {fmt!r}")
    return fmt


def _join(directory, filename):
    filename = os.fspath(filename)
    return os.path.join(os.fspath(directory), filename) if directory else filename


def _size_to_str(size):
    return "(" + ", ".join("%d" % v for v in size) + ")"


def _torch_saved_name(prim, name):
    """torch's name for a saved value: `result` for the output, `self`/`other` for the first two inputs."""
    if name == "out":
        return "result"
    if prim.variadic and name == prim.inputs[-1]:
        return name
    k = prim.inputs.index(name) if name in prim.inputs else -1
    return {0: "self", 1: "other"}.get(k, name)


def _saved_attrs(fn):
    """(name, value) for what a grad_fn node saved, read through its `_saved_<name>` attributes.

    Values that were not saved (not needed for this backward) come back as None.
    """
    names = {a[len(SAVED_PREFIX):]: a for a in dir(fn) if a.startswith(SAVED_PREFIX) and a != "_saved_meta"}
    prim = getattr(fn, "_prim", None)
    if prim is not None:
        for n in prim.saves:
            names.setdefault(_torch_saved_name(prim, n), SAVED_PREFIX + n)
    out = []
    for shown in sorted(names):
        try:
            val = getattr(fn, names[shown])
        except AttributeError:
            continue
        if isinstance(val, list):
            val = tuple(val) if val else None
        out.append((shown, val))
    return out


def _fn_label(fn, show_attrs, max_attr_chars):
    name = type(fn).__name__
    if not show_attrs:
        return name
    attrs = {}
    for attr, val in _saved_attrs(fn):
        if isinstance(val, Tensor):
            attrs[attr] = "[saved tensor]"
        elif isinstance(val, tuple) and any(isinstance(t, Tensor) for t in val):
            attrs[attr] = "[saved tensors]"
        else:
            attrs[attr] = str(val)
    for key, val in (getattr(fn, "_params", None) or {}).items():
        attrs.setdefault(key, str(val))
    if not attrs:
        return name
    max_attr_chars = max(max_attr_chars, 3)
    col1 = max(len(k) for k in attrs)
    col2 = min(max(len(v) for v in attrs.values()), max_attr_chars)
    sep = "-" * max(col1 + col2 + 2, len(name))

    def truncate(s):
        return s[:col2 - 3] + "..." if len(s) > col2 else s

    rows = "\n".join(f"{k:<{col1}}: {truncate(v):>{col2}}" for k, v in attrs.items())
    return name + "\n" + sep + "\n" + rows


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """The autograd graph behind `var` (a tensor or a tuple of tensors) as a Digraph.

    params: optional {name: tensor}; leaves found there are labelled with their name.
    show_attrs: list each node's saved attributes and parameters in its box.
    show_saved: draw the tensors each node saved for backward (orange, undirected edges).
    """
    if params is not None:
        if not all(isinstance(p, Tensor) for p in params.values()):
            raise TypeError("make_dot: every value in params must be a Tensor")
        param_map = {id(v): k for k, v in params.items()}
    else:
        param_map = {}

    node_attr = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1", height="0.2",
                     fontname="monospace")
    dot = Digraph(node_attr=node_attr, graph_attr=dict(size="12,12"))
    seen = set()
    keep = []            # unpacked saved tensors stay alive, so no two share an id() while drawing

    def var_label(t, name=None):
        if not name:
            name = param_map.get(id(t), "")
        return "%s\n %s" % (name, _size_to_str(t.size()))

    def draw_saved(fn, name, t):
        keep.append(t)
        seen.add(id(t))
        dot.edge(str(id(fn)), str(id(t)), dir="none")
        dot.node(str(id(t)), var_label(t, name), fillcolor="orange")

    def enter(fn):
        """Draw fn itself (its saved tensors, its leaf variable, its box); return its child iterator."""
        seen.add(id(fn))
        if show_saved:
            for attr, val in _saved_attrs(fn):
                if isinstance(val, Tensor):
                    draw_saved(fn, attr, val)
                elif isinstance(val, tuple):
                    for i, t in enumerate(val):
                        if isinstance(t, Tensor):
                            draw_saved(fn, f"{attr}[{i}]", t)
        variable = getattr(fn, "variable", None)
        if isinstance(variable, Tensor):
            seen.add(id(variable))
            dot.node(str(id(variable)), var_label(variable), fillcolor="lightblue")
            dot.edge(str(id(variable)), str(id(fn)))
        dot.node(str(id(fn)), _fn_label(fn, show_attrs, max_attr_chars))
        return iter(getattr(fn, "next_functions", ()) or ())

    def leave(fn):
        for t in getattr(fn, "saved_tensors", None) or ():
            if isinstance(t, Tensor):
                keep.append(t)
                seen.add(id(t))
                dot.edge(str(id(t)), str(id(fn)), dir="none")
                dot.node(str(id(t)), var_label(t), fillcolor="orange")

    def add_nodes(root):
        # depth first, in the order torchviz's recursion draws: a node, then each edge and its subtree
        if id(root) in seen:
            return
        stack = [(root, enter(root))]
        while stack:
            fn, children = stack[-1]
            for child, _ in children:
                if child is None:
                    continue
                dot.edge(str(id(child)), str(id(fn)))
                if id(child) not in seen:
                    stack.append((child, enter(child)))
                    break
            else:
                leave(fn)
                stack.pop()

    def add_base_tensor(t, color="darkolivegreen1"):
        # a view is drawn with its base (dotted edge from the base), down the chain of bases
        view_edges = []
        while id(t) not in seen:
            seen.add(id(t))
            dot.node(str(id(t)), var_label(t), fillcolor=color)
            if t.grad_fn is not None:
                add_nodes(t.grad_fn)
                dot.edge(str(id(t.grad_fn)), str(id(t)))
            if t._base is None:
                break
            view_edges.append((t._base, t))
            t, color = t._base, "darkolivegreen3"
        for base, view in reversed(view_edges):
            dot.edge(str(id(base)), str(id(view)), style="dotted")

    for v in (var if isinstance(var, (tuple, list)) else (var,)):
        add_base_tensor(v)
    _resize_graph(dot)
    return dot


def _resize_graph(dot, size_per_element=0.15, min_size=12):
    size = max(min_size, len(dot.body) * size_per_element)
    dot.graph_attr.update(size=f"{size},{size}")


def save(graph_or_var, path, format=None, **make_dot_kwargs):
    """Write a graph (a Digraph, or a tensor's graph drawn by make_dot) to `path`.

    The format comes from `format` or the file's extension: .dot/.gv write the DOT
    text; .svg, .png, .pdf, ... are rendered by Graphviz's `dot`. Returns `path`.
    """
    graph = graph_or_var if isinstance(graph_or_var, Digraph) else make_dot(graph_or_var, **make_dot_kwargs)
    path = os.fspath(path)
    fmt = format or os.path.splitext(path)[1].lstrip(".").lower()
    if not fmt:
        raise ValueError(f"save: cannot tell the format of {path!r}; give it an extension (.dot, .svg, .png, ...) "
                         "or pass format=")
    if fmt in ("dot", "gv"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(graph.source)
        return path
    data = graph.pipe(_check_format(fmt))
    with open(path, "wb") as f:
        f.write(data)
    return path

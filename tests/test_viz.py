"""tracegrad.viz.make_dot: the DOT graph has torchviz's structure for the same program in torch."""
import re
import shutil

import networkx as nx
import numpy as np
import pytest
import torch

import tracegrad
from tracegrad import viz

RS = np.random.RandomState(3)
W = RS.randn(3, 4)
B = RS.randn(3)
X = RS.randn(4)

HAS_DOT = shutil.which("dot") is not None


def program(L):
    """A small layer and loss; returns (output, params)."""
    w = L.tensor(W, requires_grad=True)
    b = L.tensor(B, requires_grad=True)
    x = L.tensor(X)
    y = (w @ x + b).tanh()
    z = (y * y).sum() + y.exp().mean()
    return z, {"weight": w, "bias": b}


# -- reading the DOT text back -----------------------------------------------------

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ \]]+)')


def _unquote(v):
    if v.startswith('"'):
        return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v[1:-1])
    return v


def parse_dot(source):
    """The DOT text as a networkx DiGraph: node attributes merged as Graphviz merges them, edge attributes kept."""
    g = nx.DiGraph()
    lines = source.splitlines()
    assert lines[0] == "digraph {" and lines[-1] == "}"
    for line in lines[1:-1]:
        line = line.strip()
        m = re.match(r"^(\S+) -> (\S+)(?: \[(.*)\])?$", line)
        if m:
            g.add_edge(m.group(1), m.group(2), **{k: _unquote(v) for k, v in _ATTR.findall(m.group(3) or "")})
            continue
        m = re.match(r"^(\S+) \[(.*)\]$", line)
        assert m, line
        if m.group(1) in ("graph", "node", "edge"):
            continue
        g.add_node(m.group(1), **{k: _unquote(v) for k, v in _ATTR.findall(m.group(2))})
    return g


# -- the same picture built from torch's graph, the way torchviz draws it ---------------

def torch_reference(var, params):
    names = {id(v): k for k, v in params.items()}
    g = nx.DiGraph()

    def label(t):
        return "%s\n %s" % (names.get(id(t), ""), "(" + ", ".join(str(s) for s in t.shape) + ")")

    seen = set()
    stack = [var.grad_fn]
    g.add_node(id(var), label=label(var), fillcolor="darkolivegreen1")
    g.add_edge(id(var.grad_fn), id(var))
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        g.add_node(id(fn), label=type(fn).__name__)
        if hasattr(fn, "variable"):
            g.add_node(id(fn.variable), label=label(fn.variable), fillcolor="lightblue")
            g.add_edge(id(fn.variable), id(fn))
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                g.add_edge(id(nxt), id(fn))
                stack.append(nxt)
    return g


def same_picture(tg_graph, ref_graph):
    def match(a, b):
        return a.get("label") == b.get("label") and a.get("fillcolor") == b.get("fillcolor")
    return nx.is_isomorphic(tg_graph, ref_graph, node_match=match)


def test_structure_names_and_parameters_match_torchs_graph():
    z, params = program(tracegrad)
    dot = viz.make_dot(z, params=params)
    g = parse_dot(dot.source)
    ref_z, ref_params = program(torch)
    assert same_picture(g, torch_reference(ref_z, ref_params))
    labels = sorted(d["label"] for _, d in g.nodes(data=True))
    assert "weight\n (3, 4)" in labels and "bias\n (3)" in labels and "\n ()" in labels
    assert labels.count("AccumulateGrad") == 2 and "MvBackward0" in labels and "TanhBackward0" in labels
    # a parameter's box feeds its AccumulateGrad, which feeds the op that used it
    (w_id,) = [n for n, d in g.nodes(data=True) if d["label"].startswith("weight")]
    (acc,) = g.successors(w_id)
    assert g.nodes[acc]["label"] == "AccumulateGrad"
    assert [g.nodes[s]["label"] for s in g.successors(acc)] == ["MvBackward0"]
    assert 'graph [size="12,12"]' in dot.source and "node [style=filled shape=box" in dot.source


def test_a_different_graph_is_not_the_same_picture():
    z, params = program(tracegrad)
    g = parse_dot(viz.make_dot(z, params=params).source)
    w = torch.tensor(W, requires_grad=True)
    b = torch.tensor(B, requires_grad=True)
    other = ((w @ torch.tensor(X) + b).sigmoid() ** 2).sum()
    assert not same_picture(g, torch_reference(other, {"weight": w, "bias": b}))


def torch_saved(var):
    """[(grad_fn class, saved name, shape, tensor)] for the tensors torch's nodes saved."""
    out, seen, stack = [], set(), [var.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        for attr in dir(fn):
            if attr.startswith("_saved_"):
                val = getattr(fn, attr)
                if isinstance(val, torch.Tensor):
                    out.append((type(fn).__name__, attr[len("_saved_"):], tuple(val.shape), val))
        stack.extend(n for n, _ in fn.next_functions)
    return out


def test_show_saved_draws_the_saved_tensors():
    x = tracegrad.tensor(X, requires_grad=True)
    y = tracegrad.tensor(RS.randn(4), requires_grad=True)
    out = ((x * y).sin() + x.exp()).tanh().sum()
    g = parse_dot(viz.make_dot(out, show_saved=True).source)
    drawn = set()
    for tail, head, attrs in g.edges(data=True):
        if attrs.get("dir") != "none":
            continue
        name, shape = g.nodes[head]["label"].split("\n ")
        shape = tuple(int(s) for s in shape.strip("()").split(",") if s)
        if g.nodes[head]["fillcolor"] == "lightblue":
            # a saved leaf is the leaf itself: one box, drawn as the leaf (as torchviz draws it)
            assert [g.nodes[s]["label"] for s in g.successors(head)].count("AccumulateGrad") == 1
            name = "leaf"
        else:
            assert g.nodes[head]["fillcolor"] == "orange"
        drawn.add((g.nodes[tail]["label"], name, shape))
    tx, ty = torch.tensor(X, requires_grad=True), torch.tensor(y.detach().numpy(), requires_grad=True)
    ref_out = ((tx * ty).sin() + tx.exp()).tanh().sum()
    expected = {(cls, "leaf" if val is tx or val is ty else name, shape)
                for cls, name, shape, val in torch_saved(ref_out)}
    assert drawn == expected
    assert ("SinBackward0", "self", (4,)) in drawn and ("TanhBackward0", "result", (4,)) in drawn
    assert ("ExpBackward0", "result", (4,)) in drawn and ("MulBackward0", "leaf", (4,)) in drawn
    # without show_saved there is no orange box
    assert "orange" not in viz.make_dot(out).source


def test_show_attrs_lists_saved_values_in_the_box():
    x = tracegrad.tensor(W, requires_grad=True)
    out = x.exp().sum(1, keepdim=True)
    g = parse_dot(viz.make_dot(out, show_attrs=True, max_attr_chars=10).source)
    labels = {d["label"].split("\n")[0]: d["label"] for _, d in g.nodes(data=True) if "label" in d}
    # columns as torchviz lays them out: names padded, values cut to max_attr_chars and right-aligned
    assert labels["ExpBackward0"].splitlines()[1:] == ["-" * 18, "result: [saved ..."]
    assert labels["SumBackward1"].splitlines()[2:] == ["dims   : (1,)", "keepdim: True"]
    full = parse_dot(viz.make_dot(out, show_attrs=True).source)
    exp_label = [d["label"] for _, d in full.nodes(data=True) if d["label"].startswith("ExpBackward0")]
    assert exp_label == ["ExpBackward0\n----------------------\nresult: [saved tensor]"]


def test_views_tuples_and_deep_graphs():
    a = tracegrad.tensor(X, requires_grad=True) * 2
    v = a[1:]
    g = parse_dot(viz.make_dot(v).source)
    dotted = [(t, h) for t, h, d in g.edges(data=True) if d.get("style") == "dotted"]
    assert len(dotted) == 1
    base, view = dotted[0]
    assert g.nodes[base]["fillcolor"] == "darkolivegreen3" and g.nodes[view]["fillcolor"] == "darkolivegreen1"
    assert g.nodes[base]["label"] == "\n (4)" and g.nodes[view]["label"] == "\n (3)"

    x = tracegrad.tensor(X, requires_grad=True)
    g = parse_dot(viz.make_dot((x.sin(), x.cos())).source)
    assert sorted(d["label"] for _, d in g.nodes(data=True)).count("AccumulateGrad") == 1
    assert {d["label"] for _, d in g.nodes(data=True)} >= {"SinBackward0", "CosBackward0"}

    h = x
    for _ in range(3000):              # deeper than Python's recursion limit
        h = h + 1
    g = parse_dot(viz.make_dot(h).source)
    assert sum(d["label"] == "AddBackward0" for _, d in g.nodes(data=True)) == 3000
    assert nx.is_directed_acyclic_graph(g) and nx.dag_longest_path_length(g) == 3002


def test_rendering_needs_dot_and_says_so(monkeypatch, tmp_path):
    z, params = program(tracegrad)
    dot = viz.make_dot(z, params=params)
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(viz.ExecutableNotFound, match="make sure the Graphviz executables are on your systems' PATH"):
        dot.pipe("svg")
    with pytest.raises(RuntimeError, match="Graphviz"):
        dot.render(str(tmp_path / "g"), format="png")
    with pytest.raises(ValueError, match="unknown format"):
        dot.pipe("svgz2")
    # DOT text needs no Graphviz
    assert viz.save(z, tmp_path / "g.dot") == str(tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text() == viz.make_dot(z).source


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_render_svg_and_png(tmp_path):
    z, params = program(tracegrad)
    dot = viz.make_dot(z, params=params, show_saved=True)
    svg = dot.pipe("svg").decode()
    assert "<svg" in svg and "TanhBackward0" in svg and "weight" in svg
    out = dot.render(str(tmp_path / "graph"), format="png")
    assert out == str(tmp_path / "graph.png")
    assert (tmp_path / "graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "graph").read_text() == dot.source
    path = viz.save(dot, tmp_path / "again.svg")
    assert open(path).read().count("AccumulateGrad") == 2
    viz.save(z, tmp_path / "direct.png", params=params)
    assert (tmp_path / "direct.png").read_bytes()[:4] == b"\x89PNG"

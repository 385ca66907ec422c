"""tracegrad.explain prints every stage under a header; DOT files are written on request."""
import io
import os

import tracegrad as tg


def test_explain_prints_each_stage_in_order(tmp_path):
    x = tg.randn(8, 4, requires_grad=True)
    buf = io.StringIO()
    text = tg.explain(lambda x: (x ** 3).tanh().sum(1).mean(), x, file=buf, dot=str(tmp_path))
    assert buf.getvalue().strip() == text.strip()
    headers = [line[5:-5].removesuffix(" (unchanged)").removesuffix(" (changed lines)") for line in text.splitlines() if line.startswith("==== ")]
    want = ["traced IR", "forward IR after fold_constants", "forward IR after simplify_before_autodiff",
            "forward IR after eliminate_dead_code",
            "backward IR (derived)", "partition", "forward IR (partitioned)", "backward IR (partitioned)",
            "forward IR (simplified after autodiff)", "generated forward source", "generated backward source"]
    pos = [headers.index(h) for h in want]
    assert pos == sorted(pos)
    traced = text.split("==== traced IR ====")[1].split("====")[0]
    # the power is lowered to products after autodiff (which takes pow's own derivative, as eagerly)
    assert "==== forward IR after simplify_before_autodiff (unchanged) ====" in text
    simplified = text.split("==== forward IR (simplified after autodiff)")[1].split("\n====")[0]
    assert "pow(x0, 3)" in traced and "test_explain.py" in traced
    assert "mul(x0, x0)" in simplified
    assert "pow" not in "".join(l for l in simplified.splitlines() if not l.startswith("-"))
    assert "saved (" in text and "recomputed in backward" in text
    for stem in ("forward", "backward"):
        dot = open(os.path.join(tmp_path, f"{stem}.dot")).read()
        assert dot.startswith("digraph") and "->" in dot


def test_explain_summarises_first_and_lists_only_stages_that_changed():
    x = tg.randn(8, 4, requires_grad=True)
    fn = lambda x: (x * 2).tanh().sum(1).mean()           # noqa: E731
    short = tg.explain(fn, x, file=io.StringIO())
    full = tg.explain(fn, x, file=io.StringIO(), verbose=True)
    assert short.startswith("==== summary ====")
    summary = short.split("\n\n")[0]
    assert "traced IR: 4 ops" in summary and "saved for the backward:" in summary
    assert "forward program:" in summary and "fused groups" in summary
    assert "(unchanged) ====" in short and "(unchanged)" not in full
    assert len(short.splitlines()) < len(full.splitlines()) and len(short.splitlines()) < 140
    # every stage is still named, in the same order
    heads = [line for line in short.splitlines() if line.startswith("==== ") and "summary" not in line]
    assert [h.replace(" (unchanged)", "").replace(" (changed lines)", "") for h in heads] == \
        [h for h in full.splitlines() if h.startswith("==== ") and "summary" not in h and "joint" not in h]


def test_backward_listing_never_reuses_a_forward_name():
    x = tg.randn(3, requires_grad=True)
    y = (x * 2).exp().sum()
    fwd, bwd = tg.ir.graph_of(y), tg.ir.backward_graph_of(y)
    assert not set(fwd.nx) & set(bwd.nx)


def test_explain_accepts_a_compiled_function_and_needs_no_grad():
    f = tg.compile(lambda a, b: a * b + 1)
    text = tg.explain(f, tg.ones(3), tg.ones(3), file=io.StringIO())
    assert "backward IR" not in text and "generated forward source" in text

"""tracegrad.explain prints every stage under a header; DOT files are written on request."""
import io
import os

import tracegrad as tg


def test_explain_prints_each_stage_in_order(tmp_path):
    x = tg.randn(8, 4, requires_grad=True)
    buf = io.StringIO()
    text = tg.explain(lambda x: (x ** 3).tanh().sum(1).mean(), x, file=buf, dot=str(tmp_path))
    assert buf.getvalue().strip() == text.strip()
    headers = [line[5:-5] for line in text.splitlines() if line.startswith("==== ")]
    want = ["traced IR", "forward IR after fold_constants", "forward IR after simplify",
            "forward IR after eliminate_common_subexpressions", "forward IR after eliminate_dead_code",
            "backward IR (derived)", "partition", "forward IR (partitioned)", "backward IR (partitioned)",
            "generated forward source", "generated backward source"]
    pos = [headers.index(h) for h in want]
    assert pos == sorted(pos)
    traced = text.split("==== traced IR ====")[1].split("====")[0]
    simplified = text.split("==== forward IR after simplify ====")[1].split("====")[0]
    assert "pow(x0, 3)" in traced and "pow" not in simplified and "test_explain.py" in traced
    assert "saved (" in text and "recomputed in backward" in text
    for stem in ("forward", "backward"):
        dot = open(os.path.join(tmp_path, f"{stem}.dot")).read()
        assert dot.startswith("digraph") and "->" in dot


def test_explain_accepts_a_compiled_function_and_needs_no_grad():
    f = tg.compile(lambda a, b: a * b + 1)
    text = tg.explain(f, tg.ones(3), tg.ones(3), file=io.StringIO())
    assert "backward IR" not in text and "generated forward source" in text

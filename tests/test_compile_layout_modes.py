"""What a trace cannot follow makes the call run eagerly, with a warning naming the user's
line, instead of a program that would be wrong on this call or a later one: a tensor's
layout or autograd history read in Python, grad mode or the default dtype left changed,
backward() into the .grad of an argument. Python scalars that `==` calls equal but that give
different results (numpy's -0.0 and 0.0) get programs of their own. Each case against torch."""
import os
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def run(make):
    """make(lib, compile) -> list of results; tracegrad compiled vs torch eager. Returns the
    tracegrad warnings."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = make(tg, tg.compile)
    want = make(torch, lambda f: f)
    assert len(got) == len(want)
    for i, (g, t) in enumerate(zip(got, want)):
        if isinstance(t, torch.Tensor):
            np.testing.assert_array_equal(g.detach().numpy(), t.detach().numpy(), err_msg=f"result {i}")
        else:
            assert g == t, f"result {i}: {g!r} vs {t!r}"
    return [x for x in w if "tracegrad.compile" in str(x.message)]


def test_contiguity_read_in_python():
    def make(lib, comp):
        @comp
        def f(x):
            return x * 2 if x.is_contiguous() else x * 3
        a = lib.ones(3, 3)
        return [f(a.t()), f(a), f(a.t())]
    w = run(make)
    assert w and "is_contiguous" in str(w[0].message) and w[0].filename == __file__


@pytest.mark.parametrize("read", ["is_leaf", "grad_fn"])
def test_autograd_history_read_in_python(read):
    def make(lib, comp):
        @comp
        def f(x):
            leaf = x.is_leaf if read == "is_leaf" else x.grad_fn is None
            return x * 2 if leaf else x * 3
        w = lib.ones(3, requires_grad=True)
        return [f(w * 1), f(w), f(w * 1)]
    assert run(make)


def test_numpy_signed_zero_scalars_are_different_programs():
    def make(lib, comp):
        @comp
        def f(x, k):
            return x / k
        a = lib.ones(2)
        return [f(a, np.float32(-0.0)), f(a, np.float32(0.0)), f(a, np.float64(0.0)), f(a, np.float64(-0.0))]
    run(make)


def test_grad_mode_left_changed_by_the_function():
    def make(lib, comp):
        @comp
        def f(x):
            lib.set_grad_enabled(False)
            return x * 2
        x = lib.ones(2, requires_grad=True)
        out = []
        for _ in range(2):
            y = f(x)
            out += [y, y.requires_grad, lib.is_grad_enabled()]
            lib.set_grad_enabled(True)
        return out
    run(make)


def test_backward_into_the_grad_of_an_argument():
    def make(lib, comp):
        @comp
        def f(w, x):
            loss = (w * x).sum()
            loss.backward()
            return w.grad
        w, w2, x = lib.ones(3, requires_grad=True), lib.ones(3, requires_grad=True), lib.tensor([1., 2., 3.])
        return [f(w, x), f(w, x).clone(), f(w2, x), w.grad, w2.grad]
    run(make)


def test_grad_of_an_argument_read_inside():
    def make(lib, comp):
        @comp
        def f(w):
            return w * 2 if w.grad is None else w.grad * 3
        w = lib.ones(3, requires_grad=True)
        out = [f(w).detach()]
        w.grad = lib.full((3,), 5.0)
        out.append(f(w))
        return out
    run(make)


def test_inference_tensor_saved_for_backward_raises_as_in_torch():
    for lib, comp in ((tg, tg.compile), (torch, lambda f: f)):
        @comp
        def f(x, w):
            return (x * w).sum()
        with lib.inference_mode():
            x = lib.ones(2, 3)
        w = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            f(x, w)
        with lib.no_grad():
            assert float(f(x, w)) == 6.0          # no autograd: no error


def test_inference_mode_inside_the_function():
    # what it computes there is an inference tensor, which may not be changed in place later
    for lib, comp in ((tg, tg.compile), (torch, lambda f: f)):
        @comp
        def f(x):
            with lib.inference_mode():
                y = x * 2
            return y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                y = f(lib.ones(2, requires_grad=True))
                assert y.is_inference()
                with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
                    y.add_(1)


MIXED_DEVICES = r"""
import json, warnings
import tracegrad as tg
warnings.filterwarnings("ignore")

def f(x, w):
    return (x @ w).sum(0)

out = {}
for name, fn in (("eager", f), ("compiled", tg.compile(f))):
    try:
        fn(tg.ones(2, 3), tg.ones(3, 2).cuda())
        out[name] = "no error"
    except RuntimeError as e:
        out[name] = str(e)
cf = tg.compile(f)
out["same"] = float(cf(tg.ones(2, 3).cuda(), tg.ones(3, 2).cuda()).sum().cpu())
print(json.dumps(out))
"""


def test_tensors_on_different_devices_raise_as_eager():
    pytest.importorskip("triton")
    from test_cuda_interpret import run_script
    out = run_script(MIXED_DEVICES)
    assert "Expected all tensors to be on the same device" in out["eager"]
    assert out["compiled"] == out["eager"]
    assert out["same"] == 12.0


def test_view_of_a_traced_non_contiguous_view_raises_as_eager():
    for lib, comp in ((tg, tg.compile), (torch, lambda f: f)):
        @comp
        def f(a):
            x = a * 1
            return x.t()[1:].view(-1)

        @comp
        def g(a):
            x = a * 1
            return x[1:].view(-1), x.t().reshape(-1), x.unsqueeze(0).view(3, 3)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            f(lib.ones(3, 3))
        assert [tuple(o.shape) for o in g(lib.ones(3, 3))] == [(6,), (9,), (3, 3)]


@pytest.mark.parametrize("src,size", [((3,), (3,)), ((3,), (1, 3)), ((2, 3), (1, 2, 3)), ((1, 3), (1, 3)),
                                      ((1, 3), (4, 3)), ((3,), (2, 3)), ((3, 1), (3, 5)), ((1,), (1, 1))])
def test_contiguous_of_an_expand_writes_through_where_eager_does(src, size):
    """An expand that widens no axis keeps its operand's strides: contiguous() returns it, and
    an in-place op on the result writes into the argument, compiled as eagerly; one that
    broadcasts copies."""
    def make(lib, comp):
        @comp
        def f(x):
            y = x.expand(size).contiguous()
            y.add_(1)
            return y * 1
        x = lib.zeros(src)
        r1 = f(x)
        x1 = x.clone()
        r2 = f(x)
        return [r1, x1, r2, x]
    run(make)


def test_library_code_is_told_from_the_users_when_imported_by_a_relative_path(tmp_path):
    """tracegrad imported through a sys.path entry with `..` in it (a benchmark script's
    `sys.path.insert(0, "benchmarks/..")`): its own layers still read grad_fn and layouts
    while traced, so a whole training step compiles instead of running eagerly."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = f"""
import sys, warnings
sys.path.insert(0, {os.path.join(root, "tests", "..")!r})
import tracegrad as tg, tracegrad.nn as nn, tracegrad.nn.functional as F
assert ".." in tg.__file__, tg.__file__
m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = tg.optim.SGD(m.parameters(), lr=0.1)
@tg.compile
def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss
with warnings.catch_warnings():
    warnings.simplefilter("error")
    for _ in range(3):
        step(tg.randn(5, 4), tg.tensor([0, 1, 2, 0, 1]))
assert step.last_program is not None
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_printed_ir_names_the_users_line_wherever_the_users_file_lies(tmp_path):
    """The source comment of each traced op is the user's file:line by the one predicate
    (tracing.user_file): a user's script in a directory named tracegrad is the user's (a path
    test named it library code), and so are the example programs in the package (the demo's
    graph named `<frozen runpy>:88` for every op)."""
    import importlib.util
    from tracegrad.compile import trace_function
    d = tmp_path / "tracegrad"
    d.mkdir()
    (d / "myprog.py").write_text("def f(x):\n    y = x * 2\n    return y + 1\n")
    spec = importlib.util.spec_from_file_location("myprog", d / "myprog.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = trace_function(mod.f, (tg.randn(3),), {}, "f")[0]
    sources = {g[n].get("source") for n in g.nodes() if g[n]["op"] not in ("input",)}
    assert sources == {"myprog.py:2", "myprog.py:3"}, sources

    from tracegrad import demo
    model = demo.DigitsCNN()
    g = trace_function(model, (tg.randn(2, 1, 8, 8),), {}, "m")[0]
    sources = {g[n].get("source") for n in g.nodes() if g[n]["op"] == "conv2d"}
    assert sources and all(s.startswith("demo.py:") for s in sources), sources

"""Sequences of calls to one compiled function whose inputs change between calls, compared
call by call with eager tracegrad (bit for bit: the same primitives run) and with torch.

A fuzzer draws a small program (elementwise ops, broadcasting, reductions with dim and keepdim,
matmul, views, indexing with tensors, where, softmax, in-place writes, sizes used as values, a
`float()` of a tensor) and calls it 4-8 times through one `tracegrad.compile` (dynamic None, True
or False). Between calls the inputs change in shape (sizes 0 and 1, which change broadcasting;
the number of dimensions), dtype (float32/float64/float16/int64/bool), layout (contiguous,
transposed, sliced with a step, expanded with stride 0), requires_grad, the grad mode around the
call (no_grad, enable_grad, inference_mode, set_grad_enabled(False)), the Python number argument
(int, float, bool; -0.0, nan, inf) and aliasing (f(x, x)); most calls change one or two of these
from the call before, so that a program cached for one call is offered the next. After each call:
outputs (values bit for bit against eager; dtype, shape, requires_grad, grad_fn, is_leaf,
is_inference against torch; strides where eager's are torch's), the gradients of a weighted sum
of the outputs (None where torch's is None), errors (the same type as eager's, where eager or
torch raise), and at most one recompile-limit warning.

Tolerances: values and gradients against torch within a few units of the lowest precision among
the inputs (float16 2e-2, float32 2e-5, float64 1e-10); against eager bit for bit, except the
gradients of softmax and log_softmax, which the compiled pipeline decomposes before autodiff
(passes/decompose.py: `e * (g / s)` instead of the rule's `y * (g - sum(g * y))`), one or two
ulp apart, within the same tolerance.

CI runs TRACEGRAD_CALL_SEQUENCES sequences (default 150, seeds 0..149, about 10 s); more:
TRACEGRAD_CALL_SEQUENCES=3000 python -m pytest -q tests/test_compile_call_sequence_fuzz.py
"""

import re

import numpy as np
import pytest
import torch

import tracegrad as tg

# -- the bugs the fuzzer found, one by one ----------------------------------------------------------

@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("c", [0, 0.0, -0.0])
def test_a_power_zero_keeps_its_base_in_the_autograd_graph(dynamic, c):
    """x ** 0 + y: x's gradient is zeros in torch (x is in the graph), not None. The compiled
    forward had made `x ** 0` the literal 1.0 before autodiff, which cut x out of the graph."""
    cf = tg.compile(lambda x, y, c: x.abs() ** c + y, dynamic=dynamic)
    for n in (3, 0, 5, 1):
        a = np.linspace(-1, 1, n)
        xs = [m.tensor(a, requires_grad=True) for m in (tg, tg, torch)]
        ys = [m.tensor(a, requires_grad=True) for m in (tg, tg, torch)]
        got = tg.autograd.grad(cf(xs[0], ys[0], c).sum(), [xs[0], ys[0]], allow_unused=True)
        eager = tg.autograd.grad((xs[1].abs() ** c + ys[1]).sum(), [xs[1], ys[1]], allow_unused=True)
        want = torch.autograd.grad((xs[2].abs() ** c + ys[2]).sum(), [xs[2], ys[2]], allow_unused=True)
        for gc, ge, gt in zip(got, eager, want):
            assert gc is not None and ge is not None, (n, c)
            assert np.array_equal(gc.numpy(), gt.numpy()) and np.array_equal(ge.numpy(), gt.numpy())


def _layouts(m):
    base = m.tensor(np.arange(12.0).reshape(3, 4))
    row = m.tensor(np.arange(4.0).reshape(1, 4))
    nchw = m.tensor(np.arange(120.0).reshape(2, 3, 4, 5))
    return {"transposed": (base.t(), base.t()), "expanded": (row.expand(3, 4), row.expand(3, 4)),
            "stepped": (base[::2], base[::2]), "transposed and contiguous": (base.t(), base.t().contiguous()),
            "nhwc view": (nchw.permute(0, 2, 3, 1), nchw.permute(0, 2, 3, 1)),
            "channels_last": (nchw.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),) * 2}


@pytest.mark.parametrize("case", ["transposed", "expanded", "stepped", "transposed and contiguous",
                                  "nhwc view", "channels_last"])
@pytest.mark.parametrize("op", ["cat0", "cat1", "stack0", "stack_last"])
def test_cat_and_stack_lay_out_their_result_as_torch(case, op):
    """numpy's concatenate follows its inputs' strides: cat of two transposed (or expanded)
    tensors came out column-major, where torch's is contiguous, and its view(-1) raised in eager
    tracegrad only (the compiled program took it for contiguous). torch keeps channels_last."""
    def f(m, a, b):
        if op.startswith("cat"):
            return m.cat([a, b], int(op[-1]))
        return m.stack([a, b], 0 if op == "stack0" else a.dim())
    want = f(torch, *_layouts(torch)[case])
    a, b = _layouts(tg)[case]
    for got in (f(tg, a, b), tg.compile(lambda a, b: f(tg, a, b))(a, b)):
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        assert np.array_equal(got.numpy(), want.numpy())
        if want.is_contiguous():
            assert np.array_equal(got.view(-1).numpy(), want.view(-1).numpy())


@pytest.mark.parametrize("dtypes", [("float16", "float32"), ("float32", "float16"), ("float16", "float64"),
                                    ("float64", "float32"), ("int64", "float32"), ("float32", "int64")])
def test_a_power_of_two_dtypes_differentiates_as_torch(dtypes):
    """pow(x, y) of two dtypes: torch's pow_backward_exponent takes log x in the result's dtype
    (eager took it in float16: 1e-4 off); the exponent's `y - 1` for x's gradient is in y's own
    dtype, as eager records the op (the compiled trace had cast y first: 2.6e-4 off)."""
    a = np.array([0.3, 1.7, 0.0, 2.5, 1.1]).astype(dtypes[0])
    b = np.array([1.3, -0.4, 0.5, 2.0, -1.7]).astype(dtypes[1])
    w = np.array([1.5, -2.0, 1.0, 0.7, 0.3])
    res = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x, y = (m.tensor(v, requires_grad=v.dtype.kind == "f") for v in (a, b))
        f = comp(lambda x, y: x ** y) if comp else (lambda x, y: x ** y)
        o = f(x, y)
        gs = m.autograd.grad((o * m.tensor(w, dtype=o.dtype)).sum(), [t for t in (x, y) if t.requires_grad])
        res.append([g.numpy() for g in gs])
    for k in range(len(res[0])):
        want, eager, got = res[0][k], res[1][k], res[2][k]
        assert got.dtype == eager.dtype == want.dtype
        np.testing.assert_array_equal(got, eager)
        # (numpy's float32 pow is an ulp from torch's for some operands: a few ulp here)
        np.testing.assert_allclose(eager, want, rtol=4 * np.finfo(want.dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_bool_exponent_raises_at_backward_as_torch(dtype):
    """x ** y with a bool y: torch's backward raises (its rule computes `y - 1`); the compiled
    call runs its forward and raises the same error at backward, not at the call."""
    msgs = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x = m.tensor(np.full((4, 1), 1.5, dtype), requires_grad=True)
        y = m.tensor(np.array([[True], [False], [True], [True]]))
        f = comp(lambda x, y: x ** y) if comp else (lambda x, y: x ** y)
        o = f(x, y)
        assert np.array_equal(o.detach().numpy(), np.where(y.numpy(), 1.5, 1.0).astype(dtype))
        with pytest.raises(RuntimeError) as e:
            o.sum().backward()
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0] and msgs[2] == msgs[0]


@pytest.mark.parametrize("view", ["w[0, 0]", "w.t()", "w[:, :1]", "w.sum()", "w * 1"])
def test_an_argument_saved_through_a_view_and_changed_in_place_before_backward(view):
    """`y * w[0, 0]` saves the view w[0, 0], whose version is w's: w written in place (under
    no_grad) between the call and its backward makes torch's and eager's backward raise. The
    compiled backward read its own copy and returned a gradient (from the old w)."""
    a = np.random.default_rng(0).standard_normal((3, 2))
    b = np.random.default_rng(1).standard_normal((2, 2))
    results = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        def f(x, w):
            v = {"w[0, 0]": lambda: w[0, 0], "w.t()": lambda: w.t()[:1, :], "w[:, :1]": lambda: w[:, :1].t(),
                 "w.sum()": lambda: w.sum(), "w * 1": lambda: w[:1] * 1}[view]()
            return (x ** 3).mean(-1, keepdim=True) * v
        cf = comp(f) if comp else f
        x, w = m.tensor(a, requires_grad=True), m.tensor(b)
        for call in range(2):               # the program's first call, and a later one
            o = cf(x, w)
            with m.no_grad():
                w.add_(1)
            try:
                results.append(m.autograd.grad(o.sum(), x)[0].numpy())
            except RuntimeError as e:
                results.append(str(e))
    torch_, eager, compiled = results[:2], results[2:4], results[4:6]
    if view in ("w.sum()", "w * 1"):        # a new tensor: nothing of w saved, no error
        for k in range(2):
            np.testing.assert_allclose(eager[k], torch_[k], rtol=1e-12)
            np.testing.assert_allclose(compiled[k], torch_[k], rtol=1e-12)
        return
    assert eager == torch_
    # (the compiled message names w, [2, 2], where torch names the view it saved)
    assert [re.sub(r"\[torch\.\w+ \[[^\]]*\]\]", "T", r) for r in compiled] == \
        [re.sub(r"\[torch\.\w+ \[[^\]]*\]\]", "T", r) for r in torch_], compiled


@pytest.mark.parametrize("case", ["double", "half", "mixed sub", "times one", "3-d"])
def test_a_cast_of_a_broadcast_is_contiguous_as_torchs(case):
    """numpy's astype (order 'K') makes a stride-0 axis the innermost: an expanded (4, 4) row
    cast to float64 had strides (1, 4), where torch's are (4, 1), and so had x * x - y for a
    float32 y (cast for the float64 subtraction), eagerly and compiled; compiled alone where
    simplify dropped y * 1 (eager's product had made y contiguous). view(-1) then raised."""
    def f(m, x, y):
        if case == "double":
            return y.double()
        if case == "half":
            return y.half()
        if case == "mixed sub":
            return x * x - y
        if case == "times one":
            return x * x - y * 1
        return y.unsqueeze(0).expand(3, 4, 4).double() + x
    def args(m):
        return m.tensor(np.arange(4.0).reshape(4, 1)), m.tensor(np.arange(4.0, dtype=np.float32).reshape(1, 4)).expand(4, 4)
    want = f(torch, *args(torch))
    for got in (f(tg, *args(tg)), tg.compile(lambda x, y: f(tg, x, y), dynamic=False)(*args(tg))):
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        np.testing.assert_array_equal(got.view(-1).numpy(), want.view(-1).numpy())

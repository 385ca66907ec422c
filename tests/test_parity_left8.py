"""Where tracegrad differed from torch, noticed in recent work and left; each case against torch."""
import pytest
import torch

import tracegrad as tg


def outcome(fn):
    """('ok', values) or (error type, message)."""
    try:
        r = fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return (RuntimeError if isinstance(e, RuntimeError) else type(e)), str(e)
    return "ok", r.tolist() if hasattr(r, "tolist") else r


# -- a custom Function on a view made under no_grad of a tensor that requires grad ---------------------

def _scale_fn(m, calls):
    class Scale(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            calls.append(ctx.needs_input_grad)
            return g * 3, g * 4
    return Scale


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("w_grad", [False, True])
def test_function_on_no_grad_view_requires_grad(compiled, w_grad):
    """Scale.apply(v, w) with v = x[:2] made under no_grad of an x that requires grad gave an output
    with requires_grad=False (apply asked the input's own flag, not the view's): torch's requires
    grad, its ctx.needs_input_grad says True for v, and its backward gives w its gradient (v's
    edge leads nowhere: x.grad stays None)."""
    got = []
    for m in (tg, torch):
        calls = []
        Scale = _scale_fn(m, calls)
        x = m.ones(3, dtype=m.float64, requires_grad=True)
        w = m.full((2,), 2.0, dtype=m.float64, requires_grad=w_grad)
        with m.no_grad():
            v = x[:2]
        fn = (lambda a, b: Scale.apply(a, b))
        if compiled and m is tg:
            fn = tg.compile(fn)
        y = fn(v, w)
        row = [y.requires_grad, y.tolist()]
        if w_grad:
            y.sum().backward()
            row += [calls, x.grad, w.grad.tolist()]
        got.append(row)
    assert got[0][0] is True
    assert got[0] == got[1]


def test_no_grad_view_after_base_written_raises_torchs_error():
    """A view made under no_grad whose base is then written in place with grad mode on: a custom
    Function applied to it raises torch's error, as any op does."""
    got = []
    for m in (tg, torch):
        Scale = _scale_fn(m, [])
        x = m.ones(3, dtype=m.float64, requires_grad=True)
        b = x * 1
        with m.no_grad():
            v = b[:2]
        b.mul_(2)
        got.append(outcome(lambda: Scale.apply(v, m.ones(2, dtype=m.float64))))
    assert got[0][0] is RuntimeError and "no_grad mode" in got[0][1]
    assert got[0] == got[1]

"""Derivatives at the corners against torch: first and second derivatives (autograd.grad with
create_graph=True, twice) at 0, -0.0, the kinks, +-inf, NaN and denormals, torch's grad_fn
names of the first gradient, in-place forms that write over inf and NaN, and the optimizers
and learning-rate schedules whose order of operations decides the last bits.

Each point is a tensor of its own: torch's CPU kernels take a vectorized path for long
tensors whose value at NaN may differ from the scalar formula (elu_backward, hardswish_backward
give NaN there and the formula gives the slope); one element runs the formula, as torch's
CUDA kernels do at any length."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

SPECIAL = [-math.inf, -1.0, -0.0, 0.0, 1.0, math.inf, math.nan]


def _np(t):
    return None if t is None else t.detach().numpy().copy()


def _derivs(m, f, point, dtype, second=True):
    """(value, first gradient, does it require grad, its grad_fn name, second derivative) of f at
    a one-element tensor."""
    x = m.tensor([point], dtype=getattr(m, dtype), requires_grad=True)
    y = f(m, x)
    g, = m.autograd.grad(y.sum(), x, create_graph=True)
    gg = None
    if second and g.requires_grad:
        gg, = m.autograd.grad(g.sum(), x, allow_unused=True)
    name = None if g.grad_fn is None else g.grad_fn.name()
    return _np(y), _np(g), g.requires_grad, name, _np(gg)


def _same_bits(t, g):
    """Equal values, NaN where NaN, and the same sign of zero."""
    if t is None or g is None:
        return t is None and g is None
    return t.shape == g.shape and t.dtype == g.dtype and bool(np.all(
        ((t == g) & (np.signbit(t) == np.signbit(g))) | (np.isnan(t) & np.isnan(g))))


def _close(t, g, dtype):
    if t is None or g is None:
        return t is None and g is None
    tol = 1e-12 if dtype == "float64" else 1e-6
    return bool(np.all(np.isclose(g, t, rtol=tol, atol=0, equal_nan=True)))


def check_derivs(f, points=SPECIAL, dtypes=("float64", "float32"), second=True, exact=True):
    for dtype in dtypes:
        for p in points:
            t, g = _derivs(torch, f, p, dtype, second), _derivs(tg, f, p, dtype, second)
            for what, a, b in zip(("value", "grad", "grad requires grad", "grad_fn name", "second derivative"),
                                  t, g):
                if isinstance(a, np.ndarray):
                    ok = _same_bits(a, b) if exact else _close(a, b, dtype)
                else:
                    ok = a == b
                assert ok, f"{what} at {p} in {dtype}: torch {a}, tracegrad {b}"


# == in-place writes over inf and NaN ======================================================================

@pytest.mark.parametrize("write", ["fill_", "zero_", "copy_", "copy_grad", "setitem"])
def test_inplace_overwrite_of_a_history_with_inf_and_nan(write):
    # the overwritten history is linked with a zero gradient; self * 0 made it NaN where self was inf or NaN
    def run(m):
        x = m.tensor([-math.inf, 1.0, math.nan, math.inf], dtype=m.float64, requires_grad=True)
        s = m.tensor([3.0, 4.0, 5.0, 6.0], dtype=m.float64, requires_grad=True)
        y = x * 1
        if write == "fill_":
            y.fill_(2.0)
        elif write == "zero_":
            y.zero_()
        elif write == "copy_":
            y.copy_(s.detach())
        elif write == "copy_grad":
            y.copy_(s)
        else:
            y[:] = 5.0
        (y * m.arange(4, dtype=m.float64)).sum().backward()
        return _np(y), _np(x.grad), _np(s.grad), y.grad_fn.name()
    t, g = run(torch), run(tg)
    for a, b in zip(t[:3], g[:3]):
        assert _same_bits(a, b), (t, g)
    assert t[3] == g[3]

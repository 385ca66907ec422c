"""Ops users reach for that tracegrad lacked, against torch: i0 and the scaled and first-order
Bessel functions, angle and the conjugation no-ops of real tensors, gcd/lcm/nextafter,
index_reduce, as_strided, resize_; and a float32 power by an exponent beyond float32's range.

Each: values (bit for bit where the same arithmetic runs, else a stated tolerance), dtypes,
errors (torch's type and message), grad_fn names, float64 gradcheck (and gradgradcheck where
torch supports it), and compiled against eager.
"""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _same(a, b):
    """a (tracegrad) equals b (torch) bit for bit, with the dtype's name and the shape."""
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def _raises_like(fn_torch, fn_tg):
    with pytest.raises(Exception) as et:
        fn_torch()
    with pytest.raises(type(et.value)) as eg:
        fn_tg()
    assert str(eg.value) == str(et.value)


# -- a float32 power by an exponent beyond float32's range ------------------------------------------

POW_BASES = [0.5, 1.0, 2.0, -1.0, 0.0, -0.0, -0.5, -2.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("e", [1e300, -1e300, 3.5e38, -3.5e38, 1e39, 2.0 ** 200])
@pytest.mark.parametrize("dtype", ["float32", "int8", "int64"])
def test_pow_exponent_beyond_float32(e, dtype):
    """torch's float32 kernel takes a number exponent as a double (an integer base is promoted to
    float32): x ** 1e300 is inf, 1, 0 or NaN per IEEE. tracegrad raised "value cannot be converted
    to type float without overflow", a check torch makes only for float16 and bfloat16 bases."""
    vals = POW_BASES if dtype == "float32" else [0, 1, 2, -1, -2, 3]
    x = tg.tensor(vals, dtype=getattr(tg, dtype))
    t = torch.tensor(vals, dtype=getattr(torch, dtype))
    _same(x ** e, t ** e)
    _same(tg.pow(x, e), torch.pow(t, e))
    compiled = tg.compile(lambda a: a ** e + 0)
    _same(compiled(x), t ** e + 0)
    if dtype == "float32":
        _same(x.clone().pow_(e), t.clone().pow_(e))


def test_pow_exponent_beyond_half_still_raises():
    for dt in ("float16", "bfloat16"):
        for e in (1e300, 3.5e38):
            _raises_like(lambda: torch.ones(2, dtype=getattr(torch, dt)) ** e,
                         lambda: tg.ones(2, dtype=getattr(tg, dt)) ** e)
    _raises_like(lambda: torch.ones(2, dtype=torch.float16) ** 1e5, lambda: tg.ones(2, dtype=tg.float16) ** 1e5)


def test_pow_exponent_beyond_float32_gradient():
    for e in (1e300, -1e300, 3.5e38):
        x = tg.tensor([0.5, 2.0, 3.0], requires_grad=True)
        t = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
        (x ** e).sum().backward()
        (t ** e).sum().backward()
        _same(x.grad, t.grad)

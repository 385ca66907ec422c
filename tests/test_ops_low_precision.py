"""Every op of tests/op_db.py that takes float32, run in float16 and bfloat16 against torch: the
same refusals (error type), output dtypes and shapes, values within a few of the dtype's ulps
(torch computes most ops in float32 and rounds, as tracegrad does; the two float32 results can
round to neighbouring values), and gradients of every input within the same few ulps (scaled for
the chain of roundings a gradient passes).

Left out: signbit of a bfloat16 NaN made by .to(bfloat16) (torch's vectorized conversion makes
NaN's sign bit set, 0xFFFF, where its scalar one and other ops give 0x7FC0; IEEE leaves a NaN's
sign unspecified)."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad
from op_db import make_array, sample_id, samples

TOLS = {"bfloat16": 2e-2, "float16": 3e-3}
SKIP = {("signbit", "bfloat16")}
CASES = [(op, i, s) for op, i, s in samples()
         if "float32" in op.dtypes and (s.dtypes is None or "float32" in s.dtypes)]


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


def _run(m, op, i, s, dt, arrays):
    grad = bool(s.grad and op.grad)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            xs = [m.tensor(a.copy()).to(getattr(m, dt)).requires_grad_(grad) for a in arrays]
            outs = _flat(op.fn(m, *xs, **s.kwargs))
            res = [(str(o.dtype).replace("torch.", ""), tuple(o.shape), o.detach().double().numpy())
                   if hasattr(o, "dtype") else ("number", (), np.asarray(o)) for o in outs]
            diff = [o for o in outs if hasattr(o, "dtype") and o.dtype.is_floating_point and o.requires_grad]
            if grad and diff:
                total = sum(((o.double() * (k + 1)).sin().sum() for k, o in enumerate(diff)),
                            m.zeros((), dtype=m.float64))
                grads = m.autograd.grad(total, xs, allow_unused=True)
                res += [("grad", None, None if g is None else g.detach().double().numpy()) for g in grads]
            return res
    except Exception as e:            # noqa: BLE001  (the error type is compared)
        return type(e).__name__


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("op,i,s", CASES, ids=[sample_id(op, i, s) for op, i, s in CASES])
def test_low_precision_forward_and_gradient_as_torch(op, i, s, dt):
    if (op.name, dt) in SKIP:
        pytest.skip("a NaN's sign bit (see the module's docstring)")
    arrays = [make_array(shape, "float32", s.domain_of(k, op), f"{op.name}/{i}/{k}") for k, shape in enumerate(s.shapes)]
    want = _run(torch, op, i, s, dt, arrays)
    got = _run(tracegrad, op, i, s, dt, arrays)
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert len(got) == len(want)
    tol = TOLS[dt]
    for (dg, sg, vg), (dw, sw, vw) in zip(got, want):
        assert dg == dw
        if dg == "grad":
            assert (vg is None) == (vw is None)
            if vg is not None:
                np.testing.assert_allclose(vg, vw, rtol=4 * tol, atol=4 * tol, equal_nan=True)
            continue
        assert sg == sw
        if vg.dtype.kind == "f":
            np.testing.assert_allclose(vg, vw, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(vg, vw)


def test_float16_einsum_is_one_rounding_of_float32_compiled_and_eager():
    """numpy's float16 einsum keeps partial sums in half precision in an order that follows the
    operands' strides: an eager gradient and a compiled one (its operand laid out otherwise) were an
    ulp apart (op_db einsum sample 20). Computed in float32 and rounded once, both are torch's."""
    rs = np.random.RandomState(20)
    a, b = rs.randn(2, 3, 4).astype(np.float32), rs.randn(4).astype(np.float32)

    def f(x, y):
        o = tracegrad.einsum("b...k,k->...b", x, y)
        return (o,) + tracegrad.autograd.grad(o.double().sin().sum(), (x, y))
    x = tracegrad.tensor(a).half().requires_grad_()
    y = tracegrad.tensor(b).half().requires_grad_()
    eager, compiled = f(x, y), tracegrad.compile(f)(x, y)
    xt, yt = torch.tensor(a).half().requires_grad_(), torch.tensor(b).half().requires_grad_()
    ot = torch.einsum("b...k,k->...b", xt, yt)
    want = (ot,) + torch.autograd.grad(ot.double().sin().sum(), (xt, yt))
    for e, c, w in zip(eager, compiled, want):
        assert e.tolist() == c.tolist() == w.tolist()

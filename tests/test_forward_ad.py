"""Forward-mode AD (tracegrad.autograd.forward_ad) against torch.autograd.forward_ad, in float64.

Every sample of tests/op_db.py runs with dual inputs in both libraries: the primal values, which
outputs carry a tangent, and the tangents' values must agree; where torch's forward AD refuses an
op (NotImplementedError), tracegrad's must raise the same type. Then the API's own behaviour:
levels and their errors, make_dual's checks, views and in-place ops, modules, gradcheck's
check_forward_ad, reverse mode through a tangent, and compile's refusal to drop tangents.
"""
import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import tracegrad
import tracegrad.autograd.forward_ad as gfw
from tracegrad.autograd.forward_ad import dual_level, make_dual, unpack_dual

from conftest import assert_close, to_torch, to_tg
from op_db import make_array, samples, sample_id

TOL = {"float64": (1e-7, 1e-7), "float32": (1e-5, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}

# Where tracegrad's tangents differ from torch's forward AD, and why: (what tracegrad does, the reason).
# "raises": tracegrad raises this error type where torch gives a tangent; "differs": the tangent's
# values differ at points where the op is not differentiable.
DIFFERENCES = {
    # torch's forward formula gives the bound's tangent where x equals a tensor bound, its backward
    # the input's: tracegrad's tangent is the transpose of the backward (torch's reverse-mode J t)
    "clamp_at_bounds-0-2x3,3": ("differs", "a tie with a tensor bound follows torch's backward"),
    # torch's forward AD gives mean's tangent of an empty tensor NaN (0 / 0); the transpose of the
    # derivative is an empty sum, 0 (the Jacobian of a function of no variables)
    "mean_empty-0-0x3": ("differs", "an empty mean's tangent is 0, torch's NaN"),
    # a src larger than the index: the derivative rule refuses the gradient's shape, as torch's backward
    "scatter-2-3x4,3x3,dim=1,index=[[0,3],[1,2],[3,0]]": ("raises", RuntimeError),
    # at nan and +-inf torch's forward formula gives finite tangents where the backward's gives nan
    "special_i1-2-6": ("differs", "nan and inf inputs"),
    "special_i1e-2-6": ("differs", "nan and inf inputs"),
}

ALL_SAMPLES = [pytest.param(op, i, s, id=sample_id(op, i, s)) for op, i, s in samples()]


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


def _forward_ad(m, fw, op, s, arrays, tangents):
    """op's outputs with dual inputs, as (primal, tangent) pairs (tangent None where it has none);
    or the exception the call raised."""
    with fw.dual_level():
        xs = [m.tensor(a.copy()) for a in arrays]
        duals = [fw.make_dual(x, m.tensor(t.copy())) for x, t in zip(xs, tangents)]
        try:
            out = op.fn(m, *duals, **s.kwargs)
        except Exception as e:  # noqa: BLE001  (the reference's refusal, compared below)
            return e
        return [fw.unpack_dual(o) if isinstance(o, (torch.Tensor, tracegrad.Tensor)) else (o, None)
                for o in _flat(out)]


@pytest.mark.parametrize("op,i,s", ALL_SAMPLES)
def test_op_db_tangents_match_torch(op, i, s):
    """Every op of op_db with dual float64 inputs: outputs, which carry a tangent, tangents."""
    if "float64" not in op.dtypes or s.dtypes is not None and "float64" not in s.dtypes:
        pytest.skip("no float64 sample")
    arrays = [make_array(shape, "float64", s.domain_of(k, op), f"{op.name}/{i}/{k}") for k, shape in
              enumerate(s.shapes)]
    tangents = [make_array(shape, "float64", None, f"{op.name}/{i}/{k}/tangent") for k, shape in
                enumerate(s.shapes)]
    ref = _forward_ad(torch, tfw, op, s, arrays, tangents)
    known = DIFFERENCES.get(sample_id(op, i, s))
    if known is not None and known[0] == "raises":
        assert not isinstance(ref, Exception)
        with pytest.raises(known[1]):
            got = _forward_ad(tracegrad, gfw, op, s, arrays, tangents)
            if isinstance(got, Exception):
                raise got
        return
    if isinstance(ref, Exception):
        with pytest.raises(type(ref)):
            got = _forward_ad(tracegrad, gfw, op, s, arrays, tangents)
            if isinstance(got, Exception):
                raise got
        return
    got = _forward_ad(tracegrad, gfw, op, s, arrays, tangents)
    if isinstance(got, Exception):
        raise got
    assert len(got) == len(ref)
    for k, ((pg, tg), (pt, tt)) in enumerate(zip(got, ref)):
        if not isinstance(pt, torch.Tensor):
            continue
        tol = TOL.get(str(pt.dtype).replace("torch.", ""), (0, 0))
        assert_close(pg, pt, *tol)
        if tt is not None and tt._is_zerotensor():
            tt = torch.zeros_like(pt)
        assert (tg is None) == (tt is None), (k, tg, tt)
        if tt is not None and known is None:
            assert_close(tg, tt, *tol)

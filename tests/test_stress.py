"""Randomized stress: random programs mixed with random misuse, run under torch and
tracegrad side by side, eager, in float32 and float64, with first and second derivatives.
Nothing may crash; every error must be a clean exception of torch's type; every value and
gradient that comes back must match torch's to the dtype's tolerance.

Budget: TRACEGRAD_STRESS_SECONDS (default 8 s in CI), or exactly TRACEGRAD_STRESS_PROGRAMS
programs (each run in both dtypes), e.g.
TRACEGRAD_STRESS_PROGRAMS=500 python -m pytest -q -m stress tests/test_stress.py
"""
import os
import time

import numpy as np
import pytest
import torch

import tracegrad as tg

UNARY = ["neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "expm1", "log1p_abs", "sqrt_abs", "square"]
BINARY = ["add", "sub", "mul", "div_safe", "maximum", "minimum", "pow_int", "matmul", "where"]
REDUCE = ["sum", "mean", "amax", "logsumexp", "softmax", "var", "norm"]
SHAPE = ["transpose", "reshape", "unsqueeze_squeeze", "getitem", "cat", "expand", "flip", "permute", "getitem_mixed",
         "einsum_ellipsis", "narrow"]
BINARY += ["einsum_ellipsis_pair"]


def unary(m, name, x):
    if name == "log1p_abs":
        return m.log1p(x.abs())
    if name == "sqrt_abs":
        return (x.abs() + 0.1).sqrt()
    if name == "square":
        return x * x
    return getattr(m, name)(x)


def binary(m, name, x, y):
    if name == "div_safe":
        return x / (y.abs() + 0.5)
    if name == "pow_int":
        return x ** 2 + y
    if name == "where":
        return m.where(x > y, x, y * 2)
    if name == "matmul":
        return x @ y
    if name == "einsum_ellipsis_pair":
        # "..." broadcast batch dims; shapes that do not broadcast must fail as torch's do
        return m.einsum("...i,...i->...", x, y) if x.ndim and y.ndim else x * y
    return getattr(m, name)(x, y)


def reduce(m, name, x, dim, keepdim):
    if name == "softmax":
        return m.softmax(x, dim)
    if name == "var":
        return x.var(dim, keepdim=keepdim)
    if name == "norm":
        return x.norm(dim=dim, keepdim=keepdim)
    return getattr(x, name)(dim, keepdim=keepdim)


def shape_op(m, name, x, rng_state):
    r = np.random.default_rng(rng_state)
    if name == "transpose" and x.ndim >= 2:
        return x.transpose(0, -1)
    if name == "reshape":
        return x.reshape(-1)
    if name == "unsqueeze_squeeze":
        return x.unsqueeze(0).squeeze(0)
    if name == "getitem" and x.ndim >= 1 and x.shape[0] > 0:
        return x[int(r.integers(0, x.shape[0]))]
    if name == "cat":
        return m.cat([x, x * 2], dim=0) if x.ndim else x
    if name == "expand" and x.ndim >= 1:
        return x.unsqueeze(0).expand(2, *x.shape)
    if name == "flip" and x.ndim >= 1:
        return x.flip(0)
    if name == "permute" and x.ndim >= 1:
        return x.permute(*reversed(range(x.ndim)))
    if name == "getitem_mixed" and x.ndim >= 2 and all(x.shape):
        # ints and an index tensor, apart or side by side: torch applies the ints first
        idx = m.tensor([int(v) for v in r.integers(-x.shape[-1], x.shape[-1], int(r.integers(1, 4)))],
                       device=x.device)
        i = int(r.integers(-x.shape[0], x.shape[0]))
        if x.ndim >= 3:
            return x[i, 1:, idx] if r.integers(0, 2) else x[i, ..., idx]
        return x[i, idx]
    if name == "einsum_ellipsis" and x.ndim >= 1:
        return m.einsum("...i->...", x) if x.ndim == 1 or r.integers(0, 2) else m.einsum("...ij->...ji", x)
    if name == "narrow" and x.ndim >= 1 and x.shape[0]:
        start = int(r.integers(-x.shape[0], x.shape[0]))
        return x.narrow(0, start, int(r.integers(0, x.shape[0] - (start % x.shape[0]) + 1)))
    return x


def run_program(m, seed, leaves):
    """A random program over the leaves; the same seed gives the same program in either module."""
    r = np.random.default_rng(seed)
    vals = list(leaves)
    for _ in range(int(r.integers(3, 12))):
        kind = r.integers(0, 4)
        x = vals[int(r.integers(0, len(vals)))]
        if kind == 0:
            vals.append(unary(m, UNARY[int(r.integers(0, len(UNARY)))], x))
        elif kind == 1:
            y = vals[int(r.integers(0, len(vals)))]
            name = BINARY[int(r.integers(0, len(BINARY)))]
            vals.append(binary(m, name, x, y))
        elif kind == 2 and x.ndim:
            dim = int(r.integers(-x.ndim, x.ndim))
            vals.append(reduce(m, REDUCE[int(r.integers(0, len(REDUCE)))], x, dim, bool(r.integers(0, 2))))
        else:
            vals.append(shape_op(m, SHAPE[int(r.integers(0, len(SHAPE)))], x, int(r.integers(0, 1 << 30))))
    return vals[-1]


def _loss(m, out):
    """A scalar that weighs every position differently, so a result laid out differently (a
    permutation of torch's) does not go unseen."""
    w = m.tensor(np.cos(np.arange(max(out.numel(), 1)) + 0.5)[:out.numel()].reshape(tuple(out.shape)),
                 dtype=out.dtype, device=out.device)
    return (out * out * w).sum()


TOL = {"float32": 2e-4, "float64": 1e-9}


def _close(got, want, dtype, what):
    """Within the dtype's tolerance, relative to the largest magnitude of the result (a sum of
    terms cancels to rounding of its largest term, not of the result)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    finite = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * scale, equal_nan=True, err_msg=what)


def one_case(seed, dtype="float64", order=2):
    r = np.random.default_rng(seed)
    shapes = []
    for _ in range(int(r.integers(1, 4))):
        nd = int(r.integers(0, 4))
        shapes.append(tuple(int(s) for s in r.integers(1, 4, nd)))
    arrays = [r.standard_normal(s).astype(dtype) for s in shapes]
    tl = [torch.tensor(a, requires_grad=True) for a in arrays]
    gl = [tg.tensor(a, requires_grad=True) for a in arrays]
    tshape = None
    try:
        tout = run_program(torch, seed, tl)
        tshape = tuple(tout.shape)
        tout = _loss(torch, tout)
        terr = None
    except Exception as e:  # torch rejected this program: tracegrad must reject it the same way
        terr = e
    try:
        gout = run_program(tg, seed, gl)
        gshape = tuple(gout.shape)
        gout = _loss(tg, gout) if gshape == tshape else None
        gerr = None
    except (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError) as e:
        gerr = e
    if terr is not None or gerr is not None:
        assert terr is not None and gerr is not None, (seed, terr, gerr)
        assert type(gerr) is type(terr) or isinstance(gerr, type(terr)), (seed, terr, gerr)
        return "error"
    assert gshape == tshape, (seed, dtype, "result shape", gshape, tshape)
    assert str(gout.dtype).split(".")[-1] == str(tout.dtype).split(".")[-1], (seed, gout.dtype, tout.dtype)
    _close(gout.item(), tout.item(), dtype, f"seed {seed} {dtype}: value")
    if not np.isfinite(tout.item()):
        return "nonfinite"        # NaN gradients depend on each formula's form; values matched above
    tgrads = torch.autograd.grad(tout, tl, allow_unused=True, materialize_grads=True, create_graph=order > 1)
    ggrads = tg.autograd.grad(gout, gl, allow_unused=True, materialize_grads=True, create_graph=order > 1)
    for k, (a, b) in enumerate(zip(ggrads, tgrads)):
        _close(a.detach().numpy(), b.detach().numpy(), dtype, f"seed {seed} {dtype}: gradient {k}")
    if order < 2 or not all(np.isfinite(b.detach().numpy()).all() for b in tgrads):
        return "ok"
    # second order: the gradient of <grad, v> for a fixed random v
    vs = [r.standard_normal(tuple(a.shape)).astype(dtype) for a in arrays]
    st = sum((b * torch.tensor(v)).sum() for b, v in zip(tgrads, vs))
    sg = sum((a * tg.tensor(v)).sum() for a, v in zip(ggrads, vs))
    if not st.requires_grad:
        # torch's first derivative is piecewise constant here: tracegrad's second must vanish
        if sg.requires_grad:
            for d in tg.autograd.grad(sg, gl, allow_unused=True, materialize_grads=True):
                assert not np.any(d.numpy()), (seed, dtype, "second derivative")
        return "ok"
    t2 = torch.autograd.grad(st, tl, allow_unused=True, materialize_grads=True)
    assert sg.requires_grad, (seed, dtype, "tracegrad's first derivative does not depend on the inputs")
    g2 = tg.autograd.grad(sg, gl, allow_unused=True, materialize_grads=True)
    for k, (a, b) in enumerate(zip(g2, t2)):
        _close(a.numpy(), b.numpy(), dtype, f"seed {seed} {dtype}: second derivative {k}")
    return "ok"


@pytest.mark.stress
def test_random_programs_match_torch():
    programs = os.environ.get("TRACEGRAD_STRESS_PROGRAMS")
    budget = float(os.environ.get("TRACEGRAD_STRESS_SECONDS", "8"))
    import torch._dynamo  # noqa: F401  (some of torch's backward formulas import it on first use: seconds)
    start = time.monotonic()
    seed = 0
    counts = {"ok": 0, "error": 0, "nonfinite": 0}
    while (seed < int(programs)) if programs else (time.monotonic() - start < budget):
        for dtype in ("float64", "float32"):
            with np.errstate(all="ignore"):
                counts[one_case(seed, dtype)] += 1
        seed += 1
    assert counts["ok"] > 10, counts

"""Randomized stress: random programs mixed with random misuse, run under torch and
tracegrad side by side. Nothing may crash; every error must be a clean exception of
torch's type; every gradient that comes back must match torch's.

Budget: TRACEGRAD_STRESS_SECONDS (default 8 s in CI); e.g.
TRACEGRAD_STRESS_SECONDS=600 python -m pytest -q -m stress tests/test_stress.py
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
SHAPE = ["transpose", "reshape", "unsqueeze_squeeze", "getitem", "cat", "expand", "flip", "permute"]


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
    out = vals[-1]
    return (out * out).sum() if out.ndim else out * out


def one_case(seed):
    r = np.random.default_rng(seed)
    shapes = []
    for _ in range(int(r.integers(1, 4))):
        nd = int(r.integers(0, 4))
        shapes.append(tuple(int(s) for s in r.integers(1, 4, nd)))
    arrays = [r.standard_normal(s) for s in shapes]
    tl = [torch.tensor(a, requires_grad=True) for a in arrays]
    gl = [tg.tensor(a, requires_grad=True) for a in arrays]
    try:
        tout = run_program(torch, seed, tl)
        terr = None
    except Exception as e:  # torch rejected this program: tracegrad must reject it the same way
        terr = e
    try:
        gout = run_program(tg, seed, gl)
        gerr = None
    except (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError) as e:
        gerr = e
    if terr is not None or gerr is not None:
        assert terr is not None and gerr is not None, (seed, terr, gerr)
        assert type(gerr) is type(terr) or isinstance(gerr, type(terr)), (seed, terr, gerr)
        return "error"
    np.testing.assert_allclose(gout.item(), tout.item(), rtol=1e-7, atol=1e-9, err_msg=f"seed {seed}")
    if not np.isfinite(tout.item()):
        return "nonfinite"        # NaN gradients depend on each formula's form; values matched above
    tgrads = torch.autograd.grad(tout, tl, allow_unused=True, materialize_grads=True)
    ggrads = tg.autograd.grad(gout, gl, allow_unused=True, materialize_grads=True)
    for a, b in zip(ggrads, tgrads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-8, err_msg=f"seed {seed}")
    return "ok"


@pytest.mark.stress
def test_random_programs_match_torch():
    budget = float(os.environ.get("TRACEGRAD_STRESS_SECONDS", "8"))
    start = time.monotonic()
    seed = 0
    counts = {"ok": 0, "error": 0, "nonfinite": 0}
    while time.monotonic() - start < budget:
        with np.errstate(all="ignore"):
            counts[one_case(seed)] += 1
        seed += 1
    assert counts["ok"] > 10, counts

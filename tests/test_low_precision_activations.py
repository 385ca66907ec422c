"""Composite activations in float16 and bfloat16 computed as torch computes them: in float32,
rounded once. Decomposed into primitives that each round to half precision, gelu's tail came
out -0 (gelu(-3.8)), softplus(12) was inf in float16, hardsigmoid near -3 and logaddexp were
hundreds of ulps off.

Each value and gradient is compared with the float64 result of the same (half-precision)
inputs: tracegrad's error is at most torch's own, or half an ulp of the dtype (an ulp and a half
for a gradient, which may be the rounded sum of two rounded contributions), plus what the float32 computation's
conditioning allows (a few float32 ulps of the terms that cancel)."""
import numpy as np
import pytest
import torch

import tracegrad as tg

RNG = np.random.default_rng(7)
VALUES = np.concatenate([RNG.standard_normal(600) * 3, RNG.uniform(-12, 12, 400), [-3.8, -3.0, 3.0, 12.0, 0.0]])
VALUES = VALUES.astype(np.float32)
NAMES = ["gelu", "gelu_tanh", "silu", "mish", "softplus", "hardswish", "hardsigmoid", "logsigmoid", "glu",
         "logaddexp"]


def call(lib, name, x):
    F = lib.nn.functional
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "glu":
        return F.glu(x[:-1].reshape(-1, 2), dim=1)
    if name == "logaddexp":
        return lib.logaddexp(x, x.flip(0) * 0.5)
    return getattr(F, name)(x)


def spacing(v, dt):
    """The dtype's ulp at each value (at the smallest normal below it)."""
    t = torch.tensor(np.abs(v)).to(dt)
    up = torch.nextafter(t, torch.tensor(float("inf"), dtype=dt))
    return (up.double() - t.double()).numpy()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", NAMES)
def test_value_and_gradient_are_no_worse_than_torchs(name, dtype):
    tdt, gdt = getattr(torch, dtype), getattr(tg, dtype)
    tx = torch.tensor(VALUES).to(tdt).requires_grad_()
    x64 = tx.detach().double().requires_grad_()
    gx = tg.tensor(VALUES).to(gdt).requires_grad_()
    ty, y64, gy = call(torch, name, tx), call(torch, name, x64), call(tg, name, gx)
    assert gy.dtype is gdt and type(gy.grad_fn).__name__ == type(ty.grad_fn).__name__
    ty.backward(torch.ones_like(ty))
    y64.backward(torch.ones_like(y64))
    gy.backward(tg.ones_like(gy))
    eps32 = 2.0 ** -23
    for what, got, want, exact, scale in (
            ("value", gy.detach().double().numpy(), ty.detach().double().numpy(), y64.detach().numpy(),
             np.abs(call(torch, name, x64.detach().abs()).numpy()) + 1),
            ("gradient", gx.grad.double().numpy(), tx.grad.double().numpy(), x64.grad.numpy(),
             np.abs(x64.detach().numpy()) + 1)):
        if what == "value" and name in ("glu", "logaddexp"):
            scale = np.abs(exact) + 1
        # a value is rounded once (half an ulp); a gradient may be the rounded sum of two rounded
        # contributions (logaddexp's input is used twice): an ulp and a half
        ulps = 0.5 if what == "value" else 1.5
        allowed = np.maximum(np.abs(want - exact), ulps * spacing(exact, tdt)) + 8 * eps32 * scale * (1 + np.abs(exact))
        err = np.abs(got - exact)
        bad = np.flatnonzero(err > allowed * (1 + 1e-9))
        assert bad.size == 0, (f"{name} {dtype} {what}: {bad.size} elements, e.g. tracegrad {got.flat[bad[0]]!r}, "
                               f"torch {want.flat[bad[0]]!r}, exact {exact.flat[bad[0]]!r}")


def test_the_tails_that_came_out_wrong():
    x = tg.tensor([-3.8, 12.0, -2.99])
    assert tg.nn.functional.gelu(x.to(tg.bfloat16))[0].item() < 0                  # was -0
    assert tg.nn.functional.softplus(x.to(tg.float16))[1].item() == pytest.approx(12.0, abs=0.01)   # was inf
    hs = tg.nn.functional.hardsigmoid(x.to(tg.float16))[2].float().item()
    assert hs == pytest.approx(torch.nn.functional.hardsigmoid(torch.tensor(-2.99).half()).item(), rel=1e-3)


@pytest.mark.parametrize("name", ["elu", "selu", "celu"])
def test_the_exponential_branch_never_makes_a_nan_gradient(name):
    """elu's exponential was taken of every x, so at x = 100 (float32) it overflowed where its
    value is not used, and the gradient was inf * 0 = NaN."""
    kw = {"alpha": 0.5} if name == "celu" else {}
    a = np.array([100.0, 1000.0, -100.0, 1.5, -1.5], np.float32)
    tx, gx = torch.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
    getattr(torch.nn.functional, name)(tx, **kw).sum().backward()
    getattr(tg.nn.functional, name)(gx, **kw).sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-37)   # exp(-100) is subnormal


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["elu", "selu", "group_norm", "bce_with_logits"])
def test_more_composites_in_half_precision_are_no_worse_than_torchs(name, dtype):
    x = (RNG.standard_normal((8, 12)) * 3).astype(np.float32)
    y = RNG.uniform(0.05, 0.95, (8, 12)).astype(np.float32)

    def f(lib, a):
        F = lib.nn.functional
        if name == "group_norm":
            return F.group_norm(a.reshape(4, 4, 6), 2)
        if name == "bce_with_logits":
            return F.binary_cross_entropy_with_logits(a, lib.tensor(y).to(a.dtype), reduction="none")
        return getattr(F, name)(a)
    tdt = getattr(torch, dtype)
    tx = torch.tensor(x).to(tdt).requires_grad_()
    x64 = tx.detach().double().requires_grad_()
    gx = tg.tensor(x).to(getattr(tg, dtype)).requires_grad_()
    outs = [f(torch, tx), f(torch, x64), f(tg, gx)]
    for o in outs:
        o.sum().backward()
    eps = 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10
    for what, (want, exact, got) in (("value", [o.detach().double().numpy() for o in outs]),
                                     ("gradient", (tx.grad.double().numpy(), x64.grad.numpy(),
                                                   gx.grad.double().numpy()))):
        # bce's gradient is sigmoid(x) - y, a difference of terms of order one: its error is
        # relative to them, not to the (cancelled) result
        floor = 1.0 if (name, what) == ("bce_with_logits", "gradient") else 1e-3
        scale = (np.abs(exact) + floor) * eps
        err_t, err_g = np.abs(want - exact) / scale, np.abs(got - exact) / scale
        assert np.all(err_g <= np.maximum(2 * err_t, 1.5) + 0.5), (what, float(err_g.max()), float(err_t.max()))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cross_entropy"])
def test_the_softmax_gradients_in_half_precision_are_no_worse_than_torchs(name, dtype):
    """The softmax kernels run half precision in float32; their derivative rules now do too."""
    x = (RNG.standard_normal((16, 24)) * 3).astype(np.float32)
    target = RNG.integers(0, 24, 16)
    w = RNG.standard_normal((16, 24)).astype(np.float32)

    def f(lib, a):
        if name == "cross_entropy":
            return lib.nn.functional.cross_entropy(a, lib.tensor(target), reduction="none")
        return getattr(lib, name)(a, 1) * lib.tensor(w).to(a.dtype)
    tdt = getattr(torch, dtype)
    tx = torch.tensor(x).to(tdt).requires_grad_()
    x64 = tx.detach().double().requires_grad_()
    gx = tg.tensor(x).to(getattr(tg, dtype)).requires_grad_()
    for lib, a in ((torch, tx), (torch, x64), (tg, gx)):
        f(lib, a).sum().backward()
    eps = 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10
    want, exact, got = tx.grad.double().numpy(), x64.grad.numpy(), gx.grad.double().numpy()
    scale = (np.abs(exact) + 1e-3) * eps
    err_t, err_g = np.abs(want - exact) / scale, np.abs(got - exact) / scale
    # where g and softmax * sum(g) cancel, either library's result is a few rounded terms apart
    # from float64's: compared as a whole (the worst error, how many are past 1.5 ulps)
    assert err_g.max() <= max(1.01 * err_t.max(), 1.5) + 0.5, (float(err_g.max()), float(err_t.max()))
    assert (err_g > 1.5).sum() <= 1.1 * (err_t > 1.5).sum() + 2, ((err_g > 1.5).sum(), (err_t > 1.5).sum())


# -- thresholds between two values of the dtype: which side a value on the dtype's grid falls -----
# torch's kernels compare a float16/bfloat16 input with the threshold in float32 (threshold,
# hardtanh's backward, softshrink's value, which also subtracts lambd in float32) or with the
# threshold cast to the dtype (hardshrink both ways, softshrink's backward). At bfloat16(0.1) =
# 0.10009765625 > 0.1 and float16(0.1) = 0.0999755859375 < 0.1 the two disagree.
BOUNDARY = {
    "threshold": lambda F, x: F.threshold(x, 0.1, 20.0),
    "softshrink": lambda F, x: F.softshrink(x, 0.1),
    "hardshrink": lambda F, x: F.hardshrink(x, 0.1),
    "hardtanh": lambda F, x: F.hardtanh(x, -0.1, 0.1),
    "threshold 1/3": lambda F, x: F.threshold(x, 1 / 3, -1.0),
    "softshrink 1/3": lambda F, x: F.softshrink(x, 1 / 3),
    "hardtanh 1/3": lambda F, x: F.hardtanh(x, -1 / 3, 1 / 3),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(BOUNDARY))
@pytest.mark.parametrize("compiled", [False, True])
def test_values_on_the_threshold_fall_on_torchs_side(name, dtype, compiled):
    # the dtype's values of +-0.1 and +-1/3, their neighbours, and others
    raw = torch.tensor([0.1, -0.1, 1 / 3, -1 / 3, 0.0, 0.2, -0.25, 0.5]).to(getattr(torch, dtype))
    ulps = raw.float().abs() * (2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10)
    vals = torch.cat([raw.float(), raw.float() + ulps, raw.float() - ulps]).to(getattr(torch, dtype)).float().tolist()
    seed = np.linspace(1.0, 2.0, len(vals)).tolist()
    x = torch.tensor(vals, dtype=getattr(torch, dtype), requires_grad=True)
    y = BOUNDARY[name](torch.nn.functional, x)
    y.backward(torch.tensor(seed).to(y.dtype))
    xg = tg.tensor(vals).to(getattr(tg, dtype)).requires_grad_()

    def f(v):
        out = BOUNDARY[name](tg.nn.functional, v)
        return out, tg.autograd.grad(out, v, tg.tensor(seed).to(out.dtype))[0]
    out, grad = (tg.compile(f) if compiled else f)(xg)
    assert out.float().tolist() == y.detach().float().tolist()
    assert grad.float().tolist() == x.grad.float().tolist()

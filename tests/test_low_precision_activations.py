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

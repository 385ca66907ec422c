"""torch.diagonal, torch.var_mean and torch.std_mean against torch: values, shapes, grad_fn
names, view semantics (writes through the diagonal reach its base), float64 gradcheck and
gradgradcheck, and use inside a compiled function."""
import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

CASES = [(0, 0, 1), (1, 0, 1), (-2, 1, 2), (0, -1, 0), (3, 2, 0), (9, 0, 1), (-1, 2, 1)]


@pytest.mark.parametrize("offset,d1,d2", CASES)
def test_diagonal_matches_torch(offset, d1, d2):
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = a.diagonal(offset, d1, d2), b.diagonal(offset, d1, d2)
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_array_equal(np.asarray(ya.tolist()).reshape(ya.shape), yb.detach().numpy())
    assert type(ya.grad_fn).__name__ == type(yb.grad_fn).__name__ == "DiagonalBackward0"
    w = np.random.default_rng(1).standard_normal(tuple(yb.shape))
    (ya * tg.tensor(w)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=0, atol=0)
    assert gradcheck(lambda t: tg.diagonal(t, offset, d1, d2), (tg.tensor(x, requires_grad=True),))
    assert gradgradcheck(lambda t: tg.diagonal(t, offset, d1, d2) ** 2, (tg.tensor(x, requires_grad=True),))


@pytest.mark.parametrize("transposed", [False, True])
def test_diagonal_is_a_view(transposed):
    def run(m):
        base = m.zeros(3, 4)
        src = base.t() if transposed else base
        src.diagonal(1).fill_(2.0)
        w = m.ones(3, 3, requires_grad=True)
        y = w * 1
        y.t().diagonal(-1).mul_(3.0)
        (y * m.arange(9.0).reshape(3, 3)).sum().backward()
        return base.tolist(), y.tolist(), w.grad.tolist(), type(y.grad_fn).__name__

    assert run(tg) == run(torch)


def test_diagonal_errors_match_torch():
    for fn in (lambda m: m.zeros(2, 2).diagonal(0, 1, 1), lambda m: m.zeros(2, 2).diagonal(0, 0, 2)):
        with pytest.raises(Exception) as et:
            fn(torch)
        with pytest.raises(type(et.value)):
            fn(tg)


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize("args,kwargs", [((), {}), ((1,), {}), (([0, 2],), {"keepdim": True}),
                                         ((1,), {"correction": 0}), ((False,), {}), ((2, False, True), {})])
def test_var_std_mean_match_torch(name, args, kwargs):
    x = np.random.default_rng(2).standard_normal((3, 4, 5))
    a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ra, rb = getattr(tg, name)(a, *args, **kwargs), getattr(torch, name)(b, *args, **kwargs)
    assert isinstance(ra, tuple) and len(ra) == 2
    for ta, tb in zip(ra, rb):
        assert tuple(ta.shape) == tuple(tb.shape)
        np.testing.assert_allclose(np.asarray(ta.tolist()), tb.detach().numpy(), rtol=1e-12, atol=1e-12)
    (ra[0] * 2 + ra[1] ** 2).sum().backward()
    (rb[0] * 2 + rb[1] ** 2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    f = getattr(tg, name)
    assert gradcheck(lambda t: f(t, *args, **kwargs), (tg.tensor(x, requires_grad=True),))
    assert gradgradcheck(lambda t: f(t, *args, **kwargs), (tg.tensor(x, requires_grad=True),))


def test_diagonal_and_var_mean_compiled():
    x = np.random.default_rng(3).standard_normal((4, 4))

    def step(m, t):
        v, mu = m.var_mean(t.diagonal(1) * t.diagonal(-1), 0)
        return v * 3 + mu

    f = tg.compile(lambda t: step(tg, t))
    a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = f(a), step(torch, b)
    ya.backward()
    yb.backward()
    np.testing.assert_allclose(ya.item(), yb.item(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)

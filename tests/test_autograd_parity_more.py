"""More derivatives against torch: prod's gradient with zeros among NaN and inf (torch's
running-product formula), the grad_fn names of first gradients taken with create_graph=True,
and the corners of softplus, soft_margin_loss, smooth_l1/huber and sinc. Float64 throughout;
each case compares first and second derivatives (autograd.grad with create_graph=True)."""
import math

import numpy as np
import pytest
import torch

import tracegrad as tg

NAN, INF = math.nan, math.inf


def _np(t):
    return None if t is None else t.detach().numpy().copy()


def _grads(m, f, data, second=True):
    """f's value, first gradient and (with second) the gradient of the first gradient's sum."""
    x = m.tensor(data, dtype=m.float64, requires_grad=True)
    y = f(m, x)
    g, = m.autograd.grad(y.sum(), x, create_graph=second)
    if not second:
        return _np(y), _np(g), None
    if not g.requires_grad:
        return _np(y), _np(g), np.zeros(tuple(x.shape))
    h, = m.autograd.grad(g.sum(), x, allow_unused=True)
    return _np(y), _np(g), _np(h) if h is not None else np.zeros(tuple(x.shape))


def _same(f, data, second=True):
    want = _grads(torch, f, data, second)
    got = _grads(tg, f, data, second)
    for w, o, what in zip(want, got, ("value", "grad", "second derivative")):
        if w is None:
            continue
        np.testing.assert_allclose(o, w, rtol=1e-12, atol=0, equal_nan=True, err_msg=f"{what} at {data}")
        # -0.0 and 0.0 apart
        assert np.array_equal(np.signbit(o), np.signbit(w)) or np.isnan(w).any(), f"{what} sign at {data}"


PROD_CASES = [[NAN, 1.0, 0.0], [INF, 2.0, 0.0], [1.0, 2.0, 0.0], [3.0, 0.0, 2.0, 5.0], [2.0, 3.0, 4.0],
              [0.0, 0.0, 3.0], [NAN, 2.0, 3.0], [-INF, 0.0, 0.5, 4.0]]


@pytest.mark.parametrize("data", PROD_CASES)
def test_prod_grad_full(data):
    _grads_no_second = _grads(torch, lambda m, x: x.prod(), data, False)
    got = _grads(tg, lambda m, x: x.prod(), data, False)
    np.testing.assert_array_equal(got[1], _grads_no_second[1])
    # the second derivatives through inf and NaN follow cumprod's derivative, not compared
    _same(lambda m, x: x.prod(), data, second=bool(np.isfinite(data).all()))


@pytest.mark.parametrize("data", PROD_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod_grad_dim(data, keepdim):
    # another row with no zero: torch takes the running products for every row once any
    # element of the tensor is 0
    rows = [data, [1.5, NAN] + [2.0] * (len(data) - 2), [2.0] * len(data)]
    _same(lambda m, x: x.prod(1, keepdim=keepdim) * 1.0, rows, second=False)
    _same(lambda m, x: x.prod(0, keepdim=keepdim), rows, second=False)
    finite = [data, [1.5, -2.0] + [2.0] * (len(data) - 2)]
    if np.isfinite(data).all():
        _same(lambda m, x: x.prod(1, keepdim=keepdim), finite)
        _same(lambda m, x: x.prod(0, keepdim=keepdim), finite)


def test_prod_hessian_two_zeros():
    def f(m, x):
        return x.prod()
    for data in ([0.0, 0.0, 3.0], [0.0, 2.0, 0.0, 5.0]):
        x = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        want = torch.autograd.functional.hessian(lambda v: v.prod(), x)
        xt = tg.tensor(data, dtype=tg.float64, requires_grad=True)
        g, = tg.autograd.grad(xt.prod(), xt, create_graph=True)
        rows = [_np(tg.autograd.grad(g[i], xt, retain_graph=True)[0]) for i in range(len(data))]
        np.testing.assert_array_equal(np.stack(rows), want.numpy())


@pytest.mark.parametrize("point", [-INF, -1000.0, -30.0, -1.0, 0.0, 5.0, INF, NAN])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_soft_margin_loss_no_threshold(point, sign):
    # torch's log1p(exp(-input * target)) takes no threshold: 30.000000000000092 at -30 (softplus
    # gave 30.0), inf and a NaN gradient at -1000 and -inf (softplus gave -1)
    def f(m, x):
        return m.nn.functional.soft_margin_loss(x, m.full((1,), sign, dtype=m.float64), reduction="none")
    want = _grads(torch, f, [point], False)
    got = _grads(tg, f, [point], False)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=0, equal_nan=True)
    w2, o2 = _grads(torch, f, [point])[2], _grads(tg, f, [point])[2]
    np.testing.assert_allclose(o2, w2, rtol=2e-3 if abs(point) > 20 else 1e-14, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_soft_margin_loss_values(dtype):
    a = np.linspace(-40, 40, 161)
    t = torch.nn.functional.soft_margin_loss(torch.tensor(a).to(getattr(torch, dtype)),
                                             torch.ones(161, dtype=getattr(torch, dtype)), reduction="none")
    o = tg.nn.functional.soft_margin_loss(tg.tensor(a).to(getattr(tg, dtype)),
                                          tg.ones(161, dtype=getattr(tg, dtype)), reduction="none")
    np.testing.assert_array_equal(o.float().numpy(), t.float().numpy())


@pytest.mark.parametrize("f", [lambda m, x: x.log10(), lambda m, x: m.log10(x), lambda m, x: (x * 1).log10_()],
                         ids=["method", "function", "inplace"])
def test_log10_grad_fn_name(f):
    names = []
    for m in (torch, tg):
        x = m.tensor([0.3, 2.0], dtype=m.float64, requires_grad=True)
        y = f(m, x)
        g, = m.autograd.grad(y.sum(), x)
        names.append((y.grad_fn.name(), _np(y), _np(g)))
    assert names[1][0] == names[0][0]
    # (log / ln 10 is within an ulp of torch's log10, not always equal)
    np.testing.assert_allclose(names[1][1], names[0][1], rtol=4e-16, atol=0)
    np.testing.assert_allclose(names[1][2], names[0][2], rtol=4e-16, atol=0)


def test_kthvalue_tie_index_and_gradient():
    got = []
    for m in (torch, tg):
        x = m.tensor([2.0, 2.0, 2.0], dtype=m.float64, requires_grad=True)
        r = m.kthvalue(x, 2)
        g, = m.autograd.grad(r.values, x)
        got.append((r.indices.item(), _np(g), r.values.grad_fn.name()))
    assert got[1][0] == got[0][0] and got[1][2] == got[0][2]
    np.testing.assert_array_equal(got[1][1], got[0][1])


def test_kthvalue_random_ties():
    # torch's quickselect decides which of equal values it reports; NaN counts as the largest
    rng = np.random.default_rng(1)
    for _ in range(300):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 30)))
        a = rng.integers(0, int(rng.integers(1, 6)), shape).astype(float)
        a[rng.random(shape) < 0.1] = NAN
        d = int(rng.integers(0, 2))
        k = int(rng.integers(1, shape[d] + 1))
        keep = bool(rng.integers(0, 2))
        want = torch.kthvalue(torch.tensor(a), k, d, keep)
        got = tg.kthvalue(tg.tensor(a), k, d, keep)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy(), err_msg=f"{a.tolist()} {k} {d}")
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())


@pytest.mark.parametrize("dim", [0, 1])
def test_median_random_ties(dim):
    rng = np.random.default_rng(2)
    for _ in range(200):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 30)))
        a = rng.integers(0, int(rng.integers(1, 6)), shape).astype(float)
        a[rng.random(shape) < 0.1] = NAN
        want = torch.median(torch.tensor(a), dim)
        got = tg.median(tg.tensor(a), dim)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy(), err_msg=f"{a.tolist()}")
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())

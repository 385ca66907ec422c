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


# -- functions torch has: values, first and second derivatives against torch's -----------------

def _both(f, *arrays, grad=True, rtol=1e-13):
    """f(m, *tensors) in torch and tracegrad from float64 arrays: values, and the first and second
    derivatives of the sum (in every input that requires grad)."""
    res = []
    for m in (torch, tg):
        xs = [m.tensor(a, dtype=m.float64, requires_grad=grad) for a in arrays]
        y = f(m, *xs)
        out = [_np(y), y.grad_fn.name() if y.grad_fn is not None else None]
        if grad:
            gs = m.autograd.grad(y.sum(), xs, create_graph=True)
            out += [_np(g) for g in gs]
            if any(g.requires_grad for g in gs):
                hs = m.autograd.grad(sum((g * g).sum() for g in gs), xs, allow_unused=True)
            else:                    # a linear function's gradient is a constant
                hs = [None] * len(xs)
            out += [None if h is None else _np(h) for h in hs]
        res.append(out)
    want, got = res
    assert got[1] == want[1]
    for w, o in zip(want[:1] + want[2:], got[:1] + got[2:]):
        if w is None:
            assert o is None or not np.any(o)
            continue
        # (an entry that cancels is held to the tolerance of the largest)
        finite = np.abs(w[np.isfinite(w)])
        atol = rtol * (finite.max() if finite.size else 0.0)
        np.testing.assert_allclose(o, w, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp(dim):
    rng = np.random.default_rng(3)
    _both(lambda m, x: m.logcumsumexp(x, dim), rng.standard_normal((3, 6)) * 4)
    _both(lambda m, x: x.logcumsumexp(dim), rng.standard_normal((2, 5)))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_logcumsumexp_values_special(dtype):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 9)) * 5
    a[0, 2] = -INF
    a[1, 1] = a[1, 3] = INF
    a[2, 4] = NAN
    a[3, :3] = -INF
    want = torch.logcumsumexp(torch.tensor(a).to(getattr(torch, dtype)), 1)
    got = tg.logcumsumexp(tg.tensor(a).to(getattr(tg, dtype)), 1)
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    with pytest.raises(RuntimeError):
        torch.logcumsumexp(torch.tensor([1, 2]), 0)
    with pytest.raises(RuntimeError):
        tg.logcumsumexp(tg.tensor([1, 2]), 0)


def test_isin():
    cases = [([1.0, NAN, 2.0, 3.0], [NAN, 2.0]), ([[1, 2], [3, 4]], [4, 1, 9]), ([1, 2, 3], []), ([1.5, 2.0], [2])]
    for e, t in cases:
        for invert in (False, True):
            want = torch.isin(torch.tensor(e), torch.tensor(t), invert=invert)
            got = tg.isin(tg.tensor(e), tg.tensor(t), invert=invert)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(tg.isin(tg.tensor([1, 2, 3]), 2).numpy(), torch.isin(torch.tensor([1, 2, 3]), 2).numpy())
    assert tg.isin(3, tg.tensor([1, 2, 3])).item() == torch.isin(3, torch.tensor([1, 2, 3])).item()


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False), ((3, 5), False),
                                        ((3, 3, 3), False), ((8, 2), True), ((2, 2, 2, 2), False)])
def test_fill_diagonal_(shape, wrap):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape)
    res = []
    for m in (torch, tg):
        x = m.tensor(a, requires_grad=True)
        y = (x * 2).fill_diagonal_(-7.0, wrap)
        g, = m.autograd.grad((y * y).sum(), x)
        res.append((_np(y), _np(g)))
        res[-1] += (y.grad_fn.name(),)
    assert res[1][2] == res[0][2]
    for w, o in zip(res[0][:2], res[1][:2]):
        np.testing.assert_array_equal(o, w)
    # a slice of a larger tensor: the writes reach its base
    for m in (torch, tg):
        base = m.zeros(4, 6)
        base[:, 1:5].fill_diagonal_(3.0, wrap)
        res.append(base.numpy())
    np.testing.assert_array_equal(res[3], res[2])


def test_fill_diagonal_errors():
    for m in (torch, tg):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            m.zeros(3, 3, requires_grad=True).fill_diagonal_(1.0)
    for shape in [(3,), (2, 3, 3)]:
        with pytest.raises(RuntimeError):
            torch.zeros(shape).fill_diagonal_(1.0)
        with pytest.raises(RuntimeError):
            tg.zeros(shape).fill_diagonal_(1.0)


@pytest.mark.parametrize("offset", [0, 2, -1])
def test_diagflat(offset):
    rng = np.random.default_rng(6)
    _both(lambda m, x: m.diagflat(x, offset) * 3.0, rng.standard_normal((2, 3)))
    _both(lambda m, x: m.diagflat(x, offset), rng.standard_normal((4,)))


@pytest.mark.parametrize("shapes", [[(4, 5), (5, 3)], [(5,), (5, 3), (3, 40)], [(4, 5), (5, 3), (3, 40), (40, 2)],
                                    [(5,), (5, 3), (3, 40), (40, 2), (2, 7), (7,)],
                                    [(2, 30), (30, 3), (3, 30), (30, 2), (2, 9)]])
def test_multi_dot(shapes):
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s) for s in shapes]
    # (the chain's order is torch's; a matrix product's last bits are the BLAS's)
    _both(lambda m, *xs: m.linalg.multi_dot(list(xs)), *arrays, rtol=1e-12)


def test_multi_dot_chooses_torch_order():
    rng = np.random.default_rng(8)
    shapes = [(4, 5), (5, 3), (3, 40), (40, 2)]
    a, b, c, d = [tg.tensor(rng.standard_normal(s)) for s in shapes]
    # torch's matrix_chain_order: a (b (c d)) is the cheapest here
    np.testing.assert_array_equal(tg.linalg.multi_dot([a, b, c, d]).numpy(), (a @ (b @ (c @ d))).numpy())


def test_entr():
    x = np.array([-2.0, -0.0, 0.0, 1e-300, 0.3, 1.0, 2.5, 1e300, INF, -INF, NAN])
    want = torch.special.entr(torch.tensor(x))
    got = tg.special.entr(tg.tensor(x))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    _both(lambda m, x: m.special.entr(x), np.array([0.2, 1.0, 3.5, 1e-5]))


def test_ldexp():
    rng = np.random.default_rng(9)
    e = rng.integers(-5, 6, (3, 4))
    for m_dtype in ("float64", "float32"):
        a = rng.standard_normal((3, 4))
        want = torch.ldexp(torch.tensor(a).to(getattr(torch, m_dtype)), torch.tensor(e))
        got = tg.ldexp(tg.tensor(a).to(getattr(tg, m_dtype)), tg.tensor(e))
        assert got.dtype.name == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    want = torch.ldexp(torch.tensor([1, 2]), torch.tensor([3, -2]))
    got = tg.ldexp(tg.tensor([1, 2]), tg.tensor([3, -2]))
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # (torch's derivative takes 2 ** other in the integers: 0 for a negative integer exponent,
    # where tracegrad's is 2.0 ** other; compared at exponents that are floats or not negative)
    _both(lambda m, x: m.ldexp(x, m.tensor(np.abs(e))), rng.standard_normal((3, 4)))
    _both(lambda m, x: m.ldexp(x, m.tensor(e.astype(np.float64))), rng.standard_normal((3, 4)))


def test_nanmedian_random():
    rng = np.random.default_rng(10)
    for _ in range(200):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 20)))
        a = rng.integers(0, 4, shape).astype(float)
        a[rng.random(shape) < 0.3] = NAN
        d = int(rng.integers(0, 2))
        keep = bool(rng.integers(0, 2))
        want = torch.nanmedian(torch.tensor(a), d, keep)
        got = tg.nanmedian(tg.tensor(a), d, keep)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy(), err_msg=f"{a.tolist()}")
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(tg.nanmedian(tg.tensor(a)).numpy(), torch.nanmedian(torch.tensor(a)).numpy())


def test_nanmedian_grad():
    a = np.array([[1.0, NAN, 3.0, 2.0], [NAN, NAN, NAN, NAN], [2.0, 2.0, NAN, 5.0]])
    _both(lambda m, x: m.nanmedian(x, 1).values * 2.0, a)
    _both(lambda m, x: m.nanmedian(x) * 2.0, np.array([[1.0, NAN, 3.0], [2.0, 2.0, 0.5]]))
    _both(lambda m, x: m.nanmedian(x, 0, keepdim=True).values, np.array([[1.0, NAN], [2.0, 2.0], [0.5, 3.0]]))


DERIV_NAMED = {
    "tanh": lambda m, x: x.tanh(),
    "sigmoid": lambda m, x: m.sigmoid(x),
    "softmax": lambda m, x: m.softmax(x, 0) * m.arange(1.0, 4.0, dtype=x.dtype),
    "log_softmax": lambda m, x: m.log_softmax(x, -1) * m.arange(1.0, 4.0, dtype=x.dtype),
    "tanh_twice": lambda m, x: m.tanh(m.tanh(x)),
}


@pytest.mark.parametrize("name", list(DERIV_NAMED))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_first_gradient_grad_fn_name(name, dtype):
    f = DERIV_NAMED[name]
    res = []
    for m in (torch, tg):
        x = m.tensor([0.3, -0.7, 1.2], dtype=getattr(m, dtype), requires_grad=True)
        g, = m.autograd.grad(f(m, x).sum(), x, create_graph=True)
        h, = m.autograd.grad((g * g).sum(), x)
        res.append((g.grad_fn.name(), _np(g), _np(h)))
    assert res[1][0] == res[0][0]
    tol = 1e-13 if dtype == "float64" else 1e-5
    for o, w in zip(res[1][1:], res[0][1:]):
        # (a second derivative that cancels is held to the tolerance of the largest)
        np.testing.assert_allclose(o, w, rtol=tol, atol=tol * np.abs(w).max())

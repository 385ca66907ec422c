"""torch functions and Tensor methods that were missing: frexp (a primitive, torch's derivative),
histogram, gradient, poisson, the random fills log_normal_, geometric_ and cauchy_ (and every
random fill of a bfloat16 tensor rounded to bfloat16), apply_/map_/map2_, the legacy x.new(...),
new_empty_strided, share_memory_/is_shared; against torch."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)


def _error(f):
    try:
        f()
    except Exception as e:       # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def same(got, want, **kw):
    got = got.detach().numpy() if isinstance(got, tg.Tensor) else got
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    if kw:
        np.testing.assert_allclose(got, want, **kw)
    else:
        np.testing.assert_array_equal(got, want)


# -- frexp ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_frexp_matches_torch(dtype):
    a = np.concatenate([R.standard_normal(20) * 10.0 ** R.integers(-30, 30, 20),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.5, 2.0, -4.0, 3e-310, 1e-40]])
    t = torch.tensor(a).to(getattr(torch, dtype))
    g = tg.tensor(t.float().numpy() if dtype == "bfloat16" else t.numpy()).to(getattr(tg, dtype))
    want, got = torch.frexp(t), tg.frexp(g)
    same(got.mantissa.float(), want.mantissa.float())
    same(got.exponent, want.exponent)
    m2, e2 = g.frexp()
    same(m2.float(), want.mantissa.float())
    assert "torch.return_types.frexp(" in repr(got)


def test_frexp_gradient_matches_torch_and_gradchecks():
    a = R.standard_normal((3, 4)) * 7
    res = {}
    for L in (torch, tg):
        x = L.tensor(a, requires_grad=True)
        m, e = L.frexp(x)
        (m * m.detach().cos()).sum().backward()
        res[L] = (x.grad.numpy(), type(m.grad_fn).__name__, e.requires_grad)
    np.testing.assert_allclose(res[tg][0], res[torch][0], rtol=1e-15)
    assert res[tg][1:] == res[torch][1:]
    x = tg.tensor(a, requires_grad=True)
    assert tg.autograd.gradcheck(lambda x: tg.frexp(x).mantissa, (x,))
    assert tg.autograd.gradgradcheck(lambda x: tg.frexp(x).mantissa * x, (x,))


def test_frexp_refuses_integers_and_compiles():
    assert _error(lambda: tg.frexp(tg.tensor([1]))) == _error(lambda: torch.frexp(torch.tensor([1])))
    f = lambda x: tg.frexp(x * 3).mantissa.sum() + tg.frexp(x).exponent.sum()   # noqa: E731
    c = tg.compile(f)
    x = tg.tensor(R.standard_normal(7))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert float(c(x)) == float(f(x))


# -- histogram ------------------------------------------------------------------------------------------

HIST = [
    (lambda m, x: m.histogram(x, bins=4), [1., 2, 1, 4]),
    (lambda m, x: m.histogram(x, bins=m.tensor([0., 1.5, 5], dtype=x.dtype), weight=m.tensor([1., 2, 3, 4], dtype=x.dtype),
                                     density=True),
     [1., 2, 1, 4]),
    (lambda m, x: m.histogram(x, bins=3, range=(0., 3.)), [1., 2, 1, 4, -1, 3]),
    (lambda m, x: m.histogram(x, bins=3), [1., 1, 1]),
    (lambda m, x: m.histogram(x, bins=2), []),
    (lambda m, x: m.histogram(x, bins=2, range=(1., 1.)), [1., 1.]),
    (lambda m, x: m.histogram(x, bins=17, density=True), "normal"),
    (lambda m, x: m.histogram(x, bins=7, range=(-1, 0.5), weight=x * x), "normal"),
    (lambda m, x: x.histogram(5), "normal"),
    (lambda m, x: m.histogram(x.reshape(10, -1), bins=m.tensor([-3., -1, 0, 0.1, 2], dtype=x.dtype)), "normal"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", range(len(HIST)))
def test_histogram_matches_torch(case, dtype):
    f, data = HIST[case]
    a = R.standard_normal(1000) if data == "normal" else np.array(data)
    want = f(torch, torch.tensor(a, dtype=getattr(torch, dtype)))
    got = f(tg, tg.tensor(a, dtype=getattr(tg, dtype)))
    same(got.bin_edges, want.bin_edges)
    same(got.hist, want.hist, rtol=1e-6 if dtype == "float32" else 1e-14)


HIST_ERRORS = [
    lambda m: m.histogram(m.ones(3), bins=0),
    lambda m: m.histogram(m.ones(3), bins=2, range=(2., 1.)),
    lambda m: m.histogram(m.tensor([1., float("inf")]), bins=2),
    lambda m: m.histogram(m.tensor([1., float("nan")]), bins=2),
    lambda m: m.histogram(m.ones(3), bins=m.ones(2, 2)),
    lambda m: m.histogram(m.ones(3, dtype=m.int64), bins=2),
    lambda m: m.histogram(m.ones(3), bins=2, weight=m.ones(2)),
    lambda m: m.histogram(m.ones(3, dtype=m.float64), bins=m.tensor([0., 1.])),
]


@pytest.mark.parametrize("case", range(len(HIST_ERRORS)))
def test_histogram_errors_as_torch(case):
    want = _error(lambda: HIST_ERRORS[case](torch))
    assert want is not None and _error(lambda: HIST_ERRORS[case](tg)) == want


# -- gradient -------------------------------------------------------------------------------------------

GRADIENT = [dict(), dict(spacing=2.), dict(dim=1, edge_order=2), dict(spacing=[0.5, 2.], dim=[0, 2]),
            dict(spacing=(np.array([0., 1, 1.5, 3.5]),), dim=0),
            dict(spacing=(np.array([0., 1, 1.5, 3.5, 4, 7]),), dim=2, edge_order=2), dict(dim=-1),
            dict(spacing=[1., 2., 3.]), dict(spacing=(np.array([0., 1, 3, 6]), np.array([1., 2, 3, 5, 8]),
                                                       np.array([0., .5, 1, 2, 2.5, 4])), edge_order=2)]


@pytest.mark.parametrize("case", range(len(GRADIENT)))
def test_gradient_matches_torch_values_and_derivative(case):
    a = R.standard_normal((4, 5, 6))
    res = {}
    for L in (torch, tg):
        kw = {k: (tuple(L.tensor(s) if isinstance(s, np.ndarray) else s for s in v) if isinstance(v, tuple) else v)
              for k, v in GRADIENT[case].items()}
        x = L.tensor(a, requires_grad=True)
        outs = L.gradient(x, **kw)
        sum(o.sin().sum() for o in outs).backward()
        res[L] = ([o.detach().numpy() for o in outs], x.grad.numpy())
    assert len(res[tg][0]) == len(res[torch][0])
    for got, want in zip(res[tg][0], res[torch][0]):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(res[tg][1], res[torch][1], rtol=1e-13, atol=1e-13)


def test_gradient_of_integers_and_its_errors_as_torch():
    for f in (lambda m: m.gradient(m.arange(6).reshape(2, 3)), lambda m: m.gradient(m.arange(5), edge_order=2)):
        for got, want in zip(f(tg), f(torch)):
            same(got, want)
    for f in (lambda m: m.gradient(m.ones(3), edge_order=3), lambda m: m.gradient(m.ones(2), edge_order=2)):
        want = _error(lambda: f(torch))
        assert want is not None and _error(lambda: f(tg)) == want


# -- random draws ---------------------------------------------------------------------------------------

def test_poisson_draws_in_the_dtype_with_torchs_zero_gradient():
    tg.manual_seed(0)
    rates = tg.tensor([0.5, 3.0, 40.0]).expand(20000, 3).contiguous().requires_grad_()
    x = tg.poisson(rates)
    assert x.dtype is tg.float32 and type(x.grad_fn).__name__ == "PoissonBackward0"
    d = x.detach().numpy()
    assert (d == np.round(d)).all() and (d >= 0).all()
    np.testing.assert_allclose(d.mean(0), [0.5, 3.0, 40.0], rtol=0.05)
    np.testing.assert_allclose(d.var(0), [0.5, 3.0, 40.0], rtol=0.08)
    x.sum().backward()
    assert (rates.grad.numpy() == 0).all()
    g1 = tg.Generator().manual_seed(3)
    g2 = tg.Generator().manual_seed(3)
    same(tg.poisson(tg.full((50,), 2.0), generator=g1), tg.poisson(tg.full((50,), 2.0), generator=g2).numpy())
    for f in (lambda m: m.poisson(m.tensor([1, 2])), lambda m: m.poisson(m.tensor([-1.]))):
        want = _error(lambda: f(torch))
        assert want is not None and _error(lambda: f(tg)) == want


FILL_ERRORS = [
    lambda m: m.zeros(3).log_normal_(1, 0), lambda m: m.zeros(3).log_normal_(1, -1.5),
    lambda m: m.zeros(3).geometric_(0), lambda m: m.zeros(3).geometric_(1), lambda m: m.zeros(3).geometric_(1.5),
    lambda m: m.zeros(3).cauchy_(0, 0), lambda m: m.zeros(3).cauchy_(0, -1),
    lambda m: m.zeros(3, dtype=m.int64).log_normal_(), lambda m: m.zeros(3, dtype=m.int64).cauchy_(),
    lambda m: m.zeros(3, dtype=m.bool).geometric_(0.5), lambda m: m.zeros(3, requires_grad=True).cauchy_(),
]


@pytest.mark.parametrize("case", range(len(FILL_ERRORS)))
def test_random_fill_errors_as_torch(case):
    want = _error(lambda: FILL_ERRORS[case](torch))
    assert want is not None and _error(lambda: FILL_ERRORS[case](tg)) == want


def test_random_fills_draw_their_distributions_with_torchs_nodes():
    tg.manual_seed(1)
    n = 200000
    x = tg.zeros(n, dtype=tg.float64).log_normal_(0.5, 0.25).numpy()
    assert abs(np.log(x).mean() - 0.5) < 0.005 and abs(np.log(x).std() - 0.25) < 0.005
    g = tg.zeros(n, dtype=tg.int32).geometric_(0.2)
    assert g.dtype is tg.int32
    g = g.numpy()
    assert g.min() >= 1 and abs(g.mean() - 5.0) < 0.1
    c = tg.zeros(n, dtype=tg.float64).cauchy_(2.0, 3.0).numpy()
    assert abs(np.median(c) - 2.0) < 0.05
    assert abs(np.quantile(c, 0.75) - np.quantile(c, 0.25) - 6.0) < 0.15
    for name, args in (("log_normal_", ()), ("geometric_", (0.3,)), ("cauchy_", ())):
        want = type(getattr(torch.zeros(3, requires_grad=True).clone(), name)(*args).grad_fn).__name__
        y = getattr(tg.zeros(3, requires_grad=True).clone(), name)(*args)
        assert type(y.grad_fn).__name__ == want
        y.sum().backward()


@pytest.mark.parametrize("fill", ["uniform_()", "normal_()", "cauchy_()", "log_normal_()", "exponential_()",
                                  "geometric_(0.1)", "bernoulli_(0.3)"])
def test_random_fills_of_bfloat16_hold_bfloat16_values(fill):
    """A bfloat16 tensor's storage is float32's: drawn values are rounded to bfloat16, as a
    bfloat16 tensor holds (they were written unrounded)."""
    x = eval("tg.zeros(2000, dtype=tg.bfloat16)." + fill)
    v = x.float().numpy()
    np.testing.assert_array_equal(torch.tensor(v).bfloat16().float().numpy(), v)


# -- Python elementwise, the legacy constructor, shared memory ------------------------------------------

def test_apply_map_and_map2_as_torch():
    for f in (lambda m: m.tensor([1., 2, 3]).apply_(lambda v: v * 2),
              lambda m: m.tensor([1., 2, 3]).map_(m.tensor([10., 20, 30]), lambda a, b: a + b),
              lambda m: m.tensor([[1., 2, 3]]).map_(m.tensor([[10.]]), lambda a, b: a - b),
              lambda m: m.tensor([1., 2, 3]).map2_(m.tensor([2.]), m.tensor([1., 0, 1]), lambda a, b, c: a + b * c),
              lambda m: m.tensor([1, 2]).apply_(lambda v: v * 1.5),
              lambda m: m.tensor([True, False]).apply_(lambda v: not v),
              lambda m: m.zeros(0).apply_(lambda v: v + 1)):
        same(f(tg), f(torch))
    y = {}
    for m in (torch, tg):
        y[m] = m.zeros(2, 3)
        y[m][0].apply_(lambda v: 7)
    same(y[tg], y[torch])
    for f in (lambda m: m.tensor([1.], requires_grad=True).apply_(lambda v: v),
              lambda m: m.tensor([1.], requires_grad=True).clone().map_(m.ones(1), lambda a, b: a)):
        want = _error(lambda: f(torch))
        assert want is not None and _error(lambda: f(tg)) == want


def test_legacy_new_as_torch():
    for L in (torch, tg):
        x = L.tensor([1., 2, 3])
        assert tuple(x.new().shape) == (0,) and tuple(x.new(2, 3).shape) == (2, 3)
        assert tuple(x.new(L.Size([2, 3])).shape) == (2, 3) and x.new(2, 3).dtype == x.dtype
        assert x.new([1, 2]).tolist() == [1., 2.] and x.new((2, 3)).tolist() == [2., 3.]
        assert L.tensor([1, 2]).new([1.7]).tolist() == [1]
        t = L.tensor([5., 6])
        assert x.new(t).data_ptr() == t.data_ptr()
    want = _error(lambda: torch.tensor([1.]).new(torch.tensor([1, 2])))
    assert want is not None and _error(lambda: tg.tensor([1.]).new(tg.tensor([1, 2]))) == want
    for L in (torch, tg):
        e = L.tensor([1.]).new_empty_strided((2, 3), (1, 2))
        assert e.stride() == (1, 2) and e.dtype == L.float32


def test_share_memory_and_is_shared_as_torch():
    for L in (torch, tg):
        x = L.tensor([1., 2, 3])
        assert not x.is_shared()
        assert x.share_memory_() is x and x.is_shared() and x[1:].is_shared()
        assert not x.clone().is_shared()

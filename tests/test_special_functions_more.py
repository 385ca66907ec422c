"""lgamma, digamma, polygamma, erfinv and mvlgamma (and their torch.special names, Tensor
methods and in-place forms) against torch: values over wide grids and at the special points,
dtypes, derivatives (float64 gradcheck and gradgradcheck, and torch's gradients), grad_fn
names, torch's errors, and compiled against eager.

Tolerance of a value compared with torch: K ulps of the dtype times (|f(x)| + |x f'(x)|), the
second term the error a few-ulp change of x makes (the function's conditioning: large near the
zeros of lgamma and digamma, at the poles and toward erfinv's +-1). Measured worst cases over the
grids below, in those units: lgamma 0.7 (float32) and 2.6 (float64), digamma 2.5 (float32: torch's
float32 kernel is up to 4 float32 ulps off, e.g. digamma(0.5)) and 1.3, polygamma 1.7 and 3.5,
erfinv 0.5 and 0.6; K is 6. torch's float64 trigamma (polygamma(1, .)) sums only three terms of
its asymptotic series: up to 5e-10 relative off (polygamma(1, 0.5) = pi^2/2 + 1.5e-9), so that
comparison allows 1e-9 relative and the exact values below pin tracegrad's to a few ulps.
"""
import math

import numpy as np
import pytest
import torch

import tracegrad as tg
from conftest import to_torch

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

K = 6
EULER = 0.57721566490153286061
ZETA3 = 1.2020569031595942854

SPECIAL = [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -3.0, -2.5, -0.5, 0.5, 1.5, float("inf"), float("-inf"), float("nan"),
           1e-30, -1e-30, 1e-45, 1e-300, 1e30, -1e30, 3.4e38, 1e300, -1e300, 2.0 ** 23 + 0.5, -(2.0 ** 23) - 0.5,
           -100.3, 1e-8, 1.4616321449683622, -2.457024738220800]
ERFINV_SPECIAL = [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, float("inf"), float("-inf"), float("nan"), 0.5, -0.5, 0.7,
                  0.7000001, 1 - 1e-7, -1 + 1e-7, 1 - 2.0 ** -53, -1 + 2.0 ** -53, 1e-30, -1e-45, 1e-310, 0.99]


def _grid(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(0, 3, 600), rng.uniform(3, 40, 300), 10 ** rng.uniform(-30, 30, 300),
                           rng.uniform(-10, 0, 600), -10 ** rng.uniform(-10, 6, 200)])


def _erfinv_grid(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(-1, 1, 600), 1 - 10 ** rng.uniform(-16, -1, 200),
                           -1 + 10 ** rng.uniform(-16, -1, 200), 10 ** rng.uniform(-300, -1, 100)])


# name: (torch's function, tracegrad's, f' in torch float64, relative allowance beyond K ulps in float64)
FUNCS = {
    "lgamma": (torch.lgamma, tg.lgamma, torch.digamma, 0),
    "digamma": (torch.digamma, tg.digamma, lambda x: torch.polygamma(1, x), 0),
    "polygamma0": (lambda x: torch.polygamma(0, x), lambda x: tg.polygamma(0, x),
                   lambda x: torch.polygamma(1, x), 0),
    "polygamma1": (lambda x: torch.polygamma(1, x), lambda x: tg.polygamma(1, x),
                   lambda x: torch.polygamma(2, x), 1e-9),
    "polygamma2": (lambda x: torch.polygamma(2, x), lambda x: tg.polygamma(2, x),
                   lambda x: torch.polygamma(3, x), 0),
    "polygamma3": (lambda x: torch.polygamma(3, x), lambda x: tg.polygamma(3, x),
                   lambda x: torch.polygamma(4, x), 0),
    "polygamma6": (lambda x: torch.polygamma(6, x), lambda x: tg.polygamma(6, x),
                   lambda x: torch.polygamma(7, x), 0),
    "erfinv": (torch.erfinv, tg.erfinv, lambda y: math.sqrt(math.pi) / 2 * torch.exp(torch.erfinv(y) ** 2), 0),
}


def _compare(name, values, dtype):
    tf, gf, dtf, extra = FUNCS[name]
    tdt = getattr(torch, dtype)
    x = torch.tensor(values, dtype=tdt)
    want = tf(x)
    got = gf(tg.tensor(x.numpy()))
    assert str(got.dtype) == str(want.dtype)
    a = torch.from_numpy(np.array(got._data)).double()
    b = want.double()
    same = (a == b) | (a.isnan() & b.isnan())
    # the special values exactly (NaN where torch's is NaN, the infinities and their signs)
    nonfinite = ~torch.isfinite(b) | ~torch.isfinite(a)
    bad = nonfinite & ~same
    assert not bad.any(), [(float(v), float(p), float(q)) for v, p, q in zip(x[bad], a[bad], b[bad])]
    xd = x.double()
    eps = torch.finfo(tdt).eps
    scale = b.abs() + (xd * dtf(xd)).abs().nan_to_num(nan=0.0, posinf=1e300)
    tol = K * eps * scale + (extra if dtype == "float64" else 0) * b.abs() + torch.finfo(tdt).tiny
    off = ~same & ((a - b).abs() > tol)
    assert not off.any(), [(float(v), float(p), float(q)) for v, p, q in zip(x[off], a[off], b[off])][:10]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [n for n in FUNCS if n != "erfinv"])
def test_gamma_family_values_match_torch(name, dtype):
    _compare(name, list(_grid()) + SPECIAL, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erfinv_values_match_torch(dtype):
    _compare("erfinv", list(_erfinv_grid()) + ERFINV_SPECIAL, dtype)


def test_special_points_are_torchs_exactly():
    """Poles, infinities, signed zeros and NaN: torch's values bit for bit (including torch's
    conventions: digamma(-0.0) = +inf, digamma at the negative integers NaN, polygamma(n >= 2, inf)
    NaN, and trigamma's large finite value at a negative integer)."""
    vals = [0.0, -0.0, -1.0, -2.0, -7.0, float("inf"), float("-inf"), float("nan"), -1e30]
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(vals, dtype=dtype)
        g = tg.tensor(x.numpy())
        for tf, gf in [(torch.lgamma, tg.lgamma), (torch.digamma, tg.digamma)] + \
                [(lambda t, n=n: torch.polygamma(n, t), lambda t, n=n: tg.polygamma(n, t)) for n in (1, 2, 3, 4)]:
            want = tf(x).numpy()
            got = np.array(gf(g)._data)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
            np.testing.assert_array_equal(got[:-1], want[:-1])
            # -1e30: an integer; trigamma's reflection of it in torch's precision
            np.testing.assert_allclose(got[-1:], want[-1:], rtol=1e-6)
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 1.5, -1.5, float("nan")])
    want = torch.erfinv(x).numpy()
    got = np.array(tg.erfinv(tg.tensor(x.numpy()))._data)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got[:4]), np.signbit(want[:4]))


def test_exact_values_to_a_few_ulps():
    """Values known in closed form (not torch's, which is 5e-10 off for trigamma in float64)."""
    pi = math.pi
    cases = [
        (tg.lgamma, [0.5, 1.0, 2.0, 3.0, 11.0, 171.5], [math.log(math.sqrt(pi)), 0.0, 0.0, math.log(2.0),
                                                         math.log(3628800.0), math.lgamma(171.5)]),
        (tg.digamma, [1.0, 0.5, 2.0], [-EULER, -EULER - 2 * math.log(2.0), 1 - EULER]),
        (lambda x: tg.polygamma(1, x), [1.0, 0.5, 2.0, 3.0, -0.5],
         [pi ** 2 / 6, pi ** 2 / 2, pi ** 2 / 6 - 1, pi ** 2 / 6 - 1.25, pi ** 2 / 2 + 4]),
        (lambda x: tg.polygamma(2, x), [1.0, 0.5], [-2 * ZETA3, -14 * ZETA3]),
        (lambda x: tg.polygamma(3, x), [1.0], [pi ** 4 / 15]),
        (tg.erfinv, [math.erf(0.3), math.erf(1.7), -math.erf(0.9)], [0.3, 1.7, -0.9]),
    ]
    for f, xs, want in cases:
        got = f(tg.tensor(xs, dtype=tg.float64)).tolist()
        np.testing.assert_allclose(got, want, rtol=4e-16 * 8, atol=1e-300)
    # erfinv inverts erf in the tails too (1 - |y| is exact: no loss toward +-1)
    y = 1 - 10.0 ** -np.arange(1, 16)
    x = tg.erfinv(tg.tensor(y)).numpy()
    np.testing.assert_allclose([math.erfc(v) for v in x], 1 - y, rtol=1e-13)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_dtypes_match_torch(dtype):
    """float16 and bfloat16 compute in float32 and round once, as torch's opmath: torch's value
    or its neighbour (torch's float32 result can lie on the other side of a rounding tie)."""
    vals = np.concatenate([np.linspace(-4.9, 6.1, 201), [0.0, -0.0, -1.0, 1.0, 2.0, np.inf, -np.inf, np.nan]])
    ys = np.concatenate([np.linspace(-0.999, 0.999, 201), [1.0, -1.0, 0.0, -0.0, np.nan, 2.0]])
    tdt, gdt = getattr(torch, dtype), getattr(tg, dtype)
    for tf, gf, v in [(torch.lgamma, tg.lgamma, vals), (torch.digamma, tg.digamma, vals),
                      (lambda t: torch.polygamma(1, t), lambda t: tg.polygamma(1, t), vals),
                      (lambda t: torch.polygamma(2, t), lambda t: tg.polygamma(2, t), vals),
                      (torch.erfinv, tg.erfinv, ys)]:
        x = torch.tensor(v, dtype=torch.float32).to(tdt)
        want = tf(x)
        got = gf(tg.tensor(x.float().numpy(), dtype=gdt))
        assert str(got.dtype) == str(want.dtype)
        a, b = np.array(got.float()._data, np.float64), want.double().numpy()
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        fin = np.isfinite(b)
        np.testing.assert_array_equal(a[~fin & ~np.isnan(b)], b[~fin & ~np.isnan(b)])
        step = np.spacing(np.abs(b[fin]).astype(np.float16 if dtype == "float16" else np.float32))
        if dtype == "bfloat16":
            step = step * 2.0 ** 16
        assert np.all(np.abs(a[fin] - b[fin]) <= 1.01 * step.astype(np.float64)), (dtype, tf)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8", "bool"])
def test_integer_inputs_promote_to_the_default_float_dtype(dtype):
    data = [0, 1, 2, 3, 7] if dtype != "bool" else [True, False]
    x = torch.tensor(data, dtype=getattr(torch, dtype))
    g = tg.tensor(data, dtype=getattr(tg, dtype))
    for tf, gf in [(torch.lgamma, tg.lgamma), (torch.digamma, tg.digamma), (torch.erfinv, tg.erfinv),
                   (lambda t: torch.polygamma(2, t), lambda t: tg.polygamma(2, t)),
                   (lambda t: torch.special.multigammaln(t, 2) if t.dtype != torch.bool else None,
                    lambda t: tg.special.multigammaln(t, 2) if t.dtype is not tg.bool else None)]:
        want = tf(x)
        if want is None:
            continue
        got = gf(g)
        assert str(got.dtype) == str(want.dtype) == "torch.float32"
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, equal_nan=True)
    tg.set_default_dtype(tg.float64)
    torch.set_default_dtype(torch.float64)
    assert tg.lgamma(g).dtype is tg.float64 and torch.lgamma(x).dtype == torch.float64


def test_torch_special_names_and_methods():
    x = tg.tensor([0.3, 1.7, 4.2], dtype=tg.float64, requires_grad=True)
    xt = to_torch(x)
    pairs = [
        (tg.special.gammaln(x), torch.special.gammaln(xt)), (tg.special.digamma(x), torch.special.digamma(xt)),
        (tg.special.psi(x), torch.special.psi(xt)), (tg.special.polygamma(2, x), torch.special.polygamma(2, xt)),
        (tg.special.erfinv(x / 5), torch.special.erfinv(xt / 5)),
        (tg.special.multigammaln(x + 2, 3), torch.special.multigammaln(xt + 2, 3)),
        (x.lgamma(), xt.lgamma()), (x.digamma(), xt.digamma()), (x.polygamma(3), xt.polygamma(3)),
        (x.polygamma(0), xt.polygamma(0)), ((x / 5).erfinv(), (xt / 5).erfinv()),
        ((x + 2).mvlgamma(3), (xt + 2).mvlgamma(3)), (tg.polygamma(tg.tensor(1), x), torch.polygamma(torch.tensor(1), xt)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9)
        assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__


def test_in_place_forms():
    """lgamma_, digamma_, erfinv_, polygamma_(n), mvlgamma_(p): values, grad_fn names (polygamma_ is
    torch's PolygammaBackward1), gradients through them, on a view too, and torch's refusal of a
    float result into an integer tensor."""
    base = np.array([0.3, 1.7, 4.2, 0.9])
    for name, args, arg_fn in [("lgamma_", (), None), ("digamma_", (), None), ("erfinv_", (), lambda t: t / 5),
                               ("polygamma_", (2,), None), ("mvlgamma_", (2,), lambda t: t + 2)]:
        outs = []
        for m in (torch, tg):
            x = m.tensor(base, requires_grad=True)
            y = (arg_fn or (lambda t: t * 1))(x)
            r = getattr(y, name)(*args)
            assert r is y
            names = [type(y.grad_fn).__name__]
            y.sum().backward()
            # on a view: the base's grad_fn is CopySlices and its gradient flows through
            z = x * 1
            v = z[1:3]
            getattr(v, name)(*args) if name not in ("erfinv_",) else getattr(v.mul_(0.2), name)()
            names += [type(z.grad_fn).__name__]
            x.grad = None
            z.sum().backward()
            outs.append((y.detach().numpy().copy(), names, x.grad.numpy().copy()))
        (yt, nt, gt), (yg, ng, gg) = outs
        np.testing.assert_allclose(yg, yt, rtol=1e-12)
        assert ng == nt, (name, ng, nt)
        # digamma_'s derivative is torch's trigamma, 5e-10 off (the module docstring)
        np.testing.assert_allclose(gg, gt, rtol=2e-9 if name == "digamma_" else 1e-12)
    for name, args in [("lgamma_", ()), ("digamma_", ()), ("erfinv_", ()), ("polygamma_", (1,))]:
        with pytest.raises(RuntimeError) as et:
            getattr(torch.tensor([1, 2]), name)(*args)
        with pytest.raises(RuntimeError) as eg:
            getattr(tg.tensor([1, 2]), name)(*args)
        assert str(eg.value) == str(et.value)


def test_saved_input_rules_as_torch():
    """ErfinvBackward0 saves the input (an in-place change of the result leaves backward valid);
    LgammaBackward0 too (an in-place change of the input is caught)."""
    for m in (torch, tg):
        x = m.tensor([0.3, -0.5], requires_grad=True)
        y = (x * 1).erfinv()
        y.mul_(2)
        y.sum().backward()
        assert x.grad is not None
        b = x * 1
        c = b.lgamma()
        b.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            c.sum().backward()


FNS = [
    ("lgamma", lambda m, x: m.lgamma(x)),
    ("digamma", lambda m, x: m.digamma(x)),
    ("polygamma0", lambda m, x: m.polygamma(0, x)),
    ("polygamma1", lambda m, x: m.polygamma(1, x)),
    ("polygamma2", lambda m, x: m.polygamma(2, x)),
    ("polygamma5", lambda m, x: m.polygamma(5, x)),
    ("erfinv", lambda m, x: m.erfinv(x / 8)),
    ("mvlgamma", lambda m, x: m.mvlgamma(x * x + 2.5, 4)),
]
# away from the poles (gradcheck's finite differences need smoothness), negative values included
POINTS = [0.37, 1.46, 2.9, -0.6, -1.3, -2.6, 7.5]


@pytest.mark.parametrize("name,fn", FNS, ids=[n for n, _ in FNS])
def test_gradcheck_and_gradgradcheck(name, fn):
    x = tg.tensor(POINTS, dtype=tg.float64, requires_grad=True)
    f = (lambda t: fn(tg, t))
    assert tg.autograd.gradcheck(f, (x,))
    assert tg.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize("name,fn", FNS, ids=[n for n, _ in FNS])
def test_gradients_and_grad_fn_match_torch(name, fn):
    vals = POINTS + [0.0, -1.0, -2.0, float("inf"), float("nan")]
    rels = []
    for m in (torch, tg):
        x = m.tensor(vals, dtype=m.float64, requires_grad=True)
        y = fn(m, x)
        g, = m.autograd.grad(y, x, m.ones_like(y) * m.tensor(np.linspace(0.5, 1.5, len(vals))), create_graph=True)
        gg, = m.autograd.grad(g.sum(), x)
        rels.append((type(y.grad_fn).__name__, type(g.grad_fn).__name__,
                     g.detach().numpy(), gg.numpy()))
    (nt, ngt, gt, ggt), (ng, ngg, g, gg) = rels
    assert (ng, ngg) == (nt, ngt)
    # torch's trigamma (the derivative of digamma) is 5e-10 off: see the module docstring
    tol = 2e-9 if name in ("digamma", "polygamma0", "lgamma", "polygamma1", "mvlgamma") else 1e-12
    np.testing.assert_allclose(g, gt, rtol=tol, equal_nan=True)
    np.testing.assert_allclose(gg, ggt, rtol=tol, equal_nan=True)


@pytest.mark.parametrize("name,fn", FNS, ids=[n for n, _ in FNS])
def test_compiled_equals_eager(name, fn):
    """Forward and gradients of a compiled call: eager tracegrad's bit for bit (the same kernels),
    on the traced inputs and on new values through the cached program."""
    compiled = tg.compile(lambda t: fn(tg, t))
    for k, vals in enumerate([POINTS + [0.0, -1.0, float("inf"), float("nan")],
                              [v * 1.1 - 0.05 for v in POINTS] + [1e-30, -3.0, -1e30, 3e38]]):
        for dtype in (tg.float32, tg.float64):
            outs = []
            for f in (lambda t: fn(tg, t), compiled):
                x = tg.tensor(vals, dtype=dtype, requires_grad=True)
                y = f(x)
                g, = tg.autograd.grad(y.sum(), x)
                outs.append((y.detach().numpy(), g.numpy()))
            (ye, ge), (yc, gc) = outs
            np.testing.assert_array_equal(yc, ye, err_msg=f"{name} #{k}")
            np.testing.assert_array_equal(gc, ge, err_msg=f"{name} #{k} grad")


def test_errors_as_torch():
    x = torch.tensor([0.3, 0.5])
    g = tg.tensor([0.3, 0.5])
    cases = [
        lambda m, t: m.polygamma(-1, t), lambda m, t: t.polygamma(-2), lambda m, t: m.special.polygamma(-3, t),
        lambda m, t: t.polygamma_(-1), lambda m, t: m.polygamma(1.5, t), lambda m, t: m.polygamma(True, t),
        lambda m, t: m.polygamma(1, 2.0), lambda m, t: m.polygamma(t, 1),
        lambda m, t: m.lgamma(3.0), lambda m, t: m.erfinv([0.5]), lambda m, t: m.digamma(None),
        lambda m, t: m.mvlgamma(t, 0), lambda m, t: t.mvlgamma(-1), lambda m, t: m.special.multigammaln(t, 0),
        lambda m, t: m.mvlgamma(t, 1.5), lambda m, t: m.mvlgamma(t > 0, 1),
    ]
    for k, case in enumerate(cases):
        with pytest.raises(Exception) as et:
            case(torch, x)
        with pytest.raises(Exception) as eg:
            case(tg, g)
        assert type(eg.value) is type(et.value), (k, eg.value, et.value)
        assert str(eg.value) == str(et.value), (k, str(eg.value), str(et.value))


def test_mvlgamma_below_its_domain_is_torchs_value_not_an_error():
    """torch checks no domain for mvlgamma (x <= (p - 1) / 2 gives lgamma's values: inf at the
    poles, finite between them); neither does tracegrad."""
    vals = [0.5, 1.0, 0.25, -0.75, 3.0, float("nan")]
    for p in (1, 2, 3, 5):
        want = torch.mvlgamma(torch.tensor(vals, dtype=torch.float64), p)
        got = tg.mvlgamma(tg.tensor(vals, dtype=tg.float64), p)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13, equal_nan=True)


def test_layouts_and_shapes():
    """Strided, expanded and 0-d inputs, and empty tensors: the same values as the contiguous."""
    a = np.linspace(-3.3, 5.1, 24).reshape(4, 6)
    for gf, tf in [(tg.lgamma, torch.lgamma), (tg.digamma, torch.digamma), (lambda t: tg.polygamma(2, t),
                                                                           lambda t: torch.polygamma(2, t)),
                   (lambda t: tg.erfinv(t / 6), lambda t: torch.erfinv(t / 6))]:
        x, xt = tg.tensor(a), torch.tensor(a)
        for gv, tv in [(x.t(), xt.t()), (x[:, ::2], xt[:, ::2]), (x[:1].expand(3, 6), xt[:1].expand(3, 6)),
                       (x[1, 2], xt[1, 2]), (x[:0], xt[:0])]:
            got, want = gf(gv), tf(tv)
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13, atol=1e-300)
        np.testing.assert_array_equal(x.numpy(), a)


def test_large_n_and_large_arguments():
    """polygamma of a high order (n! near and past float64's range), huge and tiny x."""
    xs = [0.5, 1.0, 3.5, 40.0, 1e5, -0.5, -3.25, 1e-3]
    for n in (10, 25, 60, 120, 171, 200):
        want = torch.polygamma(n, torch.tensor(xs, dtype=torch.float64)).numpy()
        got = tg.polygamma(n, tg.tensor(xs, dtype=tg.float64)).numpy()
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-12 * n, atol=0)
        np.testing.assert_array_equal(got[~fin], want[~fin])


def test_compiled_order_and_dimension_are_not_frozen():
    """polygamma's n and mvlgamma's p reach the compiled program as parameters of the traced call:
    a new n (an argument, or a global read in the function) gives the new value, not the traced one."""
    x = tg.tensor([0.2, 1.5, 2.5, -0.7])
    f = tg.compile(lambda t, n: tg.polygamma(n, t))
    g = tg.compile(lambda t, p: tg.mvlgamma(t, p))
    for n in (1, 2, 0, 4, 1):
        np.testing.assert_array_equal(f(x, n).numpy(), tg.polygamma(n, x).numpy())
    for p in (1, 3, 2):
        np.testing.assert_array_equal(g(x + 3, p).numpy(), tg.mvlgamma(x + 3, p).numpy())
    order = [1]
    h = tg.compile(lambda t: t.polygamma(order[0]))
    for n in (1, 3, 2):
        order[0] = n
        np.testing.assert_array_equal(h(x).numpy(), tg.polygamma(n, x).numpy())
    # an in-place form inside a compiled function
    k = tg.compile(lambda t: (t * 1).lgamma_().sum() + (t * 1).polygamma_(2).sum())
    np.testing.assert_array_equal(k(x).numpy(), (tg.lgamma(x).sum() + tg.polygamma(2, x).sum()).numpy())


def test_high_order_below_minus_100():
    """Below -100 the reflection formula replaces torch's sum of -x terms; where its cotangent
    polynomial overflows (n >= 170) the sum is taken as torch's is: torch's value, not inf * 0 = NaN."""
    xs = [-150.5, -200.25, -1000.75, -0.5, 2.5]
    for n in (2, 5, 170, 171, 200):
        want = torch.polygamma(n, torch.tensor(xs, dtype=torch.float64)).numpy()
        got = tg.polygamma(n, tg.tensor(xs, dtype=tg.float64)).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        fin = np.isfinite(want)
        np.testing.assert_array_equal(got[~fin], want[~fin])
        # (torch's own sum cancels at -150.5 for n = 2: 3e-11 relative)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-10)
    # polygamma(2, -100.5) = polygamma(2, 101.5) (cot(pi x) = 0 there): exactly, where torch is 1.6e-11 off
    np.testing.assert_allclose(tg.polygamma(2, tg.tensor([-100.5], dtype=tg.float64)).numpy(),
                               tg.polygamma(2, tg.tensor([101.5], dtype=tg.float64)).numpy(), rtol=4e-16)

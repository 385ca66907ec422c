"""Ops users reach for that tracegrad lacked, against torch: i0 and the scaled and first-order
Bessel functions, angle and the conjugation no-ops of real tensors, gcd/lcm/nextafter,
index_reduce, as_strided, resize_; and a float32 power by an exponent beyond float32's range.

Each: values (bit for bit where the same arithmetic runs, else a stated tolerance), dtypes,
errors (torch's type and message), grad_fn names, float64 gradcheck (and gradgradcheck where
torch supports it), and compiled against eager.
"""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _same(a, b):
    """a (tracegrad) equals b (torch) bit for bit, with the dtype's name and the shape."""
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert tuple(a.shape) == tuple(b.shape)
    if b.dtype == torch.bfloat16:
        a, b = a.float(), b.float()
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def _raises_like(fn_torch, fn_tg):
    with pytest.raises(Exception) as et:
        fn_torch()
    with pytest.raises(type(et.value)) as eg:
        fn_tg()
    assert str(eg.value) == str(et.value)


# -- a float32 power by an exponent beyond float32's range ------------------------------------------

POW_BASES = [0.5, 1.0, 2.0, -1.0, 0.0, -0.0, -0.5, -2.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("e", [1e300, -1e300, 3.5e38, -3.5e38, 1e39, 2.0 ** 200])
@pytest.mark.parametrize("dtype", ["float32", "int8", "int64"])
def test_pow_exponent_beyond_float32(e, dtype):
    """torch's float32 kernel takes a number exponent as a double (an integer base is promoted to
    float32): x ** 1e300 is inf, 1, 0 or NaN per IEEE. tracegrad raised "value cannot be converted
    to type float without overflow", a check torch makes only for float16 and bfloat16 bases."""
    vals = POW_BASES if dtype == "float32" else [0, 1, 2, -1, -2, 3]
    x = tg.tensor(vals, dtype=getattr(tg, dtype))
    t = torch.tensor(vals, dtype=getattr(torch, dtype))
    _same(x ** e, t ** e)
    _same(tg.pow(x, e), torch.pow(t, e))
    compiled = tg.compile(lambda a: a ** e + 0)
    _same(compiled(x), t ** e + 0)
    if dtype == "float32":
        _same(x.clone().pow_(e), t.clone().pow_(e))


def test_pow_exponent_beyond_half_still_raises():
    for dt in ("float16", "bfloat16"):
        for e in (1e300, 3.5e38):
            _raises_like(lambda: torch.ones(2, dtype=getattr(torch, dt)) ** e,
                         lambda: tg.ones(2, dtype=getattr(tg, dt)) ** e)
    _raises_like(lambda: torch.ones(2, dtype=torch.float16) ** 1e5, lambda: tg.ones(2, dtype=tg.float16) ** 1e5)


def test_pow_exponent_beyond_float32_gradient():
    for e in (1e300, -1e300, 3.5e38):
        x = tg.tensor([0.5, 2.0, 3.0], requires_grad=True)
        t = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
        (x ** e).sum().backward()
        (t ** e).sum().backward()
        _same(x.grad, t.grad)


# -- i0, and torch.special's i0e, i1, i1e ------------------------------------------------------------

BESSEL = ["i0", "i0e", "i1", "i1e"]
BESSEL_GRAD_FN = {"i0": "I0Backward0", "i0e": "SpecialI0EBackward0", "i1": "SpecialI1Backward0",
                  "i1e": "SpecialI1EBackward0"}


def _bessel_points():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.uniform(-10, 10, 400), rng.uniform(-800, 800, 200), 10 ** rng.uniform(-30, 3, 200),
                           [0.0, -0.0, 8.0, -8.0, math.inf, -math.inf, math.nan, 88.0, 89.0, -89.0, 709.0, 710.0,
                            1e-300, 2.0 ** -52, 2.0 ** -23]])


@pytest.mark.parametrize("name", BESSEL)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_bessel_values(name, dtype):
    """torch's values: the same Chebyshev series in the same dtype (float32 for the 16-bit ones)
    with torch's tables, fused multiply-adds and order of operations. Bit for bit but for about one
    argument in a thousand, which is 1 ulp off (a fused multiply-add emulated by one wider
    rounding, or exp rounded from a wider one, can round the other way); the specials exactly
    (i0(inf) and i1(+-inf) NaN, as torch's exp(x) / sqrt(x); float32's i0 inf from 89 on, where
    float32's exp overflows)."""
    x = np.concatenate([_bessel_points(), np.random.default_rng(1).uniform(-30, 30, 3000)])
    tf, gf = getattr(torch.special, name), getattr(tg.special, name)
    g = gf(tg.tensor(x, dtype=getattr(tg, dtype)))
    t = tf(torch.tensor(x, dtype=getattr(torch, dtype)))
    assert g.dtype == getattr(tg, dtype)
    g = g.double().numpy()
    t = t.double().numpy()
    nonfinite = ~np.isfinite(t)
    np.testing.assert_array_equal(g[nonfinite], t[nonfinite])
    same = (g == t) | nonfinite
    assert same.mean() > 0.995
    np_dt = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": np.float32}[dtype]
    ulp = np.spacing(np.abs(t[~same]).astype(np_dt)).astype(np.float64) * (65536 if dtype == "bfloat16" else 1)
    assert np.all(np.abs(g[~same] - t[~same]) <= ulp)


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_dtypes_names_and_errors(name):
    tf, gf = getattr(torch.special, name), getattr(tg.special, name)
    for dt in ("int64", "int8", "bool"):
        vals = [True, False] if dt == "bool" else [1, 0, -2]
        _same(gf(tg.tensor(vals, dtype=getattr(tg, dt))), tf(torch.tensor(vals, dtype=getattr(torch, dt))))
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    assert type(gf(x).grad_fn).__name__ == BESSEL_GRAD_FN[name] == tf(torch.tensor([0.5], requires_grad=True)).grad_fn.name()
    _raises_like(lambda: tf([1.0]), lambda: gf([1.0]))
    if name in ("i1", "i1e"):
        for dt in ("float16", "bfloat16"):
            _raises_like(lambda: tf(torch.ones(2, dtype=getattr(torch, dt), requires_grad=True)).sum().backward(),
                         lambda: gf(tg.ones(2, dtype=getattr(tg, dt), requires_grad=True)).sum().backward())


def test_i0_aliases_method_and_inplace():
    v = [0.5, -3.0, 12.0]
    _same(tg.i0(tg.tensor(v)), torch.i0(torch.tensor(v)))
    _raises_like(lambda: torch.i0([1.0]), lambda: tg.i0([1.0]))
    _same(tg.tensor(v).i0(), torch.tensor(v).i0())
    a, b = tg.tensor(v), torch.tensor(v)
    a.i0_()
    b.i0_()
    _same(a, b)
    _raises_like(lambda: torch.tensor([1, 2]).i0_(), lambda: tg.tensor([1, 2]).i0_())


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_gradients(name):
    """gradcheck and gradgradcheck in float64; torch's first derivative (its formula, incl. the 0.5 at
    |x| <= eps of i1 and i1e) to 4 ulps; second derivatives away from 0, where torch's formula
    i1e' = i0e - i1e (sgn + 1/x) cancels catastrophically (at x = 2**-51 torch's is -0.625, the
    true value -1: any evaluation order differs)."""
    tf, gf = getattr(torch.special, name), getattr(tg.special, name)
    xs = tg.tensor([0.3, -2.0, 9.5, -12.0, 4.0], dtype=tg.float64, requires_grad=True)
    assert gradcheck(gf, (xs,))
    assert gradgradcheck(gf, (xs,))
    v = [0.0, -0.0, 1e-20, -1e-20, 2.0 ** -52, 0.5, -1.5, 3.0, -9.0, 20.0, 1e-3]
    x = tg.tensor(v, dtype=tg.float64, requires_grad=True)
    t = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    g, = tg.autograd.grad(gf(x).sum(), x, create_graph=True)
    h, = torch.autograd.grad(tf(t).sum(), t, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), h.detach().numpy(), rtol=4 * 2.0 ** -52, atol=0)
    gg, = tg.autograd.grad(g.sum(), x)
    hh, = torch.autograd.grad(h.sum(), t)
    np.testing.assert_allclose(gg.numpy()[5:], hh.numpy()[5:], rtol=1e-9)
    np.testing.assert_array_equal(gg.numpy()[:5] == 0, hh.numpy()[:5] == 0)


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_compiled_equals_eager(name):
    gf = getattr(tg.special, name)
    compiled = tg.compile(lambda a: gf(a) * 2)
    for dt in (tg.float32, tg.float64):
        a = tg.tensor(np.linspace(-12, 12, 41), dtype=dt, requires_grad=True)
        b = a.detach().clone().requires_grad_()
        y, z = compiled(a), gf(b) * 2
        _same(y, z)
        y.sum().backward()
        z.sum().backward()
        _same(a.grad, b.grad)


# -- angle and the conjugation functions of real tensors ---------------------------------------------

ANGLE_POINTS = [1.0, -1.0, 0.0, -0.0, math.nan, -math.inf, math.inf, -math.nan, 1e-45, -1e-45, -3.5]


def test_angle_values_and_dtypes():
    """pi below 0 (-inf too), NaN at NaN, +0.0 elsewhere (-0.0 too: its sign bit is not kept)."""
    for dt in ("float32", "float64", "float16", "bfloat16"):
        g = tg.angle(tg.tensor(ANGLE_POINTS, dtype=getattr(tg, dt)))
        t = torch.angle(torch.tensor(ANGLE_POINTS, dtype=getattr(torch, dt)))
        _same(g, t)
        num = ~np.isnan(t.float().numpy())     # (torch's NaN sign depends on the element's place)
        np.testing.assert_array_equal(np.signbit(g.float().numpy())[num], np.signbit(t.float().numpy())[num])
    for dt, vals in (("int64", [1, -2, 0]), ("int8", [-1, 3]), ("uint8", [0, 255]), ("bool", [True, False])):
        _same(tg.angle(tg.tensor(vals, dtype=getattr(tg, dt))), torch.angle(torch.tensor(vals, dtype=getattr(torch, dt))))
    _same(tg.tensor([-2.0, 3.0]).angle(), torch.tensor([-2.0, 3.0]).angle())
    _raises_like(lambda: torch.angle([1.0]), lambda: tg.angle([1.0]))


def test_angle_gradient_is_zeros():
    """torch's angle_backward of a real input: zeros, a NaN incoming gradient too (not grad * 0)."""
    x = tg.tensor(ANGLE_POINTS, dtype=tg.float64, requires_grad=True)
    t = torch.tensor(ANGLE_POINTS, dtype=torch.float64, requires_grad=True)
    y, z = tg.angle(x), torch.angle(t)
    assert type(y.grad_fn).__name__ == z.grad_fn.name() == "AngleBackward0"
    y.backward(tg.full((len(ANGLE_POINTS),), math.nan, dtype=tg.float64))
    z.backward(torch.full((len(ANGLE_POINTS),), math.nan, dtype=torch.float64))
    _same(x.grad, t.grad)
    assert gradcheck(tg.angle, (tg.tensor([0.5, -2.0], dtype=tg.float64, requires_grad=True),))
    assert gradgradcheck(tg.angle, (tg.tensor([0.5, -2.0], dtype=tg.float64, requires_grad=True),))


def test_conj_family_on_real_tensors():
    for name in ("conj", "conj_physical", "resolve_conj", "resolve_neg"):
        for x in (tg.tensor([1.0, -2.0]), tg.tensor([1, 2]), tg.tensor([1.0], requires_grad=True) * 2):
            assert getattr(tg, name)(x) is x          # torch returns the tensor itself
            assert getattr(x, name)() is x
        _raises_like(lambda: getattr(torch, name)([1.0]), lambda: getattr(tg, name)([1.0]))
    for name in ("is_conj", "is_neg"):
        assert getattr(tg, name)(tg.tensor([1.0])) is False
        assert getattr(tg.tensor([1.0]), name)() is False
        _raises_like(lambda: getattr(torch, name)([1.0]), lambda: getattr(tg, name)([1.0]))


def test_conj_physical_inplace():
    """Value kept, version moved, torch's ConjPhysicalBackward1 node (gradient passed unchanged),
    torch's error on a leaf that requires grad."""
    a, b = tg.tensor([1.0, -2.0]), torch.tensor([1.0, -2.0])
    va, vb = a._version, b._version
    assert a.conj_physical_() is a
    b.conj_physical_()
    _same(a, b)
    assert a._version - va == b._version - vb == 1
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    u = torch.tensor([1.0, 2.0], requires_grad=True)
    p, q = w * 3, u * 3
    p.conj_physical_()
    q.conj_physical_()
    assert type(p.grad_fn).__name__ == q.grad_fn.name() == "ConjPhysicalBackward1"
    (p * p).sum().backward()
    (q * q).sum().backward()
    _same(w.grad, u.grad)
    _raises_like(lambda: torch.tensor([1.0], requires_grad=True).conj_physical_(),
                 lambda: tg.tensor([1.0], requires_grad=True).conj_physical_())


def test_angle_and_conj_compiled_equal_eager():
    fn = lambda m, x: m.angle(x) * 2 + m.conj(x) + m.conj_physical(x).resolve_neg().resolve_conj()  # noqa: E731
    compiled = tg.compile(lambda x: fn(tg, x))
    for dt in (tg.float32, tg.float64):
        x = tg.tensor(ANGLE_POINTS, dtype=dt, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        y, z = compiled(x), fn(tg, x2)
        _same(y, z)
        _same(y, fn(torch, torch.tensor(ANGLE_POINTS, dtype=getattr(torch, str(dt).split(".")[-1]))))
        y.sum().backward()
        z.sum().backward()
        _same(x.grad, x2.grad)


# -- gcd, lcm, nextafter ------------------------------------------------------------------------------

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]


def _int_pairs(dt, with_min):
    rng = np.random.default_rng(2)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, 2000, endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, 2000, endpoint=True).astype(dt)
    small = rng.integers(-20 if info.min < 0 else 0, 20, (2, 200)).astype(dt)
    a[100:300], b[100:300] = small
    b[20:60] = 0
    a[50:70] = 0
    if with_min:
        a[:30] = info.min
    return a, b


@pytest.mark.parametrize("dt", INT_DTYPES)
def test_gcd_lcm_values(dt):
    """Euclid on |a|, |b| with C's remainder, and |a / gcd * b| in C's arithmetic (8- and 16-bit in
    int, wrapped back): torch's values, the overflows included (int8 gcd(-128, 0) = -128, int8
    lcm(100, 3) = 44). lcm is compared without the most negative value for int32 and int64, where
    torch's own kernel can divide it by -1 and dies of SIGFPE."""
    for name in ("gcd", "lcm"):
        a, b = _int_pairs(dt, with_min=name == "gcd" or dt in ("int8", "int16", "uint8"))
        _same(getattr(tg, name)(tg.tensor(a), tg.tensor(b)), getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)))
        _same(getattr(tg.tensor(a), name)(tg.tensor(b)), getattr(torch.from_numpy(a), name)(torch.from_numpy(b)))
        x, y = tg.tensor(a), torch.from_numpy(a.copy())
        getattr(x, name + "_")(tg.tensor(b))
        getattr(y, name + "_")(torch.from_numpy(b))
        _same(x, y)


def test_gcd_lcm_promotion_broadcast_and_errors():
    for name in ("gcd", "lcm"):
        f, g = getattr(torch, name), getattr(tg, name)
        _same(g(tg.tensor([6, 9], dtype=tg.int8), tg.tensor([4], dtype=tg.int32)),
              f(torch.tensor([6, 9], dtype=torch.int8), torch.tensor([4], dtype=torch.int32)))
        _same(g(tg.tensor([[6], [9]]), tg.tensor([4, 3])), f(torch.tensor([[6], [9]]), torch.tensor([4, 3])))
        _same(g(tg.tensor([6, 4]), tg.tensor(4)), f(torch.tensor([6, 4]), torch.tensor(4)))
        for a, b in ((([1.0], None), ([2.0], None)), (([1], None), ([2.0], None)), (([True], None), ([True], None)),
                     (([1.0], "float64"), ([2], None))):
            _raises_like(lambda: f(torch.tensor(a[0], dtype=getattr(torch, a[1]) if a[1] else None), torch.tensor(b[0])),
                         lambda: g(tg.tensor(a[0], dtype=getattr(tg, a[1]) if a[1] else None), tg.tensor(b[0])))
        _raises_like(lambda: f(torch.tensor([4]), 2), lambda: g(tg.tensor([4]), 2))
        _raises_like(lambda: f([4], torch.tensor([2])), lambda: g([4], tg.tensor([2])))
        _raises_like(lambda: getattr(torch.tensor([6], dtype=torch.int8), name + "_")(torch.tensor([4.0])),
                     lambda: getattr(tg.tensor([6], dtype=tg.int8), name + "_")(tg.tensor([4.0])))


NEXT_X = [0.0, 1.0, -1.0, math.inf, math.nan, 0.0, -0.0, 1.0, -math.inf, 3e38, 65504.0, 1e-45, -1e-40, 2.0, 5.0]
NEXT_Y = [1.0, 2.0, -2.0, 0.0, 1.0, -1.0, 1.0, math.nan, 0.0, math.inf, math.inf, 0.0, 0.0, 2.0, -math.inf]


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
def test_nextafter_values(dt):
    """One representable value of the dtype toward other (bfloat16's own spacing: its values are
    float32 storage here), other itself where the two are equal (float16: +0.0 from -0.0 toward +0.0,
    where numpy's float16 nextafter gave -0.0), NaN where either is."""
    g = tg.nextafter(tg.tensor(NEXT_X, dtype=getattr(tg, dt)), tg.tensor(NEXT_Y, dtype=getattr(tg, dt)))
    t = torch.nextafter(torch.tensor(NEXT_X, dtype=getattr(torch, dt)), torch.tensor(NEXT_Y, dtype=getattr(torch, dt)))
    _same(g, t)
    np.testing.assert_array_equal(np.signbit(g.float().numpy()), np.signbit(t.float().numpy()))
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(500), rng.standard_normal(500)
    _same(tg.tensor(a, dtype=getattr(tg, dt)).nextafter(tg.tensor(b, dtype=getattr(tg, dt))),
          torch.tensor(a, dtype=getattr(torch, dt)).nextafter(torch.tensor(b, dtype=getattr(torch, dt))))


def test_nextafter_promotion_errors_inplace_and_gradient():
    for mk in (lambda m: (m.tensor([1.0]), m.tensor([2.0], dtype=m.float64)), lambda m: (m.tensor([1]), m.tensor([2.0])),
               lambda m: (m.tensor([0.0]), m.tensor(1.0, dtype=m.float64))):
        _same(tg.nextafter(*mk(tg)), torch.nextafter(*mk(torch)))
    _raises_like(lambda: torch.nextafter(torch.tensor([1]), torch.tensor([2])),
                 lambda: tg.nextafter(tg.tensor([1]), tg.tensor([2])))
    _raises_like(lambda: torch.nextafter(torch.tensor([1.0]), 2.0), lambda: tg.nextafter(tg.tensor([1.0]), 2.0))
    a, b = tg.tensor([1.0, -3.0]), torch.tensor([1.0, -3.0])
    a.nextafter_(tg.tensor([2.0, 0.0], dtype=tg.float64))
    b.nextafter_(torch.tensor([2.0, 0.0], dtype=torch.float64))
    _same(a, b)
    # torch's derivative: the gradient passes to input, other gets zeros
    x = tg.tensor([1.0, 2.0], dtype=tg.float64, requires_grad=True)
    y = tg.tensor([3.0, 0.0], dtype=tg.float64, requires_grad=True)
    r = tg.nextafter(x, y)
    assert type(r.grad_fn).__name__ == "NextafterBackward0"
    r.backward(tg.tensor([5.0, 7.0], dtype=tg.float64))
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    ty = torch.tensor([3.0, 0.0], dtype=torch.float64, requires_grad=True)
    torch.nextafter(tx, ty).backward(torch.tensor([5.0, 7.0], dtype=torch.float64))
    _same(x.grad, tx.grad)
    _same(y.grad, ty.grad)


def test_gcd_lcm_nextafter_compiled_equal_eager():
    f = tg.compile(lambda a, b: tg.gcd(a, b) + tg.lcm(a, b) * 2)
    for dt in ("int8", "int32", "int64"):
        a, b = _int_pairs(dt, with_min=False)
        x, y = tg.tensor(a), tg.tensor(b)
        _same(f(x, y), tg.gcd(x, y) + tg.lcm(x, y) * 2)
    h = tg.compile(lambda a, b: tg.nextafter(a, b) * 1)
    for dt in ("float32", "float64", "float16", "bfloat16"):
        x = tg.tensor(NEXT_X, dtype=getattr(tg, dt))
        y = tg.tensor(NEXT_Y, dtype=getattr(tg, dt))
        r = h(x, y)
        _same(r, torch.nextafter(torch.tensor(NEXT_X, dtype=getattr(torch, dt)), torch.tensor(NEXT_Y, dtype=getattr(torch, dt))))
        np.testing.assert_array_equal(np.signbit(r.float().numpy()), np.signbit(tg.nextafter(x, y).float().numpy()))


# -- as_strided --------------------------------------------------------------------------------------

AS_STRIDED_CASES = [((4,), (1,), 0), ((4,), (1,), 5), ((2, 2), (1,), 0), ((2,), (-1,), 0), ((-1,), (1,), 0),
                    ((2,), (1,), -1), ((0,), (1,), 100), ((3, 3), (0, 1), None), ((2, 2), (3, 1), 1),
                    ((3, 3), (1, 1), None), ((2, 3), (1, 2), 1), ((), (), 7)]


@pytest.mark.parametrize("case", AS_STRIDED_CASES)
def test_as_strided_values_and_errors(case):
    size, stride, off = case
    args = (size, stride) if off is None else (size, stride, off)
    try:
        want = torch.as_strided(torch.arange(8.0), *args)
    except RuntimeError:
        _raises_like(lambda: torch.as_strided(torch.arange(8.0), *args), lambda: tg.as_strided(tg.arange(8.0), *args))
        _raises_like(lambda: torch.arange(8.0).as_strided(*args), lambda: tg.arange(8.0).as_strided(*args))
        return
    _same(tg.as_strided(tg.arange(8.0), *args), want)
    _same(tg.arange(8.0).as_strided(*args), want)


def test_as_strided_offsets_count_in_the_storage():
    """A contiguous slice at an offset: the default offset is its own, an explicit one counts from
    the storage's start, as torch's. Where the view would read storage outside the tensor (or the
    tensor is not contiguous in it), tracegrad raises rather than view other elements than torch."""
    _same(tg.arange(10.0)[2:].as_strided((3,), (1,)), torch.arange(10.0)[2:].as_strided((3,), (1,)))
    _same(tg.arange(10.0)[2:].as_strided((3,), (2,), 3), torch.arange(10.0)[2:].as_strided((3,), (2,), 3))
    _same(tg.arange(6, dtype=tg.int32).as_strided((2,), (1,)), torch.arange(6, dtype=torch.int32).as_strided((2,), (1,)))
    # the view's own storage offset is torch's (it was 0: numpy's base chain stops at as_strided's holder)
    for size, stride, off in (((2,), (1,), 2), ((2, 2), (1, 1), 3), ((3,), (2,), 1)):
        assert tg.arange(10.0).as_strided(size, stride, off).storage_offset() == \
            torch.arange(10.0).as_strided(size, stride, off).storage_offset() == off
    _same(tg.arange(10.0).as_strided((2,), (1,), 2).as_strided((2,), (1,)),
          torch.arange(10.0).as_strided((2,), (1,), 2).as_strided((2,), (1,)))
    for make in (lambda m: m.arange(10.0)[2:].as_strided((3,), (1,), 0),
                 lambda m: m.arange(10.0).view(2, 5).t().as_strided((2, 2), (1, 2)),
                 lambda m: m.arange(6.0)[::2].as_strided((3,), (2,)),
                 lambda m: m.arange(3.0).expand(2, 3).as_strided((3,), (1,))):
        make(torch)
        with pytest.raises(RuntimeError, match="outside this tensor"):
            make(tg)


def test_as_strided_is_a_view():
    for m in (tg, torch):
        p = m.arange(6.0)
        q = p.as_strided((2,), (2,), 1)
        q.mul_(10)
        p.add_(1)
        if m is tg:
            got = (p.tolist(), q.tolist())
        else:
            assert got == (p.tolist(), q.tolist())
    w, u = tg.arange(6.0, requires_grad=True) * 1, torch.arange(6.0, requires_grad=True) * 1
    w.as_strided_((2, 2), (2, 1), 1)
    u.as_strided_((2, 2), (2, 1), 1)
    _same(w, u)
    assert type(w.grad_fn).__name__ == u.grad_fn.name() == "AsStridedBackward1"


def test_as_strided_gradient_accumulates_over_overlaps():
    """torch's AsStridedBackward0: an input element gets the sum of the gradients of the view's
    elements that are it (sliding windows overlap)."""
    for size, stride, off in (((3, 3), (1, 1), 0), ((2, 2), (3, 1), 1), ((4, 2), (0, 2), 1), ((2, 3), (2, 1), 0)):
        w = tg.arange(6.0, dtype=tg.float64, requires_grad=True)
        u = torch.arange(6.0, dtype=torch.float64, requires_grad=True)
        y, z = w.as_strided(size, stride, off), u.as_strided(size, stride, off)
        assert type(y.grad_fn).__name__ == z.grad_fn.name() == "AsStridedBackward0"
        gy = np.random.default_rng(4).standard_normal(size)
        y.backward(tg.tensor(gy))
        z.backward(torch.tensor(gy))
        np.testing.assert_allclose(w.grad.numpy(), u.grad.numpy(), rtol=1e-15)
        x = tg.arange(6.0, dtype=tg.float64, requires_grad=True)
        fn = lambda t: (t * 1).as_strided(size, stride, off) ** 2  # noqa: E731
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


def test_as_strided_compiled_equals_eager():
    fn = lambda t: (t * 2).as_strided((3, 3), (1, 1)).sum(0) + t.as_strided((2, 2), (2, 1))[0, 1]  # noqa: E731
    compiled = tg.compile(fn)
    for x in (tg.arange(6.0, requires_grad=True), tg.arange(10.0)[3:9].detach().requires_grad_()):
        x2 = x.detach().clone().requires_grad_()
        y, z = compiled(x), fn(x2)
        _same(y, z)
        y.sum().backward()
        z.sum().backward()
        _same(x.grad, x2.grad)
    # a non-contiguous argument: the compiled function raises as eager does, not a contiguous copy's view
    base = tg.arange(12.0).view(3, 4)
    compiled(base[1:].reshape(8)[:6])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="outside this tensor"):
            compiled(base.t().reshape(12)[::2])


# -- index_reduce --------------------------------------------------------------------------------------

REDUCES = ["prod", "mean", "amax", "amin"]


def _index_reduce_args(m, dtype="float64"):
    x = np.array([[8.0, 2, 3], [4, 5, 6], [7, 0, 9], [10, 11, 12]])
    s = np.array([[8.0, 3, 0], [5, 6, 7], [8, 9, 10]])        # ties with self at [0, 0]; zeros for prod
    return m.tensor(x, dtype=getattr(m, dtype)), m.tensor([0, 2, 0]), m.tensor(s, dtype=getattr(m, dtype))


@pytest.fixture(autouse=False)
def no_beta_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_values(reduce, include_self, no_beta_warning):
    for dt in ("float32", "float64", "int64", "float16"):
        x, i, s = _index_reduce_args(tg, dt)
        tx, ti, ts = _index_reduce_args(torch, dt)
        _same(tg.index_reduce(x, 0, i, s, reduce, include_self=include_self),
              torch.index_reduce(tx, 0, ti, ts, reduce, include_self=include_self))
        _same(x.t().index_reduce(1, i, s.t(), reduce, include_self=include_self),
              tx.t().index_reduce(1, ti, ts.t(), reduce, include_self=include_self))
        a, b = x.clone(), tx.clone()
        a.index_reduce_(0, i.int(), s, reduce, include_self=include_self)
        b.index_reduce_(0, ti.int(), ts, reduce, include_self=include_self)
        _same(a, b)
    # an integer mean rounds down (floor division), as torch's
    _same(tg.index_reduce(tg.tensor([5, -7, 9]), 0, tg.tensor([0, 1, 1]), tg.tensor([2, 2, 3]), reduce,
                          include_self=include_self),
          torch.index_reduce(torch.tensor([5, -7, 9]), 0, torch.tensor([0, 1, 1]), torch.tensor([2, 2, 3]), reduce,
                             include_self=include_self))
    _same(tg.index_reduce(tg.tensor(5.0), 0, tg.tensor([0]), tg.tensor(3.0), reduce, include_self=include_self),
          torch.index_reduce(torch.tensor(5.0), 0, torch.tensor([0]), torch.tensor(3.0), reduce, include_self=include_self))


def test_index_reduce_errors(no_beta_warning):
    X = lambda m: m.arange(1.0, 13.0).view(4, 3)  # noqa: E731
    S = lambda m: m.ones(3, 3)  # noqa: E731
    cases = [lambda m: m.index_reduce(X(m), 0, m.tensor([0, 2, 0]), S(m), "sum"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0.0, 2, 0]), S(m), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([[0, 1, 2]]), S(m), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0, 1]), S(m), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0, 1, 5]), S(m), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0, 1, -1]), S(m), "amax"),
             lambda m: m.index_reduce(X(m), 1, m.tensor([0, 1, 2]), S(m), "prod"),
             lambda m: m.index_reduce(X(m), 2, m.tensor([0, 2, 0]), S(m), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0, 2, 0]), S(m).double(), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0, 2, 0]), S(m)[0], "prod"),
             lambda m: m.index_reduce(m.tensor([True, False]), 0, m.tensor([0]), m.tensor([True]), "prod"),
             lambda m: m.index_reduce(X(m), 0, m.tensor([0, 2, 0]), S(m), "prod", True),
             lambda m: m.tensor([1.0], requires_grad=True).index_reduce_(0, m.tensor([0]), m.tensor([2.0]), "prod")]
    for case in cases:
        _raises_like(lambda: case(torch), lambda: case(tg))


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_gradients(reduce, include_self, no_beta_warning):
    """torch's IndexReduceBackward0, at ties and zeros too: amax/amin share the gradient among the
    values equal to the result and count self where it equals it even without include_self (whose
    share is then dropped: two source maxima tied with self get a third each, as torch's; tracegrad's
    scatter_reduce gave each a half); prod's gradient is exact at a zero."""
    x, i, s = _index_reduce_args(tg)
    tx, ti, ts = _index_reduce_args(torch)
    for a in (x, s, tx, ts):
        a.requires_grad_()
    g = np.arange(12.0).reshape(4, 3) + 1
    y = tg.index_reduce(x, 0, i, s, reduce, include_self=include_self)
    z = torch.index_reduce(tx, 0, ti, ts, reduce, include_self=include_self)
    assert type(y.grad_fn).__name__ == z.grad_fn.name() == "IndexReduceBackward0"
    gx, gs = tg.autograd.grad(y, (x, s), tg.tensor(g, dtype=tg.float64))
    hx, hs = torch.autograd.grad(z, (tx, ts), torch.tensor(g, dtype=torch.float64))
    np.testing.assert_allclose(gx.numpy(), hx.numpy(), rtol=1e-15)
    np.testing.assert_allclose(gs.numpy(), hs.numpy(), rtol=1e-15)
    rng = np.random.default_rng(5)
    a = tg.tensor(rng.uniform(1, 2, (4, 3)), requires_grad=True)
    b = tg.tensor(rng.uniform(1, 2, (3, 3)), requires_grad=True)
    fn = lambda p, q: tg.index_reduce(p, 0, tg.tensor([0, 2, 0]), q, reduce, include_self=include_self)  # noqa: E731
    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


def test_scatter_reduce_tie_gradient_without_self_is_torchs():
    for reduce in ("amax", "amin"):
        for m in (tg, torch):
            x = m.tensor([8.0, 1.0], requires_grad=True)
            s = m.tensor([8.0, 8.0], requires_grad=True)
            m.scatter_reduce(x, 0, m.tensor([0, 0]), s, reduce, include_self=False).backward(m.tensor([1.0, 1.0]))
            if m is tg:
                got = (x.grad.tolist(), s.grad.tolist())
            else:
                assert got == (x.grad.tolist(), s.grad.tolist())


def test_index_reduce_compiled_equals_eager(no_beta_warning):
    for reduce in REDUCES:
        fn = lambda p, q: tg.index_reduce(p * 1, 0, tg.tensor([0, 2, 0]), q, reduce)  # noqa: E731
        compiled = tg.compile(fn)
        x, _, s = _index_reduce_args(tg)
        x1, s1 = x.clone().requires_grad_(), s.clone().requires_grad_()
        x2, s2 = x.clone().requires_grad_(), s.clone().requires_grad_()
        y, z = compiled(x1, s1), fn(x2, s2)
        _same(y, z)
        y.sum().backward()
        z.sum().backward()
        _same(x1.grad, x2.grad)
        _same(s1.grad, s2.grad)


def test_index_reduce_warns_once_as_torch():
    from tracegrad.ops import functional_extra
    functional_extra._INDEX_REDUCE_WARNED[0] = False
    with pytest.warns(UserWarning, match=r"index_reduce\(\) is in beta"):
        tg.index_reduce(tg.ones(2), 0, tg.tensor([0]), tg.ones(1), "prod")


# -- resize_ -----------------------------------------------------------------------------------------

def _resize_cases():
    def shrink(m):
        x = m.arange(6.0)
        v = x._version
        r = x.resize_(2, 2)
        return r is x, x.tolist(), x._version - v, x.stride()

    def shares_on_shrink(m):
        x = m.arange(6.0)
        y = x.view(2, 3)
        x.resize_(2)
        x[0] = 50
        return x.tolist(), y.tolist()

    def same_shape_keeps_strides(m):
        x = m.arange(12.0).view(3, 4).t()
        v = x._version
        x.resize_(4, 3)
        return x.tolist(), x.stride(), x._version - v

    def saved_then_resized(m):
        w = m.tensor([1.0, 2.0], requires_grad=True)
        x = m.tensor([3.0, 4.0])
        y = (w * x).sum()
        x.resize_(1)
        y.backward()

    def under_no_grad(m):
        with m.no_grad():
            m.arange(6.0, requires_grad=True).resize_(2)

    return [shrink, shares_on_shrink, same_shape_keeps_strides, saved_then_resized, under_no_grad,
            lambda m: m.arange(6.0).resize_((3, 2)).tolist(),
            lambda m: m.arange(6.0).resize_([8])[:6].tolist(),
            lambda m: tuple(m.arange(6.0).resize_(8).shape),
            lambda m: m.arange(6.0).resize_(0).tolist(),
            lambda m: m.arange(12.0)[2:].clone().resize_(2, 2).tolist(),
            lambda m: m.arange(6, dtype=m.int32).resize_(2, 2).tolist(),
            lambda m: m.from_numpy(np.arange(6.0)).resize_(3).tolist(),
            lambda m: m.arange(6.0).resize_as_(m.zeros(2, 3)).tolist(),
            lambda m: m.arange(24.0).resize_(1, 2, 3, 4, memory_format=m.channels_last).tolist(),
            lambda m: m.arange(24.0).resize_(1, 2, 3, 4, memory_format=m.channels_last).stride(),
            lambda m: m.arange(6.0, requires_grad=True).resize_(2),
            lambda m: (m.arange(6.0, requires_grad=True) * 1).resize_(2),
            lambda m: m.arange(6.0).resize_(-1),
            lambda m: m.arange(6.0).resize_(2, 2.5),
            lambda m: m.arange(6.0).resize_(),
            lambda m: m.from_numpy(np.arange(6.0)).resize_(10),
            lambda m: m.arange(6.0).resize_(2, memory_format=m.channels_last)]


@pytest.mark.parametrize("case", range(len(_resize_cases())))
def test_resize_as_torch(case):
    fn = _resize_cases()[case]
    try:
        want = fn(torch)
    except Exception:
        _raises_like(lambda: fn(torch), lambda: fn(tg))
        return
    assert fn(tg) == want


def test_resize_where_numpy_cannot_share_raises():
    """torch grows a storage in place under the tensors that view it, and keeps a resized view a
    view; tracegrad raises there rather than let the tensors drift apart."""
    x = tg.arange(6.0)
    y = x.view(2, 3)
    with pytest.raises(RuntimeError, match="other tensors view"):
        x.resize_(10)
    assert y.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError, match="resize_ of a view"):
        tg.arange(6.0).t().resize_(2)
    z = tg.arange(6.0)
    z.resize_(10)
    assert z[:6].tolist() == list(range(6)) and z.shape == (10,)


def test_resize_inside_compile_runs_eagerly():
    def fn(x):
        y = x * 2
        y.resize_(2)
        return y + 1
    compiled = tg.compile(fn)
    with pytest.warns(UserWarning, match="resize_"):
        _same(compiled(tg.arange(6.0)), fn(torch.arange(6.0)))


# -- the "cuda" device on Triton's interpreter ---------------------------------------------------------

_DEVICE_SCRIPT = r"""
import json, warnings
warnings.simplefilter("ignore")
import tracegrad as tg
out = {}
x = tg.tensor([0.5, 1.0, 2.0, -1.0, 0.0, -0.5, -2.0], device="cuda")
out["pow"] = (x ** 1e300).cpu().tolist()
v = tg.tensor([0.5, -3.0, 12.0], dtype=tg.float64, device="cuda", requires_grad=True)
for name, f in (("i0", tg.i0), ("i0e", tg.special.i0e), ("i1", tg.special.i1), ("i1e", tg.special.i1e),
                ("angle", tg.angle)):
    y = f(v)
    y.sum().backward()
    out[name] = [str(y.device), y.cpu().tolist(), v.grad.cpu().tolist()]
    v.grad = None
a, b = tg.tensor([12, -18, 7], device="cuda"), tg.tensor([8, 12, -3], device="cuda")
out["gcd"] = [tg.gcd(a, b).cpu().tolist(), tg.lcm(a, b).cpu().tolist()]
out["nextafter"] = tg.nextafter(v.detach(), tg.zeros(3, dtype=tg.float64, device="cuda")).cpu().tolist()
s = tg.tensor([2.0, 3.0], device="cuda", requires_grad=True)
r = tg.index_reduce(tg.ones(3, device="cuda"), 0, tg.tensor([0, 0], device="cuda"), s, "prod")
r.sum().backward()
out["index_reduce"] = [str(r.device), r.cpu().tolist(), s.grad.cpu().tolist()]
out["scatter_reduce"] = tg.scatter_reduce(tg.ones(3, device="cuda"), 0, tg.tensor([0, 0], device="cuda"),
                                          tg.tensor([2.0, 3.0], device="cuda"), "sum").cpu().tolist()
out["as_strided"] = [tg.arange(10.0, device="cuda")[2:].as_strided((2, 2), (1, 1)).cpu().tolist(),
                     tg.arange(10.0, device="cuda")[2:].as_strided((2, 2), (1, 1), 3).cpu().tolist()]
print(json.dumps(out))
"""


def test_new_ops_on_the_device_path():
    """On CUDA tensors (Triton's interpreter here): the new ops run their numpy kernels on a host
    copy, and give CPU tracegrad's (and torch's) values. index_reduce and scatter_reduce's sum and
    prod on CUDA tensors raised "Expected all tensors to be on the same device": their masks were
    built on the host."""
    import subprocess
    import sys
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", _DEVICE_SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                       cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    got = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    t = torch.tensor([0.5, 1.0, 2.0, -1.0, 0.0, -0.5, -2.0])
    assert got["pow"] == (t ** 1e300).tolist()
    for name, f in (("i0", torch.i0), ("i0e", torch.special.i0e), ("i1", torch.special.i1),
                    ("i1e", torch.special.i1e), ("angle", torch.angle)):
        v = torch.tensor([0.5, -3.0, 12.0], dtype=torch.float64, requires_grad=True)
        y = f(v)
        y.sum().backward()
        assert got[name][0] == "cuda:0"
        np.testing.assert_allclose(got[name][1], y.tolist(), rtol=1e-15)
        np.testing.assert_allclose(got[name][2], v.grad.tolist(), rtol=4e-16)
    a, b = torch.tensor([12, -18, 7]), torch.tensor([8, 12, -3])
    assert got["gcd"] == [torch.gcd(a, b).tolist(), torch.lcm(a, b).tolist()]
    assert got["nextafter"] == torch.nextafter(torch.tensor([0.5, -3.0, 12.0], dtype=torch.float64),
                                               torch.zeros(3, dtype=torch.float64)).tolist()
    s = torch.tensor([2.0, 3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = torch.index_reduce(torch.ones(3), 0, torch.tensor([0, 0]), s, "prod")
    r.sum().backward()
    assert got["index_reduce"] == ["cuda:0", r.tolist(), s.grad.tolist()]
    assert got["scatter_reduce"] == torch.scatter_reduce(torch.ones(3), 0, torch.tensor([0, 0]),
                                                         torch.tensor([2.0, 3.0]), "sum").tolist()
    assert got["as_strided"] == [torch.arange(10.0)[2:].as_strided((2, 2), (1, 1)).tolist(),
                                 torch.arange(10.0)[2:].as_strided((2, 2), (1, 1), 3).tolist()]


def test_as_strided_overlapping_view_writes():
    """An in-place op through a view whose elements share memory: torch's result depends on the
    order of its writes (mul_ multiplies the middle element once per window: [0, 4, 16, 12, 8, 5]);
    numpy's gave each element once ([0, 2, 4, 6, 8, 5]). tracegrad raises torch's error for an
    expanded tensor instead, as for unfold's overlapping windows, eager and compiled; one number
    written to every element (fill_, zero_) is torch's value."""
    x = tg.arange(6.0)
    with pytest.raises(RuntimeError, match="refers to a single memory location"):
        x.as_strided((3, 3), (1, 1)).mul_(2)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    w = tg.arange(6.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="refers to a single memory location"):
        (w * 1).as_strided((3, 3), (1, 1)).mul_(2)
    for write in (lambda v: v.fill_(2.5), lambda v: v.zero_(), lambda v: v.__setitem__((0, 1), 7.0)):
        a, b = tg.arange(6.0), torch.arange(6.0)
        write(a.as_strided((3, 3), (1, 1)))
        write(b.as_strided((3, 3), (1, 1)))
        _same(a, b)

    def fn(t):
        z = t * 1
        z.as_strided((3, 3), (1, 1)).mul_(2)
        return z
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="refers to a single memory location"):
            tg.compile(fn)(tg.arange(6.0))
    # views without shared elements stay writeable, through to their base
    a, b = tg.arange(6.0), torch.arange(6.0)
    a.as_strided((2, 2), (1, 2)).mul_(3)
    b.as_strided((2, 2), (1, 2)).mul_(3)
    _same(a, b)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_index_reduce_rounding_against_torch(dtype, no_beta_warning):
    """On random data, amax and amin are torch's bit for bit; prod and mean are not: torch's
    kernel accumulates slice by slice in index order, rounding each step in the dtype, and
    tracegrad reduces each output's terms at once (scatter_reduce's masked reduction: a 16-bit
    product in float32 rounded once, sums pairwise). The difference is rounding: measured over
    these draws up to 3.2 ulps of the dtype relative to the product, and 0.7 ulps of the largest
    term for the mean (whose cancellation makes a relative measure meaningless); allowed: 8 and 2."""
    rng = np.random.default_rng(6)
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}[dtype]
    for _ in range(4):
        x, s, i = rng.standard_normal((5, 4)) * 2, rng.standard_normal((40, 4)) * 2, rng.integers(0, 5, 40)
        for reduce in REDUCES:
            for inc in (True, False):
                a = tg.index_reduce(tg.tensor(x, dtype=getattr(tg, dtype)), 0, tg.tensor(i),
                                    tg.tensor(s, dtype=getattr(tg, dtype)), reduce, include_self=inc)
                b = torch.index_reduce(torch.tensor(x, dtype=getattr(torch, dtype)), 0, torch.tensor(i),
                                       torch.tensor(s, dtype=getattr(torch, dtype)), reduce, include_self=inc)
                if reduce in ("amax", "amin"):
                    _same(a, b)
                    continue
                a, b = a.double().numpy(), b.double().numpy()
                if reduce == "prod":
                    assert np.all(np.abs(a - b) <= 8 * eps * np.abs(b))
                else:
                    big = np.abs(np.concatenate([x.ravel(), s.ravel()])).max()
                    assert np.all(np.abs(a - b) <= 2 * eps * big)

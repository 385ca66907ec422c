"""torch functions users reach for beyond API.md's list, against torch: signbit, copysign, hypot
(primitives, with Triton lowerings), logaddexp2, deg2rad, rad2deg, logit, sinc, sgn, positive,
float_power, heaviside, addcmul, addcdiv, nansum, nanmean, diff, aminmax (decompositions).
Values on IEEE special values in each float dtype, dtypes of integer and mixed operands, grad_fn
names, gradcheck and gradgradcheck in float64, torch's errors, compiled equal to eager; and a
sweep of binary ops' result dtypes over every pair of dtypes, dimensioned and zero-dim."""
import itertools
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIAL = [0.0, -0.0, 1.0, -2.5, 0.3, 7.0, np.inf, -np.inf, np.nan, 1e-40, 3e38, -3e38, 1e-8]
FLOATS = ["float16", "float32", "float64"]
ULP = {"float16": 2.0 ** -10, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


def pairs(dtype):
    v = np.array(SPECIAL, np.float64)
    with np.errstate(over="ignore"):
        return np.repeat(v, len(v)).astype(dtype), np.tile(v, len(v)).astype(dtype)


def agree(got, want, dtype, ulps=2):
    """NaN where torch has NaN, the same infinities and signed zeros, the rest within `ulps` ulp."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), (got[np.isnan(got) != nan], want[np.isnan(got) != nan])
    exact = ~nan & (np.isinf(want) | (want == 0))
    assert (got[exact] == want[exact]).all() and (np.signbit(got[exact]) == np.signbit(want[exact])).all()
    rest = ~nan & ~exact
    np.testing.assert_allclose(got[rest], want[rest], rtol=ulps * ULP[dtype], atol=0)


BINARY = {"copysign": lambda m, a, b: m.copysign(a, b), "hypot": lambda m, a, b: m.hypot(a, b),
          "logaddexp2": lambda m, a, b: m.logaddexp2(a, b), "heaviside": lambda m, a, b: m.heaviside(a, b),
          "addcmul": lambda m, a, b: m.addcmul(a, a, b, value=0.5), "addcdiv": lambda m, a, b: m.addcdiv(b, a, b),
          "float_power": lambda m, a, b: m.float_power(a, b)}
UNARY = {"deg2rad": lambda m, a: m.deg2rad(a), "rad2deg": lambda m, a: m.rad2deg(a), "logit": lambda m, a: m.logit(a),
         "logit_eps": lambda m, a: m.logit(a, 1e-3), "sinc": lambda m, a: m.sinc(a), "sgn": lambda m, a: m.sgn(a),
         "signbit": lambda m, a: m.signbit(a), "positive": lambda m, a: m.positive(a)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_on_special_values(name, dtype):
    a, b = pairs(dtype)
    got = BINARY[name](tg, tg.tensor(a), tg.tensor(b))
    want = BINARY[name](torch, torch.tensor(a), torch.tensor(b))
    assert str(got.dtype) == str(want.dtype)
    # logaddexp2's and addcmul's composites round twice where torch's kernels round once
    agree(got.numpy(), want.numpy(), dtype, ulps=4 if name in ("logaddexp2", "addcmul", "addcdiv") else 1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_on_special_values(name, dtype):
    with np.errstate(over="ignore"):
        a = np.array(SPECIAL + [0.5, 0.999, 1e-3, -1e-3, 180.0, 1e4, 2.0 ** 30], np.float64).astype(dtype)
    got, want = UNARY[name](tg, tg.tensor(a)), UNARY[name](torch, torch.tensor(a))
    assert str(got.dtype) == str(want.dtype)
    if name == "signbit":
        assert np.array_equal(got.numpy(), want.numpy())
    else:
        # sinc: sin(pi x) / (pi x) with pi x rounded in the dtype, as torch's; a few ulp apart
        agree(got.numpy(), want.numpy(), dtype, ulps=8 if name == "sinc" else 2)


def test_integer_and_bool_operands_take_torchs_dtypes():
    i, f, b = ([1, -2, 0], [0.5, -1.0, 2.0], [True, False, True])
    for fn in (lambda m: m.copysign(m.tensor(i), -1), lambda m: m.copysign(m.tensor(i), m.tensor(f, dtype=m.float64)),
               lambda m: m.deg2rad(m.tensor(i)), lambda m: m.rad2deg(m.tensor(b)), lambda m: m.logit(m.tensor(i)),
               lambda m: m.sinc(m.tensor(i)), lambda m: m.sgn(m.tensor(i)), lambda m: m.signbit(m.tensor(i)),
               lambda m: m.nansum(m.tensor(i)), lambda m: m.float_power(m.tensor(i), 2),
               lambda m: m.float_power(2, m.tensor(f)), lambda m: m.heaviside(m.tensor(i), m.tensor([7])),
               lambda m: m.logaddexp(m.tensor(b), m.tensor(f)), lambda m: m.logaddexp2(m.tensor(i), m.tensor(f)),
               lambda m: m.logaddexp(m.tensor(f), m.tensor(2.0, dtype=m.float64)),
               lambda m: m.addcmul(m.tensor(i), m.tensor(i), m.tensor(i), value=2),
               lambda m: m.diff(m.tensor(b)), lambda m: m.diff(m.tensor(i), 2, prepend=m.tensor([5]))):
        got, want = fn(tg), fn(torch)
        assert str(got.dtype) == str(want.dtype), (got, want)
        np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64), rtol=1e-6)


def test_reductions_and_diff_against_torch():
    r = np.random.default_rng(0)
    x = r.standard_normal((4, 5, 3))
    x[0, 1, 2] = x[3, 0, 0] = np.nan
    x[2, :, 1] = np.nan
    for fn in (lambda m, t: m.nansum(t), lambda m, t: m.nansum(t, 1), lambda m, t: m.nansum(t, (0, 2), keepdim=True),
               lambda m, t: m.nanmean(t), lambda m, t: m.nanmean(t, 1), lambda m, t: m.nanmean(t, -1, True),
               lambda m, t: t.nansum(dtype=m.float32), lambda m, t: m.diff(t), lambda m, t: m.diff(t, 2, 0),
               lambda m, t: m.diff(t, 1, 1, prepend=t[:, :1], append=t[:, -2:]),
               lambda m, t: m.diff(t, 0),
               lambda m, t: m.diff(t, 9), lambda m, t: m.aminmax(t[1]).min, lambda m, t: m.aminmax(t[1]).max,
               lambda m, t: m.aminmax(t[1], dim=0)[0], lambda m, t: m.aminmax(t[1], dim=1, keepdim=True).max,
               lambda m, t: m.aminmax(t, dim=None, keepdim=True)[1]):
        got, want = fn(tg, tg.tensor(x)), fn(torch, torch.tensor(x))
        assert got.shape == tuple(want.shape) and str(got.dtype) == str(want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, equal_nan=True)
    assert repr(tg.aminmax(tg.tensor([1.0, 3.0]))).startswith("torch.return_types.aminmax(\nmin=tensor(1.)")


DIFFERENTIABLE = {
    "copysign": (lambda m, a, b: m.copysign(a, b), "CopysignBackward0"),
    "copysign_number": (lambda m, a, b: m.copysign(a, -1.5) * b, "MulBackward0"),
    "hypot": (lambda m, a, b: m.hypot(a, b), "HypotBackward0"),
    "logaddexp2": (lambda m, a, b: m.logaddexp2(a, b), "Logaddexp2Backward0"),
    "deg2rad": (lambda m, a, b: m.deg2rad(a), "Deg2RadBackward0"),
    "rad2deg": (lambda m, a, b: m.rad2deg(a), "Rad2DegBackward0"),
    "logit": (lambda m, a, b: m.logit(m.sigmoid(a)), "LogitBackward0"),
    "logit_eps": (lambda m, a, b: m.logit(m.sigmoid(a), 0.3), "LogitBackward0"),
    "sinc": (lambda m, a, b: m.sinc(a), "SincBackward0"),
    "sgn": (lambda m, a, b: m.sgn(a) * b, "MulBackward0"),
    "float_power": (lambda m, a, b: m.float_power(a.abs() + 0.5, b), "PowBackward1"),
    "addcmul": (lambda m, a, b: m.addcmul(a, a, b, value=0.7), "AddcmulBackward0"),
    "addcdiv": (lambda m, a, b: m.addcdiv(a, a, b.abs() + 0.5, value=-2), "AddcdivBackward0"),
    "nansum": (lambda m, a, b: m.nansum(a * b, 1), "NansumBackward0"),
    "nanmean": (lambda m, a, b: m.nanmean(a * b, 0), "DivBackward0"),
    "diff": (lambda m, a, b: m.diff(a * b, 2, 1, append=b), "SubBackward0"),
    "aminmax": (lambda m, a, b: m.aminmax(a * b, dim=1).max, "AminmaxBackward0"),
}


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_gradients_against_torch_and_gradcheck(name):
    fn, node = DIFFERENTIABLE[name]
    r = np.random.default_rng(1)
    a, b = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    a[0, 0] = 0.0                                # copysign's and sinc's gradient at 0
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    ga, gb = (tg.tensor(v, requires_grad=True) for v in (a, b))
    out_t, out_g = fn(torch, ta, tb), fn(tg, ga, gb)
    assert type(out_g.grad_fn).__name__ == type(out_t.grad_fn).__name__ == node
    np.testing.assert_allclose(out_g.detach().numpy(), out_t.detach().numpy(), rtol=1e-12, atol=1e-15)
    w = r.standard_normal(tuple(out_t.shape))
    want = torch.autograd.grad(out_t, (ta, tb), torch.tensor(w), allow_unused=True, materialize_grads=True)
    got = tg.autograd.grad(out_g, (ga, gb), tg.tensor(w), allow_unused=True, materialize_grads=True)
    for g1, g2 in zip(got, want):
        np.testing.assert_allclose(g1.numpy(), g2.numpy(force=True), rtol=1e-10, atol=1e-12)
    if name not in ("sgn", "aminmax"):           # sgn's derivative is 0; amax's is not smooth at ties
        f = (lambda x, y: fn(tg, x, y))
        x0 = a.copy()
        x0[0, 0] = 0.25                         # finite differences need a smooth point
        xs = (tg.tensor(x0, requires_grad=True), tg.tensor(b, requires_grad=True))
        assert tg.autograd.gradcheck(f, xs)
        assert tg.autograd.gradgradcheck(f, xs)


def test_errors_as_torchs():
    cases = [lambda m: m.hypot(m.tensor([1, 2]), m.tensor([1, 2])), lambda m: m.hypot(m.tensor([1.0]), 2.0),
             lambda m: m.logaddexp(m.tensor([1.0]), 2.0), lambda m: m.logaddexp(m.tensor([1]), m.tensor([2])),
             lambda m: m.logaddexp(m.tensor([True]), m.tensor([False])),
             lambda m: m.logaddexp2(m.tensor([1]), m.tensor([2])), lambda m: m.nanmean(m.tensor([1, 2])),
             lambda m: m.addcdiv(m.tensor([1]), m.tensor([1]), m.tensor([1])),
             lambda m: m.positive(m.tensor([True])), lambda m: m.heaviside(m.tensor([1]), m.tensor([1.0])),
             lambda m: m.diff(m.tensor(1.0)), lambda m: m.diff(m.tensor([1.0]), -1),
             lambda m: m.diff(m.tensor([1.0, 2.0]), prepend=m.tensor(0.5)),
             lambda m: m.heaviside(m.tensor([1.0, 0.0], requires_grad=True), m.tensor([0.5])).sum().backward()]
    for fn in cases:
        with pytest.raises(Exception) as want:
            fn(torch)
        with pytest.raises(type(want.value)) as got:
            fn(tg)
        assert str(got.value) == str(want.value)


def test_positive_is_its_input_and_inplace_forms_bump_the_version():
    x = tg.tensor([1.0, -2.0])
    assert tg.positive(x) is x
    for name, args in (("copysign_", (-1.0,)), ("hypot_", (tg.tensor([3.0, 4.0]),)), ("logit_", ()), ("sinc_", ()),
                       ("deg2rad_", ()), ("addcmul_", (tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0]))),
                       ("addcdiv_", (tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])))):
        a, t = tg.tensor([0.25, 0.5]), torch.tensor([0.25, 0.5])
        targs = tuple(torch.tensor(v.numpy()) if isinstance(v, tg.Tensor) else v for v in args)
        v = a._version
        assert getattr(a, name)(*args) is a and a._version == v + 1
        getattr(t, name)(*targs)
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-6)


def test_compiled_equals_eager():
    r = np.random.default_rng(2)
    a, b = pairs("float32")
    c = r.standard_normal(a.shape).astype(np.float32)

    def f(m, x, y, z):
        return (m.copysign(x, y), m.hypot(x, y), m.signbit(x), m.logaddexp2(z, y), m.sinc(z), m.logit(m.sigmoid(z)),
                m.deg2rad(z), m.nansum(x), m.nanmean(z), m.diff(z, 2), m.addcdiv(z, z, y.abs() + 1))
    args = [tg.tensor(v) for v in (a, b, c)]
    eager = f(tg, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)            # a fallback to eager fails the test
        compiled = tg.compile(lambda *xs: f(tg, *xs), fullgraph=True)(*args)
    for e, k in zip(eager, compiled):
        np.testing.assert_array_equal(e.numpy(), k.numpy())


TRITON_SCRIPT = r"""
import json, warnings
import numpy as np, torch, tracegrad as tg
vals = [0.0, -0.0, 1.0, -2.5, 0.3, np.inf, -np.inf, np.nan, -np.nan, 1e-40, 3e38, -3e38, 1e-8]
out = {}
for dt in ("float16", "float32", "float64"):
    with np.errstate(over="ignore"):
        a = np.repeat(np.array(vals), len(vals)).astype(dt); b = np.tile(np.array(vals), len(vals)).astype(dt)
    f = tg.compile(lambda x, y: (tg.copysign(x, y), tg.hypot(x, y), tg.signbit(x), tg.copysign(x, -0.0),
                                 tg.heaviside(x, y)), backend="triton", fullgraph=True)
    got = [v.numpy() for v in f(tg.tensor(a), tg.tensor(b))]
    ta, tb = torch.tensor(a), torch.tensor(b)
    want = [torch.copysign(ta, tb).numpy(), torch.hypot(ta, tb).numpy(), torch.signbit(ta).numpy(),
            torch.copysign(ta, -0.0).numpy(), torch.heaviside(ta, tb).numpy()]
    res = []
    for g, w in zip(got, want):
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        nan = np.isnan(w64)
        same = (np.isnan(g64) == nan).all() and (np.signbit(g64[~nan]) == np.signbit(w64[~nan])).all()
        rel = np.abs(g64[~nan] - w64[~nan]) / np.maximum(np.abs(w64[~nan]), np.finfo(dt).tiny)
        res.append([bool(same), float(np.nanmax(np.where(np.isinf(w64[~nan]), 0, rel)))])
    out[dt] = res
print(json.dumps(out))
"""


def test_signbit_copysign_hypot_on_triton_under_the_interpreter():
    """The Triton lowerings (the _signbit and _hypot helpers, heaviside) on every pair of special values, in
    float16, float32 and float64: signs, NaN and infinities as torch's, hypot within an ulp."""
    pytest.importorskip("triton")
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    import json
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for dt, res in out.items():
        ulp = {"float16": 2.0 ** -10, "float32": 2.0 ** -23, "float64": 2.0 ** -52}[dt]
        for same, rel in res:
            assert same and rel <= ulp, (dt, res)


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
PROMOTING = {"add": lambda m, a, b: a + b, "mul": lambda m, a, b: a * b, "div": lambda m, a, b: a / b,
             "sub": lambda m, a, b: a - b, "floordiv": lambda m, a, b: a // b, "pow": lambda m, a, b: a ** b,
             "where": lambda m, a, b: m.where(a > 0, a, b), "maximum": lambda m, a, b: m.maximum(a, b),
             "eq": lambda m, a, b: a == b, "atan2": lambda m, a, b: m.atan2(a, b), "remainder": lambda m, a, b: a % b,
             "and": lambda m, a, b: a & b, "fmod": lambda m, a, b: m.fmod(a, b),
             "copysign": lambda m, a, b: m.copysign(a, b), "hypot": lambda m, a, b: m.hypot(a, b),
             "xlogy": lambda m, a, b: m.xlogy(a, b), "logaddexp": lambda m, a, b: m.logaddexp(a, b),
             "logaddexp2": lambda m, a, b: m.logaddexp2(a, b), "clamp_min": lambda m, a, b: m.clamp(a, min=b)}


def _make(m, dt, shape):
    data = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]).reshape(shape) if shape else np.array(1.0)
    return m.tensor(data, dtype=m.float32).to(getattr(m, dt))


@pytest.mark.parametrize("name", sorted(PROMOTING))
def test_result_dtypes_over_every_pair_of_dtypes(name):
    """Each op over every pair of the ten dtypes, dimensioned and zero-dim operands: tracegrad
    raises where torch does and gives torch's dtype and shape where torch computes."""
    fn = PROMOTING[name]
    wrong = []
    for d1, d2, s1, s2 in itertools.product(DTYPES, DTYPES, [(2, 3), ()], [(2, 3), ()]):
        res = []
        for m in (torch, tg):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = fn(m, _make(m, d1, s1), _make(m, d2, s2))
                res.append((str(r.dtype).split(".")[-1], tuple(r.shape)))
            except Exception as e:
                res.append(type(e).__name__)
        if res[0] != res[1] and not (isinstance(res[0], str) and isinstance(res[1], str)):
            wrong.append((d1, s1, d2, s2, res))
    assert not wrong, wrong[:10]


UNARY_NAMES = """neg abs sign exp exp2 log log2 log10 log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid erf relu floor ceil
round trunc frac isnan isinf isfinite logical_not square reciprocal asin acos atan sinh cosh asinh acosh atanh deg2rad
rad2deg logit sinc sgn signbit nan_to_num cumsum cumprod sum mean prod amax amin argmax argmin var std logsumexp norm
softmax log_softmax nansum nanmean median msort sort bitwise_not clone positive negative absolute fix count_nonzero
all any max min unique flip nonzero argwhere argsort""".split()
UNARY_ARGS = {"cumsum": (0,), "cumprod": (0,), "softmax": (0,), "log_softmax": (0,), "logsumexp": (0,), "flip": ((0,),)}


@pytest.mark.parametrize("shape", [(2, 3), ()])
def test_unary_result_dtypes_over_every_dtype(shape):
    """Where torch computes a unary op or reduction of any of the ten dtypes (a matrix and a
    zero-dim value), tracegrad computes it too, with torch's dtype and shape."""
    data = np.array([[1, 0, 2], [0, 1, 3]], np.float32) if shape else np.array(2.0, np.float32)
    wrong = []
    for name, dt in itertools.product(UNARY_NAMES, DTYPES):
        res = []
        for m in (torch, tg):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = getattr(m, name)(m.tensor(data).to(getattr(m, dt)), *UNARY_ARGS.get(name, ()))
                r = r[0] if isinstance(r, tuple) else r
                res.append((str(r.dtype).split(".")[-1], tuple(r.shape)))
            except Exception as e:
                res.append(type(e).__name__)
        if not isinstance(res[0], str) and res[0] != res[1]:
            wrong.append((name, dt, res))
    assert not wrong, wrong


def test_nonzero_of_a_zero_dim_value_and_bitwise_not():
    for v in (2.0, 0.0, -0.0):
        got, want = tg.nonzero(tg.tensor(v)), torch.nonzero(torch.tensor(v))
        assert got.shape == tuple(want.shape) == ((1, 0) if v else (0, 0))
        (gt,), (wt,) = tg.nonzero(tg.tensor(v), as_tuple=True), torch.nonzero(torch.tensor(v), as_tuple=True)
        assert gt.tolist() == wt.tolist()
        assert tg.tensor(v).argwhere().shape == tuple(torch.tensor(v).argwhere().shape)
    for dt in ("bool", "uint8", "int8", "int32", "int64"):
        a = np.array([0, 1, 5, 127], np.int64)
        got, want = tg.tensor(a).to(getattr(tg, dt)).bitwise_not(), torch.tensor(a).to(getattr(torch, dt)).bitwise_not()
        assert str(got.dtype) == str(want.dtype) and got.tolist() == want.tolist()
    x, t = tg.tensor([3, -4]), torch.tensor([3, -4])
    assert x.bitwise_not_() is x and x.tolist() == t.bitwise_not_().tolist() and x._version == 1
    with pytest.raises(NotImplementedError, match="\"bitwise_not_cpu\" not implemented for 'Float'"):
        tg.bitwise_not(tg.tensor([1.0]))


@pytest.mark.parametrize("make, dim, size, step", [
    (lambda m: m.arange(12.0).reshape(3, 4), 1, 2, 1), (lambda m: m.arange(12.0).reshape(3, 4), 0, 2, 1),
    (lambda m: m.arange(24.0).reshape(2, 3, 4).transpose(0, 2), 1, 2, 1),      # a non-contiguous view
    (lambda m: m.arange(10.0), 0, 3, 2), (lambda m: m.arange(10.0), -1, 4, 3), (lambda m: m.arange(6.0), 0, 0, 2),
    (lambda m: m.tensor(5.0), 0, 1, 1), (lambda m: m.arange(12.0).reshape(3, 4)[:, ::2], 1, 2, 2)])
def test_unfold_is_a_view_with_torchs_values_and_gradients(make, dim, size, step):
    xt, xg = make(torch).double().requires_grad_(), make(tg).double().requires_grad_()
    ut, ug = xt.unfold(dim, size, step), xg.unfold(dim, size, step)
    assert ug.shape == tuple(ut.shape) and type(ug.grad_fn).__name__ == type(ut.grad_fn).__name__
    np.testing.assert_array_equal(ug.detach().numpy(), ut.detach().numpy())
    w = np.cos(np.arange(ut.numel())).reshape(tuple(ut.shape))
    (gt,) = torch.autograd.grad(ut, xt, torch.tensor(w))        # overlapping windows add up
    (gg,) = tg.autograd.grad(ug, xg, tg.tensor(w))
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-14)
    bt, bg = make(torch).double(), make(tg).double()             # a write through the view reaches the base
    vt, vg = bt.unfold(dim, size, step), bg.unfold(dim, size, step)
    if vt.numel():
        vt[(0,) * vt.ndim] = -7.0
        vg[(0,) * vg.ndim] = -7.0
    assert bg.tolist() == bt.tolist() and vg.tolist() == vt.tolist()


def test_unfold_gradients_after_an_inplace_op_on_the_base_and_errors():
    a, at = tg.arange(6.0, dtype=tg.float64).requires_grad_(), torch.arange(6.0, dtype=torch.float64).requires_grad_()
    b, bt = a * 1, at * 1
    u, ut = b.unfold(0, 3, 1), bt.unfold(0, 3, 1)
    b.mul_(2)
    bt.mul_(2)
    u.pow(2).sum().backward()
    ut.pow(2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy())
    x = tg.tensor(np.random.default_rng(0).standard_normal(7), requires_grad=True)
    assert tg.autograd.gradcheck(lambda v: v.unfold(0, 3, 2).exp(), (x,))
    assert tg.autograd.gradgradcheck(lambda v: v.unfold(0, 3, 1) ** 3, (x,))
    for fn in (lambda m: m.ones(3, 4).unfold(1, 5, 1), lambda m: m.ones(3, 4).unfold(1, 2, 0),
               lambda m: m.ones(3, 4).unfold(2, 1, 1), lambda m: m.ones(3, 4).unfold(1, -1, 1)):
        with pytest.raises(Exception) as want:
            fn(torch)
        with pytest.raises(type(want.value)) as got:
            fn(tg)
        assert str(got.value) == str(want.value)
    f = tg.compile(lambda v: (v.unfold(0, 3, 1) * 2).sum(-1), fullgraph=True)
    v = tg.arange(7.0, requires_grad=True)
    out = f(v)
    out.sum().backward()
    assert out.tolist() == [6.0, 12.0, 18.0, 24.0, 30.0] and v.grad.tolist() == [2.0, 4.0, 6.0, 6.0, 6.0, 4.0, 2.0]


def test_inplace_comparisons_casts_and_questions_as_torchs():
    for name in ("eq_", "ne_", "lt_", "le_", "gt_", "ge_", "greater_", "less_equal_", "not_equal_", "logical_and_",
                 "logical_xor_", "multiply_", "subtract_", "true_divide_", "divide_"):
        for dt, other in (("float32", [1.0, 3.0, 4.0]), ("int64", [1, 3, 4])):
            t, g = torch.tensor([1, 2, 0]).to(getattr(torch, dt)), tg.tensor([1, 2, 0]).to(getattr(tg, dt))
            res = []
            for m, x in ((torch, t), (tg, g)):
                try:
                    out = getattr(x, name)(m.tensor(other))
                    res.append((out is x, str(x.dtype), x.tolist()))
                except Exception as e:
                    res.append((type(e).__name__, str(e)))
            assert res[0] == res[1], (name, dt, res)
    for name in ("absolute_", "negative_", "arctan_", "tan_", "log2_"):
        t, g = torch.tensor([0.5, 2.0]), tg.tensor([0.5, 2.0])
        getattr(t, name)()
        assert getattr(g, name)() is g and g.numpy().tolist() == pytest.approx(t.tolist(), rel=1e-6)
    x, xt = tg.tensor([1.5, -2.0, 300.0]), torch.tensor([1.5, -2.0, 300.0])
    for name in ("byte", "char", "short"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got, want = getattr(x[:2], name)(), getattr(xt[:2], name)()
        assert str(got.dtype) == str(want.dtype) and got.tolist() == want.tolist()
    assert x.is_cpu and x.is_signed() and not tg.tensor([1], dtype=tg.uint8).is_signed()
    assert x.is_same_size(tg.zeros(3)) and not x.is_same_size(tg.zeros(2))
    assert not x.is_conj() and not x.is_neg() and x.conj() is x and x.resolve_conj() is x
    assert tg.tensor([2.0]).is_nonzero() and not tg.tensor(0.0).is_nonzero()
    for bad in (tg.tensor([1.0, 2.0]), tg.tensor([])):
        with pytest.raises(RuntimeError, match="ambiguous"):
            bad.is_nonzero()
    a, b = tg.tensor([1.0, np.nan, 2.0]), tg.tensor([1.0 + 1e-9, np.nan, 2.1])
    assert a.isclose(b).tolist() == torch.tensor([1.0, np.nan, 2.0]).isclose(
        torch.tensor([1.0 + 1e-9, np.nan, 2.1])).tolist()
    assert a.isclose(b, equal_nan=True).tolist() == [True, True, False]


def test_erfc_keeps_its_tail():
    """erfc without 1 - erf's cancellation: against math.erfc to a few float64 ulp down to 1e-300
    (erfc(10) is 2.1e-45, erfc(26) 5.7e-296), 2 - erfc(|x|) below 0; float32 and float16 rounded
    once; the derivative -2/sqrt(pi) exp(-x^2), gradcheck and gradgradcheck; torch's dtypes."""
    import math
    x = np.linspace(-30, 27, 20001)
    ref = np.array([math.erfc(v) for v in x])
    got = tg.erfc(tg.tensor(x)).numpy()
    ok = ref > 1e-300
    assert (np.abs(got[ok] - ref[ok]) <= 8 * np.spacing(ref[ok])).all()
    assert (got[~ok] <= 1e-300).all() and (got >= 0).all()
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 27.5, -27.5])
    np.testing.assert_array_equal(tg.erfc(tg.tensor(special)).numpy(), torch.erfc(torch.tensor(special)).numpy())
    for dt in ("float32", "float16"):
        xs = x.astype(dt)
        want = np.array([math.erfc(float(v)) for v in xs]).astype(dt)
        np.testing.assert_array_equal(tg.erfc(tg.tensor(xs)).numpy(), want)
    assert str(tg.erfc(tg.tensor([1, 2])).dtype) == str(torch.erfc(torch.tensor([1, 2])).dtype)
    xt, xg = torch.tensor(x[::50], requires_grad=True), tg.tensor(x[::50], requires_grad=True)
    (gt,) = torch.autograd.grad(torch.erfc(xt).sum(), xt)
    (gg,) = tg.autograd.grad(tg.erfc(xg).sum(), xg)
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-13, atol=1e-300)
    assert type(tg.erfc(xg).grad_fn).__name__ == "ErfcBackward0"
    p = tg.tensor([0.3, -1.2, 2.5, 5.0], dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(tg.erfc, (p,)) and tg.autograd.gradgradcheck(tg.erfc, (p,))
    v = tg.tensor([0.5, 3.0])
    assert v.erfc_() is v and v.tolist() == pytest.approx([math.erfc(0.5), math.erfc(3.0)], rel=1e-6)


SPECIAL_FNS = ["expit", "logit", "erf", "erfc", "exp2", "expm1", "log1p", "sinc", "ndtr"]


@pytest.mark.parametrize("name", SPECIAL_FNS)
def test_special_namespace_against_torch(name):
    x = np.array([0.5, -1.0, 0.0, 3.0, -40.0, 8.0, 0.25, np.nan, np.inf, -np.inf])
    xt, xg = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    want, got = getattr(torch.special, name)(xt), getattr(tg.special, name)(xg)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-300, equal_nan=True)
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    fin = np.isfinite(x) & (x > -30) & (np.abs(x) != 1)
    (gt,) = torch.autograd.grad(want[torch.tensor(fin)].sum(), xt)
    (gg,) = tg.autograd.grad(got[tg.tensor(fin)].sum(), xg)
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-10, atol=1e-300, equal_nan=True)


def test_special_xlog1py_round_and_reductions():
    x, y = np.array([0.0, 0.0, 1.0, 2.0, 0.0, 3.0]), np.array([-1.0, np.nan, -1.0, 0.5, np.inf, -0.5])
    xt, yt = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    xg, yg = tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)
    want, got = torch.special.xlog1py(xt, yt), tg.special.xlog1py(xg, yg)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert type(got.grad_fn).__name__ == "SpecialXlog1PyBackward0"
    keep = [3, 5]
    wt = torch.autograd.grad(want[keep].sum(), (xt, yt))
    wg = tg.autograd.grad(got[tg.tensor(keep)].sum(), (xg, yg))
    for a, b in zip(wg, wt):             # a zero gradient stays zero where log1p(y) is infinite, as torch's
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, equal_nan=True)
    z = np.array([[1.25, -2.5, 0.3], [4.0, 0.0, -1.0]])
    assert tg.special.round(tg.tensor(z), decimals=1).tolist() == torch.special.round(torch.tensor(z), decimals=1).tolist()
    for fn in (lambda m: m.special.softmax(m.tensor(z), 1), lambda m: m.special.log_softmax(m.tensor(z), 0),
               lambda m: m.special.logsumexp(m.tensor(z), 1)):
        np.testing.assert_allclose(fn(tg).numpy(), fn(torch).numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_gradient_where_the_upstream_gradient_is_zero(name):
    """A masked-out term of a loss (gradient 0) where log(y) is infinite: torch's derivative in x
    is xlogy(grad, y), 0 there (x * log(y) by the chain rule gave 0 * -inf = NaN, and NaN weights
    after the step); the derivative in y is grad * x / y (NaN at 0 / 0, as torch's)."""
    tf = torch.xlogy if name == "xlogy" else torch.special.xlog1py
    gf = tg.xlogy if name == "xlogy" else tg.special.xlog1py
    edge = 0.0 if name == "xlogy" else -1.0
    x = np.array([1.0, 0.0, 2.0, 0.0, 3.0, -1.0])
    y = np.array([edge, edge, 3.0, np.nan, edge - 1.0, 0.5])
    g = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 2.0])
    xt, yt = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    xg, yg = tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)
    want, got = tf(xt, yt), gf(xg, yg)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    for a, b in zip(tg.autograd.grad(got, (xg, yg), tg.tensor(g)), torch.autograd.grad(want, (xt, yt), torch.tensor(g))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for args in ((xt, 2.0), (2.0, yt)):
        assert type(gf(*[tg.tensor(a.detach().numpy(), requires_grad=True) if isinstance(a, torch.Tensor) else a
                         for a in args]).grad_fn).__name__ == type(tf(*args).grad_fn).__name__
    p = tg.tensor([0.5, 1.5, 2.0], dtype=tg.float64, requires_grad=True)
    q = tg.tensor([0.7, 2.0, 0.3], dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(gf, (p, q)) and tg.autograd.gradgradcheck(gf, (p, q))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_shift_operators_as_torch(dtype):
    """<<, >>, their reflected and in-place forms and bitwise_left/right_shift: a shift by a
    negative amount or by the width or more gives 0 (left) or the sign (right), as torch's
    kernels; the result dtype is the promoted one; bool and float operands raise torch's error."""
    xs = [1, -8, 100, 0, 127, -128] if dtype != "uint8" else [1, 8, 200, 0, 255, 128]
    ops = {"l": lambda m, x, s: x << s, "r": lambda m, x, s: x >> s,
           "rl": lambda m, x, s: 3 << (x % 9), "rr": lambda m, x, s: -1000 >> (x % 9),
           "il": lambda m, x, s: x.clone().__ilshift__(s), "ir": lambda m, x, s: x.clone().__irshift__(s),
           "fn": lambda m, x, s: m.bitwise_left_shift(x, s), "method": lambda m, x, s: x.bitwise_right_shift(s),
           "tensor": lambda m, x, s: x << m.full((6,), s, dtype=m.int64),
           "tensor8": lambda m, x, s: x >> m.full((6,), s, dtype=m.int8)}
    for s in (-100, -1, 0, 1, 3, 7, 8, 15, 16, 31, 32, 63, 64, 100):
        for name, f in ops.items():
            want = f(torch, torch.tensor(xs, dtype=getattr(torch, dtype)), s)
            got = f(tg, tg.tensor(xs, dtype=getattr(tg, dtype)), s)
            assert str(got.dtype) == str(want.dtype) and got.tolist() == want.tolist(), (dtype, s, name)
    for a, b in ((torch.tensor([True]), torch.tensor([True])), (torch.tensor([1.5]), 1), (torch.tensor([1]), 1.5)):
        with pytest.raises(NotImplementedError) as e:
            a << b
        with pytest.raises(NotImplementedError, match=re.escape(str(e.value))):
            tg.tensor(a.numpy()) << (b if not isinstance(b, torch.Tensor) else tg.tensor(b.numpy()))
    f = tg.compile(lambda x, s: (x << s) >> 1, fullgraph=True)
    x, s = tg.tensor([1, -8, 100], dtype=tg.int32), tg.tensor([1, 40, -2], dtype=tg.int32)
    assert f(x, s).tolist() == ((x << s) >> 1).tolist() == [1, 0, 0]

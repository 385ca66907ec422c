"""The Triton backend on IEEE special values (NaN, +-inf, +-0.0, subnormals, the largest
floats), under Triton's interpreter, against torch: NaN wins in max/min/argmax reductions,
pow follows C's special cases (and computes |x| ** y in float64), floor_divide by zero and
a zero quotient keep torch's signs, round keeps the sign of a zero and leaves large floats
alone, log1p and expm1 of huge values are inf, fmod by an infinite divisor is the dividend.
Each case failed before its fix (a NaN row's max came out inf, 1 ** inf NaN, 7 ** 2 49.000008,
x // 0 NaN, round(2**23 + 1) 2**23 + 2, log1p(3e38) NaN, fmod(1, inf) NaN). The kernels also
compile for sm_90 with the real compiler."""
import os

import numpy as np
import pytest
import torch

from test_triton_interpret import triton, triton_interpreter  # noqa: F401  (the interpreter's set-up)

import tracegrad as tg  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, -2.5, 2.0, 3.0, 7.0, -7.0, 100.0,
           1e-40, 1e-8, 3e38, -3e38]
ULPS = {"float32": 2.0 ** -21, "float16": 2.0 ** -9}          # 2 units in the last place


def _same(got, want, dtype, what):
    """NaN where torch has NaN, the same infinities, the sign of every zero; other values
    within 2 ulp (the interpreter's exp and log are numpy's, torch's its own)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), (what, got[np.isnan(got) != nan], want[np.isnan(got) != nan])
    exact = ~nan & (np.isinf(want) | (want == 0))
    bad = exact & ((got != want) | (np.signbit(got) != np.signbit(want)))
    assert not bad.any(), (what, np.argwhere(bad)[:5].tolist(), got[bad][:5], want[bad][:5])
    rest = ~nan & ~exact
    np.testing.assert_allclose(got[rest], want[rest], rtol=ULPS[dtype], atol=0, err_msg=what)


def _triton(fn, *arrays):
    f = tg.compile(lambda *xs: fn(tg, *xs), backend="triton")
    out = f(*[tg.tensor(a) for a in arrays])
    return out.numpy()


def _torch(fn, *arrays):
    return fn(torch, *[torch.tensor(a) for a in arrays]).numpy()


def _pairs(dtype):
    v = np.array(SPECIAL, np.float64)
    return np.repeat(v, len(v)).astype(dtype), np.tile(v, len(v)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", ["amax", "amin", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("dim", [1, 0, None])
def test_a_nan_wins_in_max_min_and_their_positions(op, dim, dtype):
    x = np.array([[1.0, np.nan, np.inf, -3.0], [np.inf, -np.inf, 2.0, np.nan], [0.5, 2.0, -1.0, 0.0],
                  [-np.inf, -0.0, np.nan, 5.0], [4.0, 4.0, -2.0, 1.0]], dtype)
    if dim is None:
        fn = lambda m, x: getattr(m, op)(x)          # noqa: E731
    elif op in ("max", "min"):
        fn = lambda m, x: getattr(m, op)(x, dim=dim)[0]          # noqa: E731
    else:
        fn = lambda m, x: getattr(m, op)(x, dim=dim)          # noqa: E731
    got, want = _triton(fn, x), _torch(fn, x)
    if op.startswith("arg"):
        np.testing.assert_array_equal(got, want)
    else:
        _same(got, want, dtype, f"{op} dim={dim}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_pow_of_two_tensors_follows_c(dtype):
    x, y = _pairs(dtype)
    _same(_triton(lambda m, a, b: m.pow(a, b), x, y), _torch(lambda m, a, b: m.pow(a, b), x, y), dtype, "pow")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("e", [2.5, -2.5, 5, -3, 0.5, 0.1, float("inf"), float("-inf")])
def test_pow_with_a_number_exponent_follows_c(e, dtype):
    x = np.array(SPECIAL, dtype)
    fn = lambda m, a: a ** e          # noqa: E731
    _same(_triton(fn, x), _torch(fn, x), dtype, f"x ** {e}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("b", [2.0, 1.0, 0.5, -2.0])
def test_pow_with_a_number_base_follows_c(b, dtype):
    x = np.array(SPECIAL, dtype)
    fn = lambda m, a: b ** a          # noqa: E731
    _same(_triton(fn, x), _torch(fn, x), dtype, f"{b} ** x")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", ["floor_divide", "fmod", "remainder"])
def test_division_by_zero_and_infinity_keeps_torchs_values_and_signs(op, dtype):
    x, y = _pairs(dtype)
    fn = lambda m, a, b: getattr(m, op)(a, b)          # noqa: E731
    want = _torch(fn, x, y)
    if op in ("fmod", "remainder"):
        # fmod is exact in any precision: C's result is torch's in float64, rounded back (torch's
        # float32 kernel takes a - trunc(a / b) * b in its vectorized loop, NaN where a / b
        # overflows: fmod(7, 1e-40) is NaN on 8 elements and 5.9e-41 on one)
        want = _torch(fn, x.astype(np.float64), y.astype(np.float64)).astype(dtype)
    _same(_triton(fn, x, y), want, dtype, op)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", ["round", "log1p", "expm1"])
def test_round_log1p_expm1_at_the_edges(op, dtype):
    x = np.array(SPECIAL + [-0.3, 0.3, -1.5, 2.5, 8388609.0, -8388609.0, 16777215.0, 88.0, 89.0, 700.0], dtype)
    fn = lambda m, a: getattr(m, op)(a)          # noqa: E731
    _same(_triton(fn, x), _torch(fn, x), dtype, op)


def test_the_special_value_kernels_compile_for_sm90():
    """float64 exp/log in pow, NaN-propagating max, the new helpers: the real compiler takes them."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import triton_traffic as TT
    rng = np.random.default_rng(0)
    x, y = (tg.tensor(rng.standard_normal((64, 256)).astype(np.float32)) for _ in range(2))

    def f(m, a, b):
        return (m.pow(a, b) + a ** 2.5 + 2.0 ** b + m.floor_divide(a, b) + m.round(a) + m.log1p(a.abs())
                + m.expm1(b) + m.fmod(a, b)).amax(1) + a.argmax(1)
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        progs = TT.programs(f, [x, y])
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog)]
    assert specs
    results = TT.compile_all(specs, arch=90)
    assert not [r for r in results if "error" in r], results
    assert not [r for r in results if r["spill"]], results

"""Creation functions against torch: dtype inference, shapes, values (bit for bit where torch's
are deterministic), memory sharing, errors with torch's types and messages, random statistics
and seeding."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def run(fn, m):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(m), None
    except Exception as e:      # noqa: BLE001  (the exception itself is compared)
        return None, e


def as_numpy(t):
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    return np.asarray(t._data)


def same(got, want, what=""):
    """Same dtype, shape and values, bit for bit (NaNs equal)."""
    assert isinstance(got, tg.Tensor), (what, got)
    assert str(got.dtype) == str(want.dtype), (what, got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (what, tuple(got.shape), tuple(want.shape))
    g, w = as_numpy(got), as_numpy(want)
    assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
    if g.dtype.kind == "f":
        np.testing.assert_array_equal(g.view(f"u{g.itemsize}")[~np.isnan(g)], w.view(f"u{w.itemsize}")[~np.isnan(w)],
                                      err_msg=str(what))
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=str(what))
    else:
        np.testing.assert_array_equal(g, w, err_msg=str(what))
    assert got.requires_grad == want.requires_grad, what


def check(fn, what=None, values=True):
    """fn(torch) and fn(tracegrad) give the same tensor, or raise the same exception and message."""
    r, re = run(fn, torch)
    g, ge = run(fn, tg)
    what = fn if what is None else what
    if re is not None:
        assert ge is not None, (what, "torch raised", re, "tracegrad gave", g)
        assert type(ge) is type(re), (what, ge, re)
        assert str(ge) == str(re), (what, str(ge), str(re))
        return None, None
    assert ge is None, (what, "tracegrad raised", ge)
    if values:
        same(g, r, what)
    else:
        assert str(g.dtype) == str(r.dtype) and tuple(g.shape) == tuple(r.shape), (what, g, r)
    return g, r


def check_all(fns, **kw):
    for fn in fns:
        check(fn, **kw)


# == tensor() =====================================================================================

PYTHON_DATA = [
    1, 1.5, True, -0.0, [], [[]], [[], []], [[], [1]], [[], 5], [1, 2], [1.0, 2], [True, False], [True, 2],
    [True, 2.5], [[1, 2], [3, 4]], ((1, 2), (3, 4)), [(1, 2), [3, 4]], range(4), [range(2), range(2)],
    [[[1], [2]], [[3], [4]]], [float("nan"), float("inf"), -float("inf")], [2 ** 62, -2 ** 63], [1e300, 1e-300],
    [np.float32(1), 2], [np.float16(1), 2], [np.float16(1), 2.5], [np.float64(1), 2], [np.int8(1), np.uint8(2)],
    [True, np.uint8(3)], [np.int32(1), np.int16(2)], [np.bool_(True), False], np.float32(2.5), np.float16(2.5),
    np.int32(3), np.uint8(200), np.bool_(True), np.float64(0.1), [np.array([1, 2], np.int32), np.array([3, 4])],
    [[1, 2], np.array([3, 4])], [np.array([3.5, 4], np.float32), [1, 2]],
]


@pytest.mark.parametrize("i", range(len(PYTHON_DATA)))
def test_tensor_from_python_data(i):
    data = PYTHON_DATA[i]
    check(lambda m: m.tensor(data), data)
    for name in ("float64", "float16", "bfloat16", "int32", "bool", "uint8"):
        check(lambda m: m.tensor(data, dtype=getattr(m, name)), (data, name))


def test_tensor_from_tensors_in_lists():
    check_all([
        lambda m: m.tensor([m.tensor(1), m.tensor(2.5)]),
        lambda m: m.tensor([m.tensor(1, dtype=m.int32), m.tensor(2, dtype=m.int32)]),
        lambda m: m.tensor([m.tensor(1, dtype=m.int8), m.tensor(2, dtype=m.uint8)]),
        lambda m: m.tensor([m.tensor(1, dtype=m.float64), 2]),
        lambda m: m.tensor([m.tensor([1.]), m.tensor([3.])]),
        lambda m: m.tensor([[m.tensor(1), 2], [3, m.tensor(True)]]),
        lambda m: m.tensor([m.tensor([1., 2.]), m.tensor([3., 4.])]),
        lambda m: m.tensor([m.tensor([1, 2]), m.tensor([3, 4])]),
        lambda m: m.tensor([m.tensor(1.5)], dtype=m.int64),
    ])


@pytest.mark.parametrize("npdt", [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                                  np.uint8, np.bool_])
def test_tensor_from_numpy_arrays(npdt):
    a = np.array([[1, 0, 2], [3, 4, 0]]).astype(npdt)
    for src in (a, a.T, a[:, ::2], np.asfortranarray(a), a[0, 0], np.array(a[0, 0]), a[:0]):
        check(lambda m: m.tensor(src), src)
        check(lambda m: m.as_tensor(src), src)
        for name in ("float32", "float16", "bfloat16", "int64", "bool"):
            check(lambda m: m.tensor(src, dtype=getattr(m, name)), (src, name))
            check(lambda m: m.as_tensor(src, dtype=getattr(m, name)), (src, name))


def test_tensor_conversions_to_explicit_dtypes():
    check_all([
        lambda m: m.tensor([0.5, -1.7, 2.9], dtype=m.int64), lambda m: m.tensor([1, 2, 0], dtype=m.bool),
        lambda m: m.tensor([2.5, float("nan"), 0.0, -0.0], dtype=m.bool), lambda m: m.tensor([-1, -255], dtype=m.uint8),
        lambda m: m.tensor([255.0, 0.0], dtype=m.uint8), lambda m: m.tensor([-128.0, 127], dtype=m.int8),
        lambda m: m.tensor([1e40, -1e40], dtype=m.float32), lambda m: m.tensor([70000.0, 65504], dtype=m.float16),
        lambda m: m.tensor([1 + 2 ** -11 + 2 ** -40], dtype=m.float16), lambda m: m.tensor([True, 2.5], dtype=m.int32),
        lambda m: m.tensor(np.array([1.7, -2.7]), dtype=m.int32), lambda m: m.tensor(np.array([1e10]), dtype=m.int64),
        lambda m: m.tensor([1.1, 2.2], dtype=m.bfloat16), lambda m: m.tensor(2 ** 63 - 1),
        lambda m: m.tensor([2 ** 70], dtype=m.float32), lambda m: m.tensor(3, dtype=m.float64),
    ])


def test_tensor_copies_its_input():
    for m in (torch, tg):
        a = np.zeros(3)
        t = m.tensor(a)
        a[0] = 5
        assert t[0].item() == 0
        src = m.ones(2)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            u = m.tensor(src)
        assert any("sourceTensor.detach().clone()" in str(x.message) for x in w)
        src.add_(1)
        assert u.tolist() == [1.0, 1.0]
    ro = np.arange(3.0)
    ro.flags.writeable = False
    t = tg.tensor(ro)
    t.add_(1)
    assert t.tolist() == [1.0, 2.0, 3.0]


TENSOR_ERRORS = [
    lambda m: m.tensor([[1, 2], [3, 4, 5]]), lambda m: m.tensor([[1, 2], [3]]), lambda m: m.tensor([[1.0, 2], [3.0]]),
    lambda m: m.tensor([[[1, 2], [3, 4]], [[1, 2], [3]]]), lambda m: m.tensor([[[1, 2], [3, 4]], [[1, 2]]]),
    lambda m: m.tensor([[1], []]), lambda m: m.tensor([[1, 2], 3]), lambda m: m.tensor([[1], 2]),
    lambda m: m.tensor([1, [2, 3]]), lambda m: m.tensor([1.0, [2.0, 3.0]]), lambda m: m.tensor([True, [2, 3]]),
    lambda m: m.tensor([True, [1]], dtype=m.bool), lambda m: m.tensor([np.array([3, 4]), [1, 2, 3]]),
    lambda m: m.tensor([np.array([3, 4, 5]), [1, 2]]), lambda m: m.tensor(None), lambda m: m.tensor([None]),
    lambda m: m.tensor([1, None]), lambda m: m.tensor([1, None], dtype=m.float32),
    lambda m: m.tensor([1, None], dtype=m.int64), lambda m: m.tensor("abc"), lambda m: m.tensor([1, "a"]),
    lambda m: m.tensor([1, "a"], dtype=m.float32), lambda m: m.tensor([np.array(2.0), np.array(3.0)]),
    lambda m: m.tensor([300.0], dtype=m.uint8), lambda m: m.tensor([-1.7], dtype=m.uint8),
    lambda m: m.tensor([-1.0], dtype=m.uint8), lambda m: m.tensor([255.5], dtype=m.uint8),
    lambda m: m.tensor([-256], dtype=m.uint8), lambda m: m.tensor(300, dtype=m.uint8),
    lambda m: m.tensor([128], dtype=m.int8), lambda m: m.tensor([-128.9], dtype=m.int8),
    lambda m: m.tensor([40000], dtype=m.int16), lambda m: m.tensor([2 ** 31], dtype=m.int32),
    lambda m: m.tensor([float("inf")], dtype=m.int32), lambda m: m.tensor(float("nan"), dtype=m.int64),
    lambda m: m.tensor([1e19], dtype=m.int64), lambda m: m.tensor([2 ** 63]), lambda m: m.tensor([-2 ** 63 - 1]),
    lambda m: m.tensor(np.zeros((3, 4))[:, ::-1]), lambda m: m.as_tensor(np.zeros(3)[::-1]),
    lambda m: m.tensor(np.zeros(3, dtype=">f4")),
    lambda m: m.tensor([1, 2], requires_grad=True), lambda m: m.tensor([True], requires_grad=True),
    lambda m: m.tensor([1.0], dtype=m.int32, requires_grad=True),
]


@pytest.mark.parametrize("i", range(len(TENSOR_ERRORS)))
def test_tensor_errors(i):
    r, re = run(TENSOR_ERRORS[i], torch)
    assert re is not None, "torch accepts this input: the case is mis-specified"
    check(TENSOR_ERRORS[i])


def test_unsupported_numpy_dtype_error():
    for m in (torch, tg):
        with pytest.raises(TypeError, match=r"^can't convert np.ndarray of type numpy.object_. The only supported"):
            m.tensor(np.array([None, 1], dtype=object))
        with pytest.raises(TypeError, match=r"^can't convert np.ndarray of type numpy.object_. The only supported"):
            m.from_numpy(np.array([None, 1], dtype=object))


def test_requires_grad_at_creation():
    for fn in [lambda m: m.tensor([1.0, 2.0], requires_grad=True), lambda m: m.zeros(2, requires_grad=True),
               lambda m: m.arange(3.0, requires_grad=True), lambda m: m.full((2,), 1.5, requires_grad=True),
               lambda m: m.eye(2, requires_grad=True), lambda m: m.linspace(0, 1, 3, requires_grad=True),
               lambda m: m.rand(2, requires_grad=True), lambda m: m.randn(2, dtype=m.float64, requires_grad=True),
               lambda m: m.empty(2, requires_grad=True), lambda m: m.ones_like(m.ones(2), requires_grad=True),
               lambda m: m.randint(0, 3, (2,), dtype=m.float32, requires_grad=True)]:
        g, r = check(fn, values=False)
        assert g.is_leaf and g.grad_fn is None and g.requires_grad
    check_all([
        lambda m: m.zeros(2, dtype=m.int64, requires_grad=True), lambda m: m.arange(3, requires_grad=True),
        lambda m: m.full((2,), 1, requires_grad=True), lambda m: m.eye(2, dtype=m.int64, requires_grad=True),
        lambda m: m.randint(0, 3, (2,), requires_grad=True), lambda m: m.ones(2, dtype=m.bool, requires_grad=True),
        lambda m: m.linspace(0, 1, 3, dtype=m.int64, requires_grad=True),
        lambda m: m.zeros_like(m.ones(2, dtype=m.int32), requires_grad=True),
    ])


# == shapes, sizes and their errors ===================================================================

@pytest.mark.parametrize("fname", ["zeros", "ones", "empty", "rand", "randn"])
def test_factory_shapes(fname):
    sizes = [(2, 3), ((2, 3),), ([2, 3],), (lambda m: m.Size([2, 3]),), ((),), (0,), (2, 0, 3), (np.int64(3),),
             (lambda m: m.tensor(3),), ((lambda m: m.tensor(2), 3),), (2, True), (1, 1, 1, 1, 1)]

    def resolve(x, m):
        if callable(x):
            return x(m)
        if isinstance(x, tuple):
            return tuple(resolve(e, m) for e in x)
        return x
    for size in sizes:
        fn = (lambda m, size=size: getattr(m, fname)(*resolve(size, m)))
        check(fn, (fname, size), values=fname in ("zeros", "ones"))
        for name in ("float64", "float16", "bfloat16"):
            check(lambda m, size=size: getattr(m, fname)(*resolve(size, m), dtype=getattr(m, name)),
                  (fname, size, name), values=fname in ("zeros", "ones"))
    if fname in ("zeros", "ones", "empty"):
        for name in ("int64", "int32", "int8", "uint8", "bool"):
            check(lambda m: getattr(m, fname)(2, 3, dtype=getattr(m, name)), (fname, name), values=fname != "empty")


SIZE_ERRORS = [
    lambda m: m.zeros(-1), lambda m: m.zeros(2, -3), lambda m: m.zeros((2, -1)), lambda m: m.zeros(m.Size([2, -1])),
    lambda m: m.ones(-1), lambda m: m.ones((2, -3)), lambda m: m.empty(-1), lambda m: m.rand(2, -1),
    lambda m: m.randn(-1), lambda m: m.full((2, -1), 1.0), lambda m: m.randint(0, 10, (-1,)),
    lambda m: m.zeros(2.5), lambda m: m.zeros(2, 3.5), lambda m: m.zeros((2, 2.5)), lambda m: m.zeros([2, None]),
    lambda m: m.zeros(True), lambda m: m.zeros("a"), lambda m: m.ones(2.5), lambda m: m.ones(2, 2.5),
    lambda m: m.empty(2.5), lambda m: m.rand(2.5), lambda m: m.randn(2.5), lambda m: m.zeros(np.float64(2)),
    lambda m: m.zeros(2, np.float64(2)), lambda m: m.zeros(m.tensor(2.0)), lambda m: m.zeros(), lambda m: m.ones(),
    lambda m: m.empty(), lambda m: m.full(2, 1.0), lambda m: m.full((2.5,), 3), lambda m: m.full((2,), None),
    lambda m: m.full((2,), m.tensor([1.5])), lambda m: m.full((2,), m.tensor([1.5, 2.0])),
]


@pytest.mark.parametrize("i", range(len(SIZE_ERRORS)))
def test_size_errors(i):
    r, re = run(SIZE_ERRORS[i], torch)
    assert re is not None, "torch accepts this input: the case is mis-specified"
    check(SIZE_ERRORS[i])


# == full, eye, *_like =================================================================================

def test_full_dtype_inference_and_values():
    check_all([
        lambda m: m.full((2,), True), lambda m: m.full((2,), 2), lambda m: m.full((2,), 2.0),
        lambda m: m.full((2,), -0.0), lambda m: m.full((2,), np.float32(2.5)), lambda m: m.full((2,), np.int32(2)),
        lambda m: m.full((2,), np.bool_(True)), lambda m: m.full((2,), m.tensor(3)),
        lambda m: m.full((2,), m.tensor(1.5)), lambda m: m.full((2,), m.tensor(2, dtype=m.int32)),
        lambda m: m.full((2,), m.tensor(True)), lambda m: m.full((), 3), lambda m: m.full([2], 3),
        lambda m: m.full(m.Size([2, 1]), 3), lambda m: m.full((2,), 1.5, dtype=m.int64),
        lambda m: m.full((2,), -1.5, dtype=m.int64), lambda m: m.full((2,), 3.5, dtype=m.bool),
        lambda m: m.full((2,), float("nan"), dtype=m.bool), lambda m: m.full((2,), -1, dtype=m.uint8),
        lambda m: m.full((2,), -255, dtype=m.uint8), lambda m: m.full((2,), 1 + 2 ** -11 + 2 ** -40, dtype=m.float16),
        lambda m: m.full((1,), 70000.0, dtype=m.float16), lambda m: m.full((1,), 1e39, dtype=m.bfloat16),
        lambda m: m.full((2,), float("-inf"), dtype=m.float16), lambda m: m.full((3,), 65504, dtype=m.float16),
        lambda m: m.full((2,), 0.1, dtype=m.bfloat16), lambda m: m.full((2,), 3, dtype=m.float16),
        lambda m: m.full((2,), float("inf")), lambda m: m.full((2,), 1e300, dtype=m.float64),
        lambda m: m.full((2,), 1e10, dtype=m.int64),
    ])


def test_full_overflow_errors():
    check_all([
        lambda m: m.full((2,), 300, dtype=m.uint8), lambda m: m.full((2,), -256, dtype=m.uint8),
        lambda m: m.full((2,), -1.5, dtype=m.uint8), lambda m: m.full((2,), 128, dtype=m.int8),
        lambda m: m.full((2,), 40000, dtype=m.int16), lambda m: m.full((2,), 2 ** 31, dtype=m.int32),
        lambda m: m.full((2,), float("inf"), dtype=m.int64), lambda m: m.full((2,), float("nan"), dtype=m.int32),
        lambda m: m.full((2,), 2 ** 63), lambda m: m.full((2,), 1e40), lambda m: m.full((1,), 3.5e38),
        lambda m: m.full((2,), np.float64(1e40)), lambda m: m.full((2,), 1e19, dtype=m.int64),
        lambda m: m.full((2,), 70000.0, dtype=m.float16), lambda m: m.full((0,), 65519, dtype=m.float16),
        lambda m: m.full((2,), 3.4e38, dtype=m.bfloat16), lambda m: m.full((1,), 3.5e38, dtype=m.float32),
        lambda m: m.linspace(70000, 1, 3, dtype=m.float16), lambda m: m.linspace(1, 1e40, 3),
    ])


def test_eye():
    check_all([
        lambda m: m.eye(3), lambda m: m.eye(2, 3), lambda m: m.eye(3, 2, dtype=m.bool), lambda m: m.eye(0),
        lambda m: m.eye(2, 0), lambda m: m.eye(2, dtype=m.float16), lambda m: m.eye(4, dtype=m.int32),
        lambda m: m.eye(2, dtype=m.bfloat16), lambda m: m.eye(np.int64(2)), lambda m: m.eye(m.tensor(2)),
        lambda m: m.eye(n=3, m=1),
        lambda m: m.eye(-1), lambda m: m.eye(2, -1), lambda m: m.eye(2.5), lambda m: m.eye(2, 3.5),
    ])


def test_like_functions():
    srcs = [lambda m: m.ones(2, 3, dtype=m.int32), lambda m: m.ones(2, requires_grad=True),
            lambda m: m.zeros((), dtype=m.float16), lambda m: m.ones(0, 2, dtype=m.bool),
            lambda m: m.ones(3, 2).t(), lambda m: m.ones(2, dtype=m.bfloat16)]
    for src in srcs:
        check_all([
            lambda m: m.zeros_like(src(m)), lambda m: m.ones_like(src(m)), lambda m: m.full_like(src(m), 2.7),
            lambda m: m.full_like(src(m), True), lambda m: m.zeros_like(src(m), dtype=m.float64),
            lambda m: m.ones_like(src(m), dtype=m.int64), lambda m: m.full_like(src(m), 2, dtype=m.int64),
        ])
        check_all([
            lambda m: m.empty_like(src(m)), lambda m: m.rand_like(src(m)), lambda m: m.randn_like(src(m)),
            lambda m: m.randint_like(src(m), 2), lambda m: m.randint_like(src(m), 0, 2),
            lambda m: m.rand_like(src(m), dtype=m.float64), lambda m: m.empty_like(src(m), dtype=m.int8),
        ], values=False)


# == arange and linspace ============================================================================

ARANGE_CASES = [
    (5,), (0,), (-3,), (0, 5), (5, 5), (1, 5, 2), (10, 0, -3), (0.0, 1.0, 0.1), (1, 2.5, 0.5), (0, 1, 0.3),
    (0, 0.3, 0.1), (-1, -3, -0.7), (10, 0, -3.5), (0.5, 5), (1e-3, 1e-2, 1e-3), (0, 100, 1.1), (-5.5, 5.5, 0.01),
    (0, 1e6, 1234.5), (True,), (0, 5, float("inf")), (2 ** 40, 2 ** 40 + 5),
]


def test_arange_values_and_length_rule():
    for args in ARANGE_CASES:
        check(lambda m: m.arange(*args), args)
        for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "uint8", "int8"):
            if name in ("uint8", "int8", "int16", "float16", "bfloat16") and max(map(abs, args)) > 100:
                continue
            check(lambda m: m.arange(*args, dtype=getattr(m, name)), (args, name))
    assert len(tg.arange(0, 1, 0.1)) == 10 and len(tg.arange(0, 0.3, 0.1)) == 3 and len(tg.arange(1, 2.5, 0.5)) == 3


def test_arange_argument_forms():
    check_all([
        lambda m: m.arange(end=5), lambda m: m.arange(start=1, end=5), lambda m: m.arange(1, 5, step=2),
        lambda m: m.arange(m.tensor(5)), lambda m: m.arange(m.tensor(5.0)), lambda m: m.arange(m.tensor(1), 4.5),
        lambda m: m.arange(np.int32(4)), lambda m: m.arange(np.float32(4)), lambda m: m.arange(0, 5, dtype=m.float32),
        lambda m: m.arange(0.5, 5, dtype=m.int64), lambda m: m.arange(0, 5.5, 1.5, dtype=m.int64),
        lambda m: m.arange(0, 5.5, 1.5, dtype=m.int32), lambda m: m.arange(0, 5, 1.5, dtype=m.int64),
        lambda m: m.arange(0.5, 5, 0.7, dtype=m.int32), lambda m: m.arange(-0.5, 5, 1, dtype=m.int32),
        lambda m: m.arange(0, 300, 1, dtype=m.uint8), lambda m: m.arange(-3, 3, 1, dtype=m.uint8),
        lambda m: m.arange(0, 2049, dtype=m.float16), lambda m: m.arange(0, 258, dtype=m.bfloat16),
    ])


def test_arange_errors():
    check_all([
        lambda m: m.arange(0, 10, 0), lambda m: m.arange(0, 10, 0.0), lambda m: m.arange(0, 5, float("nan")),
        lambda m: m.arange(0, -10, 1), lambda m: m.arange(0, 10, -1), lambda m: m.arange(5, 0, 0.5),
        lambda m: m.arange(float("nan")), lambda m: m.arange(float("inf")), lambda m: m.arange(0.5, float("inf")),
        lambda m: m.arange(-float("inf"), 0.5), lambda m: m.arange(1 / 3, float("nan"), 0.3),
        lambda m: m.arange(1e20, float("nan"), 0.3), lambda m: m.arange(0, 1e20, 1), lambda m: m.arange(0, 1e6, 1e-20),
        lambda m: m.arange(0, 5, dtype=m.bool), lambda m: m.arange(0.5, 5, 0.7, dtype=m.int64),
    ])


def test_arange_random_float_ranges_bit_for_bit():
    rng = np.random.default_rng(0)
    for _ in range(300):
        name = ["float32", "float64", "float16", "bfloat16"][rng.integers(0, 4)]
        scale = 1.0 if name in ("float16", "bfloat16") else 10.0 ** rng.integers(-2, 3)
        start = float(rng.normal() * scale * 10)
        step = float(rng.normal() * scale / 10) or 1.0
        end = start + step * float(rng.integers(0, 400)) + float(rng.normal()) * step
        check(lambda m: m.arange(start, end, step, dtype=getattr(m, name)), (start, end, step, name))


LINSPACE_CASES = [(0, 1, 5), (0, 1, 1), (2.5, 1, 1), (0, 1, 0), (0, 1, 2), (3, 10, 5), (-10, 10, 5), (1, 1, 3),
                  (0, 10, 7), (0.1, 0.7, 50), (1e-3, 1e3, 33), (-1.5, 2.25, 1000), (0.5, 10.7, 6), (-0.5, -10.7, 6),
                  (0, 255, 4), (100, -100, 11), (0, 1, 5000)]


def test_linspace_values():
    for args in LINSPACE_CASES:
        check(lambda m: m.linspace(*args), args)
        for name in ("float64", "float16", "bfloat16", "int64", "int32", "int16", "uint8"):
            if name == "uint8" and min(args[:2]) < 0:
                continue
            check(lambda m: m.linspace(*args, dtype=getattr(m, name)), (args, name))


def test_linspace_random_bit_for_bit():
    rng = np.random.default_rng(1)
    for _ in range(300):
        name = ["float32", "float64", "float16", "bfloat16", "int64", "int32"][rng.integers(0, 6)]
        scale = 1.0 if name in ("float16", "bfloat16") else 10.0 ** rng.integers(-3, 4)
        a, b, n = float(rng.normal() * scale), float(rng.normal() * scale), int(rng.integers(2, 300))
        check(lambda m: m.linspace(a, b, n, dtype=getattr(m, name)), (a, b, n, name))


def test_linspace_arguments_and_errors():
    check_all([
        lambda m: m.linspace(m.tensor(0.0), m.tensor(1.0), 3), lambda m: m.linspace(m.tensor(2), 10, 3),
        lambda m: m.linspace(0, 1, m.tensor(3)), lambda m: m.linspace(0, 1, np.int64(3)),
        lambda m: m.linspace(start=0, end=2, steps=3), lambda m: m.linspace(0.5, 1, 1, dtype=m.int64),
        lambda m: m.linspace(0, 1, -1), lambda m: m.linspace(0, 1, 2.5), lambda m: m.linspace(0.0, 1.0, 3, dtype=m.bool),
        lambda m: m.linspace(m.tensor([2.0]), 10, 3), lambda m: m.linspace(300, 1, 3, dtype=m.uint8),
    ])


# == from_numpy, as_tensor, asarray, from_dlpack: memory sharing ==================================

def shares(m, make, a):
    t = make(a)
    a.flat[0] = 99
    return t.reshape(-1)[0].item() == 99


def test_sharing_rules_match_torch():
    cases = [
        lambda m: m.from_numpy, lambda m: m.as_tensor, lambda m: m.tensor,
        lambda m: (lambda a: m.as_tensor(a, dtype=m.float64)), lambda m: (lambda a: m.as_tensor(a, dtype=m.float32)),
        lambda m: (lambda a: m.as_tensor(a, device="cpu")), lambda m: m.asarray,
        lambda m: (lambda a: m.asarray(a, copy=True)), lambda m: (lambda a: m.asarray(a, dtype=m.float32)),
    ]
    for make in cases:
        for build in (lambda: np.zeros(3), lambda: np.zeros((3, 4))[:, ::2], lambda: np.zeros((2, 3), order="F")):
            assert shares(tg, make(tg), build()) == shares(torch, make(torch), build()), make


def test_from_numpy():
    for npdt in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_):
        a = np.arange(6).reshape(2, 3).astype(npdt)
        for src in (a, a.T, a[:, ::2], np.asfortranarray(a), np.array(a[0, 0])):
            g, r = tg.from_numpy(src), torch.from_numpy(src)
            same(g, r, (npdt, src.strides))
            assert g.stride() == r.stride() and g.is_contiguous() == r.is_contiguous()
    a = np.zeros(3)
    t = tg.from_numpy(a)
    t.add_(1)
    assert a.tolist() == [1.0, 1.0, 1.0]
    t.numpy()[1] = 7
    assert a[1] == 7
    check_all([lambda m: m.from_numpy([1, 2]), lambda m: m.from_numpy(np.float64(2.0)), lambda m: m.from_numpy(3),
               lambda m: m.from_numpy(np.zeros((3, 4))[:, ::-1]), lambda m: m.from_numpy(np.zeros(3, dtype=">f4"))])
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.warns(UserWarning, match="The given NumPy array is not writable"):
        tg.from_numpy(ro)


def test_as_tensor_of_tensors():
    for m in (torch, tg):
        t = m.ones(3)
        assert m.as_tensor(t) is t
        assert m.as_tensor(t, dtype=m.float32) is t
        u = m.as_tensor(m.ones(3, requires_grad=True), dtype=m.float64)
        assert type(u.grad_fn).__name__ == "ToCopyBackward0" and str(u.dtype) == "torch.float64"
    check_all([lambda m: m.as_tensor([1, 2.5]), lambda m: m.as_tensor(3), lambda m: m.as_tensor(np.float32(3)),
               lambda m: m.as_tensor([np.float32(3)]), lambda m: m.as_tensor([1, 2], dtype=m.float16),
               lambda m: m.as_tensor(m.ones(3, requires_grad=True)), lambda m: m.as_tensor(m.ones(2), dtype=m.int64),
               lambda m: m.asarray([1, 2], requires_grad=False), lambda m: m.asarray(np.ones(2), requires_grad=True),
               lambda m: m.asarray(m.ones(2), dtype=m.float64)])


def test_from_dlpack():
    t = tg.arange(6.0).reshape(2, 3)
    u = tg.from_dlpack(t)
    u[0, 0] = 100
    assert t[0, 0].item() == 100
    a = np.arange(4.0)
    v = tg.from_dlpack(a)
    a[1] = -1
    assert v[1].item() == -1
    w = np.from_dlpack(t)
    assert np.shares_memory(w, t._data)
    x = torch.from_dlpack(tg.ones(2, 3).t())
    assert x.stride() == (1, 3) and x.tolist() == [[1.0, 1.0]] * 3
    y = tg.from_dlpack(torch.arange(3.0))
    assert str(y.dtype) == "torch.float32" and y.tolist() == [0.0, 1.0, 2.0]
    check(lambda m: m.from_dlpack(m.ones(2, requires_grad=True)))


# == random ========================================================================================

def test_rand_and_randn_statistics():
    tg.manual_seed(0)
    for name in ("float32", "float64"):
        u = tg.rand(200000, dtype=getattr(tg, name))._data
        assert u.min() >= 0 and u.max() < 1
        assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
        assert abs(np.histogram(u, bins=10, range=(0, 1))[0] / len(u) - 0.1).max() < 0.005
        z = tg.randn(200000, dtype=getattr(tg, name))._data
        assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
        assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.005
    for name in ("float16", "bfloat16"):
        u = tg.rand(100000, dtype=getattr(tg, name))
        assert str(u.dtype) == f"torch.{name}" and u._data.min() >= 0 and u._data.max() < 1
        assert abs(u._data.astype(np.float64).mean() - 0.5) < 0.01
        z = tg.randn(100000, dtype=getattr(tg, name))
        assert abs(z._data.astype(np.float64).std() - 1) < 0.02
    bf = tg.randn(1000, dtype=tg.bfloat16)._data
    np.testing.assert_array_equal(bf, torch.tensor(bf).bfloat16().float().numpy())


def test_randint():
    tg.manual_seed(0)
    r = tg.randint(3, 10, (20000,))
    assert str(r.dtype) == "torch.int64" and set(np.unique(r._data).tolist()) == set(range(3, 10))
    assert abs(np.bincount(r._data - 3) / 20000 - 1 / 7).max() < 0.01
    check_all([lambda m: m.randint(10, (3,)), lambda m: m.randint(0, 10, (2, 3)), lambda m: m.randint(10, size=(3,)),
               lambda m: m.randint(low=2, high=10, size=(2,)), lambda m: m.randint(high=10, size=(2,)),
               lambda m: m.randint(0, 10, size=[4]), lambda m: m.randint(3, (3,), dtype=m.float32),
               lambda m: m.randint(0, 2, (3,), dtype=m.bool), lambda m: m.randint(0, 256, (3,), dtype=m.uint8),
               lambda m: m.randint(-128, 128, (3,), dtype=m.int8), lambda m: m.randint(0, 10, ())], values=False)
    assert tg.randint(-5, -3, (200,))._data.max() == -4
    check_all([lambda m: m.randint(5, 5, (3,)), lambda m: m.randint(6, 5, (3,)),
               lambda m: m.randint(0, 300, (2,), dtype=m.uint8), lambda m: m.randint(-1, 3, (2,), dtype=m.uint8),
               lambda m: m.randint(-1, 3, (2,), dtype=m.bool), lambda m: m.randint(0, 10, (2,), dtype=m.bool),
               lambda m: m.randint(0, 129, (2,), dtype=m.int8), lambda m: m.randint(-129, 3, (2,), dtype=m.int8),
               lambda m: m.randint(0, 2 ** 15 + 1, (2,), dtype=m.int16),
               lambda m: m.randint(0, 2 ** 31 + 1, (2,), dtype=m.int32)])
    for bad in (lambda m: m.randint(0, 10, 3), lambda m: m.randint(2.5, 10.5, (2,)), lambda m: m.randint(0, 10)):
        (_, re), (_, ge) = run(bad, torch), run(bad, tg)
        assert type(re) is type(ge) is TypeError
        assert str(ge).split("\n")[0] == str(re).split("\n")[0]


def test_random_functions_reject_integer_dtypes():
    check_all([lambda m: m.rand(2, dtype=m.int64), lambda m: m.rand(2, dtype=m.int32), lambda m: m.rand(2, dtype=m.bool),
               lambda m: m.randn(2, dtype=m.int64), lambda m: m.randn(2, dtype=m.uint8),
               lambda m: m.rand_like(m.ones(2, dtype=m.int64)), lambda m: m.randn_like(m.ones(2, dtype=m.int8))])


def test_manual_seed_reproducibility():
    def draw():
        return (tg.rand(5)._data, tg.randn(2, 3)._data, tg.randint(0, 100, (4,))._data, tg.randperm(6)._data,
                tg.rand(3, dtype=tg.float16)._data, tg.randn_like(tg.ones(2))._data)
    tg.manual_seed(1234)
    a = draw()
    tg.manual_seed(1234)
    b = draw()
    tg.manual_seed(4321)
    c = draw()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[1], c[1])
    assert tg.initial_seed() == 4321
    tg.manual_seed(7)
    d = tg.rand(5)._data
    e = tg.rand(5)._data
    assert not np.array_equal(d, e)

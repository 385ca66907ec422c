"""tracegrad.testing against torch.testing: assert_close's verdicts and messages over pairs of
tensors, numbers, arrays and containers, with each option; make_tensor's shapes, ranges and errors."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

PAIRS = {
    "one element off": lambda m: (m.tensor([1., 2., 3.]), m.tensor([1., 2.5, 3.])),
    "2-d index": lambda m: (m.tensor([[1., 2.], [3., 4.]]), m.tensor([[1., 2.], [3., 4.1]])),
    "dtype": lambda m: (m.tensor([1., 2.]), m.tensor([1., 2.], dtype=m.float64)),
    "shape": lambda m: (m.tensor([1., 2.]), m.tensor([1., 2., 3.])),
    "floats": lambda m: (1.0, 1.5),
    "ints": lambda m: (1, 2),
    "int tensors": lambda m: (m.tensor([1, 2]), m.tensor([1, 3])),
    "nan": lambda m: (m.tensor([float("nan")]), m.tensor([float("nan")])),
    "list of scalars": lambda m: ([m.tensor(1.), m.tensor(2.)], [m.tensor(1.), m.tensor(2.1)]),
    "dict": lambda m: ({"a": m.tensor(1.)}, {"a": m.tensor(1.2)}),
    "dict keys": lambda m: ({"a": m.tensor(1.)}, {"b": m.tensor(1.2)}),
    "lengths": lambda m: ([1, 2], [1, 2, 3]),
    "bool tensors": lambda m: (m.tensor([True, False]), m.tensor([True, True])),
    "strides": lambda m: (m.ones(2, 3).t(), m.ones(3, 2)),
    "equal infinities": lambda m: (m.tensor([1., float("inf")]), m.tensor([1., float("inf")])),
    "opposite infinities": lambda m: (m.tensor([1., float("inf")]), m.tensor([1., float("-inf")])),
    "0-d": lambda m: (m.tensor(1.), m.tensor(1.5)),
    "relative at zero": lambda m: (m.tensor([0., 1.]), m.tensor([0., 1.]) + 1e-3),
    "numpy arrays": lambda m: (np.array([1., 2.]), np.array([1., 2.5])),
    "nested": lambda m: ([[m.tensor(1.)], {"a": m.tensor([1., 2.])}], [[m.tensor(1.)], {"a": m.tensor([1., 3.])}]),
    "float16": lambda m: (m.tensor([1., 2.], dtype=m.float16), m.tensor([1., 2.01], dtype=m.float16)),
    "bfloat16": lambda m: (m.tensor([1., 2.], dtype=m.bfloat16), m.tensor([1., 2.05], dtype=m.bfloat16)),
    "booleans": lambda m: (True, False),
    "tensor and None": lambda m: (m.tensor([1., 2.]), None),
    "None and int": lambda m: (None, 1),
    "empty": lambda m: (m.empty(0), m.empty(0)),
    "tuple and list": lambda m: ((1, 2), [1, 2]),
    "numpy scalar": lambda m: (np.float64(1.0), 1.0),
    "numpy dtypes": lambda m: (np.array([1, 2], dtype=np.int32), np.array([1, 2], dtype=np.int64)),
    "signed zeros": lambda m: (m.tensor([-0.0]), m.tensor([0.0])),
    "uint8": lambda m: (m.tensor([1, 2], dtype=m.uint8), m.tensor([1, 0], dtype=m.uint8)),
    "int relative inf": lambda m: (m.tensor([0, 2]), m.tensor([1, 0])),
    "nan among mismatches": lambda m: (m.tensor([[float("nan"), 1.], [2., 3.]]), m.tensor([[1., 1.], [2., 5.]])),
    "3-d index": lambda m: (m.zeros(3, 4, 5), m.zeros(3, 4, 5).index_fill(2, m.tensor([3]), 1.)),
    "strings": lambda m: ("a", "a"),
    "tensor and float": lambda m: (m.tensor(1.), 1.0),
    "int and float tensors": lambda m: (m.tensor([1, 2]), m.tensor([1., 2.5])),
    "tiny against zero": lambda m: (m.tensor([1e-9]), m.tensor([0.])),
}
OPTIONS = [{}, {"equal_nan": True}, {"rtol": 0.1}, {"check_stride": True}, {"check_dtype": False},
           {"rtol": 0, "atol": 0}, {"rtol": 1e-2, "atol": 1e-2}, {"msg": "custom"},
           {"msg": lambda text: "prefix: " + text}]


def outcome(m, pair, opts):
    try:
        m.testing.assert_close(*PAIRS[pair](m), **opts)
        return ("passed",)
    except Exception as e:        # noqa: BLE001  (the type and message are what is compared)
        # the one difference allowed: the class tracegrad's tensors have
        return type(e).__name__, str(e).replace("tracegrad.tensor.Tensor", "torch.Tensor")


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_assert_close_as_torch(pair, opts):
    assert outcome(tg, pair, opts) == outcome(torch, pair, opts)


def test_assert_close_passes_within_the_default_tolerance_and_fails_past_it():
    for dt, (rtol, atol) in tg.testing.DEFAULT_TOLERANCES.items():
        x = tg.tensor([1.0, 100.0], dtype=dt)
        near = x + tg.tensor([atol / 2, 0.0]).to(dt) if dt is tg.float64 else x
        tg.testing.assert_close(near, x)
        far = x * (1 + 50 * rtol) + 50 * atol
        with pytest.raises(AssertionError, match="Tensor-likes are not close"):
            tg.testing.assert_close(far.to(dt), x)


def test_assert_allclose_warns_and_compares_across_dtypes():
    with pytest.warns(FutureWarning, match="assert_close"):
        tg.testing.assert_allclose(tg.tensor([1., 2.]), [1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(AssertionError):
            tg.testing.assert_allclose(tg.tensor([1., 2.]), tg.tensor([1., 3.], dtype=tg.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int8", "uint8", "bool"])
@pytest.mark.parametrize("noncontiguous", [False, True])
def test_make_tensor_shape_dtype_layout_and_range(dtype, noncontiguous):
    t = tg.testing.make_tensor(40, 30, dtype=getattr(tg, dtype), noncontiguous=noncontiguous)
    r = torch.testing.make_tensor(40, 30, dtype=getattr(torch, dtype), device="cpu", noncontiguous=noncontiguous)
    assert tuple(t.shape) == tuple(r.shape) and str(t.dtype) == str(r.dtype)
    assert t.is_contiguous() == r.is_contiguous() and t.stride() == r.stride()
    v = t.to(tg.float64).numpy() if dtype != "bool" else t.numpy()
    if dtype == "bool":
        assert set(np.unique(v)) == {False, True}
    else:
        lo, hi = (-9, 9) if "float" in dtype else ((0, 10) if dtype == "uint8" else (-9, 10))
        assert v.min() >= lo and v.max() <= hi
        assert v.max() - v.min() > (hi - lo) / 2           # spread over the range, not a constant
        if "float" not in dtype:
            assert v.max() <= hi - 1                       # [low, high): high itself is never drawn


def test_make_tensor_arguments_as_torch():
    t = tg.testing.make_tensor((3, 4), dtype=tg.float32, low=2, high=3, requires_grad=True)
    assert t.requires_grad and float(t.min()) >= 2 and float(t.max()) <= 3
    assert (tg.testing.make_tensor(500, dtype=tg.int64, low=-1, high=2, exclude_zero=True) != 0).all()
    z = tg.testing.make_tensor(500, dtype=tg.float32, low=0, high=1e-30, exclude_zero=True)
    assert (z != 0).all()
    assert tuple(tg.testing.make_tensor((), dtype=tg.float32).shape) == ()
    for kwargs in [dict(dtype="int64", low=5, high=1), dict(dtype="int64", low=float("nan")),
                   dict(dtype="int64", requires_grad=True), dict(dtype="float32", low=5, high=1),
                   dict(dtype="float32", noncontiguous=True, memory_format="contiguous_format")]:
        def call(m):
            kw = dict(kwargs, dtype=getattr(m, kwargs["dtype"]))
            if "memory_format" in kw:
                kw["memory_format"] = getattr(m, kw["memory_format"])
            extra = {"device": "cpu"} if m is torch else {}
            with pytest.raises(ValueError) as e:
                m.testing.make_tensor(3, **kw, **extra)
            return str(e.value)
        assert call(tg) == call(torch)
    with pytest.warns(FutureWarning, match="low==high"):
        same = tg.testing.make_tensor(3, dtype=tg.float32, low=2, high=2)
    assert same.tolist() == [2.0, 2.0, 2.0]

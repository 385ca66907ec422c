"""Tensor indexing and the Tensor API against torch: corners of x[key] and x[key] = value, the
index ops and their gradients, eagerly and compiled (a compiled result equals the eager one)."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _same(t, ref):
    """A tracegrad tensor equal to a torch one: dtype, shape and values (NaN and -0.0 included)."""
    assert str(t.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    assert tuple(t.shape) == tuple(ref.shape)
    a, b = np.asarray(t.detach().numpy()), ref.detach().numpy()
    assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if a.dtype.kind == "f":
        assert np.array_equal(np.signbit(a), np.signbit(b))


def _both(fn):
    """fn(torch) and fn(tracegrad), warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(torch), fn(tg)


def _raises_same(fn):
    """fn raises under torch and tracegrad alike: the same type and message."""
    errs = []
    for m in (torch, tg):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception) as e:
                fn(m)
        errs.append((type(e.value), str(e.value)))
    assert errs[0] == errs[1]


# -- uint8 index tensors are masks ------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    lambda m: m.tensor([1, 0], dtype=m.uint8),
    lambda m: (slice(None), m.tensor([2, 0, 1], dtype=m.uint8)),
    lambda m: (m.tensor([[1, 0, 3], [0, 0, 1]], dtype=m.uint8),),
    lambda m: (m.tensor([0, 1], dtype=m.uint8), Ellipsis, m.tensor([3])),
])
def test_getitem_uint8_mask(key):
    def f(m):
        x = m.arange(24, dtype=m.float64).reshape(2, 3, 4).requires_grad_()
        y = x[key(m)]
        g, = m.autograd.grad((y * m.arange(y.numel(), dtype=m.float64).reshape(y.shape)).sum(), x)
        return y, g
    (r, rg), (t, tgg) = _both(f)
    _same(t, r)
    _same(tgg, rg)


def test_getitem_uint8_mask_warns():
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        tg.zeros(2, 3)[tg.tensor([1, 0], dtype=tg.uint8)]


@pytest.mark.parametrize("key, value", [
    (lambda m: m.tensor([1, 0], dtype=m.uint8), lambda m: m.tensor([[7.0, 8.0, 9.0]])),
    (lambda m: (slice(None), m.tensor([1, 0, 2], dtype=m.uint8)), lambda m: m.tensor([7.0, 8.0])),
    (lambda m: (m.tensor([1, 0], dtype=m.uint8), [0]), lambda m: m.tensor([5.0])),
    (lambda m: m.tensor(1, dtype=m.uint8), lambda m: 5.0),
])
def test_setitem_uint8_mask(key, value):
    def f(m):
        x = m.arange(6, dtype=m.float32).reshape(2, 3)
        x[key(m)] = value(m)
        return x
    r, t = _both(f)
    _same(t, r)


@pytest.mark.parametrize("key, value", [
    (lambda m: m.tensor([1, 0], dtype=m.uint8), lambda m: 5.0),
    (lambda m: (1, m.tensor([1, 0, 1], dtype=m.uint8)), lambda m: m.tensor([5.0])),
    (lambda m: (None, m.tensor([1, 0], dtype=m.uint8)), lambda m: m.tensor(5.0)),
])
def test_setitem_uint8_mask_one_value_refused(key, value):
    # torch fills through masked_fill_, which takes bool masks only
    def f(m):
        x = m.arange(6, dtype=m.float32).reshape(2, 3)
        x[key(m)] = value(m)
    _raises_same(f)
    _raises_same(lambda m: m.index_put(m.zeros(2, 3), (m.tensor([1, 0], dtype=m.uint8),), m.tensor([1.0])))
    r, t = _both(lambda m: m.index_put(m.zeros(2, 3), (m.tensor([1, 0], dtype=m.uint8),), m.tensor([1.0]),
                                       accumulate=True))
    _same(t, r)


def test_getitem_empty_list():
    r, t = _both(lambda m: m.arange(6.0).reshape(2, 3)[[]])
    _same(t, r)
    r, t = _both(lambda m: m.arange(6.0).reshape(2, 3)[:, []])
    _same(t, r)


@pytest.mark.parametrize("value", [None, "a", b"1"])
def test_setitem_value_not_a_number(value):
    # torch's TypeError; a NaN (None) or a parsed number (b"1") was written
    def f(m):
        x = m.zeros(2, 3)
        x[0] = value
    _raises_same(f)
    x = tg.zeros(2, dtype=tg.int32)
    with pytest.raises(TypeError, match="can't assign a NoneType to a torch.IntTensor"):
        x[0] = None


# -- index_fill / index_copy indices --------------------------------------------------------------

@pytest.mark.parametrize("index", [[-1], [0, -3], [-1, 2], -2])
def test_index_fill_negative_index(index):
    # torch's index_fill counts a negative index from the end (tracegrad raised); torch's backward
    # refuses one, so the gradients are checked against torch's for the same index made positive
    def f(m, index):
        x = m.arange(6, dtype=m.float64).reshape(2, 3).requires_grad_()
        v = m.tensor(-1.5, dtype=m.float64, requires_grad=True)
        y = x.index_fill(1, m.tensor(index), v)
        gx, gv = m.autograd.grad((y * m.arange(6.0, dtype=m.float64).reshape(2, 3)).sum(), (x, v))
        return y, gx, gv
    with torch.no_grad():
        ref = torch.zeros(2, 3).index_fill(1, torch.tensor(index), 1.0)
    _same(tg.zeros(2, 3).index_fill(1, tg.tensor(index), 1.0), ref)
    positive = (np.array(index) % 3).tolist()
    for r, t in zip(f(torch, positive), f(tg, index)):
        _same(t, r)


@pytest.mark.parametrize("op, index", [("fill", [-4]), ("fill", [3]), ("fill", [[0]]), ("copy", [-1]),
                                       ("copy", [3]), ("copy", [[0]])])
def test_index_fill_copy_out_of_range(op, index):
    def f(m):
        x = m.zeros(2, 3)
        if op == "fill":
            return x.index_fill(1, m.tensor(index), 1.0)
        return x.index_copy(1, m.tensor(index), m.ones(2, 1))
    _raises_same(f)


# -- setitem values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key, shape", [
    (0, (1, 1, 4)), ((0, 1), (1, 1)), ((slice(None), [0, 2]), (1, 3, 2)), ((0, [1, 2]), (1, 1, 1, 2)),
    (Ellipsis, (1, 1, 3, 4)), ((1, slice(None, 2)), (1, 1, 2)),
])
def test_setitem_value_with_leading_ones(key, shape):
    # torch drops a value's leading size-1 dims before it writes; the value's gradient keeps them
    def f(m):
        x = m.arange(12, dtype=m.float64).reshape(3, 4).requires_grad_()
        v = m.arange(1, 1 + int(np.prod(shape)), dtype=m.float64).reshape(shape).requires_grad_()
        y = x * 1
        y[key] = v
        gx, gv = m.autograd.grad((y * m.arange(12.0, dtype=m.float64).reshape(3, 4)).sum(), (x, v))
        return y, gx, gv
    for r, t in zip(*_both(f)):
        _same(t, r)


@pytest.mark.parametrize("key, shape", [(0, (2, 1, 4)), ((1, slice(None, 2)), (1, 2, 1))])
def test_setitem_value_too_big_still_refused(key, shape):
    def f(m):
        x = m.zeros(3, 4)
        x[key] = m.ones(shape)
    _raises_same(f)


# -- Tensor API ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [".3f", "", ">10.2e", "+"])
def test_format_zero_dim_requires_grad(spec):
    # torch formats any 0-dim tensor as its number; tracegrad raised for one that requires grad
    r, t = _both(lambda m: [format(x, spec) for x in (m.tensor(3.14159, requires_grad=True),
                                                      m.tensor(3.14159, requires_grad=True) * 2)])
    assert t == r


def test_format_zero_dim_parameter():
    _raises_same(lambda m: format(m.nn.Parameter(m.tensor(1.5)), ".2f"))


NUMBERS = [-1, 200, 255, 256, -129, -255, -256, 2 ** 31, -2 ** 31 - 1, 2 ** 63, -2 ** 63, 1.5, -1.5, 300.7, 70000.0,
           1e39, float("inf"), float("nan"), True, -0.0]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool", "float16", "bfloat16",
                                   "float32", "float64"])
def test_numbers_written_by_fill_and_setitem_convert_as_torch(dtype):
    """torch's checked conversion of a Python number written into a tensor: uint8 takes -1 as 255
    (numpy raised OverflowError), int8 refuses 200 with a RuntimeError (numpy's OverflowError),
    NaN into an integer type raises torch's RuntimeError (numpy's ValueError), an int beyond int64
    is the binding's ValueError, a float16 setitem rounds 70000 to inf where fill_ refuses it."""
    writes = {"set": lambda x, m, v: x.__setitem__(0, v), "fill": lambda x, m, v: x.fill_(v),
              "index": lambda x, m, v: x.__setitem__(m.tensor([0, 2]), v),
              "mask": lambda x, m, v: x.__setitem__(m.tensor([True, False, True]), v),
              "slice": lambda x, m, v: x.__setitem__(slice(1, None), v)}
    for v in NUMBERS:
        for name, w in writes.items():
            res = []
            for m in (torch, tg):
                x = m.zeros(3, dtype=getattr(m, dtype))
                try:
                    w(x, m, v)
                    res.append(str(x.tolist()))
                except Exception as e:          # noqa: BLE001 (the type is what is compared)
                    res.append(type(e).__name__)
            assert res[1] == res[0], (dtype, v, name, res)


def test_flip_and_tile_take_dims_as_several_ints_or_one_sequence():
    for m in (torch, tg):
        x = m.arange(6).reshape(2, 3)
        res = [x.flip(0, -1), x.flip((0, 1)), x.flip([1]), x.flip(0), x.flip(dims=(0,)), x.tile(2), x.tile((2, 1)),
               x.tile(2, 1, 1), x.tile(dims=(2,))]
        if m is torch:
            want = [r.tolist() for r in res]
        else:
            assert [r.tolist() for r in res] == want
        with pytest.raises(TypeError):
            x.flip()

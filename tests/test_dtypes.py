"""dtypes against torch: names and attributes, promote_types for every pair, the result dtype
of arithmetic and comparisons over tensors, zero-dim tensors and Python scalars, the default
dtype, and bfloat16/float16 rounding."""
import operator
import pickle

import numpy as np
import pytest
import torch

import tracegrad as tg

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def values(t):
    """A tensor's values as float64 numpy (bool and ints exactly; bfloat16 via float32)."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy().astype(np.float64)
    return np.asarray(t._data).astype(np.float64)


def test_dtype_names_and_attributes():
    for name in NAMES:
        a, b = getattr(torch, name), getattr(tg, name)
        assert str(b) == str(a) == f"torch.{name}"
        assert repr(b) == repr(a)
        for attr in ("is_floating_point", "is_complex", "is_signed", "itemsize"):
            assert getattr(b, attr) == getattr(a, attr), (name, attr)
        assert pickle.loads(pickle.dumps(b)) is b
    for alias in ("float", "double", "half", "long", "int", "short"):
        assert str(getattr(tg, alias)) == str(getattr(torch, alias))
        assert getattr(tg, alias) is getattr(tg, str(getattr(torch, alias)).split(".")[1])


def test_promote_types_every_pair():
    wrong = []
    for x in NAMES:
        for y in NAMES:
            want = str(torch.promote_types(getattr(torch, x), getattr(torch, y)))
            got = str(tg.promote_types(getattr(tg, x), getattr(tg, y)))
            if got != want:
                wrong.append((x, y, got, want))
    assert wrong == []


def test_can_cast_every_pair():
    wrong = [(x, y) for x in NAMES for y in NAMES
             if tg.can_cast(getattr(tg, x), getattr(tg, y)) != torch.can_cast(getattr(torch, x), getattr(torch, y))]
    assert wrong == []


# -- result dtypes -----------------------------------------------------------------------------

def operand(m, kind, name, right):
    """A tensor (dim > 0), a zero-dim tensor or a Python scalar; right operands have no zeros."""
    if kind == "int":
        return 3
    if kind == "float":
        return 2.5
    if kind == "bool":
        return True
    d = getattr(m, name)
    if kind == "tensor":
        data = ([True, True, True] if right else [True, False, True]) if name == "bool" else [1, 2, 3]
        return m.tensor(data, dtype=d)
    return m.tensor(True if name == "bool" else 2, dtype=d)


def operand_pairs():
    for ka in ("tensor", "zerodim"):
        for kb in ("tensor", "zerodim"):
            for x in NAMES:
                for y in NAMES:
                    yield (ka, x), (kb, y)
    for k in ("tensor", "zerodim"):
        for x in NAMES:
            for s in ("int", "float", "bool"):
                yield (k, x), (s, None)
                yield (s, None), (k, x)


OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
       "lt": operator.lt, "eq": operator.eq, "ge": operator.ge}


def run(fn, m):
    try:
        return fn(m), None
    except Exception as e:      # noqa: BLE001  (the exception itself is compared)
        return None, e


@pytest.mark.parametrize("op", sorted(OPS))
def test_result_dtype_of_binary_ops(op):
    f = OPS[op]
    wrong = []
    with np.errstate(all="ignore"):
        for (ka, x), (kb, y) in operand_pairs():
            def fn(m):
                return f(operand(m, ka, x, False), operand(m, kb, y, True))
            r, re = run(fn, torch)
            g, ge = run(fn, tg)
            case = (op, ka, x, kb, y)
            if re is not None:
                if ge is None or type(ge) is not type(re) or str(ge) != str(re):
                    wrong.append((case, "error", re, ge))
                continue
            if ge is not None:
                wrong.append((case, "raised", ge))
            elif str(g.dtype) != str(r.dtype) or tuple(g.shape) != tuple(r.shape):
                wrong.append((case, str(g.dtype), str(r.dtype)))
            else:
                tol = 1e-2 if str(r.dtype) in ("torch.float16", "torch.bfloat16") else 1e-6
                if not np.allclose(values(g), values(r), rtol=tol, atol=0, equal_nan=True):
                    wrong.append((case, values(g), values(r)))
    assert wrong == []


def test_result_type_function():
    wrong = []
    for (ka, x), (kb, y) in operand_pairs():
        if ka in ("int", "float", "bool"):
            continue
        want = torch.result_type(operand(torch, ka, x, False), operand(torch, kb, y, True))
        got = tg.result_type(operand(tg, ka, x, False), operand(tg, kb, y, True))
        if str(got) != str(want):
            wrong.append(((ka, x, kb, y), got, want))
    assert wrong == []


def test_python_number_category_rules():
    # zero-dim tensors and Python numbers only lift the category: an int8 tensor stays int8 with an
    # int64 zero-dim tensor, and becomes float16 with a float16 zero-dim tensor
    cases = [
        lambda m: m.ones(2, dtype=m.int8) + m.tensor(5),
        lambda m: m.ones(2, dtype=m.int8) + m.tensor(5.0, dtype=m.float16),
        lambda m: m.ones(2, dtype=m.uint8) * m.tensor(True),
        lambda m: m.ones(2, dtype=m.bool) + m.tensor(3, dtype=m.int16),
        lambda m: m.ones(2, dtype=m.float16) + m.tensor(3.0, dtype=m.float64),
        lambda m: m.ones(2, dtype=m.bfloat16) * 1e-3,
        lambda m: m.ones(2, dtype=m.int32) / 2,
        lambda m: m.tensor(3, dtype=m.int16) + 2.5,
        lambda m: m.tensor(3, dtype=m.int16) + m.ones(2, dtype=m.bool),
        lambda m: 2 ** m.ones(2, dtype=m.int8),
        lambda m: m.ones(2, dtype=m.float16) < 70000.0,
    ]
    for fn in cases:
        r, g = fn(torch), fn(tg)
        assert str(g.dtype) == str(r.dtype)
        np.testing.assert_array_equal(values(g), values(r))


# -- the default dtype ---------------------------------------------------------------------------

def test_get_set_default_dtype():
    assert str(tg.get_default_dtype()) == "torch.float32"
    for name in ("float64", "float16", "bfloat16", "float32"):
        torch.set_default_dtype(getattr(torch, name))
        tg.set_default_dtype(getattr(tg, name))
        assert str(tg.get_default_dtype()) == str(torch.get_default_dtype())
    for name in ("int64", "bool", "int32"):
        with pytest.raises(TypeError) as want:
            torch.set_default_dtype(getattr(torch, name))
        with pytest.raises(TypeError) as got:
            tg.set_default_dtype(getattr(tg, name))
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_default_dtype_effects(default):
    torch.set_default_dtype(getattr(torch, default))
    tg.set_default_dtype(getattr(tg, default))
    made = [
        lambda m: m.tensor(1.5), lambda m: m.tensor([1, 2.5]), lambda m: m.tensor([[]]),
        lambda m: m.tensor([np.float32(1), 2.5]), lambda m: m.tensor(3), lambda m: m.tensor([True]),
        lambda m: m.zeros(2), lambda m: m.ones(2, 3), lambda m: m.empty(1), lambda m: m.full((2,), 1.5),
        lambda m: m.full((2,), 1), lambda m: m.eye(2), lambda m: m.arange(0.0, 1.0, 0.25), lambda m: m.arange(3),
        lambda m: m.linspace(0, 1, 5), lambda m: m.rand(2), lambda m: m.randn(2),
        lambda m: m.ones(2, dtype=m.int64) + 2.5, lambda m: m.ones(2, dtype=m.float32) + 2.5,
        lambda m: m.ones(2, dtype=m.int32) / m.ones(2, dtype=m.int32), lambda m: m.tensor(2) * 1.5,
        lambda m: m.ones(2, dtype=m.bool) * 0.5,
    ]
    for fn in made:
        r, g = fn(torch), fn(tg)
        assert str(g.dtype) == str(r.dtype)
        assert tuple(g.shape) == tuple(r.shape)


# -- rounding to 16-bit floats ---------------------------------------------------------------------

def special_float32():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0, 2 ** 16, 500, dtype=np.uint64).astype(np.uint32) << 16) | np.uint32(0x8000)
    edges = np.array([0x00000000, 0x80000000, 0x00000001, 0x0000FFFF, 0x00008000, 0x00018000, 0x7F7FFFFF,
                      0x7F7F8000, 0x7F7F7FFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x3F808000, 0x3F818000],
                     dtype=np.uint32)
    a = np.concatenate([bits, ties, edges]).view(np.float32)
    return a[~np.isnan(a)]


def same_bits(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bfloat16_rounding_matches_torch():
    a = special_float32()
    want = torch.tensor(a, dtype=torch.bfloat16).float().numpy()
    same_bits(tg.tensor(a, dtype=tg.bfloat16)._data, want)
    same_bits(tg.tensor(a).bfloat16()._data, torch.tensor(a).bfloat16().float().numpy())
    same_bits(tg.tensor(a.tolist(), dtype=tg.bfloat16)._data,
              torch.tensor(a.tolist(), dtype=torch.bfloat16).float().numpy())
    nan = tg.tensor([float("nan"), -float("nan")], dtype=tg.bfloat16)
    assert np.isnan(nan._data).all()


def test_bfloat16_rounds_float64_through_float32():
    rng = np.random.default_rng(1)
    a = (1.0 + rng.integers(0, 2 ** 20, 2000) * 2.0 ** -20) * 2.0 ** rng.integers(-20, 20, 2000)
    a = np.concatenate([a, [1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -8, 1 + 3 * 2 ** -8 + 2 ** -40]])
    want = torch.tensor(a, dtype=torch.bfloat16).float().numpy()
    same_bits(tg.tensor(a, dtype=tg.bfloat16)._data, want)
    same_bits(tg.tensor(a.tolist(), dtype=tg.bfloat16)._data, want)
    same_bits(tg.tensor(a).to(tg.bfloat16)._data, torch.tensor(a).to(torch.bfloat16).float().numpy())


def test_float16_rounds_float64_through_float32():
    a = np.array([1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -11, 1 + 3 * 2 ** -11 - 2 ** -45, 65519.99, 65520.0, 1e-8])
    want = torch.tensor(a, dtype=torch.float16).numpy()
    np.testing.assert_array_equal(tg.tensor(a, dtype=tg.float16)._data, want)
    np.testing.assert_array_equal(tg.tensor(a.tolist(), dtype=tg.float16)._data, want)
    np.testing.assert_array_equal(tg.tensor(a).half()._data, torch.tensor(a).half().numpy())
    np.testing.assert_array_equal(tg.full((6,), a[0], dtype=tg.float16)._data,
                                  torch.full((6,), a[0], dtype=torch.float16).numpy())


@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv"])
def test_bfloat16_arithmetic_rounds_like_torch(op):
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=500).astype(np.float32), rng.normal(size=500).astype(np.float32) + 3
    f = getattr(operator, op)
    want = f(torch.tensor(a, dtype=torch.bfloat16), torch.tensor(b, dtype=torch.bfloat16))
    got = f(tg.tensor(a, dtype=tg.bfloat16), tg.tensor(b, dtype=tg.bfloat16))
    assert str(got.dtype) == "torch.bfloat16"
    same_bits(got._data, want.float().numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16bit_arithmetic_with_python_scalar(dtype):
    a = np.random.default_rng(3).normal(size=500).astype(np.float32)
    for f in (operator.add, operator.sub, operator.mul, operator.truediv):
        want = f(torch.tensor(a, dtype=getattr(torch, dtype)), 0.1)
        got = f(tg.tensor(a, dtype=getattr(tg, dtype)), 0.1)
        same_bits(np.asarray(got._data, np.float32), want.float().numpy())

"""Reduced repros of what the compile fuzzers found on seeds no run had tried before
(test_compile_random.py 40500-41999 in float32 and float64, test_compile_call_sequence_fuzz.py
150-2999, test_compile_dtype_fuzz.py 12000-15999, triton_checks.py's programs 42000-42999 and
special values under the interpreter), and of what probes next to them found, each compared with
eager tracegrad (bit for bit: the same primitives run) and with torch."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def _bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")), \
        f"{what}: {got!r} != {want!r}"


# -- a reduction of an elementwise op whose operands are laid out in two orders ----------------------
# Eager lays the result of x.mT + y out as torch's TensorIterator does (x's order: the first operand
# decides), numpy's ufunc lays it out C-contiguous; a sum of it then adds in another order. The
# compiled program summed numpy's layout: call-sequence seed 869 (mean of (bool.mT + float64)
# .float(): -0.9967513 compiled, -0.99675137 eager and torch) and seed 1164 ((x.mT * y).sum over
# two dims: -18.581793 compiled, -18.58179 eager and torch).

def _transposed(m, a, req=False):
    """a's values in a tensor laid out with its axes reversed (a contiguous tensor's .permute)."""
    nd = a.ndim
    base = m.tensor(np.ascontiguousarray(a.transpose(tuple(range(nd))[::-1])), requires_grad=req)
    return base.permute(*range(nd - 1, -1, -1)), base


def test_the_mean_of_a_sum_of_a_transposed_bool_and_a_float64_is_eagers():
    a = np.array([[False, False, True, True], [False, True, False, False]])
    b = np.array([[0.48315146, 1.68816723, -2.30310904, 2.18492513],
                  [0.66660752, -1.45834051, 2.56272774, 1.14988127]])

    def f(m, x, y):
        return (x + y).float().mean() * -1

    for dynamic in (None, True):
        got = tg.compile(lambda x, y: f(tg, x, y), dynamic=dynamic)(_transposed(tg, a)[0], tg.tensor(b))
        eager = f(tg, _transposed(tg, a)[0], tg.tensor(b))
        want = f(torch, _transposed(torch, a)[0], torch.tensor(b))
        _bits(eager.numpy(), want.numpy(), "eager vs torch")
        _bits(got.numpy(), eager.numpy(), f"compiled (dynamic={dynamic}) vs eager")


@pytest.mark.parametrize("opk", range(4))
def test_a_sum_over_dims_of_operands_in_two_orders_is_eagers(opk):
    r = np.random.default_rng(opk)
    dims = [(0, -1), (1,), (0, 1), (0, 2)][opk]

    def f(m, x, y):
        z = [x * y, x + y.exp(), (x - y).relu(), x * 2 + y][opk]
        return z.sum(dim=dims, keepdim=True), z.mean(), z.var(dim=dims[0])

    for _ in range(4):
        a = (r.standard_normal((3, 5, 7)) * 3).astype(np.float32)
        b = (r.standard_normal((3, 1, 7) if opk % 2 == 0 else (3, 5, 7)) * 3).astype(np.float32)
        res = []
        for compiled in (False, True):
            x, xb = _transposed(tg, a, True)
            y = tg.tensor(b, requires_grad=True)
            outs = tg.compile(lambda p, q: f(tg, p, q))(x, y) if compiled else f(tg, x, y)
            sum((o * o).sum() for o in outs).backward()
            res.append([o.detach().numpy() for o in outs] + [xb.grad.numpy(), y.grad.numpy()])
        x, xb = _transposed(torch, a, True)
        y = torch.tensor(b, requires_grad=True)
        outs = f(torch, x, y)
        sum((o * o).sum() for o in outs).backward()
        want = [o.detach().numpy() for o in outs] + [xb.grad.numpy(), y.grad.numpy()]
        for k, (e, c, t) in enumerate(zip(*res, want)):
            _bits(c, e, f"value {k}: compiled vs eager")
            np.testing.assert_allclose(c, t, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(t).max())))


def test_laying_out_in_an_order_that_names_an_axis_of_size_1_keeps_the_values():
    """The order a program recorded at its trace names axes of size above 1; a dynamic size may be 1 at
    a later call, where the axis has no place in memory."""
    from tracegrad.codegen.numpy_cpu import in_order
    for shape in [(1, 3, 4), (2, 1, 4), (2, 3, 1), (2, 3, 4)]:
        a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        b = in_order(a, (2, 1, 0))
        assert b.shape == a.shape and np.array_equal(a, b)
        big = [k for k in (2, 1, 0) if shape[k] > 1]
        assert [b.strides[k] for k in big] == sorted((b.strides[k] for k in big), reverse=True)


def test_a_cast_of_a_stepped_float16_times_a_transposed_float32_summed_is_eagers():
    """seed 1164 itself: y[::2] of float16 promoted to float32, x transposed."""
    x0 = np.array([[[-1.8144468, -2.680636, -0.6229372, 0.0070918], [2.0661962, 1.9697121, 1.3123161, 0.759735]],
                   [[1.6826497, 0.31186953, np.inf, 1.0087787], [1.5657192, -0.5551392, 2.944103, 0.03164032]]],
                  np.float32)
    y0 = np.array([[[0.8975, -2.479, -3.797, -5.01]], [[3.102, -1.744, -4.312, 3.418]]], np.float16)

    def args(m):
        x = m.tensor(np.ascontiguousarray(np.swapaxes(x0, 0, -1)), requires_grad=True).transpose(0, -1)
        y = m.tensor(np.repeat(y0, 2, axis=0), requires_grad=True)[::2]
        return x, y

    def f(m, x, y):
        return (x * y).sum(dim=(0, -1), keepdim=True)

    want = f(torch, *args(torch)).detach().numpy()
    eager = f(tg, *args(tg)).detach().numpy()
    got = tg.compile(lambda x, y: f(tg, x, y))(*args(tg)).detach().numpy()
    _bits(eager, want, "eager vs torch")
    _bits(got, eager, "compiled vs eager")


# -- a 0-dim tensor's value shifted by a bool ---------------------------------------------------------
# dtype fuzzer seed 13073: x.sum() >> False for x int64 [-4, 1, -4] was tensor(True) compiled, -7 in
# eager and torch. A compiled program holds a 0-dim value as a numpy scalar (np.int64), which the
# shift kernel took for a Python number and cast to the shift's dtype (bool).

@pytest.mark.parametrize("dt", ["int8", "int16", "int32", "int64", "uint8"])
def test_a_0_dim_value_shifted_by_a_bool_or_a_number_keeps_its_dtype(dt):
    def f(m, t, u):
        return (t.sum() >> False, t.sum() >> True, t.max() << False, t.max() << True, t.sum() << 31,
                5 << t.sum(), t.sum() << u.sum(), u.max() >> t, t << u.max(), 2 << t, True << t)

    a, b = np.array([1, 31, 3], dt), np.array([2, 1], dt)
    want = f(torch, torch.tensor(a), torch.tensor(b))
    eager = f(tg, tg.tensor(a), tg.tensor(b))
    got = tg.compile(lambda x, y: f(tg, x, y), fullgraph=True)(tg.tensor(a), tg.tensor(b))
    for k, (w, e, c) in enumerate(zip(want, eager, got)):
        _bits(e.numpy(), w.numpy(), f"{k}: eager vs torch")
        _bits(c.numpy(), e.numpy(), f"{k}: compiled vs eager")


# -- a 0-dim value computed inside the program as a clamp bound or a power's exponent -----------------
# The same numpy-scalar mix-up, in two more kernels (found next to seed 13073's): clamp took a
# 0-dim tensor bound for a number and kept x's -0.0 where eager's np.clip gives the bound's 0.0
# (clamp(x, min=b.sum()) at x = -0.0: compiled -0.0, eager 0.0); pow took a 0-dim tensor exponent
# for a number and multiplied (x ** b.sum() at 3: x * x * x, eager np.power; 693 of 2000
# float32 elements a unit in the last place apart).

def test_a_0_dim_clamp_bound_computed_inside_is_a_tensor_bound_as_in_eager():
    def f(m, x, b):
        lo = b.sum()
        return m.clamp(x, min=lo), m.clamp(x, max=lo), m.clamp(x, min=lo, max=lo + 1), m.clamp(x, min=-lo)

    x0 = np.array([-0.0, 0.0, 1.0, -1.0, -0.0], np.float32)
    for b0 in ([0.0, 0.0], [-0.0, -0.0], [0.0, -0.0]):
        b0 = np.array(b0, np.float32)
        eager = f(tg, tg.tensor(x0), tg.tensor(b0))
        got = tg.compile(lambda x, b: f(tg, x, b), fullgraph=True)(tg.tensor(x0), tg.tensor(b0))
        want = f(torch, torch.tensor(x0), torch.tensor(b0))
        for k, (c, e, t) in enumerate(zip(got, eager, want)):
            _bits(c.numpy(), e.numpy(), f"{b0} {k}: compiled vs eager")
            assert np.array_equal(c.numpy(), t.numpy())      # (zero signs: torch's loops differ, see above)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_0_dim_exponent_computed_inside_powers_as_in_eager(dt):
    r = np.random.default_rng(0)
    x0 = (r.random(500) * 3 + 0.1).astype(dt)

    def f(m, x, e):
        k = e.sum()                       # 3
        return tuple(x ** (k + d) for d in (0, -1, -2, -2.5, -3.5, -4, -5))

    e0 = np.array([1.5, 1.5], dt)
    eager = f(tg, tg.tensor(x0), tg.tensor(e0))
    got = tg.compile(lambda x, e: f(tg, x, e), fullgraph=True)(tg.tensor(x0), tg.tensor(e0))
    want = f(torch, torch.tensor(x0), torch.tensor(e0))
    for k, (c, e, t) in enumerate(zip(got, eager, want)):
        _bits(c.numpy(), e.numpy(), f"exponent {k}: compiled vs eager")
        np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=4 * np.finfo(dt).eps, atol=0)


def test_xlogy_of_a_0_dim_value_computed_inside_and_a_number_compiles():
    """xlogy(x.sum(), 2.0) and special.xlog1py(x.sum(), 3): the kernel read the number's dtype
    (AttributeError: 'float' object has no attribute 'dtype') where a numpy scalar stood first."""
    def f(m, x):
        s = x.sum()
        return m.xlogy(s, 2.0), m.xlogy(2.0, s), m.special.xlog1py(s, 3), m.special.xlog1py(s, True), m.xlogy(s, x)

    for dt in (np.float32, np.float64):
        x0 = np.array([0.5, 1.5], dt)
        eager = f(tg, tg.tensor(x0))
        got = tg.compile(lambda x: f(tg, x), fullgraph=True)(tg.tensor(x0))
        want = f(torch, torch.tensor(x0))
        for k, (c, e, t) in enumerate(zip(got, eager, want)):
            _bits(c.numpy(), e.numpy(), f"{k}: compiled vs eager")
            np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=4 * np.finfo(dt).eps)


# -- call-sequence seeds 1413 and 1869: an expanded argument --------------------------------------------

def _expanded(m, shape, dt="int64"):
    base = np.arange(int(np.prod(shape[1:])), dtype=dt).reshape((1,) + tuple(shape[1:]))
    return m.tensor(base).expand(*shape)


def test_a_view_of_a_value_the_passes_made_an_argument_is_laid_out_as_eagers():
    """seed 1413: (y * 1).expand_as(x + y) of an expanded int64 y: the passes drop `* 1`, and the
    compiled output was a broadcast of y's array, strides (0, 5, 1) where eager's and torch's are
    (25, 5, 1); a view(-1) of it then raised where torch's works."""
    def f(m, x, y):
        return (y * 1).expand_as(x + y), x.unsqueeze(0).expand(3, *x.shape)

    cf = tg.compile(lambda x, y: f(tg, x, y))
    for make in (lambda m: m.tensor(np.arange(100).reshape(4, 5, 5)), lambda m: _expanded(m, (4, 5, 5))):
        want = f(torch, make(torch), make(torch))
        eager = f(tg, make(tg), make(tg))
        got = cf(make(tg), make(tg))
        for c, e, t in zip(got, eager, want):
            assert c.stride() == e.stride() == t.stride()
            _bits(c.numpy(), e.numpy(), "compiled vs eager")
        flat = got[0].view(-1)
        flat.add_(1)
        assert np.array_equal(flat.numpy(), want[0].reshape(-1).numpy() + 1)


def test_an_in_place_op_on_an_expanded_argument_with_no_elements_runs_as_eagers():
    """seed 1869: x.add_(c) on x an expand of size 0, by a program cached for a strided x: the write
    back into x's array raised ValueError (assignment destination is read-only), eager and torch
    write nothing."""
    def f(m, x, y, c):
        x.add_(c)
        return x * y

    cf = tg.compile(lambda x, y, c: f(tg, x, y, c))
    for make in (lambda m: m.tensor(np.zeros((0, 3, 1), np.float32)),
                 lambda m: m.tensor(np.zeros((0, 3, 1), np.float32)).transpose(0, 1).transpose(0, 1),
                 lambda m: _expanded(m, (0, 3, 1), "float32")):
        x, y = make(tg), tg.tensor(np.zeros((0, 3, 1), np.float32))
        xt = make(torch)
        want = f(torch, xt, torch.zeros(0, 3, 1), 0.0)
        got = cf(x, y, 0.0)
        assert tuple(got.shape) == tuple(want.shape) and x._version == xt._version


# -- clamp of bool tensors with a bool bound beside a tensor bound ------------------------------------
# Call-sequence seed 3200: clamp(b, min=False, max=t) of bool tensors, t 0-dim, raises in torch (a
# 0-dim tensor beside a number is a number: its scalar kernel, which has no bool version);
# tracegrad gave tensor(True), eager and compiled. An int or a float bound beside it promotes and
# runs; beside a 1-d tensor, a number is torch's TypeError. Both shapes, against torch.

_BOUNDS = [("False", "t"), ("t", "False"), ("True", None), (None, "t"), ("t", None), ("t", "t"), ("x", "True"),
           ("1", "t"), ("t", "1"), ("0.5", "t")]


def _bound(m, x, t, b):
    return None if b is None else {"t": t, "x": x}.get(b, None) if b in ("t", "x") else eval(b)


@pytest.mark.parametrize("shape", [(), (2,)], ids=["0-dim", "1-d"])
@pytest.mark.parametrize("lo, hi", _BOUNDS)
def test_clamp_of_bools_raises_or_promotes_as_torch(lo, hi, shape):
    def outcome(m, f):
        x, t = m.tensor(np.resize([True, False], shape)), m.tensor(np.resize([False, True], shape))
        try:
            r = f(x, t)
        except (NotImplementedError, TypeError) as e:      # (a number beside a 1-d tensor bound: TypeError)
            return "raises", (type(e).__name__, str(e).split(" - ")[0])
        return r.dtype.__repr__().split(".")[-1], np.asarray(r.tolist())

    want = outcome(torch, lambda x, t: torch.clamp(x, min=_bound(torch, x, t, lo), max=_bound(torch, x, t, hi)))

    def g(x, t):
        return tg.clamp(x, min=_bound(tg, x, t, lo), max=_bound(tg, x, t, hi))
    for got in (outcome(tg, g), outcome(tg, tg.compile(g))):
        assert got[0] == want[0]
        assert np.array_equal(got[1], want[1]) if got[0] != "raises" else got[1] == want[1]

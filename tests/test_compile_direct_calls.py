"""Statements the numpy code generator writes as direct numpy calls instead of calling the
op's kernel (gather and scatter along the last dim of a 2-d value, where on integers,
exact conversions, matmul, permute, detach): compiled values and gradients equal torch's,
special values (-0.0, NaN, infinities) included, and an index out of range still raises."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
from test_compile_fusion import _same_values, _special as fusion_special


def _special(shape, dtype, seed):
    return fusion_special(shape, dtype, seed, every=5)


def _source(cf):
    p = cf.last_program
    return p.fwd_fn.source + (p.bwd_fn.source if p.bwd_fn is not None else "")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gather_and_scatter_along_rows_match_torch(dtype):
    x0 = _special((9, 6), dtype, 0)
    s0 = _special((9, 1), dtype, 1)
    w0 = _special((9, 2), dtype, 2)
    i1 = np.random.default_rng(3).integers(0, 6, (9, 1))
    i2 = np.argsort(np.random.default_rng(4).random((9, 6)), axis=1)[:, :2]    # distinct in a row

    def f(m, x, s, w, i1, i2):
        g = m.gather(x, 1, i1)                        # one index per row
        g2 = m.gather(x, -1, i2)                      # two per row
        a = m.scatter_add(x * 1, 1, i1, s)            # added: one position per row
        b = m.scatter(x * 1, 1, i2, w)                # written
        z = m.zeros(9, 6, dtype=x.dtype).scatter_add(1, i1, -s)   # 0.0 + -0.0 is +0.0, as in torch
        return g, g2, a, b, z

    cf = tg.compile(lambda *a: f(tg, *a))
    got = cf(tg.tensor(x0), tg.tensor(s0), tg.tensor(w0), tg.tensor(i1), tg.tensor(i2))
    want = f(torch, torch.tensor(x0), torch.tensor(s0), torch.tensor(w0), torch.tensor(i1), torch.tensor(i2))
    for a, b in zip(got, want):
        _same_values(a.numpy(), b.numpy())
    src = _source(cf)
    # positions in the flattened rows; each index's bounds checked once, by its first pick
    assert "scatter_flat(" in src and "ROWOFF_9_6" in src and "k_gather" not in src
    assert src.count("check_rows(i") == 0 and src.count("check_rows(") == 2


@pytest.mark.parametrize("itype", [np.int64, np.int32])
@pytest.mark.parametrize("bad", [-1, -7, 6, 2 ** 31 - 1])
@pytest.mark.parametrize("order", ["gather-first", "scatter-first"])
def test_index_out_of_range_raises_whichever_pick_of_it_comes_first(order, bad, itype):
    # a gather and a scatter of one index: only the first checks its bounds, and it raises as
    # the kernel does (a negative index too, which numpy would wrap)
    x0 = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    s0 = np.ones((5, 1), np.float32)

    def f(m, x, s, i):
        if order == "gather-first":
            g = m.gather(x, 1, i)
            return g * 2, m.scatter_add(x * 1, 1, i, s * g)
        a = m.scatter_add(x * 1, 1, i, s)
        return a * 2, m.gather(a, 1, i)

    cf = tg.compile(lambda *a: f(tg, *a))
    good = np.array([[1], [0], [5], [2], [3]], itype)
    got = cf(tg.tensor(x0), tg.tensor(s0), tg.tensor(good))
    for a, b in zip(got, f(torch, torch.tensor(x0), torch.tensor(s0), torch.tensor(good.astype(np.int64)))):
        _same_values(a.numpy(), b.numpy())
    assert _source(cf).count("check_rows(") == 1
    wrong = good.copy()
    wrong[3, 0] = bad
    with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 1 with size 6"):
        cf(tg.tensor(x0), tg.tensor(s0), tg.tensor(wrong))


def test_gather_and_scatter_gradients_match_torch():
    x0 = np.random.default_rng(0).standard_normal((7, 5))
    s0 = np.random.default_rng(1).standard_normal((7, 1))
    i = np.random.default_rng(2).integers(0, 5, (7, 1))

    def f(m, x, s, i):
        return ((m.gather(x.exp(), 1, i) * 3).sum() + (m.scatter_add(x * 2, 1, i, s * s) ** 2).sum())

    xg, sg = tg.tensor(x0, requires_grad=True), tg.tensor(s0, requires_grad=True)
    cf = tg.compile(lambda x, s, i: f(tg, x, s, i))
    gx, gs = tg.autograd.grad(cf(xg, sg, tg.tensor(i)), (xg, sg))
    xt, st = torch.tensor(x0, requires_grad=True), torch.tensor(s0, requires_grad=True)
    tx, ts = torch.autograd.grad(f(torch, xt, st, torch.tensor(i)), (xt, st))
    np.testing.assert_allclose(gx.numpy(), tx.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gs.numpy(), ts.numpy(), rtol=1e-12, atol=1e-12)


def test_scatter_add_with_repeated_positions_in_a_row_adds_each():
    # two indices per row may name one position twice: every value is added (np.add.at's way)
    x0 = np.zeros((3, 4), np.float32)
    s0 = np.arange(6, dtype=np.float32).reshape(3, 2) + 1
    i = np.array([[1, 1], [0, 3], [2, 2]])

    def f(m, x, s, i):
        return m.scatter_add(x * 1, 1, i, s)

    cf = tg.compile(lambda x, s, i: f(tg, x, s, i))
    got = cf(tg.tensor(x0), tg.tensor(s0), tg.tensor(i))
    _same_values(got.numpy(), f(torch, torch.tensor(x0), torch.tensor(s0), torch.tensor(i)).numpy())


def test_cross_entropy_target_out_of_range_still_raises():
    x = tg.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    cf = tg.compile(lambda x, y: tg.nn.functional.cross_entropy(x, y))
    cf(x, tg.tensor(np.array([0, 1, 2, 1])))
    with pytest.raises((IndexError, RuntimeError)):
        cf(x, tg.tensor(np.array([0, 3, 2, 1])))


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_integer_where_conversions_matmul_and_permute_match_torch(dtype):
    x0 = _special((6, 4), dtype, 0)
    w0 = np.random.default_rng(1).standard_normal((4, 3)).astype(dtype)
    y0 = np.array([3, -100, 1, 0, -100, 2])

    def f(m, x, w, y):
        ign = y == -100
        safe = m.where(ign, 0, y)                      # integers: not the float bit-mask path
        weight = m.where(ign, 0, 1).to(x.dtype)        # int64 -> float: an exact conversion
        flags = ign.to(x.dtype)                        # bool -> float
        wide = x.to(m.float64)                         # float32 -> float64 (or no change)
        prod = x.detach() @ w                          # detach, matmul
        return safe, weight, flags, wide, prod.permute(1, 0) * 1, (x.T @ x).sum(0)

    cf = tg.compile(lambda *a: f(tg, *a))
    got = cf(tg.tensor(x0), tg.tensor(w0), tg.tensor(y0))
    want = f(torch, torch.tensor(x0), torch.tensor(w0), torch.tensor(y0))
    for a, b in zip(got[:4], want[:4]):
        _same_values(a.numpy(), b.numpy())
    eager = f(tg, tg.tensor(x0), tg.tensor(w0), tg.tensor(y0))
    for a, b in zip(got, eager):                       # products: the eager kernels' values exactly
        _same_values(a.numpy(), b.numpy())
    for a, b in zip(got[4:], want[4:]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5 if dtype == np.float32 else 1e-12)
    src = _source(cf)
    assert "np.matmul(" in src and "np.transpose(" in src and "np.where(" in src and ".astype(np.float64)" in src
    assert "np.equal(" in src and "k_eq" not in src


def test_narrowing_conversion_keeps_the_kernel():
    # float64 -> float32 may overflow: the kernel's conversion (inf, without a warning) stays
    cf = tg.compile(lambda x: (x * 2).to(tg.float32))
    x = tg.tensor(np.array([1e300, -1e300, 1.5], np.float64))
    _same_values(cf(x).numpy(), (torch.tensor([1e300, -1e300, 1.5], dtype=torch.float64) * 2).to(torch.float32).numpy())
    assert "k_convert" in cf.last_program.fwd_fn.source


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reshapes_of_numpy_values_use_the_arrays_method_and_match_torch(dtype):
    # reshapes of an input, of a ufunc's result, of a 0-d sum (a numpy scalar) and of a reshape
    x0 = _special((6, 4), dtype, 3)

    def f(m, x):
        s = x.sum()                                    # 0-d: a numpy scalar in the generated code
        y = (x * 2).reshape(4, 6).unsqueeze(0)
        return x.reshape(24), y.squeeze(0).reshape(2, 12), s.reshape(1) * x.reshape(24, 1)

    cf = tg.compile(lambda x: f(tg, x))
    got = cf(tg.tensor(x0))
    for a, b in zip(got, f(torch, torch.tensor(x0))):
        _same_values(a.numpy(), b.numpy())
    src = cf.last_program.fwd_fn.source
    assert ".reshape((" in src and "np.reshape(" not in src


@pytest.mark.parametrize("value", [0.1, -0.0, 1e300, -1e300, float("nan"), float("inf"), 3.4028234663852886e38,
                                   3.4028235e38, 3.40282357e38, 1e-46, -1e-300])
def test_float64_scalar_to_float32_matches_torch_without_a_warning(value):
    # a 0-d float64 (a learning rate) converted to float32: the cast alone within float32's
    # range, the kernel (inf, no overflow warning) outside it
    cf = tg.compile(lambda x, s: x * (s * 1).to(tg.float32))
    x = tg.tensor(np.ones(3, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cf(x, tg.tensor(value, dtype=tg.float64))
    want = torch.ones(3) * (torch.tensor(value, dtype=torch.float64) * 1).to(torch.float32)
    _same_values(got.numpy(), want.numpy())
    assert "F32_MAX" in cf.last_program.fwd_fn.source

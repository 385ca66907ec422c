"""select_scatter, slice_scatter, diagonal_scatter, masked_scatter(_), put(_), renorm(_) and mode
against torch: values, dtypes, grad_fn names, gradients (and float64 gradcheck/gradgradcheck),
torch's errors (type and message), in-place forms, and compiled against eager.

mode's position where the mode value repeats is the one torch's kernel returns: its std::sort
order (not stable past 16 elements, and NaN-dependent), reproduced step for step; the tests
compare indices exactly on slices of 1 to 1000 elements, with ties and NaNs.
"""
import numpy as np
import pytest
import torch

import tracegrad as tg

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

X = np.arange(12.).reshape(3, 4) - 4.5
S4, S3 = np.array([10., 20, 30, 40]), np.array([7., 8, 9])
M1 = [[True, False, True, False]]


def _run(m, fn, arrays):
    xs = [m.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(m, *xs)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    names = [type(o.grad_fn).__name__ for o in outs]
    want = [x for x in xs if x.requires_grad]
    gs = ()
    if want and outs[0].requires_grad:
        w = m.tensor(np.linspace(0.5, 2, outs[0].numel()).reshape(tuple(outs[0].shape)), dtype=outs[0].dtype)
        gs = m.autograd.grad((outs[0] * w).sum(), want, allow_unused=True)
    return [o.detach() for o in outs], names, gs


def check(fn, *arrays, exact=True):
    """fn under torch and tracegrad: the same values, dtypes, grad_fn names and gradients, or the
    same exception type and message."""
    try:
        ot, nt, gt = _run(torch, fn, arrays)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)) as eg:
            _run(tg, fn, arrays)
        assert str(eg.value) == str(e)
        return
    og, ng, gg = _run(tg, fn, arrays)
    assert ng == nt
    for a, b in zip(og, ot):
        assert str(a.dtype) == str(b.dtype) and tuple(a.shape) == tuple(b.shape)
        if exact:
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    assert len(gg) == len(gt)
    for a, b in zip(gg, gt):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def _t(m, v, dt=None):
    return m.tensor(v) if dt is None else m.tensor(v, dtype=getattr(m, dt))


CASES = {
    "select": (lambda m, x, s: m.select_scatter(x, s, 0, 1), X, S4),
    "select_last_neg": (lambda m, x, s: m.select_scatter(x, s, 1, -1), X, S3),
    "select_method": (lambda m, x, s: x.select_scatter(s, 0, 2), X, S4),
    "select_oob": (lambda m, x, s: m.select_scatter(x, s, 0, 3), X, S4),
    "select_oob_neg": (lambda m, x, s: m.select_scatter(x, s, 0, -4), X, S4),
    "select_bad_dim": (lambda m, x, s: m.select_scatter(x, s, 2, 0), X, S4),
    "select_bad_shape": (lambda m, x, s: m.select_scatter(x, s, 0, 1), X, S3),
    "select_unbroadcast": (lambda m, x, s: m.select_scatter(x, s.reshape(1, 4), 0, 1), X, S4),
    "select_0d": (lambda m, x, s: m.select_scatter(x, s, 0, 0), np.array(1.), np.array(2.)),
    "select_of_transposed": (lambda m, x, s: m.select_scatter(x.t(), s, 0, 1), X, S3),
    "select_src_other_dtype": (lambda m, x, s: m.select_scatter(x, s.float(), 0, 1), X, S4),
    "select_3d": (lambda m, x, s: m.select_scatter(x, s, 1, 2), np.arange(24.).reshape(2, 3, 4),
                  np.ones((2, 4))),
    "slice_step": (lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), X, np.ones((3, 2))),
    "slice_neg_start": (lambda m, x, s: m.slice_scatter(x, s, dim=1, start=-2), X, np.ones((3, 2))),
    "slice_past_end": (lambda m, x, s: m.slice_scatter(x, s, 1, 5, 9), X, np.ones((3, 0))),
    "slice_all": (lambda m, x, s: m.slice_scatter(x, s), X, np.full((3, 4), 2.)),
    "slice_big_step": (lambda m, x, s: m.slice_scatter(x, s, 0, 1, None, 5), X, np.full((1, 4), 2.)),
    "slice_end_before_start": (lambda m, x, s: m.slice_scatter(x, s, 0, 2, 1), X, np.ones((0, 4))),
    "slice_zero_step": (lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 0), X, np.ones((3, 4))),
    "slice_bad_shape": (lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), X, np.ones((3, 3))),
    "slice_0d": (lambda m, x, s: m.slice_scatter(x, s, 0), np.array(1.), np.array(2.)),
    "diag": (lambda m, x, s: m.diagonal_scatter(x, s), X, S3),
    "diag_offset": (lambda m, x, s: m.diagonal_scatter(x, s, 1), X, S3),
    "diag_neg_offset": (lambda m, x, s: m.diagonal_scatter(x, s, -1), X, S3[:2]),
    "diag_swapped": (lambda m, x, s: m.diagonal_scatter(x, s, 0, 1, 0), X, S3),
    "diag_empty": (lambda m, x, s: m.diagonal_scatter(x, s, 5), X, np.ones(0)),
    "diag_same_dims": (lambda m, x, s: m.diagonal_scatter(x, s, 0, 0, 0), X, S3),
    "diag_1d": (lambda m, x, s: m.diagonal_scatter(x, s), np.zeros(3), np.ones(1)),
    "diag_3d": (lambda m, x, s: m.diagonal_scatter(x, s, 1, -1, 0), np.arange(24.).reshape(2, 3, 4), np.ones((2, 3))),
    "diag_bad_shape": (lambda m, x, s: m.diagonal_scatter(x, s), X, S4),
    "masked": (lambda m, x, s: m.masked_scatter(x, _t(m, M1), s), X, np.arange(100., 110.)),
    "masked_method": (lambda m, x, s: x.masked_scatter(_t(m, X > 0), s), X, np.arange(100., 106.).reshape(2, 3)),
    "masked_short_source": (lambda m, x, s: x.masked_scatter(_t(m, M1), s), X, np.arange(100., 101.)),
    "masked_int_mask": (lambda m, x, s: x.masked_scatter(_t(m, M1).int(), s), X, np.arange(100., 110.)),
    "masked_dtype": (lambda m, x, s: x.masked_scatter(_t(m, M1), s), X, np.arange(100, 110)),
    "masked_broadcast_input": (lambda m, x, s: m.masked_scatter(x, m.ones(2, 4, dtype=m.bool), s), np.zeros(4),
                               np.arange(100., 200.)),
    "masked_none_empty_source": (lambda m, x, s: m.masked_scatter(x, m.zeros(3, 4, dtype=m.bool), s), X,
                                 np.zeros(0)),
    "masked_one_empty_source": (lambda m, x, s: m.masked_scatter(x, _t(m, M1), s), X, np.zeros(0)),
    "masked_all": (lambda m, x, s: m.masked_scatter(x, m.ones(3, 4, dtype=m.bool), s), X, np.arange(12., 0, -1)),
    "put": (lambda m, x, s: x.put(_t(m, [0, -1]), s), X, np.array([5., 6.])),
    "put_oob": (lambda m, x, s: x.put(_t(m, [0, 12]), s), X, np.array([5., 6.])),
    "put_oob_neg": (lambda m, x, s: x.put(_t(m, [0, -13]), s), X, np.array([5., 6.])),
    "put_numel": (lambda m, x, s: x.put(_t(m, [0, 1]), s), X, np.array([5., 6., 7])),
    "put_float_index": (lambda m, x, s: x.put(_t(m, [0., 1]), s), X, np.array([5., 6.])),
    "put_dtype": (lambda m, x, s: x.put(_t(m, [0, 1]), s), X, np.array([5, 6])),
    "put_accumulate": (lambda m, x, s: x.put(_t(m, [[0, 0], [1, -12]]), s, accumulate=True), X,
                       np.array([5., 6., 7, 8])),
    "put_function": (lambda m, x, s: m.put(x, _t(m, [3, 1]), s), X, np.array([5., 6.])),
    "put_empty": (lambda m, x, s: m.put(x, _t(m, [], "int64"), s), X, np.zeros(0)),
    "put_2d_source": (lambda m, x, s: m.put(x, _t(m, [3, 1, 7, 8]), s), X, np.array([[5., 6.], [7, 8]])),
    "renorm": (lambda m, x: m.renorm(x, 2, 0, 5), X),
    "renorm_p1": (lambda m, x: m.renorm(x, 1, 1, 5), X),
    "renorm_inf": (lambda m, x: m.renorm(x, float("inf"), 1, 5), X),
    "renorm_zero_max": (lambda m, x: m.renorm(x, 3, -1, 0.), X),
    "renorm_3d": (lambda m, x: x.renorm(2, 1, 3.0), np.random.default_rng(0).standard_normal((2, 3, 4))),
    "renorm_p0": (lambda m, x: m.renorm(x, 0, 0, 5), X),
    "renorm_neg_max": (lambda m, x: m.renorm(x, 2, 0, -5), X),
    "renorm_int": (lambda m, x: m.renorm(x, 2, 0, 5), X.astype(np.int64)),
    "renorm_1d": (lambda m, x: m.renorm(x, 2, 0, 1), np.ones(3)),
    "renorm_bad_dim": (lambda m, x: m.renorm(x, 2, 2, 5), X),
    "mode": (lambda m, x: tuple(m.mode(x)), np.array([[1., 2, 2, 3], [4, 4, 1, 1], [0, 5, 5, 5]])),
    "mode_dim0_keep": (lambda m, x: tuple(x.mode(0, True)), np.array([[1., 2, 2], [3, 3, 1]])),
    "mode_0d": (lambda m, x: tuple(m.mode(x)), np.array(5.)),
    "mode_empty_dim": (lambda m, x: tuple(m.mode(x, 1)), np.zeros((3, 0))),
    "mode_empty_other": (lambda m, x: tuple(m.mode(x, 1)), np.zeros((0, 3))),
    "mode_bad_dim": (lambda m, x: tuple(m.mode(x, 1)), np.array([1., 2])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_torch(name):
    fn, *arrays = CASES[name]
    check(fn, *arrays, exact=not name.startswith("renorm"))


GRAD_CASES = [
    ("select", lambda x, s: tg.select_scatter(x, s[:4], 0, 1)),
    ("slice", lambda x, s: tg.slice_scatter(x, s[:6].reshape(3, 2), 1, 1, None, 2)),
    ("diagonal", lambda x, s: tg.diagonal_scatter(x, s[:3], 1)),
    ("masked", lambda x, s: tg.masked_scatter(x, x > 0, s)),
    ("put", lambda x, s: tg.put(x, tg.tensor([0, 5, -1, 5]), s[:4], accumulate=True)),
    ("put_replace", lambda x, s: tg.put(x, tg.tensor([0, 5, -1]), s[:3])),
    ("renorm", lambda x, s: tg.renorm(x * s[:4], 2, 0, 4.0)),
    ("renorm_p3", lambda x, s: tg.renorm(x, 3, 1, 2.5) * s[0]),
    ("mode", lambda x, s: tg.mode(x * s[:4], 1).values),
]


@pytest.mark.parametrize("name,fn", GRAD_CASES, ids=[n for n, _ in GRAD_CASES])
def test_gradcheck_and_gradgradcheck(name, fn):
    rng = np.random.default_rng(3)
    x = tg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    s = tg.tensor(rng.standard_normal(12) + 1.5, requires_grad=True)
    assert tg.autograd.gradcheck(fn, (x, s))
    assert tg.autograd.gradgradcheck(fn, (x, s))


def test_in_place_forms():
    """masked_scatter_, put_, renorm_: values, grad_fn names and gradients as torch's, through a view
    too (the base's CopySlices)."""
    cases = [("masked_scatter_", lambda m, t: (_t(m, M1), m.arange(100., 112., dtype=t.dtype))),
             ("put_", lambda m, t: (_t(m, [0, -1]), m.tensor([5., 6.], dtype=t.dtype))),
             ("put_", lambda m, t: (_t(m, [0, 0]), m.tensor([5., 6.], dtype=t.dtype), True)),
             ("renorm_", lambda m, t: (2, 0, 3.0))]
    for name, args in cases:
        res = []
        for m in (torch, tg):
            x = m.tensor(X, requires_grad=True)
            y = x * 1
            assert getattr(y, name)(*args(m, y)) is y
            names = [type(y.grad_fn).__name__]
            z = x * 1
            v = z[1:]
            getattr(v, name)(*args(m, v))
            names.append(type(z.grad_fn).__name__)
            (y.sum() + (z * z).sum()).backward()
            res.append((y.detach().numpy(), z.detach().numpy(), names, x.grad.numpy()))
        (yt, zt, nt, gt), (yg, zg, ng, gg) = res
        np.testing.assert_allclose(yg, yt, rtol=1e-12)
        np.testing.assert_allclose(zg, zt, rtol=1e-12)
        assert ng == nt, (name, ng, nt)
        np.testing.assert_allclose(gg, gt, rtol=1e-12)


def test_compiled_equals_eager():
    """Compiled calls give eager's values and gradients bit for bit, on new masks, indices and
    values through the cached program; a data-dependent error still raises."""
    def f(x, s, mask, idx):
        return (tg.select_scatter(x, s[:4], 0, 1) * 2 + tg.slice_scatter(x, s[:4].reshape(1, 4), 0, 2)
                + tg.diagonal_scatter(x, s[:3]) + tg.renorm(x, 2, 0, 5) + tg.masked_scatter(x, mask, s)
                + tg.put(x, idx, s[:2], accumulate=True) + tg.mode(x, 1, keepdim=True).values)
    compiled = tg.compile(f)
    rng = np.random.default_rng(5)
    for k in range(4):
        xa = rng.integers(-2, 3, (3, 4)).astype(np.float64)
        sa = rng.standard_normal(12)
        mask = rng.random((3, 4)) < 0.5
        idx = rng.integers(-12, 12, 2)
        outs = []
        for fn in (f, compiled):
            x, s = tg.tensor(xa, requires_grad=True), tg.tensor(sa, requires_grad=True)
            y = fn(x, s, tg.tensor(mask), tg.tensor(idx))
            gx, gs = tg.autograd.grad((y * y).sum(), (x, s))
            outs.append((y.detach().numpy(), gx.numpy(), gs.numpy()))
        for a, b in zip(*outs):
            np.testing.assert_array_equal(a, b, err_msg=f"call {k}")
    # more ones in the mask than source has elements: torch's error, as eager's
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        tg.compile(lambda x, mk, s: tg.masked_scatter(x, mk, s))(tg.tensor(X), tg.tensor(X > -9), tg.zeros(3,
                                                                                                   dtype=tg.float64))
    with pytest.raises(IndexError):
        tg.compile(lambda x, i, s: tg.put(x, i, s))(tg.tensor(X), tg.tensor([0, 12]),
                                                    tg.tensor([1., 2.], dtype=tg.float64))


def test_compiled_masked_scatter_with_an_empty_source_runs_eagerly():
    f = tg.compile(lambda x, mk, s: tg.masked_scatter(x, mk, s))
    x, s = tg.tensor(X), tg.zeros(0, dtype=tg.float64)
    with pytest.warns(UserWarning, match="empty source"):
        out = f(x, tg.zeros(3, 4, dtype=tg.bool), s)
    np.testing.assert_array_equal(out.numpy(), X)
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        f(x, tg.tensor(X > 0), s)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "float16"])
def test_mode_positions_are_torchs(dtype):
    """Values and indices equal to torch's on slices short and long, with ties and NaNs (torch's
    position among a value's repeats is its std::sort's order)."""
    rng = np.random.default_rng(11)
    for shape, dim in [((7,), 0), ((30,), 0), ((4, 5), 1), ((3, 20, 2), 1), ((50, 3), 0), ((6, 16), 1),
                       ((6, 17), 1), ((2, 1000), 1)]:
        for t in range(4):
            a = rng.integers(0, rng.integers(1, 6), shape).astype(np.float64)
            if t % 2 and dtype.startswith("float"):
                a[rng.random(shape) < 0.3] = np.nan
            if t == 2:
                a = np.sort(a, axis=dim)
            for keep in (False, True):
                tv, ti = torch.mode(torch.tensor(a).to(getattr(torch, dtype)), dim, keep)
                gv, gi = tg.mode(tg.tensor(a).to(getattr(tg, dtype)), dim, keep)
                assert str(gv.dtype) == str(tv.dtype) and tuple(gv.shape) == tuple(tv.shape)
                np.testing.assert_array_equal(gi.numpy(), ti.numpy(), err_msg=f"{shape} {dim} {t}")
                np.testing.assert_array_equal(gv.float().numpy(), tv.float().numpy())

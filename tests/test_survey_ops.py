"""The ops, layers and spellings the tutorial survey (test_tutorial_survey.py) found missing:
values and float64 gradients against torch (1e-10), gradcheck of each derivative, compiled
against eager, and torch's errors where a call is wrong."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn.functional as TF
import torch.nn.functional as F

TOL = dict(rtol=1e-10, atol=1e-12)


def arr(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


class Const:
    """An argument passed without requires_grad (a target)."""

    def __init__(self, value):
        self.value = np.asarray(value)


def pair(a, req=True):
    if isinstance(a, Const):
        return pair(a.value, False)
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return tg.tensor(a, dtype=tg.float64, requires_grad=req), torch.tensor(a, dtype=torch.float64,
                                                                              requires_grad=req)
    return tg.tensor(a), torch.tensor(a)


def _flat(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]


def check(fn_tg, fn_torch, *arrays, tol=TOL, grad=True, gradcheck=True, compiled=True):
    """Values, dtypes and the gradient of a weighted sum equal torch's; gradcheck and
    gradgradcheck of tracegrad's derivative in float64; and the compiled call equals eager."""
    ins = [pair(a, grad and not isinstance(a, Const) and np.asarray(a).dtype.kind == "f") for a in arrays]
    arrays = [a.value if isinstance(a, Const) else a for a in arrays]
    ot, orr = _flat(fn_tg(*[i[0] for i in ins])), _flat(fn_torch(*[i[1] for i in ins]))
    assert len(ot) == len(orr)
    for a, b in zip(ot, orr):
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tol)
    diff = [(a, b) for a, b in zip(ot, orr) if b.requires_grad]
    if grad and diff:
        lt = sum((a * tg.tensor(arr(*b.shape, seed=11 + k))).sum() for k, (a, b) in enumerate(diff))
        lr = sum((b * torch.tensor(arr(*b.shape, seed=11 + k))).sum() for k, (a, b) in enumerate(diff))
        lt.backward()
        lr.backward()
        for a, b in ins:
            if isinstance(b, torch.Tensor) and b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)
        if gradcheck:
            fresh = [tg.tensor(np.asarray(x), dtype=tg.float64, requires_grad=True) if b.requires_grad
                     else tg.tensor(np.asarray(x)) for x, (_, b) in zip(arrays, ins)]
            diff_pos = [i for i, (x, (_, b)) in enumerate(zip(arrays, ins)) if b.requires_grad]

            def f(*xs):
                full = list(fresh)
                for i, x in zip(diff_pos, xs):
                    full[i] = x
                outs = [o for o in _flat(fn_tg(*full)) if o.dtype.is_floating_point]
                return tuple(outs)
            args = tuple(fresh[i] for i in diff_pos)
            assert tg.autograd.gradcheck(f, args)
    if compiled:
        cf = tg.compile(lambda *xs: fn_tg(*xs))
        xs = [tg.tensor(np.asarray(a)) for a in arrays]
        for a, b in zip(_flat(cf(*xs)), _flat(fn_tg(*xs))):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL)


# -- decompositions into existing ops ----------------------------------------------------------------

@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 1), (-1, 1, 2), (2, 2, 0)])
def test_diagonal(offset, d1, d2):
    check(lambda t: tg.diagonal(t, offset, d1, d2), lambda t: torch.diagonal(t, offset, d1, d2), arr(3, 4, 5))
    check(lambda t: t.diagonal(offset), lambda t: t.diagonal(offset), arr(4, 3))


def test_trace_and_diag_embed():
    check(tg.trace, torch.trace, arr(4, 3))
    for off in (0, 1, -2):
        check(lambda t: tg.diag_embed(t, off), lambda t: torch.diag_embed(t, off), arr(2, 3))
    check(lambda t: tg.diag_embed(t, 0, 0, 2), lambda t: torch.diag_embed(t, 0, 0, 2), arr(2, 3))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        tg.trace(tg.zeros(2, 2, 2))


def test_log10_trunc_frac_fmod():
    x = np.array([-2.7, -1.5, -0.2, 0.3, 1.5, 2.9, 7.25])
    check(tg.log10, torch.log10, np.abs(x) + 0.1)
    check(tg.trunc, torch.trunc, x)
    check(tg.frac, torch.frac, x)
    check(lambda a, b: tg.fmod(a, b), lambda a, b: torch.fmod(a, b), x, np.array([1.5, -1.25, 0.7, 2.0, -2.0, 0.9, 3.0]))
    check(lambda a: tg.fmod(a, 2.5), lambda a: torch.fmod(a, 2.5), x)
    ints = np.array([-7, -3, 3, 7])
    assert tg.fmod(tg.tensor(ints), 3).tolist() == torch.fmod(torch.tensor(ints), 3).tolist()
    assert tg.trunc(tg.tensor(ints)).tolist() == ints.tolist()


def test_fmax_fmin_ignore_nan():
    a = np.array([1.0, np.nan, 3.0, np.nan, -1.0])
    b = np.array([2.0, 5.0, np.nan, np.nan, -2.0])
    for f in ("fmax", "fmin"):
        got = getattr(tg, f)(tg.tensor(a), tg.tensor(b)).numpy()
        want = getattr(torch, f)(torch.tensor(a), torch.tensor(b)).numpy()
        np.testing.assert_array_equal(got, want)
        check(getattr(tg, f), getattr(torch, f), arr(5, seed=1), arr(5, seed=2))


def test_logaddexp_xlogy_addmm_baddbmm():
    check(tg.logaddexp, torch.logaddexp, arr(4, seed=1) * 30, arr(4, seed=2) * 30)
    check(tg.xlogy, torch.xlogy, np.array([0.0, 1.5, 2.0]), np.array([0.5, 2.0, 3.0]))
    check(lambda i, a, b: tg.addmm(i, a, b, beta=0.5, alpha=2), lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2),
          arr(2, 4), arr(2, 3, seed=1), arr(3, 4, seed=2))
    check(tg.baddbmm, torch.baddbmm, arr(2, 2, 4), arr(2, 2, 3, seed=1), arr(2, 3, 4, seed=2))


def test_masked_select_movedim_ravel():
    x = arr(3, 4)
    m = x > 0
    check(lambda t: tg.masked_select(t, tg.tensor(m)), lambda t: torch.masked_select(t, torch.tensor(m)), x,
          compiled=False)
    check(lambda t: tg.masked_select(t, tg.tensor(m[0])), lambda t: torch.masked_select(t, torch.tensor(m[0])), x,
          compiled=False)
    check(lambda t: tg.movedim(t, (0, 1), (2, 0)), lambda t: torch.movedim(t, (0, 1), (2, 0)), arr(2, 3, 4))
    check(lambda t: t.moveaxis(-1, 0), lambda t: t.moveaxis(-1, 0), arr(2, 3, 4))
    check(tg.ravel, torch.ravel, arr(2, 3))
    with pytest.raises(RuntimeError, match="same number of dims"):
        tg.movedim(tg.zeros(2, 3), (0, 1), (1,))


@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "unbiased": False}, {"dim": (0, 1), "keepdim": True}])
def test_std_mean_var_mean(kw):
    check(lambda t: tg.std_mean(t, **kw), lambda t: torch.std_mean(t, **kw), arr(4, 5))
    check(lambda t: tg.var_mean(t, **kw), lambda t: torch.var_mean(t, **kw), arr(4, 5))


def test_nan_to_num():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])
    for kw in ({}, {"nan": 1.5, "posinf": 9.0, "neginf": -9.0}):
        for dt in (torch.float32, torch.float64, torch.float16):
            got = tg.nan_to_num(tg.tensor(x).to(getattr(tg, str(dt).split(".")[1])), **kw).numpy()
            want = torch.nan_to_num(torch.tensor(x, dtype=dt), **kw).numpy()
            np.testing.assert_array_equal(got, want)
    check(tg.nan_to_num, torch.nan_to_num, arr(5))
    t = tg.tensor(x, requires_grad=True)
    tg.nan_to_num(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [1, 0, 0, 0, 1])


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
def test_cdist(p):
    check(lambda a, b: tg.cdist(a, b, p), lambda a, b: torch.cdist(a, b, p), arr(4, 3), arr(5, 3, seed=1))
    check(lambda a, b: tg.cdist(a, b, p), lambda a, b: torch.cdist(a, b, p), arr(2, 4, 3), arr(2, 2, 3, seed=1),
          gradcheck=False)


def test_cdist_zero_distance_gradient_is_zero_as_torch():
    a = np.array([[0.0, 1.0], [2.0, 2.0]])
    ta, tt = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    tg.cdist(ta, ta.detach()).sum().backward()
    torch.cdist(tt, tt.detach()).sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), tt.grad.numpy(), **TOL)


def test_bincount_and_histc():
    x = np.array([0, 1, 1, 3, 3, 3, 7])
    w = np.array([0.5, 1.0, 2.0, 0.25, 0.25, 1.0, 3.0])
    for kw in ({}, {"minlength": 10}):
        np.testing.assert_array_equal(tg.bincount(tg.tensor(x), **kw).numpy(),
                                      torch.bincount(torch.tensor(x), **kw).numpy())
    a, b = tg.bincount(tg.tensor(x), tg.tensor(w)), torch.bincount(torch.tensor(x), torch.tensor(w))
    np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    with pytest.raises(RuntimeError, match="non-negative"):
        tg.bincount(tg.tensor([-1, 2]))
    v = arr(50)
    for kw in ({}, {"bins": 7, "min": -1, "max": 1}):
        np.testing.assert_array_equal(tg.histc(tg.tensor(v), **kw).numpy(), torch.histc(torch.tensor(v), **kw).numpy())


@pytest.mark.parametrize("n", [0, 1, 2, 5, -2])
def test_matrix_power(n):
    a = arr(3, 3) + 3 * np.eye(3)
    check(lambda t: tg.linalg.matrix_power(t, n), lambda t: torch.linalg.matrix_power(t, n), a, tol=dict(
        rtol=1e-9, atol=1e-11))


@pytest.mark.parametrize("scale", [0.1, 1.0, 8.0])
def test_matrix_exp(scale):
    a = arr(2, 3, 3) * scale
    check(tg.matrix_exp, torch.matrix_exp, a, tol=dict(rtol=1e-9, atol=1e-10), compiled=False)
    with pytest.raises(Exception, match="outside tracegrad.compile"):
        tg.compile(tg.matrix_exp, fullgraph=True)(tg.tensor(a))


def test_out_argument():
    a, b = tg.arange(6.).reshape(2, 3), tg.ones(3, 2)
    out = tg.empty(2, 2)
    r = tg.matmul(a, b, out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), torch.matmul(torch.arange(6.).reshape(2, 3), torch.ones(3, 2)))
    z = tg.zeros(3)
    with pytest.warns(UserWarning, match="was resized"):
        tg.add(tg.ones(2, 2), 1, out=z)
    assert tuple(z.shape) == (2, 2) and z.sum().item() == 8
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        tg.mul(tg.ones(2, requires_grad=True), 2, out=tg.zeros(2))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        tg.mul(tg.ones(2), 2, out=tg.zeros(2, dtype=tg.long))
    c = tg.zeros(2, 3)
    tg.cat([tg.ones(1, 3), tg.zeros(1, 3)], out=c)
    assert c.sum().item() == 3


def test_range_index():
    x = np.arange(12.).reshape(3, 4)
    check(lambda t: t[range(2), [1, 3]], lambda t: t[range(2), [1, 3]], x)
    check(lambda t: t[range(1, 3)], lambda t: t[range(1, 3)], x)


def test_legacy_constructors_and_variable():
    assert tg.FloatTensor([1, 2]).dtype is tg.float32 and tg.LongTensor([1]).dtype is tg.int64
    assert tuple(tg.Tensor(2, 3).shape) == (2, 3) and tg.Tensor([1, 2]).dtype is tg.float32
    assert tuple(tg.Tensor().shape) == tuple(torch.Tensor().shape) == (0,)
    assert isinstance(tg.zeros(2), tg.FloatTensor) and not isinstance(tg.zeros(2), tg.LongTensor)
    assert tg.zeros(2).type() == torch.zeros(2).type() == "torch.FloatTensor"
    x = tg.ones(2)
    v = tg.autograd.Variable(x, requires_grad=True)
    assert v.requires_grad and v.is_leaf and not x.requires_grad and isinstance(x, tg.autograd.Variable)
    assert tg.accelerator.is_available() == tg.cuda.is_available()


# -- nn.functional ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, dilation=2, ceil_mode=True)])
def test_max_pool1d(kw):
    check(lambda t: TF.max_pool1d(t, **kw), lambda t: F.max_pool1d(t, **kw), arr(2, 3, 9))
    check(lambda t: TF.max_pool1d(t, **kw, return_indices=True)[1].float(),
          lambda t: F.max_pool1d(t, **kw, return_indices=True)[1].float(), arr(3, 9), grad=False)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, padding=1, count_include_pad=False, ceil_mode=True)])
def test_avg_pool1d(kw):
    check(lambda t: TF.avg_pool1d(t, **kw), lambda t: F.avg_pool1d(t, **kw), arr(2, 3, 9))


@pytest.mark.parametrize("size", [(3, 2), (2, 2), (4, 5), (None, 3), 1, (5, 7)])
def test_adaptive_pooling(size):
    x = arr(2, 3, 7, 5)
    check(lambda t: TF.adaptive_avg_pool2d(t, size), lambda t: F.adaptive_avg_pool2d(t, size), x)
    check(lambda t: TF.adaptive_max_pool2d(t, size), lambda t: F.adaptive_max_pool2d(t, size), x)


def test_adaptive_pooling_1d_and_modules():
    x = arr(2, 3, 7)
    for o in (1, 3, 4, 7):
        check(lambda t: TF.adaptive_avg_pool1d(t, o), lambda t: F.adaptive_avg_pool1d(t, o), x)
        check(lambda t: TF.adaptive_max_pool1d(t, o), lambda t: F.adaptive_max_pool1d(t, o), x)
    for name, args in [("AdaptiveAvgPool1d", (3,)), ("AdaptiveMaxPool2d", ((2, 3),)), ("MaxPool1d", (2,)),
                       ("AvgPool1d", (3,)), ("PixelShuffle", (2,)), ("InstanceNorm2d", (3,)), ("Unfold", (2,))]:
        assert repr(getattr(tg.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


def test_instance_norm():
    x = arr(2, 3, 4, 5)
    w, b = arr(3, seed=1), arr(3, seed=2)
    check(lambda t, w, b: TF.instance_norm(t, weight=w, bias=b), lambda t, w, b: F.instance_norm(t, weight=w, bias=b),
          x, w, b, tol=dict(rtol=1e-9, atol=1e-10))
    rm, rv = tg.zeros(3, dtype=tg.float64), tg.ones(3, dtype=tg.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    TF.instance_norm(tg.tensor(x), rm, rv)
    F.instance_norm(torch.tensor(x), trm, trv)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), **TOL)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), **TOL)
    m, tm = tg.nn.InstanceNorm1d(3, affine=True, track_running_stats=True), torch.nn.InstanceNorm1d(
        3, affine=True, track_running_stats=True)
    xs = arr(4, 3, 6).astype(np.float32)
    np.testing.assert_allclose(m(tg.tensor(xs)).detach().numpy(), tm(torch.tensor(xs)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    m.eval(), tm.eval()
    np.testing.assert_allclose(m(tg.tensor(xs)).detach().numpy(), tm(torch.tensor(xs)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_pixel_shuffle_and_unshuffle():
    check(lambda t: TF.pixel_shuffle(t, 2), lambda t: F.pixel_shuffle(t, 2), arr(2, 8, 3, 2))
    check(lambda t: TF.pixel_unshuffle(t, 2), lambda t: F.pixel_unshuffle(t, 2), arr(2, 2, 4, 6))
    with pytest.raises(RuntimeError, match="divisible by the square"):
        TF.pixel_shuffle(tg.zeros(1, 3, 2, 2), 2)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=2, padding=1),
                                dict(kernel_size=3, dilation=2, padding=2, stride=(1, 2))])
def test_unfold_and_fold(kw):
    x = arr(2, 3, 6, 7)
    check(lambda t: TF.unfold(t, **kw), lambda t: F.unfold(t, **kw), x)
    cols = F.unfold(torch.tensor(x), **kw)
    check(lambda c: TF.fold(c, (6, 7), **kw), lambda c: F.fold(c, (6, 7), **kw), cols.numpy())
    check(lambda t: TF.unfold(t, **kw), lambda t: F.unfold(t, **kw), x[0])


def test_gumbel_softmax_is_a_distribution_and_straight_through():
    tg.manual_seed(0)
    logits = tg.tensor(arr(4, 5), requires_grad=True)
    y = TF.gumbel_softmax(logits, tau=0.5, hard=True)
    np.testing.assert_allclose(y.detach().sum(-1).numpy(), 1.0)
    assert set(np.unique(y.detach().numpy())) <= {0.0, 1.0}
    (y * tg.tensor(arr(4, 5, seed=3))).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0
    soft = TF.gumbel_softmax(tg.tensor(arr(4, 5)), tau=2.0)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-12)


def test_losses():
    a, b, c = arr(4, 3), arr(4, 3, seed=1), arr(4, 3, seed=2)
    y = np.array([1.0, -1.0, 1.0, -1.0])
    for red in ("mean", "sum", "none"):
        check(lambda a, b, y: TF.cosine_embedding_loss(a, b, y, margin=0.1, reduction=red),
              lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1, reduction=red), a, b, Const(y), compiled=False)
        check(lambda a, b, y: TF.margin_ranking_loss(a, b, y, margin=0.2, reduction=red),
              lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.2, reduction=red), a[:, 0], b[:, 0], Const(y))
        check(lambda a, y: TF.hinge_embedding_loss(a, y, reduction=red),
              lambda a, y: F.hinge_embedding_loss(a, y, reduction=red), a[:, 0], Const(y))
        check(lambda a, y: TF.soft_margin_loss(a, y, reduction=red),
              lambda a, y: F.soft_margin_loss(a, y, reduction=red), a[:, 0], Const(y))
        check(lambda a, t: TF.multilabel_soft_margin_loss(a, t, reduction=red),
              lambda a, t: F.multilabel_soft_margin_loss(a, t, reduction=red), a, Const((b > 0).astype(float)))
        check(lambda a, p, n: TF.triplet_margin_loss(a, p, n, reduction=red, swap=True),
              lambda a, p, n: F.triplet_margin_loss(a, p, n, reduction=red, swap=True), a, b, c)
        check(lambda i, t, v: TF.gaussian_nll_loss(i, t, v, full=True, reduction=red),
              lambda i, t, v: F.gaussian_nll_loss(i, t, v, full=True, reduction=red), a, b, np.abs(c) + 0.1)
        check(lambda i, t: TF.poisson_nll_loss(i, t, reduction=red),
              lambda i, t: F.poisson_nll_loss(i, t, reduction=red), a, Const(np.abs(b)))
        check(lambda i, t: TF.poisson_nll_loss(i, t, log_input=False, full=True, reduction=red),
              lambda i, t: F.poisson_nll_loss(i, t, log_input=False, full=True, reduction=red), np.abs(a) + 0.1,
              Const(np.abs(b) * 3))


def test_parameter_dict_and_pad_sequence():
    pd = tg.nn.ParameterDict({"a": tg.nn.Parameter(tg.ones(2)), "b": tg.nn.Parameter(tg.zeros(3))})
    tpd = torch.nn.ParameterDict({"a": torch.nn.Parameter(torch.ones(2)), "b": torch.nn.Parameter(torch.zeros(3))})
    assert repr(pd).replace("tracegrad", "torch") == repr(tpd)
    assert list(pd.keys()) == ["a", "b"] and [n for n, _ in pd.named_parameters()] == ["a", "b"]
    seqs = [arr(3, 2), arr(1, 2, seed=1), arr(2, 2, seed=2)]
    from tracegrad.nn.utils.rnn import pad_sequence
    for bf in (False, True):
        for side in ("right", "left"):
            check(lambda *s: pad_sequence(list(s), batch_first=bf, padding_value=-1.0, padding_side=side),
                  lambda *s: torch.nn.utils.rnn.pad_sequence(list(s), batch_first=bf, padding_value=-1.0,
                                                             padding_side=side), *seqs)
    with pytest.raises(NotImplementedError, match="packed sequences"):
        tg.nn.utils.rnn.pack_padded_sequence(tg.zeros(2, 3), [3, 2])


def test_init_orthogonal():
    for shape in [(4, 4), (3, 6), (6, 3), (4, 2, 3)]:
        w = tg.nn.init.orthogonal_(tg.empty(*shape), gain=2.0)
        flat = w.reshape(shape[0], -1).numpy().astype(np.float64)
        g = flat @ flat.T if shape[0] <= flat.shape[1] else flat.T @ flat
        np.testing.assert_allclose(g, 4 * np.eye(g.shape[0]), atol=1e-5)


@pytest.mark.parametrize("kw", [dict(batch_first=True), dict(norm_first=True, activation="gelu")])
def test_transformer_encoder_decoder(kw):
    np.testing.assert_array_equal(tg.nn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    args = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0, **kw)
    m, tm = tg.nn.Transformer(**args).double(), torch.nn.Transformer(**args).double()
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in tm.named_parameters()]
    rng = np.random.default_rng(0)
    with tg.no_grad(), torch.no_grad():
        for p, tp in zip(m.parameters(), tm.parameters()):
            w = rng.standard_normal(tuple(p.shape)) * 0.3
            p.copy_(tg.tensor(w))
            tp.copy_(torch.tensor(w))
    src, tgt = arr(2, 5, 8), arr(2, 4, 8, seed=1)
    if not kw.get("batch_first"):
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    pad = np.array([[False, False, False, True, True], [False] * 5])
    check(lambda s, t: m(s, t, tgt_mask=tg.nn.Transformer.generate_square_subsequent_mask(4, dtype=tg.float64),
                         src_key_padding_mask=tg.tensor(pad), memory_key_padding_mask=tg.tensor(pad)),
          lambda s, t: tm(s, t, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64),
                          src_key_padding_mask=torch.tensor(pad), memory_key_padding_mask=torch.tensor(pad)),
          src, tgt, tol=dict(rtol=1e-9, atol=1e-10), gradcheck=False)


# -- linalg decompositions ---------------------------------------------------------------------------

def spd(n, seed=0, batch=()):
    a = arr(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_cholesky():
    # the factorisation reads one triangle, the gradient is symmetric (torch's): gradcheck goes
    # through a symmetric input
    for batch in ((), (2,)):
        check(lambda a: tg.linalg.cholesky(a), lambda a: torch.linalg.cholesky(a), spd(3, batch=batch),
              gradcheck=False)
        check(lambda a: tg.linalg.cholesky(a, upper=True), lambda a: torch.linalg.cholesky(a, upper=True), spd(3),
              gradcheck=False)
    a = tg.tensor(arr(3, 3), requires_grad=True)
    assert tg.autograd.gradcheck(lambda a: tg.linalg.cholesky(a @ a.mT + 3 * tg.eye(3, dtype=tg.float64)), (a,))
    assert tg.autograd.gradgradcheck(lambda a: tg.linalg.cholesky(a @ a.mT + 3 * tg.eye(3, dtype=tg.float64)), (a,))
    with pytest.raises(tg.linalg.LinAlgError, match="leading minor of order 2 is not positive-definite"):
        tg.linalg.cholesky(tg.tensor([[1.0, 2.0], [2.0, 1.0]]))


def test_eigh_and_eigvalsh():
    a = spd(4, seed=3) - 3 * np.eye(4)
    check(tg.linalg.eigvalsh, torch.linalg.eigvalsh, a, gradcheck=False)
    check(lambda a: tg.linalg.eigvalsh(a, UPLO="U"), lambda a: torch.linalg.eigvalsh(a, UPLO="U"), a + np.triu(a, 1),
          gradcheck=False)
    sym = tg.tensor(a, requires_grad=True)
    assert tg.autograd.gradcheck(lambda s: tg.linalg.eigvalsh(s + s.mT), (sym,))
    # eigenvectors are fixed up to sign: compare a sign-free function of them
    check(lambda a: tg.linalg.eigh(a).eigenvectors ** 2, lambda a: torch.linalg.eigh(a).eigenvectors ** 2, a,
          tol=dict(rtol=1e-8, atol=1e-10), gradcheck=False)
    assert tg.autograd.gradcheck(lambda s: tg.linalg.eigh(s + s.mT)[1] ** 2, (sym,))


def test_svdvals_qr_pinv_matrix_rank():
    a = arr(5, 3)
    check(tg.linalg.svdvals, torch.linalg.svdvals, a)
    check(tg.linalg.svdvals, torch.linalg.svdvals, a.T)
    check(lambda a: tg.linalg.qr(a), lambda a: torch.linalg.qr(a), a, tol=dict(rtol=1e-9, atol=1e-11))
    check(lambda a: tg.linalg.qr(a), lambda a: torch.linalg.qr(a), arr(3, 3, seed=4), tol=dict(rtol=1e-9, atol=1e-11))
    check(tg.linalg.pinv, torch.linalg.pinv, a, tol=dict(rtol=1e-9, atol=1e-11))
    check(tg.linalg.pinv, torch.linalg.pinv, a.T, tol=dict(rtol=1e-9, atol=1e-11))
    low = arr(4, 2) @ arr(2, 4, seed=1)
    assert tg.linalg.matrix_rank(tg.tensor(low)).item() == torch.linalg.matrix_rank(torch.tensor(low)).item() == 2
    # singular vectors are fixed up to a shared sign: compare U S (sign-free per pair through U Vh)
    for x in (a, a.T, arr(3, 3, seed=7)):
        check(lambda t: tg.linalg.svd(t, full_matrices=False).U @ tg.linalg.svd(t, full_matrices=False).Vh,
              lambda t: torch.linalg.svd(t, full_matrices=False).U @ torch.linalg.svd(t, full_matrices=False).Vh,
              x, tol=dict(rtol=1e-8, atol=1e-10))
        t = tg.tensor(x, requires_grad=True)
        assert tg.autograd.gradcheck(lambda t: tg.linalg.svd(t, full_matrices=False), (t,))


# -- distributions -----------------------------------------------------------------------------------

def test_bernoulli_uniform_and_kl():
    from tracegrad import distributions as TD
    from torch import distributions as PD
    p = np.array([0.2, 0.7, 0.9])
    v = np.array([1.0, 0.0, 1.0])
    # (gradcheck moves v off {0, 1}, outside the support, which both libraries check unless told not to)
    check(lambda p, v: TD.Bernoulli(probs=p, validate_args=False).log_prob(v),
          lambda p, v: PD.Bernoulli(probs=p, validate_args=False).log_prob(v), p, v, tol=dict(rtol=1e-9, atol=1e-12))
    check(lambda p: TD.Bernoulli(probs=p).entropy(), lambda p: PD.Bernoulli(probs=p).entropy(), p,
          tol=dict(rtol=1e-9, atol=1e-12))
    check(lambda l, v: TD.Bernoulli(logits=l, validate_args=False).log_prob(v),
          lambda l, v: PD.Bernoulli(logits=l, validate_args=False).log_prob(v), arr(3), v)
    check(lambda lo, hi: TD.Uniform(lo, hi).log_prob(tg.tensor([0.1, 0.2], dtype=tg.float64)),
          lambda lo, hi: PD.Uniform(lo, hi).log_prob(torch.tensor([0.1, 0.2], dtype=torch.float64)),
          np.array([-1.0, 0.0]), np.array([1.0, 0.5]))
    check(lambda lo, hi: TD.Uniform(lo, hi).entropy(), lambda lo, hi: PD.Uniform(lo, hi).entropy(),
          np.array([-1.0, 0.0]), np.array([1.0, 0.5]))
    check(lambda a, b, c, d: TD.kl_divergence(TD.Normal(a, b), TD.Normal(c, d)),
          lambda a, b, c, d: PD.kl_divergence(PD.Normal(a, b), PD.Normal(c, d)), arr(3), np.abs(arr(3, seed=1)) + 0.5,
          arr(3, seed=2), np.abs(arr(3, seed=3)) + 0.5)
    check(lambda a, b: TD.kl_divergence(TD.Categorical(logits=a), TD.Categorical(logits=b)),
          lambda a, b: PD.kl_divergence(PD.Categorical(logits=a), PD.Categorical(logits=b)), arr(2, 4), arr(2, 4, seed=1))
    check(lambda a, b: TD.kl_divergence(TD.Bernoulli(probs=a), TD.Bernoulli(probs=b)),
          lambda a, b: PD.kl_divergence(PD.Bernoulli(probs=a), PD.Bernoulli(probs=b)), p, np.array([0.5, 0.1, 0.6]),
          tol=dict(rtol=1e-9, atol=1e-12))
    tg.manual_seed(0)
    s = TD.Bernoulli(probs=tg.full((20000,), 0.3)).sample()
    assert abs(s.mean().item() - 0.3) < 0.02
    u = TD.Uniform(tg.tensor(-2.0), tg.tensor(3.0)).rsample((1000,))
    assert u.min().item() >= -2 and u.max().item() < 3


def test_multivariate_normal():
    from tracegrad import distributions as TD
    from torch import distributions as PD
    cov = spd(3, seed=5)
    mu, x = arr(3), arr(4, 3, seed=6)
    check(lambda m, c, x: TD.MultivariateNormal(m, covariance_matrix=c).log_prob(x),
          lambda m, c, x: PD.MultivariateNormal(m, covariance_matrix=c).log_prob(x), mu, cov, x,
          tol=dict(rtol=1e-9, atol=1e-11), gradcheck=False)
    a = tg.tensor(arr(3, 3, seed=8), requires_grad=True)
    m = tg.tensor(mu, requires_grad=True)
    assert tg.autograd.gradcheck(lambda m, a: TD.MultivariateNormal(m, covariance_matrix=a @ a.mT + 3 * tg.eye(
        3, dtype=tg.float64)).log_prob(tg.tensor(x)), (m, a))
    check(lambda m, c: TD.MultivariateNormal(m, covariance_matrix=c).entropy(),
          lambda m, c: PD.MultivariateNormal(m, covariance_matrix=c).entropy(), mu, cov,
          tol=dict(rtol=1e-9, atol=1e-11), gradcheck=False)
    L = np.linalg.cholesky(cov)
    check(lambda m, l, x: TD.MultivariateNormal(m, scale_tril=l).log_prob(x),
          lambda m, l, x: PD.MultivariateNormal(m, scale_tril=l).log_prob(x), mu, L, x, tol=dict(rtol=1e-9, atol=1e-11),
          gradcheck=False)
    tg.manual_seed(0)
    d = TD.MultivariateNormal(tg.tensor(mu), covariance_matrix=tg.tensor(cov))
    s = d.rsample((20000,))
    np.testing.assert_allclose(np.cov(s.numpy().T), cov, atol=0.3)


def test_compiled_named_results_are_tensors():
    """A namedtuple result (sort's, max's, slogdet's, qr's) comes back from a compiled call as
    that namedtuple of tensors, not of the tracer's stand-ins."""
    x = arr(5, 3)
    for f in (lambda t: tg.sort(t, 0), lambda t: t.max(1), lambda t: tg.linalg.slogdet(t[:3]),
              lambda t: tg.linalg.qr(t), lambda t: tg.topk(t, 2)):
        got, want = tg.compile(f)(tg.tensor(x)), f(tg.tensor(x))
        assert type(got) is type(want)
        for a, b in zip(got, want):
            assert type(a) is tg.Tensor
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("ord_", [2, -2, "nuc"])
def test_matrix_norms_from_singular_values(ord_):
    check(lambda t: tg.linalg.matrix_norm(t, ord_), lambda t: torch.linalg.matrix_norm(t, ord_), arr(2, 4, 3, seed=8))
    check(lambda t: tg.linalg.matrix_norm(t, ord_, dim=(0, 2), keepdim=True),
          lambda t: torch.linalg.matrix_norm(t, ord_, dim=(0, 2), keepdim=True), arr(3, 2, 4, seed=8))
    check(lambda t: tg.linalg.norm(t, ord_), lambda t: torch.linalg.norm(t, ord_), arr(3, 3, seed=9))


@pytest.mark.parametrize("ord_", [2, 3.0, 0.5])
def test_vector_norm_of_zero_has_torchs_zero_gradient(ord_):
    x = np.array([[0.0, 0.0], [3.0, -4.0]])
    a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    tg.linalg.vector_norm(a, ord_, dim=1).sum().backward()
    torch.linalg.vector_norm(b, ord_, dim=1).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **TOL)
    check(lambda t: tg.linalg.vector_norm(t, ord_, dim=1), lambda t: torch.linalg.vector_norm(t, ord_, dim=1),
          arr(3, 4) + 2)


def test_vector_norm_of_negative_order_with_a_zero():
    x = np.array([[0.0, 2.0], [3.0, -4.0]])
    for ord_ in (-1, -2.5):
        np.testing.assert_allclose(tg.linalg.vector_norm(tg.tensor(x), ord_, dim=1).numpy(),
                                   torch.linalg.vector_norm(torch.tensor(x), ord_, dim=1).numpy(), **TOL)


def test_index_fill_copy_take():
    x = arr(4, 3)
    idx = np.array([2, 0])
    check(lambda t: tg.index_fill(t, 0, tg.tensor(idx), -1.5), lambda t: torch.index_fill(t, 0, torch.tensor(idx), -1.5),
          x)
    check(lambda t: t.index_fill(1, tg.tensor([1]), 2.0), lambda t: t.index_fill(1, torch.tensor([1]), 2.0), x)
    check(lambda t, s: tg.index_copy(t, 0, tg.tensor(idx), s), lambda t, s: torch.index_copy(t, 0, torch.tensor(idx), s),
          x, arr(2, 3, seed=1))
    check(lambda t: tg.take(t, tg.tensor([[0, 11], [5, 5]])), lambda t: torch.take(t, torch.tensor([[0, 11], [5, 5]])),
          x)
    y = tg.zeros(3, 2)
    y.index_copy_(0, tg.tensor([2]), tg.ones(1, 2))
    assert y.tolist() == [[0, 0], [0, 0], [1, 1]]


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    idx = np.array([[0, 2, 0, 2], [1, 1, 3, 0]])
    check(lambda x, s: x.scatter_reduce(1, tg.tensor(idx), s, reduce, include_self=include_self),
          lambda x, s: x.scatter_reduce(1, torch.tensor(idx), s, reduce, include_self=include_self),
          arr(2, 5), arr(2, 4, seed=1))
    ints = np.array([[3, 1, 4, 1, 5]])
    got = tg.tensor(ints).scatter_reduce(1, tg.tensor([[0, 0, 1, 1, 1]]), tg.tensor(ints), reduce,
                                         include_self=include_self)
    want = torch.tensor(ints).scatter_reduce(1, torch.tensor([[0, 0, 1, 1, 1]]), torch.tensor(ints), reduce,
                                             include_self=include_self)
    assert got.tolist() == want.tolist() and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    w = arr(10, 3)
    flat, offsets = np.array([1, 4, 7, 2, 9, 9, 3]), np.array([0, 3, 3, 4])
    check(lambda w: TF.embedding_bag(tg.tensor(flat), w, tg.tensor(offsets), mode=mode),
          lambda w: F.embedding_bag(torch.tensor(flat), w, torch.tensor(offsets), mode=mode), w)
    check(lambda w: TF.embedding_bag(tg.tensor(flat), w, tg.tensor(offsets), mode=mode, padding_idx=9),
          lambda w: F.embedding_bag(torch.tensor(flat), w, torch.tensor(offsets), mode=mode, padding_idx=9), w)
    check(lambda w: TF.embedding_bag(tg.tensor(flat), w, tg.tensor(np.array([0, 2, 7])), mode=mode,
                                     include_last_offset=True),
          lambda w: F.embedding_bag(torch.tensor(flat), w, torch.tensor(np.array([0, 2, 7])), mode=mode,
                                    include_last_offset=True), w)
    check(lambda w: TF.embedding_bag(tg.tensor(flat[:6].reshape(2, 3)), w, mode=mode),
          lambda w: F.embedding_bag(torch.tensor(flat[:6].reshape(2, 3)), w, mode=mode), w)
    if mode == "sum":
        check(lambda w, p: TF.embedding_bag(tg.tensor(flat), w, tg.tensor(offsets), mode="sum", per_sample_weights=p),
              lambda w, p: F.embedding_bag(torch.tensor(flat), w, torch.tensor(offsets), mode="sum",
                                           per_sample_weights=p), w, arr(7, seed=3))
    assert repr(tg.nn.EmbeddingBag(10, 3, mode=mode)) == repr(torch.nn.EmbeddingBag(10, 3, mode=mode))


def test_sequential_lr_and_chained_scheduler():
    def lrs(lib, make, n=8):
        opt = lib.optim.SGD(lib.nn.Linear(1, 1).parameters(), lr=0.1)
        sched = make(lib, opt)
        out = [opt.param_groups[0]["lr"]]
        for _ in range(n):
            opt.step()
            sched.step()
            out.append(opt.param_groups[0]["lr"])
        return out + sched.get_last_lr()

    def seq(lib, opt):
        S = lib.optim.lr_scheduler
        return S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3), S.StepLR(opt, 2, 0.5)],
                              milestones=[3])

    def chained(lib, opt):
        S = lib.optim.lr_scheduler
        return S.ChainedScheduler([S.ConstantLR(opt, factor=0.1, total_iters=2), S.ExponentialLR(opt, gamma=0.9)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in (seq, chained):
            np.testing.assert_allclose(lrs(tg, make), lrs(torch, make), rtol=1e-12)
    opt = tg.optim.SGD(tg.nn.Linear(1, 1).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        tg.optim.lr_scheduler.SequentialLR(opt, [tg.optim.lr_scheduler.StepLR(opt, 2)], milestones=[3])


@pytest.mark.parametrize("kw", [{}, {"dim": -1}, {"dim": 0, "keepdim": True}])
def test_compiled_any_and_all_see_the_values(kw):
    """any/all were computed from the array behind the tensor, which a traced value does not
    have: compiled, they answered False whatever the input."""
    x = tg.tensor(np.array([[-1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]))
    for f in ("any", "all"):
        fn = (lambda t: getattr(t > -0.5, f)(**kw))
        np.testing.assert_array_equal(tg.compile(fn)(x).numpy(), fn(x).numpy())
        np.testing.assert_array_equal(fn(x).numpy(), getattr(torch.tensor(x.numpy()) > -0.5, f)(**kw).numpy())


def test_module_full_backward_hooks():
    def run(lib):
        class Two(lib.nn.Module):
            def forward(self, a, b, k=2):
                return a * b * k, a + b
        t, log = Two(), []
        t.register_full_backward_pre_hook(lambda m, go: log.append(("pre", [g if g is None else g.tolist()
                                                                                 for g in go])))
        h = t.register_full_backward_hook(
            lambda m, gi, go: (log.append(("post", [g.tolist() for g in gi], [g.tolist() for g in go])),
                               (gi[0] * 10, gi[1]))[1])
        a, b = lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([3.0, 4.0], requires_grad=True)
        p, q = t(a, b)
        (p.sum() + 2 * q.sum()).backward()
        lin = lib.nn.Linear(2, 1)
        lin.register_full_backward_hook(lambda m, gi, go: log.append(("none", gi)))
        lin(lib.ones(1, 2)).sum().backward()
        h.remove()
        a.grad = None
        t(a, b)[0].sum().backward()
        return log, a.grad.tolist(), b.grad.tolist()
    assert run(tg) == run(torch)


@pytest.mark.parametrize("kw", [{}, {"lr": 0.5, "max_iter": 4, "history_size": 3}, {"max_iter": 7, "max_eval": 5}])
def test_lbfgs_follows_torch(kw):
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((10, 2)), rng.standard_normal((1, 2))

    def run(lib):
        m = lib.nn.Linear(2, 1).double()
        with lib.no_grad():
            m.weight.copy_(lib.tensor(W))
            m.bias.zero_()
        x = lib.tensor(X)
        y = x @ lib.tensor([[1.5], [-2.0]], dtype=lib.float64) + 0.5 + lib.sin(x[:, :1])
        opt = lib.optim.LBFGS(m.parameters(), **kw)

        def closure():
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            return loss
        losses = [float(opt.step(closure).detach()) for _ in range(3)]
        return losses, m.weight.detach().numpy(), m.bias.detach().numpy(), opt.state[m.weight]["func_evals"]
    got, want = run(tg), run(torch)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    with pytest.raises(NotImplementedError, match="strong_wolfe"):
        tg.optim.LBFGS([tg.zeros(1, requires_grad=True)], line_search_fn="strong_wolfe")


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode,padding_mode", [("bilinear", "zeros"), ("bilinear", "border"), ("nearest", "zeros")])
def test_affine_grid_and_grid_sample(align_corners, mode, padding_mode):
    theta = np.array([[[0.9, 0.15, 0.05], [-0.1, 0.8, 0.02]], [[1.3, 0.0, 0.2], [0.1, 1.1, -0.3]]])
    check(lambda t: TF.affine_grid(t, [2, 3, 4, 5], align_corners=align_corners),
          lambda t: F.affine_grid(t, [2, 3, 4, 5], align_corners=align_corners), theta)
    grid = F.affine_grid(torch.tensor(theta), [2, 2, 3, 4], align_corners=align_corners).numpy()
    grid = grid + arr(*grid.shape, seed=4) * 0.01           # off the pixel centres and edges
    check(lambda x, g: TF.grid_sample(x, g, mode, padding_mode, align_corners),
          lambda x, g: F.grid_sample(x, g, mode, padding_mode, align_corners), arr(2, 2, 4, 5), grid,
          gradcheck=mode == "bilinear")

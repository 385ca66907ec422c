"""tracegrad.nn and tracegrad.nn.functional against torch: every function's and layer's
forward and gradients on random inputs (weights copied across), convolution and pooling
over stride/padding/dilation/groups with second derivatives, default initialisation
statistics, and the Module API."""
import copy
import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import tracegrad
import tracegrad.nn as tnn
import tracegrad.nn.functional as TF
from conftest import assert_close


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # small ops: torch's thread pool only adds contention on a 2-core machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

RNG = np.random.default_rng(1234)


def rand(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape)


def leaves(arrays, requires_grad=True):
    """The same float64 values as tracegrad and torch leaves."""
    tg = [tracegrad.tensor(a, requires_grad=requires_grad) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
          else (tracegrad.tensor(a) if isinstance(a, np.ndarray) else a) for a in arrays]
    th = [torch.tensor(a, requires_grad=requires_grad) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
          else (torch.tensor(a) if isinstance(a, np.ndarray) else a) for a in arrays]
    return tg, th


def _dense(t):
    return t if t is None else torch.zeros(t.shape, dtype=t.dtype) + t.detach()    # torch's ZeroTensors too


def check(tg_fn, th_fn, arrays, order=2, rtol=1e-7, atol=1e-9, nograd=()):
    """Forward, first and (order=2) second derivatives of tg_fn vs th_fn, in float64.

    The gradient is taken against a random cotangent; the second derivative is the
    gradient of <grad, v> for a random v, with respect to every float input (except the
    positions in `nograd`)."""
    tg, th = leaves(arrays)
    for i in nograd:
        tg[i].requires_grad_(False)
        th[i].requires_grad_(False)
    out_g, out_t = tg_fn(*tg), th_fn(*th)
    assert_close(out_g, out_t, rtol=rtol, atol=atol)
    diff_g = [t for t in tg if isinstance(t, tracegrad.Tensor) and t.requires_grad]
    diff_t = [t for t in th if isinstance(t, torch.Tensor) and t.requires_grad]
    if not diff_t or order < 1:
        return
    cot = RNG.standard_normal(tuple(out_t.shape))
    grads_t = torch.autograd.grad(out_t, diff_t, torch.tensor(cot), create_graph=order > 1, allow_unused=True)
    grads_g = tracegrad.autograd.grad(out_g, diff_g, tracegrad.tensor(cot), create_graph=order > 1,
                                      allow_unused=True)
    for a, b in zip(grads_g, grads_t):
        if b is None:
            assert a is None or np.all(a._data == 0)
            continue
        assert_close(a, _dense(b), rtol=rtol, atol=atol)
    if order < 2:
        return
    pairs = [(a, b) for a, b in zip(grads_g, grads_t) if b is not None and b.requires_grad]
    if not pairs:
        return
    vs = [RNG.standard_normal(tuple(b.shape)) for _, b in pairs]
    sg = sum((a * tracegrad.tensor(v)).sum() for (a, _), v in zip(pairs, vs))
    st = sum((b * torch.tensor(v)).sum() for (_, b), v in zip(pairs, vs))
    gg_t = torch.autograd.grad(st, diff_t, allow_unused=True)
    if not sg.requires_grad:
        # the gradient does not depend on the inputs differentiably (piecewise-linear functions)
        assert all(b is None or not b.any() for b in gg_t)
        return
    gg_g = tracegrad.autograd.grad(sg, diff_g, allow_unused=True)
    for a, b in zip(gg_g, gg_t):
        if b is None:
            assert a is None or np.allclose(a._data, 0)
            continue
        if a is None:
            assert not b.any()
            continue
        assert_close(a, _dense(b), rtol=1e-6, atol=1e-8)


# == activations and simple functions ===========================================================================

@pytest.mark.parametrize("name,tg_fn,th_fn", [
    ("relu", TF.relu, torch.nn.functional.relu),
    ("leaky_relu", lambda x: TF.leaky_relu(x, 0.2), lambda x: torch.nn.functional.leaky_relu(x, 0.2)),
    ("gelu", TF.gelu, torch.nn.functional.gelu),
    ("gelu_tanh", lambda x: TF.gelu(x, approximate="tanh"), lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    ("silu", TF.silu, torch.nn.functional.silu),
    ("sigmoid", TF.sigmoid, torch.sigmoid),
    ("tanh", TF.tanh, torch.tanh),
    ("softplus", lambda x: TF.softplus(x, beta=2.0, threshold=3.0),
     lambda x: torch.nn.functional.softplus(x, beta=2.0, threshold=3.0)),
    ("logsigmoid", TF.logsigmoid, torch.nn.functional.logsigmoid),
    ("softmax", lambda x: TF.softmax(x, dim=1), lambda x: torch.softmax(x, dim=1)),
    ("log_softmax", lambda x: TF.log_softmax(x, dim=-1), lambda x: torch.log_softmax(x, dim=-1)),
    ("normalize", lambda x: TF.normalize(x, dim=1), lambda x: torch.nn.functional.normalize(x, dim=1)),
])
def test_activation(name, tg_fn, th_fn):
    x = rand(4, 5, 3, low=-4, high=4)
    x[0, 0, :] = [0.0, 30.0, -30.0]       # a kink point and both tails
    check(tg_fn, th_fn, [x])


def test_gelu_tanh_is_torch_formula_in_float32():
    x = RNG.standard_normal(1000).astype(np.float32) * 3
    assert_close(TF.gelu(tracegrad.tensor(x), approximate="tanh"),
                 torch.nn.functional.gelu(torch.tensor(x), approximate="tanh"), rtol=2e-6, atol=2e-7)


def test_stable_functions_at_extremes():
    x = np.array([-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4])
    for tg_fn, th_fn in [(TF.logsigmoid, torch.nn.functional.logsigmoid),
                         (TF.softplus, torch.nn.functional.softplus),
                         (lambda v: TF.log_softmax(v, 0), lambda v: torch.log_softmax(v, 0))]:
        for dt in (np.float32, np.float64):
            a, b = tg_fn(tracegrad.tensor(x.astype(dt))), th_fn(torch.tensor(x.astype(dt)))
            assert np.all(np.isfinite(a._data))
            assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_linear():
    x, w, b = rand(3, 4, 5), rand(6, 5), rand(6)
    check(TF.linear, torch.nn.functional.linear, [x, w, b])
    check(lambda x, w: TF.linear(x, w), lambda x, w: torch.nn.functional.linear(x, w), [rand(7, 5), w])
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 5x2\)"):
        TF.linear(tracegrad.randn(4, 3), tracegrad.randn(2, 5))


# == normalization ===============================================================================================

@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    x = rand(3, 4, 5) * 10 + 50            # a large mean: the variance must come from centred values
    w, b = rand(4, 5), rand(4, 5)
    if affine:
        check(lambda x, w, b: TF.layer_norm(x, (4, 5), w, b), lambda x, w, b: torch.nn.functional.layer_norm(
            x, (4, 5), w, b), [x, w, b])
    else:
        check(lambda x: TF.layer_norm(x, 5), lambda x: torch.nn.functional.layer_norm(x, (5,)), [x])
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but "
                                           r"got input of size\[3, 5\]"):
        TF.layer_norm(tracegrad.randn(3, 5), (4,))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_training_and_running_stats(shape):
    x, w, b = rand(*shape), rand(3), rand(3)
    rm_g, rv_g = tracegrad.zeros(3, dtype=tracegrad.float64), tracegrad.ones(3, dtype=tracegrad.float64)
    rm_t, rv_t = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    check(lambda x, w, b: TF.batch_norm(x, rm_g, rv_g, w, b, training=True, momentum=0.3),
          lambda x, w, b: torch.nn.functional.batch_norm(x, rm_t, rv_t, w, b, training=True, momentum=0.3),
          [x, w, b])
    assert_close(rm_g, rm_t, rtol=1e-12)
    assert_close(rv_g, rv_t, rtol=1e-12)
    check(lambda x, w, b: TF.batch_norm(x, rm_g, rv_g, w, b), lambda x, w, b: torch.nn.functional.batch_norm(
        x, rm_t, rv_t, w, b), [x, w, b])
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        TF.batch_norm(tracegrad.randn(1, 3), None, None, training=True)


# == losses ======================================================================================================

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    x, y = rand(4, 5), rand(4, 5)
    check(lambda x, y: TF.mse_loss(x, y, reduction=reduction),
          lambda x, y: torch.nn.functional.mse_loss(x, y, reduction=reduction), [x, y])
    x[0, 0] = y[0, 0]                      # |0| has torch's subgradient 0
    check(lambda x, y: TF.l1_loss(x, y, reduction=reduction),
          lambda x, y: torch.nn.functional.l1_loss(x, y, reduction=reduction), [x, y])


def test_mse_broadcast_warning():
    with pytest.warns(UserWarning, match="Using a target size"):
        TF.mse_loss(tracegrad.randn(3), tracegrad.randn(3, 1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [False, True])
def test_nll_and_cross_entropy(reduction, weighted, ignore):
    x = rand(6, 5, low=-5, high=5)
    t = RNG.integers(0, 5, 6)
    if ignore:
        t[[1, 4]] = 2
    w = RNG.uniform(0.2, 2.0, 5) if weighted else None
    kw = dict(reduction=reduction, ignore_index=2 if ignore else -100)
    for tg_f, th_f in [(TF.nll_loss, torch.nn.functional.nll_loss),
                       (TF.cross_entropy, torch.nn.functional.cross_entropy)]:
        check(lambda x: tg_f(x, tracegrad.tensor(t), tracegrad.tensor(w) if weighted else None, **kw),
              lambda x: th_f(x, torch.tensor(t), torch.tensor(w) if weighted else None, **kw), [x])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_label_smoothing_spatial_and_probabilities(reduction, weighted):
    x = rand(3, 4, 2, 2)
    t = RNG.integers(0, 4, (3, 2, 2))
    t[0, 0, 0] = -100
    w = RNG.uniform(0.2, 2.0, 4) if weighted else None
    wg, wt = (tracegrad.tensor(w), torch.tensor(w)) if weighted else (None, None)
    check(lambda x: TF.cross_entropy(x, tracegrad.tensor(t), wg, reduction=reduction, label_smoothing=0.15),
          lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(t), wt, reduction=reduction,
                                                      label_smoothing=0.15), [x])
    p = RNG.dirichlet(np.ones(4), (3, 2, 2)).transpose(0, 3, 1, 2).copy()
    check(lambda x, p: TF.cross_entropy(x, p, wg, reduction=reduction, label_smoothing=0.1),
          lambda x, p: torch.nn.functional.cross_entropy(x, p, wt, reduction=reduction, label_smoothing=0.1),
          [x, p])


def test_cross_entropy_unbatched_and_errors():
    check(lambda x: TF.cross_entropy(x, tracegrad.tensor(3)), lambda x: torch.nn.functional.cross_entropy(
        x, torch.tensor(3)), [rand(5)])
    x = tracegrad.randn(3, 5)
    with pytest.raises(IndexError, match="Target 5 is out of bounds."):
        TF.nll_loss(x, tracegrad.tensor([1, 2, 5]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)."):
        TF.nll_loss(x, tracegrad.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Float"):
        TF.cross_entropy(x, tracegrad.tensor([1.0, 2.0, 3.0]))


def test_cross_entropy_is_stable_for_huge_logits():
    x = np.array([[1e4, -1e4, 0.0], [-3e4, 3e4, 1.0]], dtype=np.float32)
    t = np.array([1, 1])
    a = TF.cross_entropy(tracegrad.tensor(x), tracegrad.tensor(t))
    b = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t))
    assert_close(a, b)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(reduction):
    x = rand(4, 3, low=-8, high=8)
    x[0] = [0.0, 60.0, -60.0]
    y = RNG.uniform(0, 1, (4, 3))
    w, pw = RNG.uniform(0.5, 2, (4, 3)), RNG.uniform(0.5, 3, 3)
    check(lambda x, y: TF.binary_cross_entropy_with_logits(x, y, reduction=reduction),
          lambda x, y: torch.nn.functional.binary_cross_entropy_with_logits(x, y, reduction=reduction), [x, y])
    check(lambda x, y, w, pw: TF.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw),
          lambda x, y, w, pw: torch.nn.functional.binary_cross_entropy_with_logits(x, y, w, reduction=reduction,
                                                                                   pos_weight=pw), [x, y, w, pw],
          nograd=(2, 3))
    with pytest.raises(ValueError, match=r"Target size \(torch.Size\(\[3, 1\]\)\) must be the same as input size"):
        TF.binary_cross_entropy_with_logits(tracegrad.randn(3), tracegrad.rand(3, 1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    x, y = RNG.uniform(0.01, 0.99, (4, 3)), RNG.uniform(0, 1, (4, 3))
    check(lambda x, y: TF.binary_cross_entropy(x, y, reduction=reduction),
          lambda x, y: torch.nn.functional.binary_cross_entropy(x, y, reduction=reduction), [x, y])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_cross_entropy_at_zero_and_one(dtype):
    # torch clamps each log at -100 and divides by max(p (1 - p), 1e-12): finite where p is exactly 0 or 1
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 1e-30, 1 - 1e-7], dtype)
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 1.0, 0.0], dtype)
    for reduction in ("none", "mean"):
        pg, tg_ = tracegrad.tensor(p, requires_grad=True), tracegrad.tensor(t, requires_grad=True)
        pt, tt = torch.tensor(p, requires_grad=True), torch.tensor(t, requires_grad=True)
        lg = TF.binary_cross_entropy(pg, tg_, reduction=reduction)
        lt = torch.nn.functional.binary_cross_entropy(pt, tt, reduction=reduction)
        assert_close(lg, lt, rtol=1e-6, atol=0)
        gg = tracegrad.autograd.grad(lg.sum(), [pg, tg_])
        gt = torch.autograd.grad(lt.sum(), [pt, tt])
        for a, b in zip(gg, gt):
            assert np.isfinite(a._data[:5]).all() or not np.isfinite(b.numpy()[:5]).all()
            assert_close(a, b, rtol=1e-6, atol=0)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        TF.binary_cross_entropy(tracegrad.tensor([1.5]), tracegrad.tensor([1.0]))


# == embedding, pad, dropout, one_hot =========================================================================

def test_embedding_and_padding_idx():
    w = rand(7, 3)
    idx = np.array([[0, 2, 6], [2, 2, 1]])
    check(lambda w: TF.embedding(tracegrad.tensor(idx), w), lambda w: torch.nn.functional.embedding(
        torch.tensor(idx), w), [w])
    check(lambda w: TF.embedding(tracegrad.tensor(idx), w, padding_idx=2),
          lambda w: torch.nn.functional.embedding(torch.tensor(idx), w, padding_idx=2), [w], order=1)
    with pytest.raises(IndexError, match="index out of range in self"):
        TF.embedding(tracegrad.tensor([7]), tracegrad.randn(7, 2))


def test_embedding_max_norm_renormalizes_in_place():
    w = rand(5, 4) * 3
    wg, wt = tracegrad.tensor(w), torch.tensor(w)
    idx = [0, 3, 3]
    a = TF.embedding(tracegrad.tensor(idx), wg, max_norm=1.5)
    b = torch.nn.functional.embedding(torch.tensor(idx), wt, max_norm=1.5)
    assert_close(a, b, rtol=1e-6)
    assert_close(wg, wt, rtol=1e-6)


@pytest.mark.parametrize("pad,mode,value", [
    ((1, 2), "constant", 0.0), ((1, 0, 2, 3), "constant", -1.5), ((-1, 2, 0, -2), "constant", 0.0),
    ((2, 1, 1, 2), "reflect", None), ((2, 1, 1, 3), "replicate", None), ((2, 1, 1, 3), "circular", None),
    ((1, 1, 1, 1, 1, 1), "constant", 3.0)])
def test_pad(pad, mode, value):
    x = rand(2, 3, 4, 5)
    kw = {} if value is None else {"value": value}
    check(lambda x: TF.pad(x, pad, mode=mode, **kw), lambda x: torch.nn.functional.pad(x, pad, mode=mode, **kw), [x])


# negative pads crop (torch narrows), alone or with positive pads, down to empty dims
@pytest.mark.parametrize("shape,pad,mode", [
    ((2, 3, 4, 5), (-1, -1), "constant"), ((2, 3, 4, 5), (-2, 1, -1, -3), "constant"),
    ((2, 3, 4, 5), (-5, 0), "constant"), ((2, 3, 4, 5), (-4, 2), "constant"), ((2, 3, 4, 5), (0, 0, 0, 0, -1, -1), "constant"),
    ((2, 3, 4, 5), (1, 1, -4, 0), "constant"), ((2, 3, 5), (-1, 2), "reflect"), ((2, 3, 5), (-1, -1), "reflect"),
    ((2, 3, 5), (-2, 1), "replicate"), ((2, 3, 5), (-2, 1), "circular"), ((2, 3, 5), (2, -1), "circular"),
    ((2, 3, 5), (-1, 3), "circular"), ((2, 4, 5), (1, -2, -1, 2), "reflect")])
def test_pad_negative_crops_as_torch(shape, pad, mode):
    x = rand(*shape)
    check(lambda x: TF.pad(x, pad, mode=mode), lambda x: torch.nn.functional.pad(x, pad, mode=mode), [x])
    a = tracegrad.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = TF.pad(a, pad, mode=mode), torch.nn.functional.pad(b, pad, mode=mode)
    assert type(ya.grad_fn).__name__ == type(yb.grad_fn).__name__
    with tracegrad.no_grad():
        yc = TF.pad(tracegrad.tensor(x), pad, mode=mode)
        yc.add_(1)                                   # the result never aliases the input
    assert_close(ya, yb)
    assert yc._base is None


def test_dropout():
    x = tracegrad.ones(200, 300, requires_grad=True)
    assert TF.dropout(x, 0.3, training=False) is x
    assert TF.dropout(x, 0.0) is x
    y = TF.dropout(x, 0.3)
    kept = y._data != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y._data[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad._data, y._data, rtol=1e-6)     # d/dx (x * mask) = mask
    assert np.all(TF.dropout(x, 1.0)._data == 0)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        TF.dropout(x, 1.5)


def test_one_hot():
    t = np.array([[0, 3], [2, 1]])
    assert_close(TF.one_hot(tracegrad.tensor(t), 5), torch.nn.functional.one_hot(torch.tensor(t), 5))
    assert_close(TF.one_hot(tracegrad.tensor(t)), torch.nn.functional.one_hot(torch.tensor(t)))


# == convolution and pooling ========================================================================================

CONV_CASES = [
    # (N, C, H, W), (O, kh, kw), stride, padding, dilation, groups, bias
    ((2, 3, 7, 6), (4, 3, 3), 1, 0, 1, 1, True),
    ((2, 3, 7, 6), (4, 3, 3), 1, 1, 1, 1, False),
    ((1, 4, 9, 8), (6, 3, 2), (2, 1), (1, 0), 1, 2, True),
    ((2, 2, 9, 9), (4, 3, 3), 2, 2, (2, 1), 1, True),
    ((1, 6, 8, 7), (6, 3, 3), 3, 1, 1, 6, True),            # depthwise
    ((2, 3, 5, 5), (2, 1, 1), 1, 0, 1, 1, True),            # 1x1
    ((2, 1, 9, 10), (3, 3, 3), 1, 1, 1, 1, True),           # few channels: channels-first columns
    ((1, 2, 9, 12), (3, 3, 2), 1, (2, 1), (2, 3), 1, True),
    ((1, 2, 6, 6), (3, 4, 4), 1, "same", 1, 1, True),       # even kernel: asymmetric 'same'
    ((1, 2, 6, 7), (3, 3, 3), 1, "same", 2, 1, False),
    ((2, 2, 6, 6), (3, 3, 3), 1, "valid", 1, 1, True),
]


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups,bias", CONV_CASES)
def test_conv2d(xs, ws, stride, padding, dilation, groups, bias):
    o, kh, kw = ws
    arrays = [rand(*xs), rand(o, xs[1] // groups, kh, kw)] + ([rand(o)] if bias else [])
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(lambda *a: TF.conv2d(*a, **kwargs), lambda *a: torch.nn.functional.conv2d(*a, **kwargs), arrays)


@pytest.mark.parametrize("xs,cout,k,stride,padding,output_padding,groups,dilation", [
    ((2, 4, 3, 4), 3, 3, 1, 0, 0, 1, 1),
    ((2, 4, 3, 4), 6, (3, 2), 2, 1, 1, 2, 1),
    ((1, 3, 4, 4), 2, 3, (2, 3), (1, 2), (1, 2), 1, 1),
    ((1, 2, 3, 3), 4, 2, 1, 0, 1, 2, 2),
    ((2, 3, 6, 9), 1, 3, 1, 1, 0, 1, 1),                    # channels-first columns
    ((1, 2, 6, 9), 5, (2, 3), (1, 2), (0, 1), (0, 1), 1, (2, 1)),
])
def test_conv_transpose2d(xs, cout, k, stride, padding, output_padding, groups, dilation):
    kh, kw = (k, k) if isinstance(k, int) else k
    arrays = [rand(*xs), rand(xs[1], cout // groups, kh, kw), rand(cout)]
    kwargs = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)
    check(lambda *a: TF.conv_transpose2d(*a, **kwargs), lambda *a: torch.nn.functional.conv_transpose2d(*a, **kwargs),
          arrays)


def test_conv_unbatched_and_errors():
    check(lambda x, w: TF.conv2d(x, w, padding=1), lambda x, w: torch.nn.functional.conv2d(x, w, padding=1),
          [rand(3, 5, 5), rand(2, 3, 3, 3)], order=1)
    x = tracegrad.randn(2, 3, 5, 5)
    cases = [
        (lambda m: m.conv2d(x_(m), w_(m, (4, 2, 3, 3))), RuntimeError),
        (lambda m: m.conv2d(x_(m), w_(m, (3, 1, 3, 3)), groups=2), RuntimeError),
        (lambda m: m.conv2d(x_(m), w_(m, (3, 3, 7, 7))), RuntimeError),
        (lambda m: m.conv2d(x_(m)[0, 0], w_(m, (4, 3, 3, 3))), RuntimeError),
        (lambda m: m.conv2d(x_(m), w_(m, (4, 3, 3, 3)), padding="same", stride=2), RuntimeError),
        (lambda m: m.conv_transpose2d(x_(m), w_(m, (3, 4, 3, 3)), output_padding=1), RuntimeError),
        (lambda m: m.max_pool2d(x_(m), 3, padding=2), RuntimeError),
    ]
    shapes = {}

    def x_(m):
        return x if m is TF else torch.tensor(x._data)

    def w_(m, shape):
        arr = shapes.setdefault(shape, np.zeros(shape, np.float32))
        return tracegrad.tensor(arr) if m is TF else torch.tensor(arr)

    for fn, exc in cases:
        with pytest.raises(exc) as ref:
            fn(torch.nn.functional)
        with pytest.raises(exc) as got:
            fn(TF)
        assert str(got.value) == str(ref.value)
    with pytest.raises(RuntimeError):
        TF.conv2d(x, tracegrad.zeros(4, 3, 3, 3, dtype=tracegrad.float64))


@pytest.mark.parametrize("k,stride,padding,dilation,ceil_mode", [
    (2, None, 0, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 2, True), ((2, 3), (1, 2), (1, 1), 1, True),
    (3, 3, 0, 1, True), (2, 2, 1, 1, True)])
def test_max_pool2d(k, stride, padding, dilation, ceil_mode):
    x = rand(2, 3, 9, 10)
    x[0, 0, 0, :4] = 1.5                    # ties: the first maximum gets the gradient, as in torch
    kw = dict(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    check(lambda x: TF.max_pool2d(x, k, **kw), lambda x: torch.nn.functional.max_pool2d(x, k, **kw), [x])
    vg, ig = TF.max_pool2d(tracegrad.tensor(x), k, return_indices=True, **kw)
    vt, it = torch.nn.functional.max_pool2d(torch.tensor(x), k, return_indices=True, **kw)
    assert_close(ig, it)


def test_max_pool2d_nan_and_inf():
    x = rand(1, 2, 6, 6)
    x[0, 0, 1:3, 1:3] = np.nan
    x[0, 1] = -np.inf
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1)):
        vg, ig = TF.max_pool2d(tracegrad.tensor(x), return_indices=True, **kw)
        vt, it = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
        assert_close(vg, vt)
        assert_close(ig, it)


@pytest.mark.parametrize("k,stride,padding,ceil_mode,count_include_pad,divisor", [
    (2, None, 0, False, True, None), (3, 1, 1, False, True, None), (3, 2, 1, True, False, None),
    ((2, 3), (2, 1), (1, 1), True, True, None), (3, 2, 1, False, True, 5), (3, 3, 1, True, True, None)])
def test_avg_pool2d(k, stride, padding, ceil_mode, count_include_pad, divisor):
    kw = dict(stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
              divisor_override=divisor)
    check(lambda x: TF.avg_pool2d(x, k, **kw), lambda x: torch.nn.functional.avg_pool2d(x, k, **kw),
          [rand(2, 3, 8, 7)])


def test_adaptive_avg_pool2d():
    for size in (1, (2, 3), (None, 2)):
        check(lambda x: TF.adaptive_avg_pool2d(x, size), lambda x: torch.nn.functional.adaptive_avg_pool2d(x, size),
              [rand(2, 3, 4, 6)], order=1)


def test_conv_gradcheck_and_gradgradcheck():
    x = tracegrad.tensor(rand(1, 2, 5, 4), requires_grad=True)
    w = tracegrad.tensor(rand(4, 1, 2, 3), requires_grad=True)
    fn = lambda x, w: TF.conv2d(x, w, stride=2, padding=1, dilation=(1, 2), groups=2)   # noqa: E731
    assert tracegrad.autograd.gradcheck(fn, (x, w))
    assert tracegrad.autograd.gradgradcheck(fn, (x, w))


def test_third_derivative_of_conv_net():
    """A smooth conv net, differentiated three times, against torch."""
    x, w = rand(1, 1, 5, 5), rand(2, 1, 3, 3)

    def f(m, x, w):
        y = m.conv2d(x, w, padding=1)
        y = m.avg_pool2d(torch.tanh(y) if m is torch.nn.functional else tracegrad.tanh(y), 2)
        return (y * y).sum()

    (xg, wg), (xt, wt) = leaves([x, w])
    g, t = f(TF, xg, wg), f(torch.nn.functional, xt, wt)
    for _ in range(3):
        g = tracegrad.autograd.grad(g, wg, create_graph=True)[0].sum()
        t = torch.autograd.grad(t, wt, create_graph=True)[0].sum()
        assert_close(g, t, rtol=1e-7, atol=1e-9)


def test_composites_record_primitives():
    x = tracegrad.randn(4, 5, requires_grad=True)
    ops = {n["op"] for _, n in tracegrad.ir.graph_of(TF.cross_entropy(x, tracegrad.tensor([0, 1, 2, 3]))).nx.nodes(
        data=True)}
    assert {"log_softmax", "gather"} <= ops and "cross_entropy" not in ops
    ops = {n["op"] for _, n in tracegrad.ir.graph_of(TF.layer_norm(x, (5,))).nx.nodes(data=True)}
    assert {"mean", "sub", "rsqrt", "mul"} <= ops


# == layers, weights copied from torch ==================================================================================

def _copy_weights(th_mod, tg_mod):
    tg_mod.load_state_dict({k: tracegrad.tensor(v.detach().numpy()) for k, v in th_mod.state_dict().items()})


LAYERS = [
    (lambda nn: nn.Linear(5, 3), (4, 5)),
    (lambda nn: nn.Linear(5, 3, bias=False), (2, 4, 5)),
    (lambda nn: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 7, 7)),
    (lambda nn: nn.Conv2d(4, 4, (3, 2), padding=(1, 2), padding_mode="reflect", groups=2), (1, 4, 6, 6)),
    (lambda nn: nn.Conv2d(2, 3, 3, padding="same", padding_mode="circular", bias=False), (1, 2, 5, 5)),
    (lambda nn: nn.Conv2d(2, 3, 3, padding=1, padding_mode="replicate"), (1, 2, 5, 5)),
    (lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1), (2, 4, 3, 3)),
    (lambda nn: nn.LayerNorm((4, 5)), (3, 4, 5)),
    (lambda nn: nn.ReLU(), (3, 4)), (lambda nn: nn.GELU(), (3, 4)), (lambda nn: nn.GELU("tanh"), (3, 4)),
    (lambda nn: nn.SiLU(), (3, 4)), (lambda nn: nn.Sigmoid(), (3, 4)), (lambda nn: nn.Tanh(), (3, 4)),
    (lambda nn: nn.LeakyReLU(0.1), (3, 4)), (lambda nn: nn.Softplus(), (3, 4)),
    (lambda nn: nn.Softmax(dim=1), (3, 4)), (lambda nn: nn.LogSoftmax(dim=1), (3, 4)),
    (lambda nn: nn.Flatten(), (2, 3, 4)), (lambda nn: nn.Unflatten(1, (2, 3)), (4, 6)),
    (lambda nn: nn.MaxPool2d(2), (1, 2, 4, 6)), (lambda nn: nn.MaxPool2d(3, 1, 1, ceil_mode=True), (1, 2, 5, 5)),
    (lambda nn: nn.AvgPool2d(2), (1, 2, 4, 6)), (lambda nn: nn.AdaptiveAvgPool2d(1), (1, 2, 4, 6)),
    (lambda nn: nn.Identity(), (3,)), (lambda nn: nn.Dropout(0.5).eval(), (3, 4)),
    (lambda nn: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (5, 4)),
]


@pytest.mark.parametrize("make,shape", LAYERS, ids=lambda v: repr(v(torch.nn)) if callable(v) else str(v))
def test_layer_against_torch(make, shape):
    th_mod = make(torch.nn).double()
    tg_mod = make(tnn).double()
    _copy_weights(th_mod, tg_mod)
    x = rand(*shape)
    xg, xt = tracegrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yg, yt = tg_mod(xg), th_mod(xt)
    assert_close(yg, yt, rtol=1e-7, atol=1e-9)
    cot = RNG.standard_normal(tuple(yt.shape))
    yg.backward(tracegrad.tensor(cot))
    yt.backward(torch.tensor(cot))
    assert_close(xg.grad, xt.grad, rtol=1e-7, atol=1e-9)
    for (n1, p1), (n2, p2) in zip(tg_mod.named_parameters(), th_mod.named_parameters()):
        assert n1 == n2
        assert_close(p1.grad, p2.grad, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (4, 3, 2, 2))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_module_train_then_eval(cls, shape, momentum):
    th_mod = getattr(torch.nn, cls)(3, momentum=momentum).double()
    tg_mod = getattr(tnn, cls)(3, momentum=momentum).double()
    for _ in range(3):
        x = rand(*shape)
        assert_close(tg_mod(tracegrad.tensor(x)), th_mod(torch.tensor(x)), rtol=1e-7)
    for k, v in th_mod.state_dict().items():
        assert_close(tg_mod.state_dict()[k], v, rtol=1e-10)
    tg_mod.eval()
    th_mod.eval()
    x = rand(*shape)
    assert_close(tg_mod(tracegrad.tensor(x)), th_mod(torch.tensor(x)), rtol=1e-7)
    with pytest.raises(ValueError, match=r"expected 4D input \(got 2D input\)" if cls == "BatchNorm2d" else
                       r"expected 2D or 3D input \(got 4D input\)"):
        tg_mod(tracegrad.randn(2, 3) if cls == "BatchNorm2d" else tracegrad.randn(2, 3, 2, 2))


def test_embedding_module():
    th_mod, tg_mod = torch.nn.Embedding(10, 3, padding_idx=1).double(), tnn.Embedding(10, 3, padding_idx=1).double()
    assert np.all(tg_mod.weight._data[1] == 0)
    _copy_weights(th_mod, tg_mod)
    idx = np.array([[1, 2, 3], [9, 1, 2]])
    yg, yt = tg_mod(tracegrad.tensor(idx)), th_mod(torch.tensor(idx))
    assert_close(yg, yt)
    cot = RNG.standard_normal((2, 3, 3))
    yg.backward(tracegrad.tensor(cot))
    yt.backward(torch.tensor(cot))
    assert_close(tg_mod.weight.grad, th_mod.weight.grad)
    pre = tnn.Embedding.from_pretrained(tracegrad.ones(4, 2))
    assert not pre.weight.requires_grad and tuple(pre(tracegrad.tensor([3])).shape) == (1, 2)


@pytest.mark.parametrize("name,args", [
    ("MSELoss", {}), ("L1Loss", {"reduction": "sum"}), ("BCEWithLogitsLoss", {}), ("BCELoss", {}),
    ("CrossEntropyLoss", {"label_smoothing": 0.1}), ("NLLLoss", {"ignore_index": 1}),
    ("CrossEntropyLoss", {"weight": np.array([1.0, 2.0, 0.5])}),
])
def test_loss_modules(name, args):
    targs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    gargs = {k: tracegrad.tensor(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    th_loss, tg_loss = getattr(torch.nn, name)(**targs), getattr(tnn, name)(**gargs)
    assert repr(tg_loss) == repr(th_loss)
    if name in ("CrossEntropyLoss", "NLLLoss"):
        x, y = rand(5, 3), RNG.integers(0, 3, 5)
    elif name == "BCELoss":
        x, y = RNG.uniform(0.05, 0.95, (5, 3)), RNG.uniform(0, 1, (5, 3))
    else:
        x, y = rand(5, 3), RNG.uniform(0, 1, (5, 3))
    check(lambda x: tg_loss(x, tracegrad.tensor(y)), lambda x: th_loss(x, torch.tensor(y)), [x], order=1)


# == default initialisation ===============================================================================================

def _uniform_stats(t, bound):
    a = t._data.astype(np.float64).ravel()
    assert a.max() <= bound and a.min() >= -bound
    assert abs(a.mean()) < 0.05 * bound
    assert abs(a.std() - bound / math.sqrt(3)) < 0.03 * bound


@pytest.mark.parametrize("make,w_bound,b_bound", [
    (lambda nn: nn.Linear(400, 300), 1 / math.sqrt(400), 1 / math.sqrt(400)),
    (lambda nn: nn.Conv2d(16, 64, 3), 1 / math.sqrt(16 * 9), 1 / math.sqrt(16 * 9)),
    (lambda nn: nn.Conv2d(16, 64, 3, groups=4), 1 / math.sqrt(4 * 9), 1 / math.sqrt(4 * 9)),
    (lambda nn: nn.ConvTranspose2d(64, 16, 3), 1 / math.sqrt(16 * 9), 1 / math.sqrt(16 * 9)),
])
def test_default_init_matches_torch_distribution(make, w_bound, b_bound):
    tracegrad.manual_seed(0)
    m, ref = make(tnn), make(torch.nn)
    _uniform_stats(m.weight, w_bound)
    assert abs(m.weight._data.std() - ref.weight.detach().numpy().std()) < 0.03 * w_bound
    b = m.bias._data
    assert b.max() <= b_bound and b.min() >= -b_bound and b.std() > 0.25 * b_bound


def test_default_init_of_embedding_and_norms():
    tracegrad.manual_seed(0)
    e = tnn.Embedding(1000, 64)
    assert abs(e.weight._data.mean()) < 0.01 and abs(e.weight._data.std() - 1) < 0.01
    for m, ref in ((tnn.LayerNorm(6), torch.nn.LayerNorm(6)), (tnn.BatchNorm1d(6), torch.nn.BatchNorm1d(6))):
        for k, v in ref.state_dict().items():
            assert_close(m.state_dict()[k], v)


def test_init_functions():
    from tracegrad.nn import init
    tracegrad.manual_seed(1)
    w = tracegrad.empty(300, 200)
    for name in ("relu", "tanh", "linear", "sigmoid", "selu"):
        assert init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    assert init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain("leaky_relu", 0.2)
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w._data.std() - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300)
    init.xavier_uniform_(w, gain=2.0)
    _uniform_stats(w, 2.0 * math.sqrt(6 / 500))
    init.xavier_normal_(w)
    assert abs(w._data.std() - math.sqrt(2 / 500)) < 0.02 * math.sqrt(2 / 500)
    init.trunc_normal_(w, std=0.5, a=-0.4, b=0.6)
    assert w._data.min() >= -0.4 and w._data.max() <= 0.6
    r = torch.nn.init.trunc_normal_(torch.empty(300, 200), std=0.5, a=-0.4, b=0.6)
    assert abs(w._data.mean() - r.mean().item()) < 0.01 and abs(w._data.std() - r.std().item()) < 0.01
    init.constant_(w, 0.25)
    assert np.all(w._data == 0.25)
    p = tnn.Parameter(tracegrad.empty(3, 3))
    init.eye_(p)
    assert np.all(p._data == np.eye(3)) and p.requires_grad and p.grad_fn is None
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 "
                                         "dimensions"):
        init.xavier_uniform_(tracegrad.empty(3))


# == the Module API =====================================================================================================

class Net:
    """The same model definition for both libraries."""

    @staticmethod
    def make(torch_mod):
        nn = torch_mod.nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(2, 4, 3, padding=1)
                self.bn = nn.BatchNorm2d(4)
                self.register_buffer("scale", torch_mod.ones(1))
                self.register_buffer("scratch", torch_mod.zeros(2), persistent=False)

            def forward(self, x):
                return torch_mod.relu(self.bn(self.conv(x))) * self.scale

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.heads = nn.ModuleList([nn.Linear(4, 2), nn.Linear(4, 2), nn.Linear(4, 3)])
                self.seq = nn.Sequential(OrderedDict([("drop", nn.Dropout(0.1)), ("act", nn.GELU())]))
                self.extra = nn.Parameter(torch_mod.zeros(3))
                self.tied = self.heads[0]

            def forward(self, x):
                h = self.block(x).mean((2, 3))
                return sum(head(self.seq(h)).sum() for head in self.heads) + self.extra.sum()

        return Model()


def test_module_structure_matches_torch():
    g, t = Net.make(tracegrad), Net.make(torch)
    assert repr(g) == repr(t)
    assert [n for n, _ in g.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in g.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in g.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in g.named_children()] == [n for n, _ in t.named_children()]
    assert list(g.state_dict().keys()) == list(t.state_dict().keys())
    assert len(list(g.parameters())) == len(list(t.parameters()))
    assert [n for n, _ in g.named_modules(remove_duplicate=False)] == \
           [n for n, _ in t.named_modules(remove_duplicate=False)]
    assert [type(m).__name__ for m in g.modules()] == [type(m).__name__ for m in t.modules()]
    assert isinstance(g.extra, tnn.Parameter) and isinstance(g.extra, tracegrad.Tensor)
    assert g.get_submodule("block.conv") is g.block.conv
    assert g.get_parameter("heads.2.bias") is g.heads[2].bias
    assert repr(g.heads[0].weight).startswith("Parameter containing:\ntensor([[")
    p = tnn.Parameter(tracegrad.tensor([1.0, 2.0]))
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))


def test_module_state_dict_round_trip_and_forward():
    t = Net.make(torch).double()
    g = Net.make(tracegrad).double()
    _copy_weights(t, g)
    x = rand(2, 2, 5, 5)
    t.eval()
    g.eval()
    assert_close(g(tracegrad.tensor(x)), t(torch.tensor(x)), rtol=1e-7)
    sd = g.state_dict()
    assert isinstance(sd, OrderedDict)
    assert sd["block.conv.weight"].grad_fn is None and not sd["block.conv.weight"].requires_grad
    assert np.shares_memory(sd["block.conv.weight"]._data, g.block.conv.weight._data)
    assert g.state_dict(keep_vars=True)["extra"] is g.extra
    g2 = Net.make(tracegrad).double()
    result = g2.load_state_dict(sd)
    assert repr(result) == "<All keys matched successfully>"
    g2.eval()
    assert_close(g2(tracegrad.tensor(x)), t(torch.tensor(x)), rtol=1e-7)


def test_load_state_dict_errors_match_torch():
    g, t = Net.make(tracegrad), Net.make(torch)
    sd_t = t.state_dict()
    sd_g = g.state_dict()
    for mutate in (lambda sd: sd.pop("block.bn.weight"), lambda sd: sd.__setitem__("bogus.key", sd["extra"]),
                   lambda sd: sd.__setitem__("extra", sd["heads.0.bias"])):
        a, b = OrderedDict(sd_g), OrderedDict(sd_t)
        mutate(a)
        mutate(b)
        with pytest.raises(RuntimeError) as ref:
            t.load_state_dict(b)
        with pytest.raises(RuntimeError) as got:
            g.load_state_dict(a)
        assert str(got.value) == str(ref.value)
        if "size mismatch" not in str(ref.value):
            r_t, r_g = t.load_state_dict(b, strict=False), g.load_state_dict(a, strict=False)
            assert r_g.missing_keys == r_t.missing_keys and r_g.unexpected_keys == r_t.unexpected_keys


def test_load_state_dict_assign_and_dtype_cast():
    m = tnn.Linear(3, 2)
    sd = {"weight": tracegrad.ones(2, 3, dtype=tracegrad.float64), "bias": tracegrad.zeros(2)}
    w = m.weight
    m.load_state_dict(sd)
    assert m.weight is w and m.weight.dtype is tracegrad.float32 and np.all(m.weight._data == 1)
    m.load_state_dict({"weight": tracegrad.full((2, 3), 2.0), "bias": tracegrad.zeros(2)}, assign=True)
    assert m.weight is not w and isinstance(m.weight, tnn.Parameter) and np.all(m.weight._data == 2)


def test_train_eval_zero_grad_requires_grad():
    g = Net.make(tracegrad)
    assert g.training and g.block.bn.training
    g.eval()
    assert not g.training and not g.seq.drop.training
    g.train()
    assert g.seq.drop.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        g.train(1)
    out = g(tracegrad.randn(2, 2, 5, 5))
    out.backward()
    assert all(p.grad is not None for p in g.parameters())
    g.zero_grad(set_to_none=False)
    assert all(p.grad is not None and np.all(p.grad._data == 0) for p in g.parameters())
    g.zero_grad()
    assert all(p.grad is None for p in g.parameters())
    g.requires_grad_(False)
    assert not any(p.requires_grad for p in g.parameters())


def test_to_apply_and_deepcopy():
    g = Net.make(tracegrad)
    w = g.block.conv.weight
    g.to(tracegrad.float64)
    assert g.block.conv.weight is w and w.dtype is tracegrad.float64
    assert g.block.bn.running_mean.dtype is tracegrad.float64
    assert g.block.bn.num_batches_tracked.dtype is tracegrad.int64
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        g.to(tracegrad.int64)
    with pytest.raises(RuntimeError, match="Torch not compiled with CUDA enabled"):
        g.to("cuda")
    g.double().float()
    assert w.dtype is tracegrad.float32
    seen = []
    g.apply(lambda m: seen.append(type(m).__name__))
    t_seen = []
    Net.make(torch).apply(lambda m: t_seen.append(type(m).__name__))
    assert seen == t_seen
    c = copy.deepcopy(g)
    assert isinstance(c.extra, tnn.Parameter) and c.extra is not g.extra
    assert np.array_equal(c.block.conv.weight._data, g.block.conv.weight._data)
    assert not np.shares_memory(c.block.conv.weight._data, g.block.conv.weight._data)


def test_registration_rules():
    m = tnn.Module()
    m.w = tnn.Parameter(tracegrad.zeros(2))
    m.sub = tnn.Linear(2, 2)
    m.plain = tracegrad.zeros(2)
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"] and "plain" in m.__dict__
    with pytest.raises(TypeError, match=r"cannot assign 'torch.FloatTensor' as parameter 'w' \(torch.nn.Parameter or "
                                        r"None expected\)"):
        m.w = tracegrad.zeros(2)
    m.w = None
    assert m.w is None and list(m.parameters()) == list(m.sub.parameters())
    m.register_buffer("b", tracegrad.ones(1))
    m.b = tracegrad.zeros(1)
    assert "b" in m._buffers and m.b._data[0] == 0
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", tracegrad.zeros(1))
    with pytest.raises(KeyError, match="buffer name can"):
        m.register_buffer("a.b", tracegrad.zeros(1))
    with pytest.raises(AttributeError, match="cannot assign parameters before Module.__init__\\(\\) call"):
        class Bad(tnn.Module):
            def __init__(self):
                self.p = tnn.Parameter(tracegrad.zeros(1))
        Bad()
    del m.sub
    assert "sub" not in m._modules
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'sub'"):
        m.sub
    with pytest.raises(NotImplementedError, match='Module \\[Module\\] is missing the required "forward" function'):
        m(1)


def test_forward_hooks():
    lin = tnn.Linear(3, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    out = lin(tracegrad.randn(4, 3))
    np.testing.assert_allclose(out._data, np.broadcast_to(lin.bias._data + 1, (4, 2)), rtol=1e-6)
    assert calls == [tracegrad.Size([4, 2])]
    h1.remove()
    h2.remove()
    x = tracegrad.randn(4, 3)
    np.testing.assert_allclose(lin(x)._data, (x @ lin.weight.t() + lin.bias)._data, rtol=1e-6)
    h3 = lin.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
    h4 = lin.register_forward_hook(lambda mod, args, kwargs, out: out * 0, with_kwargs=True)
    assert np.all(lin(x)._data == 0)
    h3.remove()
    h4.remove()
    order = []
    lin.register_forward_hook(lambda *a: order.append("second"))
    lin.register_forward_hook(lambda *a: order.append("first"), prepend=True)
    lin.register_forward_hook(lambda *a: order.append("always"), always_call=True)

    def boom(mod, args):
        raise ValueError("boom")
    lin.register_forward_pre_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        lin(x)
    assert order == ["always"]


def test_containers():
    layers = [tnn.Linear(2, 2) for _ in range(3)]
    seq = tnn.Sequential(*layers)
    assert len(seq) == 3 and seq[-1] is layers[2] and list(seq) == layers
    assert isinstance(seq[1:], tnn.Sequential) and list(seq[1:]) == layers[1:]
    seq.append(tnn.ReLU())
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"] and isinstance(seq[2], tnn.ReLU)
    ml = tnn.ModuleList([tnn.Linear(2, 2), tnn.Linear(2, 2), tnn.ReLU()])
    ref = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.ReLU()])
    assert repr(ml) == repr(ref)
    ml.insert(0, tnn.Tanh())
    assert isinstance(ml[0], tnn.Tanh) and len(ml) == 4
    md = tnn.ModuleDict({"a": tnn.ReLU(), "b": tnn.Tanh()})
    assert list(md.keys()) == ["a", "b"] and "a" in md and repr(md) == repr(
        torch.nn.ModuleDict({"a": torch.nn.ReLU(), "b": torch.nn.Tanh()}))
    pl = tnn.ParameterList([tnn.Parameter(tracegrad.zeros(2, 3))])
    assert repr(pl) == repr(torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(2, 3))]))
    assert len(list(pl.parameters())) == 1


@pytest.mark.parametrize("make", [
    lambda nn: nn.Linear(3, 4), lambda nn: nn.Linear(3, 4, bias=False), lambda nn: nn.Conv2d(1, 16, 3, padding=1),
    lambda nn: nn.Conv2d(4, 8, (3, 2), stride=2, dilation=2, groups=2, bias=False, padding_mode="reflect",
                         padding=1),
    lambda nn: nn.Conv2d(2, 2, 3, padding="same"),
    lambda nn: nn.ConvTranspose2d(4, 8, 3, stride=2, output_padding=1), lambda nn: nn.ReLU(inplace=True),
    lambda nn: nn.GELU("tanh"), lambda nn: nn.Softmax(), lambda nn: nn.Dropout(0.2, True),
    lambda nn: nn.LayerNorm((3, 4), elementwise_affine=False, bias=False), lambda nn: nn.BatchNorm1d(16),
    lambda nn: nn.BatchNorm2d(8, momentum=None, affine=False, track_running_stats=False),
    lambda nn: nn.Embedding(10, 3, padding_idx=0, max_norm=1.0), lambda nn: nn.Flatten(),
    lambda nn: nn.MaxPool2d(3, 1, 1, ceil_mode=True), lambda nn: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
    lambda nn: nn.LeakyReLU(0.2, True), lambda nn: nn.Unflatten(1, (2, 3)), lambda nn: nn.AdaptiveAvgPool2d(1),
    lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1),
])
def test_repr_matches_torch(make):
    assert repr(make(tnn)) == repr(make(torch.nn))


def test_a_torch_model_runs_with_only_the_import_changed():
    """The same source, run with `torch` bound to torch and to tracegrad."""
    source = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.LayerNorm(4 * 4 * 4)
        self.fc = nn.Linear(4 * 4 * 4, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        x = self.drop(self.norm(torch.flatten(x, 1)))
        return F.log_softmax(self.fc(x), dim=1)

def run(x, y, state=None):
    model = Net()
    if state is not None:
        model.load_state_dict(state)
    model.eval()
    out = model(x)
    loss = F.nll_loss(out, y)
    loss.backward()
    return model, out, loss
'''
    import sys
    import types

    def load(torch_like):
        mod = types.ModuleType("user_model")
        saved = {k: sys.modules.get(k) for k in ("torch", "torch.nn", "torch.nn.functional")}
        sys.modules.update({"torch": torch_like, "torch.nn": torch_like.nn,
                            "torch.nn.functional": torch_like.nn.functional})
        try:
            exec(source, mod.__dict__)
        finally:
            for k, v in saved.items():
                sys.modules[k] = v
        return mod

    ref, ours = load(torch), load(tracegrad)
    x, y = RNG.standard_normal((5, 1, 8, 8)).astype(np.float32), RNG.integers(0, 3, 5)
    m_t, out_t, loss_t = ref.run(torch.tensor(x), torch.tensor(y))
    m_g, out_g, loss_g = ours.run(tracegrad.tensor(x), tracegrad.tensor(y),
                                  {k: tracegrad.tensor(v.numpy()) for k, v in m_t.state_dict().items()})
    assert_close(out_g, out_t, rtol=1e-5, atol=1e-5)
    assert_close(loss_g, loss_t, rtol=1e-5, atol=1e-6)
    for (n1, p1), (n2, p2) in zip(m_g.named_parameters(), m_t.named_parameters()):
        assert n1 == n2
        assert_close(p1.grad, p2.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("call", [
    lambda m, L, x, t, y, w, b, img: m.linear(x, w, b), lambda m, L, x, t, y, w, b, img: m.linear(x, w),
    lambda m, L, x, t, y, w, b, img: m.cross_entropy(x, t), lambda m, L, x, t, y, w, b, img: m.nll_loss(x, t),
    lambda m, L, x, t, y, w, b, img: m.cross_entropy(x, t, reduction="none", weight=L.ones(5)),
    lambda m, L, x, t, y, w, b, img: m.mse_loss(x, y), lambda m, L, x, t, y, w, b, img: m.l1_loss(x, y),
    lambda m, L, x, t, y, w, b, img: m.binary_cross_entropy_with_logits(x, y),
    lambda m, L, x, t, y, w, b, img: m.binary_cross_entropy(L.sigmoid(x), y),
    lambda m, L, x, t, y, w, b, img: m.layer_norm(x, (5,)),
    lambda m, L, x, t, y, w, b, img: m.batch_norm(x, None, None, training=True),
    lambda m, L, x, t, y, w, b, img: m.gelu(x), lambda m, L, x, t, y, w, b, img: m.silu(x),
    lambda m, L, x, t, y, w, b, img: m.leaky_relu(x), lambda m, L, x, t, y, w, b, img: m.softplus(x),
    lambda m, L, x, t, y, w, b, img: m.logsigmoid(x), lambda m, L, x, t, y, w, b, img: m.embedding(t, w),
    lambda m, L, x, t, y, w, b, img: m.pad(img, (1, 1)),
    lambda m, L, x, t, y, w, b, img: m.pad(img, (1, 1, 2, 0), mode="reflect"),
    lambda m, L, x, t, y, w, b, img: m.pad(img, (1, 1, 2, 0), mode="replicate"),
    lambda m, L, x, t, y, w, b, img: m.max_pool2d(img, 2), lambda m, L, x, t, y, w, b, img: m.avg_pool2d(img, 2),
    lambda m, L, x, t, y, w, b, img: m.conv2d(img, L.ones(2, 3, 3, 3)),
    lambda m, L, x, t, y, w, b, img: m.adaptive_avg_pool2d(img, 1),
])
def test_grad_fn_names_match_torch(call):
    """What `loss.grad_fn` prints, as in the tutorials."""
    def run(m, L):
        x = L.tensor(RNG.standard_normal((4, 5)), dtype=L.float32, requires_grad=True)
        w = L.tensor(RNG.standard_normal((3, 5)), dtype=L.float32, requires_grad=True)
        b = L.tensor(RNG.standard_normal(3), dtype=L.float32, requires_grad=True)
        img = L.tensor(RNG.standard_normal((2, 3, 6, 6)), dtype=L.float32, requires_grad=True)
        t, y = L.tensor([0, 2, 1, 1]), L.tensor(RNG.uniform(0, 1, (4, 5)), dtype=L.float32)
        return type(call(m, L, x, t, y, w, b, img).grad_fn).__name__
    assert run(TF, tracegrad) == run(torch.nn.functional, torch)


def test_global_forward_hooks_as_torch():
    import warnings
    from test_autograd_parity import same

    def run(m):
        class M(m.nn.Module):
            def forward(self, x, k=1.0):
                if k < 0:
                    raise ValueError("negative")
                return x * k
        log = []
        mm = m.nn.modules.module
        h1 = mm.register_module_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        h2 = mm.register_module_forward_hook(
            lambda mod, args, kwargs, out: log.append(("global", sorted(kwargs), None if out is None else out.tolist())),
            with_kwargs=True, always_call=True)
        try:
            mod = M()
            mod.register_forward_hook(lambda mod, args, out: log.append("local"))
            y = mod(m.tensor([1., 2.]), k=3.0)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                try:
                    mod(m.tensor([1.]), k=-1.0)
                except ValueError as e:
                    log.append(str(e))
            log.extend(str(x.message).split(":")[0] for x in w)
        finally:
            h1.remove()
            h2.remove()
        return y, mod(m.tensor([1.]), k=1.0), log
    same(run)

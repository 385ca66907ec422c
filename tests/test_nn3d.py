"""torch.nn's 3-d layers (conv3d, conv_transpose3d, max/avg/adaptive pooling, BatchNorm3d,
InstanceNorm3d, the 3-d pads), the lazy convolutions and batch norms, max unpooling, alpha
dropout, pdist and TripletMarginWithDistanceLoss: values and gradients equal torch's (float64,
and float32 within its rounding), gradcheck and gradgradcheck of the decompositions, a compiled
3-d network traced whole, and torch's errors for bad arguments."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.functional as F
import torch.nn.functional as TF

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=2e-5, atol=2e-5)}
TG = {torch.float64: tg.float64, torch.float32: tg.float32}


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def compare(fn_tg, fn_torch, *arrays, dtype=torch.float64, seed=1, grads=True):
    """fn's values and the gradients of every array argument for sum(out * random weights)."""
    ts = [torch.tensor(a, dtype=dtype, requires_grad=grads) for a in arrays]
    gs = [tg.tensor(a, dtype=TG[dtype], requires_grad=grads) for a in arrays]
    out_r, out_t = fn_torch(*ts), fn_tg(*gs)
    assert tuple(out_t.shape) == tuple(out_r.shape)
    assert out_t.dtype == TG[dtype]
    np.testing.assert_allclose(out_t.detach().numpy(), out_r.detach().numpy(), **TOL[dtype])
    if grads:
        w = arr(*out_r.shape, seed=seed)
        (out_r * torch.tensor(w, dtype=dtype)).sum().backward()
        (out_t * tg.tensor(w, dtype=TG[dtype])).sum().backward()
        for g, t in zip(gs, ts):
            np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), **TOL[dtype])


def checks(fn, *shapes, seed=0):
    ins = [tg.tensor(arr(*s, seed=seed + i), dtype=tg.float64, requires_grad=True) for i, s in enumerate(shapes)]
    assert tg.autograd.gradcheck(fn, ins)
    assert tg.autograd.gradgradcheck(fn, ins)


def raises_like(fn_tg, fn_torch):
    """Both raise the same exception type with the same message."""
    with pytest.raises(Exception) as r:
        fn_torch()
    with pytest.raises(type(r.value)) as t:
        fn_tg()
    assert str(t.value) == str(r.value)


# == conv3d, conv_transpose3d ==============================================================================

CONV = [dict(), dict(stride=2), dict(stride=(2, 1, 3), padding=(1, 0, 2), dilation=(2, 1, 1)),
        dict(padding="same"), dict(padding="same", dilation=(1, 2, 1)), dict(padding="valid", dilation=2),
        dict(padding=1, groups=2), dict(stride=(1, 2, 1), groups=2)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kw", CONV)
def test_conv3d_matches_torch(kw, dtype):
    g = kw.get("groups", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # (torch's note on 'same' with an even kernel)
        compare(lambda x, w, b: F.conv3d(x, w, b, **kw), lambda x, w, b: TF.conv3d(x, w, b, **kw),
                arr(2, 4, 5, 6, 7), arr(6, 4 // g, 2, 3, 2, seed=1), arr(6, seed=2), dtype=dtype)


def test_conv3d_unbatched_and_without_bias():
    compare(lambda x, w: F.conv3d(x, w, padding=1), lambda x, w: TF.conv3d(x, w, padding=1),
            arr(3, 4, 4, 5), arr(2, 3, 3, 3, 3, seed=1))


CONVT = [dict(), dict(stride=2),
         dict(stride=(2, 1, 3), padding=(1, 0, 2), dilation=(2, 1, 1), output_padding=(1, 0, 2)),
         dict(stride=3, padding=1, output_padding=1), dict(groups=2, stride=2, padding=(2, 1, 0)),
         dict(dilation=2, output_padding=1, groups=2)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kw", CONVT)
def test_conv_transpose3d_matches_torch(kw, dtype):
    g = kw.get("groups", 1)
    compare(lambda x, w, b: F.conv_transpose3d(x, w, b, **kw), lambda x, w, b: TF.conv_transpose3d(x, w, b, **kw),
            arr(2, 4, 3, 4, 5), arr(4, 6 // g, 3, 2, 3, seed=1), arr(6, seed=2), dtype=dtype)


def test_conv_transpose3d_unbatched():
    compare(lambda x, w: F.conv_transpose3d(x, w, stride=2), lambda x, w: TF.conv_transpose3d(x, w, stride=2),
            arr(3, 2, 3, 2), arr(3, 2, 2, 2, 2, seed=1))


def test_conv3d_and_transpose_gradcheck_twice():
    checks(lambda x, w, b: F.conv3d(x, w, b, stride=(2, 1, 1), padding=1, dilation=(1, 1, 2), groups=2),
           (1, 2, 4, 3, 4), (2, 1, 2, 2, 2), (2,))
    checks(lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 0), output_padding=1, groups=2),
           (1, 2, 2, 3, 2), (2, 1, 2, 2, 2), (2,))


# == pooling ===================================================================================================

POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=(2, 3, 2), stride=(2, 1, 3)),
        dict(kernel_size=3, stride=2, ceil_mode=True, padding=1), dict(kernel_size=(3, 2, 2), stride=(2, 2, 1),
                                                                       ceil_mode=True)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kw", POOL + [dict(kernel_size=(2, 3, 2), stride=(2, 1, 3), dilation=(2, 1, 2)),
                                       dict(kernel_size=2, dilation=(2, 1, 1), ceil_mode=True, stride=2)])
def test_max_pool3d_values_indices_and_gradients(kw, dtype):
    x = arr(2, 3, 6, 7, 8)
    compare(lambda t: F.max_pool3d(t, **kw), lambda t: TF.max_pool3d(t, **kw), x, dtype=dtype)
    _, ri = TF.max_pool3d(torch.tensor(x), return_indices=True, **kw)
    _, ti = F.max_pool3d(tg.tensor(x), return_indices=True, **kw)
    assert ti.dtype == tg.int64
    np.testing.assert_array_equal(ti.numpy(), ri.numpy())


def test_max_pool3d_ties_take_the_first_element_in_scan_order():
    x = np.zeros((1, 2, 4, 4, 4))
    x[0, 1, 1:3, 1:3, 1:3] = 1.0
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=2, stride=1)):
        compare(lambda t: F.max_pool3d(t, **kw), lambda t: TF.max_pool3d(t, **kw), x)
        _, ri = TF.max_pool3d(torch.tensor(x), return_indices=True, **kw)
        _, ti = F.max_pool3d(tg.tensor(x), return_indices=True, **kw)
        np.testing.assert_array_equal(ti.numpy(), ri.numpy())


def test_max_pool3d_unbatched_and_integers():
    x = arr(3, 5, 4, 6)
    compare(lambda t: F.max_pool3d(t, 2, 1), lambda t: TF.max_pool3d(t, 2, 1), x)
    xi = np.random.default_rng(3).integers(-50, 50, (1, 2, 4, 5, 4))
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)):
        r, ri = TF.max_pool3d(torch.tensor(xi), return_indices=True, **kw)
        t, ti = F.max_pool3d(tg.tensor(xi), return_indices=True, **kw)
        np.testing.assert_array_equal(t.numpy(), r.numpy())
        np.testing.assert_array_equal(ti.numpy(), ri.numpy())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kw", POOL)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor_override", [None, 5])
def test_avg_pool3d_matches_torch(kw, count_include_pad, divisor_override, dtype):
    compare(lambda t: F.avg_pool3d(t, count_include_pad=count_include_pad, divisor_override=divisor_override, **kw),
            lambda t: TF.avg_pool3d(t, count_include_pad=count_include_pad, divisor_override=divisor_override, **kw),
            arr(2, 3, 6, 7, 8), dtype=dtype)


def test_avg_pool3d_of_integers_divides_as_torch():
    xi = np.random.default_rng(3).integers(-50, 50, (1, 2, 4, 5, 4))
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)):
        r, t = TF.avg_pool3d(torch.tensor(xi), **kw), F.avg_pool3d(tg.tensor(xi), **kw)
        assert t.dtype == tg.int64
        np.testing.assert_array_equal(t.numpy(), r.numpy())


@pytest.mark.parametrize("size", [(1, 1, 1), (2, 3, 3), (3, 4, 5), (6, 7, 8), (4, None, 2), 2])
def test_adaptive_pool3d_matches_torch(size):
    x = arr(2, 3, 6, 7, 8)
    compare(lambda t: F.adaptive_avg_pool3d(t, size), lambda t: TF.adaptive_avg_pool3d(t, size), x)
    compare(lambda t: F.adaptive_max_pool3d(t, size), lambda t: TF.adaptive_max_pool3d(t, size), x)
    _, ri = TF.adaptive_max_pool3d(torch.tensor(x), size, True)
    _, ti = F.adaptive_max_pool3d(tg.tensor(x), size, True)
    np.testing.assert_array_equal(ti.numpy(), ri.numpy())
    compare(lambda t: F.adaptive_max_pool3d(t, size), lambda t: TF.adaptive_max_pool3d(t, size), x[0],
            dtype=torch.float32)


def test_adaptive_max_pool3d_ties_send_the_gradient_to_one_element():
    # overlapping windows (7 -> 3) over equal values: torch's gradient goes to each window's first
    x = np.ones((1, 1, 7, 5, 3))
    compare(lambda t: F.adaptive_max_pool3d(t, (3, 2, 2)), lambda t: TF.adaptive_max_pool3d(t, (3, 2, 2)), x)


def test_pooling_gradcheck_twice():
    checks(lambda x: F.max_pool3d(x, 2, stride=1, padding=1), (1, 2, 3, 3, 4))
    checks(lambda x: F.max_pool3d(x, 2, stride=2, ceil_mode=True, dilation=(1, 2, 1)), (1, 1, 5, 4, 3))
    checks(lambda x: F.avg_pool3d(x, 2, stride=1, padding=1, count_include_pad=False, ceil_mode=True), (1, 2, 3, 3, 4))
    checks(lambda x: F.adaptive_avg_pool3d(x, (3, 2, 2)), (1, 2, 4, 3, 5))
    checks(lambda x: F.adaptive_max_pool3d(x, (3, 2, 2)), (1, 2, 4, 3, 5))


# == modules ====================================================================================================

def _copy_params(m_tg, m_torch):
    sd = {k: tg.tensor(v.detach().numpy().copy()) for k, v in m_torch.state_dict().items()}
    m_tg.load_state_dict(sd)


def _compare_module(m_tg, m_torch, x, train=True):
    m_tg.train(train)
    m_torch.train(train)
    xt = torch.tensor(x, requires_grad=True)
    xg = tg.tensor(x, requires_grad=True)
    out_r, out_t = m_torch(xt), m_tg(xg)
    np.testing.assert_allclose(out_t.detach().numpy(), out_r.detach().numpy(), **TOL[torch.float64])
    w = arr(*out_r.shape, seed=5)
    (out_r * torch.tensor(w)).sum().backward()
    (out_t * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), **TOL[torch.float64])
    for (k, p_t), (k2, p_r) in zip(m_tg.named_parameters(), m_torch.named_parameters()):
        assert k == k2
        np.testing.assert_allclose(p_t.grad.numpy(), p_r.grad.numpy(), **TOL[torch.float64])
    for (k, b_t), (k2, b_r) in zip(m_tg.named_buffers(), m_torch.named_buffers()):
        assert k == k2
        np.testing.assert_allclose(b_t.numpy(), b_r.numpy(), **TOL[torch.float64])


@pytest.mark.parametrize("make", [
    lambda nn: nn.Conv3d(4, 6, 3, stride=(1, 2, 1), padding=1, groups=2, dtype=torch.float64 if nn is torch.nn
                         else tg.float64),
    lambda nn: nn.Conv3d(4, 6, (2, 3, 2), padding="same", padding_mode="reflect", dtype=torch.float64
                         if nn is torch.nn else tg.float64),
    lambda nn: nn.Conv3d(4, 2, 3, padding=(1, 2, 1), padding_mode="replicate", bias=False, dtype=torch.float64
                         if nn is torch.nn else tg.float64),
    lambda nn: nn.Conv3d(4, 2, 2, padding=1, padding_mode="circular", dtype=torch.float64
                         if nn is torch.nn else tg.float64),
    lambda nn: nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dtype=torch.float64
                                  if nn is torch.nn else tg.float64),
    lambda nn: nn.BatchNorm3d(4, dtype=torch.float64 if nn is torch.nn else tg.float64),
    lambda nn: nn.InstanceNorm3d(4, affine=True, track_running_stats=True, dtype=torch.float64
                                 if nn is torch.nn else tg.float64),
    lambda nn: nn.MaxPool3d(2, stride=1, padding=1),
    lambda nn: nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    lambda nn: nn.AdaptiveAvgPool3d((2, 3, None)),
    lambda nn: nn.AdaptiveMaxPool3d(3),
    lambda nn: nn.ReplicationPad3d((1, 2, 0, 1, 2, 1)),
    lambda nn: nn.ReflectionPad3d(1),
    lambda nn: nn.CircularPad3d((1, 0, 2, 1, 0, 1)),
])
def test_modules_match_torch_in_train_and_eval(make):
    m_r, m_t = make(torch.nn), make(tnn)
    assert repr(m_t) == repr(m_r)
    assert list(m_t.state_dict()) == list(m_r.state_dict())
    _copy_params(m_t, m_r)
    x = arr(2, 4, 5, 6, 5)
    _compare_module(m_t, m_r, x, train=True)
    _compare_module(m_t, m_r, x * 2 + 1, train=False)


def test_conv_transpose3d_output_size():
    m_r = torch.nn.ConvTranspose3d(2, 3, 3, stride=2, dtype=torch.float64)
    m_t = tnn.ConvTranspose3d(2, 3, 3, stride=2, dtype=tg.float64)
    _copy_params(m_t, m_r)
    x = arr(1, 2, 3, 4, 3)
    r = m_r(torch.tensor(x), output_size=(8, 10, 7))
    t = m_t(tg.tensor(x), output_size=(8, 10, 7))
    assert tuple(t.shape) == (1, 3, 8, 10, 7)
    np.testing.assert_allclose(t.detach().numpy(), r.detach().numpy(), **TOL[torch.float64])


def test_norm3d_input_dims():
    raises_like(lambda: tnn.BatchNorm3d(3)(tg.randn(2, 3, 4)), lambda: torch.nn.BatchNorm3d(3)(torch.randn(2, 3, 4)))
    raises_like(lambda: tnn.InstanceNorm3d(3)(tg.randn(2, 3, 4)),
                lambda: torch.nn.InstanceNorm3d(3)(torch.randn(2, 3, 4)))
    # unbatched (C, D, H, W)
    compare(lambda x: tnn.InstanceNorm3d(3)(x), lambda x: torch.nn.InstanceNorm3d(3)(x), arr(3, 4, 3, 5))


@pytest.mark.parametrize("lazy, plain, shape", [
    ("LazyConv1d", "Conv1d", (2, 3, 7)), ("LazyConv2d", "Conv2d", (2, 3, 6, 5)),
    ("LazyConv3d", "Conv3d", (2, 3, 4, 5, 4)), ("LazyConv3d", "Conv3d", (3, 4, 5, 4))])
def test_lazy_convs_take_in_channels_from_the_first_input(lazy, plain, shape):
    m_t = getattr(tnn, lazy)(4, 3, padding=1, groups=1, dtype=tg.float64)
    m_r = getattr(torch.nn, lazy)(4, 3, padding=1, groups=1, dtype=torch.float64)
    assert repr(m_t) == repr(m_r)
    x = arr(*shape)
    m_r(torch.tensor(x))
    m_t(tg.tensor(x))
    assert type(m_t) is getattr(tnn, plain)
    assert repr(m_t) == repr(m_r)
    assert tuple(m_t.weight.shape) == tuple(m_r.weight.shape)
    _copy_params(m_t, m_r)
    np.testing.assert_allclose(m_t(tg.tensor(x)).detach().numpy(), m_r(torch.tensor(x)).detach().numpy(),
                               **TOL[torch.float64])


def test_lazy_conv_errors():
    raises_like(lambda: tnn.LazyConv2d(4, 3)(tg.randn(2, 3, 4, 5, 6)),
                lambda: torch.nn.LazyConv2d(4, 3)(torch.randn(2, 3, 4, 5, 6)))
    raises_like(lambda: tnn.LazyConv2d(4, 3, groups=2)(tg.randn(2, 3, 5, 5)),
                lambda: torch.nn.LazyConv2d(4, 3, groups=2)(torch.randn(2, 3, 5, 5)))


@pytest.mark.parametrize("lazy, plain, shape", [
    ("LazyBatchNorm1d", "BatchNorm1d", (4, 3)), ("LazyBatchNorm1d", "BatchNorm1d", (4, 3, 5)),
    ("LazyBatchNorm2d", "BatchNorm2d", (2, 3, 4, 5)), ("LazyBatchNorm3d", "BatchNorm3d", (2, 3, 4, 3, 2))])
@pytest.mark.parametrize("kw", [dict(), dict(affine=False), dict(track_running_stats=False), dict(bias=False)])
def test_lazy_batch_norms(lazy, plain, shape, kw):
    m_t = getattr(tnn, lazy)(dtype=tg.float64, **kw)
    m_r = getattr(torch.nn, lazy)(dtype=torch.float64, **kw)
    assert repr(m_t) == repr(m_r)
    assert list(m_t.state_dict()) == list(m_r.state_dict())
    x = arr(*shape)
    out_r, out_t = m_r(torch.tensor(x)), m_t(tg.tensor(x))
    assert type(m_t) is getattr(tnn, plain)
    assert repr(m_t) == repr(m_r)
    np.testing.assert_allclose(out_t.detach().numpy(), out_r.detach().numpy(), **TOL[torch.float64])
    for (k, v_t), (k2, v_r) in zip(m_t.state_dict().items(), m_r.state_dict().items()):
        assert k == k2
        np.testing.assert_allclose(v_t.numpy(), v_r.numpy(), **TOL[torch.float64])
    raises_like(lambda: m_t(tg.randn(*shape[:-1])) if len(shape) != 3 else m_t(tg.randn(2, 3, 4, 5)),
                lambda: m_r(torch.randn(*shape[:-1])) if len(shape) != 3 else m_r(torch.randn(2, 3, 4, 5)))


def test_compiled_3d_network_traces_whole_and_matches_eager():
    torch.manual_seed(0)
    net_r = torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3, padding=1), torch.nn.BatchNorm3d(4), torch.nn.ReLU(),
                                torch.nn.MaxPool3d(2), torch.nn.ConvTranspose3d(4, 2, 2, stride=2),
                                torch.nn.AvgPool3d(2, ceil_mode=True), torch.nn.AdaptiveMaxPool3d((1, 2, 1)),
                                torch.nn.Flatten(), torch.nn.AlphaDropout(0.3)).double().eval()
    net_t = tnn.Sequential(tnn.Conv3d(2, 4, 3, padding=1), tnn.BatchNorm3d(4), tnn.ReLU(), tnn.MaxPool3d(2),
                           tnn.ConvTranspose3d(4, 2, 2, stride=2), tnn.AvgPool3d(2, ceil_mode=True),
                           tnn.AdaptiveMaxPool3d((1, 2, 1)), tnn.Flatten(), tnn.AlphaDropout(0.3)).double().eval()
    _copy_params(net_t, net_r)

    @tg.compile
    def loss(x):
        return (net_t(x) ** 2).sum()

    x = arr(2, 2, 5, 4, 4)
    xr = torch.tensor(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # traced whole: no fallback warning
        out = loss(tg.tensor(x))
        out.backward()
    ref = (net_r(xr) ** 2).sum()
    ref.backward()
    np.testing.assert_allclose(float(out), float(ref), rtol=1e-10)
    for p_t, p_r in zip(net_t.parameters(), net_r.parameters()):
        np.testing.assert_allclose(p_t.grad.numpy(), p_r.grad.numpy(), rtol=1e-9, atol=1e-12)


# == errors =====================================================================================================

X5 = (2, 3, 4, 5, 6)


@pytest.mark.parametrize("call", [
    lambda m, x: m.conv3d(x(3, 4, 5), x(4, 3, 2, 2, 2)),
    lambda m, x: m.conv3d(x(*X5), x(4, 3, 2, 2, 2), stride=(1, 2)),
    lambda m, x: m.conv3d(x(*X5), x(4, 3, 9, 2, 2)),
    lambda m, x: m.conv3d(x(*X5), x(4, 2, 2, 2, 2)),
    lambda m, x: m.conv3d(x(*X5), x(4, 3, 2, 2, 2), stride=2, padding="same"),
    lambda m, x: m.conv3d(x(*X5), x(4, 3, 2, 2, 2), padding="full"),
    lambda m, x: m.conv_transpose3d(x(2, 4, 3, 3, 3), x(4, 3, 2, 2, 2), stride=2, output_padding=2),
    lambda m, x: m.conv_transpose3d(x(2, 3, 3, 3, 3), x(4, 3, 2, 2, 2)),
    lambda m, x: m.conv_transpose3d(x(2, 4, 3, 3, 3), x(4, 3, 2, 2, 2), x(4)),
    lambda m, x: m.max_pool3d(x(4, 4, 4), 2),
    lambda m, x: m.max_pool3d(x(1, 1, 4, 4, 4), 2, padding=2),
    lambda m, x: m.max_pool3d(x(1, 1, 4, 4, 4), 5),
    lambda m, x: m.max_pool3d(x(1, 1, 4, 4, 4), 2, stride=0),
    lambda m, x: m.max_pool3d(x(1, 1, 4, 4, 4), (2, 2)),
    lambda m, x: m.avg_pool3d(x(1, 1, 4, 4, 4), 5),
    lambda m, x: m.avg_pool3d(x(1, 1, 4, 4, 4), 2, padding=2),
    lambda m, x: m.avg_pool3d(x(1, 1, 4, 4, 4), 2, divisor_override=0),
    lambda m, x: m.avg_pool3d(x(4, 4), 2),
    lambda m, x: m.avg_pool3d(x(1, 1, 5, 1, 3), (1, 3, 3), padding=(0, 1, 1)),
    lambda m, x: m.avg_pool3d(x(1, 1, 1, 4, 5), (2, 3, 3), stride=(1, 3, 1), padding=(0, 0, 1), ceil_mode=True),
    lambda m, x: m.adaptive_avg_pool3d(x(4, 4), 2),
    lambda m, x: m.adaptive_max_pool3d(x(4, 4), 2),
    lambda m, x: m.conv3d(x(1, 3, 4, 5, 6), x(4, 3, 2, 2, 2), dilation=0),     # (oneDNN's words differ)
    lambda m, x: m.conv3d(x(*X5), x(4, 3, 2, 2, 2), padding=-1),
    lambda m, x: m.conv3d(x(1, 4, 3, 3, 3), x(2, 1, 2, 2, 2), groups=4),
    lambda m, x: m.conv3d(x(1, 4, 3, 3, 3), x(4, 1, 2, 2, 2), groups=3),
    lambda m, x: m.conv_transpose3d(x(1, 4, 3, 3, 3), x(4, 2, 2, 2, 2), dilation=(1, 0, 1)),
    lambda m, x: m.conv_transpose3d(x(1, 4, 3, 3, 3), x(4, 2, 2, 2, 2), padding=(0, -1, 0)),
    lambda m, x: m.conv_transpose3d(x(1, 4, 3, 3, 3), x(4, 1, 2, 2, 2), groups=3),
    lambda m, x: m.conv_transpose3d(x(1, 4, 3, 3, 3), x(4, 2, 2, 2, 2), padding=3),
    lambda m, x: m.max_pool3d(x(1, 1, 4, 4, 4), 2, padding=-1),
    lambda m, x: m.avg_pool3d(x(1, 1, 4, 4, 4), 2, padding=(0, 0, -1)),
    lambda m, x: m.max_pool3d(x(1, 1, 4, 4, 4), 2, dilation=0),
    lambda m, x: m.max_pool3d(x(1, 1, 0, 3, 3), 1),
    lambda m, x: m.max_pool3d(x(0, 2, 3, 3), 1),
    lambda m, x: m.avg_pool3d(x(1, 0, 2, 3, 3), 1),
    lambda m, x: m.adaptive_avg_pool3d(x(1, 2, 3, 3, 3), (2, 2)),
    lambda m, x: m.adaptive_max_pool3d(x(1, 2, 3, 3, 3), (2, 2)),
    lambda m, x: m.adaptive_avg_pool3d(x(1, 2, 0, 3, 3), 2),
    lambda m, x: m.adaptive_max_pool3d(x(1, 0, 3, 3, 3), 2),
])
def test_errors_match_torch(call):
    raises_like(lambda: call(F, lambda *s: tg.randn(*s)), lambda: call(TF, lambda *s: torch.randn(*s)))


def test_module_argument_errors_match_torch():
    raises_like(lambda: tnn.Conv3d(3, 4, 2, groups=2), lambda: torch.nn.Conv3d(3, 4, 2, groups=2))
    raises_like(lambda: tnn.Conv3d(2, 4, 2, stride=2, padding="same"),
                lambda: torch.nn.Conv3d(2, 4, 2, stride=2, padding="same"))
    raises_like(lambda: tnn.ConvTranspose3d(2, 4, 2, padding_mode="reflect"),
                lambda: torch.nn.ConvTranspose3d(2, 4, 2, padding_mode="reflect"))


# == max unpooling ==============================================================================================

@pytest.mark.parametrize("nd, shape, kw", [
    (1, (2, 3, 9), dict(kernel_size=2)), (1, (3, 8), dict(kernel_size=3, stride=2, padding=1)),
    (2, (2, 3, 6, 7), dict(kernel_size=2)), (2, (3, 7, 5), dict(kernel_size=3, stride=2, padding=1)),
    (3, (2, 2, 4, 6, 6), dict(kernel_size=2)), (3, (2, 5, 4, 6), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2)))])
def test_max_unpool_inverts_max_pool_as_torch(nd, shape, kw):
    x = arr(*shape)
    pool_r, unpool_r = getattr(TF, f"max_pool{nd}d"), getattr(TF, f"max_unpool{nd}d")
    unpool_t = getattr(F, f"max_unpool{nd}d")
    v, i = pool_r(torch.tensor(x), return_indices=True, **kw)
    idx = tg.tensor(i.numpy())
    sizes = [list(shape[-nd:])]
    default = [(n - 1) * s + k - 2 * p for n, s, k, p in
               zip(v.shape[-nd:], *(np.broadcast_to(kw.get(a, kw["kernel_size"] if a == "stride" else 0), (nd,))
                                    for a in ("stride", "kernel_size", "padding")))]
    if default == sizes[0]:                       # (the default size fits the pooled input)
        sizes.append(None)
    for size in sizes:
        compare(lambda t: unpool_t(t, idx, output_size=size, **kw), lambda t: unpool_r(t, i, output_size=size, **kw),
                v.numpy())
    m_t = getattr(tnn, f"MaxUnpool{nd}d")(**kw)
    m_r = getattr(torch.nn, f"MaxUnpool{nd}d")(**kw)
    assert repr(m_t) == repr(m_r)
    np.testing.assert_allclose(m_t(tg.tensor(v.numpy()), idx, output_size=shape[-nd:]).numpy(),
                               m_r(v, i, output_size=shape[-nd:]).numpy())


def test_max_unpool_gradcheck_twice():
    idx = tg.tensor([[[[0, 3], [9, 14]], [[5, 2], [8, 15]]]])
    checks(lambda t: F.max_unpool2d(t, idx, 2), (1, 2, 2, 2))


@pytest.mark.parametrize("call", [
    lambda m, x, i: m.max_unpool2d(x(1, 1, 2, 2), i(torch.zeros(1, 1, 2, 2, dtype=torch.int32)), 2),
    lambda m, x, i: m.max_unpool2d(x(1, 1, 2, 2), i(torch.zeros(1, 1, 2, 3, dtype=torch.int64)), 2),
    lambda m, x, i: m.max_unpool2d(x(1, 1, 2, 2), i(torch.full((1, 1, 2, 2), 16)), 2),
    lambda m, x, i: m.max_unpool3d(x(1, 1, 2, 2, 2), i(torch.full((1, 1, 2, 2, 2), 64)), 2),
    lambda m, x, i: m.max_unpool1d(x(1, 1, 2), i(torch.full((1, 1, 2), 4)), 2),
    lambda m, x, i: m.max_unpool2d(x(2, 2), i(torch.zeros(2, 2, dtype=torch.int64)), 2),
    lambda m, x, i: m.max_unpool2d(x(1, 1, 2, 2), i(torch.zeros(1, 1, 2, 2, dtype=torch.int64)), 2,
                                   output_size=(9, 9)),
    lambda m, x, i: m.max_unpool2d(x(1, 1, 2, 2), i(torch.zeros(1, 1, 2, 2, dtype=torch.int64)), 2,
                                   output_size=(9,)),
])
def test_max_unpool_errors_match_torch(call):
    raises_like(lambda: call(F, lambda *s: tg.randn(*s), lambda t: tg.tensor(t.numpy())),
                lambda: call(TF, lambda *s: torch.randn(*s), lambda t: t))


# == alpha dropout ==============================================================================================

def _levels(p):
    """torch's two values for a zero input: kept (alpha' a p) and dropped (alpha' a (p - 1))."""
    out = TF.alpha_dropout(torch.zeros(20000, dtype=torch.float64), p, True)
    return sorted(set(out.tolist()))


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_alpha_dropout_is_torch_affine_map_on_its_mask(p):
    dropped, kept = _levels(p)
    x = arr(400, 50, seed=2)
    xt = tg.tensor(x, requires_grad=True)
    out = F.alpha_dropout(xt, p, True)
    # which elements torch's map keeps, read off the output (a dropped one is the constant)
    keep = (out.detach().numpy() != dropped)
    assert abs((1 - keep.mean()) - p) < 0.02
    a = 1.0 / math.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
    mask = torch.tensor(keep, dtype=torch.float64)
    ref = torch.tensor(x) * mask * a + (mask - 1) * (1.7580993408473766 * a) + 1.7580993408473766 * a * p
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy()[~keep], dropped, rtol=1e-12)
    np.testing.assert_allclose(out.detach().numpy()[keep], x[keep] * a + kept, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), keep * a, rtol=1e-12)
    # the self-normalizing property: a standard normal input keeps mean 0 and variance 1
    big = F.alpha_dropout(tg.tensor(arr(200000, seed=4)), p, True).numpy()
    assert abs(big.mean()) < 0.02 and abs(big.var() - 1) < 0.03


def test_alpha_dropped_with_a_fixed_mask_matches_torch_formula():
    from tracegrad.nn.functional_nd import alpha_dropped
    x, keep = arr(5, 6), (arr(5, 6, seed=9) > 0).astype(np.float64)
    p = 0.3
    a = 1.0 / math.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
    ref = torch.tensor(x) * torch.tensor(keep * a) + (torch.tensor(keep) - 1) * 1.7580993408473766 * a + \
        1.7580993408473766 * a * p
    np.testing.assert_allclose(alpha_dropped(tg.tensor(x), tg.tensor(keep), p).numpy(), ref.numpy(), rtol=1e-14)
    checks(lambda t: alpha_dropped(t, tg.tensor(keep), p), (5, 6))


def test_feature_alpha_dropout_drops_whole_channels():
    p = 0.4
    dropped, _ = _levels(p)
    out = F.feature_alpha_dropout(tg.tensor(arr(30, 20, 3, 4)), p, True).numpy()
    drop = out == dropped
    assert drop.any() and (~drop).any()
    assert (drop.all(axis=(2, 3)) | (~drop).all(axis=(2, 3))).all()
    raises_like(lambda: F.feature_alpha_dropout(tg.randn(3), 0.5, True),
                lambda: TF.feature_alpha_dropout(torch.randn(3), 0.5, True))


def test_alpha_dropout_eval_identity_modules_and_errors():
    x = tg.randn(4, 5)
    for fn in (F.alpha_dropout, F.feature_alpha_dropout):
        assert fn(x, 0.5) is x                          # training defaults to False
        assert fn(x, 0.5, False) is x
        assert fn(x, 0.0, True) is x
        np.testing.assert_array_equal(fn(x, 1.0, True).numpy(), np.zeros((4, 5)))
    for name in ("AlphaDropout", "FeatureAlphaDropout"):
        m_t, m_r = getattr(tnn, name)(0.2), getattr(torch.nn, name)(0.2)
        assert repr(m_t) == repr(m_r)
        assert m_t.eval()(x) is x
        assert (m_t.train()(x).numpy() != x.numpy()).any()
    raises_like(lambda: F.alpha_dropout(tg.randn(3), 1.5), lambda: TF.alpha_dropout(torch.randn(3), 1.5))
    raises_like(lambda: F.alpha_dropout(tg.arange(3), 0.5, True), lambda: TF.alpha_dropout(torch.arange(3), 0.5, True))


# == pdist, triplet loss with a distance ===========================================================================

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("p", [0, 0.5, 1, 1.5, 2, 3, math.inf])
def test_pdist_matches_torch(p, dtype):
    compare(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), arr(6, 4), dtype=dtype)
    compare(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), arr(1, 4), dtype=dtype)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_pdist_of_equal_rows_has_torch_gradient(p):
    x = arr(4, 3)
    x[2] = x[0]
    compare(lambda t: F.pdist(t, p), lambda t: TF.pdist(t, p), x)


def test_pdist_gradcheck_and_errors():
    for p in (1, 2, 3, math.inf):
        checks(lambda x: F.pdist(x, p), (4, 3))
    for call in (lambda m, x: m.pdist(x(3, 3, 3)), lambda m, x: m.pdist(x(3, 3), p=-1)):
        raises_like(lambda: call(F, lambda *s: tg.randn(*s)), lambda: call(TF, lambda *s: torch.randn(*s)))
    raises_like(lambda: F.pdist(tg.arange(9).reshape(3, 3)), lambda: TF.pdist(torch.arange(9).reshape(3, 3)))


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dist", ["default", "cosine", "l1"])
def test_triplet_margin_with_distance_loss_matches_torch(dist, reduction, swap):
    fns = {"default": (None, None),
           "cosine": (lambda a, b: 1.0 - F.cosine_similarity(a, b), lambda a, b: 1.0 - TF.cosine_similarity(a, b)),
           "l1": (lambda a, b: (a - b).abs().sum(-1), lambda a, b: (a - b).abs().sum(-1))}
    d_t, d_r = fns[dist]
    compare(lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, distance_function=d_t, margin=0.7,
                                                                swap=swap, reduction=reduction),
            lambda a, p, n: TF.triplet_margin_with_distance_loss(a, p, n, distance_function=d_r, margin=0.7,
                                                                 swap=swap, reduction=reduction),
            arr(5, 4, seed=1), arr(5, 4, seed=2), arr(5, 4, seed=3))
    m_t = tnn.TripletMarginWithDistanceLoss(distance_function=d_t, margin=0.7, swap=swap, reduction=reduction)
    m_r = torch.nn.TripletMarginWithDistanceLoss(distance_function=d_r, margin=0.7, swap=swap, reduction=reduction)
    compare(m_t, m_r, arr(5, 4, seed=1), arr(5, 4, seed=2), arr(5, 4, seed=3))
    if dist == "default":
        assert repr(m_t) == repr(m_r)


def test_triplet_margin_with_distance_loss_errors_and_gradcheck():
    a = [tg.randn(3, 4) for _ in range(3)]
    r = [torch.randn(3, 4) for _ in range(3)]
    raises_like(lambda: F.triplet_margin_with_distance_loss(*a, reduction="avg"),
                lambda: TF.triplet_margin_with_distance_loss(*r, reduction="avg"))
    raises_like(lambda: F.triplet_margin_with_distance_loss(*a, margin=0),
                lambda: TF.triplet_margin_with_distance_loss(*r, margin=0))
    raises_like(lambda: F.triplet_margin_with_distance_loss(a[0], a[1], tg.randn(4)),
                lambda: TF.triplet_margin_with_distance_loss(r[0], r[1], torch.randn(4)))
    raises_like(lambda: tnn.TripletMarginWithDistanceLoss(margin=-1.0),
                lambda: torch.nn.TripletMarginWithDistanceLoss(margin=-1.0))
    checks(lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=True), (3, 4), (3, 4), (3, 4))


@pytest.mark.parametrize("shape, size", [((2, 3, 5, 3), (3, 2)), ((2, 3, 7, 6), (4, 4)), ((3, 7, 5), (3, 5)),
                                         ((2, 3, 6, 4), (3, 2))])
def test_adaptive_max_pool2d_gradient_and_indices_of_overlapping_windows(shape, size):
    # torch's gradient goes to each window's first maximum (an amax split it among ties), and its
    # indices exist for windows that do not tile the input
    for x in (np.ones(shape), np.round(arr(*shape) * 2)):
        compare(lambda t: F.adaptive_max_pool2d(t, size), lambda t: TF.adaptive_max_pool2d(t, size), x)
        _, ri = TF.adaptive_max_pool2d(torch.tensor(x), size, True)
        _, ti = F.adaptive_max_pool2d(tg.tensor(x), size, True)
        np.testing.assert_array_equal(ti.numpy(), ri.numpy())
    x = arr(*shape[:-2], shape[-1])
    _, ri = TF.adaptive_max_pool1d(torch.tensor(x), 4, True)
    _, ti = F.adaptive_max_pool1d(tg.tensor(x), 4, True)
    np.testing.assert_array_equal(ti.numpy(), ri.numpy())
    checks(lambda t: F.adaptive_max_pool2d(t, size), shape)


def _indices_and_grads(fn_t, fn_r, x):
    xr, xt = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    vr, ir = fn_r(xr)
    vt, it = fn_t(xt)
    np.testing.assert_array_equal(vt.detach().numpy(), vr.detach().numpy())
    np.testing.assert_array_equal(it.numpy(), ir.numpy())
    vr.sum().backward()
    vt.sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy(), xr.grad.numpy())


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)])
def test_max_pools_take_the_last_nan_and_the_first_real_element_of_an_all_minus_inf_window(kw):
    # torch's kernels: a NaN replaces the running maximum (the last NaN in scan order wins); a window
    # whose real elements all equal -inf keeps its first real element, never the padding
    x = arr(1, 2, 5, 4, 4)
    x[0, 0, 0, 0, 0] = x[0, 0, 1, 1, 1] = x[0, 0, 3, 2, 1] = x[0, 1, 4, 0, 3] = np.nan
    _indices_and_grads(lambda t: F.max_pool3d(t, return_indices=True, **kw),
                       lambda t: TF.max_pool3d(t, return_indices=True, **kw), x)
    y = np.full((1, 1, 5, 4, 4), -np.inf)
    y[0, 0, 3] = 1.0
    _indices_and_grads(lambda t: F.max_pool3d(t, return_indices=True, **kw),
                       lambda t: TF.max_pool3d(t, return_indices=True, **kw), y)
    for size in ((3, 3, 3), (2, 4, 3)):
        _indices_and_grads(lambda t: F.adaptive_max_pool3d(t, size, True),
                           lambda t: TF.adaptive_max_pool3d(t, size, True), x)
        _indices_and_grads(lambda t: F.adaptive_max_pool3d(t, size, True),
                           lambda t: TF.adaptive_max_pool3d(t, size, True), y)
        _indices_and_grads(lambda t: F.adaptive_max_pool2d(t, size[1:], True),
                           lambda t: TF.adaptive_max_pool2d(t, size[1:], True), x[0])


def test_pdist_inf_sends_the_whole_gradient_to_every_tied_coordinate():
    x = np.array([[0., 1, 2], [2, 3, 4], [1, 0, 0], [0, 1, 5]])
    compare(lambda t: F.pdist(t, math.inf), lambda t: TF.pdist(t, math.inf), x)


def test_pooling_and_conv_of_an_empty_batch_and_bias_errors():
    for fn_t, fn_r in ((lambda t: F.max_pool3d(t, 2), lambda t: TF.max_pool3d(t, 2)),
                       (lambda t: F.avg_pool3d(t, 2), lambda t: TF.avg_pool3d(t, 2))):
        compare(fn_t, fn_r, np.zeros((0, 2, 4, 4, 4)))
    # (max_pool2d's backward reshaped an empty batch's indices with -1, which numpy refuses)
    compare(lambda t: F.max_pool2d(t, 2), lambda t: TF.max_pool2d(t, 2), np.zeros((0, 2, 4, 4)))
    raises_like(lambda: F.conv3d(tg.randn(1, 2, 3, 3, 3), tg.randn(4, 2, 2, 2, 2), tg.randn(3)),
                lambda: TF.conv3d(torch.randn(1, 2, 3, 3, 3), torch.randn(4, 2, 2, 2, 2), torch.randn(3)))


@pytest.mark.parametrize("cls", ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"])
def test_conv_transpose_output_size_range_as_torch(cls):
    # an output_size outside [smallest, smallest + stride - 1] gave another size (a negative
    # output_padding crops) or the functional's RuntimeError; torch raises ValueError
    nd = int(cls[-2])
    m_t = getattr(tnn, cls)(2, 3, 3, stride=2, padding=1, dtype=tg.float64)
    m_r = getattr(torch.nn, cls)(2, 3, 3, stride=2, padding=1, dtype=torch.float64)
    _copy_params(m_t, m_r)
    x = arr(1, 2, *([4] * nd))
    for size in ([7] * nd, [8] * nd, [1, 3] + [8] * nd, [3] + [7] * nd):
        x_ = x if len(size) != nd + 1 else x[0]
        r, t = m_r(torch.tensor(x_), output_size=size), m_t(tg.tensor(x_), output_size=size)
        np.testing.assert_allclose(t.detach().numpy(), r.detach().numpy(), **TOL[torch.float64])
    for size in ([6] * nd, [9] * nd, [5] * (nd + 3)):
        raises_like(lambda: m_t(tg.tensor(x), output_size=size), lambda: m_r(torch.tensor(x), output_size=size))


@pytest.mark.parametrize("call", [
    lambda m, x, w: m.conv3d(x, w, padding="same"),
    lambda m, x, w: m.conv_transpose3d(x, w.transpose(0, 1), stride=2, padding=1),
    lambda m, x, w: m.max_pool3d(x, 2, return_indices=True)[1],
    lambda m, x, w: m.max_pool3d(x, 3, 1, 1),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_channels_last_3d_results_as_torch(call, dtype):
    # torch's kernels write channels_last_3d where the input (or a convolution's weight) is so;
    # its 3-d convolutions only in float32 (oneDNN's), its float64 ones C-contiguous
    x, w = arr(2, 3, 4, 5, 6), arr(4, 3, 2, 2, 2, seed=1)
    for xf, wf in ((True, False), (False, True), (False, False)):
        lay = lambda t, f, fmt: t.contiguous(memory_format=fmt) if f else t        # noqa: E731
        r = call(TF, lay(torch.tensor(x, dtype=dtype), xf, torch.channels_last_3d),
                 lay(torch.tensor(w, dtype=dtype), wf, torch.channels_last_3d))
        t = call(F, lay(tg.tensor(x, dtype=TG[dtype]), xf, tg.channels_last_3d),
                 lay(tg.tensor(w, dtype=TG[dtype]), wf, tg.channels_last_3d))
        assert t.stride() == r.stride()
        np.testing.assert_allclose(t.numpy(), r.numpy(), **TOL[dtype])


def test_batch_norm_of_channels_last_3d_stays_so():
    x = arr(2, 3, 4, 5, 6)
    xt = tg.tensor(x).contiguous(memory_format=tg.channels_last_3d)
    xr = torch.tensor(x).contiguous(memory_format=torch.channels_last_3d)
    for m_t, m_r in ((tnn.BatchNorm3d(3, dtype=tg.float64), torch.nn.BatchNorm3d(3, dtype=torch.float64)),
                     (tnn.InstanceNorm3d(3), torch.nn.InstanceNorm3d(3))):
        for train in (True, False):
            t, r = m_t.train(train)(xt), m_r.train(train)(xr)
            assert t.stride() == r.stride()
            np.testing.assert_allclose(t.detach().numpy(), r.detach().numpy(), **TOL[torch.float64])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int32", "uint8", "bool", "int64"])
@pytest.mark.parametrize("fn, size", [("max_pool3d", 2), ("avg_pool3d", 2), ("adaptive_avg_pool3d", 1),
                                      ("adaptive_avg_pool3d", 2), ("adaptive_max_pool3d", 1)])
def test_pool3d_dtypes_as_torch(fn, size, dtype):
    x = np.random.default_rng(0).integers(0, 5, (1, 2, 4, 4, 2))
    r_in, t_in = torch.tensor(x).to(getattr(torch, dtype)), tg.tensor(x).to(getattr(tg, dtype))
    try:
        r = getattr(TF, fn)(r_in, size)
    except Exception:
        raises_like(lambda: getattr(F, fn)(t_in, size), lambda: getattr(TF, fn)(r_in, size))
        return
    t = getattr(F, fn)(t_in, size)
    assert t.dtype == getattr(tg, dtype)
    np.testing.assert_array_equal(t.float().numpy(), r.float().numpy())


def test_max_pool_windows_with_no_input_element_as_torch():
    # dilation can put every tap of a window in the padding: torch's value is -inf and its index
    # the window's start stepped past the padding (the first tap, padding, gave a negative index
    # whose gradient went to another element); where that index is still inside the plane torch's
    # gradient goes to it
    x = arr(1, 2, 5, 4, 1)
    kw = dict(kernel_size=(3, 3, 2), stride=(3, 3, 2), padding=(1, 1, 1), dilation=(2, 1, 2))
    _indices_and_grads(lambda t: F.max_pool3d(t, return_indices=True, **kw),
                       lambda t: TF.max_pool3d(t, return_indices=True, **kw), x)
    kw2 = dict(kernel_size=(3, 2), stride=(3, 2), padding=(1, 1), dilation=(1, 2))
    _indices_and_grads(lambda t: F.max_pool2d(t, return_indices=True, **kw2),
                       lambda t: TF.max_pool2d(t, return_indices=True, **kw2), x[:, :, 1])
    # depth taps all in the padding: the index past the plane as torch's, the gradient nowhere
    # (torch's backward writes out of bounds there)
    y = arr(1, 1, 1, 3, 3)
    r = TF.max_pool3d(torch.tensor(y), 2, 2, 1, 2, False, True)
    yt = tg.tensor(y, requires_grad=True)
    t = F.max_pool3d(yt, 2, 2, 1, 2, False, True)
    np.testing.assert_array_equal(t[1].numpy(), r[1].numpy())
    np.testing.assert_array_equal(t[0].detach().numpy(), r[0].numpy())
    t[0].sum().backward()
    np.testing.assert_array_equal(yt.grad.numpy(), np.zeros(y.shape))
    z = tg.tensor(arr(1, 1, 1, 1), requires_grad=True)           # 2-d: the index past the plane
    v, i = F.max_pool2d(z, 2, 1, 1, 2, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), TF.max_pool2d(torch.tensor(z.detach().numpy()), 2, 1, 1, 2,
                                                           return_indices=True)[1].numpy())
    v.sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros((1, 1, 1, 1)))


def test_compiled_functions_trace_whole_and_match_torch():
    def program(lib, F_, x, a, p, n):
        v, i = F_.max_pool3d(x, 2, return_indices=True)
        m, j = F_.adaptive_max_pool3d(x, (3, 2, 3), return_indices=True)
        u = F_.max_unpool3d(v, i, 2, output_size=x.shape[-3:])
        out = ((u * x).sum() + m.sum() + F_.avg_pool3d(x, 3, 2, 1, ceil_mode=True).sum()
               + F_.adaptive_avg_pool3d(x, (3, 2, 3)).sum() + F_.pdist(x.reshape(x.shape[0], -1), 3).sum()
               + F_.triplet_margin_with_distance_loss(a, p, n, swap=True)
               + (F_.pad(x, (1, 2, 0, 1, 2, 1), mode="replicate") ** 2).sum()
               + F_.instance_norm(x).pow(3).sum())
        return out, i, j

    compiled = tg.compile(lambda *t: program(tg, F, *t))
    arrays = [arr(2, 3, 4, 6, 5), arr(4, 3, seed=1), arr(4, 3, seed=2), arr(4, 3, seed=3)]
    ts = [tg.tensor(a, requires_grad=True) for a in arrays]
    rs = [torch.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # traced whole: no fallback warning
        out_t, i_t, j_t = compiled(*ts)
        out_t.backward()
    out_r, i_r, j_r = program(torch, TF, *rs)
    out_r.backward()
    np.testing.assert_allclose(out_t.item(), out_r.item(), rtol=1e-12)
    np.testing.assert_array_equal(i_t.numpy(), i_r.numpy())
    np.testing.assert_array_equal(j_t.numpy(), j_r.numpy())
    for t, r in zip(ts, rs):
        np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_adaptive_pool3d_to_a_zero_size_is_empty():
    for size in ((0, 2, 2), (2, 0, 3), 0):
        # (torch's backward of these refuses an empty gradient)
        compare(lambda t: F.adaptive_avg_pool3d(t, size), lambda t: TF.adaptive_avg_pool3d(t, size), arr(1, 2, 3, 4, 3),
                grads=False)
        compare(lambda t: F.adaptive_max_pool3d(t, size), lambda t: TF.adaptive_max_pool3d(t, size), arr(1, 2, 3, 4, 3),
                grads=False)
        _, i = F.adaptive_max_pool3d(tg.randn(1, 2, 3, 4, 3), size, True)
        assert i.dtype == tg.int64 and i.numel() == 0


def test_alpha_dropout_in_place_writes_the_same_map_into_the_input():
    p = 0.3
    dropped, kept = _levels(p)
    a = 1.0 / math.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
    for fn, shape in ((F.alpha_dropout, (50, 40)), (F.feature_alpha_dropout, (20, 30, 4))):
        x = arr(*shape, seed=21)
        xt = tg.tensor(x)
        out = fn(xt, p, True, True)
        assert out is xt
        keep = out.numpy() != dropped
        np.testing.assert_allclose(out.numpy()[keep], x[keep] * a + kept, rtol=1e-12, atol=1e-12)
        assert 0 < keep.mean() < 1

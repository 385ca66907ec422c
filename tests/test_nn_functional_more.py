"""rms_norm (and nn.RMSNorm), local_response_norm, lp_pool1d/2d, conv_transpose1d and rrelu
against torch: values and gradients in float64 over their options, grad_fn names, 16-bit
inputs, errors; rrelu's random slopes in training."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tracegrad as tg
import tracegrad.nn.functional as GF

R = np.random.default_rng(3)
X4 = R.standard_normal((2, 5, 6, 7))
X3 = R.standard_normal((2, 4, 9))
W7 = R.standard_normal(7)
W67 = R.standard_normal((6, 7))
WT = R.standard_normal((4, 3, 3))
WTG = R.standard_normal((4, 2, 2))
B6 = R.standard_normal(6)

CASES = {
    "rms_norm": (X4, lambda F, m, x: F.rms_norm(x, (7,))),
    "rms_norm_weight_eps": (X4, lambda F, m, x: F.rms_norm(x, [6, 7], m.tensor(W67), eps=1e-3)),
    "rms_norm_list_shape": (X4, lambda F, m, x: F.rms_norm(x, [7], m.tensor(W7))),
    "local_response_norm_3d": (X3, lambda F, m, x: F.local_response_norm(x, 3)),
    "local_response_norm_4d": (X4, lambda F, m, x: F.local_response_norm(x, 4, alpha=0.3, beta=0.6, k=2.0)),
    "local_response_norm_5d": (X4, lambda F, m, x: F.local_response_norm(x.reshape(2, 5, 3, 2, 7), 2, alpha=0.5)),
    "lp_pool2d": (X4, lambda F, m, x: F.lp_pool2d(x, 2, 2)),
    "lp_pool2d_p3_stride_ceil": (X4, lambda F, m, x: F.lp_pool2d(x.abs() + 0.1, 3.0, (2, 3), stride=(2, 2),
                                                                 ceil_mode=True)),
    "lp_pool1d": (X3, lambda F, m, x: F.lp_pool1d(x, 2, 3, stride=2)),
    "lp_pool1d_ceil": (X3, lambda F, m, x: F.lp_pool1d(x.abs() + 0.1, 1.5, 4, ceil_mode=True)),
    "conv_transpose1d": (X3, lambda F, m, x: F.conv_transpose1d(x, m.tensor(WT))),
    "conv_transpose1d_options": (X3, lambda F, m, x: F.conv_transpose1d(x, m.tensor(WTG), m.tensor(B6[:4]), stride=3,
                                                                        padding=1, output_padding=2, groups=2,
                                                                        dilation=2)),
    "conv_transpose1d_unbatched": (X3, lambda F, m, x: F.conv_transpose1d(x[0], m.tensor(WT), stride=(2,),
                                                                          padding=(1,))),
    "rrelu_eval": (X4, lambda F, m, x: F.rrelu(x)),
    "rrelu_eval_bounds": (X4, lambda F, m, x: F.rrelu(x, 0.2, 0.6)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_gradients_and_nodes_against_torch(name):
    data, fn = CASES[name]
    xt, xg = torch.tensor(data, requires_grad=True), tg.tensor(data, requires_grad=True)
    want, got = fn(TF, torch, xt), fn(GF, tg, xg)
    assert got.shape == tuple(want.shape) and str(got.dtype) == str(want.dtype)
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-13)
    w = np.cos(np.arange(want.numel())).reshape(tuple(want.shape))
    (gt,) = torch.autograd.grad(want, xt, torch.tensor(w))
    (gg,) = tg.autograd.grad(got, xg, tg.tensor(w))
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-10, atol=1e-12)


def test_gradcheck():
    r = np.random.default_rng(4)
    x = tg.tensor(r.standard_normal((2, 3, 4, 5)), requires_grad=True)
    w = tg.tensor(r.standard_normal(5), requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: GF.rms_norm(a, (5,), b), (x, w))
    assert tg.autograd.gradgradcheck(lambda a, b: GF.rms_norm(a, (5,), b), (x, w))
    assert tg.autograd.gradcheck(lambda a: GF.local_response_norm(a, 3, alpha=0.5), (x,))
    assert tg.autograd.gradcheck(lambda a: GF.lp_pool2d(a.abs() + 0.5, 3, 2), (x,))
    k = tg.tensor(r.standard_normal((4, 2, 3)), requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: GF.conv_transpose1d(a, b, stride=2, padding=1),
                                 (x.detach()[0].requires_grad_(), k))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_rms_norm_in_16_bits_computes_in_float32_as_torch(dtype):
    x = (R.standard_normal((4, 64)) * 3).astype(np.float32)
    w = R.standard_normal(64).astype(np.float32)
    for weight in (None, w):
        want = TF.rms_norm(torch.tensor(x).to(getattr(torch, dtype)), (64,),
                           None if weight is None else torch.tensor(weight).to(getattr(torch, dtype)))
        got = GF.rms_norm(tg.tensor(x).to(getattr(tg, dtype)), (64,),
                          None if weight is None else tg.tensor(weight).to(getattr(tg, dtype)))
        assert str(got.dtype) == str(want.dtype)
        # computed in float32 either way (the 16-bit results rounded once): an ulp apart at most
        ulp = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23}[dtype]
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 * ulp, atol=0)


def test_rms_norm_module_and_errors():
    m, t = tg.nn.RMSNorm((5, 7), eps=1e-4), torch.nn.RMSNorm((5, 7), eps=1e-4)
    assert repr(m) == repr(t) and list(m.state_dict()) == list(t.state_dict())
    assert repr(tg.nn.RMSNorm(3, elementwise_affine=False)) == repr(torch.nn.RMSNorm(3, elementwise_affine=False))
    x = R.standard_normal((2, 3, 5, 7))
    np.testing.assert_allclose(m(tg.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    for fn in (lambda F, m: F.rms_norm(m.ones(2, 3), (4,)), lambda F, m: F.rms_norm(m.ones(2, 3), (4, 5)),
               lambda F, m: F.rms_norm(m.ones(2, 3), 3), lambda F, m: F.local_response_norm(m.ones(2, 3), 2),
               lambda F, m: F.conv_transpose1d(m.ones(2, 3, 4, 5), m.ones(3, 1, 2))):
        with pytest.raises(Exception) as want:
            fn(TF, torch)
        with pytest.raises(type(want.value)) as got:
            fn(GF, tg)
        assert str(got.value) == str(want.value)


def test_modules_match_torchs():
    x = R.standard_normal((2, 4, 6, 6))
    for make in (lambda nn: nn.LocalResponseNorm(3, alpha=0.2), lambda nn: nn.LPPool2d(2, 3, stride=1),
                 lambda nn: nn.LPPool1d(3, 2), lambda nn: nn.RReLU(0.1, 0.3).eval()):
        mt, mg = make(torch.nn), make(tg.nn)
        assert repr(mg) == repr(mt)
        inp = x.reshape(2, 4, 36) if isinstance(mt, torch.nn.LPPool1d) else x
        np.testing.assert_allclose(mg(tg.tensor(inp)).numpy(), mt(torch.tensor(inp)).numpy(), rtol=1e-12)


def test_rrelu_in_training_draws_a_slope_per_negative_element():
    x = tg.tensor(np.linspace(-3, 3, 4001), requires_grad=True)
    tg.manual_seed(5)
    y = GF.rrelu(x, 0.1, 0.4, training=True)
    assert type(y.grad_fn).__name__ == "RreluWithNoiseBackward0"
    (g,) = tg.autograd.grad(y.sum(), x)
    xs, ys, gs = x.detach().numpy(), y.detach().numpy(), g.numpy()
    neg = xs < 0
    slope = ys[neg] / xs[neg]
    assert (slope >= 0.1).all() and (slope <= 0.4).all() and slope.std() > 0.05     # one draw per element
    np.testing.assert_allclose(gs[neg], slope, rtol=1e-12)                          # the gradient is the slope
    pos = xs > 0
    assert (ys[~neg] == xs[~neg]).all() and (gs[pos] == 1).all()
    zero = xs == 0                      # torch's rrelu_with_noise draws a slope for input <= 0
    assert zero.sum() == 1 and 0.1 <= gs[zero][0] <= 0.4
    tg.manual_seed(5)
    np.testing.assert_array_equal(GF.rrelu(x, 0.1, 0.4, training=True).detach().numpy(), ys)   # seeded
    z = tg.tensor([-2.0, 1.0])
    assert GF.rrelu(z, inplace=True) is z and z.tolist() == pytest.approx([-2.0 * (1 / 8 + 1 / 3) / 2, 1.0], rel=1e-7)


@pytest.mark.parametrize("kw", [dict(size=(9, 4)), dict(scale_factor=1.7), dict(size=(5, 11), align_corners=True),
                                dict(size=(3, 3)), dict(scale_factor=(0.6, 2.5)), dict(size=(1, 1)),
                                dict(size=(6, 7), align_corners=True)])
def test_bicubic_interpolation_against_torch(kw):
    x = R.standard_normal((2, 3, 7, 6))
    xt, xg = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    want = TF.interpolate(xt, mode="bicubic", **kw)
    got = GF.interpolate(xg, mode="bicubic", **kw)
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__ == "UpsampleBicubic2DBackward0"
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-13)
    w = np.cos(np.arange(want.numel())).reshape(tuple(want.shape))
    (gt,) = torch.autograd.grad(want, xt, torch.tensor(w))
    (gg,) = tg.autograd.grad(got, xg, tg.tensor(w))
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-12, atol=1e-13)
    x32 = x.astype(np.float32)           # float32: the 16 taps summed in another order, a few ulp apart
    np.testing.assert_allclose(GF.interpolate(tg.tensor(x32), mode="bicubic", **kw).numpy(),
                               TF.interpolate(torch.tensor(x32), mode="bicubic", **kw).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw, shape", [(dict(size=(3, 4)), (2, 3, 7, 6)), (dict(scale_factor=0.5), (2, 3, 7, 6)),
                                       (dict(size=(9, 13)), (2, 3, 7, 6)), (dict(size=5), (2, 3, 7))])
def test_area_interpolation_is_adaptive_average_pooling(kw, shape):
    x = R.standard_normal(shape)
    xt, xg = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    want, got = TF.interpolate(xt, mode="area", **kw), GF.interpolate(xg, mode="area", **kw)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    w = np.cos(np.arange(want.numel())).reshape(tuple(want.shape))
    (gt,) = torch.autograd.grad(want, xt, torch.tensor(w))
    (gg,) = tg.autograd.grad(got, xg, tg.tensor(w))
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        GF.interpolate(xg, mode="area", align_corners=True, **kw)

"""The padding layers, channel dropout (F.dropout1d/2d/3d and their modules), ConvTranspose1d,
PixelUnshuffle, ChannelShuffle, Softmax2d and UpsamplingNearest2d/Bilinear2d against torch:
reprs, values and input gradients (float64); channel dropout's whole-channel masks."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(5)
X4 = R.standard_normal((2, 4, 5, 6))
X3 = R.standard_normal((2, 4, 7))
X5 = R.standard_normal((1, 2, 3, 4, 5))

MODULES = [
    ("ZeroPad2d(2)", X4), ("ZeroPad1d((1, 3))", X3), ("ZeroPad3d(1)", X5), ("ConstantPad1d((1, 2), 3.5)", X3),
    ("ConstantPad2d((0, 1, 2, 3), -1.0)", X4), ("ConstantPad3d((1, 0, 0, 1, 2, 0), 0.5)", X5),
    ("ReflectionPad1d(2)", X3), ("ReflectionPad2d((1, 0, 2, 1))", X4), ("ReplicationPad1d((0, 3))", X3),
    ("ReplicationPad2d(2)", X4), ("CircularPad1d(1)", X3), ("CircularPad2d((1, 2, 0, 1))", X4),
    ("PixelUnshuffle(2)", X4[:, :, :4, :]), ("ChannelShuffle(2)", X4), ("Softmax2d()", X4), ("Softmax2d()", X4[0]),
    ("UpsamplingNearest2d(scale_factor=2)", X4), ("UpsamplingBilinear2d(size=(7, 3))", X4),
    ("Dropout2d(0.4).eval()", X4), ("Dropout1d(0.4).eval()", X3),
]


@pytest.mark.parametrize("spec, data", MODULES, ids=[m[0] for m in MODULES])
def test_module_against_torch(spec, data):
    mt, mg = eval("torch.nn." + spec), eval("tg.nn." + spec)
    assert repr(mg) == repr(mt)
    xt, xg = torch.tensor(data, requires_grad=True), tg.tensor(data, requires_grad=True)
    yt, yg = mt(xt), mg(xg)
    assert yg.shape == tuple(yt.shape)
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    w = np.cos(np.arange(yt.numel())).reshape(tuple(yt.shape))
    (gt,) = torch.autograd.grad(yt, xt, torch.tensor(w))
    (gg,) = tg.autograd.grad(yg, xg, tg.tensor(w))
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-12, atol=1e-14)


def test_conv_transpose1d_module_against_torch():
    torch.manual_seed(0)
    mt = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2).double()
    mg = tg.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2).double()
    assert repr(mg) == repr(mt) and mg.weight.shape == tuple(mt.weight.shape)
    with torch.no_grad(), tg.no_grad():
        mg.weight.copy_(tg.tensor(mt.weight.numpy()))
        mg.bias.copy_(tg.tensor(mt.bias.numpy()))
    np.testing.assert_allclose(mg(tg.tensor(X3)).detach().numpy(), mt(torch.tensor(X3)).detach().numpy(), rtol=1e-12)
    out_t = mt(torch.tensor(X3), output_size=[16])
    out_g = mg(tg.tensor(X3), output_size=[16])
    assert out_g.shape == tuple(out_t.shape) == (2, 6, 16)
    np.testing.assert_allclose(out_g.detach().numpy(), out_t.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("fn, data, lead", [("dropout1d", X3, 2), ("dropout2d", X4, 2), ("dropout3d", X5, 2),
                                            ("dropout1d", X3[0], 1), ("dropout3d", X5[0], 1)])
def test_channel_dropout_zeroes_whole_channels(fn, data, lead):
    tg.manual_seed(1)
    x = tg.tensor(np.abs(data) + 1.0, requires_grad=True)
    y = getattr(tg.nn.functional, fn)(x, 0.5)
    ratio = (y / x).detach().numpy().reshape(tuple(x.shape[:lead]) + (-1,))
    assert set(np.unique(ratio)) <= {0.0, 2.0} and (ratio.std(-1) == 0).all()      # one draw per channel
    (g,) = tg.autograd.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), (y / x).detach().numpy())
    assert getattr(tg.nn.functional, fn)(x, 0.5, training=False) is x
    assert (getattr(tg.nn.functional, fn)(x, 1.0).detach().numpy() == 0).all()
    tg.manual_seed(1)
    np.testing.assert_array_equal(getattr(tg.nn.functional, fn)(x, 0.5).detach().numpy(), y.detach().numpy())


def test_channel_dropout_errors_and_warnings_as_torchs():
    with pytest.raises(RuntimeError) as want:
        torch.nn.functional.dropout1d(torch.ones(2, 3, 4, 5))
    with pytest.raises(RuntimeError) as got:
        tg.nn.functional.dropout1d(tg.ones(2, 3, 4, 5))
    assert str(got.value) == str(want.value)
    for m in (torch, tg):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
            m.nn.functional.dropout2d(m.ones(2, 3, 4, 5), 1.5)
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        torch.nn.functional.dropout2d(torch.ones(2, 3, 4))
    with warnings.catch_warnings(record=True) as wg:
        warnings.simplefilter("always")
        tg.nn.functional.dropout2d(tg.ones(2, 3, 4))
    assert [str(w.message) for w in wg] == [str(w.message) for w in wt]


def test_bilinear_against_torch():
    r = np.random.default_rng(2)
    x1, x2 = r.standard_normal((2, 5, 3)), r.standard_normal((2, 5, 4))
    mt = torch.nn.Bilinear(3, 4, 6).double()
    mg = tg.nn.Bilinear(3, 4, 6).double()
    assert repr(mg) == repr(mt) and list(mg.state_dict()) == list(mt.state_dict())
    bound = 1 / np.sqrt(3)
    assert (np.abs(mg.weight.detach().numpy()) <= bound).all() and mg.weight.detach().numpy().std() > 0.1
    with torch.no_grad(), tg.no_grad():
        mg.weight.copy_(tg.tensor(mt.weight.numpy()))
        mg.bias.copy_(tg.tensor(mt.bias.numpy()))
    ts = [torch.tensor(v, requires_grad=True) for v in (x1, x2)]
    gs = [tg.tensor(v, requires_grad=True) for v in (x1, x2)]
    yt, yg = mt(*ts), mg(*gs)
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    w = np.cos(np.arange(yt.numel())).reshape(tuple(yt.shape))
    want = torch.autograd.grad(yt, ts + [mt.weight, mt.bias], torch.tensor(w))
    got = tg.autograd.grad(yg, gs + [mg.weight, mg.bias], tg.tensor(w))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)

"""nn functions and layers on float16 and bfloat16 tensors against torch: refused where torch's CPU
kernel takes float and double alone (multi_margin_loss, multilabel_margin_loss, ctc_loss,
local_response_norm of a 4-d input: its avg_pool3d), else computed, the values within a few of the
dtype's ulps of torch's (both compute these in float32 and round)."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

def mk(m, dt, *shape):
    g = torch.Generator().manual_seed(0)
    return m.tensor(torch.rand(*shape, generator=g).tolist()).to(getattr(m, dt))
F = lambda m: m.nn.functional


def rnn(m, dt, cls):
    """A recurrent layer with torch's initial weights (each library draws its own)."""
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls)(3, 4)
    layer = ref if m is torch else getattr(m.nn, cls)(3, 4)
    if m is not torch:
        layer.load_state_dict({k: m.tensor(v.tolist()) for k, v in ref.state_dict().items()})
    return layer.to(getattr(m, dt))
CASES = {
 "multi_margin": lambda m, dt: F(m).multi_margin_loss(mk(m, dt, 3, 4), m.tensor([0, 1, 3])),
 "multilabel_margin": lambda m, dt: F(m).multilabel_margin_loss(mk(m, dt, 3, 4), m.tensor([[0, 1, -1, 0]]*3)),
 "avg_pool3d": lambda m, dt: F(m).avg_pool3d(mk(m, dt, 1, 2, 4, 4, 4), 2),
 "avg_pool2d": lambda m, dt: F(m).avg_pool2d(mk(m, dt, 1, 2, 4, 4), 2),
 "avg_pool1d": lambda m, dt: F(m).avg_pool1d(mk(m, dt, 1, 2, 4), 2),
 "max_pool3d": lambda m, dt: F(m).max_pool3d(mk(m, dt, 1, 2, 4, 4, 4), 2),
 "max_pool2d": lambda m, dt: F(m).max_pool2d(mk(m, dt, 1, 2, 4, 4), 2),
 "lrn3": lambda m, dt: F(m).local_response_norm(mk(m, dt, 1, 3, 4), 2),
 "lrn4": lambda m, dt: F(m).local_response_norm(mk(m, dt, 1, 3, 4, 4), 2),
 "adaptive_avg3d": lambda m, dt: F(m).adaptive_avg_pool3d(mk(m, dt, 1, 2, 4, 4, 4), 2),
 "adaptive_max3d": lambda m, dt: F(m).adaptive_max_pool3d(mk(m, dt, 1, 2, 4, 4, 4), 2),
 "adaptive_max2d": lambda m, dt: F(m).adaptive_max_pool2d(mk(m, dt, 1, 2, 4, 4), 2),
 "lp_pool2d": lambda m, dt: F(m).lp_pool2d(mk(m, dt, 1, 2, 4, 4), 2, 2),
 "conv3d": lambda m, dt: F(m).conv3d(mk(m, dt, 1, 2, 4, 4, 4), mk(m, dt, 3, 2, 2, 2, 2)),
 "conv_transpose3d": lambda m, dt: F(m).conv_transpose3d(mk(m, dt, 1, 2, 4, 4, 4), mk(m, dt, 2, 3, 2, 2, 2)),
 "conv2d": lambda m, dt: F(m).conv2d(mk(m, dt, 1, 2, 4, 4), mk(m, dt, 3, 2, 2, 2)),
 "conv_transpose2d": lambda m, dt: F(m).conv_transpose2d(mk(m, dt, 1, 2, 4, 4), mk(m, dt, 2, 3, 2, 2)),
 "conv1d": lambda m, dt: F(m).conv1d(mk(m, dt, 1, 2, 4), mk(m, dt, 3, 2, 2)),
 "ctc": lambda m, dt: F(m).ctc_loss(mk(m, dt, 4, 1, 3).log_softmax(2), m.tensor([[1, 2]]), m.tensor([4]), m.tensor([2])),
 "nll2d": lambda m, dt: F(m).nll_loss(mk(m, dt, 1, 3, 2, 2), m.tensor([[[0, 1], [2, 0]]])),
 "cross_entropy": lambda m, dt: F(m).cross_entropy(mk(m, dt, 3, 4), m.tensor([0, 1, 3])),
 "binary_cross_entropy": lambda m, dt: F(m).binary_cross_entropy(mk(m, dt, 3, 4), mk(m, dt, 3, 4)),
 "grid_sample": lambda m, dt: F(m).grid_sample(mk(m, dt, 1, 2, 4, 4), mk(m, dt, 1, 3, 3, 2) * 2 - 1, align_corners=False),
 "interp_bicubic": lambda m, dt: F(m).interpolate(mk(m, dt, 1, 2, 4, 4), scale_factor=2, mode="bicubic"),
 "interp_trilinear": lambda m, dt: F(m).interpolate(mk(m, dt, 1, 2, 4, 4, 4), scale_factor=2, mode="trilinear"),
 "interp_area": lambda m, dt: F(m).interpolate(mk(m, dt, 1, 2, 4, 4), size=3, mode="area"),
 "embedding_bag": lambda m, dt: F(m).embedding_bag(m.tensor([[0, 1], [2, 1]]), mk(m, dt, 4, 3), mode="max"),
 "pdist": lambda m, dt: F(m).pdist(mk(m, dt, 4, 3)),
 "cdist": lambda m, dt: m.cdist(mk(m, dt, 4, 3), mk(m, dt, 2, 3)),
 "unfold": lambda m, dt: F(m).unfold(mk(m, dt, 1, 2, 4, 4), 2),
 "fold": lambda m, dt: F(m).fold(mk(m, dt, 1, 8, 9), 4, 2),
 "pixel_shuffle": lambda m, dt: F(m).pixel_shuffle(mk(m, dt, 1, 4, 2, 2), 2),
 "rnn_tanh": lambda m, dt: rnn(m, dt, "RNN")(mk(m, dt, 2, 1, 3)),
 "lstm": lambda m, dt: rnn(m, dt, "LSTM")(mk(m, dt, 2, 1, 3)),
 "gru": lambda m, dt: rnn(m, dt, "GRU")(mk(m, dt, 2, 1, 3)),
 "max_unpool2d": lambda m, dt: F(m).max_unpool2d(*F(m).max_pool2d(mk(m, dt, 1, 1, 4, 4), 2, return_indices=True), 2),
 "rrelu": lambda m, dt: F(m).rrelu(mk(m, dt, 3, 4), training=False),
 "glu": lambda m, dt: F(m).glu(mk(m, dt, 3, 4)),
 "hardswish": lambda m, dt: F(m).hardswish(mk(m, dt, 3, 4)),
 "kl_div": lambda m, dt: F(m).kl_div(mk(m, dt, 3, 4), mk(m, dt, 3, 4), reduction="batchmean"),
 "smooth_l1": lambda m, dt: F(m).smooth_l1_loss(mk(m, dt, 3, 4), mk(m, dt, 3, 4)),
 "poisson_nll": lambda m, dt: F(m).poisson_nll_loss(mk(m, dt, 3, 4), mk(m, dt, 3, 4)),
 "gaussian_nll": lambda m, dt: F(m).gaussian_nll_loss(mk(m, dt, 3, 4), mk(m, dt, 3, 4), mk(m, dt, 3, 4)),
 "margin_ranking": lambda m, dt: F(m).margin_ranking_loss(mk(m, dt, 3), mk(m, dt, 3), m.tensor([1., -1., 1.]).to(getattr(m, dt))),
 "sdpa": lambda m, dt: F(m).scaled_dot_product_attention(mk(m, dt, 1, 2, 3, 4), mk(m, dt, 1, 2, 3, 4), mk(m, dt, 1, 2, 3, 4)),
}


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


def outcome(m, name, dt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outs = _flat(CASES[name](m, dt))
        except Exception as e:           # noqa: BLE001  (the type and message are compared)
            return f"{type(e).__name__}: {e}"
    return [(str(o.dtype).replace("torch.", ""), np.array(o.detach().double().tolist())) for o in outs]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nn_low_precision_as_torch(name, dt):
    want, got = outcome(torch, name, dt), outcome(tg, name, dt)
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    tol = 2e-2 if dt == "bfloat16" else 3e-3
    assert len(got) == len(want)
    for (dg, vg), (dw, vw) in zip(got, want):
        assert dg == dw and vg.shape == vw.shape
        np.testing.assert_allclose(vg, vw, rtol=tol, atol=tol)

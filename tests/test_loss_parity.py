"""Every loss of nn.functional against torch's, each reduction: values, the input's gradient
(float64) and the result's grad_fn name, over options users set (class weights, ignore_index,
label smoothing, probability targets, pos_weight, log targets, margins, full Poisson and
Gaussian terms)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tracegrad as tg
import tracegrad.nn.functional as GF

R = np.random.default_rng(0)
X = R.standard_normal((6, 5))
Y = R.integers(0, 5, 6)
Y[2] = 3
P, T, W = R.random((6, 5)), R.random((6, 5)), R.random(5) + 0.5
SIGN = np.sign(T - 0.5)
PROB = T / T.sum(1, keepdims=True)
LISTED = np.array([[3, 0, -1, 1, 2], [1, 1, -1, 2, 2], [4, 3, 2, 1, 0], [-1, 0, 1, 2, 3], [0, -1, -1, -1, -1],
                   [2, 2, 2, -1, 0]])

LOSSES = {
    "cross_entropy": lambda F, m, x, red: F.cross_entropy(x, m.tensor(Y), reduction=red),
    "cross_entropy_weight": lambda F, m, x, red: F.cross_entropy(x, m.tensor(Y), weight=m.tensor(W), reduction=red),
    "cross_entropy_ignore": lambda F, m, x, red: F.cross_entropy(x, m.tensor(Y), ignore_index=3, reduction=red),
    "cross_entropy_smooth": lambda F, m, x, red: F.cross_entropy(x, m.tensor(Y), label_smoothing=0.2, reduction=red),
    "cross_entropy_all": lambda F, m, x, red: F.cross_entropy(x, m.tensor(Y), weight=m.tensor(W), ignore_index=3,
                                                            label_smoothing=0.1, reduction=red),
    "cross_entropy_prob": lambda F, m, x, red: F.cross_entropy(x, m.tensor(PROB), reduction=red),
    "cross_entropy_prob_all": lambda F, m, x, red: F.cross_entropy(x, m.tensor(PROB), weight=m.tensor(W),
                                                                 label_smoothing=0.3, reduction=red),
    "nll_loss": lambda F, m, x, red: F.nll_loss(F.log_softmax(x, 1), m.tensor(Y), weight=m.tensor(W), ignore_index=1,
                                               reduction=red),
    "mse_loss": lambda F, m, x, red: F.mse_loss(x, m.tensor(T), reduction=red),
    "l1_loss": lambda F, m, x, red: F.l1_loss(x, m.tensor(T), reduction=red),
    "smooth_l1_loss": lambda F, m, x, red: F.smooth_l1_loss(x, m.tensor(T), beta=0.5, reduction=red),
    "huber_loss": lambda F, m, x, red: F.huber_loss(x, m.tensor(T), delta=0.7, reduction=red),
    "binary_cross_entropy": lambda F, m, x, red: F.binary_cross_entropy(m.sigmoid(x), m.tensor(T), weight=m.tensor(W),
                                                                       reduction=red),
    "bce_with_logits": lambda F, m, x, red: F.binary_cross_entropy_with_logits(x, m.tensor(T), pos_weight=m.tensor(W),
                                                                              reduction=red),
    "kl_div": lambda F, m, x, red: F.kl_div(F.log_softmax(x, 1), m.tensor(T),
                                           reduction="batchmean" if red == "mean" else red),
    "kl_div_log_target": lambda F, m, x, red: F.kl_div(F.log_softmax(x, 1), m.tensor(np.log(T)), reduction=red,
                                                      log_target=True),
    "soft_margin_loss": lambda F, m, x, red: F.soft_margin_loss(x, m.tensor(SIGN), reduction=red),
    "hinge_embedding_loss": lambda F, m, x, red: F.hinge_embedding_loss(x, m.tensor(SIGN), margin=0.5, reduction=red),
    "poisson_nll_loss": lambda F, m, x, red: F.poisson_nll_loss(x, m.tensor(T), reduction=red),
    "poisson_nll_loss_full": lambda F, m, x, red: F.poisson_nll_loss(x.exp(), m.tensor(T * 3), log_input=False,
                                                                    full=True, reduction=red),
    "gaussian_nll_loss": lambda F, m, x, red: F.gaussian_nll_loss(x, m.tensor(T), m.tensor(P + 0.1), reduction=red),
    "margin_ranking_loss": lambda F, m, x, red: F.margin_ranking_loss(x[:, 0], x[:, 1], m.tensor(SIGN[:, 0]),
                                                                     margin=0.1, reduction=red),
    "cosine_embedding_loss": lambda F, m, x, red: F.cosine_embedding_loss(x, x.flip(0), m.tensor(SIGN[:, 0]),
                                                                         margin=0.2, reduction=red),
    "triplet_margin_loss": lambda F, m, x, red: F.triplet_margin_loss(x, x.flip(0), x.roll(1, 0), margin=0.5,
                                                                     reduction=red),
    "multilabel_soft_margin_loss": lambda F, m, x, red: F.multilabel_soft_margin_loss(
        x, m.tensor((T > 0.5).astype(np.float64)), weight=m.tensor(W), reduction=red),
    "multi_margin_loss": lambda F, m, x, red: F.multi_margin_loss(x, m.tensor(Y), reduction=red),
    "multi_margin_loss_p2_weight": lambda F, m, x, red: F.multi_margin_loss(x, m.tensor(Y), p=2, margin=0.7,
                                                                           weight=m.tensor(W), reduction=red),
    "multi_margin_loss_unbatched": lambda F, m, x, red: F.multi_margin_loss(x[1], m.tensor(Y[1]), weight=m.tensor(W),
                                                                           reduction=red),
    # classes listed up to the first -1, a class listed twice, a row without one
    "multilabel_margin_loss": lambda F, m, x, red: F.multilabel_margin_loss(x, m.tensor(LISTED), reduction=red),
    "multilabel_margin_loss_unbatched": lambda F, m, x, red: F.multilabel_margin_loss(x[0], m.tensor(LISTED[0]),
                                                                                     reduction=red),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_value_gradient_and_node_against_torch(name, reduction):
    fn = LOSSES[name]
    xt, xg = torch.tensor(X, requires_grad=True), tg.tensor(X, requires_grad=True)
    want, got = fn(TF, torch, xt, reduction), fn(GF, tg, xg, reduction)
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    w = R.standard_normal(tuple(want.shape))
    (gt,) = torch.autograd.grad(want, xt, torch.tensor(w))
    (gg,) = tg.autograd.grad(got, xg, tg.tensor(w))
    np.testing.assert_allclose(gg.numpy(), gt.numpy(), rtol=1e-10, atol=1e-13)


def test_margin_losses_errors_and_modules_as_torchs():
    for fn in (lambda m: m.nn.functional.multi_margin_loss(m.tensor(X), m.tensor(Y), p=3),
               lambda m: m.nn.functional.multi_margin_loss(m.tensor(X), m.tensor(Y[:4])),
               lambda m: m.nn.functional.multilabel_margin_loss(m.tensor(X), m.tensor(LISTED[:, :3])),
               lambda m: m.nn.MultiMarginLoss(weight=m.ones(2, 2))):
        with pytest.raises(Exception) as want:
            fn(torch)
        with pytest.raises(type(want.value)) as got:
            fn(tg)
        assert str(got.value) == str(want.value)
    for make in (lambda m: m.nn.MultiMarginLoss(p=2, margin=0.5, weight=m.tensor(W), reduction="sum"),
                 lambda m: m.nn.MultiLabelMarginLoss(reduction="none")):
        tgt = (Y if isinstance(make(torch), torch.nn.MultiMarginLoss) else LISTED)
        want = make(torch)(torch.tensor(X), torch.tensor(tgt))
        got = make(tg)(tg.tensor(X), tg.tensor(tgt))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)

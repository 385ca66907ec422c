"""Recurrent and attention layers, the other common activations, losses, conv1d, group_norm and
interpolation: values and gradients equal torch's in float64, with the same parameters."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.functional as TF

TOL = dict(rtol=1e-10, atol=1e-12)


def arr(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def pair(a, req=True):
    return (tg.tensor(a, dtype=tg.float64, requires_grad=req), torch.tensor(a, dtype=torch.float64,
                                                                             requires_grad=req))


def close(a, b, tol=TOL):
    if b is None:
        assert a is None
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tol)


def compare_fn(fn_tg, fn_torch, *arrays, tol=TOL, seed_grad=1, grad_tol=None, grad_mask=None):
    """Values and the gradients of every input for sum(out * random seed)."""
    ins = [pair(a) for a in arrays]
    out_t = fn_tg(*[i[0] for i in ins])
    out_r = fn_torch(*[i[1] for i in ins])
    close(out_t, out_r, tol)
    seed = arr(*out_r.shape, seed=seed_grad)
    (out_t * tg.tensor(seed)).sum().backward()
    (out_r * torch.tensor(seed)).sum().backward()
    for i, (a, b) in enumerate(ins):
        if grad_mask is not None and grad_mask[i] is not None:
            m = grad_mask[i]
            np.testing.assert_allclose(a.grad.numpy()[m], b.grad.numpy()[m], **(grad_tol or tol))
        else:
            close(a.grad, b.grad, grad_tol or tol)


# -- activations ---------------------------------------------------------------------------------

SPECIAL = np.array([-7., -6., -3., -1., -0.5, 0., 0.5, 1., 3., 6., 7., 1e-3, -1e-3])

ACTS = [
    ("elu", {}), ("elu", {"alpha": 0.7}), ("celu", {"alpha": 1.3}), ("selu", {}), ("hardtanh", {}),
    ("hardtanh", {"min_val": -2.0, "max_val": 0.5}), ("relu6", {}), ("hardsigmoid", {}), ("hardswish", {}),
    ("softsign", {}), ("tanhshrink", {}), ("mish", {}), ("hardshrink", {"lambd": 0.5}),
    ("softshrink", {"lambd": 0.5}), ("logsigmoid", {}),
]


# torch's float64 gradients of these round a constant to float32 in its derivative formula (celu's
# 1 / alpha, hardsigmoid's 1 / 6): ours use the exact constant, so those gradients agree to float32's
# rounding of the constant; gradcheck holds ours to the true derivative
_F32_CONSTANT = {"celu": dict(rtol=1e-6, atol=1e-12), "hardsigmoid": dict(rtol=1e-7, atol=1e-12)}


@pytest.mark.parametrize("name,kw", ACTS, ids=[f"{n}{i}" for i, (n, _) in enumerate(ACTS)])
def test_activations_match_torch_values_and_gradients(name, kw):
    x = np.concatenate([arr(40, seed=3, scale=4), SPECIAL])
    compare_fn(lambda t: getattr(TF, name)(t, **kw), lambda t: getattr(torch.nn.functional, name)(t, **kw), x,
               grad_tol=_F32_CONSTANT.get(name))
    smooth = x[np.abs(np.abs(x) - 3) > 1e-2]          # away from the kinks, where the derivative exists
    smooth = smooth[(np.abs(smooth) > 1e-2) & (np.abs(np.abs(smooth) - 6) > 1e-2) &
                    (np.abs(np.abs(smooth) - 1) > 1e-2) & (np.abs(np.abs(smooth) - 0.5) > 1e-2)]
    assert tg.autograd.gradcheck(lambda t: getattr(TF, name)(t, **kw),
                                 (tg.tensor(smooth, dtype=tg.float64, requires_grad=True),))


def test_activation_modules_glu_prelu_softmin_threshold():
    x = arr(4, 6, seed=2, scale=2)
    compare_fn(lambda t: TF.glu(t, 1), lambda t: torch.nn.functional.glu(t, 1), x)
    compare_fn(lambda t: TF.softmin(t, 1), lambda t: torch.nn.functional.softmin(t, 1), x)
    compare_fn(lambda t: TF.threshold(t, 0.3, -2.0), lambda t: torch.nn.functional.threshold(t, 0.3, -2.0), x)
    w = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    compare_fn(lambda t, w: TF.prelu(t, w), lambda t, w: torch.nn.functional.prelu(t, w), x, w)
    for name in ("ELU", "SELU", "ReLU6", "Hardswish", "Mish", "Softsign", "Hardsigmoid", "Tanhshrink"):
        a, b = getattr(tnn, name)(), getattr(torch.nn, name)()
        xt, xr = pair(x)
        close(a(xt), b(xr))
    assert repr(tnn.Hardtanh(-2.0, 2.0)) == repr(torch.nn.Hardtanh(-2.0, 2.0))
    assert repr(tnn.ELU(alpha=0.5)) == repr(torch.nn.ELU(alpha=0.5))
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        TF.glu(tg.ones(3), 0)


# -- losses ------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_smooth_l1_huber_kl_div_match_torch(reduction):
    x, y = arr(5, 4, seed=1, scale=2), arr(5, 4, seed=2, scale=2)
    for beta in (1.0, 0.3, 0.0):
        compare_fn(lambda a, b: TF.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
                   lambda a, b: torch.nn.functional.smooth_l1_loss(a, b, reduction=reduction, beta=beta), x, y)
    for delta in (1.0, 0.5, 3.0):
        compare_fn(lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=delta),
                   lambda a, b: torch.nn.functional.huber_loss(a, b, reduction=reduction, delta=delta), x, y)
    logp = np.log(np.random.default_rng(3).dirichlet(np.ones(4), 5))
    q = np.random.default_rng(4).dirichlet(np.ones(4), 5)
    q[0, 1] = 0.0                                     # a zero target contributes 0, not nan
    red = "batchmean" if reduction == "mean" else reduction
    # d/dq of q log q is -inf at q = 0 (torch gives nan there): compared where the target is positive
    compare_fn(lambda a, b: TF.kl_div(a, b, reduction=red), lambda a, b: torch.nn.functional.kl_div(a, b, reduction=red),
               logp, q, grad_mask=[None, q > 0])
    compare_fn(lambda a, b: TF.kl_div(a, b, reduction=red, log_target=True),
               lambda a, b: torch.nn.functional.kl_div(a, b, reduction=red, log_target=True), logp, np.log(q + 0.1))


def test_cosine_similarity_and_pairwise_distance():
    x, y = arr(6, 5, seed=5), arr(6, 5, seed=6)
    compare_fn(lambda a, b: TF.cosine_similarity(a, b), lambda a, b: torch.nn.functional.cosine_similarity(a, b), x, y)
    compare_fn(lambda a, b: TF.cosine_similarity(a, b, dim=0),
               lambda a, b: torch.nn.functional.cosine_similarity(a, b, dim=0), x, y)
    compare_fn(lambda a, b: TF.pairwise_distance(a, b), lambda a, b: torch.nn.functional.pairwise_distance(a, b), x, y)
    for lib, nn in ((tg, tnn), (torch, torch.nn)):
        assert nn.SmoothL1Loss(beta=0.5).beta == 0.5 and nn.HuberLoss(delta=2.0).delta == 2.0


# -- conv1d, group_norm, interpolate ----------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2), dict(groups=2),
                                dict(padding="same")])
def test_conv1d_matches_torch(kw):
    x, w, b = arr(2, 4, 11, seed=1), arr(6, 4 // kw.get("groups", 1), 3, seed=2), arr(6, seed=3)
    compare_fn(lambda x, w, b: TF.conv1d(x, w, b, **kw), lambda x, w, b: torch.nn.functional.conv1d(x, w, b, **kw),
               x, w, b)


def test_conv1d_module_loads_torchs_weights():
    a, b = tnn.Conv1d(3, 5, 4, stride=2, padding=1, padding_mode="reflect", dtype=tg.float64), \
        torch.nn.Conv1d(3, 5, 4, stride=2, padding=1, padding_mode="reflect", dtype=torch.float64)
    a.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in b.state_dict().items()})
    xt, xr = pair(arr(2, 3, 9, seed=4))
    close(a(xt), b(xr))
    assert repr(a) == repr(b)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_matches_torch(groups):
    x, w, b = arr(3, 6, 4, 5, seed=1, scale=3), arr(6, seed=2), arr(6, seed=3)
    compare_fn(lambda x, w, b: TF.group_norm(x, groups, w, b), lambda x, w, b: torch.nn.functional.group_norm(
        x, groups, w, b), x, w, b)


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"), dict(size=(7, 5), mode="nearest"),
                                dict(size=(7, 3), mode="nearest-exact"),
                                dict(scale_factor=2, mode="bilinear", align_corners=False),
                                dict(size=(6, 9), mode="bilinear", align_corners=True),
                                dict(scale_factor=1.5, mode="bilinear"), dict(size=(3, 2), mode="bilinear")])
def test_interpolate_2d_matches_torch(kw):
    x = arr(2, 3, 4, 5, seed=7)
    compare_fn(lambda t: TF.interpolate(t, **kw), lambda t: torch.nn.functional.interpolate(t, **kw), x)


def test_interpolate_1d_linear_and_upsample_module():
    x = arr(2, 3, 6, seed=8)
    for kw in (dict(scale_factor=2, mode="linear"), dict(size=4, mode="linear", align_corners=True)):
        compare_fn(lambda t: TF.interpolate(t, **kw), lambda t: torch.nn.functional.interpolate(t, **kw), x)
    xt, xr = pair(arr(1, 2, 3, 3, seed=9))
    close(tnn.Upsample(scale_factor=2, mode="nearest")(xt), torch.nn.Upsample(scale_factor=2, mode="nearest")(xr))
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        TF.interpolate(xt, size=4, scale_factor=2)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        TF.interpolate(xt, scale_factor=2, align_corners=True)


# -- recurrent layers --------------------------------------------------------------------------------

def _twins(kind, *args, **kw):
    ours = getattr(tnn, kind)(*args, **kw, dtype=tg.float64)
    theirs = getattr(torch.nn, kind)(*args, **kw, dtype=torch.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k, v in ours.state_dict().items():
        assert tuple(v.shape) == tuple(theirs.state_dict()[k].shape), k
    ours.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _grads_equal(ours, theirs):
    for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == m
        close(p.grad, q.grad)


RNN_CASES = [
    ("RNN", dict(num_layers=1)), ("RNN", dict(num_layers=2, nonlinearity="relu", bidirectional=True)),
    ("LSTM", dict(num_layers=2)), ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(bias=False)), ("GRU", dict(num_layers=2, bidirectional=True)), ("GRU", dict(batch_first=True)),
]


@pytest.mark.parametrize("kind,kw", RNN_CASES, ids=[f"{k}{i}" for i, (k, _) in enumerate(RNN_CASES)])
@pytest.mark.parametrize("with_hx", [False, True])
def test_recurrent_layers_match_torch(kind, kw, with_hx):
    ours, theirs = _twins(kind, 3, 4, **kw)
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    shape = (2, 5, 3) if kw.get("batch_first") else (5, 2, 3)
    xt, xr = pair(arr(*shape, seed=1))
    args_t, args_r = [xt], [xr]
    hx = []
    if with_hx:
        h = pair(arr(layers * dirs, 2, 4, seed=2))
        hx.append(h)
        if kind == "LSTM":
            c = pair(arr(layers * dirs, 2, 4, seed=3))
            hx.append(c)
            args_t.append((h[0], c[0]))
            args_r.append((h[1], c[1]))
        else:
            args_t.append(h[0])
            args_r.append(h[1])
    out_t, st_t = ours(*args_t)
    out_r, st_r = theirs(*args_r)
    close(out_t, out_r)
    sts_t = st_t if kind == "LSTM" else (st_t,)
    sts_r = st_r if kind == "LSTM" else (st_r,)
    for a, b in zip(sts_t, sts_r):
        close(a, b)
    seed = arr(*out_r.shape, seed=9)
    loss_t = (out_t * tg.tensor(seed)).sum() + sum(s.sum() * 0.5 for s in sts_t)
    loss_r = (out_r * torch.tensor(seed)).sum() + sum(s.sum() * 0.5 for s in sts_r)
    loss_t.backward()
    loss_r.backward()
    close(xt.grad, xr.grad)
    for a, b in hx:
        close(a.grad, b.grad)
    _grads_equal(ours, theirs)


def test_unbatched_recurrent_input_and_cells():
    for kind in ("LSTM", "GRU", "RNN"):
        ours, theirs = _twins(kind, 3, 4)
        xt, xr = pair(arr(6, 3, seed=4))
        close(ours(xt)[0], theirs(xr)[0])
    for kind in ("RNNCell", "LSTMCell", "GRUCell"):
        ours, theirs = _twins(kind, 3, 4)
        xt, xr = pair(arr(5, 3, seed=5))
        a, b = ours(xt), theirs(xr)
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            close(u, v)
        xt1, xr1 = pair(arr(3, seed=6))
        a, b = ours(xt1), theirs(xr1)
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            close(u, v)


def test_recurrent_errors_and_warnings_match_torch():
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last recurrent layer"):
        tnn.LSTM(3, 4, dropout=0.5)
    m = tnn.GRU(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        m(tg.zeros(2, 1, 5))
    with pytest.raises(RuntimeError, match="Expected hidden size \\(1, 1, 4\\), got \\[1, 2, 4\\]"):
        m(tg.zeros(2, 1, 3), tg.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        tnn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        tnn.LSTM(3, 4, proj_size=4)
    torch_m = torch.nn.GRU(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        torch_m(torch.zeros(2, 1, 5))


def test_compiled_lstm_step_equals_eager():
    lstm = tnn.LSTM(3, 4, dtype=tg.float64)
    x = tg.tensor(arr(5, 2, 3, seed=7), dtype=tg.float64)

    def step(x):
        out, (h, c) = lstm(x)
        return (out * out).sum() + h.sum()

    eager = step(x)
    eager.backward()
    g_eager = [p.grad.numpy().copy() for p in lstm.parameters()]
    lstm.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # traced whole: no fallback warning
        compiled = tg.compile(step)(x)
    compiled.backward()
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-12)
    for p, g in zip(lstm.parameters(), g_eager):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-10, atol=1e-12)


# -- attention -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["plain", "bool_mask", "float_mask", "padding", "batch_first", "kvdim",
                                  "heads_weights", "unbatched"])
def test_multihead_attention_matches_torch(case):
    kw = dict(batch_first=True) if case == "batch_first" else dict(kdim=5, vdim=3) if case == "kvdim" else {}
    ours, theirs = _twins("MultiheadAttention", 8, 2, **kw)
    L, S, N = 4, 6, 3
    if case == "unbatched":
        q, k, v = arr(L, 8, seed=1), arr(S, 8, seed=2), arr(S, 8, seed=3)
    elif case == "batch_first":
        q, k, v = arr(N, L, 8, seed=1), arr(N, S, 8, seed=2), arr(N, S, 8, seed=3)
    else:
        q, k, v = arr(L, N, 8, seed=1), arr(S, N, kw.get("kdim", 8), seed=2), arr(S, N, kw.get("vdim", 8), seed=3)
    qs, ks, vs = pair(q), pair(k), pair(v)
    extra_t, extra_r = {}, {}
    if case == "bool_mask":
        m = np.triu(np.ones((L, S), bool), 1)
        extra_t["attn_mask"], extra_r["attn_mask"] = tg.tensor(m), torch.tensor(m)
    if case == "float_mask":
        m = arr(L, S, seed=4)
        extra_t["attn_mask"], extra_r["attn_mask"] = tg.tensor(m), torch.tensor(m)
    if case == "padding":
        m = np.zeros((N, S), bool)
        m[0, -2:] = True
        extra_t["key_padding_mask"], extra_r["key_padding_mask"] = tg.tensor(m), torch.tensor(m)
    if case == "heads_weights":
        extra_t["average_attn_weights"] = extra_r["average_attn_weights"] = False
    out_t, w_t = ours(qs[0], ks[0], vs[0], **extra_t)
    out_r, w_r = theirs(qs[1], ks[1], vs[1], **extra_r)
    close(out_t, out_r)
    close(w_t, w_r)
    seed = arr(*out_r.shape, seed=8)
    ((out_t * tg.tensor(seed)).sum() + w_t.sum()).backward()
    ((out_r * torch.tensor(seed)).sum() + w_r.sum()).backward()
    for a, b in (qs, ks, vs):
        close(a.grad, b.grad)
    _grads_equal(ours, theirs)


@pytest.mark.parametrize("kw", [dict(), dict(norm_first=True, activation="gelu"), dict(batch_first=True)])
def test_transformer_encoder_layer_matches_torch(kw):
    ours, theirs = _twins("TransformerEncoderLayer", 8, 2, dim_feedforward=16, **kw)
    ours.eval()
    theirs.eval()
    x = arr(3, 5, 8, seed=1)
    mask = np.triu(np.ones((5, 5) if kw.get("batch_first") else (3, 3), bool), 1)
    xt, xr = pair(x)
    out_t = ours(xt, src_mask=tg.tensor(mask))
    out_r = theirs(xr, src_mask=torch.tensor(mask))
    close(out_t, out_r)
    out_t.sum().backward()
    out_r.sum().backward()
    close(xt.grad, xr.grad)
    _grads_equal(ours, theirs)


def test_transformer_encoder_stacks_copies():
    layer = tnn.TransformerEncoderLayer(8, 2, 16)
    enc = tnn.TransformerEncoder(layer, 3)
    assert len(enc.layers) == 3 and enc.layers[0] is not enc.layers[1]
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    np.testing.assert_array_equal(enc.layers[0].linear1.weight.detach().numpy(),
                                  enc.layers[2].linear1.weight.detach().numpy())


@pytest.mark.parametrize("kw", [dict(), dict(is_causal=True), dict(scale=0.3), dict(mask="bool"),
                                dict(mask="float"), dict(enable_gqa=True)])
def test_scaled_dot_product_attention_matches_torch(kw):
    kw = dict(kw)
    mask = kw.pop("mask", None)
    hk = 1 if kw.get("enable_gqa") else 2
    q, k, v = arr(2, 2, 4, 3, seed=1), arr(2, hk, 5, 3, seed=2), arr(2, hk, 5, 3, seed=3)
    m = None
    if mask == "bool":
        m = np.random.default_rng(5).random((4, 5)) > 0.3
        m[:, 0] = True
    elif mask == "float":
        m = arr(4, 5, seed=6)
    ins = [pair(a) for a in (q, k, v)]
    out_t = TF.scaled_dot_product_attention(*[i[0] for i in ins], attn_mask=None if m is None else tg.tensor(m), **kw)
    out_r = torch.nn.functional.scaled_dot_product_attention(*[i[1] for i in ins],
                                                             attn_mask=None if m is None else torch.tensor(m), **kw)
    close(out_t, out_r)
    out_t.sum().backward()
    out_r.sum().backward()
    for a, b in ins:
        close(a.grad, b.grad)

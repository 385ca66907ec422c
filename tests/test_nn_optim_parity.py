"""tracegrad.nn and tracegrad.optim against torch: corners of modules, losses and optimizers."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def _close(a, b, **kw):
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **kw)


def test_kl_div_negative_target_is_nan_and_target_gradient_as_xlogy():
    # torch: xlogy(target, target) - target * input, so a negative target gives NaN and the
    # target's gradient is xlogy's (NaN at 0 and below)
    x = np.array([[0.3, -0.2], [0.1, 0.5]])
    t = np.array([[-0.5, 0.0], [0.2, 1.0]])
    out = {}
    for lib in (torch, tg):
        a = lib.tensor(x, requires_grad=True)
        b = lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.kl_div(a, b, reduction="none")
        loss.sum().backward()
        out[lib] = (loss, a.grad, b.grad)
    for p, q in zip(out[torch], out[tg]):
        _close(p, q, rtol=1e-12, atol=0, equal_nan=True)


def _copy_state(tm, gm):
    return gm.load_state_dict({k: tg.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def test_instance_norm_tracking_stats_has_num_batches_tracked():
    # torch's InstanceNorm (a _NormBase) registers num_batches_tracked with running stats, so its
    # state_dict loads strictly; instance norm never increments it
    tm = torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double()
    gm = tg.nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double()
    assert list(gm.state_dict()) == list(tm.state_dict())
    _copy_state(tm, gm)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    _close(tm(torch.tensor(x)), gm(tg.tensor(x)), rtol=1e-12, atol=1e-12)
    for name, b in tm.named_buffers():
        _close(b, dict(gm.named_buffers())[name], rtol=1e-12, atol=1e-12)
    assert gm.num_batches_tracked.dtype == tg.int64 and int(gm.num_batches_tracked) == 0
    assert tg.nn.InstanceNorm1d(3).num_batches_tracked is None
    assert list(tg.nn.InstanceNorm1d(3).state_dict()) == list(torch.nn.InstanceNorm1d(3).state_dict())


def _extra_state_module(lib):
    class WithExtra(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.extra = {"calls": 3}

        def get_extra_state(self):
            return dict(self.extra)

        def set_extra_state(self, state):
            self.extra = state
    return WithExtra


def test_extra_state_saved_and_loaded():
    # torch: a module overriding get_extra_state saves its value under '_extra_state'; one
    # overriding set_extra_state gets it back from load_state_dict (missing key when strict)
    for lib in (torch, tg):
        cls = _extra_state_module(lib)
        m = lib.nn.Sequential(cls())
        sd = m.state_dict()
        assert list(sd) == ["0._extra_state", "0.lin.weight", "0.lin.bias"]
        assert sd["0._extra_state"] == {"calls": 3}
        n = lib.nn.Sequential(cls())
        sd["0._extra_state"] = {"calls": 7}
        assert n.load_state_dict(sd).missing_keys == []
        assert n[0].extra == {"calls": 7}
        del sd["0._extra_state"]
        r = n.load_state_dict(sd, strict=False)
        assert r.missing_keys == ["0._extra_state"] and r.unexpected_keys == []
        try:
            n.load_state_dict(sd)
        except RuntimeError as e:
            assert 'Missing key(s) in state_dict: "0._extra_state"' in str(e)
        else:
            raise AssertionError("strict load without the extra state should fail")
        plain = lib.nn.Sequential(lib.nn.Linear(2, 2))
        res = plain.load_state_dict({"0.weight": lib.zeros(2, 2), "0.bias": lib.zeros(2), "0._extra_state": 1},
                                    strict=False)
        assert res.unexpected_keys == ["0._extra_state"]
        try:
            plain.load_state_dict({"0.weight": lib.zeros(2, 2), "0.bias": lib.zeros(2), "0._extra_state": 1})
        except RuntimeError as e:
            assert 'Unexpected key(s) in state_dict: "0._extra_state"' in str(e)
        else:
            raise AssertionError("strict load of an unexpected extra state should fail")


def test_sdpa_fully_masked_row_is_zero_with_finite_gradients():
    # torch's math attention uses _safe_softmax: a query row whose mask is all False (or all
    # -inf) gets zeros and zero gradients, not NaN
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 4))
    keep = np.array([[False] * 6] + [[True] * 6] * 2 + [[False] * 3 + [True] * 3] * 2)
    additive = np.where(keep, 0.0, -np.inf)
    w = rng.standard_normal((2, 5, 4))
    for mask in (keep, additive):
        res = []
        for lib in (torch, tg):
            ins = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
            m = lib.tensor(mask, requires_grad=mask.dtype != bool)
            out = lib.nn.functional.scaled_dot_product_attention(*ins, attn_mask=m)
            (out * lib.tensor(w)).sum().backward()
            res.append([out] + [t.grad for t in ins] + ([m.grad] if mask.dtype != bool else []))
        for a, b in zip(*res):
            _close(a, b, rtol=1e-10, atol=1e-12)


def test_multihead_attention_fully_masked_row_without_weights():
    # torch's MultiheadAttention: need_weights=False goes through scaled_dot_product_attention
    # (zeros for a query that may attend to nothing); need_weights=True keeps softmax's NaN
    rng = np.random.default_rng(1)
    tm = torch.nn.MultiheadAttention(4, 2).double()
    gm = tg.nn.MultiheadAttention(4, 2).double()
    _copy_state(tm, gm)
    x = rng.standard_normal((3, 2, 4))
    masks = dict(key_padding_mask=np.array([[True] * 3, [False, True, False]]),
                 attn_mask=np.array([[True] * 3, [False, False, True], [False] * 3]))
    for need_weights in (False, True):
        for name, mask in masks.items():
            res = []
            for lib, mod in ((torch, tm), (tg, gm)):
                xx = lib.tensor(x, requires_grad=True)
                out, _ = mod(xx, xx, xx, need_weights=need_weights, **{name: lib.tensor(mask)})
                out.sum().backward()
                res.append((out, xx.grad))
            for a, b in zip(*res):
                _close(a, b, rtol=1e-10, atol=1e-12, equal_nan=True)


def test_interpolate_antialias_is_not_silently_ignored():
    # torch: antialias only with bilinear/bicubic/lanczos on 4-D input (ValueError otherwise);
    # tracegrad has no antialiased kernels, so it refuses rather than return plain interpolation
    import pytest
    for lib in (torch, tg):
        with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear, bicubic"):
            lib.nn.functional.interpolate(lib.ones(1, 1, 4), scale_factor=0.5, mode="linear", antialias=True)
    with pytest.raises(NotImplementedError, match="antialias"):
        tg.nn.functional.interpolate(tg.ones(1, 1, 8, 8), scale_factor=0.4, mode="bilinear", antialias=True)
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 6))
    _close(torch.nn.functional.interpolate(torch.tensor(x), scale_factor=0.5, mode="bilinear", antialias=False),
           tg.nn.functional.interpolate(tg.tensor(x), scale_factor=0.5, mode="bilinear", antialias=False),
           rtol=1e-12, atol=1e-12)


def test_sequential_pop():
    # torch's Sequential.pop(key): the module (a Sequential for a slice), removed and renumbered
    for lib in (torch, tg):
        a, b, c = lib.nn.ReLU(), lib.nn.Tanh(), lib.nn.Sigmoid()
        s = lib.nn.Sequential(a, b, c)
        assert s.pop(1) is b
        assert [n for n, _ in s.named_children()] == ["0", "1"] and s[1] is c
        s.append(b)
        popped = s.pop(slice(0, 2))
        assert type(popped).__name__ == "Sequential" and list(popped) == [a, c] and list(s) == [b]


@pytest.mark.parametrize("momentum, wd, nesterov, dampening",
                         [(0.0, 0.0, False, 0.0), (0.0, 0.01, False, 0.0), (0.9, 0.01, False, 0.0),
                          (0.9, 0.01, True, 0.0), (0.8, 0.02, False, 0.3)])
def test_sgd_on_bfloat16_parameters_rounds_as_torchs_ops(momentum, wd, nesterov, dampening):
    """torch's bfloat16 SGD rounds what each op writes (the first momentum buffer, grad + wd * p,
    buf * momentum) and takes add's alpha (-lr, wd, 1 - dampening) as a bfloat16 number; one
    rounding in float32 at the end, with alpha in float32, left 8-29 of 200 parameters a bfloat16
    step off after the first step, and half of them after ten."""
    res = []
    for lib in (torch, tg):
        rs = np.random.RandomState(0)
        p = lib.tensor(rs.randn(200).astype(np.float32), dtype=lib.bfloat16, requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1, momentum=momentum, weight_decay=wd, nesterov=nesterov, dampening=dampening)
        steps = []
        for _ in range(10):
            p.grad = lib.tensor(rs.randn(200).astype(np.float32), dtype=lib.bfloat16)
            opt.step()
            steps.append(p.detach().float().numpy().copy())
        res.append(steps)
    for k, (t, g) in enumerate(zip(*res)):
        off = t != g
        # what is left: a fused multiply-add in torch's float32 arithmetic before its rounding
        assert off.sum() <= 5, f"step {k}: {int(off.sum())} of 200 differ"
        np.testing.assert_allclose(g, t, rtol=2 ** -6, atol=2 ** -8)      # a few bfloat16 steps at most

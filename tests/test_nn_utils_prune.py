"""torch.nn.utils.prune, the conv/linear-batch-norm fusion, skip_init and Module.share_memory:
masks equal torch's exactly where pruning is deterministic (by magnitude, ties included),
`weight_orig`/`weight_mask`/forward pre-hook as torch's, gradients through the mask, and
torch's errors."""

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as tprune

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.utils.prune as prune


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def ties(*shape, seed=0, levels=3):
    """Weights of few distinct magnitudes (and signs): many ties at any k."""
    rng = np.random.default_rng(seed)
    return rng.integers(-levels, levels + 1, shape).astype(np.float64)


def twin(make_tg, make_torch, weight):
    m_t, m_r = make_tg(), make_torch()
    bias = np.round(arr(*m_r.bias.shape, seed=99) * 2)
    with torch.no_grad():
        m_r.weight.copy_(torch.tensor(weight))
        m_r.bias.copy_(torch.tensor(bias))
    with tg.no_grad():
        m_t.weight.copy_(tg.tensor(weight))
        m_t.bias.copy_(tg.tensor(bias))
    return m_t, m_r


def linear_pair(weight):
    o, i = weight.shape
    return twin(lambda: tnn.Linear(i, o, dtype=tg.float64), lambda: torch.nn.Linear(i, o, dtype=torch.float64),
                weight)


def conv_pair(weight):
    o, i, kh, kw = weight.shape
    return twin(lambda: tnn.Conv2d(i, o, (kh, kw), dtype=tg.float64),
                lambda: torch.nn.Conv2d(i, o, (kh, kw), dtype=torch.float64), weight)


def same_mask(m_t, m_r, name="weight"):
    np.testing.assert_array_equal(getattr(m_t, name + "_mask").numpy(), getattr(m_r, name + "_mask").numpy())
    np.testing.assert_array_equal(getattr(m_t, name).detach().numpy(), getattr(m_r, name).detach().numpy())


def names(m):
    return [n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()]


@pytest.mark.parametrize("amount", [0, 1, 5, 0.3, 0.5, 0.9, 1.0, 47])
@pytest.mark.parametrize("make", [lambda s: arr(8, 6, seed=s), lambda s: ties(8, 6, seed=s),
                                  lambda s: ties(8, 6, seed=s, levels=1)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_l1_unstructured_mask_equals_torch_ties_included(amount, make, seed):
    m_t, m_r = linear_pair(make(seed))
    prune.l1_unstructured(m_t, "weight", amount)
    tprune.l1_unstructured(m_r, "weight", amount)
    same_mask(m_t, m_r)
    assert names(m_t) == names(m_r) == (["bias", "weight_orig"], ["weight_mask"])
    assert isinstance(m_t.weight_orig, tnn.Parameter) and not isinstance(m_t.weight, tnn.Parameter)


def test_l1_unstructured_large_tensor_with_ties_uses_torch_selection():
    # big enough for torch's partial_sort path (k * 64 <= n) and its nth_element path
    for amount in (3, 10, 0.4):
        m_t, m_r = conv_pair(ties(16, 8, 3, 3, seed=7, levels=2))
        prune.l1_unstructured(m_t, "weight", amount)
        tprune.l1_unstructured(m_r, "weight", amount)
        same_mask(m_t, m_r)


@pytest.mark.parametrize("n", [1, 2, 3, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("amount", [1, 0.5, 0.25])
def test_ln_structured_mask_equals_torch(n, dim, amount):
    for w in (arr(6, 4, 3, 3, seed=3), ties(6, 4, 3, 3, seed=3, levels=1)):
        w[1] = w[3]                         # equal channels along dim 0
        w[:, 2] = w[:, 0]                   # and along dim 1
        m_t, m_r = conv_pair(w)
        prune.ln_structured(m_t, "weight", amount, n, dim)
        tprune.ln_structured(m_r, "weight", amount, n, dim)
        same_mask(m_t, m_r)


def test_iterative_pruning_builds_a_container_as_torch():
    w = ties(10, 8, seed=4)
    m_t, m_r = linear_pair(w)
    for fn_t, fn_r in ((lambda m: prune.l1_unstructured(m, "weight", 0.3),
                        lambda m: tprune.l1_unstructured(m, "weight", 0.3)),
                       (lambda m: prune.ln_structured(m, "weight", 2, 1, 0),
                        lambda m: tprune.ln_structured(m, "weight", 2, 1, 0)),
                       (lambda m: prune.l1_unstructured(m, "weight", 7),
                        lambda m: tprune.l1_unstructured(m, "weight", 7)),
                       (lambda m: prune.ln_structured(m, "weight", 0.5, 2, 1),
                        lambda m: tprune.ln_structured(m, "weight", 0.5, 2, 1))):
        fn_t(m_t)
        fn_r(m_r)
        same_mask(m_t, m_r)
    hooks = list(m_t._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == 4


def test_global_unstructured_equals_torch():
    ws = [ties(6, 5, seed=5), ties(4, 6, seed=6), arr(3, 4, seed=7).round()]
    pairs = [linear_pair(w) for w in ws]
    prune.l1_unstructured(pairs[0][0], "weight", 3)          # an earlier mask joins the global one
    tprune.l1_unstructured(pairs[0][1], "weight", 3)
    prune.global_unstructured([(p[0], "weight") for p in pairs] + [(pairs[1][0], "bias")],
                              pruning_method=prune.L1Unstructured, amount=0.4)
    tprune.global_unstructured([(p[1], "weight") for p in pairs] + [(pairs[1][1], "bias")],
                               pruning_method=tprune.L1Unstructured, amount=0.4)
    for m_t, m_r in pairs:
        same_mask(m_t, m_r)
    same_mask(pairs[1][0], pairs[1][1], "bias")


def test_importance_scores_and_custom_mask_and_identity():
    w = arr(5, 4, seed=8)
    scores = ties(5, 4, seed=9)
    m_t, m_r = linear_pair(w)
    prune.l1_unstructured(m_t, "weight", 6, importance_scores=tg.tensor(scores))
    tprune.l1_unstructured(m_r, "weight", 6, importance_scores=torch.tensor(scores))
    same_mask(m_t, m_r)
    prune.ln_structured(m_t, "weight", 1, 2, 0, importance_scores=tg.tensor(scores))
    tprune.ln_structured(m_r, "weight", 1, 2, 0, importance_scores=torch.tensor(scores))
    same_mask(m_t, m_r)
    mask = (arr(5, 4, seed=10) > 0).astype(np.float64)
    prune.custom_from_mask(m_t, "weight", tg.tensor(mask))
    tprune.custom_from_mask(m_r, "weight", torch.tensor(mask))
    same_mask(m_t, m_r)
    m_t, m_r = linear_pair(w)
    prune.identity(m_t, "bias")
    tprune.identity(m_r, "bias")
    same_mask(m_t, m_r, "bias")
    assert names(m_t) == names(m_r)


def test_forward_pre_hook_recomputes_and_gradient_goes_through_the_mask():
    w = ties(4, 6, seed=11)
    m_t, m_r = linear_pair(w)
    prune.l1_unstructured(m_t, "weight", 0.5)
    tprune.l1_unstructured(m_r, "weight", 0.5)
    with tg.no_grad():
        m_t.weight_orig.add_(1.0)
    with torch.no_grad():
        m_r.weight_orig.add_(1.0)
    x = arr(3, 6, seed=12)
    out_t, out_r = m_t(tg.tensor(x)), m_r(torch.tensor(x))
    np.testing.assert_allclose(out_t.detach().numpy(), out_r.detach().numpy(), rtol=1e-12)
    same_mask(m_t, m_r)
    (out_t ** 2).sum().backward()
    (out_r ** 2).sum().backward()
    np.testing.assert_allclose(m_t.weight_orig.grad.numpy(), m_r.weight_orig.grad.numpy(), rtol=1e-12)
    assert (m_t.weight_orig.grad.numpy()[m_t.weight_mask.numpy() == 0] == 0).all()


def test_pruned_module_under_compile_runs_eagerly_with_torch_numbers():
    # the hook rebinds module.weight before every forward, which a program's later calls would not
    # do: compile falls back to eager (as for weight_norm), saying why
    w = ties(4, 6, seed=13)
    m_t, m_r = linear_pair(w)
    prune.l1_unstructured(m_t, "weight", 0.5)
    tprune.l1_unstructured(m_r, "weight", 0.5)

    @tg.compile
    def loss(x):
        return (m_t(x) ** 2).sum()

    x = arr(3, 6, seed=14)
    with pytest.warns(UserWarning, match="pruning's hook sets Linear.weight"):
        out = loss(tg.tensor(x))
    out.backward()
    ref = (m_r(torch.tensor(x)) ** 2).sum()
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(m_t.weight_orig.grad.numpy(), m_r.weight_orig.grad.numpy(), rtol=1e-12)


def test_remove_makes_pruning_permanent_and_is_pruned():
    w = ties(4, 6, seed=15)
    m_t, m_r = linear_pair(w)
    seq_t = tnn.Sequential(m_t)
    assert not prune.is_pruned(seq_t)
    prune.l1_unstructured(m_t, "weight", 0.5)
    tprune.l1_unstructured(m_r, "weight", 0.5)
    assert prune.is_pruned(seq_t)
    prune.remove(m_t, "weight")
    tprune.remove(m_r, "weight")
    assert not prune.is_pruned(seq_t)
    assert names(m_t) == names(m_r) == (["bias", "weight"], [])
    assert isinstance(m_t.weight, tnn.Parameter) and len(m_t._forward_pre_hooks) == 0
    np.testing.assert_array_equal(m_t.weight.detach().numpy(), m_r.weight.detach().numpy())
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(m_t, "weight")


def test_random_pruning_counts():
    m = tnn.Linear(10, 8)
    prune.random_unstructured(m, "weight", 0.3)
    assert int((m.weight_mask == 0).sum()) == 24
    assert set(np.unique(m.weight_mask.numpy())) == {0.0, 1.0}
    np.testing.assert_array_equal(m.weight.detach().numpy(), m.weight_orig.detach().numpy() * m.weight_mask.numpy())
    c = tnn.Conv2d(4, 6, 3)
    prune.random_structured(c, "weight", 2, dim=0)
    per_channel = c.weight_mask.numpy().reshape(6, -1)
    assert (per_channel.min(1) == per_channel.max(1)).all() and int((per_channel[:, 0] == 0).sum()) == 2
    prune.random_unstructured(c, "weight", 10)      # on what is left: 10 more zeros
    assert int((c.weight_mask == 0).sum()) == 2 * 36 + 10


@pytest.mark.parametrize("call", [
    lambda P, m: P.l1_unstructured(m, "weight", -1),
    lambda P, m: P.l1_unstructured(m, "weight", 1.5),
    lambda P, m: P.l1_unstructured(m, "weight", "half"),
    lambda P, m: P.l1_unstructured(m, "weight", 100),
    lambda P, m: P.ln_structured(m, "bias", 1, 2, 0),
    lambda P, m: P.ln_structured(m, "weight", 1, 2, 3),
    lambda P, m: P.random_structured(m, "weight", 9, 0),
    lambda P, m: P.remove(m, "weight"),
    lambda P, m: P.global_unstructured([(m, "weight")], pruning_method=P.LnStructured, amount=1, n=2, dim=0),
    lambda P, m: P.global_unstructured(5, pruning_method=P.L1Unstructured, amount=1),
])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as r:
        call(tprune, torch.nn.Linear(4, 3))
    with pytest.raises(type(r.value)) as t:
        call(prune, tnn.Linear(4, 3))
    msg_r, msg_t = str(r.value), str(t.value)
    if "Module" in msg_r or "method" in msg_r:          # (torch's messages print its own module and class)
        msg_r, msg_t = msg_r.split("(")[0].split("<")[0], msg_t.split("(")[0].split("<")[0]
    assert msg_t == msg_r


def test_failed_pruning_puts_the_parameter_back():
    m_t, m_r = tnn.Linear(4, 3), torch.nn.Linear(4, 3)
    for P, m in ((prune, m_t), (tprune, m_r)):
        with pytest.raises(ValueError):
            P.l1_unstructured(m, "weight", 100)
    assert names(m_t) == names(m_r) == (["bias", "weight"], []) and not prune.is_pruned(m_t)


# == fusion ========================================================================================================

def _copy(m_t, m_r):
    m_t.load_state_dict({k: tg.tensor(v.detach().numpy().copy()) for k, v in m_r.state_dict().items()})


def _trained_bn(bn_r, shape):
    bn_r.train()
    with torch.no_grad():
        for s in range(3):
            bn_r(torch.tensor(arr(*shape, seed=20 + s) * 2 + 1))
        if bn_r.affine:
            bn_r.weight.copy_(torch.tensor(arr(bn_r.num_features, seed=30)))
            bn_r.bias.copy_(torch.tensor(arr(bn_r.num_features, seed=31)))
    return bn_r.eval()


@pytest.mark.parametrize("conv, bn, shape, transpose", [
    ("Conv2d(3, 4, 3)", "BatchNorm2d(4)", (2, 3, 6, 6), False),
    ("Conv2d(3, 4, 3, bias=False)", "BatchNorm2d(4, affine=False)", (2, 3, 6, 6), False),
    ("Conv3d(2, 4, 2, groups=2)", "BatchNorm3d(4)", (2, 2, 4, 4, 4), False),
    ("Conv1d(3, 5, 2)", "BatchNorm1d(5)", (2, 3, 7), False),
    ("ConvTranspose2d(3, 4, 3, stride=2)", "BatchNorm2d(4)", (2, 3, 4, 4), True),
])
def test_fuse_conv_bn_eval_matches_torch(conv, bn, shape, transpose):
    c_r, c_t = eval(f"torch.nn.{conv}").double().eval(), eval(f"tnn.{conv}").double().eval()
    _copy(c_t, c_r)
    x = torch.tensor(arr(*shape, seed=40))
    bn_r = _trained_bn(eval(f"torch.nn.{bn}").double(), tuple(c_r(x).shape))
    bn_t = eval(f"tnn.{bn}").double().eval()
    _copy(bn_t, bn_r)
    f_r = torch.nn.utils.fuse_conv_bn_eval(c_r, bn_r, transpose=transpose)
    f_t = tnn.utils.fuse_conv_bn_eval(c_t, bn_t, transpose=transpose)
    assert type(f_t) is type(c_t) and f_t is not c_t
    assert isinstance(f_t.weight, tnn.Parameter) and isinstance(f_t.bias, tnn.Parameter)
    for k in ("weight", "bias"):
        np.testing.assert_allclose(getattr(f_t, k).detach().numpy(), getattr(f_r, k).detach().numpy(), rtol=1e-12)
    xt = tg.tensor(x.numpy())
    np.testing.assert_allclose(f_t(xt).detach().numpy(), bn_t(c_t(xt)).detach().numpy(), rtol=1e-10, atol=1e-12)


def test_fuse_linear_bn_eval_and_errors():
    l_r, l_t = torch.nn.Linear(3, 4).double().eval(), tnn.Linear(3, 4).double().eval()
    _copy(l_t, l_r)
    bn_r = _trained_bn(torch.nn.BatchNorm1d(4).double(), (5, 4))
    bn_t = tnn.BatchNorm1d(4).double().eval()
    _copy(bn_t, bn_r)
    f_r, f_t = torch.nn.utils.fuse_linear_bn_eval(l_r, bn_r), tnn.utils.fuse_linear_bn_eval(l_t, bn_t)
    for k in ("weight", "bias"):
        np.testing.assert_allclose(getattr(f_t, k).detach().numpy(), getattr(f_r, k).detach().numpy(), rtol=1e-12)
    w_r = torch.nn.utils.fuse_conv_bn_weights(l_r.weight, None, bn_r.running_mean, bn_r.running_var, 1e-3, None,
                                              None)
    w_t = tnn.utils.fuse_conv_bn_weights(l_t.weight, None, bn_t.running_mean, bn_t.running_var, 1e-3, None, None)
    for a, b in zip(w_t, w_r):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
        assert a.requires_grad == b.requires_grad
    for call in (lambda U, nn: U.fuse_linear_bn_eval(nn.Linear(3, 4).eval(), nn.BatchNorm1d(4)),
                 lambda U, nn: U.fuse_linear_bn_eval(nn.Linear(3, 4).eval(), nn.BatchNorm1d(3).eval()),
                 lambda U, nn: U.fuse_conv_bn_eval(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4).eval()),
                 lambda U, nn: U.fuse_conv_bn_eval(nn.Conv2d(3, 4, 1).eval(),
                                                   nn.BatchNorm2d(4, track_running_stats=False).eval())):
        with pytest.raises(AssertionError) as r:
            call(torch.nn.utils, torch.nn)
        with pytest.raises(AssertionError) as t:
            call(tnn.utils, tnn)
        assert str(t.value) == str(r.value)


# == skip_init, share_memory ==========================================================================================

def test_skip_init_and_share_memory():
    tg.manual_seed(3)
    expected = tg.randn(5)
    tg.manual_seed(3)
    m = tnn.utils.skip_init(tnn.Linear, 6, 4, bias=True)
    np.testing.assert_array_equal(tg.randn(5).numpy(), expected.numpy())   # it draws no random numbers
    assert type(m) is tnn.Linear and tuple(m.weight.shape) == (4, 6) and tuple(m.bias.shape) == (4,)
    assert isinstance(m.weight, tnn.Parameter) and m.weight.requires_grad
    c = tnn.utils.skip_init(tnn.Conv3d, 2, 3, 2, dtype=tg.float64)
    assert c.weight.dtype == tg.float64 and tuple(c.weight.shape) == (3, 2, 2, 2, 2)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        tnn.utils.skip_init(int)
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg to skip initialization"):
        tnn.utils.skip_init(tnn.ReLU)
    assert m.share_memory() is m

"""torch.nn.utils.prune, the conv/linear-batch-norm fusion, skip_init and Module.share_memory:
masks equal torch's wherever the choice is decided (no tie at the k-th magnitude or norm),
tracegrad's own rule among ties (the lower flat index is pruned first), `weight_orig`/`weight_mask`/
forward pre-hook as torch's, gradients through the mask, and torch's errors."""

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


def decided(scores, k):
    """Whether pruning the k lowest of `scores` is one set whatever the order among ties."""
    s = np.sort(np.asarray(scores, dtype=np.float64).reshape(-1))
    return k == 0 or k == s.size or s[k - 1] < s[k]


def count(amount, size):
    return amount if isinstance(amount, int) else round(amount * size)


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
    assert getattr(m_t, name + "_mask").dtype.np == getattr(m_r, name + "_mask").numpy().dtype
    np.testing.assert_array_equal(getattr(m_t, name + "_mask").numpy(), getattr(m_r, name + "_mask").numpy())
    np.testing.assert_array_equal(getattr(m_t, name).detach().numpy(), getattr(m_r, name).detach().numpy())


def lib(P):
    """The tensor library that goes with a prune module: tracegrad's or torch's."""
    return tg if P is prune else torch


def names(m):
    return [n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()]


@pytest.mark.parametrize("amount", [0, 1, 5, 0.3, 0.5, 0.9, 1.0, 47, 48])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_l1_unstructured_mask_equals_torch(amount, seed):
    w = arr(8, 6, seed=seed)
    assert decided(np.abs(w), count(amount, w.size))
    m_t, m_r = linear_pair(w)
    assert prune.l1_unstructured(m_t, "weight", amount) is m_t
    tprune.l1_unstructured(m_r, "weight", amount)
    same_mask(m_t, m_r)
    assert int((m_t.weight_mask == 0).sum()) == count(amount, w.size)
    assert names(m_t) == names(m_r) == (["bias", "weight_orig"], ["weight_mask"])
    assert list(m_t.state_dict()) == list(m_r.state_dict())
    assert isinstance(m_t.weight_orig, tnn.Parameter) and not isinstance(m_t.weight, tnn.Parameter)


def test_l1_unstructured_float32_weight_keeps_torch_dtypes():
    w = arr(5, 7, seed=21).astype(np.float32)
    m_t, m_r = tnn.Linear(7, 5), torch.nn.Linear(7, 5)
    with tg.no_grad():
        m_t.weight.copy_(tg.tensor(w))
    with torch.no_grad():
        m_r.weight.copy_(torch.tensor(w))
    prune.l1_unstructured(m_t, "weight", 0.4)
    tprune.l1_unstructured(m_r, "weight", 0.4)
    same_mask(m_t, m_r)
    assert m_t.weight.dtype == tg.float32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_weights_prune_as_torch(dtype):
    w = arr(6, 4, seed=22).astype(np.float32)
    m_t, m_r = tnn.Linear(4, 6, dtype=getattr(tg, dtype)), torch.nn.Linear(4, 6, dtype=getattr(torch, dtype))
    with tg.no_grad():
        m_t.weight.copy_(tg.tensor(w))
    with torch.no_grad():
        m_r.weight.copy_(torch.tensor(w))
    assert decided(np.abs(m_r.weight.detach().float().numpy()), 5)
    prune.l1_unstructured(m_t, "weight", 5)
    tprune.l1_unstructured(m_r, "weight", 5)
    prune.ln_structured(m_t, "weight", 2, 2, 0)
    tprune.ln_structured(m_r, "weight", 2, 2, 0)
    assert m_t.weight_mask.dtype == getattr(tg, dtype)
    np.testing.assert_array_equal(m_t.weight_mask.float().numpy(), m_r.weight_mask.float().numpy())
    np.testing.assert_array_equal(m_t.weight.detach().float().numpy(), m_r.weight.detach().float().numpy())


def lowest_first(scores, k):
    """The k lowest of `scores` by (value, position): the rule the docstring states, computed apart."""
    flat = list(np.asarray(scores, dtype=np.float64).reshape(-1))
    return sorted(sorted(range(len(flat)), key=lambda i: (flat[i], i))[:k])


@pytest.mark.parametrize("amount", [1, 3, 0.25, 0.5, 0.9, 40])
@pytest.mark.parametrize("levels", [1, 3])
def test_l1_unstructured_ties_prune_the_lower_flat_index_first(amount, levels):
    w = ties(8, 6, seed=levels, levels=levels)
    k = count(amount, w.size)
    assert not decided(np.abs(w), k)                       # a tie straddles the k-th magnitude
    m = tnn.Linear(6, 8, dtype=tg.float64)
    with tg.no_grad():
        m.weight.copy_(tg.tensor(w))
    prune.l1_unstructured(m, "weight", amount)
    assert np.flatnonzero(m.weight_mask.numpy().reshape(-1) == 0).tolist() == lowest_first(np.abs(w), k)
    # torch prunes the same count and agrees wherever the magnitude decides
    m_r = torch.nn.Linear(6, 8, dtype=torch.float64)
    with torch.no_grad():
        m_r.weight.copy_(torch.tensor(w))
    tprune.l1_unstructured(m_r, "weight", amount)
    kth = np.sort(np.abs(w).reshape(-1))[k - 1]
    settled = np.abs(w) != kth
    np.testing.assert_array_equal(m.weight_mask.numpy()[settled], m_r.weight_mask.numpy()[settled])
    assert int((m_r.weight_mask == 0).sum()) == k


def test_nan_magnitudes_are_pruned_last():
    w = np.array([[np.nan, 0.5, -2.0], [0.1, np.nan, 3.0]])
    out = prune.L1Unstructured(4).prune(tg.tensor(w))
    ref = tprune.L1Unstructured(4).prune(torch.tensor(w))
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    assert np.isnan(out.numpy()[0, 0]) and out.numpy()[0, 2] == 0
    w = arr(5, 4, seed=1)
    w[2, 1] = np.nan                               # a NaN norm: that row is kept
    for n in (1, 2, float("inf")):
        out = prune.LnStructured(2, n, dim=0).prune(tg.tensor(w))
        ref = tprune.LnStructured(2, n, dim=0).prune(torch.tensor(w))
        np.testing.assert_array_equal(out.numpy(), ref.numpy())


@pytest.mark.parametrize("n", [1, 2, 3, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim", [0, 1, -1, 2, -4])
@pytest.mark.parametrize("amount", [1, 0.5, 0.25, 0])
def test_ln_structured_mask_equals_torch(n, dim, amount):
    w = arr(6, 4, 3, 3, seed=3)
    t = torch.tensor(w)
    others = [d for d in range(4) if d != dim % 4]
    assert decided(torch.linalg.vector_norm(t, 2 if n == "fro" else n, others).numpy(), count(amount, w.shape[dim]))
    m_t, m_r = conv_pair(w)
    prune.ln_structured(m_t, "weight", amount, n, dim)
    tprune.ln_structured(m_r, "weight", amount, n, dim)
    same_mask(m_t, m_r)


@pytest.mark.parametrize("n", [1, 2, 0.5, float("inf"), "fro"])
@pytest.mark.parametrize("dim", [0, -1])
def test_ln_structured_on_a_matrix_equals_torch(n, dim):
    w = arr(7, 5, seed=19)
    m_t, m_r = linear_pair(w)
    prune.ln_structured(m_t, "weight", 0.4, n, dim)
    tprune.ln_structured(m_r, "weight", 0.4, n, dim)
    same_mask(m_t, m_r)


@pytest.mark.parametrize("dim", [0, 1])
def test_ln_structured_equal_norms_prune_the_lower_index_first(dim):
    w = arr(6, 4, 3, 3, seed=3) * 0.01
    index = [slice(None)] * 4
    index[dim] = [2, 1, 3]                     # three equal slices, the smallest of all
    w[tuple(index)] = 0.001
    m = tnn.Conv2d(4, 6, 3, dtype=tg.float64)
    with tg.no_grad():
        m.weight.copy_(tg.tensor(w))
    prune.ln_structured(m, "weight", 2, 2, dim)
    alive = m.weight_mask.numpy().sum(axis=tuple(d for d in range(4) if d != dim)) != 0
    assert np.flatnonzero(~alive).tolist() == [1, 2]


def test_iterative_pruning_builds_a_container_as_torch():
    w = arr(10, 8, seed=4)
    m_t, m_r = linear_pair(w)
    steps = ((lambda P, m: P.l1_unstructured(m, "weight", 0.3)),
             (lambda P, m: P.ln_structured(m, "weight", 2, 1, 0)),
             (lambda P, m: P.l1_unstructured(m, "weight", 7)),
             (lambda P, m: P.ln_structured(m, "weight", 0.5, 2, 1)),
             (lambda P, m: P.custom_from_mask(m, "weight", lib(P).tensor(arr(10, 8, seed=5) > -1))),
             (lambda P, m: P.l1_unstructured(m, "weight", 0.5)))
    for step in steps:
        step(prune, m_t)
        step(tprune, m_r)
        same_mask(m_t, m_r)
    hooks = list(m_t._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == len(steps)
    assert [type(h).__name__ for h in hooks[0]] == [type(h).__name__ for h in m_r._forward_pre_hooks[
        next(iter(m_r._forward_pre_hooks))]]


def test_failed_second_pruning_leaves_the_module_as_it_was():
    m = tnn.Linear(4, 3, dtype=tg.float64)
    prune.l1_unstructured(m, "weight", 5)
    before = m.weight_mask.numpy().copy()
    with pytest.raises(ValueError, match="amount=8 should be smaller than the number of parameters to prune=7"):
        prune.l1_unstructured(m, "weight", 8)             # 7 entries are left
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.L1Unstructured)
    np.testing.assert_array_equal(m.weight_mask.numpy(), before)
    assert names(m) == (["bias", "weight_orig"], ["weight_mask"])


def test_global_unstructured_equals_torch():
    ws = [arr(6, 5, seed=5), arr(4, 6, seed=6), arr(3, 4, seed=7)]
    pairs = [linear_pair(w) for w in ws]
    prune.l1_unstructured(pairs[0][0], "weight", 3)          # an earlier mask joins the global one
    tprune.l1_unstructured(pairs[0][1], "weight", 3)
    assert prune.global_unstructured(iter([(p[0], "weight") for p in pairs] + [(pairs[1][0], "bias")]),
                                     pruning_method=prune.L1Unstructured, amount=0.4) is None
    tprune.global_unstructured([(p[1], "weight") for p in pairs] + [(pairs[1][1], "bias")],
                               pruning_method=tprune.L1Unstructured, amount=0.4)
    for m_t, m_r in pairs:
        same_mask(m_t, m_r)
    same_mask(pairs[1][0], pairs[1][1], "bias")
    scores = {(pairs[2][0], "weight"): tg.tensor(arr(3, 4, seed=8))}
    prune.global_unstructured([(p[0], "weight") for p in pairs], pruning_method=prune.L1Unstructured, amount=5,
                              importance_scores=scores)
    tprune.global_unstructured([(p[1], "weight") for p in pairs], pruning_method=tprune.L1Unstructured, amount=5,
                               importance_scores={(pairs[2][1], "weight"): torch.tensor(arr(3, 4, seed=8))})
    for m_t, m_r in pairs:
        same_mask(m_t, m_r)


def test_importance_scores_and_custom_mask_and_identity():
    w = arr(5, 4, seed=8)
    scores = arr(5, 4, seed=9)
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


def test_prune_method_on_a_tensor_matches_torch():
    w, d = arr(6, 5, seed=16), (arr(6, 5, seed=17) > -0.8).astype(np.float64)
    for make in (lambda P: P.L1Unstructured(0.5), lambda P: P.LnStructured(2, 1, dim=1),
                 lambda P: P.CustomFromMask(mask=lib(P).tensor(d))):
        out = make(prune).prune(tg.tensor(w), default_mask=tg.tensor(d))
        ref = make(tprune).prune(torch.tensor(w), default_mask=torch.tensor(d))
        np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_forward_pre_hook_recomputes_and_gradient_goes_through_the_mask():
    w = arr(4, 6, seed=11)
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
    w = arr(4, 6, seed=13)
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
    w = arr(4, 6, seed=15)
    m_t, m_r = linear_pair(w)
    seq_t = tnn.Sequential(m_t)
    param = m_t.weight
    assert not prune.is_pruned(seq_t)
    prune.l1_unstructured(m_t, "weight", 0.5)
    prune.ln_structured(m_t, "weight", 1, 1, 0)
    tprune.l1_unstructured(m_r, "weight", 0.5)
    tprune.ln_structured(m_r, "weight", 1, 1, 0)
    assert prune.is_pruned(seq_t)
    assert prune.remove(m_t, "weight") is m_t
    tprune.remove(m_r, "weight")
    assert not prune.is_pruned(seq_t)
    assert names(m_t) == names(m_r) == (["bias", "weight"], [])
    assert m_t.weight is param and len(m_t._forward_pre_hooks) == 0
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
    prune.random_structured(c, "weight", 0.5, dim=0)     # half of the 4 channels left
    assert int((c.weight_mask.numpy().reshape(6, -1)[:, 0] == 0).sum()) == 4
    prune.random_unstructured(c, "weight", 10)      # on what is left: 10 more zeros
    assert int((c.weight_mask == 0).sum()) == 4 * 36 + 10
    tg.manual_seed(5)
    a = prune.RandomUnstructured(7).prune(tg.ones(5, 4))
    tg.manual_seed(5)
    np.testing.assert_array_equal(prune.RandomUnstructured(7).prune(tg.ones(5, 4)).numpy(), a.numpy())


class KeepEverySecond(prune.BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        mask = default_mask.clone()
        mask.view(-1)[::2] = 0
        return mask


def test_a_user_method_prunes_through_apply_as_torch():
    class TorchKeepEverySecond(tprune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"
        compute_mask = KeepEverySecond.compute_mask

    m_t, m_r = linear_pair(arr(4, 5, seed=18))
    prune.l1_unstructured(m_t, "weight", 3)
    tprune.l1_unstructured(m_r, "weight", 3)
    KeepEverySecond.apply(m_t, "weight")
    TorchKeepEverySecond.apply(m_r, "weight")
    same_mask(m_t, m_r)


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
    # (torch registers the parameter again, after bias; tracegrad chooses before it changes the module)
    assert names(m_t) == (["weight", "bias"], []) and names(m_r) == (["bias", "weight"], [])
    assert not prune.is_pruned(m_t) and isinstance(m_t.weight, tnn.Parameter)


def test_second_check_errors_match_torch():
    for call in (lambda P, T: P.PruningContainer().add_pruning_method(5),
                 lambda P, T: P.LnStructured(1, 2, dim=0).compute_mask(T.ones(3), T.ones(3)),
                 lambda P, T: P.CustomFromMask(T.ones(2, 2)).compute_mask(T.ones(3), T.ones(3)),
                 lambda P, T: P.L1Unstructured(1).prune(T.ones(3), importance_scores=T.ones(4)),
                 lambda P, T: P.l1_unstructured(T.nn.Linear(2, 2), "weight", 1, importance_scores=T.ones(3)),
                 lambda P, T: P.global_unstructured([], pruning_method=P.L1Unstructured, importance_scores=[],
                                                    amount=1)):
        with pytest.raises(Exception) as r:
            call(tprune, torch)
        with pytest.raises(type(r.value)) as t:
            call(prune, tg)
        msg_r, msg_t = str(r.value), str(t.value)
        if " of " in msg_r and "Linear" in msg_r:           # (torch prints its own module)
            msg_r, msg_t = msg_r.split(" of ")[0], msg_t.split(" of ")[0]
        assert msg_t.replace("tracegrad", "torch") == msg_r.replace("torch.nn.utils.prune", "torch")


# == fusion ========================================================================================================

def _copy(m_t, m_r):
    m_t.load_state_dict({k: tg.tensor(v.detach().numpy().copy()) for k, v in m_r.state_dict().items()})


def _trained_bn(bn_r, shape):
    bn_r.train()
    with torch.no_grad():
        for s in range(3):
            bn_r(torch.tensor(arr(*shape, seed=20 + s) * 2 + 1).to(bn_r.running_mean.dtype))
        if bn_r.affine:
            bn_r.weight.copy_(torch.tensor(arr(bn_r.num_features, seed=30)) + 2)
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


def test_fusion_in_float32_rounds_as_torch():
    c_r, c_t = torch.nn.Conv2d(3, 4, 3).eval(), tnn.Conv2d(3, 4, 3).eval()
    _copy(c_t, c_r)
    bn_r = _trained_bn(torch.nn.BatchNorm2d(4), (2, 4, 5, 5))
    bn_t = tnn.BatchNorm2d(4).eval()
    _copy(bn_t, bn_r)
    f_r, f_t = torch.nn.utils.fuse_conv_bn_eval(c_r, bn_r), tnn.utils.fuse_conv_bn_eval(c_t, bn_t)
    for k in ("weight", "bias"):
        assert getattr(f_t, k).dtype == tg.float32
        np.testing.assert_allclose(getattr(f_t, k).detach().numpy(), getattr(f_r, k).detach().numpy(), rtol=2e-7,
                                   atol=1e-7)
    for features in (4, 1):                     # one batch-norm feature scales every output
        l_r, l_t = torch.nn.Linear(3, 4).eval(), tnn.Linear(3, 4).eval()
        _copy(l_t, l_r)
        bn_r = _trained_bn(torch.nn.BatchNorm1d(features), (6, features))
        bn_t = tnn.BatchNorm1d(features).eval()
        _copy(bn_t, bn_r)
        f_r, f_t = torch.nn.utils.fuse_linear_bn_eval(l_r, bn_r), tnn.utils.fuse_linear_bn_eval(l_t, bn_t)
        for k in ("weight", "bias"):
            assert getattr(f_t, k).shape == getattr(f_r, k).shape
            np.testing.assert_allclose(getattr(f_t, k).detach().numpy(), getattr(f_r, k).detach().numpy(),
                                       rtol=2e-7, atol=1e-7)


def test_fuse_linear_with_a_batch_norm_without_affine_parameters():
    # (torch's linear fusion multiplies by bn.weight and fails when it is None; gamma = 1, beta = 0 here)
    l_t = tnn.Linear(3, 4, dtype=tg.float64).eval()
    bn_r = _trained_bn(torch.nn.BatchNorm1d(4, affine=False).double(), (6, 4))
    bn_t = tnn.BatchNorm1d(4, affine=False, dtype=tg.float64).eval()
    _copy(bn_t, bn_r)
    f_t = tnn.utils.fuse_linear_bn_eval(l_t, bn_t)
    x = tg.tensor(arr(5, 3, seed=41))
    np.testing.assert_allclose(f_t(x).detach().numpy(), bn_t(l_t(x)).detach().numpy(), rtol=1e-12, atol=1e-12)


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

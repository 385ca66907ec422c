"""Tensor methods (and their functions) that torch has and tracegrad lacked: isposinf, isneginf,
isreal, logdet, slogdet, pinverse, sum_to_size, narrow_copy, addmm_, baddbmm_, hardshrink,
prelu, bernoulli, multinomial and the layout flags. Values, gradients, grad_fn names and errors
against torch (float64)."""
import numpy as np
import pytest
import torch

import tracegrad as tg

A = [[2.0, 1.0, 0.5], [1.0, -3.0, 0.25], [0.5, 0.25, 1.5]]


def outcome(fn, m):
    try:
        r = fn(m)
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)
    r = r if isinstance(r, tuple) else (r,)
    return tuple((np.asarray(t.detach().numpy()).tolist(), str(t.dtype).split(".")[-1],
                  None if t.grad_fn is None else t.grad_fn.name()) for t in r)


CASES = {
    "isposinf": lambda m: m.tensor([1.0, float("inf"), -float("inf"), float("nan")]).isposinf(),
    "isneginf": lambda m: m.tensor([1.0, float("inf"), -float("inf"), float("nan")]).isneginf(),
    "isposinf of ints": lambda m: m.isposinf(m.tensor([1, 2])),
    "isneginf of bools": lambda m: m.isneginf(m.tensor([True, False])),
    "isreal": lambda m: m.tensor([1.0, float("nan")]).isreal(),
    "isposinf of a list": lambda m: m.isposinf([1.0]),
    "logdet": lambda m: m.tensor(A, dtype=m.float64, requires_grad=True).logdet(),
    "logdet of a positive determinant": lambda m: m.logdet(m.tensor(A, dtype=m.float64).abs() + m.eye(3,
                                                                                                     dtype=m.float64)),
    "logdet of a singular matrix": lambda m: m.zeros(2, 2, dtype=m.float64).logdet(),
    "slogdet": lambda m: tuple(t.detach() for t in m.tensor(A, dtype=m.float64, requires_grad=True).slogdet()),
    "slogdet's log": lambda m: m.tensor(A, dtype=m.float64, requires_grad=True).slogdet()[1],
    "pinverse": lambda m: m.tensor(A, dtype=m.float64, requires_grad=True)[:, :2].pinverse(),
    "pinverse of a vector": lambda m: m.ones(3).pinverse(),
    "sum_to_size": lambda m: m.ones(2, 3, 4, dtype=m.float64, requires_grad=True).sum_to_size(3, 1),
    "sum_to_size, a tuple": lambda m: m.ones(2, 3, 4, dtype=m.float64, requires_grad=True).sum_to_size((1, 3, 4)),
    "sum_to_size, fewer dims": lambda m: m.ones(2, 3, 4, dtype=m.float64, requires_grad=True).sum_to_size(4),
    "sum_to_size, the same size": lambda m: m.ones(2, 3, dtype=m.float64, requires_grad=True).sum_to_size(2, 3),
    "sum_to_size, not expandable": lambda m: m.ones(2, 3, 4).sum_to_size(2, 4),
    "narrow_copy": lambda m: m.arange(12.0, dtype=m.float64).reshape(3, 4).requires_grad_().narrow_copy(1, 1, 2),
    "hardshrink": lambda m: m.tensor([-1.0, 0.2, 1.0], dtype=m.float64, requires_grad=True).hardshrink(0.5),
    "prelu": lambda m: m.tensor([-1.0, 2.0], dtype=m.float64, requires_grad=True).prelu(m.tensor([0.25],
                                                                                                  dtype=m.float64)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_method_matches_torch(name):
    got, want = outcome(CASES[name], tg), outcome(CASES[name], torch)
    if isinstance(want[0], str) and want[0].endswith("Error"):
        assert got[0] == want[0]
        return
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g[0], dtype=float), np.array(w[0], dtype=float), rtol=1e-12, atol=1e-12)
        assert g[1:] == w[1:]


@pytest.mark.parametrize("name", ["logdet", "pinverse", "sum_to_size", "narrow_copy", "hardshrink", "slogdet"])
def test_method_gradients_match_torch(name):
    grads = []
    for m in (tg, torch):
        x = m.tensor(A, dtype=m.float64, requires_grad=True)
        y = {"logdet": lambda: (x * x + m.eye(3, dtype=m.float64)).logdet(),
             "pinverse": lambda: x[:, :2].pinverse(),
             "sum_to_size": lambda: (x * x).sum_to_size(1, 3),
             "narrow_copy": lambda: (x * x).narrow_copy(0, 1, 2),
             "hardshrink": lambda: x.hardshrink(0.6),
             "slogdet": lambda: x.slogdet()[1]}[name]()
        (y * m.arange(1.0, 1.0 + y.numel(), dtype=m.float64).reshape(y.shape)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op", ["addmm_", "baddbmm_"])
def test_addmm_and_baddbmm_in_place_match_torch(op):
    got = []
    for m in (tg, torch):
        a = m.tensor(np.arange(6.0).reshape(2, 3) / 7, dtype=m.float64, requires_grad=True)
        b = m.tensor(np.arange(6.0).reshape(3, 2) / 5, dtype=m.float64, requires_grad=True)
        if op == "addmm_":
            acc = m.ones(2, 2, dtype=m.float64, requires_grad=True) * 1
            r = acc.addmm_(a, b, beta=0.5, alpha=2)
        else:
            acc = m.ones(2, 2, 2, dtype=m.float64, requires_grad=True) * 1
            r = acc.baddbmm_(a.expand(2, 2, 3), b.expand(2, 3, 2), beta=0.5, alpha=2)
        assert r is acc
        r.sum().backward()
        got.append((r.detach().numpy().tolist(), r.grad_fn.name(), r._version, a.grad.numpy().tolist(),
                    b.grad.numpy().tolist()))
    assert got[0][1:3] == got[1][1:3]
    for g, w in zip(got[0][::3] + got[0][3:4], got[1][::3] + got[1][3:4]):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-12)
    np.testing.assert_allclose(np.array(got[0][4]), np.array(got[1][4]), rtol=1e-12)


def test_bernoulli_and_multinomial_methods_sample_what_the_probabilities_allow():
    tg.manual_seed(0)
    p = tg.tensor([0.0, 1.0, 0.0, 1.0])
    assert p.bernoulli().tolist() == [0.0, 1.0, 0.0, 1.0]
    assert tg.zeros(3).bernoulli(1.0).tolist() == [1.0, 1.0, 1.0]
    w = tg.tensor([[0.0, 0.0, 5.0], [0.0, 2.0, 0.0]])
    assert w.multinomial(1).tolist() == [[2], [1]]
    assert sorted(tg.tensor([1.0, 1.0, 1.0]).multinomial(3).tolist()) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        tg.tensor([1.0, 1.0]).multinomial(3)
    g = tg.Generator().manual_seed(3)
    a = tg.tensor([0.5] * 64).bernoulli(generator=g)
    b = tg.tensor([0.5] * 64).bernoulli(generator=tg.Generator().manual_seed(3))
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("flag", ["is_meta", "is_sparse", "is_sparse_csr", "is_quantized", "is_nested", "is_mkldnn"])
def test_layout_flags_are_torchs_for_a_dense_tensor(flag):
    assert getattr(tg.ones(2), flag) is False and getattr(torch.ones(2), flag) is False


def test_is_pinned_and_is_shared_are_false_as_for_a_new_cpu_tensor():
    assert tg.ones(2).is_pinned() is False and torch.ones(2).is_pinned() is False
    assert tg.ones(2).is_shared() is False and torch.ones(2).is_shared() is False

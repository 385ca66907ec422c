"""nn.functional.ctc_loss and nn.CTCLoss against torch: losses and gradients over random
configurations (padded and concatenated targets, repeated labels, impossible alignments, empty
targets, zero-length inputs, unnormalized log_probs, every reduction, zero_infinity, float32 and
float64, unbatched), torch's errors, no second derivative, and compiled."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _config(seed):
    r = np.random.default_rng(seed)
    T = int(r.integers(1, 12))
    N = int(r.integers(1, 5))
    C = int(r.integers(2, 7))
    blank = int(r.integers(0, C))
    S = int(r.integers(0, 6))
    labels = [l for l in range(C) if l != blank]
    tl = r.integers(0, S + 1, N)
    il = r.integers(0, T + 1, N) if r.random() < 0.3 else np.full(N, T)
    if r.random() < 0.3:                   # repeated labels need a blank between them
        targets = np.array([[labels[0]] * S for _ in range(N)], np.int64).reshape(N, S)
    else:
        targets = r.choice(labels, (N, S)).astype(np.int64) if S else np.zeros((N, 0), np.int64)
    logits = r.standard_normal((T, N, C)) * float(r.choice([0.5, 2.0, 5.0]))
    normalized = r.random() < 0.8
    return dict(T=T, N=N, C=C, blank=blank, targets=targets, il=il, tl=tl, logits=logits, normalized=normalized,
                concat=r.random() < 0.3, reduction=str(r.choice(["none", "mean", "sum"])),
                zero_infinity=bool(r.random() < 0.5), dtype=str(r.choice(["float64", "float64", "float32"])))


def _run(L, c):
    dt = getattr(L, c["dtype"])
    x = L.tensor(c["logits"], dtype=dt)
    lp = (x.log_softmax(2) if c["normalized"] else x).detach().requires_grad_()
    if c["concat"]:
        targets = L.tensor(np.concatenate([c["targets"][b, :c["tl"][b]] for b in range(c["N"])]).astype(np.int64))
    else:
        targets = L.tensor(c["targets"])
    loss = L.nn.functional.ctc_loss(lp, targets, L.tensor(c["il"]), L.tensor(c["tl"]), blank=c["blank"],
                                    reduction=c["reduction"], zero_infinity=c["zero_infinity"])
    (loss.sum() if c["reduction"] == "none" else loss).backward()
    return loss.detach().numpy(), lp.grad.numpy()


@pytest.mark.parametrize("seed", range(300))
def test_ctc_loss_matches_torch(seed):
    c = _config(seed)
    want, got = _run(torch, c), _run(tg, c)
    tol = 1e-11 if c["dtype"] == "float64" else 2e-5
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_unbatched_and_lists_of_lengths_and_the_module():
    r = np.random.default_rng(0)
    lp = r.standard_normal((7, 5))
    res = []
    for L in (torch, tg):
        x = L.tensor(lp).log_softmax(1).detach().requires_grad_()
        loss = L.nn.functional.ctc_loss(x, L.tensor([1, 2, 2]), L.tensor(7), L.tensor(3), reduction="none")
        loss.backward()
        y = L.tensor(r.standard_normal((6, 2, 4))).log_softmax(2)
        m = L.nn.CTCLoss(blank=3, reduction="sum")(y, L.tensor([[0, 1], [2, 2]]), [6, 4], [2, 2])
        res.append((loss.detach().numpy(), x.grad.numpy(), m.numpy(), repr(L.nn.CTCLoss(blank=3))))
        r = np.random.default_rng(0)
        r.standard_normal((7, 5))
    for g, w in zip(res[1][:3], res[0][:3]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert res[1][3] == res[0][3]


ERRORS = [
    lambda L, lp: L.nn.functional.ctc_loss(lp, L.tensor([[1, 2, 1]] * 2), L.tensor([7, 5]), L.tensor([3, 2])),
    lambda L, lp: L.nn.functional.ctc_loss(lp, L.tensor([[1, 2, 1]] * 2), L.tensor([6, 5]), L.tensor([4, 2])),
    lambda L, lp: L.nn.functional.ctc_loss(lp, L.tensor([[1, 2, 1]] * 2), L.tensor([6, 5]), L.tensor([3, 2]), blank=4),
    lambda L, lp: L.nn.functional.ctc_loss(lp, L.tensor([[1, 2, 1]] * 2), L.tensor([6, 5]), L.tensor([3, 2]),
                                           reduction="max"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_ctc_errors_as_torch(case):
    lp = np.random.default_rng(1).standard_normal((6, 2, 4))
    msgs = []
    for L in (torch, tg):
        with pytest.raises((RuntimeError, ValueError)) as e:
            ERRORS[case](L, L.tensor(lp))
        msgs.append((type(e.value).__name__, str(e.value)))
    assert msgs[0] == msgs[1]


def test_no_second_derivative_as_torch():
    msgs = []
    for L in (torch, tg):
        lp = L.tensor(np.random.default_rng(2).standard_normal((6, 2, 4))).log_softmax(2).detach().requires_grad_()
        loss = L.nn.functional.ctc_loss(lp, L.tensor([[1, 2, 1]] * 2), L.tensor([6, 5]), L.tensor([3, 2]))
        g, = L.autograd.grad(loss, lp, create_graph=True)
        with pytest.raises(RuntimeError) as e:
            g.sum().backward()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_compiled_ctc_matches_eager():
    r = np.random.default_rng(3)
    logits = r.standard_normal((8, 3, 5))
    targets = tg.tensor([[1, 2, 2], [3, 1, 0], [4, 4, 4]])
    il, tl = tg.tensor([8, 7, 8]), tg.tensor([3, 2, 3])

    def f(x):
        return tg.nn.functional.ctc_loss(x.log_softmax(2), targets, il, tl)
    c = tg.compile(f)
    outs = []
    for fn in (f, c, c):
        x = tg.tensor(logits, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = fn(x)
        y.backward()
        outs.append((float(y), x.grad.numpy()))
    for o in outs[1:]:
        assert o[0] == outs[0][0]
        np.testing.assert_array_equal(o[1], outs[0][1])


def test_compiled_ctc_follows_lengths_written_between_calls():
    r = np.random.default_rng(4)
    x = tg.tensor(r.standard_normal((8, 2, 5))).log_softmax(2)
    targets = tg.tensor([[1, 2, 2], [3, 1, 0]])
    il, tl = tg.tensor([8, 7]), tg.tensor([3, 2])
    f = lambda x: tg.nn.functional.ctc_loss(x, targets, il, tl, reduction="none")    # noqa: E731
    c = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for change in (None, lambda: tl.__setitem__(1, 1), lambda: il.__setitem__(0, 5),
                       lambda: targets.__setitem__((0, 0), 4)):
            if change:
                change()
            np.testing.assert_array_equal(c(x).numpy(), f(x).numpy())

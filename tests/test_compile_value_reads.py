"""Values of tensors that a compiled function does not take as arguments but reads in a way
that turns them into constants of the program (a boolean mask's positions, a 0-d index,
nonzero, one_hot, equal/allclose, tolist) follow every change, as the eager function's do:
through tracegrad's ops (the version counter), through numpy (`t.numpy()[...] = ...`, an array
given to from_numpy: their bytes are compared) and through `.data`.

A mask changed through `mask[3:10] = True` left the compiled `x[mask].sum()` at its first value
(3.0 where eager and torch give 45.0): the mask's positions were baked into the program and
nothing guarded them."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _check(f, tf, x, tx, change, times=3):
    """The compiled f against the eager f and torch's tf, before and after each change."""
    cf = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # traced whole, no fallback
        for k in range(times):
            got, want = cf(x), f(x)
            ref = tf(tx)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            np.testing.assert_array_equal(got.numpy(), ref.numpy())
            change(k)


@pytest.mark.parametrize("how", ["op", "numpy before", "numpy after", "data"])
def test_a_boolean_mask_read_by_the_function(how):
    n = 100
    mask, tmask = tg.zeros(n, dtype=tg.bool), torch.zeros(n, dtype=torch.bool)
    mask[:3], tmask[:3] = True, True
    arr = mask.numpy() if how == "numpy before" else None
    x, tx = tg.arange(float(n)), torch.arange(float(n))

    def change(k):
        lo, hi = 5 * k + 3, 5 * k + 9
        tmask[lo:hi] = True
        if how == "op":
            mask[lo:hi] = True
        elif how == "numpy before":
            arr[lo:hi] = True
        elif how == "numpy after":
            mask.numpy()[lo:hi] = True
        else:
            mask.data[lo:hi] = True
    _check(lambda x: x[mask].sum(), lambda x: x[tmask].sum(), x, tx, change)


def test_an_array_given_to_from_numpy_then_written():
    a = np.zeros((4, 5), bool)
    a[0, :2] = True
    m = tg.from_numpy(a)
    x, tx = tg.arange(20.0).reshape(4, 5), torch.arange(20.0).reshape(4, 5)

    def change(k):
        a[k + 1, k] = True
    _check(lambda x: x[m] * 2, lambda x: x[torch.from_numpy(a)] * 2, x, tx, change)


def test_a_0d_index_and_a_0d_bool():
    k0, tk0 = tg.tensor(1), torch.tensor(1)
    b, tb = tg.tensor(True), torch.tensor(True)
    x, tx = tg.arange(12.0).reshape(4, 3), torch.arange(12.0).reshape(4, 3)

    def change(k):
        k0.fill_(k + 2)
        tk0.fill_(k + 2)
        b.numpy()[...] = bool(k % 2)
        tb.fill_(bool(k % 2))
    _check(lambda x: x[k0] + x[b].sum(), lambda x: x[tk0] + x[tb].sum(), x, tx, change)


def test_nonzero_one_hot_and_equal_of_captured_tensors():
    lab, tlab = tg.tensor([0, 2, 1]), torch.tensor([0, 2, 1])
    ref, tref = tg.zeros(3), torch.zeros(3)
    x, tx = tg.arange(6.0), torch.arange(6.0)
    zeros = {tg: tg.zeros(3), torch: torch.zeros(3)}

    def f(lib, x, lab, ref):
        idx = lib.nonzero(lab).reshape(-1)
        oh = lib.nn.functional.one_hot(lab).sum(0)
        bonus = 1.0 if lib.equal(ref, zeros[lib]) and lib.allclose(ref, zeros[lib]) else -1.0
        return x[idx] * bonus + oh.sum()

    def change(k):
        for lib, L, R in ((tg, lab, ref), (torch, tlab, tref)):
            L.copy_(lib.tensor([3, 0, k]))
            R.fill_(k % 2)
    _check(lambda x: f(tg, x, lab, ref), lambda x: f(torch, x, tlab, tref), x, tx, change, times=4)


def test_tolist_of_a_large_tensor_written_through_numpy():
    w, tw = tg.ones(200), torch.ones(200)
    x, tx = tg.ones(3), torch.ones(3)

    def change(k):
        w.numpy()[150] = 5.0 + k
        tw[150] = 5.0 + k
    _check(lambda x: x * max(w.tolist()), lambda x: x * max(tw.tolist()), x, tx, change)


def test_a_numpy_array_read_by_the_function_keeps_the_sign_of_zero():
    c = np.zeros(3)
    x, tx = tg.ones(3, dtype=tg.float64), torch.ones(3, dtype=torch.float64)

    def change(k):
        c[:] = -0.0 if k % 2 == 0 else 0.0
    cf = tg.compile(lambda x: x * tg.tensor(c))
    for k in range(4):
        got, want = cf(x), x * tg.tensor(c)
        assert np.signbit(got.numpy()).tolist() == np.signbit((tx * torch.tensor(c)).numpy()).tolist()
        assert np.signbit(got.numpy()).tolist() == np.signbit(want.numpy()).tolist()
        change(k)


@pytest.mark.parametrize("how", ["detach", "data"])
@pytest.mark.parametrize("change", ["in place", "rebound"])
def test_values_read_through_a_tensor_of_their_own(how, change):
    """`g.detach().tolist()` read a tensor the guards' walk never meets (the detached one, made
    while tracing): a change to g, in place or `g.data = other`, left the first value baked in."""
    g, tgl = tg.tensor([2.5, 1.0]), torch.tensor([2.5, 1.0])
    x, tx = tg.ones(2), torch.ones(2)

    def f(lib, x, g):
        v = g.detach() if how == "detach" else g.data
        return x * sum(v.tolist())

    def step(k):
        if change == "in place":
            g.add_(k + 1)
            tgl.add_(k + 1)
        else:
            g.data = tg.tensor([7.0 + k, 1.0])
            tgl.data = torch.tensor([7.0 + k, 1.0])
    _check(lambda x: f(tg, x, g), lambda x: f(torch, x, tgl), x, tx, step)


def test_repeat_interleave_by_captured_repeats():
    r, tr = tg.tensor([1, 2, 0]), torch.tensor([1, 2, 0])
    x, tx = tg.arange(3.0), torch.arange(3.0)

    def step(k):
        for lib, t in ((tg, r), (torch, tr)):
            t.copy_(lib.tensor([0, 1 + k, 2]))
    _check(lambda x: x.repeat_interleave(r), lambda x: x.repeat_interleave(tr), x, tx, step)

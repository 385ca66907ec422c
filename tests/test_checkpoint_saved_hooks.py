"""tracegrad.utils.checkpoint and saved-tensor hooks against torch: gradients with and
without checkpointing (both variants, checkpoint_sequential, dropout with the RNG state
preserved, double backward, autograd.grad), torch's warnings, hook call counts and values,
and compile under hooks (it runs eagerly, with a warning)."""
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tck

import tracegrad as tg
import tracegrad.utils.checkpoint as gck


def _body(m):
    def f(x, w):
        h = (x @ w).tanh()
        h = h * h.exp().sum(1, keepdim=True)
        return (h.sigmoid() @ w.t()).sin()
    return f


def _grads(m, ck, mode, create_graph=False):
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = m.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    f = _body(m)
    if mode == "plain":
        y = f(x, w)
    else:
        y = ck.checkpoint(f, x, w, use_reentrant=mode)
    loss = (y ** 2).sum()
    if create_graph:
        gx, gw = m.autograd.grad(loss, (x, w), create_graph=True)
        (gx.sum() + (gw ** 2).sum()).backward()
    else:
        loss.backward()
    return loss.item(), x.grad.numpy().copy(), w.grad.numpy().copy()


@pytest.mark.parametrize("mode", [False, True])
def test_checkpoint_gradients_equal_plain_and_torch(mode):
    ref = _grads(torch, tck, "plain")
    for got in (_grads(tg, gck, mode), _grads(tg, gck, "plain")):
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got[2], ref[2], rtol=1e-10, atol=1e-12)


def test_checkpoint_non_reentrant_double_backward():
    ref = _grads(torch, tck, False, create_graph=True)
    got = _grads(tg, gck, False, create_graph=True)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-10, atol=1e-12)


def test_checkpoint_non_reentrant_autograd_grad_and_input_without_grad():
    def run(m, ck):
        x = m.tensor(np.linspace(-1, 1, 6).reshape(2, 3))
        w = m.tensor(np.linspace(0.5, 2, 9).reshape(3, 3), requires_grad=True)
        y = ck.checkpoint(lambda a, b: (a @ b).exp() * b.sum(), x, w, use_reentrant=False)
        (g,) = m.autograd.grad(y.sum(), w)
        return g.numpy().copy(), w.grad
    (ga, wa), (gb, wb) = run(tg, gck), run(torch, tck)
    np.testing.assert_allclose(ga, gb, rtol=1e-12)
    assert wa is None and wb is None


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_preserves_rng_state(use_reentrant):
    tg.manual_seed(0)
    x = tg.ones(200, requires_grad=True)
    drop = tg.nn.Dropout(0.5)
    y = gck.checkpoint(lambda t: drop(t) * t, x, use_reentrant=use_reentrant)
    mask = (y.detach().numpy() != 0).astype(np.float64)
    y.sum().backward()
    # d/dx (dropout(x) * x) = 2 * x * mask / (1 - p), only where the first run kept x
    np.testing.assert_allclose(x.grad.numpy(), 2 * mask * 2)
    assert 0 < mask.sum() < 200


def test_checkpoint_sequential_matches_torch():
    def run(m, ck, seq):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(4, 6), m.nn.Tanh(), m.nn.Linear(6, 6), m.nn.Sigmoid(), m.nn.Linear(6, 2))
        net = net.double()
        x = m.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
        return net, x

    tnet, tx = run(torch, tck, True)
    gnet, gx = run(tg, gck, True)
    with torch.no_grad():
        for p, q in zip(gnet.parameters(), tnet.parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    for use_reentrant in (False, True):
        gx.grad = None
        tx.grad = None
        for p in list(gnet.parameters()) + list(tnet.parameters()):
            p.grad = None
        yg = gck.checkpoint_sequential(gnet, 2, gx, use_reentrant=use_reentrant)
        yt = tck.checkpoint_sequential(tnet, 2, tx, use_reentrant=use_reentrant)
        (yg ** 2).sum().backward()
        (yt ** 2).sum().backward()
        np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
        for p, q in zip(gnet.parameters(), tnet.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("call", ["checkpoint", "checkpoint_sequential"])
def test_warns_if_use_reentrant_not_passed_as_torch(call):
    def messages(m, ck):
        x = m.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            if call == "checkpoint":
                ck.checkpoint(lambda t: t.sin(), x)
            else:
                ck.checkpoint_sequential([m.nn.ReLU(), m.nn.ReLU()], 1, x)
        return [str(r.message) for r in w if "use_reentrant" in str(r.message)]
    got, want = messages(tg, gck), messages(torch, tck)
    assert got == want and len(got) == 1


def test_reentrant_warns_when_no_input_requires_grad():
    def messages(m, ck):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ck.checkpoint(lambda t: t.sin(), m.ones(2), use_reentrant=True)
        return [str(r.message) for r in w]
    assert messages(tg, gck) == messages(torch, tck)


def test_checkpoint_detects_non_determinism():
    def run(m, ck):
        calls = [0]

        def f(x):
            calls[0] += 1
            return x.exp() if calls[0] == 1 else x[:1].exp()   # the rerun saves another shape
        x = m.ones(3, requires_grad=True)
        y = ck.checkpoint(f, x, use_reentrant=False)
        with pytest.raises(ck.CheckpointError) as e:
            y.sum().backward()
        return str(e.value)
    assert "Recomputed values for the following tensors have different metadata" in run(torch, tck)
    assert "Recomputed values for the following tensors have different metadata" in run(tg, gck)


def _hooked(m, pack_scale, unpack_scale, inplace):
    counts = [0, 0]

    def pack(x):
        counts[0] += 1
        return x * pack_scale

    def unpack(x):
        counts[1] += 1
        return x * unpack_scale

    a = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(pack, unpack):
        b = a * 1
        y = (b.sin() * a).exp().sum() + (a ** 3).sum()
        z = b.clone()
        if inplace:
            z.mul_(a)
        else:
            z = z * a
        y = y + z.sum()
    y.backward()
    return a.grad.numpy().copy(), counts


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("scales", [(1.0, 1.0), (2.0, 0.5), (2.0, 1.0), (1.0, 3.0)])
def test_saved_tensor_hooks_gradients_as_torch(scales, inplace):
    ga, ca = _hooked(tg, *scales, inplace)
    gb, cb = _hooked(torch, *scales, inplace)
    np.testing.assert_allclose(ga, gb, rtol=1e-6)
    if not inplace:
        # an in-place op that saves self packs it twice in tracegrad (self, then its old value)
        assert ca[0] == cb[0]


def test_save_on_cpu_gradients_as_torch():
    def run(m):
        a = m.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
        with m.autograd.graph.save_on_cpu():
            y = (a.tanh() @ a.t()).exp().sum()
        y.backward()
        return a.grad.numpy().copy()
    np.testing.assert_allclose(run(tg), run(torch), rtol=1e-12)


def test_compile_under_saved_tensor_hooks_runs_eagerly_with_warning():
    f = tg.compile(lambda x: (x.sin() * x).sum())
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    packed = []
    with tg.autograd.graph.saved_tensors_hooks(lambda x: packed.append(1) or x, lambda x: x):
        with pytest.warns(UserWarning, match="saved_tensors_hooks"):
            y = f(a)
    y.backward()
    assert len(packed) == 3          # sin saves x; mul saves sin(x) and x, as eager
    ref = torch.tensor([1.0, 2.0], dtype=torch.float32, requires_grad=True)
    (ref.sin() * ref).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ref.grad.numpy(), rtol=1e-6)

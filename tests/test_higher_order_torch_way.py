"""Higher order written torch's way: a compiled loss, then autograd.grad(create_graph=True)
outside it, against torch (float64). Each case runs several times: the first call derives
and caches the engine's backward programs, the later ones take the cached paths (the
nodes a backward runs, read from the cached program; the graph's structure and hooks
gathered in one walk; the compiled backward's arguments picked by a table), which must
give the same values and raise the same errors."""
import numpy as np
import pytest
import torch

import tracegrad as tg

CALLS = 3            # the first call builds the cached backwards, the others run them


def close(a, b, rtol=1e-12, atol=1e-12):
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def pair(a, req=True):
    return tg.tensor(a, requires_grad=req), torch.tensor(a, requires_grad=req)


def test_third_derivative_of_a_compiled_loss_matches_torch_call_after_call():
    """W8's form: y = f(x); grad(y, x, create_graph) -> g1; grad(g1.sum(), x, create_graph) -> g2;
    grad(g2.sum(), x)."""
    xs = np.random.default_rng(0).standard_normal(40)
    cl = tg.compile(lambda x: (tg.tanh(x) ** 2).sum())
    for _ in range(CALLS):
        x, tx = pair(xs)
        (g1,) = tg.autograd.grad(cl(x), x, create_graph=True)
        (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = tg.autograd.grad(g2.sum(), x)
        (t1,) = torch.autograd.grad((torch.tanh(tx) ** 2).sum(), tx, create_graph=True)
        (t2,) = torch.autograd.grad(t1.sum(), tx, create_graph=True)
        (t3,) = torch.autograd.grad(t2.sum(), tx)
        for a, b in ((g1, t1), (g2, t2), (g3, t3)):
            close(a, b)
        assert g1.requires_grad and g2.requires_grad and not g3.requires_grad and g3.grad_fn is None


def test_hessian_vector_product_of_a_compiled_mlp_loss_matches_torch_and_gradgradcheck():
    """W6's form: gs = grad(loss, ws, create_graph); grad(sum((g * v).sum()), ws)."""
    rng = np.random.default_rng(1)
    sizes = [6, 5, 4, 3]
    wa = [rng.standard_normal((a, b)) / np.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    va = [rng.standard_normal(w.shape) for w in wa]
    xa = rng.standard_normal((7, sizes[0]))

    def loss(m, x, *ws):
        h = x
        for w in ws[:-1]:
            h = m.tanh(h @ w)
        return ((h @ ws[-1]) ** 2).mean()
    cl = tg.compile(lambda x, *ws: loss(tg, x, *ws))
    for _ in range(CALLS):
        ws, tws = zip(*[pair(w) for w in wa])
        x, tx = pair(xa, req=False)
        gs = tg.autograd.grad(cl(x, *ws), ws, create_graph=True)
        hv = tg.autograd.grad(sum((g * tg.tensor(v)).sum() for g, v in zip(gs, va)), ws)
        tgs = torch.autograd.grad(loss(torch, tx, *tws), tws, create_graph=True)
        thv = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(tgs, va)), tws)
        for a, b in zip(gs + hv, tgs + thv):
            close(a, b)
    ws = [tg.tensor(w, requires_grad=True) for w in wa]
    x = tg.tensor(xa)
    assert tg.autograd.gradgradcheck(lambda *ws: cl(x, *ws), ws)


def test_a_second_backward_through_a_freed_graph_raises_on_the_cached_path_too():
    """retain_graph=False frees the graph: the cached backward (which knows the nodes it runs
    without walking them again) still refuses a second pass, as torch does, at every level."""
    xs = np.random.default_rng(2).standard_normal(9)
    cl = tg.compile(lambda x: (x.exp() * x).sum())
    for _ in range(CALLS):
        for lib, f in ((tg, cl), (torch, lambda x: (x.exp() * x).sum())):
            x = lib.tensor(xs, requires_grad=True)
            y = f(x)
            (g1,) = lib.autograd.grad(y, x, create_graph=True)
            s = (g1 * g1).sum()
            lib.autograd.grad(s, x)                      # frees s's graph (g1's nodes)
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                lib.autograd.grad(s, x)
            y = f(x)                                     # and a first-order backward of a fresh call
            (g,) = lib.autograd.grad(y, x)
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                lib.autograd.grad(y, x)
            close(g, (xs + 1) * np.exp(xs))


def test_double_backward_through_the_same_graph_twice_gives_the_same_values():
    xs = np.random.default_rng(3).standard_normal(12)
    cl = tg.compile(lambda x: (tg.sin(x) * x ** 2).sum())
    for _ in range(CALLS):
        x, tx = pair(xs)
        (g1,) = tg.autograd.grad(cl(x), x, create_graph=True)
        (t1,) = torch.autograd.grad((torch.sin(tx) * tx ** 2).sum(), tx, create_graph=True)
        s, ts = (g1 ** 2).sum(), (t1 ** 2).sum()
        first = tg.autograd.grad(s, x, retain_graph=True)[0]
        second = tg.autograd.grad(s, x, retain_graph=True)[0]
        tfirst = torch.autograd.grad(ts, tx, retain_graph=True)[0]
        close(first, tfirst)
        close(second, tfirst)
        # and backward() twice accumulates, as torch's
        s.backward(retain_graph=True)
        s.backward()
        ts.backward(retain_graph=True)
        ts.backward()
        close(x.grad, tx.grad)


def test_unused_inputs_give_none_or_torchs_error_at_every_level():
    """An input the loss does not read: None with allow_unused (or zeros with
    materialize_grads), torch's error without; the same for the second derivative."""
    xs = np.random.default_rng(4).standard_normal(5)
    cl = tg.compile(lambda x, u: (x ** 3).sum())
    for _ in range(CALLS):
        for lib, f in ((tg, cl), (torch, lambda x, u: (x ** 3).sum())):
            x = lib.tensor(xs, requires_grad=True)
            u = lib.tensor(xs, requires_grad=True)
            y = f(x, u)
            with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
                lib.autograd.grad(y, (x, u), create_graph=True)
            g1, gu = lib.autograd.grad(y, (x, u), create_graph=True, allow_unused=True)
            assert gu is None
            g2x, g2u = lib.autograd.grad(g1.sum(), (x, u), allow_unused=True, retain_graph=True)
            assert g2u is None
            _, zu = lib.autograd.grad(g1.sum(), (x, u), materialize_grads=True)
            assert not zu.numpy().any() and zu.shape == u.shape
            close(g2x, 6 * x.detach().numpy())


def test_grad_of_a_non_leaf_output_of_a_compiled_call_and_through_it():
    xs = np.random.default_rng(5).standard_normal((3, 4))
    cl = tg.compile(lambda x: (tg.tanh(x), (x * x).sum()))
    for _ in range(CALLS):
        x, tx = pair(xs)
        h, y = cl(x)
        th, ty = torch.tanh(tx), (tx * tx).sum()
        # the gradient of h's sum with respect to the non-leaf h itself
        (gh,) = tg.autograd.grad((h * h).sum(), h, create_graph=True)
        (tgh,) = torch.autograd.grad((th * th).sum(), th, create_graph=True)
        close(gh, tgh)
        # and on through the compiled call, to x (its other output's seed is None: zeros)
        (gx,) = tg.autograd.grad(gh.sum(), x, retain_graph=True)
        (tgx,) = torch.autograd.grad(tgh.sum(), tx, retain_graph=True)
        close(gx, tgx)
        # both outputs seeded, with explicit grad_outputs
        go = np.random.default_rng(6).standard_normal((3, 4))
        (g1,) = tg.autograd.grad((h, y), x, (tg.tensor(go), tg.tensor(2.0, dtype=tg.float64)), create_graph=True)
        (t1,) = torch.autograd.grad((th, ty), tx, (torch.tensor(go), torch.tensor(2.0, dtype=torch.float64)),
                                    create_graph=True)
        close(g1, t1)
        close(tg.autograd.grad(g1.sum(), x)[0], torch.autograd.grad(t1.sum(), tx)[0])


def test_hooks_on_every_kind_of_node_run_as_torchs_in_a_create_graph_backward():
    """A tensor hook on a non-leaf, a leaf's hook, and a grad_fn's pre-hook and hook, met in
    the one walk that also keys the graph: called as torch calls them, and what they return
    used, call after call."""
    xs = np.random.default_rng(7).standard_normal(6)
    cl = tg.compile(lambda x: (x.exp() * x).sum())
    for _ in range(CALLS):
        got = {}
        for lib, f in ((tg, cl), (torch, lambda x: (x.exp() * x).sum())):
            seen = []
            x = lib.tensor(xs, requires_grad=True)
            x.register_hook(lambda g: seen.append(("leaf", g.detach().numpy().copy())) or g * 3)
            (g1,) = lib.autograd.grad(f(x), x, create_graph=True)
            h = g1 * g1
            h.register_hook(lambda g: seen.append(("h", g.detach().numpy().copy())) or g + 1)
            h.grad_fn.register_prehook(lambda gs: seen.append(("pre", gs[0].detach().numpy().copy())) or None)
            h.grad_fn.register_hook(lambda gi, go: seen.append(("post", gi[0].detach().numpy().copy())) or None)
            (g2,) = lib.autograd.grad(h.sum(), x, create_graph=True)
            (g3,) = lib.autograd.grad(g2.sum(), x)
            got[lib] = (seen, g1, g2, g3)
        (s1, *a), (s2, *b) = got[tg], got[torch]
        assert [k for k, _ in s1] == [k for k, _ in s2]
        for (_, u), (_, v) in zip(s1, s2):
            close(u, v)
        for u, v in zip(a, b):
            close(u, v)


@pytest.mark.parametrize("compiled", [False, True])
def test_what_a_tensor_hook_computes_in_a_create_graph_backward_is_differentiated_again(compiled):
    """A hook's result (`g * 3`) under create_graph=True is recorded as torch records it (its
    grad_fn is MulBackward0, not an identity), so the next derivative goes through it and the
    leaf's hook runs again there."""
    xs = np.random.default_rng(9).standard_normal(5)
    fn = lambda m: (lambda x: (x.exp() * x).sum())       # noqa: E731
    f = tg.compile(fn(tg)) if compiled else fn(tg)
    for _ in range(CALLS):
        res = []
        for lib, g in ((tg, f), (torch, fn(torch))):
            x = lib.tensor(xs, requires_grad=True)
            x.register_hook(lambda g: g * 3)
            (g1,) = lib.autograd.grad(g(x), x, create_graph=True)
            (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
            (g3,) = lib.autograd.grad((g2 * g1).sum(), x)
            res.append((g1, g2, g3, type(g1.grad_fn).__name__))
        for a, b in zip(res[0][:3], res[1][:3]):
            close(a, b)
        assert res[0][3] == res[1][3] == "MulBackward0"


def test_a_constant_made_inside_the_compiled_loss_reaches_its_backward():
    """The compiled backward's arguments come from a table of sources (seeds, inputs, saved
    values, constants): a constant the function makes itself is one of them."""
    xs = np.random.default_rng(8).standard_normal(7)
    cl = tg.compile(lambda x: (tg.sin(x * tg.arange(7, dtype=tg.float64)) * x).sum())
    for _ in range(CALLS):
        x, tx = pair(xs)
        (g1,) = tg.autograd.grad(cl(x), x, create_graph=True)
        (t1,) = torch.autograd.grad((torch.sin(tx * torch.arange(7, dtype=torch.float64)) * tx).sum(), tx,
                                    create_graph=True)
        close(g1, t1)
        close(tg.autograd.grad(g1.sum(), x)[0], torch.autograd.grad(t1.sum(), tx)[0])
        y = cl(x)
        y.backward()
        ty = (torch.sin(tx * torch.arange(7, dtype=torch.float64)) * tx).sum()
        ty.backward()
        close(x.grad, tx.grad)

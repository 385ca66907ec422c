"""@tracegrad.compile against eager tracegrad and torch: values, gradients, guards,
autograd integration (hooks, retain_graph, create_graph), modules, fallback."""
import os
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from conftest import to_torch
from tracegrad.compile import CompileError

RTOL = 1e-10


def close(a, b, rtol=RTOL, atol=1e-12):
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def leaf(*shape, seed=0, req=True):
    rng = np.random.default_rng(seed)
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, requires_grad=req)


def body(x, w, b):
    h = tg.tanh(x @ w + b)
    return (h ** 3).sum() + (F.gelu(h) * x.sum(1, keepdim=True)).mean() + (h / (1 + x.exp().sum())).sum()


def body_torch(x, w, b):
    h = torch.tanh(x @ w + b)
    return (h ** 3).sum() + (torch.nn.functional.gelu(h) * x.sum(1, keepdim=True)).mean() + \
        (h / (1 + x.exp().sum())).sum()


def test_values_and_gradients_match_eager_and_torch():
    x, w, b = leaf(4, 3, seed=1), leaf(3, 5, seed=2), leaf(5, seed=3)
    f = tg.compile(body)
    y = f(x, w, b)
    assert type(y.grad_fn).__name__ == "CompiledFunctionBackward"
    y.backward()
    got = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    ye = body(x, w, b)
    ye.backward()
    close(y, ye)
    for g, t in zip(got, (x, w, b)):
        close(g, t.grad)
    tx, tw, tb = (to_torch(t) for t in (x, w, b))
    yt = body_torch(tx, tw, tb)
    yt.backward()
    close(y, yt)
    for g, t in zip(got, (tx, tw, tb)):
        close(g, t.grad)


def test_decorator_forms_and_backend_argument():
    @tg.compile
    def f(x):
        return x * 2

    @tg.compile(fullgraph=True, backend="numpy")
    def g(x):
        return x + 1

    x = leaf(3, req=False)
    close(f(x), x.detach().numpy() * 2)
    close(g(x), x.detach().numpy() + 1)
    with pytest.raises(ValueError):
        tg.compile(lambda x: x, backend="cuda-magic")


def test_guards_recompile_on_shape_dtype_requires_grad_grad_mode_and_constants():
    @tg.compile
    def f(x, k):
        return x * k

    x = leaf(3, req=False)
    f(x, 2)
    p = f.last_program
    f(x, 2)
    assert f.cache.compiles == 1 and f.last_program is p and p is not None
    f(leaf(4, req=False), 2)                      # shape
    f(x.float(), 2)                               # dtype
    y = f(leaf(3), 2)                             # requires_grad
    assert y.requires_grad
    with tg.no_grad():                            # grad mode
        assert not f(leaf(3), 2).requires_grad
    close(f(x, 3), x.detach().numpy() * 3)                 # Python constant
    assert f.cache.compiles == 6 and len({id(p) for p in f.cache.programs()}) == 6


def test_cache_limit_warns_once_and_stays_bounded():
    # (dynamic=False: a program per size; automatic dynamic shapes would need one program)
    f = tg.compile(lambda x: x + 1, cache_limit=2, dynamic=False)
    with pytest.warns(RuntimeWarning, match="recompiled"):
        for n in range(1, 6):
            f(leaf(n, req=False))
    assert len(f.cache) == 2


def test_multiple_outputs_structures_and_undifferentiable_outputs():
    @tg.compile
    def f(x, y):
        return {"sum": (x * y).sum(), "pair": (x.exp(), y.detach() * 2), "n": 3}

    x, y = leaf(4, seed=1), leaf(4, seed=2)
    out = f(x, y)
    assert out["n"] == 3 and out["pair"][0].requires_grad and not out["pair"][1].requires_grad
    (out["sum"] + out["pair"][0].sum()).backward()
    close(x.grad, y.detach().numpy() + np.exp(x.detach().numpy()))
    close(y.grad, x.detach().numpy())


def test_autograd_grad_hooks_and_retain_graph():
    f = tg.compile(lambda x: (x.sin() * x).sum())
    x = leaf(5)
    y = f(x)
    seen = []
    x.register_hook(lambda g: seen.append(g.clone()))
    (gx,) = tg.autograd.grad(y, x, retain_graph=True)
    close(gx, np.sin(x.detach().numpy()) + x.detach().numpy() * np.cos(x.detach().numpy()))
    assert len(seen) == 1
    y.backward()
    close(x.grad, gx)
    assert "_residuals" not in y.grad_fn.__dict__          # saved values freed with the graph
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    # a hook on the compiled node's output, and a grad_fn hook
    y = f(x)
    y.register_hook(lambda g: g * 10)
    (gx2,) = tg.autograd.grad(y, x)
    close(gx2, 10 * gx.detach().numpy())


def test_compiled_output_feeds_eager_ops_and_eager_inputs():
    f = tg.compile(lambda a, b: a * b + a)
    x = leaf(3, seed=4)
    a = x.exp()                                   # non-leaf input with its own grad_fn
    y = (f(a, x) ** 2).sum()
    y.backward()
    xt = to_torch(x)
    at = xt.exp()
    ((at * xt + at) ** 2).sum().backward()
    close(x.grad, xt.grad)


@pytest.mark.parametrize("order", [2, 3])
def test_higher_derivatives_through_compiled_code(order):
    f = tg.compile(lambda x: (x.tanh() ** 2 * x.sin()).sum())
    x = leaf(6, seed=5)
    xt = to_torch(x)
    y, yt = f(x), (xt.tanh() ** 2 * xt.sin()).sum()
    g, gt = y, yt
    for _ in range(order - 1):
        (g,) = tg.autograd.grad(g, x, create_graph=True)
        (gt,) = torch.autograd.grad(gt, xt, create_graph=True)
        g, gt = g.sum(), gt.sum()
    g.backward()
    gt.backward()
    close(x.grad, xt.grad)


def test_hessian_vector_product_of_compiled_mlp_loss():
    w1, w2 = leaf(4, 8, seed=1), leaf(8, 2, seed=2)
    f = tg.compile(lambda x, w1, w2: (tg.tanh(x @ w1) @ w2).pow(2).sum())
    x = leaf(3, 4, seed=3, req=False)
    v1, v2 = leaf(4, 8, seed=4, req=False), leaf(8, 2, seed=5, req=False)
    g1, g2 = tg.autograd.grad(f(x, w1, w2), (w1, w2), create_graph=True)
    h1, h2 = tg.autograd.grad((g1 * v1).sum() + (g2 * v2).sum(), (w1, w2))
    tw1, tw2 = to_torch(w1), to_torch(w2)
    tx, tv1, tv2 = (to_torch(t) for t in (x, v1, v2))
    t1, t2 = torch.autograd.grad((torch.tanh(tx @ tw1) @ tw2).pow(2).sum(), (tw1, tw2), create_graph=True)
    r1, r2 = torch.autograd.grad((t1 * tv1).sum() + (t2 * tv2).sum(), (tw1, tw2))
    close(h1, r1)
    close(h2, r2)


def test_module_parameters_get_gradients_and_updates_are_seen():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3)).double()
    cm = tg.compile(model)
    x = leaf(4, 5, req=False)
    target = tg.tensor([0, 2, 1, 1])
    loss = F.cross_entropy(cm(x), target)
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    F.cross_entropy(model(x), target).backward()
    for g, p in zip(got, model.parameters()):
        close(g, p.grad)
    opt = tg.optim.SGD(model.parameters(), lr=0.5)
    opt.step()
    close(cm(x), model(x))
    assert cm.cache.compiles == 1
    assert cm.training and isinstance(cm.parameters().__next__(), nn.Parameter)


def test_compiled_training_step_matches_eager_and_torch():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3))
    xs = rng.standard_normal((5, 8, 6))
    tw = torch.tensor(w, requires_grad=True)
    gw = tg.tensor(w, requires_grad=True)

    @tg.compile
    def loss_fn(x, w):
        return F.softmax(x @ w, dim=1).log().mean() * -1

    for x in xs:
        loss = loss_fn(tg.tensor(x), gw)
        loss.backward()
        with tg.no_grad():
            gw -= 0.1 * gw.grad
        gw.grad = None
        tl = -torch.softmax(torch.tensor(x) @ tw, dim=1).log().mean()
        tl.backward()
        with torch.no_grad():
            tw -= 0.1 * tw.grad
        tw.grad = None
        close(loss, tl)
    close(gw, tw)
    assert loss_fn.cache.compiles == 1


def test_fallback_warns_once_naming_the_line_and_runs_eagerly():
    def f(x):
        if x.sum() > 0:                          # data-dependent control flow
            return x * 2
        return x * 3
    cf = tg.compile(f)
    x = leaf(3)
    with pytest.warns(UserWarning, match=r"test_compile.py:\d+ \(`if x.sum\(\) > 0:"):
        y = cf(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y2 = cf(x)
    close(y, f(x))
    close(y2, f(x))
    y.sum().backward()
    assert x.grad is not None


@pytest.mark.parametrize("what", ["item", "tolist", "print"])
def test_fullgraph_raises_on_untraceable_code(what):
    def f(x):
        if what == "item":
            return x * x.sum().item()
        if what == "tolist":
            return x * len(x.tolist())
        print(x.detach().numpy())
        return x
    with pytest.raises(tg.compile.__globals__["CompileError"]):
        tg.compile(f, fullgraph=True)(leaf(3))
    with pytest.warns(UserWarning, match="running it eagerly"):
        tg.compile(f)(leaf(3))


def test_debug_env_prints_generated_source(monkeypatch, capsys):
    monkeypatch.setenv("TRACEGRAD_DEBUG", "1")
    tg.compile(lambda x: x.exp() * 2)(leaf(2))
    err = capsys.readouterr().err
    assert "generated forward source" in err and "exp(" in err and "generated backward source" in err
    assert "traced IR" not in err
    monkeypatch.setenv("TRACEGRAD_DEBUG", "2")
    tg.compile(lambda x: x.exp() * 2)(leaf(2))
    err = capsys.readouterr().err
    assert "---- traced IR ----" in err and "---- partition ----" in err


def test_float32_matches_torch():
    x = tg.randn(64, 32, requires_grad=True)
    f = tg.compile(lambda x: F.layer_norm(x, (32,)).relu().sum())
    f(x).backward()
    xt = to_torch(x)
    torch.nn.functional.layer_norm(xt, (32,)).relu().sum().backward()
    close(x.grad, xt.grad, rtol=1e-4, atol=1e-5)


def test_one_element_graphs_run_on_python_floats_and_keep_numpy_edge_cases():
    def chain(m, x):
        for _ in range(5):
            x = m.tanh(m.sin(x) * 1.01 + 0.1) ** 2 / (1 + x.exp())
        return x.sum()
    f = tg.compile(lambda x: chain(tg, x))
    x = leaf(1, seed=7)
    y = f(x)
    assert "_scalar" in f.last_program.fwd_fn.source and "v_x0 = x0.item()" in f.last_program.fwd_fn.source
    y.backward()
    xt = to_torch(x)
    chain(torch, xt).backward()
    close(y, chain(torch, xt))
    close(x.grad, xt.grad)
    g = tg.compile(lambda x: (1 / x, x.log()))
    z = tg.tensor([0.0], dtype=tg.float64)
    inv, lg = g(z)
    assert inv.dtype is tg.float64 and inv.shape == (1,)
    assert np.isinf(inv.detach().numpy()).all() and np.isneginf(lg.detach().numpy()).all()


def test_inplace_ops_are_traced_not_fallen_back_on():
    """In-place ops on intermediates are functionalized (no fallback warning); BatchNorm's
    running statistics in training are written back after the call, as eager updates them."""
    def inplace(x):
        y = x * 2
        y.add_(1)
        y.relu_()
        return y
    x = leaf(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = tg.compile(inplace)(x)
    ye = inplace(x)
    close(y, ye)
    y.sum().backward()
    g = x.grad.clone()
    x.grad = None
    ye.sum().backward()
    close(g, x.grad)
    bn, be = nn.BatchNorm1d(3).double(), nn.BatchNorm1d(3).double()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = tg.compile(bn)(x)
    oe = be(x)
    close(out, oe)
    assert out.grad_fn is not None and bn.num_batches_tracked.item() == 1
    close(bn.running_mean, be.running_mean)
    close(bn.running_var, be.running_var)


def test_random_ops_are_not_baked_into_the_program():
    f = tg.compile(lambda x: F.dropout(x, 0.5) + tg.rand(100))
    x = tg.ones(4, 100, dtype=tg.float64)
    with pytest.warns(UserWarning, match="random numbers"):
        a = f(x)
    b = f(x)
    assert not np.array_equal(a.numpy(), b.numpy())
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).double()
    model.eval()
    close(tg.compile(model)(leaf(2, 3, req=False)), model(leaf(2, 3, req=False)))


W_GLOBAL = tg.tensor([1.0, 2.0], dtype=tg.float64)


def test_rebinding_a_captured_tensor_recompiles():
    global W_GLOBAL
    scale = tg.tensor([3.0, 4.0], dtype=tg.float64)
    f = tg.compile(lambda x: x * W_GLOBAL * scale)
    x = tg.ones(2, dtype=tg.float64)
    close(f(x), [3.0, 8.0])
    W_GLOBAL = W_GLOBAL * 10                      # a new tensor under the same name
    close(f(x), [30.0, 80.0])
    assert f.cache.compiles == 2
    with tg.no_grad():
        W_GLOBAL.mul_(2)                          # in place: same tensor, read afresh
    close(f(x), [60.0, 160.0])
    assert f.cache.compiles == 2


def test_unused_output_of_a_multi_output_op_still_differentiates():
    # dead-code elimination drops the projection of the unused output; the derivative
    # rule of max(dim) / unbind still reads the outputs it needs
    x = leaf(4, 5)
    tx = to_torch(x)

    @tg.compile
    def f(x):
        values, _ = tg.max(x, dim=1)
        a, b, c, d = x.unbind(0)
        return (values * values).sum() + (b * c).sum()

    f(x).backward()
    ((tx.max(dim=1).values ** 2).sum() + (tx[1] * tx[2]).sum()).backward()
    close(x.grad, tx.grad)


@pytest.mark.parametrize("shape", [(1,), (7,)])
def test_non_finite_literals_in_generated_code(shape):
    fn = lambda x: (x.exp() * float("inf")).clamp(max=1.0) + (x - float("-inf")).minimum(x * 2)   # noqa: E731
    x = leaf(*shape, seed=3)
    got = tg.compile(fn)(x)
    close(got, fn(x))


# -- autograd.grad inside a compiled function: one program for derivatives of derivatives --

def _third(lib, x):
    y = (lib.tanh(x) ** 2 * lib.sin(x)).sum()
    (g1,) = lib.autograd.grad(y, x, create_graph=True)
    (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
    return lib.autograd.grad(g2.sum(), x)[0]


def test_a_third_derivative_compiles_into_one_program_that_matches_torch():
    x = leaf(50)
    c = tg.compile(lambda x: _third(tg, x), fullgraph=True)
    got = c(x)
    tx = to_torch(x)
    want = _third(torch, tx)
    close(got, want)
    close(got, _third(tg, x))
    assert not got.requires_grad and got.grad_fn is None       # create_graph=False: detached, as torch
    assert c.last_program.bwd_fn is None                       # nothing to differentiate: no backward program
    assert "tanh" in c.last_program.fwd_fn.source and c.last_program.fwd_fn.source.count("def ") == 1


def test_a_hessian_vector_product_compiles_whole_and_matches_torch():
    rng = np.random.default_rng(3)
    ws = [tg.tensor(rng.standard_normal(s) / 4, requires_grad=True) for s in ((5, 6), (6, 3))]
    vs = [tg.tensor(rng.standard_normal(w.shape)) for w in ws]
    x = tg.tensor(rng.standard_normal((4, 5)))

    def hvp(lib, x, ws, vs):
        loss = (lib.tanh(x @ ws[0]) @ ws[1]).pow(2).mean()
        gs = lib.autograd.grad(loss, ws, create_graph=True)
        return lib.autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)), ws)

    got = tg.compile(lambda x, ws, vs: hvp(tg, x, ws, vs), fullgraph=True)(x, ws, vs)
    want = hvp(torch, to_torch(x), [to_torch(w) for w in ws], [to_torch(v) for v in vs])
    for a, b in zip(got, want):
        close(a, b)


def test_a_gradient_taken_with_create_graph_inside_stays_differentiable_outside():
    x = leaf(7)
    c = tg.compile(lambda x: tg.autograd.grad((x.exp() * x).sum(), x, create_graph=True)[0], fullgraph=True)
    g1 = c(x)
    assert g1.requires_grad and g1.grad_fn is not None
    (g2,) = tg.autograd.grad(g1.sum(), x)
    tx = to_torch(x)
    (t1,) = torch.autograd.grad((tx.exp() * tx).sum(), tx, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), tx)
    close(g1, t1)
    close(g2, t2)


def test_grad_inside_a_compiled_function_takes_grad_outputs_and_allow_unused():
    x, u = leaf(4), leaf(4, seed=1)
    v = tg.tensor(np.arange(4.0), dtype=tg.float64)

    def f(lib, x, u, v):
        gx, gu = lib.autograd.grad(x.sin() * 3, (x, u), grad_outputs=v, allow_unused=True)
        (gm,) = lib.autograd.grad(u.sum(), x, materialize_grads=True)
        return gx, gu, gm

    got = tg.compile(lambda x, u, v: f(tg, x, u, v), fullgraph=True)(x, u, v)
    want = f(torch, to_torch(x), to_torch(u), to_torch(v))
    close(got[0], want[0])
    assert got[1] is None and want[1] is None
    close(got[2], want[2])
    close(got[2], np.zeros(4))


def test_grad_inside_a_compiled_function_raises_torchs_errors():
    x = leaf(3, req=False)
    with pytest.raises(CompileError, match="does not require grad"):
        tg.compile(lambda x: tg.autograd.grad(x.exp().sum(), x), fullgraph=True)(x)
    y = leaf(3)
    with pytest.raises(CompileError, match="appears to not have been used in the graph"):
        tg.compile(lambda x, y: tg.autograd.grad(x.exp().sum(), (x, y)), fullgraph=True)(leaf(3), y)
    # without fullgraph the user's own error raises as itself, once, with no "cannot be traced" warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            tg.compile(lambda x: tg.autograd.grad(x.exp().sum(), x))(x)


def _big_logits(seed=0):
    rng = np.random.default_rng(seed)
    return (tg.tensor(rng.standard_normal((1024, 200)), requires_grad=True), tg.tensor(rng.integers(0, 200, 1024)))


def test_backward_writes_its_gradient_over_saved_values_it_frees():
    x, y = _big_logits()
    f = tg.compile(lambda x, y: F.cross_entropy(x, y))
    loss = f(x, y)
    p = f.last_program
    assert p.bwd_donors, p.bwd_fn.source        # the saved exponentials can hold the gradient
    saved = loss.grad_fn.__dict__["_residuals"][p.bwd_donors[0]]
    g, = tg.autograd.grad(loss, x)
    assert np.shares_memory(g.numpy(), saved)
    xt = to_torch(x)
    torch.nn.functional.cross_entropy(xt, torch.tensor(y.numpy())).backward()
    close(g, xt.grad)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_backward_keeps_saved_values_it_may_need_again():
    x, y = _big_logits(1)
    f = tg.compile(lambda x, y: F.cross_entropy(x, y))
    loss = f(x, y)
    g1, = tg.autograd.grad(loss, x, retain_graph=True)
    g2, = tg.autograd.grad(loss, x)                 # the saved values were intact for this one
    close(g1, g2, rtol=0, atol=0)
    assert not np.shares_memory(g1.numpy(), g2.numpy())
    xt = to_torch(x)
    torch.nn.functional.cross_entropy(xt, torch.tensor(y.numpy())).backward()
    close(g2, xt.grad)


def test_backward_never_writes_over_an_output_the_caller_holds():
    # exp(x) is both the output and the value its backward reads: it must not become the gradient
    x = tg.tensor(np.random.default_rng(2).standard_normal((1024, 200)), requires_grad=True)
    f = tg.compile(lambda x: (x * 2).exp())
    out = f(x)
    assert f.last_program.bwd_donors               # it would, were the value not the caller's too
    before = out.detach().numpy().copy()
    g, = tg.autograd.grad(out, x, tg.ones_like(out))
    np.testing.assert_array_equal(out.detach().numpy(), before)
    close(g, 2 * np.exp(2 * x.detach().numpy()))


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("create_graph", [False, True])
def test_an_input_changed_in_place_before_the_backward_raises_torchs_error(create_graph, compiled):
    x, w = leaf(5, seed=1), leaf(5, seed=2, req=False)
    fn = lambda x, w: (x * w).sum()               # noqa: E731
    loss = (tg.compile(fn) if compiled else fn)(x, w)
    with tg.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError) as got:
        tg.autograd.grad(loss, x, create_graph=create_graph)
    xt, wt = to_torch(x), torch.tensor(w.numpy())
    lt = (xt * wt).sum()
    with torch.no_grad():
        wt.mul_(2)
    with pytest.raises(RuntimeError) as want:
        lt.backward()
    assert str(got.value) == str(want.value)


# -- a scalar's gradient taken with the forward, once the backward follows every call --------

def _train_calls(f, args, wrt, n):
    """n calls of f, each followed by autograd.grad of its result: the gradients of each."""
    out = []
    for _ in range(n):
        loss = f(*args)
        out.append((loss, tg.autograd.grad(loss, wrt)))
    return out


def test_a_scalar_gradient_is_taken_with_the_forward_once_the_backward_follows():
    x, y = _big_logits(3)
    f = tg.compile(lambda x, y: F.cross_entropy(x * 1.5, y))
    calls = _train_calls(f, (x, y), [x], 4)
    p = f.last_program
    assert p.spec is not None and p.streak >= 2           # the last calls ran the joint program
    assert "joint" in p.spec.source and "run_chunks" in p.spec.source
    xt = to_torch(x)
    lt = torch.nn.functional.cross_entropy(xt * 1.5, torch.tensor(y.numpy()))
    gt, = torch.autograd.grad(lt, xt)
    for loss, (g,) in calls:
        close(loss, lt)
        close(g, gt)


def test_speculated_gradients_take_the_seed_hooks_and_retain_graph():
    w = leaf(300, 7, seed=4)
    x = tg.tensor(np.random.default_rng(5).standard_normal((64, 300)))
    fn = lambda x, w: ((x @ w).tanh() ** 2).mean()        # noqa: E731
    f = tg.compile(fn)
    _train_calls(f, (x, w), [w], 3)
    assert f.last_program.spec is not None
    want, = tg.autograd.grad(fn(x, w), w)
    loss = f(x, w)
    assert "_grads" in loss.grad_fn.__dict__             # this call took its gradient already
    loss.register_hook(lambda g: g * 2)
    g1, = tg.autograd.grad(loss * 3, w, retain_graph=True)
    g2, = tg.autograd.grad(loss, w)                         # kept intact for this one
    close(g1, 6 * want.numpy())
    close(g2, 2 * want.numpy())
    loss = f(x, w)
    loss.backward(gradient=tg.tensor(0.5, dtype=tg.float64))
    close(w.grad, 0.5 * want.numpy())


def test_a_speculated_call_differentiates_again():
    w = leaf(300, 4, seed=6)
    x = tg.tensor(np.random.default_rng(7).standard_normal((50, 300)))
    fn = lambda x, w: (x @ w).sin().sum() * 0.1            # noqa: E731
    f = tg.compile(fn)
    _train_calls(f, (x, w), [w], 3)
    assert f.last_program.spec is not None
    v = tg.tensor(np.random.default_rng(8).standard_normal((300, 4)))
    loss = f(x, w)
    assert "_grads" in loss.grad_fn.__dict__
    g, = tg.autograd.grad(loss, w, create_graph=True)
    hv, = tg.autograd.grad((g * v).sum(), w)
    ge, = tg.autograd.grad(fn(x, w), w, create_graph=True)
    hve, = tg.autograd.grad((ge * v).sum(), w)
    close(hv, hve)


def test_calls_without_a_backward_stop_the_speculation():
    x, y = _big_logits(9)
    f = tg.compile(lambda x, y: F.cross_entropy(x, y))
    _train_calls(f, (x, y), [x], 3)
    p = f.last_program
    assert p.streak >= 2
    f(x, y)                               # an evaluation with grad on: its backward never comes
    f(x, y)
    assert p.streak == 0
    loss = f(x, y)
    assert "_grads" not in loss.grad_fn.__dict__
    g, = tg.autograd.grad(loss, x)
    xt = to_torch(x)
    gt, = torch.autograd.grad(torch.nn.functional.cross_entropy(xt, torch.tensor(y.numpy())), xt)
    close(g, gt)


def test_speculation_needs_a_scalar_output():
    x = leaf(600, 500, seed=10)
    f = tg.compile(lambda x: (x * 2).tanh())
    for _ in range(4):
        y = f(x)
        tg.autograd.grad(y, x, tg.ones_like(y))
    assert not f.last_program.spec_ok and f.last_program.spec is None


def test_explain_shows_the_joint_program_of_a_scalar_function():
    x, y = _big_logits(11)
    text = tg.explain(lambda x, y: F.cross_entropy(x, y), x, y, file=open(os.devnull, "w"), verbose=True)
    assert "==== generated joint forward+backward source ====" in text
    short = tg.explain(lambda x, y: F.cross_entropy(x, y), x, y, file=open(os.devnull, "w"))
    assert "joint forward+backward program (verbose=True shows it)" in short


def test_a_speculated_call_still_raises_when_an_input_changed_in_place():
    w = leaf(300, 7, seed=12)
    x = tg.tensor(np.random.default_rng(13).standard_normal((64, 300)))
    f = tg.compile(lambda x, w: ((x @ w).tanh() ** 2).mean())
    _train_calls(f, (x, w), [w], 3)
    loss = f(x, w)
    assert "_grads" in loss.grad_fn.__dict__
    with tg.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_one_element_joint_program_runs_on_python_floats():
    x = leaf(1, seed=14)
    fn = lambda x: (x.sin() * 1.01 + 0.1).tanh().sum()      # noqa: E731
    f = tg.compile(fn)
    _train_calls(f, (x,), [x], 3)
    p = f.last_program
    assert p.spec.__name__.endswith("_scalar")
    g, = tg.autograd.grad(f(x), x)
    ge, = tg.autograd.grad(fn(x), x)
    close(g, ge)


def test_higher_order_through_a_compiled_loss_keeps_hooks_and_freed_graph_errors():
    """torch's way (a compiled loss, autograd.grad(create_graph=True) outside it): a hook on
    the first derivative changes the second as torch's does, call after call (the cached
    backwards), and a second backward through the freed graph raises as torch's does."""
    xs = np.random.default_rng(5).standard_normal(50)
    cl = tg.compile(lambda x: (tg.tanh(x) ** 2).sum())
    tc = lambda x: (torch.tanh(x) ** 2).sum()       # noqa: E731
    for _ in range(3):
        got = []
        for lib, f in ((tg, cl), (torch, tc)):
            x = lib.tensor(xs, requires_grad=True)
            g1, = lib.autograd.grad(f(x), x, create_graph=True)
            g1.register_hook(lambda g: g * 2)
            s = g1.sum()
            g2, = lib.autograd.grad(s, x)
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                lib.autograd.grad(s, x)
            got.append((g1.detach().numpy(), g2.numpy()))
        for a, b in zip(*got):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f", ["tanh_mul", "pow", "exp_mul"])
def test_backward_of_one_create_graph_gradient_after_an_input_written_in_place_raises_as_torch_or_agrees(f):
    """gs = grad(loss, [a, b], create_graph=True) of a compiled loss is one program with two
    outputs; a backward of gs[0] alone recomputes its forward from a and b (the masked
    backward). With a written in place since, that read the new values: a gradient other
    than torch's (torch's nodes saved tanh(a), not a), with no error. It raises torch's
    in-place error now: never another number."""
    fs = {"tanh_mul": lambda m, a, b: (m.tanh(a) * b).sum(),
          "pow": lambda m, a, b: ((b.abs() + 0.5) ** m.tanh(a)).sum(),
          "exp_mul": lambda m, a, b: (m.exp(a) * b).sum()}
    rng = np.random.default_rng(3)
    av, bv = rng.standard_normal(4), rng.standard_normal(4)
    cl = tg.compile(lambda a, b: fs[f](tg, a, b))
    res = []
    for lib, fn in ((tg, cl), (torch, lambda a, b: fs[f](torch, a, b))):
        a, b = lib.tensor(av, requires_grad=True), lib.tensor(bv, requires_grad=True)
        gs = lib.autograd.grad(fn(a, b), [a, b], create_graph=True)
        with lib.no_grad():
            a.zero_()
        try:
            gs[0].sum().backward()
            res.append((a.grad, b.grad))
        except RuntimeError as e:
            res.append(str(e))
    got, want = res
    if isinstance(got, str):
        assert "modified by an inplace operation" in got
    else:
        assert not isinstance(want, str)
        for x, y in zip(got, want):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-12)

"""The autograd API against torch: backward, grad, retain_graph, inputs, accumulation,
higher-order derivatives, grad_fn names and next_functions, grad modes, graph surgery."""
import threading

import numpy as np
import pytest
import torch

import tracegrad as tg
from conftest import assert_close, to_tg


def both(fn):
    """Run fn(module) under torch and tracegrad."""
    return fn(torch), fn(tg)


def test_readme_example():
    def run(m):
        w = m.tensor([1.], requires_grad=True)
        x = m.tensor([2.], requires_grad=True)
        y = m.mul(m.add(w, x), m.add(w, 1))
        y.backward(retain_graph=True)
        y.backward()
        g, = m.autograd.grad(x ** 3, x, create_graph=True)
        return w.grad, x.grad, g, y
    (wt, xt, gt, yt), (wg, xg, gg, yg) = both(run)
    assert_close(wg, wt)
    assert_close(xg, xt)
    assert_close(gg, gt)
    assert repr(wg) == repr(wt) == "tensor([10.])"
    assert repr(gg) == repr(gt)
    assert type(yg.grad_fn).__name__ == "MulBackward0"
    names = [(type(n).__name__, i) for n, i in yg.grad_fn.next_functions]
    assert names == [(type(n).__name__, i) for n, i in yt.grad_fn.next_functions]


def test_grad_fn_repr_and_name():
    x = tg.tensor([1., 2.], requires_grad=True)
    y = x * 2
    assert repr(y.grad_fn).startswith("<MulBackward0 object at 0x")
    assert y.grad_fn.name() == "MulBackward0"
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad"
    assert acc.variable is x
    assert acc.next_functions == ()
    # the accumulator is unique per leaf while the graph holds it
    z = x + 1
    assert z.grad_fn.next_functions[0][0] is acc


def test_next_functions_output_slots_and_constants():
    def run(m):
        x = m.arange(6.).reshape(2, 3).requires_grad_()
        a, b = x.split(2, dim=1) if m is torch else x.split(2, dim=1)
        c = m.tensor([1., 2., 3.])
        y = b * a[:, :1] + c[:1]
        return [(type(n).__name__ if n is not None else None, i) for n, i in y.grad_fn.next_functions], \
            [(type(n).__name__ if n is not None else None, i) for n, i in
             y.grad_fn.next_functions[0][0].next_functions]
    (t0, t1), (g0, g1) = both(run)
    assert t0 == g0
    assert t1 == g1


@pytest.mark.parametrize("retain", [False, True])
def test_second_backward_error(retain):
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        y = (x * x).sum()
        y.backward(retain_graph=retain)
        try:
            y.backward()
        except RuntimeError as e:
            return str(e), x.grad
        return None, x.grad
    (et, gt), (eg, gg) = both(run)
    assert et == eg
    assert_close(gg, gt)


def test_backward_through_graph_without_saved_tensors_twice():
    # AddBackward saves nothing, so torch allows a second backward without retain_graph
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        y = (x + 1).sum()
        y.backward()
        y.backward()
        return x.grad
    t, g = both(run)
    assert_close(g, t)


def test_non_scalar_backward_error_and_gradient():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 2
        try:
            y.backward()
        except RuntimeError as e:
            msg = str(e)
        y.backward(m.tensor([1., 0.5, 2.]))
        return msg, x.grad
    (mt, gt), (mg, gg) = both(run)
    assert mt == mg == "grad can be implicitly created only for scalar outputs"
    assert_close(gg, gt)


def test_gradient_shape_mismatch_error():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        try:
            (x * 2).backward(m.ones(2))
        except RuntimeError as e:
            return str(e)
    t, g = both(run)
    assert t == g


def test_accumulation_into_grad():
    def run(m):
        x = m.tensor([1., -2., 3.], requires_grad=True)
        for k in range(3):
            (x * x * k).sum().backward()
        g1 = x.grad.clone()
        x.grad = None
        (x.sin()).sum().backward()
        return g1, x.grad
    (a, b), (c, d) = both(run)
    assert_close(c, a)
    assert_close(d, b)


def test_autograd_backward_multiple_roots_and_grad_tensors():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        y = m.tensor([3., 4.], requires_grad=True)
        a = x * y
        b = (x + y).exp()
        m.autograd.backward([a, b], grad_tensors=[m.tensor([1., 2.]), m.tensor([0.5, 0.25])])
        return x.grad, y.grad
    (a, b), (c, d) = both(run)
    assert_close(c, a)
    assert_close(d, b)


def test_backward_inputs_restricts_accumulation():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        y = m.tensor([3., 4.], requires_grad=True)
        h = x * y
        z = (h * h).sum()
        h.retain_grad()
        z.backward(inputs=[x])
        return x.grad, y.grad, h.grad
    (a, b, c), (d, e, f) = both(run)
    assert_close(d, a)
    assert b is None and e is None
    assert_close(f, c)          # retained grads are filled when backward passes through


def test_backward_inputs_non_leaf():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        h = x * 3
        z = (h * h).sum()
        z.backward(inputs=[h])
        return h.grad, x.grad
    (a, b), (c, d) = both(run)
    assert_close(c, a)
    assert b is None and d is None


def test_grad_allow_unused_and_materialize():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        u = m.tensor([3.], requires_grad=True)
        y = (x * x).sum()
        try:
            m.autograd.grad(y, [x, u], retain_graph=True)
        except RuntimeError as e:
            msg = str(e)
        gx, gu = m.autograd.grad(y, [x, u], allow_unused=True, retain_graph=True)
        mx, mu = m.autograd.grad(y, [x, u], materialize_grads=True)
        return msg, gx, gu, mx, mu
    (a, b, c, d, e), (f, g, h, i, j) = both(run)
    assert a == f
    assert_close(g, b)
    assert c is None and h is None
    assert_close(i, d)
    assert_close(j, e)


def test_grad_errors():
    def run(m):
        out = []
        x = m.tensor([1., 2.], requires_grad=True)
        c = m.tensor([1., 2.])
        for f in (lambda: m.autograd.grad((x * 2).sum(), c),
                  lambda: m.autograd.grad((c * 2).sum(), x),
                  lambda: m.autograd.grad((x * 2), x)):
            try:
                f()
                out.append(None)
            except RuntimeError as e:
                out.append(str(e))
        return out
    t, g = both(run)
    assert t == g


def test_grad_does_not_touch_dot_grad_and_grad_outputs():
    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        y = x @ x
        g, = m.autograd.grad(y, x, grad_outputs=m.tensor([[1., 0.], [2., 1.]]))
        return g, x.grad
    (a, b), (c, d) = both(run)
    assert_close(c, a)
    assert b is None and d is None


def test_nonleaf_grad_warning_and_retain_grad():
    x = tg.tensor([1., 2.], requires_grad=True)
    h = x * 2
    with pytest.warns(UserWarning, match="is not a leaf Tensor"):
        assert h.grad is None
    h2 = x * 3
    h2.retain_grad()
    assert h2.retains_grad
    (h2 * h2).sum().backward()
    assert_close(h2.grad, torch.tensor([6., 12.]))


@pytest.mark.parametrize("order", [2, 3, 4])
def test_higher_order_derivatives(order):
    def run(m):
        x = m.tensor([0.3, -1.2, 2.0], dtype=m.float64, requires_grad=True)
        y = (m.tanh(x) ** 2 * x.exp()).sum()
        outs = []
        g = y
        for _ in range(order):
            g, = m.autograd.grad(g.sum() if g.ndim else g, x, create_graph=True)
            outs.append(g)
        return outs
    t, g = both(run)
    for a, b in zip(g, t):
        assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_create_graph_backward_then_grad_of_grad():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        y = (x ** 3).sum()
        y.backward(create_graph=True)
        gx = x.grad
        z = (gx * gx).sum()
        g2, = m.autograd.grad(z, x)
        return gx, g2
    (a, b), (c, d) = both(run)
    assert_close(c, a)
    assert_close(d, b)
    assert c.grad_fn is not None


def test_broadcast_gradients_reduce_to_input_shape():
    def run(m):
        a = m.arange(6., dtype=m.float64).reshape(2, 3).requires_grad_()
        b = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
        c = m.tensor([[2.], [3.]], dtype=m.float64, requires_grad=True)
        s = m.tensor(1.5, dtype=m.float64, requires_grad=True)
        (a * b + c / b * s).sum().backward()
        return a.grad, b.grad, c.grad, s.grad
    t, g = both(run)
    for x, y in zip(g, t):
        assert_close(x, y)


def test_mixed_dtype_gradients_cast_back():
    def run(m):
        a = m.tensor([1., 2.], dtype=m.float32, requires_grad=True)
        b = m.tensor([3., 4.], dtype=m.float64, requires_grad=True)
        (a * b).sum().backward()
        return a.grad, b.grad
    t, g = both(run)
    for x, y in zip(g, t):
        assert_close(x, y)


def test_fan_out_is_summed():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        y = x * x + x.sin() * x + x
        y.sum().backward()
        return x.grad
    t, g = both(run)
    assert_close(g, t)


def test_requires_grad_propagation_and_leaf_rules():
    x = tg.tensor([1., 2.], requires_grad=True)
    c = tg.tensor([1., 2.])
    assert (c * 2).requires_grad is False and (c * 2).grad_fn is None
    y = x * c
    assert y.requires_grad and not y.is_leaf and x.is_leaf and c.is_leaf
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        tg.tensor([1, 2]).requires_grad_()
    # comparisons and integer results never require grad
    assert not (x > 1).requires_grad
    assert not x.argmax().requires_grad


def test_no_grad_enable_grad_set_grad_enabled():
    x = tg.tensor([1.], requires_grad=True)
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        y = x * 2
        with tg.enable_grad():
            z = x * 2
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is not None

    @tg.no_grad()
    def f(a):
        return a * 2

    @tg.no_grad
    def f2(a):
        return a * 2
    assert f(x).grad_fn is None and f2(x).grad_fn is None
    prev = tg.set_grad_enabled(False)
    assert not tg.is_grad_enabled()
    tg.set_grad_enabled(True)
    assert tg.is_grad_enabled()
    with tg.set_grad_enabled(False):
        assert (x * 2).grad_fn is None
    assert tg.is_grad_enabled()

    @tg.set_grad_enabled(False)
    def g(a):
        return a * 2
    assert g(x).grad_fn is None and tg.is_grad_enabled()


def test_grad_mode_is_per_thread():
    seen = {}
    barrier = threading.Barrier(2)

    def worker(enable):
        with tg.set_grad_enabled(enable):
            barrier.wait()
            x = tg.tensor([1.], requires_grad=True)
            seen[enable] = (x * 2).requires_grad
            barrier.wait()
    ts = [threading.Thread(target=worker, args=(e,)) for e in (True, False)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {True: True, False: False}


def test_detach_shares_data_and_version():
    x = tg.tensor([1., 2.], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 10.
    assert y[0].item() == 10.
    assert y._version == d._version == 1
    y2 = x * 3
    y2.detach_()
    assert y2.grad_fn is None and not y2.requires_grad and y2.is_leaf


def test_data_attribute():
    x = tg.tensor([1., 2.], requires_grad=True)
    d = x.data
    assert not d.requires_grad
    d.mul_(2)
    assert x.tolist() == [2., 4.]
    x.data = tg.tensor([5., 6.])
    assert x.tolist() == [5., 6.] and x.requires_grad


def test_graph_freed_when_unreferenced():
    import weakref
    x = tg.tensor([1., 2.], requires_grad=True)
    y = (x * 2).sin()
    ref = weakref.ref(y.grad_fn)
    ref2 = weakref.ref(y.grad_fn.next_functions[0][0])
    del y
    assert ref() is None and ref2() is None


def test_saved_tensors_freed_after_backward():
    x = tg.tensor([1., 2.], requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    assert node._saved_result is not None
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        node._saved_result


def test_program_cache_reused_across_steps():
    from tracegrad.autograd import engine
    w = tg.randn(4, 3, requires_grad=True)
    before = engine.STATS["misses"]
    for _ in range(5):
        x = tg.randn(8, 4)
        ((x @ w).tanh().sum()).backward()
    assert engine.STATS["misses"] - before == 1


def test_ir_prints_and_dot():
    x = tg.tensor([1., 2.], requires_grad=True)
    y = (x * 2 + 1).sin().sum()
    g = tg.ir.graph_of(y)
    text = str(g)
    assert "def forward(" in text and "mul(" in text and "sin(" in text and "f32[2]" in text
    dot = g.to_dot()
    assert dot.startswith("digraph") and "->" in dot
    b = tg.ir.backward_graph_of(y)
    assert "def backward(" in str(b) and "cos(" in str(b)
    tg.ir.verify(g)
    tg.ir.verify(b)
    # the backward graph computes the gradient: run it through the reference interpreter
    from tracegrad.interpret import run_numpy
    from tracegrad.autograd import engine
    from tracegrad.autograd.recorded import _recorded
    order, index, roots = _recorded(y)
    prog = engine.build_program(order, index, roots, [(n, 0) for n in order if n._prim is None], {})
    args = []
    for kind, info in prog.binds:
        args.append(np.ones((), np.float32) if kind == "seed" else engine._saved_value(order, info, False))
    out, = run_numpy(prog.bwd, args)
    np.testing.assert_allclose(out, 2 * np.cos(np.array([3., 5.])), rtol=1e-6)


def test_create_graph_backward_from_its_cached_generated_function_matches_torch():
    """A create_graph backward runs its IR through one generated function made on the first
    call and reused after: a multi-output op (max over a dim: values and indices), Python
    constants and a reduction give torch's gradients and second derivatives, call after call."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 5))

    def f(m, x):
        v, _ = m.max(x * 2.5, 1)
        return (m.sin(x).sum(0) * 3).sum() + (v ** 2).sum()
    for _ in range(3):
        x = tg.tensor(xs, requires_grad=True)
        tx = torch.tensor(xs, requires_grad=True)
        g, = tg.autograd.grad(f(tg, x), x, create_graph=True)
        tgr, = torch.autograd.grad(f(torch, tx), tx, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), tgr.detach().numpy(), rtol=1e-12, atol=1e-12)
        assert g.grad_fn is not None
        gg, = tg.autograd.grad((g * g).sum(), x)
        tgg, = torch.autograd.grad((tgr * tgr).sum(), tx)
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-12, atol=1e-12)

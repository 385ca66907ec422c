"""nn.Module full backward hooks (register_full_backward_hook / _pre_hook and the global
register_module_full_backward_hook) against torch: what the hooks receive, replacing
grad_input / grad_output, order, inputs without grad, removal, and compile (it runs eagerly,
never without the hooks)."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _setup(m, x_requires_grad=True):
    m.manual_seed(0)
    lin = m.nn.Linear(3, 2).double()
    with m.no_grad() if m is torch else tg.no_grad():
        lin.weight.copy_(m.tensor(np.arange(6.0).reshape(2, 3) / 7 - 0.3, dtype=m.float64))
        lin.bias.copy_(m.tensor([0.1, -0.2], dtype=m.float64))
    x = m.tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=x_requires_grad)
    return lin, x


def _np(t):
    return None if t is None else np.asarray(t.detach().tolist())


def _run(m, replace_input=False, replace_output=False, x_requires_grad=True):
    lin, x = _setup(m, x_requires_grad)
    log = []

    def pre(mod, grad_output):
        log.append(("pre", [_np(g) for g in grad_output]))
        if replace_output:
            return (grad_output[0] * 3,)

    def hook(mod, grad_input, grad_output):
        log.append(("hook", [_np(g) for g in grad_input], [_np(g) for g in grad_output]))
        if replace_input:
            return (grad_input[0] * 2,)

    lin.register_full_backward_pre_hook(pre)
    h = lin.register_full_backward_hook(hook)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = lin(x)
        (y ** 2).sum().backward()
    warned = [str(r.message)[:60] for r in w]
    grads = (_np(x.grad), _np(lin.weight.grad), _np(lin.bias.grad))
    h.remove()
    lin.weight.grad = None
    y = lin(x)
    (y ** 2).sum().backward()
    return log, grads, _np(lin.weight.grad), type(y.grad_fn).__name__, warned


def _same(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q)
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize("replace_input,replace_output,x_requires_grad",
                         [(False, False, True), (True, False, True), (False, True, True), (True, True, True),
                          (False, False, False), (False, True, False)])
def test_full_backward_hooks_match_torch(replace_input, replace_output, x_requires_grad):
    _same(_run(tg, replace_input, replace_output, x_requires_grad),
          _run(torch, replace_input, replace_output, x_requires_grad))


def _global(m):
    lin, x = _setup(m)
    seen = []
    mm = m.nn.modules.module
    h1 = mm.register_module_full_backward_hook(lambda mod, gi, go: seen.append(("global", type(mod).__name__)))
    lin.register_full_backward_hook(lambda mod, gi, go: seen.append(("own", type(mod).__name__)))
    try:
        lin(x).sum().backward()
    finally:
        h1.remove()
    lin(x).sum().backward()
    return seen


def test_global_module_full_backward_hook_matches_torch():
    assert _global(tg) == _global(torch)


def test_invalid_number_of_grad_input_raises_as_torch():
    def run(m):
        lin, x = _setup(m)
        lin.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
        with pytest.raises(RuntimeError) as e:
            lin(x).sum().backward()
        return str(e.value)
    assert run(tg) == run(torch)


def test_double_backward_calls_hook_once_as_torch():
    def run(m):
        x = m.tensor([0.3], requires_grad=True)
        y = m.tensor([0.7])
        func = m.nn.MSELoss()
        counter = [0]
        func.register_full_backward_hook(lambda mod, gi, go: counter.__setitem__(0, counter[0] + 1))
        f = func(x, y)
        (gx,) = m.autograd.grad(f, x, create_graph=True)
        first = counter[0]
        (gg,) = m.autograd.grad(gx, x)
        return first, counter[0], float(gx), float(gg)
    assert run(tg) == run(torch)


def test_compiled_module_with_backward_hook_runs_eagerly_with_its_hook():
    lin, x = _setup(tg)
    calls = []
    lin.register_full_backward_hook(lambda mod, gi, go: calls.append(1))
    f = tg.compile(lambda t: (lin(t) ** 2).sum())
    with pytest.warns(UserWarning, match="backward hooks"):
        y = f(x)
    y.backward()
    assert calls == [1]
    tlin, tx = _setup(torch)
    (tlin(tx) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def _same_as_torch(fn):
    from test_autograd_parity import same
    return same(fn, expect=None)


def _mod(m, forward):
    class M(m.nn.Module):
        pass
    M.forward = forward
    return M()


def _lists(gs):
    return [None if g is None else g.tolist() for g in gs]


def test_grad_input_has_an_entry_per_argument_and_zeros_where_no_gradient_reached():
    # torch's BackwardHookFunction materializes: b (no grad) and c (its output unused) get
    # zeros; a number argument gets None
    def run(m):
        mod = _mod(m, lambda self, a, b, k, c: (a * b * k, c))
        log = []
        mod.register_full_backward_hook(lambda mm, gi, go: log.append((_lists(gi), _lists(go))))
        a = m.tensor([1., 2.], requires_grad=True)
        c = m.tensor([5., 6.], requires_grad=True)
        o1, o2 = mod(a, m.tensor([3., 4.]), 2, c)
        o1.sum().backward()
        return log, a.grad, c.grad
    _same_as_torch(run)


@pytest.mark.parametrize("ret", ["other_size", "other_dtype", "none", "a_list"])
def test_what_a_full_backward_hook_returns_is_checked_as_torch(ret):
    def run(m):
        mod = _mod(m, lambda self, x: x * m.tensor([3., 4.]))
        r = {"other_size": lambda gi: (m.ones(3),), "other_dtype": lambda gi: (gi[0].double(),),
             "none": lambda gi: (None,), "a_list": lambda gi: [gi[0] * 2]}[ret]
        mod.register_full_backward_hook(lambda mm, gi, go: r(gi))
        x = m.ones(1, 2, requires_grad=True)
        mod(x).sum().backward()
        return x.grad
    _same_as_torch(run)


@pytest.mark.parametrize("ret", ["other_size", "other_dtype"])
def test_what_a_full_backward_pre_hook_returns_is_checked_as_torch(ret):
    def run(m):
        mod = _mod(m, lambda self, x: x * m.tensor([3., 4.]))
        r = {"other_size": lambda go: (m.ones(3),), "other_dtype": lambda go: (go[0].double(),)}[ret]
        mod.register_full_backward_pre_hook(lambda mm, go: r(go))
        mod(m.ones(1, 2, requires_grad=True)).sum().backward()
    _same_as_torch(run)


def test_a_hook_of_a_module_whose_inputs_need_no_grad_may_only_return_none():
    def run(m):
        mod = _mod(m, lambda self, x: x * m.tensor([3., 4.], requires_grad=True))
        mod.register_full_backward_hook(lambda mm, gi, go: (m.ones(2),))
        mod(m.ones(1, 2)).sum().backward()
    _same_as_torch(run)

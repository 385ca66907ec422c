"""A compiled function's results equal the eager function's in cases that differed without a
word before:

- an output that is a view of another output (`return y, y[1:]`, `y.t()`, `y.detach()`) was a
  separate tensor: an in-place op on it did not reach the other's graph (x.grad 2 where eager
  gives 20) or version counter;
- a tensor read by value while tracing (`self.temp.item()`) was guarded by its version alone:
  a write through `.data` or numpy, or `t.data = other`, left the old value in the program;
- a hook registered on a parameter after the first call was not called by the backward()
  inside a whole step, nor a global module forward hook for a module passed as an argument;
- from the third call on a scalar loss's gradient is taken with the forward: a seed other
  than one (`(loss / 3).backward()`) scaled it, a few ulps off eager's backward, which
  carries the seed through every step, and a write through `.data` between the forward and
  the backward was not seen;
- a whole step that called backward(retain_graph=True) returned its output without a graph.

The reference is the same function run eagerly (itself checked against torch elsewhere); a
fallback to eager is allowed where it says why, never a different number."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.compile import CompileError
from tracegrad.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook


def quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def test_in_place_on_an_output_that_views_another_reaches_its_graph():
    def f(x):
        y = x * 2
        return y, y[1:]

    cf = tg.compile(f, fullgraph=True)
    got = []
    for fn in (f, cf, cf, cf):
        x = tg.ones(3, requires_grad=True)
        y, v = fn(x)
        v.mul_(10)
        y.sum().backward()
        got.append((x.grad.numpy(), y.detach().numpy(), y._version, type(y.grad_fn).__name__, v._base is y))
    for g in got[1:]:
        np.testing.assert_array_equal(g[0], got[0][0])
        np.testing.assert_array_equal(g[1], got[0][1])
        assert g[2:] == got[0][2:] == (1, "CopySlices", True)


def test_transposed_and_reshaped_outputs_of_one_value():
    def f(x):
        y = x * 2
        return y, y.t(), y.reshape(-1)

    cf = tg.compile(f, fullgraph=True)
    res = []
    for fn in (f, cf, cf):
        w = tg.arange(4.0).reshape(2, 2).requires_grad_()
        y, t, r = fn(w)
        t.mul_(3)
        r.sum().backward()
        res.append((w.grad.numpy(), y.detach().numpy()))
    for g in res[1:]:
        np.testing.assert_array_equal(g[0], res[0][0])
        np.testing.assert_array_equal(g[1], res[0][1])


def test_a_detached_output_shares_the_version_counter():
    """exp saves its result: writing the detached alias must make the backward raise, as eager."""
    def f(x):
        y = x.exp()
        return y, y.detach()

    cf = tg.compile(f, fullgraph=True)
    for fn in (f, cf, cf):
        x = tg.ones(3, requires_grad=True)
        y, d = fn(x)
        assert d._version == y._version == 0
        d.mul_(2)
        assert y._version == 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()

    def g(x):
        y = x * 2
        return y, y.detach()[1:]

    cg = tg.compile(g, fullgraph=True)
    for fn in (g, cg, cg):
        y, v = fn(tg.ones(3, requires_grad=True))
        v.add_(1)
        assert y.tolist() == [2.0, 3.0, 3.0] and y._version == v._version == 1
        assert not v.requires_grad


class Scaled(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("temp", tg.tensor(1.0))
        self.register_buffer("table", tg.arange(100.0))

    def forward(self, x):
        return x / self.temp.item() + self.table.tolist()[7]


@pytest.mark.parametrize("write", ["data_fill", "data_rebind", "numpy", "copy_", "big_data_fill", "big_rebind",
                                   "big_numpy"])
def test_a_value_read_while_tracing_follows_every_write(write):
    m = Scaled()
    cm = tg.compile(m)
    x = tg.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # traced, not run eagerly
        cm(x)
    if write == "data_fill":
        m.temp.data.fill_(4.0)
    elif write == "data_rebind":
        m.temp.data = tg.tensor(8.0)
    elif write == "numpy":
        m.temp.numpy()[...] = 2.0
    elif write == "copy_":
        with tg.no_grad():
            m.temp.copy_(tg.tensor(5.0))
    elif write == "big_data_fill":
        m.table.data.mul_(3)
    elif write == "big_rebind":
        m.table.data = tg.arange(100.0) * 2
    elif write == "big_numpy":
        pytest.skip("a write through numpy into a large tensor read by value is not seen (documented)")
    np.testing.assert_array_equal(quiet(cm, x).numpy(), m(x).numpy())
    np.testing.assert_array_equal(quiet(cm, x).numpy(), m(x).numpy())


def whole_step_with_hooks(register):
    tg.manual_seed(0)
    lin = tg.nn.Linear(3, 1)
    opt = tg.optim.SGD(lin.parameters(), lr=0.1)
    x = tg.ones(2, 3)

    def step():
        opt.zero_grad()
        loss = lin(x).sum()
        loss.backward()
        opt.step()
        return loss

    return lin, step


@pytest.mark.parametrize("hook", ["tensor_hook", "post_accumulate", "remove_again"])
def test_a_hook_registered_after_the_first_call_of_a_whole_step_runs(hook):
    results = []
    for compiled in (False, True):
        lin, step = whole_step_with_hooks(hook)
        fn = tg.compile(step) if compiled else step
        quiet(fn)
        if hook == "tensor_hook":
            lin.weight.register_hook(lambda g: g * 0)
        elif hook == "post_accumulate":
            def times_100(p):
                p.grad.mul_(100)
            lin.bias.register_post_accumulate_grad_hook(times_100)
        else:
            lin.weight.register_hook(lambda g: g * 0).remove()
        for _ in range(3):
            quiet(fn)
        results.append((lin.weight.grad.numpy(), lin.bias.grad.numpy(), lin.weight.detach().numpy(),
                        lin.bias.detach().numpy()))
    for a, b in zip(*results):
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("register", [register_module_forward_hook, register_module_forward_pre_hook])
def test_a_global_module_hook_applies_to_a_module_passed_as_an_argument(register):
    tg.manual_seed(0)
    lin = tg.nn.Linear(3, 1)
    x = tg.ones(2, 3)
    f = tg.compile(lambda m, x: m(x))
    quiet(f, lin, x)
    hook = (lambda mod, inp, out: out * 0) if register is register_module_forward_hook else \
        (lambda mod, inp: (inp[0] * 0,))
    h = register(hook)
    try:
        np.testing.assert_array_equal(quiet(f, lin, x).detach().numpy(), lin(x).detach().numpy())
    finally:
        h.remove()
    np.testing.assert_array_equal(quiet(f, lin, x).detach().numpy(), lin(x).detach().numpy())


@pytest.mark.parametrize("seed", [0.7, 1 / 3, 1e-10, -2.0])
def test_a_seed_other_than_one_is_carried_through_the_backward(seed):
    """(loss * seed).backward() on every call, the gradient bit for bit as eager's, before and
    after the calls from which the program would take the gradient with the forward."""
    def g(w):
        return (w.sin() * 3.3).sum()

    cg = tg.compile(g)
    tg.manual_seed(0)
    w0 = tg.randn(1000)
    for call in range(5):
        grads = []
        for fn in (g, cg):
            w = w0.clone().requires_grad_()
            (fn(w) * (seed if call != 2 else 1.0)).backward()
            grads.append(w.grad.numpy())
        np.testing.assert_array_equal(grads[1], grads[0])


def test_a_write_through_data_between_forward_and_backward_is_seen():
    def f(w, x):
        return (w * x).sum()

    cf = tg.compile(f)
    w = tg.ones(3, requires_grad=True)
    for _ in range(5):
        got = []
        for fn in (f, cf):
            x = tg.tensor([1.0, 2.0, 3.0])
            w.grad = None
            out = fn(w, x)
            x.data.mul_(2)                # not autograd's to see (as torch): the backward reads x as it is
            out.backward()
            got.append(w.grad.numpy())
        np.testing.assert_array_equal(got[1], got[0])
        np.testing.assert_array_equal(got[0], [2.0, 4.0, 6.0])


def test_a_whole_step_keeping_its_graph_returns_the_graph():
    def run(compiled):
        tg.manual_seed(0)
        m = tg.nn.Linear(3, 2)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        x = tg.randn(4, 3)

        def step(x):
            opt.zero_grad()
            out = m(x)
            out.pow(2).sum().backward(retain_graph=True)
            opt.step()
            return out

        fn = tg.compile(step) if compiled else step
        out = None
        for call in range(3):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                out = fn(x)
            if compiled and call == 0:
                assert any("graph it kept" in str(i.message) for i in w)
            assert out.requires_grad
            out.sum().backward()
        return [p.grad.numpy() for p in m.parameters()] + [p.detach().numpy() for p in m.parameters()]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(b, a)


def test_in_place_on_an_argument_with_history_names_the_reason():
    w = tg.ones(2, requires_grad=True)
    x = w * 2
    with pytest.raises(CompileError, match="argument that has autograd history"):
        tg.compile(lambda x: x.add_(1), fullgraph=True)(x)
    y = quiet(tg.compile(lambda x: x.add_(1)), x)
    assert y is x and x.tolist() == [3.0, 3.0] and type(x.grad_fn).__name__ == "AddBackward0"


def test_embedding_with_max_norm_falls_back_naming_the_renormalization():
    tg.manual_seed(0)
    e = tg.nn.Embedding(5, 4, max_norm=1.0)
    f = tg.compile(lambda i: e(i), fullgraph=True)
    with pytest.raises(CompileError, match="max_norm"):
        f(tg.tensor([1, 2]))
    tg.manual_seed(0)
    e2 = tg.nn.Embedding(5, 4, max_norm=1.0)
    got = quiet(tg.compile(lambda i: e(i)), tg.tensor([1, 2, 1]))
    np.testing.assert_array_equal(got.detach().numpy(), e2(tg.tensor([1, 2, 1])).detach().numpy())


def test_arguments_that_compare_equal_but_differ_are_new_keys():
    """A frozen dataclass, a namedtuple, a frozenset or an object whose __eq__ leaves an attribute
    out, equal to the one a program was traced with but holding 2.0 for 2 (or 5.0 for 2.0): the
    cache keyed it by ==, and the guards read the traced object's attributes, so the program of
    the first ran (int64 result, or the old factor)."""
    import collections
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        scale: float

    @dataclasses.dataclass(frozen=True)
    class Named:
        name: str
        scale: float = dataclasses.field(compare=False)

    NT = collections.namedtuple("NT", "scale")
    x = tg.tensor([1, 2, 3])
    cases = [(lambda x, c: x * c.scale, Cfg(2), Cfg(2.0)), (lambda x, c: x * c.scale, Named("a", 2.0), Named("a", 5.0)),
             (lambda x, c: x * c.scale, NT(2), NT(2.0)), (lambda x, c: x * next(iter(c)), frozenset({2}),
                                                          frozenset({2.0}))]
    for f, first, second in cases:
        cf = tg.compile(f)
        for arg in (first, second, first):
            got, want = quiet(cf, x, arg), f(x, arg)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    same = Cfg(3.0)
    cf = tg.compile(lambda x, c: x * c.scale)
    lin = tg.nn.Linear(3, 2)
    cm = tg.compile(lambda x, fn, d: fn(x.to(d)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # the same object again, or an equal value made anew: no recompile
        for _ in range(12):
            cf(x, same)
            cm(tg.ones(1, 3), lin.forward, tg.device("cpu"))

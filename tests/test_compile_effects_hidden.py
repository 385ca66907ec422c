"""Python side effects the bytecode hides from a first reading: a container's method reached
through getattr, a builtin method kept in a variable or a container, operator.methodcaller,
callbacks found by iterating a dict's items. Compiled, each must run as often as eagerly (and
as under torch.compile): at every call, and once (not twice) on a call that falls back to
eager after a partial trace."""
import functools
import operator
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _plain(lib, y):
    return y * 2 + 1


def _branchy(lib, y):
    # a branch on a tensor's value: tracegrad's trace stops here and the call runs eagerly
    if float(y.sum()) > 100:
        return y * 2
    return y + 1


class _Box:
    pass


def getattr_const(log, tail):
    o = _Box()
    o.log = log

    def f(lib, y):
        getattr(o, "log").append(1)
        return tail(lib, y)
    return f


def getattr_computed(log, tail):
    o = _Box()
    o.log = log

    def f(lib, y):
        getattr(o, "lo" + "g").append(1)
        return tail(lib, y)
    return f


def getattr_name_from_closure(log, tail):
    o = _Box()
    o.log = log
    name = "log"

    def f(lib, y):
        getattr(o, name, None).append(1)
        return tail(lib, y)
    return f


def bound_method_in_closure(log, tail):
    cb = log.append

    def f(lib, y):
        cb(1)
        return tail(lib, y)
    return f


def bound_method_in_list(log, tail):
    cbs = [log.append]

    def f(lib, y):
        cbs[0](1)
        return tail(lib, y)
    return f


def bound_method_in_dict_items(log, tail):
    ops = {"add": log.append}

    def f(lib, y):
        for _, fn in ops.items():
            fn(1)
        return tail(lib, y)
    return f


def bound_method_in_partial(log, tail):
    p = functools.partial(log.append, 1)

    def f(lib, y):
        p()
        return tail(lib, y)
    return f


def iadd_bound(log, tail):
    grow = log.__iadd__

    def f(lib, y):
        grow([1])
        return tail(lib, y)
    return f


def methodcaller_append(log, tail):
    def f(lib, y):
        operator.methodcaller("append", 1)(log)
        return tail(lib, y)
    return f


def methodcaller_kept(log, tail):
    push = operator.methodcaller("append", 1)

    def f(lib, y):
        push(log)
        return tail(lib, y)
    return f


def hooks_through_reduce(log, tail):
    hooks = [lambda v: (log.append(1), v)[1]]

    def f(lib, y):
        return tail(lib, functools.reduce(lambda a, h: h(a), hooks, y))
    return f


def callbacks_through_map(log, tail):
    cbs = (log.append,)

    def f(lib, y):
        list(map(lambda c: c(1), cbs))
        return tail(lib, y)
    return f


CASES = [getattr_const, getattr_computed, getattr_name_from_closure, bound_method_in_closure, bound_method_in_list,
         bound_method_in_dict_items, bound_method_in_partial, iadd_bound, methodcaller_append, methodcaller_kept,
         hooks_through_reduce, callbacks_through_map]


def _run(make, tail, lib, comp):
    log = []
    fn = make(log, tail)
    f = comp(functools.partial(fn, lib)) if comp else functools.partial(fn, lib)
    outs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            y = f(lib.arange(4, dtype=lib.float64) + i)
            outs.append(y.detach().numpy().copy())
    return list(log), outs


@pytest.mark.parametrize("tail", [_plain, _branchy], ids=["traced", "partial-trace"])
@pytest.mark.parametrize("make", CASES, ids=lambda m: m.__name__)
def test_hidden_effect_runs_at_every_call(make, tail):
    eager_log, eager_out = _run(make, tail, tg, None)
    log, out = _run(make, tail, tg, tg.compile)
    torch_log, torch_out = _run(make, tail, torch, None)
    assert log == eager_log == torch_log == [1, 1, 1], (log, eager_log, torch_log)
    for a, b, c in zip(out, eager_out, torch_out):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("make", [getattr_computed, bound_method_in_list, methodcaller_append],
                         ids=lambda m: m.__name__)
def test_hidden_effect_matches_torch_compile(make):
    log, _ = _run(make, _plain, tg, tg.compile)
    torch_log, _ = _run(make, _plain, torch, lambda f: torch.compile(f, backend="eager"))
    assert log == torch_log == [1, 1, 1]


@pytest.mark.parametrize("make", [getattr_computed, bound_method_in_closure, methodcaller_kept],
                         ids=lambda m: m.__name__)
def test_hidden_effect_warning_names_the_line(make):
    f = tg.compile(functools.partial(make([], _plain), tg))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(tg.ones(2))
    texts = [str(w.message) for w in caught if "side effect" in str(w.message)]
    assert texts and __file__.rstrip("c") in texts[0], texts
    assert "running it eagerly" in texts[0]


def test_getattr_of_a_tensor_attribute_still_compiles():
    # getattr with a computed name on a module (its layers by name) is no side effect
    class Net(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc0 = tg.nn.Linear(3, 3)
            self.fc1 = tg.nn.Linear(3, 2)

        def forward(self, x):
            for i in range(2):
                x = getattr(self, f"fc{i}")(x)
            return x
    tg.manual_seed(0)
    net = Net()
    f = tg.compile(net)
    x = tg.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = f(x)
    np.testing.assert_allclose(got.detach().numpy(), net(x).detach().numpy(), rtol=1e-6)
    assert f.cache.compiles == 1


def test_methodcaller_of_a_reading_method_still_compiles():
    # methodcaller of a name that changes nothing (sum) is no side effect
    get = operator.methodcaller("sum")

    def fn(y):
        return get(y) * 2
    f = tg.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = f(tg.arange(4.0))
    assert got.item() == 12.0

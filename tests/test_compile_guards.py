"""A compiled call never returns a stale result: whatever the trace read besides its argument
tensors (globals, closures, helpers, containers, attributes, module state) is guarded, and a
change recompiles. Each case is checked against eager tracegrad and against torch.compile,
which gets every one of them right."""
import math
import types
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F


def T(a, req=False):
    return tg.tensor(np.asarray(a, dtype=np.float32), requires_grad=req)


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a),
                                  np.asarray(b.detach().numpy() if hasattr(b, "detach") else b))


def check_both(make, mutate, args, n=3):
    """make(lib) -> (fn, state); fn compiled by tracegrad and by torch.compile; after each
    mutate(lib, state, i) the compiled result equals the library's eager result."""
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        fn, state = make(lib)
        cf = comp(fn)
        xs = [lib.tensor(np.asarray(a, dtype=np.float32)) for a in args]
        for i in range(n):
            if i:
                mutate(lib, state, i)
            got, want = cf(*xs), fn(*xs)
            np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy(),
                                          err_msg=f"{lib.__name__} call {i}")
    return cf


BETA = 0.5


def test_float_global_that_changes():
    def f(x):
        return x * BETA

    cf = tg.compile(f)
    x = T([1., 2.])
    same(cf(x), [0.5, 1.])
    global BETA
    try:
        BETA = 0.25
        same(cf(x), [0.25, 0.5])
        BETA = 0.5
        same(cf(x), [0.5, 1.])
        assert cf.cache.compiles == 2          # back to the first program, not a third
    finally:
        BETA = 0.5


def test_closure_float_kl_annealing():
    def make(lib):
        state = {"beta": 0.0}

        def loss(x):
            return (x * x).sum() * state["beta"] + x.sum()
        return loss, state

    def anneal(lib, state, i):
        state["beta"] = i / 10

    check_both(make, anneal, [[1., 2., 3.]], n=4)


def test_nonlocal_float_closure():
    scale = 1.0

    def f(x):
        return x * scale

    cf = tg.compile(f)
    x = T([3.])
    same(cf(x), [3.])
    scale = 2.0  # noqa: F841  (the closure cell changes)
    same(cf(x), [6.])


W_GLOBAL = tg.tensor([1., 2.])


def _helper():
    return W_GLOBAL


def test_tensor_through_a_helper_function():
    global W_GLOBAL
    cf = tg.compile(lambda x: x * _helper())
    x = T([1., 1.])
    same(cf(x), [1., 2.])
    old = W_GLOBAL
    try:
        W_GLOBAL = tg.tensor([5., 7.])
        same(cf(x), [5., 7.])
    finally:
        W_GLOBAL = old


def test_tensor_in_a_dict_a_list_and_an_attribute():
    params = {"w": tg.tensor([1., 2.])}
    layers = [tg.tensor([3., 4.])]
    obj = types.SimpleNamespace(b=tg.tensor([10., 20.]))
    cf = tg.compile(lambda x: x * params["w"] * layers[0] + obj.b)
    x = T([1., 1.])
    same(cf(x), [13., 28.])
    params["w"] = tg.tensor([2., 2.])
    same(cf(x), [16., 28.])
    layers[0] = tg.tensor([1., 1.])
    same(cf(x), [12., 22.])
    obj.b = tg.tensor([0., 0.])
    same(cf(x), [2., 2.])


class Cfg:
    def __init__(self):
        self.scale = 2.0


def test_user_object_float_attribute():
    cfg = Cfg()
    cf = tg.compile(lambda x: x * cfg.scale)
    x = T([1.])
    same(cf(x), [2.])
    cfg.scale = 3.0
    same(cf(x), [3.])


def test_tensor_read_by_value_while_tracing():
    thr = tg.tensor(0.5)

    def f(x):
        return x * float(thr)

    cf = tg.compile(f)
    x = T([2.])
    same(cf(x), [1.])
    thr.fill_(2.0)                       # same object, new values: its version changed
    same(cf(x), [4.])


# -- modules ------------------------------------------------------------------------------------

def _modules_both(build, change, x, n=2):
    for lib in (tg, torch):
        lib.manual_seed(0)
        m = build(lib)
        if lib is torch:
            src = next(iter(tg_state.values()))      # same parameters in both libraries
            m.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})
        else:
            tg_state.clear()
            tg_state["m"] = m
        cm = tg.compile(m) if lib is tg else torch.compile(m, backend="eager")
        xt = lib.tensor(np.asarray(x, dtype=np.float32))
        for i in range(n):
            if i:
                change(lib, m)
            got, want = cm(xt), m(xt)
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6,
                                       err_msg=f"{lib.__name__} call {i}")
        yield lib, m, cm, xt


tg_state = {}


def test_leaky_relu_slope_and_layer_norm_eps():
    x = np.array([[-1., 2., -3., 4.]], np.float32)
    for lib, m, cm, xt in _modules_both(lambda lib: lib.nn.Sequential(lib.nn.LeakyReLU(0.1), lib.nn.LayerNorm(4)),
                                        lambda lib, m: (setattr(m[0], "negative_slope", 0.5),
                                                        setattr(m[1], "eps", 1.0)), x):
        pass


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.scale = 1.0

    def forward(self, x):
        return self.lin(x) * self.scale


def test_user_module_float_attribute_and_swapped_submodule():
    m = Scaled()
    cm = tg.compile(m)
    x = T(np.ones((1, 3)))
    same(cm(x), m(x))
    m.scale = 4.0
    same(cm(x), m(x))
    m.lin = nn.Linear(3, 2)
    same(cm(x), m(x))


def test_swapped_activation_in_sequential():
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    cm = tg.compile(m)
    x = T([[-5., 1.]])
    same(cm(x), m(x))
    m[1] = nn.Tanh()
    same(cm(x), m(x))


def test_rebound_buffer():
    class B(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("shift", tg.tensor([1., 1.]))

        def forward(self, x):
            return x + self.shift

    m = B()
    cm = tg.compile(m)
    x = T([0., 0.])
    same(cm(x), [1., 1.])
    m.shift = tg.tensor([3., 4.])
    same(cm(x), [3., 4.])


def test_submodule_train_inside_an_eval_parent():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    m.eval()
    cm = tg.compile(m)
    x = T(np.ones((2, 4)))
    same(cm(x), m(x))
    m[1].train()                           # dropout inside the eval'd parent is on again
    tg.manual_seed(1)
    y = cm(x)
    assert (y.detach().numpy() == 0).any(), "dropout in training mode must drop"
    m[1].eval()
    same(cm(x), m(x))


def test_requires_grad_flipped_after_first_call():
    lin = nn.Linear(3, 1)
    cm = tg.compile(lin)
    x = T(np.ones((2, 3)))
    for p in lin.parameters():
        p.requires_grad_(False)
    y = cm(x)
    assert not y.requires_grad
    for p in lin.parameters():
        p.requires_grad_(True)                   # unfreeze: gradients must flow again
    cm(x).sum().backward()
    assert lin.weight.grad is not None and lin.bias.grad is not None
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.full((1, 3), 2.0))


def test_forward_hook_added_after_compiling():
    lin = nn.Linear(2, 2)
    cm = tg.compile(lin)
    x = T([[1., 2.]])
    cm(x)
    lin.register_forward_hook(lambda mod, inp, out: out * 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # a hook may make the call run eagerly
        y = cm(x)
    same(y, [[0., 0.]])


# -- constants ----------------------------------------------------------------------------------

def test_int_and_float_constants_are_different_programs():
    f = tg.compile(lambda x, k: x * k)
    xi = tg.tensor([1, 2])
    a, b = f(xi, 2), f(xi, 2.0)
    ta, tb = torch.tensor([1, 2]) * 2, torch.tensor([1, 2]) * 2.0
    assert a.dtype == tg.int64 and str(ta.dtype) == "torch.int64"
    assert b.dtype == tg.float32 and str(tb.dtype) == "torch.float32"
    assert f.cache.compiles == 2


def test_signed_zero_constants_are_different_programs():
    f = tg.compile(lambda x, c: x * c)
    x = T([1., -1.])
    p = f(x, 0.0).numpy()
    n = f(x, -0.0).numpy()
    assert list(np.signbit(p)) == [False, True]
    assert list(np.signbit(n)) == [True, False]
    tp = (torch.tensor([1., -1.]) * -0.0).numpy()
    assert list(np.signbit(tp)) == list(np.signbit(n))


def test_nested_constants_keyed_by_bits():
    f = tg.compile(lambda x, cfg: x * cfg[0] + cfg[1])
    x = T([1.])
    assert f(x, (1, 0.0)).dtype == tg.float32
    y = f(x, (1, -0.0))
    z = f(tg.tensor([1]), (1, 0))
    assert z.dtype == tg.int64 and f.cache.compiles == 3
    assert y.numpy()[0] == 1.0


def test_true_and_one_are_different():
    f = tg.compile(lambda x, k: x + k)
    xb = tg.tensor([True, False])
    r1 = f(xb, True).numpy()
    r2 = f(xb, 1).numpy()
    np.testing.assert_array_equal(r1, (torch.tensor([True, False]) + True).numpy())
    np.testing.assert_array_equal(r2, (torch.tensor([True, False]) + 1).numpy())


# -- the recompile limit ---------------------------------------------------------------------------

def test_recompile_limit_warns_once_then_runs_eagerly_and_stays_right():
    f = tg.compile(lambda x, k: x * k, cache_limit=3)
    x = T([1., 2.])
    with pytest.warns(RuntimeWarning, match="recompile limit") as rec:
        for i in range(10):
            same(f(x, 0.5 + i), x.numpy() * (0.5 + i))
    assert len([w for w in rec if "recompile limit" in str(w.message)]) == 1
    assert len(f.cache) == 3
    same(f(x, 0.5), x.numpy() * 0.5)            # the compiled programs still serve their keys


def test_guard_overhead_is_a_handful_of_checks():
    lin = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    cm = tg.compile(lin)
    cm(T(np.ones((2, 4))))
    (guards, _), = next(iter(cm.cache.entries.values()))
    # one guard per module over its whole state (training flag, parameters, submodules, hooks, attributes)
    assert len(guards) <= len(list(lin.modules())) + 2


def test_dynamic_true_compiles_sizes_symbolically():
    f = tg.compile(lambda x: x * 2, dynamic=True)
    for n in (2, 3, 7):
        same(f(T(np.ones(n))), np.full(n, 2.0))
    assert f.cache.compiles == 1

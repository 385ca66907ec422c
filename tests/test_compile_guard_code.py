"""A compiled program's guards run as one generated function (runtime/check_code.py). Each
kind of guard still fires there: after each change below the generated check names a
failing guard (not merely the one-by-one guards it stands for), and the same one as they
do; while nothing changed it passes. The whole step's optimizer and .grad guard is checked
against its reference key (functionalize.guard_key) the same way."""
import types

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from tracegrad.nn.modules import module as module_mod
from tracegrad.runtime.sources import Guards
from tracegrad import functionalize
import importlib

from test_compile_guards import Scaled

compile_mod = importlib.import_module("tracegrad.compile")


def T(a, req=False):
    return tg.tensor(np.asarray(a, dtype=np.float32), requires_grad=req)


def guards_of(cf):
    """The guards of the program the last call ran."""
    (key, bucket), = cf.cache.entries.items()
    return bucket[0][0]


def fires(cf, args, change, expect, calls=1):
    """cf called on args; the generated check passes; after change() it names a failing
    guard whose description holds `expect`, the one the guards one by one name."""
    for _ in range(calls):
        cf(*args)
    g = guards_of(cf)
    env = (args, {})
    assert g.check(env) == -1 and g.failed(env) is None
    change()
    i = g.check(env)
    assert i >= 0, f"the generated check missed the change ({i})"
    assert expect in g.guards[i].what
    assert g.failed(env) == g.failed_one_by_one(env) == g.guards[i].what


# -- modules --------------------------------------------------------------------------------------

def test_module_float_attribute():
    m = nn.Sequential(nn.LeakyReLU(0.1), nn.LayerNorm(4))
    fires(tg.compile(m), (T([[1., -2., 3., -4.]]),), lambda: setattr(m[0], "negative_slope", 0.5), "state")
    m = nn.Sequential(nn.LeakyReLU(0.1), nn.LayerNorm(4))
    fires(tg.compile(m), (T([[1., -2., 3., -4.]]),), lambda: setattr(m[1], "eps", 1e-3), "state")


def test_module_float_attribute_same_value_other_sign_of_zero():
    m = nn.LeakyReLU(0.0)
    fires(tg.compile(m), (T([-1., 2.]),), lambda: setattr(m, "negative_slope", -0.0), "state")


def test_rebound_buffer():
    m = nn.BatchNorm1d(3)
    m.eval()
    fires(tg.compile(m), (T(np.ones((2, 3))),), lambda: setattr(m, "running_mean", tg.zeros(3)), "state")


def test_parameter_renamed_or_buffer_added():
    lin = nn.Linear(3, 2)

    def rename():
        ps = lin._parameters
        ps["bias2"] = ps.pop("bias")           # the same tensors under other names
    fires(tg.compile(lin), (T(np.ones((2, 3))),), rename, "state")
    lin = nn.Linear(3, 2)
    fires(tg.compile(lin), (T(np.ones((2, 3))),), lambda: lin.register_buffer("extra", tg.zeros(1)), "state")


def test_swapped_submodule():
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())

    def swap():
        m[1] = nn.Tanh()
    fires(tg.compile(m), (T([[1., 2.]]),), swap, "state")


def test_submodule_train_inside_eval_parent():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    m.eval()
    fires(tg.compile(m), (T(np.ones((2, 4))),), lambda: m[1].train(), "state")


def test_requires_grad_flipped():
    lin = nn.Linear(3, 1)
    fires(tg.compile(lin), (T(np.ones((2, 3))),), lambda: lin.bias.requires_grad_(False), "state")


def test_parameter_given_new_data_of_another_shape():
    lin = nn.Linear(3, 2)

    def grow():
        lin.weight.data = tg.zeros(2, 4)
    fires(tg.compile(lin), (T(np.ones((2, 3))),), grow, "state")


def test_parameter_given_new_data_of_another_dtype():
    lin = nn.Linear(3, 2)

    def widen():
        lin.bias.data = tg.zeros(2, dtype=tg.float64)
    fires(tg.compile(lin), (T(np.ones((2, 3))),), widen, "state")


def test_forward_hook_on_a_submodule_and_a_global_one():
    m = nn.Sequential(nn.Linear(2, 2))
    fires(tg.compile(m), (T([[1., 2.]]),), lambda: m[0].register_forward_hook(lambda *a: None), "state")
    for hooks in (module_mod._global_forward_hooks, module_mod._global_forward_pre_hooks):
        m = nn.Sequential(nn.Linear(2, 2))
        key = object()
        try:
            fires(tg.compile(m), (T([[1., 2.]]),), lambda: hooks.__setitem__(key, lambda *a: None),
                  "global module hooks")
        finally:
            hooks.pop(key, None)


def test_user_module_attribute_changed_or_added():
    m = Scaled()
    fires(tg.compile(m), (T(np.ones((1, 3))),), lambda: setattr(m, "scale", 2.0), "state")
    m = Scaled()
    fires(tg.compile(m), (T(np.ones((1, 3))),), lambda: setattr(m, "forward", lambda x: x), "state")


# -- functions --------------------------------------------------------------------------------------

BETA = 0.5
COUNT = 1


def test_global_float_int_and_bits():
    global BETA, COUNT
    f = tg.compile(lambda x: x * BETA)
    try:
        fires(f, (T([1.]),), lambda: globals().__setitem__("BETA", 0.25), "global 'BETA'")
        BETA = 0.0
        f = tg.compile(lambda x: x * BETA)
        fires(f, (T([1.]),), lambda: globals().__setitem__("BETA", -0.0), "global 'BETA'")
    finally:
        BETA = 0.5
    g = tg.compile(lambda x: x * COUNT)
    try:
        fires(g, (T([1.]),), lambda: globals().__setitem__("COUNT", 1.0), "global 'COUNT'")
    finally:
        COUNT = 1


def test_closure_variable():
    scale = 1.0

    def f(x):
        return x * scale

    def change():
        nonlocal scale
        scale = 3.0
    fires(tg.compile(f), (T([1.]),), change, "closure variable 'scale'")


def test_default_argument():
    def f(x, k=2.0):
        return x * k
    fires(tg.compile(f), (T([1.]),), lambda: setattr(f, "__defaults__", (3.0,)), "defaults")


def test_tensor_in_a_dict_a_list_and_an_attribute():
    params, layers, obj = {"w": T([1.])}, [T([2.])], types.SimpleNamespace(b=T([3.]))

    def f(x):
        return x * params["w"] * layers[0] + obj.b
    fires(tg.compile(f), (T([1.]),), lambda: params.__setitem__("w", T([5.])), "items of")
    fires(tg.compile(f), (T([1.]),), lambda: layers.__setitem__(0, T([5.])), "items of")
    fires(tg.compile(f), (T([1.]),), lambda: layers.append(T([5.])), "items of")
    fires(tg.compile(f), (T([1.]),), lambda: setattr(obj, "b", T([5.])), "attributes b")
    fires(tg.compile(f), (T([1.]),), lambda: params.__setitem__("v", params.pop("w")), "items of")


def test_equal_keys_of_two_dicts_are_two_objects():
    # dict keys are compared by identity: each dict's own key object, not an equal one
    k1, k2 = "".join(["a", "b"]), "".join(["a", "b"])
    assert k1 == k2 and k1 is not k2
    d1, d2 = {k1: T([1.])}, {k2: T([2.])}
    f = tg.compile(lambda x: x * d1["ab"] + d2["ab"])
    x = T([1.])
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), [3.])
    assert f.cache.compiles == 1
    fires(f, (x,), lambda: d2.__setitem__("ab", T([5.])), "items of")


def test_tensor_read_by_value():
    thr = tg.tensor(0.5)
    fires(tg.compile(lambda x: x * float(thr)), (T([2.]),), lambda: thr.fill_(2.0), "the values of")


def test_tensor_read_by_value_through_a_closure_compiles_once():
    thr = tg.tensor(0.5)
    cf = tg.compile(lambda x: x * float(thr))
    x = T([2.])
    for _ in range(4):
        np.testing.assert_array_equal(cf(x).numpy(), [1.])
    assert cf.cache.compiles == 1
    thr.fill_(2.0)
    np.testing.assert_array_equal(cf(x).numpy(), [4.])
    assert cf.cache.compiles == 2


GONE = 2.0


def test_a_test_that_raises_is_judged_one_by_one():
    global GONE
    f = tg.compile(lambda x: x * GONE)
    x = T([1.])
    f(x)
    g = guards_of(f)
    env = ((x,), {})
    try:
        del GONE                              # the generated read raises KeyError
        assert g.check(env) == -2
        assert "global 'GONE'" in g.failed(env)
    finally:
        GONE = 2.0
    assert g.failed(env) is None


def test_generated_check_holds_no_user_text():
    m = nn.Linear(2, 2)
    name = "odd\nname = __import__('os')"
    setattr(m, name, 1.5)
    cm = tg.compile(m)
    fires(cm, (T([[1., 2.]]),), lambda: setattr(m, name, 2.5), "state")
    assert "odd" not in guards_of(cm).check.source


# -- a whole training step ----------------------------------------------------------------------------

def _step(momentum=0.0, set_to_none=True):
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=momentum)

    def step(x, y):
        opt.zero_grad(set_to_none=set_to_none)
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    x, y = T(np.ones((5, 4))), tg.tensor([0, 1, 0, 1, 1])
    return m, opt, tg.compile(step), (x, y)


def test_step_learning_rate_is_an_input_not_a_guard():
    m, opt, cf, args = _step()
    cf(*args)
    g = guards_of(cf)
    opt.param_groups[0]["lr"] = 0.05
    assert g.check((args, {})) == -1


@pytest.mark.parametrize("change, expect", [
    (lambda m, opt: opt.param_groups[0].__setitem__("momentum", 0.9), "items of"),
    (lambda m, opt: opt.param_groups[0].__setitem__("lr", tg.tensor(0.1)), "optimizer"),
    (lambda m, opt: opt.param_groups[0]["params"].pop(), "items of"),
    (lambda m, opt: opt.add_param_group({"params": [tg.zeros(2, requires_grad=True)]}), "items of"),
    (lambda m, opt: opt.state[m[0].weight].__setitem__("momentum_buffer", tg.zeros(3, 4)), "state"),
])
def test_step_optimizer_changes(change, expect):
    m, opt, cf, args = _step()
    fires(cf, args, lambda: change(m, opt), expect)


def test_step_grad_existence():
    m, opt, cf, args = _step(set_to_none=False)
    # the first call found no .grad, the second the ones the first made: a program each
    fires(cf, args, lambda: setattr(m[0].weight, "grad", None), "the .grad tensors it read", calls=2)
    assert cf.cache.compiles == 2


def _step_guards(opt, tensors):
    spec = ([opt], tensors)
    return Guards([compile_mod._step_guard(spec)]), spec


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_step_guard_against_its_reference_key(momentum):
    """The step guard alone: its generated tests fail exactly where guard_key changes (and
    on the few stricter cases named), never pass where it changed."""
    m = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=momentum)
    x = T(np.ones((5, 4)))
    m(x).sum().backward()
    opt.step()                  # with momentum: a buffer per parameter
    ps = list(m.parameters())
    changes = [
        # a program reads the momentum at every call: it assumes only whether it is zero
        ("momentum", lambda: opt.param_groups[0].__setitem__("momentum", 0.0 if momentum else 0.5)),
        ("momentum type", lambda: opt.param_groups[0].__setitem__("momentum", tg.tensor(momentum))),
        ("nesterov type", lambda: opt.param_groups[0].__setitem__("nesterov", 0)),
        ("weight_decay", lambda: opt.param_groups[0].__setitem__("weight_decay", 0.01)),
        ("lr type", lambda: opt.param_groups[0].__setitem__("lr", tg.tensor(0.1))),
        ("one parameter fewer", lambda: opt.param_groups[0]["params"].pop()),
        ("a new group", lambda: opt.param_groups.append({**opt.param_groups[0], "params": [ps[0]]})),
        ("state added", lambda: opt.state[ps[1]].__setitem__("extra", tg.zeros(1))),
        ("state dropped", lambda: opt.state.pop(ps[1], None) if momentum else
         opt.state[ps[1]].__setitem__("momentum_buffer", tg.zeros(1))),
        ("grad gone", lambda: setattr(ps[0], "grad", None)),
        ("another grad tensor", lambda: setattr(ps[1], "grad", ps[1].grad.clone())),   # the program read the old one
    ]
    for what, change in changes:
        saved = ([dict(g, params=list(g["params"])) for g in opt.param_groups],
                 {k: dict(v) for k, v in opt.state.items()}, [p.grad for p in ps])
        g, spec = _step_guards(opt, ps)
        key = functionalize.guard_key(*spec)
        assert g.check(None) == -1, what
        change()
        assert functionalize.guard_key(*spec) != key, what        # the reference sees it ...
        assert g.check(None) == 0, what                            # ... and so do the tests
        opt.param_groups[:] = saved[0]
        opt.state.clear()
        opt.state.update(saved[1])
        for p, gr in zip(ps, saved[2]):
            p.grad = gr
        g2, _ = _step_guards(opt, ps)
        assert g2.check(None) == -1 and g.check(None) == -1, what
    # options read at every call: another nonzero value (float or int) is the same key
    g, spec = _step_guards(opt, ps)
    key = functionalize.guard_key(*spec)
    for k, v in (("lr", 0.5), ("momentum", momentum and 0.25), ("dampening", 0.0), ("weight_decay", 0.0), ("lr", 1)):
        opt.param_groups[0][k] = v
    assert functionalize.guard_key(*spec) == key and g.check(None) == -1


def test_guards_and_write_back_free_what_they_read_without_the_collector():
    # the generated check and write-back are no cycles: a dropped compiled step frees its
    # module at once, as the guards' closures did
    import gc
    import weakref
    m = nn.Linear(3, 2)
    opt = tg.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss
    cf = tg.compile(step)
    was = gc.isenabled()
    gc.disable()
    try:
        cf(T(np.ones((4, 3))))
        assert cf.last_program.write_back is not None
        alive = weakref.ref(m)
        del cf, step, opt, m
        assert alive() is None
    finally:
        if was:
            gc.enable()

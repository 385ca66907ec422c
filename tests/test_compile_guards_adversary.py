"""State a compiled function reads, changed between calls in the ways a user might: each case
recompiles (or runs eagerly) rather than return the first trace's result. Compared, at every
step, with the eager function, with torch.compile's result and with torch's eager one."""
import array
import builtins
import contextvars
import functools
import types

import numpy as np
import pytest
import torch

import tracegrad as tg


def scenario(make, steps=3, torch_compiled=True):
    """make(lib) -> (fn, mutate): fn(x) reads some state, mutate(i) changes it. For tracegrad
    (compiled) and torch (torch.compile), the compiled result equals the eager one at each step;
    and tracegrad's equals torch's."""
    results = {}
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager") if torch_compiled else f)):
        fn, mutate = make(lib)
        cf = comp(fn)
        x = lib.tensor(np.array([1.0, -2.0, 3.0], np.float32))
        for i in range(steps):
            if i:
                mutate(i)
            got, want = cf(x), fn(x)
            np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy(),
                                          err_msg=f"{lib.__name__}, step {i}")
            results.setdefault(i, []).append(got.detach().numpy())
    for i, (a, b) in results.items():
        np.testing.assert_array_equal(a, b, err_msg=f"tracegrad vs torch, step {i}")


def test_a_descriptor_on_the_class_whose_get_reads_its_own_state():
    def make(lib):
        class Scale:
            def __init__(self):
                self.v = 2.0

            def __get__(self, obj, tp):
                return self.v
        d = Scale()

        class M:
            k = d
        m = M()

        def mutate(i):
            d.v = float(i + 5)
        return (lambda x: x * m.k), mutate
    scenario(make)


def test_a_builtin_patched_after_the_trace():
    """`builtins.max = ...` after the first call: here in a namespace of its own (its own
    builtins dict, which the process's code does not read)."""
    def make(lib):
        ns = {"__builtins__": dict(vars(builtins))}
        exec("def fn(x):\n    return x * max(2.0, 1.0) + abs(-1.0)\n", ns)

        def mutate(i):
            ns["__builtins__"]["max"] = lambda *a: 9.0 + i
        return ns["fn"], mutate
    scenario(make)


def test_a_global_defined_later_hides_a_builtin():
    def make(lib):
        ns = {"__builtins__": builtins}
        exec("def fn(x):\n    return x * max(2.0, 1.0)\n", ns)

        def mutate(i):
            ns["max"] = lambda *a: 4.0 + i
        return ns["fn"], mutate
    scenario(make, torch_compiled=False)      # torch.compile (2.13) keeps the builtin here


def test_a_static_method_replaced_on_a_class_read_directly():
    def make(lib):
        class N:
            @staticmethod
            def h(x):
                return x * 2

        def mutate(i):
            N.h = staticmethod(lambda x: x * (7 + i))
        return (lambda x: N.h(x)), mutate
    scenario(make)


def test_a_dict_on_a_class_read_through_the_class():
    def make(lib):
        class Cfg:
            table = {"scale": 2.0}

        def mutate(i):
            Cfg.table["scale"] = float(i + 3)
        return (lambda x: x * Cfg.table["scale"]), mutate
    scenario(make)


@pytest.mark.parametrize("clear", [True, False])
def test_an_lru_cache_helper_that_reads_a_global(clear):
    """The trace calls the wrapper, as eager does: with the cache cleared the new value, with
    it kept the cached one; a change of what the wrapped function reads retraces."""
    def make(lib):
        state = [2.0]

        @functools.lru_cache(None)
        def scale():
            return state[0]

        def mutate(i):
            state[0] = float(i + 3)
            if clear:
                scale.cache_clear()
        return (lambda x: x * scale()), mutate
    scenario(make, torch_compiled=False)      # torch.compile traces through the cache, ignoring it


def test_a_context_variable():
    def make(lib):
        cv = contextvars.ContextVar("scale", default=2.0)

        def mutate(i):
            cv.set(float(i + 5))
        return (lambda x: x * cv.get()), mutate
    scenario(make, torch_compiled=False)      # torch.compile has no guard on a ContextVar's value either


@pytest.mark.parametrize("kind", ["bytearray", "array"])
def test_a_mutable_buffer_read_by_item(kind):
    def make(lib):
        buf = bytearray(b"\x02") if kind == "bytearray" else array.array("d", [2.0])

        def mutate(i):
            buf[0] = i + 5 if kind == "bytearray" else float(i + 5)
        return (lambda x: x * buf[0]), mutate
    scenario(make, torch_compiled=False)


def test_an_object_inside_a_list_argument():
    """A list or dict argument's key spells out its scalars; an object inside it is keyed by
    identity alone, so its attributes are guarded as a global object's."""
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        class Cfg:
            def __init__(self):
                self.k = 2.0
        c = Cfg()

        def fn(cfgs, x):
            return x * cfgs[0].k
        cf = comp(fn)
        x = lib.tensor([1.0, -2.0, 3.0])
        for k in (2.0, 5.0, -1.5):
            c.k = k
            np.testing.assert_array_equal(cf([c], x).numpy(), fn([c], x).numpy(), err_msg=lib.__name__)
            np.testing.assert_array_equal(cf((c,), x).numpy(), (x * k).numpy(), err_msg=lib.__name__)


def test_a_module_inside_a_dict_argument():
    torch.manual_seed(0)
    t_lin = torch.nn.Linear(3, 3)
    lin = tg.nn.Linear(3, 3)
    with tg.no_grad():
        lin.weight.copy_(tg.tensor(t_lin.weight.detach().numpy()))
        lin.bias.copy_(tg.tensor(t_lin.bias.detach().numpy()))
    x = np.array([[1.0, -2.0, 3.0]], np.float32)
    # (torch.compile, 2.13, keeps its program when a hook is added to the module in the dict:
    # compared with torch's eager result)
    for lib, m, comp in ((tg, lin, tg.compile), (torch, t_lin, lambda f: f)):
        def fn(mods, x):
            return mods["m"](x)
        cf = comp(fn)
        xx = lib.tensor(x)
        changes = [lambda: None,
                   lambda: setattr(m, "weight", lib.nn.Parameter(lib.ones(3, 3))),
                   lambda: m.register_forward_hook(lambda mod, inp, out: out * 10)]
        outs = []
        for change in changes:
            change()
            got = cf({"m": m}, xx)
            np.testing.assert_allclose(got.detach().numpy(), fn({"m": m}, xx).detach().numpy(), rtol=1e-6,
                                       err_msg=lib.__name__)
            outs.append(got.detach().numpy())
        if lib is tg:
            tg_outs = outs
    for a, b in zip(tg_outs, outs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_requires_grad_of_a_value_the_function_computes():
    """`y.requires_grad` asked of a traced value is eager's answer (a trace's values have no
    autograd history of their own), under grad mode and no_grad, for a parameter that stops
    requiring grad, through detach, comparisons and argmax."""
    def make(lib, w):
        def fn(x):
            y = x * w
            with lib.no_grad():
                n = y * 3
            return (y * 2 if y.requires_grad else y * 3), y.requires_grad, y.detach().requires_grad, \
                (x > 0).requires_grad, n.requires_grad, y.argmax().requires_grad
        return fn
    tw, w = torch.nn.Parameter(torch.ones(3)), tg.nn.Parameter(tg.ones(3))
    t_fn, fn = make(torch, tw), make(tg, w)
    cf, ct = tg.compile(fn), torch.compile(t_fn, backend="eager")
    x, tx = tg.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])

    def check():
        got, want, t_got, t_want = cf(x), fn(x), ct(tx), t_fn(tx)
        for g in (want, t_got, t_want):
            assert g[1:] == got[1:]
            np.testing.assert_array_equal(got[0].detach().numpy(), g[0].detach().numpy())
    check()
    with tg.no_grad(), torch.no_grad():
        check()
    w.requires_grad_(False)
    tw.requires_grad_(False)
    check()


def test_names_read_by_eval_of_a_string():
    def make(lib):
        ns = {"__builtins__": builtins, "SCALE": 2.0, "o": types.SimpleNamespace(k=1.0)}
        exec("def fn(x):\n    return x * eval('SCALE * o.k')\n", ns)

        def mutate(i):
            if i == 1:
                ns["SCALE"] = 3.0
            else:
                ns["o"].k = -0.5
        return ns["fn"], mutate
    scenario(make, torch_compiled=False)      # torch.compile does not trace eval


def test_an_attrgetter_made_outside_the_function():
    """The attribute names an operator.attrgetter (or methodcaller) holds are read as the
    function's own."""
    def make(lib):
        import operator

        class Obj:
            def __init__(self):
                self.a = 2.0
        o = Obj()
        get = operator.attrgetter("a")

        def mutate(i):
            o.a = float(i + 4)
        return (lambda x: x * get(o)), mutate
    scenario(make)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("n", [4, 5_000_000])
def test_a_numpy_array_changed_in_place_by_its_bytes(n):
    """A numpy array read by the function is guarded by its bytes (0.0 and -0.0 differ, as 1 / x
    shows), also where it is too big to copy (by its digest)."""
    def make(lib):
        a = np.ones(n, np.float32)
        a[0] = 0.0

        def mutate(i):
            if i == 1:
                a[0] = -0.0
            else:
                a[1] = 5.0
        return (lambda x: x / lib.tensor(a[:3])), mutate
    scenario(make)

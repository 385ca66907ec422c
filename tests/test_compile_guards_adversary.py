"""State a compiled function reads, changed between calls in the ways a user might: each case
recompiles (or runs eagerly) rather than return the first trace's result. Compared, at every
step, with the eager function, with torch.compile's result and with torch's eager one."""
import array
import builtins
import contextlib
import contextvars
import functools
import sys
import types
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def scenario(make, steps=3, torch_compiled=True, torch_rtol=0):
    """make(lib) -> (fn, mutate): fn(x) reads some state, mutate(i) changes it. For tracegrad
    (compiled) and torch (torch.compile), the compiled result equals the eager one at each step;
    and tracegrad's equals torch's (within torch_rtol where each library's own matrix product
    rounds: OpenBLAS's and torch's differ by an ulp on AVX-512 machines)."""
    results = {}
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager") if torch_compiled else f)):
        fn, mutate = make(lib)
        cf = comp(fn)
        x = lib.tensor(np.array([1.0, -2.0, 3.0], np.float32))
        for i in range(steps):
            if i:
                mutate(i)
            got, want = cf(x), fn(x)
            same(got.detach().numpy(), want.detach().numpy(), f"{lib.__name__}, step {i}")
            results.setdefault(i, []).append(got.detach().numpy())
    for i, (a, b) in results.items():
        if torch_rtol:
            np.testing.assert_allclose(a, b, rtol=torch_rtol, atol=0, err_msg=f"tracegrad vs torch, step {i}")
        else:
            same(a, b, f"tracegrad vs torch, step {i}")


def same(a, b, msg):
    """Equal values, dtypes and signs of zero."""
    assert a.dtype == b.dtype, (msg, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b, err_msg=msg)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=msg + " (signs)")


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
    # torch.compile (2.13) traces through the cache, ignoring it: with the cache kept it gives the new value
    scenario(make, torch_compiled=clear)


def test_a_context_variable():
    def make(lib):
        cv = contextvars.ContextVar("scale", default=2.0)

        def mutate(i):
            cv.set(float(i + 5))
        return (lambda x: x * cv.get()), mutate
    scenario(make)


@pytest.mark.parametrize("kind", ["bytearray", "array"])
def test_a_mutable_buffer_read_by_item(kind):
    def make(lib):
        buf = bytearray(b"\x02") if kind == "bytearray" else array.array("d", [2.0])

        def mutate(i):
            buf[0] = i + 5 if kind == "bytearray" else float(i + 5)
        return (lambda x: x * buf[0]), mutate
    scenario(make)


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
    scenario(make)


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


@pytest.mark.parametrize("patch", ["Linear.forward", "F.linear"])
def test_library_code_patched_after_the_trace(monkeypatch, patch):
    """A patch of the library's own code that the trace ran (a module class's forward, a
    function its forward calls) runs at the next call, as in eager. (A Tensor method replaced on
    the class: test_compile_guards_adversary2.py.)"""
    def make(lib):
        torch.manual_seed(0)
        t_lin = torch.nn.Linear(3, 3)
        if lib is tg:
            lin = tg.nn.Linear(3, 3)
            with tg.no_grad():
                lin.weight.copy_(tg.tensor(t_lin.weight.detach().numpy()))
                lin.bias.copy_(tg.tensor(t_lin.bias.detach().numpy()))
        else:
            lin = t_lin

        def fn(x):
            return lin(x).relu() * 2

        def mutate(i):
            if i == 1:
                owner, name = {"Linear.forward": (lib.nn.Linear, "forward"),
                               "F.linear": (lib.nn.functional, "linear")}[patch]
                orig = getattr(owner, name)
                new = {"Linear.forward": lambda self, x: x * 3,
                       "F.linear": lambda x, w, b=None: orig(x, w) - 1}[patch]
                monkeypatch.setattr(owner, name, new)
            else:
                monkeypatch.undo()
        return fn, mutate
    # torch.compile (2.13) keeps its program after a patch of nn.Linear.forward on the class:
    # compared with torch's eager result there
    scenario(make, torch_compiled=patch == "F.linear", torch_rtol=4 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("owner", ["module", "object"])
def test_the_class_of_an_object_swapped(owner):
    """`o.__class__ = B` runs B's methods (nn.utils.parametrize swaps a module's class so)."""
    def make(lib):
        base = lib.nn.Module if owner == "module" else object

        class A(base):
            def go(self, x):
                return x * 2

            def forward(self, x):
                return self.go(x)

        class B(A):
            def go(self, x):
                return x * 3
        o = A()

        def mutate(i):
            o.__class__ = B if i == 1 else A
        return (lambda x: o.forward(x) if owner == "object" else o(x)), mutate
    scenario(make)


def test_an_attribute_of_the_function_object():
    def make(lib):
        def fn(x):
            return x * fn.scale
        fn.scale = 2.0

        def mutate(i):
            fn.scale = float(i + 3)
        return fn, mutate
    scenario(make)


@pytest.mark.parametrize("change", ["sign of zero", "int to float", "list item"])
def test_a_partial_keyword_changed(change):
    """A functools.partial's keyword values are guarded as its arguments are: by their bits
    (0.0 and -0.0, 1 and 1.0), and what they hold."""
    def make(lib):
        def g(x, a):
            return x * (a[0] if isinstance(a, list) else a)
        p = functools.partial(g, a={"sign of zero": 0.0, "int to float": 1, "list item": [2.0]}[change])

        def mutate(i):
            if change == "sign of zero":
                p.keywords["a"] = -0.0 if i == 1 else 0.0
            elif change == "int to float":
                p.keywords["a"] = 1.0 if i == 1 else 1
            else:
                p.keywords["a"][0] = float(i + 4)
        return (lambda x: p(x.long() if change == "int to float" else x)), mutate
    # torch.compile (2.13) keeps its program when the keyword's zero changes sign
    scenario(make, torch_compiled=change != "sign of zero")


def test_inference_mode_at_the_call():
    """A program compiled under no_grad is not the one for a call under inference_mode (the
    function may ask is_inference_mode_enabled(), and makes inference tensors), nor back."""
    for lib in (tg, torch):
        def fn(x):
            return x * 2 if lib.is_inference_mode_enabled() else x * 3
        cf = tg.compile(fn) if lib is tg else torch.compile(fn, backend="eager")
        x = lib.tensor([1.0, 2.0])
        for mode in (lib.no_grad, lib.inference_mode, lib.no_grad, lib.inference_mode):
            with mode():
                got, want = cf(x), fn(x)
            same(got.numpy(), want.numpy(), f"{lib.__name__} {mode.__name__}")
            same(got.numpy(), (x * (2 if mode is lib.inference_mode else 3)).numpy(), lib.__name__)
            assert got.is_inference() == want.is_inference(), (lib.__name__, mode.__name__)


def test_a_forward_hook_function_replaced_under_its_handle():
    def make(lib):
        lin = lib.nn.Linear(3, 3)
        h = lin.register_forward_hook(lambda m, i, o: o * 0 + 2)

        def mutate(i):
            lin._forward_hooks[h.id] = lambda m, i_, o: o * 0 + 3 + i
        return lin, mutate
    scenario(make)


@pytest.mark.parametrize("what", ["numpy array", "module parameter", "module hook", "function closure",
                                  "object method"])
def test_state_of_an_object_deeper_than_the_walk(what):
    """Past the depth the walk guards item by item, a container is guarded by one token of
    its contents; the modules, functions, numpy arrays and classes in it keep guards of their
    own."""
    def make(lib):
        s = [2.0]
        lin = lib.nn.Linear(3, 3)
        lin.weight, lin.bias = lib.nn.Parameter(lib.full((3, 3), 0.5)), lib.nn.Parameter(lib.zeros(3))

        class O:
            def go(self, x):
                return x * 2
        item = {"numpy array": np.array([2.0], np.float32), "module parameter": lin, "module hook": lin,
                "function closure": lambda x: x * s[0], "object method": O()}[what]
        deep = [[[[[[[item]]]]]]]

        def fn(x):
            v = deep[0][0][0][0][0][0][0]
            if what == "numpy array":
                return x * lib.tensor(v)
            return v.go(x) if what == "object method" else v(x)

        def mutate(i):
            if what == "numpy array":
                item[0] = float(i + 4)
            elif what == "module parameter":
                lin.weight = lib.nn.Parameter(lib.full((3, 3), float(i)))
            elif what == "module hook":
                lin.register_forward_hook(lambda m, a, o: o * 10)
            elif what == "function closure":
                s[0] = float(i + 6)
            else:
                O.go = lambda self, x: x - i
        return fn, mutate
    # torch.compile (2.13) misses the hook added to a module this deep, and the method replaced
    # on the class of an object this deep
    scenario(make, torch_compiled=what not in ("module hook", "object method"))


@pytest.mark.parametrize("how", ["twice", "in a list", "then two"])
def test_one_tensor_passed_twice_is_one_value(how):
    """`a is b` inside the function answers as in eager: the trace makes a tensor passed twice
    one value, and the call's key holds which arguments are the same tensor."""
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        def fn(a, b):
            return a * 3 if a is b else a + b
        call = (lambda f, a, b: f([a, b])) if how == "in a list" else (lambda f, a, b: f(a, b))
        g = (lambda xs: fn(*xs)) if how == "in a list" else fn
        cf = comp(g)
        t, u = lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0])
        pairs = [(t, u), (t, t), (u, u), (t, u)] if how == "then two" else [(t, t), (t, u), (u, u)]
        for a, b in pairs:
            same(call(cf, a, b).numpy(), call(g, a, b).numpy(), f"{lib.__name__} {a is b}")
            same(call(cf, a, b).numpy(), (a * 3 if a is b else a + b).numpy(), lib.__name__)


def test_one_tensor_passed_twice_with_a_gradient():
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        cf = comp(lambda a, b: (a * b).sum())
        grads = []
        for alias in (False, True, False):
            a = lib.tensor([1.0, -2.0], requires_grad=True)
            b = a if alias else lib.tensor([1.0, -2.0], requires_grad=True)
            cf(a, b).backward()
            grads.append(a.grad.numpy())
        same(grads[1], np.array([2.0, -4.0], np.float32), lib.__name__)
        same(grads[0], np.array([1.0, -2.0], np.float32), lib.__name__)
        same(grads[2], grads[0], lib.__name__)


def test_an_argument_that_is_a_tensor_the_function_reads(recwarn):
    """A global tensor passed as the argument too: the trace took them for two values (`a is W`
    False), so that call runs eagerly, with a warning naming why."""
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        w = lib.tensor([1.0, 2.0])

        def fn(a):
            return a * 3 if a is w else a + w
        cf = comp(fn)
        u = lib.tensor([5.0, 6.0])
        for a in (u, w, u, w):
            same(cf(a).numpy(), fn(a).numpy(), lib.__name__)
    assert any("also reads" in str(r.message) for r in recwarn)


@pytest.mark.parametrize("how", ["str", "repr", "f-string"])
def test_text_of_a_tensor_inside_the_function(how):
    """str(x) of a value the trace holds would be the trace's own text: the function runs
    eagerly (with a warning) and returns eager's text, as torch.compile's graph break does."""
    fmt = {"str": str, "repr": repr, "f-string": lambda t: f"{t}"}[how]
    outs = []
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        def fn(x):
            return fmt(x.sum())
        x = lib.tensor([1.0, 2.0])
        with pytest.warns(UserWarning, match="cannot be traced") if lib is tg else contextlib.nullcontext():
            got = comp(fn)(x)
        assert got == fn(x), (lib.__name__, got)
        outs.append(got)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("change", ["shape", "requires_grad"])
def test_a_tensor_in_a_long_container_read_for_its_metadata(change):
    """In a list or dict too long for item-by-item tests, a tensor the trace read only in Python
    (its length, requires_grad) is guarded with the rest."""
    def make(lib):
        tensors = [lib.ones(2) for _ in range(100)]
        table = {f"k{i}": float(i) for i in range(100)}
        table["w"] = lib.ones(3)

        def fn(x):
            if change == "shape":
                return x * len(tensors[50]) + table["w"].shape[0]
            return x * 2 if tensors[60].requires_grad else x * 3

        def mutate(i):
            if change == "shape":
                tensors[50], table["w"] = lib.ones(i + 5), lib.ones(i + 7)
            else:
                tensors[60] = lib.ones(2, requires_grad=i == 1)
        return fn, mutate
    scenario(make)


def test_a_value_deep_in_a_container_past_the_budget():
    """A deep container with more values than one guard compares by default is compared whole."""
    def make(lib):
        deep = [[[[[[list(range(20000))]]]]]]

        def mutate(i):
            deep[0][0][0][0][0][0][-1] = i + 5
        return (lambda x: x * deep[0][0][0][0][0][0][-1]), mutate
    scenario(make)


@pytest.mark.parametrize("read", ["getattr with a default", "hasattr"])
def test_a_python_attribute_set_on_an_argument_tensor(read):
    """The attributes set on an argument tensor are part of the call's key (their names), and
    reading one runs the function eagerly: a trace holds values, not attributes."""
    for lib in (tg, torch):
        def fn(x):
            if read == "hasattr":
                return x * 2 if hasattr(x, "scale") else x * 3
            return x * getattr(x, "scale", 1.0)
        cf = tg.compile(fn) if lib is tg else fn
        plain, tagged, other = lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0])
        tagged.scale, other.tag = 5.0, 1
        for x in (plain, tagged, other, plain, tagged):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = cf(x)
            same(got.numpy(), fn(x).numpy(), lib.__name__)
        tagged.scale = 7.0
        same(cf(tagged).numpy(), fn(tagged).numpy(), lib.__name__)


def test_an_inference_tensor_argument():
    """An inference tensor passed outside inference_mode: `x.is_inference()` answers for it (the
    call's key holds it), and an in-place op on it raises torch's error, as eagerly."""
    for lib in (tg, torch):
        with lib.inference_mode():
            inf = lib.tensor([1.0, 2.0])
        normal = lib.tensor([1.0, 2.0])

        def fn(x):
            return x * 2 if x.is_inference() else x * 3
        cf = tg.compile(fn) if lib is tg else torch.compile(fn, backend="eager")
        for x in (normal, inf, normal, inf):
            same(cf(x).numpy(), fn(x).numpy(), lib.__name__)

        def write(x):
            x.add_(1)
            return x * 2
        cw = tg.compile(write) if lib is tg else write
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
                cw(inf)
        if lib is tg:      # (eager tracegrad raises before the write; torch writes, then raises)
            same(inf.numpy(), np.array([1.0, 2.0], np.float32), lib.__name__)


def test_a_module_the_function_imports_itself(monkeypatch):
    """`import cfg` inside the function reads sys.modules at every call: what the code reads from
    that module is guarded as a global module's is."""
    def make(lib):
        mod = types.ModuleType(f"adversary_cfg_{lib.__name__}")
        mod.SCALE = 2.0
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
        ns = {"__builtins__": builtins}
        exec(f"def fn(x):\n    import {mod.__name__} as cfg\n    return x * cfg.SCALE\n", ns)

        def mutate(i):
            mod.SCALE = float(i + 3)
        return ns["fn"], mutate
    scenario(make)


def test_the_base_of_an_argument_that_is_a_view():
    """`x._base` of an argument is the caller's tensor, which the trace does not hold: the
    function runs eagerly (with a warning) and answers for each call's argument."""
    for lib in (tg, torch):
        def fn(a, b):
            return a + b if a._base is None else a * 10
        cf = tg.compile(fn) if lib is tg else fn     # torch.compile (2.13) keeps the first call's branch
        base, u = lib.ones(4), lib.tensor([1.0, 2.0])
        for a in (lib.tensor([3.0, 4.0]), base[:2], lib.tensor([3.0, 4.0])):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = cf(a, u)
            same(got.numpy(), fn(a, u).numpy(), lib.__name__)


@pytest.mark.parametrize("holder", ["mappingproxy", "weakref", "dict values view", "memoryview", "ctypes",
                                    "enum member value", "dataclasses.asdict", "dataclasses.astuple"])
def test_state_read_through_a_library_holder(holder):
    """State read through a library object the walk had no rule for (a read-only mapping of a dict
    changed elsewhere, a weak reference, a dict view, a buffer, an Enum member's mutable value,
    a dataclass read by dataclasses.asdict): guarded, so a change recompiles."""
    import ctypes
    import dataclasses
    import enum as enum_mod
    import weakref

    def make(lib):
        d = {"a": 2.0}
        arr = np.array([2.0])
        num = ctypes.c_double(2.0)

        class Obj:
            k = None

        @dataclasses.dataclass
        class Cfg:
            k: float = 2.0
        obj, cfg = Obj(), Cfg()
        obj.k = 2.0

        class E(enum_mod.Enum):
            A = [2.0]
        ref, view, mp, mv = weakref.ref(obj), d.values(), types.MappingProxyType(d), memoryview(arr)
        read = {"mappingproxy": lambda: mp["a"], "weakref": lambda: ref().k, "dict values view": lambda: next(iter(view)),
                "memoryview": lambda: mv[0], "ctypes": lambda: num.value, "enum member value": lambda: E.A.value[0],
                "dataclasses.asdict": lambda: dataclasses.asdict(cfg)["k"],
                "dataclasses.astuple": lambda: dataclasses.astuple(cfg)[0]}[holder]

        def mutate(i):
            v = float(i + 3)
            d["a"] = arr[0] = num.value = obj.k = cfg.k = E.A.value[0] = v
        return (lambda x: x * read()), mutate
    scenario(make)


def test_the_library_branches_on_requires_grad_of_a_traced_value():
    """The library's own code asks requires_grad of the values it is given (median's derivative
    spreads over ties where its input requires grad; an op's out= refuses an input that
    requires grad): a traced value answers as in eager, so the compiled gradient and error are
    eager's and torch's."""
    grads = []
    for lib, comp in ((tg, tg.compile), (tg, lambda f: f), (torch, lambda f: f)):
        x = lib.tensor([1.0, 2.0, 2.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        comp(lambda x: lib.median(x * 1))(x).backward()
        grads.append(x.grad.numpy())
    for g in grads[1:]:
        np.testing.assert_allclose(grads[0], g, rtol=1e-12)
    for lib, comp in ((tg, tg.compile), (torch, lambda f: f)):
        buf = lib.zeros(2)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
                comp(lambda x: lib.add(x * 1, 1.0, out=buf))(x)

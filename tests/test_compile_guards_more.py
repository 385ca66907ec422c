"""More of what a trace reads besides its arguments, each guarded so that a change recompiles:
class attributes (and methods) an instance reads or later hides, a module's `_private`
attributes, attributes read by a computed name, __slots__, sets and dict subclasses, long
containers, values nested deeper than the item-by-item walk, and code whose module has no
file (a notebook's __main__). Each case: compiled == eager after every change, for tracegrad
and for torch.compile."""
import collections
import contextlib
import sys
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


def test_class_attribute_changed_on_the_class_and_hidden_by_the_instance():
    def make(lib):
        class Base:
            k = 2.0

        class A(Base):
            pass
        a = A()

        def mutate(i):
            if i == 1:
                Base.k = 5.0
            else:
                a.k = 7.0
        return (lambda x: x * a.k), mutate
    scenario(make)


def test_method_replaced_on_the_class_and_on_the_instance():
    def make(lib):
        class A:
            def go(self, x):
                return self.h(x)

            def h(self, x):
                return x * 2
        a = A()

        def mutate(i):
            if i == 1:
                A.h = lambda self, x: x - 1
            else:
                a.h = lambda x: x * 10
        return (lambda x: a.go(x)), mutate
    scenario(make, torch_compiled=False)     # torch.compile (2.13) keeps the replaced class method


def test_module_class_attribute_private_attribute_and_forward():
    def make(lib):
        class W(lib.nn.Module):
            k = 2.0

            def __init__(self):
                super().__init__()
                self._shift = 1.0

            def forward(self, x):
                return x * self.k + self._shift
        w = W()

        def mutate(i):
            if i == 1:
                W.k = 3.0
            elif i == 2:
                w._shift = -4.0
            else:
                W.forward = lambda self, x: x * 100
        return w, mutate
    scenario(make, steps=4)


class Holder:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_attribute_read_by_a_computed_name_and_through_vars():
    def make(lib):
        o = Holder(alpha=2.0, beta=3.0)
        name = "al" + "pha"

        def mutate(i):
            o.alpha, o.beta = o.alpha + 1, o.beta * 2
        return (lambda x: x * getattr(o, name) + vars(o)["beta"]), mutate
    scenario(make)


class Slotted:
    __slots__ = ("k",)


def test_slots_object():
    def make(lib):
        o = Slotted()
        o.k = 2.0

        def mutate(i):
            o.k = float(i + 5)
        return (lambda x: x * o.k), mutate
    scenario(make)


def test_set_membership_and_defaultdict_item():
    def make(lib):
        flags = {"relu"}
        cfg = collections.defaultdict(float, scale=2.0)

        def fn(x):
            y = x * cfg["scale"]
            return y.relu() if "relu" in flags else y

        def mutate(i):
            if i == 1:
                flags.discard("relu")
            else:
                cfg["scale"] = -1.0
        return fn, mutate
    scenario(make)


def test_long_list_and_dict_of_floats():
    def make(lib):
        schedule = [float(i) for i in range(100)]
        table = {i: float(-i) for i in range(100)}

        def mutate(i):
            schedule[70] = -1.0 * i
            table[50] = 0.5 * i
        return (lambda x: x * schedule[70] + table[50]), mutate
    scenario(make)


def test_value_nested_deeper_than_the_walk():
    def make(lib):
        cfg = {"a": {"b": {"c": {"d": {"e": {"f": [2.0]}}}}}}
        chain = types.SimpleNamespace()
        cur = chain
        for _ in range(7):
            cur.next = types.SimpleNamespace()
            cur = cur.next
        cur.val = 1.0

        def fn(x):
            return x * cfg["a"]["b"]["c"]["d"]["e"]["f"][0] + chain.next.next.next.next.next.next.next.val

        def mutate(i):
            if i == 1:
                cfg["a"]["b"]["c"]["d"]["e"]["f"][0] = 3.0
            else:
                cur.val = -5.0
        return fn, mutate
    scenario(make)


NOTEBOOK_CELL = '''
scale = 2.0

class M(lib.nn.Module):
    def forward(self, x):
        return x * scale

class H:
    def go(self, x):
        return x + scale
'''


def test_code_whose_module_has_no_file_as_in_a_notebook():
    # a notebook's __main__ (and `python -c`'s) has no __file__: its classes are the user's,
    # and the globals their methods read are guarded
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        mod = types.ModuleType(f"notebook_{lib.__name__}")
        mod.lib = lib
        sys.modules[mod.__name__] = mod
        try:
            exec(compile(NOTEBOOK_CELL, "<cell 1>", "exec"), mod.__dict__)
            m, h = mod.M(), mod.H()
            cm, ch = comp(m), comp(lambda x: h.go(x))
            x = lib.tensor([1.0, 2.0])
            for scale in (2.0, 3.0, -1.0):
                mod.scale = scale
                np.testing.assert_array_equal(cm(x).detach().numpy(), (x * scale).numpy())
                np.testing.assert_array_equal(ch(x).detach().numpy(), (x + scale).numpy())
        finally:
            del sys.modules[mod.__name__]


def test_what_a_module_hook_reads():
    def make(lib):
        m = lib.nn.Linear(3, 3)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(np.arange(9, dtype=np.float32).reshape(3, 3) / 4))
            m.bias.fill_(0.5)
        s = {"k": 2.0}
        m.register_forward_hook(lambda mod, i, o: o * s["k"])

        def mutate(i):
            s["k"] = float(i + 2)
        return m, mutate
    scenario(make)


def test_what_a_compiled_function_called_inside_reads():
    # the inner compiled function is inlined into the outer trace: its reads are the outer's
    def make(lib):
        box = {"k": 2.0}
        comp = tg.compile if lib is tg else (lambda f: torch.compile(f, backend="eager"))
        inner = comp(lambda x: x * box["k"])

        def mutate(i):
            box["k"] = float(i * 3)
        return (lambda x: inner(x) + 1), mutate
    scenario(make)


def test_compiled_method_in_a_class_body():
    # @compile on a method binds as a method (torch.compile's does); the instance is an argument
    # whose state is guarded
    results = []
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        class M(lib.nn.Module):
            def __init__(self, k):
                super().__init__()
                self.k = k
                self.act = lib.nn.Identity()

            @comp
            def forward(self, x):
                return self.act(x) * self.k
        a, b = M(2.0), M(3.0)
        x = lib.tensor([-1.0, 2.0])
        out = [a(x), b(x)]
        a.k = 5.0
        b.act = lib.nn.ReLU()
        out += [a(x), b(x)]
        results.append([o.detach().numpy() for o in out])
    for g, t in zip(*results):
        np.testing.assert_array_equal(g, t)


def test_what_a_classes_getattr_reads():
    def make(lib):
        table = {"k": 2.0}

        class A:
            def __getattr__(self, name):
                return table[name]
        a = A()

        def mutate(i):
            table["k"] = float(i + 4)
        return (lambda x: x * a.k), mutate
    scenario(make)


def test_code_swapped_under_the_function_and_under_a_helper():
    """`f.__code__ = ...` (a reload, a patch) keeps the function object: the code is guarded,
    as Dynamo's cache, kept on code objects, sees it."""
    def make(lib):
        def helper(x):
            return x * 2

        def fn(x):
            return helper(x) + 1

        def mutate(i):
            if i == 1:
                helper.__code__ = (lambda x: x * 11).__code__
            else:
                fn.__code__ = (lambda x: helper(x) - 1).__code__
        return fn, mutate
    scenario(make)


def test_a_library_function_patched_after_the_trace(monkeypatch):
    """What user code reads from a library's module (`F.relu`, `tg.nn.functional.sigmoid`) is
    guarded by identity: a patch after the trace runs the patched function, as eagerly."""
    def make(lib):
        F = lib.nn.functional

        def mutate(i):
            if i == 1:
                monkeypatch.setattr(F, "relu", lambda t: t * 100)
            else:
                monkeypatch.setattr(lib.nn.functional, "sigmoid", lambda t: t - 5)
        return (lambda x: F.relu(x - 1) + lib.nn.functional.sigmoid(x)), mutate
    scenario(make)


@pytest.mark.parametrize("first", ["parameter", "tensor"])
def test_a_branch_on_the_class_of_an_argument(first):
    """isinstance(x, nn.Parameter) inside a compiled function answers for the argument passed
    (the class is part of the call's key), as eagerly and under torch.compile."""
    order = [first, "tensor" if first == "parameter" else "parameter"]
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager"))):
        def fn(x):
            return x * 2 if isinstance(x, lib.nn.Parameter) else x * 3
        cf = comp(fn)
        for kind in order * 2:
            x = lib.ones(3)
            x = lib.nn.Parameter(x) if kind == "parameter" else x
            want = 2.0 if kind == "parameter" else 3.0
            got = cf(x)
            np.testing.assert_array_equal(got.detach().numpy(), np.full(3, want, np.float32), err_msg=f"{lib.__name__} {kind}")
            assert type(got) is lib.Tensor


def test_autograd_bookkeeping_read_in_python_is_not_baked_into_a_program():
    """A branch on an argument's `_version` or `retains_grad` (which the call's key does not
    hold) runs eagerly with a warning, rather than keeping the first call's branch."""
    def by_version(x):
        return x * 2 if x._version == 0 else x * 3

    def by_retains(x):
        return x * 2 if x.retains_grad else x * 3
    for fn, change in ((by_version, lambda x: x.add_(0)), (by_retains, lambda x: x.retain_grad())):
        cf = tg.compile(fn)
        for changed in (False, True):
            x = tg.ones(3, requires_grad=True) * 1
            if changed:
                with tg.no_grad() if fn is by_version else contextlib.nullcontext():
                    change(x)
            with pytest.warns(UserWarning, match="cannot be traced") if not changed else contextlib.nullcontext():
                got = cf(x)            # (the warning once: the key then runs eagerly)
            np.testing.assert_array_equal(got.detach().numpy(), fn(x).detach().numpy())

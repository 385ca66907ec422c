"""State a compiled function reads, changed between its calls, and Python effects that must run
as often as eagerly: each case recompiles, runs eagerly or raises rather than return the first
trace's numbers. Compared at every step with the
eager function, with torch's eager one and, where the same code runs, with torch.compile's."""
import bisect
import collections
import copy
import gc
import heapq
import itertools
import os
import random
import types
import warnings
import weakref

import numpy as np
import pytest
import torch

import tracegrad as tg
from test_compile_side_effects_more import four_calls


def same(a, b, msg):
    """Equal values, dtypes and signs of zero."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (msg, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b, err_msg=msg)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=msg + " (signs)")


def _x(lib):
    return lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=True)


def scenario(make, steps=4, torch_compiled=True, args=None):
    """make(lib) -> (fn, mutate): fn(*args) reads some state, mutate(i) sets it for step i (step
    0 too). At each step the compiled function's result and its argument's gradient equal the
    eager function's; and tracegrad's equal torch's (eager, and torch.compile's where the same
    code runs there)."""
    args = args or (lambda lib, i: (_x(lib),))
    runs = {}
    comps = [("tracegrad", tg, tg.compile), ("tracegrad eager", tg, None), ("torch", torch, None)]
    if torch_compiled:
        comps.append(("torch.compile", torch, lambda f: torch.compile(f, backend="eager")))
    for name, lib, comp in comps:
        fn, mutate = make(lib)
        f = comp(fn) if comp else fn
        out = []
        for i in range(steps):
            mutate(i)
            a = args(lib, i)
            y = f(*a)
            y.sum().backward()
            out.append((y.detach().numpy(), a[0].grad.numpy()))
        runs[name] = out
    for name, out in runs.items():
        for i, (got, want) in enumerate(zip(out, runs["tracegrad eager"])):
            same(got[0], want[0], f"{name} vs tracegrad eager, step {i}")
            same(got[1], want[1], f"{name} vs tracegrad eager, step {i}, gradient")


# -- autograd history and memory of a tensor read in Python --------------------------------------

def test_the_version_counter_of_a_captured_tensor():
    """`x * w._version` of a tensor the function reads while w is written in place between calls:
    the trace took the version as a constant (0 at every call; eager 0, 1, 2, 3)."""
    def make(lib):
        w = lib.zeros(3, dtype=lib.float64)

        def mutate(i):
            if i:
                w.add_(1)
        return (lambda x: x * w._version), mutate
    scenario(make)


def test_the_version_counter_of_a_tensor_the_function_writes():
    """`w._version` after `w.add_(1)` inside: the trace's version is the one before the call (the
    write is recorded, not made), so the function runs eagerly, naming the read."""
    def make(lib):
        w = lib.zeros(3, dtype=lib.float64)

        def fn(x):
            v0 = w._version
            w.add_(1)
            return x * (w._version - v0)
        return fn, lambda i: None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scenario(make, steps=3)
    assert any("version counter" in str(c.message) for c in caught)


@pytest.mark.parametrize("read", ["grad_fn.name()", "type(grad_fn).__name__", "grad_fn is None"])
def test_the_grad_fn_of_a_captured_tensor_changed_in_place(read):
    """A captured non-leaf w whose grad_fn an in-place op changes between calls (mul_ then add_,
    then detach_): the branch on its grad_fn was taken once (2 at every step; eager 2, 3, 5)."""
    def make(lib):
        b = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        w = b * 1

        def mutate(i):
            if i == 1:
                w.mul_(2)
            elif i == 2:
                w.add_(1)
            elif i == 3:
                w.detach_()

        def fn(x):
            if read == "grad_fn is None":
                return x * (5.0 if w.grad_fn is None else 2.0 if w._version % 2 == 0 else 3.0)
            n = "none" if w.grad_fn is None else w.grad_fn.name() if read == "grad_fn.name()" else \
                type(w.grad_fn).__name__
            return x * (2.0 if n.startswith("Mul") else 3.0 if n.startswith("Add") else 5.0)
        return fn, mutate
    scenario(make)


def test_is_leaf_of_a_captured_view_whose_base_changes():
    """A captured view of a leaf that does not require grad: once its base is written with a
    value that does (under the compiled function's back), the view is no leaf any more."""
    def make(lib):
        base = lib.zeros(4, dtype=lib.float64)
        v = base[:3]
        src = lib.ones(4, dtype=lib.float64, requires_grad=True)

        def mutate(i):
            if i == 2:
                base.mul_(src)

        return (lambda x: x * (2.0 if v.is_leaf else 3.0)), mutate
    scenario(make)


def test_the_address_of_a_captured_tensor():
    """`w.data_ptr()` compared with its address before, and `w.data = v` between calls: eager's
    branch changes, the trace's did not."""
    def make(lib):
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
        p0 = w.data_ptr()

        def mutate(i):
            if i == 2:
                w.data = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
        return (lambda x: x * (2.0 if w.data_ptr() == p0 else 3.0)), mutate
    scenario(make)


def test_output_nr_of_an_argument():
    """`x * (w.output_nr + 1)` of a tensor passed in, which is the first output of split at one
    call and the second at the next: the key holds no output slot, the trace baked it in
    (torch.compile does so too: compared with eager alone)."""
    def make(lib):
        return (lambda x, w: x * (w.output_nr + 1)), lambda i: None

    def args(lib, i):
        b = lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=lib.float64, requires_grad=True)
        return _x(lib), b.split(3)[i % 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scenario(make, torch_compiled=False, args=args)


def test_autograd_history_read_by_the_library_is_no_guard():
    """The library's own reads of a parameter's history while tracing (an optimizer's is_leaf
    test) are not the user's decisions: a whole training step stays one program while its
    parameters' versions change at every step."""
    model = tg.nn.Linear(3, 2).double()
    opt = tg.optim.SGD(model.parameters(), lr=0.1)

    @tg.compile
    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    x = tg.tensor(np.linspace(-1, 1, 6).reshape(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            step(x)
    assert step.cache.compiles == 1


# -- names built at run time, generators seeded at run time --------------------------------------

def _user_module(name, source):
    """A module of the user's, made from source (as a notebook's or a config file's module)."""
    mod = types.ModuleType(name)
    exec(source, vars(mod))
    return mod


@pytest.mark.parametrize("how", ["vars(cfg)[built]", "getattr(cfg, f-string)", "getattr(cfg, joined)"])
def test_a_module_global_read_by_a_name_built_at_run_time(how):
    """`vars(cfg)["SCALE_" + chr(98)]`: the guards took the module's globals that a string of the
    code names, and "SCALE_b" is in no code: a new value was not seen (3 at every step; eager
    3, 4, 5, 6)."""
    def make(lib):
        cfg = _user_module("cfg_built", "SCALE_a = 2.0\nSCALE_b = 3.0\n")
        suffix = {"b": 98}

        def fn(x):
            if how == "vars(cfg)[built]":
                return x * vars(cfg)["SCALE_" + chr(suffix["b"])]
            if how == "getattr(cfg, f-string)":
                return x * getattr(cfg, f"SCALE_{chr(suffix['b'])}")
            return x * getattr(cfg, "_".join(("SCALE", chr(suffix["b"]))))

        def mutate(i):
            cfg.SCALE_b = 3.0 + i
        return fn, mutate
    scenario(make)


def test_a_module_cache_still_leaves_one_program_where_no_name_is_built():
    """The other side: a literal name read through getattr keeps one program while an
    unrelated cache of the module grows."""
    cfg = _user_module("cfg_cache3", "CACHE = {}\nSCALE = 2.0\n")

    def fn(x):
        return x * getattr(cfg, "SCALE")
    cf = tg.compile(fn)
    x = tg.tensor([1.0, -2.0, 3.0])
    for i in range(6):
        cfg.CACHE[i] = i
        same(cf(x).numpy(), fn(x).numpy(), f"call {i}")
    assert cf.cache.compiles == 1


SEED = None
_OUTSIDE = np.random.default_rng(0)
_BIT_GENERATOR = np.random.PCG64(1)


def _rng_none(x):
    return x * float(np.random.default_rng(None).random())


def _rng_keyword_none(x):
    return x * float(np.random.default_rng(seed=None).random())


def _rng_global_none(x):
    return x * float(np.random.default_rng(SEED).random())


def _rng_default_argument(x, seed=None):
    return x * float(np.random.default_rng(seed).random())


def _rng_computed(x):
    seed = {"seed": None}.get("seed")
    return x * float(np.random.default_rng(seed).random())


def _random_none(x):
    return x * random.Random(None).random()


def _random_state_none(x):
    return x * float(np.random.RandomState(None).rand())


def _seed_sequence_none(x):
    return x + float(np.random.SeedSequence(None, spawn_key=(1,)).entropy % 1000003)


def _seeded_again(x):
    r = random.Random(0)
    r.seed()
    return x * r.random()


def _rng_of_an_outside_generator(x):
    return x * float(np.random.default_rng(_OUTSIDE).random())


def _generator_of_an_outside_bit_generator(x):
    return x * float(np.random.Generator(_BIT_GENERATOR).random())


@pytest.mark.parametrize("fn", [_rng_none, _rng_keyword_none, _rng_global_none, _rng_default_argument, _rng_computed,
                                _random_none, _random_state_none, _seed_sequence_none, _seeded_again,
                                _rng_of_an_outside_generator, _generator_of_an_outside_bit_generator])
def test_a_generator_seeded_at_run_time_is_not_frozen(fn):
    """The seed None (written, a global, a default argument, a value the function computes),
    a generator seeded again, or one over a generator from outside: another value at every
    eager call. The reader knew only calls with no argument at all; the trace kept its first
    value (four equal results)."""
    values, texts = four_calls(fn)
    assert len(values) >= 3, values
    assert texts and fn.__name__ in texts[0]


def test_a_generator_seeded_by_a_constant_or_an_argument_still_traces():
    """`default_rng(7)`, `default_rng(2 ** 10)`, `Random(seed)` with an int argument: the same
    numbers at every call, traced (no warning), with eager's values."""
    def fn(x, seed):
        return x * float(np.random.default_rng(7).random()) + float(np.random.default_rng(2 ** 10).random()) + \
            random.Random(seed).random()
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [f(x, 3)[0].item() for _ in range(2)] + [f(x, 4)[0].item()]
    assert got == [fn(x, 3)[0].item()] * 2 + [fn(x, 4)[0].item()]


# -- Python code the function runs without naming it ---------------------------------------------

EFFECTS = []


class _Registered:
    def __init__(self, v=0):
        EFFECTS.append(("init", v))
        self.v = v

    def scaled(self, k):
        return type(self)(self.v * k)          # another one, made through the class of this one


class _Special:
    def __enter__(self):
        EFFECTS.append("enter")
        return self

    def __exit__(self, *exc):
        EFFECTS.append("exit")
        return False

    def __len__(self):
        EFFECTS.append("len")
        return 2

    def __iter__(self):
        EFFECTS.append("iter")
        return iter([1.0, 2.0])

    def __copy__(self):
        EFFECTS.append("copy")
        return _Special()

    def __hash__(self):
        EFFECTS.append("hash")
        return 1

    def __format__(self, spec):
        EFFECTS.append("format")
        return "s"

    def __lt__(self, other):
        EFFECTS.append("lt")
        return True


class _Descriptor:
    def __get__(self, obj, owner=None):
        EFFECTS.append("get")
        return 2.0


class _HasDescriptor:
    d = _Descriptor()


class _Dies:
    def __del__(self):
        EFFECTS.append("del")


_SPECIAL = _Special()
_PAIR = [_Special(), _Special()]
_HAS = _HasDescriptor()
_TABLE = {"make": _Registered}
_DEFAULTS = collections.defaultdict(_Registered)
_ONE = _Registered(1)


def _with(x):
    with _SPECIAL:
        return x * 2


_EFFECT_CASES = {
    "a class called from a dict": lambda x: (_TABLE["make"](), x * 2)[1],
    "type(self)(...) in a method": lambda x: x * _ONE.scaled(2).v,
    "a missing key of an outside defaultdict": lambda x: (_DEFAULTS[len(_DEFAULTS)], x * 2)[1],
    "with": _with,
    "len": lambda x: x * len(_SPECIAL),
    "iteration": lambda x: x * sum(_SPECIAL),
    "copy.copy": lambda x: (copy.copy(_SPECIAL), x * 2)[1],
    "hash of a dict key": lambda x: ({_SPECIAL: 1}, x * 2)[1],
    "an f-string": lambda x: (f"{_SPECIAL}", x * 2)[1],
    "sorted": lambda x: (sorted(_PAIR), x * 2)[1],
    "a descriptor's __get__": lambda x: x * _HAS.d,
    "__del__ of an object made inside": lambda x: (_Dies(), x * 2)[1],
}


@pytest.mark.parametrize("case", sorted(_EFFECT_CASES))
def test_code_python_runs_for_the_function_has_its_effects_at_every_call(case):
    """A special method Python calls (with, len, iteration, copy, hash, format, sorted's
    comparisons, a descriptor's __get__, __del__ of an object the call makes), a class called
    as an item of a dict or through type(self): each appends to a list at every eager call; the
    side-effect reader followed none of them, so the trace ran them once (three calls: one
    effect, or one pair)."""
    fn = _EFFECT_CASES[case]
    x = tg.ones(2, dtype=tg.float64)
    EFFECTS.clear()
    want = [fn(x).numpy() for _ in range(3)]
    eager = list(EFFECTS)
    assert eager
    EFFECTS.clear()
    f = tg.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [f(x).numpy() for _ in range(3)]
    assert EFFECTS == eager if case != "a missing key of an outside defaultdict" else len(EFFECTS) == len(eager)
    for g, w in zip(got, want):
        same(g, w, case)
    assert any("side effect" in str(c.message) for c in caught)


def test_objects_whose_special_methods_are_pure_still_trace():
    """The other side: an outside object with a pure __len__ and __iter__ read by the function
    traces (no warning) and recompiles when what they return changes."""
    class Items:
        def __init__(self, values):
            self.values = values

        def __len__(self):
            return len(self.values)

        def __iter__(self):
            return iter(self.values)
    items = Items([1.0, 2.0])

    def fn(x):
        return x * len(items) + sum(items)
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same(f(x).numpy(), fn(x).numpy(), "first")
        items.values = [1.0, 2.0, 4.0]
        same(f(x).numpy(), fn(x).numpy(), "after a change")


# -- the environment under another name, objects held weakly -------------------------------------

from os import environ as _ENV          # noqa: E402  (read under a name of the user's)
from time import perf_counter as _clock    # noqa: E402


def test_the_environment_read_under_another_name():
    """`from os import environ as ENV; ENV.get(k)`: the reader knew os.environ by its name alone,
    so the trace kept the first value (2 at every step; eager 2, 3, 4, 5)."""
    def make(lib):
        def fn(x):
            return x * float(_ENV.get("TRACEGRAD_TEST_SCALE", "1"))

        def mutate(i):
            os.environ["TRACEGRAD_TEST_SCALE"] = str(2 + i)
        return fn, mutate
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scenario(make, torch_compiled=False)
    finally:
        os.environ.pop("TRACEGRAD_TEST_SCALE", None)


def test_a_clock_read_under_another_name():
    f = tg.compile(lambda x: x + _clock())
    x = tg.zeros(1, dtype=tg.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = {f(x).item() for _ in range(3)}
    assert len(values) == 3
    assert any("_clock" in str(c.message) for c in caught)


class _Holder:
    def __init__(self, k):
        self.k = k


@pytest.mark.parametrize("how", ["weakref.ref", "WeakValueDictionary"])
def test_an_object_held_weakly_dies_between_calls(how):
    """A plain object the function reads through a weak reference, which dies between calls: the
    guards held it (their tokens, the generated check's constants), so the program kept it alive
    and went on returning its value (2 at every step; eager 2, 2, -1, -1)."""
    def make(lib):
        box = {"h": _Holder(2.0)}
        ref = weakref.ref(box["h"]) if how == "weakref.ref" else weakref.WeakValueDictionary({"a": box["h"]})

        def fn(x):
            o = ref() if how == "weakref.ref" else ref.get("a")
            return x * (o.k if o is not None else -1.0)

        def mutate(i):
            if i == 2:
                box.pop("h")
                gc.collect()
        return fn, mutate
    scenario(make)


def test_an_object_held_weakly_still_recompiles_when_its_state_changes():
    h = _Holder(2.0)
    ref = weakref.ref(h)

    def fn(x):
        return x * ref().k
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    for k in (2.0, 3.0, -0.0):
        h.k = k
        same(f(x).numpy(), fn(x).numpy(), f"k={k}")


# -- iterators consumed across calls, library functions that write their arguments --------------

def _iterator_cases():
    def for_loop():
        it = iter([1.0, 2.0, 3.0, 4.0])

        def fn(x):
            for v in it:
                return x * v
        return fn

    def islice():
        it = iter([1.0, 2.0, 3.0, 4.0])
        return lambda x: x * next(itertools.islice(it, 1))

    def dunder_next():
        it = iter([1.0, 2.0, 3.0, 4.0])
        return lambda x: x * it.__next__()

    def zipped():
        gen = (i * 1.0 for i in range(1, 10))

        def fn(x):
            (a, _), = zip(gen, [0])
            return x * a
        return fn

    def send():
        def counter():
            i = 0
            while True:
                i += 1
                yield float(i)
        gen = counter()
        return lambda x: x * gen.send(None)

    def cycle():
        cyc = itertools.cycle([1.0, 2.0, 3.0])

        def fn(x):
            for v in cyc:
                return x * v
        return fn

    def heappop():
        h = [3.0, 1.0, 2.0]
        return lambda x: x * heapq.heappop(h)

    def insort():
        h = [1.0, 3.0]

        def fn(x):
            bisect.insort(h, 2.0)
            return x * len(h)
        return fn

    def out_keyword():
        a = np.zeros(1)

        def fn(x):
            np.add(a, 1, out=a)
            return x * float(a[0])
        return fn

    def ndarray_fill():
        a = np.zeros(1)

        def fn(x):
            a.fill(a[0] + 1)
            return x * float(a[0])
        return fn

    def vars_item():
        o = _Holder(0.0)

        def fn(x):
            vars(o)["k"] += 1
            return x * o.k
        return fn

    def object_setattr():
        o = _Holder(0.0)

        def fn(x):
            object.__setattr__(o, "k", o.k + 1)
            return x * o.k
        return fn
    def unbound_list_append():
        log = []

        def fn(x):
            list.append(log, 1)
            return x * len(log)
        return fn

    def unbound_dict_setitem():
        d = {}

        def fn(x):
            dict.__setitem__(d, len(d), 1)
            return x * len(d)
        return fn

    def unbound_deque_append():
        q = collections.deque()

        def fn(x):
            collections.deque.append(q, 1)
            return x * len(q)
        return fn
    return {f.__name__: f for f in (for_loop, islice, dunder_next, zipped, send, cycle, heappop, insort, out_keyword,
                                     ndarray_fill, vars_item, object_setattr, unbound_list_append,
                                     unbound_dict_setitem, unbound_deque_append)}


_ITERATOR_CASES = _iterator_cases()


@pytest.mark.parametrize("case", sorted(_ITERATOR_CASES))
def test_state_a_call_consumes_or_writes_is_changed_at_every_call(case):
    """An outside iterator consumed (a for loop, islice, zip, __next__, send, itertools.cycle),
    heapq.heappop / bisect.insort of an outside list, np.add(..., out=a), a.fill(), vars(o)[k] +=,
    object.__setattr__, list.append(log, v) and its kind read off the class: eagerly each call takes the next item or writes again; the trace did so
    once and the program returned the first call's value at every call (1, 1, 1 where eager
    gives 1, 2, 3). Each now runs eagerly, the warning naming the line."""
    x = tg.ones(1, dtype=tg.float64)
    fn = _ITERATOR_CASES[case]()
    want = [fn(x).item() for _ in range(3)]
    f = tg.compile(_ITERATOR_CASES[case]())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [f(x).item() for _ in range(3)]
    assert got == want
    assert len(set(want)) == 3
    assert any("side effect" in str(c.message) for c in caught)


def test_an_iterator_made_inside_and_an_out_array_of_its_own_still_trace():
    """The other side: a list's iterator made inside, a for loop over an outside list (not an
    iterator), and numpy with out= into an array the function made, trace without a warning."""
    data = [1.0, 2.0, 3.0]

    def fn(x):
        buf = np.zeros(1)
        np.add(buf, 2.0, out=buf)
        s = 0.0
        for v in data:
            s += v
        return x * (s + next(iter(data)) + float(buf[0]))
    f = tg.compile(fn)
    x = tg.ones(2, dtype=tg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            same(f(x).numpy(), fn(x).numpy(), "traced")


# -- names the trace found undefined, defined later ----------------------------------------------

def _late_global(x):
    try:
        return x * _LATE        # noqa: F821  (defined and deleted between calls)
    except NameError:
        return x * -1.0


@pytest.mark.parametrize("how", ["hasattr(obj)", "try obj.k except AttributeError", "getattr(obj) through its class",
                                 "getattr(obj) through a base class", "hasattr(cls)", "hasattr(module)",
                                 "global, NameError caught"])
def test_a_name_absent_at_the_trace_and_set_later(how):
    """A name the function reads and the trace found undefined (an object's attribute, a class's
    or a base's, a module's global, a global of the function's own module), set and deleted
    again between calls: the guards took only the names present, so the program kept the
    branch of the absent name (-1 at every step; eager -1, 3, -1, 3)."""
    def make(lib):
        class Base:
            pass

        class C(Base):
            pass
        o = C()
        mod = types.ModuleType("cfg_late")
        target = {"hasattr(obj)": o, "try obj.k except AttributeError": o, "getattr(obj) through its class": C,
                  "getattr(obj) through a base class": Base, "hasattr(cls)": C, "hasattr(module)": mod,
                  "global, NameError caught": None}[how]

        def fn(x):
            if how == "hasattr(obj)":
                return x * (o.k if hasattr(o, "k") else -1.0)
            if how == "try obj.k except AttributeError":
                try:
                    return x * o.k
                except AttributeError:
                    return x * -1.0
            if how.startswith("getattr(obj)"):
                return x * getattr(o, "k", -1.0)
            if how == "hasattr(cls)":
                return x * (C.k if hasattr(C, "k") else -1.0)
            if how == "hasattr(module)":
                return x * (mod.k if hasattr(mod, "k") else -1.0)
            return _late_global(x)

        def mutate(i):
            if target is None:
                if i % 2:
                    globals()["_LATE"] = 3.0
                else:
                    globals().pop("_LATE", None)
            elif i % 2:
                setattr(target, "k", 3.0)
            elif "k" in vars(target):
                delattr(target, "k")
        return fn, mutate
    # torch.compile (2.13) keeps its program after the attribute is set where the code catches
    # AttributeError: compared with torch's eager result there
    scenario(make, torch_compiled=how != "try obj.k except AttributeError")

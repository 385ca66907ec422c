"""More state a compiled function reads, changed between calls: each case recompiles (or runs
eagerly) rather than return the first trace's result. Compared, at every step, with the eager
function, with torch.compile's result and with torch's eager one."""
import functools
import sys
import types

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.runtime import class_version

compile_module = sys.modules["tracegrad.compile"]


def same(a, b, msg):
    """Equal values, dtypes and signs of zero."""
    assert a.dtype == b.dtype, (msg, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b, err_msg=msg)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=msg + " (signs)")


def scenario(make, steps=3, torch_compiled=True, grads=False):
    """make(lib) -> (fn, mutate): fn(x) reads some state, mutate(i) changes it. For tracegrad
    (compiled) and torch (torch.compile), the compiled result (and with `grads`, the gradient
    of its sum) equals the eager one at each step; and tracegrad's equals torch's."""
    results = {}
    for lib, comp in ((tg, tg.compile), (torch, lambda f: torch.compile(f, backend="eager") if torch_compiled else f)):
        fn, mutate = make(lib)
        cf = comp(fn)
        for i in range(steps):
            if i:
                mutate(i)
            xs = [lib.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=grads) for _ in range(2)]
            got, want = cf(xs[0]), fn(xs[1])
            outs = [got.detach().numpy()]
            same(outs[0], want.detach().numpy(), f"{lib.__name__}, step {i}")
            if grads:
                got.sum().backward()
                want.sum().backward()
                outs.append(xs[0].grad.numpy())
                same(outs[1], xs[1].grad.numpy(), f"{lib.__name__}, gradient, step {i}")
            results.setdefault(i, []).append(outs)
    for i, (a, b) in results.items():
        for x, y in zip(a, b):
            same(x, y, f"tracegrad vs torch, step {i}")


# -- class attributes a class inherits ----------------------------------------------------------

@pytest.mark.parametrize("how", ["Sub.k", "Sub.k set on Sub", "cls.k of a classmethod", "Sub.cfg item",
                                 "inherited classmethod replaced"])
def test_a_class_attribute_read_through_a_subclass(how):
    """`Sub.k` (or `cls.k` in a classmethod called on Sub) where Base defines k: a new value
    on Base, a k that Sub defines later, an item of a dict on Base, the classmethod itself
    replaced on Base. The guards looked for the name in Sub's own __dict__ alone."""
    def make(lib):
        class Base:
            k = 2.0
            cfg = {"a": 2.0}

            @classmethod
            def scaled(cls, x):
                return x * cls.k

        class Sub(Base):
            pass

        fn = {"Sub.k": lambda x: x * Sub.k, "Sub.k set on Sub": lambda x: x * Sub.k,
              "cls.k of a classmethod": Sub.scaled, "Sub.cfg item": lambda x: x * Sub.cfg["a"],
              "inherited classmethod replaced": lambda x: Sub.scaled(x) + 1}[how]

        def mutate(i):
            if how == "Sub.k set on Sub":
                Sub.k = 3.0 + i
            elif how == "Sub.cfg item":
                Base.cfg["a"] = 3.0 + i
            elif how == "inherited classmethod replaced":
                Base.scaled = classmethod(lambda cls, x: x * (5.0 + i))
            else:
                Base.k = 3.0 + i
        return fn, mutate
    # torch.compile (2.13) keeps its program when the classmethod is replaced on the base:
    # compared with torch's eager result there
    scenario(make, grads=True, torch_compiled=how != "inherited classmethod replaced")


# -- Tensor methods replaced after the trace ----------------------------------------------------

@pytest.mark.parametrize("how", ["relu", "__add__", "sum wrapped", "a method added then replaced", "Parameter"])
def test_a_tensor_method_replaced_on_the_class(monkeypatch, how):
    """`Tensor.relu = f` after the first call: eager runs f, so must the next compiled call (torch.compile
    does). The program's guards read the version of the class's attributes (class_version.py)."""
    def make(lib):
        T = lib.Tensor
        if how == "a method added then replaced":
            monkeypatch.setattr(T, "scaled", lambda self: self * 2, raising=False)
        if how == "Parameter":
            w = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64))
        fn = {"relu": lambda x: x.relu() * 2, "__add__": lambda x: (x + x) * 2,
              "sum wrapped": lambda x: x.sum(0) * x, "a method added then replaced": lambda x: x.scaled() + 1,
              "Parameter": lambda x: x * w.exp()}[how]

        def mutate(i):
            if how == "relu":
                monkeypatch.setattr(T, "relu", lambda self: self * (10.0 + i))
            elif how == "__add__":
                monkeypatch.setattr(T, "__add__", lambda a, b: a * (3.0 + i) - b)
            elif how == "sum wrapped":
                orig = T.sum
                monkeypatch.setattr(T, "sum", lambda self, *a: orig(self, *a) * 2)
            elif how == "a method added then replaced":
                monkeypatch.setattr(T, "scaled", lambda self: self * (4.0 + i))
            else:
                P = lib.nn.Parameter
                monkeypatch.setattr(P, "exp", lambda self: T.exp(self) * (2.0 + i), raising=False)
        return fn, mutate
    # (tracegrad's eager backward adds gradients with `+`, so a patched __add__ changes its
    # gradients, which torch's engine does not: values alone there)
    scenario(make, grads=how != "__add__")
    monkeypatch.undo()


def test_a_tensor_method_put_back_still_runs_the_original():
    """Patched, called, put back: each call runs what eager would (the program of the patched
    method is not kept after the class changes again)."""
    orig = tg.Tensor.relu
    cf = tg.compile(lambda x: x.relu() * 2)
    x = tg.tensor([1.0, -2.0, 3.0])
    try:
        for k in range(3):
            tg.Tensor.relu = lambda self: self * 10.0
            same(cf(x).numpy(), np.array([20.0, -40.0, 60.0], np.float32), f"patched, round {k}")
            tg.Tensor.relu = orig
            same(cf(x).numpy(), np.array([2.0, 0.0, 6.0], np.float32), f"put back, round {k}")
    finally:
        tg.Tensor.relu = orig


def test_class_version_sees_every_write_and_no_read():
    """Both ways of reading a class's version (CPython's dict tag, or its attributes compared)
    change on a set, a replacement, an addition and a deletion, and not on reads or calls."""
    assert class_version._TAG_WORKS == (class_version.sys.implementation.name == "cpython")

    class K:
        def m(self):
            return 1
    for use_tag in (True, False):
        def fresh():
            v = class_version.ClassVersion(K)
            if not use_tag:
                v.tag, v.names, v.values = None, tuple(vars(K)), tuple(vars(K).values())
            return v
        v = fresh()
        _ = K().m(), K.m, vars(K).get("x"), hasattr(K, "y"), len(vars(K))
        assert v.same()
        for what, change in (("replaced", lambda: setattr(K, "m", lambda self: 2)),
                             ("added", lambda: setattr(K, "n", 1)), ("deleted", lambda: delattr(K, "n"))):
            v = fresh()
            change()
            assert not v.same(), (use_tag, what)
            assert not v.same(), (use_tag, what, "asked again")
        v = fresh()
        K.m = K.__dict__["m"]          # the object already there: nothing changed
        assert v.same(), use_tag


# -- what the trace read of a captured tensor in Python -----------------------------------------

@pytest.mark.parametrize("how", ["stride after t_", "is_contiguous after data = transposed",
                                 "stride after data = a column-major array"])
def test_the_layout_of_a_captured_tensor_read_in_python(how):
    """`w.stride()` or `w.is_contiguous()` of a captured tensor, baked into the program as a
    number or a branch: its shape stays, its strides change (`w.t_()` of a square matrix,
    `w.data = v.t()`). The guards compared shape, dtype and requires_grad alone."""
    def make(lib):
        w = lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64)

        def fn(x):
            if how.startswith("stride"):
                return x[:2] * w.stride()[0] + w.sum(0)
            return x[:2] * (2.0 if w.is_contiguous() else 3.0) + w.sum(0)

        def mutate(i):
            if how == "stride after t_":
                w.t_()
            elif how == "is_contiguous after data = transposed":
                w.data = w.data.t() if i == 1 else w.data.contiguous()
            else:
                w.data = lib.from_numpy(np.asfortranarray(w.detach().numpy()) * i)
        return fn, mutate
    scenario(make, steps=4, grads=True)


def test_the_text_of_a_captured_tensor():
    """`repr(w)` of a captured tensor holds its values: a write to w changes it. (The text of
    an argument, a symbolic value, makes the function run eagerly: test_compile_guards_adversary.py.)"""
    def make(lib):
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)

        def fn(x):
            return x * len(repr(w)) + len(f"{w}")

        def mutate(i):
            w.mul_(1000.0)
        return fn, mutate
    scenario(make, grads=True)


@pytest.mark.parametrize("how", ["float", "dict item", "on a parameter"])
def test_a_python_attribute_of_a_captured_tensor(how):
    """`w.scale` set on a captured tensor (or `p.mult` on a module's parameter) and changed:
    the guards compared the tensor's metadata alone."""
    def make(lib):
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
        lin = lib.nn.Linear(3, 3).double()
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(np.arange(9.0).reshape(3, 3) / 8))      # exact products
            lin.bias.zero_()
        w.scale, w.cfg, lin.weight.mult = 2.0, {"s": 2.0}, 2.0
        fn = {"float": lambda x: x * w * w.scale, "dict item": lambda x: x * w * w.cfg["s"],
              "on a parameter": lambda x: lin(x) * lin.weight.mult}[how]

        def mutate(i):
            w.scale = lin.weight.mult = 3.0 + i
            w.cfg["s"] = 5.0 + i
        return fn, mutate
    scenario(make, grads=True)


@pytest.mark.parametrize("setting", ["anomaly detection", "warn_always", "print options"])
def test_a_setting_of_the_process_read_in_python(setting):
    """`torch.is_anomaly_enabled()`, `torch.is_warn_always_enabled()` or a tensor's text (which
    follows the print options) read in the function, the setting changed between calls: no
    call's key holds them, so the trace notes the read and its program is guarded on the value."""
    def make(lib):
        w = lib.tensor([1 / 3, 2.0, 3.0], dtype=lib.float64)
        read = {"anomaly detection": lambda: 2.0 if lib.is_anomaly_enabled() else 1.0,
                "warn_always": lambda: 2.0 if lib.is_warn_always_enabled() else 1.0,
                "print options": lambda: float(len(repr(w)))}[setting]

        def fn(x):
            return x * read()

        def mutate(i):
            if setting == "anomaly detection":
                lib.autograd.set_detect_anomaly(i == 1)
            elif setting == "warn_always":
                lib.set_warn_always(i == 1)
            else:
                lib.set_printoptions(precision=2 + 3 * i)
        return fn, mutate
    try:
        scenario(make)
    finally:
        for lib in (tg, torch):
            lib.autograd.set_detect_anomaly(False)
            lib.set_warn_always(False)
            lib.set_printoptions(profile="default")


def test_the_initial_seed_read_in_python():
    """`torch.initial_seed()` read in the function and the generator seeded again between calls:
    a read of the generator's state, which a program would not read again; the function runs
    eagerly, as for its state read or set (creation._no_state_change_in_trace)."""
    def make(lib):
        lib.manual_seed(3)

        def fn(x):
            return x * float(lib.initial_seed() % 7)

        def mutate(i):
            lib.manual_seed(3 + i)
        return fn, mutate
    with pytest.warns(UserWarning, match="seeded, or its state read"):
        try:
            scenario(make, torch_compiled=False)
        finally:
            tg.manual_seed(0)
            torch.manual_seed(0)


# -- names a module or a class answers at run time ----------------------------------------------

def _user_module(name, source):
    """A module of the user's, made from source (as a notebook's or a config file's module)."""
    mod = types.ModuleType(name)
    exec(source, vars(mod))
    return mod


@pytest.mark.parametrize("how", ["module __getattr__", "module __getattr__ then a global", "vars(mod)[name]",
                                 "getattr(mod, NAME)"])
def test_a_name_a_user_module_answers_at_run_time(how):
    """A module's `__getattr__` (PEP 562) answering `cfg.SCALE` from a dict, later a global of
    that name hiding it; a global of another module read by a name the code computes
    (`vars(cfg)["SCALE"]`, `getattr(cfg, NAME)`): the guards looked up the names the code
    spells, in the module's own dict alone."""
    def make(lib):
        cfg = _user_module("cfg_" + how.split()[0].replace("(", ""),
                           "_VALUES = {'SCALE': 2.0}\n"
                           "def __getattr__(name):\n"
                           "    if name in _VALUES:\n"
                           "        return _VALUES[name]\n"
                           "    raise AttributeError(name)\n"
                           "OTHER = 2.0\n")
        name = "OTHER"
        fn = {"module __getattr__": lambda x: x * cfg.SCALE, "module __getattr__ then a global": lambda x: x * cfg.SCALE,
              "vars(mod)[name]": lambda x: x * vars(cfg)["OTHER"], "getattr(mod, NAME)": lambda x: x * getattr(cfg, name)}[how]

        def mutate(i):
            if how == "module __getattr__":
                cfg._VALUES["SCALE"] = 3.0 + i
            elif how == "module __getattr__ then a global":
                cfg.SCALE = 5.0 + i
            else:
                cfg.OTHER = 3.0 + i
        return fn, mutate
    scenario(make, grads=True)


@pytest.mark.parametrize("how", ["property", "__getattr__"])
def test_a_class_attribute_a_metaclass_answers(how):
    """`C.k` answered by a property or a `__getattr__` of the user's metaclass, from state of C
    that then changes: the metaclass's methods were not walked."""
    def make(lib):
        class Meta(type):
            @property
            def k(cls):
                return cls._k

            def __getattr__(cls, name):
                if name in cls._values:
                    return cls._values[name]
                raise AttributeError(name)

        class C(metaclass=Meta):
            _k = 2.0
            _values = {"j": 2.0}
        fn = {"property": lambda x: x * C.k, "__getattr__": lambda x: x * C.j}[how]

        def mutate(i):
            C._k = 3.0 + i
            C._values["j"] = 4.0 + i
        return fn, mutate
    scenario(make, grads=True)


def test_a_metaclass_getattr_that_raises_key_error():
    """A metaclass `__getattr__` that raises KeyError for the names it lacks: the side-effect
    scan asked `hasattr(C, "_backward_cls")` (is C a custom autograd.Function?), which raised
    it at the first call; it looks attributes up statically now. (torch.compile 2.13 raises an
    InternalTorchDynamoError here: compared with the eager function alone.)"""
    class Meta(type):
        def __getattr__(cls, name):
            return cls._values[name]

    class C(metaclass=Meta):
        _values = {"j": 2.0}

    def fn(x):
        return x * C.j
    cf = tg.compile(fn)
    for i in range(3):
        C._values["j"] = 2.0 + i
        x = tg.tensor([1.0, -2.0, 3.0])
        same(cf(x).numpy(), fn(x).numpy(), f"step {i}")


def test_an_optimizer_method_replaced_on_its_class_after_a_whole_step():
    """`optim.SGD.step = f` after the first call of a compiled whole step: eager runs f; the
    program kept the traced step (the library classes guarded were those of the modules met).
    Compared with the eager step, loss for loss and weight for weight."""
    results = []
    orig = tg.optim.SGD.step
    try:
        for compiled in (True, False):
            tg.optim.SGD.step = orig
            lin = tg.nn.Linear(3, 1).double()
            with tg.no_grad():
                lin.weight.copy_(tg.tensor([[0.5, -0.25, 0.125]], dtype=tg.float64))
                lin.bias.zero_()
            opt = tg.optim.SGD(lin.parameters(), lr=0.1)

            def step(x):
                opt.zero_grad()
                loss = lin(x).pow(2).sum()
                loss.backward()
                opt.step()
                return loss
            f = tg.compile(step) if compiled else step
            x = tg.tensor([[1.0, 2.0, 3.0]], dtype=tg.float64)
            out = []
            for i in range(3):
                if i == 1:
                    def halve(self, closure=None):
                        with tg.no_grad():
                            for p in self.param_groups[0]["params"]:
                                p.mul_(0.5)
                    tg.optim.SGD.step = halve
                out.append((f(x).item(), lin.weight.detach().numpy().copy()))
            results.append(out)
    finally:
        tg.optim.SGD.step = orig
    for i, ((l1, w1), (l2, w2)) in enumerate(zip(*results)):
        assert l1 == l2, (i, l1, l2)
        same(w1, w2, f"weights after step {i}")


@pytest.mark.parametrize("owner", ["object", "function"])
def test_a_dict_of_attributes_replaced_whole(owner):
    """`o.__dict__ = {...}` (or a function's): the guards read the attributes from the dict the
    trace read, which the object no longer has."""
    def make(lib):
        class Holder:
            pass
        o = Holder()
        o.k = 2.0

        def fn(x):
            return x * (o.k if owner == "object" else fn.k)
        fn.k = 2.0

        def mutate(i):
            if owner == "object":
                o.__dict__ = {"k": 5.0 + i}
            else:
                fn.__dict__ = {"k": 5.0 + i}
        return fn, mutate
    scenario(make, grads=True)


@pytest.mark.parametrize("what", ["numpy array", "bytearray", "SimpleNamespace", "on a module's class"])
def test_a_mutable_class_attribute_read_through_an_instance(what):
    """`self.table[0]` where `table = np.array(...)` is a class attribute (or a bytearray, a
    SimpleNamespace), written in place: the class's guard compared it by identity and walked
    into containers and user objects alone."""
    def make(lib):
        class Holder:
            table = np.array([2.0])
            raw = bytearray(b"\x02")
            ns = types.SimpleNamespace(k=2.0)

        class Scaled(lib.nn.Module):
            table = np.array([2.0])

            def forward(self, x):
                return x * float(self.table[0])
        o = Holder()
        mod = Scaled()
        fn = {"numpy array": lambda x: x * float(o.table[0]), "bytearray": lambda x: x * o.raw[0],
              "SimpleNamespace": lambda x: x * o.ns.k, "on a module's class": mod}[what]

        def mutate(i):
            Holder.table[0] = Scaled.table[0] = 5.0 + i
            Holder.raw[0] = 5 + i
            Holder.ns.k = 5.0 + i
        return fn, mutate
    scenario(make, grads=True)


@pytest.mark.parametrize("dunder", ["__mul__", "__neg__", "__eq__", "__lt__", "__abs__", "__round__", "__str__",
                                    "__format__", "__hash__", "__enter__"])
def test_a_special_method_python_calls_for_the_code(dunder):
    """`n * x`, `-n`, `n == 3.0`, `abs(n)`, `round(n)`, `str(n)`, `f"{n}"`, `hash(n)`, `with n as k`:
    Python calls the class's special method, which the code never names, and the method reads
    a class attribute that then changes. The walk followed a fixed list of them (__call__,
    __getitem__, __float__, ...), not these."""
    def make(lib):
        class Num:
            k = 2.0

            def __mul__(self, o):
                return o * Num.k

            def __neg__(self):
                return -Num.k

            def __eq__(self, o):
                return Num.k == o

            def __lt__(self, o):
                return Num.k < o

            def __abs__(self):
                return Num.k

            def __round__(self, ndigits=None):
                return Num.k

            def __str__(self):
                return str(Num.k)

            def __format__(self, spec):
                return str(Num.k)

            def __hash__(self):
                return int(Num.k)

            def __enter__(self):
                return Num.k

            def __exit__(self, *exc):
                return False
        n = Num()

        def with_block(x):
            with n as k:
                return x * k
        fn = {"__mul__": lambda x: n * x, "__neg__": lambda x: x * -n,
              "__eq__": lambda x: x * (2.0 if n == 3.0 else 3.0), "__lt__": lambda x: x * (2.0 if n < 2.5 else 3.0),
              "__abs__": lambda x: x * abs(n), "__round__": lambda x: x * round(n), "__str__": lambda x: x * float(str(n)),
              "__format__": lambda x: x * float(f"{n}"), "__hash__": lambda x: x * hash(n),
              "__enter__": with_block}[dunder]

        def mutate(i):
            Num.k = 3.0 + i
        return fn, mutate
    # torch.compile (2.13) keeps its program after __lt__, __str__ and __hash__'s class attribute
    # changes: compared with torch's eager result there
    scenario(make, grads=True, torch_compiled=dunder not in ("__lt__", "__str__", "__hash__"))


@pytest.mark.parametrize("how", ["a global the implementation reads", "another implementation registered"])
def test_a_singledispatch_function(how):
    """`functools.singledispatch` with an implementation registered for tensors: the walk
    followed the wrapper's default function alone, not the registry."""
    def make(lib):
        scale = {"k": 2.0}

        @functools.singledispatch
        def times(v):
            return v

        @times.register(lib.Tensor)
        def _(v):
            return v * scale["k"]

        def fn(x):
            return times(x) + 1

        def mutate(i):
            if how == "a global the implementation reads":
                scale["k"] = 3.0 + i
            else:
                times.register(lib.Tensor, lambda v: v * (7.0 + i))
        return fn, mutate
    scenario(make, grads=True, torch_compiled=True)


def test_the_mask_of_a_masked_array():
    """A numpy masked array read by the function, its mask changed: the array's guard compared
    its values alone, not the state its subclass keeps beside them."""
    def make(lib):
        m = np.ma.array([1.0, 2.0, 3.0], mask=[False, False, False])

        def fn(x):
            return x * lib.tensor(m.filled(0.0))

        def mutate(i):
            m.mask = [i == 1, i == 2, False]
        return fn, mutate
    scenario(make, grads=True)


@pytest.mark.parametrize("name", ["detach", "numel", "size"])
def test_a_tensor_method_the_trace_answers_itself_replaced_before_the_first_call(monkeypatch, name):
    """`Tensor.numel = f` before the first call: a trace's symbolic values answer numel (and
    size, detach, item, ...) with their own version, so the program ignored f (x * 2 where
    eager gave x * 100). The function runs eagerly, with a warning naming the method; once the
    method is put back it compiles again."""
    orig = getattr(tg.Tensor, name)
    new = {"detach": lambda self: orig(self) * 2, "numel": lambda self: 100,
           "size": lambda self, dim=None: orig(self) if dim is None else 100}[name]
    fn = {"detach": lambda x: x.detach() + x, "numel": lambda x: x * x.numel(), "size": lambda x: x * x.size(0)}[name]
    monkeypatch.setattr(tg.Tensor, name, new)
    cf = tg.compile(fn)
    x = tg.tensor([1.0, 2.0])
    with pytest.warns(UserWarning, match=f"Tensor.{name} is replaced"):
        got = cf(x)
    same(got.numpy(), fn(x).numpy(), "patched")
    assert all(p is compile_module._EAGER for p in cf.cache.programs())
    monkeypatch.undo()
    same(cf(x).numpy(), fn(x).numpy(), "put back")
    assert any(p is not compile_module._EAGER for p in cf.cache.programs())      # traced this time


@pytest.mark.parametrize("how", ["retains_grad", "is_inference"])
def test_autograd_flags_of_a_captured_tensor_read_in_python(how):
    """`w.retains_grad` or `w.is_inference()` of a captured tensor in a branch, then
    `w.retain_grad()` or `w.data = t` of an inference tensor: the guards compared the tensor's
    shape, dtype and requires_grad alone. (Of an argument such a read makes the call run
    eagerly: test_compile_guards_more.py.)"""
    def make(lib):
        a = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        w = a * 2

        def fn(x):
            flag = w.retains_grad if how == "retains_grad" else w.is_inference()
            return x * (2.0 if flag else 3.0)

        def mutate(i):
            if how == "retains_grad":
                w.retain_grad()
            else:
                with lib.inference_mode():
                    w.data = lib.ones(3, dtype=lib.float64)
        return fn, mutate
    # torch.compile (2.13) keeps its program after w.retain_grad(): compared with torch's eager result
    scenario(make, grads=True, torch_compiled=how != "retains_grad")


def test_a_computed_name_leaves_unrelated_module_state_alone():
    """Where the code computes names (`getattr`), the guards take only the globals of a user
    module that strings of the code name: a cache in that module changing between calls is no
    reason to compile again (one program for twelve calls), while the name read is guarded."""
    cfg = _user_module("cfg_cache", "CACHE = {}\nSCALE = 2.0\n")

    def fn(x):
        return x * getattr(cfg, "SCALE")
    cf = tg.compile(fn)
    for i in range(12):
        cfg.CACHE[i] = i
        x = tg.tensor([1.0, -2.0, 3.0])
        same(cf(x).numpy(), fn(x).numpy(), f"call {i}")
    assert cf.cache.compiles == 1
    cfg.SCALE = 5.0
    same(cf(x).numpy(), fn(x).numpy(), "SCALE changed")


@pytest.mark.parametrize("how", ["attribute set", "rebound to an equal value"])
def test_a_float_subclass_with_state_of_its_own(how):
    """A user's float subclass whose method reads an attribute of its own: the walk took it as a
    float (its bits alone), so a new attribute value, or another instance of equal value and
    other attributes, left the first trace's result."""
    class Scale(float):
        def times(self, x):
            return x * float(self) * self.k

    def make(lib):
        holder = {"s": Scale(2.0)}
        holder["s"].k = 1.0

        def fn(x):
            return holder["s"].times(x)

        def mutate(i):
            if how == "attribute set":
                holder["s"].k = 3.0 + i
            else:
                holder["s"] = Scale(2.0)
                holder["s"].k = 5.0 + i
        return fn, mutate
    scenario(make, grads=True)

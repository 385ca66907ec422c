"""Python side effects inside @tracegrad.compile, generated source safe from user text,
and fallback messages that name the user's line (issue 14: items 5 and 6, and the
misleading fallback messages).

A side effect on state the call does not own makes the function run eagerly from the
start, with one warning naming the line (torch.compile's answers are the oracle: every
call's effect happens, with real tensors); local lists built in the function still trace.
"""
import inspect
import sys
import traceback
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as nn
from tracegrad.compile import CompileError
from tracegrad.runtime import side_effects

HERE = __file__.rstrip("c")


def leaf(*shape, seed=0, req=True):
    rng = np.random.default_rng(seed)
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, requires_grad=req)


def close(a, b, rtol=1e-10, atol=1e-12):
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def line_of(fn, text):
    """The file line of the first line of fn's source that contains text."""
    lines, first = inspect.getsourcelines(fn)
    for k, s in enumerate(lines):
        if text in s:
            return first + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def one_warning(record, fn, text):
    """The single UserWarning recorded names fn's line holding text, as file:line and as
    the warning's own location."""
    ws = [w for w in record if issubclass(w.category, UserWarning)]
    assert len(ws) == 1, [str(w.message) for w in ws]
    w = ws[0]
    line = line_of(fn, text)
    assert f"{HERE}:{line}" in str(w.message)
    assert w.filename == HERE and w.lineno == line
    return str(w.message)


def run_both(make, calls=3):
    """make(lib) -> (fn, state): fn compiled by tracegrad and by torch.compile (its eager
    backend: dynamo's answer), each called `calls` times on the same values."""
    out = {}
    for lib in (tg, torch):
        fn, state = make(lib)
        compiled = tg.compile(fn) if lib is tg else torch.compile(fn, backend="eager")
        xs = [lib.tensor(np.arange(3.0) + k, dtype=lib.float64) for k in range(calls)]
        out[lib.__name__] = ([compiled(x) for x in xs], state)
    return out


# -- item 5: side effects run eagerly, every call, with real values ------------------------------

def _effects(lib):
    state = {"log": [], "count": 0, "seen": {}}

    def f(x):
        y = x * 2
        state["log"].append(y)               # an outside list
        state["count"] += 1                  # an outside dict's item
        state["seen"][len(state["log"])] = y.sum()
        return y + 1
    return f, state


def test_side_effects_happen_every_call_with_real_tensors_as_torch_compile():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = run_both(_effects)
    (tg_out, tg_state), (t_out, t_state) = got["tracegrad"], got["torch"]
    fn, _ = _effects(tg)
    msg = one_warning([w for w in record if "tracegrad.compile" in str(w.message)], fn, 'state["log"].append(y)')
    assert "side effect" in msg and "running it eagerly" in msg
    assert tg_state["count"] == t_state["count"] == 3
    assert len(tg_state["log"]) == len(t_state["log"]) == 3
    for a, b in zip(tg_state["log"], t_state["log"]):
        assert type(a) is tg.Tensor                       # never a symbolic value
        close(a, b)
    for k in t_state["seen"]:
        close(tg_state["seen"][k], t_state["seen"][k])
    for a, b in zip(tg_out, t_out):
        close(a, b)


COUNT = 0


def test_global_and_nonlocal_counters_count_every_call():
    def bump(x):
        global COUNT
        COUNT += 1
        return x.exp()

    def make():
        n = 0

        def inner(x):
            nonlocal n
            n += 1
            return x.sin()
        return inner, lambda: n

    global COUNT
    COUNT = 0
    cf = tg.compile(bump)
    x = leaf(4)
    with pytest.warns(UserWarning) as record:
        for _ in range(3):
            close(cf(x), bump(x))
    one_warning(record, bump, "COUNT += 1")
    assert COUNT == 6                      # three compiled calls and three eager ones
    inner, count = make()
    ci = tg.compile(inner)
    with pytest.warns(UserWarning, match="nonlocal") as record:
        for _ in range(4):
            ci(x)
    one_warning(record, inner, "n += 1")
    assert count() == 4


def test_print_runs_every_call(capsys):
    def f(x):
        print("value", x.shape)
        return x * 3
    cf = tg.compile(f)
    with pytest.warns(UserWarning, match=r"calls `print\(\.\.\.\)`") as record:
        for _ in range(3):
            cf(leaf(2))
    one_warning(record, f, "print(")
    assert capsys.readouterr().out.count("value") == 3



LOGGER = __import__("logging").getLogger("tracegrad-tests.side-effects")


def test_warnings_and_log_records_are_written_every_call(caplog):
    """warnings.warn and a logger's info(...) in a compiled function are side effects: written at
    every call (as torch.compile, which breaks the graph there), never once at the trace."""
    def warns(x):
        if x.shape[0] > 1:
            warnings.warn("a big batch")
        return x * 3

    def logs(x):
        LOGGER.info("shape %s", tuple(x.shape))
        return x * 3
    cw = tg.compile(warns)
    with pytest.warns(UserWarning) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            close(cw(leaf(2)), leaf(2) * 3)
    assert sum("a big batch" == str(w.message) for w in record) == 3
    assert sum("writes a warning or a log record" in str(w.message) for w in record) == 1
    cl = tg.compile(logs)
    LOGGER.disabled = False          # (a logging.config call elsewhere in the session may have disabled it)
    with caplog.at_level("INFO", logger=LOGGER.name), pytest.warns(UserWarning, match="LOGGER.info"):
        for _ in range(3):
            cl(leaf(2))
    assert sum(r.getMessage() == "shape (2,)" for r in caplog.records) == 3


def test_requires_grad_set_on_a_value_made_inside_runs_eagerly():
    """A tensor made inside the function and then set to require grad is a leaf of the user's
    graph (its .grad filled by backward); a program has no such leaf: the call runs eagerly,
    as torch.compile gives the same leaf."""
    def f(x):
        w = tg.ones(3, dtype=tg.float64) * 2
        w.requires_grad_()
        return (x * w).sum(), w
    cf = tg.compile(f)
    with pytest.warns(UserWarning, match=r"requires_grad_\(True\)"):
        loss, w = cf(leaf(3, req=False))
    assert w.requires_grad and w.is_leaf and loss.requires_grad
    loss.backward()
    close(w.grad, leaf(3, req=False))


class Remember(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3).double()
        self.last = None

    def forward(self, x):
        h = self.fc(x).tanh()
        self.last = h
        return h.sum()


class History(nn.Module):
    def __init__(self):
        super().__init__()
        self.hist = []

    def forward(self, x):
        self.hist.append(x.detach())
        return x * 2


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3).double()
        self.inner = History()

    def forward(self, x):
        return self.inner(self.fc(x)).sum()


def test_module_attribute_set_in_forward_holds_the_real_value():
    m = Remember()
    cm = tg.compile(m)
    x = leaf(2, 3)
    with pytest.warns(UserWarning, match=r"sets `self.last`") as record:
        y = cm(x)
    one_warning(record, Remember.forward, "self.last = h")
    assert type(m.last) is tg.Tensor
    close(m.last, m.fc(x).tanh())
    y.backward()
    assert m.fc.weight.grad is not None


def test_a_submodules_side_effect_is_found():
    m = Outer()
    cm = tg.compile(m)
    with pytest.warns(UserWarning, match=r"self.hist.append") as record:
        for k in range(2):
            cm(leaf(2, 3, seed=k))
    one_warning(record, History.forward, "self.hist.append")
    assert len(m.inner.hist) == 2 and all(type(h) is tg.Tensor for h in m.inner.hist)


LOG = []


def _record(v):
    LOG.append(v)


def test_a_side_effect_in_a_global_helper_is_found_at_its_line():
    def f(x):
        y = x.cos()
        _record(y)
        return y * 2
    LOG.clear()
    with pytest.warns(UserWarning) as record:
        tg.compile(f)(leaf(3))
    one_warning(record, _record, "LOG.append(v)")
    assert len(LOG) == 1 and type(LOG[0]) is tg.Tensor


def test_an_argument_list_appended_to_is_a_side_effect_but_a_tensor_argument_is_not():
    def f(x, acc):
        acc.append(x.sum())
        return x * 2
    acc = []
    with pytest.warns(UserWarning, match=r"acc.append"):
        tg.compile(f)(leaf(3), acc)
    assert len(acc) == 1 and type(acc[0]) is tg.Tensor


def test_fullgraph_raises_compile_error_naming_the_line():
    def f(x, log=LOG):
        log.append(1)
        return x
    with pytest.raises(CompileError, match=rf"{HERE}:{line_of(f, 'log.append(1)')}.*fullgraph=True"):
        tg.compile(f, fullgraph=True)(leaf(3))


def test_side_effects_never_run_twice_after_a_partial_trace():
    # the side effect comes before the untraceable .item(): it runs once per call, from the start
    seen = []

    def f(x):
        seen.append(1)
        return x * x.sum().item()
    cf = tg.compile(f)
    with pytest.warns(UserWarning, match="side effect"):
        cf(leaf(3))
    cf(leaf(3))
    assert seen == [1, 1]


def test_local_lists_and_dicts_still_trace_whole():
    def f(x):
        xs = []
        for k in range(3):
            xs.append(x * k)
        parts = {}
        parts["a"] = tg.stack(xs).sum(0)
        parts.update(b=x.exp())
        out = [parts["a"]]
        out.extend([parts["b"]])
        y = x.clone()
        return out[0] + out[1] + y.add(1)     # a tensor method named like a set's

    def t(x):
        return sum(x * k for k in range(3)) + x.exp() + x + 1
    cf = tg.compile(f, fullgraph=True)
    x = leaf(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = cf(x)
    assert cf.last_program is not None
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    close(y, t(xt))
    y.sum().backward()
    t(xt).sum().backward()
    close(x.grad, xt.grad)


def test_a_module_whose_forward_builds_local_lists_traces_whole():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4).double() for _ in range(2)])

        def forward(self, x):
            outs = []
            for layer in self.layers:
                x = layer(x).relu()
                outs.append(x)
            return tg.cat(outs, 1).sum()
    m = Net()
    cm = tg.compile(m, fullgraph=True)
    x = leaf(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close(cm(x), m(x))


def test_the_bytecode_is_read_once_per_compiled_function(monkeypatch):
    reads = []
    real = side_effects._Finder.follow

    def counting(self, obj, *a, **k):
        reads.append(obj)
        return real(self, obj, *a, **k)
    monkeypatch.setattr(side_effects._Finder, "follow", counting)

    def f(x):
        return (x * 2).sum()
    cf = tg.compile(f)
    for n in (2, 3, 4, 4, 4):                 # three programs, five calls
        cf(leaf(n))
    assert cf.cache.compiles == 3
    assert reads.count(f) == 1


def test_side_effect_reader_knows_each_kind():
    x = leaf(3)
    found = {}
    outside = {"d": {}, "l": []}

    def helper_free(x):
        xs = [x]
        xs.append(x)
        d = {}
        d["k"] = x
        return xs, d

    def sets_item(x):
        outside["d"]["k"] = x

    def deletes_item(x):
        del outside["d"]["k"]

    def loops(x):
        for lst in outside.values():
            lst.append(x)

    def io(x):
        sys.stdout.write("x")

    def uses_global(x):
        global COUNT
        COUNT = 1

    def namespace(x):
        globals()["LEAKED"] = x

    for fn in (helper_free, sets_item, deletes_item, loops, io, uses_global, namespace):
        found[fn.__name__] = side_effects.SideEffects(fn).find((x,), {})
    assert found["helper_free"] == []
    assert "writes an item" in found["sets_item"][0].what
    assert "writes an item" in found["deletes_item"][0].what
    assert "append" in found["loops"][0].what
    assert "write" in found["io"][0].what
    assert "global variable `COUNT`" in found["uses_global"][0].what
    assert "globals(...)" in found["namespace"][0].what


# -- item 6: generated source is never built from user text -----------------------------------------

def test_a_file_name_with_a_newline_and_quotes_never_becomes_code():
    import builtins
    name = "evil\n    __import__('builtins').__dict__.__setitem__('TG_INJECTED', 1)  #\"'.py"
    ns = {"tg": tg}
    exec(compile("def h(x):\n    return (x * 2).exp().sum(1) + x.sin().sum(1)\n", name, "exec"), ns)
    ch = tg.compile(ns["h"], fullgraph=True)
    x = leaf(2, 3)
    y = ch(x)
    y.sum().backward()
    assert not hasattr(builtins, "TG_INJECTED")
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    yt = (xt * 2).exp().sum(1) + xt.sin().sum(1)
    yt.sum().backward()
    close(y, yt)
    close(x.grad, xt.grad)
    p = ch.last_program
    for src in (p.fwd_fn.source, p.bwd_fn.source, str(p.fwd_ir)):
        for line in src.splitlines():
            if "TG_INJECTED" in line:
                assert "#" in line and line.index("#") < line.index("TG_INJECTED")
        assert "__setitem__" not in "\n".join(ln.split("#")[0] for ln in src.splitlines())
    assert "evil\\n" in p.fwd_fn.source      # the file name, escaped inside its comment


class EvilInt(int):
    hits = []

    def __repr__(self):
        EvilInt.hits.append(self)
        return "__import__('builtins').__dict__.__setitem__('TG_REPR', 1) or 7"

    __str__ = __repr__
    __format__ = lambda self, spec: repr(self)


class EvilFloat(float):
    def __repr__(self):
        EvilInt.hits.append(self)
        return "__import__('builtins').__dict__.__setitem__('TG_REPR', 1) or 7.0"

    __str__ = __repr__


def test_a_constants_own_repr_never_runs_and_the_result_equals_eager():
    import builtins
    EvilInt.hits.clear()

    def f(x):
        y = x * EvilInt(3) + EvilFloat(2.5)
        return y.reshape(EvilInt(3), 2).sum(EvilInt(0)) * EvilInt(2)

    def t(x):
        return ((x * 3 + 2.5).reshape(3, 2).sum(0) * 2)
    x = leaf(2, 3)
    want = f(x)
    got = tg.compile(f)(x)
    got.sum().backward()
    one = leaf(1)
    small = tg.compile(lambda v: v * EvilInt(4) + EvilFloat(0.5))(one)     # the Python-float program
    assert EvilInt.hits == [] and not hasattr(builtins, "TG_REPR")
    close(got, want)
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    close(got, t(xt))
    t(xt).sum().backward()
    close(x.grad, xt.grad)
    close(small, one * 4 + 0.5)
    out = tg.explain(f, x, file=open("/dev/null", "w"))
    assert EvilInt.hits == [] and "TG_REPR" not in out


# -- fallback messages ---------------------------------------------------------------------------

def test_a_users_shape_error_raises_once_with_no_warning():
    def f(x):
        y = x.exp()
        return y + tg.ones(4, dtype=tg.float64)          # shapes (3,) and (4,)
    cf = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="must match the size") as e:
            cf(leaf(3))
    text = "".join(traceback.format_exception(e.value))
    assert "During handling" not in text and "cannot be traced" not in text and "Proxy" not in text
    tb = [(t.path, t.lineno + 1) for t in e.traceback]
    assert any(str(p) == HERE and ln == line_of(f, "tg.ones(4") for p, ln in tb)
    # torch.compile raises at once too (a RuntimeError naming the mismatched sizes)
    with pytest.raises(RuntimeError, match="4"):
        torch.compile(lambda x: x.exp() + torch.ones(4, dtype=torch.float64), backend="eager")(
            torch.zeros(3, dtype=torch.float64))


def test_dropout_compiled_as_it_is_names_the_callers_line():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).double()
    cm = tg.compile(model)
    x = leaf(4, 3, req=False)
    line = inspect.currentframe().f_lineno + 2
    with pytest.warns(UserWarning, match=r"random numbers.*nn\.Dropout") as record:
        cm(x)                                                  # the line the warning names
    ws = [w for w in record if "tracegrad.compile" in str(w.message)]
    assert len(ws) == 1
    assert ws[0].filename == HERE and ws[0].lineno == line
    assert f"{HERE}:{line} (`cm(x)" in str(ws[0].message)


def test_dropout_inside_a_users_forward_names_that_line():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3).double()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.fc(x))
    with pytest.warns(UserWarning) as record:
        tg.compile(Net())(leaf(4, 3))
    msg = one_warning(record, Net.forward, "self.drop(")
    assert "random numbers" in msg


def test_a_library_module_that_cannot_be_traced_names_the_callers_line():
    drop = nn.Dropout(0.5)            # random numbers are not traced yet (BatchNorm's updates are)
    x = leaf(4, 3)
    line = inspect.currentframe().f_lineno + 2
    with pytest.warns(UserWarning, match="Dropout cannot be traced") as record:
        tg.compile(drop)(x)
    ws = [w for w in record if "tracegrad.compile" in str(w.message)]
    assert ws[0].filename == HERE and ws[0].lineno == line


def test_a_compiled_function_called_inside_another_is_read_too():
    seen = []

    @tg.compile
    def inner(x):
        seen.append(x)
        return x.exp()

    @tg.compile
    def outer(x):
        return inner(x) * 2
    with pytest.warns(UserWarning, match="side effect") as record:
        y = outer(leaf(3))
    assert [w.lineno for w in record if "tracegrad.compile" in str(w.message)][:1] == \
        [line_of(inner.__wrapped__, "seen.append(x)")]
    assert len(seen) == 1 and type(seen[0]) is tg.Tensor
    close(y, leaf(3).exp() * 2)


TRITON_SCRIPT = r'''
import builtins, numpy as np, torch, tracegrad as tg
hits = []
class EvilInt(int):
    def __repr__(self):
        hits.append(1)
        return "__import__('builtins').__dict__.__setitem__('TG_REPR', 1) or 7"
    __str__ = __repr__
name = "evil\n    __import__('builtins').__dict__.__setitem__('TG_INJECTED', 1)  #\"'.py"
ns = {"tg": tg, "EvilInt": EvilInt}
exec(compile("def h(x):\n    return (tg.tanh(x * EvilInt(3)) + x).sum(1)\n", name, "exec"), ns)
f = tg.compile(ns["h"], backend="triton")
x = tg.tensor(np.random.default_rng(0).standard_normal((8, 16)), requires_grad=True)
y = f(x)
y.sum().backward()
src = f.last_program.fwd_fn.source
assert "@triton.jit" in src
code = "\n".join(line.split("#")[0] for line in src.splitlines())
assert "__setitem__" not in code and "TG_" not in code
assert not hasattr(builtins, "TG_INJECTED") and not hasattr(builtins, "TG_REPR") and hits == []
tx = torch.tensor(x.detach().numpy(), requires_grad=True)
yt = (torch.tanh(tx * 3) + tx).sum(1)
yt.sum().backward()
np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5)
np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
print("ok")
'''


def test_triton_source_takes_no_user_text_as_code():
    pytest.importorskip("triton")
    import os
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")


def test_seeding_and_global_settings_inside_run_at_every_call():
    """manual_seed, the generator's state and the float32 matmul precision are the process's
    state: set inside a compiled function they were set once, at the trace (and the seed not
    even then: the trace stands a refusing generator in). Such a function runs eagerly."""
    def seeded(x):
        tg.manual_seed(3)
        return x * 2

    def reads_state(x):
        return x * 2, tg.get_rng_state()

    def precision(x):
        tg.set_float32_matmul_precision("medium")
        return x @ x
    x = leaf(3)
    for fn in (seeded, reads_state, precision):
        cf = tg.compile(fn)
        with pytest.warns(UserWarning, match="random generator|matmul precision"):
            cf(x)
        tg.set_float32_matmul_precision("highest")
        tg.manual_seed(0)
        cf(x)
        after = (tg.rand(2).numpy().tolist(), tg.get_float32_matmul_precision())
        tg.set_float32_matmul_precision("highest")
        tg.manual_seed(0)
        fn(x)
        assert after == (tg.rand(2).numpy().tolist(), tg.get_float32_matmul_precision())
        tg.set_float32_matmul_precision("highest")



@pytest.mark.parametrize("setting", ["anomaly", "printoptions"])
def test_a_process_setting_changed_inside_is_changed_at_every_call(setting):
    def fn(x):
        if setting == "anomaly":
            tg.autograd.set_detect_anomaly(True)
        else:
            tg.set_printoptions(precision=2)
        return x * 2
    cf = tg.compile(fn)
    try:
        with pytest.warns(UserWarning, match="a setting of the process"):
            cf(leaf(2))
        tg.autograd.set_detect_anomaly(False)
        tg.set_printoptions(profile="default")
        cf(leaf(2))
        if setting == "anomaly":
            assert tg.is_anomaly_enabled()
        else:
            assert repr(tg.tensor([1.23456])) == "tensor([1.23])"
    finally:
        tg.autograd.set_detect_anomaly(False)
        tg.set_printoptions(profile="default")


class Holder:
    def __init__(self, t):
        self.t = t


def _gen(x):
    yield x * 2
    yield x * 3


@pytest.mark.parametrize("case", ["object", "closure", "generator"])
def test_an_object_holding_traced_values_is_never_returned(case):
    """A returned user object, closure or generator held the trace's symbolic values (printed as
    Proxy(...), failing when used) and would be the same object at every call: such a function
    runs eagerly, with the reason, and its result works as eager's."""
    fn = {"object": lambda x: [Holder(x * 3)], "closure": lambda x: (lambda: x * 2), "generator": _gen}[case]
    use = {"object": lambda r: [r[0].t], "closure": lambda r: [r()], "generator": list}[case]
    cf = tg.compile(fn)
    x = leaf(2)
    with pytest.warns(UserWarning, match="the function returns a"):
        got = use(cf(x))
    for a, b in zip(got, use(fn(x)), strict=True):
        close(a, b)
    assert all(type(a) is tg.Tensor for a in got)


def test_plain_values_and_containers_are_returned_by_the_program():
    import collections
    NT = collections.namedtuple("NT", "a b")
    cf = tg.compile(lambda x: NT(x * 2, {"k": (x + 1, [x - 1], 3.5, "s", None, x.shape, x.dtype, x.device)}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = cf(leaf(2))
    assert type(r) is NT and r.b["k"][2:] == (3.5, "s", None, tg.Size([2]), tg.float64, tg.device("cpu"))
    close(r.b["k"][1][0], leaf(2) - 1)


def test_enable_grad_inside_a_function_called_under_no_grad_gives_a_graph():
    """Called under no_grad, a function that turns grad on inside returns a tensor with a
    grad_fn (eager, torch): the program built under no_grad had none; it runs eagerly."""
    def fn(lib, x):
        with lib.enable_grad():
            return (x * x).sum()
    a = np.array([0.5, 1.0, 3.0])
    tx = torch.tensor(a, requires_grad=True)
    with torch.no_grad():
        want = fn(torch, tx)
    want.backward()
    cf = tg.compile(lambda x: fn(tg, x))
    gx = tg.tensor(a, requires_grad=True)
    with tg.no_grad(), pytest.warns(UserWarning, match="enable_grad"):
        got = cf(gx)
    assert got.requires_grad and got.grad_fn is not None
    got.backward()
    close(gx.grad, tx.grad)


STATS = {}


def _store(d, k, v):
    d[k] = v


def test_a_helper_writing_into_a_dict_it_is_given_is_a_side_effect():
    """_store(STATS, "m", x.mean()) stored the trace's symbolic value into the caller's dict
    (and guard building then failed on it): the reader now follows a helper with the objects
    the call passes, so the write into a dict the call does not own is found at its line. A
    dict the function made itself, or a tensor, passed to the same helper still traces."""
    def fn(x):
        _store(STATS, "m", x.mean())
        return x * 2

    def own(x):
        d = {}
        _store(d, "k", x * 2)
        return d["k"] + 1
    cf = tg.compile(fn)
    with pytest.warns(UserWarning) as record:
        for k in range(3):
            cf(leaf(3, seed=k))
            assert type(STATS["m"]) is tg.Tensor
            close(STATS["m"], leaf(3, seed=k).mean())
    one_warning(record, _store, "d[k] = v")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close(tg.compile(own)(leaf(3)), leaf(3) * 2 + 1)


def _scaled_function(lib, log=None):
    class Scaled(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k                       # the usual way to keep a number for backward
            ctx.save_for_backward(x)
            if log is not None:
                log.append(k)               # a real side effect: an outside list
            return x * k * FACTOR[0]

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.k * FACTOR[0] * x.cos(), None
    return Scaled


FACTOR = [2.0]


def test_a_custom_function_that_sets_attributes_on_ctx_is_traced_whole():
    """`ctx.k = k` was taken for a side effect on an object the call does not own, so every
    compiled function using such a custom Function ran eagerly, with a warning."""
    S, TS = _scaled_function(tg), _scaled_function(torch)
    f = tg.compile(lambda x: S.apply(x, 3.0).sum())
    try:
        for k in range(3):
            FACTOR[0] = 2.0 + k
            x = tg.tensor([0.5, -1.0, 2.0], dtype=tg.float64, requires_grad=True)
            tx = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                y = f(x)
            y.backward()
            ty = TS.apply(tx, 3.0).sum()
            ty.backward()
            assert y.item() == ty.item()
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15)
    finally:
        FACTOR[0] = 2.0


def test_a_custom_functions_side_effect_on_an_outside_list_still_runs_eagerly():
    log = []
    S = _scaled_function(tg, log)
    f = tg.compile(lambda x: S.apply(x, 3.0).sum())
    with pytest.warns(UserWarning, match="side effect"):
        f(tg.ones(2))
    f(tg.ones(2))
    assert log == [3.0, 3.0]

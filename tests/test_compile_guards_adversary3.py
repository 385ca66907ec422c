"""State a compiled function reads, changed between its calls (or between a call's forward and
its backward), and Python effects that must run as often as eagerly: each case recompiles, runs
eagerly or raises rather than return the first trace's numbers. Compared at every step with the
eager function, with torch's eager one and, where the same code runs, with torch.compile's."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


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

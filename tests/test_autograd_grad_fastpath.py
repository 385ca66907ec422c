"""The shorter paths of grad() and of compiled calls give what the general ones give.

Each shortcut is checked against the formulation it replaced (run side by side, bit for
bit) and, where torch has the same call, against torch: the backward's arguments picked by
a generated function, run_program's path for a program with no extra steps, the create_graph
backward of a compiled call with every seed present, the memoised memory order of an array,
the walk that finishes a leaf where it finds it, the retain_grad() scan skipped until
retain_grad() was ever called, and grad()'s argument checks."""
import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.autograd import engine
from tracegrad.ir import layout

C = sys.modules["tracegrad.compile"]          # (tracegrad.compile is the function)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def same(a, b):
    """Bit for bit: the same dtype, shape and bytes (NaNs included)."""
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes(), (a, b)


def close(a, b, tol=1e-12):
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# -- the compiled backward's arguments --------------------------------------------------------

def test_backward_arguments_are_picked_as_the_binds_name_them_and_constants_read_when_it_runs():
    """The generated picker returns, object for object, what the loop over the binds returned
    (seeds, the call's input arrays, the saved values, a constant's array as it is when the
    backward runs): for a compiled program's own binds, and for binds with constants among them."""
    W = tg.tensor(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]))
    f = tg.compile(lambda x, b: (tg.tanh(x @ W) * b).exp().sum())
    x = tg.tensor(np.random.default_rng(1).standard_normal((4, 2)), requires_grad=True)
    b = tg.tensor(np.array([1.0, -2.0, 0.5]), requires_grad=True)
    f(x, b).backward()
    seeds = [np.array(1.0), np.array(2.0)]
    arrays = [x._data, b._data, W._data]
    residuals = [np.full(3, float(k)) for k in range(10)]
    c1, c2 = tg.tensor([1.0, 2.0]), tg.tensor(3.0)
    mixed = [("const", c1), ("res", 3), ("seed", 1), ("in", 2), ("const", c2), ("res", 0), ("seed", 0), ("in", 0)]
    for binds in (list(f.last_program.bwd_binds), mixed):
        def reference():                  # the loop this replaced
            src = {"seed": seeds, "in": arrays, "res": residuals}
            return [src[kind][i] if kind in src else i._data for kind, i in binds]
        pick = C._bind_picker(binds)
        got, want = pick(seeds, arrays, residuals), reference()
        assert len(got) == len(want) == len(binds) and all(g is w for g, w in zip(got, want))
        c1.data = tg.tensor([5.0, 6.0])   # a constant's array is read when the backward runs
        got, want = pick(seeds, arrays, residuals), reference()
        assert all(g is w for g, w in zip(got, want))
    same(C._bind_picker(mixed)(seeds, arrays, residuals)[0], np.array([5.0, 6.0], np.float32))


def test_a_constant_replaced_through_data_before_the_backward_is_read_as_torch_reads_it():
    out = {}
    for lib in (tg, torch):
        W = lib.tensor(np.array([3.0, 4.0, -1.0]))
        x = lib.tensor(np.array([1.0, 2.0, 0.5]), requires_grad=True)
        fn = (lambda x: (x * W).sum())
        f = tg.compile(fn) if lib is tg else fn
        res = []
        for k in range(3):               # the first call builds, the later ones run cached programs
            W.data = lib.tensor(np.array([3.0, 4.0, -1.0]) * (k + 1))
            y = f(x)
            W.data = lib.tensor(np.array([10.0, 20.0, 30.0]) * (k + 1))
            res.append(lib.autograd.grad(y, x)[0])
        out[lib] = res
    for a, b in zip(out[tg], out[torch]):
        close(a, b)


# -- run_program's plain path -----------------------------------------------------------------

def _programs_cases():
    W = tg.tensor(np.array([[1.0, 2.0], [3.0, -4.0]]))
    return [
        ("one output", lambda x: (x.sin() * 3).sum(), (3, 2)),
        ("a tuple", lambda x: (x.tanh(), (x * x).sum()), (3, 2)),
        ("a dict", lambda x: {"a": x.exp(), "b": x.cos().mean()}, (3, 2)),
        ("a transposed result", lambda x: x.t() * 2.0, (3, 2)),
        ("a constant", lambda x: (x @ W).relu().sum(), (3, 2)),
        ("a matrix product", lambda x: x @ x.t(), (3, 2)),
    ]


@pytest.mark.parametrize("name,fn,shape", _programs_cases(), ids=[c[0] for c in _programs_cases()])
def test_the_plain_path_gives_the_general_paths_results_bit_for_bit(name, fn, shape):
    """The same compiled function run with run_program's plain path and with its general path
    (forced): outputs, their layouts and requires_grad, and gradients (taken as the loop takes
    them, so that a scalar loss's speculative path is reached too) are identical."""
    runs = {}
    for plain in (True, False):
        f = tg.compile(fn)
        x = tg.tensor(np.random.default_rng(2).standard_normal(shape), requires_grad=True)
        got = []
        for k in range(6):
            if f.last_program is not None:
                f.last_program.plain = plain if C._plain(f.last_program) else False
            out = f(x)
            flat = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, tuple) else [out]
            loss = sum(o.sum() for o in flat)
            (g,) = tg.autograd.grad(loss, x)
            got.append(([(o.detach().numpy().copy(), o.requires_grad, o.is_contiguous(), type(o.grad_fn).__name__)
                         for o in flat], g.numpy().copy()))
        runs[plain] = got
    for (outs_a, g_a), (outs_b, g_b) in zip(runs[True], runs[False]):
        for (a, ra, ca, na), (b, rb, cb, nb) in zip(outs_a, outs_b):
            same(a, b)
            assert (ra, ca, na) == (rb, cb, nb)
        same(g_a, g_b)


def test_a_program_with_extra_steps_is_not_plain():
    buf = tg.zeros(3)

    def write(x):
        buf.add_(x)                      # a write back: run_program's general path
        return x * 2
    f = tg.compile(write)
    x = tg.tensor([1.0, 2.0, 3.0])
    f(x)
    f(x)
    assert C._plain(f.last_program) is False
    same(buf, np.array([2.0, 4.0, 6.0], np.float32))
    g = tg.compile(lambda x: x * 2)
    g(x)
    assert C._plain(g.last_program) is True


# -- create_graph through a compiled call ----------------------------------------------------

def test_create_graph_through_a_compiled_call_with_every_seed_and_with_some_missing():
    """Both outputs seeded (the short path) and one alone (zeros or the masked backward), to
    the third derivative, against torch in float64."""
    a = np.array([0.3, -1.2, 0.7, 2.0])

    def f(lib, x):
        return (x.sin() * x).sum(), (x.exp() * 2).sum()
    cf = tg.compile(lambda x: f(tg, x))
    for _ in range(3):
        x, xt = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        (y1, y2), (t1, t2) = cf(x), f(torch, xt)
        for ours, theirs in (((y1, y2), (t1, t2)), ((y1,), (t1,)), ((y2,), (t2,))):
            (g,) = tg.autograd.grad(ours, x, create_graph=True, retain_graph=True)
            (gt,) = torch.autograd.grad(theirs, xt, create_graph=True, retain_graph=True)
            close(g, gt)
            (h,) = tg.autograd.grad(g.sum(), x, create_graph=True)
            (ht,) = torch.autograd.grad(gt.sum(), xt, create_graph=True)
            close(h, ht)
            # (retained: the next pair differentiates the same outputs again; torch frees the forward's
            # saved values with the graph of its derivatives)
            (k,) = tg.autograd.grad((h * h).sum(), x, retain_graph=True)
            (kt,) = torch.autograd.grad((ht * ht).sum(), xt, retain_graph=True)
            close(k, kt)


def test_w8s_third_derivative_is_what_it_was_bit_for_bit_when_taken_again():
    """The torch way's result is a function of the programs alone: the same arrays every call,
    and equal to the eager (uncompiled) third derivative in float64."""
    a = np.random.default_rng(3).standard_normal(50)
    cl = tg.compile(lambda x: (tg.tanh(x) ** 2).sum())

    def third(f, x):
        (g1,) = tg.autograd.grad(f(x), x, create_graph=True)
        (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
        return tg.autograd.grad(g2.sum(), x)[0]
    x = tg.tensor(a, requires_grad=True)
    first = third(cl, x)
    for _ in range(3):
        same(third(cl, x), first)
    close(first, third(lambda x: (tg.tanh(x) ** 2).sum(), x))
    xt = torch.tensor(a, requires_grad=True)
    (t1,) = torch.autograd.grad((torch.tanh(xt) ** 2).sum(), xt, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), xt, create_graph=True)
    close(first, torch.autograd.grad(t2.sum(), xt)[0])


# -- the memoised memory order --------------------------------------------------------------

def _reference_order(d):
    item = d.itemsize
    if any(s % item for s in d.strides):
        return None
    return layout.array_order(tuple(d.shape), tuple(s // item for s in d.strides))


def test_tensor_order_answers_as_computed_afresh_for_arrays_alike_in_bytes():
    """The memo's key holds all the answer depends on: two arrays with the same shape and byte
    strides but another itemsize (a dense float64 matrix, every other float32) differ."""
    f32 = np.zeros((2, 6), np.float32)[:, ::2]          # strides (24, 8) in bytes, itemsize 4: not dense
    f64 = np.zeros((2, 3), np.float64)                  # strides (24, 8), itemsize 8: C order
    assert f32.shape == f64.shape and f32.strides == f64.strides
    arrays = [f32, f64, np.zeros((3, 4)).T, np.broadcast_to(np.ones(1, np.float32), (5,)),
              np.zeros((0, 3)), np.zeros((2, 1, 3), np.float16).transpose(2, 1, 0), np.zeros(()),
              np.zeros((4, 4), np.int64)[::2, ::2]]
    for _ in range(2):                                  # computed, then remembered
        for d in arrays:
            assert layout.tensor_order(d) == _reference_order(d), (d.shape, d.strides, d.dtype)
            assert layout.tensor_order(tg.Tensor._make(d, tg.float32)) == _reference_order(d)
    assert layout.tensor_order(f32) is None and layout.tensor_order(f64) == (0, 1)


def test_a_transposed_and_a_contiguous_argument_of_one_shape_get_their_own_programs():
    f = tg.compile(lambda a, b: (a @ b).sum())
    rng = np.random.default_rng(4)
    for transposed in (False, True, False, True):
        m, b_np = rng.standard_normal((3, 3)), rng.standard_normal((3, 2))
        if transposed:                   # a leaf laid out column by column
            a = tg.tensor(m.T.copy()).t().detach().requires_grad_()
            at = torch.tensor(m.T.copy()).t().detach().requires_grad_()
            assert not a.is_contiguous() and not at.is_contiguous()
        else:
            a, at = tg.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
        b, bt = tg.tensor(b_np, requires_grad=True), torch.tensor(b_np, requires_grad=True)
        for g, t in zip(tg.autograd.grad(f(a, b), (a, b)), torch.autograd.grad((at @ bt).sum(), (at, bt))):
            close(g, t)


# -- the engine's walk ---------------------------------------------------------------------

def _reference_walk(roots):
    """walk_keyed's order before leaves were finished where they are found: every node pushed
    and popped (post-order), then sorted by creation."""
    order, seen = [], set()
    for r in roots:
        if r is None or id(r) in seen:
            continue
        seen.add(id(r))
        stack = [(r, iter(r.next_functions))]
        while stack:
            node, it = stack[-1]
            for nxt, _ in it:
                if nxt is not None and id(nxt) not in seen:
                    seen.add(id(nxt))
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
            else:
                stack.pop()
                order.append(node)
    return sorted(order, key=lambda n: n._seq)


@pytest.mark.parametrize("seed", range(6))
def test_the_walk_orders_random_graphs_as_before(seed):
    """Random graphs of several leaves, shared values and constants: the same order as the
    walk before, and torch's gradients (which sum in that order)."""
    rng = np.random.default_rng(seed)
    n_leaves = int(rng.integers(2, 6))
    starts = [rng.standard_normal(3) for _ in range(n_leaves + 1)]
    plan = [(int(rng.integers(0, 3)), *(int(k) for k in rng.integers(0, n_leaves + 1 + j, 2))) for j in range(12)]
    grads = {}
    for lib in (tg, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in starts[:-1]]
        vals = list(leaves) + [lib.tensor(starts[-1])]
        for op, i, j in plan:
            a, b = vals[i], vals[j]
            vals.append(a * b if op == 0 else a + b.sin() if op == 1 else (a - b).tanh())
        if lib is tg:
            roots = [v.grad_fn for v in vals[-3:]] + [None]
            order, index, _, _ = engine.walk_keyed(roots)
            want = _reference_walk(roots)
            assert [id(n) for n in order] == [id(n) for n in want]
            assert all(index[id(n)] == k for k, n in enumerate(order))
        outs = [v.sum() for v in vals[-3:] if v.requires_grad]
        if not outs:
            return
        grads[lib] = lib.autograd.grad(sum(outs), leaves, allow_unused=True, materialize_grads=True)
    for a, b in zip(grads[tg], grads[torch]):
        close(a, b)


def test_post_accumulate_hooks_of_several_leaves_run_in_torchs_order():
    calls = {}
    for lib in (tg, torch):
        seen = calls[lib] = []
        xs = [lib.tensor([float(k + 1)], requires_grad=True) for k in range(4)]
        for k, x in enumerate(xs):
            x.register_post_accumulate_grad_hook(lambda t, k=k: seen.append(k))
        y = (xs[2] * xs[0]) + (xs[3] * xs[1]).sin() + xs[1] * xs[2]
        y.sum().backward()
    assert calls[tg] == calls[torch]


# -- retain_grad() --------------------------------------------------------------------------

def test_retain_grad_called_first_after_backwards_ran_is_still_honoured():
    """In a fresh process (nothing has called retain_grad() yet, so the engine skips its scan),
    the first retain_grad() turns the scan on: y.grad is set by grad() and backward(), as torch's."""
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        import tracegrad as tg, torch
        out = []
        for lib in (tg, torch):
            x = lib.tensor([1.0, 2.0], requires_grad=True)
            lib.autograd.grad(((x * 2) * 3).sum(), x)          # before any retain_grad()
            y = x * 2
            y.retain_grad()
            g, = lib.autograd.grad((y * 3).sum(), x)
            a = y.grad.tolist()
            z = x * 4
            z.retain_grad()
            (z * z).sum().backward()
            out.append((g.tolist(), a, z.grad.tolist(), x.grad.tolist()))
        print(out[0] == out[1], out)
    """) % ROOT
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("True"), res.stdout


# -- grad()'s arguments ---------------------------------------------------------------------

def _both(call):
    """call(lib) in tracegrad and in torch: the same results, or the same error type and message."""
    res = {}
    for lib in (tg, torch):
        try:
            res[lib] = ("ok", call(lib))
        except Exception as e:          # noqa: BLE001 (compared below)
            res[lib] = ("err", type(e).__name__, str(e))
    a, b = res[tg], res[torch]
    assert a[0] == b[0], (a, b)
    if a[0] == "err":
        # (the type and the message's start: torch's batched-shape message shows grad[0].shape[1:])
        assert a[1] == b[1] and a[2][:60] == b[2][:60], (a, b)
    else:
        ga, gb = a[1], b[1]
        if isinstance(gb, dict):
            assert list(ga) == list(gb)
            ga, gb = list(ga.values()), list(gb.values())
        assert len(ga) == len(gb)
        for x, y in zip(ga, gb):
            assert (x is None) == (y is None)
            if x is not None:
                close(x, y)


def _xy(lib):
    x = lib.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    w = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
    return x, w


CALLS = {
    "a tensor": lambda lib, x, w: lib.autograd.grad((x * x).sum(), x),
    "a list": lambda lib, x, w: lib.autograd.grad((x * x).sum() + w.prod(), [x, w]),
    "a tuple": lambda lib, x, w: lib.autograd.grad((x.exp()).sum() * w.sum(), (w, x)),
    "a dict": lambda lib, x, w: lib.autograd.grad((x * x).sum() + w.sum(), {"w": w, "x": x}),
    "an OrderedDict": lambda lib, x, w: lib.autograd.grad((x * x).sum(), collections.OrderedDict(x=x)),
    # torch's error types and messages, and which of two errors comes first
    "a number among the inputs": lambda lib, x, w: lib.autograd.grad((x * x).sum(), [x, 1.0]),
    "None among the inputs": lambda lib, x, w: lib.autograd.grad((x * x).sum(), [x, None]),
    "a string as the inputs": lambda lib, x, w: lib.autograd.grad((x * x).sum(), "ab"),
    "a number as an output": lambda lib, x, w: lib.autograd.grad([(x * x).sum(), 2.0], x),
    "None as an output": lambda lib, x, w: lib.autograd.grad([(x * x).sum(), None], x),
    "a number as an output, and as an input": lambda lib, x, w: lib.autograd.grad([(x * x).sum(), 1.0], [x, 2.0],
                                                                                 grad_outputs=[None, None]),
    "a non-scalar output, and an input without grad": lambda lib, x, w: lib.autograd.grad(x * x, x.detach()),
    "a non-scalar output, and a number input": lambda lib, x, w: lib.autograd.grad(x * x, [x, 1.0]),
    "a grad_output's shape, and an input without grad": lambda lib, x, w: lib.autograd.grad(
        (x * x).sum(), [x.detach()], grad_outputs=lib.ones(3)),
    "an output without grad, and a number input": lambda lib, x, w: lib.autograd.grad(x.detach().sum(), [x, 1.0]),
    "an input without grad before a number input": lambda lib, x, w: lib.autograd.grad((x * x).sum(),
                                                                                      [x.detach(), 1.0]),
    "batched: a grad_output's shape, and an input without grad": lambda lib, x, w: lib.autograd.grad(
        x * x, [x.detach()], grad_outputs=lib.ones(2, 2), is_grads_batched=True),
    "a non-scalar output, and an output without grad": lambda lib, x, w: lib.autograd.grad(
        [x * x, x.detach().sum()], x),
    "an output without grad, non-scalar, and no grad_output": lambda lib, x, w: lib.autograd.grad(
        [x.sum(), x.detach() * 2], x),
    "an output without grad, and a grad_output's shape": lambda lib, x, w: lib.autograd.grad(
        [x.detach()], x, grad_outputs=[lib.ones(2)]),
    "batched: a number input": lambda lib, x, w: lib.autograd.grad(
        x * x, [x, 1.0], grad_outputs=lib.ones(2, 3), is_grads_batched=True),
    "an output without grad": lambda lib, x, w: lib.autograd.grad(x.detach().sum(), x),
    "an input without grad": lambda lib, x, w: lib.autograd.grad((x * x).sum(), [x, x.detach()]),
    "a non-scalar output": lambda lib, x, w: lib.autograd.grad(x * x, x),
    "an integer output": lambda lib, x, w: lib.autograd.grad((x > 0).sum(), x),
    "an unused input": lambda lib, x, w: lib.autograd.grad((x * x).sum(), [x, w]),
    "an unused input allowed": lambda lib, x, w: lib.autograd.grad((x * x).sum(), [x, w], allow_unused=True),
    "an unused input materialized": lambda lib, x, w: lib.autograd.grad((x * x).sum(), [w, x],
                                                                       materialize_grads=True),
    "grad_outputs given": lambda lib, x, w: lib.autograd.grad(x * x, x, grad_outputs=lib.ones(3) * 2),
    "grad_outputs a list with None": lambda lib, x, w: lib.autograd.grad([(x * x).sum(), w * 3], [x, w],
                                                                        grad_outputs=[None, lib.ones(2)]),
    "a view as output and input": lambda lib, x, w: lib.autograd.grad(x[1:].sum() * 2, x),
    "a parameter": lambda lib, x, w: (lambda p: lib.autograd.grad((p * x).sum(), [p, x]))(
        lib.nn.Parameter(x.detach() * 2)),
    "create_graph, twice": lambda lib, x, w: lib.autograd.grad(
        lib.autograd.grad((x ** 3).sum(), x, create_graph=True)[0].sum(), x),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_grads_arguments_as_torchs(name):
    _both(lambda lib: CALLS[name](lib, *_xy(lib)))


def test_grad_inside_a_compiled_function_still_traces():
    """An output that is a traced value takes the traced grad (a Proxy among the outputs)."""
    def f(lib, x):
        (g,) = lib.autograd.grad((x ** 3).sum(), x, create_graph=True)
        return (g * x).sum()
    cf = tg.compile(lambda x: f(tg, x), fullgraph=True)
    a = np.array([0.5, -1.0, 2.0])
    for _ in range(2):
        x, xt = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        close(cf(x), f(torch, xt))
        assert cf.last_program is not None

"""Where tracegrad differed from torch, noticed in recent work and left; each case against torch."""
import pytest
import torch

import tracegrad as tg


def outcome(fn):
    """('ok', values) or (error type, message)."""
    try:
        r = fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return (RuntimeError if isinstance(e, RuntimeError) else type(e)), str(e)
    return "ok", r.tolist() if hasattr(r, "tolist") else r


# -- a custom Function on a view made under no_grad of a tensor that requires grad ---------------------

def _scale_fn(m, calls):
    class Scale(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            calls.append(ctx.needs_input_grad)
            return g * 3, g * 4
    return Scale


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("w_grad", [False, True])
def test_function_on_no_grad_view_requires_grad(compiled, w_grad):
    """Scale.apply(v, w) with v = x[:2] made under no_grad of an x that requires grad gave an output
    with requires_grad=False (apply asked the input's own flag, not the view's): torch's requires
    grad, its ctx.needs_input_grad says True for v, and its backward gives w its gradient (v's
    edge leads nowhere: x.grad stays None)."""
    got = []
    for m in (tg, torch):
        calls = []
        Scale = _scale_fn(m, calls)
        x = m.ones(3, dtype=m.float64, requires_grad=True)
        w = m.full((2,), 2.0, dtype=m.float64, requires_grad=w_grad)
        with m.no_grad():
            v = x[:2]
        fn = (lambda a, b: Scale.apply(a, b))
        if compiled and m is tg:
            fn = tg.compile(fn)
        y = fn(v, w)
        row = [y.requires_grad, y.tolist()]
        if w_grad:
            y.sum().backward()
            row += [calls, x.grad, w.grad.tolist()]
        got.append(row)
    assert got[0][0] is True
    assert got[0] == got[1]


def test_no_grad_view_after_base_written_raises_torchs_error():
    """A view made under no_grad whose base is then written in place with grad mode on: a custom
    Function applied to it raises torch's error, as any op does."""
    got = []
    for m in (tg, torch):
        Scale = _scale_fn(m, [])
        x = m.ones(3, dtype=m.float64, requires_grad=True)
        b = x * 1
        with m.no_grad():
            v = b[:2]
        b.mul_(2)
        got.append(outcome(lambda: Scale.apply(v, m.ones(2, dtype=m.float64))))
    assert got[0][0] is RuntimeError and "no_grad mode" in got[0][1]
    assert got[0] == got[1]


# -- a tensor hook on an output of a multi-output op that no gradient reached -----------------------

_SPLITS = {
    "unbind": lambda x: x.unbind(1),
    "split": lambda x: x.split(1, 1),
    "chunk": lambda x: x.chunk(3, 1),
    "max": lambda x: x.max(1),
}


def _hooked_run(m, split, used, hooked, create_graph=False, how="backward"):
    x = (m.arange(6, dtype=m.float64).reshape(2, 3) * 0.5).requires_grad_()
    outs = split(x)
    log = []
    for k in hooked:
        outs[k].register_hook(lambda g, k=k: log.append((k, None if g is None else g.tolist())))
    loss = (outs[used] * outs[used]).sum()
    if how == "grad":
        g, = m.autograd.grad(loss, x, create_graph=create_graph)
    else:
        loss.backward(create_graph=create_graph, inputs=[x] if how == "inputs" else None)
        g = x.grad
    return log, g.tolist()


@pytest.mark.parametrize("how", ["backward", "grad", "inputs"])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name,used,hooked", [
    ("unbind", 0, (1,)), ("unbind", 0, (2, 0, 1)), ("unbind", 1, (0, 2)),
    ("split", 2, (0, 1)), ("chunk", 0, (1,)), ("chunk", 1, (2, 1, 0)), ("max", 0, (0,)),
])
def test_hook_on_unused_output_sees_none(name, used, hooked, create_graph, how):
    """x.unbind(1) with only outs[0] used: torch calls the tensor hooks of the other outputs with
    None as the node runs (in the order each output got its first hook); tracegrad skipped them."""
    got = [_hooked_run(m, _SPLITS[name], used, hooked, create_graph, how) for m in (tg, torch)]
    assert any(g is None for _, g in got[1][0]) or len(hooked) == 1
    assert got[0] == got[1]


def test_hook_on_unused_output_may_not_return_a_gradient():
    """A hook given None that returns a tensor: torch's error."""
    got = []
    for m in (tg, torch):
        x = m.ones(2, 3, dtype=m.float64, requires_grad=True)
        a, b = x.unbind(0)
        b.register_hook(lambda g, m=m: m.ones(3, dtype=m.float64))
        got.append(outcome(lambda: a.sum().backward()))
    assert got[0][0] is RuntimeError
    assert got[0] == got[1]


def test_hook_on_unused_output_not_called_where_the_op_does_not_run():
    """No gradient reaches the op at all: no hook of its outputs runs, in torch as here."""
    got = []
    for m in (tg, torch):
        x = m.ones(2, 3, dtype=m.float64, requires_grad=True)
        a, b = x.unbind(0)
        log = []
        b.register_hook(lambda g: log.append(g))
        (x * 2).sum().backward()
        got.append(log)
    assert got[0] == got[1] == []




# -- anomaly mode: a NaN found part way sets the .grad torch's engine has set by then ----------------

_NAN_GRAPHS = {
    "sqrt_first": lambda x, w, u: ((x.sqrt() * 0) + w * x).sum(),
    "sqrt_mid": lambda x, w, u: (x * u).sqrt().sum() * 0 + (w * w).sum() + u.exp().sum(),
    "late_leaf": lambda x, w, u: (w.exp() * (x.sqrt() * 0 + 1)).sum() + (u * 3).sum(),
    "div00": lambda x, w, u: (x / x).sum() + (w * u).sum(),
    "log0": lambda x, w, u: (x * 0).log().sum() * 0 + (w * u).sum(),
}


def _nan_run(m, graph, create_graph, retained):
    x = m.tensor([0., 1.], dtype=m.float64, requires_grad=True)
    w = m.tensor([2., 3.], dtype=m.float64, requires_grad=True)
    u = m.tensor([.5, 1.5], dtype=m.float64, requires_grad=True)
    with m.autograd.detect_anomaly(check_nan=True):
        if retained:
            h = w * u
            h.retain_grad()
            loss = (h * 2).sum() + (x.sqrt() * 0 * h).sum() if graph == "h_first" else \
                (x.sqrt() * 0 * h).sum() + (h * 2).sum() + (u * 3).sum()
        else:
            h = None
            loss = _NAN_GRAPHS[graph](x, w, u)
        with pytest.warns(UserWarning):          # (anomaly mode's warning: where the forward ran)
            err = outcome(lambda: loss.backward(create_graph=create_graph))
    grads = [None if t.grad is None else t.grad.tolist() for t in (x, w, u)]
    return err, grads, (None if h is None or h.grad is None else h.grad.tolist())


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("graph,retained", [(g, False) for g in _NAN_GRAPHS] + [("h_first", True), ("h_last", True)])
def test_anomaly_nan_sets_the_grads_torch_has_set(graph, retained, create_graph):
    """detect_anomaly(check_nan=True) and a derivative that gives NaN (sqrt at 0): torch raises
    there, having run the nodes before (the leaves they complete have their .grad); tracegrad
    raised with no .grad set (its run node by node noted what ran only for an error a node
    raised itself)."""
    got = [_nan_run(m, graph, create_graph, retained) for m in (tg, torch)]
    assert got[0][0][0] is RuntimeError and "nan values" in got[0][0][1]
    assert got[0] == got[1]


# -- a 1-D matmul operand's saved value after `.data = ...` or `.data.mul_()` -------------------------

_MATMULS = {
    "vm": (lambda m, x, W, y: x @ W, "x"),
    "vm_matmul": (lambda m, x, W, y: m.matmul(x, W), "x"),
    "mv": (lambda m, x, W, y: W.t() @ x, "x"),
    "mv_W": (lambda m, x, W, y: W.t() @ x, "W"),
    "vm_W": (lambda m, x, W, y: x @ W, "W"),
    "dot": (lambda m, x, W, y: x.dot(y), "x"),
    "dot_y": (lambda m, x, W, y: x.dot(y), "y"),
    "vv": (lambda m, x, W, y: x @ y, "x"),
    "inner": (lambda m, x, W, y: m.inner(x, y), "x"),
    "inner_y": (lambda m, x, W, y: m.inner(x, y), "y"),
}


def _matmul_after_data(m, kind, how, leaf, create_graph):
    x0 = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)
    x = x0 if leaf else x0 * 1.5
    W = m.tensor([[1., 2.], [3., 4.], [5., 6.]], dtype=m.float64, requires_grad=True)
    y = m.tensor([4., -5., 6.], dtype=m.float64, requires_grad=True)
    fn, which = _MATMULS[kind]
    out = fn(m, x, W, y)
    t = {"x": x, "W": W, "y": y}[which]
    if how == "data":
        t.data = t.data * 10 + 1
    else:
        t.data.mul_(10)
    loss = (out * out).sum()
    if not create_graph:
        loss.backward()
        return [None if v.grad is None else v.grad.tolist() for v in (x0, W, y)]
    g = m.autograd.grad(loss, (x0, W, y), create_graph=True, allow_unused=True)
    again = m.autograd.grad(sum(v.sum() for v in g if v is not None), (x0, W, y), allow_unused=True)
    return [[None if v is None else v.tolist() for v in r] for r in (g, again)]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("leaf", [True, False])
@pytest.mark.parametrize("how", ["data", "mul_"])
@pytest.mark.parametrize("kind", list(_MATMULS))
def test_one_dim_matmul_saves_what_torch_saves(kind, how, leaf, create_graph):
    """x @ W with a 1-D x, then x.data = other before the backward: torch's matmul is
    x.unsqueeze(0).mm(W).squeeze_(0), whose mm saves the unsqueezed view, which keeps x's old
    memory, so W.grad uses x's old values (a write through x.data shows); tracegrad read x's new
    values. Its matrix-vector, dot and inner save the operands themselves, as tracegrad does."""
    got = [_matmul_after_data(m, kind, how, leaf, create_graph) for m in (tg, torch)]
    assert got[0] == got[1]


# -- empty tensors under use_deterministic_algorithms(True) -------------------------------------------

_EMPTIES = {
    "empty": lambda m, dt: m.empty(2, 3, dtype=dt),
    "empty_like": lambda m, dt: m.empty_like(m.ones(2, 3, dtype=dt)),
    "empty_like_t": lambda m, dt: m.empty_like(m.ones(3, 2, dtype=dt).t()),
    "new_empty": lambda m, dt: m.ones(1, dtype=dt).new_empty((2, 3)),
    "empty_strided": lambda m, dt: m.empty_strided((2, 3), (1, 2), dtype=dt),
    "empty_cl": lambda m, dt: m.empty(1, 2, 2, 2, dtype=dt, memory_format=m.channels_last),
}
_EMPTY_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def _empty_values(m, name, dtype, fill):
    prev = m.utils.deterministic.fill_uninitialized_memory
    m.use_deterministic_algorithms(True)
    try:
        m.utils.deterministic.fill_uninitialized_memory = fill
        t = _EMPTIES[name](m, getattr(m, dtype))
        # (a transposed bfloat16 tensor's strides are not torch's, an older gap: its values alone)
        return str(t.tolist()), (None if dtype == "bfloat16" else t.stride())
    finally:
        m.utils.deterministic.fill_uninitialized_memory = prev
        m.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", _EMPTY_DTYPES)
@pytest.mark.parametrize("name", list(_EMPTIES))
def test_empty_under_deterministic_algorithms_is_filled(name, dtype):
    """With use_deterministic_algorithms(True) (and fill_uninitialized_memory, on by default) torch
    fills empty, empty_like, new_empty and empty_strided with NaN (a float dtype) or the dtype's
    largest value (an integer one, True for bool); tracegrad gave zeros (and had no empty_strided)."""
    got = [_empty_values(m, name, dtype, True) for m in (tg, torch)]
    assert got[0] == got[1]
    zeros = torch.zeros(2, 3, dtype=getattr(torch, dtype))
    assert got[0][0] != str(zeros.tolist()) and got[0][0] != str(zeros.view(1, 2, 3, 1).tolist())   # (filled)


def test_empty_fill_setting_as_torchs():
    """fill_uninitialized_memory: on by default, refuses a non-bool as torch does; without the
    deterministic mode, or with the fill off, an empty tensor is no NaN here (torch's memory as it was)."""
    assert tg.utils.deterministic.fill_uninitialized_memory is torch.utils.deterministic.fill_uninitialized_memory
    for bad in (1, None, "a"):
        got = []
        for m in (tg, torch):
            def setit(m=m):
                m.utils.deterministic.fill_uninitialized_memory = bad
            got.append(outcome(setit))
        assert got[0][0] is RuntimeError and got[0] == got[1]
    assert tg.utils.deterministic.fill_uninitialized_memory is True
    assert _empty_values(tg, "empty", "float32", False)[0] == str([[0.0] * 3] * 2)
    assert tg.empty(2).tolist() == [0.0, 0.0]


def test_empty_in_compiled_function_follows_the_setting():
    """A compiled function that makes an empty tensor: filled while the mode is on, and traced again
    when the mode changes (its program is guarded on the setting)."""
    @tg.compile
    def f(x):
        return x + tg.empty(2, dtype=x.dtype)

    x = tg.ones(2)
    assert f(x).tolist() == [1.0, 1.0]
    tg.use_deterministic_algorithms(True)
    try:
        got = f(x).tolist()
        ref = (torch.ones(2) + torch.empty(2)).tolist() if torch.use_deterministic_algorithms(True) is None else None
    finally:
        tg.use_deterministic_algorithms(False)
        torch.use_deterministic_algorithms(False)
    assert str(got) == str(ref) == "[nan, nan]"
    assert f(x).tolist() == [1.0, 1.0]


# -- backward(inputs=[an output of a multi-output op]): the op's hooks --------------------------------

def _idle_run(m, case, create_graph):
    x = m.tensor([[1., 3., 2.], [4., 0., 5.], [1., 1., 1.]], dtype=m.float64, requires_grad=True)
    log = []

    def show(gs):
        return [None if g is None else g.tolist() for g in gs]
    if case.startswith("max"):
        t = x.max(1)[0]
        outs = (t,)
    else:
        outs = x.unbind(0)
        t = outs[0]
    if "node" in case:
        t.grad_fn.register_prehook(lambda go: log.append(("pre", show(go))))
        t.grad_fn.register_hook(lambda gi, go: log.append(("post", show(gi), show(go))))
    for k in ((2, 1) if "others" in case else ()):
        outs[k].register_hook(lambda g, k=k: log.append((k, g)))
    t.register_hook(lambda g: log.append(("t", g.tolist())))
    loss = (t * t).sum() + ((x * 1).sum() if "x" in case else 0)
    loss.backward(inputs=[t], create_graph=create_graph)
    return log, t.grad.tolist(), x.grad


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("case", ["max_node", "max_node_x", "unbind_node", "unbind_others", "unbind_node_others",
                                  "unbind_node_others_x"])
def test_backward_inputs_output_of_multi_output_op_runs_its_hooks(case, create_graph):
    """backward(inputs=[t]) with t = x.unbind(0)[0] (or x.max(1)[0]): torch runs t's grad_fn though
    nothing below it is wanted: the tensor hooks of its other outputs see None (in the order each got
    its first hook, t's own among them), then its pre-hooks and hooks; tracegrad skipped the other
    outputs' hooks."""
    got = [_idle_run(m, case, create_graph) for m in (tg, torch)]
    assert got[0][0] and got[0] == got[1]


def test_empty_strided_refuses_as_torch():
    """empty_strided with as many strides as sizes only, and no negative size: torch's errors."""
    for args in [((2, 3), (1,)), ((2, -3), (1, 2))]:
        got = [outcome(lambda m=m: m.empty_strided(*args)) for m in (tg, torch)]
        assert got[0][0] is RuntimeError and got[0] == got[1]

"""A compiled call and the derivative calls after it, run as one program (tracegrad/chain.py).

Once a compiled program's create_graph backward has run, the calls after its calls are
recorded; after two calls followed by the same steps, later calls speculate: the compiled
call and its steps return pending tensors and the last step runs the whole chain as one
program. Every case here runs the calls enough times to speculate (CALLS), and compares each
call's results against torch (float64: the same formulas, another evaluation order) and the
speculated calls' results against the recorded calls' (float32, the same primitives).
Anything the chain did not record makes it real first: the steps run as written."""
import threading
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad import chain

CALLS = 7                 # 1: plain; 2-3: recorded; 4 on: speculated
SPECULATES = 3            # the first call (0-based) whose compiled call returns pending tensors


def close(a, b, rtol=1e-11, atol=1e-12):
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def pair(a, req=True):
    return tg.tensor(a, requires_grad=req), torch.tensor(a, requires_grad=req)


def tanh2(lib):
    return lambda x: (lib.tanh(x) ** 2).sum()


def third(lib, f, x):
    y = f(x)
    (g1,) = lib.autograd.grad(y, x, create_graph=True)
    (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = lib.autograd.grad(g2.sum(), x)
    return y, g1, g2, g3


def speculating(seed, n):
    """tanh2 compiled, called SPECULATES times torch's way (third): its next call speculates.
    -> (the compiled function, its input, torch's twin of the input)."""
    cl = tg.compile(tanh2(tg))
    x, tx = pair(np.random.default_rng(seed).standard_normal(n))
    for _ in range(SPECULATES):
        third(tg, cl, x)
    return cl, x, tx


def pending(t):
    """A speculated tensor not made real yet (a recorded one is real, marked as the chain's)."""
    run = t.__dict__.get("_cr") if type(t) is chain._Pending else None
    return run is not None and run.spec


def test_third_derivative_speculates_and_matches_torch_every_call():
    xs = np.random.default_rng(0).standard_normal(50)
    cl = tg.compile(tanh2(tg))
    seen = []
    for i in range(CALLS):
        x, tx = pair(xs * (1 + i / 10))            # new values and a new tensor every call
        y = cl(x)
        seen.append(pending(y))
        (g1,) = tg.autograd.grad(y, x, create_graph=True)
        (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = tg.autograd.grad(g2.sum(), x)
        for a, b in zip((y, g1, g2, g3), third(torch, tanh2(torch), tx)):
            close(a, b)
        assert g1.requires_grad and g2.requires_grad and not g3.requires_grad and g3.grad_fn is None
        assert type(g3) is tg.Tensor
    assert seen == [False] * SPECULATES + [True] * (CALLS - SPECULATES)
    rec = cl.last_program.chain
    # the first speculated call left the values of y, g1 and g2 for later (rec.lazy); read, they
    # made the record compute them in the whole program from then on: two programs
    assert rec.state == chain.READY and len(rec.programs) == 2 and not rec.lazy
    src = rec.programs[0b11011][0].chain_source      # (y, g1, g2 and g2.sum() alive)
    assert src.count("grad(") == 3 and "call(x0)" in src


def test_speculated_float32_results_equal_the_recorded_calls_bit_for_bit():
    xs = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    cl = tg.compile(tanh2(tg))
    x = tg.tensor(xs, requires_grad=True)
    outs = [[t.detach().numpy().copy() for t in third(tg, cl, x)] for _ in range(CALLS)]
    for o in outs[1:]:
        for a, b in zip(o, outs[0]):
            assert a.tobytes() == b.tobytes()


def test_hessian_vector_product_with_lists_and_builtin_sum_matches_torch():
    rng = np.random.default_rng(2)
    sizes = [6, 5, 4, 3]
    wa = [rng.standard_normal((a, b)) / np.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    va = [rng.standard_normal(w.shape) for w in wa]
    xa = rng.standard_normal((7, sizes[0]))

    def loss(m, x, *ws):
        h = x
        for w in ws[:-1]:
            h = m.tanh(h @ w)
        return ((h @ ws[-1]) ** 2).mean()

    def hvp(lib, f, x, ws, vs):
        gs = lib.autograd.grad(f(x, *ws), ws, create_graph=True)
        return gs, lib.autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)), ws)
    cl = tg.compile(lambda x, *ws: loss(tg, x, *ws))
    for i in range(CALLS):
        ws, tws = zip(*[pair(w) for w in wa])
        vs, tvs = zip(*[pair(v * (i + 1), False) for v in va])
        gs, hv = hvp(tg, cl, tg.tensor(xa), list(ws), vs)
        tgs, thv = hvp(torch, lambda x, *w: loss(torch, x, *w), torch.tensor(xa), list(tws), tvs)
        for a, b in zip(gs + hv, tgs + thv):
            close(a, b)
    assert cl.last_program.chain.state == chain.READY


def test_reading_a_value_mid_chain_runs_the_steps_as_written():
    cl, x, tx = speculating(3, 30)
    ty, t1, t2, t3 = third(torch, tanh2(torch), tx)
    y = cl(x)
    (g1,) = tg.autograd.grad(y, x, create_graph=True)
    assert pending(y) and pending(g1)
    assert y.item() == pytest.approx(ty.item(), rel=1e-13)      # the steps so far run now
    assert not pending(y) and not pending(g1)
    assert type(g1) is tg.Tensor and g1.grad_fn is not None
    (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = tg.autograd.grad(g2.sum(), x)
    for a, b in ((g1, t1), (g2, t2), (g3, t3)):
        close(a, b)
    # the chain is recorded again, and speculates again after two calls
    for _ in range(2 * SPECULATES):
        r = third(tg, cl, x)
    for a, b in zip(r, (ty, t1, t2, t3)):
        close(a, b)


@pytest.mark.parametrize("use", ["grad_fn", "is_leaf", "backward", "numpy", "repr", "mul_scalar_kw", "retain_grad",
                                 "other_op", "no_grad_step", "register_hook", "stride"])
def test_any_other_use_of_a_pending_tensor_settles_the_chain_first(use):
    cl, x, tx = speculating(4, 20)
    y = cl(x)
    (g1,) = tg.autograd.grad(y, x, create_graph=True)
    s = g1.sum()
    assert pending(s)
    ty = (torch.tanh(tx) ** 2).sum()
    (t1,) = torch.autograd.grad(ty, tx, create_graph=True)
    ts = t1.sum()
    if use == "grad_fn":
        assert type(s.grad_fn).__name__ == type(ts.grad_fn).__name__ == "SumBackward0"
    elif use == "is_leaf":
        assert s.is_leaf is False
    elif use == "backward":
        s.backward(retain_graph=True)
        ts.backward(retain_graph=True)
        close(x.grad, tx.grad)
    elif use == "numpy":
        close(s.detach().numpy(), ts)
    elif use == "repr":
        assert "grad_fn=<SumBackward0>" in repr(s)
    elif use == "mul_scalar_kw":
        close(g1.mul(other=2.0), t1.mul(other=2.0))
    elif use == "retain_grad":
        s.retain_grad()
        (s * 3).backward(retain_graph=True)
        assert s.grad.item() == 3.0
    elif use == "other_op":
        close(tg.sin(s), torch.sin(ts))
    elif use == "no_grad_step":
        with tg.no_grad():
            s2 = g1.sum()
        assert not s2.requires_grad
        close(s2, ts)
    elif use == "register_hook":
        calls = []
        s.register_hook(lambda g: calls.append(g.item()))
        tg.autograd.grad(s * 2, x, retain_graph=True)
        assert calls == [2.0]
    elif use == "stride":
        assert s.stride() == ts.stride() and g1.stride() == t1.stride()
    assert not pending(s) and not pending(y) and not pending(g1)
    (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), tx, create_graph=True)
    close(g2, t2)


def test_results_of_a_finished_chain_keep_their_values_and_get_their_graphs_when_used():
    cl, x, tx = speculating(5, 25)
    y, g1, g2, g3 = third(tg, cl, x)
    ty, t1, t2, t3 = third(torch, tanh2(torch), tx)
    assert pending(y) and pending(g1) and pending(g2) and not pending(g3)
    assert y.shape == () and g1.shape == (25,) and g1.requires_grad and y.dtype == tg.float64
    assert y.item() == pytest.approx(ty.item(), rel=1e-13)
    close(np.array(g1.tolist()), t1)
    assert pending(y) and pending(g1)         # values only: no graph was needed
    y.backward()
    close(x.grad, torch.autograd.grad(tanh2(torch)(tx), tx)[0])
    assert not pending(y) and type(y.grad_fn).__name__ == "CompiledFunctionBackward"
    # g2's graph was freed by the last grad (no retain_graph), as torch's (y's use made them all real)
    assert not pending(g2)
    with pytest.raises(RuntimeError, match="second time"):
        g2.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        t2.sum().backward()


def test_an_input_changed_in_place_after_the_chain_keeps_values_and_refuses_the_graph():
    """A call whose program computed the values of the results alive keeps no copies of its
    inputs: their graphs cannot be rebuilt once an input changed in place."""
    cl, x, tx = speculating(6, 10)
    third(tg, cl, x)[0].item()                # (a value read: values in the program from now on)
    y, g1, g2, g3 = third(tg, cl, x)
    assert pending(y) and not lazy(y)
    ty, t1, _, _ = third(torch, tanh2(torch), tx)
    with tg.no_grad():
        x.mul_(2)                             # an optimizer step
    total = y + g1.sum()                      # an op on the results after it (a running loss)
    close(total, ty + t1.sum())
    assert total.requires_grad
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*clone it first"):
        total.backward()


def test_an_input_changed_in_place_mid_chain_raises_at_the_last_step():
    xs = np.random.default_rng(7).standard_normal(10)
    cl = tg.compile(tanh2(tg))
    x = tg.tensor(xs, requires_grad=True)
    for _ in range(SPECULATES):
        third(tg, cl, x)
    y = cl(x)
    (g1,) = tg.autograd.grad(y, x, create_graph=True)
    (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
    with tg.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tg.autograd.grad(g2.sum(), x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.item()
    # the next calls run right
    x2, tx2 = pair(xs)
    for _ in range(2 * SPECULATES):
        r = third(tg, cl, x2)
    for a, b in zip(r, third(torch, tanh2(torch), tx2)):
        close(a, b)


@pytest.mark.parametrize("change", ["create_graph", "other_input", "shape", "dtype", "constant", "allow_unused",
                                    "stop_early", "extra_step", "requires_grad"])
def test_calls_that_depart_from_the_recorded_chain_give_torchs_results(change):
    rng = np.random.default_rng(8)
    xs, zs = rng.standard_normal(12), rng.standard_normal(12)
    cl = tg.compile(lambda x, z: (tg.tanh(x) ** 2 * z).sum())
    tl = lambda x, z: (torch.tanh(x) ** 2 * z).sum()        # noqa: E731

    def run(lib, f, x, z, k=2.0, cg=True, unused=None, steps=3):
        y = f(x, z)
        (g1,) = lib.autograd.grad(y, x, create_graph=True)
        s = g1.sum() * k
        out = [y, g1, s]
        if steps >= 2:
            out += list(lib.autograd.grad(s, [x, z] if unused is not None else x, create_graph=cg,
                                          allow_unused=unused))
        if steps >= 3 and cg:
            out.append((out[-1] * out[-1]).sum())
        return out
    for i in range(CALLS + 2):
        kw = {}
        x, tx = pair(xs)
        z, tz = pair(zs, req=False)
        if i == CALLS - 2:
            if change == "create_graph":
                kw = dict(cg=False)
            elif change == "other_input":
                x2, tx2 = pair(xs * 3)
                kw = {}
                y = cl(x, z)
                (g1,) = tg.autograd.grad(y, x, create_graph=True)
                (h,) = tg.autograd.grad((g1 * x2).sum(), x)
                (th,) = torch.autograd.grad((torch.autograd.grad(tl(tx, tz), tx, create_graph=True)[0] * tx2).sum(),
                                            tx)
                close(h, th)
                continue
            elif change == "shape":
                x, tx = pair(np.concatenate([xs, xs]))
                z, tz = pair(np.concatenate([zs, zs]), req=False)
            elif change == "dtype":
                x, tx = pair(xs.astype(np.float32))
                z, tz = pair(zs.astype(np.float32), req=False)
            elif change == "constant":
                kw = dict(k=-0.0)
            elif change == "allow_unused":
                z, tz = pair(zs)
                kw = dict(unused=True)
            elif change == "stop_early":
                kw = dict(steps=1)
            elif change == "extra_step":
                kw = dict(steps=4)
            elif change == "requires_grad":
                z, tz = pair(zs)
        got, want = run(tg, cl, x, z, **kw), run(torch, tl, tx, tz, **kw)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            if b is None:
                assert a is None
            else:
                tol = 1e-5 if b.dtype == torch.float32 else 1e-11
                close(a, b, rtol=tol, atol=tol)
                assert a.requires_grad == b.requires_grad and a.dtype == tg.float64 or b.dtype != torch.float64


def test_an_error_in_a_step_raises_as_eager_and_ends_the_chain():
    xs = np.random.default_rng(9).standard_normal(8)
    cl = tg.compile(lambda x: tg.tanh(x) ** 2)         # no sum: grad needs grad_outputs
    x = tg.tensor(xs, requires_grad=True)
    for _ in range(CALLS):
        y = cl(x)
        (g1,) = tg.autograd.grad(y, x, grad_outputs=tg.ones_like(y), create_graph=True)
        (g2,) = tg.autograd.grad(g1.sum(), x)
    y = cl(x)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        tg.autograd.grad(y, x, create_graph=True)
    tx = torch.tensor(xs, requires_grad=True)
    ty = torch.tanh(tx) ** 2
    (t1,) = torch.autograd.grad(ty, tx, grad_outputs=torch.ones_like(ty), create_graph=True)
    (g1,) = tg.autograd.grad(y, x, grad_outputs=tg.ones_like(y), create_graph=True)
    close(g1, t1)


def test_pending_tensors_dropped_before_the_last_step_leave_nothing_behind():
    cl, x, tx = speculating(10, 8)
    for _ in range(3):
        y = cl(x)
        tg.autograd.grad(y, x, create_graph=True)
        del y
    for a, b in zip(third(tg, cl, x), third(torch, tanh2(torch), tx)):
        close(a, b)


def test_chain_inputs_with_hooks_or_views_are_not_speculated():
    xs = np.random.default_rng(11).standard_normal(9)
    cl = tg.compile(tanh2(tg))
    x, tx = pair(xs)
    calls = []
    x.register_hook(lambda g: calls.append(1))
    tx.register_hook(lambda g: None)
    for _ in range(CALLS):
        y = cl(x)
        assert not pending(y)
        r = third(tg, cl, x)
    for a, b in zip(r, third(torch, tanh2(torch), tx)):
        close(a, b)
    assert calls                                       # the hook ran at every grad that reached x
    base, tbase = pair(np.concatenate([xs, xs]))
    v, tv = base[:9], tbase[:9]
    cl2 = tg.compile(tanh2(tg))
    for _ in range(CALLS):
        y = cl2(v)
        assert not pending(y)
        (g1,) = tg.autograd.grad(y, v, create_graph=True)
        (g2,) = tg.autograd.grad(g1.sum(), v)
    (t1,) = torch.autograd.grad((torch.tanh(tv) ** 2).sum(), tv, create_graph=True)
    close(g2, torch.autograd.grad(t1.sum(), tv)[0])


def test_other_threads_calls_run_as_written():
    xs = np.random.default_rng(12).standard_normal(16)
    cl = tg.compile(tanh2(tg))
    x, tx = pair(xs)
    for _ in range(CALLS):
        third(tg, cl, x)
    want = third(torch, tanh2(torch), tx)
    errors, seen = [], []

    def work():
        try:
            for _ in range(CALLS):
                r = third(tg, cl, x)
                seen.append(any(pending(t) for t in r))
                for a, b in zip(r, want):
                    close(a, b)
        except Exception as e:           # noqa: BLE001 (reported by the main thread)
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for _ in range(CALLS):
        for a, b in zip(third(tg, cl, x), want):
            close(a, b)
    for t in ts:
        t.join()
    assert not errors and not any(seen)


def test_recorded_results_are_tensors_to_user_code():
    xs = np.random.default_rng(13).standard_normal(6)
    cl = tg.compile(tanh2(tg))
    x = tg.tensor(xs, requires_grad=True)
    for i in range(CALLS):
        y, g1, g2, g3 = third(tg, cl, x)
        for t in (y, g1, g2, g3):
            assert isinstance(t, tg.Tensor) and type(t).__name__ == "Tensor"
            assert t.device == x.device and not t.is_cuda
        assert g1.size() == (6,) and g1.size(0) == 6 and g1.size(-1) == 6 and g1.dim() == 1 and g1.numel() == 6
        assert y.ndim == 0 and y.nelement() == 1
        with pytest.raises(IndexError):
            y.size(0)


def test_whole_chain_that_cannot_compile_runs_as_written_with_no_warning():
    cl, x, tx = speculating(14, 7)

    def refuse(fn, **kw):
        def call(*args):
            raise RuntimeError("the whole chain refused")
        return call
    compiler, chain.COMPILER[0] = chain.COMPILER[0], refuse
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                r = third(tg, cl, x)
    finally:
        chain.COMPILER[0] = compiler
    for a, b in zip(r, third(torch, tanh2(torch), tx)):
        close(a, b)
    assert cl.last_program.chain.state == chain.OFF


@pytest.mark.parametrize("change", ["requires_grad", "default_dtype", "no_grad_call", "anomaly"])
def test_modes_and_flags_changed_mid_chain_give_eagers_results(change):
    xs = np.random.default_rng(15).standard_normal(11)
    cl = tg.compile(lambda x: (tg.tanh(x) ** 2).sum() * 3)
    x, tx = pair(xs)
    for _ in range(SPECULATES):
        third(tg, cl, x)
    y = cl(x)
    (g1,) = tg.autograd.grad(y, x, create_graph=True)
    (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
    ty = (torch.tanh(tx) ** 2).sum() * 3
    (t1,) = torch.autograd.grad(ty, tx, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), tx, create_graph=True)
    if change == "requires_grad":
        x.requires_grad_(False)
        tx.requires_grad_(False)
        with pytest.raises(RuntimeError, match="does not require grad") as e:
            torch.autograd.grad(t2.sum(), tx)
        with pytest.raises(RuntimeError, match=str(e.value)[:40]):
            tg.autograd.grad(g2.sum(), x)
        return
    if change == "default_dtype":
        prev = tg.get_default_dtype()
        tg.set_default_dtype(tg.float64 if prev is tg.float32 else tg.float32)
        try:
            (g3,) = tg.autograd.grad(g2.sum(), x)
        finally:
            tg.set_default_dtype(prev)
    elif change == "no_grad_call":
        with tg.no_grad():
            s = g2.sum()
        assert not s.requires_grad
        (g3,) = tg.autograd.grad(g2.sum(), x)
    else:
        with tg.autograd.detect_anomaly():
            (g3,) = tg.autograd.grad(g2.sum(), x)
    (t3,) = torch.autograd.grad(t2.sum(), tx)
    for a, b in ((y, ty), (g1, t1), (g2, t2), (g3, t3)):
        close(a, b)


def test_default_dtype_float64_from_the_start_still_speculates():
    prev = tg.get_default_dtype()
    tg.set_default_dtype(tg.float64)
    try:
        cl = tg.compile(tanh2(tg))
        x, tx = pair(np.random.default_rng(16).standard_normal(5))
        seen = []
        for _ in range(CALLS):
            y = cl(x)
            seen.append(pending(y))
            (g1,) = tg.autograd.grad(y, x, create_graph=True)
            (g2,) = tg.autograd.grad(g1.sum(), x)
        assert seen[-1]
        (t1,) = torch.autograd.grad(tanh2(torch)(tx), tx, create_graph=True)
        close(g2, torch.autograd.grad(t1.sum(), tx)[0])
    finally:
        tg.set_default_dtype(prev)


# -- random programs (test_compile_random's), their derivatives taken torch's way ---------------

def check_random_chain(seed, dtype):
    """A random program compiled, then order 1 (create_graph) and order 2 taken outside it, CALLS
    times: every call against eager tracegrad, within test_compile_random's tolerance (the whole
    chain is one compiled function, which may sum a derivative's terms in another order than the
    engine's walk); the speculated calls' results against each other bit for bit.
    -> whether calls speculated."""
    from test_compile_random import draw_program, run, weights, order1, order2, assert_close
    plan = draw_program(seed)
    shapes, req, ins, outs = plan
    r = np.random.default_rng(seed)
    arrays = [(r.standard_normal(s) * 1.5).astype(dtype) for s in shapes]
    compiled = tg.compile(lambda *xs: run(tg, plan, xs), fullgraph=True)
    xe = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    oe = run(tg, plan, xe)
    out_w = [tg.tensor(w) for w in weights([tuple(o.shape) for o in oe], seed, dtype)]
    ge = order1(tg, oe, xe, out_w)
    if ge is None:
        return False
    vs = weights([tuple(g.shape) for g in ge if g is not None] or [()], seed + 1, dtype)
    it = iter(vs)
    vs = [None if g is None else tg.tensor(next(it)) for g in ge]
    he = order2(tg, ge, xe, vs)
    first, spec = None, False
    xc = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    for call in range(CALLS):
        oc = compiled(*xc)
        spec = spec or any(pending(o) for o in oc)
        gc = order1(tg, oc, xc, out_w)
        hc = order2(tg, gc, xc, vs)
        got = [t for t in list(gc) + list(hc or ()) + list(oc)]
        for i, (a, b) in enumerate(zip(got, list(ge) + list(he or ()) + list(oe))):
            assert_close(a, b, dtype, f"seed {seed} {dtype} call {call} result {i} (chain vs eager)")
        if call >= SPECULATES:
            arrays_now = [None if t is None else t.detach().numpy().tobytes() for t in got]
            if first is None:
                first = arrays_now
            else:
                assert arrays_now == first, f"seed {seed} {dtype} call {call}: another value than call {SPECULATES}'s"
    return spec


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_random_programs_derivatives_taken_torchs_way_speculate_and_match_eager(dtype):
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    n = int(os.environ.get("TRACEGRAD_RANDOM_CHAINS", "24"))
    spec = [check_random_chain(seed, dtype) for seed in range(n)]
    assert sum(spec) >= n // 3, f"only {sum(spec)} of {n} programs' calls speculated"


def twin_mlp(a, b):
    """Linear(a, b), Tanh, Linear(b, 1) in float64, in tracegrad and in torch, the same weights."""
    m = tg.nn.Sequential(tg.nn.Linear(a, b), tg.nn.Tanh(), tg.nn.Linear(b, 1)).double()
    tm = torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.Tanh(), torch.nn.Linear(b, 1)).double()
    with torch.no_grad():
        for p, tp in zip(m.parameters(), tm.parameters()):
            tp.copy_(torch.tensor(p.detach().numpy()))
    return m, tm


def test_gradient_penalty_of_a_compiled_module_matches_torch():
    """A compiled module, the gradients taken with respect to its parameters (which the program
    reads as the module's, and the whole chain takes as inputs too): one program, torch's
    values, no warning."""
    rng = np.random.default_rng(17)
    m, tm = twin_mlp(4, 5)
    cm = tg.compile(m)
    xa = rng.standard_normal((6, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(CALLS):
            ps, tps = list(m.parameters()), list(tm.parameters())
            loss = (cm(tg.tensor(xa)) ** 2).sum()
            gs = tg.autograd.grad(loss, ps, create_graph=True)
            pen = sum((g * g).sum() for g in gs)
            hv = tg.autograd.grad(loss + pen, ps)
            tloss = (tm(torch.tensor(xa)) ** 2).sum()
            tgs = torch.autograd.grad(tloss, tps, create_graph=True)
            thv = torch.autograd.grad(tloss + sum((g * g).sum() for g in tgs), tps)
            for a, b in zip(hv, thv):
                close(a, b)
    assert cm.last_program.chain.programs


def test_a_training_loop_torchs_way_reads_the_loss_after_the_step():
    """Gradient penalty written torch's way, the parameters updated in place after the chain,
    the loss read after the update: the value is the one before it, as torch's."""
    rng = np.random.default_rng(18)
    wa = rng.standard_normal((5, 3)) / 3
    xa = rng.standard_normal((8, 5))
    w, tw = pair(wa)
    x, tx = tg.tensor(xa), torch.tensor(xa)
    cl = tg.compile(lambda x, w: (tg.tanh(x @ w) ** 2).mean())

    def step(lib, f, x, w):
        loss = f(x, w)
        (g,) = lib.autograd.grad(loss, w, create_graph=True)
        total = loss + (g * g).sum()
        (h,) = lib.autograd.grad(total, w)
        with lib.no_grad():
            w.sub_(0.1 * h)
        return loss, total
    for i in range(CALLS + 2):
        loss, total = step(tg, cl, x, w)
        tloss, ttotal = step(torch, lambda x, w: (torch.tanh(x @ w) ** 2).mean(), tx, tw)
        assert loss.item() == pytest.approx(tloss.item(), rel=1e-12)
        assert total.item() == pytest.approx(ttotal.item(), rel=1e-12)
        close(w, tw)
    assert cl.last_program.chain.programs              # the chain ran as one program
    # torch's graph of the loss was freed by the last grad; tracegrad's cannot be rebuilt (w changed)
    with pytest.raises(RuntimeError, match="second time"):
        tloss.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_tensor_the_program_reads_itself_written_mid_chain_raises_as_torch():
    """A module's weight that the chain's inputs do not include, written in place between the
    compiled call and the last step: torch's backward finds the saved weight changed and raises;
    the whole chain would read the new weight, so its last step raises too."""
    rng = np.random.default_rng(19)
    m = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1)).double()
    cm = tg.compile(m)
    xa = rng.standard_normal((5, 3))

    def chain_of(w):
        loss = (cm(tg.tensor(xa)) ** 2).sum()
        (g,) = tg.autograd.grad(loss, w, create_graph=True)
        return loss, g
    w0 = m[0].weight
    for _ in range(CALLS):
        loss, g = chain_of(w0)
        (h,) = tg.autograd.grad((g * g).sum(), w0)
    loss, g = chain_of(w0)
    s = (g * g).sum()
    assert pending(loss) and pending(s)
    with tg.no_grad():
        m[2].weight.mul_(2)                   # read by the program, not an input of the chain
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tg.autograd.grad(s, w0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    tloss = (tm(torch.tensor(xa)) ** 2).sum()
    (tg1,) = torch.autograd.grad(tloss, tm[0].weight, create_graph=True)
    ts = (tg1 * tg1).sum()
    with torch.no_grad():
        tm[2].weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(ts, tm[0].weight)


def test_a_chain_ending_with_create_graph_differentiates_again_outside_it():
    xs = np.random.default_rng(20).standard_normal(13)
    cl = tg.compile(tanh2(tg))
    for _ in range(CALLS):
        x, tx = pair(xs)
        y = cl(x)
        (g1,) = tg.autograd.grad(y, x, create_graph=True)
        (g2,) = tg.autograd.grad(g1.sum(), x, create_graph=True)
        assert g2.requires_grad and g2.grad_fn is not None
        g2.pow(3).sum().backward()              # a fourth-order quantity, after the chain's last step
        ty = tanh2(torch)(tx)
        (t1,) = torch.autograd.grad(ty, tx, create_graph=True)
        (t2,) = torch.autograd.grad(t1.sum(), tx, create_graph=True)
        t2.pow(3).sum().backward()
        close(g2, t2)
        close(x.grad, tx.grad)


def test_memory_stays_flat_over_speculated_calls():
    import gc
    import tracemalloc
    x = tg.tensor(np.random.default_rng(21).standard_normal(500), requires_grad=True)
    cl = tg.compile(tanh2(tg))
    for _ in range(20):
        third(tg, cl, x)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(300):
            third(tg, cl, x)
        gc.collect()
        a = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            third(tg, cl, x)
        gc.collect()
        b = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert b - a < 64 << 10, f"{b - a} bytes more after 300 more calls"
    assert cl.last_program.chain.state == chain.READY


@pytest.mark.parametrize("hook", ["tensor_hook", "saved_tensors_hooks", "module_hook", "param_hook"])
def test_hooks_registered_mid_chain_run_as_in_eager(hook):
    xs = np.random.default_rng(22).standard_normal(7)
    m = tg.nn.Linear(7, 1).double()
    cl = tg.compile(lambda x: (tg.tanh(m(x)) ** 2).sum())
    x, tx = pair(xs)
    w = m.weight
    tm = torch.nn.Linear(7, 1).double()
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w.detach().numpy()))
        tm.bias.copy_(torch.tensor(m.bias.detach().numpy()))

    def run(lib, f, x, w):
        y = f(x)
        (g,) = lib.autograd.grad(y, [x], create_graph=True)
        return y, g, (g * g).sum()
    for _ in range(SPECULATES):
        y, g, s = run(tg, cl, x, w)
        tg.autograd.grad(s, [x, w])
    y, g, s = run(tg, cl, x, w)
    assert pending(s)
    ty, tg1, ts = run(torch, lambda x: (torch.tanh(tm(x)) ** 2).sum(), tx, tm.weight)
    calls, tcalls = [], []
    if hook == "tensor_hook":
        x.register_hook(lambda g: calls.append(g.shape))
        tx.register_hook(lambda g: tcalls.append(g.shape))
        r, tr = tg.autograd.grad(s, [x, w]), torch.autograd.grad(ts, [tx, tm.weight])
    elif hook == "param_hook":
        w.register_hook(lambda g: calls.append(g.shape))
        tm.weight.register_hook(lambda g: tcalls.append(g.shape))
        r, tr = tg.autograd.grad(s, [x, w]), torch.autograd.grad(ts, [tx, tm.weight])
    elif hook == "saved_tensors_hooks":
        with tg.autograd.graph.saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t):
            r = tg.autograd.grad(s, [x, w])
        with torch.autograd.graph.saved_tensors_hooks(lambda t: tcalls.append(1) or t, lambda t: t):
            tr = torch.autograd.grad(ts, [tx, tm.weight])
        calls, tcalls = bool(calls), bool(tcalls)     # (how many each saves is its own)
    else:
        h = tg.nn.modules.module.register_module_full_backward_hook(lambda *a: calls.append(1))
        th = torch.nn.modules.module.register_module_full_backward_hook(lambda *a: tcalls.append(1))
        try:
            r, tr = tg.autograd.grad(s, [x, w]), torch.autograd.grad(ts, [tx, tm.weight])
        finally:
            h.remove()
            th.remove()
    assert calls == tcalls
    for a, b in zip(r, tr):
        close(a, b)


def test_a_hook_registered_between_two_grad_steps_runs_as_often_as_torchs():
    cl, x, tx = speculating(23, 6)
    counts = {}
    for lib, f, x_ in ((tg, cl, x), (torch, tanh2(torch), tx)):
        n = []
        y = f(x_)
        (g1,) = lib.autograd.grad(y, x_, create_graph=True)
        h = x_.register_hook(lambda g: n.append(1))
        (g2,) = lib.autograd.grad(g1.sum(), x_, create_graph=True)
        (g3,) = lib.autograd.grad(g2.sum(), x_)
        h.remove()
        counts[lib.__name__] = (len(n), g3.detach().numpy())
    assert counts["tracegrad"][0] == counts["torch"][0] == 2
    close(counts["tracegrad"][1], counts["torch"][1])


def test_a_function_returning_one_tensor_twice_keeps_their_identity():
    xs = np.random.default_rng(24).standard_normal(5)
    cl = tg.compile(lambda x: ((tg.tanh(x) ** 2).sum(),) * 2)
    x = tg.tensor(xs, requires_grad=True)
    for _ in range(CALLS):
        a, b = cl(x)
        assert a is b
        (g,) = tg.autograd.grad(a, x, create_graph=True)
        tg.autograd.grad(g.sum(), x)


def test_requires_grad_flipped_after_the_chain_then_a_graph_needed_replays_as_first_run():
    cl, x, tx = speculating(25, 9)
    y, g1, g2, g3 = third(tg, cl, x)
    ty, t1, t2, t3 = third(torch, tanh2(torch), tx)
    assert pending(g1)
    x.requires_grad_(False)
    tx.requires_grad_(False)
    close(g1.detach(), t1.detach())           # (detach makes the chain real: its steps as they ran)
    assert g1.requires_grad and type(g1.grad_fn).__name__ == "CompiledFunctionBackward"
    assert x.requires_grad is False


def test_a_tensor_the_program_reads_passed_where_the_chain_took_an_input_runs_as_written():
    """The chain recorded with a plain tensor as the second factor of `g * v`; then the module's
    own weight is passed there (the program reads it itself): no step check may take it as the
    input of that place."""
    rng = np.random.default_rng(26)
    m = tg.nn.Linear(4, 4).double()
    cm = tg.compile(m)
    tm = torch.nn.Linear(4, 4).double()
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(m.weight.detach().numpy()))
        tm.bias.copy_(torch.tensor(m.bias.detach().numpy()))
    xa = rng.standard_normal((3, 4))
    v = tg.tensor(rng.standard_normal((4, 4)), requires_grad=True)     # (the weight's metadata)

    def run(lib, f, x, w, v):
        loss = (f(x) ** 2).sum()
        (g,) = lib.autograd.grad(loss, w, create_graph=True)
        return lib.autograd.grad((g * v).sum(), w)
    for i in range(CALLS + 1):
        vv, tv = (v, torch.tensor(v.detach().numpy())) if i < CALLS - 1 else (m.weight, tm.weight)
        (h,) = run(tg, cm, tg.tensor(xa), m.weight, vv)
        (th,) = run(torch, tm, torch.tensor(xa), tm.weight, tv)
        close(h, th)


@pytest.mark.parametrize("change", ["constant", "op", "create_graph"])
def test_a_chain_that_changes_for_good_gets_a_program_of_its_own(change):
    """The calls follow one chain until it speculates, then another one for good (a constant,
    an op, create_graph): the second chain is recorded and speculates in turn, and its whole
    program is its own, not the first chain's (whose results alive at the end may be the same)."""
    xs = np.random.default_rng(27).standard_normal(9)
    cl = tg.compile(tanh2(tg))
    x, tx = pair(xs)

    def run(lib, f, x, second):
        y = f(x)
        (g1,) = lib.autograd.grad(y, x, create_graph=True)
        if change == "constant":
            s = g1.sum() * (3.0 if second else 2.0)
        elif change == "op":
            s = (g1 * g1).sum() if second else g1.sum()
        else:
            s = g1.sum()
        (g2,) = lib.autograd.grad(s, x, create_graph=second and change == "create_graph")
        return y, g2
    seen = []
    for i in range(3 * CALLS):
        second = i >= CALLS
        y, g2 = run(tg, cl, x, second)
        seen.append(pending(y))
        ty, t2 = run(torch, tanh2(torch), tx, second)
        close(g2, t2)
        close(np.array(y.tolist()), ty)
    assert seen[CALLS - 1] and seen[-1]          # both chains speculated


# -- values left for later: results alive at the last step get their values when first read ------

def lazy(t):
    """A finished chain's result whose value is not computed yet (its run keeps copies of its inputs)."""
    run = t.__dict__.get("_cr") if type(t) is chain._Pending else None
    return run is not None and run.done and run.unread


@pytest.mark.parametrize("write", ["none", "no_grad", "data", "numpy", "rebind_data"])
def test_values_read_later_are_the_inputs_values_as_the_call_took_them(write):
    """The whole program of the first speculated call computes the last step's results only;
    y, g1 and g2 take their values when read, from copies of the inputs as the call took them,
    however the input changed since: in place under no_grad (which autograd sees), through
    .data or its numpy array (which it does not), or given other memory."""
    cl, x, tx = speculating(30, 40)
    y, g1, g2, g3 = third(tg, cl, x)
    ty, t1, t2, t3 = third(torch, tanh2(torch), tx)
    assert lazy(y) and lazy(g1) and lazy(g2) and not pending(g3)
    close(g3, t3)
    if write == "no_grad":
        with tg.no_grad():
            x.mul_(3)
    elif write == "data":
        x.data.mul_(3)
    elif write == "numpy":
        x.detach().numpy()[:] = 7.0
    elif write == "rebind_data":
        x.data = tg.zeros(40, dtype=tg.float64)
    assert lazy(y)
    close(y, ty)
    close(g1, t1)
    close(g2, t2)
    assert not lazy(g1)
    assert not cl.last_program.chain.lazy        # read: later calls compute the values in the program
    y2, g1b, _, g3b = third(tg, cl, x)
    assert pending(y2) and not lazy(y2)
    ty2, t1b, _, t3b = third(torch, tanh2(torch), tx.detach().copy_(torch.tensor(x.detach().numpy()))
                             .requires_grad_())
    close(y2, ty2)
    close(g1b, t1b)
    close(g3b, t3b)


def test_values_read_later_in_float32_equal_the_recorded_calls_bit_for_bit():
    """A value computed when read runs the steps as eager does: the recorded calls' bits."""
    xs = np.random.default_rng(31).standard_normal(300).astype(np.float32)
    cl = tg.compile(tanh2(tg))
    x = tg.tensor(xs, requires_grad=True)
    first = [t.detach().numpy().copy() for t in third(tg, cl, x)]
    for _ in range(SPECULATES - 1):
        third(tg, cl, x)
    out = third(tg, cl, x)
    assert lazy(out[0])
    for a, b in zip(out, first):
        assert a.detach().numpy().tobytes() == b.tobytes()


def test_results_kept_unread_over_calls_get_their_values_in_the_program():
    """A loop that keeps each call's results unread (a list of losses): the second call finds
    the first's results alive, still without values, and the record computes them in the
    program from then on, so at most one call's inputs are copied."""
    xs = np.random.default_rng(32).standard_normal(20)
    cl = tg.compile(tanh2(tg))
    kept, ref = [], []
    for i in range(CALLS + 3):
        x, tx = pair(xs * (1 + i / 7))
        kept.append(third(tg, cl, x))
        ref.append(third(torch, tanh2(torch), tx))
    runs = {id(t.__dict__["_cr"]) for out in kept for t in out[:3] if lazy(t)}
    assert len(runs) == 1
    assert not cl.last_program.chain.lazy
    for out, tout in zip(kept, ref):
        for a, b in zip(out, tout):
            close(a, b)


def test_a_value_left_for_later_read_from_another_thread():
    cl, x, tx = speculating(33, 15)
    y, g1, g2, g3 = third(tg, cl, x)
    ty, t1, _, _ = third(torch, tanh2(torch), tx)
    assert lazy(y)
    got = {}
    th = threading.Thread(target=lambda: got.update(y=y.item(), g1=g1.tolist()))
    th.start()
    th.join()
    assert got["y"] == pytest.approx(ty.item(), rel=1e-13)
    close(np.array(got["g1"]), t1)


def test_the_graph_of_a_result_whose_value_was_left_for_later():
    """A backward through a result left for later: its value first, then its graph, replayed
    as first run; an input changed in place since refuses the graph as before."""
    cl, x, tx = speculating(34, 12)
    y, g1, g2, g3 = third(tg, cl, x)
    ty, t1, _, _ = third(torch, tanh2(torch), tx)
    assert lazy(g1) and lazy(y)
    (h,) = tg.autograd.grad(y, x)
    (th,) = torch.autograd.grad(tanh2(torch)(tx), tx)
    close(h, th)
    close(y, ty)
    y2, g1b, _, _ = third(tg, cl, x)
    with tg.no_grad():
        x.add_(1)
    close(g1b, t1)                           # (the value, as the call took x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        g1b.sum().backward()


def test_hessian_vector_products_left_for_later_with_weights_changed_through_data():
    """W6's form: the gradients gs are alive at the last step; the weights then change through
    .data (an old-style update), and gs read afterwards are the gradients at the old weights."""
    rng = np.random.default_rng(35)
    sizes = [5, 4, 3]
    wa = [rng.standard_normal((a, b)) / np.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    va = [rng.standard_normal(w.shape) for w in wa]
    xa = rng.standard_normal((6, sizes[0]))

    def loss(m, x, *ws):
        return (m.tanh(x @ ws[0]) @ ws[1]).pow(2).mean()

    def hvp(lib, f, x, ws, vs):
        gs = lib.autograd.grad(f(x, *ws), ws, create_graph=True)
        return gs, lib.autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)), ws)
    cl = tg.compile(lambda x, *ws: loss(tg, x, *ws))
    ws, tws = zip(*[pair(w) for w in wa])
    vs, tvs = zip(*[pair(v, False) for v in va])
    for _ in range(SPECULATES):
        hvp(tg, cl, tg.tensor(xa), list(ws), vs)
    gs, hv = hvp(tg, cl, tg.tensor(xa), list(ws), vs)
    tgs, thv = hvp(torch, lambda x, *w: loss(torch, x, *w), torch.tensor(xa), list(tws), tvs)
    assert all(lazy(g) for g in gs)
    for w, g in zip(ws, hv):
        w.data.sub_(0.5 * g)
    for a, b in zip(gs + hv, tgs + thv):
        close(a, b)


@pytest.mark.parametrize("loss", ["tanh2", "exp", "cube"])
def test_graphs_of_results_left_for_later_after_an_input_changed_in_place_are_torchs(loss):
    """The graphs of results whose values were left for later, wanted after an input was
    written in place (an optimizer step): rebuilt from the copies of the inputs, each input
    at its version as taken, so a backward gives torch's gradient where torch's graph saved
    no input (tanh's and exp's save their results) and raises torch's error where it did
    (x ** 3 saves x); the values stay the call's."""
    fs = {"tanh2": lambda m, x: (m.tanh(x) ** 2).sum(), "exp": lambda m, x: m.exp(x).sum(),
          "cube": lambda m, x: (x ** 3).sum()}
    cl = tg.compile(lambda x: fs[loss](tg, x))
    x, tx = pair(np.random.default_rng(36).standard_normal(9))
    outs = []
    for lib, f, t in ((tg, cl, x), (torch, lambda v: fs[loss](torch, v), tx)):
        for _ in range(SPECULATES + 1):
            y = f(t)
            (g1,) = lib.autograd.grad(y, t, create_graph=True)
            (g2,) = lib.autograd.grad((g1 * g1).sum(), t, create_graph=True)
            (g3,) = lib.autograd.grad(g2.sum(), t, retain_graph=True)
        outs.append((y, g1, g2, g3))
    (y, g1, g2, g3), (ty, t1, t2, t3) = outs
    assert lazy(g1) and lazy(g2)
    for lib, t in ((tg, x), (torch, tx)):
        with lib.no_grad():
            t.add_(1)
            t.mul_(2)
    for a, b in zip((g1, g2), (t1, t2)):
        x.grad = tx.grad = None
        try:
            b.sum().backward(retain_graph=True)
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                a.sum().backward(retain_graph=True)
        else:
            a.sum().backward(retain_graph=True)
            close(x.grad, tx.grad)
    for a, b in zip((y, g1, g2, g3), (ty, t1, t2, t3)):
        close(a, b)


@pytest.mark.parametrize("source", ["mul", "var_mean"])
def test_graphs_left_for_later_keep_a_non_leaf_inputs_place_as_taken(source):
    """A non-leaf input written in place under grad mode after the chain gets another grad_fn
    (and output_nr): the graphs of results left for later connect where it was when taken,
    as torch's saved graph does, so the gradient reaching its base is torch's."""
    rng = np.random.default_rng(37)
    ba = rng.standard_normal((4, 6))
    wa = rng.standard_normal(6)
    cl = tg.compile(tanh2(tg))
    outs = []
    for lib, f in ((tg, cl), (torch, tanh2(torch))):
        base, w = lib.tensor(ba, requires_grad=True), lib.tensor(wa, requires_grad=True)
        for _ in range(SPECULATES + 1):
            x = base[0] * 2 if source == "mul" else lib.var_mean(base, dim=0)[1]
            y = f(x)
            (g1,) = lib.autograd.grad(y, x, create_graph=True)
            (g2,) = lib.autograd.grad((g1 * g1).sum(), x, create_graph=True)
            (g3,) = lib.autograd.grad(g2.sum(), x, retain_graph=True)
        outs.append((base, w, x, y, g1, g2, g3))
    (base, w, x, y, g1, g2, g3), (tbase, tw, tx, ty, t1, t2, t3) = outs
    assert lazy(g1)
    x.mul_(w)
    tx.mul_(tw)
    for a, b in zip((g1, g2), (t1, t2)):
        base.grad = tbase.grad = None
        a.sum().backward(retain_graph=True)
        b.sum().backward(retain_graph=True)
        close(base.grad, tbase.grad)
        assert w.grad is None and tw.grad is None
    for a, b in zip((y, g1, g2, g3), (ty, t1, t2, t3)):
        close(a, b)


@pytest.mark.parametrize("when", ["before", "late", "mid", "after"])
def test_hooks_of_a_non_leaf_input_run_as_torchs(when):
    """register_hook on a non-leaf keeps the hook on its grad_fn, not on the tensor: a chain
    taking such an input (hooked before the call, on a late call, between two grad steps) runs
    its steps as written, so each hook runs as in torch and changes the gradients as in torch;
    a hook registered after the chain does not run while its graph is rebuilt."""
    xs = np.random.default_rng(38).standard_normal(6)
    cl = tg.compile(tanh2(tg))
    res = []
    for lib, f in ((tg, cl), (torch, tanh2(torch))):
        base = lib.tensor(xs, requires_grad=True)
        calls, outs = [], []
        for i in range(CALLS + 1):
            x = base * 2

            def hook():
                x.register_hook(lambda g: (calls.append(i), g * 10)[1])
            if when == "before" or (when == "late" and i == CALLS - 1):
                hook()
            y = f(x)
            (g1,) = lib.autograd.grad(y, x, create_graph=True)
            if when == "mid" and i >= SPECULATES + 1:
                hook()
            (g2,) = lib.autograd.grad((g1 * g1).sum(), x, create_graph=True)
            (g3,) = lib.autograd.grad(g2.sum(), x, retain_graph=True)
            outs.append((y, g1, g2, g3))
        if when == "after":
            hook()
        base.grad = None
        g1.sum().backward()
        res.append((outs, calls, base.grad))
    (outs, calls, grad), (touts, tcalls, tgrad) = res
    for o, t in zip(outs, touts):
        for a, b in zip(o, t):
            close(a, b)
    assert calls == tcalls
    close(grad, tgrad)


def test_retain_grad_of_a_non_leaf_input_between_grad_steps_is_torchs():
    """retain_grad on a non-leaf input between two grad steps: the steps before it are made
    real as they first ran, without it, so its .grad holds the later steps' gradients only."""
    xs = np.random.default_rng(39).standard_normal(5)
    cl = tg.compile(tanh2(tg))
    res = []
    for lib, f in ((tg, cl), (torch, tanh2(torch))):
        base = lib.tensor(xs, requires_grad=True)
        out = []
        for i in range(CALLS):
            x = base * 2
            y = f(x)
            (g1,) = lib.autograd.grad(y, x, create_graph=True)
            if i >= SPECULATES:
                x.retain_grad()
            (g2,) = lib.autograd.grad((g1 * g1).sum(), x, create_graph=True)
            kept = None if x.grad is None else x.grad.detach().clone()
            (g3,) = lib.autograd.grad(g2.sum(), x)
            out.append((y, g1, g2, g3, kept, x.grad))
        res.append(out)
    for o, t in zip(*res):
        assert (o[4] is None) == (t[4] is None) and (o[5] is None) == (t[5] is None)
        for a, b in zip(o, t):
            if a is not None:
                close(a, b)


@pytest.mark.parametrize("read_first", [False, True])
def test_a_non_leaf_input_detached_in_place_after_the_chain_keeps_its_graph(read_first):
    """detach_() on a non-leaf input after the chain: the results' graphs, made when first
    needed, connect where the input was when taken, as torch's graph does (they made it a
    leaf: no gradient reached its base)."""
    xs = np.random.default_rng(40).standard_normal(6)
    cl = tg.compile(tanh2(tg))
    res = []
    for lib, f in ((tg, cl), (torch, tanh2(torch))):
        base = lib.tensor(xs, requires_grad=True)
        for i in range(CALLS):
            x = base * 2
            y = f(x)
            (g1,) = lib.autograd.grad(y, x, create_graph=True)
            (g2,) = lib.autograd.grad((g1 * g1).sum(), x, create_graph=True)
            (g3,) = lib.autograd.grad(g2.sum(), x, retain_graph=True)
            if read_first and i == SPECULATES:
                y.item()
        x.detach_()
        grads = []
        for t in (g1, g2):
            base.grad = None
            t.sum().backward(retain_graph=True)
            grads.append(base.grad)
        res.append(grads + [y, g1, g2, g3])
    for a, b in zip(*res):
        assert a is not None
        close(a, b)


def test_a_parameter_frozen_after_the_chain_keeps_the_graphs_edges_to_it():
    """A compiled module's parameter frozen (requires_grad_(False)) after a chain that took it:
    the results' graphs, made when first needed, are the ones the steps made while it required
    grad, as torch's: a backward reaches it (the last grad step raised, replayed with it frozen)."""
    rng = np.random.default_rng(41)
    m, tm = twin_mlp(5, 4)
    cm = tg.compile(m)
    xa = rng.standard_normal((6, 5))
    res = []
    for lib, f, mod in ((tg, cm, m), (torch, tm, tm)):
        ps = list(mod.parameters())
        for _ in range(CALLS):
            x = lib.tensor(xa, requires_grad=True)
            out = f(x).sum()
            (gx,) = lib.autograd.grad(out, x, create_graph=True)
            pen = (gx ** 2).sum()
            gs = lib.autograd.grad(pen, ps, retain_graph=True, allow_unused=True)
        mod[0].weight.requires_grad_(False)
        got = []
        for t in (out, gx):
            for p in ps:
                p.grad = None
            t.sum().backward(retain_graph=True)
            got.append([p.grad for p in ps])
        res.append((got, [out, gx, pen] + [g for g in gs if g is not None]))
    (got, vals), (tgot, tvals) = res
    for a, b in zip(vals, tvals):
        close(a, b)
    for row, trow in zip(got, tgot):
        for a, b in zip(row, trow):
            assert (a is None) == (b is None)
            if a is not None:
                close(a, b)


@pytest.mark.parametrize("use", ["mul", "add"])
def test_a_step_taking_the_previous_calls_gradient_differentiates_through_it(use):
    """s = (g1 * g1_prev).sum(), with g1_prev the previous call's gradient: its graph reaches x,
    so grad(s, x) has a term through it. The whole chain, a function of its inputs, took
    g1_prev as an input of its own and left that term out (a Hessian-vector product off by
    half); a step's tensor with a graph of its own now ends the chain there, and the steps run
    as written."""
    xs = np.random.default_rng(42).standard_normal(6)
    cl = tg.compile(tanh2(tg))
    res = []
    for lib, f in ((tg, cl), (torch, tanh2(torch))):
        x = lib.tensor(xs, requires_grad=True)
        prev, out = None, []
        for _ in range(CALLS + 1):
            y = f(x)
            (g1,) = lib.autograd.grad(y, x, create_graph=True)
            other = g1 if prev is None else prev
            s = (g1 * other).sum() if use == "mul" else (g1 + other * 0.5).sum()
            (h,) = lib.autograd.grad(s, x, retain_graph=True)
            out.append((y, g1, h))
            prev = g1
            with lib.no_grad():
                x.mul_(0.9)
        res.append(out)
    for o, t in zip(*res):
        for a, b in zip(o, t):
            close(a, b)


@pytest.mark.parametrize("wrt", ["base", "both", "x_then_base"])
def test_a_non_leaf_argument_made_from_another_argument_is_differentiated_through(wrt):
    """f(x, base) with x = base * 2: the derivative with respect to base has a term through x,
    outside the call. The whole chain, a function of x and base, took them as independent and
    left that term out; a non-leaf input that requires grad beside another one now keeps the
    chain from speculating (the steps run as written)."""
    xs = np.random.default_rng(43).standard_normal(5)

    def fs(m):
        return lambda x, b: (m.tanh(x * b) ** 2).sum()
    cl = tg.compile(fs(tg))
    res = []
    for lib, f in ((tg, cl), (torch, fs(torch))):
        base = lib.tensor(xs, requires_grad=True)
        out = []
        for _ in range(CALLS + 1):
            x = base * 2
            y = f(x, base)
            if wrt == "base":
                (g1,) = lib.autograd.grad(y, base, create_graph=True)
                (h,) = lib.autograd.grad(g1.sum(), base)
            elif wrt == "both":
                g1, gb = lib.autograd.grad(y, [x, base], create_graph=True)
                (h,) = lib.autograd.grad((g1 * gb).sum(), base)
            else:
                (g1,) = lib.autograd.grad(y, x, create_graph=True)
                (h,) = lib.autograd.grad(g1.sum(), base)
            out.append((y, g1, h))
        res.append(out)
    for o, t in zip(*res):
        for a, b in zip(o, t):
            close(a, b)


@pytest.mark.parametrize("write", ["mul_", "iadd", "grad_result_mul_"])
def test_an_in_place_op_on_a_pending_result_settles_the_chain_first(write):
    """An in-place op's check reads the tensor's grad_fn before anything else; on a pending
    tensor that read went past the chain's slot properties (Tensor._grad_fn is the slot's own
    descriptor) and raised AttributeError on the slot not set yet."""
    xs = np.random.default_rng(44).standard_normal(5)
    cl = tg.compile(tanh2(tg))
    res = []
    for lib, f in ((tg, cl), (torch, tanh2(torch))):
        x = lib.tensor(xs, requires_grad=True)
        out = []
        for i in range(CALLS):
            y = f(x)
            (g,) = lib.autograd.grad(y, x, create_graph=True)
            t = g.sum() * 2
            if i == CALLS - 2:
                if write == "mul_":
                    t.mul_(3)
                elif write == "iadd":
                    t += 1.5
                else:
                    g.mul_(3)
            (h,) = lib.autograd.grad(t * g.sum(), x)
            out.append((y, g, t, h))
        res.append(out)
    for o, t in zip(*res):
        for a, b in zip(o, t):
            close(a, b)
    y = cl(tg.tensor(xs, requires_grad=True))
    assert pending(y)
    with pytest.raises(RuntimeError, match="can't delete the attribute 'requires_grad'"):
        del y.requires_grad


@pytest.mark.parametrize("write", ["data_mul_", "data_assigned", "detach_numpy", "param_data_mul_"])
def test_a_write_no_version_counter_sees_between_the_call_and_the_last_step_keeps_eagers_values(write):
    """A write through .data (or numpy) of a chain's input after its compiled call and before
    its last step: eager's call read the input before the write; the whole chain read it at the
    last step, after, and gave the call's result (and its derivatives) the written values. A
    speculated chain whose input memory is handed out so now runs its steps so far first."""
    xs = np.random.default_rng(45).standard_normal(6)
    ws = np.random.default_rng(46).standard_normal(6)
    res = []
    for lib in (tg, torch):
        w = lib.tensor(ws, requires_grad=True)

        def f(x):
            if write == "param_data_mul_":
                return (lib.tanh(x * w) ** 2).sum()
            return (lib.tanh(x) ** 2).sum() * 1.5
        cl = tg.compile(f) if lib is tg else f
        x = lib.tensor(xs, requires_grad=True)
        out = []
        for i in range(CALLS):
            y = cl(x)
            (g,) = lib.autograd.grad(y, x, create_graph=True)
            if i == CALLS - 2:
                if lib is tg:
                    assert pending(y)
                if write == "data_mul_":
                    x.data.mul_(2)
                elif write == "data_assigned":
                    x.data = lib.tensor(xs * 2)
                elif write == "detach_numpy":
                    x.detach().numpy()[:] *= 2
                else:
                    w.data.mul_(2)
            s = g.sum()
            # (h after a write to w differs between compiled and eager: w's values the compiled
            # backward recomputes from are the written ones, not those eager's graph saved)
            (h,) = lib.autograd.grad(s, x) if write != "param_data_mul_" else (None,)
            out.append((y, g, s) if h is None else (y, g, s, h))
            with lib.no_grad():
                x.copy_(lib.tensor(xs))
                w.copy_(lib.tensor(ws))
        res.append(out)
    for o, t in zip(*res):
        for a, b in zip(o, t):
            close(a, b)


def test_an_input_numpy_code_holds_written_mid_chain_raises_and_never_gives_other_values():
    """A tensor made with from_numpy: numpy code can write its memory unseen by any version
    counter, before the compiled call as after it. A speculated chain keeps a copy of such an
    input as taken, and a write before the last step raises its in-place error (the write
    before the last step of the module's docstring), never a result of the written values."""
    xs = np.random.default_rng(47).standard_normal(6)
    buf = np.random.default_rng(48).standard_normal(6)
    v = tg.from_numpy(buf)
    tv = torch.tensor(buf)
    cl = tg.compile(lambda x, v: (tg.tanh(x * v) ** 2).sum())
    x, tx = pair(xs)
    ty = (torch.tanh(tx * tv) ** 2).sum()
    (t1,) = torch.autograd.grad(ty, tx, create_graph=True)
    (t2,) = torch.autograd.grad((t1 * tv).sum(), tx)
    for i in range(CALLS):
        y = cl(x, v)
        (g,) = tg.autograd.grad(y, x, create_graph=True)
        if i == CALLS - 1:
            assert pending(y)
            buf *= 2
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                tg.autograd.grad((g * v).sum(), x)
            return
        (h,) = tg.autograd.grad((g * v).sum(), x)       # (unwritten: it speculates, as any input)
        for a, b in ((y, ty), (g, t1), (h, t2)):
            close(a, b)


def test_a_result_whose_graph_cannot_be_rebuilt_keeps_the_grad_fn_name_eager_gives_it():
    """A training step torch's way (loss, gradient penalty, an update of the weights in place),
    the penalty's grad_fn read after the update: its graph cannot be made again (the weights it
    was made from are written), and its grad_fn, which raises the in-place error when a backward
    reaches it (the module docstring's), was named CompiledFunctionBackward where eager's is
    SumBackward0."""
    xa = np.random.default_rng(49).standard_normal(5)
    wa = np.random.default_rng(50).standard_normal((5, 3))
    res = []
    for lib in (tg, torch):
        x, w = lib.tensor(xa), lib.tensor(wa, requires_grad=True)

        def f(x, w):
            return (lib.tanh(x @ w) ** 2).sum()
        cl = tg.compile(f) if lib is tg else f
        out = []
        for i in range(CALLS):
            loss = cl(x, w)
            (gw,) = lib.autograd.grad(loss, w, create_graph=True)
            pen = (gw ** 2).sum()
            (h,) = lib.autograd.grad(loss + pen, w, retain_graph=True)
            with lib.no_grad():
                w -= 0.01 * h
            out.append((loss.item(), pen, h, type(pen.grad_fn).__name__, type(gw.grad_fn).__name__))
        res.append(out)
    for o, t in zip(*res):
        close(o[0], t[0])
        close(o[1], t[1])
        close(o[2], t[2])
        assert o[3] == t[3] == "SumBackward0"
        assert o[4] == "CompiledFunctionBackward"      # (eager's: a chain of torch's nodes)


@pytest.mark.parametrize("use", ["retain_grad", "hook", "grad_wrt_result"])
def test_the_last_steps_result_that_requires_grad_has_eagers_graph(use):
    """A chain ending with a tensor method whose result requires grad (total = loss + pen, then
    total.backward()): its result came with the whole program's grad_fn, which reaches the
    chain's inputs alone. retain_grad or a hook on pen, or a derivative with respect to it,
    left pen.grad None, the hook uncalled, or raised 'not used in the graph', where torch
    gives 1; the grad_fn was CompiledFunctionBackward, not AddBackward0."""
    xs = np.random.default_rng(51).standard_normal(5)
    res = []
    for lib in (tg, torch):
        f = lambda x: (lib.tanh(x) ** 3).sum()      # noqa: E731
        cl = tg.compile(f) if lib is tg else f
        x = lib.tensor(xs, requires_grad=True)
        out = []
        for i in range(CALLS):
            x.grad = None
            loss = cl(x)
            (g,) = lib.autograd.grad(loss, x, create_graph=True)
            pen = (g * g).sum()
            total = loss + pen
            seen = []
            if use == "retain_grad":
                pen.retain_grad()
                total.backward()
                got = [pen.grad, x.grad]
            elif use == "hook":
                pen.register_hook(lambda gr: seen.append(gr.item()))
                total.backward()
                got = [x.grad]
            else:
                got = list(lib.autograd.grad(total.cos(), [pen, g, x]))      # (cos: no step)
            out.append((got, seen, type(total.grad_fn).__name__, total))
        res.append(out)
    for (got, seen, name, total), (tgot, tseen, tname, ttotal) in zip(*res):
        for a, b in zip(got, tgot):
            close(a, b)
        assert seen == tseen and name == tname == "AddBackward0"
        close(total, ttotal)


def test_the_last_steps_create_graph_gradient_has_eagers_graph_through_the_calls_outputs():
    """A chain ending with a create_graph gradient, retain_grad on an output of the call after
    it, then a backward of the gradient: its graph goes through that output (exp's result,
    which exp's derivative reads) in eager; the whole program's grad_fn did not, and left the
    output's .grad None where torch's is a tensor."""
    xs = np.random.default_rng(52).standard_normal(4)
    res = []
    for lib in (tg, torch):
        f = lambda x: ((lib.tanh(x) ** 3).sum(), lib.exp(x * 0.3))      # noqa: E731
        cl = tg.compile(f) if lib is tg else f
        x = lib.tensor(xs, requires_grad=True)
        out = []
        for i in range(CALLS):
            x.grad = None
            y, e = cl(x)
            (g,) = lib.autograd.grad(y, x, create_graph=True)
            (h,) = lib.autograd.grad((g * e).sum(), x, create_graph=True)
            e.retain_grad()
            h.sum().backward()
            out.append((h, e.grad, x.grad))
        res.append(out)
    for o, t in zip(*res):
        for a, b in zip(o, t):
            close(a, b)

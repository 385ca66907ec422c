"""Random programs, eager and compiled, against eager tracegrad and torch.

Each program is drawn from a fixed seed as a list of instructions over its inputs
(elementwise ops, broadcasting binaries, reductions with dim/keepdim, matmul, shape ops,
softmax/log_softmax, where, max/min with dim, pow); some inputs are unused, some do
not require grad. The same instructions run under torch, eager tracegrad and
`tracegrad.compile`, in float32 and float64, and are compared:

- values of every output;
- order 1: `autograd.grad(..., allow_unused=True)` of a weighted sum of the outputs, and
  of the first output alone: each gradient equal, and None exactly where torch's is None
  (an input that is not part of the autograd graph), zeros where torch's is zeros;
- order 2, torch's way: `autograd.grad(create_graph=True)` through the compiled call, then
  the gradient of a weighted sum of those gradients;
- order 2 inside the compiled function: `autograd.grad(create_graph=True)` traced into
  the program, then differentiated again outside it.

At order 2 torch's None/zeros choice follows the form of each derivative formula (its
ReLU backward reads the result, so the second derivative is zeros; a rule written with a
comparison gives None); there the compiled result must match eager tracegrad's exactly
and torch's values, with None read as zeros.

CI runs TRACEGRAD_RANDOM_PROGRAMS programs (default 50, seeds 0..49) in each dtype, 100
program runs in all (about 45 s of one core); all 500 of the bar:
TRACEGRAD_RANDOM_PROGRAMS=500 python -m pytest -q tests/test_compile_random.py
"""
import os
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

N_PROGRAMS = int(os.environ.get("TRACEGRAD_RANDOM_PROGRAMS", "50"))

UNARY = ["neg", "abs", "exp_tanh", "sin", "cos", "tanh", "sigmoid", "relu", "log_abs1", "sqrt_abs1", "square",
         "floor", "sign", "detach", "cmp_float", "scale"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "where"]
REDUCE = ["sum", "mean", "amax", "amin", "logsumexp", "max_dim", "min_dim", "softmax", "log_softmax", "var"]
SHAPE = ["transpose", "reshape", "unsqueeze", "permute", "expand", "flip", "getitem", "cat"]


# -- programs: instructions over shapes, replayed under either module -----------------------------

def _bshape(a, b):
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def draw_program(seed):
    """(input shapes, requires_grad flags, instructions, output indices) for one seed."""
    r = np.random.default_rng(seed)
    base = [int(s) for s in r.integers(1, 5, 2)]
    choices = [tuple(base), (base[1],), (base[0], 1), (1, base[1]), (), (base[1], base[0]), (2, *base)]
    n_in = int(r.integers(1, 5))
    shapes = [choices[int(r.integers(0, len(choices)))] for _ in range(n_in)]
    req = [bool(r.random() < 0.8) for _ in range(n_in)]
    if not any(req):
        req[0] = True
    vals = list(shapes)            # the shape of every value so far
    ins = []
    n_ops = int(r.integers(2, 9))
    # inputs beyond the first may stay unused: the program reads from a prefix of them
    live = 1 + int(r.integers(0, n_in))
    pool = list(range(live))
    for _ in range(n_ops):
        x = pool[int(r.integers(0, len(pool)))]
        sx = vals[x]
        kind = int(r.integers(0, 5))
        out = None
        if kind == 0:
            ins.append(("unary", UNARY[int(r.integers(0, len(UNARY)))], (x,), {}))
            out = sx
        elif kind == 1:
            y = pool[int(r.integers(0, len(pool)))]
            name = BINARY[int(r.integers(0, len(BINARY)))]
            s = _bshape(sx, vals[y])
            if s is None:
                ins.append(("unary", "tanh", (x,), {}))
                out = sx
            else:
                ins.append(("binary", name, (x, y), {}))
                out = s
        elif kind == 2 and len(sx):
            name = REDUCE[int(r.integers(0, len(REDUCE)))]
            dim = int(r.integers(-len(sx), len(sx)))
            keep = bool(r.integers(0, 2))
            if name in ("softmax", "log_softmax"):
                out = sx
            elif keep:
                out = tuple(1 if i == dim % len(sx) else d for i, d in enumerate(sx))
            else:
                out = tuple(d for i, d in enumerate(sx) if i != dim % len(sx))
            if name == "var" and sx[dim] < 2:
                name = "sum"
            ins.append(("reduce", name, (x,), {"dim": dim, "keepdim": keep}))
        elif kind == 3:
            # matmul with a value whose last dim matches, or a fresh product with its transpose
            cands = [y for y in pool if len(vals[y]) >= 1 and len(sx) >= 1 and vals[y][0 if len(vals[y]) == 1 else -2]
                     == sx[-1] and _mm_shape(sx, vals[y]) is not None]
            if cands:
                y = cands[int(r.integers(0, len(cands)))]
                ins.append(("matmul", "matmul", (x, y), {}))
                out = _mm_shape(sx, vals[y])
            else:
                ins.append(("unary", "sigmoid", (x,), {}))
                out = sx
        else:
            name = SHAPE[int(r.integers(0, len(SHAPE)))]
            out, params = _shape_op_plan(name, sx, r)
            if out is None:
                name, out, params = "unary", sx, {}
                ins.append(("unary", "neg", (x,), params))
            else:
                ins.append(("shape", name, (x,), params))
        vals.append(out)
        pool.append(len(vals) - 1)
    produced = list(range(n_in, len(vals)))
    outs = [produced[-1]]
    if len(produced) > 1 and r.random() < 0.5:
        outs.append(produced[int(r.integers(0, len(produced) - 1))])
    return shapes, req, ins, outs


def _mm_shape(a, b):
    try:
        return np.matmul(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        return None


def _shape_op_plan(name, s, r):
    n = len(s)
    if name == "transpose" and n >= 2:
        return (*s[:-2], s[-1], s[-2]), {}
    if name == "reshape":
        return (int(np.prod(s)),), {}
    if name == "unsqueeze":
        d = int(r.integers(0, n + 1))
        return (*s[:d], 1, *s[d:]), {"dim": d}
    if name == "permute" and n >= 1:
        perm = [int(i) for i in r.permutation(n)]
        return tuple(s[i] for i in perm), {"perm": perm}
    if name == "expand":
        return (3, *s), {}
    if name == "flip" and n >= 1:
        return s, {"dim": int(r.integers(0, n))}
    if name == "getitem" and n >= 1 and s[0] > 1:
        return (s[0] - 1, *s[1:]), {}
    if name == "cat" and n >= 1:
        return (2 * s[0], *s[1:]), {}
    return None, None


def apply_op(m, op, name, args, params):
    x = args[0]
    if op == "unary":
        if name == "exp_tanh":
            return m.exp(m.tanh(x))
        if name == "log_abs1":
            return m.log(x.abs() + 1)
        if name == "sqrt_abs1":
            return m.sqrt(x.abs() + 1)
        if name == "square":
            return x * x
        if name == "floor":
            return m.floor(x * 2)
        if name == "detach":
            return x.detach() * 2
        if name == "cmp_float":          # through a comparison: no gradient path (torch: not in the graph)
            return (x > 0).to(x.dtype) + 0.5
        if name == "scale":
            return x * 0.5 + 1
        return getattr(m, name)(x)
    if op == "binary":
        y = args[1]
        if name == "div":
            return x / (y.abs() + 1)
        if name == "pow":
            return (x.abs() + 0.5) ** m.tanh(y)
        if name == "where":
            return m.where(x > y, x, y * 2)
        return getattr(m, name)(x, y)
    if op == "matmul":
        return m.matmul(x, args[1])
    if op == "reduce":
        dim, keep = params["dim"], params["keepdim"]
        if name == "softmax":
            return m.softmax(x, dim)
        if name == "log_softmax":
            return m.log_softmax(x, dim)
        if name in ("max_dim", "min_dim"):
            return getattr(x, name[:3])(dim, keepdim=keep).values
        if name == "var":
            return x.var(dim, keepdim=keep)
        return getattr(x, name)(dim, keepdim=keep)
    if op == "shape":
        if name == "transpose":
            return x.transpose(-1, -2)
        if name == "reshape":
            return x.reshape(-1)
        if name == "unsqueeze":
            return x.unsqueeze(params["dim"])
        if name == "permute":
            return x.permute(*params["perm"])
        if name == "expand":
            return x.unsqueeze(0).expand(3, *x.shape)
        if name == "flip":
            return x.flip(params["dim"])
        if name == "getitem":
            return x[1:]
        if name == "cat":
            return m.cat([x, x * 2], dim=0)
    raise AssertionError(op)


def run(m, plan, xs):
    shapes, req, ins, outs = plan
    vals = list(xs)
    for op, name, args, params in ins:
        vals.append(apply_op(m, op, name, [vals[a] for a in args], params))
    return tuple(vals[o] for o in outs)


# -- comparing ------------------------------------------------------------------------------------

EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}


def _np(t):
    if t is None:
        return None
    return t.detach().numpy(force=True) if isinstance(t, torch.Tensor) else t.detach().numpy()


def assert_close(got, want, dtype, what, none_is_zero=False):
    """Norm-wise relative error: max |got - want| within a multiple of the dtype's epsilon
    of the largest magnitude (the conditioning of sums, matmuls and reductions over a few
    terms; every op here is smooth or piecewise linear on bounded values)."""
    if none_is_zero:
        if got is None and want is not None:
            assert not np.any(_np(want)), f"{what}: None where the reference is {_np(want)}"
            return
        if want is None and got is not None:
            assert not np.any(_np(got)), f"{what}: {_np(got)} where the reference is None"
            return
    assert (got is None) == (want is None), f"{what}: {'None' if got is None else 'a tensor'} where the " \
                                            f"reference gives {'None' if want is None else 'a tensor'}"
    if got is None:
        return
    a, b = _np(got), _np(want)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    assert str(a.dtype) == dtype, f"{what}: dtype {a.dtype}, expected {dtype}"
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1.0)
    tol = 2000 * EPS[dtype] * scale
    err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
    assert err <= tol, f"{what}: max error {err:.3g} > {tol:.3g}\ngot  {a}\nwant {b}"


def weights(shapes, seed, dtype):
    r = np.random.default_rng(seed + 10_000)
    return [r.standard_normal(s).astype(dtype) for s in shapes]


def order1(m, outs, xs, wts, first_only=False):
    """Gradients of a weighted sum of the outputs (or of the first output alone)."""
    sel = outs[:1] if first_only else outs
    loss = sum(((o * w).sum() for o, w in zip(sel, wts)), m.zeros((), dtype=outs[0].dtype))
    wrt = [x for x in xs if x.requires_grad]
    if not loss.requires_grad:
        return None
    return m.autograd.grad(loss, wrt, allow_unused=True, create_graph=not first_only)


def order2(m, grads, xs, vs):
    """Gradients of sum(g_i * v_i) over the first-order gradients that require grad."""
    wrt = [x for x in xs if x.requires_grad]
    terms = [(g * v).sum() for g, v in zip(grads, vs) if g is not None and g.requires_grad]
    if not terms:
        return None
    return m.autograd.grad(sum(terms[1:], terms[0]), wrt, allow_unused=True)


def inside(m, plan, out_weights, seed_v):
    """A function that takes its first derivative itself: f(xs) -> (loss, sum(grad * v))."""
    def f(*xs):
        outs = run(m, plan, xs)
        loss = sum(((o * m.tensor(w)).sum() for o, w in zip(outs, out_weights)),
                   m.zeros((), dtype=outs[0].dtype))
        wrt = [x for x in xs if x.requires_grad]
        gs = m.autograd.grad(loss, wrt, create_graph=True, allow_unused=True)
        s = m.zeros((), dtype=outs[0].dtype)
        for g, x, v in zip(gs, wrt, seed_v):
            if g is not None:
                s = s + (g * m.tensor(v)).sum()
        return loss, s
    return f


def check_program(seed, dtype, backend="auto", higher=True):
    plan = draw_program(seed)
    shapes, req, ins, outs = plan
    r = np.random.default_rng(seed)
    arrays = [(r.standard_normal(s) * 1.5).astype(dtype) for s in shapes]
    tdt = getattr(torch, dtype)
    xt = [torch.tensor(a, dtype=tdt, requires_grad=q) for a, q in zip(arrays, req)]
    xe = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    xc = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    compiled = tg.compile(lambda *xs: run(tg, plan, xs), fullgraph=True, backend=backend)
    ot, oe, oc = run(torch, plan, xt), run(tg, plan, xe), compiled(*xc)
    for k, (a, b, c) in enumerate(zip(oc, oe, ot)):
        assert_close(a, b, dtype, f"seed {seed} {dtype} output {k} (compiled vs eager)")
        assert_close(a, c, dtype, f"seed {seed} {dtype} output {k} (compiled vs torch)")
        assert a.requires_grad == c.requires_grad, f"seed {seed}: output {k} requires_grad"
    out_w = weights([tuple(o.shape) for o in ot], seed, dtype)
    wt = [torch.tensor(w) for w in out_w]
    we = [tg.tensor(w) for w in out_w]
    # order 1, the first output alone: per-output None
    gt = order1(torch, ot, xt, wt, first_only=True)
    ge = order1(tg, oe, xe, we, first_only=True)
    gc = order1(tg, oc, xc, we, first_only=True)
    if gt is None:
        assert ge is None and gc is None
    else:
        for i, (a, b, c) in enumerate(zip(gc, ge, gt)):
            assert_close(a, c, dtype, f"seed {seed} {dtype} d out0 / d input {i} (compiled vs torch)")
            assert_close(a, b, dtype, f"seed {seed} {dtype} d out0 / d input {i} (compiled vs eager)")
    if not higher:
        return
    # order 1 and 2 through the compiled call (torch's way)
    ot, oe, oc = run(torch, plan, xt), run(tg, plan, xe), compiled(*xc)
    gt, ge, gc = order1(torch, ot, xt, wt), order1(tg, oe, xe, we), order1(tg, oc, xc, we)
    if gt is None:
        assert ge is None and gc is None, f"seed {seed}: the loss requires grad in tracegrad only"
        return
    for i, (a, b, c) in enumerate(zip(gc, ge, gt)):
        assert_close(a, c, dtype, f"seed {seed} {dtype} grad {i} (compiled vs torch)")
        assert_close(a, b, dtype, f"seed {seed} {dtype} grad {i} (compiled vs eager)")
    vs = weights([tuple(g.shape) for g in gt if g is not None] or [()], seed + 1, dtype)
    it = iter(vs)
    vs = [None if g is None else next(it) for g in gt]
    ht = order2(torch, gt, xt, [None if v is None else torch.tensor(v) for v in vs])
    he = order2(tg, ge, xe, [None if v is None else tg.tensor(v) for v in vs])
    hc = order2(tg, gc, xc, [None if v is None else tg.tensor(v) for v in vs])
    assert (he is None) == (hc is None), f"seed {seed}: first derivatives require grad in one mode only"
    if he is not None:
        for i, (a, b) in enumerate(zip(hc, he)):
            assert_close(a, b, dtype, f"seed {seed} {dtype} second derivative {i} (compiled vs eager)")
            if ht is not None:
                assert_close(a, ht[i], dtype, f"seed {seed} {dtype} second derivative {i} (compiled vs torch)",
                             none_is_zero=True)
    # order 2 with the first derivative taken inside the compiled function
    # one direction per input that requires grad (vs has one per such input, as the gradients)
    seed_v = [v if v is not None else np.zeros(1, dtype) for v in vs]
    ff = inside(tg, plan, out_w, seed_v)
    ft = inside(torch, plan, out_w, seed_v)
    fc = tg.compile(ff, fullgraph=True, backend=backend)
    xt2 = [torch.tensor(a, dtype=tdt, requires_grad=q) for a, q in zip(arrays, req)]
    xc2 = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    xe2 = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    (lt, st), (lc, sc), (le, se) = ft(*xt2), fc(*xc2), ff(*xe2)
    assert_close(lc, lt, dtype, f"seed {seed} {dtype} loss (inside)")
    assert_close(sc, st, dtype, f"seed {seed} {dtype} sum(grad * v) (inside, compiled vs torch)")
    assert_close(sc, se, dtype, f"seed {seed} {dtype} sum(grad * v) (inside, compiled vs eager)")
    assert sc.requires_grad == se.requires_grad, f"seed {seed}: sum(grad * v) requires_grad"
    if se.requires_grad:
        wrt_t = [x for x in xt2 if x.requires_grad]
        wrt_c = [x for x in xc2 if x.requires_grad]
        wrt_e = [x for x in xe2 if x.requires_grad]
        kt = torch.autograd.grad(st, wrt_t, allow_unused=True) if st.requires_grad else [None] * len(wrt_t)
        kc = tg.autograd.grad(sc, wrt_c, allow_unused=True)
        ke = tg.autograd.grad(se, wrt_e, allow_unused=True)
        for i, (a, b, c) in enumerate(zip(kc, ke, kt)):
            assert_close(a, b, dtype, f"seed {seed} {dtype} d sum(grad * v) / d input {i} (inside, vs eager)")
            assert_close(a, c, dtype, f"seed {seed} {dtype} d sum(grad * v) / d input {i} (inside, vs torch)",
                         none_is_zero=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_random_programs_compiled_match_eager_and_torch(dtype):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("error")          # a fallback to eager would hide the compiled path
        for seed in range(N_PROGRAMS):
            check_program(seed, dtype)


TRITON_SCRIPT = """
import sys, warnings
sys.path.insert(0, {tests!r})
import numpy as np
import test_compile_random as T
seeds = [s for s in range(200) if T.has_unused_input(T.draw_program(s))][:{n}]
with warnings.catch_warnings(), np.errstate(all="ignore"):
    warnings.simplefilter("error", UserWarning)
    for k, seed in enumerate(seeds):
        T.check_program(seed, "float32", backend="triton", higher=k < 2)   # order 2 on the first two
print("checked", len(seeds))
"""


def has_unused_input(plan):
    shapes, req, ins, outs = plan
    read = {a for _, _, args, _ in ins for a in args}
    return any(q and i not in read for i, q in enumerate(req))


def test_random_programs_with_unused_inputs_on_the_triton_backend():
    """The same values, gradients and None gradients through the Triton lowering, run by
    Triton's CPU interpreter (a subprocess: TRITON_INTERPRET is read at import)."""
    pytest.importorskip("triton")
    import subprocess
    import sys
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.path.dirname(tests))
    n = int(os.environ.get("TRACEGRAD_RANDOM_TRITON_PROGRAMS", "6"))
    r = subprocess.run([sys.executable, "-c", TRITON_SCRIPT.format(tests=tests, n=n)], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"checked {n}" in r.stdout


def test_the_programs_exercise_unused_inputs_and_inputs_without_grad():
    """The draw is not degenerate: unused inputs, inputs without grad and every op kind occur."""
    unused = no_grad = 0
    kinds = set()
    for seed in range(N_PROGRAMS):
        shapes, req, ins, outs = draw_program(seed)
        read = {a for _, _, args, _ in ins for a in args}
        unused += any(i not in read for i in range(len(shapes)))
        no_grad += not all(req)
        kinds |= {name for _, name, _, _ in ins}
    assert unused >= N_PROGRAMS // 10 and no_grad >= N_PROGRAMS // 10
    assert kinds >= set(UNARY) | set(BINARY) | set(REDUCE) | set(SHAPE) | {"matmul"}


# -- the cases behind the random programs, one by one ----------------------------------------------

def _pair(seed=0, shape=(3,)):
    a = np.random.default_rng(seed).standard_normal(shape)
    return tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _same_grads(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert_close(a, b, "float64", "gradient")


@pytest.mark.parametrize("case", ["unused", "detached", "comparison", "integer", "times_zero", "sign"])
def test_gradient_of_an_input_outside_the_graph_is_none_as_in_torch(case):
    def f(m, x, y):
        if case == "unused":
            return (x * 2).sum()
        if case == "detached":
            return (x * y.detach()).sum()
        if case == "comparison":
            return (x * (y > 0).to(x.dtype)).sum()
        if case == "integer":
            return (x * y.argmax()).sum()
        if case == "times_zero":         # part of the graph, structurally zero: zeros, not None
            return (x + y * 0).sum()
        return (x * m.sign(y)).sum()     # sign has a (zero) derivative: y is in the graph
    (xg, xt), (yg, yt) = _pair(0), _pair(1)
    cf = tg.compile(lambda x, y: f(tg, x, y), fullgraph=True)
    want = torch.autograd.grad(f(torch, xt, yt), [xt, yt], allow_unused=True)
    _same_grads(tg.autograd.grad(cf(xg, yg), [xg, yg], allow_unused=True), want)
    if want[1] is None:
        with pytest.raises(RuntimeError) as got:
            tg.autograd.grad(cf(xg, yg), [xg, yg])
        with pytest.raises(RuntimeError) as ref:
            torch.autograd.grad(f(torch, xt, yt), [xt, yt])
        assert str(got.value) == str(ref.value)
    cf(xg, yg).backward()
    f(torch, xt, yt).backward()
    assert (yg.grad is None) == (yt.grad is None)
    assert_close(xg.grad, xt.grad, "float64", "x.grad")


def test_each_output_of_a_compiled_call_has_its_own_unused_inputs():
    (xg, xt), (yg, yt) = _pair(0), _pair(1)
    cf = tg.compile(lambda x, y: (x * 2, x * y), fullgraph=True)
    for k in range(2):
        got = tg.autograd.grad(cf(xg, yg)[k].sum(), [xg, yg], allow_unused=True)
        want = torch.autograd.grad(((xt * 2, xt * yt)[k]).sum(), [xt, yt], allow_unused=True)
        _same_grads(got, want)


def test_an_unused_parameter_of_a_compiled_module_keeps_grad_none():
    import tracegrad.nn as nn

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(3, 2), nn.Linear(3, 2)

        def forward(self, x):
            return self.used(x).tanh().sum()
    m = Two()
    cm = tg.compile(m)
    x = tg.tensor(np.random.default_rng(0).standard_normal((4, 3)), dtype=tg.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # compiled, not run eagerly
        for _ in range(3):                # past the speculation streak as well
            m.zero_grad()
            cm(x).backward()
    assert m.used.weight.grad is not None and m.used.bias.grad is not None
    assert m.unused.weight.grad is None and m.unused.bias.grad is None


def test_second_derivative_of_an_input_only_the_first_reads_is_none():
    """d/dy of d(x*y)/dx = y is ones; d/dx of it is None (x is not in the first gradient's graph)."""
    (xg, xt), (yg, yt) = _pair(0), _pair(1)
    cf = tg.compile(lambda x, y: (x * y).sum(), fullgraph=True)
    gx, = tg.autograd.grad(cf(xg, yg), xg, create_graph=True)
    tx, = torch.autograd.grad((xt * yt).sum(), xt, create_graph=True)
    _same_grads(tg.autograd.grad(gx.sum(), [xg, yg], allow_unused=True),
                torch.autograd.grad(tx.sum(), [xt, yt], allow_unused=True))

"""Sequences of calls to one compiled function whose inputs change between calls, compared
call by call with eager tracegrad (bit for bit: the same primitives run) and with torch.

A fuzzer draws a small program (elementwise ops, broadcasting, reductions with dim and keepdim,
matmul, views, indexing with tensors, where, softmax, in-place writes, sizes used as values, a
`float()` of a tensor) and calls it 4-8 times through one `tracegrad.compile` (dynamic None, True
or False). Between calls the inputs change in shape (sizes 0 and 1, which change broadcasting;
the number of dimensions), dtype (float32/float64/float16/int64/bool), layout (contiguous,
transposed, sliced with a step, expanded with stride 0), requires_grad, the grad mode around the
call (no_grad, enable_grad, inference_mode, set_grad_enabled(False)), the Python number argument
(int, float, bool; -0.0, nan, inf) and aliasing (f(x, x)); most calls change one or two of these
from the call before, so that a program cached for one call is offered the next. After each call:
outputs (values bit for bit against eager; dtype, shape, requires_grad, grad_fn, is_leaf,
is_inference against torch; strides where eager's are torch's: eager follows numpy's layout
where operands of two layouts meet, torch its own), the gradients of a weighted sum
of the outputs (None where torch's is None), errors (the same type as eager's, where eager or
torch raise), and at most one recompile-limit warning.

Tolerances: values and gradients against torch within a few units of the lowest precision among
the inputs (float16 2e-2, float32 2e-5, float64 1e-10); against eager bit for bit, except the
gradients of softmax and log_softmax, which the compiled pipeline decomposes before autodiff
(passes/decompose.py: `e * (g / s)` instead of the rule's `y * (g - sum(g * y))`), one or two
ulp apart, within the same tolerance.

A second fuzzer runs the backward of each call at once, after later calls (of other programs
of the same function), twice with retain_graph, never, or after an in-place write to an input
or to the output, and compares gradients and errors with eager's and torch's.

CI runs TRACEGRAD_CALL_SEQUENCES sequences (default 150, seeds 0..149, and a sixth as many of
the second kind; about 15 s); more:
TRACEGRAD_CALL_SEQUENCES=3000 python -m pytest -q tests/test_compile_call_sequence_fuzz.py
"""
import contextlib
import os
import re
import threading
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

N_SEQUENCES = int(os.environ.get("TRACEGRAD_CALL_SEQUENCES", "150"))

PROGRAMS = {}


def P(kind, floats_only=False, min_rank=0):
    """Register a program f(m, x, y, c) (m: torch or tracegrad, c: a Python number). kind:
    "bcast" (x and y broadcast together) or "mm" (x (..., n, k), y (..., m, k))."""
    def deco(f):
        PROGRAMS[f.__name__] = (kind, floats_only, min_rank, f)
        return f
    return deco



@P("bcast")
def axpy(m, x, y, c):
    return x * c + y


@P("bcast", min_rank=1)
def absdiff_sum(m, x, y, c):
    return (x - y).abs().sum(-1, keepdim=True)


@P("bcast", floats_only=True, min_rank=1)
def softmax(m, x, y, c):
    return m.softmax(x * c, -1) + y


@P("bcast")
def where(m, x, y, c):
    return m.where(x > y, x, y * c)


@P("mm", floats_only=True)
def mm(m, x, y, c):
    return x @ y.transpose(-1, -2)


@P("bcast", min_rank=1)
def index(m, x, y, c):
    idx = (y.abs() * 3).long().clamp(max=x.shape[0] - 1)
    return x[idx] * c


@P("bcast")
def clampc(m, x, y, c):
    return m.clamp(x, min=c) + y


@P("bcast", floats_only=True)
def powc(m, x, y, c):
    return x.abs() ** c + y


@P("bcast")
def divc(m, x, y, c):
    return x / c - y


@P("bcast")
def sumc(m, x, y, c):
    return x.sum() * c + y.sum()


@P("bcast", floats_only=True, min_rank=1)
def logsoftmax(m, x, y, c):
    return m.log_softmax(x, dim=0) * c + y


@P("bcast", min_rank=1)
def maxdim(m, x, y, c):
    return x.max(-1).values + y.min(-1, keepdim=False).values


@P("bcast", floats_only=True, min_rank=1)
def var(m, x, y, c):
    return x.var(-1, keepdim=True) + y


@P("bcast", min_rank=2)
def transpose_view(m, x, y, c):
    return x.transpose(0, -1), y * c


@P("bcast", min_rank=1)
def cat(m, x, y, c):
    return m.cat([x, y.expand_as(x) * c], 0)


@P("bcast", min_rank=1)
def flip(m, x, y, c):
    return x.flip(0) - y


@P("bcast")
def reshape(m, x, y, c):
    return (x + y).reshape(-1)[::2] * c


@P("bcast")
def addc(m, x, y, c):
    return x + c, y - c


@P("bcast")
def mulbool(m, x, y, c):
    return x * (y > c)


@P("bcast", floats_only=True, min_rank=1)
def norm(m, x, y, c):
    return x.norm(dim=-1) + c


@P("bcast", floats_only=True, min_rank=1)
def logsumexp(m, x, y, c):
    return m.logsumexp(x + y, -1) * c


@P("bcast")
def unsq_expand(m, x, y, c):
    return x.unsqueeze(0).expand(2, *x.shape) * y


@P("bcast", min_rank=2)
def sum_dims(m, x, y, c):
    return (x * y).sum(dim=(0, -1), keepdim=bool(c))


@P("bcast")
def mean_all(m, x, y, c):
    return (x + y).float().mean() * c


@P("bcast")
def max_all(m, x, y, c):
    return x.max() + y


@P("bcast")
def clone_inplace(m, x, y, c):
    z = (x + y).clone()
    z.mul_(2)
    z.add_(c)
    return z


@P("bcast", min_rank=2)
def getitem_slice(m, x, y, c):
    return x[1:, ::2] * c + y.sum()


@P("bcast")
def masked_fill(m, x, y, c):
    return x.masked_fill(y > 0, c)


@P("bcast", floats_only=True)
def relu_sig(m, x, y, c):
    return m.relu(x) * m.sigmoid(y)


@P("bcast")
def sizeuse(m, x, y, c):
    return x * x.numel() + y * (y.shape[0] if y.dim() else 1)


@P("bcast")
def identity(m, x, y, c):
    return x, y


@P("bcast", min_rank=1)
def xsq_minus(m, x, y, c):
    return x * x - y * c, (x - y).sum(0)


@P("bcast")
def comparisons(m, x, y, c):
    return (x >= y) | (x < c), (x == y)


@P("bcast")
def to_dtype(m, x, y, c):
    return x.to(y.dtype) * c + y.double()


@P("bcast")
def inplace_input(m, x, y, c):
    x.add_(c)
    return x * y


@P("bcast")
def setitem(m, x, y, c):
    z = x.clone()
    z[z > 0] = c
    return z + y


@P("bcast", min_rank=1)
def index_tensor(m, x, y, c):
    idx = m.argsort(x, dim=-1)
    return m.gather(x, -1, idx) * c, x[..., idx[..., :1].reshape(-1)]


@P("bcast")
def arange_size(m, x, y, c):
    return x + m.arange(x.shape[-1] if x.dim() else 1), y


@P("bcast")
def branch_size(m, x, y, c):
    if x.numel() > 4:
        return x.sum() + y
    return x * 2 + y


@P("bcast")
def squeeze(m, x, y, c):
    return x.squeeze() * c, y.unsqueeze(-1)


@P("bcast")
def view_flat(m, x, y, c):
    return x.view(-1) * c, y.reshape(-1)


@P("bcast")
def item_break(m, x, y, c):
    return x * float(y.sum()) + c


@P("bcast")
def where_scalar(m, x, y, c):
    return m.where(x > 0, x, c), m.where(y > 0, c, y)


@P("bcast")
def full_like(m, x, y, c):
    return m.full_like(x, c) + y, m.zeros_like(y) + c


@P("bcast")
def nan_to_num(m, x, y, c):
    return m.nan_to_num(x, nan=c) + y


@P("bcast")
def tensor_pow(m, x, y, c):
    return x ** y


@P("bcast")
def floordiv(m, x, y, c):
    return x // y, m.remainder(x, y)


@P("bcast")
def bitwise(m, x, y, c):
    return x & y, ~(x | y)


@P("bcast")
def neg_abs(m, x, y, c):
    return -x, y.abs()


@P("bcast", min_rank=1)
def argmax_sort(m, x, y, c):
    return x.argmax(-1), x.sort(-1).values + y.sum()


@P("bcast", min_rank=1)
def expand_out(m, x, y, c):
    return x.unsqueeze(0).expand(3, *x.shape), (y * c).expand_as(x + y)


@P("bcast", floats_only=True, min_rank=1)
def std(m, x, y, c):
    return x.std(-1, unbiased=bool(c)) + y


@P("bcast")
def sum_dtype(m, x, y, c):
    return x.sum(dtype=m.float64) + y.sum(), (x * c).to(m.float16)


@P("bcast")
def clamp_both(m, x, y, c):
    return m.clamp(x, min=c, max=y)


@P("mm", floats_only=True)
def mm_grad_inside(m, x, y, c):
    z = (x @ y.transpose(-1, -2)).tanh()
    return z, z.sum(-1) * c


@P("mm", floats_only=True)
def linear(m, x, y, c):
    return m.nn.functional.linear(x, y[..., :1, :].reshape(1, -1) if y.dim() == 3 else y) * c


ROW_OPS = {"softmax", "logsoftmax"}     # decompose_row_ops: another backward formula, rounding apart
# a full-size constant operand (full_like(x, c), x ** 0) that simplify makes a literal leaves the
# other operand alone to choose an elementwise result's layout: where the inputs' layouts differ,
# eager's strides (numpy's choice with the constant) are not the compiled result's (values agree)
FOLDS_FULL_CONSTANT = {"full_like", "powc"}
DTYPES = ["float32", "float64", "float16", "int64", "bool"]
DT_P = [0.35, 0.3, 0.1, 0.15, 0.1]
CONSTS = [2, 0.5, -0.0, 0.0, True, False, 3, -1, float("nan"), float("inf"), 1e-3, -2.5, 0, 1]
MODES = ["none", "no_grad", "enable_grad", "inference_mode", "set_grad_false"]
LAYOUTS = ["contig", "transposed", "stepped", "expanded"]


def mode_ctx(m, mode):
    if mode == "none":
        return contextlib.nullcontext()
    if mode == "no_grad":
        return m.no_grad()
    if mode == "enable_grad":
        return m.enable_grad()
    if mode == "inference_mode":
        return m.inference_mode()
    return m.set_grad_enabled(False)


def draw_dim(r):
    return int(r.choice([0, 1, 2, 3, 4, 5], p=[0.08, 0.22, 0.25, 0.2, 0.15, 0.1]))


def draw_shapes(r, kind, min_rank):
    if kind == "mm":
        lead = [draw_dim(r)] if r.random() < 0.3 else []
        n, k, mm_ = draw_dim(r), draw_dim(r), draw_dim(r)
        return tuple(lead + [n, k]), tuple(lead + [mm_, k])
    rank = int(r.integers(min_rank, 4))
    xs = [draw_dim(r) for _ in range(rank)]
    ys = [1 if r.random() < 0.3 else d for d in xs]
    if r.random() < 0.2 and ys:
        ys = ys[int(r.integers(0, len(ys) + 1)):]
    if r.random() < 0.3:
        xs, ys = ys, xs
    if len(xs) < min_rank:
        xs = [2] * (min_rank - len(xs)) + xs
    if len(ys) < min_rank and r.random() < 0.5:
        ys = [1] * (min_rank - len(ys)) + ys
    return tuple(xs), tuple(ys)


def draw_values(r, shape, dtype):
    if dtype == "bool":
        return r.random(shape) < 0.5
    if dtype == "int64":
        return r.integers(-3, 4, shape).astype(np.int64)
    a = r.standard_normal(shape) * 2
    if a.size and r.random() < 0.15:
        flat = a.reshape(-1)
        flat[int(r.integers(0, flat.size))] = r.choice([np.nan, np.inf, -np.inf, -0.0, 0.0])
    return a.astype(dtype)


def make(m, base, layout, dtype, req):
    """A tensor of the logical shape `base` holds, in `layout`. Returns (tensor, leaf)."""
    mdt = getattr(m, dtype)
    shape = base.shape
    if layout == "transposed" and len(shape) >= 2:
        leaf = m.tensor(np.ascontiguousarray(np.swapaxes(base, 0, -1)), dtype=mdt, requires_grad=req)
        return leaf.transpose(0, -1), leaf
    if layout == "stepped" and len(shape) >= 1:
        big = np.repeat(base, 2, axis=0)
        leaf = m.tensor(big, dtype=mdt, requires_grad=req)
        return leaf[::2], leaf
    if layout == "expanded" and len(shape) >= 1:
        # stride 0 in dim 0: the base's first row, repeated (values change accordingly)
        leaf = m.tensor(np.ascontiguousarray(base[:1]), dtype=mdt, requires_grad=req)
        return leaf.expand(*shape), leaf
    leaf = m.tensor(base, dtype=mdt, requires_grad=req)
    return leaf, leaf


def mutate(r, kind, floats_only, min_rank, prev):
    """prev with one or two of its attributes changed."""
    call = dict(prev)
    for _ in range(int(r.integers(1, 3))):
        what = str(r.choice(["shape", "dtype", "layout", "req", "mode", "c", "alias", "values"]))
        if what == "shape":
            shapes = [list(s) for s in call["shapes"]]
            i = int(r.integers(0, 2))
            if shapes[i]:
                d = int(r.integers(0, len(shapes[i])))
                new = draw_dim(r)
                if kind != "mm":
                    for s in shapes:            # keep them broadcastable: change the dim in both
                        k = len(s) - len(shapes[i]) + d
                        if 0 <= k < len(s) and (s[k] == shapes[i][d] or s is shapes[i]):
                            s[k] = new
                    shapes[i][d] = new
                else:
                    shapes[i][d] = new
                    if d == len(shapes[i]) - 1:
                        shapes[1 - i][-1] = new
                    if len(shapes[i]) == 3 and d == 0:
                        shapes[1 - i][0] = new
            call["shapes"] = tuple(tuple(s) for s in shapes)
        elif what == "dtype":
            fl = ["float32", "float64", "float16"] if floats_only or kind == "mm" else DTYPES
            dt = str(r.choice(fl))
            # (matmul: one dtype; torch takes float32 @ float64 where a size is 0, tracegrad raises)
            call["dtypes"] = (dt, dt) if r.random() < 0.7 or kind == "mm" else (call["dtypes"][0], dt)
        elif what == "layout":
            call["layouts"] = [str(r.choice(LAYOUTS)) for _ in range(2)]
        elif what == "req":
            call["req"] = [bool(r.random() < 0.5) for _ in range(2)]
        elif what == "mode":
            call["mode"] = str(r.choice(MODES))
        elif what == "c":
            call["c"] = CONSTS[int(r.integers(0, len(CONSTS)))]
        elif what == "alias":
            call["alias"] = not call["alias"]
    call["req"] = [q and d.startswith("float") for q, d in zip(call["req"], call["dtypes"])]
    call["alias"] = call["alias"] and call["shapes"][0] == call["shapes"][1] and \
        call["dtypes"][0] == call["dtypes"][1]
    call["arrays"] = [draw_values(r, s, d) for s, d in zip(call["shapes"], call["dtypes"])]
    return call


def draw_call(r, kind, floats_only, min_rank, prev):
    if prev is not None and r.random() < 0.7:
        return mutate(r, kind, floats_only, min_rank, prev)
    shapes = draw_shapes(r, kind, min_rank)
    if prev is not None and r.random() < 0.35:
        shapes = prev["shapes"]
    fl = ["float32", "float64", "float16"]
    if floats_only or kind == "mm":
        dt = str(r.choice(fl, p=[0.45, 0.45, 0.1]))
        dts = (dt, dt)
    else:
        dt = str(r.choice(DTYPES, p=DT_P))
        dts = (dt, dt if r.random() < 0.8 else str(r.choice(DTYPES, p=DT_P)))
    if prev is not None and r.random() < 0.3:
        dts = prev["dtypes"]
    arrays = [draw_values(r, s, d) for s, d in zip(shapes, dts)]
    layouts = [str(r.choice(LAYOUTS, p=[0.55, 0.15, 0.15, 0.15])) for _ in range(2)]
    req = [d.startswith("float") and r.random() < 0.6 for d in dts]
    alias = shapes[0] == shapes[1] and dts[0] == dts[1] and r.random() < 0.25
    c = CONSTS[int(r.integers(0, len(CONSTS)))]
    mode = str(r.choice(MODES, p=[0.5, 0.15, 0.1, 0.1, 0.15]))
    return dict(shapes=shapes, dtypes=dts, arrays=arrays, layouts=layouts, req=req, alias=alias, c=c, mode=mode)


def inputs(m, call):
    xs, leaves = [], []
    for i in range(2):
        if i == 1 and call["alias"]:
            xs.append(xs[0])
            continue
        t, leaf = make(m, call["arrays"][i], call["layouts"][i], call["dtypes"][i], call["req"][i])
        xs.append(t)
        leaves.append(leaf)
    return xs, leaves


def flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in flat(x)]
    return [o]


def npy(t):
    return np.asarray(t.detach().numpy()) if t is not None else None


def bits_equal(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")) or \
            (np.array_equal(np.isnan(a), np.isnan(b)) and
             np.array_equal(np.where(np.isnan(a), 0, a).view(f"u{a.itemsize}"),
                            np.where(np.isnan(b), 0, b).view(f"u{b.itemsize}")))
    return np.array_equal(a, b)


TOL = {"float16": 2e-2, "float32": 2e-5, "float64": 1e-10}


def close(a, b, dts=()):
    if a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    tol = max([TOL.get(str(a.dtype), 1e-5)] + [TOL[d] for d in dts if d in TOL])
    return np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)


def unbounded(c):
    return isinstance(c, float) and not np.isfinite(c)


def close_where_finite(a, b, dts=()):
    """A value or gradient scaled by c = inf or NaN, against torch's: close where both are
    finite, and not finite in the same places. inf * (1 - tanh(z) ** 2) is NaN where tanh rounds
    to 1 and inf where it rounds 1 ulp below (the ulps the tolerance allows numpy's tanh and
    BLAS's sums against torch's), and a sum of such terms is NaN where one is: which of inf and
    NaN is left to the rounding (call-sequence seed 3951, mm_grad_inside). So is the sign of
    inf * (tanh(a) + tanh(b)) where the sum is 0 or 1 ulp of tanh (seed 505879: -inf, torch NaN)."""
    if a.shape != b.shape or a.dtype.kind != "f":
        return False
    fa, fb = np.isfinite(a), np.isfinite(b)
    return np.array_equal(fa, fb) and close(np.where(fa, a, 0), np.where(fb, b, 0), dts)


def std_of_a_constant_row(name, call):
    """std(x, -1) over a row whose values are all equal: its gradient is rounding noise, not
    comparable with torch's. The std is 0 exactly but not at rounding, and d std / dx =
    (x - mean) / ((n - 1) std) has norm O(1) however small the spread, so its direction is
    whatever rounding left in x - mean. torch's CPU std of a whole float32 tensor takes its
    mean in float32 (1.8277118 * 3 / 3 is 1 ulp low: std 1.46e-7, gradient 1.22), tracegrad
    its mean in float64 (exact: std 0, gradient 0, torch's rule at std == 0); torch's own
    float64 gives gradient -0.41 for [0.1] * 3 and 0 for [1/3] * 3 (call-sequence seed 9283).
    Compiled against eager stays bit for bit."""
    if name != "std":
        return False
    x = npy(make(tg, call["arrays"][0], call["layouts"][0], call["dtypes"][0], False)[0])
    return x.ndim >= 1 and x.shape[-1] > 1 and bool((x == x[..., :1]).all(-1).any())


def run_one(m, f, call, c):
    """f(m, x, y, c) on this call's inputs, under its grad mode -> outputs, leaves and warnings
    (or the error it raised)."""
    xs, leaves = inputs(m, call)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with mode_ctx(m, call["mode"]):
                out = f(m, *xs, c)
        except Exception as e:          # noqa: BLE001  (compared with the other modules' errors)
            return dict(error=e, warnings=w)
    return dict(out=flat(out), leaves=leaves, warnings=list(w))


def grads(m, res, wts):
    """The gradients of sum(output * weight) for the leaves that require grad, None where
    nothing requires grad, or the error the backward raised."""
    outs = [o for o in res["out"] if o.requires_grad]
    leaves = [t for t in res["leaves"] if t.requires_grad]
    if not outs or not leaves:
        return None
    loss = None
    for o, wt in zip(res["out"], wts):
        if o.requires_grad:
            s = (o * m.tensor(wt, dtype=o.dtype)).sum()
            loss = s if loss is None else loss + s
    try:
        return [npy(g) for g in m.autograd.grad(loss, leaves, allow_unused=True)]
    except Exception as e:              # noqa: BLE001
        return e


def draw_sequence(seed, n_calls=None):
    """(program name, dynamic, the calls) of one seed."""
    r = np.random.default_rng(seed)
    names = sorted(PROGRAMS)
    name = names[seed % len(names)]           # every program in each run of len(PROGRAMS) seeds
    kind, floats_only, min_rank, _ = PROGRAMS[name]
    dynamic = [None, True, False][int(r.integers(0, 3))]
    n_calls = n_calls or int(r.integers(4, 9))
    calls, prev = [], None
    for _ in range(n_calls):
        prev = draw_call(r, kind, floats_only, min_rank, prev)
        calls.append(prev)
    return name, dynamic, calls


def check_sequence(seed, n_calls=None, verbose=False):
    """The problems found in one drawn sequence of calls (an empty list: none)."""
    name, dynamic, calls = draw_sequence(seed, n_calls)
    body = PROGRAMS[name][3]
    compiled = tg.compile(lambda x, y, c: body(tg, x, y, c), dynamic=dynamic)
    problems = []
    limit_warnings = 0
    for k, call in enumerate(calls):
        c = call["c"]
        where = f"seed {seed} prog {name} dynamic={dynamic} call {k}: shapes {call['shapes']} {call['dtypes']} " \
                f"{call['layouts']} req {call['req']} alias {call['alias']} c={c!r} mode {call['mode']}"
        if verbose:
            print(where)
        rt = run_one(torch, body, call, c)
        re_ = run_one(tg, body, call, c)
        rc = run_one(tg, lambda m, x, y, c: compiled(x, y, c), call, c)
        for w in rc["warnings"]:
            msg = str(w.message)
            if "recompile limit" in msg:
                limit_warnings += 1
            elif "tracegrad.compile" in msg and "cannot be traced" not in msg:
                problems.append(f"{where}: compiled warns {msg[:300]}")
        if "error" in re_ or "error" in rc:
            if ("error" in re_) != ("error" in rc) or type(re_.get("error")) is not type(rc.get("error")):
                problems.append(f"{where}: eager {re_.get('error')!r} compiled {rc.get('error')!r}")
            if "error" not in rt and "error" in re_:
                problems.append(f"{where}: eager raises {re_['error']!r} where torch works")
            continue
        if "error" in rt:
            problems.append(f"{where}: torch raises {rt['error']!r}, tracegrad does not")
            continue
        oe, oc, ot = re_["out"], rc["out"], rt["out"]
        for i, (a, b, t) in enumerate(zip(oc, oe, ot)):
            A, B, T = npy(a), npy(b), npy(t)
            tags = []
            if str(a.dtype) != str(b.dtype):
                tags.append(f"dtype {a.dtype} vs eager {b.dtype}")
            if str(b.dtype).split(".")[-1] != str(t.dtype).split(".")[-1]:
                tags.append(f"dtype eager {b.dtype} vs torch {t.dtype}")
            if not bits_equal(A, B):
                tags.append(f"values differ from eager\n   compiled {A!r}\n   eager    {B!r}")
            elif not close(B, T, call['dtypes']) and not (unbounded(c) and close_where_finite(B, T, call['dtypes'])):
                tags.append(f"values differ from torch\n   tg {B!r}\n   torch {T!r}")
            if tuple(a.shape) != tuple(t.shape):
                tags.append(f"shape {tuple(a.shape)} vs torch {tuple(t.shape)}")
            if b.stride() == t.stride() and a.stride() != b.stride() and not (
                    name in FOLDS_FULL_CONSTANT and call["layouts"][0] != call["layouts"][1]):
                tags.append(f"stride {a.stride()} vs eager and torch {b.stride()}")
            if a.requires_grad != t.requires_grad or b.requires_grad != t.requires_grad:
                tags.append(f"requires_grad c={a.requires_grad} e={b.requires_grad} t={t.requires_grad}")
            if (a.grad_fn is None) != (t.grad_fn is None):
                tags.append(f"grad_fn c={a.grad_fn} t={t.grad_fn}")
            if a.is_leaf != t.is_leaf:
                tags.append(f"is_leaf c={a.is_leaf} t={t.is_leaf}")
            if hasattr(a, "is_inference") and a.is_inference() != t.is_inference():
                tags.append(f"is_inference c={a.is_inference()} t={t.is_inference()}")
            if tags:
                problems.append(f"{where}: output {i}: " + "; ".join(tags))
        wr = np.random.default_rng(seed * 100 + k)
        wts = [wr.standard_normal(tuple(t.shape)) for t in ot]
        gt, ge, gc = grads(torch, rt, wts), grads(tg, re_, wts), grads(tg, rc, wts)
        if isinstance(ge, Exception) or isinstance(gc, Exception):
            if type(ge) is not type(gc):
                problems.append(f"{where}: grad eager {ge!r} compiled {gc!r}")
            if not isinstance(gt, Exception):
                problems.append(f"{where}: grad raises (eager {ge!r}, compiled {gc!r}) where torch works")
            continue
        if (gt is None) != (ge is None) or (gc is None) != (ge is None):
            problems.append(f"{where}: grads None-ness t={gt is None} e={ge is None} c={gc is None}")
            continue
        if isinstance(gt, Exception):
            problems.append(f"{where}: torch grad raises {gt!r}")
            continue
        if gt is None:
            continue
        # a gradient is no more precise than the outputs it passes through: a float64 y added to
        # clamp(int64 x, min=nan), a float32, gets its gradient summed in float32 (seed 17537)
        gdts = tuple(call['dtypes']) + tuple(str(t.dtype).split(".")[-1] for t in ot)
        for i, (a, b, t) in enumerate(zip(gc, ge, gt)):
            if (a is None) != (b is None) or (b is None) != (t is None):
                problems.append(f"{where}: grad {i} None c={a is None} e={b is None} t={t is None}")
                continue
            if a is None:
                continue
            if not (bits_equal(a, b) or name in ROW_OPS and close(a, b, call['dtypes'])):
                problems.append(f"{where}: grad {i} compiled != eager\n   c {a!r}\n   e {b!r}")
            elif not close(b, t, gdts) and not (unbounded(c) and close_where_finite(b, t, gdts)) \
                    and not (i == 0 and call["req"][0] and std_of_a_constant_row(name, call)):
                problems.append(f"{where}: grad {i} eager != torch\n   e {b!r}\n   t {t!r}")
    if limit_warnings > 1:
        problems.append(f"seed {seed}: {limit_warnings} recompile-limit warnings")
    return problems


@pytest.mark.parametrize("part", range(3))
def test_call_sequences_match_eager_and_torch(part):
    problems = []
    with np.errstate(all="ignore"):
        for seed in range(part, N_SEQUENCES, 3):
            problems += check_sequence(seed)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:6])


def test_the_sequences_exercise_each_kind_of_change():
    """The draw is not degenerate: every program, each dynamic mode, grad mode, layout and dtype,
    sizes 0 and 1, aliasing, flipped requires_grad and changed constants occur."""
    names, dyns, modes, layouts, dtypes, sizes = set(), set(), set(), set(), set(), set()
    alias = req_flips = const_changes = 0
    for seed in range(max(N_SEQUENCES, 150)):
        name, dynamic, calls = draw_sequence(seed)
        names.add(name)
        dyns.add(dynamic)
        for prev, call in zip([None] + calls, calls):
            modes.add(call["mode"])
            layouts.update(call["layouts"])
            dtypes.update(call["dtypes"])
            sizes.update(d for s in call["shapes"] for d in s)
            alias += call["alias"]
            if prev is not None:
                req_flips += prev["req"] != call["req"]
                const_changes += repr(prev["c"]) != repr(call["c"])
    assert names == set(PROGRAMS)
    assert dyns == {None, True, False} and modes == set(MODES) and layouts == set(LAYOUTS)
    assert dtypes == set(DTYPES) and {0, 1} <= sizes
    assert alias >= 20 and req_flips >= 50 and const_changes >= 100


# -- backwards that run after later calls, twice, or after in-place writes --------------------------

LATER = {
    "tanh_mm": lambda m, x, w: (x @ w).tanh().sum(-1),
    "softmax": lambda m, x, w: m.softmax(x * 2, -1) * w.sum(),
    "cross_entropy": lambda m, x, w: m.nn.functional.cross_entropy(x @ w, m.zeros(x.shape[0], dtype=m.int64)),
    "exp_mul": lambda m, x, w: (x.exp() * x).sum(0) + w.sum(),
    "square": lambda m, x, w: x * x + w.mean(),
    "slice_saved": lambda m, x, w: (x ** 3).mean(-1, keepdim=True) * w[0, 0],
    "sigmoid": lambda m, x, w: m.sigmoid(x) * (x @ w).sum(),
}
ACTIONS = ["now", "later", "later", "never", "twice", "write_input", "write_output"]


def _later_backward(item):
    """Run one pending backward in torch, eager and compiled -> its problems."""
    res, action, where, seed_grad = item
    out = {}
    for lib in ("torch", "eager", "compiled"):
        m = torch if lib == "torch" else tg
        x, w, o = res[lib]
        try:
            if action == "write_input":
                with m.no_grad():
                    for t in (x, w):
                        if not t.requires_grad:
                            t.mul_(2)
            if action == "write_output":
                o.add_(1)
            g = m.tensor(seed_grad, dtype=o.dtype)
            wrt = [t for t in (x, w) if t.requires_grad]
            gs = m.autograd.grad(o, wrt, g, retain_graph=action == "twice", allow_unused=True)
            if action == "twice":
                gs = tuple(gs) + tuple(m.autograd.grad(o, wrt, g, allow_unused=True))
            out[lib] = [None if t is None else t.numpy() for t in gs]
        except RuntimeError as e:
            out[lib] = e
    kinds = {type(v).__name__ if isinstance(v, Exception) else None for v in out.values()}
    if len(kinds) != 1:
        return [f"{where} [{action}]: backward {({k: str(v)[:120] for k, v in out.items()})}"]
    if isinstance(out["torch"], Exception):
        return []
    problems = []
    for i, (c, e, t) in enumerate(zip(out["compiled"], out["eager"], out["torch"])):
        if (c is None) != (t is None) or (e is None) != (t is None):
            problems.append(f"{where} [{action}]: gradient {i} None: compiled {c is None} eager {e is None}")
        elif c is not None:
            tol = 1e-4 if c.dtype == np.float32 else 1e-10
            if not np.allclose(c, e, rtol=tol, atol=tol, equal_nan=True):
                problems.append(f"{where} [{action}]: gradient {i} compiled {c} eager {e}")
            elif not np.allclose(e, t, rtol=tol, atol=tol, equal_nan=True):
                problems.append(f"{where} [{action}]: gradient {i} eager {e} torch {t}")
    return problems


def check_later_backwards(seed):
    """Calls of one compiled function whose backwards run at once, after later calls (whose
    programs may be other ones: sizes, dtypes, requires_grad change), twice with retain_graph,
    never, or after an in-place write to an input or to the output."""
    r = np.random.default_rng(seed)
    name = sorted(LATER)[seed % len(LATER)]
    body = LATER[name]
    dynamic = [None, True, False][int(r.integers(0, 3))]
    cf = tg.compile(lambda x, w: body(tg, x, w), dynamic=dynamic)
    pending, problems = [], []
    k = int(r.integers(2, 5))
    for i in range(int(r.integers(4, 10))):
        n = int(r.choice([1, 2, 3, 5, 0])) if r.random() < 0.5 else 3
        dt = "float64" if r.random() < 0.5 else "float32"
        a, b = r.standard_normal((n, k)).astype(dt), r.standard_normal((k, k)).astype(dt)
        req = [bool(r.random() < 0.8), bool(r.random() < 0.7)]
        where = f"seed {seed} {name} dynamic={dynamic} call {i} n={n} {dt} requires_grad={req}"
        res = {}
        for lib, f in (("torch", None), ("eager", None), ("compiled", cf)):
            m = torch if lib == "torch" else tg
            x, w = m.tensor(a, requires_grad=req[0]), m.tensor(b, requires_grad=req[1])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res[lib] = (x, w, f(x, w) if f is not None else body(m, x, w))
        oc, oe, ot = (res[lib][2] for lib in ("compiled", "eager", "torch"))
        if not bits_equal(npy(oc), npy(oe)) or oc.requires_grad != ot.requires_grad:
            problems.append(f"{where}: output differs from eager's")
        if not ot.requires_grad:
            continue
        pending.append((res, str(r.choice(ACTIONS)), where, r.standard_normal(tuple(ot.shape))))
        keep = []
        for item in pending:
            if item[1] == "now" or r.random() < 0.4:
                problems += _later_backward(item)
            elif item[1] != "never":
                keep.append(item)
        pending = keep
    for item in pending:
        problems += _later_backward(item)
    return problems


def test_backwards_after_later_calls_match_eager_and_torch():
    problems = []
    with np.errstate(all="ignore"):
        for seed in range(max(N_SEQUENCES // 6, 7)):
            problems += check_later_backwards(seed)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:6])


# -- the bugs the fuzzer found, one by one ----------------------------------------------------------

@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("c", [0, 0.0, -0.0])
def test_a_power_zero_keeps_its_base_in_the_autograd_graph(dynamic, c):
    """x ** 0 + y: x's gradient is zeros in torch (x is in the graph), not None. The compiled
    forward had made `x ** 0` the literal 1.0 before autodiff, which cut x out of the graph."""
    cf = tg.compile(lambda x, y, c: x.abs() ** c + y, dynamic=dynamic)
    for n in (3, 0, 5, 1):
        a = np.linspace(-1, 1, n)
        xs = [m.tensor(a, requires_grad=True) for m in (tg, tg, torch)]
        ys = [m.tensor(a, requires_grad=True) for m in (tg, tg, torch)]
        got = tg.autograd.grad(cf(xs[0], ys[0], c).sum(), [xs[0], ys[0]], allow_unused=True)
        eager = tg.autograd.grad((xs[1].abs() ** c + ys[1]).sum(), [xs[1], ys[1]], allow_unused=True)
        want = torch.autograd.grad((xs[2].abs() ** c + ys[2]).sum(), [xs[2], ys[2]], allow_unused=True)
        for gc, ge, gt in zip(got, eager, want):
            assert gc is not None and ge is not None, (n, c)
            assert np.array_equal(gc.numpy(), gt.numpy()) and np.array_equal(ge.numpy(), gt.numpy())


def _layouts(m):
    base = m.tensor(np.arange(12.0).reshape(3, 4))
    row = m.tensor(np.arange(4.0).reshape(1, 4))
    nchw = m.tensor(np.arange(120.0).reshape(2, 3, 4, 5))
    return {"transposed": (base.t(), base.t()), "expanded": (row.expand(3, 4), row.expand(3, 4)),
            "stepped": (base[::2], base[::2]), "transposed and contiguous": (base.t(), base.t().contiguous()),
            "nhwc view": (nchw.permute(0, 2, 3, 1), nchw.permute(0, 2, 3, 1)),
            "channels_last": (nchw.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),) * 2}


@pytest.mark.parametrize("case", ["transposed", "expanded", "stepped", "transposed and contiguous",
                                  "nhwc view", "channels_last"])
@pytest.mark.parametrize("op", ["cat0", "cat1", "stack0", "stack_last"])
def test_cat_and_stack_lay_out_their_result_as_torch(case, op):
    """numpy's concatenate follows its inputs' strides: cat of two transposed (or expanded)
    tensors came out column-major, where torch's is contiguous, and its view(-1) raised in eager
    tracegrad only (the compiled program took it for contiguous). torch keeps channels_last."""
    def f(m, a, b):
        if op.startswith("cat"):
            return m.cat([a, b], int(op[-1]))
        return m.stack([a, b], 0 if op == "stack0" else a.dim())
    want = f(torch, *_layouts(torch)[case])
    a, b = _layouts(tg)[case]
    for got in (f(tg, a, b), tg.compile(lambda a, b: f(tg, a, b))(a, b)):
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        assert np.array_equal(got.numpy(), want.numpy())
        if want.is_contiguous():
            assert np.array_equal(got.view(-1).numpy(), want.view(-1).numpy())


@pytest.mark.parametrize("dtypes", [("float16", "float32"), ("float32", "float16"), ("float16", "float64"),
                                    ("float64", "float32"), ("int64", "float32"), ("float32", "int64")])
def test_a_power_of_two_dtypes_differentiates_as_torch(dtypes):
    """pow(x, y) of two dtypes: torch's pow_backward_exponent takes log x in the result's dtype
    (eager took it in float16: 1e-4 off); the exponent's `y - 1` for x's gradient is in y's own
    dtype, as eager records the op (the compiled trace had cast y first: 2.6e-4 off)."""
    a = np.array([0.3, 1.7, 0.0, 2.5, 1.1]).astype(dtypes[0])
    b = np.array([1.3, -0.4, 0.5, 2.0, -1.7]).astype(dtypes[1])
    w = np.array([1.5, -2.0, 1.0, 0.7, 0.3])
    res = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x, y = (m.tensor(v, requires_grad=v.dtype.kind == "f") for v in (a, b))
        f = comp(lambda x, y: x ** y) if comp else (lambda x, y: x ** y)
        with np.errstate(all="ignore"):             # 0 ** -0.4 is inf, its gradients nan
            o = f(x, y)
            gs = m.autograd.grad((o * m.tensor(w, dtype=o.dtype)).sum(), [t for t in (x, y) if t.requires_grad])
        res.append([g.numpy() for g in gs])
    for k in range(len(res[0])):
        want, eager, got = res[0][k], res[1][k], res[2][k]
        assert got.dtype == eager.dtype == want.dtype
        np.testing.assert_array_equal(got, eager)
        # (numpy's float32 pow is an ulp from torch's for some operands: a few ulp here)
        np.testing.assert_allclose(eager, want, rtol=4 * np.finfo(want.dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_bool_exponent_raises_at_backward_as_torch(dtype):
    """x ** y with a bool y: torch's backward raises (its rule computes `y - 1`); the compiled
    call runs its forward and raises the same error at backward, not at the call."""
    msgs = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x = m.tensor(np.full((4, 1), 1.5, dtype), requires_grad=True)
        y = m.tensor(np.array([[True], [False], [True], [True]]))
        f = comp(lambda x, y: x ** y) if comp else (lambda x, y: x ** y)
        o = f(x, y)
        assert np.array_equal(o.detach().numpy(), np.where(y.numpy(), 1.5, 1.0).astype(dtype))
        with pytest.raises(RuntimeError) as e:
            o.sum().backward()
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0] and msgs[2] == msgs[0]


@pytest.mark.parametrize("view", ["w[0, 0]", "w.t()", "w[:, :1]", "w.sum()", "w * 1"])
def test_an_argument_saved_through_a_view_and_changed_in_place_before_backward(view):
    """`y * w[0, 0]` saves the view w[0, 0], whose version is w's: w written in place (under
    no_grad) between the call and its backward makes torch's and eager's backward raise. The
    compiled backward read its own copy and returned a gradient (from the old w)."""
    a = np.random.default_rng(0).standard_normal((3, 2))
    b = np.random.default_rng(1).standard_normal((2, 2))
    results = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        def f(x, w):
            v = {"w[0, 0]": lambda: w[0, 0], "w.t()": lambda: w.t()[:1, :], "w[:, :1]": lambda: w[:, :1].t(),
                 "w.sum()": lambda: w.sum(), "w * 1": lambda: w[:1] * 1}[view]()
            return (x ** 3).mean(-1, keepdim=True) * v
        cf = comp(f) if comp else f
        x, w = m.tensor(a, requires_grad=True), m.tensor(b)
        for call in range(2):               # the program's first call, and a later one
            o = cf(x, w)
            with m.no_grad():
                w.add_(1)
            try:
                results.append(m.autograd.grad(o.sum(), x)[0].numpy())
            except RuntimeError as e:
                results.append(str(e))
    torch_, eager, compiled = results[:2], results[2:4], results[4:6]
    if view in ("w.sum()", "w * 1"):        # a new tensor: nothing of w saved, no error
        for k in range(2):
            np.testing.assert_allclose(eager[k], torch_[k], rtol=1e-12)
            np.testing.assert_allclose(compiled[k], torch_[k], rtol=1e-12)
        return
    assert eager == torch_
    # (the compiled message names w, [2, 2], where torch names the view it saved)
    assert [re.sub(r"\[torch\.\w+ \[[^\]]*\]\]", "T", r) for r in compiled] == \
        [re.sub(r"\[torch\.\w+ \[[^\]]*\]\]", "T", r) for r in torch_], compiled


@pytest.mark.parametrize("case", ["double", "half", "mixed sub", "times one", "3-d"])
def test_a_cast_of_a_broadcast_is_contiguous_as_torchs(case):
    """numpy's astype (order 'K') makes a stride-0 axis the innermost: an expanded (4, 4) row
    cast to float64 had strides (1, 4), where torch's are (4, 1), and so had x * x - y for a
    float32 y (cast for the float64 subtraction), eagerly and compiled; compiled alone where
    simplify dropped y * 1 (eager's product had made y contiguous). view(-1) then raised."""
    def f(m, x, y):
        if case == "double":
            return y.double()
        if case == "half":
            return y.half()
        if case == "mixed sub":
            return x * x - y
        if case == "times one":
            return x * x - y * 1
        return y.unsqueeze(0).expand(3, 4, 4).double() + x
    def args(m):
        row = m.tensor(np.arange(4.0, dtype=np.float32).reshape(1, 4))
        return m.tensor(np.arange(4.0).reshape(4, 1)), row.expand(4, 4)
    want = f(torch, *args(torch))
    for got in (f(tg, *args(tg)), tg.compile(lambda x, y: f(tg, x, y), dynamic=False)(*args(tg))):
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        np.testing.assert_array_equal(got.view(-1).numpy(), want.view(-1).numpy())


@pytest.mark.parametrize("case", ["mul_", "setitem", "two indices", "with a slice", "read after", "grad"])
def test_an_index_by_a_0_dim_tensor_is_a_view_as_in_eager(case):
    """x[i] with a 0-dim integer tensor i is x[int(i)] in torch and eager: a select, a view of
    x, so an in-place op on it writes x. The trace, which does not know i's value, made it a
    copy: the compiled call returned 15.0 where torch returns 27.0, and left x unchanged."""
    def f(m, x, i):
        if case == "mul_":
            x[i].mul_(2)
            return x.sum() * 1
        if case == "setitem":
            x[i][0] = 7.0
            return x * 1
        if case == "two indices":
            x[i, i].add_(5)
            return x * 1
        if case == "with a slice":
            x[i, 1:].zero_()
            return x * 1
        if case == "read after":
            v = x[i]
            v.mul_(3)
            return v + x[i]
        y = x * 1                   # a value that requires grad, written through x[i]
        y[i].mul_(x[0, 0])
        return (y * y).sum()
    res = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x = m.tensor(np.arange(6.0).reshape(2, 3) / 4, requires_grad=case == "grad")
        i = m.tensor(1)
        o = (comp(lambda x, i: f(tg, x, i)) if comp else (lambda x, i: f(m, x, i)))(x, i)
        got = [o.detach().numpy(), x.detach().numpy()]
        if case == "grad":
            got.append(m.autograd.grad(o, x)[0].numpy())
        res.append(got)
    for got in res[1:]:
        for a, b in zip(got, res[0]):
            np.testing.assert_array_equal(a, b)


def test_an_index_by_a_0_dim_tensor_is_laid_out_as_the_select():
    """x.t()[i] * 1: eager's select keeps x.t()'s layout, strides (1, 3) as torch's; the
    compiled index made a C-ordered copy."""
    want = None
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x = m.tensor(np.arange(24.0).reshape(2, 3, 4)).transpose(0, 2)
        f = comp(lambda x, i: x[-i] * 1) if comp else (lambda x, i: x[-i] * 1)
        o = f(x, m.tensor(1))
        want = want or (o.stride(), o.numpy().tolist())
        assert (o.stride(), o.numpy().tolist()) == want


def test_the_gradient_through_a_0_dim_tensor_index_keeps_the_sign_of_zero():
    """x[i] * 0.0 with negative incoming gradients: torch's select backward writes -0.0 into
    the selected row; the compiled index backward added -0.0 to zeros, which is 0.0."""
    a = np.arange(6.0).reshape(2, 3)
    got = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        x = m.tensor(a, requires_grad=True)
        f = comp(lambda x, i: x[i] * 0.0) if comp else (lambda x, i: x[i] * 0.0)
        o = f(x, m.tensor(1))
        g, = m.autograd.grad(o, x, -m.ones_like(o))
        got.append(np.signbit(g.numpy()))
    assert got[0].sum() == 3
    np.testing.assert_array_equal(got[1], got[0])
    np.testing.assert_array_equal(got[2], got[0])


@pytest.mark.parametrize("case", ["y * 1 reshaped", "y / 1 transposed", "y - 0.0 row", "y * 1 unsqueezed",
                                  "y reshaped", "y itself"])
def test_an_output_the_passes_made_a_view_of_an_argument_is_a_tensor_of_its_own(case):
    """(y * 1).reshape(-1) is a new tensor in eager; simplify made it y.reshape(-1), a view of
    the argument's memory, so out.add_(1) changed y too (y became 2.0 where eager's stays 1.0).
    A real view (y.reshape(-1), y itself) still shares y's memory, as in eager."""
    body = {"y * 1 reshaped": lambda y: (y * 1).reshape(-1), "y / 1 transposed": lambda y: (y / 1).t(),
            "y - 0.0 row": lambda y: (y - 0.0)[0], "y * 1 unsqueezed": lambda y: (y * 1).unsqueeze(0),
            "y reshaped": lambda y: y.reshape(-1), "y itself": lambda y: y}[case]
    res = []
    for m, comp in ((torch, None), (tg, None), (tg, tg.compile)):
        f = comp(body) if comp else body
        for call in range(2):
            y = m.tensor(np.ones((1, 3)))
            o = f(y)
            o.add_(1)
            res.append((y.numpy().tolist(), o.numpy().tolist()))
    assert res[2:4] == res[:2] and res[4:6] == res[:2], res


def test_recompile_limit_warns_once_in_a_sequence_and_stays_right():
    cf = tg.compile(lambda x, c: x * c + 1, cache_limit=3)
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for c in [1, 2.0, True, -0.0, 0.0, 3, 4.5, False, 1, 2.0, -0.0]:
            got = cf(x, c)
            xt = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
            want = xt * c + 1
            assert np.array_equal(got.detach().numpy(), want.detach().numpy())
            assert got.requires_grad
    limit = [r for r in w if "recompile limit" in str(r.message)]
    assert len(limit) == 1, [str(r.message) for r in w]


@pytest.mark.parametrize("dynamic", [None, True, False])
def test_two_threads_call_one_compiled_function_with_different_shapes(dynamic):
    """Two threads at once, each with its own shapes, dtypes, constants and grad modes: every
    result bit for bit eager's, its gradient too; no crash."""
    def body(x, y, c):
        return (x * c + y).softmax(-1).sum(0), (x @ y.transpose(-1, -2)).tanh()
    cf = tg.compile(body, dynamic=dynamic, cache_limit=64)
    barrier = threading.Barrier(2)
    errors = []

    def work(k):
        r = np.random.default_rng(k)
        try:
            barrier.wait()
            for i in range(12):
                n, m = int(r.integers(0, 6)), int(r.integers(1, 6))
                dt = (tg.float32, tg.float64)[int(r.integers(0, 2))]
                c = (2, 0.5, True)[i % 3]
                a, b = r.standard_normal((n, m)), r.standard_normal((n, m))
                xc, xe = (tg.tensor(a, dtype=dt, requires_grad=bool(i % 2)) for _ in range(2))
                y = tg.tensor(b, dtype=dt)
                with tg.no_grad() if i % 4 == 3 else contextlib.nullcontext(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got, want = cf(xc, y, c), body(xe, y, c)
                for g, e in zip(got, want):
                    assert g.dtype == e.dtype and g.shape == e.shape and g.requires_grad == e.requires_grad
                    assert np.array_equal(g.detach().numpy(), e.detach().numpy(), equal_nan=True), (k, i)
                if got[0].requires_grad and n:
                    gc, = tg.autograd.grad(got[0].sum() + got[1].sum(), xc)
                    ge, = tg.autograd.grad(want[0].sum() + want[1].sum(), xe)
                    np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-5, atol=1e-6)
        except Exception as e:          # noqa: BLE001  (reported below, with the thread's state)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("case", ["argument", "output"])
def test_a_returned_view_by_a_0_dim_index_tensor_shares_memory_as_in_eager(case):
    """x[i] with a 0-dim index tensor is a select, a view: a write to the returned value
    reaches x (or the other returned value). The program computed a copy, so `o.add_(10)` left
    x as it was compiled; such a call now runs eagerly, with a warning that says why."""
    def f(m, x, i):
        if case == "argument":
            return (x[i],)
        y = x * 2
        return y, y[i]

    got = []
    for m, comp in ((torch, False), (tg, False), (tg, True)):
        x, i = m.tensor(np.arange(6.0).reshape(2, 3)), m.tensor(1)
        fn = tg.compile(lambda x, i: f(tg, x, i)) if comp else (lambda x, i: f(m, x, i))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = fn(x, i)
        outs[-1].add_(10)
        got.append([o.tolist() for o in (x, *outs)])
        if comp:
            assert any("0-dim tensor (x[i])" in str(e.message) for e in w)
    assert got[0] == got[1] == got[2]

"""Custom autograd.Function programs at random, in tracegrad and in torch, eager and compiled.

Each program chains a few Functions of a menu (saving inputs or outputs, several outputs,
`mark_dirty`, `mark_non_differentiable`, `set_materialize_grads(False)`, non-tensor arguments,
`needs_input_grad`, `once_differentiable`, torch 2's `setup_context` form, an input returned
as it is) with ordinary ops, then takes a backward: `backward()`, `autograd.grad`, or a
second derivative through `create_graph=True`. Everything torch shows is compared: values,
gradients (None or not), `requires_grad`, `is_leaf`, grad_fn names, and each error's type.
The same program runs inside `@tracegrad.compile` (called twice), where it must give torch's
numbers too, or torch's error.

Run more seeds: python tests/test_autograd_function_fuzz.py LO HI
"""
import random
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

KINDS = ["exp", "mul", "scale", "dirty", "two", "once", "setup", "ident", "sin", "wmul", "add1", "clone",
         "view", "inter", "pair", "nograd", "hook", "inplace"]


def make_functions(L):
    """The menu, as classes of library L's autograd.Function (L is torch or tracegrad)."""
    F = L.autograd.Function
    once = L.autograd.function.once_differentiable

    class Exp(F):
        @staticmethod
        def forward(ctx, x, save_out):
            y = x.exp()
            ctx.save_out = save_out
            ctx.save_for_backward(y if save_out else x)
            return y

        @staticmethod
        def backward(ctx, g):
            (s,) = ctx.saved_tensors
            return g * (s if ctx.save_out else s.exp()), None

    class Mul(F):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return (g * b if ctx.needs_input_grad[0] else None,
                    g * a if ctx.needs_input_grad[1] else None)

    class Scale(F):
        @staticmethod
        def forward(ctx, x, k, tag):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None, None

    class Dirty(F):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Two(F):
        @staticmethod
        def forward(ctx, x, nondiff, materialize):
            a = x * 2
            b = x.sin()
            ctx.save_for_backward(x)
            if nondiff:
                ctx.mark_non_differentiable(b)
            ctx.set_materialize_grads(materialize)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            (x,) = ctx.saved_tensors
            out = None
            if ga is not None:
                out = ga * 2
            if gb is not None:
                t = gb * x.cos()
                out = t if out is None else out + t
            return out, None, None

    class Once(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    class Setup(F):
        @staticmethod
        def forward(x, k):
            return x.tanh() * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.k = k
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            t = x.tanh()
            return g * (1 - t * t) * ctx.k, None

    class Ident(F):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3           # not the identity's: shows whether this node ran

    class View(F):
        @staticmethod
        def forward(ctx, x, whole):
            ctx.whole, ctx.shape = whole, x.shape
            return x.view_as(x) if whole else x[..., :1] if x.dim() else x.view(1)

        @staticmethod
        def backward(ctx, g):
            if ctx.whole:
                return g * 5, None
            if not len(ctx.shape):
                return (g * 5).reshape(()), None
            z = g.new_zeros(ctx.shape)
            z[..., :1] = g * 5
            return z, None

    class Inter(F):
        @staticmethod
        def forward(ctx, x):
            t = x.cos()                  # an intermediate, neither input nor output
            ctx.save_for_backward(t, x)
            return x.sin() * 2

        @staticmethod
        def backward(ctx, g):
            t, x = ctx.saved_tensors
            return g * 2 * t

    class Pair(F):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k, k        # a Python number among the outputs

        @staticmethod
        def backward(ctx, g, gk):
            return g * ctx.k, None

    return dict(exp=Exp, mul=Mul, scale=Scale, dirty=Dirty, two=Two, once=Once, setup=Setup, ident=Ident,
                view=View, inter=Inter, pair=Pair)


FUNCS = {}


def funcs(L):
    if L not in FUNCS:
        FUNCS[L] = make_functions(L)
    return FUNCS[L]


def gen(seed):
    r = random.Random(seed)
    shape = r.choice([(3,), (2, 3), ()])
    wreq = r.random() < 0.6
    steps = []
    for _ in range(r.randint(1, 5)):
        k = r.choice(KINDS)
        steps.append((k, r.random() < 0.5, r.random() < 0.5, r.choice([0.5, -2.0, 3.0])))
    mode = r.choice(["backward", "grad", "grad2", "grad2"])
    return shape, wreq, steps, mode, r.randint(0, 10**6)


def body(L, steps, x, w):
    """The program's forward: the loss and the tensors it shows along the way."""
    Fs = funcs(L)
    cur, extra, shown = x, [], []
    for k, f1, f2, c in steps:
        if k == "exp":
            cur = Fs["exp"].apply(cur, f1)
        elif k == "mul":
            cur = Fs["mul"].apply(cur, w) if f1 else Fs["mul"].apply(w, cur)
        elif k == "scale":
            cur = Fs["scale"].apply(cur, c, "tag")
        elif k == "dirty":
            cur = Fs["dirty"].apply(cur if f1 else cur * 1)
        elif k == "two":
            a, b = Fs["two"].apply(cur, f1, f2)
            extra.append(b)
            cur = a
        elif k == "once":
            cur = Fs["once"].apply(cur)
        elif k == "setup":
            cur = Fs["setup"].apply(cur, c)
        elif k == "ident":
            cur = Fs["ident"].apply(cur)
        elif k == "sin":
            cur = cur.sin()
        elif k == "wmul":
            cur = cur * w
        elif k == "add1":
            cur = cur + 1
        elif k == "clone":
            cur = cur.clone()
        elif k == "view":
            v = Fs["view"].apply(cur, f1)
            cur = v * 1 if f2 else v
        elif k == "inter":
            cur = Fs["inter"].apply(cur)
        elif k == "pair":
            cur, n = Fs["pair"].apply(cur, c)
            cur = cur + n
        elif k == "nograd":
            with L.no_grad():
                cur = Fs["exp"].apply(cur, f1)
        elif k == "hook":
            cur = Fs["scale"].apply(cur, c, "tag")
            if cur.requires_grad:
                cur.register_hook(lambda g: g * 7)
        elif k == "inplace":
            cur = Fs["exp"].apply(cur, f1)
            cur.add_(1)
        shown.append(cur)
    loss = cur.sum()
    for e in extra:
        if e.requires_grad:
            loss = loss + (e * e).sum()
    return loss, shown + extra


def describe(t):
    if not isinstance(t, (torch.Tensor, tg.Tensor)):
        return repr(t)
    fn = t.grad_fn
    return (tuple(t.shape), bool(t.requires_grad), bool(t.is_leaf), None if fn is None else type(fn).__name__)


def outcome(f):
    try:
        return "ok", f()
    except Exception as e:               # noqa: BLE001 - the error type is compared
        return type(e).__name__, str(e).split("\n")[0][:80]


def run(L, seed, compiled=False):
    shape, wreq, steps, mode, dseed = gen(seed)
    rs = np.random.RandomState(dseed)
    x0 = rs.uniform(-1, 1, size=shape)
    w0 = rs.uniform(-1, 1, size=shape)
    x = L.tensor(x0, dtype=L.float64, requires_grad=True)
    w = L.tensor(w0, dtype=L.float64, requires_grad=wreq)
    fwd = (lambda a, b: body(L, steps, a, b))
    if compiled:
        fwd = tg.compile(fwd)
    res = []
    st, out = outcome(lambda: fwd(x, w))
    res.append(st)
    if st != "ok":
        return res + [out]
    loss, shown = out
    if not compiled:              # a compiled call's intermediate tensors are its own
        res.append([describe(t) for t in shown])
    res.append(describe(loss))
    res.append(float(loss))
    wants = [x, w] if wreq else [x]

    def back():
        if mode == "backward":
            loss.backward()
            return [None if t.grad is None else t.grad.numpy().copy() for t in wants]
        if mode == "grad":
            gs = L.autograd.grad(loss, wants, allow_unused=True)
            return [None if g is None else g.numpy().copy() for g in gs]
        gs = L.autograd.grad(loss, wants, create_graph=True, allow_unused=True)
        first = [None if g is None else g.detach().numpy().copy() for g in gs]
        s = sum(g.sum() for g in gs if g is not None and g.requires_grad)
        if not isinstance(s, (torch.Tensor, tg.Tensor)):
            return first, "no graph"
        hs = L.autograd.grad(s, wants, allow_unused=True)
        return first, [None if h is None else h.numpy().copy() for h in hs]
    res.append(outcome(back))
    return res


def same(a, b, path="", rtol=1e-10):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        # elements that nearly cancel (1 - tanh(x)**2 where tanh(x) is near 1, of ops whose last
        # bits differ between libraries) lose their relative accuracy: an absolute tolerance
        # relative to the array's largest element
        fin = np.abs(b[np.isfinite(b)]) if isinstance(b, np.ndarray) else np.zeros(0)
        scale = float(fin.max()) if fin.size else 0.0
        if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=1e-12 + 1e-9 * scale, equal_nan=True):
            return f"{path}: {a} vs {b}"
        return None
    if isinstance(a, float) and isinstance(b, float):
        return None if np.isclose(a, b, rtol=rtol, atol=1e-12, equal_nan=True) else f"{path}: {a} vs {b}"
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (u, v) in enumerate(zip(a, b)):
            d = same(u, v, f"{path}[{i}]", rtol)
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def compare(got, want, compiled):
    if got[0] != want[0]:
        return f"forward: {got[:2]} vs {want[:2]}"
    if got[0] != "ok":
        return None
    *g, gb = got
    *w, wb = want
    d = same(g, w, "forward")
    if d:
        return d
    if gb[0] != wb[0]:
        return f"backward: {gb} vs {wb}"
    if gb[0] != "ok":
        return None
    return same(gb[1], wb[1], "backward")


def check(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = run(torch, seed)
        got = run(tg, seed)
        d = compare(got, want, False)
        assert d is None, (seed, "eager", d, gen(seed))
        if want[0] != "ok":
            return
        want_c = [want[0]] + want[2:]
        got_c = run(tg, seed, compiled=True)
        d = compare(got_c, want_c, True)
        assert d is None, (seed, "compiled", d, gen(seed))


def _once_program(L):
    Fs = funcs(L)
    x = L.tensor([0.5, 1.5], dtype=L.float64, requires_grad=True)
    w = L.tensor([2.0, 3.0], dtype=L.float64, requires_grad=True)
    loss = (Fs["once"].apply(x) * w).sum()
    (gx,) = L.autograd.grad(loss, x, create_graph=True)
    return x, w, gx


def test_a_once_differentiable_gradient_is_a_constant_to_a_later_grad_of_other_inputs():
    # seed 3: torch's error node leads to a new leaf, so autograd.grad(..., w) does not run it
    # (w's derivative is None); tracegrad's led to the gradients it read and raised
    res = {}
    for L in (torch, tg):
        x, w, gx = _once_program(L)
        fn = gx.grad_fn
        (edge, nr), = fn.next_functions
        assert type(fn).__name__ == "Error" and type(edge).__name__ == "AccumulateGrad" and nr == 0
        assert edge.variable is not x and edge.variable is not w and edge.variable.requires_grad
        res[L] = L.autograd.grad(gx.sum(), w, allow_unused=True)
    assert res[torch] == (None,) and res[tg] == (None,)


def test_a_backward_through_a_once_differentiable_gradient_raises():
    for L in (torch, tg):
        x, w, gx = _once_program(L)
        with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with "
                                               "@once_differentiable"):
            gx.sum().backward()


@pytest.mark.parametrize("chunk", range(10))
def test_function_programs_match_torch(chunk):
    for seed in range(chunk * 15, chunk * 15 + 15):
        check(seed)


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    bad = []
    for s in range(lo, hi):
        try:
            check(s)
        except AssertionError as e:
            bad.append(s)
            print(str(e)[:600])
        except Exception as e:            # noqa: BLE001
            bad.append(s)
            print(s, "CRASH", type(e).__name__, str(e)[:300])
    print("bad", bad)

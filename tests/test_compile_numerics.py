"""Compiled results keep the IEEE results of the dtype the user asked for.

Every pass and the generated code must give what eager tracegrad gives, bit for bit
(inf, nan and the sign of zero included), and what torch gives where torch's result is
exact (IEEE +, -, *, / and sqrt; a reduction of few enough terms that no order matters).
Reductions over many floats may differ from eager in the last bits only by summation
order (BLAS row sums, per-chunk partial sums), and from torch by its own order; those are
compared within a few units in the last place of the dtype, and each such test says why.
"""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn.functional as TF

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def same_bits(got, want):
    """Equal as IEEE values: same dtype and shape, nan where the other is nan, and every
    other element equal with the same sign (0.0 is not -0.0)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    gn, wn = np.isnan(got), np.isnan(want)
    bad = (gn != wn) | (~gn & ((got != want) | (np.signbit(got) != np.signbit(want))))
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} differ: got {got[bad][:6]}, want {want[bad][:6]}"


def arr(t):
    """A tracegrad tensor's values as numpy (bfloat16 in its float32 storage)."""
    return t.detach()._data


def tarr(t):
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def run_both(fn, *args):
    """fn eagerly and compiled (twice: the first call traces, the second runs the cached program)."""
    eager = fn(*args)
    c = tg.compile(fn)
    c(*args)
    return eager, c(*args)


def with_torch(fn, *arrays, dtype=None):
    ts = [torch.tensor(a) if dtype is None else torch.tensor(a).to(getattr(torch, dtype.name)) for a in arrays]
    gs = [tg.tensor(a) if dtype is None else tg.tensor(a).to(dtype) for a in arrays]
    return fn(torch, *ts), gs


SPECIAL32 = np.array([1e-8, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38, 1e-45, 1.17e-38, 0.1, 7.0],
                     np.float32)


# -- the issue's cases ----------------------------------------------------------------------

@pytest.mark.parametrize("name, fn", [
    ("(x + c) - c", lambda m, x, y: (x + 1.0) - 1.0),
    ("x + y - x", lambda m, x, y: x + y - x),
    ("(x * c1) * c2", lambda m, x, y: (x * 3.0) * 0.1),
    ("(x * .5) * .25", lambda m, x, y: (x * 0.5) * 0.25),
    ("(x * 2) * 4", lambda m, x, y: (x * 2) * 4),
    ("(x + c1) + c2", lambda m, x, y: (x + 0.1) + 0.2),
    ("x + 0.0", lambda m, x, y: (x + 0.0) * 1.0),
    ("0.0 + x", lambda m, x, y: (0.0 + x) * 3),
    ("x - 0.0", lambda m, x, y: (x - 0.0) * 2),
    ("x - -0.0", lambda m, x, y: (x - -0.0) * 2),
    ("x + -0.0", lambda m, x, y: (x + -0.0) * 2),
    ("x * 1", lambda m, x, y: (x * 1) - y),
    ("x * 0", lambda m, x, y: x * 0.0 + y * -0.0),
    ("(x + y) + y", lambda m, x, y: (x + y) + y),
    ("y + y", lambda m, x, y: (y * x) + (y * x)),
    ("--x", lambda m, x, y: -(-x) * y),
    ("x / 1", lambda m, x, y: (x / 1) + y),
    ("x / 0", lambda m, x, y: x / 0.0 + y / -0.0),
    ("powers", lambda m, x, y: x ** 2 + x ** 3 - y ** -1 + y ** -2 + x.abs() ** 0.5 + x ** 4 + x ** 1),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rewrites_keep_ieee_results(name, fn, dtype):
    x = SPECIAL32.astype(dtype)
    y = np.roll(x, 3)
    want = fn(torch, torch.tensor(x), torch.tensor(y))
    eager, compiled = run_both(lambda a, b: fn(tg, a, b), tg.tensor(x), tg.tensor(y))
    same_bits(arr(compiled), arr(eager))
    if name != "powers":              # torch's pow(x, 4) and numpy's differ in the last bit
        same_bits(arr(compiled), tarr(want))
    # and the gradients: compiled as eager autograd gives them (each value used at most twice,
    # so no order of adding gradient terms differs), and as the unoptimized trace gives them
    xs = [tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)]
    e_grads = tg.autograd.grad(fn(tg, *xs).sum(), xs, allow_unused=True)
    c = tg.compile(lambda a, b: fn(tg, a, b).sum())
    for _ in range(3):
        xc = [tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)]
        c_grads = tg.autograd.grad(c(*xc), xc, allow_unused=True)
        ref = traced_gradients(lambda a, b: fn(tg, a, b).sum(), xc)
        for ge, gc, gr in zip(e_grads, c_grads, ref):
            if gr is not None:
                same_bits(arr(gc), arr(gr))
            if ge is not None and name != "powers":
                same_bits(arr(gc), arr(ge))


def test_issue_examples_against_torch():
    x = tg.tensor([1e-8, 1.0, -0.0], dtype=tg.float32)
    same_bits(arr(tg.compile(lambda x: (x + 1.0) - 1.0)(x)), np.array([0.0, 1.0, 0.0], np.float32))
    x, y = tg.tensor([np.inf, 1.0]), tg.tensor([2.0, 3.0])
    same_bits(arr(tg.compile(lambda x, y: x + y - x)(x, y)), np.array([np.nan, 3.0], np.float32))
    h = tg.full((10000,), 30.0, dtype=tg.float16)
    got = tg.compile(lambda x: (x * .01).sum())(h)
    want = (torch.full((10000,), 30.0, dtype=torch.float16) * .01).sum()
    assert got.dtype is tg.float16 and math.isfinite(got.item()) and got.item() == want.item()
    s = tg.compile(lambda x: tg.exp(x) * 1e-30)(tg.tensor(100.0))
    assert s.dtype is tg.float32 and s.item() == math.inf == (torch.exp(torch.tensor(100.0)) * 1e-30).item()


def test_common_subexpressions_tell_zero_signs_and_number_types_apart():
    def f(x, i):
        return (x + 0.0) * 2, (x + -0.0) * 2, (x - 0.0) * 2, (x - -0.0) * 2, i * 1, i * 1.0, i + True
    x = tg.tensor([-0.0, 0.0, 1.5, -np.inf])
    i = tg.tensor([3, -4])
    eager, compiled = run_both(f, x, i)
    for e, c in zip(eager, compiled):
        assert c.dtype is e.dtype
        same_bits(arr(c), arr(e))
    same_bits(arr(compiled[0]), np.array([0.0, 0.0, 3.0, -np.inf], np.float32))
    same_bits(arr(compiled[1]), np.array([-0.0, 0.0, 3.0, -np.inf], np.float32))


# -- one-element graphs run in the user's dtype ----------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_one_element_graphs_compute_in_their_dtype(dtype, shape):
    def f(x, y):
        a = tg.exp(x) * 1e-30                      # inf in float32, 2.7e13 in float64
        b = (x + 1e-9) - x                         # 0 in float32 (1e-9 is below x's precision)
        c = tg.sqrt(y) / 3.0 + tg.tanh(y) * tg.sin(x) - tg.log(y) + tg.cos(y) * tg.expm1(y) - tg.log1p(y)
        return a, b, c, (x * y).sum(), (-y * 0.0).mean(), x / 0.0, (x > y) * 1.0
    xs = np.full(shape, 100.0, dtype)
    ys = np.full(shape, 0.3, dtype)
    eager, compiled = run_both(f, tg.tensor(xs), tg.tensor(ys))
    with torch.no_grad():
        tx, ty = torch.tensor(xs), torch.tensor(ys)
        want = (torch.exp(tx) * 1e-30, (tx + 1e-9) - tx, None, (tx * ty).sum(), (-ty * 0.0).mean(), tx / 0.0,
                (tx > ty) * 1.0)
    for k, (e, c, w) in enumerate(zip(eager, compiled, want)):
        same_bits(arr(c), arr(e))
        if w is not None:
            same_bits(arr(c), tarr(w))
    assert (compiled[0].item() == math.inf) == (dtype == "float32")


def test_one_element_backward_in_float32():
    # the gradient of a scalar program: the joint forward+backward (after two training steps)
    # and the plain backward both round to float32 after every op, as eagerly
    x0 = np.array([0.7], np.float32)
    f = tg.compile(lambda x: (tg.sin(x) * 1.01 + 0.1).tanh().sum() * 3.3)
    for _ in range(4):
        x = tg.tensor(x0, requires_grad=True)
        f(x).backward()
        xe = tg.tensor(x0, requires_grad=True)
        (tg.sin(xe) * 1.01 + 0.1).tanh().sum().mul(3.3).backward()
        same_bits(arr(x.grad), arr(xe.grad))
        assert x.grad.dtype is tg.float32


# -- division by zero, empty reductions, floor division with grad ------------------------------------

def test_division_by_zero_and_empty_mean_compiled_as_eager_and_torch():
    x = np.array([1.0, -2.0, 0.0, -0.0, np.inf], np.float32)
    f = lambda m, x: (x / 0.0, x / -0.0, x.mean(), x[:0].mean(), (x * 2)[:0].sum())  # noqa: E731
    tx = torch.tensor(x, requires_grad=True)
    want = f(torch, tx)
    gx = tg.tensor(x, requires_grad=True)
    eager, compiled = run_both(lambda x: f(tg, x), gx)
    for e, c, w in zip(eager, compiled, want):
        same_bits(arr(c), arr(e))
        same_bits(arr(c), tarr(w))
    (tg.stack([o.sum() for o in compiled]).sum()).backward()
    (torch.stack([o.sum() for o in want]).sum()).backward()
    same_bits(arr(gx.grad), tarr(tx.grad))


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0)])
def test_empty_mean_with_grad(shape):
    a = np.ones(shape, np.float32)
    tx = torch.tensor(a, requires_grad=True)
    torch.stack([tx.mean(), tx.sum()]).sum().backward()
    gx = tg.tensor(a, requires_grad=True)
    out = tg.compile(lambda x: tg.stack([x.mean(), x.sum()]).sum())(gx)
    same_bits(arr(out), np.array(np.nan, np.float32))
    out.backward()
    same_bits(arr(gx.grad), tarr(tx.grad))


def test_floor_divide_on_a_tensor_that_requires_grad():
    fn = lambda m, x: (x * 3) // 2  # noqa: E731
    a = np.array([3.0, 5.0, -7.5], np.float32)
    tx = torch.tensor(a, requires_grad=True)
    want = fn(torch, tx)
    gx = tg.tensor(a, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # no fallback warning: it compiles
        c = tg.compile(lambda x: fn(tg, x))
        got = c(gx)
    same_bits(arr(got), tarr(want))
    assert got.requires_grad and c.last_program is not None
    with pytest.raises(RuntimeError) as t_err:
        want.sum().backward()
    with pytest.raises(RuntimeError) as g_err:
        got.sum().backward()
    assert str(g_err.value) == str(t_err.value) == "derivative for aten::floor_divide is not implemented"
    # gradients that do not pass through it still work
    gx2 = tg.tensor(a, requires_grad=True)
    out = tg.compile(lambda x: ((x // 2).detach() * x).sum())(gx2)
    out.backward()
    same_bits(arr(gx2.grad), (a // 2).astype(np.float32))


# -- float16 and bfloat16 reductions accumulate in float32 --------------------------------------------

def test_float16_sums_accumulate_in_float32_eagerly_and_compiled():
    for shape, dim in (((10000,), None), ((10000, 2), 0), ((2, 10000), 1)):
        x = tg.ones(shape, dtype=tg.float16)
        f = (lambda x: x.sum()) if dim is None else (lambda x, d=dim: x.sum(d))
        eager, compiled = run_both(f, x)
        assert np.all(arr(eager) == 10000) and eager.dtype is tg.float16
        same_bits(arr(compiled), arr(eager))
        same_bits(arr(eager), tarr(f(torch.ones(shape, dtype=torch.float16))))


def test_float16_scans_accumulate_in_float32():
    x = tg.ones(5000, dtype=tg.float16)
    for f in (lambda m, x: m.cumsum(x, 0), lambda m, x: m.cumprod(x * 1.001, 0)):
        eager, compiled = run_both(lambda x: f(tg, x), x)
        want = tarr(f(torch, torch.ones(5000, dtype=torch.float16)))
        same_bits(arr(compiled), arr(eager))
        e = arr(eager).astype(np.float32)
        ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float32)
        assert np.all(np.abs(e - want) <= ulp)
    assert arr(tg.cumsum(x, 0))[-1] == 5000


REDUCTIONS = [
    ("sum0", lambda m, x: (x * 0.5 + 1).sum(0)),
    ("sum1", lambda m, x: (x * 0.5 + 1).sum(1)),
    ("mean", lambda m, x: (x * 0.5).mean()),
    ("mean1", lambda m, x: (x - 1).mean(1, keepdim=True)),
    ("var", lambda m, x: x.var(1)),
    ("std", lambda m, x: x.std(0)),
    ("norm", lambda m, x: x.norm(dim=1)),
    ("logsumexp", lambda m, x: m.logsumexp(x * 2, 1)),
    ("softmax", lambda m, x: m.softmax(x * 2, 1) * 3),
    ("log_softmax", lambda m, x: m.log_softmax(x, 0)),
    ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x * 2, (x.shape[1],))),
]


@pytest.mark.parametrize("name, fn", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(40, 30), (600, 300)])
def test_low_precision_reductions_match_torch(name, fn, dtype, shape):
    a = (np.random.default_rng(0).standard_normal(shape) * 3).astype(np.float32)
    dt = getattr(tg, dtype)
    want = tarr(fn(torch, torch.tensor(a).to(getattr(torch, dtype))))
    eager, compiled = run_both(lambda x: fn(tg, x), tg.tensor(a).to(dt))
    assert eager.dtype is dt and compiled.dtype is dt
    e, c = arr(eager).astype(np.float32), arr(compiled).astype(np.float32)
    # one unit in the last place of the 16-bit result per rounding of it: torch's and numpy's
    # float32 sums add in other orders, so a result near a 16-bit rounding boundary may land
    # on either side (and layer_norm and softmax round the scaled input once more)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float32) * (8 if dtype == "bfloat16" else 1)
    assert np.all(np.abs(e - want) <= 3 * ulp), np.max(np.abs(e - want) / ulp)
    if name == "layer_norm":
        # its statistics are float32 means: compiled row sums go through BLAS (another order)
        assert np.all(np.abs(c - e) <= 2 * ulp)
    else:
        same_bits(c, e)


def test_float16_layer_norm_computes_in_float32():
    a = np.random.default_rng(1).standard_normal((8, 512)).astype(np.float32) * 50 + 300
    x = tg.tensor(a).to(tg.float16)
    got = arr(TF.layer_norm(x, (512,))).astype(np.float32)
    want = tarr(torch.nn.functional.layer_norm(torch.tensor(a).half(), (512,)))
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(got - want) <= 2 * ulp)


# -- random elementwise programs with special values: compiled == eager, bit for bit ----------------

UNARY = ["neg", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "sigmoid", "reciprocal", "sq", "cube", "inv2",
         "half_pow", "pow4", "relu", "expm1", "log1p"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "where"]
LITERALS = [0.0, -0.0, 1, 1.0, -1.0, 2.0, 0.5, 0.25, 4.0, 3.0, 0.1, 1e-30, 1e30, -7.5, math.inf, math.nan]


def special_values(dtype, shape, rng):
    f = np.finfo(np.float16 if dtype is tg.float16 else np.float64 if dtype is tg.float64 else np.float32)
    huge, tiny = float(f.max), float(f.smallest_subnormal)
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, huge, -huge, huge / 3, tiny, -tiny, 3 * tiny,
                     float(f.tiny), 0.5, 2.0, 1e-3, 88.7, -88.7, 1e4])
    n = int(np.prod(shape, dtype=np.int64))
    vals = np.where(rng.random(n) < 0.6, rng.choice(pool, n), rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n))
    with np.errstate(all="ignore"):
        return np.asarray(vals.reshape(shape), np.float32 if dtype is tg.bfloat16 else dtype.np)


def apply_op(op, args, lit, flip):
    x = args[0]
    if op in UNARY:
        return {"neg": lambda: -x, "abs": lambda: x.abs(), "exp": lambda: x.exp(), "log": lambda: x.log(),
                "sqrt": lambda: x.sqrt(), "tanh": lambda: x.tanh(), "sin": lambda: x.sin(), "cos": lambda: x.cos(),
                "sigmoid": lambda: x.sigmoid(), "reciprocal": lambda: x.reciprocal(), "sq": lambda: x ** 2,
                "cube": lambda: x ** 3, "inv2": lambda: x ** -2, "half_pow": lambda: x ** 0.5,
                "pow4": lambda: x ** 4, "relu": lambda: x.relu(), "expm1": lambda: x.expm1(),
                "log1p": lambda: x.log1p()}[op]()
    y = args[1] if lit is None else lit
    if op == "where":
        return tg.where(x > args[1], x, y)
    if op == "maximum":
        return tg.maximum(x, args[1])
    if op == "minimum":
        return tg.minimum(x, args[1])
    if lit is not None and flip and op in ("add", "mul"):
        return {"add": lambda: lit + x, "mul": lambda: lit * x}[op]()
    return {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "div": lambda: x / y}[op]()


def random_program(rng, n_inputs):
    steps = []
    for _ in range(int(rng.integers(3, 12))):
        r = rng.random()
        if r < 0.35:
            steps.append((str(rng.choice(UNARY)), int(rng.integers(0, 10 ** 6)), None, None, False))
        elif r < 0.7:
            steps.append((str(rng.choice(BINARY)), int(rng.integers(0, 10 ** 6)), int(rng.integers(0, 10 ** 6)), None,
                          False))
        else:
            op = str(rng.choice(["add", "sub", "mul", "div"]))
            steps.append((op, int(rng.integers(0, 10 ** 6)), None, LITERALS[int(rng.integers(0, len(LITERALS)))],
                          bool(rng.random() < 0.5)))
    # the issue's patterns, spliced in: (v + c) - c, v + w - v, (v * c1) * c2
    k = int(rng.integers(0, 3))
    c = LITERALS[int(rng.integers(0, len(LITERALS)))]

    def program(*xs):
        vals = list(xs)
        for op, i, j, lit, flip in steps:
            args = [vals[i % len(vals)]] + ([vals[j % len(vals)]] if j is not None else [])
            vals.append(apply_op(op, args, lit, flip))
        v, w = vals[-1], vals[-2]
        tail = (v + c) - c if k == 0 else v + w - v if k == 1 else (v * c) * 0.5
        return tail, vals[-3] * 2 + vals[n_inputs]
    return program


CASES = [(dt, shape) for dt in ("float32", "float64", "float16", "bfloat16")
         for shape in [(), (1,), (7,), (0,), (3, 0), (64, 300)]]


def traced_gradients(program, xs):
    """The gradients autodiff derives from the traced program, run op by op through the
    eager kernels with no pass in between: what compiled gradients must equal, bit for
    bit. (Eager autograd derives from its grad_fn graph walked depth first, so a value
    with three or more uses may add its gradient's terms in another order than the trace,
    which is the order the program ran in; that is the one difference left.)"""
    from tracegrad.autodiff import backward_args, derive
    from tracegrad.compile import trace_function
    from tracegrad.ir.graph import V
    from tracegrad.interpret import run_eager
    g, _, _, outs = trace_function(program, tuple(xs), {}, "reference")
    g.outputs = [V(o._name) for o in outs]
    n = len(xs)
    bwd = derive(g, list(g.outputs), list(g.inputs[:n]))
    want = [bwd[v]["fwd"] for v in bwd.inputs if bwd[v]["role"] == "saved"]
    fwd = g.copy()
    fwd.outputs = [V(w) for w in want]
    with tg.no_grad():
        ins = [x.detach() for x in xs] + [g[v]["value"] for v in g.inputs[n:]]
        vals = dict(zip(want, run_eager(fwd, ins)))
        seeds = [tg.ones(tuple(o.shape), dtype=o.dtype) for o in outs]
        return run_eager(bwd, backward_args(bwd, seeds, lambda v, a: vals[v]))


@pytest.mark.parametrize("seed", range(48))
def test_random_elementwise_programs_compile_to_the_eager_bits(seed):
    rng = np.random.default_rng(1000 + seed)
    dtname, shape = CASES[seed % len(CASES)]
    dtype = getattr(tg, dtname)
    n_inputs = 2
    program = random_program(rng, n_inputs)
    data = [special_values(dtype, shape, rng) for _ in range(n_inputs)]
    grad = dtname in ("float32", "float64") and seed % 2 == 0
    xs = [tg.tensor(d).to(dtype).requires_grad_(grad) for d in data]
    eager = program(*xs)
    if grad:
        e_grads = traced_gradients(program, xs)
    c = tg.compile(program)
    for _ in range(3):                     # trace, cached run, and (with grad) the joint forward+backward
        xs_c = [tg.tensor(d).to(dtype).requires_grad_(grad) for d in data]
        compiled = c(*xs_c)
        for e, o in zip(eager, compiled):
            assert o.dtype is e.dtype
            same_bits(arr(o), arr(e))
        if grad:
            c_grads = tg.autograd.grad(sum(o.sum() for o in compiled), xs_c, allow_unused=True)
            for ge, gc in zip(e_grads, c_grads):
                if ge is not None:             # (None for an unused input compiled: issue 14's item 4)
                    same_bits(arr(gc), arr(ge))


def test_property_cases_cover_every_dtype_and_shape():
    covered = {CASES[s % len(CASES)] for s in range(48)}
    assert covered == set(CASES)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["dim-keep", "all", "dims", "neg-keep", "empty-dims", "last"])
def test_compiled_reductions_match_torch_and_the_eager_kernels(dtype, case):
    fn = {"dim-keep": lambda m, x: m.sum(x, dim=1, keepdim=True), "all": lambda m, x: m.sum(x),
          "dims": lambda m, x: m.amax(x, dim=(0, -1)), "neg-keep": lambda m, x: m.amin(x, dim=-2, keepdim=True),
          "empty-dims": lambda m, x: m.sum(x, dim=()), "last": lambda m, x: m.sum(x, dim=-1)}[case]
    a = np.random.default_rng(0).standard_normal((6, 5, 4)).astype(dtype)
    a[0, 0, 0], a[1, 1, 1], a[2, 2, 2] = np.nan, -0.0, np.inf
    c = tg.compile(lambda x: fn(tg, x * 1.5))
    got = c(tg.tensor(a)).numpy()
    ref = fn(torch, torch.tensor(a) * 1.5).numpy()
    eager = fn(tg, tg.tensor(a) * 1.5).numpy()
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == np.float32 else 1e-12)
    assert np.array_equal(got, eager, equal_nan=True)       # the same bits as the op's own kernel

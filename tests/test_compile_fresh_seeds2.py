"""Reduced repros of what the compile fuzzers found on seeds no run had tried before
(test_compile_dtype_fuzz.py 16000-17999 and the open seeds 15136 and 15890,
test_compile_call_sequence_fuzz.py 3300-4999, test_compile_mutation_fuzz.py 8500-9999,
test_compile_step_fuzz.py 800-1599, test_compile_random.py 42000-42999 in float32 and float64,
triton_checks.py's programs 43000-43299 under the interpreter), and of what probes next to them
found, each compared with torch and with eager tracegrad (bit for bit where the same primitives
run)."""
import os
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    same = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
    if got.dtype.kind == "f":
        same |= np.isnan(got) & np.isnan(want)          # a NaN is any NaN
    assert np.all(same), f"{what}: {got!r} != {want!r}"


def _np(t):
    """A tensor's values as float32/float64/int array (bfloat16 and float16 as float32)."""
    t = t.detach()
    if str(t.dtype).endswith(("bfloat16", "float16")):
        t = t.float()
    return t.cpu().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _three(f, *arrays, dtype=None, **kw):
    """f run by torch, eager tracegrad and compiled tracegrad on tensors of `arrays`."""
    out = []
    for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
        xs = [m.tensor(a, dtype=getattr(m, dtype) if dtype else None, **kw) for a in arrays]
        fn = tg.compile(lambda *a: f(tg, *a), fullgraph=True) if name == "compiled" else (lambda *a: f(m, *a))
        out.append((xs, fn(*xs)))
    return out


# -- a float16/bfloat16 product rounds at every step, as torch's ---------------------------------
# dtype fuzzer seed 15890: prod of float16 [6e-08, -0.33, -65504] was 0.001288 (float32 accumulation
# rounded once); torch's reduction multiplies in float16 (6e-8 * -0.33 underflows to -0): 0.0.

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["underflow", "overflow", "rounding dim 1", "rounding dim 0", "two dims"])
def test_a_half_precision_product_rounds_each_step_as_torchs(dtype, case):
    r = np.random.default_rng(0)
    a, dim = {"underflow": (np.array([6e-08, -0.33, -65504.0] if dtype == "float16" else [1e-30, 1e-10, 1e30]), 0),
              "overflow": (np.array([60000.0, 2.0, 0.25] if dtype == "float16" else [3e38, 4.0, 0.125]), 0),
              "rounding dim 1": (r.uniform(0.7, 1.6, (5, 9)), 1),
              "rounding dim 0": (r.uniform(0.7, 1.6, (9, 5)), 0),
              "two dims": (r.uniform(0.7, 1.6, (3, 4, 5)), (0, 2))}[case]

    def f(m, x):
        if isinstance(dim, tuple):       # prod takes one dim: the rows of the two as one
            return x.permute(1, 0, 2).reshape(4, -1).prod(1)
        return x.prod(dim), x.prod()

    (_, want), (_, eager), (_, got) = _three(f, a, dtype=dtype)
    want, eager, got = [w if isinstance(w, tuple) else (w,) for w in (want, eager, got)]
    for k, (w, e, c) in enumerate(zip(want, eager, got)):
        _bits(_np(e), _np(w), f"{case} {k}: eager vs torch")
        _bits(_np(c), _np(e), f"{case} {k}: compiled vs eager")


def test_a_long_half_precision_product_stays_near_torchs():
    # past _PROD_STEPS factors pairwise, as torch's vector lanes take their own order: a few ulps
    a = np.random.default_rng(1).uniform(0.9, 1.1, 1000)
    for dt in ("float16", "bfloat16"):
        want = torch.tensor(a, dtype=getattr(torch, dt)).prod().float().item()
        got = tg.tensor(a, dtype=getattr(tg, dt)).prod().float().item()
        ulp = 2.0 ** (-10 if dt == "float16" else -7) * abs(want)
        assert abs(got - want) <= 24 * ulp, (dt, got, want)


# -- amax/amin and max()/min(): the sign of a zero among tied zeros ------------------------------
# dtype fuzzer seed 15136: amax(dim=-1) of [0., 0., -0.] was -0.0 eagerly and compiled (numpy's
# float32/float64 reduce keeps the last of a tie, its float16 loop the first); torch's amax keeps the
# first (its scalar loop keeps the running value on a tie). (max() over everything is torch's reduce_all,
# a tree across the lanes of the machine's vectors: not asked here.)

@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("row", [[0., -0.], [-0., 0.], [0., 0., -0.], [-0., -0., 0.], [-0., 0., -0.], [-1., 0., -0.]])
def test_the_sign_of_a_tied_zero_maximum_is_torchs(dtype, row):
    a = np.array([row, row[::-1]])

    def f(m, x):
        return (x.amax(), x.amin(), x.amax(-1), x.amin(1, keepdim=True), x.amax(0), x.T.amax(0),
                x.amax((0, 1)), (-x).amin(-1), x.max(-1).values)

    (_, want), (_, eager), (_, got) = _three(f, a, dtype=dtype)
    for k, (w, e, c) in enumerate(zip(want, eager, got)):
        _bits(_np(e), _np(w), f"{row} result {k}: eager vs torch")
        _bits(_np(c), _np(e), f"{row} result {k}: compiled vs eager")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_dtype_fuzzers_seeds_that_failed():
    # (16662: past torch's own clamp bug its backward reaches floor_divide, which has no derivative,
    # as tracegrad's says; 12518: clamp's checked 0-dim bound, not traced with fullgraph=True, the
    # library's documented refusal: the fuzzer now knows both)
    import test_compile_dtype_fuzz as D
    for seed in (15136, 15890, 16193, 16662, 17338, 12518):
        with np.errstate(all="ignore"):
            D.check_program(seed)


# -- the gradient of reciprocal: -g * (out * out), torch's grouping ------------------------------
# dtype fuzzer seed 16193: the gradient of 2**62 / x at x = 60000 in float16 was -inf, torch's NaN:
# torch squares the result first (1/60000 ** 2 underflows to 0, inf * 0), eager took (-g * out) * out.

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_reciprocals_gradient_squares_the_result_first_as_torch():
    a = np.array([60000.0, 3.0, 0.1, -7.5])

    def f(m, x):
        return 1000 / x, 4611686018427387904 / x, x.reciprocal()

    for dtype in ("float16", "bfloat16", "float32", "float64"):
        res = []
        for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
            x = m.tensor(a, dtype=getattr(m, dtype), requires_grad=True)
            fn = tg.compile(lambda x: f(tg, x)) if name == "compiled" else (lambda x: f(m, x))
            res.append([_np(m.autograd.grad(fn(x)[k].sum(), x)[0]) for k in range(3)])
        for k, (w, e, c) in enumerate(zip(*res)):
            _bits(e, w, f"{dtype} gradient {k}: eager vs torch")
            _bits(c, e, f"{dtype} gradient {k}: compiled vs eager")


# -- y + y is not y * 2 before autodiff ----------------------------------------------------------
# dtype fuzzer seed 17338: x + x beside matmul(x, x.mT) in bfloat16; the compiled gradient of x was
# 5.53125 where eager's and torch's is 5.5: the pass before autodiff made x + x into x * 2, whose
# derivative adds 2g in one term where eager adds g twice ((t + g) + g: another rounding).

@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_y_plus_y_beside_another_use_sums_the_gradient_as_eager(dtype):
    a = np.array([[0.79, 4.11, -0.34], [-1.11, 1e-05, -1.13]])
    w = [np.linspace(0.5, 1.5, 6).reshape(2, 3), np.linspace(0.5, 1.5, 4).reshape(2, 2)]
    r = np.random.default_rng(3)
    arrays = [a] + [r.standard_normal((2, 3)) * 3 for _ in range(6)]

    def f(m, x):
        return x + x, m.matmul(x, x.transpose(-1, -2))

    for arr in arrays:
        res = []
        for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
            x = m.tensor(arr, dtype=getattr(m, dtype), requires_grad=True)
            outs = tg.compile(lambda x: f(tg, x))(x) if name == "compiled" else f(m, x)
            loss = sum((o.to(m.float64) * m.tensor(wk)).sum() for o, wk in zip(outs, w))
            res.append(_np(m.autograd.grad(loss, x)[0]))
        _bits(res[2], res[1], f"{dtype} {arr}: compiled vs eager")
        if dtype == "bfloat16":
            _bits(res[1], res[0], f"{dtype} {arr}: eager vs torch")


# -- unfold's backward on a dynamic size -----------------------------------------------------------
# mutation fuzzer seed 9002: the third call (other shapes: a dynamic recompile) raised TypeError
# "can't convert np.ndarray of type numpy.object_" at backward: unfold's rule built its window
# positions with np.arange of the symbolic size.

@pytest.mark.parametrize("dynamic", [None, True])
def test_unfold_backward_on_a_dynamic_size_is_eagers(dynamic):
    def f(m, x):
        return (x.diagonal(1, -1, -3).unfold(-2, 2, 1) * 0.3).exp()

    cf = tg.compile(lambda x: f(tg, x), dynamic=dynamic)
    for shape in [(4, 2, 3), (4, 2, 3), (4, 3, 4), (5, 4, 6), (3, 5, 4)]:
        a = np.random.default_rng(sum(shape)).standard_normal(shape)
        res = []
        for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
            x = m.tensor(a, requires_grad=True)
            out = cf(x) if name == "compiled" else f(m, x)
            w = np.random.default_rng(1).standard_normal(tuple(out.shape))
            g, = m.autograd.grad((out * m.tensor(w)).sum(), x)
            res.append((_np(out), _np(g)))
        np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-12, atol=1e-12, err_msg=f"{shape}: eager vs torch")
        for k in range(2):
            _bits(res[2][k], res[1][k], f"{shape} {['value', 'gradient'][k]}: compiled vs eager")


# -- *_like lay their result out as torch's preserve_format ---------------------------------------
# mutation fuzzer seed 9698: ones_like of a diagonal view (strides (1, 12)) was C-contiguous, so its
# .view(-1) ran where torch's raises (torch lays the result out dense in the input's strides' order,
# strides (1, 3), as clone).

def _cases(m):
    return [m.zeros(3, 3, 3).diagonal(-1, 1, 0), m.zeros(3, 4).t(), m.zeros(4, 6)[:, ::2].t(),
            m.zeros(2, 1, 3).transpose(0, 2), m.zeros(2, 3).t().unsqueeze(1), m.zeros(3, 4, 5).permute(2, 0, 1)[::2],
            m.zeros(3).expand(2, 3), m.zeros(1, 3).expand(4, 3).t(), m.zeros(2, 3)]


@pytest.mark.parametrize("k", range(9))
def test_like_creations_keep_the_layout_torch_gives(k):
    def makes(m, x):
        return [m.ones_like(x), m.zeros_like(x), m.empty_like(x, dtype=m.int64), m.full_like(x, 2.5),
                m.rand_like(x), m.randn_like(x), m.randint_like(x, 3), m.ones_like(x, requires_grad=True),
                m.zeros_like(x, memory_format=m.contiguous_format)]

    want = makes(torch, _cases(torch)[k])
    got = makes(tg, _cases(tg)[k])
    for j, (a, b) in enumerate(zip(got, want)):
        assert a.stride() == b.stride() and tuple(a.shape) == tuple(b.shape), (j, a.stride(), b.stride())
        assert a.is_leaf and a.requires_grad == b.requires_grad and str(a.dtype) == str(b.dtype)
    assert float(got[3].sum()) == float(want[3].sum()) and float(got[0].sum()) == float(want[0].sum())
    for m, res in ((torch, want), (tg, got)):
        with m.no_grad():
            res[3].add_(1)                  # a tensor of its own, written in place
    assert float(got[3].sum()) == float(want[3].sum())


@pytest.mark.parametrize("fullgraph", [False, True])
def test_a_view_of_a_like_creation_raises_where_torchs_does(fullgraph):
    def f(m, x):
        return m.ones_like(x.diagonal(-1, 1, 0)).view(-1)

    for dynamic in (None, True):
        cf = tg.compile(lambda x: f(tg, x), fullgraph=fullgraph, dynamic=dynamic)
        for n in (3, 4, 5):                 # (the later shapes: a dynamic program's)
            a = np.arange(n ** 3 * 1.0).reshape(n, n, n)
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                f(torch, torch.tensor(a))
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                f(tg, tg.tensor(a))
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                cf(tg.tensor(a))


def test_like_creations_in_a_compiled_function_are_laid_out_as_eager():
    def g(m, x):
        return m.full_like(x.t(), 2.0) + x.t(), m.zeros_like(x.t()) * 3, m.ones_like(x.t()).t().reshape(-1)

    for dynamic in (None, True):
        cf = tg.compile(lambda x: g(tg, x), fullgraph=True, dynamic=dynamic)
        for shape in ((3, 4), (5, 2), (2, 6)):
            a = np.arange(float(np.prod(shape))).reshape(shape)
            want, eager, got = g(torch, torch.tensor(a)), g(tg, tg.tensor(a)), cf(tg.tensor(a))
            for w, e, c in zip(want, eager, got):
                assert e.stride() == w.stride() and c.stride() == e.stride(), (c.stride(), e.stride(), w.stride())
                _bits(_np(c), _np(e), "compiled vs eager")
                _bits(_np(e), w.numpy(), "eager vs torch")


@pytest.mark.parametrize("seed", [9002, 9698])
def test_the_mutation_fuzzers_seeds_that_failed(seed):
    import test_compile_mutation_fuzz as M
    M._check_program(seed)


def test_the_call_sequence_fuzzers_seed_3951():
    # mm_grad_inside with c = inf: gradients compared where finite, and for the same non-finite places
    import test_compile_call_sequence_fuzz as S
    with np.errstate(all="ignore"):
        assert S.check_sequence(3951) == []


def test_the_sign_of_a_tied_zero_maximum_follows_memory_order_as_torchs():
    # torch visits a permuted input's elements in memory order: amax over dims (1, 2) of a (2, 2, 3)
    # tensor laid out as (2, 3, 2) keeps the first zero in memory, not in the logical row
    import itertools
    r = np.random.default_rng(0)
    for _ in range(60):
        shape = tuple(int(s) for s in r.integers(1, 4, int(r.integers(2, 4))))
        a = r.choice([0.0, -0.0, -1.0], size=shape)
        perm = [int(p) for p in r.permutation(len(shape))]
        back = [int(p) for p in np.argsort(perm)]
        for dims in (d for k in range(1, len(shape)) for d in itertools.combinations(range(len(shape)), k)):
            if np.prod([shape[d] for d in dims]) > 8:
                continue                # (a longer reduction takes torch's vector lanes' order)
            res = []
            for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
                x = m.tensor(np.ascontiguousarray(a.transpose(perm))).permute(*back)
                res.append(_np(tg.compile(lambda x: x.amax(dims))(x) if name == "compiled" else x.amax(dims)))
            _bits(res[1], res[0], f"{shape} {perm} {dims}: eager vs torch")
            _bits(res[2], res[1], f"{shape} {perm} {dims}: compiled vs eager")


# -- tanh, sigmoid and rsqrt gradients group and round as torch's backward kernels -------------------
# Found next to seed 16193 (reciprocal): tracegrad's rules were g * y * (1 - y) (torch's
# sigmoid_backward: (g * (1 - y)) * y, in float32 for bfloat16), g * (1 - y * y) in float16 steps
# (torch's tanh_backward: in float32 for float16 and bfloat16) and ((-0.5 * g * y) * y) * y (torch's
# -0.5 * grad * result.pow(3)): 100 to 900 of 2000 gradients apart in the last bits. Compared where
# the forward values agree bit for bit (numpy's exp and tanh round apart from torch's here and there).

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("op", ["sigmoid", "tanh", "rsqrt"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_activation_gradients_round_as_torchs_backward_kernels(op, dtype):
    if op == "tanh" and dtype in ("float32", "float64"):
        pytest.skip("torch's float32/float64 tanh_backward fuses 1 - y * y where its build does")
    r = np.random.default_rng(0)
    a = r.standard_normal(2000) * 10.0 ** r.integers(-4, 3, 2000)
    if op == "rsqrt":
        a = np.abs(a)
    w = np.linspace(-2, 2, 2000)
    res = []
    for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
        x = m.tensor(a, dtype=getattr(m, dtype), requires_grad=True)
        f = (lambda x: getattr(x, op)())
        y = tg.compile(f)(x) if name == "compiled" else f(x)
        g, = m.autograd.grad((y * m.tensor(w, dtype=getattr(m, dtype))).sum(), x)
        res.append((_np(y).astype(np.float64), _np(g).astype(np.float64)))
    same = res[0][0] == res[1][0]
    assert same.mean() > 0.5, same.mean()          # (enough values compared)
    _bits(res[1][1][same], res[0][1][same], f"{op} {dtype}: eager vs torch where the values agree")
    _bits(res[2][1], res[1][1], f"{op} {dtype}: compiled vs eager")


# -- scatter_reduce's float16/bfloat16 sum and product accumulate in float32 --------------------------
# Found next to seed 15890: scatter_reduce(0, [0, 0, 0], float16 [6e-8, -0.33, -65504], "prod") was
# 0.0 (and [60000, 2, 0.25] inf), torch's 0.00129 (30000): torch accumulates in float32, rounds once.

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("reduce", ["sum", "prod"])
def test_a_half_precision_scatter_reduce_accumulates_as_torchs(dtype, reduce):
    r = np.random.default_rng(1)
    for _ in range(40):
        inc = bool(r.random() < 0.5)
        n, m_ = int(r.integers(1, 4)), int(r.integers(1, 6))
        src = r.choice([6e-8, -0.33, -65504.0, 60000.0, 2.0, 0.25, 1.001, 3.3, 1e-4, 0.0, -0.0], size=(m_, 2))
        idx = r.integers(0, n, (m_, 2))
        base = r.choice([1.0, 0.5, 2048.0, -3.0, 1e-3], size=(n, 2))

        def f(m, b, s, i):
            return b.scatter_reduce(0, i, s, reduce, include_self=inc)

        res = []
        for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
            args = (m.tensor(base, dtype=getattr(m, dtype)), m.tensor(src, dtype=getattr(m, dtype)), m.tensor(idx))
            res.append(_np(tg.compile(lambda *a: f(tg, *a))(*args) if name == "compiled" else f(m, *args)))
        _bits(res[1], res[0], f"{base} {idx} {src} include_self={inc}: eager vs torch")
        _bits(res[2], res[1], "compiled vs eager")


# -- integer division of an empty tensor by one holding 0 -----------------------------------------------
# call-sequence seed 5895 (beyond the range asked, 5000-6499): int64 zeros(1, 0, 3) // [[[1, 0, 2]]] raised
# ZeroDivisionError eagerly and compiled; torch divides nothing and returns the empty result.

@pytest.mark.parametrize("op", ["floordiv", "remainder", "fmod", "trunc", "floor"])
def test_integer_division_of_an_empty_tensor_by_a_zero_is_empty_as_torchs(op):
    def f(m, x, y):
        return {"floordiv": lambda: x // y, "remainder": lambda: m.remainder(x, y), "fmod": lambda: m.fmod(x, y),
                "trunc": lambda: m.div(x, y, rounding_mode="trunc"),
                "floor": lambda: m.div(x, y, rounding_mode="floor")}[op]()

    a, b = np.zeros((1, 0, 3), np.int64), np.array([[[1, 0, 2]]])
    want = f(torch, torch.tensor(a), torch.tensor(b))
    for got in (f(tg, tg.tensor(a), tg.tensor(b)), tg.compile(lambda x, y: f(tg, x, y))(tg.tensor(a), tg.tensor(b))):
        assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(tg, tg.tensor(np.ones((1, 2, 3), np.int64)), tg.tensor(b))


# -- a view made under no_grad, then its base written in place -----------------------------------------
# mutation seed 10381: the compiled function returned a gradient where eager and torch raise "A view
# was created in no_grad mode and its base or another view of its base has been modified inplace".
# The compiled call now sees the written saved value and runs eagerly, raising torch's error.

def test_a_no_grad_view_whose_base_is_written_raises_compiled_as_eagerly():
    def f(m, x):
        v1 = x.clone()
        v2 = v1.squeeze(-1)
        with m.no_grad():
            v5 = v1.permute(0)
        v2.mul_(v5)
        return v2 * 2

    for name, m in (("torch", torch), ("eager", tg), ("compiled", tg)):
        x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        fn = tg.compile(lambda x: f(tg, x)) if name == "compiled" else (lambda x: f(m, x))
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(x).sum().backward()
        assert x.grad is None, name


# -- operands cast to the compute dtype first --------------------------------------------------------
# call-sequence seeds 5349, 5821 and 6378: an expanded int64 (or float32) operand beside a transposed
# float64 one. Eager casts the expanded operand into a C-contiguous array first (as torch's .to() of
# an expanded tensor) and lays the result out by it; the trace took the expanded operand's own
# strides, so the compiled result was laid out in the transposed operand's order: a mean one ulp off
# (-2.4052286 against eager's and torch's -2.4052284) and output strides (1, 4, 16) against (4, 1, 16).

@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("n", [3, 7, 9])
def test_a_cast_expanded_operand_lays_the_result_out_as_eager(n, dynamic):
    r = np.random.default_rng(n)
    xb, yl = r.integers(-5, 5, (1, n, n)), r.standard_normal((n, n, 2))
    f = lambda x, y: (x + y).float().mean()
    args = lambda m: (m.tensor(xb).expand(2, n, n), m.tensor(yl).transpose(0, -1))
    eager = f(*args(tg)).item()
    assert eager == pytest.approx(f(*args(torch)).item(), rel=1e-6)     # (float32 sums, each in its order)
    assert tg.compile(f, dynamic=dynamic)(*args(tg)).item() == eager


@pytest.mark.parametrize("case", ["where", "unsq_expand"])
def test_strides_of_ops_of_a_cast_expanded_operand_are_eagers(case):
    if case == "where":
        xb, yl = np.arange(4).reshape(1, 4, 1), np.linspace(-2, 2, 80).reshape(5, 4, 4)
        f = lambda m, x, y: m.where(x > y, x, y * 0.5)
        args = lambda m: (m.tensor(xb).expand(4, 4, 1), m.tensor(yl, dtype=m.float32).transpose(0, -1))
    else:
        xb, yl = np.ones((1, 2), np.float32), np.arange(4.0).reshape(2, 2)
        f = lambda m, x, y: x.unsqueeze(0).expand(2, *x.shape) * y
        args = lambda m: (m.tensor(xb).expand(2, 2), m.tensor(yl).t())
    want = f(torch, *args(torch))
    eager = f(tg, *args(tg))
    got = tg.compile(lambda x, y: f(tg, x, y))(*args(tg))
    assert eager.stride() == want.stride()
    assert got.stride() == want.stride()
    np.testing.assert_array_equal(got.numpy(), eager.numpy())

"""The eager engine against torch's, where they parted:

- one forward value saved by several nodes in different memory: `x.data = y` after a node saved
  x's old memory (torch's view made inside the op, mm's `x.unsqueeze(0)` of a 1-D x, or an op's
  saved output) while another saved x itself (whose memory is now y's). The backward program
  read one input per forward value, so every node read the same memory: w.grad of `x @ w`
  came out from the new x, torch's from the old;
- a custom Function's node with no path to a leaf (applied to a view made under no_grad):
  torch's backward() runs it (its backward's side effects happen); tracegrad's did not.

Each case runs in torch and in tracegrad, in float64, and compares what it returns or raises."""
import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.ops.primitives import matmul_reshaped

import test_compile_mutation_fuzz as mutation_fuzz


def snap(x):
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return [snap(y) for y in x]
    return np.asarray(x.detach().tolist(), dtype=np.float64)


def outcome(f):
    try:
        return "ok", f()
    except Exception as e:          # noqa: BLE001  (compared with torch's)
        return type(e).__name__, str(e)[:120]


def same(a, b):
    if a[0] != "ok" or b[0] != "ok":
        return a[0] == b[0]
    for u, v in zip(a[1], b[1]):
        if (u is None) != (v is None):
            return False
        if u is not None and (u.shape != v.shape or not np.allclose(u, v, rtol=1e-10, atol=1e-12)):
            return False
    return len(a[1]) == len(b[1])


# -- saved in different memory -----------------------------------------------------------------

# each: the loss of leaves x (3,) and w (3, 2), and the tensor whose memory is then changed
SAVED = {
    "mm_1d": lambda x, w: ((x @ w).sum() + x.sin().sum(), x),
    "mm_1d_alone": lambda x, w: ((x @ w).sum(), x),
    "mm_1d_twice": lambda x, w: ((x @ w).sum() + (x @ w).pow(2).sum() + (x * x).sum(), x),
    "index_none": lambda x, w: ((x[None] @ w).sum() + x.sin().sum(), x),
    "reshape": lambda x, w: ((x.reshape(1, 3) @ w).sum() + x.sin().sum(), x),
    "expand": lambda x, w: ((x.expand(2, 3) @ w).sum() + (x * x).sum(), x),
    "transpose": lambda x, w: ((x.reshape(3, 1).t() @ w).exp().sum() + x.cos().sum(), x),
    "mv": lambda x, w: ((w.t() @ x).sum() + x.sin().sum(), x),
    "dot": lambda x, w: (x.dot(w[:, 0]) + x.sin().sum(), x),
    # an op's saved output (exp's, tanh's, sigmoid's) beside the output saved as an input
    "exp_out": lambda x, w: (lambda y: ((y * y.sin()).sum(), y))(x.exp()),
    "tanh_out": lambda x, w: (lambda y: ((y.sigmoid() + y * y).sum(), y))(x.tanh()),
    "sigmoid_view": lambda x, w: (lambda y: ((y[None] @ w).sum() + y.sin().sum(), y))(x.sigmoid()),
    "mm_out": lambda x, w: (lambda y: (y.exp().sum() + (y * y).sum(), y))(x @ w),
}


def saved_case(m, case, change, mode):
    x = m.tensor([0.5, -1.0, 3.0], dtype=m.float64, requires_grad=True)
    w = m.tensor((np.arange(6.0).reshape(3, 2) / 3).tolist(), dtype=m.float64, requires_grad=True)
    loss, t = SAVED[case](x, w)
    if change == "data":
        t.data = m.tensor(np.linspace(1, 2, t.numel()).reshape(tuple(t.shape)).tolist(), dtype=m.float64)
    elif change == "data_mul":
        t.data.mul_(10)
    else:
        t.detach().mul_(10)
    if mode == "backward":
        loss.backward()
        return snap([x.grad, w.grad])
    if mode == "grad":
        return snap(m.autograd.grad(loss, [x, w]))
    g = m.autograd.grad(loss, [x, w], create_graph=True)
    return snap(m.autograd.grad(sum((a * a).sum() for a in g), [x, w], allow_unused=True))


@pytest.mark.parametrize("mode", ["backward", "grad", "create_graph"])
@pytest.mark.parametrize("change", ["data", "data_mul", "detach_mul"])
@pytest.mark.parametrize("case", sorted(SAVED))
def test_value_saved_in_different_memory(case, change, mode):
    want = outcome(lambda: saved_case(torch, case, change, mode))
    got = outcome(lambda: saved_case(tg, case, change, mode))
    assert same(want, got), (want, got)


def test_saved_apart_program_is_cached_and_plain_one_kept():
    """The same graph run again: with x.data set the backward reads each node's memory, without
    it the one program reading one input (the gradients torch gives both times)."""
    for change in (True, False, True):
        out = []
        for m in (torch, tg):
            x = m.tensor([0.5, -1.0, 3.0], dtype=m.float64, requires_grad=True)
            w = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=m.float64, requires_grad=True)
            loss = (x @ w).sum() + x.sin().sum()
            if change:
                x.data = m.tensor([10.0, 20.0, 30.0], dtype=m.float64)
            loss.backward()
            out.append(snap([x.grad, w.grad]))
        np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12)
        np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-12)


def test_saved_apart_gradcheck():
    """The split program's derivative: x @ w + sin(x) through the engine, by gradcheck."""
    x = tg.tensor([0.5, -1.0, 3.0], dtype=tg.float64, requires_grad=True)
    w = tg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: (a @ b).sum() + a.sin().sum() + (a @ b).exp().sum(), (x, w))


# -- a custom Function with no path to a leaf ----------------------------------------------------

def function_case(m, case):
    log = []

    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            return x * k, x + 1

        @staticmethod
        def backward(ctx, g1, g2):
            x, = ctx.saved_tensors
            log.append(("F", snap(g1), snap(g2), snap(x)))
            return g1 * 2 + g2, None

    class G(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 3, x * 4

        @staticmethod
        def backward(ctx, g1, g2):
            log.append(("G", snap(g1), snap(g2)))
            return None

    class One(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            log.append(("One", snap(g)))
            if case == "raises":
                raise ValueError("from backward")
            if case == "wrong_shape":
                return g[:1].expand(5)     # torch checks no shape for an input without an edge
            if case == "wrong_count":
                return g, g
            return g * 2

    x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    with m.no_grad():
        v = x[:2]
    kw = {}
    if case in ("alone", "raises", "wrong_shape", "wrong_count"):
        loss = One.apply(v).sum()
    elif case == "beside_a_leaf":
        loss = (One.apply(v) + x[:2]).sum()
    elif case == "under_exp":
        loss = One.apply(v.sin()).exp().sum()
    elif case == "two_outputs":
        a, b = F.apply(v, 3.0)
        loss = (a * a).sum() + b.sum()
    elif case == "one_output_used":
        a, b = F.apply(v, 3.0)
        loss = (a * a).sum()
    elif case == "materialize_false":
        a, b = G.apply(v)
        loss = a.sum()
    elif case == "hooks":
        a, b = F.apply(v, 3.0)
        a.grad_fn.register_prehook(lambda gs: log.append(("pre", [g is None for g in gs])))
        a.grad_fn.register_hook(lambda gi, go: log.append(("post", [g is None for g in gi])))
        a.register_hook(lambda g: log.append(("tensor hook", snap(g))))
        loss = (a * a).sum() + (x * 2).sum()
    elif case == "create_graph":
        a, b = F.apply(v, 3.0)
        loss = (a * a).sum() + (x ** 3).sum()
        kw = dict(create_graph=True)
    elif case == "retain_graph":
        a, b = F.apply(v, 3.0)
        loss = (a * a).sum()
        loss.backward(retain_graph=True)
    elif case == "freed":
        a, b = F.apply(v, 3.0)
        loss = (a * a).sum()
        loss.backward()
    elif case == "grad_of_x":          # grad() runs only what its inputs need
        loss = (One.apply(v) + x[:2]).sum()
        return log, snap(m.autograd.grad(loss, [x]))
    elif case == "inputs_x":
        loss = (One.apply(v) + x[:2]).sum()
        loss.backward(inputs=[x])
        return log, snap(x.grad)
    r = outcome(lambda: loss.backward(**kw))
    return log, r[0], snap(x.grad)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("case", ["alone", "beside_a_leaf", "under_exp", "two_outputs", "one_output_used",
                                  "materialize_false", "hooks", "create_graph", "retain_graph", "freed",
                                  "raises", "wrong_shape", "wrong_count", "grad_of_x", "inputs_x"])
def test_function_with_no_path_to_a_leaf_runs(case):
    want = function_case(torch, case)
    got = function_case(tg, case)
    assert repr(got) == repr(want)


def test_functions_with_no_path_to_a_leaf_run_in_torch_s_order():
    """Functions chained on views made under no_grad, beside another: their backwards run, in
    torch's engine's order, with the gradients it gives them."""
    def run(m):
        log = []

        def make(name):
            class Fn(m.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    log.append((name, g.tolist()))
                    return g * 3
            return Fn
        f1, f2, f3 = make("F1"), make("F2"), make("F3")
        x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with m.no_grad():
            v, u = x[:2], x[1:]
        (f2.apply(f1.apply(v)) * f3.apply(u)).sum().backward()
        (f1.apply(v).sum() + f3.apply(u).sum()).backward()
        return log
    assert run(tg) == run(torch)


# -- matmul's saved operands: torch's reshape copies or views them ------------------------------

# torch's matmul reshapes an operand of 3 or more dims before mm or bmm: where the reshape copies
# (an expanded operand, a batch folded from a transposed layout, and, of two 3-dim operands of
# which one alone has a batch of 1, the other one folded as a matrix's partner), a later write to
# the operand (in place, detach_(), `.data = `, `.data.mul_()`) does not reach what its node saved;
# where the reshape views it, `.data = ` leaves the view's memory as it was and an in-place write
# raises. tracegrad raised where torch computes (a batch of 1 beside a batch) and gave the new
# value's gradient after `.data = ` or `.data.mul_()`.
MATMUL_SHAPES = [
    ((1, 3, 4), (5, 4, 2)), ((5, 3, 4), (1, 4, 2)), ((2, 1, 3, 4), (5, 4, 2)), ((5, 3, 4), (2, 1, 4, 2)),
    ((1, 3, 4), (1, 4, 2)), ((3, 4), (5, 4, 2)), ((5, 3, 4), (4, 2)), ((4,), (5, 4, 2)), ((5, 3, 4), (4,)),
    ((1, 1, 3, 4), (5, 4, 2)), ((2, 5, 3, 4), (5, 4, 2)), ((5, 3, 4), (5, 4, 2)), ((1, 3, 4), (4, 2)),
    ((3, 4), (1, 4, 2)), ((2, 1, 3, 4), (1, 5, 4, 2)), ((1, 1, 4), (5, 4, 2)), ((5, 3, 4), (1, 4, 1)),
    ((4,), (1, 4, 2)), ((1, 3, 4), (4,)), ((2, 3, 4), (2, 4, 2)), ((1, 3, 4), (2, 5, 4, 2)),
    ((1, 1, 3, 4), (1, 4, 2)), ((1, 3, 4), (0, 4, 2)), ((0, 3, 4), (1, 4, 2)), ((1, 3, 0), (5, 0, 2)),
    ((5, 3, 4), (1, 4, 5)), ((1, 4, 4), (4, 4, 4)), ((3, 2, 3, 4), (1, 4, 2)), ((1, 3, 4), (3, 1, 4, 2)),
    ((1, 3, 1), (5, 1, 2)),
]


def _operand(m, shape, layout, rng):
    """A float64 tensor of `shape`: contiguous ("c"), its last two dims transposed ("t"), or its
    batch expanded from 1 ("x")."""
    base = rng.standard_normal(shape)
    if layout == "t" and len(shape) >= 2:
        return m.tensor(np.swapaxes(base, -1, -2).copy(), dtype=m.float64).transpose(-1, -2)
    if layout == "x" and len(shape) >= 3 and shape[0] > 1:
        return m.tensor(base[:1], dtype=m.float64).expand(*shape)
    return m.tensor(base, dtype=m.float64)


def matmul_write_case(m, sa, sb, la, lb, which, how, leaf, create_graph):
    rng = np.random.default_rng(0)
    a0, b0 = _operand(m, sa, la, rng), _operand(m, sb, lb, rng)
    if leaf:
        A, B = a0.requires_grad_(), b0.requires_grad_()
        wrt = [A, B]
    else:
        s = m.tensor(0.5, dtype=m.float64, requires_grad=True)
        A = (a0.transpose(-1, -2) * s).transpose(-1, -2) if la == "t" and len(sa) >= 2 else a0 * s
        B = (b0.transpose(-1, -2) * s).transpose(-1, -2) if lb == "t" and len(sb) >= 2 else b0 * s
        wrt = [s]
    out = A @ B
    t = A if which == 0 else B
    if how == "mul_":
        if leaf:
            with m.no_grad():
                t.mul_(2)
        else:
            t.mul_(2)
    elif how == "detach_":
        t.detach_()
    elif how == "data":
        t.data = t.data * 2 + 1
    else:
        t.data.mul_(2)
    gs = m.autograd.grad((out * out).sum(), wrt, create_graph=create_graph, allow_unused=True)
    if create_graph:
        gs = m.autograd.grad(sum((q * q).sum() for q in gs if q is not None), wrt, allow_unused=True)
    return snap(list(gs))


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_operand_written_after_the_product(sa, sb):
    bad = []
    for la in "ctx":
        for lb in "ctx":
            for which in (0, 1):
                for how in ("mul_", "detach_", "data", "data_mul"):
                    for leaf in (False, True):
                        if leaf and how == "detach_":
                            continue
                        for cg in (False, True) if how in ("data", "data_mul") else (False,):
                            case = (sa, sb, la, lb, which, how, leaf, cg)
                            want = outcome(lambda: matmul_write_case(torch, *case))
                            got = outcome(lambda: matmul_write_case(tg, *case))
                            if not same(want, got):
                                bad.append((case, want[0], got[0]))
    assert not bad, bad[:5]


def _compiled_product_after_data_swap(m, sa, sb, which, compiled, how="swap"):
    rng = np.random.default_rng(0)
    s = m.tensor(0.5, dtype=m.float64, requires_grad=True)
    a = m.tensor(rng.standard_normal(sa), dtype=m.float64) * s
    b = m.tensor(rng.standard_normal(sb), dtype=m.float64) * s
    f = lambda x, y: x @ y          # noqa: E731
    out = (tg.compile(f) if compiled else f)(a, b)
    t = (a, b)[which]
    if how == "swap":
        t.data = t.data * 2 + 1
    else:
        t.data.mul_(3)
    return m.autograd.grad((out * out).sum(), [s])[0].item()


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("sa,sb", [((1, 3, 4), (5, 4, 2)), ((5, 3, 4), (1, 4, 2)), ((5, 3, 4), (5, 4, 2)),
                                   ((5, 3, 4), (4, 2)), ((3, 4), (5, 4, 2)), ((3, 4), (4, 2)), ((4,), (4, 2))])
def test_compiled_product_after_an_operand_got_another_data(sa, sb, which):
    """torch's matmul node saves the operands it reshapes (a view, or a copy), which keep the old
    memory after `x.data = y`; the compiled backward reads the inputs as they are now: it raises
    for those (it gave the new memory's gradient), and gives torch's number for an operand torch
    saves as it is."""
    want = _compiled_product_after_data_swap(torch, sa, sb, which, False)
    assert _compiled_product_after_data_swap(tg, sa, sb, which, False) == pytest.approx(want, rel=1e-12)
    if which in matmul_reshaped(np.empty(sa), np.empty(sb)):
        with pytest.raises(RuntimeError, match="reads a view of one of its inputs"):
            _compiled_product_after_data_swap(tg, sa, sb, which, True)
    else:
        assert _compiled_product_after_data_swap(tg, sa, sb, which, True) == pytest.approx(want, rel=1e-12)


# -- index_put_ whose values view the written tensor ---------------------------------------------

# torch does not judge the overlap of layouts that are not dense: its CPU loop (one thread below
# GRAIN_SIZE elements) writes each element and reads the values as it goes, in TensorIterator's
# order, duplicate indices too (the last write stays; accumulate adds them up in turn). tracegrad
# raised its "depend on the order" error; it now runs that loop (functional.sequential_index_put).
# Mutation fuzzer seed 47328 is one: x.index_put_((tensor([-1, 0]),), x.chunk(2, 2)[1], accumulate=True).

def index_put_alias_case(m, seed):
    r = np.random.default_rng(seed)
    nd = int(r.integers(1, 4))
    shape = tuple(int(n) for n in r.integers(1, 5, nd))
    dt = m.float32 if r.integers(0, 2) else m.float64
    x = m.arange(float(np.prod(shape)), dtype=dt).reshape(shape) * 0.5 + 1
    grad = bool(r.integers(0, 2))
    if grad:
        s = m.tensor(1.0, dtype=dt, requires_grad=True)
        x = x * s
    k = int(r.integers(1, nd + 1))
    if r.integers(0, 3):
        nidx = int(r.integers(1, 5))
        idx = tuple(m.tensor(r.integers(-shape[j], shape[j], nidx).tolist()) for j in range(k))
    else:                               # a bool mask over the first k dims
        mask = r.integers(0, 2, shape[:k]).astype(bool)
        nidx = int(mask.sum())
        idx = (m.tensor(mask.tolist()),)
    vshape = ((nidx,) if r.integers(0, 2) else ()) + shape[k:]
    strides = [int(q) for q in r.integers(0, 4, len(vshape))]
    span = sum((n - 1) * q for n, q in zip(vshape, strides))
    if span >= x.numel():
        strides = [0] * len(vshape)
        span = 0
    off = int(r.integers(0, x.numel() - span))
    acc = int(r.integers(0, 3))
    if acc < 2:
        x.index_put_(idx, x.as_strided(vshape, strides, off), accumulate=bool(acc))
    else:
        x[idx] = x.as_strided(vshape, strides, off)      # (torch's index_put_)
    out = [snap(x)]
    if grad:
        w = m.arange(1.0, 1.0 + x.numel(), dtype=dt).reshape(shape)
        out.append(snap(m.autograd.grad((x * w).sum(), [s])[0]))
    return out


@pytest.mark.parametrize("chunk", range(4))
def test_index_put_with_values_viewing_self(chunk):
    bad = []
    for seed in range(chunk * 150, chunk * 150 + 150):
        want = outcome(lambda: index_put_alias_case(torch, seed))
        got = outcome(lambda: index_put_alias_case(tg, seed))
        ok = want[0] == got[0] and (want[0] != "ok" or all(
            np.allclose(a, b, rtol=1e-5, atol=1e-5) for a, b in zip(want[1], got[1])))
        if not ok:
            bad.append((seed, want, got))
    assert not bad, bad[:3]


def test_index_put_with_values_viewing_self_as_torch_loops():
    """x[0, :, 0] written from x[0, :, 1], both rows twice (indices -1 and 0 name row 0): torch's
    loop adds each element as it is when it reaches it (7 = 1 + 2 + 4, 8 = 2 + 2 + 4)."""
    for m in (torch, tg):
        x = m.arange(1.0, 9.0).reshape(1, 4, 2)
        x.index_put_((m.tensor([-1, 0]),), x.chunk(2, 2)[1], accumulate=True)
        assert x.reshape(-1).tolist() == [7.0, 8.0, 15.0, 16.0, 23.0, 24.0, 31.0, 32.0], m.__name__


def test_index_put_with_values_viewing_self_too_large_raises():
    """Past GRAIN_SIZE elements torch's loop runs in threads (its order is not one): still refused."""
    x = tg.zeros(2, 40000)
    with pytest.raises(RuntimeError, match="depend on the order in which the elements are written"):
        x.index_put_((tg.tensor([0, 1]),), x.as_strided((40000,), (2,), 1))


def test_mutation_fuzz_seed_47328():
    mutation_fuzz._check_program(47328)


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("sa,sb", [((1, 3, 4), (5, 4, 2)), ((5, 3, 4), (1, 4, 2)), ((5, 3, 4), (5, 4, 2)),
                                   ((5, 3, 4), (4, 2)), ((3, 4), (5, 4, 2)), ((3, 4), (4, 2)), ((4,), (4, 2)),
                                   ((2, 1, 3, 4), (5, 4, 2))])
def test_compiled_product_after_a_write_through_data(sa, sb, which):
    """x.data.mul_(3) after the call: torch's node reads the write where it saved x or a view of
    it, not where its matmul copied x (a batch beside a batch of 1, an expanded one). The compiled
    backward reads the inputs as they are now: torch's number, or its error where torch copied."""
    want = _compiled_product_after_data_swap(torch, sa, sb, which, False, "mul")
    assert _compiled_product_after_data_swap(tg, sa, sb, which, False, "mul") == pytest.approx(want, rel=1e-12)
    got = outcome(lambda: _compiled_product_after_data_swap(tg, sa, sb, which, True, "mul"))
    if got[0] == "ok":
        assert got[1] == pytest.approx(want, rel=1e-12)
    else:
        assert "reads a view of one of" in got[1], got
    if (sa, sb, which) in (((1, 3, 4), (5, 4, 2), 1), ((3, 4), (5, 4, 2), 1)):
        assert got[0] != "ok"          # (the new value's gradient: torch's is the old's)


def test_compiled_product_after_a_write_into_a_constant_it_copied():
    """The same for a tensor the compiled function reads from outside (a constant of its trace):
    torch's node keeps a copy of b, and b.data.mul_(3) after the call does not reach it."""
    def run(m, compiled):
        s = m.tensor(0.5, dtype=m.float64, requires_grad=True)
        b = m.tensor(np.arange(40.0).reshape(5, 4, 2) / 7, dtype=m.float64)
        a = m.tensor(np.arange(12.0).reshape(1, 3, 4) / 5, dtype=m.float64) * s
        f = lambda x: x @ b            # noqa: E731
        out = (tg.compile(f) if compiled else f)(a)
        b.data.mul_(3)
        return m.autograd.grad((out * out).sum(), [s])[0].item()
    want = run(torch, False)
    assert run(tg, False) == pytest.approx(want, rel=1e-12)
    with pytest.raises(RuntimeError, match="reads a view of one of its inputs"):
        run(tg, True)


def test_a_compiled_call_on_a_no_grad_view_after_a_function_sink_was_made():
    """Once a custom Function has made a node with no path to a leaf, backward() looks for such
    nodes among those it reaches; a compiled call's node (no user backward) was taken for one and
    raised AttributeError."""
    class Twice(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = tg.tensor([0.3, -1.2], dtype=tg.float64, requires_grad=True)
    with tg.no_grad():
        v = a[None]
    Twice.apply(v).sum().backward()          # (a Function node with no edge: the sinks are looked for)
    y = tg.compile(lambda t: (t * 2).exp())(v)
    (y.sin().sum() + a.sum()).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])

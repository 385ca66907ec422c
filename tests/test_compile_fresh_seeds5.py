"""Reduced repros of what the compile fuzzers found on seeds no run had tried before
(test_compile_call_sequence_fuzz.py 13500-16000, test_compile_step_fuzz.py 3100-3500,
test_compile_mutation_fuzz.py 23000-27000, test_compile_dtype_fuzz.py 34000-38000,
test_compile_random.py 44500-45000 in float32 and float64, test_compile_chain_fuzz.py 1200-2200,
triton_checks.py's programs 43900-44100 under the interpreter; then call sequences 16000-18500,
step 3500-3900, mutation 27000-31000, dtype 38000-42000, test_compile_random.py 45000-45500 in both
dtypes, triton_checks.py's programs 44100-44300), each compared with torch and with eager tracegrad."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tracegrad as tg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_compile_call_sequence_fuzz as CS           # noqa: E402
import test_compile_dtype_fuzz as DT                     # noqa: E402
import test_compile_mutation_fuzz as MU                  # noqa: E402


def _bits(t):
    t = t.detach()
    a = np.asarray((t.float() if str(t.dtype).endswith("bfloat16") else t).numpy())
    return a.view(f"u{a.itemsize}")


# -- mean(dtype=float16 or bfloat16) of another dtype (dtype fuzzer seed 36301) ---------------------
# torch's CPU mean with a half dtype= casts the input to float32, sums and divides there and rounds
# once to the dtype. tracegrad cast the input to the dtype first: an int32 2147483646 became inf, so
# the mean of [[-6, 2147483646, 2147483646], [-1, -2147483648, 0]] was nan where torch's is inf, and
# a float32 row's mean came out a float16 step away from torch's for about 4 rows in 10.

_INTS = [[-6, 2147483646, 2147483646], [-1, -2147483648, 0]]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_mean_to_a_half_dtype_of_int32_sums_in_float32_as_torch(dtype, dim):
    def f(m, x):
        kw = {} if dim is None else {"dim": dim}
        return x.mean(dtype=getattr(m, dtype), **kw)
    want = f(torch, torch.tensor(_INTS, dtype=torch.int32))
    for run in (lambda x: f(tg, x), tg.compile(lambda x: f(tg, x))):
        got = run(tg.tensor(_INTS, dtype=tg.int32))
        assert str(got.dtype) == str(want.dtype)
        assert (_bits(got) == _bits(want)).all(), (got, want)


def test_dtype_fuzzer_seed_36301():
    with np.errstate(all="ignore"):
        DT.check_program(36301)


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mean_to_a_half_dtype_of_floats_rounds_once_and_differentiates_as_torch(src, dtype):
    """Values (bit for bit), grad_fn and gradients (g / n rounded to the half dtype, then cast to
    the input's dtype), first and second order, eager and compiled."""
    a = np.random.default_rng(0).standard_normal((200, 7))
    a[0, 0] = 7e4                      # beyond float16: finite in torch's float32 sum

    def f(m, x):
        y = x.mean(1, dtype=getattr(m, dtype))
        g, = m.autograd.grad((y.float() ** 2).sum(), x, create_graph=True)
        return y, g, m.autograd.grad((g * g).sum(), x)[0]

    xt = torch.tensor(a, dtype=getattr(torch, src), requires_grad=True)
    want = f(torch, xt)
    assert xt.mean(1, dtype=getattr(torch, dtype)).grad_fn.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    for run in (lambda x: f(tg, x), tg.compile(lambda x: f(tg, x))):
        x = tg.tensor(a, dtype=getattr(tg, src), requires_grad=True)
        got = run(x)
        for k, (g, w) in enumerate(zip(got, want)):
            assert str(g.dtype) == str(w.dtype), k
            assert (_bits(g) == _bits(w)).all(), (k, g, w)
        y = x.mean(1, dtype=getattr(tg, dtype))
        assert y.grad_fn.name() == "MeanBackward1"
        assert type(y.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"


# -- logsumexp of float16 and bfloat16 (call-sequence fuzzer seed 18225) --------------------------
# torch's CPU logsumexp of a half dtype runs its ops of that dtype (amax, x - max, exp, sum, log,
# + max), each rounded to it. tracegrad computed in float32 and rounded once: the row below gave
# 0.0003 where torch's is 0, so logsumexp(x) * inf was inf where torch's is nan; a row in 7
# (float16) or in 4 (bfloat16) of random normal values was a step away.

_LSE = [-1.619, -4.031, -np.inf, -0.3135, -2.926]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_logsumexp_of_a_half_dtype_rounds_every_step_as_torch(dtype):
    r = np.random.default_rng(0)
    rows = np.concatenate([np.array([_LSE]), r.standard_normal((300, 5)) * 3]).astype(np.float16)
    rows[5, 2], rows[6, :] = np.nan, -np.inf

    def f(m, x):
        return m.logsumexp(x, 1), m.logsumexp(x[:1], -1) * float("inf"), m.logsumexp(x.t(), 0, keepdim=True)
    want = f(torch, torch.tensor(rows).to(getattr(torch, dtype)))
    assert torch.isnan(want[1])
    for run in (lambda x: f(tg, x), tg.compile(lambda x: f(tg, x))):
        got = run(tg.tensor(rows).to(getattr(tg, dtype)))
        for g, w in zip(got, want):
            assert str(g.dtype) == str(w.dtype)
            nan = np.isnan(w.float().numpy())                 # (a NaN's sign bit aside)
            assert (np.isnan(g.float().numpy()) == nan).all()
            assert (_bits(g)[~nan] == _bits(w)[~nan]).all(), (g, w)


def test_call_sequence_fuzzer_seed_18225():
    with np.errstate(all="ignore"):
        assert CS.check_sequence(18225) == []


# -- an in-place write to an expand() that repeats no element (call-sequence fuzzer seed 18109) ---
# expand gave every size-1 dimension stride 0 (torch keeps the tensor's stride there) and made the
# view read-only: x.add_(c) on tensor([1.]).expand(1) ran eagerly, but a program compiled for a
# plain (1,) argument crashed on it writing back ("assignment destination is read-only").

def test_expand_keeps_torchs_strides_where_no_element_repeats():
    for m_shape, sizes in [((2, 3), (1, 2, 3)), ((3, 1), (3, 1)), ((3, 1), (2, 3, 4)), ((1,), (1,)),
                           ((), (1, 1)), ((), (2, 1)), ((1, 1), (1, 1, 1))]:
        want = torch.zeros(m_shape).expand(*sizes).stride()
        assert tg.zeros(m_shape).expand(*sizes).stride() == want, (m_shape, sizes)
    assert tg.zeros(2, 3)[:, :1].expand(1, 2, 1).stride() == torch.zeros(2, 3)[:, :1].expand(1, 2, 1).stride()


@pytest.mark.parametrize("dynamic", [None, True, False])
def test_in_place_write_to_an_expand_of_one_element_compiled_as_torch(dynamic):
    def f(x, y, c):
        x.add_(c)
        return x * y
    cf = tg.compile(f, dynamic=dynamic)
    y = tg.tensor(2.0, dtype=tg.float64, requires_grad=True)
    cf(tg.tensor([1.0], dtype=tg.float64), y, 3)
    for m, run in ((torch, f), (tg, cf)):
        base = m.tensor([1.0], dtype=m.float64)
        x = base.expand(1)
        out = run(x, m.tensor(2.0, dtype=m.float64, requires_grad=True), 3)
        assert out.tolist() == [8.0] and x.tolist() == [4.0] and base.tolist() == [4.0]
    with pytest.raises(RuntimeError, match="more than one element"):
        tg.zeros(1).expand(3).add_(1)


def test_call_sequence_fuzzer_seed_18109():
    with np.errstate(all="ignore"):
        assert CS.check_sequence(18109) == []


# -- x * 1 under no_grad returned the argument itself (mutation fuzzer seed 30755) ----------------
# A no_grad op on a tensor that requires grad traces as detach(op(...)); the simplifier made
# x * ones_like(x) (and x * 1, x / 1, x - 0, -(-x), x ** 1) into x there, since that value was no
# output itself: the output became detach(x), an alias of the argument, so a later write to the
# argument changed the result (101 where torch keeps 1).

_UNITS = {"ones_like": lambda m, x: (x * m.ones_like(x)).unsqueeze(-1), "mul": lambda m, x: x * 1.0,
          "div": lambda m, x: (x / 1).t(), "neg": lambda m, x: -(-x), "pow": lambda m, x: (x ** 1)[0],
          "sub": lambda m, x: (x - 0.0).view(-1), "detach": lambda m, x: (x.t() * 1).detach()}


@pytest.mark.parametrize("no_grad", [True, False])
@pytest.mark.parametrize("name", sorted(_UNITS))
def test_a_unit_op_under_no_grad_is_no_alias_of_the_argument_compiled(name, no_grad):
    def f(m, x):
        if no_grad:
            with m.no_grad():
                return _UNITS[name](m, x)
        return _UNITS[name](m, x)
    results = []
    for m, run in ((torch, lambda x: f(torch, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        out = run(x)
        with m.no_grad():
            x.add_(100.0)
        results.append((out.detach().tolist(), out.requires_grad))
    assert results[1] == results[0]


def test_mutation_fuzzer_seed_30755():
    MU._check_program(30755)


# -- a view taken under no_grad, read by an op with grad mode on (mutation fuzzer seed 29769) -----
# torch's view of a tensor that requires grad, made under no_grad, requires grad itself (a leaf:
# no gradient reaches the tensor), and so does what an op computes of it in grad mode: dividing a
# chunk() piece in place by it raises torch's multiple-views error. The trace's view was detached,
# its quotient required no grad, and the compiled call returned [0.5, 0.5] where eager raises. The
# compiled function now runs such a read eagerly.

def _chunk_divided_by_a_no_grad_view(m, x, y):
    with m.no_grad():
        u = x.unbind(-1)[0]
    c = y.chunk(2, -1)[0]
    c.div_(u.abs() + 1)
    return c


def _computed_from_a_no_grad_view(m, x, y):
    with m.no_grad():
        u = x[0]
    return u.abs() + y


def test_an_op_with_grad_on_reading_a_no_grad_view_of_a_grad_value_runs_as_torch():
    with pytest.raises(RuntimeError) as want:
        _chunk_divided_by_a_no_grad_view(torch, torch.ones(4, requires_grad=True), torch.ones(3))
    cf = tg.compile(lambda x, y: _chunk_divided_by_a_no_grad_view(tg, x, y))
    with pytest.warns(UserWarning, match="view taken under no_grad"), pytest.raises(RuntimeError) as got:
        cf(tg.ones(4, requires_grad=True), tg.ones(3))
    assert str(got.value) == str(want.value)
    want = _computed_from_a_no_grad_view(torch, torch.ones(4, requires_grad=True), torch.ones(2))
    with pytest.warns(UserWarning, match="view taken under no_grad"):
        got = tg.compile(lambda x, y: _computed_from_a_no_grad_view(tg, x, y))(tg.ones(4, requires_grad=True),
                                                                                tg.ones(2))
    assert got.requires_grad and want.requires_grad and got.tolist() == want.tolist()


def test_mutation_fuzzer_seed_29769():
    MU._check_program(29769)


# -- a float64 gradient summed in float32 (call-sequence fuzzer seed 17537) -----------------------
# clamp(int64 x, min=nan) + y, y a float64 0-dim tensor, is float32 (an integer tensor and a float
# number: the default dtype), so y's gradient is the float32 sum of 9 weights, which torch and
# tracegrad add in different orders: -0.17989308 and -0.17989302 about the exact -0.17989305. The
# fuzzer compared it at float64's tolerance (y's dtype); it now takes the outputs' dtypes too.

def test_call_sequence_fuzzer_seed_17537():
    with np.errstate(all="ignore"):
        assert CS.check_sequence(17537) == []


# -- the Triton backend (triton_checks.py's programs 44250 and 44297, under the interpreter) --------
# 44297: a batched matmul of a (0, 3, 3) operand by a (3, 3) matrix took its batch as max(0, 1) = 1,
# so its kernel read and wrote a whole 3 x 3 tile of empty arrays (a segfault under the
# interpreter, out-of-bounds accesses on a GPU). 44250: a row kernel took a value into its
# prologue while the member it reads was still outside the kernel; once that member joined (after
# the row sums) the sweep before the sums read it unset ("cannot access local variable 't143'").

_TRITON_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import numpy as np
import tracegrad as tg
import triton_checks as T
with np.errstate(all="ignore"):
    T.check_program(44250, "cuda")
    x = tg.tensor(np.ones((1, 3, 3), np.float32), requires_grad=True, device="cuda")
    out = tg.compile(lambda x: ((x.narrow(0, 0, 0) * x) @ x[0]).sum(), backend="triton", fullgraph=True)(x)
    assert out.item() == 0.0
    T.check_program(44297, "cuda")
print("ok")
"""


def test_triton_programs_44250_and_44297_under_the_interpreter():
    pytest.importorskip("triton")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.path.dirname(here))
    r = subprocess.run([sys.executable, "-c", _TRITON_SCRIPT.format(here=here)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    assert r.stdout.strip().endswith("ok")


def test_repr_of_a_no_grad_view_of_a_tensor_that_requires_grad_as_torch():
    """(seen reducing seed 29769) torch's view requires grad, and its repr says so."""
    reprs = []
    for m in (torch, tg):
        x = m.ones(4, requires_grad=True)
        with m.no_grad():
            u = x[0]
        reprs.append(repr(u))
    assert reprs[1] == reprs[0] == "tensor(1., requires_grad=True)"

"""Reduced repros of what the compile fuzzers found on seeds no run had tried before
(test_compile_call_sequence_fuzz.py 8000-9500, test_compile_step_fuzz.py 2200-2800,
test_compile_mutation_fuzz.py 15000-18000, test_compile_dtype_fuzz.py 25000-28000,
test_compile_random.py 43600-44200 in float32 and float64, triton_checks.py's programs
43500-43700 under the interpreter), each compared with torch and with eager tracegrad."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_compile_call_sequence_fuzz as SEQ            # noqa: E402
import test_compile_dtype_fuzz as DT                     # noqa: E402
import test_compile_mutation_fuzz as MUT                 # noqa: E402


def _bits(t):
    t = t.detach()
    a = np.asarray((t.float() if str(t.dtype).endswith("bfloat16") else t).numpy())
    return a.view(f"u{a.itemsize}")


# -- a view taken under no_grad, read with grad mode on after its base was written (mutation
# fuzzer seed 17230) -------------------------------------------------------------------------------
# e = x + x; v = e.narrow(...) under no_grad; e.fill_(2); then v (or a view of v) read by an op with
# grad mode on: torch raises "A view was created in no_grad mode and its base or another view of its
# base has been modified inplace with grad mode enabled" (or "Output 0 of Slice is a view of a view
# which was created in no_grad mode ..."), as eager tracegrad does. The compiled function took the
# view again from the written base and returned a value where both raise; it now runs eagerly
# (with compile's warning) and raises torch's error.

def _no_grad_view_read(m, x, case):
    e = x + x if case != "base without grad" else x.detach() * 2
    with m.no_grad():
        v = e.narrow(0, 0, 2)
    if case == "view of the view":
        v = v.narrow(1, 0, 1)
    if case == "base written under no_grad":
        with m.no_grad():
            e.fill_(2.0)
    else:
        e.fill_(2.0)
    if case == "read under no_grad, then with grad":
        with m.no_grad():
            a = v * 1
        return a + v[0, 0]
    if case == "read under no_grad only":
        with m.no_grad():
            return v * 3
    return v * 3 + x[0, 0]


def _outcome(f, m):
    x = m.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    try:
        out = f(x)
    except RuntimeError as e:
        return ("raises", str(e).split(" modified inplace")[0])
    return ("value", out.detach().numpy().tolist(), out.requires_grad)


@pytest.mark.parametrize("case", ["view", "view of the view", "base written under no_grad",
                                  "read under no_grad, then with grad"])
def test_a_no_grad_view_read_with_grad_after_its_base_was_written_raises_compiled_as_torch(case):
    want = _outcome(lambda x: _no_grad_view_read(torch, x, case), torch)
    assert want[0] == "raises" and "no_grad mode" in want[1]
    assert _outcome(lambda x: _no_grad_view_read(tg, x, case), tg) == want
    cf = tg.compile(lambda x: _no_grad_view_read(tg, x, case))
    with pytest.warns(UserWarning, match="cannot be traced"):
        got = _outcome(cf, tg)
    assert got == want


@pytest.mark.parametrize("case", ["base without grad", "read under no_grad only"])
def test_a_no_grad_view_torch_reads_without_error_still_compiles(case):
    """No error in torch: the compiled function traces (no warning) and gives torch's value."""
    want = _outcome(lambda x: _no_grad_view_read(torch, x, case), torch)
    assert want[0] == "value"
    cf = tg.compile(lambda x: _no_grad_view_read(tg, x, case))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert _outcome(cf, tg) == want
    assert _outcome(lambda x: _no_grad_view_read(tg, x, case), tg) == want


@pytest.mark.parametrize("then_view", [False, True])
def test_a_no_grad_view_of_a_base_that_gains_grad_later_raises_compiled_as_torch(then_view):
    """e = zeros; v = e[:2] under no_grad; e.copy_(x * 2): torch asks the base when v is read, and
    it requires grad by then."""
    def f(m, x):
        e = m.zeros(4, 2)
        with m.no_grad():
            v = e.narrow(0, 0, 2)
        e.copy_(x * 2)
        return (v[0] if then_view else v) * 3
    want = _outcome(lambda x: f(torch, x), torch)
    assert want[0] == "raises" and "no_grad mode" in want[1]
    assert _outcome(lambda x: f(tg, x), tg) == want
    with pytest.warns(UserWarning, match="view taken under no_grad"):
        assert _outcome(tg.compile(lambda x: f(tg, x)), tg) == want


# -- a piece of split read under no_grad after its base was written, then with grad (mutation fuzzer
# seed 22073) -------------------------------------------------------------------------------------
# p = e.split(2)[0]; e.exp_(); p + 1 under no_grad; p * 2: torch raises at p * 2 ("Output 0 of Split
# is a view and its base ... modified inplace. This view is the output of a function that returns
# multiple views"), as eager does. The compiled function refused only a read with grad mode on
# that came first, and returned [14.4, 14.4] (requires_grad False) here.

def _split_piece_read(m, x, case):
    e = x * 1.0 + 0.5
    p = e.split(2, -1)[0]
    e.exp_()
    if case == "read under no_grad only":
        with m.no_grad():
            return p + 1
    if case == "read under no_grad, then with grad":
        with m.no_grad():
            a = p + 1
        return p * 2 + a
    return p * 2


@pytest.mark.parametrize("case", ["read with grad", "read under no_grad, then with grad", "read under no_grad only"])
def test_a_split_piece_read_after_its_base_was_written_is_torchs_compiled(case):
    want = _outcome(lambda x: _split_piece_read(torch, x, case), torch)
    assert (want[0] == "raises") == (case != "read under no_grad only")
    assert _outcome(lambda x: _split_piece_read(tg, x, case), tg) == want
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _outcome(tg.compile(lambda x: _split_piece_read(tg, x, case)), tg) == want


@pytest.mark.parametrize("seed", [17230, 19279, 22073])
def test_mutation_fuzzer_seeds(seed):
    with np.errstate(all="ignore"):
        MUT._check_program(seed)


# -- clamp's Number bound given as a 0-dim integer tensor, into float16 (dtype fuzzer seed 27332) ---
# clamp(x16, 0, tensor(2 ** 63 - 2)): torch's parser reads the 0-dim tensor as a Number (beside the
# Number 0) and converts it to float16 with its overflow check: RuntimeError "value cannot be
# converted to type c10::Half without overflow". tracegrad took any integer dtype to fit any float
# dtype and returned [1, inf] (an int32 70000 too); float16's largest value is 65504.

@pytest.mark.parametrize("bound, dtype", [(2 ** 63 - 2, "int64"), (70000, "int32"), (-65520, "int32")])
def test_clamp_with_an_integer_0_dim_bound_past_float16_raises_as_torch(bound, dtype):
    x = np.array([1.0, np.inf, -3.0], np.float16)
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        torch.clamp(torch.tensor(x), 0, torch.tensor(bound, dtype=getattr(torch, dtype)))
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        tg.clamp(tg.tensor(x), 0, tg.tensor(bound, dtype=getattr(tg, dtype)))
    cf = tg.compile(lambda x, b: tg.clamp(x, min=0, max=b) if bound > 0 else tg.clamp(x, min=b, max=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # (the traced bound's value is unknown: it runs eagerly)
        with pytest.raises(RuntimeError, match="c10::Half without overflow"):
            cf(tg.tensor(x), tg.tensor(bound, dtype=getattr(tg, dtype)))


@pytest.mark.parametrize("bound, dtype", [(100, "int32"), (65504, "int64"), (-7, "int16"), (300, "int16")])
def test_clamp_with_an_integer_0_dim_bound_that_fits_float16_is_torchs(bound, dtype):
    x = np.array([1.0, np.inf, -3.0, 150.5], np.float16)
    want = torch.clamp(torch.tensor(x), -1, torch.tensor(bound, dtype=getattr(torch, dtype)))
    got = tg.clamp(tg.tensor(x), -1, tg.tensor(bound, dtype=getattr(tg, dtype)))
    assert str(got.dtype) == str(want.dtype)
    assert np.array_equal(_bits(got), _bits(want))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = tg.compile(lambda x, b: tg.clamp(x, -1, b))(tg.tensor(x), tg.tensor(bound, dtype=getattr(tg, dtype)))
    assert np.array_equal(_bits(c), _bits(want))


def test_clamp_with_an_int16_0_dim_bound_into_float16_traces():
    """int16's values all fit float16: no overflow check is needed, the function traces."""
    x = np.array([1.0, -3.0, 150.5], np.float16)
    cf = tg.compile(lambda x, b: tg.clamp(x, -1, b), fullgraph=True)
    got = cf(tg.tensor(x), tg.tensor(100, dtype=tg.int16))
    want = torch.clamp(torch.tensor(x), -1, torch.tensor(100, dtype=torch.int16))
    assert np.array_equal(_bits(got), _bits(want))


# -- the dtype fuzzer's tiers: a cancelling sum, an overflowing matmul product (seeds 25196, 26257) ----

def test_dtype_fuzzer_seeds_25196_26257_27332():
    for seed in (25196, 26257, 27332):
        with np.errstate(all="ignore"):
            DT.check_program(seed)


def test_a_cancelling_mean_differs_by_summation_order_only():
    """mean of float32 [2 ** 64, 8, -2 ** 64, 8, 6, 8]: every order's answer is rounding (exactly
    30 / 6; tracegrad's pairwise numpy 22 / 6, torch 8 / 6); the fuzzer leaves it untested against
    torch (compiled against eager stays bit for bit) and still tests a sum that does not cancel."""
    a = np.array([2.0 ** 64, 8, -2.0 ** 64, 8, 6, 8], np.float32)
    tm = torch.tensor(a).mean()
    assert DT._cancels("mean", torch.tensor(a), tm, {"dim": None, "keepdim": False})
    b = np.array([1.5, 8, -2.0, 8, 6, 8], np.float32)
    assert not DT._cancels("mean", torch.tensor(b), torch.tensor(b).mean(), {"dim": None, "keepdim": False})
    assert not DT._cancels("sum", torch.tensor(b.reshape(2, 3)), torch.tensor(b.reshape(2, 3)).sum(1),
                           {"dim": 1, "keepdim": False})
    e = tg.tensor(a).mean()
    c = tg.compile(lambda x: x.mean())(tg.tensor(a))
    assert np.array_equal(_bits(c), _bits(e))


def test_an_overflowing_matmul_product_is_the_kernels_order():
    """bfloat16 x @ x.T with a product -3.38e38 * 4.97 past float32: torch NaN, numpy's BLAS (FMA)
    and tracegrad inf; torch's own float64 gives inf. Products within float32 stay compared."""
    a = np.array([[-np.inf, 4.96875, 5.34375], [-2.171875, -3.3762e38, 4.125]])
    t = torch.tensor(a, dtype=torch.bfloat16)
    assert DT._product_overflows(t, t.transpose(-1, -2), t @ t.T)
    assert (torch.tensor(a) @ torch.tensor(a).T)[0, 1].item() == np.inf
    small = torch.tensor(np.where(np.isfinite(a), np.clip(a, -1e18, 1e18), a), dtype=torch.bfloat16)
    assert not DT._product_overflows(small, small.transpose(-1, -2), small @ small.T)
    x = tg.tensor(a).bfloat16()
    e = x @ x.T
    c = tg.compile(lambda x: x @ x.T)(tg.tensor(a).bfloat16())
    assert np.array_equal(_bits(c), _bits(e))


# -- std's gradient over a constant row (call-sequence seed 9283) ----------------------------------

def test_std_gradient_over_a_constant_row_is_torchs_rule_at_zero_compiled_and_eager():
    """x = leaf.expand(3) of one float32 value: std is 0 exactly, and torch's rule gives gradient 0
    where std is 0. torch's CPU std of a whole float32 tensor takes its mean in float32, 1 ulp off
    here (std 1.46e-7, gradient 1.22); tracegrad's in float64 is exact. In float64, where both
    round the mean alike, tracegrad's gradient is torch's."""
    for dtype, val in ((np.float32, 1.8277118), (np.float64, 0.1), (np.float64, 1 / 3)):
        leaf = tg.tensor(np.array([val], dtype), requires_grad=True)
        g_e, = tg.autograd.grad(leaf.expand(3).std(-1), leaf)
        leaf_c = tg.tensor(np.array([val], dtype), requires_grad=True)
        g_c, = tg.autograd.grad(tg.compile(lambda x: x.expand(3).std(-1))(leaf_c), leaf_c)
        assert np.array_equal(_bits(g_c), _bits(g_e))
        if dtype is np.float64:
            lt = torch.tensor(np.array([val], dtype), requires_grad=True)
            g_t, = torch.autograd.grad(lt.expand(3).std(-1), lt)
            np.testing.assert_allclose(g_e.numpy(), g_t.numpy(), rtol=1e-12, atol=1e-12)
        else:
            assert g_e.item() == 0.0


def test_call_sequence_seed_9283_and_the_std_exemption_is_narrow():
    assert not SEQ.check_sequence(9283)
    call = {"arrays": [np.array([1.0, 2.0, 3.0], np.float32), None], "layouts": ["contig", "contig"],
            "dtypes": ("float32", "float32")}
    assert not SEQ.std_of_a_constant_row("std", call)
    call["layouts"] = ["expanded", "contig"]
    assert SEQ.std_of_a_constant_row("std", call)
    assert not SEQ.std_of_a_constant_row("var", call)


# -- add / sub / rsub's alpha, converted to the op's dtype with torch's overflow check (found beside
# the clamp bound above) --------------------------------------------------------------------------
# add(x16, y16, alpha=70000): torch raises "value cannot be converted to type c10::Half without
# overflow"; tracegrad computed 70000 * y and returned inf, eager and compiled.

_ALPHA_OPS = {
    "add": lambda m, x, a: x.add(x, alpha=a),
    "sub": lambda m, x, a: x.sub(x * 0.5, alpha=a),
    "rsub": lambda m, x, a: m.rsub(x, x, alpha=a),
    "add of a number": lambda m, x, a: x.add(2.0, alpha=a),
    "add of a 0-dim float32": lambda m, x, a: x.add(m.tensor(2.0), alpha=a),
}


@pytest.mark.parametrize("op", sorted(_ALPHA_OPS))
@pytest.mark.parametrize("alpha", [70000, 1e10, -65520.0, 2 ** 63])
def test_alpha_past_float16_raises_as_torch(op, alpha):
    f = _ALPHA_OPS[op]
    x = np.array([1.0, 2.0, -3.0], np.float16)
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        f(torch, torch.tensor(x), alpha)
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        f(tg, tg.tensor(x), alpha)
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        tg.compile(lambda x: f(tg, x, alpha))(tg.tensor(x))


@pytest.mark.parametrize("op", sorted(_ALPHA_OPS))
@pytest.mark.parametrize("alpha", [65504, -2, float("inf"), float("nan")])
def test_alpha_within_float16_or_not_finite_is_torchs(op, alpha):
    f = _ALPHA_OPS[op]
    x = np.array([1.0, 2.0, -3.0], np.float16)
    want = f(torch, torch.tensor(x), alpha)
    w = want.float().numpy()
    for got in (f(tg, tg.tensor(x), alpha), tg.compile(lambda x: f(tg, x, alpha))(tg.tensor(x))):
        assert str(got.dtype) == str(want.dtype)
        g = got.float().numpy()
        # (a NaN's sign bit is the kernel's: torch's x - nan * y is -nan, numpy's nan)
        assert np.array_equal(np.isnan(g), np.isnan(w))
        assert np.array_equal(np.where(np.isnan(g), 0, g).view(np.uint32), np.where(np.isnan(w), 0, w).view(np.uint32))


@pytest.mark.parametrize("dtype, alpha", [("int8", 200), ("uint8", -256), ("int16", 40000), ("float32", 1e39),
                                          ("bfloat16", 1e39)])
def test_alpha_past_other_dtypes_raises_as_torch(dtype, alpha):
    for m in (torch, tg):
        x = m.tensor([1, 2], dtype=getattr(m, dtype))
        with pytest.raises(RuntimeError, match="without overflow"):
            x.add(x, alpha=alpha)


# -- index_fill's number value, converted with torch's check (found beside alpha) -----------------
# index_fill(x16, 0, i, 70000): torch raises "value cannot be converted to type c10::Half without
# overflow", tracegrad filled inf (65519: 65504); index_fill(uint8, 0, i, -1) is 255 in torch and
# eager, and the compiled function raised OverflowError.

@pytest.mark.parametrize("dtype, value", [("float16", 70000), ("float16", 65519), ("float16", -65520.0),
                                          ("int8", 300), ("int64", 2 ** 63), ("float32", 1e39)])
def test_index_fill_with_a_number_past_the_dtype_raises_as_torch(dtype, value):
    for m in (torch, tg):
        with pytest.raises(RuntimeError, match="without overflow"):
            m.zeros(3, dtype=getattr(m, dtype)).index_fill(0, m.tensor([1]), value)
    with pytest.raises(RuntimeError, match="without overflow"):
        tg.compile(lambda x: x.index_fill(0, tg.tensor([1]), value))(tg.zeros(3, dtype=getattr(tg, dtype)))


@pytest.mark.parametrize("dtype, value", [("uint8", -1), ("int8", 2.5), ("float16", float("inf")), ("bool", 5),
                                          ("float16", 65504), ("float64", -7)])
def test_index_fill_with_a_number_is_torchs_eager_compiled_and_in_place(dtype, value):
    want = torch.zeros(2, 3, dtype=getattr(torch, dtype)).index_fill(1, torch.tensor([0, -1]), value)
    fns = (lambda x: x.index_fill(1, tg.tensor([0, -1]), value),
           tg.compile(lambda x: x.index_fill(1, tg.tensor([0, -1]), value)),
           lambda x: x.index_fill_(1, tg.tensor([0, -1]), value))
    for f in fns:
        got = f(tg.zeros(2, 3, dtype=getattr(tg, dtype)))
        assert str(got.dtype) == str(want.dtype)
        assert np.array_equal(_bits(got), _bits(want))


def test_index_fill_with_a_number_has_torchs_gradient():
    a = np.arange(6.0).reshape(2, 3)
    res = []
    for m, f in ((torch, None), (tg, None), (tg, tg.compile(lambda x: x.index_fill(1, tg.tensor([0, -1]), 2.5)))):
        x = m.tensor(a, requires_grad=True)
        y = f(x) if f else x.index_fill(1, m.tensor([0, -1]), 2.5)
        g, = m.autograd.grad(y, x, m.tensor(a * 3 + 1))
        res.append((y.detach().numpy().tolist(), g.numpy().tolist()))
    assert res[0] == res[1] == res[2]


# -- logical_and / or / xor read their operands in the common dtype (dtype fuzzer seed 28021) ------
# logical_xor(tensor(-512), int8 tensor): torch casts the 0-dim int64 to int8 first (0), so the
# result is x != 0; tracegrad read -512 as True and gave its negation. Likewise 256 beside int8 or
# uint8, and a float64 0-dim 1e-300 beside float32 (float32's 0).

def _logical_cases(m):
    i8 = m.tensor([0, 4, -128, 1], dtype=m.int8)
    return [(m.logical_xor, m.tensor(-512), i8), (m.logical_and, i8, m.tensor(256)),
            (m.logical_or, m.tensor(256), i8 * 0), (m.logical_and, m.tensor(1e-300, dtype=m.float64),
                                                   m.tensor([0.0, 1.0, 2.0])),
            (m.logical_xor, m.tensor(65536), m.tensor([0, 1, -1], dtype=m.int16)),
            (m.logical_or, m.tensor(256), m.tensor([0, 3], dtype=m.uint8)),
            (m.logical_xor, m.tensor(1e-10, dtype=m.float64), m.tensor([0.0, 1.0], dtype=m.float16)),
            (m.logical_xor, m.tensor(True), i8), (m.logical_and, m.tensor(-512), m.tensor([0.0, 2.0]))]


@pytest.mark.parametrize("k", range(9))
def test_logical_ops_read_a_0_dim_operand_in_the_common_dtype_as_torch(k):
    f, a, b = _logical_cases(torch)[k]
    want = f(a, b).tolist()
    f, a, b = _logical_cases(tg)[k]
    assert f(a, b).tolist() == want
    assert tg.compile(lambda a, b: f(a, b))(a, b).tolist() == want


def test_dtype_fuzzer_seeds_28021_29544():
    for seed in (28021, 29544):
        with np.errstate(all="ignore"):
            DT.check_program(seed)


# -- pow's gradient for the exponent -2 ** 63 (dtype fuzzer seed 29544) ---------------------------
# torch's pow_backward computes exponent - 1 as a double there (-2 ** 63 again); tracegrad's Python
# int -2 ** 63 - 1 raised OverflowError in the backward, eager and compiled.

@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float64"])
def test_pow_gradient_with_the_most_negative_int64_exponent_is_torchs(dtype):
    a = np.array([[-2.93, -6.82, -1e-39], [0.5, 1.0, -1.0]])
    y = -2 ** 63
    res = []
    for m, f in ((torch, None), (tg, None), (tg, tg.compile(lambda x: x.pow(y)))):
        x = m.tensor(a, dtype=getattr(m, dtype), requires_grad=True)
        out = f(x) if f else x.pow(y)
        g, = m.autograd.grad(out.sum(), x)
        res.append((out.float().tolist(), g.float().tolist()))
    assert res[0] == res[1] == res[2]


# -- x[key] += v on a view made before its base gained history (mutation fuzzer seed 19279) --------
# e = a[1:]; e[2:0] += x (x requires grad): Python reads t = e[2:0], t += x (a gains history), then
# e[2:0] = t. torch's setitem writes through the view the key makes, which reads e.grad_fn (and so
# makes it); tracegrad checked e itself first and took it for a leaf that requires grad. A write to
# e itself (e.add_) still raises as torch's does until e.grad_fn is read.

_SETITEM_KEYS = {"empty slice": slice(2, 0), "a row": slice(0, 1), "an int": 1, "a column": (slice(None), 1),
                 "an index tensor": "index"}


@pytest.mark.parametrize("case", sorted(_SETITEM_KEYS))
def test_setitem_through_a_view_made_before_its_base_gained_history_is_torchs(case):
    """(an index tensor reads a copy: the base gains no history, e is written as any tensor)"""
    res = []
    for m in (torch, tg):
        a = m.tensor(np.arange(8.0).reshape(4, 2)).float()
        x = m.tensor([1.5], requires_grad=True)
        e = a[1:]
        key = m.tensor([0, 2]) if _SETITEM_KEYS[case] == "index" else _SETITEM_KEYS[case]
        try:
            e[key] += x
        except RuntimeError as err:
            res.append(str(err))
            continue
        g, = m.autograd.grad((e * m.tensor(np.arange(6.0).reshape(3, 2)).float()).sum(), x)
        res.append((e.detach().numpy().tolist(), a.detach().numpy().tolist(), e.requires_grad, g.tolist()))
    assert res[0] == res[1]
    assert not isinstance(res[0], str)


@pytest.mark.parametrize("read_grad_fn", [False, True])
def test_an_in_place_op_on_such_a_view_itself_is_torchs(read_grad_fn):
    res = []
    for m in (torch, tg):
        a = m.ones(4, 2)
        e = a[1:]
        t = e[0:1]
        t += m.tensor([1.0], requires_grad=True)
        if read_grad_fn:
            assert e.grad_fn is not None
        try:
            e.add_(1.0)
            res.append(e.detach().numpy().tolist())
        except RuntimeError as err:
            res.append(str(err))
    assert res[0] == res[1]
    assert ("leaf Variable" in str(res[0])) != read_grad_fn


def test_logical_ops_with_a_0_dim_operand_of_another_dtype_run_on_the_triton_backend():
    """The conversion is a node of its own (a cast as the logical op's compute dtype made Triton
    programs the interpreter could not run: float32 values under `&`). Under Triton's interpreter,
    a subprocess (TRITON_INTERPRET is read at import)."""
    pytest.importorskip("triton")
    here = os.path.dirname(os.path.abspath(__file__))
    script = ("import sys; sys.path.insert(0, %r)\n"
              "import torch, tracegrad as tg\n"
              "from test_compile_fresh_seeds4 import _logical_cases\n"
              "for k in range(9):\n"
              "    f, a, b = _logical_cases(torch)[k]\n"
              "    want = f(a, b).tolist()\n"
              "    f, a, b = _logical_cases(tg)[k]\n"
              "    got = tg.compile(lambda a, b: f(a, b), backend='triton')(a, b)\n"
              "    assert got.tolist() == want, (k, got, want)\n"
              "print('ok')\n") % here
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.path.dirname(here))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")

"""The Triton backend under Triton's interpreter (CPU torch tensors as pointer carriers).

Every primitive in the op table has a Triton lowering, glue or a listed refusal. Every
lowered primitive runs forward and backward twice: its graph lowered directly (compared
with the numpy reference interpreter and torch) and inside `tracegrad.compile(...,
backend="triton")` (compared with backend="numpy" and torch). Then fused groups,
reductions over the last and other dims (the row in one block, and looping over blocks),
matmul with its epilogue, a compiled training step, double backward, the generated
source (names, block sizes, masks, fp32 accumulation, IR listings, tuning) and explain."""
import os

import numpy as np
import pytest
import torch

# Triton picks the interpreter when a function is decorated: lower() decorates its kernels
# when it runs, but triton.language's own jit helpers are made at import, so the variable is
# set while triton is imported here (the generated kernels do not depend on those helpers,
# so a triton imported earlier by another test module is fine too). It is set again for
# this module's tests only (the fixture below): other modules see the machine as it is.
_BEFORE = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"
try:
    triton = pytest.importorskip("triton")
finally:
    if _BEFORE is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = _BEFORE


@pytest.fixture(autouse=True, scope="module")
def triton_interpreter():
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    if before is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = before


import tracegrad as tg  # noqa: E402
import tracegrad.nn.functional as NF  # noqa: E402
from tracegrad.autodiff import derive  # noqa: E402
from tracegrad.compile import trace_function  # noqa: E402
from tracegrad.ir.graph import Graph, map_args  # noqa: E402
from tracegrad.interpret import run_numpy  # noqa: E402
from tracegrad.ops.primitives import PRIMITIVES  # noqa: E402
from tracegrad.codegen import triton_gpu  # noqa: E402
from tracegrad.decompositions import lower  # noqa: E402
from tracegrad.ops.lowering import Decompose, Dot, Expr, Glue, Reduce, Refuse, Scatter  # noqa: E402

F32 = dict(rtol=2e-5, atol=2e-6)
F64 = dict(rtol=1e-10, atol=1e-12)
# masked-off lanes compute on the `other=0` fill (log(0), 1/0): numpy warns, the lanes are dropped
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")


# -- helpers -------------------------------------------------------------------------------------

def make_inputs(shapes, dtype=np.float32, domain="real", seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if isinstance(s, np.ndarray):
            out.append(s)
            continue
        a = rng.standard_normal(s)
        if domain == "pos":
            a = np.abs(a) + 0.5
        elif domain == "unit":
            a = np.clip(a * 0.3, -0.9, 0.9)
        out.append(a.astype(dtype))
    return out


def trace(fn, arrays):
    args = [tg.tensor(a.copy()) for a in arrays]
    g, _, _, outs = trace_function(lambda *xs: fn(tg, *xs), tuple(args), {}, "f")
    g.outputs = [o._name for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
    return g


def bind(g, arrays):
    return list(arrays) + [g[v]["value"]._data for v in g.inputs[len(arrays):]]


def numpy_of(x):
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()


def assert_same(got, want, tol):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if b is None or a is None:           # no gradient path: None on one side, zeros at most on the other
            c = a if b is None else b
            assert c is None or not np.any(numpy_of(c) if isinstance(c, torch.Tensor) else c)
            continue
        a = numpy_of(a)
        b = np.asarray(b.detach().numpy() if isinstance(b, torch.Tensor) else b)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype or a.dtype.kind == b.dtype.kind, (a.dtype, b.dtype)
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, equal_nan=True, **tol)
        else:
            np.testing.assert_array_equal(a, b)


def with_outputs(g, outs):
    h = g.copy()
    h.outputs = list(outs)
    return h


def check_forward(fn, arrays, tol=F32, torch_fn=None):
    """Lower fn's graph, run it on CPU tensors; compare with run_numpy and torch. Returns the graph."""
    g = trace(fn, arrays)
    prog = lower(g)
    got = prog(*bind(g, arrays))
    assert_same(got, run_numpy(g, bind(g, arrays)), tol)
    tt = [torch.from_numpy(a.copy()) for a in arrays]
    want = (torch_fn or fn)(torch, *tt)
    assert_same(got, want if isinstance(want, (list, tuple)) else [want], tol)
    return g, prog


def check_backward(fn, arrays, tol=F32, torch_fn=None, wrt=None):
    """The backward graph, lowered and run on values from the lowered forward graph;
    compared with run_numpy of the same graph and with torch's gradients."""
    g = trace(fn, arrays)
    wrt = list(range(len(arrays))) if wrt is None else wrt
    bwd = derive(g, list(g.outputs), [g.inputs[i] for i in wrt])
    rng = np.random.default_rng(7)
    seeds = [rng.standard_normal(g[o]["shape"]).astype(g[o]["dtype"].np) for o in g.outputs]
    saved = [v for v in bwd.inputs if bwd[v]["role"] == "saved"]
    fwd_vals = lower(with_outputs(g, [bwd[v]["fwd"] for v in saved]))(*bind(g, arrays))
    fwd_ref = run_numpy(with_outputs(g, [bwd[v]["fwd"] for v in saved]), bind(g, arrays))
    by_name = dict(zip(saved, fwd_vals))
    ref_by_name = dict(zip(saved, fwd_ref))
    args, ref_args = [], []
    it = iter(seeds)
    for v in bwd.inputs:
        role = bwd[v]["role"]
        if role == "grad":
            s = next(it)
            args.append(torch.from_numpy(s))
            ref_args.append(s)
        elif role == "saved":
            args.append(by_name[v])
            ref_args.append(ref_by_name[v])
        else:
            args.append(bwd[v]["value"]._data)
            ref_args.append(bwd[v]["value"]._data)
    prog = lower(bwd)
    got = prog(*args)
    assert_same(got, run_numpy(bwd, ref_args), tol)
    tt = [torch.from_numpy(a.copy()).requires_grad_(i in wrt) for i, a in enumerate(arrays)]
    outs = (torch_fn or fn)(torch, *tt)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    grads = torch.autograd.grad(outs, [tt[i] for i in wrt], [torch.from_numpy(s) for s in seeds], allow_unused=True)
    assert_same(got, list(grads), tol)
    return bwd, prog


# -- every primitive is lowered, glue, or refused by name -----------------------------------------

# The primitives the Triton backend refuses, each with the reason its op table entry gives;
# lowering a graph that uses one raises NotImplementedError naming it.
REFUSED = {
    "call_hooks": "call Python", "node_prehooks": "call Python", "node_hooks": "call Python",
    "function": "call Python", "function_backward": "call Python",
    "compiled_call": "nested compiled call", "compiled_backward": "nested compiled call",
    "traced_function": "removed before lowering", "once_differentiable_error": "differentiate twice",
    "derivative_error": "an op without a derivative in a compiled backward",
    "saved_value_written": "a value saved for backward and written in place",
    "compare_inplace": "an in-place comparison on a value that requires grad",
}
# ops with no Triton kernel yet: on a device they run their numpy kernel on a host copy
REFUSED.update({n: "numpy kernel on the host" for n in (
    "lgamma", "digamma", "polygamma", "erfinv", "mode_index", "i0", "special_i0e", "special_i1", "special_i1e",
    "angle", "gcd", "lcm", "nextafter",
    "erfc", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "asinh_inplace", "acosh_inplace",
    "atanh_inplace", "atan2", "cumsum", "cumprod", "argsort", "kthvalue_index",
    "linalg_inv", "det_cofactor", "linalg_det", "linalg_slogdet", "linalg_solve", "linalg_cholesky", "linalg_eigh",
    "linalg_svd", "linalg_solve_triangular", "linalg_qr", "linalg_pinv", "bitwise_left_shift", "bitwise_right_shift",
    "special_erfcx", "special_ndtri", "special_log_ndtr", "special_zeta", "special_polynomial", "special_bessel",
    "igamma", "igammac", "frexp", "linalg_lu_factor", "lu_permutation_matrix", "ctc_loss", "ctc_loss_backward",
    "_standard_gamma", "_standard_gamma_grad", "_dirichlet_grad", "dirichlet_rsample")})


def lowered_primitives():
    return {n for n in PRIMITIVES if triton_gpu.classify(n) == "lowered"}


def test_every_primitive_in_the_op_table_has_a_triton_lowering_glue_or_refusal():
    for name, prim in PRIMITIVES.items():
        low = prim.triton
        assert isinstance(low, (Expr, Reduce, Dot, Scatter, Glue, Decompose, Refuse)), f"{name}: triton slot is {low!r}"
        if isinstance(low, Refuse):
            assert name in REFUSED and REFUSED[name] in low.reason, (name, low.reason)
        if isinstance(low, Glue):
            assert callable(low.fn)
        if isinstance(low, Reduce):
            assert prim.reduction, name
    refused = {n for n, p in PRIMITIVES.items() if isinstance(p.triton, Refuse)}
    assert refused == set(REFUSED), sorted(refused ^ set(REFUSED))
    host = {n for n in refused if REFUSED[n] == "numpy kernel on the host"}     # to lower (issue 17)
    assert len(refused - host) < len(lowered_primitives()) // 4


def test_a_primitive_without_a_triton_slot_is_refused_by_name():
    x = make_inputs([(3, 4)])
    g = trace(lambda m, a: a.exp() * 2, x)
    op = next(n for n in g.ops() if g[n]["op"] == "exp")
    prim = g[op]["prim"]
    low, prim.triton = prim.triton, None
    try:
        with pytest.raises(NotImplementedError, match="exp: no Triton lowering"):
            lower(g)
    finally:
        prim.triton = low


def test_an_unsupported_primitive_raises_naming_it():
    x = make_inputs([(3, 4)])
    g = trace(lambda m, a: m.einsum("ij,jk->ik", a, a.T) * 2, [x[0].astype(np.int64)])
    with pytest.raises(NotImplementedError, match="einsum: a contraction of integer tensors"):
        lower(g)


def test_indexing_backward_adds_repeated_indices():
    x = make_inputs([(4, 3, 2)])[0]
    idx = np.array([[0, 2], [-1, 0], [2, 2]], dtype=np.int64)
    for fn in (lambda m, a, i: a[i].exp() * 2, lambda m, a, i: a[:, i[0]].tanh()):
        check_forward(fn, [x, idx])
        bwd, prog = check_backward(fn, [x, idx], wrt=[0])
        assert "index_add_kernel" in prog.kernel_names


@pytest.mark.parametrize("fn", [
    lambda m, a, i: a[i, i] * 2,                       # two index tensors
    lambda m, a, i: a[1, i].exp(),                     # an int and an index tensor
    lambda m, a, i: a[i[:2], 0, 1:].sin(),             # index tensor, int, slice
    lambda m, a, i: a[..., i].tanh() + a[None, 0, i, :1].sum(),
    lambda m, a, i: a[i, :, (i + 1) % 3] * 3,             # separated index tensors: their dims go first
], ids=["tt", "int-t", "t-int-slice", "ellipsis-None", "t-slice-t"])
def test_indexing_backward_with_any_key_adds_repeated_indices(fn):
    """getitem_backward with ints, slices, None and several (repeated) index tensors: a
    scatter-add kernel over each element's position, repeats adding up as torch's do."""
    x = make_inputs([(4, 3, 3)])[0]
    idx = np.array([0, 2, 0, 2, 2], dtype=np.int64)
    check_forward(fn, [x, idx])
    bwd, prog = check_backward(fn, [x, idx], wrt=[0])
    assert "index_add_kernel" in prog.kernel_names


def test_index_put_accumulate_adds_repeated_indices():
    x, v = make_inputs([(4, 3), (5, 3)])
    idx = np.array([0, 2, 0, -1, 0], dtype=np.int64)
    fn = lambda m, a, b, i: m.index_put(a, (i,), b * 2, accumulate=True).exp()  # noqa: E731
    check_forward(fn, [x, v, idx])
    bwd, prog = check_backward(fn, [x, v, idx], wrt=[0, 1])
    fwd = lower(trace(fn, [x, v, idx]))
    assert "index_put_kernel" in fwd.kernel_names
    # a constant value broadcast over mixed keys
    fn2 = lambda m, a, i: m.index_put(a, (i, m.tensor([1, 1, 2, 0, 1])), m.tensor(1.5), accumulate=True)  # noqa
    check_forward(fn2, [x, idx])


# -- every lowered elementwise primitive, forward and backward --------------------------------------
# (test_every_lowered_primitive_is_exercised_here checks that these tables and the tests named in
# ELSEWHERE reach every lowered primitive)
ELSEWHERE = {"matmul": "test_matmul_*", "tril": "test_tril_triu_and_glue_ops", "triu": "test_tril_triu_and_glue_ops",
             "argmax": "test_index_reductions_*", "argmin": "test_index_reductions_*",
             "max_dim": "test_index_reductions_*", "min_dim": "test_index_reductions_*",
             "isnan": "test_nonfinite_*", "isinf": "test_nonfinite_*", "isfinite": "test_nonfinite_*",
             "lt": "BINARY['eq']", "scatter": "test_scatter_*",
             "getitem_backward": "test_indexing_backward_*", "index_put": "test_index_put_*",
             "conv2d": "test_compiled_conv2d_*", "conv2d_weight": "test_compiled_conv2d_*",
             "conv_transpose2d": "test_compiled_conv_transpose2d_*",
             "threshold_backward": "UNARY['relu'] (its backward)",
             "piecewise_backward": "UNARY['piecewise'] (its backward)",
             "elu_backward": "UNARY['elu'] (its backward)",
             "hardswish_backward": "UNARY['hardswish'] (its backward)",
             "prelu_grad_input": "BINARY['prelu'] (its backward)",
             "prelu_grad_weight": "BINARY['prelu'] (its backward)",
             "binary_cross_entropy_backward": "EXTRA (binary_cross_entropy's backward)"}

R = "real"
UNARY = [  # (primitive, fn, domain, differentiable)
    ("neg", lambda m, x: -x, R, True),
    ("abs", lambda m, x: x.abs(), R, True),
    ("sign", lambda m, x: x.sign(), R, True),
    ("exp", lambda m, x: x.exp(), R, True),
    ("exp2", lambda m, x: m.exp2(x), R, True),
    ("log", lambda m, x: x.log(), "pos", True),
    ("log2", lambda m, x: x.log2(), "pos", True),
    ("log1p", lambda m, x: x.log1p(), "pos", True),
    ("expm1", lambda m, x: x.expm1(), R, True),
    ("sqrt", lambda m, x: x.sqrt(), "pos", True),
    ("rsqrt", lambda m, x: x.rsqrt(), "pos", True),
    ("reciprocal", lambda m, x: x.reciprocal(), "pos", True),
    ("sin", lambda m, x: x.sin(), R, True),
    ("cos", lambda m, x: x.cos(), R, True),
    ("tan", lambda m, x: x.tan(), "unit", True),
    ("tanh", lambda m, x: x.tanh(), R, True),
    ("sigmoid", lambda m, x: x.sigmoid(), R, True),
    ("erf", lambda m, x: m.erf(x), R, True),
    ("relu", lambda m, x: m.relu(x), R, True),
    # hardtanh, leaky_relu, threshold and the shrinks: their values with piecewise_backward for x
    ("piecewise", lambda m, x: (m.nn.functional.hardtanh(x, -0.5, 0.7) + m.nn.functional.leaky_relu(x, 0.2) +
                                m.nn.functional.threshold(x, 0.1, 2.0) + m.nn.functional.softshrink(x, 0.3) +
                                m.nn.functional.hardshrink(x, 0.4)), R, True),
    # elu, selu and celu: their values with elu_backward for x; the in-place forms' from the result
    ("elu", lambda m, x: (m.nn.functional.elu(x, 0.7) + m.nn.functional.selu(x) +
                          m.nn.functional.celu(x, 0.3)), R, True),
    ("elu_result", lambda m, x: (m.nn.functional.elu(x * 1, 0.7, inplace=True) +
                                 m.nn.functional.celu(x * 1, 0.3, inplace=True)), R, True),
    ("hardswish", lambda m, x: m.nn.functional.hardswish(x * 4), R, True),
    ("floor", lambda m, x: (x * 3).floor(), R, True),
    ("ceil", lambda m, x: (x * 3).ceil(), R, True),
    ("round", lambda m, x: (x * 3).round(), R, True),
    ("convert", lambda m, x: x.double() * 2, R, True),
    ("clone", lambda m, x: x.clone() * 2, R, True),
    ("clamp", lambda m, x: x.clamp(-0.5, 0.7), R, True),
    ("pow", lambda m, x: x ** 3 + x ** 2, R, True),
    ("pow", lambda m, x: x ** 2.5, "pos", True),
    ("logit", lambda m, x: m.logit(m.sigmoid(x)) + m.logit(m.sigmoid(x), 0.4), R, True),
]


@pytest.mark.parametrize("name, fn, domain, diff", UNARY, ids=[f"{c[0]}{i}" for i, c in enumerate(UNARY)])
def test_unary_primitive(name, fn, domain, diff):
    x = make_inputs([(3, 5)], domain=domain)
    g, prog = check_forward(fn, x)
    assert name in {g[n]["op"] for n in g.ops()}
    assert len(prog.kernels) == 1
    if diff:
        check_backward(fn, x)


BINARY = [
    ("add", lambda m, x, y: x + y, R, True),
    ("sub", lambda m, x, y: x - y, R, True),
    ("rsub", lambda m, x, y: 1 - x + y, R, True),
    ("mul", lambda m, x, y: x * y, R, True),
    ("div", lambda m, x, y: x / y, "pos", True),
    ("maximum", lambda m, x, y: m.maximum(x, y), R, True),
    ("minimum", lambda m, x, y: m.minimum(x, y), R, True),
    ("pow", lambda m, x, y: x ** y, "pos", True),
    ("remainder", lambda m, x, y: m.remainder(x * 4, y), "pos", True),
    ("fmod", lambda m, x, y: m.fmod(x * 4 - 2, y), "pos", True),
    ("copysign", lambda m, x, y: m.copysign(x, y - 0.5) + m.copysign(y, -1.0), R, True),
    ("hypot", lambda m, x, y: m.hypot(x, y * 3), R, True),
    ("prelu", lambda m, x, y: m.nn.functional.prelu(x, y), R, True),
    ("logaddexp", lambda m, x, y: m.logaddexp(x, y * 3) + m.logaddexp2(x * 2, y), R, True),
    ("heaviside", lambda m, x, y: m.heaviside(x, y), R, False),
    ("xlogy", lambda m, x, y: m.xlogy(x, y) + m.xlogy(x * 0, y - 1) + m.xlogy(2.0, y), "pos", True),
    ("xlog1py", lambda m, x, y: m.special.xlog1py(x, y) + m.special.xlog1py(x, 0.5), "pos", True),
    ("signbit", lambda m, x, y: m.signbit(x - y), R, False),
    ("floor_divide", lambda m, x, y: m.floor_divide(x * 4, y), "pos", False),
    ("div_rounding", lambda m, x, y: m.div(x * 4, y, rounding_mode="trunc"), "pos", True),
    ("where", lambda m, x, y: m.where(x > y, x, y * 2), R, True),
    ("masked_fill", lambda m, x, y: x.masked_fill(y > 0, 0.5), R, True),
    ("eq", lambda m, x, y: (x == y) | (x < y), R, False),
    ("ne", lambda m, x, y: x != y, R, False),
    ("le", lambda m, x, y: x <= y, R, False),
    ("gt", lambda m, x, y: x > y, R, False),
    ("ge", lambda m, x, y: x >= y, R, False),
    ("logical_and", lambda m, x, y: m.logical_and(x > 0, y > 0), R, False),
    ("logical_or", lambda m, x, y: m.logical_or(x > 0, y > 0), R, False),
    ("logical_xor", lambda m, x, y: m.logical_xor(x > 0, y > 0), R, False),
    ("logical_not", lambda m, x, y: m.logical_not(x > y), R, False),
    ("bitwise_xor", lambda m, x, y: (x * 8).to(m.int64) ^ (y * 8).to(m.int32), R, False),
    ("bitwise_and", lambda m, x, y: (x * 8).to(m.int32) & (y * 8).to(m.int32), R, False),
    ("bitwise_or", lambda m, x, y: (x * 8).to(m.int16) | (y * 8).to(m.int16), R, False),
]


def lowered_shapes(g):
    return {tuple(g[n]["shape"]) for n in g.ops() if triton_gpu.classify(g[n]["op"]) == "lowered"}


@pytest.mark.parametrize("name, fn, domain, diff", BINARY, ids=[c[0] for c in BINARY])
def test_binary_primitive_with_broadcasting(name, fn, domain, diff):
    x, y = make_inputs([(3, 4), (4,)], domain=domain)
    g, prog = check_forward(fn, [x, y])
    assert name in {g[n]["op"] for n in g.ops()}
    assert len(prog.kernels) == len(lowered_shapes(g))       # one chain per shape
    if diff:
        check_backward(fn, [x, y])


def test_integer_division_rounds_like_torch():
    x = np.array([-7, -6, -1, 0, 1, 5, 7], dtype=np.int64)
    y = np.array([3, -3, 2, 5, -2, 3, -4], dtype=np.int64)
    check_forward(lambda m, a, b: m.floor_divide(a, b) * 100 + m.remainder(a, b), [x, y])
    check_forward(lambda m, a, b: m.div(a, b, rounding_mode="trunc"), [x, y])
    check_forward(lambda m, a, b: ((a * b).sum(), a.amax(), b.to(m.int32).amin(), (a > 0).sum()), [x, y])


def test_nonfinite_checks_and_special_values():
    x = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 2.5, 0.5, -0.5], dtype=np.float32)
    check_forward(lambda m, a: (a.isnan(), a.isinf(), a.isfinite()), [x])
    y = np.array([-20.0, -3.0, -1e-4, 0.0, 1e-6, 0.3, 3.0, 30.0], dtype=np.float32)
    check_forward(lambda m, a: (a.tanh(), a.sigmoid(), a.expm1(), a.abs().log1p(), (a * 10).round()), [y])
    with np.errstate(invalid="ignore"):          # inf * 0 in the reference
        check_forward(lambda m, a: (m.maximum(a, a * 0), m.minimum(a, a * 0)), [x])


def test_half_precision_computes_in_fp32_and_stores_half():
    x, y = make_inputs([(4, 6), (6,)], dtype=np.float16)
    g, prog = check_forward(lambda m, a, b: ((a * b).tanh() + 1).sum(1), [x, y], tol=dict(rtol=2e-2, atol=2e-2))
    assert "to(tl.float32)" in prog.source and prog(x, y)[0].dtype == torch.float16


def test_float64_keeps_full_precision():
    x = make_inputs([(4, 6)], dtype=np.float64)
    tol = dict(rtol=1e-12, atol=1e-14)
    check_forward(lambda m, a: (a.tanh() * a.exp() + a.sigmoid()).sum(1), x, tol=tol)
    check_backward(lambda m, a: (a.tanh() * a.exp() + a.sigmoid()).sum(1), x, tol=tol)


def test_tril_triu_and_glue_ops():
    x = make_inputs([(4, 4)])
    check_forward(lambda m, a: (a.tril() + a.triu(1) * 2).exp(), x)
    check_backward(lambda m, a: (a.tril(-1) * 3 + a.triu()).sin(), x)
    a, b = make_inputs([(2, 3), (2, 3)])
    glue = lambda m, p, q: (m.cat([p, q], 1).reshape(3, 4).permute(1, 0) * 2).flip(0)[1:, :2].exp()  # noqa: E731
    check_forward(glue, [a, b])
    check_backward(glue, [a, b])
    g2 = lambda m, p, q: m.stack([p, q], 0).unsqueeze(0).expand(2, 2, 2, 3).sum(0).squeeze(0) * p  # noqa: E731
    check_forward(g2, [a, b])
    check_backward(g2, [a, b])


def test_scatter_and_scatter_add_with_repeated_indices():
    x, src = make_inputs([(3, 5), (3, 4)])
    idx = np.array([[0, 4, 4, 1], [2, 2, 2, 2], [3, 0, 1, 3]], dtype=np.int64)
    g, prog = check_forward(lambda m, a, i, s: (a.scatter_add(1, i, s) * 2, a.scatter(1, i, s)), [x, idx, src])
    assert "tl.atomic_add(" in prog.source and {"scatter_add_kernel", "scatter_kernel"} <= set(prog.kernel_names)
    check_backward(lambda m, a, i, s: a.scatter_add(1, i, s).tanh(), [x, idx, src], wrt=[0, 2])


def test_scatter_of_one_value_per_row_is_elementwise():
    """An index of one position per row (cross-entropy's one-hot gradient) is a comparison with
    the position: fused into the kernels around it, no atomics."""
    x, src = make_inputs([(3, 5), (3, 4)])
    idx = np.array([[0, 4, 4, 1], [2, 2, 2, 2], [3, 0, 1, 3]], dtype=np.int64)
    fn = lambda m, a, i, s: (a.scatter_add(1, i[:, :1], s[:, :1]).exp().sum(1),  # noqa: E731
                             a.scatter(1, i[:, 1:2], s[:, 2:3]) * 2, a[:, :4].scatter(0, i[:1, :] % 3, 2.5),
                             a[0].scatter_add(0, i[0, 3:], s[1, :1]))
    g, prog = check_forward(fn, [x, idx, src])
    assert "atomic_add" not in prog.source and {k.kind for k in prog.kernels} == {"pointwise", "reduce"}
    assert "fused_scatter_exp_sum_kernel" in prog.kernel_names
    check_backward(lambda m, a, i, s: a.scatter_add(1, i[:, :1], s[:, :1]).tanh(), [x, idx, src], wrt=[0, 2])


def test_cross_entropy_forward_and_backward():
    x = make_inputs([(5, 4)])[0]
    t = np.array([0, 3, 1, 1, 2], dtype=np.int64)
    fn = lambda m, a, y: NF.cross_entropy(a, y) if m is tg else torch.nn.functional.cross_entropy(a, y)  # noqa
    g, prog = check_forward(fn, [x, t])
    # the target's logit is one more stage of the log-softmax kernel: the logits are read once
    assert "= gather(" not in prog.plan and any("softmax_gather" in k for k in prog.kernel_names), prog.plan
    bwd, prog = check_backward(fn, [x, t], wrt=[0])
    # softmax - one-hot: the one-hot is a comparison with the column inside the row kernel
    assert "scatter_add_kernel" not in prog.kernel_names and sum(k.kind == "reduce" for k in prog.kernels) == 1
    x = make_inputs([(3, 100)])[0]                    # rows longer than the block: looped passes
    t = np.array([99, 0, 57], dtype=np.int64)
    check_forward(fn, [x, t])
    check_backward(fn, [x, t], wrt=[0])


# -- fusion -------------------------------------------------------------------------------------------

def test_pointwise_chain_is_one_kernel_with_a_readable_name():
    x, y = make_inputs([(3, 5), (5,)])
    fn = lambda m, a, b: ((a * b + 1).tanh() * 0.5 - a).exp()  # noqa: E731
    g, prog = check_forward(fn, [x, y])
    assert len(prog.kernels) == 1
    k = prog.kernels[0]
    assert k.name == "fused_mul_add_tanh_sub_exp_kernel"
    src = k.source
    for piece in ("BLOCK_SIZE: tl.constexpr", "mask = offsets <", "tl.load(", "tl.store(", "# IR nodes computed here",
                  "stride_"):
        assert piece in src
    for n in g.ops():
        assert f"#   {n}:" in src
    assert prog.source.count("@triton.jit") == 1 + prog.source.count("def _")


def test_strided_and_broadcast_inputs_are_read_through_their_strides():
    x = make_inputs([(4, 6)])[0]
    g = trace(lambda m, a, b, c: a * b + c, [x, x[:, 2:3].copy(), x[0].copy()])
    prog = lower(g)
    assert "stride_x0_1" in prog.source
    # an input of the domain's shape has a contiguous variant (flat offsets), picked at launch
    assert "x0_contiguous: tl.constexpr" in prog.source and "x1_contiguous" not in prog.source
    big = torch.from_numpy(np.ascontiguousarray(x.T))
    a = big.t()                                          # transposed: strides (1, 4)
    b = torch.from_numpy(x)[:, 2:3]                      # a column: storage offset 2, stride 6
    c = torch.from_numpy(x.copy())[:1].expand(4, 6)[1]   # a row of an expanded view
    got = prog(a, b, c)[0]
    np.testing.assert_allclose(got.numpy(), x * x[:, 2:3] + x[0], rtol=1e-6)
    got = prog(x.T.T, x[:, 2:3], x[0])[0]                # numpy views as arguments
    np.testing.assert_allclose(got.numpy(), x * x[:, 2:3] + x[0], rtol=1e-6)


def test_empty_tensors_launch_nothing():
    x, y, w = make_inputs([(0, 4), (4,), (4, 3)])
    check_forward(lambda m, a, b, c: ((a * b).exp(), (a * b).sum(0), (a * b).sum(1), a @ c), [x, y, w])


def test_a_value_used_outside_the_group_is_stored_once():
    x = make_inputs([(3, 4)])
    fn = lambda m, a: ((a * 2).exp(), (a * 2).exp().sum(1), (a * 2).sin())  # noqa: E731
    check_forward(fn, x)


# -- reductions ---------------------------------------------------------------------------------------

REDUCTIONS = [
    ("sum", lambda m, x: (x * 2).sum(1) + 1),
    ("sum", lambda m, x: x.sum()),
    ("mean", lambda m, x: x.mean(1, keepdim=True) * x),
    ("mean_low", lambda m, x: x.mean(1, dtype=m.float16) * 2),       # float32 sum, rounded once to float16
    ("prod", lambda m, x: (x * 0.5 + 1).prod(1)),
    ("amax", lambda m, x: x.amax(1)),
    ("amin", lambda m, x: x.amin(1, keepdim=True)),
    ("max_all", lambda m, x: x.max()),
    ("min_all", lambda m, x: x.min()),
    ("var", lambda m, x: x.var(1)),
    ("std", lambda m, x: x.std(1, keepdim=True)),
    ("logsumexp", lambda m, x: x.logsumexp(1)),
    ("norm", lambda m, x: x.norm(dim=1)),
    ("norm", lambda m, x: x.norm(p=1, dim=1) + x.norm(p=float("inf"), dim=1)),
    ("softmax", lambda m, x: x.softmax(1)),
    ("log_softmax", lambda m, x: x.log_softmax(-1)),
]


@pytest.mark.parametrize("name, fn", REDUCTIONS, ids=[f"{c[0]}{i}" for i, c in enumerate(REDUCTIONS)])
def test_reduction_primitive(name, fn):
    x = make_inputs([(3, 6)])
    g, prog = check_forward(fn, x)
    assert name in {g[n]["op"] for n in g.ops()}
    # one kernel per row shape: sibling reductions of one input share it (norm12: two norms)
    assert len(prog.kernels) == 1
    check_backward(fn, x)


def test_every_lowered_primitive_is_exercised_here():
    named = {c[0] for c in UNARY + BINARY + REDUCTIONS} | set(ELSEWHERE)
    assert named == lowered_primitives(), sorted(lowered_primitives() ^ named)
    seen = set()
    for cases, shapes in ((UNARY, [(3, 5)]), (BINARY, [(3, 4), (4,)]), (REDUCTIONS, [(3, 6)])):
        for c in cases:
            g = trace(c[1], make_inputs(shapes, domain=c[2] if len(c) > 2 else R))
            seen |= {g[n]["op"] for n in g.ops()}
    assert named - set(ELSEWHERE) <= seen


@pytest.mark.parametrize("n", [6, 100])
def test_index_reductions_pick_the_first_extreme(n):
    x = make_inputs([(3, n)])[0]
    x[1, n // 2] = x[1, 1] = x[1].max() + 1                  # a tie: the first one wins
    fn = lambda m, a: (a.argmax(1), a.argmin(0, keepdim=True), a.argmax(), (a * 2).argmin(1))  # noqa: E731
    g, prog = check_forward(fn, [x])
    assert {"argmax", "argmin"} <= {g[n_]["op"] for n_ in g.ops()}
    both = lambda m, a: tuple(a.max(1)) + tuple((a * 2).min(0, keepdim=True)) + (a.max(1)[0] + 1,)  # noqa: E731
    g, prog = check_forward(both, [x])
    assert {"max_dim", "min_dim"} <= {g[n_]["op"] for n_ in g.ops()}
    assert len(prog.kernels) == 3
    check_backward(lambda m, a: a.max(1)[0].exp() + a.min(1)[0], [x])


@pytest.mark.parametrize("dims", [(1,), (0, 2), (2,)])
def test_reductions_over_middle_and_several_dims(dims):
    x = make_inputs([(2, 5, 3)])
    check_forward(lambda m, a: ((a * a).sum(dims) * 2, a.amax(dims, keepdim=True) - 1), x)
    check_backward(lambda m, a: (a.exp() * 2).sum(dims).tanh(), x)


@pytest.mark.parametrize("fn", [lambda m, x: (x * 2).sum(1), lambda m, x: x.softmax(1) * x,
                                lambda m, x: x.var(1), lambda m, x: x.logsumexp(1) + x.mean(1)])
def test_rows_longer_than_the_block_loop(fn):
    x = make_inputs([(3, 100)])
    g, prog = check_forward(fn, x)
    red = [k for k in prog.kernels if k.kind == "reduce"]
    assert red and all(not k.whole for k in red)
    assert all("for start in range(0, 100, BLOCK_SIZE)" in k.source for k in red)
    check_backward(fn, x)
    whole = lower(g, max_row_block=128)
    assert all(k.whole for k in whole.kernels if k.kind == "reduce")
    assert_same(whole(*bind(g, x)), run_numpy(g, bind(g, x)), F32)


@pytest.mark.parametrize("shape", [(37, 10), (5, 3, 7), (2, 64)])
def test_short_rows_are_packed_several_to_a_program(shape):
    """Rows shorter than PACK_LANES: a program takes a [rows, BLOCK_SIZE] block (the last
    program's rows past the end masked), for row values and full-row values alike."""
    def fn(m, a, t):
        return (m.softmax(a, -1) * t).sum(-1) + a.amax(-1) + a.argmax(-1) + m.logsumexp(a, -1)
    x, t = make_inputs([shape, shape], seed=3)
    g, prog = check_forward(fn, [x, t])
    red = [k for k in prog.kernels if k.kind == "reduce"]
    n = shape[-1]
    want = min(triton_gpu.PACK_LANES // triton_gpu._next_pow2(n), triton_gpu._next_pow2(x.size // n))
    assert red and all(k.rows == want > 1 for k in red), [(k.name, k.rows) for k in red]
    assert all(f"tl.arange(0, {want})[:, None]" in k.source and "keep_dims=True" in k.source for k in red)
    check_backward(fn, [x, t], wrt=[0, 1])


@pytest.mark.parametrize("shape, fn", [
    ((64, 10), lambda m, a: a.sum(0)),                       # a bias gradient
    ((150, 70), lambda m, a: (a * a).mean(0)),               # rows past a block, columns past a tile
    ((5, 7, 3), lambda m, a: a.amax((0, 1))),
    ((33, 5), lambda m, a: a.amin(0)),
], ids=["sum", "mean_prologue", "amax_two_dims", "amin"])
def test_column_reductions_are_tiled_rows_by_columns(shape, fn):
    """A reduction over leading dims (every case keeps the last dim only) reads [rows, columns]
    tiles, COL_BLOCK columns a program."""
    x = make_inputs([shape], seed=5)
    g, prog = check_forward(fn, x)
    red = [k for k in prog.kernels if k.kind == "reduce"]
    assert len(red) == 1 and "tl.reduce(acc, 0," in red[0].source and "cmask = cols <" in red[0].source
    assert red[0].rows == min(triton_gpu.COL_BLOCK, triton_gpu._next_pow2(shape[-1]))    # columns a program
    check_backward(fn, x)


def test_softmax_backward_fuses_around_its_row_sum():
    x = make_inputs([(4, 6)])
    bwd, prog = check_backward(lambda m, a: a.softmax(1), x)
    assert len(prog.kernels) == 1 and prog.kernels[0].kind == "reduce"


@pytest.mark.parametrize("n", [6, 100])        # the row whole in a block, and looped over blocks
def test_compiled_softmax_log_softmax_and_sibling_reductions_are_one_kernel_each_way(n):
    """The float32 softmax decomposition (max, detach, exp, sum, div) and its backward, and
    three reductions of one input, each one kernel with the row on chip."""
    x = make_inputs([(4, n)])
    for fn in (lambda m, a: a.softmax(1), lambda m, a: a.log_softmax(1)):
        p = check_compiled(fn, x, tol=dict(rtol=1e-4, atol=1e-5))
        assert "detach" in ops_of(p.fwd_fn.program.graph)
        for run in (p.fwd_fn, p.bwd_fn):
            assert len(run.program.kernels) == 1 and run.program.kernels[0].kind == "reduce", run.program.plan
    p = check_compiled(lambda m, a: a.sum(1) + a.amax(1) + a.var(1), x, tol=dict(rtol=1e-4, atol=1e-5))
    (k,) = p.fwd_fn.program.kernels
    assert len(k.stages) == 3 and k.reads == p.fwd_fn.program.graph.inputs[:1]


def test_layernorm_forward_and_backward():
    x, w, b = make_inputs([(4, 8), (8,), (8,)])
    fn = lambda m, a, w_, b_: NF.layer_norm(a, (8,), w_, b_) if m is tg else torch.nn.functional.layer_norm(  # noqa
        a, (8,), w_, b_)
    g, prog = check_forward(fn, [x, w, b], tol=dict(rtol=1e-4, atol=1e-5))
    assert len(prog.kernels) == 1                     # mean, then var of the centred row: two stages
    check_backward(fn, [x, w, b], tol=dict(rtol=1e-4, atol=1e-5))
    # the backward is one kernel: two row sums, and the weight and bias gradients as column
    # sums, each program adding its rows' partials; 11 rows: the second program's last rows
    # repeat row 10 and add nothing
    x = make_inputs([(11, 8)])[0]
    bwd, prog = check_backward(fn, [x, w, b], tol=dict(rtol=1e-4, atol=1e-5))
    (k,) = prog.kernels
    assert k.kind == "reduce" and len(k.stages) == 2 and len(k.col_stages) == 2 and k.rows == 8, prog.plan
    assert prog.source.count("tl.atomic_add(") == 2
    x = make_inputs([(3, 100)])[0]                    # rows longer than the block: one loop per pass
    fn = lambda m, a, w_, b_: NF.layer_norm(a, (100,)) if m is tg else torch.nn.functional.layer_norm(a, (100,))  # noqa
    g, prog = check_forward(fn, [x, w, b], tol=dict(rtol=1e-4, atol=1e-5))
    assert len(prog.kernels) == 1 and prog.kernels[0].source.count("for start in range(0, 100, BLOCK_SIZE)") == 3
    check_backward(fn, [x, w, b], tol=dict(rtol=1e-4, atol=1e-5), wrt=[0])


# -- matmul ---------------------------------------------------------------------------------------

def test_matmul_with_bias_relu_epilogue_is_one_kernel():
    x, w, b = make_inputs([(5, 7), (7, 3), (3,)])
    fn = lambda m, a, w_, b_: (a @ w_ + b_).relu() * 0.5  # noqa: E731
    g, prog = check_forward(fn, [x, w, b])
    assert prog.kernel_names == ["matmul_add_relu_mul_kernel"]
    src = prog.kernels[0].source
    assert "tl.dot(" in src and "BLOCK_K: tl.constexpr" in src and "tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)" in src
    check_backward(fn, [x, w, b])


def test_matmul_shapes_larger_than_a_tile_batched_and_vector():
    a, b = make_inputs([(2, 20, 18), (18, 17)])
    check_forward(lambda m, p, q: p @ q, [a, b])
    check_backward(lambda m, p, q: (p @ q).tanh(), [a, b])
    v, M = make_inputs([(5,), (5, 4)])
    check_forward(lambda m, p, q: (p @ q, q.T @ p, p @ p, q.T @ q), [v, M])
    check_backward(lambda m, p, q: (p @ q).sum() + (q.T @ p).sum(), [v, M])


# -- whole programs ---------------------------------------------------------------------------------

def mlp_loss(m, x, w1, b1, w2, b2, onehot):
    h = (x @ w1 + b1).tanh()
    logits = h @ w2 + b2
    return -(logits.log_softmax(1) * onehot).sum(1).mean()


def test_mlp_training_step_backward():
    x, w1, b1, w2, b2 = make_inputs([(6, 5), (5, 8), (8,), (8, 3), (3,)], seed=3)
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0, 2]]
    arrays = [x, w1, b1, w2, b2, onehot]
    check_forward(mlp_loss, arrays)
    bwd, prog = check_backward(mlp_loss, arrays, wrt=[1, 2, 3, 4], tol=dict(rtol=1e-4, atol=1e-6))
    assert len(prog.kernels) < len([n for n in bwd.ops() if triton_gpu.classify(bwd[n]["op"]) == "lowered"])


def compose(fwd, bwd):
    """One graph computing the backward from the forward's inputs and the seeds:
    the saved values come from the forward nodes themselves."""
    h = Graph("fwd_and_bwd")
    rename = {}
    for v in fwd.inputs:
        a = fwd[v]
        rename[v] = h.add_input(a["shape"], a["dtype"], a["role"])
        if "value" in a:
            h[rename[v]]["value"] = a["value"]
    seeds = []
    for v in bwd.inputs:
        a = bwd[v]
        if a["role"] == "grad":
            rename[("b", v)] = h.add_input(a["shape"], a["dtype"], "grad")
            seeds.append(rename[("b", v)])
        elif a["role"] == "const":
            rename[("b", v)] = h.add_input(a["shape"], a["dtype"], "const")
            h[rename[("b", v)]]["value"] = a["value"]

    def copy(g, key):
        for n in g.nodes():
            a = g[n]
            if a["op"] == "input":
                if key and a["role"] == "saved":
                    rename[("b", n)] = rename[a["fwd"]]
                continue
            args = map_args(a["args"], lambda r: rename[(key, r) if key else r])
            if a["op"] == "proj":
                new = h.add_proj(args[0], a["params"]["index"], a["shape"], a["dtype"])
            else:
                new = h.add_op(a["prim"], args, a["params"], a["shape"], a["dtype"], a.get("source"))
            rename[(key, n) if key else n] = new
    copy(fwd, None)
    copy(bwd, "b")
    h.outputs = [rename[("b", o)] for o in bwd.outputs]
    return h


def test_double_backward_of_a_derived_graph():
    x = make_inputs([(7,)], dtype=np.float64)
    g = trace(lambda m, a: (a.tanh() ** 2).sum(), x)
    bwd = derive(g, list(g.outputs), [g.inputs[0]])
    both = compose(g, bwd)                                   # (x, seed) -> d/dx
    hess = derive(both, list(both.outputs), [both.inputs[0]])  # (seed2, saved...) -> H seed2
    rng = np.random.default_rng(1)
    v = rng.standard_normal(7)
    saved = [n for n in hess.inputs if hess[n]["role"] == "saved"]
    vals = dict(zip(saved, lower(with_outputs(both, [hess[n]["fwd"] for n in saved]))(x[0], np.ones(()))))
    args = [torch.from_numpy(v) if hess[n]["role"] == "grad" else vals[n] for n in hess.inputs]
    prog = lower(hess)
    got = prog(*args)[0]
    ref_vals = dict(zip(saved, run_numpy(with_outputs(both, [hess[n]["fwd"] for n in saved]), [x[0], np.ones(())])))
    want = run_numpy(hess, [v if hess[n]["role"] == "grad" else ref_vals[n] for n in hess.inputs])[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    t = torch.from_numpy(x[0].copy()).requires_grad_(True)
    (gx,) = torch.autograd.grad((t.tanh() ** 2).sum(), t, create_graph=True)
    (hv,) = torch.autograd.grad(gx, t, torch.from_numpy(v))
    np.testing.assert_allclose(got.numpy(), hv.numpy(), rtol=1e-10)


TORCH_MATH = {
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "sum", "mean", "prod", "matmul", "mm",
    "bmm", "addmm", "dot", "mv", "einsum", "exp", "exp2", "log", "log2", "log1p", "expm1", "tanh", "sigmoid",
    "softmax", "log_softmax", "where", "maximum", "minimum", "amax", "amin", "max", "min", "argmax", "argmin",
    "var", "std", "pow", "sqrt", "rsqrt", "reciprocal", "neg", "abs", "sign", "erf", "relu", "clamp", "logsumexp",
    "norm", "floor", "ceil", "round", "sin", "cos", "tan", "cumsum", "tril", "triu", "eq", "ne", "lt", "le", "gt",
    "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "masked_fill", "index_add_", "scatter_add_", "scatter_reduce_", "index_put_", "add_", "sub_", "mul_", "div_",
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
    "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__mod__", "__pow__", "__rpow__", "__neg__",
    "__abs__", "__matmul__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
    "__xor__", "__invert__"}


def _torch_calls(runs):
    """The names of the torch functions called while the lowered programs of `runs`
    ((graph, input arrays or None for ones) pairs) execute."""
    from torch.overrides import TorchFunctionMode

    class Record(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.seen.add(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    seen = set()
    for graph, arrays in runs:
        prog = lower(graph)
        arrays = arrays or [np.ones(graph[v]["shape"], graph[v]["dtype"].np) for v in graph.inputs]
        rec = Record()
        with rec:
            prog(*bind(graph, arrays))
        seen |= rec.seen
    return seen


def test_no_result_is_computed_by_a_torch_math_op():
    x, w1, b1, w2, b2 = make_inputs([(6, 5), (5, 8), (8,), (8, 3), (3,)], seed=3)
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0, 2]]
    g = trace(mlp_loss, [x, w1, b1, w2, b2, onehot])
    bwd = derive(g, list(g.outputs), g.inputs[1:5])
    a, b = make_inputs([(2, 3), (2, 3)])
    glue = trace(lambda m, p, q: (m.cat([p, q], 1).reshape(3, 4).T * 2).flip(0)[1:, :2].exp(), [a, b])
    glue_bwd = derive(glue, list(glue.outputs), glue.inputs)
    # LayerNorm's backward (column sums by atomic adds into zeros), indexing backward with a
    # mixed key and index_put(accumulate=True) (adds at positions the launcher indexes)
    ln = trace(lambda m, p, w_, b_: NF.layer_norm(p, (3,), w_, b_), make_inputs([(4, 3), (3,), (3,)]))
    ln_bwd = derive(ln, list(ln.outputs), ln.inputs)
    idx = np.array([0, 1, 1], dtype=np.int64)
    ix = trace(lambda m, p, i: p[i, 1:].exp() + m.index_put(p, (i,), p[0] * 2, accumulate=True)[:, 1:].sum(), [a, idx])
    ix_bwd = derive(ix, list(ix.outputs), ix.inputs[:1])
    seen = _torch_calls([(g, [x, w1, b1, w2, b2, onehot]), (bwd, None), (glue, [a, b]), (glue_bwd, None),
                         (ln, None), (ln_bwd, None), (ix, [a, idx]), (ix_bwd, None)])
    assert {"empty", "reshape"} <= seen                 # the recorder sees the launcher's calls
    assert not seen & TORCH_MATH, sorted(seen & TORCH_MATH)


def test_source_lists_every_kernel_for_explain():
    x, w, b = make_inputs([(5, 7), (7, 3), (3,)])
    g = trace(lambda m, a, w_, b_: (a @ w_ + b_).softmax(1).sum(0), [x, w, b])
    prog = lower(g)
    for k in prog.kernels:
        assert f"def {k.name}(" in prog.source
    assert len(prog.kernels) == 2                      # the matmul; softmax with its column sums


# -- compiled with backend="triton": against the numpy backend and torch ------------------------------

def to_numpy(t):
    return None if t is None else np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


def check_compiled(fn, arrays, tol=F32, torch_fn=None, wrt=None):
    """fn compiled with backend="triton" and with backend="numpy", forward and backward
    (tracegrad.autograd.grad with random seeds), compared with each other and with torch.
    Returns the triton-compiled function's last program."""
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    res = {}
    for backend in ("triton", "numpy"):
        f = tg.compile(lambda *xs: fn(tg, *xs), backend=backend, fullgraph=True)
        xs = [tg.tensor(a.copy(), requires_grad=i in wrt) for i, a in enumerate(arrays)]
        out = f(*xs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        diff = [k for k, o in enumerate(outs) if o.requires_grad]
        rng = np.random.default_rng(7)
        seeds = [rng.standard_normal(tuple(outs[k].shape)).astype(outs[k].dtype.np) for k in diff]
        grads = []
        if diff:
            grads = tg.autograd.grad([outs[k] for k in diff], [xs[i] for i in wrt], [tg.tensor(s) for s in seeds],
                                     allow_unused=True)
        res[backend] = ([to_numpy(o) for o in outs], [to_numpy(gr) for gr in grads], f.last_program)
    outs, grads, p = res["triton"]
    assert isinstance(p.fwd_fn.program, triton_gpu.TritonProgram) and "@triton.jit" in p.fwd_fn.source
    if grads:
        assert isinstance(p.bwd_fn.program, triton_gpu.TritonProgram)
    assert_same(outs, res["numpy"][0], tol)
    assert_same(grads, res["numpy"][1], tol)
    tt = [torch.from_numpy(a.copy()).requires_grad_(i in wrt) for i, a in enumerate(arrays)]
    want = (torch_fn or fn)(torch, *tt)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert_same(outs, want, tol)
    if grads:
        tdiff = [want[k] for k in diff]
        tgrads = torch.autograd.grad(tdiff, [tt[i] for i in wrt], [torch.from_numpy(s) for s in seeds],
                                     allow_unused=True)
        assert_same(grads, list(tgrads), tol)
    return p


IDX = np.array([[0, 4, 4, 1], [2, 2, 2, 2], [3, 0, 1, 3]], dtype=np.int64)
EXTRA = [  # (primitive, fn, inputs, differentiable): the primitives ELSEWHERE names, compiled
    # binary_cross_entropy's backward is an op of its own (torch's EPSILON, its double backward)
    ("binary_cross_entropy_backward", lambda m, a: m.nn.functional.binary_cross_entropy(
        m.sigmoid(a), m.sigmoid(a * 0.5).detach(), reduction="none"), lambda: make_inputs([(3, 5)]), True),
    ("matmul", lambda m, a, b: (a @ b + 1).relu(), lambda: make_inputs([(4, 5), (5, 3)]), True),
    ("tril", lambda m, a: a.tril() * 2 + a.triu(1).exp(), lambda: make_inputs([(4, 4)]), True),
    ("argmax", lambda m, a: (a.argmax(1), a.argmin(0), a.amax(1) * 2), lambda: make_inputs([(3, 6)]), False),
    ("max_dim", lambda m, a: a.max(1)[0].exp() + a.min(1)[0], lambda: make_inputs([(3, 6)]), True),
    ("isnan", lambda m, a: (a.isnan(), a.isinf(), m.where(a.isfinite(), a, 0.0) * 2),
     lambda: [np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 2.5], dtype=np.float32)], False),
    ("scatter", lambda m, a, i, s: a.scatter_add(1, i, s).tanh() + a.scatter(1, i[:, :3], s[:, :3]),
     lambda: [make_inputs([(3, 5)])[0], IDX, make_inputs([(3, 4)], seed=1)[0]], True),
    ("getitem_backward", lambda m, a, i: a[i].exp() * 2,
     lambda: [make_inputs([(4, 3, 2)])[0], np.array([[0, 2], [-1, 0], [2, 2]], dtype=np.int64)], True),
    ("index_put", lambda m, a, i, v: m.index_put(a, (i,), v * 2, accumulate=True).exp(),
     lambda: [make_inputs([(4, 3)])[0], np.array([0, 2, 0, -1, 0], dtype=np.int64), make_inputs([(5, 3)], seed=1)[0]],
     True),
]
COMPILED = ([(c[0], c[1], (lambda c=c: make_inputs([(3, 5)], domain=c[2])), c[3]) for c in UNARY]
            + [(c[0], c[1], (lambda c=c: make_inputs([(3, 4), (4,)], domain=c[2])), c[3]) for c in BINARY]
            + [(c[0], c[1], (lambda: make_inputs([(3, 6)])), True) for c in REDUCTIONS] + EXTRA)


def test_compiled_diagonal_is_a_view_glue_of_any_strides():
    # diagonal lowers as glue (a strided view of the carrier), like permute
    p = check_compiled(lambda m, a: (a.diagonal().exp() * 2, a.transpose(0, 2).diagonal(1, 0, 2).tanh()),
                       make_inputs([(4, 3, 5)]))
    assert "diagonal" in ops_of(p.stages[0][1])


def ops_of(*graphs):
    return {g[n]["op"] for g in graphs if g is not None for n in g.ops()}


@pytest.mark.parametrize("name, fn, inputs, diff", COMPILED, ids=[f"{c[0]}{i}" for i, c in enumerate(COMPILED)])
def test_compiled_primitive_forward_and_backward(name, fn, inputs, diff):
    arrays = inputs()
    with np.errstate(invalid="ignore"):          # inf - inf in the nonfinite case's reference
        p = check_compiled(fn, arrays, wrt=None if diff else [])
    # the primitive is in the traced graph or the derived backward (passes may rewrite it:
    # x ** 2 becomes x * x, softmax is decomposed; the uncompiled tests above lower it as is)
    assert name in ops_of(p.stages[0][1], p.bwd_ir)
    assert (p.bwd_fn is not None) == diff


def test_every_lowered_primitive_is_compiled_forward_and_backward():
    named = {c[0] for c in COMPILED} | {"lt", "triu", "argmin", "min_dim", "isinf", "isfinite",
                                        "threshold_backward",      # relu's backward
                                        "piecewise_backward",      # hardtanh's, leaky_relu's, ... backward
                                        "elu_backward",            # elu's, selu's, celu's backward
                                        "hardswish_backward",
                                        "prelu_grad_input", "prelu_grad_weight"}
    named |= CONVS              # test_compiled_conv2d_* and test_compiled_conv_transpose2d_*
    assert named == lowered_primitives(), sorted(lowered_primitives() ^ named)


@pytest.mark.parametrize("shape, dim", [((3, 6), 1), ((6, 3), 0), ((3, 100), 1), ((100, 3), 0), ((2, 70, 3), 1)])
def test_compiled_reductions_over_last_and_leading_dims_whole_row_and_looped(shape, dim):
    x = make_inputs([shape])
    fn = lambda m, a: (((a * 2).sum(dim) + a.amax(dim)).tanh(), a.softmax(dim) * a, a.var(dim))  # noqa: E731
    p = check_compiled(fn, x, tol=dict(rtol=1e-4, atol=1e-5))
    whole = shape[dim] <= 64               # the interpreter's max_row_block
    for run in (p.fwd_fn, p.bwd_fn):
        red = [k for k in run.program.kernels if k.kind == "reduce"]
        assert red and all(k.whole == whole for k in red)
        for k in red:
            assert ("for start in range(0, " in k.source) == (not whole)


@pytest.mark.parametrize("shape, fn, rows", [
    ((16, 40), lambda m, a: (a.exp() * 2).sum(), 16),
    ((16, 40), lambda m, a: a.mean() + a.amax() - a.max() + a.min(), 16),
    ((16, 40), lambda m, a: (a - a.mean()).sin(), 16),
    ((4, 4, 10), lambda m, a: a.sum((0, 1, 2), keepdim=True) * a, 4),
    ((640,), lambda m, a: (a.sum() + a.amax()).exp(), 10),
])
def test_whole_tensor_reductions_run_in_two_stages(shape, fn, rows):
    """A reduction of a whole tensor longer than a block reduces the trailing dims that fit a
    block, one program per leading index (a 1-d input seen as rows of a divisor of its size),
    then those partial results: values and gradients as torch's."""
    x = make_inputs([shape])
    p = check_compiled(fn, x, tol=dict(rtol=1e-4, atol=1e-5))
    red = [k for k in p.fwd_fn.program.kernels if k.kind == "reduce"]
    assert any(k.M == rows for k in red) and all(k.M in (1, rows) for k in red), [(k.name, k.M) for k in red]
    assert any(k.M == 1 and k.N == rows for k in red)


def test_whole_tensor_reduction_split_where_it_pays():
    """On a GPU's block size a 1M-element sum runs 1024 (2-d) or 256 (1-d) programs, not one;
    half-precision sums keep one stage (partial sums would round to half), a 1-d value
    computed elementwise too (its kernel would write it out), and a tensor with fewer than
    four leading rows is not split."""
    def first_stage(fn, shape, dtype=np.float32, max_row_block=4096):
        g = trace(fn, [np.zeros(shape, dtype)])
        return sorted((k.M, k.N) for k in lower(g, max_row_block=max_row_block).kernels if k.kind == "reduce")
    assert first_stage(lambda m, a: a.sum(), (1024, 1024)) == [(1, 1024), (1024, 1024)]
    assert first_stage(lambda m, a: a.amax(), (1 << 20,)) == [(1, 256), (256, 4096)]
    assert first_stage(lambda m, a: a.exp().sum(), (1 << 20,)) == [(1, 1 << 20)]
    assert first_stage(lambda m, a: a.sum(), (1024, 1024), np.float16) == [(1, 1 << 20)]
    assert first_stage(lambda m, a: a.amax(), (1024, 1024), np.float16) == [(1, 1024), (1024, 1024)]
    assert first_stage(lambda m, a: a.sum(), (3, 5000)) == [(1, 15000)]
    assert first_stage(lambda m, a: a.sum(1).sum(), (1024, 1024)) == [(1, 1024), (1024, 1024)]


def test_compiled_matmul_with_fused_epilogue():
    x, w, b = make_inputs([(20, 18), (18, 17), (17,)])
    p = check_compiled(lambda m, a, w_, b_: ((a @ w_ + b_).relu() * 0.5).sum(1), [x, w, b])
    # the bias, relu and scale run in the matmul's epilogue (the scale stays inside the sum: moving it
    # out would change float results)
    assert "matmul_add_relu_mul_kernel" in p.fwd_fn.program.kernel_names
    k = next(k for k in p.fwd_fn.program.kernels if k.kind == "matmul")
    assert "tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)" in k.source and "acc = tl.dot(a, b, acc" in k.source
    assert any(k.kind == "matmul" for k in p.bwd_fn.program.kernels)


def test_compiled_training_step_matches_torch():
    x, w1, b1, w2, b2 = make_inputs([(6, 5), (5, 8), (8,), (8, 3), (3,)], seed=3)
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0, 2]]
    step = tg.compile(lambda *a: mlp_loss(tg, *a), backend="triton", fullgraph=True)
    params = [tg.tensor(a.copy(), requires_grad=True) for a in (w1, b1, w2, b2)]
    tparams = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (w1, b1, w2, b2)]
    opt, topt = tg.optim.SGD(params, lr=0.5, momentum=0.9), torch.optim.SGD(tparams, lr=0.5, momentum=0.9)
    X, T = tg.tensor(x), tg.tensor(onehot)
    for _ in range(3):
        opt.zero_grad()
        loss = step(X, *params, T)
        loss.backward()
        opt.step()
        topt.zero_grad()
        tloss = mlp_loss(torch, torch.from_numpy(x), *tparams, torch.from_numpy(onehot))
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    for a, b in zip(params, tparams):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-6)
    p = step.last_program
    assert p.bwd_fn.program.kernels and len(step.cache) == 1


def test_compiled_double_backward_runs_triton_code():
    x = make_inputs([(7,)], dtype=np.float64)[0]
    v = np.random.default_rng(1).standard_normal(7)
    f = tg.compile(lambda a: ((a.tanh() ** 2) * a.sigmoid()).sum(), backend="triton", fullgraph=True)
    t = tg.tensor(x.copy(), requires_grad=True)
    (gx,) = tg.autograd.grad(f(t), t, create_graph=True)
    (hv,) = tg.autograd.grad(gx, t, tg.tensor(v))
    tt = torch.from_numpy(x.copy()).requires_grad_(True)
    (tgx,) = torch.autograd.grad(((tt.tanh() ** 2) * tt.sigmoid()).sum(), tt, create_graph=True)
    (thv,) = torch.autograd.grad(tgx, tt, torch.from_numpy(v))
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(hv.numpy(), thv.numpy(), rtol=1e-10)
    grad_fn = f.last_program.double                       # the first derivative, itself compiled
    assert grad_fn.backend == "triton"
    q = grad_fn.last_program
    assert isinstance(q.fwd_fn.program, triton_gpu.TritonProgram)
    assert isinstance(q.bwd_fn.program, triton_gpu.TritonProgram)     # the second derivative


# -- the generated source -------------------------------------------------------------------------------

def test_generated_kernels_read_like_the_triton_tutorials():
    x, w1, b1, w2, b2 = make_inputs([(6, 5), (5, 8), (8,), (8, 3), (3,)], seed=3)
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0, 2]]
    g = trace(mlp_loss, [x, w1, b1, w2, b2, onehot])
    bwd = derive(g, list(g.outputs), g.inputs[1:5])
    for graph in (g, bwd):
        prog = lower(graph)
        assert {k.kind for k in prog.kernels} >= {"matmul", "reduce"}
        for k in prog.kernels:
            src = k.source
            ops = [graph[m]["op"] for m in k.members if graph[m]["op"] != "proj"]
            assert src.startswith(f"@triton.jit\ndef {k.name}(") and k.name.endswith("_kernel")
            assert k.name.startswith("fused_" if len(ops) > 1 and k.kind != "matmul" else ops[0])
            assert all(op in k.name for op in dict.fromkeys(ops[:6]))      # named after its ops
            consts = ("BLOCK_M", "BLOCK_N", "BLOCK_K") if k.kind == "matmul" else ("BLOCK_SIZE",)
            assert all(f"{c}: tl.constexpr" in src for c in consts)
            assert "mask = " in src and "mask=mask" in src
            assert "    # IR nodes computed here:" in src
            for m in k.members:
                assert f"#   {m}: " in src
            if k.kind == "reduce":
                assert "tl.float32" in src and "tl.reduce(" in src     # fp32 accumulation


def test_half_precision_reductions_accumulate_in_fp32():
    x = make_inputs([(3, 100)], dtype=np.float16)[0]
    g, prog = check_forward(lambda m, a: (a.sum(1), a.softmax(1)), [x], tol=dict(rtol=2e-2, atol=2e-2))
    red = [k for k in prog.kernels if k.kind == "reduce"]
    assert red and all("acc = tl.full([BLOCK_SIZE], 0, tl.float32)" in k.source or
                       'tl.full([BLOCK_SIZE], float("-inf"), tl.float32)' in k.source for k in red)
    assert "tl.float16" in prog.source                     # stored as half


def test_block_sizes_are_tuned_once_per_shape(monkeypatch):
    import triton.testing
    x = make_inputs([(5, 300)])[0]
    g = trace(lambda m, a: (a * 2).exp(), [x])
    prog = lower(g)
    (k,) = prog.kernels
    assert triton_gpu._TUNED.get(k.key) in (None, triton_gpu.INTERPRET_CONFIGS["pointwise"])
    prog(x)
    assert triton_gpu._TUNED[k.key] == triton_gpu.INTERPRET_CONFIGS["pointwise"]     # fixed under the interpreter
    # on a GPU: each candidate is timed once, the fastest kept for this kernel (generated per shape)
    times = {1024: 3.0, 256: 1.0, 4096: 2.0}
    launched = []

    def bench(fn, warmup, rep):          # a fake timer: the launch says which config ran
        fn()
        return times[launched[-1]]
    monkeypatch.setattr(triton.testing, "do_bench", bench)
    monkeypatch.setattr(triton_gpu, "interpreting", lambda: False)
    key = ("gpu", k.name, False)
    cfg = triton_gpu._autotune(key, "pointwise", lambda c: launched.append(c["BLOCK_SIZE"]))
    assert cfg == {"BLOCK_SIZE": 256} and sorted(launched) == [256, 1024, 4096]
    assert triton_gpu._autotune(key, "pointwise", lambda c: launched.append(c["BLOCK_SIZE"])) is cfg
    assert len(launched) == 3                                            # cached: not timed again
    triton_gpu._TUNED.pop(key)
    other = lower(trace(lambda m, a: (a * 2).exp(), [x[:, :7].copy()]))
    assert other.kernels[0].key != k.key and "< 35" in other.source and "< 1500" in prog.source


def test_explain_shows_the_triton_source_of_each_kernel():
    import io
    x, w, b = make_inputs([(5, 7), (7, 3), (3,)])
    f = tg.compile(lambda a, w_, b_: (a @ w_ + b_).softmax(1).sum(), backend="triton")
    args = (tg.tensor(x), tg.tensor(w, requires_grad=True), tg.tensor(b, requires_grad=True))
    for call in (lambda: tg.explain(f, *args, file=io.StringIO()),
                 lambda: tg.explain(f._fn, *args, backend="triton", file=io.StringIO())):
        text = call()
        assert "==== generated forward source ====" in text and "==== generated backward source ====" in text
        assert "==== Triton launcher (forward) ====" in text and "==== Triton launcher (backward) ====" in text
        p = tg.compile(f._fn, backend="triton")
        p(*args)
        for run in (p.last_program.fwd_fn, p.last_program.bwd_fn):
            for k in run.program.kernels:
                assert k.source.strip() in text
        assert "matmul_add_kernel" in text and "@triton.jit" in text and "# IR nodes computed here" in text
    plain = tg.explain(f._fn, *args, file=io.StringIO())
    assert "@triton.jit" not in plain and "def " in plain


def test_float32_matmul_precision_high_selects_tf32_and_recompiles():
    """set_float32_matmul_precision("high") (torch's switch) makes float32 tl.dot round its
    inputs to tf32; "highest" (the default) keeps ieee; a compiled function recompiles when
    the setting changes; float64 stays ieee; an unknown name warns and changes nothing, as
    torch's does."""
    a, b = make_inputs([(16, 24), (24, 8)])
    f = tg.compile(lambda x, y: (x @ y).relu(), backend="triton")
    assert tg.get_float32_matmul_precision() == "highest"
    want = torch.relu(torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    try:
        out = f(tg.tensor(a), tg.tensor(b)).numpy()
        src = f.last_program.fwd_fn.source
        assert 'input_precision="ieee"' in src and "tf32" not in src
        np.testing.assert_allclose(out, want, **F32)
        tg.set_float32_matmul_precision("high")
        assert tg.get_float32_matmul_precision() == "high"
        out = f(tg.tensor(a), tg.tensor(b)).numpy()
        src = f.last_program.fwd_fn.source
        assert 'input_precision="tf32"' in src and "ieee" not in src
        # tf32 keeps 10 bits of each input's mantissa: relative error about 1e-3 per product
        np.testing.assert_allclose(out, want, rtol=1e-2, atol=1e-2)
        f64 = tg.compile(lambda x, y: x @ y, backend="triton")
        f64(tg.tensor(a.astype(np.float64)), tg.tensor(b.astype(np.float64)))
        assert 'input_precision="ieee"' in f64.last_program.fwd_fn.source
        with pytest.warns(UserWarning, match="stays 'high'"):
            tg.set_float32_matmul_precision("low")
        assert tg.get_float32_matmul_precision() == "high"
        tg.set_float32_matmul_precision("highest")
        f(tg.tensor(a), tg.tensor(b))
        assert 'input_precision="ieee"' in f.last_program.fwd_fn.source
    finally:
        tg.set_float32_matmul_precision("highest")


def test_explain_reports_the_bytes_each_kernel_moves_against_the_minimum():
    """Per program: each kernel's bytes, the sum, the minimum (inputs once, outputs once) and
    the ratio, in the summary and in a section; a softmax whose rows fit one block moves its
    minimum, an unfused chain split by a reduction moves more and says so."""
    import io
    import re
    x = make_inputs([(16, 8)])[0]
    f = tg.compile(lambda a: a.softmax(1), backend="triton")
    text = tg.explain(f, tg.tensor(x), file=io.StringIO())
    nbytes = 16 * 8 * 4
    # one kernel reads the input once and writes the output once
    assert f"forward Triton kernels: 1, moving {2 * nbytes:,} bytes against a minimum of {2 * nbytes:,} (1.00x)" in text
    section = text.split("==== Triton traffic (forward) ====")[1].split("====")[0]
    rows = dict(re.findall(r"^(\w+_kernel)\s+([\d,]+) bytes", section, re.M))
    p = tg.compile(f._fn, backend="triton")
    p(tg.tensor(x))
    assert sorted(rows) == sorted(p.last_program.fwd_fn.program.kernel_names)
    assert re.search(rf"^minimum .* {2 * nbytes:,} bytes$", section, re.M)
    # exp's result is read by two sums of different rows: at least two kernels, each
    # reading the (16, 8) input or the intermediate, so more than the minimum
    g = tg.compile(lambda a: a.exp().sum(0) + a.exp().sum(1).sum(), backend="triton")
    text = tg.explain(g, tg.tensor(x), file=io.StringIO())
    section = text.split("==== Triton traffic (forward) ====")[1].split("====")[0]
    moved = [int(b.replace(",", "")) for b in re.findall(r"_kernel\s+([\d,]+) bytes", section)]
    total = int(re.search(r"^moved\s+([\d,]+) bytes", section, re.M).group(1).replace(",", ""))
    least = int(re.search(r"^minimum .*?([\d,]+) bytes$", section, re.M).group(1).replace(",", ""))
    assert total == sum(moved) >= least == nbytes + 8 * 4
    ratio = float(re.search(r"^ratio\s+([\d.]+)x", section, re.M).group(1))
    assert ratio == pytest.approx(total / least, abs=0.005)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fused_chain_and_matmul_on_a_gpu(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x, w, b = make_inputs([(300, 70), (70, 130), (130,)])
    g = trace(lambda m, a, w_, b_: (a @ w_ + b_).tanh().softmax(1), [x, w, b])
    prog = lower(g)
    got = prog(*[torch.from_numpy(t).cuda() for t in (x, w, b)])[0]
    np.testing.assert_allclose(got.cpu().numpy(), run_numpy(g, [x, w, b])[0], rtol=1e-4, atol=1e-6)


# -- convolutions (implicit GEMM), pooling and einsum (decomposed) ------------------------------------
# Convolutions are ConvDot kernels: tl.dot over tiles gathered by index arithmetic (padding,
# windows, a transposed convolution's stride and flip are masks and offsets, never copies),
# bias and elementwise consumers as their epilogue. Pooling and einsum are Decompose rules:
# padding is a copy into a filled buffer, windows are as_strided views; the arithmetic is a
# reduction over each window, an elementwise chain, a scatter-add or a matmul.

DECOMPOSED = {"max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "einsum",
              "binary_cross_entropy", "ldexp", "sinc"}
CONVS = {"conv2d", "conv_transpose2d", "conv2d_weight"}
CONV_TOL = dict(rtol=1e-4, atol=1e-5)


def nnf(m):
    return torch.nn.functional if m is torch else NF


def test_pooling_and_einsum_are_decomposed_and_convolutions_lowered():
    assert {n for n in PRIMITIVES if triton_gpu.classify(n) == "decomposed"} == DECOMPOSED
    for n in DECOMPOSED:
        assert isinstance(PRIMITIVES[n].triton, Decompose)
    assert all(triton_gpu.classify(n) == "lowered" for n in CONVS)


def conv_copies(prog):
    """The launcher's copies in a program (glue that is not a view): what implicit GEMM avoids."""
    g = prog.graph
    return [u.root for u in prog.units if u.kind == "glue" and g[u.root]["op"] != "proj"
            and not triton_gpu._glue_of(g[u.root]).view]


CONV2D = [  # (input, weight, bias, keyword arguments)
    ((2, 3, 6, 5), (4, 3, 3, 3), True, {}),
    ((1, 2, 7, 6), (3, 2, 3, 2), False, dict(stride=2, padding=1)),
    ((1, 4, 7, 6), (6, 2, 3, 2), True, dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=2)),
    ((2, 4, 5, 5), (4, 1, 3, 3), False, dict(padding=1, groups=4)),
    ((1, 3, 9, 8), (2, 3, 2, 3), True, dict(stride=3, dilation=2)),
]


@pytest.mark.parametrize("xs, ws, bias, kw", CONV2D, ids=[f"conv2d{i}" for i in range(len(CONV2D))])
def test_compiled_conv2d_forward_and_backward(xs, ws, bias, kw):
    arrays = make_inputs([xs, ws] + ([(ws[0],)] if bias else []), seed=len(kw))
    fn = lambda m, x, w, *b: nnf(m).conv2d(x, w, b[0] if b else None, **kw)  # noqa: E731
    p = check_compiled(fn, arrays, tol=CONV_TOL)
    assert "conv2d" in ops_of(p.stages[0][1])
    assert {"conv_transpose2d", "conv2d_weight"} <= ops_of(p.bwd_ir)
    fwd, bwd = p.fwd_fn.program, p.bwd_fn.program
    # one implicit-GEMM kernel forward, one per gradient backward; nothing padded or unfolded;
    # the weight gradient's kernel sums the bias gradient from the tiles it loads
    assert [k.name for k in fwd.kernels] == ["conv2d_kernel"]
    assert sorted(k.name for k in bwd.kernels) == ["conv2d_weight_sum_kernel" if bias else "conv2d_weight_kernel",
                                                   "conv_transpose2d_kernel"]
    assert not conv_copies(fwd) and not conv_copies(bwd), (fwd.plan, bwd.plan)


@pytest.mark.parametrize("xs, ws, bias, kw", CONV2D[1:3], ids=["conv2d_f64_1", "conv2d_f64_2"])
def test_compiled_conv2d_float64_against_torch(xs, ws, bias, kw):
    arrays = make_inputs([xs, ws] + ([(ws[0],)] if bias else []), dtype=np.float64, seed=2)
    fn = lambda m, x, w, *b: nnf(m).conv2d(x, w, b[0] if b else None, **kw).relu()  # noqa: E731
    p = check_compiled(fn, arrays, tol=F64)
    assert [k.name for k in p.fwd_fn.program.kernels] == ["conv2d_relu_kernel"]


CONV_T = [
    ((1, 2, 3, 4), (2, 3, 3, 3), True, dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 3), (4, 1, 2, 2), False, dict(groups=2, dilation=2)),
    ((2, 2, 4, 3), (2, 2, 3, 2), True, dict(stride=(1, 2), padding=(2, 0))),
]


@pytest.mark.parametrize("xs, ws, bias, kw", CONV_T, ids=[f"conv_t{i}" for i in range(len(CONV_T))])
def test_compiled_conv_transpose2d_forward_and_backward(xs, ws, bias, kw):
    groups = kw.get("groups", 1)
    arrays = make_inputs([xs, ws] + ([(ws[1] * groups,)] if bias else []), seed=3)
    fn = lambda m, x, w, *b: nnf(m).conv_transpose2d(x, w, b[0] if b else None, **kw)  # noqa: E731
    p = check_compiled(fn, arrays, tol=CONV_TOL)
    assert "conv_transpose2d" in ops_of(p.stages[0][1])
    assert [k.name for k in p.fwd_fn.program.kernels] == ["conv_transpose2d_kernel"]
    assert not conv_copies(p.fwd_fn.program) and not conv_copies(p.bwd_fn.program)


def test_conv2d_lowered_graph_against_numpy_and_torch():
    x, w, b = make_inputs([(2, 4, 6, 6), (6, 2, 3, 3), (6,)], seed=5)
    fn = lambda m, a, w_, b_: nnf(m).conv2d(a, w_, b_, stride=2, padding=1, groups=2).tanh()  # noqa: E731
    g, prog = check_forward(fn, [x, w, b], tol=CONV_TOL)
    # the bias and tanh are the implicit GEMM's epilogue
    assert prog.kernel_names == ["conv2d_tanh_kernel"]
    check_backward(fn, [x, w, b], tol=CONV_TOL)


MAXPOOL = [  # (input, keyword arguments)
    ((2, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 6, 6), dict(kernel_size=2)),
    ((1, 2, 7, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((1, 1, 6, 7), dict(kernel_size=(2, 3), stride=(2, 1), dilation=(1, 2), padding=(1, 1))),
    ((1, 2, 5, 5), dict(kernel_size=3, stride=1, padding=1)),          # overlapping windows: atomic adds
]


@pytest.mark.parametrize("xs, kw", MAXPOOL, ids=[f"maxpool{i}" for i in range(len(MAXPOOL))])
def test_compiled_max_pool2d_values_indices_and_backward(xs, kw):
    x = make_inputs([xs], seed=4)
    fn = lambda m, a: nnf(m).max_pool2d(a, return_indices=True, **kw)  # noqa: E731
    p = check_compiled(fn, x)
    assert "max_pool2d_backward" in ops_of(p.bwd_ir)
    k, s = kw["kernel_size"], kw.get("stride", kw["kernel_size"])
    k, s, d = [(v, v) if isinstance(v, int) else v for v in (k, s, kw.get("dilation", 1))]
    overlap = any(s[i] < d[i] * (k[i] - 1) + 1 for i in range(2))
    bwd = p.bwd_fn.program
    # overlapping windows add their gradients atomically into zeros; others are an elementwise
    # gather: each input element compares its position with its window's index
    assert ("scatter_add_kernel" in bwd.kernel_names) == overlap, bwd.plan
    assert all(k.kind == "pointwise" for k in bwd.kernels) != overlap, bwd.plan


def test_max_pool2d_ties_infinities_and_nans_pick_torchs_indices():
    x = np.round(make_inputs([(2, 2, 6, 6)], seed=6)[0])           # many ties
    x[0, 0, :3, :3] = -np.inf                                     # an all -inf window next to the padding
    x[0, 1, 2, 2] = np.nan
    x[1, 0, 0, 0] = x[1, 0, 1, 1] = np.nan                         # two NaNs in one window
    x[1, 1, 4, :] = np.inf
    for kw in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, ceil_mode=True, stride=2)):
        fn = lambda m, a: nnf(m).max_pool2d(a, return_indices=True, **kw)  # noqa: E731
        check_compiled(fn, [x], wrt=[])


def test_max_pool2d_gradient_gather_keeps_torchs_ties_nans_and_infinities():
    """Windows that do not overlap: the gradient is an elementwise gather (each element compares
    its position with its window's saved index), and goes where torch's does: the first of
    tied maxima, the last NaN of a window, the first of an all -inf window (never the padding),
    float32 and float64, with the border rows a floor-mode pooling drops getting zeros."""
    base = np.round(make_inputs([(2, 2, 7, 7)], seed=13)[0])          # many ties
    base[0, 0, :2, :2] = -np.inf                                      # an all -inf window
    base[0, 1, 2, 3] = np.nan
    base[1, 0, 0, 0] = base[1, 0, 1, 1] = np.nan                      # two NaNs in one window
    base[1, 1, 4, :] = np.inf
    base[1, 1, 0:2, 2:4] = 3.0                                        # a window of four equal values
    pools = [dict(kernel_size=2), dict(kernel_size=3, stride=3, padding=1), dict(kernel_size=2, stride=3),
             dict(kernel_size=(2, 3), stride=(3, 3), padding=(1, 1), ceil_mode=True),
             dict(kernel_size=2, dilation=2, stride=4)]
    for dtype, tol in ((np.float32, F32), (np.float64, F64)):
        for kw in pools:
            fn = lambda m, a: nnf(m).max_pool2d(a, return_indices=True, **kw)  # noqa: E731
            p = check_compiled(fn, [base.astype(dtype)], tol=tol, wrt=[0])
            bwd = p.bwd_fn.program
            assert [k.kind for k in bwd.kernels] == ["pointwise"], bwd.plan
            # zeros are written only for the rows and columns no window reaches
            out = torch.nn.functional.max_pool2d(torch.from_numpy(base), **{**kw, "dilation": kw.get("dilation", 1)})
            pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
            st, pad = pair(kw.get("stride", kw["kernel_size"])), pair(kw.get("padding", 0))
            covered = all(out.shape[2 + i] * st[i] >= base.shape[2 + i] + pad[i] for i in range(2))
            assert bool(conv_copies(bwd)) != covered, (kw, bwd.plan)


CONV_POOL = [  # (input, weight, conv keyword arguments, pool keyword arguments, fused backward)
    ((1, 2, 6, 6), (3, 2, 3, 3), dict(padding=1), dict(kernel_size=2), True),
    ((2, 2, 7, 5), (3, 2, 3, 3), dict(padding=1), dict(kernel_size=2), False),       # a dropped border
    ((1, 1, 8, 8), (2, 1, 2, 2), {}, dict(kernel_size=3, stride=3, padding=1), True),
    ((1, 2, 9, 9), (2, 2, 3, 3), {}, dict(kernel_size=2, stride=3, ceil_mode=True), True),
    ((2, 4, 8, 8), (4, 2, 3, 3), dict(padding=1, groups=2), dict(kernel_size=(2, 1)), True),
    ((1, 2, 7, 7), (2, 2, 2, 2), dict(stride=2, padding=1), dict(kernel_size=2), True),
]


@pytest.mark.parametrize("xs, ws, ckw, pkw, fused", CONV_POOL, ids=[f"conv_pool{i}" for i in range(len(CONV_POOL))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_then_max_pool_fuse_forward_and_backward(xs, ws, ckw, pkw, fused, dtype):
    """conv2d (+ bias) then max_pool2d, against torch: where the pooling reads the convolution
    through its window offsets (no padding before it, kernel == stride) the pooling is the
    convolution kernel's epilogue; where its gradient needs no copy into zeros (the windows
    cover the convolution's output, maybe past it), the gradient GEMMs compute it where they
    load their tiles, the bias gradient summed by the weight gradient's kernel. With relu
    between, the relu's gradient joins the chain the GEMMs compute."""
    x, w, b = make_inputs([xs, ws, (ws[0],)], dtype=dtype, seed=3)
    tol = CONV_TOL if dtype == np.float32 else F64
    fn = lambda m, a, w_, b_: nnf(m).max_pool2d(nnf(m).conv2d(a, w_, b_, **ckw), **pkw)  # noqa: E731
    p = check_compiled(fn, [x, w, b], tol=tol)
    fwd, bwd = p.fwd_fn.program, p.bwd_fn.program
    views = pkw.get("padding", 0) == 0 and pkw.get("stride") in (None, pkw["kernel_size"])
    assert [k.kind for k in fwd.kernels] == ["matmul"] if views else len(fwd.kernels) == 2, fwd.plan
    if fused:
        assert [k.kind for k in bwd.kernels] == ["matmul", "matmul"], bwd.plan
        assert not conv_copies(bwd), bwd.plan
        assert "conv2d_weight_sum_kernel" in bwd.kernel_names
    # with relu between: its output is kept for the backward, so the pooling joins the
    # convolution's kernel (which stores the relu at each view's elements) where the views
    # cover the whole output
    relu = lambda m, a, w_, b_: nnf(m).max_pool2d(nnf(m).conv2d(a, w_, b_, **ckw).relu(), **pkw)  # noqa: E731
    p = check_compiled(relu, [x, w, b], tol=tol)
    fwd = p.fwd_fn.program
    k = pkw["kernel_size"]
    k = (k, k) if isinstance(k, int) else k
    hw = tuple(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **ckw).shape[2:])
    covered = views and all(hw[i] % k[i] == 0 for i in range(2))
    assert [k.kind for k in fwd.kernels] == (["matmul"] if covered else ["matmul", "pointwise"]), fwd.plan
    if fused:
        assert [k.kind for k in p.bwd_fn.program.kernels] == ["matmul", "matmul"], p.bwd_fn.program.plan


def test_conv_then_max_pool_ties_and_nans_follow_torch():
    """Integer-valued images and weights make exact ties among the convolution's outputs, which
    the fused kernel compares as torch does (first maximum; a NaN in the image makes its
    neighbours' windows NaN, the last NaN taking the gradient)."""
    rng = np.random.default_rng(21)
    x = rng.integers(-1, 2, (2, 2, 8, 8)).astype(np.float32)
    w = rng.integers(0, 2, (3, 2, 2, 2)).astype(np.float32)
    x[1, 0, 3, 3] = np.nan
    x[0, 1, 5, :] = -np.inf
    for dtype in (np.float32, np.float64):
        fn = lambda m, a, w_: nnf(m).max_pool2d(nnf(m).conv2d(a, w_, padding=1), 2, return_indices=True)  # noqa: E731
        p = check_compiled(fn, [x.astype(dtype), w.astype(dtype)], tol=F32 if dtype == np.float32 else F64)
        assert [k.kind for k in p.fwd_fn.program.kernels] == ["matmul"]
    # float16: the views are rounded as the stored output would be before they are compared
    x16 = np.nan_to_num(x, nan=2.0, neginf=-2.0).astype(np.float16)
    w16 = rng.integers(-1, 2, (3, 2, 3, 3)).astype(np.float16)
    b16 = np.array([0.5, -1, 0], np.float16)
    fn = lambda m, a, w_, b_: nnf(m).max_pool2d(  # noqa: E731
        nnf(m).conv2d(a, w_, b_, padding=1).relu(), 2, return_indices=True)
    p = check_compiled(fn, [x16, w16, b16], tol=dict(rtol=1e-3, atol=1e-3))
    assert [k.kind for k in p.fwd_fn.program.kernels] == ["matmul"]


def test_convolutions_compute_elementwise_operands_and_pool_transposed_convolutions():
    """An elementwise value only a convolution reads is computed where its tiles are loaded
    (no kernel of its own), relu then max pooling are the convolution's epilogue (inference:
    nothing of the relu is kept); a transposed convolution's max pooling is its epilogue, and the
    pooling's gradient is computed where the gradient convolutions load their tiles."""
    x, w1, w2 = make_inputs([(2, 2, 8, 8), (3, 2, 3, 3), (4, 3, 3, 3)], seed=17)
    fn = lambda m, a, w_, v_: nnf(m).conv2d(  # noqa: E731
        nnf(m).max_pool2d(nnf(m).conv2d(a.tanh() * 2, w_, padding=1).relu(), 2), v_, padding=1)
    p = check_compiled(fn, [x, w1, w2], wrt=[], tol=CONV_TOL)
    fwd = p.fwd_fn.program
    # tanh(x) * 2 computed as the first convolution loads x; relu and the pooling its epilogue
    assert [k.kind for k in fwd.kernels] == ["matmul", "matmul"], fwd.plan
    first = fwd.kernels[0]
    assert first.name.startswith("conv2d_relu_as_strided_maximum") and "_tanh(" in first.source, fwd.plan
    assert set(fwd.graph.inputs[:2]) <= set(first.reads) and fwd.graph.inputs[2] not in first.reads
    y, wt = make_inputs([(1, 3, 4, 5), (3, 2, 3, 3)], seed=18)
    fn = lambda m, a, w_: nnf(m).max_pool2d(  # noqa: E731
        nnf(m).conv_transpose2d(a, w_, stride=2, padding=1, output_padding=1), 2)
    p = check_compiled(fn, [y, wt], tol=CONV_TOL)
    assert [k.kind for k in p.fwd_fn.program.kernels] == ["matmul"], p.fwd_fn.program.plan
    assert [k.kind for k in p.bwd_fn.program.kernels] == ["matmul", "matmul"], p.bwd_fn.program.plan


AVGPOOL = [
    ((2, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ((1, 2, 6, 5), dict(kernel_size=2, divisor_override=3)),
    ((1, 1, 7, 6), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 0), ceil_mode=True)),
]


@pytest.mark.parametrize("xs, kw", AVGPOOL, ids=[f"avgpool{i}" for i in range(len(AVGPOOL))])
def test_compiled_avg_pool2d_forward_and_backward(xs, kw):
    x = make_inputs([xs], seed=2)
    p = check_compiled(lambda m, a: nnf(m).avg_pool2d(a, **kw), x)
    assert "avg_pool2d_backward" in ops_of(p.bwd_ir)
    # small windows: g / divisor, then an elementwise chain over a strided view per kernel offset
    assert [k.kind for k in p.bwd_fn.program.kernels] == ["pointwise", "pointwise"]


def test_pooling_lowered_graphs_and_double_backward():
    x = make_inputs([(1, 2, 6, 5)], seed=8)
    fn = lambda m, a: nnf(m).avg_pool2d(a.exp(), 3, 2, 1, ceil_mode=True) * 2  # noqa: E731
    check_forward(fn, x)
    check_backward(fn, x)
    fn = lambda m, a: nnf(m).max_pool2d(a, 2, 1).tanh()  # noqa: E731
    check_forward(fn, x)
    check_backward(fn, x)
    # d/dg of max_pool2d_backward is a gather, of avg_pool2d_backward avg_pool2d
    for pool in (lambda F_, a: F_.max_pool2d(a, 2, 1), lambda F_, a: F_.avg_pool2d(a, 2, 1, padding=1)):
        def twice(m, a, pool=pool):
            t = a.requires_grad_(True) if m is torch else a
            y = pool(nnf(m), t)
            (g,) = m.autograd.grad((y * y).sum(), t, create_graph=True)
            return g
        check_compiled(twice, x)


@pytest.mark.parametrize("chain", [0, 32], ids=["window_reduction", "elementwise_chain"])
def test_pooling_windows_as_a_reduction_or_an_elementwise_chain(monkeypatch, chain):
    from tracegrad.ops import nn_primitives
    monkeypatch.setattr(nn_primitives, "POOL_CHAIN", chain)
    x = np.round(make_inputs([(1, 2, 7, 6)], seed=11)[0] * 2)       # ties
    x[0, 1, 3, 3] = np.nan
    for fn in (lambda m, a: nnf(m).max_pool2d(a, 3, 2, 1, ceil_mode=True, return_indices=True),
               lambda m, a: nnf(m).avg_pool2d(a, (2, 3), (2, 1), (1, 1), ceil_mode=True, count_include_pad=False)):
        p = check_compiled(fn, [x])
        kinds = {k.kind for k in p.fwd_fn.program.kernels}
        assert ("reduce" in kinds) == (chain == 0), kinds
    big = make_inputs([(1, 1, 8, 7)], seed=12)          # a 6 x 6 window: 36 elements
    check_compiled(lambda m, a: nnf(m).max_pool2d(a, 6, 2, return_indices=True), big)
    check_compiled(lambda m, a: nnf(m).avg_pool2d(a, 6, 1, padding=2), big)


EINSUM = [  # (equation, operand shapes, differentiable)
    ("ij,jk->ik", [(3, 4), (4, 2)], True),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)], True),
    ("ij->ji", [(2, 3)], True),
    ("i,j->ij", [(3,), (2,)], True),
    ("ij->j", [(3, 4)], True),
    ("ij,ij->i", [(2, 3), (2, 3)], True),
    ("bij,jk->bki", [(2, 3, 4), (4, 5)], True),
    ("ij,jk,k->i", [(2, 3), (3, 4), (4,)], True),
    ("i,i->", [(5,), (5,)], True),
    ("ij,kj->ikj", [(1, 3), (2, 3)], True),               # a size-1 index broadcast
    ("ii->i", [(3, 3)], False),
    ("iij->j", [(3, 3, 2)], False),
]


@pytest.mark.parametrize("eq, shapes, diff", EINSUM, ids=[c[0] for c in EINSUM])
def test_compiled_einsum_forward_and_backward(eq, shapes, diff):
    arrays = make_inputs(shapes, seed=len(eq))
    # (* 2: a permutation alone is a view, no kernel)
    p = check_compiled(lambda m, *xs: m.einsum(eq, *xs) * 2, arrays, wrt=None if diff else [])
    ins, out = eq.split("->")
    if all(c in out for c in ins.replace(",", "")) and eq.count(",") <= 1:
        # no index summed: torch's einsum is a diagonal, permute and product, and so is tracegrad's
        # (no einsum primitive to decompose)
        assert "einsum" not in ops_of(p.stages[0][1])
        return
    assert "einsum" in ops_of(p.stages[0][1])
    ops = {p.fwd_fn.program.graph[n]["op"] for n in p.fwd_fn.program.graph.ops()}
    assert "einsum" not in ops and ("matmul" in ops) == ("," in eq)


def test_decomposed_programs_compute_nothing_with_torch():
    x, w, b, v = make_inputs([(1, 2, 6, 6), (4, 2, 3, 3), (4,), (4, 3)], seed=9)

    def fn(m, a, w_, b_, v_):
        y = nnf(m).max_pool2d(nnf(m).conv2d(a, w_, b_, padding=1).relu(), 2)
        return m.einsum("nchw,cd->nd", nnf(m).avg_pool2d(y, 2, 1, padding=1), v_)
    g = trace(fn, [x, w, b, v])
    bwd = derive(g, list(g.outputs), g.inputs[:4])
    seen = _torch_calls([(g, [x, w, b, v]), (bwd, None)])
    assert {"empty", "as_strided"} <= seen
    assert not seen & TORCH_MATH, sorted(seen & TORCH_MATH)
    check_forward(fn, [x, w, b, v], tol=CONV_TOL)


def test_integer_convolutions_are_refused_by_name():
    x, w = [a.round().astype(np.int64) for a in make_inputs([(1, 2, 4, 4), (3, 2, 2, 2)])]
    g = trace(lambda m, a, w_: NF.conv2d(a, w_), [x, w])
    with pytest.raises(NotImplementedError, match="conv2d: .*int64"):
        lower(g)


CUDA_SCRIPT = r"""
import json
import numpy as np
import tracegrad as tg
import tracegrad.nn.functional as F

rng = np.random.default_rng(0)
x, w, b, v = [rng.standard_normal(s).astype(np.float32) for s in [(2, 2, 6, 5), (4, 2, 3, 3), (4,), (4, 3)]]
out = {}
for dev in ("cpu", "cuda"):
    ts = [tg.tensor(a, device=dev, requires_grad=True) for a in (x, w, b, v)]
    y = F.conv2d(ts[0], ts[1], ts[2], padding=1, stride=(1, 2))
    y = F.max_pool2d(y, 2, 1) + F.avg_pool2d(y, 2, 1, padding=1, count_include_pad=False)[..., :5, :2]
    z = tg.einsum("nchw,cd->nd", y, ts[3])
    z.sum().backward()
    out[dev] = [z.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in ts]
err = max(float(np.abs(a - b_).max() / max(1.0, np.abs(a).max())) for a, b_ in zip(out["cpu"], out["cuda"]))
print(json.dumps({"err": err, "host_ops": sorted(tg.cuda.HOST_OPS), "stats": dict(tg.cuda.STATS)}))
"""


def test_eager_cuda_convolutions_pooling_and_einsum_run_triton_kernels():
    import json
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, PYTHONWARNINGS="ignore", TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                       cwd=root)
    assert r.returncode == 0, r.stderr[-4000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["host_ops"] == [], res
    assert res["err"] < 1e-4, res
    assert res["stats"].get("backward_triton", 0) >= 1, res


def test_logical_ops_on_float_and_integer_operands():
    """logical_and/or/xor compare each operand with zero before `&`/`|`/`!=`: NaN and any
    nonzero number are true, for float, integer and 0-dim operands alike."""
    x = np.array([0.0, -1.5, np.nan, 2.0, 0.0, 3.0], dtype=np.float32)
    z = np.array([1, 0, 2, 0, -3, 0], dtype=np.int64)
    fn = lambda m, a, b, c: (m.logical_and(a, b), m.logical_or(a, c), m.logical_xor(c, b),  # noqa: E731
                             m.logical_or(b, a) * 1.0, m.logical_and(a, c))
    for y in (0.5, 0.0):
        check_forward(fn, [x, np.array(y, dtype=np.float32), z])


def test_row_gather_and_scatter_mark_an_index_outside_the_row():
    """The target-logit gather (a row kernel's stage) and the one-value-per-row scatter (an
    elementwise comparison) take an index in [0, n); one outside the row, negative included
    (torch and the numpy backend raise, a kernel cannot), gives NaN in that row rather than a
    plausible number."""
    x = make_inputs([(4, 6)])[0]
    fn = lambda m, a, i: (a.log_softmax(1).gather(1, i), a.scatter_add(1, i, a[:, :1] * 2).exp())  # noqa: E731
    g = trace(fn, [x, np.zeros((4, 1), np.int64)])
    prog = lower(g)
    assert {k.kind for k in prog.kernels} == {"reduce", "pointwise"}, prog.plan
    idx = np.array([[0], [5], [3], [1]], dtype=np.int64)
    got = [np.asarray(t) for t in prog(*bind(g, [x, idx]))]
    want = run_numpy(g, bind(g, [x, idx]))
    assert_same(got, want, F32)
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 6"):
        run_numpy(g, bind(g, [x, np.array([[0], [-1], [3], [1]], dtype=np.int64)]))
    bad = np.array([[1], [6], [2], [-1]], dtype=np.int64)
    out = [np.asarray(t) for t in prog(*bind(g, [x, bad]))]
    for o in out:
        assert np.isnan(o[[1, 3]]).all() and not np.isnan(o[[0, 2]]).any()


def test_generated_kernels_call_no_jit_function_of_triton_language():
    # triton.language's standard functions (tl.zeros, tl.sum, tl.cdiv, ...) are @triton.jit
    # functions made when triton is imported: a triton imported before TRITON_INTERPRET was set
    # cannot call them from an interpreted kernel ("Cannot call @triton.jit'd outside of the
    # scope of a kernel"), so the code generators emit builtins only (tl.full, tl.reduce, ...)
    import re
    import triton.language.standard as standard
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    # (made as InterpretedFunction when triton was imported with TRITON_INTERPRET set)
    jitted = {n for n in dir(standard) if isinstance(getattr(standard, n), (JITFunction, InterpretedFunction))}
    assert {"zeros", "sum", "cdiv"} <= jitted
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tracegrad")
    found = []
    for sub in ("codegen", "ops"):
        for name in sorted(os.listdir(os.path.join(root, sub))):
            if name.endswith(".py"):
                with open(os.path.join(root, sub, name)) as f:
                    used = set(re.findall(r"\btl\.([a-z_0-9]+)\(", f.read()))
                found += [f"{sub}/{name}: tl.{n}" for n in sorted(used & jitted)]
    assert not found, found

"""Op tests generated from tests/op_db.py, with torch as the oracle.

For every sample of every op: forward values, dtype and shape in each dtype (where torch
refuses a dtype, tracegrad must raise the same exception type); the grad_fn class of each
output; first derivatives in float32 and float64; second derivatives (through the
create_graph=True gradients, also with respect to the grad_output); float64 Jacobians
against tracegrad's own central differences (gradcheck's tolerances); type promotion of the
binary ops; and that every primitive of the op table is exercised by some sample.
"""
import importlib
import pkgutil

import numpy as np
import pytest
import torch

import tracegrad
from tracegrad.ops.primitives import PRIMITIVES

from conftest import assert_close
from op_db import OPS, NOT_OPS, GRAD_FN_EXCEPTIONS, ALL, FLOAT, make_array, samples, sample_id

TOL = {"float32": (1e-5, 1e-5), "float64": (1e-7, 1e-7)}
FD_EPS, FD_ATOL, FD_RTOL = 1e-6, 1e-5, 1e-3

ALL_SAMPLES = list(samples())


def _params(dtypes, variants=False, where=lambda op, s: True, supported_only=True):
    out = []
    for op, i, s in ALL_SAMPLES:
        if not where(op, s):
            continue
        for dt in dtypes:
            if supported_only and dt not in op.dtypes or s.dtypes is not None and dt not in s.dtypes:
                continue
            for v in (("fn", "method") if variants and op.method else ("fn",)):
                out.append(pytest.param(op, s, i, dt, v, id=f"{sample_id(op, i, s)}-{dt}-{v}"))
    return out


# -- helpers ------------------------------------------------------------------------------------

def _arrays(op, i, s, dtype):
    return [make_array(shape, dtype, s.domain_of(k, op), f"{op.name}/{i}/{k}") for k, shape in enumerate(s.shapes)]


def _inputs(arrays, requires_grad):
    tt = [torch.from_numpy(a.copy()).requires_grad_(requires_grad) for a in arrays]
    tg = [tracegrad.tensor(a.copy(), requires_grad=requires_grad) for a in arrays]
    return tt, tg


def _dense(t):
    """torch returns ZeroTensors for some second derivatives; compare them as zeros."""
    return torch.zeros(t.shape, dtype=t.dtype) if t._is_zerotensor() else t


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


def _call(op, m, xs, s, variant="fn"):
    fn = op.fn if variant == "fn" else op.method
    return fn(m, *xs, **s.kwargs)


def _tol(dtype):
    return TOL.get(str(dtype).replace("torch.", ""), (0, 0))


def _compare_outputs(out_g, out_t):
    assert isinstance(out_g, tracegrad.Tensor) == isinstance(out_t, torch.Tensor), (type(out_g), type(out_t))
    fg, ft = _flat(out_g), _flat(out_t)
    assert len(fg) == len(ft), (len(fg), len(ft))
    for k, (a, b) in enumerate(zip(fg, ft)):
        assert isinstance(a, tracegrad.Tensor), (k, type(a))
        assert_close(a, b, *_tol(b.dtype))


def _grad_outputs(outs, dtype, key):
    return [make_array(tuple(o.shape), dtype, None, f"{key}/go{k}") for k, o in enumerate(outs)]


def _diff(outs):
    return [o for o in outs if o.requires_grad]


def _run_grads(op, s, i, dtype, create_graph):
    """Both libraries' outputs, grad_outputs and first derivatives for one sample."""
    arrays = _arrays(op, i, s, dtype)
    xt, xg = _inputs(arrays, True)
    ot = _flat(_call(op, torch, xt, s))
    og = _flat(_call(op, tracegrad, xg, s))
    assert [o.requires_grad for o in og] == [o.requires_grad for o in ot]
    ot, og = _diff(ot), _diff(og)
    if not ot:
        return None
    gos = _grad_outputs(ot, dtype, f"{op.name}/{i}")
    gt, gg = _inputs(gos, create_graph)
    rt = torch.autograd.grad(ot, xt, gt, allow_unused=True, create_graph=create_graph)
    rg = tracegrad.autograd.grad(og, xg, gg, allow_unused=True, create_graph=create_graph)
    return xt, xg, gt, gg, rt, rg


# -- forward ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,s,i,dtype,variant", _params(dtypes=ALL, variants=True, supported_only=False))
def test_forward(op, s, i, dtype, variant):
    arrays = _arrays(op, i, s, dtype)
    xt, xg = _inputs(arrays, False)
    try:
        out_t = _call(op, torch, xt, s, variant)
    except Exception as e:  # noqa: BLE001  (torch refuses this dtype: tracegrad must too)
        with pytest.raises(type(e)):
            _call(op, tracegrad, xg, s, variant)
        return
    out_g = _call(op, tracegrad, xg, s, variant)
    _compare_outputs(out_g, out_t)
    for a, x in zip(arrays, xg):
        np.testing.assert_array_equal(x._data, a, err_msg="the op changed its input")


@pytest.mark.parametrize("op,s,i,dtype,variant", _params(dtypes=("float64",)))
def test_grad_fn(op, s, i, dtype, variant):
    xt, xg = _inputs(_arrays(op, i, s, dtype), True)
    ot = _flat(_call(op, torch, xt, s))
    og = _flat(_call(op, tracegrad, xg, s))
    expected = [type(o.grad_fn).__name__ for o in ot]
    if op.name in GRAD_FN_EXCEPTIONS:
        expected = [GRAD_FN_EXCEPTIONS[op.name](n) if n != "NoneType" else n for n in expected]
    assert [type(o.grad_fn).__name__ for o in og] == expected
    assert [o.requires_grad for o in og] == [o.requires_grad for o in ot]
    if expected == [type(o.grad_fn).__name__ for o in ot]:          # name() as torch's (torch::autograd::CopySlices)
        assert [o.grad_fn.name() for o in og if o.grad_fn is not None] == \
            [o.grad_fn.name() for o in ot if o.grad_fn is not None]


# -- derivatives ---------------------------------------------------------------------------------

def _differentiable(op, s):
    return op.grad and s.grad


@pytest.mark.parametrize("op,s,i,dtype,variant", _params(dtypes=FLOAT, where=_differentiable))
def test_grad(op, s, i, dtype, variant):
    r = _run_grads(op, s, i, dtype, create_graph=False)
    if r is None:
        return
    _, xg, _, _, rt, rg = r
    for k, (a, b) in enumerate(zip(rg, rt)):
        assert (a is None) == (b is None), (k, a, b)
        if b is not None:
            assert_close(a, b, *_tol(dtype))
            assert not a.requires_grad


@pytest.mark.parametrize("op,s,i,dtype,variant",
                         _params(dtypes=("float64",), where=lambda op, s: _differentiable(op, s) and op.gradgrad and
                                 s.gradgrad))
def test_gradgrad(op, s, i, dtype, variant):
    r = _run_grads(op, s, i, dtype, create_graph=True)
    if r is None:
        return
    xt, xg, gt, gg, rt, rg = r
    st = [(g * g).sum() for g in rt if g is not None]
    sg = [(g * g).sum() for g in rg if g is not None]
    assert len(st) == len(sg)
    st = [v for v in st if v.requires_grad]
    if not st:
        # torch's first derivative is constant (floor, sign, ...): tracegrad's must be too
        for v in sg:
            if v.requires_grad:
                for d in tracegrad.autograd.grad(v, xg + gg, allow_unused=True, materialize_grads=True):
                    assert not np.any(d._data), d
        return
    sg = [v for v in sg if v.requires_grad]
    assert len(st) == len(sg)
    total_t = sum(st)
    total_g = sg[0]
    for v in sg[1:]:
        total_g = total_g + v
    r2t = torch.autograd.grad(total_t, xt + gt, allow_unused=True, materialize_grads=True)
    r2g = tracegrad.autograd.grad(total_g, xg + gg, allow_unused=True, materialize_grads=True)
    for a, b in zip(r2g, r2t):
        assert_close(a, _dense(b), rtol=1e-6, atol=1e-7)


def _numeric_jacobians(op, s, arrays, diff_idx):
    """d(outputs)/d(input k) by central differences: one (output elements, input elements)
    matrix per input, the differentiable outputs flattened and joined."""
    def f(arrs):
        with tracegrad.no_grad():
            outs = _flat(_call(op, tracegrad, [tracegrad.tensor(a) for a in arrs], s))
        return np.concatenate([np.asarray(outs[k]._data, np.float64).reshape(-1) for k in diff_idx])

    jacobians = []
    for k, a in enumerate(arrays):
        columns = []
        for j in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[k][j] += FD_EPS
            minus[k][j] -= FD_EPS
            columns.append((f(plus) - f(minus)) / (2 * FD_EPS))
        jacobians.append(np.stack(columns, axis=1) if columns else np.zeros((len(f(arrays)), 0)))
    return jacobians


def _analytic_jacobians(outs, xs):
    """The same matrices from tracegrad's backward, one row (one-hot grad_output) at a time."""
    sizes = [o.numel() for o in outs]
    rows = [[] for _ in xs]
    for k, o in enumerate(outs):
        for j in range(sizes[k]):
            # (contiguous: zeros_like keeps a transposed output's layout, as torch's, and its view(-1) raises)
            seeds = [tracegrad.zeros_like(p, memory_format=tracegrad.contiguous_format) for p in outs]
            seeds[k].view(-1)[j] = 1.0
            grads = tracegrad.autograd.grad(outs, xs, seeds, retain_graph=True, allow_unused=True,
                                            materialize_grads=True)
            for r, g in zip(rows, grads):
                r.append(np.asarray(g._data, np.float64).reshape(-1))
    return [np.stack(r) if r else np.zeros((0, x.numel())) for r, x in zip(rows, xs)]


@pytest.mark.parametrize("op,s,i,dtype,variant",
                         _params(dtypes=("float64",), where=lambda op, s: _differentiable(op, s) and op.fd and s.fd))
def test_finite_differences(op, s, i, dtype, variant):
    """tracegrad's Jacobians against its own central differences, with gradcheck's tolerances."""
    arrays = _arrays(op, i, s, dtype)
    xg = [tracegrad.tensor(a.copy(), requires_grad=True) for a in arrays]
    outs = _flat(_call(op, tracegrad, xg, s))
    diff_idx = [k for k, o in enumerate(outs) if o.requires_grad]
    if not diff_idx:
        assert not any(o.dtype.is_floating_point for o in outs), "a float output without a grad_fn"
        return
    analytic = _analytic_jacobians([outs[k] for k in diff_idx], xg)
    numeric = _numeric_jacobians(op, s, arrays, diff_idx)
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        np.testing.assert_allclose(a, n, rtol=FD_RTOL, atol=FD_ATOL, err_msg=f"Jacobian for input {k}")


# -- type promotion ------------------------------------------------------------------------------

PROMOTE = {
    "add": lambda m, a, b: m.add(a, b),
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: m.mul(a, b),
    "div": lambda m, a, b: m.div(a, b),
    "rdiv": lambda m, a, b: b / a,
    "pow": lambda m, a, b: m.pow(a, b),
    "rpow": lambda m, a, b: b ** a,
    "remainder": lambda m, a, b: m.remainder(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b),
    "floor_divide": lambda m, a, b: m.floor_divide(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b if isinstance(b, m.Tensor) else m.tensor(b)),
    "eq": lambda m, a, b: m.eq(a, b),
    "lt": lambda m, a, b: a < b,
    "logical_and": lambda m, a, b: m.logical_and(a, b if isinstance(b, m.Tensor) else m.tensor(b)),
    "bitwise_or": lambda m, a, b: a | b,
    "where": lambda m, a, b: m.where(m.tensor([True, False, True]), a, b),
    "clamp": lambda m, a, b: m.clamp(a, min=b),
    "cat": lambda m, a, b: m.cat([a.reshape(-1), b.reshape(-1)]) if isinstance(b, m.Tensor) else a,
}
_VALUES = {"float32": [1.5, -2.0, 3.0], "float64": [0.5, 4.0, -1.5], "int64": [3, -2, 5], "int32": [2, 7, -3],
           "bool": [True, True, True]}
OPERANDS = [f"{d}[{s}]" for d in _VALUES for s in ("3", "")]
SCALARS = [2, 2.5, True, -3]


def _operand(m, spec):
    if not isinstance(spec, str):
        return spec
    d, shape = spec[:-1].split("[")
    v = _VALUES[d]
    return m.tensor(v if shape else v[1], dtype=getattr(m, d))


@pytest.mark.parametrize("left", OPERANDS)
@pytest.mark.parametrize("name", list(PROMOTE))
def test_type_promotion(name, left):
    fn = PROMOTE[name]
    bad = []
    for right in OPERANDS + SCALARS:
        try:
            rt = fn(torch, _operand(torch, left), _operand(torch, right))
        except Exception as e:  # noqa: BLE001  (compared below)
            try:
                fn(tracegrad, _operand(tracegrad, left), _operand(tracegrad, right))
            except type(e):
                continue
            except Exception as e2:  # noqa: BLE001
                bad.append(f"{left} {name} {right!r}: torch raised {type(e).__name__}, tracegrad {type(e2).__name__}")
                continue
            bad.append(f"{left} {name} {right!r}: torch raised {type(e).__name__}: {e}; tracegrad did not")
            continue
        try:
            rg = fn(tracegrad, _operand(tracegrad, left), _operand(tracegrad, right))
            assert_close(rg, rt, rtol=1e-6, atol=1e-6)
        except Exception as e:  # noqa: BLE001
            bad.append(f"{left} {name} {right!r}: {type(e).__name__}: {e}"[:300])
    assert not bad, "\n".join(bad)


# -- every primitive has a sample -----------------------------------------------------------------

def _import_every_module():
    """Every primitive registers itself on import: load them all, whatever ran before."""
    for info in pkgutil.walk_packages(tracegrad.__path__, "tracegrad."):
        try:
            importlib.import_module(info.name)
        except ImportError:      # optional backends (triton) missing here
            pass


def test_every_primitive_is_exercised():
    _import_every_module()
    used = set()
    saved = {}

    def recording(prim):
        impl = prim.impl

        def run(*args, **kwargs):
            used.add(prim.name)
            return impl(*args, **kwargs)
        return run

    for name, prim in PRIMITIVES.items():
        saved[name] = prim.impl
        prim.impl = recording(prim)
    try:
        for op, i, s in ALL_SAMPLES:
            for dtype in op.dtypes:
                xg = [tracegrad.tensor(a, requires_grad=dtype in FLOAT) for a in _arrays(op, i, s, dtype)]
                try:
                    outs = [o for o in _flat(_call(op, tracegrad, xg, s)) if o.requires_grad]
                except Exception:  # noqa: BLE001  (dtypes torch refuses too; test_forward checks those)
                    continue
                if outs and op.grad and s.grad:
                    gs = tracegrad.autograd.grad(outs, xg, [tracegrad.ones_like(o) for o in outs], allow_unused=True,
                                                 create_graph=True)
                    gs = [g for g in gs if g is not None and g.requires_grad]
                    if gs and op.gradgrad and s.gradgrad:     # (torch has no second derivative there)
                        tracegrad.autograd.grad([g.sum() for g in gs], xg, allow_unused=True)
    finally:
        for name, impl in saved.items():
            PRIMITIVES[name].impl = impl
    assert set(NOT_OPS) <= set(PRIMITIVES), set(NOT_OPS) - set(PRIMITIVES)
    missing = set(PRIMITIVES) - used - set(NOT_OPS)
    assert not missing, f"primitives without an op_db sample: {sorted(missing)}"


def test_op_db_names_are_unique():
    names = [op.name for op in OPS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("src", [(), (1,), (3,), (1, 3), (3, 1), (2, 1, 4), (0,), (1, 0), "strided"])
def test_expand_kernel_is_a_view_with_torchs_strides(src):
    """expand's kernel builds its view directly: the values, shape, dtype and errors of
    np.broadcast_to, torch's strides (a size-1 dimension it does not broadcast keeps the
    array's own), read-only only where an element repeats (a stride-0 dimension of more than
    one element: np.broadcast_to's is read-only always, so an in-place write to an expand(1)
    of a (1,) tensor, which torch allows, failed in a compiled program's write-back)."""
    rng = np.random.default_rng(0)
    x = np.arange(12.).reshape(3, 4)[:, ::2] if src == "strided" else np.asarray(rng.standard_normal(src), np.float32)
    kernel = PRIMITIVES["expand"].impl
    for shape in [(), (1,), (3,), (4, 3), (3, 3), (2, 3, 3), (2, 3, 2), (5, 2, 3, 4), (0,), (2, 0), (2, 1, 3), (-1,)]:
        try:
            want = np.broadcast_to(x, shape)
        except ValueError:
            with pytest.raises(ValueError):
                kernel(x, shape=shape)
            continue
        got = kernel(x, shape=shape)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert got.size == 0 or np.shares_memory(got, x)
        if got.size:
            torch_strides = torch.from_numpy(x).expand(shape).stride()
            assert got.strides == tuple(st * x.itemsize for st in torch_strides), (shape, got.strides)
        repeats = any(st == 0 and n > 1 for st, n in zip(got.strides, got.shape))
        assert got.flags.writeable == (not repeats), shape

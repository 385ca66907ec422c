"""Public math ops with torch's signatures: inverse and hyperbolic functions, cumsum/cumprod,
sort/argsort/topk/median/quantile/unique, diag, meshgrid, repeat_interleave, index_add, and
the linear algebra behind tracegrad.linalg. Primitives in math_primitives.py; the rest are
decompositions into existing ops (sort values are a gather by the argsort permutation, so
their gradient is the gather's)."""
import math
import warnings

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..tracing import apply, rename_grad_fn, Proxy, keep_saved
from . import shapes as S
from . import math_primitives  # noqa: F401  (registers the primitives)
from . import gamma_primitives  # noqa: F401  (registers the primitives)
from .math_primitives import LinAlgError  # noqa: F401
from .primitives import PRIMITIVES as P
from . import functional as O
from ..creation import tensor, from_numpy, zeros, arange

__all__ = ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan",
           "arcsinh", "arccosh", "arctanh", "atan2", "arctan2", "signbit", "copysign", "hypot", "cumsum", "cumprod",
           "sort", "argsort", "topk",
           "msort", "median", "quantile", "nanquantile", "unique", "unique_consecutive", "diag", "diagonal_embed",
           "meshgrid",
           "repeat_interleave", "index_add", "linalg_inv", "linalg_det", "linalg_slogdet", "linalg_solve_matrix",
           "det_cofactor", "linalg_solve", "frexp", "linalg_lu_factor", "lu_permutation_matrix", "lu_unpack", "linalg_solve_triangular", "linalg_solve_triangular_matrix", "kthvalue", "return_types_slogdet", "lgamma", "digamma", "polygamma", "erfinv",
           "mvlgamma", "mode"]


def _unary(name, public=None):
    """The public function of unary primitive `name` (named `public`: special_i0e is
    torch.special.i0e)."""
    prim = P[name]
    public = public or name

    def op(input):
        O._check_tensor(input, public)
        return apply(prim, (input,), {})
    op.__name__ = public
    op.__doc__ = f"Elementwise {public}, as torch.{public.replace('special_', 'special.')}."
    return op


asin, acos, atan, sinh, cosh, asinh, acosh, atanh = (_unary(n) for n in ("asin", "acos", "atan", "sinh", "cosh",
                                                                          "asinh", "acosh", "atanh"))
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


lgamma, digamma, erfinv = (_unary(n) for n in ("lgamma", "digamma", "erfinv"))


def _int_arg(v, op, name, pos):
    """An int argument as torch's parser takes it: an int or a 0-dim integer tensor; a bool or a
    float is a TypeError."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, Tensor)) or \
            isinstance(v, Tensor) and (v.ndim or v.dtype.is_floating_point or v.dtype is D.bool_):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be int, not {type(v).__name__}")
    return int(v)


def polygamma(n, input):
    """The n-th derivative of digamma, as torch.polygamma(n, input)."""
    n = _int_arg(n, "polygamma", "n", 1)
    if not isinstance(input, Tensor):
        raise TypeError(f"polygamma(): argument 'input' (position 2) must be Tensor, not {type(input).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return apply(P["polygamma"], (input,), {"n": n})


def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension p, as torch.mvlgamma: the sum of
    lgamma(input - j / 2) over j < p plus p (p - 1) / 4 log(pi) (no check of the domain: torch
    has none, lgamma's poles give inf)."""
    O._check_tensor(input, "mvlgamma")
    p = _int_arg(p, "mvlgamma", "p", 2)
    if input.dtype is D.bool_:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    dt = input.dtype if input.dtype.is_floating_point else D.get_default_dtype()
    args = arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=dt, device=input.device)
    out = lgamma(args + O.unsqueeze(input, -1)).sum(-1) + p * (p - 1) * math.log(math.pi) * 0.25
    return rename_grad_fn(out, "MvlgammaBackward0")


def atan2(input, other):
    O._check_tensors("atan2", (input, other), ("input", "other"))     # (no overload takes a number)
    return apply(P["atan2"], (input, other), {})


arctan2 = atan2


def signbit(input):
    """Whether the sign bit is set (-0.0 and a negative NaN too; False for unsigned and bool), as torch.signbit."""
    O._check_tensor(input, "signbit")
    return apply(P["signbit"], (input,), {})


def copysign(input, other):
    """|input| with other's sign (its sign bit: -0.0 counts), in a float dtype, as torch.copysign."""
    O._check_tensor(input, "copysign")
    return apply(P["copysign"], (input, O._scalar(other) if isinstance(other, O._Scalar) else O._operand(other,
                                                                                                      "copysign")), {})


def hypot(input, other):
    """sqrt(input^2 + other^2) without overflow, as torch.hypot (two float tensors)."""
    for i, (name, v) in enumerate((("input", input), ("other", other))):
        if not isinstance(v, Tensor):
            raise TypeError(f"hypot(): argument '{name}' (position {i + 1}) must be Tensor, not {type(v).__name__}")
    return apply(P["hypot"], (input, other), {})


def _scan(name, input, dim, dtype):
    O._check_tensor(input, name)
    if dtype is not None:
        O._check_grad_dtype(input, dtype)
        if dtype is D.bool_:
            raise NotImplementedError(f'"{name}_out_cpu" not implemented for \'Bool\'')
        input = O.convert(input, dtype) if hasattr(O, "convert") else input.to(dtype)
    d = S.normalize_dim(dim, max(input.ndim, 1))
    # (bfloat16's running values are float32, as torch's: math_primitives._scan_kernel)
    low = {"low": "bfloat16"} if input.dtype is D.bfloat16 else {}
    if input.ndim == 0:
        out = apply(P[name], (input.reshape(1),), {"dim": 0, **low}).reshape(())
        return O._in_dtype(rename_grad_fn(out, name.capitalize() + "Backward0"), dtype)
    return O._in_dtype(apply(P[name], (input,), {"dim": d, **low}), dtype)


def cumsum(input, dim, *, dtype=None):
    return _scan("cumsum", input, dim, dtype)


def cumprod(input, dim, *, dtype=None):
    return _scan("cumprod", input, dim, dtype)


class return_types:
    sort = O._return_type("sort")
    topk = O._return_type("topk")
    median = O._return_type("median")
    kthvalue = O._return_type("kthvalue")
    mode = O._return_type("mode")
    nanmedian = O._return_type("nanmedian")


def _sorted(input, dim, descending, stable=True):
    d = S.normalize_dim(dim, max(input.ndim, 1))
    x = input.reshape(1) if input.ndim == 0 else input
    idx = apply(P["argsort"], (x,), {"dim": d, "descending": bool(descending), "stable": True})
    vals = O._gather(x, d, idx)
    if input.ndim == 0:
        vals, idx = vals.reshape(()), idx.reshape(())
    return vals, idx, d


def sort(input, dim=-1, descending=False, stable=False):
    """Values in order along dim (NaN counts as largest) and where they came from."""
    O._check_tensor(input, "sort")
    vals, idx, _ = _sorted(input, dim, descending)
    # (torch's sort allocates both results dense in the input's order: x.t().sort(0) is no C array)
    vals, idx = O.laid_out_dense_as(vals, input), O.laid_out_dense_as(idx, input)
    return return_types.sort(rename_grad_fn(vals, "SortBackward0"), idx)


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable).indices


def msort(input):
    return sort(input, 0).values


def _own(*ts):
    """torch's topk, kthvalue and median return tensors of their own: a value cut from the
    internal sorted tensor is no view of it to autograd (`_base` None). It keeps the version
    counter, which the indices that the sort's node saved share."""
    for t in ts:
        t._base = t._view = None
    return ts


def topk(input, k, dim=-1, largest=True, sorted=True):
    O._check_tensor(input, "topk")
    if input._dtype is D.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    d = S.normalize_dim(dim, max(input.ndim, 1))
    n = input.shape[d] if input.ndim else 1
    if k < 0 or k > n:
        raise RuntimeError("selected index k out of range")
    # the first k positions of the sort, C-contiguous as torch's topk returns them (a slice of the
    # sorted values along a dim other than the first was no C array: topk(2, 1)[0].view(-1) raised),
    # and the values gathered there: their node saves the indices returned, as torch's does
    x = input.reshape(1) if input.ndim == 0 else input
    order = apply(P["argsort"], (x,), {"dim": d, "descending": bool(largest), "stable": True})
    idx = O.narrow(order, d, 0, k)
    idx, = _own(O.contiguous(idx))
    vals = O.gather(x, d, idx)
    if input.ndim == 0:
        vals, idx = vals.reshape(()), idx.reshape(())
    return return_types.topk(rename_grad_fn(vals, "TopkBackward0"), idx)


def kthvalue(input, k, dim=-1, keepdim=False):
    O._check_tensor(input, "kthvalue")
    if input.dtype is D.bool_ and input.ndim:         # (torch's 0-dim path takes any dtype)
        raise NotImplementedError('"kthvalue_cpu" not implemented for \'Bool\'')
    d = S.normalize_dim(dim, max(input.ndim, 1))
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    x = input.reshape(1) if input.ndim == 0 else input
    i = apply(P["kthvalue_index"], (x,), {"k": int(k), "dim": d})
    return _picked(input, x, d, i, keepdim, "kthvalue", "KthvalueBackward0")


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest of those tied) and a position of it, as
    torch.mode (which position where the value repeats: torch's sort's; see mode_index)."""
    O._check_tensor(input, "mode")
    d = S.normalize_dim(dim, max(input.ndim, 1))
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    x = input.reshape(1) if input.ndim == 0 else input
    i = apply(P["mode_index"], (x,), {"dim": d})
    return _picked(input, x, d, i, keepdim, "mode", "ModeBackward0")


def _picked(input, x, d, i, keepdim, name, node):
    """kthvalue's and mode's result: the values of x (input, at least 1-d) at the positions i
    an index primitive picked along d (keepdim shaped), with the positions."""
    v = O._gather(x, d, i)
    if input.ndim == 0:
        v, i = v.reshape(()), i.reshape(())
    elif not keepdim:
        v, i = O.squeeze(v, d), O.squeeze(i, d)
    v, i = _own(v, i)
    return getattr(return_types, name)(rename_grad_fn(v, node, inputs=(input,)), i)     # (x is input, at least 1-d)


def median(input, dim=None, keepdim=False):
    """The lower median; NaN where the values hold a NaN (as torch.median)."""
    def pos(x, d, n):
        nans = O.sum(O.isnan(x), d, keepdim=True)
        return O.where(nans > 0, n - nans, (n - 1) // 2)     # (no CPU full beside a device tensor)
    return lower_median(input, dim, keepdim, "median", pos)


def lower_median(input, dim, keepdim, name, float_pos):
    """median and nanmedian: the value (and its index) at a position of the sorted values along
    dim, `float_pos(x, d, n)` for floating point (where the NaNs go), the lower middle else;
    over everything, its gradient shared among the equal elements. `name`: torch's op name."""
    O._check_tensor(input, name)
    if input._dtype is D.bool_:
        raise NotImplementedError(f"\"{'median_cpu' if dim is None else 'median_out'}\" not implemented for 'Bool'")
    node = name.capitalize() + "Backward"
    if dim is None:
        if input.numel() == 0:
            return tensor(float("nan"), dtype=input.dtype)
        m = lower_median(input.reshape(-1), 0, False, name, float_pos).values
        if not input.requires_grad:
            return m
        # torch's node saves self and result (evenly_distribute_backward): either written raises
        return keep_saved(rename_grad_fn(_evenly_distributed(input, m), node + "0"), input, result=True)
    d = S.normalize_dim(dim, max(input.ndim, 1))
    x = input.reshape(1) if input.ndim == 0 else input
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    vals, idx, _ = _sorted(x, d, False)
    if x.dtype.is_floating_point:
        pos = float_pos(x, d, n)
    else:
        pos = O.full(tuple(1 if i == d else s for i, s in enumerate(x.shape)), (n - 1) // 2, dtype=D.int64)
    v, i = O._gather(vals, d, pos), O._gather(idx, d, pos)
    if not keepdim or input.ndim == 0:
        v, i = O.squeeze(v, d), O.squeeze(i, d)
    if input.ndim == 0:
        v, i = v.reshape(()), i.reshape(())
    v, i = _own(v, i)
    return getattr(return_types, name)(rename_grad_fn(v, node + "1"), i)


def _evenly_distributed(input, m):
    """`m`, the value of some of `input`'s elements, as a function of `input` whose gradient is
    shared evenly among the elements equal to it (the NaNs where it is NaN), as torch's
    evenly_distribute_backward for median() over everything; the value keeps m's bits (its
    zero's sign included)."""
    m = m.detach()
    mask = O.where(O.isnan(m), O.isnan(input), input == m)
    inf = float("inf")
    # top: an extreme of the elements equal to m, every other element past it (max()/min() over
    # everything share their gradient among exactly those); it is m but for the sign of a
    # zero, and m - (top - top) is m's bits where m is finite
    up, down = (lambda: O.max(O.where(mask, input, -inf))), (lambda: O.min(O.where(mask, input, inf)))
    if isinstance(m, Proxy):
        top = O.where(m == -inf, down(), up())
        return O.where(O.isfinite(m), m - (top.detach() - top), top)
    # an eager call picks in Python: a branch a where leaves out adds a +0 to the gradient, which
    # turned torch's -0 into 0
    v = float(m)
    top = down() if v == -inf else up()
    return m - (top.detach() - top) if math.isfinite(v) else top


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):
    O._check_tensor(input, name)
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got "
                         f"{interpolation}")
    if input.dtype is not D.float32 and input.dtype is not D.float64:
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    scalar_q = not isinstance(q, Tensor)
    if not scalar_q and q.dtype is not input.dtype:
        # (tracegrad read a float64 q beside a float32 input)
        raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    qs = np.atleast_1d(np.asarray(q.detach().numpy() if isinstance(q, Tensor) else q, dtype=np.float64))
    if qs.ndim > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if np.any((qs < 0) | (qs > 1)):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else S.normalize_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[d]
    if n == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    vals, _, _ = _sorted(x, d, False)
    valid = n - O.sum(O.isnan(x), d, keepdim=True) if ignore_nan else None
    outs = []
    for qv in qs:
        if ignore_nan:
            rank = (valid - 1).to(x.dtype) * float(qv)
            rank = O.clamp(rank, min=0)
        else:
            rank = O.zeros_like(O.narrow(vals, d, 0, 1)) + float(qv) * (n - 1)     # (on x's device)
        if interpolation == "lower":
            rank = O.floor(rank)
        elif interpolation == "higher":
            rank = O.ceil(rank)
        elif interpolation == "nearest":
            rank = O.round(rank)
        lo = O.floor(rank).to(D.int64)
        hi = O.clamp(O.ceil(rank), max=n - 1).to(D.int64)
        a, b = O.gather(vals, d, lo), O.gather(vals, d, hi)
        if interpolation == "midpoint":
            w = O.where(lo == hi, rank * 0, rank * 0 + 0.5)
        else:
            w = rank - lo.to(x.dtype)
        out = a + (b - a) * w
        # NaN where the values hold one (where-ing in a constant keeps NaN out of the gradient)
        nan = O.full((), float("nan"), dtype=x.dtype)
        out = O.where(O.any(O.isnan(x), d, keepdim=True) if not ignore_nan else valid == 0, nan, out)
        if dim is None:
            out = out.reshape(()) if not keepdim else out.reshape((1,) * input.ndim)
        elif not keepdim:
            out = O.squeeze(out, d)
        outs.append(out)
    return outs[0] if scalar_q or (isinstance(q, Tensor) and q.ndim == 0) else O.stack(outs, 0)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted), and optionally where each input value went and how many
    there are; not differentiable, as in torch."""
    O._check_tensor(input, "unique")
    a = input.detach().numpy() if input._dtype is not D.bfloat16 else input.detach().float().numpy()
    res = np.unique(a, return_inverse=True, return_counts=True, axis=dim)
    vals, inv, counts = res
    out = from_numpy(np.ascontiguousarray(vals)).to(input.dtype)
    extra = []
    if return_inverse:
        shape = tuple(input.shape) if dim is None else (input.shape[dim],)
        extra.append(from_numpy(inv.reshape(shape).astype(np.int64)))
    if return_counts:
        extra.append(from_numpy(counts.astype(np.int64)))
    return (out, *extra) if extra else out


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The first of each run of equal values (of equal slices along dim), and optionally the
    run each input value is in and each run's length; not differentiable, as unique."""
    O._check_tensor(input, "unique_consecutive")
    a = input.detach().numpy() if input._dtype is not D.bfloat16 else input.detach().float().numpy()
    if dim is None:
        rows, shape, axis = a.reshape(-1, 1), tuple(input.shape), 0
        a = a.reshape(-1)
    else:
        if input.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        axis = S.normalize_dim(dim, input.ndim)
        if a.shape[axis] and not a.size:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
        rest = math.prod(a.shape[:axis] + a.shape[axis + 1:])
        rows, shape = np.moveaxis(a, axis, 0).reshape(a.shape[axis], rest), (a.shape[axis],)
    n = rows.shape[0]
    starts = np.ones(n, dtype=bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)           # (NaN starts a run of its own, as torch's)
    first = np.flatnonzero(starts)
    out = from_numpy(np.ascontiguousarray(np.take(a, first, axis=axis))).to(input.dtype)
    extra = []
    if return_inverse:
        extra.append(from_numpy((np.cumsum(starts) - 1).astype(np.int64).reshape(shape)))
    if return_counts:
        extra.append(from_numpy(np.diff(np.append(first, n)).astype(np.int64)))
    return (out, *extra) if extra else out


def diag(input, diagonal=0):
    """A 1-D input becomes the k-th diagonal of a square matrix; a 2-D input gives its k-th diagonal."""
    O._check_tensor(input, "diag")
    k = int(diagonal)
    if input.ndim == 1:
        n = input.shape[0] + abs(k)
        rows = np.arange(input.shape[0]) + max(-k, 0)
        cols = np.arange(input.shape[0]) + max(k, 0)
        flat = tensor((rows * n + cols).astype(np.int64))
        out = O.scatter(zeros(n * n, dtype=input.dtype), 0, flat, input)
        return rename_grad_fn(out.reshape(n, n), "DiagEmbedBackward0")
    if input.ndim == 2:
        r, c = input.shape
        start_r, start_c = max(-k, 0), max(k, 0)
        m = max(min(r - start_r, c - start_c), 0)
        flat = tensor(((np.arange(m) + start_r) * c + np.arange(m) + start_c).astype(np.int64))
        return rename_grad_fn(O.index_select(input.reshape(-1), 0, flat), "DiagonalBackward0")
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")


def diagonal_embed(input, offset=0):
    return diag(input, offset)


def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    ts = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = shape[i]
        out.append(t.reshape(view).expand(shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along dim) repeated `repeats` times in a row."""
    if repeats is None:                               # repeat_interleave(repeats): the indices repeated
        r = input.detach().numpy()
        return tensor(np.repeat(np.arange(r.shape[0]), r).astype(np.int64))
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else S.normalize_dim(dim, max(x.ndim, 1))
    n = x.shape[d]
    if isinstance(repeats, Tensor) and repeats.dtype is not D.int64 and repeats.dtype is not D.int32:
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for '{D.SCALAR_NAME[repeats.dtype]}'")
    r = repeats.detach().cpu().numpy() if isinstance(repeats, Tensor) else repeats
    r = np.broadcast_to(np.asarray(r, dtype=np.int64), (n,)) if np.ndim(r) == 0 or np.size(r) == 1 else np.asarray(r)
    if r.shape != (n,):
        raise RuntimeError("repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{r.shape[0]} and input.size({d}) = {n}")
    if np.any(r < 0):
        raise RuntimeError("repeats can not be negative")
    if not x.ndim:
        return x
    if not isinstance(repeats, Tensor):
        # torch's scalar overload: unsqueeze, expand, a contiguous clone and a flatten (its node is
        # the view's, ViewBackward0, not RepeatInterleaveBackward0, a name torch has not)
        k = int(r[0]) if n else int(np.asarray(repeats))
        y = O.unsqueeze(x, d + 1)
        return O.reshape(O.clone(O.expand(y, tuple(k if i == d + 1 else s for i, s in enumerate(y.shape)))),
                         tuple(x.shape[:d]) + (x.shape[d] * k,) + tuple(x.shape[d + 1:]))
    # torch's tensor overload: an index_select by the repeated positions (IndexSelectBackward0), the
    # index on input's device
    idx = tensor(np.repeat(np.arange(n), r).astype(np.int64), device=x.device if x.is_cuda else None)
    return O.index_select(x, d, idx)


def index_add(input, dim, index, source, *, alpha=1):
    """input with source's slices added at `index` along dim (repeated indices add up)."""
    if index.dtype is not D.int64 and index.dtype is not D.int32:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {D.SCALAR_NAME[index.dtype]}")
    if isinstance(source, Tensor) and source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({D.SCALAR_NAME[input.dtype]}) and source "
                           f"({D.SCALAR_NAME[source.dtype]}) must have the same scalar type")
    d = S.normalize_dim(dim, max(input.ndim, 1))
    if index.ndim > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector")
    if source.ndim and index.shape[0] != source.shape[d]:
        raise RuntimeError(f"index_add_(): Number of indices ({index.shape[0]}) should be equal to source.size(dim) "
                           f"({source.shape[d]})")
    n = input.shape[d] if input.ndim else 1
    data = index._data
    if input.ndim <= 1 and data is not None and data.__class__ is np.ndarray and data.size and \
            (data.min() < 0 or data.max() >= n):
        raise IndexError("index out of range in self")       # torch's kernel for a vector (or 0-dim) input
    if input.ndim > 1 and input.numel() == 0:
        return input * 1              # torch's kernel has no element to write and checks nothing
    shape = [1] * max(source.ndim, 1)
    shape[d] = index.shape[0]
    full = index.reshape(shape).expand(tuple(source.shape)) if source.ndim else index
    src = source * alpha if alpha != 1 else source
    if input.ndim == 0 and index.numel() == 1:
        if source.ndim:
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                               f"Got self.shape = [] source.shape = {list(source.shape)}")
        return input + src                    # (scatter_add has no dim to scatter along)
    out = rename_grad_fn(O.scatter_add(input, d, full, src), "IndexAddBackward0")
    # torch's node saves index and source (grad.index_select(dim, index).expand_as(source)) where
    # source requires grad; scatter_add's saved index is the expanded one, of another shape
    return keep_saved(out, None, (index, source)) if source.requires_grad else out


# -- linear algebra ------------------------------------------------------------------------------

def low_precision(A, kernel=None, op=None, message=None):
    """torch's refusal of a float16 or bfloat16 A where its LAPACK kernels take float and double
    alone: the kernel's NotImplementedError, the op's "Low precision dtypes not supported", or
    `message` (with {dtype}: the dtype's name) as a RuntimeError. (tracegrad computed bfloat16 in
    float32, and float16 raised numpy's TypeError.)"""
    dt = A.dtype
    if dt is not D.float16 and dt is not D.bfloat16:
        return
    name = D.SCALAR_NAME[dt]
    if kernel is not None:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{name}'")
    raise RuntimeError(message.format(dtype=name) if message is not None else
                       f"{op}: Low precision dtypes not supported. Got {name}")


def linalg_inv(A):
    math_primitives._check_square(A, "inv")
    low_precision(A, op="linalg.inv")
    return apply(P["linalg_inv"], (A,), {})


def det_cofactor(A):
    return apply(P["det_cofactor"], (A,), {})


def linalg_det(A):
    math_primitives._check_square(A, "det")
    low_precision(A, "lu_cpu")
    return apply(P["linalg_det"], (A,), {})


def linalg_slogdet(A):
    math_primitives._check_square(A, "slogdet")
    low_precision(A, op="linalg.slogdet")
    return apply(P["linalg_slogdet"], (A,), {})


_slogdet = O._pair_type("linalg_slogdet", "sign", "logabsdet")


def return_types_slogdet(sign, logabsdet):
    return _slogdet(sign, logabsdet)


def linalg_solve_matrix(A, B):
    return apply(P["linalg_solve"], (A, B), {})


def linalg_solve(A, B, *, left=True):
    """X with A X = B (B a batch of vectors where B.ndim == A.ndim - 1 and its shape fits)."""
    math_primitives._check_square(A, "solve")
    for t in (A, B):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"linalg.solve: Expected a floating point or complex tensor as input. Got "
                               f"{D.SCALAR_NAME[t.dtype]}")
    low_precision(A, "lu_cpu")
    if A.dtype is not B.dtype:            # (tracegrad promoted: a float64 solution of a float32 system)
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{D.SCALAR_NAME[A.dtype]} and B of type {D.SCALAR_NAME[B.dtype]} instead")
    if not left:
        return linalg_solve(A.mT, B.mT).mT
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector:
        return rename_grad_fn(O.squeeze(linalg_solve_matrix(A, O.unsqueeze(B, -1)), -1), "LinalgSolveExBackward0")
    if B.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    return linalg_solve_matrix(A, B)


def linalg_solve_triangular_matrix(A, B, upper, unitriangular=False):
    return apply(P["linalg_solve_triangular"], (A, B), {"upper": bool(upper), "unitriangular": bool(unitriangular)})


def linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (X A = B with left=False) for a triangular A: only its upper (or lower)
    triangle is read. B is taken in A's dtype, as torch's."""
    for t, name in ((A, "A"), (B, "B")):
        if t.ndim < 2:
            raise RuntimeError(f"linalg.solve_triangular: The input tensor {name} must have at least 2 dimensions.")
    math_primitives._check_square(A, "solve_triangular")
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"\"triangular_solve_cpu\" not implemented for '{D.SCALAR_NAME[A.dtype]}'")
    low_precision(A, "triangular_solve_cpu")
    rows = B.shape[-2] if left else B.shape[-1]
    if rows != A.shape[-1]:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    if B.dtype is not A.dtype:
        B = B.to(A.dtype)
    if not left:
        return rename_grad_fn(O.transpose(linalg_solve_triangular_matrix(O.transpose(A, -2, -1), O.transpose(B, -2, -1),
                                                                         not upper, unitriangular), -2, -1),
                              "LinalgSolveTriangularBackward0")
    return linalg_solve_triangular_matrix(A, B, upper, unitriangular)


# == decompositions (primitives in math_primitives.py) ==================================================

def linalg_cholesky(A, *, upper=False):
    math_primitives._check_square(A, "cholesky")
    low_precision(A, "cholesky_cpu")
    L = apply(P["linalg_cholesky"], (A,), {})
    return O.transpose(L, -2, -1) if upper else L


def linalg_eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of the symmetric matrix whose UPLO triangle A holds."""
    math_primitives._check_square(A, "eigh")
    low_precision(A, "linalg_eigh_cpu")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    # the gradient is torch's: the formula's full matrix, though only the UPLO triangle is read
    w, v = apply(P["linalg_eigh"], (A,), {"UPLO": UPLO})
    return w, v


def linalg_svd(A, full_matrices=True):
    if A.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.svd: Expected a floating point or complex tensor as input. Got "
                           f"{D.SCALAR_NAME[A.dtype]}")
    low_precision(A, "linalg_svd_cpu")
    if full_matrices and A.shape[-1] != A.shape[-2]:
        raise NotImplementedError("linalg.svd(full_matrices=True) of a non-square matrix: pass full_matrices=False "
                                  "(the reduced factors) or use linalg.svdvals")
    return apply(P["linalg_svd"], (A,), {})


def linalg_qr(A, mode="reduced"):
    if A.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    low_precision(A, "geqrf_cpu")
    if mode not in ("reduced", "r", "complete"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           f"or 'complete'")
    if mode != "reduced" and not (mode == "complete" and A.shape[-2] <= A.shape[-1]):
        raise NotImplementedError(f"linalg.qr(mode={mode!r}): only mode='reduced' is implemented")
    return apply(P["linalg_qr"], (A,), {})


def linalg_pinv(A, *, atol=None, rtol=None, hermitian=False):
    if A.ndim < 2:
        raise RuntimeError("linalg.pinv: The input tensor A must have at least 2 dimensions.")
    low_precision(A, message=f"linalg.pinv({{dtype}}{{{{{list(A.shape)}}}}}): expected a tensor with 2 or more "
                             f"dimensions of float, double, cfloat or cdouble types")
    if atol is not None:
        raise NotImplementedError("linalg.pinv(atol=...): only rtol is implemented")
    return apply(P["linalg_pinv"], (A,), {"rtol": None if rtol is None else float(rtol)})


_frexp = O._pair_type("frexp", "mantissa", "exponent")


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1) (0, inf
    and NaN keep their value with exponent 0); the exponent is int32 and not differentiable."""
    O._check_tensor(input, "frexp")
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return _frexp(*apply(P["frexp"], (input,), {}))


def linalg_lu_factor(A, check=None):
    """(LU, pivots) of A = P L U, partial pivoting (LAPACK's getrf): L's strict lower triangle and
    U packed, and the 1-based row each step swapped with (int32). With `check` (the caller's name,
    torch's error's) a zero on U's diagonal raises when the kernel runs, compiled too."""
    if A.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} "
                           f"instead")
    if not A.dtype.is_floating_point or A.dtype in (D.float16, D.bfloat16):
        raise NotImplementedError(f"\"lu_cpu\" not implemented for '{D.SCALAR_NAME[A.dtype]}'")
    return apply(P["linalg_lu_factor"], (A,), {} if check is None else {"check": check})


def lu_permutation_matrix(pivots, m, dtype):
    return apply(P["lu_permutation_matrix"], (pivots,), {"m": int(m), "dtype": dtype})


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) with A = P L U from lu_factor's packed result (torch.lu_unpack): empty tensors for
    the parts not asked for."""
    if LU_data.ndim < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    if LU_pivots.dtype is not D.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                           "Note: this function is intended to be used with the output produced by torch.linalg.lu_factor")
    if tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
        raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots.shape[:-1] to be the same as LU_data.shape[:-2], "
                           f"but got LU_pivots.shape[:-1] = {list(LU_pivots.shape[:-1])} and LU_data.shape[:-2] = "
                           f"{list(LU_data.shape[:-2])}" if tuple(LU_pivots.shape[:-1]) != tuple(LU_data.shape[:-2])
                           else f"torch.lu_unpack: Expected LU_pivots.size(-1) to be min(LU_data.size(-1), "
                           f"LU_data.size(-2)), but got LU_pivots.size(-1) = {LU_pivots.shape[-1]} and min(...) = {k}")
    empty = zeros((0,), dtype=LU_data.dtype)
    P_, L, U = math_primitives._lu_unpacked(LU_data, LU_pivots, m, n)
    if LU_data.requires_grad:
        rename_grad_fn(L, "LuUnpackBackward0")
        rename_grad_fn(U, "LuUnpackBackward0")
    return (P_ if unpack_pivots else empty, L if unpack_data else empty, U if unpack_data else empty)


# the public ops are one namespace: these join ops.functional's as this module is imported,
# so that ops.functional, which they are written in, need not import them back
for _name in __all__:
    setattr(O, _name, globals()[_name])
del _name

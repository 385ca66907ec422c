"""More of torch's functions as decompositions into the ops before them (their gradients are
those ops'): products (cross, inner, kron, vdot, addmv, addr, addbmm), distances and
statistics (dist, cov, corrcoef, trapezoid), layout (rot90, take_along_dim, block_diag,
column_stack, dstack, atleast_nd, the split family), running extremes (cummax, cummin), and
integer functions (tril_indices, triu_indices, searchsorted, bucketize, cartesian_prod, vander), and
writes into a copy (select/slice/diagonal_scatter, masked_scatter, put) and renorm."""
import math
import warnings

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..tracing import rename_grad_fn, TraceError, keep_saved, Proxy, apply
from ..creation import tensor, zeros
from . import functional as O
from .primitives import PRIMITIVES
from .math_primitives import ldexp_power_dtype
from . import shapes as S
from .composite import scaled_sum, diag_embed, vector_norm
from .math_functional import lower_median

__all__ = ["cross", "linalg_cross", "inner", "kron", "vdot", "addmv", "addr", "addbmm", "dist", "cov", "corrcoef",
           "trapezoid", "trapz", "cumulative_trapezoid", "rot90", "take_along_dim", "block_diag", "column_stack",
           "dstack", "row_stack", "atleast_1d", "atleast_2d", "atleast_3d", "split_with_sizes", "hsplit", "vsplit",
           "dsplit", "cummax", "cummin", "tril_indices", "triu_indices", "searchsorted", "bucketize",
           "cartesian_prod", "vander", "tensordot", "logcumsumexp", "isin", "diagflat", "multi_dot", "entr",
           "ldexp", "nanmedian", "fill_diagonal_", "select_scatter", "slice_scatter", "diagonal_scatter",
           "masked_scatter", "put", "renorm"]


def linalg_cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim (broadcasting the rest), as torch.linalg.cross."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dtype is D.bool_:
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    if other.dtype is not input.dtype:
        raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[input.dtype]} but found {D.SCALAR_NAME[other.dtype]}")
    d = S.normalize_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    a = [O.narrow(input, d, i, 1) for i in range(3)]
    b = [O.narrow(other, d, i, 1) for i in range(3)]
    out = O.cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)
    # torch's node saves other for self's gradient and self for other's: written, each is named as
    # itself (the slices' products named a [3, 1] slice where torch names the [3, 3] operand)
    return keep_saved(rename_grad_fn(out, "LinalgCrossBackward0"), None,
                      tuple(t for t, r in ((other, input.requires_grad), (input, other.requires_grad)) if r))


_WARNED = {"cross": False}
CROSS_WARNING = ("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                 "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree with "
                 "that of linalg.cross in a future release.")


def cross(input, other, dim=None):
    """torch.cross: linalg.cross along dim, by default the first dim of size 3 (deprecated, with
    torch's warning)."""
    O._check_tensors("cross", (input, other), ("input", "other"))
    if dim is None:
        if not _WARNED["cross"]:            # once a process, as torch's TORCH_WARN_ONCE
            _WARNED["cross"] = True
            warnings.warn(CROSS_WARNING, UserWarning, stacklevel=2)
        shape = S.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((i for i, n in enumerate(shape) if n == 3), -1)
    return linalg_cross(input, other, dim=dim)


def inner(input, other):
    """The sum over the last dims of input and other: shape input.shape[:-1] + other.shape[:-1]."""
    O._check_tensors("inner", (input, other), ("input", "other"))
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    n = input.shape[-1]
    out = O.matmul(input.reshape(-1, n), O.transpose(other.reshape(-1, n), 0, 1))
    return out.reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def tensordot(a, b, dims=2, out=None):
    """The sum over dims of a paired with dims of b (an int n: a's last n with b's first n), as
    torch.tensordot: a's other dims, then b's; one matrix product of the two reshaped."""
    if out is not None:
        raise NotImplementedError("tensordot(out=...) is not supported")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(-dims, 0)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} and "
                               f"second has size {b.shape[j]} in dim {j}")
    da = [S.normalize_dim(d, a.ndim) for d in da]
    db = [S.normalize_dim(d, b.ndim) for d in db]
    ka = [d for d in range(a.ndim) if d not in da]
    kb = [d for d in range(b.ndim) if d not in db]
    n = math.prod(a.shape[d] for d in da)
    am = O.permute(a, ka + da).reshape(math.prod(a.shape[d] for d in ka), n)
    bm = O.permute(b, db + kb).reshape(n, math.prod(b.shape[d] for d in kb))
    return O.matmul(am, bm).reshape(tuple(a.shape[d] for d in ka) + tuple(b.shape[d] for d in kb))


def _unsafe_view(t, shape):
    """torch's _unsafe_view: t's data in `shape` (only size-1 dimensions put in: always a view),
    with a version counter of its own, so what a node saves of it is not checked against writes
    to t (and reads t's data as it is then, as torch's)."""
    v = t.reshape(shape)
    if v.__class__ is not Proxy and v._base is not None:
        v._vc, v._view, v._base = [0], None, None
        rename_grad_fn(v, "UnsafeViewBackward0", whole=False)
    return v


def kron(input, other):
    """The Kronecker product: block (i, j, ...) is input[i, j, ...] * other. As torch's KronImpl,
    the operands multiply as _unsafe_views: torch's MulBackward0 saves those, so input or other
    written before the backward does not raise (it raised here) and the gradient reads their
    data as written."""
    O._check_tensors("kron", (input, other), ("input", "other"))
    nd = max(input.ndim, other.ndim)
    ai = _unsafe_view(input, tuple(x for n in (1,) * (nd - input.ndim) + tuple(input.shape) for x in (n, 1)))
    bi = _unsafe_view(other, tuple(x for n in (1,) * (nd - other.ndim) + tuple(other.shape) for x in (1, n)))
    shape = tuple(m * n for m, n in zip(ai.shape[::2], bi.shape[1::2]))
    return rename_grad_fn((ai * bi).reshape(shape), "UnsafeViewBackward0", whole=False)


def vdot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype is not other.dtype:     # (tracegrad promoted)
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{D.SCALAR_NAME[input.dtype]} and {D.SCALAR_NAME[other.dtype]}")
    return rename_grad_fn(O.sum(input * other), "VdotBackward0")


def addmv(input, mat, vec, *, beta=1, alpha=1):
    return scaled_sum("AddmvBackward0", input, O.matmul, (mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    out = scaled_sum("AddrBackward0", input, lambda a, b: O.unsqueeze(a, 1) * O.unsqueeze(b, 0), (vec1, vec2),
                     beta, alpha)
    # torch's node saves vec2 for vec1's gradient and vec1 for vec2's, named as themselves (not as
    # the [3, 1] and [1, 3] views the product saves)
    return keep_saved(out, None, tuple(t for t, r in ((vec1, vec2.requires_grad), (vec2, vec1.requires_grad)) if r))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return scaled_sum("AddbmmBackward0", input, lambda a, b: O.sum(O.matmul(a, b), 0), (batch1, batch2), beta, alpha)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), as torch.dist."""
    O._check_tensors("dist", (input, other), ("input", "other"))
    # (torch's node saves both operands and the norm, whatever p is)
    return keep_saved(rename_grad_fn(O.norm((input - other).reshape(-1), p), "DistBackward0"), input, (other,),
                      result=True)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the variables in input's rows (observations in its columns)."""
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov(): fweights and aweights are not supported yet")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(D.get_default_dtype())
    n = x.shape[1]
    xc = x - O.mean(x, 1, keepdim=True)
    c = O.matmul(xc, O.transpose(xc, 0, 1)) / max(n - correction, 0)
    return c.reshape(()) if input.ndim < 2 else c


def corrcoef(input):
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = O.sqrt(O.diagonal(c, 0, 0, 1))
    return O.clamp(c / O.unsqueeze(d, 1) / O.unsqueeze(d, 0), -1, 1)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim, with spacing dx (1 by default) or sample points x."""
    if y.dtype is D.bool_:
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    d = S.normalize_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return O.sum(y, d)
    if x is None:
        # torch's form for an even spacing: (sum - (first + last) / 2) * dx (an infinite end gives NaN, as
        # torch's; the sum of the pairs gave inf)
        ends = O.select(y, d, 0) + O.select(y, d, n - 1)
        return (O.sum(y, d) - ends * 0.5) * (1.0 if dx is None else dx)
    mid = (O.narrow(y, d, 1, n - 1) + O.narrow(y, d, 0, n - 1))
    spacing = O.narrow(x, -1 if x.ndim == 1 else d, 1, n - 1) - O.narrow(x, -1 if x.ndim == 1 else d, 0, n - 1)
    if x.ndim == 1:
        spacing = spacing.reshape(tuple(n - 1 if i == d else 1 for i in range(y.ndim)))
    return O.sum(mid * spacing, d) / 2


trapz = trapezoid


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    d = S.normalize_dim(dim, y.ndim)
    n = y.shape[d]
    mid = (O.narrow(y, d, 1, max(n - 1, 0)) + O.narrow(y, d, 0, max(n - 1, 0)))
    if x is None:
        return O.cumsum(mid * ((1.0 if dx is None else dx) / 2), d)
    spacing = O.narrow(x, -1 if x.ndim == 1 else d, 1, n - 1) - O.narrow(x, -1 if x.ndim == 1 else d, 0, n - 1)
    if x.ndim == 1:
        spacing = spacing.reshape(tuple(n - 1 if i == d else 1 for i in range(y.ndim)))
    return O.cumsum(mid * spacing / 2, d)


def rot90(input, k=1, dims=(0, 1)):
    """input turned k quarter turns in the plane of dims (from the first towards the second)."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (S.normalize_dim(d, input.ndim) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        out = O.transpose(O.flip(input, (d1,)), d0, d1)
    elif k == 2:
        out = O.flip(input, (d0, d1))
    elif k == 3:
        out = O.flip(O.transpose(input, d0, d1), (d1,))
    else:
        out = O.clone(input)
    return rename_grad_fn(out, "Rot90Backward0")


def take_along_dim(input, indices, dim=None):
    """input's values at indices along dim (broadcasting the other dims), or in the flattened
    input without dim, as torch.take_along_dim."""
    if indices.dtype is not D.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{D.SCALAR_NAME[indices.dtype]}")
    if dim is None:
        return O.gather(input.reshape(-1), 0, indices.reshape(-1))
    d = S.normalize_dim(dim, input.ndim)
    shape_i = list(S.broadcast_shapes(tuple(n for i, n in enumerate(input.shape) if i != d),
                                      tuple(n for i, n in enumerate(indices.shape) if i != d)))
    ishape = tuple(shape_i[:d] + [input.shape[d]] + shape_i[d:])
    jshape = tuple(shape_i[:d] + [indices.shape[d]] + shape_i[d:])
    # (torch expands self whatever its shape: its node saves that view, which a write to self names as
    # output 0 of AsStrided)
    return O.gather(input.expand(*ishape) if input.__class__ is not Proxy or tuple(input.shape) != ishape else input, d,
                    indices.expand(*jshape) if tuple(indices.shape) != jshape else indices)


def block_diag(*tensors):
    """The tensors (0-, 1- or 2-d) as blocks along the diagonal of one matrix, zeros elsewhere."""
    blocks = []
    for t in tensors:
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {len(blocks)} "
                               f"has {t.ndim} dimensions")
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not blocks:
        return tensor(np.zeros((1, 0), np.float32))
    dt = blocks[0].dtype
    for b in blocks[1:]:
        dt = D.promote_types(dt, b.dtype)
    cols = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = cols - left - b.shape[1]
        rows.append(_pad_cols(b.to(dt), left, right))
        left += b.shape[1]
    return rename_grad_fn(O.cat(rows, 0), "BlockDiagBackward0")


def _pad_cols(b, left, right):
    z = lambda n: zeros((b.shape[0], n), dtype=b.dtype, device=b.device) if n else None      # noqa: E731
    parts = [p for p in (z(left), b, z(right)) if p is not None]
    return O.cat(parts, 1) if len(parts) > 1 else b


def atleast_1d(*tensors):
    out = [t.reshape(1) if t.ndim == 0 else t for t in _flat(tensors)]
    return out[0] if len(out) == 1 and not isinstance(tensors[0], (list, tuple)) else tuple(out)


def atleast_2d(*tensors):
    out = [t.reshape(1, 1) if t.ndim == 0 else O.unsqueeze(t, 0) if t.ndim == 1 else t for t in _flat(tensors)]
    return out[0] if len(out) == 1 and not isinstance(tensors[0], (list, tuple)) else tuple(out)


def atleast_3d(*tensors):
    def three(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        if t.ndim == 2:
            return O.unsqueeze(t, -1)
        return t
    out = [three(t) for t in _flat(tensors)]
    return out[0] if len(out) == 1 and not isinstance(tensors[0], (list, tuple)) else tuple(out)


def _flat(tensors):
    return list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)


def column_stack(tensors):
    return O.hstack([t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors])


def dstack(tensors):
    return O.cat(list(atleast_3d(*tensors)) if len(tensors) > 1 else [atleast_3d(tensors[0])], 2)


def row_stack(tensors):
    return O.vstack(tensors)


def split_with_sizes(input, split_sizes, dim=0):
    d = S.normalize_dim(dim, input.ndim)
    if sum(split_sizes) != input.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[d]} (input tensor's "
                           f"size at dimension {dim}), but got split_sizes={list(split_sizes)}")
    return O.split(input, list(split_sizes), d)


def _nsplit(name, need, d):
    def fn(input, indices_or_sections):
        if input.ndim < need:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {need} dimension, but got a tensor with "
                               f"{input.ndim} dimensions!")
        dim = 0 if (name == "hsplit" and input.ndim == 1) else d
        if isinstance(indices_or_sections, int) and input.shape[dim] % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {input.shape[dim]} is not divisible by the split_size "
                               f"{indices_or_sections}!")
        return O.tensor_split(input, indices_or_sections, dim)
    fn.__name__ = name
    return fn


hsplit, vsplit, dsplit = _nsplit("hsplit", 1, 1), _nsplit("vsplit", 2, 0), _nsplit("dsplit", 3, 2)

def _cumulative_extreme(input, dim, name, better):
    d = S.normalize_dim(dim, max(input.ndim, 1))
    # a read by value (a compiled function's guards see it); bfloat16 values in their float32
    # storage, compared as they are (.numpy() refuses bfloat16)
    data = input.detach().cpu()._values(name)
    data = data if input.ndim else data.reshape(1)
    x = np.moveaxis(np.asarray(data), d, -1)
    idx = np.zeros(x.shape, np.int64)
    if x.shape[-1]:
        best = x[..., 0].copy()
        for i in range(x.shape[-1]):
            v = x[..., i]
            take = better(v, best) | (v == best) | np.isnan(v) if x.dtype.kind == "f" else better(v, best) | (v == best)
            if x.dtype.kind == "f":
                take &= ~(np.isnan(best) & ~np.isnan(v))              # a NaN, once seen, stays
            idx[..., i] = np.where(take, i, idx[..., i - 1] if i else 0)
            best = np.where(take, v, best)
    index = tensor(np.moveaxis(idx, -1, d).reshape(tuple(input.shape)), device=input.device if input.is_cuda else None)
    values = O.gather(input, d, index) if input.ndim else input.clone()
    out = O._return_type(name)
    # torch's node saves self and the indices (cummaxmin_backward(grad, self, indices, dim))
    return out(keep_saved(rename_grad_fn(values, name.capitalize() + "Backward0"), input), index)


def cummax(input, dim):
    """The running maximum along dim and where it was (NaN propagates; ties take the later)."""
    return _cumulative_extreme(input, dim, "cummax", np.greater)


def cummin(input, dim):
    return _cumulative_extreme(input, dim, "cummin", np.less)


def _check_indices_sizes(row, col):
    # (numpy's tril_indices of a negative size gave an empty result)
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    _check_indices_sizes(row, col)
    r, c = np.tril_indices(row, offset, col)
    return tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or D.int64, device=device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    _check_indices_sizes(row, col)
    r, c = np.triu_indices(row, offset, col)
    return tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or D.int64, device=device)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value would be inserted in the sorted last dim to keep it sorted."""
    if side is not None:
        right = side == "right"
    if D.result_type([sorted_sequence, input]) is D.bool_:         # (torch compares in the promoted dtype)
        raise NotImplementedError("\"searchsorted_out_cpu\" not implemented for 'Bool'")
    # (the arrays as held: a bfloat16 tensor's are float32 arrays of bfloat16 values, which
    # .numpy() refuses, as torch's does)
    seq = sorted_sequence._values("searchsorted")
    vals = input._values("searchsorted") if isinstance(input, Tensor) else np.asarray(input)
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter._values("searchsorted"), -1)
    how = "right" if right else "left"
    if seq.ndim == 1:
        res = np.searchsorted(seq, vals, side=how)
    else:
        res = np.stack([np.searchsorted(s, v, side=how) for s, v in zip(seq.reshape(-1, seq.shape[-1]),
                                                                         vals.reshape(-1, vals.shape[-1]))])
        res = res.reshape(vals.shape)
    return tensor(np.asarray(res).astype(np.int32 if out_int32 else np.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    if boundaries.ndim != 1:
        # (tracegrad searched each row of a 2-d boundaries tensor)
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def cartesian_prod(*tensors):
    for t in tensors:
        if t.ndim != 1:           # (tracegrad's meshgrid took a 2-d tensor's elements)
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = O.meshgrid(*tensors, indexing="ij")
    return O.stack([g.reshape(-1) for g in grids], 1)


def vander(x, N=None, increasing=False):
    n = x.shape[0] if N is None else N
    powers = [x ** i if i else O.ones_like(x) for i in range(n)]
    out = O.stack(powers if increasing else powers[::-1], 1)
    return out if x.dtype.is_floating_point else out.to(D.int64)


# -- logcumsumexp, isin, diagflat, multi_dot, entr, ldexp, nanmedian, fill_diagonal_ ---------------

def _log_add_exp(x, acc):
    """torch's _log_add_exp_helper(x, acc): log1p(exp(min - max)) + max, NaN through, and x
    itself where both are the same infinity (no inf - inf in the branch where() drops)."""
    lo, hi = O.minimum(x, acc), O.maximum(x, acc)
    same_inf = (lo == hi) & O.logical_not(O.isfinite(lo))
    diff = O.where(same_inf, O.zeros_like(lo), lo - hi)
    return O.where(same_inf, x, O.log1p(O.exp(diff)) + hi)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, as torch's CPU scan: each step log_add_exp of the next
    value and the running one, which starts at -inf and is kept in float64 for float32 (float32
    for 16-bit floats), rounded to the dtype at each output."""
    O._check_tensor(input, "logcumsumexp")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for \'{_scalar_name(input.dtype)}\'')
    if input.ndim == 0:
        return rename_grad_fn(input * 1, "LogcumsumexpBackward0")
    d = S.normalize_dim(dim, input.ndim)
    if input.shape[d] == 0:
        return input.clone()
    acc_dt = D.float64 if input.dtype in (D.float32, D.float64) else D.float32
    xs = O.unbind(input.to(acc_dt) if input.dtype is not acc_dt else input, d)
    acc = O.full(tuple(xs[0].shape), -math.inf, dtype=xs[0].dtype)
    outs = []
    for x in xs:
        acc = _log_add_exp(x, acc)
        outs.append(acc)
    out = O.stack(outs, d)
    # torch's node saves self and result: either written before the backward raises its error (self
    # written raised the error of unbind's views here, the result written nothing)
    return keep_saved(rename_grad_fn(out.to(input.dtype) if out.dtype is not input.dtype else out,
                                     "LogcumsumexpBackward0"), input, result=True)


def _scalar_name(dt):
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(dt.name, dt.name)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element is among test_elements (== as the comparison: NaN is in nothing)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments: elements or test_elements must "
                        "be a Tensor")
    if not isinstance(elements, Tensor):
        elements = tensor(elements, dtype=test_elements.dtype if isinstance(elements, bool) else None)
    if not isinstance(test_elements, Tensor):
        test_elements = tensor(test_elements)
    e = elements.detach()
    t = test_elements.detach().reshape(-1)
    if t.numel() == 0:
        hit = O.zeros_like(e, dtype=D.bool_)
    else:
        hit = O.any(O.unsqueeze(e, -1) == t, -1)
    return O.logical_not(hit) if invert else hit


def diagflat(input, offset=0):
    """The flattened input on the offset diagonal of a square matrix, as torch.diagflat."""
    O._check_tensor(input, "diagflat")
    return diag_embed(input.reshape(-1), offset)


def _chain_order(dims):
    """torch's matrix_chain_order: the split of each span that costs the fewest multiplies (the
    first such split where several tie)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or q < cost[i][j]:
                    cost[i][j] = q
                    split[i][j] = k
    return split


def multi_dot(tensors):
    """A chain of matrix products in the order that needs the fewest multiplies, as
    torch.linalg.multi_dot (the first tensor may be 1-D, a row; the last, a column)."""
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first_1d, last_1d = tensors[0].ndim == 1, tensors[-1].ndim == 1
    ts = list(tensors)
    for i, t in enumerate(ts):
        want = 1 if (i == 0 and first_1d) or (i == n - 1 and last_1d) else 2
        if t.ndim not in (want, 2) or (t.ndim == 1 and 0 < i < n - 1):
            if i == 0:
                raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {t.ndim}D")
            if i == n - 1:
                raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {t.ndim}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    if first_1d:
        ts[0] = O.unsqueeze(ts[0], 0)
    if last_1d:
        ts[-1] = O.unsqueeze(ts[-1], -1)
    for i in range(n - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(ts[i].shape)} and "
                               f"{list(ts[i + 1].shape)} cannot be multiplied")
    if n == 2:
        out = O.mm(ts[0], ts[1])
    elif n == 3:
        a, b = ts[0].shape[0], ts[1].shape[0]
        c, d = ts[2].shape[0], ts[2].shape[1]
        cost_1 = (a * c) * (b + d)
        cost_2 = (b * d) * (a + c)
        out = O.mm(ts[0], O.mm(ts[1], ts[2])) if cost_1 > cost_2 else O.mm(O.mm(ts[0], ts[1]), ts[2])
    else:
        split = _chain_order([ts[0].shape[0]] + [t.shape[1] for t in ts])

        def chain(i, j):
            if i == j:
                return ts[i]
            return O.mm(chain(i, split[i][j]), chain(split[i][j] + 1, j))
        out = chain(0, n - 1)
    shape = ([] if first_1d else [out.shape[0]]) + ([] if last_1d else [out.shape[1]])
    return out.view(*shape)


def entr(input):
    """-x log x for x > 0, 0 at 0, -inf below 0, NaN at NaN, as torch.special.entr."""
    O._check_tensor(input, "entr")
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    pos = x > 0
    out = O.where(pos, -x * O.log(x), O.where(x == 0, 0.0, -math.inf))
    return rename_grad_fn(O.where(O.isnan(x), x, out), "SpecialEntrBackward0")


def ldexp(input, other):
    """input * 2 ** other, as torch.ldexp (a float result: 2.0 ** an integer tensor is float); one
    primitive, whose node saves other and the result, as torch's."""
    O._check_tensor(input, "ldexp")
    if not isinstance(other, Tensor):
        raise TypeError(f"ldexp(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    if other.dtype is D.bool_ and input.dtype.is_floating_point:
        raise NotImplementedError("\"ldexp_cpu_exp\" not implemented for 'Bool'")
    pd = ldexp_power_dtype(input, other)
    return apply(PRIMITIVES["ldexp"], (input, other), {} if pd is None else {"power": pd.name})


def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the values that are not NaN (NaN where all are), as torch.nanmedian."""
    def pos(x, d, n):
        real = O.sum(O.logical_not(O.isnan(x)), d, keepdim=True)
        return O.where(real > 0, (real - 1) // 2, _all_equal_nth(n))
    return lower_median(input, dim, keepdim, "nanmedian", pos)


def _all_equal_nth(n):
    """The position std::nth_element(first, first, first + n) leaves at the front of n elements
    that all compare equivalent (libstdc++'s introselect: each round swaps the middle to the
    front and the pairs from both ends, then keeps the front part): where torch's nanmedian
    finds its index in a row of NaNs (2 for 4 of them, 5 for 7)."""
    pos = list(range(n))
    first, last = 0, n
    depth = 2 * (n.bit_length() - 1) if n else 0
    while last - first > 3 and depth > 0:
        depth -= 1
        mid = first + (last - first) // 2
        pos[first], pos[mid] = pos[mid], pos[first]
        lo, hi = first + 1, last
        while True:
            hi -= 1
            if not lo < hi:
                break
            pos[lo], pos[hi] = pos[hi], pos[lo]
            lo += 1
        last = lo
    return pos[first]


def fill_diagonal_(self, fill_value, wrap=False):
    """Write fill_value on the main diagonal in place, through diagonal views as torch writes
    through a strided one (its grad_fn CopySlices); a tall matrix's diagonal starts again every
    width + 1 rows with wrap."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.ndim > 2 and any(s != self.shape[0] for s in self.shape[1:]):
        raise RuntimeError("all dimensions of input must be of equal length")
    d = self
    for _ in range(self.ndim - 1):
        d = d.diagonal(0, 0, 1)
    d.fill_(fill_value)
    h, w = self.shape[0], self.shape[1]
    if wrap and self.ndim == 2 and h > w + 1:
        start = w + 1
        while start < h:
            self.narrow(0, start, min(w, h - start)).diagonal().fill_(fill_value)
            start += w + 1
    return self


# -- writes of a view's values into a copy: select/slice/diagonal_scatter, masked_scatter, put, and
# renorm. The three view scatters are one as_strided_scatter of src into the input's contiguous
# layout (the view's strides and offset read off the same view of an index array), so their
# gradients are as_strided_scatter's: zeros at the view for the input, the view of the gradient
# for src.

def _view_scatter(input, src, np_view, op, name):
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}(): argument 'src' (position 2) must be Tensor, not {type(src).__name__}")
    pos = np.arange(max(math.prod(input.shape), 1), dtype=np.int64)[:math.prod(input.shape)].reshape(input.shape)
    v = np_view(pos)
    if tuple(src.shape) != v.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(v.shape)}")
    item = pos.itemsize
    offset = (v.__array_interface__["data"][0] - pos.__array_interface__["data"][0]) // item if pos.size else 0
    strides = tuple(s // item for s in v.strides)
    out = O.as_strided_scatter(input, src, v.shape, strides, offset)
    # (torch's writes into input.clone(): dense in input's order)
    return rename_grad_fn(O.laid_out_dense_as(out, input), name)


def select_scatter(input, src, dim, index):
    """input with src written at input.select(dim, index), as torch.select_scatter."""
    O._check_tensor(input, "select_scatter")
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = S.normalize_dim(dim, input.ndim)
    n = input.shape[d]
    if index < -n or index >= n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at "
                         f"dimension {d}")
    return _view_scatter(input, src, lambda p: p[(slice(None),) * d + (int(index),)], "select_scatter",
                         "SelectScatterBackward0")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with src written at input[start:end:step] along dim, as torch.slice_scatter."""
    O._check_tensor(input, "slice_scatter")
    if input.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = S.normalize_dim(dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    n = input.shape[d]
    lo = 0 if start is None else int(start)
    hi = n if end is None else int(end)
    lo, hi = lo + n if lo < 0 else lo, hi + n if hi < 0 else hi
    lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
    hi = max(hi, lo)
    return _view_scatter(input, src, lambda p: p[(slice(None),) * d + (slice(lo, hi, int(step)),)],
                         "slice_scatter", "SliceScatterBackward0")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with src written at its (offset, dim1, dim2) diagonal, as torch.diagonal_scatter."""
    O._check_tensor(input, "diagonal_scatter")
    d1, d2 = S.normalize_dim(dim1, input.ndim), S.normalize_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _view_scatter(input, src, lambda p: np.diagonal(p, int(offset), d1, d2), "diagonal_scatter",
                         "DiagonalScatterBackward0")


def masked_scatter(input, mask, source):
    """input (broadcast with mask) with source's leading elements, in order, where mask holds, as
    torch.masked_scatter: a gather of source at the running count of the mask's ones."""
    O._check_tensor(input, "masked_scatter")
    if not isinstance(mask, Tensor) or mask.dtype is not D.bool_:
        got = D.SCALAR_NAME[mask.dtype] if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {got}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{D.SCALAR_NAME[input.dtype]} and {D.SCALAR_NAME[source.dtype]}")
    x, m = O.broadcast_tensors(input, mask)
    flat = O.reshape(m, (-1,))
    if m._data is not None and flat.numel() and int(np.count_nonzero(flat._data)) > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    if source.numel() == 0 or flat.numel() == 0:
        if m._data is None and flat.numel():
            # whether the mask has a one (torch's error) is not known while tracing
            raise TraceError("masked_scatter with an empty source inside a compiled function is not traced yet")
        # (no one in the mask: x; the sum of no elements keeps source in the graph, its gradient empty)
        return rename_grad_fn(O.where(m, O.sum(source), x), "MaskedScatterBackward0")
    # the k-th one of the mask takes source's k-th element (a zero takes any: where() drops it);
    # with more ones than source has elements the index is out of range and the gather raises
    idx = O.clamp(O.cumsum(flat.long(), 0) - 1, min=0)
    src = O.reshape(O.reshape(source, (-1,))[idx], tuple(x.shape))
    out = O.where(m, src, x)
    # torch writes into a C-contiguous clone of input, as masked_fill: whatever the operands' layouts
    out = O.contiguous(out)
    return rename_grad_fn(out, "MaskedScatterBackward0")


def put(input, index, source, accumulate=False):
    """input read as 1-D with source written (or added, with accumulate) at index, as torch.put."""
    O._check_tensor(input, "put")
    if index.dtype is not D.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {D.SCALAR_NAME[index.dtype]}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{D.SCALAR_NAME[input.dtype]} and source.dtype = {D.SCALAR_NAME[source.dtype]}")
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = input.numel()
    if index._data is not None and index.numel():
        i = np.asarray(index._data).reshape(-1)
        bad = i[(i >= n) | (i < -n)]
        if bad.size:
            raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor of {n} elements.")
    flat = O.reshape(input, (-1,))
    out = O.index_put(flat, (O.reshape(index, (-1,)),), O.reshape(source, (-1,)), bool(accumulate))
    # torch's node saves index, and source where it requires grad (grad.take(index).reshape_as(source))
    out = O.laid_out_dense_as(O.reshape(out, tuple(input.shape)), input)     # (torch's: into input.clone())
    return keep_saved(rename_grad_fn(out, "PutBackward0"), None, (index, source) if source.requires_grad else (index,))


def renorm(input, p, dim, maxnorm):
    """Each slice along dim with a p-norm above maxnorm scaled to maxnorm (by maxnorm / (norm +
    1e-7), as torch's kernel), as torch.renorm."""
    O._check_tensor(input, "renorm")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    d = S.normalize_dim(dim, input.ndim)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {D.SCALAR_NAME[input.dtype]}")
    x = O.contiguous(input)     # (torch's result is C-contiguous)
    norm = vector_norm(x, p, tuple(k for k in range(input.ndim) if k != d), True)
    factor = O.where(norm > maxnorm, maxnorm / (norm + 1e-7), O.full((), 1.0, dtype=input.dtype))
    return rename_grad_fn(x * factor, "RenormBackward0")

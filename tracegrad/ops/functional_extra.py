"""More of torch's functions: the modified Bessel functions (i0, and torch.special's i0e, i1, i1e:
primitives in bessel_primitives.py), angle and the conjugation functions of real tensors,
gcd/lcm/nextafter, index_reduce and as_strided over a tensor's storage (Tensor.resize_, a method
alone, is in _tensor_methods.py)."""
import warnings

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor, memory_root
from ..tracing import apply, rename_grad_fn, Proxy, TraceError
from . import bessel_primitives  # noqa: F401  (registers the primitives)
from . import number_primitives  # noqa: F401  (registers the primitives)
from .primitives import PRIMITIVES as P
from . import functional as O
from . import shapes as S
from .composite import scatter_reduce
from .math_functional import _unary, linalg_pinv, low_precision

__all__ = ["i0", "special_i0", "special_i0e", "special_i1", "special_i1e", "angle", "conj", "conj_physical",
           "resolve_conj", "resolve_neg", "is_conj", "is_neg", "gcd", "lcm", "nextafter",
           "as_strided", "index_reduce"]


i0 = _unary("i0", "i0")
special_i0 = _unary("i0", "special_i0")         # (torch.special.i0 names itself so in its errors)
special_i0e, special_i1, special_i1e = (_unary(n, n) for n in ("special_i0e", "special_i1", "special_i1e"))

angle = _unary("angle", "angle")


# -- conjugation of real tensors: tracegrad has no complex dtype, so nothing is conjugated ------------

def _real_identity(name):
    def op(input):
        """torch.{name} of a real tensor: the tensor itself (torch returns it, not a view or copy)."""
        O._check_tensor(input, name)
        return input
    op.__name__ = name
    op.__doc__ = op.__doc__.format(name=name)
    return op


conj, conj_physical, resolve_conj, resolve_neg = (_real_identity(n) for n in ("conj", "conj_physical",
                                                                               "resolve_conj", "resolve_neg"))


def is_conj(input):
    """False: a real tensor has no lazy conjugation, as torch.is_conj of one."""
    O._check_tensor(input, "is_conj")
    return False


def is_neg(input):
    """False: a real tensor has no lazy negation, as torch.is_neg of one."""
    O._check_tensor(input, "is_neg")
    return False


# -- tests of values, the determinant's log, the pseudo-inverse: composites of the ops they name -----------

def isposinf(input):
    """Where input is +inf (never, for integers and bools), as torch.isposinf."""
    O._check_tensor(input, "isposinf")
    return O.eq(input, float("inf"))


def isneginf(input):
    """Where input is -inf, as torch.isneginf."""
    O._check_tensor(input, "isneginf")
    return O.eq(input, float("-inf"))


def isreal(input):
    """True everywhere: tracegrad has no complex dtype (torch.isreal of a real tensor)."""
    O._check_tensor(input, "isreal")
    return O.ones_like(input, dtype=D.bool_)


def logdet(input):
    """log(det(input)), as torch's: from slogdet, NaN where the determinant is negative."""
    O._check_tensor(input, "logdet")
    low_precision(input, op="logdet")
    sign, logabsdet = O.linalg_slogdet(input)
    return O.where(O.eq(sign, -1.0), float("nan"), logabsdet)


def slogdet(input):
    """torch.slogdet: linalg.slogdet's (sign, logabsdet)."""
    O._check_tensor(input, "slogdet")
    return O.return_types_slogdet(*O.linalg_slogdet(input))


def pinverse(input, rcond=1e-15):
    """torch.pinverse: linalg.pinv with rcond as its rtol."""
    O._check_tensor(input, "pinverse")
    return linalg_pinv(input, rtol=rcond)


# -- gcd, lcm, nextafter: two tensors, promoted; torch takes no number for other ------------------------

def _two_tensors(name):
    prim = P[name]

    def op(input, other, *, out=None):
        if out is not None:
            return O._write_out(op(input, other), out, name)
        O._check_tensor(input, name)
        if not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
        params = {}
        if name == "nextafter" and D.result_type([input, other]) is D.bfloat16:
            params["bfloat16"] = True
        return apply(prim, (input, other), params)
    op.__name__ = name
    op.__doc__ = f"Elementwise {name} of two broadcast tensors in their common dtype, as torch.{name}."
    return op


gcd, lcm, nextafter = (_two_tensors(n) for n in ("gcd", "lcm", "nextafter"))


# -- as_strided over a tensor's storage ---------------------------------------------------------------

def _storage_place(input):
    """(input's storage offset, its storage's number of elements), in elements of its dtype."""
    data = input._data
    if not isinstance(data, np.ndarray):        # a device tensor: its memory carrier knows its storage
        carrier = data.t
        return carrier.storage_offset(), carrier.untyped_storage().nbytes() // carrier.element_size()
    return input.storage_offset(), memory_root(data).nbytes // data.itemsize


def as_strided(input, size, stride, storage_offset=None):
    """A view of input's storage with the given sizes, strides and offset (in elements), as
    torch.as_strided: the offset defaults to input's own; overlapping elements are allowed, and
    the gradient accumulates over them (torch's AsStridedBackward0).

    torch takes the view of the whole storage; tracegrad takes it of input's own elements, which is
    the same where input is C-contiguous and the view reads none of the storage around it (a view
    whose storage it is, a slice at an offset, a fresh result). Elsewhere (a transposed or strided
    input, elements outside it) it raises, rather than read other elements than torch's."""
    O._check_tensor(input, "as_strided")
    size = tuple(int(n) for n in size)
    stride = tuple(int(n) for n in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    if storage_offset is not None and int(storage_offset) < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {int(storage_offset)}")
    empty = any(n == 0 for n in size)
    span = 0 if empty else sum((n - 1) * s for n, s in zip(size, stride)) + 1
    if isinstance(input, Proxy):
        # a traced value's place in its storage is not known to the trace: its own elements from
        # its first on (the default offset) are
        if storage_offset is not None:
            raise TraceError("as_strided with an explicit storage_offset inside a compiled function is not traced yet "
                             "(the program does not know the argument's place in its storage)")
        if not empty and (span > input.numel() or not input.is_contiguous()):
            raise TraceError("as_strided reaching beyond a traced value's own elements (or of a non-contiguous one) "
                             "inside a compiled function is not traced yet")
        return apply(P["as_strided"], (input,), {"shape": size, "strides": stride, "offset": 0})
    own, storage = _storage_place(input)
    offset = own if storage_offset is None else int(storage_offset)
    if not empty:
        need = offset + span
        if need > storage:
            item = input.dtype.itemsize
            raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                               f"itemsize {item} requiring a storage size of {need * item} are out of bounds for "
                               f"storage of size {storage * item}")
        if not input.is_contiguous() or offset < own or need > own + input.numel():
            raise RuntimeError(
                f"as_strided: sizes {list(size)}, strides {list(stride)} and storage offset {offset} reach elements "
                f"of the storage outside this tensor (storage offset {own}, {input.numel()} elements"
                f"{'' if input.is_contiguous() else ', not contiguous'}), which tracegrad does not view: take "
                f"the view of the tensor that owns the storage, or of input.contiguous() with offsets counted "
                f"from its first element")
    return apply(P["as_strided"], (input,), {"shape": size, "strides": stride, "offset": 0 if empty else offset - own})


# -- index_reduce ---------------------------------------------------------------------------------------

_INDEX_REDUCE_WARNED = [False]


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """source's slices along dim reduced ("prod", "mean", "amax", "amin") into input's slices at
    index, as torch.index_reduce: with include_self, input's slice takes part (and counts in the
    mean); an integer mean rounds down. It is scatter_reduce with the index spread over source's
    other dimensions, so its gradient is scatter_reduce's (torch's: amax and amin share the gradient
    among ties, prod's is exact at zeros), under torch's node name IndexReduceBackward0."""
    if not _INDEX_REDUCE_WARNED[0]:
        _INDEX_REDUCE_WARNED[0] = True
        warnings.warn("index_reduce() is in beta and the API may change at any time.", UserWarning, stacklevel=2)
    O._check_tensor(input, "index_reduce")
    O._check_tensor(index, "index_reduce", "index", 3)
    O._check_tensor(source, "index_reduce", "source", 4)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dtype is not D.int64 and index.dtype is not D.int32:
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{D.SCALAR_NAME[index.dtype]}")
    d = S.normalize_dim(dim, input.ndim)
    if index.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{D.SCALAR_NAME[index.dtype]} and size: {list(index.shape)}")
    n_src = source.shape[d] if source.ndim else 1
    if source.ndim != input.ndim or tuple(source.shape[:d]) + tuple(source.shape[d + 1:]) != \
            tuple(input.shape[:d]) + tuple(input.shape[d + 1:]):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")
    if index.numel() != n_src:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be equal to source.size(dim): "
                           f"({n_src}), for dim: {d}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({D.SCALAR_NAME[input.dtype]}) and source "
                           f"({D.SCALAR_NAME[source.dtype]}) must have the same scalar type")
    if input.dtype is D.bool_:
        raise NotImplementedError("\"index_func_\" not implemented for 'Bool'")
    n = input.shape[d] if input.ndim else 1
    if index._data is not None and index.numel():
        i = np.asarray(index._data)
        if np.any((i < 0) | (i >= n)):          # (torch takes no negative index here)
            raise IndexError("index out of range in self")
    if not input.ndim:                   # (0-dim: as one element along dim 0)
        out = scatter_reduce(O.reshape(input, (1,)), 0, O.reshape(index, (1,)).to(D.int64), O.reshape(source, (1,)),
                             reduce, include_self=include_self)
        return rename_grad_fn(O.reshape(out, ()), "IndexReduceBackward0")
    idx = O.expand(O.reshape(index, tuple(-1 if k == d else 1 for k in range(source.ndim))), *source.shape)
    out = scatter_reduce(input, d, idx.to(D.int64), source, reduce, include_self=include_self)
    return rename_grad_fn(out, "IndexReduceBackward0")


# the public ops are one namespace (as composite.py's): derivative rules call these through it
# (but as_strided: the rules' F.as_strided views an operand's own elements, any layout)
for _name in __all__:
    if _name != "as_strided":
        setattr(O, _name, globals()[_name])
del _name

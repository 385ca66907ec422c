"""torch.linalg: inverse, determinant, solve and norms (primitives in ops/math_primitives.py)."""
import math

from .ops import functional as O
from .ops.math_functional import linalg_inv as inv, linalg_det as det, linalg_solve as solve
from .ops.math_primitives import LinAlgError
from .ops.composite import matrix_power, matrix_exp
from . import _dtype as D

__all__ = ["inv", "det", "slogdet", "solve", "norm", "vector_norm", "matrix_norm", "LinAlgError", "inv_ex",
           "matrix_power", "matrix_exp"]


def slogdet(A):
    """(sign, log|det A|): the sign is not differentiable, log|det A| is."""
    sign, logabsdet = O.linalg_slogdet(A)
    return O.return_types_slogdet(sign, logabsdet)


def inv_ex(A, *, check_errors=False):
    from .creation import zeros
    return inv(A), zeros(tuple(A.shape[:-2]), dtype=D.int32)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{D.SCALAR_NAME[x.dtype]}")
    dims = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    a = O.abs(x)
    if ord == math.inf:
        return O.amax(a, dims, keepdim=keepdim)
    if ord == -math.inf:
        return O.amin(a, dims, keepdim=keepdim)
    if ord == 0:
        # the count of nonzeros, with torch's (zero) gradient: sign(|x|) is 1 off zero, its derivative 0
        return O.sum(O.where(a != 0, O.sign(a), a), dims, keepdim=keepdim)
    if ord == 1:
        return O.sum(a, dims, keepdim=keepdim)
    if ord == 2:
        return O.sqrt(O.sum(x * x, dims, keepdim=keepdim))
    return O.pow(O.sum(O.pow(a, ord), dims, keepdim=keepdim), 1.0 / ord)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    r, c = (d % A.ndim for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (r, c), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        sum_dim, red_dim = (r, c) if ord in (1, -1) else (c, r)
        s = O.sum(O.abs(A), sum_dim, keepdim=True)
        out = (O.amax if ord > 0 else O.amin)(s, red_dim, keepdim=True)
        return out if keepdim else O.squeeze(O.squeeze(out, max(r, c)), min(r, c))
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values, which tracegrad does not "
                                  f"compute yet")
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """vector_norm over dim (or all of A) unless ord is a matrix order or dim names two dims."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        if dim is not None and len(dim) == 2:
            return matrix_norm(A, "fro", dim, keepdim, dtype=dtype)
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if isinstance(ord, str) or (dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2):
        return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
    if dim is None and A.ndim != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.ndim}D.")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)

"""torch.linalg: inverse, determinant, solve and norms (primitives in ops/math_primitives.py)."""
import math
import warnings

import numpy as np

from .ops import functional as O
from .ops.math_functional import linalg_inv as _inv, linalg_det as det, linalg_solve as _solve, \
    linalg_solve_triangular as _solve_triangular, low_precision as _low_precision
from .tracing import rename_grad_fn, Proxy
from .ops.math_primitives import LinAlgError
from .ops.composite import matrix_power, matrix_exp, vector_norm
from . import _dtype as D
from .tensor import Tensor
from .autograd import WARN_ALWAYS
from .creation import zeros, ones, tensor, eye as _eye
from .ops.composite_more import multi_dot

__all__ = ["inv", "det", "slogdet", "solve", "norm", "vector_norm", "matrix_norm", "LinAlgError", "inv_ex",
           "matrix_power", "matrix_exp", "multi_dot", "solve_triangular", "vecdot", "matmul", "diagonal", "vander"]


# torch's message where its function's LAPACK driver takes float and double alone (matrix_rank, lstsq)
_FLOAT_AND_DOUBLE = "This function doesn't handle types other than float and double"


def _column_major(t):
    """t with each matrix laid out column by column, as torch's LAPACK-backed results are (inv,
    solve, cholesky, eigh's vectors, svd's and qr's factors): their .view(-1) raises, as torch's.
    The node keeps its name."""
    nd = t.ndim
    if nd < 2:
        return t
    new = O._relaid(t, tuple(k for k in list(range(nd - 2)) + [nd - 1, nd - 2] if t.shape[k] > 1))
    if new is not t and new.__class__ is not Proxy and t.grad_fn is not None:
        rename_grad_fn(new, type(t.grad_fn).__name__, whole=False)
    return new


def inv(A):
    return _column_major(_inv(A))


def solve(A, B, *, left=True):
    if not left:
        return solve(A.mT, B.mT).mT          # (torch's: the transpose of a column-major solution)
    # (a batch of vectors too: torch's solution of (2, 3, 4) vectors is laid out (12, 1, 3))
    return _column_major(_solve(A, B))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    return _column_major(_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular))


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along dim (broadcast), as torch's: sum(x * y) (vdot for two vectors)."""
    for t in (x, y):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                               f"{D.SCALAR_NAME[t.dtype]}")
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{D.SCALAR_NAME[x.dtype]} and y of type {D.SCALAR_NAME[y.dtype]} instead")
    if x.ndim == 1 and y.ndim == 1 and dim in (0, -1):
        return rename_grad_fn(O.sum(O.mul(x, y)), "VdotBackward0")
    return O.sum(O.mul(x, y), dim)


def matmul(input, other):
    return O.matmul(input, other)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return O.diagonal(A, offset, dim1, dim2)


def vander(x, *, N=None):
    """Columns x**0, x**1, ..., x**(N-1), as torch's: ones, then the running product of x."""
    if x.dtype in (D.bool_, D.float16, D.bfloat16) or x.dtype.is_complex:
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, but got "
                           f"{D.SCALAR_NAME[x.dtype]}")
    if x.ndim == 0:
        x = O.unsqueeze(x, -1)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = O.cumprod(O.expand(O.unsqueeze(x, -1), tuple(x.shape) + (n - 1,)), -1)
    return O.cat([ones(tuple(x.shape) + (1,), dtype=x.dtype), powers], -1)


def slogdet(A):
    """(sign, log|det A|): the sign is not differentiable, log|det A| is."""
    sign, logabsdet = O.linalg_slogdet(A)
    return O.return_types_slogdet(sign, logabsdet)


def inv_ex(A, *, check_errors=False):
    return inv(A), zeros(tuple(A.shape[:-2]), dtype=D.int32)


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
        _low_precision(A, op="linalg.matrix_norm")
        s = svdvals(O.movedim(A, (r, c), (-2, -1)))
        out = O.sum(s, -1) if ord == "nuc" else (O.amax if ord == 2 else O.amin)(s, -1)
        if keepdim:
            out = O.unsqueeze(O.unsqueeze(out, min(r, c)), max(r, c))
        return out
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


from .ops.math_functional import (linalg_cholesky as _cholesky, linalg_eigh as _eigh, linalg_svd as _svd,  # noqa: E402
                                  linalg_qr as _qr, linalg_pinv as pinv)


def cholesky(A, *, upper=False):
    # (upper: the transpose of the C-contiguous factor, column by column already)
    return _cholesky(A, upper=True) if upper else _column_major(_cholesky(A))
from .ops import functional as _O  # noqa: E402


class _Named(tuple):
    """A result tuple with torch's field names (torch.return_types)."""
    _fields = ()

    def __new__(cls, *values):
        return tuple.__new__(cls, values)

    def __getattr__(self, name):
        try:
            return self[type(self)._fields.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def __repr__(self):
        return f"{type(self).__name__}(\n" + ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self)) + ")"


def _named(name, fields):
    return type(name, (_Named,), {"_fields": fields})


_EighResult = _named("torch.return_types.linalg_eigh", ("eigenvalues", "eigenvectors"))
_SvdResult = _named("torch.return_types.linalg_svd", ("U", "S", "Vh"))
_QrResult = _named("torch.return_types.linalg_qr", ("Q", "R"))


def eigh(A, UPLO="L"):
    w, v = _eigh(A, UPLO)
    return _EighResult(w, _column_major(v))


def eigvalsh(A, UPLO="L"):
    return _eigh(A, UPLO)[0]


def svd(A, full_matrices=True, *, driver=None):
    U, S, Vh = _svd(A, full_matrices)
    return _SvdResult(_column_major(U), S, _column_major(Vh))


def svdvals(A, *, driver=None):
    return _svd(A, False)[1]


def qr(A, mode="reduced"):
    return _QrResult(*(_column_major(t) for t in _qr(A, mode)))


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above the tolerance (torch's default: max(m, n) * eps * the
    largest); an integer count, not differentiable."""
    _low_precision(A, message=_FLOAT_AND_DOUBLE)
    s = svdvals(A.detach())
    eps = {D.float64: 2.220446049250313e-16, D.float32: 1.1920928955078125e-07}.get(A.dtype, 1e-3)
    top = _O.amax(s, -1, keepdim=True) if s.shape[-1] else s
    tol = top * (max(A.shape[-2:]) * eps if rtol is None else rtol)
    if atol is not None:
        tol = _O.maximum(tol, _O.full(tuple(tol.shape), float(atol), dtype=tol.dtype))
    return _O.sum(s > tol, -1)


_CholeskyExResult = _named("torch.return_types.linalg_cholesky_ex", ("L", "info"))


def _potf2(a):
    """LAPACK's unblocked Cholesky (dpotf2, lower) of one matrix that has none: the factor as far
    as it got (the failing column's diagonal holds its non-positive pivot, the columns after it
    the input's lower triangle, as torch's result) and info, the order of the first leading
    minor that is not positive-definite."""
    a = np.tril(a)
    for j in range(a.shape[-1]):
        ajj = a[j, j] - a[j, :j] @ a[j, :j]
        if not ajj > 0:
            a[j, j] = ajj
            return a, j + 1
        a[j, j] = math.sqrt(ajj)
        a[j + 1:, j] = (a[j + 1:, j] - a[j + 1:, :j] @ a[j, :j]) / a[j, j]
    return a, 0


def cholesky_ex(A, *, upper=False, check_errors=False):
    """torch.linalg.cholesky_ex: (L, info), info 0 where the factor exists, else the order of the
    first leading minor that is not positive-definite (and L as far as LAPACK got: no gradient);
    check_errors raises torch's LinAlgError then."""
    a = A._data
    try:
        return _CholeskyExResult(cholesky(A, upper=upper), zeros(tuple(A.shape[:-2]), dtype=D.int32))
    except LinAlgError:
        if a.__class__ is not np.ndarray:
            raise                            # (traced, or on a device: a program does not branch on values)
    mats = a.reshape(-1, a.shape[-2], a.shape[-1])
    factors, infos = zip(*(_potf2(m.astype(np.float64)) for m in mats))
    info = np.array(infos, dtype=np.int32).reshape(a.shape[:-2])
    if check_errors:
        k = int(np.flatnonzero(info.reshape(-1))[0])
        where = f"(Batch element {k}): " if a.ndim > 2 else ""
        raise LinAlgError(f"linalg.cholesky_ex: {where}The factorization could not be completed because the input is "
                          f"not positive-definite (the leading minor of order {infos[k]} is not positive-definite).")
    L = tensor(np.stack(factors).reshape(a.shape).astype(a.dtype), dtype=A.dtype)
    return _CholeskyExResult(L.mT if upper else L, tensor(info))


__all__ += ["cholesky", "cholesky_ex", "eigh", "eigvalsh", "svd", "svdvals", "qr", "matrix_rank", "pinv"]

from .ops.composite_more import linalg_cross as cross  # noqa: E402

__all__ += ["cross"]


def householder_product(A, tau):
    """The first n columns of H_1 H_2 ... H_k, H_i = I - tau_i v_i v_i^H, v_i the i-th column of
    A below its diagonal with 1 on it (torch.linalg.householder_product; a composite of matmuls,
    differentiated through them)."""
    name = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    _low_precision(A, "orgqr_cpu")
    if tau.ndim and tau.shape[-1] > n:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"{name}: tau dtype {D.SCALAR_NAME[tau.dtype]} does not match input dtype "
                           f"{D.SCALAR_NAME[A.dtype]}")
    below = A.tril(-1)
    ident = _eye(m, dtype=A.dtype)
    Q = ident.expand(*A.shape[:-2], m, m)
    for i in range(tau.shape[-1]):
        v = (below[..., :, i] + ident[:, i]).unsqueeze(-1)
        Q = Q - (Q @ v) * tau[..., i, None, None] @ v.mH
    return Q[..., :n].contiguous()


__all__ += ["householder_product"]


# -- torch's older linear algebra functions (torch.svd, torch.qr, torch.cholesky, cholesky_solve,
# cholesky_inverse, triangular_solve), the torch.* and Tensor methods of older code: linalg's
# functions under their conventions ---------------------------------------------------------------------

_SvdResultOld = _named("torch.return_types.svd", ("U", "S", "V"))
_QrResultOld = _named("torch.return_types.qr", ("Q", "R"))
_TriangularSolveResult = _named("torch.return_types.triangular_solve", ("solution", "cloned_coefficient"))
_WARNED = set()


def _warn_once(key, msg):
    """torch's TORCH_WARN_ONCE: the first call in the process warns (every call after
    set_warn_always(True))."""
    if key not in _WARNED or WARN_ALWAYS[0]:
        _WARNED.add(key)
        warnings.warn(msg, UserWarning, stacklevel=3)


def svd_old(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V, not its transpose; some=False gives the square factors;
    compute_uv=False gives zero U and V."""
    m, n = input.shape[-2], input.shape[-1]
    if not compute_uv:
        batch = tuple(input.shape[:-2])
        return _SvdResultOld(zeros(batch + (m, m), dtype=input.dtype), svdvals(input),
                             zeros(batch + (n, n), dtype=input.dtype).mT)       # (column-major, as torch's)
    U, S, Vh = svd(input, full_matrices=not some)
    return _SvdResultOld(U, S, Vh.mT)


def qr_old(input, some=True):
    _warn_once("qr", "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch "
                     "release.\nThe boolean parameter 'some' has been replaced with a string parameter 'mode'.\n"
                     "Q, R = torch.qr(A, some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some "
                     "else 'complete')")
    return _QrResultOld(*qr(input, "reduced" if some else "complete"))


def cholesky_old(input, upper=False):
    _warn_once("cholesky", "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a "
                           "future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = "
                           "torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be replaced "
                           "with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent results for "
                           "all valid (symmetric positive definite) inputs.")
    return rename_grad_fn(cholesky(input, upper=upper), "CholeskyBackward0")


def cholesky_solve(input, input2, upper=False):
    """X with A X = input, A = L L^T given its Cholesky factor input2 = L (U with upper: A = U^T U):
    two triangular solves."""
    _low_precision(input, "cholesky_solve_cpu")
    L = input2.mT if upper else input2
    y = solve_triangular(L, input, upper=False)
    return rename_grad_fn(solve_triangular(L.mT, y, upper=True), "CholeskySolveBackward0")


def cholesky_inverse(input, upper=False):
    """A^-1 from A's Cholesky factor."""
    _low_precision(input, "cholesky_inverse_out_cpu")
    n = input.shape[-1]
    inv_ = cholesky_solve(_eye(n, dtype=input.dtype).expand(*input.shape), input, upper)
    return rename_grad_fn(inv_, "CholeskyInverseBackward0")


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve(b, A): (X with op(A) X = b, op(A) = A or A^T, a copy of A)."""
    _warn_once("triangular_solve", "torch.triangular_solve is deprecated in favor of "
                                   "torch.linalg.solve_triangularand will be removed in a future PyTorch release.\n"
                                   "torch.linalg.solve_triangular has its arguments reversed and does not return a "
                                   "copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be "
                                   "replaced with\nX = torch.linalg.solve_triangular(A, B).")
    M = A.mT if transpose else A
    x = solve_triangular(M, input, upper=upper != transpose, unitriangular=unitriangular)
    return _TriangularSolveResult(rename_grad_fn(x, "TriangularSolveBackward0"),
                                  rename_grad_fn(_column_major(A.clone()), "TriangularSolveBackward0"))


# their Tensor methods (b.cholesky_solve(L), b.triangular_solve(A), x.svd(), ...)
for _name, _fn in (("svd", svd_old), ("qr", qr_old), ("cholesky", cholesky_old), ("cholesky_solve", cholesky_solve),
                   ("cholesky_inverse", cholesky_inverse), ("triangular_solve", triangular_solve)):
    setattr(Tensor, _name, _fn)
del _name, _fn


# -- LU: factor, unpack, solve (the primitive in ops/math_primitives.py) ----------------------------------

from .ops.math_functional import linalg_lu_factor as _lu_factor, lu_unpack as _lu_unpack  # noqa: E402

_LuFactorResult = _named("torch.return_types.linalg_lu_factor", ("LU", "pivots"))
_LuFactorExResult = _named("torch.return_types.linalg_lu_factor_ex", ("LU", "pivots", "info"))
_LuResult = _named("torch.return_types.linalg_lu", ("P", "L", "U"))
_LuUnpackResult = _named("torch.return_types.lu_unpack", ("P", "L", "U"))
_SolveExResult = _named("torch.return_types.linalg_solve_ex", ("result", "info"))
_LstsqResult = _named("torch.return_types.linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))


def _no_pivot(name, pivot):
    if not pivot:
        raise RuntimeError(f"linalg.{name}: LU without pivoting is not implemented on the CPU")


def _lu_info(LU):
    """getrf's info: 1 + the index of the first zero on U's diagonal (0 where none), per matrix (in
    ops: compiled, it is computed from the factor too)."""
    k = min(LU.shape[-2:])
    if k == 0:
        return zeros(tuple(LU.shape[:-2]), dtype=D.int32)
    zero = (_O.diagonal(LU.detach(), 0, -2, -1) == 0).to(D.int32)
    return _O.where(_O.amax(zero, -1) > 0, _O.argmax(zero, -1) + 1, 0).to(D.int32)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): info > 0 where U has a zero on its diagonal (the factorization exists;
    solving with it divides by zero); check_errors raises then."""
    _no_pivot("lu_factor", pivot)
    LU, piv = _lu_factor(A, "torch.linalg.lu_factor_ex" if check_errors else None)
    return _LuFactorExResult(_column_major(LU), piv, _lu_info(LU))


def lu_factor(A, *, pivot=True):
    """(LU, pivots) of A = P L U; raises where U would have a zero on its diagonal (torch's)."""
    _no_pivot("lu_factor", pivot)
    LU, piv = _lu_factor(A, "torch.linalg.lu_factor")
    return _LuFactorResult(_column_major(LU), piv)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U: L unit lower (m x k), U upper (k x n), k = min(m, n)."""
    _no_pivot("lu_factor", pivot)
    P_, L, U = _lu_unpack(*_lu_factor(A))
    if A.requires_grad:
        for t in (L, U):
            rename_grad_fn(t, "LinalgLuBackward0")
    return _LuResult(P_, L, U)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    # (C-contiguous as torch's, from a column-major factor too)
    outs = [t.contiguous() for t in _lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)]
    if LU_data.requires_grad:
        for t in outs[1:]:
            rename_grad_fn(t, "LuUnpackBackward0")
    return _LuUnpackResult(*outs)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B with left=False; A^T in place of A with adjoint) from A's LU factors."""
    if LU.ndim < 2 or LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f"linalg.lu_solve: A must be batches of square matrices, but they are "
                           f"{LU.shape[-2] if LU.ndim >= 2 else 1} by {LU.shape[-1]} matrices")
    if B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if B.dtype is not LU.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{D.SCALAR_NAME[LU.dtype]} and B of type {D.SCALAR_NAME[B.dtype]} instead")
    if not left:                          # X A = B  <=>  A^T X^T = B^T
        return rename_grad_fn(lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT, "LinalgLuSolveBackward0")
    P_, L, U = _lu_unpack(LU, pivots)
    if adjoint:                           # A^T = U^T L^T P^T: X = P L^-T U^-T B
        y = _solve_triangular(U.mT, B, upper=False)
        x = P_ @ _solve_triangular(L.mT, y, upper=True, unitriangular=True)
    else:                                 # A = P L U: X = U^-1 L^-1 P^T B
        y = _solve_triangular(L, P_.mT @ B, upper=False, unitriangular=True)
        x = _solve_triangular(U, y, upper=True)
    return _column_major(rename_grad_fn(x, "LinalgLuSolveBackward0"))


def solve_ex(A, B, *, left=True, check_errors=False):
    """(solve(A, B), info): info the LU's, > 0 for a singular A (where solve raises)."""
    try:
        return _SolveExResult(solve(A, B, left=left), zeros(tuple(A.shape[:-2]), dtype=D.int32))
    except LinAlgError:
        if not isinstance(A._data, np.ndarray):
            raise
        if check_errors:
            raise LinAlgError("torch.linalg.solve_ex: The solver failed because the input matrix is singular.") from None
    info = lu_factor_ex(A.detach()).info
    # (LAPACK's getrs on a singular factor divides by zero: torch returns what it computed, inf/nan)
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    LU, piv = _lu_factor(A)
    Bm = B.unsqueeze(-1) if vector else B
    x = lu_solve(LU, piv, Bm, left=left) if Bm.shape[-2 if left else -1] == n else solve(A, B, left=left)
    return _SolveExResult(x.squeeze(-1) if vector else x, info)


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares (minimum-norm, for a rank-deficient A) solution of A X = B, as torch's on
    the CPU (driver 'gelsy' by default; 'gels', 'gelsd', 'gelss'); rank from the singular values
    above rcond * the largest (eps of the dtype * max(m, n) by default); residuals
    ||A X - B||^2 per column where m > n and A has full rank; singular values with 'gelsd'/'gelss'."""
    drivers = ("gels", "gelsy", "gelsd", "gelss")
    if driver is None:
        driver = "gelsy"
    if driver not in drivers:
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.ndim < 2:
        raise RuntimeError(f"torch.linalg.lstsq: input must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"torch.linalg.lstsq: Expected a floating point or complex tensor as input. Got "
                           f"{D.SCALAR_NAME[A.dtype]}")
    _low_precision(A, message=_FLOAT_AND_DOUBLE)
    if B.dtype is not A.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {D.SCALAR_NAME[A.dtype]} and other's dtype {D.SCALAR_NAME[B.dtype]}")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2], A.shape[-1]
    eps = {D.float64: 2.220446049250313e-16, D.float32: 1.1920928955078125e-07}.get(A.dtype, 1e-3)
    rtol = max(m, n) * eps if rcond is None or rcond < 0 else float(rcond)
    X = _O.matmul(pinv(A, rtol=rtol), Bm)
    empty = zeros((0,), dtype=A.dtype)
    rank = matrix_rank(A, rtol=rtol) if driver != "gels" else zeros((0,), dtype=D.int64)
    sv = svdvals(A) if driver in ("gelsd", "gelss") else empty
    residuals = empty
    if m > n and driver != "gelsy":         # (gelsy computes none; the others where every A has full rank)
        # (a value: traced, bool() raises TraceError and the call runs eagerly)
        if bool((matrix_rank(A.detach(), rtol=rtol) == n).all()):
            r = _O.matmul(A, X) - Bm
            residuals = _O.sum(r * r, -2)
    if vector:
        X = X.squeeze(-1)
    return _LstsqResult(X, residuals, rank, sv)


def cond(A, p=None):
    """The condition number of A in the p-norm: for p None/2/-2 the ratio of the extreme singular
    values, else norm(A, p) * norm(A^-1, p)."""
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor A must have at least 2 dimensions.")
    if p in (None, 2, -2):
        s = svdvals(A)
        top, bottom = _O.amax(s, -1), _O.amin(s, -1)
        return top / bottom if p != -2 else bottom / top
    if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def tensorinv(A, ind=2):
    """The inverse of A read as a matrix of the first ind dimensions by the rest: shape
    A.shape[ind:] + A.shape[:ind]."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    r, c = math.prod(rows), math.prod(cols)
    if r != c:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {c} != {r}")
    return inv(A.reshape(r, c)).reshape(cols + rows)


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        nd = A.ndim
        moved = [d % nd for d in dims]
        A = _O.movedim(A, moved, list(range(nd - len(moved), nd)))
    rest = tuple(A.shape[B.ndim:])
    n = math.prod(rest)
    if math.prod(A.shape[:B.ndim]) != n:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {n} != {math.prod(A.shape[:B.ndim])}")
    return solve(A.reshape(n, n), B.reshape(n)).reshape(rest)


__all__ += ["lu_factor", "lu_factor_ex", "lu", "lu_solve", "solve_ex", "lstsq", "cond", "tensorinv", "tensorsolve"]


# torch's older LU functions (torch.lu, torch.lu_solve(b, LU, pivots), torch.lu_unpack) and methods
_WARN_LU = ("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be removed "
            "in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\nLU, "
            "pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, "
            "compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, "
            "compute_pivots)")
_WARN_LU_SOLVE = ("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
                  "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = "
                  "torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)")


def lu_old(A, pivot=True, get_infos=False, out=None):
    """torch.lu: (LU, pivots), (LU, pivots, infos) with get_infos; never raises for a singular A."""
    _warn_once("lu", _WARN_LU)
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    return (LU, piv, info) if get_infos else (LU, piv)


def lu_solve_old(b, LU_data, LU_pivots):
    _warn_once("lu_solve", _WARN_LU_SOLVE)
    return lu_solve(LU_data, LU_pivots, b)


for _name, _fn in (("lu", lu_old), ("lu_solve", lu_solve_old)):
    setattr(Tensor, _name, _fn)
del _name, _fn

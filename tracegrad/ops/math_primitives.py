"""Primitives for the inverse and hyperbolic functions, scans, sorting and linear algebra,
registered into the op table of primitives.py.

Each is one `Primitive(...)` entry. Derivative rules are tracegrad ops, so they run eagerly,
trace, and differentiate again; two exceptions are marked: the determinant's derivative
(the cofactor matrix, taken from an SVD so that singular matrices get torch's finite
gradient) and the permutation a sort finds (an integer output, not differentiable).
These have no Triton lowering: on CUDA tensors they run their numpy kernel on a host copy.
"""
import math

import numpy as np

from .. import _dtype as D
from . import shapes as S
from . import lowering as T
from .primitives import InplaceDerivativeNotImplemented
from .primitives import Primitive, PRIMITIVES, F, FrontEnd, unary, binary, _unary_shape, _is_tensor, _no_kernel, \
    _not_implemented, _half_in_float32

_HOST = T.Refuse("runs its numpy kernel on the host")


def _inv_t(x):
    return F.transpose(F.linalg_inv(x), -2, -1)


# -- elementwise -------------------------------------------------------------------------------------

unary("asin", np.arcsin, lambda g, out, x: (g * F.rsqrt(1 - x * x),), "x", triton=_HOST)
unary("acos", np.arccos, lambda g, out, x: (-g * F.rsqrt(1 - x * x),), "x", triton=_HOST)
unary("atan", np.arctan, lambda g, out, x: (g / (1 + x * x),), "x", triton=_HOST)
unary("sinh", np.sinh, lambda g, out, x: (g * F.cosh(x),), "x", triton=_HOST)
unary("cosh", np.cosh, lambda g, out, x: (g * F.sinh(x),), "x", triton=_HOST)
unary("asinh", np.arcsinh, lambda g, out, x: (g * F.rsqrt(x * x + 1),), "x", triton=_HOST)
unary("acosh", np.arccosh, lambda g, out, x: (g * F.rsqrt(x * x - 1),), "x", triton=_HOST)
unary("atanh", np.arctanh, lambda g, out, x: (g / (1 - x * x),), "x", triton=_HOST)


def _inplace_not_implemented(op):
    def vjp(g, out, x):
        raise InplaceDerivativeNotImplemented(f"the derivative for 'inplace version of {op}' is not implemented.")
    return vjp


# torch's asinh_, acosh_ and atanh_ have no derivative (derivatives.yaml: not_implemented("inplace
# version of asinh")): their backward raises NotImplementedError; tracegrad differentiated them as
# the out-of-place ops
for _n, _f in (("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh)):
    unary(_n + "_inplace", _f, _inplace_not_implemented(_n), "", grad_fn=f"{_n.capitalize()}Backward1", triton=_HOST)
def _atan2_vjp(g, out, y, x):
    # torch's atan2_backward: 1 / (y^2 + x^2) taken as 0 where it is infinite, so the origin
    # gets gradients 0 and -0, not NaN
    recip = 1 / (y * y + x * x)
    recip = F.where(F.isinf(recip), 0, recip)
    return g * x * recip, g * -y * recip


binary("atan2", np.arctan2, _atan2_vjp, "x y", dtype="promote_float", triton=_HOST)


# ldexp(x, y) = x * 2 ** y as torch computes it: a floating x with an integer (or bool) y is std::ldexp in
# x's dtype (float16 * 2 ** int64 stays float16); otherwise the power is torch's _pow2 (2.0 ** y for an
# integer or float32 x, a 0-dim tensor 2.0 of x's dtype to the power y for float64, float16, bfloat16),
# then the product, a 0-dim power read in float32 beside a 16-bit x. torch's node saves other and its
# result, not self (a decomposition into mul saved x: x written in place before the backward raised
# where torch differentiates); its rules: self: grad * 2.0 ** other, other: grad * result * ln 2
class _Operand:
    """A tensor's place in the result-dtype rule: its dtype and dimensions."""
    __slots__ = ("_dtype", "ndim")

    def __init__(self, d, ndim):
        self._dtype, self.ndim = d, ndim


def ldexp_power_dtype(x, y):
    """The dtype of torch's 2 ** y in ldexp(x, y) (None: y is an integer exponent of a floating x)."""
    xd, yd = x._dtype, y._dtype
    if not yd.is_floating_point:
        if xd.is_floating_point:
            return None
        return D.get_default_dtype()
    if not xd.is_floating_point or xd is D.float32:
        return yd
    return D.result_type((_Operand(xd, 0), y))


def _ldexp_dtype(args):
    x, y = args
    pd = ldexp_power_dtype(x, y)
    if pd is None:
        return x._dtype, x._dtype
    d = D.result_type((x, _Operand(pd, y.ndim)))
    return d, d


def _ldexp(x, y, power=None):
    if power is None:                  # (an integer exponent: exact, within the exponent range)
        e = np.clip(y, -10000, 10000).astype(np.int32, copy=False)
        return np.ldexp(x, e)
    pd = D.as_dtype(power)
    p = np.power(pd.np.type(2.0), y.astype(pd.np, copy=False))
    if pd is D.bfloat16:
        p = D.round_bfloat16(p)
    if x.dtype == np.float16:          # 16-bit products in float32, rounded once
        return np.multiply(x.astype(np.float32), p.astype(np.float32, copy=False)).astype(np.float16)
    return np.multiply(x, p.astype(x.dtype, copy=False))


def _ldexp_triton(x, y, power=None):
    """On the device, as torch's decomposition: 2.0 ** y in the power's dtype, times x (an integer
    exponent's power is exact, and the product is rounded once to x's dtype)."""
    if power is None:
        return F.convert(F.mul(x, F.pow(2.0, y)), x.dtype)
    return F.mul(x, F.pow(2.0, F.convert(y, D.as_dtype(power))))


Primitive("ldexp", "x y", _ldexp, shape=lambda x, y, **p: S.broadcast_shapes(tuple(x.shape), tuple(y.shape)),
          dtype=_ldexp_dtype, cast=(0,), elementwise=True, saves="y out",
          vjp=lambda g, out, x, y, power=None: (g * F.pow(2.0, y), g * out * math.log(2.0)),
          grad_fn="LdexpBackward0", triton=T.Decompose(_ldexp_triton))


def _sinc(x):
    """sin(pi x) / (pi x), 1 where pi x^2 is 0 (a denormal x too: its branch shifted to x = 1, no 0 / 0).
    float16 in float32, rounded once (torch's opmath); float32's sine as torch's scalar kernel's
    (std::sin, correctly rounded: numpy's float32 sine was a step away at 1 in 9 values)."""
    if x.dtype == np.float16:
        return _sinc(x.astype(np.float32)).astype(np.float16)
    zero = x * x * math.pi == 0
    px = np.where(zero, x.dtype.type(1), x) * math.pi
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.sin(px.astype(np.float64)).astype(np.float32) if x.dtype == np.float32 else np.sin(px)
        return np.where(zero, x.dtype.type(1), s / px)


def _sinc_triton(x):
    zero = x * x * math.pi == 0
    px = F.where(zero, 1.0, x) * math.pi
    return F.where(zero, 1.0, F.sin(px) / px)


def _sinc_vjp(g, out, x):
    """torch's sinc_backward, op for op: grad * ((pi x cos(pi x) - sin(pi x)) / (pi x^2)), 0 where pi x^2
    is 0. (The derivative of sinc's decomposition was a few ulps off torch's at 1,360 of 2,000
    points, and its second derivative at 0 was 0.0 where torch's, through this rule, is NaN.)"""
    px = x * math.pi
    sq = x * x * math.pi
    return (F.where(sq == 0.0, 0.0, g * ((px * F.cos(px) - F.sin(px)) / sq)),)


Primitive("sinc", "x", _sinc, shape=_unary_shape, dtype="same", vjp=_sinc_vjp, saves="x", grad_fn="SincBackward0",
          elementwise=True, triton=T.Decompose(_sinc_triton))


# sign bits (-0.0 and a negative NaN count), |x| with another value's sign, sqrt(x^2 + y^2)
# without overflow: torch.signbit, copysign, hypot
Primitive("signbit", "x", np.signbit, shape=_unary_shape, dtype="to_bool", elementwise=True,
          triton=T.Expr("_signbit({0})"))


def _copysign_vjp(g, out, x, y):
    # torch: grad * result / self, 0 where self is 0; other gets zeros (its node saves self and
    # result, not other: other written before the backward still differentiates)
    return g * F.where(x == 0, F.zeros_like(out), out / x), F.zeros_like(y) if _is_tensor(y) else None


binary("copysign", np.copysign, _copysign_vjp, "x out", needs={"x": "x out", "y": "out"}, dtype="promote_float",
       grad_fn=lambda a, p: "CopysignBackward0" if _is_tensor(a[1]) else "CopysignBackward1",
       triton=T.copysign)


def _hypot(x, y):
    if x.dtype == np.float16:
        return np.hypot(x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
    return np.hypot(x, y)


binary("hypot", _hypot, lambda g, out, x, y: (g * x / out, g * y / out), "x y out", needs={"x": "x out", "y": "y out"},
       refuse={0: _no_kernel("hypot_cpu"), 1: _no_kernel("hypot_cpu")}, triton=T.Expr("_hypot({0}, {1})", cast=True))


def _heaviside(x, v):
    return np.where(x == 0, v, x > 0).astype(np.result_type(x, v), copy=False)


binary("heaviside", _heaviside, _not_implemented("heaviside"), "", grad_fn="NotImplemented",
       triton=T.Expr("tl.where({0} == 0, {1}, tl.where({0} > 0, 1, 0))", cast=True))


# log(x / (1 - x)), x clamped to [eps, 1 - eps] first when eps is given (NaN passes); torch's (infinitely
# differentiable) derivative: where(lo <= x <= hi, g / (x (1 - x)), NaN without eps, 0 with it) of the
# unclamped x. The constant outside makes the second derivative 0 there, as torch's (adding the NaN of x
# detached gave the quotient's own second derivative outside [0, 1]; with eps, the clamp's zero slope
# gave 0 where torch's is 0 * inf = NaN at x = 0, 1 and the infinities)
def _logit_kernel(x, eps=None):
    if eps is not None:        # the bounds in x's dtype (float16's too, as torch's)
        lo, hi = x.dtype.type(eps), x.dtype.type(1 - eps)
        x = np.where(x < lo, lo, np.where(x > hi, hi, x))
    v = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(all="ignore"):
        r = np.log(v / (1 - v))
    return r.astype(np.float16) if x.dtype == np.float16 else r


def _logit_vjp(g, out, x, eps=None):
    lo, hi = (0.0, 1.0) if eps is None else (eps, 1.0 - eps)
    return (F.where(F.logical_and(x >= lo, x <= hi), g / (x * (1 - x)), float("nan") if eps is None else 0.0),)


def _triton_logit(a, p, c):
    x, eps = a[0], p.get("eps")
    if eps is None:
        return f"_logit({x})"
    lo, hi = float(eps), 1.0 - float(eps)
    return f"_logit(tl.where({x} < {lo!r}, {lo!r}, tl.where({x} > {hi!r}, {hi!r}, {x})))"


unary("logit", _logit_kernel, _logit_vjp, "x", triton=T.Expr(_triton_logit, cast=True))

# x * log(y) and x * log1p(y), 0 where x is 0 (unless y is NaN): torch.xlogy, special.xlog1py.
# Their derivative in x is xlogy(grad, y) (xlog1py), so a zero gradient stays zero where log(y)
# is infinite (a masked-out term of a loss), and 0 where x is 0 and y is outside log's domain


def _x_log(name, log, edge):
    def kernel(x, y):
        # a number operand takes the tensor's dtype (the dispatcher cast the tensors already); a
        # numpy scalar is a tensor (a 0-dim value of a compiled program: xlogy(x.sum(), 2.0) raised
        # AttributeError, 2.0 has no dtype)
        dt = (x if isinstance(x, (np.ndarray, np.generic)) else y).dtype
        x, y = np.asarray(x, dtype=dt), np.asarray(y, dtype=dt)
        with np.errstate(all="ignore"):
            r = np.multiply(x, log(y))
        return np.where((x == 0) & ~np.isnan(y), np.zeros_like(r), r)

    def vjp(g, out, x, y):
        gx = gy = None
        if _is_tensor(x):
            gx = getattr(F, name)(g, y)
            off = (x == 0) & (y <= edge) if _is_tensor(y) else (x == 0) & (float(y) <= edge)
            gx = F.where(off, F.zeros_like(gx), gx)
        if _is_tensor(y):
            gy = g * x / (y - edge)                 # log's derivative 1 / y, log1p's 1 / (y + 1)
        return gx, gy
    return kernel, vjp


def _x_log_name(base):
    return lambda a, p: base + ("0" if _is_tensor(a[0]) and _is_tensor(a[1]) else "2" if _is_tensor(a[0]) else "1")


_xlogy_kernel, _xlogy_vjp = _x_log("xlogy", np.log, 0)
_xlog1py_kernel, _xlog1py_vjp = _x_log("xlog1py", np.log1p, -1)
binary("xlogy", _xlogy_kernel, _xlogy_vjp, "x y", dtype="promote_float", grad_fn=_x_log_name("XlogyBackward"),
       triton=T.Expr("_xlogy({0}, {1})", cast=True))
binary("xlog1py", _xlog1py_kernel, _xlog1py_vjp, "x y", dtype="promote_float",
       grad_fn=_x_log_name("SpecialXlog1PyBackward"),
       triton=T.Expr("_xlog1py({0}, {1})", cast=True))


# -- scans -------------------------------------------------------------------------------------------

def _cumsum_dtype(args):
    dt = args[0]._dtype
    return None, (D.int64 if not dt.is_floating_point else dt)


def _cumsum_vjp(g, out, x, dim, low=None):
    return (F.flip(F.cumsum(F.flip(g, (dim,)), dim), (dim,)),)


def _scan_kernel(fn):
    """np.cumsum / np.cumprod with torch's accumulation on the CPU: int64 for integers and
    bool, float32 for float16, float64 for float32 (each running value rounded to the dtype
    once, as torch's scans do: the float32 running sum of 10**7 values near 1000 was 2%
    off, where torch's is the exact sum's rounding). bfloat16 values come as float32 arrays
    (`low="bfloat16"` says so): their running values are float32, as torch's (a float64 one
    kept 1e-30 * 1e-30 from underflowing, and cumprod then gave inf after an inf where torch's
    0 * inf gives nan). torch's sum starts from +0.0, so no running sum is -0.0 (np.cumsum kept
    a leading -0.0)."""
    start = 0.0 if fn is np.cumsum else None

    def kernel(x, dim, low=None):
        if x.dtype.kind in "biu":
            return fn(x, axis=dim, dtype=np.int64)
        if x.dtype == np.float16 or low == "bfloat16":
            r = fn(x, axis=dim, dtype=np.float32)
            return (r if start is None else r + np.float32(start)).astype(x.dtype)
        if x.dtype == np.float32:
            r = fn(x, axis=dim, dtype=np.float64)
            return (r if start is None else r + start).astype(np.float32)
        r = fn(x, axis=dim, dtype=x.dtype)
        return r if start is None else np.add(r, x.dtype.type(start), out=r)
    return kernel


Primitive("cumsum", "x", _scan_kernel(np.cumsum),
          shape=lambda x, dim, low=None: tuple(x.shape), dtype=_cumsum_dtype, vjp=_cumsum_vjp, grad_fn="CumsumBackward0",
          triton=_HOST)


def _stop_gradient(t):
    return FrontEnd.apply(PRIMITIVES["detach"], (t,), {})


def _reversed_cumsum(w, dim):
    return F.flip(F.cumsum(F.flip(w, (dim,)), dim), (dim,))


def _cumprod_vjp(g, out, x, dim, low=None):
    """torch's cumprod_backward. Without a zero anywhere in x: reversed_cumsum(out * g) / x, with
    the NaN and inf its division makes (an infinite input or product), differentiated again as
    written. With a zero: the values of torch's first-order path (the masked division before each
    slice's first zero, a product at it, 0 after), carried by the derivative of the product form
    d/dx_i = (prod_{k<i} x_k) S_i, S_i = g_i + x_{i+1} S_{i+1}, which holds at every order where
    the masked one does not (it drops how x_i before a zero reaches the terms past it)."""
    n = x.shape[dim]
    if n <= 1:
        return (g,)                 # torch: the gradient itself for one element on the dim
    zero = x == 0
    # (x taken as 1 at its zeros: this branch is not chosen then, and its derivative, taken
    # again with a zero gradient, would meet 0 * inf)
    by_division = _reversed_cumsum(out * g, dim) / F.where(zero, 1, x)
    xs = F.unbind(x, dim)
    gs = F.unbind(g, dim)
    s = [None] * n
    s[n - 1] = gs[n - 1]
    for i in range(n - 2, -1, -1):
        s[i] = gs[i] + xs[i + 1] * s[i + 1]
    left = [F.ones_like(xs[0])]
    for i in range(1, n):
        left.append(left[-1] * xs[i - 1])
    by_products = F.stack([a * b for a, b in zip(left, s)], dim)
    masked = _stop_gradient(_cumprod_masked(g, out, x, dim, zero))
    # masked's values, by_products' derivative (p.detach() - p is +0 where p is finite: m - 0 is m)
    with_zero = F.where(F.isfinite(by_products), masked - (_stop_gradient(by_products) - by_products), masked)
    return (F.where(F.any(zero), with_zero, by_division),)


def _cumprod_masked(g, out, x, dim, zero):
    """torch's first-order cumprod gradient where x has zeros: before a slice's first zero z1 the
    division by masked reversed sums; at z1 prod(x[:z1]) * sum_{z1<=j<z2} g_j prod(x[z1+1:j+1]);
    0 after it."""
    nz = F.cumsum(zero, dim)
    before = nz == 0
    head = _reversed_cumsum(F.where(before, out * g, 0), dim) / F.where(before, x, 1)
    ones = nz == 1
    first = F.logical_and(zero, ones)
    idx = F.argmax(F.where(ones, 1, 0), dim, keepdim=True)         # z1 (0 where the slice has none)
    prev = F.where(idx == 0, 1, F.gather(out, dim, F.clamp(idx - 1, min=0)))
    between = F.logical_and(ones, F.logical_not(zero))
    at_zero = F.sum(F.cumprod(F.where(between, x, 1), dim) * F.where(ones, g, 0), dim, keepdim=True) * prev
    return F.where(before, head, F.where(first, at_zero, 0))


Primitive("cumprod", "x", _scan_kernel(np.cumprod),
          shape=lambda x, dim, low=None: tuple(x.shape), dtype=_cumsum_dtype, vjp=_cumprod_vjp, saves="x out",
          grad_fn="CumprodBackward0", triton=_HOST)


# -- sorting -----------------------------------------------------------------------------------------

def _argsort_kernel(x, dim, descending, stable):
    """torch's order: NaN counts as the largest value; equal values keep their order."""
    key = x
    if x.dtype == np.bool_:
        key = x.astype(np.int8)
    if descending:
        if key.dtype.kind == "f":
            key = np.where(np.isnan(key), -np.inf, -key)
        elif key.dtype.kind == "u":
            key = -key.astype(np.int64)
        else:
            key = -key.astype(np.int64) if key.dtype.kind in "bi" else -key
    return np.argsort(key, axis=dim, kind="stable").astype(np.int64)


Primitive("argsort", "x", _argsort_kernel, shape=lambda x, dim, descending, stable: tuple(x.shape),
          dtype="int64", grad_fn="SortBackward0", triton=_HOST)


def _gt_or_nan(a, b):
    return (a != a and b == b) or a > b


def _quick_select(vals, k):
    """The position in `vals` (one row) that torch's CPU kthvalue reports for its k-th smallest
    (0-based): its quick_select_template (median-of-three pivot, NaN largest) run on the row and
    the row's positions alike; which of equal values it lands on follows from the swaps."""
    a = list(vals)
    pos = list(range(len(a)))

    def swap(i, j):
        a[i], a[j] = a[j], a[i]
        pos[i], pos[j] = pos[j], pos[i]
    lo, hi = 0, len(a) - 1
    while True:
        if hi <= lo:
            return pos[k]
        if hi == lo + 1:
            if _gt_or_nan(a[lo], a[hi]):
                swap(lo, hi)
            return pos[k]
        swap(lo + (hi - lo) // 2, lo + 1)
        if _gt_or_nan(a[lo + 1], a[hi]):
            swap(lo + 1, hi)
        if _gt_or_nan(a[lo], a[hi]):
            swap(lo, hi)
        if _gt_or_nan(a[lo + 1], a[lo]):
            swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, a[lo]
        while True:
            i += 1
            while _gt_or_nan(piv, a[i]):
                i += 1
            j -= 1
            while _gt_or_nan(a[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1


def _kthvalue_index_kernel(x, k, dim):
    """Where torch's kthvalue finds the k-th smallest along dim (kept as a dim of 1): the stable
    sort's k-th where that value is unique in its row; where it is tied, the position torch's
    quickselect lands on (kthvalue([2., 2, 2], 2) is index 0, the sort's order gave 1)."""
    xm = np.moveaxis(x, dim, -1)
    order = np.argsort(xm.astype(np.int8) if xm.dtype == np.bool_ else xm, axis=-1, kind="stable")
    idx = order[..., k - 1].astype(np.int64)
    kth = np.take_along_axis(xm, idx[..., None], -1)
    same = xm == kth
    if xm.dtype.kind == "f":
        same |= np.isnan(xm) & np.isnan(kth)
    rows = xm.reshape(-1, xm.shape[-1]) if xm.shape[-1] else xm.reshape(0, 0)
    flat = idx.reshape(-1)
    for r in np.nonzero(same.reshape(len(flat), -1).sum(-1) > 1)[0]:
        flat[r] = _quick_select(rows[r].tolist(), k - 1)
    return np.expand_dims(flat.reshape(idx.shape), dim)


Primitive("kthvalue_index", "x", _kthvalue_index_kernel,
          shape=lambda x, k, dim: tuple(1 if i == dim else s for i, s in enumerate(x.shape)),
          dtype="int64", triton=_HOST)


# torch.mode's position: torch's CPU kernel sorts each slice's (value, position) pairs with
# std::sort comparing values with `<` and takes the end of the first longest run of equal values.
# std::sort is not stable past 16 elements (introsort) and NaNs break its ordering, so which of
# a tied value's positions comes back (and whether a NaN is the mode) is std::sort's order: below
# it is libstdc++'s algorithm step for step (over a slice in Python); up to 16 elements without
# NaN it is an insertion sort, stable, so numpy's stable argsort gives the same order at once.
def _std_sort_order(vals):
    """The order libstdc++'s std::sort (introsort, then insertion sort) leaves the positions of
    `vals` in, comparing values with `<` alone (torch's mode kernel sorts (value, position) pairs so)."""
    a = list(range(len(vals)))
    v = vals

    def lt(i, j):
        return v[i] < v[j]

    def insertion(first, last):
        if first == last:
            return
        for i in range(first + 1, last):
            x = a[i]
            if lt(x, a[first]):
                a[first + 1:i + 1] = a[first:i]
                a[first] = x
            else:
                unguarded_linear_insert(i)

    def unguarded_linear_insert(last):
        x = a[last]
        nxt = last - 1
        while lt(x, a[nxt]):
            a[last] = a[nxt]
            last = nxt
            nxt -= 1
        a[last] = x

    def adjust_heap(first, hole, length, x):
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if lt(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and lt(a[first + parent], x):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = x

    def heapsort(first, last):
        length = last - first
        if length >= 2:
            parent = (length - 2) // 2
            while True:
                adjust_heap(first, parent, length, a[first + parent])
                if parent == 0:
                    break
                parent -= 1
        while last - first > 1:
            last -= 1
            x = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, x)

    def move_median_to_first(result, i, j, k):
        if lt(a[i], a[j]):
            if lt(a[j], a[k]):
                a[result], a[j] = a[j], a[result]
            elif lt(a[i], a[k]):
                a[result], a[k] = a[k], a[result]
            else:
                a[result], a[i] = a[i], a[result]
        elif lt(a[i], a[k]):
            a[result], a[i] = a[i], a[result]
        elif lt(a[j], a[k]):
            a[result], a[k] = a[k], a[result]
        else:
            a[result], a[j] = a[j], a[result]

    def unguarded_partition(first, last, pivot):
        while True:
            while lt(a[first], a[pivot]):
                first += 1
            last -= 1
            while lt(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def introsort(first, last, depth):
        while last - first > 16:
            if depth == 0:
                heapsort(first, last)
                return
            depth -= 1
            mid = first + (last - first) // 2
            move_median_to_first(first, first + 1, mid, last - 1)
            cut = unguarded_partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    n = len(a)
    if n:
        introsort(0, n, 2 * (n.bit_length() - 1))
        if n > 16:
            insertion(0, 16)
            for i in range(16, n):
                unguarded_linear_insert(i)
        else:
            insertion(0, n)
    return a


def _mode_row(vals):
    """(value, position) as torch's mode kernel finds them in one slice: the first longest run of
    equal values (`!=` ends a run: each NaN is a run of its own) in std::sort's order."""
    a = _std_sort_order(vals)
    mode = modei = None
    tf = mf = 0
    n = len(a)
    for i in range(n):
        tf += 1
        if i == n - 1 or vals[a[i]] != vals[a[i + 1]]:
            if tf > mf:
                mode, modei, mf = vals[a[i]], a[i], tf
            tf = 0
    return mode, modei


def _mode_index_kernel(x, dim):
    xm = np.moveaxis(x, dim, -1)
    n = xm.shape[-1]
    rows = xm.reshape(-1, n)
    out = np.empty(rows.shape[0], np.int64)
    slow = np.zeros(rows.shape[0], bool) if n <= 16 else np.ones(rows.shape[0], bool)
    if n <= 16 and xm.dtype.kind == "f":
        slow = np.isnan(rows).any(axis=1)
    fast = ~slow
    if fast.any() and n:
        r = rows[fast]
        order = np.argsort(r.astype(np.int8) if r.dtype == np.bool_ else r, axis=1, kind="stable")
        v = np.take_along_axis(r, order, 1)
        j = np.arange(n)
        ends = np.ones(v.shape, bool)
        ends[:, :-1] = v[:, 1:] != v[:, :-1]
        starts = np.ones(v.shape, bool)
        starts[:, 1:] = ends[:, :-1]
        first = np.maximum.accumulate(np.where(starts, j, 0), axis=1)
        length = np.where(ends, j - first + 1, 0)
        out[fast] = np.take_along_axis(order, length.argmax(axis=1)[:, None], 1)[:, 0]
    for k in np.nonzero(slow)[0]:
        out[k] = _mode_row(rows[k].tolist())[1]
    return np.expand_dims(out.reshape(xm.shape[:-1]), dim)


Primitive("mode_index", "x", _mode_index_kernel,
          shape=lambda x, dim: tuple(1 if i == dim else s for i, s in enumerate(x.shape)),
          dtype="int64", triton=_HOST)


# -- linear algebra ----------------------------------------------------------------------------------

class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a matrix the operation cannot handle (singular, say)."""


def _first_zero_pivot(a):
    """1-based index of the first zero pivot of LU with partial pivoting (torch's message names it)."""
    a = np.array(a, dtype=np.float64)
    n = a.shape[-1]
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:] -= np.outer(a[k + 1:, k] / a[k, k], a[k])
    return n


def _check_square(x, name):
    if x.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are {x.shape[-2]} by "
                           f"{x.shape[-1]} matrices")


def _singular(name, a):
    flat = np.asarray(a).reshape((-1,) + a.shape[-2:])
    for b, m in enumerate(flat):
        if np.linalg.matrix_rank(m) < m.shape[-1] or not np.all(np.isfinite(m)):
            where = f"(Batch element {b}): " if a.ndim > 2 else ""
            return LinAlgError(f"linalg.{name}: {where}The diagonal element {_first_zero_pivot(m)} is zero, the "
                               f"{'inversion' if name == 'inv' else 'solve'} could not be completed because the input "
                               f"matrix is singular.")
    return LinAlgError(f"linalg.{name}: the input matrix is singular.")


def _inv_kernel(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular("inv", a) from None


def _float_matrix(name):
    def rule(args):
        dt = args[0]._dtype
        if not dt.is_floating_point:
            raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got "
                               f"{D.SCALAR_NAME[dt]}")
        return None, dt
    return rule


Primitive("linalg_inv", "x", _inv_kernel, shape=lambda x: tuple(x.shape), dtype=_float_matrix("inv"),
          vjp=lambda g, out, x: (-F.matmul(F.matmul(F.transpose(out, -2, -1), g), F.transpose(out, -2, -1)),),
          saves="out", grad_fn="LinalgInvExBackward0", triton=_HOST)


def _cofactor_kernel(a):
    """The cofactor matrix det(A) inv(A)^T, from an SVD so that it stays finite (and right) for a
    singular A: adj(A) = det(U) det(V) V diag(prod_{j != i} s_j) U^T."""
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    ones = np.ones(s.shape[:-1] + (1,), s.dtype)
    before = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(s[..., 1:], -1)], -1), -1), -1)
    others = before * after
    sign = np.linalg.det(u) * np.linalg.det(vt)
    adj = np.einsum("...ji,...j,...kj->...ik", vt, others, u) * sign[..., None, None] if n else u
    return np.swapaxes(adj, -1, -2).astype(a.dtype, copy=False)


def _cofactor_vjp(g, out, x):
    """C(A) = det(A) A^-T, so <G, dC> = det (<G, A^-T> A^-T - A^-T G^T A^-T) : dA (an invertible A; a
    singular one raises in inv rather than give a wrong second derivative)."""
    b = _inv_t(x)
    d = F.unsqueeze(F.unsqueeze(F.linalg_det(x), -1), -1)
    inner = F.sum(g * b, (-2, -1), keepdim=True)
    return (d * (inner * b - F.matmul(F.matmul(b, F.transpose(g, -2, -1)), b)),)


Primitive("det_cofactor", "x", _cofactor_kernel, shape=lambda x: tuple(x.shape), dtype="same", vjp=_cofactor_vjp,
          saves="x", grad_fn="LinalgDetBackward0", triton=_HOST)
Primitive("linalg_det", "x", lambda a: np.asarray(np.linalg.det(a), dtype=a.dtype),
          shape=lambda x: tuple(x.shape[:-2]), dtype=_float_matrix("det"),
          vjp=lambda g, out, x: (F.unsqueeze(F.unsqueeze(g, -1), -1) * F.det_cofactor(x),), saves="x out",
          grad_fn="LinalgDetBackward0", triton=_HOST)        # (torch's node saves its result too: written, it raises)


def _slogdet_kernel(a):
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign, a.dtype), np.asarray(logabs, a.dtype)


Primitive("linalg_slogdet", "x", _slogdet_kernel,
          shape=lambda x: [(tuple(x.shape[:-2]), None), (tuple(x.shape[:-2]), None)], dtype=_float_matrix("slogdet"),
          multi=True,
          nondiff_outputs=(0,),
          vjp=lambda gs, outs, x: (None,) if gs[1] is None else (F.unsqueeze(F.unsqueeze(gs[1], -1), -1) * _inv_t(x),),
          saves="x", grad_fn="LinalgSlogdetBackward0", triton=_HOST)


def _solve_kernel(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("solve", a) from None


def _solve_vjp(g, out, a, b):
    gb = F.linalg_solve_matrix(F.transpose(a, -2, -1), g)
    ga = -F.matmul(gb, F.transpose(out, -2, -1))
    return ga, gb


Primitive("linalg_solve", "x y", _solve_kernel,
          shape=lambda a, b: tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + (a.shape[-1], b.shape[-1]),
          dtype="promote_float", vjp=_solve_vjp, saves="x out", grad_fn="LinalgSolveExBackward0", triton=_HOST)


def _trisolve_kernel(a, b, upper=False, unitriangular=False):
    """X with A X = B for a triangular A, by substitution (the triangle alone is read; with
    unitriangular its diagonal is taken as ones). No check of the diagonal, as LAPACK's trsm
    that torch calls: a zero on it gives inf or nan."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    A = np.broadcast_to(a, batch + a.shape[-2:])
    B = np.broadcast_to(b, batch + b.shape[-2:])
    n = A.shape[-1]
    x = np.empty(batch + b.shape[-2:], np.result_type(a, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            done = slice(i + 1, n) if upper else slice(0, i)
            s = B[..., i, :] - np.matmul(A[..., i:i + 1, done], x[..., done, :])[..., 0, :]
            x[..., i, :] = s if unitriangular else s / A[..., i, i, None]
    return x


def _trisolve_vjp(g, out, a, b, upper=False, unitriangular=False):
    """torch's: gB = A^-T g (a solve with the transposed triangle), gA = -gB X^T on A's triangle
    (less the diagonal where it is taken as ones)."""
    gb = F.linalg_solve_triangular_matrix(F.transpose(a, -2, -1), g, not upper, unitriangular)
    ga = -F.matmul(gb, F.transpose(out, -2, -1))
    k = 1 if unitriangular else 0
    return (F.triu(ga, k) if upper else F.tril(ga, -k)), gb


Primitive("linalg_solve_triangular", "x y", _trisolve_kernel,
          shape=lambda a, b, **k: tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + tuple(b.shape[-2:]),
          dtype="promote_float", vjp=_trisolve_vjp, saves="x out", grad_fn="LinalgSolveTriangularBackward0",
          triton=_HOST)


def _frexp_kernel(x):
    m, e = np.frexp(x)
    return m.astype(x.dtype, copy=False), e.astype(np.int32, copy=False)


Primitive("frexp", "x", _frexp_kernel,
          shape=lambda x: [(tuple(x.shape), None), (tuple(x.shape), D.int32)], dtype="same", multi=True,
          nondiff_outputs=(1,),
          # torch's: grad / exponent.exp2() (the exponent in the mantissa's dtype)
          vjp=lambda gs, outs, x: (gs[0] / F.exp2(F.convert(outs[1], x.dtype)),), saves="out",
          grad_fn="FrexpBackward0", triton=_HOST)


# -- decompositions ----------------------------------------------------------------------------------

def _lu_kernel(a, check=None):
    """LAPACK's getrf: A = P L U by Gaussian elimination with partial pivoting, the largest |entry|
    of each column below the diagonal (the first of equals) swapped onto it; L (unit lower, m x k)
    and U (upper, k x n) packed into one m x n matrix, and the 1-based row each step swapped with.
    A zero pivot leaves its column unscaled, as getrf's; with `check` (the function's name) it
    raises torch's error then, as linalg.lu_factor does."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    lu = np.array(a, dtype=a.dtype, order="C").reshape((math.prod(batch), m, n))
    piv = np.empty((lu.shape[0], k), np.int32)
    rows = np.arange(lu.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
            piv[:, j] = p + 1
            top = lu[rows, j, :].copy()
            lu[rows, j, :] = lu[rows, p, :]
            lu[rows, p, :] = top
            d = lu[:, j, j]
            col = lu[:, j + 1:, j]
            lu[:, j + 1:, j] = np.where((d != 0)[:, None], col / np.where(d != 0, d, 1)[:, None], col)
            if j + 1 < n:
                lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    if check is not None:
        zero = np.diagonal(lu, 0, -2, -1)[:, :k] == 0
        if zero.any():
            b = int(np.flatnonzero(zero.any(-1))[0])
            i = int(zero[b].argmax()) + 1
            where = f"(Batch element {b}): " if batch else ""
            raise RuntimeError(f"{check}: {where}U[{i},{i}] is zero and using it on lu_solve would result in a division "
                               f"by zero. If you still want to perform the factorization, consider calling "
                               f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return lu.reshape(batch + (m, n)), piv.reshape(batch + (k,))


def _lu_unpacked(lu, piv, m, n):
    """(P, L, U) of a packed factorization, in tracegrad ops (differentiable in lu)."""
    k = min(m, n)
    eye = F.diag_embed(F.ones_like(F.narrow(F.diagonal(lu, 0, -2, -1), -1, 0, k)))
    lower = F.narrow(lu, -1, 0, k) if n > k else lu
    upper = F.narrow(lu, -2, 0, k) if m > k else lu
    L = F.tril(lower, -1) + (F.cat([eye, F.zeros_like(F.narrow(lower, -2, k, m - k))], -2) if m > k else eye)
    return F.lu_permutation_matrix(piv, m, lu.dtype), L, F.triu(upper)


def _lu_backward(gl, gu, P, L, U, m, n):
    """torch's linalg_lu_backward: the gradient of A = P L U from those of L (strictly lower) and U
    (upper), by triangular solves; exact where the pivots do not change nearby."""
    tr = lambda t: F.transpose(t, -2, -1)  # noqa: E731
    solve = F.linalg_solve_triangular_matrix
    if m == n:
        phi = F.tril(F.matmul(tr(L), gl), -1) + F.triu(F.matmul(gu, tr(U)))
        ga = tr(solve(U, tr(phi), True))                       # phi U^-T
        ga = solve(tr(L), ga, True, True)                      # L^-T (...)
    elif m < n:
        u1 = F.narrow(U, -1, 0, m)
        phi = F.tril(F.matmul(tr(L), gl) - F.matmul(F.triu(gu), tr(U)), -1)
        ga = tr(solve(u1, tr(phi), True))                      # phi U1^-T
        ga = F.cat([ga + F.narrow(gu, -1, 0, m), F.narrow(gu, -1, m, n - m)], -1)
        ga = solve(tr(L), ga, True, True)
    else:
        l1 = F.narrow(L, -2, 0, n)
        phi = F.triu(F.matmul(gu, tr(U)) - F.matmul(tr(L), F.tril(gl, -1)))
        ga = solve(tr(l1), phi, True, True)                    # L1^-T phi
        ga = F.cat([ga + F.narrow(gl, -2, 0, n), F.narrow(gl, -2, n, m - n)], -2)
        ga = tr(solve(U, tr(ga), True))                        # (...) U^-T
    return F.matmul(P, ga)


def _lu_factor_vjp(gs, outs, x, check=None):
    m, n = x.shape[-2], x.shape[-1]
    k = min(m, n)
    lu, piv = outs
    P, L, U = _lu_unpacked(lu, piv, m, n)
    g = gs[0]
    gl = F.tril(F.narrow(g, -1, 0, k) if n > k else g, -1)
    gu = F.triu(F.narrow(g, -2, 0, k) if m > k else g)
    return (_lu_backward(gl, gu, P, L, U, m, n),)


Primitive("linalg_lu_factor", "x", _lu_kernel,
          shape=lambda x, check=None: [(tuple(x.shape), None), (tuple(x.shape[:-2]) + (min(x.shape[-2:]),), D.int32)],
          dtype=_float_matrix("lu_factor"), multi=True, nondiff_outputs=(1,), vjp=_lu_factor_vjp, saves="x out",
          grad_fn="LinalgLuFactorExBackward0", triton=_HOST)


def _lu_permutation_kernel(piv, m, dtype):
    """P with A = P L U from getrf's row swaps: row i of L U is row perm[i] of A, P[perm[i], i] = 1."""
    batch = piv.shape[:-1]
    flat = piv.reshape((math.prod(batch), piv.shape[-1])).astype(np.int64) - 1
    perm = np.broadcast_to(np.arange(m), (flat.shape[0], m)).copy()
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        top = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = top
    out = np.zeros((flat.shape[0], m, m), dtype.np)
    out[rows[:, None], perm, np.arange(m)[None, :]] = 1
    return out.reshape(batch + (m, m))


Primitive("lu_permutation_matrix", "piv", _lu_permutation_kernel,
          shape=lambda piv, m, dtype: tuple(piv.shape[:-1]) + (m, m), dtype=lambda args: (None, None),
          grad_fn="LuUnpackBackward0", triton=_HOST)


def _cholesky_kernel(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        flat = np.asarray(a).reshape((-1,) + a.shape[-2:])
        for b, m in enumerate(flat):
            for k in range(1, m.shape[-1] + 1):
                if not np.all(np.isfinite(m[:k, :k])) or np.linalg.eigvalsh(m[:k, :k]).min() <= 0:
                    where = f"(Batch element {b}): " if a.ndim > 2 else ""
                    raise LinAlgError(f"linalg.cholesky: {where}The factorization could not be completed because "
                                      f"the input is not positive-definite (the leading minor of order {k} is not "
                                      f"positive-definite).") from None
        raise LinAlgError("linalg.cholesky: The factorization could not be completed because the input is not "
                          "positive-definite.") from None


def _phi(x):
    """The lower triangle with its diagonal halved."""
    return F.tril(x) - 0.5 * F.tril(F.triu(x))


def _cholesky_vjp(g, out, x):
    """A = L L^T: gA = sym(L^-T phi(L^T gL) L^-1) (Murray 2016), symmetric as torch's."""
    inv = F.linalg_inv(out)
    s = F.matmul(F.matmul(F.transpose(inv, -2, -1), _phi(F.matmul(F.transpose(out, -2, -1), g))), inv)
    return (0.5 * (s + F.transpose(s, -2, -1)),)


Primitive("linalg_cholesky", "x", _cholesky_kernel, shape=lambda x: tuple(x.shape), dtype=_float_matrix("cholesky"),
          vjp=_cholesky_vjp, saves="out", grad_fn="LinalgCholeskyExBackward0", triton=_HOST)


def _eigh_kernel(a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return w.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


def _eigh_vjp(gs, outs, x, UPLO="L"):
    """A = V diag(L) V^T: gA = V (diag(gL) + skew(V^T gV) / E) V^T with E_ij = L_j - L_i off the
    diagonal, as torch's linalg_eigh backward (exact for distinct eigenvalues)."""
    gl, gv = gs
    w, v = outs
    vt = F.transpose(v, -2, -1)
    inner = None if gl is None else F.diag_embed(gl)
    if gv is not None:
        vg = F.matmul(vt, gv)
        skew = 0.5 * (vg - F.transpose(vg, -2, -1))
        e = F.unsqueeze(w, -2) - F.unsqueeze(w, -1)
        off = F.diag_embed(F.ones_like(w)) == 0
        term = F.where(off, skew / F.where(off, e, F.ones_like(e)), F.zeros_like(skew))
        inner = term if inner is None else inner + term
    return (F.matmul(F.matmul(v, inner), vt),)


def _eigh_dtype(args):
    dt = args[0]._dtype
    if not dt.is_floating_point:
        raise NotImplementedError(f'"linalg_eigh_cpu" not implemented for \'{D.SCALAR_NAME[dt]}\'')
    return None, dt


Primitive("linalg_eigh", "x", _eigh_kernel,
          shape=lambda x, UPLO="L": [(tuple(x.shape[:-1]), None), (tuple(x.shape), None)], dtype=_eigh_dtype,
          multi=True, vjp=_eigh_vjp, saves="out", grad_fn="LinalgEighBackward0", triton=_HOST)


def _svd_kernel(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u.astype(a.dtype, copy=False), s.astype(a.dtype, copy=False), vh.astype(a.dtype, copy=False)


def _svd_vjp(gs, outs, x):
    """Reduced SVD A = U diag(S) Vh, torch's svd_backward for real matrices: with skew(X) = X - X^T
    and E_ij = S_j^2 - S_i^2, inner = (skew(U^T gU) S_j + S_i skew(Vh gV)) / E + diag(gS), and the
    part of gU (gV) outside U's (V's) span where A is tall (wide). Exact for distinct nonzero
    singular values, which is where the singular vectors are differentiable at all."""
    gu, g_s, gvh = gs
    u, sv, vh = outs
    m, n = x.shape[-2], x.shape[-1]
    k = min(m, n)
    ut, v, gv = F.transpose(u, -2, -1), F.transpose(vh, -2, -1), F.transpose(gvh, -2, -1)
    uhgu = F.matmul(ut, gu)
    vhgv = F.matmul(vh, gv)
    uhgu = uhgu - F.transpose(uhgu, -2, -1)
    vhgv = vhgv - F.transpose(vhgv, -2, -1)
    s2 = sv * sv
    e = F.unsqueeze(s2, -2) - F.unsqueeze(s2, -1)
    off = F.diag_embed(F.ones_like(sv)) == 0
    e = F.where(off, e, F.ones_like(e))
    inner = (uhgu * F.unsqueeze(sv, -2) + F.unsqueeze(sv, -1) * vhgv) / e
    inner = F.where(off, inner, F.zeros_like(inner)) + F.diag_embed(g_s)
    if m > k:
        gusinv = gu / F.unsqueeze(sv, -2)
        ga = F.matmul(u, inner) + gusinv - F.matmul(u, F.matmul(ut, gusinv))
        return (F.matmul(ga, vh),)
    if n > k:
        sinvgvh = gvh / F.unsqueeze(sv, -1)
        ga = F.matmul(inner, vh) + sinvgvh - F.matmul(F.matmul(sinvgvh, v), vh)
        return (F.matmul(u, ga),)
    return (F.matmul(u, F.matmul(inner, vh)),)


Primitive("linalg_svd", "x", _svd_kernel,
          shape=lambda x: [(tuple(x.shape[:-1]) + (min(x.shape[-2:]),), None),
                           (tuple(x.shape[:-2]) + (min(x.shape[-2:]),), None),
                           (tuple(x.shape[:-2]) + (min(x.shape[-2:]), x.shape[-1]), None)],
          dtype=_float_matrix("svd"), multi=True, vjp=_svd_vjp, saves="out", grad_fn="LinalgSvdBackward0",
          triton=_HOST)


def _qr_kernel(a):
    q, r = np.linalg.qr(a, mode="reduced")
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


def _qr_vjp(gs, outs, x):
    """Reduced QR of a tall (m >= n) A: M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^-T, copyltu
    mirroring M's lower triangle (Liao et al. 2019)."""
    gq, gr = gs
    q, r = outs
    if x.shape[-2] < x.shape[-1]:
        raise NotImplementedError("linalg.qr: the derivative for a wide matrix (m < n) is not implemented yet")
    gq = F.zeros_like(q) if gq is None else gq
    gr = F.zeros_like(r) if gr is None else gr
    m = F.matmul(r, F.transpose(gr, -2, -1)) - F.matmul(F.transpose(gq, -2, -1), q)
    lower = F.tril(m, -1)
    copyltu = lower + F.transpose(lower, -2, -1) + F.tril(F.triu(m))
    b = gq + F.matmul(q, copyltu)
    return (F.transpose(F.linalg_solve_matrix(r, F.transpose(b, -2, -1)), -2, -1),)


Primitive("linalg_qr", "x", _qr_kernel,
          shape=lambda x: [(tuple(x.shape[:-1]) + (min(x.shape[-2:]),), None),
                           (tuple(x.shape[:-2]) + (min(x.shape[-2:]), x.shape[-1]), None)],
          dtype=_float_matrix("qr"), multi=True, vjp=_qr_vjp, saves="out", grad_fn="LinalgQrBackward0",
          triton=_HOST)


def _pinv_kernel(a, rtol):
    return np.linalg.pinv(a, rcond=rtol).astype(a.dtype, copy=False) if rtol is not None else \
        np.linalg.pinv(a).astype(a.dtype, copy=False)


def _pinv_vjp(g, out, x, rtol):
    """torch's pinv_backward (Golub and Pereyra): exact where the rank does not change nearby."""
    m, n = x.shape[-2], x.shape[-1]
    ph = F.transpose(out, -2, -1)
    gh = F.transpose(g, -2, -1)
    if m <= n:
        k = F.matmul(gh, out)
        kph = F.matmul(k, ph)
        return (-F.transpose(F.matmul(out, k), -2, -1) + kph - F.matmul(F.matmul(x, out), kph)
                + F.matmul(F.matmul(ph, out), gh - F.matmul(k, x)),)
    k = F.matmul(out, gh)
    phk = F.matmul(ph, k)
    return (-F.transpose(F.matmul(k, out), -2, -1) + F.matmul(F.matmul(gh - F.matmul(x, k), out), ph) + phk
            - F.matmul(F.matmul(phk, out), x),)


Primitive("linalg_pinv", "x", lambda a, rtol=None: _pinv_kernel(a, rtol),
          shape=lambda x, rtol=None: tuple(x.shape[:-2]) + (x.shape[-1], x.shape[-2]), dtype=_float_matrix("pinv"),
          vjp=_pinv_vjp, saves="x out", grad_fn="LinalgPinvBackward0", triton=_HOST)


def _diagonal_geometry(shape, offset, d1, d2):
    """(shape, strides, start) of the diagonal over a contiguous layout of `shape`: the other
    dimensions in order, then the diagonal."""
    nd = len(shape)
    strides = [1] * nd
    for i in range(nd - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    n = max(min(shape[d1] - max(-offset, 0), shape[d2] - max(offset, 0)), 0)
    rest = [i for i in range(nd) if i not in (d1, d2)]
    start = max(-offset, 0) * strides[d1] + max(offset, 0) * strides[d2] if n > 0 else 0
    return (tuple(shape[i] for i in rest) + (n,), tuple(strides[i] for i in rest) + (strides[d1] + strides[d2],),
            start)


def _diagonal_kernel(x, offset, dim1, dim2):
    # a writeable view of x's own memory (numpy's np.diagonal is read-only), for any strides of x
    d = np.diagonal(x, offset, dim1, dim2)
    if d.size == 0:
        return d.copy()
    first = [slice(None)] * x.ndim
    first[dim1] = slice(max(-offset, 0), None)
    first[dim2] = slice(max(offset, 0), None)
    return np.lib.stride_tricks.as_strided(x[tuple(first)], d.shape, d.strides)


def _diagonal_vjp(g, out, x, offset, dim1, dim2):
    shape, strides, start = _diagonal_geometry(tuple(x.shape), offset, dim1, dim2)
    return (F.as_strided_scatter(F.full(tuple(x.shape), 0, dtype=g.dtype), g, shape, strides, start),)


Primitive("diagonal", "x", _diagonal_kernel,
          shape=lambda x, offset, dim1, dim2: _diagonal_geometry(tuple(x.shape), offset, dim1, dim2)[0],
          dtype="same", vjp=_diagonal_vjp, grad_fn="DiagonalBackward0", view=True,
          triton=T.Glue(lambda torch, dev, x, offset, dim1, dim2: x.diagonal(offset, dim1, dim2), view=True))


def _unfold_shape(shape, dim, size, step):
    out = list(shape) + [size]
    out[dim] = (shape[dim] - size) // step + 1
    return tuple(out)


def _unfold_kernel(x, dim, size, step):
    # a writeable view of x's own memory, for any strides of x: windows `step` apart along dim
    # (read-only where windows share elements: an in-place op through it raises, as torch's
    # does on an expanded tensor, where torch's own result would depend on the write order)
    st = x.strides
    shape = _unfold_shape(x.shape, dim, size, step)
    return np.lib.stride_tricks.as_strided(x, shape, st[:dim] + (st[dim] * step,) + st[dim + 1:] + (st[dim],),
                                           writeable=x.flags.writeable and (step >= size or shape[dim] < 2))


def _unfold_vjp(g, out, x, dim, size, step):
    # overlapping windows (step < size) add up where they share an element. (The positions are
    # numbers: a dynamic size is pinned to this call's by int(), a guard; np.arange of the symbolic
    # size made an object array, and the backward raised TypeError.)
    n = int(x.shape[dim])
    nw = (n - size) // step + 1
    pos = (np.arange(nw)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    g2 = F.reshape(F.movedim(g, -1, dim + 1), tuple(x.shape[:dim]) + (nw * size,) + tuple(x.shape[dim + 1:]))
    return (F.index_add(F.full(tuple(x.shape), 0, dtype=g.dtype), dim, F.tensor(pos), g2),)


Primitive("unfold", "x", _unfold_kernel,
          shape=lambda x, dim, size, step: _unfold_shape(tuple(x.shape), dim, size, step),
          dtype="same", vjp=_unfold_vjp, grad_fn="UnfoldBackward0", view=True,
          triton=T.Glue(lambda torch, dev, x, dim, size, step: x.unfold(dim, size, step), view=True))

__all__ = ["LinAlgError", "PRIMITIVES"]

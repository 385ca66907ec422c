"""The primitive for torch.special's orthogonal polynomials (chebyshev_polynomial_t/u/v/w, their
shifted forms, hermite_polynomial_h/he, laguerre_polynomial_l, legendre_polynomial_p), registered
into the op table of primitives.py: one primitive, `special_polynomial`, its `kind` a parameter.

The kernel is torch's CPU kernel (aten/src/ATen/native/Math.h) over whole arrays: the degree n is
converted to the compute dtype and then to an integer as C converts it (toward zero; NaN, +-inf and
values past int64's range are int64's minimum, a negative degree: 0; Hermite's H takes NaN and inf as
-1), the three-term recurrence runs in the compute dtype (float64, or float32 for float32 and for
integer and bool inputs; torch has no float16 or bfloat16 kernel), with torch's special cases at
x = +-1 (the shifted ones' x = 0 and 1), its closed trigonometric forms for large n inside (-1, 1),
and its NaN past Hermite's degree limit (128 in float32, 512 in float64).
torch has no derivative for them: their results do not require grad. No Triton lowering: on CUDA
tensors they run their numpy kernel on a host copy.
"""
import numpy as np

from . import lowering as T
from .primitives import binary
from .special_primitives import compute_dtype, _fma, _libm

_HOST = T.Refuse("runs its numpy kernel on the host")

KINDS = {"chebyshev_polynomial_t": "t", "chebyshev_polynomial_u": "u", "chebyshev_polynomial_v": "v",
         "chebyshev_polynomial_w": "w", "shifted_chebyshev_polynomial_t": "st",
         "shifted_chebyshev_polynomial_u": "su", "shifted_chebyshev_polynomial_v": "sv",
         "shifted_chebyshev_polynomial_w": "sw", "hermite_polynomial_h": "h", "hermite_polynomial_he": "he",
         "laguerre_polynomial_l": "l", "legendre_polynomial_p": "p"}
_HERMITE_LIMIT = {np.float32: 128, np.float64: 512}
_INT64_MIN = np.iinfo(np.int64).min


def _degree(n, t, hermite):
    """static_cast<int64_t>(n) of n in dtype t, as x86's conversion: toward zero, NaN and values
    out of range int64's minimum (Hermite's H: NaN and +-inf -1)."""
    nf = n.astype(np.float64)
    ok = np.abs(nf) < 2.0 ** 63
    out = np.where(ok, np.trunc(np.where(ok, nf, 0.0)), 0.0).astype(np.int64)
    out[~ok] = _INT64_MIN
    if hermite:
        out[np.isnan(nf) | np.isinf(nf)] = -1
    return out


def _recur(out, todo, n, q0, step):
    """Runs r = step(k, p, q, positions) for k = 2..n over the elements in `todo`, starting from
    p = 1, q = q0 (elements whose q turns NaN stop, as torch's loop), and writes the last r into out.
    (One step per degree, as torch's: a degree of millions takes as many numpy passes.)"""
    idx = np.nonzero(todo)[0]
    nn = n[idx]
    q = q0[idx] if q0.shape else np.full(idx.shape, q0)
    p = np.ones_like(q)
    k = 2
    while idx.size:
        go = (k <= nn) & ~np.isnan(q)
        done = ~go
        if done.any():
            out[idx[done]] = q[done]
            idx, nn, p, q = idx[go], nn[go], p[go], q[go]
            if not idx.size:
                break
        r = step(k, p, q, idx)
        p, q = q, r
        k += 1
    return out


def _closed_form(base, shifted, y, nt, n1, twon1, sign, t):
    """torch's trigonometric forms of T, U, V, W for large n inside (-1, 1), with its fallbacks where
    their denominators are 0 or 1, of the elements that take them."""
    one = t(1)
    a = _libm(np.arccos, y, t)
    if base == "t":
        return _libm(np.cos, nt * a, t)
    if base == "u":
        s = _libm(np.sin, a, t)
        return np.where(s != 0, _libm(np.sin, n1 * a, t) / s, n1 * _libm(np.cos, n1 * a, t) / y)
    h = a / t(2)
    if base == "v":
        return np.where(_libm(np.sin, h, t) != one, _libm(np.cos, (nt + t(0.5)) * a, t) / _libm(np.cos, h, t),
                        sign * twon1)
    edge = sign if shifted else np.where(y > 0, twon1, sign)
    return np.where(_libm(np.cos, h, t) != one, _libm(np.sin, (nt + t(0.5)) * a, t) / _libm(np.sin, h, t), edge)


def _chebyshev(kind, x, n, t):
    """Chebyshev's T, U, V, W of y = x (kind "t".."w") or y = 2x - 1 (shifted, "st".."sw")."""
    shifted = kind[0] == "s"
    base = kind[-1]
    one = t(1)
    y = x + x - one if shifted else x
    out = np.empty_like(y)
    nt = n.astype(t)
    sign = np.where(n % 2 == 0, one, -one)
    with np.errstate(all="ignore"):
        pos = (x == one)
        neg = (x == 0) if shifted else (x == -one)
        twon1 = (n + n + 1).astype(t)
        n1 = (n + 1).astype(t)
        at_pos = {"t": one, "u": n1, "v": one, "w": twon1}[base]
        at_neg = {"t": sign, "u": sign * n1, "v": sign * twon1, "w": sign}[base]
        limit = {"t": 6, "u": 8, "v": 8, "w": 8}[base] if not shifted else (4 if base == "w" else 6)
        trig = (n > limit) & (np.abs(y) < one) & ~pos & ~neg
        closed = _closed_form(base, shifted, y[trig], nt[trig], n1[trig], twon1[trig], sign[trig], t)
        q0 = {"t": y, "u": y + y, "v": y + y - one, "w": y + y + one}[base]
        out[...] = np.where(n == 0, one, q0)
        out = np.where(pos, at_pos, np.where(neg, at_neg, out))
        out[trig] = closed
        y2 = y + y
        todo = (n >= 2) & ~trig & ~pos & ~neg
        if todo.any():
            out = _recur(out, todo, n, q0, lambda k, p, q, i: _fma(y2[i], q, -p, t))
    return np.where(n < 0, t(0), out)


def _polynomial(x, n, kind):
    t = compute_dtype(x, n)
    xa, na = np.broadcast_arrays(np.asarray(x), np.asarray(n))
    x = np.ascontiguousarray(xa.astype(t)).reshape(-1)
    nd = _degree(np.ascontiguousarray(na.astype(t)).reshape(-1), t, kind == "h")
    one = t(1)
    with np.errstate(all="ignore"):
        if kind in ("h", "he"):
            q0 = x + x if kind == "h" else x
            out = np.where(nd == 0, one, q0)
            out[nd > _HERMITE_LIMIT[t]] = np.nan
            todo = (nd >= 2) & (nd <= _HERMITE_LIMIT[t])
            if todo.any():
                if kind == "h":
                    # torch's loop: k = 2, 4, .. < 2n, r = 2x q - k p
                    step = lambda k, p, q, i: _fma(x[i] + x[i], q, -(t(2 * k - 2) * p), t)  # noqa: E731
                else:
                    step = lambda k, p, q, i: _fma(x[i], q, -(t(k - 1) * p), t)  # noqa: E731
                out = _recur(out, todo, nd, q0, step)
        elif kind == "l":
            q0 = one - x
            out = np.where((nd == 0) | (x == 0), one, q0)
            todo = (nd >= 2) & (x != 0)
            if todo.any():
                step = lambda k, p, q, i: (_fma(t(2 * k - 2) + (one - x[i]), q, -(t(k - 1) * p), t)  # noqa: E731
                                           / t(k))
                out = _recur(out, todo, nd, q0, step)
        elif kind == "p":
            pm = np.abs(x) == one
            at_pm = np.where((x > 0) | (nd % 2 == 0), one, -one)
            out = np.where(pm, at_pm, np.where(nd == 0, one, x))
            todo = (nd >= 2) & ~pm
            if todo.any():
                step = lambda k, p, q, i: (_fma(t(2 * k - 1) * x[i], q, -(t(k - 1) * p), t)  # noqa: E731
                                           / t(k))
                out = _recur(out, todo, nd, x, step)
        else:
            out = _chebyshev(kind, x, nd, t)
    out = np.where(nd < 0, t(0), out)
    return out.reshape(xa.shape)


binary("special_polynomial", _polynomial, None, "", dtype="promote_float", triton=_HOST)

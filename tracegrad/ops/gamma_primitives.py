"""Primitives for the gamma family and the inverse error function (torch.lgamma, digamma,
polygamma, erfinv), registered into the op table of primitives.py.

The kernels are numpy over whole arrays, in float64, rounded once to the input's dtype (a
float16 result through float32, as torch computes a Half op in float): integer and bool inputs
reach them as the default float dtype (the "float" dtype rule). Where torch's own kernel gives
a value that is not the function's (trigamma's reflection computed in the input's precision,
which at a negative integer gives a large finite number and not the pole; polygamma(n >= 2, inf)
is NaN), the kernel gives torch's value: each such place says so.
Derivatives: lgamma' = digamma, digamma' = polygamma(1, .), polygamma(n)' = polygamma(n + 1),
erfinv' = sqrt(pi) / 2 exp(erfinv(x)^2), each in tracegrad's ops. No Triton lowering: on CUDA
tensors they run their numpy kernel on a host copy.
"""
import math
from fractions import Fraction

import numpy as np

from . import lowering as T
from .primitives import F, unary, _erf, _erfc

_HOST = T.Refuse("runs its numpy kernel on the host")

_EULER = 0.57721566490153286061
_HALF_LOG_2PI = 0.91893853320467274178
_LOG_PI = 1.14472988584940017414
# B_2k for k = 1..12
_BERNOULLI = (Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
              Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
              Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730))


def _zeta_minus_one(s):
    """zeta(s) - 1 for an integer s >= 2 (import time only): the first terms summed exactly
    (fsum), the rest by Euler-Maclaurin from 16 on."""
    n0 = 16
    terms = [Fraction(1, n ** s) for n in range(2, n0)]
    tail = [Fraction(1, (s - 1) * n0 ** (s - 1)), Fraction(1, 2 * n0 ** s)]
    rising = Fraction(s)
    for k, b in enumerate(_BERNOULLI[:8], start=1):
        tail.append(b / math.factorial(2 * k) * rising / Fraction(n0) ** (s + 2 * k - 1))
        rising *= (s + 2 * k - 1) * (s + 2 * k)
    return float(sum(terms + tail, Fraction(0)))


_ZM1 = {s: _zeta_minus_one(s) for s in range(2, 61)}
# lgamma(1 + z) = -euler z + sum_k (-1)^k zeta(k) / k z^k, |z| <= 1/2 (55 terms: 2^-55 / 55 < 2^-61)
_LG1 = tuple((-1) ** k * (1.0 + _ZM1[k]) / k for k in range(2, 58))
# lgamma(2 + z) = (1 - euler) z + sum_k (-1)^k (zeta(k) - 1) / k z^k, |z| <= 1/2 (terms fall as (z/2)^k)
_LG2 = tuple((-1) ** k * _ZM1[k] / k for k in range(2, 40))
# Stirling's series for lgamma: B_2k / (2k (2k - 1)) x^(1 - 2k), k = 1..12 (x >= 8: under 1e-19)
_STIRLING = tuple(float(b / (2 * k * (2 * k - 1))) for k, b in enumerate(_BERNOULLI, start=1))


def _horner(z, coefs):
    p = np.full_like(z, coefs[-1])
    for c in coefs[-2::-1]:
        p = p * z + c
    return p


def _to_dtype(r, x):
    """A float64 result in the input's dtype; float16 through float32 as torch's opmath does."""
    if x.dtype == np.float16:
        return r.astype(np.float32).astype(np.float16)
    return r.astype(x.dtype, copy=False)


def _opmath(x):
    """The dtype torch's kernel computes in: float64 for float64, float32 for the rest."""
    return np.float64 if x.dtype == np.float64 else np.float32


def _abs_sinpi(x):
    """|sin(pi x)| for finite x, with x reduced exactly to [0, 1/2] first (pi x loses x's low
    bits once |x| > 1)."""
    r = np.abs(x - 2.0 * np.round(0.5 * x))          # exact: in [0, 1]
    return np.sin(np.pi * np.minimum(r, 1.0 - r))


# -- lgamma -----------------------------------------------------------------------------------------

def _lgamma_pos(x):
    """lgamma of x > 0 (finite), float64: series around 1 and 2, the recurrence down to
    [1.5, 2.5) below 8, Stirling's series from 8 on."""
    out = np.empty_like(x)
    tiny = x < 0.5                      # lgamma(x) = lgamma(1 + x) - log(x)
    near1 = (x >= 0.5) & (x < 1.5)
    near2 = (x >= 1.5) & (x < 2.5)
    mid = (x >= 2.5) & (x < 8.0)
    big = x >= 8.0
    if tiny.any():
        z = x[tiny]
        out[tiny] = z * (-_EULER + z * _horner(z, _LG1)) - np.log(z)
    if near1.any():
        z = x[near1] - 1.0              # exact (Sterbenz)
        # (+ 0.0: lgamma(1) is +0.0, as torch's; z * (negative) gave -0.0)
        out[near1] = z * (-_EULER + z * _horner(z, _LG1)) + 0.0
    if near2.any():
        z = x[near2] - 2.0
        out[near2] = z * ((1.0 - _EULER) + z * _horner(z, _LG2))
    if mid.any():
        xm = x[mid]
        m = np.floor(xm - 1.5)          # 1..6 steps down: y = x - m in [1.5, 2.5)
        prod = np.ones_like(xm)
        for k in range(1, 7):
            prod = np.where(k <= m, prod * (xm - k), prod)   # x - k exact: a multiple of x's ulp below x
        z = (xm - m) - 2.0
        out[mid] = z * ((1.0 - _EULER) + z * _horner(z, _LG2)) + np.log(prod)
    if big.any():
        xb = x[big]
        w = 1.0 / xb
        series = w * _horner(w * w, _STIRLING)
        with np.errstate(over="ignore", invalid="ignore"):
            out[big] = ((xb - 0.5) * np.log(xb) - xb) + (_HALF_LOG_2PI + series)
    return out


def _lgamma(x):
    """log|Gamma(x)| as torch.lgamma: +inf at 0, at the negative integers and at both infinities."""
    xd = np.asarray(x, dtype=np.float64)
    out = np.full(xd.shape, np.inf)
    pos = (xd > 0) & (xd < np.inf)
    if pos.any():
        out[pos] = _lgamma_pos(xd[pos])
    small = (xd < 0) & (xd > -0.5)      # lgamma(x) = lgamma(1 + x) - log|x|, 1 + x never rounded
    if small.any():
        z = xd[small]
        out[small] = z * (-_EULER + z * _horner(z, _LG1)) - np.log(-z)
    refl = (xd <= -0.5) & (xd > -np.inf) & (xd != np.floor(xd))
    if refl.any():
        # reflection: |Gamma(x) Gamma(1 - x)| = pi / |sin(pi x)|, and Gamma(1 - x) = -x Gamma(-x)
        z = xd[refl]
        out[refl] = np.log(np.pi / (_abs_sinpi(z) * -z)) - _lgamma_pos(-z)
    nan = np.isnan(xd)
    out[nan] = xd[nan]
    return _to_dtype(out, np.asarray(x))


# -- digamma ----------------------------------------------------------------------------------------

_PSI_10 = 2.25175258906672110764
# Cephes' asymptotic series: psi(x) = log x - 1/(2x) - z P(z), z = 1/x^2 (highest power first)
_PSI_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
          -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
          8.33333333333333333333E-2)


def _digamma_pos(x):
    """psi(x) for x > 0 (inf included), as torch's calc_digamma: the recurrence up to 10, then
    the asymptotic series."""
    res = np.zeros_like(x)
    for _ in range(10):
        m = x < 10.0
        if not m.any():
            break
        with np.errstate(divide="ignore"):
            res = np.where(m, res - 1.0 / x, res)
        x = np.where(m, x + 1.0, x)
    z = 1.0 / (x * x)
    y = np.where(x < 1e17, z * _horner(z, _PSI_A[::-1]), 0.0)
    with np.errstate(invalid="ignore"):
        tail = np.where(x == 10.0, _PSI_10, np.log(x) - 0.5 / x - y)
    return res + tail


def _digamma64(xd):
    out = np.empty_like(xd)
    pos = xd > 0
    if pos.any():
        out[pos] = _digamma_pos(xd[pos])
    neg = xd < 0
    negint = neg & (xd == np.trunc(xd))  # -inf too: NaN, as torch
    out[negint] = np.nan
    refl = neg & ~negint
    if refl.any():
        # psi(x) = psi(1 - x) - pi / tan(pi x), tan taken of x's fractional part (torch's modf)
        z = xd[refl]
        out[refl] = _digamma_pos(1.0 - z) - np.pi / np.tan(np.pi * np.fmod(z, 1.0))
    zero = xd == 0
    out[zero] = np.copysign(np.inf, -xd[zero])       # torch: -inf at +0, +inf at -0
    nan = np.isnan(xd)
    out[nan] = xd[nan]
    return out


def _digamma(x):
    """psi(x) as torch.digamma: -inf at +0, +inf at -0, NaN at the negative integers and -inf."""
    return _to_dtype(_digamma64(np.asarray(x, dtype=np.float64)), np.asarray(x))


# -- polygamma ----------------------------------------------------------------------------------------

def _hurwitz_zeta(s, q):
    """zeta(s, q) = sum_k (q + k)^-s for an integer s >= 2 and finite q (not 0 or a negative integer),
    float64: the first terms summed until w = q + k >= 10 + s / 3, then Euler-Maclaurin from w with 12
    Bernoulli terms (successive terms fall by (s + 2k)^2 / (2 pi w)^2, under 0.48^2 from there)."""
    w = q
    acc = np.zeros_like(q)
    top = 10.0 + s / 3.0
    with np.errstate(over="ignore", divide="ignore"):
        while True:
            m = w < top
            if not m.any():
                break
            acc = np.where(m, acc + w ** -s, acc)
            w = np.where(m, w + 1.0, w)
    # the tail from w on
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ws = w ** -s
        tail = w ** (1 - s) / (s - 1) + 0.5 * ws          # (w w^-s underflowed to 0 for w = 1e300)
        t = ws / w * s
        for k, b in enumerate(_BERNOULLI, start=1):
            tail = tail + float(b / math.factorial(2 * k)) * t
            t = t * ((s + 2 * k - 1) * (s + 2 * k)) / (w * w)
    return acc + tail


def _cot_poly(n):
    """Coefficients of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)) (P_0(c) = c,
    P_{k+1} = -(1 + c^2) P_k'), lowest power first, as floats (each P_n's nonzero coefficients have
    one sign: past float64's range they are inf, never NaN)."""
    p = [0.0, 1.0]
    for _ in range(n):
        d = [i * p[i] for i in range(1, len(p))] + [0.0, 0.0]
        p = [-(d[i] + (d[i - 2] if i >= 2 else 0.0)) for i in range(len(d))]
    return p


def _cot_pi(x):
    """cot(pi x) for finite non-integer x, x reduced exactly to [-1/2, 1/2] first."""
    r = x - np.round(x)
    a = np.abs(r)
    with np.errstate(divide="ignore"):
        return np.where(a <= 0.25, 1.0 / np.tan(np.pi * r), np.copysign(np.tan(np.pi * (0.5 - a)), r))


def _polygamma_pos(n, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for x > 0 finite, n >= 1, float64."""
    fact = float(math.factorial(n)) if n < 171 else math.inf
    z = _hurwitz_zeta(n + 1, x)
    with np.errstate(invalid="ignore", over="ignore"):
        return (1.0 if n % 2 else -1.0) * fact * z


def _trigamma(x):
    """psi'(x) as torch's calc_trigamma: for x < 1/2 the reflection pi^2 / sin(pi x)^2 - psi'(1 - x)
    with sin(pi x), pi^2 / sin^2 and 1 - x taken in the precision torch's kernel computes in (float32
    for float32, float16 and bfloat16), so that a negative integer gives torch's large finite value
    (float32: 1.29e15 at -1) and the poles at +-0 inf; psi'(y) for y >= 1/2 in float64 (torch's
    own series is 3e-10 off in float64: psi'(1/2) = pi^2/2 + 1.5e-9)."""
    xd = np.asarray(x, dtype=np.float64)
    t = _opmath(np.asarray(x))
    out = np.empty_like(xd)
    refl = xd < 0.5
    if refl.any():
        xt = xd[refl].astype(t)
        pi = t(np.pi)
        with np.errstate(all="ignore"):
            s = np.sin(pi * xt)
            head = ((pi * pi) / (s * s)).astype(np.float64)
            y = (t(1) - xt).astype(np.float64)
            fin = y < np.inf
            tail = np.zeros_like(y)
            tail[fin] = _polygamma_pos(1, y[fin])
            out[refl] = head - tail
    rest = xd >= 0.5
    if rest.any():
        xr = xd[rest]
        fin = xr < np.inf
        out[rest] = 0.0                  # psi'(inf) = 0
        out[rest & (xd < np.inf)] = _polygamma_pos(1, xr[fin])
    nan = np.isnan(xd)
    out[nan] = xd[nan]
    return out


def _polygamma64(n, xd, t):
    """psi^(n)(x), n >= 2, as torch's (-1)^(n+1) n! zeta(n + 1, x): its zeta is float64 rounded to the
    kernel's dtype `t` before the product; +-inf (sign (-1)^(n+1)) at 0, the negative integers and
    -inf, NaN at +inf and NaN. zeta is summed directly from x up (as torch's, x < 0 too) for
    x >= -100; below, where that would take -x terms, the reflection formula (there torch's sum
    cancels: polygamma(2, -100.5) is 1.6e-11 relative off in torch, exact here)."""
    sign = 1.0 if n % 2 else -1.0
    fact = float(math.factorial(n)) if n < 171 else math.inf
    out = np.full(xd.shape, sign * np.inf)
    coefs = _cot_poly(n)
    # where P_n's coefficients overflow (n >= 140 or so) the reflection would give inf * 0 or
    # inf - inf: the direct sum (torch's own, -x terms) down to -1e5 there
    low = -100.0 if all(math.isfinite(c) for c in coefs) else -1e5
    direct = (xd >= low) & (xd < np.inf) & ((xd > 0) | (xd != np.floor(xd)))
    if direct.any():
        z = _hurwitz_zeta(n + 1, xd[direct]).astype(t).astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            out[direct] = sign * fact * z
    refl = (xd < low) & (xd > -np.inf) & (xd != np.floor(xd))
    if refl.any():
        # psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)); P_n is even or odd, with
        # coefficients of one sign: evaluated in c^2, no cancellation
        z = xd[refl]
        c = _cot_pi(z)
        parity = (n + 1) % 2
        with np.errstate(all="ignore"):
            p = _horner(c * c, coefs[parity::2]) * (c if parity else 1.0)
            head = math.pi ** (n + 1) * p
            out[refl] = (1.0 if n % 2 == 0 else -1.0) * _polygamma_pos(n, 1.0 - z) - head
    out[(xd == np.inf) | np.isnan(xd)] = np.nan
    return out


def _polygamma(x, n):
    """psi^(n)(x) as torch.polygamma(n, x) (n >= 0: digamma, trigamma, then the Hurwitz zeta)."""
    xa = np.asarray(x)
    if n == 0:
        return _digamma(xa)
    if n == 1:
        return _to_dtype(_trigamma(xa), xa)
    return _to_dtype(_polygamma64(n, np.asarray(xa, dtype=np.float64), _opmath(xa)), xa)


# -- erfinv ----------------------------------------------------------------------------------------

# torch's initial rational approximations (Pavlis' erfinv), then Newton's method on erf in the
# middle and on erfc toward +-1 (1 - |y| is exact there, so the tails keep their precision)
_EI_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_EI_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_EI_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_EI_D = (3.543889200, 1.637067800)
_SQRT_PI_OVER_2 = 0.88622692545275801365


def _erfinv(x):
    """The inverse of erf as torch.erfinv: +-inf at +-1, NaN beyond, -0.0 at -0.0."""
    yd = np.asarray(x, dtype=np.float64)
    a = np.abs(yd)
    out = np.full(yd.shape, np.nan)
    mid = a <= 0.7
    tail = (a > 0.7) & (a < 1.0)
    if mid.any():
        y = yd[mid]
        z = y * y
        num = ((_EI_A[3] * z + _EI_A[2]) * z + _EI_A[1]) * z + _EI_A[0]
        den = (((_EI_B[3] * z + _EI_B[2]) * z + _EI_B[1]) * z + _EI_B[0]) * z + 1.0
        r = y * num / den
        for _ in range(3):
            with np.errstate(all="ignore"):
                r = r - (_erf(r) - y) * (_SQRT_PI_OVER_2 * np.exp(r * r))
        out[mid] = np.where(y == 0, y, r)           # keeps -0.0
    if tail.any():
        y = yd[tail]
        q = 1.0 - np.abs(y)                          # exact
        z = np.sqrt(-np.log(q / 2.0))
        num = ((_EI_C[3] * z + _EI_C[2]) * z + _EI_C[1]) * z + _EI_C[0]
        den = (_EI_D[1] * z + _EI_D[0]) * z + 1.0
        r = num / den
        for _ in range(3):
            r = r + (_erfc(r) - q) * (_SQRT_PI_OVER_2 * np.exp(r * r))
        out[tail] = np.copysign(r, y)
    one = a == 1.0
    out[one] = np.copysign(np.inf, yd[one])
    return _to_dtype(out, np.asarray(x))


# -- the op table entries ----------------------------------------------------------------------------

unary("lgamma", _lgamma, lambda g, out, x: (g * F.digamma(x),), "x", triton=_HOST)
unary("digamma", _digamma, lambda g, out, x: (g * F.polygamma(1, x),), "x", triton=_HOST)
unary("polygamma", _polygamma, lambda g, out, x, n: (g * F.polygamma(n + 1, x),), "x", triton=_HOST)
# torch's ErfinvBackward0 saves the input and takes erfinv of it again (an in-place op on the
# result leaves the backward valid)
unary("erfinv", _erfinv, lambda g, out, x: (g * _SQRT_PI_OVER_2 * F.exp(F.erfinv(x) ** 2),), "x", triton=_HOST)

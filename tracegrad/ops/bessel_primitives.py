"""Primitives for the modified Bessel functions of the first kind (torch.i0, torch.special.i0e, i1,
i1e) and for torch.angle of a real tensor, registered into the op table of primitives.py.

The kernels are Cephes' Chebyshev expansions, as torch's CPU kernels evaluate them (exp(-|x|) I(x)
over [0, 8] in x / 2 - 2, and exp(-|x|) sqrt(|x|) I(x) beyond in 32 / |x| - 2), in the dtype torch
computes in (float64, or float32 for the other float dtypes), with its tables, its fused
multiply-adds and its order of operations: torch's values bit for bit. Integer and bool inputs reach
them as the default float dtype. A float32 i0 is inf from |x| = 89 on (exp overflows float32 there,
as in torch, though I0(89) = 2e37 is finite), a float64 one from 710 on; I1(+-inf) is NaN
(exp(inf) / sqrt(inf)), as torch's.
Derivatives, as torch's derivatives.yaml: i0' = i1; i0e' = i1e - sgn(x) i0e; i1' = i0 - i1 / x and
i1e' = i0e - i1e (sgn(x) + 1 / x), both 0.5 where |x| is at most the dtype's epsilon (torch has
these two for float32 and float64 alone: a float16 or bfloat16 one raises its error). No Triton
lowering: on CUDA tensors they run their numpy kernel on a host copy.
"""
import numpy as np

from .. import _dtype as D
from . import lowering as T
from .primitives import F, unary, _zeros_like
from .gamma_primitives import _to_dtype, _opmath

_HOST = T.Refuse("runs its numpy kernel on the host")

# Cephes' Chebyshev coefficients (Moshier), highest order first
_I0E_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
          1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
          -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
          9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
          -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
          1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
          -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
          1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
          -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
          1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0E_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
          3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
          1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
          -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
          7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
          -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
          3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
          2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
          8.04490411014108831608E-1)
_I1E_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
          -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
          3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
          -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
          9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
          -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
          4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
          -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
          2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
          -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1E_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
          -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
          -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
          4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
          -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
          3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
          -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
          -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
          7.78576235018280120474E-1)


# torch's build contracts chbevl's y * b1 - b2 into one fused multiply-add (its values differ from
# separately rounded ones in the last bit for a sixth of arguments): the product and difference are
# taken wider and rounded once, as the fused op rounds: float32's in float64 (the product exact),
# float64's in x87's 80-bit long double where numpy has it
_WIDE = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else np.float64


def _chbevl(y, coefs, t):
    """Clenshaw's recurrence for a Chebyshev series (Cephes' chbevl) in dtype t, coefficients highest
    first."""
    cs = [t(c) for c in coefs]
    b0 = np.full_like(y, cs[0])
    b1 = np.zeros_like(y)
    b2 = b1
    yw = y.astype(np.float64 if t is np.float32 else _WIDE)
    for c in cs[1:]:
        b2 = b1
        b1 = b0
        b0 = (yw * b1 - b2).astype(t) + c
    return t(0.5) * (b0 - b2)


def _exp(a, t):
    """exp(a) as the C library's exp and expf, which torch's kernel calls: correctly rounded from a
    wider exp (numpy's vectorized ones are 1 ulp off for one argument in 20); a float32 one
    overflows where float32 does."""
    return np.exp(a.astype(np.float64 if t is np.float32 else _WIDE)).astype(t)


def _bessel(x, order, scaled):
    """I0, I1 (order 0, 1), or exp(-|x|) times them (scaled), as torch's kernels compute them: in
    float64 for float64, else in float32 (float16 and bfloat16 through it), with torch's tables (its
    float32 I1 series are the float64 ones' last 17 and 7 terms) and its order of operations."""
    xa = np.asarray(x)
    t = _opmath(xa)
    a = np.abs(xa.astype(t, copy=False))
    small = a <= 8.0
    out = np.empty_like(a)
    A, B = (_I0E_A, _I0E_B) if order == 0 else (_I1E_A, _I1E_B) if t is np.float64 else (_I1E_A[-17:], _I1E_B[-7:])
    with np.errstate(all="ignore"):
        if small.any():
            s = a[small]
            v = _chbevl(s / t(2.0) - t(2.0), A, t)
            if scaled:
                out[small] = v * s if order == 1 else v
            else:
                e = _exp(s, t)
                out[small] = e * s * v if order == 1 else e * v
        big = ~small                        # NaN too
        if big.any():
            b = a[big]
            v = _chbevl(t(32.0) / b - t(2.0), B, t)
            if not scaled:
                v = _exp(b, t) * v
            out[big] = v / np.sqrt(b)
    if order == 1:
        out = np.where(xa < 0, -out, out)  # (-0.0 and NaN keep the positive branch's value, as torch's)
    return _to_dtype(out, xa)


def _i0(x):
    return _bessel(x, 0, False)


def _i0e(x):
    return _bessel(x, 0, True)


def _i1(x):
    return _bessel(x, 1, False)


def _i1e(x):
    return _bessel(x, 1, True)


_EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}


def _first_order_vjp(scaled):
    """torch's i1_backward / i1e_backward: at |x| <= eps the limit 0.5, elsewhere the formula taken
    at x (x replaced by eps inside it where tiny, so that its 1 / x is finite)."""
    op = "i1e_backward" if scaled else "i1_backward"

    def vjp(g, out, x):
        if x.dtype.name not in ("float32", "float64"):
            # torch's i1_backward and i1e_backward are built for float and double alone
            raise NotImplementedError(f"\"{op}\" not implemented for '{D.SCALAR_NAME[x.dtype]}'")
        eps = _EPS[x.dtype.name]
        tiny = F.abs(x) <= eps
        safe = F.where(tiny, eps, x)
        if scaled:
            d = F.special_i0e(safe) - out * (F.sgn(safe) + F.reciprocal(safe))
        else:
            d = F.i0(safe) - out * F.reciprocal(safe)
        return (g * F.where(tiny, 0.5, d),)
    return vjp


unary("i0", _i0, lambda g, out, x: (g * F.special_i1(x),), "x", triton=_HOST)
unary("special_i0e", _i0e, lambda g, out, x: (g * (F.special_i1e(x) - F.sgn(x) * out),), "x out",
      grad_fn="SpecialI0EBackward0", triton=_HOST)
unary("special_i1", _i1, _first_order_vjp(False), "x out", grad_fn="SpecialI1Backward0", triton=_HOST)
unary("special_i1e", _i1e, _first_order_vjp(True), "x out", grad_fn="SpecialI1EBackward0", triton=_HOST)


# -- angle of a real tensor ---------------------------------------------------------------------------

def _angle(x):
    """The argument of a real number, as torch.angle: pi below 0 (-inf too), NaN at NaN, else +0.0
    (-0.0 too); pi in the result's dtype (float16's 3.1406). (torch's NaN keeps a -NaN's sign bit in
    its kernel's scalar tail and not in its vectorized body: the sign of a NaN is not part of it.)"""
    xa = np.asarray(x)
    with np.errstate(invalid="ignore"):
        r = np.where(xa < 0, np.pi, np.where(xa != xa, np.nan, 0.0))
    return _to_dtype(r, xa)


# torch's angle_backward of a real input is zeros (a NaN gradient too: not grad * 0)
unary("angle", _angle, lambda g, out, x: (_zeros_like(g),), "", triton=_HOST)

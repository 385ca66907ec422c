"""Primitives for reparameterized Dirichlet (and so Beta) draws, registered into the op table of
primitives.py: torch._dirichlet_grad, and the draw of Dirichlet.rsample as a function of its
concentration (torch's _Dirichlet function, whose node is _DirichletBackward).

A Dirichlet draw x is differentiated through its marginals: x_i ~ Beta(a_i, a0 - a_i), a0 the
total concentration, and torch's backward of a draw is G_i (g_i - sum_j x_j g_j) with g the
gradient of x and G_i = _dirichlet_grad(x_i, a_i, a0) = (dx_i/da_i at fixed a0 - a_i) / (1 - x_i),
dx/da the implicit derivative -(dI/da) / (dI/dx) of the Beta CDF I_x(a, b) (the regularized
incomplete beta function). For a Beta draw (two parts) this is the exact derivative of the draw
in each concentration. torch approximates G; this computes it (see _dirichlet_grad). No Triton
lowering: on CUDA tensors they run their numpy kernel on a host copy. Neither has a second
derivative (torch's errors)."""
import numpy as np

from . import lowering as T
from .primitives import FrontEnd, PRIMITIVES, Primitive, _bcast_shape, _no_kernel, FORWARD_AD_CUSTOM_FUNCTION
from .gamma_primitives import _digamma64

_HOST = T.Refuse("runs its numpy kernel on the host")
_TINY = np.finfo(np.float64).tiny
_MAXITER = 100000


def _beta_fraction(a, b, x):
    """The continued fraction of I_x(a, b) (DLMF 8.17.22: I = x^a (1-x)^b / (a B(a, b)) times it),
    by the modified Lentz method; it converges fast where x < (a + 1) / (a + b + 2), in about
    sqrt(max(a, b)) steps where a and b are large."""
    eps = np.finfo(np.float64).eps

    def guard(v):
        return np.where(np.abs(v) < _TINY, _TINY, v)
    c = np.ones_like(x)
    d = 1 / guard(1 - (a + b) * x / (a + 1))
    frac = d.copy()
    live = np.arange(x.size)
    for m in range(1, _MAXITER):
        if not live.size:
            break
        al, bl, xl = a[live], b[live], x[live]
        for num in (m * (bl - m) * xl / ((al + 2 * m - 1) * (al + 2 * m)),
                    -(al + m) * (al + bl + m) * xl / ((al + 2 * m) * (al + 2 * m + 1))):
            d[live] = 1 / guard(1 + num * d[live])
            c[live] = guard(1 + num / c[live])
            step = c[live] * d[live]
            frac[live] *= step
        live = live[~(np.abs(step - 1) <= eps)]
    frac[live] = np.nan             # (no convergence: a and b beyond ~1e9)
    return frac


_GAUSS3 = ((-np.sqrt(0.6), 5 / 9), (0.0, 8 / 9), (np.sqrt(0.6), 5 / 9))


def _lbeta_step(a, a2, b):
    """log B(a2, b) - log B(a, b) = the integral of psi(t) - psi(t + b) from a to a2 (three-point
    Gauss-Legendre: the step is small beside a). The difference of the lgammas would lose the
    digits of lbeta itself (about 1e-11 of a step's change at a = 5e3, b = 0.05)."""
    mid, half = (a + a2) / 2, (a2 - a) / 2
    return half * sum(w * (_digamma64(mid + u * half) - _digamma64(mid + u * half + b)) for u, w in _GAUSS3)


def _dirichlet_grad(x, alpha, total):
    """(dx/da) / (1 - x) for a Beta(a, b) draw x, a = alpha, b = total - alpha held fixed, as
    torch._dirichlet_grad, in float64 and rounded to the operands' dtype. dI/da by a
    fourth-order central difference of I below the mean (roughly) and of -(1 - I) =
    -I_(1-x)(b, a) above it (each relatively accurate in its own tail), with a step of 1e-3 of the
    scale on which I varies in a (a; sqrt(a) above 1; 1 / |log x| where x is small). Both are
    taken over the density at a, x^(a-1) (1-x)^(b-1) / B(a, b), folded into the fraction's
    prefactor, so neither underflows. Good to ~1e-9 (checked against 30-digit differences of
    the incomplete beta function) for a and b up to 5e3. At x = 0 and x = 1 (a draw rounded there)
    the limits, 0 and (psi(a + b) - psi(a)) / b, as torch's; x outside [0, 1] and a or b not
    positive NaN (torch answers numbers there)."""
    dt = np.result_type(x, alpha, total)
    xd, ad, td = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (x, alpha, total)))
    shape = xd.shape
    xd, ad, bd = xd.reshape(-1), ad.reshape(-1), (td - ad).reshape(-1)
    out = np.where(xd == 0, 0.0, np.nan)
    at_one = np.nonzero((xd == 1) & (ad > 0) & (bd > 0))[0]
    # (the limit as x -> 1: 1 - I ~ (1-x)^b x^a / (b B(a, b)), so dx/da ~ (1-x) (psi(a+b) - psi(a)) / b)
    out[at_one] = (_digamma64(ad[at_one] + bd[at_one]) - _digamma64(ad[at_one])) / bd[at_one]
    ok = np.nonzero((xd > 0) & (xd < 1) & (ad > 0) & (bd > 0) & np.isfinite(ad) & np.isfinite(bd))[0]
    if ok.size:
        xv, av, bv = xd[ok], ad[ok], bd[ok]
        with np.errstate(all="ignore"):
            lx, l1x = np.log(xv), np.log1p(-xv)
            h = 1e-3 / (1 / av + 1 / np.sqrt(av) + np.abs(lx))
            lower = xv < (av + 1) / (av + bv + 2)

            def scaled_cdf(a2):
                """I_x(a2, b) (or I_x(a2, b) - 1 above the mean) over the density at a."""
                shift = np.exp((a2 - av) * lx - _lbeta_step(av, a2, bv)) * xv * np.exp(l1x)
                frac = np.empty_like(xv)
                if lower.any():
                    frac[lower] = _beta_fraction(a2[lower], bv[lower], xv[lower]) / a2[lower]
                up = ~lower
                if up.any():
                    frac[up] = -_beta_fraction(bv[up], a2[up], 1 - xv[up]) / bv[up]
                return shift * frac
            di = (8 * (scaled_cdf(av + h) - scaled_cdf(av - h))
                  - (scaled_cdf(av + 2 * h) - scaled_cdf(av - 2 * h))) / (12 * h)
            out[ok] = -di / (1 - xv)
    return out.reshape(shape).astype(dt)


def _no_second_derivative(name):
    def vjp(g, out, *args):
        msg = f"the derivative for '{name}' is not implemented."
        err = FrontEnd.apply(PRIMITIVES["derivative_error"], (g,), {"message": msg, "error": NotImplementedError(msg)})
        return tuple(err if isinstance(a, FrontEnd.Tensor) else None for a in args)
    return vjp


def _dirichlet_draw_vjp(g, out, concentration, sample):
    """torch's _Dirichlet backward: G (g - sum(x g)) with G = _dirichlet_grad(x, a, a0)."""
    total = FrontEnd.ops.expand(FrontEnd.ops.sum(concentration, -1, keepdim=True), *out.shape)
    grad = FrontEnd.apply(PRIMITIVES["_dirichlet_grad"], (out, concentration, total), {})
    return grad * (g - FrontEnd.ops.sum(out * g, -1, keepdim=True)), None


def _float_kernels_only(op):
    """torch's refusals of a kernel built for float32 and float64 alone."""
    refuse = _no_kernel(op)
    return {0: refuse, 1: refuse, 2: lambda d, args: refuse(d, args) if d.itemsize < 4 else None}


Primitive("_dirichlet_grad", "x alpha total", _dirichlet_grad, shape=_bcast_shape, dtype="same",
          vjp=_no_second_derivative("_dirichlet_grad"), grad_fn="NotImplemented", elementwise=True,
          refuse=_float_kernels_only("_dirichlet_grad_cpu"), triton=_HOST,
          no_forward_ad="Trying to use forward AD with aten::_dirichlet_grad that does not support it.")
# a Dirichlet draw made on the host (the draw of Dirichlet.rsample) as a function of its concentration
Primitive("dirichlet_rsample", "concentration sample", lambda a, sample: np.array(sample, dtype=a.dtype, copy=True),
          shape=_bcast_shape, dtype="same", vjp=_dirichlet_draw_vjp, saves="concentration out",
          grad_fn="_DirichletBackward", refuse=_float_kernels_only("dirichlet"), edges=lambda metas: (0,),
          triton=_HOST, no_forward_ad=FORWARD_AD_CUSTOM_FUNCTION)      # (torch's draw is a custom Function)

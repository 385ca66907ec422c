"""torch.special's functions that tracegrad has the kernels for: aliases of the ops, and ndtr,
xlog1py as decompositions."""
import math

from . import ops  # noqa: F401
from .ops import functional as O
from .ops import composite as C
from .ops import math_functional as M
from .nn import functional as F
from .tracing import rename_grad_fn
from .ops.composite_more import entr
from .ops import functional_extra as X
from .ops import special_functional as SF
from .ops.polynomial_primitives import KINDS as _POLYNOMIALS
from .ops.bessel_more_primitives import KINDS as _BESSEL

__all__ = ["expit", "logit", "erf", "erfc", "exp2", "expm1", "log1p", "log_softmax", "softmax", "logsumexp",
           "round", "sinc", "xlogy", "xlog1py", "ndtr", "entr", "gammaln", "digamma", "psi", "polygamma",
           "erfinv", "multigammaln", "i0", "i0e", "i1", "i1e", "erfcx", "ndtri", "log_ndtr", "zeta", "gammainc", "gammaincc"] + \
    list(_POLYNOMIALS) + list(_BESSEL)


def expit(input):
    return O.sigmoid(input)


def logit(input, eps=None):
    return C.logit(input, eps)


erf, erfc, exp2, expm1, log1p = O.erf, O.erfc, O.exp2, O.expm1, O.log1p
sinc, xlogy = C.sinc, C.xlogy
gammaln, digamma, psi, polygamma, erfinv = M.lgamma, M.digamma, M.digamma, M.polygamma, M.erfinv
i0, i0e, i1, i1e = X.special_i0, X.special_i0e, X.special_i1, X.special_i1e
erfcx, ndtri, log_ndtr, zeta = SF.special_erfcx, SF.special_ndtri, SF.special_log_ndtr, SF.special_zeta
gammainc, gammaincc = SF.special_gammainc, SF.special_gammaincc
for _name in list(_POLYNOMIALS) + list(_BESSEL):
    globals()[_name] = getattr(SF, "special_" + _name)


def multigammaln(input, p):
    return M.mvlgamma(input, p)


def log_softmax(input, dim, *, dtype=None):
    return F.log_softmax(input, dim, dtype=dtype)


def softmax(input, dim, *, dtype=None):
    return F.softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):
    return O.logsumexp(input, dim, keepdim)


def round(input, *, decimals=0):
    return O.round(input, decimals=decimals)


def ndtr(input):
    """The standard normal CDF, 0.5 erfc(-x / sqrt(2)): its lower tail kept (erfc's)."""
    x = C._floating(input, "special_ndtr")
    return rename_grad_fn(O.erfc(x * -math.sqrt(0.5)) * 0.5, "MulBackward1")


xlog1py = C.xlog1py

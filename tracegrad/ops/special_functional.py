"""torch.special's functions over the primitives of special_primitives.py, polynomial_primitives.py,
bessel_more_primitives.py and igamma_primitives.py: erfcx, ndtri, log_ndtr, zeta, the orthogonal
polynomials, the Bessel and Airy functions, and the incomplete gamma functions (torch.igamma,
igammac, torch.special.gammainc, gammaincc)."""
from .. import _dtype as D
from ..tensor import Tensor
from ..tracing import apply
from ..ir.symbolic import Sym
from . import special_primitives  # noqa: F401  (registers the primitives)
from . import polynomial_primitives as PP
from . import bessel_more_primitives as BP
from . import igamma_primitives  # noqa: F401  (registers the primitives)
from . import functional as O
from .primitives import PRIMITIVES as P
from .math_functional import _unary

__all__ = ["special_erfcx", "special_ndtri", "special_log_ndtr", "special_zeta", "igamma", "igammac",
           "special_gammainc", "special_gammaincc"] + \
    ["special_" + n for n in PP.KINDS] + ["special_" + n for n in BP.KINDS]

special_erfcx, special_ndtri, special_log_ndtr = (_unary(n, n) for n in ("special_erfcx", "special_ndtri",
                                                                            "special_log_ndtr"))


def binary_operands(op, a, b, names):
    """torch's three overloads of a binary special function (Tensor, Tensor), (Number, Tensor) and
    (Tensor, Number): a number as a wrapped scalar; anything else its TypeError."""
    if not (isinstance(a, Tensor) or isinstance(b, Tensor)) or \
            not isinstance(a, (Tensor, Sym) + O._Scalar) or not isinstance(b, (Tensor, Sym) + O._Scalar):
        first, second = names
        self_name = "x" if first == "x" else "self"
        raise TypeError(f"{op}() received an invalid combination of arguments - got ({type(a).__name__}, "
                        f"{type(b).__name__}), but expected one of:\n * (Tensor {first}, Tensor {second}, *, Tensor "
                        f"out = None)\n * (Number {self_name}, Tensor {second}, *, Tensor out = None)\n * (Tensor "
                        f"{first}, Number {second}, *, Tensor out = None)\n")
    a = a if isinstance(a, Tensor) else O._scalar(a)
    b = b if isinstance(b, Tensor) else O._scalar(b)
    return a, b


def refuse_half(kernel, args):
    """torch's NotImplementedError where the operands' common dtype is float16 or bfloat16, which
    `kernel` is not built for."""
    d = D.result_type(list(args))
    if d is D.float16 or d is D.bfloat16:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[d]}'")


def _polynomial(name, kind):
    public = "special_" + name

    def op(input, n):
        x, n = binary_operands(public, input, n, ("x", "n"))
        refuse_half(name + "_cpu", (x, n))
        return apply(P["special_polynomial"], (x, n), {"kind": kind})
    op.__name__ = public
    op.__doc__ = f"torch.special.{name}(input, n): the polynomial of degree n (broadcast) at input."
    return op


for _name, _kind in PP.KINDS.items():
    globals()["special_" + _name] = _polynomial(_name, _kind)


def special_zeta(input, other):
    """The Hurwitz zeta function zeta(input, other) (broadcast), as torch.special.zeta."""
    x, q = binary_operands("special_zeta", input, other, ("input", "other"))
    refuse_half("zeta_cpu", (x, q))
    return apply(P["special_zeta"], (x, q), {})


def _bessel(name):
    public = "special_" + name

    # (torch names the argument of these four x, of the others input)
    arg = "x" if name in ("scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
                          "airy_ai") else "input"

    def op(input):
        O._check_tensor(input, public, arg)
        refuse_half(name + "_cpu", (input,))
        return apply(P["special_bessel"], (input,), {"kind": name})
    op.__name__ = public
    op.__doc__ = f"Elementwise torch.special.{name}."
    return op


for _name in BP.KINDS:
    globals()["special_" + _name] = _bessel(_name)


def _incomplete_gamma(prim, public):
    def op(input, other):
        O._check_tensor(input, public)
        O._check_tensor(other, public, "other", 2)
        return apply(P[prim], (input, other), {})
    op.__name__ = public
    op.__doc__ = (f"The regularized {'upper' if prim == 'igammac' else 'lower'} incomplete gamma function of "
                  f"(input, other) (broadcast), as torch.{public.replace('special_', 'special.')}.")
    return op


igamma, igammac = _incomplete_gamma("igamma", "igamma"), _incomplete_gamma("igammac", "igammac")
special_gammainc = _incomplete_gamma("igamma", "special_gammainc")
special_gammaincc = _incomplete_gamma("igammac", "special_gammaincc")

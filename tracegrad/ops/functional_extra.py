"""More of torch's functions: the modified Bessel functions (i0, and torch.special's i0e, i1, i1e:
primitives in bessel_primitives.py), angle and the conjugation functions of real tensors,
gcd/lcm/nextafter, index_reduce, as_strided over a tensor's storage and resize_."""
import math

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..tracing import apply, rename_grad_fn
from . import bessel_primitives  # noqa: F401  (registers the primitives)
from . import number_primitives  # noqa: F401  (registers the primitives)
from .primitives import PRIMITIVES as P
from . import functional as O
from . import shapes as S

__all__ = ["i0", "special_i0", "special_i0e", "special_i1", "special_i1e", "angle", "conj", "conj_physical",
           "resolve_conj", "resolve_neg", "is_conj", "is_neg", "gcd", "lcm", "nextafter"]


def _unary(name, public):
    prim = P[name]

    def op(input):
        O._check_tensor(input, public)
        return apply(prim, (input,), {})
    op.__name__ = public
    op.__doc__ = f"Elementwise {public}, as torch.{public}."
    return op


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


# -- gcd, lcm, nextafter: two tensors, promoted; torch takes no number for other ------------------------

def _two_tensors(name):
    prim = P[name]

    def op(input, other):
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


# the public ops are one namespace (as composite.py's): derivative rules call these through it
for _name in __all__:
    setattr(O, _name, globals()[_name])
del _name

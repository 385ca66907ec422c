"""More of torch's functions: the modified Bessel functions (i0, and torch.special's i0e, i1, i1e:
primitives in bessel_primitives.py), angle and the conjugation functions of real tensors,
gcd/lcm/nextafter, index_reduce, as_strided over a tensor's storage and resize_."""
import math

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..tracing import apply, rename_grad_fn
from . import bessel_primitives  # noqa: F401  (registers the primitives)
from .primitives import PRIMITIVES as P
from . import functional as O
from . import shapes as S

__all__ = ["i0", "special_i0", "special_i0e", "special_i1", "special_i1e"]


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


# the public ops are one namespace (as composite.py's): derivative rules call these through it
for _name in __all__:
    setattr(O, _name, globals()[_name])
del _name

"""Parameter: a leaf tensor that a Module registers when it is assigned as an attribute."""
import numpy as np

from ..tensor import Tensor, Above
from .. import _dtype as D


class Parameter(Tensor):
    """A tensor that is a module parameter (torch.nn.Parameter).

    It shares storage with the tensor it wraps, is a leaf, and requires grad unless
    told otherwise. Ops on it return plain tensors.
    """
    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor._make(np.empty((0,), dtype=D.get_default_dtype().np), D.get_default_dtype())
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        t = Tensor._make.__func__(cls, data._data, data._dtype, vc=data._vc)
        t._is_param = True
        t._inference = data._inference       # (an inference tensor's: requires_grad then raises outside the mode)
        if requires_grad:
            t.requires_grad = True
        return t

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        raise RuntimeError("tracegrad tensors are not pickled; use tracegrad.save(), which writes .npz")


class Buffer(Tensor):
    """Marks a tensor assigned to a Module attribute as a buffer (torch.nn.Buffer).

    Module.__setattr__ registers the tensor it wraps; the module keeps a plain tensor.
    """
    __slots__ = ()

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = Tensor._make(np.empty((0,), dtype=D.get_default_dtype().np), D.get_default_dtype())
        t = Tensor._make.__func__(cls, data._data, data._dtype, data._req, vc=data._vc)
        t.__dict__["persistent"] = persistent
        return t

    def __init__(self, data=None, *, persistent=True):
        pass


def is_lazy(param):
    return False


Above.Parameter = Parameter        # a deep copy of a parameter is one

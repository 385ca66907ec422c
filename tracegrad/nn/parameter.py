"""Parameter: a leaf tensor that a Module registers when it is assigned as an attribute."""
import numpy as np

from ..tensor import Tensor, Above, Size, device as _device
from ..grad_mode import no_grad
from ..creation import empty
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


_SHAPE_MSG = ("Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
              "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
              "`forward` to initialize the parameters before accessing their attributes.")


class UninitializedTensorMixin:
    """A parameter or buffer of a lazy module, without a shape until `materialize(shape)` gives it
    memory and makes it a plain one (torch's UninitializedParameter / UninitializedBuffer):
    reading its values or shape before raises."""
    cls_to_become = None

    @property
    def _data(self):
        raise ValueError("Attempted to use an uninitialized parameter. This error happens when you are using a "
                         "`LazyModule` or explicitly manipulating `torch.nn.parameter.UninitializedParameter` "
                         "objects. When using LazyModules Call `forward` with a dummy batch to initialize the "
                         "parameters before calling torch functions")

    @_data.setter
    def _data(self, value):
        Tensor._data.__set__(self, value)

    @property
    def shape(self):
        raise RuntimeError(_SHAPE_MSG)

    def size(self, dim=None):
        """(torch's: the placeholder's size, [0])"""
        return Size((0,)) if dim is None else Size((0,))[dim]

    @property
    def ndim(self):
        return 1

    @property
    def device(self):
        d = self.__dict__.get("_device")
        return _device("cpu") if d is None else _device(d) if not isinstance(d, _device) else d

    def materialize(self, shape, device=None, dtype=None):
        """Memory of `shape` (uninitialized values), and the class it becomes."""
        dtype = self._dtype if dtype is None else dtype
        t = empty(tuple(shape), dtype=dtype, device=device if device is not None else self.__dict__.get("_device"))
        Tensor._data.__set__(self, t._data)
        self._dtype = t._dtype
        self.__class__ = self.cls_to_become

    def apply_to_meta(self, fn):
        """Module._apply's conversion (.double(), .to(...)) of a tensor with no memory yet: the
        dtype and device that `fn` gives an empty tensor of its dtype, which materialize uses."""
        with no_grad():
            probe = fn(Tensor._make(np.empty((0,), dtype=self._dtype.np), self._dtype))
        self._dtype = probe._dtype
        self.__dict__["_device"] = probe.device

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __deepcopy__(self, memo):
        new = type(self)(self._req, None, self._dtype)
        memo[id(self)] = new
        return new


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        dt = D.get_default_dtype() if dtype is None else dtype
        t = Parameter.__new__(cls, Tensor._make(np.empty((0,), dtype=dt.np), dt), requires_grad)
        if device is not None:
            t.__dict__["_device"] = device
        return t

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        dt = D.get_default_dtype() if dtype is None else dtype
        t = Tensor._make.__func__(cls, np.empty((0,), dtype=dt.np), dt, requires_grad)
        t.__dict__["persistent"] = persistent
        if device is not None:
            t.__dict__["_device"] = device
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(param):
    return isinstance(param, UninitializedTensorMixin)


Above.Parameter = Parameter        # a deep copy of a parameter is one

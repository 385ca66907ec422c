"""Activation modules beyond the basic ones in layers.py (torch.nn.ELU, Hardtanh, ...)."""
from .module import Module
from ..parameter import Parameter
from .. import functional as F
from ... import creation

__all__ = ["ELU", "CELU", "SELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish", "Softsign", "Tanhshrink", "Mish",
           "Hardshrink", "Softshrink", "Softmin", "GLU", "PReLU", "LogSigmoid", "Threshold"]


class _Elementwise(Module):
    _fn = None
    _args = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        for name, default in self._args:
            setattr(self, name, kwargs.pop(name, args[0] if args else default))
            args = args[1:]
        if kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")

    def forward(self, input):
        return type(self)._fn(input, *(getattr(self, n) for n, _ in self._args))

    def extra_repr(self):
        return ", ".join(f"{n}={getattr(self, n)}" for n, _ in self._args if n != "inplace")


def _module(name, fn, args=(), doc=""):
    return type(name, (_Elementwise,), {"_fn": staticmethod(fn), "_args": args, "__doc__": doc,
                                        "__module__": __name__})


ELU = _module("ELU", F.elu, (("alpha", 1.0), ("inplace", False)), "x if x > 0 else alpha (exp(x) - 1)")
CELU = _module("CELU", F.celu, (("alpha", 1.0), ("inplace", False)), "x if x > 0 else alpha (exp(x / alpha) - 1)")
SELU = _module("SELU", F.selu, (("inplace", False),), "scale * elu(x, alpha) with the self-normalising constants")
ReLU6 = _module("ReLU6", F.relu6, (("inplace", False),), "min(max(x, 0), 6)")
Hardsigmoid = _module("Hardsigmoid", F.hardsigmoid, (("inplace", False),), "clamp(x / 6 + 1 / 2, 0, 1)")
Hardswish = _module("Hardswish", F.hardswish, (("inplace", False),), "x * relu6(x + 3) / 6")
Softsign = _module("Softsign", F.softsign, (), "x / (1 + |x|)")
Tanhshrink = _module("Tanhshrink", F.tanhshrink, (), "x - tanh(x)")
Mish = _module("Mish", F.mish, (("inplace", False),), "x * tanh(softplus(x))")
Hardshrink = _module("Hardshrink", F.hardshrink, (("lambd", 0.5),), "x where |x| > lambd, else 0")
Softshrink = _module("Softshrink", F.softshrink, (("lambd", 0.5),), "x -+ lambd outside [-lambd, lambd], else 0")
Softmin = _module("Softmin", F.softmin, (("dim", None),), "softmax(-x)")
GLU = _module("GLU", F.glu, (("dim", -1),), "a * sigmoid(b) for the two halves a, b of dim")
LogSigmoid = _module("LogSigmoid", F.logsigmoid, (), "log(sigmoid(x))")


class Hardtanh(Module):
    """clamp(x, min_val, max_val), with gradient 1 strictly inside."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val >= max_val:
            raise ValueError("min_val cannot be greater than max_val" if min_val > max_val else
                             "min_val cannot be equal to max_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}"


class PReLU(Module):
    """x if x > 0 else a x, with a learned per-channel (or single) slope a."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(creation.full((num_parameters,), init, dtype=dtype))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"

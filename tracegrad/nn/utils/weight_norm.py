"""torch.nn.utils.weight_norm (the hook-based form torch keeps beside parametrizations):
weight = g * v / ||v||, the norm over every dim but `dim`, with g and v the parameters and the
weight made again from them before each forward."""
import warnings

from ...ops import functional as O
from ...tracing import Proxy, TraceError
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm", "WeightNorm"]


def norm_except_dim(v, pow=2, dim=0):
    """||v|| over every dim but `dim` (kept, the others of size 1); over everything for dim -1."""
    if dim == -1:
        return O.norm(v, pow)
    d = dim % v.ndim
    keep = tuple(i for i in range(v.ndim) if i != d)
    return O.norm(v, pow, dim=keep, keepdim=True)


def _weight_norm(v, g, dim=0):
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that makes the weight from its g and v (torch's WeightNorm)."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        weight = self.compute_weight(module)
        if weight.__class__ is Proxy:
            # (the module's attribute would keep a value of the trace: compile runs the module eagerly)
            raise TraceError(f"weight_norm's hook sets {type(module).__name__}.{self.name} before each forward, "
                             f"which a compiled program cannot do to the module")
        setattr(module, self.name, weight)


def weight_norm(module, name="weight", dim=0):
    """Reparametrize module's `name` as g * v / ||v|| (g of the norm's shape, v the direction),
    made again before each forward, as torch.nn.utils.weight_norm. dim=None: one norm of all."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")

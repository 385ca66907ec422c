"""Lazy modules (torch.nn.LazyLinear): parameters without a shape until the first forward, which
reads it from the input, initializes them and turns the module into its plain class."""
from ...grad_mode import no_grad
from ...tracing import Proxy, TraceError
from ..parameter import UninitializedParameter, is_lazy
from .layers import Linear


class LazyModuleMixin:
    """The first forward (or a load_state_dict with shapes) gives the uninitialized parameters
    their shapes; after the forward the module becomes `cls_to_become`."""
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def has_uninitialized_params(self):
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs):
        """A state dict with shapes materializes the parameters it names (the values are then loaded)."""
        for table in (self._parameters, self._buffers):
            for name, t in table.items():
                key = prefix + name
                if t is not None and key in state_dict and is_lazy(t) and not is_lazy(state_dict[key]):
                    with no_grad():
                        t.materialize(state_dict[key].shape)

    def _infer_parameters(self, module, args, kwargs=None):
        if any(a.__class__ is Proxy for a in (*args, *(kwargs or {}).values())):
            # (the parameters would be made of the trace's values: the first call runs eagerly)
            raise TraceError(f"the lazy module {self._get_name()} makes its parameters in its first forward, which a "
                             f"compiled program cannot do to the module")
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is the last dim of the first input."""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:                # (materialized by a state dict: the input says it)
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                                     f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]

"""Lazy modules (torch.nn.LazyLinear, LazyConvNd, LazyBatchNormNd): parameters without a shape
until the first forward, which reads it from the input, initializes them and turns the module into its plain class."""
from ...grad_mode import no_grad
from ...tracing import Proxy, TraceError
from ... import creation as C
from ... import _dtype as D
from ..parameter import UninitializedParameter, UninitializedBuffer, is_lazy
from .layers import Linear, Conv1d, Conv2d, BatchNorm1d, BatchNorm2d
from .nd import Conv3d, BatchNorm3d


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


class _LazyConvXdMixin(LazyModuleMixin):
    """A convolution whose in_channels is the channel dim of the first input (torch's)."""

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            with no_grad():
                if self.transposed:
                    self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))
                else:
                    self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()

    def _get_in_channels(self, input):
        no_batch = len(self.kernel_size) + 1
        if input.dim() not in (no_batch, no_batch + 1):
            raise RuntimeError(f"Expected {no_batch}D (unbatched) or {no_batch + 1}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == no_batch + 1 else input.shape[0]


def _lazy_conv(name, base):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        # (through LazyModuleMixin's __init__, which registers its hooks and calls the plain class's)
        _LazyConvXdMixin.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode,
                                  device, dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    return type(name, (_LazyConvXdMixin, base), {"cls_to_become": base, "__init__": __init__, "__module__": __name__,
                                                  "__doc__": f"{base.__name__} whose in_channels is the first "
                                                             f"input's channel count."})


class _LazyNormBase(LazyModuleMixin):
    """A batch norm whose num_features is the channel dim of the first input (torch's)."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        # (affine, bias and tracking off at first: nothing made that the first input would replace)
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = C.tensor(0, dtype=D.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            with no_grad():
                if self.affine:
                    self.weight.materialize((self.num_features,))
                    if self.bias is not None:
                        self.bias.materialize((self.num_features,))
                if self.track_running_stats:
                    self.running_mean.materialize((self.num_features,))
                    self.running_var.materialize((self.num_features,))
                self.reset_parameters()


LazyConv1d, LazyConv2d, LazyConv3d = (_lazy_conv(f"LazyConv{i}d", base)
                                      for i, base in ((1, Conv1d), (2, Conv2d), (3, Conv3d)))
LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = (
    type(f"LazyBatchNorm{i}d", (_LazyNormBase, base), {"cls_to_become": base, "__module__": __name__})
    for i, base in ((1, BatchNorm1d), (2, BatchNorm2d), (3, BatchNorm3d)))

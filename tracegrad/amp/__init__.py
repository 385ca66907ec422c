"""torch.amp: autocast (mixed precision: the ops that gain from a lower precision run in it, those
that need range run in float32, the rest in their inputs' dtype) and GradScaler (loss scaling
for float16 gradients).

tracegrad's autocast follows torch's CPU policy (policy.py): its table names tracegrad's public
functions. The policy applies at the outermost listed function of a call (a listed function
that calls another, as linear calls matmul, casts once). A backward run inside an autocast
region computes its gradients in the forward's dtypes (torch's runs the ops of such a backward
under autocast too; torch's documentation advises calling backward outside the region).
autocast("cuda") without a GPU warns and is disabled, as torch's; with one, tracegrad has no
CUDA policy yet and raises."""
import functools
import warnings

from .. import _dtype as D
from .. import cuda
from . import policy
from .policy import STATE, autocast_key  # noqa: F401  (the key compiled programs are built under)
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype", "is_autocast_cpu_enabled",
           "get_autocast_cpu_dtype"]

_DEVICES = ("cpu", "cuda")
_KNOWN = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla", "lazy",
          "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


def is_autocast_available(device_type):
    return device_type in _DEVICES


class autocast:
    """A context manager (or decorator) running the listed ops of `device_type` tensors in `dtype`
    (bfloat16 on the CPU by default, float16 on CUDA)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _KNOWN:
            raise RuntimeError(f"Expected one of {', '.join(_KNOWN)} device type at start of device string: "
                               f"{device_type}")
        self.device = device_type
        self.fast_dtype = policy.get_dtype(device_type) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled
        if device_type not in _DEVICES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        if device_type == "cuda":
            if self._enabled and not cuda.is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", UserWarning,
                              stacklevel=2)
                self._enabled = False
            elif self._enabled:
                raise NotImplementedError("autocast('cuda'): tracegrad has the CPU policy alone; run the CUDA ops "
                                          "in the dtypes you cast them to")
        if device_type == "cpu" and self._enabled and self.fast_dtype not in (D.bfloat16, D.float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\nCPU Autocast "
                          "only supports dtypes of torch.bfloat16, torch.float16 currently.", UserWarning, stacklevel=2)
            self._enabled = False

    def __enter__(self):
        # (a region entered inside a listed function's body, or a backward's, applies the policy
        # afresh: custom_bwd's region)
        self._prev = (policy.is_enabled(self.device), policy.get_dtype(self.device), STATE.depth)
        policy.set_enabled(self.device, self._enabled)
        policy.set_dtype(self.device, self.fast_dtype)
        STATE.depth = 0
        return self

    def __exit__(self, *exc):
        policy.set_enabled(self.device, self._prev[0])
        policy.set_dtype(self.device, self._prev[1])
        STATE.depth = self._prev[2]
        if not STATE.any:
            STATE.cache.clear()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return decorated


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """For a custom Function's forward: with cast_inputs, inside an autocast region the forward runs
    with autocast off and its floating tensor arguments cast to cast_inputs; the region's state is
    kept on ctx for custom_bwd."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = policy.get_dtype(device_type)
        # (with cast_inputs the forward runs outside autocast, and so does the backward)
        ctx._fwd_used_autocast = policy.is_enabled(device_type) and cast_inputs is None
        if cast_inputs is None or not policy.is_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*policy.cast_tree(args, cast_inputs), **policy.cast_tree(kwargs, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """For a custom Function's backward: runs under the autocast state its forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, ctx._dtype, getattr(ctx, "_fwd_used_autocast", False)):
            return bwd(*args, **kwargs)
    return decorate_bwd


def _device_arg(device_type, name):
    if device_type not in _DEVICES:
        raise RuntimeError(f"{name}: unsupported device type '{device_type}'")
    return device_type


def is_autocast_enabled(device_type=None):
    """torch.is_autocast_enabled: CUDA's state without an argument, as torch's."""
    return policy.is_enabled(_device_arg("cuda" if device_type is None else device_type, "is_autocast_enabled"))


def get_autocast_dtype(device_type):
    return policy.get_dtype(_device_arg(device_type, "get_autocast_dtype"))


def set_autocast_enabled(device_type, enabled):
    policy.set_enabled(_device_arg(device_type, "set_autocast_enabled"), enabled)


def set_autocast_dtype(device_type, dtype):
    policy.set_dtype(_device_arg(device_type, "set_autocast_dtype"), dtype)


def is_autocast_cpu_enabled():
    return policy.is_enabled("cpu")


def get_autocast_cpu_dtype():
    return policy.get_dtype("cpu")

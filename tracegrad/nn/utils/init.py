"""torch.nn.utils.skip_init: a module whose parameters and buffers are left uninitialized."""
import inspect

from ... import creation as C
from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with uninitialized parameters and buffers (their values are to
    be set after), as torch's. torch builds the module on the meta device; here it is built as
    usual with the random state put back afterwards (so that the draws after it are those
    without it), then emptied."""
    if not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    state = C.get_rng_state()
    try:
        module = module_cls(*args, device=final_device, **kwargs)
    finally:
        C.set_rng_state(state)
    return module.to_empty(device=final_device)

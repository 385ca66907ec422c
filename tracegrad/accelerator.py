"""torch.accelerator: the current accelerator, which newer tutorials pick their device with
(`torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"`).
tracegrad's only accelerator is "cuda" (Triton kernels)."""
from . import cuda as _cuda
from .tensor import device as _device


def is_available():
    return _cuda.is_available()


def current_accelerator(check_available=False):
    """device("cuda") where a GPU is usable, else None (torch's answer on a machine without one)."""
    if _cuda.is_available():
        return _device("cuda")
    return None


def device_count():
    return _cuda.device_count() if _cuda.is_available() else 0

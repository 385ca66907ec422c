"""torch.utils: data loading (tracegrad.utils.data)."""
from . import data  # noqa: F401

"""torch.utils: data loading (tracegrad.utils.data) and activation checkpointing (tracegrad.utils.checkpoint)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401

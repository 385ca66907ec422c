"""torch.utils: data loading (tracegrad.utils.data), activation checkpointing (tracegrad.utils.checkpoint) and
the fill of uninitialized memory (tracegrad.utils.deterministic)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
from . import deterministic  # noqa: F401

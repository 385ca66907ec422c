"""Ops: the primitive table (primitives.py), shape rules (shapes.py), public ops (functional.py)."""
from .primitives import PRIMITIVES  # noqa: F401

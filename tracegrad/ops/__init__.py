"""Ops: the op table and the public ops built on it.

The op table: primitives.py (the table and most entries), math_primitives.py,
gamma_primitives.py and nn_primitives.py (more entries), shapes.py (shape rules), lowering.py (what a `triton` slot
holds). It imports no tensor, tracer or autograd engine. The public ops: functional.py,
math_functional.py and composite.py, with torch's signatures and errors."""
from .primitives import PRIMITIVES  # noqa: F401

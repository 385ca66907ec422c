"""Graph -> Graph passes. Each is a pure function with a verb for a name."""
from .dead_code import eliminate_dead_code  # noqa: F401

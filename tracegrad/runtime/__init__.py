"""Run-time support for compiled programs: guards that key the cache, the cache itself, and
the reading of a function's bytecode for Python side effects before it is traced."""
from .guards import flatten, guard_key  # noqa: F401
from .cache import ProgramCache  # noqa: F401

"""Run-time support for compiled programs: guards that key the cache, the cache itself."""
from .guards import flatten, guard_key  # noqa: F401
from .cache import ProgramCache  # noqa: F401

"""autocast's state, per thread: which devices' regions are entered, their dtypes, and how deep
the current call is inside functions that applied (or stopped) the policy. A leaf module: the
autograd engine reads it to run backward computations without the policy."""
import threading

from . import _dtype as D


class _State(threading.local):
    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": D.bfloat16, "cuda": D.float16}
        self.depth = 0
        self.any = False
        self.cache = {}            # id(parameter) -> (parameter, its cast): cleared as the outermost region exits


STATE = _State()


class shielded:
    """The policy off inside (a backward's computations, a KEEP function's body)."""

    def __enter__(self):
        STATE.depth += 1

    def __exit__(self, *exc):
        STATE.depth -= 1
        return False

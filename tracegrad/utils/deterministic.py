"""torch.utils.deterministic: whether empty tensors are filled with known values (NaN, an integer
dtype's largest value) while use_deterministic_algorithms(True) is on."""
import sys
import types

from ..creation import DETERMINISTIC


class _Deterministic(types.ModuleType):
    @property
    def fill_uninitialized_memory(self):
        """Whether to fill uninitialized memory with a known value when use_deterministic_algorithms()
        is set to True (on by default, as torch's)."""
        return DETERMINISTIC[2]

    @fill_uninitialized_memory.setter
    def fill_uninitialized_memory(self, mode):
        if type(mode) is not bool:
            raise RuntimeError(f"expected a bool, but got {type(mode).__name__}")
        DETERMINISTIC[2] = mode


sys.modules[__name__].__class__ = _Deterministic

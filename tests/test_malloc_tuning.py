"""glibc's malloc thresholds set at import (tracegrad/_malloc.py): arrays freed together and
made again at every step come from the heap, not from fresh pages."""
import os
import subprocess
import sys

import pytest

from tracegrad import _malloc


class FakeLibc:
    def __init__(self, answer=1):
        self.calls, self.answer = [], answer

    def mallopt(self, option, value):
        self.calls.append((option, value))
        return self.answer


def test_the_thresholds_set_in_order():
    libc = FakeLibc()
    assert _malloc.tune({}, libc) is True
    assert libc.calls == [(-3, 32 << 20), (-1, 64 << 20), (-2, 16 << 20)]


@pytest.mark.parametrize("env", [{"TRACEGRAD_MALLOC_TUNING": "0"}, {"MALLOC_TOP_PAD_": "0"},
                                 {"MALLOC_MMAP_THRESHOLD_": "131072"}, {"MALLOC_TRIM_THRESHOLD_": "1"},
                                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"}])
def test_the_users_own_settings_and_the_opt_out_are_left_alone(env):
    libc = FakeLibc()
    assert _malloc.tune(env, libc) is False
    assert libc.calls == []


def test_a_libc_without_mallopt_or_refusing_it():
    assert _malloc.tune({}, object()) is False
    assert _malloc.tune({}, FakeLibc(answer=0)) is False


FAULTS = r"""
import resource, sys
import numpy as np
if sys.argv[1] == "import":
    import tracegrad
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
n = 1 << 18                                # 1 MiB of float32: 256 pages
for _ in range(3):
    a = np.ones(n, np.float32); b = np.ones(n, np.float32); del a, b
f0 = faults()
for _ in range(20):
    a = np.ones(n, np.float32); b = np.ones(n, np.float32); del a, b
print((faults() - f0) / 20)
"""


def _faults(mode, **env):
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True,
                         env=dict(os.environ, **env), cwd=os.path.dirname(os.path.dirname(__file__)))
    return float(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _malloc.TUNED,
                    reason="glibc's malloc only")
def test_two_arrays_freed_together_and_made_again_touch_no_new_pages():
    """Two 1 MiB arrays made and freed together: with glibc's own thresholds the heap top goes
    back to the system and each array faults in its 256 pages again (where this glibc does
    so: the check's sensitivity); after `import tracegrad` no page is new."""
    base = _faults("import", TRACEGRAD_MALLOC_TUNING="0")
    if base < 100:
        pytest.skip(f"this glibc keeps the pages without the settings ({base} faults per step)")
    assert _faults("import") < 16

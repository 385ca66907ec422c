"""glibc's malloc, set for arrays made and freed again at every step.

numpy takes every array's memory from malloc. glibc serves a request of 128 KiB or more with
a fresh mmap, and gives the top of its heap back to the system once more than twice the
largest such request lies free there; it raises both thresholds as it sees big blocks freed,
but a step that frees two arrays of the same size together (a forward's activations, a
backward's gradients) leaves the heap top over the trim threshold and returns it. The next
step then touches fresh pages: a minor page fault per 4 KiB page, on every array of every
step. On the 2-core machine of benchmarks/ a page fault costs ~2 µs; an MLP step
(784-512-512-10, batch 128) run eagerly took 8-10 ms instead of 4 ms in the processes that
fell into that pattern, with ~3,000 faults per step (`resource.getrusage().ru_minflt`).

`tune()` sets at import what glibc's own dynamic thresholds grow to, and keeps more at the
heap top: blocks up to 32 MiB come from the heap (M_MMAP_THRESHOLD, glibc's maximum for it),
and the heap top is given back once 64 MiB lie free there (M_TRIM_THRESHOLD), taken 16 MiB at
a time (M_TOP_PAD). The cost: up to 64 MiB of freed memory stays with the process. Nothing
is changed where the process runs on another C library, where the user set glibc's own
MALLOC_*_ variables or malloc tunables, or with TRACEGRAD_MALLOC_TUNING=0.
"""
import ctypes
import os

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
SETTINGS = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 64 << 20), (M_TOP_PAD, 16 << 20))
_USERS_OWN = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def tune(environ=os.environ, libc=None):
    """Set glibc's malloc thresholds (SETTINGS); True where they were set."""
    if environ.get("TRACEGRAD_MALLOC_TUNING", "1") == "0":
        return False
    if any(v in environ for v in _USERS_OWN) or "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return False                    # the user's own settings
    if libc is None:
        try:
            if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
                return False
        except (AttributeError, ValueError, OSError):
            return False                # no confstr, or no GNU C library
        try:
            libc = ctypes.CDLL("libc.so.6")
        except OSError:
            return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    return all([mallopt(option, value) == 1 for option, value in SETTINGS])


TUNED = tune()

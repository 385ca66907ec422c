"""torch.get_num_threads / set_num_threads and the inter-op pair: the threads of numpy's BLAS
(OpenBLAS, the library numpy's wheels carry, called through its own setter) and of the
generated code's fused groups."""
import ctypes
import glob
import os

import numpy as np

from .codegen import numpy_cpu

_BLAS = []          # [(get, set)] once looked up; (None, None) where numpy's BLAS is not OpenBLAS
_SYMBOLS = [(f"{p}_get_num_threads{s}", f"{p}_set_num_threads{s}")
            for p in ("scipy_openblas", "openblas") for s in ("64_", "")]


def _openblas():
    if not _BLAS:
        found = (None, None)
        site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
        for path in sorted(glob.glob(os.path.join(site, "numpy.libs", "*openblas*"))):
            try:
                lib = ctypes.CDLL(path)          # numpy loaded it already: the same library
            except OSError:
                continue
            for get_name, set_name in _SYMBOLS:
                get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
                if get is not None and put is not None:
                    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                    found = (get, put)
                    break
            if found[0] is not None:
                break
        _BLAS.append(found)
    return _BLAS[0]


def _positive_int(n, what):
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"{what} expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError(f"{what} expects a positive integer")


def get_num_threads():
    return numpy_cpu.THREADS


def set_num_threads(int):      # noqa: A002 - torch's parameter name
    _positive_int(int, "set_num_threads")
    numpy_cpu.set_threads(int)
    put = _openblas()[1]
    if put is not None:
        put(int)


_INTEROP = [1]


def get_num_interop_threads():
    return _INTEROP[0]


def set_num_interop_threads(int):      # noqa: A002 - torch's parameter name
    _positive_int(int, "set_num_interop_threads")
    _INTEROP[0] = int

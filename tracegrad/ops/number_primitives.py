"""Primitives for number-theoretic and representation functions of two tensors (torch.gcd, lcm,
nextafter), registered into the op table of primitives.py.

gcd and lcm take integer dtypes alone (torch's NotImplementedError for a float or bool common
dtype) and compute as torch's kernels: Euclid's algorithm on |a| and |b| with C's truncating
remainder, in the dtype, so that the most negative value's |x| stays negative (int8 gcd(-128, 0) is
-128) and lcm = |a / gcd * b| overflows as C's arithmetic does (int8 and int16 and uint8 in C's int,
then wrapped to the dtype: int8 lcm(100, 3) is 44; int32 and int64 wrap in their own width).
nextafter takes float dtypes alone and steps one representable value of the dtype toward the other
operand (bfloat16's values, stored as float32 here, step by bfloat16's own spacing). Derivatives:
none for gcd and lcm (integers); nextafter's, as torch's, passes the gradient to input and gives
other zeros. No Triton lowering: on CUDA tensors they run their numpy kernel on a host copy.
"""
import numpy as np

from . import lowering as T
from .primitives import binary, _no_kernel, _zeros_like

_HOST = T.Refuse("runs its numpy kernel on the host")


def _trunc_rem(b, a):
    """C's b % a (the sign of b) for integer arrays, a nonzero."""
    return np.fmod(b, a)


def _gcd(x, y):
    dt = np.result_type(x, y)
    a = np.abs(np.asarray(x, dtype=dt))           # (wraps at the most negative value, as C's abs)
    b = np.abs(np.asarray(y, dtype=dt))
    a, b = np.broadcast_arrays(a, b)
    a, b = a.copy(), b.copy()
    with np.errstate(all="ignore"):
        while True:
            nz = a != 0
            if not nz.any():
                return b
            c = a
            a = np.where(nz, _trunc_rem(b, np.where(nz, a, 1)), 0).astype(dt, copy=False)
            b = np.where(nz, c, b).astype(dt, copy=False)


def _lcm(x, y):
    dt = np.result_type(x, y)
    g = _gcd(x, y)
    wide = np.int32 if dt.itemsize < 4 else dt     # C's integer promotion of 8- and 16-bit operands
    a = np.asarray(x, dtype=dt).astype(wide)
    b = np.asarray(y, dtype=dt).astype(wide)
    gw = g.astype(wide)
    with np.errstate(all="ignore"):
        safe = np.where(gw == 0, 1, gw)
        q = a // safe
        q = np.where((q * safe != a) & ((a < 0) != (safe < 0)), q + 1, q).astype(wide, copy=False)  # C's a / g
        r = np.abs((q * b).astype(wide, copy=False))
    return np.where(g == 0, 0, r).astype(dt)


def _nextafter(x, y, bfloat16=False):
    if not bfloat16:
        r = np.nextafter(x, y)
        if r.dtype == np.float16:
            r = np.where(np.asarray(x) == y, y, r).astype(np.float16)   # (numpy's float16 gives x there: -0.0 to 0.0)
        return r
    # bfloat16 values are float32's with the low 16 bits zero: step their high 16 bits as a
    # 16-bit float's (sign and magnitude), as torch's bfloat16 nextafter
    xf = np.asarray(x, dtype=np.float32)
    yf = np.asarray(y, dtype=np.float32)
    xf, yf = np.broadcast_arrays(xf, yf)
    hi = (np.ascontiguousarray(xf).view(np.uint32) >> 16).astype(np.int64)
    mag = hi & 0x7FFF
    sign = hi & 0x8000
    with np.errstate(invalid="ignore"):
        up = (xf < yf) == (xf > 0)                 # away from 0 (for x != 0)
        step = np.where(up, mag + 1, mag - 1)
        bits = np.where(xf == 0, np.where(yf < 0, 0x8001, 0x0001), sign | step)
        out = (bits.astype(np.uint32) << 16).view(np.float32)
        out = np.where(xf == yf, yf, out)
        out = np.where((xf != xf) | (yf != yf), np.float32(np.nan), out)
    return out.astype(np.float32)


binary("gcd", _gcd, None, "", refuse={k: _no_kernel("gcd_cpu") for k in (0, 2)}, triton=_HOST)
binary("lcm", _lcm, None, "", refuse={k: _no_kernel("lcm_cpu") for k in (0, 2)}, triton=_HOST)
binary("nextafter", _nextafter, lambda g, out, x, y, bfloat16=False: (g, _zeros_like(g)), "",
       refuse={k: _no_kernel("nextafter_cpu") for k in (0, 1)}, triton=_HOST)

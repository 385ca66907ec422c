"""dtypes with torch's names and torch's type-promotion rules.

Each dtype carries the numpy dtype that stores it. bfloat16 has no numpy type, so
it is stored as float32 and rounded to bfloat16 precision after every op.
"""
import threading
import warnings

import numpy as np


class dtype:
    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_signed", "itemsize", "_rank", "_kind")

    def __init__(self, name, np_dtype, kind, rank, itemsize):
        self.name = name
        self.np = np.dtype(np_dtype)
        self._kind = kind            # 0 bool, 1 integer, 2 floating
        self._rank = rank            # order inside a kind
        self.is_floating_point = kind == 2
        self.is_complex = False
        self.is_signed = kind != 0 and name != "uint8"
        self.itemsize = itemsize

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return (_lookup, (self.name,))

    def to_real(self):
        return self


bool_ = dtype("bool", np.bool_, 0, 0, 1)
uint8 = dtype("uint8", np.uint8, 1, 0, 1)
int8 = dtype("int8", np.int8, 1, 1, 1)
int16 = dtype("int16", np.int16, 1, 2, 2)
int32 = dtype("int32", np.int32, 1, 3, 4)
int64 = dtype("int64", np.int64, 1, 4, 8)
float16 = dtype("float16", np.float16, 2, 1, 2)
bfloat16 = dtype("bfloat16", np.float32, 2, 1, 2)
float32 = dtype("float32", np.float32, 2, 2, 4)
float64 = dtype("float64", np.float64, 2, 3, 8)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(half=float16, float=float32, double=float64, long=int64, int=int32, short=int16)
_FROM_NP = {np.dtype(np.bool_): bool_, np.dtype(np.uint8): uint8, np.dtype(np.int8): int8,
            np.dtype(np.int16): int16, np.dtype(np.int32): int32, np.dtype(np.int64): int64,
            np.dtype(np.float16): float16, np.dtype(np.float32): float32, np.dtype(np.float64): float64}
# torch's legacy type names, used in some error messages ("torch.FloatTensor")
LEGACY = {float32: "FloatTensor", float64: "DoubleTensor", float16: "HalfTensor", bfloat16: "BFloat16Tensor",
          int64: "LongTensor", int32: "IntTensor", int16: "ShortTensor", int8: "CharTensor",
          uint8: "ByteTensor", bool_: "BoolTensor"}
# torch's short scalar-type names ("Float", "Long"), used in error messages
SCALAR_NAME = {float32: "Float", float64: "Double", float16: "Half", bfloat16: "BFloat16", int64: "Long",
               int32: "Int", int16: "Short", int8: "Char", uint8: "Byte", bool_: "Bool"}
# the C++ type names torch's messages use when a fill value overflows ("uint8_t") ...
C_NAME = {uint8: "uint8_t", int8: "int8_t", int16: "int16_t", int32: "int", int64: "int64_t", float32: "float",
          float64: "double", float16: "c10::Half", bfloat16: "c10::BFloat16", bool_: "bool"}
# ... and when random_'s bounds do not fit the dtype ("unsigned char")
C_RANGE_NAME = {uint8: "unsigned char", int8: "signed char", int16: "short int", int32: "int", int64: "long int",
                bool_: "bool"}
# ... and when it prints a tensor's dtype ("expected dtype c10::Half for `end` but got dtype float")
TYPE_NAME = {**C_RANGE_NAME, float32: "float", float64: "double", float16: "c10::Half", bfloat16: "c10::BFloat16"}


def _lookup(name):
    return _BY_NAME[name]


def from_numpy_dtype(npd):
    try:
        return _FROM_NP[np.dtype(npd)]
    except KeyError:
        raise TypeError(f"can't convert np.ndarray of type numpy.{np.dtype(npd).type.__name__}. "
                        "The only supported types are: "
                        "float64, float32, float16, int64, int32, int16, int8, uint8, and bool.") from None


def as_dtype(d):
    """Accept a tracegrad dtype, a numpy dtype or a Python type."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str):
        return _BY_NAME[d.replace("torch.", "")]
    return from_numpy_dtype(d)


_state = threading.local()
_default = [float32]


def get_default_dtype():
    return _default[0]


def set_default_dtype(d):
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type")
    _default[0] = d


# torch.set_float32_matmul_precision: "highest" keeps float32 matmuls in float32 (IEEE
# products); "high" and "medium" let a GPU round their inputs to TF32 (10 bits of mantissa) and
# use tensor cores. The numpy backend always computes in float32.
_matmul_precision = ["highest"]


def get_float32_matmul_precision():
    return _matmul_precision[0]


def set_float32_matmul_precision(precision):
    if precision not in ("highest", "high", "medium"):     # torch warns and keeps the setting
        warnings.warn(f"set_float32_matmul_precision: {precision!r} is not one of 'highest', 'high' or "
                      f"'medium'; the precision stays {_matmul_precision[0]!r}", UserWarning, stacklevel=2)
        return
    _matmul_precision[0] = precision


def promote_types(a, b):
    """torch.promote_types for the dtypes above."""
    if a is b:
        return a
    if a._kind != b._kind:
        return a if a._kind > b._kind else b
    if a._kind == 2 and a._rank == b._rank == 1:   # float16 with bfloat16
        return float32
    if a._kind == 1 and (a is uint8 or b is uint8):
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if a._rank > b._rank else b


def _category(d):
    return d._kind


def result_type(args):
    """torch.result_type over tensors and Python scalars (dimensioned tensors win
    inside a category; zero-dim tensors next; Python numbers only lift the category).
    A tensor is what carries a `_dtype` (Tensor and its symbolic Proxy): this module is core
    and never imports the tensor."""
    dim_r = zero_r = wrapped_r = None
    for a in args:
        d = getattr(a, "_dtype", None)
        if d is not None:
            if a.ndim:
                dim_r = d if dim_r is None else promote_types(dim_r, d)
            else:
                zero_r = d if zero_r is None else promote_types(zero_r, d)
        elif a is None:
            continue
        else:
            d = scalar_dtype(a)
            wrapped_r = d if wrapped_r is None else promote_types(wrapped_r, d)
    return _combine(dim_r, _combine(zero_r, wrapped_r))


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher._kind == 2:
        return higher
    if higher is bool_ or lower._kind == 2:
        return promote_types(higher, lower)
    return higher


def scalar_dtype(x):
    if isinstance(x, (bool, np.bool_)):
        return bool_
    if isinstance(x, (int, np.integer)):
        return int64
    if isinstance(x, (float, np.floating)):
        return _default[0]
    raise TypeError(f"unsupported scalar type {type(x).__name__}")


def integer_bounds(d):
    """The values a Python number may take to be stored in integer dtype d without torch's overflow error:
    floats must lie in [min, max]; ints too, except that unsigned types also take -max..-1 (wrapping)."""
    info = np.iinfo(d.np)
    return int(info.min), int(info.max), (-int(info.max) if info.min == 0 else int(info.min))


def cast(a, d):
    """A numpy array converted to d's storage as torch converts: float64 reaches float16 and bfloat16
    through float32 (torch rounds twice), bfloat16 keeps float32 storage rounded to 8 bits."""
    a = np.asarray(a)
    if d is bfloat16:
        return round_bfloat16(a)
    # a broadcast (stride 0) comes out C-contiguous, as torch's; numpy's order 'K' would make
    # the stride-0 axis the innermost
    order = "C" if 0 in a.strides else "K"
    with np.errstate(invalid="ignore", over="ignore"):
        if d is float16 and a.dtype == np.float64:
            a = a.astype(np.float32, order=order)
        return a.astype(d.np, order=order)


def as_dtype_array(out, dt):
    """A kernel's result as the ndarray that stores dtype `dt` (cast; bfloat16 rounded)."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.dtype != dt.np:
        out = out.astype(dt.np) if dt is not bfloat16 else round_bfloat16(out)
    elif dt is bfloat16:
        out = round_bfloat16(out)
    return out


def round_bfloat16(a):
    """Round a float32 array to the nearest bfloat16 value (ties to even), in float32."""
    shape = np.shape(a)
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32)
    finite = np.isfinite(a)
    rounded = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = np.where(finite, rounded, bits).view(np.float32)
    return out.reshape(shape)


class finfo:
    """Machine limits of a floating point dtype, as torch.finfo."""

    def __init__(self, type=None):
        d = get_default_dtype() if type is None else type
        if not d.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        if d is bfloat16:
            self.bits, self.eps, self.max, self.tiny, self.resolution = 16, 2.0 ** -7, 3.3895313892515355e+38, \
                2.0 ** -126, 0.01
        else:
            f = np.finfo(d.np)
            self.bits, self.eps, self.max, self.tiny, self.resolution = int(f.bits), float(f.eps), float(f.max), \
                float(f.tiny), 10.0 ** -int(f.precision)
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype, as torch.iinfo."""

    def __init__(self, type):
        if type is bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        i = np.iinfo(type.np)
        self.bits, self.min, self.max, self.dtype = int(i.bits), int(i.min), int(i.max), type.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"

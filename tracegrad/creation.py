"""Creation functions: tensor, as_tensor, from_numpy, zeros, ones, full, arange, rand, ...

Each follows torch's argument parsing, dtype inference, overflow checks and error messages;
arange and linspace reproduce the arithmetic of torch's CPU kernels, so the values match bit for bit.
"""
import collections.abc
import functools
import json
import math
import os
import sys
import threading
import warnings

import numpy as np

from . import _dtype as D
from .tensor import Tensor, Size, Above, escape, check_format_rank, read_setting
from .ir.layout import dense_axes, iterator_order, tensor_order, FORMAT_ORDERS
from .ir.symbolic import Sym
from .tracing import apply, _ACTIVE, TRACING, LOCAL, user_file, TraceError
from .ops.primitives import PRIMITIVES


class _RNG(threading.local):
    def __init__(self):
        self.gen = np.random.default_rng(_SEED[0])


_SEED = [0]
RNG = _RNG()


class Generator:
    """torch.Generator: a random stream of its own, for `generator=` arguments (numpy's PCG64:
    the streams differ from torch's). Seeded with torch's default seed until manual_seed."""

    def __init__(self, device="cpu"):
        self.device = device if not isinstance(device, str) else _device_of(device)
        self._seed = 67280421310721
        self._np = np.random.default_rng(self._seed)

    def manual_seed(self, seed):
        _no_state_change_in_trace()
        self._seed = int(seed)
        self._np = np.random.default_rng(self._seed)
        return self

    def seed(self):
        s = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self):
        _no_state_change_in_trace()
        return self._seed

    def get_state(self):
        """The stream's state as a uint8 tensor (what set_state takes back)."""
        _no_state_change_in_trace()
        raw = json.dumps(self._np.bit_generator.state).encode()
        return _finish(np.frombuffer(raw, np.uint8).copy(), D.uint8, False)

    def set_state(self, new_state):
        _no_state_change_in_trace()
        if not isinstance(new_state, Tensor) or new_state.dtype is not D.uint8:
            raise TypeError(f"expected a torch.ByteTensor, but got {_tpname(new_state)}")
        state = json.loads(new_state._data.tobytes().decode())
        bit_gen = getattr(np.random, state["bit_generator"])()
        bit_gen.state = state
        self._np = np.random.Generator(bit_gen)
        return self

    def __repr__(self):
        return f"<torch._C.Generator object at {hex(id(self))}>"


class _DefaultGenerator(Generator):
    """torch.default_generator: the global stream (this thread's) that manual_seed seeds."""

    def __init__(self):
        self.device = "cpu"

    @property
    def _seed(self):
        return _SEED[0]

    @_seed.setter
    def _seed(self, value):
        _SEED[0] = value

    @property
    def _np(self):
        return RNG.gen

    @_np.setter
    def _np(self, gen):
        RNG.gen = gen


default_generator = _DefaultGenerator()


def manual_seed(seed):
    """Seed the global generator (numpy's PCG64: the streams differ from torch's)."""
    return default_generator.manual_seed(seed)


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


def _device_of(device):
    return device


def takes_generator(fn):
    """fn(..., generator=g) draws from g's stream instead of the global one."""
    @functools.wraps(fn)
    def draw(*args, generator=None, **kwargs):
        if generator is None:
            return fn(*args, **kwargs)
        if not isinstance(generator, Generator):
            raise TypeError(f"{fn.__name__}(): argument 'generator' must be torch.Generator, not "
                            f"{_tpname(generator)}")
        gen = RNG.gen
        getattr(gen, "bit_generator")      # while compile traces, the global stream refuses: so must this one
        RNG.gen = generator._np
        try:
            return fn(*args, **kwargs)
        finally:
            generator._np = RNG.gen
            RNG.gen = gen
    return draw


def seed():
    """Seed the global generator from the operating system's entropy; return the seed."""
    return default_generator.seed()


def initial_seed():
    _no_state_change_in_trace()
    return _SEED[0]


def _check_device(device):
    if device is not None and str(device).split(":")[0] != "cpu":
        if str(device).startswith("cuda"):
            raise RuntimeError("Torch not compiled with CUDA enabled")
        raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {device}")


def _tpname(x):
    """A type's name as torch's messages print it (Python's tp_name: 'list', 'numpy.float64')."""
    t = type(x)
    if isinstance(x, Tensor):
        return "Tensor"
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _created(t):
    """A concrete tensor made while a compiled function is traced: the trace's own (a write
    into it is no write-back to a tensor from outside; functionalize.commit_traced)."""
    if _ACTIVE[0] and TRACING.stack:
        sh = LOCAL.shadow
        if sh is not None:
            sh.created[id(t)] = t
    return t


def _no_state_change_in_trace():
    if _ACTIVE[0] and TRACING.stack:
        raise TraceError("a random generator seeded, or its state read or set, while a compiled function is traced: a "
                         "program would not do it at later calls; seed outside the compiled function")


def _new_leaf_in_trace():
    raise TraceError("a tensor made with requires_grad=True while a compiled function is traced would be a leaf of a "
                     "graph of its own, which a program does not have (autograd.functional's hvp, jvp and hessian "
                     "make such leaves); make it outside the compiled function and pass it in")


def _finish(data, dtype, requires_grad):
    t = _created(Tensor._make(data, dtype))
    if requires_grad:
        if _ACTIVE[0] and TRACING.stack:
            _new_leaf_in_trace()
        if not dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad = True
    return t


def _wrap_np(a, dtype=None):
    dt = dtype or D.from_numpy_dtype(a.dtype)
    if a.dtype != dt.np:
        a = a.astype(dt.np)
    return _created(Tensor._make(a, dt))


def ones_like_data(t):
    if t.is_cuda:
        return Tensor._make(Above.to_device(np.ones(t._data.shape, t._dtype.np), t._dtype), t._dtype)
    shape = t._data.shape
    if shape == ():                      # a scalar loss's seed: np.array is several times np.ones's speed
        return Tensor._make(np.array(1, t._dtype.np), t._dtype)
    return Tensor._make(np.ones(shape, t._dtype.np), t._dtype)


# == tensor(): torch's inference of shape and dtype from nested Python data =========================

def _is_sequence(x):
    return isinstance(x, (list, tuple, range, np.ndarray)) or \
        (isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes)))


def _infer_dtype(obj):
    """torch's infer_scalar_type: numbers give the default float dtype, int64 or bool, numpy values and
    tensors their own dtype, and a sequence the promotion of all its elements."""
    if isinstance(obj, (np.generic, np.ndarray)):
        return D.from_numpy_dtype(obj.dtype)
    if isinstance(obj, float):
        return D.get_default_dtype()
    if isinstance(obj, bool):
        return D.bool_
    if isinstance(obj, int):
        return D.int64
    if isinstance(obj, Tensor):
        return obj.dtype
    if isinstance(obj, complex):
        raise TypeError("tracegrad has no complex dtypes")
    if isinstance(obj, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{_tpname(obj)}'")
    if _is_sequence(obj):
        types = set(map(type, obj))
        if types and types <= {int, float, bool}:
            return D.get_default_dtype() if float in types else D.int64 if int in types else D.bool_
        result = None
        for x in obj:
            d = _infer_dtype(x)
            result = d if result is None else D.promote_types(result, d)
        return D.get_default_dtype() if result is None else result
    raise RuntimeError(f"Could not infer dtype of {_tpname(obj)}")


def _infer_sizes(obj):
    """torch's compute_sizes: the lengths along the first element of each level."""
    sizes = []
    while _is_sequence(obj):
        if isinstance(obj, np.ndarray) and obj.ndim:
            sizes.extend(obj.shape)
            break
        n = len(obj)
        sizes.append(n)
        if n == 0:
            break
        obj = obj[0]
    return sizes


def _flatten(obj, sizes, dim, out):
    """Collect the scalars of a nested sequence in order, with torch's errors for ragged data.
    A numpy array's values stay numpy scalars, which integer dtypes refuse unless they are integers."""
    if dim == len(sizes):
        out.append(obj)
        return
    if isinstance(obj, np.ndarray) and obj.shape == tuple(sizes[dim:]):
        out.extend(obj.ravel().tolist() if obj.dtype in (np.float64, np.int64) else list(obj.ravel()))
        return
    if not _is_sequence(obj):
        raise TypeError("not a sequence")
    if len(obj) != sizes[dim]:
        raise ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} (got {len(obj)})")
    if dim == len(sizes) - 1 and not isinstance(obj, np.ndarray):
        out.extend(obj)
        return
    for x in obj:
        _flatten(x, sizes, dim + 1, out)


def _store_all(flat, dt):
    """_store over many scalars, vectorised when they are all plain Python numbers in range."""
    types = set(map(type, flat))
    if types <= {int, float, bool}:
        try:
            if dt.is_floating_point:
                return np.array(flat, dtype=np.float64)
            if dt is D.bool_:
                return np.array(flat, dtype=np.float64) != 0
            if float not in types:
                arr = np.array(flat, dtype=np.int64)
                lo, hi, int_lo = D.integer_bounds(dt)
                if dt is D.int64 or (arr.min() >= int_lo and arr.max() <= hi):
                    return arr
            elif int not in types:
                arr = np.array(flat, dtype=np.float64)
                lo, hi, _ = D.integer_bounds(dt)
                if ((arr >= lo) & (arr <= hi)).all():
                    return np.trunc(arr).astype(np.int64)
        except OverflowError:
            pass
    values = [_store(v, dt) for v in flat]
    return np.array(values, dtype=np.float64 if dt.is_floating_point else np.bool_ if dt is D.bool_ else np.int64)


def _store(v, dt):
    """One Python scalar checked and converted for dtype dt, as torch's store_scalar does."""
    if dt.is_floating_point:
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, Tensor):
            if v.numel() != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            v = v.item()
        if not isinstance(v, (int, float)):
            raise TypeError(f"must be real number, not {_tpname(v)}")
        return float(v)
    # integer and bool dtypes take numbers through __index__, which numpy floats and bools lack
    # (numpy.float64 is a Python float)
    if isinstance(v, np.integer) or (isinstance(v, np.bool_) and dt is D.bool_):
        v = v.item()
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point or v.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        v = v.item()
    if not isinstance(v, (int, float)) or (isinstance(v, np.generic) and not isinstance(v, np.float64)):
        raise TypeError(f"'{_tpname(v)}' object cannot be interpreted as an integer")
    if dt is D.bool_:
        return bool(v)
    lo, hi, int_lo = D.integer_bounds(dt)
    if isinstance(v, float):
        if not lo <= v <= hi:
            raise RuntimeError(f"value cannot be converted to type {dt.name} without overflow")
        return int(v)
    if not -2 ** 63 <= v < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    if not int_lo <= v <= hi:
        raise RuntimeError(f"value cannot be converted to type {dt.name} without overflow")
    return int(v)


def _from_python(data, dt):
    """The numpy storage for nested Python data converted to dtype dt."""
    sizes = _infer_sizes(data)
    if 0 in sizes:
        return np.zeros(sizes, dt.np)
    flat = []
    _flatten(data, sizes, 0, flat)
    return D.cast(_store_all(flat, dt), dt).reshape(sizes)


def _check_numpy(a):
    if not a.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. "
                         "Conversion between byte orders is currently not supported.")
    dt = D.from_numpy_dtype(a.dtype)
    if any(s < 0 for s in a.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors with negative "
                         "strides are not currently supported. (You can probably work around this by making a "
                         "copy of your array  with array.copy().) ")
    return dt


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Copy `data` into a new leaf tensor (torch.tensor)."""
    _check_device(device)
    if dtype is not None:
        dtype = D.as_dtype(dtype)
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        dt = dtype or data.dtype
        arr = D.cast(data._data, dt) if dt is not data.dtype else data._data.copy()
    elif isinstance(data, np.ndarray):
        src = _check_numpy(data)
        dt = dtype or src
        arr = D.cast(data, dt) if dt.np != data.dtype or dt is D.bfloat16 else data.copy()
    else:
        dt = dtype or _infer_dtype(data)
        arr = _from_python(data, dt)
    return _finish(np.asarray(arr, order="C"), dt, requires_grad)


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {_tpname(ndarray)})")
    dt = _check_numpy(ndarray)
    if not ndarray.flags.writeable:
        warnings.warn("The given NumPy array is not writable, and PyTorch does not support non-writable tensors. "
                      "This means writing to this tensor will result in undefined behavior. You may want to copy "
                      "the array to protect its data or make it writable before converting it to a tensor. This "
                      "type of warning will be suppressed for the rest of this program.", UserWarning, stacklevel=2)
    escape(ndarray)
    return Tensor._make(ndarray, dt)


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, sharing memory with a tensor or numpy array of the same dtype."""
    _check_device(device)
    dtype = None if dtype is None else D.as_dtype(dtype)
    if isinstance(data, Tensor):
        return data if dtype is None or dtype is data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray):
        t = from_numpy(data)
        if dtype is None or dtype is t.dtype:
            return t
        return Tensor._make(D.cast(data, dtype), dtype)
    return tensor(data, dtype=dtype)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """torch.asarray: shares memory with a tensor or numpy array unless a copy is asked for or needed."""
    if copy and isinstance(obj, Tensor):
        dt = obj.dtype if dtype is None else D.as_dtype(dtype)
        t = Tensor._make(D.cast(obj._data, dt) if dt is not obj.dtype else obj._data.copy(), dt)
    elif copy:
        t = tensor(obj, dtype=dtype, device=device)
    else:
        t = as_tensor(obj, dtype=dtype, device=device)
        if copy is False and not (t is obj or (isinstance(obj, np.ndarray) and t._data is obj)):
            raise ValueError("can't alias the given object: a copy is needed to convert it")
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_dlpack(ext):
    if isinstance(ext, Tensor):
        if ext.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        return Tensor._make(ext._data, ext._dtype)
    return from_numpy(np.from_dlpack(ext))


# == sizes and fill values ==========================================================================

def _int_like(x):
    if isinstance(x, Tensor):
        return not x.dtype.is_floating_point and x.numel() == 1
    return isinstance(x, (int, np.integer)) or type(x) is Sym     # (a symbolic size while compiling)


def _size(name, size):
    """The `size` argument of zeros/ones/empty/rand/randn: ints as varargs or one sequence."""
    if len(size) == 0:
        raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
    if len(size) == 1 and _is_sequence(size[0]) and not isinstance(size[0], np.ndarray):
        items = tuple(size[0])
    elif len(size) == 1:
        if not _int_like(size[0]) or isinstance(size[0], bool):
            raise TypeError(f"{name}(): argument 'size' (position 1) must be tuple of ints, not {_tpname(size[0])}")
        items = size
    else:
        items = size
    out = []
    for i, s in enumerate(items):
        if not _int_like(s):
            raise TypeError(f"{name}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                            f"\"type must be tuple of ints,but got {_tpname(s)}\"")
        out.append(s if type(s) is Sym else int(s))
    _check_nonnegative(name, out)
    return tuple(out)


def _check_nonnegative(name, shape):
    for s in shape:
        if s < 0:
            if name == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")


def _creation_dtype(dtype):
    return D.get_default_dtype() if dtype is None else D.as_dtype(dtype)


def _number(x, op, arg, pos):
    """A Number argument (Python or numpy number, or a zero-dim tensor) as a Python scalar."""
    if isinstance(x, Tensor) and x.ndim == 0:
        return x.item()
    if isinstance(x, np.generic):
        return x.item()
    if not isinstance(x, (int, float)):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Number, not {_tpname(x)}")
    return x


_FLOAT_MAX = {D.float16: 65504.0, D.bfloat16: 3.3895313892515355e38, D.float32: float(np.finfo(np.float32).max)}


def _fill_value(v, dt, numel=None):
    """A fill value converted to dt with the overflow check torch's fill_ makes (which a one-element
    fill of a 16-bit float skips: it rounds to inf instead)."""
    if dt is D.bool_:
        return bool(v)
    if dt.is_floating_point:
        top = _FLOAT_MAX.get(dt)
        if top is not None and math.isfinite(v) and abs(v) > top and not (numel == 1 and dt is not D.float32):
            raise RuntimeError(f"value cannot be converted to type {D.C_NAME[dt]} without overflow")
        return float(v)
    lo, hi, int_lo = D.integer_bounds(dt)
    if not (lo <= v <= hi if isinstance(v, float) else int_lo <= v <= hi):
        raise RuntimeError(f"value cannot be converted to type {D.C_NAME[dt]} without overflow")
    return int(v)


def stored_scalar(v, dt, numel=None):
    """A Python number as torch's fill_ and setitem store it in dt: torch's overflow check (a
    RuntimeError naming the type), then converted as torch converts (an unsigned type takes -1
    as its largest value). A 0-dim array of dt's storage."""
    return _filled((), _fill_value(v, dt, numel), dt)


def _filled(shape, value, dt):
    a = np.full(shape, value, dtype=np.float64 if dt.is_floating_point else dt.np if dt is D.bool_ else np.int64)
    return D.cast(a, dt)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    _check_device(device)
    if not isinstance(size, (tuple, list, Size)):
        raise TypeError(f"full(): argument 'size' (position 1) must be tuple of ints, not {_tpname(size)}")
    for i, s in enumerate(size):
        if not _int_like(s):
            raise TypeError(f"full(): argument 'size' (position 1) must be tuple of ints, but found element of "
                            f"type {_tpname(s)} at pos {i}")
    size = tuple(s if type(s) is Sym else int(s) for s in size)
    _check_nonnegative("full", size)
    value = _number(fill_value, "full", "fill_value", 2)
    if dtype is None:               # a numpy bool is not a Python bool: torch fills it as a float
        is_bool = isinstance(value, bool) and not isinstance(fill_value, np.bool_)
        dtype = D.bool_ if is_bool else D.int64 if isinstance(value, int) and not isinstance(fill_value, np.bool_) \
            else D.get_default_dtype()
    dtype = D.as_dtype(dtype)
    value = _fill_value(value, dtype, math.prod(size))
    if _ACTIVE[0] and TRACING.stack:
        if requires_grad:
            _new_leaf_in_trace()
        return apply(PRIMITIVES["full"], (), {"shape": size, "value": value, "dtype": dtype})
    return _finish(_filled(size, value, dtype), dtype, requires_grad)


def zeros(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    return full(_size("zeros", size), 0, dtype=_creation_dtype(dtype), device=device, requires_grad=requires_grad)


def ones(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    return full(_size("ones", size), 1, dtype=_creation_dtype(dtype), device=device, requires_grad=requires_grad)


# use_deterministic_algorithms' mode and warn_only, and torch.utils.deterministic's
# fill_uninitialized_memory (torch's default: on)
DETERMINISTIC = [False, False, True]


def uninitialized_fill(dt):
    """What an empty tensor of dtype `dt` holds: with use_deterministic_algorithms(True) and
    fill_uninitialized_memory on, torch's known values (NaN for a floating dtype, the dtype's
    largest value for an integer one, True for bool); else zeros (torch's memory as it was)."""
    read_setting("deterministic", lambda: DETERMINISTIC[0])         # (a compiled function is guarded on them)
    read_setting("deterministic_fill", lambda: DETERMINISTIC[2])
    if not (DETERMINISTIC[0] and DETERMINISTIC[2]):
        return 0
    if dt.is_floating_point:
        return math.nan
    if dt is D.bool_:
        return True
    return int(np.iinfo(dt.np).max)


def _uninitialized(shape, fill, dt):
    """An array of `shape` holding `fill` (zeros from calloc's zeroed pages where it is 0: a large
    empty() costs no pass over its memory)."""
    return np.zeros(shape, dtype=dt.np) if fill == 0 else np.full(shape, fill, dtype=dt.np)


def empty(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
          memory_format=None):
    _check_device(device)
    dt = _creation_dtype(dtype)
    shape = _size("empty", size)
    name = getattr(memory_format, "_name", None)
    perm = FORMAT_ORDERS.get(name)
    check_format_rank(len(shape), name)
    fill = uninitialized_fill(dt)
    if _ACTIVE[0] and TRACING.stack:
        t = full(shape, fill, dtype=dt, requires_grad=requires_grad and perm is None)     # a value of the trace
        if perm is not None:
            t = t.clone(memory_format=memory_format)
            if requires_grad:
                t = t.detach().requires_grad_()
        return t
    if perm is not None:
        # channels_last: NHWC in memory
        return _finish(_uninitialized(tuple(shape[k] for k in perm), fill, dt).transpose(np.argsort(perm)), dt,
                       requires_grad)
    return _finish(_uninitialized(shape, fill, dt), dt, requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialized tensor of `size` laid out with element strides `stride` (as empty)."""
    _check_device(device)
    dt = _creation_dtype(dtype)
    shape = _size("empty_strided", (size,))
    stride = tuple(int(st) for st in stride)
    if len(stride) != len(shape):
        raise RuntimeError(f"dimensionality of sizes ({len(shape)}) must match dimensionality of strides "
                           f"({len(stride)})")
    if _ACTIVE[0] and TRACING.stack:
        raise TraceError("empty_strided inside a compiled function is not traced yet")
    n = 0 if 0 in shape else 1 + sum((k - 1) * st for k, st in zip(shape, stride))
    flat = _uninitialized(n, uninitialized_fill(dt), dt)
    data = np.lib.stride_tricks.as_strided(flat, shape, tuple(st * flat.itemsize for st in stride))
    return _finish(data, dt, requires_grad)


def _like_layout(input, memory_format):
    """How torch's preserve_format lays out a *_like result, where that is not C-contiguous: as
    clone lays input out (its strides where dense, else a dense layout in its strides' order; C
    where a stride is 0), as (the shape of a C-contiguous array, the permutation of it). None:
    C-contiguous. ones_like of a transposed or diagonal view was C-contiguous, so that a .view(-1)
    of it ran where torch's raises (mutation fuzzer seed 9698)."""
    name = getattr(memory_format, "_name", None)
    if name in FORMAT_ORDERS:
        # channels_last: NHWC in memory, whatever input's layout
        perm = FORMAT_ORDERS[name]
        check_format_rank(input.dim(), name)
        return tuple(input.shape[k] for k in perm), tuple(int(k) for k in np.argsort(perm))
    if memory_format is not None and name != "preserve_format":
        return None                         # (contiguous_format)
    data = input._data
    if data is None:
        if not hasattr(input, "_eager_scratch"):
            return None
        data = input._eager_scratch()       # a traced value: its layout as eager's (None: C)
    if data.__class__ is not np.ndarray or data.ndim < 2 or data.flags.c_contiguous or \
            any(st == 0 for st, n in zip(data.strides, data.shape) if n > 1):
        return None
    order = iterator_order(data.shape, [(data.shape, data.strides)])
    if order == tuple(k for k, n in enumerate(data.shape) if n > 1):
        return None
    # (a traced value's sizes may be symbolic: its scratch array has their hints)
    axes = dense_axes(data.shape, order)
    return tuple(input.shape[k] for k in axes), tuple(int(k) for k in np.argsort(axes))


def _laid_out_like(make, input, memory_format, dtype, device, requires_grad):
    """make(shape, dtype, device, requires_grad) of input's shape, laid out as _like_layout says."""
    lay = None if input.is_cuda else _like_layout(input, memory_format)
    if lay is None:
        return make(tuple(input.shape), dtype, device, requires_grad)
    c_shape, axes = lay
    if _ACTIVE[0] and TRACING.stack:
        if requires_grad:
            return make(tuple(input.shape), dtype, device, requires_grad)      # a leaf made in a trace
        return make(c_shape, dtype, device, False).permute(*axes)
    t = make(c_shape, dtype, device, False)
    out = t._data.transpose(axes)
    data = input._data
    if getattr(memory_format, "_name", None) not in FORMAT_ORDERS and tensor_order(data) is not None:
        # dense: input's strides themselves, those of its size-1 axes too
        item = out.itemsize
        out = np.lib.stride_tricks.as_strided(np.empty(data.size, out.dtype), data.shape,
                                              tuple(st // data.itemsize * item for st in data.strides))
        np.copyto(out, t._data.transpose(axes))
    return _finish(out, t.dtype, requires_grad)


def _like(fn):
    def like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
        return _laid_out_like(lambda shape, dt, dev, req: fn(shape, dtype=dt, device=dev, requires_grad=req),
                              input, memory_format, dtype or input.dtype, device, requires_grad)
    like.__name__ = fn.__name__ + "_like"
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    return _laid_out_like(lambda shape, dt, dev, req: full(shape, fill_value, dtype=dt, device=dev, requires_grad=req),
                          input, memory_format, dtype or input.dtype, device, requires_grad)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    _check_device(device)
    if not _int_like(n) or (m is not None and not _int_like(m)):
        if m is None:
            raise TypeError(f"eye(): argument 'n' (position 1) must be int, not {_tpname(n)}")
        raise TypeError(f"eye() received an invalid combination of arguments - got ({_tpname(n)}, {_tpname(m)}), "
                        "but expected one of:\n"
                        " * (int n, *, Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, "
                        "torch.device device = None, bool pin_memory = False, bool requires_grad = False)\n"
                        " * (int n, int m, *, Tensor out = None, torch.dtype dtype = None, torch.layout layout = "
                        "None, torch.device device = None, bool pin_memory = False, bool requires_grad = False)\n")
    n = int(n)
    m = n if m is None else int(m)
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dt = _creation_dtype(dtype)
    return _finish(np.eye(n, m, dtype=dt.np), dt, requires_grad)


# == arange and linspace: torch's CPU kernels, operation for operation ============================

def _fma(a, b, c):
    """a * b + c with one rounding, in float64: torch's kernels compile `start + step * i` to a fused
    multiply-add. Dekker's exact product and Knuth's exact sum carry the error terms."""
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b

        def split(x):
            t = 134217729.0 * x
            hi = t - (t - x)
            return hi, x - hi
        ah, al = split(a)
        bh, bl = split(b)
        p_err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        s = c + p
        bb = s - c
        s_err = (c - (s - bb)) + (p - bb)
        out = s + (s_err + p_err)
    return np.where(np.isfinite(out), out, c + p)


def _round_to(dt):
    """Rounding of a float32 value to a 16-bit float dtype, in float32."""
    if dt is D.bfloat16:
        return lambda x: D.round_bfloat16(np.asarray(x, np.float32))
    return lambda x: np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


# torch's arange kernel writes SIMD vectors of this many bytes, two per loop, each as base + i * step
# from a base rounded to the dtype; the tail that does not fill two vectors is written element by element.
_VEC_BYTES = 32


def _arange_float(start, step, n, dt):
    k = np.arange(n, dtype=np.float64)
    width = _VEC_BYTES // dt.itemsize
    nvec = n // (2 * width) * (2 * width)
    lane = k[:nvec] % width
    if dt in (D.float32, D.float64):
        out = _fma(step, k, start).astype(dt.np)
        base = _fma(step, k[:nvec] - lane, start).astype(dt.np).astype(np.float64)
        out[:nvec] = _fma(lane, step, base).astype(dt.np)
        return out
    r = _round_to(dt)                   # half types accumulate in float32
    start, step = float(np.float32(start)), float(np.float32(step))
    out = r(_fma(step, k, start).astype(np.float32))
    base = r(_fma(step, k[:nvec] - lane, start).astype(np.float32)).astype(np.float64)
    out[:nvec] = r(_fma(lane, step, base).astype(np.float32))
    return out.astype(dt.np)


def _arange_args(start, end, step):
    vals = []
    for v, name, pos in ((start, "start", 1), (end, "end", 2), (step, "step", 3)):
        vals.append(_number(v, "arange", name, pos))
    return vals


def _trunc_int64(x):
    if not -2.0 ** 63 <= x < 2.0 ** 63:
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return int(x)


def arange(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
           pin_memory=False):
    _check_device(device)
    if end is None:
        start, end = 0, start
    s, e, st = _arange_args(start, end, step)
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(v, float) for v in (s, e, st)) else D.int64
    dtype = D.as_dtype(dtype)
    if dtype is D.bool_:
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    fs, fe, fst = float(s), float(e), float(st)
    if not (fst > 0 or fst < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(fs) and math.isfinite(fe)):
        raise RuntimeError(f"unsupported range: {fs:g} -> {fe:g}")
    if not ((fst > 0 and fe >= fs) or (fst < 0 and fe <= fs)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is D.int64:                # torch sizes int64 ranges in integers, after truncation
        xs, xe, xst = _trunc_int64(s), _trunc_int64(e), _trunc_int64(st)
        if xst == 0:
            raise ValueError("step must be nonzero")
        num = xe - xs + xst - (1 if xst > 0 else -1)
        n = abs(num) // abs(xst) * (1 if (num >= 0) == (xst > 0) else -1)
    else:
        size = math.ceil((fe - fs) / fst) if math.isfinite((fe - fs) / fst) else math.inf
        if not 0 <= size <= 2 ** 63 - 1:
            raise RuntimeError("invalid size, possible overflow?")
        n = int(size)
    if n < 0:
        raise RuntimeError("invalid size, possible overflow?")
    if dtype.is_floating_point:
        data = _arange_float(fs, fst, n, dtype)
    else:
        with np.errstate(over="ignore"):
            data = (_trunc_int64(s) + _trunc_int64(st) * np.arange(n, dtype=np.int64)).astype(dtype.np)
    return _finish(data, dtype, requires_grad)


def _linspace_bound(x, name):
    if isinstance(x, Tensor):
        if x.ndim != 0:
            raise RuntimeError(f"linspace only supports 0-dimensional start and end tensors, but got {name} with "
                               f"{x.ndim} dimension(s).")
        return x.item()
    return _number(x, "linspace", name, 1 if name == "start" else 2)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False):
    _check_device(device)
    if not _int_like(steps) or isinstance(steps, bool):
        raise TypeError(f"linspace() received an invalid combination of arguments - got ({_tpname(start)}, "
                        f"{_tpname(end)}, {_tpname(steps)}), but expected one of:\n"
                        " * (Tensor start, Tensor end, int steps, *, Tensor out = None, torch.dtype dtype = None, "
                        "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                        "bool requires_grad = False)\n"
                        " * (Number start, Tensor end, int steps, *, Tensor out = None, torch.dtype dtype = None, "
                        "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                        "bool requires_grad = False)\n"
                        " * (Tensor start, Number end, int steps, *, Tensor out = None, torch.dtype dtype = None, "
                        "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                        "bool requires_grad = False)\n"
                        " * (Number start, Number end, int steps, *, Tensor out = None, torch.dtype dtype = None, "
                        "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                        "bool requires_grad = False)\n")
    s, e, n = _linspace_bound(start, "start"), _linspace_bound(end, "end"), int(steps)
    if n < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _creation_dtype(dtype)
    if dt is D.bool_:
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    if n <= 1:
        return _finish(_filled((n,), _fill_value(s, dt, n), dt), dt, requires_grad)
    s, e = _fill_value(s, dt), _fill_value(e, dt)
    i = np.arange(n, dtype=np.float64)
    back = n - 1 - i                    # torch fills the first half from start, the second from end
    if dt is D.float64:
        s, e = float(s), float(e)
        step = (e - s) / (n - 1)
        lo, hi = _fma(step, i, s), _fma(-step, back, e)
    elif dt is D.float32:
        s, e = np.float32(s), np.float32(e)
        step = float((e - s) / np.float32(n - 1))
        lo, hi = _fma(step, i, float(s)), _fma(-step, back, float(e))
    elif dt.is_floating_point:          # half types round after every operation
        r = _round_to(dt)
        s, e = r(s), r(e)
        step = r(r(e - s) / r(n - 1))
        lo, hi = r(s + r(step * r(i))), r(e - r(step * r(back)))
    else:                               # integer types: bounds truncated, step in double
        step = (float(e) - float(s)) / (n - 1)
        lo, hi = np.trunc(_fma(step, i, s)), np.trunc(_fma(-step, back, e))
    vals = np.where(i < n // 2, lo, hi)
    data = vals.astype(np.int64).astype(dt.np) if not dt.is_floating_point else D.cast(vals, dt)
    return _finish(data, dt, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False):
    dt = _creation_dtype(dtype)
    return _finish(D.cast(np.power(base, linspace(start, end, steps, dtype=D.float64)._data), dt), dt,
                   requires_grad)


# == random ========================================================================================

def _check_random_float(dt, kernel):
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[dt]}'")


def _uniform(shape, dt):
    """Uniform samples in [0, 1) that stay below 1 after rounding to dt."""
    if dt in (D.float16, D.bfloat16):
        bits = 11 if dt is D.float16 else 8
        return D.cast(RNG.gen.integers(0, 2 ** bits, shape) * 2.0 ** -bits, dt)
    return RNG.gen.random(shape, dtype=dt.np)


@takes_generator
def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    _check_device(device)
    dt = _creation_dtype(dtype)
    shape = _size("rand", size)
    _check_random_float(dt, "check_uniform_bounds")
    return _finish(_uniform(shape, dt), dt, requires_grad)


@takes_generator
def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    _check_device(device)
    dt = _creation_dtype(dtype)
    shape = _size("randn", size)
    if 0 not in shape:
        _check_random_float(dt, "normal_kernel_cpu")
    return _finish(D.cast(RNG.gen.standard_normal(shape), dt), dt, requires_grad)


_RANDINT_SIGNATURES = (
    "(int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, torch.dtype dtype = None, "
    "torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool requires_grad = False)",
    "(int high, tuple of ints size, *, Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, "
    "torch.device device = None, bool pin_memory = False, bool requires_grad = False)",
    "(int low, int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, torch.dtype dtype = "
    "None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool requires_grad = "
    "False)",
    "(int low, int high, tuple of ints size, *, Tensor out = None, torch.dtype dtype = None, torch.layout layout = "
    "None, torch.device device = None, bool pin_memory = False, bool requires_grad = False)",
)


@takes_generator
def randint(*args, low=None, high=None, size=None, generator=None, out=None, dtype=None, layout=None,
            device=None, requires_grad=False, pin_memory=False):
    """randint(high, size) or randint(low, high, size), as torch parses them."""
    _check_device(device)
    given = list(args)
    if len(given) == 2 and size is None and not isinstance(given[-1], (tuple, list, Size)):
        raise TypeError(f"randint(): argument 'size' (position 2) must be tuple of ints, not {_tpname(given[-1])}")
    if len(given) == 3:
        low, high, size = given
    elif len(given) == 2:
        if high is None and size is None:
            high, size = given
        else:
            low, high = given
    elif len(given) == 1:
        if high is None:
            high = given[0]
        else:
            low = given[0]
    low = 0 if low is None else low
    if not (_int_like(low) and _int_like(high) and isinstance(size, (tuple, list, Size))) or len(given) > 3:
        raise TypeError("randint() received an invalid combination of arguments - got ("
                        + ", ".join(_tpname(a) for a in args) + "), but expected one of:\n"
                        + "".join(f" * {sig}\n" for sig in _RANDINT_SIGNATURES))
    low, high = int(low), int(high)
    shape = _size("randint", (tuple(size),))
    dt = D.int64 if dtype is None else D.as_dtype(dtype)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if not dt.is_floating_point:
        lo, hi = (0, 1) if dt is D.bool_ else D.integer_bounds(dt)[:2]
        if low < lo:
            raise RuntimeError(f"from is out of bounds for {D.C_RANGE_NAME[dt]}")
        if high - 1 > hi:
            raise RuntimeError(f"to - 1 is out of bounds for {D.C_RANGE_NAME[dt]}")
    return _finish(D.cast(RNG.gen.integers(low, high, shape), dt), dt, requires_grad)


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    return _laid_out_like(lambda shape, dt, dev, req: rand(shape, dtype=dt, requires_grad=req),
                          input, memory_format, dtype or input.dtype, device, requires_grad)


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    return _laid_out_like(lambda shape, dt, dev, req: randn(shape, dtype=dt, requires_grad=req),
                          input, memory_format, dtype or input.dtype, device, requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,
                 memory_format=None):
    if high is None:
        low, high = 0, low
    return _laid_out_like(lambda shape, dt, dev, req: randint(low, high, shape, dtype=dt, requires_grad=req),
                          input, memory_format, dtype or input.dtype, device, requires_grad)


@takes_generator
def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    dt = D.int64 if dtype is None else D.as_dtype(dtype)
    return _finish(D.cast(RNG.gen.permutation(n), dt), dt, requires_grad)


@takes_generator
def multinomial(input, num_samples, replacement=False):
    # torch's checks, as RuntimeError (numpy's choice raised ValueError)
    d = input._data
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if not replacement and num_samples > d.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    p = input._data / input._data.sum(-1, keepdims=True)
    if p.ndim == 1:
        return _wrap_np(RNG.gen.choice(p.shape[0], num_samples, replace=replacement, p=p).astype(np.int64))
    return _wrap_np(np.stack([RNG.gen.choice(p.shape[1], num_samples, replace=replacement, p=r) for r in p])
                    .astype(np.int64))


@takes_generator
def bernoulli(input, p=None):
    prob = input._data if p is None else p
    return _wrap_np((RNG.gen.random(input._data.shape) < prob).astype(input._data.dtype), input.dtype)


# == devices: device="cuda" makes the tensor on the host, then copies it to the device ==============

def _made_in_trace(fn, args, kwargs):
    """fn's CPU tensor, asked for by the user's code while a function is traced: where the
    trace's arguments are on the GPU, its value would be made there by the program, where the
    eager call makes a CPU tensor (which does not mix with them): the trace stops, and the
    function runs eagerly. (tracegrad's own calls, a creation function's of another among them,
    make program values.)"""
    t = fn(*args, **kwargs)
    if t.is_cuda and t.dim():
        raise RuntimeError(f"{fn.__name__}() makes a CPU tensor inside a function traced with CUDA arguments; "
                           f"a compiled program keeps one device (pass device=x.device)")
    return t


def _on_device(fn, like=False):
    @functools.wraps(fn)
    def make(*args, device=None, **kwargs):
        if device is None and like and args and isinstance(args[0], Tensor) and args[0].is_cuda:
            device = "cuda"
        if device is None or (isinstance(device, str) and device == "cpu") or Above.parse(device) == "cpu":
            if _ACTIVE[0] and TRACING.stack and user_file(sys._getframe(1).f_code.co_filename):
                return _made_in_trace(fn, args, kwargs)
            return fn(*args, **kwargs)
        req = kwargs.pop("requires_grad", False)
        t = fn(*args, **kwargs)
        if t.is_cuda:
            return t.requires_grad_(True) if req else t
        out = Tensor._make(Above.to_device(t._data, t._dtype), t._dtype)
        return out.requires_grad_(True) if req else out
    return make


for _fn_name in ("tensor", "as_tensor", "asarray", "full", "zeros", "ones", "empty", "eye", "arange", "linspace",
                 "rand", "randn", "randint", "randperm"):
    globals()[_fn_name] = _on_device(globals()[_fn_name])
for _fn_name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"):
    globals()[_fn_name] = _on_device(globals()[_fn_name], like=True)
del _fn_name


# Tensor.new_tensor, new_zeros, new_ones, new_full and new_empty
Above.tensor, Above.zeros, Above.ones, Above.full, Above.empty = tensor, zeros, ones, full, empty

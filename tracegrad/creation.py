"""Creation functions: tensor, as_tensor, from_numpy, zeros, ones, full, arange, rand, ..."""
import math
import numbers
import threading

import numpy as np

from . import _dtype as D
from .tensor import Tensor, Size
from .grad_mode import STATE


class _RNG(threading.local):
    def __init__(self):
        self.gen = np.random.default_rng(_SEED[0])


_SEED = [0]
RNG = _RNG()


def manual_seed(seed):
    """Seed the generator (numpy's PCG64: the streams differ from torch's)."""
    _SEED[0] = int(seed)
    RNG.gen = np.random.default_rng(int(seed))

    class _Gen:
        def initial_seed(self):
            return _SEED[0]
    return _Gen()


seed = manual_seed


def initial_seed():
    return _SEED[0]


def _check_device(device):
    if device is not None and str(device).split(":")[0] != "cpu":
        if str(device).startswith("cuda"):
            raise RuntimeError("Torch not compiled with CUDA enabled")
        raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {device}")


def _finish(data, dtype, requires_grad):
    t = Tensor._make(data, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def _wrap_np(a, dtype=None):
    dt = dtype or D.from_numpy_dtype(a.dtype)
    if a.dtype != dt.np:
        a = a.astype(dt.np)
    return Tensor._make(a, dt)


def _infer_list(data):
    """Shape and dtype of nested Python data, with torch's errors for ragged input."""
    kinds = set()

    def walk(x, depth, shape):
        if isinstance(x, Tensor):
            if x.numel() != 1 or x.ndim:
                sub = tuple(x.shape)
                if depth == len(shape):
                    shape.extend(sub)
                kinds.add(x.dtype)
                return
            kinds.add(x.dtype)
            return
        if isinstance(x, (list, tuple)):
            n = len(x)
            if depth == len(shape):
                shape.append(n)
            elif shape[depth] != n:
                raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {n})")
            for e in x:
                if depth + 1 < len(shape) and not isinstance(e, (list, tuple, Tensor, np.ndarray)):
                    raise ValueError(f"expected sequence of length {shape[depth + 1]} at dim {depth + 1} (got {type(e).__name__})")
                walk(e, depth + 1, shape)
            return
        if isinstance(x, np.ndarray):
            kinds.add(D.from_numpy_dtype(x.dtype))
            return
        if depth < len(shape):
            raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {type(x).__name__})")
        if isinstance(x, (bool, np.bool_)):
            kinds.add(D.bool_)
        elif isinstance(x, (int, np.integer)):
            kinds.add(D.int64)
        elif isinstance(x, (float, np.floating)):
            kinds.add("float")
        elif isinstance(x, complex):
            raise NotImplementedError("complex tensors are not supported")
        else:
            raise TypeError(f"new(): invalid data type '{type(x).__name__}'")

    walk(data, 0, [])
    if "float" in kinds or builtins_any(k != "float" and k.is_floating_point for k in kinds):
        floats = [k for k in kinds if k != "float" and k.is_floating_point]
        return floats[0] if floats and "float" not in kinds and len(floats) == 1 else D.get_default_dtype()
    if D.int64 in kinds or builtins_any(k != "float" and k._kind == 1 for k in kinds):
        return D.int64
    if kinds == {D.bool_}:
        return D.bool_
    return D.get_default_dtype()


def builtins_any(it):
    for x in it:
        if x:
            return True
    return False


def _to_numpy(data):
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return np.array([_to_numpy(x) if isinstance(x, (Tensor, list, tuple)) else x for x in data]) \
            if builtins_any(isinstance(x, Tensor) for x in data) else np.array(data)
    return np.asarray(data)


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Copy `data` into a new leaf tensor (torch.tensor)."""
    _check_device(device)
    if dtype is not None:
        dtype = D.as_dtype(dtype)
    if isinstance(data, Tensor):
        import warnings
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        dt = dtype or data.dtype
        arr = np.array(data._data, dtype=dt.np, copy=True)
    elif isinstance(data, np.ndarray):
        dt = dtype or D.from_numpy_dtype(data.dtype)
        arr = np.array(data, dtype=dt.np, copy=True)
    elif isinstance(data, (np.generic,)):
        dt = dtype or D.from_numpy_dtype(data.dtype)
        arr = np.array(data, dtype=dt.np)
    else:
        inferred = _infer_list(data)
        dt = dtype or inferred
        arr = np.array(_to_numpy(data) if isinstance(data, (list, tuple)) else data, dtype=dt.np)
    if dt is D.bfloat16:
        arr = D.round_bfloat16(arr)
    if not arr.flags.writeable:
        arr = arr.copy()
    return _finish(arr, dt, requires_grad)


def as_tensor(data, dtype=None, device=None):
    _check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None or D.as_dtype(dtype) is data.dtype else data.to(D.as_dtype(dtype))
    if isinstance(data, np.ndarray) and (dtype is None or D.as_dtype(dtype).np == data.dtype) and \
            data.dtype in (np.float16, np.float32, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_):
        return Tensor._make(data, D.from_numpy_dtype(data.dtype) if dtype is None else D.as_dtype(dtype))
    return tensor(data, dtype=dtype)


asarray = as_tensor


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return Tensor._make(ndarray, D.from_numpy_dtype(ndarray.dtype))


def from_dlpack(ext):
    return from_numpy(np.from_dlpack(ext))


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"zeros(): argument 'size' (position 1) must be tuple of ints, but found element of type "
                            f"{type(s).__name__} at pos {len(out)}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _creation_dtype(dtype):
    return D.get_default_dtype() if dtype is None else D.as_dtype(dtype)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    size = _size((size,) if not isinstance(size, (tuple, list, Size)) else (tuple(size),))
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = D.bool_
        elif isinstance(fill_value, (int, np.integer)):
            dtype = D.int64
        else:
            dtype = D.get_default_dtype()
    dtype = D.as_dtype(dtype)
    from .ir.tracer import apply, _ACTIVE, TRACING
    if _ACTIVE[0] and TRACING.stack:
        from .ops.primitives import PRIMITIVES
        return apply(PRIMITIVES["full"], (), {"shape": size, "value": fill_value, "dtype": dtype})
    return _finish(np.full(size, fill_value, dtype=dtype.np), dtype, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    return full(_size(size), 0, dtype=_creation_dtype(dtype), device=device, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return full(_size(size), 1, dtype=_creation_dtype(dtype), device=device, requires_grad=requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None):
    _check_device(device)
    dt = _creation_dtype(dtype)
    return _finish(np.empty(_size(size), dtype=dt.np), dt, requires_grad)


def ones_like_data(t):
    return Tensor._make(np.ones(t._data.shape, t._dtype.np), t._dtype)


def _like(fn):
    def like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
        return fn(tuple(input.shape), dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)
    like.__name__ = fn.__name__ + "_like"
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    dt = _creation_dtype(dtype)
    return _finish(np.eye(n, n if m is None else m, dtype=dt.np), dt, requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (vals[1] - vals[0]) * vals[2] < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    if dtype is None:
        dtype = D.int64 if all(isinstance(v, (int, np.integer)) for v in vals) else D.get_default_dtype()
    dtype = D.as_dtype(dtype)
    n = max(int(math.ceil((vals[1] - vals[0]) / vals[2])), 0)
    data = (vals[0] + vals[2] * np.arange(n, dtype=np.float64)) if dtype.is_floating_point else \
        np.arange(vals[0], vals[1], vals[2])
    return _finish(data.astype(dtype.np), dtype, requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    if steps < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    dt = _creation_dtype(dtype)
    # torch fills the first half from the start and the second half from the end
    step = (end - start) / (steps - 1) if steps > 1 else 0
    i = np.arange(steps, dtype=np.float64)
    half = steps // 2
    vals = np.where(i < half, start + step * i, end - step * (steps - 1 - i))
    return _finish(vals.astype(dt.np), dt, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False):
    dt = _creation_dtype(dtype)
    return _finish(np.power(base, linspace(start, end, steps, dtype=D.float64)._data).astype(dt.np), dt, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    dt = _creation_dtype(dtype)
    return _finish(RNG.gen.random(_size(size), dtype=np.float64).astype(dt.np), dt, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    dt = _creation_dtype(dtype)
    return _finish(RNG.gen.standard_normal(_size(size)).astype(dt.np), dt, requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    dt = D.int64 if dtype is None else D.as_dtype(dtype)
    return _finish(RNG.gen.integers(low, high, _size((tuple(size),))).astype(dt.np), dt, requires_grad)


def rand_like(input, *, dtype=None, requires_grad=False):
    return rand(tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, requires_grad=False):
    return randn(tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None):
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype)


def randperm(n, *, dtype=None, requires_grad=False):
    return _finish(RNG.gen.permutation(n).astype(np.int64), D.int64 if dtype is None else D.as_dtype(dtype), False)


def multinomial(input, num_samples, replacement=False):
    p = input._data / input._data.sum(-1, keepdims=True)
    if p.ndim == 1:
        return _wrap_np(RNG.gen.choice(p.shape[0], num_samples, replace=replacement, p=p).astype(np.int64))
    return _wrap_np(np.stack([RNG.gen.choice(p.shape[1], num_samples, replace=replacement, p=r) for r in p])
                    .astype(np.int64))


def bernoulli(input, p=None):
    prob = input._data if p is None else p
    return _wrap_np((RNG.gen.random(input._data.shape) < prob).astype(input._data.dtype), input.dtype)

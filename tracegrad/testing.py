"""torch.testing: `assert_close` and `make_tensor`, the two functions users' own tests reach for.

assert_close compares tensors, numpy arrays, Python numbers, and sequences and mappings of
them, recursively, with torch's default tolerances for the dtype (DEFAULT_TOLERANCES) and
torch's messages: the attribute that differs (shape, dtype, device, stride), or for values the
count of mismatched elements and the greatest absolute and relative differences among them,
with where they are ("The failure occurred for item [1]['a']").
"""
import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from . import _dtype as D
from .tensor import Size, Tensor
from . import creation

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# (rtol, atol) by dtype, torch's; integers and bool compare exactly
DEFAULT_TOLERANCES = {D.float16: (1e-3, 1e-5), D.bfloat16: (1.6e-2, 1e-5), D.float32: (1.3e-6, 1e-5),
                      D.float64: (1e-7, 1e-7)}


class _Mismatch(Exception):
    """A comparison that failed: its error type and message (the item path is added on the way out)."""

    def __init__(self, kind, msg, path=(), structure=False):
        super().__init__(msg)
        # structure: the containers differ (keys, lengths); torch's `msg` replaces only the other messages
        self.kind, self.msg, self.path, self.structure = kind, msg, path, structure


def _tolerances(*dtypes):
    found = [DEFAULT_TOLERANCES.get(dt, (0.0, 0.0)) for dt in dtypes]
    return max(r for r, _ in found), max(a for _, a in found)


def _as_tensor_like(x):
    """A tensor for a Tensor or a numpy array (as torch takes them), else None."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return creation.from_numpy(x)
    return None


def _values(t):
    """t's values as a numpy array to compare in: float16/bfloat16 in float32, integers in int64."""
    a = t.detach().cpu()
    dt = a.dtype
    if dt is D.float16 or dt is D.bfloat16:
        a = a.float()
    arr = np.asarray(a.numpy())
    if dt.is_floating_point or dt is D.bool_:
        return arr
    return arr.astype(np.int64)


def _check_attributes(actual, expected, check_device, check_dtype, check_stride):
    def differ(name, a, e):
        raise _Mismatch(AssertionError, f"The values for attribute '{name}' do not match: {a} != {e}.")
    if actual.shape != expected.shape:
        differ("shape", actual.shape, expected.shape)
    if check_device and actual.device != expected.device:
        differ("device", actual.device, expected.device)
    if check_dtype and actual.dtype is not expected.dtype:
        differ("dtype", actual.dtype, expected.dtype)
    if check_stride and actual.numel() > 0 and actual.stride() != expected.stride():
        differ("stride()", actual.stride(), expected.stride())


def _close(a, e, rtol, atol, equal_nan):
    """Elementwise: |a - e| <= atol + rtol |e|, equal infinities close, NaN close to NaN with equal_nan."""
    if a.dtype == np.bool_:
        return a == e
    with np.errstate(invalid="ignore", over="ignore"):
        same = a == e
        if a.dtype.kind != "f":
            return same if not (rtol or atol) else same | (np.abs(a - e) <= atol + rtol * np.abs(e))
        ok = same | (np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= atol + rtol * np.abs(e)))
        if equal_nan:
            ok |= np.isnan(a) & np.isnan(e)
    return ok


def _fmt(x):
    return repr(float(x)) if isinstance(x, (float, np.floating)) else repr(int(x))


def _in_dtype(d, dt):
    """Differences computed in float32 for a float16/bfloat16 pair, rounded as torch's, which computes
    them in that dtype (one rounding of float32's correctly rounded result is the same)."""
    if dt is D.float16:
        return d.astype(np.float16)
    if dt is D.bfloat16:
        return D.round_bfloat16(d)
    return d


def _tensor_message(a, e, ok, rtol, atol, what, dt):
    n, bad = ok.size, int(ok.size - np.count_nonzero(ok))
    af, ef, okf = a.reshape(-1), e.reshape(-1), ok.reshape(-1)
    if af.dtype == np.bool_:
        af, ef = af.astype(np.int64), ef.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_diff = np.abs(af - ef)
        abs_diff[okf] = 0
        rel_diff = abs_diff / np.abs(ef) if af.dtype.kind == "f" else \
            (abs_diff.astype(np.float32) / np.abs(ef).astype(np.float32))
        rel_diff[okf] = 0
    abs_diff, rel_diff = _in_dtype(abs_diff, dt), _in_dtype(rel_diff, dt)

    def greatest(d):
        # the greatest difference, NaN first (torch.max propagates it), and its index in the tensor's shape
        k = int(np.argmax(np.isnan(d))) if d.dtype.kind == "f" and np.isnan(d).any() else int(np.argmax(d))
        idx = tuple(int(i) for i in np.unravel_index(k, a.shape))
        return d[k], idx
    ma, ia = greatest(abs_diff)
    mr, ir = greatest(rel_diff)
    tol_a = f" (up to {atol} allowed)" if what == "close" else ""
    tol_r = f" (up to {rtol} allowed)" if what == "close" else ""
    return (f"Tensor-likes are not {what}!\n\nMismatched elements: {bad} / {n} ({bad / n * 100:.1f}%)\n"
            f"Greatest absolute difference: {_fmt(ma)} at index {ia}{tol_a}\n"
            f"Greatest relative difference: {_fmt(mr)} at index {ir}{tol_r}")


def _scalar_message(actual, expected, rtol, atol, what):
    with np.errstate(all="ignore"):
        diff = abs(actual - expected)
        rel = diff / abs(expected) if expected != 0 else (math.nan if diff != diff else math.inf if diff else 0.0)
    tol_a = f" (up to {atol} allowed)" if what == "close" else ""
    tol_r = f" (up to {rtol} allowed)" if what == "close" else ""
    return (f"Scalars are not {what}!\n\nExpected {expected} but got {actual}.\n"
            f"Absolute difference: {diff}{tol_a}\nRelative difference: {rel}{tol_r}")


def _check_tolerances(rtol, atol):
    # (checked as each pair of values is compared, as torch's: inputs no pair takes raise TypeError first)
    if (rtol is None) != (atol is None):
        raise _Mismatch(ValueError, f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                                    f"{'rtol' if rtol is None else 'atol'}.")
    if rtol is not None and (rtol < 0 or atol < 0):
        raise _Mismatch(ValueError, f"rtol and atol must be non-negative, but got rtol={rtol} and atol={atol}")


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    _check_tolerances(rtol, atol)
    _check_attributes(actual, expected, check_device, check_dtype, check_stride)
    if rtol is None:
        rtol, atol = _tolerances(actual.dtype, expected.dtype)
    if actual.dtype is not expected.dtype:
        common = D.promote_types(actual.dtype, expected.dtype)
        actual, expected = actual.to(common), expected.to(common)
    a, e = _values(actual), _values(expected)
    ok = _close(a, e, rtol, atol, equal_nan)
    if ok.all():
        return
    what = "close" if (rtol or atol) else "equal"
    if actual.ndim == 0:
        raise _Mismatch(AssertionError, _scalar_message(a.item(), e.item(), rtol, atol, what))
    raise _Mismatch(AssertionError, _tensor_message(a, e, ok, rtol, atol, what, actual.dtype))


def _compare_numbers(actual, expected, rtol, atol, equal_nan):
    _check_tolerances(rtol, atol)
    if rtol is None:
        rtol, atol = (1e-7, 1e-7) if isinstance(actual, float) or isinstance(expected, float) else (0.0, 0.0)
    a, e = float(actual), float(expected)
    if a == e or (equal_nan and a != a and e != e) or \
            (math.isfinite(a) and math.isfinite(e) and abs(a - e) <= atol + rtol * abs(e)):
        return
    raise _Mismatch(AssertionError, _scalar_message(actual, expected, rtol, atol, "close" if (rtol or atol) else "equal"))


def _is_number(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _compare(actual, expected, path, opts):
    try:
        _compare_one(actual, expected, path, opts)
    except _Mismatch as m:
        if m.path == () and path:
            m.path = path
        raise


def _compare_one(actual, expected, path, opts):
    if actual is None or expected is None:
        if actual is None and expected is None:
            return
        raise _Mismatch(AssertionError, f"None mismatch: {actual} is not {expected}", path)
    if isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
        if bool(actual) != bool(expected):
            raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}", path)
        return
    ta, te = _as_tensor_like(actual), _as_tensor_like(expected)
    if ta is not None and te is not None:
        return _compare_tensors(ta, te, *opts)
    if _is_number(actual) and _is_number(expected):
        return _compare_numbers(actual, expected, *opts[:3])
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        ka, ke = set(actual), set(expected)
        if ka != ke:
            raise _Mismatch(AssertionError, "The keys of the mappings do not match:\n"
                            f"Missing keys in the actual mapping: {sorted(ke - ka)}\n"
                            f"Additional keys in the actual mapping: {sorted(ka - ke)}", path, True)
        for k in expected:
            _compare(actual[k], expected[k], path + (k,), opts)
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                            path, True)
        for i, (x, y) in enumerate(zip(actual, expected)):
            _compare(x, y, path + (i,), opts)
        return
    raise _Mismatch(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and "
                               f"{type(expected)}.", path)


def _is_sequence(x):
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raise AssertionError where `actual` and `expected` are not close (torch.testing.assert_close):
    |actual - expected| <= atol + rtol * |expected| elementwise, with the dtype's default tolerances
    where neither is given; shapes, dtypes, devices (and strides with check_stride) must agree."""
    __tracebackhide__ = True
    try:
        _compare(actual, expected, (), (rtol, atol, equal_nan, check_device, check_dtype, check_stride))
    except _Mismatch as m:
        text = m.msg
        if m.path:
            text += "\n\nThe failure occurred for item " + "".join(f"[{k!r}]" for k in m.path)
        if m.kind is AssertionError and msg is not None and not m.structure:
            text = msg(text) if callable(msg) else msg
        raise m.kind(text) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch.testing.assert_allclose, deprecated there for assert_close: numbers and arrays made
    tensors, dtypes and devices not checked."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future "
                  "release. Please use `torch.testing.assert_close()` instead. You can find detailed upgrade "
                  "instructions in https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = creation.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = creation.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _tolerances(actual.dtype, expected.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, check_stride=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of `shape` filled with random values in [low, high) (torch.testing.make_tensor):
    floats default to [-9, 9), integers to [-9, 10) (unsigned ones from 0), bools 0 or 1.
    noncontiguous: every other element of a tensor twice as long in its last dim; exclude_zero:
    zeros replaced by the dtype's smallest normal (floats) or 1 (integers)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
                         f"but got noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and not dtype.is_floating_point:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got "
                         f"dtype={dtype}")
    if dtype is D.bool_:
        t = creation.randint(0, 2, shape, dtype=D.int64).to(D.bool_)
    else:
        floating = dtype.is_floating_point
        info = D.finfo(dtype) if floating else D.iinfo(dtype)
        lo = (-9 if floating or info.min < 0 else 0) if low is None else low
        hi = (9 if floating else 10) if high is None else high
        if lo != lo or hi != hi:
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo} and high={hi}")
        if floating and lo == hi:
            warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex types is "
                          "deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
                          FutureWarning, stacklevel=2)
        elif lo >= hi:
            raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
        lo, hi = max(lo, info.min), min(hi, info.max)
        if floating:
            t = creation.full(shape, float(lo), dtype=dtype) if lo == hi else \
                (creation.rand(shape, dtype=D.float64) * (float(hi) - float(lo)) + float(lo)).to(dtype)
        else:
            t = creation.randint(int(math.ceil(lo)), int(math.ceil(hi)), shape, dtype=dtype)
    if exclude_zero:
        if dtype is not D.bool_:
            t = t.masked_fill(t == 0, D.finfo(dtype).tiny if dtype.is_floating_point else 1)
    if noncontiguous and t.numel() > 1:
        wide = creation.empty(shape[:-1] + (shape[-1] * 2,), dtype=dtype)
        wide[..., ::2] = t
        t = wide[..., ::2]
    elif memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t

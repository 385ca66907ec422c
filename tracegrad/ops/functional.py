"""The public ops: argument checking with torch's messages, then primitives or
decompositions into them. Each function here is also a Tensor method where torch has one.
"""
import builtins
import collections
import inspect
import math
import numbers
import sys
import warnings

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor, Above, _VALUE_READS, memory_format, check_format_rank, memory_root
from ..ir.symbolic import Sym
from ..ir.layout import dense_order, suggested_order, suggested_format, memory_format_order, iteration_perm
from ..grad_mode import STATE
from ..tracing import apply, rename_grad_fn, keep_saved, TRACING, _ACTIVE, Proxy, note_composite_inputs, saved_alias
from . import shapes as S
from .primitives import PRIMITIVES as P, FrontEnd, check_index_bounds, check_index_select_bounds, sum_to
from .primitives import _check_float, _overflow, check_python_int, check_value_fits, may_not_fit, matmul_reshaped
from ..creation import tensor, full as _full, _wrap_np
from ..tensor import Size
from ..tracing import TraceError
from ..grad_mode import no_grad

FrontEnd.ops = sys.modules[__name__]      # the ops the table's derivative rules are written in

_Scalar = (int, float, bool, np.number, np.bool_)


def _t(x):
    """Coerce a Python number or nested list to a tensor where an op needs one."""
    if isinstance(x, Tensor):
        return x
    return tensor(x)


def _check_tensor(x, op, name="input", position=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(x).__name__}")


def _scalar(x):
    if isinstance(x, (np.number, np.bool_)):
        return x.item()
    return x


def _operand(x, op):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _Scalar):
        return _scalar(x)
    if isinstance(x, (list, tuple)):
        return _t(x)
    if isinstance(x, (complex, np.complexfloating)):
        # torch computes these in a complex dtype (x * 1j is complex64); tracegrad has none
        raise TypeError(f"{op}(): a complex number ({x!r}) as an operand is not supported: tracegrad has no complex "
                        f"dtypes (torch's result would be complex); use real tensors for the real and imaginary parts")
    raise TypeError(f"{op}(): argument 'other' (position 2) must be Tensor, not {type(x).__name__}")


# == elementwise =====================================================================================

def _unary(name):
    prim = P[name]

    def op(input):
        _check_tensor(input, name)
        return apply(prim, (input,), {})
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}, as torch.{name}."
    return op


for _n in ("neg", "abs", "sign", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
           "tan", "tanh", "sigmoid", "erf", "erfc", "relu", "floor", "ceil", "isnan", "isinf", "isfinite",
           "logical_not"):
    globals()[_n] = _unary(_n)


preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


def _format_param(fmt, op):
    """clone's primitive's parameters for torch's memory_format argument."""
    if fmt is None or fmt is preserve_format:
        return {}
    if fmt is contiguous_format:
        return {"memory_format": "contiguous"}
    if fmt is channels_last or fmt is channels_last_3d:
        return {"memory_format": fmt._name}
    raise TypeError(f"{op}(): argument 'memory_format' must be torch.memory_format, not {type(fmt).__name__}")


def clone(input, *, memory_format=None):
    """A copy, laid out as its operand where that is dense (preserve_format), C-contiguous
    (contiguous_format) or NHWC in memory (channels_last), as torch.clone."""
    _check_tensor(input, "clone")
    params = _format_param(memory_format, "clone")
    _check_format_rank(input, params)
    if input.is_cuda and params.get("memory_format", "contiguous") != "contiguous":
        raise NotImplementedError(f"clone(memory_format={memory_format!r}) of a CUDA tensor is not supported by "
                                  f"tracegrad yet; lay it out on the CPU first")
    return apply(P["clone"], (input,), params)


def _layout_array(t):
    """An array laid out as eager lays out tensor t (an int8 stand-in for a traced value), or None
    where that is C-contiguous or, in a trace, not known."""
    if isinstance(t, Proxy):
        return None if t._plain() else t._eager_scratch()
    d = t._data
    return d if d.__class__ is np.ndarray and not d.flags.c_contiguous else None


def _relaid(out, order):
    if out.ndim < 2 or order == tuple(k for k, n in enumerate(out.shape) if n > 1):
        return out
    return apply(P["clone"], (out,), {"memory_format": ("order", order)})


def laid_out_dense_as(out, like):
    """out (C-contiguous, of like's shape) laid out in torch's dense order of like's strides
    (infer_dense_strides), as torch's sort allocates its results."""
    a = _layout_array(like)
    return out if a is None else _relaid(out, dense_order(a.shape, a.strides))


def laid_out_suggested(out, like):
    """out (C-contiguous, of like's rank) laid out in like's suggested memory format (channels-last
    for a 4-d tensor whose strides are like channels-last), as torch's kernels that allocate with
    suggest_memory_format (pads, group_norm) lay theirs out."""
    a = _layout_array(like)
    if a is None or a.ndim not in (4, 5) or out.ndim != a.ndim:
        return out
    if suggested_order(a.shape, a.strides) == tuple(k for k, n in enumerate(a.shape) if n > 1):
        return out
    return _relaid(out, memory_format_order(tuple(out.shape), "channels_last" if a.ndim == 4 else "channels_last_3d"))


def _suggested_format(t):
    """torch's Tensor.suggest_memory_format(), as clone's memory_format parameter names it."""
    # (by the strides themselves, those of size-1 axes too: a (2, 3, 1, 1) laid out channels-last
    # is C-contiguous to numpy, and torch suggests channels_last for it)
    a = _layout_array(t) if isinstance(t, Proxy) else t._data if t._data.__class__ is np.ndarray else None
    return "contiguous" if a is None else suggested_format(a.shape, a.strides)


def _check_format_rank(input, params):
    fmt = params.get("memory_format")
    if fmt.__class__ is str:
        check_format_rank(input.ndim, fmt)
negative = neg
absolute = abs
_round_prim = P["round"]


def round(input, *, decimals=None):
    _check_tensor(input, "round")
    if decimals is None:
        return apply(_round_prim, (input,), {})
    if not input.dtype.is_floating_point:
        kernel = "round_vml_cpu" if decimals == 0 else "round_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    return apply(_round_prim, (input,), {"decimals": decimals})


def _check_tensors(op, args, names):
    """torch's TypeError for a Python number (or anything else) where `op` takes tensors alone."""
    for k, (a, n) in enumerate(zip(args, names)):
        if not isinstance(a, Tensor):
            raise TypeError(f"{op}(): argument '{n}' (position {k + 1}) must be Tensor, not {type(a).__name__}")


# torch's functions of two tensors with no overload for a Python number: maximum(x, 2.) is a TypeError
# (clamp_min is the number's form), logical_and(x, True) too
_TENSORS_ONLY = frozenset(("maximum", "minimum", "logical_and", "logical_or", "logical_xor"))


def _binary(name):
    prim = P[name]
    strict = name in _TENSORS_ONLY

    def op(input, other, *, out=None):
        if out is not None:
            _check_out_operands(name, (input, other), {})
            if isinstance(out, Tensor):
                _check_out_overlap(out, (input, other))
            return _write_out(op(input, other), out, name)
        if strict and not (isinstance(input, Tensor) and isinstance(other, Tensor)):
            _check_tensors(name, (input, other), ("input", "other"))
        if not isinstance(input, Tensor):
            if isinstance(other, Tensor) and isinstance(input, _Scalar):
                return apply(prim, (_scalar(input), other), {})
            input = _t(input)
        return apply(prim, (input, _operand(other, name)), {})
    op.__name__ = name
    return op


# torch's out= overloads that take tensors alone where its plain call also takes a Python number
# (where(c, x, 0.) runs, where(c, x, 0., out=o) is a TypeError): the names of their arguments, and
# whether the first must be a tensor where the others may be numbers (eq(x, 2, out=o) runs, eq(2, x,
# out=o) is a TypeError)
_OUT_TENSOR_ARGS = {name: (("input", "other"), False) for name in (
    "maximum", "minimum", "logical_and", "logical_or", "logical_xor", "atan2", "fmax", "fmin")}
_OUT_TENSOR_ARGS.update({"where": (("condition", "input", "other"), False), "outer": (("input", "vec2"), False),
                         "lerp": (("input", "end"), False),
                         "addcmul": (("input", "tensor1", "tensor2"), False),
                         "addcdiv": (("input", "tensor1", "tensor2"), False)})
_OUT_TENSOR_ARGS.update({name: (("input", "other"), True) for name in (
    "eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift")})


def _check_out_operands(name, args, kwargs):
    """torch's TypeError for a Python number where the out= overload of `name` takes a tensor."""
    spec = _OUT_TENSOR_ARGS.get(name)
    if spec is None:
        return
    names, first_only = spec
    given = list(args[:len(names)]) + [kwargs.get(n, _MISSING) for n in names[len(args):]]
    for k, (a, n) in enumerate(zip(given, names)):
        if a is _MISSING or isinstance(a, Tensor):
            continue
        if first_only:
            if k:
                return
            got = ", ".join(type(v).__name__ for v in given if v is not _MISSING)
            raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}, out=Tensor), but "
                            f"expected one of: (Tensor input, Tensor other, *, Tensor out) or (Tensor input, Number "
                            f"other, *, Tensor out)")
        raise TypeError(f"{name}(): argument '{n}' (position {k + 1}) must be Tensor, not {type(a).__name__}")


_MISSING = object()


def _check_out_overlap(out, operands):
    """torch's memory-overlap check of out= against the operands, after its refusal of out=
    with autograd (which torch raises first)."""
    if STATE.grad_enabled and (out.requires_grad or builtins.any(isinstance(a, Tensor) and a.requires_grad
                                                                 for a in operands)):
        return
    Above.check_overlap(out, operands)


for _n in ("mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
           "logical_xor", "remainder", "fmod", "floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor",
           "bitwise_left_shift", "bitwise_right_shift"):
    globals()[_n] = _binary(_n)
multiply = mul


def _logical_binary(name):
    op = globals()[name]

    def logical(input, other, *, out=None):
        # torch casts both operands to their common dtype before it reads them as bool: an int64
        # 0-dim -512 beside an int8 tensor is int8's 0 (logical_xor is then x != 0: dtype fuzzer seed
        # 28021), 256 beside uint8 and a float64 1e-300 beside float32 too. A tensor narrowed within
        # its kind is converted here (a cast across kinds, or from bool, keeps every nonzero nonzero)
        if isinstance(input, Tensor) and isinstance(other, Tensor) and input._dtype is not other._dtype:
            d = D.result_type([input, other])
            input, other = (convert(t, d) if t._dtype is not d and t._dtype._kind == d._kind else t
                            for t in (input, other))
        return op(input, other, out=out)
    logical.__name__ = name
    return logical


for _n in ("logical_and", "logical_or", "logical_xor"):
    globals()[_n] = _logical_binary(_n)


def _floor_low(input, other):
    """floor division's kernel parameter: low="bfloat16" where a bfloat16 result is computed in
    bfloat16 steps, as torch's kernel does unless the divisor is a number or a 0-dim tensor (then it
    runs in float32); float16 arrays say so themselves (primitives._floor_divide)."""
    if isinstance(other, Tensor) and other.ndim == 0 or not isinstance(other, Tensor):
        return {}
    return {"low": "bfloat16"} if D.result_type([input, other]) is D.bfloat16 else {}


def floor_divide(input, other, *, out=None):
    if out is not None:
        return _write_out(floor_divide(input, other), out, "floor_divide")
    if not isinstance(input, Tensor):
        if isinstance(other, Tensor) and isinstance(input, _Scalar):
            input = _scalar(input)
        else:
            input = _t(input)
    other = _operand(other, "floor_divide")
    return apply(P["floor_divide"], (input, other), _floor_low(input, other))


greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
_add, _sub, _div, _rsub, _pow = P["add"], P["sub"], P["div"], P["rsub"], P["pow"]


def _check_bool_sub(a, b):
    a_bool = getattr(a, "_dtype", None) is D.bool_ or isinstance(a, (bool, np.bool_))
    b_bool = getattr(b, "_dtype", None) is D.bool_ or isinstance(b, (bool, np.bool_))
    if a_bool and b_bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if a_bool or b_bool:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _scaled(a, alpha, other):
    """alpha * a, in the dtype of the op it feeds (torch folds alpha into add, sub and rsub)."""
    if alpha == 1:
        return a
    d = D.result_type([a, other])
    if not d.is_floating_point and isinstance(alpha, float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    # torch converts alpha to the op's dtype with its overflow check: add(x16, y16, alpha=70000) raises
    # "value cannot be converted to type c10::Half without overflow" (tracegrad gave inf), after
    # Python's conversion of an int beyond 64 bits (OverflowError)
    if alpha.__class__ is int:
        check_python_int(alpha)
    check_value_fits(alpha, d)
    if d is D.bool_:
        return a if alpha else zeros_like(a) if isinstance(a, Tensor) else False     # (a bool tensor: False)
    if isinstance(a, Tensor) and a._dtype is not d:
        # in the op's dtype, as torch computes alpha * other: int8 127 * 3 beside a float32 0-dim
        # tensor is 381, not int8's wrapped 125; a bool tensor * 3 beside an int32 one is int32
        a = convert(a, d)
    return a * alpha


def _with_alpha(out, alpha, *inputs):
    """add, sub and rsub with alpha != 1: their node's inputs for a direct call (y.grad_fn(g)) are
    the op's, not alpha * other's (add(x, y, alpha=2).grad_fn(g) gave g for y where torch gives 2g)."""
    if alpha != 1 and out.__class__ is not Proxy and out._grad_fn is not None:
        note_composite_inputs(out._grad_fn, None, tuple(
            t if isinstance(t, Tensor) and t._dtype.is_floating_point else None for t in inputs))
    return out


def add(input, other, *, alpha=1):
    if not isinstance(input, Tensor):
        input, other = other, input
    other = _operand(other, "add")
    out = apply(_add, (input, _scaled(other, alpha, input)), {})
    return out if alpha == 1 else _with_alpha(out, alpha, input, other)


def sub(input, other, *, alpha=1):
    if not isinstance(input, Tensor):
        return rsub(other, input, alpha=alpha)
    other = _operand(other, "sub")
    _check_bool_sub(input, other)
    out = apply(_sub, (input, _scaled(other, alpha, input)), {})
    return out if alpha == 1 else _with_alpha(out, alpha, input, other)


subtract = sub


def rsub(input, other, *, alpha=1):
    """other - alpha * input"""
    other = _operand(other, "rsub")
    _check_bool_sub(input, other)
    out = apply(_rsub, (_scaled(input, alpha, other), other), {})
    return out if alpha == 1 else _with_alpha(out, alpha, input, other)


def div(input, other, *, rounding_mode=None):
    if not isinstance(input, Tensor):
        input = _t(input)
    other = _operand(other, "div")
    if rounding_mode is None:
        return apply(_div, (input, other), {})
    if rounding_mode in ("floor", "trunc"):
        if D.result_type([input, other]) is D.bool_:
            raise NotImplementedError(f"\"div_{rounding_mode}_cpu\" not implemented for 'Bool'")
        params = {"rounding_mode": rounding_mode}
        if rounding_mode == "floor":
            params.update(_floor_low(input, other))
        return apply(P["div_rounding"], (input, other), params)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


divide = true_divide = div


def pow(input, exponent):
    if not isinstance(input, Tensor):
        if not isinstance(exponent, Tensor):
            raise TypeError("pow(): at least one argument must be a Tensor")
        return apply(_pow, (_scalar(input), exponent), {})
    exponent = _operand(exponent, "pow")
    if input._dtype is D.bfloat16 and (exponent.__class__ is int or exponent.__class__ is float) and \
            (exponent == 3 or exponent == -2):
        # torch's bfloat16 x ** 3 and x ** -2 are x * x * x and 1 / (x * x) with each step rounded to
        # bfloat16 (a float32 pow rounded once differed for a quarter of values); bfloat16, stored
        # as float32, says so to the kernel
        return apply(_pow, (input, exponent), {"low": "bfloat16"})
    out = apply(_pow, (input, exponent), {})
    if exponent.__class__ is Tensor and not exponent.requires_grad and (out.__class__ is Proxy or out._grad_fn):
        # torch's PowBackward1 saves its result whichever operand requires grad (the primitive's
        # derivative for the base alone does not read it): written before the backward, it raises
        keep_saved(out, None, (), result=True)
    return out


float_power = None


def square(input):
    return pow(input, 2)


def reciprocal(input):
    return apply(P["reciprocal"], (input,), {})


def where(condition, input=None, other=None):
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    _check_tensor(condition, "where", "condition")
    if condition._dtype is D.uint8:
        # torch still takes a uint8 mask (nonzero is True), with a deprecation warning
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed "
                      "in a future version of PyTorch. Use a boolean condition instead.", UserWarning, stacklevel=2)
        condition = convert(condition, D.bool_)
    elif condition._dtype is not D.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{D.SCALAR_NAME[condition._dtype]}")
    input, other = _operand(input, "where"), _operand(other, "where")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        # two numbers: the kernel (np.where) would give float64 or int64 whatever torch's result dtype
        # (where(c, 256, 1 / 3) is float32); one of them as a 0-dim tensor of that dtype fixes it, in
        # the eager kernel and in a compiled program alike, and changes neither value nor promotion
        input = tensor(input, dtype=D.result_type([input, other]))
    return apply(P["where"], (condition, input, other), {})


def _check_number_bound(t, d):
    """A 0-dim tensor bound that torch's parser reads as a Number (beside a Number bound) is
    converted to the result dtype d with torch's checked conversion: clamp(int8, min=-1,
    max=tensor(1000)) raises "value cannot be converted to type int8_t without overflow" where a
    plain cast would wrap 1000 to -24. A traced bound's value is not known: where it could
    overflow d, the function runs eagerly."""
    if not may_not_fit(t.dtype, d):
        # (an integer dtype's values may not fit float16: clamp(x16, 0, tensor(2 ** 63 - 2)) raises)
        return
    if t._data is None:
        raise TraceError(f"clamp with a Number bound beside a 0-dim tensor bound of dtype {t.dtype} (torch converts "
                         f"the tensor's value to {d} with an overflow check) inside a compiled function is not "
                         f"traced yet")
    v = t.item()
    if d._kind < 2:
        lo_d, hi_d, int_lo = D.integer_bounds(d)
        if not (lo_d <= v <= hi_d if isinstance(v, float) else int_lo <= v <= hi_d):
            raise _overflow(d)
    else:
        _check_float(v, d)


def _clamp(input, lo, hi, op):
    _check_tensor(input, op)
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if op == "clamp" and isinstance(lo, Tensor) != isinstance(hi, Tensor) and lo is not None and hi is not None:
        # torch's overloads are (Tensor min, Tensor max) and (Number min, Number max); its argument parser
        # reads a 0-dim tensor that does not require grad as a Number, so with a Number beside it the bound
        # promotes as a Python number (clamp(int8, min=tensor(2.5, dtype=float64), max=3) is float32)
        t = lo if isinstance(lo, Tensor) else hi
        if t.ndim or t.requires_grad:
            def name(b):
                return "Tensor" if isinstance(b, Tensor) else type(b).__name__
            raise TypeError(f"clamp() received an invalid combination of arguments - got (Tensor, max={name(hi)}, "
                            f"min={name(lo)}), but expected one of:\n"
                            f" * (Tensor input, Tensor min = None, Tensor max = None, *, Tensor out = None)\n"
                            f" * (Tensor input, Number min = None, Number max = None, *, Tensor out = None)\n")
        # the bound as that number: in the dtype the number would give (its value converted to the result
        # dtype once, as torch converts the Number), without reading it, so that it traces
        wrapped = {0: False, 1: 0, 2: 0.0}[t.dtype._kind]
        d = D.result_type([input, wrapped, hi if t is lo else lo])
        _check_number_bound(t, d)
        if t is lo:
            lo = convert(lo, d)
        else:
            hi = convert(hi, d)
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and (lo != lo or hi != hi):
        # torch fills the result with NaN before it converts either number to the dtype: no overflow
        # error for clamp(x16, 65520.0, nan); as NaN both, the kernel and the derivative (0) are torch's
        lo = hi = math.nan
    bounds = tuple(b if b is None or isinstance(b, Tensor) else _operand(b, op) for b in (lo, hi))
    return apply(P["clamp"], (input,) + bounds, {"op": op} if op != "clamp" else {})


def clamp(input, min=None, max=None):
    return _clamp(input, min, max, "clamp")


clip = clamp


def _check_bound(input, bound, op, arg):
    """torch's clamp_min and clamp_max take a Tensor or a Number, not None."""
    if bound is None:
        raise TypeError(f"{op}() received an invalid combination of arguments - got ({type(input).__name__}, "
                        f"NoneType), but expected one of:\n * (Tensor input, Tensor {arg}, *, Tensor out = None)\n"
                        f" * (Tensor input, Number {arg}, *, Tensor out = None)\n")


def clamp_min(input, min):
    _check_bound(input, min, "clamp_min", "min")
    return _clamp(input, min, None, "clamp_min")


def clamp_max(input, max):
    _check_bound(input, max, "clamp_max", "max")
    return _clamp(input, None, max, "clamp_max")


def convert(x, dtype):
    """Cast to dtype (ToCopyBackward0); a no-op when the dtype already matches."""
    if x.dtype is dtype:
        return x
    return apply(P["convert"], (x,), {"dtype": dtype})


def full(size, fill_value, *, dtype=None, requires_grad=False):
    return _full(size, fill_value, dtype=dtype, requires_grad=requires_grad)


def _device_of(t):
    """A device tensor's device, for a tensor made like it (None: CPU, and a traced value, whose
    program places its constants)."""
    d = t._data if t.__class__ is not Proxy else None
    return None if d is None or d.__class__ is np.ndarray else t.device


def zeros_like(input, *, dtype=None, requires_grad=False):
    # on input's device, as torch's: a CPU zeros beside a CUDA tensor raised "Expected all tensors to
    # be on the same device" (multi_margin_loss, hinge_embedding_loss, median's backward, ...)
    return _full(tuple(input.shape), 0, dtype=dtype or input.dtype, device=_device_of(input),
                 requires_grad=requires_grad)


def ones_like(input, *, dtype=None, requires_grad=False):
    return _full(tuple(input.shape), 1, dtype=dtype or input.dtype, device=_device_of(input),
                 requires_grad=requires_grad)


def lerp(input, end, weight):
    """torch's two-sided formula: input + weight (end - input) where |weight| < 0.5, else
    end - (end - input) (1 - weight), so weight 1 gives end exactly (the one-sided formula
    gives input + (end - input), which rounds: lerp(1e8, 1, 1) was 0 in float32); float16 and
    bfloat16 compute in float32 and round once, as torch's kernel. end has input's dtype, and so
    has a weight tensor of one or more dimensions (torch's checks: lerp(float32, int8, 0.5) and
    lerp(float16, float32, 0.5) raise); integer and bool input has no kernel, except beside a
    0-dim floating weight tensor, which promotes."""
    _check_tensor(input, "lerp")
    # torch's node (lerp with a weight tensor) saves the weight, and self and end where the weight
    # requires grad (the weight's gradient reads them), and checks their versions when it runs
    saves = (input, (end, weight)) if isinstance(weight, Tensor) and weight.requires_grad else \
        (None, (weight,)) if isinstance(weight, Tensor) else None
    out = rename_grad_fn(_lerp(input, end, weight), "LerpBackward1" if isinstance(weight, Tensor) else "LerpBackward0")
    return keep_saved(out, *saves) if saves is not None else out


def _lerp(input, end, weight):
    if isinstance(end, Tensor) and end._dtype is not input._dtype:
        raise RuntimeError(f"expected dtype {D.TYPE_NAME[input._dtype]} for `end` but got dtype "
                           f"{D.TYPE_NAME[end._dtype]}")
    if isinstance(weight, Tensor) and weight.ndim and weight._dtype is not input._dtype:
        raise RuntimeError(f"expected dtype {D.TYPE_NAME[input._dtype]} for `weight` but got dtype "
                           f"{D.TYPE_NAME[weight._dtype]}")
    if not input._dtype.is_floating_point:
        if not (isinstance(weight, Tensor) and not weight.ndim and weight._dtype.is_floating_point):
            kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[input._dtype]}'")
        d = D.result_type([input, end, weight])
        input, end = convert(input, d), convert(end, d)
    if isinstance(weight, Tensor) and weight._dtype is not input._dtype:
        # a 0-dim weight of another dtype in the input's, as torch's kernel reads it: a uint8 7 made
        # 1 - weight wrap to 250 in uint8, a bool one raised, a float32 0.1 beside float16 tensors is
        # float16's 0.1 (17% of float16 results were a step off)
        weight = convert(weight, input._dtype)
    if isinstance(end, Tensor) and input.is_contiguous() and not end.is_contiguous() and end.shape == input.shape:
        # torch's TensorIterator lays the result out as input (its first operand); the decomposition's
        # end - input would follow end's strides (lerp(x, y.t(), w).view(-1) raised)
        end = contiguous(end)
    low = input.dtype if input.dtype in (D.float16, D.bfloat16) else None
    if low is not None:
        input = convert(input, D.float32)
        end = convert(end, D.float32) if isinstance(end, Tensor) else end
        weight = convert(weight, D.float32) if isinstance(weight, Tensor) else weight
    diff = end - input
    if isinstance(weight, Tensor):
        out = where(abs(weight) < 0.5, input + weight * diff, end - diff * (1 - weight))
    else:
        out = input + weight * diff if builtins.abs(weight) < 0.5 else end - diff * (1 - weight)
    return convert(out, low) if low is not None else out


def sigmoid_(x):
    return x.copy_(sigmoid(x))


# == reductions ========================================================================================

def _dims_arg(dim, ndim):
    """A reduction's dims as the primitives take them: None for a reduction without a dim
    argument, else normalized (an empty list means every dim; on a 0-dim tensor, none)."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return tuple(range(ndim))
    dims = S.normalize_dims(dim, ndim)
    return dims if ndim else ()


def _reduce(prim, input, dim, keepdim, **extra):
    dims = _dims_arg(dim, input.ndim)
    params = {"dims": dims, "keepdim": keepdim} if dims is not None or keepdim else {}
    if dims is not None or keepdim:
        params = {"dims": dims, "keepdim": keepdim}
    params.update(extra)
    return apply(prim, (input,), params)


def _check_grad_dtype(input, dtype):
    """torch refuses a reduction's integer or bool dtype= on a tensor that requires grad (the
    result could carry no gradient): RuntimeError before it computes anything."""
    if dtype is not None and not dtype.is_floating_point and STATE.grad_enabled and input.requires_grad:
        raise RuntimeError(f"Autograd not support dtype: {D.SCALAR_NAME[dtype]}")


def sum(input, dim=None, keepdim=False, *, dtype=None):
    _check_tensor(input, "sum")
    _check_grad_dtype(input, dtype)
    if dtype is not None:
        input = convert(input, dtype)
    return _in_dtype(_reduce(P["sum"], input, dim, keepdim), dtype)


def _in_dtype(out, dtype):
    """A reduction's result in the dtype= it was asked for: the primitives sum integers and
    bools into int64, which torch does only without dtype= (x.sum(dtype=torch.int8) wraps
    around in int8; the int64 result taken modulo 2**8 is that value)."""
    if dtype is None or out.dtype is dtype:
        return out
    return convert(out, dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    _check_tensor(input, "mean")
    if dtype is not None:
        if not dtype.is_floating_point:
            raise RuntimeError(f"mean(): could not infer output dtype. Optional dtype must be either a floating point "
                               f"or complex dtype. Got: {D.SCALAR_NAME[dtype]}")
        if dtype._kind == 2 and dtype._rank == 1 and input.dtype is not dtype:
            return _reduce(P["mean_low"], input, dim, keepdim, dtype=dtype)
        input = convert(input, dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {D.SCALAR_NAME[input.dtype]}")
    return _reduce(P["mean"], input, dim, keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    _check_grad_dtype(input, dtype)
    if dtype is not None:
        input = convert(input, dtype)
    if dim is not None and not isinstance(dim, int):
        raise TypeError("prod(): argument 'dim' must be int")
    # (a bfloat16 product rounds each step to bfloat16: primitives._prod_kernel)
    low = {"low": "bfloat16"} if input.dtype is D.bfloat16 else {}
    return _in_dtype(_reduce(P["prod"], input, dim, keepdim, **low), dtype)


def _return_type(name):
    base = collections.namedtuple(name, ["values", "indices"])

    def __repr__(self):
        return f"torch.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"
    return type(name, (base,), {"__slots__": (), "__repr__": __repr__})


def _pair_type(name, first, second):
    """A torch.return_types pair of two named fields (aminmax's min and max, slogdet's sign and
    logabsdet): a tuple, its fields also by name."""
    def __new__(cls, a, b):
        return tuple.__new__(cls, (a, b))

    def __repr__(self):
        return f"torch.return_types.{name}(\n{first}={self[0]!r},\n{second}={self[1]!r})"
    return type(name, (tuple,), {"__slots__": (), "__new__": __new__, "__repr__": __repr__,
                                 first: property(lambda self: self[0]), second: property(lambda self: self[1])})


class return_types:
    max = _return_type("max")
    min = _return_type("min")


def _max_min(name, input, dim, keepdim, other):
    _check_tensor(input, name)
    if isinstance(dim, Tensor) or other is not None:
        return (maximum if name == "max" else minimum)(input, dim if other is None else other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                               f"Specify the reduction dim with the 'dim' argument.")
        return apply(P[name + "_all"], (input,), {})
    d = S.normalize_dim(dim, input.ndim)
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    v, i = apply(P[name + "_dim"], (input,), {"dim": d, "keepdim": keepdim})
    return getattr(return_types, name)(v, i)


def max(input, dim=None, keepdim=False, *, other=None):
    return _max_min("max", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):
    return _max_min("min", input, dim, keepdim, other)


def _amax(name, input, dim, keepdim):
    dims = _dims_arg(dim, input.ndim)
    if input.numel() == 0:
        if dim is None or isinstance(dim, (list, tuple)) and len(dim) == 0:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                               f"the reduction dim with the 'dim' argument.")
        empty = sorted(d for d in dims if input.shape[d] == 0)
        if empty:
            raise IndexError(f"{name}(): Expected reduction dim {empty[0]} to have non-zero size.")
    return _reduce(P[name], input, dim, keepdim)


def amax(input, dim=(), keepdim=False):
    return _amax("amax", input, dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return _amax("amin", input, dim, keepdim)


def _arg(name, input, dim, keepdim):
    if input.numel() == 0 and dim is None:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
    params = {"keepdim": keepdim}
    if dim is not None:
        params["dim"] = d = S.normalize_dim(dim, input.ndim)
        if input.ndim and input.shape[d] == 0:
            # (an empty tensor reduced along a dim of nonzero size: an empty result, as torch's)
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    return apply(P[name], (input,), params)


def argmax(input, dim=None, keepdim=False):
    return _arg("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _arg("argmin", input, dim, keepdim)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    if unbiased is None:
        return 1
    return 1 if unbiased else 0


def _var_args(dim, unbiased, correction, name="var"):
    if correction is not None and (unbiased is not None or isinstance(dim, bool)):
        # torch has no signature taking both (tracegrad let correction win silently)
        raise TypeError(f"{name}() received an invalid combination of arguments: unbiased and correction cannot "
                        f"both be given")
    if isinstance(dim, bool):          # var(x, False): the old `unbiased` positional
        return None, _correction(dim, correction)
    return dim, _correction(unbiased, correction)


def _dof_check(name, input, dim, c):
    # torch's warning: the reduction factor is the input's numel over the output's
    dims = _dims_arg(dim, input.ndim)
    kept = () if dims is None else [n for i, n in enumerate(input.shape) if i not in dims]
    n_out = math.prod(kept)
    if input.numel() // builtins.max(n_out, 1) - c <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      f"factor (input numel divided by output numel).", UserWarning, stacklevel=3)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, c = _var_args(dim, unbiased, correction)
    if not input.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    _dof_check("var", input, dim, c)
    return _reduce(P["var"], input, dim, keepdim, correction=c)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, c = _var_args(dim, unbiased, correction, "std")
    if not input.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    _dof_check("std", input, dim, c)
    return _reduce(P["std"], input, dim, keepdim, correction=c)


def logsumexp(input, dim, keepdim=False):
    if not input.dtype.is_floating_point:
        input = convert(input, D.get_default_dtype())
    dims = _dims_arg(dim, input.ndim)
    low = {"low": "bfloat16"} if input.dtype is D.bfloat16 else {}    # (primitives._logsumexp_kernel)
    return apply(P["logsumexp"], (input,), {"dims": dims if dims is not None else tuple(range(input.ndim)),
                                             "keepdim": keepdim, **low})


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if p == "fro" or p is None:
        p = 2.0
    if isinstance(p, str):
        raise NotImplementedError(f"norm(p='{p}') is not supported; use p=2, 1, inf or a number")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{D.SCALAR_NAME[input.dtype]}")
    return _reduce(P["norm"], input, dim, keepdim, p=float(p))


def _softmax(name, input, dim, dtype):
    _check_tensor(input, name)
    if dtype is not None:
        input = convert(input, dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    d = S.normalize_dim(dim, input.ndim)
    if not input.dtype.is_floating_point and input.numel():
        kernel = f"{name}_lastdim_kernel_impl" if d >= input.ndim - 1 else f"{name}_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    if name == "log_softmax" and (input.dtype is D.float16 or input.dtype is D.bfloat16) and d == input.ndim - 1:
        # (torch's last-dim kernel of a 16-bit float rounds the row's sum and its log: primitives._log_softmax_kernel)
        return apply(P[name], (input,), {"dim": d, "low": input.dtype.name})
    return apply(P[name], (input,), {"dim": d})


def softmax(input, dim=None, dtype=None, *, _stacklevel=3):
    return _softmax("softmax", input, dim, dtype)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=3):
    return _softmax("log_softmax", input, dim, dtype)


def _count_where(mask, dim, keepdim):
    return sum(mask) if dim is None else sum(mask, dim, keepdim)


def all(input, dim=None, keepdim=False):
    """Whether every element is nonzero: a count of zeros (so a compiled call traces it; NaN counts
    as true); uint8 input gives uint8, as torch."""
    _check_tensor(input, "all")
    out = _count_where(eq(input, 0), dim, keepdim) == 0
    return out.to(D.uint8) if input.dtype is D.uint8 else out


def any(input, dim=None, keepdim=False):
    _check_tensor(input, "any")
    out = _count_where(ne(input, 0), dim, keepdim) > 0
    return out.to(D.uint8) if input.dtype is D.uint8 else out


def count_nonzero(input, dim=None):
    return sum(ne(input, 0), dim)


def cumsum(input, dim, *, dtype=None):
    raise NotImplementedError("cumsum is not implemented in tracegrad yet")


# == shape ops ==========================================================================================

def _size_args(size, op):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if type(s) is Sym:
            out.append(s)            # a symbolic size while a dynamic program is built (ir/symbolic.py)
            continue
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"{op}(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(s).__name__} at pos {len(out)}")
        out.append(int(s))
    return tuple(out)


def reshape(input, *shape):
    shape = S.infer_size(_size_args(shape, "reshape"), input.numel())
    a = input._data
    if a is None and hasattr(input, "_eager_scratch"):
        a = input._eager_scratch()
        if a is not None and tuple(input.shape) != shape:
            # a traced value whose layout, as eager's (a view, an argument, an elementwise op of a
            # transposed operand), does not allow the shape: eager's reshape copies, so writes
            # through the result must not reach the value (nor the value's writes the result):
            # traced as a copy
            try:
                np.reshape(a, shape, copy=False)
            except ValueError:
                input, a = apply(P["clone"], (input,), {"memory_format": "contiguous"}), None
    if a is not None and a.__class__ is np.ndarray and not a.flags.c_contiguous:
        # torch's reshape of a strided tensor that can be viewed: _reshape_alias, whose node is
        # ReshapeAliasBackward0 (view's is ViewBackward0; a copy's, below, UnsafeViewBackward0)
        return apply(P["reshape"], (input,), {"shape": shape, "view": "alias"})
    return apply(P["reshape"], (input,), {"shape": shape})


def view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        raise NotImplementedError("Tensor.view(dtype) is not supported; use Tensor.to(dtype)")
    shape = S.infer_size(_size_args(shape, "view"), input.numel())
    data = input._data
    if data is None and hasattr(input, "_eager_scratch"):
        data = input._eager_scratch()         # a traced value: its layout as eager's (tracing.Proxy)
    if data is not None:
        try:
            np.reshape(data, shape, copy=False)
        except ValueError:
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    return apply(P["reshape"], (input,), {"shape": shape})


def view_as(input, other):
    return view(input, tuple(other.shape))


def reshape_as(input, other):
    return reshape(input, tuple(other.shape))


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, (1,))
    s = S.normalize_dim(start_dim, input.ndim)
    e = S.normalize_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (S.numel(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input, dim, sizes):
    d = S.normalize_dim(dim, input.ndim)
    shape = tuple(input.shape)
    sizes = S.infer_size(tuple(sizes), shape[d]) if -1 in sizes else tuple(sizes)
    if S.numel(sizes) != shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({shape[d]}) in the input tensor")
    return view(input, shape[:d] + sizes + shape[d + 1:])


def squeeze(input, dim=None):
    shape = tuple(input.shape)
    if dim is None:
        dims = tuple(i for i, n in enumerate(shape) if n == 1)
        params = {"dims": dims, "all": True}
    else:
        dims = tuple(d for d in S.normalize_dims(dim, input.ndim) if input.ndim and shape[d] == 1)
        params = {"dims": dims} if isinstance(dim, int) else {"dims": dims, "multi": True}
    return apply(P["squeeze"], (input,), params)


def unsqueeze(input, dim):
    d = S.normalize_dim(dim, input.ndim + 1)
    return apply(P["unsqueeze"], (input,), {"dim": d})


def permute(input, *dims):
    if not dims:
        # torch's binding: dims is required (a 0-dim tensor takes permute(()))
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    dims = _size_args(dims, "permute")
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                           f"of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is not equal to "
                           f"len(dims) = {len(dims)}")
    nd = tuple(S.normalize_dim(d, input.ndim) for d in dims)
    if len(set(nd)) != len(nd):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return apply(P["permute"], (input,), {"dims": nd})


def transpose(input, dim0, dim1):
    n = input.ndim
    d0, d1 = S.normalize_dim(dim0, n), S.normalize_dim(dim1, n)
    dims = list(range(n))
    if n:
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return apply(P["permute"], (input,), {"dims": tuple(dims), "name": "TransposeBackward0"})


swapaxes = swapdims = transpose


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return apply(P["permute"], (input,), {"dims": tuple(range(input.ndim))[::-1], "name": "TBackward0"})


def _T(input):
    return apply(P["permute"], (input,), {"dims": tuple(range(input.ndim))[::-1]})


def _mT(input, name="mT", hint="This function is the identity in these cases.", level=2):
    if input.ndim == 0:
        # torch: the tensor itself (x.mT is x, no view: an op that saves it saves x, and x's in-place
        # write then fails that op's backward), deprecated
        warnings.warn(f"Tensor.{name} is deprecated on 0-D tensors. {hint}", UserWarning, stacklevel=level)
        return input
    if input.ndim < 2:
        raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(input, -2, -1)


def _mH(input):
    return _mT(input, "mH", "Consider using x.conj().", 3)


def _H(input):
    """x.H of a real tensor: mH of a matrix; x itself where 0-dim (deprecated), as torch."""
    if input.ndim == 0:
        return _mT(input, "H", "Consider using x.conj().", 3)
    if input.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {input.ndim}-D tensor." +
                           (" For batches of matrices, consider using tensor.mH" if input.ndim > 2 else ""))
    return transpose(input, -2, -1)


def adjoint(input):
    """The conjugate transpose of the last two dims (a view; tracegrad's tensors are real): mH's
    view, with torch's messages for fewer dims."""
    _check_tensor(input, "adjoint")
    if input.ndim == 0:
        warnings.warn("adjoint() is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return input
    return _mT(input, "adjoint()")


def expand(input, *sizes):
    sizes = _size_args(sizes, "expand")
    shape = tuple(input.shape)
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand({input.type()}{{{list(shape)}}}, size={list(sizes)}): the number of sizes provided "
                           f"({len(sizes)}) must be greater or equal to the number of dimensions in the tensor "
                           f"({len(shape)})")
    off = len(sizes) - len(shape)
    out = []
    for i, s in enumerate(sizes):
        j = i - off
        if j < 0:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            out.append(s)
            continue
        n = shape[j]
        if s == -1:
            s = n
        elif n != s and n != 1:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({n}) at "
                               f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                               f"{list(shape)}")
        out.append(s)
    out = tuple(out)
    if out == shape:
        return apply(P["expand"], (input,), {"shape": out})
    return apply(P["expand"], (input,), {"shape": out})


def expand_as(input, other):
    _check_tensors("expand_as", (input, other), ("input", "other"))
    return expand(input, tuple(other.shape))


def broadcast_to(input, size):
    return expand(input, tuple(size))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape; one already of that shape is returned itself,
    as torch's (the same object: no expand node)."""
    shape = S.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


def broadcast_shapes(*shapes):
    return Size(S.broadcast_shapes(*[tuple(s) if not isinstance(s, int) else (s,) for s in shapes]))


def contiguous(input, memory_format=None):
    if memory_format is not None and memory_format is not contiguous_format:
        if memory_format is preserve_format:
            if input.is_contiguous(memory_format=memory_format):
                return input
            raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
        params = _format_param(memory_format, "contiguous")
        _check_format_rank(input, params)
        if input.is_contiguous(memory_format=memory_format):
            return input
        _check_tensor(input, "contiguous")
        return apply(P["clone"], (input,), params)
    if input.is_contiguous():
        return input
    _check_tensor(input, "contiguous")
    return apply(P["clone"], (input,), {"memory_format": "contiguous"})


def _cat_check(tensors, dim, op):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not {type(tensors).__name__}")
    if len(tensors) == 0:
        if op == "stack":
            raise RuntimeError("stack expects a non-empty TensorList")
        raise ValueError(f"torch.{op}(): expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(x).__name__}")


def cat(tensors, dim=0):
    _cat_check(tensors, dim, "cat")
    for i, x in enumerate(tensors):
        if x.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # torch skips 1-D empty tensors (a legacy rule the primitive keeps too)
    ts = [x for x in tensors if not (x.ndim == 1 and x.shape[0] == 0)] or list(tensors[:1])
    ref = ts[0]
    d = S.normalize_dim(dim, ref.ndim)
    for i, x in enumerate(ts):
        if x.ndim != ref.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.ndim} and {x.ndim}")
        for k in range(ref.ndim):
            if k != d and x.shape[k] != ref.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref.shape[k]} but got size {x.shape[k]} for tensor number {i} in the list.")
    return apply(P["cat"], tuple(tensors), {"dim": d})


concat = concatenate = cat


def stack(tensors, dim=0):
    _cat_check(tensors, dim, "stack")
    ref = tensors[0]
    for i, x in enumerate(tensors):
        if tuple(x.shape) != tuple(ref.shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref.shape)} at entry 0 "
                               f"and {list(x.shape)} at entry {i}")
    d = S.normalize_dim(dim, ref.ndim + 1)
    return apply(P["stack"], tuple(tensors), {"dim": d})


def hstack(tensors):
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([x if x.ndim > 1 else x.reshape(1, -1) for x in tensors], 0)


def split(tensor, split_size_or_sections, dim=0):
    if tensor.ndim == 0:                 # (normalize_dim took the 0-dim tensor's one dim as 0)
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = S.normalize_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={s}")
        if s <= 0 and not (s == 0 and n == 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        # at least one piece, as torch's: an empty dim splits into one empty piece
        sizes = ([s] * (n // s) + ([n % s] if n % s else []) if s else []) or [0]
        name = "SplitBackward0"
    else:
        sizes = [int(x) for x in split_size_or_sections]
        if builtins.min(sizes, default=0) < 0:
            # (sizes summing to the length with a negative one split into pieces of other lengths)
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                               f"split_sizes={sizes}")
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={sizes}")
        name = "SplitWithSizesBackward0"
    return apply(P["split"], (tensor,), {"sizes": tuple(sizes), "dim": d, "name": name})


def chunk(input, chunks, dim=0):
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    d = S.normalize_dim(dim, input.ndim)
    n = input.shape[d]
    size = -(-n // chunks) if n else 0
    # an empty dim: `chunks` empty pieces, as torch's
    return split(input, size if size else 1, d) if n else split(input, [0] * chunks, d)


def tensor_split(input, indices_or_sections, dim=0):
    """input in `sections` near-equal parts along dim, or cut before each of the indices (clamped
    to the dim, so parts can be empty), as torch.tensor_split."""
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = S.normalize_dim(dim, input.ndim)
    n = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        # torch's tensor overload: a 1-d int64 tensor of indices, or a 0-d one of sections
        t = indices_or_sections
        if t._dtype is not D.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{D.SCALAR_NAME[t._dtype]}")
        if t.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {t.ndim} dims")
        indices_or_sections = t.tolist() if t.ndim else int(t.item())
    if isinstance(indices_or_sections, (list, tuple)):
        cuts = [int(i) + (n if i < 0 else 0) for i in indices_or_sections]
        bounds = [0] + [0 if c < 0 else n if c > n else c for c in cuts] + [n]
        return tuple(narrow(input, d, lo, hi - lo if hi > lo else 0) for lo, hi in zip(bounds, bounds[1:]))
    if indices_or_sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {indices_or_sections}")
    # each part a slice of its own (torch's SliceBackward0, output_nr 0; a view that an in-place op may
    # write), not the outputs of one split node
    base, extra = divmod(n, indices_or_sections)
    starts = [i * base + builtins.min(i, extra) for i in range(indices_or_sections + 1)]
    return tuple(narrow(input, d, lo, hi - lo) for lo, hi in zip(starts, starts[1:]))


def unbind(input, dim=0):
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return apply(P["unbind"], (input,), {"dim": S.normalize_dim(dim, input.ndim)})


def select(input, dim, index):
    d = S.normalize_dim(dim, input.ndim)
    n = input.shape[d]
    if index < -n or index >= n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}")
    return getitem(input, (slice(None),) * d + (index,))


def narrow(input, dim, start, length):
    # torch's narrow_symint: its checks in its order; a negative start counts from the end
    for v in (dim, start, length):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, Tensor)):
            got = ", ".join(type(a).__name__ for a in (dim, start, length))
            raise TypeError(f"narrow() received an invalid combination of arguments - got ({got}), but expected one "
                            "of:\n * (int dim, Tensor start, int length)\n * (int dim, int start, int length)")
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if isinstance(start, Tensor):
        if start.ndim or start.dtype._kind != 1:
            raise RuntimeError("start must be an 0-dim integral Tensor.")
        start = int(start.item())
    start, length = int(start), int(length)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    d = S.normalize_dim(dim, input.ndim)
    n = input.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if start > n - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    # a slice, even of the whole dim (torch's SliceBackward0)
    return getitem_prim(input, (), (("s", None, None, None),) * d + (("s", start, start + length, None),))


def flip(input, dims):
    if isinstance(dims, int):
        dims = (dims,)
    return apply(P["flip"], (input,), {"dims": S.normalize_dims(tuple(dims), input.ndim)})


def fliplr(input):
    return flip(input, (1,))


def flipud(input):
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    if isinstance(shifts, int):
        shifts = (shifts,)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll expects dims to be specified when shifts has more than one element")
        return apply(P["roll"], (input,), {"shifts": tuple(shifts), "dims": None})
    if isinstance(dims, int):
        dims = (dims,)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if input.ndim == 0:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    return apply(P["roll"], (input,), {"shifts": tuple(shifts),
                                       "dims": tuple(S.normalize_dim(d, input.ndim) for d in dims)})


def repeat(input, *sizes):
    sizes = _size_args(sizes, "repeat")
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return apply(P["repeat"], (input,), {"sizes": sizes})


def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


def _index_check(input, dim, index, op):
    if not isinstance(index, Tensor) or index.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index")


def gather(input, dim, index, *, sparse_grad=False):
    """torch.gather: torch's GatherBackward0 saves self (written before the backward, it raises),
    which the primitive's derivative does not read; the ops whose torch node saves only the
    positions (sort, median, kthvalue, mode) pick their values with _gather."""
    out = _gather(input, dim, index)
    return keep_saved(out, input) if out.__class__ is Proxy or out._grad_fn is not None else out


def _gather(input, dim, index):
    d = S.normalize_dim(dim, input.ndim)
    _index_check(input, d, index, "gather")
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    too_big = [k for k in range(index.ndim) if k != d and index.ndim == input.ndim and index.shape[k] > input.shape[k]]
    if too_big:
        raise RuntimeError(f"Size does not match at dimension {too_big[0]} expected index {list(index.shape)} to be no "
                           f"larger than self {list(input.shape)} apart from dimension {d}")
    _index_range_check(input, d, index)
    return apply(P["gather"], (input, index), {"dim": d})


def _index_range_check(input, d, index):
    if index._data is not None:        # a concrete index: raise before anything is recorded
        check_index_bounds(index._data, input.shape[d] if input.ndim else 1, d)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    d = S.normalize_dim(dim, input.ndim)
    _index_check(input, d, index, "scatter")
    if src is None:
        src = value
    if reduce not in (None, "add"):
        raise NotImplementedError(f"scatter(reduce='{reduce}') is not supported")
    if isinstance(src, Tensor):
        if src.dtype is not input.dtype:
            raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype")
        if index.ndim != src.ndim:
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
        if index.ndim == input.ndim and builtins.any((k != d and index.shape[k] > input.shape[k]) or
                                                     index.shape[k] > src.shape[k] for k in range(index.ndim)):
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(input.shape)} "
                               f"apart from dimension {d} and to be no larger size than src {list(src.shape)}")
    else:
        src = _scalar(src)
    _index_range_check(input, d, index)
    params = {"dim": d}
    if reduce:
        params["reduce"] = reduce
        if index.__class__ is Tensor and isinstance(src, Tensor) and not src.requires_grad and input.requires_grad:
            # torch's ScatterAddBackward0 saves index for src's gradient alone; the primitive saves it
            # whatever requires grad: an alias with a version counter of its own is saved instead
            # (the same data), so index written before the backward does not raise where torch does not
            index = Tensor._make(index._data, index._dtype)
    return apply(P["scatter"], (input, index, src), params)


def scatter_add(input, dim, index, src):
    return scatter(input, dim, index, src, reduce="add")


def index_select(input, dim, index):
    d = S.normalize_dim(dim, input.ndim)
    if not isinstance(index, Tensor) or index.dtype not in (D.int64, D.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if input.ndim == 0:
        # a 0-dim input: one index, a 0-dim result, as torch's (it gave a 1-element vector)
        n = index.numel()
        if n != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {n} value(s)")
        out = index_select(input.reshape(1), 0, index.reshape(1)).reshape(())
        return rename_grad_fn(out, "IndexSelectBackward0") if out.grad_fn is not None else out
    if index._data is not None:        # a concrete index: raise before anything is recorded
        check_index_select_bounds(index._data, input.shape, d)
    return apply(P["index_select"], (input, index.reshape(-1) if index.ndim == 0 else index), {"dim": d})


def check_scalar_value(value, d, op):
    """torch reads a 0-dim tensor value of masked_fill and index_fill as a number, converted to the
    input's dtype d with its checked conversion: int8 masked_fill(mask, tensor(300)) raised "value cannot
    be converted to type int8_t without overflow" in torch and stored 44 here, a float16 one with
    tensor(1e6) inf. The value is read, so a trace that cannot know it runs eagerly."""
    if not may_not_fit(value._dtype, d):
        return
    if _ACTIVE[0] and TRACING.stack:
        raise TraceError(f"{op} with a 0-dim {D.SCALAR_NAME[value._dtype]} tensor as the value for a "
                         f"{D.SCALAR_NAME[d]} tensor: torch converts the value with an overflow check, which reads "
                         f"it (pass a Python number, or a value of the tensor's dtype)")
    check_value_fits(value.item(), d)


def masked_fill(input, mask, value):
    if not isinstance(mask, Tensor) or not isinstance(value, (Tensor, Sym) + _Scalar):
        got = ", ".join(type(v).__name__ for v in (input, mask, value))
        raise TypeError(f"masked_fill() received an invalid combination of arguments - got ({got}), but expected one "
                        f"of:\n * (Tensor input, Tensor mask, Tensor value)\n * (Tensor input, Tensor mask, Number "
                        f"value)\n")
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_cname(mask.dtype) if isinstance(mask, Tensor) else type(mask).__name__}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        check_scalar_value(value, input._dtype, "masked_fill")
    else:
        value = _scalar(value)
    S.broadcast_shapes(tuple(mask.shape), tuple(input.shape))
    return apply(P["masked_fill"], (input, mask, value), {})


def tril(input, diagonal=0):
    if input.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return apply(P["tril"], (input,), {"k": diagonal})


def triu(input, diagonal=0):
    if input.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return apply(P["triu"], (input,), {"k": diagonal})


def nonzero(input, *, as_tuple=False):
    if input.is_cuda:
        out = nonzero(input.cpu(), as_tuple=as_tuple)
        return tuple(t.cuda() for t in out) if as_tuple else out.cuda()
    if input._data is None:
        raise TraceError("nonzero (and where(condition) with one argument) has a data-dependent shape")
    data = input._values()
    if data.ndim == 0:           # torch: one index of no dimensions when the value is not zero
        n = int(data != 0)
        return (_wrap_np(np.zeros(n, np.int64)),) if as_tuple else _wrap_np(np.zeros((n, 0), np.int64))
    nz = np.nonzero(data)
    if as_tuple:
        return tuple(_wrap_np(a.astype(np.int64)) for a in nz)
    # (torch's result is laid out column by column: (1, n) strides, its .view(-1) raising)
    return _wrap_np(np.stack(nz).astype(np.int64).T if nz else np.zeros((1, 0), np.int64))


# == indexing ============================================================================================

_MASK_DTYPES = (D.bool_, D.uint8)


def _normalize_key(input, key, zero_dim_select=True):
    """Turn a Python index into the primitive's key (hashable) plus its index tensors.

    As in torch, a 0-dim integer tensor indexes like an int, and inside a tuple a slice that
    keeps a whole dim becomes ("s", None, None, None) (it makes no view); a lone slice always
    makes one. index_put passes zero_dim_select=False: there every tensor is an index tensor.
    """
    if isinstance(key, range) or (isinstance(key, tuple) and builtins.any(isinstance(k, range) for k in key)):
        # a range indexes as the list of its integers (torch reads it as a sequence)
        key = _t(list(key)) if isinstance(key, range) else tuple(_t(list(k)) if isinstance(k, range) else k
                                                                  for k in key)
    if isinstance(key, list) and len(key) < 32 and builtins.any(
            isinstance(k, (list, tuple, slice, Tensor)) or k is None or k is Ellipsis for k in key):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed in "
                      "pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted as "
                      "tensor index, x[torch.tensor(seq)], which will result either in an error or a different result",
                      UserWarning, stacklevel=3)
        key = tuple(key)
    single = not isinstance(key, tuple)
    if single:
        key = (key,)
    # a list or array indexes as the tensor made of it (an empty list as an empty int64 one, as torch's)
    key = tuple((tensor(k, dtype=D.int64) if isinstance(k, list) and not k else _t(k))
                if isinstance(k, (list, np.ndarray)) else k for k in key)
    if builtins.any(isinstance(k, Tensor) and k.dtype is D.uint8 and k.ndim for k in key):
        # torch reads a uint8 index tensor as a mask (its nonzero entries), as a bool one
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                      UserWarning, stacklevel=3)
    shape = tuple(input.shape)
    out, idx = [], []
    # dims consumed, to check ints and masks against the right size
    n_consuming = builtins.sum(1 for k in key if k is not None and k is not Ellipsis and not isinstance(k, bool)
                               and not (isinstance(k, Tensor) and k.dtype in _MASK_DTYPES)) + builtins.sum(
        k.ndim for k in key if isinstance(k, Tensor) and k.dtype in _MASK_DTYPES)
    if not shape and builtins.any(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in key):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    if n_consuming > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    dim = 0
    seen_ellipsis = False
    bounds = []             # (index tensor, its place among the index tensors, the size of its dim)
    for pos, k in enumerate(key):
        if isinstance(k, Tensor) and k.ndim == 0 and k._data is not None and k.dtype in (D.bool_, D.uint8):
            k = bool(k._values())
        elif isinstance(k, Tensor) and k.ndim == 0 and k.dtype._kind == 1 and k._data is not None and zero_dim_select:
            k = int(k.item())
        if k is None:
            out.append(None)
        elif k is Ellipsis:
            if seen_ellipsis:
                continue                # as torch: the first ellipsis takes every unnamed dim, later ones none
            seen_ellipsis = True
            out.append(Ellipsis)
            dim += len(shape) - n_consuming
        elif isinstance(k, (bool, np.bool_)):
            # as torch (and numpy): a 0-dim mask, a new dim of size 1 (True) or 0 (False) made by advanced indexing
            out.append(bool(k))
        elif isinstance(k, (int, np.integer)):
            k = int(k)
            n = shape[dim]
            if k < -n or k >= n:
                # torch names the dimension by the int's position in the key
                raise IndexError(f"index {k} is out of bounds for dimension {pos} with size {n}")
            out.append(k)
            dim += 1
        elif isinstance(k, slice):
            step = k.step
            if step is not None and step == 0:
                raise ValueError("slice step cannot be zero")
            if step is not None and step < 0:
                raise ValueError("step must be greater than zero")
            start, stop, step = [int(v) if isinstance(v, Tensor) else v for v in (k.start, k.stop, step)]
            if single:
                start = 0 if start is None else start
            elif start in (None, 0) and step in (None, 1) and (stop is None or stop >= shape[dim]):
                start = stop = step = None
            out.append(("s", start, stop, step))
            dim += 1
        elif isinstance(k, (Tensor, list, np.ndarray)):
            if k.dtype in _MASK_DTYPES:
                for j in range(k.ndim):
                    if k.shape[j] != shape[dim + j]:
                        raise IndexError(f"The shape of the mask {list(k.shape)} at index {j} does not match the shape "
                                         f"of the indexed tensor {list(shape)} at index {dim + j}")
                if k._data is None:
                    raise TraceError("indexing with a boolean mask has a data-dependent shape")
                for a in np.nonzero(k._values()):
                    out.append(("t", len(idx)))
                    idx.append(_t(a.astype(np.int64)))
                dim += k.ndim
            elif k.dtype is D.int64 or k.dtype is D.int32:
                bounds.append((k, len(idx), shape[dim]))
                out.append(("t", len(idx)))
                idx.append(k if k.dtype is D.int64 else k.long())
                dim += 1
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        elif isinstance(k, str):
            raise TypeError("new(): invalid data type 'str'")
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                             "valid indices (got " + type(k).__name__ + ")")
    if len(idx) > 1:
        try:
            S.broadcast_shapes(*[tuple(i.shape) for i in idx])
        except Exception:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes " +
                             ", ".join(str(list(i.shape)) for i in idx)) from None
    _check_index_bounds(input, idx, bounds)
    return tuple(out), tuple(idx)


def _check_index_bounds(input, idx, bounds):
    """torch's bounds check of the index tensors of x[...] (and of x[...] = v): none when the
    index tensors broadcast to nothing; any of them on a dim of size 0 raises; else the entries
    are checked where an element is read or written, so none when another dim of x has size 0
    (zeros(5, 0)[tensor([9])] is empty in torch; tracegrad raised IndexError)."""
    for k, place, n in bounds:
        if k._data is not None and k.numel() and (k._data.max() >= n or k._data.min() < -n):
            if not math.prod(S.broadcast_shapes(*[tuple(i.shape) for i in idx])):
                return
            if builtins.any(m == 0 for _, _, m in bounds):
                raise IndexError("index is out of bounds for dimension with size 0")
            if not math.prod(input.shape):
                return
            bad = int(k._data.max()) if k._data.max() >= n else int(k._data.min())
            # torch counts the dimension among the index tensors
            raise IndexError(f"index {bad} is out of bounds for dimension {place} with size {n}")


def _refuse_byte_mask_fill(key, value):
    """torch writes a one-element value through a lone mask index (the other entries basic) with
    masked_fill_, which refuses a uint8 mask (a bool one fills as index_put would)."""
    if not isinstance(key, tuple):
        key = (key,)
    adv = [k for k in key if isinstance(k, (Tensor, list, np.ndarray)) and not (isinstance(k, Tensor) and k.ndim == 0)]
    if (len(adv) == 1 and isinstance(adv[0], Tensor) and adv[0].dtype is D.uint8
            and (not isinstance(value, Tensor) or value.numel() == 1)):
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype unsigned char")


def getitem(input, key):
    key, idx = _normalize_key(input, key)
    return apply(P["getitem"], (input,) + idx, {"key": key})


def getitem_prim(input, idx, key):
    return apply(P["getitem"], (input,) + tuple(idx), {"key": key})


def getitem_backward(g, idx, key, shape):
    return apply(P["getitem_backward"], (g,) + tuple(idx), {"key": key, "shape": tuple(shape)})


def index_put_prim(input, value, idx, key, accumulate=False):
    params = {"key": key}
    if accumulate:
        params["accumulate"] = True
    return apply(P["index_put"], (input, value) + tuple(idx), params)


def index_put(input, indices, values, accumulate=False, *, _op="index_put"):
    """input with input[indices] = values (or += values, repeated indices adding up), as torch.index_put.

    `indices` is a tuple or list of index tensors, one per leading dim."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{_op}(): argument 'indices' (position 2) must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    for i, k in enumerate(indices):
        if not isinstance(k, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(k).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"{_op}(): argument 'values' (position 3) must be Tensor, not {type(values).__name__}")
    if len(indices) > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim} (got {len(indices)})")
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{D.SCALAR_NAME[input.dtype]} for the destination and {D.SCALAR_NAME[values.dtype]} for "
                           "the source.")
    if not accumulate:
        _refuse_byte_mask_fill(tuple(indices), values)
    # every entry is an index tensor (a 0-dim one too, not a select as in x[...])
    key, idx = _normalize_key(input, tuple(indices), zero_dim_select=False)
    sub = tuple(P["getitem"].shape(input, *idx, key=key))
    try:
        ok = S.broadcast_shapes(tuple(values.shape), sub) == sub
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                           f"indexing result of shape {list(sub)}")
    return index_put_prim(input, values, idx, key, accumulate)


# == matmul ==============================================================================================

def _mm_dtype_check(a, b, op):
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_cname(a.dtype)} != {_cname(b.dtype)}")


def _cname(d):
    return D.TYPE_NAME.get(d, d.name)


def matmul(input, other):
    _check_tensor(input, "matmul")
    _check_tensor(other, "matmul", "other", 2)
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {input.ndim}D and "
                           f"{other.ndim}D")
    _mm_dtype_check(input, other, "matmul")
    a, b = input, other
    if a.ndim == 1 and b.ndim == 1 and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                           f"have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
                           f"respectively")
    if a.ndim == 2 and b.ndim == 1 and a.shape[-1] != b.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), vec "
                           f"({b.shape[0]})")
    out = apply(P["matmul"], (a, b), {})
    saved = out._grad_fn._saved if out.__class__ is Tensor and out._grad_fn is not None else None
    if saved:
        # torch's matmul hands dot, mv and mm an operand of at most 2 dims as it is, except a
        # vector beside a matrix (unsqueezed) and a matrix beside a batch (transposed); an operand
        # of 3 or more dims it reshapes first (folded into a matrix, or expanded for bmm): its node
        # saves a new tensor, with a grad_fn of its own, so a later detach_() of the operand leaves
        # the backward running (torch raised only where the operand itself was saved). Where that
        # reshape copies, a later write to the operand does not reach the backward either: the
        # node keeps a copy of the operand's value (a leaf that requires grad stays the leaf: the write raises)
        # node keeps a copy of the operand's value. Where it views the operand, the view keeps the
        # operand's memory of now (a later `x.data = y` leaves it), and its version
        reshaped = matmul_reshaped(a, b)
        copied = _matmul_copies(a, b)
        for k, (s, c, x) in enumerate(zip(saved[1:], copied, (a, b))):
            if s is None or k not in reshaped:
                continue
            s.nonleaf = False
            if s.hook is None and s.tensor is x:
                s.tensor = saved_alias(x, copy=c)
                s.vc, s.version = s.tensor._vc, s.tensor._vc[0]
    return out


def _view_strides(shape, strides, new):
    """torch's computeStride: the strides of `new` as a view of (shape, strides), or None where
    reshape must copy."""
    if math.prod(shape) == 0:
        return True
    view_d, chunk, t_numel, v_numel = len(new) - 1, (strides[-1] if shape else 1), 1, 1
    for d in range(len(shape) - 1, -1, -1):
        t_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != t_numel * chunk):
            while view_d >= 0 and (v_numel < t_numel or new[view_d] == 1):
                v_numel *= new[view_d]
                view_d -= 1
            if v_numel != t_numel:
                return None
            if d > 0:
                chunk, t_numel, v_numel = strides[d - 1], 1, 1
    return True if view_d == -1 else None


def _matmul_copies(a, b):
    """Whether torch's matmul reshapes each operand by a copy (at::native::_matmul_impl): two
    operands of 3 dims of which one alone has a batch of 1 are first a matrix (that one, squeezed)
    and a batch; where one has 3 or more dims and the other at most 2, the larger folded into a
    matrix (should_fold: where the smaller requires grad, else where the larger's leading dims are
    contiguous and the first operand is no matrix); otherwise both expanded to the broadcast batch
    and flattened for bmm."""
    xs = [(tuple(a.shape), tuple(a.stride()), a.requires_grad), (tuple(b.shape), tuple(b.stride()), b.requires_grad)]
    if len(xs[0][0]) == 3 and len(xs[1][0]) == 3 and (xs[0][0][0] == 1) != (xs[1][0][0] == 1):
        k = 0 if xs[0][0][0] == 1 else 1
        xs[k] = (xs[k][0][1:], xs[k][1][1:], xs[k][2])
    return _matmul_copies_of(*xs)


def _matmul_copies_of(a, b):
    """_matmul_copies of two operands given as (shape, strides, requires_grad)."""
    d1, d2 = len(a[0]), len(b[0])
    if d1 <= 2 and d2 <= 2:
        return False, False
    big, small = (a, b) if d1 >= d2 else (b, a)
    sh, st = big[0], big[1]
    if big is b:                          # folded as b.mT
        sh, st = sh[:-2] + (sh[-1], sh[-2]), st[:-2] + (st[-1], st[-2])
    if len(small[0]) <= 2:
        fold = small[2] or d1 != 2 and (
            math.prod(sh) == 0 or builtins.all(st[k] == st[k + 1] * sh[k + 1] for k in range(len(sh) - 2)))
        if fold:
            c = _view_strides(sh, st, (math.prod(sh[:-1]), sh[-1])) is None
            return (c, False) if big is a else (False, c)
    batch = tuple(broadcast_shapes(a[0][:-2], b[0][:-2]))
    res = []
    for (shape, strides, _), tail in ((a, a[0][-2:] if d1 > 1 else (1,) + a[0]), (b, b[0][-2:] if d2 > 1 else b[0])):
        full = batch + tail
        xs, xst = (1,) * (len(full) - len(shape)) + shape, (0,) * (len(full) - len(shape)) + strides
        est = tuple(0 if n != m else t for n, m, t in zip(xs, full, xst))
        res.append(_view_strides(full, est, (math.prod(batch),) + tail) is None)
    return tuple(res)


def mm(input, mat2):
    _check_tensors("mm", (input, mat2), ("input", "mat2"))
    if input.ndim != 2:
        raise RuntimeError(f"self must be a matrix")
    if mat2.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix")
    return matmul(input, mat2)


def bmm(input, mat2):
    if input.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor")
    if mat2.ndim != 3:
        raise RuntimeError(f"batch2 must be a 3D tensor")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{input.shape[0]}, "
                           f"{input.shape[2]}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    _mm_dtype_check(input, mat2, "bmm")
    return apply(P["matmul"], (input, mat2), {"op": "bmm"})


def mv(input, vec):
    return matmul(input, vec)


def dot(input, other):
    _check_tensors("dot", (input, other), ("input", "tensor"))
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


def outer(input, vec2):
    _check_tensors("outer", (input, vec2), ("input", "vec2"))
    # (tracegrad flattened a 2-d operand into an outer product of its elements)
    for name, v in (("self", input), ("vec2", vec2)):
        if isinstance(v, Tensor) and v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return mul(reshape(input, (-1, 1)), vec2)


ger = outer


_ELL = "..."


def _einsum_parse(equation, nops):
    """torch's einsum parser: the labels of each operand and of the output (None: implicit), with
    "..." as one token; its errors in its order. Spaces are ignored; positions count them."""
    lhs, arrow, rhs = equation.partition("->")
    ops, cur, found = [[]], 0, False
    i = 0
    while i < len(lhs):
        c = lhs[i]
        if c == ".":
            if found:
                raise RuntimeError(f"einsum(): found '.' for operand {cur} for which an ellipsis was already found")
            if not lhs.startswith("...", i):
                raise RuntimeError(f"einsum(): found '.' for operand {cur} that is not part of any ellipsis")
            ops[cur].append(_ELL)
            found = True
            i += 2
        elif c == ",":
            cur += 1
            if cur >= nops:
                raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
            ops.append([])
            found = False
        elif c != " ":
            if not ("a" <= c <= "z" or "A" <= c <= "Z"):
                raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation string, "
                                   "subscripts must be in [a-zA-Z]")
            ops[cur].append(c)
        i += 1
    if cur != nops - 1:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if not arrow:
        return ops, None, None
    out, found = [], False
    i = 0
    while i < len(rhs):
        c = rhs[i]
        if c == ".":
            if found:
                raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was already found")
            if not rhs.startswith("...", i):
                raise RuntimeError("einsum(): found '.' for output that is not part of any ellipsis (...)")
            out.append(_ELL)
            found = True
            i += 2
        elif c != " ":
            if not ("a" <= c <= "z" or "A" <= c <= "Z"):
                raise RuntimeError(f"einsum(): invalid subscript given at index {len(lhs) + 2 + i} in the equation "
                                   "string, subscripts must be in [a-zA-Z]")
            out.append(c)
        i += 1
    return ops, out, len(lhs) + 2


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    labels, out, _ = _einsum_parse(equation, len(operands))
    for x in operands[1:]:
        if isinstance(x, Tensor) and isinstance(operands[0], Tensor) and x.dtype is not operands[0].dtype:
            # torch's einsum contracts with bmm, which takes one dtype
            raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[operands[0].dtype]} but found "
                               f"{D.SCALAR_NAME[x.dtype]}")
    for j, (lab, x) in enumerate(zip(labels, operands)):
        n = builtins.sum(1 for c in lab if c != _ELL)
        if _ELL in lab:
            if n > x.ndim:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n}) is more than the number "
                                   f"of dimensions ({x.ndim}) for operand {j}")
        elif n != x.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n}) does not match the number of "
                               f"dimensions ({x.ndim}) for operand {j} and no ellipsis was given")
    # "..." becomes letters the equation does not use, right-aligned across the operands (its dims
    # broadcast as numpy's do); the primitive then sees an equation of letters only
    ell_nd = builtins.max([x.ndim - (len(lab) - 1) for lab, x in zip(labels, operands) if _ELL in lab], default=0)
    used = {c for lab in labels for c in lab} | set(out or ())
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used]
    if ell_nd > len(free):
        raise RuntimeError("einsum(): too many dimensions under '...' for the unused subscripts left")
    ell = "".join(free[:ell_nd])
    counts = collections.Counter(c for lab in labels for c in lab if c != _ELL)
    if out is None:
        # torch's implicit output: the broadcast "..." dims, then the labels seen once, upper case first
        res = ell + "".join(sorted(c for c, k in counts.items() if k == 1))
    else:
        seen_out = set()
        for c in out:
            if c == _ELL:
                continue
            if c in seen_out:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            if c not in counts:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   "operand")
            seen_out.add(c)
        res = "".join(ell if c == _ELL else c for c in out)
    ins = ["".join(ell[ell_nd - (x.ndim - len(lab) + 1):] if c == _ELL else c for c in lab)
           for lab, x in zip(labels, operands)]
    eq = ",".join(ins) + "->" + res
    seen = {}
    for j, (spec, x) in enumerate(zip(ins, operands)):
        for pos, (c, n) in enumerate(zip(spec, x.shape)):
            if c in seen and n != seen[c] and n != 1 and seen[c] != 1:
                if c in ell:
                    raise RuntimeError(f"einsum(): dimension {pos} covered by ellipsis in operand {j}has "
                                       f"size {n} which does not broadcast with previously seen ellipsis with size "
                                       f"{seen[c]} for the respective dimension")
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {j} which does not broadcast "
                                   f"with previously seen size {seen[c]}")
            if seen.get(c, 1) == 1:
                seen[c] = n
    # torch's dtypes: an index summed within one operand is a sum (integers become int64); one
    # shared by several is a contraction (bmm, which has no bool kernel). An operand where the
    # index has size 1 only broadcasts: it does not count as sharing it.
    res = eq.split("->")[1]
    summed = {c for spec in ins for c in spec if c not in res}

    def holders(c):
        has = [k for k, spec in enumerate(ins) if c in spec]
        real = [k for k in has if operands[k].shape[ins[k].index(c)] != 1]
        return real or has
    held = {c: holders(c) for c in summed}
    if builtins.any(len(h) > 1 for h in held.values()) and D.result_type(list(operands)) is D.bool_:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    operands = tuple(convert(x, D.int64) if not x.dtype.is_floating_point and builtins.any(
        c in summed and held[c] == [k] for c in spec) else x for k, (spec, x) in enumerate(zip(ins, operands)))
    if not summed and len(operands) <= 2:
        # no index summed: torch takes the diagonals of repeated indices, permutes each operand to
        # the output's order and multiplies them, so the result is laid out by theirs; of one
        # operand it is a view (a write to einsum("ij->ji", a) or einsum("ii->i", a) writes a)
        aligned = []
        for spec, x in zip(ins, operands):
            y, spec = x, list(spec)
            for c in res:
                while spec.count(c) > 1:
                    p = spec.index(c)
                    q = spec.index(c, p + 1)
                    y = diagonal(y, 0, p, q)       # (composite.py puts it in this namespace)
                    spec = [e for k, e in enumerate(spec) if k not in (p, q)] + [c]
            y = permute(y, [spec.index(c) for c in res if c in spec])
            for k, c in enumerate(res):
                if c not in spec:
                    y = unsqueeze(y, k)
            aligned.append(y)
        return aligned[0] if len(aligned) == 1 else mul(aligned[0], aligned[1])
    return apply(P["einsum"], operands, {"equation": eq})


# == conversion, detach ===================================================================================

def detach(input):
    # as torch: the storage and version counter are shared, but the result is no view to
    # autograd (no _base), so a view of it is a view of it alone and needs no grad
    t = Tensor._make(input._data, input._dtype, False, vc=input._vc)
    t._inference = input._inference
    if _VALUE_READS[0]:
        t.__dict__["_value_of"] = input        # while compile traces: a read of t's values reads input's
    return t


def to(input, *args, **kwargs):
    fmt = kwargs.pop("memory_format", None)
    if fmt is not None and fmt is not preserve_format:
        # torch's to(memory_format=...): the tensor itself where its strides suggest that format
        # already (to_will_alias), else a copy laid out in it (_to_copy)
        params = _format_param(fmt, "to")
        _check_format_rank(input, params)
        out = to(input, *args, **kwargs)
        if out is input and _suggested_format(input) == params.get("memory_format", "contiguous"):
            return input
        if "memory_format" in params and params["memory_format"] != "contiguous" and out.is_cuda:
            raise NotImplementedError(f"to(memory_format={fmt!r}) of a CUDA tensor is not supported by tracegrad "
                                      f"yet; lay it out on the CPU first")
        if out is not input and fmt is contiguous_format and out.is_contiguous():
            return out
        # (a converted copy keeps input's layout: laid out in the format's own strides, as torch's one copy)
        return apply(P["clone"], (out,), {**params, "to": True})
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):            # as torch: the other tensor's dtype and device
            dtype, device = a.dtype, a.device
        elif isinstance(a, str) or a.__class__.__name__ == "device":
            device = a
    if device is not None:
        dev = Above.parse(device)
        if dev != ("cuda" if input.is_cuda else "cpu"):
            if dtype is not None and dtype is not input.dtype:
                input = apply(P["convert"], (input,), {"dtype": dtype})
            return Above.transfer(input, dev)
    if dtype is None or dtype is input.dtype:
        return clone(input) if copy else input
    return apply(P["convert"], (input,), {"dtype": dtype})


def type_as(input, other):
    _check_tensors("type_as", (input, other), ("input", "other"))
    return to(input, other.dtype)


def as_strided(input, size, stride, storage_offset=0):
    return apply(P["as_strided"], (input,), {"shape": tuple(size), "strides": tuple(stride),
                                             "offset": int(storage_offset)})


def as_strided_scatter(input, src, size, stride, storage_offset=0):
    return apply(P["as_strided_scatter"], (input, src), {"shape": tuple(size), "strides": tuple(stride),
                                                          "offset": int(storage_offset)})


# math_functional.py (inverse and hyperbolic functions, scans, sorting, linear algebra) and
# composite.py (decompositions: diagonal, trace, trunc, cdist, nan_to_num, ...) add their
# functions to this namespace as they are imported (tracegrad/__init__ imports them next).


# == memory overlap of an op's operands with what it writes =====================================

_OPERAND_OVERLAP_MSG = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                        "single memory location. Please clone() the tensor before performing the operation.")


def _dense(a):
    """torch's is_non_overlapping_and_dense of an ndarray's layout (strides in elements)."""
    n = a.ndim
    if n == 0:
        return True
    st = a.strides
    if n == 1:
        return a.shape[0] < 2 or st[0] == a.itemsize
    need = a.itemsize
    for size, stride in sorted([(z, t) for z, t in zip(a.shape, st) if z >= 2], key=lambda p: p[1]):
        if stride != need:
            return False
        need *= size
    return True


_ORDER_DEPENDENT_MSG = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                        "single memory location, and the written-to tensor is not dense: the result would depend on "
                        "the order in which the elements are written (an in-place op reads an element it has already "
                        "written). Please clone() the input tensor before performing the operation.")


def _written_before_read(t, d):
    """Whether an elementwise in-place op writing array t from operand d (broadcast to t's
    shape) reads an element after it has written it, in the order torch's TensorIterator visits
    t (its dims by stride, outermost first): then torch's result depends on its loop (its
    vector width, its threads), and eager's, computed as if d were read first, is not
    torch's. x.add_(x[:, :1]) reads x[i, 0] after writing it; x[:, :2].add_(x[:, 1:]) reads
    each element before it writes it, as numpy's kernel does."""
    if t.itemsize != d.itemsize or t.ndim < d.ndim or builtins.any(
            n != m and n != 1 for n, m in zip(d.shape[::-1], t.shape[::-1])):
        return False
    if d.shape == t.shape and d.strides == t.strides and \
            d.__array_interface__["data"][0] == t.__array_interface__["data"][0]:
        return False                  # the same elements in the same order: each read, then written
    try:
        if not np.shares_memory(t, d, max_work=1 << 16):
            return False              # (x[:, 0].add_(x[:, 1]): one base, no element in common)
    except np.exceptions.TooHardError:
        pass
    shape = t.shape
    db = np.broadcast_to(d, shape)
    perm = sorted(range(t.ndim), key=lambda k: -builtins.abs(t.strides[k]))

    def addresses(a):
        a = a.transpose(perm)
        out = np.full(a.shape, a.__array_interface__["data"][0], np.int64)
        for k, (n, st) in enumerate(zip(a.shape, a.strides)):
            if n > 1 and st:
                out += (np.arange(n, dtype=np.int64) * st).reshape((-1,) + (1,) * (a.ndim - k - 1))
        return out.reshape(-1)

    written, read = addresses(t), addresses(db)
    by_address = np.argsort(written, kind="stable")
    ordered = written[by_address]
    pos = np.minimum(np.searchsorted(ordered, read), ordered.size - 1)
    hit = ordered[pos] == read
    return bool(np.any(hit & (by_address[pos] < np.arange(read.size))))


def _broadcast_strides(a, shape):
    """The strides (bytes) TensorIterator gives array `a` broadcast to `shape`: zero where it
    repeats it (a dim of size 1 made larger, or one it lacks), its own elsewhere, a dim of size 1
    that stays one too (numpy's broadcast_to zeroes those)."""
    lead = len(shape) - a.ndim
    return (0,) * lead + tuple(0 if n == 1 and m != 1 else st for n, m, st in zip(a.shape, shape[lead:], a.strides))


_SERIAL_MAX = 32768        # at::internal::GRAIN_SIZE: a loop over fewer elements runs in one thread


def sequential_index_put(target, values, indices, accumulate):
    """What torch's CPU index_put_ leaves in `target` (arrays) where `values` shares memory with it
    in a layout torch does not judge (not dense): its loop writes each element and reads `values`
    as it goes, in TensorIterator's order, in one thread below GRAIN_SIZE elements (accumulate
    repeats add up in that order too). Run here element by element on a copy of their memory.
    `indices`: integer arrays, one for each leading dim. None where it cannot be told: another
    memory owner, a strided one, more elements; False for shapes that do not fit or an index out
    of range (the op raises torch's error for them)."""
    root = memory_root(target)
    if memory_root(values) is not root or not (root.flags.c_contiguous or root.flags.f_contiguous) \
            or not builtins.all(np.issubdtype(i.dtype, np.integer) for i in indices):
        return None
    try:
        ishape = np.broadcast_shapes(*[i.shape for i in indices])
        full = tuple(ishape) + target.shape[len(indices):]
        np.broadcast_to(values, full)
    except ValueError:
        return False
    n = math.prod(full)
    if n >= _SERIAL_MAX:
        return None
    k = len(indices)
    wrapped = []
    for d, i in enumerate(indices):
        size = target.shape[d]
        if i.size and (i.min() < -size or i.max() >= size):
            return False
        wrapped.append(np.broadcast_to(np.where(i < 0, i + size, i), ishape))
    ni = len(ishape)
    out_strides = (0,) * ni + target.strides[k:]
    # each index reshaped to ishape + (1,) * trailing dims, as torch's reshape_indexer views it (a
    # trailing dim of size 1 keeps the index's last stride; TensorIterator zeroes those it broadcasts)
    idx_strides = []
    for i in indices:
        st = _broadcast_strides(i, ishape)
        last = st[-1] if st else i.itemsize
        idx_strides.append(st + tuple(last if n == 1 else 0 for n in full[ni:]))
    perm = iteration_perm(full, [out_strides, _broadcast_strides(values, full)] + idx_strides)
    scratch = np.empty_like(root)
    scratch[...] = root
    base = root.__array_interface__["data"][0]

    def alias(a):
        return np.ndarray(a.shape, a.dtype, buffer=scratch, offset=a.__array_interface__["data"][0] - base,
                          strides=a.strides)
    t2, v2 = alias(target), np.broadcast_to(alias(values), full)
    slow_first = perm[::-1]
    for pos in np.ndindex(*[full[d] for d in slow_first]):
        r = [0] * len(full)
        for d, q in zip(slow_first, pos):
            r[d] = q
        r = tuple(r)
        dst = tuple(int(w[r[:ni]]) for w in wrapped) + r[ni:]
        if accumulate:
            t2[dst] = t2[dst] + v2[r]
        else:
            t2[dst] = v2[r]
    return t2.copy()


def _shares_elements(t, d):
    try:
        return bool(np.shares_memory(t, d, max_work=1 << 16))
    except np.exceptions.TooHardError:
        return True


def check_operand_overlap(target, operands, full=False):
    """torch's memory-overlap check of an in-place op: an operand whose memory partly overlaps the
    written tensor's (x.mul_(x.t()), x.add_(x[0])), or with `full` any that overlaps it, raises
    torch's RuntimeError at the op (computed out of place, tracegrad gave the values as if the
    operand had been cloned, where torch refuses). As torch, layouts other than
    non-overlapping-and-dense are not judged. Tensors or their arrays (a traced value's layout
    within its base: functionalize.traced_layouts)."""
    t = target._data if isinstance(target, Tensor) else target
    for o in operands:
        if o is target:                  # (torch's: the same tensor overlaps itself fully, empty too)
            if full:
                raise RuntimeError(_OPERAND_OVERLAP_MSG)
            continue
        if t.__class__ is not np.ndarray or not t.size:
            return
        d = o._data if isinstance(o, Tensor) else o
        if d.__class__ is not np.ndarray or not d.size:
            continue
        # (two arrays that own their memory, or views of two such, share none: numpy points a
        # view of a view at the owner; may_share_memory costs more than the op's arithmetic)
        tb, db = t.base, d.base
        tb, db = t if tb is None else tb, d if db is None else db
        if tb is not db and tb.__class__ is np.ndarray and db.__class__ is np.ndarray and tb.base is None \
                and db.base is None:
            continue
        if not np.may_share_memory(t, d):
            continue
        if not (_dense(t) and _dense(d)):
            # torch does not judge these layouts: its loop writes and reads the shared elements
            # in its own order, where eager's kernel (numpy) reads them all first. An indexed
            # write (full: index_put_, index_add_, scatter) reads its source in the index's order,
            # any element of it that it writes may be read after
            if _written_before_read(t, d) if not full else _shares_elements(t, d):
                raise RuntimeError(_ORDER_DEPENDENT_MSG)
            continue
        tb, db = t.__array_interface__["data"][0], d.__array_interface__["data"][0]
        te, de = tb + t.nbytes, db + d.nbytes
        if tb == db and te == de and not full and (t.strides == d.strides or t.shape == d.shape and builtins.all(
                a == b for a, b, n in zip(t.strides, d.strides, t.shape) if n > 1)):
            # the same elements, in the same order: torch lets it run (a size-1 dimension's stride
            # says nothing: v[:] += v of an expand(1, 1, 3) raised, its writeable alias strided apart)
            continue
        if tb < de and db < te:
            raise RuntimeError(_OPERAND_OVERLAP_MSG)


# == out= ===========================================================================================

def _write_out(result, out, op):
    """torch's out= contract: the result is cast and copied into `out` (resized, with torch's
    warning, when its shape differs), and `out` is returned; not differentiable."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    node = None
    if STATE.grad_enabled and (result.requires_grad or out.requires_grad):
        node = result.grad_fn
        underived = node.__class__.__name__ == "NotImplemented"     # (an op without a derivative: its grad_fn)
        if not underived or out.requires_grad or out._base is not None:
            raise RuntimeError(f"{'aten::' if underived else ''}{op}(): functions with out=... arguments don't support "
                               f"automatic differentiation, but one of the arguments requires grad.")
        # an op without a derivative (heaviside, floor_divide): torch writes `out` all the same,
        # which takes the op's NotImplemented node (a backward through it raises)
    if result.dtype._kind > out.dtype._kind:
        raise RuntimeError(f"result type {D.SCALAR_NAME[result.dtype]} can't be cast to the desired output type "
                           f"{D.SCALAR_NAME[out.dtype]}")
    if tuple(out.shape) != tuple(result.shape):
        if out._base is not None:
            raise RuntimeError(f"{op}(): out= of shape {list(out.shape)} is a view and cannot be resized to "
                               f"{list(result.shape)}; pass a tensor of that shape")
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(result.shape)}. This behavior is "
                          f"deprecated, and in a future PyTorch release outputs will not be resized unless they "
                          f"have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
                          f"to zero elements with t.resize_(0).", UserWarning, stacklevel=3)
        out._data = np.empty(result._data.shape, dtype=out._data.dtype)
    with no_grad():
        out.copy_(result)
    if node is not None:
        out._grad_fn_slot, out._output_nr, out._req = node, result._output_nr, True
    return out


def _takes_out(fn, checked=True):
    def op(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        _check_out_operands(fn.__name__, args, kwargs)
        operands = [a for x in list(args) + list(kwargs.values())
                    for a in (x if isinstance(x, (list, tuple)) else (x,))]
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if checked:
            # (cat's and stack's first argument is a sequence of tensors)
            for o in outs:
                if isinstance(o, Tensor):
                    _check_out_overlap(o, operands)
        result = fn(*args, **kwargs)
        if isinstance(result, tuple):
            # (values, indices) of max(dim=...), sort, topk...: out=(values, indices)
            if not isinstance(out, (list, tuple)) or len(out) != len(result):
                raise TypeError(f"{fn.__name__}(): argument 'out' must be tuple of {len(result)} Tensors, not "
                                f"{type(out).__name__}")
            written = [_write_out(r, o, fn.__name__) for r, o in zip(result, out)]
            return type(result)(*written) if type(result) is not tuple else tuple(written)
        return _write_out(result, out, fn.__name__)
    op.__name__, op.__qualname__, op.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    op.__wrapped__ = fn
    return op


# (torch's matrix products read their operands into their own buffers: mm(x, x.t(), out=x) runs)
for _n in ("add", "sub", "mul", "div", "matmul", "mm", "bmm", "cat", "stack"):
    globals()[_n] = _takes_out(globals()[_n], _n not in ("matmul", "mm", "bmm"))
subtract, multiply, divide, true_divide, concat, concatenate = sub, mul, div, div, cat, cat

# the functions of tracegrad's namespace that take torch's out= (tracegrad/__init__ wraps those
# that do not take it themselves, once every module has added its functions)
OUT_FUNCTIONS = (
    "abs absolute acos acosh arccos arccosh asin asinh arcsin arcsinh atan atanh arctan arctanh atan2 arctan2 "
    "bitwise_not ceil clamp clip copysign cos cosh deg2rad rad2deg digamma erf erfc erfinv exp exp2 expm1 fix "
    "float_power floor fmax fmin fmod frac heaviside hypot igamma igammac ldexp lerp lgamma log log10 log1p log2 "
    "logaddexp "
    "logaddexp2 logical_not logit mvlgamma nan_to_num neg negative polygamma pow reciprocal round rsqrt sgn "
    "sigmoid sign signbit sin sinc sinh sqrt square tan tanh trunc xlogy where "
    "all any amax amin aminmax sum prod mean nanmean nansum std var logsumexp norm median "
    "nanmedian quantile nanquantile argmax argmin max min kthvalue mode sort msort topk cummax cummin cumprod "
    "cumsum logcumsumexp "
    "addbmm addcdiv addcmul addmm addmv addr baddbmm dot vdot inner outer ger mv kron matrix_power inverse "
    "cross "
    "bucketize searchsorted column_stack dstack hstack vstack row_stack diag tril triu gather index_select "
    "masked_select nonzero take_along_dim renorm histc "
    "logspace linspace arange randperm multinomial").split()
# products that read their operands into buffers of their own before writing out=
OUT_UNCHECKED = frozenset("addbmm addmm addmv addr baddbmm dot vdot inner outer ger mv kron matrix_power inverse "
                          "cross".split())


# the same in tracegrad.linalg and tracegrad.special
OUT_FUNCTIONS_LINALG = ("cholesky cholesky_ex cross det eigh eigvalsh inv inv_ex matrix_norm matrix_power "
                        "matrix_rank multi_dot norm pinv qr slogdet solve solve_triangular svd svdvals vecdot "
                        "vector_norm matmul").split()
OUT_FUNCTIONS_SPECIAL = ("digamma entr erf erfc erfinv exp2 expit expm1 gammaln logit multigammaln ndtr "
                         "erfcx ndtri log_ndtr zeta gammainc gammaincc chebyshev_polynomial_t chebyshev_polynomial_u "
                         "chebyshev_polynomial_v chebyshev_polynomial_w shifted_chebyshev_polynomial_t "
                         "shifted_chebyshev_polynomial_u shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w "
                         "hermite_polynomial_h hermite_polynomial_he laguerre_polynomial_l legendre_polynomial_p "
                         "bessel_j0 bessel_j1 bessel_y0 bessel_y1 modified_bessel_i0 modified_bessel_i1 "
                         "modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0 scaled_modified_bessel_k1 "
                         "spherical_bessel_j0 airy_ai polygamma sinc xlog1py xlogy").split()


def add_out_arguments(namespace, names=OUT_FUNCTIONS, unchecked=OUT_UNCHECKED):
    """out= on each function of `names` in `namespace` that does not take it itself."""
    for name in names:
        fn = namespace.get(name)
        if fn is None or not callable(fn):
            continue
        try:
            params = inspect.signature(fn, follow_wrapped=False).parameters
        except (TypeError, ValueError):
            continue
        if "out" in params:
            continue
        namespace[name] = _takes_out(fn, name not in unchecked)

Above.to, Above.detach, Above._cname = to, detach, _cname        # Tensor.to(), .detach(), the grad setter


# == comparisons of whole tensors ===================================================================

def _same_dtype_close(op, input, other):
    _check_tensors(op, (input, other), ("input", "other"))
    # torch compares in one dtype: allclose(float32, float64) raises (the method too)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{D.SCALAR_NAME[input.dtype]} did not match {D.SCALAR_NAME[other.dtype]}")


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    _same_dtype_close("allclose", input, other)
    return builtins.bool(np.allclose(input._values("allclose"), other._values("allclose"), rtol=rtol, atol=atol,
                                     equal_nan=equal_nan))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    _same_dtype_close("isclose", input, other)
    return tensor(np.isclose(input._values("isclose"), other._values("isclose"), rtol=rtol, atol=atol,
                             equal_nan=equal_nan))


def equal(input, other):
    _check_tensors("equal", (input, other), ("input", "other"))
    return tuple(input.shape) == tuple(other.shape) and builtins.bool(
        np.array_equal(input._values("equal"), other._values("equal")))

"""tracegrad: a trace-and-compile autograd library that speaks PyTorch's autograd API.

The stages, in the order data flows:
  tensor.py, ops/       eager tensors on numpy; the op table (one entry per primitive), the public ops
  tracing.py            the one recording mechanism: eager grad_fn nodes or symbolic IR
  ir/                   the networkx-based IR: graph, printer (Python text, DOT), verifier
  interpret.py          reference interpreters of the IR (numpy kernels, eager ops)
  autodiff.py           the symbolic differentiation pass: forward IR -> backward IR
  passes/               Graph -> Graph passes over IR and the op table's data
  codegen/              numpy code (and Triton kernels) generated from IR
  decompositions.py     the Triton lowering's decompositions, traced on symbolic tensors
  autograd/             torch's autograd API over all of it: engine, grad_fn nodes, grad modes
  compile.py, runtime/  @compile: guards, trace, pipeline, programs (functionalize.py: the
                        writes a traced function makes; explain.py: each stage printed)
The compiler core (ir/, the op table in ops/, passes/, codegen/) imports no tensor, tracer or
autograd engine; the import-linter contracts in pyproject.toml check it.
"""
import sys
import builtins as _builtins  # `bool` below is tracegrad.bool, the dtype

import numpy as _np

from . import _malloc  # noqa: F401  (glibc's malloc thresholds for arrays made at every step)

from . import _dtype
from ._dtype import (dtype, bool_ as bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
                     get_default_dtype, set_default_dtype, promote_types, finfo, iinfo,
                     get_float32_matmul_precision, set_float32_matmul_precision)
from .tensor import Tensor, Size, device, UntypedStorage
from .tensor import _VALUE_READS, read_setting as _read_setting
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                        is_inference_mode_enabled)
from .creation import (tensor, as_tensor, asarray, from_numpy, from_dlpack, zeros, ones, full, empty, eye, arange,
                       linspace, logspace, rand, randn, randint, randperm, rand_like, randn_like, randint_like,
                       zeros_like, ones_like, empty_like, full_like, manual_seed, seed, initial_seed, multinomial,
                       bernoulli, Generator, default_generator, get_rng_state, set_rng_state, empty_strided,
                       DETERMINISTIC as _DETERMINISTIC)
from .ops import math_functional, composite  # noqa: F401,E402  (add their functions to ops.functional)
from ._threads import get_num_threads, set_num_threads, get_num_interop_threads, set_num_interop_threads
from . import _tensor_methods  # noqa: F401  (binds methods and operators onto Tensor)
from . import functionalize  # noqa: F401  (plugs what tensor.py and tracing.py call of it)
from .ops.functional import (
    neg, negative, abs, absolute, sign, exp, exp2, log, log2, log1p, expm1, sqrt, rsqrt, sin, cos, tan, tanh,
    sigmoid, erf, erfc, relu, floor, ceil, round, isnan, isinf, isfinite, logical_not, logical_and, logical_or, logical_xor,
    clone, add, sub, subtract, mul, multiply, div, divide, true_divide, floor_divide, remainder, pow, square,
    reciprocal, maximum, minimum, clamp, clip, clamp_min, clamp_max, eq, ne, lt, le, gt, ge, greater, greater_equal,
    less, less_equal, not_equal, where, lerp, rsub, bitwise_and, bitwise_or, bitwise_xor,
    bitwise_left_shift, bitwise_right_shift,
    sum, mean, prod, max, min, amax, amin, argmax, argmin, var, std, logsumexp, norm, softmax, log_softmax, all, any,
    count_nonzero,
    reshape, flatten, unflatten, squeeze, unsqueeze, permute, transpose, swapaxes, swapdims, t, adjoint, broadcast_to,
    broadcast_tensors, broadcast_shapes, cat, concat, concatenate, stack, hstack, vstack, split, chunk,
    tensor_split, unbind, select, narrow, flip, fliplr, flipud, roll, tile, gather, scatter, scatter_add,
    index_select, masked_fill, tril, triu, nonzero, index_put,
    matmul, mm, bmm, mv, dot, outer, ger, einsum, detach, return_types, allclose, isclose, equal,
    memory_format, preserve_format, contiguous_format, channels_last, channels_last_3d,
)
from ._tensor_str import set_printoptions
from . import autograd, ir, codegen, cuda
from .autograd.recorded import graph_of as _graph_of, backward_graph_of as _backward_graph_of
# `ir/` imports nothing outside itself; reading a tensor's recorded graph needs the engine, so
# the two readers live in autograd/recorded.py and are put on the `ir` namespace here.
ir.graph_of, ir.backward_graph_of = _graph_of, _backward_graph_of
from .autograd import Node  # noqa: F401
from .autograd.anomaly_mode import is_anomaly_enabled, is_anomaly_check_nan_enabled  # noqa: F401

strided = "torch.strided"
long, int, float, double, half, short = int64, int32, float32, float64, float16, int16
cfloat = None


def set_warn_always(b):
    """Give every time the warnings torch gives once a process (TORCH_WARN_ONCE)."""
    autograd.WARN_ALWAYS[0] = _builtins.bool(b)


def _warn_always():
    return autograd.WARN_ALWAYS[0]


def is_warn_always_enabled():
    if _VALUE_READS[0]:
        _read_setting("warn_always", _warn_always)      # a branch on it in a compiled function
    return autograd.WARN_ALWAYS[0]


# (_DETERMINISTIC, creation.py's: use_deterministic_algorithms' mode and warn_only, and the fill)


def use_deterministic_algorithms(mode, *, warn_only=False):
    """torch's flags: tracegrad's kernels (numpy's, on the CPU) give the same result at every
    run, so no op raises or warns for want of a deterministic one; the flags are kept for
    are_deterministic_algorithms_enabled and is_deterministic_algorithms_warn_only_enabled."""
    if type(mode) is not _builtins.bool:
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    if type(warn_only) is not _builtins.bool:
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _DETERMINISTIC[0], _DETERMINISTIC[1] = mode, warn_only


def are_deterministic_algorithms_enabled():
    if _VALUE_READS[0]:
        _read_setting("deterministic", lambda: _DETERMINISTIC[0])     # a branch on it in a compiled function
    return _DETERMINISTIC[0]


def is_deterministic_algorithms_warn_only_enabled():
    if _VALUE_READS[0]:
        _read_setting("deterministic_warn_only", lambda: _DETERMINISTIC[1])
    return _DETERMINISTIC[1]


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_inference(input):
    return input.is_inference()


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.is_floating_point()


def result_type(tensor1, tensor2):
    return _dtype.result_type([tensor1, tensor2])


def can_cast(from_, to):
    return from_._kind <= to._kind



__version__ = "0.1.0"
from . import viz  # noqa: E402
from .serialization import save, load  # noqa: E402
from . import nn, optim, utils, linalg, distributions, special  # noqa: E402,F401
from . import func, testing, backends  # noqa: E402,F401
from .func import vmap  # noqa: E402,F401
from .torch_functions import *  # noqa: E402,F401,F403
from .linalg import (svd_old as svd, qr_old as qr, cholesky_old as cholesky, cholesky_solve,  # noqa: E402,F401
                     cholesky_inverse, triangular_solve, lu_old as lu, lu_solve_old as lu_solve, lu_unpack)
Tensor.hardshrink, Tensor.prelu = nn.functional.hardshrink, nn.functional.prelu
from .ops.math_functional import (asin, acos, atan, sinh, cosh, asinh, acosh, atanh, arcsin, arccos, arctan,  # noqa: E402,F401
                                  arcsinh, arccosh, arctanh, atan2, arctan2, signbit, copysign, hypot, cumsum, cumprod, sort, argsort, topk,
                                  msort, kthvalue, median, quantile, nanquantile, unique, unique_consecutive, diag,
                                  meshgrid,
                                  repeat_interleave, index_add, lgamma, digamma, polygamma, erfinv, mvlgamma, mode,
                                  frexp)
from .ops.math_functional import linalg_det as det  # noqa: E402,F401
from .linalg import inv as inverse  # noqa: E402,F401
from .ops.composite import (diagonal, trace, diag_embed, log10, trunc, fix, frac, fmax, fmin, fmod,  # noqa: E402,F401
                            masked_select, movedim, moveaxis, ravel, std_mean, var_mean, nan_to_num, argwhere, cdist,
                            bincount, histc, matrix_power, matrix_exp, normal, logaddexp, xlogy, addmm, baddbmm,
                            index_fill, index_copy, take, scatter_reduce, logaddexp2, deg2rad, rad2deg, logit, sinc,
                            sgn, positive, float_power, heaviside, addcmul, addcdiv, nansum, nanmean, diff, aminmax,
                            bitwise_not)
from .ops.composite_more import (cross, inner, kron, vdot, addmv, addr, addbmm, dist, cov, corrcoef,  # noqa: E402,F401
                                 trapezoid, trapz, cumulative_trapezoid, rot90, take_along_dim, block_diag,
                                 column_stack, dstack, row_stack, atleast_1d, atleast_2d, atleast_3d, split_with_sizes,
                                 hsplit, vsplit, dsplit, cummax, cummin, tril_indices, triu_indices, searchsorted,
                                 bucketize, cartesian_prod, vander, tensordot, logcumsumexp, isin, diagflat, ldexp,
                                 nanmedian, select_scatter, slice_scatter, diagonal_scatter, masked_scatter, put,
                                 renorm)
from .ops.functional_extra import (i0, angle, conj, conj_physical, resolve_conj, resolve_neg,  # noqa: E402,F401
                                   is_conj, is_neg, gcd, lcm, nextafter, as_strided, index_reduce, isposinf,
                                   isneginf, isreal, logdet, slogdet, pinverse)
from .ops.special_functional import igamma, igammac  # noqa: E402,F401
from .compile import compile  # noqa: E402,F401
from . import jit  # noqa: E402,F401  (torch.jit's trace and script, over compile)
from ._legacy import TYPES as _LEGACY_TYPES  # noqa: E402
globals().update(_LEGACY_TYPES)  # FloatTensor, LongTensor, ...
from . import accelerator  # noqa: E402,F401
from .explain import explain  # noqa: E402,F401
from . import amp  # noqa: E402,F401
from .amp import (autocast, is_autocast_enabled, get_autocast_dtype, set_autocast_enabled,  # noqa: E402,F401
                  set_autocast_dtype, is_autocast_cpu_enabled, get_autocast_cpu_dtype)
amp.policy.install(sys.modules[__name__], linalg)      # autocast's casts on the functions of its lists (amp/policy.py), methods included
from .compile import note_tensor_methods as _note_tensor_methods  # noqa: E402
_note_tensor_methods()     # what a trace's symbolic values answer themselves, as imported
del _note_tensor_methods
from .ops.functional import add_out_arguments as _add_out_arguments  # noqa: E402
from .ops.functional import OUT_FUNCTIONS_LINALG as _LINALG_OUT, OUT_FUNCTIONS_SPECIAL as _SPECIAL_OUT  # noqa: E402
_add_out_arguments(globals())     # torch's out= on the functions that take it (ops.functional.OUT_FUNCTIONS)
_add_out_arguments(linalg.__dict__, _LINALG_OUT, frozenset(_LINALG_OUT))
_add_out_arguments(special.__dict__, _SPECIAL_OUT)
del _add_out_arguments, _LINALG_OUT, _SPECIAL_OUT

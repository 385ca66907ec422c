"""tracegrad.nn.functional: torch.nn.functional's signatures, built from the op table.

Composites (losses, normalizations, activations, linear, pad, embedding) are
decompositions into primitives, so the recorded graph shows the primitives they are
made of and later passes can fuse through them. Numerically sensitive ones are written
the stable way: log_softmax and logsumexp subtract the maximum (inside their
primitives), softplus-style terms use log1p(exp(z)) below a threshold where exp(z)
cannot overflow and z itself above it, normalizations compute the variance from
centred values. Convolution and pooling are primitives of their own (ops/nn_primitives.py).
"""
import math
import sys
import numbers
import warnings

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..grad_mode import no_grad, is_grad_enabled
from ..tracing import apply, rename_grad_fn, Proxy, TraceError, keep_saved, note_composite_inputs
from ..ops import functional as O
from ..ops.primitives import PRIMITIVES as P
from ..ops import nn_primitives  # noqa: F401  (registers the convolution and pooling primitives)
from ..ops.composite import same_dtypes
from ..autograd.graph import node_class
from ..creation import tensor, ones, RNG
from .._tensor_methods import check_inplace, commit

__all__ = ["relu", "relu_", "leaky_relu", "gelu", "silu", "sigmoid", "tanh", "softplus", "logsigmoid", "softmax",
           "log_softmax", "linear", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d", "dropout", "layer_norm", "batch_norm", "embedding", "one_hot", "pad", "normalize",
           "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
           "binary_cross_entropy_with_logits"]


def _is_tensor(x):
    return isinstance(x, Tensor)


def _named(out, name, *inputs, saves=False, edges=None):
    """Show the composite's last grad_fn node under torch's name for the whole function
    (`loss.grad_fn` prints <NllLossBackward0 ...> as in torch); the node itself, its
    derivative and its next_functions stay those of the primitive that made it. With `saves`,
    the node keeps `inputs` for torch's version check, as torch's node saves them (a loss's
    input and target, softplus's input: written before the backward, it raises). `edges`: torch's
    node's inputs, None where an optional one is not given (note_composite_inputs)."""
    if out.__class__ is Proxy:
        return keep_saved(out, inputs[0], inputs[1:]) if saves else out
    fn = getattr(out, "grad_fn", None)
    if fn is not None and all(fn is not getattr(i, "grad_fn", None) for i in inputs):
        fn.__class__ = node_class(name)
        note_composite_inputs(fn, sys._getframe(1), edges)
        if saves:
            keep_saved(out, inputs[0], inputs[1:])
    return out


def _keep_input_weight(out, input, weight):
    """What torch's node for batch_norm and group_norm saves and their decompositions here do not
    read: input and weight (written before the backward, either raises)."""
    if out.__class__ is Proxy or (out._grad_fn is not None and out._grad_fn is not input._grad_fn):
        keep_saved(out, input, (weight,))
    return out


def _opmath(input):
    """(the value to compute with, the dtype to round back to): float16 and bfloat16 inputs in
    float32, rounded once at the end, as torch's kernels compute them. A decomposition run in
    half precision rounds after every primitive: gelu(-3.8) came out -0 and softplus(12) inf in
    float16, hardsigmoid near -3 and logaddexp hundreds of ulps off."""
    dt = input.dtype
    if dt is D.float16 or dt is D.bfloat16:
        return input.float(), dt
    return input, None


def _dense(input, channels_last=False):
    """input as torch's kernels that compute on `input.contiguous()` read it (layer_norm, group_norm,
    log_sigmoid): their results are C-contiguous whatever the input's layout, so a later .view()
    works as in torch (a decomposition of elementwise ops would follow x.t()'s strides instead).
    `channels_last`: a 4-d (5-d) input laid out channels-last (channels_last_3d) stays so (torch's
    suggested format)."""
    if channels_last and (input.ndim == 4 and input.is_contiguous(memory_format=O.channels_last) or
                          input.ndim == 5 and input.is_contiguous(memory_format=O.channels_last_3d)):
        return input
    return O.contiguous(input)


def _float_only(kernel, *operands):
    """torch's activation and pointwise loss kernels exist for floating dtypes (of the operands'
    promoted dtype): gelu of an int64 tensor, mse_loss of two, raise NotImplementedError there
    (tracegrad computed a float32 or an int64 result)."""
    d = D.result_type(operands)
    if not d.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[d]}'")


def _rounded(out, dt):
    return out if dt is None else out.to(dt)


def _affine(p, dt):
    """A norm's weight or bias, in float32 where the input it scales is computed so (_opmath)
    and it has the input's 16-bit dtype."""
    return p.float() if dt is not None and p.dtype is dt else p


def _check_tensor(x, fn, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be Tensor, not {type(x).__name__}")


# == activations ==========================================================================================

def relu(input, inplace=False):
    _check_tensor(input, "relu")
    return input.relu_() if inplace else O.relu(input)


def relu_(input):
    return input.relu_()


def _piecewise(input, value, fwd_name, name, lo=None, hi=None, closed=False, inside=1.0, outside=0.0,
               nan_inside=False, no_derivative=None, backward_error=None):
    """value(input) with torch's derivative for a piecewise-linear activation: g times `inside`
    on the interval (lo, hi) ([lo, hi] when closed), `outside` elsewhere, as one op,
    piecewise_backward (see ops/primitives.py), whose own derivative connects input with zeros
    (torch's `name`, HardtanhBackwardBackward0, ...). value is computed from input, its
    masks in the comparisons piecewise_backward's decomposition makes (passes/decompose.py),
    so that a compiled step computes each mask once; in eager it records no history (the op
    gives it no gradient), in a trace its ops are left as they are (no detach in the program)."""
    if isinstance(input, Proxy) and is_grad_enabled():
        y = value(input)
    elif not (is_grad_enabled() and input.requires_grad):
        return value(input)
    else:
        with no_grad():
            y = value(input)
    spec = dict(lo=lo, hi=hi, closed=closed, inside=inside, outside=outside, nan_inside=nan_inside, name=name,
                no_derivative=no_derivative)
    params = dict(spec, fwd_name=fwd_name)
    if backward_error is not None:
        params["backward_error"] = backward_error      # torch's backward raises it (see leaky_relu)
    return apply(P["piecewise"], (input, y), params)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    # torch's leaky_relu_backward: x > 0 ? grad : grad * negative_slope (NaN: the slope)
    # (in place, torch's LeakyReluBackward1 reads the result: with a negative slope its backward raises)
    _float_only("leaky_relu_cpu", input)
    s = negative_slope
    error = _LEAKY_INPLACE_NEGATIVE if inplace and s < 0 else None
    return _inplace(input, lambda v: _piecewise(v, lambda x: O.where(x > 0.0, x, x * s), "LeakyReluBackward0",
                                                "LeakyReluBackwardBackward0", lo=0.0, outside=s, backward_error=error),
                    inplace, "LeakyReluBackward1")


_LEAKY_INPLACE_NEGATIVE = (
    "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is caused "
    "by calling in-place forward function with a negative slope, please call out-of-place version instead. File an "
    "issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward calculation "
    "with negative slope")


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(input, approximate="none"):
    """x * Phi(x); approximate='tanh' uses torch's tanh formula."""
    _check_tensor(input, "gelu")
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    _float_only("GeluKernelImpl", input)
    x, dt = _opmath(input)
    if approximate == "none":
        out = x * 0.5 * (O.erf(x * _SQRT1_2) + 1)
    else:
        inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
        out = x * 0.5 * (O.tanh(inner) + 1)
    return _named(_rounded(out, dt), "GeluBackward0", input, saves=True)


def silu(input, inplace=False):
    _float_only("silu_cpu", input)

    def compute(v):
        x, dt = _opmath(v)
        return _named(_rounded(x * O.sigmoid(x), dt), "SiluBackward0", v)
    return _inplace(input, compute, inplace)


def sigmoid(input):
    return O.sigmoid(input)


def tanh(input):
    return O.tanh(input)


def _softplus_threshold(dtype):
    # above it log1p(exp(z)) == z to the dtype's precision, and below it exp(z) does not overflow
    return {"float16": 10.0, "float64": 40.0}.get(dtype.name, 20.0)


def _softplus1(z):
    """log(1 + exp(z)), stable at both ends, with exact derivatives of every order below the
    threshold."""
    t = _softplus_threshold(z.dtype)
    # where, not clamp: clamp's derivative is 0 at NaN, torch's softplus lets the NaN through
    return O.where(z > t, z, O.log1p(O.exp(O.where(z > t, t, z))))


def softplus(input, beta=1.0, threshold=20.0):
    _float_only("softplus_cpu", input)
    x, dt = _opmath(input)
    z = x * beta if beta != 1 else x
    out = O.log1p(O.exp(O.where(z > threshold, threshold, z)))     # NaN flows to the value and the gradient
    # at z == threshold torch's first derivative is the smooth one (its test is z > threshold) and
    # its second is 0 (softplus_double_backward tests z < threshold): there, the tangent line at
    # the point itself (the same value, slope sigmoid(z), no curvature)
    c = z.detach()
    tangent = O.log1p(O.exp(c)) + O.sigmoid(c) * (z - c)
    out = O.where(z == threshold, tangent, out)
    if beta != 1:
        out = out / beta
    return _named(_rounded(O.where(z > threshold, x, out), dt), "SoftplusBackward0", input, saves=True)


def logsigmoid(input):
    # torch's min(x, 0) - log1p(exp(-|x|)), with min and -|x| written as selections on x >= 0 so that the
    # second derivative at 0 is the smooth one (abs' is 0 there), zeros keep torch's sign and NaN flows
    _float_only("log_sigmoid_cpu", input)
    x, dt = _opmath(_dense(input))
    nonneg = x >= 0
    lse = O.log1p(O.exp(O.where(nonneg, -x, x)))
    return _named(_rounded(O.where(nonneg, 0.0, x) - lse, dt), "LogSigmoidBackward0", input, saves=True)


def _softmax_dim(ndim):
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return O.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return O.log_softmax(input, dim, dtype=dtype)


# == linear layers ================================================================================

def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    _check_tensor(input, "linear")
    if bias is not None and isinstance(bias, Tensor):
        # torch's addmm(bias, input, weight.t()) checks: a float64 bias beside float32 weights raises
        same_dtypes("AddmmBackward0", bias, input, weight)
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {input.ndim}D and "
                           f"{weight.ndim}D")
    wt = O.t(weight)                          # (a weight of more than 2 dims raises here, as torch's)
    if bias is None:
        return O.matmul(input, wt)
    # torch's graph: addmm(bias, input, weight.t()) of a matrix; of a contiguous input of other
    # rank with a bias of one dim of size > 1 (or a 1-d one), the same of input.view(-1, in) viewed
    # back; else matmul, then bias added in place
    if input.ndim == 2:
        if wt.ndim != 2:
            raise RuntimeError(f"mat2 must be a matrix, got {wt.ndim}-D tensor")
        _addmm_bias(bias, input.shape[0], wt.shape[1])
        return _named(O.matmul(input, wt) + bias, "AddmmBackward0", input, weight, bias, edges=(bias, input, wt))
    if wt.ndim == 2 and input.is_contiguous() and (bias.ndim == 1 or sum(n != 1 for n in bias.shape) == 1):
        flat = input.reshape(-1, input.shape[-1])
        _addmm_bias(bias, flat.shape[0], wt.shape[1])
        out = _named(O.matmul(flat, wt) + bias, "AddmmBackward0", flat, weight, bias, edges=(bias, flat, wt))
        return out.view(*input.shape[:-1], out.shape[-1])
    out = O.matmul(input, wt)
    shape = O.broadcast_shapes(out.shape, bias.shape)
    if tuple(shape) != tuple(out.shape):
        raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape {list(shape)}")
    return out + bias


def _addmm_bias(bias, rows, cols):
    """addmm's check of its bias: expandable to (rows, cols), else expand's error (torch's)."""
    if bias.ndim > 2 or any(b not in (1, t) for b, t in zip(tuple(bias.shape)[::-1], (cols, rows))):
        O.expand(bias, (rows, cols))


# == convolution and pooling ====================================================================

def _pair(v, name="argument"):
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, numbers.Integral):
        return (int(v), int(v))
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 2 values to match the "
                           f"convolution dimensions, but got {name}={list(v)}")
    return v


def _type_name(dt):
    return {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}.get(
        dt.name, dt.name)


def _positive_stride(stride):
    # (a stride of 0 divided by zero, a negative one gave an empty or wrong-sized output)
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")


def _conv_checks(input, weight, bias, groups, fn, transposed=False):
    _check_tensor(input, fn)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to {fn}, but got input of size: "
                           f"{list(input.shape)}")
    if weight.ndim != 4:
        raise RuntimeError("weight should have at least three dimensions")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[input.dtype]} but found "
                           f"{D.SCALAR_NAME[weight.dtype]}")
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({_type_name(input.dtype)}) and bias type ({_type_name(bias.dtype)}) "
                           f"should be the same")
    c = input.shape[-3]
    if transposed:
        if c != weight.shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                               f"{list(input.shape)} to have {weight.shape[0]} channels, but got {c} channels "
                               f"instead")
        if weight.shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size [{list(weight.shape)}] instead")
        return
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{list(weight.shape)}] instead")
    if c != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got {c} channels "
                           f"instead")


def _batched(input):
    return (O.unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)


def _suggested(out, like):
    """out in the suggested memory format of `like` (channels-last stays so), as torch's kernels of
    convolution, pooling and upsampling allocate their results; the node keeps its name."""
    new = O.laid_out_suggested(out, like)
    if new is not out and new.__class__ is not Proxy and out.grad_fn is not None:
        rename_grad_fn(new, type(out.grad_fn).__name__, whole=False)
    return new


def _conv_format(out, x, weight):
    # torch's convolutions write channels-last where the input or the weight is laid out so
    return _suggested(out, x if O._suggested_format(x) != "contiguous" else weight)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation, as torch) over NCHW input."""
    return _conv2d(input, weight, bias, stride, padding, dilation, groups, True)


def _conv2d(input, weight, bias, stride, padding, dilation, groups, formatted):
    """conv2d; `formatted`: channels-last results as torch's (not where the 4-d convolution stands
    for a 1-d one or unfold's, which torch writes C-contiguous)."""
    _conv_checks(input, weight, bias, groups, "conv2d")
    x, unbatched = _batched(input)
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    _positive_stride(stride)
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            left = tuple(t // 2 for t in total)
            if total[0] % 2 or total[1] % 2:
                # an even kernel: torch pads the extra row and column at the end
                x = pad(x, (0, total[1] - 2 * left[1], 0, total[0] - 2 * left[0]))
            padding = left
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _pair(padding, "padding")
    h, w = x.shape[2] + 2 * padding[0], x.shape[3] + 2 * padding[1]
    eff = tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel))
    if h < eff[0] or w < eff[1]:
        raise RuntimeError(f"Calculated padded input size per channel: ({h} x {w}). Kernel size: "
                           f"({eff[0]} x {eff[1]}). Kernel size can't be greater than actual input size")
    out = apply(P["conv2d"], (x, weight, bias), {"stride": stride, "padding": padding, "dilation": dilation,
                                                  "groups": int(groups)})
    if formatted:
        out = _conv_format(out, x, weight)
    return O.squeeze(out, 0) if unbatched else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of conv2d with respect to its input (a "deconvolution")."""
    return _conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation, True)


def _conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation, formatted):
    _conv_checks(input, weight, bias, groups, "conv_transpose2d", transposed=True)
    x, unbatched = _batched(input)
    stride, padding = _pair(stride, "stride"), _pair(padding, "padding")
    output_padding, dilation = _pair(output_padding, "output_padding"), _pair(dilation, "dilation")
    _positive_stride(stride)
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    out = apply(P["conv_transpose2d"], (x, weight, bias),
                {"stride": stride, "padding": padding, "output_padding": output_padding, "dilation": dilation,
                 "groups": int(groups)})
    if formatted:
        out = _conv_format(out, x, weight)
    return O.squeeze(out, 0) if unbatched else out


def _pool_checks(input, kernel, padding, dilation, fn, stride=None, ceil_mode=False):
    _check_tensor(input, fn)
    # (a kernel or stride of 0 divided by zero: Python's ZeroDivisionError, where torch names them)
    if kernel[0] <= 0 or kernel[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if stride is not None and (stride[0] == 0 or stride[1] == 0):
        raise RuntimeError("stride should not be zero")
    if input.ndim not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    if stride is not None:
        # torch's pooling_output_shape
        out = []
        for n, p, k, d, st in zip(input.shape[-2:], padding, kernel, dilation, stride):
            o = (n + 2 * p - d * (k - 1) - 1 + (st - 1 if ceil_mode else 0)) // st + 1
            if ceil_mode and (o - 1) * st >= n + p:
                o -= 1
            out.append(o)
        if out[0] < 1 or out[1] < 1:
            c, h, w = input.shape[-3:]
            raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{out[0]}x{out[1]}). "
                               f"Output size is too small")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, True)


def _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, formatted):
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _pair(stride)
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    _pool_checks(input, kernel, padding, dilation, "max_pool2d", stride, ceil_mode)
    x, unbatched = _batched(input)
    values, indices = apply(P["max_pool2d"], (x,), {"kernel": kernel, "stride": stride, "padding": padding,
                                                    "dilation": dilation, "ceil_mode": bool(ceil_mode)})
    if formatted and not unbatched:
        values, indices = _suggested(values, x), _suggested(indices, x)
    keep_saved(values, input)        # (torch's node saves self, which the indices' backward does not read)
    if unbatched:
        values, indices = O.squeeze(values, 0), O.squeeze(indices, 0)
    return (values, indices) if return_indices else values


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, True)


def _avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, formatted):
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _pair(stride)
    padding = _pair(padding, "padding")
    _pool_checks(input, kernel, padding, (1, 1), "avg_pool2d", stride, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x, unbatched = _batched(input)
    out = apply(P["avg_pool2d"], (x,), {"kernel": kernel, "stride": stride, "padding": padding,
                                        "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad),
                                        "divisor_override": divisor_override})
    if formatted and not unbatched:
        out = _suggested(out, x)
    keep_saved(out, input)           # (torch's node saves self; the backward reads its shape alone)
    return O.squeeze(out, 0) if unbatched else out


# == dropout ===========================================================================================

def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (torch's formula)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if not input.dtype.is_floating_point and p < 1.0:
        # torch scales the kept values by 1 / (1 - p), a float it cannot write into the input's dtype
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{D.SCALAR_NAME[input.dtype]}")
    if p == 1.0:
        noise = np.zeros(input.shape, dtype=input.dtype.np)
    else:
        noise = (RNG.gen.random(input.shape, dtype=np.float32 if input.dtype.np == np.float32 else np.float64)
                 >= p).astype(input.dtype.np)
        noise /= input.dtype.np.type(1 - p)
    mask = Tensor._make(noise, input.dtype)
    if input.is_cuda:
        mask = mask.cuda()
    return input.mul_(mask) if inplace else input * mask


# == normalization ========================================================================================

def _norm_params(input, *params):
    """torch's mixed-dtype check of a norm's weight and bias (CPU): of another dtype than the
    input only as float32 beside a float16 or bfloat16 input."""
    for p in params:
        if isinstance(p, Tensor) and p.dtype is not input.dtype and not (
                p.dtype is D.float32 and input.dtype in (D.float16, D.bfloat16)):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype." if p.dtype is D.float32
                               else "mixed dtype (CPU): expect parameter to have scalar type of Float")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size"
                           f"{list(input.shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))
    _norm_params(input, weight, bias)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"LayerNormKernelImpl\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    x, dt = _opmath(_dense(input))      # 16-bit inputs: statistics and result in float32, as torch
    mean = O.mean(x, dims, keepdim=True)
    xc = x - mean
    var = O.mean(xc * xc, dims, keepdim=True)
    out = xc * O.rsqrt(var + eps)
    if weight is not None:
        out = out * _affine(weight, dt)
    if bias is not None:
        out = out + _affine(bias, dt)
    # (torch's node saves input, weight and bias: one written before the backward raises)
    return _named(_rounded(out, dt), "NativeLayerNormBackward0", input, weight, bias, saves=True,
                  edges=(input, weight, bias))


def _update_running(r, batch, momentum):
    """r = (1 - momentum) r + momentum batch, in place. 16-bit running statistics are updated in
    float32 and rounded once, as torch's: a variance of 7e4 scaled by momentum fits float16,
    the variance itself does not."""
    if isinstance(momentum, Tensor):
        # a float64 factor (BatchNorm's cumulative average in a compiled step): cast, as a Python
        # float is, to the dtype the update computes in
        dt = D.float32 if r.dtype is D.float16 or r.dtype is D.bfloat16 else r.dtype
        keep, momentum = (1 - momentum).to(dt), momentum.to(dt)
    else:
        keep = 1 - momentum
    if r.dtype is D.float16 or r.dtype is D.bfloat16:
        r.copy_(r.float() * keep + batch.float() * momentum)
    else:
        r.mul_(keep).add_(batch.to(r.dtype) * momentum)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalize over every dim but the channel dim (1); in training, with batch statistics,
    updating the running statistics in place (unbiased variance, as torch)."""
    if input.ndim < 2:
        raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")
    if not input.dtype.is_floating_point:
        # (tracegrad's mean of an integer input raised its own RuntimeError)
        raise NotImplementedError(f"\"batch_norm\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    # a float64 weight or running statistic beside a float32 input (tracegrad promoted the result)
    _norm_params(input, weight, bias, running_mean, running_var)
    c = input.shape[1]
    dims = (0,) + tuple(range(2, input.ndim))
    bshape = (1, c) + (1,) * (input.ndim - 2)
    # 16-bit inputs: statistics and result in float32, as torch; laid out in torch's suggested format
    x, dt = _opmath(_dense(input, channels_last=True))
    if training:
        n = input.numel() // c if c else 0
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{input.shape!r}")
        mean = O.mean(x, dims, keepdim=True)
        xc = x - mean
        var = O.mean(xc * xc, dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    _update_running(running_mean, O.reshape(mean, (c,)), momentum)
                if running_var is not None:
                    _update_running(running_var, O.reshape(var, (c,)) * (n / (n - 1)), momentum)
        out = xc * O.rsqrt(var + eps)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        out = (x - O.reshape(_affine(running_mean, dt), bshape)) * \
            O.rsqrt(O.reshape(_affine(running_var, dt), bshape) + eps)
    if weight is not None:
        out = out * O.reshape(_affine(weight, dt), bshape)
    if bias is not None:
        out = out + O.reshape(_affine(bias, dt), bshape)
    out = _rounded(out, dt)
    out = _named(out, "NativeBatchNormBackward0", input, weight, bias, edges=(input, weight, bias))
    # torch's node saves input and weight (not bias): one written before the backward raises
    return _keep_input_weight(out, input, weight)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    denom = O.clamp_min(O.norm(input, p, dim, keepdim=True), eps).expand_as(input)      # (torch's graph)
    if out is None:
        return input / denom
    return O.div(input, denom, out=out)        # (torch's: written into out, which it returns)


# == embedding, one_hot, pad ==================================================================================

def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of `weight` picked by the integer tensor `input` (shape input.shape + [dim])."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding(scale_grad_by_freq=True or sparse=True) is not supported")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")        # (tracegrad indexed a 1-d weight's elements)
    if not isinstance(input, Tensor) or input.dtype not in (D.int64, D.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           "Long, Int; but got " + (f"torch.{D.LEGACY[input.dtype]}" if isinstance(input, Tensor)
                                                    else type(input).__name__) + " instead (while checking "
                           "arguments for embedding)")
    num = weight.shape[0]
    if padding_idx is not None:
        if padding_idx < 0:
            if padding_idx < -num:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx += num
        elif padding_idx >= num:
            raise AssertionError("Padding_idx must be within num_embeddings")
    if input._data is not None and input.numel() and (input._data.min() < 0 or input._data.max() >= num):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    flat = O.reshape(input, (-1,))
    out = O.reshape(O.index_select(weight, 0, flat), tuple(input.shape) + tuple(weight.shape[1:]))
    if padding_idx is not None and weight.requires_grad:
        # the padding row gets no gradient: route its uses through a detached copy
        keep = O.unsqueeze(input != padding_idx, -1)
        out = O.where(keep, out, out.detach())
    return _named(out, "EmbeddingBackward0", weight)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    if isinstance(input, Proxy) or isinstance(weight, Proxy):
        raise TraceError("embedding(max_norm=...) renormalizes the rows the indices pick, in place, by their "
                         "values: not traced yet")
    with no_grad():
        rows = np.unique(np.asarray(input._data).ravel())
        w = weight._data
        norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        w[rows] = (w[rows] * scale[:, None]).astype(w.dtype)
        weight._vc[0] += 1


def one_hot(tensor, num_classes=-1):
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    idx = np.asarray(tensor._values("one_hot"))
    if num_classes == -1:
        num_classes = int(idx.max()) + 1 if idx.size else 0
    if idx.size and (idx.min() < 0 or idx.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes." if idx.max() >= num_classes
                           else "Class values must be non-negative.")
    out = np.zeros(idx.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, idx[..., None], 1, axis=-1)
    out = Tensor._make(out, D.int64)
    return out.to(tensor.device) if tensor.is_cuda else out     # (on the index's device, as torch's)


def pad(input, pad, mode="constant", value=None):
    """torch's pad: `pad` lists (before, after) sizes from the last dim backwards."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    pairs = [(input.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    if mode == "constant":
        # (torch's pads allocate their result in the input's suggested memory format: channels-last stays so)
        return _named(O.laid_out_suggested(_pad_constant(input, pairs, 0 if value is None else value), input),
                      "ConstantPadNdBackward0", input)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value not in (None, 0):
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    if input.ndim - len(pad) // 2 not in (1, 2) or len(pad) > 6:
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for dim, lo, hi in pairs:
        n = input.shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {dim} of input {list(input.shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        i = np.arange(-lo, n + hi)
        if mode == "reflect":
            period = 2 * (n - 1)
            i = np.abs(np.mod(i, period) if period else i * 0)
            i = np.where(i >= n, period - i, i)
        elif mode == "replicate":
            i = np.clip(i, 0, n - 1)
        else:
            # torch crops by the negative pads first and wraps around what is left
            start, kept = max(-lo, 0), n + min(lo, 0) + min(hi, 0)
            i = start + np.mod(np.arange(-max(lo, 0), kept + max(hi, 0)), max(kept, 1))
        out = O.index_select(out, dim, _long(i.astype(np.int64), out))
    if mode == "circular":
        return _named(out, "CopySlices", input)      # torch builds it by copies into slices
    out = O.laid_out_suggested(out, input)
    # (torch's node saves self: written before the backward, it raises)
    return _named(out, f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{len(pairs)}DBackward0", input,
                  saves=True)


def _pad_constant(input, pairs, value):
    """torch's constant_pad_nd: negative pads crop first (narrow, with its checks), then positive
    pads write the cropped input into a filled tensor of the padded shape; the result never
    shares the input's memory."""
    x = input
    grow = False
    for dim, lo, hi in sorted(pairs):
        if lo < 0:
            x = O.narrow(x, dim, -lo, x.shape[dim] + lo)
        grow = grow or lo > 0
        if hi < 0:
            x = O.narrow(x, dim, 0, x.shape[dim] + hi)
        grow = grow or hi > 0
    if not grow:
        return O.clone(x)
    shape = list(x.shape)
    ikey = [("s", None, None, None)] * x.ndim
    for dim, lo, hi in pairs:
        lo, hi = max(lo, 0), max(hi, 0)
        if lo or hi:
            ikey[dim] = ("s", lo, lo + shape[dim], None)
            shape[dim] += lo + hi
    base = O.full(tuple(shape), value, dtype=x.dtype)
    return O.index_put_prim(base, x, (), tuple(ikey))


# == losses ===================================================================================================

def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='mean' instead.",
                  UserWarning, stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return O.mean(loss)
    if reduction == "sum":
        return O.sum(loss)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_size(input, target, stacklevel=3):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape!r}) that is different to the input size "
                      f"({input.shape!r}). This will likely lead to incorrect results due to broadcasting. Please "
                      f"ensure they have the same size.", UserWarning, stacklevel=stacklevel)


def _bool_promoted(input, target):
    """A bool input or target of a loss whose torch kernel computes in the promoted dtype (mse,
    smooth_l1, huber): the bool one cast to it, where tracegrad's `-` refuses bools."""
    if input.dtype is D.bool_ or target.dtype is D.bool_:
        d = D.result_type([input, target])
        return O.convert(input, d), O.convert(target, d)
    return input, target


def _in_input_dtype(input, target, fn, kernel):
    """huber's and soft_margin's result has input's dtype (torch writes it into a tensor like
    input): computed in the promoted dtype and cast, or torch's error where that cannot cast."""
    d = D.result_type([input, target])
    if d is not input.dtype and d._kind > input.dtype._kind:        # (torch.can_cast)
        raise RuntimeError(f"result type {D.SCALAR_NAME[d]} can't be cast to the desired output type "
                           f"{D.SCALAR_NAME[input.dtype]}")
    _float_only(kernel, input, target)
    return fn(*_bool_promoted(input, target)) if d is input.dtype else O.convert(fn(*_bool_promoted(input, target)),
                                                                                 input.dtype)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_size(input, target)
    _float_only("mse_cpu", input, target)
    x, t = _bool_promoted(input, target)
    d = x - t
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _named(_reduce(loss, reduction), "MseLossBackward0", input, target, saves=True)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_size(input, target)
    loss = O.abs(input - target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _check_class_target(input, target, fn="nll_loss"):
    if target.dtype not in (D.int64, D.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {D.SCALAR_NAME[target.dtype]}")
    if input.ndim >= 2 and (target.ndim == 0 or target.shape[0] != input.shape[0]):
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0] if target.ndim else 1}).")
    if input.ndim > 2 and tuple(target.shape[1:]) != tuple(input.shape[2:]):
        raise RuntimeError(f"size mismatch (got input: {list(input.shape)}, target: {list(target.shape)})")


def _weight_without_grad(weight, op, name="weight"):
    """torch's loss kernels (nll_loss, binary_cross_entropy and with_logits) have no derivative
    for their weights: one that requires grad is refused (a gradient for it would be one torch
    never gives)."""
    if weight is not None and weight.requires_grad and is_grad_enabled():
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument '{name}'. "
                           f"This input cannot have requires_grad True.")


def _picked(input, target, weight, ignore_index):
    """-input[n, target[n], ...], the weight of each term (None: all ones) and where the target
    is ignore_index (None: nowhere)."""
    t = target if target.dtype is D.int64 else target.long()
    c = input.shape[1]
    ignore = None
    if t._data is not None:
        data = nn_primitives.check_class_targets(t._data, c, ignore_index)
        if (data == ignore_index).any():
            ignore = t == ignore_index
    else:
        t = apply(P["class_target"], (t,), {"classes": c, "ignore_index": ignore_index})
        ignore = t == ignore_index
    if ignore is not None:
        t = O.where(ignore, 0, t)
    picked = O.squeeze(O.gather(input, 1, O.unsqueeze(t, 1)), 1)
    w = None
    if weight is not None:
        w = O.reshape(O.index_select(weight, 0, O.reshape(t, (-1,))), tuple(t.shape))
    return -picked, w, ignore


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """The negative log likelihood of class-index targets, given log-probabilities."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_tensor(input, "nll_loss")
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    _check_class_target(input, target)
    unbatched = input.ndim == 1
    given = (input, target, weight)
    if unbatched:
        input, target = O.unsqueeze(input, 0), O.unsqueeze(target, 0)
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != input.shape[1]):
        raise RuntimeError(f"weight tensor should be defined either for all {input.shape[1]} classes or no classes "
                           f"but got weight tensor of shape: {list(weight.shape)}")
    if not input.dtype.is_floating_point:
        # torch's kernel exists for floating inputs (tracegrad negated an int64 input: an int64 loss
        # with reduction="none", a dtype error from mean, a bool one from the negation)
        kernel = "nll_loss_out_frame" if input.ndim <= 2 else "nll_loss2d_forward_out_frame"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    if weight is not None and weight.dtype is not input.dtype:
        # (tracegrad promoted: a float64 weight made a float64 loss of a float32 input)
        raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[input.dtype]} but found "
                           f"{D.SCALAR_NAME[weight.dtype]}")
    _weight_without_grad(weight, "nll_loss_forward")
    loss, w, ignore = _picked(input, target, weight, ignore_index)
    if w is not None:
        loss = loss * w
    if ignore is not None:
        # an ignored term is 0 and so is its gradient, as torch's: a weight of 0 would make it
        # 0 * (g / 0) = nan where every target is ignored (the mean's total weight is 0), and
        # 0 * inf = nan where the ignored row's log-probability is -inf
        loss = O.where(ignore, 0, loss)
        w = O.where(ignore, 0, w if w is not None else 1).to(input.dtype)
    if reduction == "mean" and w is not None:
        out = O.sum(loss) / O.sum(w)
    else:
        out = _reduce(loss, reduction)
    # torch's node saves self, target and weight: one written before the backward raises
    out = _named(out, "NllLossBackward0", *given, saves=True, edges=given[:1])   # (weight: no input of torch's node)
    return O.squeeze(out, 0) if unbatched and reduction == "none" else out


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax over the class dim (1, or 0 for unbatched input), then nll_loss; or, for
    floating targets of the input's shape, class probabilities."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_tensor(input, "cross_entropy")
    probabilities = tuple(target.shape) == tuple(input.shape)
    if probabilities:
        # torch takes a target of the input's shape for class probabilities: an integer one is
        # refused (tracegrad read a (3,) int64 target of a (3,) input as class indices), and so
        # is an ignore_index there (tracegrad ignored it)
        if not target.dtype.is_floating_point:
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{D.SCALAR_NAME[target.dtype]}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
    if input.ndim == 0:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions")
    class_dim = 0 if input.ndim == 1 else 1
    c = input.shape[class_dim]
    logp = O.log_softmax(input, class_dim)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    wshape = tuple(c if d == class_dim else 1 for d in range(input.ndim))
    if probabilities:
        if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
            raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all {c} classes or no "
                               f"classes but got weight tensor of shape: {list(weight.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        terms = logp * target
        if weight is not None:
            terms = terms * O.reshape(weight, wshape)
        # torch's sums and nodes: -(terms).sum() / (numel / C), -(terms).sum(), -(terms).sum(C)
        if reduction == "mean":
            return rename_grad_fn(-O.sum(terms) / (input.numel() // c if c else 0), "DivBackward1")
        if reduction == "sum":
            return -O.sum(terms)
        return _reduce(-O.sum(terms, class_dim), reduction)
    if input.ndim >= 1:
        _check_class_target(input, target, "cross_entropy")
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing <= 0:
        return nll
    # the uniform part: -sum over classes of logp (weighted), masked where the target is ignored
    lp = logp if weight is None else logp * O.reshape(weight, wshape)
    smooth = -O.sum(lp, class_dim)
    keep = target != ignore_index
    smooth = O.where(keep, smooth, 0)
    if reduction == "mean":
        if weight is not None:
            t = O.where(keep, target, 0)
            wt = O.where(keep, O.reshape(O.index_select(weight, 0, O.reshape(t, (-1,))), tuple(t.shape)), 0)
            smooth = O.sum(smooth) / O.sum(wt)
        else:
            smooth = O.sum(smooth) / O.sum(keep.to(logp.dtype))
    elif reduction == "sum":
        smooth = O.sum(smooth)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / c)


def _check_logits_loss(input, target, weight, pos_weight):
    """torch's refusals in binary_cross_entropy_with_logits, in its order: log_sigmoid of the input
    (floating only), the in-place products into the input's shape (a weight or pos_weight that
    broadcasts it larger), and the loss written into 1 - target (a bool target cannot be
    subtracted, an integer one cannot hold the float loss). tracegrad computed all of them."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"log_sigmoid_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    shape = tuple(input.shape)

    def check_into(w):
        b = tuple(O.broadcast_shapes(shape, tuple(w.shape)))
        if b != shape:
            raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape {list(b)}")
    if pos_weight is not None:
        check_into(pos_weight)
    if target.dtype is D.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"result type {D.SCALAR_NAME[D.promote_types(input.dtype, target.dtype)]} can't be cast "
                           f"to the desired output type {D.SCALAR_NAME[target.dtype]}")
    if weight is not None:
        check_into(weight)


def _logits_loss_mixed(input, target, weight, pos_weight):
    """The unreduced loss of an input and a target of two dtypes, torch's steps each rounded where
    torch writes it: log_sigmoid(x) (times the pos_weight term) in the input's dtype, then
    (1 - t).mul_(x).sub_(...).mul_(weight) in the target's. tracegrad's promoted formula gave a
    float64 loss for a float32 target beside a float64 input (torch's: float32), and for a float16
    input beside a float64 target missed the float16 rounding of log_sigmoid that torch's has."""
    x, dt = _opmath(input)
    ls = _rounded(-_softplus1(-x), dt)
    if pos_weight is not None:
        ls = (ls * ((pos_weight - 1) * target + 1)).to(input.dtype)
    loss = ((1 - target) * input).to(target.dtype)
    loss = (loss - ls).to(target.dtype)
    return loss if weight is None else (loss * weight).to(target.dtype)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """-[pos_weight * t * log sigmoid(x) + (1 - t) * log(1 - sigmoid(x))], with
    log sigmoid(x) = -softplus(-x) computed without overflow."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape!r}) must be the same as input size ({input.shape!r})")
    _weight_without_grad(weight, "binary_cross_entropy_with_logits")
    _weight_without_grad(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    _check_logits_loss(input, target, weight, pos_weight)
    if target.dtype is not input.dtype or input.dtype.itemsize == 2:
        return _named(_reduce(_logits_loss_mixed(input, target, weight, pos_weight), reduction),
                      "BinaryCrossEntropyWithLogitsBackward0", input, target, saves=True, edges=(input, target))
    x, dt = _opmath(input)                        # 16-bit: in float32, rounded once
    t = target.float() if dt is not None else target
    sp = _softplus1(-x)                           # -log sigmoid(x)
    if pos_weight is not None:
        loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * sp
    else:
        loss = (1 - t) * x + sp
    if weight is not None:
        loss = loss * weight
    # (weight and pos_weight: no inputs of torch's node)
    return _named(_rounded(_reduce(loss, reduction), dt), "BinaryCrossEntropyWithLogitsBackward0", input, target,
                  saves=True, edges=(input, target))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-[t log(x) + (1 - t) log(1 - x)] with each log clamped at -100, as torch."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape!r}) that is different to the input size "
                         f"({input.shape!r}) is deprecated. Please ensure they have the same size.")
    _weight_without_grad(weight, "binary_cross_entropy")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {D.SCALAR_NAME[target.dtype]} but expected {D.SCALAR_NAME[input.dtype]}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"binary_cross_entropy\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    # one primitive: torch's derivative (p - t) / max(p (1 - p), 1e-12) stays finite at p = 0 and 1;
    # its kernel checks that the input lies in [0, 1], eagerly and on every compiled call
    loss = apply(P["binary_cross_entropy"], (input, target), {})
    if weight is not None:
        loss = loss * weight
    return _named(_reduce(loss, reduction), "BinaryCrossEntropyBackward0", input, target, saves=True,
                  edges=(input, target))     # (weight: no input of torch's node)


# == more activations, losses and layers, each a decomposition into the ops above =================

def _write(input, out, inplace):
    return input.copy_(out) if inplace else out


def _inplace(input, compute, inplace, name=None):
    """compute(input), written into input when inplace. With autograd, the activation is computed
    from a clone of input, and its node (`name` where torch's in-place form names it otherwise,
    LeakyReluBackward1, ThresholdBackward1) is written in: copy_ of the result kept the nodes that
    read input, which the write changed, so backward raised "modified by an inplace operation"
    (nn.LeakyReLU(inplace=True) or nn.ReLU6(inplace=True) after a Linear)."""
    if not inplace:
        return compute(input)
    if isinstance(input, Proxy) or not (is_grad_enabled() and input.requires_grad):
        return input.copy_(compute(input))
    check_inplace(input)
    out = compute(input.clone())
    if out.grad_fn is None or out.dtype != input.dtype:
        return input.copy_(out)
    if name is not None:
        out.grad_fn.__class__ = node_class(name)
    return commit(input, out)


def _elu(input, alpha, scale, input_scale, inplace, name="Elu", grad_scale=None):
    """scale * (x if x > 0 else alpha * expm1(x * input_scale)), in float32 for half precision,
    with torch's derivative, elu_backward (see ops/primitives.py; `grad_scale`: its input_scale
    where torch's differs from the value's, celu's 1 / float(alpha)). The exponential sees
    min(x, 0): on the positive side its value is not taken, and exp(x) overflowing there made
    the gradient inf * 0 = NaN (elu(100.) in float32). The in-place forms record torch's
    EluBackward1 (CeluBackward1), whose derivative reads the result."""
    _float_only("elu_cpu", input)
    _check_tensor(input, name.lower())

    def value(v):
        positive = v > 0
        neg = O.where(positive, 0.0, v)
        return O.where(positive, v * scale if scale != 1 else v,
                       O.expm1(neg * input_scale if input_scale != 1 else neg) * (alpha * scale))

    x, dt = _opmath(input)
    spec = dict(alpha=float(alpha), scale=float(scale),
                input_scale=float(input_scale if grad_scale is None else grad_scale))
    traced = isinstance(input, Proxy)
    if not (is_grad_enabled() and (traced or input.requires_grad)):
        return _write(input, _rounded(value(x), dt), inplace)
    if traced:
        y = value(x)
    else:
        with no_grad():
            y = value(x)
    if inplace:          # (16-bit: the value rounded once, the derivative from it in float32, as torch's)
        check_inplace(input)
        y = y if dt is None else _rounded(y, dt)
        return commit(input, apply(P["elu_result"], (input, y), dict(spec, name=name + "Backward1")))
    out = apply(P["elu"], (x, y), dict(spec, name=name + "Backward0"))
    return _write(input, _named(_rounded(out, dt), name + "Backward0", input), inplace)


def elu(input, alpha=1.0, inplace=False):
    return _elu(input, alpha, 1.0, 1.0, inplace)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    # torch's value scales by 1 / alpha, its derivative by 1 / alpha rounded to float first
    return _elu(input, alpha, 1.0, 1.0 / alpha, inplace, "Celu", 1.0 / float(np.float32(alpha)))


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _elu(input, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace)


def selu_(input):
    return selu(input, inplace=True)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if isinstance(input, Tensor) and not input.dtype.is_floating_point and not inplace:
        # torch clamps integers in their own dtype (the limits cast to it); bool has no kernel
        if input.dtype is D.bool_:
            raise RuntimeError("Bool inputs not supported for hardtanh")
        if input.dtype is D.uint8 and (min_val < 0 or max_val < 0):
            raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
        return O.clamp(input, O.full((), int(min_val), dtype=input.dtype), O.full((), int(max_val), dtype=input.dtype))
    # torch's hardtanh_backward: x <= min_val || x >= max_val ? 0 : grad (NaN: grad), in float32 for
    # a float16/bfloat16 input
    lo, hi = _grid(input, float(min_val), "below"), _grid(input, float(max_val), "above")
    return _inplace(input, lambda v: _piecewise(
        v, lambda x: O.where(O.logical_or(x <= lo, x >= hi), O.clamp(x, min_val, max_val), x),
        "HardtanhBackward0", "HardtanhBackwardBackward0", lo=lo, hi=hi, nan_inside=True), inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    _float_only("hardsigmoid_cpu", input)
    # torch's hardsigmoid_backward: -3 < x < 3 ? grad * (1.0f / 6.0f) : 0 (NaN: 0; the slope is a float
    # constant, float64 too), without a derivative of its own
    def compute(v):
        x, dt = _opmath(v)
        value = lambda u: O.where((u > -3.0) & (u < 3.0), u / 6.0 + 0.5, O.clamp(u / 6.0 + 0.5, 0.0, 1.0))  # noqa
        out = _piecewise(x, value, "HardsigmoidBackward0", "NotImplemented", lo=-3.0, hi=3.0,
                         inside=float(np.float32(1.0) / np.float32(6.0)), no_derivative="hardsigmoid_backward")
        return _named(_rounded(out, dt), "HardsigmoidBackward0", v)
    return _inplace(input, compute, inplace)


def hardswish(input, inplace=False):
    _float_only("hardswish_cpu", input)
    # torch: x * relu6(x + 3) / 6, with its hardswish_backward (ops/primitives.py)
    def value(v):
        return O.where(v <= -3.0, v * 0.0, O.where(v >= 3.0, v, v * (v + 3.0) / 6.0))

    def compute(v):
        x, dt = _opmath(v)
        if isinstance(x, Proxy) and is_grad_enabled():
            out = apply(P["hardswish"], (x, value(x)), {})
        elif not (is_grad_enabled() and x.requires_grad):
            out = value(x)
        else:
            with no_grad():
                y = value(x)
            out = apply(P["hardswish"], (x, y), {})
        return _named(_rounded(out, dt), "HardswishBackward0", v)
    return _inplace(input, compute, inplace)


def softsign(input):
    return input / (O.abs(input) + 1)


def tanhshrink(input):
    return input - O.tanh(input)


def mish(input, inplace=False):
    _float_only("mish_cpu", input)

    def compute(v):
        x, dt = _opmath(v)
        return _named(_rounded(x * O.tanh(softplus(x)), dt), "MishBackward0", v)
    return _inplace(input, compute, inplace)


def _grid(input, v, how):
    """v as a value of input's dtype where it is float16 or bfloat16, for a comparison with it that
    every path makes alike (the eager kernels compare bfloat16's float32 storage, a compiled
    program and float16 arrays compare in the dtype): "nearest", the value torch casts the scalar
    to where its kernel compares in the dtype; "below"/"above", the largest grid value at most
    float32(v) / the smallest at least it, where torch's kernel compares in float32 (x <= v holds
    exactly where x <= below(v), x >= v where x >= above(v)). Other dtypes: v as given."""
    dt = input.dtype
    if dt is not D.float16 and dt is not D.bfloat16:
        return v
    f = np.float32(v)
    near = float(np.float16(f)) if dt is D.float16 else float(D.round_bfloat16(np.array([f]))[0])
    if how == "below" and near > f:
        near = _grid_step(dt, near, up=False)
    elif how == "above" and near < f:
        near = _grid_step(dt, near, up=True)
    return float(near)


def _grid_step(dt, a, up):
    """The float16/bfloat16 value next to a (a value of that dtype), upward or downward."""
    if dt is D.float16:
        return float(np.nextafter(np.float16(a), np.float16(np.inf if up else -np.inf)))
    if a == 0:
        return (1.0 if up else -1.0) * 2.0 ** -133              # bfloat16's smallest subnormal
    # bfloat16 values are float32 values with their low 16 bits zero: one step is 0x10000 on the bits,
    # growing the magnitude where the step moves away from zero
    bits = int(np.array([a], np.float32).view(np.int32)[0]) + (0x10000 if (a > 0) == up else -0x10000)
    return float(np.array([bits], np.int32).view(np.float32)[0])


def _shrink_mask(x, lambd):
    return O.logical_and(x >= -lambd, x <= lambd)


def hardshrink(input, lambd=0.5):
    _float_only("hardshrink_cpu", input)      # (tracegrad computed a float result of int64 input)
    # torch's kernel writes 0 (never -0.0, as input * 0 gave for negative input) inside [-lambd,
    # lambd] and keeps the rest, NaN included; hardshrink_backward: 0 there, grad elsewhere
    # (a float16/bfloat16 input compares with lambd cast to its dtype, forward and backward, as torch's)
    lambd = _grid(input, float(lambd), "nearest")
    return _piecewise(input, lambda x: O.where(_shrink_mask(x, lambd), 0.0, x), "HardshrinkBackward0",
                      "HardshrinkBackwardBackward0", lo=-lambd, hi=lambd, closed=True, inside=0.0, outside=1.0)


def softshrink(input, lambd=0.5):
    _float_only("softshrink_check", input)
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    lambd = float(lambd)
    # torch's kernel: x > lambd ? x - lambd : x < -lambd ? x + lambd : x * 0 (NaN kept);
    # softshrink_backward: 0 on [-lambd, lambd], grad elsewhere (NaN: grad). A float16/bfloat16
    # input: the kernel compares in float32, the backward with lambd cast to the dtype
    lo, hi = _grid(input, -lambd, "above"), _grid(input, lambd, "below")
    near = _grid(input, lambd, "nearest")
    def value(x):
        xf, dt = _opmath(x)               # (x -+ lambd in float32, rounded once, as torch's kernel)
        out = O.where(O.logical_and(x >= lo, x <= hi), xf * 0.0, O.where(x > hi, xf - lambd, xf + lambd))
        return _rounded(out, dt)
    return _piecewise(input, value, "SoftshrinkBackward0", "SoftshrinkBackwardBackward0", lo=-near, hi=near,
                      closed=True, inside=0.0, outside=1.0)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return softmax(-input, dim, _stacklevel, dtype) if dtype is not None else softmax(-input, dim)


def glu(input, dim=-1):
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    _float_only("glu_cpu", input)
    x, dt = _opmath(input)
    a, b = O.split(x, n // 2, dim)
    # (torch's node saves self: written, it raises torch's error, not that of split's views)
    return _named(_rounded(a * sigmoid(b), dt), "GluBackward0", input, saves=True)


def prelu(input, weight):
    if weight.dtype is not input.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {D.SCALAR_NAME[input.dtype]} and "
                           f"{D.SCALAR_NAME[weight.dtype]}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    w = weight
    if weight.numel() != 1:
        if input.ndim < 2 or input.shape[1] != weight.numel():
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {input.shape[1] if input.ndim >= 2 else 1}.")
        w = weight.reshape((-1,) + (1,) * (input.ndim - 2))
    return apply(P["prelu"], (input, w), {})


def threshold(input, threshold, value, inplace=False):
    # torch's kernel: x <= threshold ? value : x (-inf too, where x * 0 + value was NaN);
    # threshold_backward: x <= threshold ? 0 : grad (NaN: grad)
    # (a float16/bfloat16 input compares in float32, forward and backward, as torch's kernels)
    t = _grid(input, float(threshold), "below")
    return _inplace(input, lambda v: _piecewise(v, lambda x: O.where(x <= t, value, x), "ThresholdBackward0",
                                                "ThresholdBackwardBackward0", lo=t, nan_inside=True),
                    inplace, "ThresholdBackward1")


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_size(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _float_only("smooth_l1_cpu", input, target)
    x = O.sub(*_bool_promoted(input, target))
    if beta == 0:
        loss = O.abs(x)
    else:
        inside, xi = _quadratic_side(x, beta)
        loss = O.where(inside, 0.5 * xi * xi / beta, O.abs(x) - 0.5 * beta)
    return _named(_reduce(loss, reduction), "SmoothL1LossBackward0", input, target, saves=True)


def _quadratic_side(x, bound):
    """(where smooth_l1 and huber take their quadratic side, x there and 0 elsewhere), as torch's
    kernels: NaN inside (its gradient NaN, as torch's; abs's slope gave 0), x itself, not |x| (the
    second derivative at x == 0 is torch's 1 / beta, abs's zero slope there gave 0), and the
    quadratic's gradient not taken at x = +-inf (it was inf * 0 = NaN)."""
    inside = O.logical_not(O.abs(x) >= bound)
    return inside, O.where(inside, x, 0.0)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _check_size(input, target)

    def pointwise(x, t):
        inside, xi = _quadratic_side(x - t, delta)
        return O.where(inside, 0.5 * xi * xi, delta * (O.abs(x - t) - 0.5 * delta))
    loss = _in_input_dtype(input, target, pointwise, "huber_cpu")
    if weight is not None:
        loss = loss * weight
    return _named(_reduce(loss, reduction), "HuberLossBackward0", input, target, saves=True)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if not input.dtype.is_floating_point or not target.dtype.is_floating_point:
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.")
    if log_target:
        loss = O.exp(target) * (target - input)
    else:
        # torch's xlogy(target, target) - target * input: 0 where the target is 0, NaN where it is
        # negative, and xlogy's derivatives in the target
        loss = O.xlogy(target, target) - target * input
    if reduction == "batchmean":
        out = O.sum(loss) / (input.shape[0] if input.ndim else 1)
    else:
        out = _reduce(loss, reduction)
    return out


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch's: each input divided by its norm, the norm clamped at eps outside autograd, then
    summed. The dot product of the raw inputs (and the product of the norms) would overflow in
    float16 where the cosine is representable, and could leave [-1, 1]."""
    dt = D.result_type((x1, x2))
    if not dt.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{D.SCALAR_NAME[dt]}")
    x1, x2 = (x if x.dtype.is_floating_point else x.to(dt) for x in (x1, x2))
    x1, x2 = O.broadcast_tensors(x1, x2)
    return O.sum((x1 / _clamped_norm(x1, dim, eps)) * (x2 / _clamped_norm(x2, dim, eps)), dim)


def _clamped_norm(x, dim, eps):
    """torch clamps a clone of the norm in place under no_grad: the value is max(norm, eps), the
    derivative that of the norm itself. Written without the in-place op (which compile would not
    trace): n - n.detach() is exactly 0 where n is finite."""
    n = O.norm(x, 2, dim, keepdim=True)
    nd = n.detach()
    return O.where(O.isinf(nd), n, n - nd + O.clamp_min(nd, eps))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    # torch's is at::norm, NormBackward1 (its saved result, written, is named so)
    out = O.norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)
    return rename_grad_fn(out, "NormBackward1", whole=False) if out.__class__ is not Proxy else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over NCL input, as a 2-D convolution over an added height of one."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
                           f"{list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"weight should have 3 dimensions for conv1d, got {weight.ndim}")
    one = lambda v: (1, v[0] if isinstance(v, (tuple, list)) else v)      # noqa: E731
    pad = padding if isinstance(padding, str) else (0, padding[0] if isinstance(padding, (tuple, list)) else padding)
    out = _conv2d(O.unsqueeze(input, -2), O.unsqueeze(weight, 2), bias, one(stride), pad, one(dilation), groups,
                  False)
    out = O.squeeze(out, -2)
    return _conv_saved(out, input, weight, bias) if input.ndim == 3 else out    # (unbatched: torch's SqueezeBackward1)


def _conv_saved(out, input, weight, bias):
    """torch's ConvolutionBackward0 for a 1-d convolution: it saves input (for weight's gradient)
    and weight (for input's) as they were given, which a write names as themselves (not as the
    4-d views the 2-d convolution here saves). Its inputs are (input, weight, bias): a direct call
    of the node gave the squeeze's gradient, 4-d, alone."""
    if out.__class__ is Proxy or out._grad_fn is not None:
        keep_saved(rename_grad_fn(out, "ConvolutionBackward0", inputs=(input, weight, bias)), None,
                   tuple(t for t, r in ((input, weight.requires_grad), (weight, input.requires_grad)) if r))
    return out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return _group_norm(input, num_groups, weight, bias, eps, True)


def _group_norm(input, num_groups, weight, bias, eps, suggested):
    """group_norm; `suggested`: its result in the input's suggested memory format, as torch's
    group_norm (instance_norm's, through batch_norm, is C-contiguous)."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"GroupNormKernelImpl\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    _norm_params(input, weight, bias)
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    x, dt = _opmath(_dense(input))     # 16-bit inputs: statistics and result in float32, as layer_norm
    x = x.reshape(n, num_groups, -1)
    mean = O.mean(x, -1, keepdim=True)
    xc = x - mean
    var = O.mean(xc * xc, -1, keepdim=True)
    out = (xc * O.rsqrt(var + eps)).reshape(tuple(input.shape))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * _affine(weight, dt).reshape(shape)
    if bias is not None:
        out = out + _affine(bias, dt).reshape(shape)
    # (torch's group_norm writes its result in the input's suggested memory format)
    out = _rounded(out, dt)
    out = _named(O.laid_out_suggested(out, input) if suggested else out, "NativeGroupNormBackward0", input, weight,
                 bias, edges=(input, weight, bias))
    # torch's node saves input and weight (not bias): one written before the backward raises
    return _keep_input_weight(out, input, weight)


def _interp_sizes(input, size, scale_factor, name):
    dims = input.ndim - 2
    if dims < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: "
                         f"nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {name})")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * dims
        if len(sizes) != dims:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(input.shape[2:])} and output size of {sizes}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, "
                             f"...,oK) format.")
        return [int(s) for s in sizes], None
    scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * dims
    return [int(math.floor(float(input.shape[2 + i]) * scales[i])) for i in range(dims)], scales


def _source_index(out_size, in_size, scale, align_corners, i, cubic=False):
    """Where output position i reads in the input (torch's area_pixel_compute_source_index; the
    cubic modes keep a negative position, their taps are clamped instead)."""
    if align_corners:
        return i * ((in_size - 1) / (out_size - 1)) if out_size > 1 else 0.0
    ratio = (1.0 / scale) if scale is not None else in_size / out_size
    src = ratio * (i + 0.5) - 0.5
    return src if cubic else max(src, 0.0)


def _cubic_taps(out_size, in_size, scale, align_corners):
    """For each output position, its four input taps (clamped to the input) and their weights:
    torch's cubic convolution with A = -0.75 (upsample_bicubic2d)."""
    a = -0.75
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1                      # noqa: E731  |x| <= 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a                 # noqa: E731  1 < |x| < 2
    taps, weights = [[] for _ in range(4)], [[] for _ in range(4)]
    for i in range(out_size):
        src = _source_index(out_size, in_size, scale, align_corners, i, cubic=True)
        i0 = math.floor(src)
        t = src - i0
        for k, w in enumerate((far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t))):
            taps[k].append(min(max(i0 - 1 + k, 0), in_size - 1))
            weights[k].append(w)
    return taps, weights


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resampling over the spatial dims: 'nearest' and 'nearest-exact' gather, 'linear' and
    'bilinear' blend the two neighbours along each dim and 'bicubic' four (separably), as torch
    computes them; 'area' is adaptive average pooling."""
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if antialias:
        if mode not in ("bilinear", "bicubic", "lanczos") or input.ndim != 4:
            raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires "
                             "a 4-D tensor as input")
        # torch's antialiased kernels (a filter widened by the downscale factor) are not
        # written; plain interpolation would give other values
        raise NotImplementedError(f"interpolate(mode={mode!r}, antialias=True) is not supported")
    if not input.dtype.is_floating_point and not (input.dtype is D.uint8 and mode in ("nearest", "nearest-exact")):
        # torch's kernels are floating (and uint8 for nearest); tracegrad resampled int64 input
        raise NotImplementedError(f"\"compute_indices_weights_{'nearest' if 'nearest' in mode else mode}\" not "
                                  f"implemented for '{D.SCALAR_NAME[input.dtype]}'")
    sizes, scales = _interp_sizes(input, size, scale_factor, mode)
    if recompute_scale_factor:
        scales = None
    # 16-bit input blended in float32 and rounded once, as torch's (weights and every partial
    # sum rounded to float16 were thousands of ulps off)
    out, dt = _opmath(input) if mode in ("linear", "bilinear", "trilinear", "bicubic") else (input, None)
    for d, out_size in enumerate(sizes):
        axis = 2 + d
        in_size = input.shape[axis]
        scale = scales[d] if scales is not None else None
        if mode in ("nearest", "nearest-exact"):
            ratio = (1.0 / scale) if scale is not None else in_size / out_size
            off = 0.5 if mode == "nearest-exact" else 0.0
            idx = [min(int(math.floor((i + off) * ratio)), in_size - 1) for i in range(out_size)]
            out = O.index_select(out, axis, _long(idx, out))
        elif mode in ("linear", "bilinear", "trilinear"):
            if mode != ("linear", "bilinear", "trilinear")[len(sizes) - 1]:
                raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                          f"{('3', '4', '5')[('linear', 'bilinear', 'trilinear').index(mode)]}D input")
            ac = bool(align_corners)
            lo, hi, w = [], [], []
            for i in range(out_size):
                src = _source_index(out_size, in_size, scale, ac, i)
                i0 = min(int(math.floor(src)), in_size - 1)
                i1 = i0 + (1 if i0 < in_size - 1 else 0)
                lo.append(i0)
                hi.append(i1)
                w.append(src - i0)
            shape = [1] * input.ndim
            shape[axis] = out_size
            lam = O.reshape(_const(np.asarray(w), out.dtype, out), shape)
            a, b = O.index_select(out, axis, _long(lo, out)), O.index_select(out, axis, _long(hi, out))
            out = a * (1 - lam) + b * lam
        elif mode == "bicubic":
            if len(sizes) != 2:
                raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                          f"{input.ndim}D) for the modes: nearest | linear | bilinear | bicubic | "
                                          f"trilinear | lanczos | area | nearest-exact (got bicubic)")
            taps, weights = _cubic_taps(out_size, in_size, scale, bool(align_corners))
            shape = [1] * input.ndim
            shape[axis] = out_size
            terms = [O.index_select(out, axis, _long(taps[k], out)) *
                     O.reshape(_const(np.asarray(weights[k]), out.dtype, out), shape) for k in range(4)]
            out = terms[0] + terms[1] + terms[2] + terms[3]
        elif mode == "area":        # torch: adaptive average pooling to the output size
            if len(sizes) == 3:
                raise NotImplementedError("interpolate: mode 'area' of 5-D input (adaptive_avg_pool3d) is not "
                                          "supported")
            return (adaptive_avg_pool1d if len(sizes) == 1 else adaptive_avg_pool2d)(input, tuple(sizes))
        else:
            raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (nearest, nearest-exact, linear, "
                                      f"bilinear, bicubic, trilinear, area are)")
    out = _suggested(_rounded(out, dt), input)
    # torch's one node for the resampling, its edge input's
    n = len(sizes)
    name = {"nearest": f"UpsampleNearest{n}DBackward0", "nearest-exact": f"UpsampleNearestExact{n}DBackward0",
            "linear": "UpsampleLinear1DBackward0", "bilinear": "UpsampleBilinear2DBackward0",
            "trilinear": "UpsampleTrilinear3DBackward0", "bicubic": "UpsampleBicubic2DBackward0"}[mode]
    return _named(out, name, input, edges=(input,))



def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def _device_like(t):
    return t.device if t.is_cuda else None


def _long(idx, like):
    """An index for `like` (on its device: a host index beside a CUDA tensor raised)."""
    return tensor(idx, dtype=D.int64, device=_device_like(like))


def _const(a, dtype, like):
    return tensor(a, dtype=dtype, device=_device_like(like))


def _repeat_heads(t, rep):
    """Each of t's heads `rep` times in a row (torch's repeat_interleave over dim -3)."""
    shape = tuple(t.shape)
    e = O.unsqueeze(t, -3)
    e = e.expand(shape[:-3] + (shape[-3], rep) + shape[-2:])
    return e.reshape(shape[:-3] + (shape[-3] * rep,) + shape[-2:])


def _safe_softmax(scores):
    """torch's _safe_softmax over the last dim (attention's, under a mask): a row that is all
    -inf attends to nothing, zeros with zero gradients, rather than NaN. Its scores are replaced
    before the softmax so that the backward does not meet NaN there."""
    dead = O.all(O.eq(scores.detach(), float("-inf")), -1, keepdim=True)
    return O.where(dead, 0.0, softmax(O.where(dead, 0.0, scores), -1))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v over the last two dims; a boolean mask keeps where True,
    a float mask is added; is_causal keeps the lower triangle."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key, value = (_repeat_heads(t, query.shape[-3] // key.shape[-3]) for t in (key, value))
    scores = O.matmul(query, O.transpose(key, -2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        keep = O.tril(ones(L, S, dtype=D.bool_))
        scores = O.masked_fill(scores, O.logical_not(keep), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype is D.bool_:
            scores = O.masked_fill(scores, O.logical_not(attn_mask), float("-inf"))
        else:
            scores = scores + attn_mask
    attn = softmax(scores, -1) if attn_mask is None else _safe_softmax(scores)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return O.matmul(attn, value)


"""torch.nn.functional's 3-d convolutions and pooling, max unpooling, alpha dropout, pdist and
the triplet loss with a distance function, each a decomposition into the 2-d primitives and the
ops before it (so its gradients, first and second, are theirs).

A 3-d window over (D, H, W) is a 1-d window over D of 2-d windows over (H, W): the depth taps
of every output position are strided slices of the (padded) input, stacked beside the channels,
and one 2-d convolution or pooling does the rest. conv3d's weight (O, C/g, kD, kH, kW) read as
(O, C/g * kD, kH, kW) pairs channel c's tap j with the stacked channel c * kD + j, which keeps
the groups' channel blocks whole."""
import math
import numbers

import numpy as np

from .. import _dtype as D
from ..tensor import Tensor
from ..ops import functional as O
from ..ops.nn_primitives import pool_out_size
from ..tracing import Proxy
from ..creation import from_numpy, ones, zeros
from . import functional as F
from .functional_extra import _output_sizes, _adaptive_along, _mean, _adaptive_float, _lowest, adaptive_max_nd, \
    torch_max_position

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "alpha_dropout", "feature_alpha_dropout", "pdist",
           "triplet_margin_with_distance_loss"]


def _triple(v, name="argument"):
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, numbers.Integral):
        return (int(v),) * 3
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * 3
    if len(v) != 3:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 3 values to match the "
                           f"convolution dimensions, but got {name}={list(v)}")
    return v


def _pool_triple(v, fn, what):
    """A pooling argument as three ints, with torch's message for another length."""
    if isinstance(v, numbers.Integral):
        return (int(v),) * 3
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * 3
    if len(v) != 3:
        raise RuntimeError(f"{fn}: {what}")
    return v


def _taps(x, k, s, d, n_out):
    """The depth taps of a 1-d window over dim 2 of x (N, C, D, H, W): tap j of output position o
    reads x[:, :, o * s + j * d]; stacked at dim 3 as (N, C, n_out, k, H, W)."""
    span = (n_out - 1) * s + 1
    return O.stack([x[:, :, j * d:j * d + span:s] for j in range(k)], 3)


def _pad_depth(x, lo, hi, value=0.0):
    return x if lo == 0 and hi == 0 else F.pad(x, (0, 0, 0, 0, lo, hi), value=value)


def _conv3d_checks(input, weight, bias, groups, fn, stride, transposed=False):
    F._check_tensor(input, fn)
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to {fn}, but got input of size: "
                           f"{list(input.shape)}")
    if weight.ndim != 5:
        # torch reads the number of spatial dims from the weight and then finds 3 strides
        raise RuntimeError(f"expected stride to be a single integer value or a list of {weight.ndim - 2} values to "
                           f"match the convolution dimensions, but got stride={list(stride)}")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[input.dtype]} but found "
                           f"{D.SCALAR_NAME[weight.dtype]}")
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({F._type_name(input.dtype)}) and bias type ({F._type_name(bias.dtype)}) "
                           f"should be the same")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                           f"weight of size {list(weight.shape)} instead")
    out_c = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_c):
        raise RuntimeError(f"Given {'transposed=1, ' if transposed else ''}weight of size {list(weight.shape)}, "
                           f"expected bias to be 1-dimensional with {out_c} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    c = input.shape[-4]
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{list(weight.shape)}] instead")
    if transposed:
        if c != weight.shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                               f"{list(input.shape)} to have {weight.shape[0]} channels, but got {c} channels "
                               f"instead")
    elif c != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got {c} channels "
                           f"instead")


def _conv3d_geometry(padding, dilation, transposed):
    """torch's checks of a 3-d convolution's padding and dilation."""
    if not isinstance(padding, str) and min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(dilation) <= 0:
        if transposed:
            raise RuntimeError(f"dilation should be greater than zero, but got dilation_depth: {dilation[0]}, "
                               f"dilation_height: {dilation[1]}, dilation_width: {dilation[2]}")
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")


def _batched(input):
    return (O.unsqueeze(input, 0), True) if input.ndim == 4 else (input, False)


def _finish(out, x, weight, unbatched, name, *edges):
    """The permuted result copied dense, as torch's kernels write it: C-contiguous, or channels-last
    where the (batched) input or the weight is laid out so and torch's CPU convolution is
    oneDNN's (float32, bfloat16; its float64 and float16 3-d kernels write C-contiguous); named
    as torch's one node."""
    out = O.contiguous(out)
    if x.dtype is D.float32 or x.dtype is D.bfloat16:
        out = F._conv_format(out, x, weight)
    out = O.squeeze(out, 0) if unbatched else out
    return F._named(out, name, edges[0], edges=edges)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution (cross-correlation, as torch) over NCDHW input."""
    stride, dilation = _triple(stride, "stride"), _triple(dilation, "dilation")
    _conv3d_checks(input, weight, bias, groups, "conv3d", stride)
    F._positive_stride(stride)
    x, unbatched = _batched(input)
    batched = x
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0, 0)
        elif padding == "same":
            if stride != (1, 1, 1):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            padding = tuple(t // 2 for t in total)
            if any(t % 2 for t in total):
                # an even kernel: torch pads the extra plane at the end of each such dim
                extra = [t - 2 * p for t, p in zip(total, padding)]
                x = F.pad(x, (0, extra[2], 0, extra[1], 0, extra[0]))
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _triple(padding, "padding")
    _conv3d_geometry(padding, dilation, False)
    size = [n + 2 * p for n, p in zip(x.shape[2:], padding)]
    eff = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if any(n < e for n, e in zip(size, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, size))}). Kernel size: "
                           f"({' x '.join(map(str, eff))}). Kernel size can't be greater than actual input size")
    n, c = x.shape[0], x.shape[1]
    kd, sd, dd = kernel[0], stride[0], dilation[0]
    do = (size[0] - eff[0]) // sd + 1
    taps = _taps(_pad_depth(x, padding[0], padding[0]), kd, sd, dd, do)           # (N, C, Do, kD, H, W)
    taps = O.permute(taps, (0, 2, 1, 3, 4, 5)).reshape(n * do, c * kd, x.shape[3], x.shape[4])
    w2 = weight.reshape(weight.shape[0], weight.shape[1] * kd, kernel[1], kernel[2])
    y = F._conv2d(taps, w2, bias, stride[1:], padding[1:], dilation[1:], groups, False)
    y = O.permute(y.reshape(n, do, y.shape[1], y.shape[2], y.shape[3]), (0, 2, 1, 3, 4))
    return _finish(y, batched, weight, unbatched, "ConvolutionBackward0", input, weight, bias)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of conv3d with respect to its input. Along depth: the input spread out by the
    stride (zeros between), padded by dilation * (k - 1) - padding (and output_padding at the end),
    then correlated with the depth-flipped kernel; the 2-d transposed convolution does (H, W)."""
    stride, padding = _triple(stride, "stride"), _triple(padding, "padding")
    output_padding, dilation = _triple(output_padding, "output_padding"), _triple(dilation, "dilation")
    _conv3d_checks(input, weight, bias, groups, "conv_transpose3d", stride, transposed=True)
    F._positive_stride(stride)
    _conv3d_geometry(padding, dilation, True)
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                           + " ".join(f"{w}_{a}: {v}" for w, vals in (("output_padding", output_padding),
                                                                       ("stride", stride), ("dilation", dilation))
                                      for a, v in zip(("depth", "height", "width"), vals)))
    x, unbatched = _batched(input)
    batched = x
    n, c, d, h, w = x.shape
    kd, sd, pd, dd = weight.shape[2], stride[0], padding[0], dilation[0]
    out_size = [(i - 1) * s - 2 * p + dl * (k - 1) + op + 1 for i, s, p, dl, k, op in
                zip((d, h, w), stride, padding, dilation, weight.shape[2:], output_padding)]
    if min(out_size) <= 0:
        raise RuntimeError(f"Given input size per channel: ({d} x {h} x {w}). Calculated output size per channel: "
                           f"({' x '.join(map(str, out_size))}). Output size is too small")
    if sd > 1:
        # zeros between the planes: (N, C, D, 1, H, W) padded to (N, C, D, sd, H, W), read as D * sd planes
        x = F.pad(O.unsqueeze(x, 3), (0, 0, 0, 0, 0, sd - 1)).reshape(n, c, d * sd, h, w)
        x = x[:, :, :(d - 1) * sd + 1]
    lo = dd * (kd - 1) - pd
    x = _pad_depth(x, lo, lo + output_padding[0])
    do = out_size[0]
    taps = _taps(x, kd, 1, dd, do)                                                 # (N, C, Do, kD, H, W)
    taps = O.permute(taps, (0, 2, 1, 3, 4, 5)).reshape(n * do, c * kd, h, w)
    w2 = O.permute(O.flip(weight, (2,)), (0, 2, 1, 3, 4)).reshape(c * kd, weight.shape[1], *weight.shape[3:])
    y = F._conv_transpose2d(taps, w2, bias, stride[1:], padding[1:], output_padding[1:], groups, dilation[1:], False)
    y = O.permute(y.reshape(n, do, y.shape[1], y.shape[2], y.shape[3]), (0, 2, 1, 3, 4))
    return _finish(y, batched, weight, unbatched, "ConvolutionBackward0", input, weight, bias)


# == pooling ======================================================================================================

def _pool3d_checks(input, kernel, stride, padding, dilation, ceil_mode, fn):
    F._check_tensor(input, fn)
    if min(stride) == 0:
        raise RuntimeError("stride should not be zero")
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {kernel[0]} kH: {kernel[1]} "
                           f"kW: {kernel[2]}")
    if min(stride) < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {stride[0]} dH: {stride[1]} "
                           f"dW: {stride[2]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {dilation[0]} dilationH: "
                           f"{dilation[1]} dilationW: {dilation[2]}")
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if min(padding) < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(padding)}")
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    out = [pool_out_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
           zip(input.shape[-3:], kernel, stride, padding, dilation)]
    if 0 in tuple(input.shape[input.ndim - 4:]):
        where = "max_pool3d_with_indices_out_cpu_template" if fn == "max_pool3d" else fn
        # (torch prints the dimension's length, zero, where it means its index)
        raise RuntimeError(f"{where}(): Expected input's non-batch dimensions to have positive length, but input "
                           f"has a shape of {list(input.shape)} and non-batch dimension 0 has length zero!")
    c, t, h, w = input.shape[-4:]
    if fn == "avg_pool3d" and (t < kernel[0] or h < kernel[1] or w < kernel[2]):
        # (torch's avg_pool3d wants the input itself, padding aside, as large as the kernel)
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size (kT: {kernel[0]} "
                           f"kH: {kernel[1]} kW: {kernel[2]})")
    if min(out) < 1:
        raise RuntimeError(f"Given input size: ({c}x{t}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    return out


def _pool3d_args(input, kernel_size, stride, padding, dilation, fn):
    word = "must either be" if fn == "max_pool3d" else "must be"
    kernel = _pool_triple(kernel_size, fn, f"kernel_size {word} a single int, or a tuple of three ints")
    if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0):
        stride = kernel
    else:
        stride = _pool_triple(stride, fn, f"stride {word} omitted, a single int, or a tuple of three ints")
    padding = _pool_triple(padding, fn, f"padding {word} a single int, or a tuple of three ints")
    dilation = _pool_triple(dilation, fn, "dilation must be either a single int, or a tuple of three ints")
    return kernel, stride, padding, dilation


def _depth_reach(n, k, s, p, d, n_out):
    """How far the last depth window reaches past the input's end (ceil_mode windows may)."""
    return max(0, (n_out - 1) * s - p + (k - 1) * d - (n - 1))


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum over each 3-d window: 2-d max pooling of every depth tap, then the maximum over
    the taps. As torch's kernel scans (D, H, W): ties go to the first element, NaN to the last;
    the indices are flat over each input plane's D * H * W."""
    kernel, stride, padding, dilation = _pool3d_args(input, kernel_size, stride, padding, dilation, "max_pool3d")
    do = _pool3d_checks(input, kernel, stride, padding, dilation, ceil_mode, "max_pool3d")[0]
    if input.dtype is D.bool_:
        raise NotImplementedError("\"max_pool3d\" not implemented for 'Bool'")
    x, unbatched = _batched(input)
    n, c, d, h, w = x.shape
    kd, sd, pd, dd = kernel[0], stride[0], padding[0], dilation[0]
    low = _lowest(x.dtype)
    xp = _pad_depth(x, pd, pd + _depth_reach(d, kd, sd, pd, dd, do), value=low)
    taps = _taps(xp, kd, sd, dd, do).reshape(n, c * do * kd, h, w)
    vals, idx = F._max_pool2d(taps, kernel[1:], stride[1:], padding[1:], dilation[1:], ceil_mode, True, False)
    ho, wo = vals.shape[-2:]
    vals, idx = vals.reshape(n, c, do, kd, ho, wo), idx.reshape(n, c, do, kd, ho, wo)
    start = np.arange(do, dtype=np.int64).reshape(do, 1) * sd - pd
    plane_of_tap = start + np.arange(kd, dtype=np.int64) * dd                        # (Do, kD)
    # (a tap in the depth padding is never taken: where a window's real elements are all the
    # padding's value, torch keeps the first real one)
    valid = (plane_of_tap >= 0) & (plane_of_tap < d)
    # a dilated window with no plane of the input: torch keeps its start stepped past the padding
    none = ~valid.any(1)
    valid[none, np.argmax(plane_of_tap[none] >= 0, axis=1)] = True
    valid = from_numpy(valid.reshape(do, kd, 1, 1))
    tap = torch_max_position(vals, 3, valid)
    values = O.squeeze(O.gather(vals, 3, tap), 3)
    plane = O.squeeze(O.gather(idx, 3, tap), 3)
    indices = (from_numpy(start.reshape(do, 1, 1)) + O.squeeze(tap, 3) * dd) * (h * w) + plane
    # (torch writes them in the input's suggested memory format: channels-last stays so)
    values, indices = F._suggested(O.contiguous(values), x), F._suggested(O.contiguous(indices), x)
    if unbatched:
        values, indices = O.squeeze(values, 0), O.squeeze(indices, 0)
    values = F._named(values, "MaxPool3DWithIndicesBackward0", input, edges=(input,))
    return (values, indices) if return_indices else values


def _window_counts(n, k, s, p, n_out, count_include_pad):
    """torch's avg_pool divisor along one dim: the window clipped to the padded input, or with
    count_include_pad=False to the input itself."""
    start = np.arange(n_out) * s - p
    end = np.minimum(start + k, n + p)
    if count_include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Each 3-d window's sum (2-d sums of every depth tap, added over the taps) over torch's divisor."""
    kernel, stride, padding, _ = _pool3d_args(input, kernel_size, stride, padding, 1, "avg_pool3d")
    out = _pool3d_checks(input, kernel, stride, padding, (1, 1, 1), ceil_mode, "avg_pool3d")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if input.dtype not in (D.float32, D.float64, D.int64):
        # (torch's CPU kernel: float32, float64 and int64 alone)
        raise NotImplementedError(f"\"avg_pool3d_out_frame\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    x, unbatched = _batched(input)
    n, c, d, h, w = x.shape
    kd, sd, pd = kernel[0], stride[0], padding[0]
    do = out[0]
    xp = _pad_depth(x, pd, pd + _depth_reach(d, kd, sd, pd, 1, do))
    taps = _taps(xp, kd, sd, 1, do).reshape(n, c * do * kd, h, w)
    sums = F._avg_pool2d(taps, kernel[1:], stride[1:], padding[1:], ceil_mode, True, 1, False)
    ho, wo = sums.shape[-2:]
    total = O.sum(sums.reshape(n, c, do, kd, ho, wo), 3)
    if divisor_override is not None:
        divisor = np.array(divisor_override, dtype=np.int64)
    else:
        dims = [_window_counts(m, k, s, p, o, count_include_pad)
                for m, k, s, p, o in zip((d, h, w), kernel, stride, padding, (do, ho, wo))]
        divisor = dims[0].reshape(-1, 1, 1) * dims[1].reshape(1, -1, 1) * dims[2].reshape(1, 1, -1)
    if x.dtype.is_floating_point:
        res = total / from_numpy(divisor.astype(x.dtype.np))
    else:
        # torch divides the integer sums in their own type (C++'s division, toward zero)
        res = O.div(total, from_numpy(divisor.astype(np.int64)).to(x.dtype), rounding_mode="trunc")
    if unbatched:
        res = O.squeeze(res, 0)
    return F._named(res, "AvgPool3DBackward0", input, edges=(input,))


def _adaptive3d_checks(input, output_size, fn, length_message):
    """torch's checks of an adaptive 3-d pool's input and output_size; the output sizes."""
    if isinstance(output_size, (tuple, list)) and len(output_size) != 3:
        raise RuntimeError(length_message)
    for i in range(input.ndim - 4, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")
    return _output_sizes(input, output_size, 3)


def _empty_pooled(input, sizes):
    """An output with a zero size: empty, its gradient the input's zeros."""
    lead = tuple(input.shape[:input.ndim - 3])
    return O.narrow(input.reshape(*lead, -1), -1, 0, 0).reshape(*lead, *sizes)


def adaptive_avg_pool3d(input, output_size):
    """The mean over torch's adaptive windows, one dim at a time (a mean of means of equal counts
    along each dim is the window's mean)."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    sizes = _adaptive3d_checks(input, output_size, "adaptive_avg_pool3d",
                               "adaptive_avg_pool3d: output_size must be 3")
    if 0 in sizes:
        _adaptive_float(input, "adaptive_avg_pool3d_cpu")
        return F._named(_empty_pooled(input, sizes), "AdaptiveAvgPool3DBackward0", input, edges=(input,))
    if sizes != [1, 1, 1]:          # (torch's (1, 1, 1) is a mean, with mean's error for integers)
        _adaptive_float(input, "adaptive_avg_pool3d_cpu")
    if sizes == [1, 1, 1]:
        out = O.mean(input, (-3, -2, -1), keepdim=True)
    else:
        out = input
        for i, o in enumerate(sizes):
            out = _adaptive_along(out, input.ndim - 3 + i, o, _mean)
        out = O.contiguous(out)
    return F._named(out, "AdaptiveAvgPool3DBackward0", input, edges=(input,))


def adaptive_max_pool3d(input, output_size, return_indices=False):
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"adaptive_max_pool3d_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    sizes = _adaptive3d_checks(input, output_size, "adaptive_max_pool3d",
                               "adaptive_max_pool3d(): internal error: output_size.size() must be 3")
    if 0 in sizes:
        values = _empty_pooled(input, sizes)
        indices = zeros(values.shape, dtype=D.int64)
    else:
        values, indices = adaptive_max_nd(input, sizes)
    values = F._named(O.contiguous(values), "AdaptiveMaxPool3DBackward0", input, edges=(input,))
    return (values, indices) if return_indices else values


# == max unpooling ================================================================================================

def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """torch's _unpool_output_size."""
    k = len(kernel_size)
    default = [(input.shape[input.ndim - k + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(k)]
    if output_size is None:
        return default
    if len(output_size) == k + 2:
        output_size = output_size[2:]
    if len(output_size) != k:
        raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(k):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    return [int(s) for s in output_size]


def _max_unpool(input, indices, size, nd, name):
    """Scatter each plane's values to the flat positions `indices` names in a zero plane of
    `size` (torch's max_unpooling: a later duplicate overwrites; the gradient gathers)."""
    if indices.dtype is not D.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {D.SCALAR_NAME[indices.dtype]}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d Tensor, but got a tensor "
                           f"with {input.ndim} dimensions.")
    for s in size:
        if s <= 0:
            raise RuntimeError(f"max_unpooling{nd}d(): Expected output size to be positive, but got {list(size)}")
    total = math.prod(size)
    if indices.__class__ is not Proxy and indices.numel():
        bad = indices.numpy()
        bad = bad[(bad < 0) | (bad >= total)]
        if bad.size:
            raise RuntimeError(f"Found an invalid max index: {int(bad.flat[0])} (output volumes are of size "
                               f"{'x'.join(map(str, size))})")
    lead = tuple(input.shape[:input.ndim - nd])
    flat_in = input.reshape(*lead, -1)
    base = zeros(lead + (total,), dtype=input.dtype, device=input.device)
    out = O.scatter(base, -1, indices.reshape(*lead, -1), flat_in)
    return F._named(out.reshape(*lead, *size), name, input, edges=(input,))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    one = lambda v: (int(v[0]),) if isinstance(v, (tuple, list)) else (int(v),)      # noqa: E731
    kernel = one(kernel_size)
    stride = kernel if stride is None else one(stride)
    size = _unpool_output_size(input, kernel, stride, one(padding), output_size)
    # (torch's: max_unpool2d over an added width of one)
    out = _max_unpool(O.unsqueeze(input, -1), O.unsqueeze(indices, -1), size + [1], 2, "MaxUnpool2DBackward0")
    return O.squeeze(out, -1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel = F._pair(kernel_size, "kernel_size")
    stride = kernel if stride is None else F._pair(stride, "stride")
    size = _unpool_output_size(input, kernel, stride, F._pair(padding, "padding"), output_size)
    return _max_unpool(input, indices, size, 2, "MaxUnpool2DBackward0")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel = _triple(kernel_size, "kernel_size")
    stride = kernel if stride is None else _triple(stride, "stride")
    size = _unpool_output_size(input, kernel, stride, _triple(padding, "padding"), output_size)
    return _max_unpool(input, indices, size, 3, "MaxUnpool3DBackward0")


# == alpha dropout ================================================================================================

_SELU_ALPHA = 1.7580993408473766        # torch's alpha' = -selu's scale * alpha


def alpha_dropped(input, keep, p):
    """Alpha dropout with the mask `keep` (1 kept, 0 dropped, broadcastable to input): kept values
    a * x + alpha' * a * p, dropped ones alpha' * a * (p - 1), a = 1 / sqrt((alpha'^2 p + 1)(1 - p)),
    torch's affine map, which keeps zero mean and unit variance."""
    a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
    b = (keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    return input * (keep * a) + b


def _alpha_dropout(input, p, training, inplace, feature):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if feature and input.ndim < 2 and training and p > 0:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{D.SCALAR_NAME[input.dtype]}")
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    # the mask drawn as dropout draws its own (so a compiled program draws it as it draws dropout's)
    keep = O.convert(F.dropout(ones(shape, dtype=input.dtype, device=input.device), p, True) != 0, input.dtype)
    if inplace:
        a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
        return input.mul_(keep * a).add_((keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p)
    return alpha_dropped(input, keep, p)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, True)


# == distances ====================================================================================================

def pdist(input, p=2):
    """The p-norm distance of every pair of rows i < j, in row-major order of the pairs."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if input.dtype in (D.float16, D.bfloat16):
        raise NotImplementedError(f"\"pdist\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    i, j = np.triu_indices(n, 1)
    diff = O.index_select(input, 0, from_numpy(i.astype(np.int64))) - \
        O.index_select(input, 0, from_numpy(j.astype(np.int64)))
    if p == math.inf:
        # torch's gradient goes whole to every coordinate at the maximum: the maximum's first one
        # gets it through max, the others through a term of value zero (|d| - |d| for finite d)
        a = O.abs(diff)
        m = O.amax(a.detach(), 1, keepdim=True)
        first = torch_max_position(a, 1)
        dist = O.squeeze(O.gather(a, 1, first), 1)
        others = (a.detach() == m) & (from_numpy(np.arange(a.shape[1])) != first) & (a.detach() != math.inf)
        dist = dist + O.sum(O.where(others, a - a.detach(), 0.0), 1)
    elif p == 0:
        # the count of differing coordinates, whose gradient is zero (torch's); sign's derivative
        # is zero, and a NaN difference counts, as torch's `diff != 0`
        dist = O.sum(O.where(diff == diff, O.abs(O.sign(diff)), 1.0), 1)
    else:
        dist = O.norm(diff, p, 1)
    return F._named(dist, "PdistBackward0", input, edges=(input,))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """torch's: max(margin + d(a, p) - d(a, n), 0) with d pairwise_distance unless given; with swap,
    d(a, n) is min(d(a, n), d(p, n))."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    if distance_function is None:
        distance_function = F.pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_neg = O.minimum(dist_neg, distance_function(positive, negative))
    loss = O.clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return O.sum(loss)
    if reduction == "mean":
        return O.mean(loss)
    return loss


for _name in __all__:
    setattr(F, _name, globals()[_name])
del _name

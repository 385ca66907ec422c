"""More of torch.nn.functional, each a decomposition into the ops and functions before it
(so its gradient is theirs): 1-d pooling as 2-d pooling over a height of one, adaptive
pooling whose windows do not tile the input, instance_norm, pixel_shuffle, unfold/fold as
convolutions with one-hot kernels, gumbel_softmax and the remaining common losses."""
import math
import warnings

import numpy as np

from .. import _dtype as D
from ..ops import functional as O
from . import functional as F
from ..grad_mode import no_grad, is_grad_enabled
from ..creation import from_numpy, zeros, arange, ones, empty_like, rand_like, rand
from ..tracing import rename_grad_fn, keep_saved, Proxy, TraceError, apply as _apply
from ..ops import ctc_primitives  # noqa: F401  (registers the CTC primitives)
from ..ops.primitives import PRIMITIVES as _P

__all__ = ["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_avg_pool2d", "instance_norm", "pixel_shuffle", "pixel_unshuffle", "unfold", "fold",
           "gumbel_softmax", "cosine_embedding_loss", "margin_ranking_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_loss",
           "gaussian_nll_loss", "poisson_nll_loss", "hinge_embedding_loss", "embedding_bag", "affine_grid", "grid_sample",
           "rms_norm", "local_response_norm", "lp_pool1d", "lp_pool2d", "conv_transpose1d", "rrelu", "dropout1d",
           "dropout2d", "dropout3d", "channel_shuffle", "bilinear"]


def _single(v, name="kernel_size"):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise RuntimeError(f"{name} must be a single int, or a tuple of one int")
        return int(v[0])
    return int(v)


def _as_2d(input, op):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
                           f"non-zero dimensions, but got {input.ndim}D")
    return O.unsqueeze(input, -2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k = _single(kernel_size)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else _single(stride, "stride")
    # (torch's max_pool1d that returns or saves indices is its max_pool2d over an added height,
    # channels-last where that lays it so; without, a kernel of its own that writes C-contiguous)
    formatted = return_indices or input.requires_grad and is_grad_enabled()
    out = F._max_pool2d(_as_2d(input, "max_pool1d"), (1, k), (1, s), (0, _single(padding, "padding")),
                        (1, _single(dilation, "dilation")), ceil_mode, return_indices, formatted)
    if return_indices:
        return O.squeeze(out[0], -2), O.squeeze(out[1], -2)
    return O.squeeze(out, -2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    k = _single(kernel_size)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else _single(stride, "stride")
    # (torch's avg_pool1d is its avg_pool2d over an added height, channels-last where that lays it so;
    # its max_pool1d is a kernel of its own, C-contiguous)
    out = F.avg_pool2d(_as_2d(input, "avg_pool1d"), (1, k), (1, s), (0, _single(padding, "padding")),
                       ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    return O.squeeze(out, -2)


def _adaptive_windows(n_in, n_out):
    """torch's adaptive windows: [floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out))."""
    return [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]


def _adaptive_along(x, dim, n_out, reduce):
    n_in = x.shape[dim]
    if n_out <= 0:
        raise RuntimeError(f"adaptive pooling: output size must be positive, got {n_out}")
    if n_in % n_out == 0:
        k = n_in // n_out
        shape = tuple(x.shape[:dim]) + (n_out, k) + tuple(x.shape[dim + 1:])
        return reduce(x.reshape(*shape), dim + 1)
    parts = [reduce(O.narrow(x, dim, a, b - a), dim) for a, b in _adaptive_windows(n_in, n_out)]
    return O.stack(parts, dim)


def _mean(x, d):
    return O.mean(x, d)


def _output_sizes(input, output_size, n):
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(sizes) != n:
        raise ValueError(f"output_size must have {n} elements")
    return [input.shape[input.ndim - n + i] if o is None else int(o) for i, o in enumerate(sizes)]


def _adaptive_float(input, kernel):
    # torch's kernels are floating only (tracegrad pooled an int64 input, truncating its means)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")


def adaptive_avg_pool2d(input, output_size):
    """Mean over torch's adaptive windows; windows that tile the input pool as avg_pool2d."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    _adaptive_float(input, "adaptive_avg_pool2d")
    oh, ow = _output_sizes(input, output_size, 2)
    h, w = input.shape[-2], input.shape[-1]
    if (oh, ow) == (1, 1):
        return O.mean(input, (-2, -1), keepdim=True)
    if h % oh == 0 and w % ow == 0:
        out = F.avg_pool2d(input, (h // oh, w // ow))
    else:
        # torch's node saves self (_adaptive_avg_pool2d_backward(grad, self))
        out = keep_saved(F._suggested(_adaptive_along(_adaptive_along(input, input.ndim - 2, oh, _mean),
                                                      input.ndim - 1, ow, _mean), input), input)
    return F._named(out, "AdaptiveAvgPool2DBackward0", input, edges=(input,))       # (torch's one node)


def adaptive_avg_pool1d(input, output_size):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d(): Expected 2D or 3D tensor, but got {list(input.shape)}")
    (o,) = _output_sizes(input, output_size, 1)
    # torch's: its adaptive_avg_pool2d over an added height (its graph, and a channels-last layout
    # where that lays it so)
    return O.squeeze(adaptive_avg_pool2d(O.unsqueeze(input, -2), (1, o)), -2)


def torch_max_position(x, dim, valid=None):
    """Where along `dim` torch's max-pooling kernels take the maximum (kept dim): the first
    maximum in scan order, but the last NaN (each NaN replaces the running maximum in turn).
    `valid`: a bool mask broadcastable to x of the positions that may be taken where every
    candidate ties at the maximum (padding beside elements equal to the padding value).
    Gathering the values at it sends the gradient to that one element, as torch's."""
    x = x.detach()
    k = x.shape[dim]
    isnan = x != x
    cand = x == O.amax(x, dim, keepdim=True)
    if valid is not None:
        cand = cand & valid
    first = O.argmax(O.convert(cand, D.int64), dim, keepdim=True)
    last_nan = (k - 1) - O.argmax(O.convert(O.flip(isnan, (dim,)), D.int64), dim, keepdim=True)
    return O.where(O.any(isnan, dim, keepdim=True), last_nan, first)


def _lowest(dtype):
    """The padding a maximum never picks over a real element."""
    if dtype.is_floating_point:
        return -math.inf
    return np.iinfo(dtype.np).min if np.dtype(dtype.np).kind in "iu" else 0


def _adaptive_index(n_in, n_out):
    """Per output position, the input positions of its window padded to the longest window's
    length (repeating its first), and which of them are real."""
    wins = [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]
    k = max(b - a for a, b in wins)
    pos = np.array([[a + j if a + j < b else a for j in range(k)] for a, b in wins], dtype=np.int64)
    real = np.array([[a + j < b for j in range(k)] for a, b in wins])
    return pos, real


def adaptive_max_nd(input, sizes):
    """The maximum over torch's adaptive windows of the last len(sizes) dims, with the flat index
    of the first maximum in scan order (torch's), gathered so that the gradient goes to that one
    element as torch's does. Returns (values, indices)."""
    k = len(sizes)
    lead = tuple(input.shape[:input.ndim - k])
    spatial = tuple(input.shape[input.ndim - k:])
    low = _lowest(input.dtype)
    x = input
    real = np.ones((), dtype=bool)
    flat = np.zeros((), dtype=np.int64)
    for i, (n_in, n_out) in enumerate(zip(spatial, sizes)):
        pos, ok = _adaptive_index(n_in, n_out)
        dim = len(lead) + 2 * i
        # dim `dim` (n_in) becomes (n_out, kmax): the windows' elements
        x = O.index_select(x, dim, from_numpy(pos.reshape(-1))).reshape(
            *x.shape[:dim], n_out, pos.shape[1], *x.shape[dim + 1:])
        stride_i = math.prod(spatial[i + 1:])
        real = real[..., None, None] & ok
        flat = flat[..., None, None] + pos * stride_i
    # (lead, o1, k1, o2, k2, ...) -> (lead, o1, o2, ..., k1 * k2 * ...)
    nl = len(lead)
    order = list(range(nl)) + [nl + 2 * i for i in range(k)] + [nl + 2 * i + 1 for i in range(k)]
    x = O.permute(x, order)
    x = x.reshape(*x.shape[:nl + k], -1)
    perm = [2 * i for i in range(k)] + [2 * i + 1 for i in range(k)]
    real = np.transpose(real, perm).reshape(*sizes, -1)
    flat = np.transpose(flat, perm).reshape(*sizes, -1)
    if not real.all():
        x = O.where(from_numpy(real), x, low)
    arg = torch_max_position(x, -1)
    values = O.squeeze(O.gather(x, -1, arg), -1)
    indices = O.squeeze(O.gather(from_numpy(flat).expand(*lead, *flat.shape), -1, arg), -1)
    return values, indices


def adaptive_max_pool2d(input, output_size, return_indices=False):
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    _adaptive_float(input, "adaptive_max_pool2d")
    oh, ow = _output_sizes(input, output_size, 2)
    h, w = input.shape[-2], input.shape[-1]
    if h % oh == 0 and w % ow == 0:
        return F.max_pool2d(input, (h // oh, w // ow), return_indices=return_indices)
    # (each window's first maximum, as torch's: an amax split the gradient among tied maxima)
    values, indices = adaptive_max_nd(input, (oh, ow))
    # torch's node saves self and the indices: self written raises
    values = rename_grad_fn(keep_saved(F._suggested(values, input), input), "AdaptiveMaxPool2DBackward0")
    return (values, F._suggested(indices, input)) if return_indices else values


def adaptive_max_pool1d(input, output_size, return_indices=False):
    (o,) = _output_sizes(input, output_size, 1)
    out = adaptive_max_pool2d(_as_2d(input, "adaptive_max_pool1d"), (1, o), return_indices)
    if return_indices:
        return O.squeeze(out[0], -2), O.squeeze(out[1], -2)
    return O.squeeze(out, -2)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each sample's channel normalised over its own positions (a group_norm with one channel per
    group); running statistics, when given, move toward the batch's mean of them."""
    if momentum is None:
        raise TypeError("instance_norm(): argument 'momentum' (position 7) must be float, not NoneType")
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input of 3 or more dims (N, C, ...), got {input.ndim}D")
    c = input.shape[1]
    if not use_input_stats:
        return F.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is not None or running_var is not None:
        dims = tuple(range(2, input.ndim))
        n = math.prod(input.shape[2:])
        with no_grad():
            m = O.mean(input.detach(), dims)
            v = O.var(input.detach(), dims, correction=1 if n > 1 else 0)
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(O.mean(m, 0) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(O.mean(v, 0) * momentum)
    return F._group_norm(input, c, weight, bias, eps, False)


def pixel_shuffle(input, upscale_factor):
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    nl = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = O.permute(x, *range(nl), nl, nl + 3, nl + 1, nl + 4, nl + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"{h} and {w} for downscale_factor={r}")
    nl = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = O.permute(x, *range(nl), nl, nl + 2, nl + 4, nl + 1, nl + 3)
    return F._suggested(x.reshape(*lead, c * r * r, h // r, w // r), input)


def _pair(v):
    return (int(v), int(v)) if not isinstance(v, (tuple, list)) else (int(v[0]), int(v[1]))


def _one_hot_kernels(c, kh, kw, dtype):
    """(c*kh*kw, 1, kh, kw): kernel p of each channel picks position p of its window."""
    eye = np.eye(kh * kw, dtype=np.float64).reshape(kh * kw, 1, kh, kw)
    return from_numpy(np.ascontiguousarray(np.tile(eye, (c, 1, 1, 1)))).to(dtype)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), a grouped conv2d with one-hot kernels."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    if not input.dtype.is_floating_point and input.dtype is not D.bool_:
        raise NotImplementedError(f"\"im2col_out_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    kh, kw = _pair(kernel_size)
    x = input if input.ndim == 4 else O.unsqueeze(input, 0)
    c = x.shape[1]
    cols = F._conv2d(x, _one_hot_kernels(c, kh, kw, x.dtype), None, _pair(stride), _pair(padding), _pair(dilation),
                     c, False)
    cols = cols.reshape(x.shape[0], c * kh * kw, -1)
    return cols if input.ndim == 4 else O.squeeze(cols, 0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: overlapping windows sum (a grouped conv_transpose2d)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got "
                           f"{input.ndim}D)")
    kh, kw = _pair(kernel_size)
    (oh, ow), (sh, sw), (ph, pw), (dh, dw) = _pair(output_size), _pair(stride), _pair(padding), _pair(dilation)
    x = input if input.ndim == 3 else O.unsqueeze(input, 0)
    ckk = x.shape[1]
    if ckk % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={ckk} and kernel_size=({kh}, {kw})")
    c = ckk // (kh * kw)
    bh = (oh + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (ow + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if bh * bw != x.shape[2]:
        raise RuntimeError(f"Given output_size=({oh}, {ow}), kernel_size=({kh}, {kw}), dilation=({dh}, {dw}), "
                           f"padding=({ph}, {pw}), stride=({sh}, {sw}), expected size of input's dimension 2 to "
                           f"match the calculated number of sliding blocks {bh} * {bw} = {bh * bw}, but got "
                           f"input.size(2)={x.shape[2]}.")
    blocks = x.reshape(x.shape[0], ckk, bh, bw)
    full_h = (bh - 1) * sh + dh * (kh - 1) + 1
    full_w = (bw - 1) * sw + dw * (kw - 1) + 1
    extra = (oh + 2 * ph - full_h, ow + 2 * pw - full_w)
    out = F._conv_transpose2d(blocks, _one_hot_kernels(c, kh, kw, x.dtype), None, (sh, sw), (ph, pw), extra
                              if max(extra) < max(sh, sw, dh, dw) else 0, c, (dh, dw), False)
    if tuple(out.shape[-2:]) != (oh, ow):
        out = F.pad(out, (0, ow - out.shape[-1], 0, oh - out.shape[-2]))
    return out if input.ndim == 3 else O.squeeze(out, 0)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Softmax of (logits + Gumbel noise) / tau; hard=True gives one-hot samples whose gradient is
    the soft sample's (the straight-through estimator), as torch."""
    if not logits.dtype.is_floating_point:    # (tracegrad's draws gave NaN)
        raise RuntimeError(f"Exponential distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {D.SCALAR_NAME[logits.dtype]}")
    gumbels = -O.log(empty_like(logits, dtype=logits.dtype).exponential_())
    y_soft = O.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = O.argmax(y_soft, dim, keepdim=True)
    y_hard = O.scatter(O.zeros_like(logits), dim, index, value=1.0)
    return y_hard - y_soft.detach() + y_soft


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) dims, as
    torch.nn.functional.rms_norm: 16-bit inputs computed in float32 and rounded once, eps by
    default the machine epsilon of that computing dtype."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(f"rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not "
                        f"{type(normalized_shape).__name__}")
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*{', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    x, dt = F._opmath(F._dense(input, channels_last=True))
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    out = x * O.rsqrt(O.mean(x * x, dims, keepdim=True) + eps)
    if weight is not None:
        out = out * F._affine(weight, dt)
        if dt is None and out.dtype is not input.dtype:
            out = out.to(input.dtype)        # (torch's result keeps the input's dtype beside a float64 weight)
    return F._rounded(out, dt)


def _no_half(input, kernel):
    """torch's refusal where its CPU kernel takes float and double alone."""
    if input.dtype is D.float16 or input.dtype is D.bfloat16:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of squares over `size` neighbouring channels) ** beta, as
    torch.nn.functional.local_response_norm (the window padded with zeros, size // 2 before)."""
    if input.ndim < 3:
        # torch's message, with the run of spaces its source's line break leaves
        raise ValueError(f"Expected 3D or higher dimensionality{' ' * 26}input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    if input.ndim > 3:
        # (torch's pools a 4-d or wider input's squares with avg_pool3d, whose kernel takes no half types)
        _no_half(input, "avg_pool3d_out_frame")
    sizes = tuple(input.shape)
    div = (input * input).reshape(sizes[0], 1, sizes[1], -1)            # channels as a height
    div = F.pad(div, (0, 0, size // 2, (size - 1) // 2))
    div = F._avg_pool2d(div, (size, 1), 1, 0, False, True, None, False).reshape(sizes)
    return input / (div * alpha + k) ** beta


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x ** p) ** (1 / p), as torch's lp_pool1d (an average pool of x ** p
    times the window's size)."""
    kw = _single(kernel_size)
    out = avg_pool1d(input ** norm_type, kw, stride, 0, ceil_mode)
    return ((O.sign(out) * F.relu(O.abs(out))) * kw) ** (1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kh, kw = (tuple(kernel_size) if isinstance(kernel_size, (tuple, list)) else (kernel_size, kernel_size))
    out = F.avg_pool2d(input ** norm_type, (kh, kw), stride, 0, ceil_mode)
    return ((O.sign(out) * F.relu(O.abs(out))) * (kh * kw)) ** (1.0 / norm_type)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution over NCL input, as a 2-D one over an added height of one."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, but got input of "
                           f"size: {list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"weight should have 3 dimensions for conv_transpose1d, got {weight.ndim}")
    if input.ndim == 2:                 # unbatched: a batch of one, as torch (a SqueezeBackward1 node)
        return O.squeeze(conv_transpose1d(O.unsqueeze(input, 0), weight, bias, stride, padding, output_padding,
                                          groups, dilation), 0)
    one = lambda v, first=1: (first, v[0] if isinstance(v, (tuple, list)) else v)      # noqa: E731
    out = F._conv_transpose2d(O.unsqueeze(input, -2), O.unsqueeze(weight, 2), bias, one(stride), one(padding, 0),
                              one(output_padding, 0), groups, one(dilation), False)
    return F._conv_saved(O.squeeze(out, -2), input, weight, bias)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn uniformly from [lower, upper] per element in
    training, (lower + upper) / 2 otherwise, as torch.nn.functional.rrelu."""
    F._float_only("leaky_relu_cpu", input)
    if training:
        slope = rand_like(input) * (upper - lower) + lower
        compute = lambda v: rename_grad_fn(O.where(v > 0, v, v * slope), "RreluWithNoiseBackward0")  # noqa: E731
    else:
        # leaky_relu's slope and derivative (its first gradient requires grad, as torch's)
        s = (lower + upper) / 2
        compute = lambda v: F._piecewise(v, lambda x: O.where(x > 0, x, x * s), "RreluWithNoiseBackward0",  # noqa
                                         "RreluWithNoiseBackwardBackward0", lo=0.0, outside=s)
    # (torch writes the result into a C-contiguous tensor, whatever the input's layout)
    return F._inplace(input, lambda v: compute(F._dense(v)), inplace, "RreluWithNoiseBackward1")


def _channel_dropout(input, p, training, inplace, batched):
    """Zero whole channels with probability p, scale the others by 1 / (1 - p): the mask has the
    input's (batch and) channel dims and size 1 elsewhere, drawn as F.dropout draws."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    mask = F.dropout(ones(shape, dtype=input.dtype, device=input.device), p, True)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input, p=0.5, training=True, inplace=False):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(input, p, training, inplace, input.ndim == 3)


def _warn_dims(name, ndim, spatial):
    """torch's warning for channel dropout of an input without (batch,) channel and `spatial` dims."""
    if ndim not in (spatial + 1, spatial + 2):
        warnings.warn(f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that {name} exists to provide channel-wise dropout on inputs with "
                      f"{spatial} spatial dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      f"{spatial + 1}D or {spatial + 2}D inputs).", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    _warn_dims("dropout2d", input.ndim, 2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=2)
    return _channel_dropout(input, p, training, inplace, input.ndim >= 3)


def dropout3d(input, p=0.5, training=True, inplace=False):
    _warn_dims("dropout3d", input.ndim, 3)
    return _channel_dropout(input, p, training, inplace, input.ndim != 4)


def channel_shuffle(input, groups):
    """(N, g * k, *) -> (N, k * g, *): channel i * k + j moves to j * g + i, as torch's."""
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    out = O.transpose(input.reshape((n, groups, c // groups) + rest), 1, 2)
    return F._suggested(out.reshape((n, c) + rest), input)


def bilinear(input1, input2, weight, bias=None):
    """out[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] (+ bias[o])."""
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    o, i, j = weight.shape
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, i), input2.reshape(-1, j)
    t = O.matmul(x1, O.permute(weight, (1, 0, 2)).reshape(i, o * j)).reshape(-1, o, j)
    out = O.sum(t * O.unsqueeze(x2, 1), -1).reshape(lead + (o,))
    return out + bias if bias is not None else out


# == losses ===========================================================================================

def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    # torch's shape checks (a 2-D target, or 1-D inputs beside a 1-D target, gave a number)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise RuntimeError(f"{target.ndim}D target tensor expects {target.ndim + 1}D input tensors, but found inputs "
                           f"with sizes {list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12
    prod = O.sum(input1 * input2, -1)
    mag = O.sqrt((O.sum(input1 * input1, -1) + eps) * (O.sum(input2 * input2, -1) + eps))
    cos = prod / mag
    zeros = O.zeros_like(cos)
    loss = O.where(target == 1, 1 - cos, zeros) + O.where(target == -1, O.clamp_min(cos - margin, 0), zeros)
    return F._reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    return F._reduce(O.clamp_min(-target * (input1 - input2) + margin, 0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    zeros = O.zeros_like(input)
    loss = O.where(target == 1, input, zeros) + O.where(target == -1, O.clamp_min(margin - input, 0), zeros)
    return F._reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    # torch's log1p(exp(-input * target)) with no threshold: softplus's took z for z > 20, which
    # was 30.0 where torch's is 30.000000000000092, and a gradient of -1 at -inf for torch's NaN
    # (torch's composite rounds each op, half precision too)
    # (torch's kernel has no derivative for the target: one that requires grad is refused, where
    # tracegrad gave it a gradient)
    F._weight_without_grad(target, "soft_margin_loss", "target")
    loss = O.log1p(O.exp(-input * target))
    if loss.dtype is not input.dtype:
        # torch writes -input * target into a tensor of the input's dtype (neg_out(input).mul_(target)):
        # tracegrad's float64 target made a float64 loss of float32 input
        loss = loss.to(input.dtype)
    # (torch's node saves input and target: either written before the backward raises)
    return keep_saved(rename_grad_fn(F._reduce(loss, reduction), "SoftMarginLossBackward0"), input, (target,))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    loss = -(target * F.logsigmoid(input) + (1 - target) * F.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = O.sum(loss, -1) / input.shape[-1]        # torch's sum / C (a DivBackward0 node)
    return F._reduce(loss, reduction)


def _margin_rows(input, target, op):
    """input as (N, C) and target as (N,) or (N, C): an unbatched call is a batch of one."""
    if input.ndim not in (1, 2) or input.ndim == 2 and input.shape[1] == 0:
        raise RuntimeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    one = input.ndim == 1
    return (O.unsqueeze(input, 0), O.unsqueeze(target, 0)) if one else (input, target), one


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge loss: per sample, the sum over classes j != y of max(0, margin - x[y] +
    x[j]) ** p (times weight[y]) over C, as torch.nn.functional.multi_margin_loss."""
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    (x, y), one = _margin_rows(input, target, "multi_margin_loss")
    n, c = x.shape
    if tuple(y.shape) != (n,):
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{n}], but got {list(target.shape)}. Input has "
                           f"shape {list(input.shape)}.")
    _no_half(input, "multi_margin_loss_cpu_kernel")
    picked = O.gather(x, 1, O.unsqueeze(y, 1))                       # x[y], (N, 1)
    other = O.logical_not(F.one_hot(y, c).to(D.bool_))
    d = margin - picked + x
    # torch's kernel adds a term where z > 0: a NaN term counts as 0 (as its gradient), where relu
    # would carry it into the loss
    z = O.where(d > 0, d, O.zeros_like(d))
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * O.unsqueeze(O.index_select(weight, 0, y), 1)
    loss = O.sum(O.where(other, h, O.zeros_like(h)), 1) / c
    if one:
        loss = loss.reshape(())
    return rename_grad_fn(F._reduce(loss, reduction), "MultiMarginLossBackward0", inputs=(input,))  # (not weight)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: target lists each sample's classes, up to its first -1; per sample,
    the sum over listed j and unlisted k of max(0, 1 - (x[j] - x[k])) over C, as
    torch.nn.functional.multilabel_margin_loss."""
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    (x, t), one = _margin_rows(input, target, "multilabel_margin_loss")
    if tuple(t.shape) != tuple(x.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _no_half(input, "multilabel_margin_loss_forward_out_frame")
    n, c = x.shape
    listed = O.cumprod((t != -1).to(D.int64), 1)                     # 1 up to the first -1
    counts = O.sum(F.one_hot(O.clamp_min(t, 0), c) * O.unsqueeze(listed, 2), 1)   # (N, C): times listed
    is_target = counts > 0
    z = F.relu(1 - O.unsqueeze(x, 2) + O.unsqueeze(x, 1))             # [n, j, k] = max(0, 1 - x[j] + x[k])
    pairs = O.unsqueeze(counts.to(x.dtype), 2) * O.unsqueeze(O.logical_not(is_target).to(x.dtype), 1)
    loss = O.sum(z * pairs, (1, 2)) / c
    if one:
        loss = loss.reshape(())
    return rename_grad_fn(F._reduce(loss, reduction), "MultilabelMarginLossBackward0")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    d_pos = F.pairwise_distance(anchor, positive, p, eps)
    d_neg = F.pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = O.minimum(d_neg, F.pairwise_distance(positive, negative, p, eps))
    return F._reduce(O.clamp_min(margin + d_pos - d_neg, 0), reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full);
    the clamp is made without autograd, so var's gradient passes it unchanged, as torch's."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if var.ndim == input.ndim - 1 or (var.shape != input.shape and var.ndim == input.ndim and var.shape[-1] == 1):
        if var.ndim == input.ndim - 1:
            var = O.unsqueeze(var, -1)
    if bool((var.detach() < 0).any()):
        raise ValueError("var has negative entry/entries")
    with no_grad():
        clamped = O.clamp_min(var, eps)
    if var.requires_grad:
        # the clamped values with var's gradient, where the clamp moves var (var + (clamped - var) everywhere
        # was inf + (inf - inf) = NaN at var = inf, whose loss is torch's inf)
        low = (var < eps).detach()
        var = O.where(low, var + (clamped - var).detach(), var)
    else:
        var = clamped
    loss = 0.5 * (O.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return F._reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = F._legacy_reduction(size_average, reduce, reduction)
    if log_input:
        loss = O.exp(input) - target * input
    else:
        loss = input - target * O.log(input + eps)
    if full:
        stirling = target * O.log(target) - target + 0.5 * O.log(2 * math.pi * target)
        loss = loss + O.where(target > 1, stirling, O.zeros_like(stirling))
    return F._reduce(loss, reduction)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embeddings: rows of a 2-D input, or runs of a 1-D input
    starting at `offsets`. Each index's bag comes from a cumulative sum over the offsets and the
    rows are added into their bag (index_add), so it traces and differentiates like its parts;
    padding_idx entries count in no bag, an empty bag is zeros (torch's)."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  f"GitHub.")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag(scale_grad_by_freq=True or sparse=True) is not supported")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        b, n = input.shape
        flat = input.reshape(-1)
        bag = O.floor_divide(arange(b * n), n)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        flat, psw = input, per_sample_weights
        starts = offsets[:-1] if include_last_offset else offsets
        b = starts.shape[0]
        n_idx = flat.shape[0]
        # bag of position i: the number of bag starts at or before i, less one
        marks = O.scatter_add(zeros(n_idx + 1, dtype=D.int64), 0, O.clamp(starts, max=n_idx),
                              O.ones_like(starts, dtype=D.int64))
        bag = O.cumsum(marks, 0)[:n_idx] - 1
        if include_last_offset:
            bag = O.where(arange(n_idx) >= offsets[-1], O.full((), -1, dtype=D.int64), bag)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if max_norm is not None:
        # torch's: every row an index picks (padding and those outside the bags too) renormalized
        # in place, before the lookup
        F._embedding_renorm_(weight, input, max_norm, norm_type)
    rows = F.embedding(flat, weight)                                     # (n, D)
    keep = bag >= 0
    if padding_idx is not None:
        keep = O.logical_and(keep, flat != padding_idx)
    if psw is not None:
        rows = rows * O.unsqueeze(psw, -1)
    safe_bag = O.where(keep, bag, O.zeros_like(bag))
    if mode == "max":
        member = O.logical_and(O.unsqueeze(safe_bag, 0) == arange(b).reshape(b, 1), O.unsqueeze(keep, 0))  # (b, n)
        vals = O.where(O.unsqueeze(member, -1), O.unsqueeze(rows, 0), float("-inf"))
        # each bag's first maximum per column, gathered: its gradient goes there whole, as torch's
        # (an amax shared it among equal maxima)
        pick = O.argmax(vals, 1)                                               # (b, D)
        # a column whose members are all -inf: argmax may name a non-member; torch's is the first
        first = O.unsqueeze(O.argmax(member.to(D.int64), 1), -1)              # (b, 1)
        pick = O.where(O.amax(vals.detach(), 1) == float("-inf"), first, pick)
        out = O.gather(rows, 0, pick)
        return O.where(O.unsqueeze(O.any(member, 1), -1), out, O.zeros_like(out))
    rows = O.where(O.unsqueeze(keep, -1), rows, O.zeros_like(rows))
    out = O.index_add(zeros(b, weight.shape[1], dtype=weight.dtype), 0, safe_bag, rows)
    if mode == "mean":
        count = O.index_add(zeros(b, dtype=weight.dtype), 0, safe_bag, keep.to(weight.dtype))
        out = out / O.unsqueeze(O.clamp_min(count, 1), -1)
    return out


def _base_coords(n, align_corners, dtype):
    if align_corners:
        return (arange(n, dtype=dtype) * (2.0 / (n - 1)) - 1.0) if n > 1 else O.zeros_like(arange(n, dtype=dtype))
    return (arange(n, dtype=dtype) * 2.0 + 1.0) / n - 1.0


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of 2-D affine maps: (N, H, W, 2) = base grid @ theta^T."""
    if align_corners is None:
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) != 4:
        raise NotImplementedError("affine_grid only supports 4D sizes, for 2D affine transformations (5D volumes "
                                  "are not implemented yet)")
    n, _, h, w = size
    if tuple(theta.shape) != (n, 2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {list(size)}. Got "
                         f"{list(theta.shape)}.")
    xs = O.expand(_base_coords(w, align_corners, theta.dtype).reshape(1, w), h, w)
    ys = O.expand(_base_coords(h, align_corners, theta.dtype).reshape(h, 1), h, w)
    base = O.stack([xs, ys, ones(h, w, dtype=theta.dtype)], -1).reshape(1, h * w, 3)
    return O.matmul(base, O.transpose(theta, 1, 2)).reshape(n, h, w, 2)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) read at grid (N, Ho, Wo, 2) of (x, y) in [-1, 1]: bilinear weights of
    the four neighbours (or the nearest one), outside pixels zero ("zeros") or the edge's
    ("border"). A gather per neighbour, so the gradient reaches input and grid."""
    if align_corners is None:
        align_corners = False
    if grid.dtype is not input.dtype:          # (tracegrad promoted)
        raise RuntimeError(f"expected scalar type {D.SCALAR_NAME[input.dtype]} but found {D.SCALAR_NAME[grid.dtype]}")
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"grid_sample(mode={mode!r}): only 'bilinear' and 'nearest' are implemented")
    if padding_mode not in ("zeros", "border"):
        raise NotImplementedError(f"grid_sample(padding_mode={padding_mode!r}): only 'zeros' and 'border' are "
                                  f"implemented")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise NotImplementedError("grid_sample: only 4-D input with a (N, H, W, 2) grid is implemented")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]

    def unnormalize(coord, size):
        if align_corners:
            out = (coord + 1) / 2 * (size - 1)
        else:
            out = ((coord + 1) * size - 1) / 2
        if padding_mode == "border":
            out = O.clamp(out, 0, size - 1)
        return out
    ix = unnormalize(grid[..., 0], w)
    iy = unnormalize(grid[..., 1], h)
    flat = input.reshape(n, c, h * w)

    def pick(xi, yi):
        valid = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
        xc = O.clamp(xi, 0, w - 1).to(D.int64)
        yc = O.clamp(yi, 0, h - 1).to(D.int64)
        idx = (yc * w + xc).reshape(n, 1, ho * wo)
        vals = O._gather(flat, 2, O.expand(idx, n, c, ho * wo)).reshape(n, c, ho, wo)
        return O.where(O.unsqueeze(valid, 1), vals, O.zeros_like(vals))
    if mode == "nearest":
        out = pick(O.round(ix).detach(), O.round(iy).detach())
        # connected to grid with a zero gradient, as torch's (rounding is flat)
        return _grid_sampled(O.where(O.zeros_like(out, dtype=D.bool_), O.unsqueeze(ix + iy, 1), out), input, grid)
    x0, y0 = O.floor(ix).detach(), O.floor(iy).detach()
    x1, y1 = x0 + 1, y0 + 1
    wx1, wy1 = ix - x0, iy - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    out = pick(x0, y0) * O.unsqueeze(wx0 * wy0, 1) + pick(x1, y0) * O.unsqueeze(wx1 * wy0, 1)
    return _grid_sampled(out + pick(x0, y1) * O.unsqueeze(wx0 * wy1, 1) + pick(x1, y1) * O.unsqueeze(wx1 * wy1, 1),
                         input, grid)


def _grid_sampled(out, input, grid):
    """torch's node for grid_sample saves input and grid (whichever requires grad): one written
    before the backward raises, named as itself (not as the flattened view the picks read)."""
    if out.__class__ is Proxy or out._grad_fn is not None:
        keep_saved(rename_grad_fn(out, "GridSampler2DBackward0"), input, (grid,))
    return out


# -- CTC (the primitives in ops/ctc_primitives.py) -------------------------------------------------------

def _lengths(v):
    """(the lengths as a list of ints, as an int64 vector): a tensor's values are read (a compiled
    function reads a captured one as a constant of its program, guarded)."""
    if isinstance(v, O.Tensor):
        values = v.tolist()
        return ([int(x) for x in values] if isinstance(values, list) else [int(values)],
                v.detach().to(D.int64).reshape(-1))
    values = [int(x) for x in v]
    return values, O.tensor(values, dtype=D.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The connectionist temporal classification loss of log_probs (T, N, C) (or (T, C)) against
    targets (N, S) padded or concatenated 1-D, each sample's frames and labels counted by
    input_lengths and target_lengths; "mean" divides each loss by its target length (at least 1)
    and averages. zero_infinity: impossible alignments give 0 and no gradient. Its gradient is
    torch's (see ops/ctc_primitives.py); it has no second derivative, as torch's."""
    unbatched = log_probs.ndim == 2
    lp = O.unsqueeze(log_probs, 1) if unbatched else log_probs
    tg = targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets
    (lengths_in, il), (lengths_t, tl) = _lengths(input_lengths), _lengths(target_lengths)
    T_, n, C = lp.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if not tg.dtype.is_floating_point and tg.dtype is not D.int64 or tg.dtype.is_floating_point:
        tg = tg.detach().to(D.int64)
    if lengths_in and max(lengths_in) > T_:
        raise RuntimeError(f"Expected input_lengths to have value at most {T_}, but got value "
                           f"{max(lengths_in)} (while checking arguments for ctc_loss_allocate_outputs)")
    longest = max(lengths_t) if lengths_t else 0
    if tg.ndim == 2 and tg.shape[1] < longest:
        raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                           f"{tg.shape[1]} for argument #2 'targets' (while checking arguments for "
                           f"ctc_loss_allocate_outputs)")
    _no_half(lp, "ctc_loss_cpu")
    nll, _ = _apply(_P["ctc_loss"], (lp, tg.detach(), il, tl),
                            {"blank": int(blank), "longest": longest, "zero_infinity": bool(zero_infinity)})
    if zero_infinity:
        nll = O.where(nll == float("inf"), O.zeros_like(nll), nll)
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    if reduction == "sum":
        return O.sum(nll)
    if reduction == "mean":
        return O.mean(nll / O.clamp(tl, min=1).to(nll.dtype))
    raise ValueError(f"{reduction} is not a valid value for reduction")


__all__ += ["ctc_loss"]


# == fractional max pooling ============================================================================

def _fractional_starts(u, n_in, n_out, k, dt):
    """torch's window starts along one dim from a plane's sample u in [0, 1): the pseudo-random
    sequence of Graham's fractional max-pooling, int((i + u) * alpha) - int(u * alpha) with alpha =
    (n_in - k) / (n_out - 1), computed in the input's dtype (float32 for the half types) as torch's
    kernel does, and the last window ending at the input's end. u: an array of samples."""
    starts = np.empty(u.shape + (n_out,), np.int64)
    if n_out > 1:
        alpha = dt(n_in - k) / dt(n_out - 1)
        base = (u * alpha).astype(np.int64)
        for i in range(n_out - 1):
            starts[..., i] = ((dt(i) + u) * alpha).astype(np.int64) - base
    starts[..., n_out - 1] = n_in - k
    return starts


def _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, samples, nd):
    name = f"fractional_max_pool{nd}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if samples is None:
        # (drawn before the input's checks, as torch's Python wrapper: a 2-d input's size(-3) raises there)
        n_batch = 1 if input.ndim == nd + 1 else input.size(0)
        samples = rand((n_batch, input.size(-(nd + 1)), nd), dtype=input.dtype)    # (tracegrad's generator)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}_out_frame\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    kernel = tuple(kernel_size) if isinstance(kernel_size, (tuple, list)) else (int(kernel_size),) * nd
    spatial = tuple(input.shape[-nd:])
    if output_size is None:
        ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * nd
        output_size = tuple(int(n * r) for n, r in zip(spatial, ratio))
    out = tuple(output_size) if isinstance(output_size, (tuple, list)) else (int(output_size),) * nd
    dims = ("time", "height", "width")[3 - nd:]
    checks = list(zip(dims, spatial, kernel, out))
    for d, n, k, o in (checks if nd == 2 else [checks[0], checks[2], checks[1]]):    # (torch's order)
        # (torch's 3-d check is strict: the last window may not reach the input's end there)
        if o + k - 1 > n or nd == 3 and o + k - 1 == n:
            raise RuntimeError(f"{name}{'_out' if nd == 3 else ''}(): pool {d} {k} too large relative to input "
                               f"{d} {n}")
    batched = input.ndim == nd + 2
    x = input if batched else O.unsqueeze(input, 0)
    n, c = x.shape[0], x.shape[1]
    if samples.dtype is not input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.ndim != 3 or samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {samples.shape[-1]}.")
    if isinstance(samples, Proxy) or isinstance(x, Proxy):
        raise TraceError(f"{name}: its windows are chosen by the random samples' values; not traced")
    dt = np.float64 if input.dtype is D.float64 else np.float32
    u = np.asarray(samples.detach().float()._data if input.dtype is not D.float64 else samples.detach()._data, dt)
    # torch's kernel reads a plane's samples as (width, height) for 2-d, (time, height, width) for 3-d
    order = [1, 0] if nd == 2 else [0, 1, 2]
    strides = [math.prod(spatial[i + 1:]) for i in range(nd)]
    flat = np.zeros((n, c) + (1,) * (2 * nd), np.int64)
    for i in range(nd):
        st = _fractional_starts(u[:, :, order[i]], spatial[i], out[i], kernel[i], dt)    # (n, c, o_i)
        pos = st[..., None] + np.arange(kernel[i])                                           # (n, c, o_i, k_i)
        shape = [n, c] + [1] * (2 * nd)
        shape[2 + i], shape[2 + nd + i] = out[i], kernel[i]
        flat = flat + (pos * strides[i]).reshape(shape)
    flat = flat.reshape(n, c, *out, -1)                                   # windows' elements in scan order
    idx = from_numpy(np.ascontiguousarray(flat))
    vals = O.gather(x.reshape(n, c, -1), 2, idx.reshape(n, c, -1)).reshape(n, c, *out, flat.shape[-1])
    arg = torch_max_position(vals, -1)
    values = O.squeeze(O.gather(vals, -1, arg), -1)
    indices = O.squeeze(O.gather(idx, -1, arg), -1)
    if not batched:
        values, indices = O.squeeze(values, 0), O.squeeze(indices, 0)
    values = rename_grad_fn(keep_saved(values, input), f"FractionalMaxPool{nd}DBackward0")
    return (values, indices) if return_indices else values


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """The maximum over pseudo-random windows of kernel_size whose starts spread output_size of them
    over the input (Graham's fractional max-pooling, torch's sequence from each plane's samples)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3)


__all__ += ["fractional_max_pool2d", "fractional_max_pool3d"]


# torch.nn.functional is one namespace: these functions join nn.functional's as this module is
# imported (nn/__init__ imports it right after nn.functional), so that nn.functional, which
# they are built on, need not import them back.
for _name in __all__:
    setattr(F, _name, globals()[_name])
del _name

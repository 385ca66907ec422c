"""torch.* functions that are other functions under torch's conventions: the torch.* forms of
nn.functional's ops (with aten's argument order and integer reductions), the in-place function
forms (torch.relu_(x) is x.relu_()), the *_copy forms of the view ops, the type predicates,
window functions, unravel_index, combinations and scalar_tensor."""
import builtins
import itertools
import math
import warnings

import numpy as np

from . import _dtype as D
from .tensor import Tensor, device
from .creation import tensor, empty, zeros, linspace, bernoulli, RNG, takes_generator
from .tracing import rename_grad_fn, apply
from .ops.primitives import PRIMITIVES
from .ops import igamma_primitives  # noqa: F401  (registers the gamma draw's primitives)
from .ops import dirichlet_primitives  # noqa: F401  (registers the Dirichlet draw's primitives)
from .ops import functional as O
from .nn import functional as F
from .ops.composite_more import multi_dot

__all__ = []


def _export(fn, name=None):
    name = name or fn.__name__
    fn.__name__ = fn.__qualname__ = name
    globals()[name] = fn
    __all__.append(name)
    return fn


# -- nn.functional's ops as torch.* names them ----------------------------------------------------------

for _name in ("conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d",
              "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "prelu", "selu", "celu", "threshold", "rrelu",
              "cosine_similarity", "pairwise_distance", "bilinear", "rms_norm"):
    globals()[_name] = getattr(F, _name)
    __all__.append(_name)


@_export
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


@_export
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


@_export
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@_export
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


@_export
def dropout(input, p, train):
    return F.dropout(input, p, train)


@_export
def alpha_dropout(input, p, train):
    return F.alpha_dropout(input, p, train)


@_export
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return F.embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _reduction(r):
    """aten's integer reduction: 1 the mean, 2 the sum, any other value none (as its
    apply_loss_reduction)."""
    return {1: "mean", 2: "sum"}.get(r, "none")


@_export
def kl_div(input, target, reduction=1, *, log_target=False):
    return F.kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


@_export
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                              pos_weight=pos_weight)


@_export
def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


@_export
def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


@_export
def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


@_export
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=1):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


@_export
def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


# -- in-place function forms: torch.relu_(x) is x.relu_() ------------------------------------------------

def _inplace_function(name):
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):
        return method(input, *args, **kwargs)
    return _export(fn, name)


for _name in ("relu_", "sigmoid_", "tanh_", "exp_", "exp2_", "expm1_", "log_", "log2_", "log10_", "log1p_", "abs_",
              "neg_", "negative_", "sqrt_", "rsqrt_", "square_", "sin_", "cos_", "tan_", "asin_", "acos_", "atan_",
              "sinh_", "cosh_", "asinh_", "acosh_", "atanh_", "arcsin_", "arccos_", "arctan_", "arcsinh_", "arccosh_",
              "arctanh_", "erf_", "erfc_", "ceil_", "floor_", "round_", "trunc_", "fix_", "frac_", "reciprocal_",
              "clamp_", "clamp_min_", "clamp_max_", "clip_", "fill_", "zero_", "deg2rad_", "rad2deg_", "logit_",
              "sinc_", "i0_", "nan_to_num_", "xlogy_", "gcd_", "lcm_", "ldexp_", "selu_", "celu_", "threshold_",
              "rrelu_", "detach_", "index_put_"):
    if hasattr(Tensor, _name):
        _inplace_function(_name)


# -- *_copy: a view op's result as a new tensor ----------------------------------------------------------

def _copy_function(name, view):
    def fn(input, *args, **kwargs):
        r = view(input, *args, **kwargs)
        if isinstance(r, (tuple, list)):
            return type(r)(t.clone() for t in r) if isinstance(r, tuple) else [t.clone() for t in r]
        return r.clone()
    return _export(fn, name)


for _name, _view in (("expand_copy", Tensor.expand), ("permute_copy", Tensor.permute), ("view_copy", Tensor.view),
                     ("transpose_copy", Tensor.transpose), ("t_copy", Tensor.t), ("unsqueeze_copy", Tensor.unsqueeze),
                     ("squeeze_copy", Tensor.squeeze), ("detach_copy", Tensor.detach),
                     ("diagonal_copy", Tensor.diagonal), ("select_copy", Tensor.select),
                     ("split_copy", Tensor.split), ("unbind_copy", Tensor.unbind), ("alias_copy", Tensor.view_as),
                     ("unfold_copy", Tensor.unfold), ("indices_copy", None), ("values_copy", None)):
    if _view is not None:
        _copy_function(_name, _view if _name != "alias_copy" else (lambda x: x.view_as(x)))


@_export
def slice_copy(input, dim=0, start=None, end=None, step=1):
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    return input[tuple(key)].clone()


@_export
def unsafe_chunk(input, chunks, dim=0):
    return O.chunk(input, chunks, dim)


@_export
def unsafe_split(tensor, split_size_or_sections, dim=0):
    return O.split(tensor, split_size_or_sections, dim)


Tensor.unsafe_chunk = unsafe_chunk
Tensor.unsafe_split = unsafe_split


def _to_dense(self, dtype=None, *, masked_grad=None):
    """A strided tensor is dense already: itself (or a cast), as torch's."""
    return self if dtype is None else self.to(dtype)


Tensor.to_dense = _to_dense


# -- predicates and small constructors -------------------------------------------------------------------

@_export
def is_complex(input):
    return input.is_complex()


@_export
def is_signed(input):
    return input.is_signed()


@_export
def is_nonzero(input):
    return input.is_nonzero()


@_export
def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


@_export
def typename(obj):
    """The type's name torch gives: 'torch.FloatTensor' for a tensor, module.qualname otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(type(obj), "__module__", "")
    name = type(obj).__qualname__
    return name if module in ("builtins", "__builtin__", None, "") else f"{module}.{name}"


@_export
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    return tensor(float(s) if dtype is None else s, dtype=dtype or D.get_default_dtype(), device=device,
                  requires_grad=requires_grad)


@_export
def unravel_index(indices, shape):
    """The coordinates of flat indices in an array of `shape` (C order), one tensor per dim."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"expected 'indices' to be a tensor, but got {type(indices)}")
    if indices.dtype.is_floating_point or indices.dtype is D.bool_:
        raise TypeError(f"expected 'indices' to be an integer tensor, but got {D.SCALAR_NAME[indices.dtype]}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(shape))
    total = math.prod(shape)
    flat = indices.numpy()
    if total:
        flat = np.mod(flat, total)             # (torch's: each coordinate modulo its size, no range check)
    return tuple(tensor(c.astype(np.int64)) for c in np.unravel_index(flat, shape)) if shape else ()


@_export
def combinations(input, r=2, with_replacement=False):
    """The r-length combinations of a 1-D tensor's elements (in itertools' order), as rows."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return empty(0, dtype=input.dtype)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(builtins.range(input.shape[0]), r))
    if not rows:
        return O.reshape(input[zeros(0, dtype=D.int64)], (0, r))
    idx = tensor(np.array(rows, dtype=np.int64))
    return input[idx]


# -- window functions ------------------------------------------------------------------------------------

def _window(name, formula):
    """A window function; `formula(n, dtype, *args)` computes its n points in the dtype, in torch's
    order of operations (its float32 windows round each step)."""
    def fn(window_length, periodic=True, *args, dtype=None, layout=None, device=None, requires_grad=False,
           pin_memory=False):
        dtype = dtype or D.get_default_dtype()
        if not dtype.is_floating_point:
            raise RuntimeError(f"{name} expects floating point dtypes, got: {D.SCALAR_NAME[dtype]}")
        if window_length < 0:
            raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
        if window_length == 0:
            return empty(0, dtype=dtype, device=device, requires_grad=requires_grad)
        if window_length == 1:
            return tensor([1.0], dtype=dtype, device=device, requires_grad=requires_grad)
        n = window_length + 1 if periodic else window_length
        w = formula(n, np.dtype(dtype.np).type, *args)[:window_length]
        return tensor(np.asarray(w).astype(dtype.np), dtype=dtype, device=device, requires_grad=requires_grad)
    return _export(fn, name)


def _hamming(n, dt, alpha=0.54, beta=0.46):
    k = np.arange(n, dtype=dt) * dt(2 * math.pi / (n - 1))
    return np.cos(k) * dt(-beta) + dt(alpha)


def _blackman(n, dt):
    k = np.arange(n, dtype=dt) * dt(math.pi / (n - 1))
    return np.cos(k * dt(4)) * dt(0.08) - np.cos(k * dt(2)) * dt(0.5) + dt(0.42)


def _bartlett(n, dt):
    w = np.arange(n, dtype=dt) * dt(2.0 / (n - 1))
    half = ((n - 1) >> 1) + 1
    w[half:] = w[half:] * dt(-1) + dt(2)
    return w


def _kaiser(n, dt, beta=12.0):
    k = np.arange(n, dtype=np.float64)
    a = (n - 1) / 2
    return np.i0(beta * np.sqrt(np.clip(1 - ((k - a) / a) ** 2, 0, None))) / np.i0(beta)


_window("hann_window", lambda n, dt: _hamming(n, dt, 0.5, 0.5))
_window("hamming_window", _hamming)
_window("blackman_window", _blackman)
_window("bartlett_window", _bartlett)
_window("kaiser_window", _kaiser)


@_export
def chain_matmul(*matrices, out=None):
    """The product of the matrices (linalg.multi_dot's order), torch's deprecated form."""
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(list(matrices))


del _name, _view


# -- histogram, gradient, poisson ------------------------------------------------------------------------

_Histogram = O._pair_type("histogram", "hist", "bin_edges")
_C_DTYPE = {D.float64: "double", D.float32: "float", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
            D.int64: "long int", D.int32: "int", D.int16: "short int", D.int8: "signed char", D.uint8: "unsigned char",
            D.bool_: "bool"}


@_export
def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): counts (or the sum of `weight`) of input's values in each bin, the last
    bin closed, as torch's; int bins: equal widths over `range` (input's min and max by default,
    widened by 0.5 each side where they are equal) in input's dtype, as torch's linspace; a tensor:
    the edges. density divides by the total and the bin widths. Not differentiable (torch's)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"histogram(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point or input.dtype in (D.float16, D.bfloat16):
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                           f"input tensor excluding its innermost dimension, but got input with shape "
                           f"{list(input.shape) + [1]} and weight with shape {list(weight.shape)}")
    x = input.detach().numpy().reshape(-1)
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got {bins.ndim} "
                               f"dimensions in the bins tensor for dimension 0")
        if bins.dtype is not input.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {_C_DTYPE[input.dtype]} and bins for dimension 0 with dtype "
                               f"{_C_DTYPE[bins.dtype]}")
        edges = bins.detach()
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif x.size:
            lo, hi = float(x.min()), float(x.max())
        else:
            lo, hi = 0.0, 1.0               # (torch's edges of an empty input)
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} for "
                               f"dimension 0")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{lo:g}, {hi:g}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = linspace(lo, hi, bins + 1, dtype=input.dtype)
    e = edges.numpy()
    w = None if weight is None else weight.detach().numpy().reshape(-1)
    keep = (x >= e[0]) & (x <= e[-1])
    # the bin of each value: the last edge at or below it, the last bin closed (numpy's and torch's)
    idx = np.clip(np.searchsorted(e, x[keep], side="right") - 1, 0, len(e) - 2)
    hist = np.bincount(idx, weights=None if w is None else w[keep], minlength=len(e) - 1).astype(x.dtype)
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * np.diff(e))
    return _Histogram(tensor(hist.astype(x.dtype, copy=False), dtype=input.dtype), edges.clone())


Tensor.histogram = histogram


def _slice(t, dim, start, stop=None):
    n = t.shape[dim]
    start = start + n if start < 0 else start
    stop = n if stop is None else stop + n if stop < 0 else stop
    return O.narrow(t, dim, start, stop - start)


@_export
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Estimates of input's derivative along each dim by central differences in the interior and
    one-sided ones (edge_order 1 or 2) at the ends, for unit or scalar spacing or coordinates per
    dim, as torch's (in its order of operations). A tuple, one tensor per dim; differentiable."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2.")
    nd = input.ndim
    if dim is None:
        dims = list(builtins.range(nd))
    elif isinstance(dim, int):
        dims = [dim % nd if nd else dim]
    else:
        dims = [d % nd for d in dim]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                               f"equal to 'self.dim() = {nd}', since dim argument was not given, but got a list of "
                               f"length {len(spacing)}" if dim is None else
                               f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError(f"torch.gradient expected each dimension size to be at least edge_order+1")
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    out = []
    for d, h in zip(dims, spacings):
        if isinstance(h, Tensor) and h.ndim == 1:
            out.append(_gradient_coordinates(x, d, h.to(x.dtype) if not h.dtype.is_floating_point else h,
                                             edge_order))
            continue
        h = h.item() if isinstance(h, Tensor) else h
        center = (_slice(x, d, 2) - _slice(x, d, 0, -2)) / h
        if edge_order == 1:
            pre = (_slice(x, d, 1, 2) - _slice(x, d, 0, 1)) / h
            app = (_slice(x, d, -1) - _slice(x, d, -2, -1)) / h
        else:
            pre = (_slice(x, d, 0, 1) * -1.5 + _slice(x, d, 1, 2) * 2 + _slice(x, d, 2, 3) * -0.5) / h
            app = (_slice(x, d, -3, -2) * 0.5 + _slice(x, d, -2, -1) * -2 + _slice(x, d, -1) * 1.5) / h
        out.append(O.cat([pre, center / 2, app], d))
    return tuple(out)




def _gradient_coordinates(x, d, coords, edge_order):
    if coords.shape[0] != x.shape[d]:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device, and have the same size "
                           f"as the input's dimension {d}: {coords.shape[0]} vs {x.shape[d]}")
    shape = [1] * x.ndim
    shape[d] = -1
    dx = coords[1:] - coords[:-1]
    dx1, dx2 = dx[:-1], dx[1:]
    a = (-dx2 / (dx1 * (dx1 + dx2))).reshape(shape)
    b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
    c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
    center = a * _slice(x, d, 0, -2) + b * _slice(x, d, 1, -1) + c * _slice(x, d, 2)
    if edge_order == 1:
        pre = (_slice(x, d, 1, 2) - _slice(x, d, 0, 1)) / dx[0]
        app = (_slice(x, d, -1) - _slice(x, d, -2, -1)) / dx[-1]
    else:
        a = -(2.0 * dx[0] + dx[1]) / (dx[0] * (dx[0] + dx[1]))
        b = (dx[0] + dx[1]) / (dx[0] * dx[1])
        c = (-dx[0]) / (dx[1] * (dx[0] + dx[1]))
        pre = a * _slice(x, d, 0, 1) + b * _slice(x, d, 1, 2) + c * _slice(x, d, 2, 3)
        a = dx[-1] / (dx[-2] * (dx[-1] + dx[-2]))
        b = -(dx[-1] + dx[-2]) / (dx[-1] * dx[-2])
        c = (2 * dx[-1] + dx[-2]) / (dx[-1] * (dx[-1] + dx[-2]))
        app = a * _slice(x, d, -3, -2) + b * _slice(x, d, -2, -1) + c * _slice(x, d, -1)
    return O.cat([pre, center, app], d)


@_export
def poisson(input, generator=None):
    """Poisson(rate) draws, one per element of input (the rates), in input's dtype; the gradient
    is zero, as torch's. Drawn from tracegrad's stream, not torch's."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{D.SCALAR_NAME[input.dtype]}'")
    rates = input.detach().numpy().astype(np.float64)
    if (rates < 0).any() or np.isnan(rates).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")

    @takes_generator
    def draw(generator=None):
        return RNG.gen.poisson(rates)
    values = tensor(draw(generator=generator).astype(np.float64), dtype=input.dtype)
    if input.requires_grad:              # (a node with a zero gradient, torch's PoissonBackward0)
        return rename_grad_fn(O.add(values, O.mul(input, 0)), "PoissonBackward0")
    return values


def _gamma_draws(alpha):
    """Gamma(alpha, 1) draws on the host, one per element, as torch's sampler answers them: at least
    the dtype's smallest normal number (a draw that rounds to 0), inf where alpha is, and that
    smallest number where alpha is not positive or is NaN."""
    draw = RNG.gen.standard_gamma       # (first: inside a compiled function, the random ops' refusal)
    a = alpha.detach().cpu().numpy().astype(np.float64)
    good = a > 0
    draws = np.full(a.shape, float(D.finfo(alpha.dtype).tiny))
    if good.any():
        draws[good] = draw(np.where(np.isinf(a[good]), 1.0, a[good]))
        draws[good & np.isinf(a)] = np.inf
    return np.maximum(draws.astype(alpha.dtype.np), D.finfo(alpha.dtype).tiny)


@_export
def _standard_gamma(input, generator=None):
    """Gamma(input, 1) draws (tracegrad's stream, not torch's), differentiable in input through the
    implicit function theorem (torch's StandardGammaBackward0: grad * _standard_gamma_grad(input,
    result))."""
    if input.dtype.is_floating_point and input.dtype.itemsize >= 4:
        draws = takes_generator(lambda generator=None: _gamma_draws(input))(generator=generator)
    else:
        draws = np.zeros(input.shape)           # (refused by the op's dtype rule before any kernel)
    return apply(PRIMITIVES["_standard_gamma"], (input, tensor(draws, dtype=input.dtype, device=input.device)), {})


@_export
def _standard_gamma_grad(input, output):
    """d output / d input of Gamma(input, 1) draws output (see ops/igamma_primitives.py)."""
    if input.dtype != output.dtype and input.dtype.is_floating_point and input.dtype.itemsize >= 4:
        raise RuntimeError(f"Found dtype {D.SCALAR_NAME[output.dtype]} but expected {D.SCALAR_NAME[input.dtype]}")
    return apply(PRIMITIVES["_standard_gamma_grad"], (input, output.detach()), {})


@_export
def _dirichlet_grad(x, alpha, total):
    """(dx/dalpha) / (1 - x) of Beta(alpha, total - alpha) draws x (see ops/dirichlet_primitives.py)."""
    for other in (alpha, total):
        if other.dtype != x.dtype and x.dtype.is_floating_point and x.dtype.itemsize >= 4:
            raise RuntimeError(f"Found dtype {D.SCALAR_NAME[other.dtype]} but expected {D.SCALAR_NAME[x.dtype]}")
    return apply(PRIMITIVES["_dirichlet_grad"], (x, alpha, total), {})


# -- more aten-level forms: the activations' in-place forms, pads, pools, norms, dropouts, cells -----------

@_export
def selu_(input):
    return F.selu(input, inplace=True)


@_export
def celu_(input, alpha=1.0):
    return F.celu(input, alpha, inplace=True)


@_export
def threshold_(input, threshold, value):
    return F.threshold(input, threshold, value, inplace=True)


@_export
def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return F.rrelu(input, lower, upper, training, inplace=True)


for _name in ("hardshrink", "conv3d", "conv_transpose3d", "max_pool3d", "pdist", "adaptive_avg_pool1d"):
    if hasattr(F, _name):
        globals()[_name] = getattr(F, _name)
        __all__.append(_name)


@_export
def adaptive_max_pool1d(input, output_size):
    """(values, indices), aten's form."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


@_export
def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode, return_indices=True)


@_export
def constant_pad_nd(input, pad, value=0):
    return F.pad(input, tuple(pad), "constant", value)


def _feature_dropout(input, p, train, inplace=False):
    """Whole channels (dim 1; each feature of 2-d input) zeroed with probability p, the rest
    scaled by 1 / (1 - p)."""
    if not train or p == 0:
        return input
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    keep = bernoulli(O.full(shape, 1 - p, dtype=input.dtype))
    scale = keep / (1 - p) if p < 1 else keep
    return input.mul_(scale) if inplace else input * scale


def _dropout_form(name, fn, inplace):
    def form(input, p, train):
        return fn(input, p, train, inplace=inplace)
    return _export(form, name)


_dropout_form("dropout_", F.dropout, True)
_dropout_form("feature_dropout", _feature_dropout, False)
_dropout_form("feature_dropout_", _feature_dropout, True)
_dropout_form("alpha_dropout_", F.alpha_dropout, True)
_dropout_form("feature_alpha_dropout", F.feature_alpha_dropout, False)
_dropout_form("feature_alpha_dropout_", F.feature_alpha_dropout, True)


@_export
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(output, mean, rstd) over the last len(normalized_shape) dims (kept as size 1), aten's."""
    dims = tuple(builtins.range(input.ndim - len(normalized_shape), input.ndim))
    out = F.layer_norm(input, tuple(normalized_shape), weight, bias, eps)
    x = input.detach()
    mean = O.mean(x, dims, keepdim=True)
    var = O.mean((x - mean) * (x - mean), dims, keepdim=True)
    return out, mean, O.rsqrt(var + eps)


@_export
def range(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):
    """torch.range (deprecated): start to end inclusive, by step; the default float dtype."""
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    n = int(math.floor((end - start) / step)) + 1
    values = [start + i * step for i in builtins.range(max(n, 0))]
    return tensor(np.asarray(values, dtype=np.float64), dtype=dtype if dtype is not None else D.get_default_dtype(),
                  requires_grad=requires_grad)


@_export
def fill(input, value):
    """input's shape and dtype filled with value (a number or a 0-d tensor): input's gradient is
    zero, a tensor value's the sum, as torch's."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               f"dimensions.")
        out = O.expand(value.to(input.dtype), tuple(input.shape)) + input * 0
        return rename_grad_fn(out, "FillBackward1") if out.requires_grad else out.detach()
    out = O.full(tuple(input.shape), value, dtype=input.dtype)
    return rename_grad_fn(out + input * 0, "FillBackward0") if input.requires_grad else out


@_export
def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-d tensor over the buffer's memory (shared, as torch's): count elements from offset bytes."""
    arr = np.frombuffer(buffer, dtype=dtype.np, count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor. You "
                      "may want to copy the buffer to protect its data or make it writable before converting it to a "
                      "tensor. This type of warning will be suppressed for the rest of this program.", UserWarning,
                      stacklevel=2)
    t = Tensor._make(arr, dtype)
    return t.requires_grad_() if requires_grad else t


@_export
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def _cell_linear(x, w, b):
    return F.linear(x, w, b)


@_export
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """aten's LSTM cell: (h', c') from (h, c)."""
    h, c = hx
    i, f, g, o = O.chunk(_cell_linear(input, w_ih, b_ih) + _cell_linear(h, w_hh, b_hh), 4, 1)
    c2 = O.sigmoid(f) * c + O.sigmoid(i) * O.tanh(g)
    return O.sigmoid(o) * O.tanh(c2), c2


@_export
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    xi = O.chunk(_cell_linear(input, w_ih, b_ih), 3, 1)
    hh = O.chunk(_cell_linear(hx, w_hh, b_hh), 3, 1)
    r = O.sigmoid(xi[0] + hh[0])
    z = O.sigmoid(xi[1] + hh[1])
    n = O.tanh(xi[2] + r * hh[2])
    return (hx - n) * z + n


@_export
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return O.tanh(_cell_linear(input, w_ih, b_ih) + _cell_linear(hx, w_hh, b_hh))


@_export
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return O.relu(_cell_linear(input, w_ih, b_ih) + _cell_linear(hx, w_hh, b_hh))


@_export
def get_default_device():
    return device("cpu")


@_export
def set_default_device(device):
    """tracegrad's factory functions make CPU tensors; "cpu" (or None) is the one default it takes."""
    name = getattr(device, "type", device)
    if device is not None and str(name).split(":")[0] != "cpu":
        raise NotImplementedError(f"set_default_device({device!r}): tracegrad's factory functions create CPU "
                                  f"tensors; move tensors with .to(device) instead")

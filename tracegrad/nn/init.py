"""tracegrad.nn.init: torch.nn.init's initializers (same distributions, gains and fan rules).

Values come from tracegrad's generator (numpy's PCG64), so a seeded model has torch's
statistics, not torch's numbers. Every initializer fills in place under no_grad.
"""
import math
import warnings
from math import erf

import numpy as np

from ..grad_mode import no_grad
from .. import _dtype as D
from ..creation import RNG, tensor as _tensor
from ..tracing import _ACTIVE, TRACING

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_", "dirac_"]


def _rng(generator):
    if generator is None:
        return RNG.gen
    # while compile traces, the global stream refuses to draw (the function runs eagerly): so
    # must this one, or the trace's draw would advance it once more than the eager run does
    getattr(RNG.gen, "bit_generator")
    return generator._np


def _fill(tensor, values):
    if _ACTIVE[0] and TRACING.stack:
        # while compile traces: an in-place copy that the trace records, so that the program
        # fills the tensor at every call (a write into its array would be made once, by the trace)
        with no_grad():
            tensor.copy_(_tensor(np.asarray(values)))
        return tensor
    with no_grad():
        tensor._data[...] = values
        if tensor.dtype is D.bfloat16:
            tensor._data[...] = D.round_bfloat16(tensor._data)
        tensor._vc[0] += 1
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill(tensor, _rng(generator).uniform(a, b, tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill(tensor, _rng(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b], by rejection (as torch): normal draws when most
    of the mass lies inside [a, b], else uniform draws on [a, b] accepted by the density."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    rng = _rng(generator)
    mass = (erf((b - mean) / (std * math.sqrt(2))) - erf((a - mean) / (std * math.sqrt(2)))) / 2
    mode = max(a, min(mean, b))
    out = np.empty(tuple(tensor.shape))
    todo = np.ones(out.shape, dtype=bool)
    while todo.any():
        k = int(todo.sum())
        if mass > 0.3:
            x = rng.normal(mean, std, k)
            ok = (x >= a) & (x <= b)
        else:
            x = rng.uniform(a, b, k)
            ok = np.log(rng.random(k)) <= -0.5 * ((x - mean) / std) ** 2 + 0.5 * ((mode - mean) / std) ** 2
        idx = np.flatnonzero(todo)[ok]
        out.ravel()[idx] = x[ok]
        todo.ravel()[idx] = False
    return _fill(tensor, out)


def constant_(tensor, val):
    return _fill(tensor, val)


def ones_(tensor):
    return _fill(tensor, 1)


def zeros_(tensor):
    return _fill(tensor, 0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound), bound = gain * sqrt(3 / fan)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2), std = gain / sqrt(fan)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix, as torch makes it: the Q of a normal draw's QR, its signs set
    by R's diagonal; more than two dims are flattened after the first."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Each column normal(0, std) with a `sparsity` fraction of its rows set to zero."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    rng = _rng(generator)
    values = rng.normal(0.0, std, (rows, cols))
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        values[rng.permutation(rows)[:zeros], c] = 0
    return _fill(tensor, values)


def dirac_(tensor, groups=1):
    """The identity convolution kernel: each output channel passes its input channel through."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per = tensor.shape[0] // groups
    min_dim = min(out_per, tensor.shape[1])
    values = np.zeros(tensor.shape)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            values[(g * out_per + d, d) + centre] = 1
    return _fill(tensor, values)

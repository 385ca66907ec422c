"""Gradient clipping (torch.nn.utils.clip_grad_norm_, clip_grad_value_), written in tracegrad
ops under no_grad, in torch's order: the norm of the per-tensor norms, then every gradient
times min(1, max_norm / (norm + 1e-6))."""
import math
import warnings

from ...tensor import Tensor
from ...grad_mode import no_grad
from ... import creation
from ...ops import functional as F

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _tensors(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def _vector_norm(t, norm_type):
    x = t.reshape(-1)
    if norm_type == math.inf:
        return F.amax(F.abs(x)) if x.numel() else creation.zeros((), dtype=t.dtype)
    if norm_type == -math.inf:
        return F.amin(F.abs(x))
    return F.norm(x, norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    tensors = [t for t in _tensors(tensors) if t is not None]
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return creation.tensor(0.0)
    with no_grad():
        norms = [_vector_norm(t, norm_type) for t in tensors]
        total = _vector_norm(F.stack(norms), norm_type)
    if error_if_nonfinite and (bool(F.isnan(total)) or bool(F.isinf(total))):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           f"it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           f"norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if len(grads) == 0:
        return
    with no_grad():
        coef = F.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of `parameters` in place so their total norm is at most max_norm;
    return the total norm before clipping."""
    params = _tensors(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the gradients of `parameters` in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)

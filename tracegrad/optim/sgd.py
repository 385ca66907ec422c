"""SGD with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD)."""
import numpy as np

from . import traced
from ..functionalize import RUNTIME_OPTIONS
from .optimizer import TRACED_UPDATES, Optimizer, required, _scalar, _finish
from ..tensor import Tensor
from .. import _dtype as D

__all__ = ["SGD"]


class SGD(Optimizer):
    """p <- p - lr * d, where d is the gradient plus weight_decay * p, passed through the
    momentum buffer b <- momentum * b + (1 - dampening) * d (d itself on the first step);
    Nesterov uses d + momentum * b instead of b."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr is not required and _scalar(lr) < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("SGD(differentiable=True) is not supported")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            wd, momentum, dampening = group["weight_decay"], group["momentum"], group["dampening"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                x = p._data
                dt = x.dtype.type
                # bfloat16 (held in float32 arrays): each of torch's ops rounds what it writes
                # and its add(alpha=) takes alpha as a bfloat16 number
                r = D.round_bfloat16 if p._dtype is D.bfloat16 else _same
                a = (lambda c: dt(D.round_bfloat16(np.float32(c)))) if r is not _same else dt
                d = p.grad._data
                if group["maximize"]:
                    d = -d
                if wd != 0:
                    d = r(d + a(wd) * x)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        if isinstance(d, np.generic):
                            # (numpy's arithmetic on a 0-dim array gives a number, which
                            # `b *= momentum` below would not change)
                            d = np.asarray(d)
                        buf = Tensor._make(d.copy(order="K"), p._dtype)     # torch's clone: the gradient's layout
                        state["momentum_buffer"] = buf
                    else:
                        b = buf._data
                        b *= dt(momentum)
                        if r is not _same:
                            b[...] = r(b)
                        b += d if dampening == 0 else a(1 - dampening) * d
                        _finish((buf,))
                    d = r(d + a(momentum) * buf._data) if group["nesterov"] else buf._data
                x += a(-lr) * d
                _finish((p,))


def _same(a):
    return a


TRACED_UPDATES[SGD._update] = traced.sgd      # step() inside a compiled training step
RUNTIME_OPTIONS[SGD._update] = traced.RUNTIME_OPTIONS_SGD     # read by its program at every call

"""SGD with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD)."""
import numpy as np

from . import traced
from .optimizer import TRACED_UPDATES, Optimizer, required, _scalar, _finish
from ..tensor import Tensor

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
                d = p.grad._data
                if group["maximize"]:
                    d = -d
                if wd != 0:
                    d = d + dt(wd) * x
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = Tensor._make(d.copy(), p._dtype)
                        state["momentum_buffer"] = buf
                    else:
                        b = buf._data
                        b *= dt(momentum)
                        b += d if dampening == 0 else dt(1 - dampening) * d
                        _finish((buf,))
                    d = d + dt(momentum) * buf._data if group["nesterov"] else buf._data
                x += dt(-lr) * d
                _finish((p,))


TRACED_UPDATES[SGD._update] = traced.sgd      # step() inside a compiled training step

"""Adam and AdamW, with amsgrad (torch.optim.Adam, torch.optim.AdamW)."""
import numpy as np

from . import traced
from .optimizer import TRACED_UPDATES, Optimizer, _scalar, _zeros_like, _finish
from ..tensor import Tensor
from .. import _dtype as D

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """m <- lerp(m, g, 1 - beta1); v <- beta2 v + (1 - beta2) g^2;
    p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).

    weight_decay adds weight_decay * p to the gradient (Adam) or, with
    decoupled_weight_decay (AdamW), scales p by 1 - lr * weight_decay first; amsgrad
    uses the running maximum of v."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= _scalar(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= _scalar(betas[0]) < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= _scalar(betas[1]) < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}(differentiable=True) is not supported")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            beta1, beta2 = (_scalar(b) for b in group["betas"])
            wd, eps, amsgrad = group["weight_decay"], group["eps"], group["amsgrad"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = Tensor._make(np.zeros((), np.float32), D.float32)
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = _zeros_like(p)
                x = p._data
                dt = x.dtype.type
                g = p.grad._data
                if group["maximize"]:
                    g = -g
                step_t = state["step"]
                step_t._data += 1
                step_t._vc[0] += 1
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        x *= dt(1 - lr * wd)
                    else:
                        g = g + dt(wd) * x
                m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
                # m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                m += (g - m) * dt(1 - beta1)
                v *= dt(beta2)
                v += g * dt(1 - beta2) * g
                step = float(step_t._data)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = lr / bias_correction1
                bias_correction2_sqrt = bias_correction2 ** 0.5
                if amsgrad:
                    vmax = state["max_exp_avg_sq"]._data
                    np.maximum(vmax, v, out=vmax)
                    denom = np.sqrt(vmax)
                else:
                    denom = np.sqrt(v)
                denom /= dt(bias_correction2_sqrt)
                denom += dt(eps)
                # p.addcdiv_(m, denom, value=-step_size)
                upd = m * dt(-step_size)
                upd /= denom
                x += upd
                _finish([p, state["exp_avg"], state["exp_avg_sq"]] +
                        ([state["max_exp_avg_sq"]] if amsgrad else []))


class AdamW(Adam):
    """Adam with decoupled weight decay (default weight_decay=1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True


TRACED_UPDATES[Adam._update] = traced.adam      # step() inside a compiled training step

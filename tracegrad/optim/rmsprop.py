"""RMSprop (torch.optim.RMSprop), with momentum and the centered variant."""
import numpy as np

from .optimizer import Optimizer, _scalar, _zeros_like, _finish, _check_options
from ..tensor import Tensor
from .. import _dtype as D

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """v <- alpha v + (1 - alpha) g^2; p <- p - lr g / (sqrt(v) + eps), where centered
    subtracts the square of the running mean of g from v first and momentum keeps a buffer
    b <- momentum b + g / (sqrt(v) + eps) that p steps along instead."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_options("RMSprop", lr, differentiable, epsilon=eps, momentum=momentum, weight_decay=weight_decay,
                       alpha=alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            alpha, eps, wd, momentum = group["alpha"], group["eps"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = Tensor._make(np.zeros((), np.float32), D.float32)
                    state["square_avg"] = _zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = _zeros_like(p)
                    if group["centered"]:
                        state["grad_avg"] = _zeros_like(p)
                x = p._data
                dt = x.dtype.type
                g = p.grad._data
                if group["maximize"]:
                    g = -g
                state["step"]._data += 1
                if wd != 0:
                    g = g + dt(wd) * x
                v = state["square_avg"]._data
                v *= dt(alpha)
                v += g * dt(1 - alpha) * g               # square_avg.mul_(alpha).addcmul_(g, g, value=1 - alpha)
                touched = [p, state["step"], state["square_avg"]]
                if group["centered"]:
                    m = state["grad_avg"]._data
                    m += (g - m) * dt(1 - alpha)          # grad_avg.lerp_(g, 1 - alpha)
                    avg = np.sqrt(v - m * m)
                    touched.append(state["grad_avg"])
                else:
                    avg = np.sqrt(v)
                avg += dt(eps)
                if momentum > 0:
                    b = state["momentum_buffer"]._data
                    b *= dt(momentum)
                    b += g / avg                          # buf.mul_(momentum).addcdiv_(g, avg)
                    x += b * dt(-lr)
                    touched.append(state["momentum_buffer"])
                else:
                    upd = g * dt(-lr)
                    upd /= avg
                    x += upd                              # param.addcdiv_(g, avg, value=-lr)
                _finish(touched)

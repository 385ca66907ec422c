"""Adagrad (torch.optim.Adagrad)."""
import numpy as np

from . import traced
from .optimizer import TRACED_UPDATES, Optimizer, _scalar, _finish, _check_options
from ..tensor import Tensor
from ..functionalize import RUNTIME_OPTIONS
from .. import _dtype as D

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """s <- s + g^2; p <- p - clr g / (sqrt(s) + eps), clr = lr / (1 + (step - 1) lr_decay)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_options("Adagrad", lr, differentiable, lr_decay=lr_decay, weight_decay=weight_decay,
                       initial_accumulator_value=initial_accumulator_value, epsilon=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                _init_state(self.state[p], p, group)

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            lr_decay, wd, eps = group["lr_decay"], group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:              # cleared, or a group added later: made now, as torch's
                    _init_state(state, p, group)
                x = p._data
                dt = x.dtype.type
                g = p.grad._data
                if group["maximize"]:
                    g = -g
                state["step"]._data += 1
                step = float(state["step"]._data)
                if wd != 0:
                    g = g + dt(wd) * x
                clr = lr / (1 + (step - 1) * lr_decay)
                s = state["sum"]._data
                s += g * dt(1) * g                         # state_sum.addcmul_(g, g, value=1)
                std = np.sqrt(s)
                std += dt(eps)
                upd = g * dt(-clr)
                upd /= std
                x += upd                                   # param.addcdiv_(g, std, value=-clr)
                _finish([p, state["step"], state["sum"]])


def _init_state(state, p, group):
    """A parameter's state as torch's Adagrad makes it (in __init__, and at a step for a
    parameter whose state is empty): the step count and the sum, initial_accumulator_value."""
    state["step"] = Tensor._make(np.zeros((), np.float32), D.float32)
    state["sum"] = Tensor._make(np.full_like(p._data, group["initial_accumulator_value"]), p._dtype)


TRACED_UPDATES[Adagrad._update] = traced.adagrad      # step() inside a compiled training step
RUNTIME_OPTIONS[Adagrad._update] = traced.RUNTIME_OPTIONS_ADAGRAD     # read by its program at every call

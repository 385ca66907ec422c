"""The built-in optimizers' updates on symbolic values, for a training step traced whole.

Inside `compile`, `optimizer.step()` runs these instead of the in-place numpy updates:
the same arithmetic in the same order, with each scalar cast to the parameter's dtype
where the numpy update casts it, written with tracegrad ops on the parameters',
gradients' and state's symbolic values (functionalize.Shadow). The new values become
outputs of the program, written back into the real tensors after each call. The
learning rate is an input of the program (a float64 scalar read from the parameter
group at every call), so schedules that change it need no recompile.
"""
import numpy as np

from .. import _dtype as D
from ..tensor import Tensor, Above
from ..ops import functional as F
from .optimizer import _scalar


def _lr(sh, group):
    """The group's learning rate as a float64 scalar input of the program."""
    for holder, g in sh.lr_inputs:
        if g is group:
            return holder
    holder = Tensor._make(np.array(float(_scalar(group["lr"])), np.float64), D.float64)
    sh.lr_inputs.append((holder, group))
    return holder


def _state(sh, opt, p):
    """The state dict of p as the trace sees it: the real one, or the one this trace made."""
    e = sh.state.get((id(opt), id(p)))
    if e is not None:
        return e[2]
    return opt.state[p] if p in opt.state else None


def _new_state(sh, opt, p):
    st = {}
    sh.state[(id(opt), id(p))] = (opt, p, st)
    return st


def _holder(like_shape, dtype, device):
    """A new state tensor where the eager step makes it: on the parameters' device, a step
    count (0-dim) on the CPU, as torch's."""
    data = np.zeros(like_shape, dtype.np)
    if like_shape and device.type != "cpu":
        data = Above.to_device(data, dtype)
    return Tensor._make(data, dtype)


def _set(sh, st, key, value, dtype):
    """state[key] <- value: the tensor already there takes the new value (written back)."""
    t = st.get(key)
    if t is None:
        t = st[key] = _holder(tuple(value.shape), dtype, value.device)
    sh.write(t, value if value.dtype is dtype else F.convert(value, dtype))
    return t


def _cast(x, dtype):
    return F.convert(x, dtype)


def _value(sh, t):
    """The symbolic value of real tensor t now (its write in this trace, or t itself)."""
    v = sh.value(t)
    return t if v is None else v


def sgd(opt, sh):
    for group in opt.param_groups:
        lr = _lr(sh, group)
        wd, momentum, dampening = group["weight_decay"], group["momentum"], group["dampening"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            dt = p.dtype
            x = _value(sh, p)
            d = -g if group["maximize"] else g
            if wd != 0:
                d = d + x * wd
            if momentum != 0:
                st = _state(sh, opt, p)
                buf = None if st is None else st.get("momentum_buffer")
                if st is None:
                    st = _new_state(sh, opt, p)
                if buf is None:
                    b = d
                    _set(sh, st, "momentum_buffer", F.clone(d), dt)
                else:
                    b = _value(sh, buf) * momentum
                    b = b + (d if dampening == 0 else d * (1 - dampening))
                    _set(sh, st, "momentum_buffer", b, dt)
                d = d + b * momentum if group["nesterov"] else b
            sh.write(p, x + d * _cast(-lr, dt))


def adam(opt, sh):
    for group in opt.param_groups:
        lr = _lr(sh, group)
        beta1, beta2 = (float(b) for b in group["betas"])
        wd, eps, amsgrad = group["weight_decay"], group["eps"], group["amsgrad"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            dt = p.dtype
            st = _state(sh, opt, p)
            if st is None or len(st) == 0:
                real = opt.state[p] if p in opt.state else None
                st = _new_state(sh, opt, p)
                if real:
                    st.update(real)
                step = F.full((), 0.0, dtype=D.float32)
                m = F.full(tuple(p.shape), 0.0, dtype=dt)
                v = F.full(tuple(p.shape), 0.0, dtype=dt)
                vmax = F.full(tuple(p.shape), 0.0, dtype=dt) if amsgrad else None
            else:
                step, m, v = _value(sh, st["step"]), _value(sh, st["exp_avg"]), _value(sh, st["exp_avg_sq"])
                vmax = _value(sh, st["max_exp_avg_sq"]) if amsgrad else None
            x = _value(sh, p)
            if group["maximize"]:
                g = -g
            step = step + 1
            _set(sh, st, "step", step, D.float32)
            if wd != 0:
                if group["decoupled_weight_decay"]:
                    x = x * _cast(1 - lr * wd, dt)
                else:
                    g = g + x * wd
            m = m + (g - m) * (1 - beta1)
            v = v * beta2
            v = v + g * (1 - beta2) * g
            s64 = _cast(step, D.float64)
            bias_correction1 = 1 - F.pow(beta1, s64)
            bias_correction2 = 1 - F.pow(beta2, s64)
            step_size = lr / bias_correction1
            bias_correction2_sqrt = F.sqrt(bias_correction2)
            if amsgrad:
                vmax = F.maximum(vmax, v)
                _set(sh, st, "max_exp_avg_sq", vmax, dt)
                denom = F.sqrt(vmax)
            else:
                denom = F.sqrt(v)
            denom = denom / _cast(bias_correction2_sqrt, dt)
            denom = denom + eps
            upd = m * _cast(-step_size, dt)
            upd = upd / denom
            _set(sh, st, "exp_avg", m, dt)
            _set(sh, st, "exp_avg_sq", v, dt)
            sh.write(p, x + upd)

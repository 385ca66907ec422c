"""The built-in optimizers' updates on symbolic values, for a training step traced whole.

Inside `compile`, `optimizer.step()` runs these instead of the in-place numpy updates:
the same arithmetic in the same order, with each scalar cast to the parameter's dtype
where the numpy update casts it, written with tracegrad ops on the parameters',
gradients' and state's symbolic values (functionalize.Shadow). The new values become
outputs of the program, written back into the real tensors after each call. The
learning rate and the other float options (momentum, dampening, weight_decay, betas,
eps) are inputs of the program (float64 scalars read from the parameter group at every
call), so schedules that change them need no recompile; the program assumes only their
types and which of them are zero (functionalize.guard_key). While the step is traced,
those options are stand-ins (functionalize._Option) that the update below reads and the
function's own Python code cannot (it would keep one call's value).
"""
import numpy as np

from .. import _dtype as D
from ..tensor import Tensor, Above
from ..ops import functional as F
from ..functionalize import _Option
from ..cuda import is_cuda_data, to_host
from ..tracing import TraceError
from .optimizer import _scalar


def _peek(t):
    """A one-element tensor's value, not noted as a value the trace read (a program input)."""
    d = to_host(t._data) if is_cuda_data(t._data) else t._data
    return float(np.asarray(d).reshape(()))


def _input(sh, group, key, index, value):
    """group[key] (or its item `index`) as a float64 scalar input of the program, read at every
    call (compile._read_learning_rates)."""
    for holder, g, k, i in sh.lr_inputs:
        if g is group and k == key and i == index:
            return holder
    holder = Tensor._make(np.array(value, np.float64), D.float64)
    sh.lr_inputs.append((holder, group, key, index))
    return holder


def _lr(sh, group):
    """The group's learning rate as a float64 scalar input of the program (a Python number or a
    one-element tensor); another scalar (a numpy float32) is a constant, which the guards hold."""
    lr = group["lr"]
    if lr.__class__ is _Option:
        return _input(sh, group, "lr", None, float(lr.value))
    if isinstance(lr, Tensor):
        if sh.value(lr) is not None:
            # the program reads the rate as the call starts, before the function wrote it
            raise TraceError("a learning rate tensor written in place inside the compiled function before "
                             "optimizer.step() is not traced yet")
        return _input(sh, group, "lr", None, _peek(lr))
    return lr


def _val(group, key, index=None):
    """An option's value now (which the traced update's Python reads: whether it is zero)."""
    item = group[key] if index is None else group[key][index]
    return item.value if item.__class__ is _Option else _scalar(item)


def _opt(sh, group, key, index=None):
    """What the traced update computes an option with: the program's input where it reads the
    option at every call, else its value (which the guards hold). Made where the update uses
    it: an option it does not use (dampening without momentum) is no input."""
    item = group[key] if index is None else group[key][index]
    if item.__class__ is _Option:
        return _input(sh, group, key, index, float(item.value))
    return _scalar(item)


def _as(x, dtype):
    """A scalar as the eager update casts it to the parameter's dtype (a program input is
    converted; a Python number, guarded, is cast by the op as it is)."""
    return F.convert(x, dtype) if isinstance(x, Tensor) else x


def _param_dtype(opt, p):
    """p's dtype, in which the traced update computes. The eager update of a bfloat16 parameter
    computes in float32 and rounds each tensor it writes once (as torch's), the traced one
    would round every op: such a step runs eagerly."""
    if p.dtype is D.bfloat16:
        raise TraceError(f"{type(opt).__name__}.step() on a bfloat16 parameter inside a compiled function is not "
                         f"traced yet (its update computes in float32, rounding once)")
    return p.dtype


def _same_dtype(opt, p, key, t):
    """The eager update computes a state tensor of another dtype than its parameter's (a
    module converted with .double() or .half() after the state was made) in that dtype;
    the traced one in the parameter's: such a step runs eagerly."""
    if t.dtype is not p.dtype:
        raise TraceError(f"{type(opt).__name__}'s state {key!r} of a parameter is {t.dtype} while the parameter "
                         f"is {p.dtype} (converted after the state was made); such an update is not traced yet")


def _state(sh, opt, p):
    """The state dict of p as the trace sees it: the real one, or the one this trace made."""
    e = sh.state.get((id(opt), id(p)))
    if e is not None:
        return e[2]
    return opt.state[p] if p in opt.state else None


def _fresh(sh, opt, p, keys):
    """A new state for p, its tensors (all but the 0-dim float32 step, of p's shape and dtype)
    made in the order of `keys`, as the eager update makes them (the state's layout is part of
    what a program assumes, and what state_dict gives)."""
    st = _new_state(sh, opt, p)
    for k in keys:
        st[k] = _holder((), D.float32, p.device) if k == "step" else _holder(tuple(p.shape), p.dtype, p.device,
                                                                               p._data)
    return st


def _new_state(sh, opt, p):
    st = {}
    sh.state[(id(opt), id(p))] = (opt, p, st)
    return st


def _holder(like_shape, dtype, device, like=None):
    """A new state tensor where the eager step makes it: on the parameters' device, a step
    count (0-dim) on the CPU, as torch's; laid out as the parameter's array `like` (as
    zeros_like(p) and clone(p.grad) are, the gradient laid out as its parameter)."""
    if like.__class__ is np.ndarray and like.shape == like_shape and not like.flags.c_contiguous:
        data = np.zeros_like(like, dtype.np)
    else:
        data = np.zeros(like_shape, dtype.np)
    if like_shape and device.type != "cpu":
        data = Above.to_device(data, dtype)
    return Tensor._make(data, dtype)


def _set(sh, st, key, value, dtype, like=None):
    """state[key] <- value: the tensor already there takes the new value (written back); a new
    one laid out as the parameter `like`."""
    t = st.get(key)
    if t is None:
        t = st[key] = _holder(tuple(value.shape), dtype, value.device, None if like is None else like._data)
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
        wd, momentum, dampening = _val(group, "weight_decay"), _val(group, "momentum"), _val(group, "dampening")
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            dt = _param_dtype(opt, p)
            x = _value(sh, p)
            d = -g if group["maximize"] else g
            if wd != 0:
                d = d + x * _as(_opt(sh, group, "weight_decay"), dt)
            if momentum != 0:
                momentum_s = _opt(sh, group, "momentum")
                st = _state(sh, opt, p)
                buf = None if st is None else st.get("momentum_buffer")
                if st is None:
                    st = _new_state(sh, opt, p)
                if buf is None:
                    b = d
                    _set(sh, st, "momentum_buffer", F.clone(d), dt, p)
                else:
                    _same_dtype(opt, p, "momentum_buffer", buf)
                    b = _value(sh, buf) * _as(momentum_s, dt)
                    b = b + (d if dampening == 0 else d * _as(1 - _opt(sh, group, "dampening"), dt))
                    _set(sh, st, "momentum_buffer", b, dt)
                d = d + b * _as(momentum_s, dt) if group["nesterov"] else b
            sh.write(p, x + d * _as(-lr, dt))


def adam(opt, sh):
    for group in opt.param_groups:
        lr = _lr(sh, group)
        wd, amsgrad = _val(group, "weight_decay"), group["amsgrad"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            dt = _param_dtype(opt, p)
            st = _state(sh, opt, p)
            if st is None or len(st) == 0:
                st = _fresh(sh, opt, p, ("step", "exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ()))
                step = F.full((), 0.0, dtype=D.float32)
                m = F.full(tuple(p.shape), 0.0, dtype=dt)
                v = F.full(tuple(p.shape), 0.0, dtype=dt)
                vmax = F.full(tuple(p.shape), 0.0, dtype=dt) if amsgrad else None
            else:
                for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad and "max_exp_avg_sq" in st
                                                         else ()):
                    _same_dtype(opt, p, key, st[key])
                step, m, v = _value(sh, st["step"]), _value(sh, st["exp_avg"]), _value(sh, st["exp_avg_sq"])
                vmax = _value(sh, st["max_exp_avg_sq"]) if amsgrad else None
            x = _value(sh, p)
            if group["maximize"]:
                g = -g
            step = step + 1
            _set(sh, st, "step", step, D.float32)
            beta1_s, beta2_s = _opt(sh, group, "betas", 0), _opt(sh, group, "betas", 1)
            if wd != 0:
                wd_s = _opt(sh, group, "weight_decay")
                if group["decoupled_weight_decay"]:
                    x = x * _as(1 - lr * wd_s, dt)
                else:
                    g = g + x * _as(wd_s, dt)
            m = m + (g - m) * _as(1 - beta1_s, dt)
            v = v * _as(beta2_s, dt)
            v = v + g * _as(1 - beta2_s, dt) * g
            s64 = _cast(step, D.float64)
            bias_correction1 = 1 - F.pow(beta1_s, s64)
            bias_correction2 = 1 - F.pow(beta2_s, s64)
            step_size = lr / bias_correction1
            # Python's float ** 0.5, as the eager step (and torch's) takes it: the C library's pow,
            # which is not sqrt in the last bit at some steps (1270 of beta2 = 0.999); a tensor
            # exponent keeps pow from being lowered to sqrt
            bias_correction2_sqrt = F.pow(bias_correction2, F.full((), 0.5, dtype=D.float64))
            if amsgrad:
                vmax = F.maximum(vmax, v)
                _set(sh, st, "max_exp_avg_sq", vmax, dt)
                denom = F.sqrt(vmax)
            else:
                denom = F.sqrt(v)
            denom = denom / _cast(bias_correction2_sqrt, dt)
            denom = denom + _as(_opt(sh, group, "eps"), dt)
            upd = m * _cast(-step_size, dt)
            upd = upd / denom
            _set(sh, st, "exp_avg", m, dt)
            _set(sh, st, "exp_avg_sq", v, dt)
            sh.write(p, x + upd)


def rmsprop(opt, sh):
    for group in opt.param_groups:
        lr = _lr(sh, group)
        wd, momentum, centered = _val(group, "weight_decay"), _val(group, "momentum"), group["centered"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            dt = _param_dtype(opt, p)
            st = _state(sh, opt, p)
            if st is None or len(st) == 0:
                st = _fresh(sh, opt, p, ("step", "square_avg") + (("momentum_buffer",) if momentum > 0 else ()) +
                            (("grad_avg",) if centered else ()))
                step = F.full((), 0.0, dtype=D.float32)
                v = b = m = F.full(tuple(p.shape), 0.0, dtype=dt)
            else:
                keys = ("square_avg",) + (("momentum_buffer",) if momentum > 0 else ()) + \
                    (("grad_avg",) if centered else ())
                for key in keys:
                    _same_dtype(opt, p, key, st[key])
                step, v = _value(sh, st["step"]), _value(sh, st["square_avg"])
                b = _value(sh, st["momentum_buffer"]) if momentum > 0 else None
                m = _value(sh, st["grad_avg"]) if centered else None
            x = _value(sh, p)
            if group["maximize"]:
                g = -g
            step = step + 1
            _set(sh, st, "step", step, D.float32)
            if wd != 0:
                g = g + x * _as(_opt(sh, group, "weight_decay"), dt)
            alpha = _opt(sh, group, "alpha")
            v = v * _as(alpha, dt)
            v = v + g * _as(1 - alpha, dt) * g
            _set(sh, st, "square_avg", v, dt)
            if centered:
                m = m + (g - m) * _as(1 - alpha, dt)
                _set(sh, st, "grad_avg", m, dt)
                avg = F.sqrt(v - m * m)
            else:
                avg = F.sqrt(v)
            avg = avg + _as(_opt(sh, group, "eps"), dt)
            if momentum > 0:
                b = b * _as(_opt(sh, group, "momentum"), dt)
                b = b + g / avg
                _set(sh, st, "momentum_buffer", b, dt)
                x = x + b * _as(-lr, dt)
            else:
                upd = g * _as(-lr, dt)
                x = x + upd / avg
            sh.write(p, x)


def adagrad(opt, sh):
    for group in opt.param_groups:
        lr = _lr(sh, group)
        wd = _val(group, "weight_decay")
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            dt = _param_dtype(opt, p)
            st = _state(sh, opt, p)
            if st is None or len(st) == 0:
                # cleared, or a group added later: made at this step, as torch's (and eager's) Adagrad
                st = _fresh(sh, opt, p, ("step", "sum"))
                step = F.full((), 1.0, dtype=D.float32)
                s = F.full(tuple(p.shape), float(group["initial_accumulator_value"]), dtype=dt)
            else:
                _same_dtype(opt, p, "sum", st["sum"])
                step = _value(sh, st["step"]) + 1
                s = _value(sh, st["sum"])
            x = _value(sh, p)
            if group["maximize"]:
                g = -g
            _set(sh, st, "step", step, D.float32)
            if wd != 0:
                g = g + x * _as(_opt(sh, group, "weight_decay"), dt)
            clr = lr / (1 + (_cast(step, D.float64) - 1) * _opt(sh, group, "lr_decay"))
            s = s + g * g
            _set(sh, st, "sum", s, dt)
            std = F.sqrt(s) + _as(_opt(sh, group, "eps"), dt)
            upd = g * _as(-clr, dt)
            sh.write(p, x + upd / std)


# the options a whole step's program reads at every call (where they are Python numbers)
RUNTIME_OPTIONS_SGD = ("lr", "momentum", "dampening", "weight_decay")
RUNTIME_OPTIONS_ADAM = ("lr", "betas", "eps", "weight_decay")
RUNTIME_OPTIONS_RMSPROP = ("lr", "alpha", "eps", "weight_decay", "momentum")
RUNTIME_OPTIONS_ADAGRAD = ("lr", "lr_decay", "eps", "weight_decay")

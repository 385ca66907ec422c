"""Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD and Adafactor (torch.optim's), their updates in the order and the
precision of torch's single-tensor implementations, so that parameters equal torch's.
Inside a compiled training step they are not traced yet (the step says so and runs eagerly)."""
import numpy as np

from .optimizer import Optimizer, _scalar, _zeros_like, _finish, _check_options
from ..tensor import Tensor
from .. import _dtype as D

__all__ = ["Adamax", "NAdam", "RAdam", "Adadelta", "Rprop", "ASGD", "Adafactor"]


def _check_betas(betas):
    for i in (0, 1):
        if not 0.0 <= _scalar(betas[i]) < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


def _lerp_(m, g, w, dt):
    """m.lerp_(g, w) as torch computes it (from the nearer end)."""
    if w < 0.5:
        m += (g - m) * dt(w)
    else:
        m[...] = g - (g - m) * dt(1 - w)


def _step(state):
    """The state's step count (a float32 tensor, as torch's), advanced by one."""
    t = state["step"]
    t._data += 1
    t._vc[0] += 1
    return float(t._data)


def _decayed(g, x, lr, wd, decoupled, dt):
    """The gradient with weight decay: x scaled by 1 - lr wd in place (decoupled), or g + wd x."""
    if wd == 0:
        return g
    if decoupled:
        x *= dt(1 - lr * wd)
        return g
    return g + dt(wd) * x


def _moments(state, g, beta1, beta2, dt):
    """Adam's moments in place: m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, value=1 - beta2)."""
    m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
    _lerp_(m, g, 1 - beta1, dt)
    v *= dt(beta2)
    v += g * dt(1 - beta2) * g
    return m, v


def _new_step():
    return Tensor._make(np.zeros((), np.float32), D.float32)


def _grads(opt):
    """(group, p, x, g, dt) for each parameter with a gradient; g negated under maximize."""
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is None:
                continue
            g = p.grad._data
            yield group, p, p._data, (-g if group["maximize"] else g), p._data.dtype.type


class Adamax(Optimizer):
    """m <- lerp(m, g, 1 - beta1); u <- max(beta2 u, |g| + eps); p <- p - lr / (1 - beta1^t) m / u."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_options("Adamax", lr, differentiable, epsilon=eps)
        _check_betas(betas)
        _check_options("Adamax", lr, False, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            beta1, beta2 = (_scalar(b) for b in group["betas"])
            state = self.state[p]
            if len(state) == 0:
                state.update(step=_new_step(), exp_avg=_zeros_like(p), exp_inf=_zeros_like(p))
            step = _step(state)
            if group["weight_decay"] != 0:
                g = g + dt(group["weight_decay"]) * x
            m, u = state["exp_avg"]._data, state["exp_inf"]._data
            _lerp_(m, g, 1 - beta1, dt)
            np.maximum(u * dt(beta2), np.abs(g) + dt(group["eps"]), out=u)
            clr = _scalar(group["lr"]) / (1 - beta1 ** step)
            upd = m * dt(-clr)
            upd /= u
            x += upd
            _finish([p, state["exp_avg"], state["exp_inf"]])


class NAdam(Optimizer):
    """Adam with Nesterov momentum, its momentum scheduled by mu_t = beta1 (1 - 0.96^(t psi) / 2)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_options("NAdam", lr, differentiable, epsilon=eps)
        _check_betas(betas)
        _check_options("NAdam", lr, False, weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            beta1, beta2 = (_scalar(b) for b in group["betas"])
            lr, wd, psi = _scalar(group["lr"]), group["weight_decay"], group["momentum_decay"]
            state = self.state[p]
            if len(state) == 0:
                state.update(step=_new_step(), mu_product=Tensor._make(np.ones((), np.float32), D.float32),
                             exp_avg=_zeros_like(p), exp_avg_sq=_zeros_like(p))
            step = _step(state)
            bias_correction2 = 1 - beta2 ** step
            g = _decayed(g, x, lr, wd, group["decoupled_weight_decay"], dt)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * psi)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * psi)))
            mp = state["mu_product"]
            # in the state's own dtype, as torch's: float32, float64 once load_state_dict cast it
            mp._data[...] = mp._data * mp._data.dtype.type(mu)
            mp._vc[0] += 1
            mu_product = float(mp._data)
            m, v = _moments(state, g, beta1, beta2, dt)
            denom = np.sqrt(v / dt(bias_correction2))
            denom += dt(group["eps"])
            upd = g * dt(-lr * (1.0 - mu) / (1.0 - mu_product))
            upd /= denom
            x += upd
            upd = m * dt((-lr * mu_next) / (1.0 - mu_product * mu_next))
            upd /= denom
            x += upd
            _finish([p, state["exp_avg"], state["exp_avg_sq"]])


class RAdam(Optimizer):
    """Adam whose adaptive step is rectified by the variance of its estimate, plain momentum
    SGD while that variance is not yet tractable (rho_t <= 5)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_options("RAdam", lr, differentiable, epsilon=eps)
        _check_betas(betas)
        _check_options("RAdam", lr, False, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable, differentiable=differentiable))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            beta1, beta2 = (_scalar(b) for b in group["betas"])
            lr, wd = _scalar(group["lr"]), group["weight_decay"]
            state = self.state[p]
            if len(state) == 0:
                state.update(step=_new_step(), exp_avg=_zeros_like(p), exp_avg_sq=_zeros_like(p))
            step = _step(state)
            g = _decayed(g, x, lr, wd, group["decoupled_weight_decay"], dt)
            m, v = _moments(state, g, beta1, beta2, dt)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            corrected = m / dt(bias_correction1)
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                adaptive = dt(bias_correction2 ** 0.5) / (np.sqrt(v) + dt(group["eps"]))
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                x -= corrected * dt(lr) * adaptive * dt(rect)
            else:
                x -= corrected * dt(lr)
            _finish([p, state["exp_avg"], state["exp_avg_sq"]])


class Adadelta(Optimizer):
    """v <- rho v + (1 - rho) g^2; d <- sqrt(u + eps) / sqrt(v + eps) g; u <- rho u + (1 - rho) d^2;
    p <- p - lr d."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check_options("Adadelta", lr, differentiable)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check_options("Adadelta", lr, False, epsilon=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      capturable=capturable, maximize=maximize, differentiable=differentiable))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            rho, eps = group["rho"], dt(group["eps"])
            state = self.state[p]
            if len(state) == 0:
                state.update(step=_new_step(), square_avg=_zeros_like(p), acc_delta=_zeros_like(p))
            _step(state)
            if group["weight_decay"] != 0:
                g = g + dt(group["weight_decay"]) * x
            v, u = state["square_avg"]._data, state["acc_delta"]._data
            v *= dt(rho)
            v += g * dt(1 - rho) * g
            delta = np.sqrt(u + eps)
            delta /= np.sqrt(v + eps)
            delta *= g
            u *= dt(rho)
            u += delta * dt(1 - rho) * delta
            x += dt(-_scalar(group["lr"])) * delta
            _finish([p, state["square_avg"], state["acc_delta"]])


class Rprop(Optimizer):
    """Resilient backpropagation: each element's step grows by etaplus while its gradient keeps
    its sign and shrinks by etaminus (skipping that update) when it flips."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        _check_options("Rprop", lr, differentiable)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            etaminus, etaplus = group["etas"]
            lo, hi = group["step_sizes"]
            state = self.state[p]
            if len(state) == 0:
                state.update(step=_new_step(), prev=_zeros_like(p),
                             step_size=Tensor._make(np.full_like(g, _scalar(group["lr"])), p.grad._dtype))
            _step(state)
            prev, size = state["prev"]._data, state["step_size"]._data
            if x.__class__ is np.ndarray:
                _rprop(x, g, prev, size, dt, etaminus, etaplus, lo, hi)
            else:
                # a device parameter: the update on host copies, written back (numpy's sign and where
                # of device arrays are host arrays, beside which the device step size raised "Expected
                # all tensors to be on the same device")
                hx, hprev, hsize = np.array(x), np.array(prev), np.array(size)
                _rprop(hx, np.array(g), hprev, hsize, dt, etaminus, etaplus, lo, hi)
                x[...], prev[...], size[...] = hx, hprev, hsize
            _finish([p, state["prev"], state["step_size"]])


def _rprop(x, g, prev, size, dt, etaminus, etaplus, lo, hi):
    """Rprop's update of x, prev and size, in place."""
    sign = np.sign(g * prev)
    flip = sign < 0
    sign = np.where(sign > 0, dt(etaplus), np.where(flip, dt(etaminus), np.where(sign == 0, dt(1), sign)))
    size *= sign
    np.clip(size, dt(lo), dt(hi), out=size)
    g = np.where(sign == dt(etaminus), dt(0), g)
    x += np.sign(g) * dt(-1) * size
    prev[...] = g


class ASGD(Optimizer):
    """Averaged SGD: p <- p (1 - lambd eta) - eta g, with eta = lr / (1 + lambd lr t)^alpha, and a
    running average ax of p from step t0 on (ax = p before it)."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _check_options("ASGD", lr, differentiable, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            lr, lambd, alpha, t0 = _scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"]
            state = self.state[p]
            if len(state) == 0:           # eta and mu are float32 scalars, as torch's state
                state.update(step=_new_step(), eta=Tensor._make(np.array(lr, np.float32), D.float32),
                             mu=Tensor._make(np.ones((), np.float32), D.float32), ax=_zeros_like(p))
            step = _step(state)
            if group["weight_decay"] != 0:
                g = g + dt(group["weight_decay"]) * x
            eta = float(state["eta"]._data)
            x *= dt(1 - lambd * eta)
            x += dt(-eta) * g
            ax, mu = state["ax"]._data, float(state["mu"]._data)
            if mu != 1:
                ax += (x - ax) * dt(mu)
            else:
                ax[...] = x
            state["eta"]._data[...] = np.float32(lr / ((1 + lambd * lr * step) ** alpha))
            state["mu"]._data[...] = np.float32(1 / max(1, step - t0))
            _finish([p, state["ax"], state["eta"], state["mu"]])


class Adafactor(Optimizer):
    """Adam's second moment kept factored: for a matrix (the last two dims of a tensor) a running
    mean of g^2 per row and per column, their outer product over the rows' mean estimating it;
    a vector keeps it whole. The step is the relative one, alpha = max(eps2, RMS(p)) * min(lr,
    t^-1/2), the update g / sqrt(v) clipped to RMS d; beta2 rises as 1 - t^beta2_decay. No first
    moment. In torch's order and precision (single-tensor)."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        for ok, msg in ((0.0 <= _scalar(lr), f"Learning rate should be >= 0 but is: {lr}"),
                        (0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}"),
                        (eps[0] is None or 0.0 <= eps[0], f"epsilon1 should be >= 0 but is: {eps[0]}"),
                        (0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}"),
                        (1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}"),
                        (0.0 <= weight_decay, f"weight_decay should be >= 0 but is: {weight_decay}")):
            if not ok:
                raise ValueError(msg)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def step(self, closure=None):
        return self._run_step(closure, self._update)

    def _update(self):
        for group, p, x, g, dt in _grads(self):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _new_step()
                if g.ndim > 1:
                    state["row_var"] = Tensor._make(np.zeros(g.shape[:-1] + (1,), x.dtype), p._dtype)
                    state["col_var"] = Tensor._make(np.zeros(g.shape[:-2] + (1,) + g.shape[-1:], x.dtype),
                                                    p._dtype)
                else:
                    state["variance"] = _zeros_like(p)
            lr = _scalar(group["lr"])
            # a tensor lr stays one in torch's arithmetic: the rates computed from it are its
            # dtype's numbers (float32's)
            num = group["lr"]._data.dtype.type if isinstance(group["lr"], Tensor) else float
            eps1, eps2 = group["eps"]
            if eps1 is None:
                eps1 = D.finfo(p._dtype).eps
            t = _step(state)
            one_minus_beta2 = t ** group["beta2_decay"]
            rho = num(lr) if not 1 / (t ** 0.5) < lr else 1 / (t ** 0.5)
            alpha = num(max(eps2, float(np.linalg.norm(x.reshape(-1))) / (x.size ** 0.5))) * rho
            if group["weight_decay"] != 0:
                x *= dt(num(1) - num(lr) * num(group["weight_decay"]))
            if g.ndim > 1:
                row, col = state["row_var"]._data, state["col_var"]._data
                row_mean = np.sum(g * g, -1, keepdims=True) / dt(g.shape[-1])
                _lerp_(row, row_mean, one_minus_beta2, dt)
                col_mean = np.sum(g * g, -2, keepdims=True) / dt(g.shape[-2])
                _lerp_(col, col_mean, one_minus_beta2, dt)
                est = np.matmul(row, col)
                est /= np.maximum(row.mean(-2, keepdims=True, dtype=x.dtype), dt(eps1))
                moments = [state["row_var"], state["col_var"]]
            else:
                v = state["variance"]._data
                _lerp_(v, g * g, one_minus_beta2, dt)
                est = v.copy()
                moments = [state["variance"]]
            upd = 1 / np.sqrt(np.maximum(est, dt(eps1 * eps1)))
            upd *= g
            denom = max(1.0, float(np.linalg.norm(upd.reshape(-1))) / ((upd.size ** 0.5) * group["d"]))
            x += upd * dt(-alpha / type(alpha)(denom))
            _finish([p] + moments)

"""Derivatives at the corners against torch: first and second derivatives (autograd.grad with
create_graph=True, twice) at 0, -0.0, the kinks, +-inf, NaN and denormals, torch's grad_fn
names of the first gradient, in-place forms that write over inf and NaN, and the optimizers
and learning-rate schedules whose order of operations decides the last bits.

Each point is a tensor of its own: torch's CPU kernels take a vectorized path for long
tensors whose value at NaN may differ from the scalar formula (elu_backward, hardswish_backward
give NaN there and the formula gives the slope); one element runs the formula, as torch's
CUDA kernels do at any length."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

SPECIAL = [-math.inf, -1.0, -0.0, 0.0, 1.0, math.inf, math.nan]


def _np(t):
    return None if t is None else t.detach().numpy().copy()


def _derivs(m, f, point, dtype, second=True):
    """(value, first gradient, does it require grad, its grad_fn name, second derivative) of f at
    a one-element tensor."""
    x = m.tensor([point], dtype=getattr(m, dtype), requires_grad=True)
    y = f(m, x)
    g, = m.autograd.grad(y.sum(), x, create_graph=True)
    gg = None
    if second and g.requires_grad:
        gg, = m.autograd.grad(g.sum(), x, allow_unused=True)
    name = None if g.grad_fn is None else g.grad_fn.name()
    return _np(y), _np(g), g.requires_grad, name, _np(gg)


def _same_bits(t, g):
    """Equal values, NaN where NaN, and the same sign of zero."""
    if t is None or g is None:
        return t is None and g is None
    return t.shape == g.shape and t.dtype == g.dtype and bool(np.all(
        ((t == g) & (np.signbit(t) == np.signbit(g))) | (np.isnan(t) & np.isnan(g))))


def _close(t, g, dtype):
    if t is None or g is None:
        return t is None and g is None
    tol = 1e-12 if dtype == "float64" else 1e-6
    return bool(np.all(np.isclose(g, t, rtol=tol, atol=0, equal_nan=True)))


def check_derivs(f, points=SPECIAL, dtypes=("float64", "float32"), second=True, exact=True, names=True):
    for dtype in dtypes:
        for p in points:
            t, g = _derivs(torch, f, p, dtype, second), _derivs(tg, f, p, dtype, second)
            for what, a, b in zip(("value", "grad", "grad requires grad", "grad_fn name", "second derivative"),
                                  t, g):
                if what == "grad_fn name" and not names:
                    continue
                if isinstance(a, np.ndarray):
                    ok = _same_bits(a, b) if exact else _close(a, b, dtype)
                else:
                    ok = a == b
                assert ok, f"{what} at {p} in {dtype}: torch {a}, tracegrad {b}"


# == in-place writes over inf and NaN ======================================================================

@pytest.mark.parametrize("write", ["fill_", "zero_", "copy_", "copy_grad", "setitem"])
def test_inplace_overwrite_of_a_history_with_inf_and_nan(write):
    # the overwritten history is linked with a zero gradient; self * 0 made it NaN where self was inf or NaN
    def run(m):
        x = m.tensor([-math.inf, 1.0, math.nan, math.inf], dtype=m.float64, requires_grad=True)
        s = m.tensor([3.0, 4.0, 5.0, 6.0], dtype=m.float64, requires_grad=True)
        y = x * 1
        if write == "fill_":
            y.fill_(2.0)
        elif write == "zero_":
            y.zero_()
        elif write == "copy_":
            y.copy_(s.detach())
        elif write == "copy_grad":
            y.copy_(s)
        else:
            y[:] = 5.0
        (y * m.arange(4, dtype=m.float64)).sum().backward()
        return _np(y), _np(x.grad), _np(s.grad), y.grad_fn.name()
    t, g = run(torch), run(tg)
    for a, b in zip(t[:3], g[:3]):
        assert _same_bits(a, b), (t, g)
    assert t[3] == g[3]


# == elu, celu, selu ======================================================================================

CORNERS = [-math.inf, -0.0, 0.0, math.inf, math.nan]
GENERIC = [-2.5, -1.0, -0.3, 0.7, 2.0]

ELUS = {
    "elu": lambda m, x: m.nn.functional.elu(x),
    "elu_alpha": lambda m, x: m.nn.functional.elu(x, alpha=2.0),
    "celu": lambda m, x: m.nn.functional.celu(x),
    "celu_alpha": lambda m, x: m.nn.functional.celu(x, alpha=0.3),
    "selu": lambda m, x: m.nn.functional.selu(x),
    "elu_inplace": lambda m, x: m.nn.functional.elu(x * 1, alpha=0.5, inplace=True),
    "elu_": lambda m, x: m.nn.functional.elu_(x * 1),
    "celu_inplace": lambda m, x: m.nn.functional.celu(x * 1, alpha=0.3, inplace=True),
    "selu_": lambda m, x: m.nn.functional.selu_(x * 1),
    "module": lambda m, x: m.nn.ELU(alpha=1.5)(x) + m.nn.SELU()(x) + m.nn.CELU(0.7)(x),
}


@pytest.mark.parametrize("name", ELUS)
def test_elu_family_first_and_second_derivatives_at_the_corners(name):
    # torch's elu_double_backward is zero at x == 0 (the derivative of the composite was alpha * scale
    # there), its elu_backward gives the positive slope at NaN, and the first gradient's grad_fn is
    # EluBackwardBackward0 (it was AddBackward0)
    check_derivs(ELUS[name], CORNERS)
    check_derivs(ELUS[name], GENERIC, exact=False)


def test_elu_family_grad_fn_names():
    def run(m):
        x = m.tensor([-1.0, 2.0], dtype=m.float64, requires_grad=True)
        F = m.nn.functional
        return [f(x * 1).grad_fn.name() for f in (F.elu, F.selu, lambda v: F.celu(v, 0.5), F.elu_, F.selu_,
                                                    lambda v: F.celu(v, 0.5, inplace=True))]
    assert run(tg) == run(torch)


def test_celu_derivative_scales_by_one_over_alpha_rounded_to_float():
    # torch's celu backward is elu_backward(grad, alpha, 1, 1.0 / alpha.toFloat(), ...): in float64 too
    def run(m):
        x = m.tensor([-1.0, -0.2], dtype=m.float64, requires_grad=True)
        g, = m.autograd.grad(m.nn.functional.celu(x, alpha=0.3).sum(), x)
        return g.numpy()
    np.testing.assert_array_equal(run(tg), run(torch))


def test_elu_derivatives_with_a_gradient_that_requires_grad():
    # the second derivative for grad_output is elu_backward again
    def run(m):
        x = m.tensor([-1.5, -0.0, 0.0, 0.5], dtype=m.float64, requires_grad=True)
        v = m.tensor([0.3, -2.0, 1.5, 4.0], dtype=m.float64, requires_grad=True)
        y = m.nn.functional.elu(x, alpha=0.7)
        g, = m.autograd.grad(y, x, v, create_graph=True)
        gx, gv = m.autograd.grad((g * g).sum(), (x, v))
        return g.detach().numpy(), gx.numpy(), gv.numpy()
    for a, b in zip(run(torch), run(tg)):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=0)


# == hardsigmoid, hardswish ===============================================================================

KINKS = [-math.inf, -3.0, -0.0, 0.0, 3.0, math.inf, math.nan]
HARD_GENERIC = [-4.0, -2.9, -1.0, 0.5, 2.5, 3.5]

HARDS = {
    "hardswish": lambda m, x: m.nn.functional.hardswish(x),
    "hardswish_inplace": lambda m, x: m.nn.functional.hardswish(x * 1, inplace=True),
    "hardswish_module": lambda m, x: m.nn.Hardswish()(x),
}


@pytest.mark.parametrize("name", HARDS)
def test_hardswish_first_and_second_derivatives_at_the_kinks(name):
    # torch's hardswish_backward: x <= -3 ? 0 : x < 3 ? g * (x / 3 + 0.5) : g (it was NaN at +-inf and NaN,
    # x / 3 + 0.5 is 1 ulp from the (2x + 3) / 6 it was), its own derivative zero at the kinks and at NaN,
    # and the first gradient's grad_fn HardswishBackwardBackward0 (it was AddBackward0)
    check_derivs(HARDS[name], KINKS)
    check_derivs(HARDS[name], HARD_GENERIC, exact=False)


@pytest.mark.parametrize("inplace", [False, True])
def test_hardsigmoid_first_derivative_and_its_missing_second(inplace):
    # torch has no derivative for hardsigmoid_backward: the first gradient requires grad (NotImplemented)
    # and differentiating it raises; tracegrad gave a second derivative torch does not have
    f = lambda m, x: m.nn.functional.hardsigmoid(x * 1, inplace=inplace)  # noqa: E731
    check_derivs(f, KINKS, second=False)
    check_derivs(f, HARD_GENERIC, second=False, exact=False)
    for m in (torch, tg):
        x = m.tensor([-1.0, 0.5], dtype=m.float64, requires_grad=True)
        g, = m.autograd.grad(f(m, x).sum(), x, create_graph=True)
        with pytest.raises(RuntimeError, match="derivative for aten::hardsigmoid_backward is not implemented"):
            m.autograd.grad(g.sum(), x)


def test_hardswish_second_derivative_for_a_gradient_that_requires_grad():
    def run(m):
        x = m.tensor([-3.0, -1.5, 0.0, 3.0, 4.0], dtype=m.float64, requires_grad=True)
        v = m.tensor([0.3, -2.0, 1.5, 4.0, 2.0], dtype=m.float64, requires_grad=True)
        g, = m.autograd.grad(m.nn.functional.hardswish(x), x, v, create_graph=True)
        gx, gv = m.autograd.grad((g * g).sum(), (x, v))
        return g.detach().numpy(), gx.numpy(), gv.numpy()
    for a, b in zip(run(torch), run(tg)):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=0)


@pytest.mark.parametrize("fn", ["hardswish", "hardsigmoid"])
def test_hard_activations_in_place_record_their_own_node(fn):
    # torch's HardswishBackward0 (not CopyBackwards), reading the input from before the write (it
    # raised "modified by an inplace operation")
    def run(m):
        x = m.tensor([-4.0, -1.0, 2.0, 5.0], dtype=m.float64, requires_grad=True)
        y = x * 1
        getattr(m.nn.functional, fn)(y, inplace=True)
        y.sum().backward()
        return y.grad_fn.name(), _np(y), _np(x.grad)
    t, g = run(torch), run(tg)
    assert t[0] == g[0]
    for a, b in zip(t[1:], g[1:]):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=0)


# == prelu ================================================================================================

PRELU_X = [-2.0, -0.0, 0.0, 1.5, math.inf, -math.inf, math.nan, 3.0]


@pytest.mark.parametrize("shape, weight", [((8,), [0.25]), ((2, 2, 2), [0.25, -0.5]), ((4, 2), [1.5, -0.5]),
                                           ((2, 4), [0.3])])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_prelu_first_and_second_derivatives(shape, weight, dtype):
    # torch's _prelu_kernel_backward: the weight's gradient is x > 0 ? 0 : x * g (it was NaN at x = inf);
    # its double backward masks with x >= 0 (the weight's second derivative counted x == 0) and the
    # first gradients' grad_fn is PreluKernelBackwardBackward0 (it was AddBackward0)
    def run(m):
        x = m.tensor(PRELU_X, dtype=getattr(m, dtype)).reshape(shape).requires_grad_()
        w = m.tensor(weight, dtype=getattr(m, dtype), requires_grad=True)
        y = m.nn.functional.prelu(x, w)
        v = (m.ones_like(y) * 1.5).requires_grad_()
        gx, gw = m.autograd.grad(y, (x, w), v, create_graph=True)
        out = [_np(y), _np(gx), _np(gw), y.grad_fn.name(), gx.grad_fn.name()]
        for target in ((gx * gx).sum() + (gw * gw).sum(), (gx * 2).sum(), (gw * 3).sum()):
            out += [_np(a) for a in m.autograd.grad(target, (x, w, v), allow_unused=True, retain_graph=True)]
        return out
    t, g = run(torch), run(tg)
    for k, (a, b) in enumerate(zip(t, g)):
        assert (_same_bits(a, b) if isinstance(a, np.ndarray) else a == b), (k, a, b)


def test_prelu_module_double_backward_matches_torch():
    def run(m):
        m.manual_seed(0)
        x = m.tensor([[-1.0, 2.0, -3.0], [0.5, -0.25, 0.0]], dtype=m.float64, requires_grad=True)
        layer = m.nn.PReLU(3, init=0.2).double()
        y = layer(x)
        g, = m.autograd.grad((y * y).sum(), x, create_graph=True)
        g.sum().backward()
        return _np(x.grad), _np(layer.weight.grad)
    for a, b in zip(run(torch), run(tg)):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=0)


# == learning-rate schedules ===============================================================================

def _sched_optimizer(m, groups=2):
    params = [m.nn.Parameter(m.zeros(2)) for _ in range(groups)]
    return m.optim.SGD([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)], lr=0.1, momentum=0.9)


SCHEDULES = {
    "StepLR": lambda S, o, **k: S.StepLR(o, 7, gamma=0.5, **k),
    "MultiStepLR": lambda S, o, **k: S.MultiStepLR(o, [3, 9, 9, 20], gamma=0.3, **k),
    "ExponentialLR": lambda S, o, **k: S.ExponentialLR(o, 0.93, **k),
    "CosineAnnealingLR": lambda S, o, **k: S.CosineAnnealingLR(o, 13, eta_min=0.001, **k),
    "CosineAnnealingWarmRestarts": lambda S, o, **k: S.CosineAnnealingWarmRestarts(o, 5, T_mult=2, eta_min=0.01, **k),
    "OneCycleLR": lambda S, o, **k: S.OneCycleLR(o, max_lr=0.5, total_steps=60, **k),
    "CyclicLR": lambda S, o, **k: S.CyclicLR(o, 0.01, 0.3, step_size_up=4, mode="triangular2", **k),
    "LinearLR": lambda S, o, **k: S.LinearLR(o, start_factor=0.25, total_iters=9, **k),
    "ConstantLR": lambda S, o, **k: S.ConstantLR(o, factor=0.3, total_iters=6, **k),
    "PolynomialLR": lambda S, o, **k: S.PolynomialLR(o, total_iters=17, power=1.7, **k),
    "LambdaLR": lambda S, o, **k: S.LambdaLR(o, lambda e: 0.95 ** e + 0.01 * (e % 3), **k),
    "MultiplicativeLR": lambda S, o, **k: S.MultiplicativeLR(o, lambda e: 0.97 if e % 2 else 1.01, **k),
}


def _lrs(o):
    return [g["lr"] for g in o.param_groups]


def _same_schedule(run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, g = run(torch), run(tg)
    assert t == g, next((k, a, b) for k, (a, b) in enumerate(zip(t, g)) if a != b) if len(t) == len(g) else (t, g)


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_over_fifty_steps(name):
    def run(m):
        o = _sched_optimizer(m)
        s = SCHEDULES[name](m.optim.lr_scheduler, o)
        out = [_lrs(o) + s.get_last_lr()]
        for _ in range(50):
            o.step()
            s.step()
            out.append(_lrs(o) + s.get_last_lr() + [g["momentum"] for g in o.param_groups])
        return out
    _same_schedule(run)


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_resumed_with_last_epoch(name):
    # torch's constructor steps in its initial mode (_is_initial): a chainable form keeps the rates
    # there, so a schedule made with last_epoch=k over an optimizer at epoch k goes on from k (the
    # exponential, cosine, linear, polynomial and multiplicative forms moved one step ahead of it)
    def run(m):
        o = _sched_optimizer(m)
        s = SCHEDULES[name](m.optim.lr_scheduler, o)
        for _ in range(7):
            o.step()
            s.step()
        out = []
        o2 = _sched_optimizer(m)
        o2.load_state_dict(o.state_dict())
        s2 = SCHEDULES[name](m.optim.lr_scheduler, o2, last_epoch=7)
        out.append(_lrs(o2) + s2.get_last_lr())
        s3 = SCHEDULES[name](m.optim.lr_scheduler, o, last_epoch=7)     # over the same optimizer, no state
        out.append(_lrs(o) + s3.get_last_lr())
        s2.load_state_dict(s.state_dict())
        for _ in range(20):
            o2.step()
            s2.step()
            o.step()
            s3.step()
            out.append(_lrs(o2) + s2.get_last_lr() + _lrs(o))
        return out
    _same_schedule(run)


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_stepped_with_an_epoch(name):
    # the deprecated step(epoch): the closed form where there is one
    def run(m):
        o = _sched_optimizer(m)
        s = SCHEDULES[name](m.optim.lr_scheduler, o)
        out = []
        for e in [1, 2, 5, 3, 10, 0, 7, 20, 45, 8]:
            o.step()
            s.step(e)
            out.append(_lrs(o) + s.get_last_lr())
        return out
    _same_schedule(run)


def test_schedules_sharing_an_optimizer_and_composed():
    def run(m):
        S = m.optim.lr_scheduler
        o = _sched_optimizer(m, 1)
        a, b, c = S.ExponentialLR(o, 0.9), S.MultiplicativeLR(o, lambda e: 0.99), S.PolynomialLR(o, 10, 2.0)
        o2 = _sched_optimizer(m)
        seq = S.SequentialLR(o2, [S.ConstantLR(o2, factor=0.5, total_iters=4), S.ExponentialLR(o2, 0.9),
                                  S.CosineAnnealingLR(o2, 10)], milestones=[5, 12])
        o3 = _sched_optimizer(m)
        chain = S.ChainedScheduler([S.ExponentialLR(o3, 0.95), S.StepLR(o3, 4, 0.5), S.LinearLR(o3, 0.5, total_iters=6)])
        o4 = _sched_optimizer(m)
        plateau = S.ReduceLROnPlateau(o4, "min", factor=0.5, patience=2, threshold=0.01, cooldown=1,
                                      min_lr=[0.001, 0.002])
        losses = [1, 0.9, 0.95, 0.95, 0.95, 0.95, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49, 0.5, 0.5] * 3
        out = []
        for loss in losses:
            for opt in (o, o2, o3, o4):
                opt.step()
            for s in (a, b, c, seq, chain):
                s.step()
            plateau.step(loss)
            out.append(_lrs(o) + a.get_last_lr() + b.get_last_lr() + c.get_last_lr() + _lrs(o2) + seq.get_last_lr() +
                       _lrs(o3) + chain.get_last_lr() + _lrs(o4) + [plateau.num_bad_epochs, plateau.best])
        return out
    _same_schedule(run)


# == losses, sinc, var: composites whose derivatives met inf * 0 ==========================================

LOSS_POINTS = [-math.inf, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, math.inf]


@pytest.mark.parametrize("name", ["smooth_l1", "smooth_l1_beta", "huber", "huber_delta"])
def test_smooth_l1_and_huber_derivatives_at_the_corners(name):
    # torch's kernels: the gradient at x = -inf is -1 (it was NaN: the quadratic side's x / beta times the
    # mask's 0), NaN at NaN, and the second derivative at x == 0 is 1 / beta (abs's zero slope gave 0)
    f = {"smooth_l1": lambda m, x: m.nn.functional.smooth_l1_loss(x, m.zeros_like(x)),
         "smooth_l1_beta": lambda m, x: m.nn.functional.smooth_l1_loss(x, m.full_like(x, 0.5), beta=2.0),
         "huber": lambda m, x: m.nn.functional.huber_loss(x, m.zeros_like(x)),
         "huber_delta": lambda m, x: m.nn.functional.huber_loss(x, m.full_like(x, -0.5), delta=0.5)}[name]
    check_derivs(f, LOSS_POINTS, names=False)
    check_derivs(f, [math.nan], names=False, second=False)     # (torch's second derivative there is 0)


def test_smooth_l1_and_huber_with_reductions_match_torch():
    rs = np.random.RandomState(0)
    x, t = rs.randn(4, 5) * 2, rs.randn(4, 5)
    x[0, :3] = t[0, :3]                                    # exact zeros of x - t
    for name, kw in [("smooth_l1_loss", dict(beta=0.7)), ("huber_loss", dict(delta=0.7))]:
        for reduction in ("mean", "sum", "none"):
            out = []
            for m in (torch, tg):
                xm = m.tensor(x, requires_grad=True)
                y = getattr(m.nn.functional, name)(xm, m.tensor(t), reduction=reduction, **kw)
                g, = m.autograd.grad(y.sum(), xm, create_graph=True)
                gg, = m.autograd.grad((g * g).sum(), xm)
                out.append((_np(y), _np(g), _np(gg)))
            for a, b in zip(*out):
                np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)


def test_sinc_gradient_at_denormals():
    # torch's sinc_backward is 0 where pi * x * x is 0: at a denormal x it was 0 / 0 = NaN
    check_derivs(lambda m, x: m.sinc(x), [5e-324, -5e-324, 1e-310, 1e-170, 0.0], dtypes=("float64",),
                 second=False, names=False)
    check_derivs(lambda m, x: m.sinc(x), [1e-45, 1e-23, 0.0], dtypes=("float32",), second=False, names=False)
    check_derivs(lambda m, x: m.sinc(x), [0.3, -2.5, 1e-150], second=False, names=False, exact=False)


@pytest.mark.parametrize("values, correction", [([math.inf], 1), ([1.0, math.inf], 2), ([-math.inf, 1.0], 2),
                                                ([math.nan, 1.0], 3), ([1.0, 2.0], 2), ([math.inf, math.inf], 2)])
def test_var_and_std_gradient_without_degrees_of_freedom(values, correction):
    # torch's var_backward over all elements with no degrees of freedom: where(x == mean, nan, inf); an
    # infinite x equal to its mean gave inf (x - mean == 0 was the test)
    def run(m):
        out = []
        for fn in ("var", "std"):
            x = m.tensor(values, dtype=m.float64, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                getattr(x, fn)(correction=correction).backward()
            out.append(_np(x.grad))
        return out
    for a, b in zip(run(torch), run(tg)):
        assert _same_bits(a, b), (a, b)


@pytest.mark.parametrize("fn", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("other", [0.5, -math.inf, math.inf])
def test_logaddexp_derivatives_at_infinities_and_ties(fn, other):
    # torch's derivative g / (1 + exp(other - x)): 1 at x = inf (it was inf / inf = NaN), and its second
    # derivative at a tie x == other is 1/4 (base e)
    # (the values to an ulp: torch's exp and log1p are not numpy's)
    f = lambda m, x: getattr(m, fn)(x, m.tensor([other], dtype=x.dtype))  # noqa: E731
    check_derivs(f, [-math.inf, -3.0, -0.0, 0.0, 0.5, 2.0, math.inf, math.nan], exact=False)


def test_logaddexp_values_and_gradients_match_torch():
    rs = np.random.RandomState(0)
    a, b = rs.randn(500) * 10, rs.randn(500) * 10
    b[:20] = a[:20]
    for dtype, tol in (("float64", 1e-13), ("float32", 1e-5)):
        for fn in ("logaddexp", "logaddexp2"):
            out = []
            for m in (torch, tg):
                x = m.tensor(a, dtype=getattr(m, dtype), requires_grad=True)
                y = m.tensor(b, dtype=getattr(m, dtype), requires_grad=True)
                z = getattr(m, fn)(x, y)
                z.sum().backward()
                out.append((_np(z), _np(x.grad), _np(y.grad), z.grad_fn.name()))
            t, g = out
            assert t[3] == g[3]
            for u, v in zip(t[:3], g[:3]):
                np.testing.assert_allclose(v, u, rtol=tol, atol=0)


def test_gaussian_nll_loss_with_an_infinite_variance():
    # the clamp of var (no autograd) was var + (clamped - var).detach(): inf + (inf - inf) = NaN where
    # torch's loss is inf and its gradients 0
    def run(m):
        x = m.tensor([1.0, 0.5, -2.0], dtype=m.float64, requires_grad=True)
        var = m.tensor([math.inf, 1e-9, 2.0], dtype=m.float64, requires_grad=True)
        loss = m.nn.functional.gaussian_nll_loss(x, m.zeros(3, dtype=m.float64), var, reduction="none")
        gx, gv = m.autograd.grad(loss.sum(), (x, var))
        return _np(loss), _np(gx), _np(gv)
    for a, b in zip(run(torch), run(tg)):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=0)


@pytest.mark.parametrize("values", [[-math.inf, 1.0, 2.0], [1.0, math.inf], [math.inf, math.inf], [5.0],
                                    [1.0, 2.0, 4.0, 8.0]])
def test_trapezoid_with_an_even_spacing(values):
    # torch's (sum - (first + last) / 2) * dx: an infinite end gives NaN (the sum of the pairs gave inf)
    def run(m):
        y = m.tensor(values, dtype=m.float64, requires_grad=True)
        out = m.trapezoid(y, dx=0.5)
        out.backward()
        return _np(out), _np(y.grad)
    for a, b in zip(run(torch), run(tg)):
        assert _same_bits(a, b), (a, b)


# == in-place activations on a tensor with history ========================================================

INPLACE = {
    "hardtanh": lambda m, y: m.nn.functional.hardtanh(y, -0.5, 0.5, inplace=True),
    "relu6": lambda m, y: m.nn.functional.relu6(y, inplace=True),
    "leaky_relu": lambda m, y: m.nn.functional.leaky_relu(y, 0.2, inplace=True),
    "leaky_relu_negative": lambda m, y: m.nn.functional.leaky_relu(y, -0.2, inplace=True),
    "threshold": lambda m, y: m.nn.functional.threshold(y, 0.5, 2.0, inplace=True),
    "rrelu_eval": lambda m, y: m.nn.functional.rrelu(y, training=False, inplace=True),
    "silu": lambda m, y: m.nn.functional.silu(y, inplace=True),
    "mish": lambda m, y: m.nn.functional.mish(y, inplace=True),
    "hardswish": lambda m, y: m.nn.functional.hardswish(y, inplace=True),
    "elu": lambda m, y: m.nn.functional.elu(y, inplace=True),
    "leaky_relu_on_a_view": lambda m, y: m.nn.functional.leaky_relu(y[1:4], 0.2, inplace=True),
    "silu_on_a_view": lambda m, y: m.nn.functional.silu(y[1:4], inplace=True),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_activation_of_a_tensor_with_history(name):
    # copy_ of the out-of-place result kept the nodes that read the input, which the write changed: backward
    # raised "modified by an inplace operation" (nn.LeakyReLU(inplace=True) after a Linear); torch's nodes
    # are HardtanhBackward0, LeakyReluBackward1 (whose backward raises for a negative slope), ...
    def run(m):
        x = m.tensor([-3.0, -0.3, 0.0, 0.3, 0.5, 3.0], dtype=m.float64, requires_grad=True)
        y = x * 1
        INPLACE[name](m, y)
        try:
            g, = m.autograd.grad((y * m.arange(6, dtype=m.float64)).sum(), x, create_graph=True)
        except RuntimeError as e:
            return ("raised", str(e))
        gg = m.autograd.grad(g.sum(), x, allow_unused=True)[0] if g.requires_grad else None
        return y.grad_fn.name(), _np(y), _np(g), g.requires_grad, _np(gg)
    t, g = run(torch), run(tg)
    assert len(t) == len(g) and t[0] == g[0], (t, g)
    for a, b in zip(t[1:], g[1:]):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
        else:
            assert a == b, (t, g)


def test_inplace_activation_modules_train():
    def run(m):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.LeakyReLU(0.1, inplace=True), m.nn.Linear(4, 4),
                              m.nn.ReLU6(inplace=True), m.nn.Linear(4, 4), m.nn.SiLU(inplace=True),
                              m.nn.Linear(4, 4), m.nn.Hardtanh(inplace=True), m.nn.Linear(4, 1)).double()
        for p, v in zip(net.parameters(), _PARAMS):
            with m.no_grad():
                p.copy_(m.tensor(v))
        x = m.tensor(np.linspace(-2, 2, 15).reshape(5, 3))
        net(x).sum().backward()
        return [_np(p.grad) for p in net.parameters()]
    for a, b in zip(run(torch), run(tg)):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


_PARAMS = [np.random.RandomState(k).randn(*s) for k, s in enumerate([(4, 3), (4,), (4, 4), (4,), (4, 4), (4,),
                                                                      (4, 4), (4,), (1, 4), (1,)])]


@pytest.mark.parametrize("method, args", [("log10_", ()), ("sinc_", ()), ("logit_", ()), ("deg2rad_", ()),
                                          ("addcdiv_", "tensors"), ("frac_", ())])
def test_inplace_decompositions_of_a_tensor_with_history(method, args):
    # log10_ (log(x) / ln 10 written back) raised "modified by an inplace operation" at backward
    def run(m):
        x = m.tensor([0.2, 0.7, 0.4], dtype=m.float64, requires_grad=True)
        y = x * 1
        extra = (x * 2, x + 1) if args == "tensors" else ()
        getattr(y, method)(*extra)
        g, = m.autograd.grad((y * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)).sum(), x)
        return _np(y), _np(g)
    for a, b in zip(run(torch), run(tg)):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=0)


def test_binary_cross_entropy_derivatives_at_the_clamp():
    # torch's binary_cross_entropy_backward divides by max((1 - p) p, EPSILON) with EPSILON the float 1e-12
    # (float64 too), and is an op of its own whose double backward adds eps to p and 1 - p: at p = 0 the
    # second derivative is t / eps^2 (3e23), where the clamp's zero slope gave 1e12
    p = np.array([0.0, 1.0, 1e-14, 0.3, 0.999, 0.5])
    t = np.array([0.3, 0.6, 0.3, 0.3, 1.0, 0.5])
    for dtype in ("float64", "float32"):
        out = []
        for m in (torch, tg):
            x = m.tensor(p, dtype=getattr(m, dtype), requires_grad=True)
            tt = m.tensor(t, dtype=getattr(m, dtype), requires_grad=True)
            y = m.nn.functional.binary_cross_entropy(x, tt, reduction="sum")
            v = m.ones_like(y, requires_grad=True)
            gx, gt = m.autograd.grad(y, (x, tt), v, create_graph=True)
            second = m.autograd.grad((gx * gx).sum() + (gt * gx).sum(), (x, tt, v))
            out.append([_np(gx), _np(gt), gx.grad_fn.name()] + [_np(a) for a in second])
        t_, g_ = out
        assert t_[2] == g_[2]
        for a, b in zip(t_[:2] + t_[3:], g_[:2] + g_[3:]):
            np.testing.assert_allclose(b, a, rtol=1e-13 if dtype == "float64" else 1e-6, atol=0)


def test_cumsum_never_gives_negative_zero():
    # torch's running sum starts from +0.0: np.cumsum kept a leading -0.0
    for dtype in ("float64", "float32", "float16"):
        def run(m):
            x = m.tensor([[-0.0, -0.0, 1.0, -1.0, -0.0], [-0.0, 2.0, -0.0, -2.0, -0.0]], dtype=getattr(m, dtype))
            return _np(m.cumsum(x, 1)), _np(m.cumsum(x, 0))
        for a, b in zip(run(torch), run(tg)):
            assert _same_bits(a, b), (dtype, a, b)


@pytest.mark.parametrize("eps", [None, 0.1])
def test_logit_second_derivative_outside_its_range(eps):
    # torch's derivative where(lo <= x <= hi, g / (x (1 - x)), NaN or 0): the second derivative is 0 outside
    # (it was the quotient's own, -0.75 at x = -1 without eps) and NaN at 0 and 1 with eps (0 * inf)
    f = lambda m, x: m.logit(x, eps)  # noqa: E731
    check_derivs(f, [-math.inf, -1.0, -0.0, 0.0, 1.0, 2.0, math.inf, math.nan], dtypes=("float64",), exact=False,
                 names=eps is None)
    check_derivs(f, [0.05, 0.3, 0.95], dtypes=("float64",), exact=False, names=eps is None)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_inplace_elu_in_half_precision(dtype):
    # torch's EluBackward1 reads the result rounded to the 16-bit dtype (CopyBackwards read x: 0.3679 for 0.3677)
    def run(m):
        x = m.tensor(np.linspace(-3, 2, 41), dtype=getattr(m, dtype), requires_grad=True)
        y = x * 1
        m.nn.functional.selu(y, inplace=True)
        (y * 1.5).sum().backward()
        return y.grad_fn.name(), _np(y.float()), _np(x.grad.float())
    t, g = run(torch), run(tg)
    assert t[0] == g[0]
    for a, b in zip(t[1:], g[1:]):
        np.testing.assert_array_equal(b, a)

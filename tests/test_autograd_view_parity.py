"""Views, in-place ops and what autograd keeps for them, against torch: retain_grad() across
an in-place op through a view, double backward of the relu family, views of detached views,
the `_base` of returned values, and what div saves for backward.

Each case is one function run with `m` = torch and `m` = tracegrad (see test_autograd_parity)."""
import numpy as np
import pytest
import torch

import tracegrad as tg
from test_autograd_parity import same, raises


def _name(x):
    return None if x is None else type(x).__name__


# == retain_grad() follows the tensor to its new grad_fn ====================================================

def test_retain_grad_survives_an_inplace_op_through_a_view():
    # torch moves the retains_grad hook to the base's new grad_fn (CopySlices)
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y[1:].mul_(3)
        (y * m.tensor([1., 2., 3.])).sum().backward()
        return y.grad, x.grad, _name(y.grad_fn)
    same(run)


def test_retain_grad_survives_a_direct_inplace_op():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        (y * m.tensor([1., 2., 3.])).sum().backward()
        return y.grad, x.grad
    same(run)


def test_retain_grad_of_base_and_view_across_view_then_direct_inplace():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 2
        y.retain_grad()
        v = y[:2]
        v.retain_grad()
        y[1:].mul_(3)
        y.mul_(2)
        (y * m.tensor([1., 2., 3.])).sum().backward()
        return y.grad, v.grad, x.grad
    same(run)


def test_retained_view_regenerated_after_its_base_changed():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 2
        y.retain_grad()
        v = y[:2]
        v.retain_grad()
        y[1:].mul_(3)
        (v * m.tensor([1., 2.])).sum().backward()
        return y.grad, v.grad, x.grad
    same(run)


def test_retained_view_modified_in_place():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        y = x * 2
        v = y[1:]
        v.retain_grad()
        v.mul_(3)
        (v * m.tensor([1., 2.])).sum().backward()
        a = v.grad
        x2 = m.tensor([1., 2., 3.], requires_grad=True)
        y2 = x2 * 2
        v2 = y2[1:]
        v2.retain_grad()
        v2.mul_(3)
        y2.sum().backward()             # v2's new grad_fn is not on this path
        return a, y.grad, v2.grad, x2.grad
    same(run)


def test_retain_grad_of_base_through_a_view_of_a_view():
    def run(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.view(2, 2)[1].mul_(3)
        (y * m.tensor([1., 2., 3., 4.])).sum().backward()
        return y.grad, x.grad
    same(run)


# == detach() of a view is no view to autograd ===============================================================

_VIEWS_OF_DETACHED = {
    "view": lambda d: d.view(2, 2),
    "t": lambda d: d.view(2, 2).t(),
    "reshape": lambda d: d.reshape(2, 2),
    "none": lambda d: d[None],
    "expand": lambda d: d[None].expand(2, 4),
    "split": lambda d: d.split(2)[1],
    "unbind": lambda d: d.view(2, 2).unbind()[1],
}


def test_view_of_a_detached_view_needs_no_grad_and_writes_the_shared_storage():
    for name, f in _VIEWS_OF_DETACHED.items():
        def run(m):
            x = m.tensor([1., 2., 3., 4.], requires_grad=True)
            d = x[:].detach()
            v = f(d)
            flags = (v.requires_grad, v.grad_fn is None, v._base is d, d._base is None, d._is_view())
            w = v if name != "expand" else v[0]
            w.mul_(2)
            return flags, x, x._version, d._version, w._version
        same(run)


def test_backward_through_a_view_of_a_detached_view_raises():
    def run(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        v = x[1:].detach().view(3, 1)
        (v * 2).sum().backward()
    raises(run)


def test_inplace_on_a_detached_view_invalidates_what_the_graph_saved():
    def run(m):
        x = m.tensor([1., 2., 3., 4.], requires_grad=True)
        y = x * 1
        z = y.sin()                 # saves y
        y[1:].detach().mul_(2)
        z.sum().backward()
    raises(run)


# == returned values are no views of internal tensors ===================================================

def test_topk_kthvalue_median_return_tensors_of_their_own():
    def run(m):
        out = []
        for f in (lambda x: x.topk(2), lambda x: x.kthvalue(2), lambda x: x.median(0),
                  lambda x: x.kthvalue(2, keepdim=True), lambda x: x.view(2, 2).topk(1, dim=0)):
            x = m.tensor([3., 1., 2., 5.], requires_grad=True)
            r = f(x)
            v, i = r.values, r.indices
            out.append((v._base is None, i._base is None, v._is_view(), i._is_view(), v._version,
                        _name(v.grad_fn)))
            v.mul_(2)                       # the value's own history, no rewritten view
            out.append((_name(v.grad_fn), v._version))
            (v * v).sum().backward()
            out.append(x.grad)
        return out
    same(run)


def test_inplace_on_topk_indices_invalidates_its_backward():
    # (torch's message names the saved [2] indices, tracegrad's the sort's [4] it cut them from)
    for m in (torch, tg):
        x = m.tensor([3., 1., 2., 5.], requires_grad=True)
        r = x.topk(2)
        r.indices.add_(0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            r.values.sum().backward()


def test_ravel_is_a_view_of_a_contiguous_copy():
    def run(m):
        t = m.arange(6.).view(2, 3).t().requires_grad_()
        r = t.ravel()
        c = m.arange(6.).view(2, 3)
        return (r._base is None, r._base is t, _name(r.grad_fn), _name(r.grad_fn.next_functions[0][0]),
                c.ravel()._base is c._base, r)
    same(run)


# == div saves its inputs, as torch's DivBackward0 ========================================================

def _ac(m):
    return (m.tensor([1., 2.], dtype=m.float64, requires_grad=True),
            m.tensor([3., 4.], dtype=m.float64, requires_grad=True))


def test_inplace_on_a_quotient_keeps_its_backward():
    def run(m):
        a, c = _ac(m)
        b = m.tensor([5., -2.], dtype=m.float64)
        y = a / c
        y.mul_(2)
        z = c / b
        z.mul_(3)
        w = 2. / c
        w.mul_(3)
        (y.sum() + z.sum() + w.sum()).backward()
        return a.grad, c.grad
    same(run)


def test_inplace_div_then_another_inplace_op():
    def run(m):
        x, w = _ac(m)
        b = x * 1
        b.div_(w)
        b.neg_()
        (b * b).sum().backward()
        return x.grad, w.grad
    same(run)


def test_inplace_on_normalize_output():
    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], dtype=m.float64, requires_grad=True)
        y = m.nn.functional.normalize(x, dim=1)
        y.mul_(2)
        (y * m.tensor([1., -2.], dtype=m.float64)).sum().backward()
        return x.grad
    same(run)


def test_inplace_on_the_dividend_raises_where_the_divisor_requires_grad():
    def run(m):
        a, c = _ac(m)
        a2 = a * 1
        y = a2 / c
        a2.mul_(2)
        y.sum().backward()
    raises(run)


def test_inplace_on_the_dividend_is_fine_where_the_divisor_needs_no_grad():
    def run(m):
        a, c = _ac(m)
        a2 = a * 1
        y = a2 / c.detach()
        a2.mul_(2)
        y.sum().backward()
        return a.grad
    same(run)


def test_div_second_and_third_order():
    def run(m):
        a, c = _ac(m)
        y = (a / c * m.tensor([1., -3.], dtype=m.float64)).sum()
        ga, gc = m.autograd.grad(y, (a, c), create_graph=True)
        h = m.autograd.grad((ga * gc).sum() + (gc * gc).sum(), (a, c), create_graph=True)
        k = m.autograd.grad(h[1].sum(), (a, c))
        return ga, gc, h, k
    same(run, rtol=1e-12, atol=1e-12)


# == relu's double backward connects x (torch's ThresholdBackwardBackward0) ==============================

def test_relu_double_backward_connects_its_input():
    def run(m):
        x = m.tensor([.5, -4., 0., 2.], dtype=m.float64, requires_grad=True)
        g, = m.autograd.grad(x.relu().sum(), x, create_graph=True)
        first = (g, g.requires_grad, _name(g.grad_fn))
        gg, = m.autograd.grad(g.sum(), x)
        w = m.tensor([2., 3., -1., 5.], dtype=m.float64, requires_grad=True)
        g2, = m.autograd.grad((m.nn.functional.relu(x) * w).sum(), x, create_graph=True)
        second = m.autograd.grad((g2 * g2).sum(), (x, w), allow_unused=True)
        return first, gg, g2, _name(g2.grad_fn), second
    same(run)


def test_relu_third_order_and_inplace_relu():
    def run(m):
        x = m.tensor([.5, -4., 3.], dtype=m.float64, requires_grad=True)
        w = m.tensor([2., 3., -1.], dtype=m.float64, requires_grad=True)
        y = (x * w).relu_()
        g, = m.autograd.grad((y * y).sum(), w, create_graph=True)
        h, = m.autograd.grad(g.sum(), x, create_graph=True)
        k = m.autograd.grad(h.sum(), (x, w), allow_unused=True)
        return g, h, _name(h.grad_fn), k
    same(run)


# == the rest of relu's family: its derivative is an op whose own derivative connects x =================

_RELU_FAMILY = {
    "relu6": lambda F, x: F.relu6(x),
    "hardtanh": lambda F, x: F.hardtanh(x, -2., 3.),
    "leaky_relu": lambda F, x: F.leaky_relu(x, 0.2),
    "leaky_relu_negative_slope": lambda F, x: F.leaky_relu(x, -0.5),
    "threshold": lambda F, x: F.threshold(x, 0.5, -3.),
    "softshrink": lambda F, x: F.softshrink(x, 0.5),
    "hardshrink": lambda F, x: F.hardshrink(x, 0.5),
}
_AT_THE_ENDS = [.5, -4., 7., 0., -2., 3., 6., -3., .25, -.5, 1.5, -1.]


@pytest.mark.parametrize("op", list(_RELU_FAMILY))
def test_relu_family_double_backward_connects_its_input(op):
    """torch's hardtanh_backward, leaky_relu_backward, threshold_backward, softshrink_backward and
    hardshrink_backward have a derivative wrt the input (zeros): the first gradient requires grad
    (HardtanhBackwardBackward0, ...), the second wrt x is zeros, not None, and with a weight the
    second wrt the weight is the mask; a third order through it as torch's."""
    f = _RELU_FAMILY[op]

    def run(m):
        F = m.nn.functional
        x = m.tensor(_AT_THE_ENDS, dtype=m.float64, requires_grad=True)
        y = f(F, x)
        g, = m.autograd.grad(y.sum(), x, create_graph=True)
        first = (_name(y.grad_fn), g, g.requires_grad, _name(g.grad_fn))
        gg, = m.autograd.grad(g.sum(), x)
        w = m.tensor([float(i) - 3 for i in range(12)], dtype=m.float64, requires_grad=True)
        g2, = m.autograd.grad((f(F, x) * w).sum(), x, create_graph=True)
        hx, hw = m.autograd.grad((g2 * g2).sum(), (x, w), create_graph=True)
        third = m.autograd.grad(hw.sum(), (x, w), allow_unused=True)
        return first, gg, g2, _name(g2.grad_fn), hx, hw, third
    same(run)


@pytest.mark.parametrize("op", ["hardtanh", "threshold", "softshrink", "leaky_relu"])
def test_relu_family_gradient_at_nan_and_infinities(op):
    """torch's kernels test `x <= min || x >= max ? 0 : grad` (hardtanh, threshold) and `-l <= x <= l
    ? 0 : grad` (the shrinks): NaN passes the gradient, where the composite's where() gave 0;
    threshold(-inf) is the value (x * 0 + value was NaN)."""
    f = _RELU_FAMILY[op]

    def run(m):
        x = m.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.5, -2.], requires_grad=True)
        y = f(m.nn.functional, x)
        g, = m.autograd.grad(y, x, m.full((6,), 2.0))
        return y, g
    same(run)


@pytest.mark.parametrize("op", list(_RELU_FAMILY))
def test_relu_family_compiled_derivatives_are_eager_ones(op):
    """Compiled, the first derivative (its backward program: a mask and a select) and the
    create_graph derivatives (the backward as a program of its own) are eager's."""
    f = _RELU_FAMILY[op]
    res = []
    for c in (lambda fn: fn, lambda fn: tg.compile(fn, fullgraph=True)):
        fn = c(lambda x, w: (f(tg.nn.functional, x) * w).sum())
        out = []
        for _ in range(2):
            x = tg.tensor(_AT_THE_ENDS, requires_grad=True)
            w = tg.tensor([float(i) - 3 for i in range(12)], requires_grad=True)
            fn(x, w).backward()
            x2 = tg.tensor(_AT_THE_ENDS, requires_grad=True)
            g, = tg.autograd.grad(fn(x2, w), x2, create_graph=True)
            hx, hw = tg.autograd.grad(g.sum(), (x2, w))
            out.append([x.grad.tolist(), w.grad.tolist(), g.tolist(), g.requires_grad, hx.tolist(), hw.tolist()])
        res.append(out)
    assert res[0] == res[1]


def test_relu_family_backward_compiles_to_masks_kept_from_the_forward():
    """A compiled MLP with LeakyReLU, ReLU6 and Hardtanh: the backward reads each 1-byte mask the
    forward computed (piecewise_backward's comparisons are the composite's) and writes its select
    through it (where_zero), with no kernel call in its fused groups, as where()'s derivative did."""
    import io
    tg.manual_seed(0)
    nn = tg.nn
    m = nn.Sequential(nn.Linear(64, 256), nn.LeakyReLU(0.1), nn.Linear(256, 256), nn.ReLU6(),
                      nn.Linear(256, 256), nn.Hardtanh(-2., 2.), nn.Linear(256, 3))
    x = tg.tensor(np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32))
    y = tg.tensor(np.random.default_rng(1).integers(0, 3, 128))
    f = tg.compile(lambda x, y: tg.nn.functional.cross_entropy(m(x), y), fullgraph=True)
    f(x, y).backward()
    out = io.StringIO()
    tg.explain(f, x, y, file=out, verbose=True)
    text = out.getvalue()
    src = text.split("==== generated backward source ====", 1)[1].split("\n====", 1)[0]
    groups = src.split("_group0(lo, hi", 1)[1]
    assert "piecewise" not in src and src.count("where_zero(") == 4
    assert "k_" not in groups and "(recomputed)" not in groups
    fwd = text.split("==== generated forward source ====", 1)[1].split("\n====", 1)[0]
    assert "piecewise" not in fwd and "k_detach" not in fwd

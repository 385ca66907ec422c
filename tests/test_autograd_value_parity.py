"""Values and gradients against torch where they differed in corners: a gradient a hook kept
was later added into, overwrites that dropped the overwritten tensor's (zero) gradient,
ties in median and fmax/fmin, atan2 at the origin, rrelu in evaluation at 0, signed zeros,
and in-place writes through overlapping windows.

Each case is one function run with `m` = torch and `m` = tracegrad. Results compare as
values (NaN equal to NaN, and the sign of a zero counted), dtypes and None where torch
has None."""
import warnings

import numpy as np
import torch

import tracegrad as tg


def _plain(v):
    if isinstance(v, (torch.Tensor, tg.Tensor)):
        d = v.detach()
        return ("tensor", tuple(d.shape), str(d.dtype).replace("torch.", "").replace("tracegrad.", ""),
                np.asarray(d.tolist(), dtype=np.float64))
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_plain(x) for x in v]
    return v


def _assert_same(t, g, rtol, atol, where="result"):
    if isinstance(t, tuple) and t and t[0] == "tensor" and len(t) == 4:
        assert isinstance(g, tuple) and g[:3] == t[:3], (where, g[:3], t[:3])
        np.testing.assert_allclose(g[3], t[3], rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
        zero = t[3] == 0
        assert (np.signbit(g[3][zero]) == np.signbit(t[3][zero])).all(), (where, "sign of zero", g[3], t[3])
    elif isinstance(t, tuple) and len(t) == 2 and t[0] in ("list", "tuple"):
        assert isinstance(g, tuple) and g[0] == t[0] and len(g[1]) == len(t[1]), (where, g, t)
        for k, (a, b) in enumerate(zip(t[1], g[1])):
            _assert_same(a, b, rtol, atol, f"{where}[{k}]")
    else:
        assert g == t, (where, g, t)


def same(fn, rtol=1e-6, atol=1e-12):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = _plain(fn(torch))
        g = _plain(fn(tg))
    _assert_same(t, g, rtol, atol)


# == gradients kept by hooks are not added into later ======================================================

def test_leaf_hook_argument_is_not_changed_by_a_later_backward():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g))
        (x * 2).sum().backward()
        (x * 2).sum().backward()
        return seen, x.grad
    same(run)


def test_leaf_hook_result_kept_by_the_user_is_not_changed():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        kept = []
        x.register_hook(lambda g: kept.append(g * 1) or kept[-1])
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        return kept, x.grad
    same(run)


def test_accumulate_grad_prehook_argument_is_not_changed():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        seen = []
        y = x * 2
        y.grad_fn.next_functions[0][0].register_prehook(lambda gs: seen.append(gs[0]))
        y.sum().backward()
        (x * 2).sum().backward()
        return seen, x.grad
    same(run)


def test_custom_backward_input_and_result_kept_are_not_changed():
    def run(m):
        kept = []

        class Keep(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 1

            @staticmethod
            def backward(ctx, g):
                kept.append(g)
                r = g * 3
                kept.append(r)
                return r
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        (Keep.apply(x) * 2).sum().backward()
        (x * 2).sum().backward()
        return kept, x.grad
    same(run)


def test_custom_backward_returning_its_input_kept():
    def run(m):
        kept = []

        class Pass(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 1

            @staticmethod
            def backward(ctx, g):
                kept.append(g)
                return g
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        (Pass.apply(x) * 2).sum().backward()
        (x * 2).sum().backward()
        return kept, x.grad
    same(run)


def test_grad_held_between_backwards_is_added_into_in_place_as_torch():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        (x * 2).sum().backward()
        g = x.grad
        (x * 2).sum().backward()
        return g, g is x.grad
    same(run)


def test_post_accumulate_hook_and_retain_grad_keep_torch_aliasing():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        seen = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad))
        y = x * 1
        y.retain_grad()
        (y * 2).sum().backward(retain_graph=True)
        first = y.grad
        (y * 2).sum().backward()
        return seen, x.grad, first, y.grad, seen[0] is x.grad
    same(run)


# == overwrites keep the overwritten history, with a zero gradient =========================================

def _name(node):
    return None if node is None else type(node).__name__


def test_fill_with_a_tensor_gives_the_overwritten_history_zeros():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        w = m.tensor(3., dtype=m.float64, requires_grad=True)
        b = x * 1
        b.fill_(w)
        b.sum().backward()
        return x.grad, w.grad, _name(b.grad_fn), _name(b.grad_fn.next_functions[0][0])
    same(run)


def test_fill_with_a_tensor_under_autograd_grad():
    def run(m):
        x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
        w = m.tensor(3., dtype=m.float64, requires_grad=True)
        b = x * x
        b.fill_(w * 2)
        gx, gw = m.autograd.grad((b * b).sum(), [x, w], create_graph=True)
        ggw, = m.autograd.grad(gw, w)
        return gx, gw, ggw
    same(run)


def test_other_overwrites_give_the_overwritten_history_zeros():
    def run(m):
        out = []
        for write in (lambda b: b.fill_(2.), lambda b: b.zero_(),
                      lambda b: b.copy_(m.tensor([3., 4.], dtype=m.float64)),
                      lambda b: b.copy_(m.tensor([3., 4.], dtype=m.float64, requires_grad=True)),
                      lambda b: b.masked_fill_(m.tensor([True, True]), 2.),
                      lambda b: b.masked_fill_(m.tensor([True, True]), m.tensor(2., dtype=m.float64,
                                                                                   requires_grad=True)),
                      lambda b: b.__setitem__(Ellipsis, 5.), lambda b: b[:].fill_(2.)):
            x = m.tensor([1., 2.], dtype=m.float64, requires_grad=True)
            b = x * 1
            write(b)
            b.sum().backward()
            out.append((x.grad, _name(b.grad_fn)))
        return out
    same(run)


# == median() over everything shares its gradient among ties ============================================

def test_median_over_everything_shares_the_gradient_among_ties():
    inf, nan = float("inf"), float("nan")
    rows = ([1., 2., 2., 2., 3.], [2., 2., 1., 3.], [1., nan, nan], [-0., 0., 0., 5.], [0., -0., -0., 5.],
            [inf, inf, 1.], [-inf, -inf, 1.], [-inf, -inf, -inf, 2.], [[1., 2., 2.], [3., 3., 1.]], [7.], 4.)

    def run(m):
        out = []
        for row in rows:
            x = m.tensor(row, dtype=m.float64, requires_grad=True)
            v = x.median()
            g, = m.autograd.grad(v * v, x, create_graph=True)
            gg, = m.autograd.grad(g.sum(), x, allow_unused=True, materialize_grads=True)
            out.append((v, g, gg, _name(v.grad_fn)))
        y = m.tensor([3., 1., 1.], requires_grad=True)
        y.median().backward()
        out.append((y.grad, m.tensor([2., 2., 1.]).median()))
        return out
    same(run)


def test_median_along_a_dim_gives_the_gradient_to_the_returned_index():
    def run(m):
        x = m.tensor([[1., 2., 2.], [3., 3., 1.]], dtype=m.float64, requires_grad=True)
        v, i = x.median(1)
        v.sum().backward()
        return v, i, x.grad, _name(v.grad_fn)
    same(run)


# == atan2 at the origin =========================================================================

def test_atan2_gradient_at_the_origin_is_zero_not_nan():
    pairs = [(0., 0.), (-0., 0.), (0., -0.), (-0., -0.), (1., 2.), (1e-200, 1e-200), (0., 3.), (float("inf"), 1.)]

    def run(m):
        out = []
        for yv, xv in pairs:
            y = m.tensor(yv, dtype=m.float64, requires_grad=True)
            x = m.tensor(xv, dtype=m.float64, requires_grad=True)
            r = m.atan2(y, x)
            gy, gx = m.autograd.grad(r * r * 3, [y, x], create_graph=True)
            out.append((r, gy, gx, m.autograd.grad(gy + gx, [y, x])))
        y = m.zeros(3, requires_grad=True)
        x = m.tensor([0., 1., -0.], requires_grad=True)
        m.atan2(y, x).sum().backward()
        out.append((y.grad, x.grad))
        return out
    same(run)


# == fmax/fmin give ties and NaNs' gradients as torch's; maximum/minimum split ties =======================

def test_fmax_fmin_maximum_minimum_ties_and_nans():
    nan = float("nan")
    pairs = [(1., 1.), (2., 1.), (1., 2.), (nan, 1.), (1., nan), (nan, nan)]

    def run(m):
        out = []
        for op in ("fmax", "fmin", "maximum", "minimum"):
            for a, b in pairs:
                x = m.tensor([a], dtype=m.float64, requires_grad=True)
                y = m.tensor([b], dtype=m.float64, requires_grad=True)
                r = getattr(m, op)(x, y)
                r.sum().backward()
                out.append((r, x.grad, y.grad))
            x = m.tensor([[1., 2.]], requires_grad=True)
            y = m.tensor([1.], requires_grad=True)
            r = getattr(m, op)(x, y)
            r.sum().backward()
            out.append((r, x.grad, y.grad, _name(r.grad_fn)))
        return out
    same(run)


# == rrelu at 0 ======================================================================================

def test_rrelu_takes_the_negative_slope_at_zero():
    def run(m):
        x = m.tensor([-1., -0., 0., 2.], dtype=m.float64, requires_grad=True)
        r = m.nn.functional.rrelu(x, training=False)
        g, = m.autograd.grad(r.sum(), x)
        y = m.tensor([-0., 0., 1.], requires_grad=True)
        s = m.nn.functional.rrelu(y, 0.1, 0.2, training=True)
        gy, = m.autograd.grad(s.sum(), y)
        z = m.tensor([0., 3.], requires_grad=True)
        m.nn.RReLU().eval()(z).sum().backward()
        return r, g, _name(r.grad_fn), (gy < 1).tolist(), z.grad
    same(run)


# == signed zeros ===================================================================================
# fmax/fmin keep the first operand on a tie of -0.0 and 0.0 and a clamp to number bounds keeps the
# input, in torch's scalar and vector loops alike; hardshrink writes 0.0, softshrink input * 0.
# (maximum, minimum and a clamp to tensor bounds are left out: torch's AVX loop gives the second
# operand on such a tie, its scalar loop, for a tensor's last elements, the first.)

_ZERO_SIGN_OPS = {
    "fmax": lambda m, a, b, c: m.fmax(a, b),
    "fmin": lambda m, a, b, c: m.fmin(a, b),
    "clamp_numbers": lambda m, a, b, c: m.clamp(a, min=-0., max=0.),
    "clamp_numbers_crossed": lambda m, a, b, c: m.clamp(a, min=0., max=-0.),
    "hardshrink": lambda m, a, b, c: m.nn.functional.hardshrink(a, 1.),
    "softshrink": lambda m, a, b, c: m.nn.functional.softshrink(a, 1.),
}


def _zero_sign_cases(m, f, dtype, compiled=False):
    import itertools
    vals = [-0., 0., 1., -1., float("nan")]
    out = []
    for combo in itertools.product(vals, repeat=3):
        args = [m.tensor([v], dtype=dtype) for v in combo]
        if compiled:
            out.append(tg.compile(lambda a, b, c: f(m, a, b, c))(*args))
        else:
            out.append(f(m, *args))
    return out


def test_signed_zeros_of_fmax_fmin_clamp_and_shrink():
    for name, f in _ZERO_SIGN_OPS.items():
        for dt in ("float32", "float64"):
            same(lambda m: _zero_sign_cases(m, f, getattr(m, dt)))


def test_signed_zeros_in_compiled_code():
    for name in ("fmax", "fmin", "clamp_numbers", "hardshrink"):
        f = _ZERO_SIGN_OPS[name]
        want = _plain(_zero_sign_cases(torch, f, torch.float32))
        got = _plain(_zero_sign_cases(tg, f, tg.float32, compiled=True))
        _assert_same(want, got, 0, 0, name)


def test_signed_zeros_past_torch_vector_blocks():
    def run(m):
        a, b = m.full((41,), -0.), m.zeros(41)
        x = m.tensor([-1., -0.5, -0., 0., 0.5, 1., -2.] * 6)
        f = m.nn.functional
        return m.fmax(a, b), m.fmin(b, a), m.clamp(a, min=0.), f.hardshrink(x, 1.), f.hardshrink(x.double(), 0.5)
    same(run)

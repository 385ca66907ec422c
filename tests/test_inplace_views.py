"""In-place ops, views and version counters, against torch."""
import contextlib

import pytest
import torch

import tracegrad as tg
from conftest import assert_close


def both(fn):
    return fn(torch), fn(tg)


def test_inplace_on_slice_view_updates_base_and_gradient():
    def run(m):
        x = m.tensor([1., 2., 3., 4.], dtype=m.float64, requires_grad=True)
        b = x * 1
        v = b[1:3]
        v.mul_(x[:2] * 10)
        (b * b).sum().backward()
        return b.detach(), x.grad, type(b.grad_fn).__name__
    t, g = both(run)
    assert_close(g[0], t[0])
    assert_close(g[1], t[1])
    assert g[2] == t[2] == "CopySlices"


def test_inplace_on_transposed_row_view():
    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], dtype=m.float64, requires_grad=True)
        b = x.clone()
        b.t()[0].add_(5)
        b.exp().sum().backward()
        return b.detach(), x.grad
    t, g = both(run)
    assert_close(g[0], t[0])
    assert_close(g[1], t[1])


def test_setitem_on_view_of_nonleaf():
    def run(m):
        x = m.tensor([[1., 2., 3.], [4., 5., 6.]], dtype=m.float64, requires_grad=True)
        b = x * 2
        row = b[1]
        row[0:2] = x[0, :2] ** 2
        b.sum().backward()
        return b.detach(), x.grad
    t, g = both(run)
    assert_close(g[0], t[0])
    assert_close(g[1], t[1])


def test_view_of_leaf_inplace_error():
    def run(m):
        x = m.tensor([1., 2.], requires_grad=True)
        try:
            x[0].add_(1)
        except RuntimeError as e:
            return str(e)
    t, g = both(run)
    assert t == g


def test_views_share_version_counter_and_storage():
    def run(m):
        x = m.zeros(2, 3)
        v = x.view(3, 2)
        s = x[:, 1]
        t = x.t()
        s.add_(1)
        t[0, 0] = 5.
        return x._version, v._version, s._version, t._version, x.tolist(), v.tolist()
    assert run(torch) == run(tg)


def test_expanded_tensor_inplace_error():
    def run(m):
        x = m.zeros(1, 3).expand(2, 3)
        try:
            x.add_(1)
        except RuntimeError as e:
            return str(e)
    assert run(torch) == run(tg)


def test_saved_view_then_inplace_on_base_raises():
    def run(m):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        b = x * 1
        v = b[:2]
        y = v.exp()          # saves its result (not b)
        z = (v * v).sum()    # saves v
        b.add_(1)            # bumps the shared version
        try:
            z.backward()
        except RuntimeError as e:
            return str(e).split(" Hint")[0]
    t, g = both(run)
    assert t is not None and g is not None
    assert t.split(":")[0] == g.split(":")[0]
    assert "is at version 1; expected version 0 instead" in g


def test_inplace_without_grad_on_views_writes_through():
    def run(m):
        x = m.arange(6.).reshape(2, 3)
        with m.no_grad():
            x[0].mul_(10)
            x[:, 2] = -1
            x.t()[1].zero_()
        return x.tolist()
    assert run(torch) == run(tg)


# == torch's op names in the saved-tensor version error ====================================

@pytest.mark.parametrize("op", ["clamp", "pow_tensor", "sigmoid", "setitem", "custom"])
def test_version_error_names_the_op_as_torch(op):
    # ClampBackward1 -> Clamp1, SigmoidBackward0 -> Sigmoid, CopySlices -> torch::autograd::CopySlices,
    # a custom Function's DoubleInPlaceBackward -> DoubleInPlace
    from test_autograd_parity import raises

    def run(m):
        class DoubleInPlace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                return x.mul_(2)

            @staticmethod
            def backward(ctx, g):
                return g * 2
        x = m.ones(2, 2, requires_grad=True)
        y = x * 1
        z = y * y
        {"clamp": lambda: y.clamp_(0, 1), "pow_tensor": lambda: y.pow_(m.ones(1)), "sigmoid": lambda: y.sigmoid_(),
         "setitem": lambda: y.__setitem__(0, 1.), "custom": lambda: DoubleInPlace.apply(y)}[op]()
        z.sum().backward()
    raises(run)


# == a view of a leaf ======================================================================

@pytest.mark.parametrize("op", ["mul_", "setitem", "copy_"])
def test_inplace_on_a_view_of_a_leaf_made_by_requires_grad_on_a_view_raises(op):
    # x is a view of a, made a leaf that requires grad; its view t is a view of the leaf a:
    # torch refuses the write (tracegrad wrote it, and x stopped being a leaf)
    from test_autograd_parity import same

    def run(m):
        a = m.arange(4.)
        x = a.reshape(2, 2).requires_grad_(True)
        t = x[:]
        {"mul_": lambda: t.mul_(2), "setitem": lambda: t.__setitem__(0, 1.), "copy_": lambda: t.copy_(m.ones(2, 2))}[op]()
        return x.is_leaf, x
    same(run, expect="raised")


def test_inplace_on_a_view_of_a_plain_leaf_that_takes_a_grad_from_its_value():
    from test_autograd_parity import same

    def run(m):
        a = m.zeros(3)
        w = m.tensor([1., 2.], requires_grad=True)
        v = a[:2]
        v.copy_(w)
        a[2:].mul_(3)
        (a * a).sum().backward()
        return w.grad, type(a.grad_fn).__name__
    same(run)


# == in-place view ops (t_, transpose_, squeeze_, unsqueeze_, swapdims_) ===================

INPLACE_VIEW_OPS = {"t_": (), "transpose_": (0, 1), "swapdims_": (0, 1), "swapaxes_": (0, 1),
                    "unsqueeze_": (0,), "squeeze_": (), "squeeze_dim": (1,), "squeeze_dims": ((1,),)}


def _apply(t, op):
    return getattr(t, op if op.endswith("_") else "squeeze_")(*INPLACE_VIEW_OPS[op])


def _shape_for(op):
    return (2, 1, 2) if op.startswith(("squeeze", "unsqueeze")) else (2, 2)


@pytest.mark.parametrize("op", sorted(INPLACE_VIEW_OPS))
def test_inplace_view_op_on_a_leaf_that_requires_grad_raises(op):
    from test_autograd_parity import raises
    raises(lambda m: _apply(m.ones(*_shape_for(op), requires_grad=True), op))


@pytest.mark.parametrize("op", sorted(INPLACE_VIEW_OPS))
@pytest.mark.parametrize("where", ["non_leaf", "view_of_non_leaf", "view_of_leaf", "no_grad_leaf", "plain"])
def test_inplace_view_op_history_names_and_versions(op, where):
    from test_autograd_parity import same

    def run(m):
        shape = _shape_for(op)
        x = m.arange(4., dtype=m.float64).reshape(shape).requires_grad_(where != "plain")
        if where == "no_grad_leaf":
            with m.no_grad():
                y = _apply(x, op)
            return y is x, tuple(x.shape), x.requires_grad, x.is_leaf, x._version
        y = x * 1 if where in ("non_leaf", "view_of_non_leaf") else x
        t = y[:] if where.startswith("view") else y
        r = _apply(t, op)
        out = [r is t, tuple(t.shape), t._version, y._version, t.requires_grad,
               None if t.grad_fn is None else type(t.grad_fn).__name__, t._base is (y if t is not y else None)]
        if t.requires_grad:
            (t * m.arange(4., dtype=m.float64).reshape(t.shape)).sum().backward()
            out.append(x.grad)
        return out
    same(run, expect=None)


def test_inplace_view_op_bumps_the_version_a_saved_tensor_checks():
    from test_autograd_parity import raises

    def run(m):
        x = m.ones(1, 2, requires_grad=True)
        y = x * 1
        z = y * y
        y.unsqueeze_(0)
        z.sum().backward()
    raises(run)


def test_inplace_view_op_under_no_grad_keeps_the_history_as_torch():
    from test_autograd_parity import same

    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        y = x * 1
        with m.no_grad():
            y.t_()
        y.mul(m.tensor([[1., 2.], [3., 4.]])).sum().backward()
        return x.grad, type(y.grad_fn).__name__, y._version
    same(run)


def test_inplace_view_ops_in_a_compiled_function_run_eagerly_and_give_torchs_answer():
    def run(m):
        def f(x):
            y = x * 2
            y.t_()
            y.unsqueeze_(0)
            return (y * m.arange(4., dtype=m.float64).reshape(1, 2, 2)).sum()
        x = m.arange(4., dtype=m.float64).reshape(2, 2).requires_grad_()
        if m is tg:
            f = tg.compile(f)
        with pytest.warns(UserWarning, match="in-place view op") if m is tg else contextlib.nullcontext():
            out = f(x)
        out.backward()
        return out.item(), x.grad.tolist()
    t, g = both(run)
    assert t == g


# == writing by index into a leaf that requires grad =========================================

SETITEM_KEYS = {"int": lambda m: 0, "slice": lambda m: slice(0, 1), "full_slice": lambda m: slice(None),
                "slice_past_the_end": lambda m: slice(0, 5), "none": lambda m: None, "ellipsis": lambda m: Ellipsis,
                "ellipsis_int": lambda m: (Ellipsis, 0), "int_and_index": lambda m: (0, m.tensor([0])),
                "index_and_full_slice": lambda m: (m.tensor([0]), slice(None)), "true": lambda m: True,
                "false": lambda m: False, "empty_slice": lambda m: slice(0, 0), "mask": lambda m: m.ones(2, 2) > 0,
                "out_of_range": lambda m: 5}


@pytest.mark.parametrize("key", sorted(SETITEM_KEYS))
def test_setitem_on_a_leaf_that_requires_grad_raises_as_torch(key):
    # torch writes through the view a key's basic part makes (a full slice makes none): then
    # the error speaks of a view of a leaf; x[False] = v writes nothing at all
    from test_autograd_parity import same

    def run(m):
        x = m.ones(2, 2, requires_grad=True)
        x[SETITEM_KEYS[key](m)] = 1.
        return x._version
    same(run, expect=None)


WRITES = {"fill": lambda m, y: y.fill_(2.), "fill_tensor": lambda m, y: y.fill_(m.tensor(2.)),
          "zero": lambda m, y: y.zero_(), "copy": lambda m, y: y.copy_(m.ones(2, 2)),
          "copy_broadcast_with_grad": lambda m, y: y.copy_(m.ones(2, requires_grad=True)),
          "setitem_ellipsis": lambda m, y: y.__setitem__(Ellipsis, 1.),
          "setitem_full_slice_tensor": lambda m, y: y.__setitem__(slice(None), m.ones(2)),
          "setitem_row": lambda m, y: y.__setitem__(0, 1.)}


@pytest.mark.parametrize("op", sorted(WRITES))
def test_whole_tensor_writes_are_named_and_differentiated_as_torch(op):
    # torch's FillBackward2/3, ZeroBackward0, CopyBackwards (x[...] = v is a fill_ or copy_,
    # not a write through a view); the version error names them (Fill2, torch::autograd::CopyBackwards)
    from test_autograd_parity import same

    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], dtype=m.float64, requires_grad=True)
        y = x * 1
        WRITES[op](m, y)
        (y * y).sum().backward()
        return type(y.grad_fn).__name__, y._version, x.grad
    same(run)

    def stale(m):
        x = m.ones(2, 2, requires_grad=True)
        y = x * 1
        z = y * y
        WRITES[op](m, y)
        z.sum().backward()
    same(stale, expect="raised")

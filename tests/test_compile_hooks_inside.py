"""Hooks registered inside a compiled function: a program's backward calls no Python hooks and
keeps no .grad of its values, so a hook registered while tracing was dropped without a word
(x.register_hook(lambda g: g * 3) inside gave x.grad without the factor 3, torch.compile and eager
with it). Such a function now runs eagerly, with a warning naming the line; gradients equal
eager's and torch's."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def triple(g):
    return g * 3


def times_ten(p):
    p.grad.mul_(10)


def on_argument(m, x):
    x.register_hook(triple)
    return (x * x).sum()


def on_intermediate(m, x):
    y = x * 2
    y.register_hook(triple)
    return (y * y).sum()


def post_accumulate(m, x):
    x.register_post_accumulate_grad_hook(times_ten)
    return (x * x).sum()


def retained(m, x):
    y = x * 2
    y.retain_grad()
    return (y * y).sum(), y


@pytest.mark.parametrize("fn", [on_argument, on_intermediate, post_accumulate, retained])
def test_hooks_inside_run_eagerly_with_the_gradients_of_eager_and_torch(fn):
    data = np.array([0.5, -1.25, 2.0])
    xt = torch.tensor(data, requires_grad=True)
    out_t = fn(torch, xt)
    (out_t[0] if isinstance(out_t, tuple) else out_t).backward()
    xg = tg.tensor(data, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out_g = tg.compile(lambda x: fn(tg, x))(xg)
        (out_g[0] if isinstance(out_g, tuple) else out_g).backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    if isinstance(out_t, tuple):
        np.testing.assert_allclose(out_g[1].grad.numpy(), out_t[1].grad.numpy(), rtol=1e-12)
    messages = [str(c.message) for c in caught]
    assert any("inside a compiled function" in m and ("hook" in m or "retain_grad" in m) for m in messages), messages


def test_fullgraph_raises_instead():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(Exception, match="register_hook on a value inside a compiled function"):
        tg.compile(lambda v: on_argument(tg, v), fullgraph=True)(x)


def detach_argument(m, x, w):
    w.detach_()
    return (x * w).sum()


def test_detach_inplace_of_an_argument_runs_eagerly():
    """w.detach_() inside a compiled function: eager (and torch) leave w without grad and its
    .grad None; the trace kept w's graph and gave it a gradient, silently."""
    res = []
    for m, compiled in ((torch, False), (tg, True)):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        w = m.tensor([3.0, 4.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = tg.compile(lambda a, b: detach_argument(tg, a, b)) if compiled else (lambda a, b: detach_argument(m, a, b))
            f(x, w).backward()
        res.append((x.grad.tolist(), w.grad, w.requires_grad))
        if compiled:
            assert any("detach_() on a value inside a compiled function" in str(c.message) for c in caught)
    assert res[0] == res[1] == ([3.0, 4.0], None, False)


BACKWARD_CALLS = []


class CountedSquare(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        BACKWARD_CALLS.append(1)         # a Python side effect of the backward
        (x,) = ctx.saved_tensors
        return 2 * x * g


class PlainSquare(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_a_custom_function_with_a_side_effect_in_its_backward_runs_eagerly():
    """Its backward is traced into the program: the side effect ran at the trace only (one call
    of three), without a word. Now the function runs eagerly, naming the line; a custom Function
    without side effects still compiles whole."""
    BACKWARD_CALLS.clear()
    f = tg.compile(lambda v: CountedSquare.apply(v).sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = tg.tensor([1.0, 2.0], requires_grad=True)
            f(x).backward()
    assert len(BACKWARD_CALLS) == 3 and x.grad.tolist() == [2.0, 4.0]
    assert any("BACKWARD_CALLS.append" in str(c.message) for c in caught)
    g = tg.compile(lambda v: PlainSquare.apply(v).sum(), fullgraph=True)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    g(x).backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_a_mutator_called_by_its_dunder_name_is_a_side_effect():
    count = [0]
    layer = tg.nn.Linear(2, 2)
    layer.register_forward_hook(lambda mod, i, o: count.__setitem__(0, count[0] + 1))
    f = tg.compile(lambda v: layer(v).sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            f(tg.ones(2))
    assert count[0] == 3 and any("side effect" in str(c.message) for c in caught)

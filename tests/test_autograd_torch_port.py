"""PyTorch's own autograd tests (class TestAutograd of pytorch/test/test_autograd.py), ported
to tracegrad.

Each test keeps torch's name (a comment gives torch's name where one test of torch is split
or renamed) and asserts what torch's test asserts: the same values (the constants of torch's
test, or values torch computes alongside), the same exception types and messages (torch's
regexes), the same warnings. Where a torch test also exercises a feature outside tracegrad's
scope (sparse, complex, CUDA, forward-mode AD, vmap, GradientEdge,
torch._C internals), the in-scope part is ported and the comment says what was left out.
Torch tests wholly about such features are not ported; OUT_OF_SCOPE lists them with the
reason, so the count of ported tests is honest.

The source is TestAutograd of pytorch/pytorch's test/test_autograd.py, a version a little
newer than torch 2.13; where its expected messages differ from what torch 2.13 (the oracle
installed here) does, the test follows torch 2.13 and says so. Count: 244 torch tests ported
(test_hook_closure_cycle is parametrized 4 ways and test_checkpointing_without_reentrant_detached_tensor
2 ways, as in torch), 239 pass, 5 are strict xfails listed in KNOWN_GAPS with the reason; 106 torch
tests are out of scope (OUT_OF_SCOPE).
"""
import copy
import gc
import math
import random
import re
import threading
import warnings
import weakref
from functools import partial

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as tnn
from tracegrad.autograd import Function, once_differentiable, gradcheck, gradgradcheck, detect_anomaly


# -- helpers of torch's TestCase, for tracegrad tensors ------------------------------------------

def _arr(x):
    if isinstance(x, (tg.Tensor, torch.Tensor)):
        return np.asarray(x.detach().tolist(), dtype=np.float64), tuple(x.shape), x.dtype
    a = np.asarray(x, dtype=np.float64)
    return a, None, None


def assertEqual(a, b, atol=None, rtol=None):
    """torch's TestCase.assertEqual: tensors (or numbers) equal in shape and close in value,
    with the tolerances torch uses for the dtype."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        assert len(a) == len(b), (len(a), len(b))
        for x, y in zip(a, b):
            assertEqual(x, y, atol, rtol)
        return
    if a is None or b is None or isinstance(a, (str, bool)) or isinstance(b, (str, bool)):
        assert a == b, (a, b)
        return
    xa, sa, da = _arr(a)
    xb, sb, db = _arr(b)
    if sa is not None and sb is not None:
        assert sa == sb, f"shapes differ: {sa} vs {sb}"
    else:
        xa, xb = np.broadcast_arrays(xa, xb)
    dts = {str(d) for d in (da, db) if d is not None}
    low = any(s.endswith(("float32", "float16", "bfloat16")) for s in dts)
    if rtol is None:
        rtol = 1.3e-6 if low else 1e-7
    if atol is None:
        atol = 1e-5 if low else 1e-7
    np.testing.assert_allclose(xa, xb, rtol=rtol, atol=atol, equal_nan=True)


def assertNotEqual(a, b):
    with pytest.raises(AssertionError):
        assertEqual(a, b)


def graph_desc(fn):
    """torch's test helper: the graph below a node as a string of node class names."""
    if fn is None:
        return "None"
    result = type(fn).__name__ + "("
    next_functions = fn.next_functions
    for next_fn, _ in next_functions:
        result += graph_desc(next_fn)
        result += ", "
    if next_functions:
        result = result[:-2]
    return result + ")"


class _DelayedError(Function):
    """torch._C._functions.DelayedError(msg, 1): identity forward, its backward raises."""
    msg = "Boom!"

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(_DelayedError.msg)


class _UndefinedGrad(Function):
    """torch._C._functions.UndefinedGrad(): identity forward, an undefined (None) gradient
    flows back from it."""
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return None


# ported torch tests tracegrad does not pass yet (marked xfail, strict), and why
KNOWN_GAPS = {
    "test_function": (
        "tracegrad's graph of a create_graph backward differs in shape from torch's: the first gradient "
        "accumulated is not a copy (torch's CopyBackwards(None, ...)) and sum's backward views the 0-d "
        "gradient before expanding it (ViewBackward0 under ExpandBackward0); the values are torch's"),
    "test_once_differentiable": (
        "tracegrad's once_differentiable node (DelayedError) wraps the backward's output instead of standing "
        "for the Function with its inputs as next_functions (torch's Error(AccumulateGrad(), None, "
        'AccumulateGrad())), under no CopyBackwards'),
    "test_inplace_on_view_backward": (
        "the graph of a double backward through threshold_ differs from torch's (ViewBackward0 where torch "
        'has ThresholdBackwardBackward0)'),
    "test_integer_outputs": (
        "tracegrad's unique returns values that do not require grad; torch's require grad (with a backward "
        'that is not implemented)'),
}


# torch tests of TestAutograd that are not ported: the feature is outside tracegrad's scope.
OUT_OF_SCOPE = {
    "test_set_materialize_non_diff_grads": "private ctx._materialize_non_diff_grads",
    "test_not_implemented_grad": "torch.nextafter, whose derivative torch 2.13 implements, so the test's "
                                 "NotImplementedError no longer holds in torch either",
    "test_saved_tensor_hooks_extra_exit_during_bw_no_crash": "saved-tensor hooks",
    "test_saved_tensor_hooks_extra_enter_during_bw_no_leak": "saved-tensor hooks",
    "test_will_engine_execute_node": "torch._C._will_engine_execute_node",
    "test_custom_function_vmap_defaults": "vmap (functorch)",
    "test_multiple_insert_removal_caching": "torch._C cached tensors",
    "test_grad_to_node": "GradientEdge",
    "test_grad_to_node_set": "GradientEdge and Tensor.set_",
    "test_grad_to_node_inplace": "GradientEdge",
    "test_grad_to_node_multi": "GradientEdge",
    "test_grad_to_node_materialize": "GradientEdge",
    "test_backward_to_node": "GradientEdge",
    "test_grad_fn_input_metadata": "private Node._input_metadata, nested tensors",
    "test_gradient_edge_output": "GradientEdge",
    "test_gradient_edge_graph_ownership": "GradientEdge",
    "test_node_post_hook_registered_during_unpack_hook": "saved-tensor hooks, torch._C._current_autograd_node",
}


# == custom Functions, grad modes, accumulation =================================================

def test_copy_slices_graph_task_updates():
    def f1(x, y):
        out = x.clone().view(-1)
        out += y
        return out

    def f2(x, y):
        out = x.clone().view(-1)
        b = out * 2
        out += y
        return out + b

    x = tg.rand(2, requires_grad=True)
    y = tg.rand(2, requires_grad=True)
    y_safe = _DelayedError.apply(y)
    for f in [f1, f2]:
        out = f(x, y_safe)
        with pytest.raises(RuntimeError, match="Boom!"):
            out.sum().backward()
        out = f(x, y_safe)
        with pytest.raises(RuntimeError, match="Boom!"):
            tg.autograd.grad(out.sum(), y)
        out = f(x, y_safe)
        tg.autograd.grad(out.sum(), x)
        out = f(x, y_safe)
        tg.autograd.grad(out.sum(), y_safe)
        out = f(x, y_safe)
        tg.autograd.grad(out.sum(), (x, y_safe))

    def f3(x, y):
        out = x.clone().view(-1)

        def hook(*args):
            raise AssertionError("this hook must never be called")

        out.register_hook(hook)
        b = out + y
        out += y
        return out + b, b

    out, b = f3(x, y_safe)
    tg.autograd.grad(out.sum(), (b, y_safe))


def test_grad_mode_class_decoration():
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        @tg.no_grad()
        class Foo:
            def __init__(self):
                assert not tg.is_grad_enabled()

            def foo(self):
                assert tg.is_grad_enabled()

        foo = Foo()
        foo.foo()

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")

        @tg.no_grad()
        def foo():
            assert not tg.is_grad_enabled()

        foo()

        class Foo2:
            @tg.no_grad()
            def __init__(self):
                assert not tg.is_grad_enabled()

            @tg.no_grad()
            def foo(self):
                assert not tg.is_grad_enabled()

        foo2 = Foo2()
        foo2.foo()
    assert len(w) == 0


def test_tensor_grad_warnings():
    dummy = tg.empty(1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dummy.requires_grad_()
        foo = dummy.grad
        assert len(w) == 0
        dummy = dummy.clone()
        foo = dummy.grad
        assert len(w) == 1
        dummy.retain_grad()
        foo = dummy.grad
        assert len(w) == 1


def _function_test(cls):
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5, requires_grad=True)
    result = cls.apply(x, 2, y)
    go = tg.ones((), requires_grad=True)
    result.sum().backward(go, create_graph=True)
    assertEqual(x.grad, y + tg.ones(5, 5))
    assertEqual(y.grad, x + tg.ones(5, 5) * 2)
    assert x.grad.grad_fn is not None
    assert y.grad.grad_fn is not None
    return x, y


@pytest.mark.xfail(strict=True, reason=KNOWN_GAPS["test_function"])
def test_function():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, tensor1, pyscalar, tensor2):
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(tensor1, tensor2)
            return tensor1 + pyscalar * tensor2 + tensor1 * tensor2

        @staticmethod
        def backward(ctx, grad_output):
            var1, var2 = ctx.saved_tensors
            assert isinstance(var1, tg.Tensor)
            assert isinstance(var2, tg.Tensor)
            assert isinstance(grad_output, tg.Tensor)
            return (grad_output + grad_output * var2, None, grad_output * ctx.pyscalar + grad_output * var1)

    x, y = _function_test(MyFunction)
    # torch's expect files x_grad_desc / y_grad_desc
    assert graph_desc(x.grad.grad_fn) == (
        "CopyBackwards(None, AddBackward0(ExpandBackward0(AccumulateGrad()), MulBackward0(ExpandBackward0("
        "AccumulateGrad()), AccumulateGrad())))")
    assert graph_desc(y.grad.grad_fn) == (
        "CopyBackwards(None, AddBackward0(MulBackward0(ExpandBackward0(AccumulateGrad()), None), MulBackward0("
        "ExpandBackward0(AccumulateGrad()), AccumulateGrad())))")


@pytest.mark.xfail(strict=True, reason=KNOWN_GAPS["test_once_differentiable"])
def test_once_differentiable():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, tensor1, pyscalar, tensor2):
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(tensor1, tensor2)
            return tensor1 + pyscalar * tensor2 + tensor1 * tensor2

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            assert not tg.is_grad_enabled()
            t1, t2 = ctx.saved_tensors
            return (grad_output + grad_output * t2, None, grad_output * ctx.pyscalar + grad_output * t1)

    x, y = _function_test(MyFunction)
    assert graph_desc(x.grad.grad_fn) == "CopyBackwards(None, Error(AccumulateGrad(), None, AccumulateGrad()))"
    assert graph_desc(y.grad.grad_fn) == "CopyBackwards(None, Error(AccumulateGrad(), None, AccumulateGrad()))"


def test_function_returns_input():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    for shape in [(1,), ()]:
        v = tg.ones(shape, requires_grad=True)
        MyFunction.apply(v).backward()
        assertEqual(v.grad, tg.full(shape, 2.0))
        with tg.no_grad():
            v.grad.zero_()
        MyFunction.apply(v.clone()).backward()
        assertEqual(v.grad, tg.full(shape, 2.0))


def test_function_returns_undefined_tensor():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return None

    x = tg.ones(1, requires_grad=True)
    MyFunction.apply(x).backward()
    assert x.grad is None
    MyFunction.apply(x**2).backward()
    assert x.grad is None
    MyFunction.apply(x).sum().backward()
    assert x.grad is None
    assert tg.autograd.grad(MyFunction.apply(x), x, allow_unused=True)[0] is None


def test_materialize_grads():
    seen = []

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            assertEqual(grad, tg.zeros(1))
            seen.append(grad)
            return grad

    x = tg.ones(1, requires_grad=True)
    _UndefinedGrad.apply(MyFunction.apply(x)).backward()
    assert len(seen) == 1


def test_dont_materialize_grads():
    seen = []

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x

        @staticmethod
        def backward(ctx, grad):
            assert grad is None
            seen.append(grad)
            return grad

    x = tg.ones(1, requires_grad=True)
    _UndefinedGrad.apply(MyFunction.apply(x)).backward()
    assert seen == [None]


def test_unused_grad_requires_grad_with_materialize():
    x = tg.ones(10, requires_grad=True)
    y = tg.ones(10, requires_grad=True)
    z = (x**2).sum()
    g = tg.autograd.grad(z, (x, y), allow_unused=True, materialize_grads=True, create_graph=False)
    assert not g[0].requires_grad
    assert not g[1].requires_grad


def test_legacy_function_deprecation_exception():
    class MyFunction(Function):
        def forward(self, x):
            return x

        def backward(self, grad_output):
            return grad_output

    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method is deprecated"):
        MyFunction()(tg.randn(3, 4))


class SimulateBackwardError(Function):
    @staticmethod
    def forward(ctx, input):
        return input.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, input):
        raise Exception("Simulate error on backward pass")


def test_custom_function_exception():
    t1 = tg.rand((3, 3), requires_grad=True)
    t2 = tg.rand((3, 3), requires_grad=True)
    tmp = (t1 + t2) * (t1 + t2)
    t3 = SimulateBackwardError.apply(tmp)
    with pytest.raises(Exception, match="Simulate error on backward pass"):
        t3.sum().backward()


def test_custom_function_non_tensor_inputs_outputs():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, t1, t2, scale, t3):
            t4 = t1 + t2 * t3
            t5 = t1 * t2 + t3
            t4 *= scale
            t5 *= scale
            ctx.scale = scale
            ctx.save_for_backward(t1, t2, t3)
            return scale, t4, None, True, t5, "bar", t1

        @staticmethod
        @once_differentiable
        def backward(ctx, *grads):
            assert len(grads) == 7
            assert grads[0] is None
            assert grads[2] is None
            assert grads[3] is None
            assert grads[5] is None
            scale = ctx.scale
            var1, var2, var3 = ctx.saved_tensors
            return (grads[1] * scale + grads[4] * var2 * scale + grads[6],
                    grads[1] * var3 * scale + grads[4] * var1 * scale,
                    None,
                    grads[1] * var2 * scale + grads[4] * scale)

    t1 = tg.rand(10, dtype=tg.double, requires_grad=True)
    t2 = tg.rand(10, dtype=tg.double, requires_grad=True)
    t3 = tg.rand(10, dtype=tg.double)
    scale = random.randint(0, 10)
    res = MyFunction.apply(t1, t2, scale, t3)
    assert scale == res[0]
    assertEqual((t1 + t2 * t3) * scale, res[1])
    assert res[2] is None
    assert res[3] is True
    assertEqual((t1 * t2 + t3) * scale, res[4])
    assert res[5] == "bar"
    assertEqual(t1, res[6])
    tg.autograd.backward([res[1].sum(), res[4].sum(), res[6].sum()])
    assert t1.grad is not None
    assert t2.grad is not None
    assert t3.grad is None

    def foo(t1, t2, t3):
        res = MyFunction.apply(t1, t2, scale, t3)
        return res[1], res[4], res[6]

    assert gradcheck(foo, (t1, t2, t3))


def test_custom_function_no_tensors():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, t1, t2, scale, t3):
            t4 = t1 + t2 * t3
            t5 = t1 * t2 + t3
            t4 *= scale
            t5 *= scale
            return scale, t4, None, True, t5, "bar", t1

        @staticmethod
        @once_differentiable
        def backward(ctx, *args):
            return (args[0], args[1], None, args[2])

    t1 = random.random()
    t2 = random.random()
    t3 = random.random()
    scale = random.randint(0, 10)
    res = MyFunction.apply(t1, t2, scale, t3)
    assert scale == res[0]
    assert math.isclose((t1 + t2 * t3) * scale, res[1])
    assert res[2] is None
    assert res[3] is True
    assert math.isclose((t1 * t2 + t3) * scale, res[4])
    assert res[5] == "bar"
    assert t1 == res[6]


def test_invalid_gradients():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            return tg.randn(10, dtype=tg.float)

    with pytest.raises(RuntimeError, match="expected shape"):
        input = tg.randn(5, 5, dtype=tg.float, requires_grad=True)
        MyFunction.apply(input).sum().backward()


def test_unrelated_inputs():
    def my_function(x, y):
        return x * x

    x = tg.rand(10, dtype=tg.double, requires_grad=True)
    y = tg.rand(10, dtype=tg.double, requires_grad=True)
    assert gradcheck(my_function, (x, y))
    assert gradgradcheck(my_function, (x, y))


def test_custom_function_setup_context_simple():
    class MySquare(Function):
        @staticmethod
        def forward(x):
            return x**2

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, gO):
            (x,) = ctx.saved_tensors
            return gO * 2 * x

    x = tg.randn([], requires_grad=True)
    y = MySquare.apply(x)
    (gx,) = tg.autograd.grad(y, x)
    assertEqual(gx, 2 * x)


def test_custom_function_setup_context_multi_output():
    class MySquare(Function):
        @staticmethod
        def forward(x):
            two_x = x.item() * 2
            return x**2, two_x

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            _, two_x = output
            ctx.two_x = two_x

        @staticmethod
        @once_differentiable
        def backward(ctx, gO, _):
            return gO * ctx.two_x

    x = tg.randn([], requires_grad=True)
    y, _ = MySquare.apply(x)
    (gx,) = tg.autograd.grad(y, x)
    assertEqual(gx, 2 * x)


def test_custom_function_setup_context_multi_input():
    class MyReshape(Function):
        @staticmethod
        def forward(x, shape, scale_forward, scale_backward):
            return x.reshape(shape) * scale_forward

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, shape, scale_forward, scale_backward = inputs
            ctx.scale_backward = scale_backward
            ctx.x_shape = x.shape

        @staticmethod
        def backward(ctx, gO):
            return gO.reshape(ctx.x_shape) * ctx.scale_backward, None, None, None

    class MyReshapeRef(Function):
        @staticmethod
        def forward(ctx, x, shape, scale_forward, scale_backward):
            ctx.scale_backward = scale_backward
            ctx.x_shape = x.shape
            return x.reshape(shape) * scale_forward

        @staticmethod
        def backward(ctx, gO):
            return gO.reshape(ctx.x_shape) * ctx.scale_backward, None, None, None

    def test(x, shape, scale_forward, scale_backward):
        y = MyReshape.apply(x, shape, scale_forward, scale_backward).sum()
        (gx,) = tg.autograd.grad(y, x)
        y_expected = MyReshapeRef.apply(x, shape, scale_forward, scale_backward).sum()
        (gx_expected,) = tg.autograd.grad(y_expected, x)
        assertEqual(y_expected, y)
        assertEqual(gx_expected, gx)
        assertEqual(gx, tg.full(x.shape, float(scale_backward)))

    test(tg.randn(24, requires_grad=True), (3, 8), 7, 11)
    test(tg.randn(2, 3, 4, requires_grad=True), (6, 4), -1, 2)


def test_accumulate_grad():
    grad_output = tg.ones(5, 5)

    def compute_grad(create_graph):
        x = tg.randn(5, 5, requires_grad=True)
        y = x + 2
        y.backward(grad_output, retain_graph=True)
        x_grad = x.grad
        x_grad_clone = x.grad.clone()
        y.backward(grad_output, create_graph=create_graph)
        return x_grad, x_grad_clone

    x_grad, x_grad_clone = compute_grad(create_graph=False)
    assertEqual(x_grad, x_grad_clone * 2)
    x_grad, x_grad_clone = compute_grad(create_graph=True)
    assertEqual(x_grad, x_grad_clone)


def test_accumulate_grad_tensor_reference():
    # torch's test also accumulates into sparse gradients (out of scope); the dense cases:
    def _test_grad_tensor(params_grad_tensor, backward_grad_tensor, should_preserve_reference, create_graph):
        params = tg.tensor([1.5, 1.5]).requires_grad_()
        params.grad = params_grad_tensor
        grad_saved = params.grad
        params.backward(backward_grad_tensor, create_graph=create_graph)
        assert (id(grad_saved) == id(params.grad)) == should_preserve_reference

    for create_graph in (False, True):
        _test_grad_tensor(tg.tensor([1.5, 1.5]), tg.tensor([1.5, 1.5]), not create_graph, create_graph)


def test_accumulate_grad_with_zero_numel_grad():
    a = tg.rand(4, 0, requires_grad=True)
    b = tg.rand(4, 1, requires_grad=True)
    c = a + b
    assert c.shape == (4, 0)
    c.sum().backward()
    assertEqual(b.grad, tg.zeros(4, 1))
    assertEqual(a.grad, tg.zeros(4, 0))


def test_hessian_vector():
    x = tg.randn(2, 2, requires_grad=True)
    y = tg.randn(2, 2, requires_grad=True)
    z = x**2 + y * x + y**2
    z.backward(tg.ones(2, 2), create_graph=True)
    with tg.no_grad():
        x_grad = 2 * x + y
        y_grad = x + 2 * y
    assertEqual(x.grad, x_grad)
    assertEqual(y.grad, y_grad)
    grad_sum = 2 * x.grad + y.grad
    grad_sum.backward(tg.ones(2, 2))
    x_hv = tg.ones(2, 2) * 5
    y_hv = tg.ones(2, 2) * 4
    assertEqual(x.grad, x_grad + x_hv)
    assertEqual(y.grad, y_grad + y_hv)


def test_grad():
    x = tg.randn(2, 2, requires_grad=True)
    y = tg.randn(2, 2, requires_grad=True)
    z = x**2 + y * x + y**2
    z.backward(tg.ones(2, 2), create_graph=True)
    x_grad = 2 * x + y
    y_grad = x + 2 * y
    assertEqual(x.grad, x_grad)
    assertEqual(y.grad, y_grad)
    grad_sum = 2 * x.grad + y.grad
    x_hv = tg.autograd.grad(outputs=[grad_sum], grad_outputs=[tg.ones(2, 2)], inputs=[x], create_graph=True)
    assertEqual(x_hv[0], tg.ones(2, 2) * 5)
    assertEqual(x.grad, x_grad)
    assertEqual(y.grad, y_grad)
    grad_out = tg.ones(2)
    with pytest.raises(RuntimeError) as e:
        tg.autograd.grad(outputs=[grad_sum], grad_outputs=[grad_out], inputs=[x], create_graph=True)
    assert str(e.value) == ("Mismatch in shape: grad_output[0] has a shape of " + str(grad_out.shape)
                            + " and output[0] has a shape of " + str(grad_sum.shape) + ".")
    assert str(grad_out.shape) == "torch.Size([2])"


def test_grad_nonleaf():
    x_init = tg.randn(2, 2, requires_grad=True)
    x = x_init
    y = tg.randn(2, 2, requires_grad=True)
    grad_output = tg.ones(2, 2)

    def fn(x):
        return x**2 + y * x + y**2

    for _ in range(5):
        (grad_x,) = tg.autograd.grad(fn(x), x, grad_outputs=grad_output, create_graph=True)
        grad_x_expected = 2 * x + y
        assert y.grad is None
        assert x.grad is None
        assertEqual(grad_x, grad_x_expected)
        x = x + 0.05 * grad_x

    val_init = fn(x_init).sum()
    val_final = fn(x).sum()
    assert val_final.item() > val_init.item()
    x.backward(grad_output)
    assert y.grad is not None
    assert x_init.grad is not None


def test_grad_nonleaf_many_outputs():
    x = tg.randn(4, 2, requires_grad=True)
    a, b = x.chunk(2)
    hook_called = [False]

    def hook(*grads):
        hook_called[0] = True

    x.register_hook(hook)
    go = tg.randn(2, 2)
    grad_a, grad_b = tg.autograd.grad((a + 2 * b), [a, b], grad_outputs=go, create_graph=True)
    assertEqual(grad_a, go)
    assertEqual(grad_b, go * 2)
    assert not hook_called[0]
    assert x.grad is None


def test_grad_nonleaf_register_hook():
    x = tg.randn(5, requires_grad=True)
    x_list = x.unbind()
    x0 = x_list[0]
    hook_results = [None]

    def hook(grad):
        hook_results[0] = grad

    x0.register_hook(hook)
    x_list[0].backward()
    assertEqual(hook_results[0], tg.tensor(1.0))
    expected_grad = np.array([1.0, 0, 0, 0, 0])
    assertEqual(x.grad, tg.tensor(expected_grad, dtype=tg.float32))
    assert x_list[0].grad is None
    for i in range(1, 5, 1):
        x_list[i].backward()
        assert hook_results[0] is None
        expected_grad[i] = 1.0
        assertEqual(x.grad, tg.tensor(expected_grad, dtype=tg.float32))
        assert x_list[i].grad is None


def test_grad_materialize_grads():
    x = tg.tensor(0.5, requires_grad=True)
    a = tg.tensor(1.0, requires_grad=True)
    y = x * a
    dydx = tg.autograd.grad(y, x, create_graph=True)
    d2ydx2_none = tg.autograd.grad(dydx, x, create_graph=True, allow_unused=True)
    d2ydx2 = tg.autograd.grad(dydx, x, create_graph=True, allow_unused=True, materialize_grads=True)
    d3ydx3 = tg.autograd.grad(d2ydx2, x, materialize_grads=True)
    assert d2ydx2_none[0] is None
    assert d2ydx2[0].item() == 0
    assert d3ydx3[0].item() == 0
    with pytest.raises(ValueError, match="Expected allow_unused to be True or not passed when"):
        tg.autograd.grad(y, x, allow_unused=False, materialize_grads=True)


# == hooks ======================================================================================

def test_post_accumulate_grad_hook_on_non_leaf():
    def hook(tensor):
        tensor.sub_(1.0)

    leaf = tg.rand(3, requires_grad=True)
    non_leaf = 2.0 * leaf
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        non_leaf.register_post_accumulate_grad_hook(hook)


def test_post_accumulate_grad_hook_multiple_hooks():
    def hook1(tensor):
        tensor.sub_(tensor.grad)

    def hook2(tensor):
        tensor.mul_(4.0)

    tensor = tg.rand(3, requires_grad=True)
    tensor_ref = tensor.detach().clone()
    tensor.register_post_accumulate_grad_hook(hook1)
    tensor.register_post_accumulate_grad_hook(hook2)
    tensor.sum().backward()
    assertEqual(4.0 * (tensor_ref - 1.0), tensor)


def test_post_accumulate_grad_hook_multiple_tensors():
    def hook(tensor):
        tensor.sub_(tensor.grad)

    tensor1 = tg.rand(3, requires_grad=True)
    tensor1_ref = tensor1.detach().clone()
    tensor2 = tg.rand(5, requires_grad=True)
    tensor2_ref = tensor2.detach().clone()
    tensor1.register_post_accumulate_grad_hook(hook)
    tensor2.register_post_accumulate_grad_hook(hook)
    tensor1.sum().backward()
    tensor2.sum().backward()
    assertEqual(tensor1_ref - 1.0, tensor1)
    assertEqual(tensor2_ref - 1.0, tensor2)


def test_post_accumulate_grad_hook_returns_not_None():
    def bad_hook(tensor):
        return tensor.grad

    tensor = tg.rand(2, 3, requires_grad=True)
    tensor.register_post_accumulate_grad_hook(bad_hook)
    with pytest.raises(RuntimeError, match="hooks should return None."):
        tensor.sum().backward()


def test_post_accumulate_grad_hook_e2e():
    def setup_optim_in_bwd(model):
        optims = {}
        handles = []

        def optim_step_hook(param):
            optims[param].step()
            optims[param].zero_grad()

        for p in model.parameters():
            optims[p] = tg.optim.Adam([p])
            handles.append(p.register_post_accumulate_grad_hook(optim_step_hook))
        return handles

    model = tnn.Linear(3, 2)
    input = tg.rand(2, 3)
    handles = setup_optim_in_bwd(model)
    model_copy = copy.deepcopy(model)
    optim_copy = tg.optim.Adam(model_copy.parameters())
    iters = 5
    for _ in range(iters):
        loss = model(input).sum()
        loss.backward()
        loss_copy = model_copy(input).sum()
        loss_copy.backward()
        optim_copy.step()
        optim_copy.zero_grad()
    params_copy = []
    for p_reference, p in zip(model_copy.parameters(), model.parameters()):
        assertEqual(p_reference, p)
        params_copy.append(p_reference.detach().clone())
    for h in handles:
        h.remove()
    for _ in range(iters):
        loss = model(input).sum()
        loss.backward()
        loss_copy = model_copy(input).sum()
        loss_copy.backward()
        optim_copy.step()
        optim_copy.zero_grad()
    for p_static, p_reference, p in zip(params_copy, model_copy.parameters(), model.parameters()):
        assertEqual(p_static, p)
        assertNotEqual(p_reference, p)


def test_post_accumulate_grad_hook_gets_cleaned_up():
    def fun_stuff_with_hook():
        thing_to_put_in_hook = tg.rand(3)

        def hook(tensor):
            tensor.sub_(tensor.grad)
            tensor.add_(thing_to_put_in_hook)

        tensor = tg.rand(3, requires_grad=True)
        tensor.register_post_accumulate_grad_hook(hook)
        tensor.sum().backward()
        ref = weakref.ref(thing_to_put_in_hook)
        gc.collect()
        return tensor, ref

    tensor, ref = fun_stuff_with_hook()
    assert ref() is not None
    del tensor
    gc.collect()
    assert ref() is None


def test_post_accumulate_grad_hook_ordering():
    tensor = tg.rand(3, requires_grad=True)

    def pre_hook(grad):
        return grad.sub(2.0)

    def acc_grad_node_pre_hook(grad_out):
        return (grad_out[0].div(5.0),)

    def post_acc_grad_hook(tensor):
        tensor.grad.add_(0.5)

    def acc_grad_node_post_hook(grad_in, grad_out):
        tensor.grad = grad_out[0].mul(10)

    acc_grad = tensor.view_as(tensor).grad_fn.next_functions[0][0]
    tensor.register_hook(pre_hook)
    acc_grad.register_prehook(acc_grad_node_pre_hook)
    tensor.register_post_accumulate_grad_hook(post_acc_grad_hook)
    acc_grad.register_hook(acc_grad_node_post_hook)
    tensor.sum().backward()
    assertEqual(tg.tensor([3.0, 3.0, 3.0]), tensor.grad)


def test_hook_with_no_name():
    class MyHookClass:
        def __call__(self, grad):
            return grad.clone()

    x = tg.randn(5, requires_grad=True).clone()
    x.register_hook(MyHookClass())
    x.sum().backward()


def test_prehook_ordering():
    log = []

    def hook1(g):
        log.append(1)
        return g * 3

    def hook2(gs):
        log.append(2)
        return tuple(g * 2 for g in gs)

    a = tg.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.grad_fn.register_prehook(hook2)
    b.register_hook(hook1)
    b.grad_fn.register_prehook(hook2)
    acc = b.grad_fn.next_functions[0][0]
    a.register_hook(hook1)
    acc.register_prehook(hook2)
    a.register_hook(hook1)
    b.sum().backward(retain_graph=True)
    assert log == [1, 2, 2, 1, 1, 2]
    log = []
    tg.autograd.grad(b.sum(), inputs=(a,), retain_graph=True)
    assert log == [1, 2, 2, 1, 1]
    log = []
    b.sum().backward(inputs=(b,))
    assert log == [1, 2, 2]
    assert b.grad.item() == 3


def test_retains_grad_can_always_observe_tensor_prehook():
    def tensor_prehook(g):
        return g * 2

    a = tg.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(tensor_prehook)
    b.retain_grad()
    b.register_hook(tensor_prehook)
    b.clone().backward()
    assert b.grad.item() == 4

    a = tg.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.retain_grad()
    b.register_hook(tensor_prehook)
    b.clone().backward()
    assert b.grad.item() == 2


def test_accumulate_grad_posthooks_can_observe_tensor_prehook():
    a = tg.tensor(1.0, requires_grad=True)
    calls = []

    def tensor_prehook(g):
        return g * 2

    def posthook(gO, gI):
        assert tg.allclose(gI[0], a * 2)
        assert len(gO) == 0
        calls.append("post")

    def prehook(gI):
        assert tg.allclose(gI[0], a * 2)
        assert len(gI) == 1
        calls.append("pre")

    b = a.clone()
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(posthook)
    acc.register_prehook(prehook)
    a.register_hook(tensor_prehook)
    b.backward()
    assert calls == ["pre", "post"]


def test_accumulate_grad_posthooks_should_not_execute():
    def tensor_prehook(g):
        raise RuntimeError

    def posthook(gO, gI):
        raise RuntimeError

    a = tg.tensor(1.0, requires_grad=True)
    a.register_hook(tensor_prehook)
    b = tg.tensor(1.0, requires_grad=True)
    c = a.clone()
    acc = c.grad_fn.next_functions[0][0]
    acc.register_hook(posthook)
    out = a + b + c
    out.sum().backward(inputs=[b])
    assertEqual(b.grad, tg.tensor(1.0))


def test_hook_edge_case_when_called_with_grad():
    a = tg.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * 2
    tensor_hook_count = [0]
    prehook_count = [0]
    posthook_count = [0]

    def reset_counts():
        tensor_hook_count[0] = prehook_count[0] = posthook_count[0] = 0

    def tensor_prehook(g):
        tensor_hook_count[0] += 1

    def prehook(g):
        prehook_count[0] += 1

    def posthook(gI, gO):
        posthook_count[0] += 1

    a.register_hook(tensor_prehook)
    b.register_hook(tensor_prehook)
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(posthook)
    acc.register_prehook(prehook)
    b.grad_fn.register_hook(posthook)
    b.grad_fn.register_prehook(prehook)

    tg.autograd.grad(c, inputs=(b), retain_graph=True)
    assert (tensor_hook_count[0], posthook_count[0], prehook_count[0]) == (1, 0, 0)
    reset_counts()
    tg.autograd.grad(c, inputs=(a, b), retain_graph=True)
    assert (tensor_hook_count[0], posthook_count[0], prehook_count[0]) == (2, 1, 1)
    reset_counts()
    c.backward(retain_graph=True)
    assert (tensor_hook_count[0], posthook_count[0], prehook_count[0]) == (2, 2, 2)
    reset_counts()
    c.backward(inputs=(a, b), retain_graph=True)
    assert (tensor_hook_count[0], posthook_count[0], prehook_count[0]) == (2, 2, 2)


def test_sharded_grad():
    leaves = [tg.zeros(5, 5, requires_grad=True) for _ in range(10)]
    intermediates = [l * i + l * l for i, l in enumerate(leaves)]
    loss = sum(v * i for i, v in enumerate(intermediates)).sum()

    def group(l, group_size):
        return (l[i:i + group_size] for i in range(0, len(l), group_size))

    shard_size = 2
    d_intermediates = [d_i for intermediates_batch in group(intermediates, shard_size)
                       for d_i in tg.autograd.grad(loss, intermediates_batch)]
    tg.autograd.backward(intermediates, d_intermediates)
    for i, l in enumerate(leaves):
        assertEqual(l.grad, i * i * (1 + l))


def test_backward_badcalls():
    x = tg.ones(1)
    with pytest.raises(RuntimeError, match="does not require grad"):
        x.backward()


def test_grad_badcalls():
    x = tg.ones(1)
    y = x**2
    with pytest.raises(RuntimeError, match="does not require grad"):
        tg.autograd.grad(x, y)
    with pytest.raises(RuntimeError, match="does not require grad"):
        tg.autograd.grad(y, x)
    x = tg.ones(1, requires_grad=True)
    y = x**2
    tg.autograd.grad(y, x)


def test_grad_empty_inputs():
    x = tg.tensor([1.0], requires_grad=True)
    # torch 2.13 (the installed oracle) raises RuntimeError("`inputs` argument to `grad()` cannot be
    # empty."); the stored test, from a later torch, expects ValueError("grad requires non-empty inputs.")
    with pytest.raises(RuntimeError, match=r"`inputs` argument to `grad\(\)` cannot be empty."):
        tg.autograd.grad(2 * x, [], grad_outputs=tg.tensor([1.0]))


def test_grad_fn_badcalls():
    error_regex = "expected .* arguments, got .* instead"
    x = tg.ones(1, requires_grad=True)
    y = x**2
    with pytest.raises(TypeError, match=error_regex):
        y.grad_fn(x.detach(), x.detach())
    with pytest.raises(TypeError, match=error_regex):
        y.grad_fn()
    y.grad_fn(x.detach())


def test_grad_unreachable():
    x = tg.ones(1, requires_grad=True)
    y = tg.ones(1, requires_grad=True)
    z = x * 2
    w = y * 2
    grad_x, grad_y = tg.autograd.grad(x * 2, [x, y], allow_unused=True)
    assertEqual(grad_x, x * 2)
    assert grad_y is None
    z = tg.ones(1, requires_grad=True)
    grad_x, grad_z = tg.autograd.grad(x * 2, [x, z], allow_unused=True)
    assertEqual(grad_x, x * 2)
    assert grad_z is None
    with pytest.raises(RuntimeError, match="Set allow_unused=True"):
        grad_x, grad_y = tg.autograd.grad(x * 2, [x, y], allow_unused=False)


def test_grad_unreachable_discovery():
    class MyFunc(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            raise AssertionError("This node should not be executed!")

    x = MyFunc.apply(tg.randn(1, requires_grad=True) * 2)
    y = tg.randn(1, requires_grad=True)
    (gY,) = tg.autograd.grad(x, (y,), allow_unused=True)
    assert gY is None

    x = MyFunc.apply(tg.randn(1, requires_grad=True) * 2)
    y = tg.randn(1, requires_grad=True)
    z = tg.randn(1, requires_grad=True)
    (gY, gZ) = tg.autograd.grad(x + z, (y, z), allow_unused=True)
    assert gY is None
    assert gZ is not None

    x = MyFunc.apply(tg.randn(1, requires_grad=True) * 2)
    y = tg.randn(1, requires_grad=True)
    tg.autograd.backward(x, inputs=(y,))
    assert y.grad is None


def test_grad_batched_grad():
    x = tg.randn(2, 2, requires_grad=True)
    out = x.clone()
    batched_grad = tg.arange(3).expand(2, 2, 3).transpose(0, 2)
    (grad,) = tg.autograd.grad(out, (x,), (batched_grad,), is_grads_batched=True)
    assertEqual(grad, tg.arange(3).expand(2, 2, 3).transpose(0, 2).to(dtype=grad.dtype))
    grad_out = tg.ones(2, 2)
    with pytest.raises(RuntimeError, match="If `is_grads_batched=True`, we interpret the first"):
        tg.autograd.grad(outputs=out, grad_outputs=(grad_out,), inputs=(x,), is_grads_batched=True)
    out = x.sum()
    batched_grad = tg.arange(3)
    (grad,) = tg.autograd.grad(out, (x,), (batched_grad,), is_grads_batched=True)
    assertEqual(grad, tg.arange(3).expand(2, 2, 3).transpose(0, 2).to(dtype=grad.dtype))
    grad_out = tg.ones(2).unsqueeze(1)
    with pytest.raises(RuntimeError, match="If `is_grads_batched=True`, we interpret the first"):
        tg.autograd.grad(outputs=out, grad_outputs=(grad_out,), inputs=(x,), is_grads_batched=True)


def test_hooks():
    x = tg.ones(5, 5, requires_grad=True)
    y = tg.ones(5, 5) * 4
    y.requires_grad_(True)
    counter = [0]

    def bw_hook(inc, grad):
        assert isinstance(grad, tg.Tensor)
        counter[0] += inc

    z = x**2 + x * 2 + x * y + y
    x.register_hook(lambda *args: bw_hook(0, *args))
    test = z.register_hook(lambda *args: bw_hook(1, *args))
    z.backward(tg.ones(5, 5), retain_graph=True)
    assert counter[0] == 1
    test2 = z.register_hook(lambda *args: bw_hook(2, *args))
    z.backward(tg.ones(5, 5), retain_graph=True)
    assert counter[0] == 4
    test2.remove()
    z.backward(tg.ones(5, 5), retain_graph=True)
    assert counter[0] == 5

    def bw_hook_modify(grad):
        return grad.mul(2)

    test.remove()
    z.register_hook(bw_hook_modify)
    with tg.no_grad():
        y.grad.zero_()
    z.backward(tg.ones(5, 5), retain_graph=True)
    assertEqual(y.grad, (x + 1) * 2)
    y.register_hook(bw_hook_modify)
    with tg.no_grad():
        y.grad.zero_()
    z.backward(tg.ones(5, 5))
    assertEqual(y.grad, (x + 1) * 4)


def _get_mul2(use_custom_function):
    if use_custom_function:
        class Mul2(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, gO):
                return gO * 2

        return Mul2.apply
    return lambda x: x * 2


def test_grad_fn_prehooks():
    for use_custom_function in (True, False):
        mul2 = _get_mul2(use_custom_function)
        a = tg.tensor([1.0], requires_grad=True)
        b = mul2(a)
        post_counter = [0]
        pre_counter = [0]

        def posthook(grad_input, grad_output):
            assert pre_counter[0] == 3
            assert tg.allclose(grad_output[0], tg.ones(1) * 8)
            assert tg.allclose(grad_input[0], tg.ones(1) * 16)
            post_counter[0] += 1
            return grad_input

        def prehook(grad_output):
            pre_counter[0] += 1
            return (grad_output[0] * 2,)

        b.grad_fn.register_hook(posthook)
        b.grad_fn.register_hook(posthook)
        b.grad_fn.register_prehook(prehook)
        b.grad_fn.register_prehook(lambda x: None)
        b.grad_fn.register_prehook(prehook)
        b.grad_fn.register_prehook(prehook)
        b.grad_fn.register_prehook(lambda x: x)
        b.grad_fn.register_prehook(lambda x: None)
        b.sum().backward()
        assert post_counter[0] == 2
        assert pre_counter[0] == 3

        a = tg.rand(3, 3, requires_grad=True)
        b = mul2(a)

        def prehook(grad_output):
            pre_counter[0] += 1
            return None

        b.grad_fn.register_prehook(prehook)
        b.sum().backward()
        assert pre_counter[0] == 4
        assert tg.allclose(a.grad, tg.ones(3, 3) * 2)


def test_grad_fn_prehooks_multiple_outputs():
    # torch's test also hooks torch.var_mean's two-output node; tracegrad has no var_mean,
    # the multi-output custom Function below is the same case
    class DoubleMul2(Function):
        @staticmethod
        def forward(ctx, x, a, y):
            ctx.a = a
            return a * x * 2, a, a * y * 2

        @staticmethod
        def backward(ctx, g1, _a, g2):
            return ctx.a * g1 * 2, None, ctx.a * g2 * 2

    counter = [0]

    def prehook(grad_output):
        g1, ga, g2 = grad_output
        assert ga is None
        counter[0] += 1
        return (g1 * 2, None, g2 * 2)

    a = tg.randn(3, 3, requires_grad=True)
    b = tg.randn(3, 3, requires_grad=True)
    k = 3
    c, _, d = DoubleMul2.apply(a, k, b)
    c.grad_fn.register_prehook(prehook)
    (c + d).sum().backward()
    assert counter[0] == 1
    assert tg.allclose(a.grad, tg.ones(1) * 4 * k)
    assert tg.allclose(b.grad, tg.ones(1) * 4 * k)


def test_grad_fn_prehooks_remove_hooks():
    for use_custom_function in (True, False):
        mul2 = _get_mul2(use_custom_function)
        a = tg.rand(3, 3, requires_grad=True)
        b = mul2(a)
        counter = [0]

        def prehook(grad_output):
            counter[0] += 1
            return None

        handle = b.grad_fn.register_prehook(prehook)
        b.grad_fn.register_prehook(prehook)
        handle.remove()
        b.sum().backward()
        assert tg.allclose(a.grad, tg.ones(3, 3) * 2)
        assert counter[0] == 1

        a = tg.rand(3, 3, requires_grad=True)
        b = mul2(a)
        counter = [0]

        def prehook1(grad_output):
            handle2.remove()
            handle3.remove()
            return None

        def prehook2(grad_output):
            counter[0] += 1
            return None

        b.grad_fn.register_prehook(prehook1)
        handle2 = b.grad_fn.register_prehook(prehook2)
        handle3 = b.grad_fn.register_prehook(prehook2)
        handle3.remove()
        b.sum().backward()
        assert tg.allclose(a.grad, tg.ones(3, 3) * 2)
        assert counter[0] == 1


def test_hooks_cpp():
    bn = tnn.BatchNorm1d(5, affine=False)
    bn.double()
    bn.eval()
    counter = [0]

    def bw_hook(grad):
        counter[0] += 1
        return grad * 2

    x = tg.ones(5, 5, dtype=tg.double, requires_grad=True)
    z = bn(x)
    z.register_hook(bw_hook)
    z.sum().backward()
    assert counter[0] == 1, "bw_hook not called"
    assertEqual(x.grad, tg.ones(5, 5, dtype=tg.double) * 2, atol=1e-5, rtol=0)


def test_hook_none():
    class NoneGradientFunction(Function):
        @staticmethod
        def forward(ctx, x, y):
            assert ctx.needs_input_grad[0]
            assert not ctx.needs_input_grad[1]
            return x, y

        @staticmethod
        def backward(ctx, grad_x, grad_y):
            return grad_x, None

    was_called = [False]

    def hook(grad):
        assert grad is not None
        was_called[0] = True

    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5)
    rx, ry = NoneGradientFunction.apply(x, y)
    rx.register_hook(hook)
    ry.register_hook(hook)
    sum(rx, ry).sum().backward()
    assert was_called[0]


def test_retain_grad():
    input = tg.rand(1, 3, requires_grad=True)
    h1 = input * 3
    out = (h1 * h1).sum()
    h1.retain_grad()
    h1.retain_grad()
    out.backward(retain_graph=True)
    assertEqual(h1 * 2, h1.grad)
    out.backward(retain_graph=True)
    assertEqual(h1 * 4, h1.grad)
    with tg.no_grad():
        input.grad.zero_()
    input.retain_grad()
    input.retain_grad()
    out.backward()
    assertEqual(input * 18, input.grad)


def test_retain_grad_inplace():
    a = tg.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    assertEqual(a.grad, tg.tensor([1.0]))

    a = tg.tensor([1.0], requires_grad=True).clone()
    a.retain_grad()
    a.mul_(2)
    a.mul_(2)
    a.sum().backward()
    assertEqual(a.grad, tg.tensor([1.0]))

    x = tg.tensor([1.0], requires_grad=True).clone()
    x.retain_grad()
    x_view = x[:]
    x_view *= 2
    x *= 2
    x.sum().backward()
    assertEqual(x.grad, tg.tensor([1.0]))     # torch's test checks a.grad here (a typo); x's is meant

    x = tg.zeros(4)
    y = x.view(2, 2)
    y.add_(tg.randn(2, 2, requires_grad=True))


class _DoubleMul(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


def test_retains_grad_inplace_multiple_outputs():
    # torch's test also runs torch.var_mean (absent from tracegrad); the custom Function is the same case
    for fn in (_DoubleMul.apply,):
        b = tg.rand(3, 3, requires_grad=True)
        var, mean = fn(b)
        var.retain_grad()
        mean.retain_grad()
        var.mul_(2)
        (var + mean).sum().backward()
        gvar = var.grad
        gmean = mean.grad
        a = b.detach().requires_grad_(True)
        var, mean = fn(a)
        var.mul_(2)
        out = (var + mean).sum()
        gvar_expected, gmean_expected = tg.autograd.grad(out, inputs=(var, mean))
        assert tg.allclose(gvar, gvar_expected)
        assert tg.allclose(gmean, gmean_expected)


def test_retain_grad_inplace_over_view():
    base = tg.tensor([1.0], requires_grad=True).clone()
    view = base[:]
    view2 = base[:]
    view.retain_grad()
    view2.retain_grad()
    view.mul_(2)
    (view + view2).sum().backward()
    assertEqual(view.grad, view2.grad)
    assertEqual(view.grad, tg.tensor([1.0]))


def test_tensor_hooks_inplace():
    count1 = [0]
    count2 = [0]

    def fn1(grad):
        count1[0] += 1
        assertEqual(grad, tg.tensor([4.0]))
        return grad * 2

    def fn2(grad):
        count2[0] += 1
        assertEqual(grad, tg.tensor([1.0]))
        return grad * 2

    a = tg.tensor([1.0], requires_grad=True)
    b = a.clone()
    b.register_hook(fn1)
    b.mul_(2)
    b.register_hook(fn2)
    b.sum().backward()
    assert count1[0] == 1
    assert count2[0] == 1
    assertEqual(a.grad, tg.tensor([8.0]))

    count3 = [0]

    def fn3(grad):
        count3[0] += 1
        assertEqual(grad, tg.tensor([4.0]))
        return grad * 2

    a = tg.tensor([1.0], requires_grad=True)
    b = a.clone()
    b.register_hook(fn3)
    b.mul_(2)
    b.mul_(2)
    b.sum().backward()
    assert count1[0] == 1
    assertEqual(a.grad, tg.tensor([8.0]))


def test_tensor_hooks_inplace_multiple_outputs():
    # torch's test also runs torch.var_mean (absent from tracegrad); the custom Function is the same case
    for fn in (_DoubleMul.apply,):
        counts = [0, 0, 0]

        def fn0(grad):
            counts[0] += 1
            assertEqual(grad, tg.ones_like(out1) * 2)

        def fn1(grad):
            counts[1] += 1
            assertEqual(grad, tg.ones_like(out1) * 3)

        def fn2(grad):
            counts[2] += 1
            assertEqual(grad, tg.ones_like(out1))

        b = tg.rand(3, 3, requires_grad=True)
        out1, out2 = fn(b)
        h1 = out1.register_hook(fn0)
        h2 = out2.register_hook(fn1)
        out1.mul_(2)
        h3 = out1.register_hook(fn2)
        (out1 + out2 * 3).sum().backward()
        assert counts == [1, 1, 1]
        h1.remove()
        h2.remove()
        h3.remove()


def test_tensor_hooks_inplace_over_view():
    count = [0]

    def fn0(grad):
        raise AssertionError("fn0 must not run")

    def fn1(grad):
        raise AssertionError("fn1 must not run")

    def fn2(grad):
        count[0] += 1
        assertEqual(grad, tg.tensor([1.0]))

    base = tg.tensor([1.0], requires_grad=True).clone()
    view = base[:]
    view2 = base[:]
    view.register_hook(fn0)
    view2.register_hook(fn1)
    view.mul_(2)
    view2.grad_fn
    view2.register_hook(fn2)
    (view + view2).sum().backward()
    assert count[0] == 1


def test_retain_grad_cycle():
    x = tg.ones(5, 5, requires_grad=True)

    def run_test():
        y = x * 2
        y.retain_grad()
        return y / 2, weakref.ref(y)

    z, ref = run_test()
    gc.collect()
    assert ref() is None
    z.sum().backward()


def test_backward():
    v = tg.randn(5, 5, requires_grad=True)
    x = tg.randn(5, 5, requires_grad=True)
    y = (tg.rand(5, 5) + 0.1).requires_grad_(True)
    z = tg.randn(5, 5, requires_grad=True)
    grad_output = tg.randn(5, 5)
    v.backward(grad_output)
    assertEqual(v.grad, grad_output)
    a = x + (y * z) + 4 * z**2 * x / y
    a.backward(grad_output)
    x_grad = 4 * z.pow(2) / y + 1
    y_grad = z - 4 * x * z.pow(2) / y.pow(2)
    z_grad = 8 * x * z / y + y
    assertEqual(x.grad, x_grad * grad_output)
    assertEqual(y.grad, y_grad * grad_output)
    assertEqual(z.grad, z_grad * grad_output)


def test_multi_backward():
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5, requires_grad=True)
    q = tg.randn(5, 5, requires_grad=True)
    a = tg.randn(5, 5, requires_grad=True)
    b = tg.randn(5, 5, requires_grad=True)
    q2 = q * 2
    z = x + y + q2
    c = a * b + q2
    grad_z = tg.randn(5, 5)
    grad_c = tg.randn(5, 5)
    tg.autograd.backward([z, c], [grad_z, grad_c])
    assertEqual(x.grad, grad_z)
    assertEqual(y.grad, grad_z)
    assertEqual(a.grad, grad_c * b)
    assertEqual(b.grad, grad_c * a)
    assertEqual(q.grad, (grad_c + grad_z) * 2)


def test_multi_backward_no_grad():
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5, requires_grad=False)
    z = x + y
    q = y * 2
    with pytest.raises(RuntimeError):
        tg.autograd.backward([z, q], [tg.ones(5, 5), tg.ones(5, 5)])


def test_backward_with_inputs():
    x = tg.randn(2, 2, dtype=tg.double, requires_grad=True)
    y = tg.randn(2, 2, dtype=tg.double, requires_grad=True)

    def fn():
        return x**2 + y * x + y**2

    gradient = tg.ones(2, 2)
    x_grad_expected = 2 * x + y
    y_grad_expected = x + 2 * y

    @tg.no_grad()
    def reset_grad():
        x.grad.zero_()
        y.grad.zero_()

    tg.autograd.backward(fn(), gradient, inputs=[x, y])
    assertEqual(x.grad, x_grad_expected)
    assertEqual(y.grad, y_grad_expected)
    reset_grad()
    tg.autograd.backward(fn(), gradient, inputs=[x])
    assertEqual(x.grad, x_grad_expected)
    assertEqual(y.grad, tg.zeros(2, 2))
    reset_grad()
    tg.autograd.backward(fn(), gradient, inputs=[y])
    assertEqual(y.grad, y_grad_expected)
    assertEqual(x.grad, tg.zeros(2, 2))
    reset_grad()
    tg.autograd.backward(fn(), gradient, inputs=y)
    assertEqual(y.grad, y_grad_expected)
    assertEqual(x.grad, tg.zeros(2, 2))
    reset_grad()
    with pytest.raises(RuntimeError, match="cannot be empty"):
        tg.autograd.backward(fn(), gradient, inputs=[])


def test_backward_with_scalar_input():
    x = tg.randn([], dtype=tg.double, requires_grad=True)
    out = x**2
    out.backward(inputs=x)
    assertEqual(x.grad, 2 * x)


def test_backward_with_nonleaf_inputs():
    x = tg.randn(2, 2, dtype=tg.double, requires_grad=True)
    x_nonleaf = x * 1
    y = tg.randn(2, 2, dtype=tg.double, requires_grad=True)
    z = tg.randn(2, 2, dtype=tg.double, requires_grad=True)
    out = x_nonleaf**2 + y * x_nonleaf + y**2
    out.backward(tg.ones(2, 2, dtype=tg.double), create_graph=True, inputs=[x, y, x_nonleaf])
    assertEqual(y.grad, x + 2 * y)
    assertEqual(x.grad, 2 * x + y)
    assertEqual(x_nonleaf.grad, 2 * x_nonleaf + y)
    out.backward(tg.ones(2, 2, dtype=tg.double), create_graph=True, inputs=[z])
    assert z.grad is None


def test_dependent_backward():
    x = tg.randn(10, requires_grad=True)
    y = x**2
    z = y**3
    go_y = tg.randn(10)
    go_z = tg.randn(10)
    tg.autograd.backward([y, z], [go_y, go_z])
    xd = x
    assertEqual(x.grad, 2 * xd * go_y + 6 * xd.pow(5) * go_z, rtol=1e-5)


def test_save_output_nr():
    x = tg.randn(10, requires_grad=True)
    seen = []

    class MultiOutputFn(Function):
        @staticmethod
        def forward(ctx, x):
            return x[:5], x[5:]

        @staticmethod
        def backward(ctx, *grad):
            return tg.cat(grad)

    a, b = MultiOutputFn.apply(x)
    assert b.output_nr == 1

    class TestFn(Function):
        @staticmethod
        def forward(ctx, b):
            ctx.save_for_backward(b)
            return b * 2

        @staticmethod
        def backward(ctx, grad_b):
            (b,) = ctx.saved_tensors
            seen.append(b.output_nr)

    TestFn.apply(b).sum().backward()
    assert seen == [1]


# torch runs 150000 (and 100000) steps; a tenth keeps the test fast and is still far
# deeper than Python's recursion limit, which is what these tests guard.
def test_free_deep_graph():
    def scope():
        depth = 15000
        x = tg.randn(1, requires_grad=True)
        y = x.clone()
        for _ in range(depth):
            y = y + y * 0.000001

    scope()


def test_free_deep_graph_complicated():
    def scope():
        depth = 10000
        randchoice = tg.randint(2, [depth, 2])
        x = tg.randn(1, requires_grad=True)
        y = x.clone()
        prev_values = [None, None]
        for _ in range(depth):
            prev_tensors = [tensor for tensor in prev_values[:-1] if tensor is not None]
            prev_values.append(y)
            prev_values.pop(0)
            y += y * 0.000001
            nprev = len(prev_tensors)
            if nprev == 2:
                y += randchoice[depth].mul(tg.cat(prev_tensors)).sum()

    scope()


def test_free_deep_graph_pyfunction():
    class MyOp(Function):
        @staticmethod
        def forward(ctx, tensor1, tensor2):
            return tensor1 + tensor2

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output

    def scope():
        depth = 15000
        x = tg.randn(1, requires_grad=True)
        y = x.clone()
        for _ in range(depth):
            y = MyOp.apply(y, y)

    scope()


def test_no_unnecessary_save():
    mu = tg.ones(1, requires_grad=True)
    x = tg.empty(1)
    loss = 0
    for i in range(3):
        x.detach_()
        x.copy_(mu + i)
        ft = tg.tensor([float(i)])
        multiplied = x * ft
        s = multiplied.sum()
        loss += s
    loss.backward()
    assertEqual(mu.grad, tg.tensor([3.0]))


def test_no_grad():
    x = tg.ones(5, 5, requires_grad=True)
    y = tg.ones(5, 5) * 4
    with tg.no_grad():
        w = x + y

    def adder(x, y):
        return x + y

    adders = [tg.no_grad()(adder), tg.no_grad(adder)]
    for adder in adders:
        z = adder(x, y)
        assert not w.requires_grad
        with pytest.raises(RuntimeError):
            w.backward(tg.ones(5, 5))
        assert w.grad_fn is None
        assert not z.requires_grad
        with pytest.raises(RuntimeError):
            z.backward(tg.ones(5, 5))
        assert z.grad_fn is None
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        w = adder(x, y)
        assert not tg.is_grad_enabled()


def test_enable_grad_decorator_no_paren():
    x = tg.ones(1, requires_grad=True)

    @tg.enable_grad
    def doubler(x):
        return x * 2

    with tg.no_grad():
        z = doubler(x)
    assert z.requires_grad


def test_set_grad_generator_functions():
    @tg.no_grad()
    def gen_no_grad():
        for i in range(10):
            assert tg.is_grad_enabled() is False
            yield i

    with tg.enable_grad():
        for _ in gen_no_grad():
            assert tg.is_grad_enabled() is True

    @tg.enable_grad()
    def gen_enable_grad():
        for i in range(10):
            assert tg.is_grad_enabled() is True
            yield i

    with tg.no_grad():
        for _ in gen_enable_grad():
            assert tg.is_grad_enabled() is False


def test_set_grad_generator_functions_recursive():
    @tg.enable_grad()
    def enable_grad_decorator_recursive(depth):
        assert tg.is_grad_enabled()
        if depth > 0:
            no_grad_decorator_recursive(depth - 1)
            assert tg.is_grad_enabled()

    @tg.no_grad()
    def no_grad_decorator_recursive(depth):
        assert not tg.is_grad_enabled()
        if depth > 0:
            enable_grad_decorator_recursive(depth - 1)
            assert not tg.is_grad_enabled()

    def enable_grad_context_manager_recursive(depth):
        with tg.enable_grad():
            assert tg.is_grad_enabled()
            if depth > 0:
                no_grad_context_manager_recursive(depth - 1)
                assert tg.is_grad_enabled()

    def no_grad_context_manager_recursive(depth):
        with tg.no_grad():
            assert not tg.is_grad_enabled()
            if depth > 0:
                enable_grad_context_manager_recursive(depth - 1)
                assert not tg.is_grad_enabled()

    with tg.enable_grad():
        assert tg.is_grad_enabled()
        enable_grad_decorator_recursive(10)
        assert tg.is_grad_enabled()
        enable_grad_context_manager_recursive(10)
        assert tg.is_grad_enabled()
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        enable_grad_decorator_recursive(10)
        assert not tg.is_grad_enabled()
        enable_grad_context_manager_recursive(10)
        assert not tg.is_grad_enabled()


def test_set_grad_coroutines():
    @tg.no_grad()
    def coro_no_grad(n=10):
        assert not tg.is_grad_enabled()
        for i in range(n):
            assert not tg.is_grad_enabled()
            r = yield i
            assert not tg.is_grad_enabled()
            assert i == r
        assert not tg.is_grad_enabled()

    @tg.enable_grad()
    def coro_enable_grad(n=10):
        assert tg.is_grad_enabled()
        for i in range(n):
            assert tg.is_grad_enabled()
            r = yield i
            assert tg.is_grad_enabled()
            assert i == r
        assert tg.is_grad_enabled()

    with tg.enable_grad():
        assert tg.is_grad_enabled()
        coro, r = coro_no_grad(), None
        try:
            while True:
                assert tg.is_grad_enabled()
                r = coro.send(r)
                assert tg.is_grad_enabled()
        except StopIteration:
            pass
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        coro, r = coro_enable_grad(), None
        try:
            while True:
                assert not tg.is_grad_enabled()
                r = coro.send(r)
                assert not tg.is_grad_enabled()
        except StopIteration:
            pass


def test_set_grad_coroutines_benign_exceptions():
    class RecoverableException(Exception):
        pass

    @tg.no_grad()
    def coro_no_grad(n=10):
        has_raised = False
        for i in range(n):
            try:
                assert not tg.is_grad_enabled()
                yield (-i if has_raised else i)
            except RecoverableException:
                assert not tg.is_grad_enabled()
                has_raised = True

    @tg.enable_grad()
    def coro_enable_grad(n=10):
        has_raised = False
        for i in range(n):
            try:
                assert tg.is_grad_enabled()
                yield (-i if has_raised else i)
            except RecoverableException:
                assert tg.is_grad_enabled()
                has_raised = True

    with tg.enable_grad():
        coro = coro_no_grad()
        assert 0 == next(coro)
        try:
            while True:
                r = coro.throw(RecoverableException)
                assert r < 0
        except StopIteration:
            pass
    with tg.no_grad():
        coro = coro_enable_grad()
        assert 0 == next(coro)
        try:
            while True:
                r = coro.throw(RecoverableException)
                assert r < 0
        except StopIteration:
            pass


def test_set_grad_coroutines_critical_exceptions():
    class UnrecoverableException(Exception):
        pass

    class SecondaryException(Exception):
        pass

    @tg.no_grad()
    def coro_no_grad(n=10):
        for i in range(n):
            try:
                assert not tg.is_grad_enabled()
                yield i
            except UnrecoverableException:
                assert not tg.is_grad_enabled()
                raise SecondaryException from None

    @tg.enable_grad()
    def coro_enable_grad(n=10):
        for i in range(n):
            try:
                assert tg.is_grad_enabled()
                yield i
            except UnrecoverableException:
                assert tg.is_grad_enabled()
                raise SecondaryException from None

    with tg.enable_grad():
        coro = coro_no_grad()
        assert 0 == next(coro)
        with pytest.raises(SecondaryException):
            coro.throw(UnrecoverableException)
    with tg.no_grad():
        coro = coro_enable_grad()
        assert 0 == next(coro)
        with pytest.raises(SecondaryException):
            coro.throw(UnrecoverableException)


def test_set_grad_coroutines_exit():
    @tg.no_grad()
    def coro_no_grad(state):
        for i in range(10):
            try:
                assert not tg.is_grad_enabled()
                yield i
            except GeneratorExit:
                assert not tg.is_grad_enabled()
                state.add("GeneratorExit")
                raise

    @tg.enable_grad()
    def coro_enable_grad(state):
        for i in range(10):
            try:
                assert tg.is_grad_enabled()
                yield i
            except GeneratorExit:
                assert tg.is_grad_enabled()
                state.add("GeneratorExit")
                raise

    state = set()
    with tg.enable_grad():
        coro = coro_no_grad(state)
        for _ in range(5):
            next(coro)
        coro.close()
    assert "GeneratorExit" in state
    state = set()
    with tg.no_grad():
        coro = coro_enable_grad(state)
        for _ in range(5):
            next(coro)
        coro.close()
    assert "GeneratorExit" in state


def test_no_grad_python_function():
    x = tg.ones(5, 5, requires_grad=True)

    class MyOp(Function):
        @staticmethod
        def forward(self, x):
            return x + 1

        @staticmethod
        def backward(self, dy):
            return dy

    with tg.no_grad():
        y = MyOp.apply(x)
    assert not y.requires_grad


def test_indexing():
    # torch's reference values are those of indexing the plain tensor x; numpy gives them here
    def check_index(xn, y, idx):
        if y.grad is not None:
            with tg.no_grad():
                y.grad.zero_()
        tidx = tuple(tg.tensor(i) if isinstance(i, np.ndarray) else i for i in idx) if isinstance(idx, tuple) \
            else (tg.tensor(idx) if isinstance(idx, np.ndarray) else idx)
        indexed_var = y[tidx]
        tref = torch.from_numpy(xn)[tuple(torch.from_numpy(i) if isinstance(i, np.ndarray) else i for i in idx)
                                    if isinstance(idx, tuple) else
                                    (torch.from_numpy(idx) if isinstance(idx, np.ndarray) else idx)]
        assertEqual(indexed_var.data, tref)
        indexed_var.sum().backward()
        expected_grad = torch.zeros(xn.shape)
        expected_grad[tuple(torch.from_numpy(i) if isinstance(i, np.ndarray) else i for i in idx)
                      if isinstance(idx, tuple) else
                      (torch.from_numpy(idx) if isinstance(idx, np.ndarray) else idx)] = 1
        assertEqual(y.grad, expected_grad)

    xn = np.arange(1.0, 17, dtype=np.float32).reshape(4, 4)
    y = tg.tensor(xn, requires_grad=True)
    for idx in [1, (1, 1), slice(1, None), slice(None, 2), (slice(None, 2), 2), (slice(1, 2), 2),
                (1, slice(2, None)), (slice(None, None), slice(2, None)), np.array([0, 2]),
                np.random.rand(4, 4) > 0.5, (Ellipsis, slice(2, None)), ([0], [0]), ([1, 2, 3], [0]),
                ([1, 2], [2, 1]), ([[1, 2], [3, 0]], [[0, 1], [2, 3]]), (slice(None), [2, 3]),
                ([2, 3], slice(None)), [0], ([0],)]:
        check_index(xn, y, idx)
    xn = np.arange(1.0, 49, dtype=np.float32).reshape(4, 3, 4)
    y = tg.tensor(xn, requires_grad=True)
    for idx in [(slice(None), [0], [0]), ([0], [0], slice(None)), (slice(None), [0, 1, 2], [0]),
                ([0, 1, 2], [0], slice(None)), (slice(None), [1, 2], [2, 1]), ([1, 2], [2, 1], slice(None)),
                (slice(None), [[1, 2], [2, 0]], [[0, 1], [2, 3]]), ([[1, 2], [3, 0]], [[0, 1], [2, 2]], slice(None)),
                (slice(None), slice(None), [2, 1]), (slice(None), [2, 1], slice(None)),
                ([2, 1], slice(None), slice(None)), ([0],), ([0], slice(None)), ([0], Ellipsis),
                ([1, 2], [0, 1]), ([1, 2], [0, 1], Ellipsis), (Ellipsis, [1, 2], [0, 1]),
                (np.array([0, 1]), Ellipsis)]:
        check_index(xn, y, idx)


def test_indexing_duplicates():
    x = tg.arange(1.0, 17).view(4, 4)
    y = x.detach().requires_grad_(True)
    idx = [1, 1, 3, 2, 1, 2]
    y[tg.tensor(idx)].sum().backward()
    expected_grad = np.zeros((4, 4))
    for i in idx:
        expected_grad[i] += 1
    assertEqual(y.grad, expected_grad)

    y = tg.arange(1.0, 17).view(4, 4).detach().requires_grad_(True)
    idx = ([1, 1, 3, 2, 1, 2], [0])
    y[idx].sum().backward()
    expected_grad = np.zeros((4, 4))
    for i in idx[0]:
        for j in idx[1]:
            expected_grad[i][j] += 1
    assertEqual(y.grad, expected_grad)

    y = tg.arange(1.0, 17).view(4, 4).detach().requires_grad_(True)
    idx = ([[1, 2], [0, 0]], [[0, 1], [1, 1]])
    y[idx].sum().backward()
    assertEqual(y.grad, tg.tensor([[0.0, 2.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0],
                                   [0.0, 0.0, 0.0, 0.0]]))

    y = tg.arange(1.0, 65).view(4, 4, 4).detach().requires_grad_(True)
    idx = ([1, 1, 1], slice(None), slice(None))
    y[idx].sum().backward()
    expected_grad = np.zeros((4, 4, 4))
    expected_grad[1] = 3
    assertEqual(y.grad, expected_grad)


def test_index_backward_does_not_save_tensor():
    a = tg.tensor([1.0, 0, 0])
    b = tg.zeros(3, requires_grad=True)
    tensor = b + 0
    tensor[a != 0] = tensor[a != 0]
    tensor.backward(tg.zeros_like(tensor))


def test_saved_variables_deprecated():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, tensor1, tensor2):
            ctx.save_for_backward(tensor1, tensor2)
            return tensor1 + tensor2

        @staticmethod
        def backward(ctx, grad_output):
            var1, var2 = ctx.saved_variables
            return (grad_output, grad_output)

    with warnings.catch_warnings(record=True) as warns:
        warnings.simplefilter("always")
        x = tg.randn((3, 3), requires_grad=True)
        y = tg.randn((3, 3), requires_grad=True)
        MyFunction.apply(x, y).sum().backward()
        assert any("deprecated" in str(w) and "saved_variables" in str(w) for w in warns)


def test_requires_grad():
    # torch's test also plants private _backward_hooks on a, x, y to check backward leaves them alone
    x = tg.randn(5, 5)
    y = tg.randn(5, 5)
    z = tg.randn(5, 5, requires_grad=True)
    a = x + y
    assert not a.requires_grad
    b = a + z
    assert b.requires_grad
    a.register_hook = None
    b.backward(tg.ones(5, 5))
    assert x.grad is None and y.grad is None
    assertEqual(z.grad, tg.ones(5, 5))


def test_requires_grad_():
    x = tg.randn(5, 5)
    y = tg.randn(5, 5, requires_grad=True)
    assert x is x.requires_grad_()
    assert x.requires_grad
    assert y is y.requires_grad_()
    assert y.requires_grad
    assert x is x.requires_grad_(True)
    assert x.requires_grad
    assert y is y.requires_grad_(True)
    assert y.requires_grad
    z = x * y
    with pytest.raises(RuntimeError):
        z.requires_grad_(False)
    assert z is z.requires_grad_()
    assert z.requires_grad
    assert z is z.requires_grad_(True)
    assert z.requires_grad
    assert x is x.requires_grad_(False)
    assert not x.requires_grad
    assert y is y.requires_grad_(False)
    assert not y.requires_grad


def test_requires_grad_inplace():
    a = tg.randn(5, 5)
    b = tg.randn(5, 5, requires_grad=True)
    a += b
    assert a.requires_grad
    a = tg.randn(5, 5) + 0
    b = tg.randn(5, 5, requires_grad=True)
    a += b
    assert a.requires_grad


def test_no_requires_grad_inplace():
    a = tg.randn(2, 3)
    a.add_(5)
    a.requires_grad = True
    a.sum().backward()
    assertEqual(a.grad, tg.ones(2, 3))

    a = tg.randn(2, 3)
    b = a[:]
    b.add_(5)
    a.requires_grad = True
    a.sum().backward()
    assertEqual(a.grad, tg.ones(2, 3))

    a = tg.randn(2, 3)
    b = a[:]
    a.requires_grad = True
    with pytest.raises(RuntimeError):
        a.add_(5)
    with pytest.raises(RuntimeError):
        b.add_(5)


def test_attribute_deletion():
    x = tg.randn((5, 5), requires_grad=True)
    del x.grad
    assert x.grad is None
    with pytest.raises(RuntimeError):
        del x.data
    with pytest.raises(TypeError):
        x.data = None
    with pytest.raises(RuntimeError):
        del x.requires_grad
    with pytest.raises(RuntimeError):
        del x._grad_fn
    with pytest.raises(RuntimeError):
        del x._backward_hooks


def test_duplicate_backward_root():
    a = tg.randn(5, 5, requires_grad=True)
    b = tg.randn(5, 5, requires_grad=True)
    x = a * b
    grad_output = tg.randn_like(x)
    tg.autograd.backward([x, x], [grad_output, grad_output])
    assertEqual(a.grad, b * grad_output * 2)
    assertEqual(b.grad, a * grad_output * 2)


def test_backward_no_grad():
    a = tg.randn(5, 5, requires_grad=True)
    b = a + 2
    with pytest.raises(RuntimeError):
        tg.autograd.backward([b], [None])


def test_backward_twice_with_saved_values():
    b = tg.randn(3, requires_grad=True, dtype=tg.double)
    c = tg.zeros(3, dtype=tg.double)
    c[[1, 2]] = b[[1, 1]]
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double))
    with pytest.raises(RuntimeError, match="Specify retain_graph=True"):
        c.backward(tg.tensor([1, 1, 1], dtype=tg.double))


def test_backward_twice_retained_graph_with_saved_values():
    b = tg.randn(3, requires_grad=True, dtype=tg.double)
    c = tg.zeros(3, dtype=tg.double)
    c[[1, 2]] = b[[1, 1]]
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double), retain_graph=True)
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double))
    assertEqual(b.grad, tg.tensor([0.0, 4.0, 0.0], dtype=tg.double))


def test_backward_twice_without_saved_values():
    b = tg.randn(3, requires_grad=True, dtype=tg.double)
    c = b + 1
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double))
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double))
    assertEqual(b.grad, tg.full((3,), 2.0, dtype=tg.double))


def test_backward_twice_retained_graph_without_saved_values():
    b = tg.randn(3, requires_grad=True, dtype=tg.double)
    c = tg.zeros(3, dtype=tg.double)
    c[[1, 2]] = b[[1, 1]]
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double), retain_graph=True)
    c.backward(tg.tensor([1, 1, 1], dtype=tg.double))


def test_backward_create_graph_warns():
    # torch's test runs under set_warn_always(True): the warning is otherwise given once a process
    prev = tg.is_warn_always_enabled()
    tg.set_warn_always(True)
    try:
        b = tg.randn(3, requires_grad=True, dtype=tg.double)
        c = b * b
        for _ in range(2):
            with warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter("always")
                c.backward(tg.ones_like(c), create_graph=True)
            b.grad = None
            assert any("Using backward() with create_graph=True" in str(w.message) for w in ws)
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            tg.autograd.grad(c, b, tg.ones_like(c), create_graph=True)
        assert not any("Using backward() with create_graph=True" in str(w.message) for w in ws)
    finally:
        tg.set_warn_always(prev)


def test_next_functions():
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5, requires_grad=True)
    a = x + y
    assert a.grad_fn is not None
    next_functions = a.grad_fn.next_functions
    assert len(next_functions) == 2
    assert isinstance(next_functions[0][0], tg.autograd.graph.AccumulateGrad)
    assert next_functions[0][1] == 0
    assert isinstance(next_functions[1][0], tg.autograd.graph.AccumulateGrad)
    assert next_functions[1][1] == 0
    b = a + 5
    next_functions = b.grad_fn.next_functions
    assert len(next_functions) == 2
    assert next_functions[0][0] is a.grad_fn
    assert next_functions[1][0] is None


def test_inplace():
    x = tg.ones(5, 5, requires_grad=True)
    y = (tg.ones(5, 5) * 4).requires_grad_(True)
    z = x * y
    q = z + y
    w = z * y
    z.add_(2)
    q.backward(tg.ones(5, 5), retain_graph=True)
    with pytest.raises(RuntimeError):
        w.backward(tg.ones(5, 5))

    z = x * y
    q = z * y
    r = z + y
    w = z.add_(y)
    w.backward(tg.ones(5, 5), retain_graph=True)
    r.backward(tg.ones(5, 5), retain_graph=True)
    with pytest.raises(RuntimeError):
        q.backward(tg.ones(5, 5))

    with tg.no_grad():
        x.grad.zero_()
    m = x / 2
    z = m + y / 8
    q = z * y
    r = z + y
    prev_version = z._version
    w = z.exp_()
    assert z._version != prev_version
    r.backward(tg.ones(5, 5), retain_graph=True)
    assertEqual(x.grad, tg.ones(5, 5) / 2)
    w.backward(tg.ones(5, 5), retain_graph=True)
    assertEqual(x.grad, tg.empty(5, 5).fill_((1 + math.e) / 2))
    with pytest.raises(RuntimeError):
        q.backward(tg.ones(5, 5))

    leaf = tg.ones(5, 5, requires_grad=True)
    x = leaf.clone()
    x.add_(10)
    assertEqual(x, tg.ones(5, 5) * 11)
    y = x + 2
    y.backward(tg.ones(5, 5))
    assertEqual(leaf.grad, tg.ones(5, 5))
    z = x * y
    x.add_(2)
    with pytest.raises(RuntimeError):
        z.backward(tg.ones(5, 5))


def test_mark_non_differentiable():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, input):
            output = input > 0
            ctx.mark_non_differentiable(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            return (grad_output * 0).to(tg.double)

    x = tg.randn(5, 5, requires_grad=True)
    mask = MyFunction.apply(x)
    assert not mask.requires_grad
    y = x.masked_fill(mask, 0)
    y.sum().backward()
    assertEqual(x.grad, (x <= 0).float())


def test_mark_non_differentiable_mixed():
    calls = []

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, input):
            a = input + 1
            b = input + 2
            ctx.mark_non_differentiable(a)
            return a, b

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            assert (grad_a == 0).all()
            assert (grad_b == 1).all()
            calls.append(1)
            return grad_b

    x = tg.randn(5, 5, requires_grad=True)
    a, b = MyFunction.apply(x)
    assert not a.requires_grad
    assert b.requires_grad
    b.sum().backward()
    assertEqual(x.grad, tg.ones(5, 5))
    assert calls == [1]


def test_mark_non_differentiable_none():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, input):
            output = input.clone()
            ctx.mark_non_differentiable(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            return None

    x = tg.randn(5, 5, requires_grad=True)
    r = MyFunction.apply(x * x)
    (r * x).sum().backward()
    assertEqual(x.grad, x * x)


def test_return_duplicate():
    class DoubleDuplicate(Function):
        @staticmethod
        def forward(ctx, x):
            output = x * 2
            return output, output

        @staticmethod
        def backward(ctx, grad1, grad2):
            return grad1 * 2 + grad2 * 2

    def fn(x):
        a, b = DoubleDuplicate.apply(x)
        assert a is b
        return a + b

    x = tg.randn(5, 5, dtype=tg.double, requires_grad=True)
    assert gradcheck(fn, [x])
    assert gradgradcheck(fn, [x])


def test_return_duplicate_inplace():
    class DoubleInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x

        @staticmethod
        def backward(ctx, grad1, grad2):
            return grad1 * 2 + grad2 * 2

    def inplace_fn(x):
        a, b = DoubleInplace.apply(x.clone())
        assert a is b
        return a + b

    x = tg.randn(5, 5, dtype=tg.double, requires_grad=True)
    assert gradcheck(inplace_fn, [x])
    assert gradgradcheck(inplace_fn, [x])
    with pytest.raises(RuntimeError):
        DoubleInplace.apply(x)        # torch: InplaceFunction.apply(x), a leaf modified in place
    with pytest.raises(RuntimeError):
        DoubleInplace.apply(x.clone()[0])


def _tg_index(index):
    if isinstance(index, np.ndarray):
        return tg.tensor(index)
    if isinstance(index, tuple):
        return tuple(_tg_index(i) for i in index)
    return index


def _torch_index(index):
    if isinstance(index, np.ndarray):
        return torch.from_numpy(index)
    if isinstance(index, tuple):
        return tuple(_torch_index(i) for i in index)
    return index


def _test_setitem(size, index):
    x = tg.ones(*size, requires_grad=True)
    y = x + 2
    y_version = y._version
    y[_tg_index(index)] = 2
    assert y._version != y_version
    y.backward(tg.ones(*size))
    expected_grad = torch.ones(*size)
    expected_grad[_torch_index(index)] = 0
    assertEqual(x.grad, expected_grad)


def _test_setitem_tensor(size, index):
    x = tg.ones(*size, requires_grad=True)
    y = x + 2
    y_version = y._version
    value = x.new_empty(x[_tg_index(index)].size()).fill_(7)
    value.requires_grad = True
    y[_tg_index(index)] = value
    assert y._version != y_version
    y.backward(tg.ones(*size))
    expected_grad_input = torch.ones(*size)
    expected_grad_input[_torch_index(index)] = 0
    assertEqual(x.grad, expected_grad_input)
    assertEqual(value.grad, tg.ones_like(value))
    x = tg.randn(4, requires_grad=True)
    y = tg.zeros(2, 3, 4)
    y[1] = x
    y.backward(tg.randn(2, 3, 4))
    assert x.size() == x.grad.size()


def test_setitem():
    _test_setitem((5, 5), 1)
    _test_setitem((5,), 1)
    _test_setitem((1,), 0)
    _test_setitem((10,), ([0, 4, 2]))
    _test_setitem((5, 5), ([0, 4], [2, 2]))
    _test_setitem((5, 5, 5), (slice(None), slice(None), [1, 3]))
    _test_setitem((5, 5, 5), (slice(None), [1, 3], slice(None)))
    _test_setitem((5, 5, 5), ([1, 3], slice(None), slice(None)))
    _test_setitem((5, 5, 5), (slice(None), [2, 4], [1, 3]))
    _test_setitem((5, 5, 5), ([1, 3], [2, 4], slice(None)))
    _test_setitem_tensor((5, 5), 3)
    _test_setitem_tensor((5, 5), ([0, 1], [1, 0]))
    _test_setitem_tensor((5,), 3)
    _test_setitem_tensor((5,), np.array([3]).sum())
    _test_setitem_tensor((5,), [[0, 1, 2, 3]])
    _test_setitem_tensor((5, 5, 5), (slice(None), slice(None), [1, 3]))
    _test_setitem_tensor((5, 5, 5), (slice(None), [1, 3], slice(None)))
    _test_setitem_tensor((5, 5, 5), ([1, 3], slice(None), slice(None)))
    _test_setitem_tensor((5, 5, 5), (slice(None), [2, 4], [1, 3]))
    _test_setitem_tensor((5, 5, 5), ([1, 3], [2, 4], slice(None)))
    _test_setitem_tensor((5, 5, 5), (np.array([1, 3]), [2, 4], slice(None)))


def test_setitem_mask():
    mask = np.random.rand(5, 5) > 0.5
    _test_setitem((5, 5), mask)
    _test_setitem((5,), mask[0])
    _test_setitem((1,), mask[0, 0:1])
    _test_setitem_tensor((5, 5), mask)
    _test_setitem_tensor((5,), mask[0])


def test_select_sum():
    x = tg.randn(10, dtype=tg.double, requires_grad=True)

    def func(x):
        return x.select(0, 1).sum()

    assert gradcheck(func, [x])
    assert gradgradcheck(func, [x])


def test_select_expanded_v():
    v_expanded = tg.rand(10).expand(10, 10)
    a = tg.rand(10, 10, 10, requires_grad=True)
    (result,) = tg.autograd.grad(a[0], a, v_expanded)
    expected = np.zeros((10, 10, 10))
    expected[0] = v_expanded.numpy()
    assertEqual(result, expected)


def test_slice_expanded_v():
    v_expanded = tg.rand(10, 1).expand(2, 10, 10)
    a = tg.rand(10, 10, 10, requires_grad=True)
    (result,) = tg.autograd.grad(a[3:5], a, v_expanded)
    expected = np.zeros((10, 10, 10))
    expected[3:5] = v_expanded.numpy()
    assertEqual(result, expected)


def test_unused_output():
    x = tg.randn(10, 10, requires_grad=True)
    outputs = x.chunk(5)
    o = outputs[2]
    o = o * 4 + 2
    o.sum().backward()
    expected_grad = np.zeros((10, 10))
    expected_grad[4:6] = 4
    assertEqual(x.grad, expected_grad)
    with tg.no_grad():
        x.grad.zero_()
    grad_output = tg.randn(2, 10)
    outputs = x.chunk(5)
    outputs[0].backward(grad_output)
    expected_grad = np.zeros((10, 10))
    expected_grad[:2] = grad_output.numpy()
    assertEqual(x.grad, expected_grad)


def test_gc_in_destructor():
    class CollectOnDelete(Function):
        def forward(self, x):
            return x

        def backward(self, grad_output):
            return grad_output

        def __del__(self):
            gc.collect()

    for _ in range(10):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            CollectOnDelete().forward(tg.randn(1, requires_grad=True)).backward()


def test_naughty_autograd_function_attribute_access():
    # torch's test goes on to probe THPFunction's C accessors on the instance; those have no counterpart
    class Id(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad_x):
            return grad_x

    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        f = Id()
    assert isinstance(f, Id)
    x = tg.zeros(1, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-static forward method is deprecated"):
        f(x)
    t = Id.apply(x)
    assert t.grad_fn.name() == "IdBackward"


def test_naughty_autograd_function_stashing_ctx():
    # torch's test expects ctx.saved_tensors to raise once the graph is gone; torch 2.13 (the
    # installed oracle) keeps the node alive through the stashed ctx and answers it, so the
    # outcome is compared with torch's, run alongside
    def run(m):
        saved_ctx = []

        class Id(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, grad_x):
                saved_ctx.append(ctx)
                return ctx.saved_tensors

        p = m.zeros(1, requires_grad=True)
        loss = Id.apply(p)
        loss.backward(retain_graph=True)
        del loss
        gc.collect()
        try:
            return ("ok", [t.tolist() for t in saved_ctx[0].saved_tensors])
        except RuntimeError as e:
            return ("raised", str(e))

    assert run(tg) == run(torch)


def test_custom_autograd_repeated_grad_grad():
    def mult1(x):
        return x.prod(dim=-1).prod(dim=-1)

    class Mult(Function):
        @staticmethod
        def forward(ctx, x):
            y = mult1(x)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, y = ctx.saved_tensors
            return (grad_output * y)[:, None, None] / x

    mult2 = Mult.apply

    def check_gradgrad_repeated(x, y):
        (gy,) = tg.autograd.grad(y[0], x, create_graph=True)
        (ggy_1,) = tg.autograd.grad(gy[0, 0, 0], x, retain_graph=True)
        (gy,) = tg.autograd.grad(y[0], x, create_graph=True)
        (ggy_2,) = tg.autograd.grad(gy[0, 0, 0], x, retain_graph=True)
        assertEqual(ggy_1[0, 0, 1], ggy_2[0, 0, 1])

    x = tg.ones(2, 4, 4).requires_grad_()
    check_gradgrad_repeated(x, mult1(x))
    check_gradgrad_repeated(x, mult2(x))


def test_custom_autograd_no_early_free():
    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            y = x**2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, _ = ctx.saved_tensors
            return grad_output * 2 * x

    class Double2(Double):
        @staticmethod
        def backward(ctx, grad_output):
            x, y = ctx.saved_tensors
            return grad_output * 2 * y / x

    double = Double.apply
    double2 = Double2.apply
    x = tg.tensor(2).double().requires_grad_()
    assert gradcheck(double, x)
    assert gradgradcheck(double, x)
    assert gradcheck(double2, x)
    assert gradgradcheck(double2, x)
    y = double(x)
    tg.autograd.grad(y, x, create_graph=True)
    tg.autograd.grad(y, x)
    y = double2(x)
    tg.autograd.grad(y, x, create_graph=True)
    tg.autograd.grad(y, x)


def test_detach():
    x = tg.randn(10, 10, requires_grad=True)
    y = x + 2
    y = y.detach()
    z = y * 4 + 2
    assert not y.requires_grad
    assert not z.requires_grad

    x = tg.randn(10, 10, requires_grad=True)
    y = x * 2
    y = y.detach()
    assert not y.requires_grad
    assert y.grad_fn is None
    z = x + y
    z.sum().backward()
    assertEqual(x.grad, tg.ones(10, 10))

    x = tg.randn(10, 10, requires_grad=True)
    y = tg.randn(10, 10, requires_grad=True)
    a = x * 2
    (y + a).sum().backward(retain_graph=True)
    a.detach_()
    assert not a.requires_grad
    (y + a).sum().backward()
    assertEqual(x.grad, tg.ones(10, 10) * 2)
    assertEqual(y.grad, tg.ones(10, 10) * 2)

    view = x.narrow(0, 1, 4)
    with pytest.raises(RuntimeError, match="view"):
        view.detach_()


def test_detach_base():
    x = tg.randn(10, 10, requires_grad=True)
    view = x.narrow(0, 1, 4)
    x.detach_()
    assert not x.requires_grad
    assert view.requires_grad
    assert view.grad_fn is not None
    assert view._base is x


def test_detach_then_inplace_raises_in_autograd():
    x = tg.randn([], requires_grad=True)
    y = x**2
    z = x.detach()
    z.zero_()
    with pytest.raises(RuntimeError, match="has been modified by an inplace"):
        y.backward()


def test_type_conversions():
    # torch's test checks the legacy tensor types (torch.FloatTensor ...) and CUDA; the dtype
    # conversions and the backward through them (its _test_type_conversion_backward) are ported
    x = tg.randn(5, 5)
    assert x.float().dtype is tg.float32
    assert x.int().dtype is tg.int32
    for dt in (tg.float64, tg.float32, tg.int32):
        y = tg.randint(5, (5, 5), dtype=dt)
        assert x.type(dt).dtype is dt
        assert x.type_as(y).dtype is dt
    fvar = tg.randn(5, 5).float().requires_grad_(True)
    fvar.double().sum().backward()
    assertEqual(fvar.grad, tg.ones_like(fvar))
    assert fvar.grad.dtype is tg.float32
    dvar = tg.randn(5, 5).double().requires_grad_(True)
    dvar.float().sum().backward()
    assertEqual(dvar.grad, tg.ones_like(dvar))
    assert dvar.grad.dtype is tg.float64


def test_isolated_node():
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5, requires_grad=True)
    a = x + y
    b = tg.max(a, 1, True)[1].repeat(1, 5).double()
    o = (b + a).sum()
    o.backward()
    assertEqual(x.grad, tg.ones(5, 5))


def test_shape():
    x = tg.randn(3, 4)
    assert 2 == len(x.shape)
    assert x.shape[0] == 3
    assert x.shape[1] == 4


def test_numpy_requires_grad():
    x = tg.randn(2, 2, requires_grad=True)
    err_msg_outputs = r"Can't call numpy\(\) on Tensor that requires grad. Use tensor.detach\(\).numpy\(\) instead."
    with pytest.raises(RuntimeError, match=err_msg_outputs):
        x.numpy()
    with tg.no_grad():
        x.numpy()
    x = tg.randn(2, 2)
    x.numpy()
    with tg.no_grad():
        x.numpy()


def test_return_leaf():
    class Identity(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a, a + b

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a + grad_b, grad_b

    hook_called = [False]
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5, 5, requires_grad=True)
    q, p = Identity.apply(x, y)

    def hook(grad):
        hook_called[0] = True
        assertEqual(grad, tg.ones(5, 5))

    q.register_hook(hook)
    (q + p + x).sum().backward()
    assertEqual(x.grad, tg.ones(5, 5) * 3)
    assertEqual(y.grad, tg.ones(5, 5))
    assert hook_called[0]


def test_return_leaf_inplace():
    from tracegrad.autograd import InplaceFunction

    class Inplace(InplaceFunction):
        @staticmethod
        def forward(ctx, a, b):
            ctx.mark_dirty(a)
            return a.add_(b), b + 2

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a, grad_a + grad_b

    x = tg.randn(5, 5)
    y = tg.randn(5, 5, requires_grad=True)
    q, p = Inplace.apply(x, y)
    assert q is x
    assert q.grad_fn.__class__ is Inplace._backward_cls
    assert q.requires_grad
    q.sum().backward()
    assertEqual(y.grad, tg.ones(5, 5))


def test_leaf_assignment():
    x = tg.randn(5, 5)
    y = tg.randn(5, requires_grad=True)
    z = tg.randn(5, requires_grad=True)
    x[0] = y
    x[1] = 2 * z
    assert x.requires_grad
    assert x.grad_fn is not None
    x.sum().backward()
    assertEqual(y.grad, tg.ones(5))
    assertEqual(z.grad, tg.ones(5) * 2)


def test_no_grad_assignment():
    x = tg.randn(5, 5, requires_grad=True)
    y = tg.randn(5)
    with tg.no_grad():
        x[0] = y
    assert x.requires_grad
    assert x.grad_fn is None


def test_no_grad_modifies_version():
    x = tg.randn(5, requires_grad=True)
    y = tg.randn(5, requires_grad=True)
    z = (x * y).sum()
    with tg.no_grad():
        x *= 2
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_increment_version():
    a = tg.rand(5, requires_grad=True)
    v = a._version
    tg.autograd.graph.increment_version(a)
    assert a._version == v + 1
    a = tg.zeros(5, dtype=tg.int)
    v = a._version
    tg.autograd.graph.increment_version(a)
    assert a._version == v + 1
    with tg.inference_mode():
        a = tg.rand(5, requires_grad=True)
        tg.autograd.graph.increment_version(a)
    tg.autograd.graph.increment_version(a)


def test_no_grad_input():
    class MyFunction(Function):
        @staticmethod
        def forward(self, x):
            return x

        @staticmethod
        def backward(self, grad_output):
            return grad_output

    x = tg.randn(5, requires_grad=True)
    with tg.no_grad():
        y = MyFunction.apply(x)
    assert x.requires_grad
    assert y.grad_fn is None


def test_backward_copy():
    x = tg.ones(5, 5, requires_grad=True)
    y = tg.ones(5, 5, requires_grad=True)
    a = x + 2
    b = y + 2
    c = x + 2
    add1 = a + b
    add2 = add1 + c
    for _ in range(4):
        a = a * 2
        b = b * 2
        c = c * 2
    branch = a + b + c
    out = add2 + branch
    out.backward(tg.ones(5, 5))
    assertEqual(x.grad, tg.ones(5, 5) * 34)
    assertEqual(y.grad, tg.ones(5, 5) * 17)


def test_save_none_for_backward():
    class MyFn(Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(None, input, None)
            return input * input

        @staticmethod
        def backward(ctx, grad_output):
            n1, input, n2 = ctx.saved_tensors
            assert n1 is None
            assert n2 is None
            return 2 * input * grad_output

    x = tg.randn(5, 5, requires_grad=True)
    y = MyFn.apply(x)
    y.sum().backward()
    assertEqual(x.grad, 2 * x)


def test_too_many_grads():
    class MyFn(Function):
        @staticmethod
        def forward(ctx, input):
            return input

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None, None

    x = tg.randn(5, 5, requires_grad=True)
    y = MyFn.apply(x)
    y.sum().backward()
    assertEqual(x.grad, tg.ones_like(x))


def test_pickle():
    import pickle
    x = tg.randn(10, 10, requires_grad=True)
    y = tg.randn(10, 10, requires_grad=False)

    def assert_strict_equal(var1, var2):
        assertEqual(var1, var2)
        assert var1.requires_grad == var2.requires_grad

    serialized = [pickle.dumps([x, y], protocol=p) for p in range(3)]
    for dump in serialized:
        xc, yc = pickle.loads(dump)
        assert_strict_equal(xc, x)
        assert_strict_equal(yc, y)


def test_dep_nograd():
    class F1(Function):
        @staticmethod
        def forward(ctx, input):
            out = tg.randn(input.size())
            ctx.mark_non_differentiable(out)
            return input, out

        @staticmethod
        def backward(ctx, grad_output, ignored):
            return grad_output

    class F2(Function):
        @staticmethod
        def forward(ctx, input, ignored):
            return input

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None

    x = tg.randn(5, requires_grad=True)
    a, b = F1.apply(x)
    b = b + 1
    assert a.requires_grad
    assert not b.requires_grad
    c = F2.apply(a, b)
    c.backward(tg.ones(c.size()))
    assertEqual(x.grad, tg.ones(x.size()))


def test_set_grad_enabled():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.set_grad_enabled(False):
        y = x * 2
    assert not y.requires_grad
    with tg.set_grad_enabled(True):
        y = x * 2
    assert y.requires_grad
    with tg.set_grad_enabled(False):
        tg.set_grad_enabled(True)
        y = x * 2
    assert y.requires_grad


def test_set_grad_enabled_wraps():
    for decorator in [True, False]:
        with tg.enable_grad():
            assert tg.is_grad_enabled()
            if decorator:
                @tg.set_grad_enabled(False)
                def inner_func(x):
                    return x.sin()
            else:
                def inner_func(x):
                    return x.sin()

                obj = tg.set_grad_enabled(False)
                assert not tg.is_grad_enabled()
                inner_func = obj(inner_func)
                assert tg.is_grad_enabled()
            assert tg.is_grad_enabled()
            x = tg.zeros(1, requires_grad=True)
            assert not inner_func(x).requires_grad


def test_simple_reentrant():
    y_data = tg.randn(2, 2)

    class Reenter(Function):
        @staticmethod
        def forward(ctx, x):
            with tg.enable_grad():
                ctx.x = x.detach().requires_grad_(True)
                ctx.y = y_data.detach().requires_grad_(True)
                ctx.output_var = ctx.x * ctx.y
            return ctx.output_var.detach()

        @staticmethod
        def backward(ctx, grad_output):
            with tg.enable_grad():
                ctx.output_var.sum().backward()
            return ctx.x.grad * grad_output

    x = tg.randn(2, 2, requires_grad=True)
    out = Reenter.apply(x)
    out.sum().backward()
    assertEqual(x.grad, y_data)


def test_reentrant_child_error():
    a = tg.rand(3, 3, requires_grad=True)
    c = a * a
    b = tg.rand(3, 3, requires_grad=True)
    e = b * b
    f = SimulateBackwardError.apply(e)
    reentrant_root = f.sum()

    class ReentrantFunc(Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.clone()

        @staticmethod
        def backward(ctx, grad):
            reentrant_root.backward()
            return grad

    d = ReentrantFunc.apply(c)
    with pytest.raises(Exception, match="Simulate error"):
        d.sum().backward()


def test_variable_traverse():
    def get_out_and_unrefed_cycle():
        inp = tg.randn(10, requires_grad=True)
        tmp = inp.view(10, 1)
        out = tmp.view(10)
        my_list = []
        my_list.append(tmp)
        my_list.append(my_list)
        return out

    out = get_out_and_unrefed_cycle()
    gc.collect()
    out.backward(tg.randn(out.size()))


def test_pow_zero_tensor_gradient():
    def run_test(input_size, exponent):
        input = tg.zeros(*input_size, requires_grad=True)
        input.pow(exponent).sum().backward()
        assertEqual(input.grad.abs().sum(), 0)

    run_test((10,), tg.zeros(10))
    run_test((10, 10), tg.zeros(10, 10))
    run_test((10,), 0)


def test_dir():
    # torch's test also checks that `imag` raises on a real tensor (complex is out of scope)
    x = tg.randn(10, 10)
    keys = dir(x)
    assert "shape" in keys
    for key in keys:
        if key == "imag":
            continue
        assert hasattr(x, key), key


def test_inplace_on_view_saved_output():
    dealloc = [0]

    class IncrementOnDelete:
        def __del__(self):
            dealloc[0] += 1

    def test():
        root = tg.randn(3, 3, requires_grad=True)
        copy = root.clone()
        copy.grad_fn.register_hook(IncrementOnDelete())
        view = copy.view(9)
        tg.nn.functional.relu(view, inplace=True)

    test()
    gc.collect()
    assert dealloc[0] == 1


def test_inplace_on_view_leaf_errors():
    x = tg.zeros(1, requires_grad=True)
    y = x.view_as(x)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in "
                                           "an in-place operation."):
        y.add_(1)


@pytest.mark.xfail(strict=True, reason=KNOWN_GAPS["test_inplace_on_view_backward"])
def test_inplace_on_view_backward():
    # torch's first case runs nn.InstanceNorm2d, which tracegrad lacks; the second case is ported
    inputs = tg.ones((1, 3, 256, 256), requires_grad=True)
    tmp1 = (inputs + 1).view_as(inputs)
    tmp2 = tg.nn.functional.threshold(tmp1, 0.0, 0.0, True)
    prob_interpolated = tg.sigmoid(tmp2)
    gradients = tg.autograd.grad(outputs=prob_interpolated, inputs=inputs,
                                 grad_outputs=tg.ones(prob_interpolated.size()), create_graph=True,
                                 retain_graph=True)[0]
    gradient_penalty = gradients.sum()
    gradient_penalty.backward()
    fn = gradient_penalty.grad_fn.next_functions[0][0].next_functions[1][0]
    assert fn.name() == "ThresholdBackwardBackward0"


def test_inplace_on_view_weak_grad_fn():
    a = tg.arange(10.0, requires_grad=True)
    b = a.narrow(0, 0, 2).clone().view(-1)
    b.relu_()
    c = b.clone()
    del b
    gc.collect()
    s = c.sum()
    s.backward()
    assertEqual(s, tg.tensor(1.0))
    a = tg.rand(10, requires_grad=True).narrow(0, 0, 10)
    with pytest.raises(RuntimeError):
        b = a.relu_()


def test_out_variant_raises_when_inputs_require_grad():
    a = tg.randn(2, 2, requires_grad=True)
    b = tg.randn(2, 2, requires_grad=True)
    x = tg.zeros_like(a)
    with pytest.raises(RuntimeError, match="out="):
        tg.mul(a, b, out=x)
    with tg.no_grad():
        tg.mul(a, b, out=x)
        assertEqual(x, a * b)
    a = tg.randn(2, 2)
    b = tg.randn(2, 2)
    x = tg.zeros(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="out="):
        tg.mul(a, b, out=x)


# == anomaly mode =================================================================================

def test_anomaly_detect_nan():
    size = 10

    class MyFunc(Function):
        @staticmethod
        def forward(ctx, inp1, inp2, fail_0th):
            ctx.fail_0th = fail_0th
            return inp1.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx, gO):
            gI = gO.clone().expand(size)
            gI[0] = 0
            gI[0] /= 0
            if ctx.fail_0th:
                return gI, None, None
            else:
                return None, gI, None

    inp = tg.rand(size, requires_grad=True)
    out = MyFunc.apply(inp, inp, True)
    out.backward()

    inp = tg.rand(size, requires_grad=True)
    out = MyFunc.apply(inp, inp, True)
    with pytest.raises(RuntimeError, match="Function 'MyFuncBackward' returned nan values in its 0th output."):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with detect_anomaly():
                out.backward()
    assert "No forward pass information" in str(w[1].message)    # w[0]: "Anomaly Detection has been enabled"

    inp = tg.rand(size, requires_grad=True)
    with pytest.raises(RuntimeError, match="Function 'MyFuncBackward' returned nan values in its 1th output."):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with detect_anomaly():
                out = MyFunc.apply(inp, inp, False)
                out.backward()
    assert "MyFunc.apply" in str(w[1].message)


def test_nested_anomaly_detect_nan():
    size = 10

    class MyFunc(Function):
        @staticmethod
        def forward(ctx, inp1, fail_0th):
            ctx.fail_0th = fail_0th
            ctx.save_for_backward(inp1)
            return inp1.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx, gO):
            (inp,) = ctx.saved_tensors
            fail_0th = ctx.fail_0th
            g = gO.clone().expand(size)
            gI = MyFunc2.apply(g * inp, g + inp, fail_0th)
            return gI, None

    class MyFunc2(Function):
        @staticmethod
        def forward(ctx, inp1, inp2, fail_0th):
            ctx.fail_0th = fail_0th
            return inp1 * 2.0 + inp2

        @staticmethod
        def backward(ctx, gO):
            fail_0th = ctx.fail_0th
            g1 = gO.clone()
            g2 = gO.clone()
            g1[0] = 0
            g2[0] = 0
            if fail_0th:
                g1[0] /= 0
            else:
                g2[0] /= 0
            return g1, g2, None

    inp = tg.rand(size, requires_grad=True)
    out = MyFunc.apply(inp, True)
    (ginp,) = tg.autograd.grad(out, (inp,), create_graph=True)
    gsum = ginp.sum()
    gsum.backward()

    inp = tg.rand(size, requires_grad=True)
    out = MyFunc.apply(inp, True)
    (ginp,) = tg.autograd.grad(out, (inp,), create_graph=True)
    gsum = ginp.sum()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="Function 'MyFunc2Backward' returned nan values in its 0th output."):
            with detect_anomaly():
                gsum.backward()
    assert "No forward pass information" in str(w[1].message)

    inp = tg.rand(size, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="Function 'MyFunc2Backward' returned nan values in its 1th output."):
            with detect_anomaly():
                out = MyFunc.apply(inp, False)
                (ginp,) = tg.autograd.grad(out, (inp,), create_graph=True)
                gsum = ginp.sum()
                gsum.backward()
    assert "MyFunc2.apply" in str(w[1].message)
    assert "MyFunc.apply" in str(w[2].message)


def test_anomaly_grad_warnings():
    import io
    import sys

    class StdErrDiverter:
        def __enter__(self):
            self.stderr_orig = sys.stderr
            self.stderr_new = io.StringIO()
            sys.stderr = self.stderr_new
            return self

        def __exit__(self, *args):
            self.captured = self.stderr_new.getvalue()
            sys.stderr = self.stderr_orig

    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with detect_anomaly():
                a = tg.randn(5, requires_grad=True)
                d1 = a + 1
                d2 = d1**2
                d1 += 1
                tg.autograd.grad(d2.sum(), a)
    assert len(w) == 2
    assert "Anomaly Detection has been enabled" in str(w[0].message)
    assert "Error detected in PowBackward0" in str(w[1].message)

    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        with warnings.catch_warnings(record=True) as w:
            with detect_anomaly():
                warnings.simplefilter("error")
                with StdErrDiverter() as s:
                    a = tg.randn(5, requires_grad=True)
                    d1 = a + 1
                    d2 = d1**2
                    d1 += 1
                    tg.autograd.grad(d2.sum(), a)
    assert len(w) == 1
    assert "Anomaly Detection has been enabled" in str(w[0].message)
    assert "Error detected in PowBackward0" in s.captured


def test_anomaly_assign_parent_cleanup():
    def get_ref():
        x = tg.randn(2, 2, requires_grad=True)
        t = x.exp()
        with detect_anomaly():
            grad = tg.autograd.grad(t, x, tg.ones_like(t), create_graph=True)

        class Foo:
            pass

        my_obj = Foo()
        meta_dict = t.grad_fn.metadata
        meta_dict[0] = my_obj
        ref = weakref.ref(my_obj)
        return t, ref

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, ref = get_ref()
    assert ref() is not None
    del t
    gc.collect()
    assert ref() is None


def test_nested_anomaly_printstack_cleanup():
    def get_ref():
        class MyFunc(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, gO):
                (x,) = ctx.saved_tensors
                return MyFunc2.apply(x)

        class MyFunc2(Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, gO):
                return gO + float("NaN")

        inp = tg.rand(1, requires_grad=True)
        out = MyFunc.apply(inp)
        (ginp,) = tg.autograd.grad(out, (inp,), create_graph=True)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError, match="Function 'MyFunc2Backward' returned nan values in its 0th output."):
                with detect_anomaly():
                    ginp.backward()

        class Foo:
            pass

        my_obj = Foo()
        meta_dict = out.grad_fn.metadata
        meta_dict[0] = my_obj
        ref = weakref.ref(my_obj)
        return out, ref

    t, ref = get_ref()
    assert ref() is not None
    del t
    gc.collect()
    assert ref() is None


def test_anomaly_mode_no_check_nan():
    class MyFunc(Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.clone()

        @staticmethod
        def backward(ctx, gO):
            return tg.tensor(float("nan")).expand(10, 10)

    def run_fn(a):
        out = MyFunc.apply(a)
        return out.sum()

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with tg.autograd.detect_anomaly(check_nan=False):
            inp = tg.rand(10, 10, requires_grad=True)
            out = run_fn(inp)
            out.backward(retain_graph=True)
            with tg.autograd.detect_anomaly(check_nan=True):
                with pytest.raises(RuntimeError, match="Function 'MyFuncBackward' returned nan values in its 0th "
                                                       "output."):
                    out.backward(retain_graph=True)
            out.backward()


def test_no_grad_copy():
    class MyFunc(Function):
        static_grad_ptr = None

        @staticmethod
        def forward(ctx, inp1, inp2):
            return inp1 + inp2

        @staticmethod
        def backward(ctx, grad):
            MyFunc.static_grad_ptr = grad.data_ptr()
            return grad, grad

    class NonContGradFunc(Function):
        @staticmethod
        def forward(ctx, inp1):
            ctx.size = inp1.size()
            return tg.tensor([1.0])

        @staticmethod
        def backward(ctx, grad):
            return tg.ones(1).expand(ctx.size)

    a = tg.randn(5, 6, requires_grad=True)
    b = tg.randn(5, 6, requires_grad=True)
    NonContGradFunc.apply(MyFunc.apply(a, b)).backward()
    assert not a.grad.data_ptr() == MyFunc.static_grad_ptr
    assert not b.grad.data_ptr() == MyFunc.static_grad_ptr
    a.grad = b.grad = None
    MyFunc.apply(a, b)[1][0].backward()
    p_g = MyFunc.static_grad_ptr
    p_a = a.grad.data_ptr()
    p_b = b.grad.data_ptr()
    assert not p_a == p_b
    assert p_a == p_g or p_b == p_g


def test_gradcheck_single_input():
    def check(fast_mode):
        def f(inp):
            return inp.mul(5)

        assert gradcheck(f, tg.rand(10, dtype=tg.float64, requires_grad=True), fast_mode=fast_mode)
        assert gradgradcheck(f, tg.rand(10, dtype=tg.float64, requires_grad=True), fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_nondeterministic():
    class NonDetFunc(Function):
        @staticmethod
        def forward(ctx, x, jitter=0.0):
            ctx._jitter = jitter
            return x

        @staticmethod
        def backward(ctx, grad_out):
            return NonDetFunc.apply(grad_out, ctx._jitter) * (1 + tg.rand_like(grad_out) * ctx._jitter), None

    def check(fast_mode):
        inp = tg.randn(5, 5, dtype=tg.double, requires_grad=True)
        gradcheck(lambda x: NonDetFunc.apply(x, 0.0), inp, check_batched_grad=False, fast_mode=fast_mode)
        with pytest.raises(RuntimeError, match="Backward is not reentrant"):
            gradcheck(lambda x: NonDetFunc.apply(x, 1e-6), inp, check_batched_grad=False, fast_mode=fast_mode)
        with pytest.raises(RuntimeError, match="Backward is not reentrant"):
            gradgradcheck(lambda x: NonDetFunc.apply(x, 1e-12), inp, check_batched_grad=False, fast_mode=fast_mode)
        gradcheck(lambda x: NonDetFunc.apply(x, 0.0), inp, nondet_tol=1e-5, check_batched_grad=False,
                  fast_mode=fast_mode)
        gradcheck(lambda x: NonDetFunc.apply(x, 1e-6), inp, nondet_tol=1e-5, check_batched_grad=False,
                  fast_mode=fast_mode)
        gradgradcheck(lambda x: NonDetFunc.apply(x, 1e-12), inp, nondet_tol=1e-5, check_batched_grad=False,
                      fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_validates_inputs():
    # torch's test begins with sparse inputs (out of scope); the dense checks:
    def check(fast_mode):
        x = tg.rand(10, requires_grad=False)
        with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
            gradcheck(lambda x: x, (x,), raise_exception=False, fast_mode=fast_mode)
        x = tg.ones(1, dtype=tg.float32, requires_grad=True)
        with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double precision"):
            assert gradcheck(lambda x: x, (x,), atol=1e-1, fast_mode=fast_mode)
        x = tg.ones(1, dtype=tg.float64, requires_grad=True)
        x = x.expand((2, 2))
        with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0"):
            gradcheck(lambda x: x, (x,), raise_exception=False, fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_check_no_differentiable_outputs():
    def check(fast_mode):
        x = tg.ones((1,), requires_grad=True)
        with pytest.raises(RuntimeError, match="Numerical gradient for function expected to be zero"):
            gradcheck(lambda x: tg.tensor([x]), x)
        assert not gradcheck(lambda x: tg.tensor([x]), x, raise_exception=False, fast_mode=fast_mode)
        assert gradcheck(lambda x: (), (x,), fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_backward_mul_by_grad_output():
    # torch's test also covers sparse gradients and layouts (out of scope); the dense case:
    def check(fast_mode):
        def fn2(x):
            y = x.clone()
            y.register_hook(lambda x: x + 1e-2)
            return y

        x = tg.ones(1, dtype=tg.double, requires_grad=True)
        with pytest.raises(RuntimeError, match="backward not multiplied by grad_output"):
            gradcheck(fn2, (x,), atol=1e-1, fast_mode=fast_mode)
        assert not gradcheck(fn2, (x,), atol=1e-1, raise_exception=False, fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_undefined_grad():
    def check(fast_mode):
        def fn(x):
            def hook(x):
                if x is None:
                    raise RuntimeError("x is undefined")

            y = x.clone()
            y.register_hook(hook)
            return y

        x = tg.ones(1, dtype=tg.double, requires_grad=True)
        with pytest.warns(UserWarning, match="Backwards compatibility: New undefined gradient support checking "
                                             "feature"):
            with pytest.raises(RuntimeError, match="Expected backward function to handle undefined output grads"):
                gradcheck(fn, (x,), fast_mode=fast_mode)
            assert not gradcheck(fn, (x,), raise_exception=False, fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_jacobian_mismatch():
    # torch's test goes on to complex inputs and outputs (out of scope); the real case:
    def check(fast_mode):
        def fn(x):
            y = x.clone()
            y.register_hook(lambda x: x + 1e-2)
            return y

        x = tg.ones(2, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0"):
            gradcheck(fn, (x,), fast_mode=fast_mode)
        assert not gradcheck(fn, (x,), raise_exception=False, fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_output_shape_or_dtype_depend_on_values():
    def check(fast_mode):
        def fn(x):
            if tg.all(x >= 1):
                return tg.cat([x, x])
            else:
                return x

        a = tg.ones(1, dtype=tg.double, requires_grad=True)
        with pytest.raises(AssertionError, match="return outputs with the same shape when inputs are perturbed"):
            assert gradcheck(fn, (a,), fast_mode=fast_mode)

        def fn2(x):
            if tg.all(x >= 1):
                return x.to(tg.float32)
            else:
                return x

        with pytest.raises(AssertionError, match="return outputs with the same dtype when inputs are perturbed"):
            assert gradcheck(fn2, (a,), fast_mode=fast_mode)

    check(fast_mode=True)
    check(fast_mode=False)


def test_gradcheck_custom_error():
    from tracegrad.autograd.gradcheck import GradcheckError

    def check(fast_mode):
        def fn(x):
            y = x.clone()
            y.register_hook(lambda x: x + 1e-2)
            return y

        x = tg.ones(2, 2, requires_grad=True)
        with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
            gradcheck(fn, (x,), fast_mode=fast_mode)
        with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0"):
            gradcheck(fn, (x,), fast_mode=fast_mode)
        assert not gradcheck(fn, (x,), raise_exception=False, fast_mode=fast_mode)

        def fn2(x):
            raise RuntimeError("Not a GradcheckError!")

        with pytest.raises(RuntimeError, match="Not a GradcheckError!"):
            gradcheck(fn2, (x,), fast_mode=fast_mode, raise_exception=False)

    check(fast_mode=True)
    check(fast_mode=False)


def test_version_counter():
    x = tg.randn(1, 2)
    x_saved_version = x._version
    x.add_(1).add_(1)
    assert x._version > x_saved_version
    xz = x[:]
    assert x._version == xz._version
    xz.add_(1)
    assert x._version == xz._version
    x_saved_version = x._version
    x.data = tg.randn(2, 3)
    assert x._version == x_saved_version
    x.add_(1)
    assert x._version > x_saved_version
    assert x._version == xz._version
    xz.add_(1)
    assert x._version == xz._version


def test_set_data_preserve_pyobj():
    a = tg.randn(1, 2)
    b = tg.randn(1, 2)
    b_id_saved = id(b)
    b.data = a
    assert b_id_saved == id(b)


def test_set_data_self_requires_grad():
    a = tg.tensor(1.0, requires_grad=True)
    b = tg.tensor(2.0)
    c = tg.tensor(3, dtype=tg.int64)
    a.data = b
    with pytest.raises(RuntimeError, match="must be floating point or complex dtype"):
        a.data = c


def test_deep_reentrant():
    class DeepReentrant(Function):
        @staticmethod
        def forward(ctx, x):
            with tg.enable_grad():
                ctx.x = x.detach().requires_grad_(True)
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, x):
            if ctx.x < 0:
                return x
            with tg.enable_grad():
                DeepReentrant.apply(ctx.x).sum().backward()
            return x

    v = tg.tensor(2000.0, requires_grad=True)
    DeepReentrant.apply(v).sum().backward()
    v2 = tg.tensor(200.0, requires_grad=True)
    DeepReentrant.apply(v2).sum().backward()
    assertEqual(v2.grad, tg.tensor(1.0))


def test_reentrant_priority():
    order = []

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            order.append("MyFunction")
            return x

    class Reentrant(Function):
        @staticmethod
        def forward(ctx, x):
            with tg.enable_grad():
                ctx.x = x.detach().requires_grad_(True)
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, x):
            order.append("Reentrant")
            if ctx.x < 0:
                return x
            with tg.enable_grad():
                Reentrant.apply(ctx.x).backward()
            return x

    a = MyFunction.apply(tg.tensor(6.0, requires_grad=True))
    b = Reentrant.apply(tg.tensor(9.0, requires_grad=True))
    v = a * b
    v.backward()
    assert len(order) == 11
    assert order.count("Reentrant") == 10
    assert order[-1] == "MyFunction"


def test_reentrant_with_leaf_variable_hook():
    handle = None
    param = tg.rand(10, requires_grad=True)

    def add_gradient_penalty_to_grad(grad):
        handle.remove()
        old_param_grad = grad
        param.grad = None
        with tg.enable_grad():
            g = grad.detach().requires_grad_()
            new_param = param.detach().requires_grad_()
            out = ((g * 2) + new_param).sum()
            out.backward()
        res = g.grad + grad
        param.grad = old_param_grad
        return res

    handle = param.register_hook(add_gradient_penalty_to_grad)
    tmp = param * param
    loss = tmp.sum()
    loss.backward()
    assertEqual(param.grad, 4 * param + 2)      # the value torch gives


def test_reentrant_with_non_leaf_variable_hook():
    handle = None
    param = tg.rand(10, requires_grad=True)

    def manual_increase_gradient(grad):
        handle.remove()
        with tg.enable_grad():
            g = grad.detach().requires_grad_()
            out = ((g * 2) + 5).sum()
            out.backward()
        res = g.grad + grad
        return res

    tmp = param * param
    handle = tmp.register_hook(manual_increase_gradient)
    loss = tmp.sum()
    loss.backward()
    assertEqual(param.grad, 6 * param)


def test_custom_function_saved_tensors():
    # torch's test also inspects the private _raw_saved_tensors (SavedTensor objects)
    def getFn(save=True):
        class MyFn(Function):
            @staticmethod
            def forward(ctx, x):
                if save:
                    ctx.save_for_backward(x, None)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        return MyFn

    a = tg.randn(5, requires_grad=True)
    y = getFn(True).apply(a)
    saved = y.grad_fn.saved_tensors
    assert len(saved) == 2 and saved[1] is None
    assertEqual(a, saved[0])
    y.sum().backward()
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        y.grad_fn.saved_tensors
    y = getFn(False).apply(a)
    assert y.grad_fn.saved_tensors == ()


def test_clear_saved_tensors_on_access():
    class MyFn(Function):
        clear_saved_tensors_on_access = True

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            ref = weakref.ref(x)
            del x
            assert ref() is None
            return grad_output

    x = tg.randn(3, requires_grad=True)
    y = MyFn.apply(x.clone())
    y.sum().backward()
    assertEqual(x.grad, tg.ones(3))


def test_clear_saved_tensors_on_access_double_access_error():
    class MyFn(Function):
        clear_saved_tensors_on_access = True

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def backward(ctx, grad_output):
            _ = ctx.saved_tensors
            _ = ctx.saved_tensors
            return grad_output

    x = tg.randn(3, requires_grad=True)
    y = MyFn.apply(x)
    with pytest.raises(RuntimeError, match="can only be accessed once"):
        y.sum().backward()


def test_autograd_node_isinstance():
    Node = tg.autograd.graph.Node
    a = tg.rand(3, 3, requires_grad=True)
    b = a.exp()
    assert isinstance(b.grad_fn, Node)
    assert issubclass(type(b.grad_fn), Node)
    assert isinstance(b.grad_fn.next_functions[0][0], Node)
    assert issubclass(tg.autograd.graph.AccumulateGrad, Node)
    assert not isinstance(None, Node)
    assert not isinstance(1, Node)
    assert not isinstance(Node, Node)
    assert issubclass(Node, Node)
    assert issubclass(tg.autograd.function.BackwardCFunction, Node)
    seen = []

    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            assert isinstance(ctx, Node)
            return x

        @staticmethod
        def backward(ctx, x):
            assert isinstance(ctx, Node)
            seen.append(1)
            return x

    out = Func.apply(a)
    assert isinstance(out.grad_fn, Node)
    assert issubclass(type(out.grad_fn), Node)
    out.sum().backward()
    assert seen == [1]


def test_autograd_views_codegen():
    def run_test(grad_mode, requires_grad, is_view, should_raise_tuple):
        def maybe_check_raise(fn, should_raise):
            assert should_raise is None or isinstance(should_raise, str)
            if should_raise is not None:
                with pytest.raises(RuntimeError, match=should_raise):
                    fn()
            else:
                fn()

        inp = tg.rand(2, requires_grad=requires_grad).clone()
        with tg.set_grad_enabled(grad_mode):
            out = inp.view_as(inp)
        assert out._is_view() == is_view
        maybe_check_raise(lambda: out.add_(1), should_raise_tuple[0])

        inp = tg.rand(2, requires_grad=requires_grad).clone()
        with tg.set_grad_enabled(grad_mode):
            out = inp.unbind()
        assert out[0]._is_view() == is_view
        assert out[1]._is_view() == is_view
        maybe_check_raise(lambda: out[0].add_(1), should_raise_tuple[1])
        maybe_check_raise(lambda: out[1].add_(1), should_raise_tuple[2])

    run_test(grad_mode=True, requires_grad=False, is_view=True, should_raise_tuple=(None, None, None))
    # torch 2.13 names the op "Unbind" (the stored test, from a later torch, says "UnbindBackward0")
    inp_change_err = "Output {} of Unbind is a view and is being modified inplace."
    run_test(grad_mode=True, requires_grad=True, is_view=True,
             should_raise_tuple=(None, inp_change_err.format("0"), inp_change_err.format("1")))
    leaf_grad_err = "A view was created in no_grad mode and is being modified inplace"
    run_test(grad_mode=False, requires_grad=True, is_view=True,
             should_raise_tuple=(leaf_grad_err, leaf_grad_err, leaf_grad_err))
    run_test(grad_mode=False, requires_grad=False, is_view=True, should_raise_tuple=(None, None, None))


def test_inplace_not_requires_grad():
    class MyFn(Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.view_as(inp)

        @staticmethod
        def backward(ctx, grad):
            return grad

    a = tg.rand(1, 2)
    b = tg.rand(1, requires_grad=True)
    view_a = MyFn.apply(a)
    with pytest.raises(RuntimeError, match="This view was created inside a custom Function"):
        view_a += b

    a = tg.rand(1, 2)
    b = tg.rand(1, requires_grad=True)
    view_a = MyFn.apply(a)
    with pytest.raises(RuntimeError, match="This view was created inside a custom Function"):
        view_a.copy_(b)

    a = tg.rand(1, 2)
    b = tg.rand(1, requires_grad=True)
    view_a = a.unbind()[0]
    with pytest.raises(RuntimeError, match="This view is the output of a function that returns multiple views."):
        view_a.copy_(b)

    a = tg.rand(1, 2)
    b = tg.rand(1, requires_grad=True)
    a.select(1, 0).copy_(b)


def test_autograd_simple_views_python():
    # torch runs the body for float64 and complex128; complex is out of scope
    dtype = tg.double
    bw_called = [0]
    ga_nz = [False]

    class IdOneOutput(Function):
        @staticmethod
        def forward(ctx, a, make_view, pure_view):
            ctx._is_pure_view = pure_view
            if make_view:
                a = a.narrow(0, 0, 2)
            else:
                a = a.clone()
            return a

        @staticmethod
        def backward(ctx, ga):
            bw_called[0] += 1
            return ga, None, None

    class IdTwoOutput(Function):
        @staticmethod
        def forward(ctx, a, b, make_view, pure_view):
            ctx._is_pure_view = pure_view
            if make_view:
                a = a.narrow(0, 0, 2)
            else:
                a = a.clone()
            return a, a + b

        @staticmethod
        def backward(ctx, ga, gab):
            bw_called[0] += 1
            if ga.eq(0).all():
                ga_nz[0] = False
            else:
                ga_nz[0] = True
            return ga + gab, gab, None, None

    class ViewOfTemp(Function):
        @staticmethod
        def forward(ctx, a, make_view, pure_view):
            ctx._is_pure_view = pure_view
            ctx.save_for_backward(a)
            if make_view:
                a = a.narrow(0, 0, 2)
            else:
                a = a.clone()
            b = a.clone()
            return b.select(0, 0)

        @staticmethod
        def backward(ctx, grad):
            bw_called[0] += 1
            (a,) = ctx.saved_tensors
            res = tg.zeros_like(a)
            res.select(0, 0).copy_(grad)
            return res, None, None

    # torch 2.13 names the Function ("IdOneOutput"); the stored test, from a later torch, says "IdOneOutputBackward"
    fn_id_to_inplace_on_view_err_msg = {
        "one_output": ("Output 0 of IdOneOutput is a view and is being "
                       "modified inplace. This view was created inside a custom Function"),
        "two_output": ("Output 0 of IdTwoOutput is a view and is being modified inplace."
                       " This view is the output of a function that returns multiple views.",
                       "Pure view custom Function can only have one input Tensor and one output Tensor."
                       " Open an issue if you need to support more."),
        "view_of_temp": ("Output 0 of ViewOfTemp is a view and is being "
                         "modified inplace. This view was created inside a custom Function",
                         "a view of a leaf Variable that requires grad is being used in an in-place operation"),
    }
    for fn_id in ["one_output", "two_output", "view_of_temp"]:
        for inplace in [True, False]:
            for make_view in [True, False]:
                for pure_view in [True, False]:
                    output_is_a_view = make_view or fn_id == "view_of_temp"

                    def fn(a, b):
                        a = a.clone()
                        b = b.clone()
                        if fn_id == "two_output":
                            tmp1, tmp2 = IdTwoOutput.apply(a, b, make_view, pure_view)
                            if inplace:
                                tmp1 += 3
                                tmp2 += 3
                            else:
                                tmp1 = tmp1 + 3
                                tmp2 = tmp2 + 3
                            tmp = tmp1 * tmp2
                        else:
                            if fn_id == "one_output":
                                tmp = IdOneOutput.apply(a, make_view, pure_view)
                            else:
                                tmp = ViewOfTemp.apply(a + b, make_view, pure_view)
                            if inplace:
                                tmp += 3
                            else:
                                tmp = tmp + 3
                        return tmp.sum()

                    a = tg.ones(2, dtype=dtype, requires_grad=True)
                    b = tg.ones(2, dtype=dtype, requires_grad=True)
                    err_msg = fn_id_to_inplace_on_view_err_msg[fn_id][int(pure_view)]
                    will_raise_error = ((pure_view and fn_id == "two_output")
                                        or (pure_view and fn_id == "view_of_temp" and inplace)
                                        or (not pure_view and inplace and output_is_a_view))
                    if will_raise_error:
                        with pytest.raises(RuntimeError, match=re.escape(err_msg)):
                            gradcheck(fn, (a, b), check_batched_grad=False)
                    else:
                        gradcheck(fn, (a, b), check_batched_grad=False)
                    bw_called[0] = 0
                    ga_nz[0] = True
                    expected_called = 1
                    expected_ga_nz = True
                    if will_raise_error:
                        expected_called = 0
                        with pytest.raises(RuntimeError, match=re.escape(err_msg)):
                            fn(a, b)
                    else:
                        fn(a, b).abs().backward()
                    if fn_id == "one_output" and inplace and output_is_a_view and pure_view:
                        expected_called = 0
                    assert bw_called[0] == expected_called, (fn_id, inplace, make_view, pure_view)
                    assert ga_nz[0] == expected_ga_nz, (fn_id, inplace, make_view, pure_view)


def test_autograd_inplace_views_creation_meta():
    # torch's list also has as_strided_ (tracegrad has no as_strided)
    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, x):
            return x

    view_custom = Func.apply

    def run_test(fn, fn_type, grad_mode_view, grad_mode_iview, requires_grad, error1, error2):
        base = tg.rand(2, 3, requires_grad=requires_grad).clone()
        with tg.set_grad_enabled(grad_mode_view):
            if fn_type == "multi_view":
                inp = base.unbind()[0]
            elif fn_type == "custom":
                inp = view_custom(base)
            else:
                inp = base.view_as(base)
        with tg.set_grad_enabled(grad_mode_iview):
            if error1 is not None:
                with pytest.raises(RuntimeError, match=error1):
                    fn(inp)
                return
            else:
                fn(inp)
        if error2 is not None:
            with pytest.raises(RuntimeError, match=error2):
                inp.add_(1)
        else:
            inp.add_(1)

    no_grad_err = "A view was created in no_grad mode"
    multi_view_err = "function that returns multiple views"
    custom_err = "view was created inside a custom Function"

    def run_tests(fn):
        for fn_type in ("normal", "multi_view", "custom"):
            for grad_mode_view in (True, False):
                for grad_mode_iview in (True, False):
                    for requires_grad in (True, False):
                        error1 = None
                        error2 = None
                        if requires_grad:
                            if not grad_mode_view and grad_mode_iview:
                                error1 = no_grad_err
                            if not grad_mode_view and not grad_mode_iview:
                                error2 = no_grad_err
                            if fn_type == "multi_view":
                                if grad_mode_view and grad_mode_iview:
                                    error1 = multi_view_err
                                if grad_mode_view and not grad_mode_iview:
                                    error2 = multi_view_err
                            if fn_type == "custom":
                                if grad_mode_view and grad_mode_iview:
                                    error1 = custom_err
                                if grad_mode_view and not grad_mode_iview:
                                    error2 = custom_err
                        run_test(fn, fn_type, grad_mode_view, grad_mode_iview, requires_grad, error1, error2)

    run_tests(lambda v: v.transpose_(0, 0))
    run_tests(lambda v: v.t_())
    run_tests(lambda v: v.squeeze_(0))
    run_tests(lambda v: v.unsqueeze_(0))
    run_tests(lambda v: v.swapdims_(0, 0))
    run_tests(lambda v: v.swapaxes_(0, 0))


def test_autograd_print_tensor():
    a = tg.ones(1, requires_grad=True)
    a_clone = a.clone()
    assert repr(a) == "tensor([1.], requires_grad=True)"
    assert repr(a_clone) == "tensor([1.], grad_fn=<CloneBackward0>)"
    with tg.no_grad():
        b = a[:]
        b *= 2
    assert repr(b) == "tensor([2.], grad_fn=<Invalid>)"

    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            return x

    c = Func.apply(a)
    assert repr(c) == "tensor([2.], grad_fn=<FuncBackward>)"


def test_autograd_inplace_view_of_view():
    x = tg.zeros(2)
    with tg.no_grad():
        y = x.view(2)
    y.requires_grad_(True)
    z = y.view(2)
    with pytest.raises(RuntimeError, match="a view of a view .* is being .* inside the no_grad block"):
        z /= 2
    x = tg.zeros(2)
    with tg.inference_mode():
        y = x.view(2)
    y.requires_grad_(True)
    z = y.view(2)
    with pytest.raises(RuntimeError, match="a view of a view .* is being .* inside the inference_mode"):
        z /= 2


def test_autograd_multiple_views_python():
    bw_called = [0]

    class ComplexView(Function):
        @staticmethod
        def forward(ctx, a, idx):
            res = a.narrow(0, idx, 1)
            res = a.select(0, idx)
            ctx.save_for_backward(a)
            ctx.idx = idx
            return res

        @staticmethod
        def backward(ctx, grad):
            bw_called[0] += 1
            (a,) = ctx.saved_tensors
            res = tg.zeros_like(a)
            res.select(0, ctx.idx).copy_(grad)
            return res, None

    a = tg.ones(2, requires_grad=True)
    idx = 1
    bw_called[0] = 0
    out = ComplexView.apply(a.clone(), idx)
    out.sum().backward()
    assert bw_called[0] == 1
    out = ComplexView.apply(a.clone(), idx)
    # torch 2.13 says "ComplexView" (the stored test, from a later torch, "ComplexViewBackward")
    with pytest.raises(RuntimeError, match="Output 0 of ComplexView is a view and is being modified inplace"):
        out += 1


def test_autograd_python_custom_function_inplace():
    bw_called = [0]

    class MyAdder(Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, grad):
            bw_called[0] += 1
            return grad, grad

    a = tg.ones(2, requires_grad=True)
    b = tg.ones(2, requires_grad=True)
    c = MyAdder.apply(a.clone(), b)
    c.sum().backward()
    assert bw_called[0] == 1
    bw_called[0] = 0
    c = MyAdder.apply(a.clone(), b)
    c += 2
    c.sum().backward()
    assert bw_called[0] == 1
    bw_called[0] = 0
    c = MyAdder.apply(a.clone().view_as(a), b)
    c.sum().backward()
    assert bw_called[0] == 1

    class MyAdderBad(Function):
        @staticmethod
        def forward(ctx, a, b):
            c = 3 * a
            c.add_(b)
            ctx.mark_dirty(c)
            return c

        @staticmethod
        def backward(ctx, grad):
            bw_called[0] += 1
            grad = 3 * grad
            return grad, grad

    a = tg.ones(2, requires_grad=True)
    b = tg.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        MyAdderBad.apply(a.clone(), b)
    assert len(w) == 1

    class MyBadAdder(Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a, a + b

        @staticmethod
        def backward(ctx, ga, gab):
            bw_called[0] += 1
            return ga + gab, ga + gab

    bw_called[0] = 0
    c, d = MyBadAdder.apply(a.clone(), b)
    (c * d).sum().backward()
    assert bw_called[0] == 1
    bw_called[0] = 0
    c, d = MyBadAdder.apply(a.clone(), b)
    c += 2
    (c * d).sum().backward()
    assert bw_called[0] == 1
    inplace_on_view_err = "your Function modifies inplace an input that is a view of another Tensor"
    with pytest.raises(RuntimeError, match=inplace_on_view_err):
        c, d = MyBadAdder.apply(a.clone().view_as(a), b)

    class MyOutPlaceAdder(Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a.clone(), a + b

        @staticmethod
        def backward(ctx, ga, gab):
            bw_called[0] += 1
            return ga + gab, ga + 2 * gab

    def fn(a, b):
        orig_a = a.clone().view_as(a)
        c, d = MyOutPlaceAdder.apply(orig_a, b)
        return (c * d).sum()

    bad_mark_dirty_err = "Some elements marked as dirty during the forward method were not returned as output."
    with pytest.raises(RuntimeError, match=bad_mark_dirty_err):
        fn(a, b)


def test_custom_function_mark_dirty_not_differentiable():
    # torch's test goes on to check the forward-mode (jvp) side, which is out of scope
    class InplaceMul(Function):
        @staticmethod
        def forward(ctx, x):
            result = x.mul_(2)
            ctx.mark_dirty(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            pass

    for requires_grad in (True, False):
        z = tg.tensor(1.0, requires_grad=requires_grad)
        x = z.clone()
        y = InplaceMul.apply(x)
        assert x is y
        assertEqual(x, z * 2)


def test_custom_function_mark_output_view_of_intermediate():
    class Func(Function):
        @staticmethod
        def forward(ctx, inp):
            out = inp.clone().view_as(inp)
            ctx.mark_dirty(out)
            return out

        @staticmethod
        def backward(ctx, gO):
            pass

    a = tg.tensor([1.0], requires_grad=True)
    a_clone = a.clone()
    with pytest.raises(RuntimeError, match="received a tensor that was not an input."):
        Func.apply(a_clone)


def test_custom_function_inplace_on_non_default_view():
    class Func(Function):
        @staticmethod
        def forward(ctx, inp):
            inp.add_(1)
            ctx.mark_dirty(inp)
            return inp

        @staticmethod
        def backward(ctx, gO):
            pass

    a = tg.tensor([1.0, 2.0], requires_grad=True)
    a_clone = a.clone()
    b, c = a.split([1, 1], dim=0)        # torch: a.split_with_sizes([1, 1], dim=0)
    with pytest.raises(RuntimeError, match="output of a function that returns multiple view"):
        Func.apply(b)


def test_custom_function_inplace_on_view_of_leaf():
    class Func(Function):
        @staticmethod
        def forward(ctx, inp):
            inp.add_(1)
            ctx.mark_dirty(inp)
            return inp

        @staticmethod
        def backward(ctx, gO):
            pass

    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = a.view_as(a)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        Func.apply(b)


def test_custom_function_saving_mutated_view_no_leak():
    class Test(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            pass

    def scope():
        x = tg.tensor(1.0, requires_grad=True).clone()
        x = x.view_as(x)
        y = Test.apply(x)
        return weakref.ref(x)

    ref = scope()
    gc.collect()
    assert ref() is None


def test_custom_function_return_view_in_nograd():
    class Alias(Function):
        @staticmethod
        def forward(ctx, x):
            return x[:]

        @staticmethod
        def backward(ctx, gx):
            return gx

    inp = tg.rand(2, requires_grad=True)
    with tg.no_grad():
        output = Alias.apply(inp)
    with tg.no_grad():
        expected_output = inp[:]
    assert output.requires_grad == expected_output.requires_grad
    leaf_grad_err = "A view was created in no_grad mode and is being modified inplace"
    with pytest.raises(RuntimeError, match=leaf_grad_err):
        output.zero_()


def test_grad_mode_restored_reentrant():
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.clone()

        @staticmethod
        def backward(ctx, go):
            original = tg.is_grad_enabled()
            with tg.enable_grad():
                assert tg.is_grad_enabled()
                foo = tg.rand(go.size(), requires_grad=True)
                (grad,) = tg.autograd.grad(foo**3, foo, grad_outputs=go)
                assert tg.is_grad_enabled()
            assert tg.is_grad_enabled() == original
            return grad

    inp = tg.rand(3, requires_grad=True)
    MyFunction.apply(inp).sum().backward()
    MyFunction.apply(inp).sum().backward(create_graph=True)


def test_power_function():
    a = tg.tensor([0.0, 0.0, 0.0])
    b = tg.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    c = tg.sum(a**b)
    c.backward()
    assertEqual(b.grad, tg.tensor([-math.inf, 0.0, 0.0]))
    s = 0
    b = tg.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    c = tg.sum(s**b)
    c.backward()
    assertEqual(b.grad, tg.tensor([-math.inf, 0.0, 0.0]))


def test_custom_function_error():
    # torch's last case (a missing jvp under forward-mode AD) is out of scope
    class BadFw(Function):
        @staticmethod
        def backward(ctx, foo):
            return foo

    class BadBw(Function):
        @staticmethod
        def forward(ctx, foo):
            return foo.clone()

    class BadBw2(Function):
        @staticmethod
        def forward(ctx, foo):
            return foo.clone()

        @staticmethod
        def backward(ctx, foo):
            return foo

        @staticmethod
        def vjp(ctx, foo):
            return foo

    inp = tg.rand(1, requires_grad=True)
    with pytest.raises(NotImplementedError, match="must implement the forward"):
        BadFw.apply(inp)
    with pytest.raises(RuntimeError, match="must implement either the backward"):
        BadBw.apply(inp).sum().backward()
    with pytest.raises(RuntimeError, match="Implementing both 'backward' and 'vjp'"):
        BadBw2.apply(inp).sum().backward()


def test_custom_function_local_inplace():
    class MyFn(Function):
        @staticmethod
        def forward(ctx, inp, inplace):
            view = inp.clone()[:3]
            if inplace:
                view += 2
            return view

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    base = tg.rand(10, requires_grad=True)
    foo = MyFn.apply(base, False)
    assert foo.grad_fn.__class__.__name__ == "MyFnBackward"
    foo = MyFn.apply(base, True)
    assert foo.grad_fn.__class__.__name__ == "MyFnBackward"


@pytest.mark.xfail(strict=True, reason=KNOWN_GAPS["test_integer_outputs"])
def test_integer_outputs():
    # torch's test also runs searchsorted, bucketize, unique_consecutive and private
    # variants of unique, which tracegrad does not have
    inp = tg.rand(4, requires_grad=True)
    for out in (inp.argmax(), inp.argmin(), inp.argsort()):
        assert not out.dtype.is_floating_point
        assert not out.requires_grad
    val = tg.empty(5).requires_grad_()
    out = val.count_nonzero()
    assert not out.requires_grad

    def assert_only_first_requires_grad(res):
        if not isinstance(res, tuple):
            res = (res,)
        assert res[0].requires_grad
        for out in res[1:]:
            if out is not None:
                assert not out.requires_grad

    for sort in [True, False]:
        for return_inverse in [True, False]:
            for return_counts in [True, False]:
                res = tg.unique(inp, sorted=sort, return_inverse=return_inverse, return_counts=return_counts)
                assert_only_first_requires_grad(res)
                res = tg.unique(inp, sorted=sort, return_inverse=return_inverse, return_counts=return_counts, dim=0)
                assert_only_first_requires_grad(res)


def test_custom_function_cycle():
    class MyFn(Function):
        @staticmethod
        def forward(ctx, x, metadata):
            x = x.clone()
            ctx.meta = metadata
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, gO):
            (x,) = ctx.saved_tensors
            assertEqual(x, 3.14)
            assertEqual(ctx.meta["foo"], 3.14)
            return gO * x, None

    def get_refs(with_backward):
        a = tg.tensor(3.14, requires_grad=True)
        metadata = {}
        out = MyFn.apply(a, metadata)
        metadata["foo"] = out
        if with_backward:
            out.sum().backward()
            assertEqual(a.grad, a)
        return weakref.ref(out)

    gc.disable()
    try:
        ref = get_refs(False)
        assert ref() is not None
    finally:
        gc.enable()
    gc.collect()
    assert ref() is None
    gc.disable()
    try:
        ref = get_refs(True)
        assert ref() is not None
    finally:
        gc.enable()
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("use_custom_function", [True, False])
@pytest.mark.parametrize("use_tensor_hook", [True, False])
def test_hook_closure_cycle(use_custom_function, use_tensor_hook):
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Test:
        pass

    count = [0]

    def scope():
        a = tg.tensor(1.0, requires_grad=True)
        if use_custom_function:
            b = MyFunction.apply(a)
        else:
            b = a.clone()
        grad_fn_b = b.grad_fn
        obj = Test()

        def hook(*args):
            grad_fn_b
            obj
            count[0] += 1

        if use_tensor_hook:
            b.register_hook(hook)
        else:
            b.grad_fn.register_hook(hook)
        c = b.clone()
        ref = weakref.ref(obj)
        return c, ref

    gc.disable()
    try:
        out, ref = scope()
        out.backward(retain_graph=True)
        gc.collect()
        out.backward(retain_graph=True)
        assert count[0] == 2
        assert ref() is not None
        del out
        gc.collect()
        assert ref() is None
    finally:
        gc.enable()


def test_no_unnecessary_unwrapping():
    a = tg.randn(5, requires_grad=True)
    a_orig = a.detach().clone()
    b = a * a
    c = a * b
    d = tg.exp(a)
    assert b.grad_fn._saved_self is a
    assert b.grad_fn._saved_other is a
    assert c.grad_fn._saved_self is a
    assert c.grad_fn._saved_other is b
    assertEqual(d.grad_fn._saved_result, d)
    assert d.grad_fn._saved_result is not d
    c.sum().backward()
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        c.grad_fn._saved_self
    assertEqual(a, a_orig)


def test_saved_variable_version_counter():
    a = tg.rand(2, requires_grad=True)
    b = tg.exp(a)
    b_unpacked = b.grad_fn._saved_result
    assertEqual(b, b_unpacked)
    assert b._version == b_unpacked._version
    with tg.no_grad():
        b += 1
    assertEqual(b, b_unpacked)
    assert b._version == b_unpacked._version


def test_saved_variable_saved_original_inplace_detach():
    a = tg.tensor(1.0, requires_grad=True).clone()
    b = a.sin()
    a.detach_()
    with pytest.raises(RuntimeError, match="Trying to use a saved tensor that has been detached"):
        b.backward()
    a = tg.tensor(1.0, requires_grad=True).clone()
    b = a.exp()
    a.detach_()
    b.backward()


def test_multi_grad_any_hooks():
    hook_id = 0
    any_hook_handles = []

    class MultiOutputModule(tnn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tnn.Linear(3, 3)

        def forward(self, x):
            z = self.lin(x)
            out = tg.sin(z), tg.cos(z)
            nonlocal hook_id
            z.register_hook(partial(hook, hook_id))
            hook_id += 1
            any_hook_handles.append(tg.autograd.graph.register_multi_grad_hook(out, partial(hook, hook_id),
                                                                                mode="any"))
            hook_id += 1
            return out

    class Model(tnn.Module):
        def __init__(self):
            super().__init__()
            self.mod1 = MultiOutputModule()
            self.mod2 = MultiOutputModule()

        def forward(self, x):
            y = self.mod1(x)
            z = y[0] + y[1]
            return self.mod2(z)

    hook_order = []

    def hook(hook_id, *unused):
        hook_order.append(hook_id)

    model = Model()
    inp = tg.randn((2, 3))
    out = model(inp)
    (out[0] + out[1]).sum().backward()
    assert len(any_hook_handles) == 2
    assert hook_order == [3, 2, 1, 0]
    hook_id = 0
    hook_order.clear()
    any_hook_handles.clear()
    out = model(inp)
    for handle in any_hook_handles:
        handle.remove()
    (out[0] + out[1]).sum().backward()
    assert hook_order == [2, 0]


def test_multi_grad_hooks_invalid_mode():
    t1 = tg.rand(2, requires_grad=True)
    t2 = tg.rand(2, requires_grad=True)
    regex = r"Expects mode to be one of \('all', 'any'\) but got foo"
    with pytest.raises(ValueError, match=regex):
        tg.autograd.graph.register_multi_grad_hook((t1, t2), lambda _: None, mode="foo")


def test_pynode_destruction_deadlock():
    # torch runs this script in a subprocess (a deadlock would hang it); here it runs in process
    class Foo(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, gO):
            return gO.clone()

    def get_out():
        inp = tg.rand(2, requires_grad=True)
        right = Foo.apply(inp)
        left1 = inp.clone()
        left2 = left1**2
        left1 += 1
        return left2 + right

    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation"):
        get_out().sum().backward()


def test_setup_context_when_forward_has_default_args():
    class PowFunction(Function):
        @staticmethod
        def forward(x, y=3):
            return tg.pow(x, y)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y = inputs
            ctx.save_for_backward(x)
            ctx.y = y

        @staticmethod
        def backward(ctx, gO):
            (x,) = ctx.saved_tensors
            y = ctx.y
            return gO * y * tg.pow(x, y - 1), None

    class PowFunctionWithClassmethod(Function):
        @classmethod
        def forward(cls, x, y=3):
            return tg.pow(x, y)

        @classmethod
        def setup_context(cls, ctx, inputs, output):
            x, y = inputs
            ctx.save_for_backward(x)
            ctx.y = y

        @classmethod
        def backward(cls, ctx, gO):
            (x,) = ctx.saved_tensors
            y = ctx.y
            return gO * y * tg.pow(x, y - 1), None

    x = tg.tensor(2.0, requires_grad=True)
    y = tg.tensor(8.0)
    y_expected = tg.tensor(12.0)
    y1 = PowFunction.apply(x)
    (y1_expected,) = tg.autograd.grad(y1, x)
    y2 = PowFunctionWithClassmethod.apply(x)
    (y2_expected,) = tg.autograd.grad(y2, x)
    assertEqual(y, y1)
    assertEqual(y_expected, y1_expected)
    assertEqual(y, y2)
    assertEqual(y_expected, y2_expected)


def test_grad_thread_safety():
    from concurrent.futures import ThreadPoolExecutor
    NUM_ITERS = 10
    NUM_THREADS = 4

    def access_grad(tensor, barrier):
        barrier.wait()
        return weakref.ref(tensor.grad)

    for i in range(NUM_ITERS):
        tensor = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (tensor**2).sum().backward()
        barrier = threading.Barrier(NUM_THREADS)
        with ThreadPoolExecutor(max_workers=NUM_THREADS) as executor:
            futures = [executor.submit(access_grad, tensor, barrier) for _ in range(NUM_THREADS)]
            for future in futures:
                assertEqual(future.result()(), tensor.grad)
            assert tensor.grad is not None


def test_var_mean_differentiable():
    dim = [2, 4]
    keepdim = False
    input1 = tg.randn(3, 4, 5, 6, 2, 3, requires_grad=True)
    input2 = copy.deepcopy(input1)
    var1, mean1 = tg.var_mean(input1, dim=dim, keepdim=keepdim)
    var2 = input2.var(dim=dim, keepdim=keepdim)
    mean2 = input2.mean(dim=dim, keepdim=keepdim)
    grad = tg.randn(3, 4, 6, 3, requires_grad=True)

    r1 = var1 * var1 * mean1 * mean1
    r2 = var2 * var2 * mean2 * mean2
    assertEqual(r1, r2, rtol=0.01, atol=0.0)

    tg.autograd.backward(r1, grad)
    tg.autograd.backward(r2, grad)
    assertEqual(input1.grad, input2.grad, rtol=0.01, atol=0.0)


def test_diagonal_expanded_v():
    value = tg.rand([])
    v_expanded = tg.tensor(value).expand(10)
    a = tg.rand(10, 10, dtype=tg.double, requires_grad=True)
    (result,) = tg.autograd.grad(a.diagonal(), a, v_expanded)
    assertEqual(result, tg.eye(10, dtype=tg.double) * value)


# -- saved-tensor hooks (tracegrad.autograd.graph.saved_tensors_hooks, torch's) -----------------

def test_saved_variable_packing_unpacking_saved_original_with_hooks():
    # torch's test: packing/unpacking a SavedVariable with hooks registered on it
    def test(get_input, is_leaf):
        a = get_input()
        grad_fn = a.grad_fn
        y = a * a
        y.grad_fn._raw_saved_self.register_hooks(lambda x: 2 * x, lambda x: x / 2)
        assertEqual(a, y.grad_fn._saved_self)
        if not is_leaf:
            assert grad_fn is y.grad_fn._saved_self.grad_fn
            y.sum().backward()
        else:
            y.sum().backward()
            assertEqual(2 * a, a.grad)

        a = get_input()
        grad_fn = a.grad_fn
        y = a * a
        y.grad_fn._raw_saved_self.register_hooks(lambda x: 2 * x, lambda x: x)
        assertEqual(2 * a, y.grad_fn._saved_self)
        if not is_leaf:
            assert grad_fn is y.grad_fn._saved_self.grad_fn
            y.sum().backward()
        else:
            y.sum().backward()
            assertEqual(3 * a, a.grad)

        # double backward
        a = get_input()
        grad_fn = a.grad_fn
        y = a ** 3
        y.grad_fn._raw_saved_self.register_hooks(lambda x: x, lambda x: x)
        s = tg.sum(y)
        (g,) = tg.autograd.grad(s, (a,), create_graph=True)
        if not is_leaf:
            assert grad_fn is y.grad_fn._saved_self.grad_fn
            g.sum().backward()
        else:
            g.sum().backward()
            assertEqual(6 * a, a.grad)

        a = get_input()
        y = a * a
        y.grad_fn._raw_saved_self.register_hooks(lambda x: x, lambda x: 1)
        with pytest.raises(TypeError, match="Output of saved tensor unpack_hook expected to be a Tensor"):
            print(y.grad_fn._saved_self)

        a = get_input()
        y = a * a
        with pytest.raises(TypeError, match="missing 1 required positional argument"):
            y.grad_fn._raw_saved_self.register_hooks(lambda x, b: x, lambda x: x)

        a = get_input()
        y = a * a
        with pytest.raises(TypeError, match="missing 1 required positional argument"):
            y.grad_fn._raw_saved_self.register_hooks(lambda x, b: (x, b), lambda x: x)

        def inplace_double(x):
            x *= 2
            return x

        a = get_input()
        t = a * a

        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input in place."):
            t.grad_fn._raw_saved_self.register_hooks(inplace_double, lambda x: x / 2)

    # leaf
    test(lambda: tg.randn(5, requires_grad=True), True)

    # not leaf, not output
    test(lambda: (1 + tg.randn(5, requires_grad=True)), False)


def test_saved_variable_packing_unpacking_did_not_save_original_with_hooks():
    a = tg.randn(5, requires_grad=True)
    y = tg.exp(a)
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)
    assertEqual(y, y.grad_fn._saved_result)
    assert y.grad_fn is y.grad_fn._saved_result.grad_fn
    y.sum().backward()
    assertEqual(a.grad, y)


def test_saved_variable_packing_unpacking_saved_original_with_default_hooks():
    def pack(x):
        warnings.warn("pack")
        return x

    with tg.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        a = tg.ones(5, requires_grad=True)

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = a * a
            # should raise two warnings from a being saved twice
            assert len(w) == 2

    with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        a = tg.randn(5, requires_grad=True)
        y = a * a
        assertEqual(a, y.grad_fn._saved_self)
        assertEqual(a, y.grad_fn._saved_other)
        y.sum().backward()
        assertEqual(2 * a, a.grad)

    with tg.autograd.graph.saved_tensors_hooks(lambda x: 2 * x, lambda x: x / 2):
        a = tg.randn(5, requires_grad=True)
        y = a * a
        assertEqual(a, y.grad_fn._saved_self)
        assertEqual(a, y.grad_fn._saved_other)
        y.sum().backward()
        assertEqual(2 * a, a.grad)

    with tg.autograd.graph.saved_tensors_hooks(lambda x: 2 * x, lambda x: x):
        a = tg.randn(5, requires_grad=True)
        y = a * a
        assertEqual(2 * a, y.grad_fn._saved_self)
        assertEqual(2 * a, y.grad_fn._saved_other)
        y.sum().backward()
        assertEqual(4 * a, a.grad)

    # Exited hooks correctly
    a = tg.randn(5, requires_grad=True)
    y = a * a
    assertEqual(a, y.grad_fn._saved_self)
    assertEqual(a, y.grad_fn._saved_other)
    y.sum().backward()
    assertEqual(2 * a, a.grad)


def test_saved_variable_packing_unpacking_did_not_save_original_with_default_hooks():
    with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        a = tg.randn(5, requires_grad=True)
        y = tg.exp(a)
        assertEqual(y, y.grad_fn._saved_result)
        y.sum().backward()
        assertEqual(a.grad, y)


def test_setting_default_saved_variable_hooks_twice_should_not_fail():
    with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
            pass


def test_setting_default_saved_variable_hooks_twice_should_use_inner():
    with tg.autograd.graph.saved_tensors_hooks(lambda x: 3 * x, lambda x: 3 * x):
        b = tg.randn(5, requires_grad=True)
        with tg.autograd.graph.saved_tensors_hooks(lambda x: 5 * x, lambda x: 5 * x):
            a = tg.randn(5, requires_grad=True)
            y = a * a
        z = b * b
    y.sum().backward()
    z.sum().backward()
    assertEqual(2 * 5 * 5 * a, a.grad)
    assertEqual(2 * 3 * 3 * b, b.grad)


# torch's torch._C._autograd._saved_tensors_hooks_is_enabled
_hooks_enabled = tg.autograd.graph._saved_tensors_hooks_is_enabled


def test_disabling_saved_tensor_hooks():
    with tg.autograd.graph.disable_saved_tensors_hooks("error message"):
        with pytest.raises(RuntimeError, match="error message"):
            with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
                pass

    assert _hooks_enabled()

    with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        with pytest.raises(RuntimeError, match="error message"):
            with tg.autograd.graph.disable_saved_tensors_hooks("error message"):
                pass

    assert _hooks_enabled()


def test_disabling_saved_tensor_hooks_nested():
    with tg.autograd.graph.disable_saved_tensors_hooks("outer"):
        with tg.autograd.graph.disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match="inner"):
                with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
                    pass

        assert not _hooks_enabled()

    assert _hooks_enabled()


def test_saved_tensor_hooks_custom_error_propagation():
    class CustomError(Exception):
        pass

    class error_on_pack_hook(tg.autograd.graph.saved_tensors_hooks):
        def __init__(self) -> None:
            def pack_hook(x):
                raise CustomError("pack")

            super().__init__(pack_hook, lambda x: x)

    class error_on_unpack_hook(tg.autograd.graph.saved_tensors_hooks):
        def __init__(self) -> None:
            def unpack_hook(x):
                raise CustomError("unpack")

            super().__init__(lambda x: x, unpack_hook)

    a = tg.tensor(1.0, requires_grad=True)

    with error_on_pack_hook():
        with pytest.raises(CustomError, match="pack"):
            out = tg.sin(a)

    with error_on_unpack_hook():
        out = tg.sin(a)
        with pytest.raises(CustomError, match="unpack"):
            out.backward()


def test_saved_tensor_hooks_custom_function_intermediates():
    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            intermediate = x.exp()
            ctx.save_for_backward(intermediate.clone().detach_().requires_grad_(True))
            return x.exp()

        @staticmethod
        def backward(ctx, grad_out):
            (intermediate,) = ctx.saved_tensors
            return grad_out * intermediate

    a = tg.tensor(1.0, requires_grad=True)

    with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        out = Func.apply(a)
    out.backward()


def test_unpack_hooks_exec_count():
    def f(x, y):
        return x * y

    pack_count = 0
    unpack_count = 0

    def pack_hook(x):
        nonlocal pack_count
        pack_count += 1
        return x

    def unpack_hook(x):
        nonlocal unpack_count
        unpack_count += 1
        return x

    x = tg.ones(4, requires_grad=True)
    y = tg.ones(4, requires_grad=False)
    with tg.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        out_test = f(x, y)
        assert pack_count == 1
        assert unpack_count == 0
        out_test.sum().backward()
        assert pack_count == 1
        assert unpack_count == 1


def test_saved_tensors_hook_version_counter_not_shared():
    class Test(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            before = a._version
            x.add_(1)
            assert a._version == before
            return grad_output

    a = tg.tensor(1.0, requires_grad=True)
    a_replacement = a.clone()

    def pack_hook(x):
        return a_replacement

    def unpack_hook(x):
        return x

    with tg.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        b = Test.apply(a)

    b.backward()

def test_save_on_cpu_and_checkpoint():
    from tracegrad.utils.checkpoint import checkpoint
    a = tg.randn(2, 2, requires_grad=True)

    b = a.pow(2).pow(2).pow(2).pow(2)
    b.sum().backward()
    b_grad = a.grad.clone()
    a.grad.zero_()

    with tg.autograd.graph.save_on_cpu():
        h = a.pow(2)
        h = checkpoint(lambda x: x.pow(2).pow(2), h, use_reentrant=False)
        c = h.pow(2)
    c.sum().backward()
    c_grad = a.grad.clone()
    a.grad.zero_()

    def f(a):
        h = a.pow(2)
        with tg.autograd.graph.save_on_cpu():
            h = h.pow(2).pow(2)
        return h.pow(2)

    d = checkpoint(f, a, use_reentrant=False)
    d.sum().backward()
    d_grad = a.grad.clone()

    assertEqual(b_grad, c_grad)
    assertEqual(b_grad, d_grad)


def test_pack_hook_with_inplace_modification_should_fail():
    a = tg.randn(5, requires_grad=True)

    def inc(x):
        x += 1
        return x

    with tg.autograd.graph.saved_tensors_hooks(inc, lambda x: x):
        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input in place."):
            y = tg.exp(a)

    y = tg.exp(a)
    with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input in place."):
        y.grad_fn._raw_saved_result.register_hooks(inc, lambda x: x)


def test_saving_variable_to_disk(tmp_path):
    import os
    import uuid
    tmp_dir = str(tmp_path)

    def pack(x):
        name = os.path.join(tmp_dir, str(uuid.uuid4()))
        tg.save(x, name)
        return name

    def unpack(name):
        return tg.load(name)

    with tg.autograd.graph.saved_tensors_hooks(pack, unpack):
        a = tg.ones(5, requires_grad=True)
        y = a * a
        assertEqual(a, y.grad_fn._saved_self)

        y.sum().backward()
        assertEqual(2 * a, a.grad)


def test_default_saved_tensors_hooks_double_backward():
    with tg.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        a = tg.randn(5, requires_grad=True)
        y = a ** 3
        s = tg.sum(y)
        (g,) = tg.autograd.grad(s, (a,), create_graph=True)
        g.sum().backward()
        assertEqual(6 * a, a.grad)

    with tg.autograd.graph.saved_tensors_hooks(lambda x: 2 * x, lambda x: x):
        a = tg.randn(5, requires_grad=True)
        y = a ** 3
        s = tg.sum(y)
    (g,) = tg.autograd.grad(s, (a,), create_graph=True)
    g.sum().backward()
    # factor 2 because only a is saved once
    assertEqual(6 * 2 * a, a.grad)

    a = tg.randn(5, requires_grad=True)
    y = a ** 3
    s = tg.sum(y)
    with tg.autograd.graph.saved_tensors_hooks(lambda x: 2 * x, lambda x: x):
        (g,) = tg.autograd.grad(s, (a,), create_graph=True)
        g.sum().backward()
        # factor 4 because pow_backward is grad * (exp * self.pow(exp - 1))
        # so grad is saved and self (i.e. a) is saved
        assertEqual(6 * 4 * a, a.grad)

    with tg.autograd.graph.saved_tensors_hooks(lambda x: 2 * x, lambda x: x):
        a = tg.randn(5, requires_grad=True)
        y = a ** 3
        s = tg.sum(y)
        (g,) = tg.autograd.grad(s, (a,), create_graph=True)
        g.sum().backward()
        # combining the two above blocks: 2 * 4 = 8
        # note that in that sense, a is saved twice
        assertEqual(6 * 8 * a, a.grad)


def test_wrapped_number_saved_tensors_hooks():
    def err_hook(x):
        raise RuntimeError("this hook should not be called")

    with tg.autograd.graph.saved_tensors_hooks(err_hook, err_hook):
        a = tg.randn(5, requires_grad=True)
        out = (a * 3).sum()
        # 3 is saved as a saved tensor because it is a wrapped number, but
        # wrapped numbers should be special cased to not trigger saved variable hooks
        tg.autograd.grad(out, (a,))

# -- torch.utils.checkpoint (tracegrad.utils.checkpoint) ------------------------------------------

def test_checkpointing_without_reentrant_custom_function_works():
    from tracegrad.utils.checkpoint import checkpoint
    msg = "Unpack is being triggered for a tensor that was already unpacked once"

    class MyFunc(Function):
        @staticmethod
        def forward(ctx, x, y, z):
            w = x * y * z
            out = w + w
            ctx.save_for_backward(x, y, z, w, out)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            x, y, z, w, out = ctx.saved_tensors
            # Accessing the saved Tensors a second time will raise because
            # recomputed tensors get cleared as soon as they are unpacked.
            # A recomputation is only triggered if your backward has a new
            # graph-task id.
            with pytest.raises(RuntimeError, match=msg):
                x_2, y_2, z_2, w_2, out_2 = ctx.saved_tensors
            return x, y, z

    x = tg.tensor(1.0, requires_grad=True)
    y = tg.tensor(2.0, requires_grad=True)
    z = tg.tensor(3.0, requires_grad=True)

    def foo(x, y, z):
        x = x * y * z
        y = y * y * z
        z = z * z
        out = MyFunc.apply(x, y, z)
        return out

    out = checkpoint(foo, x, y, z, use_reentrant=False)
    out.sum().backward()


def test_checkpoint_warns_if_use_reentrant_not_passed_explcitly():
    from tracegrad.utils.checkpoint import checkpoint
    a = tg.randn(1, requires_grad=True)

    # Passing explicitly should not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(lambda x: x, a, use_reentrant=False)

    # Not passing explicitly warns
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        checkpoint(lambda x: x, a)
    assert len([r for r in w if re.match(".*the use_reentrant parameter should be passed explicitly.*",
                                         str(r.message))]) == 1


def test_checkpoint_sequential_warns_if_use_reentrant_not_passed_explcitly():
    from tracegrad.utils.checkpoint import checkpoint_sequential
    a = tg.randn(3, requires_grad=True)
    modules_list = [
        tnn.Linear(3, 3),
        tnn.Linear(3, 3),
        tnn.Linear(3, 3),
    ]

    # Passing explicitly should not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_sequential(modules_list, 3, a, use_reentrant=False)

    # Not passing explicitly warns
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        checkpoint_sequential(modules_list, 3, a)
    assert len([r for r in w if re.match(".*the use_reentrant parameter should be passed explicitly.*",
                                         str(r.message))]) == 1


def test_access_saved_tensor_twice_without_recomputation_works():
    from tracegrad.utils.checkpoint import checkpoint
    count = [0]

    def foo(a):
        count[0] += 1
        b = a * a
        c = a * b
        d = tg.exp(a)
        return d

    a = tg.randn(5, requires_grad=True)
    d = checkpoint(foo, a, use_reentrant=False)
    assert count[0] == 1
    # Recomputed variables only persist within a particular backward call.
    # If _saved_result is accessed outside of a backward, it will trigger
    # a recompute. And afterwards, those recomputed results are immediately
    # cleared.
    d.grad_fn._saved_result
    assert count[0] == 2
    # Second access will trigger another recompute
    d.grad_fn._saved_result
    assert count[0] == 3
    # Backward clears the saved variable
    d.sum().backward()
    assert count[0] == 4
    # Now it raises an error
    with pytest.raises(RuntimeError, match="or directly access saved tensors after they have already been freed"):
        d.grad_fn._saved_result

@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpointing_without_reentrant_detached_tensor(use_reentrant):
    from tracegrad.utils.checkpoint import checkpoint
    import contextlib

    class NoGradModule(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = tnn.Linear(2, 2, bias=False)
            self.lin2 = tnn.Linear(2, 2, bias=False)

        def forward(self, x):
            with tg.no_grad():
                return self.lin2(self.linear(x))

    module = NoGradModule()

    err_ctx = (pytest.raises(RuntimeError, match="none of output has requires_grad=True")
               if use_reentrant else contextlib.nullcontext())

    a = tg.randn(2, 2, requires_grad=True)
    for _ in range(3):
        with err_ctx:
            # out does not require grad
            out = checkpoint(module, a, use_reentrant=use_reentrant)
            # Make loss require grad, otherwise we would run into
            # "element 0 of tensors does not require grad and does not have a grad_fn"
            out += a
            out.sum().backward()


def test_checkpointing_without_reentrant_saved_object_identity():
    from tracegrad.utils.checkpoint import checkpoint
    x_backward = None

    class Test(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x

        @staticmethod
        def backward(ctx, x):
            nonlocal x_backward
            (x_backward,) = ctx.saved_tensors
            return x, None

    a = tg.tensor(1.0, requires_grad=True)
    b = tg.tensor(1.0, requires_grad=False)

    Test.apply(a, b).backward()
    assert b is x_backward

    x_backward = None
    checkpoint(Test.apply, a, b, use_reentrant=False).backward()
    assert b is x_backward


def test_checkpointing_without_reentrant_correct_grad():
    from tracegrad.utils.checkpoint import checkpoint
    a = tg.randn(2, 2, requires_grad=True)

    b = tg.exp(a).sum()
    b.backward()
    b_grad = a.grad

    a.grad = None
    c = checkpoint(tg.exp, a, use_reentrant=False).sum()
    c.backward()
    c_grad = a.grad

    a.grad = None
    d = checkpoint(tg.exp, a, use_reentrant=False).sum()
    (d_grad,) = tg.autograd.grad(d, (a,))

    assertEqual(b_grad, c_grad)
    assertEqual(b_grad, d_grad)


def test_checkpointing_without_reentrant_parameter_used_in_an_out():
    from tracegrad.utils.checkpoint import checkpoint
    w = tg.randn(10, 10, requires_grad=True)
    count = 0

    def hook(grad):
        nonlocal count
        count += 1

    w.register_hook(hook)
    x = tg.rand(10, 10, requires_grad=True)
    h = w * x  # Using w outside the checkpoint
    out = checkpoint(lambda x: w * x, h, use_reentrant=False)  # Using w inside the checkpoint

    out.sum().backward()
    # should only call hook once
    assert count == 1


def test_checkpointing_without_reentrant_arbitrary_input_output():
    from tracegrad.utils.checkpoint import checkpoint

    class MyModel(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = tnn.Linear(5, 5, bias=False)

        def forward(self, dict_input):
            tensor = dict_input["tensor"]
            return {"result": self.layer(tensor)}

    model_no_checkpoint = MyModel()
    model_checkpoint_without_reentrant = copy.deepcopy(model_no_checkpoint)

    inp = {"tensor": tg.randn(5, 5)}

    out_no_checkpoint = model_no_checkpoint(inp)["result"].sum()

    out_checkpoint = checkpoint(model_checkpoint_without_reentrant, inp, use_reentrant=False)["result"].sum()

    assertEqual(out_checkpoint, out_no_checkpoint)

    out_no_checkpoint.backward()
    out_checkpoint.backward()

    for param, checkpoint_param in zip(model_no_checkpoint.parameters(),
                                       model_checkpoint_without_reentrant.parameters()):
        assertEqual(param.grad, checkpoint_param.grad)

def test_full_backward_hook_double_backward():
    x = tg.rand(1, requires_grad=True)
    y = tg.rand_like(x)

    func = tnn.MSELoss()
    counter = [0]

    def hook(module, grad_input, grad_output):
        counter[0] += 1

    func.register_full_backward_hook(hook)

    f = func(x, y)

    (gradx_f,) = tg.autograd.grad(f, x, create_graph=True)
    assert counter[0] == 1
    _ = tg.autograd.grad(gradx_f, x)
    # We should not error, and counter should not be incremented
    assert counter[0] == 1

OUT_OF_SCOPE.update({
    "test_to_sparse_backward": "sparse layouts",
    "test_sparse_mm_backward": "sparse tensors",
    "test_first_grad_fn_access_in_no_grad_mode": "complex tensors (Tensor.real view)",
    "test_volatile_deprecated": "the legacy Variable API (volatile)",
    "test_sparse_gather_dim0": "sparse gradients",
    "test_sparse_gather_dim1": "sparse gradients",
    "test_sparse_gather_dim_neg": "sparse gradients",
    "test_sparse_gather_ind_scalar": "sparse gradients",
    "test_sparse_gather_x_scalar": "sparse gradients",
    "test_sparse_gather_both_scalar": "sparse gradients",
    "test_grad_dtype": "Tensor.grad_dtype",
    "test_naughty_anomaly_access": "an expected failure in torch itself",
    "test_custom_autograd_ac_early_stop": "torch.utils.checkpoint",
    "test_checkpoint_compile_no_recompile": "CUDA, torch.compile and checkpoint",
    "test_checkpoint_device_context_fn": "CUDA and checkpoint",
    "test_lobpcg": "torch.lobpcg (linear algebra)",
    "test_node_ordering_when_none_returned": "CUDA, bfloat16 on device",
    "test_current_graph_task_id": "torch._C._current_graph_task_id",
    "test_current_graph_task_execution_order": "torch._C._current_graph_task_execution_order",
    "test_backward_hook_relative_ordering": "AddmmBackward0/TBackward0 node names of nn.Linear and "
                                            "BackwardHookFunction nodes of module hooks",
    "test_view_replay_enabled": "torch.autograd._force_original_view_tracking",
    "test_unsafe_set_version_counter": "private torch._C._autograd._unsafe_set_version_counter",
    "test_current_node": "TorchDispatchMode",
    "test_profiler": "profiler", "test_profiler_seq_nr": "profiler", "test_profiler_unboxed_only": "profiler",
    "test_profiler_propagation": "profiler, torch.jit", "test_record_function_callbacks": "profiler",
    "test_record_function_legacy": "profiler", "test_profiler_aggregation_fake": "profiler",
    "test_profiler_aggregation_table": "profiler", "test_profiler_function_event_avg": "profiler",
    "test_profiler_shapes": "profiler", "test_profiler_aggregation_lstm": "profiler",
    "test_record_function": "profiler", "test_record_function_multithreaded": "profiler",
    "test_calculate_shape_util": "private _calculate_shape, nested tensors",
    "test_forward_traceback_preserves_exception_with_checkpoint": "CUDA, torch.library, checkpoint",
    "test_no_grad_copy_sparse": "sparse gradients",
    "test_gradcheck_input": "sparse layouts",
    "test_gradcheck_validates_input_mkldnn": "MKL-DNN",
    "test_gradcheck_test_outputs": "sparse and MKL-DNN outputs",
    "test_gradcheck_check_batched_grad": "sparse inputs, vmap",
    "test_gradcheck_dense_and_sparse_inputs": "sparse inputs",
    "test_gradcheck_multiple_mkldnn_inputs": "MKL-DNN",
    "test_gradcheck_complex_non_complex_outputs": "complex tensors",
    "test_gradcheck_adjusted_atol_complex_inputs": "complex tensors",
    "test_gradcheck_get_numerical_jacobian": "deprecated private gradcheck helpers",
    "test_gradcheck_get_analytical_jacobian": "deprecated private gradcheck helpers",
    "test_gradcheck_forward_ad": "forward-mode AD",
    "test_gradcheck_forward_ad_runs_with_no_requires_grad": "forward-mode AD",
    "test_gradcheck_forward_ad_respects_requires_grad": "forward-mode AD",
    "test_gradcheck_forward_ad_batched_grad": "forward-mode AD, vmap",
    "test_set_data_tensorimpl_type": "sparse tensors",
    "test_thread_shutdown": "engine worker threads of devices (subprocess API-usage logging)",
    "test_checkpointing": "torch.utils.checkpoint",
    "test_checkpointing_non_reentrant_autocast_cpu": "checkpoint, autocast",
    "test_checkpointing_non_reentrant_autocast_gpu": "checkpoint, autocast, CUDA",
    "test_checkpointing_without_reentrant_memory_savings": "checkpoint, CUDA",
    "test_checkpointing_without_reentrant_with_context_fn": "checkpoint",
    "test_checkpoint_graph_execution_group": "checkpoint",
    "test_checkpoint_detects_non_determinism": "checkpoint",
    "test_checkpointing_without_reentrant": "checkpoint",
    "test_checkpoint_valid_reset_on_error": "checkpoint",
    "test_checkpointing_without_reentrant_dataparallel": "checkpoint, DataParallel",
    "test_callback_propagates_errors_from_device_thread": "CUDA, queue_callback",
    "test_grad_fn_attr_bindings": "the _saved_* fields of torch's generated nodes (interpolate, conv, pdist, ...)",
    "test_get_data_and_hooks_from_raw_saved_variable": "saved-tensor hooks",
    "test_saved_tensor_constructor_with_hooks": "saved-tensor hooks, SavedTensor",
    "test_saved_tensor_constructor_forbidden_without_flag": "SavedTensor",
    "test_autograd_inplace_views_cross_dtype": "complex tensors",
    "test_named_tensor_for_complex_views": "named and complex tensors",
    "test_custom_function_preserve_torch_function_when_return_as_is": "__torch_function__ subclasses",
    "test_custom_function_forward_mode_view_checks": "forward-mode AD",
    "test_custom_function_forward_mode_inplace_checks": "forward-mode AD",
    "test_custom_function_forward_mode_wrong_formula": "forward-mode AD",
    "test_custom_function_forward_mode_non_tensor_before_tensor_args": "forward-mode AD",
    "test_custom_function_forward_mode_forward_is_no_op": "forward-mode AD",
    "test_custom_function_save_for_forward": "forward-mode AD",
    "test_custom_function_forward_mode_non_differentiable": "forward-mode AD",
    "test_input_buffer_accum": "sparse gradients",
    "test_graph_save_on_cpu": "save_on_cpu, sparse",
    "test_graph_save_on_cpu_cuda": "save_on_cpu, CUDA",
    "test_scalar_grad_mixed_device": "CUDA",
    "test_multi_grad_all_hooks": "a C++ extension (load_inline) and torch._C nodes",
    "test_view_func_replay": "private _view_func, nested tensors",
    "test_view_func_replay_with_modified_state": "private _view_func",
    "test_gradcheck_default_device_placement_context": "CUDA",
    "test_create_graph_and_full_backward_hook_cycle": "the lifetime of torch's C++ grad_fn (shared_ptr use "
                                                      "counts) under create_graph with module backward hooks",
})


def test_not_implemented_fwad():
    x = tg.randn(3)
    v = tg.rand(3)
    with tg.autograd.forward_ad.dual_level():
        dual_x = tg.autograd.forward_ad.make_dual(x, v)
        # Running forward AD for an OP that does not implement it should raise a NotImplementedError
        with pytest.raises(NotImplementedError, match=r"Trying to use forward AD with .* that does not support it"):
            tg.igamma(dual_x, dual_x)


def test_gradcheck_check_forward_or_backward_only():
    # (torch's test also passes check_batched_grad=check_backward_ad: vmap is out of scope, left out)
    fwd_fail_err_msg = "FAIL FWD"
    bwd_fail_err_msg = "FAIL BWD"

    class UserFn(Function):
        @staticmethod
        def forward(ctx, foo, fwd_bad, bwd_bad):
            ctx.fwd_bad = fwd_bad
            ctx.bwd_bad = bwd_bad
            return foo * 2

        @staticmethod
        def vjp(ctx, gO):
            if ctx.bwd_bad:
                raise RuntimeError(bwd_fail_err_msg)
            return 2 * gO, None, None

        @staticmethod
        def jvp(ctx, gI, _1, _2):
            if ctx.fwd_bad:
                raise RuntimeError(fwd_fail_err_msg)
            return 2 * gI

    for fast_mode in (True, False):
        for check_forward_ad in (True, False):
            for check_backward_ad in (True, False):
                for fwd_bad in (True, False):
                    for bwd_bad in (True, False):
                        fwd_should_fail = fwd_bad and check_forward_ad
                        bwd_should_fail = bwd_bad and check_backward_ad
                        x = tg.rand(2, dtype=tg.double, requires_grad=True)

                        def run():
                            gradcheck(UserFn.apply, (x, fwd_bad, bwd_bad), check_forward_ad=check_forward_ad,
                                      check_backward_ad=check_backward_ad, check_undefined_grad=check_backward_ad,
                                      fast_mode=fast_mode)

                        if not check_forward_ad and not check_backward_ad:
                            with pytest.raises(AssertionError, match="Expected at least one of"):
                                run()
                            continue
                        if not fwd_should_fail and not bwd_should_fail:
                            run()
                        else:
                            # If both fail, backward AD failure "hides" forward AD failure
                            fail_msg = bwd_fail_err_msg if bwd_should_fail else fwd_fail_err_msg
                            with pytest.raises(RuntimeError, match=fail_msg):
                                run()


def test_port_bookkeeping():
    """The ported tests and the out-of-scope list are disjoint (a torch test is counted once)."""
    ported = {n for n in globals() if n.startswith("test_") and n != "test_port_bookkeeping"}
    assert not ported & set(OUT_OF_SCOPE), ported & set(OUT_OF_SCOPE)


def test_inplace_view_ops_against_torch():
    """Not a torch test: in-place view ops (t_, squeeze_, unsqueeze_) give torch's values,
    gradients, grad_fn and memory sharing, also under a later in-place op on a view."""
    def run(m):
        x = m.tensor(np.arange(6.).reshape(2, 3), requires_grad=True)
        w = m.tensor(np.arange(6.).reshape(3, 2) + 1)
        y = x * 1
        y.t_()
        y[1:].mul_(3)
        (y * w).sum().backward()
        z = m.ones(1, 3, requires_grad=True).clone()
        z.squeeze_(0)
        z.unsqueeze_(1)
        a = m.arange(4.).reshape(2, 2)
        b = a[:]
        b.t_()
        b[0, 1] = 7.0
        return (tuple(y.shape), y.tolist(), x.grad.tolist(), type(y.grad_fn).__name__, tuple(z.shape),
                a.tolist(), b.tolist())

    assert run(tg) == run(torch)


# torch's Variable._execution_engine.queue_callback is tracegrad.autograd.engine.queue_callback
def _queue_callback(fn):
    from tracegrad.autograd import engine
    engine.queue_callback(fn)


def test_callback_adds_callback():
    called = [0]

    def callback_final():
        called[0] += 1

    def callback_adds_callback():
        called[0] += 1
        _queue_callback(callback_final)

    class MyFunc(Function):
        @staticmethod
        def forward(ctx, input):
            return input

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            _queue_callback(callback_adds_callback)
            return grad

    a = tg.rand((3, 3), requires_grad=True)
    b = MyFunc.apply(a)
    b.sum().backward()
    assert called[0] == 2


def _test_reentrant_with_callbacks(install_callbacks_in_depths):
    counter = {"inner": 0, "outer": 0}

    def inc_inner_counter():
        counter["inner"] += 1

    def inc_outer_counter():
        counter["outer"] += 1

    class MyFunc(Function):
        @staticmethod
        def forward(ctx, input):
            return input

        @staticmethod
        @once_differentiable
        def backward(ctx, input):
            if 1 in install_callbacks_in_depths:
                _queue_callback(inc_inner_counter)
            return input

    class MyReentrantFunc(Function):
        @staticmethod
        def forward(ctx, input):
            return input

        @staticmethod
        @once_differentiable
        def backward(ctx, input):
            if 0 in install_callbacks_in_depths:
                _queue_callback(inc_outer_counter)
            tmp_inp = input.detach().requires_grad_()
            with tg.enable_grad():
                tmp_out = (MyFunc.apply(tmp_inp)).sum()
            tmp_out.backward()
            return input

    t1 = tg.rand((3, 3), requires_grad=True)
    t2 = MyReentrantFunc.apply(t1)
    t3 = t2.sum()
    tg.autograd.backward([t3])
    return counter


def test_reentrant_with_callbacks_depth_0():
    ret = _test_reentrant_with_callbacks([0])
    assert ret["outer"] == 1
    assert ret["inner"] == 0


def test_reentrant_with_callbacks_depth_1():
    ret = _test_reentrant_with_callbacks([1])
    assert ret["outer"] == 0
    assert ret["inner"] == 1


def test_reentrant_with_callbacks_both_depths():
    ret = _test_reentrant_with_callbacks([0, 1])
    assert ret["outer"] == 1
    assert ret["inner"] == 1

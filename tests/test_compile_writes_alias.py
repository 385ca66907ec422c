"""In-place writes of a compiled function go to the tensors of each call, and a call whose
tensors share memory where the trace took them for distinct values runs eagerly; an output
that is an argument (or an earlier output) is that same tensor. Each case against torch."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def close(a, b):
    # float32 results: equal to a few ulps (the eager kernels round as numpy does, not as torch's)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


def both(make):
    """make(lib, compile) -> list of tensors observed; tracegrad compiled vs torch eager."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = make(tg, tg.compile)
    want = make(torch, lambda f: f)
    assert len(got) == len(want)
    for g, t in zip(got, want):
        close(g, t)
    return [str(x.message) for x in w]


def test_in_place_write_goes_to_each_calls_argument():
    def make(lib, comp):
        @comp
        def f(a):
            a.mul_(3)
            return a.sum()
        x, y = lib.ones(2), lib.ones(2) * 2
        return [f(x), f(y), x, y]
    assert not both(make)


def test_index_put_on_a_second_argument():
    def make(lib, comp):
        @comp
        def f(a, i):
            a[i] = 5.0
            return a.sum()
        x, y = lib.zeros(4), lib.zeros(4)
        return [f(x, 1), f(y, 1), f(y, 2), x, y]
    both(make)


def test_write_into_an_argument_that_is_a_view_the_second_time():
    def make(lib, comp):
        @comp
        def f(a):
            a.add_(1)
            return a * 2
        x, base = lib.ones(2, 2), lib.zeros(2, 2)
        return [f(x), f(base.t()), base, x]
    both(make)


def test_same_tensor_passed_twice_and_written_is_one_value():
    """The call's key holds which arguments are one tensor: that call gets a program of its
    own, traced with them as one value (the write through `a` is read through `b`), with no
    eager fallback."""
    def make(lib, comp):
        @comp
        def f(a, b):
            a.add_(1)
            return b * 2
        x, y = lib.zeros(2), lib.ones(2)
        return [f(y, x), f(x, x), x, f(y, x), f(x, x)]
    msgs = both(make)
    assert not any("shares memory" in m for m in msgs), msgs


def test_both_aliases_written():
    def make(lib, comp):
        @comp
        def f(a, b):
            a.add_(1)
            b.add_(10)
            return a + b
        x, y = lib.zeros(2), lib.zeros(2)
        return [f(x, y), f(x, x), x, y]
    both(make)


def test_argument_that_views_a_written_buffer():
    def make(lib, comp):
        buf = lib.zeros(3)

        @comp
        def f(a):
            buf.add_(1)
            return a * 2
        return [f(lib.ones(3)), f(buf), f(buf[:]), buf]
    both(make)


def test_alias_read_before_the_write_keeps_the_program():
    # the trace reads the argument before it writes the buffer it views: no stale read, so the
    # compiled program runs (as a whole training step whose input views a parameter does)
    def make(lib, comp):
        buf = lib.ones(3)

        @comp
        def f(a):
            y = a * 2
            buf.add_(1)
            return y
        return [f(lib.zeros(3)), f(buf), buf]
    assert not any("shares memory" in m for m in both(make))


def test_output_that_is_an_argument_is_that_tensor():
    for lib, comp in ((tg, tg.compile), (torch, torch.compile)):
        @comp
        def f(a):
            return a

        @comp
        def g(a):
            a.add_(1)
            return a

        @comp
        def h(a):
            b = a * 2
            return b, b
        x = lib.zeros(2, requires_grad=True)
        assert f(x) is x
        z = lib.zeros(2)
        assert g(z) is z and float(z[0]) == 1
        p, q = h(x)
        assert p is q, lib.__name__


def test_value_of_a_tensor_written_in_the_function_read_in_python():
    # BatchNorm with momentum=None reads float(num_batches_tracked) after its add_(1): the
    # trace may not bake in the value from before the write
    def make(lib, comp):
        bn = lib.nn.BatchNorm1d(3)
        bn.momentum = None
        cm = comp(bn)
        x = lib.tensor([[1., 2., 3.], [4., 0., 6.], [1., 1., 1.]])
        out = []
        for i in range(3):
            out += [cm(x * (i + 1)), bn.running_mean.clone(), bn.running_var.clone()]
        return out
    both(make)

    def make2(lib, comp):
        count = lib.zeros(())

        @comp
        def f(x):
            count.add_(1)
            return x * count.item()
        return [f(lib.ones(2)) for _ in range(3)] + [count]
    both(make2)


VIEWS = {
    "view": lambda lib, x: x.view(-1), "getitem": lambda lib, x: x[0], "t": lambda lib, x: x.t(),
    "slice": lambda lib, x: x[:, 1:], "diagonal": lambda lib, x: x.diagonal(),
    "tuple": lambda lib, x: (x[0], x[1], x * 2), "no_grad": None,
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_output_that_views_an_argument_is_a_view_of_it(name):
    # an in-place op on the output reaches the argument and its autograd graph, as in torch
    def make(lib, comp):
        fn = VIEWS[name]
        if fn is None:
            def f(x):
                with lib.no_grad():
                    return x[0]
        else:
            def f(x):
                return fn(lib, x)
        f = comp(f)
        w = lib.tensor([[1., 2., 3.], [4., 5., 6.]], requires_grad=True)
        out = []
        x = w * 1
        y = f(x)
        y = y if isinstance(y, tuple) else (y,)
        try:
            y[0].mul_(3)
            out.append(lib.zeros(()))
        except RuntimeError:          # a view made under no_grad, changed in place with grad on
            out.append(lib.ones(()))
        (x * x).sum().backward()
        out += [x, w.grad]
        plain = lib.tensor([[1., 2., 3.], [4., 5., 6.]])
        z = f(plain)
        (z if not isinstance(z, tuple) else z[0]).add_(100)
        return out + [plain]
    both(make)


@pytest.mark.parametrize("write", ["t_mul", "diag_fill", "chain", "relu_", "two_views", "scatter"])
def test_view_returned_after_its_base_was_written_inside(write):
    def make(lib, comp):
        ops = {"t_mul": lambda x: x.t().mul_(2), "diag_fill": lambda x: x.diagonal().fill_(7),
               "chain": lambda x: x[1:].t()[0].sub_(5), "relu_": lambda x: x.sub_(3).relu_(),
               "two_views": lambda x: (x[0].mul_(10), x[:, 0].add_(1)),
               "scatter": lambda x: x.scatter_(1, lib.tensor([[0], [1], [2]]), 100.0)}

        @comp
        def f(a):
            x = a * 1
            v = x[1]              # taken before the write: sees it, as a view does
            ops[write](x)
            return x, v
        out = []
        for scale in (1, 2):
            out += list(f(lib.arange(9.0).reshape(3, 3) * scale))
        return out
    both(make)


ALIASING = {
    # each returns a tensor that torch makes fresh: changing it in place must not reach x or another call's result
    "flip": lambda lib, x: x.flip(0),
    "t_contiguous": lambda lib, x: x.t().contiguous(),
    "empty_like_copy_": lambda lib, x: lib.empty_like(x).copy_(x * 3),
    "empty_copy_": lambda lib, x: lib.empty(3, 3).copy_(x),
    "tensor_add_": lambda lib, x: lib.tensor([1.0, 2.0, 3.0]).add_(x[0]),
    "arange_mul_": lambda lib, x: lib.arange(3.0).mul_(x[1]),
}


@pytest.mark.parametrize("name", list(ALIASING))
def test_fresh_results_share_no_memory(name):
    def make(lib, comp):
        f = comp(lambda x: ALIASING[name](lib, x))
        x = lib.tensor(np.arange(9.0, dtype=np.float32).reshape(3, 3))
        a = f(x)
        b = f(x * 2)
        a.add_(100)
        return [x, a, b]
    both(make)


def test_in_place_after_contiguous_of_a_transposed_view():
    # contiguous() of a transposed view is a copy: writes to it leave the base alone; of a
    # contiguous view it is the view itself: writes reach the base (as in torch)
    def make(lib, comp):
        @comp
        def f(a):
            x = a * 1
            y = x.t().contiguous()
            y.mul_(2)
            z = x[1:].contiguous()
            z.add_(100)
            return x, y, z
        return list(f(lib.arange(9.0).reshape(3, 3)))
    both(make)

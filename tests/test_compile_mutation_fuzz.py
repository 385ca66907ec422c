"""Views and in-place writes inside `tracegrad.compile`, against eager tracegrad and torch.

The regression tests below each name a bug that random programs of views and in-place ops
found; the random programs themselves follow them."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _eager_and_compiled(f, make_args):
    """f(lib, *args) run by torch, eager tracegrad and compiled tracegrad on fresh arguments:
    (torch's outputs and arguments after, eager's, compiled's, warnings of the compiled call)."""
    res = []
    for lib, run in ((torch, None), (tg, None), (tg, "compiled")):
        args = make_args(lib)
        fn = (lambda *a: f(lib, *a)) if run is None else tg.compile(lambda *a: f(tg, *a))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = fn(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        res.append(([o.detach().numpy().copy() for o in outs], [a.detach().numpy().copy() for a in args],
                    [str(m.message) for m in w]))
    return res


def _assert_same(res):
    (t_outs, t_args, _), (e_outs, e_args, _), (c_outs, c_args, _) = res
    for a, b, c in zip(t_outs + t_args, e_outs + e_args, c_outs + c_args):
        np.testing.assert_allclose(b, a, rtol=1e-6)
        np.testing.assert_array_equal(c, b)


@pytest.mark.parametrize("piece", ["unbind", "split", "chunk", "split_sizes"])
def test_write_through_a_piece_of_split_or_unbind_reaches_its_base(piece):
    """split/chunk/unbind return several views; a write through one of them inside a compiled
    function was lost: the base and the argument kept their old values ([1, 2, 3, 4] where
    eager gives [1, 2, -4.5, 4])."""
    take = {"unbind": lambda x: x.unbind(0)[2], "split": lambda x: x.split(2)[1],
            "chunk": lambda x: x.chunk(2)[1], "split_sizes": lambda x: x.split([1, 2, 1])[1]}[piece]

    def f(lib, x, w):
        take(x).mul_(-1.5)                  # an argument, written through the piece
        y = w * 1
        p = take(y)
        p += 10                             # an intermediate
        with lib.no_grad():
            take(y.t().t()).clamp_(max=11.5)    # under no_grad: the pieces are detached views
        return x * 1, y, p
    make = lambda lib: (lib.tensor([1., 2., 3., 4.]), lib.tensor([1., 2., 3., 4.], dtype=lib.float64))
    _assert_same(_eager_and_compiled(f, make))


@pytest.mark.parametrize("case", ["written", "base_written"])
def test_piece_of_split_that_requires_grad_raises_as_eager(case):
    """An in-place op on an output of split that requires grad, or a read of one after its base
    was written in place, raises torch's error; compiled gave a number (it now runs eagerly,
    with a warning, and raises)."""
    def f(lib, x):
        y = x * 1
        a, b = y.split(2)
        (b if case == "written" else y).mul_(2)
        return b * 1
    for lib, fn in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="output of a function that returns multiple views"):
                fn(lib.tensor([1., 2., 3., 4.], requires_grad=True))


def test_view_of_a_view_of_a_view_sees_a_write_to_the_root():
    """A view re-taken from its written base got a new value but kept its generation, so the
    views taken of it were not taken again: c = y[0:2].t()[0] read after y.add_(1) gave the
    old [1, 3] in compiled code, eager [2, 4]. The same through a view taken under no_grad."""
    def f(lib, x):
        y = x * 1
        c = y[0:2].t()[0]
        v = x.unsqueeze(0)[0]
        with lib.no_grad():
            w = v.t()
        y.add_(1)
        v += 1
        w.mul_(10)
        return c * 1, y
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.tensor([[1., 2.], [3., 4.]]),)))


def _saved_then_written_mul(lib, x):
    a = x * -1 + 0.5
    b = x * a                   # mul saves a for x's gradient
    a.mul_(-1.5)
    return b


def _saved_then_written_exp(lib, x):
    y = x.exp()                 # exp saves its result
    y.add_(1)
    return y


def _saved_then_written_through_a_view(lib, x):
    a = x * 2
    b = a.sin()                 # sin saves a
    a[0].zero_()                # a view of a, written: a's version moves
    return b


def _saved_then_written_param(lib, x, w):
    y = x * w                   # mul saves w for x's gradient
    with lib.no_grad():
        w.add_(1.0)
    return y


def _saved_then_written_by_a_write_that_reads_the_saving_op(lib, x):
    a = x * 1
    b = a * a                   # saves a; the write below reads b
    a.add_(b)
    return a


def _saved_then_written_by_setitem_add(lib, x):
    a = x * 1
    s = a.sin()                 # saves a
    a[:] += s                   # x[k] += y: a getitem, an add_, a setitem
    return s


@pytest.mark.parametrize("f", [_saved_then_written_mul, _saved_then_written_exp, _saved_then_written_through_a_view,
                               _saved_then_written_param, _saved_then_written_by_a_write_that_reads_the_saving_op,
                               _saved_then_written_by_setitem_add])
def test_backward_through_a_saved_value_written_in_place_raises_as_eager(f):
    """A value saved for the backward and then written in place makes eager's (and torch's)
    backward raise "modified by an inplace operation"; the trace, which keeps every value,
    gave a gradient from the old value instead (b = x * a; a.mul_(-1.5): x.grad was
    -x + 0.5 where torch raises). Such a call now runs eagerly, and its backward raises."""
    n = f.__code__.co_argcount - 1
    for lib, run in ((torch, lambda *a: f(torch, *a)), (tg, lambda *a: f(tg, *a)),
                     (tg, tg.compile(lambda *a: f(tg, *a)))):
        args = [lib.tensor([1., 2., 3.], requires_grad=True) for _ in range(n)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = run(*args)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_a_saved_value_written_where_no_backward_goes_through_it_still_compiles():
    """Only a backward through the op that saved the value raises: in-place ops that save their
    own result (exp_), read their old value (clamp_), or write a value whose saving op the
    outputs do not reach, compile, with eager's gradients and no fallback."""
    def f(lib, x):
        y = x * 2
        y.exp_()
        z = x * 1
        z.clamp_(-1.5, 2.5)
        a = x * 2
        b = a * a               # not returned: its backward is never run
        a.add_(1)
        return y * 1, z * z, a * 3
    grads = []
    for lib, run in ((torch, None), (tg, None), (tg, "compiled")):
        fn = (lambda x: f(lib, x)) if run is None else tg.compile(lambda x: f(tg, x))
        x = lib.tensor([0.5, 1., 2.], requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = fn(x)
        assert not w, [str(m.message) for m in w]
        sum(o.sum() for o in outs).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)
    np.testing.assert_allclose(grads[2], grads[1], rtol=1e-6)


def test_copy_from_a_tensor_that_broadcasts_to_a_larger_shape_raises_torchs_error():
    """x.copy_(src) where src and x broadcast only to a shape larger than x raised numpy's
    ValueError ("operands could not be broadcast together ...") where torch raises RuntimeError."""
    for lib in (torch, tg):
        for dst, src in (((1, 1), (2, 1)), ((2, 1, 1), (2, 2, 1))):
            with pytest.raises(RuntimeError, match=r"output with shape .* doesn't match the broadcast shape"):
                lib.zeros(dst).copy_(lib.ones(src))
        x = lib.zeros(2, 2, 1)
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            x[:, 0:1].copy_(x)


def test_setitem_on_a_0_dim_value_that_the_program_holds_as_a_numpy_scalar():
    """A 0-dim value (a sum, a sin of it) is a numpy scalar in the generated code, and the
    index_put kernel copied it with .copy(), which stays a scalar: `s[...] = 0.5` crashed the
    compiled call with "'numpy.float32' object does not support item assignment"."""
    def f(lib, x):
        s = x.sum().sin()
        s[...] = 0.5
        t = x.sum(0)
        with lib.no_grad():
            t[...] += 1.5
        return s * 2, t * 1
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.tensor([1., 2.]),)))


def test_mT_of_a_0_dim_tensor_is_the_identity_view_as_torchs():
    """torch's 0-dim x.mT is x (a view, with a deprecation warning); tracegrad raised
    "only supported on matrices ... Got 1-D tensor"."""
    def f(lib, x):
        y = x * 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = y.mT
        v.add_(1)
        return y, v * 1
    _assert_same(_eager_and_compiled(f, lambda lib: (lib.tensor(3.0),)))


def test_detach_of_a_view_of_an_argument_requires_no_grad():
    """An output x[:, :1].detach() was taken again from the argument as if it were a view made
    under no_grad (which in torch requires grad): compiled gave requires_grad=True where eager
    and torch give False, and a backward from it ran silently where eager raises. It still
    shares the argument's memory."""
    def f(lib, x):
        with lib.no_grad():
            n = x[:, 0:1]
        return x[:, 0:1].detach(), x.t().detach()[0], n, x[:, 1:0].detach()
    got = []
    for lib, fn in ((torch, lambda x: f(torch, x)), (tg, lambda x: f(tg, x)), (tg, tg.compile(lambda x: f(tg, x)))):
        x = lib.tensor([[1., 2.], [3., 4.]], requires_grad=True)
        outs = fn(x)
        with lib.no_grad():
            x.mul_(10)
        got.append([(o.requires_grad, o.detach().numpy().tolist()) for o in outs])
    assert got[1] == got[0]
    assert got[2] == got[1]


def test_result_of_an_index_tensor_is_contiguous_so_reshape_views_it():
    """x[:, idx] came out in numpy's layout (the indexed dim first in memory), not torch's
    contiguous one: is_contiguous() was False, strides (1, 3, 1) for torch's (3, 1, 1), and
    y.reshape(-1) copied, so y.fill_(0) left it at 9.0 where torch's sum is 0."""
    for lib in (torch, tg):
        x = lib.ones(3, 4, 1)
        y = x[:, lib.tensor([-4, 0, 3])]
        r = y.reshape(-1)
        y.fill_(0)
        assert y.is_contiguous() and y.stride() == (3, 1, 1)
        assert r.sum().item() == 0.0

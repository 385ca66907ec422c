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

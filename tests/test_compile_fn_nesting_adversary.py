"""Custom autograd.Function, hooks and nesting inside and around @tracegrad.compile, as a careless
user writes them: each program runs in torch (the oracle), in eager tracegrad and compiled, and
the values, gradients, hook calls and errors must agree."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _np(v):
    if isinstance(v, (tuple, list)):
        return [_np(x) for x in v]
    if isinstance(v, (torch.Tensor, tg.Tensor)):
        return np.array(v.detach().numpy(), copy=True)
    return v


def _same(a, b, tol):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y, tol)
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert a is not None and b is not None, (a, b)
        assert np.shape(a) == np.shape(b), (a, b)
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    else:
        assert a == b, (a, b)


def three(body, tol=1e-12, quiet=True):
    """body(m, comp): the program with module m (torch or tracegrad) and comp (identity, or
    tracegrad.compile). Returns the three results after checking that they agree."""
    out = {}
    for name, m, comp in (("torch", torch, lambda f, **k: f), ("eager", tg, lambda f, **k: f),
                          ("compiled", tg, lambda f, **k: tg.compile(f, **k))):
        with warnings.catch_warnings():
            if quiet and name == "compiled":
                warnings.simplefilter("error")
            out[name] = _np(body(m, comp))
    _same(out["torch"], out["eager"], tol)
    _same(out["torch"], out["compiled"], tol)
    return out


def X(m, data=(0.3, -1.2, 0.7, 2.0), requires_grad=True):
    return m.tensor(list(data), dtype=m.float64, requires_grad=requires_grad)


def lin(m):
    mod = m.nn.Linear(3, 2).double()
    with m.no_grad():
        mod.weight.copy_(m.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]], dtype=m.float64))
        mod.bias.copy_(m.tensor([0.1, -0.1], dtype=m.float64))
    return mod


# -- custom Functions --------------------------------------------------------------------------------

def test_one_tensor_returned_twice_sends_every_gradient_to_the_last_slot():
    """forward returning (y, y): torch (and eager) make it one output whose history is the
    second slot's, so backward gets g1 = 0 and g2 = the sum of both uses' gradients. Compiled
    gave each slot its own gradient: x.grad [11.4, -30.6, 22.6, 59.0] instead of torch's
    [18.9, -23.1, 30.1, 66.5]."""
    def body(m, comp):
        class Twice(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                return y, y

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 7
        x = X(m)

        def fn(x):
            a, b = Twice.apply(x)
            return (a * 1.5 + b * b).sum()
        f = comp(fn, fullgraph=True)
        y = f(x)
        y.backward()
        return y, x.grad
    three(body)

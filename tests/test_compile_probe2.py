"""Compiled calls probed as a hostile user would, second round: what the derivative of a
create_graph backward goes through. Each case runs the same code under torch (the reference)
and tracegrad.compile (its chains off: each call runs as written), in float64."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-11, atol=1e-12)


def compiled(f):
    c = tg.compile(f)
    c._chains = False
    return c


@pytest.mark.parametrize("outputs", ["one", "two"])
def test_a_create_graph_gradient_depends_on_the_outputs_eager_saves(outputs):
    """exp's derivative reads its result: torch's create_graph gradient of exp(x) is a function
    of that result, so a derivative of it with respect to the result is defined (1 for g = y),
    and with a second output used too, adds that path to the total. The compiled create_graph
    backward recomputed the result from the inputs: 'not used in the graph' for the first, and
    another number for the second (d/de missed the term through e)."""
    xs = np.random.default_rng(60).standard_normal(4)
    res = []
    for lib, wrap in ((tg, compiled), (torch, lambda f: f)):
        x = lib.tensor(xs, requires_grad=True)
        if outputs == "one":
            y = wrap(lambda x: lib.exp(x))(x)
            (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
            res.append(lib.autograd.grad(g.sum(), [y, x]))
        else:
            y, e = wrap(lambda x: ((lib.tanh(x) ** 3).sum(), lib.exp(x * 0.3)))(x)
            (g,) = lib.autograd.grad(y, x, create_graph=True)
            (h,) = lib.autograd.grad((g * e).sum(), x, create_graph=True)
            res.append(lib.autograd.grad(h.sum(), [e, x]))
    for a, b in zip(*res):
        close(a, b)


def test_a_hook_on_an_output_eager_saves_runs_in_the_backward_of_its_create_graph_gradient():
    xs = np.random.default_rng(61).standard_normal(5)
    res = []
    for lib, wrap in ((tg, compiled), (torch, lambda f: f)):
        x = lib.tensor(xs, requires_grad=True)
        y = wrap(lambda x: lib.sigmoid(x * 1.5))(x)
        seen = []
        y.register_hook(lambda gr: seen.append(gr.detach().numpy().copy()))
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        seen.clear()                            # (the first backward's call)
        (g * g).sum().backward()
        res.append((seen, x.grad))
    (s1, g1), (s2, g2) = res
    assert len(s1) == len(s2) == 1
    np.testing.assert_allclose(s1[0], s2[0], rtol=1e-11)
    close(g1, g2)

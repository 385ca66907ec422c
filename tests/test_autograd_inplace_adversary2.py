"""In-place ops against saved values, as a careless user writes them, second round: tracegrad
(eager and compiled) against torch.

Each test names the wrong answer it guards against."""
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

STALE = "modified by an inplace operation"


def _grad_of(lib, fn, mode="plain"):
    """fn(a, w) on a fresh a (no grad) and w (float64, requires grad): a after the call and w's
    gradient of the two outputs, where fn writes a in place after reading it."""
    a = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64)
    w = lib.tensor([0.3, -0.7, 0.2], dtype=lib.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = fn(a, w)
    o1, o2 = outs
    if mode == "plain":
        g, = lib.autograd.grad((o1 * o1).sum() + o2, w)
    elif mode == "create_graph":
        g, = lib.autograd.grad((o1 * o1).sum(), w, create_graph=True)
        g, = lib.autograd.grad(g.sum(), w)
    else:                       # the gradient of one output alone
        g, = lib.autograd.grad(o2, w)
    return a.numpy().copy(), g.numpy().copy()


# -- a compiled call that writes an argument it also computed from --------------------------------
# The backward read the argument after the call had written it: a residual x[0] was a view of the
# argument (copied for the backward only after the write-back), and a backward that recomputes the
# forward (one output's gradient alone, create_graph) recomputed from the written values. Mutation
# fuzzer seed 7927: compiled gave w.grad [0.6225, 0.6225] (sigmoid(0.5)) where eager and torch give
# [0.5, 0.5].

WRITES_WHAT_IT_READ = {
    "element_then_element_written": lambda L, a, w: (lambda e: (e.sigmoid_(), (a[0] * 1) * w)[1])(a[0]),
    "view_kept_then_written": lambda L, a, w: (lambda e, r: (e.sigmoid_(), r * w)[1])(a[0], a[0] * 1),
    "whole_then_written": lambda L, a, w: (lambda r: (a.sigmoid_(), r * w)[1])(a * 1),
    "row_of_it": lambda L, a, w: (lambda r: (a[1:].exp_(), r * w)[1])(a[:2].sum() * 1),
}


@pytest.mark.parametrize("mode", ["plain", "create_graph", "one_output"])
@pytest.mark.parametrize("case", sorted(WRITES_WHAT_IT_READ))
def test_compiled_call_that_writes_what_its_backward_reads_gives_eagers_gradient(case, mode):
    body = WRITES_WHAT_IT_READ[case]

    def f(L, a, w):
        y = body(L, a, w)
        return y, (y * w).sum()
    t_after, t_grad = _grad_of(torch, lambda a, w: f(torch, a, w), mode)
    for fn in (lambda a, w: f(tg, a, w), tg.compile(lambda a, w: f(tg, a, w))):
        for _ in range(2):                        # the first call and a cached one
            after, grad = _grad_of(tg, fn, mode)
            np.testing.assert_array_equal(after, t_after)
            np.testing.assert_allclose(grad, t_grad, rtol=1e-14, atol=1e-15)

"""Custom autograd.Function corners against torch: marks on inputs returned as they are,
and what backward then receives or returns."""
import pytest

import tracegrad as tg
from test_autograd_parity import same


def test_input_returned_as_is_and_marked_non_differentiable():
    def run(m):
        a = m.tensor([1., 2.], requires_grad=True)
        b = m.tensor([3., 4.])
        log = []

        class Pass(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.mark_non_differentiable(b)
                return a, b

            @staticmethod
            def backward(ctx, ga, gb):
                log.append((ga.tolist(), None if gb is None else gb.tolist()))
                return ga, gb

        x, y = Pass.apply(a, b)
        (x * y).sum().backward()
        return log, a.grad, x.requires_grad, y.requires_grad, y.grad_fn is None
    same(run)


def test_input_that_requires_grad_returned_as_is_and_marked_non_differentiable():
    def run(m):
        a = m.tensor([1., 2.], requires_grad=True)

        class Pass(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.mark_non_differentiable(a)
                return a

            @staticmethod
            def backward(ctx, g):
                return g

        y = Pass.apply(a)
        return y.requires_grad, y.is_leaf, y is a
    same(run)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("ret", ["grad_for_a_number_argument", "a_number_as_gradient", "none_for_the_number"])
def test_what_backward_returns_per_argument_is_checked_as_torch(ret, compiled):
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return {"grad_for_a_number_argument": (g * 2, m.ones(1)), "a_number_as_gradient": (3, None),
                        "none_for_the_number": (g * 2, None)}[ret]

        def f(x):
            return Scale.apply(x, 2.).sum()
        if compiled and m is tg:
            f = tg.compile(f)
        x = m.ones(2, requires_grad=True)
        f(x).backward()
        return x.grad
    same(run, expect=None)


CALLS = {
    "same_input_twice": lambda m, x: (x * x).grad_fn(m.ones(2)),
    "input_reached_through_the_other": lambda m, x: (x * (x * 2)).grad_fn(m.ones(2)),
    "non_leaf_twice": lambda m, x: ((x * 2) + (x * 2)).grad_fn(m.ones(2)),
    "multi_output": lambda m, x: m.cat([x, x]).split(2)[0].grad_fn(m.ones(2), m.ones(2) * 2),
    "wrong_count": lambda m, x: (x * x).grad_fn(m.ones(2), m.ones(2)),
    "not_a_tensor": lambda m, x: (x * x).grad_fn(3.0),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_calling_a_grad_fn_gives_its_own_rule_per_input(case):
    # x * x's MulBackward0 called with ones answers (x, x), as torch's: every path to x was summed
    same(lambda m: CALLS[case](m, m.tensor([1., 2.], requires_grad=True)), expect=None)


def test_calling_a_custom_functions_grad_fn_raises_as_torch():
    def run(m):
        class Twice(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        return Twice.apply(m.ones(2, requires_grad=True)).grad_fn(m.ones(2))
    same(run, expect="raised")


def test_node_names_as_torch():
    # name() of the nodes torch writes in C++ carries their namespace; once_differentiable's
    # node is torch's Error
    def run(m):
        x = m.ones(2, requires_grad=True)
        y = x * 1
        y[0] = 1.

        class Twice(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            @m.autograd.function.once_differentiable
            def backward(ctx, g):
                return g * 2
        g, = m.autograd.grad(Twice.apply(x), x, m.ones(2, requires_grad=True), create_graph=True)
        return [y.grad_fn.name(), (x * 2).grad_fn.next_functions[0][0].name(), (x * 2).grad_fn.name(),
                g.grad_fn.name(), type(g.grad_fn).__name__]
    same(run)


KW = {"number": lambda m, x: {"k": 3.}, "tensor_that_requires_grad": lambda m, x: {"k": m.ones(2, requires_grad=True)}}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("kw", sorted(KW))
def test_apply_with_keyword_arguments_as_torch(kw, compiled):
    # torch 2.13 passes them to forward and counts them as inputs after the positional ones
    # (needs_input_grad, one gradient each from backward); compiled, the call runs eagerly
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k=1.):
                ctx.needs = ctx.needs_input_grad
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g * 2, None

        def f(x):
            y = Scale.apply(x, **KW[kw](m, x))
            return y.sum(), y.grad_fn.needs
        if compiled and m is tg:
            f = tg.compile(f)
        x = m.ones(2, requires_grad=True)
        out, needs = f(x)
        out.backward()
        return out, needs, x.grad
    same(run)


def test_apply_with_keyword_arguments_and_setup_context():
    def run(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(x, k=1.):
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None
        x = m.ones(2, requires_grad=True)
        y = Scale.apply(x, k=3.)
        y.sum().backward()
        return y, x.grad, len(y.grad_fn.needs_input_grad)
    same(run)

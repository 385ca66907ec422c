"""In-place random fills (uniform_, normal_, bernoulli_, exponential_) on a tensor in the
graph, against torch: the values they replace get a zero gradient (the old grad_fn used to
stay and pass the gradient on), the grad_fn takes torch's name (CopySlices through a view),
the version moves, and a leaf that requires grad refuses them."""
import pytest

from test_autograd_parity import same, raises

FILLS = {"uniform_": (), "normal_": (), "bernoulli_": (0.5,), "exponential_": ()}


def _name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


@pytest.mark.parametrize("op", sorted(FILLS))
def test_random_fill_of_a_non_leaf_cuts_the_gradient(op):
    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], dtype=m.float64, requires_grad=True)
        y = x * 1
        getattr(y, op)(*FILLS[op])
        (y * 0 + y.detach() + y * 0).sum().backward()
        return x.grad, _name(y), y._version
    same(run)


@pytest.mark.parametrize("op", sorted(FILLS))
def test_random_fill_through_a_view_cuts_the_gradient_of_that_part(op):
    def run(m):
        x = m.tensor([[1., 2.], [3., 4.]], dtype=m.float64, requires_grad=True)
        y = x * 1
        v = y[0]
        getattr(v, op)(*FILLS[op])
        (y * 0 + 3 * y).sum().backward()
        return x.grad, _name(y), _name(v), y._version
    same(run)


@pytest.mark.parametrize("op", sorted(FILLS))
def test_random_fill_of_a_leaf_that_requires_grad_raises(op):
    def run(m):
        x = m.ones(2, requires_grad=True)
        getattr(x, op)(*FILLS[op])
    raises(run)

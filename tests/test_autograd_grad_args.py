"""autograd.grad / backward arguments against torch: gradients given as a list must be
tensors or None, fewer gradients than outputs raise torch's message and extra ones go
unused."""
import pytest

from test_autograd_parity import same


def _x(m):
    return m.ones(2, requires_grad=True)


CASES = {
    "number_in_grad_outputs": lambda m, x: m.autograd.grad([(x * 2).sum()], x, [2.0]),
    "number_in_grad_tensors": lambda m, x: m.autograd.backward([(x * 2).sum()], [3.0]),
    "fewer_grad_outputs": lambda m, x: m.autograd.grad([x * 2, x * 3], x, [m.ones(2)]),
    "fewer_grad_tensors": lambda m, x: m.autograd.backward([x * 2, x * 3], [m.ones(2)]),
    "extra_grad_outputs": lambda m, x: m.autograd.grad([(x * 2).sum()], x, [m.tensor(2.), None]),
    "extra_grad_tensors": lambda m, x: (m.autograd.backward([(x * 2).sum()], [m.tensor(2.), m.tensor(3.)]), x.grad),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_grad_and_backward_arguments(case):
    def run(m):
        r = CASES[case](m, _x(m))
        return list(r.values()) if isinstance(r, dict) else r
    same(run, expect=None)


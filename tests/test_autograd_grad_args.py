"""autograd.grad / backward arguments against torch: gradients given as a list must be
tensors or None, fewer gradients than outputs raise torch's message and extra ones go
unused, inputs given as a dict give a dict, only_inputs warns, set_grad_enabled's type error."""
import collections

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
    "dict_inputs": lambda m, x: sorted(m.autograd.grad((x * (x * 1) * 3).sum(), {"x": x, "w": x * 1},
                                                      allow_unused=True).items()),
    "dict_inputs_materialized": lambda m, x: m.autograd.grad((x * 3).sum(), {"x": x, "z": m.ones(1, requires_grad=True)},
                                                             materialize_grads=True),
    "other_mapping": lambda m, x: m.autograd.grad((x * 3).sum(), collections.OrderedDict(x=x)),
    "empty_dict": lambda m, x: m.autograd.grad((x * 3).sum(), {}),
    "set_grad_enabled_int": lambda m, x: m.set_grad_enabled(1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_grad_and_backward_arguments(case):
    def run(m):
        r = CASES[case](m, _x(m))
        return list(r.values()) if isinstance(r, dict) else r
    same(run, expect=None)


def test_only_inputs_false_warns_as_torch():
    import warnings

    def run(m):
        x = _x(m)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            g = m.autograd.grad((x * 2).sum(), x, only_inputs=False)
        return g, [(type(v.message).__name__, str(v.message)) for v in w]
    same(run)

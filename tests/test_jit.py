"""torch.jit over @tracegrad.compile: trace and script give a compiled callable that equals eager
(and torch's traced module) in values and gradients, runs the example once (its errors raise
there, as torch's tracer), and recompiles for inputs the example did not cover (a branch on a
shape) where torch's traced graph keeps the first path; the decorators leave functions alone;
TorchScript files are refused with a clear error."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def _pair():
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    g = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 2))
    g.load_state_dict({k: tg.tensor(v.tolist()) for k, v in t.state_dict().items()})
    return t, g


@pytest.mark.parametrize("how", ["trace", "script"])
def test_traced_module_equals_torchs_in_values_and_gradients(how):
    t, g = _pair()
    x = np.random.RandomState(1).randn(5, 3).astype(np.float32)
    tt = torch.jit.trace(t, torch.tensor(x)) if how == "trace" else torch.jit.script(t)
    gg = tg.jit.trace(g, tg.tensor(x)) if how == "trace" else tg.jit.script(g)
    yt, yg = tt(torch.tensor(x)), gg(tg.tensor(x))
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    yt.square().sum().backward()
    yg.square().sum().backward()
    for (n, p), q in zip(t.named_parameters(), g.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


def test_trace_runs_the_example_and_raises_its_errors():
    _, g = _pair()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        tg.jit.trace(g, tg.ones(1, 5))
    with pytest.raises(RuntimeError, match="example_kwarg_inputs or example_inputs must be provided"):
        tg.jit.trace(g)


def test_a_branch_the_example_did_not_take_is_followed():
    def f(x):
        return x * 2 if x.shape[0] > 2 else x - 1
    traced = tg.jit.trace(f, tg.ones(3))
    assert traced(tg.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert traced(tg.ones(2)).tolist() == [0.0, 0.0]          # (torch's traced graph gives [2., 2.])


def test_decorators_and_queries_leave_code_as_it_is():
    def f(x):
        return x + 1
    assert tg.jit.ignore(f) is f and tg.jit.ignore(drop=True)(f) is f and tg.jit.unused(f) is f
    assert tg.jit.export(f) is f and tg.jit.annotate(list, [1]) == [1]
    assert tg.jit.is_scripting() is False and tg.jit.is_tracing() is False
    assert tg.jit.wait(tg.jit.fork(f, tg.ones(2))).tolist() == [2.0, 2.0]


def test_torchscript_files_are_refused(tmp_path):
    _, g = _pair()
    with pytest.raises(NotImplementedError, match="state_dict"):
        tg.jit.save(tg.jit.script(g), str(tmp_path / "m.pt"))
    with pytest.raises(NotImplementedError, match="TorchScript"):
        tg.jit.load(str(tmp_path / "m.pt"))

"""nn.utils.weight_norm and remove_weight_norm against torch (float64): the parameters it makes,
their shapes for each dim, outputs and gradients, training steps, errors; under compile the
module runs eagerly with a warning (its hook sets the module's weight)."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def setp(m, L):
    with L.no_grad():
        for i, (n, p) in enumerate(sorted(m.named_parameters())):
            p.copy_(L.tensor(np.linspace(-1, 1.3, p.numel()).reshape(p.shape) * (i + 1), dtype=p.dtype))


def normed(L, kind, dim):
    m = (L.nn.Linear(3, 2) if kind == "linear" else L.nn.Conv2d(2, 4, 3)).double()
    setp(m, L)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return L.nn.utils.weight_norm(m, dim=dim)


def outcome(fn):
    try:
        return fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)[:100]


@pytest.mark.parametrize("kind,dim", [("linear", 0), ("linear", 1), ("linear", None), ("conv", 0), ("conv", 1),
                                      ("conv", 3), ("conv", None), ("conv", -1)])
def test_weight_norm_matches_torch(kind, dim):
    got = []
    for L in (tg, torch):
        m = normed(L, kind, dim)
        x = L.ones(2, 3, dtype=L.float64) if kind == "linear" else L.ones(1, 2, 4, 4, dtype=L.float64)
        y = m(x)
        y.pow(2).sum().backward()
        got.append((y.detach().numpy(), sorted(n for n, _ in m.named_parameters()), sorted(m.state_dict()),
                    {n: p.grad.numpy() for n, p in m.named_parameters()}, tuple(m.weight_g.shape)))
    (y0, n0, s0, g0, sh0), (y1, n1, s1, g1, sh1) = got
    assert (n0, s0, sh0) == (n1, s1, sh1)
    np.testing.assert_allclose(y0, y1, rtol=1e-12)
    for n in g1:
        np.testing.assert_allclose(g0[n], g1[n], rtol=1e-10, atol=1e-12)


def test_training_steps_and_remove_match_torch():
    got = []
    for L in (tg, torch):
        m = normed(L, "linear", 0)
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            m(L.ones(2, 3, dtype=L.float64)).pow(2).sum().backward()
            opt.step()
        L.nn.utils.remove_weight_norm(m)
        got.append((m(L.ones(1, 3, dtype=L.float64)).detach().numpy(), sorted(n for n, _ in m.named_parameters()),
                    type(m.weight).__name__))
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-12)
    assert got[0][1:] == got[1][1:] == (["bias", "weight"], "Parameter")


def test_errors_and_warning_are_torchs():
    for L in (tg, torch):
        with pytest.warns(FutureWarning, match="weight_norm` is deprecated"):
            L.nn.utils.weight_norm(L.nn.Linear(2, 2))
    cases = {
        "twice": lambda L: L.nn.utils.weight_norm(normed(L, "linear", 0)),
        "remove twice": lambda L: L.nn.utils.remove_weight_norm(L.nn.utils.remove_weight_norm(normed(L, "linear", 0))),
        "no such parameter": lambda L: L.nn.utils.weight_norm(L.nn.Linear(2, 2), name="nothere"),
    }
    for name, fn in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            got, want = outcome(lambda: fn(tg)), outcome(lambda: fn(torch))
        assert got[0] == want[0] and got[1].split(" in ")[0] == want[1].split(" in ")[0], name


def test_compiled_module_with_weight_norm_runs_eagerly_with_a_warning():
    m = normed(tg, "linear", 0)
    cm = tg.compile(m)
    x = tg.ones(4, 3, dtype=tg.float64)
    with pytest.warns(UserWarning, match="weight_norm's hook sets Linear.weight"):
        a = cm(x)
    np.testing.assert_array_equal(a.detach().numpy(), m(x).detach().numpy())
    with tg.no_grad():
        m.weight_g.mul_(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = cm(x)
    np.testing.assert_array_equal(b.detach().numpy(), m(x).detach().numpy())
    assert m.weight._data is not None             # (the attribute holds a value, not one of a trace)

"""torch's surface, eighth round: F.normalize's out=, the hook form of spectral_norm, the
deterministic-algorithms flags, adjoint, unique_consecutive, random_, untyped_storage and the
grad_fn names of composites, against torch (float64)."""
import collections

import numpy as np
import pytest
import torch

import tracegrad as tg

X = [[0.5, -1.0, 2.0], [3.0, 0.25, -0.75]]


def outcome(fn):
    try:
        return fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("dim,p", [(0, 2.0), (1, 2.0), (-1, 1.0)])
def test_normalize_writes_out_and_returns_it(dim, p):
    got = []
    for L in (tg, torch):
        out = L.zeros(2, 3, dtype=L.float64)
        r = L.nn.functional.normalize(L.tensor(X, dtype=L.float64), p=p, dim=dim, out=out)
        assert r is out
        got.append(out.numpy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-14)


def test_normalize_out_of_a_tensor_that_requires_grad_raises_as_torchs():
    got = [outcome(lambda: L.nn.functional.normalize(L.tensor(X, dtype=L.float64, requires_grad=True),
                                                     out=L.zeros(2, 3, dtype=L.float64))) for L in (tg, torch)]
    assert got[0][0] == got[1][0] == "RuntimeError"
    assert "out=... arguments don't support automatic differentiation" in got[0][1]


def test_normalize_out_under_compile_writes_out_at_every_call():
    out = tg.zeros(2, 3, dtype=tg.float64)

    @tg.compile
    def f(x):
        tg.nn.functional.normalize(x, dim=1, out=out)
        return out * 1

    for scale in (1.0, 3.0):
        x = np.array(X) * scale + np.arange(3)
        r = f(tg.tensor(x))
        want = torch.nn.functional.normalize(torch.tensor(x), dim=1).numpy()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-14)
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-14)


# -- nn.utils.spectral_norm, the hook form ----------------------------------------------------------------------

def sn_linear(L, shape=(4, 3), **kw):
    m = L.nn.Linear(shape[1], shape[0]).double()
    with L.no_grad():
        m.weight.copy_(L.tensor(np.random.default_rng(1).standard_normal(shape)))
        m.bias.copy_(L.tensor(np.linspace(-0.2, 0.3, shape[0])))
    return L.nn.utils.spectral_norm(m, **kw)


def same_u_v(a, b):
    """(power iteration starts from random u and v: torch's are copied into tracegrad's module)"""
    with tg.no_grad():
        a.weight_u.copy_(tg.tensor(b.weight_u.numpy()))
        a.weight_v.copy_(tg.tensor(b.weight_v.numpy()))


@pytest.mark.parametrize("shape,kw", [((4, 3), {}), ((4, 3), dict(dim=1)), ((3, 5), dict(n_power_iterations=3))])
def test_spectral_norm_hook_trains_evaluates_and_removes_as_torchs(shape, kw):
    a, b = sn_linear(tg, shape, **kw), sn_linear(torch, shape, **kw)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert sa._metadata == sb._metadata
    same_u_v(a, b)
    x = np.linspace(-1, 1, shape[1] * 2).reshape(2, shape[1])
    got = []
    for L, m in ((tg, a), (torch, b)):
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            m(L.tensor(x)).pow(2).sum().backward()
            opt.step()
        m.eval()
        y, y2 = m(L.tensor(x)), m(L.tensor(x))
        vals = [y.detach().numpy(), y2.detach().numpy(), m.weight_u.numpy(), m.weight_v.numpy(),
                m.weight.detach().numpy()]
        L.nn.utils.remove_spectral_norm(m)
        vals.append(m.weight.detach().numpy())
        got.append((vals, list(m.state_dict()), type(m.weight).__name__, m._state_dict_hooks == {}))
    for x_, y_ in zip(got[0][0], got[1][0]):
        np.testing.assert_allclose(x_, y_, rtol=1e-10, atol=1e-13)
    assert got[0][1:] == got[1][1:] == (["bias", "weight"], "Parameter", True)


def test_spectral_norm_hook_loads_a_state_dict_of_version_0():
    # (weight and weight_u saved, no weight_v: v is solved for from them)
    b = sn_linear(torch)
    b(torch.ones(1, 3, dtype=torch.float64))
    old = {k: v for k, v in b.state_dict().items() if k != "weight_v"}
    old["weight"] = b.weight.detach()
    got = []
    for L in (tg, torch):
        sd = collections.OrderedDict((k, L.tensor(v.numpy())) for k, v in old.items())
        sd._metadata = {"": {"version": 1}}
        m = sn_linear(L)
        r = m.load_state_dict(sd)
        got.append((str(r), m.weight_v.numpy()))
    assert got[0][0] == got[1][0] == "<All keys matched successfully>"
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-9)


def test_spectral_norm_hook_errors_are_torchs():
    cases = [lambda L: L.nn.utils.spectral_norm(L.nn.utils.spectral_norm(L.nn.Linear(2, 2))),
             lambda L: L.nn.utils.remove_spectral_norm(L.nn.Linear(2, 2)),
             lambda L: L.nn.utils.spectral_norm(L.nn.Linear(2, 2), n_power_iterations=0),
             lambda L: L.nn.utils.spectral_norm(L.nn.Linear(2, 2, bias=False), name="bias")]
    for fn in cases:
        got, want = outcome(lambda: fn(tg)), outcome(lambda: fn(torch))
        assert got[0] == want[0] and got[1].split(" in ")[0] == want[1].split(" in ")[0]


def test_spectral_norm_hook_compiled_runs_eagerly_with_a_warning_and_steps_u_once():
    a, b = sn_linear(tg), sn_linear(torch)
    same_u_v(a, b)
    ca = tg.compile(a)
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    with pytest.warns(UserWarning, match="spectral_norm's hook sets Linear.weight"):
        y = ca(tg.tensor(x))
    for i in range(2):
        if i:
            y = ca(tg.tensor(x))
        np.testing.assert_allclose(y.detach().numpy(), b(torch.tensor(x)).detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(a.weight_u.numpy(), b.weight_u.numpy(), rtol=1e-12)
    assert a.weight._data is not None             # (the attribute holds a value, not one of a trace)

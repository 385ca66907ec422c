"""nn.LazyLinear and the uninitialized parameters, against torch: the first forward reads
in_features from the input, materializes and initializes the same Parameter objects (an
optimizer made before it trains them) and turns the module into a Linear; a state dict with
shapes materializes them; reading an uninitialized parameter raises torch's errors; compiled,
the first call runs eagerly and the next ones are compiled."""
import copy
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

X = np.random.default_rng(0).uniform(-1, 1, (5, 3))


def _error(f):
    try:
        f()
    except Exception as e:      # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


def test_first_forward_materializes_and_trains_as_torch():
    res = {}
    for L in (torch, tg):
        m = L.nn.LazyLinear(4, dtype=L.float64)
        before = [repr(m), repr(m.weight), type(m).__name__, [(k, repr(v)) for k, v in m.state_dict().items()]]
        params = list(m.parameters())
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        x = L.tensor(X, dtype=L.float64)
        m(x)
        with L.no_grad():                      # (the initializations' random streams differ): torch's values
            for k, p in enumerate(m.parameters()):
                p.copy_(L.tensor(np.linspace(-0.5, 0.5, p.numel()).reshape(tuple(p.shape)), dtype=L.float64))
        for _ in range(2):
            opt.zero_grad()
            (m(x) ** 2).mean().backward()
            opt.step()
        res[L] = before + [repr(m), type(m).__name__, m.in_features, all(a is b for a, b in zip(params, m.parameters())),
                           type(m.weight).__name__, [p.detach().numpy().round(12).tolist() for p in m.parameters()]]
    assert res[tg] == res[torch]


def test_load_state_dict_materializes_as_torch():
    res = {}
    for L in (torch, tg):
        src = L.nn.Linear(5, 4)
        with L.no_grad():
            src.weight.fill_(0.25)
            src.bias.fill_(-1.0)
        m = L.nn.LazyLinear(4)
        m.load_state_dict(src.state_dict())
        first = [repr(m), type(m.weight).__name__, tuple(m.weight.shape), m.weight.detach().numpy().tolist()]
        y = m(L.ones(2, 5))
        res[L] = first + [repr(m), y.detach().numpy().tolist()]
    assert res[tg] == res[torch]


def test_conversions_copies_and_options_before_the_first_forward():
    for L in (torch, tg):
        m = L.nn.LazyLinear(3, bias=False).double()
        m(L.ones(2, 4, dtype=L.float64))
        assert m.weight.dtype == L.float64 and m.bias is None and tuple(m.weight.shape) == (3, 4)
        c = copy.deepcopy(L.nn.LazyLinear(2))
        assert repr(c.weight) == "<UninitializedParameter>"
        assert tuple(c(L.ones(1, 6)).shape) == (1, 2)


@pytest.mark.parametrize("case", range(5))
def test_uninitialized_errors_as_torch(case):
    def call(L):
        m = L.nn.LazyLinear(4)
        return [lambda: m.weight + 1, lambda: m.weight.shape, lambda: m(L.ones(())), lambda: m.weight.dim(),
                lambda: m.weight.numel()][case]()
    want, got = _error(lambda: call(torch)), _error(lambda: call(tg))
    assert want is not None and got is not None and got[0] == want[0], (got, want)
    if case == 1:
        assert got == want


def test_uninitialized_metadata_as_torch():
    res = []
    for L in (torch, tg):
        w = L.nn.LazyLinear(4).weight
        res.append((tuple(w.size()), w.ndim, str(w.dtype), w.requires_grad, w.is_leaf, str(w.device), repr(w)))
    assert res[1] == res[0]


def test_compiled_lazy_module_runs_its_first_call_eagerly_then_compiles():
    m = tg.nn.Sequential(tg.nn.LazyLinear(4), tg.nn.ReLU(), tg.nn.LazyLinear(2))
    f = tg.compile(m)
    x = tg.tensor(X, dtype=tg.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ys = [f(x) for _ in range(3)]
    assert len(w) == 1 and "lazy module LazyLinear makes its parameters in its first forward" in str(w[0].message)
    assert [type(s).__name__ for s in m] == ["Linear", "ReLU", "Linear"]
    want = m(x).detach().numpy()
    for y in ys:
        np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-6)
    assert type(ys[2].grad_fn).__name__ == "CompiledFunctionBackward"

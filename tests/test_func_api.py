"""torch.func's functional_call and the reverse-mode transforms (grad, grad_and_value, vjp,
jacrev), and torch.nn.utils.stateless.functional_call, against torch: values, the results'
structure, requires_grad, errors, nesting and a MAML inner step's second-order gradient."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)
X = R.uniform(-1, 1, 3)
Y = R.uniform(-1, 1, 3)


def both(f):
    """f(L) for torch and tracegrad, as trees of arrays (and requires_grad flags)."""
    return [_arrays(f(L)) for L in (torch, tg)]


def _arrays(x):
    if isinstance(x, dict):
        return {k: _arrays(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_arrays(v) for v in x)
    if isinstance(x, (torch.Tensor, tg.Tensor)):
        return ("T", x.detach().numpy().copy(), bool(x.requires_grad))
    return x


def assert_same(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for k in want:
            assert_same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_same(g, w)
    elif isinstance(want, np.ndarray):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
        assert np.array_equal(np.signbit(got), np.signbit(want)) or not np.all(want == 0)
    else:
        assert got == want, (got, want)


def t(L, a, req=False):
    return L.tensor(a, dtype=L.float64, requires_grad=req)


CASES = {
    "grad": lambda L: L.func.grad(lambda x: (x ** 2).sin().sum())(t(L, X)),
    "argnums tuple": lambda L: L.func.grad(lambda x, y: (x * y.exp()).sum(), argnums=(0, 1))(t(L, X), t(L, Y)),
    "argnums -1": lambda L: L.func.grad(lambda x, y: (x * y.exp()).sum(), argnums=-1)(t(L, X), t(L, Y)),
    "unused is zeros": lambda L: L.func.grad(lambda x, y: y.sum(), argnums=(0, 1))(t(L, X), t(L, Y)),
    "constant output": lambda L: L.func.grad(lambda x: L.ones((), dtype=L.float64))(t(L, X)),
    "dict tree": lambda L: L.func.grad(lambda p: (p["a"] * p["b"][0]).sum())({"a": t(L, X), "b": [t(L, Y)]}),
    "has_aux": lambda L: L.func.grad(lambda x: ((x ** 3).sum(), {"sq": x * x}), has_aux=True)(t(L, X)),
    "grad_and_value": lambda L: L.func.grad_and_value(lambda x: x.tanh().sum())(t(L, X)),
    "grad_and_value aux": lambda L: L.func.grad_and_value(lambda x: (x.sum(), x), has_aux=True)(t(L, X)),
    "nested": lambda L: L.func.grad(L.func.grad(lambda x: (x ** 3).sum()))(t(L, 1.5)),
    "outer graph": lambda L: _outer(L),
    "under no_grad": lambda L: _under_no_grad(L),
    "vjp": lambda L: _vjp(L),
    "vjp aux": lambda L: _vjp_aux(L),
    "jacrev": lambda L: L.func.jacrev(lambda x: x.sin() * x.sum())(t(L, X)),
    "jacrev argnums": lambda L: L.func.jacrev(lambda x, y: x[:2] * y[1:], argnums=(0, 1))(t(L, X), t(L, Y)),
    "jacrev outputs": lambda L: L.func.jacrev(lambda x: (x.sum(), x.exp()))(t(L, X)),
    "jacrev dict": lambda L: L.func.jacrev(lambda p: p["w"] * p["v"].sum())({"w": t(L, X), "v": t(L, Y)}),
    "jacrev aux": lambda L: L.func.jacrev(lambda x: (x.cos(), x.sum()), has_aux=True)(t(L, X)),
    "jacrev of grad": lambda L: L.func.jacrev(L.func.grad(lambda x: (x.sin() * x).sum()))(t(L, X)),
    "jvp": lambda L: L.func.jvp(lambda x: x.sin() * x.sum(), (t(L, X),), (t(L, Y),)),
    "jvp two": lambda L: L.func.jvp(lambda x, y: (x * y, x.exp().sum()), (t(L, X), t(L, Y)), (t(L, Y), t(L, X))),
    "jvp aux": lambda L: L.func.jvp(lambda x: (x.tanh(), {"a": x}), (t(L, X),), (t(L, Y),), has_aux=True),
    "jvp unused": lambda L: L.func.jvp(lambda x, y: y * 2, (t(L, X), t(L, Y)), (t(L, Y), t(L, X))),
    "jvp outer graph": lambda L: _jvp_outer(L),
    "jacfwd": lambda L: L.func.jacfwd(lambda x: x.sin() * x.sum())(t(L, X)),
    "jacfwd argnums": lambda L: L.func.jacfwd(lambda x, y: x[:2] * y[1:], argnums=(0, 1))(t(L, X), t(L, Y)),
    "jacfwd outputs": lambda L: L.func.jacfwd(lambda x: (x.sum(), x.exp()))(t(L, X)),
    "jacfwd aux": lambda L: L.func.jacfwd(lambda x: (x.cos(), x.sum()), has_aux=True)(t(L, X)),
    "hessian": lambda L: L.func.hessian(lambda x: (x.sin() * x.sum() ** 2).sum())(t(L, X)),
    "hessian argnums": lambda L: L.func.hessian(lambda x, y: (x * y.exp()).sum() * x.sum(), argnums=(0, 1))(
        t(L, X), t(L, Y)),
}


def _jvp_outer(L):
    x = t(L, X, True)
    out, jv = L.func.jvp(lambda x: x ** 3, (x,), (t(L, Y),))
    return out, jv, L.autograd.grad(jv.sum(), x)


def _outer(L):
    x = t(L, X, True)
    g = L.func.grad(lambda x: (x ** 3).sum())(x)
    return g, L.autograd.grad(g.sum(), x)


def _under_no_grad(L):
    with L.no_grad():
        return L.func.grad(lambda x: (x ** 2).sum())(t(L, X, True))


def _vjp(L):
    out, f = L.func.vjp(lambda x, y: (x * y, x.sin()), t(L, X), t(L, Y))
    return out, f((t(L, Y), t(L, X)))


def _vjp_aux(L):
    out, f, aux = L.func.vjp(lambda x: (x.exp(), x.sum()), t(L, X), has_aux=True)
    return out, f(t(L, Y)), aux


@pytest.mark.parametrize("name", list(CASES))
def test_transforms_match_torch(name):
    want, got = both(CASES[name])
    assert_same(got, want)


def _error(f):
    try:
        f()
    except Exception as e:      # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


ERRORS = {
    "not scalar": lambda L: L.func.grad(lambda x: x ** 2)(t(L, X)),
    "not a tensor": lambda L: L.func.grad(lambda x: 3.0)(t(L, X)),
    "a tuple without aux": lambda L: L.func.grad(lambda x: (x.sum(), 1))(t(L, X)),
    "aux not a pair": lambda L: L.func.grad(lambda x: x.sum(), has_aux=True)(t(L, X)),
    "argnum out of range": lambda L: L.func.grad(lambda x: x.sum(), argnums=2)(t(L, X)),
    "argnums repeated": lambda L: L.func.grad(lambda x: x.sum(), argnums=(0, 0))(t(L, X)),
    "argnums float": lambda L: L.func.grad(lambda x: x.sum(), argnums=1.5)(t(L, X)),
    "not a tensor input": lambda L: L.func.grad(lambda x: x.sum())(3.0),
    "integer input": lambda L: L.func.grad(lambda x: x.sum())(L.tensor([1, 2])),
    "vjp structure": lambda L: L.func.vjp(lambda x: (x, x), t(L, X))[1](t(L, X)),
    "jvp primals not a tuple": lambda L: L.func.jvp(lambda x: x, t(L, X), t(L, X)),
    "jvp structure": lambda L: L.func.jvp(lambda x: x, (t(L, X),), (t(L, X), t(L, X))),
    "jvp tangent size": lambda L: L.func.jvp(lambda x: x, (t(L, X),), (t(L, [1.0, 2.0]),)),
    "jvp not a tensor": lambda L: L.func.jvp(lambda x: 3.0, (t(L, X),), (t(L, X),)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_transform_errors_match_torch(name):
    want, got = _error(lambda: ERRORS[name](torch)), _error(lambda: ERRORS[name](tg))
    assert want is not None and got is not None and got[0] == want[0], (got, want)
    if name not in ("not a tensor input", "jvp structure"):     # (a type's repr, torch's TreeSpec repr)
        assert got == want


# -- functional_call ---------------------------------------------------------------------------------

class Net:
    @staticmethod
    def make(L):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
        if L is torch:
            return m
        g = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 2)).double()
        with tg.no_grad():
            for p, q in zip(g.parameters(), m.parameters()):
                p.copy_(tg.tensor(q.detach().numpy()))
        return g


def test_functional_call_and_a_maml_step_match_torch():
    want = _arrays(maml_step(torch))
    got = _arrays(maml_step(tg))
    assert_same(got, want)


def maml_step(L):
    """One inner SGD step through functional_call with create_graph, then the outer loss's
    gradient with respect to the original parameters."""
    m = Net.make(L)
    xs = t(L, _FIXED_X)
    params = dict(m.named_parameters())
    loss = (L.func.functional_call(m, params, (xs,)) ** 2).mean()
    grads = L.autograd.grad(loss, list(params.values()), create_graph=True)
    fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
    outer = L.func.functional_call(m, fast, xs).sum()
    outer.backward()
    return outer, [p.grad for p in m.parameters()], list(m.parameters())


_FIXED_X = R.uniform(-1, 1, (5, 3))


class Tied:
    @staticmethod
    def make(L):
        class M(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = L.nn.Linear(2, 2, bias=False).double()
                self.b = L.nn.Linear(2, 2, bias=False).double()
                self.b.weight = self.a.weight
                with L.no_grad():
                    self.a.weight.copy_(L.tensor([[0.3, -0.2], [0.7, 0.1]], dtype=L.float64))
                self.register_buffer("count", L.zeros((), dtype=L.float64))

            def forward(self, x):
                self.count = self.count + 1
                return self.b(self.a(x))
        return M()


def test_functional_call_options_match_torch():
    def run(L):
        m = Tied.make(L)
        w = t(L, [[1.0, 2.0], [0.5, -1.0]])
        x = t(L, [[1.0, -1.0]])
        out = [L.func.functional_call(m, {"a.weight": w}, (x,))]                     # tied: b.weight too
        out.append(L.func.functional_call(m, {"a.weight": w}, (x,), tie_weights=False))
        given = {"a.weight": w, "count": t(L, 5.0)}
        out.append(L.func.functional_call(m, given, (x,)))
        out.append(given["count"])                                                  # written back: 6
        out.append(m.count)                                                         # the module's own: 0
        out.append(L.func.functional_call(m, ({"a.weight": w}, {"count": t(L, 1.0)}), x))
        out.append(m.a.weight is m.b.weight)
        return out
    want, got = _arrays(run(torch)), _arrays(run(tg))
    assert_same(got, want)


@pytest.mark.parametrize("case", range(5))
def test_functional_call_errors_match_torch(case):
    def call(L):
        m = Tied.make(L)
        w = t(L, [[1.0, 2.0], [0.5, -1.0]])
        x = t(L, [[1.0, -1.0]])
        return [lambda: L.func.functional_call(m, {"a.weight": w, "b.weight": w * 2}, (x,)),
                lambda: L.func.functional_call(m, {"a.weight": w, "zzz": w}, (x,), strict=True),
                lambda: L.func.functional_call(m, ({"a.weight": w}, {"a.weight": w}), (x,)),
                lambda: L.func.functional_call(m, [{"a.weight": w}, 3], (x,)),
                lambda: L.func.functional_call(m, 3, (x,)),
                ][case]()
    want, got = _error(lambda: call(torch)), _error(lambda: call(tg))
    assert want is not None and got is not None and got[0] == want[0], (got, want)
    if case in (0, 1, 2, 3):
        assert got == want


def test_functional_call_puts_the_module_back_after_an_error():
    m = Tied.make(tg)
    before = m.a.weight

    def boom(x):
        raise ValueError("in forward")
    m.forward = boom
    with pytest.raises(ValueError, match="in forward"):
        tg.func.functional_call(m, {"a.weight": t(tg, np.eye(2))}, (t(tg, [[1.0, 1.0]]),))
    assert m.a.weight is before and m.b.weight is before


def test_stateless_functional_call_warns_as_torch():
    for L in (torch, tg):
        m = Tied.make(L)
        with pytest.warns(FutureWarning, match="torch.func.functional_call"):
            L.nn.utils.stateless.functional_call(m, {"a.weight": t(L, np.eye(2))}, (t(L, [[1.0, 2.0]]),))


def test_grad_of_a_compiled_function():
    f = lambda x: (x.sin() * x).sum()        # noqa: E731
    c = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            g = tg.func.grad(c)(t(tg, X))
            h = tg.func.grad(lambda x: tg.func.grad(c)(x).sum())(t(tg, X))
    wg = torch.func.grad(lambda x: (x.sin() * x).sum())(t(torch, X))
    wh = torch.func.grad(lambda x: torch.func.grad(lambda x: (x.sin() * x).sum())(x).sum())(t(torch, X))
    np.testing.assert_allclose(g.numpy(), wg.numpy(), rtol=1e-13)
    np.testing.assert_allclose(h.numpy(), wh.numpy(), rtol=1e-13)

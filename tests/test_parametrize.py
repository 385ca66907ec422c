"""nn.utils.parametrize and nn.utils.parametrizations against torch (float64): the class and
state_dict a parametrization makes, several on one tensor, right_inverse (one tensor or a
tuple), unsafe, cached(), remove_parametrizations both ways, errors, SGD steps of the
originals; weight_norm, orthogonal and spectral_norm in their parametrized forms; compile."""
import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

XS = np.linspace(-1, 1, 6).reshape(2, 3)


def linear(L, shape=(3, 3)):
    m = L.nn.Linear(shape[1], shape[0]).double()
    with L.no_grad():
        m.weight.copy_(L.tensor(np.cos(np.arange(float(np.prod(shape)))).reshape(shape)))
        m.bias.copy_(L.tensor(np.linspace(-0.2, 0.3, shape[0])))
    return m


def outcome(fn):
    try:
        return fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)


def mods(L):
    class Symmetric(L.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):
            return A.triu()

    class Scale(L.nn.Module):
        def forward(self, X):
            return 2 * X

        def right_inverse(self, X):
            return X / 2

    class NoInverse(L.nn.Module):
        def forward(self, X):
            return X + 1

    class Split(L.nn.Module):
        def forward(self, a, b):
            return a + b

        def right_inverse(self, X):
            return X * 0.25, X * 0.75

    class Rows(L.nn.Module):
        def forward(self, X):
            return X[:2]

    class ToFloat(L.nn.Module):
        def forward(self, X):
            return X.float()

    class NotATensor(L.nn.Module):
        def forward(self, X):
            return 1.0

    return dict(Symmetric=Symmetric, Scale=Scale, NoInverse=NoInverse, Split=Split, Rows=Rows, ToFloat=ToFloat,
                NotATensor=NotATensor)


def train(L, m, steps=3, x=XS):
    opt = L.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        m(L.tensor(x)).pow(2).sum().backward()
        opt.step()


def both(fn):
    return fn(tg), fn(torch)


def close(a, b, rtol=1e-10, atol=1e-13):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def test_register_two_on_one_tensor_names_class_keys_values_and_training():
    def run(L):
        P, M = L.nn.utils.parametrize, mods(L)
        m = linear(L)
        P.register_parametrization(m, "weight", M["Symmetric"]())
        P.register_parametrization(m, "weight", M["Scale"]())
        out = [type(m).__name__, P.is_parametrized(m), P.is_parametrized(m, "weight"), P.is_parametrized(m, "bias"),
               P.type_before_parametrizations(m).__name__, list(m.state_dict()), [n for n, _ in m.named_parameters()],
               repr(m), type(m.parametrizations.weight).__name__]
        vals = [m.weight.detach().numpy().copy(), m.parametrizations.weight.original.detach().numpy().copy()]
        grad_fn = m.weight.grad_fn.name()
        m.weight = L.tensor(np.arange(9.0).reshape(3, 3) + 1)       # right_inverse of each, the last first
        vals.append(m.parametrizations.weight.original.detach().numpy().copy())
        train(L, m)
        vals += [m.weight.detach().numpy(), m.parametrizations.weight.original.detach().numpy(),
                 m.bias.detach().numpy()]
        return out, grad_fn, vals
    (a, ga, va), (b, gb, vb) = both(run)
    assert a == b and a[0] == "ParametrizedLinear" and a[5] == ["bias", "parametrizations.weight.original"]
    assert ga == gb
    for x, y in zip(va, vb):
        close(x, y)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_leaves_the_value_or_the_original(leave):
    def run(L):
        P, M = L.nn.utils.parametrize, mods(L)
        m = linear(L)
        P.register_parametrization(m, "weight", M["Symmetric"]())
        P.register_parametrization(m, "bias", M["NoInverse"](), unsafe=True)
        original = m.parametrizations.weight.original
        train(L, m, steps=2)
        P.remove_parametrizations(m, "weight", leave_parametrized=leave)
        mid = (type(m).__name__, P.is_parametrized(m), list(m.state_dict()), m.weight is original)
        P.remove_parametrizations(m, "bias", leave_parametrized=leave)
        end = (type(m).__name__, P.is_parametrized(m), hasattr(m, "parametrizations"), list(m.state_dict()),
               type(m.weight).__name__, m.weight.requires_grad)
        return mid, end, m.weight.detach().numpy(), m.bias.detach().numpy(), m(L.tensor(XS)).detach().numpy()
    a, b = both(run)
    assert a[:2] == b[:2] and a[1][0] == "Linear" and a[0][3] is True
    for x, y in zip(a[2:], b[2:]):
        close(x, y)


def test_right_inverse_returning_a_tuple_makes_original0_original1():
    def run(L):
        P, M = L.nn.utils.parametrize, mods(L)
        m = linear(L)
        P.register_parametrization(m, "weight", M["Split"]())
        keys = list(m.state_dict())
        vals = [m.parametrizations.weight.original0.detach().numpy().copy(), m.weight.detach().numpy().copy()]
        m.weight = L.ones(3, 3, dtype=L.float64)
        vals.append(m.parametrizations.weight.original1.detach().numpy().copy())
        train(L, m)
        vals.append(m.weight.detach().numpy())
        err = outcome(lambda: P.remove_parametrizations(m, "weight", leave_parametrized=False))
        P.remove_parametrizations(m, "weight")
        return keys, err, type(m.weight).__name__, vals
    (ka, ea, ta, va), (kb, eb, tb, vb) = both(run)
    assert ka == kb == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    assert ea == eb and ea[0] == "ValueError"
    assert ta == tb == "Parameter"
    for x, y in zip(va, vb):
        close(x, y)


def test_cached_makes_the_value_once():
    def run(L):
        P, M = L.nn.utils.parametrize, mods(L)
        m = linear(L)
        P.register_parametrization(m, "weight", M["Symmetric"]())
        with P.cached():
            a = m.weight
            with P.cached():
                b = m.weight
            same = a is b and m.weight is a
        return same, m.weight is m.weight, len(P._cache)
    assert both(run)[0] == both(run)[1] == (True, False, 0)


ERRORS = {
    "no such tensor": lambda L, M, P: P.register_parametrization(linear(L), "nothere", M["Scale"]()),
    "changes the shape": lambda L, M, P: P.register_parametrization(linear(L), "weight", M["Rows"]()),
    "changes the dtype": lambda L, M, P: P.register_parametrization(linear(L), "weight", M["ToFloat"]()),
    "not a tensor": lambda L, M, P: P.register_parametrization(linear(L), "weight", M["NotATensor"]()),
    "second changes the shape": lambda L, M, P: P.register_parametrization(
        P.register_parametrization(linear(L), "weight", M["Scale"]()), "weight", M["Rows"]()),
    "no right_inverse to assign": lambda L, M, P: setattr(
        P.register_parametrization(linear(L), "weight", M["NoInverse"]()), "weight", L.ones(3, 3, dtype=L.float64)),
    "remove what is not parametrized": lambda L, M, P: P.remove_parametrizations(linear(L), "weight"),
    "unsafe shape change": lambda L, M, P: tuple(
        P.register_parametrization(linear(L), "weight", M["Rows"](), unsafe=True).weight.shape),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_are_torchs(name):
    got, want = (outcome(lambda: ERRORS[name](L, mods(L), L.nn.utils.parametrize)) for L in (tg, torch))
    assert got == want


def test_pickle_refuses_and_deepcopy_copies():
    for L in (tg, torch):
        m = L.nn.utils.parametrize.register_parametrization(linear(L), "weight", mods(L)["Symmetric"]())
        with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only supported through "
                                               "state_dict()"):
            pickle.dumps(m)
        c = copy.deepcopy(m)
        assert type(c).__name__ == "ParametrizedLinear"
        assert c.parametrizations.weight.original is not m.parametrizations.weight.original
        close(c.weight.detach().numpy(), m.weight.detach().numpy(), 0, 0)


def test_state_dict_round_trip_between_modules():
    src = tg.nn.utils.parametrize.register_parametrization(linear(tg), "weight", mods(tg)["Scale"]())
    dst = tg.nn.utils.parametrize.register_parametrization(tg.nn.Linear(3, 3).double(), "weight", mods(tg)["Scale"]())
    dst.load_state_dict(src.state_dict())
    close(dst.weight.detach().numpy(), src.weight.detach().numpy(), 0, 0)


def test_compiled_parametrized_module_follows_the_original():
    m = tg.nn.utils.parametrize.register_parametrization(linear(tg), "weight", mods(tg)["Symmetric"]())
    cm = tg.compile(m)
    x = tg.tensor(XS)
    for _ in range(2):
        close(cm(x).detach().numpy(), m(x).detach().numpy(), 0, 0)
        with tg.no_grad():
            m.parametrizations.weight.original.mul_(2)


def test_compiled_under_cached_runs_eagerly_with_a_warning():
    m = tg.nn.utils.parametrize.register_parametrization(linear(tg), "weight", mods(tg)["Symmetric"]())
    cm = tg.compile(m)
    x = tg.tensor(XS)
    with tg.nn.utils.parametrize.cached():
        with pytest.warns(UserWarning, match="Cannot trace a model while caching parametrizations"):
            a = cm(x)
    assert not tg.nn.utils.parametrize._cache
    close(a.detach().numpy(), m(x).detach().numpy(), 0, 0)


# -- parametrizations --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_matches_torch(dim):
    def run(L):
        m = L.nn.utils.parametrizations.weight_norm(linear(L, (4, 3)), dim=dim)
        p = m.parametrizations.weight
        out = [list(m.state_dict()), tuple(p.original0.shape), tuple(p.original1.shape)]
        vals = [m.weight.detach().numpy().copy()]
        train(L, m)
        vals += [m.weight.detach().numpy(), p.original0.detach().numpy(), p.original1.detach().numpy()]
        return out, vals
    (a, va), (b, vb) = both(run)
    assert a == b and a[0] == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    for x, y in zip(va, vb):
        close(x, y)


def test_weight_norm_parametrization_loads_the_old_forms_state_dict():
    def run(L):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            old = L.nn.utils.weight_norm(linear(L, (4, 3)))
        with L.no_grad():
            old.weight_g.mul_(3)
        new = L.nn.utils.parametrizations.weight_norm(L.nn.Linear(3, 4).double())
        r = new.load_state_dict(old.state_dict())
        return (list(r.missing_keys), list(r.unexpected_keys)), new.weight.detach().numpy()
    (ka, a), (kb, b) = both(run)
    assert ka == kb == ([], [])
    close(a, b)


def test_weight_norm_gradcheck():
    m = tg.nn.utils.parametrizations.weight_norm(linear(tg, (4, 3)))
    p = m.parametrizations.weight
    assert tg.autograd.gradcheck(lambda g, v: p[0](g, v), (p.original0.detach().requires_grad_(),
                                                        p.original1.detach().requires_grad_()))


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 4, 4), (2, 5, 3)])
def test_orthogonal_matches_torch_and_trains_as_torchs(shape):
    # (of a full-rank weight: the Q of a rank-deficient one's QR is not one matrix)
    def make(L):
        m = L.nn.Module()
        m.weight = L.nn.Parameter(L.tensor(np.random.default_rng(7).standard_normal(shape)))
        return L.nn.utils.parametrizations.orthogonal(m)
    a, b = both(make)
    wa = a.weight.detach().numpy()
    close(wa, b.weight.detach().numpy())
    n, k = max(shape[-2:]), min(shape[-2:])
    eye = np.eye(k)
    q = wa if shape[-2] >= shape[-1] else np.swapaxes(wa, -1, -2)
    close(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(eye, q.shape[:-2] + (k, k)), 0, 1e-12)
    # (a tall matrix's base completes its columns with random ones: torch's are copied in)
    with tg.no_grad():
        a.parametrizations.weight[0].base.copy_(tg.tensor(b.parametrizations.weight[0].base.numpy()))
    got = []
    for L, m in ((tg, a), (torch, b)):
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        x = L.tensor(np.linspace(-1, 1, shape[-1] * 2).reshape(2, shape[-1]))
        for _ in range(3):
            opt.zero_grad()
            (x @ m.weight.mT).pow(3).sum().backward()
            opt.step()
        got.append(m.weight.detach().numpy())
    close(*got)
    assert np.abs(got[0] - wa).max() > 1e-3            # (the steps moved it)


@pytest.mark.parametrize("shape,orthogonal_map", [((4, 3), "householder"), ((3, 4), "householder"),
                                                   ((2, 5, 3), "householder"), ((3, 3), "householder"),
                                                   ((3, 3), "matrix_exp"), ((3, 3), "cayley")])
def test_orthogonal_without_trivialization_matches_torch(shape, orthogonal_map):
    # (householder: the original holds the weight's reflectors, torch's geqrf's; the others keep
    # the weight itself and refuse an assignment)
    tall = shape if shape[-2] >= shape[-1] else shape[:-2] + (shape[-1], shape[-2])
    q = np.linalg.qr(np.random.default_rng(1).standard_normal(tall))[0]
    q = q if shape[-2] >= shape[-1] else np.swapaxes(q, -1, -2)
    got = []
    for L in (tg, torch):
        m = L.nn.Module()
        m.weight = L.nn.Parameter(L.tensor(np.random.default_rng(7).standard_normal(shape)))
        L.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orthogonal_map, use_trivialization=False)
        vals = [m.weight.detach().numpy().copy(), m.parametrizations.weight.original.detach().numpy().copy()]
        opt = L.optim.SGD(m.parameters(), lr=0.05)
        for _ in range(2):
            opt.zero_grad()
            (m.weight * L.tensor(np.cos(np.arange(float(np.prod(shape)))).reshape(shape))).sum().backward()
            opt.step()
        vals.append(m.weight.detach().numpy().copy())
        err = outcome(lambda: setattr(m, "weight", L.tensor(q)))
        vals.append(m.weight.detach().numpy())
        got.append((err, vals))
    assert got[0][0] == got[1][0]
    for a, b in zip(got[0][1], got[1][1]):
        close(a, b, 1e-9, 1e-12)


def test_orthogonal_errors_are_torchs():
    cases = {
        "a vector": lambda L: L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3), "bias"),
        "no tensor": lambda L: L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3), "nothere"),
        "unknown map": lambda L: L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3), orthogonal_map="qr"),
        "assign another shape": lambda L: setattr(L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3)), "weight",
                                                  L.ones(2, 2)),
    }
    for name, fn in cases.items():
        got, want = outcome(lambda: fn(tg)), outcome(lambda: fn(torch))
        assert got[0] == want[0] and got[1].split("'")[0] == want[1].split("'")[0], name


def test_householder_product_matches_torch():
    rng = np.random.default_rng(0)
    for sh, tsh in [((4, 3), (3,)), ((4, 3), (2,)), ((2, 5, 3), (2, 3)), ((3, 3), (3,))]:
        A, t = rng.standard_normal(sh), rng.standard_normal(tsh)
        w = np.cos(np.arange(float(sh[-2] * sh[-1]))).reshape(sh[-2:])
        got = []
        for L in (tg, torch):
            a, tt = L.tensor(A, requires_grad=True), L.tensor(t, requires_grad=True)
            q = L.linalg.householder_product(a, tt)
            (q * L.tensor(w)).sum().backward()
            got.append((q.detach().numpy(), a.grad.numpy(), tt.grad.numpy()))
        for x, y in zip(*got):
            close(x, y)
    assert tg.autograd.gradcheck(tg.linalg.householder_product,
                                 (tg.tensor(rng.standard_normal((4, 3)), requires_grad=True),
                                  tg.tensor(rng.standard_normal(2), requires_grad=True)))
    for a, t, dt in [((3,), (1,), "float32"), ((2, 3), (1,), "float32"), ((3, 2), (3,), "float32"),
                     ((3, 2), (1, 2), "float32"), ((2, 3, 2), (3, 2), "float32"), ((3, 2), (2,), "float64")]:
        got, want = (outcome(lambda: L.linalg.householder_product(L.ones(*a), L.ones(*t, dtype=getattr(L, dt))))
                     for L in (tg, torch))
        assert got == want


def spectral(L, shape=(4, 3), **kw):
    return L.nn.utils.parametrizations.spectral_norm(linear(L, shape), **kw)


@pytest.mark.parametrize("shape,dim", [((4, 3), 0), ((4, 3), 1), ((3, 5), 0)])
def test_spectral_norm_parametrization_matches_torch_given_its_u_and_v(shape, dim):
    a, b = spectral(tg, shape, dim=dim), spectral(torch, shape, dim=dim)
    assert list(a.state_dict()) == list(b.state_dict()) == [
        "bias", "parametrizations.weight.original", "parametrizations.weight.0._u", "parametrizations.weight.0._v"]
    pa, pb = a.parametrizations.weight[0], b.parametrizations.weight[0]
    sigma = np.linalg.svd(a.parametrizations.weight.original.detach().numpy(), compute_uv=False)[0]
    close(a.weight.detach().numpy() * sigma, a.parametrizations.weight.original.detach().numpy(), 1e-6)
    with tg.no_grad():
        pa._u.copy_(tg.tensor(pb._u.numpy()))
        pa._v.copy_(tg.tensor(pb._v.numpy()))
    got = []
    for L, m in ((tg, a), (torch, b)):
        x = L.tensor(np.linspace(-1, 1, shape[1] * 2).reshape(2, shape[1]))
        train(L, m, x=x.numpy())
        m.eval()
        y = m(x)
        u = m.parametrizations.weight[0]._u.numpy().copy()
        y2 = m(x)                                   # (eval: no power iteration, u stays)
        got.append((y.detach().numpy(), y2.detach().numpy(), u, m.parametrizations.weight[0]._u.numpy()))
    for x, y in zip(*got):
        close(x, y)


def test_spectral_norm_parametrization_compiled_steps_u_as_eager():
    a, b = spectral(tg), spectral(torch)
    pa, pb = a.parametrizations.weight[0], b.parametrizations.weight[0]
    with tg.no_grad():
        pa._u.copy_(tg.tensor(pb._u.numpy()))
        pa._v.copy_(tg.tensor(pb._v.numpy()))
    ca = tg.compile(a)
    for _ in range(3):
        close(ca(tg.tensor(XS)).detach().numpy(), b(torch.tensor(XS)).detach().numpy())
        close(pa._u.numpy(), pb._u.numpy())


def test_spectral_norm_parametrization_errors_are_torchs():
    for kw in (dict(dim=2), dict(n_power_iterations=0)):
        assert outcome(lambda: spectral(tg, **kw)) == outcome(lambda: spectral(torch, **kw))


def test_compiled_training_step_and_assignment_follow_torch():
    def build(L):
        m = L.nn.utils.parametrize.register_parametrization(linear(L), "weight", mods(L)["Scale"]())
        m.weight = L.tensor(np.arange(9.0).reshape(3, 3))
        return m, L.optim.SGD(m.parameters(), lr=0.01)
    (a, opt_a), (b, opt_b) = both(build)

    @tg.compile
    def step(x):
        opt_a.zero_grad()
        loss = a(x).pow(2).sum()
        loss.backward()
        opt_a.step()
        return loss

    x = np.linspace(-1, 1, 6).reshape(2, 3)
    for i in range(4):
        if i == 2:
            a.weight = tg.tensor(np.ones((3, 3)))           # (through right_inverse, between compiled calls)
            b.weight = torch.tensor(np.ones((3, 3)))
        la = step(tg.tensor(x))
        opt_b.zero_grad()
        lb = b(torch.tensor(x)).pow(2).sum()
        lb.backward()
        opt_b.step()
        close(la.detach().numpy(), lb.detach().numpy())
        close(a.weight.detach().numpy(), b.weight.detach().numpy())


def test_a_buffer_parametrized_and_transfer_to_another_module():
    def run(L):
        P = L.nn.utils.parametrize
        m = L.nn.BatchNorm1d(3).double()
        with L.no_grad():
            m.running_mean.copy_(L.tensor([1.0, 2.0, 3.0]))
        P.register_parametrization(m, "running_mean", mods(L)["Scale"]())
        out = [list(m.state_dict()), [n for n, _ in m.named_buffers()], m.running_mean.tolist(),
               m.parametrizations.running_mean.original.requires_grad]
        m.eval()
        y = m(L.tensor(np.ones((2, 3)))).detach().numpy()
        P.remove_parametrizations(m, "running_mean")
        out.append((list(m.state_dict()), m.running_mean.tolist(), type(m.running_mean).__name__))
        a, b = linear(L), L.nn.Linear(3, 3).double()
        P.register_parametrization(a, "weight", mods(L)["Scale"]())
        P.transfer_parametrizations_and_params(a, b)
        out.append((type(b).__name__, list(b.state_dict()), b.weight.tolist(),
                    b.parametrizations.weight.original is a.parametrizations.weight.original))
        return out, y
    (a, ya), (b, yb) = both(run)
    assert a == b
    close(ya, yb, 1e-14, 1e-15)

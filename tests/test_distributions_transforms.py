"""torch.distributions.transforms, TransformedDistribution and constraint_registry against torch:
each case runs in both libraries (float64) and its values, gradients, printed forms and errors must
agree; derivative rules are gradchecked. Draws cannot match torch's stream: a rsample is compared
through its base draw (the same eps fed to torch)."""

import pickle

import numpy as np
import pytest
import torch

import tracegrad as tg


def _t(L, v, grad=False):
    return L.tensor(v, dtype=L.float64, requires_grad=grad)


X = [[-1.3, 0.2, 2.1], [0.4, -0.7, 0.05]]
POS = [[0.3, 1.7, 2.5], [0.9, 0.1, 4.0]]

# name -> (transform of library L, input values)
TRANSFORMS = {
    "exp": (lambda L: L.distributions.ExpTransform(), X),
    "sigmoid": (lambda L: L.distributions.SigmoidTransform(), X),
    "tanh": (lambda L: L.distributions.TanhTransform(), X),
    "softplus": (lambda L: L.distributions.transforms.SoftplusTransform(), [[-30.0, -1.0, 0.5], [25.0, 40.0, 1e-3]]),
    "cdf": (lambda L: L.distributions.transforms.CumulativeDistributionTransform(
        L.distributions.Normal(_t(L, 0.3), _t(L, 1.7))), X),
    "affine_numbers": (lambda L: L.distributions.AffineTransform(1.5, -2.0), X),
    "affine_tensors": (lambda L: L.distributions.AffineTransform(_t(L, [0.5, -1.0, 2.0]), _t(L, [2.0, -0.5, 3.0])), X),
    "affine_event": (lambda L: L.distributions.AffineTransform(0.3, _t(L, [2.0, -0.5, 3.0]), event_dim=1), X),
    "power": (lambda L: L.distributions.PowerTransform(_t(L, [2.0, -0.5, 1.5])), POS),
    "power_number": (lambda L: L.distributions.PowerTransform(3.0), POS),
    "stick_breaking": (lambda L: L.distributions.StickBreakingTransform(), X),
    "corr_cholesky": (lambda L: L.distributions.transforms.CorrCholeskyTransform(),
                      [[0.3, -1.2, 0.8, 2.0, -0.4, 0.1], [-0.5, 0.05, 1.5, -2.5, 0.7, 0.9]]),
    "compose": (lambda L: L.distributions.ComposeTransform([L.distributions.AffineTransform(0.5, 2.0),
                                                            L.distributions.StickBreakingTransform(),
                                                            L.distributions.AffineTransform(1.0, 3.0)]), X),
    "independent": (lambda L: L.distributions.IndependentTransform(L.distributions.SigmoidTransform(), 1), X),
    "reshape": (lambda L: L.distributions.ReshapeTransform((3,), (3, 1)), X),
    "inverse": (lambda L: L.distributions.ExpTransform().inv, POS),
    "cat": (lambda L: L.distributions.CatTransform([L.distributions.ExpTransform(), L.distributions.TanhTransform()],
                                                   1, [2, 1]), X),
    "stack": (lambda L: L.distributions.StackTransform([L.distributions.ExpTransform(),
                                                        L.distributions.AffineTransform(1.0, 2.0)], 0), X),
}


def _run(L, name):
    make, values = TRANSFORMS[name]
    t = make(L)
    x = _t(L, values, True)
    y = t(x)
    ladj = t.log_abs_det_jacobian(x, y)
    back = t.inv(y)
    gx, = L.autograd.grad((y * y).sum() + ladj.sum(), x)
    yd = y.detach().requires_grad_()
    gy, = L.autograd.grad((t.inv(yd) ** 2).sum(), yd)          # (through the inverse too)
    return y, back, ladj, gx, gy


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transform_values_inverse_log_det_and_gradients_as_torch(name):
    got, want = _run(tg, name), _run(torch, name)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(set(TRANSFORMS) - {"reshape"}))
def test_transform_and_log_det_gradcheck(name):
    make, values = TRANSFORMS[name]
    t = make(tg)
    x = _t(tg, values, True)
    assert tg.autograd.gradcheck(lambda v: t(v), (x,))
    assert tg.autograd.gradcheck(lambda v: t.log_abs_det_jacobian(v, t(v)), (x,))
    if t.log_abs_det_jacobian(x, t(x)).requires_grad:       # (an affine map's is constant)
        assert tg.autograd.gradgradcheck(lambda v: t.log_abs_det_jacobian(v, t(v)), (x,))


def _describe(L, t):
    row = [repr(t), repr(t.domain), repr(t.codomain), t.bijective, t.domain.event_dim, t.codomain.event_dim]
    for attr in ("event_dim", "sign"):
        try:
            v = getattr(t, attr)
            row.append(v.tolist() if hasattr(v, "tolist") else v)
        except (ValueError, NotImplementedError) as e:
            row.append(f"{type(e).__name__}: {e}")
    for f in (t.forward_shape, t.inverse_shape):
        try:
            row.append(tuple(f((2, 3))))
        except ValueError as e:
            row.append(f"{type(e).__name__}: {e}")
    return row


@pytest.mark.parametrize("name", sorted(TRANSFORMS) + ["abs", "softmax", "identity"])
def test_transform_properties_as_torch(name):
    extra = {"abs": lambda L: L.distributions.AbsTransform(), "softmax": lambda L: L.distributions.SoftmaxTransform(),
             "identity": lambda L: L.distributions.transforms.identity_transform}
    make = extra[name] if name in extra else TRANSFORMS[name][0]
    if name in ("cat", "stack"):          # (torch prints their domains with object addresses)
        got, want = _describe(tg, make(tg))[3:], _describe(torch, make(torch))[3:]
    else:
        got, want = _describe(tg, make(tg)), _describe(torch, make(torch))
    assert got == want


@pytest.mark.parametrize("name", ["abs", "softmax"])
def test_transforms_that_are_not_injective_as_torch(name):
    res = []
    for L in (torch, tg):
        t = L.distributions.AbsTransform() if name == "abs" else L.distributions.SoftmaxTransform()
        x = _t(L, X)
        y = t(x)
        try:
            t.log_abs_det_jacobian(x, y)
            err = None
        except NotImplementedError as e:
            err = type(e).__name__
        res.append((y.numpy(), t.inv(y).numpy(), err))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-12)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-12)
    assert res[1][2] == res[0][2]


def test_cache_as_torch():
    for L in (torch, tg):
        D = L.distributions
        t = D.TanhTransform(cache_size=1)
        x = _t(L, [0.3, 20.0])
        y = t(x)
        assert t(x) is y and t.inv(y) is x          # (atanh(tanh(20)) is inf: the cache answers x)
        assert D.TanhTransform()(x) is not D.TanhTransform()(x)
        assert t.inv is t.inv and t.inv.inv is t
        assert t.with_cache(1) is t and t.with_cache(0)._cache_size == 0
        z = _t(L, [0.1])
        assert t.inv(z) is not x
        assert t(t.inv(z)) is z
        compose = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 2.0)], cache_size=1)
        assert all(p._cache_size == 1 for p in compose.parts)
        with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
            D.ExpTransform(cache_size=2)
    assert not np.isfinite(tg.distributions.TanhTransform().inv(tg.tanh(_t(tg, [20.0]))).numpy()).all()


def test_equality_as_torch():
    for L in (torch, tg):
        D = L.distributions
        assert D.ExpTransform() == D.ExpTransform() and D.ExpTransform() != D.SigmoidTransform()
        assert D.AffineTransform(1.0, 2.0) == D.AffineTransform(1.0, 2.0) != D.AffineTransform(1.0, 3.0)
        assert D.ExpTransform().inv == D.ExpTransform().inv
        assert D.ComposeTransform([D.ExpTransform()]) == D.ComposeTransform([D.ExpTransform()])


def _sac(L, eps, loc_v, scale_v, dtype):
    """The soft actor-critic policy: tanh of a normal draw, its log density, gradients through both."""
    dt = getattr(L, dtype)
    loc, scale = L.tensor(loc_v, dtype=dt, requires_grad=True), L.tensor(scale_v, dtype=dt, requires_grad=True)
    d = L.distributions.TransformedDistribution(L.distributions.Normal(loc, scale),
                                                [L.distributions.TanhTransform(cache_size=1)])
    u = loc + scale * L.tensor(eps, dtype=dt)              # the base's rsample at a given eps
    a = d.transforms[0](u)
    lp = d.log_prob(a)
    uncached = L.distributions.TransformedDistribution(L.distributions.Normal(loc, scale),
                                                       [L.distributions.TanhTransform()]).log_prob(a)
    loss = (a * 0.7).sum() + lp.sum()
    grads = L.autograd.grad(loss, (loc, scale))
    return a, lp, uncached, grads[0], grads[1]


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-10), ("float32", 2e-5)])
def test_sac_tanh_normal_rsample_and_log_prob_as_torch(dtype, rtol):
    eps = [[0.3, -1.2, 2.2], [-0.4, 0.9, -2.5]]
    args = (eps, [0.1, -0.3, 1.0], [0.5, 1.4, 0.8], dtype)
    for g, w in zip(_sac(tg, *args), _sac(torch, *args)):
        assert str(g.dtype) == str(w.dtype)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=rtol, atol=rtol)


def test_sac_rsample_differentiates_through_the_draw():
    tg.manual_seed(2)
    loc, scale = _t(tg, [0.1, -0.3], True), _t(tg, [0.5, 1.4], True)
    d = tg.distributions.TransformedDistribution(tg.distributions.Normal(loc, scale),
                                                 [tg.distributions.TanhTransform(cache_size=1)])
    assert d.has_rsample
    a = d.rsample((4,))
    u = d.transforms[0].inv(a)                  # the cached base draw
    eps = ((u - loc) / scale).detach().numpy()
    a.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), (1 - np.tanh(u.detach().numpy()) ** 2).sum(0), rtol=1e-12)
    np.testing.assert_allclose(scale.grad.numpy(), ((1 - np.tanh(u.detach().numpy()) ** 2) * eps).sum(0), rtol=1e-12)
    assert not d.sample((2,)).requires_grad


def _shapes(L):
    D = L.distributions
    out = []
    for d in (D.TransformedDistribution(D.Normal(L.zeros(2, 3), L.ones(2, 3)), D.StickBreakingTransform()),
              D.TransformedDistribution(D.Normal(L.zeros(4, 6), L.ones(4, 6)), [D.ReshapeTransform((6,), (2, 3))]),
              D.TransformedDistribution(D.Normal(L.zeros(3), L.ones(3)), [D.AffineTransform(0.0, L.ones(2, 3))]),
              D.TransformedDistribution(D.Independent(D.Gamma(L.ones(2, 3), L.ones(2, 3)), 1), []),
              D.TransformedDistribution(D.Normal(L.zeros(3), L.ones(3)),
                                        [D.IndependentTransform(D.ExpTransform(), 1)])):
        e = d.expand((5,) + tuple(d.batch_shape))
        out.append((repr(d), tuple(d.batch_shape), tuple(d.event_shape), repr(d.support), tuple(d.sample().shape),
                    tuple(d.sample((2,)).shape), tuple(e.batch_shape), tuple(e.event_shape), tuple(e.sample().shape),
                    d.has_rsample))
    return out


def test_batch_and_event_shapes_and_expand_as_torch():
    assert _shapes(tg) == _shapes(torch)


def _densities(L):
    D = L.distributions
    base = D.Normal(_t(L, [0.5, -0.2]), _t(L, [2.0, 0.7]))
    down = D.TransformedDistribution(base, [D.AffineTransform(1.0, -3.0), D.ExpTransform()])
    v = _t(L, [[0.7, 2.0], [0.01, 30.0]])
    stick = D.TransformedDistribution(D.Normal(_t(L, [0.1, -0.4]), _t(L, [1.0, 0.5])), D.StickBreakingTransform())
    simplex = _t(L, [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    sig = D.TransformedDistribution(D.Normal(_t(L, 0.0), _t(L, 1.5)), D.SigmoidTransform())
    return (down.cdf(v), down.icdf(_t(L, [[0.2, 0.9], [0.5, 0.01]])), down.log_prob(v), stick.log_prob(simplex),
            sig.log_prob(_t(L, [0.1, 0.9])), sig.cdf(_t(L, [0.1, 0.9])), sig.icdf(_t(L, [0.1, 0.9])))


def test_log_prob_cdf_and_icdf_as_torch():
    for g, w in zip(_densities(tg), _densities(torch)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)


def _errors(L):
    D = L.distributions
    cases = [
        lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), [3]),
        lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), D.ExpTransform(), validate_args=True).log_prob(
            L.tensor([-1.0, 2.0])),
        lambda: D.TransformedDistribution(D.Normal(L.zeros(2), 1.0), D.TanhTransform(), validate_args=True).log_prob(
            L.tensor([0.5, 1.5])),
        lambda: D.TransformedDistribution(D.Normal(L.zeros(2), 1.0), D.TanhTransform(), validate_args=True).log_prob(
            L.tensor([0.5, 0.2, 0.1])),
        lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), D.StickBreakingTransform()),
        lambda: D.ReshapeTransform((2, 3), (5,)),
        lambda: D.ReshapeTransform((2, 3), (6,)).forward_shape((4, 3, 2)),
        lambda: D.ReshapeTransform((2, 3), (6,)).forward_shape((3,)),
        lambda: D.StickBreakingTransform().forward_shape(()),
        lambda: D.ComposeTransform([D.StickBreakingTransform(), D.ReshapeTransform((4,), (2, 2))]).event_dim,
        lambda: D.biject_to(D.constraints.boolean),
        lambda: D.transform_to(D.constraints.nonnegative_integer),
        lambda: D.TransformedDistribution(D.Normal(L.zeros(2), 1.0), D.ExpTransform()).entropy(),
        lambda: D.TransformedDistribution(D.Normal(L.zeros(2), 1.0), D.ExpTransform()).mean,
    ]
    out = []
    for f in cases:
        try:
            f()
            out.append(None)
        except Exception as e:  # noqa: BLE001 (compared)
            out.append(f"{type(e).__name__}: {e}")
    return out


def test_errors_as_torch():
    assert _errors(tg) == _errors(torch)


def _registry(L):
    D, c = L.distributions, L.distributions.constraints
    x = _t(L, [[-1.5, 0.2, 3.0], [0.4, -0.7, 0.05]])
    out = []
    for con in (c.real, c.positive, c.nonnegative, c.greater_than(2.0), c.greater_than_eq(-1.0), c.less_than(1.5),
                c.interval(-1.0, 3.0), c.half_open_interval(0.0, 2.0), c.unit_interval, c.interval(0.0, 1.0),
                c.simplex, c.independent(c.positive, 1), c.real_vector, c.corr_cholesky):
        for registry in (D.biject_to, D.transform_to):
            t = registry(con)
            y = t(x)
            ok = con.check(y)
            row = [repr(t), y.detach().numpy().round(12).tolist(), bool(ok.all()), t.bijective]
            if t.bijective:
                row.append(t.log_abs_det_jacobian(x, y).detach().numpy().round(12).tolist())
                row.append(t.inv(y).detach().numpy().round(10).tolist())
            out.append(row)
    return out


def test_biject_to_and_transform_to_as_torch():
    assert _registry(tg) == _registry(torch)


def test_register_a_factory_as_torch():
    for L in (torch, tg):
        D = L.distributions

        class Odd(D.constraints.Constraint):
            def check(self, value):
                return value > 7

        registry = D.constraint_registry.ConstraintRegistry()
        registry.register(Odd, lambda c: D.AffineTransform(7.0, 1.0))
        assert isinstance(registry(Odd()), D.AffineTransform)
        with pytest.raises(NotImplementedError, match="Cannot transform _Real constraints"):
            registry(D.constraints.real)


def test_a_pickled_transform_as_torchs():
    out = []
    for L in (torch, tg):
        D = L.distributions
        t = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 2.0)], cache_size=1)
        t.inv                                               # (holds a weak reference to its inverse)
        u = pickle.loads(pickle.dumps(t))
        out.append((repr(u), repr(u.inv), u(_t(L, [0.5, -1.0])).tolist(), u.parts[0]._cache_size))
    assert out[0] == out[1]


def _kl(L):
    D = L.distributions
    p = D.TransformedDistribution(D.Normal(_t(L, [0.1, 1.0]), _t(L, [1.0, 0.5])), [D.ExpTransform()])
    q = D.TransformedDistribution(D.Normal(_t(L, [0.4, -1.0]), _t(L, [2.0, 0.7])), [D.ExpTransform()])
    other = D.TransformedDistribution(D.Normal(_t(L, [0.4, -1.0]), _t(L, [2.0, 0.7])), [D.SigmoidTransform()])
    try:
        D.kl_divergence(p, other)
        err = None
    except NotImplementedError as e:
        err = type(e).__name__
    return D.kl_divergence(p, q).numpy(), err


def test_kl_between_two_transformed_distributions_as_torchs():
    got, want = _kl(tg), _kl(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    assert got[1] == want[1]


M = [[[0.3, -1.0, 0.2], [0.5, 0.2, 0.7], [-0.4, 1.1, -0.6]], [[1.2, 0.1, 0.0], [-0.3, -0.8, 0.9], [0.25, 0.5, 0.05]]]


@pytest.mark.parametrize("name", ["LowerCholeskyTransform", "PositiveDefiniteTransform"])
def test_matrix_transforms_as_torchs(name):
    """Values, the way back, gradients and their registration in transform_to (not biject_to: the
    upper triangle is dropped)."""
    res = []
    for L in (torch, tg):
        D = L.distributions
        t = getattr(D.transforms, name)()
        x = _t(L, M, True)
        y = t(x)
        back = t.inv(y)
        g, = L.autograd.grad((y * y).sum(), x)
        try:
            D.biject_to(t.codomain)
            err = None
        except NotImplementedError as e:
            err = str(e)
        res.append((y.detach().numpy(), back.detach().numpy(), g.numpy(),
                    [repr(t), repr(t.domain), repr(t.codomain), t.bijective, repr(D.transform_to(t.codomain)), err,
                     t.codomain.check(y).tolist(), t.codomain.check(x).tolist()]))
    for a, b in zip(res[1][:3], res[0][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert res[1][3] == res[0][3]


def test_every_transform_torch_exports_is_here():
    assert set(torch.distributions.transforms.__all__) <= set(tg.distributions.transforms.__all__)
    assert all(hasattr(tg.distributions, n) for n in torch.distributions.transforms.__all__)
    for name in ("TransformedDistribution", "biject_to", "transform_to", "Chi2"):
        assert hasattr(tg.distributions, name)

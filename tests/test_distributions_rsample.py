"""Reparameterized gamma and Dirichlet draws (torch._standard_gamma, _standard_gamma_grad,
_dirichlet_grad; Gamma, Chi2, StudentT, Beta and Dirichlet's rsample) against torch. Draws cannot
match torch's stream, so the gradient is compared at the same draws: torch's _standard_gamma_grad
and _dirichlet_grad at tracegrad's sample values, finite differences of torch's gamma CDF
(torch.special.gammainc) there, and closed forms where the Beta CDF has one. torch's
_standard_gamma_grad is an approximation (a Taylor series, a saddle-point expansion and a fitted
rational function): at the draws below it is within 3e-4 of the derivative (measured against a
30-digit quadrature), so it is compared to 1e-3 relative; tracegrad's is the derivative to about
1e-9, compared with the finite differences to 1e-6 (their own error)."""
import math

import numpy as np
import pytest
import torch

import tracegrad as tg

ALPHAS = [1e-3, 0.05, 0.3, 0.9, 1.0, 2.5, 7.9, 8.1, 19.0, 21.0, 150.0, 250.0, 5e3, 1e5]



def _outcomes(calls):
    """None for each call that returns, else its error's type and message (compared with torch's)."""
    row = []
    for f in calls:
        try:
            f()
            row.append(None)
        except Exception as e:      # noqa: BLE001 (compared)
            row.append(f"{type(e).__name__}: {e}")
    return row

def _draws(seed=0, n=8):
    rng = np.random.default_rng(seed)
    a = np.repeat(ALPHAS, n)
    x = np.maximum(rng.standard_gamma(a), np.finfo(np.float64).tiny)
    return a, x


def _cdf_fd_grad(a, x):
    """-(dP/da) / (dP/dx) with dP/da a central difference of torch's regularized incomplete gamma
    (of -Q above a, where P rounds to 1) and dP/dx the density, in float64."""
    at, xt = torch.tensor(a), torch.tensor(x)
    h = 1e-4 / (1 / at + 1 / at.sqrt() + (xt / at).log().abs())
    above = xt >= at

    def cdf(b):
        return torch.where(above, -torch.special.gammaincc(b, xt), torch.special.gammainc(b, xt))
    dp = (8 * (cdf(at + h) - cdf(at - h)) - (cdf(at + 2 * h) - cdf(at - 2 * h))) / (12 * h)
    log_density = (at - 1) * xt.log() - xt - torch.lgamma(at)
    return (-dp / log_density.exp()).numpy()


def test_standard_gamma_grad_is_the_implicit_derivative_of_the_cdf():
    a, x = _draws()
    # far tails too, where torch's approximation is 1 % off (0.5 at 40: 5.562, the derivative 5.608)
    a, x = np.concatenate([a, [0.5, 30.0, 3.0]]), np.concatenate([x, [40.0, 90.0, 1e-3]])
    keep = a < 1e3                  # (the density's exp(lgamma) loses digits beyond: checked against torch below)
    got = tg._standard_gamma_grad(tg.tensor(a[keep]), tg.tensor(x[keep])).numpy()
    np.testing.assert_allclose(got, _cdf_fd_grad(a[keep], x[keep]), rtol=1e-6)


def test_standard_gamma_grad_agrees_with_torchs_approximation():
    a, x = _draws(1)
    a = np.concatenate([a, [2.0, 2.0]])
    x = np.concatenate([x, [0.0, -1.0]])        # (x <= 0: torch's 0)
    for dt in (torch.float64, torch.float32):
        want = torch._standard_gamma_grad(torch.tensor(a, dtype=dt), torch.tensor(x, dtype=dt))
        got = tg._standard_gamma_grad(tg.tensor(a, dtype=getattr(tg, str(dt)[6:])),
                                      tg.tensor(x, dtype=getattr(tg, str(dt)[6:])))
        assert str(got.dtype) == str(want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-3, atol=1e-30)


def test_standard_gamma_grad_edges_and_errors_as_torchs():
    args = ([2.0, -1.0, 0.0, float("nan")], [1.0, 1.0, 1.0, 1.0])
    want = torch._standard_gamma_grad(*(torch.tensor(v, dtype=torch.float64) for v in args))
    got = tg._standard_gamma_grad(*(tg.tensor(v, dtype=tg.float64) for v in args))
    np.testing.assert_array_equal(np.isnan(got.numpy()), np.isnan(want.numpy()))
    errors = []
    for L in (torch, tg):
        errors.append(_outcomes((lambda: L._standard_gamma(L.ones(2, dtype=L.float16)),
                                 lambda: L._standard_gamma(L.ones(2, dtype=L.int64)),
                                 lambda: L._standard_gamma_grad(L.ones(2, dtype=L.bfloat16), L.ones(2, dtype=L.bfloat16)),
                                 lambda: L._standard_gamma_grad(L.ones(2, dtype=L.float64), L.ones(2)))))
    assert errors[0] == errors[1]


def test_standard_gamma_draws_and_their_nodes_as_torchs():
    res = []
    for L in (torch, tg):
        a = L.tensor([0.0, -1.0, float("inf"), float("nan")])
        edge = L._standard_gamma(a)
        alpha = L.tensor([0.5, 3.0], dtype=L.float64, requires_grad=True)
        x = L._standard_gamma(alpha)
        g, = L.autograd.grad(x.sum(), alpha, create_graph=True)
        with pytest.raises(NotImplementedError) as e:
            L.autograd.grad(g.sum(), alpha)
        y = L._standard_gamma_grad(alpha, x.detach())
        res.append((edge.numpy().tolist(), type(x.grad_fn).__name__, len(x.grad_fn.next_functions),
                    type(y.grad_fn).__name__, str(e.value)))
    assert res[0] == res[1]


def test_rsample_gradients_at_tracegrads_draws_are_torchs():
    """Gamma(c, r).rsample = _standard_gamma(c) / r: d/dc is _standard_gamma_grad(c, r x) / r, d/dr
    is -x / r."""
    tg.manual_seed(3)
    c = tg.tensor([0.2, 1.5, 12.0, 40.0], dtype=tg.float64, requires_grad=True)
    r = tg.tensor([2.0, 0.5, 1.0, 3.0], dtype=tg.float64, requires_grad=True)
    x = tg.distributions.Gamma(c, r).rsample((50,))
    assert type(x.grad_fn).__name__ == "DivBackward0" and x.shape == (50, 4)
    x.sum().backward()
    xs = torch.tensor(x.detach().numpy())
    ct, rt = torch.tensor([0.2, 1.5, 12.0, 40.0], dtype=torch.float64), torch.tensor([2.0, 0.5, 1.0, 3.0],
                                                                                   dtype=torch.float64)
    want_c = (torch._standard_gamma_grad(ct.expand(50, 4), xs * rt) / rt).sum(0)
    np.testing.assert_allclose(c.grad.numpy(), want_c.numpy(), rtol=1e-3)
    np.testing.assert_allclose(r.grad.numpy(), (-xs / rt).sum(0).numpy(), rtol=1e-12)


def test_rsample_gradient_is_unbiased_for_the_mean():
    """E[d x / d c] = d E[x] / d c = 1 / rate; the mean of 40000 draws' gradients is within 5
    standard errors of it, and sample() holds no gradient."""
    tg.manual_seed(0)
    c = tg.tensor([0.3, 2.0, 9.0], dtype=tg.float64, requires_grad=True)
    d = tg.distributions.Gamma(c, tg.tensor([1.0, 2.0, 0.5], dtype=tg.float64))
    x = d.rsample((40000,))
    g = tg._standard_gamma_grad(c.detach().expand(40000, 3), x.detach() * d.rate) / d.rate
    x.mean(0).sum().backward()
    se = g.numpy().std(0) / math.sqrt(40000)
    assert np.all(np.abs(c.grad.numpy() - 1 / np.array([1.0, 2.0, 0.5])) < 5 * se)
    assert not d.sample((3,)).requires_grad


def test_chi2_and_student_t_as_torchs():
    out = []
    for L in (torch, tg):
        D = L.distributions
        row = [repr(D.Chi2(L.tensor([2.0, 3.0]))), tuple(D.Chi2(L.tensor([2.0, 3.0])).expand((3, 2)).df.shape),
               D.Chi2(L.tensor([2.0, 3.0], dtype=L.float64)).log_prob(L.tensor([1.5, 0.5], dtype=L.float64)).tolist(),
               D.Chi2(L.tensor([2.0, 3.0], dtype=L.float64)).mean.tolist(),
               D.Chi2(L.tensor([2.0, 3.0], dtype=L.float64)).variance.tolist(),
               [D.Chi2.has_rsample, D.StudentT.has_rsample, D.Gamma.has_rsample]]
        for f in (lambda: D.Chi2(L.tensor([-1.0])), lambda: D.StudentT(L.tensor([0.0]))):
            try:
                f()
            except ValueError as e:
                row.append(str(e))
        out.append(row)
    assert out[0][:2] + out[0][5:] == out[1][:2] + out[1][5:]
    np.testing.assert_allclose(out[1][2:5], out[0][2:5], rtol=1e-12)


def test_student_t_rsample_differentiates_through_the_chi2_draw(monkeypatch):
    """loc + scale z / sqrt(V / df), V = Gamma(df / 2, 1 / 2): torch's gradients at the same z and V."""
    drawn = {}
    real_gamma, real_randn = tg.torch_functions._standard_gamma, tg.distributions.families.C.randn

    def gamma(alpha, generator=None):
        drawn["g"] = real_gamma(alpha)
        return drawn["g"]

    def randn(*shape, **kw):
        drawn["z"] = real_randn(*shape, **kw)
        return drawn["z"]
    monkeypatch.setattr(tg.torch_functions, "_standard_gamma", gamma)
    monkeypatch.setattr(tg.distributions.families.C, "randn", randn)
    vals = ([0.7, 3.0, 25.0], [0.5, -1.0, 2.0], [1.5, 0.3, 2.0])
    df, loc, scale = (tg.tensor(v, dtype=tg.float64, requires_grad=True) for v in vals)
    y = tg.distributions.StudentT(df, loc, scale).rsample((20,))
    y.sum().backward()

    class StandardGamma(torch.autograd.Function):        # torch's node at tracegrad's draw
        @staticmethod
        def forward(ctx, alpha):
            out = torch.tensor(drawn["g"].detach().numpy())
            ctx.save_for_backward(alpha, out)
            return out

        @staticmethod
        def backward(ctx, grad):
            alpha, out = ctx.saved_tensors
            return grad * torch._standard_gamma_grad(alpha, out)
    dft, loct, scalet = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in vals)
    v = StandardGamma.apply((0.5 * dft).expand(20, 3)) / 0.5
    yt = loct + scalet * (torch.tensor(drawn["z"].numpy()) * torch.rsqrt(v / dft))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    yt.sum().backward()
    np.testing.assert_allclose(df.grad.numpy(), dft.grad.numpy(), rtol=1e-3)
    np.testing.assert_allclose(loc.grad.numpy(), loct.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(scale.grad.numpy(), scalet.grad.numpy(), rtol=1e-12)


# == Dirichlet and Beta ============================================================================
# torch's _dirichlet_grad is an approximation too: within 4.4e-3 of the derivative at the draws
# checked (30-digit differences of the incomplete beta function), so it is compared to 1e-2;
# tracegrad's is the derivative to ~1e-9, checked where it has a closed form: a Beta(a, 1) draw is
# u^(1/a) for a uniform u, so dx/da = -x log(x) / a, and 1 - x of a Beta(1, b) draw is u^(1/b).

def test_dirichlet_grad_has_the_closed_form_of_beta_a_1():
    rng = np.random.default_rng(0)
    a = np.repeat([0.02, 0.4, 1.0, 3.5, 60.0, 2e3], 6)
    x = np.maximum(rng.beta(a, 1.0), 1e-300)
    got = tg._dirichlet_grad(tg.tensor(x), tg.tensor(a), tg.tensor(a + 1)).numpy() * (1 - x)
    np.testing.assert_allclose(got, -x * np.log(x) / a, rtol=1e-8)


def test_dirichlet_grad_agrees_with_torchs_approximation():
    rng = np.random.default_rng(1)
    a, b = np.repeat([0.05, 0.7, 2.0, 9.0, 300.0], 20), np.tile(np.repeat([0.3, 1.5, 4.0, 50.0], 5), 5)
    x = np.clip(rng.beta(a, b), 1e-300, 1 - 1e-16)
    x[:3] = [0.0, 1.0, 1.0]                 # (the limits: draws that round to 0 or 1)
    for dt in ("float64", "float32"):
        want = torch._dirichlet_grad(*(torch.tensor(v, dtype=getattr(torch, dt)) for v in (x, a, a + b)))
        got = tg._dirichlet_grad(*(tg.tensor(v, dtype=getattr(tg, dt)) for v in (x, a, a + b)))
        assert str(got.dtype) == str(want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-2, atol=1e-30)


def test_dirichlet_grad_errors_as_torchs():
    out = []
    for L in (torch, tg):
        out.append(_outcomes((lambda: L._dirichlet_grad(L.ones(2, dtype=L.float16), L.ones(2, dtype=L.float16),
                                                        L.ones(2, dtype=L.float16)),
                              lambda: L._dirichlet_grad(L.ones(2, dtype=L.float64) / 2, L.ones(2), L.ones(2) * 3))))
    assert out[0] == out[1]


def test_beta_rsample_has_the_closed_form_gradients():
    """Beta(a, 1): dx/da = -x log(x) / a; Beta(1, b): dx/db = (1 - x) log(1 - x) / b."""
    tg.manual_seed(5)
    a = tg.tensor([0.3, 2.0, 7.0], dtype=tg.float64, requires_grad=True)
    x = tg.distributions.Beta(a, tg.ones(3, dtype=tg.float64)).rsample((30,))
    assert type(x.grad_fn).__name__ == "SelectBackward0"
    x.sum().backward()
    xs = x.detach().numpy()
    np.testing.assert_allclose(a.grad.numpy(), (-xs * np.log(xs) / a.detach().numpy()).sum(0), rtol=1e-8)
    b = tg.tensor([0.3, 2.0, 7.0], dtype=tg.float64, requires_grad=True)
    y = tg.distributions.Beta(tg.ones(3, dtype=tg.float64), b).rsample((30,))
    y.sum().backward()
    ys = y.detach().numpy()
    np.testing.assert_allclose(b.grad.numpy(), ((1 - ys) * np.log1p(-ys) / b.detach().numpy()).sum(0), rtol=1e-8)


def test_dirichlet_rsample_gradient_at_tracegrads_draws_is_torchs():
    """torch's backward of a draw: _dirichlet_grad(x, a, a0) (g - sum(x g))."""
    tg.manual_seed(6)
    conc = [[0.4, 2.0, 5.0], [3.0, 0.8, 1.2]]
    c = tg.tensor(conc, dtype=tg.float64, requires_grad=True)
    x = tg.distributions.Dirichlet(c).rsample((25,))
    assert type(x.grad_fn).__name__ == "_DirichletBackward" and tuple(x.shape) == (25, 2, 3)
    w = np.array([1.0, -2.0, 0.5])
    (x * tg.tensor(w)).sum().backward()
    xt, ct = torch.tensor(x.detach().numpy()), torch.tensor(conc, dtype=torch.float64).expand(25, 2, 3)
    g = torch.tensor(w).expand(25, 2, 3)
    want = torch._dirichlet_grad(xt, ct, ct.sum(-1, True).expand_as(ct)) * (g - (xt * g).sum(-1, True))
    np.testing.assert_allclose(c.grad.numpy(), want.sum(0).numpy(), rtol=1e-2)
    np.testing.assert_allclose(x.detach().numpy().sum(-1), 1.0, rtol=1e-12)
    x = tg.distributions.Dirichlet(c).rsample((25,))
    g1, = tg.autograd.grad((x * x).sum(), c, create_graph=True)
    with pytest.raises(NotImplementedError, match="_dirichlet_grad"):
        tg.autograd.grad(g1.sum(), c)


def test_dirichlet_rsample_gradient_is_unbiased_for_the_mean():
    """d E[x_0] / d a = d (a_0 / a0) / d a: the mean gradient of 20000 draws within 5 standard errors."""
    tg.manual_seed(1)
    conc = np.array([0.6, 2.0, 3.5])
    n = 20000
    c = tg.tensor(conc, requires_grad=True, dtype=tg.float64)
    x = tg.distributions.Dirichlet(c).rsample((n,))
    xs = x.detach()
    grads = tg._dirichlet_grad(xs, c.detach().expand(n, 3), tg.full((n, 3), float(conc.sum()), dtype=tg.float64))
    per_draw = grads.numpy() * (np.array([1.0, 0.0, 0.0]) - xs.numpy()[:, :1])     # (each draw's gradient of x_0)
    x[:, 0].mean().backward()
    total = conc.sum()
    want = -conc[0] / total ** 2 + np.array([1 / total, 0.0, 0.0])
    se = per_draw.std(0) / math.sqrt(n)
    assert np.all(np.abs(c.grad.numpy() - want) < 5 * se)
    assert not tg.distributions.Dirichlet(c).sample((2,)).requires_grad


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_dirichlet_and_beta_draws_stay_inside_the_unit_interval_as_torchs(dtype):
    """Tiny concentrations put nearly all the mass on one part: torch keeps every part between the
    smallest normal number and the largest number below 1 (a part at 1 would make the Beta's
    log density and its gradient's 1 - x degenerate)."""
    out = []
    for L in (torch, tg):
        L.manual_seed(0)
        dt = getattr(L, dtype)
        parts = L.cat([L.distributions.Dirichlet(L.tensor([1e-3, 1e-3], dtype=dt)).sample((500,)).reshape(-1),
                       L.distributions.Beta(L.tensor([1e-3], dtype=dt), L.tensor([1e-3], dtype=dt)).sample((500,))
                       .reshape(-1)])
        out.append((parts.max().item(), parts.min().item() >= L.finfo(dt).tiny))
    assert out[0] == out[1] and out[0][0] < 1


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_half_parameters_drawn_or_refused_as_torch(dt):
    """Draws from float16/bfloat16 parameters: torch's kernels refuse some (binomial_cpu, dirichlet,
    gamma's), computes others; tracegrad read the parameters through numpy() first, which refuses
    bfloat16, and raised a TypeError instead."""
    cases = [lambda m: m.distributions.Gamma(m.tensor([2.0]).to(getattr(m, dt)), m.tensor([1.0]).to(getattr(m, dt))).rsample(),
             lambda m: m.distributions.Dirichlet(m.tensor([2.0, 1.0]).to(getattr(m, dt))).rsample(),
             lambda m: m.distributions.Beta(m.tensor([2.0]).to(getattr(m, dt)), m.tensor([1.0]).to(getattr(m, dt))).rsample(),
             lambda m: m.distributions.Poisson(m.tensor([2.0]).to(getattr(m, dt))).sample(),
             lambda m: m.distributions.Binomial(5, m.tensor([0.3]).to(getattr(m, dt))).sample(),
             lambda m: m.distributions.StudentT(m.tensor([3.0]).to(getattr(m, dt))).rsample()]
    for f in cases:
        got = []
        for m in (torch, tg):
            try:
                got.append(("drawn", str(f(m).dtype)))
            except Exception as e:      # noqa: BLE001 (compared)
                got.append((type(e).__name__, str(e)))
        assert got[0] == got[1]

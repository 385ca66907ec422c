"""torch.distributions against torch: log_prob, entropy, cdf, icdf and their gradients, the
checks of parameters and of samples (validate_args, set_default_validate_args) with torch's
messages, repr, and linalg.cholesky_ex (its info and partial factor, which the positive-definite
check reads). Each case runs in both libraries; values (to 9 decimals) or the error's type and
message start must be equal."""
import numpy as np
import pytest
import torch

import tracegrad as tg



def outcome(f, L):
    try:
        r = f(L)
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        name = type(e).__name__.lstrip("_")       # (torch's linalg error class is _LinAlgError)
        return name + ": " + str(e)[:100]
    if isinstance(r, str):
        return r
    if isinstance(r, tuple):
        return tuple(_values(x) for x in r)
    return _values(r)


def _values(x):
    """Rounded values, as text (NaN equal to NaN; None, a gradient no path reaches, is NaN)."""
    return repr(np.round(np.asarray(x.detach().numpy() if hasattr(x, "detach") else x, dtype=float), 9).tolist())


def T(L, v, rg=True):
    return L.tensor(v, dtype=L.float64, requires_grad=rg)


def g(fn, *ins):
    v = fn(*ins)
    v.sum().backward()
    return (v,) + tuple(i.grad for i in ins)


CASES = {
    "normal_logprob": lambda L: (
        g(lambda m, s: L.distributions.Normal(m, s).log_prob(T(L, [0.5, -1.0, 2.0], False)),
        T(L, [0.0, 1.0, -1.0]), T(L, [1.0, 2.0, 0.5]))),
    "normal_entropy": lambda L: (
        g(lambda m, s: L.distributions.Normal(m, s).entropy(), T(L, [0.0, 1.0]),
        T(L, [1.0, 2.0]))),
    "normal_cdf": lambda L: (
        g(lambda m, s: L.distributions.Normal(m, s).cdf(T(L, [0.5, -1.0], False)),
        T(L, [0.0, 1.0]), T(L, [1.0, 2.0]))),
    "normal_icdf": lambda L: (
        g(lambda m, s: L.distributions.Normal(m, s).icdf(T(L, [0.2, 0.9], False)),
        T(L, [0.0, 1.0]), T(L, [1.0, 2.0]))),
    "normal_mean_var": lambda L: (
        (L.distributions.Normal(T(L, [0.0, 1.0]), T(L, [1.0, 2.0])).mean,
        L.distributions.Normal(T(L, [0.0, 1.0]), T(L, [1.0, 2.0])).variance,
        L.distributions.Normal(T(L, [0.0, 1.0]), T(L, [1.0, 2.0])).stddev)),
    "normal_bad_scale": lambda L: L.distributions.Normal(T(L, [0.0]), T(L, [-1.0])),
    "normal_validate_sample": lambda L: (
        L.distributions.Normal(T(L, [0.0]), T(L, [1.0])).log_prob(L.tensor([float("nan")],
        dtype=L.float64))),
    "normal_shapes": lambda L: (
        (L.tensor(L.distributions.Normal(T(L, [[0.0], [1.0]]), T(L, [1.0, 2.0, 3.0])).batch_shape),
        L.tensor(L.distributions.Normal(0.0, 1.0).batch_shape))),
    "cat_logprob": lambda L: (
        g(lambda p: L.distributions.Categorical(probs=p).log_prob(L.tensor([0, 2])),
        T(L, [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))),
    "cat_logits": lambda L: (
        g(lambda p: L.distributions.Categorical(logits=p).log_prob(L.tensor([1, 0])),
        T(L, [[0.2, -0.3, 0.5], [2.0, 0.1, 0.8]]))),
    "cat_entropy": lambda L: g(lambda p: L.distributions.Categorical(logits=p).entropy(), T(L, [[0.2, -0.3, 0.5]])),
    "cat_probs_attr": lambda L: L.distributions.Categorical(logits=T(L, [1.0, 2.0, 3.0])).probs,
    "cat_logits_attr": lambda L: L.distributions.Categorical(probs=T(L, [1.0, 2.0, 3.0])).logits,
    "cat_bad": lambda L: L.distributions.Categorical(probs=T(L, [-0.1, 1.0])),
    "cat_both": lambda L: L.distributions.Categorical(probs=T(L, [0.5, 0.5]), logits=T(L, [0.0, 0.0])),
    "cat_oob": lambda L: L.distributions.Categorical(probs=T(L, [0.5, 0.5])).log_prob(L.tensor([2])),
    "bern_logprob": lambda L: (
        g(lambda p: L.distributions.Bernoulli(probs=p).log_prob(T(L, [1.0, 0.0, 1.0], False)),
        T(L, [0.2, 0.7, 0.999]))),
    "bern_logits": lambda L: (
        g(lambda p: L.distributions.Bernoulli(logits=p).log_prob(T(L, [1.0, 0.0], False)),
        T(L, [30.0, -2.0]))),
    "bern_entropy": lambda L: g(lambda p: L.distributions.Bernoulli(probs=p).entropy(), T(L, [0.2, 0.7])),
    "bern_zero_prob": lambda L: (
        L.distributions.Bernoulli(probs=T(L, [0.0, 1.0], False)).log_prob(T(L,
        [0.0, 1.0], False))),
    "unif_logprob": lambda L: (
        g(lambda a, b: L.distributions.Uniform(a, b).log_prob(T(L, [0.5, 1.5], False)),
        T(L, [0.0, 1.0]), T(L, [1.0, 3.0]))),
    "unif_out": lambda L: L.distributions.Uniform(T(L, [0.0], False), T(L, [1.0], False)).log_prob(T(L, [2.0], False)),
    "unif_entropy": lambda L: (
        g(lambda a, b: L.distributions.Uniform(a, b).entropy(), T(L, [0.0, 1.0]),
        T(L, [1.0, 3.0]))),
    "unif_cdf": lambda L: L.distributions.Uniform(T(L, [0.0], False), T(L, [2.0], False)).cdf(T(L, [0.5], False)),
    "mvn_logprob": lambda L: (
        g(lambda m: L.distributions.MultivariateNormal(
            m, covariance_matrix=L.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=L.float64)).log_prob(
                T(L, [0.3, -0.2], False)), T(L, [0.0, 1.0]))),
    "mvn_scale_tril": lambda L: (
        g(lambda m: L.distributions.MultivariateNormal(
            m, scale_tril=L.tensor([[2.0, 0.0], [0.5, 1.0]], dtype=L.float64)).log_prob(
                T(L, [[0.3, -0.2], [1.0, 1.0]], False)), T(L, [0.0, 1.0]))),
    "mvn_entropy": lambda L: (
        L.distributions.MultivariateNormal(T(L, [0.0, 1.0], False), covariance_matrix=L.tensor([[2.0, 0.5], [0.5, 1.0]],
        dtype=L.float64)).entropy()),
    "mvn_precision": lambda L: (
        L.distributions.MultivariateNormal(T(L, [0.0, 1.0], False), precision_matrix=L.tensor([[2.0, 0.5], [0.5, 1.0]],
        dtype=L.float64)).log_prob(T(L, [0.1, 0.1], False))),
    "kl_normal": lambda L: (
        L.distributions.kl_divergence(L.distributions.Normal(T(L, [0.0], False),
        T(L, [1.0], False)), L.distributions.Normal(T(L, [1.0], False),
        T(L, [2.0], False))) if hasattr(D, "kl_divergence") else "no kl"),
    "normal_rsample_shape": lambda L: (
        L.tensor(L.distributions.Normal(T(L, [0.0, 1.0], False), T(L, [1.0, 2.0], False)).rsample((3,)).shape)),
    "cat_sample_shape": lambda L: (
        L.tensor(L.distributions.Categorical(probs=T(L, [0.2, 0.8], False)).sample((4, 2)).shape)),
    "mvn_not_pd": lambda L: L.distributions.MultivariateNormal(L.zeros(2), L.tensor([[1.0, 2.0], [2.0, 1.0]])),
    "mvn_not_sym": lambda L: L.distributions.MultivariateNormal(L.zeros(2), L.tensor([[1.0, 0.5], [0.0, 1.0]])),
    "mvn_bad_tril": lambda L: (
        L.distributions.MultivariateNormal(L.zeros(2), scale_tril=L.tensor([[1.0, 0.5], [0.0, 1.0]]))),
    "mvn_neg_diag": lambda L: (
        L.distributions.MultivariateNormal(L.zeros(2), scale_tril=L.tensor([[-1.0, 0.0], [0.0, 1.0]]))),
    "mvn_prec_not_pd": lambda L: L.distributions.MultivariateNormal(L.zeros(2), precision_matrix=-L.eye(2)),
    "mvn_nan_loc": lambda L: L.distributions.MultivariateNormal(L.tensor([float("nan"), 0.0]), L.eye(2)),
    "mvn_nan_value": lambda L: (
        L.distributions.MultivariateNormal(L.zeros(2), L.eye(2)).log_prob(L.tensor([float("nan"), 0.0]))),
    "mvn_bad_event": lambda L: L.distributions.MultivariateNormal(L.zeros(2), L.eye(2)).log_prob(L.zeros(3)),
    "mvn_batch_value": lambda L: L.distributions.MultivariateNormal(L.zeros(3, 2), L.eye(2)).log_prob(L.zeros(4, 1, 2)),
    "mvn_bad_batch": lambda L: L.distributions.MultivariateNormal(L.zeros(3, 2), L.eye(2)).log_prob(L.zeros(4, 2)),
    "mvn_repr": lambda L: repr(L.distributions.MultivariateNormal(L.zeros(2), L.eye(2))),
    "normal_repr": lambda L: (
        repr(L.distributions.Normal(L.zeros(2), L.ones(2))) + repr(L.distributions.Normal(0.0,
        1.0))),
    "noval": lambda L: (
        L.distributions.Normal(L.zeros(1), L.ones(1), validate_args=False).log_prob(L.tensor([float("nan")]))),
    "default_off": lambda L: (
        (L.distributions.Distribution.set_default_validate_args(False),
        L.distributions.Normal(L.zeros(1), -L.ones(1)).scale,
        L.distributions.Distribution.set_default_validate_args(True))[1]),
    "bern_value": lambda L: L.distributions.Bernoulli(probs=L.tensor([0.5])).log_prob(L.tensor([0.5])),
    "bern_bad": lambda L: L.distributions.Bernoulli(probs=L.tensor([1.5])),
    "cat_frac": lambda L: L.distributions.Categorical(probs=L.tensor([0.5, 0.5])).log_prob(L.tensor([0.5])),
    "unif_bounds": lambda L: L.distributions.Uniform(L.tensor([0.0]), L.tensor([1.0])).log_prob(L.tensor([1.0])),
    "unif_cdf_out": lambda L: L.distributions.Uniform(L.tensor([0.0]), L.tensor([1.0])).cdf(L.tensor([2.0])),
    "normal_icdf_out": lambda L: L.distributions.Normal(0.0, 1.0).icdf(L.tensor([1.5])),
    "normal_nan_loc": lambda L: L.distributions.Normal(L.tensor([float("nan")]), L.tensor([1.0])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_distribution_matches_torch(name):
    try:
        got = outcome(CASES[name], tg)
    finally:
        tg.distributions.Distribution.set_default_validate_args(True)
    try:
        want = outcome(CASES[name], torch)
    finally:
        torch.distributions.Distribution.set_default_validate_args(True)
    assert got == want


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_gives_info_and_the_partial_factor_as_torchs(upper):
    A = [[[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]],
         [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]]
    got = [m.linalg.cholesky_ex(m.tensor(A, dtype=m.float64), upper=upper) for m in (tg, torch)]
    assert got[0].info.tolist() == got[1].info.tolist() == [2, 0, 3]
    assert str(got[0].info.dtype) == str(got[1].info.dtype)
    np.testing.assert_allclose(got[0].L.numpy(), got[1].L.numpy(), rtol=1e-15)
    with pytest.raises(tg.linalg.LinAlgError, match=r"cholesky_ex: \(Batch element 0\): .* order 2 is not"):
        tg.linalg.cholesky_ex(tg.tensor(A, dtype=tg.float64), check_errors=True)


def test_cholesky_ex_of_a_positive_definite_matrix_differentiates():
    grads = []
    for m in (tg, torch):
        a = m.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=m.float64, requires_grad=True)
        L, info = m.linalg.cholesky_ex(a)
        assert info.item() == 0 and L.requires_grad
        (L * m.tensor([[1.0, 0.0], [2.0, 3.0]], dtype=m.float64)).sum().backward()
        grads.append(a.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


def test_linalg_results_print_as_torchs():
    for fn in (lambda m: m.linalg.cholesky_ex(m.eye(2)), lambda m: m.linalg.qr(m.eye(2)),
               lambda m: m.linalg.eigh(m.eye(2))):
        got, want = repr(fn(tg)), repr(fn(torch))
        assert got.split("=")[0] == want.split("=")[0]
        assert [line.split("=")[0] for line in got.splitlines() if "=" in line] == \
            [line.split("=")[0] for line in want.splitlines() if "=" in line]

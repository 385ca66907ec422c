"""kl_divergence(p, q): a table of closed forms keyed by the two families, filled by register_kl
(a decorator users call for their own pairs too); the most specific registered pair wins."""

from ..ops import functional as O
from ..nn import functional as NF
from .base import Normal, Categorical, Bernoulli, Uniform, MultivariateNormal
from .families import (Exponential, Laplace, LogNormal, Gamma, Beta, Poisson, Geometric, Binomial, Cauchy,
                       Dirichlet, OneHotCategorical, Independent, HalfNormal, _lbeta)
from .transformed_distribution import TransformedDistribution
from .derived import Gumbel, Pareto, EULER_GAMMA
from ..ops.composite import diag_embed
from .more_families import (ContinuousBernoulli, LowRankMultivariateNormal, _lowrank_logdet, _lowrank_mahalanobis,
                            _lower_solve, _trace_xxt)

__all__ = ["kl_divergence", "register_kl"]

_KL = {}


def register_kl(type_p, type_q):
    """@register_kl(P, Q) on fn(p, q) makes kl_divergence(p, q) call fn for p a P and q a Q."""
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError(f"Expected type_p and type_q to be subclasses of Distribution, but got {type_p} and {type_q}")

    def register(fn):
        _KL[type_p, type_q] = fn
        return fn
    return register


def kl_divergence(p, q):
    """KL(p || q) by the registered pair nearest to (type(p), type(q)) in their method resolution
    orders."""
    tp, tq = type(p), type(q)
    fits = [(tp.__mro__.index(a), tq.__mro__.index(b), fn) for (a, b), fn in _KL.items()
            if issubclass(tp, a) and issubclass(tq, b)]
    if not fits:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {tp.__name__} and q type {tq.__name__}")
    return min(fits, key=lambda f: f[:2])[2](p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - O.log(var_ratio))


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = O.where(O.broadcast_to(q.probs == 0, tuple(t.shape)), float("inf"), t)
    t = O.where(O.broadcast_to(p.probs == 0, tuple(t.shape)), 0.0, t)
    return O.sum(t, -1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (NF.softplus(-q.logits) - NF.softplus(-p.logits))
    t1 = O.where(q.probs == 0, float("inf"), t1)
    t1 = O.where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (NF.softplus(q.logits) - NF.softplus(p.logits))
    t2 = O.where(q.probs == 1, float("inf"), t2)
    t2 = O.where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = O.log((q.high - q.low) / (p.high - p.low))
    outside = O.logical_or(q.low > p.low, q.high < p.high)
    return O.where(outside, float("inf"), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - O.log(ratio)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    gap = O.abs(p.loc - q.loc)
    return O.log(q.scale / p.scale) + gap / q.scale + p.scale / q.scale * O.exp(-gap / p.scale) - 1


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    ratio = (p.scale / q.scale) ** 2
    return 0.5 * (ratio - 1 - O.log(ratio))


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return O.log(((p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2) / (4 * p.scale * q.scale))


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    a, b, c, d = p.concentration, p.rate, q.concentration, q.rate
    return (a - c) * O.digamma(a) - O.lgamma(a) + O.lgamma(c) + c * (O.log(b) - O.log(d)) + a * (d - b) / b


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a, b, c, d = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    return (_lbeta(c, d) - _lbeta(a, b) + (a - c) * O.digamma(a) + (b - d) * O.digamma(b)
            + (c - a + d - b) * O.digamma(a + b))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    a, c = p.concentration, q.concentration
    a0 = O.sum(a, -1, keepdim=True)
    return (O.lgamma(O.sum(a, -1)) - O.lgamma(O.sum(c, -1)) - O.sum(O.lgamma(a) - O.lgamma(c), -1)
            + O.sum((a - c) * (O.digamma(a) - O.digamma(a0)), -1))


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    # rate_p log(rate_p / rate_q) - rate_p + rate_q; xlogy keeps the rate_p = 0 term at 0
    return O.xlogy(p.rate, p.rate) - O.xlogy(p.rate, q.rate) - p.rate + q.rate


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    # -H(p) - E_p[k] log(1 - q) - log q, with E_p[k] = 1 / p - 1
    return -p.entropy() - O.log1p(-q.probs) / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool(O.any(p.total_count < q.total_count)):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    # n [p log(p / q) + (1 - p) log((1 - p) / (1 - q))] in logits; where p has more trials than q,
    # p puts mass where q has none: infinite
    kl = p.total_count * (p.probs * (p.logits - q.logits) + NF.softplus(q.logits) - NF.softplus(p.logits))
    return O.where(p.total_count > q.total_count, float("inf"), kl)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independent distributions with different reinterpreted_batch_ndims "
                                  "is not implemented")
    return p._summed(kl_divergence(p.base_dist, q.base_dist))


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """KL is invariant under one bijection applied to both: the bases' KL, where the transforms and
    the event shapes are the same (else none is known: NotImplementedError, as torch's)."""
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    # r = s_p / s_q, d = (m_p - m_q) / s_q: -log r + d + r gamma + E_p[exp(-(x - m_q) / s_q)] - (1 + gamma),
    # that expectation being Gamma(1 + r) exp(-d)
    r = p.scale / q.scale
    shift = (p.loc - q.loc) / q.scale
    return -O.log(r) + shift + r * EULER_GAMMA + O.exp(O.lgamma(1 + r) - shift) - (1 + EULER_GAMMA)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    # a_q log(s_p / s_q) - log(a_q / a_p) + a_q / a_p - 1; infinite where p has mass below q's support
    ratio = q.alpha / p.alpha
    kl = q.alpha * O.log(p.scale / q.scale) - O.log(ratio) + ratio - 1
    return O.where(p.scale < q.scale, float("inf"), kl)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    # E_p[x] (logit p - logit q) + log C(p) + log(1 - p) - log C(q) - log(1 - q)
    return (p.mean * (p.logits - q.logits) + p._cont_bern_log_norm() + O.log1p(-p.probs)
            - q._cont_bern_log_norm() - O.log1p(-q.probs))


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    """(log |S_q| - log |S_p| + tr(S_q^-1 S_p) + (m_q - m_p)^T S_q^-1 (m_q - m_p) - n) / 2, with
    S_q^-1 = diag(1/D_q) - A^T A (A = cap_q^-1 W_q^T D_q^-1) and S_p = W_p W_p^T + diag(D_p)."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Low Rank Multivariate Normals with                          "
                         "different event shapes cannot be computed")
    Wp, Dp = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    Wq, Dq = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    logdets = _lowrank_logdet(Wq, Dq, q._capacitance_tril) - _lowrank_logdet(Wp, Dp, p._capacitance_tril)
    maha = _lowrank_mahalanobis(Wq, Dq, q.loc - p.loc, q._capacitance_tril)
    A = _lower_solve(q._capacitance_tril, O.transpose(Wq, -2, -1) / O.unsqueeze(Dq, -2))
    trace = (O.sum(Dp / Dq, -1) + _trace_xxt(Wp * O.unsqueeze(O.rsqrt(Dq), -1))
             - _trace_xxt(A * O.unsqueeze(O.sqrt(Dp), -2)) - _trace_xxt(O.matmul(A, Wp)))
    return 0.5 * (logdets + trace + maha - p.event_shape[0])


_EVENT_SHAPES = "with                          different event shapes cannot be computed"


def _tril_solve_norm2(L, X):
    """|L^-1 X|_F^2 for lower-triangular L (the trace of X^T (L L^T)^-1 X), batches broadcast."""
    return _trace_xxt(_lower_solve(L, X))


def _log_diag_sum(L):
    return O.sum(O.log(O.diagonal(L, 0, -2, -1)), -1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    """log |L_q| - log |L_p| + (|L_q^-1 L_p|^2 + |L_q^-1 (m_q - m_p)|^2 - n) / 2."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals " + _EVENT_SHAPES)
    n = p.event_shape[0]
    Lq = q.scale_tril
    maha = _tril_solve_norm2(Lq, O.unsqueeze(q.loc - p.loc, -1))
    return (_log_diag_sum(Lq) - _log_diag_sum(p.scale_tril)
            + 0.5 * (_tril_solve_norm2(Lq, p.scale_tril) + maha - n))


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    """With S_p = W W^T + diag(D): tr(S_q^-1 S_p) = |L_q^-1 W|^2 + |L_q^-1 diag(sqrt D)|^2."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals " + _EVENT_SHAPES)
    n = p.event_shape[0]
    Lq = q.scale_tril
    W, D = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    logdets = 2 * _log_diag_sum(Lq) - _lowrank_logdet(W, D, p._capacitance_tril)
    maha = _tril_solve_norm2(Lq, O.unsqueeze(q.loc - p.loc, -1))
    trace = _tril_solve_norm2(Lq, W) + _tril_solve_norm2(Lq, diag_embed(O.sqrt(D)))
    return 0.5 * (logdets + trace + maha - n)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    """With S_q^-1 = diag(1/D) - A^T A (A = cap^-1 W^T D^-1): tr(S_q^-1 L_p L_p^T) =
    |D^-1/2 L_p|^2 - |A L_p|^2."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals " + _EVENT_SHAPES)
    n = p.event_shape[0]
    W, D = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    Lp = p.scale_tril
    logdets = _lowrank_logdet(W, D, q._capacitance_tril) - 2 * _log_diag_sum(Lp)
    maha = _lowrank_mahalanobis(W, D, q.loc - p.loc, q._capacitance_tril)
    A = _lower_solve(q._capacitance_tril, O.transpose(W, -2, -1) / O.unsqueeze(D, -2))
    trace = _trace_xxt(Lp * O.unsqueeze(O.rsqrt(D), -1)) - _trace_xxt(O.matmul(A, Lp))
    return 0.5 * (logdets + trace + maha - n)

"""More families from their densities: NegativeBinomial (a gamma-Poisson mixture),
ContinuousBernoulli (the Bernoulli likelihood normalized on [0, 1]), the relaxed bases
LogitRelaxedBernoulli and ExpRelaxedCategorical (logistic and Gumbel-softmax draws in logit and
log-simplex space; derived.py pushes them onto (0, 1) and the simplex), FisherSnedecor (a ratio of
gamma draws), MixtureSameFamily, LowRankMultivariateNormal (through its capacitance matrix) and
VonMises (the circular normal)."""
import math

import numpy as np

from ..tensor import Tensor, Size
from ..grad_mode import no_grad
from ..creation import RNG
from .. import creation as C
from .. import _dtype as D
from ..ops import functional as O
from ..nn import functional as NF
from ..ops.composite import diag_embed
from .. import linalg
from . import constraints
from .base import Distribution, Categorical, _as_tensor, _clamp_probs, _traced
from .families import _Family, _ProbsOrLogits, _OverCategories, Gamma, _host, _drawn

__all__ = ["NegativeBinomial", "ContinuousBernoulli", "LogitRelaxedBernoulli", "ExpRelaxedCategorical",
           "FisherSnedecor", "MixtureSameFamily", "LowRankMultivariateNormal", "VonMises"]


class NegativeBinomial(_ProbsOrLogits):
    """The number of successes (probability probs each) before total_count failures:
    P(k) = Gamma(n + k) / (Gamma(n) k!) p^k (1 - p)^n, n = total_count (real n >= 0 allowed)."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        given = probs if probs is not None else logits
        if isinstance(total_count, Tensor) and isinstance(given, Tensor):
            total_count = total_count.to(given.dtype)         # (torch's type_as)
        self._probs_or_logits(validate_args, probs, logits, total_count=total_count)

    @property
    def param_shape(self):
        return self._probs.shape

    @property
    def mean(self):
        return self.total_count * O.exp(self.logits)

    @property
    def mode(self):
        return O.clamp(O.floor((self.total_count - 1) * O.exp(self.logits)), min=0.0)

    @property
    def variance(self):
        return self.mean / O.sigmoid(-self.logits)

    def sample(self, sample_shape=()):
        """Poisson draws at Gamma(total_count, (1 - p) / p) rates (the mixture's definition)."""
        with no_grad():
            rate = Gamma(self.total_count, O.exp(-self.logits), validate_args=False).sample(sample_shape)
            return _drawn(RNG.gen.poisson(_host(rate)), self.logits)

    def log_prob(self, value):
        value = self._check_value(value)
        n = self.total_count
        unnormalized = n * NF.logsigmoid(-self.logits) + value * NF.logsigmoid(self.logits)
        # log(Gamma(n + k) / (Gamma(n) k!)), 0 at n + k = 0 (the sure count 0 of n = 0)
        log_choose = O.lgamma(n + value) - O.lgamma(1.0 + value) - O.lgamma(n)
        log_choose = O.where(n + value == 0.0, 0.0, log_choose)
        return unnormalized + log_choose


class ContinuousBernoulli(_ProbsOrLogits):
    """Density C(p) p^x (1 - p)^(1 - x) on [0, 1], C(p) = 2 atanh(1 - 2p) / (1 - 2p). Within
    lims of p = 1/2 the closed forms lose their digits: there the normalizer, mean and variance
    are torch's Taylor polynomials in p - 1/2, and cdf and icdf those of the uniform."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        self._lims = lims
        if probs is not None:
            probs = _as_tensor(probs)
            if validate_args is not None and not _traced(probs):
                # torch's own check of the probs as given (any explicit validate_args, even False;
                # an eager call's only, as every check of values)
                with no_grad():
                    if not bool(O.all(constraints.unit_interval.check(probs))):
                        raise ValueError("The parameter probs has invalid values")
            self._probs_or_logits(validate_args, _clamp_probs(probs), None)
        else:
            self._probs_or_logits(validate_args, None, logits)
            self.probs = _clamp_probs(self._probs)

    @property
    def param_shape(self):
        return self._probs.shape

    def _stable(self):
        """Where p is outside [lims[0], lims[1]]: the closed forms hold there."""
        return O.logical_or(self.probs <= self._lims[0], self.probs > self._lims[1])

    def _cut(self):
        """p where the closed forms are used, lims[0] elsewhere (a finite stand-in: where() still
        differentiates the unused branch)."""
        return O.where(self._stable(), self.probs, self._lims[0] * O.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        p = self._cut()
        # log |log(1 - p) - log p| - log |1 - 2p|, the second term written on each side of 1/2
        below = O.where(p <= 0.5, p, O.zeros_like(p))
        above = O.where(p >= 0.5, p, O.ones_like(p))
        log_gap = O.where(p <= 0.5, O.log1p(-2.0 * below), O.log(2.0 * above - 1.0))
        exact = O.log(O.abs(O.log1p(-p) - O.log(p))) - log_gap
        x = (self.probs - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return O.where(self._stable(), exact, taylor)

    @property
    def mean(self):
        p = self._cut()
        exact = p / (2.0 * p - 1.0) + 1.0 / (O.log1p(-p) - O.log(p))
        x = self.probs - 0.5
        return O.where(self._stable(), exact, 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x ** 2) * x)

    @property
    def variance(self):
        p = self._cut()
        exact = p * (p - 1.0) / (1.0 - 2.0 * p) ** 2 + 1.0 / (O.log1p(-p) - O.log(p)) ** 2
        x = (self.probs - 0.5) ** 2
        return O.where(self._stable(), exact, 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x)

    @property
    def stddev(self):
        return O.sqrt(self.variance)

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        u = C.rand(*shape, dtype=self.probs.dtype) if shape else C.rand((), dtype=self.probs.dtype)
        return self.icdf(u)

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value):
        value = self._check_value(value)
        logits, value = O.broadcast_tensors(self.logits, value)
        return -NF.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        value = self._check_value(value)
        p = self._cut()
        exact = (p ** value * (1.0 - p) ** (1.0 - value) + p - 1.0) / (2.0 * p - 1.0)
        inside = O.where(self._stable(), exact, value)
        return O.where(value <= 0.0, O.zeros_like(value), O.where(value >= 1.0, O.ones_like(value), inside))

    def icdf(self, value):
        value = _as_tensor(value, self.probs)
        p = self._cut()
        exact = (O.log1p(-p + value * (2.0 * p - 1.0)) - O.log1p(-p)) / (O.log(p) - O.log1p(-p))
        return O.where(self._stable(), exact, value)

    def entropy(self):
        log_q, log_p = O.log1p(-self.probs), O.log(self.probs)
        return self.mean * (log_q - log_p) - self._cont_bern_log_norm() - log_q


class LogitRelaxedBernoulli(_ProbsOrLogits):
    """The logit of a RelaxedBernoulli draw: (logit(u) + logits) / temperature for u uniform, a
    logistic variable of log density log t + d - 2 log(1 + e^d), d = logits - t x. (torch leaves
    has_rsample False here though rsample exists.)"""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        self._probs_or_logits(validate_args, probs, logits)

    @property
    def param_shape(self):
        return self._probs.shape

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        p = _clamp_probs(O.expand(self.probs, *shape))
        u = C.rand(*shape, dtype=p.dtype) if shape else C.rand((), dtype=p.dtype)
        u = _clamp_probs(u)
        return (O.log(u) - O.log1p(-u) + O.log(p) - O.log1p(-p)) / self.temperature

    def log_prob(self, value):
        value = self._check_value(value)
        logits, value = O.broadcast_tensors(self.logits, value)
        t = _as_tensor(self.temperature, logits)
        d = logits - value * t
        return O.log(t) + d - 2 * O.log1p(O.exp(d))


class ExpRelaxedCategorical(_OverCategories, Distribution):
    """The log of a RelaxedOneHotCategorical draw: log_softmax((logits + G) / temperature) for G
    standard Gumbel draws (a vector of K per batch entry)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        self._batch_shape = tuple(self._categorical._batch_shape)
        self._event_shape = (self._categorical._num_events,)
        self._validation(validate_args)
        if self._validate_args:
            # torch checks probs and logits through these properties: the Categorical's lazy one
            # is read (and shows in its repr)
            for name, c in self.arg_constraints.items():
                self._check_param(name, getattr(self, name), c.check, repr(c))


    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape) + tuple(self._event_shape)
        u = _clamp_probs(C.rand(*shape, dtype=self.logits.dtype))
        gumbels = -O.log(-O.log(u))
        scores = (self.logits + gumbels) / self.temperature
        return scores - O.logsumexp(scores, -1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        self._validate_sample(value, self.support.check, repr(self.support))
        logits, value = O.broadcast_tensors(self.logits, value)
        t = _as_tensor(self.temperature, logits)
        # log (K-1)! + (K-1) log t, and sum_i of log_softmax(logits - t x)_i
        log_scale = math.lgamma(k) + (k - 1) * O.log(t)
        score = logits - value * t
        return O.sum(score - O.logsumexp(score, -1, keepdim=True), -1) + log_scale


class FisherSnedecor(_Family):
    """The ratio (X1 / df1) / (X2 / df2) of independent chi-square variables: each part a
    Gamma(df / 2, df) draw (these Gammas validate their parameters by default, as torch's)."""
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        like = df1 if isinstance(df1, Tensor) else (df2 if isinstance(df2, Tensor) else None)
        self.df1, self.df2 = O.broadcast_tensors(_as_tensor(df1, like), _as_tensor(df2, like))
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        self._batch_shape = tuple(self.df1.shape)
        self._validation(validate_args)
        for name in ("df1", "df2"):
            c = self.arg_constraints[name]
            self._check_param(name, getattr(self, name), c.check, repr(c))

    # where a moment does not exist, df2 is NaN in its formula (torch's): the value is NaN, and so
    # is its gradient in df1, while df2's is zero

    @property
    def mean(self):
        df2 = O.where(self.df2 > 2, self.df2, math.nan)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        df1, df2 = self.df1, self.df2
        return O.where(df1 > 2, (df1 - 2) / df1 * df2 / (df2 + 2), math.nan)

    @property
    def variance(self):
        df1, df2 = self.df1, O.where(self.df2 > 4, self.df2, math.nan)
        return 2 * df2 ** 2 * (df1 + df2 - 2) / (df1 * (df2 - 2) ** 2 * (df2 - 4))

    def rsample(self, sample_shape=()):
        tiny = float(D.finfo(self.df1.dtype).tiny)
        x1 = self._gamma1.rsample(sample_shape)
        x2 = O.clamp(self._gamma2.rsample(sample_shape), min=tiny)
        return O.clamp(x1 / x2, min=tiny)

    def log_prob(self, value):
        value = self._check_value(value)
        h1, h2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        log_norm = O.lgamma(h1 + h2) - O.lgamma(h1) - O.lgamma(h2)
        return log_norm + h1 * O.log(ratio) + (h1 - 1) * O.log(value) - (h1 + h2) * O.log1p(ratio * value)


class MixtureSameFamily(Distribution):
    """A mixture of the components along component_distribution's rightmost batch dimension,
    weighted by mixture_distribution (a Categorical over them): log p(x) = logsumexp_k(log w_k +
    log p_k(x)). Draws pick each entry's component by a Categorical draw (no rsample, as torch's)."""
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of torch.distributions.Distribution")
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for m, c in zip(reversed(mdbs), reversed(cdbs)):
            if m != 1 and c != 1 and m != c:
                raise ValueError(f"`mixture_distribution.batch_shape` ({Size(mdbs)}) is not compatible with "
                                 f"`component_distribution.batch_shape`({Size(cdbs)})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, tuple(component_distribution.event_shape), validate_args=validate_args)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._component_distribution = self._component_distribution.expand(batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._batch_shape = batch_shape
        return new

    def __repr__(self):
        return f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})"

    def _pad(self, x):
        """x with a component dimension of 1 before its event dimensions."""
        return O.unsqueeze(x, -1 - self._event_ndims)

    def _weights(self):
        """The mixture's probs laid out against the components' means: its batch dimensions
        aligned on the right with the mixture's batch (torch's padding: none for a one-dimensional
        mixture batch), a 1 for each event dimension."""
        probs = self.mixture_distribution.probs
        cat_ndims = len(self.mixture_distribution.batch_shape)
        pad = 0 if cat_ndims == 1 else len(self._batch_shape) - cat_ndims
        shape = tuple(probs.shape)
        return probs.reshape(shape[:-1] + (1,) * pad + shape[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self):
        return O.sum(self._weights() * self.component_distribution.mean, -1 - self._event_ndims)

    @property
    def variance(self):
        w = self._weights()
        comp = self.component_distribution
        within = O.sum(w * comp.variance, -1 - self._event_ndims)
        between = O.sum(w * (comp.mean - self._pad(self.mean)) ** 2, -1 - self._event_ndims)
        return within + between

    def cdf(self, x):
        return O.sum(self.component_distribution.cdf(self._pad(x)) * self.mixture_distribution.probs, -1)

    def log_prob(self, x):
        s = self.support
        self._validate_sample(x, s.check, repr(s))
        lp = self.component_distribution.log_prob(self._pad(x))
        return O.logsumexp(lp + NF.log_softmax(self.mixture_distribution.logits, -1), -1)

    def sample(self, sample_shape=()):
        with no_grad():
            sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
            at = len(sample_shape) + len(self._batch_shape)
            event = tuple(self.event_shape)
            which = self.mixture_distribution.sample(sample_shape)          # sample + mixture batch
            draws = self.component_distribution.sample(sample_shape)       # sample + batch + (K,) + event
            index = which.reshape(tuple(which.shape) + (1,) * (len(event) + 1))
            index = O.expand(index, *(sample_shape + tuple(self._batch_shape) + (1,) + event))
            return O.squeeze(O.gather(draws, at, index), at)


def _lower_solve(L, B):
    """L^-1 B for lower-triangular L, batch dimensions broadcast."""
    lead = O.broadcast_shapes(tuple(L.shape[:-2]), tuple(B.shape[:-2]))
    L = O.expand(L, *(tuple(lead) + tuple(L.shape[-2:])))
    B = O.expand(B, *(tuple(lead) + tuple(B.shape[-2:])))
    return linalg.solve_triangular(L, B, upper=False)


def _capacitance_tril(W, D):
    """The Cholesky factor of I + W^T D^-1 W (rank x rank): what the Woodbury identity and the
    matrix determinant lemma reduce W W^T + diag(D) to."""
    rank = W.shape[-1]
    Wt_Dinv = O.transpose(W, -2, -1) / O.unsqueeze(D, -2)
    return linalg.cholesky(O.matmul(Wt_Dinv, W) + C.eye(rank, dtype=W.dtype))


def _lowrank_logdet(W, D, cap):
    """log |W W^T + diag(D)| = log |I + W^T D^-1 W| + sum log D."""
    return 2 * O.sum(O.log(O.diagonal(cap, 0, -2, -1)), -1) + O.sum(O.log(D), -1)


def _lowrank_mahalanobis(W, D, x, cap):
    """x^T (W W^T + diag(D))^-1 x = x^T D^-1 x - |cap^-1 W^T D^-1 x|^2 (Woodbury)."""
    Wt_Dinv = O.transpose(W, -2, -1) / O.unsqueeze(D, -2)
    z = _lower_solve(cap, O.unsqueeze(O.squeeze(O.matmul(Wt_Dinv, O.unsqueeze(x, -1)), -1), -1))
    return O.sum(x ** 2 / D, -1) - O.sum(O.squeeze(z, -1) ** 2, -1)


def _trace_xxt(x):
    """trace(x x^T) of each matrix of a batch."""
    return O.sum(O.sum(x ** 2, -1), -1)


class LowRankMultivariateNormal(Distribution):
    """N(loc, W W^T + diag(D)) for W = cov_factor (n x rank) and D = cov_diag: log_prob and
    entropy through the rank x rank capacitance matrix, draws as loc + W e1 + sqrt(D) e2."""
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        n = loc.shape[-1]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != (n,):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {n} x m")
        if tuple(cov_diag.shape[-1:]) != (n,):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {Size((n,))}")
        try:
            lead = O.broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]), tuple(cov_diag.shape[:-1]))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"Incompatible batch shapes: loc {Size(tuple(loc.shape))}, cov_factor "
                             f"{Size(tuple(cov_factor.shape))}, cov_diag {Size(tuple(cov_diag.shape))}") from e
        lead = tuple(lead)
        self.loc = O.expand(loc, *(lead + (n,)))
        self.cov_factor = O.expand(cov_factor, *(lead + tuple(cov_factor.shape[-2:])))
        self.cov_diag = O.expand(cov_diag, *(lead + (n,)))
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        super().__init__(lead, (n,), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        shape = tuple(batch_shape) + tuple(self._event_shape)
        new.loc = O.expand(self.loc, *shape)
        new.cov_diag = O.expand(self.cov_diag, *shape)
        new.cov_factor = O.expand(self.cov_factor, *(shape + tuple(self.cov_factor.shape[-1:])))
        new._batch_shape = tuple(batch_shape)
        return new

    def _full(self, t, matrix=False):
        n = tuple(self._event_shape)
        return O.expand(t, *(tuple(self._batch_shape) + n + (n if matrix else ())))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._full(O.sum(self._unbroadcasted_cov_factor ** 2, -1) + self._unbroadcasted_cov_diag)

    @property
    def scale_tril(self):
        # sqrt(D) chol(I + D^-1/2 W W^T D^-1/2): a Cholesky factor of W W^T + diag(D)
        n = self._event_shape[0]
        root = O.unsqueeze(O.sqrt(self._unbroadcasted_cov_diag), -1)
        scaled = self._unbroadcasted_cov_factor / root
        inner = O.matmul(scaled, O.transpose(scaled, -2, -1)) + C.eye(n, dtype=scaled.dtype)
        return self._full(root * linalg.cholesky(inner), True)

    @property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return self._full(O.matmul(W, O.transpose(W, -2, -1)) + diag_embed(self._unbroadcasted_cov_diag), True)

    @property
    def precision_matrix(self):
        # diag(1/D) - A^T A, A = cap^-1 W^T D^-1 (Woodbury)
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        A = _lower_solve(self._capacitance_tril, O.transpose(W, -2, -1) / O.unsqueeze(D, -2))
        return self._full(diag_embed(1 / D) - O.matmul(O.transpose(A, -2, -1), A), True)

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape) + tuple(self._event_shape)
        W = self._unbroadcasted_cov_factor
        eps_w = C.randn(*(shape[:-1] + tuple(W.shape[-1:])), dtype=self.loc.dtype)
        eps_d = C.randn(*shape, dtype=self.loc.dtype)
        return (self.loc + O.squeeze(O.matmul(W, O.unsqueeze(eps_w, -1)), -1)
                + O.sqrt(self._unbroadcasted_cov_diag) * eps_d)

    def _logdet(self):
        return _lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        s = self.support
        self._validate_sample(value, s.check, repr(s))
        m = _lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, value - self.loc,
                                 self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._logdet() + m)

    def entropy(self):
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._logdet())
        return O.expand(h, *tuple(self._batch_shape)) if self._batch_shape else h


# Abramowitz & Stegun 9.8.1-9.8.4: I0 and I1 by polynomials in (x / 3.75)^2 below 3.75, and
# e^x / sqrt(x) times polynomials in 3.75 / x above (relative error about 1e-7): torch's choice,
# so that log_prob and variance are torch's numbers
_BESSEL_SMALL = ([1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2],
                 [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3])
_BESSEL_LARGE = ([0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1,
                  -0.1647633e-1, 0.392377e-2],
                 [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
                  -0.2895312e-1, 0.1787654e-1, -0.420059e-2])


def _horner(y, coefficients):
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = c + y * result
    return result


def _log_bessel_i(x, order):
    """log I_order(x) for x > 0, order 0 or 1."""
    small = _horner((x / 3.75) ** 2, _BESSEL_SMALL[order])
    if order == 1:
        small = O.abs(x) * small
    large = x - 0.5 * O.log(x) + O.log(_horner(3.75 / x, _BESSEL_LARGE[order]))
    return O.where(x < 3.75, O.log(small), large)


# Above this concentration the draws are normal with variance 1 / concentration (the von Mises
# density is exp(k cos t) = exp(k - k t^2 / 2 + k t^4 / 24 ...), so their law is within about
# 1 / (24 k) < 1e-9 of it), where the rejection sampler's float64 arithmetic is worse (its test
# subtracts numbers within 1 / k of 1) and, from about 1e15 on, never accepts (torch's hangs)
_VON_MISES_NORMAL_FROM = 1e8


def _von_mises_draws(loc, kappa, shape, gen):
    """Best and Fisher's (1979) rejection sampler in float64 (torch's: float32 hangs for small
    concentrations): a wrapped-Cauchy envelope of parameter r accepts f = (1 + r z) / (r + z),
    z = cos(pi u1), by a squeeze test and then the exact test; the angle is +-acos(f) about loc,
    returned in [-pi, pi). Concentrations from _VON_MISES_NORMAL_FROM on (an infinite one too:
    the point loc) draw N(0, 1 / k) offsets; a NaN concentration (unchecked) draws NaN, and 0
    (unchecked) the uniform angle."""
    loc = np.broadcast_to(loc, shape)
    kappa = np.broadcast_to(kappa, shape)
    x = np.zeros(shape)
    done = np.zeros(shape, dtype=bool)
    peaked = kappa >= _VON_MISES_NORMAL_FROM
    if peaked.any():
        x = np.where(peaked, gen.standard_normal(shape) / np.sqrt(np.where(peaked, kappa, 1.0)), x)
        done |= peaked
    x = np.where(np.isnan(kappa), np.nan, x)
    done |= np.isnan(kappa)
    flat = kappa == 0                      # (unchecked: the uniform law, which the sampler never accepts)
    if flat.any():
        x = np.where(flat, math.pi * (2 * gen.random(shape) - 1), x)
        done |= flat
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tau = 1 + np.sqrt(1 + 4 * kappa ** 2)
        rho = (tau - np.sqrt(2 * tau)) / (2 * kappa)
        r = np.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))
    while not done.all():
        u1, u2, u3 = gen.random((3,) + shape)
        z = np.cos(math.pi * u1)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = (1 + r * z) / (r + z)
            c = kappa * (r - f)
            accept = ((c * (2 - c) - u2) > 0) | (np.log(c / u2) + 1 - c >= 0)
        accept &= ~done
        x = np.where(accept, np.sign(u3 - 0.5) * np.arccos(np.clip(f, -1, 1)), x)
        done |= accept
    return np.mod(x + math.pi + loc, 2 * math.pi) - math.pi


class VonMises(_Family):
    """The circular normal: density exp(concentration cos(x - loc)) / (2 pi I0(concentration)) of
    an angle (any real x, read modulo 2 pi). mean and variance are the circular ones: loc and
    1 - I1(k) / I0(k). Draws lie in [-pi, pi) and do not differentiate (no rsample, as torch's)."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self._init_params(validate_args, loc=loc, concentration=concentration)

    def log_prob(self, value):
        value = self._check_value(value)
        return (self.concentration * O.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_bessel_i(self.concentration, 0))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        k = self.concentration
        return 1 - O.exp(_log_bessel_i(k, 1) - _log_bessel_i(k, 0))

    def sample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        gen = RNG.gen              # (first: inside a compiled function, the random ops' refusal)
        with no_grad():
            return _drawn(_von_mises_draws(_host(self.loc), _host(self.concentration), shape, gen), self.loc)

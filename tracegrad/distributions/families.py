"""The families beyond the Gaussian and the categorical: Exponential, Laplace, LogNormal, Gamma,
Beta, Poisson, Geometric, Binomial, Cauchy, StudentT, Dirichlet, OneHotCategorical, Multinomial,
Independent and HalfNormal, each from its density in tracegrad ops.

Draws: rsample transforms uniform or normal draws where the family is a transform of one
(Exponential, Laplace, Cauchy, LogNormal, HalfNormal), so gradients reach the parameters. Gamma
draws come from numpy's gamma sampler through torch._standard_gamma, which differentiates a draw in
its concentration by the implicit function theorem (ops/igamma_primitives.py); Chi2 and StudentT
reparameterize through it. Dirichlet draws normalize gamma draws and differentiate through their
Beta marginals (ops/dirichlet_primitives.py); a Beta draw is the first part of a Dirichlet([a, b])
draw. Discrete draws (Poisson,
Geometric, Binomial, Multinomial) come from numpy's samplers.
"""
import math

import numpy as np

from ..tensor import Tensor, Size
from ..grad_mode import no_grad
from ..creation import RNG
from .. import creation as C
from .. import _dtype as D
from .. import special
from ..ops import functional as O
from ..nn import functional as NF
from .. import torch_functions as TF
from ..tracing import apply
from ..ops.primitives import PRIMITIVES
from . import constraints
from .base import Distribution, Normal, Categorical, _ProbsAndLogits, _as_tensor, _traced

_LOG_2 = math.log(2.0)
_LOG_PI = math.log(math.pi)


def _full(d, value):
    """value over d's batch shape, in its parameters' dtype (torch's full(_extended_shape()))."""
    return C.full(tuple(d._batch_shape), value, dtype=d._like().dtype)


def _lbeta(a, b):
    return O.lgamma(a) + O.lgamma(b) - O.lgamma(a + b)


def _logits_of(probs):
    """log(p / (1 - p)) of probs kept in [eps, 1 - eps], as torch's probs-to-logits."""
    eps = float(D.finfo(probs.dtype).eps)
    p = O.clamp(probs, min=eps, max=1 - eps)
    return O.log(p) - O.log1p(-p)


def _host(t):
    """A parameter's values on the host in float64 (a half type's through float32: numpy() refuses
    bfloat16, and the draw's own kernel then says whether the dtype is taken, as torch's)."""
    t = t.detach().cpu()
    if t.dtype is D.bfloat16 or t.dtype is D.float16:
        t = t.float()
    return np.asarray(t.numpy(), dtype=np.float64)


def _drawn(values, like):
    """A numpy draw as a tensor of the parameters' dtype, on their device (no gradient: sample's
    contract). A draw of no batch may come back a numpy scalar: it stays 0-dimensional."""
    values = np.asarray(values, dtype=np.float64)
    return C.tensor(np.ascontiguousarray(values).reshape(values.shape), dtype=like.dtype, device=like.device)


def _uniform_open(shape, like):
    """Uniform draws in (0, 1): zero, which the inverse CDFs send to an infinity, is moved to the
    dtype's smallest normal number."""
    u = C.rand(*shape, dtype=like.dtype) if shape else C.rand((), dtype=like.dtype)
    return O.clamp(u, min=float(D.finfo(like.dtype).tiny))


class _Family(Distribution):
    """Parameters broadcast together into one batch, each checked against arg_constraints;
    repr prints the names in _printed (torch prints none for the families it builds by
    transforming another)."""
    arg_constraints = {}
    support = constraints.real
    _printed = None
    _checked_as = {}

    def _init_params(self, validate_args, **params):
        tensors = [v for v in params.values() if isinstance(v, Tensor)]
        like = tensors[0] if tensors else None
        values = O.broadcast_tensors(*(_as_tensor(v, like) for v in params.values()))
        for name, v in zip(params, values):
            setattr(self, name, v)
        self._batch_shape = tuple(values[0].shape)
        self._validation(validate_args)
        for name in params:
            c = self.arg_constraints[name]
            self._check_param(name, getattr(self, name), c.check, repr(c), self._checked_as.get(name))

    def _params(self):
        names = self._printed if self._printed is not None else tuple(self.arg_constraints)
        return tuple((k, self.__dict__[k]) for k in names if k in self.__dict__)

    def _check_value(self, value):
        s = self.support
        self._validate_sample(value, s.check, repr(s))
        return _as_tensor(value, self._like())

    def _like(self):
        return next(v for v in self.__dict__.values() if isinstance(v, Tensor))


# == continuous, location-scale ====================================================================

class _LocationScale(_Family):
    """loc + scale * Z for a standard Z given by its log density, CDF, inverse CDF and entropy."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(validate_args, loc=loc, scale=scale)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    def rsample(self, sample_shape=()):
        u = _uniform_open(self._extended(sample_shape), self.loc)
        return self.loc + self.scale * self._std_icdf(u)

    def log_prob(self, value):
        value = self._check_value(value)
        return self._std_log_density((value - self.loc) / self.scale) - O.log(self.scale)

    def cdf(self, value):
        value = self._check_value(value)
        return self._std_cdf((value - self.loc) / self.scale)

    def icdf(self, value):
        return self.loc + self.scale * self._std_icdf(_as_tensor(value, self.loc))

    def entropy(self):
        return self._std_entropy + O.log(self.scale)


class Laplace(_LocationScale):
    """Density exp(-|x - loc| / scale) / (2 scale)."""
    _std_entropy = 1.0 + _LOG_2

    @property
    def variance(self):
        return 2 * self.scale ** 2

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    @staticmethod
    def _std_log_density(z):
        return -O.abs(z) - _LOG_2

    @staticmethod
    def _std_cdf(z):
        return 0.5 - 0.5 * O.sign(z) * O.expm1(-O.abs(z))

    @staticmethod
    def _std_icdf(p):
        d = p - 0.5
        return -O.sign(d) * O.log1p(-2 * O.abs(d))


class Cauchy(_LocationScale):
    """Density 1 / (pi scale (1 + ((x - loc) / scale)^2)); no mean (NaN) and infinite variance."""
    _std_entropy = math.log(4 * math.pi)

    @property
    def mean(self):
        return _full(self, float("nan"))

    @property
    def variance(self):
        return _full(self, float("inf"))

    @staticmethod
    def _std_log_density(z):
        return -O.log1p(z * z) - _LOG_PI

    @staticmethod
    def _std_cdf(z):
        return O.atan(z) / math.pi + 0.5

    @staticmethod
    def _std_icdf(p):
        return O.tan(math.pi * (p - 0.5))


# == continuous, transforms of a normal ===========================================================

class LogNormal(_Family):
    """exp(X) for X ~ Normal(loc, scale)."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True
    _printed = ()

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(validate_args, loc=loc, scale=scale)
        self.base_dist = Normal(self.loc, self.scale, validate_args=validate_args)

    @property
    def mean(self):
        return O.exp(self.loc + self.scale ** 2 / 2)

    @property
    def mode(self):
        return O.exp(self.loc - self.scale ** 2)

    @property
    def variance(self):
        s2 = self.scale ** 2
        return O.expm1(s2) * O.exp(2 * self.loc + s2)

    @property
    def stddev(self):
        return O.sqrt(self.variance)

    def rsample(self, sample_shape=()):
        return O.exp(self.base_dist.rsample(sample_shape))

    def log_prob(self, value):
        y = O.log(self._check_value(value))
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        # as torch's transformed distribution: log(value) is checked against the normal's support,
        # so 0 (log -inf) gives 0 and only a negative value (log NaN) is refused
        return self.base_dist.cdf(O.log(value))

    def icdf(self, value):
        return O.exp(self.base_dist.icdf(value))

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class HalfNormal(_Family):
    """|X| for X ~ Normal(0, scale)."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _printed = ()

    def __init__(self, scale, validate_args=None):
        self._init_params(validate_args, scale=scale)
        self.base_dist = Normal(O.zeros_like(self.scale), self.scale, validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return O.zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale ** 2 * (1 - 2 / math.pi)

    @property
    def stddev(self):
        return O.sqrt(self.variance)

    def rsample(self, sample_shape=()):
        return O.abs(self.base_dist.rsample(sample_shape))

    def log_prob(self, value):
        value = self._check_value(value)
        lp = self.base_dist.log_prob(value) + _LOG_2
        return O.where(value >= 0, lp, float("-inf"))

    def cdf(self, value):
        return 2 * self.base_dist.cdf(self._check_value(value)) - 1

    def icdf(self, value):
        return self.base_dist.icdf((_as_tensor(value, self.scale) + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - _LOG_2


class Exponential(_Family):
    """Density rate exp(-rate x) on x >= 0."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self._init_params(validate_args, rate=rate)

    @property
    def mean(self):
        return 1 / self.rate

    @property
    def mode(self):
        return O.zeros_like(self.rate)

    @property
    def stddev(self):
        return 1 / self.rate

    @property
    def variance(self):
        return self.rate ** -2

    def rsample(self, sample_shape=()):
        return -O.log(_uniform_open(self._extended(sample_shape), self.rate)) / self.rate

    def log_prob(self, value):
        value = self._check_value(value)
        return O.log(self.rate) - self.rate * value

    def cdf(self, value):
        value = self._check_value(value)
        return 1 - O.exp(-self.rate * value)

    def icdf(self, value):
        return -O.log1p(-_as_tensor(value, self.rate)) / self.rate

    def entropy(self):
        return 1.0 - O.log(self.rate)


# == continuous, gamma-based ======================================================================

def _gamma_rsample(concentration, rate, shape):
    """Gamma(concentration, rate) draws of the given shape, differentiable in both (the draw's
    implicit derivative in the concentration, torch._standard_gamma's). A draw that a large rate
    sends below the dtype's smallest normal number is raised to it, its gradient left alone (torch's
    clamp of the detached value)."""
    value = TF._standard_gamma(O.expand(concentration, *shape)) / O.expand(rate, *shape)
    with no_grad():
        value.detach().clamp_(min=float(D.finfo(value.dtype).tiny))
    return value


def _standard_gamma(concentration, shape):
    """Gamma(concentration, 1) draws of the given shape (concentration broadcast to it), kept
    above the dtype's smallest normal number as torch's are."""
    draw = RNG.gen.standard_gamma       # (first: inside a compiled function, the random ops' refusal)
    a = np.broadcast_to(_host(concentration), shape)
    tiny = float(D.finfo(concentration.dtype).tiny)
    return np.maximum(draw(a), tiny)


class Gamma(_Family):
    """Density rate^a x^(a-1) exp(-rate x) / Gamma(a), a = concentration."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self._init_params(validate_args, concentration=concentration, rate=rate)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return O.clamp((self.concentration - 1) / self.rate, min=0)

    @property
    def variance(self):
        return self.concentration / self.rate ** 2

    def rsample(self, sample_shape=()):
        return _gamma_rsample(self.concentration, self.rate, self._extended(sample_shape))

    def log_prob(self, value):
        value = self._check_value(value)
        a, b = self.concentration, self.rate
        return O.xlogy(a, b) + O.xlogy(a - 1, value) - b * value - O.lgamma(a)

    def entropy(self):
        a = self.concentration
        return a - O.log(self.rate) + O.lgamma(a) + (1 - a) * O.digamma(a)

    def cdf(self, value):
        """P(concentration, rate * value), the regularized lower incomplete gamma function (its
        derivative in the concentration raises, as torch's)."""
        value = self._check_value(value)
        return special.gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """Gamma(df / 2, 1 / 2): the sum of df squared standard normals."""
    arg_constraints = {"df": constraints.positive}
    _printed = ()

    def __init__(self, df, validate_args=None):
        self._init_params(validate_args, df=df)
        self.concentration = 0.5 * self.df
        self.rate = O.zeros_like(self.df) + 0.5

    def _like(self):
        return self.df


def _dirichlet_mode(a):
    """The simplex point of highest density: (a - 1)^+ normalized; where every a < 1 the
    density is unbounded at every vertex and torch answers the first vertex."""
    m = O.clamp(a - 1, min=0)
    m = m / O.sum(m, -1, keepdim=True)
    vertex = NF.one_hot(O.zeros_like(a[..., 0]).long(), a.shape[-1]).to(a.dtype)
    return O.where(O.all(a < 1, -1, keepdim=True), vertex, m)


class Beta(_Family):
    """Density x^(a-1) (1-x)^(b-1) / B(a, b), a = concentration1, b = concentration0: the first
    part of a Dirichlet([a, b]) draw."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True
    _printed = ()

    def __init__(self, concentration1, concentration0, validate_args=None):
        self._init_params(validate_args, concentration1=concentration1, concentration0=concentration0)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return _dirichlet_mode(O.stack([self.concentration1, self.concentration0], -1))[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        pair = Dirichlet(O.stack([self.concentration1, self.concentration0], -1), validate_args=False)
        return pair.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        value = self._check_value(value)
        a, b = self.concentration1, self.concentration0
        return O.xlogy(a - 1, value) + O.xlogy(b - 1, 1 - value) - _lbeta(a, b)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        return _lbeta(a, b) - (a - 1) * O.digamma(a) - (b - 1) * O.digamma(b) + (a + b - 2) * O.digamma(a + b)


class StudentT(_Family):
    """Student's t with df degrees of freedom, shifted by loc and scaled by scale: loc + scale Z /
    sqrt(V / df) for Z standard normal and V ~ Chi2(df)."""
    has_rsample = True
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}

    _checked_as = {"df": "Chi2()"}        # torch checks df as the parameter of its Chi2(df)

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._init_params(validate_args, df=df, loc=loc, scale=scale)

    @property
    def mean(self):
        return O.where(self.df > 1, self.loc, float("nan"))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale ** 2 * df / (df - 2)
        return O.where(df > 2, finite, O.where(df > 1, float("inf"), float("nan")))

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        z = C.randn(*shape, dtype=self.df.dtype) if shape else C.randn((), dtype=self.df.dtype)
        chi2 = _gamma_rsample(0.5 * self.df, O.zeros_like(self.df) + 0.5, shape)
        return self.loc + self.scale * (z * O.rsqrt(chi2 / self.df))

    def log_prob(self, value):
        value = self._check_value(value)
        df = self.df
        z = (value - self.loc) / self.scale
        return (O.lgamma((df + 1) / 2) - O.lgamma(df / 2) - 0.5 * O.log(df * math.pi) - O.log(self.scale)
                - (df + 1) / 2 * O.log1p(z * z / df))

    def entropy(self):
        df = self.df
        return ((df + 1) / 2 * (O.digamma((df + 1) / 2) - O.digamma(df / 2)) + 0.5 * O.log(df)
                + _lbeta(df / 2, O.zeros_like(df) + 0.5) + O.log(self.scale))


class Dirichlet(_Family):
    """Density prod x_i^(a_i - 1) / B(a) on the simplex of the last dimension: normalized
    Gamma(a_i, 1) draws, differentiated through their Beta marginals (ops/dirichlet_primitives.py)."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        self._batch_shape = tuple(concentration.shape[:-1])
        self._validation(validate_args)
        c = self.arg_constraints["concentration"]
        self._check_param("concentration", concentration, c.check, repr(c))

    @property
    def event_shape(self):
        return Size(tuple(self.concentration.shape[-1:]))

    @property
    def mean(self):
        return self.concentration / O.sum(self.concentration, -1, keepdim=True)

    @property
    def mode(self):
        return _dirichlet_mode(self.concentration)

    @property
    def variance(self):
        a = self.concentration
        a0 = O.sum(a, -1, keepdim=True)
        return a * (a0 - a) / (a0 ** 2 * (a0 + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape) + tuple(self.event_shape)
        concentration = O.expand(self.concentration, *shape)
        with no_grad():
            g = _standard_gamma(self.concentration, shape)
            # kept strictly inside (0, 1) in the dtype, as torch's draws: the smallest normal number
            # at least, the largest number below 1 at most
            dt = self.concentration.dtype
            x = (g / g.sum(-1, keepdims=True)).astype(dt.np)
            x = np.clip(x, D.finfo(dt).tiny, np.nextafter(dt.np.type(1), dt.np.type(0)))
        return apply(PRIMITIVES["dirichlet_rsample"], (concentration, _drawn(x, self.concentration)), {})

    def log_prob(self, value):
        value = self._check_value(value)
        a = self.concentration
        return (O.sum(O.xlogy(a - 1, value), -1) + O.lgamma(O.sum(a, -1))
                - O.sum(O.lgamma(a), -1))

    def entropy(self):
        a = self.concentration
        k = a.shape[-1]
        a0 = O.sum(a, -1)
        return (O.sum(O.lgamma(a), -1) - O.lgamma(a0) - (k - a0) * O.digamma(a0)
                - O.sum((a - 1) * O.digamma(a), -1))


# == discrete ======================================================================================

class Poisson(_Family):
    """P(k) = rate^k exp(-rate) / k!."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self._init_params(validate_args, rate=rate)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return O.floor(self.rate)

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        with no_grad():
            return _drawn(RNG.gen.poisson(np.broadcast_to(_host(self.rate), shape)), self.rate)

    def log_prob(self, value):
        value = self._check_value(value)
        return O.xlogy(value, self.rate) - self.rate - O.lgamma(value + 1)


class _ProbsOrLogits(_ProbsAndLogits, _Family):
    """A family given by probs or by logits (= log(p / (1 - p))), exactly one of them; repr
    prints the other parameters, then probs and logits as torch's (the given one, and the other
    once read)."""

    def _probs_or_logits(self, validate_args, probs, logits, **others):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = "probs" if probs is not None else "logits"
        self._others = tuple(others)
        self._shown = (given,)
        self._init_params(validate_args, **others, **{given: probs if probs is not None else logits})
        if probs is not None:
            self.logits = _logits_of(self._probs)
        else:
            self.probs = O.sigmoid(self._logits)

    def _params(self):
        return tuple((k, self.__dict__[k]) for k in self._others) + self._shown_params()


class Geometric(_ProbsOrLogits):
    """The number of failures before the first success: P(k) = (1 - p)^k p."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._probs_or_logits(validate_args, probs, logits)
        if probs is not None and self._validate_args and not _traced(self.probs):
            # p = 0 never succeeds: no distribution on the counts (torch's own check and words)
            with no_grad():
                ok = self.probs > 0
                if not bool(O.all(ok)):
                    raise ValueError(f"Expected parameter probs ({type(self.probs).__name__} of shape "
                                     f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but found "
                                     f"invalid values:\n{self.probs[~ok]}")

    @property
    def mean(self):
        return 1 / self.probs - 1

    @property
    def mode(self):
        return O.zeros_like(self.probs)

    @property
    def variance(self):
        return (1 / self.probs - 1) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        with no_grad():
            u = _uniform_open(shape, self.probs)
            # (abs: at p = 1 the quotient is -0.0, and the count is 0)
            return O.abs(O.floor(O.log(u) / O.log1p(-self.probs.detach())))

    def log_prob(self, value):
        value = self._check_value(value)
        p = self.probs
        value, p = O.broadcast_tensors(value, p)
        failures = O.where(O.logical_and(p == 1, value == 0), 0.0, value * O.log1p(-p))
        return failures + O.log(p)

    def entropy(self):
        return NF.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


class Binomial(_ProbsOrLogits):
    """The number of successes in total_count trials of probability p."""
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        self._probs_or_logits(validate_args, probs, logits, total_count=total_count)

    @property
    def param_shape(self):
        return self._probs.shape

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return O.minimum(O.floor((self.total_count + 1) * self.probs), self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        if self.probs.dtype is D.bfloat16 or self.probs.dtype is D.float16:
            raise NotImplementedError(f"\"binomial_cpu\" not implemented for '{D.SCALAR_NAME[self.probs.dtype]}'")
        with no_grad():
            n = np.broadcast_to(_host(self.total_count), shape).astype(np.int64)
            return _drawn(RNG.gen.binomial(n, np.broadcast_to(_host(self.probs), shape)),
                          self.probs)

    def log_prob(self, value):
        value = self._check_value(value)
        n, logits = self.total_count, self.logits
        log_choose = O.lgamma(n + 1) - O.lgamma(value + 1) - O.lgamma(n - value + 1)
        # k log p + (n - k) log(1 - p) = k logits - n log(1 + e^logits), softplus kept stable
        return log_choose + value * logits - n * NF.softplus(logits)

    has_enumerate_support = True

    def _homogeneous_count(self, what):
        n = _host(self.total_count)
        if n.size and n.min() != n.max():
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return int(n.max()) if n.size else 0

    def enumerate_support(self, expand=True):
        return self._enumerated(C.arange(self._homogeneous_count("enumerate_support") + 1, dtype=self.probs.dtype),
                                expand)

    def entropy(self):
        self._homogeneous_count("entropy")
        lp = self.log_prob(self.enumerate_support())
        return -O.sum(O.exp(lp) * lp, 0)


class _OverCategories:
    """A family over a Categorical's K events (one-hot draws, counts of n draws, relaxed draws):
    its probs, logits and their shape are the Categorical's (its own parameters none), its event a
    vector of K, and its expansion the Categorical's."""

    def _params(self):
        return ()

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def event_shape(self):
        return Size((self._categorical._num_events,))

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = tuple(batch_shape)
        return new


class OneHotCategorical(_OverCategories, Distribution):
    """A Categorical whose draws are one-hot vectors over the last dimension."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self._validation(validate_args)
        self._batch_shape = self._categorical._batch_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return NF.one_hot(O.argmax(self.probs, -1), self._categorical._num_events).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        k = self._categorical.sample(sample_shape)
        return NF.one_hot(k, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value):
        self._validate_sample(value, self.support.check, repr(self.support))
        return self._categorical.log_prob(O.argmax(value, -1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        k = self._categorical._num_events
        return self._enumerated(C.eye(k, dtype=self.probs.dtype), expand)


class Multinomial(_OverCategories, Distribution):
    """Counts per category in total_count draws from a Categorical."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self._validation(validate_args)
        self._batch_shape = self._categorical._batch_shape

    @property
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        k = self._categorical._num_events
        with no_grad():
            p = np.broadcast_to(_host(self.probs), shape + (k,)).reshape(-1, k)
            counts = np.stack([RNG.gen.multinomial(self.total_count, row / row.sum()) for row in p]) if p.size \
                else np.zeros((0, k))
            return _drawn(counts.reshape(shape + (k,)).astype(np.float64), self.probs)

    def log_prob(self, value):
        self._validate_sample(value, self.support.check, repr(self.support))
        logits, value = O.broadcast_tensors(self.logits, value)
        # 0 * log(0) is 0: a category that cannot occur and did not
        counted = O.where(value == 0, 0.0, value * logits)
        return (O.lgamma(O.sum(value, -1) + 1) - O.sum(O.lgamma(value + 1), -1) + O.sum(counted, -1))

    def entropy(self):
        # -E[log P] with log P = log n! - sum log x_i! + sum x_i log p_i, and x_i ~ Binomial(n, p_i)
        n = self.total_count
        counts = Binomial(n, self.probs, validate_args=False)
        ks = C.arange(n + 1, dtype=self.probs.dtype).reshape((-1,) + (1,) * self.probs.dim())
        ks = O.expand(ks, *((n + 1,) + tuple(self.probs.shape)))
        log_factorials = O.sum(O.exp(counts.log_prob(ks)) * O.lgamma(ks + 1), 0)
        return (O.sum(log_factorials, -1) - n * O.sum(self.probs * self.logits, -1)
                - math.lgamma(n + 1))


# == reshaping =====================================================================================

class Independent(Distribution):
    """base_distribution with its rightmost reinterpreted_batch_ndims batch dimensions read as
    event dimensions: log_prob and entropy sum over them."""
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        base_batch = tuple(base_distribution.batch_shape)
        if n > len(base_batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual {n} "
                             f"vs {len(base_batch)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        self._batch_shape = base_batch[:len(base_batch) - n]
        self._event_shape = base_batch[len(base_batch) - n:] + tuple(base_distribution.event_shape)
        self._validation(validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        base = self.base_dist.support
        return constraints.independent(base, self.reinterpreted_batch_ndims) if self.reinterpreted_batch_ndims \
            else base

    @property
    def event_shape(self):
        return Size(self._event_shape)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"

    def _summed(self, t):
        for _ in range(self.reinterpreted_batch_ndims):
            t = O.sum(t, -1)
        return t

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    @property
    def stddev(self):
        return self.base_dist.stddev

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return self._summed(self.base_dist.log_prob(value))

    def entropy(self):
        return self._summed(self.base_dist.entropy())

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        n = self.reinterpreted_batch_ndims
        tail = tuple(self.base_dist.batch_shape)[len(tuple(self.base_dist.batch_shape)) - n:]
        new.base_dist = self.base_dist.expand(tuple(batch_shape) + tail)
        new._batch_shape = tuple(batch_shape)
        return new


__all__ = ["Exponential", "Laplace", "LogNormal", "Gamma", "Beta", "Poisson", "Geometric", "Binomial", "Cauchy",
           "StudentT", "Chi2", "Dirichlet", "OneHotCategorical", "Multinomial", "Independent", "HalfNormal"]


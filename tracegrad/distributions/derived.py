"""Families built, as torch builds them, by pushing a simpler one through transforms: Gumbel
(a uniform through -log(-log u), scaled and shifted), Weibull (a unit exponential through a power
and a scale), Pareto (an exponential through exp and a scale), HalfCauchy (|X| for a centred
Cauchy X), Kumaraswamy (a uniform through two powers), LogisticNormal (normals through stick
breaking) and the relaxed Bernoulli and one-hot families (sigmoid and exp of their bases). Draws,
cdf and icdf come from the chain; where a closed form is better conditioned (the Gumbel and
half-Cauchy densities) it replaces the change of variables, as torch's does."""
import math

from .. import creation as C
from .. import _dtype as D
from ..ops import functional as O
from . import constraints
from .base import Normal, Uniform, _as_tensor
from .families import Exponential, Cauchy
from .more_families import LogitRelaxedBernoulli, ExpRelaxedCategorical
from .transforms import (ExpTransform, AffineTransform, PowerTransform, AbsTransform, SigmoidTransform,
                         StickBreakingTransform)
from .transformed_distribution import TransformedDistribution

__all__ = ["Gumbel", "Weibull", "Pareto", "HalfCauchy", "RelaxedBernoulli", "RelaxedOneHotCategorical",
           "Kumaraswamy", "LogisticNormal"]

EULER_GAMMA = 0.57721566490153286060


def _broadcast(**params):
    """The parameters as tensors of one shape, in the first tensor's dtype (torch's broadcast_all)."""
    like = next((v for v in params.values() if hasattr(v, "shape")), None)
    return O.broadcast_tensors(*(_as_tensor(v, like) for v in params.values()))


class _Derived(TransformedDistribution):
    """A transformed family whose own parameters (the names in _expanded) expand with its batch."""
    _expanded = ()

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        for name in self._expanded:
            setattr(new, name, O.expand(getattr(self, name), *tuple(batch_shape)))
        return new

    def _params(self):
        return tuple((k, self.__dict__[k]) for k in self.arg_constraints if k in self.__dict__)


class Gumbel(_Derived):
    """Density exp(-(z + exp(-z))) / scale at z = (x - loc) / scale: loc - scale log(-log U) for
    U uniform on [tiny, 1 - eps]."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    _expanded = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc=loc, scale=scale)
        info = D.finfo(self.loc.dtype)
        base = Uniform(C.full(tuple(self.loc.shape), float(info.tiny), dtype=self.loc.dtype),
                       C.full(tuple(self.loc.shape), 1 - float(info.eps), dtype=self.loc.dtype),
                       validate_args=validate_args)
        chain = [ExpTransform().inv, AffineTransform(0, -O.ones_like(self.scale)), ExpTransform().inv,
                 AffineTransform(loc, -self.scale)]
        super().__init__(base, chain, validate_args=validate_args)

    def log_prob(self, value):
        self._check(value)
        z = (self.loc - _as_tensor(value, self.loc)) / self.scale
        return z - O.exp(z) - O.log(self.scale)

    @property
    def mean(self):
        return self.loc + self.scale * EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev ** 2

    def entropy(self):
        return O.log(self.scale) + (1 + EULER_GAMMA)


class Weibull(_Derived):
    """Density (k / scale) (x / scale)^(k-1) exp(-(x / scale)^k), k = concentration: scale E^(1/k)
    for E a unit exponential."""
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    _expanded = ("scale", "concentration", "concentration_reciprocal")

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = _broadcast(scale=scale, concentration=concentration)
        self.concentration_reciprocal = 1 / self.concentration
        base = Exponential(O.ones_like(self.scale), validate_args=validate_args)
        chain = [PowerTransform(self.concentration_reciprocal), AffineTransform(0, self.scale)]
        super().__init__(base, chain, validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * O.exp(O.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** (1 / k)

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale ** 2 * (O.exp(O.lgamma(1 + 2 * r)) - O.exp(2 * O.lgamma(1 + r)))

    def entropy(self):
        r = self.concentration_reciprocal
        return EULER_GAMMA * (1 - r) + O.log(self.scale * r) + 1


class Pareto(_Derived):
    """Density alpha scale^alpha / x^(alpha+1) on x >= scale: scale exp(E) for E ~ Exponential(alpha)."""
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    _expanded = ("scale", "alpha")

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = _broadcast(scale=scale, alpha=alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        super().__init__(base, [ExpTransform(), AffineTransform(0, self.scale)], validate_args=validate_args)

    @property
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = O.clamp(self.alpha, min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = O.clamp(self.alpha, min=2)
        return self.scale ** 2 * a / ((a - 1) ** 2 * (a - 2))

    def entropy(self):
        return O.log(self.scale / self.alpha) + (1 + 1 / self.alpha)


class HalfCauchy(TransformedDistribution):
    """|X| for X ~ Cauchy(0, scale): density 2 / (pi scale (1 + (x / scale)^2)) on x >= 0."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        base = Cauchy(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)
        c = self.arg_constraints["scale"]
        self._check_param("scale", self.scale, c.check, repr(c))

    def _params(self):
        return ()

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return C.full(tuple(self._batch_shape), math.inf, dtype=self.scale.dtype)

    @property
    def mode(self):
        return O.zeros_like(self.scale)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        self._check(value)
        value = _as_tensor(value, self.scale)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return O.where(value >= 0, lp, -math.inf)

    def cdf(self, value):
        self._check(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value):
        return self.base_dist.icdf((value + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class _Relaxed(TransformedDistribution):
    """A relaxed base pushed onto its support: temperature, probs and logits are the base's,
    checked against arg_constraints as torch checks them (through the properties: the base's
    lazy parameter is then read, and shows in its repr)."""
    has_rsample = True

    def _check_shared(self):
        if not self._validate_args:
            return
        for name, c in self.arg_constraints.items():
            self._check_param(name, getattr(self, name), c.check, repr(c))

    def _params(self):
        return ()

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def probs(self):
        return self.base_dist.probs

    @property
    def logits(self):
        return self.base_dist.logits


class RelaxedBernoulli(_Relaxed):
    """sigmoid of a LogitRelaxedBernoulli draw: a reparameterizable relaxation of Bernoulli(probs)
    on (0, 1), sharper as temperature falls. (The base validates its parameters by default, as
    torch's, whatever validate_args says.)"""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)
        self._check_shared()


class RelaxedOneHotCategorical(_Relaxed):
    """exp of an ExpRelaxedCategorical draw: a reparameterizable relaxation of a one-hot draw on
    the simplex (Gumbel-softmax)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)
        self._check_shared()


def _kumaraswamy_moment(a, b, n):
    """E[X^n] = b B(1 + n / a, b) for X ~ Kumaraswamy(a, b)."""
    m = 1 + n / a
    return b * O.exp(O.lgamma(m) + O.lgamma(b) - O.lgamma(m + b))


class Kumaraswamy(_Derived):
    """Density a b x^(a-1) (1 - x^a)^(b-1) on (0, 1), a = concentration1, b = concentration0:
    (1 - U^(1/b))^(1/a) for U uniform on [0, 1)."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True
    _expanded = ("concentration1", "concentration0")

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = _broadcast(concentration1=concentration1,
                                                              concentration0=concentration0)
        b = self.concentration0
        base = Uniform(O.zeros_like(b), O.ones_like(b), validate_args=validate_args)
        chain = [PowerTransform(1 / b), AffineTransform(1.0, -1.0), PowerTransform(1 / self.concentration1)]
        super().__init__(base, chain, validate_args=validate_args)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        """((a - 1) / (a b - 1))^(1/a), where a, b >= 1 (0 at a = 1 < b); NaN where a or b is below 1
        (the density is unbounded at an end) and for a = b = 1 (the uniform, every point a mode).
        torch's formula answers NaN everywhere (it takes log1p(-b) for log(a - 1)): this is the
        mode of the density torch's log_prob gives."""
        a, b = self.concentration1, self.concentration0
        inside = O.logical_and(a >= 1, b >= 1)
        ratio = O.where(inside, (a - 1) / (a * b - 1), 0.5 * O.ones_like(a))   # (a finite unused branch)
        return O.where(inside, ratio ** (1 / a), math.nan)

    @property
    def variance(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - self.mean ** 2

    def entropy(self):
        # (1 - 1/b) + (1 - 1/a) H_b - log a - log b, H_b = digamma(b + 1) + gamma the b-th harmonic number
        a, b = self.concentration1, self.concentration0
        harmonic = O.digamma(b + 1) + EULER_GAMMA
        return (1 - 1 / b) + (1 - 1 / a) * harmonic - O.log(a) - O.log(b)


class LogisticNormal(TransformedDistribution):
    """The stick-breaking image on the simplex of K - 1 independent normals: a draw's logits
    log(x_i / (1 - x_1 - ... - x_i)), i < K, are Normal(loc, scale)."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not tuple(base.batch_shape):
            base = base.expand((1,))
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def _params(self):
        return ()

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale

"""The Distribution base (validation, shapes, expand) and the first families: Normal, Categorical,
Bernoulli, Uniform and MultivariateNormal, in tracegrad ops (log_prob, entropy and rsample
differentiate; sample does not)."""
import math
import numbers

from ..tensor import Tensor, Size
from ..tracing import Proxy, TRACING, _ACTIVE
from ..grad_mode import no_grad
from .. import creation as C
from .. import _dtype as D
from ..ops import functional as O
from ..nn import functional as NF
from .. import linalg
from ..ops.math_functional import linalg_solve
from . import constraints

__all__ = ["Distribution", "Normal", "Categorical", "Bernoulli", "Uniform", "MultivariateNormal"]


def _as_tensor(v, like=None):
    if isinstance(v, Tensor):
        return v
    return C.tensor(float(v), dtype=like.dtype if like is not None else None)


def _traced(*ts):
    """Whether compile is tracing these values: a check of the values cannot run then (a traced
    program does not branch on data), so the arguments are validated by eager calls only. A
    constant made inside the traced function is symbolic too once an op reads it."""
    return bool(_ACTIVE[0] and TRACING.stack) or any(isinstance(t, Proxy) for t in ts)


def _shape(size):
    return tuple(size) if not isinstance(size, int) else (size,)


def _real(v):
    return v == v                         # (not NaN: torch's constraints.real; inf is real)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = True                 # torch's default (__debug__): parameters and samples are checked

    arg_constraints = {}

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        """The base of a user's family, as torch's: its shapes, and its parameters (those of
        arg_constraints set on it before this call) checked."""
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validation(validate_args)
        for name, c in self.arg_constraints.items():
            if isinstance(self.__dict__.get(name), Tensor) and hasattr(c, "check"):
                self._check_param(name, self.__dict__[name], c.check, repr(c))

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def _validation(self, validate_args):
        if validate_args is not None:
            self._validate_args = validate_args

    def _check_param(self, name, value, ok, constraint, owner=None):
        """torch's check of a parameter against its constraint (an eager call's: not while traced);
        owner names the distribution the message blames (torch's, where it checks through another)."""
        if not self._validate_args or _traced(value):
            return
        with no_grad():
            good = bool(O.all(ok(value)))
        if not good:
            raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                             f"distribution {owner or repr(self)} to satisfy the constraint {constraint}, but found invalid "
                             f"values:\n{value}")

    def _validate_sample(self, value, ok, support):
        """torch's _validate_sample: value broadcasts with batch_shape + event_shape and lies in the support."""
        if not self._validate_args or _traced(value):
            return
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event = tuple(self.event_shape)
        actual = tuple(value.shape)
        if actual[len(actual) - len(event):] != event:
            raise ValueError(f"The right-most size of value must match event_shape: {Size(actual)} vs {Size(event)}.")
        expected = tuple(self._batch_shape) + event
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {Size(actual)} vs "
                                 f"{Size(expected)}.")
        with no_grad():
            good = bool(O.all(ok(value)))
        if not good:
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {actual}) to be within the "
                             f"support ({support}) of the distribution {self!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return Size(self._batch_shape)

    @property
    def event_shape(self):
        return Size(getattr(self, "_event_shape", ()))

    @property
    def stddev(self):
        return O.sqrt(self.variance)

    # what a family does not define raises as torch's Distribution does
    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    def rsample(self, sample_shape=()):
        raise NotImplementedError

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def perplexity(self):
        return O.exp(self.entropy())

    def _enumerated(self, values, expand):
        """values (the support, one row per value: (n,) + event_shape) laid out as torch's
        enumerate_support: (n,) + batch_shape + event_shape, or 1s for the batch unless expand."""
        batch = tuple(self._batch_shape)
        event = tuple(values.shape[1:])
        values = values.reshape((values.shape[0],) + (1,) * len(batch) + event)
        return O.expand(values, *((values.shape[0],) + batch + event)) if expand else values

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def _extended(self, sample_shape):
        return _shape(sample_shape) + tuple(self._batch_shape)

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameters broadcast to batch_shape (views, as torch's expand):
        each tensor attribute keeps its trailing (event) dimensions, a wrapped distribution expands too."""
        shape = tuple(batch_shape)
        old = len(self._batch_shape)
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        for k, v in self.__dict__.items():
            if isinstance(v, Tensor) and tuple(v.shape[:old]) == tuple(self._batch_shape):
                setattr(new, k, O.expand(v, *(shape + tuple(v.shape[old:]))))
            elif isinstance(v, Distribution):
                setattr(new, k, v.expand(shape))
        new._batch_shape = shape
        return new

    def _params(self):
        """What repr prints, as torch's: the parameters of arg_constraints set on this object."""
        return tuple((k, self.__dict__[k]) for k in self.arg_constraints if isinstance(self.__dict__.get(k), Tensor))

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}: {v if v.numel() == 1 else v.shape}' for k, v in self._params())})"


class Normal(Distribution):
    """N(loc, scale^2)."""
    has_rsample = True
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        loc_t = loc if isinstance(loc, Tensor) else None
        scale_t = scale if isinstance(scale, Tensor) else None
        like = loc_t if loc_t is not None else scale_t
        self.loc, self.scale = O.broadcast_tensors(_as_tensor(loc, like), _as_tensor(scale, like))
        self._batch_shape = tuple(self.loc.shape)
        self._validation(validate_args)
        self._check_param("loc", self.loc, _real, "Real()")
        self._check_param("scale", self.scale, lambda v: v > 0, "GreaterThan(lower_bound=0.0)")

    def _params(self):
        return (("loc", self.loc), ("scale", self.scale))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        eps = C.randn(*shape, dtype=self.loc.dtype) if shape else C.randn((), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        self._validate_sample(value, _real, "Real()")
        value = _as_tensor(value, self.loc)
        var = self.scale * self.scale
        return -((value - self.loc) ** 2) / (2 * var) - O.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + O.log(self.scale)

    def cdf(self, value):
        self._validate_sample(value, _real, "Real()")
        value = _as_tensor(value, self.loc)
        return 0.5 * (1 + O.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        value = _as_tensor(value, self.loc)
        return self.loc + self.scale * O.erfinv(2 * value - 1) * math.sqrt(2)


class _ProbsAndLogits:
    """probs and logits, both held (as _probs and _logits); repr prints, as torch's, the one given
    and the other once it has been read: torch derives the other lazily and prints what its object
    holds. _shown starts as the given name."""

    def _read(self, name):
        if name not in self._shown:
            self._shown = self._shown + (name,)

    @property
    def probs(self):
        self._read("probs")
        return self.__dict__["_probs"]

    @probs.setter
    def probs(self, value):
        self.__dict__["_probs"] = value

    @property
    def logits(self):
        self._read("logits")
        return self.__dict__["_logits"]

    @logits.setter
    def logits(self, value):
        self.__dict__["_logits"] = value

    def _shown_params(self):
        return tuple((k, self.__dict__["_" + k]) for k in ("probs", "logits") if k in self._shown)


class Categorical(_ProbsAndLogits, Distribution):
    """A choice among the last dimension's categories, by probs or by logits."""
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self._probs = probs / O.sum(probs, -1, keepdim=True)
            eps = float(D.finfo(self._probs.dtype).eps) if hasattr(D, "finfo") else 1e-7
            p = O.clamp(self._probs, min=eps, max=1 - eps)
            self._logits = O.log(p)
            self._shown = ("probs",)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self._logits = logits - O.logsumexp(logits, -1, keepdim=True)
            self._probs = NF.softmax(self._logits, -1)
            self._shown = ("logits",)
        self._num_events = self._probs.shape[-1]
        self._batch_shape = tuple(self._probs.shape[:-1])
        self._validation(validate_args)
        if probs is not None:
            self._check_param("probs", self._probs, lambda v: O.logical_and(
                O.all(v >= 0, -1), O.abs(O.sum(v, -1) - 1) < 1e-6), "Simplex()")
        else:
            self._check_param("logits", self._logits, _real, "IndependentConstraint(Real(), 1)")

    def _params(self):
        return self._shown_params()

    @property
    def param_shape(self):
        return self._probs.shape

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    def enumerate_support(self, expand=True):
        return self._enumerated(C.arange(self._num_events), expand)

    @property
    def mean(self):
        return C.full(self._batch_shape, float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return O.argmax(self.probs, -1)

    @property
    def variance(self):
        return C.full(self._batch_shape, float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()):
        shape = _shape(sample_shape)
        with no_grad():
            p = self.probs.reshape(-1, self._num_events)
            n = int(math.prod(shape)) if shape else 1
            draws = C.multinomial(p, n, True)                 # (batch, n)
            out = draws.T.reshape(shape + tuple(self._batch_shape))
        return out

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.logical_and(O.logical_and(v >= 0, v <= self._num_events - 1),
                                                             O.eq(v % 1, 0)),
                              f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})")
        value = value.long() if hasattr(value, "long") else value
        v, logits = O.broadcast_tensors(O.unsqueeze(value, -1), self.logits)
        return O.squeeze(O.gather(logits, -1, v[..., :1]), -1)

    def entropy(self):
        logits = O.clamp(self.logits, min=float(D.finfo(self.logits.dtype).min) if hasattr(D, "finfo") else -1e30)
        return -O.sum(logits * self.probs, -1)


def _clamp_probs(p):
    eps = float(D.finfo(p.dtype).eps)
    return O.clamp(p, min=eps, max=1 - eps)


class Bernoulli(_ProbsAndLogits, Distribution):
    """1 with probability probs (or sigmoid(logits)), else 0."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self._probs = _as_tensor(probs)
            p = _clamp_probs(self._probs)
            self._logits = O.log(p) - O.log1p(-p)
            self._shown = ("probs",)
        else:
            self._logits = _as_tensor(logits)
            self._probs = O.sigmoid(self._logits)
            self._shown = ("logits",)
        self._batch_shape = tuple(self._probs.shape)
        self._validation(validate_args)
        if probs is not None:
            self._check_param("probs", self._probs, lambda v: O.logical_and(v >= 0, v <= 1),
                              "Interval(lower_bound=0.0, upper_bound=1.0)")
        else:
            self._check_param("logits", self._logits, _real, "Real()")

    def _params(self):
        return self._shown_params()

    @property
    def param_shape(self):
        return self._probs.shape

    def enumerate_support(self, expand=True):
        return self._enumerated(C.arange(2, dtype=self.probs.dtype), expand)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @property
    def mode(self):
        return O.where(self.probs > 0.5, O.ones_like(self.probs), O.zeros_like(self.probs))

    def sample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        with no_grad():
            return C.bernoulli(O.expand(self.probs, *shape) if shape != tuple(self.probs.shape) else self.probs)

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.logical_or(O.eq(v, 0), O.eq(v, 1)), "Boolean()")
        logits, value = O.broadcast_tensors(self.logits, _as_tensor(value, self.logits))
        return -NF.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return NF.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Uniform(Distribution):
    """Uniform on [low, high)."""
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        like = low if isinstance(low, Tensor) else (high if isinstance(high, Tensor) else None)
        self.low, self.high = O.broadcast_tensors(_as_tensor(low, like), _as_tensor(high, like))
        self._batch_shape = tuple(self.low.shape)
        self._validation(validate_args)
        if not _traced(self.high):
            self._check_param("low", self.low, lambda v: v < self.high, f"LessThan(upper_bound={self.high})")

    def _params(self):
        return (("low", self.low), ("high", self.high))

    @property
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * float("nan")       # every point of the interval is one: torch's NaN

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape)
        u = C.rand(*shape, dtype=self.low.dtype) if shape else C.rand((), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def _in_support(self, v):
        return O.logical_and(self.low <= v, v <= self.high)

    def log_prob(self, value):
        # torch's formula: log(1) - log(high - low) is +0.0 where the width is 1 (-log(1) gave -0.0)
        self._validate_sample(value, self._in_support, f"Interval(lower_bound={self.low}, upper_bound={self.high})")
        value = _as_tensor(value, self.low)
        inside = (self.low <= value).to(self.low.dtype) * (self.high > value).to(self.low.dtype)
        return O.log(inside) - O.log(self.high - self.low)

    def entropy(self):
        return O.log(self.high - self.low)

    def cdf(self, value):
        self._validate_sample(value, self._in_support, f"Interval(lower_bound={self.low}, upper_bound={self.high})")
        value = _as_tensor(value, self.low)
        return O.clamp((value - self.low) / (self.high - self.low), min=0, max=1)

    def icdf(self, value):
        return self.low + _as_tensor(value, self.low) * (self.high - self.low)


class MultivariateNormal(Distribution):
    """N(loc, Sigma) by one of covariance_matrix, precision_matrix or scale_tril (Sigma = L L^T)."""
    has_rsample = True
    support = constraints.independent(constraints.real, 1)

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (precision_matrix is not None) + (scale_tril is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        self._validation(validate_args)
        self._given = ("covariance_matrix", covariance_matrix) if covariance_matrix is not None else \
            ("precision_matrix", precision_matrix) if precision_matrix is not None else ("scale_tril", scale_tril)
        self.loc = loc
        self._event = loc.shape[-1]
        self._batch_shape = tuple(loc.shape[:-1])
        self._check_param("loc", loc, lambda v: O.all(_real(v), -1), "IndependentConstraint(Real(), 1)")
        if scale_tril is not None:
            self._check_param("scale_tril", scale_tril, constraints.lower_cholesky.check,
                              repr(constraints.lower_cholesky))
        else:
            self._check_param(*self._given, constraints.positive_definite.check, repr(constraints.positive_definite))
        if scale_tril is not None:
            self.scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.scale_tril = linalg.cholesky(covariance_matrix)
        else:
            # Sigma = P^-1: the Cholesky factor of the inverse
            self.scale_tril = linalg.cholesky(linalg.inv(precision_matrix))
        n = loc.shape[-1]
        self._event = n
        batch = O.broadcast_shapes(tuple(loc.shape[:-1]), tuple(self.scale_tril.shape[:-2]))
        self.loc = O.expand(loc, *(tuple(batch) + (n,)))
        self._batch_shape = tuple(batch)

    def _params(self):
        return (("loc", self.loc), self._given)

    @property
    def event_shape(self):
        return Size((self._event,))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def covariance_matrix(self):
        return O.matmul(self.scale_tril, O.transpose(self.scale_tril, -2, -1))

    @property
    def variance(self):
        return O.sum(self.scale_tril ** 2, -1)

    def rsample(self, sample_shape=()):
        shape = self._extended(sample_shape) + (self._event,)
        eps = C.randn(*shape, dtype=self.loc.dtype)
        return self.loc + O.squeeze(O.matmul(self.scale_tril, O.unsqueeze(eps, -1)), -1)

    def _half_log_det(self):
        return O.sum(O.log(O.diagonal(self.scale_tril, 0, -2, -1)), -1)

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.all(_real(v), -1), "IndependentConstraint(Real(), 1)")
        diff = value - self.loc
        L = O.tril(self.scale_tril)      # a triangular solve: the upper triangle is not read
        lead = O.broadcast_shapes(tuple(L.shape[:-2]), tuple(diff.shape[:-1]))
        Lb = O.expand(L, *(tuple(lead) + tuple(L.shape[-2:])))
        z = O.squeeze(linalg_solve(Lb, O.unsqueeze(O.expand(diff, *(tuple(lead) + (self._event,))), -1)), -1)
        m = O.sum(z * z, -1)
        return -0.5 * (self._event * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        return 0.5 * self._event * (1.0 + math.log(2 * math.pi)) + self._half_log_det()

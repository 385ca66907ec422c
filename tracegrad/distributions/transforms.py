"""torch.distributions.transforms: invertible (or not) maps between constrained sets, each with
its domain and codomain (constraints.py), the log |det| of its Jacobian, and torch's caching of the
last (x, y) pair. ComposeTransform chains them, IndependentTransform reads batch dimensions as
event dimensions, and TransformedDistribution (transformed.py) pushes a distribution through them.

Event dimensions: a transform's domain and codomain say how many rightmost dimensions form one
point (0: elementwise maps; 1: StickBreaking and Softmax map vectors). log_abs_det_jacobian
returns one value per point, so a chain sums each part's values over the dimensions the chain
treats as one point (_sum_rightmost)."""
import math
import numbers
import operator
import weakref
from functools import reduce

import numpy as np

from ..tensor import Tensor, Size
from .. import _dtype as D
from .. import creation as C
from ..ops import functional as O
from ..nn import functional as NF
from .. import linalg
from . import constraints

__all__ = ["Transform", "ComposeTransform", "IndependentTransform", "ReshapeTransform", "ExpTransform",
           "PowerTransform", "SigmoidTransform", "SoftplusTransform", "TanhTransform", "AbsTransform",
           "AffineTransform", "CumulativeDistributionTransform",
           "SoftmaxTransform", "StickBreakingTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
           "CorrCholeskyTransform",
           "CatTransform", "StackTransform", "identity_transform"]


def _sum_rightmost(value, dim):
    """value summed over its rightmost dim dimensions (one log-density per point)."""
    if dim == 0:
        return value
    return O.sum(value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)), -1)


class Transform:
    """A map x -> y with a cache of its last (x, y) pair (cache_size 1), its inverse (`inv`), and
    log |dy/dx| (`log_abs_det_jacobian(x, y)`). Subclasses define _call, _inverse and the log-det."""
    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None            # (a weak reference does not pickle)
        return state

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse map (the same object while it lives: its cache is shared)."""
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self):
        """+1 or -1 where the map increases or decreases (a univariate bijection's)."""
        raise NotImplementedError

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._cached(x, True)

    def _inv_call(self, y):
        return self._cached(y, False)

    def _cached(self, v, forward):
        """The transform (forward) or its inverse of v; with cache_size 1, the last (x, y) pair
        answers a call with either of its tensors (the very object) without computing."""
        if not self._cache_size:
            return self._call(v) if forward else self._inverse(v)
        pair = self._cached_x_y
        if v is pair[0 if forward else 1]:
            return pair[1 if forward else 0]
        out = self._call(v) if forward else self._inverse(v)
        self._cached_x_y = (v, out) if forward else (out, v)
        return out

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform, sharing its cache: calling it runs the transform's _inverse."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self):
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """parts applied in order; its point is as wide as the widest any part needs."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [p.with_cache(cache_size) for p in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    def _widened(self, c, event_dim):
        return constraints.independent(c, event_dim - c.event_dim) if event_dim > c.event_dim else c

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        event_dim = self.parts[-1].codomain.event_dim
        for p in reversed(self.parts):
            event_dim = max(event_dim + p.domain.event_dim - p.codomain.event_dim, p.domain.event_dim)
        return self._widened(self.parts[0].domain, event_dim)

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        event_dim = self.parts[0].domain.event_dim
        for p in self.parts:
            event_dim = max(event_dim + p.codomain.event_dim - p.domain.event_dim, p.codomain.event_dim)
        return self._widened(self.parts[-1].codomain, event_dim)

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        return reduce(operator.mul, (p.sign for p in self.parts), 1)

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = weakref.ref(inv)
            inv._inv = weakref.ref(self)
        return inv

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return O.zeros_like(x)
        xs = [x]
        for p in self.parts[:-1]:
            xs.append(p(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for p, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(p.log_abs_det_jacobian(a, b), event_dim - p.domain.event_dim))
            event_dim += p.codomain.event_dim - p.domain.event_dim
        return reduce(operator.add, terms)

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape

    def __repr__(self):
        return type(self).__name__ + "(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """base_transform with its rightmost reinterpreted_batch_ndims batch dimensions read as part
    of one point: the log-det sums over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """The rightmost dimensions of shape in_shape laid out as out_shape (a volume-preserving
    bijection: log-det 0)."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape, self.out_shape = Size(in_shape), Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ReshapeTransform(self.in_shape, self.out_shape,
                                                                               cache_size=cache_size)

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.dim() - len(self.in_shape)]) + tuple(self.out_shape))

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.dim() - len(self.out_shape)]) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return C.zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]), dtype=x.dtype)

    @staticmethod
    def _moved(shape, old, new):
        if len(shape) < len(old):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(old)
        if tuple(shape[cut:]) != tuple(old):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
        return tuple(shape[:cut]) + tuple(new)

    def forward_shape(self, shape):
        return self._moved(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._moved(shape, self.out_shape, self.in_shape)


class _Parameterless(Transform):
    """A transform without parameters: every instance equals every other of its class."""

    def __eq__(self, other):
        return type(other) is type(self)

    __hash__ = object.__hash__


class ExpTransform(_Parameterless):
    """y = exp(x)."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return O.exp(x)

    def _inverse(self, y):
        return O.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x


def _clipped_sigmoid(x):
    """sigmoid(x) kept inside (0, 1): at least the dtype's smallest normal number, at most 1 - eps."""
    info = D.finfo(x.dtype)
    return O.clamp(O.sigmoid(x), min=float(info.tiny), max=1.0 - float(info.eps))


class SigmoidTransform(_Parameterless):
    """y = 1 / (1 + exp(-x)), kept inside (0, 1)."""
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        info = D.finfo(y.dtype)
        y = O.clamp(y, min=float(info.tiny), max=1.0 - float(info.eps))
        return O.log(y) - O.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        # log(s (1 - s)) = log s(x) + log s(-x) = -softplus(-x) - softplus(x), finite for every x
        return -NF.softplus(-x) - NF.softplus(x)


class TanhTransform(_Parameterless):
    """y = tanh(x); the inverse is atanh, unclamped (a cached forward value is the exact way back)."""
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def _call(self, x):
        return O.tanh(x)

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), which does not round 1 - y^2 to 0
        return 2.0 * (math.log(2.0) - x - NF.softplus(-2.0 * x))


class SoftplusTransform(_Parameterless):
    """y = log(1 + exp(x)), onto the positive numbers."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return NF.softplus(x)

    def _inverse(self, y):
        # x = log(exp(y) - 1) = y + log(1 - exp(-y)), which keeps its digits where y is small or large
        return y + O.log(-O.expm1(-y))

    def log_abs_det_jacobian(self, x, y):
        # dy/dx = sigmoid(x): log sigmoid(x) = -softplus(-x)
        return -NF.softplus(-x)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), from the distribution's support onto the unit interval; its
    log-det is the log density."""
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


class AbsTransform(_Parameterless):
    """y = |x| (not injective: its inverse answers the non-negative preimage)."""
    domain = constraints.real
    codomain = constraints.positive

    def _call(self, x):
        return O.abs(x)

    def _inverse(self, y):
        return y


def _broadcast_param(v):
    return v if isinstance(v, Tensor) else C.tensor(float(v))


class PowerTransform(Transform):
    """y = x^exponent on the positive numbers."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.exponent = _broadcast_param(exponent)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size=cache_size)

    @property
    def sign(self):
        return O.sign(self.exponent)

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(O.all(O.eq(self.exponent, other.exponent)))

    __hash__ = object.__hash__

    def _call(self, x):
        return x ** self.exponent

    def _inverse(self, y):
        return y ** (1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        # dy/dx = e x^(e-1) = e y / x
        return O.log(O.abs(self.exponent * y / x))

    def forward_shape(self, shape):
        return Size(O.broadcast_shapes(tuple(shape), tuple(self.exponent.shape)))

    inverse_shape = forward_shape


class AffineTransform(Transform):
    """y = loc + scale x, pointwise, or over points of event_dim dimensions (the log-det summed)."""
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale = loc, scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.independent(constraints.real, self._event_dim) if self._event_dim else constraints.real

    codomain = domain

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False

        def same(a, b):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                return a == b
            return bool(O.all(O.eq(_broadcast_param(a), _broadcast_param(b))))
        return same(self.loc, other.loc) and same(self.scale, other.scale)

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return O.sign(self.scale)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Real):
            result = C.full(shape, math.log(abs(self.scale)), dtype=x.dtype)
        else:
            result = O.log(O.abs(self.scale))
        if self._event_dim:
            result = O.sum(result.reshape(tuple(result.shape[:result.dim() - self._event_dim]) + (-1,)), -1)
            shape = shape[:len(shape) - self._event_dim]
        return O.expand(result, *shape)

    def forward_shape(self, shape):
        return Size(O.broadcast_shapes(tuple(shape), tuple(getattr(self.loc, "shape", ())),
                                       tuple(getattr(self.scale, "shape", ()))))

    inverse_shape = forward_shape


class SoftmaxTransform(_Parameterless):
    """A vector to the simplex by exp and normalization (not injective: log is one preimage)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        e = O.exp(x - O.amax(x, -1, keepdim=True))
        return e / O.sum(e, -1, keepdim=True)

    def _inverse(self, y):
        return O.log(y)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    inverse_shape = forward_shape


class StickBreakingTransform(_Parameterless):
    """R^K to the simplex of K + 1 parts: the k-th part takes the fraction z_k = sigmoid(x_k -
    log(K - k)) of what the earlier ones left (k from 0; the shift maps x = 0 to the centre);
    the last part is what remains."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    @staticmethod
    def _log_shift(n, like):
        """log(n - k) for k = 0 .. n-1."""
        return O.log(C.arange(n, 0, -1, dtype=like.dtype))

    def _call(self, x):
        z = _clipped_sigmoid(x - self._log_shift(x.shape[-1], x))
        left = O.cumprod(1 - z, -1)                       # what remains after each part
        ones = O.ones_like(z[..., :1])
        return O.cat([z, ones], -1) * O.cat([ones, left], -1)

    def _inverse(self, y):
        parts = y[..., :-1]
        left = O.clamp(1 - O.cumsum(parts, -1), min=float(D.finfo(y.dtype).tiny))
        # z_k = parts_k / (left_k + parts_k), so x_k = logit(z_k) + shift = log(parts_k / left_k) + shift
        return O.log(parts) - O.log(left) + self._log_shift(parts.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        # dy_k/dx_k = z_k (1 - z_k) prod_{j<k} (1 - z_j) = (1 - z_k) y_k, and the Jacobian of the
        # first K parts is triangular
        shifted = x - self._log_shift(x.shape[-1], x)
        return O.sum(NF.logsigmoid(-shifted) + O.log(y[..., :-1]), -1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(_Parameterless):
    """A square matrix to a Cholesky factor: its strict lower triangle kept, its diagonal
    exponentiated (the upper triangle dropped: not injective)."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return O.tril(x, -1) + O.diag_embed(O.exp(O.diagonal(x, 0, -2, -1)))

    def _inverse(self, y):
        return O.tril(y, -1) + O.diag_embed(O.log(O.diagonal(y, 0, -2, -1)))


class PositiveDefiniteTransform(_Parameterless):
    """A square matrix to a positive definite one, L L^T with L its LowerCholeskyTransform."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        factor = LowerCholeskyTransform()(x)
        return O.matmul(factor, O.transpose(factor, -2, -1))

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


class CorrCholeskyTransform(_Parameterless):
    """A vector of D (D - 1) / 2 reals to the Cholesky factor of a D x D correlation matrix (the
    LKJ construction): r = tanh(x) are partial correlations, laid row by row into the strict lower
    triangle; row i takes y_ij = r_ij sqrt(1 - sum_{k<j} y_ik^2) and its diagonal what is left of
    its unit norm, sqrt(1 - sum_{k<i} y_ik^2)."""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    @staticmethod
    def _side(n):
        d = int(round((1 + math.sqrt(1 + 8 * n)) / 2))
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return d

    @staticmethod
    def _placement(d, like):
        """The (n, d*d) 0/1 matrix that lays a vector of the strict lower triangle (row-major)
        into a flattened d x d matrix."""
        rows, cols = np.tril_indices(d, -1)
        m = np.zeros((rows.size, d * d))
        m[np.arange(rows.size), rows * d + cols] = 1.0
        return C.tensor(m, dtype=like.dtype)

    def _call(self, x):
        eps = float(D.finfo(x.dtype).eps)
        r = O.clamp(O.tanh(x), min=-1 + eps, max=1 - eps)
        d = self._side(x.shape[-1])
        r = O.matmul(r, self._placement(d, x)).reshape(tuple(x.shape[:-1]) + (d, d))
        # row i's multiplier at column j: prod_{k<j} sqrt(1 - r_ik^2), what its norm leaves
        left = O.cumprod(O.sqrt(1 - r * r), -1)
        left = O.cat([O.ones_like(left[..., :1]), left[..., :-1]], -1)
        return (r + C.eye(d, dtype=x.dtype)) * left

    def _inverse(self, y):
        d = y.shape[-1]
        used = O.cumsum(y * y, -1)
        left = 1 - O.cat([O.zeros_like(used[..., :1]), used[..., :-1]], -1)
        rows, cols = np.tril_indices(d, -1)
        flat = C.tensor(rows * d + cols)

        def strict_lower(m):            # (taken before dividing: above the diagonal left is 0)
            return O.index_select(m.reshape(tuple(y.shape[:-2]) + (d * d,)), -1, flat)
        return (strict_lower(y) / O.sqrt(strict_lower(left))).atanh()

    def log_abs_det_jacobian(self, x, y):
        # triangular in the row-major order: dy_ij / dr_ij = sqrt(1 - sum_{k<j} y_ik^2), and
        # dr/dx = 1 - tanh(x)^2 = exp(2 (log 2 - x - softplus(-2x)))
        d = y.shape[-1]
        left = 1 - O.cumsum(y * y, -1)
        rows, cols = np.tril_indices(d, -2)
        stick = O.index_select(left.reshape(tuple(y.shape[:-2]) + (d * d,)), -1, C.tensor(rows * d + cols))
        return 0.5 * O.sum(O.log(stick), -1) + O.sum(2.0 * (math.log(2.0) - x - NF.softplus(-2.0 * x)), -1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        d = self._side(shape[-1])
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        return tuple(shape[:-2]) + (shape[-1] * (shape[-1] - 1) // 2,)


class CatTransform(Transform):
    """tseq[i] on the slice of lengths[i] along dim, the results concatenated."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else CatTransform(self.transforms, self.dim, self.lengths,
                                                                         cache_size)

    def _pieces(self, x, fns):
        if not -x.dim() <= self.dim < x.dim() or x.shape[self.dim] != self.length:
            raise AssertionError
        out, start = [], 0
        for fn, n in zip(fns, self.lengths):
            out.append(fn(O.narrow(x, self.dim, start, n)))
            start += n
        return O.cat(out, self.dim)

    def _call(self, x):
        return self._pieces(x, self.transforms)

    def _inverse(self, y):
        return self._pieces(y, [t.inv for t in self.transforms])

    def log_abs_det_jacobian(self, x, y):
        if not -x.dim() <= self.dim < x.dim() or x.shape[self.dim] != self.length or \
                y.shape[self.dim] != self.length:
            raise AssertionError
        out, start = [], 0
        for t, n in zip(self.transforms, self.lengths):
            piece = t.log_abs_det_jacobian(O.narrow(x, self.dim, start, n), O.narrow(y, self.dim, start, n))
            out.append(_sum_rightmost(piece, self.event_dim - t.event_dim))
            start += n
        # dim counted from the right of the log-det's shape (the event dimensions gone): inside
        # the event, the slices are parts of one point and their log-dets add
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        return O.cat(out, dim) if dim < 0 else reduce(operator.add, out)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """tseq[i] on the i-th slice along dim, the results stacked."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else StackTransform(self.transforms, self.dim, cache_size)

    def _pieces(self, x, fns):
        if not -x.dim() <= self.dim < x.dim() or x.shape[self.dim] != len(self.transforms):
            raise AssertionError
        return O.stack([fn(O.select(x, self.dim, i)) for i, fn in enumerate(fns)], self.dim)

    def _call(self, x):
        return self._pieces(x, self.transforms)

    def _inverse(self, y):
        return self._pieces(y, [t.inv for t in self.transforms])

    def log_abs_det_jacobian(self, x, y):
        if not -x.dim() <= self.dim < x.dim() or x.shape[self.dim] != len(self.transforms) or \
                y.shape[self.dim] != len(self.transforms):
            raise AssertionError
        return O.stack([t.log_abs_det_jacobian(O.select(x, self.dim, i), O.select(y, self.dim, i))
                        for i, t in enumerate(self.transforms)], self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)

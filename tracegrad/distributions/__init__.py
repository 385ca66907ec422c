"""torch.distributions: Normal and Categorical, in tracegrad ops (log_prob, entropy and
rsample differentiate; sample does not)."""
import math
import numbers

from ..tensor import Tensor
from ..grad_mode import no_grad
from .. import creation as C
from .. import _dtype as D
from ..ops import functional as O
from ..nn import functional as NF

__all__ = ["Distribution", "Normal", "Categorical"]


def _as_tensor(v, like=None):
    if isinstance(v, Tensor):
        return v
    return C.tensor(float(v), dtype=like.dtype if like is not None else None)


def _shape(size):
    return tuple(size) if not isinstance(size, int) else (size,)


class Distribution:
    has_rsample = False
    _validate_args = False

    @property
    def batch_shape(self):
        from ..tensor import Size
        return Size(self._batch_shape)

    @property
    def event_shape(self):
        from ..tensor import Size
        return Size(())

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def _extended(self, sample_shape):
        return _shape(sample_shape) + tuple(self._batch_shape)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}: {v.shape if v.ndim else v}' for k, v in self._params())})"


class Normal(Distribution):
    """N(loc, scale^2)."""
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        loc_t = loc if isinstance(loc, Tensor) else None
        scale_t = scale if isinstance(scale, Tensor) else None
        like = loc_t if loc_t is not None else scale_t
        self.loc, self.scale = O.broadcast_tensors(_as_tensor(loc, like), _as_tensor(scale, like))
        self._batch_shape = tuple(self.loc.shape)
        if validate_args is not False:
            with no_grad():
                if not bool(O.all(self.scale > 0)):
                    raise ValueError(f"Expected parameter scale ({type(self.scale).__name__} of shape "
                                     f"{tuple(self.scale.shape)}) of distribution Normal(loc: {self.loc}, scale: "
                                     f"{self.scale}) to satisfy the constraint GreaterThan(lower_bound=0.0), but found "
                                     f"invalid values:\n{self.scale}")

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
        value = _as_tensor(value, self.loc)
        var = self.scale * self.scale
        return -((value - self.loc) ** 2) / (2 * var) - O.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + O.log(self.scale)

    def cdf(self, value):
        value = _as_tensor(value, self.loc)
        return 0.5 * (1 + O.erf((value - self.loc) / (self.scale * math.sqrt(2))))


class Categorical(Distribution):
    """A choice among the last dimension's categories, by probs or by logits."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / O.sum(probs, -1, keepdim=True)
            eps = float(D.finfo(self.probs.dtype).eps) if hasattr(D, "finfo") else 1e-7
            p = O.clamp(self.probs, min=eps, max=1 - eps)
            self.logits = O.log(p)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - O.logsumexp(logits, -1, keepdim=True)
            self.probs = NF.softmax(self.logits, -1)
        self._num_events = self.probs.shape[-1]
        self._batch_shape = tuple(self.probs.shape[:-1])

    def _params(self):
        return (("probs", self.probs),)

    @property
    def param_shape(self):
        return self.probs.shape

    @property
    def mean(self):
        return C.full(self._batch_shape, float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return O.argmax(self.probs, -1)

    def sample(self, sample_shape=()):
        shape = _shape(sample_shape)
        with no_grad():
            p = self.probs.reshape(-1, self._num_events)
            n = int(math.prod(shape)) if shape else 1
            draws = C.multinomial(p, n, True)                 # (batch, n)
            out = draws.T.reshape(shape + tuple(self._batch_shape))
        return out

    def log_prob(self, value):
        value = value.long() if hasattr(value, "long") else value
        v, logits = O.broadcast_tensors(O.unsqueeze(value, -1), self.logits)
        return O.squeeze(O.gather(logits, -1, v[..., :1]), -1)

    def entropy(self):
        logits = O.clamp(self.logits, min=float(D.finfo(self.logits.dtype).min) if hasattr(D, "finfo") else -1e30)
        return -O.sum(logits * self.probs, -1)

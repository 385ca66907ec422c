"""torch.distributions.TransformedDistribution: a base distribution pushed through a list of
transforms. Draws are the transforms of the base's draws; the density is the base's at the
preimage less the log |det| of each transform's Jacobian (the change of variables)."""
from ..grad_mode import no_grad
from ..tensor import Size
from .base import Distribution
from .families import Independent
from . import constraints
from .transforms import Transform, ComposeTransform, _sum_rightmost

__all__ = ["TransformedDistribution"]


class TransformedDistribution(Distribution):
    """base_distribution through transforms (a Transform or a list of them), in order. The
    transforms' points may be wider than the base's events: the base is then expanded and its
    rightmost batch dimensions read as event dimensions (Independent)."""
    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list) and all(isinstance(t, Transform) for t in transforms):
            self.transforms = transforms
        else:
            raise ValueError("transforms must be a Transform or a list of Transforms")
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        base_event_dim = len(base_distribution.event_shape)
        chain = ComposeTransform(self.transforms)
        if len(base_shape) < chain.domain.event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least {chain.domain.event_dim}, "
                             f"but got {Size(base_shape)}.")
        shape = tuple(chain.forward_shape(base_shape))
        wanted = tuple(chain.inverse_shape(shape))
        if wanted != base_shape:
            base_distribution = base_distribution.expand(wanted[:len(wanted) - base_event_dim])
        if chain.domain.event_dim > base_event_dim:
            base_distribution = Independent(base_distribution, chain.domain.event_dim - base_event_dim)
        self.base_dist = base_distribution
        event_dim = max(chain.codomain.event_dim,
                        base_event_dim + chain.codomain.event_dim - chain.domain.event_dim)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape) - support.event_dim)
        return support

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape) + tuple(self.event_shape)
        for t in reversed(self.transforms):
            shape = tuple(t.inverse_shape(shape))
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        new._batch_shape = tuple(batch_shape)
        return new

    def _forward(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def sample(self, sample_shape=()):
        with no_grad():
            return self._forward(self.base_dist.sample(sample_shape))

    def rsample(self, sample_shape=()):
        return self._forward(self.base_dist.rsample(sample_shape))

    def _check(self, value):
        self._validate_sample(value, self.support.check, repr(self.support))

    def log_prob(self, value):
        """The base's log density at the preimage, less each transform's log |det| summed over
        the dimensions that form one event at that stage."""
        self._check(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            log_prob = log_prob - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.domain.event_dim)
            y = x
        return log_prob + _sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """P(Y <= y) from P(X <= x): a decreasing chain (sign -1) turns it into 1 - P."""
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        if self._validate_args:
            base = self.base_dist
            base._validate_sample(value, base.support.check, repr(base.support))
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        return self._forward(self.base_dist.icdf(self._monotonize_cdf(value)))

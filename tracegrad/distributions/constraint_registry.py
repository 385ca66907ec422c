"""torch.distributions.constraint_registry: from a constraint to a transform of the real numbers
onto it. biject_to gives a bijection (for reparameterizing a constrained parameter, with its
log-det); transform_to may give a cheaper map that is onto but not injective (softmax to the
simplex). Both look a constraint up by its class; register adds a factory for a class."""
import numbers

from . import constraints
from . import transforms as T

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """{constraint class: factory(constraint) -> transform}."""

    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        """Register factory for constraint (a Constraint subclass or an instance of one); without
        factory, a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got "
                            f"{constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _is(bound, number):
    return isinstance(bound, numbers.Number) and bound == number


def _real(c):
    return T.identity_transform


def _greater_than(c):
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(c.lower_bound, 1)])


def _less_than(c):
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(c.upper_bound, -1)])


def _interval(c):
    if _is(c.lower_bound, 0) and _is(c.upper_bound, 1):
        return T.SigmoidTransform()
    return T.ComposeTransform([T.SigmoidTransform(),
                               T.AffineTransform(c.lower_bound, c.upper_bound - c.lower_bound)])


def _independent(registry):
    return lambda c: T.IndependentTransform(registry(c.base_constraint), c.reinterpreted_batch_ndims)


def _cat(registry):
    return lambda c: T.CatTransform([registry(part) for part in c.cseq], c.dim, c.lengths)


def _stack(registry):
    return lambda c: T.StackTransform([registry(part) for part in c.cseq], c.dim)


for _registry in (biject_to, transform_to):
    _registry.register(constraints._Real, _real)
    # (positive and nonnegative are a greater_than(0) and a greater_than_eq(0): exp then a shift by
    # 0, as torch's, whose lookup by class reaches the greater_than factory for them too)
    _registry.register(constraints._GreaterThan, _greater_than)
    _registry.register(constraints._GreaterThanEq, _greater_than)
    _registry.register(constraints._LessThan, _less_than)
    _registry.register(constraints._Interval, _interval)
    _registry.register(constraints._HalfOpenInterval, _interval)
    _registry.register(constraints._IndependentConstraint, _independent(_registry))
    _registry.register(constraints._Cat, _cat(_registry))
    _registry.register(constraints._Stack, _stack(_registry))
biject_to.register(constraints._Simplex, lambda c: T.StickBreakingTransform())
transform_to.register(constraints._Simplex, lambda c: T.SoftmaxTransform())
transform_to.register(constraints._LowerCholesky, lambda c: T.LowerCholeskyTransform())
transform_to.register(constraints._PositiveDefinite, lambda c: T.PositiveDefiniteTransform())
biject_to.register(constraints._CorrCholesky, lambda c: T.CorrCholeskyTransform())
transform_to.register(constraints._CorrCholesky, lambda c: T.CorrCholeskyTransform())

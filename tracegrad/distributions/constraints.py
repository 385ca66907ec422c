"""torch.distributions.constraints: the sets a parameter or a sample must lie in. Each is a
check (a boolean tensor, in tracegrad ops) and torch's printed name, which the validation
messages quote."""
from ..ops import functional as O
from .. import linalg
from .. import _dtype as D


class Constraint:
    """A set of values: check(value) says elementwise (or per event) whether value lies in it."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Real(Constraint):
    def check(self, value):
        return value == value                          # (not NaN; inf is real)


class _Bound(Constraint):
    def __init__(self, lower_bound=None, upper_bound=None):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def __repr__(self):
        bounds = [f"{k}={v}" for k, v in (("lower_bound", self.lower_bound), ("upper_bound", self.upper_bound))
                  if v is not None]
        return f"{type(self).__name__.lstrip('_')}({', '.join(bounds)})"


class _GreaterThan(_Bound):
    def __init__(self, lower_bound):
        super().__init__(lower_bound=lower_bound)

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(_Bound):
    def __init__(self, lower_bound):
        super().__init__(lower_bound=lower_bound)

    def check(self, value):
        return value >= self.lower_bound


class _LessThan(_Bound):
    def __init__(self, upper_bound):
        super().__init__(upper_bound=upper_bound)

    def check(self, value):
        return value < self.upper_bound


class _HalfOpenInterval(_Bound):
    def check(self, value):
        return O.logical_and(value >= self.lower_bound, value < self.upper_bound)


class _Interval(_Bound):
    def check(self, value):
        return O.logical_and(value >= self.lower_bound, value <= self.upper_bound)


def _whole(value):
    return O.eq(value % 1, 0)


class _IntegerGreaterThan(_Bound):
    is_discrete = True

    def check(self, value):
        return O.logical_and(_whole(value), value >= self.lower_bound)


class _IntegerInterval(_Bound):
    is_discrete = True

    def check(self, value):
        return O.logical_and(_whole(value), O.logical_and(value >= self.lower_bound, value <= self.upper_bound))


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return O.logical_or(O.eq(value, 0), O.eq(value, 1))


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return O.logical_and(O.all(value >= 0, -1), O.abs(O.sum(value, -1) - 1) < 1e-6)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return O.logical_and(O.all(_Boolean().check(value), -1), O.eq(O.sum(value, -1), 1))


class _Multinomial(Constraint):
    """Non-negative counts per category whose total is at most upper_bound."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return O.logical_and(O.all(value >= 0, -1), O.sum(value, -1) <= self.upper_bound)

    def __repr__(self):
        return "Multinomial()"


class _IndependentConstraint(Constraint):
    """base_constraint over the rightmost reinterpreted_batch_ndims dimensions at once."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        ok = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            ok = O.all(ok, -1)
        return ok

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamilyConstraint(Constraint):
    """A mixture's support: a value (without the component dimension) checked against the
    components' support at every component (torch's: in all of them)."""

    def __init__(self, base_constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        ok = self.base_constraint.check(O.unsqueeze(value, -1 - self.event_dim))
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        keep = value.dim() - self.event_dim
        return O.all(ok.reshape(tuple(ok.shape[:keep]) + (-1,)), -1)

    def __repr__(self):
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal (Cholesky factors)."""
    event_dim = 2

    def check(self, value):
        lower = O.all(O.all(O.eq(O.triu(value, 1), 0), -1), -1)
        return O.logical_and(lower, O.all(O.diagonal(value, 0, -2, -1) > 0, -1))


class _CorrCholesky(Constraint):
    """Cholesky factors of correlation matrices: lower Cholesky factors whose rows have unit norm
    (to 10 eps per column, as torch's)."""
    event_dim = 2

    def check(self, value):
        tol = float(D.finfo(value.dtype).eps) * value.shape[-1] * 10
        norms = O.sqrt(O.sum(value.detach() * value.detach(), -1))
        return O.logical_and(_LowerCholesky().check(value), O.all(O.abs(norms - 1.0) <= tol, -1))


class _PositiveDefinite(Constraint):
    """Symmetric (to torch's isclose(v, v.mT, atol=1e-6)) matrices with a Cholesky factor."""
    event_dim = 2

    def check(self, value):
        vt = O.transpose(value, -2, -1)
        symmetric = O.all(O.all(O.abs(value - vt) <= 1e-6 + 1e-5 * O.abs(vt), -1), -1)
        return O.logical_and(symmetric, O.eq(linalg.cholesky_ex(value).info, 0))


class _Cat(Constraint):
    """constraint cseq[i] on the slice of lengths[i] along dim."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq, self.dim = list(cseq), dim
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        self.is_discrete = any(c.is_discrete for c in self.cseq)
        self.event_dim = max(c.event_dim for c in self.cseq)

    def check(self, value):
        out, start = [], 0
        for c, n in zip(self.cseq, self.lengths):
            out.append(c.check(O.narrow(value, self.dim, start, n)))
            start += n
        return O.cat(out, self.dim)


class _Stack(Constraint):
    """constraint cseq[i] on the i-th slice along dim."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim
        self.is_discrete = any(c.is_discrete for c in self.cseq)
        self.event_dim = max(c.event_dim for c in self.cseq)

    def check(self, value):
        return O.stack([c.check(O.select(value, self.dim, i)) for i, c in enumerate(self.cseq)], self.dim)


real = _Real()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
nonnegative_integer = _IntegerGreaterThan(0)
boolean = _Boolean()
simplex = _Simplex()
one_hot = _OneHot()
real_vector = _IndependentConstraint(real, 1)
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
positive_definite = _PositiveDefinite()
greater_than = _GreaterThan
less_than = _LessThan
half_open_interval = _HalfOpenInterval
cat = _Cat
stack = _Stack
greater_than_eq = _GreaterThanEq
interval = _Interval
integer_interval = _IntegerInterval
multinomial = _Multinomial
independent = _IndependentConstraint

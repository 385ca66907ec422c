"""The op table for the tests: every public op with its sample inputs, like torch's OpInfo.

An `OpInfo` names an op and gives `fn(m, *inputs, **kwargs)`, written once over a module
`m` (torch or tracegrad), so the same program runs on both. Each `Sample` gives the
shapes of the tensor inputs (made by the tests in every dtype they try) and the keyword
arguments passed to `fn`; index tensors, masks and other constants are made inside `fn`
from plain Python data, so they are the same on both sides.

Domains keep inputs where the op is defined and differentiable: "pos" (away from 0,
positive), "nonzero", "small" (inside (-1.2, 1.2)), "zeros" (some exact zeros), "zero"
(all zeros), "special" (nan, inf, 0), "exp" (small non-negative integers: integer
exponents, ties). A domain is one name for every input or a tuple with one entry per input
(None: plain randn). A sample's `grad`, `gradgrad` and `fd` switch off the derivative
tests torch itself cannot pass there (each such sample says why).
"""
import zlib

import numpy as np

FLOAT = ("float32", "float64")
ALL = ("float32", "float64", "int64", "int32", "bool")
INT = ("int64", "int32", "bool")


class Sample:
    """Input shapes and keyword arguments for one call; `dtypes` narrows the dtypes tried."""

    def __init__(self, *shapes, domain=None, grad=True, gradgrad=True, fd=True, dtypes=None, **kwargs):
        self.shapes = shapes
        self.dtypes = dtypes
        self.domain = domain
        self.grad = grad
        self.gradgrad = gradgrad
        self.fd = fd
        self.kwargs = kwargs

    def domain_of(self, i, op):
        d = self.domain if self.domain is not None else op.domain
        if isinstance(d, tuple):
            return d[i]
        return d

    def describe(self):
        parts = ["x".join(map(str, s)) if s else "0d" for s in self.shapes]
        parts += [f"{k}={v}" for k, v in self.kwargs.items()]
        return ",".join(parts).replace(" ", "")


class OpInfo:
    """One public op: how to call it, its samples, what the tests may assume.

    `dtypes` are the dtypes the op supports (its derivatives are tested in the float ones
    among them); the forward test tries every dtype and expects torch's refusals.
    """

    def __init__(self, name, fn=None, samples=(), *, method=False, dtypes=ALL, domain=None, grad=True,
                 gradgrad=True, fd=True):
        self.name = name
        self.fn = fn if fn is not None else (lambda m, *xs, **kw: getattr(m, name)(*xs, **kw))
        self.method = (lambda m, x, *xs, **kw: getattr(x, name)(*xs, **kw)) if method is True else (method or None)
        self.samples = [s if isinstance(s, Sample) else Sample(*s) for s in samples]
        self.dtypes = dtypes
        self.domain = domain
        self.grad = grad
        self.gradgrad = gradgrad
        self.fd = fd

    def __repr__(self):
        return self.name


# -- input data -------------------------------------------------------------------------------

def _rng(key):
    return np.random.RandomState(zlib.crc32(key.encode()))


def make_array(shape, dtype, domain, key):
    """Deterministic input data of `shape` for numpy `dtype` name in `domain`."""
    rs = _rng(key)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        a = rs.rand(n) > 0.5 if domain not in ("pos", "nonzero") else np.ones(n, bool)
        return a.reshape(shape)
    if dtype in ("int64", "int32"):
        if domain == "pos":
            a = rs.randint(1, 5, n)
        elif domain == "nonzero":
            a = rs.randint(1, 5, n) * rs.choice([-1, 1], n)
        elif domain == "exp":
            a = rs.randint(0, 4, n)
        else:
            a = rs.permutation(n) - n // 2 if n > 1 else rs.randint(-3, 4, n)
        return a.astype(dtype).reshape(shape)
    if domain == "pos":
        a = np.abs(rs.randn(n)) + 0.5
    elif domain == "nonzero":
        a = (np.abs(rs.randn(n)) + 0.5) * rs.choice([-1.0, 1.0], n)
    elif domain == "small":
        a = rs.uniform(-1.2, 1.2, n)
    elif domain == "exp":
        a = rs.randint(0, 4, n).astype(np.float64)
    elif domain == "zeros":
        a = rs.randn(n)
        for i in (0, 5, 6):
            if i < n:
                a[i] = 0.0
    elif domain == "zero":
        a = np.zeros(n)
    elif domain == "special":
        a = np.resize(np.array([np.nan, np.inf, -np.inf, 0.0, 1.5, -2.0]), n)
    else:
        a = rs.randn(n)
    return a.astype(dtype).reshape(shape)


def _t(m, data, dtype=None):
    return m.tensor(data) if dtype is None else m.tensor(data, dtype=getattr(m, dtype))


# -- the ops ------------------------------------------------------------------------------------

U_SHAPES = [(), (5,), (2, 3), (1, 2, 0), (2, 1, 2, 3)]
B_SHAPES = [((2, 3), (2, 3)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (1, 3)),
            ((1, 2, 1, 3), (2, 2, 1))]


def _unary(name, domain=None, **kw):
    return OpInfo(name, samples=[Sample(s) for s in U_SHAPES], method=True, domain=domain, **kw)


def _binary(name, domain=None, **kw):
    return OpInfo(name, samples=[Sample(a, b) for a, b in B_SHAPES], method=True, domain=domain, **kw)


def _inplace(op):
    def fn(m, x, y, **kw):
        z = x.clone()
        op(z, y)
        return z
    return fn


def _setitem(key_fn, value="y"):
    def fn(m, x, y=None, **kw):
        z = x.clone()
        z[key_fn(m, x)] = y if value == "y" else value
        return z
    return fn


def _nnf(m):
    return m.nn.functional


def _inplace_on_view(m, x, y):
    z = x.clone()
    v = z[:, 1]
    v.mul_(y)
    return z, v


def _idx(m, data):
    return m.tensor(data, dtype=m.int64)


def _mask(m, data):
    return m.tensor(data, dtype=m.bool)


OPS = [
    # == elementwise, one input ==
    _unary("neg"), _unary("abs"), _unary("sign"), _unary("exp"), _unary("exp2"),
    _unary("log", "pos"), _unary("log2", "pos"), _unary("log1p", "pos"), _unary("expm1"),
    _unary("sqrt", "pos"), _unary("rsqrt", "pos"), _unary("reciprocal", "nonzero"),
    _unary("sin"), _unary("cos"), _unary("tan", "small"), _unary("tanh"), _unary("sigmoid"), _unary("erf"),
    _unary("sinc"),
    _unary("relu"), _unary("floor"), _unary("ceil"), _unary("round"), _unary("square"),
    OpInfo("round_decimals", lambda m, x, decimals=1: m.round(x * 10, decimals=decimals),
           [Sample((2, 3)), Sample(()), Sample((2, 3), decimals=0), Sample((3,), decimals=-1)]),
    OpInfo("isnan", samples=[Sample((2, 3), domain="special"), Sample((0,))], method=True),
    OpInfo("isinf", samples=[Sample((2, 3), domain="special"), Sample(())], method=True),
    OpInfo("isfinite", samples=[Sample((2, 3), domain="special"), Sample(())], method=True),
    OpInfo("logical_not", samples=[Sample((2, 3)), Sample(()), Sample((0, 2))], method=True),
    # at the kinks: torch's subgradients (finite differences do not apply there)
    OpInfo("kinks_at_zero", lambda m, x: (x.abs(), x.relu(), x.sign(), x.clamp(min=0), m.maximum(x, m.zeros_like(x)),
                                          x ** 2, x.norm(), x.norm(1), x.norm(float("inf"))),
           # a norm's second derivative at 0 is 0/0: torch's is nan, not worth copying
           [Sample((2, 3), domain="zeros", fd=False), Sample((3,), domain="zero", fd=False, gradgrad=False)],
           dtypes=FLOAT),
    OpInfo("sqrt_at_zero", lambda m, x: (x.sqrt(), x ** 0.5, x.rsqrt()), [Sample((3,), domain="zeros", fd=False)],
           dtypes=FLOAT),
    OpInfo("operator_neg", lambda m, x: -x, [Sample((2, 3)), Sample(())]),
    OpInfo("operator_abs", lambda m, x: abs(x), [Sample((2, 3))]),
    OpInfo("operator_invert", lambda m, x: ~x, [Sample((2, 3)), Sample(())], dtypes=INT),
    OpInfo("clone", samples=[Sample(s) for s in U_SHAPES], method=True),
    OpInfo("contiguous", lambda m, x: x.t().contiguous(), [Sample((2, 3)), Sample((3, 0))]),
    # casts to float32 lose what a finite difference of 1e-6 measures
    OpInfo("to", lambda m, x, dtype: x.to(getattr(m, dtype)),
           [Sample((2, 3), dtype="float64"), Sample((2, 3), dtype="float32", fd=False), Sample((), dtype="int64"),
            Sample((3,), dtype="bool")]),
    OpInfo("double", lambda m, x: x.double(), [Sample((2, 3))]),
    OpInfo("float", lambda m, x: x.float(), [Sample((2, 3))], fd=False),
    OpInfo("long", lambda m, x: x.long(), [Sample((2, 3))]),
    OpInfo("clamp", samples=[Sample((2, 3), min=-0.5, max=0.5), Sample((3, 4), min=0.0), Sample((), max=0.2),
                             Sample((2, 0), min=-1, max=1), Sample((2, 3), min=-1, max=1)], method=True),
    OpInfo("clamp_tensor", lambda m, x, lo, hi: m.clamp(x, lo - 0.5, hi + 0.5),
           [Sample((2, 3), (2, 3), (2, 3)), Sample((3, 4), (4,), (3, 1))]),
    OpInfo("clamp_tensor_min", lambda m, x, lo: m.clamp(x, min=lo), [Sample((2, 3), (2, 3)), Sample((2, 3), (3,))]),
    OpInfo("clamp_min", lambda m, x: x.clamp_min(0.1), [Sample((2, 3))]),
    OpInfo("clamp_at_bounds", lambda m, x, lo: (m.clamp(x, 1, 2), m.clamp(x, min=lo), m.clamp(x, lo, lo - 1)),
           [Sample((2, 3), (3,), domain="exp", fd=False)], dtypes=FLOAT),
    OpInfo("maximum_ties", lambda m, x, y: (m.maximum(x, y), m.minimum(x, y), m.max(x, y)),
           [Sample((2, 3), (2, 3), domain="exp", fd=False), Sample((3, 4), (4,), domain="exp", fd=False)],
           dtypes=FLOAT),
    OpInfo("mixed_dtypes", lambda m, x, y: (x.to(m.float32) * y.to(m.float64), m.where(x > 0, x.to(m.float32), y),
                                            m.cat([x.to(m.float32).reshape(-1), y.reshape(-1)]),
                                            x.to(m.float32) + y.to(m.float64).sum()),
           [Sample((2, 3), (2, 3))], dtypes=("float32",)),
    OpInfo("clamp_max", lambda m, x: x.clamp_max(0.1), [Sample((2, 3))]),

    # == elementwise, two inputs ==
    _binary("add"), _binary("sub"), _binary("mul"), _binary("div", ("nonzero", "nonzero")),
    _binary("maximum"), _binary("minimum"), _binary("pow", ("pos", "exp")),
    _binary("remainder", (None, "nonzero")),
    _binary("fmod", (None, "nonzero")),
    # torch gives floor_divide no derivative: its output requires grad, backward raises
    _binary("floor_divide", (None, "nonzero"), grad=False),
    _binary("eq"), _binary("ne"), _binary("lt"), _binary("le"), _binary("gt"), _binary("ge"),
    _binary("logical_and"), _binary("logical_or"), _binary("logical_xor"),
    _binary("bitwise_and", dtypes=INT), _binary("bitwise_or", dtypes=INT), _binary("bitwise_xor", dtypes=INT),
    _binary("bitwise_left_shift", dtypes=INT), _binary("bitwise_right_shift", dtypes=INT),
    OpInfo("add_alpha", lambda m, x, y: m.add(x, y, alpha=2), [Sample((2, 3), (3,))], dtypes=FLOAT + ("int64",)),
    OpInfo("sub_alpha", lambda m, x, y: m.sub(x, y, alpha=2), [Sample((2, 3), (3,))], dtypes=FLOAT + ("int64",)),
    OpInfo("rsub", lambda m, x, y: m.rsub(x, y), [Sample((2, 3), (3,))]),
    OpInfo("rsub_scalar", lambda m, x: m.rsub(x, 2), [Sample((2, 3))]),
    OpInfo("div_floor", lambda m, x, y: m.div(x, y, rounding_mode="floor"), [Sample((2, 3), (3,)), Sample((), (2,))],
           domain=(None, "nonzero")),
    OpInfo("div_trunc", lambda m, x, y: m.div(x, y, rounding_mode="trunc"), [Sample((2, 3), (3,))],
           domain=(None, "nonzero")),
    OpInfo("div_floor_scalar", lambda m, x: m.div(x, 2, rounding_mode="floor"), [Sample((2, 3))]),
    OpInfo("pow_tensor_base", lambda m, x: m.pow(2.0, x), [Sample((2, 3)), Sample(())]),
    OpInfo("pow_scalar_exp", lambda m, x, e: m.pow(x, e),
           [Sample((2, 3), e=2), Sample((2, 3), e=3), Sample((2, 3), e=0), Sample((2, 3), e=1), Sample((), e=-1),
            Sample((2, 3), e=-2), Sample((2, 3), e=0.5), Sample((2, 3), e=2.5), Sample((2, 0), e=2)], domain="pos"),
    OpInfo("pow_neg_base", lambda m, x: x ** 2, [Sample((2, 3)), Sample((3,))]),
    OpInfo("where", lambda m, c, x, y: m.where(c > 0, x, y),
           [Sample((2, 3), (2, 3), (2, 3)), Sample((3, 1), (4,), (1, 4)), Sample((), (2,), ()),
            Sample((0, 2), (0, 2), (2,))]),
    OpInfo("where_scalar", lambda m, x: m.where(x > 0, x, 0.0), [Sample((2, 3)), Sample(())]),
    OpInfo("where_scalar_first", lambda m, x: m.where(x > 0, 1.5, x), [Sample((2, 3))]),
    OpInfo("where_method", lambda m, x, y: x.where(x > 0, y), [Sample((2, 3), (3,))]),
    OpInfo("masked_fill", lambda m, x, c, value=1.5: x.masked_fill(c > 0, value),
           [Sample((2, 3), (2, 3)), Sample((3, 4), (4,)), Sample((), ()), Sample((2, 3), (2, 3), value=-2),
            Sample((0, 3), (3,))]),
    OpInfo("masked_fill_fn", lambda m, x, c: m.masked_fill(x, c > 0, 0.0), [Sample((2, 3), (2, 3))]),
    OpInfo("masked_fill_tensor_value", lambda m, x, c: x.masked_fill(c > 0, m.tensor(2.0, dtype=x.dtype)),
           [Sample((2, 3), (2, 3))], dtypes=FLOAT),
    OpInfo("masked_fill_grad_value", lambda m, x, c, v: x.masked_fill(c > 0, v),
           [Sample((2, 3), (2, 3), ())], dtypes=FLOAT),

    # == operators, reflected and in-place forms ==
    OpInfo("operator_add", lambda m, x, y: x + y, [Sample((2, 3), (3,)), Sample((), (2,))]),
    OpInfo("operator_sub", lambda m, x, y: x - y, [Sample((2, 3), (3,))]),
    OpInfo("operator_mul", lambda m, x, y: x * y, [Sample((2, 3), (3,))]),
    OpInfo("operator_truediv", lambda m, x, y: x / y, [Sample((2, 3), (3,))], domain="nonzero"),
    # floor_divide has no derivative in torch (see above)
    OpInfo("operator_floordiv", lambda m, x, y: x // y, [Sample((2, 3), (3,))], domain="nonzero", grad=False),
    OpInfo("operator_mod", lambda m, x, y: x % y, [Sample((2, 3), (3,))], domain="nonzero"),
    OpInfo("operator_pow", lambda m, x, y: x ** y, [Sample((2, 3), (3,))], domain=("pos", "exp")),
    OpInfo("operator_matmul", lambda m, x, y: x @ y, [Sample((2, 3), (3, 4))]),
    OpInfo("operator_and", lambda m, x, y: x & y, [Sample((2, 3), (3,))], dtypes=("int64", "bool")),
    OpInfo("operator_or", lambda m, x, y: x | y, [Sample((2, 3), (3,))], dtypes=("int64", "bool")),
    OpInfo("operator_xor", lambda m, x, y: x ^ y, [Sample((2, 3), (3,))], dtypes=("int64", "bool")),
    OpInfo("operator_compare", lambda m, x, y: (x < y, x <= y, x > y, x >= y, x == y, x != y),
           [Sample((2, 3), (3,))]),
    OpInfo("operator_scalar", lambda m, x, s: (x + s, x - s, x * s, x / s, x == s, x < s, x > s),
           [Sample((2, 3), s=2), Sample((2, 3), s=2.5), Sample((), s=-1)]),
    OpInfo("operator_bool_scalar", lambda m, x: (x + True, x * False, x == True, x / True), [Sample((2, 3))]),
    OpInfo("operator_reflected", lambda m, x, s: (s + x, s - x, s * x, s / x),
           [Sample((2, 3), s=2), Sample((2, 3), s=2.5), Sample((), s=3)], domain="nonzero"),
    OpInfo("operator_rpow", lambda m, x, s: s ** x, [Sample((2, 3), s=2), Sample((2, 3), s=1.5)]),
    OpInfo("operator_spow", lambda m, x, s: x ** s,
           [Sample((2, 3), s=2), Sample((2, 3), s=0.5), Sample((2, 3), s=-1.5)], domain="pos"),
    OpInfo("operator_rfloordiv", lambda m, x, s: (s // x, x // s), [Sample((2, 3), s=7), Sample((2, 3), s=2.5)],
           domain="nonzero", grad=False),
    OpInfo("operator_mod_scalar", lambda m, x, s: x % s, [Sample((2, 3), s=7), Sample((2, 3), s=-2.5)]),
    # remainder(Scalar, Tensor) has no derivative in torch
    OpInfo("operator_rmod", lambda m, x, s: s % x, [Sample((2, 3), s=7), Sample((2, 3), s=2.5)],
           domain="nonzero", grad=False),
    OpInfo("operator_iadd", _inplace(lambda z, y: z.__iadd__(y)), [Sample((2, 3), (3,)), Sample((2, 3), ())]),
    OpInfo("operator_isub", _inplace(lambda z, y: z.__isub__(y)), [Sample((2, 3), (3,))], dtypes=FLOAT + ("int64",)),
    OpInfo("operator_imul", _inplace(lambda z, y: z.__imul__(y)), [Sample((2, 3), (3,))]),
    OpInfo("operator_itruediv", _inplace(lambda z, y: z.__itruediv__(y)), [Sample((2, 3), (3,))],
           domain="nonzero"),
    OpInfo("operator_ipow", _inplace(lambda z, y: z.__ipow__(y)), [Sample((2, 3), (3,))], domain=("pos", "exp")),
    OpInfo("add_", _inplace(lambda z, y: z.add_(y)), [Sample((2, 3), (3,))]),
    # (a comparison in place on a float tensor: torch's LtBackward1, zero gradients)
    OpInfo("lt_", _inplace(lambda z, y: z.lt_(y)), [Sample((2, 3), (3,))], dtypes=FLOAT),
    OpInfo("mul_", _inplace(lambda z, y: z.mul_(y)), [Sample((2, 3), (2, 3))]),
    OpInfo("sub_alpha_", _inplace(lambda z, y: z.sub_(y, alpha=3)), [Sample((2, 3), (2, 3))], dtypes=FLOAT),
    OpInfo("div_", _inplace(lambda z, y: z.div_(y)), [Sample((2, 3), (3,))], domain="nonzero", dtypes=FLOAT),
    OpInfo("clamp_", lambda m, x: x.clone().clamp_(-0.5, 0.5), [Sample((2, 3))]),
    OpInfo("exp_", lambda m, x: x.clone().exp_(), [Sample((2, 3))], dtypes=FLOAT),
    OpInfo("masked_fill_", lambda m, x: x.clone().masked_fill_(x > 0, 0.5), [Sample((2, 3))]),

    # == reductions ==
    OpInfo("sum", samples=[Sample((2, 3)), Sample(()), Sample((2, 3), dim=1), Sample((2, 3), dim=-1, keepdim=True),
                           Sample((2, 3, 4), dim=(0, 2)), Sample((2, 1, 3, 2), dim=(1, -1), keepdim=True),
                           Sample((), dim=0), Sample((0, 3)), Sample((0, 3), dim=0), Sample((2, 0), dim=1),
                           Sample((2, 3), dim=[]), Sample((2, 3), dim=0, dtype="float64")],
           fn=lambda m, x, dtype=None, **kw: m.sum(x, **kw) if dtype is None else m.sum(x, dtype=getattr(m, dtype),
                                                                                          **kw),
           method=lambda m, x, dtype=None, **kw: x.sum(**kw)),
    OpInfo("mean", samples=[Sample((2, 3)), Sample(()), Sample((2, 3), dim=1), Sample((2, 3), dim=0, keepdim=True),
                            Sample((2, 3, 4), dim=(-1, 0)), Sample((0, 3), dim=1), Sample((2, 3), dtype="float64"),
                            Sample((2, 3), dim=1, dtype="float16", fd=False)],
           fn=lambda m, x, dtype=None, **kw: m.mean(x, **kw) if dtype is None else m.mean(
               x, dtype=getattr(m, dtype), **kw),
           method=lambda m, x, dtype=None, **kw: x.mean(**kw)),
    # nan results: forward only
    OpInfo("mean_empty", lambda m, x: m.mean(x), [Sample((0, 3))], grad=False),
    OpInfo("prod", samples=[Sample((2, 3)), Sample(()), Sample((3, 4), dim=1), Sample((3, 4), dim=0, keepdim=True),
                            Sample((2, 3, 2), dim=-1), Sample((0, 3), dim=1), Sample((3, 4), dim=1, domain="zeros"),
                            Sample((3, 4), domain="zeros"), Sample((1, 3), dim=0)], method=True),
    OpInfo("max", lambda m, x: m.max(x), [Sample((2, 3)), Sample(()), Sample((2, 1, 3, 2))], method=True),
    OpInfo("max_dim", lambda m, x, **kw: m.max(x, **kw),
           [Sample((2, 3), dim=1), Sample((2, 3), dim=0, keepdim=True), Sample((), dim=0), Sample((2, 3, 4), dim=-1),
            Sample((2, 0), dim=0)],
           method=lambda m, x, **kw: x.max(**kw)),
    OpInfo("max_binary", lambda m, x, y: m.max(x, y), [Sample((2, 3), (3,))]),
    OpInfo("min", lambda m, x: m.min(x), [Sample((2, 3)), Sample(())], method=True),
    OpInfo("min_dim", lambda m, x, **kw: m.min(x, **kw),
           [Sample((2, 3), dim=1), Sample((2, 3), dim=-2, keepdim=True), Sample((2, 3, 4), dim=1)],
           method=lambda m, x, **kw: x.min(**kw)),
    OpInfo("max_ties", lambda m, x: (m.max(x * 0), m.amax(x * 0, 1)), [Sample((2, 3))], dtypes=FLOAT, fd=False),
    OpInfo("amax", samples=[Sample((2, 3)), Sample((2, 3), dim=1), Sample((2, 3, 4), dim=(0, 2), keepdim=True),
                            Sample((), dim=0), Sample((2, 0), dim=0)], method=True),
    OpInfo("amin", samples=[Sample((2, 3)), Sample((2, 3), dim=-1, keepdim=True), Sample((2, 3, 4), dim=(1, 2))],
           method=True),
    OpInfo("argmax", samples=[Sample((2, 3)), Sample((2, 3), dim=1), Sample((2, 3), dim=0, keepdim=True),
                              Sample(()), Sample((2, 3), keepdim=True), Sample((2, 3, 4), dim=-1)], method=True),
    OpInfo("argmin", samples=[Sample((2, 3)), Sample((2, 3), dim=1, keepdim=True), Sample((), dim=0)], method=True),
    OpInfo("var", samples=[Sample((2, 3)), Sample((2, 3), dim=1), Sample((2, 3), dim=0, keepdim=True),
                           Sample((3, 4), dim=1, unbiased=False), Sample((2, 3, 4), dim=(0, 2), correction=0),
                           Sample((2, 3), correction=2)], method=True),
    OpInfo("std", samples=[Sample((2, 3)), Sample((2, 3), dim=1), Sample((2, 3), dim=-1, keepdim=True),
                           Sample((3, 4), dim=0, unbiased=False), Sample((2, 3, 4), dim=(1, 2), correction=0)],
           method=True),
    OpInfo("var_one", lambda m, x: (m.var(x, 0), m.var(x, 0, correction=0)), [Sample((1, 3))], grad=False),  # nan
    OpInfo("logsumexp", samples=[Sample((2, 3), dim=1), Sample((2, 3), dim=0, keepdim=True),
                                 Sample((2, 3, 4), dim=(0, 2)), Sample((), dim=0), Sample((2, 3), dim=-1)],
           method=True),
    OpInfo("norm", samples=[Sample((2, 3)), Sample((2, 3), p=1), Sample((2, 3), p=3, dim=1),
                            Sample((2, 3), dim=1, keepdim=True), Sample((2, 3), p=float("inf")),
                            Sample((2, 3), p=float("inf"), dim=0), Sample((2, 3, 2), dim=(0, 2)), Sample(())],
           method=True),
    OpInfo("softmax", samples=[Sample((2, 3), dim=1), Sample((2, 3), dim=0), Sample((2, 3, 4), dim=-1),
                               Sample((), dim=0), Sample((2, 1, 3, 2), dim=2), Sample((0, 3), dim=1)], method=True),
    OpInfo("log_softmax", samples=[Sample((2, 3), dim=1), Sample((2, 3), dim=0), Sample((2, 3, 4), dim=-1),
                                   Sample((), dim=0), Sample((2, 1, 3, 2), dim=2)], method=True),
    OpInfo("softmax_dtype", lambda m, x: m.softmax(x, 1, dtype=m.float64), [Sample((2, 3))], dtypes=FLOAT),

    # == shape ops ==
    OpInfo("view", lambda m, x, shape: x.view(shape),
           [Sample((2, 3), shape=(3, 2)), Sample((2, 3), shape=(-1,)), Sample((2, 3, 2), shape=(2, -1, 3)),
            Sample((), shape=(1,)), Sample((1,), shape=()), Sample((0, 3), shape=(3, 0, 1))]),
    OpInfo("view_as", lambda m, x, y: x.view_as(y), [Sample((2, 3), (3, 2))]),
    OpInfo("reshape", lambda m, x, shape: m.reshape(x, shape),
           [Sample((2, 3), shape=(3, 2)), Sample((2, 3, 4), shape=(-1, 4)), Sample((), shape=(1, 1)),
            Sample((2, 0), shape=(0, 5))], method=lambda m, x, shape: x.reshape(*shape)),
    OpInfo("reshape_noncontiguous", lambda m, x: x.t().reshape(-1), [Sample((2, 3))]),
    OpInfo("reshape_as", lambda m, x, y: x.reshape_as(y), [Sample((2, 3), (6,))]),
    OpInfo("flatten", samples=[Sample((2, 3, 4)), Sample((2, 3, 4), start_dim=1), Sample((2, 3, 4, 2), start_dim=1,
                                                                                       end_dim=2),
                               Sample(()), Sample((3,)), Sample((2, 3), start_dim=-1)], method=True),
    OpInfo("unflatten", samples=[Sample((2, 6), dim=1, sizes=(2, 3)), Sample((6,), dim=0, sizes=(3, -1)),
                                 Sample((4, 2), dim=-2, sizes=(2, 2))], method=True),
    OpInfo("squeeze", samples=[Sample((2, 1, 3, 1)), Sample((2, 1, 3), dim=1), Sample((2, 3), dim=0),
                               Sample((1, 2, 1), dim=(0, 2)), Sample(()), Sample((), dim=0), Sample((1, 1))],
           method=True),
    OpInfo("unsqueeze", samples=[Sample((2, 3), dim=0), Sample((2, 3), dim=-1), Sample((2, 3), dim=1),
                                 Sample((), dim=0), Sample((0,), dim=1)], method=True),
    OpInfo("transpose", samples=[Sample((2, 3), dim0=0, dim1=1), Sample((2, 3, 4, 2), dim0=-1, dim1=1),
                                 Sample((3,), dim0=0, dim1=0), Sample((), dim0=0, dim1=-1)], method=True),
    OpInfo("swapaxes", lambda m, x: m.swapaxes(x, 0, 2), [Sample((2, 3, 4))]),
    OpInfo("permute", lambda m, x, dims: m.permute(x, dims),
           [Sample((2, 3, 4), dims=(2, 0, 1)), Sample((2, 3), dims=(-1, 0)), Sample((), dims=()),
            Sample((2, 1, 3, 2), dims=(3, 1, 0, 2))], method=lambda m, x, dims: x.permute(dims)),
    OpInfo("t", samples=[Sample((2, 3)), Sample((3,)), Sample(())], method=True),
    OpInfo("T", lambda m, x: x.T, [Sample((2, 3)), Sample((2, 3, 4)), Sample((3,))]),
    OpInfo("mT", lambda m, x: x.mT, [Sample((2, 3)), Sample((2, 3, 4))]),
    OpInfo("expand", lambda m, x, size: x.expand(*size),
           [Sample((3, 1), size=(2, 3, 4)), Sample((3, 1), size=(-1, 4)), Sample((), size=(2, 3)),
            Sample((1,), size=(0,)), Sample((2, 3), size=(2, 3))]),
    OpInfo("expand_as", lambda m, x, y: x.expand_as(y), [Sample((3, 1), (2, 3, 4))]),
    OpInfo("broadcast_to", lambda m, x, size: m.broadcast_to(x, size),
           [Sample((3, 1), size=(2, 3, 4)), Sample((), size=(2,))], method=lambda m, x, size: x.broadcast_to(size)),
    OpInfo("cat", lambda m, *xs, **kw: m.cat(xs, **kw),
           [Sample((2, 3), (2, 3)), Sample((2, 3), (2, 1), dim=1), Sample((2, 3), (1, 3), (4, 3), dim=0),
            Sample((2, 3, 4), (2, 3, 1), dim=-1), Sample((0, 3), (2, 3)), Sample((2, 3), (0,)), Sample((3,),)]),
    OpInfo("stack", lambda m, *xs, **kw: m.stack(xs, **kw),
           [Sample((2, 3), (2, 3)), Sample((2, 3), (2, 3), dim=1), Sample((2, 3), (2, 3), (2, 3), dim=-1),
            Sample((), ()), Sample((0, 2), (0, 2), dim=1)]),
    OpInfo("split", lambda m, x, size, **kw: m.split(x, size, **kw),
           [Sample((5, 2), size=2), Sample((2, 4), size=2, dim=1), Sample((5, 2), size=[1, 4]),
            Sample((2, 6, 1), size=[2, 0, 4], dim=-2)], method=lambda m, x, size, **kw: x.split(size, **kw)),
    OpInfo("split_one", lambda m, x: m.split(x, 2, 1)[1], [Sample((3, 4))]),
    OpInfo("chunk", samples=[Sample((5, 2), chunks=2), Sample((2, 6), chunks=3, dim=1), Sample((3,), chunks=5)],
           method=True),
    OpInfo("unbind", samples=[Sample((3, 2)), Sample((2, 3), dim=1)], method=True),
    OpInfo("select", lambda m, x: x.select(1, -1), [Sample((2, 3))]),
    OpInfo("narrow", lambda m, x, dim=1, start=1, length=2: x.narrow(dim, start, length),
           [Sample((2, 3)), Sample((2, 3), start=-2), Sample((2, 3), start=-3, length=3), Sample((2, 3), start=3, length=0),
            Sample((4, 3), dim=0, start=-1, length=1), Sample((4, 3), dim=-2, start=1, length=0)]),
    OpInfo("narrow_tensor_start", lambda m, x: x.narrow(0, m.tensor(-2), 2), [Sample((3, 2))]),
    OpInfo("flip", lambda m, x, dims: m.flip(x, dims),
           [Sample((2, 3), dims=(0,)), Sample((2, 3, 4), dims=(0, -1)), Sample((), dims=(0,))],
           method=lambda m, x, dims: x.flip(dims)),
    OpInfo("roll", samples=[Sample((2, 3), shifts=1, dims=1), Sample((2, 3), shifts=2), Sample((2, 3, 2),
                                                                                      shifts=(1, -1), dims=(0, 2)),
                            Sample((4,), shifts=-5, dims=0)], method=True),
    OpInfo("repeat", lambda m, x, sizes: x.repeat(*sizes),
           [Sample((2, 3), sizes=(2, 3)), Sample((3,), sizes=(2, 1, 2)), Sample((), sizes=(3,)),
            Sample((2, 1), sizes=(1, 0))]),
    OpInfo("tile", lambda m, x, dims: m.tile(x, dims),
           [Sample((2, 3), dims=(2,)), Sample((3,), dims=(2, 2)), Sample((2, 2), dims=(1, 2, 1))],
           method=lambda m, x, dims: x.tile(dims)),
    OpInfo("diagonal", samples=[Sample((3, 4)), Sample((3, 4), offset=1), Sample((4, 3), offset=-2),
                                Sample((2, 3, 4), dim1=-1, dim2=0), Sample((2, 3), offset=5)], method=True),
    OpInfo("tril", samples=[Sample((3, 4)), Sample((3, 4), diagonal=1), Sample((2, 3, 3), diagonal=-1),
                            Sample((0, 2))], method=True),
    OpInfo("triu", samples=[Sample((3, 4)), Sample((4, 3), diagonal=1), Sample((2, 3, 3), diagonal=-2)], method=True),
    OpInfo("gather", lambda m, x, dim, index: m.gather(x, dim, _idx(m, index)),
           [Sample((3, 4), dim=0, index=[[0, 1, 2, 0], [2, 2, 1, 0]]), Sample((3, 4), dim=1, index=[[0, 3], [1, 1],
                                                                                                    [3, 2]]),
            Sample((2, 3, 2), dim=-1, index=[[[1], [0], [1]]]), Sample((4,), dim=0, index=[3, 0, 0])],
           method=lambda m, x, dim, index: x.gather(dim, _idx(m, index))),
    OpInfo("scatter", lambda m, x, src, dim, index: m.scatter(x, dim, _idx(m, index), src),
           [Sample((3, 4), (2, 4), dim=0, index=[[0, 1, 2, 0], [2, 0, 1, 1]]),
            Sample((3, 4), (3, 2), dim=1, index=[[0, 3], [1, 2], [3, 0]]),
            # src larger than index: torch's backward refuses the gradient shape, so forward only
            Sample((3, 4), (3, 3), dim=1, index=[[0, 3], [1, 2], [3, 0]], grad=False)],
           method=lambda m, x, src, dim, index: x.scatter(dim, _idx(m, index), src)),
    OpInfo("scatter_value", lambda m, x, dim, index: x.scatter(dim, _idx(m, index), 2.5),
           [Sample((3, 4), dim=0, index=[[0, 1, 2, 0]])]),
    OpInfo("scatter_add", lambda m, x, src, dim, index: m.scatter_add(x, dim, _idx(m, index), src),
           [Sample((3, 4), (2, 4), dim=0, index=[[0, 1, 2, 0], [0, 1, 1, 0]]),
            Sample((3, 4), (3, 2), dim=1, index=[[0, 0], [1, 1], [3, 0]])],
           method=lambda m, x, src, dim, index: x.scatter_add(dim, _idx(m, index), src)),
    OpInfo("index_select", lambda m, x, dim, index: m.index_select(x, dim, _idx(m, index)),
           [Sample((3, 4), dim=0, index=[0, 2, 2]), Sample((3, 4), dim=1, index=[3, 0]),
            Sample((2, 3, 2), dim=-1, index=[1]), Sample((3, 4), dim=0, index=[]), Sample((3,), dim=0, index=1)],
           method=lambda m, x, dim, index: x.index_select(dim, _idx(m, index))),

    # == indexing ==
    OpInfo("getitem_int", lambda m, x: (x[1], x[-1], x[0, 1]), [Sample((2, 3))]),
    OpInfo("getitem_slice", lambda m, x: (x[1:3], x[::2], x[:, 1:], x[1:1], x[-2:, ::2]), [Sample((3, 4))]),
    OpInfo("getitem_none_ellipsis", lambda m, x: (x[None], x[..., 1], x[:, None, 1:], x[..., None], x[...]),
           [Sample((2, 3)), Sample((2, 3, 4))]),
    OpInfo("getitem_0d", lambda m, x: (x[()], x[None], x[...], x[None, ..., None]), [Sample(())]),
    OpInfo("getitem_rank4", lambda m, x: x[1, ..., 0:1, None], [Sample((2, 1, 3, 2))]),
    OpInfo("getitem_tensor", lambda m, x: x[_idx(m, [0, 2, 2])], [Sample((3, 4)), Sample((3,))]),
    OpInfo("getitem_tensor_2d", lambda m, x: x[_idx(m, [[0, 1], [2, 0]])], [Sample((3, 4))]),
    OpInfo("getitem_tensor_pair", lambda m, x: x[_idx(m, [0, 2, 1]), _idx(m, [1, 1, 3])], [Sample((3, 4))]),
    OpInfo("getitem_tensor_bcast", lambda m, x: x[_idx(m, [[0], [2]]), _idx(m, [1, 3])], [Sample((3, 4))]),
    OpInfo("getitem_tensor_after_slice", lambda m, x: x[:, _idx(m, [3, 0])], [Sample((3, 4)), Sample((2, 4, 2))]),
    OpInfo("getitem_tensor_negative", lambda m, x: x[_idx(m, [-1, 0])], [Sample((3, 4))]),
    OpInfo("getitem_list", lambda m, x: x[[0, 2]], [Sample((3, 4))]),
    OpInfo("getitem_int_tensor_0d", lambda m, x: (x[_idx(m, 1)], x[:, _idx(m, -1)], x[_idx(m, 0), _idx(m, 2)]),
           [Sample((3, 4))]),
    OpInfo("getitem_mask", lambda m, x: x[x > 0], [Sample((3, 4)), Sample((0, 2))]),
    OpInfo("getitem_mask_row", lambda m, x: x[_mask(m, [True, False, True])], [Sample((3, 4))]),
    OpInfo("getitem_mask_inner", lambda m, x: x[:, _mask(m, [True, False, True, True])], [Sample((3, 4))]),
    # torch applies ints first (selects), then index tensors: an int and an index tensor separated by a
    # slice keep the slice's dim first (numpy would put the advanced dims first)
    OpInfo("getitem_int_then_tensor", lambda m, x: (x[-1, 2, 1::2, _idx(m, [0, 2])], x[1, :, _idx(m, [2, 0, 2])],
                                                    x[:, 1, None, _idx(m, [1])], x[1, ..., _idx(m, [0, 1])],
                                                    x[_idx(m, [1, 0]), 1, _idx(m, [0, 2])], x[0, True, :, _idx(m, [1])]),
           [Sample((2, 3, 4, 3))]),
    OpInfo("getitem_full_slices", lambda m, x: (x[:], x[:, :], x[0:5, :], x[-3:, :], x[::1, None], x[0:]),
           [Sample((3, 4))]),
    OpInfo("getitem_order", lambda m, x: (x[None, 1], x[1, None], x[:, None, 1:], x[None, :, 1]), [Sample((3, 4))]),
    OpInfo("setitem_int", _setitem(lambda m, x: 1), [Sample((3, 4), (4,)), Sample((3, 4), ())]),
    OpInfo("setitem_slice_scalar", _setitem(lambda m, x: (slice(None), slice(1, 3)), 0.5), [Sample((3, 4))]),
    OpInfo("setitem_slice", _setitem(lambda m, x: (slice(None), slice(1, 3))), [Sample((3, 4), (3, 2)),
                                                                                 Sample((3, 4), (2,))]),
    OpInfo("setitem_mask", _setitem(lambda m, x: x > 0, 2.0), [Sample((3, 4))]),
    OpInfo("setitem_mask_tensor", _setitem(lambda m, x: x > 0), [Sample((3, 4), ())]),
    OpInfo("setitem_ellipsis", _setitem(lambda m, x: (Ellipsis, 0)), [Sample((2, 3, 4), (3,)), Sample((2, 3), ())]),
    OpInfo("setitem_tensor", _setitem(lambda m, x: _idx(m, [0, 2])), [Sample((3, 4), (2, 4)), Sample((3, 4), (4,))]),
    OpInfo("setitem_int_then_tensor", _setitem(lambda m, x: (1, slice(None), _idx(m, [0, 2]))),
           [Sample((2, 3, 4), (3, 2)), Sample((2, 3, 4), (2,))]),
    # repeated indices only with accumulate=True: otherwise which write lands is unspecified in torch
    OpInfo("index_put", lambda m, x, v, index=(2, 0), **kw: x.index_put((_idx(m, list(index)),), v, **kw),
           [Sample((3, 4), (2, 4)), Sample((3, 4), (4,), accumulate=True, index=(0, 2, 0)),
            Sample((3, 4), (), accumulate=False), Sample((3, 4), (3, 1), accumulate=True, index=(0, 2, 0))],
           dtypes=FLOAT),
    OpInfo("index_put_pair", lambda m, x, v, **kw: m.index_put(x, (_idx(m, [[1], [0]]), _idx(m, [2, 1])), v, **kw),
           [Sample((2, 3, 4), (2, 2, 4), accumulate=True), Sample((2, 3, 4), (4,))], dtypes=FLOAT),
    OpInfo("index_put_mask", lambda m, x, v: x.index_put((_mask(m, [True, False, True]),), v),
           [Sample((3, 2), (2,))], dtypes=FLOAT),
    OpInfo("index_put_", lambda m, x, v, **kw: (x * 1).index_put_((_idx(m, [1, 2]), _idx(m, [0, 0])), v, **kw),
           [Sample((3, 4), (2,), accumulate=True), Sample((3, 4), ())], dtypes=FLOAT),

    # == matmul ==
    OpInfo("matmul", samples=[Sample((3, 4), (4, 2)), Sample((4,), (4,)), Sample((4,), (4, 2)), Sample((3, 4), (4,)),
                              Sample((2, 3, 4), (4, 2)), Sample((2, 3, 4), (2, 4, 2)), Sample((4,), (2, 4, 3)),
                              Sample((2, 3, 4), (4,)), Sample((2, 1, 3, 4), (3, 4, 2)), Sample((0, 4), (4, 2)),
                              Sample((3, 0), (0, 2))], method=True),
    OpInfo("mm", samples=[Sample((3, 4), (4, 2)), Sample((1, 4), (4, 1))], method=True),
    OpInfo("bmm", samples=[Sample((2, 3, 4), (2, 4, 2)), Sample((1, 1, 3), (1, 3, 2))], method=True),
    OpInfo("mv", samples=[Sample((3, 4), (4,))], method=True),
    OpInfo("dot", samples=[Sample((4,), (4,))], method=True),
    OpInfo("outer", samples=[Sample((4,), (3,)), Sample((1,), (0,))], method=True),
    OpInfo("einsum", lambda m, *xs, eq: m.einsum(eq, *xs),
           [Sample((3, 4), (4, 2), eq="ij,jk->ik"), Sample((2, 3), eq="ij->ji"), Sample((2, 3), eq="ij->"),
            Sample((2, 3, 4), (2, 4, 2), eq="bij,bjk->bik"), Sample((3,), (2,), eq="i,j->ij"),
            Sample((2, 3), (2, 3), eq="ij,ij->i"), Sample((3, 4), (4, 2), eq="ij,jk"),
            Sample((2, 3), (3, 4), (4,), eq="ij,jk,k->i"),
            # size-1 axes broadcast against the other operand, on either side of a contraction
            Sample((3, 1), (4, 2), eq="ij,jk->ik"), Sample((3, 4), (1, 2), eq="ij,jk->ik"),
            Sample((1, 3, 4), (2, 4, 2), eq="bij,bjk->bik"), Sample((3, 1), (3, 4), eq="ij,ij->i"),
            # "..." covers broadcast batch dims: right-aligned, size 1 or missing in one operand
            Sample((2, 3, 4), (2, 4, 5), eq="...ij,...jk->...ik"), Sample((2, 1, 3, 4), (5, 4, 2), eq="...ij,...jk"),
            Sample((2, 3), (3,), eq="...i,...i"), Sample((2, 3, 4), eq="...ij->ij"), Sample((2, 3, 4), eq="i...->..."),
            Sample((2, 3, 4), eq="...ij->j..."), Sample((3, 4), (4, 2), eq="ij,jk->ik..."), Sample((), eq="..."),
            Sample((2, 3, 4), (4,), eq="b...k,k->...b"), Sample((2, 1, 3), (1, 4, 3), eq="...i,...i->..."),
            # a repeated index reads a diagonal
            Sample((3, 3), eq="ii->i"), Sample((3, 3), eq="ii"), Sample((2, 3, 3), eq="...ii->...i"),
            Sample((3, 2, 3), (2,), eq="iji,j->i")]),
]

OPS += [
    # == nn.functional ops that are primitives ==
    OpInfo("conv2d", lambda m, x, w, b=None, **kw: _nnf(m).conv2d(x, w, b, **kw),
           [Sample((1, 2, 5, 5), (3, 2, 3, 3), (3,)), Sample((2, 2, 5, 4), (3, 2, 2, 3), padding=1, stride=2),
            # torch has no int32 kernel for dilated convolutions only
            Sample((1, 4, 5, 5), (4, 2, 3, 3), (4,), dilation=2, groups=2, padding=(1, 0),
                   dtypes=FLOAT + ("int64", "bool"))], dtypes=FLOAT),
    OpInfo("conv_transpose2d", lambda m, x, w, b=None, **kw: _nnf(m).conv_transpose2d(x, w, b, **kw),
           [Sample((1, 2, 3, 3), (2, 3, 3, 3), (3,)),
            Sample((1, 2, 3, 4), (2, 1, 3, 2), stride=2, padding=1, output_padding=1),
            Sample((1, 4, 3, 3), (4, 1, 2, 2), (2,), groups=2, dilation=2)], dtypes=FLOAT),
    OpInfo("max_pool2d", lambda m, x, **kw: _nnf(m).max_pool2d(x, **kw),
           [Sample((1, 2, 4, 4), kernel_size=2), Sample((2, 1, 5, 5), kernel_size=3, stride=1, padding=1),
            Sample((1, 1, 5, 4), kernel_size=(2, 3), stride=(2, 1))], dtypes=FLOAT),
    OpInfo("avg_pool2d", lambda m, x, **kw: _nnf(m).avg_pool2d(x, **kw),
           [Sample((1, 2, 4, 4), kernel_size=2), Sample((2, 1, 5, 5), kernel_size=3, stride=2, padding=1),
            Sample((1, 1, 5, 4), kernel_size=(2, 3), stride=(2, 1))], dtypes=FLOAT),
    OpInfo("binary_cross_entropy", lambda m, x, t: _nnf(m).binary_cross_entropy(m.sigmoid(x), m.sigmoid(t),
                                                                                 reduction="none"),
           [Sample((2, 3), (2, 3)), Sample((), ())], dtypes=FLOAT),
    # relu's family: each value with piecewise_backward for its derivative (its own derivative
    # connects the input with zeros, as torch's *BackwardBackward0). Floating inputs only: on
    # integer and bool ones torch keeps the dtype or refuses, tracegrad's composites give float32
    OpInfo("hardtanh", lambda m, x, **kw: _nnf(m).hardtanh(x, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3, 4), min_val=-0.3, max_val=0.6, dtypes=FLOAT),
            Sample((), dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("relu6", lambda m, x: _nnf(m).relu6(x * 4), [Sample((2, 3), dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("leaky_relu", lambda m, x, **kw: _nnf(m).leaky_relu(x, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3, 4), negative_slope=-0.5, dtypes=FLOAT),
            Sample((), negative_slope=0.2, dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("threshold", lambda m, x, **kw: _nnf(m).threshold(x, **kw),
           [Sample((2, 3), threshold=0.1, value=2.0, dtypes=FLOAT),
            Sample((3,), threshold=-0.2, value=-1.0, dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("softshrink", lambda m, x, **kw: _nnf(m).softshrink(x, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3, 4), lambd=0.2, dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("hardshrink", lambda m, x, **kw: _nnf(m).hardshrink(x, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3, 4), lambd=0.2, dtypes=FLOAT)], dtypes=FLOAT),
    # elu's family: each value with elu_backward for its derivative (torch's elu_double_backward
    # for its own); the in-place forms' derivative reads the result (EluBackward1, CeluBackward1)
    OpInfo("elu", lambda m, x, **kw: _nnf(m).elu(x, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3, 4), alpha=0.4, dtypes=FLOAT), Sample((), dtypes=FLOAT)],
           dtypes=FLOAT),
    OpInfo("selu", lambda m, x: _nnf(m).selu(x), [Sample((2, 3), dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("celu", lambda m, x, **kw: _nnf(m).celu(x, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3,), alpha=0.3, dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("elu_inplace", lambda m, x, **kw: _nnf(m).elu(x * 1, inplace=True, **kw),
           [Sample((2, 3), dtypes=FLOAT), Sample((3,), alpha=0.3, dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("celu_inplace", lambda m, x: _nnf(m).celu(x * 1, 0.6, inplace=True), [Sample((2, 3), dtypes=FLOAT)],
           dtypes=FLOAT),
    # hardswish: its value with hardswish_backward for its derivative (zero second derivative at the
    # kinks); hardsigmoid: piecewise_backward, whose derivative torch has not
    OpInfo("hardswish", lambda m, x: _nnf(m).hardswish(x * 4), [Sample((2, 3), dtypes=FLOAT), Sample((), dtypes=FLOAT)],
           dtypes=FLOAT),
    OpInfo("hardsigmoid", lambda m, x: _nnf(m).hardsigmoid(x * 4), [Sample((2, 3), gradgrad=False, dtypes=FLOAT)],
           dtypes=FLOAT, gradgrad=False),
    # prelu: torch's _prelu_kernel, whose gradients are ops of their own (prelu_grad_input,
    # prelu_grad_weight) with torch's double backward
    OpInfo("prelu", lambda m, x, w: _nnf(m).prelu(x, w),
           [Sample((2, 3, 2), (3,), dtypes=FLOAT), Sample((2, 3), (1,), dtypes=FLOAT), Sample((4,), (1,), dtypes=FLOAT)],
           dtypes=FLOAT),
    # logaddexp, logaddexp2: one primitive, torch's kernel and derivative (1 at an infinite operand)
    OpInfo("logaddexp", lambda m, x, y: m.logaddexp(x, y), [Sample((2, 3), (3,), dtypes=FLOAT),
                                                            Sample((), (), dtypes=FLOAT)], dtypes=FLOAT),
    OpInfo("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), [Sample((2, 3), (2, 3), dtypes=FLOAT)], dtypes=FLOAT),
    # an in-place op on a view rewrites its base (CopySlices) and the view (AsStridedBackward0)
    OpInfo("inplace_on_view", _inplace_on_view, [Sample((3, 4), (3,)), Sample((2, 3), ())], dtypes=FLOAT),
]

# Primitives no public op exercises: autograd and compile machinery, tested by their suites.
NOT_OPS = {
    "call_hooks": "tensor hooks (Tensor.register_hook), run by the engine",
    "function": "autograd.Function forward node",
    "function_backward": "autograd.Function backward node",
    "node_prehooks": "grad_fn.register_prehook",
    "node_hooks": "grad_fn.register_hook",
    "delayed_error": "errors raised at backward time",
    "compiled_call": "a compiled callable's forward (tracegrad.compile)",
    "compiled_backward": "a compiled callable's backward (tracegrad.compile)",
    "derivative_error": "an op without a derivative in a compiled backward (tracegrad.compile)",
    "saved_value_written": "a value saved for backward and written in place inside a compiled function (its error)",
    "traced_function": "a custom autograd.Function traced inside a compiled function",
    "once_differentiable": "a @once_differentiable backward's results traced inside a compiled function",
    "once_differentiable_error": "differentiating a @once_differentiable backward again (its error)",
    "detach": "detach inside a traced graph (tracegrad.compile)",
    "class_target": "nll_loss's check of a traced target inside a compiled function (tracegrad.compile)",
}

# grad_fn names where tracegrad's decomposition differs from torch's kernel.
GRAD_FN_EXCEPTIONS = {
    # torch lowers einsum to permute/reshape/bmm; tracegrad keeps one einsum primitive, but for an
    # equation that sums no index, which torch's and tracegrad's compute alike (a permute, or a
    # product of two permuted operands): torch's grad_fn name -> tracegrad's
    "einsum": lambda name: name if name in ("PermuteBackward0", "MulBackward0") else "EinsumBackward0",
}


def samples():
    """(op, index, sample) for every sample of every op."""
    for op in OPS:
        for i, s in enumerate(op.samples):
            yield op, i, s


def sample_id(op, i, s):
    return f"{op.name}-{i}-{s.describe()}"


OPS += [
    # == inverse and hyperbolic functions, scans, sorting, linear algebra (ops/math_primitives.py) ==
    OpInfo("asin_acos_atanh", lambda m, x: (m.asin(m.tanh(x) * 0.9), m.acos(m.tanh(x) * 0.9),
                                           m.atanh(m.tanh(x) * 0.9)), [Sample(s) for s in U_SHAPES], dtypes=FLOAT),
    _unary("atan", dtypes=FLOAT), _unary("sinh", dtypes=FLOAT), _unary("cosh", dtypes=FLOAT),
    _unary("asinh", dtypes=FLOAT),
    OpInfo("acosh", lambda m, x: m.acosh(x * x + 1.5), [Sample(s) for s in U_SHAPES], dtypes=FLOAT),
    # (in place: no derivative, as torch's)
    OpInfo("asinh_", lambda m, x: x.clone().asinh_(), [Sample(s) for s in U_SHAPES], dtypes=FLOAT, grad=False),
    OpInfo("acosh_", lambda m, x: (x * x + 1.5).acosh_(), [Sample(s) for s in U_SHAPES], dtypes=FLOAT, grad=False),
    OpInfo("atanh_", lambda m, x: (m.tanh(x) * 0.9).atanh_(), [Sample(s) for s in U_SHAPES], dtypes=FLOAT, grad=False),
    _binary("atan2", dtypes=FLOAT),
    _binary("copysign"), _binary("hypot", dtypes=FLOAT), _binary("heaviside", grad=False),
    _binary("ldexp", dtypes=ALL),
    _binary("xlogy", (None, "pos"), dtypes=FLOAT),
    OpInfo("xlog1py", lambda m, x, y: m.special.xlog1py(x, y), [Sample(a, b) for a, b in B_SHAPES], dtypes=FLOAT,
           domain=(None, "pos")),
    OpInfo("logit", lambda m, x, **kw: m.logit(m.sigmoid(x), **kw),
           [Sample((2, 3)), Sample(()), Sample((0,)), Sample((5,), eps=0.3)], dtypes=FLOAT),
    OpInfo("erfc", samples=[Sample((2, 3)), Sample(()), Sample((0,)), Sample((4,), domain="special", grad=False)],
           method=True),
    # the gamma family and erfinv (ops/gamma_primitives.py); "pos" keeps clear of the poles, "special"
    # checks nan, +-inf, 0 and a negative integer (values only)
    OpInfo("lgamma", samples=[Sample((2, 3)), Sample(()), Sample((0,)), Sample((6,), domain="special", grad=False)],
           method=True),
    OpInfo("digamma", samples=[Sample((2, 3), domain="pos"), Sample((), domain="pos"), Sample((0,)),
                               Sample((6,), domain="special", grad=False)], method=True),
    OpInfo("polygamma", lambda m, x, n: m.polygamma(n, x),
           [Sample((2, 3), domain="pos", n=1), Sample((), domain="pos", n=2), Sample((4,), domain="pos", n=3),
            Sample((6,), domain="special", grad=False, n=2)], method=lambda m, x, n: x.polygamma(n)),
    OpInfo("erfinv", lambda m, x: m.erfinv(m.tanh(x) * 0.9) if x.dtype.is_floating_point else m.erfinv(x),
           [Sample((2, 3)), Sample(()), Sample((0,)), Sample((6,), domain="special", grad=False)]),
    OpInfo("mvlgamma", lambda m, x, p: m.mvlgamma(x * x + p, p) if x.dtype.is_floating_point else m.mvlgamma(x, p),
           [Sample((2, 3), p=1), Sample((), p=3), Sample((4,), p=2)], method=lambda m, x, p: (x * x + p).mvlgamma(p)
           if x.dtype.is_floating_point else x.mvlgamma(p)),
    # the modified Bessel functions, angle, gcd/lcm/nextafter (ops/bessel_primitives.py, number_primitives.py)
    OpInfo("i0", samples=[Sample((2, 3)), Sample(()), Sample((0,)), Sample((6,), domain="special", grad=False)],
           method=True),
    OpInfo("special_i0e", lambda m, x: m.special.i0e(x),
           [Sample((2, 3), domain="nonzero"), Sample(()), Sample((6,), domain="special", grad=False)]),
    OpInfo("special_i1", lambda m, x: m.special.i1(x),
           [Sample((2, 3), domain="nonzero"), Sample(()), Sample((6,), domain="special", grad=False)]),
    OpInfo("special_i1e", lambda m, x: m.special.i1e(x),
           [Sample((2, 3), domain="nonzero"), Sample(()), Sample((6,), domain="special", grad=False)]),
    OpInfo("special_erfcx", lambda m, x: m.special.erfcx(x),
           [Sample((2, 3)), Sample(()), Sample((6,), domain="special", grad=False)]),
    OpInfo("special_ndtri", lambda m, x: m.special.ndtri(m.special.expit(x)),
           [Sample((2, 3)), Sample(()), Sample((6,), domain="special", grad=False)], dtypes=FLOAT),
    OpInfo("special_log_ndtr", lambda m, x: m.special.log_ndtr(x),
           [Sample((2, 3)), Sample(()), Sample((6,), domain="special", grad=False)]),
    OpInfo("special_zeta", lambda m, q: m.special.zeta(m.full_like(q, 3.5), q) + m.special.zeta(2.5, q),
           [Sample((2, 3), domain="pos"), Sample((), domain="pos")]),
    OpInfo("special_bessel",
           lambda m, x: m.special.bessel_y1(x) + m.special.airy_ai(x) * m.special.modified_bessel_k0(x),
           [Sample((2, 3), domain="pos"), Sample(()), Sample((6,), domain="special")], grad=False),
    OpInfo("igamma", lambda m, x: m.igamma(m.full_like(x, 2.5), x) + m.special.gammainc(m.full_like(x, 0.5), x),
           [Sample((2, 3), domain="pos"), Sample((), domain="pos")], dtypes=FLOAT),
    OpInfo("igammac", lambda m, x: m.igammac(m.full_like(x, 2.5), x) + m.full_like(x, 3.0).igammac(x),
           [Sample((2, 3), domain="pos"), Sample((), domain="pos")], dtypes=FLOAT),
    # the reparameterized gamma draw (ops/igamma_primitives.py): x = 0.05 is in torch's Taylor series, which
    # is exact there; a concentration of 1e24 draws within 1e-11 of itself (d draw / d alpha = 1 to as much),
    # so both libraries' draws agree; no second derivative (torch's NotImplementedError)
    OpInfo("_standard_gamma_grad", lambda m, a: m._standard_gamma_grad(a * a + 0.5, m.zeros_like(a) + 0.05),
           [Sample((2, 3)), Sample(())], dtypes=("float32", "float64"), grad=False),
    OpInfo("_standard_gamma", lambda m, a: m._standard_gamma(a * a * 1e24 + 1e24) / 1e24,
           [Sample((2, 3)), Sample(())], dtypes=("float32", "float64"), gradgrad=False, fd=False),
    # the Dirichlet draw (ops/dirichlet_primitives.py): torch's _dirichlet_grad approximates, but its series
    # below x = 0.5 is within 1e-11 of the derivative; concentrations of 1e24 draw within 1e-11 of their
    # proportions
    OpInfo("_dirichlet_grad", lambda m, u: m._dirichlet_grad(m.sigmoid(u) / 2, m.ones_like(u), m.ones_like(u) * 2),
           [Sample((2, 3)), Sample(())], dtypes=("float32", "float64"), grad=False),
    OpInfo("dirichlet_rsample", lambda m, a: m.distributions.Dirichlet(a * a * 1e24 + 1e24).rsample(),
           [Sample((2, 3)), Sample((4,))], dtypes=("float32", "float64"), grad=False),
    OpInfo("special_polynomial", lambda m, x, n: m.special.chebyshev_polynomial_t(x, m.floor(n * 3)),
           [Sample((2, 3), (3,), domain=("small", "exp")), Sample((), (2,), domain=("small", "exp"))], grad=False),
    OpInfo("special_polynomial_legendre", lambda m, x, n: m.special.legendre_polynomial_p(x, n),
           [Sample((2, 3), (3,), domain=("small", "exp"))], grad=False),
    OpInfo("angle", samples=[Sample((2, 3)), Sample(()), Sample((0,)), Sample((6,), domain="special", grad=False)],
           method=True),
    _binary("gcd", dtypes=("int64", "int32")), _binary("lcm", dtypes=("int64", "int32")),
    _binary("nextafter", dtypes=FLOAT),
    OpInfo("mode", lambda m, x, **kw: tuple(m.mode(x, **kw)),
           [Sample((5,)), Sample((2, 3), dim=0), Sample((2, 3, 4), dim=1, keepdim=True), Sample(()),
            Sample((3, 9), domain="exp", grad=False), Sample((2, 20), domain="exp", grad=False),
            Sample((2, 7), domain="special", grad=False)], dtypes=FLOAT),
    OpInfo("signbit", samples=[Sample((2, 3), domain="special"), Sample((0,)), Sample(()), Sample((5,))], method=True),
    OpInfo("unfold", lambda m, x, **kw: x.unfold(**kw),
           [Sample((7,), dimension=0, size=3, step=1), Sample((3, 8), dimension=1, size=2, step=3),
            Sample((2, 5, 3), dimension=-2, size=5, step=1), Sample((4, 6), dimension=0, size=0, step=2),
            Sample((), dimension=0, size=1, step=1)]),
    OpInfo("cumsum", lambda m, x, **kw: m.cumsum(x, **kw),
           [Sample((5,), dim=0), Sample((2, 3), dim=1), Sample((2, 3, 4), dim=-2), Sample((), dim=0),
            Sample((0, 3), dim=0)], method=lambda m, x, **kw: x.cumsum(**kw)),
    OpInfo("cumprod", lambda m, x, **kw: m.cumprod(x, **kw),
           [Sample((5,), dim=0), Sample((2, 3), dim=1), Sample((2, 3, 4), dim=-2, domain="zeros"), Sample((), dim=0)],
           method=lambda m, x, **kw: x.cumprod(**kw)),
    OpInfo("sort", lambda m, x, **kw: tuple(m.sort(x, **kw)),
           [Sample((5,)), Sample((2, 3), dim=0), Sample((2, 3, 4), dim=1, descending=True), Sample(()),
            Sample((2, 6), domain="special", grad=False)], dtypes=FLOAT),
    # kthvalue_index: torch's quickselect's position where the k-th value is tied ("exp": 0..3)
    OpInfo("kthvalue", lambda m, x, k, **kw: tuple(m.kthvalue(x, k, **kw)),
           [Sample((5,), k=2), Sample((2, 3), k=3, dim=1), Sample((2, 3, 4), k=1, dim=0, keepdim=True),
            Sample((), k=1), Sample((3, 9), k=4, domain="exp", grad=False),
            Sample((2, 7), k=6, domain="special", grad=False)], dtypes=FLOAT),
    OpInfo("linalg_inv_det_slogdet", lambda m, x: (m.linalg.inv(x + 3 * m.eye(3, dtype=x.dtype)),
                                                  m.linalg.det(x), m.linalg.slogdet(x + 3 * m.eye(3, dtype=x.dtype))[1]),
           [Sample((3, 3)), Sample((2, 3, 3))], dtypes=FLOAT),
    OpInfo("linalg_solve", lambda m, a, b: m.linalg.solve(a + 3 * m.eye(3, dtype=a.dtype), b),
           [Sample((3, 3), (3, 2)), Sample((2, 3, 3), (2, 3)), Sample((3, 3), (3,))], dtypes=FLOAT),
    OpInfo("linalg_solve_triangular",
           lambda m, a, b, **kw: m.linalg.solve_triangular(a + 3 * m.eye(3, dtype=a.dtype), b, **kw),
           [Sample((3, 3), (3, 2), upper=True), Sample((2, 3, 3), (3, 2), upper=False, unitriangular=True),
            Sample((3, 3), (2, 3), upper=True, left=False)], dtypes=FLOAT),
    OpInfo("frexp", lambda m, x: tuple(m.frexp(x)), [Sample((5,)), Sample((2, 3)), Sample(())], dtypes=FLOAT),
    OpInfo("ctc_loss", lambda m, x: m.nn.functional.ctc_loss(x.log_softmax(2), m.tensor([[1, 2], [2, 2]]),
                                                              m.tensor([4, 3]), m.tensor([2, 2]), reduction="none"),
           [Sample((4, 2, 3), gradgrad=False)], dtypes=FLOAT),
    # LU: the pivots are an integer output; L and U differentiate (the permutation does not)
    OpInfo("linalg_lu", lambda m, x: tuple(m.linalg.lu(x))[1:] + (m.linalg.lu_factor(x).LU,),
           [Sample((3, 3)), Sample((2, 3, 4)), Sample((4, 3))], dtypes=FLOAT),
    OpInfo("linalg_lu_solve", lambda m, a, b, **kw: m.linalg.lu_solve(*m.linalg.lu_factor(a + 3 * m.eye(3, dtype=a.dtype)),
                                                                      b, **kw),
           [Sample((3, 3), (3, 2)), Sample((2, 3, 3), (3, 1), adjoint=True), Sample((3, 3), (2, 3), left=False)],
           dtypes=FLOAT),
    # decompositions read one triangle or fix signs freely: called on symmetric inputs and
    # through sign-free functions of their factors
    OpInfo("linalg_cholesky", lambda m, x: m.linalg.cholesky(x @ x.mT + 3 * m.eye(3, dtype=x.dtype)),
           [Sample((3, 3)), Sample((2, 3, 3))], dtypes=FLOAT),
    OpInfo("linalg_eigh", lambda m, x: (m.linalg.eigvalsh(x + x.mT), m.linalg.eigh(x + x.mT)[1] ** 2),
           [Sample((3, 3)), Sample((2, 4, 4))], dtypes=FLOAT),
    OpInfo("linalg_svd", lambda m, x: (m.linalg.svdvals(x), m.linalg.svd(x, full_matrices=False)[0]
                                       @ m.linalg.svd(x, full_matrices=False)[2]),
           [Sample((4, 3)), Sample((3, 4)), Sample((2, 3, 3))], dtypes=FLOAT),
    OpInfo("linalg_qr", lambda m, x: tuple(m.linalg.qr(x)), [Sample((4, 3)), Sample((3, 3))], dtypes=FLOAT),
    OpInfo("linalg_pinv", lambda m, x: m.linalg.pinv(x), [Sample((4, 3)), Sample((3, 4))], dtypes=FLOAT),
]

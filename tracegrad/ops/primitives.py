"""The op table: every primitive, defined once.

An entry says, in this order: the primitive's name and input names, its dtype rule,
its shape rule, its numpy kernel, its derivative rule (a vector-Jacobian product
written in tracegrad's own ops, so it runs eagerly, traces into IR and differentiates
again), which of its values the derivative needs saved, torch's grad_fn name, and its
Triton lowering (`triton=`: an expression template, a reduction/matmul/scatter marker,
launcher glue or a refusal; see lowering.py).

Derivative rules are called as `vjp(g, out, *inputs, **params)` with `g` the gradient
of the output (a tuple for multi-output ops) and return one gradient per input (or
None). The autodiff pass does the plumbing: summing fan-out, reducing broadcast
dimensions back to each input's shape, casting to each input's dtype. Only the values
named in `saves` carry data at backward time; the others give their shapes alone.

The table is data plus rules and imports nothing of the front end: grad_fn names are strings
the engine makes classes of (autograd.graph.node_class_of), and the public ops, `apply` and
`Tensor` that rules call are plugged in by the front end as it is imported (`FrontEnd`).
"""
import math
import struct
import sys
import threading
import warnings
import weakref

import numpy as np

from .. import _dtype as D
from ..ir.layout import iterator_order, dense_order, suggested_order, memory_format_order, dense_axes, \
    FORMAT_ORDERS
from . import lowering as T
from . import shapes as S

PRIMITIVES = {}

# torch makes inf and nan without a word; numpy's floating-point warnings from tracegrad's kernels
# (eager, and the generated programs) would be noise torch users never see
warnings.filterwarnings("ignore", message=r"(divide by zero|invalid value|overflow|underflow) encountered in",
                        category=RuntimeWarning, module=r"tracegrad\.")


class FrontEnd:
    """What the table's rules call of the front end, which imports this table: the public ops
    (`F.add`, ...), the tracer's `apply` and the `Tensor` class. Rules run long after import,
    so the front end plugs them in as it is imported (tracing.py sets `apply` and `Tensor`,
    ops/functional.py `ops`) and the table imports no tensor, tracer or public op."""
    ops = apply = Tensor = None


class _PublicOps:
    """The public ops (ops/functional.py), which derivative rules are written in."""

    def __getattr__(self, name):
        return getattr(FrontEnd.ops, name)


F = _PublicOps()


# torch's forward-mode AD's errors for an op without a forward formula, and for a custom Function's
FORWARD_AD_NOT_IMPLEMENTED = (
    "Trying to use forward AD with {} that does not support it because it has not been implemented yet.\nPlease "
    "file an issue to PyTorch at https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml so that "
    "we can prioritize its implementation or submit a PR adding the implementation to derivatives.yaml")
FORWARD_AD_CUSTOM_FUNCTION = ("You must implement the jvp function for custom autograd.Function to use it with forward "
                              "mode AD.")


class Primitive:
    __slots__ = ("name", "inputs", "variadic", "dtype_rule", "shape", "impl", "vjp", "saves", "grad_fn",
                 "view", "nondiff_outputs", "multi", "triton", "elementwise", "reduction", "cast", "_node_cls",
                 "_save_pos", "needs", "takes_ctx", "eager", "opmath", "checked", "chunk_impl", "pieces", "layout",
                 "torch_saved_outputs", "order", "edges", "saves_inner_view", "no_forward_ad")

    def __init__(self, name, inputs, impl, *, shape, dtype, vjp=None, saves=(), grad_fn=None, view=False,
                 multi=False, nondiff_outputs=(), elementwise=False, reduction=False, triton=None, cast=None,
                 needs=None, takes_ctx=False, eager=None, refuse=None, opmath=None, checked=((), False),
                 chunk_impl=None, pieces=None, layout=None, torch_saved_outputs=None, order=None, edges=None,
                 saves_inner_view=None, no_forward_ad=None):
        self.name = name
        # torch's error where its forward-mode AD has no formula for the op (FORWARD_AD_NOT_IMPLEMENTED,
        # ...); None: the tangent is the derivative rule transposed (autograd/forward_ad.py)
        self.no_forward_ad = no_forward_ad
        self.variadic = inputs.startswith("*")
        self.inputs = tuple(inputs.lstrip("*").split()) if inputs else ()
        self.impl = impl
        self.shape = shape
        self.dtype_rule = DTYPE_RULES[dtype] if isinstance(dtype, str) else dtype
        if refuse:
            # {dtype kind (0 bool, 1 integer, 2 float): (dtype, args) -> torch's error or None}: the
            # dtypes torch has no kernel for, refused before any kernel runs or any node is traced
            self.dtype_rule = _refusing(self.dtype_rule, refuse)
        self.vjp = vjp
        self.saves = tuple(saves.split()) if isinstance(saves, str) else tuple(saves)
        self.grad_fn = grad_fn
        self.view = view
        self.multi = multi
        self.nondiff_outputs = tuple(nondiff_outputs)
        self.elementwise = elementwise
        self.reduction = reduction
        self.triton = triton
        self.cast = cast                  # argument positions promoted to the compute dtype (None: all)
        self._node_cls = None     # the engine's grad_fn class for a fixed name (autograd.graph.node_class_of)
        # needs: {input name: names its gradient reads}; with it, a call saves only what the
        # gradients of its inputs that require grad read (as torch does)
        self.needs = {k: tuple(v.split()) for k, v in needs.items()} if needs else None
        self._save_pos = {}
        self.takes_ctx = takes_ctx      # the rule gets the run-time grad_fn node (custom Functions)
        self.eager = eager              # how create_graph runs it, where not through apply (opaque calls)
        # the argument position whose number (a Python number or a 0-dim tensor) torch's kernel reads in
        # float32 where the op computes in float16 or bfloat16 (see scalar_operands); None: every number
        # is first rounded to the compute dtype
        self.opmath = opmath
        # (argument positions, whether floats too): where a Python number there meets an integer (or, with
        # True, a floating; with "half", a float16 or bfloat16) compute dtype, torch converts it with its
        # checked conversion (RuntimeError "value cannot be converted ... without overflow"); other
        # integers wrap
        self.checked = checked
        # the kernel over a chunk of a larger array (generated code's fused groups), where a chunk
        # must not take a path impl takes for a whole tensor of its size
        self.chunk_impl = chunk_impl
        # a view with several outputs (split, unbind): (x, **params) -> each output's place in x as
        # a getitem key, through which a trace writes an in-place op on that output into x
        self.pieces = pieces
        # how eager lays the result out, which the trace knows too (tracing.eager_layout,
        # Proxy._eager_scratch, ir/layout.py): "operands" (by its operands' strides, torch's
        # TensorIterator order: elementwise ops), "c" (C-contiguous), "order" (by a rule of the
        # op's own, `order`: index, sort, roll, cat of channels-last tensors); a view's: "view" (its
        # base's strides through the view) or "view_c" (C-contiguous where its base is); or (params)
        # -> one of these
        self.layout = layout if layout is not None else "order" if order is not None else \
            "view" if view else "operands" if elementwise else "c"
        # of layout "order": (arrays, params) -> the order (ir/layout.py) torch gives the result, from
        # the operands as arrays (int8 stand-ins laid out as eager's, in a trace), or None for C's
        self.order = order
        # of an op of several outputs that saves "out": the slots torch's node saves (None: all). The
        # others are held for the derivative's shapes alone and not checked against writes (max(x, 1)'s
        # node saves its indices, not its values: written, they still differentiate in torch)
        self.torch_saved_outputs = torch_saved_outputs
        # the arguments torch's node has an edge for (its next_functions; a direct call's gradients,
        # y.grad_fn(g)): None, each tensor but an index, mask or condition (derivatives.yaml's
        # non_differentiable inputs) and no Python number (torch's Scalar overloads: pow(x, 2) and
        # clamp(x, 0, 1) have one edge); "numbers", a number too (torch wraps it as a tensor with no
        # grad_fn: x + 2 and where(c, x, 0.) have two); or (argument metas) -> the positions
        self.edges = edges
        # (args) -> the argument positions torch's node saves as a view it made of the argument
        # inside the op (matmul's unsqueezed vector): saved as a tensor of the argument's memory at
        # the call, which a later `x.data = ...` does not change (an in-place write shows), as torch's
        self.saves_inner_view = saves_inner_view
        PRIMITIVES[name] = self

    def torch_edges(self, args_meta):
        """The positions among a node's arguments (a tensor's (shape, dtype), else the value)
        that torch's node has edges for (Primitive.edges)."""
        edges = self.edges
        if edges is not None and edges != "numbers":
            return edges(args_meta)
        names, last = self.inputs, len(self.inputs) - 1
        return tuple(i for i, a in enumerate(args_meta)
                     if names[min(i, last)] not in _NONDIFF_INPUTS
                     and (a.__class__ is tuple or (edges == "numbers" and a is not None)))

    def result_layout(self, params):
        """This call's layout rule (Primitive.layout)."""
        layout = self.layout
        return layout if layout.__class__ is str else layout(params)

    def saved_positions(self, nargs, req=None):
        """(argument positions to save, whether to save the output) for a call with nargs
        arguments of which those flagged in `req` require grad."""
        key = (nargs, req if self.needs else None)
        pos = self._save_pos.get(key)
        if pos is None:
            names = set(self.saves)
            if self.needs is not None and req is not None:
                names = set()
                for i, r in enumerate(req):
                    if r and i < len(self.inputs):
                        names.update(self.needs.get(self.inputs[i], ()))
            out = []
            for i, n in enumerate(self.inputs):
                if n in names:
                    if self.variadic and i == len(self.inputs) - 1:
                        out.extend(range(i, nargs))
                    else:
                        out.append(i)
            pos = self._save_pos[key] = (tuple(out), "out" in names)
        return pos

    def __repr__(self):
        return f"<primitive {self.name}>"


# inputs torch's derivatives.yaml calls non_differentiable: its nodes have no edge for them
_NONDIFF_INPUTS = frozenset(("cond", "mask", "index", "idx"))


# -- dtype rules: (args) -> (compute dtype or None for "leave inputs alone", output dtype) --

def _tensors(args):
    Tensor = FrontEnd.Tensor
    return [a for a in args if isinstance(a, Tensor)]


def _first_dtype(args):
    for a in args:
        d = getattr(a, "_dtype", None)
        if d is not None:
            return d
    raise TypeError("expected a tensor argument")


def _same(args):
    return None, _first_dtype(args)


def _float(args):
    d = _first_dtype(args)
    if not d.is_floating_point:
        d = D.get_default_dtype()
    return d, d


_SCALAR_KIND = {bool: 0, int: 1, float: 2}


def _promote(args):
    if len(args) == 2:          # the common case, without the general rule's bookkeeping
        a, b = args
        da = getattr(a, "_dtype", None)
        db = getattr(b, "_dtype", None)
        if da is not None:
            if da is db:
                return da, da
            if db is None and _SCALAR_KIND.get(type(b), 3) <= da._kind:
                return da, da
        elif db is not None and _SCALAR_KIND.get(type(a), 3) <= db._kind:
            return db, db
    d = D.result_type(args)
    return d, d


def _promote_float(args):
    d = D.result_type(args)
    if not d.is_floating_point:
        d = D.get_default_dtype()
    return d, d


def _compare(args):
    return D.result_type(args), D.bool_


def _logical(args):
    # the operands in their common dtype first, as torch's TensorIterator casts them, where that can
    # turn a nonzero into 0: a bfloat16 0-dim 1e-39 beside a float16 tensor is float16's 0, so
    # logical_and of them is False (tracegrad read each operand as bool directly: True). Elsewhere
    # (no 16-bit common dtype) each operand is read as bool, which gives the same answer; the
    # front end (functional.logical_and, ...) converts a tensor operand narrowed within its kind
    # (int64 -512 beside int8) before it gets here.
    if len(args) > 1:
        d = D.result_type(args)
        if (d is D.float16 or d is D.bfloat16) and any(
                getattr(a, "_dtype", d) is not d and a._dtype.is_floating_point for a in args):
            return d, D.bool_
    return D.bool_, D.bool_


def _to_bool(args):
    return None, D.bool_


def _where(args):
    d = D.result_type(args[1:])
    return d, d


def _int64(args):
    return None, D.int64


def scalar_operands(prim, cdt, args):
    """How Python numbers meet the kernel of `prim` computing in dtype `cdt`, as torch's CPU kernels
    take them: (the dtype the tensors are cast to and the kernel runs in, the arguments with each
    Python number replaced by the value the kernel sees).

    Integers beyond [-2**63, 2**64) are refused (torch's argument parser); an integer meeting an
    integer dtype wraps to it (int8 + 300 is int8 + 44), except at `prim.checked` positions, where
    torch's checked conversion raises instead (pow's exponent, clamp's bounds, where's values).

    A float16 or bfloat16 kernel mostly converts a number to its dtype first (0.1 becomes float16's
    0.0999755859375) and computes each element in float32 from the two rounded values. Some (mul,
    div, floor_divide and div's rounding modes) read their second operand, where it is a Python
    number or a 0-dim tensor, at float32 precision from its original value (torch's
    original_scalar_value<opmath_t>): the op then runs in float32 on that value, and the result
    is rounded once to `cdt`."""
    for a in args:
        c = a.__class__
        if c is int or c is float:
            break
    else:
        k = prim.opmath
        if k is not None and cdt._rank == 1 and cdt._kind == 2 and 1 < len(args) and k < len(args) and \
                isinstance(args[k], FrontEnd.Tensor) and not args[k].ndim:
            # a 0-dim tensor read from its own dtype, not rounded to cdt first
            return D.float32, _in_dtype_first(args, k, cdt)
        return cdt, args
    for a in args:
        if a.__class__ is int:
            check_python_int(a)
    kind = cdt._kind
    if kind == 1:
        checked = prim.checked[0]
        for i in checked:
            if i < len(args) and args[i].__class__ is float:
                check_value_fits(args[i], cdt)       # (masked_fill(int8, 127.9) kept 127; torch raises)
        return cdt, tuple(_int_operand(a, cdt, i in checked) if a.__class__ is int else a
                          for i, a in enumerate(args))
    if kind != 2:
        return cdt, args
    if prim.checked[1] is True or prim.checked[1] == "half" and cdt._rank == 1:
        for i in prim.checked[0]:
            if i < len(args) and args[i].__class__ in (int, float):
                _check_float(args[i], cdt)
    if cdt._rank != 1:
        return cdt, args
    k = prim.opmath
    rounded = _to_float16 if cdt is D.float16 else _to_bfloat16
    if k is not None and k < len(args) and len(args) > 1:
        a = args[k]
        if a.__class__ in (int, float):
            return D.float32, tuple(_float32_value(x) if i == k else x for i, x in enumerate(args))
        if isinstance(a, FrontEnd.Tensor) and not a.ndim:
            # a number elsewhere is still the dtype's value (2 ** 31 // a float16 0-dim tensor: inf // y,
            # NaN, as torch; read at float32 precision it was 2 ** 31, and the quotient inf)
            return D.float32, _in_dtype_first(tuple(rounded(x) if x.__class__ in (int, float) else x
                                                    for x in args), k, cdt)
    return cdt, tuple(rounded(x) if x.__class__ in (int, float) else x for x in args)


def _in_dtype_first(args, k, cdt):
    """The arguments of a float16 or bfloat16 op computed in float32 from a 0-dim tensor at position k:
    an integer or bool tensor elsewhere becomes cdt before float32, as torch casts every operand to
    the common dtype before its kernel reads the scalar (int64 [2 ** 31] // a float16 0-dim tensor is
    inf // y, NaN; cast straight to float32 it was 2 ** 31 // y, inf)."""
    if not any(i != k and isinstance(a, FrontEnd.Tensor) and a._dtype._kind < 2 for i, a in enumerate(args)):
        return args
    return tuple(F.convert(a, cdt) if i != k and isinstance(a, FrontEnd.Tensor) and a._dtype._kind < 2 else a
                 for i, a in enumerate(args))


def _overflow(d):
    return RuntimeError(f"value cannot be converted to type {D.C_NAME[d]} without overflow")


def _int_operand(v, d, checked):
    lo, hi, int_lo = D.integer_bounds(d)
    if int_lo <= v <= hi:
        return v if v >= lo else v + hi + 1          # unsigned: -255..-1 wrap for uint8
    if checked:
        raise _overflow(d)
    bits = 8 * d.itemsize
    v %= 1 << bits
    return v - (1 << bits) if lo < 0 and v > hi else v


def check_python_int(v):
    """torch's conversion of a Python int to a Scalar: OverflowError beyond [-2**63, 2**64)."""
    if v >= 2 ** 64:
        raise OverflowError("int too big to convert")
    if v < -2 ** 63:
        raise OverflowError("can't convert negative int to unsigned")


def check_value_fits(v, d):
    """torch's checked conversion (c10::checked_convert) of a Python number to dtype d, as a Scalar
    (or a 0-dim tensor's value read as one: masked_fill's, index_fill's) meets a kernel: RuntimeError
    "value cannot be converted to type int8_t without overflow" for a number out of d's range (a
    float out of an integer dtype's, NaN and infinities too; an integer beyond a float dtype's largest
    value); an unsigned dtype takes -max..-1 integers (they wrap). bool takes any number."""
    if d is D.bool_ or v.__class__ is bool:
        return
    if d._kind == 1:
        if v.__class__ is int:
            _int_operand(v, d, True)
            return
        lo, hi, _ = D.integer_bounds(d)
        if not lo <= v <= hi:                      # (NaN compares false: it overflows, as torch's)
            raise _overflow(d)
        return
    _check_float(v, d)


def may_not_fit(src, d):
    """Whether some value of dtype src fails torch's checked conversion to dtype d."""
    if src is d or src is D.bool_ or d is D.bool_ or d is D.float64:
        return False
    if d._kind == 2:
        top = _FLOAT_MAX.get(src.name, math.inf) if src._kind == 2 else D.integer_bounds(src)[1]
        return top > _FLOAT_MAX[d.name]
    if src._kind == 2:
        return True                                # NaN
    lo, hi, int_lo = D.integer_bounds(d)
    slo, shi, _ = D.integer_bounds(src)
    return slo < int_lo or shi > hi


def _check_float(v, d):
    if d is D.float64:
        return
    try:
        f = float(v)
    except OverflowError:
        raise _overflow(d) from None
    if math.isfinite(f) and abs(f) > _FLOAT_MAX[d.name]:
        raise _overflow(d)


_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": float(np.finfo(np.float32).max)}


_F32_OVERFLOW = 3.4028235677973366e38      # float32's largest value plus half its last step: inf from there on
_F16_OVERFLOW = 65520.0


def _float32_value(x):
    """A Python number rounded to float32 (nearest, ties to even), as a Python float."""
    x = float(x)
    if x != x or -_F32_OVERFLOW < x < _F32_OVERFLOW:
        return _unpack_f(_pack_f(x))[0]
    return math.copysign(math.inf, x)


def _to_float16(x):
    """A Python number as torch converts it to a float16 scalar: to float32 first, then to float16."""
    x = _float32_value(x)
    if x != x or -_F16_OVERFLOW < x < _F16_OVERFLOW:
        return _unpack_e(_pack_e(x))[0]
    return math.copysign(math.inf, x)


def _to_bfloat16(x):
    """A Python number as torch converts it to a bfloat16 scalar: to float32, then its 16 high bits
    rounded to nearest, ties to even (bfloat16 values are float32 values)."""
    x = _float32_value(x)
    if x != x or x in (math.inf, -math.inf):
        return x
    bits = _unpack_I(_pack_f(x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return _unpack_f(_pack_I(bits))[0]


_pack_f, _unpack_f = struct.Struct("<f").pack, struct.Struct("<f").unpack
_pack_e, _unpack_e = struct.Struct("<e").pack, struct.Struct("<e").unpack
_pack_I, _unpack_I = struct.Struct("<I").pack, struct.Struct("<I").unpack


def _refusing(rule, refuse):
    def checked(args):
        cdt, odt = rule(args)
        d = cdt if cdt is not None else _first_dtype(args)
        err = refuse.get(d._kind)
        if err is not None:
            err = err(d, args)
            if err is not None:
                raise err
        return cdt, odt
    return checked


def _no_kernel(op):
    """torch's error for a dtype its kernel `op` is not built for."""
    return lambda d, args: NotImplementedError(f"\"{op}\" not implemented for '{D.SCALAR_NAME[d]}'")


def _refuse(exc, message):
    return lambda d, args: exc(message)


DTYPE_RULES = {"same": _same, "float": _float, "promote": _promote, "promote_float": _promote_float,
               "compare": _compare, "logical": _logical, "to_bool": _to_bool, "where": _where,
               "int64": _int64}


# -- shape rules ----------------------------------------------------------------

def _is_tensor(a):
    return isinstance(a, FrontEnd.Tensor)


def _shape_of(a):
    return tuple(a.shape) if hasattr(a, "shape") and not isinstance(a, (int, float, bool)) else ()


def _unary_shape(x, **p):
    return tuple(x.shape)


def _bcast_shape(*args, **p):
    return S.broadcast_shapes(*[tuple(a.shape) for a in args if hasattr(a, "shape") and
                                not isinstance(a, (int, float, bool, np.generic))])


def _reduce_shape(x, dims=None, keepdim=False, **p):
    return S.reduced_shape(tuple(x.shape), S.normalize_dims(dims, len(x.shape)), keepdim)


# -- helpers used by several rules ---------------------------------------------------

def _np(x):
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _expand_reduced(g, shape, dims, keepdim):
    """Bring a reduction's gradient back to the input's shape."""
    if not keepdim and dims:
        g = F.reshape(g, S.reduced_shape(shape, dims, True))
    return F.expand(g, shape)


def _dims(x, dims):
    return S.normalize_dims(dims, len(x.shape)) if x.shape else ()


def _count(x, dims):
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


def _zeros_like(x):
    return F.full(tuple(x.shape), 0, dtype=x.dtype)


class _EfficientZero:
    """A rule's gradient that is torch's efficient zero (at::_efficientzerotensor, sgn's derivative
    of a real tensor): added to the other gradients of its value it changes nothing (a sum of -0.0
    stays -0.0), alone it is zeros. autodiff.derive sums it so."""
    __slots__ = ()

    def __repr__(self):
        return "EFFICIENT_ZERO"


EFFICIENT_ZERO = _EfficientZero()


def _sgn(x):
    """sgn(x) of a real tensor, as torch's: sign(x), whose node (SgnBackward0) gives the efficient zero
    (torch's abs derivative is grad * self.sgn(): a second derivative through it kept its -0.0)."""
    return FrontEnd.apply(PRIMITIVES["sign"], (x,), {"sgn": True})


def R(name, x, dims, keepdim=False):
    """A reduction primitive over normalized `dims`, for use inside rules."""
    return FrontEnd.apply(PRIMITIVES[name], (x,), {"dims": tuple(dims), "keepdim": keepdim})


# == elementwise, one input =======================================================

def unary(name, fn, vjp, saves, dtype="float", grad_fn=None, refuse=None, triton=None):
    return Primitive(name, "x", fn, shape=_unary_shape, dtype=dtype, vjp=vjp, saves=saves,
                     grad_fn=grad_fn or f"{name.capitalize()}Backward0", elementwise=True, refuse=refuse,
                     triton=triton)


LN2 = math.log(2.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _half_in_float32(fn):
    """fn of a float16 array computed in float32 and rounded once, as torch computes a Half
    op in its opmath type (each numpy step on float16 would round: sigmoid and rsqrt were 1 ulp
    off torch's for 13 % and 9 % of all float16 values)."""
    def kernel(x):
        if x.dtype == np.float16:
            return fn(x.astype(np.float32)).astype(np.float16)
        return fn(x)
    kernel.__name__ = fn.__name__
    return kernel


@_half_in_float32
def _sigmoid(x):
    # exp(-|x|) never overflows; torch's sigmoid is exact at both tails
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


@_half_in_float32
def _rsqrt(x):
    return 1 / np.sqrt(x)


# erf for 1 < |x| < 6: W. J. Cody's rational Chebyshev approximations of erfc (CALERF, Math. Comp. 1969)
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
          1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
          8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
          2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
          3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
          6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
          2.33520497626869185e-3)


_TWO_OVER_SQRT_PI_HI = 1.1283791670955126
_TWO_OVER_SQRT_PI_LO = 1.533545961316588e-17
# (-1)**n / (n! (2n + 1)) for n = 1..20: erf(x) = 2/sqrt(pi) x (1 + sum_n c_n x**(2n)), to 1e-20 for |x| <= 1
_ERF_SERIES = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(1, 21))


def _erfc_scaled_tail(y, num, den):
    # erfc(y) = exp(-y*y) * R(y), with y*y split so that exp loses no precision
    ysq = np.trunc(y * 16.0) / 16.0
    return np.exp(-ysq * ysq) * np.exp(-(y - ysq) * (y + ysq)) * num / den


def _erfc_mid(z):
    """erfc(z) for 0.46875 <= z <= 4 (Cody's rational approximation)."""
    num, den = _ERF_C[8] * z, z
    for i in range(7):
        num, den = (num + _ERF_C[i]) * z, (den + _ERF_D[i]) * z
    return _erfc_scaled_tail(z, num + _ERF_C[7], den + _ERF_D[7])


def _erfc_big(z):
    """erfc(z) for z > 4 (Cody's asymptotic rational in 1 / z^2)."""
    zi = 1.0 / (z * z)
    num, den = _ERF_P[5] * zi, zi
    for i in range(4):
        num, den = (num + _ERF_P[i]) * zi, (den + _ERF_Q[i]) * zi
    r = (0.5641895835477562869 - zi * (num + _ERF_P[4]) / (den + _ERF_Q[4])) / z
    return _erfc_scaled_tail(z, r, 1.0)


def _erf(x):
    """erf to float64 rounding (within 2 ulp), computed in float64 and cast back."""
    xd = np.asarray(x, dtype=np.float64)
    y = np.abs(xd)
    out = np.empty_like(xd)
    small = y <= 1.0
    mid = (y > 1.0) & (y <= 4.0)
    big = (y > 4.0) & (y < 6.0)
    if small.any():
        # the Maclaurin series in x*x, 2/sqrt(pi) split in two so that its rounding does not show
        z = y[small]
        zsq = z * z
        p = np.full_like(z, _ERF_SERIES[-1])
        for c in _ERF_SERIES[-2::-1]:
            p = p * zsq + c
        zk = z * _TWO_OVER_SQRT_PI_HI
        out[small] = np.copysign(zk + (z * _TWO_OVER_SQRT_PI_LO + zk * (p * zsq)), xd[small])
    if mid.any():
        out[mid] = np.copysign((0.5 - _erfc_mid(y[mid])) + 0.5, xd[mid])
    if big.any():
        out[big] = np.copysign((0.5 - _erfc_big(y[big])) + 0.5, xd[big])
    rest = y >= 6.0                       # erf is 1 to float64 rounding (erfc(6) < 2**-54)
    out[rest] = np.copysign(1.0, xd[rest])
    nan = np.isnan(xd)
    out[nan] = xd[nan]
    return out.astype(np.asarray(x).dtype, copy=False)


def _erfc(x):
    """erfc to float64 rounding (within a few ulp, no cancellation in the tail: erfc(10) is 2.1e-45),
    computed in float64 and cast back; erfc(-y) = 2 - erfc(y)."""
    xd = np.asarray(x, dtype=np.float64)
    y = np.abs(xd)
    tail = np.empty_like(y)                  # erfc(|x|)
    small = y < 0.46875                      # erf < 0.5: 1 - erf loses no more than a bit (Cody's ranges)
    mid = (y >= 0.46875) & (y <= 4.0)
    big = y > 4.0
    tail[small] = 1.0 - _erf(y[small])
    if mid.any():
        tail[mid] = _erfc_mid(y[mid])
    if big.any():                            # erfc(27.3) is under float64's least subnormal
        z = y[big]
        tail[big] = np.where(z > 27.3, 0.0, _erfc_big(np.minimum(z, 27.3)))
    out = np.where(xd < 0, 2.0 - tail, tail)
    out = np.where(np.isnan(xd), xd, out)
    return out.astype(np.asarray(x).dtype, copy=False)


def _round(x, decimals=0):
    if decimals and x.dtype == np.float16:
        # torch scales, rounds and scales back in float32 and rounds once to float16; numpy's
        # float16 steps overflowed (round(65504., 2) was inf) and rounded apart from torch's
        # for 13% of values with decimals=2, 52% with 3
        return np.round(x.astype(np.float32), decimals).astype(np.float16)
    return np.round(x, decimals)


unary("neg", np.negative, lambda g, out, x: (-g,), "", dtype="same", refuse={0: _refuse(
    RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
                  "use the `~` or `logical_not()` operator instead.")}, triton=T.Expr("{0} * -1"))   # `-x` is 0 - x to Triton before 3.9: +0.0 for 0.0
unary("abs", np.abs, lambda g, out, x: (g * _sgn(x),), "x", dtype="same", refuse={0: _no_kernel("abs_cpu")},
      triton=T.Expr("tl.abs({0})"))
def _sign(x):
    # torch's (0 < x) - (x < 0): 0 at NaN (numpy's sign keeps the NaN)
    if x.dtype == np.bool_:
        return x.copy()
    if x.dtype.kind != "f":
        return np.sign(x)
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


unary("sign", lambda x, sgn=False: _sign(x), lambda g, out, x, sgn=False: (EFFICIENT_ZERO if sgn else _zeros_like(g),),
      "", dtype="same", grad_fn=lambda a, p: "SgnBackward0" if p.get("sgn") else "SignBackward0", triton=T.sign)
unary("exp", np.exp, lambda g, out, x: (g * out,), "out", triton=T.unary("tl.exp"))
unary("exp2", np.exp2, lambda g, out, x: (g * out * LN2,), "out", triton=T.unary("tl.exp2"))
unary("log", np.log, lambda g, out, x: (g / x,), "x", triton=T.unary("tl.log"))
unary("log2", np.log2, lambda g, out, x: (g / (x * LN2),), "x", triton=T.unary("tl.log2"))
unary("log1p", np.log1p, lambda g, out, x: (g / (x + 1),), "x", grad_fn="Log1PBackward0", triton=T.unary("_log1p"))
unary("expm1", np.expm1, lambda g, out, x: (g * (out + 1),), "out", triton=T.unary("_expm1"))
unary("sqrt", np.sqrt, lambda g, out, x: (g / (2 * out),), "out", triton=T.sqrt)
# (torch's -0.5 * grad * result.pow(3): the cube by pow, which in float16 rounds once, then one
# product; ((-0.5 * g * out) * out) * out rounded three times: 916 of 2000 float32 gradients apart)
unary("rsqrt", _rsqrt, lambda g, out, x: ((-0.5 * g) * F.pow(out, 3),), "out",
      triton=T.rsqrt)
# (torch's -grad * (result * result): the square first, which in float16 underflows to 0 where
# (-grad * result) * result did not: the gradient of 2**62 / x at x = 60000 is NaN in torch)
unary("reciprocal", lambda x: 1 / x, lambda g, out, x: (-g * (out * out),), "out",
      triton=T.Expr("1.0 / {0}", cast=True))
unary("sin", np.sin, lambda g, out, x: (g * F.cos(x),), "x", triton=T.unary("tl.sin"))
unary("cos", np.cos, lambda g, out, x: (-g * F.sin(x),), "x", triton=T.unary("tl.cos"))
unary("tan", np.tan, lambda g, out, x: (g * (1 + out * out),), "out", triton=T.Expr("tl.sin({0}) / tl.cos({0})"))


def _float32_for(dtypes, rule):
    """A derivative rule that torch's backward kernel computes in float32 for these dtypes and
    rounds once (a reduced floating type's kernel converts its operands to float)."""
    def vjp(g, out, x):
        dt = out.dtype
        if dt in dtypes:
            return tuple(r.to(dt) for r in rule(g.float(), out.float(), x))
        return rule(g, out, x)
    return vjp


# torch's tanh_backward and sigmoid_backward: g * (1 - y * y) in float32 for float16 and bfloat16,
# (g * (1 - y)) * y, in float32 for bfloat16 only (its float16 kernel rounds every step); g * y *
# (1 - y) and float16/bfloat16 steps gave 100 to 760 of 2000 gradients apart in the last bits.
# (float32 and float64 tanh_backward: torch's vector kernel contracts 1 - y * y into a fused
# multiply-add where its build does; this is the unfused rounding)
unary("tanh", np.tanh, _float32_for((D.float16, D.bfloat16), lambda g, out, x: (g * (1 - out * out),)), "out",
      triton=T.unary("_tanh"))
unary("sigmoid", _sigmoid, _float32_for((D.bfloat16,), lambda g, out, x: (g * (1 - out) * out,)), "out",
      triton=T.unary("_sigmoid"))
unary("erf", _erf, lambda g, out, x: (g * TWO_OVER_SQRT_PI * F.exp(-(x * x)),), "x", triton=T.unary("tl.erf"))
unary("erfc", _half_in_float32(_erfc), lambda g, out, x: (-g * TWO_OVER_SQRT_PI * F.exp(-(x * x)),), "x",
      triton=T.Refuse("runs its numpy kernel on the host"))     # (1 - tl.erf would lose the tail)
def _relu(x):
    # torch's x < 0 ? 0 : x: -0.0 and NaN pass through (numpy's maximum turns -0.0 into 0.0)
    if x.dtype.kind != "f":
        return np.maximum(x, 0, dtype=x.dtype)
    return _where(x < 0, 0, x)


def _threshold_backward(g, x, threshold):
    return FrontEnd.apply(PRIMITIVES["threshold_backward"], (g, x), {"threshold": threshold})


# the derivative is torch's threshold_backward(grad, result, 0): the gradient flows where out <= 0
# is false (NaN too). As torch's, it is an op of its own, whose result depends on `out` with a
# zero derivative: a double backward connects x (zeros where a mask of no history gave None, and
# the first gradient requires grad, ThresholdBackwardBackward0)
unary("relu", _relu, lambda g, out, x: (_threshold_backward(g, out, 0),), "out",
      dtype="same", refuse={0: _refuse(RuntimeError, "Boolean inputs not supported for relu")},
      triton=T.Expr("tl.where({0} < 0, 0, {0})", cast=True))
Primitive("threshold_backward", "g x", lambda g, x, threshold: _where(x <= threshold, 0, g),
          shape=lambda g, x, **p: _bcast_shape(g, x), dtype="promote",
          vjp=lambda gg, out, g, x, threshold: (_threshold_backward(gg, x, threshold), _zeros_like(x)),
          saves="x", grad_fn="ThresholdBackwardBackward0", elementwise=True,
          triton=T.Expr(lambda a, p, c: f"tl.where({a[1]} <= {float(p['threshold'])!r}, 0, {a[0]})", cast=True))
# -- the rest of relu's family (hardtanh, relu6, leaky_relu, threshold, softshrink, hardshrink):
# each derivative is g times a slope that is constant on an interval of x and on its outside,
# as torch's hardtanh_backward, leaky_relu_backward, ... are. One op, piecewise_backward, with
# the interval and the two slopes for parameters, is each of them: like threshold_backward its
# result depends on x with a zero derivative, so that under create_graph the first gradient
# requires grad and the second connects x (zeros, torch's *BackwardBackward0) where a where()
# with a mask of no history gave None. `piecewise(x, y)` is the activation's value y (computed
# by its composite) with that derivative for x and none through y (its grad_fn is `fwd_name`).
#   lo, hi: the interval's ends (None: unbounded), closed: the ends inside it;
#   inside, outside: the slopes; nan_inside: which side NaN takes (torch's kernels test
#   `x <= lo || x >= hi ? 0 : grad` for hardtanh and threshold, so NaN passes the gradient);
#   name: torch's grad_fn name of the derivative (HardtanhBackwardBackward0, ...);
#   no_derivative: torch's op whose derivative torch has not (hardsigmoid_backward: the first
#   gradient requires grad, NotImplemented, and differentiating it raises), else None
PIECEWISE = ("lo", "hi", "closed", "inside", "outside", "nan_inside", "name", "no_derivative")


def piecewise_mask(x, lo, hi, closed, inside, outside, nan_inside, **_):
    """(mask, slope where it holds, slope where not) of piecewise_backward, in the comparisons of
    whatever x is (numpy arrays, tensors, proxies): the interval's outside when NaN goes inside,
    else the interval, so that a NaN compares False and takes the other slope as torch's does."""
    parts = []
    if nan_inside:
        if lo is not None:
            parts.append(x < lo if closed else x <= lo)
        if hi is not None:
            parts.append(x > hi if closed else x >= hi)
        return parts, outside, inside
    if lo is not None:
        parts.append(x >= lo if closed else x > lo)
    if hi is not None:
        parts.append(x <= hi if closed else x < hi)
    return parts, inside, outside


def _np_slope(g, s):
    return 0 if s == 0 else g if s == 1 else g * s


def _piecewise_backward_kernel(g, x, **p):
    parts, a, b = piecewise_mask(x, **p)
    m = parts[0]
    for q in parts[1:]:
        m = (m | q) if p["nan_inside"] else (m & q)
    return _where(m, _np_slope(g, a), _np_slope(g, b))


def _piecewise_backward(g, x, p):
    return FrontEnd.apply(PRIMITIVES["piecewise_backward"], (g, x), {k: p[k] for k in PIECEWISE})


def _triton_piecewise(a, p, c):
    g, x = a
    parts, s_in, s_out = piecewise_mask(_TritonOperand(x), **p)
    m = f" {'|' if p['nan_inside'] else '&'} ".join(f"({q})" for q in parts)
    slope = lambda s: "0" if s == 0 else g if s == 1 else f"{g} * {float(s)!r}"  # noqa: E731
    return f"tl.where({m}, {slope(s_in)}, {slope(s_out)})"


class _TritonOperand:
    """An operand's text under piecewise_mask's comparisons: `x <= 1.0` gives '{x} <= 1.0'."""

    def __init__(self, text):
        self.text = text

    def _cmp(op):
        return lambda self, v: f"{self.text} {op} {float(v)!r}"
    __lt__, __le__, __gt__, __ge__ = _cmp("<"), _cmp("<="), _cmp(">"), _cmp(">=")
    del _cmp


def _piecewise_double_backward(gg, out, g, x, **p):
    if p["no_derivative"]:
        _not_implemented(p["no_derivative"])(gg, out)
    return _piecewise_backward(gg, x, p), _zeros_like(x)


Primitive("piecewise_backward", "g x", _piecewise_backward_kernel,
          shape=lambda g, x, **p: _bcast_shape(g, x), dtype="promote",
          vjp=_piecewise_double_backward,
          saves="x", grad_fn=lambda a, p: p["name"], elementwise=True,
          triton=T.Expr(_triton_piecewise, cast=True))
def _piecewise_vjp(g, out, x, y, **p):
    if p.get("backward_error"):              # torch's in-place leaky_relu_ with a negative slope
        raise RuntimeError(p["backward_error"])
    return _piecewise_backward(g, x, p), None


Primitive("piecewise", "x y", lambda x, y, **p: y, shape=lambda x, y, **p: tuple(y.shape),
          dtype=lambda args: (None, args[1]._dtype),
          vjp=_piecewise_vjp,
          saves="x", grad_fn=lambda a, p: p["fwd_name"], elementwise=True, triton=T.Expr("{1}"),
          edges=lambda a: (0,))           # (y is the composite's value, no input of torch's node)
# -- elu, celu and selu: the value y is their composite's (nn/functional.py), `elu(x, y)` gives it
# torch's derivative, elu_backward(g, x): x <= 0 ? g * input_scale * (alpha * scale) *
# exp(x * input_scale) : g * scale, or from the result (`is_result`, the in-place forms, whose
# x is y): y <= 0 ? g * input_scale * (y + alpha * scale) : g * scale. A NaN takes the positive
# side (torch's scalar and CUDA kernels; its vectorized CPU loop, on long tensors, gives NaN).
# elu_backward is an op of its own as torch's is: its derivative for x is torch's
# elu_double_backward, elu_backward(gg * g * input_scale, x) * (x < 0), which is 0 at x == 0
# (the composite's own derivative was alpha * scale * input_scale ** 2 there), and its first
# gradient's grad_fn is EluBackwardBackward0.
ELU = ("alpha", "scale", "input_scale", "is_result")


def _elu_coefs(dtype, alpha, scale, input_scale):
    """(alpha * scale, scale, input_scale) in the computing dtype, as torch's kernel makes them."""
    t = np.dtype(np.float32 if dtype == np.float16 else dtype).type
    return t(alpha) * t(scale), t(scale), t(input_scale)


def _exp_rounded(v):
    """exp of a float32 array computed in float64 and rounded once, as torch's expf is (numpy's
    float32 exp is 1 ulp off for about 40 % of inputs: exp(-1) gave 0.36787942, not 0.36787945)."""
    return np.exp(v.astype(np.float64)).astype(np.float32) if v.dtype == np.float32 else np.exp(v)


def _elu_backward_kernel(g, x, alpha, scale, input_scale, is_result):
    neg, pos, k = _elu_coefs(np.result_type(g, x), alpha, scale, input_scale)
    with np.errstate(all="ignore"):              # the side not taken may be inf * 0
        inside = g * k * (x + neg) if is_result else g * k * neg * _exp_rounded(x * k)
    return np.where(x <= 0, inside, g * pos).astype(np.result_type(g, x), copy=False)


def _elu_backward(g, x, p):
    return FrontEnd.apply(PRIMITIVES["elu_backward"], (g, x), {k: p[k] for k in ELU})


def _elu_double_backward(gg, out, g, x, **p):
    below = F.convert(x < 0, gg.dtype)
    if p["is_result"]:
        return _elu_backward(gg, x, p), gg * g * p["input_scale"] * below
    return _elu_backward(gg, x, p), _elu_backward(gg * g * p["input_scale"], x, p) * below


def _triton_elu_backward(a, p, c):
    g, x = a
    k, neg, pos = float(p["input_scale"]), float(p["alpha"]) * float(p["scale"]), float(p["scale"])
    inside = f"{g} * {k!r} * ({x} + {neg!r})" if p["is_result"] else f"{g} * {k!r} * {neg!r} * tl.exp({x} * {k!r})"
    return f"tl.where({x} <= 0, {inside}, {g} * {pos!r})"


Primitive("elu_backward", "g x", _elu_backward_kernel,
          shape=lambda g, x, **p: _bcast_shape(g, x), dtype="promote", vjp=_elu_double_backward,
          saves="g x", grad_fn="EluBackwardBackward0", elementwise=True,
          triton=T.Expr(_triton_elu_backward, cast=True))
# -- hardswish: its value y is its composite's, `hardswish(x, y)` gives it torch's derivative,
# hardswish_backward(g, x): x <= -3 ? 0 : x < 3 ? g * (x / 3 + 0.5) : g (NaN: g, as torch's scalar
# and CUDA kernels), an op of its own whose derivative for x is torch's
# where(-3 < x < 3, gg * g / 3, 0) (HardswishBackwardBackward0): zero at the kinks +-3.


def _hardswish_backward_kernel(g, x):
    with np.errstate(all="ignore"):
        mid = g * (x / np.asarray(3, x.dtype) + np.asarray(0.5, x.dtype))
    return np.where(x <= -3, np.zeros((), mid.dtype), np.where(x < 3, mid, g)).astype(mid.dtype, copy=False)


def _hardswish_backward(g, x):
    return FrontEnd.apply(PRIMITIVES["hardswish_backward"], (g, x), {})


def _hardswish_double_backward(gg, out, g, x):
    return _hardswish_backward(gg, x), F.where(F.logical_and(x > -3.0, x < 3.0), gg * g / 3.0, 0.0)


Primitive("hardswish_backward", "g x", _hardswish_backward_kernel,
          shape=lambda g, x: _bcast_shape(g, x), dtype="promote", vjp=_hardswish_double_backward,
          saves="g x", grad_fn="HardswishBackwardBackward0", elementwise=True,
          triton=T.Expr("tl.where({1} <= -3.0, 0.0, tl.where({1} < 3.0, {0} * ({1} / 3.0 + 0.5), {0}))", cast=True))
Primitive("hardswish", "x y", lambda x, y: y, shape=lambda x, y: tuple(y.shape),
          dtype=lambda args: (None, args[1]._dtype),
          vjp=lambda g, out, x, y: (_hardswish_backward(g, x), None),
          saves="x", grad_fn="HardswishBackward0", elementwise=True, triton=T.Expr("{1}"))
# -- prelu: torch's _prelu_kernel, x > 0 ? x : w * x (w broadcast to x), and its backward, the
# gradients for x (x > 0 ? g : w * g) and for w (x > 0 ? 0 : x * g, before the sum over the
# broadcast dimensions): a product with the mask was NaN for w's at x = inf. Each is an op of its own
# (PreluKernelBackwardBackward0) with torch's double backward, whose masks are x >= 0 (zero at
# x == 0 where the first derivative's is x > 0); a gradient no output reached adds no term (a zero
# there made inf * 0 = NaN).


def _prelu_kernel(x, w):
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, w * x).astype(np.result_type(x, w), copy=False)


def _prelu_grad_input_kernel(g, x, w):
    with np.errstate(all="ignore"):
        return np.where(x > 0, g, w * g).astype(np.result_type(g, x, w), copy=False)


def _prelu_grad_weight_kernel(g, x, w):
    dt = np.result_type(g, x, w)
    with np.errstate(all="ignore"):
        return np.where(x > 0, np.zeros((), dt), x * g).astype(dt, copy=False)


def _prelu_vjp(g, out, x, w):
    return (FrontEnd.apply(PRIMITIVES["prelu_grad_input"], (g, x, w), {}),
            FrontEnd.apply(PRIMITIVES["prelu_grad_weight"], (g, x, w), {}))


def _prelu_grad_input_vjp(gg, out, g, x, w):
    nonneg = x >= 0
    return F.where(nonneg, gg, gg * w), _zeros_like(x), F.where(nonneg, 0.0, g * gg)


def _prelu_grad_weight_vjp(gg, out, g, x, w):
    nonneg = x >= 0          # (w's: zeros, as torch's zeros_like(self) where no gradient of x reached)
    return F.where(nonneg, 0.0, gg * x), F.where(nonneg, 0.0, g * gg), _zeros_like(x)


Primitive("prelu", "x w", _prelu_kernel, shape=_bcast_shape, dtype="promote", vjp=_prelu_vjp, saves="x w",
          grad_fn="PreluKernelBackward0", elementwise=True, triton=T.Expr("tl.where({0} > 0, {0}, {1} * {0})", cast=True))
Primitive("prelu_grad_input", "g x w", _prelu_grad_input_kernel, shape=_bcast_shape, dtype="promote",
          vjp=_prelu_grad_input_vjp, saves="g x w", grad_fn="PreluKernelBackwardBackward0", elementwise=True,
          triton=T.Expr("tl.where({1} > 0, {0}, {2} * {0})", cast=True))
Primitive("prelu_grad_weight", "g x w", _prelu_grad_weight_kernel, shape=_bcast_shape, dtype="promote",
          vjp=_prelu_grad_weight_vjp, saves="g x", grad_fn="PreluKernelBackwardBackward0", elementwise=True,
          triton=T.Expr("tl.where({1} > 0, 0.0, {1} * {0})", cast=True))
# -- logaddexp and logaddexp2: torch's kernel, max(a, b) + log1p(exp(-|a - b|)) (a itself where a == b is
# infinite; base 2: log1p(exp2(-|a - b|)) / ln 2), and its derivative, g / (1 + exp(b - a)) (base 2:
# 1 + 2^(b - a)): 1 at a = inf, where the composite's exp(a - m) / (exp(a - m) + exp(b - m)) was inf / inf


def _logaddexp_kernel(a, b, base2=False):
    with np.errstate(all="ignore"):
        m = np.maximum(a, b)
        d = -np.abs(a - b)
        r = m + (np.log1p(np.exp2(d)) * (1.0 / LN2) if base2 else np.log1p(np.exp(d)))
        dt = np.result_type(a, b)
        return np.where(np.isinf(a) & (a == b), a, r).astype(dt, copy=False)


def _logaddexp_vjp(g, out, a, b, base2=False):
    e = F.exp2 if base2 else F.exp
    return g / (e(b - a) + 1), g / (e(a - b) + 1)


def _triton_logaddexp(a, p, c):
    x, y = a
    if p.get("base2"):
        soft = f"_log1p(tl.exp2(-tl.abs({x} - {y}))) * {1.0 / LN2!r}"
    else:
        soft = f"_log1p(tl.exp(-tl.abs({x} - {y})))"
    both_inf = f"({x} == {y}) & (({x} - {x}) != ({x} - {x}))"
    return f"tl.where({both_inf}, {x}, tl.maximum({x}, {y}) + {soft})"


Primitive("logaddexp", "x y", _logaddexp_kernel, shape=_bcast_shape, dtype="promote", vjp=_logaddexp_vjp,
          saves="x y", grad_fn=lambda a, p: "Logaddexp2Backward0" if p.get("base2") else "LogaddexpBackward0",
          elementwise=True, triton=T.Expr(_triton_logaddexp, cast=True))
# elu_result: the in-place forms' (torch's EluBackward1), whose derivative reads the result
Primitive("elu", "x y", lambda x, y, **p: y, shape=lambda x, y, **p: tuple(y.shape),
          dtype=lambda args: (None, args[1]._dtype),
          vjp=lambda g, out, x, y, **p: (_elu_backward(g, x, dict(p, is_result=False)), None),
          saves="x", grad_fn=lambda a, p: p["name"], elementwise=True, triton=T.Expr("{1}"))
Primitive("elu_result", "x y", lambda x, y, **p: y, shape=lambda x, y, **p: tuple(y.shape),
          dtype=lambda args: (None, args[1]._dtype),
          vjp=lambda g, out, x, y, **p: (_elu_backward(g, out, dict(p, is_result=True)), None),
          saves="out", grad_fn=lambda a, p: p["name"], elementwise=True, triton=T.Expr("{1}"))
unary("floor", np.floor, lambda g, out, x: (_zeros_like(g),), "", dtype="same", refuse={0: _no_kernel("floor_vml_cpu")},
      triton=T.unary("tl.floor", ints="{x}"))
unary("ceil", np.ceil, lambda g, out, x: (_zeros_like(g),), "", dtype="same", refuse={0: _no_kernel("ceil_vml_cpu")},
      triton=T.unary("tl.ceil", ints="{x}"))
unary("round", _round, lambda g, out, x, decimals=0: (_zeros_like(g),), "", dtype="same",
      grad_fn=lambda a, p: "RoundBackward1" if "decimals" in p else "RoundBackward0",
      refuse={0: _no_kernel("round_vml_cpu")}, triton=T.round_)
Primitive("convert", "x", lambda x, dtype: D.cast(x, dtype),
          shape=_unary_shape, dtype=lambda args: (None, None),
          vjp=lambda g, out, x, dtype: (F.convert(g, x.dtype),), grad_fn="ToCopyBackward0", elementwise=True,
          triton=T.convert)
def _clone_order(shape, memory_format):
    """The order of clone's result for memory_format "channels_last", "channels_last_3d" or
    ("order", order) (tracegrad's ops that lay a result out as torch's kernels do: sort, pad)."""
    if isinstance(memory_format, tuple):
        return tuple(k for k in memory_format[1] if shape[k] > 1)
    return memory_format_order(shape, memory_format)


def _clone(x, memory_format=None, to=False):
    # torch's preserve_format keeps the strides of a dense non-overlapping tensor, else lays it out C-contiguous
    if memory_format == "contiguous" or memory_format is None and 0 in x.strides:
        return np.array(x, copy=True, order="C")
    if memory_format is not None:
        # a memory format's own permutation, size-1 axes in their places (torch's
        # get_channels_last_strides: (2, 3, 1, 1) has strides (3, 1, 3, 3)); else the order's
        axes = FORMAT_ORDERS.get(memory_format) if memory_format.__class__ is str else None
        if axes is None or len(axes) != x.ndim:
            axes = dense_axes(x.shape, _clone_order(x.shape, memory_format))
        out = np.empty(tuple(x.shape[k] for k in axes), x.dtype).transpose(np.argsort(axes))
        np.copyto(out, x)
        return out
    return np.array(x, copy=True)


def _clone_layout(params):
    fmt = params.get("memory_format")
    return "operands" if fmt is None else "c" if fmt == "contiguous" else "order"


Primitive("clone", "x", _clone, shape=_unary_shape, dtype="same",
          vjp=lambda g, out, x, memory_format=None, to=False: (g,),
          # (Tensor.to(memory_format=...) copies through torch's _to_copy)
          grad_fn=lambda args, params: "ToCopyBackward0" if params.get("to") else "CloneBackward0", elementwise=True,
          triton=T.Expr("{0}"), layout=_clone_layout,
          order=lambda arrays, params: _clone_order(arrays[0].shape, params["memory_format"]))


def _clamp_vjp(g, out, x, lo, hi, op=None):
    # torch's clamp_backward and clamp_backward_min_max: where min > max the result is max
    glo = ghi = None
    if _is_tensor(lo):
        glo = F.where(x < lo if hi is None else F.logical_and(x < lo, lo < hi), g, 0)
    if _is_tensor(hi):
        ghi = F.where(x > hi if lo is None else F.logical_or(x > hi, hi < lo), g, 0)
    return F.where(_in_range(x, lo, hi), g, 0), glo, ghi


def _clamp_name(args, params):
    base = {"clamp_min": "ClampMin", "clamp_max": "ClampMax"}.get(params.get("op"), "Clamp")
    tensor_bounds = _is_tensor(args[1]) or _is_tensor(args[2])
    if base == "Clamp":
        return "ClampBackward0" if tensor_bounds else "ClampBackward1"
    return base + ("Backward1" if tensor_bounds else "Backward0")


def _clamp_no_bool(d, args):
    if _is_tensor(args[1]) and _is_tensor(args[2]):
        return _no_kernel("clamp_cpu")(d, args)      # torch's bool kernels take one tensor bound, not two
    if _is_tensor(args[1]) or _is_tensor(args[2]):
        other = args[2] if _is_tensor(args[1]) else args[1]
        if other.__class__ is bool:
            # a bool bound beside a tensor one: torch takes the scalar kernel, which has no bool
            # version (clamp(b, min=False, max=t) raises; min=0 promotes to int64 and runs)
            return _no_kernel("clamp_scalar_cpu")(d, args)
        return None
    return _no_kernel("clamp_scalar_cpu" if args[1] is not None and args[2] is not None else
                      "clamp_min_scalar_cpu" if args[1] is not None else "clamp_max_scalar_cpu")(d, args)


# min and max: None, a Python number or a tensor (broadcast with x)
def _clamp_kernel(x, lo, hi, op=None):
    out = np.clip(x, lo, hi)
    # (a numpy scalar is a 0-dim tensor bound's value in a compiled program, not a number)
    if out.dtype.kind == "f" and not isinstance(lo, (np.ndarray, np.generic)) and \
            not isinstance(hi, (np.ndarray, np.generic)) and \
            not (lo is not None and hi is not None and lo > hi):
        # torch returns x itself where a number bound does not move it (np.clip may give the bound's
        # zero for -0.0); tensor bounds take the bound where equal, as np.clip does. (With min > max
        # every element is max, min(max(x, min), max): clamp(0.0, 127, -0.0) is -0.0)
        out = np.where(out == x, x, out).astype(out.dtype, copy=False)
    return out


Primitive("clamp", "x min max", _clamp_kernel, shape=_bcast_shape, dtype="promote",
          vjp=_clamp_vjp, saves="x min max", grad_fn=_clamp_name, elementwise=True, refuse={0: _clamp_no_bool},
          checked=((1, 2), True),
          # clamp(x, 0, 1) is torch's clamp.Scalar (one edge), clamp(x, t, None) its clamp.Tensor (three)
          edges=lambda a: (0, 1, 2) if any(m.__class__ is tuple for m in a[1:]) else (0,),
          triton=T.clamp)


def _in_range(x, lo, hi):
    m = None
    if lo is not None:
        m = x >= lo
    if hi is not None:
        m = (x <= hi) if m is None else F.logical_and(m, x <= hi)
    return m


for _n, _f, _t in (("isnan", np.isnan, "{0} != {0}"),
                   ("isinf", np.isinf, "({0} == {0}) & (({0} - {0}) != ({0} - {0}))"),
                   ("isfinite", np.isfinite, "({0} - {0}) == 0")):
    Primitive(_n, "x", _f, shape=_unary_shape, dtype="to_bool", elementwise=True, triton=T.Expr(_t))
Primitive("logical_not", "x", np.logical_not, shape=_unary_shape, dtype="logical", elementwise=True,
          triton=T.Expr("{0} == 0"))

# == elementwise, two or three inputs (broadcasting) ========================================


def binary(name, fn, vjp, saves, dtype="promote", grad_fn=None, needs=None, refuse=None, triton=None,
           opmath=None, checked=((), False), chunk_impl=None, edges=None):
    return Primitive(name, "x y", fn, shape=_bcast_shape, dtype=dtype, vjp=vjp, saves=saves,
                     grad_fn=grad_fn or f"{name.capitalize()}Backward0", elementwise=True, needs=needs,
                     refuse=refuse, triton=triton, opmath=opmath, checked=checked, chunk_impl=chunk_impl,
                     edges=edges)


binary("add", np.add, lambda g, out, x, y: (g, g), "", triton=T.binop("+"), edges="numbers")
binary("sub", np.subtract, lambda g, out, x, y: (g, -g), "", triton=T.binop("-"), edges="numbers")
binary("rsub", lambda x, y: np.subtract(y, x), lambda g, out, x, y: (-g, g), "",
       grad_fn=lambda a, p: "RsubBackward0" if _is_tensor(a[1]) else "RsubBackward1", triton=T.Expr("{1} - {0}"))
binary("mul", np.multiply, lambda g, out, x, y: (g * y, g * x), "x y", needs={"x": "y", "y": "x"}, triton=T.binop("*"),
       opmath=1, edges="numbers")
# torch's DivBackward0 saves self and other, not the result (-grad * ((self / other) / other)): an
# in-place op on the quotient leaves the backward valid, one on the dividend does not
binary("div", np.true_divide, lambda g, out, x, y: (g / y, -g * ((x / y) / y)), "x y", dtype="promote_float",
       needs={"x": "y", "y": "x y"}, triton=T.true_div, opmath=1, edges="numbers")


def _integer_division(fn):
    def kernel(x, y, **params):
        # (an empty result divides nothing: torch's int64 zeros(1, 0, 3) // [[[1, 0, 2]]] is empty)
        if np.result_type(x, y).kind in "biu" and np.size(x) and np.any(np.asarray(y) == 0):
            raise RuntimeError("ZeroDivisionError")
        return fn(x, y, **params)
    return kernel


def _floor_divide(x, y, low=None):
    """x // y as torch's CPU kernel. A float16 or bfloat16 tensor divided by a tensor runs torch's
    div_floor_floating with each step rounded to that dtype (fmod, the difference, the quotient, the
    floor and its correction): 65504 // 3.98 is 16464 in float16 where float32's one rounding gives
    16448 (about 1.5% of random float16 pairs differ). float16 arrays round by themselves (numpy's
    half arithmetic rounds every op); bfloat16, stored as float32, says so with low="bfloat16". A
    number or 0-dim divisor makes the op run in float32 (scalar_operands), and float32 and float64
    are numpy's floor_divide."""
    half = np.float16 in (getattr(x, "dtype", None), getattr(y, "dtype", None))
    if low is None and not half:
        return np.floor_divide(x, y)
    r = D.round_bfloat16 if low == "bfloat16" else (lambda a: a)
    # (a number beside a float16 tensor is its float16 value already: 65504.0 // x)
    x, y = np.asarray(x, np.float16 if half else None), np.asarray(y, np.float16 if half else None)
    with np.errstate(all="ignore"):
        q = r(x / y)
        mod = np.fmod(x, y)                      # exact: no rounding
        div = r(r(x - mod) / y)
        div = np.where((mod != 0) & ((y < 0) != (mod < 0)), r(div - 1), div)
        fl = np.floor(div)
        fl = np.where(r(div - fl) > 0.5, r(fl + 1), fl)
        fl = np.where(div == 0, np.copysign(np.zeros_like(fl), q), fl)
        return np.where(y == 0, q, fl).astype(q.dtype, copy=False)


def _trunc_divide(x, y):
    if np.result_type(x, y).kind in "biu":
        q = np.floor_divide(x, y)
        return q + ((np.remainder(x, y) != 0) & ((np.asarray(x) < 0) != (np.asarray(y) < 0)))
    return np.trunc(np.true_divide(x, y))


class DerivativeNotImplemented(RuntimeError):
    """Raised by the derivative rule of an op that has none (torch's message): at backward
    time in eager autograd, and at run time of a compiled backward (see derivative_error)."""


class InplaceDerivativeNotImplemented(DerivativeNotImplemented, NotImplementedError):
    """torch's not_implemented(...) in derivatives.yaml (asinh_, acosh_, atanh_): a NotImplementedError
    at backward time."""


def _not_implemented(op):
    """torch's rule for ops without a derivative: the output requires grad, backward raises."""
    def vjp(g, out, *args, **params):
        raise DerivativeNotImplemented(f"derivative for aten::{op} is not implemented")
    return vjp


def _derivative_error(g, message, error=None, shape=None):
    if error is not None:          # a custom backward's own exception, raised where torch raises it
        raise error
    raise DerivativeNotImplemented(message)


# stands in a compiled backward for the gradient of an op without a derivative: the
# forward compiles and runs, and the backward raises torch's error when it runs, as eagerly
Primitive("derivative_error", "g", _derivative_error,
          shape=lambda g, message, error=None, shape=None: tuple(g.shape) if shape is None else tuple(shape),
          dtype="same",
          triton=T.Refuse("an op without a derivative in a compiled backward"))


def _saved_value_written(r, message):
    # whenever the op's rule runs, whatever gradient reached it (zeros, or none: torch runs a
    # node that its graph reaches, with an undefined gradient too, and checks its saved values
    # first). An op that only outputs no gradient reached lead to runs no rule: the compiled
    # call then runs the backward of the other outputs alone (compile._inexact_without)
    raise RuntimeError(message)


# stands in a backward for the gradient r that an op's rule computed from a value an in-place
# write inside a traced function replaced after the op read it (autodiff._refuse_stale_reads):
# torch's "modified by an inplace operation" when the backward runs, as eagerly
Primitive("saved_value_written", "x", _saved_value_written, shape=lambda r, message: tuple(r.shape),
          dtype="same", vjp=lambda g, out, r, message: (g,),
          triton=T.Refuse("a value saved for backward and written in place"))


def _remainder_vjp(g, out, x, y):
    if not _is_tensor(x):
        _not_implemented("remainder")(g, out)
    # torch's -grad * div(x, y, rounding_mode="floor"): floor(x / y) loses the quotient where x / y rounds
    return g, -g * F.div(x, y, rounding_mode="floor")


def _remainder(x, y):
    if np.result_type(x, y).kind != "f":
        return np.remainder(x, y)
    # torch's fmod(x, y), moved by y where its sign differs from y's: a zero result keeps x's sign
    mod = np.fmod(x, y)
    return np.where((mod != 0) & ((np.asarray(y) < 0) != (mod < 0)), mod + y, mod).astype(mod.dtype, copy=False)


def _remainder_name(args, params):
    if not _is_tensor(args[0]):
        return "NotImplemented"
    return "RemainderBackward1" if _is_tensor(args[1]) else "RemainderBackward0"


binary("floor_divide", _integer_division(_floor_divide), _not_implemented("floor_divide"), "",
       grad_fn="NotImplemented", refuse={0: _no_kernel("div_floor_cpu")}, triton=T.floor_divide, opmath=1)
binary("remainder", _integer_division(_remainder), _remainder_vjp, "x y", needs={"y": "x y"},
       grad_fn=_remainder_name, refuse={0: _no_kernel("remainder_cpu")},
       triton=T.Expr("_remainder({0}, {1})", cast=True))


def _fmod_vjp(g, out, x, y):
    # torch's -grad * div(x, y, rounding_mode="trunc")
    return g, -g * F.div(x, y, rounding_mode="trunc")


# C's fmod (the dividend's sign): np.fmod, and Triton's % (frem; srem on integers) with C's NaN
# for an infinite dividend (the _fmod helper)
binary("fmod", _integer_division(np.fmod), _fmod_vjp, "x y", needs={"y": "x y"},
       grad_fn=lambda a, p: "FmodBackward1" if _is_tensor(a[1]) else "FmodBackward0",
       refuse={0: _no_kernel("fmod_cpu")}, triton=T.Expr("_fmod({0}, {1})", cast=True))
# div(..., rounding_mode="floor" | "trunc"): no promotion to float, and a zero derivative
Primitive("div_rounding", "x y", _integer_division(
    lambda x, y, rounding_mode, low=None:
    _floor_divide(x, y, low) if rounding_mode == "floor" else _trunc_divide(x, y)),
          shape=_bcast_shape, dtype="promote",
          vjp=lambda g, out, x, y, rounding_mode, low=None: (_zeros_like(g), _zeros_like(g) if _is_tensor(y) else None),
          grad_fn="DivBackward2", elementwise=True, triton=T.div_rounding, opmath=1, edges="numbers")
binary("maximum", np.maximum, lambda g, out, x, y: (_max_split(g, x, y), _max_split(g, y, x)), "x y", triton=T.maximum)
binary("minimum", np.minimum, lambda g, out, x, y: (_max_split(g, y, x), _max_split(g, x, y)), "x y", triton=T.minimum)


def _max_split(g, a, b):
    # torch's rule: half the gradient each where the two are equal, none where a loses;
    # with a NaN neither wins nor loses, so the gradient (and the NaN) flows to both
    return F.where(a < b, 0, F.where(a == b, g * 0.5, g))


def _pow_kernel(x, y, whole=True, low=None):
    if low is not None:                     # a bfloat16 x ** 3 or x ** -2 (functional.pow)
        r = D.round_bfloat16
        with np.errstate(all="ignore"):
            return r(r(x * x) * x) if y == 3 else r(1 / r(x * x))
    if isinstance(y, bool):
        return x.copy() if y else np.ones_like(x)
    # numpy's pow takes a slow path for small integer exponents on negative values;
    # torch computes these by multiplication, so do we (for a Python number: a numpy scalar is a
    # 0-dim tensor's value in a compiled program, which eager's 0-dim array powers with np.power)
    if not isinstance(y, (np.ndarray, np.generic)) or y.ndim == 0 and not isinstance(x, np.ndarray):
        e = y.item() if isinstance(y, (np.ndarray, np.generic)) else y
        if e == 0 and isinstance(x, np.ndarray):
            return np.ones_like(x)         # torch's x ** 0 is 1 for every x (libm's pow gives NaN at a signaling NaN)
        if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype != np.float16:
            # (torch computes float16 ** number as float32 pow of the two, rounded once: no shortcuts)
            if e == 2:
                return x * x
            if e == 3:
                return x * x * x
            if e == 1:
                return x.copy()
            if e == 0.5:
                return np.sqrt(x)
            if e == -1:
                return 1 / x
            if e == -2:
                return 1 / (x * x)
            if e == -0.5:
                return 1 / np.sqrt(x)
    if isinstance(x, np.ndarray) and x.dtype.kind in "iu" and not isinstance(y, (np.ndarray, np.generic)) and y < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if isinstance(y, (np.ndarray, np.generic)) and y.dtype.kind in "iu" and np.any(y < 0):
        # torch's integer pow: 1 ** -n = 1, (-1) ** -n = +-1, anything else ** -n = 0. A numpy scalar
        # exponent is a 0-dim tensor (a compiled graph of one-element values runs on numpy scalars),
        # not a Python number: numpy's own power refuses it, torch computes it
        neg = y < 0
        r = np.power(x, np.where(neg, 0, y))
        # (the 1, -1 and 0 are Python ints: without the cast the result is int64 whatever x's dtype, and a
        # compiled program, which takes a kernel's array as it comes, went on with int64 values in an int32)
        return np.where(neg, np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0)), r) \
            .astype(r.dtype, copy=False)
    r = np.power(x, y)
    if whole and r.size == 1 and (r.dtype == np.float64 or r.dtype == np.float32 and
                                  not isinstance(y, (np.ndarray, np.generic))):
        return _libm_pow(x, y, r)
    return r


def _libm_pow(x, y, r):
    """One element's power as torch's CPU kernel computes it: its scalar loop calls the C
    library's pow in double (a float32 tensor's power of a Python number too), where numpy's
    vectorized pow (SVML on AVX-512 machines) differs in the last bit for ~10% of arguments.
    Adam's bias corrections (beta2 ** step) are such powers: eagerly Python's float pow,
    compiled this kernel, which must agree. (A float32 power of a float32 tensor exponent is
    powf to torch, which the double's rounding misses now and then: left to numpy, as are
    bfloat16's, which share float32's arrays.)"""
    try:
        v = math.pow(float(np.asarray(x).reshape(())), float(np.asarray(y).reshape(())))
    except (ValueError, OverflowError):
        return r                          # (0 ** -1, a negative base's fraction, overflow: IEEE's results)
    if isinstance(r, np.ndarray):
        r = r.copy()
        r.reshape(-1)[0] = v
        return r
    return r.dtype.type(v)


def _negative_integer_power(d, args):
    # torch refuses before converting the exponent (int8 ** -129 is this error, not an overflow)
    y = args[1]
    if y.__class__ is int and y < 0 and _is_tensor(args[0]):
        return RuntimeError("Integers to negative integer powers are not allowed.")
    return None


def _pow_vjp(g, out, x, y, low=None):
    # each product grouped as torch's pow_backward groups it, grad * (...): in float16 the
    # grouping changes the rounding, and y * x ** (y - 1) may overflow where g * y does not
    gx = gy = None
    if isinstance(y, bool):
        # torch's pow_backward reads a bool exponent as the double 0.0 or 1.0 but tests it against 0
        # as a bool (never equal): x ** False has the gradient g * (0.0 * x ** -1.0), -0.0 for a
        # negative x and NaN at 0 and NaN, not zeros
        gx = g * (float(y) * x ** (float(y) - 1))
    elif isinstance(y, (int, float)):
        # (y - 1 of y = -2 ** 63 is past int64: torch's exponent - 1 is a double there, -2 ** 63 again;
        # as a Python int it raised OverflowError in the backward, dtype fuzzer seed 29544)
        e = y - 1 if y.__class__ is not int or y > -2 ** 63 else float(y) - 1
        gx = _zeros_like(g) if y == 0 else g * (y * x ** e)
    elif not isinstance(x, (int, float)):
        # 0 where the exponent is 0, whatever x (torch's pow_backward_self)
        gx = F.where(y == 0, 0, g * (y * x ** (y - 1)))
    if isinstance(x, (int, float)):
        if x == 0:
            gy = g * F.where(y >= 0, 0, out * -math.inf)
        else:
            # log of a negative base (or of -inf, or nan) is nan, as torch's
            gy = g * (out * (math.log(x) if x > 0 else math.nan))
    elif not isinstance(y, (int, float)):
        # d/dy x**y = x**y log x, defined as 0 where x == 0 and y >= 0 (torch's convention); the log
        # of x cast to the result's dtype, as torch's pow_backward_exponent (an int16 or bfloat16
        # base of a float16 power: log in float16, not in float32 or bfloat16)
        safe = F.logical_and(x == 0, y >= 0)
        xo = x if x.dtype is out.dtype else F.convert(x, out.dtype)
        gy = g * F.where(safe, 0, out * F.log(F.where(safe, 1, xo)))
    return gx, gy


def _pow_name(args, params):
    Tensor = FrontEnd.Tensor
    x, y = args
    if not isinstance(y, Tensor):
        return "PowBackward0"
    return "PowBackward1" if isinstance(x, Tensor) else "PowBackward2"


# a bool exponent (x ** True, x ** False) needs no kernel: torch allows it on bool tensors. A number
# exponent is converted with torch's overflow check only for a float16 or bfloat16 base: a float32 base
# (or an integer one, promoted to float32) takes any double, x ** 1e300 is inf, 1 or 0 (IEEE pow), as
# torch's kernel, which computes float32 ** double without converting the exponent to float32
binary("pow", _pow_kernel, _pow_vjp, "x y out", grad_fn=_pow_name, needs={"x": "x y", "y": "x y out"},
       refuse={0: lambda d, args: None if isinstance(args[1], bool) else _no_kernel("pow")(d, args),
               1: _negative_integer_power}, triton=T.pow_,
       checked=((1,), "half"), chunk_impl=lambda x, y, low=None: _pow_kernel(x, y, whole=False, low=low))

for _n, _f, _t in (("eq", np.equal, "=="), ("ne", np.not_equal, "!="), ("lt", np.less, "<"),
                   ("le", np.less_equal, "<="), ("gt", np.greater, ">"), ("ge", np.greater_equal, ">=")):
    binary(_n, _f, None, "", dtype="compare", triton=T.binop(_t))
# eq_, lt_, ... in place on a float tensor that requires grad (or beside another that does): the
# comparison `c` (computed by its primitive) in self's dtype, with torch's node, whose derivative is
# zero for self and other (derivatives.yaml: zeros_like); self kept its old node, and the gradient
# flowed through the write as if nothing had been written ([6, 6, 6] where torch gives zeros)
Primitive("compare_inplace", "x c *other", lambda x, c, *other, name: c.astype(x.dtype),
          shape=lambda x, c, *other, name: tuple(c.shape), dtype=lambda args: (None, args[0]._dtype),
          vjp=lambda g, out, x, c, *other, name: (_zeros_like(g), None) + tuple(_zeros_like(g) for _ in other),
          grad_fn=lambda a, p: f"{p['name']}Backward{1 if len(a) > 2 else 0}", elementwise=True,
          triton=T.Refuse("an in-place comparison on a value that requires grad"))
for _n, _f, _t in (("logical_and", np.logical_and, "&"), ("logical_or", np.logical_or, "|"),
                   ("logical_xor", np.logical_xor, "!=")):
    binary(_n, _f, None, "", dtype="logical", triton=T.Expr(f"({{0}} != 0) {_t} ({{1}} != 0)"))
for _n, _f, _t in (("bitwise_and", np.bitwise_and, "&"), ("bitwise_or", np.bitwise_or, "|"),
                   ("bitwise_xor", np.bitwise_xor, "^")):
    binary(_n, _f, None, "", refuse={2: _no_kernel(_n + "_cpu")}, triton=T.binop(_t))



def _shift(left):
    """x << y or x >> y as torch's kernels: a shift by a negative amount or by the width or more
    gives 0 (left) or the sign (right: -1 for a negative x), where C and numpy leave it undefined."""
    def kernel(x, y):
        # a number shifted by a tensor (2 << t) shifts in the tensor's dtype, not as np.asarray's int64: eager
        # cast the result back, a compiled program kept int64 values under an int32 dtype (2 << 31 was
        # 2147483648 in an int32 tensor). A numpy scalar is a 0-dim tensor's value (a compiled
        # program's x.sum()), not a number: cast to a bool shift's dtype, x.sum() >> False was True
        y = np.asarray(y)
        x = np.asarray(x, dtype=y.dtype if not isinstance(x, (np.ndarray, np.generic)) else None)
        ok = (y >= 0) & (y < x.dtype.itemsize * 8)
        s = np.where(ok, y, 0).astype(x.dtype, copy=False)
        if left:
            return np.where(ok, np.left_shift(x, s), 0).astype(x.dtype, copy=False)
        return np.where(ok, np.right_shift(x, s), np.where(x < 0, -1, 0)).astype(x.dtype, copy=False)
    kernel.__name__ = "lshift" if left else "rshift"
    return kernel


for _n, _left in (("bitwise_left_shift", True), ("bitwise_right_shift", False)):
    _k = ("lshift" if _left else "rshift") + "_cpu"
    binary(_n, _shift(_left), None, "", refuse={0: _no_kernel(_k), 2: _no_kernel(_k)},
           triton=T.Refuse("runs its numpy kernel on the host"))

_BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _is_zero(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0 and math.copysign(1.0, v) > 0


def _where(c, x, y):
    # where(c, x, 0) (relu's and masking's backward) as a bit mask: np.where branches per
    # element and costs ~10x more on an unpredictable mask; the bits give the same values
    # (x where c, +0.0 elsewhere, NaNs and infinities kept or dropped exactly)
    if isinstance(c, np.ndarray) and c.dtype == np.bool_:
        for keep, v, zero in ((True, x, y), (False, y, x)):
            if _is_zero(zero) and isinstance(v, np.ndarray) and v.shape == c.shape and v.dtype in _BITS and v.ndim:
                ints = _BITS[v.dtype]
                m = c.astype(ints)
                if keep:
                    np.negative(m, out=m)              # 1 -> all bits set
                else:
                    np.subtract(m, 1, out=m)           # keep where c is False
                np.bitwise_and(v.view(ints), m, out=m)
                return m.view(v.dtype)
    return np.where(c, x, y)


Primitive("where", "cond x y", _where, shape=_bcast_shape, dtype="where",
          vjp=lambda g, out, c, x, y: (None, F.where(c, g, 0), F.where(c, 0, g)), saves="cond",
          grad_fn="WhereBackward0", elementwise=True, cast=(1, 2), triton=T.Expr("tl.where({0}, {1}, {2})", cast=True),
          checked=((1, 2), False), edges="numbers")
# value: a Python number or a 0-dim tensor (MaskedFillBackward1, differentiable)
Primitive("masked_fill", "x mask value", lambda x, m, v: np.where(m, np.asarray(v, x.dtype), x),
          shape=_bcast_shape, dtype=lambda args: (args[0]._dtype, args[0]._dtype), cast=(2,),
          checked=((2,), True),
          vjp=lambda g, out, x, mask, value: (F.where(mask, 0, g), None,
                                              F.sum(F.where(mask, g, 0)) if _is_tensor(value) else None),
          saves="mask", grad_fn=lambda a, p: "MaskedFillBackward1" if _is_tensor(a[2]) else "MaskedFillBackward0",
          elementwise=True, triton=T.Expr("tl.where({1}, {2}, {0})", cast=True),
          layout="c")     # torch's masked_fill fills a C-contiguous clone: x.t().masked_fill(m, 0).view(-1) works

# == reductions ==============================================================================


# float16 reductions accumulate in float32 and round once at the end, as torch's do
# (numpy adds float16 along a strided axis in float16: 10,000 ones sum to 2048). bfloat16
# is stored as float32 and accumulates in it already.
_F16 = np.dtype(np.float16)


def _acc(x):
    """x in the dtype its reduction accumulates in: float32 for float16, else its own."""
    return x.astype(np.float32) if x.dtype == _F16 else x


def _like(r, x):
    """A result computed in _acc(x)'s dtype, rounded back to x's."""
    r = np.asarray(r)
    return r.astype(x.dtype) if r.dtype != x.dtype and x.dtype == _F16 else r


def _sum_kernel(x, dims=None, keepdim=False):
    # an ndarray straight to the ufunc: np.sum's Python wrapper costs as much as a small sum
    total = np.add.reduce if x.__class__ is np.ndarray else np.sum
    if x.dtype.kind in "biu":
        return total(x, axis=_axes(x, dims), keepdims=keepdim, dtype=np.int64)
    if x.dtype == _F16:
        return total(x, axis=_axes(x, dims), keepdims=keepdim, dtype=np.float32).astype(_F16)
    return total(x, axis=_axes(x, dims), keepdims=keepdim, dtype=x.dtype)


def _mean_kernel(x, dims=None, keepdim=False):
    # torch: float32 sum, float32 division, then float16; an empty mean is nan without numpy's warnings
    ax = _axes(x, dims)
    a = _acc(x)
    if x.size:
        return _like(np.mean(a, axis=ax, keepdims=keepdim, dtype=a.dtype), x)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return _like(np.mean(a, axis=ax, keepdims=keepdim, dtype=a.dtype), x)


def _axes(x, dims):
    # torch accepts dim 0 and -1 on a 0-dim tensor; the reduction then leaves it as it is
    return S.normalize_dims(dims, x.ndim) if x.ndim else ()


def _sum_dtype(args):
    d = _first_dtype(args)
    return None, (D.int64 if not d.is_floating_point else d)


def _reduce_name(base):
    return lambda args, params: f"{base}Backward0" if params.get("dims") is None else f"{base}Backward1"


Primitive("sum", "x", _sum_kernel, shape=_reduce_shape, dtype=_sum_dtype,
          vjp=lambda g, out, x, dims=None, keepdim=False: (
              _expand_reduced(g, tuple(x.shape), _dims(x, dims), keepdim),),
          grad_fn=_reduce_name("Sum"), reduction=True, triton=T.Reduce("sum"))
Primitive("mean", "x", _mean_kernel,
          shape=_reduce_shape, dtype="same",
          vjp=lambda g, out, x, dims=None, keepdim=False: (
              _expand_reduced(g, tuple(x.shape), _dims(x, dims), keepdim) / max(_count(x, _dims(x, dims)), 1),
              ) if _count(x, _dims(x, dims)) else (_zeros_like(x) / 0,),
          grad_fn=_reduce_name("Mean"), reduction=True, triton=T.Reduce("mean"))
# mean(x, dtype=float16 or bfloat16) of another dtype, as torch's CPU kernel computes it: x cast to
# float32, summed and divided there, rounded once to `dtype` (the tracer's float32 compute dtype and
# the result's dtype; the derivative is mean's, in `dtype`). x cast to `dtype` first rounded each
# element (an int32 2147483646 became inf) and came out a step away for 4 in 10 float32 rows.
Primitive("mean_low", "x", lambda x, dims=None, keepdim=False, dtype=None: _mean_kernel(x, dims, keepdim),
          shape=lambda x, dims=None, keepdim=False, dtype=None: _reduce_shape(x, dims, keepdim),
          dtype=lambda args: (D.float32, None),
          vjp=lambda g, out, x, dims=None, keepdim=False, dtype=None: PRIMITIVES["mean"].vjp(g, out, x, dims, keepdim),
          grad_fn=_reduce_name("Mean"), reduction=True, triton=T.Reduce("mean"))


def _exclusive_products(x, dim):
    """prod_{k < i} x_k along dim, by doubling (log2 n rounds of a shifted product: ops every
    backend lowers, where a running product, cumprod, runs on the host)."""
    n = x.shape[dim]
    y = F.cat([F.ones_like(F.narrow(x, dim, 0, 1)), F.narrow(x, dim, 0, n - 1)], dim)
    k = 1
    while k < n:
        y = y * F.cat([F.ones_like(F.narrow(y, dim, 0, k)), F.narrow(y, dim, 0, n - k)], dim)
        k *= 2
    return y


def _prod_others(x, dim):
    """prod_{k != i} x_k along dim without dividing, as torch's prod_safe_zeros_backward: the
    exclusive product from the front times the one from the back."""
    n = x.shape[dim]
    if n == 0:
        return x
    back = F.flip(_exclusive_products(F.flip(x, (dim,)), dim), (dim,))
    return _exclusive_products(x, dim) * back


def _prod_vjp(g, out, x, dims=None, keepdim=False, low=None):
    # As torch's prod_backward: out / x where no element of x is 0, else (any zero in the whole
    # tensor) the product of the others along the dim (all elements for the full product),
    # found by running products, so that NaN and inf among the others reach only the elements
    # whose product holds them. (torch's full product without create_graph gives zeros outright
    # for two or more zeros; here the running products are taken then too, so that the second
    # derivative stays right.)
    d = _dims(x, dims)
    shape = tuple(x.shape)
    if not shape:
        return (g,)
    g = _expand_reduced(g, shape, d, keepdim)
    is_zero = x == 0
    outk = _expand_reduced(out if keepdim or not d else F.reshape(out, S.reduced_shape(shape, d, True)), shape, d, True)
    plain = outk / F.where(is_zero, 1, x)
    if len(d) == 1:
        others = _prod_others(x, d[0])
    else:
        rest = [i for i in range(len(shape)) if i not in d]
        perm = rest + list(d)
        xt = F.reshape(F.permute(x, perm), tuple(shape[i] for i in rest) + (-1,))
        ot = F.reshape(_prod_others(xt, len(rest)), tuple(shape[i] for i in perm))
        others = F.permute(ot, [perm.index(i) for i in range(len(shape))])
    any_zero = R("sum", is_zero, tuple(range(len(shape)))) > 0
    return (g * F.where(any_zero, others, plain),)


def _rows_last(x, ax):
    """x with the reduced axes `ax` moved to the end and flattened into one, in the order torch's
    CPU reduction visits them: its memory's (TensorIterator sorts the axes by stride; a transposed
    input's first element along a row is not its first in memory)."""
    keep = [d for d in range(x.ndim) if d not in ax]
    if len(ax) > 1:
        rank = {d: i for i, d in enumerate(iterator_order(x.shape, [(x.shape, x.strides)]))}
        ax = sorted(ax, key=lambda d: rank.get(d, -1))       # (size-1 axes: anywhere)
    xt = np.transpose(x, keep + list(ax))
    # (the row length written out: -1 cannot be told where another axis is empty)
    return xt.reshape(xt.shape[:len(keep)] + (int(np.prod([x.shape[d] for d in ax], dtype=np.int64)),))


# a float16/bfloat16 product is rounded at every step: past this many factors pairwise (log n numpy
# calls), where torch's vector lanes take their own order too
_PROD_STEPS = 256


def _prod_kernel(x, dims=None, keepdim=False, low=None):
    """The product over dims. torch multiplies float16 and bfloat16 factors in that dtype, one
    rounding per step (its reduction's scalar_t a * b), where one float32 accumulation rounded at
    the end differs: [6e-8, -0.33, -65504] in float16 is 0 in torch (6e-8 * -0.33 underflows) and
    0.00129 rounded once. float16 arrays round by themselves (numpy's half multiply); bfloat16,
    stored as float32, says so with low="bfloat16"."""
    ax = _axes(x, dims)
    if x.dtype.kind in "biu":
        return np.prod(x, axis=ax, keepdims=keepdim, dtype=np.int64)
    if x.dtype != _F16 and low is None or not ax:
        return np.prod(x, axis=ax, keepdims=keepdim, dtype=x.dtype)
    r = D.round_bfloat16 if low == "bfloat16" else (lambda a: a)
    rows = _rows_last(np.asarray(x), ax)
    with np.errstate(all="ignore"):
        if rows.shape[-1] <= _PROD_STEPS:
            acc = np.ones(rows.shape[:-1], x.dtype)
            for k in range(rows.shape[-1]):
                acc = r(acc * rows[..., k])
        else:
            while rows.shape[-1] > 1:
                if rows.shape[-1] % 2:
                    rows = np.concatenate([rows, np.ones(rows.shape[:-1] + (1,), x.dtype)], axis=-1)
                rows = r(rows[..., 0::2] * rows[..., 1::2])
            acc = rows[..., 0]
    return acc.reshape(S.reduced_shape(x.shape, ax, True)) if keepdim else acc


Primitive("prod", "x", _prod_kernel,
          shape=_reduce_shape, dtype=_sum_dtype, vjp=_prod_vjp, saves="x out", grad_fn=_reduce_name("Prod"),
          reduction=True, triton=T.Reduce("prod"))


def _evenly(g, out, x, dims, keepdim, nans=False):
    """Gradient of amax/amin (and the inf-norms): shared evenly among the elements equal to the
    result, as torch's scale_grad_by_count: (g / count) * mask, so a slice whose result is NaN
    (no element equals it) gets NaN, and the others' zeros take the sign of g / count."""
    d = _dims(x, dims)
    shape = tuple(x.shape)
    outk = out if keepdim or not d else F.reshape(out, S.reduced_shape(shape, d, True))
    mask = x == outk
    if nans:                                  # the inf-norms': a NaN counts as an extreme (torch's)
        mask = mask | F.isnan(x)
    count = R("sum", mask, d, True)
    return ((_expand_reduced(g, shape, d, keepdim) / count) * mask,)


def _evenly_all(g, out, x):
    """Gradient of max()/min() over everything, as torch's evenly_distribute_backward on the
    CPU: shared among the elements equal to the result, or among the NaNs where it is NaN;
    zero elsewhere."""
    mask = F.where(F.isnan(out), F.isnan(x), x == out)
    count = R("sum", mask, tuple(range(len(x.shape))), False)
    return (F.where(mask, g / count, 0),)


def _sign_of_zero(r, x, ax, keepdim):
    """An amax/amin result r whose zeros take the sign torch's CPU kernel gives them: the first
    zero's along the reduction (its scalar loop keeps the running value on a tie, std::max).
    numpy's reduce picks by dtype (float16 the first, float32/float64 the last): amax of
    [0., -0.] was -0.0, torch's 0.0. (A contiguous reduction long enough for torch's vector lanes
    takes their order; max()/min() over everything, torch's reduce_all, a tree across the lanes
    of the machine's vectors: numpy's pick is left there.)"""
    if x.dtype.kind != "f" or np.all(r) or not x.size:
        return r
    rows = _rows_last(np.asarray(x), ax)
    k = np.argmax(rows == 0, axis=-1)
    neg = np.signbit(np.take_along_axis(rows, k[..., None], axis=-1)[..., 0])
    if keepdim:
        neg = neg.reshape(S.reduced_shape(x.shape, ax, True))
    return np.where(r == 0, np.where(neg, x.dtype.type(-0.0), x.dtype.type(0.0)), r).astype(x.dtype, copy=False)


for _n, _f in (("amax", np.max), ("amin", np.min)):
    Primitive(_n, "x", (lambda f: lambda x, dims=None, keepdim=False: _sign_of_zero(
        f(x, axis=_axes(x, dims), keepdims=keepdim), x, _axes(x, dims), keepdim))(_f),
              shape=_reduce_shape, dtype="same",
              vjp=lambda g, out, x, dims=None, keepdim=False: _evenly(g, out, x, dims, keepdim), saves="x out",
              grad_fn=f"{_n.capitalize()}Backward0", reduction=True, triton=T.Reduce(_n[1:]))
# max()/min() over everything: torch's MaxBackward1, shared evenly among ties
for _n, _f in (("max_all", np.max), ("min_all", np.min)):
    Primitive(_n, "x", (lambda f: lambda x: f(x))(_f), shape=lambda x: (), dtype="same",
              vjp=_evenly_all, saves="x out",
              grad_fn=f"{_n[:3].capitalize()}Backward1", reduction=True, triton=T.Reduce(_n[:3]))


def _max_dim_kernel(fn_val, fn_idx):
    def k(x, dim, keepdim=False):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        idx = fn_idx(x, axis=dim, keepdims=True)
        val = np.take_along_axis(x, idx, axis=dim)
        if not keepdim:
            idx = np.squeeze(idx, axis=dim)
            val = np.squeeze(val, axis=dim)
        return val, idx.astype(np.int64)
    return k


def _max_dim_shape(x, dim, keepdim=False):
    s = S.reduced_shape(tuple(x.shape), (dim,), keepdim)
    return [(s, x.dtype), (s, D.int64)]


def _select_backward(g, x, idx, dim, keepdim):
    # the gradient of values picked by index: scattered back to where they came from
    if not x.shape:
        return g
    if not keepdim:
        g = F.unsqueeze(g, dim)
        idx = F.unsqueeze(idx, dim)
    return F.scatter(F.full(tuple(x.shape), 0, dtype=g.dtype), dim, idx, g)


for _n, _fi in (("max_dim", np.argmax), ("min_dim", np.argmin)):
    Primitive(_n, "x", _max_dim_kernel(None, _fi), shape=_max_dim_shape, dtype=_same, multi=True,
              nondiff_outputs=(1,),
              vjp=lambda g, out, x, dim, keepdim=False: (_select_backward(g[0], x, out[1], dim, keepdim),),
              saves="out", grad_fn=f"{_n[:3].capitalize()}Backward0", reduction=True, triton=T.Reduce(_n),
              torch_saved_outputs=(1,))


def _arg_kernel(f):
    def k(x, dim=None, keepdim=False):
        if dim is None or x.ndim == 0:
            return np.asarray(f(x.reshape(-1)), np.int64).reshape((1,) * x.ndim if keepdim and dim is None else ())
        return f(x, axis=dim, keepdims=keepdim).astype(np.int64)
    return k


for _n, _f in (("argmax", np.argmax), ("argmin", np.argmin)):
    Primitive(_n, "x", _arg_kernel(_f), shape=lambda x, dim=None, keepdim=False: (
        ((1,) * len(x.shape) if keepdim else ()) if dim is None else S.reduced_shape(tuple(x.shape), (dim,), keepdim)),
              dtype="int64", reduction=True, triton=T.Reduce(_n),
              refuse={0: _refuse(RuntimeError, f"{_n}(): does not support bool input")})


def _var_in(x):
    """x in the dtype torch's CPU var and std accumulate in: float64 for float32 (a float32
    variance of 1e38 whose squares overflow float32 is finite in torch), float32 for float16."""
    return x.astype(np.float64) if x.dtype == np.float32 else _acc(x)


def _var_kernel(x, dims=None, correction=1, keepdim=False):
    return np.asarray(_var_acc(_var_in(x), dims, correction, keepdim)).astype(x.dtype, copy=False)


def _var_acc(x, dims, correction, keepdim):
    ax = _axes(x, dims)
    n = math.prod(x.shape[a] for a in (range(x.ndim) if ax is None else ax))
    if n - correction > 0:
        return np.var(x, axis=ax, ddof=correction, keepdims=keepdim, dtype=x.dtype)
    # torch warns once (in var/std) and returns inf or nan; numpy's own warnings would repeat it
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(np.var(x, axis=ax, ddof=correction, keepdims=keepdim, dtype=x.dtype))


def _var_vjp(g, out, x, dims=None, correction=1, keepdim=False):
    # torch's var_backward: without a dim and no degrees of freedom, where(x == mean, nan, inf) (an inf
    # equal to its mean gives nan: x - mean == 0 took it for inf)
    d = _dims(x, dims)
    dof = _count(x, d) - correction
    gk = _expand_reduced(g, tuple(x.shape), d, keepdim)
    mean = R("mean", x, d, True)
    if (dims is None or not x.shape) and dof <= 0:
        return (gk * F.where(x == mean, math.nan, math.inf),)
    return (gk * (2.0 / dof if dof else math.inf) * (x - mean),)


def _std_vjp(g, out, x, dims=None, correction=1, keepdim=False):
    # torch's std_backward: 0 where the std is 0, then var's rule
    return _var_vjp(F.where(out == 0, 0, g / (out * 2)), None, x, dims, correction, keepdim)


Primitive("var", "x", _var_kernel, shape=_reduce_shape, dtype="same", vjp=_var_vjp, saves="x",
          grad_fn="VarBackward0", reduction=True, triton=T.Reduce("var"))
Primitive("std", "x", lambda x, dims=None, correction=1, keepdim=False: np.asarray(np.sqrt(_var_acc(
              _var_in(x), dims, correction, keepdim))).astype(x.dtype, copy=False),
          shape=_reduce_shape, dtype="same", vjp=_std_vjp, saves="x out", grad_fn="StdBackward0", reduction=True,
          triton=T.Reduce("std"))


def _logsumexp_kernel(x, dims=None, keepdim=False, low=None):
    """torch's CPU logsumexp of float16 and bfloat16 runs its ops of that dtype: amax, x - max,
    exp, a sum (in float32), log and + max, each rounded to it (float16 arrays round by
    themselves; bfloat16, stored as float32, says so with low="bfloat16"). Computed in float32
    and rounded once, a row in 7 (float16) or in 4 (bfloat16) of normal values came out a step
    away: 0.0003 where torch's is 0, inf where torch's 0 * inf is nan."""
    if (x.dtype == _F16 or low == "bfloat16") and x.size:
        r = D.round_bfloat16 if low == "bfloat16" else (lambda a: a)
        ax = _axes(x, dims)
        m = np.max(x, axis=ax, keepdims=True)
        m = np.where(np.isfinite(m), m, x.dtype.type(0))
        s = r(np.add.reduce(r(np.exp(r(x - m))), axis=ax, keepdims=True, dtype=np.float32).astype(x.dtype))
        out = r(r(np.log(s)) + m)
        return out if keepdim else np.squeeze(out, axis=ax)
    return _like(_logsumexp_acc(_acc(x), dims, keepdim), x)


def _logsumexp_acc(x, dims, keepdim):
    ax = _axes(x, dims)
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=ax, keepdims=keepdim))
    m = np.max(x, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return r if keepdim else np.squeeze(r, axis=ax)


def _logsumexp_vjp(g, out, x, dims=None, keepdim=False, low=None):
    d = _dims(x, dims)
    shape = tuple(x.shape)
    outk = out if keepdim or not d else F.reshape(out, S.reduced_shape(shape, d, True))
    return (_expand_reduced(g, shape, d, keepdim) * F.exp(x - outk),)


Primitive("logsumexp", "x", _logsumexp_kernel, shape=_reduce_shape, dtype="same", vjp=_logsumexp_vjp,
          saves="x out", grad_fn="LogsumexpBackward0", reduction=True, triton=T.Reduce("logsumexp"))


def _norm_kernel(x, p=2.0, dims=None, keepdim=False):
    return _like(_norm_acc(_acc(x), p, dims, keepdim), x)


def _norm_acc(x, p, dims, keepdim):
    ax = _axes(x, dims)
    a = np.abs(x)
    if p == 2:
        r = np.sqrt(np.sum(a * a, axis=ax, keepdims=keepdim, dtype=x.dtype))
    elif p == 1:
        r = np.sum(a, axis=ax, keepdims=keepdim, dtype=x.dtype)
    elif p == math.inf:
        r = np.max(a, axis=ax, keepdims=keepdim)
    elif p == -math.inf:
        r = np.min(a, axis=ax, keepdims=keepdim)
    elif p == 0:
        r = np.sum(a != 0, axis=ax, keepdims=keepdim).astype(x.dtype)
    else:
        r = np.power(np.sum(np.power(a, p), axis=ax, keepdims=keepdim, dtype=x.dtype), 1.0 / p)
    return np.asarray(r).astype(x.dtype, copy=False)


def _norm_vjp(g, out, x, p=2.0, dims=None, keepdim=False):
    d = _dims(x, dims)
    shape = tuple(x.shape)
    outk = out if keepdim or not d else F.reshape(out, S.reduced_shape(shape, d, True))
    gk = _expand_reduced(g, shape, d, keepdim)
    # torch's norm_backward formula by formula (0 where the norm is 0), so that its derivative is torch's too
    if p == 2:
        return (gk * F.where(outk == 0, 0, x / outk),)
    if p == 1:
        return (gk * F.sign(x),)
    if p in (math.inf, -math.inf):
        return _evenly(g, out, F.abs(x), dims, keepdim, nans=True)[0] * F.sign(x),
    if p == 0:
        return (None,)      # torch's norm_backward leaves it undefined: as if x were unused
    a = F.abs(x)
    if p < 1:
        return (F.sign(x) * F.where(x == 0, 0, a ** (p - 1)) * gk * outk ** (1 - p),)
    scaled = F.sign(x) * a ** (p - 1) if p < 2 else x * a ** (p - 2)
    return (scaled * F.where(outk == 0, 0, gk / outk ** (p - 1)),)


Primitive("norm", "x", _norm_kernel, shape=_reduce_shape, dtype="same", vjp=_norm_vjp, saves="x out",
          grad_fn="LinalgVectorNormBackward0", reduction=True, triton=T.Reduce("norm"))


def _softmax_kernel(x, dim):
    if x.dtype == _F16:                  # torch's softmax on float16 runs in float32, rounded at the end
        return _softmax_kernel(_acc(x), dim).astype(_F16)
    dim = dim if x.ndim else None
    m = np.max(x, axis=dim, keepdims=True) if x.size else 0
    e = np.exp(x - m)
    e /= np.sum(e, axis=dim, keepdims=True)
    return e


def _log_softmax_kernel(x, dim, low=None):
    """low: float16 or bfloat16 over the last dim, where torch's CPU kernel (log_softmax_lastdim)
    keeps the row's sum and its log in that dtype: (x - max) - round(log(round(sum))), in float32
    and rounded. Rounded once at the end (as its kernel of another dim computes), 767 of 6,100
    float16 values came out a step away from torch's."""
    if x.size == 0:
        return x.copy()
    if low is not None:
        r = D.round_bfloat16 if low == "bfloat16" else (lambda a: a.astype(_F16).astype(np.float32))
        s = _acc(x) - np.max(_acc(x), axis=dim, keepdims=True)
        out = s - r(np.log(r(np.sum(np.exp(s), axis=dim, keepdims=True, dtype=np.float32))))
        return out.astype(_F16) if x.dtype == _F16 else r(out)
    if x.dtype == _F16:
        return _log_softmax_kernel(_acc(x), dim).astype(_F16)
    dim = dim if x.ndim else None
    m = np.max(x, axis=dim, keepdims=True)
    s = x - m
    return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _in_float32(rule):
    """A softmax's derivative rule for float16/bfloat16 values computed in float32 and rounded
    once, as its forward kernel is (and torch's backward kernels are)."""
    def vjp(g, out, x, dim, low=None):
        dt = out.dtype
        if dt is D.float16 or dt is D.bfloat16:
            return tuple(r.to(dt) for r in rule(g.float(), out.float(), x, dim))
        return rule(g, out, x, dim)
    return vjp


Primitive("softmax", "x", _softmax_kernel, shape=_unary_shape, dtype="same",
          vjp=_in_float32(lambda g, out, x, dim: (out * (g - R("sum", g * out, (dim,), True)),)), saves="out",
          grad_fn="SoftmaxBackward0", reduction=True, triton=T.Reduce("softmax"))
Primitive("log_softmax", "x", _log_softmax_kernel, shape=_unary_shape, dtype="same",
          vjp=_in_float32(lambda g, out, x, dim: (g - F.exp(out) * R("sum", g, (dim,), True),)), saves="out",
          grad_fn="LogSoftmaxBackward0", reduction=True, triton=T.Reduce("log_softmax"))

# torch's grad_fn names of the gradients some rules compute, seen under create_graph=True
# (tanh_backward's node is TanhBackwardBackward0): the node a rule's result comes from shows
# the name; its derivative stays that of the op that computed it
DERIVATIVE_NAMES = {"tanh": "TanhBackwardBackward0", "sigmoid": "SigmoidBackwardBackward0",
                    "softmax": "SoftmaxBackwardDataBackward0", "log_softmax": "LogSoftmaxBackwardDataBackward0"}

# == shape ops (views where torch makes views) ==================================================


def _reshape_name(args, params):
    view = params.get("view", True)
    return "ReshapeAliasBackward0" if view == "alias" else "ViewBackward0" if view else "UnsafeViewBackward0"


Primitive("reshape", "x", lambda x, shape, view=True: np.reshape(x, shape), shape=lambda x, shape, view=True: tuple(shape),
          dtype="same", vjp=lambda g, out, x, shape, view=True: (F.reshape(g, tuple(x.shape)),),
          grad_fn=_reshape_name, view=True, triton=T.reshape, layout="view_c")
Primitive("permute", "x", lambda x, dims, name=None: np.transpose(x, dims),
          shape=lambda x, dims, name=None: tuple(x.shape[d] for d in dims), dtype="same",
          vjp=lambda g, out, x, dims, name=None: (F.permute(g, tuple(np.argsort(dims).tolist())),),
          grad_fn=lambda a, p: p.get("name", "PermuteBackward0"), view=True, triton=T.permute)
def _broadcast_view(x, shape):
    """x viewed at `shape` with torch's expand strides: 0 along a dimension that broadcasts a
    size 1 to another size, x's own along the others, and for a new leading dimension of size 1
    the next dimension's size times its stride. Read-only where an element repeats (some stride
    0 dimension of more than one element), else a view written through as torch's. Made directly
    (np.broadcast_to sets up an iterator first, several times the cost of a small op, and gives
    every size-1 dimension stride 0, a read-only array where nothing repeats); every error goes
    through broadcast_to."""
    if x.__class__ is np.ndarray:
        lead = len(shape) - x.ndim
        if lead >= 0 and all(n >= 0 for n in shape[:lead]):
            strides = []
            for s, n, st in zip(x.shape, shape[lead:], x.strides):
                if s == n:
                    strides.append(st)
                elif s == 1 and n >= 0:
                    strides.append(0)
                else:
                    break
            else:
                inner = (shape[lead], strides[0]) if x.ndim else (1, 0)     # (torch: a 0-dim one, stride 0)
                for n in reversed(shape[:lead]):
                    inner = (n, inner[0] * inner[1] if n == 1 else 0)
                    strides.insert(0, inner[1])
                repeats = any(st == 0 and n > 1 for st, n in zip(strides, shape))
                try:
                    if x.flags.c_contiguous:
                        v = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
                        v.flags.writeable = not repeats and x.flags.writeable
                        return v
                    return np.lib.stride_tricks.as_strided(x, shape, tuple(strides), writeable=not repeats)
                except (TypeError, ValueError):
                    pass
    return np.broadcast_to(x, shape)


Primitive("expand", "x", _broadcast_view, shape=lambda x, shape: tuple(shape),
          dtype="same", vjp=lambda g, out, x, shape: (sum_to(g, tuple(x.shape)),), grad_fn="ExpandBackward0",
          view=True, triton=T.expand)
Primitive("squeeze", "x", lambda x, dims, **_: np.squeeze(x, axis=dims),
          shape=lambda x, dims, **_: tuple(n for i, n in enumerate(x.shape) if i not in dims), dtype="same",
          vjp=lambda g, out, x, dims, **_: (F.reshape(g, tuple(x.shape)),),
          grad_fn=lambda a, p: "SqueezeBackward0" if p.get("all") else (
              "SqueezeBackward2" if p.get("multi") else "SqueezeBackward1"), view=True, triton=T.squeeze,
          layout="view_c")
Primitive("unsqueeze", "x", lambda x, dim: np.expand_dims(x, dim),
          shape=lambda x, dim: tuple(x.shape[:dim]) + (1,) + tuple(x.shape[dim:]), dtype="same",
          vjp=lambda g, out, x, dim: (F.reshape(g, tuple(x.shape)),), grad_fn="UnsqueezeBackward0", view=True,
          triton=T.unsqueeze, layout="view_c")


def sum_to(g, shape):
    """Sum a broadcast gradient back to `shape` (the autodiff pass's broadcast plumbing)."""
    gs = tuple(g.shape)
    if len(gs) == len(shape) and gs == tuple(shape):      # (ranks first: no guard on a symbolic size)
        return g
    lead = len(gs) - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and gs[i + lead] != 1)
    if dims:
        g = R("sum", g, dims, True)
    if lead or tuple(g.shape) != tuple(shape):
        g = F.reshape(g, tuple(shape))
    return g


# Indexing. A key is a tuple of: int, ("s", start, stop, step), None, Ellipsis, or ("t", k) for
# the k-th index tensor among the inputs (integer tensors; bool masks are turned into integer
# indices before they get here).

np_key = T.index_key


def _is_int_key(k):
    return isinstance(k, int) and not isinstance(k, bool)


def torch_order(key):
    """(basic key applied first or None, the rest of the key): torch's order of indexing.

    torch applies an integer index as a select (a view) before any index tensor, so in
    `x[1, :, idx]` the int does not count as an advanced index; numpy turns an int next to an
    index array into one more index array, which moves the result's dims when a slice separates
    them (`x[-1, 2, 5::3, idx]`: torch [5::3 part, idx part], numpy [idx part, 5::3 part]).
    Applying the ints first as a basic (view) key and the rest after gives torch's result."""
    if not any(_is_int_key(k) for k in key) or not any(
            isinstance(k, bool) or isinstance(k, tuple) and k[0] == "t" for k in key):
        return None, key
    pre = tuple(k if _is_int_key(k) or k is Ellipsis else slice(None) for k in key
                if k is not None and not isinstance(k, bool))
    if Ellipsis not in pre:
        pre += (Ellipsis,)                 # keeps a 0-dim result a view (numpy gives a scalar without it)
    return pre, tuple(k for k in key if not _is_int_key(k))


def _no_element_read(x, idx):
    """idx, or zeros in its place where x has no element: torch checks an index only where it
    reads or writes one (zeros(5, 0)[tensor([9])] is empty), numpy checks every entry. An
    indexed dim of size 0 still raises numpy's IndexError, as torch's."""
    if idx and not x.size and any(np.size(i) for i in idx):
        return [np.zeros(np.shape(i), dtype=np.int64) for i in idx]
    return idx


def np_index(x, key, idx):
    """x[key] with torch's semantics, the index arrays `idx` put in."""
    pre, post = torch_order(key)
    if pre is not None:
        x = x[pre]
    k = np_key(post, _no_element_read(x, idx))
    if not any(e is Ellipsis for e in k):
        k += (Ellipsis,)                   # all ints: a 0-dim view, as torch's select (numpy gives a scalar copy)
    return x[k]


def np_index_set(out, key, idx, v, accumulate=False):
    """out[key] = v (or += v, repeated indices adding up), in place, with torch's semantics."""
    pre, post = torch_order(key)
    if pre is not None:
        out = out[pre]                     # a basic key: a view that writes through
    k = np_key(post, _no_element_read(out, idx))
    if accumulate:
        np.add.at(out, k, v)
    else:
        out[k] = v


def _getitem_kernel(x, *idx, key):
    if idx and x.__class__ is np.ndarray and all(np.ndim(i) == 0 for i in idx):
        # 0-dim index tensors (a traced x[i]): eager's select, a view, in the view's layout
        # (a fresh array: the program may write its values' buffers)
        ints = [int(i) for i in idx]
        return np_index(x, tuple(ints[k[1]] if isinstance(k, tuple) and k[0] == "t" else k for k in key),
                        ()).copy(order="K")
    r = np_index(x, key, idx)
    if idx and r.__class__ is np.ndarray and not r.flags.c_contiguous:
        # an index tensor makes a new tensor, which torch lays out contiguous; numpy's puts the
        # indexed dims first in memory (x[:, idx]), so reshape or view of it copied where
        # torch's is a view (a later write to the result did not reach the reshaped one)
        r = r.copy(order="C")
    return r


def _getitem_shape(x, *idx, key):
    dummy = np.broadcast_to(np.empty((), dtype=np.int8), tuple(x.shape))
    return np_index(dummy, key, [np.zeros(tuple(i.shape), dtype=np.int64) for i in idx]).shape


def _getitem_backward_kernel(g, *idx, key, shape):
    z = np.zeros(shape, dtype=g.dtype)
    # 0-dim index tensors (a traced x[i]: eager's select) reach one position each: written, as
    # select's backward writes (accumulated into zeros, a -0.0 gradient came out 0.0)
    np_index_set(z, key, idx, g, accumulate=any(np.ndim(i) for i in idx))
    return z


def _getitem_name(args, params):
    # torch applies a key left to right and the last view it makes names the grad_fn; a slice
    # that keeps everything (("s", None, None, None)) makes none; tensor indices come last
    key = params["key"]
    if any(isinstance(k, bool) or isinstance(k, tuple) and k[0] == "t" for k in key):
        return "IndexBackward0"
    name = "AliasBackward0"
    for k in key:
        if k is None:
            name = "UnsqueezeBackward0"
        elif isinstance(k, int):
            name = "SelectBackward0"
        elif isinstance(k, tuple) and k[1:] != (None, None, None):
            name = "SliceBackward0"
    return name


def _getitem_order(arrays, params):
    """The order torch's index (TensorIterator) gives x[key] with index tensors: the input's
    strides along the dims not indexed, the index tensors' along the index's dims; between the
    two no operand tells, and C's order stands. None (C) where the key holds no index tensor."""
    x, idx = arrays[0], arrays[1:]
    if x.flags.c_contiguous and all(i.__class__ is not np.ndarray or i.flags.c_contiguous for i in idx):
        return None           # (C-contiguous operands: every operand's strides fall along the dims)
    key = params["key"]
    if not idx or all(np.ndim(i) == 0 for i in idx) or any(isinstance(k, bool) for k in key):
        return None
    asked = (x.shape, x.strides, key) + tuple((np.shape(i), getattr(i, "strides", None)) for i in idx)
    got = _GETITEM_ORDERS.get(asked, asked)
    if got is asked:
        got = _index_order(x, idx, key)
        if len(_GETITEM_ORDERS) >= 1024:
            _GETITEM_ORDERS.clear()
        _GETITEM_ORDERS[asked] = got
    return got


_GETITEM_ORDERS = {}      # _getitem_order's answers by the layouts and the key asked about: all it reads


def _index_order(x, idx, key):
    try:
        pre, post = torch_order(key)
        if pre is not None:
            x = x[pre]
        taken = sum(1 for k in post if k is not None and k is not Ellipsis)
        basic, tpos, dim = [], [], 0
        for k in post:
            if k is Ellipsis:
                basic.append(Ellipsis)
                dim += x.ndim - taken
            elif k is None:
                basic.append(None)
                dim += 1
            elif k[0] == "t":
                basic.append(slice(None))
                tpos.append((dim, k[1]))
                dim += 1
            else:
                basic.append(slice(*k[1:]))
                dim += 1
        w = x[tuple(basic)]
        b = np.broadcast_shapes(*(np.shape(idx[i]) for _, i in tpos))
        at = [p for p, _ in tpos]
        rest = [d for d in range(w.ndim) if d not in at]
        # index dims side by side stay where they are; else they go first (torch's transposeToFront)
        before = [d for d in rest if d < at[0]] if at == list(range(at[0], at[0] + len(at))) else []
        after = [d for d in rest if d not in before]
        shape = tuple(w.shape[d] for d in before) + tuple(b) + tuple(w.shape[d] for d in after)
        zb, za = (0,) * len(before), (0,) * len(after)
        operands = [(shape, tuple(w.strides[d] for d in before) + (0,) * len(b) + tuple(w.strides[d] for d in after))]
        for _, i in tpos:
            operands.append((shape, zb + np.broadcast_to(idx[i], b).strides + za))
        return iterator_order(shape, operands)
    except (TypeError, ValueError, IndexError):
        return None


Primitive("getitem", "*x idx", _getitem_kernel, shape=_getitem_shape, dtype="same", order=_getitem_order,
          vjp=lambda g, out, x, *idx, key: (F.getitem_backward(g, idx, key, tuple(x.shape)),) + (None,) * len(idx),
          saves="idx", grad_fn=_getitem_name, view=lambda params: not any(
              isinstance(k, bool) or isinstance(k, tuple) and k[0] == "t" for k in params["key"]), triton=T.getitem)
Primitive("getitem_backward", "*g idx", _getitem_backward_kernel, shape=lambda g, *i, key, shape: tuple(shape),
          dtype="same", vjp=lambda gg, out, g, *idx, key, shape: (F.getitem_prim(gg, idx, key),) + (None,) * len(idx),
          saves="idx", grad_fn=lambda a, p: "IndexPutBackward0" if any(
              isinstance(k, tuple) and k[0] == "t" for k in p["key"]) else "SliceBackwardBackward0", triton=T.index_add)


def _cat_kept(xs):
    """Positions of the inputs cat joins: torch skips 1-D empty tensors (a legacy rule)."""
    kept = [i for i, x in enumerate(xs) if not (len(x.shape) == 1 and x.shape[0] == 0)]
    return kept or [0]


def _cat_shape(*xs, dim):
    kept = [xs[i] for i in _cat_kept(xs)]
    s = list(kept[0].shape)
    s[dim] = sum(x.shape[dim] for x in kept)
    return tuple(s)


def _cat_vjp(g, out, *xs, dim):
    kept = _cat_kept(xs)
    grads, start = [], 0
    for i, x in enumerate(xs):
        if i not in kept:
            grads.append(F.full((0,), 0, dtype=g.dtype))
            continue
        n = x.shape[dim]
        key = (slice(None),) * dim + (slice(start, start + n),)
        grads.append(g[key])
        start += n
    return tuple(grads)


def _strides_like_channels_last(a):
    """A 4-d array whose suggested memory format is torch's channels_last (a sliced one too, where
    its strides still keep channels innermost), and not also C order."""
    if a.ndim != 4 or a.flags.c_contiguous or a.size == 0:
        return False
    return suggested_order(a.shape, a.strides) != tuple(k for k, n in enumerate(a.shape) if n > 1)


def _joined(join, xs, dim, shape, keeps_channels_last=True):
    """cat's and stack's result in torch's layout: C-contiguous unless every input is
    channels_last (numpy's own choice follows its inputs' strides: a transposed or
    expanded input gave a result that no view() takes, where torch's is contiguous)."""
    if keeps_channels_last and all(_strides_like_channels_last(x) for x in xs):
        return join(xs, axis=dim)
    return join(xs, axis=dim, out=np.empty(shape, np.result_type(*xs)))


def _joined_order(xs, params, cat):
    """torch's layout of cat's and stack's result: C-contiguous unless every input's suggested
    memory format is channels-last. Then cat's is channels-last; stack's (a cat of the inputs
    unsqueezed at dim) follows the unsqueezed inputs' strides, but along a new last dim, where it
    is C-contiguous."""
    if cat:
        xs = [xs[i] for i in _cat_kept(xs)]
    if not all(_strides_like_channels_last(x) for x in xs):
        return None
    dim = params["dim"]
    if cat:
        return memory_format_order(_cat_shape(*xs, dim=dim), "channels_last")
    x = xs[0]
    if dim == x.ndim:
        return None
    shape, strides = list(x.shape), list(x.strides)
    strides.insert(dim, shape[dim] * strides[dim])      # (torch's unsqueeze)
    shape.insert(dim, 1)
    return dense_order(tuple(shape), tuple(strides), shape[:dim] + [len(xs)] + shape[dim + 1:])


Primitive("cat", "*xs", lambda *xs, dim: _joined(np.concatenate, [xs[i] for i in _cat_kept(xs)], dim,
                                                   _cat_shape(*xs, dim=dim)),
          shape=_cat_shape, dtype="promote", vjp=_cat_vjp, grad_fn="CatBackward0", triton=T.cat,
          order=lambda xs, params: _joined_order(xs, params, True))
Primitive("stack", "*xs", lambda *xs, dim: _joined(np.stack, xs, dim,
                                                   tuple(xs[0].shape[:dim]) + (len(xs),) + tuple(xs[0].shape[dim:]),
                                                   dim == 0),
          shape=lambda *xs, dim: tuple(xs[0].shape[:dim]) + (len(xs),) + tuple(xs[0].shape[dim:]),
          dtype="promote", vjp=lambda g, out, *xs, dim: tuple(F.select(g, dim, i) for i in range(len(xs))),
          grad_fn="StackBackward0", triton=T.stack, order=lambda xs, params: _joined_order(xs, params, False))


def _split_kernel(x, sizes, dim, name=None):
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=dim))


def _split_shape(x, sizes, dim, name=None):
    out = []
    for n in sizes:
        s = list(x.shape)
        s[dim] = n
        out.append((tuple(s), x.dtype))
    return out


def _split_vjp(g, out, x, sizes, dim, name=None):
    parts = []
    for gi, n in zip(g, sizes):
        parts.append(gi)
    return (F.cat(parts, dim),)


def _split_pieces(x, sizes, dim, name=None):
    out, start = [], 0
    for n in sizes:
        out.append((("s", None, None, None),) * dim + (("s", start, start + n, None),))
        start += n
    return out


Primitive("split", "x", _split_kernel, shape=_split_shape, dtype="same", multi=True, vjp=_split_vjp,
          grad_fn=lambda a, p: p.get("name", "SplitWithSizesBackward0"), view=True, triton=T.split,
          pieces=_split_pieces)
def _unbind_kernel(x, dim):
    m = np.moveaxis(x, dim, 0)
    return tuple(m[i, ...] for i in range(m.shape[0]))     # views, 0-d ones too (as torch)


Primitive("unbind", "x", _unbind_kernel,
          shape=lambda x, dim: [(tuple(x.shape[:dim]) + tuple(x.shape[dim + 1:]), x.dtype)] * x.shape[dim],
          dtype="same", multi=True, vjp=lambda g, out, x, dim: (F.stack(list(g), dim),), grad_fn="UnbindBackward0",
          view=True, triton=T.unbind, pieces=lambda x, dim: [(("s", None, None, None),) * dim + (k,)
                                                              for k in range(x.shape[dim])])
Primitive("flip", "x", lambda x, dims: np.flip(x, axis=_axes(x, dims)).copy(), shape=_unary_shape, dtype="same",
          vjp=lambda g, out, x, dims: (F.flip(g, dims),), grad_fn="FlipBackward0", triton=T.flip,
          layout="operands")      # (torch's flip lays its result out as its input: x.t().flip(0) is no C array)
def _roll_order(arrays, params):
    """torch's roll, one dim after another: each allocates its result in its input's suggested
    memory format (channels-last stays so), but a shift by a multiple of the size is a
    C-contiguous clone, and so is a roll of the flattened tensor."""
    x, dims = arrays[0], params["dims"]
    if dims is None or any(x.shape[d] == 0 or s % x.shape[d] == 0 for s, d in zip(params["shifts"], dims)):
        return None
    return suggested_order(x.shape, x.strides)


Primitive("roll", "x", lambda x, shifts, dims: np.roll(x, shifts, axis=dims) if dims else np.roll(x, shifts),
          shape=_unary_shape, dtype="same",
          order=_roll_order,
          vjp=lambda g, out, x, shifts, dims: (F.roll(g, tuple(-s for s in shifts), dims or None),),
          grad_fn="RollBackward0", triton=T.roll)


def _repeat_kernel(x, sizes):
    x = x.reshape((1,) * (len(sizes) - x.ndim) + x.shape)
    return np.tile(x, sizes)


def _repeat_vjp(g, out, x, sizes):
    xs = (1,) * (len(sizes) - len(x.shape)) + tuple(x.shape)
    inter = []
    for r, n in zip(sizes, xs):
        inter += [r, n]
    g = F.reshape(g, tuple(inter))
    g = R("sum", g, tuple(range(0, 2 * len(sizes), 2)))
    return (F.reshape(g, tuple(x.shape)),)


Primitive("repeat", "x", _repeat_kernel, shape=lambda x, sizes: tuple(
    r * n for r, n in zip(sizes, (1,) * (len(sizes) - len(x.shape)) + tuple(x.shape))), dtype="same",
          vjp=_repeat_vjp, grad_fn="RepeatBackward0", triton=T.repeat)
Primitive("tril", "x", lambda x, k=0: np.tril(x, k), shape=_unary_shape, dtype="same",
          vjp=lambda g, out, x, k=0: (F.tril(g, k),), grad_fn="TrilBackward0", triton=T.tril)
Primitive("triu", "x", lambda x, k=0: np.triu(x, k), shape=_unary_shape, dtype="same",
          vjp=lambda g, out, x, k=0: (F.triu(g, k),), grad_fn="TriuBackward0", triton=T.triu)


def check_index_bounds(index, n, dim):
    """index itself, where every entry lies in [0, n) (gather and scatter take no negative
    indices in torch, nor do their compiled forms); else torch's RuntimeError."""
    if index.size:
        lo, hi = index.min(), index.max()
        if lo < 0 or hi >= n:
            raise RuntimeError(f"index {int(lo) if lo < 0 else int(hi)} is out of bounds for dimension {dim} "
                               f"with size {n}")
    return index


def _gather_kernel(x, index, dim):
    check_index_bounds(index, x.shape[dim] if x.ndim else 1, dim)
    # the index may be smaller than x in the other dims: it reads the leading block
    x = x[tuple(slice(None) if i == dim else slice(0, n) for i, n in enumerate(index.shape))]
    return np.take_along_axis(x, index, axis=dim)


def _scatter_kernel(x, index, src, dim, reduce=None):
    check_index_bounds(index, x.shape[dim] if x.ndim else 1, dim)
    out = np.array(x, copy=True)       # x may be a numpy scalar (_index_put_kernel)
    src = np.broadcast_to(np.asarray(src, dtype=x.dtype), index.shape) if np.ndim(src) == 0 else src
    if index.shape != src.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    idx = tuple(idx)
    if reduce == "add":
        np.add.at(out, idx, src)
    else:
        out[idx] = src
    return out


def _scatter_vjp(g, out, x, index, src, dim, reduce=None):
    gx = g if reduce == "add" else F.scatter(g, dim, index, 0)
    gs = F.gather(g, dim, index) if hasattr(src, "shape") else None
    return gx, None, gs


Primitive("gather", "x index", _gather_kernel, shape=lambda x, i, dim: tuple(i.shape), dtype="same",
          vjp=lambda g, out, x, index, dim: (F.scatter_add(F.full(tuple(x.shape), 0, dtype=g.dtype), dim, index, g),
                                             None),
          saves="index", grad_fn="GatherBackward0", triton=T.gather)
Primitive("scatter", "x index src", _scatter_kernel, shape=lambda x, i, s, dim, reduce=None: tuple(x.shape),
          dtype=lambda args: (args[0]._dtype, args[0]._dtype), cast=(2,), vjp=_scatter_vjp, saves="index",
          grad_fn=lambda a, p: "ScatterAddBackward0" if p.get("reduce") == "add" else (
              "ScatterBackward0" if hasattr(a[2], "shape") else "ScatterBackward1"), triton=T.Scatter("scatter"))
def check_index_select_bounds(index, shape, dim):
    """index_select's check of a concrete index against a value of `shape`, as torch's."""
    n = shape[dim] if shape else 1
    if index.size and len(shape) > 1 and not math.prod(shape) and n == 0:
        # (torch's kernel for an empty value of 2 dims or more checks the indexed dim first)
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = index.min() if index.min() < 0 else index.max()
        if len(shape) > 1 and (dim == 1 or not math.prod(shape)):
            # torch's kernel for dim 1, and for an empty value, has its own check and message
            raise RuntimeError(f"INDICES element is out of DATA bounds, id={int(bad)} axis_dim={n}")
        raise IndexError("index out of range in self")


def _index_select_kernel(x, index, dim):
    check_index_select_bounds(index, x.shape, dim)
    return np.take(x, index, axis=dim)


Primitive("index_select", "x index", _index_select_kernel,
          shape=lambda x, i, dim: tuple(x.shape[:dim]) + tuple(i.shape) + tuple(x.shape[dim + 1:]), dtype="same",
          vjp=lambda g, out, x, index, dim: (F.getitem_backward(g, (index,), (("s", None, None, None),) * dim + (("t", 0),),
                                                                 tuple(x.shape)), None),
          saves="index", grad_fn="IndexSelectBackward0", triton=T.index_select)


def _matmul_name(args, params):
    if params.get("op") == "bmm":
        return "BmmBackward0"
    a, b = args[0].ndim, args[1].ndim
    return {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4",
            (2, 2): "MmBackward0"}.get((a, b), "UnsafeViewBackward0")


def _matmul_no_bool(d, args):
    # the torch kernel a matmul of these ranks lands in, which has no bool version (and is
    # not called when there is nothing to compute)
    a, b = args[0].ndim, args[1].ndim
    if (a, b) != (1, 1) and (not args[0].shape[-1] or not S.numel(_matmul_shape(*args))):
        return None
    kernel = "bmm" if b >= 3 else ("dot" if a == 1 and b == 1 else "addmv_impl_cpu" if b == 1 else "addmm_impl_cpu_")
    return _no_kernel(kernel)(d, args)


def _matmul_shape(a, b, op=None):
    a_s, b_s = tuple(a.shape), tuple(b.shape)
    a2 = a_s if len(a_s) > 1 else (1,) + a_s
    b2 = b_s if len(b_s) > 1 else b_s + (1,)
    batch = S.broadcast_shapes(a2[:-2], b2[:-2])
    if a2[-1] != b2[-2]:
        # torch's message names the kernel these ranks go to: mv or mm (a batch folded into
        # rows), else bmm over the broadcast batch
        if len(b_s) >= 3:
            raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                               f"[{S.numel(batch)}, {a2[-1]}] but got: [{S.numel(batch)}, {b2[-2]}].")
        rows = S.numel(a2[:-1])
        if len(a_s) >= 3 and len(b_s) == 1:
            raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{a2[-1]}), vec ({b2[-2]})")
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{a2[-1]} and {b2[-2]}x{b2[-1]})")
    out = batch + (a2[-2], b2[-1])
    if len(a_s) == 1:
        out = out[:-2] + out[-1:]
    if len(b_s) == 1:
        out = out[:-1]
    return out


def _matmul_vjp(g, out, a, b, op=None):
    if a.ndim == 2 and b.ndim == 2:
        # torch's mm_mat1_backward / mm_mat2_backward: an operand laid out column by column
        # (a transposed contiguous matrix, as Linear's weight.T) gets its gradient as the
        # transpose of the product that comes out of BLAS in that layout, a contiguous weight
        # gradient. The choice is the eager tensor's layout, traced or not (ir/layout.py), so
        # compiled gradients run eager's BLAS products, bit for bit.
        ga = F.transpose(F.matmul(b, F.transpose(g, 0, 1)), 0, 1) if a._column_major() else \
            F.matmul(g, F.transpose(b, 0, 1))
        gb = F.transpose(F.matmul(F.transpose(g, 0, 1), a), 0, 1) if b._column_major() else \
            F.matmul(F.transpose(a, 0, 1), g)
        return ga, gb
    if a.ndim > 2 and b.ndim == 2:
        # a batch of rows times one matrix (Linear on a sequence): torch folds the batch into
        # the rows, one mm whose derivative is the one above (one product for the weight's
        # gradient, not one per batch element and their sum)
        rows, n = math.prod(a.shape[:-1]), b.shape[1]
        ga, gb = _matmul_vjp(F.reshape(g, (rows, n)), None, F.reshape(a, (rows, a.shape[-1])), b)
        return F.reshape(ga, tuple(a.shape)), gb
    a2 = a if a.ndim > 1 else F.unsqueeze(a, 0)
    b2 = b if b.ndim > 1 else F.unsqueeze(b, 1)
    if a.ndim == 1:
        g = F.unsqueeze(g, -2 if g.ndim else 0)
    if b.ndim == 1:
        g = F.unsqueeze(g, -1)
    ga = F.matmul(g, F.transpose(b2, -1, -2))
    gb = F.matmul(F.transpose(a2, -1, -2), g)
    if a.ndim == 1:
        ga = F.squeeze(ga, -2)
    if b.ndim == 1:
        gb = F.squeeze(gb, -1)
    return ga, gb


def matmul_reshaped(a, b):
    """The operands (positions) torch.matmul hands its kernel reshaped (folded into a matrix, or
    expanded for bmm: a view or a copy, which its node saves in their place): every operand of 3
    or more dims, a vector beside a matrix (unsqueezed) and a matrix beside a batch (transposed);
    dot, mv and mm get the others as they are. `a`, `b`: the operands, or anything with their `ndim`."""
    first = a.ndim >= 3 or a.ndim == 1 and b.ndim == 2 or a.ndim == 2 and b.ndim >= 3
    return tuple(i for i, on in enumerate((first, b.ndim >= 3)) if on)


# op="bmm": called as torch.bmm (BmmBackward0)
Primitive("matmul", "a b", lambda a, b, op=None: np.matmul(a, b), shape=_matmul_shape, dtype="promote",
          vjp=_matmul_vjp, saves="a b", grad_fn=_matmul_name, needs={"a": "b", "b": "a"},
          refuse={0: _matmul_no_bool}, triton=T.Dot(),
          # torch's vector @ matrix is x.unsqueeze(0).mm(w).squeeze_(0): mm saves the unsqueezed view
          saves_inner_view=lambda args: (0,) if args[0].ndim == 1 and args[1].ndim == 2 else ())


def _einsum_vjp(g, out, *xs, equation):
    ins, res = equation.split("->")
    specs = ins.split(",")
    grads = []
    for i, (x, full_spec) in enumerate(zip(xs, specs)):
        # a repeated index ('ii->i') reads a diagonal: the gradient of the diagonal, written back onto it
        spec = "".join(dict.fromkeys(full_spec))
        shape = tuple(x.shape[full_spec.index(c)] for c in spec)
        others = [(s, o) for j, (s, o) in enumerate(zip(specs, xs)) if j != i]
        avail = set(res) | {c for s, _ in others for c in s}
        keep = "".join(c for c in spec if c in avail)
        eq = ",".join([res] + [s for s, _ in others]) + "->" + keep
        gi = F.einsum(eq, g, *[o for _, o in others])
        if keep != spec:
            # put a size-1 axis where an index appears in this operand alone
            gi = F.reshape(gi, tuple(gi.shape[keep.index(c)] if c in keep else 1 for c in spec))
        # broadcast over the axes of size 1 (an index alone here, or of size 1 in the other
        # operands); axes where this operand was the one broadcast are summed by autodiff
        want = tuple(n if m == 1 else m for m, n in zip(gi.shape, shape))
        if tuple(gi.shape) != want:
            gi = F.expand(gi, want)
        if spec != full_spec:
            strides = [math.prod(x.shape[k + 1:]) for k in range(len(full_spec))]
            diag = tuple(sum(st for st, d in zip(strides, full_spec) if d == c) for c in spec)
            gi = F.as_strided_scatter(F.full(tuple(x.shape), 0, dtype=gi.dtype), gi, want, diag)
        grads.append(gi)
    return tuple(grads)


def _einsum_shape(*xs, equation):
    ins, res = equation.split("->")
    sizes = {}
    for spec, x in zip(ins.split(","), xs):
        for c, n in zip(spec, x.shape):
            m = sizes.get(c, n)
            if m != n and m != 1 and n != 1:
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes (original->remapped)")
            sizes[c] = n if m == 1 else m          # size 1 broadcasts to the other's, 0 too (not the larger)
    return tuple(sizes[c] for c in res)


def _einsum_triton(*xs, equation):
    """einsum for the Triton lowering (ops/lowering.py's Decompose): a repeated index in one operand
    is a diagonal (an as_strided view), an index no later operand or the result uses is summed
    out, and each further operand is contracted into the running result by one matmul over
    (shared kept indices as the batch, own indices, contracted indices), built with permute and
    reshape; a last permute puts the result's indices in order."""
    apply = FrontEnd.apply
    P = PRIMITIVES
    ins, res = equation.split("->")
    specs = ins.split(",")
    sizes = {}
    for spec, x in zip(specs, xs):
        for c, n in zip(spec, x.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
    ops = []
    for spec, x in zip(specs, xs):
        if len(set(spec)) != len(spec):              # a diagonal: strides of a repeated index add up
            strides = [1] * len(spec)
            for i in range(len(spec) - 2, -1, -1):
                strides[i] = strides[i + 1] * x.shape[i + 1]
            uniq = "".join(dict.fromkeys(spec))
            x = apply(P["as_strided"], (x,), {
                "shape": tuple(x.shape[spec.index(c)] for c in uniq),
                "strides": tuple(sum(s for s, d in zip(strides, spec) if d == c) for c in uniq), "offset": 0})
            spec = uniq
        full = tuple(sizes[c] for c in spec)
        if tuple(x.shape) != full:                   # a size-1 index broadcast against the others
            x = apply(P["expand"], (x,), {"shape": full})
        ops.append((x, spec))

    def sum_out(x, spec, keep):
        dims = tuple(i for i, c in enumerate(spec) if c not in keep)
        if not dims:
            return x, spec
        return R("sum", x, dims), "".join(c for c in spec if c in keep)

    def reshape(x, shape):
        return apply(P["reshape"], (x,), {"shape": tuple(shape)})

    def arrange(x, spec, order):
        if spec == order:
            return x
        return apply(P["permute"], (x,), {"dims": tuple(spec.index(c) for c in order)})

    if len(ops) > 1 and not all(x.dtype.is_floating_point for x, _ in ops):
        raise NotImplementedError("einsum: a contraction of integer tensors has no Triton lowering (tl.dot is "
                                  "lowered for floating point only)")
    x, spec = ops[0]
    for k in range(1, len(ops)):
        y, yspec = ops[k]
        later = set(res) | {c for _, s in ops[k + 1:] for c in s}
        x, spec = sum_out(x, spec, later | set(yspec))
        y, yspec = sum_out(y, yspec, later | set(spec))
        batch = "".join(c for c in spec if c in yspec and c in later)
        con = "".join(c for c in spec if c in yspec and c not in later)
        m = "".join(c for c in spec if c not in yspec)
        n = "".join(c for c in yspec if c not in spec)
        size = lambda s: math.prod(sizes[c] for c in s)  # noqa: E731
        lead = (size(batch),) if batch else ()
        a = reshape(arrange(x, spec, batch + m + con), lead + (size(m), size(con)))
        b = reshape(arrange(y, yspec, batch + con + n), lead + (size(con), size(n)))
        x = reshape(apply(P["matmul"], (a, b), {}), tuple(sizes[c] for c in batch + m + n))
        spec = batch + m + n
    x, spec = sum_out(x, spec, set(res))
    return arrange(x, spec, res)


def _einsum_kernel(*xs, equation):
    """np.einsum; float16 operands in float32, rounded once, as torch's half contraction (a bmm
    accumulating in float32): numpy's half einsum keeps partial sums in half precision in an order
    that follows the operands' strides, so an eager and a compiled program that lay the same values
    out differently gave gradients an ulp apart."""
    half = any(getattr(x, "dtype", None) == np.float16 for x in xs)
    if half:
        xs = [x.astype(np.float32) if getattr(x, "dtype", None) == np.float16 else x for x in xs]
    out = np.einsum(equation, *xs, optimize=len(xs) > 2)
    return out.astype(np.float16) if half else out


Primitive("einsum", "*xs", _einsum_kernel,
          shape=_einsum_shape, dtype="promote", vjp=_einsum_vjp, saves="xs", grad_fn="EinsumBackward0",
          triton=T.Decompose(_einsum_triton))

# == sources ====================================================================================
Primitive("full", "", lambda shape, value, dtype: np.full(shape, value, dtype=dtype.np),
          shape=lambda shape, value, dtype: tuple(shape), dtype=lambda args: (None, None), triton=T.full)

__all__ = ["PRIMITIVES", "Primitive", "sum_to", "np_key", "np_index", "np_index_set"]


def _index_put_kernel(x, v, *idx, key, accumulate=False):
    # an array even where x is a 0-dim value the generated code holds as a numpy scalar (a sum's
    # result), which has a copy() but no item assignment
    out = np.array(x, copy=True)
    np_index_set(out, key, idx, v, accumulate)
    return out


def _index_put_vjp(g, out, x, v, *idx, key, accumulate=False):
    gx = g if accumulate else F.index_put_prim(g, F.full((), 0, dtype=g.dtype), idx, key)
    gv = None
    if hasattr(v, "shape"):
        gv = sum_to(F.getitem_prim(g, idx, key), tuple(v.shape))
    return (gx, gv) + (None,) * len(idx)


Primitive("index_put", "*x v idx", _index_put_kernel, shape=lambda x, v, *i, key, accumulate=False: tuple(x.shape),
          dtype=lambda args: (args[0]._dtype, args[0]._dtype), cast=(1,), vjp=_index_put_vjp, saves="idx",
          grad_fn=lambda a, p: "IndexPutBackward0" if _index_put_direct(p["key"]) else "CopySlices",
          triton=T.index_put, order=lambda arrays, params: dense_order(arrays[0].shape, arrays[0].strides))
# (torch's index_put writes into self.clone(): laid out as self, dense)


def _index_put_direct(key):
    # torch writes through a view (CopySlices) unless the key is index tensors and whole-dim slices only
    return any(isinstance(k, tuple) and k[0] == "t" for k in key) and all(
        k is Ellipsis or k == ("s", None, None, None) or isinstance(k, tuple) and k[0] == "t" for k in key)


def hook_name(fn):
    """A hook as torch's messages name it: its __name__, else '<unknown>'."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else "<unknown>"


def _type_name(t):
    return ("torch.cuda." if t.is_cuda else "torch.") + D.LEGACY[t._dtype]


def check_hook_result(fn, original, result, name=None):
    """torch's checks on a tensor `result` a hook returned in place of the gradient `original`
    (a Tensor or None): a None gradient stays None, a Tensor keeps its dtype, device and size.
    Without them a hook's wrong value became the gradient (a size-3 grad of a size-2 leaf).
    Messages name the hook `name`, or the hook's own name."""
    if result is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, FrontEnd.Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if result._dtype is not original._dtype or result.is_cuda != original.is_cuda:
        raise RuntimeError(f"hook '{name or hook_name(fn)}' has changed the type of value (was "
                           f"{_type_name(original)} got {_type_name(result)})")
    if tuple(result.shape) != tuple(original.shape):
        raise RuntimeError(f"hook '{name or hook_name(fn)}' has changed the size of value")


def check_hook_results(fn, previous, result, name=None):
    """torch's checks on what a grad_fn hook returned in place of the tuple `previous`: a tuple
    of as many values, each as check_hook_result asks."""
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(previous):
        raise RuntimeError(f"hook '{name or hook_name(fn)}' has returned an incorrect number of values "
                           f"(got {len(result)}, but expected {len(previous)})")
    for o, r in zip(previous, result):
        check_hook_result(fn, o, r, name)
    return result


# The tensors a running backward program has handed to Python (hooks, custom backwards) or got
# back from it, held weakly, per thread: torch's AccumulateGrad steals a gradient for .grad
# (and later backwards add into it in place) only where nothing else holds it, so the engine
# copies a gradient whose tensor the user still holds. None outside a backward.
HANDED = threading.local()


def handed_out(*tensors):
    """Note tensors a backward program shares with Python code (see HANDED)."""
    seen = getattr(HANDED, "tensors", None)
    if seen is not None:
        seen.extend(weakref.ref(t) for t in tensors if t is not None)


def _call_hooks_kernel(g, fns, dtype=None, none=False):
    if none:                           # hooks of an output no gradient reached: they see None
        _call_hooks_eager(None, fns)
        return g
    Tensor = FrontEnd.Tensor
    t = None
    if g is not None:                  # an undefined gradient: hooks see None (as torch's)
        a = np.asarray(g)
        t = Tensor._make(a, dtype if dtype is not None and dtype.np == a.dtype else D.from_numpy_dtype(a.dtype))
        handed_out(t)
    t = _call_hooks_eager(t, fns)
    if t is None:
        return None
    handed_out(t)
    return t._data


def _call_hooks_eager(g, fns, dtype=None, none=False):
    """The hooks under create_graph=True: run on the gradient tensor itself, so that what they
    compute (a hook's `g * 3`) is recorded and differentiated again, as torch's are. With
    `none`: the hooks are given None (an output no gradient reached) and `g` passes through."""
    if none:
        _call_hooks_eager(None, fns)
        return g
    Tensor = FrontEnd.Tensor
    if g is not None and not isinstance(g, Tensor):
        a = np.asarray(g)
        g = Tensor._make(a, dtype if dtype is not None and dtype.np == a.dtype else D.from_numpy_dtype(a.dtype))
    first = id(g)
    held = sys.getrefcount(g)            # (the references the engine holds to it)
    for fn in fns:
        if fn.__class__ is GradStep:
            # the engine's own step (retain_grad, AccumulateGrad): it may take the gradient
            # over where nothing but the engine holds it, as torch's steals it at use_count 1
            r = None
            shared = sys.getrefcount(g) > (held if id(g) == first else 2)
            fn(g, shared)
            continue
        r = fn(g)
        if r is not None:
            check_hook_result(fn, g, r)
            g = r
    return g


class GradStep:
    """A step of the engine run among a tensor's hooks (after them): fn(grad, shared) -> None,
    `shared` where something besides the engine holds the gradient (called alone: shared)."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, g, shared=True):
        self.fn(g, shared)


# A tensor's hooks, run on its gradient at backward time. The callables are an input bound
# at each run (hooks may change between runs of one cached program).
Primitive("call_hooks", "g fns", _call_hooks_kernel, shape=lambda g, fns, dtype=None, none=False: tuple(g.shape),
          dtype="same", eager=_call_hooks_eager, vjp=lambda gg, out, g, fns, dtype=None, none=False: (gg, None),
          grad_fn="HookBackward0",
          triton=T.Refuse("tensor hooks call Python at backward time"))


# == in-place writes through views ================================================================
# A view is described, as torch's autograd does, by (shape, strides, offset) in elements of its
# base's contiguous storage. An in-place op on a view records the base's new value as
# as_strided_scatter(old base, result) ("CopySlices") and the view as as_strided of it.

def _strided(flat, shape, strides, offset):
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:], shape, tuple(s * item for s in strides))


def _self_overlapping(shape, strides):
    """Whether two elements of a view of `shape` and element `strides` share memory: the dims of
    more than one element, by their stride, must each step over all the smaller ones."""
    extent = 1
    for st, n in sorted((abs(st), n) for st, n in zip(strides, shape) if n > 1):
        if st < extent:
            return True
        extent += st * (n - 1)
    return False


def _as_strided_kernel(x, shape, strides, offset):
    out = _strided(np.ascontiguousarray(x).reshape(-1), shape, strides, offset)
    if out.flags.writeable and _self_overlapping(shape, strides):
        # read-only where elements share memory, as unfold's overlapping windows: an in-place op
        # through it raises torch's error for an expanded tensor, where torch's own result
        # depends on the order of its writes (as_strided((3, 3), (1, 1)).mul_(2) multiplies the
        # middle element three times); a fill of one number still writes (torch's value)
        out.flags.writeable = False
    return out


def _as_strided_scatter_kernel(x, src, shape, strides, offset):
    out = np.array(x, order="C", copy=True)
    _strided(out.reshape(-1), shape, strides, offset)[...] = src
    return out


def _as_strided_vjp(g, out, x, shape, strides, offset):
    # each element of x gets the sum of the gradients of the view's elements that are it: a
    # scatter where no two are (as torch's AsStridedBackward0), an accumulating one where windows
    # overlap (a view of unfold's regenerated after an in-place op)
    pos = np.full(tuple(shape), offset, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape((-1,) + (1,) * (len(shape) - d - 1))
    if len(np.unique(pos)) == pos.size:
        return (F.as_strided_scatter(F.full(tuple(x.shape), 0, dtype=g.dtype), g, shape, strides, offset),)
    flat = F.full((math.prod(x.shape),), 0, dtype=g.dtype)
    flat = F.index_put(flat, (F.tensor(pos.reshape(-1)),), F.reshape(g, (-1,)), True)
    return (F.reshape(flat, tuple(x.shape)),)


Primitive("as_strided", "x", _as_strided_kernel, shape=lambda x, shape, strides, offset: tuple(shape),
          dtype="same", view=True, grad_fn="AsStridedBackward0", vjp=_as_strided_vjp, triton=T.as_strided)
Primitive("as_strided_scatter", "x src", _as_strided_scatter_kernel,
          shape=lambda x, src, shape, strides, offset: tuple(x.shape), dtype="same", cast=(1,),
          grad_fn="CopySlices",
          vjp=lambda g, out, x, src, shape, strides, offset: (
              F.as_strided_scatter(g, F.full(tuple(shape), 0, dtype=g.dtype), shape, strides, offset),
              F.as_strided(g, shape, strides, offset)), triton=T.as_strided_scatter)


# The ops a backend runs as matrix products (BLAS on the CPU): the fusion pass and the numpy
# code generator both ask whether a program has one (its groups then run on the calling thread).
BLAS_OPS = frozenset({"matmul", "einsum", "conv2d", "conv_transpose2d", "conv2d_weight"})

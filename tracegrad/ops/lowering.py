"""Triton lowerings: what an op table entry's `triton` slot holds.

  Expr(template, cast=False)   elementwise: `template(operands, params, ctx)` gives the
                               Triton expression of one element (a format string over the
                               operands, "tl.abs({0})", is the short form); cast: its Triton
                               type may differ from the node's dtype (literals, tl.where,
                               integer helpers), so the kernel casts it
  Reduce(kind)                 a reduction over rows; `kind` picks the passes over each row
  Dot()                        matmul: a tiled tl.dot kernel, its elementwise epilogue fused
  ConvDot(kind)                a convolution as an implicit GEMM (a Dot whose operands are
                               gathered by index arithmetic), its epilogue fused
  Scatter(kind, glue=None)     writes (or atomically adds) values at indices into a copy
  Glue(fn, view=False, ...)    the launcher runs `fn(torch, device, *args, **params)`: a
                               torch view or copy, never arithmetic
  Decompose(fn)                rewritten when a graph is lowered into primitives the other
                               kinds lower (views and copies, Dot, Reduce, Expr, Scatter):
                               `fn(*args, **params)` runs on symbolic tensors traced into
                               the graph being lowered and returns the node's value (a tuple
                               for a multi-output op); it raises NotImplementedError for a
                               call it does not lower (convolutions, pooling, einsum)
  Refuse(reason)               not lowered; lowering a graph that uses it raises
                               NotImplementedError naming the op and the reason

The operands of an Expr template are Triton expressions (value names or literals, None
for an absent optional operand); ctx carries `args` (the node's arguments: value
references or constants), `in_dtypes`, `out_dtype` and `idx` (the index names of the
kernel's domain, for ops such as tril that depend on position). codegen/triton_gpu.py
reads the slot; this module imports neither triton nor torch.
"""
import math

import numpy as np

from ..ir.values import V

# Triton's names for tracegrad's dtypes
TL = {"float16": "tl.float16", "bfloat16": "tl.bfloat16", "float32": "tl.float32", "float64": "tl.float64",
      "int8": "tl.int8", "int16": "tl.int16", "int32": "tl.int32", "int64": "tl.int64", "uint8": "tl.uint8",
      "bool": "tl.int1"}


class Expr:
    """An elementwise lowering: a template for one element's expression."""
    __slots__ = ("template", "cast")

    def __init__(self, template, cast=False):
        if isinstance(template, str):
            text = template
            template = lambda a, p, c: text.format(*a)  # noqa: E731
        self.template = template
        self.cast = cast

    def __call__(self, operands, params, ctx):
        return self.template(operands, params, ctx)

    def __repr__(self):
        return "Expr(...)"


class Reduce:
    """A reduction lowering: `kind` picks the passes over each row (sum, mean, prod, max,
    min, var, std, logsumexp, norm, argmax, argmin, max_dim, min_dim, softmax, log_softmax)."""
    __slots__ = ("kind",)

    def __init__(self, kind):
        self.kind = kind

    @property
    def full_row(self):
        """The result has the input's shape (softmax), not one value per row."""
        return self.kind in ("softmax", "log_softmax")

    @property
    def by_index(self):
        """A reduction over one `dim` (argmax, max(dim), ...) rather than `dims`."""
        return self.kind in ("argmax", "argmin", "max_dim", "min_dim")

    def __repr__(self):
        return f"Reduce({self.kind!r})"


class Dot:
    """The matmul lowering: a tiled `tl.dot` kernel with fp32 accumulation."""
    __slots__ = ()

    def __repr__(self):
        return "Dot()"


class ConvDot(Dot):
    """A convolution as an implicit GEMM: a tiled `tl.dot` kernel whose operand tiles are
    gathered from the image and the kernel by index arithmetic (padding, windows, the
    transposed convolution's stride and flip are masks and offsets, never copies). `kind`:
    "forward" (conv2d), "input" (conv_transpose2d, conv2d's input gradient) or "weight"
    (conv2d_weight)."""
    __slots__ = ("kind",)

    def __init__(self, kind):
        self.kind = kind

    def __repr__(self):
        return f"ConvDot({self.kind!r})"


class Scatter:
    """A scatter lowering: one program per block of index elements. kind "scatter": write
    (or with reduce="add", atomically add) src into a copy of x; "index_add" (getitem's
    backward): add g into zeros at a key's positions; "index_put" (accumulate=True): add v
    into a copy of x at a key's positions. `glue` runs the calls that add nothing (keys with
    no index tensor, index_put without accumulate): each position is written once."""
    __slots__ = ("kind", "glue")

    def __init__(self, kind, glue=None):
        self.kind = kind
        self.glue = glue

    def __repr__(self):
        return f"Scatter({self.kind!r})"


class Glue:
    """Run by the launcher as torch views or copies: `fn(torch, device, *args, **params)`.
    view: the result aliases its input. refuse(params) -> a reason the call cannot be glue
    (it would have to compute), or None."""
    __slots__ = ("fn", "view", "refuse")

    def __init__(self, fn, view=False, refuse=None):
        self.fn = fn
        self.view = view
        self.refuse = refuse

    def refusal(self, params):
        return self.refuse(params) if self.refuse is not None else None

    def __repr__(self):
        return f"Glue({'view' if self.view else 'copy'})"


class Decompose:
    """A lowering by rewriting: `fn(*args, **params)`, called on symbolic tensors (tracing.py's
    Proxy) while the graph is lowered, builds the node's value from other primitives (through
    tracing.apply) and returns it (a tuple of values for a multi-output op). It raises
    NotImplementedError, naming the op, for a call it does not lower."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __repr__(self):
        return f"Decompose({getattr(self.fn, '__name__', '...')})"


class Refuse:
    """No Triton lowering, and why."""
    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason

    def __repr__(self):
        return f"Refuse({self.reason!r})"


# == expression templates =======================================================================

def is_float(d):
    return d is not None and d.is_floating_point


def lit(x):
    """A Python constant as Triton source."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, int):
        return int.__repr__(x)          # int's own text: a subclass's __repr__ never becomes code
    if isinstance(x, float):
        if math.isnan(x):
            return 'float("nan")'
        if math.isinf(x):
            return 'float("inf")' if x > 0 else 'float("-inf")'
        return float.__repr__(x)
    raise NotImplementedError(f"constant {x!r} of type {type(x).__name__} has no Triton literal")


def unary(fn, ints=None):
    """fn(x) on floats; `ints` is the expression for integer and bool inputs."""
    def lower(a, p, c):
        if not is_float(c.in_dtypes[0]) and ints is not None:
            return ints.format(x=a[0])
        return f"{fn}({a[0]})"
    return Expr(lower)


def binop(op):
    return Expr(lambda a, p, c: f"{a[0]} {op} {a[1]}")


def _sign(a, p, c):
    if c.in_dtypes[0].name == "bool":
        return a[0]
    return f"tl.where({a[0]} > 0, 1, tl.where({a[0]} < 0, -1, 0))"        # 0 at NaN, as torch


def _round(a, p, c):
    if not is_float(c.in_dtypes[0]):
        return a[0]
    d = p.get("decimals", 0)
    if not d:
        return f"_rint({a[0]})"
    s = lit(10.0 ** d)
    return f"_rint({a[0]} * {s}) / {s}"


def _convert(a, p, c):
    d = p["dtype"]
    if d.name == "bool":
        return f"{a[0]} != 0"
    if d.name in ("float16", "bfloat16"):     # round to the storage precision, compute in fp32
        return f"{a[0]}.to({TL[d.name]}).to(tl.float32)"
    return f"{a[0]}.to({TL[d.name]})"


def _clamp(a, p, c):
    v = a[0]
    if a[1] is not None:
        v = f"tl.where({v} < {a[1]}, {a[1]}, {v})"
    if a[2] is not None:
        v = f"tl.where({v} > {a[2]}, {a[2]}, {v})"
    return v


def _floordiv(a, p, c):
    if getattr(c.out_dtype, "name", None) in ("float16", "bfloat16"):
        # torch rounds each step of its floor division to the half type (primitives._floor_divide);
        # the kernel's _floordiv divides in float32 and rounds once (65504 // 3.98: 16448, not 16464)
        raise NotImplementedError(f"floor division of {c.out_dtype.name} tensors (torch rounds each of its steps "
                                  f"to {c.out_dtype.name}; divide in float32 and cast, or run it on the CPU)")
    return f"_floordiv({a[0]}, {a[1]})" if is_float(c.out_dtype) else f"_floordiv_int({a[0]}, {a[1]})"


def _copysign(a, p, c):
    # a number's sign is known when the kernel is written (a literal -0.0 would lose its sign
    # before Triton 3.9); a tensor's is its sign bit, -0.0 and NaN included
    if c.in_dtypes[1] is None:
        neg = math.copysign(1.0, float(c.args[1])) < 0
        return f"(tl.abs({a[0]}) * -1.0)" if neg else f"tl.abs({a[0]})"
    return f"tl.where(_signbit({a[0]}) != _signbit({a[1]}), {a[0]} * -1.0, {a[0]})"


copysign = Expr(_copysign, cast=True)


def _div_rounding(a, p, c):
    if p["rounding_mode"] == "floor":
        return _floordiv(a, p, c)
    return f"_trunc({a[0]} / {a[1]})" if is_float(c.out_dtype) else f"{a[0]} // {a[1]}"


_SMALL_POW = {2: "{x} * {x}", 3: "{x} * {x} * {x}", 4: "({x} * {x}) * ({x} * {x})", 1: "{x}",
              # pow(-inf, 0.5) is inf and pow(-0.0, 0.5) is +0.0, where sqrt gives NaN and -0.0
              0.5: "tl.where({x} == float(\"-inf\"), float(\"inf\"), tl.sqrt({x}) + 0.0)", -1: "1.0 / {x}",
              -2: "1.0 / ({x} * {x})", 0: "tl.where({x} == {x}, 1, 1)"}


def _splat(x, c):
    """The constant c as a block of x's shape and type (x * 0 + c would be NaN where x is inf
    or NaN; a literal alone is a float32 scalar, which rounds c for a float64 kernel)."""
    return f"(({x}) != ({x})).to(({x}).dtype) * 0.0 + {lit(c)}"


def _pow(a, p, c):
    x, y = c.args[0], c.args[1]
    if not isinstance(y, V):
        e = y.item() if hasattr(y, "item") else y
        if e in _SMALL_POW and (is_float(c.out_dtype) or isinstance(e, int) and e >= 0):
            return _SMALL_POW[e].format(x=a[0])
        if not is_float(c.out_dtype):
            raise NotImplementedError("pow on integer tensors with an exponent other than 0..4")
        # the helper's float64 exp and log and C's special cases (the sign of -0.0 ** odd, -inf)
        return f"_pow({a[0]}, {_splat(a[0], float(e))})"
    if not is_float(c.out_dtype):
        raise NotImplementedError("pow on integer tensors with an exponent other than 0..4")
    if not isinstance(x, V):
        b = float(x.item() if hasattr(x, "item") else x)
        return f"_pow({_splat(a[1], b)}, {a[1]})"
    return f"_pow({a[0]}, {a[1]})"


def _tri(op):
    def lower(a, p, c):
        i, j = c.idx[-2] or "0", c.idx[-1] or "0"
        return f"tl.where({j} - {i} {op} {p.get('k', 0)}, {a[0]}, 0)"
    return lower


# numpy's maximum/minimum propagate a NaN from either side (a NaN in {1} fails the
# comparison). Conditions are combined with tl.where, never `|`/`&`: Triton's interpreter
# rejects a bitwise op between a scalar's comparison and a block's
maximum = Expr("tl.where({0} != {0}, {0}, tl.where({0} > {1}, {0}, {1}))", cast=True)
minimum = Expr("tl.where({0} != {0}, {0}, tl.where({0} < {1}, {0}, {1}))", cast=True)
sign = Expr(_sign, cast=True)
round_ = Expr(_round, cast=True)
convert = Expr(_convert)
clamp = Expr(_clamp, cast=True)
floor_divide = Expr(_floordiv, cast=True)


# float32 division and square roots rounded as IEEE (and torch) round them: on a GPU Triton's
# `/` is div.full.f32 and tl.sqrt sqrt.approx.ftz.f32 (up to 2 ulp off, a subnormal's root 0);
# float64's `/` and tl.sqrt are IEEE already. Half types compute in float32 (codegen's _ctype).
def _float32(t, d):
    if d is None:
        return t + ".0" if t.lstrip("-").isdigit() else t
    return t if d.is_floating_point else f"({t}).to(tl.float32)"


def ieee_div(a, b, float64):
    """a / b as Triton code computing in float64 or float32 (the codegen's reductions use it too)."""
    return f"{a} / {b}" if float64 else f"tl.div_rn({a}, {b})"


def ieee_sqrt(x, float64):
    return f"tl.sqrt({x})" if float64 else f"tl.sqrt_rn({x})"


def _true_div(a, p, c):
    f64 = c.out_dtype.name == "float64"
    return ieee_div(a[0] if f64 else _float32(a[0], c.in_dtypes[0]), a[1] if f64 else _float32(a[1], c.in_dtypes[1]),
                    f64)


def _sqrt_rn(a, p, c):
    f64 = c.out_dtype.name == "float64"
    return ieee_sqrt(a[0] if f64 else _float32(a[0], c.in_dtypes[0]), f64)


def _rsqrt_rn(a, p, c):
    return ieee_div("1.0", _sqrt_rn(a, p, c), c.out_dtype.name == "float64")


true_div = Expr(_true_div)
sqrt = Expr(_sqrt_rn)
rsqrt = Expr(_rsqrt_rn)
div_rounding = Expr(_div_rounding, cast=True)
pow_ = Expr(_pow, cast=True)
tril = Expr(_tri("<="), cast=True)
triu = Expr(_tri(">="), cast=True)


# == glue: torch views and copies ===============================================================

def torch_dtype(torch, d):
    return {"bool": torch.bool}.get(d.name) or getattr(torch, d.name)


def index_key(key, idx):
    """An indexing key with the index arrays (numpy or torch) put in. A key is a tuple of:
    int, ("s", start, stop, step), None, Ellipsis, or ("t", k) for the k-th index array."""
    out = []
    for k in key:
        if isinstance(k, tuple):
            out.append(slice(k[1], k[2], k[3]) if k[0] == "s" else idx[k[1]])
        else:
            out.append(k)
    return tuple(out)


def has_tensor_key(key):
    return any(isinstance(k, tuple) and k[0] == "t" for k in key)


def _negative_step(p):
    if any(isinstance(k, tuple) and k[0] == "s" and k[3] is not None and k[3] < 0 for k in p["key"]):
        return "a negative slice step has no torch view"
    return None


def _cat(torch, dev, *xs, dim):
    kept = [x for x in xs if not (x.ndim == 1 and x.shape[0] == 0)] or list(xs[:1])
    shape = list(kept[0].shape)
    shape[dim] = sum(x.shape[dim] for x in kept)
    out = torch.empty(shape, dtype=kept[0].dtype, device=kept[0].device)
    start = 0
    for x in kept:
        out.narrow(dim, start, x.shape[dim]).copy_(x)
        start += x.shape[dim]
    return out


def _split(torch, dev, x, sizes, dim, name=None):
    out, start = [], 0
    for s in sizes:
        out.append(x.narrow(dim, start, s))
        start += s
    return tuple(out)


def _index_put(torch, dev, x, v, *idx, key, accumulate=False):
    out = x.clone()
    out[index_key(key, idx)] = v
    return out


def _getitem_backward(torch, dev, g, *idx, key, shape):
    out = torch.zeros(tuple(shape), dtype=g.dtype, device=g.device)
    out[index_key(key, idx)] = g
    return out


def _as_strided(torch, dev, x, shape, strides, offset):
    flat = x.contiguous().reshape(-1)
    return flat.as_strided(tuple(shape), tuple(strides), flat.storage_offset() + offset)


def _as_strided_scatter(torch, dev, x, src, shape, strides, offset):
    out = x.contiguous().clone()
    flat = out.reshape(-1)
    flat.as_strided(tuple(shape), tuple(strides), flat.storage_offset() + offset).copy_(src)
    return out


reshape = Glue(lambda torch, dev, x, shape, view=True: x.reshape(tuple(shape)), view=True)
permute = Glue(lambda torch, dev, x, dims, name=None: x.permute(tuple(dims)), view=True)
expand = Glue(lambda torch, dev, x, shape: x.expand(tuple(shape)), view=True)
squeeze = Glue(lambda torch, dev, x, dims, **_: x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in dims)),
               view=True)
unsqueeze = Glue(lambda torch, dev, x, dim: x.unsqueeze(dim), view=True)
getitem = Glue(lambda torch, dev, x, *idx, key: x[index_key(key, idx)], view=True, refuse=_negative_step)
cat = Glue(_cat)
stack = Glue(lambda torch, dev, *xs, dim: _cat(torch, dev, *[x.unsqueeze(dim) for x in xs], dim=dim))
split = Glue(_split, view=True)
unbind = Glue(lambda torch, dev, x, dim: tuple(x.unbind(dim)), view=True)
flip = Glue(lambda torch, dev, x, dims: x.flip(tuple(d % x.ndim for d in dims)) if x.ndim else x.clone())
roll = Glue(lambda torch, dev, x, shifts, dims: x.roll(tuple(shifts), tuple(dims)) if dims else x.roll(tuple(shifts)))
repeat = Glue(lambda torch, dev, x, sizes: x.repeat(tuple(sizes)))
gather = Glue(lambda torch, dev, x, index, dim: x.gather(dim, index))
index_select = Glue(lambda torch, dev, x, index, dim: x.index_select(dim, index))
full = Glue(lambda torch, dev, shape, value, dtype: torch.full(tuple(shape), value, dtype=torch_dtype(torch, dtype),
                                                               device=dev))
index_put = Scatter("index_put", glue=Glue(_index_put))
as_strided = Glue(_as_strided, view=True)
as_strided_scatter = Glue(_as_strided_scatter)
identity = Glue(lambda torch, dev, x, *rest, **p: x, view=True)
index_add = Scatter("index_add", glue=Glue(_getitem_backward, refuse=_negative_step))

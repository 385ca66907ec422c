"""Triton code generation: an IR graph becomes fused Triton kernels and a launcher.

`lower(graph)` groups the graph's ops into kernels and returns a `TritonProgram`, which
runs the whole graph (forward or backward) on torch tensors: CUDA tensors on a GPU,
CPU tensors under Triton's interpreter (`TRITON_INTERPRET=1`). torch is only the
memory carrier: buffers come from `torch.empty`, views from reshape/permute/expand/
as_strided, and copies (cat, flip, gather, ...) are glue; every arithmetic result is
computed by a generated kernel.

Kernels, one per group:
  pointwise  a chain of elementwise ops over one shape, inputs broadcast and strided
             (strides are kernel arguments, offsets computed per dimension);
  reduction  reductions over the same rows (any dimensions; a later one may reduce a
             value computed from an earlier one, as LayerNorm's variance does), with the
             elementwise ops feeding them (prologue) and those using their results
             (epilogue, per row or over the full row again) fused in; the whole row
             sits in registers when it fits in `max_row_block`, else the kernel loops
             over blocks of it, once per pass. Rows shorter than PACK_LANES are packed,
             several to a program as a 2-d [rows, block] tile. A lone reduction over
             leading dims (a bias gradient's sum over the batch) is tiled rows x
             columns instead of reading one strided column per program. A gather of one element per row
             (cross-entropy's target logit) is one more stage; sums over the rows of
             full-row values (LayerNorm's weight and bias gradients) are column sums
             of the same kernel, each program taking several rows and adding its
             partial sums atomically. A whole-tensor sum, mean, max or min longer
             than a block is split first: its trailing dims per program, then the
             partial results;
  matmul     a tiled `tl.dot` with fp32 accumulation and its elementwise epilogue
             (bias, activation, scaling) fused; float32 inputs stay IEEE unless
             set_float32_matmul_precision("high" or "medium") allows TF32;
             a convolution (conv2d, its input and weight gradients) is the same kernel
             as an implicit GEMM: its tiles are gathered from the image and the kernel
             by index arithmetic, padding and stride as load masks (no copies). A
             convolution read only through disjoint strided views (max pooling's
             window offsets), maybe after an elementwise chain (bias, relu), computes
             each view as an accumulator, the pooling its epilogue; an elementwise operand read only by convolutions and reductions
             (max pooling's gradient, through the views that lay it out) is computed
             where each loads it; the weight gradient's kernel also sums the bias
             gradient;
  scatter    scatter / scatter_add (atomic adds) into a copy of its input; indexing's
             backward and index_put(accumulate=True) with any key add at each element's
             position (repeated indices adding up). A scatter of one value per row
             (cross-entropy's one-hot gradient) is elementwise instead: a comparison of
             the position with the row's index.

Grouping is done here, over iteration domains (an elementwise chain shares one shape;
a reduction's row epilogue reads the reduced value as a per-row scalar, views such as
expand/reshape of it included); the `group` marks of passes/fuse.py (row chunks for the
numpy backend) are not read. Block sizes: a short timing of a few configs per kernel
on a GPU, cached per kernel source (kernels are generated per shape, so per shape);
under the interpreter a fixed small config. `TritonProgram.source` holds every kernel's source,
`TritonProgram.plan` the launcher's steps.

What each primitive lowers to is its op table entry's `triton` slot (an `Expr` template,
a `Reduce`/`Dot`/`Scatter` marker, `Glue` the launcher runs as a view or copy, a
`Decompose` rule that rewrites the node into other primitives before grouping (in
tracegrad/decompositions.py: rules are traced on symbolic tensors, in the front end), as
pooling (window views + an elementwise chain or a reduction; max pooling's backward an
elementwise gather where windows do not overlap, else a scatter-add) and einsum (permute/reshape + matmul) are, or a `Refuse` with its
reason: tracegrad/ops/lowering.py); this module reads the
slot and keeps no table of its own.
"""
import functools
import hashlib
import re
import importlib.util
import math
import os
import tempfile

import networkx as nx
import numpy as np

from .._dtype import get_float32_matmul_precision
from ..ir.graph import V, refs, type_str
from ..ir.printer import comment_text, safe_repr
from ..ops.lowering import (TL, ConvDot, Decompose, Dot, Expr, Glue, Reduce, Scatter, has_tensor_key, identity, index_key,
                            ieee_div, ieee_sqrt, is_float, lit, torch_dtype)
from ..ops.primitives import PRIMITIVES
from ..ops.primitives import np_index


# == per-primitive lowering ====================================================================
# Each primitive's lowering is its op table entry's `triton` slot (tracegrad/ops/lowering.py
# says what the slot may hold); nothing here is keyed by a primitive's name.

def _lowering(a):
    """The `triton` slot of a graph node's primitive."""
    prim = a.get("prim") or PRIMITIVES.get(a["op"])
    return prim.triton if prim is not None else None


def classify(name):
    """'lowered', 'glue', 'decomposed' or 'unsupported' for a primitive name (KeyError if none)."""
    low = PRIMITIVES[name].triton
    if isinstance(low, (Expr, Reduce, Dot, Scatter)):
        return "lowered"
    if isinstance(low, Glue):
        return "glue"
    if isinstance(low, Decompose):
        return "decomposed"
    return "unsupported"


# == split whole-tensor reductions ==================================================================
# A reduction of a whole multi-dimensional tensor is one row: one program would stream all of
# it (one SM for a 1M-element sum). Reduced in two stages instead, over the trailing dims that
# fit a block and then over the partial results, the first stage runs one program per leading
# index, its prologue fused as before. Sums and means of half types keep one stage (their
# partial results would round to the half type); max and min are exact either way.

_SPLIT = {"sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin", "max_all": "amax", "min_all": "amin"}
_MIN_PROGRAMS = 4


def _split_point(shape, max_row_block):
    """(k, rows): the first stage reduces dims k.. (the most trailing dims whose size fits a
    block, at least the last) of the input, seen as `rows` (a 1-d input as rows of the largest
    divisor of its size that fits a block; else None); None when it would leave fewer than
    _MIN_PROGRAMS programs."""
    if len(shape) == 1:
        n = shape[0]
        q = max((d for d in range(1, min(n, max_row_block) + 1) if n % d == 0), default=1)
        if q < 2 or n // q < _MIN_PROGRAMS:
            return None
        return 1, (n // q, q)
    k, inner = len(shape) - 1, shape[-1]
    while k > 0 and inner * shape[k - 1] <= max_row_block:
        k -= 1
        inner *= shape[k]
    if _numel(shape[:k]) < _MIN_PROGRAMS:
        return None
    return k, None


def _splittable(graph, n, max_row_block):
    a = graph[n]
    if a["op"] not in _SPLIT:
        return None
    x = refs(a["args"])[0]
    shape = tuple(graph[x]["shape"])
    if not shape or _numel(a["shape"]) != 1 or _numel(shape) <= max_row_block:
        return None
    if a["op"] in ("sum", "mean") and graph[x]["dtype"].name in ("float16", "bfloat16"):
        return None
    dims = a["params"].get("dims")
    if dims is not None and sorted(d % len(shape) for d in dims) != list(range(len(shape))):
        return None
    if len(shape) == 1 and isinstance(_lowering(graph[x]), Expr):
        # a 1-d value computed elementwise: seen as rows through a reshape, it would be
        # written out by its own kernel instead of computed in the reduction's
        return None
    return _split_point(shape, max_row_block)


def _one_index_dim(key):
    """k when key is k full slices, one index tensor, then full slices; else None."""
    full = ("s", None, None, None)
    ts = [i for i, k in enumerate(key) if isinstance(k, tuple) and k[0] == "t"]
    if len(ts) != 1 or key[ts[0]] != ("t", 0) or any(k != full for i, k in enumerate(key) if i != ts[0]):
        return None
    return ts[0]


# == types ========================================================================================

def _ctype(d):
    """The type a kernel computes a value of dtype d in: fp32 for the half types."""
    if d.name in ("float16", "bfloat16"):
        return "tl.float32"
    return TL[d.name]


_DEVICE = ["cpu"]


def _next_pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# == helpers the generated kernels call ============================================================
# Pure tl code (libdevice is not available under the interpreter); each is accurate to a
# few ulp where its naive form would cancel. A helper may call another (lower() includes it).

_HELPERS = {
    "_ieee_div": '''@triton.jit
def _ieee_div(x, y):
    # x / y rounded as IEEE division: on a GPU Triton's `/` on float32 is div.full.f32 (2 ulp);
    # float64's is IEEE already
    if (x + y).dtype == tl.float64:
        return x / y
    else:
        return tl.div_rn(x, y)
''',
    "_log1p": '''@triton.jit
def _log1p(x):
    # log(1 + x) * x / ((1 + x) - 1): the rounding of 1 + x cancels out (Goldberg)
    # (x / (u - 1) first: log(u) * x overflows for x near the largest float; log1p(inf) = inf)
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.where(u == float("inf"), u, tl.log(u) * _ieee_div(x, u - 1.0)))
''',
    "_expm1": '''@triton.jit
def _expm1(x):
    # (exp(x) - 1) * x / log(exp(x)): exact for small x where exp(x) - 1 cancels (Kahan)
    # (x / log(u) first: (u - 1) * x overflows for x near exp's limit, expm1(88) in float32;
    # where exp overflows to inf, expm1 is inf, not inf / inf)
    u = tl.exp(x)
    r = tl.where(u == 1.0, x, (u - 1.0) * _ieee_div(x, tl.log(u)))
    return tl.where(u - 1.0 == -1.0, -1.0, tl.where(u == float("inf"), u, r))
''',
    "_tanh": '''@triton.jit
def _tanh(x):
    # expm1(2x) / (expm1(2x) + 2); saturates to +-1 before exp overflows
    u = tl.exp(2.0 * x)
    e = tl.where(u == 1.0, 2.0 * x, _ieee_div((u - 1.0) * (2.0 * x), tl.log(u)))
    r = _ieee_div(e, e + 2.0)
    return tl.where(x > 20.0, 1.0, tl.where(x < -20.0, -1.0, r))
''',
    "_sigmoid": '''@triton.jit
def _sigmoid(x):
    # exp(-|x|) never overflows
    e = tl.exp(-tl.abs(x))
    return tl.where(x >= 0, _ieee_div(1.0, 1.0 + e), _ieee_div(e, 1.0 + e))
''',
    "_rint": '''@triton.jit
def _rint(x):
    # round half to even, as numpy and torch do. x - floor(x) is exact (x + 0.5 is not once
    # x needs all the mantissa's bits: 2**23 + 1 in float32); a zero keeps x's sign (-0.3 -> -0.0)
    f = tl.floor(x)
    d = x - f
    odd = (f - 2.0 * tl.floor(f * 0.5)) != 0.0
    r = tl.where(d > 0.5, f + 1.0, tl.where(d == 0.5, tl.where(odd, f + 1.0, f), f))
    return tl.where(r == 0, x * 0.0, r)
''',
    "_trunc": '''@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
''',
    "_pow": '''@triton.jit
def _pow(x, y):
    # |x| ** y from exp and log in float64 (in float32 the product y * log|x| loses the last
    # bits: 7 ** 2 came out 49.000008), rounded once to x's type; then C's pow special cases:
    # a base with its sign bit set (-0.0 too) takes the sign from an odd integer y; a finite
    # negative base with a non-integer y is NaN (-inf's power is inf or 0); (+-1) ** +-inf and
    # 1 ** y (NaN too) are 1, x ** 0 is 1. (Conditions nest in tl.where: the interpreter
    # rejects `&` between a scalar's and a block's.)
    xd = x.to(tl.float64)
    yd = y.to(tl.float64)
    ax = tl.abs(xd)
    r = tl.exp(yd * tl.log(ax))
    y_int = tl.floor(yd) == yd
    odd = tl.where(y_int, tl.abs(yd - 2.0 * tl.floor(yd * 0.5)) == 1.0, False)
    neg = tl.where(xd < 0, True, tl.where(xd == 0, 1.0 / xd < 0, False))
    r = tl.where(neg, tl.where(odd, r * -1.0, r), r)
    r = tl.where(xd < 0, tl.where(y_int, r, tl.where(ax == float("inf"), r, float("nan"))), r)
    r = tl.where(ax == 1.0, tl.where(tl.abs(yd) == float("inf"), 1.0, r), r)
    r = tl.where(xd == 1.0, 1.0, r)
    return tl.where(yd == 0, 1.0, r).to(x.dtype)
''',
    "_signbit": '''@triton.jit
def _signbit(x):
    # the sign bit, of -0.0 and a negative NaN too
    if x.dtype == tl.float64:
        return x.to(tl.int64, bitcast=True) < 0
    elif x.dtype == tl.float32:
        return x.to(tl.int32, bitcast=True) < 0
    elif x.dtype.is_floating():
        return x.to(tl.int16, bitcast=True) < 0
    else:
        return x < 0
''',
    "_hypot": '''@triton.jit
def _hypot(x, y):
    # sqrt(x^2 + y^2) without overflow or underflow: in float64 for narrower floats (rounded
    # once), scaled by the larger magnitude in float64; inf if either is infinite, NaN before it
    s = x + y                   # the operands' block and type (a zero-dim operand is a scalar)
    one = tl.where(s == s, 1.0, 1.0).to(tl.float64)   # ones of s's block (see _fmod)
    a = tl.abs(one * x)
    b = tl.abs(one * y)
    if s.dtype == tl.float64:
        m = tl.maximum(a, b)
        q = tl.minimum(a, b) / tl.where(m == 0, 1.0, m)
        r = m * tl.sqrt(1.0 + q * q)                         # float64's sqrt is IEEE
    else:
        r = tl.sqrt(a * a + b * b)
    r = tl.where((a != a) | (b != b), float("nan"), r)
    return tl.where((a == float("inf")) | (b == float("inf")), float("inf"), r).to(s.dtype)
''',
    "_logit": '''@triton.jit
def _logit(x):
    # log(x / (1 - x)), 16-bit operands in float32 rounded once, the division IEEE
    w = tl.float64 if x.dtype == tl.float64 else tl.float32
    xw = x.to(w)
    return tl.log(_ieee_div(xw, 1.0 - xw)).to(x.dtype)
''',
    "_xlogy": '''@triton.jit
def _xlogy(x, y):
    # x * log(y), 0 where x is 0 unless y is NaN; 16-bit operands in float32, rounded once
    s = x + y                   # the operands' block and type (a zero-dim operand is a scalar)
    w = tl.float64 if s.dtype == tl.float64 else tl.float32
    one = tl.where(s == s, 1.0, 1.0).to(w)
    xb = one * x
    yb = one * y
    return tl.where((xb == 0) & (yb == yb), 0.0, xb * tl.log(yb)).to(s.dtype)
''',
    "_xlog1py": '''@triton.jit
def _xlog1py(x, y):
    # x * log1p(y), 0 where x is 0 unless y is NaN, as _xlogy
    s = x + y
    w = tl.float64 if s.dtype == tl.float64 else tl.float32
    one = tl.where(s == s, 1.0, 1.0).to(w)
    xb = one * x
    yb = one * y
    return tl.where((xb == 0) & (yb == yb), 0.0, xb * _log1p(yb)).to(s.dtype)
''',
    "_pow2": '''@triton.jit
def _pow2(k):
    # 2 ** k in float64, exactly, for an integer k in [-1022, 1023]
    return ((k + 1023).to(tl.int64) << 52).to(tl.float64, bitcast=True)
''',
    "_fmod": '''@triton.jit
def _fmod(x, y):
    # C's fmod, exact: NaN for a NaN or infinite x or a zero y, x for an infinite y, and a zero
    # takes x's sign. On a GPU `%` is fma(-trunc(x / y), y, x): wrong once the quotient passes
    # 2 ** 24 (fmod(1e10, 3) gave 256, not 1) and +0.0 for fmod(-4, 2). Floats are reduced in
    # float64 by y scaled by powers of two, the quotient under 2 ** 51 a step: then n * B is
    # exact under an fma and the remainder, a multiple of B's last bit under B, too.
    s = x + y                   # the operands' block and type (a number operand is a literal)
    if s.dtype.is_floating():
        # ones of s's block; not tl.zeros_like, a jit function of triton's own that the
        # interpreter cannot call once a kernel was compiled for a GPU in the process
        one = tl.where(s == s, 1.0, 1.0).to(tl.float64)
        xd = one * x                # exact, and -0.0 keeps its sign
        a = tl.abs(xd)
        b = tl.abs(one * y)
        tiny = b < 2.2250738585072014e-308                  # a subnormal y: its exponent, scaled
        bn = tl.where(tiny, b * 1.152921504606847e18, b)
        eb = ((bn.to(tl.int64, bitcast=True) >> 52) & 2047) - tl.where(tiny, 60, 0)
        r = a
        # exponents apart by up to 2 ** 11 (float64) or 277 (float32), 50 fewer each step
        for _ in range(45 if s.dtype == tl.float64 else 7):            # a loop, not unrolled
            er = (r.to(tl.int64, bitcast=True) >> 52) & 2047
            d = tl.maximum(er - eb - 50, 0)
            d1 = d // 3
            d2 = (d - d1) // 2
            big = b * _pow2(d1) * _pow2(d2) * _pow2(d - d1 - d2)
            n = tl.floor(r / big)
            r = tl.fma(-n, big, r)
            r = tl.where(r < 0, r + big, r)
        r = tl.where(xd.to(tl.int64, bitcast=True) < 0, r * -1.0, r)
        r = tl.where(b == float("inf"), xd, r)
        bad = (a != a) | (b != b) | (a == float("inf")) | (b == 0)
        return tl.where(bad, float("nan"), r).to(s.dtype)
    else:
        return x % y
''',
    "_remainder": '''@triton.jit
def _remainder(x, y):
    # torch's remainder: fmod's result, moved by y where its sign is not y's (a zero keeps
    # fmod's sign, x's, as torch's does)
    r = _fmod(x, y)
    return tl.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
''',
    "_floordiv": '''@triton.jit
def _floordiv(x, y):
    # torch's div_floor: (x - fmod(x, y)) / y, corrected to the floor; a zero quotient takes
    # the sign of x / y, and a zero divisor gives x / y (inf or NaN)
    m = _fmod(x, y)
    d = _ieee_div(x - m, y)
    d = tl.where((m != 0) & ((m < 0) != (y < 0)), d - 1.0, d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1.0, f)
    q = _ieee_div(x, y)
    nz = tl.full([1], 0.0, tl.float32) * -1.0          # -0.0 (a -0.0 literal is +0.0 before Triton 3.9)
    z = tl.where(q < 0, nz, tl.where(_ieee_div(1.0, q) < 0, nz, 0.0))
    f = tl.where(d == 0, z, f)
    return tl.where(y == 0, q, f)
''',
    "_floordiv_int": '''@triton.jit
def _floordiv_int(x, y):
    # `//` truncates toward zero; floor division rounds toward -inf
    q = x // y
    r = x % y
    return tl.where((r != 0) & ((r < 0) != (y < 0)), q - 1, q)
''',
    "_add_combine": '''@triton.jit
def _add_combine(a, b):
    return a + b
''',
    "_mul_combine": '''@triton.jit
def _mul_combine(a, b):
    return a * b
''',
    "_max_combine": '''@triton.jit
def _max_combine(a, b):
    # a NaN wins, as in torch's max/amax (Triton's default, PropagateNan.NONE, drops it)
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_min_combine": '''@triton.jit
def _min_combine(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
}


# == grouping ======================================================================================

def _kind(a, shapes=None):
    """pointwise | reduce | matmul | scatter | glue | input; shapes(v) gives an argument's shape
    (a scatter of one value per row is elementwise when it is given)."""
    op = a["op"]
    if op == "input":
        return "input"
    if op == "proj":
        return "glue"
    low = _lowering(a)
    where = f" [{a['source']}]" if a.get("source") else ""
    if isinstance(low, Expr):
        return "pointwise"
    if isinstance(low, Reduce):
        return "reduce"
    if isinstance(low, Dot):
        if isinstance(low, ConvDot) and not a["dtype"].is_floating_point:
            raise NotImplementedError(f"{op}: {a['dtype'].name} convolutions have no Triton lowering (tl.dot is "
                                      f"lowered for floating point only){where}")
        return "matmul"
    if isinstance(low, Scatter):
        p = a["params"]
        if low.kind in ("index_add", "index_put"):
            why = low.glue.refusal(p)
            if why:
                raise NotImplementedError(f"{op}: {why}{where}")
            # getitem_backward with index tensors and index_put(accumulate=True) add, repeated
            # indices adding up: a scatter-add kernel. Other keys select each position once,
            # so a torch copy (glue) writes them.
            adds = has_tensor_key(p["key"]) if low.kind == "index_add" else bool(p.get("accumulate"))
            return "scatter" if adds else "glue"
        if p.get("reduce") not in (None, "add"):
            raise NotImplementedError(f"{op}: reduce={p['reduce']!r} has no Triton lowering{where}")
        return "pointwise" if _row_scatter(a, shapes) else "scatter"
    if isinstance(low, Glue):
        why = low.refusal(a["params"])
        if why:
            raise NotImplementedError(f"{op}: {why}; it has no Triton lowering yet{where}")
        return "glue"
    if isinstance(low, Decompose):
        raise AssertionError(f"{op}: a decomposed primitive reached grouping{where}")
    reason = low.reason if low is not None else "its op table entry has no `triton` lowering"
    raise NotImplementedError(f"{op}: no Triton lowering ({reason}){where}")


def _row_scatter(a, shapes):
    """a is a scatter of one value per row (index and src of out's shape with size 1 along
    dim, cross-entropy's one-hot gradient): out[i] = x[i] (+) src[row] where i's position
    along dim is index[row], an elementwise expression of the position (`_row_scatter_expr`)."""
    if shapes is None or a["op"] != "scatter":
        return False
    x, index, src = a["args"]
    dim = a["params"]["dim"]
    out = tuple(a["shape"])
    ishape = shapes(index)
    want = tuple(1 if d == dim % max(len(out), 1) else n for d, n in enumerate(out))
    return len(out) > 0 and ishape == want and (not isinstance(src, V) or shapes(src) == want)


def _row_scatter_expr(n):
    """The element expression of a scatter of one value per row along a dim of size n: for
    floats an index outside [0, n) (torch and the numpy backend raise; a kernel cannot) makes
    the row NaN rather than leave it silently unchanged."""
    def expr(a, p, c):
        x, index, src = a
        pos = c.idx[p["dim"] % len(c.idx)] or "0"
        hit = f"{pos} == {index}"
        out = f"tl.where({hit}, {x} + {src}, {x})" if p.get("reduce") == "add" else f"tl.where({hit}, {src}, {x})"
        if is_float(c.out_dtype):
            out = f"tl.where(({index} < 0) | ({index} >= {n}), float(\"nan\"), {out})"
        return out
    return Expr(expr, cast=True)


def _expr(a):
    """The elementwise lowering of a pointwise node."""
    low = _lowering(a)
    if isinstance(low, Scatter):
        return _row_scatter_expr(a["shape"][a["params"]["dim"] % len(a["shape"])])
    return low


def _dims(a, ndim):
    """The dimensions a reduction node reduces, sorted and non-negative."""
    p = a["params"]
    low = _lowering(a)
    if low.full_row:
        return ((p["dim"] % ndim,) if ndim else ())
    if low.by_index:
        d = p.get("dim")
        return tuple(range(ndim)) if d is None else ((d % ndim,) if ndim else ())
    d = p.get("dims")
    if d is None:
        return tuple(range(ndim))
    d = (d,) if isinstance(d, int) else tuple(d)
    return tuple(sorted(x % ndim for x in d)) if ndim else ()


class _Unit:
    """One step of the launcher: a kernel over a group of nodes, or one glue node."""

    def __init__(self, kind, root):
        self.kind = kind                 # pointwise | reduce | matmul | scatter | glue
        self.root = root
        self.members = [root]
        self.prologue = []
        self.row_epilogue = []
        self.full_epilogue = []
        self.name = None
        self.source = None
        self.reads = []
        self.writes = []
        self.rows = 1                    # rows per program of a reduction kernel


def _group(g, max_row_block=None, solo=frozenset()):
    """The graph's kernel units. A reduction or matmul in `solo` takes its prologue alone (no
    sibling stage, no epilogue): lower() regroups so when fused units would need each other."""
    nodes = g.nodes()
    kinds = {n: _kind(g[n], lambda v: tuple(g[v]["shape"])) for n in nodes}
    unit_of = {}
    units = []
    anc_cache = {}

    def ancestors(v):
        s = anc_cache.get(v)
        if s is None:
            s = anc_cache[v] = nx.ancestors(g.nx, v)
        return s

    def args(n):
        return refs(g[n]["args"])

    def safe_external(n, members):
        """n's arguments from outside `members` are computed without any member."""
        for x in args(n):
            if x not in members and any(m in ancestors(x) for m in members):
                return False
        return True

    outputs = set(o for o in g.outputs if o is not None)

    # reductions and matmuls first, each taking its prologue and epilogue; a sum over the rows
    # of another reduction's input (LayerNorm's weight gradient beside its row sums) waits
    # for that row kernel, which may take it in as column sums
    row_dims = set()
    for n in nodes:
        if kinds[n] == "reduce" and not g[n]["prim"].multi:
            s_n = tuple(g[args(n)[0]]["shape"])
            row_dims.add((s_n, _dims(g[n], len(s_n))))

    def waits(n):
        if kinds[n] != "reduce" or g[n]["prim"].multi:
            return False
        s_n = tuple(g[args(n)[0]]["shape"])
        d = _dims(g[n], len(s_n))
        rest = tuple(i for i in range(len(s_n)) if i not in d)
        trailing = tuple(range(len(s_n) - len(rest), len(s_n)))
        return bool(rest) and rest == trailing and (s_n, rest) in row_dims
    bias_sums = _bias_sums(g, kinds)
    claimed = set(v for vs in bias_sums.values() for v in vs)
    for n in [n for n in nodes if not waits(n)] + [n for n in nodes if waits(n)]:
        k = kinds[n]
        if k not in ("reduce", "matmul") or n in unit_of or n in claimed:
            continue
        u = _Unit(k, n)
        u.stages = [n]
        u.col_stages = []        # column sums of full-row values (see _emit_reduction)
        members = {n}
        a = g[n]
        u.bias_sums = bias_sums.get(n, [])
        members |= set(u.bias_sums)
        if k == "reduce":
            x = args(n)[0]
            s_in = g[x]["shape"]
            dims = _dims(a, len(s_in))
            u.s_in, u.dims = tuple(s_in), dims
            # prologue: same-shape elementwise ancestors used only inside the kernel
            cand, stack = [], [x]
            while stack:
                v = stack.pop()
                if v in unit_of or v in cand or kinds[v] != "pointwise":
                    continue
                shape = tuple(g[v]["shape"])
                # a per-row value (softmax backward's s * s) is a scalar of the row's sweep
                if shape != u.s_in and not (_row_compatible(shape, u.s_in, u.dims) and not _positional(g, g[v])):
                    continue
                cand.append(v)
                stack.extend(args(v))
            pro = set(cand)
        else:
            pro = set()
            u.s_in = None
        members |= pro
        # epilogue: elementwise users of kernel values, over the row (reduced shape) or the full shape
        full_ok = k == "reduce"
        multi = a["prim"].multi
        out_shape = tuple(a["shape"][0]) if multi else tuple(a["shape"])
        found = _conv_views(g, n, outputs, kinds) if k == "matmul" else None
        u.views, u.chain = found if found else (None, [])
        if u.views:
            # a convolution read only through disjoint strided views (max pooling's window
            # offsets), maybe after an elementwise chain: each view is one accumulator (the
            # chain computed on it), the epilogue runs over the views' shape
            members |= set(u.views) | set(u.chain)
            out_shape = tuple(g[u.views[0]]["shape"])
        row_vals = {n} if k == "reduce" and not _lowering(a).full_row else set()
        full_vals = set(pro) | ({n} if n not in row_vals else set())
        aliases = {}
        expelled = set()     # prologue values sent back out: computed by another kernel
        again = True
        while again:     # expelling a prologue value may let more epilogue in
            again = False
            changed = n not in solo       # (a solo unit takes no stage or epilogue)
            while changed:
                changed = False
                for m in nodes:
                    if m in members or m in unit_of:
                        continue
                    if any(x in u.col_stages for x in args(m)):
                        continue            # a column sum is complete only when every program is done
                    if k == "reduce" and kinds[m] == "reduce" and _col_sum(g, m, u, max_row_block) and \
                            not any(m in ancestors(v) for v in members):
                        # a sum over the rows of a full-row value (a LayerNorm weight or bias
                        # gradient): the elementwise chain it sums joins the kernel, which adds
                        # each program's column partials into the output; never a sum the
                        # kernel itself reads, directly or through other kernels (a norm of a
                        # mean over the rows): it is complete only when every program is done
                        chain = _col_chain(g, args(m)[0], kinds, unit_of, members, full_vals, outputs,
                                           u, m, safe_external)
                        if chain is not None:
                            members |= chain | {m}
                            full_vals |= chain
                            u.col_stages.append(m)
                            changed = True
                            continue
                    if multi and g[m]["op"] == "proj" and args(m)[0] == n:
                        members.add(m)
                        row_vals.add(m)
                        changed = True
                        continue
                    if k == "reduce" and _row_alias(g, m, row_vals, u):
                        aliases[m] = args(m)[0]
                        members.add(m)
                        row_vals.add(m)
                        changed = True
                        continue
                    if k == "reduce" and (kinds[m] == "reduce" and _same_rows(g, m, u) or _row_gather(g, m, u)) and \
                            args(m)[0] not in expelled and _stage_input(
                                g, args(m)[0], kinds, unit_of, members, full_vals, safe_external):
                        # a further reduction of a full-row value, or a sibling reduction of an
                        # outside value over the same rows: one more stage of this kernel
                        x = args(m)[0]
                        if x not in full_vals and kinds[x] == "pointwise":
                            members.add(x)         # computed in the sweep from outside values
                            full_vals.add(x)
                        u.stages.append(m)
                        members.add(m)
                        row_vals.add(m)
                        changed = True
                        continue
                    if kinds[m] != "pointwise":
                        continue
                    margs = args(m)
                    # only what descends from the kernel's result: a node fed by the prologue
                    # alone may feed the prologue's own inputs (through other kernels)
                    if not any(x in members and x not in pro for x in margs):
                        # ... or a full-row value of outside inputs that only the epilogue reads
                        # (softmax backward's g / s): computed in the sweep, never stored
                        users = g.users(m)
                        if m in expelled:
                            pass
                        elif full_ok and tuple(g[m]["shape"]) == u.s_in and m not in outputs and users and \
                                all(w in full_vals and w not in pro for w in users) and \
                                not any(x in members for x in margs) and safe_external(m, members):
                            members.add(m)
                            full_vals.add(m)
                            changed = True
                        # ... or a value of prologue and outside values alone (LayerNorm backward's
                        # g * w * rstd) that the kernel's other full-row values read: one more
                        # prologue value, when nothing it feeds outside the kernel comes back in
                        elif full_ok and tuple(g[m]["shape"]) == u.s_in and m not in outputs and users and \
                                all(w in members or kinds[w] == "pointwise" and tuple(g[w]["shape"]) == u.s_in
                                    for w in users) and \
                                all(x in pro or x not in members for x in margs) and \
                                safe_external(m, members) and not _positional(g, g[m]) and \
                                not any(m == y or m in ancestors(y) for v in members for y in args(v)
                                        if y not in members):
                            members.add(m)          # one more prologue value
                            pro.add(m)
                            full_vals.add(m)
                            changed = True
                        # ... or a per-row value of outside inputs that only the row epilogue
                        # reads (layer_norm backward's rstd ** 3)
                        elif k == "reduce" and n in row_vals and tuple(g[m]["shape"]) == out_shape and \
                                m not in outputs and users and all(w in row_vals for w in users) and \
                                not any(x in members for x in margs) and safe_external(m, members):
                            members.add(m)
                            row_vals.add(m)
                            changed = True
                        continue
                    shape = tuple(g[m]["shape"])
                    if k == "matmul":
                        if shape != out_shape or len(out_shape) < 2 or (
                                not isinstance(_lowering(a), ConvDot) and any(len(g[x]["shape"]) < 2 for x in args(n))):
                            continue
                        where = "full"
                    elif shape == out_shape and n in row_vals and all(
                            x not in members or x in row_vals for x in margs):
                        where = "row"
                    elif full_ok and shape == u.s_in and all(
                            x not in members or x in full_vals or x in aliases or
                            _row_compatible(g[x]["shape"], u.s_in, u.dims) for x in margs):
                        where = "full"
                    else:
                        continue
                    if not safe_external(m, members):
                        continue
                    members.add(m)
                    (row_vals if where == "row" else full_vals).add(m)
                    changed = True
            # a prologue value read outside the kernel goes back out (with what only it read)
            while True:
                bad = [v for v in pro if v in outputs or any(w not in members for w in g.users(v))]
                if not bad:
                    break
                again = True
                for v in bad:
                    pro.discard(v)
                    members.discard(v)
                    full_vals.discard(v)
                    expelled.add(v)
        # a prologue value that reads a member the kernel computes after its stages (one taken
        # in as a prologue value while that member was still outside) is a full-row epilogue
        # value: the sweep before the stages read it unset (triton_checks seed 44250)
        late = True
        while late:
            late = [v for v in pro if any(x in members and x not in pro for x in args(v))]
            pro.difference_update(late)
        order = {v: i for i, v in enumerate(nodes)}
        # an alias read outside the kernel is made again there, as a view of the stored value
        u.aliases = aliases
        u.internal = set(members)
        u.glued = []
        glued = set(v for v in aliases if v in outputs or any(w not in members for w in g.users(v)))
        stack = list(glued)
        while stack:                 # a glued view of an alias needs that alias as a view too
            src = aliases[stack.pop()]
            if src in aliases and src not in glued:
                glued.add(src)
                stack.append(src)
        for v in sorted(aliases, key=order.get):
            if v in glued:
                members.discard(v)
                glue = _Unit("glue", v)
                unit_of[v] = glue
                units.append(glue)
                u.glued.append(v)
        row_vals -= set(aliases)
        u.prologue = sorted(pro, key=order.get)
        u.row_epilogue = sorted(row_vals - set(u.stages), key=order.get)
        u.full_epilogue = sorted(full_vals - pro - {n}, key=order.get)
        u.members = sorted(members, key=order.get)
        for v in members:
            unit_of[v] = u
        units.insert(len(units) - len(u.glued), u)

    # an elementwise value a convolution reads (max pooling's gradient into the gradient
    # GEMMs) is computed where the kernel loads its operand tiles, never stored
    for v, consumers in _conv_operand_cones(g, kinds, unit_of, outputs, units).items():
        cone = consumers[0][1]
        for u, _ in consumers:
            u.cones[v] = cone
            u.internal |= set(cone.nodes)
        for m in cone.nodes:
            unit_of[m] = consumers[0][0]

    # pointwise chains: a node joins the groups of its arguments with its shape (merging
    # them) or a sibling chain of that shape
    position = {v: i for i, v in enumerate(nodes)}
    for n in nodes:
        if kinds[n] == "input" or n in unit_of:
            continue
        if kinds[n] in ("glue", "scatter"):
            u = _Unit(kinds[n], n)
            unit_of[n] = u
            units.append(u)
            continue
        shape = tuple(g[n]["shape"])
        cands = []
        for x in args(n):
            cu = unit_of.get(x)
            if cu is not None and cu.kind == "pointwise" and cu.shape == shape and cu not in cands:
                cands.append(cu)
        # a sibling: the latest chain of this shape, if n reads nothing it computes later
        sib = next((q for q in reversed(units) if q.kind == "pointwise" and q.shape == shape), None)
        tries = ([cands] if len(cands) > 1 else []) + [[c] for c in cands]
        if sib is not None and sib not in cands:
            tries.append(cands + [sib] if cands else [sib])
        joined = None
        for group in tries:
            merged = set().union(*[q.members for q in group]) | {n}
            if all(safe_external(m, merged) for m in merged):
                joined = group[0]
                for q in group[1:]:
                    joined.members.extend(q.members)
                    for m in q.members:
                        unit_of[m] = joined
                    units.remove(q)
                joined.members = sorted(set(joined.members) | {n}, key=position.get)
                break
        if joined is None:
            joined = _Unit("pointwise", n)
            joined.shape = shape
            units.append(joined)
        unit_of[n] = joined

    # launch order: units topologically sorted by the values they exchange. Each group is
    # checked alone as it is built (no path leaves it and comes back), but two groups can
    # still need each other (a reads b's value while b reads another of a's): a cycle
    # between units is broken by splitting a pointwise unit on it (see _split_cycles)
    dag = _split_cycles(g, units, unit_of, kinds)
    order = list(nx.lexicographical_topological_sort(dag))
    units = [units[i] for i in order]
    for u in units:
        mem = getattr(u, "internal", None) or set(u.members)
        glued = set(getattr(u, "glued", ()))
        reads = []
        for m in _computed(u):
            for x in args(m):
                if x not in mem and x not in reads:
                    reads.append(x)
        u.reads = reads
        u.writes = [m for m in u.members if m in outputs or any(w not in mem or w in glued for w in g.users(m))]
    return units


def _bias_sums(g, kinds):
    """{conv2d_weight node: [sums]}: the sums over (N, H, W) of a weight gradient's output
    gradient (the bias gradient), which its kernel adds up from the tiles it loads, in float32
    (float64) within one program per channel: the gradient is read once for both."""
    out = {}
    for n in g.nodes():
        low = _lowering(g[n]) if kinds[n] == "matmul" else None
        if not (isinstance(low, ConvDot) and low.kind == "weight"):
            continue
        gr = refs(g[n]["args"])[1]
        for m in g.users(gr):
            a = g[m]
            if m in out.get(n, ()) or a["op"] != "sum" or kinds[m] != "reduce" or a["prim"].multi or \
                    refs(a["args"])[0] != gr or _dims(a, 4) != (0, 2, 3) or \
                    a["dtype"] != g[gr]["dtype"] or not a["dtype"].is_floating_point or \
                    any(out.get(q) and m in out[q] for q in out):
                continue
            out.setdefault(n, []).append(m)
    return out


# the most views of one convolution computed as separate accumulators of one kernel
MAX_CONV_VIEWS = 16


def _conv_views(g, n, outputs, kinds):
    """(views, chain): the as_strided views through which alone convolution n (conv2d or
    conv_transpose2d, not a graph output) is read, when they are disjoint sub-grids of its
    output, and the elementwise chain between (a bias's relu: each node the one user of the
    one before, of the output's shape, only the last read by the views and maybe stored).
    The views share one shape (N, C, Ho, Wo) and steps (s1, s2) over rows and columns, each
    starting at a different (a, b) with a < s1, b < s2 (max pooling's window offsets where
    windows do not overlap); where the last value of the chain is stored, they cover it.
    The views in the graph's order; None when the convolution is read otherwise."""
    a = g[n]
    if not isinstance(_lowering(a), ConvDot) or _lowering(a).kind == "weight" or n in outputs:
        return None
    shape_n = tuple(a["shape"])
    chain, src = [], n
    while True:
        users = g.users(src)
        if len(users) == 1 and kinds[users[0]] == "pointwise" and tuple(g[users[0]]["shape"]) == shape_n and \
                src not in outputs and not _positional(g, g[users[0]]):
            src = users[0]
            chain.append(src)
            continue
        break
    if not users or len(users) > MAX_CONV_VIEWS or any(g[w]["op"] != "as_strided" for w in users):
        return None
    nb, c, h, w = shape_n
    shape = tuple(g[users[0]]["shape"])
    if len(shape) != 4 or shape[:2] != (nb, c):
        return None
    seen = set()
    for v in users:
        p = g[v]["params"]
        st = tuple(p["strides"])
        if tuple(p["shape"]) != shape or st[:2] != (c * h * w, h * w) or st[2] % w or st[2] <= 0 or st[3] <= 0:
            return None
        s1, s2 = st[2] // w, st[3]
        oy, ox = divmod(p["offset"], w)
        if oy >= s1 or ox >= s2 or oy + s1 * (shape[2] - 1) >= h or ox + s2 * (shape[3] - 1) >= w or \
                (oy, ox) in seen:
            return None
        seen.add((oy, ox))
    steps = {(g[v]["params"]["strides"][2], g[v]["params"]["strides"][3]) for v in users}
    if len(steps) != 1:
        return None
    s1, s2 = steps.pop()
    s1 //= w
    if src in outputs and (len(users) != s1 * s2 or shape[2] * s1 != h or shape[3] * s2 != w):
        return None                  # stored: every element of it is in one view
    order = {v: i for i, v in enumerate(g.nodes())}
    return sorted(users, key=order.get), chain


def _view_origin(g, v):
    """(row, column, row step, column step) of a view _conv_views accepted."""
    p = g[v]["params"]
    w = g[refs(g[v]["args"])[0]]["shape"][3]
    oy, ox = divmod(p["offset"], w)
    return oy, ox, p["strides"][2] // w, p["strides"][3]


def _computed(u):
    """The nodes a unit computes: its members and the operand cones a convolution computes
    as it loads its tiles (shared between the convolutions that read one operand)."""
    cones = getattr(u, "cones", None)
    if not cones:
        return u.members
    return list(u.members) + [m for c in cones.values() for m in c.nodes if m not in u.members]


class _Cone:
    """The elementwise nodes (and views of them) that compute a convolution's operand `root`
    inside the kernel, in graph order."""

    def __init__(self, root, nodes):
        self.root = root
        self.nodes = nodes


_CONE_VIEWS = ("reshape", "as_strided")


def _conv_operand_cones(g, kinds, unit_of, outputs, units):
    """{operand: [(unit, _Cone)]}: each operand of a convolution that is an elementwise chain
    (through reshape/as_strided views of it) read only by convolutions and reductions, and
    what of the chain those units compute where they load it: every node of it read only
    inside it, each seen at one index (a node reached through two different views stays
    outside)."""
    convs = {}
    for u in units:
        if u.kind == "matmul" and isinstance(_lowering(g[u.root]), ConvDot):
            u.cones = {}
            for x in refs(g[u.root]["args"])[:2]:
                convs.setdefault(x, [])
                if u not in convs[x]:
                    convs[x].append(u)
    conv_roots = {u.root for us in convs.values() for u in us}
    position = {v: i for i, v in enumerate(g.nodes())}
    out = {}
    for v in list(convs):
        # convolutions read it, and reductions may too (a bias gradient's sum): each
        # computes the chain where it loads v
        us = []
        for w in g.users(v):
            q = unit_of.get(w)
            if q is None or not (w in conv_roots or q.kind == "reduce" or w in getattr(q, "bias_sums", ())):
                us = None
                break
            if q not in us:
                us.append(q)
        if not us:
            continue
        # the candidates and the views on the path from v to each (one path per node)
        path = {}
        stack = [(v, ())]
        clash = False
        while stack:
            m, views = stack.pop()
            if m in unit_of or m in outputs or kinds[m] not in ("pointwise", "glue"):
                continue
            a = g[m]
            if kinds[m] == "glue":
                src = refs(a["args"])
                if a["op"] not in _CONE_VIEWS or len(src) != 1 or src[0] in unit_of or src[0] in outputs or \
                        not (kinds[src[0]] == "pointwise" or g[src[0]]["op"] in _CONE_VIEWS):
                    continue
            if m in path:
                clash |= path[m] != views
                continue
            path[m] = views
            if kinds[m] == "glue":
                stack.append((refs(a["args"])[0], views + (m,)))
                continue
            for x in refs(a["args"]):
                if tuple(g[x]["shape"]) == tuple(a["shape"]):
                    stack.append((x, views))
        if clash or v not in path:
            continue
        cone = set(path)
        changed = True
        while changed:             # each node read only inside the cone (v only by convolutions)
            changed = False
            for m in list(cone):
                if m != v and any(w not in cone for w in g.users(m)):
                    cone.discard(m)
                    changed = True
        if v not in cone or kinds[v] == "glue" and refs(g[v]["args"])[0] not in cone:
            continue
        # a view whose source left the cone is loaded as the view it is
        while any(kinds[m] == "glue" and refs(g[m]["args"])[0] not in cone for m in cone):
            cone = {m for m in cone if kinds[m] != "glue" or refs(g[m]["args"])[0] in cone}
        if v not in cone:
            continue
        c = _Cone(v, sorted(cone, key=position.get))
        for u in us:
            if not hasattr(u, "cones"):
                u.cones = {}
        out[v] = [(u, c) for u in us]
    return out


def _unit_dag(g, units, unit_of, kinds):
    """The units' dependency graph: an edge j -> i where unit i reads a value unit j computes."""
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(units)))
    index = {id(u): i for i, u in enumerate(units)}
    for i, u in enumerate(units):
        mem = getattr(u, "internal", None) or set(u.members)
        for m in _computed(u):
            for x in refs(g[m]["args"]):
                if x in mem or kinds[x] == "input":
                    continue
                j = index[id(unit_of[x])]
                if j != i:
                    dag.add_edge(j, i)
    return dag


class _Cycle(NotImplementedError):
    """Kernels that would need each other's values; `roots`: the fused reductions and matmuls
    on the cycle."""

    def __init__(self, roots):
        super().__init__(f"triton lowering: kernels {roots} would need each other's values")
        self.roots = roots


def _split_cycles(g, units, unit_of, kinds):
    """Split pointwise units until the unit graph is acyclic; returns it.

    For a pointwise unit U on a cycle, R is every unit reachable from U (U excluded): the
    members of U that read, directly or through other members, a value of R form one unit,
    the rest another. Nothing the second reads depends on the first, so the cycle through
    U is gone; when one side would be empty, U becomes one unit per node (a single node
    cannot be on a cycle). Reduction and matmul units are never split: a cycle made of
    them alone is a grouping bug, reported as such."""
    position = {v: i for i, v in enumerate(g.nodes())}
    while True:
        dag = _unit_dag(g, units, unit_of, kinds)
        try:
            cycle = nx.find_cycle(dag)
        except nx.NetworkXNoCycle:
            return dag
        on = [units[i] for i, _ in cycle]
        cands = [u for u in on if u.kind == "pointwise" and len(u.members) > 1]
        if not cands:
            # reduction and matmul units that took in stages or epilogues other kernels need
            # (a loss's forward sum beside its backward's seed): lower() regroups them solo
            raise _Cycle([u.root for u in on if u.kind in ("reduce", "matmul") and len(u.internal) > 1])
        u = max(cands, key=lambda q: len(q.members))
        i = units.index(u)
        reach = set()
        for j in nx.descendants(dag, i):
            if j != i:
                q = units[j]
                reach |= getattr(q, "internal", None) or set(q.members)
        late = set()
        for m in u.members:                      # members are in graph order
            if any(x in reach or x in late for x in refs(g[m]["args"])):
                late.add(m)
        early = [m for m in u.members if m not in late]
        parts = [early, sorted(late, key=position.get)] if early and late else [[m] for m in u.members]
        new = []
        for part in parts:
            q = _Unit("pointwise", part[0])
            q.shape = u.shape
            q.members = list(part)
            for m in part:
                unit_of[m] = q
            new.append(q)
        units[i:i + 1] = new


_ALIAS_VIEWS = ("expand", "reshape", "unsqueeze", "squeeze")


def _same_rows(g, m, u):
    """m is a one-output reduction over the same rows and columns as unit u's."""
    a = g[m]
    if a["prim"].multi or _lowering(a).full_row:
        return False
    x = refs(a["args"])[0]
    s_in = tuple(g[x]["shape"])
    return s_in == u.s_in and _dims(a, len(s_in)) == u.dims


def _col_sum(g, m, u, max_row_block):
    """m sums a value of unit u's input shape over u's rows (the dims u keeps), keeping u's
    columns: a float32/float64 sum or mean, the row held whole in registers."""
    a = g[m]
    if a["prim"].multi or _lowering(a).kind not in ("sum", "mean") or a["dtype"].name not in ("float32", "float64"):
        return False
    x = refs(a["args"])[0]
    s_in = u.s_in
    if tuple(g[x]["shape"]) != s_in or max_row_block is None:
        return False
    kept = tuple(d for d in range(len(s_in)) if d not in u.dims)
    N = _numel([s_in[d] for d in u.dims])
    return kept and _dims(a, len(s_in)) == kept and _next_pow2(N) <= max_row_block


def _col_chain(g, x, kinds, unit_of, members, full_vals, outputs, u, m, safe_external):
    """The elementwise nodes (of u's input shape) that compute x from the kernel's full-row
    values and outside values, used by nothing outside the kernel; None when there are none
    such (x read from another kernel, or needed outside)."""
    if x in full_vals or kinds[x] == "input":
        return set()
    chain, stack = set(), [x]
    while stack:
        v = stack.pop()
        if v in chain or v in full_vals or kinds[v] == "input":
            continue
        if v in members or v in unit_of or kinds[v] != "pointwise" or tuple(g[v]["shape"]) != u.s_in or \
                v in outputs or _positional(g, g[v]):
            if v == x:
                return None
            continue                  # an outside value, read by the kernel
        chain.add(v)
        stack.extend(refs(g[v]["args"]))
    inside = members | chain | {m}
    for v in chain:
        if any(w not in inside for w in g.users(v)) or not safe_external(v, inside):
            return None
        for y in refs(g[v]["args"]):
            if y in members and y not in full_vals:
                return None           # a per-row value: not a full-row operand here
    return chain


def _row_gather(g, m, u):
    """m gathers one element per row of a value over unit u's rows (cross-entropy's target
    logit): a further stage of u's kernel, a masked sum over the row."""
    a = g[m]
    if a["op"] != "gather" or len(u.dims) != 1:
        return False
    x, index = refs(a["args"])
    s_in = u.s_in
    want = tuple(1 if d == u.dims[0] else n for d, n in enumerate(s_in))
    return a["params"]["dim"] % len(s_in) == u.dims[0] and tuple(g[x]["shape"]) == s_in and \
        tuple(g[index]["shape"]) == want


def _stage_input(g, x, kinds, unit_of, members, full_vals, safe_external):
    """x can feed one more reduction stage of a kernel with `members`: a full-row value of
    the kernel, a graph input, or an elementwise value of outside values alone (computed
    in the kernel's sweep) that depends on nothing the kernel computes."""
    if x in full_vals:
        return True
    if kinds[x] == "input":
        return True
    return kinds[x] == "pointwise" and x not in unit_of and x not in members and \
        not any(y in members for y in refs(g[x]["args"])) and safe_external(x, members) and \
        not _positional(g, g[x])


def _positional(g, a):
    """The node's lowering reads the element's position (tril/triu): it cannot be computed
    over a domain other than its own shape."""
    class Probe(list):
        def __getitem__(self, k):
            raise LookupError
    low = _expr(a)
    exprs = [None if x is None else (str(x) if isinstance(x, V) else "0") for x in a["args"]]
    ctx = _Ctx(a["args"], [g[x]["dtype"] if isinstance(x, V) else None for x in a["args"]], a["dtype"], Probe())
    try:
        low(exprs, a["params"], ctx)
    except LookupError:
        return True
    except Exception:        # a template that needs more than the probe gives: keep it out
        return True
    return False


def _row_alias(g, m, row_vals, u):
    """m is a view of a per-row value that is still one value per row: inside a reduction
    kernel it is that row's scalar."""
    a = g[m]
    xs = refs(a["args"])
    if a["op"] not in _ALIAS_VIEWS and not (_lowering(a) is identity and len(xs) == 1):
        return False
    if len(xs) != 1 or xs[0] not in row_vals:
        return False
    src, out = tuple(g[xs[0]]["shape"]), tuple(a["shape"])
    if _lowering(a) is identity:
        return src == out
    if a["op"] == "expand":
        return _row_compatible(src, u.s_in, u.dims) and (out == u.s_in or _row_compatible(out, u.s_in, u.dims))
    kept = [u.s_in[d] for d in range(len(u.s_in)) if d not in u.dims]
    return _row_compatible(out, u.s_in, u.dims) and _numel(out) == _numel(kept) == _numel(src)


def _row_compatible(shape, s_in, dims):
    """A value of `shape` broadcast against s_in holds one value per row (constant over `dims`)."""
    shape = tuple(shape)
    lead = len(s_in) - len(shape)
    if lead < 0:
        return False
    for d, n in enumerate(s_in):
        j = d - lead
        size = shape[j] if j >= 0 else 1
        if d in dims:
            if size != 1 and n != 1:
                return False
        elif size != n and n != 1:
            return False
    return True


# == kernel emission =================================================================================

class _Ctx:
    __slots__ = ("args", "in_dtypes", "out_dtype", "idx")

    def __init__(self, args, in_dtypes, out_dtype, idx):
        self.args = args
        self.in_dtypes = in_dtypes
        self.out_dtype = out_dtype
        self.idx = idx


class _Emitter:
    """Builds one kernel: its parameters (pointers, strides, outputs) and its body."""

    def __init__(self, g, cones=None):
        self.g = g
        self.params = []           # (parameter name, ("ptr", v) | ("stride", v, j) | ("out", v))
        self.have = set()
        self.helpers = set()
        self.cones = cones or {}   # value -> _Cone: computed where it is loaded, never stored
        self.loads = 0

    def param(self, name, what):
        if name not in self.have:
            self.have.add(name)
            self.params.append((name, what))
        return name

    def offset(self, v, dom, idx):
        """Offset of value v's element at the domain index `idx` (names per dimension; None: 0)."""
        shape = tuple(self.g[v]["shape"])
        lead = len(dom) - len(shape)
        terms = []
        for j, n in enumerate(shape):
            d = j + lead
            if n == 1 or d < 0 or idx[d] is None:
                continue
            terms.append(f"{idx[d]} * " + self.param(f"stride_{v}_{j}", ("stride", v, j)))
        return terms

    def load(self, v, dom, idx, vector_idx, mask, lines, indent, other="0"):
        if v in self.cones:
            shape = tuple(self.g[v]["shape"])
            lead = len(dom) - len(shape)
            dims = [idx[j + lead] if n != 1 and j + lead >= 0 and idx[j + lead] is not None else "0"
                    for j, n in enumerate(shape)]
            self.loads += 1
            zero = f"({mask}).to(tl.int32) * 0" if mask else None
            val = _cone_lines(self, self.g, self.cones[v], dims, mask, zero, f"{v}_c{self.loads}", lines, indent)
            lines.append(f"{indent}{v} = tl.where({mask}, {val}, {other})" if mask else f"{indent}{v} = {val}")
            return
        ptr = self.param(f"{v}_ptr", ("ptr", v))
        terms = self.offset(v, dom, idx)
        d = self.g[v]["dtype"]
        cast = f".to({_ctype(d)})" if _ctype(d) != TL[d.name] else ""
        uses_vector = any(t.split(" * ")[0] in vector_idx for t in terms)
        if not terms:
            lines.append(f"{indent}{v} = tl.load({ptr}){cast}")
        elif uses_vector and mask:
            lines.append(f"{indent}{v} = tl.load({ptr} + {' + '.join(terms)}, mask={mask}, other={other}){cast}")
        else:
            lines.append(f"{indent}{v} = tl.load({ptr} + {' + '.join(terms)}){cast}")

    def compute(self, n, idx, lines, indent, names=None, out=None):
        """n's element expression over the index names idx, assigned to n (or `out`); its
        arguments are the values of their names (or `names[x]`)."""
        a = self.g[n]
        low = _expr(a)
        args = a["args"]
        exprs = []
        in_dtypes = []
        for x in args:
            if isinstance(x, V):
                exprs.append(names[x] if names is not None else str(x))
                in_dtypes.append(self.g[x]["dtype"])
            elif x is None:
                exprs.append(None)
                in_dtypes.append(None)
            else:
                exprs.append(lit(x))
                in_dtypes.append(None)
        ctx = _Ctx(args, in_dtypes, a["dtype"], idx)
        expr = low(exprs, a["params"], ctx)
        for h in _HELPERS:
            if h + "(" in expr:
                self.helpers.add(h)
        if low.cast:
            expr = f"({expr}).to({_ctype(a['dtype'])})"
        lines.append(f"{indent}{out or n} = {expr}")

    def store(self, v, off, mask, lines, indent, name=None):
        """Store value v (held in `name`, else in v) at offset `off`."""
        ptr = self.param(f"{v}_out_ptr", ("out", v))
        d = self.g[v]["dtype"]
        name = name or str(v)
        val = f"{name}.to({TL[d.name]})" if _ctype(d) != TL[d.name] else name
        m = f", mask={mask}" if mask else ""
        lines.append(f"{indent}tl.store({ptr} + {off}, {val}{m})" if off else f"{indent}tl.store({ptr}, {val}{m})")

    def signature(self, name, consts):
        ps = [p + (": tl.constexpr" if what[0] == "contig" else "") for p, what in self.params] + \
            [f"{c}: tl.constexpr" for c in consts]
        head = f"def {name}("
        out, line = [], head
        for i, p in enumerate(ps):
            piece = p + (", " if i < len(ps) - 1 else "):")
            if len(line) + len(piece) > 110:
                out.append(line.rstrip())
                line = " " * len(head)
            line += piece
        out.append(line)
        return out


def _comment(g, members):
    lines = ["    # IR nodes computed here:"]
    for m in members:
        a = g[m]
        args = ", ".join(str(x) if isinstance(x, V) else safe_repr(x) for x in a["args"])
        ps = "".join(f", {k}={safe_repr(v)}" for k, v in a["params"].items())
        src = f"  ({a['source']})" if a.get("source") else ""
        lines.append("    #   " + comment_text(f"{m}: {type_str(a['shape'], a['dtype'])} = {a['op']}({args}{ps}){src}"))
    return lines


def _index_lines(names, shape, flat, indent):
    """Per-dimension indices of a row-major flat index over `shape`."""
    lines = []
    inner = 1
    out = [None] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d]
        if n != 1:
            e = flat if inner == 1 else f"({flat} // {inner})"
            if inner * n != _numel(shape):
                e = f"{e} % {n}"
            lines.append(f"{indent}{names[d]} = {e}")
            out[d] = names[d]
        inner *= n
    return lines, out


def _name_for(g, members, kind):
    """`fused_mul_add_tanh_kernel`: the group's ops in order, each once (six at most)."""
    if kind == "scatter":
        a = g[members[0]]
        if _lowering(a).kind in ("index_add", "index_put"):
            return f"{_lowering(a).kind}_kernel"
        return "scatter_add_kernel" if a["params"].get("reduce") == "add" else "scatter_kernel"
    ops = []
    for m in members:
        op = g[m]["op"]
        if op not in ops and op != "proj":
            ops.append(op)
    fused = sum(g[m]["op"] != "proj" for m in members) > 1 and kind != "matmul"
    return ("fused_" if fused else "") + "_".join(ops[:6]) + "_kernel"


def _emit_pointwise(g, u, name):
    e = _Emitter(g)
    dom = u.shape
    body = ["    pid = tl.program_id(0)",
            "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
            f"    mask = offsets < {_numel(dom)}"]
    lines, idx = _index_lines([f"i{d}" for d in range(len(dom))], dom, "offsets", "    ")
    body += lines
    vec = set(x for x in idx if x)
    for x in u.reads:
        if tuple(g[x]["shape"]) == tuple(dom) and sum(n != 1 for n in dom) > 1:
            # an input of the domain's shape: when it is contiguous (a constexpr flag checked
            # at launch, each value its own compiled variant) the flat offset addresses it, which
            # the compiler sees as contiguous and loads in vectors; else its strides
            flag = e.param(f"{x}_contiguous", ("contig", x))
            body.append(f"    if {flag}:")
            body.append(f"        {x} = tl.load({e.param(f'{x}_ptr', ('ptr', x))} + offsets, mask=mask)"
                        + (f".to({_ctype(g[x]['dtype'])})" if _ctype(g[x]["dtype"]) != TL[g[x]["dtype"].name] else ""))
            body.append("    else:")
            e.load(x, dom, idx, vec | {"offsets"}, "mask", body, "        ")
            continue
        e.load(x, dom, idx, vec | {"offsets"}, "mask", body, "    ")
    for m in u.members:
        e.compute(m, idx, body, "    ")
    for w in u.writes:
        e.store(w, "offsets", "mask", body, "    ")
    u.numel = _numel(dom)
    return e, body, ["BLOCK_SIZE"]


def _div(a, b, ty):
    """a / b in a kernel computing in ty (a float Triton type), rounded as IEEE division
    (ops/lowering.py's true_div); b a value's text or a number (a row length)."""
    return ieee_div(a, b if isinstance(b, str) else lit(float(b)), ty == "tl.float64")


def _sqrt(x, ty):
    return ieee_sqrt(x, ty == "tl.float64")


def _reduction_plan(kind, p, N, acc, dtype=None):
    """(passes, finish): passes are (combine, element expression of v and earlier scalars);
    finish maps the pass results s0, s1, ... to the result (row kinds) or to the full-row
    expression (softmax kinds, in v). dtype: the result's dtype (its name), where a kind
    rounds its steps to it."""
    if kind == "sum":
        return [("sum", "v")], "s0"
    if kind == "mean":
        return [("sum", "v")], _div("s0", N, acc)
    if kind == "prod":
        return [("prod", "v")], "s0"
    if kind in ("max", "min"):
        return [(kind, "v")], "s0"
    if kind in ("var", "std"):
        dof = N - p.get("correction", 1)
        r = _div("s1", lit(float(dof)) if dof > 0 else "0.0", acc)
        m = _div("s0", N, acc)
        return [("sum", "v"), ("sum", f"(v - {m}) * (v - {m})")], (r if kind == "var" else _sqrt(r, acc))
    if kind == "logsumexp":
        # a row of -inf (or inf) gives max m = -inf; shift by 0 there, as numpy's kernel does.
        # float16 and bfloat16: each step rounded to the dtype (x - m, exp, the float32 sum, log,
        # + m), as torch's CPU kernel and the op table's (_logsumexp_kernel) compute it; rounded
        # once, a row in 7 came out a step away
        if dtype in ("float16", "bfloat16"):
            def r(e):
                return f"({e}).to({TL[dtype]}).to(tl.float32)"
        else:
            def r(e):
                return e
        m = "tl.where((s0 - s0) == 0, s0, 0.0)"
        shifted, total = r(f"v - {m}"), r("s1")
        return [("max", "v"), ("sum", r(f"tl.exp({shifted})"))], r(r(f"tl.log({total})") + f" + {m}")
    if kind == "norm":
        q = p.get("p", 2.0)
        if q == 2:
            return [("sum", "v * v")], _sqrt("s0", acc)
        if q == 1:
            return [("sum", "tl.abs(v)")], "s0"
        if q == math.inf:
            return [("max", "tl.abs(v)")], "s0"
        if q == -math.inf:
            return [("min", "tl.abs(v)")], "s0"
        if q == 0:
            return [("sum", "tl.where(v != 0, 1.0, 0.0)")], "s0"
        return [("sum", f"_pow(tl.abs(v), {lit(float(q))})")], f"_pow(s0, {lit(1.0 / q)})"
    if kind in ("argmax", "argmin", "max_dim", "min_dim"):
        # the first position holding the extreme value (row-major over the reduced dims)
        comb = kind[:3] if kind.endswith("_dim") else kind[3:]
        # (a NaN is the extreme: the first NaN's position, as torch)
        passes = [(comb, "v"), ("min", f"tl.where(v == s0, cols, tl.where(v != v, tl.where(s0 != s0, cols, {N}), {N}))", "tl.int64", str(N))]
        # max(dim)/min(dim): (values, indices), one per projection
        return passes, ("s0", "s1.to(tl.int64)") if kind.endswith("_dim") else "s1.to(tl.int64)"
    if kind == "softmax":
        return [("max", "v"), ("sum", "tl.exp(v - s0)")], _div("tl.exp(v - s0)", "s1", acc)
    if kind == "log_softmax":
        low = p.get("low")           # (float16/bfloat16 over the last dim: the sum and its log rounded, as torch's)
        if low is not None:
            return [("max", "v"), ("sum", "tl.exp(v - s0)")], \
                f"v - s0 - tl.log(s1.to({TL[low]}).to(tl.float32)).to({TL[low]}).to(tl.float32)"
        return [("max", "v"), ("sum", "tl.exp(v - s0)")], "v - s0 - tl.log(s1)"
    raise NotImplementedError(kind)


_IDENTITY = {"sum": "0", "prod": "1", "max": 'float("-inf")', "min": 'float("inf")'}
_INT_RANGE = {"tl.int1": (0, 1), "tl.uint8": (0, 255), "tl.int8": (-128, 127), "tl.int16": (-2 ** 15, 2 ** 15 - 1),
              "tl.int32": (-2 ** 31, 2 ** 31 - 1), "tl.int64": (-2 ** 63, 2 ** 63 - 1)}


# -0.0 as a value of Triton code: a literal -0.0 is +0.0 to Triton before 3.9 (a zero constant
# becomes the type's null value), a product is not (float32: exact in any float type it meets)
NEG_ZERO = "(tl.full([1], 0.0, tl.float32) * -1.0)"


def _full(shape, value, ty):
    """tl.full of a scalar's text, or of NEG_ZERO."""
    if value == NEG_ZERO:
        return f"tl.full({shape}, 0.0, {ty}) * -1.0"
    return f"tl.full({shape}, {value}, {ty})"


def _identity(comb, ty):
    """The value a masked-off lane contributes: integer max/min start from the type's bounds."""
    if ty in _INT_RANGE and comb in ("max", "min"):
        lo, hi = _INT_RANGE[ty]
        return str(lo if comb == "max" else hi)
    return _IDENTITY[comb]


# tl.sum/tl.max/tl.min are @triton.jit functions made when triton is imported, so under the
# interpreter they work only if TRITON_INTERPRET was set before that import; tl.reduce with
# combine functions from the generated module works either way and compiles to the same code
_FINAL = {"sum": "tl.reduce({a}, 0, _add_combine)", "max": "tl.reduce({a}, 0, _max_combine)",
          "min": "tl.reduce({a}, 0, _min_combine)", "prod": "tl.reduce({a}, 0, _mul_combine)"}
_COMBINE = {"sum": "_add_combine", "max": "_max_combine", "min": "_min_combine", "prod": "_mul_combine"}
_STEP = {"sum": "{acc} + {x}", "prod": "{acc} * {x}", "max": "tl.maximum({acc}, {x}, propagate_nan=tl.PropagateNan.ALL)",
         "min": "tl.minimum({acc}, {x}, propagate_nan=tl.PropagateNan.ALL)"}


# columns one program of a column reduction takes (a [BLOCK_SIZE, COL_BLOCK] tile of rows x
# columns, reading whole rows of the block at once)
COL_BLOCK = 64


def _column_reduction(g, u):
    """u reduces leading dims of its input and keeps the trailing ones (a bias gradient's sum
    over the batch), one sum/mean/max/min/prod with at most an elementwise prologue."""
    a = g[u.root]
    if a["prim"].multi or len(u.stages) != 1 or u.full_epilogue or u.row_epilogue or u.aliases or u.col_stages:
        return False
    if _lowering(a).kind not in ("sum", "mean", "max", "min", "prod"):
        return False
    s_in, dims = u.s_in, u.dims
    kept = _numel([s_in[d] for d in range(len(s_in)) if d not in dims])
    return dims == tuple(range(len(dims))) and 0 < len(dims) < len(s_in) and kept > 1 and \
        _numel([s_in[d] for d in dims]) > 1


def _emit_column_reduction(g, u, name):
    """A reduction over leading dims, tiled rows x columns: a program takes COL_BLOCK columns
    and walks the rows in blocks of BLOCK_SIZE, accumulating a [BLOCK_SIZE, COL_BLOCK] tile
    (whole rows of the block are read together), then reduces it along the rows."""
    e = _Emitter(g, getattr(u, "cones", None))
    r = u.root
    a = g[r]
    s_in, dims = u.s_in, u.dims
    k = len(dims)
    M = _numel(s_in[k:])
    N = _numel(s_in[:k])
    C = min(COL_BLOCK, _next_pow2(M))
    u.M, u.N, u.whole, u.rows = M, N, True, C
    u.block = max(1, min(_next_pow2(N), 2048 // C, 64 if interpreting() else 2048))
    acc_t = _ctype(a["dtype"])
    passes, finish = _reduction_plan(_lowering(a).kind, a["params"], N, acc_t, a["dtype"].name)
    comb = passes[0][0]
    ident = _identity(comb, acc_t)
    e.helpers.add(_COMBINE[comb])
    names = [f"i{d}" for d in range(len(s_in))]
    body = ["    pid = tl.program_id(0)",
            f"    cols = pid * {C} + tl.arange(0, {C})[None, :]",
            f"    cmask = cols < {M}"]
    col_lines, col_idx = _index_lines(names[k:], s_in[k:], "cols", "    ")
    body += col_lines
    body.append(f"    acc = tl.full([BLOCK_SIZE, {C}], {ident}, {acc_t})")
    body.append(f"    for start in range(0, {N}, BLOCK_SIZE):")
    body.append("        rows = start + tl.arange(0, BLOCK_SIZE)[:, None]")
    body.append(f"        mask = (rows < {N}) & cmask")
    row_lines, row_idx = _index_lines(names[:k], s_in[:k], "rows", "        ")
    body += row_lines
    idx = list(row_idx) + list(col_idx)
    vec = set(x for x in idx if x) | {"rows", "cols"}
    done = set()
    for m in u.prologue:
        for y in refs(g[m]["args"]):
            if y not in done and y not in u.internal:
                e.load(y, s_in, idx, vec, "mask", body, "        ")
                done.add(y)
        e.compute(m, idx, body, "        ")
        done.add(m)
    x = refs(a["args"])[0]
    if x not in done:
        e.load(x, s_in, idx, vec, "mask", body, "        ")
    body.append(f"        v = {x}.to({acc_t})")
    body.append(f"        acc = {_STEP[comb].format(acc='acc', x=f'tl.where(mask, {passes[0][1]}, {ident})')}")
    body.append(f"    s0 = tl.reduce(acc, 0, {_COMBINE[comb]}, keep_dims=True)")
    body.append(f"    {r} = {finish}")
    for w in u.writes:
        e.store(w, "cols", "cmask", body, "    ")
    return e, body, ["BLOCK_SIZE"]


def _emit_reduction(g, u, name, max_row_block):
    """One program per row. Each stage (a reduction over the row) makes its passes over the
    columns: in registers when the row fits one block, else a loop per pass; the per-row
    epilogue follows each stage, and a last sweep computes and stores the full-row values."""
    if _column_reduction(g, u):
        return _emit_column_reduction(g, u, name)
    e = _Emitter(g, getattr(u, "cones", None))
    r = u.root
    a = g[r]
    s_in, dims = u.s_in, u.dims
    kept = [d for d in range(len(s_in)) if d not in dims]
    M = _numel([s_in[d] for d in kept])
    N = _numel([s_in[d] for d in dims])
    out_shape = tuple(a["shape"][0]) if a["prim"].multi else tuple(a["shape"])
    full = _lowering(a).full_row
    whole = _next_pow2(N) <= max_row_block
    u.M, u.N, u.whole = M, N, whole
    u.block = _next_pow2(N) if whole else None
    mem = u.internal
    # short rows are packed: a program takes R rows as a 2-d [R, BLOCK_SIZE] block (row
    # values [R, 1]), so a row of 10 does not leave most of a program's lanes idle
    R = 1
    if whole and M > 1 and 2 <= N and u.block < PACK_LANES and not u.col_stages:
        R = min(PACK_LANES // u.block, _next_pow2(M))
    u.rows = R
    packed = R > 1
    rmask = "rmask" if packed else None
    final = {c: (f.replace(", 0, ", ", 1, ")[:-1] + ", keep_dims=True)" if packed else f) for c, f in _FINAL.items()}

    # per stage: (node, input, v name, passes, finish) with s-names made unique per stage
    stages = []
    for k, rk in enumerate(u.stages):
        ak = g[rk]
        xk = refs(ak["args"])[0]
        acc = _ctype(ak["dtype"][0] if ak["prim"].multi else ak["dtype"])
        if ak["op"] == "gather":
            # the element at the row's index: a sum of the row with every other lane -0.0 (the
            # identity of +, so the element comes out bit for bit, a -0.0 included); an index
            # outside [0, N) (torch and the numpy backend raise; a kernel cannot) gives NaN
            # rather than a plausible number
            kind, index = "take", refs(ak["args"])[1]
            ident = NEG_ZERO if ak["dtype"].is_floating_point else "0"
            passes = [("sum", f"tl.where(cols == {index}, v, {ident})", acc, ident)]
            finish = f"tl.where(({index} < 0) | ({index} >= {N}), float(\"nan\"), s0)" \
                if ak["dtype"].is_floating_point else "s0"
        else:
            kind = _lowering(ak).kind
            passes, finish = _reduction_plan(kind, ak["params"], N, acc,
                                             (ak["dtype"][0] if ak["prim"].multi else ak["dtype"]).name)
        vt = _ctype(g[xk]["dtype"]) if kind in ("argmax", "argmin", "max_dim", "min_dim") else acc
        passes = [q + (vt, _identity(q[0], vt))[len(q) - 2:] for q in passes]
        vname = "v" if k == 0 else f"v{k + 1}"

        def rename(text, k=k, vname=vname):
            if k == 0:
                return text
            text = re.sub(r"\bs(\d+)\b", lambda mt: f"s{k + 1}_{mt.group(1)}", text)
            return re.sub(r"\bv\b", vname, text)
        passes = [(c, rename(ex), ty, ident) for c, ex, ty, ident in passes]
        finish = tuple(rename(f) for f in finish) if isinstance(finish, tuple) else rename(finish)
        sname = [rename(f"s{i}") for i in range(len(passes))]
        stages.append((rk, xk, vname, vt, passes, finish, sname))
        text = " ".join(q[1] for q in passes) + " " + " ".join(finish if isinstance(finish, tuple) else (finish,))
        if "_pow(" in text:
            e.helpers.add("_pow")
        e.helpers |= {_COMBINE[q[0]] for q in passes}

    # the stage a value is available after (0: the prologue)
    level = {m: 0 for m in u.prologue}
    for k, rk in enumerate(u.stages):
        level[rk] = k + 1
    order = g.nodes()
    for m in sorted(set(u.row_epilogue) | set(u.full_epilogue) | set(u.aliases), key=order.index):
        level[m] = max([level.get(y, 0) for y in refs(g[m]["args"]) if y in mem] or [0])

    names = [f"i{d}" for d in range(len(s_in))]
    body = ["    row = tl.program_id(0)"]
    if packed:
        body = [f"    row = tl.program_id(0) * {R} + tl.arange(0, {R})[:, None]", f"    rmask = row < {M}"]
    row_lines, row_idx = _index_lines([names[d] for d in kept], [s_in[d] for d in kept], "row", "    ")
    body += row_lines
    idx = [None] * len(s_in)
    for d, nm in zip(kept, row_idx):
        idx[d] = nm
    row_vec = set(x for x in row_idx if x) | {"row"} if packed else set()
    full_nodes = sorted(set(u.full_epilogue) | ({r} if full else set()), key=order.index)

    def needed_full(roots):
        """The full-row values `roots` need (besides the prologue), in order."""
        want, stack = set(), list(roots)
        while stack:
            v = stack.pop()
            if v in full_nodes and v not in want:
                want.add(v)
                stack.extend(y for y in refs(g[v]["args"]) if y in mem)
        return [m for m in full_nodes if m in want]

    def columns(indent, start):
        ls = [f"{indent}cols = {start}tl.arange(0, BLOCK_SIZE)", f"{indent}mask = cols < {N}"]
        if packed:
            ls = [f"{indent}cols = tl.arange(0, BLOCK_SIZE)[None, :]", f"{indent}mask = (cols < {N}) & rmask"]
        col_lines, col_idx = _index_lines([names[d] for d in dims], [s_in[d] for d in dims], "cols", indent)
        ls += col_lines
        bidx = list(idx)
        for d, nm in zip(dims, col_idx):
            bidx[d] = nm
        return ls, bidx, set(c for c in col_idx if c) | {"cols"}

    def compute_full(nodes, bidx, vec, ls, indent, done):
        for m in nodes:
            if m in done:
                continue
            for y in refs(g[m]["args"]):
                if y not in done and y not in mem:
                    e.load(y, s_in, bidx, vec, "mask", ls, indent)
                    done.add(y)
            if m == r and full:
                ls.append(f"{indent}{r} = {stages[0][5]}")
            else:
                e.compute(m, bidx, ls, indent)
            done.add(m)

    def sweep(indent, start, nodes, done):
        """Loads, prologue, the stage-1 row value v and the full values `nodes`, over a block."""
        ls, bidx, vec = columns(indent, start)
        for m in u.prologue:
            for y in refs(g[m]["args"]):
                if y not in done and y not in mem:
                    e.load(y, s_in, bidx, vec, "mask", ls, indent)
                    done.add(y)
            e.compute(m, bidx, ls, indent)
            done.add(m)
        x1 = stages[0][1]
        if x1 not in done:
            e.load(x1, s_in, bidx, vec, "mask", ls, indent)
            done.add(x1)
        ls.append(f"{indent}v = {x1}.to({stages[0][3]})")
        compute_full(nodes, bidx, vec, ls, indent, done)
        return ls, bidx, vec

    def row_epilogue(k):
        out_idx = _out_index(s_in, dims, idx, a)
        rk, _, _, _, _, finish, _ = stages[k]
        if not g[rk]["prim"].multi and not (k == 0 and full):
            body.append(f"    {rk} = {finish}")
        loaded = set()
        # in graph order: a row value may read an alias (a view of an earlier row value)
        for m in sorted(set(u.row_epilogue) | set(u.aliases), key=order.index):
            if max(level[m], 1) != k + 1:       # a row value of outside inputs alone: after stage 1
                continue
            if m in u.aliases:
                body.append(f"    {m} = {u.aliases[m]}  # {g[m]['op']}: the same value for the whole row")
                continue
            if g[m]["op"] == "proj":
                body.append(f"    {m} = {finish[g[m]['params']['index']]}")
                continue
            for y in refs(g[m]["args"]):
                if y not in mem and y not in loaded:
                    e.load(y, out_shape, out_idx, row_vec, rmask, body, "    ")
                    loaded.add(y)
            e.compute(m, out_idx, body, "    ")

    def stage_value(k, ls, indent, done, bidx, vec):
        rk, xk, vname, vt, _, _, _ = stages[k]
        compute_full(needed_full([xk]), bidx, vec, ls, indent, done)
        if k:
            if xk not in done and xk not in mem:
                e.load(xk, s_in, bidx, vec, "mask", ls, indent)
                done.add(xk)
            ls.append(f"{indent}{vname} = {xk}.to({vt})")

    def take_index(k):
        """A gather stage's index: one value per row, loaded before the stage's passes."""
        rk = stages[k][0]
        if g[rk]["op"] == "gather":
            index = refs(g[rk]["args"])[1]
            e.load(index, s_in, [None if d in dims else idx[d] for d in range(len(s_in))], row_vec, rmask, body,
                   "    ")

    if whole:
        done = set()
        ls, bidx, vec = sweep("    ", "", [], done)
        body += ls
        for k, (rk, xk, vname, vt, passes, finish, sname) in enumerate(stages):
            take_index(k)
            stage_value(k, body, "    ", done, bidx, vec)
            for (comb, ex, _, ident), sn in zip(passes, sname):
                body.append(f"    {sn} = {final[comb].format(a=f'tl.where(mask, {ex}, {ident})')}")
            row_epilogue(k)
    else:
        for k, (rk, xk, vname, vt, passes, finish, sname) in enumerate(stages):
            take_index(k)
            for (comb, ex, ty, ident), sn in zip(passes, sname):
                body.append(f"    acc = {_full('[BLOCK_SIZE]', ident, ty)}")
                body.append(f"    for start in range(0, {N}, BLOCK_SIZE):")
                done = set()
                ls, bidx, vec = sweep("        ", "start + ", [], done)
                body += ls
                stage_value(k, body, "        ", done, bidx, vec)
                body.append(f"        acc = {_STEP[comb].format(acc='acc', x=f'tl.where(mask, {ex}, {ident})')}")
                body.append(f"    {sn} = {_FINAL[comb].format(a='acc')}")
            row_epilogue(k)
    for w in u.writes:
        if w in u.stages and not (w == r and full) or w in u.row_epilogue:
            e.store(w, "row" if M > 1 else "", rmask, body, "    ")
    stored_full = [w for w in u.writes if w in full_nodes]
    if stored_full:
        if whole:
            compute_full(needed_full(stored_full), bidx, vec, body, "    ", done)
            indent = "    "
        else:
            body.append(f"    for start in range(0, {N}, BLOCK_SIZE):")
            done = set()
            ls, bidx, vec = sweep("        ", "start + ", needed_full(stored_full), done)
            body += ls
            indent = "        "
        off = _contiguous_offset(s_in, bidx)
        if N == 1:
            # a row of one element has no column index (size-1 dims get none): the block of
            # lanes still addresses it through `cols` (lane 0; the mask drops the others)
            off = "cols" if off == "0" else f"{off} + cols"
        for w in stored_full:
            e.store(w, off, "mask", body, indent)
    if u.col_stages:
        body = _column_sums(g, u, e, body, done, bidx, vec, compute_full, needed_full, M)
    return e, body, ["BLOCK_SIZE"]


# a row kernel whose rows are shorter than this packs rows into one program up to this many
# lanes (elements of a block)
PACK_LANES = 128

# rows one program of a kernel with column sums handles, at least and at most: its column
# partials (read and written as float32) are added into the outputs once per program, and it
# takes enough rows that this traffic stays within 1/_COL_SHARE of what its rows move
_COL_ROWS, _COL_ROWS_MAX, _COL_SHARE = 8, 64, 8


def _column_sums(g, u, e, body, done, bidx, vec, compute_full, needed_full, M):
    """A row kernel that also sums full-row values over the rows (LayerNorm's weight and bias
    gradients): each program runs the row body for _COL_ROWS rows, accumulating the values in
    registers, then atomically adds its partial sums into the (zeroed) outputs. A program's
    rows past the last are the last row again (the same values stored twice) with their
    partials masked off."""
    u.col_stages = [m for m in u.col_stages if m in u.writes]     # (a sum nothing reads is not made)
    row_bytes = sum(g[v]["dtype"].itemsize for v in dict.fromkeys(u.reads + u.writes)
                    if _numel(tuple(g[v]["shape"])) == M * u.N)    # per column, over one row
    rows = _COL_ROWS
    while rows < _COL_ROWS_MAX and rows * row_bytes < _COL_SHARE * 8 * len(u.col_stages):
        rows *= 2
    rows = max(1, min(rows, M))
    u.rows = rows
    tail = []
    for j, m in enumerate(u.col_stages):
        x = refs(g[m]["args"])[0]
        compute_full(needed_full([x]), bidx, vec, tail, "    ", done)
        if x not in done:
            e.load(x, u.s_in, bidx, vec, "mask", tail, "    ")
            done.add(x)
        acc = _ctype(g[m]["dtype"])
        tail.append(f"    colacc{j} += tl.where(valid, tl.where(mask, {x}.to({acc}), 0.0), 0.0)")
    head = ["    pid = tl.program_id(0)"]
    head += [f"    colacc{j} = tl.full([BLOCK_SIZE], 0, {_ctype(g[m]['dtype'])})" for j, m in enumerate(u.col_stages)]
    head += [f"    for rr in range({rows}):",
             f"        valid = pid * {rows} + rr < {M}",
             f"        row = tl.minimum(pid * {rows} + rr, {M - 1})"]
    assert body[0] == "    row = tl.program_id(0)", body[0]
    out = head + ["    " + ln for ln in body[1:] + tail]
    out += ["    cols = tl.arange(0, BLOCK_SIZE)", f"    mask = cols < {u.N}"]
    for j, m in enumerate(u.col_stages):
        ptr = e.param(f"{m}_out_ptr", ("out", m))
        acc = f"colacc{j}"
        if _lowering(g[m]).kind == "mean":
            acc = _div(acc, u.M, _ctype(g[m]["dtype"]))
        ty = TL[g[m]['dtype'].name]
        out.append(f"    {_atomic_add(f'{ptr} + cols', f'({acc}).to({ty})')}")
    return out


def _out_index(s_in, dims, idx, a):
    """Index names over a reduction's output shape."""
    if a["params"].get("keepdim"):
        return [None if d in dims else idx[d] for d in range(len(s_in))]
    return [idx[d] for d in range(len(s_in)) if d not in dims]


def _contiguous_offset(shape, idx, always=()):
    """Row-major offset of the element at `idx` in a contiguous tensor of `shape`; the
    index names in `always` stay even over a size-1 dimension (the pointer keeps its shape)."""
    terms = []
    inner = 1
    for d in range(len(shape) - 1, -1, -1):
        if idx[d] is not None and (shape[d] != 1 or idx[d] in always):
            terms.append(idx[d] if inner == 1 else f"{idx[d]} * {inner}")
        inner *= shape[d]
    return " + ".join(reversed(terms)) or "0"


def _matmul_shapes(g, n):
    a_name, b_name = refs(g[n]["args"])
    sa, sb = tuple(g[a_name]["shape"]), tuple(g[b_name]["shape"])
    a2 = sa if len(sa) > 1 else (1,) + sa
    b2 = sb if len(sb) > 1 else sb + (1,)
    batch = []
    la, lb = a2[:-2], b2[:-2]
    k = max(len(la), len(lb))
    la = (1,) * (k - len(la)) + la
    lb = (1,) * (k - len(lb)) + lb
    # broadcast: a size-1 dimension takes the other's size, 0 included (max made a batch of 0 beside
    # 1 a batch of 1, and the kernel read and wrote a whole matrix of empty arrays; seed 44297)
    batch = tuple(q if p == 1 else p for p, q in zip(la, lb))
    return a_name, b_name, a2, b2, batch + (a2[-2], b2[-1])



def _epilogue(e, g, u, acc, out, idx, vec, body, done=()):
    """A matmul or convolution kernel's epilogue: the unit's members after the product `acc`
    (and those in `done`, computed already), each loading what it reads from outside the unit
    (once) and computing on the tile."""
    mem = set(u.members)
    done = {acc} | set(done)
    for m in u.members[1:]:
        if m in done:
            continue
        for y in refs(g[m]["args"]):
            if y not in done and y not in mem:
                e.load(y, out, idx, vec, "mask", body, "    ")
                done.add(y)
        e.compute(m, idx, body, "    ")
        done.add(m)

def _emit_matmul(g, u, name):
    if isinstance(_lowering(g[u.root]), ConvDot):
        return _emit_conv(g, u, name)
    e = _Emitter(g)
    n = u.root
    a_name, b_name, a2, b2, out2 = _matmul_shapes(g, n)
    d = g[n]["dtype"]
    if not d.is_floating_point:
        raise NotImplementedError(f"{n} = matmul(...): Triton's tl.dot has no {d.name} lowering here")
    acc = "tl.float64" if d.name == "float64" else "tl.float32"
    M, K, N = a2[-2], a2[-1], b2[-1]
    batch = out2[:-2]
    u.M, u.N, u.K, u.batch = M, N, K, _numel(batch)
    u.a2, u.b2, u.out2 = a2, b2, out2
    bnames = [f"b{d}" for d in range(len(batch))]
    body = ["    pid_m = tl.program_id(0)", "    pid_n = tl.program_id(1)"]
    bl, bidx = _index_lines(bnames, batch, "batch", "    ")
    if bl:
        body += ["    batch = tl.program_id(2)"] + bl

    def base(v, shape2, role):
        lead = len(batch) - (len(shape2) - 2)
        terms = []
        for j in range(len(shape2) - 2):
            dd = j + lead
            if shape2[j] != 1 and bidx[dd] is not None:
                terms.append(f"{bidx[dd]} * " + e.param(f"stride_{v}_b{j}", ("stride2", v, j, role)))
        return terms

    a_ptr = e.param(f"{a_name}_ptr", ("ptr", a_name))
    # ("stride2", value, dim, operand): a stride of operand a or b seen as a matrix (a vector
    # operand gets its size-1 dimension in the launcher)
    sam = e.param(f"stride_{a_name}_m", ("stride2", a_name, len(a2) - 2, "a"))
    sak = e.param(f"stride_{a_name}_k", ("stride2", a_name, len(a2) - 1, "a"))
    b_ptr = e.param(f"{b_name}_ptr", ("ptr", b_name)) if b_name != a_name else a_ptr
    sbk = e.param(f"stride_{b_name}_k2" if b_name == a_name else f"stride_{b_name}_k",
                  ("stride2", b_name, len(b2) - 2, "b"))
    sbn = e.param(f"stride_{b_name}_n", ("stride2", b_name, len(b2) - 1, "b"))
    body += ["    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
             "    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
             "    offs_k = tl.arange(0, BLOCK_K)"]
    ab = " + ".join(base(a_name, a2, "a"))
    bb = " + ".join(base(b_name, b2, "b"))
    body.append(f"    a_ptrs = {a_ptr}{' + ' + ab if ab else ''} + offs_m[:, None] * {sam} + offs_k[None, :] * {sak}")
    body.append(f"    b_ptrs = {b_ptr}{' + ' + bb if bb else ''} + offs_k[:, None] * {sbk} + offs_n[None, :] * {sbn}")
    body.append(f"    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, {acc})")
    body.append(f"    for k in range(0, {K}, BLOCK_K):")
    body.append(f"        a = tl.load(a_ptrs, mask=(offs_m[:, None] < {M}) & (offs_k[None, :] + k < {K}), other=0.0)")
    body.append(f"        b = tl.load(b_ptrs, mask=(offs_k[:, None] + k < {K}) & (offs_n[None, :] < {N}), other=0.0)")
    prec = _dot_precision(d)
    u.precision = prec
    body.append(f"        acc = tl.dot(a, b, acc{prec})")
    body.append(f"        a_ptrs += BLOCK_K * {sak}")
    body.append(f"        b_ptrs += BLOCK_K * {sbk}")
    body.append(f"    {n} = acc")
    mask = f"(offs_m[:, None] < {M}) & (offs_n[None, :] < {N})"
    body.append(f"    mask = {mask}")
    idx = list(bidx) + ["offs_m[:, None]", "offs_n[None, :]"]
    vec = {"offs_m[:, None]", "offs_n[None, :]"}
    _epilogue(e, g, u, n, out2, idx, vec, body)
    off = _contiguous_offset(out2, list(bidx) + ["offs_m[:, None]", "offs_n[None, :]"],
                             always=("offs_m[:, None]", "offs_n[None, :]"))
    for w in u.writes:
        e.store(w, off, "mask", body, "    ")
    return e, body, ["BLOCK_M", "BLOCK_N", "BLOCK_K"]


def _dot_precision(d):
    """tl.dot's input_precision for dtype d: ieee for float64, and for float32 unless
    set_float32_matmul_precision("high" or "medium") lets tf32 round the inputs to 10 bits
    of mantissa for tensor cores."""
    if d.name == "float64" or d.name == "float32" and get_float32_matmul_precision() == "highest":
        return ', input_precision="ieee"'
    return ', input_precision="tf32"' if d.name == "float32" else ""


def _digits(flat, sizes, names):
    """Lines naming the row-major digits of `flat` over `sizes` (an int or name per size)."""
    out, inner = [], 1
    for size, nm in reversed(list(zip(sizes, names))):
        e = flat if inner == 1 else f"({flat} // {inner})"
        if inner * size != _numel(sizes):
            e = f"{e} % {size}"
        out.append(f"{nm} = {e}")
        inner *= size
    return list(reversed(out))


def _emit_conv(g, u, name):
    """A convolution as an implicit GEMM (ops/lowering.py's ConvDot): the tiles tl.dot takes
    are gathered from the image and the kernel by index arithmetic, with padding and a
    transposed convolution's stride as load masks, so nothing is padded, unfolded or flipped
    in memory. One program per (BLOCK_M x BLOCK_N) output tile and group:
      forward  rows: output pixels (n, y, x), columns: output channels, k: (c, i, j);
      input    (conv_transpose2d) the same, a row's input pixel hy = (y + p - i*d) / s
               taken only where it divides;
      weight   rows: output channels, columns: (c, i, j), k: output pixels (n, y, x)."""
    e = _Emitter(g, getattr(u, "cones", None))
    n = u.root
    a = g[n]
    kind = _lowering(a).kind
    p = a["params"]
    d = a["dtype"]
    acc_t = "tl.float64" if d.name == "float64" else "tl.float32"
    (sh, sw), (ph, pw), (dh, dw), G = p["stride"], p["padding"], p["dilation"], p["groups"]
    out = tuple(a["shape"])
    xs = list(a["args"])
    bias = xs[2] if len(xs) > 2 and isinstance(xs[2], V) else None

    def ptr(v):
        return e.param(f"{v}_ptr", ("ptr", v))

    def st(v, j):
        return e.param(f"stride_{v}_{j}", ("stride", v, j))

    cones = getattr(u, "cones", {})

    def operand(name, v, dims, mask, tile):
        """Lines loading operand tile `name` of value v at the index expressions `dims` (one per
        dimension of v), or computing it there when v is an elementwise chain (its cone)."""
        if v not in cones:
            base = ptr(v)
            terms = " + ".join(f"{dd} * {st(v, j)}" for j, dd in enumerate(dims))
            return [f"{i8}{name} = tl.load({base} + {terms}, mask={mask}, other=0.0)"]
        lines = []
        val = _cone_lines(e, g, cones[v], dims, mask, f"tl.full({tile}, 0, tl.int32)", name, lines, i8)
        lines.append(f"{i8}{name} = tl.where({mask}, {val}, 0.0).to({TL[d.name]})")
        return lines
    A_TILE, B_TILE = "(BLOCK_M, BLOCK_K)", "(BLOCK_K, BLOCK_N)"
    i8 = "        "
    views = getattr(u, "views", None) or []
    if views:                    # the output's rows and columns are the views' (see _conv_views)
        out = tuple(g[views[0]]["shape"])
    if kind == "forward":
        x, w = xs[0], xs[1]
        nb, c, h, wd = g[x]["shape"]
        o, cg, kh, kw = g[w]["shape"]
        _, _, ho, wo = out
        og = o // G
        M, N, K = nb * ho * wo, og, cg * kh * kw
    elif kind == "input":
        x, w = xs[0], xs[1]                          # y (N, Cin, H, W), w (Cin, Cout/G, kh, kw)
        nb, cin, h, wd = g[x]["shape"]
        _, cg, kh, kw = g[w]["shape"]
        _, _, ho, wo = out
        ig = cin // G
        M, N, K = nb * ho * wo, cg, ig * kh * kw
    else:
        x, gr = xs[0], xs[1]                         # x (N, C, H, W), g (N, O, Ho, Wo)
        nb, c, h, wd = g[x]["shape"]
        o, cg, kh, kw = out
        _, _, ho, wo = g[gr]["shape"]
        og = o // G
        M, N, K = og, cg * kh * kw, nb * ho * wo
    u.M, u.N, u.K, u.batch = M, N, K, G
    u.out2 = out
    # one accumulator per view, its output row and column (a sub-grid of the convolution's)
    rows = [("", "ry", "rx")]
    if views:
        rows = []
        for j, v in enumerate(views):
            oy, ox, s1, s2 = _view_origin(g, v)
            rows.append((str(j), f"({oy} + ry * {s1})", f"({ox} + rx * {s2})"))
    body = ["    pid_m = tl.program_id(0)", "    pid_n = tl.program_id(1)",
            "    grp = tl.program_id(2)",
            "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
            "    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)"]
    i4 = "    "
    if kind in ("forward", "input"):
        body += [i4 + ln for ln in _digits("offs_m", (nb, ho, wo), ("rn", "ry", "rx"))]
        body += [i4 + "rn = rn[:, None]", i4 + "ry = ry[:, None]", i4 + "rx = rx[:, None]",
                 f"{i4}oc = grp * {N} + offs_n[None, :]"]
        idx = ["rn", "oc", "ry", "rx"]
    else:
        body += [f"{i4}oc = grp * {M} + offs_m[:, None]"]
        body += [i4 + ln for ln in _digits("offs_n", (cg, kh, kw), ("wc", "wi", "wj"))]
        body += [i4 + "wc = wc[None, :]", i4 + "wi = wi[None, :]", i4 + "wj = wj[None, :]"]
        idx = ["oc", "wc", "wi", "wj"]
    prec = _dot_precision(d)
    u.precision = prec
    for j, _, _ in rows:
        body.append(f"    acc{j} = tl.full((BLOCK_M, BLOCK_N), 0.0, {acc_t})")
    sums = getattr(u, "bias_sums", None) or []
    if sums:        # the bias gradient: the output gradient's rows summed as they are loaded
        body.append(f"    bsum = tl.full((BLOCK_M,), 0.0, {acc_t})")
    body.append(f"    for k in range(0, {K}, BLOCK_K):")
    if kind in ("forward", "input"):
        def b_lines():
            if kind == "forward":
                ls = operand("b", w, ["oc", "kc[:, None]", "ki[:, None]", "kj[:, None]"], "bm", B_TILE)
            else:
                ls = operand("b", w, [f"(grp * {ig} + ko[:, None])", "offs_n[None, :]", "ki[:, None]",
                                      "kj[:, None]"], "bm", B_TILE)
            return [f"{i8}bm = (kk[:, None] < {K}) & (offs_n[None, :] < {N})"] + ls
        kdig = (cg, kh, kw) if kind == "forward" else (ig, kh, kw)
        body += [f"{i8}kk = k + tl.arange(0, BLOCK_K)"] + \
            [i8 + ln for ln in _digits("kk", kdig, ("kc" if kind == "forward" else "ko", "ki", "kj"))]
        if views:                  # the kernel tile, once for every view
            body += b_lines()
        for j, ry, rx in rows:
            if kind == "forward":
                body += [f"{i8}iy{j} = {ry} * {sh} - {ph} + ki[None, :] * {dh}",
                         f"{i8}ix{j} = {rx} * {sw} - {pw} + kj[None, :] * {dw}",
                         f"{i8}am{j} = (offs_m[:, None] < {M}) & (kk[None, :] < {K}) & (iy{j} >= 0) & (iy{j} < {h}) & "
                         f"(ix{j} >= 0) & (ix{j} < {wd})"]
                body += operand(f"a{j}", x, ["rn", f"(grp * {cg} + kc[None, :])", f"iy{j}", f"ix{j}"], f"am{j}",
                                A_TILE)
            else:
                body += [f"{i8}ty{j} = {ry} + {ph} - ki[None, :] * {dh}",
                         f"{i8}tx{j} = {rx} + {pw} - kj[None, :] * {dw}",
                         f"{i8}hy{j} = ty{j} // {sh}", f"{i8}hx{j} = tx{j} // {sw}",
                         f"{i8}am{j} = (offs_m[:, None] < {M}) & (kk[None, :] < {K}) & (ty{j} >= 0) & (tx{j} >= 0) & "
                         f"(hy{j} * {sh} == ty{j}) & (hx{j} * {sw} == tx{j}) & (hy{j} < {h}) & (hx{j} < {wd})"]
                body += operand(f"a{j}", x, ["rn", f"(grp * {ig} + ko[None, :])", f"hy{j}", f"hx{j}"], f"am{j}",
                                A_TILE)
            if not views:
                body += b_lines()
            body.append(f"{i8}acc{j} = tl.dot(a{j}, b, acc{j}{prec})")
    else:
        body += [f"{i8}kk = k + tl.arange(0, BLOCK_K)"] + [i8 + ln for ln in _digits("kk", (nb, ho, wo), ("kn", "ky", "kx"))]
        body += [f"{i8}am = (offs_m[:, None] < {M}) & (kk[None, :] < {K})"]
        body += operand("a", gr, ["kn[None, :]", "oc", "ky[None, :]", "kx[None, :]"], "am", A_TILE)
        body += [f"{i8}iy = ky[:, None] * {sh} - {ph} + wi * {dh}",
                 f"{i8}ix = kx[:, None] * {sw} - {pw} + wj * {dw}",
                 f"{i8}bm = (kk[:, None] < {K}) & (offs_n[None, :] < {N}) & (iy >= 0) & (iy < {h}) & (ix >= 0) & "
                 f"(ix < {wd})"]
        body += operand("b", x, ["kn[:, None]", f"(grp * {cg} + wc)", "iy", "ix"], "bm", B_TILE)
        body.append(f"{i8}acc = tl.dot(a, b, acc{prec})")
        if sums:
            body.append(f"{i8}bsum += tl.reduce(a.to({acc_t}), 1, _add_combine)")
            e.helpers.add("_add_combine")
    body.append(f"    mask = (offs_m[:, None] < {M}) & (offs_n[None, :] < {N})")
    if bias is not None:
        body.append(f"    bias = tl.load({ptr(bias)} + oc * {st(bias, 0)}, mask=offs_n[None, :] < {N}, "
                    f"other=0.0).to({acc_t})")
    # a view is the convolution's value: rounded to a half type as the stored output would be
    # (max pooling's comparisons and ties see what an unfused pooling would read)
    chain = list(getattr(u, "chain", None) or [])
    for (j, ry, rx), v in zip(rows, views or [n]):
        val = f"(acc{j} + bias)" if bias is not None else f"acc{j}"
        if not views:
            body.append(f"    {v} = {val}")
            continue
        # the chain at the view's elements of the convolution's output, stored where it is
        # a kernel output; the view is its last value, rounded to a half type as the stored
        # value would be (max pooling's comparisons and ties see what an unfused pooling reads)
        full = tuple(a["shape"])
        cidx = ["rn", "oc", ry, rx]
        names = {n: f"{n}_v{j}"}
        body.append(f"    {n}_v{j} = {val}")
        for m in chain:
            for y in refs(g[m]["args"]):
                if y not in names:
                    terms = e.offset(y, full, cidx)
                    nm = names[y] = f"{y}_v{j}"
                    yp = e.param(f"{y}_ptr", ("ptr", y))
                    yd = g[y]["dtype"]
                    cast = f".to({_ctype(yd)})" if _ctype(yd) != TL[yd.name] else ""
                    body.append(f"    {nm} = tl.load({yp} + {' + '.join(terms)}, mask=mask, other=0){cast}"
                                if terms else f"    {nm} = tl.load({yp}){cast}")
            names[m] = f"{m}_v{j}"
            e.compute(m, cidx, body, "    ", names=names, out=names[m])
        for m in [n] + chain:
            if m in u.writes:
                e.store(m, _contiguous_offset(full, cidx, always=tuple(cidx)), "mask", body, "    ", names[m])
        last = names[chain[-1]] if chain else names[n]
        body.append(f"    {v} = {last}.to({TL[d.name]}).to(tl.float32)" if d.name in ("float16", "bfloat16") else
                    f"    {v} = {last}")
    vec = set(idx)
    _epilogue(e, g, u, n, out, idx, vec, body, done=list(views) + sums + chain)
    off = _contiguous_offset(out, idx, always=tuple(idx))
    for v in u.writes:
        if v in chain:
            continue                 # stored per view above
        if v in sums:      # once per output channel: by the programs of the first column tile
            body.append(f"    {v} = bsum")
            e.store(v, f"grp * {M} + offs_m", f"offs_m < {M} - pid_n * {M}", body, "    ")
        else:
            e.store(v, off, "mask", body, "    ")
    return e, body, ["BLOCK_M", "BLOCK_N", "BLOCK_K"]


def _reshape_groups(src, dst):
    """[(src dims, dst dims)]: the fewest runs of dimensions of equal size products that a
    reshape from src to dst maps onto each other (size-1 dimensions left out)."""
    si = [d for d, n in enumerate(src) if n != 1]
    di = [d for d, n in enumerate(dst) if n != 1]
    out, a, b = [], 0, 0
    while a < len(si) and b < len(di):
        sd, dd = [si[a]], [di[b]]
        ps, pd = src[si[a]], dst[di[b]]
        while ps != pd:
            if ps < pd:
                a += 1
                sd.append(si[a])
                ps *= src[si[a]]
            else:
                b += 1
                dd.append(di[b])
                pd *= dst[di[b]]
        out.append((sd, dd))
        a += 1
        b += 1
    return out


def _view_index(g, x, idx, fresh, lines, indent):
    """The index expressions into the source of view x (reshape or as_strided of a
    contiguous value) of x's element at `idx`."""
    a = g[x]
    src = refs(a["args"])[0]
    S, X = tuple(g[src]["shape"]), tuple(a["shape"])
    out = ["0"] * len(S)
    if a["op"] == "reshape":
        for sd, dd in _reshape_groups(S, X):
            if len(sd) == 1 and len(dd) == 1:
                out[sd[0]] = idx[dd[0]]
                continue
            terms, inner = [], 1
            for d in reversed(dd):
                terms.append(idx[d] if inner == 1 else f"{idx[d]} * {inner}")
                inner *= X[d]
            flat = fresh()
            lines.append(f"{indent}{flat} = {' + '.join(reversed(terms))}")
            names = [fresh() for _ in sd]
            lines += [indent + ln for ln in _digits(flat, [S[d] for d in sd], names)]
            for d, nm in zip(sd, names):
                out[d] = nm
        return out
    p = a["params"]
    terms = [f"{idx[d]} * {st}" for d, (n, st) in enumerate(zip(X, p["strides"])) if n != 1 and st != 0]
    flat = fresh()
    lines.append(f"{indent}{flat} = {' + '.join(terms + [str(p['offset'])])}")
    keep = [d for d, n in enumerate(S) if n != 1]
    names = [fresh() for _ in keep]
    lines += [indent + ln for ln in _digits(flat, [S[d] for d in keep], names)]
    for d, nm in zip(keep, names):
        out[d] = nm
    return out


def _cone_lines(e, g, cone, dims, mask, zero, tag, lines, indent):
    """Lines computing an elementwise chain (a _Cone) at the index expressions `dims` (one
    per dimension of cone.root); returns the name of the root's value. The chain's inputs
    are loaded under `mask` (None: unmasked), their pointers given the tile's shape by adding
    `zero` (an int32 block of zeros)."""
    nodes = set(cone.nodes)
    count = [0]

    def fresh():
        count[0] += 1
        return f"{tag}_{count[0]}"
    if mask:
        lines.append(f"{indent}{tag}_zero = {zero}")
        zero = f"{tag}_zero"
    idx_of = {cone.root: list(dims)}
    for m in reversed(cone.nodes):         # from the root out: a node after all its users
        a = g[m]
        if m not in idx_of:
            raise AssertionError(f"Triton codegen: {m} in the cone of {cone.root} has no index")
        if a["op"] in _CONE_VIEWS:
            idx_of[refs(a["args"])[0]] = _view_index(g, m, idx_of[m], fresh, lines, indent)
        else:
            for x in refs(a["args"]):
                if x in nodes:
                    idx_of[x] = idx_of[m]
    names, loaded = {}, {}
    for m in cone.nodes:
        a = g[m]
        xs = refs(a["args"])
        if a["op"] in _CONE_VIEWS:
            names[m] = names[xs[0]]
            continue
        shape = tuple(a["shape"])
        for x in xs:
            if x in nodes:
                continue
            key = (x, tuple(idx_of[m]), len(shape))
            if key not in loaded:
                nm = loaded[key] = fresh()
                terms = e.offset(x, shape, idx_of[m])
                ptr = e.param(f"{x}_ptr", ("ptr", x))
                dt = g[x]["dtype"]
                cast = f".to({_ctype(dt)})" if _ctype(dt) != TL[dt.name] else ""
                if terms and mask:
                    lines.append(f"{indent}{nm} = tl.load({ptr} + {zero} + {' + '.join(terms)}, mask={mask}, "
                                 f"other=0){cast}")
                elif terms:
                    lines.append(f"{indent}{nm} = tl.load({ptr} + {' + '.join(terms)}){cast}")
                else:
                    lines.append(f"{indent}{nm} = tl.load({ptr}){cast}")
            names[x] = loaded[key]
        names[m] = fresh()
        e.compute(m, idx_of[m], lines, indent, names=names, out=names[m])
    return names[cone.root]


def _atomic_add(pointers, value):
    """An atomic add of value at pointers under the kernel's mask, both broadcast to the mask's
    shape: where every operand is one element (a one-element index) the mask is still a block,
    and Triton before 3.9 rejects an atomic whose mask and value differ in shape."""
    return f"tl.atomic_add(tl.broadcast_to({pointers}, mask.shape), tl.broadcast_to({value}, mask.shape), mask=mask)"


def _emit_index_add(g, u, name):
    """getitem_backward(g, idx, key) with key = (:, ..., idx, :, ...): out[..., idx[j], ...] += g[..., j, ...]."""
    e = _Emitter(g)
    n = u.root
    a = g[n]
    grad, index = a["args"]
    k = _one_index_dim(a["params"]["key"])
    gshape, ishape, oshape = tuple(g[grad]["shape"]), tuple(g[index]["shape"]), tuple(a["shape"])
    u.numel = _numel(gshape)
    body = ["    pid = tl.program_id(0)",
            "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
            f"    mask = offsets < {u.numel}"]
    lines, idx = _index_lines([f"i{d}" for d in range(len(gshape))], gshape, "offsets", "    ")
    body += lines
    vec = set(i for i in idx if i) | {"offsets"}
    e.load(grad, gshape, idx, vec, "mask", body, "    ")
    e.load(index, ishape, idx[k:k + len(ishape)], vec, "mask", body, "    ")
    # a negative index counts from the end, as in numpy
    body.append(f"    {index} = tl.where({index} < 0, {index} + {oshape[k]}, {index})")
    target = idx[:k] + [str(index)] + idx[k + len(ishape):]
    off = _contiguous_offset(oshape, target, always=(str(index),))
    ptr = e.param(f"{n}_out_ptr", ("out", n))
    ty = TL[a["dtype"].name]
    body.append(f"    {_atomic_add(f'{ptr} + {off}', f'{grad}.to({ty})')}")
    return e, body, ["BLOCK_SIZE"]


def _key_domain(g, n):
    """The shape of x[key] for a getitem_backward / index_put node n (the positions it adds to)."""
    a = g[n]
    xs = refs(a["args"])
    idx = xs[1:] if _lowering(a).kind == "index_add" else xs[2:]
    dummy = np.broadcast_to(np.empty((), dtype=np.int8), tuple(a["shape"]))
    arrays = [np.zeros(tuple(g[i]["shape"]), dtype=np.int64) for i in idx]
    return tuple(np_index(dummy, a["params"]["key"], arrays).shape)


def _positions(torch, g, n, env, dev):
    """out's flat position of each element of x[key] (int64, contiguous over x[key]'s shape):
    torch indexes a range of positions with the key, as the forward getitem (glue) indexes
    the values; the kernel adds the values at these positions."""
    a = g[n]
    xs = a["args"]
    idx = [env[v] for v in (xs[1:] if _lowering(a).kind == "index_add" else xs[2:])]
    shape = tuple(a["shape"])
    grid = torch.arange(_numel(shape), dtype=torch.int64, device=dev).reshape(shape)
    return grid[index_key(a["params"]["key"], idx)].contiguous()


def _emit_index_scatter(g, u, name):
    """getitem_backward(g, *idx, key) (adds g into zeros) or index_put(x, v, *idx, key,
    accumulate=True) (adds v into a copy of x) with any key: out.flat[pos[j]] += value[j], where
    pos (made by the launcher, `_positions`) is each element's flat position in out."""
    e = _Emitter(g)
    n = u.root
    a = g[n]
    val = a["args"][0] if _lowering(a).kind == "index_add" else a["args"][1]
    dom = _key_domain(g, n)
    u.numel = _numel(dom)
    body = ["    pid = tl.program_id(0)",
            "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
            f"    mask = offsets < {u.numel}"]
    lines, idx = _index_lines([f"i{d}" for d in range(len(dom))], dom, "offsets", "    ")
    body += lines
    vec = set(i for i in idx if i) | {"offsets"}
    out_ty = TL[a["dtype"].name]
    if isinstance(val, V):
        e.load(val, dom, idx, vec, "mask", body, "    ")
        value = f"{val}.to({out_ty})"
    else:
        value = f"tl.full([BLOCK_SIZE], {lit(val)}, {out_ty})"
    pos = e.param(f"{n}_pos_ptr", ("pos", n))
    body.append(f"    pos = tl.load({pos} + offsets, mask=mask, other=0)")
    ptr = e.param(f"{n}_out_ptr", ("out", n))
    body.append(f"    {_atomic_add(f'{ptr} + pos', value)}")
    return e, body, ["BLOCK_SIZE"]


def _emit_scatter(g, u, name):
    low = _lowering(g[u.root])
    if low.kind == "index_put" or low.kind == "index_add" and _one_index_dim(g[u.root]["params"]["key"]) is None:
        return _emit_index_scatter(g, u, name)
    if low.kind == "index_add":
        return _emit_index_add(g, u, name)
    e = _Emitter(g)
    n = u.root
    a = g[n]
    x, index, src = a["args"]
    dim = a["params"]["dim"]
    ishape, oshape = tuple(g[index]["shape"]), tuple(a["shape"])
    u.numel = _numel(ishape)
    body = ["    pid = tl.program_id(0)",
            "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
            f"    mask = offsets < {u.numel}"]
    lines, idx = _index_lines([f"i{d}" for d in range(len(ishape))], ishape, "offsets", "    ")
    body += lines
    vec = set(i for i in idx if i) | {"offsets"}
    e.load(index, ishape, idx, vec, "mask", body, "    ")
    if isinstance(src, V):
        # src may be larger than index: its leading block is read, at index's coordinates
        terms = []
        for j, size in enumerate(g[src]["shape"]):
            if size != 1 and idx[j] is not None:
                terms.append(f"{idx[j]} * " + e.param(f"stride_{src}_{j}", ("stride", src, j)))
        ptr = e.param(f"{src}_ptr", ("ptr", src))
        d = g[src]["dtype"]
        cast = f".to({_ctype(d)})" if _ctype(d) != TL[d.name] else ""
        off = " + ".join(terms)
        body.append(f"    {src} = tl.load({ptr}{' + ' + off if off else ''}, mask=mask, other=0){cast}" if off else
                    f"    {src} = tl.load({ptr}){cast}")
        value = str(src)
    else:
        value = f"tl.full([BLOCK_SIZE], {lit(src)}, {_ctype(a['dtype'])})"
    target = list(idx)
    target[dim] = str(index)
    off = _contiguous_offset(oshape, target, always=(str(index),))
    ptr = e.param(f"{n}_out_ptr", ("out", n))
    store = f"{value}.to({TL[a['dtype'].name]})"
    if a["params"].get("reduce") == "add":
        body.append(f"    {_atomic_add(f'{ptr} + {off}', store)}")
    else:
        body.append(f"    tl.store({ptr} + {off}, {store}, mask=mask)")
    return e, body, ["BLOCK_SIZE"]


# == configs ===========================================================================================

def interpreting():
    return os.environ.get("TRITON_INTERPRET") == "1"


# (kind) -> candidate configs; under the interpreter the first one, untimed
CONFIGS = {
    "pointwise": [{"BLOCK_SIZE": 1024}, {"BLOCK_SIZE": 256}, {"BLOCK_SIZE": 4096}],
    "reduce": [{"BLOCK_SIZE": 1024}, {"BLOCK_SIZE": 256}, {"BLOCK_SIZE": 4096}],
    "matmul": [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32},
               {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}],
}
# float32 IEEE and float64 tl.dot run on FMA units, every operand tile in registers: tiles
# whose accumulator and operand tiles fit without spilling, plain matmuls with epilogues and
# the implicit-GEMM convolutions alike (compiled for sm_90 and sm_80 as a launch specialises
# contiguous values; 64x64x32 spills in both)
IEEE_CONFIGS = [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16}, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 8},
                {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}]


# an IEEE convolution that also computes an operand where it loads it (max pooling's gradient),
# several views (max pooling's window offsets) or a bias gradient keeps more live per tile:
# smaller tiles first (32 x 32 x 8 compiles for sm_90 and sm_80 without spilling)
IEEE_HEAVY_CONFIGS = [{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 8}] + IEEE_CONFIGS
# (and on tensor cores, 32 x 32 x 32 for float16/bfloat16/TF32, which compiles to MMA unspilled)
HEAVY_CONFIGS = [{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}] + CONFIGS["matmul"]


def configs(u):
    """The block configs a kernel unit is timed over on a GPU; the first is the one reports
    compile (the sm test holds it to no spills). A convolution computing k > 4 views (k
    accumulators) takes tiles of about 4/k the area, down to 16 x 16."""
    views = len(getattr(u, "views", None) or ())
    heavy = views > 1 or bool(getattr(u, "cones", None) or getattr(u, "bias_sums", None))
    if u.kind == "matmul" and getattr(u, "precision", "") == ', input_precision="ieee"':
        out = IEEE_HEAVY_CONFIGS if heavy else IEEE_CONFIGS
    elif u.kind == "matmul" and heavy:
        out = HEAVY_CONFIGS
    else:
        out = CONFIGS[u.kind]
    if views > 4:
        shrunk = []
        for c in out:
            c = dict(c)
            while c["BLOCK_M"] * c["BLOCK_N"] * views > 4 * out[0]["BLOCK_M"] * out[0]["BLOCK_N"] and \
                    max(c["BLOCK_M"], c["BLOCK_N"]) > 16:
                big = "BLOCK_M" if c["BLOCK_M"] >= c["BLOCK_N"] else "BLOCK_N"
                c[big] //= 2
            if c not in shrunk:
                shrunk.append(c)
        out = shrunk
    if _dot_min_k() > 8 and u.kind == "matmul":
        out = [dict(c, BLOCK_K=max(c["BLOCK_K"], _dot_min_k())) for c in out]
        out = [c for i, c in enumerate(out) if c not in out[:i]]
    return out


@functools.lru_cache(maxsize=None)
def _old_triton():
    """Triton before 3.9: its tl.dot takes no K tile under 16, and it compiles the constant -0.0
    as +0.0 (a zero constant becomes the type's null value) and `-x` as `0 - x` (+0.0 for x = 0)."""
    import triton  # lazy: triton is optional
    return tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 9)


def _dot_min_k():
    """The smallest K tile tl.dot takes: 8 from Triton 3.9 on, 16 before (the 8-deep IEEE tiles
    above become 16-deep there)."""
    return 16 if _old_triton() else 8


# a -0.0 literal in a kernel's body (generated code writes no unary minus of a value)
_NEG_ZERO = re.compile(r"(?<![\w.])-0\.0(?![\d.eE])")


# Compiler options of every kernel. No FP contraction: Triton fuses a*b+c into one FMA by default,
# which rounds once where the op table's kernels (and torch's eager ops) round the product and
# the sum each: a compiled program would give other bits than the eager ops it replaces.
KERNEL_OPTIONS = {"enable_fp_fusion": False}
INTERPRET_CONFIGS = {"pointwise": {"BLOCK_SIZE": 128}, "reduce": {"BLOCK_SIZE": 32},
                     "matmul": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}}
_TUNED = {}      # (kernel source hash, kernel name) -> config: kernels are generated per shape


def _autotune(key, kind, run, choices=None):
    cfg = _TUNED.get(key)
    if cfg is not None:
        return cfg
    if interpreting():
        cfg = INTERPRET_CONFIGS[kind]
    else:
        from triton.testing import do_bench  # lazy: triton is optional
        best = None
        for c in choices or CONFIGS[kind]:
            try:
                t = do_bench(lambda: run(c), warmup=5, rep=20)
            except Exception:           # a config the device cannot hold (shared memory, registers)
                continue
            if best is None or t < best[0]:
                best = (t, c)
        if best is None:
            raise RuntimeError(f"no Triton config runs kernel {key[1]}")
        cfg = best[1]
    _TUNED[key] = cfg
    return cfg


# == the program =========================================================================================

class TritonProgram:
    """A lowered graph: call it with one tensor per graph input; returns the outputs (torch)."""

    def __init__(self, graph, units, source, module):
        self.graph = graph
        self.units = units
        self.source = source
        self.module = module
        self.kernels = [u for u in units if u.kind != "glue"]
        self._fixed = {}

    @property
    def kernel_names(self):
        return [u.name for u in self.kernels]

    def __call__(self, *args):
        import torch  # lazy: torch is optional
        env = {}
        for v, x in zip(self.graph.inputs, args):
            env[v] = _as_torch(torch, x)
        for v in self.graph.inputs[len(args):]:
            if v in self._fixed:
                env[v] = self._fixed[v]
                continue
            value = self.graph[v].get("value")
            if value is None:
                raise TypeError(f"missing argument for graph input {v}")
            env[v] = _as_torch(torch, value)
            if self.graph[v].get("fixed"):       # a decomposition's constant: copied to the device once
                self._fixed[v] = env[v]
        if env:
            _DEVICE[0] = next(iter(env.values())).device
        for u in self.units:
            u.run(torch, env)
        return [None if o is None else env[o] for o in self.graph.outputs]

    @property
    def plan(self):
        """The launcher's steps, one line each: kernels with what they read and write, glue ops."""
        lines = [f"# launcher for {self.graph.name}({', '.join(self.graph.inputs)})"]
        for u in self.units:
            if u.kind == "glue":
                a = self.graph[u.root]
                how = "view" if a["op"] == "proj" or _glue_of(a).view else "copy"
                lines.append(f"{u.root} = {a['op']}({', '.join(map(str, refs(a['args'])))})  # glue ({how})")
            else:
                lines.append(f"{', '.join(u.writes)} = {u.name}({', '.join(u.reads)})")
        outs = ", ".join(str(o) for o in self.graph.outputs)
        lines.append(f"return ({outs})")
        return "\n".join(lines)

    def __repr__(self):
        return f"<TritonProgram {self.graph.name}: {len(self.kernels)} kernels>"


def _as_torch(torch, x):
    """A torch tensor for a graph input (numpy arrays and tracegrad tensors are wrapped;
    on a GPU they are copied to it)."""
    if isinstance(x, torch.Tensor):
        return x
    a = np.asarray(getattr(x, "_data", x))
    if a.base is not None or any(s < 0 for s in a.strides):
        # torch.from_numpy of a numpy view gets a storage of the view's size, which the
        # interpreter's host copy (by storage) rejects; negative strides torch cannot hold
        a = np.array(a, copy=True)
    t = torch.from_numpy(a)
    if not interpreting() and torch.cuda.is_available():
        t = t.cuda()
    return t


def _glue_of(a):
    """The Glue of a node run by the launcher (a Scatter's fallback for its keys with no index tensor)."""
    low = _lowering(a)
    return low.glue if isinstance(low, Scatter) else low


def _glue_runner(g, u):
    n = u.root
    a = g[n]

    if a["op"] == "proj":
        def run(torch, env):
            env[n] = env[a["args"][0]][a["params"]["index"]]
        return run
    fn = _glue_of(a).fn

    def run(torch, env):
        args = [_resolve(x, env) for x in a["args"]]
        out = fn(torch, _DEVICE[0], *args, **a["params"])
        env[n] = out
    return run


def _resolve(x, env):
    if isinstance(x, V):
        return env[x]
    if isinstance(x, tuple):
        return tuple(_resolve(y, env) for y in x)
    if isinstance(x, list):
        return [_resolve(y, env) for y in x]
    return x


def _kernel_runner(g, u, kernel):
    u.root_args = refs(g[u.root]["args"])
    def arg_values(torch, env, outs):
        vals = []
        for _, what in u.params:
            if what[0] == "ptr":
                vals.append(env[what[1]])
            elif what[0] == "stride":
                vals.append(env[what[1]].stride(what[2]))
            elif what[0] == "pos":
                vals.append(outs["pos"])
            elif what[0] == "contig":
                vals.append(bool(env[what[1]].is_contiguous()))
            elif what[0] == "stride2":
                v, j, role = what[1], what[2], what[3]
                t = env[v]
                if t.ndim == 1:
                    t = t.unsqueeze(0) if role == "a" else t.unsqueeze(-1)
                vals.append(t.stride(j))
            else:
                vals.append(outs[what[1]])
        return vals

    def grid_of(cfg):
        if u.kind in ("pointwise", "scatter"):
            return ((u.numel + cfg["BLOCK_SIZE"] - 1) // cfg["BLOCK_SIZE"],)
        if u.kind == "reduce":
            return ((u.M + u.rows - 1) // u.rows,)
        return ((u.M + cfg["BLOCK_M"] - 1) // cfg["BLOCK_M"], (u.N + cfg["BLOCK_N"] - 1) // cfg["BLOCK_N"], u.batch)

    def run(torch, env):
        dev = None
        for x in u.reads:
            if isinstance(env[x], torch.Tensor):
                dev = env[x].device
                break
        dev = dev or _DEVICE[0]
        outs = {}
        for w in u.writes:
            shape = tuple(g[w]["shape"])
            if u.kind == "matmul" and w == u.root:
                shape = u.out2
            outs[w] = torch.empty(shape, dtype=torch_dtype(torch, g[w]["dtype"]), device=dev)
        for w in getattr(u, "col_stages", ()):
            outs[w].zero_()           # column sums: each program adds its partials
        if u.kind == "scatter":       # the kernel writes into a copy of x (adds into zeros)
            if _lowering(g[u.root]).kind == "index_add":
                outs[u.root].zero_()
            else:
                outs[u.root].copy_(env[u.root_args[0]])
            if any(what[0] == "pos" for _, what in u.params):
                outs["pos"] = _positions(torch, g, u.root, env, dev)
            if u.numel == 0:
                env[u.root] = outs[u.root]
                return
        vals = arg_values(torch, env, outs)
        if u.kind == "reduce" and u.whole:
            cfg = {"BLOCK_SIZE": u.block}
        elif u.kind == "scatter":     # untuned: timing runs would add into the output again
            cfg = INTERPRET_CONFIGS["pointwise"] if interpreting() else {"BLOCK_SIZE": 256}
        elif all(grid_of(INTERPRET_CONFIGS[u.kind])):
            cfg = _autotune(u.key, u.kind, lambda c: kernel[grid_of(c)](*vals, **c, **KERNEL_OPTIONS), configs(u))
        else:
            cfg = INTERPRET_CONFIGS[u.kind]
        grid = grid_of(cfg)
        if all(grid):                  # an empty tensor launches nothing
            kernel[grid](*vals, **cfg, **KERNEL_OPTIONS)
        for w in u.writes:
            out = outs[w]
            if tuple(out.shape) != tuple(g[w]["shape"]):
                out = out.reshape(tuple(g[w]["shape"]))
            env[w] = out
    return run


def lower(graph, max_row_block=None):
    """Lower an IR graph to Triton kernels and a launcher (`TritonProgram`). The graph holds
    no `Decompose`-lowered node: tracegrad/decompositions.py rewrites those first (its
    `lower` does both), since a rule is tracegrad ops traced on symbolic tensors.

    max_row_block: the longest reduction row a kernel keeps whole in registers (longer
    rows loop over blocks); 64 under the interpreter, 4096 on a GPU."""
    if max_row_block is None:
        max_row_block = 64 if interpreting() else 4096
    for n in graph.ops():
        if graph[n]["op"] != "proj" and isinstance(_lowering(graph[n]), Decompose):
            raise NotImplementedError(
                f"triton lowering: {n} = {graph[n]['op']}(...) is lowered by decomposition; lower the graph "
                "with tracegrad.decompositions.lower, which rewrites such nodes first")
    g = graph
    solo = set()
    while True:
        try:
            units = _group(g, max_row_block, frozenset(solo))
            break
        except _Cycle as e:
            if not set(e.roots) - solo:
                raise              # nothing left to take apart: the caller runs the graph otherwise
            solo |= set(e.roots)
    pieces = []
    used_names = set()
    helpers = set()
    kernel_units = []
    for u in units:
        if u.kind == "glue":
            u.run = _glue_runner(g, u)
            continue
        name = _name_for(g, u.members, u.kind)
        base, k = name, 1
        while name in used_names:
            name = f"{base[:-len('_kernel')]}_{k}_kernel"
            k += 1
        used_names.add(name)
        u.name = name
        if u.kind == "pointwise":
            e, body, consts = _emit_pointwise(g, u, name)
        elif u.kind == "reduce":
            e, body, consts = _emit_reduction(g, u, name, max_row_block)
        elif u.kind == "scatter":
            e, body, consts = _emit_scatter(g, u, name)
        else:
            e, body, consts = _emit_matmul(g, u, name)
        u.params = e.params
        helpers |= e.helpers
        if _NEG_ZERO.search("\n".join(body)) and _old_triton():
            raise NotImplementedError(
                f"triton lowering: {name} needs the constant -0.0, which Triton before 3.9 compiles as +0.0 "
                f"(the sign of a zero result would differ from torch's); install triton>=3.9")
        text = "\n".join(["@triton.jit"] + e.signature(name, consts) + _comment(g, _computed(u)) + body) + "\n"
        u.source = text
        pieces.append(text)
        kernel_units.append(u)
    head = "import triton\nimport triton.language as tl\n"
    todo = list(helpers)
    while todo:                    # the helpers a helper calls, and theirs
        h = todo.pop()
        for h2 in _HELPERS:
            if h2 not in helpers and h2 + "(" in _HELPERS[h]:
                helpers.add(h2)
                todo.append(h2)
    helper_src = [_HELPERS[h] for h in _HELPERS if h in helpers]
    source = head + "\n\n" + "\n\n".join(helper_src + pieces)
    module = _load(source) if kernel_units else None
    for u in kernel_units:
        # the tuned config is kept per kernel source, which spells out the shapes
        u.key = (hashlib.sha1(u.source.encode()).hexdigest()[:16], u.name, interpreting())
        u.run = _kernel_runner(g, u, getattr(module, u.name))
    return TritonProgram(g, units, source, module)


_MODULES = {}


def _load(source):
    """Import generated source from a file (triton.jit reads a kernel's source from its file)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    key = (digest, interpreting())       # the decorator picks interpreted or compiled kernels
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    d = os.path.join(tempfile.gettempdir(), "tracegrad_triton")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"kernels_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"tracegrad_triton_{digest}_{int(key[1])}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _MODULES[key] = mod
    return mod

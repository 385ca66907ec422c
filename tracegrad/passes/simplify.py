"""Algebraic simplification that keeps every result bit for bit.

Each rewrite gives the IEEE result the unrewritten graph gives in the value's own dtype
(inf, nan and the sign of zero included): no reassociation, no cancellation, no constant
moved across a rounding unless that is exact.

- `x ** n` for n in 2, 3, -1, -2, 0.5 becomes the multiplications (or sqrt, reciprocal)
  the pow kernel runs for these exponents (numpy's pow takes a slow path for small
  integer exponents on negative values: up to 170x slower); not for bfloat16, whose pow
  rounds once where the multiplications would round after each;
- a folded constant or `full` that holds one number in every element, and `x ** 0`,
  become that number as a literal where the other operand has the result's type (the
  seeds of a derivative taken inside a compiled function: `ones * x`);
- `x ** 1` becomes `x`;
- `x * 1`, `1 * x`, `x / 1`, `--x`, `x - 0.0` and `x + -0.0` become `x` where the type is
  unchanged and the value is not an output (outputs never alias each other); `x + 0.0`
  stays (it is +0.0 where x is -0.0), and so does `x - -0.0`;
- `c * x` and `c + x` become `x * c`, `x + c` (one form for common subexpressions), and
  `(x * c1) * c2` folds its constants where both are powers of two of at least 1 in size
  (then both roundings are exact);
- around the scatter_add that differentiates a gather, where each position receives at
  most one value: `sum(scatter_add(0, i, s))` is `s + 0.0`, and `scatter_add(0, i, s) - y`
  scatters into `0.0 - y` (cross-entropy's backward), `... + y` into `y + 0.0`;
- `-(x * y)` becomes `x * -y` where y is the smaller factor (negation is exact);
- `gather(x - r, i, d)` with r constant along d becomes `gather(x, i, d) - r`;
- `y + y` becomes `y * 2` (the same rounding of the same value);
- `permute(permute(x))` becomes one permute, or `x` where the two cancel;
- elementwise ops move before broadcasts (`expand(x) / c -> expand(x / c)`): they touch
  fewer elements and compute the same values.

Before autodiff (`simplify_before_autodiff`, the forward pipeline) the power lowering,
the moves across broadcasts and gathers, and `y + y -> y * 2` wait: they would
change the derivative autodiff takes (pow's rule rounds otherwise than the product
rule's; y's gradient would be t + 2g where eager adds (t + g) + g), so compiled gradients
would no longer be eager autograd's.

Not done, because they change results: `(x + c) - c -> x`, `x + y - x -> y`, moving a
scale out of a sum (`sum(x * c) -> sum(x) * c` overflows where the unscaled sum does,
and rounds differently), `(x + y) + y -> x + 2 * y`, `x ** 4 -> (x * x) * (x * x)`,
`(a @ b).T -> b.T @ a.T` (BLAS adds the products in another order when the operands swap
roles: 217 of 896 shapes differ in the last bits). A weight's gradient comes out contiguous
without it: matmul's derivative picks its product by the operand's layout, eagerly and
traced alike, as torch does.
"""
import math

import numpy as np

from ..ir.symbolic import surely_equal

from .._dtype import round_bfloat16

from ..ops.primitives import PRIMITIVES as P
from ..ir.graph import V
from .rewrite import rewrite, add, literal_key


def _lit(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _through_expand(b, a, args):
    """f(expand(x), c...) -> expand(f(x, c...)) for elementwise f with literal other
    arguments: the op runs on the small value, once per row instead of per element."""
    prim = a["prim"]
    vs = [x for x in args if isinstance(x, V)]
    if prim is None or not prim.elementwise or len(vs) != 1 or a["op"] == "convert" or \
            any(not isinstance(x, V) and not _lit(x) for x in args):
        return None
    e = b[vs[0]]
    if e["op"] != "expand" or not surely_equal(e["shape"], a["shape"]):
        return None
    src = e["args"][0]
    small = dict(a, shape=b[src]["shape"])
    inner = add(b, prim, tuple(src if isinstance(x, V) else x for x in args), small, **a["params"])
    return add(b, e["prim"], (inner,), a, **e["params"])


def _gather_before_shift(b, a, args):
    """gather(x - r, i, d) -> gather(x, i, d) - r where r is constant along d (one value
    per row, as the logsumexp of a log_softmax): only the gathered elements are shifted,
    and the full-size subtraction is left to dead code when nothing else reads it."""
    if a["op"] != "gather" or not isinstance(args[0], V) or not isinstance(args[1], V):
        return None
    v = b[args[0]]
    if v["op"] not in ("sub", "add") or not all(isinstance(x, V) for x in v["args"]):
        return None
    x, r = v["args"]
    shape, ndim = v["shape"], len(v["shape"])
    dim = a["params"]["dim"] % ndim
    rs, idx_shape = b[r]["shape"], b[args[1]]["shape"]
    if not surely_equal(b[x]["shape"], shape) or len(rs) != ndim or rs[dim] != 1 or len(idx_shape) != ndim or \
            any(rs[k] != shape[k] or idx_shape[k] != shape[k] for k in range(ndim) if k != dim) or \
            b[x]["dtype"] is not a["dtype"] or b[r]["dtype"] is not a["dtype"]:
        return None
    picked = add(b, a["prim"], (x, args[1]), a, **a["params"])
    return add(b, v["prim"], (picked, r), a)


def _permute_of_permute(b, a, args, is_output, outputs, claimed):
    """permute(permute(x, p), q) -> permute(x, p[q]), or x itself where that is the
    identity (a transpose's derivative transposed back: the gradient of Linear's weight,
    which matmul's derivative makes as (g.T @ x).T for weight.T). An output becomes x only
    where x is a fresh array that no input, view or other output shares (`claimed`: the
    values outputs took so far): then a written-back .grad adopts it instead of copying a view."""
    if a["op"] != "permute" or not isinstance(args[0], V) or b[args[0]]["op"] != "permute":
        return None
    inner = b[args[0]]
    x = inner["args"][0]
    dims = tuple(inner["params"]["dims"][d] for d in a["params"]["dims"])
    if dims == tuple(range(len(dims))):
        if not is_output:
            return x
        prim = b[x]["prim"] if isinstance(x, V) else None
        if prim is None or prim.view or prim.multi or x in outputs or x in claimed:
            return None
        claimed.add(x)
        return x
    return add(b, a["prim"], (x,), a, **dict(a["params"], dims=dims))


def _same_value(b, x, y):
    """x and y are one value, or the same pure op on the same arguments (before CSE
    merges them: the derivative of y * y makes its two terms separately)."""
    if x == y:
        return True
    ax, ay = b[x], b[y]
    return ax["op"] == ay["op"] and ax["op"] != "input" and ax["prim"] is not None and ax["prim"].elementwise and \
        literal_key(ax["args"]) == literal_key(ay["args"]) and literal_key(ax["params"]) == literal_key(ay["params"]) \
        and ax["dtype"] is ay["dtype"]


def _repeated_term(b, a, args):
    """y + y -> y * 2: a value the derivative adds twice (the two factors of y * y); the
    same correctly rounded 2y, overflow and the sign of zero included."""
    if a["op"] != "add" or len(args) != 2 or not all(isinstance(x, V) for x in args) or \
            not a["dtype"].is_floating_point or any(not surely_equal(b[x]["shape"], a["shape"]) or b[x]["dtype"] is not a["dtype"]
                                                   for x in args):
        return None
    if _same_value(b, args[0], args[1]):
        return add(b, P["mul"], (args[1], 2.0), a)
    return None


def _is_zeros(b, v):
    a = b[v]
    return a["op"] == "full" and a["params"].get("value") == 0


def _scatter_add_rules(b, a, args):
    """The gradient of a gather is a scatter_add into zeros. Where the scattered source has
    one element along the scatter dim (each position receives at most one value, so no
    sum changes order):
    sum(scatter_add(0, i, s), d) -> s + 0.0 (the zeros add nothing but turn -0.0 into 0.0),
    scatter_add(0, i, s) - y -> scatter_add(0.0 - y, i, s), scatter_add(0, i, s) + y ->
    scatter_add(y + 0.0, i, s): no zero fill and no extra pass over the result."""
    op = a["op"]
    if op in ("sum", "add", "sub") and args and isinstance(args[0], V):
        sc = b[args[0]]
        if sc["op"] != "scatter" or sc["params"].get("reduce") != "add" or not _is_zeros(b, sc["args"][0]):
            return None
        _, idx, src = sc["args"]
        dim = sc["params"]["dim"] % len(sc["shape"])
        if not isinstance(src, V) or not surely_equal(b[src]["shape"], b[idx]["shape"]) or b[src]["dtype"] is not sc["dtype"] or \
                b[src]["shape"][dim] != 1 or not sc["dtype"].is_floating_point:
            return None
        if op == "sum":
            dims = a["params"].get("dims")
            dims = None if dims is None else tuple(d % len(sc["shape"]) for d in dims)
            full_rows = all(s == t for k, (s, t) in enumerate(zip(b[src]["shape"], sc["shape"])) if k != dim)
            if dims == (dim,) and full_rows and a["params"].get("keepdim") and a["dtype"] is sc["dtype"]:
                return add(b, P["add"], (src, 0.0), b[src])
            return None
        y = args[1]
        if not isinstance(y, V) or not surely_equal(b[y]["shape"], sc["shape"]) or b[y]["dtype"] is not sc["dtype"] or \
                not surely_equal(a["shape"], sc["shape"]) or a["dtype"] is not sc["dtype"]:
            return None
        base = add(b, P["rsub"], (y, 0.0), b[y]) if op == "sub" else add(b, P["add"], (y, 0.0), b[y])
        return add(b, sc["prim"], (base, idx, src), sc, **sc["params"])
    if op == "neg" and isinstance(args[0], V):
        return _negate_small(b, args[0])
    return None


def _negate_small(b, v):
    """-v as x * (-y) where v = x * y and y is the smaller (broadcast) factor: the sign of
    a product is the sign of either factor flipped, exactly."""
    a = b[v]
    if a["op"] == "mul":
        x, y = a["args"]
        if isinstance(x, V) and isinstance(y, V) and surely_equal(b[x]["shape"], a["shape"]) and \
                math.prod(b[y]["shape"]) < math.prod(a["shape"]) and b[y]["dtype"] is a["dtype"] and \
                b[x]["dtype"] is a["dtype"]:
            return add(b, P["mul"], (x, add(b, P["neg"], (y,), b[y])), a)
    return None


def _uniform(b, v, before_autodiff=False):
    """The Python float every element of value v holds, where that is known at compile time.
    Before autodiff not `x ** 0`: as a literal it would cut x out of the graph, and x's
    gradient would be None where torch's (and eager's) is zeros."""
    if not isinstance(v, V):
        return None
    c = b[v]
    if not c["dtype"].is_floating_point:
        return None
    if c["op"] == "input":
        if not c.get("folded"):
            return None
        d = c["value"]            # fold_constants' array (the front end binds it as a tensor later)
        if not isinstance(d, np.ndarray):
            d = d._data
        if d.size == 0:
            return None
        first = d.flat[0]
        same = bool(np.all(d == first)) and bool(np.all(np.signbit(d) == np.signbit(first)))   # 0.0 is not -0.0
        return float(first) if np.isfinite(first) and same else None
    if c["op"] == "full" and _lit(c["params"].get("value")):
        # the value as the full array holds it, rounded to its dtype (0.1 in float16 is not 0.1)
        held = float(np.asarray(c["params"]["value"], dtype=c["dtype"].np))
        if c["dtype"].name == "bfloat16":
            held = float(round_bfloat16(np.float32(held)))
        return held if np.isfinite(held) else None
    if c["op"] == "pow" and len(c["args"]) == 2 and _lit(c["args"][1]) and c["args"][1] == 0 and not before_autodiff:
        return 1.0
    return None


_LITERAL_OPERAND = frozenset({"mul", "add", "sub", "div"})


def _literal_args(b, a, args, before_autodiff=False):
    """args with a uniform operand as a literal, or None: only where the other operand
    alone gives the result its shape and dtype."""
    if a["op"] not in _LITERAL_OPERAND or len(args) != 2 or not a["dtype"].is_floating_point:
        return None
    for k in (0, 1):
        other = args[1 - k]
        if isinstance(other, V) and surely_equal(b[other]["shape"], a["shape"]) and b[other]["dtype"] is a["dtype"]:
            c = _uniform(b, args[k], before_autodiff)
            if c is not None:
                return (c, other) if k == 0 else (other, c)
    return None


def _is_unit(op, c, dtype):
    """Whether `x op c` is x itself for every x of dtype, -0.0, inf and nan included: x * 1,
    x / 1, x + -0.0, x - 0.0 (x + 0.0 is 0.0 where x is -0.0); x + 0 for integers."""
    if not _lit(c) or c != 0 and c != 1:
        return False
    if op in ("mul", "div"):
        return c == 1
    negative_zero = c == 0 and math.copysign(1.0, c) < 0
    if op == "add":
        return negative_zero or c == 0 and not dtype.is_floating_point
    if op == "sub":
        return c == 0 and not negative_zero
    return False


def _exact_scales(c1, c2, dtype):
    """Whether (x * c1) * c2 == x * (c1 * c2) for every x of dtype: both powers of two of at
    least 1 in size (scaling up is exact until it overflows, and both forms overflow
    together) whose product the dtype holds."""
    def up(c):
        m, e = math.frexp(abs(float(c)))
        return m == 0.5 and e >= 1
    if not (up(c1) and up(c2)):
        return False
    p = abs(float(c1) * float(c2))
    big = 65504.0 if dtype.name == "float16" else float(np.finfo(np.float64 if dtype.name == "float64" else
                                                                  np.float32).max)
    return p <= big


def simplify_before_autodiff(graph):
    """simplify without the rewrites that would change the derivative autodiff then takes:
    lowering a power to products (pow's rule `g * n * x ** (n - 1)` and the product
    rule round differently), and moving an op across a broadcast or a gather (the gradient
    would be reduced before the op instead of after), and y + y -> y * 2 (y's gradient would be
    t + 2g where the derivative of y + y adds (t + g) + g: another rounding where y has another
    use). What is left keeps gradients bit for bit too (x * 1, ...); the full simplify runs on
    the forward and backward programs after autodiff."""
    return simplify(graph, before_autodiff=True)


def _shared_by_outputs(graph, outputs):
    """The outputs and every value whose memory an output shares, through views and detach (a
    no_grad op on a tensor that requires grad traces as detach(op(...))): these stay arrays of
    their own, since `x * 1 -> x` under detach(x * 1) made the output detach(x), an alias of the
    argument x that later writes to x changed."""
    shared, todo = set(outputs), list(outputs)
    while todo:
        a = graph[todo.pop()]
        if a["op"] == "detach" or a["prim"] is not None and a["prim"].view:
            for x in a["args"][:1]:
                if isinstance(x, V) and x not in shared:
                    shared.add(x)
                    todo.append(x)
    return shared


def simplify(graph, before_autodiff=False):
    outputs = set(o for o in graph.outputs if o is not None)
    shared = _shared_by_outputs(graph, outputs)
    claimed = set()

    def same_type(b, v, a):
        return isinstance(v, V) and surely_equal(b[v]["shape"], a["shape"]) and b[v]["dtype"] is a["dtype"]

    def rule(b, n, a, args):
        lit = _literal_args(b, a, args, before_autodiff)
        if lit is None:
            return body(b, n, a, args)
        new = body(b, n, a, lit)
        return new if new is not None else add(b, a["prim"], lit, a, **a["params"])

    def body(b, n, a, args):
        op = a["op"]
        if before_autodiff:
            moved = _scatter_add_rules(b, a, args) or _permute_of_permute(b, a, args, n in outputs, outputs, claimed)
        else:
            moved = _through_expand(b, a, args) or _scatter_add_rules(b, a, args) or \
                _gather_before_shift(b, a, args) or _permute_of_permute(b, a, args, n in outputs, outputs, claimed) or \
                _repeated_term(b, a, args)
        if moved is not None:
            return moved
        if op == "pow" and not before_autodiff and len(args) == 2 and isinstance(args[0], V) and _lit(args[1]) and \
                b[args[0]]["dtype"].is_floating_point and same_type(b, args[0], a):
            x, e = args
            mul = P["mul"]
            if e == 1:
                return x if n not in shared else None
            if a["dtype"].name == "bfloat16":        # its pow kernel rounds once, the products after each
                return None
            if e == 2:
                return add(b, mul, (x, x), a)
            if e == -1:
                return add(b, P["reciprocal"], (x,), a)
            if a["dtype"].name == "float16":          # torch's float16 pow is float32 pow, rounded once
                return None
            if e == 3:
                return add(b, mul, (add(b, mul, (x, x), a), x), a)
            if e == 0.5:
                return add(b, P["sqrt"], (x,), a)
            if e == -2:
                return add(b, P["reciprocal"], (add(b, mul, (x, x), a),), a)
            return None
        if op in ("mul", "add") and len(args) == 2 and _lit(args[0]) and isinstance(args[1], V) and \
                same_type(b, args[1], a):
            args = (args[1], args[0])              # commutative: value first, so CSE sees one form
            swapped = True
        else:
            swapped = False
        if op == "mul" and len(args) == 2 and isinstance(args[0], V) and _lit(args[1]) and \
                same_type(b, args[0], a) and a["dtype"].is_floating_point:
            x, c = args
            inner = b[x]
            if inner["op"] == op and len(inner["args"]) == 2 and isinstance(inner["args"][0], V) and \
                    _lit(inner["args"][1]) and same_type(b, inner["args"][0], a) and \
                    _exact_scales(inner["args"][1], c, a["dtype"]):
                return add(b, P[op], (inner["args"][0], float(inner["args"][1] * c)), a)
        if swapped:
            if _is_unit(op, args[1], a["dtype"]) and n not in shared:
                return args[0]
            return add(b, P[op], args, a)
        if n in shared or len(args) != 2 and op != "neg":
            return None
        if op == "neg":
            x = args[0]
            if isinstance(x, V) and b[x]["op"] == "neg" and same_type(b, b[x]["args"][0], a):
                return b[x]["args"][0]
            return None
        x, y = args
        if op in ("mul", "add", "sub", "div") and _lit(y) and _is_unit(op, y, a["dtype"]) and same_type(b, x, a):
            return x
        if op in ("mul", "add") and _lit(x) and isinstance(y, V) and same_type(b, y, a):
            if _is_unit(op, x, a["dtype"]):
                return y
            return add(b, P[op], (y, x), a)
        return None
    return rewrite(graph, rule)

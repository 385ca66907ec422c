"""Term collection: sums of products written again as few operations as they need.

A derivative taken by the product rule is a sum of products that share most of their
factors: the backward of `0.044715 * x * x * x` adds three products of the incoming
gradient with two of the three factors, where one product with 3 * 0.044715 * x * x
would do. This pass reads each region of elementwise multiplications, additions,
subtractions, negations and scalings (values of one shape and one float dtype) as
polynomials over the values the region reads ("atoms": inputs, results of other ops,
and sums that are multiplied, which stay whole: a product of sums is never expanded,
so no new cancellation appears); terms with the same factors are added up, and each
value read outside the region is written again by factoring out, greedily, the atom
the most terms share (Horner's rule in several variables), with polynomials that differ
by a constant factor made once. The result replaces the region where it has fewer
operations.

The rewrite reassociates and factors floating-point sums, so its results are not the
unrewritten graph's bit for bit (measured in float32 on GELU's backward: 56% of the
elements differ, by up to 0.5% relative where terms cancel). That is why no compile
pipeline runs it (see passes/__init__.py), and division by a zero literal is left
alone here.
"""
import numpy as np

from ..ir.symbolic import surely_equal
from ..ir.graph import V
from ..ops.primitives import PRIMITIVES as P
from .dead_code import eliminate_dead_code, live_values
from .eliminate_common_subexpressions import eliminate_common_subexpressions
from .rewrite import rewrite

_POLY = frozenset({"add", "sub", "rsub", "mul", "neg", "div"})
MAX_TERMS = 24
MAX_DEGREE = 24        # a longer product (a chain's backward) starts a new region: no quadratic growth


def _lit(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)


def _poly_node(g, n):
    """Whether node n can be read as a polynomial of its arguments."""
    a = g[n]
    if a["op"] not in _POLY or a["params"] or isinstance(a["dtype"], (list, tuple)) or \
            a["dtype"].name not in ("float32", "float64"):      # 16-bit values round after every op
        return False
    vs = [x for x in a["args"] if isinstance(x, V)]
    if not vs or any(not surely_equal(g[x]["shape"], a["shape"]) or g[x]["dtype"] is not a["dtype"] for x in vs):
        return False
    if any(not isinstance(x, V) and not _lit(x) for x in a["args"]):
        return False
    return a["op"] != "div" or not isinstance(a["args"][1], V) and a["args"][1] != 0


def _add(p, q, scale=1.0):
    out = dict(p)
    for m, c in q.items():
        out[m] = out.get(m, 0.0) + scale * c
    return {m: c for m, c in out.items() if c != 0.0}


def _times_monomial(p, mono, coef):
    out = {}
    for m, c in p.items():
        e = dict(m)
        for a, k in mono:
            e[a] = e.get(a, 0) + k
        key = tuple(sorted(e.items()))
        out[key] = out.get(key, 0.0) + c * coef
    return out


class _Emitter:
    """Writes polynomials as ops into graph b, sharing what it made before."""

    def __init__(self, b, like, atom):
        self.b, self.like, self.atom = b, like, atom
        self.made = {}
        self.powers = {}

    def op(self, prim, *args):
        return self.b.add_op(P[prim], tuple(args), {}, self.like["shape"], self.like["dtype"], self.like.get("source"))

    def power(self, a, k):
        key = (a, k)
        if key not in self.powers:
            if k == 1:
                self.powers[key] = self.atom(a)
            else:
                half = self.power(a, k // 2)
                sq = self.op("mul", half, half)
                self.powers[key] = sq if k % 2 == 0 else self.op("mul", sq, self.atom(a))
        return self.powers[key]

    def scaled(self, v, c):
        return v if c == 1.0 else self.op("neg", v) if c == -1.0 else self.op("mul", v, float(c))

    def emit(self, p):
        """A value computing polynomial p, which has a term with a factor."""
        key = frozenset(p.items())
        v = self.made.get(key)
        if v is None:
            v = self.made[key] = self._emit(p)
        return v

    def _emit(self, p):
        const = p.get((), 0.0)
        terms = {m: c for m, c in p.items() if m}
        if len(terms) == 1 and not const:
            (m, c), = terms.items()
            v = None
            for a, k in m:
                f = self.power(a, k)
                v = f if v is None else self.op("mul", v, f)
            return self.scaled(v, c)
        if all(c < 0 for c in terms.values()):       # c - (...) or -(...): one op for the sign
            v = self.emit({m: -c for m, c in terms.items()})
            return self.op("rsub", v, float(const)) if const else self.op("neg", v)
        coefs = sorted(terms.values())
        common = max((c for c in coefs if c != 1.0), key=coefs.count, default=1.0)
        if coefs.count(common) >= 2 and coefs.count(common) > coefs.count(1.0):
            # a factor most terms share, taken out once (each level makes more unit coefficients)
            return self.scaled(self.emit({m: c / common for m, c in p.items()}), common)
        count = {}
        for m in terms:
            for a, _ in m:
                count[a] = count.get(a, 0) + 1
        best = max(sorted(count), key=lambda a: count[a])
        if count[best] >= 2:                         # Horner: best * (what it multiplies) + the rest
            inner, rest = {}, {}
            for m, c in terms.items():
                if any(a == best for a, _ in m):
                    inner[tuple((a, k - 1 if a == best else k) for a, k in m if a != best or k > 1)] = c
                else:
                    rest[m] = c
            v = self.scaled(self.atom(best), inner[()]) if set(inner) == {()} else \
                self.op("mul", self.emit(inner), self.atom(best))
            parts = [rest] if rest else []
        else:
            first = max(terms, key=lambda m: terms[m])   # a positive term first, when there is one
            v = self.emit({first: terms[first]})
            parts = [{m: c} for m, c in terms.items() if m != first]
        for q in parts:
            if all(c < 0 for c in q.values()):
                v = self.op("sub", v, self.emit({m: -c for m, c in q.items()}))
            else:
                v = self.op("add", v, self.emit(q))
        return v if not const else self.op("add", v, float(const))


def collect_terms(graph):
    g = graph
    order = g.nodes()
    poly = {n for n in order if g[n]["op"] != "input" and _poly_node(g, n)}
    if not poly:
        return graph
    outputs = set(o for o in g.outputs if o is not None)

    polys = {}

    def poly_of(x):
        if isinstance(x, V):
            return polys.get(x) or {((x, 1),): 1.0}
        return {(): float(x)}

    def monomial(x):
        return x in polys and len(polys[x]) == 1 and () not in polys[x]

    def as_factor(x):
        """x inside a product: a sum (or anything not a monomial) is an atom."""
        if isinstance(x, V):
            return polys[x] if monomial(x) else {((x, 1),): 1.0}
        return {(): float(x)}

    for n in order:
        if n not in poly:
            continue
        a = g[n]
        op, args = a["op"], a["args"]
        if op == "add":
            p = _add(poly_of(args[0]), poly_of(args[1]))
        elif op == "sub":
            p = _add(poly_of(args[0]), poly_of(args[1]), -1.0)
        elif op == "rsub":
            p = _add(poly_of(args[1]), poly_of(args[0]), -1.0)
        elif op == "neg":
            p = _add({}, poly_of(args[0]), -1.0)
        elif op == "div":
            p = _add({}, poly_of(args[0]), 1.0 / float(args[1]))
        elif not isinstance(args[1], V):             # a scaling
            p = _add({}, poly_of(args[0]), float(args[1]))
        elif not isinstance(args[0], V):
            p = _add({}, poly_of(args[1]), float(args[0]))
        else:                            # a product of monomials (a sum in it is an atom)
            (m1, c1), = as_factor(args[1]).items()
            p = _times_monomial(as_factor(args[0]), m1, c1)
        if len(p) > MAX_TERMS or any(sum(k for _, k in m) > MAX_DEGREE for m in p):
            poly.discard(n)
            continue
        polys[n] = p

    # roots: region values read outside the region, or by a product as a whole sum
    roots = []
    for n in order:
        if n not in poly:
            continue
        users = g.users(n)
        if n in outputs or any(u not in poly for u in users) or \
                any(g[u]["op"] == "mul" and not monomial(n) for u in users):
            roots.append(n)
    roots = [r for r in roots if any(m for m in polys[r])]     # a constant stays as recorded
    if not roots:
        return graph
    root_set = set(roots)
    replaced, emitters = {}, {}

    def rule(b, n, a, args):
        if n not in root_set:
            return None
        key = (a["shape"], a["dtype"])
        em = emitters.get(key)
        if em is None:                   # the walk copies other values under their own names
            em = emitters[key] = _Emitter(b, a, lambda x: replaced.get(x, x))
        em.like = a
        v = em.emit(polys[n])
        if n in outputs and (v in g.nx or v in replaced.values()):
            v = em.op("mul", v, 1.0)                     # outputs never alias another value
        replaced[n] = v
        return v
    b = rewrite(g, rule)
    b = eliminate_dead_code(eliminate_common_subexpressions(b))
    return b if len(b) < len(live_values(graph)) else graph

"""Symbolic sizes: a dimension compiled for any value (torch's automatic dynamic shapes).

A `Sym` is an integer expression over size symbols (`s0`, `s1`, ...) with the value it has
in the call being compiled (its hint). It exists only while a program is built, under
its `ShapeEnv`. Whatever Python learns of its value is recorded there as a guard, which
the program's later calls check before they run it: a comparison (its outcome on the
hints), `bool()`, and the conversions to a plain number (`int()`, `index()`, `float()`,
`hash()`, true division), which specialize the expression to its hint. Arithmetic with
ints and other Syms stays symbolic. The text of a Sym is its expression only where the
code generator has declared its symbols bound in the function it writes (`bound`); any
other `str`/`repr`/`format` specializes it. Outside its environment every use of a Sym
raises: a symbolic size that reached run time is an internal error, never its hint.

Decisions that only steer performance (whether to save or recompute a value, how to
order small ops) may read `hint(x)` without a guard; what makes a result must not.
"""
import os
import threading
import traceback

_LEAK = "internal error: a symbolic size reached run time"
_TRACE_SPECIALIZE = bool(os.environ.get("TRACEGRAD_DEBUG_SPECIALIZE"))   # print each guard and where it came from


class _Local(threading.local):
    def __init__(self):
        self.env = None


_LOCAL = _Local()


def _poly_add(a, b, sign=1):
    out = dict(a)
    for m, c in b.items():
        c = out.get(m, 0) + sign * c
        if c:
            out[m] = c
        else:
            out.pop(m, None)
    return out


def _poly_mul(a, b):
    out = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = tuple(sorted(m1 + m2))
            c = out.get(m, 0) + c1 * c2
            if c:
                out[m] = c
            else:
                out.pop(m, None)
    return out


def _poly_src(p):
    """Python source of a polynomial {monomial: coefficient} (monomial: sorted atom names)."""
    terms = []
    for m in sorted(p, key=lambda m: (len(m), m)):
        c = p[m]
        if not m:
            terms.append(repr(c))
            continue
        body = " * ".join(m)
        terms.append(body if c == 1 else f"{c} * {body}")
    return "(" + " + ".join(terms) + ")" if len(terms) > 1 else (terms[0] if terms else "0")


class ShapeEnv:
    """The symbols of one program being built, their hints, and the guards recorded on them.
    Active (`with env:`) in the building thread only."""

    def __init__(self):
        self.symbols = []          # (name, hint, source): source is the caller's (leaf position, dim)
        self.hints = {}            # atom name -> hint (symbols, and floor-division/modulo atoms)
        self.atoms = {}            # composite atom name -> its source
        self.guards = {}           # (source, op) -> outcome
        self.bound = frozenset()   # the symbols the function being generated has bound
        self.pinned = set()        # symbols specialized to their hints
        self.fixed = ()            # (leaf position, dim, size): sizes of the key's dynamic dims held static
        self._prev = None

    def __enter__(self):
        self._prev = _LOCAL.env
        _LOCAL.env = self
        return self

    def __exit__(self, *exc):
        _LOCAL.env = self._prev
        self.bound = frozenset()

    def symbol(self, hint, source):
        name = f"s{len(self.symbols)}"
        self.symbols.append((name, int(hint), source))
        self.hints[name] = int(hint)
        # a symbol stands for sizes of 2 and more (0 and 1 specialize, as in torch)
        self.guards[(name + " - 2", ">=")] = True
        return Sym({(name,): 1}, int(hint), self, frozenset((name,)))

    def atom(self, src, hint, names):
        self.atoms.setdefault(src, src)
        self.hints[src] = hint
        return Sym({(src,): 1}, hint, self, names)

    def record(self, src, op, outcome):
        if _TRACE_SPECIALIZE and (src, op) not in self.guards:
            st = [f for f in traceback.extract_stack() if "symbolic.py" not in f.filename][-3:]
            print("GUARD", src, op, outcome, " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}"
                                                         for f in reversed(st)))
        self.guards[(src, op)] = bool(outcome)

    def check_source(self, name="check_sizes"):
        """Python source of one function of the call's leaves: True where every guard holds."""
        lines = [f"def {name}(L):"]
        for sym, _, (i, d) in self.symbols:
            lines.append(f"    {sym} = L[{i}]._data.shape[{d}]")
        conds = [f"L[{i}]._data.shape[{d}] == {int(n)}" for i, d, n in self.fixed]
        for (src, op), outcome in self.guards.items():
            c = f"{src} {op} 0"
            conds.append(c if outcome else f"not ({c})")
        lines.append(f"    return {' and '.join(f'({c})' for c in conds) or 'True'}")
        return "\n".join(lines) + "\n"

    def compile_check(self):
        env = {}
        exec(compile(self.check_source(), "<tracegrad:size guards>", "exec"), env)
        fn = env["check_sizes"]
        fn.source = self.check_source()
        return fn

    def specialized(self):
        """Whether the guards pin every symbol to its hint (the program is static in effect)."""
        return all(n in self.pinned for n, _, _ in self.symbols)


def current():
    return _LOCAL.env


class bound:
    """Context of the code generator: while a function is written whose top binds `names`
    (locals holding those symbols' values), Syms over them print as their expressions."""

    def __init__(self, names):
        self.names = frozenset(names)

    def __enter__(self):
        env = _LOCAL.env
        self.env = env
        if env is not None:
            self.prev = env.bound
            env.bound = self.names
        return self

    def __exit__(self, *exc):
        if self.env is not None:
            self.env.bound = self.prev


def _other(x):
    """(polynomial, hint, names) of an int or a Sym; None for anything else."""
    if type(x) is Sym:
        return x._p, x._hint, x._names
    if isinstance(x, int) and not isinstance(x, bool):
        x = int.__index__(x)
        return ({(): x} if x else {}), x, frozenset()
    return None


def _make(p, hint, env, names):
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return Sym(p, hint, env, names)


def _decided(diff, op, names, env):
    """Whether `diff op 0` has one outcome for every value of the symbols (each >= 2, a guard
    of every program): diff a polynomial over symbols alone whose non-constant coefficients
    have one sign, so its least (or greatest) value is at all symbols 2."""
    sign = 0
    low = 0
    for m, c in diff.items():
        if not m:
            continue
        if any(a not in names or a in env.atoms for a in m):
            return False
        s = 1 if c > 0 else -1
        if sign and s != sign:
            return False
        sign = s
        low += c * 2 ** len(m)
    if not sign:
        return False
    bound = low + diff.get((), 0)          # the least value (sign > 0) or the greatest (sign < 0)
    if sign > 0:
        # diff >= bound
        return (op in ("==", "!=", "<", ">=") and bound > 0) or (op in ("<=", ">") and bound > 0) or \
            (op in ("<", ">=") and bound >= 0)
    # diff <= bound
    return (op in ("==", "!=", ">", "<=") and bound < 0) or (op in (">=", "<") and bound < 0) or \
        (op in (">", "<=") and bound <= 0)


_OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


class Sym:
    """An integer expression over size symbols, with its hint (see the module's doc)."""
    __slots__ = ("_p", "_hint", "_env", "_names", "__weakref__")

    def __init__(self, p, hint, env, names):
        self._p = p
        self._hint = hint
        self._env = env
        self._names = names

    def _live(self):
        env = _LOCAL.env
        if env is None or env is not self._env:
            raise RuntimeError(_LEAK)
        return env

    def source(self):
        return _poly_src(self._p)

    def display(self):
        """The expression as text for listings and comments (no guard, usable anywhere)."""
        return self.source()

    def evaluate(self, values):
        """The expression's value for symbol values {name: int} (of a later call); composite
        atoms evaluated by their source."""
        total = 0
        for m, c in self._p.items():
            v = c
            for a in m:
                v *= values[a] if a in values else eval(a, {}, dict(values))  # noqa: S307 (our own expression)
            total += v
        return total

    # -- what observes the value: guarded ---------------------------------------------------
    def _specialize(self):
        env = self._live()
        if _TRACE_SPECIALIZE:
            st = [f for f in traceback.extract_stack() if "symbolic.py" not in f.filename][-3:]
            print("SPECIALIZE", self.source(), " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}"
                                                           for f in reversed(st)))
        env.record(_poly_src(_poly_add(self._p, {(): self._hint} if self._hint else {}, -1)), "==", True)
        if len(self._p) == 1 and next(iter(self._p)) in {(n,) for n, _, _ in env.symbols}:
            env.pinned.add(next(iter(self._p))[0])
        return self._hint

    def _compare(self, other, op):
        env = self._live()
        o = _other(other)
        if o is None:
            if isinstance(other, float):
                return _OPS[op](self._specialize(), other)
            return NotImplemented
        diff = _poly_add(self._p, o[0], -1)
        value = _OPS[op](self._hint - o[1], 0)
        if not diff or (len(diff) == 1 and () in diff):
            return value                   # a constant difference: the same for every call
        if _decided(diff, op, self._names, env):
            return value                   # the same for every size the program takes (each symbol >= 2)
        env.record(_poly_src(diff), op, value)
        return value

    def __eq__(self, other):
        return self._compare(other, "==")

    def __ne__(self, other):
        return self._compare(other, "!=")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __bool__(self):
        return self._compare(0, "!=")

    def __index__(self):
        return self._specialize()

    __int__ = __index__

    def __float__(self):
        return float(self._specialize())

    def __hash__(self):
        return hash(self._specialize())

    def __truediv__(self, other):
        return self._specialize() / (other._specialize() if type(other) is Sym else other)

    def __rtruediv__(self, other):
        return other / self._specialize()

    def __repr__(self):
        env = self._live()
        if self._names <= env.bound:
            return _poly_src(self._p)
        return str(self._specialize())

    __str__ = __repr__

    def __format__(self, spec):
        env = self._live()
        if not spec and self._names <= env.bound:
            return _poly_src(self._p)
        return format(self._specialize(), spec)

    # -- arithmetic: symbolic ---------------------------------------------------------------
    def _arith(self, other, fn):
        env = self._live()
        o = _other(other)
        if o is None:
            if isinstance(other, float):
                return fn(self._specialize(), other)
            return NotImplemented
        return env, o

    def __add__(self, other):
        r = self._arith(other, lambda a, b: a + b)
        if type(r) is not tuple:
            return r
        env, (p, h, n) = r
        return _make(_poly_add(self._p, p), self._hint + h, env, self._names | n)

    __radd__ = __add__

    def __sub__(self, other):
        r = self._arith(other, lambda a, b: a - b)
        if type(r) is not tuple:
            return r
        env, (p, h, n) = r
        return _make(_poly_add(self._p, p, -1), self._hint - h, env, self._names | n)

    def __rsub__(self, other):
        r = self._arith(other, lambda a, b: b - a)
        if type(r) is not tuple:
            return r
        env, (p, h, n) = r
        return _make(_poly_add(p, self._p, -1), h - self._hint, env, self._names | n)

    def __mul__(self, other):
        r = self._arith(other, lambda a, b: a * b)
        if type(r) is not tuple:
            return r
        env, (p, h, n) = r
        return _make(_poly_mul(self._p, p), self._hint * h, env, self._names | n)

    __rmul__ = __mul__

    def __neg__(self):
        env = self._live()
        return _make({m: -c for m, c in self._p.items()}, -self._hint, env, self._names)

    def __pos__(self):
        self._live()
        return self

    def _div(self, num, den, op):
        """num // den or num % den, num and den (polynomial, hint, names)."""
        env = self._live()
        (pn, hn, nn), (pd, hd, nd) = num, den
        if not pd:
            raise ZeroDivisionError("integer division or modulo by zero")
        if len(pd) == 1 and () in pd:
            k = pd[()]
            if all(c % k == 0 for c in pn.values()):
                if op == "%":
                    return 0
                return _make({m: c // k for m, c in pn.items()}, hn // k, env, nn)
        if op == "//" and pd == pn:
            # x // x is 1 for x != 0: a guard that x is not zero
            env.record(_poly_src(pn), "!=", hn != 0)
            if hn != 0:
                return 1
        # (each side in parentheses: `2 * s0` as a divisor would otherwise divide by 2 and multiply by s0)
        src = f"(({_poly_src(pn)}) {op} ({_poly_src(pd)}))"
        hint = hn // hd if op == "//" else hn % hd
        if not nn | nd:
            return hint
        if hd == 0:
            raise ZeroDivisionError("integer division or modulo by zero")
        if nd:
            env.record(_poly_src(pd), "!=", True)
        return env.atom(src, hint, nn | nd)

    def __floordiv__(self, other):
        o = _other(other)
        if o is None:
            self._live()
            return NotImplemented
        return self._div((self._p, self._hint, self._names), o, "//")

    def __rfloordiv__(self, other):
        o = _other(other)
        if o is None:
            self._live()
            return NotImplemented
        return self._div(o, (self._p, self._hint, self._names), "//")

    def __mod__(self, other):
        o = _other(other)
        if o is None:
            self._live()
            return NotImplemented
        return self._div((self._p, self._hint, self._names), o, "%")

    def __rmod__(self, other):
        o = _other(other)
        if o is None:
            self._live()
            return NotImplemented
        return self._div(o, (self._p, self._hint, self._names), "%")

    def __abs__(self):
        return self if self >= 0 else -self

    def __copy__(self):
        return self              # immutable

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise RuntimeError(_LEAK)


def is_sym(x):
    return type(x) is Sym


def hint(x):
    """x with every Sym replaced by its hint, unguarded: for decisions that only steer
    performance (never what a result is)."""
    t = type(x)
    if t is Sym:
        return x._hint
    if t is tuple:
        for a in x:
            if a.__class__ is not int:
                return tuple([hint(a) for a in x])
        return x                # a shape of plain sizes (the common case): itself, no new tuple
    if t is list:
        return [hint(a) for a in x]
    return x


def has_sym(x):
    t = type(x)
    if t is Sym:
        return True
    if t is tuple or t is list:
        return any(has_sym(a) for a in x)
    if t is dict:
        return any(has_sym(a) for a in x.values())
    if isinstance(x, (tuple, list)):          # torch.Size-like sequences, named tuples
        return any(has_sym(a) for a in x)
    return False


def substitute(x, values):
    """x (ints, tuples, lists, dicts of them) with every Sym evaluated for `values`
    ({symbol name: int}): what a program's recorded sizes are for a later call."""
    t = type(x)
    if t is Sym:
        return x.evaluate(values)
    if t is tuple or t is list:
        if not any(type(a) is Sym or type(a) in (tuple, list, dict) or isinstance(a, (tuple, list)) for a in x):
            return x
        return t(substitute(a, values) for a in x)
    if t is dict:
        return {k: substitute(v, values) for k, v in x.items()}
    if isinstance(x, (tuple, list)) and has_sym(x):
        items = [substitute(a, values) for a in x]
        return t(*items) if hasattr(t, "_fields") else t(items)      # a named tuple takes its fields
    return x


def symbol_name(x):
    """The symbol's name where x is one symbol itself (`s0`, not `2 * s0`), else None."""
    if type(x) is not Sym or len(x._p) != 1:
        return None
    (m, c), = x._p.items()
    return m[0] if c == 1 and len(m) == 1 and m[0] in x._names else None


def surely_equal(a, b):
    """Whether shapes a and b are equal for every size (the same ints, the same expressions),
    unguarded: for a rewrite that may be skipped where it is not sure to apply."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        tx, ty = type(x), type(y)
        if tx is Sym or ty is Sym:
            if tx is not ty or x._p != y._p:
                return False
        elif x != y:
            return False
    return True

"""A program's guards as one generated Python function, as torch's Dynamo compiles its guards.

Checked one by one, each guard (runtime/sources.py) builds a token of what it reads (tuples
of ids, shapes and bits) and compares it with the one it recorded: ~20 guards of a
training step cost 100-150 µs a call once the step's arrays have pushed them out of the
CPU caches. Here each guard instead writes straight-line tests of what it reads (`x is
W`, `x._req is True`, `a.shape == S`, `tuple(d) == KEYS`) into one function, which
returns the index of the first guard that fails, -1 where all hold, and -2 where a test
raised: then the guards are asked one by one (`Guards.failed`), as before, so a
generated test is never the only judge of an exception.

The generated source holds no user text: every value it compares with (an object, a
name, a key, a shape) is a constant of the function's namespace, named `k0, k1, ...`.
"""
import math
import struct

import numpy as np

from ..tensor import Tensor

_PACK_D = struct.Struct("<d").pack


class CheckCode:
    """The source of the check being built: `need(cond)` fails the current guard unless
    cond holds; `let(expr)` names a value; `const(v)` a constant the source refers to."""

    def __init__(self, token, scalars):
        self.token, self.scalars = token, scalars      # sources.token and the types it keys by value
        self.lines = []
        self.consts = {}
        self.ids = {}
        self.n_locals = 0
        self.guard = 0
        self.checked = set()          # ids of the tensors whose metadata a test before checks

    def const(self, v):
        """By identity, never by value: a test `x is k` needs the very object (two equal strings
        may be two objects, as two dicts' keys)."""
        name = self.ids.get(id(v))
        if name is None:
            name = self.ids[id(v)] = f"k{len(self.consts)}"
            self.consts[name] = v
        return name

    def let(self, expr):
        self.n_locals += 1
        name = f"v{self.n_locals}"
        self.lines.append(f"{name} = {expr}")
        return name

    def need(self, cond):
        self.lines.append(f"if not ({cond}): return {self.guard}")

    def fallback(self, guard):
        """A guard without tests of its own: its read and test, called."""
        self.need(f"{self.const(guard.test)}({self.const(guard.read)}(env))")

    def token_is(self, x, v):
        """Tests that the value named x has v's token (sources.token): a scalar its type and
        bits, a tensor its identity, requires_grad, dtype, shape and array type, anything
        else its identity."""
        if v is None or type(v) is bool:
            self.need(f"{x} is {self.const(v)}")
        elif type(v) is int:
            self.need(f"{x}.__class__ is int and {x} == {self.const(v)}")
        elif type(v) is float:
            if v != 0.0 and not math.isnan(v):   # equal nonzero doubles have equal bits
                self.need(f"{x}.__class__ is float and {x} == {self.const(v)}")
            else:
                self.need(f"{x}.__class__ is float and {self.const(_PACK_D)}({x}) == {self.const(_PACK_D(v))}")
        elif isinstance(v, Tensor):
            self.need(f"{x} is {self.const(v)}")
            if id(v) not in self.checked:      # tested before in this check: its identity says the rest
                self.tensor_meta(x, v)
        else:
            if isinstance(v, self.scalars) or isinstance(v, np.generic):
                self.need(f"{self.const(self.token)}({x}) == {self.const(self.token(v))}")
            else:
                self.need(f"{x} is {self.const(v)}")

    def tensor_meta(self, x, t):
        """Tests that tensor x has t's requires_grad, dtype, array type and shape."""
        self.checked.add(id(t))
        if hasattr(type(t), "materialize"):
            # a lazy module's parameter before its first forward (no memory to read): its class, which
            # materializing changes
            self.need(f"{x}.__class__ is {self.const(type(t))}")
            return
        req = t._req
        self.need(f"{x}._req is {self.const(req)}" if type(req) is bool else f"{x}._req == {self.const(req)}")
        self.need(f"{x}._dtype is {self.const(t._dtype)}")
        a = self.let(f"{x}._data")
        self.need(f"{a}.__class__ is {self.const(t._data.__class__)} and {a}.shape == {self.const(t._data.shape)}")

    def items_are(self, c, n):
        """Names for the n items of the sized iterable c (a tuple's, a dict's keys or values),
        whose length a test before checked."""
        names = [f"v{self.n_locals + 1 + i}" for i in range(n)]
        self.n_locals += n
        if n:
            self.lines.append(f"{', '.join(names)}, = {c}")
        return names

    def function(self):
        """The check: env -> -1 where every guard holds, the index of the first that fails,
        -2 where a test raised."""
        body = [f"        {line}" for line in self.lines]
        src = "\n".join(["def check(env):", "    try:"] + (body or ["        pass"]) +
                        ["    except Exception:", "        return -2", "    return -1"])
        ns = dict(self.consts)
        exec(compile(src, "<tracegrad:guards>", "exec"), ns)
        check = ns.pop("check")          # not kept in its own namespace: no cycle to wait for the collector
        check.source = src
        return check

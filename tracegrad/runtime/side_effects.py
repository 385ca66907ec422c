"""Python side effects of a compiled function, found in its bytecode before any trace.

A trace runs the function once, on symbolic tensors, and later calls run only the
program it recorded. A side effect on state the call does not own (appending to an
outside list, a counter in a global or a closure, `self.last = h` in a module's
forward, an item written into an outside dict, print) would therefore store a symbolic
value into the user's data and happen once instead of at every call. So before
tracing, `SideEffects.find` reads the bytecode (`dis`) of the function and of the code
it reaches: its nested functions, the global helpers and methods it calls (followed
recursively), for a module its forward and every submodule's forward. Library code
(tracegrad itself, the standard library, installed packages) is not read. Where a
side effect is found the function runs eagerly, from the start.

Each code object is read once (`_scan`, cached): an abstract run over its
instructions that tracks, for every stack slot and local variable, where the value
came from: made in the function (a literal, a call's result: the function owns it), or
an outside object reached from an argument, a global or a closure variable (a path such
as `self.cache` or `log`). The effects found are then checked against the objects of
the call (`_Context.effects`): an item written into a tensor or an in-place tensor
method is no concern here (the tracer records or refuses it), the same write into an
outside list or dict is a side effect.
"""
import bisect
import builtins
import collections
import dis
import functools
import heapq
import inspect
import linecache
import logging
import operator
import os
import random
import sys
import sysconfig
import types
import warnings

import numpy as np

from ..tensor import Tensor
from ..nn.modules.module import Module

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# method names that change the object they are called on (list, dict, set, file, deque)
MUTATING = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add",
                      "discard", "popitem", "sort", "reverse", "write", "writelines", "appendleft",
                      "extendleft", "popleft", "rotate", "difference_update", "intersection_update",
                      "symmetric_difference_update", "flush", "put", "put_nowait",
                      # a numpy array's own (an outside array's values are read by the program's guards)
                      "fill", "itemset", "partition", "resize", "setfield", "byteswap",
                      # an iterator's or a generator's (the next item differs at every call)
                      "__next__", "send", "throw",
                      # the same, called by their dunder names
                      "__setitem__", "__delitem__", "__iadd__", "__isub__", "__imul__", "__ior__", "__iand__",
                      "__ixor__"})
# builtins whose call is itself a side effect (I/O, attributes set by name, the module's namespace
# handed out for writing)
IO_CALLS = frozenset({"print", "input", "open", "breakpoint", "setattr", "delattr", "globals", "exec", "eval"})
# names of what gives another value at every call (random draws, clocks, the environment):
# a trace would bake in the first one; `_impure` tells whether the object read is one
IMPURE_NAMES = frozenset({
    "random", "randint", "randrange", "uniform", "gauss", "normalvariate", "lognormvariate", "expovariate",
    "vonmisesvariate", "gammavariate", "betavariate", "paretovariate", "weibullvariate", "triangular", "choice",
    "choices", "sample", "shuffle", "getrandbits", "randbytes", "seed", "rand", "randn", "random_sample",
    "standard_normal", "normal", "integers", "permutation", "binomial", "poisson", "exponential", "beta", "gamma",
    "time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
    "process_time_ns", "thread_time", "now", "today", "utcnow", "getenv", "environ", "urandom",
    "localtime", "gmtime", "ctime", "asctime", "strftime", "randbelow", "randbits", "token_bytes", "token_hex",
    "token_urlsafe", "SystemRandom", "uuid1", "uuid4", "getrandom"})
# what makes a generator seeded from the operating system's entropy where it is called with no
# argument (np.random.default_rng().normal(), random.Random().random()); given a seed, the same
# numbers at every call
SEEDED_BY_ENTROPY = frozenset({"default_rng", "RandomState", "SeedSequence", "PCG64", "PCG64DXSM", "MT19937", "Philox",
                               "SFC64", "Random"})
# the names of their seed parameter (Random's x, Random.seed's a), and the method that seeds a
# generator again (`r.seed()`, `r.seed(None)`: from entropy too); Generator wraps a bit generator
_SEED_KEYWORDS = ("seed", "x", "entropy", "a", "bit_generator")
_SEEDS = SEEDED_BY_ENTROPY | {"seed", "Generator"}
_NONE_SEED = ("none",)      # a seed argument that is the constant None
_NO_SEED = ("no seed",)     # a call with no seed argument
# what a seed written as a constant expression is made of
_CONSTANT_OPS = frozenset({"LOAD_CONST", "BUILD_LIST", "BUILD_TUPLE", "LIST_EXTEND", "BINARY_OP", "UNARY_NEGATIVE"})
# names of what writes a warning or a log record (warnings.warn, a logger's info(...)): once
# per trace, not once per call, were it traced; `_writes_out` tells whether the object is one
OUTPUT_NAMES = frozenset({"warn", "warn_explicit", "debug", "info", "warning", "error", "exception", "critical",
                          "fatal", "log"})
_TIME = frozenset({"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
                   "process_time_ns", "thread_time", "localtime", "gmtime", "ctime", "asctime", "strftime"})


def _writes_out(v):
    """Whether v is warnings.warn (or warn_explicit), a logging function or a logger's method
    that writes a record."""
    if v is warnings.warn or v is warnings.warn_explicit:
        return True
    owner = getattr(v, "__self__", None)
    if isinstance(owner, (logging.Logger, logging.LoggerAdapter)):
        return getattr(v, "__name__", "") in OUTPUT_NAMES
    return getattr(v, "__module__", None) == "logging" and isinstance(v, types.FunctionType) and \
        v.__name__ in OUTPUT_NAMES


def _iterator(v):
    """Whether v is an iterator (a generator, iter(list), an itertools object, a file): its own
    __next__ changes it."""
    if isinstance(v, (type, types.ModuleType, Tensor, Module, _Items)):
        return False
    try:
        return inspect.getattr_static(type(v), "__next__", None) is not None
    except Exception:
        return False


def _safely_impure(v):
    """_impure(v), False where asking v raises (a metaclass's __getattr__ of the user's)."""
    try:
        return _impure(v)
    except Exception:
        return False


def _impure(v):
    """Whether v (a function or object a compiled function reads) gives another value at each
    call: the random module's draws and numpy's, clocks, datetime's now(), os.environ."""
    owner = getattr(v, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        if isinstance(owner, random.Random):
            return True
        npr = sys.modules.get("numpy.random")
        if npr is not None and isinstance(owner, (npr.Generator, npr.RandomState)):
            return True
        dt = sys.modules.get("datetime")
        if dt is not None and owner in (dt.datetime, dt.date) and getattr(v, "__name__", "") in ("now", "today",
                                                                                                     "utcnow"):
            return True
        return False
    mod = getattr(v, "__module__", None) or ""
    if callable(v) and mod in _RANDOM_MODULES or mod.startswith("numpy.random"):
        # (numpy's are Cython functions, neither builtin nor Python functions)
        name = getattr(v, "__name__", "")
        return name in IMPURE_NAMES or mod == "secrets"
    if isinstance(v, (types.BuiltinFunctionType, types.FunctionType)):
        if mod == "time" and v.__name__ in _TIME:
            return True
    return v is os.environ or v is os.getenv or v is os.urandom


_RANDOM_MODULES = frozenset({"random", "secrets", "uuid", "posix", "nt"})


# the effects judged by the value read (an object's method or a global): its test, and the text
_BY_VALUE = {
    "impure": (_impure, "reads `{}`, which gives another value at every call (a random draw, a clock, the "
                        "environment)"),
    "output": (_writes_out, "calls `{}(...)`, which writes a warning or a log record (a trace would write it once, "
                            "not at every call)"),
}

_OWN = "own"                # a value the function made itself
_VIEW = ("()",)             # path end: a method whose result is items of its object (d.values())
_VIEWS = frozenset({"values", "items", "keys", "get", "__getitem__"})
# calls: how many stack slots below the arguments they pop (the callable, self or NULL, names)
_CALLS = {"CALL": 2, "CALL_METHOD": 2, "CALL_FUNCTION": 1, "CALL_FUNCTION_KW": 2, "CALL_KW": 3}
_UNKNOWN = ("?",)           # an outside object whose path is not known
_ITEM = ("[]",)             # path step: an item of (subscript, iteration, unpacking)
_MAX_CODES = 400            # code objects read per compiled function at most
_MAX_ITEMS = 64             # items of a container whose special methods are read at most


class Effect:
    """One side effect: where it is (file, line, the line's text) and what it does."""

    def __init__(self, filename, lineno, what):
        self.filename, self.lineno, self.what = filename, lineno, what

    @property
    def line(self):
        return linecache.getline(self.filename, self.lineno).strip()

    def describe(self):
        line = self.line
        return f"{self.filename}:{self.lineno}" + (f" (`{line}`)" if line else "") + f": {self.what}"

    def __repr__(self):
        return f"<side effect {self.describe()}>"


# -- library code is not read ----------------------------------------------------------------------

def _library_dirs():
    dirs = {_PKG}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(os.path.abspath(sysconfig.get_paths()[key]))
        except KeyError:
            pass
    for p in getattr(sys, "path", ()):
        if p and ("site-packages" in p or "dist-packages" in p):
            dirs.add(os.path.abspath(p))
    return tuple(sorted(d + os.sep for d in dirs))


_LIB_DIRS = _library_dirs()
_TESTS = os.path.join(os.path.dirname(_PKG), "tests") + os.sep


@functools.lru_cache(maxsize=4096)
def is_library(filename):
    """Whether code from `filename` is library code (tracegrad, the standard library, an
    installed package, generated source) rather than the user's."""
    if filename.startswith("<"):
        return filename.startswith(("<tracegrad:", "<frozen"))
    f = os.path.abspath(filename)
    if f.startswith(_TESTS):
        return False
    return f.startswith(_LIB_DIRS)


# -- reading one code object -----------------------------------------------------------------------

_NO_PUSH = ("POP_", "STORE_", "DELETE_", "RETURN_", "JUMP", "RAISE", "RERAISE", "END_", "LIST_APPEND", "LIST_EXTEND",
            "SET_ADD", "SET_UPDATE", "MAP_ADD", "DICT_", "PRINT_EXPR", "IMPORT_STAR", "SETUP_ANNOTATIONS",
            "YIELD_VALUE", "FOR_ITER")
_NO_TOUCH = ("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "KW_NAMES", "JUMP", "SETUP_", "COPY_FREE_VARS", "MAKE_CELL",
             "RETURN_GENERATOR", "POP_BLOCK", "PRECALL", "CHECK_E", "DELETE_", "GEN_START", "POP_JUMP", "FOR_ITER",
             "SEND", "END_SEND", "PUSH_NULL", "BEFORE_", "MATCH_", "GET_LEN", "WITH_EXCEPT_START",
             "PUSH_EXC_INFO", "LOAD_")
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_ENDS = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_ABSOLUTE", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT"})


def _join(a, b):
    if a == b or b is None:
        return a
    if a is None or a == _OWN:
        return b
    if b == _OWN:
        return a
    return _UNKNOWN


def _derive(base, step):
    """The path of an attribute or item of a value (a value the function made stays its own)."""
    if base == _OWN:
        return _OWN
    if base[0] == "?":
        return _UNKNOWN
    return base + step


class _Scan:
    """What one code object does, independent of the objects of any call: its side effects
    (with the path of the object they touch) and the callables it refers to."""

    def __init__(self, code):
        self.code = code
        self.effects = {}       # instruction index -> (kind, lineno, name, path)
        self.refs = set()       # paths of globals, closure variables and attributes it loads
        self.ref_lines = {}     # path -> the first line that loads it
        self.calls = {}         # instruction index -> (paths of the callable, paths of the positional arguments)
        self.bare = set()       # instruction indexes of calls with no argument at all
        self.seeds = {}         # instruction index -> (name called, its seed's path) of calls of the _SEEDS names
        self._no_seeds = _SEEDS.isdisjoint(code.co_names) and _SEEDS.isdisjoint(code.co_varnames) and \
            _SEEDS.isdisjoint(code.co_freevars)
        self._kw = ()           # keyword names of the next call (3.11's KW_NAMES)
        self.nested = [c for c in code.co_consts if isinstance(c, types.CodeType)]
        self._run()

    def _run(self):
        code = self.code
        instrs = list(dis.get_instructions(code))
        self.index = {ins.offset: i for i, ins in enumerate(instrs)}
        nargs = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames
        # a comprehension's `.0` is the iterator its enclosing function made for it
        self.locals = {n: ("arg", n) if n != ".0" else _OWN for n in names[:nargs]}
        extra = nargs
        if code.co_flags & inspect.CO_VARARGS:
            self.locals[names[extra]] = _OWN      # *args and **kwargs are made fresh by each call
            extra += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            self.locals[names[extra]] = _OWN
        handlers = []
        for e in getattr(dis.Bytecode(code), "exception_entries", ()):
            handlers.append((e.target, (_OWN,) * (e.depth + (1 if e.lasti else 0) + 1)))
        line = code.co_firstlineno
        self.lines = []
        for ins in instrs:
            pos = getattr(ins, "positions", None)
            if pos is not None and pos.lineno is not None:
                line = pos.lineno
            elif ins.starts_line is not None and not isinstance(ins.starts_line, bool):
                line = ins.starts_line
            self.lines.append(line)
        for _ in range(6):                 # locals are joined over the whole function: run until stable
            before = dict(self.locals)
            self._walk(instrs, [(0, ())] + handlers)
            if self.locals == before:
                break

    def _walk(self, instrs, seeds):
        states = {}
        work = []
        for off, st in seeds:
            if off in self.index:
                work.append((self.index[off], st))
        seen = set()
        budget = 40 * len(instrs) + 100
        while True:
            while work and budget > 0:
                budget -= 1
                i, st = work.pop()
                old = states.get(i)
                if old is not None:
                    n = min(len(old), len(st))
                    merged = tuple(_join(a, b) for a, b in zip(old[len(old) - n:], st[len(st) - n:]))
                    if merged == old:
                        continue
                    st = merged
                states[i] = st
                seen.add(i)
                for j, out in self._step(instrs, i, list(st)):
                    if j < len(instrs):
                        work.append((j, tuple(out)))
            # code no path reached (a handler the table above does not name): read it with an empty stack
            rest = [i for i in range(len(instrs)) if i not in seen]
            if not rest or budget <= 0:
                return
            work.append((rest[0], ()))

    def _seed(self, instrs, i, n, positional, st):
        """At call i (n arguments): where it calls a name of _SEEDS (default_rng, Random, a
        generator's seed method, ...), note its seed argument: the first positional one or a
        seed keyword, as its path, _NONE_SEED for the constant None or _NO_SEED for none."""
        if self._no_seeds:
            return
        spans = _arg_spans(instrs, i, n)
        if spans is None:
            return
        callee = instrs[spans[0][0] - 1] if spans else _before_call(instrs, i)
        if callee is None or callee.argval not in _SEEDS or \
                callee.opname not in ("LOAD_METHOD", "LOAD_ATTR", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST",
                                      "LOAD_DEREF"):
            return
        at = 0 if positional else next((positional + k for k, name in enumerate(self._kw)
                                        if name in _SEED_KEYWORDS), None)
        if at is None:
            path = _NO_SEED
        else:
            start, end = spans[at]
            ins = instrs[start]
            if start == end and ins.opname == "LOAD_CONST" and ins.argval is None:
                path = _NONE_SEED
            elif all(x.opname in _CONSTANT_OPS and (x.opname != "LOAD_CONST" or x.argval is not None)
                     for x in instrs[start:end + 1]):
                return          # a seed written in the code (7, [1, 2], 2 ** 10): the same numbers at every call
            else:
                path = st[len(st) - n + at]
        old = self.seeds.get(i)
        if old is not None and old[1] != path:
            path = _join(old[1], path) if _NONE_SEED not in (old[1], path) else _NONE_SEED
        self.seeds[i] = (callee.argval, path)

    def _const_arg(self, instrs, i, n, k):
        """The k-th of call i's n arguments where it is a constant written in the code, else None."""
        spans = _arg_spans(instrs, i, n)
        if spans is None or k >= len(spans):
            return None
        start, end = spans[k]
        return instrs[start].argval if start == end and instrs[start].opname == "LOAD_CONST" else None

    def _getattr(self, instrs, i, n, obj):
        if obj == _OWN or obj[0] == "?":
            return _OWN if obj == _OWN else _UNKNOWN
        name = self._const_arg(instrs, i, n, 1)
        if not isinstance(name, str):
            return _UNKNOWN
        val = _derive(obj, (name,))
        self.refs.add(val)
        self.ref_lines.setdefault(val, self.lines[i])
        return val

    def _effect(self, i, kind, name, path):
        old = self.effects.get(i)
        if old is not None:
            path = _join(old[3], path)
        self.effects[i] = (kind, self.lines[i], name, path)

    def _step(self, instrs, i, st):
        """The abstract effect of instruction i on the stack `st`: [(next index, stack)]."""
        ins = instrs[i]
        op = ins.opname
        arg = ins.arg
        before = tuple(st)

        def pop(n=1):
            out = []
            for _ in range(n):
                out.append(st.pop() if st else _OWN)
            return out[::-1]

        def peek(k):
            return st[-k] if len(st) >= k else _OWN

        code = self.code
        if op in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"):
            v = self.locals.get(ins.argval, _OWN)
            if v != _OWN and v[0] == "arg":
                self.refs.add(v)
            st.append(v)
        elif op == "LOAD_FAST_LOAD_FAST":
            a, b = ins.argval
            st.extend([self.locals.get(a, _OWN), self.locals.get(b, _OWN)])
        elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
            name = ins.argval
            if name in code.co_freevars:
                st.append(("deref", name))
                self.refs.add(("deref", name))
                self.ref_lines.setdefault(("deref", name), self.lines[i])
            else:
                st.append(self.locals.get(name, _OWN))
        elif op in ("LOAD_GLOBAL", "LOAD_NAME"):
            n = dis.stack_effect(ins.opcode, arg)
            st.extend([_OWN] * (n - 1))
            name = ins.argval
            st.append(("global", name))
            self.refs.add(("global", name))
            self.ref_lines.setdefault(("global", name), self.lines[i])
            if name in IO_CALLS:
                self._effect(i, "io", name, ("global", name))
            elif name in IMPURE_NAMES:
                self._effect(i, "impure", None, ("global", name))
            elif name in OUTPUT_NAMES:
                self._effect(i, "output", None, ("global", name))
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            obj = pop()[0]
            name = ins.argval
            val = _derive(obj, (name,))
            if obj != _OWN and obj[0] != "?":
                self.refs.add(val)
                self.ref_lines.setdefault(val, self.lines[i])
            if name in _VIEWS and obj != _OWN:
                val = _derive(obj, _ITEM) + _VIEW       # its call's result: items of obj
            if name in MUTATING and obj != _OWN:
                self._effect(i, "method", name, obj)
            elif name in IMPURE_NAMES and obj != _OWN and obj[0] != "?":
                self._effect(i, "impure", name, obj)
            elif name in OUTPUT_NAMES and obj != _OWN and obj[0] != "?":
                self._effect(i, "output", name, obj)
            n = dis.stack_effect(ins.opcode, arg)
            st.append(val)
            if n > 0:
                st.append(obj)
        elif op in ("STORE_FAST", "STORE_DEREF"):
            v = pop()[0]
            name = ins.argval
            if op == "STORE_DEREF" and name in code.co_freevars:
                self._effect(i, "nonlocal", name, ("deref", name))
            else:
                self.locals[name] = _join(self.locals.get(name), v)
        elif op == "STORE_FAST_STORE_FAST":
            a, b = pop(2)
            n1, n2 = ins.argval
            self.locals[n1] = _join(self.locals.get(n1), b)
            self.locals[n2] = _join(self.locals.get(n2), a)
        elif op == "STORE_FAST_LOAD_FAST":
            v = pop()[0]
            n1, n2 = ins.argval
            self.locals[n1] = _join(self.locals.get(n1), v)
            st.append(self.locals.get(n2, _OWN))
        elif op == "DELETE_DEREF":
            if ins.argval in code.co_freevars:
                self._effect(i, "nonlocal", ins.argval, ("deref", ins.argval))
        elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            if op == "STORE_GLOBAL":
                pop()
            self._effect(i, "global", ins.argval, ("global", ins.argval))
        elif op in ("STORE_ATTR", "DELETE_ATTR"):
            target = pop()[0]
            if op == "STORE_ATTR":
                pop()
            if target != _OWN:
                self._effect(i, "attr", ins.argval, target)
        elif op in ("STORE_SUBSCR", "DELETE_SUBSCR", "STORE_SLICE", "DELETE_SLICE"):
            k = {"STORE_SUBSCR": 2, "DELETE_SUBSCR": 2, "STORE_SLICE": 3, "DELETE_SLICE": 3}[op]
            target = peek(k)
            pop(-dis.stack_effect(ins.opcode, arg))
            if target != _OWN:
                self._effect(i, "item", None, target)
        elif op in ("BINARY_SUBSCR", "BINARY_SLICE"):
            k = 2 if op == "BINARY_SUBSCR" else 3
            container = peek(k)
            if op == "BINARY_SUBSCR" and container != _OWN and container[0] != "?":
                self._effect(i, "subscript", None, container)
            pop(k)
            st.append(_derive(container, _ITEM))
        elif op == "GET_ITER":
            st.append(_derive(pop()[0], _ITEM))
        elif op == "FOR_ITER":
            st.append(peek(1))          # the next item, from the iterator below it
        elif op in ("UNPACK_SEQUENCE", "UNPACK_EX"):
            v = pop()[0]
            n = dis.stack_effect(ins.opcode, arg) + 1
            st.extend([_derive(v, _ITEM)] * n)
        elif op == "IMPORT_NAME":
            pop(2)
            st.append(_UNKNOWN)
        elif op == "IMPORT_FROM":
            st.append(_UNKNOWN)
        elif op == "PRECALL":
            pass                        # 3.11: CALL pops the callable and the arguments
        elif op == "KW_NAMES":
            # (3.11's dis does not resolve the names: they are the constant at its argument)
            names = ins.argval if isinstance(ins.argval, tuple) else self.code.co_consts[arg] \
                if arg is not None and arg < len(self.code.co_consts) else ()
            self._kw = names if isinstance(names, tuple) else ()
        elif op in _CALLS:
            n = _CALLS[op] + arg
            called = st[len(st) - n:len(st) - arg] if len(st) >= n else []
            if op == "CALL" and len(st) >= n:
                # who is called with what (positional arguments only): a helper's writes into
                # an argument are judged by the object the caller passes
                positional = arg - len(self._kw)
                self._seed(instrs, i, arg, positional, st)
                old = self.calls.get(i)
                paths = tuple(st[len(st) - arg:len(st) - arg + positional])
                if old is not None and len(old[1]) == len(paths):
                    paths = tuple(_join(a, b) for a, b in zip(old[1], paths))
                self.calls[i] = (tuple(c for c in called if c != _OWN and c[0] != "?"), paths)
                if arg == 0:
                    self.bare.add(i)
            if "out" in self._kw and len(st) >= n:
                # out=: the call writes into that array (np.add(a, 1, out=a) of an outside a)
                out = st[len(st) - len(self._kw) + self._kw.index("out")]
                if out != _OWN:
                    self._effect(i, "item", None, out)
            result = _OWN
            if ("global", "vars") in called and arg == 1 and len(st) >= n:
                result = _derive(st[-1], ("__dict__",))        # vars(obj) is obj.__dict__
            elif ("global", "getattr") in called and arg in (2, 3) and len(st) >= n:
                # getattr(obj, "log") is obj.log; with a name computed at run time, some
                # attribute of obj (an outside object whose path is not known)
                result = self._getattr(instrs, i, arg, st[len(st) - arg])
            elif op == "CALL" and arg >= 1 and len(st) >= n and any(c[0] == "methodcaller" for c in called if
                                                                     c != _OWN):
                # operator.methodcaller("append", v)(log): log.append(v)
                name = next(c[1] for c in called if c != _OWN and c[0] == "methodcaller")
                target = st[len(st) - arg]
                if target != _OWN:
                    self._effect(i, "method", name, target)
            elif op == "CALL" and arg >= 1 and len(st) >= n and any(c != _OWN and c[-1] == "methodcaller"
                                                                     for c in called):
                name = self._const_arg(instrs, i, arg, 0)
                if name in MUTATING:
                    result = ("methodcaller", name)
            self._kw = ()
            if ("global", "next") in called and arg >= 1 and len(st) >= n:
                it = st[len(st) - arg]          # next(it) on an iterator from outside: advances it
                if it != _OWN and it[0] != "?":
                    self._effect(i, "next", "next", it)
            pop(n)
            views = [c for c in called if c != _OWN and c[-1:] == _VIEW]
            st.append(views[0][:-1] if views else result)
        elif op == "COPY":
            st.append(peek(arg))
        elif op == "SWAP":
            if len(st) >= arg:
                st[-1], st[-arg] = st[-arg], st[-1]
        elif op == "DUP_TOP":
            st.append(peek(1))
        elif op == "DUP_TOP_TWO":
            st.extend([peek(2), peek(1)])
        elif op in ("ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N"):
            k = {"ROT_TWO": 2, "ROT_THREE": 3, "ROT_FOUR": 4}.get(op, arg)
            if len(st) >= k:
                st.insert(len(st) - k, st.pop())
        else:
            e = dis.stack_effect(ins.opcode, arg) if ins.opcode >= dis.HAVE_ARGUMENT else \
                dis.stack_effect(ins.opcode)
            if e > 0:
                st.extend([_OWN] * e)
            elif e == 0:
                if st and not op.startswith(_NO_TOUCH):
                    st[-1] = _OWN
            else:
                pop(-e)
                if st and not op.startswith(_NO_PUSH):
                    st[-1] = _OWN
        out = []
        if op not in _ENDS:
            out.append((i + 1, st))
        if ins.opcode in _JUMPS:
            # the branch's stack: the one before this instruction, with the jump's effect
            jst = list(before)
            e = dis.stack_effect(ins.opcode, arg, jump=True)
            if e < 0:
                del jst[max(0, len(jst) + e):]
            else:
                jst.extend([_OWN] * e)
            out.append((self.index.get(ins.argval, len(self.index)), jst))
        return out


_SCANS = {}


def _before_call(instrs, i):
    """The instruction before call i's PRECALL and KW_NAMES (its last argument's, or the callable's)."""
    j = i - 1
    while j >= 0 and instrs[j].opname in ("PRECALL", "KW_NAMES", "CACHE"):
        j -= 1
    return instrs[j] if j >= 0 else None


def _arg_spans(instrs, i, n):
    """The (first, last) instruction indexes of each of call i's n arguments, found backwards by
    their stack effects; None where one holds a jump (a conditional expression)."""
    j = i - 1
    while j >= 0 and instrs[j].opname in ("PRECALL", "KW_NAMES", "CACHE"):
        j -= 1
    spans = []
    for _ in range(n):
        end, total = j, 0
        while j >= 0:
            ins = instrs[j]
            if ins.opcode in _JUMPS or ins.opname in _ENDS:
                return None
            try:
                total += dis.stack_effect(ins.opcode, ins.arg) if ins.opcode >= dis.HAVE_ARGUMENT else \
                    dis.stack_effect(ins.opcode)
            except ValueError:
                return None
            if total >= 1:
                break
            j -= 1
        if j < 0 or total != 1:
            return None
        spans.append((j, end))
        j -= 1
    return spans[::-1]


def _scan(code):
    s = _SCANS.get(code)
    if s is None:
        s = _SCANS[code] = _Scan(code)
        if len(_SCANS) > 4096:
            _SCANS.pop(next(iter(_SCANS)))
    return s


# -- the objects of a call: which effects are real ---------------------------------------------------

_MISSING = object()
_OWNED = object()           # a closure variable of the compiled function itself


class _CallArgs(dict):
    """The compiled call's own arguments by parameter name (what the analysis depends on
    when an effect's target is reached from them)."""


class _Items:
    """Some item of a container (a subscript, an iteration), known by the container's values."""

    def __init__(self, values):
        self.values = values


def _tensor_like(obj):
    if isinstance(obj, _Items):
        return bool(obj.values) and all(isinstance(v, Tensor) for v in obj.values)
    return isinstance(obj, Tensor)


def _items(obj):
    if isinstance(obj, _Items):
        # an item of some item (`for k, fn in table.items()`, a list of lists): the items of
        # each container among them, the others as they are (a pair's parts, read loosely)
        out = []
        for v in obj.values[:_MAX_ITEMS]:
            sub = _items(v) if not isinstance(v, (_Items, str, bytes)) else _MISSING
            out.extend(sub.values if isinstance(sub, _Items) else [v])
        return _Items(out)
    if type(obj) in (list, tuple) or isinstance(obj, (list, tuple)) and type(obj).__module__ == "collections":
        return _Items(list(obj))
    if type(obj) is dict or isinstance(obj, dict) and type(obj).__module__ == "collections":
        return _Items(list(obj.values()))
    if isinstance(obj, Module) and type(obj).__module__.startswith("tracegrad."):
        return _Items(list(obj._parameters.values()) + list(obj._modules.values()))
    return _MISSING


def _attr(obj, name):
    """obj.name without running the user's code (no properties, no __getattr__): a bound
    method for a function defined on obj's class."""
    if isinstance(obj, (_Items,)) or obj is _MISSING:
        return _MISSING
    if isinstance(obj, types.ModuleType):
        return obj.__dict__.get(name, _MISSING)
    if isinstance(obj, Module):
        d = obj.__dict__
        for table in (d, d.get("_parameters", {}), d.get("_buffers", {}), d.get("_modules", {})):
            if name in table:
                return table[name]
    try:
        v = inspect.getattr_static(obj, name)
    except (AttributeError, TypeError):
        return _MISSING
    if isinstance(v, staticmethod):
        return v.__func__
    if isinstance(v, classmethod):
        return types.MethodType(v.__func__, obj if isinstance(obj, type) else type(obj))
    if isinstance(v, types.FunctionType):
        d = getattr(obj, "__dict__", None)
        if isinstance(obj, type) or (d is not None and d.get(name) is v):
            return v
        return types.MethodType(v, obj)
    if isinstance(obj, type) and isinstance(v, (types.WrapperDescriptorType, types.MethodDescriptorType)):
        return v                # a builtin class's method read off the class (object.__setattr__): itself
    if hasattr(type(v), "__get__") and not isinstance(v, (types.BuiltinFunctionType, type)):
        return _MISSING         # a property or another descriptor: its value needs the user's code
    return v


def _path_text(path):
    if path == _OWN or path[0] == "?":
        return "an object from outside the call"
    out = path[1]
    for step in path[2:]:
        out += "[...]" if step == "[]" else "." + step
    return out


def _kind_text(obj):
    if obj is _MISSING or isinstance(obj, _Items):
        return "an object"
    t = type(obj)
    return f"a {t.__name__}" if t.__module__ == "builtins" else f"a `{t.__qualname__}` object"


class _Finder:
    def __init__(self):
        self.found = []
        self.where = set()
        self.seen = set()
        self.modules = set()
        self.used_args = False

    # what a path names, for the objects of this call
    def resolve(self, path, ctx):
        code, glb, closure, binding, owned = ctx
        if path == _OWN:
            return _OWNED
        root, name = path[0], path[1] if len(path) > 1 else None
        if root == "arg":
            obj = binding.get(name, _MISSING)
        elif root == "global":
            obj = glb.get(name, _MISSING)
            if obj is _MISSING:
                obj = builtins.__dict__.get(name, _MISSING)
        elif root == "deref":
            if name in owned:
                return _OWNED
            obj = closure.get(name, _MISSING)
        else:
            return _MISSING
        for step in path[2:]:
            if obj is _MISSING:
                break
            if obj is _OWNED:
                return _OWNED           # what a new object of the call holds (self.items of an __init__'s self)
            obj = _items(obj) if step == "[]" else _attr(obj, step)
        return obj

    def judge(self, kind, name, path, ctx):
        """The text of the side effect, or None where it is none."""
        if kind == "global":
            return f"assigns the global variable `{name}`"
        if kind == "nonlocal":
            return None if name in ctx[4] else f"assigns `{name}`, a variable of an enclosing function (nonlocal)"
        obj = self.resolve(path, ctx)
        if obj is _OWNED:
            return None
        if kind == "io":
            return f"calls `{name}(...)`" if obj is builtins.__dict__.get(name) else None
        where = _path_text(path)
        if kind == "next":
            if self.resolve(("global", "next"), ctx) is not builtins.next or obj is _MISSING or \
                    not hasattr(type(obj), "__next__"):
                return None
            return f"calls `next({where})` on an iterator the call does not own"
        if kind in _BY_VALUE:
            test, text = _BY_VALUE[kind]
            v = obj if name is None else (getattr(obj, name, None) if obj is not _MISSING else None)
            if v is None or not test(v):
                return None
            return text.format(f"{where}{'.' + name if name else ''}")
        if kind == "subscript":
            if isinstance(obj, collections.defaultdict) and obj.default_factory is not None:
                return f"reads an item of `{where}`, a defaultdict the call does not own (a missing key is inserted)"
            return None
        if kind == "attr":
            return f"sets `{where}.{name}` on {_kind_text(obj)} the call does not own"
        if isinstance(obj, (types.ModuleType, type)) or _tensor_like(obj):
            return None                 # a module's function, a class's; or a tensor: the tracer's business
        if kind == "item":
            if obj is _MISSING and (path == _OWN or path[0] in ("arg", "?")):
                return None             # a helper's argument or an unknown item: most often a tensor
            return f"writes an item of `{where}` ({_kind_text(obj)} the call does not own)"
        if kind == "method":
            if obj is _MISSING:
                if hasattr(Tensor, name):
                    return None         # x.add(y), x.sort(): tensor methods of the same name
            elif not isinstance(obj, _Items) and inspect.getattr_static(obj, name, _MISSING) is _MISSING:
                return None             # no method of that object
            if path == _OWN or path[0] == "?":
                return f"calls `.{name}(...)` on {where}"
            return f"calls `{where}.{name}(...)`, which changes {_kind_text(obj)} the call does not own"
        return None

    def code(self, code, glb, closure, binding, owned):
        if is_library(code.co_filename):
            return
        key = (code, tuple(sorted((k, id(v)) for k, v in binding.items())))
        if key in self.seen or len(self.seen) >= _MAX_CODES:
            return
        self.seen.add(key)
        try:
            scan = _scan(code)
        except Exception:           # bytecode this reader does not know: nothing found there
            return
        ctx = (code, glb, closure, binding, owned)
        from_call = isinstance(binding, _CallArgs)
        for i in sorted(scan.effects):
            kind, line, name, path = scan.effects[i]
            if from_call and path != _OWN and path[0] == "arg":
                self.used_args = True           # judged by this call's arguments: judge again at the next compile
            what = self.judge(kind, name, path, ctx)
            if what is not None and (code.co_filename, line, what) not in self.where:
                self.where.add((code.co_filename, line, what))
                self.found.append(Effect(code.co_filename, line, what))
        for path in sorted(scan.refs, key=repr):
            obj = self.resolve(path, ctx)
            if obj is not _MISSING and obj is not _OWNED and not isinstance(obj, _Items) and \
                    path in scan.ref_lines and _safely_impure(obj):
                # read under a name of the user's (`from os import environ as ENV`, `from time import
                # perf_counter as clock`), which the names the scan knows do not spell
                self._found(code.co_filename, scan.ref_lines[path],
                            _BY_VALUE["impure"][1].format(_path_text(path)))
            elif obj is not _MISSING and obj is not _OWNED and path in scan.ref_lines and _iterator(obj):
                # an iterator or generator from outside: whatever consumes it (a for loop, zip,
                # islice, reduce, unpacking) takes items that the next call no longer sees
                self._found(code.co_filename, scan.ref_lines[path],
                            f"uses `{_path_text(path)}`, an iterator the call does not own (the items a call "
                            f"takes from it are gone at the next call)")
            if obj is not _MISSING and obj is not _OWNED and self.follow(obj) and from_call and path[0] == "arg":
                self.used_args = True           # code reached through an argument (a model passed in)
            if type(obj) in (list, tuple, dict, set, frozenset, collections.deque):
                # callbacks held in an outside container: whoever calls them (this code, or a
                # library function it hands them to: functools.reduce, map, sorted's key) runs them
                self.callbacks(obj, path, code.co_filename, scan.ref_lines.get(path, code.co_firstlineno))
            if len(path) > 2 and path[-1] != "[]":
                self.getter(self.resolve(path[:-1], ctx), path[-1])
        inner = owned | frozenset(code.co_cellvars)
        for c in scan.nested:
            self.code(c, glb, closure, {}, inner)
        for i, (callees, args) in scan.calls.items():
            self.call_site(callees, args, ctx, from_call, scan.lines[i])
            if args and callees:
                self.mutator(callees, args, ctx, code.co_filename, scan.lines[i])
            elif i in scan.bare and callees:
                self.entropy(callees, ctx, code.co_filename, scan.lines[i])
        for i, (name, seed) in scan.seeds.items():
            self.seeded(name, seed, scan.calls.get(i, ((), ()))[0], ctx, from_call, code.co_filename,
                        scan.lines[i])

    def getter(self, owner, name):
        """Read the user's property getter that owner.name runs (a getter that counts its calls
        or appends to a list has its effect at every eager read)."""
        if owner is _MISSING or owner is _OWNED or isinstance(owner, (types.ModuleType, _Items)):
            return
        prop = inspect.getattr_static(type(owner) if not isinstance(owner, type) else owner, name, None)
        get = inspect.getattr_static(type(prop), "__get__", None)
        if isinstance(get, types.FunctionType) and not is_library(get.__code__.co_filename) and \
                get.__code__.co_argcount:
            # a user's descriptor on the class: its __get__ runs at every read
            self.function(get, {get.__code__.co_varnames[0]: prop})
        fget = prop.fget if isinstance(prop, property) else None
        if isinstance(fget, types.FunctionType) and not is_library(fget.__code__.co_filename) and \
                fget.__code__.co_argcount:
            self.function(fget, {fget.__code__.co_varnames[0]: owner})

    def entropy(self, callees, ctx, filename, line):
        """np.random.default_rng(), random.Random() and the like called with no seed: seeded from
        the operating system's entropy, another generator at every call."""
        for path in callees:
            fn = self.resolve(path, ctx)
            name = getattr(fn, "__name__", "")
            mod = getattr(fn, "__module__", None) or ""
            if name in SEEDED_BY_ENTROPY and (mod == "random" or mod.startswith("numpy.random")):
                what = (f"calls `{_path_text(path)}()` with no seed, which makes another generator at every call "
                        f"(seeded from the operating system's entropy)")
                if (filename, line, what) not in self.where:
                    self.where.add((filename, line, what))
                    self.found.append(Effect(filename, line, what))

    def seeded(self, name, seed, callees, ctx, from_call, filename, line):
        """A generator made (or seeded again) with a seed that is None, or none the reader can
        tell from None (a value the function computes): seeded from entropy at every call; and
        one made over a generator from outside the call, which its draws advance."""
        fns = [self.resolve(p, ctx) for p in callees]
        known = [fn for fn in fns if getattr(fn, "__name__", "") in _SEEDS and
                 ((getattr(fn, "__module__", None) or "") == "random" or
                  (getattr(fn, "__module__", None) or "").startswith("numpy.random"))]
        if not known and not (name == "seed" and not callees):
            return          # another function of that name (a method `r.seed()` of an object the call made is one)
        if seed == _NO_SEED:
            if name == "Generator":
                return      # Generator() without its bit generator raises
            what = "with no seed"
        elif seed == _NONE_SEED:
            what = "with the seed None"
        else:
            v = self.resolve(seed, ctx)
            if seed != _OWN and seed[0] == "arg" and from_call or seed != _OWN and seed[0] == "global":
                self.used_args = True        # judged by this call's value: judged again at the next compile
            if (v is _MISSING or v is _OWNED) and seed[0] == "arg":
                # a function read without its call's arguments (judged where it is read with them),
                # or given a seed its caller computes: `shape_op(x, int(r.integers(1 << 30)))`, the
                # random programs' own pattern, is an int at every call; a computed None passed to a
                # function is not seen (a computed seed used where it is computed is)
                return
            if v is None:
                what = f"with the seed `{_path_text(seed)}`, None now"
            elif v is _OWNED or v is _MISSING:
                what = "with a seed the function computes (None seeds it from the operating system's entropy; " \
                       "pass the seed in as an argument)"
            elif type(v).__module__.startswith("numpy.random") and not isinstance(v, type) and \
                    hasattr(v, "bit_generator") or type(v).__name__ in ("PCG64", "PCG64DXSM", "MT19937", "Philox",
                                                                         "SFC64", "Random", "RandomState"):
                what = (f"with `{_path_text(seed)}`, a generator the call does not own, which the draws advance at "
                        f"every call")
                self._found(filename, line, f"calls `{name}(...)` {what}")
                return
            else:
                return
        self._found(filename, line, f"calls `{name}(...)` {what}, which makes another generator at every call "
                                    f"(seeded from the operating system's entropy)")

    def _found(self, filename, line, what):
        if (filename, line, what) not in self.where:
            self.where.add((filename, line, what))
            self.found.append(Effect(filename, line, what))

    def mutator(self, callees, args, ctx, filename, line):
        """operator.setitem(d, k, v), operator.iadd(lst, more) and their kind: a write into their
        first argument, as `d[k] = v` is."""
        for path in callees:
            fn = self.resolve(path, ctx)
            if not any(fn is w for w in _WRITES_FIRST) and not _unbound_mutator(fn):
                continue
            what = self.judge("item", None, args[0], ctx)
            if what is not None and (filename, line, what) not in self.where:
                self.where.add((filename, line, what))
                self.found.append(Effect(filename, line, what))

    def call_site(self, callees, args, ctx, from_call, line):
        """Read a user function called here with the objects the caller passes (a helper that
        writes into a dict it is given writes into the caller's dict)."""
        for path in callees:
            fn = self.resolve(path, ctx)
            if isinstance(fn, _Items):
                # an item of a container called (`table["make"]()`): what calling each item runs
                for v in fn.values[:_MAX_ITEMS]:
                    if isinstance(v, (type, types.FunctionType, types.MethodType, functools.partial)):
                        self.follow(v)
                    else:
                        self.bound_mutator(v, path, ctx[0].co_filename, line)
                continue
            if self.bound_mutator(fn, path, ctx[0].co_filename, line):
                continue
            if isinstance(fn, operator.methodcaller):
                # `push = methodcaller("append", v)` kept, then push(log): log.append(v)
                name = _methodcaller_name(fn)
                what = self.judge("method", name, args[0], ctx) if args and name in MUTATING else None
                if what is not None:
                    self._found(ctx[0].co_filename, line, what)
                continue
            self_obj = None
            if isinstance(fn, types.MethodType):
                fn, self_obj = fn.__func__, fn.__self__
            if not isinstance(fn, types.FunctionType) or is_library(fn.__code__.co_filename):
                continue
            code = fn.__code__
            params = list(code.co_varnames[:code.co_argcount])
            binding = {}
            if self_obj is not None and params:
                binding[params.pop(0)] = self_obj
            for name, path in zip(params, args):
                obj = _OWNED if path == _OWN else self.resolve(path, ctx)
                if obj is not _MISSING:
                    binding[name] = obj
                if from_call and path != _OWN and path[0] == "arg":
                    self.used_args = True       # judged by this call's arguments: judge again at the next compile
            if binding:
                self.function(fn, binding)

    def callbacks(self, container, path, filename, line):
        if ("callbacks", id(container)) in self.seen:
            return
        self.seen.add(("callbacks", id(container)))
        for v in list(container.values() if type(container) is dict else container)[:_MAX_ITEMS]:
            if isinstance(v, (types.FunctionType, types.MethodType, functools.partial)):
                self.follow(v)
            else:
                self.bound_mutator(v, path, filename, line, held=True)

    def bound_mutator(self, fn, path, filename, line, held=False):
        """A builtin method bound to an outside container, called (`cb = log.append` read from a
        closure, a list of such callbacks): a write into that container. -> whether fn is one."""
        while isinstance(fn, functools.partial):
            fn = fn.func
        owner = getattr(fn, "__self__", None)
        if not isinstance(fn, (types.BuiltinMethodType, types.MethodWrapperType)) or owner is None or \
                isinstance(owner, (types.ModuleType, type)) or _tensor_like(owner) or \
                getattr(fn, "__name__", "") not in MUTATING or \
                inspect.getattr_static(owner, fn.__name__, _MISSING) is _MISSING:
            return False
        what = f"`.{fn.__name__}` of {_kind_text(owner)} the call does not own (it changes that object)"
        self._found(filename, line, f"uses `{_path_text(path)}`, which holds {what}, to be called" if held else
                    f"calls `{_path_text(path)}`, which is {what}")
        return True

    def function(self, fn, binding):
        w = getattr(fn, "__dict__", {}).get("__wrapped__")
        if isinstance(w, types.FunctionType) and w is not fn:
            # a decorated function (functools.wraps: no_grad() on a method): the wrapper may be
            # a library's, what it wraps the user's own code, called with the same arguments
            self.function(w, binding)
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):
            return
        closure = {}
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
        self.code(code, getattr(fn, "__globals__", {}), closure, binding, frozenset())

    def follow(self, obj, args=None, kwargs=None):
        """Read what calling obj runs: a function, a bound method, a module, a callable object."""
        runs = getattr(type(obj), "_runs_when_traced", None)
        if runs is not None:        # a compiled function: called under the trace, it runs what it wraps
            return self.follow(runs(obj), args, kwargs)
        if isinstance(obj, types.FunctionType):
            self.function(obj, _bind(obj, None, args, kwargs))
        elif isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
            self.function(obj.__func__, _bind(obj.__func__, obj.__self__, args, kwargs))
        elif isinstance(obj, Module):
            self.module(obj, args, kwargs)
        elif isinstance(obj, functools.partial):
            self.follow(obj.func, None if args is None else tuple(obj.args) + tuple(args),
                        None if kwargs is None else {**obj.keywords, **kwargs})
        elif isinstance(obj, type) and inspect.getattr_static(obj, "_backward_cls", _MISSING) is not _MISSING and \
                inspect.getattr_static(obj, "apply", _MISSING) is not _MISSING:
            # (looked up statically: a metaclass's __getattr__ of the user's may raise anything)
            # a custom autograd.Function: its forward is traced and its backward traced into the
            # program, so a side effect in either would run once, not at every call
            # ctx is each call's own object (`ctx.alpha = alpha` is no side effect); forward
            # takes it unless setup_context is the class's own
            own_setup = _user_function(inspect.getattr_static(obj, "setup_context", None)) is not None
            for name in ("forward", "setup_context", "backward", "jvp"):
                fn = _user_function(inspect.getattr_static(obj, name, None))
                if fn is not None:
                    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
                    takes_ctx = params and (name != "forward" or not own_setup)
                    self.function(fn, {params[0]: _OWNED} if takes_ctx else {})
        elif isinstance(obj, type) and not is_library(getattr(sys.modules.get(obj.__module__), "__file__", None) or
                                                       "<builtin>"):
            # a class of the user's: making one runs its __init__ (a registry it appends to, a
            # counter of instances), with the new object its own
            # (and its __del__, which runs when the new object dies, at every call)
            for name in ("__new__", "__init__", "__post_init__", "__del__"):
                fn = _user_function(inspect.getattr_static(obj, name, None))
                if fn is not None and fn.__code__.co_argcount:
                    self.function(fn, {fn.__code__.co_varnames[0]: _OWNED})
        elif not isinstance(obj, type):
            call = inspect.getattr_static(type(obj), "__call__", None)
            special = self.special_methods(obj)
            if not isinstance(call, types.FunctionType):
                return special
            self.function(call, _bind(call, obj, args, kwargs))
        else:
            return False
        return True

    def special_methods(self, obj):
        """Read the special methods Python calls on an object of a user's class without the
        code naming them (`with obj`, `len(obj)`, `copy.copy(obj)`, `hash`, `repr`, an f-string,
        `sorted` of such objects, iteration): each is the user's code, run at every eager call.
        -> whether there were any."""
        tp = type(obj)
        if ("special", id(tp), id(obj)) in self.seen or isinstance(obj, (Module, Tensor, _Items)):
            return False
        self.seen.add(("special", id(tp), id(obj)))
        found = False
        if tp in (list, tuple, dict, set, frozenset, collections.deque):
            # the objects in an outside container (`sorted(items)` calls their __lt__)
            for v in list(obj.values() if tp is dict else obj)[:_MAX_ITEMS]:
                if not isinstance(v, (type, types.FunctionType, types.ModuleType, Module, Tensor, str, bytes, int,
                                      float, complex, bool, type(None))):
                    found = self.special_methods(v) or found
            return found
        for klass in tp.__mro__:
            if is_library(getattr(sys.modules.get(klass.__module__), "__file__", None) or "<builtin>"):
                continue
            for name, attr in list(vars(klass).items()):
                if name in _MAKING_METHODS:
                    # `type(obj)(...)`, `self.__class__(...)` (a clone method) make another one
                    fn = _user_function(attr)
                    if fn is not None and fn.__code__.co_argcount:
                        found = True
                        self.function(fn, {fn.__code__.co_varnames[0]: _OWNED})
                    continue
                if not (name.startswith("__") and name.endswith("__")) or name in _NOT_CALLED_ON_OBJECTS:
                    continue
                fn = _user_function(attr)
                if fn is not None and fn.__code__.co_argcount:
                    found = True
                    self.function(fn, {fn.__code__.co_varnames[0]: obj if not isinstance(attr, classmethod) else tp})
        return found

    def module(self, m, args=None, kwargs=None):
        """Read m's forward (bound to m, with the call's arguments where m is the one
        compiled) and every submodule's forward and hooks, each module once."""
        if id(m) in self.modules:
            return
        for sub in m.modules():
            if sub is not m and id(sub) in self.modules:
                continue
            self.modules.add(id(sub))
            fwd = sub.__dict__.get("forward")
            if fwd is None:
                fn = inspect.getattr_static(type(sub), "forward", None)
                if isinstance(fn, types.FunctionType) and not is_library(fn.__code__.co_filename):
                    fwd = types.MethodType(fn, sub)
            if fwd is not None:
                self.follow(fwd, args if sub is m else None, kwargs if sub is m else None)
            for table in ("_forward_pre_hooks", "_forward_hooks"):
                for hook in (sub.__dict__.get(table) or {}).values():
                    self.follow(hook)


# functions that write into their first argument, as a subscript or an augmented assignment does
_WRITES_FIRST = tuple(getattr(operator, n) for n in (
    "setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod", "imul", "imatmul", "ior",
    "ipow", "irshift", "isub", "itruediv", "ixor", "__setitem__", "__delitem__", "__iadd__", "__iconcat__")) + \
    (heapq.heappush, heapq.heappop, heapq.heapify, heapq.heapreplace, heapq.heappushpop, bisect.insort,
     bisect.insort_left, bisect.insort_right, object.__setattr__, object.__delattr__, np.copyto, np.put, np.place,
     np.putmask, np.fill_diagonal)


# special methods Python does not call on an object already made (or only where the code names
# them, a call's own site reads: __call__), and those that make objects (a class reached is read so)
_NOT_CALLED_ON_OBJECTS = frozenset({"__init__", "__new__", "__post_init__", "__del__", "__init_subclass__",
                                    "__set_name__", "__subclasshook__", "__class_getitem__", "__call__",
                                    "__setattr__", "__delattr__", "__setitem__", "__delitem__", "__set__",
                                    "__delete__"})


_MAKING_METHODS = ("__new__", "__init__", "__post_init__", "__del__")
_MUTABLE_BUILTINS = (list, dict, set, bytearray, collections.deque, collections.OrderedDict, collections.defaultdict)


def _unbound_mutator(fn):
    """A mutable builtin's method read off its class (`list.append(log, v)`, `dict.update(d, ...)`):
    a write into its first argument."""
    return isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(fn, "__objclass__", None) in _MUTABLE_BUILTINS and getattr(fn, "__name__", "") in MUTATING


def _methodcaller_name(mc):
    """The method name an operator.methodcaller calls."""
    try:
        head, rest = mc.__reduce__()[:2]
    except Exception:
        return None
    if head is operator.methodcaller:
        return rest[0] if rest else None
    return head.args[0] if isinstance(head, functools.partial) and head.args else None


def _user_function(fn):
    """The user's function behind a class attribute (a staticmethod's, a classmethod's), or None
    for library code and what is no function."""
    fn = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
    return fn if isinstance(fn, types.FunctionType) and not is_library(fn.__code__.co_filename) else None


def _bind(fn, self_obj, args, kwargs):
    """Parameter name -> object for what is known of a call: the object a method is
    bound to, and the compiled call's own arguments."""
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    out = _CallArgs() if args is not None else {}
    if self_obj is not None and names:
        out[names[0]] = self_obj
    if args is not None:
        try:
            bound = inspect.signature(fn).bind(*((self_obj,) if self_obj is not None else ()), *args,
                                               **(kwargs or {}))
        except (TypeError, ValueError):
            return out
        bound.apply_defaults()
        for k, v in bound.arguments.items():
            if k in names:
                out[k] = v
    return out


class SideEffects:
    """The side effects of one compiled callable, read once: again at a later compile only
    where they depend on the call's arguments (a list passed in and appended to)."""

    def __init__(self, target, module=None):
        self.target = target
        self.module = module
        self._cached = None

    def find(self, args=(), kwargs=None):
        """The side effects calling the target with these arguments would have (first found first)."""
        if self._cached is not None:
            return self._cached
        f = _Finder()
        if self.module is not None:
            f.module(self.module, args, kwargs or {})
        else:
            f.follow(self.target, args, kwargs or {})
        if not f.used_args:
            self._cached = f.found
        return f.found

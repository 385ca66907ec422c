"""What a compiled program read besides its arguments, as guards checked at every call.

A trace bakes in every Python value it reads: a float global becomes a literal, a tensor
read through a closure, a dict, a list or an attribute becomes a fixed input, a module's
`negative_slope` or `eps` a constant, a submodule's `training` flag a branch taken. So a
program is reused only while those reads would give the same values. Like torch's Dynamo,
which builds guards from the *sources* of the values a frame read, this module finds the
sources a call can reach and records a guard for each:

- the code the function can run: its own code objects (`f.__code__` swapped is another
  program), the global functions and methods it calls (recursively), and for modules every
  module's class (user code only: the code of the standard library and installed packages
  is taken as fixed, but what user code reads from their modules, `F.relu`, is guarded by
  identity, so a patch after the trace is seen; tracegrad's own code is guarded by a count
  of the patches of its modules, the version of Tensor's and Parameter's attributes
  (class_version.py), and the attributes of the library classes of the modules met,
  `_library_guard`);
- from that code, the names it reads: globals, builtins (`max`, and a global that hides one
  later), the modules it imports itself, closure cells, the function object's attributes,
  attribute names (and the names in the strings it passes to eval), and the special methods
  Python calls for it (`n * x`, `with`, `str(n)`); a class's attributes in every class of its
  MRO and its metaclass's methods; a module's `__getattr__`; a singledispatch registry;
- from those roots, and from the objects inside the call's arguments that its key holds by
  identity alone, the values: a Python scalar is guarded by type and bit pattern (`1` is
  not `1.0`, `0.0` is not `-0.0`), a tensor by identity and its shape, dtype and
  requires_grad, a module by identity with its class, training flag, parameters, buffers,
  submodules, hooks and plain attributes, a container by its structure and items (deeper
  than the walk goes, by one token of its contents), a numpy array or another buffer by its
  bytes, a user object by identity, class and the attributes the code names (and a tensor's
  Python attributes so), anything else by identity.

Reaching further than the trace did (a name read only on a branch not taken) only costs a
recompile; reaching less would return a stale result, so where in doubt this guards more.
Tensors whose *values* the trace read in Python (`.item()`, `bool()`, `.tolist()`, their
text) are guarded by their version counter as well; those whose strides (`stride()`,
`is_contiguous()`) or autograd flags (`retains_grad`, `is_inference()`) it read, by those; those
whose history (`grad_fn`, `is_leaf`, `output_nr`), version counter or address (`data_ptr()`) the
user's code read, by those (tensor._read_history); and the settings of the process it read
(`is_anomaly_enabled()`, the print options), by their values (tensor.read_setting). A user
object, class or module is guarded on its number of attributes too (a name the trace found
absent, set later), and the globals a function loads that nothing defines on their absence.
"""
import array
import collections
import contextvars
import dis
import enum
import functools
import hashlib
import operator
import struct
import sys
import types
import weakref

import numpy as np

from ..tensor import Tensor, UNTRACKED_WRITES, ESCAPES, escaped, LIBRARY_PATCHES, _count_patch, device as _device
from .check_code import CheckCode
from .class_version import ClassVersion
from .side_effects import is_library
from ..nn.modules.module import Module
from ..nn.modules import module as _m
from ..nn.parameter import Parameter

_MAX_ITEMS = 64          # containers up to this size are guarded item by item
_MAX_DEPTH = 5           # how deep into containers and plain objects the walk goes item by item
_DEEP_BUDGET = 10000     # deeper than that, how many values one guard compares (deep_token)
_DYNAMIC = frozenset({"getattr", "hasattr", "vars", "__dict__", "__getattribute__", "attrgetter", "itemgetter",
                      "asdict", "astuple", "dir", "getmembers"})

_SCALARS = (type(None), bool, int, float, complex, str, bytes)
# methods Python calls without naming them in the caller's code; a custom autograd.Function's
# setup_context and backward (or vjp) are called by apply and by the trace's differentiation, and
# a backward traced into the program bakes in what it read (a global scale) as forward does
_IMPLICIT = frozenset({"forward", "__call__", "__getattr__", "__getattribute__", "__getitem__", "__iter__", "__next__",
                       "__len__", "__contains__", "__bool__", "__float__", "__int__", "__index__", "__get__",
                       "backward", "vjp", "setup_context"})
# and every other special method a class defines: an operator (`n * x`: __mul__), a builtin
# (abs, round, str, hash, format), a comparison, a with statement (__enter__, __exit__) calls it;
# those that make an object only where the class itself is read (`Ctx()` may make one)
_MAKING = frozenset({"__init__", "__new__", "__post_init__"})
_NEVER_CALLED = frozenset({"__del__", "__init_subclass__", "__set_name__", "__subclasshook__", "__class_getitem__"})


def _implicit(name, attr, made=False):
    """Whether Python may call the class attribute `name` without the caller's code naming it."""
    if name in _IMPLICIT:
        return True
    if not (name.startswith("__") and name.endswith("__")) or name in _NEVER_CALLED or \
            name in _MAKING and not made:
        return False
    return isinstance(attr, (types.FunctionType, staticmethod, classmethod, property))


def _is_library_file(path):
    return bool(path) and is_library(path)


def _is_library_type(tp):
    name = getattr(tp, "__module__", None) or ""
    mod = sys.modules.get(name)
    if mod is None:
        return name in sys.builtin_module_names
    return _is_library_module(mod)


def _is_library_module(mod):
    f = getattr(mod, "__file__", None)
    if f is None:
        # a module without a file is built in, or the user's own: a notebook's or `python -c`'s
        # __main__, a module made at run time
        return getattr(mod, "__name__", None) in sys.builtin_module_names
    return _is_library_file(f)


_PACK_D = struct.Struct("<d").pack


def scalar_bits(v):
    """A key that tells apart what `==` does not: 1 from 1.0 and True, 0.0 from -0.0."""
    t = type(v)
    if t is float or isinstance(v, float):
        return (t, struct.pack("<d", float.__float__(v)))
    if t is bool:
        return (t, v)
    if isinstance(v, int):
        return (t, int.__int__(v))
    if isinstance(v, complex):
        return (t, struct.pack("<dd", complex.__complex__(v).real, complex.__complex__(v).imag))
    if isinstance(v, str):
        return (t, str.__str__(v))
    if isinstance(v, bytes):
        return (t, bytes(v))
    if isinstance(v, np.generic):         # numpy scalars: np.float32(-0.0) == np.float32(0.0)
        return (t, v.tobytes())
    return (t, v)


class _Same:
    """A key for an object that equals others it is not (a frozen dataclass, a class with its own
    __eq__): equal to itself alone. Programs trace such an argument's attributes as constants and
    their guards read the object the trace saw, so an equal object with other attributes (2 and
    2.0, a field left out of __eq__) must be a new key. Holds the object: its id is not reused."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return other.__class__ is _Same and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


# immutable values whose == is their identity's worth (a device made anew at every call is the same key)
_VALUE_TYPES = (str, bytes, type(None), type(Ellipsis), range, type, types.FunctionType, types.BuiltinFunctionType,
                types.MethodType, types.BuiltinMethodType, np.dtype, _device)


def canonical(spec):
    """A flattened argument structure with every Python scalar replaced by its bits key, so
    equal keys mean equal arguments, not merely `==` ones; unhashable constants by identity,
    and so objects that compare equal by their own __eq__ (_Same)."""
    t = type(spec)
    if t is tuple:
        return tuple(canonical(s) for s in spec)
    if isinstance(spec, _SCALARS) or isinstance(spec, np.generic):
        return scalar_bits(spec)
    if isinstance(spec, tuple):                       # a namedtuple: its items by their bits
        return (t, tuple(canonical(s) for s in spec))
    if t is slice:
        return (t, canonical((spec.start, spec.stop, spec.step)))
    if t is frozenset:
        return (t, frozenset(canonical(s) for s in spec))
    try:
        hash(spec)
    except TypeError:
        return (t, id(spec))
    if isinstance(spec, _VALUE_TYPES) or t.__eq__ is object.__eq__:
        return (t, spec)
    return (t, _Same(spec))


# -- guards --------------------------------------------------------------------------------------

class Guard:
    """One assumption: `test(read(env))` holds. `what` names the source for messages;
    `emit(code)` writes the same tests into the program's generated check (check_code.py),
    where the guard has such tests (else its read and test are called from there)."""
    __slots__ = ("read", "test", "what", "emit")

    def __init__(self, read, test, what, emit=None):
        self.read, self.test, self.what, self.emit = read, test, what, emit


class Guards:
    """The guards of one program; `failed(env)` is None while all hold, else the first that fails.
    `keep` holds the objects whose identities the guards compare, so no id is reused.
    A call runs them as one generated function (`check`); where one of its tests raises,
    the guards are asked one by one, each exception a failure. The tests record the values
    they compare with as they are written: built with the guards, before the program first
    runs, as the guards' own tokens are."""
    __slots__ = ("guards", "keep", "code", "check", "tensor_ids")

    def __init__(self, guards, keep=(), tensor_ids=frozenset()):
        self.guards = []
        self.keep = keep
        self.tensor_ids = tensor_ids       # the tensors the guards reached (compile: an argument that is one)
        self.code = CheckCode(token, _SCALARS)
        for g in guards:
            self.add(g, compile=False)
        self.check = self.code.function()

    def add(self, guard, compile=True):
        """One more guard (a whole step's, compile.py), its tests written now."""
        self.code.guard = len(self.guards)
        self.guards.append(guard)
        if guard.emit is not None:
            guard.emit(self.code)
        else:
            self.code.fallback(guard)
        if compile:
            self.check = self.code.function()

    def failed(self, env):
        i = self.check(env)
        if i == -1:
            return None
        if i >= 0:
            return self.guards[i].what
        return self.failed_one_by_one(env)

    def failed_one_by_one(self, env):
        """The guards' own reads and tests, in order (what the generated check stands for)."""
        for g in self.guards:
            try:
                if g.test(g.read(env)):
                    continue
            except Exception:
                pass
            return g.what
        return None

    def __len__(self):
        return len(self.guards)

    def __repr__(self):
        return "\n".join(g.what for g in self.guards)


def tensor_token(t):
    try:
        d = t._data
    except ValueError:        # a lazy module's parameter before its first forward: no memory yet
        return (id(t), t._req, t._dtype, None, type(t))
    return (id(t), t._req, t._dtype, d.shape, d.__class__)


def token(v):
    """What a guard compares a value by: scalars by bits, tensors by identity and metadata,
    anything else by identity (its own state has a guard of its own)."""
    if v is None:
        return None
    t = type(v)
    if t is float:                       # scalar_bits' key, without its chain of tests
        return (float, _PACK_D(v))
    if t is int or t is bool:
        return (t, v)
    if isinstance(v, Tensor):
        return tensor_token(v)
    if isinstance(v, _SCALARS) or isinstance(v, np.generic):
        if t not in _SCALARS and type(getattr(v, "__dict__", None)) is dict:
            return (scalar_bits(v), id(v))     # a user's float (str, ...) subclass with state of its own
        return scalar_bits(v)
    return id(v)


def _items_token(items):
    return tuple(token(x) for x in items)


def module_token(m, attrs):
    """A module's own state in one tuple: its class, attribute names, training flag, parameters
    and buffers (as tensor tokens), submodules (by identity), hooks (by handle id and function)
    and its plain attributes `attrs`."""
    d = m.__dict__
    p, b, sub = d["_parameters"], d["_buffers"], d["_modules"]
    return (type(m), tuple(d), d["training"], tuple(p), tuple(map(token, p.values())), tuple(b),
            tuple(map(token, b.values())), tuple(sub), tuple(map(id, sub.values())),
            tuple(d["_forward_pre_hooks"].items()), tuple(d["_forward_hooks"].items()),
            tuple(d["_backward_hooks"].items()), tuple(d.get("_backward_pre_hooks", {}).items()),
            tuple([token(d[a]) for a in attrs]))


_SNAPSHOT_BYTES = 1 << 24     # numpy arrays up to this size are compared whole at every call; larger by a digest


def _raw(a):
    """An array's bytes as a flat uint8 array (a copy only where it is not C-contiguous)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _array_test(a0):
    """A numpy array's shape, dtype and bytes (0.0 is not -0.0, as a scalar's guard tells them
    apart): compared with a copy, or for an array too big to copy per program, its SHA-1
    digest (the whole array read at every call, as the function's own read of it may be)."""
    shape, dt = a0.shape, a0.dtype
    if dt.hasobject:
        snap = a0.copy()
        return lambda v: v.shape == shape and v.dtype == dt and np.array_equal(v, snap)
    if a0.nbytes <= _SNAPSHOT_BYTES:
        snap = _raw(a0).copy()
        return lambda v: v.shape == shape and v.dtype == dt and np.array_equal(_raw(v), snap)
    digest = hashlib.sha1(_raw(a0)).digest()
    return lambda v: v.shape == shape and v.dtype == dt and hashlib.sha1(_raw(v)).digest() == digest


def same_bytes(v, snap):
    """Whether array v holds exactly the C-ordered array snap: shape, dtype and bytes."""
    if type(v) is not np.ndarray or v.shape != snap.shape or v.dtype != snap.dtype:
        return False
    if snap.dtype.hasobject:
        return bool(np.array_equal(v, snap))
    return bool(np.array_equal(_raw(v), _raw(snap)))


def _same_keys(a, b):
    # by identity: a key's own __eq__ (a tensor's, say) is never called
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


_EVAL = frozenset({"eval", "exec"})
_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def _buffer(v):
    """A buffer's contents as (format, shape, bytes), or None for an object that is no buffer."""
    try:
        m = memoryview(v)
    except (TypeError, ValueError):
        return None
    return (m.format, m.shape, m.tobytes())


def _names_in_strings(code):
    """The names read by the string constants of code that compile as Python."""
    out = set()
    for c in _code_objects(code):
        for k in c.co_consts:
            if isinstance(k, str) and len(k) < 10000:
                try:
                    compiled = compile(k, "<string>", "exec")
                except (SyntaxError, ValueError):
                    continue
                for cc in _code_objects(compiled):
                    out.update(cc.co_names)
    return out


_STRING_MAKERS = frozenset({"str", "chr", "format", "join", "format_map", "replace", "lower", "upper", "strip",
                            "lstrip", "rstrip", "removeprefix", "removesuffix", "zfill", "capitalize", "title"})
_BUILT = {}         # code object -> whether it builds strings (_builds_strings)
_BUILDS = ("<the code builds strings>",)     # in _Walk.strings where it does


def _builds_strings(code):
    """Whether code may build a string at run time: an f-string, a str method or str() called,
    or a string constant added to (or %-formatted with) something."""
    b = _BUILT.get(code)
    if b is None:
        has_str = any(type(k) is str for k in code.co_consts)
        b = bool(_STRING_MAKERS.intersection(code.co_names))
        if not b:
            for ins in dis.get_instructions(code):
                if ins.opname in ("FORMAT_VALUE", "BUILD_STRING") or \
                        has_str and ins.opname == "BINARY_OP" and ins.arg in (0, 6, 13, 19):   # + % += %=
                    b = True
                    break
        if len(_BUILT) > 4096:
            _BUILT.clear()
        _BUILT[code] = b
    return b


_LOADS = {}         # code object -> the names its LOAD_GLOBAL and LOAD_NAME read


def _global_loads(code):
    names = _LOADS.get(code)
    if names is None:
        names = frozenset(ins.argval for ins in dis.get_instructions(code)
                          if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and type(ins.argval) is str)
        if len(_LOADS) > 4096:
            _LOADS.clear()
        _LOADS[code] = names
    return names


def _in_builtins(g, name):
    b = g.get("__builtins__")
    b = vars(b) if isinstance(b, types.ModuleType) else b
    return type(b) is dict and name in b


def _code_objects(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def _const(v):
    return lambda env: v


class _Walk:
    """One walk from the roots; `names` (attribute and global names of the reachable user code)
    grows as code is found, so the walk is repeated until it no longer grows.

    Every object met gets one guard over its own state (a token of each item or attribute),
    read through its source: a root's source is a global or a closure cell; an object found
    inside another is read as that same object, since the guard before it checked that its
    parent still holds it."""

    def __init__(self, names, value_reads, used, exempt=frozenset(), strings=None):
        self.exempt = exempt
        self.saw_module = False
        self.names = names
        # the strings the reachable code holds or reads that could name an attribute: the names
        # `getattr(cfg, "X")`, `vars(cfg)["X"]` or `getattr(cfg, NAME)` may compute
        self.strings = strings if strings is not None else set()
        self.value_reads = value_reads
        self.used = used
        self.guards = []
        self.keep = []
        self.seen = set()
        self.tensors = set()
        self.value_guarded = set()      # ids of the tensors read by value that a guard covers
        self.codes = set()
        self.lib_classes = {}          # the library classes of the modules met (id -> class)

    def add(self, read, test, what, emit=None):
        self.guards.append(Guard(read, test, what, emit))

    # functions and their code
    def function(self, f, label):
        w = f.__dict__.get("__wrapped__")
        if isinstance(w, types.FunctionType) and w is not f:
            # a decorated function (functools.wraps: no_grad() on an optimizer's step): the
            # wrapper may be a library's, what it wraps the user's own code
            self.function(w, label)
        reg = f.__dict__.get("registry")
        if isinstance(reg, types.MappingProxyType) and "dispatch" in f.__dict__ and ("registry", id(reg)) not in self.seen:
            # functools.singledispatch: the implementation registered for each type (another one
            # registered later runs instead) and what each reads
            self.seen.add(("registry", id(reg)))
            self.inside(reg, f"the implementations of {label}", 0)
        code = f.__code__
        if code in self.codes or _is_library_file(code.co_filename):
            return
        self.codes.add(code)
        # the code itself: `f.__code__ = ...` (a reload, a patch) runs other code under the same
        # function object, as Dynamo's cache, kept on the code object, sees
        self.add(_const(f), lambda fn, code=code: fn.__code__ is code, f"the code of {label}",
                 lambda cc, f=f, code=code: cc.need(f"{cc.const(f)}.__code__ is {cc.const(code)}"))
        names = set()
        for c in _code_objects(code):
            names.update(c.co_names)
            self.strings.update(k for k in c.co_consts if type(k) is str and k.isidentifier())
            if _BUILDS not in self.strings and _builds_strings(c):
                self.strings.add(_BUILDS)       # (kept with the strings: the walk is repeated while they grow)
        g = f.__globals__
        if names & _EVAL and not all(n in g for n in names & _EVAL):
            # eval/exec of a string: the names it reads are in no code object; those of its
            # string constants (`eval("SCALE * o.k")`), and every global of the module
            names.update(_names_in_strings(code))
            names.update(n for n in g if not n.startswith("__"))
        self.names.update(names)
        for name in sorted(names):
            if name in g:
                self.root(g[name], lambda env, g=g, name=name: g[name], f"global '{name}' (read by {label})",
                          lambda code, g=g, name=name: f"{code.const(g)}[{code.const(name)}]")
        self.builtins(g, label)
        # globals the code reads that neither its globals nor the builtins hold (a NameError
        # caught, a name defined later): that they stay undefined
        absent = sorted(n for c in _code_objects(code) for n in _global_loads(c) if n not in g and
                        not _in_builtins(g, n))
        if absent and ("absent", id(g), tuple(absent)) not in self.seen:
            self.seen.add(("absent", id(g), tuple(absent)))
            self.attrs(g, g, absent, f"the globals of {label} (names it reads that are not defined)", 0, descend=())
        # modules the code imports itself (`import cfg` inside the function): read from
        # sys.modules at every call, as the import statement does
        for name in sorted(names):
            if name not in g and isinstance(sys.modules.get(name), types.ModuleType):
                self.root(sys.modules[name], lambda env, name=name: sys.modules[name],
                          f"the module '{name}' (imported by {label})",
                          lambda code, name=name: f"{code.const(sys.modules)}[{code.const(name)}]")
        for name, cell in zip(code.co_freevars, f.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            self.root(v, lambda env, cell=cell: cell.cell_contents, f"closure variable '{name}' of {label}",
                      lambda code, cell=cell: f"{code.const(cell)}.cell_contents")
        read = sorted(n for n in f.__dict__ if n in self.names)
        if read:
            # attributes set on the function object (`f.scale`) that the code reads
            self.attrs(f, f.__dict__, read, f"the attributes of {label}", 0)
        for attr in ("__defaults__", "__kwdefaults__"):
            d0 = getattr(f, attr)
            if d0:
                self.root(d0, lambda env, f=f, attr=attr: getattr(f, attr), f"the {attr.strip('_')} of {label}",
                          lambda code, f=f, attr=attr: f"{code.const(getattr)}({code.const(f)}, {code.const(attr)})")

    def builtins(self, g, label):
        """The names the code reads that its globals lack but the builtins hold (`max`, `abs`):
        each still absent from the globals (a global defined later hides the builtin) and the
        builtin the same object (`builtins.max = ...` patched after the trace)."""
        b = g.get("__builtins__")
        b = vars(b) if isinstance(b, types.ModuleType) else b
        if type(b) is not dict:
            return
        found = tuple(sorted(n for n in self.names if n not in g and n in b))
        if not found or ("builtins", id(g)) in self.seen:
            return
        self.seen.add(("builtins", id(g)))
        self.attrs(g, g, found, f"the globals of {label} (names the builtins hold)", 0, descend=())
        self.attrs(b, b, found, f"the builtins read by {label}", 0, descend=types.FunctionType)

    def methods_of(self, tp, made=False):
        """The user methods of a class that the reachable code may call (by name, or Python for it;
        with `made`, those that make an object too)."""
        for klass in tp.__mro__:
            if _is_library_type(klass):
                continue
            for name, attr in list(vars(klass).items()):
                if name in self.names or _implicit(name, attr, made):
                    fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
                    if isinstance(fn, property):
                        fn = fn.fget
                    if isinstance(fn, types.FunctionType):
                        self.function(fn, f"{klass.__qualname__}.{name}")

    def root(self, v, read, what, source):
        """A value read through a source that nothing else guards: its token, then its state.
        `source(code)`: the expression that reads it in the generated check."""
        tok = self.token(v)
        if type(v) is str and v.isidentifier():
            self.strings.add(v)

        def emit(code):
            code.token_is(code.let(source(code)), v)
        self.add(read, lambda x, tok=tok: self_token(x) == tok, what, emit)
        self.inside(v, what, 0)

    def token(self, v):
        """v's token (its version, where the trace read its values, has a guard of its own: inside)."""
        self.keep.append(v)
        if isinstance(v, Tensor):
            self.tensors.add(id(v))
        return token(v)

    def inside(self, v, what, depth):
        """Guards on the state of v, an object whose identity a guard before already checked."""
        if isinstance(v, (Tensor,) + _SCALARS):
            if type(v) not in _SCALARS and not isinstance(v, Tensor) and \
                    type(getattr(v, "__dict__", None)) is dict and not _is_library_type(type(v)):
                # a user's subclass of float (int, str) with attributes its methods read
                key = id(v)
                if key not in self.seen:
                    self.seen.add(key)
                    self.obj(v, what, depth)
                return
            if isinstance(v, Tensor):
                if id(v) in self.value_reads:
                    self.value_read(v, what)
                if v.__dict__ and ("tensor attrs", id(v)) not in self.seen:
                    # Python attributes set on a captured tensor (`w.scale`, `p.lr_mult`) that the
                    # code names: read by the trace as constants
                    self.seen.add(("tensor attrs", id(v)))
                    d = v.__dict__
                    names = sorted(d) if self.names & _DYNAMIC else sorted(n for n in d if n in self.names)
                    if names:
                        self.attrs(v, d, names, f"the Python attributes of {what}", depth)
            return
        key = id(v)
        if key in self.seen:
            return
        self.seen.add(key)
        if getattr(type(v), "_guard_by_identity", False):
            # a compiled function called inside the trace is inlined: what its function reads is read
            self.inside(v._runs_when_traced(), what, depth)
            return
        read = _const(v)
        if isinstance(v, types.MethodType):
            self.add(read, lambda m, s=v.__self__, f=v.__func__: m.__self__ is s and m.__func__ is f, what,
                     lambda code, m=v: code.need(f"{code.const(m)}.__self__ is {code.const(m.__self__)} and "
                                                 f"{code.const(m)}.__func__ is {code.const(m.__func__)}"))
            self.inside(v.__self__, what + ".__self__", depth)
            self.inside(v.__func__, what + ".__func__", depth)
        elif isinstance(v, types.FunctionType):
            self.function(v, v.__qualname__)
        elif isinstance(v, types.ModuleType):
            names = sorted(n for n in self.names if n in vars(v))
            if not _is_library_module(v):
                # (and as many globals: a name the code reads that the module lacked at the trace)
                self.attrs(v, vars(v), names, what, depth, count=True)
                self.user_module(v, what, depth)
            else:
                # a library's module: what the code reads from it by identity (`F.relu` patched
                # after the trace must not leave the old function in the program), its contents
                # as fixed; followed only into its submodules (`tg.nn.functional.relu`)
                self.attrs(v, vars(v), names, what, depth, descend=types.ModuleType)
        elif isinstance(v, type):
            self.methods_of(v, made=True)
            if not _is_library_type(type(v)):
                # a metaclass of the user's: its methods (a property, __getattr__) answer `C.k`
                self.methods_of(type(v))
                self.klass(type(v), what)
            if not _is_library_type(v):
                # every name the code reads from it (`N.h(x)` with `N.h` replaced, `N.cfg["a"]`)
                d = vars(v)
                self.attrs(v, d, sorted(n for n in self.names if n in d), what, depth, count=True)
                # and those it inherits (`Sub.k`, `cls.k` in a classmethod called on Sub): the
                # base's value, and that no class before it in the MRO defines the name since
                self.klass(v, what, made=True)
        elif isinstance(v, functools.partial):
            # its keyword values by their tokens as its arguments (0.0 is not -0.0, 1 not 1.0)
            tok = (id(v.func), self.seq_token(v.args), tuple(v.keywords), self.seq_token(v.keywords.values()))
            self.add(read, lambda p, tok=tok: (id(p.func), tuple(map(token, p.args)), tuple(p.keywords),
                                               tuple(map(token, p.keywords.values()))) == tok, what)
            self.inside(v.func, what + ".func", depth)
            for i, a in enumerate(v.args):
                self.inside(a, f"{what}.args[{i}]", depth + 1)
            for k, a in v.keywords.items():
                self.inside(a, f"{what}.keywords[{k!r}]", depth + 1)
        elif _is_module(v):
            self.saw_module = True         # the global module hooks apply to it (build_guards)
            self.module(v, what)
        elif isinstance(v, np.ndarray):
            self.add(read, _array_test(v), f"the values of {what}")
            extra = getattr(v, "__dict__", None)
            if type(v) is not np.ndarray and type(extra) is dict and extra:
                # a subclass's own state beside its values (a masked array's mask, fill value)
                self.attrs(v, extra, sorted(extra), f"the attributes of {what}", depth + 1)
        elif isinstance(v, (operator.attrgetter, operator.methodcaller)):
            # the attribute (or method) names it reads, which no code object holds
            if isinstance(v, operator.attrgetter):
                self.names.update(n for path in v.__reduce__()[1] for n in path.split("."))
            else:
                red = v.__reduce__()
                self.names.add(red[0].args[0] if isinstance(red[0], functools.partial) else red[1][0])
        elif isinstance(v, (bytearray, array.array, memoryview)) or \
                _is_library_type(type(v)) and not isinstance(v, type) and _buffer(v) is not None:
            # mutable buffers (a bytearray, an array.array, a memoryview, a ctypes value): their
            # bytes, item type and shape
            snap = _buffer(v)
            self.add(read, lambda b, snap=snap: _buffer(b) == snap, f"the contents of {what}")
        elif isinstance(v, weakref.ref):
            # what it refers to now, and that object's state
            x = v()
            if x is None or isinstance(x, (Tensor, type, types.FunctionType, types.ModuleType) + _OWN_STATE) or \
                    type(getattr(x, "__dict__", None)) is not dict and not isinstance(x, (dict, list, tuple)):
                tok = self.token(x)
                self.add(read, lambda r, tok=tok: self_token(r()) == tok, f"the object {what} refers to")
                if x is not None:
                    self.inside(x, f"{what}()", depth + 1)
            else:
                # a plain object or container held weakly: the guards must not keep it alive (the
                # user's code would see it die, a program holding it would not), so its state is
                # compared by one token read through the reference at every call (a reference
                # refers to that one object or to none), the objects inside it held
                tok = deep_token(x, [_DEEP_BUDGET])
                self.keep.extend(_held(x, [_DEEP_BUDGET], set()))
                self.add(read, lambda r, tok=tok: _weak_token(r) == tok, f"the object {what} refers to")
                self.objects_inside(x, what, f"{what}()")
        elif isinstance(v, _DICT_VIEWS):
            # a view of a dict changed elsewhere: its items now
            items = [y for x in v for y in (x if isinstance(x, tuple) and type(v) is _DICT_VIEWS[2] else (x,))]
            tok = tuple(self.token(x) for x in items)
            self.add(read, lambda c, tok=tok, items_view=type(v) is _DICT_VIEWS[2]: tuple(
                token(y) for x in c for y in (x if items_view else (x,))) == tok, f"the items of {what}")
            for i, x in enumerate(items):
                self.inside(x, f"{what}[{i}]", depth + 1)
        elif isinstance(v, contextvars.ContextVar):
            # its value in the calling context, which the trace read through get()
            x = v.get(_ABSENT)
            tok = self.token(x)
            self.add(read, lambda c, tok=tok: self_token(c.get(_ABSENT)) == tok,
                     f"the value of the context variable {what}")
            self.inside(x, f"the value of {what}", depth + 1)
        elif depth >= _MAX_DEPTH:
            if isinstance(v, (dict, list, tuple, set, frozenset, collections.deque)) or hasattr(v, "__dict__"):
                # deeper than the walk goes item by item: its whole state, recursively, at every call
                n, left = _DEEP_BUDGET, [_DEEP_BUDGET]
                tok = deep_token(v, left)
                if left[0] < 0:
                    # more values than the budget: all of them (a change past it is a change too)
                    n = float("inf")
                    tok = deep_token(v, [n])
                self.add(read, lambda x, tok=tok, n=n: deep_token(x, [n]) == tok, f"the contents of {what}")
                # what it holds that the token takes by identity alone (a module, a function, a
                # numpy array) has guards of its own, and plain objects the methods of their class
                self.objects_inside(v, what, what)
        elif isinstance(v, (dict, list, tuple, collections.deque, types.MappingProxyType)):
            self.container(v, what, depth)
        elif isinstance(v, (set, frozenset)):
            tok = (type(v), frozenset(map(self.token, v)))
            self.add(read, lambda c, tok=tok: (type(c), frozenset(map(token, c))) == tok, f"the items of {what}")
        elif hasattr(v, "__dict__"):
            self.obj(v, what, depth)
        elif not _is_library_type(type(v)):
            self.slots(v, what, depth)

    def user_module(self, v, what, depth):
        """What a user's module answers beyond the names the code spells: where the code
        computes names (`getattr(cfg, NAME)`, `vars(cfg)["X"]`), the globals of it that a string
        the code holds or reads names (a name built at run time, f"w{i}", is not found); and
        where it has a `__getattr__` (PEP 562), that function's reads and the absence of the
        names it answers (a global defined later hides it)."""
        d = vars(v)
        if self.names & _DYNAMIC:
            # where the code builds strings at run time (`"w" + str(i)`, f"w{i}", "".join), the
            # name it computes may be any: every global of the module but its own (__name__, ...)
            built = _BUILDS in self.strings
            names = sorted(n for n in d if (n in self.strings or built and not n.startswith("__")) and
                           n not in self.names)
            if names:
                self.attrs(v, d, names, f"the globals of {what} named by strings of the code" if not built
                           else f"the globals of {what} (the code builds names at run time)", depth)
        answer = d.get("__getattr__")
        if isinstance(answer, types.FunctionType):
            absent = sorted(n for n in self.names if n not in d)
            if absent:
                self.attrs(v, d, absent, f"the names {what}.__getattr__ answers", depth, descend=())
            self.inside(answer, f"{what}.__getattr__", depth)

    def value_read(self, v, what):
        """Guard a tensor the trace read by value (.item(), bool()): its version, and what the
        version does not see: writes through .data or numpy, and `t.data = other`. A small
        tensor (a temperature, a step count) by its bytes; a larger one by its array's identity
        and the count of writes through .data (tensor.UNTRACKED_WRITES)."""
        self.value_guarded.add(id(v))
        ver = self.value_reads[id(v)]
        a = v._data
        if type(a) is np.ndarray and a.size <= 64:
            b = a.tobytes()
            self.add(_const(v), lambda t, ver=ver, b=b: t._version == ver and t._data.tobytes() == b,
                     f"the values of {what} (read while tracing)",
                     lambda code, v=v, ver=ver, b=b: code.need(
                         f"{code.const(v)}._version == {code.const(ver)} and "
                         f"{code.const(v)}._data.tobytes() == {code.const(b)}"))
            return
        n = UNTRACKED_WRITES[0]
        if type(a) is np.ndarray and escaped(a):
            # numpy code holds its memory (t.numpy(), from_numpy): it can write it unseen by
            # the version and the count, so its bytes are compared at every call
            snap = np.array(a, copy=True, order="C")
            self.add(_const(v), lambda t, ver=ver, snap=snap: t._version == ver and same_bytes(t._data, snap),
                     f"the values of {what} (read while tracing)",
                     lambda code, v=v, ver=ver, snap=snap: code.need(
                         f"{code.const(v)}._version == {code.const(ver)} and "
                         f"{code.const(same_bytes)}({code.const(v)}._data, {code.const(snap)})"))
            return
        # else by the array's identity, the count of writes through .data and the count of
        # arrays handed to numpy since (then one of them may be this one: traced again)
        e = ESCAPES[0]
        self.add(_const(v), lambda t, ver=ver, a=a, n=n, e=e: t._version == ver and t._data is a and
                 UNTRACKED_WRITES[0] == n and (ESCAPES[0] == e or not escaped(a)),
                 f"the values of {what} (read while tracing)",
                 lambda code, v=v, ver=ver, a=a, n=n, e=e: code.need(
                     f"{code.const(v)}._version == {code.const(ver)} and {code.const(v)}._data is {code.const(a)} "
                     f"and {code.const(UNTRACKED_WRITES)}[0] == {code.const(n)} and "
                     f"({code.const(ESCAPES)}[0] == {code.const(e)} or not {code.const(escaped)}({code.const(a)}))"))

    def seq_token(self, items):
        return tuple(self.token(x) for x in items)

    def attrs(self, v, d, names, what, depth, descend=object, cls=None, count=False):
        """Guard the attributes `names` of v (read from its __dict__ `d`), then what they hold
        (those of type `descend`); with `cls`, that v is still of that class (`o.__class__ = B`
        runs B's methods); with `count`, that it has as many attributes (one set later, which
        the trace found absent: `hasattr(o, "k")`, `try: o.k except AttributeError`)."""
        names = tuple(names)
        tok = tuple(self.token(d[n]) if n in d else _ABSENT for n in names)
        present = {n: d[n] for n in names if n in d}
        # an object's (or a function's) __dict__ may be replaced whole (`o.__dict__ = {...}`): the
        # tests read the dict the trace read, so v must still have it
        own = d is not v and type(d) is dict and not isinstance(v, (type, types.ModuleType))
        n0 = len(d) if count else None

        def emit(code):
            if cls is not None:
                code.need(f"{code.const(v)}.__class__ is {code.const(cls)}")
            if own:
                code.need(f"{code.const(v)}.__dict__ is {code.const(d)}")
            dd = code.const(d)
            if count:
                code.need(f"len({dd}) == {n0}")
            for n in names:
                if n in present:       # a missing name raises: the one-by-one guard finds it absent
                    code.token_is(code.let(f"{dd}[{code.const(n)}]"), present[n])
                else:
                    code.need(f"{code.const(n)} not in {dd}")
        self.add(_const(d), lambda dd, names=names, tok=tok, v=v: (cls is None or type(v) is cls) and
                 (not own or v.__dict__ is dd) and (n0 is None or len(dd) == n0) and
                 tuple(token_of(dd, n) for n in names) == tok,
                 f"the attributes {', '.join(names)} of {what}" if names else what, emit)
        for n in names:
            if n in d and isinstance(d[n], descend):
                self.inside(d[n], f"{what}.{n}", depth + 1)

    def objects_inside(self, v, what, where):
        """Guards of what v holds that a deep token takes by identity alone: the methods of the
        classes in it, the state of the plain objects in it."""
        for x in _deep_objects(v, [_DEEP_BUDGET], set()):
            if isinstance(x, type):
                self.methods_of(x)
                self.klass(x, what)
            else:
                self.inside(x, f"an object inside {where}", 0)

    def container(self, v, what, depth):
        t = type(v)
        is_dict = isinstance(v, (dict, types.MappingProxyType))
        if is_dict:
            keys = tuple(v)
            items = list(v.items())
        else:
            keys = len(v)
            items = list(enumerate(v))
        if self.exempt:
            # items the program reads afresh at every call (a whole step's learning rate)
            items = [(k, x) for k, x in items if (id(v), k) not in self.exempt]
        # every item, tensors the trace did not make inputs among them: it may have read their
        # shape or requires_grad in Python (`len(L[50])`); too many to write tests for one by
        # one, they are compared by the guard's own test
        big = len(items) > _MAX_ITEMS
        pos = tuple(k for k, _ in items)
        tok = tuple(self.token(x) for _, x in items)
        keep = tuple(x for _, x in items)
        if is_dict:
            test = lambda c: type(c) is t and _same_keys(tuple(c), keys) and \
                tuple(token(c[k]) for k in pos) == tok            # noqa: E731
        else:
            test = lambda c: type(c) is t and len(c) == keys and tuple(token(c[k]) for k in pos) == tok  # noqa: E731
        self.keep.append(keep)
        # a user's dict subclass or a deque: its own __iter__ and __getitem__, called by the
        # guard's test (defaultdict's and OrderedDict's are dict's, but for a missing key, which
        # the generated tests never read)
        self.add(_const(v), test, f"the items of {what}",
                 (lambda code: _emit_items(code, v, keys, pos, keep)) if t in _EMITTED_CONTAINERS and not big else None)
        for k, x in items:
            self.inside(x, f"{what}[{k!r}]", depth + 1)

    def obj(self, v, what, depth):
        tp = type(v)
        self.methods_of(tp)
        d = vars(v)
        if type(d) is not dict:
            return
        lib = _is_library_type(tp)
        if (getattr(tp, "__module__", None) or "").startswith(_PREFIX):
            # an object of tracegrad's own (an optimizer whose step the trace ran): its classes'
            # methods replaced since (`optim.SGD.step = f`) are other code (_library_guard)
            for klass in tp.__mro__:
                if klass is not object:
                    self.lib_classes[id(klass)] = klass
        wrapped = d.get("__wrapped__")
        if lib and isinstance(wrapped, types.FunctionType):
            # a library's wrapper of the user's function (functools.lru_cache): what that reads,
            # so that a change retraces the call through the wrapper, as eager calls it
            self.inside(wrapped, what + ".__wrapped__", depth)
        # a user object: the attributes its reachable code names (all of them where that code
        # names attributes it computes: getattr, vars, __dict__), and the names it reads from
        # the class, which an instance attribute set later would hide; a library object (an
        # optimizer, say): its public state, which the library's code read
        if lib:
            names = [n for n in sorted(d) if not n.startswith("_")]
        elif isinstance(v, enum.Enum):
            # a member's value, read through Enum's own `value` property
            names = sorted(n for n in set(d) | self.class_names(tp) if n in self.names or n == "_value_")
        elif self.names & _DYNAMIC:
            names = sorted(set(d) | self.class_names(tp))
        else:
            names = sorted(n for n in set(d) | self.class_names(tp) if n in self.names)
        self.attrs(v, d, names, what, depth, cls=tp, count=not lib)
        self.klass(tp, what)

    def class_names(self, tp, made=False):
        """The names the reachable code reads that the user classes of tp's MRO define (and the
        special methods Python calls for it)."""
        out = set()
        for klass in tp.__mro__:
            if not _is_library_type(klass):
                out.update(n for n, a in vars(klass).items() if n in self.names or _implicit(n, a, made))
        return out

    def klass(self, tp, what, made=False):
        """Guard the class attributes an instance of tp reads (methods, constants), in every user
        class of its MRO (a name a subclass defines later hides its base's); with `made`, those
        that make an instance too (the class itself is read)."""
        names = tuple(sorted(self.class_names(tp, made)))
        for klass in tp.__mro__:
            if _is_library_type(klass) or ("class", id(klass), made) in self.seen:
                continue
            self.seen.add(("class", id(klass), made))
            d = vars(klass)
            self.keep.append(klass)
            tok = tuple(self.token(d[n]) if n in d else _ABSENT for n in names)
            # and as many attributes: one the code reads that no class defined at the trace, set
            # since (`getattr(o, "k", 1.0)`, `hasattr(C, "k")`), answers instead
            n0 = len(d)
            self.add(_const(klass), lambda k, names=names, tok=tok, n0=n0: len(vars(k)) == n0 and
                     tuple(token_of(vars(k), n) for n in names) == tok,
                     f"the class attributes {', '.join(names) or '(their number)'} of {klass.__qualname__} "
                     f"(read through {what})",
                     lambda code, klass=klass, names=names, n0=n0: _emit_class(code, klass, names, n0))
            for n in names:
                x = d.get(n)
                if x is not None and not isinstance(x, (type, types.FunctionType, staticmethod, classmethod, property)):
                    # a container, a user object (a descriptor whose __get__ reads its own state), a
                    # numpy array or another buffer (`table = np.array(...)` on the class, written
                    # in place), a library object's public state
                    self.inside(x, f"{klass.__qualname__}.{n}", 1)

    def slots(self, v, what, depth):
        """A user object without a __dict__ (__slots__): the slots its reachable code names."""
        names = []
        for klass in type(v).__mro__:
            sl = vars(klass).get("__slots__", ())
            names.extend([sl] if isinstance(sl, str) else sl)
        names = tuple(sorted(n for n in set(names) if n in self.names or self.names & _DYNAMIC))
        if not names:
            return
        tok = tuple(self.token(getattr(v, n, _ABSENT)) for n in names)
        self.add(_const(v), lambda o, names=names, tok=tok, tp=type(v): type(o) is tp and _slot_token(o, names) == tok,
                 f"the attributes {', '.join(names)} of {what}")
        self.methods_of(type(v))
        self.klass(type(v), what)
        for n in names:
            x = getattr(v, n, None)
            if x is not None:
                self.inside(x, f"{what}.{n}", depth + 1)

    def module(self, m, what):
        for klass in type(m).__mro__:
            if klass is not object and _is_library_type(klass):
                self.lib_classes[id(klass)] = klass
        self.methods_of(type(m))
        self.klass(type(m), what)
        d = m.__dict__
        attrs = tuple(a for a in d if a != "training" and a not in _module_internals())
        for a in attrs:
            self.token(d[a])
        for kind in ("_parameters", "_buffers"):
            for x in d[kind].values():
                if x is not None:
                    self.token(x)
        self.keep.extend(d["_modules"].values())
        tok = module_token(m, attrs)
        self.add(_const(m), lambda mm, attrs=attrs, tok=tok: module_token(mm, attrs) == tok, f"the state of {what}",
                 lambda code: _emit_module(code, m, attrs))
        for a in attrs:
            self.inside(d[a], f"{what}.{a}", 0)
        for kind in ("_parameters", "_buffers"):
            for name, x in d[kind].items():
                self.inside(x, f"{what}.{name}", 0)
        for name, sub in d["_modules"].items():
            if sub is not None:
                self.inside(sub, f"{what}.{name}", 0)
        for kind in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"):
            for hook in (d.get(kind) or {}).values():       # what the hooks read, as the forward's code
                self.inside(hook, f"a hook of {what}", 0)


_EMITTED_CONTAINERS = (dict, list, tuple, collections.defaultdict, collections.OrderedDict)


def _emit_keys(code, expr, keys):
    """Tests that tuple(expr) == keys (a dict's keys, in order)."""
    code.need(f"not {expr}" if not keys else f"tuple({expr}) == {code.const(tuple(keys))}")


def _emit_items(code, c, keys, pos, items):
    """The tests of _Walk.container's guard: c keeps its type, its keys (a dict's by identity)
    or length, and the items at `pos` their tokens."""
    name = code.const(c)
    t = type(c)
    is_dict = isinstance(c, dict)
    n = len(keys) if is_dict else keys
    code.need(f"{name}.__class__ is {code.const(t)} and len({name}) == {n}")
    if is_dict and n:
        ks = code.items_are(name, n)
        code.need(" and ".join(f"{k} is {code.const(k0)}" for k, k0 in zip(ks, keys)))
    every = list(pos) == (list(keys) if is_dict else list(range(n)))
    if every:
        xs = code.items_are(f"{name}.values()" if is_dict else name, n)
    else:
        xs = [code.let(f"{name}[{code.const(k)}]") for k in pos]
    for x, v in zip(xs, items):
        code.token_is(x, v)


def _emit_class(code, klass, names, n0):
    """The tests of _Walk.klass's guard: klass's own __dict__ keeps its size n0, and each name
    its token, or stays absent."""
    d = vars(klass)
    dd = code.let(f"{code.const(klass)}.__dict__")
    code.need(f"len({dd}) == {n0}")
    for n in names:
        if n in d:
            code.token_is(code.let(f"{dd}[{code.const(n)}]"), d[n])
        else:
            code.need(f"{code.const(n)} not in {dd}")


def _emit_module(code, m, attrs):
    """The tests of module_token(m, attrs) == its value now."""
    d = m.__dict__
    code.need(f"{code.const(m)}.__class__ is {code.const(type(m))}")
    dd = code.let(f"{code.const(m)}.__dict__")
    code.need(f"tuple({dd}) == {code.const(tuple(d))}")
    code.need(f"{dd}['training'] is {code.const(d['training'])}" if type(d["training"]) is bool else
              f"{dd}['training'] == {code.const(d['training'])}")
    for kind in ("_parameters", "_buffers"):
        items = d[kind]
        c = code.let(f"{dd}[{code.const(kind)}]")
        _emit_keys(code, c, tuple(items))
        for x, v in zip(code.items_are(f"{c}.values()", len(items)), items.values()):
            code.token_is(x, v)
    subs = d["_modules"]
    c = code.let(f"{dd}['_modules']")
    _emit_keys(code, c, tuple(subs))
    xs = code.items_are(f"{c}.values()", len(subs))
    if xs:
        code.need(" and ".join(f"{x} is {code.const(v)}" for x, v in zip(xs, subs.values())))
    for kind in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"):
        hooks = d.get(kind, {})
        expr = f"{dd}[{code.const(kind)}]" if kind in d else f"{dd}.get({code.const(kind)}, ())"
        if not hooks:
            _emit_keys(code, expr, ())
        else:
            # the handles and their functions (tuple == compares them by identity first)
            h = code.let(expr)
            code.need(f"tuple({h}) == {code.const(tuple(hooks))} and "
                      f"tuple({h}.values()) == {code.const(tuple(hooks.values()))}")
    for a in attrs:
        code.token_is(code.let(f"{dd}[{code.const(a)}]"), d[a])


def self_token(v):
    return token(v) if not isinstance(v, Tensor) else tensor_token(v)


_ABSENT = ("<absent>",)       # an attribute a guard found missing (distinct from one set to None)


def token_of(d, name):
    return token(d[name]) if name in d else _ABSENT


def _slot_token(o, names):
    return tuple(token(getattr(o, n, _ABSENT)) for n in names)


def deep_token(v, budget):
    """A value's whole state as one token, for what lies deeper than the walk guards item by
    item: scalars by bits, tensors by identity and metadata, containers and the attributes of
    plain objects recursively, up to `budget` (a one-item list) values; anything else by
    identity."""
    budget[0] -= 1
    if budget[0] < 0:
        return _ABSENT
    if isinstance(v, Tensor):
        return tensor_token(v)
    if isinstance(v, _SCALARS):
        return token(v)
    t = type(v)
    if isinstance(v, dict):
        return (t, tuple((token(k), deep_token(x, budget)) for k, x in v.items()))
    if isinstance(v, (list, tuple, collections.deque)):
        return (t, tuple(deep_token(x, budget) for x in v))
    if isinstance(v, (set, frozenset)):
        return (t, frozenset(map(token, v)))
    d = getattr(v, "__dict__", None)
    if type(d) is dict and not isinstance(v, (type, types.ModuleType, types.FunctionType, Module)):
        return (id(v), t, tuple((k, deep_token(x, budget)) for k, x in d.items()))
    return id(v)


def _weak_token(r):
    x = r()
    return None if x is None else deep_token(x, [_DEEP_BUDGET])


def _held(v, budget, seen, root=True):
    """The objects inside v that deep_token names by identity (not v itself): a guard holds
    them, so that no other object takes their ids."""
    budget[0] -= 1
    if budget[0] < 0 or isinstance(v, _SCALARS) or id(v) in seen:
        return
    seen.add(id(v))
    if not root:
        yield v
    if isinstance(v, Tensor):
        return
    if isinstance(v, dict):
        items = v.values()
    elif isinstance(v, (list, tuple, collections.deque, set, frozenset)):
        items = v
    else:
        d = getattr(v, "__dict__", None)
        if type(d) is not dict or isinstance(v, (type, types.ModuleType, types.FunctionType, Module)):
            return
        items = d.values()
    for x in list(items):
        yield from _held(x, budget, seen, False)


# what deep_token takes by identity but holds state of its own
_OWN_STATE = (Module, types.FunctionType, types.MethodType, functools.partial, np.ndarray, bytearray, array.array,
              contextvars.ContextVar, operator.attrgetter, operator.methodcaller)


def _deep_objects(v, budget, seen):
    """The objects in v, walked as deep_token walks it, whose state deep_token does not hold
    (_OWN_STATE), and the user classes of the plain objects in it."""
    budget[0] -= 1
    if budget[0] < 0 or isinstance(v, (Tensor,) + _SCALARS) or id(v) in seen:
        return
    seen.add(id(v))
    if isinstance(v, _OWN_STATE):
        yield v
        return
    if isinstance(v, dict):
        for x in v.values():
            yield from _deep_objects(x, budget, seen)
        return
    if isinstance(v, (list, tuple, collections.deque, set, frozenset)):
        for x in v:
            yield from _deep_objects(x, budget, seen)
        return
    d = getattr(v, "__dict__", None)
    if type(d) is dict and not isinstance(v, (type, types.ModuleType)):
        if not _is_library_type(type(v)):
            yield type(v)
        for x in d.values():
            yield from _deep_objects(x, budget, seen)


def _is_module(v):
    return isinstance(v, Module)


_INTERNALS = []


def _module_internals():
    """The attributes every Module has (its parameters, buffers, submodules, hooks): guarded by
    module_token itself; a subclass's own attributes, `_private` ones included, by value."""
    if not _INTERNALS:
        _INTERNALS.append(frozenset(Module().__dict__) | {"training"})
    return _INTERNALS[0]


class _WatchedModule(types.ModuleType):
    """The class of tracegrad's own modules once a program was compiled: a function rebound
    on one (`tracegrad.nn.functional.linear = f`, called by nn.Linear) counts in
    LIBRARY_PATCHES, as a Tensor method replaced does."""

    def __setattr__(self, name, value):
        _count_patch(self.__dict__, name, value)
        types.ModuleType.__setattr__(self, name, value)

    def __delattr__(self, name):
        LIBRARY_PATCHES[0] += 1
        types.ModuleType.__delattr__(self, name)


_WATCHED = set()
_WATCHED_AT = [0]        # len(sys.modules) when last looked
_PREFIX = __name__.split(".")[0] + "."


def _watch_library_modules():
    """Give tracegrad's modules loaded so far the class that counts their patches."""
    if len(sys.modules) == _WATCHED_AT[0]:
        return
    _WATCHED_AT[0] = len(sys.modules)
    for name, mod in list(sys.modules.items()):
        if name not in _WATCHED and (name.startswith(_PREFIX) or name == _PREFIX[:-1]) and \
                type(mod) is types.ModuleType:
            try:
                mod.__class__ = _WatchedModule
            except TypeError:
                continue
            _WATCHED.add(name)


# the methods of nn.Module itself that every module's call runs
_MODULE_CALL = ("__call__", "_call_impl", "_wrapped_call_impl", "__getattr__")


def _library_guard(w):
    """One guard that the library code the trace ran is the same: no patch of tracegrad's
    modules (LIBRARY_PATCHES), no attribute of Tensor or Parameter set since, and the library
    classes of the modules and objects met (nn.Linear's forward, optim.SGD's step replaced on
    the class) keep their attributes: each class by the version of its attributes
    (class_version.py), nn.Module by the methods of its call (its own dict may change)."""
    _watch_library_modules()
    n = LIBRARY_PATCHES[0]
    d = vars(Module)
    call = tuple(x for x in _MODULE_CALL if x in d) if id(Module) in w.lib_classes else ()
    call_vals = tuple(d[x] for x in call)
    # the tensor classes' own attributes (`Tensor.relu = f`, a method added and then replaced):
    # each user op on a tensor, and the library's, looks its method up there
    versions = tuple(ClassVersion(k) for k in (Tensor, Parameter, *w.lib_classes.values()) if k is not Module)
    w.keep.append((versions, call_vals))

    def test(c):
        d = vars(Module)
        return c[0] == n and all(v.same() for v in versions) and all(x in d for x in call) and \
            _same_keys(tuple(d[x] for x in call), call_vals)

    def emit(code):
        code.need(f"{code.const(LIBRARY_PATCHES)}[0] == {code.const(n)}")
        for v in versions:
            v.emit(code)
        if call:
            d = code.let(f"{code.const(Module)}.__dict__")
            code.need(" and ".join(f"{d}[{code.const(x)}] is {code.const(v)}" for x, v in zip(call, call_vals)))
    w.add(_const(LIBRARY_PATCHES), test,
          "tracegrad's own code (a function of its modules, a Tensor method or a library class's method "
          "replaced since)", emit)


def _strides(t):
    """A tensor's array type and strides (for a layout read while tracing)."""
    d = t._data
    return (d.__class__, d.strides if d.__class__ is np.ndarray else getattr(d, "strides", None))


def _history(t):
    """A tensor's grad_fn node (by identity: build_guards holds it, so its id is not reused) and
    output slot; a view's grad_fn is made again once its base is written in place: its
    version too."""
    return (id(t._grad_fn), t._output_nr, t._vc[0] if t._view is not None else None)


def _version(t):
    return (t._inference, None if t._inference else t._vc[0])


def _memory(t):
    """A tensor's array (by identity: a numpy array keeps its address for its life, and
    build_guards holds it)."""
    return (id(t._data),)


# what tensor._read_history notes -> (what a guard compares, its name in messages)
_HISTORY_READS = {"history": (_history, "grad_fn, is_leaf or output_nr"), "version": (_version, "version counter"),
                  "memory": (_memory, "address (data_ptr(), storage_offset())")}


def _arg_objects(a, what):
    """The objects of an argument that its key holds by identity alone (guards.flatten's
    constants other than scalars: a config object, a module), also inside the lists, tuples
    and dicts the key spells out item by item: their state is guarded as a global's."""
    if isinstance(a, (Tensor,) + _SCALARS):
        return
    t = type(a)
    if t is list or t is tuple:
        for i, x in enumerate(a):
            yield from _arg_objects(x, f"{what}[{i}]")
    elif t is dict:
        for k, x in a.items():
            yield from _arg_objects(x, f"{what}[{k!r}]")
    else:
        yield a, what


def build_guards(fn, module, args, kwargs, used=(), value_reads=None, exempt=frozenset()):
    """Guards for everything a call of fn (or module) with these arguments can read besides the
    argument tensors themselves. `used`: the concrete tensors the trace made inputs of the
    graph; `value_reads`: {id(tensor): version} of tensors read by value while tracing;
    `exempt`: (id(dict), key) items the program reads at every call instead."""
    value_reads = value_reads or {}
    names, strings = set(), set()
    for _ in range(8):
        before = (len(names), len(strings))
        w = _Walk(names, value_reads, {id(t) for t in used}, exempt, strings)
        if module is not None:
            w.inside(module, f"the module {type(module).__name__}", 0)
        else:
            w.inside(fn, f"the function {getattr(fn, '__qualname__', type(fn).__name__)}", 0)
        for i, a in enumerate(args):
            for x, where in _arg_objects(a, f"argument {i}"):
                w.inside(x, where, 0)
        for k, a in kwargs.items():
            for x, where in _arg_objects(a, f"keyword argument '{k}'"):
                w.inside(x, where, 0)
        if (len(names), len(strings)) == before:
            break
    if w.saw_module or any(_is_module(x) for x in w.keep) or module is not None:
        for hook in (*_m._global_forward_pre_hooks.values(), *_m._global_forward_hooks.values()):
            w.inside(hook, "a global module hook", 0)
        hooks = (tuple(_m._global_forward_pre_hooks), tuple(_m._global_forward_hooks))
        w.add(_const(_m), lambda mm, hooks=hooks: (tuple(mm._global_forward_pre_hooks),
                                                   tuple(mm._global_forward_hooks)) == hooks,
              "the global module hooks", lambda code: (_emit_keys(code, f"{code.const(_m)}._global_forward_pre_hooks",
                                                                  hooks[0]),
                                                       _emit_keys(code, f"{code.const(_m)}._global_forward_hooks",
                                                                  hooks[1])))
    # tensors read by value that no walk reaches (`g.detach().tolist()` of a global g: a
    # tensor of its own over g's memory): by their bytes, which a write to g changes
    for key, t in value_reads.items():
        if isinstance(key, tuple) and key[0] == "tensor" and key[1] not in w.value_guarded:
            w.keep.append(t)
            w.value_guarded.add(key[1])
            snap = np.array(t._data, copy=True, order="C")
            ver = value_reads[key[1]]
            w.add(_const(t), lambda x, ver=ver, snap=snap: x._version == ver and same_bytes(x._data, snap),
                  f"the values of a tensor read while tracing ({tuple(t.shape)})",
                  lambda code, t=t, ver=ver, snap=snap: code.need(
                      f"{code.const(t)}._version == {code.const(ver)} and "
                      f"{code.const(same_bytes)}({code.const(t)}._data, {code.const(snap)})"))
    # settings of the process the trace read in Python (tensor.read_setting): each keeps its value
    for key, get in value_reads.items():
        if isinstance(key, tuple) and key[0] == "setting":
            v0 = get()
            w.keep.append(v0)
            w.add(_const(get), lambda g, v0=v0: g() == v0, f"{key[1]} (read while tracing, then {v0!r})",
                  lambda code, get=get, v0=v0: code.need(f"{code.const(get)}() == {code.const(v0)}"))
    # tensors whose retains_grad or is_inference() the trace read in Python
    for key, t in value_reads.items():
        if isinstance(key, tuple) and key[0] == "flags":
            w.keep.append(t)
            f0 = (t._retains_grad, t._inference)
            w.add(_const(t), lambda x, f0=f0: (x._retains_grad, x._inference) == f0,
                  f"retains_grad and is_inference() of a tensor read while tracing ({tuple(t.shape)})",
                  lambda code, t=t, f0=f0: code.need(f"{code.const(t)}._retains_grad is {code.const(f0[0])} and "
                                                     f"{code.const(t)}._inference is {code.const(f0[1])}"))
    # tensors whose strides the trace read in Python (`w.stride()`, `w.is_contiguous()`)
    for key, t in value_reads.items():
        if isinstance(key, tuple) and key[0] == "layout":
            w.keep.append(t)
            s0 = _strides(t)
            w.add(_const(t), lambda x, s0=s0: _strides(x) == s0,
                  f"the strides of a tensor read while tracing ({tuple(t.shape)}, strides {t._data.strides})",
                  lambda code, t=t, s0=s0: code.need(f"{code.const(_strides)}({code.const(t)}) == {code.const(s0)}"))
    # tensors whose autograd history (grad_fn, is_leaf, output_nr), version counter or address
    # (data_ptr()) the user's code read in Python: none of them is in a tensor's token
    for key, t in value_reads.items():
        if isinstance(key, tuple) and key[0] in _HISTORY_READS:
            w.keep.append(t)
            get, what = _HISTORY_READS[key[0]]
            h0 = get(t)
            w.keep.append((t._grad_fn, t._data))
            w.add(_const(t), lambda x, get=get, h0=h0: get(x) == h0,
                  f"the {what} of a tensor read while tracing ({tuple(t.shape)})",
                  lambda code, t=t, get=get, h0=h0: code.need(
                      f"{code.const(get)}({code.const(t)}) == {code.const(h0)}"))
    _library_guard(w)
    # the concrete tensors the program reads at every call keep the metadata it was built for
    for t in used:
        if id(t) not in w.tensors:
            w.keep.append(t)
            w.add(_const(t), lambda x, tok=tensor_token(t): tensor_token(x) == tok,
                  f"a tensor the function read ({tuple(t.shape)})", lambda code, t=t: code.tensor_meta(code.const(t), t))
    return Guards(w.guards, w.keep, frozenset(w.tensors) | {id(t) for t in used} | set(value_reads))

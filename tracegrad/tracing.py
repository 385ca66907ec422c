"""The one recording mechanism: `apply(prim, args, params)`.

Part of the front end, beside the tensor: it builds `Tensor`s and grad_fn nodes, so it
sits above the compiler core (`ir/`, the op table, `passes/`, `codegen/`), which never
imports it back.

Every op goes through `apply`. With concrete tensors it runs the primitive's numpy
kernel and, when grad mode is on and an input requires grad, records a grad_fn node
(eager autograd). With symbolic tensors (`Proxy`, made by `trace`) it adds a node to
the IR graph being traced instead (the autodiff pass and `compile` trace this way).
"""
import itertools
import math
import os
import sys
import threading
import traceback
import weakref

import numpy as np

from . import _dtype as D
from .grad_mode import STATE
from .tensor import CPU, Tensor, Size, TraceError, _LAST_ORDERS, _contiguous_as
from . import tensor as _tensor
from .ir.graph import Graph, V
from .ir.layout import c_contiguous, column_major, iterator_order, array_order, dense_axes, orders_disagree, \
    ufunc_order, value_order, _BROADCAST
from .ops import shapes as S
from .ops.primitives import FrontEnd, PRIMITIVES, scalar_operands

_CUDA = [0]               # non-zero once a CUDA tensor exists: the eager hot path's only device test (cuda._ON)
_DUAL = [0]               # non-zero while a forward AD level exists: the eager hot path's only tangent test


class Above:
    """What recording calls of the modules above it, which import this one: plugged in by
    each as it is imported, so that this module imports none of them. `Saved`, `Guard`, `node_class`
    and `node_class_of` (autograd/graph.py), `make_view` and `creation_meta`
    (autograd/views.py), `apply_cuda` and `NOT_CUDA` (cuda.py, called only once a CUDA tensor
    exists), `refresh_view` (functionalize.py, called only on its own views), `carries_grad`
    (functionalize.py: whether a traced value would require grad in eager), `no_grad_view_of_grad`
    (functionalize.py: whether a view was taken under no_grad of a value that requires grad),
    `apply_dual` (autograd/forward_ad.py, called only while a forward AD level exists)."""
    Saved = Guard = node_class = node_class_of = make_view = creation_meta = None
    apply_cuda = NOT_CUDA = refresh_view = carries_grad = no_grad_view_of_grad = apply_dual = None


class _Local(threading.local):
    def __init__(self):
        self.shadow = None


LOCAL = _Local()          # the functionalized trace being made in this thread (functionalize.Shadow)


class _Tracing(threading.local):
    def __init__(self):
        self.stack = []


TRACING = _Tracing()
_ACTIVE = [0]          # tracers active in any thread: a cheap first test on the eager hot path
_ACTIVE_LOCK = threading.Lock()


_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep
# programs written with tracegrad that ship in its package (`python -m tracegrad.demo`): the
# user's code as far as a trace is concerned (the lines a graph and a warning name are theirs)
_PROGRAMS = frozenset(_PKG + f for f in ("demo.py", "demo_text.py", "tour.py"))


_USER_FILES = {}       # a code object's file name -> whether it is the user's


def user_file(f):
    """Whether code from file name f is the user's, not tracegrad's (its package or the source
    it generates). A code object's file name is the path it was imported by, as written
    (`bench/../tracegrad/nn/functional.py` where sys.path holds `bench/..`): compared once
    made absolute."""
    user = _USER_FILES.get(f)
    if user is None:
        a = os.path.abspath(f)
        user = _USER_FILES[f] = not (f.startswith("<tracegrad") or a.startswith(_PKG) and a not in _PROGRAMS)
    return user


def _user_code(frame):
    """Whether the frame runs the user's code (a function being traced), not tracegrad's."""
    return user_file(frame.f_code.co_filename)


def user_frame(n):
    """Whether the frame n levels above the caller runs the user's code."""
    return user_file(sys._getframe(n + 1).f_code.co_filename)


_tensor.Above.user_frame = user_frame          # Tensor's reads of autograd history while tracing


def _layout(what):
    raise TraceError(f"{what} of a tensor while tracing: a trace follows values, not memory layout or autograd "
                     f"history, which may differ between calls")


def _asked_by_user(what):
    """Refuse `what` (a layout or autograd-history question) where the user's code asks it of a
    traced value (the caller of the Proxy method that calls this); tracegrad's own code gets the
    answer the trace knows."""
    if _user_code(sys._getframe(2)):
        _layout(what)


def _hook_refused(what):
    raise TraceError(f"{what} on a value inside a compiled function: a program's backward does not call Python "
                     f"hooks or keep gradients of its values yet (register the hook outside the compiled function, "
                     f"on a tensor passed in or returned)")


def _autograd_flag(value):
    raise TraceError(f"requires_grad_({bool(value)}) on a value of the trace: a program has no leaf tensors of its "
                     f"own to start a graph from (make the tensor outside the compiled function and pass it in; "
                     f"autograd.functional's hvp, jvp and hessian make such leaves)")


TRACE_DEVICE = {}        # id(graph being traced) -> the device of its call's arguments, where not the CPU


_BASE_SLOT = Tensor.__dict__["_base"]


def _scratch(shape, strides):
    """An int8 array of this shape and these strides (in elements) over a buffer of its own."""
    if any(st < 0 for st in strides) or 0 in shape:
        return None
    span = 1 + sum((n - 1) * st for n, st in zip(shape, strides))
    return np.lib.stride_tricks.as_strided(np.empty(span, np.int8), shape, strides)


class Proxy(Tensor):
    """A symbolic tensor: a value of the graph being traced, with shape and dtype only."""
    __slots__ = ()

    @classmethod
    def make(cls, graph, name, shape, dtype, requires_grad=False):
        t = Tensor._make.__func__(cls, None, dtype, requires_grad)
        t.__dict__["_graph"] = graph
        t.__dict__["_name"] = name
        t.__dict__["_shape"] = tuple(shape)
        return t

    @property
    def shape(self):
        d = self.__dict__
        s = d.get("_size")
        if s is None:                 # made once: shape rules and derivative rules ask often
            s = d["_size"] = Size(d["_shape"])
        return s

    # the device of the call being traced (its arguments' one device; the CPU where they are
    # on several, which the compiler refuses): `torch.zeros(n, device=x.device)` in a function
    # makes its constant where the arguments are, as the eager call would
    @property
    def device(self):
        return TRACE_DEVICE.get(id(self.__dict__["_graph"]), CPU)

    @property
    def is_cuda(self):
        return self.device is not CPU

    def get_device(self):
        return 0 if self.is_cuda else -1

    def size(self, dim=None):
        if dim is None:
            return Size(self._shape)
        return self._shape[S.normalize_dim(dim, len(self._shape))]

    def dim(self):
        return len(self._shape)

    @property
    def ndim(self):
        return len(self._shape)

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n

    nelement = numel          # (Tensor's aliases name Tensor's own functions, which read an array)
    ndimension = dim

    @property
    def nbytes(self):
        return self._dtype.itemsize * self.numel()

    def stride(self, dim=None):
        _layout("Tensor.stride()")

    def storage_offset(self):
        _layout("Tensor.storage_offset()")

    def data_ptr(self):
        _layout("Tensor.data_ptr()")

    # a program's backward calls no Python hooks on its values, and keeps no .grad of its
    # intermediates: a hook registered while tracing would be dropped without a word (x.grad came
    # out without the hook's effect), so the function runs eagerly, saying why
    def register_hook(self, hook):
        _hook_refused("register_hook")

    def register_post_accumulate_grad_hook(self, hook):
        _hook_refused("register_post_accumulate_grad_hook")

    def retain_grad(self):
        _hook_refused("retain_grad()")

    def detach_(self):
        # from user code: detaching the caller's tensor in place (it stops requiring grad) is
        # not something a program can do to its argument; the trace would keep the graph
        if _user_code(sys._getframe(1)):
            raise TraceError("detach_() on a value inside a compiled function: the program cannot change the "
                             "autograd state of the caller's tensor (use detach(), or call detach_() outside)")
        return super().detach_()

    @property
    def data(self):
        # the value without its history, as eager's .data (an alias: a write through it
        # reaches the value, as detach()'s does)
        return self.detach()

    @data.setter
    def data(self, value):
        raise TraceError("`x.data = ...` on a value of the trace: the program would not rebind the caller's tensor; "
                         "assign .data outside the compiled function")

    def is_contiguous(self, memory_format=None):
        _asked_by_user("Tensor.is_contiguous()")
        # tracegrad's own code (contiguous()) gets what the eager tensor would answer, where
        # that is known (ir/layout.py): a forward value a derivative rule reads is asked in
        # the forward graph, without saving it
        if memory_format is not None and getattr(memory_format, "_name", None) in _LAST_ORDERS:
            return self._contiguous_as(memory_format)
        d = self.__dict__
        src = d.get("_layout_of")
        if src is None and not self._plain():
            a = self._eager_scratch()
            if a is not None:
                return a.flags.c_contiguous
        return c_contiguous(*src[:2]) if src is not None else c_contiguous(d["_graph"], value_of(d["_graph"], self))

    def _contiguous_as(self, memory_format):
        """is_contiguous(memory_format=torch.channels_last...) as the eager tensor answers it, by an
        int8 array laid out as eager lays this value out."""
        shape = tuple(self.shape)
        if not all(n.__class__ is int for n in shape):
            _layout("Tensor.is_contiguous(memory_format=...)")
        a = None if self._plain() else self._eager_scratch()
        if a is None:
            d = self.__dict__
            src = d.get("_layout_of")
            g, v = (src[0], src[1]) if src is not None else (d["_graph"], value_of(d["_graph"], self))
            order = None if self._plain() else value_order(g, v)
            if order is _BROADCAST:
                return False
            if order is None:
                a = np.empty(shape, np.int8)
            else:
                a = copy_laid_out(np.empty(shape, np.int8), dense_layout(shape, order))
        return _contiguous_as(a, memory_format)

    def _column_major(self):
        d = self.__dict__
        src = d.get("_layout_of")
        return column_major(*src) if src is not None else column_major(d["_graph"], value_of(d["_graph"], self))

    def _view_chain(self):
        """(the value the views that make this one start from, [(prim, rest, params)] from the
        last view taken to the first), or None where a view takes tensors (an index), but for
        0-dim index tensors: eager's select, whose layout does not depend on which element it
        selects (index 0 stands in for them)."""
        chain, o = [], self
        while True:
            view = o.__dict__.get("_view")
            if view is None:
                return o, chain
            base, prim, rest, params = view
            if any(isinstance(r, Tensor) for r in rest):
                if prim.name != "getitem" or any(isinstance(r, Tensor) and r.shape for r in rest):
                    return None
                rest = tuple(_SELECT_ANY if isinstance(r, Tensor) else r for r in rest)
            chain.append((prim, rest, params))
            o = base

    def _root_scratch(self):
        """An int8 array of this value's shape laid out as eager lays out its tensor, or None where
        that is not known (a real tensor's stand-in, whose layout is its own)."""
        d = self.__dict__
        real = d.get("_real")
        if real is not None:
            a = real._data
            if a.__class__ is not np.ndarray or not a.itemsize or any(st % a.itemsize for st in a.strides):
                return None
            return _scratch(self._shape, tuple(st // a.itemsize for st in a.strides))
        if "_kernel_layout" in d:
            # laid out as the op's numpy kernel lays it out, eager and compiled alike (x[i] by a
            # 0-dim index tensor, an op of it that follows its layout): not known to the trace, and
            # left as the kernel makes it
            return None
        order = d.get("_mem")
        if order is not None:
            # an op's result that eager lays out in another order than C's (an elementwise op of a
            # transposed operand), kept by the tensor through its in-place writes
            axes = dense_axes(self._shape, order)
            return np.empty(tuple(self._shape[k] for k in axes), np.int8).transpose(np.argsort(axes))
        arg = d.get("_arg_strides")
        if arg is not None:
            # an argument not in C order (x.t(), x[::2] passed in): its own strides, which the
            # call's key does not hold (only the memory order); the trace relies on them, so the
            # program is guarded on them (compile.py's layout guard)
            i, strides = arg
            if any(s < 0 for s in strides) or 0 in self._shape:
                return None
            d["_graph"].__dict__.setdefault("layout_reads", {})[i] = strides
            return _scratch(self._shape, strides)
        return np.empty(self._shape, np.int8)

    def _plain(self, broadcast=False):
        """Whether this value is laid out C-contiguous by what the trace knows: an op's result of
        the default layout (or a view of one that keeps it C-contiguous), no argument or real
        tensor of its own strides. broadcast: an expand of such a value counts too."""
        d = self.__dict__
        view = d.get("_view")
        # (views that lay a C-contiguous value out C-contiguous: a reshape of one is a view only so)
        while view is not None and (view[1].layout == "view_c" or broadcast and view[1].name == "expand"):
            d = view[0].__dict__
            view = d.get("_view")
        return view is None and "_mem" not in d and "_arg_strides" not in d and "_real" not in d and \
            "_kernel_layout" not in d

    def _eager_scratch(self):
        """An int8 array laid out as eager lays out this value's tensor (views taken of the
        layout of the value they start from), or None where the value is C-contiguous or its
        layout is not known."""
        if self._plain():
            return None           # C-contiguous: every reshape and view of it is a view
        found = self._view_chain()
        if found is None:
            return None
        a = found[0]._root_scratch()
        return None if a is None else self._apply_chain(a, found[1])

    @staticmethod
    def _apply_chain(a, chain):
        try:
            for prim, rest, params in reversed(chain):
                a = prim.impl(a, *rest, **params)
        except Exception:
            return None
        return a

    @property
    def grad_fn(self):
        _asked_by_user("Tensor.grad_fn")
        return Tensor.grad_fn.fget(self)

    @grad_fn.setter
    def grad_fn(self, node):
        Tensor.grad_fn.fset(self, node)

    @property
    def is_leaf(self):
        _asked_by_user("Tensor.is_leaf")
        return Tensor.grad_fn.fget(self) is None

    def __getattr__(self, name):
        # (called for a name the Proxy lacks) one the caller set on the argument tensor: eager
        # reads its value (`getattr(x, "scale", 1.0)`, hasattr), which the trace does not hold
        if name in self.__dict__.get("_arg_attrs", ()):
            raise TraceError(f"the attribute {name!r} set on an argument tensor is read; a trace holds the tensor's "
                             f"values, not its Python attributes (pass {name} as an argument of its own)")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _concrete(self, what):
        raise TraceError(f"{what} needs a concrete value, but this tensor is symbolic while tracing "
                         f"(value {self._name or '?'} {self._shape})")

    def item(self):
        self._concrete("Tensor.item()")

    def tolist(self):
        self._concrete("Tensor.tolist()")

    def numpy(self, *, force=False):
        self._concrete("Tensor.numpy()")

    def __array__(self, dtype=None, copy=None):
        self._concrete("converting to a numpy array")

    def __bool__(self):
        self._concrete("Python control flow on a tensor (bool())")

    def __float__(self):
        self._concrete("float()")

    def __int__(self):
        self._concrete("int()")

    def __index__(self):
        self._concrete("using a tensor as an index")

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def detach(self):
        # an alias of the value, as eager's detach() shares storage: a write through it reaches
        # the value (functionalize._scatter)
        d = apply(PRIMITIVES["detach"], (self,), {})
        d.__dict__["_view"] = (self, PRIMITIVES["detach"], (), {})
        d.__dict__["_view_gen"] = self.__dict__.get("_gen", 0)
        return d

    def __repr__(self):
        if _user_code(sys._getframe(1)):
            # str(x), repr(x), print's text: eager gives the values, which a trace has not
            self._concrete("repr() or str() of a tensor")
        return f"Proxy({self._name}: {'x'.join(map(str, self._shape))} {self._dtype!r})"

    def __format__(self, spec):
        if _user_code(sys._getframe(1)):
            self._concrete("formatting a tensor (an f-string, format())")
        return format(repr(self), spec)

    @property
    def _version(self):
        _asked_by_user("Tensor._version")
        return 0

    @property
    def output_nr(self):
        _asked_by_user("Tensor.output_nr")
        return self._output_nr

    _version = _version.deleter(Tensor._version.fdel)      # refused, as a tensor's

    @property
    def _base(self):
        # the view an argument is of the caller's memory, and the base eager gives a view of a
        # view: neither is the trace's (its values have no storage)
        _asked_by_user("Tensor._base")
        return _BASE_SLOT.__get__(self)

    @_base.setter
    def _base(self, value):
        _BASE_SLOT.__set__(self, value)

    @property
    def requires_grad(self):
        if self._req:
            return True
        # what eager would answer, whether a gradient reaches the value from an input or a
        # tensor read that requires grad (the trace makes its values without autograd history,
        # so their own flag is False): for the user's code (`if y.requires_grad:`) and the
        # library's (median's derivative, which spreads over ties where its input requires grad)
        return Above.carries_grad(self)

    @requires_grad.setter
    def requires_grad(self, value):
        if bool(value) != self._req:
            _autograd_flag(value)
        Tensor.requires_grad.fset(self, value)

    def requires_grad_(self, requires_grad=True):
        if bool(requires_grad) != self._req:
            _autograd_flag(requires_grad)
        return Tensor.requires_grad_(self, requires_grad)

    @property
    def retains_grad(self):
        _asked_by_user("Tensor.retains_grad")
        return self._retains_grad

    @classmethod
    def of_class(cls, proxy, klass):
        """`proxy` as an instance of klass too (a Parameter, a Buffer, a subclass of Tensor), so
        that `isinstance` answers for it as for the argument it stands for; False where klass's
        instances are laid out otherwise (extra slots)."""
        if klass is Tensor:
            return True
        try:
            k = _PROXY_CLASSES.get(klass)
            if k is None:
                k = _PROXY_CLASSES[klass] = type(f"Proxy[{klass.__name__}]", (cls, klass), {"__slots__": ()})
            proxy.__class__ = k
        except TypeError:
            return False
        return True


_PROXY_CLASSES = {}       # a Tensor subclass -> the Proxy class whose instances are its instances too


class trace:
    """Context in which ops on Proxies record into `graph`."""

    def __init__(self, graph=None):
        self.graph = graph if graph is not None else Graph()

    def __enter__(self):
        TRACING.stack.append(self.graph)
        with _ACTIVE_LOCK:
            _ACTIVE[0] += 1
        return self.graph

    def __exit__(self, *exc):
        TRACING.stack.pop()
        with _ACTIVE_LOCK:
            _ACTIVE[0] -= 1


def proxy_input(graph, shape, dtype, role="input", name=None, requires_grad=False, **attrs):
    if requires_grad:
        attrs["requires_grad"] = True         # autograd.grad inside a trace starts from these
    v = graph.add_input(shape, dtype, role, name, **attrs)
    return Proxy.make(graph, v, shape, dtype, requires_grad)


def value_of(graph, a):
    """The graph value for a tensor argument: a Proxy's own, or a constant for a concrete tensor."""
    if isinstance(a, Proxy):
        d = a.__dict__
        if "_view" in d:                      # a view whose base was written since (functionalize)
            Above.refresh_view(a)
        name = d["_name"]
        if name is None:                      # a lazily bound input (see autodiff)
            name = d["_bind"](a)
        return name
    sh = LOCAL.shadow
    if sh is not None and sh.graph is graph:
        return _shadowed_value(sh, graph, a)
    return _const(graph, a)


def _shadowed_value(sh, graph, a):
    """A real tensor read inside a trace that records writes: its new value where the
    function wrote it; a leaf that requires grad is a source of backward() (functionalize)."""
    p = sh.value(a)
    name = value_of(graph, p) if p is not None else _const(graph, a)
    if a._req and a.grad_fn is None:
        sh.leaf_values[id(a)] = (a, name)
        if p is not None and STATE.grad_enabled:
            sh.leaf_reads_after_write[id(a)] = a
    return name


def _const(graph, a):
    consts = graph.__dict__.setdefault("constants", {})
    key = id(a)
    if key not in consts:
        v = graph.add_input(a._data.shape, a._dtype, "const")
        graph.nx.nodes[v]["value"] = a
        consts[key] = v
    return consts[key]


def user_source():
    """file:line of the innermost frame of the user's code (for comments in printed IR): the
    one predicate, user_file (a path holding a directory named tracegrad is no library code)."""
    f = sys._getframe(2)
    while f is not None and not user_file(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return None
    return f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno}"


NO_GRAD_VIEW_GRAD_READ_MSG = ("a view taken under no_grad of a value that requires grad, read by a differentiable op "
                              "with grad mode on, is not traced (eager's view requires grad without a grad_fn, and "
                              "so does what is computed from it); take the view outside no_grad, or clone() it")


def apply_symbolic(prim, args, params):
    if STATE.grad_enabled and prim.vjp is not None and prim.name != "detach":
        for a in args:
            if isinstance(a, Proxy) and "_view" in a.__dict__ and Above.no_grad_view_of_grad(a):
                # eager: torch's view of a value that requires grad, made under no_grad, requires grad
                # as a leaf (no gradient reaches the value); the trace's is detached, and what an op
                # computes of it would require no grad (an in-place op on a chunk() piece by it
                # raised no error; mutation fuzzer seed 29769)
                raise TraceError(NO_GRAD_VIEW_GRAD_READ_MSG)
    out = _apply_symbolic(prim, args, params)
    if not STATE.grad_enabled and prim.name != "detach":
        sh = LOCAL.shadow
        P = PRIMITIVES
        if sh is not None and out.__class__ is not tuple and out.__dict__["_graph"] is sh.graph:
            # under no_grad in the function being compiled: no gradient flows through this
            # value, as in eager (a write to it still reaches what it views)
            d = _apply_symbolic(P["detach"], (out,), {})
            d.__dict__["_view"] = (out, P["detach"], (), {})
            d.__dict__["_view_gen"] = out.__dict__.get("_gen", 0)
            d.__dict__["_no_grad_view"] = True     # (not a detach() the function called)
            return d
        if sh is not None and out.__class__ is tuple and out and out[0].__dict__["_graph"] is sh.graph:
            outs = []
            for o in out:
                d = _apply_symbolic(P["detach"], (o,), {})
                if "_view" in o.__dict__:       # a piece of a split: a write to it reaches its input
                    _mark_view(d, o, P["detach"], (), {})
                    d.__dict__["_no_grad_view"] = True
                outs.append(d)
            return tuple(outs)
    return out


_SELECT_ANY = np.zeros((), np.int64)     # a 0-dim index tensor's stand-in, for a layout (Proxy._view_chain)
_KERNEL = object()     # _result_order: an operand's layout not known to the trace (_kernel_layout)


def _result_order(shape, args, converted=()):
    """The order eager gives the result of an op that keeps its operands' layout (keeps_layout),
    where some operand is not C-contiguous, and whether numpy's ufunc may lay the result out
    otherwise (its operands lay out two axes in two orders, or nditer's order is not torch's);
    None for C's. `converted`: the positions of operands cast to the compute dtype first,
    which eager's kernel then reads as the cast laid them out (_apply_eager: C-contiguous where
    the operand has a stride 0, as torch's .to() of an expanded tensor; else its own order)."""
    if all(a._plain(True) if isinstance(a, Proxy) else
           not isinstance(a, Tensor) or a._data.__class__ is not np.ndarray or a._data.flags.c_contiguous for a in args):
        return None               # (asks nothing of a symbolic size)
    operands = []
    strided = False
    for i, a in enumerate(args):
        if isinstance(a, Proxy):
            if a._plain():
                operands.append((a._shape, _c_strides(a._shape)))
                continue
            d = a._eager_scratch()
            if d is None:
                return _KERNEL         # not known to the trace: as the kernel lays it out
        elif isinstance(a, Tensor) and a._data.__class__ is np.ndarray:
            d = a._data
        else:
            continue
        if i in converted and 0 in d.strides:
            operands.append((d.shape, _c_strides(d.shape)))
        else:
            operands.append((d.shape, d.strides))
            strided = strided or not d.flags.c_contiguous
    if not strided:
        return None
    order = iterator_order(tuple(shape), operands)
    if order == tuple(k for k, n in enumerate(shape) if n > 1):
        return None
    return order, orders_disagree(tuple(shape), operands) or ufunc_order(tuple(shape), operands) != order


def _traced_rule_order(prim, params, args, shape):
    """The order eager gives the result of an op of layout "order" (_in_rule_order), from int8
    stand-ins of its operands laid out as eager lays them out: None for C's, _KERNEL where an
    operand's layout is not known to the trace."""
    if all(a._plain() if isinstance(a, Proxy) else not isinstance(a, Tensor) or
           a._data.__class__ is not np.ndarray or a._data.flags.c_contiguous for a in args):
        if params.get("memory_format") is None:
            # C-contiguous operands: a C-contiguous result, but of a clone to a memory format (asks
            # nothing of a symbolic size)
            return None
    arrays = []
    for a in args:
        if isinstance(a, Proxy):
            if not all(n.__class__ is int for n in a._shape):
                return _KERNEL
            d = np.empty(a._shape, np.int8) if a._plain() else a._eager_scratch()
            if d is None:
                return _KERNEL
            arrays.append(d)
        elif isinstance(a, Tensor):
            arrays.append(a._data)
        else:
            arrays.append(a)
    order = prim.order(arrays, params)
    if order is None or order == tuple(k for k, n in enumerate(shape) if n > 1):
        return None
    return order


def _c_strides(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


def _apply_symbolic(prim, args, params):
    graph = None
    for a in args:
        if isinstance(a, Proxy):
            graph = a.__dict__["_graph"]
            break
    if graph is None:
        graph = TRACING.stack[-1]
    cdt, odt = prim.dtype_rule(args)
    if odt is None:
        odt = params["dtype"]
    convert = PRIMITIVES["convert"]
    layout = keeps_layout(prim, params)      # (before an opmath rewrite makes the op a convert)
    rule_order = prim.order is not None and prim.result_layout(params) == "order"
    kargs = args
    if cdt is not None and cdt._kind and prim.elementwise:   # numbers meet the kernel as torch's kernels take them
        cdt, kargs = scalar_operands(prim, cdt, args)
    new_args = []
    converted = []
    for i, a in enumerate(kargs):
        if isinstance(a, Tensor):
            v = value_of(graph, a)
            if cdt is not None and a._dtype is not cdt and (prim.cast is None or i in prim.cast):
                v = graph.add_op(convert, (v,), {"dtype": cdt}, tuple(a.shape), cdt)
                converted.append(i)
            new_args.append(v)
        else:
            new_args.append(a)
    shape = prim.shape(*args, **params)
    # the numbers as the user gave them, where the kernel sees them rounded: the derivative reads
    # these, as eager autograd's does (the gradient of 3.7 ** x in float16 is out * log(3.7))
    numbers = None if kargs is args else {i: a for i, (a, k) in enumerate(zip(args, kargs)) if a is not k}
    if cdt is not None and cdt is not odt and cdt is D.float32 and odt._rank == 1 and odt._kind == 2 \
            and not prim.multi:
        # computed in float32 from a number read at float32 precision, rounded once to the result's dtype
        src = graph.__dict__.get("source_hint") or user_source()
        v = graph.add_op(prim, tuple(new_args), params, tuple(shape), cdt, src)
        # one op of the result's dtype to differentiate, as eager records it (autodiff.opmath_source):
        # its derivative rounds each of its ops to that dtype, as eager's and torch's do
        graph[v]["opmath"] = (prim.name, tuple(converted))
        if numbers:
            graph[v]["numbers"] = numbers
            numbers = None
        new_args, prim, params = (v,), convert, {"dtype": odt}
        converted = ()
    src = graph.__dict__.get("source_hint") or user_source()
    if prim.multi:
        shapes = [s for s, _ in shape]
        dtypes = [d if d is not None else odt for _, d in shape]
        tup = graph.add_op(prim, tuple(new_args), params, shapes, dtypes, src)
        if converted:
            graph[tup]["cast_args"] = tuple(converted)
        if graph.__dict__.get("origin") is not None:
            graph.nx.nodes[tup]["origin"] = graph.__dict__["origin"]
        outs = []
        for k, (s, d) in enumerate(zip(shapes, dtypes)):
            outs.append(Proxy.make(graph, graph.add_proj(tup, k, s, d), s, d))
        if prim.view and prim.pieces is not None and args and isinstance(args[0], Tensor):
            # each output a view of the input, as the getitem it equals: an in-place op on one
            # writes the input (split(x)[1].mul_(2), unbind(x)[2].zero_())
            base = _view_base(graph, args[0], new_args[0])
            if base is not None:
                for o, key in zip(outs, prim.pieces(args[0], **params)):
                    _mark_view(o, base, PRIMITIVES["getitem"], (), {"key": key})
                    o.__dict__["_multi_view"] = True
        return tuple(outs)
    v = graph.add_op(prim, tuple(new_args), params, tuple(shape), odt, src)
    if converted:
        # the arguments cast to the compute dtype here: the derivative rule reads them as given
        # (autodiff.uncast_args), as eager autograd records them
        graph[v]["cast_args"] = tuple(converted)
    if numbers:
        graph[v]["numbers"] = numbers
    origin = graph.__dict__.get("origin")
    if origin is not None:
        graph.nx.nodes[v]["origin"] = origin
    out = Proxy.make(graph, v, shape, odt)
    if prim.view and args and isinstance(args[0], Tensor) and (prim.view is True or prim.view(params)):
        base = _view_base(graph, args[0], new_args[0])
        if base is not None:
            _mark_view(out, base, prim, tuple(args[1:]), params)
    elif prim.name == "getitem" and len(args) > 1 and isinstance(args[0], Tensor) and \
            all(isinstance(i, Tensor) and not i.shape for i in args[1:]):
        # 0-dim index tensors whose values the trace does not know: eager indexes with them as
        # ints, a select that views the input (as torch's x[i]), so an in-place op on the result
        # writes the input; traced, that write goes to the input through index_put
        # (functionalize._scatter), as through any view
        base = _view_base(graph, args[0], new_args[0])
        if base is not None:
            _mark_view(out, base, prim, tuple(args[1:]), params)
        if len(shape) > 1 and isinstance(args[0], Proxy) and not args[0]._plain():
            # eager's layout of the select (Proxy._view_chain), and the program's: the kernel copies
            # the select in the layout of the array it is given, which the program may lay out
            # otherwise than eager (x.permute(2, 1, 0)[i] + y, sort of it: C-contiguous, where
            # eager's and torch's follow the select's strides)
            a = args[0]._eager_scratch()
            a = None if a is None else Proxy._apply_chain(a, [(prim, (_SELECT_ANY,) * (len(args) - 1), params)])
            order = None if a is None else array_order(a.shape, a.strides)
            if order is None:
                if base is None:
                    out.__dict__["_kernel_layout"] = True
            elif order != tuple(k for k, n in enumerate(shape) if n > 1):
                graph[v]["mem"] = order
                if base is None:
                    out.__dict__["_mem"] = order
    elif layout and len(shape) > 1:
        order = _result_order(shape, args, converted)
        if order is _KERNEL:
            out.__dict__["_kernel_layout"] = True
        elif order is not None:
            order, mixed = order
            out.__dict__["_mem"] = order
            if mixed:
                # and the program's: numpy's ufuncs lay out the result of operands in two orders
                # their own way (C's where they disagree), eager as torch (the first operand
                # decides), and a sum of it adds in another order (codegen/numpy_cpu.py lays such
                # a value out as eager does)
                graph[v]["mem"] = order
    elif rule_order and len(shape) > 1:
        order = _traced_rule_order(prim, params, args, shape)
        if order is _KERNEL:
            out.__dict__["_kernel_layout"] = True
        elif order is not None:
            # eager's layout (_in_rule_order), and the program's: the codegen lays the value out so
            # (as a mixed elementwise op's), so a later sum of it adds in eager's order
            out.__dict__["_mem"] = order
            graph[v]["mem"] = order
    return out


def _view_base(graph, base, value):
    """What a view of `base` (graph value `value`) made in `graph` writes through to: the
    symbolic value itself, or a stand-in for a real tensor; None where writes are not recorded."""
    if isinstance(base, Proxy):
        return base
    sh = LOCAL.shadow
    if sh is None or sh.graph is not graph:
        return None
    # a view of a real tensor (a parameter, a buffer) in a function whose writes are
    # recorded: its base stands for the tensor's value now, and an in-place op on the
    # view writes the tensor through it (functionalize.commit_traced), as in eager
    p = Proxy.make(graph, value, tuple(base.shape), base._dtype)
    p.__dict__["_real"] = base
    return p


def _mark_view(out, base, prim, rest, params):
    # a view of a symbolic value: an in-place op on it writes through to the base
    d = out.__dict__
    d["_view"] = (base, prim, rest, params)
    d["_view_gen"] = base.__dict__.get("_gen", 0)
    d["_view_req"] = base.requires_grad        # (a base that gains history later: functionalize.commit_traced)
    d["_view_grad"] = STATE.grad_enabled       # (the mode it is taken again in: functionalize.refresh_view)


_wrap = D.as_dtype_array     # a kernel's result as its dtype's array (constant folding uses it too)


def _wrap_view(out, dt):
    """A view kernel's result: numpy's view of the base's array where it is the dtype's storage."""
    if out.__class__ is np.ndarray and out.dtype == dt.np:
        return out
    return _wrap(out, dt)


def keeps_layout(prim, params):
    """Whether the op lays its result out by its operands' strides (torch's TensorIterator, and
    clone's preserve_format), not C-contiguous as every other op that is no view."""
    return prim.result_layout(params) == "operands"


# eager_layout's answers by the layouts asked about: (shape, strides, itemsize, operands' shapes
# and strides) -> True (numpy's result is laid out as torch's), or the shape and transpose of an
# array in torch's order
_LAYOUT_CACHE = {}


def eager_layout(prim, params, arrays, out):
    """An eager kernel's result `out` (not C-contiguous: numpy's kernels follow their operands'
    layouts their own way) laid out as torch lays out the op's result (ir/layout.py), which the
    trace of a compiled function knows too (Proxy._eager_scratch): whether a later reshape or
    view of it copies follows from that layout."""
    layout = prim.result_layout(params)
    if layout == "operands":
        operands = tuple((a.shape, a.strides) for a in arrays if a.__class__ is np.ndarray)
        if len(operands) == 1 and operands[0][0] == out.shape and arrays[0].itemsize == out.itemsize \
                and operands[0][1] == out.strides:
            return out             # numpy kept its one operand's strides (x.t().exp()), as torch does
        key = (out.shape, out.strides, out.itemsize, operands)
        hit = _LAYOUT_CACHE.get(key)
        if hit is None:
            order = iterator_order(out.shape, list(operands))
            item = out.itemsize
            if array_order(out.shape, tuple(st // item for st in out.strides)) == order:
                hit = True
            else:
                hit = dense_layout(out.shape, order)
            if len(_LAYOUT_CACHE) > 4096:
                _LAYOUT_CACHE.clear()
            _LAYOUT_CACHE[key] = hit
        if hit is True:
            return out
        return copy_laid_out(out, hit)
    return np.ascontiguousarray(out)


def _in_rule_order(prim, params, arrays, out):
    """An eager result of an op of layout "order" laid out as its rule says (torch's layout)."""
    order = prim.order(arrays, params)
    item = out.itemsize
    if order is None:
        return out if out.flags.c_contiguous else np.ascontiguousarray(out)
    if item and array_order(out.shape, tuple(st // item for st in out.strides)) == order:
        return out
    return copy_laid_out(out, dense_layout(out.shape, order))


def dense_layout(shape, order):
    """How to make an array of `shape` in the dense layout of `order` (ir/layout's orders): the
    shape of a C-contiguous array and the transpose of it (copy_laid_out)."""
    axes = dense_axes(shape, order)
    return tuple(shape[k] for k in axes), tuple(np.argsort(axes))


def copy_laid_out(a, layout):
    """A copy of array a laid out as dense_layout's `layout` says."""
    new = np.empty(layout[0], a.dtype).transpose(layout[1])
    np.copyto(new, a)
    return new


def _kernel_error(prim, args, params, err):
    # re-run the shape rule for torch's message; else name the op and the shapes
    try:
        prim.shape(*args, **params)
    except (RuntimeError, IndexError, TypeError) as e:
        raise type(e)(str(e)) from None
    shapes = ", ".join(str(list(a.shape)) if isinstance(a, Tensor) else repr(a) for a in args)
    raise RuntimeError(f"{prim.name}: {err} (inputs: {shapes})") from err


def apply(prim, args, params):
    """Run one primitive: eagerly on tensors, or symbolically on Proxies."""
    if _ACTIVE[0] and (TRACING.stack or any(isinstance(a, Proxy) for a in args)):
        return apply_symbolic(prim, args, params)
    if _DUAL[0]:
        return Above.apply_dual(prim, args, params)
    if _PROFILE[0] is not None:
        return _PROFILE[0](prim, args, params, lambda: _apply_eager(prim, args, params))
    return _apply_eager(prim, args, params)


def apply_primal(prim, args, params):
    """apply on concrete tensors, carrying no tangent (forward AD's primal computation)."""
    if _PROFILE[0] is not None:
        return _PROFILE[0](prim, args, params, lambda: _apply_eager(prim, args, params))
    return _apply_eager(prim, args, params)


def _apply_eager(prim, args, params):
    if _CUDA[0]:
        out = Above.apply_cuda(prim, args, params)
        if out is not Above.NOT_CUDA:
            return out
    cdt, odt = prim.dtype_rule(args)
    if odt is None:
        odt = params["dtype"]
    arrays = []
    req = False
    cast = prim.cast
    kargs = args
    if cdt is not None and cdt._kind and prim.elementwise:   # numbers meet the kernel as torch's kernels take them
        cdt, kargs = scalar_operands(prim, cdt, args)
    for i, a in enumerate(kargs):
        if isinstance(a, Tensor):
            d = a._data
            if cdt is not None and a._dtype is not cdt and (cast is None or i in cast):
                # (bfloat16 and float64 -> float16 round as torch does; the rest is numpy's cast)
                d = D.cast(d, cdt) if cdt is D.bfloat16 or d.dtype == np.float64 and cdt is D.float16 else \
                    d.astype(cdt.np, order="C" if 0 in d.strides else "K")      # (as D.cast)
            arrays.append(d)
            if a._req or (a._view is not None and a._base._req):    # a view whose base gained history
                req = True
        else:
            arrays.append(a)
    try:
        out = prim.impl(*arrays, **params)
    except (ValueError, IndexError) as e:
        _kernel_error(prim, args, params, e)
    req = req and STATE.grad_enabled and not STATE.inference and prim.vjp is not None
    view = prim.view and (prim.view is True or prim.view(params))
    base = args[0] if view else None
    if view and base._inference:
        req = False                  # a view of an inference tensor is an inference tensor, outside autograd
    # a view's array is its base's memory: already its dtype's values (bfloat16's rounding would copy it,
    # and writes through the view would miss the base)
    wrap = _wrap if not view else _wrap_view
    if prim.multi:
        shapes = prim.shape(*args, **params) if prim.nondiff_outputs else None
        outs = []
        for k, o in enumerate(out):
            dt = odt if shapes is None or shapes[k][1] is None else shapes[k][1]
            o = wrap(o, dt)
            if not view and o.__class__ is np.ndarray and o.ndim > 1 and not o.flags.c_contiguous:
                o = np.ascontiguousarray(o)
            outs.append(_make_out(o, dt, base, True))
        if req:
            _record(prim, args, params, outs)
        return tuple(outs)
    out = wrap(out, odt)
    if not view and out.__class__ is np.ndarray and out.ndim > 1:
        # (numpy's kernels give a C-contiguous result where their operands are: an op of several
        # operands is asked of theirs, any other of its result)
        if prim.order is not None and prim.result_layout(params) == "order":
            out = _in_rule_order(prim, params, arrays, out)
        elif prim.elementwise and len(arrays) > 1:
            for a in arrays:
                if a.__class__ is np.ndarray and not a.flags.c_contiguous:
                    out = eager_layout(prim, params, arrays, out)
                    break
        elif not out.flags.c_contiguous:
            if not (prim.elementwise and out.strides == arrays[0].strides):
                # (a one-operand elementwise op whose result numpy gave its operand's strides, as torch's)
                out = eager_layout(prim, params, arrays, out)
        elif prim.layout == "operands" and arrays and arrays[0].__class__ is np.ndarray \
                and not arrays[0].flags.c_contiguous and arrays[0].shape == out.shape:
            # a kernel that builds its result C-contiguous from an operand that is not (lgamma, erfinv,
            # flip of x.t()): torch lays it out by its operand, as ir/layout says a compiled program does
            out = eager_layout(prim, params, arrays, out)
    if view and prim.name == "reshape" and out.size and not np.may_share_memory(out, arrays[0]):
        base = None
        params = dict(params, view=False)
    t = _make_out(out, odt, base)
    if req:
        _record(prim, args, params, (t,))
    return t


def _make_out(data, dt, base, multi=False):
    t = Tensor._make(data, dt)
    if base is not None:
        Above.make_view(t, base, Above.creation_meta(multi))
    return t


def rename_grad_fn(t, name, whole=True, inputs=None):
    """Show `t`'s grad_fn under torch's name `name` (a composite's public name); the node, its
    derivative and its next_functions stay those of the primitive that made it (the composite's
    inputs are noted for a direct call of the node: note_composite_inputs). `whole=False`: the
    node is torch's node alone (kron's _unsafe_view), not the whole op. `inputs`: torch's node's
    inputs, in its order, None for an optional one not given (else the calling function's
    parameters)."""
    fn = t.grad_fn
    if fn is not None:
        fn.__class__ = Above.node_class(name)
        if whole:
            note_composite_inputs(fn, sys._getframe(1), inputs)
    return t


def note_composite_inputs(fn, frame, inputs=None):
    """The inputs of the composite op whose last node is `fn`: the floating tensors among the
    parameters of the function running in `frame` (the public op, or the function it made the node
    with), as graph edges. A direct call of the node, y.grad_fn(g), differentiates through the
    whole composite to them, as torch's node for the op gives its inputs' gradients (it ran the
    last primitive alone: softplus(x).grad_fn(g) gave (None, 0, g), gradients of where's operands,
    where torch gives sigmoid(x) * g). One pass and no comparison: this runs on every composite
    call (about 2 us), a direct call is rare.
    `inputs`, where given, are torch's node's inputs instead, in its order: an optional one not
    given (None) is a None gradient, as torch's (layer_norm(x, (3,)).grad_fn(g) is (gx, None, None)
    in torch; tracegrad's gave gx alone)."""
    edges = []
    if inputs is not None:
        given = inputs
    else:
        code = frame.f_code
        loc = frame.f_locals
        given = [loc.get(name) for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
    for v in given:
        if v is None and inputs is not None:
            edges.append(None)
            continue
        c = v.__class__
        if c is Tensor:
            vs = (v,)
        elif c is tuple or c is list:
            vs = [t for t in v if isinstance(t, Tensor)]
        elif v is None or not isinstance(v, Tensor):
            continue
        else:
            vs = (v,)
        for t in vs:
            if not t._dtype.is_floating_point:
                continue                 # (an index is no input of torch's node)
            g = t._grad_fn if t._view is None else t.grad_fn
            if g is fn:
                return                   # (the op gave back an input)
            if g is not None:
                edges.append((g, t._output_nr))
            elif not t._req:
                edges.append(None)
            else:
                # a leaf: the weak reference to its AccumulateGrad (the op's nodes hold it), looked
                # up when the node is called (slot -1)
                acc = t._grad_acc
                edges.append((acc, -1) if acc is not None else (t._accumulator(), 0))
    if any(e is not None for e in edges):
        fn.__dict__["_composite_inputs"] = tuple(edges)


INFERENCE_SAVED_MSG = ("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference "
                       "mode in computation tracked by autograd. To work around this, you can make a clone to get a "
                       "normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
                       "`torch.inference_mode()`.")


def keep_saved(out, input=None, others=(), result=False):
    """What torch's node for a composite op saves and its decomposition here need not read: the
    op's `input` (its self), the tensors in `others`, and with `result` its output. torch checks
    the version of each when the node runs, and raises "modified by an inplace operation" where
    one was written since: lerp(a, b, w) with b written before the backward raised in torch and
    gave a gradient here (where(...)'s node saved no b). Eagerly they join the saved values of
    out's node; in a trace they are marked on out's value (functionalize, compile). Returns out."""
    if out.__class__ is Proxy:
        _keep_saved_traced(out, input, others, result)
        return out
    node = out._grad_fn
    if node is None or node._prim is None:
        return out
    guards = []
    for t in (input,) + tuple(others):
        if isinstance(t, Tensor) and t._inference:
            raise RuntimeError(INFERENCE_SAVED_MSG)          # (torch's, as its node saves t)
    # (in the order torch's node unpacks them, which names the first found written: by name, and
    # a composite's others, its result and its self mostly sort so: fmax's other before self)
    for t in others:
        if isinstance(t, Tensor):
            guards.append(Above.Guard.of(t, False))
    if result:
        guards.append(Above.Guard.of(out, True))
    if isinstance(input, Tensor):
        guards.append(Above.Guard.of(input, False, True))
    guards = tuple(g for g in guards if g is not None)
    if guards:
        node._saved = node._saved + guards
        node._guarded = True
    return out


def _keep_saved_traced(out, input, others, result):
    """keep_saved in a trace: out's value gets "guards", ((value, is_self), ...), and "guards_out"
    with `result`; the graph's "guarded" maps each guarded value to (op value, is_self) pairs, for
    functionalize's check of a write to a saved value (_mark_saved_written)."""
    g = out.__dict__["_graph"]
    v = value_of(g, out)
    a = g[v]
    if a["op"] == "proj" and not result:
        v = a["args"][0]                 # an output of an op of several (max_pool2d's values): the op's
        a = g[v]
    if a["op"] in ("input", "proj") or a["prim"] is None:
        return
    consts = g.__dict__.get("constants", {})
    found = []
    for t, is_self in [(input, True)] + [(t, False) for t in others]:
        if t.__class__ is Proxy and t.__dict__["_graph"] is g:
            found.append((V(value_of(g, t)), is_self))
        elif isinstance(t, Tensor) and id(t) in consts:
            found.append((V(consts[id(t)]), is_self))
    if found:
        a["guards"] = a.get("guards", ()) + tuple(found)
        guarded = g.__dict__.setdefault("guarded", {})
        for x, is_self in found:
            guarded.setdefault(x, []).append((v, is_self))
    if result:
        a["guards_out"] = True


# grad_fn nodes numbered as they are made: the backward runs them in reverse creation order, as
# torch's engine runs nodes by decreasing sequence number, so a value used by several ops sums its
# gradients in torch's order (in float16 or bfloat16 another grouping of three or more terms rounds
# to another number)
next_node_seq = itertools.count().__next__


def saved_alias(a, copy=False):
    """A tensor in `a`'s place in the graph for a node to save: of `a`'s memory now, sharing its
    version counter (Primitive.saves_inner_view: torch's view made inside the op, which
    `a.data = ...` leaves), or with `copy` of a copy of its value now, with a version of its own
    (torch's reshape that copies the operand: a later write to `a` does not reach it)."""
    if copy:
        t = Tensor._make(a._data.copy(), a._dtype, a._req, a._grad_fn, a._output_nr)
    else:
        t = Tensor._make(a._data, a._dtype, a._req, a._grad_fn, a._output_nr, vc=a._vc)
    if a._grad_fn is None and a._req:
        t._grad_acc = weakref.ref(a._accumulator())     # (a leaf: its gradient reaches a's .grad)
    return t



def _record(prim, args, params, outs):
    """Make the grad_fn node for one op and attach it to its outputs."""
    cls = prim._node_cls
    if cls is None:
        cls = Above.node_class_of(prim, args, params)
    node = object.__new__(cls)
    node._prim = prim
    node._params = params
    metas = []
    edges = []
    req = []
    for a in args:
        if a.__class__ is Tensor or isinstance(a, Tensor):
            metas.append((a._data.shape, a._dtype))
            # (a stale view's grad_fn is made again here, and then requires grad)
            fn = a._grad_fn if a._view is None else a.grad_fn
            req.append(a._req)
            if fn is not None:
                edges.append((fn, a._output_nr))
            elif a._req:
                edges.append((a._accumulator(), 0))
            else:
                edges.append((None, 0))
        else:
            metas.append(a)
            req.append(False)
            edges.append((None, 0))      # torch wraps Python numbers as inputs with no grad_fn
            if isinstance(a, float) and a == 0 and math.copysign(1.0, a) < 0:
                # -0.0 == 0.0: the eager backward cache keys this argument apart (x / -0.0's
                # gradient is -inf where x / 0.0's is inf)
                node._neg_zero = (node._neg_zero or ()) + (len(metas) - 1,)
            elif a.__class__ is bool:
                # False == 0 too: x ** False's gradient is g * (0.0 / x), x ** 0's zeros
                node._neg_zero = (node._neg_zero or ()) + (-len(metas),)
    node._args_meta = tuple(metas)
    node._edges = tuple(edges)
    node._seq = next_node_seq()          # after its inputs' nodes (a view's grad_fn may be made just above)
    positions, save_out = prim.saved_positions(len(args), tuple(req))
    if positions or save_out:
        saved = [None] * (len(args) + 1)
        inner = prim.saves_inner_view(args) if prim.saves_inner_view is not None else ()
        for i in positions:
            a = args[i]
            if isinstance(a, Tensor):
                if a._inference:
                    raise RuntimeError(INFERENCE_SAVED_MSG)
                saved[i + 1] = Above.Saved(saved_alias(a) if i in inner else a, False)
            else:
                saved[i + 1] = a
        if save_out:
            saved[0] = tuple([Above.Saved(o, True, k) for k, o in enumerate(outs)])
        node._saved = tuple(saved)
    else:
        node._saved = (None,) * (len(args) + 1)
    if len(outs) == 1:
        o = outs[0]
        node._out_meta = ((o._data.shape, o._dtype),)
    else:
        node._out_meta = tuple([(o._data.shape, o._dtype) for o in outs])
    if _ANOMALY[0]:
        node._trace = _anomaly_trace()
        if _ANOMALY_PARENT[0] is not None:           # made by the backward of that node
            node.__dict__["_anomaly_parent"] = _ANOMALY_PARENT[0]
    nondiff = prim.nondiff_outputs
    for k, o in enumerate(outs):
        if (nondiff and k in nondiff) or not o._dtype.is_floating_point:
            continue
        o._req = True
        o._grad_fn = node
        if o._view is not None:
            o._view.attr_version = o._vc[0]
        o._output_nr = k


_ANOMALY = [False]
_ANOMALY_PARENT = [None]   # in anomaly mode: the node whose backward (create_graph) is running
_ANOMALY_NAN = [True]
_PROFILE = [None]          # the profiler's op recorder while a profile is active


def _anomaly_trace():
    return traceback.format_stack()[:-3]


# the op table's rules apply primitives and make tensors through these (it imports no front end)
FrontEnd.apply, FrontEnd.Tensor = apply, Tensor

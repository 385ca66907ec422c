"""The recorded graph as users see it: grad_fn nodes, AccumulateGrad, saved tensors.

Each eager op that needs grad makes one Node: the op-table entry it ran (`_prim`), its
parameters, the metadata of its arguments, its saved tensors and `next_functions`,
the edges to the nodes that made its inputs. Nodes hold their inputs' nodes, never
their outputs, so a graph lives exactly as long as some tensor refers to it and is
freed by reference counting.
"""
import itertools
import re
import threading
import weakref
import functools

from ..tensor import Above
from .. import tracing as _tracing
from ..grad_mode import no_grad
from ..tensor import Tensor

FREED_MSG = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
             "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
             "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
             "if you need to access saved tensors after calling backward.")


class Engine:
    """What nodes call of the engine (autograd/engine.py), which imports this module: plugged in
    by it as it is imported (autograd/__init__ imports it first), so that this module imports
    no engine. `call_node`, `unpack_saved`, `unpack`, `current_task`."""
    call_node = unpack_saved = unpack = current_task = will_call_hooks = None


_seq = itertools.count()
_classes = {}
_lock = threading.Lock()


class RemovableHandle:
    _next_id = itertools.count()

    def __init__(self, hooks_dict):
        self.hooks_dict = hooks_dict
        self.id = next(RemovableHandle._next_id)

    def remove(self):
        self.hooks_dict.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Node:
    """Base of every grad_fn class (`MulBackward0`, ...)."""
    # _seq: the node's place in creation order (tracing.next_node_seq), which the engine runs backward
    # in, as torch's runs its nodes by sequence number
    # _edges: one (node, output_nr) per argument of the primitive (None for a number or a tensor with
    # no grad_fn), which the engine walks; next_functions is torch's view of them
    __slots__ = ("_prim", "_params", "_args_meta", "_edges", "_saved", "_out_meta", "_seq", "__weakref__",
                 "__dict__")
    # rarely set, so class-level defaults: a node pays for them only when they are set
    _hooks = None
    _pre_hooks = None
    _trace = None          # the forward traceback, in anomaly mode
    _freed = False         # a node made freed (a whole compiled step's output): any backward raises
    _guarded = False       # its _saved ends with Guards (tracing.keep_saved), checked whenever it runs
    _neg_zero = None       # the positions of Python -0.0 arguments, and -1 - position of bools (the backward cache's key)

    @property
    def next_functions(self):
        """torch's edges of the node: of a composite op's node (tracing.note_composite_inputs), its
        inputs' (mse_loss(x, t)'s node has x's and t's, not those of the last primitive it ran); of a
        primitive's, those of the arguments torch's node takes (Primitive.torch_edges: no index,
        mask or condition, no Python number of a Scalar overload: sort's node has one edge, clamp(x,
        0, 1)'s one, where's two)."""
        comp = self.__dict__.get("_composite_inputs")
        if comp is not None:
            return tuple((None, 0) if e is None else (e[0](), 0) if e[1] == -1 else e for e in comp)
        prim = self._prim
        if prim is None or prim.takes_ctx:
            return self._edges
        edges = self._edges
        return tuple(edges[i] for i in prim.torch_edges(self._args_meta) if i < len(edges))

    @next_functions.setter
    def next_functions(self, edges):
        self._edges = edges

    def name(self):
        """torch's node name: the class name, with its namespace for the nodes torch writes
        by hand in C++ (torch::autograd::AccumulateGrad, torch::autograd::CopySlices)."""
        name = type(self).__name__
        return "torch::autograd::" + name if name in _CPP_NODES else name

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    def __call__(self, *grads):
        return Engine.call_node(self, grads)

    @property
    def metadata(self):
        return self.__dict__.setdefault("_metadata", {})

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> None or new grad_inputs; runs after this node."""
        if self._hooks is None:
            self._hooks = {}
        h = RemovableHandle(self._hooks)
        self._hooks[h.id] = fn
        return h

    def register_prehook(self, fn):
        """fn(grad_outputs) -> None or new grad_outputs; runs before this node."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        h = RemovableHandle(self._pre_hooks)
        self._pre_hooks[h.id] = fn
        return h

    def _saved_meta(self):
        return self._prim.saves

    def __getattr__(self, item):
        # torch exposes saved values as _saved_<name> attributes, and the SavedTensor objects
        # themselves as _raw_saved_<name>
        raw = item.startswith("_raw_saved_")
        if (item.startswith("_saved_") and item != "_saved_meta") or raw:
            name = item[len("_raw_saved_" if raw else "_saved_"):]
            prim = object.__getattribute__(self, "_prim")
            if name == "result":
                name = "out"
            elif prim is not None and name in ("self", "other") and prim.inputs:
                # torch's names for the first and second inputs
                k = 0 if name == "self" else 1
                if k < len(prim.inputs):
                    name = prim.inputs[k]
            if prim is not None and name in prim.saves:
                saved = object.__getattribute__(self, "_saved")
                if saved is None:
                    raise RuntimeError(FREED_MSG)
                if name == "out":
                    if saved[0] is None:
                        return None
                    s = saved[0][0] if len(saved[0]) == 1 else saved[0]
                    if raw:
                        return tuple(SavedTensor(self, x) for x in s) if isinstance(s, tuple) else SavedTensor(self, s)
                    return Engine.unpack_saved(self, s)
                i = [j for j in range(len(self._args_meta))
                     if prim.inputs[min(j, len(prim.inputs) - 1)] == name and saved[j + 1] is not None]
                vals = [(SavedTensor(self, saved[j + 1]) if isinstance(saved[j + 1], Saved) else saved[j + 1])
                        if raw else Engine.unpack_saved(self, saved[j + 1]) for j in i]
                if prim.variadic and name == prim.inputs[-1]:
                    return vals
                return vals[0] if vals else None
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{item}'")


class SavedTensor:
    """torch._C._autograd.SavedTensor: one tensor a node saved (grad_fn._raw_saved_<name>);
    register_hooks(pack_hook, unpack_hook) packs it now and unpacks it when it is used."""
    __slots__ = ("_node", "_saved")

    def __init__(self, node, saved):
        self._node = node
        self._saved = saved

    def register_hooks(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks expects pack_hook and unpack_hook to be callable")
        s = self._saved
        if s.hook is not None:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: "
                               "only one pair of hooks is allowed at a time.")
        if self._node._saved is None:
            raise RuntimeError(FREED_MSG)
        s.pack(Engine.unpack(self._node, s), s.tensor is None, (pack_hook, unpack_hook))


class AccumulateGrad(Node):
    """The node at a leaf that requires grad; backward accumulates into `variable.grad`."""
    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable
        self._prim = None
        self._params = None
        self._args_meta = ()
        self.next_functions = ()
        self._saved = ()
        self._out_meta = ((tuple(variable._data.shape), variable._dtype),)
        self._seq = -1                   # a leaf: before every node (it has no inputs)


def node_class(name):
    """The grad_fn class for a name, made once (torch's class names: MulBackward0, ...)."""
    cls = _classes.get(name)
    if cls is None:
        with _lock:
            cls = _classes.get(name)
            if cls is None:
                cls = type(name, (Node,), {"__slots__": ()})
                cls.__module__ = "tracegrad.autograd.graph"
                _classes[name] = cls
    return cls


# nodes torch writes by hand in C++, which its messages name with their namespace
_CPP_NODES = frozenset({"CopySlices", "CopyBackwards", "AccumulateGrad", "NotImplemented", "Error"})


def op_name(node):
    """A node as torch's messages name the op that made a tensor: ExpBackward0 -> Exp,
    ClampBackward1 -> Clamp1, MyFnBackward -> MyFn, CopySlices ->
    torch::autograd::CopySlices."""
    name = type(node).__name__
    if name in _CPP_NODES:
        return node.name()
    m = re.fullmatch(r"(.*)Backward(\d*)", name)
    if m is None:
        return name
    return m.group(1) + ("" if m.group(2) in ("", "0") else m.group(2))


def node_class_of(prim, args, params):
    """The grad_fn class for one call of op-table entry `prim`, named from the table's data:
    `prim.grad_fn` is torch's name, or a function of the call's arguments giving it. The table
    never imports this module; a fixed name's class is cached on the entry (`_node_cls`)."""
    cls = prim._node_cls
    if cls is not None:
        return cls
    if callable(prim.grad_fn):
        return node_class(prim.grad_fn(args, params))
    cls = prim._node_cls = node_class(prim.grad_fn)
    return cls


class Saved:
    """A tensor saved for backward, with the version it had when saved.

    An input is held as the tensor itself; an output as its data alone (holding the
    tensor would make a cycle through its grad_fn); unpacking an output rebuilds a
    tensor whose grad_fn is the node that saved it, as torch does.

    Under saved_tensors_hooks the tensor is handed to the pack hook and only what it
    returns is held (`hook`: packed value, unpack hook, the graph edge of the original);
    unpacking calls the unpack hook and relinks its result to the graph. As in torch,
    a hooked saved tensor has no version check.
    """
    __slots__ = ("tensor", "data", "vc", "version", "output_nr", "nonleaf", "hook")

    def __init__(self, tensor, is_output, output_nr=0):
        self.vc = tensor._vc
        self.version = tensor._vc[0]
        self.nonleaf = tensor._grad_fn is not None        # a later detach_() of it is refused
        self.hook = None
        if is_output:
            self.tensor = None
            self.data = tensor._data
            self.output_nr = output_nr
        else:
            self.tensor = tensor
            self.data = None
            self.output_nr = -1
        if _HOOK_USERS[0]:
            hooks = _current_hooks()
            if hooks is not None:
                self.pack(tensor, is_output, hooks)

    def pack(self, tensor, is_output, hooks):
        pack_hook, unpack_hook = hooks
        HOOK_USED[0] = True
        version = tensor._vc[0]
        with no_grad():                       # torch runs pack hooks with grad mode off
            packed = pack_hook(tensor)
        if tensor._vc[0] != version:
            raise RuntimeError("A saved tensor pack hook is modifying its input in place. Tensors provided as input "
                               "to pack hook can not be modified by in-place operations as this can lead to "
                               "unexpected side-effects. Please open an issue if you need to perform in-place "
                               "operations on the input to a pack hook.")
        if is_output:
            link = None                       # relinked to the node that saved it
        elif tensor._grad_fn is not None:
            link = (tensor._grad_fn, tensor._output_nr)
        elif tensor._req:
            link = tensor._accumulator()      # a leaf: its AccumulateGrad
        else:
            link = False                      # no part of the graph: the unpacked value as it is
        self.hook = (packed, unpack_hook, link, id(tensor), hooks)
        self.tensor = None
        self.data = None

    def unpack_hooked(self, node):
        """The tensor the unpack hook gives, linked into the graph where the original was."""
        packed, unpack_hook, link = self.hook[:3]
        r = unpack_hook(packed)
        if not isinstance(r, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(r).__name__}")
        if link is False:
            return r
        if link is None:
            dt = node._out_meta[self.output_nr][1]
            if not dt.is_floating_point:
                return Tensor._make(r._data, r._dtype)
            return Tensor._make(r._data, r._dtype, True, node, self.output_nr)
        if isinstance(link, tuple):
            return Tensor._make(r._data, r._dtype, True, link[0], link[1])
        t = Tensor._make(r._data, r._dtype, True)
        t._grad_acc = weakref.ref(link)
        return t


class Guard(Saved):
    """A tensor torch's node for a composite op saves but tracegrad's decomposition of it does not
    read (lerp's end, sgn's self and result): kept for torch's version check alone, which the
    engine makes whenever the node runs (engine._check_guards). `is_self`: the op's self, which
    an in-place form saves as it was before the write (torch's clone of the original self)."""
    __slots__ = ("is_self",)

    @classmethod
    def of(cls, tensor, is_output, is_self=False):
        """The guard of `tensor` at its version now; None under saved-tensor hooks, where torch
        checks no version (and the composite's own saved values went through the hooks)."""
        if _HOOK_USERS[0] and _current_hooks() is not None:
            return None
        g = object.__new__(cls)
        g.vc = tensor._vc
        g.version = tensor._vc[0]
        g.nonleaf = tensor._grad_fn is not None
        g.hook = None
        g.is_self = is_self
        if is_output:
            g.tensor, g.data, g.output_nr = None, tensor._data, tensor._output_nr
        else:
            g.tensor, g.data, g.output_nr = tensor, None, -1
        return g


# saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks): a stack per thread, as torch
# keeps them thread-local; _HOOK_USERS counts the contexts open in any thread, so that saving
# a tensor looks at its thread's stack only while some are open
_TLS = threading.local()
_HOOK_USERS = [0]
HOOK_USED = [False]          # whether any tensor was ever saved through hooks (the engine then looks)
RETAIN_USED = [False]        # whether retain_grad() was ever called (the engine then looks for it)
MODULE_BACKWARD_HOOKS = [0]  # global module full backward hooks (nn.modules.module) now registered


def hooked_saved(node):
    """The input positions and output slots of `node` whose saved tensors went through hooks:
    each reads its own unpacked value in backward, so the backward program keeps them apart
    from other reads of the same forward value. None where there are none."""
    saved = node._saved
    if not saved:
        return None
    ins = tuple(i for i, s in enumerate(saved[1:]) if isinstance(s, Saved) and s.hook is not None)
    outs = tuple(k for k, s in enumerate(saved[0] or ()) if s.hook is not None)
    return (ins, outs) if ins or outs else None


def _current_hooks():
    stack = getattr(_TLS, "stack", None)
    return stack[-1] if stack else None


def saved_tensors_hooks_active():
    """Whether saved-tensor hooks are set in this thread."""
    return bool(_HOOK_USERS[0]) and _current_hooks() is not None


class hidden_saved_tensors_hooks:
    """No saved-tensor hooks in this thread while open (tracegrad/chain.py: calls replayed as
    they first ran, before the hooks' context was entered)."""

    def __enter__(self):
        self.stack = getattr(_TLS, "stack", None)
        _TLS.stack = []

    def __exit__(self, *exc):
        _TLS.stack = self.stack


def _saved_tensors_hooks_is_enabled():
    """torch._C._autograd._saved_tensors_hooks_is_enabled: False inside disable_saved_tensors_hooks."""
    return getattr(_TLS, "disabled", None) is None


class saved_tensors_hooks:
    """torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook): while the context is
    open, each tensor an op saves for backward is passed to pack_hook and only its result is
    kept; backward (and grad_fn._saved_*) gets unpack_hook(packed) instead. Nested contexts:
    the innermost one applies."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        msg = getattr(_TLS, "disabled", None)
        if msg is not None:
            raise RuntimeError(msg)
        stack = getattr(_TLS, "stack", None)
        if stack is None:
            stack = _TLS.stack = []
        stack.append((self.pack_hook, self.unpack_hook))
        with _lock:
            _HOOK_USERS[0] += 1

    def __exit__(self, *exc):
        _TLS.stack.pop()
        with _lock:
            _HOOK_USERS[0] -= 1


class save_on_cpu(saved_tensors_hooks):
    """torch.autograd.graph.save_on_cpu: tensors saved for backward are kept on the CPU and
    moved back to their device when backward needs them."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            return tensor.device, tensor.cpu()

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:
    """torch.autograd.graph.disable_saved_tensors_hooks(error_message): inside it, opening
    saved_tensors_hooks raises RuntimeError(error_message); it raises so itself where hooks
    are already set."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if _current_hooks() is not None:
            raise RuntimeError(self.error_message)
        self._prev = getattr(_TLS, "disabled", None)
        _TLS.disabled = self.error_message

    def __exit__(self, *exc):
        _TLS.disabled = self._prev

    def __call__(self, fn):

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with disable_saved_tensors_hooks(self.error_message):
                return fn(*args, **kwargs)
        return wrapper


def increment_version(tensor):
    """Bump the version counter of `tensor` (or of each tensor of an iterable), as an in-place
    change would: what was saved of it for backward is then refused (torch's increment_version)."""
    for t in ((tensor,) if isinstance(tensor, Tensor) else tensor):
        t._vc[0] += 1


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """torch.autograd.graph.register_multi_grad_hook: mode "any" calls fn(grad) once per
    backward, with the first gradient computed of any of `tensors`; mode "all" calls
    fn(grads) once per backward that reaches some of them, with each one's gradient (None
    where the backward computed none), when that backward has computed them."""
    supported = ("all", "any")
    if mode not in supported:
        raise ValueError(f"Expects mode to be one of {supported} but got {mode}")
    tensors = tuple(tensors)
    handles = []
    if mode == "any":
        fired = [None]

        def any_hook(grad):
            task = Engine.current_task()
            key = task.id if task is not None else None
            if fired[0] != key or key is None:
                fired[0] = key
                fn(grad)

        for t in tensors:
            if t.requires_grad:
                handles.append(t.register_hook(any_hook))
        return _MultiHandle(handles)
    seen = {}
    calls = {}

    def make(i):
        def all_hook(grad):
            task = Engine.current_task()
            if task is None:
                return
            got = seen.get(task.id)
            if got is None:
                got = seen[task.id] = [None] * len(tensors)
                # torch's: fn runs in the hook of the last of the tensors the backward reaches
                # (it counts them once, _will_engine_execute_node), before the nodes after it
                will = [Engine.will_call_hooks(t) for t in tensors if t.requires_grad]
                calls[task.id] = [0, None if None in will else sum(will)]

                def at_end(task_id=task.id):   # where the count was not known
                    grads = seen.pop(task_id, None)
                    calls.pop(task_id, None)
                    if grads is not None and handles_alive[0]:
                        fn(grads)
                task.at_end.append(at_end)
            got[i] = grad
            c = calls.get(task.id)
            if c is not None:
                c[0] += 1
                if c[0] == c[1]:
                    grads = seen.pop(task.id)
                    del calls[task.id]
                    if handles_alive[0]:
                        fn(grads)
        return all_hook

    handles_alive = [True]
    for i, t in enumerate(tensors):
        if t.requires_grad:
            handles.append(t.register_hook(make(i)))

    class _AllHandle(_MultiHandle):
        def remove(self):
            handles_alive[0] = False
            super().remove()

    return _AllHandle(handles)


Above.AccumulateGrad, Above.RemovableHandle = AccumulateGrad, RemovableHandle        # a leaf's node; hooks


_tracing.Above.Saved, _tracing.Above.node_class, _tracing.Above.node_class_of = Saved, node_class, node_class_of
_tracing.Above.Guard = Guard

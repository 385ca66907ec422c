"""The recorded graph as users see it: grad_fn nodes, AccumulateGrad, saved tensors.

Each eager op that needs grad makes one Node: the op-table entry it ran (`_prim`), its
parameters, the metadata of its arguments, its saved tensors and `next_functions`,
the edges to the nodes that made its inputs. Nodes hold their inputs' nodes, never
their outputs, so a graph lives exactly as long as some tensor refers to it and is
freed by reference counting.
"""
import itertools
import threading
import weakref

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
    __slots__ = ("_prim", "_params", "_args_meta", "next_functions", "_saved", "_out_meta", "__weakref__",
                 "__dict__")
    # rarely set, so class-level defaults: a node pays for them only when they are set
    _hooks = None
    _pre_hooks = None
    _trace = None          # the forward traceback, in anomaly mode
    _freed = False
    _seq = 0

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    def __call__(self, *grads):
        from .engine import call_node
        return call_node(self, grads)

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
        # torch exposes saved values as _saved_<name> attributes
        if item.startswith("_saved_") and item != "_saved_meta":
            from .engine import unpack_saved
            name = item[len("_saved_"):]
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
                    from .engine import FREED_MSG
                    raise RuntimeError(FREED_MSG)
                if name == "out":
                    if saved[0] is None:
                        return None
                    return unpack_saved(self, saved[0][0] if len(saved[0]) == 1 else saved[0])
                i = [j for j in range(len(self._args_meta))
                     if prim.inputs[min(j, len(prim.inputs) - 1)] == name and saved[j + 1] is not None]
                vals = [unpack_saved(self, saved[j + 1]) for j in i]
                if prim.variadic and name == prim.inputs[-1]:
                    return vals
                return vals[0] if vals else None
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{item}'")


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


class Saved:
    """A tensor saved for backward, with the version it had when saved.

    An input is held as the tensor itself; an output as its data alone (holding the
    tensor would make a cycle through its grad_fn); unpacking an output rebuilds a
    tensor whose grad_fn is the node that saved it, as torch does.
    """
    __slots__ = ("tensor", "data", "vc", "version", "output_nr", "nonleaf")

    def __init__(self, tensor, is_output, output_nr=0):
        self.vc = tensor._vc
        self.version = tensor._vc[0]
        self.nonleaf = tensor._grad_fn is not None        # a later detach_() of it is refused
        if is_output:
            self.tensor = None
            self.data = tensor._data
            self.output_nr = output_nr
        else:
            self.tensor = tensor
            self.data = None
            self.output_nr = -1


def increment_version(tensor):
    """Bump the version counter of `tensor` (or of each tensor of an iterable), as an in-place
    change would: what was saved of it for backward is then refused (torch's increment_version)."""
    from ..tensor import Tensor
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
    from .engine import current_task
    supported = ("all", "any")
    if mode not in supported:
        raise ValueError(f"Expects mode to be one of {supported} but got {mode}")
    tensors = tuple(tensors)
    handles = []
    if mode == "any":
        fired = [None]

        def any_hook(grad):
            task = current_task()
            key = task.id if task is not None else None
            if fired[0] != key or key is None:
                fired[0] = key
                fn(grad)

        for t in tensors:
            if t.requires_grad:
                handles.append(t.register_hook(any_hook))
        return _MultiHandle(handles)
    seen = {}

    def make(i):
        def all_hook(grad):
            task = current_task()
            if task is None:
                return
            got = seen.get(task.id)
            if got is None:
                got = seen[task.id] = [None] * len(tensors)

                def at_end(task_id=task.id):
                    grads = seen.pop(task_id, None)
                    if grads is not None and handles_alive[0]:
                        fn(grads)
                task.at_end.append(at_end)
            got[i] = grad
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

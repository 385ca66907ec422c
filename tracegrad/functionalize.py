"""Writes inside a traced function, made functional: in-place ops, `.grad`, optimizer steps.

While `compile` traces a function, nothing outside the trace may change: the function
runs once on symbolic values, and its program runs on every call. So every write the
function makes is recorded instead, as torch.compile's functionalization does:

- an in-place op on a symbolic value (`x.add_(1)`, `y[idx] = v`, `relu_()`) rebinds the
  value to the out-of-place result; on a view of a symbolic value it writes the result
  into the view's base (a scatter) and later reads of the base's other views see it;
- an in-place op on a real tensor (a module buffer such as BatchNorm's running mean, a
  parameter updated under no_grad, an input of the call) leaves the tensor alone and
  keeps its new value symbolically: later reads inside the trace see the new value, and
  the program returns it as an extra output that is written back into the tensor after
  every call (its version counter bumped, as the in-place op would);
- `Tensor.backward()` derives the backward graph of what was traced so far (as
  `autograd.grad` inside a trace does) and accumulates the gradients into the `.grad`
  of the leaves, symbolically; `.grad` reads and writes (zero_grad) inside the trace
  see and change those symbolic gradients, written back after each call;
- `optimizer.step()` runs the optimizer's update on the symbolic parameters, gradients
  and state (optim/traced.py), so a whole training step becomes one program. The
  learning rate of each parameter group is read as an input at every call; the other
  options and the state's layout are guarded (`Shadow.guard_key`).

`Shadow` is the record of one trace; `active()` the one being traced in this thread.
"""
import sys
import threading
import weakref

import networkx as nx
import numpy as np

from .tensor import Tensor
from .tensor import _SHADOW, _TRACES_LOCK, Above
from .grad_mode import STATE
from . import tracing as _tracing
from .tracing import LOCAL
from .tracing import TraceError, Proxy, apply_symbolic, apply, value_of
from .ops import functional as F
from . import _dtype as D
from .autodiff import derive, differentiable_reach, backward_args, mark_no_grad, carries_grad
from .autograd._grad_io import _seeds, grad_array_for
from .autograd.graph import FREED_MSG
from .autograd.views import rebase_message
from .ops.primitives import PRIMITIVES as P
from .interpret import run_eager
from .cuda import to_host


Above.functionalize_local = LOCAL        # Tensor reads the trace being made through it


def active():
    return LOCAL.shadow


class Shadow:
    """What a traced function wrote: new values of real tensors, gradients, optimizer state."""

    def __init__(self, graph):
        self.graph = graph
        self.data = {}          # id(real tensor) -> [tensor, Proxy]: its value now
        self.grads = {}         # id(real tensor) -> [tensor, Proxy or None, existing grad tensor or None]
        self.leaf_values = {}   # id(real leaf that requires grad) -> (tensor, its graph value now)
        # real leaves that require grad, read with grad enabled after the function wrote them: a
        # value of the trace that is the write's, without the leaf's gradient (compile._build)
        self.leaf_reads_after_write = {}
        self.state = {}         # (id(optimizer), id(param)) -> (optimizer, param, {key: Tensor placeholder})
        self.optimizers = {}    # id -> optimizer that the function zeroed or stepped
        self.lr_inputs = []     # (holder tensor, param group): the learning rate read at every call
        self.watched = {}       # id -> tensor whose .grad being None or not the trace depended on
        self.targets = {}       # id -> leaf a backward() inside accumulated into, without hooks (guarded)
        self.grad_reads = {}    # id(a real .grad tensor the trace read) -> the tensor whose .grad it is
        self.backwarded = set()  # op values a backward without retain_graph went through (freed)
        self.stale_saves = {}    # op value -> shape: it saved a value written in place since (_mark_saved_written)
        self.same_memory = {}    # value -> the values a write rebound it to or from (one tensor's memory)
        self.did_backward = False
        self.inputs = []        # (input Proxy, its value at the start, real tensor)
        # id(real tensor or input Proxy) -> number of graph values when the in-place op that first
        # wrote it began (its own reads of other tensors come after: x[1:].copy_(y), y a view of x)
        self.first_write = {}
        self.write_start = sys.maxsize   # the number of graph values when the last in-place op began
        self.created = {}       # id -> concrete tensor made while tracing (creation._created)
        self.options_before = []  # the optimizers' param_groups as the trace began (_options)
        self.training = {}      # id(module) -> (module, its training flag before the trace set it)
        self.training_writes = ()  # (module, flag) the function left set: set again after every call
        self.installed = []     # (group, key, value, its _Option): options the program reads at every call
        self.option_reads = None    # install_options

    # -- Python state the program sets ----------------------------------------------------------
    def set_training(self, m, mode):
        """Module.train(mode) inside the trace: set now (the rest of the trace reads it), and
        undone when the trace ends, so that the guards see the flags as the call found them;
        the program sets the flags the function left after each of its calls."""
        self.training.setdefault(id(m), (m, m.training))
        m.training = mode

    # -- values of real tensors -----------------------------------------------------------------
    def value(self, t):
        """The current symbolic value of real tensor t, or None where the trace did not write it."""
        e = self.data.get(id(t))
        return None if e is None else e[1]

    def read_by_value(self, t):
        """A real tensor read in Python (.item(), float(), bool()) while tracing: its value is
        the one before the call unless the trace wrote it."""
        if id(t) in self.data:
            raise TraceError("the value of a tensor the function wrote in place (read in Python: .item(), float(), "
                             "bool()) is symbolic while tracing")

    def read_history(self, t, kind):
        """A real tensor's version counter (or grad_fn, output_nr, address) read in Python while
        tracing: the one before the call, which a write by the trace would have bumped."""
        if kind == "version" and id(t) in self.data:
            raise TraceError("the version counter (Tensor._version) of a tensor the function wrote in place is "
                             "the trace's while tracing, not the one each call leaves")

    def write(self, t, proxy):
        self.data[id(t)] = [t, proxy]
        self.first_write.setdefault(id(t), min(len(self.graph.nx), self.write_start))

    # -- .grad ----------------------------------------------------------------------------------
    def get_grad(self, t):
        e = self.grads.get(id(t))
        if e is None:
            if any(t is px for px, _, _ in self.inputs):
                raise TraceError("the .grad of an argument of the compiled function, read inside it, is not traced "
                                 "yet (each call may pass another tensor)")
            if t._data is not None:
                self.watched[id(t)] = t       # the trace read the real .grad: guarded (guard_key)
                if t._grad is not None:
                    self.grad_reads[id(t._grad)] = t
            return t._grad
        return e[1]

    def set_grad(self, t, value, inplace=False):
        self.grads[id(t)] = [t, value, inplace]

    def grad_inplace(self, t):
        """Whether t's gradient now is the .grad tensor it had before the call, changed in place."""
        e = self.grads.get(id(t))
        return t._grad is not None if e is None else bool(e[2])

    # -- guards ---------------------------------------------------------------------------------
    def guard_spec(self):
        """What the program's key must also cover: (optimizers, tensors whose .grad was read,
        leaves a backward inside accumulated into)."""
        return list(self.optimizers.values()), list(self.watched.values()), list(self.targets.values())


def _grad_meta(g):
    d = g._data
    return (g._req, g._dtype, d.__class__, d.shape)


def hook_free(t):
    """Whether no hook is registered on the leaf t (a tensor hook, a post-accumulate-grad hook,
    a hook on its gradient accumulator): what a backward traced into t's .grad assumed."""
    if t._hooks or t._post_acc_hooks:
        return False
    acc = t._grad_acc() if t._grad_acc is not None else None
    return acc is None or not (acc._pre_hooks or acc._hooks)


# {an optimizer class's update function (optim/traced.py has its rule): the options of a param
# group that a whole step's program reads at every call, where they are Python numbers}, filled
# by the optimizers' modules
RUNTIME_OPTIONS = {}


class OptionRead(TraceError):
    """The traced function read, in Python, an option that its program reads at every call."""

    def __init__(self, msg, exempt=frozenset()):
        super().__init__(msg)
        self.exempt = exempt      # (id(group), key): what the decision to run eagerly does not depend on


def runtime_keys(opt):
    """The options of opt's param groups that a whole step's program reads at every call."""
    return RUNTIME_OPTIONS.get(getattr(type(opt), "_update", None), ())


def _number(v):
    # numbers whose arithmetic in the eager update is float64's (a float32 scalar's is not)
    return v.__class__ in (float, int, np.float64)


def runtime_value(key, v):
    """Whether an option's value is one a program reads at every call: a Python number (for
    betas, a tuple or list of them)."""
    if key == "betas":
        return v.__class__ in (tuple, list) and all(_number(b) for b in v)
    return _number(v)


def option_token(key, v):
    """What a program assumed of an option it reads at every call (a float or an int, read
    as a float): which of its numbers are zero (`weight_decay != 0` and `momentum != 0`
    choose the update's code)."""
    if key == "betas":
        return v.__class__, tuple(b == 0 for b in v)
    return v == 0


def _lr_kind(lr):
    """What a program assumed of a learning rate, which it reads at every call: a Python number
    (a float or an int) or a tensor of some class."""
    return "number" if _number(lr) else lr.__class__


def _option_key(keys, k, v):
    if k in keys and runtime_value(k, v):
        return k, option_token(k, v)
    return k, type(v), v if not isinstance(v, Tensor) else id(v)


class _Reads:
    """What the _Options of one trace share: the (id(group), key) installed, the first read's
    error, the tracing thread."""
    __slots__ = ("exempt", "error", "thread")

    def __init__(self):
        self.exempt, self.error, self.thread = set(), None, threading.get_ident()


class _Option:
    """Stands in a param group, while a whole step is traced, for an option its program reads
    at every call (`group["lr"]`, a Python number): the traced update reads `value`; a read of
    it in the function's own Python code (which would bake this call's value into the program)
    raises, so that the function runs eagerly (and where the function caught that, the trace
    raises it again as it ends: `reads.error`). In another thread (an eager step there while
    this one is traced) it acts as its value."""
    __slots__ = ("value", "key", "opt", "reads")

    def __init__(self, value, key, opt, reads):
        self.value, self.key, self.opt, self.reads = value, key, opt, reads

    def _read(self):
        e = OptionRead(f"the function reads the option {self.key!r} of a param group of {type(self.opt).__name__} "
                       f"in Python, which a program would keep at this call's value; its programs read the options "
                       f"at every call themselves (read it outside the compiled function, or keep it in a tensor)",
                       frozenset(self.reads.exempt))
        if self.reads.error is None:
            self.reads.error = e
        raise e

    def __getattr__(self, name):
        if threading.get_ident() != self.reads.thread:
            return getattr(self.value, name)
        self._read()

    def __copy__(self):
        if threading.get_ident() != self.reads.thread:
            return self.value
        self._read()

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce_ex__(self, protocol):
        return type(self.__copy__()), (self.value,)

    def __reduce__(self):
        return self.__reduce_ex__(2)


def _option_method(name):
    def method(self, *args):
        if threading.get_ident() != self.reads.thread:
            if name == "__array__":
                return np.asarray(self.value, *args[:1])
            f = getattr(self.value, name, None)
            return NotImplemented if f is None else f(*args)     # (x += 1: float's __add__ then)
        self._read()
    method.__name__ = name
    return method


for _name in ("__float__", "__int__", "__index__", "__bool__", "__complex__", "__round__", "__trunc__", "__floor__",
              "__ceil__", "__abs__", "__neg__", "__pos__", "__repr__", "__str__", "__format__", "__hash__", "__eq__",
              "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__array__", "__iter__", "__len__", "__getitem__",
              "__contains__", "__call__",
              *(f"__{op}__" for base in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "divmod", "matmul",
                                         "and", "or", "xor", "lshift", "rshift")
                for op in (base, "r" + base, "i" + base))):
    setattr(_Option, _name, _option_method(_name))


def install_options(sh):
    """Each param group option a whole step's program would read at every call, replaced by an
    _Option for the trace (put back by restore_installed)."""
    sh.option_reads = reads = _Reads()
    exempt = reads.exempt
    for opt in list(OPTIMIZERS):
        keys = runtime_keys(opt)
        for group in opt.param_groups if keys else ():
            for key in keys:
                v = group.get(key)
                if not runtime_value(key, v):
                    continue
                exempt.add((id(group), key))
                if key == "betas":
                    stand = type(v)(_Option(b, key, opt, reads) for b in v)
                else:
                    stand = _Option(v, key, opt, reads)
                group[key] = stand
                sh.installed.append((group, key, v, stand))


def restore_installed(sh, check=True):
    """The options install_options replaced, back (where the function left the stand-in there).
    Where the function read one (and caught the error), its error raises now (with `check`)."""
    for group, key, v, stand in reversed(sh.installed):
        if group.get(key) is stand:
            group[key] = v
    sh.installed.clear()
    reads = sh.option_reads
    error = None if reads is None else reads.error
    if error is not None:
        reads.error = None
        if check:
            raise error


def guard_key(optimizers, tensors, targets=(), rebound=frozenset()):
    """The state a whole-step program assumed: each optimizer's options (but those the program
    reads at every call, runtime_keys, of which it assumed their type and which are zero,
    option_token) and the layout of its state; the .grad tensors the trace read: each
    by identity (a constant of the program, or written by it), but those in `rebound`
    (ids of tensors whose .grad the program reads afresh at every call, compile.Program's
    grad_slots) by their metadata. The ids are those of tensors the program holds, so
    none is reused while it is cached."""
    key = []
    for opt in optimizers:
        keys = runtime_keys(opt)
        for group in opt.param_groups:
            opts = []
            for k, v in group.items():
                if k in ("params", "lr", "param_names"):
                    continue
                opts.append(_option_key(keys, k, v))
            key.append((id(opt), tuple(opts), _lr_kind(group["lr"]),
                        tuple(tuple(opt.state[p]) if p in opt.state else () for p in group["params"])))
    for t in tensors:
        g = t._grad
        if id(t) in rebound:
            key.append(None if g is None else _grad_meta(g))
        else:
            # the .grad tensor itself: the program reads (and writes) the one the trace saw, so
            # another tensor there (a backward outside after zero_grad set it to None) is a miss
            key.append(id(g))
    # a hook registered on a parameter after the trace: the program's backward would not call it
    key.append(all(hook_free(t) for t in targets))
    return tuple(key)


def emit_guard_key(code, optimizers, tensors, targets=(), rebound=frozenset()):
    """guard_key(optimizers, tensors) == its value now, as tests of a program's generated check
    (runtime/check_code.py). A little stricter than the key: a group's keys compare whole
    (params and lr among them), options by type and ==, tensors by identity; where the
    optimizer has no state, one test of the state's truth stands for the absence of each
    parameter's."""
    for opt in optimizers:
        keys = runtime_keys(opt)
        o = code.const(opt)
        groups = code.let(f"{o}.param_groups")
        code.need(f"len({groups}) == {len(opt.param_groups)}")
        for g, group in zip(code.items_are(groups, len(opt.param_groups)), opt.param_groups):
            code.need(f"tuple({g}) == {code.const(tuple(group))}")
            for k, v in group.items():
                if k in ("params", "lr", "param_names"):
                    continue
                x = code.let(f"{g}[{code.const(k)}]")
                if k in keys and runtime_value(k, v):
                    code.need(f"{code.const(_option_key)}({code.const(keys)}, {code.const(k)}, {x}) == "
                              f"{code.const(_option_key(keys, k, v))}")
                elif isinstance(v, Tensor):
                    code.need(f"{x} is {code.const(v)}")
                else:
                    code.need(f"{x}.__class__ is {code.const(type(v))} and {x} == {code.const(v)}")
            code.need(f"{code.const(_lr_kind)}({g}['lr']) == {code.const(_lr_kind(group['lr']))}")
            params = group["params"]
            ps = code.let(f"{g}['params']")
            code.need(f"len({ps}) == {len(params)}")
            st = code.let(f"{o}.state")
            layouts = [tuple(opt.state[p]) if p in opt.state else () for p in params]
            if not any(layouts):
                code.need(f"not {st} or not any(p in {st} for p in {ps})")
                continue
            for x, layout in zip(code.items_are(ps, len(params)), layouts):
                # `in` first: the state is a defaultdict, which a read of a missing key would fill
                code.need(f"{x} in {st} and tuple({st}[{x}]) == {code.const(layout)}" if layout else
                          f"{x} not in {st}")
    for t in tensors:
        g = t._grad
        if g is not None and id(t) in rebound:
            # the tests of _grad_meta (not CheckCode.tensor_meta, which notes g as checked)
            x = code.let(f"{code.const(t)}._grad")
            code.need(f"{x} is not None and {x}._req is {code.const(g._req)} and {x}._dtype is {code.const(g._dtype)}")
            a = code.let(f"{x}._data")
            code.need(f"{a}.__class__ is {code.const(g._data.__class__)} and {a}.shape == {code.const(g._data.shape)}")
        else:
            code.need(f"{code.const(t)}._grad is {'None' if g is None else code.const(g)}")
    if targets:
        free = code.const(hook_free)
        code.need(" and ".join(f"{free}({code.const(t)})" for t in targets))


# every optimizer made (optim/optimizer.py adds each): their options as a trace began
OPTIMIZERS = weakref.WeakSet()


def _options():
    """Each live optimizer's param_groups list, its groups and a copy of each group's items;
    its state, the state's per-parameter dicts and a copy of each (what is in them)."""
    return [(opt, opt.param_groups, list(opt.param_groups),
             [{k: (tuple(v) if k == "params" else v) for k, v in g.items()} for g in opt.param_groups],
             opt.state, dict(opt.state), {k: dict(v) if isinstance(v, dict) else v for k, v in opt.state.items()})
            for opt in list(OPTIMIZERS)]


def _state_changed(state, entries, copies):
    """Whether an optimizer's state was changed in Python (an entry or an item set, replaced or
    removed); an entry the code only read into being (a defaultdict's empty dict) is none."""
    for k, v in state.items():
        if k not in entries:
            if not (isinstance(v, dict) and not v):
                return True
        elif v is not entries[k] or (isinstance(v, dict) and (v.keys() != copies[k].keys() or
                                                               any(v[j] is not x for j, x in copies[k].items()))):
            return True
    return any(k not in state for k in entries)


def _same(a, b):
    return a is b or (type(a) is type(b) and not isinstance(a, Tensor) and bool(a == b))


def options_changed(sh):
    """Where the traced function changed an optimizer's param_groups (an lr_scheduler's
    step(), `group["lr"] = ...` in a helper) or its state in Python: a text naming the
    first change, else None. A program would not make that change again at later calls, and
    reads each learning rate at the start of the call, before the function set it."""
    for opt, groups, items, copies, state, entries, state_copies in sh.options_before:
        name = type(opt).__name__
        if opt.state is not state or _state_changed(state, entries, state_copies):
            # a custom optimizer's step() making its state in Python: the trace would leave
            # symbolic values in it, and the program would not make it again
            return f"{name}.state"
        if opt.param_groups is not groups or len(groups) != len(items) or \
                any(g is not h for g, h in zip(groups, items)):
            return f"{name}.param_groups"
        for i, (g, c) in enumerate(zip(items, copies)):
            for k in set(g) | set(c):
                if k not in g or k not in c or not _same(tuple(g[k]) if k == "params" else g[k], c[k]):
                    return f"{name}.param_groups[{i}][{k!r}]"
    return None


def restore_options(sh):
    """The optimizers' param_groups and state as the trace found them (an eager run follows a
    failed trace)."""
    for opt, groups, items, copies, state, entries, state_copies in sh.options_before:
        opt.state = state
        if _state_changed(state, entries, state_copies):
            state.clear()
            state.update(entries)
            for k, v in entries.items():
                if isinstance(v, dict):
                    v.clear()
                    v.update(state_copies[k])
        opt.param_groups = groups
        groups[:] = items
        for g, c in zip(items, copies):
            if any(k not in g or g[k] is not v for k, v in c.items() if k != "params") or len(g) != len(c):
                params = g.get("params")
                g.clear()
                g.update(c)
                if params is not None and tuple(params) == c["params"]:
                    g["params"] = params
                else:
                    g["params"] = list(c["params"])


def begin(graph):
    if LOCAL.shadow is not None:
        raise TraceError("a compiled function called while another is being traced")
    sh = Shadow(graph)
    sh.options_before = _options()
    install_options(sh)
    LOCAL.shadow = sh
    with _TRACES_LOCK:
        _SHADOW[0] += 1       # (a count: another thread's trace may end before this one)
    return sh


def end():
    sh = LOCAL.shadow
    LOCAL.shadow = None
    if sh is not None:
        with _TRACES_LOCK:
            _SHADOW[0] -= 1
        restore_installed(sh, check=False)
        if options_changed(sh) is not None:
            restore_options(sh)
        sh.training_writes = tuple((m, m.training) for m, before in sh.training.values() if m.training != before)
        for m, before in sh.training.values():
            m.training = before


# -- in-place ops while tracing --------------------------------------------------------------------

def tracing():
    return bool(_tracing._ACTIVE[0] and _tracing.TRACING.stack)


def commit_traced(self, result, through=False):
    """The in-place write `self <- result` inside a trace (see the module docstring)."""
    if result._dtype is not self._dtype and result._dtype._kind > self._dtype._kind:
        raise RuntimeError(f"result type {D.SCALAR_NAME[result._dtype]} can't be cast to the desired output type "
                           f"{D.SCALAR_NAME[self._dtype]}")
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    if result._dtype is not self._dtype:
        result = F.convert(result, self._dtype)
    if not isinstance(result, Proxy):
        # a value computed from concrete tensors alone (a creation function): make it a graph value
        result = F.clone(result) if isinstance(result, Tensor) else result
        if not isinstance(result, Proxy):
            result = _as_value(result)
    if isinstance(self, Proxy):
        fn_view = self.__dict__.get("_fn_view")
        if fn_view is not None and STATE.grad_enabled and _carries_grad(self):
            # a custom Function's output that is a view (or an input returned as is): torch's error
            raise RuntimeError(rebase_message(*fn_view))
        if not through:         # (a write through a view: its bases were marked with it)
            _mark_saved_written(self, result)
        if not STATE.grad_enabled and _carries_grad(self):
            # torch changes the data and keeps the value's gradient (y.mul_(3) under no_grad:
            # y's gradient stays that of y = x * 2); the trace has no value that is one
            # value's data with another's gradient, and the result computed under no_grad has none
            raise TraceError("an in-place op under no_grad on a value that requires grad is not traced yet")
        view = self.__dict__.get("_view")
        if view is not None:
            _check_view_of_leaf(self)
            if STATE.grad_enabled and not self.__dict__.get("_view_req", True) and view[1].name != "detach":
                root = view[0]
                while "_view" in root.__dict__:
                    root = root.__dict__["_view"][0]
                if _carries_grad(root):
                    # eager: its grad_fn is made only when something asks for it; until then it is
                    # a leaf that requires grad, and the write raises as torch's
                    raise TraceError("an in-place op on a view made before its base gained autograd history (b.mT "
                                     "taken, then b.copy_(x)) is not traced")
            if self.__dict__.get("_multi_view") and STATE.grad_enabled and (_carries_grad(self)
                                                                            or _carries_grad(result)):
                raise TraceError(MULTI_VIEW_MSG)
            base, prim, rest, params = view
            new_base = _scatter(base, result, prim, rest, params)
            commit_traced(base, new_base, True)
            self.__dict__["_view"] = (base, prim, rest, params)
            self.__dict__["_view_gen"] = base.__dict__.get("_gen", 0)
        _rebind(self, result)
        sh = active()
        if sh is not None:
            sh.first_write.setdefault(id(self), min(len(sh.graph.nx), sh.write_start))
        real = self.__dict__.get("_real")
        if real is not None:
            commit_traced(real, result, True)    # the base of a view of a real tensor: the tensor's write
        return self
    sh = active()
    if sh is None:
        raise TraceError("an in-place op on a tensor from outside the function while tracing")
    if self._base is not None:
        raise TraceError("an in-place op on a view of a tensor from outside the compiled function is not traced "
                         "yet (write to the tensor itself)")
    if self._req and self.grad_fn is not None:
        raise TraceError("an in-place op on a tensor from outside the compiled function that has autograd history")
    if id(self) in sh.created:
        # made inside the function (torch.tensor(...), arange, ...): each call makes a new one, while
        # a write-back would go to this one tensor, returned by every call
        raise TraceError("an in-place op on a tensor the function made with a creation function that is not traced "
                         "(tensor(data), arange, eye, ...); zeros, ones, full and empty are")
    now = sh.value(self)
    if not through:
        _mark_saved_written(None, result, [now.__dict__["_name"] if now is not None else
                                           sh.graph.__dict__.get("constants", {}).get(id(self))])
    sh.write(self, result)
    return self


def write_starts(t):
    """An in-place op on t begins (check_inplace): a first write of an argument is recorded
    where the op begins (the alias check of the call's arguments, Shadow.first_write)."""
    sh = active()
    if sh is not None:
        sh.write_start = len(sh.graph.nx)


def _mark_saved_written(proxy, result, roots=None):
    """torch's version counter, in the trace: an op that saved a value for its backward (mul
    its operands, exp its result) before that value, or one sharing its memory (a view, its
    base, another view of the base), was written in place, has a backward that raises in
    eager ("modified by an inplace operation"). Those ops are remembered (Shadow.stale_saves):
    a backward through one inside the trace runs eagerly (backward_in_trace), which raises; the
    compiled call's own backward raises when it runs, as _note_stale_readers's marks make it."""
    sh = active()
    if sh is None or result.__dict__["_graph"] is not sh.graph:
        return
    g = sh.graph
    G = g.nx
    if roots is None:
        roots, d = [], proxy.__dict__
        while True:
            roots.append(d["_name"])
            if "_view" not in d:
                real = d.get("_real")
                if real is not None:
                    now = sh.value(real)
                    roots.append(now.__dict__["_name"] if now is not None else
                                 g.__dict__.get("constants", {}).get(id(real)))
                break
            d = d["_view"][0].__dict__
    # the values that share memory with the written one: the views taken of them, and theirs
    alias, stack = set(), [r for r in roots if r is not None and r in G]
    while stack:
        w = stack.pop()
        if w in alias:
            continue
        alias.add(w)
        stack.extend(sh.same_memory.get(w, ()))
        for n in G._succ[w]:
            a = g[n]
            prim = a["prim"]
            # (detach() shares the memory and version counter too: pow(a.detach(), x) with a written
            # after raised eagerly and differentiated compiled)
            if a["op"] == "proj" or (prim is not None and a["args"] and a["args"][0] == w and (
                    prim.name == "detach" or prim.view and (prim.view is True or prim.view(a["params"])))):
                stack.append(n)
    res = result.__dict__["_name"]
    final = res if g[res]["op"] != "convert" else g[res]["args"][0]     # (commit_traced's cast)
    for w in alias:
        a = g[w]
        cands = [w] if a["prim"] is not None and a["prim"].saved_positions(len(a["args"]))[1] else []
        cands += [n for n in G._succ[w] if g[n]["prim"] is not None]
        for n in cands:
            if n in sh.stale_saves or n in sh.backwarded or not _value_carries_grad(g, n):
                continue
            a = g[n]
            args = a["args"]
            req = tuple(isinstance(x, str) and x in G and _value_carries_grad(g, x) for x in args)
            pos, out = a["prim"].saved_positions(len(args), req)
            hit = frozenset(i for i in pos if i < len(args) and args[i] == w)
            if not ((out and n == w) or hit):
                continue
            if n == final and n != w:
                # the write's own op (clamp_ reads the old value): eager keeps a copy of the old
                # value as the op's self, its first operand, alone; self passed again as another
                # operand (y.mul_(y)), or read by the other ops the write's result is computed
                # with, is saved as self, and the backward raises
                hit -= {0}
                if not hit:
                    continue
            elif n != w and n in alias:
                continue            # an earlier in-place op reading its old self, which eager saves as it was
            sh.stale_saves[n] = tuple(a["shape"])
            # and for a derivative taken after the call (the compiled call's backward): raised
            # when a gradient reaches a rule that reads the value (autodiff._refuse_stale_reads)
            if out and n == w:
                a["stale_out"] = a.get("stale_out", frozenset()) | {0}
            if hit:
                a["stale_args"] = a.get("stale_args", frozenset()) | hit
    # what a composite op's node saves for torch's version check alone (tracing.keep_saved)
    guarded = g.__dict__.get("guarded")
    for w in alias:
        cands = [(n, is_self) for n, is_self in guarded.get(w, ())] if guarded else []
        if g[w].get("guards_out") and g[w]["prim"] is not None:
            cands.append((w, False))
        for n, is_self in cands:
            if n in sh.stale_saves or n in sh.backwarded or not _value_carries_grad(g, n):
                continue
            if n == final and n != w and is_self:
                continue            # the write's own op: eager keeps its self as it was, as torch's copy
            if n != w and n in alias and is_self:
                continue
            sh.stale_saves[n] = tuple(g[n]["shape"])
            g[n]["stale_guard"] = True


def _carries_grad(proxy):
    """Whether a gradient reaches this traced value from an input that requires grad (not a
    value that backward() or grad() without create_graph made, its gradients and what they
    were computed from: those require none in eager, though the graph connects them to the
    inputs)."""
    g = proxy.__dict__["_graph"]
    return _value_carries_grad(g, value_of(g, proxy))


def _value_carries_grad(g, v):
    if v is None or v in g.__dict__.get("no_grad_values", ()):
        return False
    # differentiable_reach from the inputs that require grad, asked backwards from v and
    # remembered per value (a value's answer never changes once it is made): Proxy.requires_grad
    # asks it for every value the library's code branches on
    memo = g.__dict__.setdefault("carries_grad_memo", {})
    stack = [v]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        a = g[n]
        if a["op"] == "input":
            memo[n] = bool(a.get("requires_grad") or (isinstance(a.get("value"), Tensor) and a["value"]._req))
        elif a["op"] == "detach" or (a["prim"] is not None and a["prim"].vjp is None) or not carries_grad(a):
            memo[n] = False
        else:
            todo = [u for u in g.nx._pred[n] if u not in memo]
            if todo:
                stack.extend(todo)
                continue
            memo[n] = any(memo[u] for u in g.nx._pred[n])
        stack.pop()
    return memo[v]


STALE_SAVE_MSG = ("a value saved for the backward (by mul, exp, ...) is written in place before the backward runs; "
                  "eager autograd raises there (modified by an inplace operation)")


# torch raises for these (an output of split, chunk or unbind that requires grad, written in place
# or read after its base was): eager says so with torch's message
MULTI_VIEW_MSG = ("an output of split, chunk or unbind (a function that returns several views) of a value that "
                  "requires grad, written in place or read after its base was written in place")


def _check_written(p):
    """A tensor from outside written with a value that requires grad gets autograd history in
    eager (x.copy_(y): x's grad_fn is CopyBackwards); the write-back gives it data only."""
    if _carries_grad(p):
        raise TraceError("an in-place op that writes a value requiring grad into a tensor from outside the "
                         "compiled function (which gains autograd history) is not traced yet")


def _check_view_of_leaf(v):
    """torch's error for an in-place op, with grad mode on, on a view of a real leaf that
    requires grad (a parameter's row): raised by eager's check (autograd/views.py), which
    sees no Proxy view."""
    if not STATE.grad_enabled:
        return
    d = v.__dict__
    while "_view" in d:
        if d["_view"][1].name == "detach":
            return                          # a view made under no_grad (tracing.apply_symbolic)
        d = d["_view"][0].__dict__
    real = d.get("_real")
    if real is not None and real._req and real.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def _as_value(t):
    """A concrete tensor as a value of the graph being traced (an op on it)."""
    return apply_symbolic(P["detach"], (t,), {})


def _rebind(proxy, result):
    d = proxy.__dict__
    old, new = d["_name"], result.__dict__["_name"]
    if old is not None and old != new:
        _note_stale_readers(d["_graph"], old, new)
    d["_name"] = new
    d["_gen"] = d.get("_gen", 0) + 1
    sh = active()
    if sh is not None and old != new:
        # the old and the new value are one tensor's memory (_mark_saved_written)
        sh.same_memory.setdefault(old, set()).add(new)
        sh.same_memory.setdefault(new, set()).add(old)


def _note_stale_readers(graph, old, new):
    """Mark the ops recorded before an in-place write of `old` that read it: their derivatives
    read the value the write replaced, which torch refuses at backward ("modified by an
    inplace operation"), while the functional program would compute with the old value. An op
    that read it as argument i gets i in its attribute `stale_args`; the op that made it (exp,
    whose derivative reads its result) gets `stale_out`. autodiff makes the derivatives that
    read a marked value raise torch's error when they run. (Attributes, not names: the
    passes between trace and derivation rename values and keep attributes.)

    The write's own op is no reader of its first operand: an in-place op's derivative reads
    its self as it was (torch saves a clone, eager tracegrad a copy); of its other operands,
    and of the other ops its result is computed with, as eager, it is (y.mul_(y) raises)."""
    g = graph.nx
    if old not in g or new not in g:
        return
    final = new if g._node[new]["op"] != "convert" else g._node[new]["args"][0]     # (commit_traced's cast)
    for r in g._succ[old]:
        a = g._node[r]
        args = a["args"]
        pos = frozenset(i for i, x in enumerate(args) if x == old)
        if r == final:
            pos -= {0}                    # the op's self (y.mul_(y) reads its other operand as self)
        prim = a["prim"]
        if pos and prim is not None and (prim.saves or prim.needs):
            # what eager saves: x.sub_(x, alpha=2)'s mul(x, 2) saves no x, and runs (an op that
            # declares nothing, a custom Function's traced call, reads what its rule reads)
            req = tuple(isinstance(x, str) and x in g and _value_carries_grad(graph, x) for x in args)
            pos &= frozenset(prim.saved_positions(len(args), req)[0])
        if pos:
            a["stale_args"] = a.get("stale_args", frozenset()) | pos
    a = g._node[old]
    if a["op"] == "proj":
        a = g._node[a["args"][0]]
        a["stale_out"] = a.get("stale_out", frozenset()) | {g._node[old]["params"]["index"]}
    elif a["op"] != "input":
        a["stale_out"] = frozenset({0})


def _scatter(base, result, prim, rest, params):
    """base with the view (prim, rest, params) of it replaced by result."""
    if prim.name == "detach":           # the whole value, seen without its gradient
        if _carries_grad(base):
            raise TraceError("an in-place op through detach() (or on a view taken under no_grad) of a value that "
                             "requires grad is not traced yet")
        return result
    if prim.name == "getitem":
        return F.index_put_prim(base, result, [r for r in rest if isinstance(r, Tensor)], params["key"])
    # any other view: find its layout within the base on a scratch array, then as_strided_scatter
    scratch = np.empty(tuple(base.shape), D.float64.np)
    try:
        v = prim.impl(scratch, *rest, **params)
    except Exception:
        v = None
    if v is None or type(v) is not np.ndarray or not np.shares_memory(v, scratch):
        raise TraceError(f"an in-place op on a '{prim.name}' view inside a compiled function is not traced yet")
    item = scratch.itemsize
    if may_overlap(v.shape, v.strides, item):
        # eager writes a region of it where that region's elements are distinct, and raises
        # torch's error where they are not (an expanded tensor, overlapping unfold windows)
        raise TraceError(f"an in-place op through a '{prim.name}' view whose elements share memory is not traced")
    offset = (v.__array_interface__["data"][0] - scratch.__array_interface__["data"][0]) // item
    p = {"shape": tuple(v.shape), "strides": tuple(s // item for s in v.strides), "offset": offset}
    return apply(P["as_strided_scatter"], (base, result), p)


def traced_layouts(tensors):
    """Arrays with the layouts of `tensors` (traced values, or real tensors written in the
    trace) within the memory they share: a value and the views taken of it (in this trace, or
    of a real tensor) are views of one scratch array (of the real tensor's own array), so that
    an in-place op's operands can be checked for overlap with what it writes as eager checks
    them (ops.functional.check_operand_overlap). None for a value whose view cannot be laid
    out on an array."""
    bases = {}
    out = []
    for t in tensors:
        chain = []
        d = t.__dict__ if isinstance(t, Proxy) else None
        root = t
        while d is not None and "_view" in d:
            base, prim, rest, params = d["_view"]
            chain.append((prim, rest, params))
            root = base
            d = base.__dict__
        real = d.get("_real") if d is not None else root
        key = id(real) if real is not None else id(root)
        arr = bases.get(key)
        if arr is None:
            data = real._data if real is not None else None
            arr = data if data.__class__ is np.ndarray else np.empty(tuple(root.shape), D.float64.np)
            bases[key] = arr
        for prim, rest, params in reversed(chain):
            if any(isinstance(r, Tensor) for r in rest):
                arr = None              # a view indexed by a tensor's values
                break
            try:
                v = prim.impl(arr, *rest, **params)
            except Exception:         # noqa: BLE001  (a view no array can take: not judged)
                v = None
            if v.__class__ is not np.ndarray or not np.shares_memory(v, arr):
                arr = None
                break
            arr = v
        out.append(arr)
    return out


def may_overlap(shape, strides, itemsize):
    """Whether two elements of an array of `shape` and `strides` may share memory: the dims of
    more than one element, by their stride, must each step over all the smaller ones."""
    extent = itemsize
    for st, n in sorted((abs(st), n) for st, n in zip(strides, shape) if n > 1):
        if st < extent:
            return True
        extent += st * (n - 1)
    return False


def _sync_real(base):
    """The stand-in for a real tensor that views were taken of (tracing._apply_symbolic): bound
    to the tensor's value now, where the trace wrote the tensor since (not through it)."""
    d = base.__dict__
    sh = active()
    if sh is None:
        return
    now = sh.value(d["_real"])
    if now is not None and now.__dict__["_name"] != d["_name"]:
        _rebind(base, now)


def refresh_view(proxy):
    """A view read after its base was written through another alias: taken again from the base."""
    d = proxy.__dict__
    base, prim, rest, params = d["_view"]
    if "_real" in base.__dict__:
        _sync_real(base)
    refresh_base = base.__dict__.get("_view")
    if refresh_base is not None:
        refresh_view(base)
    if base.__dict__.get("_gen", 0) == d.get("_view_gen", 0):
        if d.get("_rebase_refused") and STATE.grad_enabled:
            raise TraceError(d["_rebase_refused"])
        return
    # eager: the view's grad_fn, asked for by an op under grad mode, raises torch's error for a
    # piece of split/chunk/unbind ("... is the output of a function that returns multiple views")
    # or a view taken under no_grad ("A view was created in no_grad mode and its base ... has been
    # modified inplace"); an op under no_grad asks for none, and the read in grad mode after it
    # still raises (mutation fuzzer seed 22073)
    refused = MULTI_VIEW_MSG if d.get("_multi_view") and _carries_grad(base) else \
        NO_GRAD_VIEW_READ_MSG if _no_grad_view_of_grad(proxy) else None
    if refused is not None:
        if STATE.grad_enabled:
            raise TraceError(refused)
        d["_rebase_refused"] = refused
    d["_view_gen"] = base.__dict__.get("_gen", 0)
    # taken again in the grad mode it was taken in, not its reader's: a view taken with grad on and
    # first read after the write under no_grad (v[:] = v checks v's shape so) was detached for good,
    # and what the function computed of it required no grad (mutation fuzzer seed 602403)
    mode, STATE.grad_enabled = STATE.grad_enabled, d.get("_view_grad", STATE.grad_enabled)
    try:
        v = apply_symbolic(prim, (base,) + tuple(rest), params)
    finally:
        STATE.grad_enabled = mode
    d["_name"] = v.__dict__["_name"]
    d["_gen"] = d.get("_gen", 0) + 1     # a new value: the views taken of this view are taken again too


NO_GRAD_VIEW_READ_MSG = ("a view taken under no_grad (or a view of one) of a value that requires grad, read with "
                         "grad mode on after its base was written in place, is not traced (eager raises torch's "
                         "error); take the view outside no_grad, or clone() it")


def _no_grad_view_of_grad(proxy):
    """Whether the view `proxy` is, or views, a view op taken under no_grad (tracing.apply_symbolic's
    detach after it) of a value that requires grad: torch's creation meta NO_GRAD_MODE, which a view
    of such a view inherits. A detach() the function called ends the chain (its result is no view
    for autograd). The base requires grad then or now (zeros viewed, then written by copy_(x * 2):
    torch asks its base when the view is read)."""
    o, no_grad, req = proxy, False, False
    while True:
        d = o.__dict__
        view = d.get("_view")
        if view is None:
            break
        if d.get("_no_grad_view"):
            inner = view[0].__dict__
            if "_view" in inner:
                no_grad = True
                req = req or bool(inner.get("_view_req"))
        elif view[1].name == "detach":
            return False
        o = view[0]
    return no_grad and (req or _carries_grad(o))


def finish(sh, leaves, proxies):
    """After the trace: the writes as extra outputs -> (values, write-back plan)."""
    outs, plan = [], []
    for k, (t, p) in enumerate(zip(leaves, proxies)):
        if p.__dict__["_name"] != p.__dict__.get("_orig_name", p.__dict__["_name"]):
            if t._req:
                raise TraceError("an in-place op on an input of the compiled function that requires grad is not "
                                 "traced yet")
            if t._base is not None:
                raise TraceError("an in-place op on an input that is a view is not traced yet")
            _check_written(p)
            outs.append(value_of(sh.graph, p.detach()))
            plan.append(("data", t, k))      # k: the argument's position, the tensor of each call
    for t, p in sh.data.values():
        _check_written(p)
        outs.append(value_of(sh.graph, p.detach()))
        plan.append(("data", t, None))
    for t, g, inplace in sh.grads.values():
        if g is None:
            plan.append(("grad_none", t, None))
        elif isinstance(g, Proxy):
            outs.append(value_of(sh.graph, g))
            plan.append(("grad", t, inplace))
        else:
            plan.append(("grad_set", t, g))
    for opt, p, st in sh.state.values():
        for k, holder in st.items():
            plan.append(("state", (opt, p, k), holder))
    return outs, plan


def _adoptable(a, old, dtype, adopted):
    """Whether the program's output array a may become a tensor's storage instead of being
    copied into old: a whole array of the tensor's dtype and layout that nothing else
    holds, replacing one that nothing but the tensor holds (no view, no .data alias)."""
    return (type(a) is np.ndarray and type(old) is np.ndarray and a.base is None and a.dtype == dtype.np
            and a.shape == old.shape and a.flags.c_contiguous and a.flags.writeable and id(a) not in adopted
            and old.base is None and old.flags.c_contiguous)
    # that nothing else holds old, write_back counts itself: a Python call's arguments count
    # once or twice, as the interpreter runs it (torch.compile's frame hook makes it twice)


def write_back(plan, arrays, input_ids=()):
    """Write the program's extra outputs into the real tensors (versions bumped, as in-place
    ops would). An output array takes the place of a storage no one else sees; else it
    is copied into it."""
    it = iter(arrays)
    adopted = set(input_ids)             # an input's array is never adopted by another tensor
    for kind, t, extra in plan:
        if kind in ("data", "grad") and hasattr(t._data, "_tg_device"):
            _write_back_device(kind, t, extra, next(it))
            continue
        if kind == "data":
            a = next(it)
            if hasattr(a, "_tg_device"):
                a = to_host(a)           # a CPU tensor (a step count) of a program run on the device
            if t._dtype is D.bfloat16:
                a = D.round_bfloat16(np.asarray(a, np.float32))
            old = t._data
            if a is old:
                pass                      # written in place by the program (a donated input)
            elif sys.getrefcount(old) <= 3 and _adoptable(a, old, t._dtype, adopted):
                # 3: the tensor's slot, `old`, getrefcount's argument
                t._data = a
                adopted.add(id(a))
            elif old.size:
                # (an argument with no elements writes nothing: an expand of one is a read-only
                # array, which np.copyto refuses even so)
                np.copyto(old, a, casting="unsafe")
            del old
            t._vc[0] += 1
        elif kind == "grad":
            a = next(it)
            if hasattr(a, "_tg_device"):
                a = to_host(a)
            if type(a) is not np.ndarray:
                a = np.asarray(a, t._dtype.np)
            if id(a) in adopted or a.base is not None:
                a = a.copy()
            adopted.add(id(a))
            g = t._grad
            if extra and g is not None and g._data.shape == a.shape:
                np.copyto(g._data, a, casting="unsafe")      # accumulated into the existing .grad, in place
                g._vc[0] += 1
            else:
                if t._data.__class__ is np.ndarray and not t._data.flags.c_contiguous:
                    a = grad_array_for(a, t._data)     # laid out as the leaf (torch's AccumulateGrad)
                t._grad = Tensor._make(a if a.dtype == t._dtype.np else a.astype(t._dtype.np), t._dtype)
        elif kind == "grad_none":
            t._grad = None
        elif kind == "grad_set":
            t._grad = extra
        elif kind == "state":
            opt, p, k = t
            st = opt.state[p]
            if st.get(k) is not extra:
                st[k] = extra


def _write_back_device(kind, t, extra, a):
    """write_back's entry for a CUDA tensor: the program's array is copied into the tensor's
    storage (views of it follow, as after eager in-place ops), never adopted; a new .grad gets
    a copy of its own (the program's array may also be an output the caller holds)."""
    if kind == "data":
        old = t._data
        if a is not old:
            old.t.copy_(a.t)
        t._vc[0] += 1
        return
    g = t._grad
    if extra and g is not None and tuple(g._data.shape) == tuple(a.shape) and hasattr(g._data, "_tg_device"):
        g._data.t.copy_(a.t)              # accumulated into the existing .grad, in place
        g._vc[0] += 1
    else:
        t._grad = Tensor._make(a.copy(), t._dtype)


def _resolved(plan, leaves):
    """The plan with each call's own argument in the entries that write one in place
    (("data", None, k): argument k, compile._writes)."""
    return [("data", leaves[e[2]], e[2]) if e[0] == "data" and e[1] is None else e for e in plan]


def write_back_function(plan, leaves=()):
    """write_back for one plan, as generated straight-line code: (arrays, input_ids, leaves)
    -> None. The same writes, adoptions and copies, without reading the plan at every call;
    where a target tensor's dtype is no longer the one the plan was made for, the plan is
    read by write_back itself. `leaves`: the arguments of the call the plan was made for
    (an entry ("data", None, k) writes into each call's argument k)."""
    lines, consts = [], {"_plan": plan, "_write_back": write_back, "_resolved": _resolved, "_ndarray": np.ndarray,
                         "_copyto": np.copyto, "_asarray": np.asarray, "_refs": sys.getrefcount,
                         "_make": Tensor._make, "_round_bf16": D.round_bfloat16, "_float32": np.float32,
                         "_grad_array_for": grad_array_for}

    def const(v):
        name = f"k{len(consts)}"
        consts[name] = v
        return name
    n = sum(kind in ("data", "grad") for kind, _, _ in plan)
    names = [f"a{i}" for i in range(n)]
    typed = []
    for j, (kind, t, extra) in enumerate(plan):
        if kind == "data" and t is None:
            lines.append(f"t{j} = leaves[{int(extra)}]")
            typed.append((f"t{j}", const(leaves[extra]._dtype), leaves[extra]))
        elif kind in ("data", "grad"):
            typed.append((const(t), const(t._dtype), t))
    if typed:
        lines.append("if " + " or ".join(f"{t}._dtype is not {dt}" for t, dt, _ in typed) + ":")
        lines.append("    return _write_back(_resolved(_plan, leaves), arrays, input_ids)")
    if names:
        lines.append(f"{', '.join(names)}, = arrays")
        # (a program run on the device: write_back itself)
        lines.append("if " + " or ".join(f"{a}.__class__ is not _ndarray" for a in names) + ":")
        lines.append("    return _write_back(_resolved(_plan, leaves), arrays, input_ids)")
    lines.append("adopted = set(input_ids)             # an input's array is never adopted by another tensor")
    k = 0
    for kind, t, extra in plan:
        if kind in ("data", "grad"):
            a = names[k]
            tn, dt, t = typed[k]
            k += 1
            npd = const(t._dtype.np)
        if kind == "data":
            if t._dtype is D.bfloat16:
                lines.append(f"{a} = _round_bf16(_asarray({a}, _float32))")
            # what _adoptable tests, written out (carray: C-contiguous, writeable and aligned);
            # getrefcount: the tensor's slot, `old`, its argument
            lines += [f"old = {tn}._data",
                      f"if {a} is not old:",
                      f"    if ({a}.__class__ is _ndarray and old.__class__ is _ndarray and {a}.base is None and "
                      f"{a}.dtype == {npd} and {a}.shape == old.shape and {a}.flags.carray and "
                      f"id({a}) not in adopted and old.base is None and "
                      f"old.flags.c_contiguous and _refs(old) <= 3):",
                      f"        {tn}._data = {a}",
                      f"        adopted.add(id({a}))",
                      f"    elif old.size:           # (no elements: an expand of one is read-only)",
                      f"        _copyto(old, {a}, casting='unsafe')",
                      "old = None",
                      f"{tn}._vc[0] += 1"]
        elif kind == "grad":
            lines += [f"if {a}.__class__ is not _ndarray:",
                      f"    {a} = _asarray({a}, {npd})",
                      f"if id({a}) in adopted or {a}.base is not None:",
                      f"    {a} = {a}.copy()",
                      f"adopted.add(id({a}))"]
            # a leaf not in C order: its new .grad laid out as the leaf (torch's AccumulateGrad)
            new = [f"if {tn}._data.__class__ is _ndarray and not {tn}._data.flags.c_contiguous:",
                   f"    {a} = _grad_array_for({a}, {tn}._data)",
                   f"{tn}._grad = _make({a} if {a}.dtype == {npd} else {a}.astype({npd}), {dt})"]
            if extra:
                lines += [f"g = {tn}._grad",
                          f"if g is not None and g._data.shape == {a}.shape:",
                          f"    _copyto(g._data, {a}, casting='unsafe')      # accumulated into the .grad, in place",
                          "    g._vc[0] += 1",
                          "else:"] + ["    " + line for line in new] + ["g = None"]
            else:
                lines += new
        elif kind == "grad_none":
            lines.append(f"{const(t)}._grad = None")
        elif kind == "grad_set":
            lines.append(f"{const(t)}._grad = {const(extra)}")
        elif kind == "state":
            opt, p, key = t
            lines += [f"st = {const(opt)}.state[{const(p)}]",
                      f"if st.get({const(key)}) is not {const(extra)}:",
                      f"    st[{const(key)}] = {const(extra)}"]
        else:
            raise AssertionError(f"write-back plan entry of unknown kind {kind!r}")
    src = "\n".join(["def write_back_plan(arrays, input_ids, leaves=()):"] + [f"    {line}" for line in lines])
    exec(compile(src, "<tracegrad:write_back>", "exec"), consts)
    fn = consts.pop("write_back_plan")     # not kept in its own namespace: no cycle to wait for the collector
    fn.source = src
    return fn


# -- backward() while tracing ----------------------------------------------------------------------

def _grad_sources(sh):
    """{input value: real tensor (None: history recorded outside)} of the trace's values that
    gradients flow from: the leaves that require grad, as eager autograd has them."""
    graph = sh.graph
    sources = {name: t for t, name in sh.leaf_values.values()}
    for p, v0, t in sh.inputs:
        if t._req and t.grad_fn is None and p.__dict__["_name"] == v0:
            sources[v0] = t
    for v in graph.inputs:
        a = graph[v]
        if a["role"] == "const" and isinstance(a.get("value"), Tensor) and a["value"]._req \
                and a["value"].grad_fn is not None:
            sources.setdefault(v, None)        # history recorded outside: found below if reached
    return sources


def returned_graphs(sh, outputs):
    """What eager returns with the graph of each output of a function that called backward():
    (kept, freed). kept: the ids of the outputs whose graph no backward freed (retain_graph=True,
    or a value the backward did not go through). freed: {id(output): sources} for those whose
    graph a backward freed (`loss` after `loss.backward()`): they require grad, and a second
    backward through them raises. The sources are the tensors from outside the trace that the
    output's graph starts from, each ("arg", k), the call's k-th argument, or ("const", tensor),
    a tensor the function read (a parameter)."""
    graph = sh.graph
    sources = _grad_sources(sh)
    reach = differentiable_reach(graph, list(sources))
    args = {v0: k for k, (_, v0, _) in enumerate(sh.inputs)}
    sub = None
    kept, freed = set(), {}
    for t in outputs:
        if not isinstance(t, Proxy) or t.__dict__["_graph"] is not graph:
            continue
        v = value_of(graph, t)
        if v is None or v not in reach:
            continue
        if v not in sh.backwarded:
            kept.add(id(t))
            continue
        if sub is None:
            sub = graph.nx.subgraph(reach)
        srcs = []
        for s in sorted(nx.ancestors(sub, v) & sources.keys(), key=str):
            if s in args:
                srcs.append(("arg", args[s]))
                continue
            real = sources[s] if sources[s] is not None else graph[s].get("value")
            if not isinstance(real, Tensor) or isinstance(real, Proxy):
                break                   # a source the call cannot name: no grad_fn given
            srcs.append(("const", real))
        else:
            if srcs:
                freed[id(t)] = tuple(srcs)
    return kept, freed


def backward_in_trace(outputs, grad_tensors, retain_graph, create_graph, inputs):
    """`Tensor.backward` on symbolic values: the backward graph of what was traced so far,
    traced into the same graph, its gradients accumulated into the leaves' symbolic .grad."""
    sh = active()
    if sh is None:
        raise TraceError("backward() on symbolic tensors outside a compiled function's trace")
    if create_graph:
        raise TraceError("backward(create_graph=True) inside a compiled function is not traced yet")
    graph = sh.graph
    for t in outputs:
        if isinstance(t, Proxy) and t.__dict__["_graph"] is not graph:
            raise TraceError("backward() across two traced graphs")
    sources = _grad_sources(sh)
    reach = differentiable_reach(graph, list(sources))
    outs = []
    for i, t in enumerate(outputs):
        v = value_of(graph, t) if isinstance(t, Tensor) else None
        if v is None or v not in reach or not t.dtype.is_floating_point:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        outs.append(v)
    seeds = _seeds(outputs, list(grad_tensors or ()), False, "grad_tensors",
                   ones=lambda o: F.full(tuple(o.shape), 1.0, dtype=o.dtype))
    # what the backward goes through: the values the outputs come from along differentiable
    # edges (as torch's grad_fn graph), not through a detach (a GAN's generator, behind
    # `fake.detach()` in the discriminator's loss, is neither differentiated nor freed)
    sub = graph.nx.subgraph(reach)
    up = set(outs)
    for o in outs:
        up |= nx.ancestors(sub, o)
    wrt = [v for v in sources if v in up]
    for v in wrt:
        if sources[v] is None:
            raise TraceError("backward() inside a compiled function into autograd history recorded outside it is "
                             "not traced yet")
    ops = {n for n in up if graph[n]["op"] != "input" and n in reach}
    if ops & sh.backwarded:
        raise RuntimeError(FREED_MSG)
    if any(n in sh.stale_saves for n in ops):
        raise TraceError(STALE_SAVE_MSG)
    targets = [sources[v] for v in wrt]
    args = {id(t) for _, _, t in sh.inputs}
    if any(id(t) in args for t in targets):
        raise TraceError("backward() inside a compiled function into the .grad of one of its arguments is not traced "
                         "yet (each call may pass another tensor): parameters read from a module or closure are")
    if inputs is not None:
        keep = {id(t) for t in inputs}
        pairs = [(v, t) for v, t in zip(wrt, targets) if id(t) in keep]
        wrt, targets = [v for v, _ in pairs], [t for _, t in pairs]
    for t in targets:
        sh.targets[id(t)] = t
        if not hook_free(t):
            hints = {getattr(h, "trace_hint", None) for h in (t._hooks or {}).values()} - {None}
            raise TraceError("a hook on a leaf that backward() inside a compiled function reaches is not traced yet" +
                             "".join(f" ({h})" for h in sorted(hints)))
    if not wrt:
        return
    bwd = derive(graph, outs, wrt)
    for n in bwd.nodes():
        a = bwd[n]
        if a["op"] == "input" and a["role"] in ("ctx", "hook"):
            raise TraceError("backward() through a custom autograd.Function or hook that calls Python")
        if a["op"] != "input" and a["prim"] is not None and a["prim"].eager:
            raise TraceError("backward() through an op that runs eagerly inside a traced function")
    args = backward_args(bwd, seeds, lambda v, a: Proxy.make(graph, v, a["shape"], a["dtype"]))
    before = set(graph.nx) if not create_graph else None
    res = run_eager(bwd, args)
    if before is not None:
        mark_no_grad(graph, before)
    if not retain_graph:
        sh.backwarded |= ops
    sh.did_backward = True
    for t, g in zip(targets, res):
        if g is None:
            continue
        g = g.detach()
        cur = sh.get_grad(t)
        if cur is None:
            sh.set_grad(t, g, False)
        else:
            inplace = sh.grad_inplace(t)
            new = cur + g
            if new.dtype is not t.dtype:
                new = F.convert(new, t.dtype)
            sh.set_grad(t, new, inplace)


_tracing.Above.refresh_view = refresh_view        # a Proxy view whose base was written
_tracing.Above.carries_grad = _carries_grad       # Proxy.requires_grad, asked by the user's code
_tracing.Above.no_grad_view_of_grad = _no_grad_view_of_grad     # an op reading it with grad mode on

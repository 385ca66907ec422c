"""@compile: guards -> trace -> autodiff -> passes -> partition -> codegen -> cache.

The first call with a new guard key traces the function with symbolic tensors into
the IR, checks it with the verifier, runs the forward pass pipeline, derives the
backward graph when an input requires grad, partitions the two (what the forward
saves, what the backward recomputes), generates numpy code for both and caches the
program. Every call then runs the generated forward; when grad is needed its outputs
share one grad_fn node (`CompiledFunctionBackward`) whose derivative is a run-time
call of the generated backward, so eager autograd (backward, autograd.grad, hooks,
retain_graph) works through it. Under create_graph=True that call is itself a compiled
program: the backward as a function of (output grads, inputs), recomputing the forward,
with its own grad_fn, so second and third derivatives run generated code too.

Code that cannot be traced runs eagerly, with one warning naming the line; so does,
from the start, a function with a Python side effect (runtime/side_effects.py reads
its bytecode before the first trace). An error of the function's own raises as itself.
"""
import builtins
import contextlib
import functools
import os
import sys
import traceback
import types
import warnings
import weakref

import networkx
import numpy as np

from . import _dtype as D
from .grad_mode import STATE, no_grad
from .tensor import Tensor, begin_value_reads, end_value_reads, UNTRACKED_WRITES, untracked_writes_since, \
    device as _device
from ._collect import paused
from .ir.graph import Graph, V
from .tracing import Proxy, TraceError, trace, proxy_input, apply, TRACING, TRACE_DEVICE, _ACTIVE, _DUAL, \
    user_file, _ANOMALY, _ANOMALY_NAN, next_node_seq, dense_layout, copy_laid_out
from .ir.layout import order_attr, tensor_order, array_order
from .ir.verify import verify
from .ops.lowering import Refuse, identity
from .ops.primitives import Primitive, PRIMITIVES as P, matmul_reshaped
from .ops.functional import detach, _matmul_copies
from .runtime.guards import LEAF, _Struct, flatten, unflatten, guard_key
from .runtime.side_effects import SideEffects
from .runtime.sources import Guard, build_guards, canonical
from .runtime.cache import ProgramCache
from .runtime.class_version import ClassVersion
from .autograd.graph import (Node, Saved, saved_tensors_hooks_active, _HOOK_USERS as _SAVED_HOOKS,
                              hidden_saved_tensors_hooks, node_class,
                             MODULE_BACKWARD_HOOKS as _MODULE_HOOKS)
from .autograd.engine import FREED_MSG, _check_version, unpack as _unpack_saved
from .autograd.engine import forget
from .nn.modules.module import Module
from .optim.optimizer import Optimizer
from ._tensor_str import PRINT_OPTS
from .autograd import WARN_ALWAYS
from . import functionalize, creation, chain
from .autodiff import derive, differentiable_reach, carries_grad, backward_args, DerivativeError, needed_values
from .codegen.numpy_cpu import compile_graph
from .ir import symbolic
from .cuda import CudaArray
from .interpret import run_eager


class CompileError(RuntimeError):
    """Raised by fullgraph=True where the function cannot be traced whole."""


class Untraceable(TraceError):
    """Tracing failed inside the user's function (e.g. an in-place op on a symbolic value)."""


# -- the program ---------------------------------------------------------------------------------

class Program:
    """One compiled specialisation: its IR at every stage, generated functions and bindings."""
    out_freed = ()                    # a whole step's outputs whose graph its backward freed
    out_orders = ()                   # (output, memory order) where eager's result is not C-contiguous
    out_c = ()                        # outputs eager lays out C-contiguous (numpy's reduce may not)
    out_strided = ()                  # (output, strides) of views eager takes of a larger value
    chain = None                      # what follows its calls (chain.Record), once a create_graph backward ran

    def __init__(self, name, keep_stages=False):
        self.__name__ = name
        self.stages = []              # (header, graph or text) for explain and TRACEGRAD_DEBUG
        # Each stage's graph is a copy of the program (a 10,000-op chain: ~15 graphs, a million
        # objects the cyclic collector walks on every full collection from then on): kept only
        # for explain and TRACEGRAD_DEBUG=2; the traced IR (the first stage, which the demo shows)
        # and the generated sources (plain strings) always.
        self.keep_stages = keep_stages
        self.backward_keys = set()    # the engine's cached backwards that refer to this program
        self.evicted = False
        # ids of the tensors the function read besides its arguments (globals, parameters):
        # a call that passes one of them as an argument runs eagerly (CompiledFunction._arg_is_read)
        self.read_ids = None

    def release(self):
        """Called when the program leaves its function's cache: what refers to it from
        elsewhere (the engine's cached backwards of graphs through its calls; the program
        of its create_graph backward, and theirs) lets go, so it is freed once the
        tensors of its calls are."""
        self.evicted = True
        forget(self)
        self.chain = None             # (its record's last run holds it)
        double = self.__dict__.get("double")
        if double is not None:
            double.cache.clear()

    def __repr__(self):
        return f"<compiled program {self.__name__}>"

    def stage(self, header, obj):
        """Keep a stage's output (a graph, a partition or source text), printed on demand."""
        if self.keep_stages or isinstance(obj, str) or not self.stages:
            self.stages.append((header, obj))


def _render(obj):
    return obj.describe() if hasattr(obj, "describe") else str(obj)


def _debug():
    """TRACEGRAD_DEBUG=1 prints the generated source of each compiled program; 2 every stage."""
    v = os.environ.get("TRACEGRAD_DEBUG", "")
    return int(v) if v.isdigit() else (1 if v else 0)


_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep


def _user_frame(tb):
    """The innermost traceback frame in the user's code (outside the tracegrad package, and
    outside numpy, which tracegrad's ops call: an op that handed a symbolic value to numpy
    fails in numpy's frames, and the line to name is the user's call of the op), or None
    where the whole traceback is tracegrad's (a library module compiled as it is)."""
    found = None
    for fs in traceback.extract_tb(tb):
        if user_file(fs.filename) and not os.path.abspath(fs.filename).startswith(_NUMPY_DIR):
            found = fs
    return found


def _caller_frame():
    """The user's line that called the compiled function: the innermost frame on the
    stack outside tracegrad."""
    f = sys._getframe(1)
    while f is not None and not user_file(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return None
    return traceback.FrameSummary(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)


def _library_context(tb):
    """`nn.Dropout` where the innermost module forward a failing trace ran is tracegrad's own."""
    name = None
    while tb is not None:
        f = tb.tb_frame
        if f.f_code.co_name == "forward" and isinstance(f.f_locals.get("self"), Module):
            name = type(f.f_locals["self"]).__name__
        tb = tb.tb_next
    return f" (in nn.{name})" if name else ""


def trace_function(fn, args, kwargs, name, value_reads=None):
    """Trace fn on Proxies for the tensors of (args, kwargs) -> (graph, leaves, out_spec, out_leaves).
    Concrete tensors whose values the function reads in Python (`.item()`, `bool()`) are noted
    in `value_reads` ({id: version}): the trace baked those values in."""
    return _trace_with_writes(fn, args, kwargs, name, value_reads)[:4]


_NOT_BEGUN = object()


def _trace_with_writes(fn, args, kwargs, name, value_reads=None, dyn=()):
    """trace_function, and the record of the writes the function made (functionalize.Shadow).
    `dyn`: (leaf position, dim) pairs traced as symbolic sizes of the active ShapeEnv."""
    leaves = []
    spec = flatten((args, kwargs), leaves)
    shapes = [tuple(t.shape) for t in leaves]
    if dyn:
        senv = symbolic.current()
        for i, d in sorted(dyn):
            s = shapes[i]
            shapes[i] = s[:d] + (senv.symbol(s[d], (i, d)),) + s[d + 1:]
    g = Graph(_ident(name))
    devices = {t.device for t in leaves if isinstance(t, Tensor)}
    if len(devices) == 1 and next(iter(devices)).type != "cpu":
        TRACE_DEVICE[id(g)] = next(iter(devices))
    settings = _settings()
    entered = STATE.inference_entered
    grad_entered = STATE.grad_entered
    gen = creation.RNG.gen
    sh = functionalize.begin(g)   # writes (in-place ops, .grad, optimizer steps) are recorded
    reads = _NOT_BEGUN
    try:
        replaced = _replaced_tensor_method()
        if replaced is not None:
            raise TraceError(f"tracegrad.Tensor.{replaced} is replaced (a patch after import): the trace's symbolic "
                             f"values answer {replaced} with their own version, not the replacement")
        creation.RNG.gen = _NoRandom()       # a random draw while tracing would be baked in as a constant
        reads = begin_value_reads(value_reads if value_reads is not None else {})
        with trace(g):
            # the memory order of each argument that requires grad, which matmul's derivative
            # asks (ir/layout.py; eager autograd knows its leaves' orders, and takes other
            # tensors as C-contiguous)
            proxies = [proxy_input(g, s, t.dtype, requires_grad=t.requires_grad,
                                   **(order_attr(tensor_order(t), tuple(t.shape)) if t.requires_grad else {}))
                       for t, s in zip(leaves, shapes)]
            for i, (t, px) in enumerate(zip(leaves, proxies)):
                if t.__class__ is not Tensor and not Proxy.of_class(px, t.__class__):
                    raise TraceError(f"an argument of class {t.__class__.__qualname__} (a Tensor subclass with "
                                     f"slots of its own) has no symbolic stand-in")
                px.__dict__["_orig_name"] = px.__dict__["_name"]
                # an inference tensor's in-place ops raise as eager's do; the Python attributes
                # set on the argument are its own, which the trace does not read (Proxy.__getattr__)
                px._inference = t._inference
                if t.__dict__:
                    px.__dict__["_arg_attrs"] = frozenset(t.__dict__)
                if t.requires_grad and t.grad_fn is not None:
                    px.__dict__["_nonleaf_arg"] = True     # a leaf in the trace, not to the caller
                d = t._data
                if d.__class__ is np.ndarray and not d.flags.c_contiguous and d.itemsize:
                    # its strides, in elements, for a view's check (Proxy._eager_scratch)
                    px.__dict__["_arg_strides"] = (i, tuple(s // d.itemsize for s in d.strides))
                sh.inputs.append((px, px.__dict__["_name"], t))
            # a tensor passed twice is one value, as in eager (`a is b`, a write through one
            # read through the other); the call's key holds which arguments are the same tensor
            seen = {}
            same = [proxies[seen.setdefault(id(t), i)] for i, t in enumerate(leaves)]
            a, k = unflatten(spec, iter(same))
            out = fn(*a, **k)
            functionalize.restore_installed(sh)
            changed = functionalize.options_changed(sh)
            if changed is not None:
                # set once by the trace, never by the program; and the program reads the
                # learning rates before the function would set them (undone in end())
                if changed.endswith(".state"):
                    raise TraceError(f"the function changes {changed} in Python (a custom optimizer's step() "
                                     f"making its state) while it is traced; a program would not change it again "
                                     f"at later calls (once the state exists, a step that updates it in place "
                                     f"compiles)")
                raise TraceError(f"the function changes {changed} (an optimizer's options, set in Python: an "
                                 f"lr_scheduler's step() or a write to the group) while it is traced; a program "
                                 f"would not change it again at later calls. Change the options outside the "
                                 f"compiled function (the learning rate is read at every call)")
            if _settings() != settings:
                # a program would not change them on later calls
                raise TraceError("the function leaves a setting of the process changed (grad mode, inference mode, "
                                 "the default dtype, the float32 matmul precision, anomaly detection, print "
                                 "options, warn_always: set_grad_enabled or set_default_dtype without restoring "
                                 "it, say); a program would not change it again at later calls")
            if STATE.grad_entered != grad_entered and not settings[0]:
                # its values would need grad_fns, which a program built under no_grad does not give
                raise TraceError("enable_grad (or set_grad_enabled(True)) inside a compiled function called under "
                                 "no_grad is not traced yet")
            if STATE.inference_entered != entered and not settings[1]:
                # its values would be inference tensors, which the program's outputs are not
                raise TraceError("inference_mode inside a compiled function is not traced yet")
            out_leaves = []
            out_spec = flatten(out, out_leaves)
            _check_returned(out_spec)
            for o in out_leaves:
                if isinstance(o, Proxy) and "_view" in o.__dict__:
                    functionalize.refresh_view(o)     # a view returned after its base was written
            sh.extra, sh.plan = functionalize.finish(sh, leaves, proxies)
    except Exception as e:
        # the function runs eagerly: whatever the options its programs would read at every
        # call (functionalize.install_options) are at later calls
        if not getattr(e, "exempt", None) and sh.option_reads is not None:
            try:
                e.exempt = frozenset(sh.option_reads.exempt)
            except AttributeError:
                pass              # an exception class without a __dict__: the options stay guarded
        raise
    finally:
        TRACE_DEVICE.pop(id(g), None)
        functionalize.end()
        creation.RNG.gen = gen
        if reads is not _NOT_BEGUN:
            end_value_reads(reads)
        # the trace leaves no global mode changed: a fallback's eager run starts where the call did
        STATE.grad_enabled, STATE.inference = settings[:2]
        D.set_default_dtype(settings[2])
        D.set_float32_matmul_precision(settings[3])
    return g, leaves, out_spec, out_leaves, sh


def _out_layouts(p, out_px):
    """How run_program lays out the outputs the program computes (no view of an argument, of
    another output or of a .grad, which are taken again after the call), as eager lays them out:
    - (output, order) of those eager lays out in another order than C's (an elementwise op of a
      transposed argument, a value written in place through a transposed view);
    - the outputs eager lays out C-contiguous, which numpy's kernels may not (a sum over the last
      dim of x + y.mT is C-contiguous in eager, not in numpy).
    A later reshape or view of an output then copies or raises as eager's."""
    again = {t[0] for t in p.out_views} | {k for k, _ in p.out_same} | {t[0] for t in p.out_grads_after}
    orders, plain, strided = [], [], []
    for k, o in enumerate(out_px):
        if k in again:
            continue
        if o._plain():
            if len(o._shape):
                plain.append(k)
            continue
        a = o._eager_scratch()
        if a is None:
            continue
        if a.flags.c_contiguous:
            # a view eager keeps C-contiguous, of a value the passes may have made an argument's
            # array: (y * 1).expand_as(y) of an expanded y was returned with y's stride 0
            if len(o._shape):
                plain.append(k)
            continue
        order = array_order(a.shape, a.strides)
        if order is not None:
            orders.append((k, order))
        elif a.size and 0 not in a.strides and min(a.strides) > 0 and \
                all(n.__class__ is int for n in o._shape):
            # a view of a value the function made (y.diagonal(), y[:, 1], y[:, ::2] of y = x * 2):
            # eager's has the strides of that view into y, the program's value is its own array
            strided.append((k, tuple(a.strides)))
    p.out_strided = tuple(strided)
    return tuple(orders), tuple(plain)


def _strided_as(a, strides):
    """Array a with these strides (in elements, all positive, no overlap), over a buffer of its
    own where a has others: the strides of eager's view of a larger value."""
    if a.__class__ is not np.ndarray:
        return a
    item = a.itemsize
    want = tuple(st * item for st in strides)
    if a.strides == want:
        return a
    span = 1 + sum((n - 1) * st for n, st in zip(a.shape, strides))
    out = np.lib.stride_tricks.as_strided(np.empty(span, a.dtype), a.shape, want)
    np.copyto(out, a)
    return out


def _laid_out(a, order):
    """Array a in the dense layout of `order` (a copy where it is laid out otherwise)."""
    if a.__class__ is not np.ndarray or not a.itemsize or any(st % a.itemsize for st in a.strides) or \
            array_order(a.shape, tuple(st // a.itemsize for st in a.strides)) == order:
        return a
    return copy_laid_out(a, dense_layout(a.shape, order))


_PLAIN = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), slice, range, D.dtype, np.generic,
          np.dtype, type)


def _check_returned(spec):
    """A program gives back tensors, Python values and the containers flatten rebuilds at every
    call; any other object the function returns (a dataclass, a generator, a closure, an object
    holding a traced value) would be the trace's own object, returned again at every call."""
    if spec is LEAF:
        return
    t = type(spec)
    if t is tuple and spec and (spec[0] in (tuple, list, dict) and len(spec) == 2 or spec[0] is _Struct):
        for item in spec[-1]:
            _check_returned(item[1] if spec[0] is dict else item)
        return
    if isinstance(spec, _PLAIN + (_device, symbolic.Sym, Module, Optimizer)) or \
            isinstance(spec, (tuple, frozenset)) and all(isinstance(x, _PLAIN + (symbolic.Sym,)) for x in spec):
        return
    if t is functionalize._Option:
        spec._read()              # an optimizer's option, which the program reads at every call
    raise TraceError(f"the function returns a {t.__qualname__} object; a program gives back tensors, Python "
                     f"numbers and strings, and tuples, lists, dicts and namedtuples of them, made anew at every call")


_SYMBOLIC_OWN = []       # (name, Tensor's attribute once tracegrad is imported) of those Proxy answers itself
_TENSOR_AS_IMPORTED = []


def note_tensor_methods():
    """Called once tracegrad is imported: Tensor's attributes that a trace's symbolic values
    (Proxy) answer with their own version (size, numel, detach, item, ...)."""
    d = vars(Tensor)
    _SYMBOLIC_OWN[:] = [(n, d[n]) for n in vars(Proxy) if n in d and n not in ("__module__", "__doc__", "__slots__")]
    _TENSOR_AS_IMPORTED[:] = [ClassVersion(Tensor)]


def _replaced_tensor_method():
    """The name of such an attribute replaced on Tensor since (eager runs the replacement, a
    trace would not), or None."""
    if not _TENSOR_AS_IMPORTED or _TENSOR_AS_IMPORTED[0].same():
        return None
    d = vars(Tensor)
    for name, v in _SYMBOLIC_OWN:
        if d.get(name) is not v:
            return name
    return None


def _settings():
    """The process's settings a function could change (and a program would not change again):
    grad mode, inference mode, the default dtype and the float32 matmul precision (which a
    trace puts back as it found them), anomaly detection, print options, warn_always."""
    return (STATE.grad_enabled, STATE.inference, D.get_default_dtype(), D.get_float32_matmul_precision(),
            _ANOMALY[0], _ANOMALY_NAN[0], tuple(vars(PRINT_OPTS).items()), WARN_ALWAYS[0])


class _NoRandom:
    """Stands in for the random generator while tracing: random ops (dropout, randn inside
    the function) are not traced yet, so they make the function run eagerly."""

    def __getattr__(self, name):
        raise TraceError("random numbers (dropout, rand*) inside a compiled function are not traced yet")


def build(fn, args, kwargs, name, backend, value_reads=None, keep_stages=False, dyn=None):
    """A program for the call. With `dyn` ((leaf position, dim) pairs), those sizes are
    symbolic (ir/symbolic.py): the program serves every call whose sizes pass the guards its
    build recorded (`p.sym_check`, a function of the call's leaves); `dyn` may hold no pair
    where the dims that changed before are 0 or 1 now (then the check pins them)."""
    with paused(promote=True):
        if dyn is None:
            return _build(fn, args, kwargs, name, backend, value_reads, keep_stages or _debug() >= 2)
        senv = symbolic.ShapeEnv()
        with senv:
            p = _build(fn, args, kwargs, name, backend, value_reads, keep_stages or _debug() >= 2, dyn[0])
        senv.fixed = dyn[1]
        p.sym_check = senv.compile_check()
        p.sym_sources = [(n, src) for n, _, src in senv.symbols]
        p.sym_static = senv.specialized()
        return p


def _sym_values(p, inputs):
    """{symbol: its value in this call} of a dynamic program, from the call's leaves
    (or the inputs of its grad_fn node, whose first ones are the leaves)."""
    return {n: inputs[i].shape[d] for n, (i, d) in p.sym_sources}


def _bind_folded(g):
    """Folded constants as tensors: fold_constants leaves each one's array in its input's
    `value` (passes know no Tensor); programs bind constants as tensors, as they bind the
    ones the function read."""
    for v in g.inputs:
        a = g[v]
        if a.get("folded") and type(a["value"]) is np.ndarray:
            a["value"] = Tensor._make(a["value"], a["dtype"])


def _build(fn, args, kwargs, name, backend, value_reads=None, keep_stages=False, dyn=()):
    # deferred: import tracegrad does not load tracegrad.passes
    from .passes import FORWARD_PIPELINE, BACKWARD_PIPELINE, RECOMPUTED_PIPELINE, partition, \
        decompose_derivative_ops, share_forward_masks
    p = Program(name, keep_stages)
    p.double = None
    p.backend = backend
    p.sym_check = p.sym_sources = None
    dynamic = symbolic.current() is not None
    try:
        g, leaves, out_spec, out_leaves, sh = _trace_with_writes(fn, args, kwargs, name, value_reads, dyn)
    except TraceError:
        raise
    except Exception as e:        # an op or Python construct the symbolic trace does not support
        u = Untraceable(f"{type(e).__name__}: {e}")
        u.exempt = getattr(e, "exempt", frozenset())
        raise u.with_traceback(e.__traceback__) from e
    p.layout_reads = g.__dict__.get("layout_reads")
    # inputs of the call: the argument tensors, then the concrete tensors the function
    # read (constants; module parameters among them), read afresh at every call
    n_args = len(leaves)
    p.n_args = n_args
    p.out_spec = out_spec
    last_use = _last_uses(g, out_leaves) if sh.first_write else None
    read = list(leaves) + [g[v].get("value") for v in g.inputs[n_args:]]
    if len({t._data.__class__ for t in read if isinstance(t, Tensor) and t._data.ndim}) > 1:
        # the trace follows no devices: run the function, whose ops raise torch's error (or mix as it allows)
        raise Untraceable("tensors on different devices (cpu and cuda) in one call")
    outputs, out_consts = [], []
    # outputs that are an argument itself, or an output given before: the same tensor object,
    # as the function returns it (`return x`, `x.add_(1); return x`, `return y, y`)
    first = {id(px): ("arg", k) for k, (px, _, _) in enumerate(sh.inputs)}
    p.out_same = []
    p.out_views = []
    # outputs that are a real tensor's .grad as the function leaves it, or a view of it: that
    # .grad tensor after the write-back (or the view taken again of it), as eager returns it
    grads_now = {id(e[1]): ("arg", e[0]) for e in sh.grads.values() if isinstance(e[1], Proxy)}
    p.out_grads_after = []
    kept, freed = functionalize.returned_graphs(sh, out_leaves) if sh.did_backward else ((), {})
    p.out_freed = []
    out_px = []
    for o in out_leaves:
        if isinstance(o, Proxy):
            src = first.get(id(o))
            if src is not None:
                p.out_same.append((len(outputs), src))
            else:
                first[id(o)] = ("out", len(outputs))
                chain = _view_of_argument(o, first)
                if chain is not None:
                    p.out_views.append((len(outputs), "arg") + chain)
                elif (chain := _view_of_argument(o, first, "out")) is not None:
                    # a view of an output given before (`return y, y[1:]`): taken again of that
                    # output, so that an in-place op on one reaches the other's graph, as in eager
                    p.out_views.append((len(outputs), "out") + chain)
                elif grads_now and _view_of_argument(o, grads_now) is not None:
                    p.out_grads_after.append((len(outputs),) + _view_of_argument(o, grads_now))
                else:
                    # a view of a tensor from outside (m.weight[0], a buffer's row): taken again
                    # of it after the write-back, as eager's view shares its memory and follows
                    # its later in-place updates (the program's value was a snapshot)
                    chain = _view_of_argument(o, _real_roots(o))
                    if chain is not None:
                        p.out_grads_after.append((len(outputs), _RealTensor(chain[0])) + chain[1:])
                    elif _no_grad_view_of_grad(o):
                        # eager's is a view of that value: it requires grad, has no grad_fn, and
                        # raises at its grad_fn once the value is written in place; the program's
                        # is a detached copy (requires_grad False)
                        raise TraceError("an output that is a view taken under no_grad of a value that requires "
                                         "grad is not traced (eager's requires grad through its base); return "
                                         "it .detach()ed or take the view outside no_grad")
                    elif id(o) in kept:
                        # eager returns it with its graph, which backward() did not free: a whole
                        # step's program has no backward
                        raise TraceError("the function calls backward() and returns a tensor whose graph it kept "
                                         "(retain_graph=True, or a value the backward did not go through): a later "
                                         "backward through it is not compiled yet")
                    elif id(o) in freed:
                        p.out_freed.append((len(outputs), freed[id(o)]))
            out_px.append(o)
            outputs.append(V(o.__dict__["_name"]))
            out_consts.append(None)
        else:
            out_consts.append(o)
    p.n_user = len(outputs)
    p.out_orders, p.out_c = _out_layouts(p, out_px)
    # the function's writes to real tensors: extra outputs, written back after each call
    outputs = outputs + list(sh.extra)
    p.writeback = sh.plan
    p.training_writes = sh.training_writes      # Module.train()/eval() inside: set after every call
    p.lr_inputs = sh.lr_inputs
    p.guard_spec = sh.guard_spec() if (sh.optimizers or sh.watched or sh.targets) else None
    p.whole_step = sh.did_backward
    g.outputs = outputs
    p.out_consts = out_consts
    # sizes the function returns (x.shape[0], x.shape): a dynamic program's are this call's
    p.out_sym = symbolic.current() is not None and (symbolic.has_sym(out_spec) or
                                                    any(symbolic.has_sym(c) for c in out_consts))
    if p.whole_step or not (STATE.grad_enabled and any(
            g[v].get("requires_grad") or (isinstance(g[v].get("value"), Tensor) and g[v]["value"]._req)
            for v in g.inputs)):
        g = _drop_detach(g)          # no gradient will be derived from this graph
        g = decompose_derivative_ops(g)
    _verify_pass(g, False)          # (a big one's first check is the forward pipeline's last)
    p.stage("traced IR", g)
    traced = g.copy()       # autograd's graph as torch records it: which inputs are part of it
    p.out_saved_eager = _outputs_saved_by_eager(traced, p.n_user)
    g = _run_pipeline(p, FORWARD_PIPELINE, g, "forward IR")
    _bind_folded(g)
    p.fwd_ir = g
    p.consts = inputs = [g[v]["value"] for v in g.inputs[n_args:]]
    # .grad tensors the function only read (an optimizer's step after a backward outside,
    # which makes new ones at every call): each call reads the tensor's .grad of that call
    # into the constant's place (_rebind_grads), guarded by its metadata only; one the function
    # returns is that call's .grad too, as in eager
    written = {id(t) for kind, t, _ in sh.plan if kind == "data"}
    only_read = lambda c: id(c) in sh.grad_reads and id(c) not in written and id(c) not in sh.data  # noqa: E731
    p.grad_slots = tuple((i, sh.grad_reads[id(c)]) for i, c in enumerate(inputs) if only_read(c))
    p.out_grads = tuple((k, sh.grad_reads[id(c)]) for k, c in enumerate(out_consts)
                        if isinstance(c, Tensor) and only_read(c))
    all_inputs = list(leaves) + inputs
    p.arg_writes, p.write_pos, p.write_extra = _writes(p, leaves, sh, last_use)
    req = [isinstance(t, Tensor) and t.requires_grad for t in all_inputs]
    p.wrt_pos = [i for i, r in enumerate(req) if r and all_inputs[i].dtype.is_floating_point]
    p.out_meta = [(tuple(g[o]["shape"]), g[o]["dtype"]) for o in g.outputs]
    # a function that ran backward() itself returns values whose graph it has used: they
    # do not require grad (a second backward through them would find the graph freed)
    p.needs_grad = STATE.grad_enabled and bool(p.wrt_pos) and bool(p.n_user) and not p.whole_step
    if p.needs_grad:
        # outputs that no gradient reaches (detached: derivatives taken inside the function
        # without create_graph) need no backward program
        wrt = [g.inputs[i] for i in p.wrt_pos]
        names = traced_names(traced, g, n_args)
        if any(names[i] is None for i in p.wrt_pos):
            traced, names = g, list(g.inputs)
        p.traced_names = names
        p.out_masks = input_masks(traced, [names[i] for i in p.wrt_pos])
        # the function's own outputs only: written-back values are no outputs to differentiate
        p.out_diff = [k < p.n_user and m != 0 and g[o]["dtype"].is_floating_point
                      for k, (m, o) in enumerate(zip(p.out_masks, g.outputs))]
        p.traced_ir = traced
        p.needs_grad = any(p.out_diff)
        union = 0
        for m, d in zip(p.out_masks, p.out_diff):
            if d:
                union |= m
        p.used_inputs = frozenset(i for j, i in enumerate(p.wrt_pos) if union >> j & 1)
    if p.needs_grad and sh.stale_saves:
        # a backward of the outputs through an op whose saved value was written in place since
        # raises in eager (torch's version counter check): the call runs eagerly, and so raises.
        # (The derivative's own marks, _note_stale_readers, raise lazily, only where a gradient
        # reaches the op, but miss writes through some views: this check keeps them right.)
        outs = [o for o, d in zip(traced.outputs, p.out_diff) if d]
        reach = differentiable_reach(traced, [names[i] for i in p.wrt_pos if names[i] is not None])
        sub = traced.nx.subgraph(reach)
        up = set(outs)
        for o in outs:
            if o in reach:
                up |= networkx.ancestors(sub, o)
        if any(n in sh.stale_saves and n not in sh.backwarded for n in up):
            raise TraceError(functionalize.STALE_SAVE_MSG)
    if p.needs_grad and sh.leaf_reads_after_write:
        # eager: the leaf keeps requiring grad through the write, and what is computed from its new
        # value has a gradient for it; in the trace the new value is the write's, with none
        t = next(iter(sh.leaf_reads_after_write.values()))
        raise TraceError(f"the function writes in place (under no_grad) a tensor from outside that requires grad "
                         f"(of shape {list(t.shape)}: a parameter) and then computes with it with grad enabled; the "
                         f"gradient that eager autograd gives that tensor through its new value is not compiled yet")
    if p.needs_grad:
        p.grad_slots = p.out_grads = ()   # a backward (and its speculated form) binds the constants it was built with
    p.out_consts_now = list(out_consts)   # out_consts with this call's .grad at p.out_grads (_rebind_grads)
    p.bwd_ir = None
    if p.needs_grad:
        bwd = derive(g, list(g.outputs), wrt, defer_errors=True)
        if any(o is None for o in bwd.outputs):
            # an input that reaches an output only through a custom backward that gives it None
            # has no gradient, as in torch (autograd.grad: 'appears to not have been used')
            p.used_inputs = frozenset(i for j, i in enumerate(p.wrt_pos)
                                      if i in p.used_inputs and bwd.outputs[j] is not None)
        for a in bwd.nx.nodes.values():
            if a["op"] == "input" and a["role"] in ("ctx", "hook"):
                raise TraceError("a custom autograd.Function or hook inside the compiled function")
        bwd = share_forward_masks(g, bwd)
        _verify_pass(bwd, False)    # (a big one's first check is the backward pipeline's last)
        p.stage("backward IR (derived)", bwd)
        p.bwd_ir = bwd
        bwd = _run_pipeline(p, BACKWARD_PIPELINE, bwd, "backward IR")
        _bind_folded(bwd)
        p.bwd_opt = bwd
        part = partition(g, bwd)
        p.stage("partition", part)
        fwd_run, bwd_run = part.forward, part.backward
        # recomputed values meet the backward's: simplify them together
        bwd_run = _run_pipeline(p, RECOMPUTED_PIPELINE, bwd_run)
        p.n_out = len(g.outputs)
        p.bwd_binds = part.binds
        # and those eager autograd saves, themselves or through a view (w[0, 0] of a product),
        # which the compiled backward may read only as a saved copy or not at all: changed in
        # place before the backward, eager and torch raise (the view shares their version)
        p.bwd_reads = sorted({i for kind, i in part.binds if kind == "in"} |
                             _inputs_saved_by_eager(traced, all_inputs, n_args))
        p.view_saved = _inputs_saved_by_eager(traced, all_inputs, n_args, views_only=True)
        p.copy_saved = _inputs_copied_by_eager(traced, all_inputs, n_args)
        p.grad_metas = [(tuple(all_inputs[i].shape), all_inputs[i].dtype) for i in p.wrt_pos]
        p.stage("forward IR (partitioned)", fwd_run)
        p.stage("backward IR (partitioned)", bwd_run)
    else:
        fwd_run, bwd_run = g, None
        p.n_out = len(g.outputs)
    fwd_run = _run_pipeline(p, RECOMPUTED_PIPELINE, fwd_run)   # the rewrites left until after autodiff (x ** 2 -> x * x, ...)
    p.stage("forward IR (simplified after autodiff)", fwd_run)
    on_device = any(t.is_cuda for t in leaves) or any(t.is_cuda for t in p.consts)
    lower = _triton if backend == "triton" or (backend == "auto" and on_device) else compile_graph
    if lower is not compile_graph and p.writeback and not (on_device and all(
            (t.is_cuda or not t.dim()) and t._dtype is not D.bfloat16
            for kind, t, _ in p.writeback if kind in ("data", "grad"))):
        # (CUDA tensors' writes are copied into their storage: functionalize._write_back_device;
        # a 0-dim CPU tensor, Adam's step count, is copied back to the host)
        raise TraceError("writes to tensors from outside the function (in-place ops on inputs or buffers, .grad, "
                         "optimizer.step) are compiled for the numpy backend and for CUDA tensors, not yet for "
                         "bfloat16 ones or CPU tensors under backend='triton'")
    if lower is compile_graph:
        # chunked groups for the numpy code; the Triton lowering forms its own kernels
        from .passes.fuse import group_fusions  # deferred: import tracegrad does not load tracegrad.passes.fuse
        fwd_run = group_fusions(fwd_run)
        if bwd_run is not None:
            bwd_run = group_fusions(bwd_run)
    p.fwd_run, p.bwd_run = fwd_run, bwd_run
    p.res_views = _residual_views(fwd_run, p.n_out) if bwd_run is not None and lower is compile_graph else ()
    # outputs the passes made views of an argument ((y * 1).reshape(-1) -> y.reshape(-1)): eager's
    # is a new tensor, so the call copies them (else an in-place op on one wrote the argument)
    remade = {k for k, *_ in p.out_views} | {k for k, _ in p.out_same}
    p.out_copies = tuple(k for k in _residual_views(fwd_run, 0) if k < p.n_user and k not in remade) \
        if lower is compile_graph else ()
    p.spec, p.spec_ok = None, False
    p.out_shape = None
    p.streak = p.bwd_count = p.bwd_seen = 0
    if dynamic and lower is not compile_graph:
        raise TraceError("symbolic sizes are compiled for the numpy backend only")
    if p.needs_grad and lower is compile_graph and sum(p.out_diff) == 1 and not dynamic:
        # (not for a dynamic program: its joint program would be built after its sizes' guards)
        k = p.out_diff.index(True)
        shape, dt = p.out_meta[k]
        grad_bytes = sum(int(np.prod(s, dtype=np.int64)) * d.itemsize for s, d in p.grad_metas)
        # a scalar's backward is its gradient times the seed: worth taking with the forward
        # where the gradients take no more memory than what the forward would save
        # (not for a program with write-backs: its inputs' old values, which a backward that cannot
        # take the forward's gradient would recompute from, are overwritten by the call)
        p.spec_ok = int(np.prod(shape, dtype=np.int64)) == 1 and dt.is_floating_point and not p.writeback and \
            grad_bytes <= 2 * max(part.saved_bytes, SPECULATE_MIN_BYTES) and \
            not any(a["op"] in ("derivative_error", "saved_value_written")       # they raise: not in a forward
                    for a in p.bwd_opt.nx.nodes.values())
    p.fwd_donate = ()
    if lower is compile_graph and p.writeback and not p.needs_grad:
        # a whole step (or in-place writes): new values written over the arrays they replace
        donors = _step_donors(p, fwd_run, all_inputs)
        p.fwd_fn = compile_graph(fwd_run, _ident(name) + "_forward", donors=donors)
        index = {v: i for i, v in enumerate(fwd_run.inputs)}
        p.fwd_donate = tuple(index[v] for v in p.fwd_fn.donated)
    else:
        p.fwd_fn = lower(fwd_run, _ident(name) + "_forward")
    p.stage("generated forward source", p.fwd_fn.source)
    for j, k in p.arg_writes:
        p.writeback[j] = ("data", None, k)      # each call writes into its own argument (run_program)
    p.write_back = functionalize.write_back_function(p.writeback, leaves) if p.writeback else None
    p.lr_last = [None] * len(p.lr_inputs)
    p.bwd_fn = None
    p.bwd_donors = ()
    if bwd_run is not None:
        if lower is compile_graph:
            # the saved forward values are the backward's to free: it may write its results over them
            res = {bwd_run.inputs[k]: i for k, (kind, i) in enumerate(p.bwd_binds) if kind == "res"}
            p.bwd_fn = compile_graph(bwd_run, _ident(name) + "_backward", donors=tuple(res))
            p.bwd_donors = tuple(res[v] for v in p.bwd_fn.donated)
        else:
            p.bwd_fn = lower(bwd_run, _ident(name) + "_backward")
        p.stage("generated backward source", p.bwd_fn.source)
    level = _debug()
    if level:
        print(f"==== tracegrad.compile: {name} ====", file=sys.stderr)
        for header, text in p.stages:
            if level >= 2 or "source" in header:
                print(f"---- {header} ----\n{_render(text)}", file=sys.stderr)
    return p


def _step_donors(p, graph, inputs):
    """{input: output} for the tensors a program writes new values into (a whole step's
    parameters and optimizer state): the input holding the tensor's array and the output
    of its new value, which the generated code may write over the old one in place, as
    the eager update does. Only a tensor read through one input, whose new value is no
    other write's and none of the function's own outputs."""
    count = {}
    for t in inputs:
        count[id(t)] = count.get(id(t), 0) + 1
    where = {id(t): v for t, v in zip(inputs, graph.inputs)}
    user = set(graph.outputs[:p.n_user])
    outs = iter(graph.outputs[p.n_user:p.n_out])
    donors, taken = {}, set()
    for kind, t, _ in p.writeback:
        if kind not in ("data", "grad"):
            continue
        o = next(outs)
        if kind != "data" or o is None or o in user or o in taken or count.get(id(t)) != 1 or \
                t._dtype is D.bfloat16 or not t._dtype.is_floating_point:
            continue
        donors[where[id(t)]] = o
        taken.add(o)
    return donors


def _last_uses(g, out_leaves):
    """{input value: the position in trace order of the last op that reads it} of a graph as
    traced (a value the function returns is read last of all)."""
    order = {n: i for i, n in enumerate(g.nx.nodes)}
    last = {}
    for u, n in g.nx.edges:
        if g[u]["op"] == "input" and order[n] > last.get(u, -1):
            last[u] = order[n]
    for o in out_leaves:
        if isinstance(o, Proxy):
            last[V(o.__dict__["_name"])] = len(order)
    return last


def _no_grad_view_of_grad(o):
    """Whether output o is a view op taken under no_grad (apply_symbolic's detach after it) of
    a value that required grad then."""
    d = o.__dict__
    if not d.get("_no_grad_view"):
        return False
    view = d["_view"][0].__dict__
    return "_view" in view and bool(view.get("_view_req"))


def _view_of_argument(o, args, kind="arg"):
    """(argument position, [(view op, args, params), ...]) where the output o is a view of an
    argument through view ops alone, else None: such an output is taken again from the
    argument at every call (as torch.compile regenerates output views), so that it shares
    the argument's memory, version counter and autograd history, and an in-place op on it
    reaches the argument's graph. kind "out": a view of an earlier output (its position),
    through at least one view op."""
    chain, no_grad_views = [], []
    tensor_key = False
    while True:
        src = args.get(id(o))
        if src is not None and src[0] == kind and (chain or kind == "arg"):
            if tensor_key:
                # x[i] by a 0-dim index tensor: eager's select views x; the program's copy would
                # not share x's memory (a write to the output would not reach x)
                raise Untraceable("an output that is a view of an argument or of another output, indexed by a "
                                  "0-dim tensor (x[i]), is not traced; index with an int, or return x[i].clone()")
            break
        view = o.__dict__.get("_view")
        if view is None:
            return None
        base, prim, rest, params = view
        if any(isinstance(r, Tensor) for r in rest):
            tensor_key = True
        chain.append((prim, rest, params))
        no_grad_views.append(bool(o.__dict__.get("_no_grad_view")))
        o = base
    chain.reverse()
    no_grad_views.reverse()
    # a view made under no_grad inside the function is traced as the view, then a detach of
    # it: taken again under no_grad (an in-place op on it then raises as torch's does); a
    # detach() the function called is no such view (x[:, :1].detach() requires no grad)
    ops = [c for c in chain if c[0].name != "detach"]
    if len(ops) == len(chain) or not ops:
        return src[1], chain, False          # (detach alone: the same memory and version counter)
    if len(ops) * 2 == len(chain) and all(chain[2 * i + 1][0].name == "detach" and no_grad_views[2 * i + 1]
                                          for i in range(len(ops))):
        return src[1], ops, True
    return src[1], chain, False       # views of a detached value (y.detach()[1:]): detach taken as eager's


class _RealTensor:
    """An output's root in out_grads_after that is the tensor itself (not its .grad)."""
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def _real_roots(o):
    """{id(stand-in): ("arg", tensor)} for the real tensor o is a view of, through views alone
    (tracing._apply_symbolic's stand-in of a parameter or buffer carries it as _real)."""
    while True:
        view = o.__dict__.get("_view")
        if view is None:
            real = o.__dict__.get("_real")
            return {} if real is None else {id(o): ("arg", real)}
        o = view[0]


def _writes(p, leaves, sh, last_use):
    """Where a program's writes of tensor values go: (plan index, argument position) of each
    argument written in place; for each array of a call (arguments, constants, then the
    written tensors the program does not read) when the trace first wrote it and when it
    last read it (writes_alias)."""
    arg_writes = []
    if not p.writeback:
        p.first_write = p.last_read = None
        return (), (), ()
    n = len(leaves)
    where = {id(c): n + i for i, c in enumerate(p.consts)}
    first = {}
    extra = []
    for j, (kind, t, k) in enumerate(p.writeback):
        if kind != "data":
            continue
        if k is not None:
            arg_writes.append((j, k))
            first[k] = sh.first_write.get(id(sh.inputs[k][0]), 0)
        elif id(t) in where:
            first[where[id(t)]] = sh.first_write.get(id(t), 0)
        else:
            first[n + len(p.consts) + len(extra)] = sh.first_write.get(id(t), 0)
            extra.append(t)
    by_value = {id(a.get("value")): v for v, a in ((v, sh.graph[v]) for v in sh.graph.inputs)}
    names = [V(px.__dict__["_orig_name"]) for px, _, _ in sh.inputs] + [by_value.get(id(c)) for c in p.consts]
    last_use = last_use or {}
    big = len(sh.graph.nx) + 1        # a constant not found in the traced graph: taken as read last
    p.first_write = first
    p.last_read = [last_use.get(v, -1) if v is not None else big for v in names] + [-1] * len(extra)
    return tuple(arg_writes), tuple(first), tuple(extra)


def writes_alias(p, leaves, distinct=None):
    """Whether a tensor the program writes shares memory with another tensor of the call (the
    same tensor passed twice, a view of a written buffer, an argument that is a parameter the
    function also reads) that the trace read after that write, or wrote too: the trace took
    them for distinct values, so that read would be stale. Only numpy arrays over one
    allocation are compared."""
    arrays = [t._data for t in leaves] + [c._data for c in p.consts] + [t._data for t in p.write_extra]
    if distinct or (distinct is None and _distinct(arrays)):
        return False
    first, last = p.first_write, p.last_read
    written = p.write_pos
    roots = {}
    for i, a in enumerate(arrays):
        if type(a) is np.ndarray:
            r = _own_root(a)
            roots.setdefault(None if r is None else id(r), []).append(i)
    foreign = roots.get(None, [])
    for i in written:
        a = arrays[i]
        if type(a) is not np.ndarray:
            continue
        r = _own_root(a)
        near = range(len(arrays)) if r is None else roots.get(id(r), []) + foreign
        for j in near:
            if j != i and (j in first or last[j] >= first[i]) and type(arrays[j]) is np.ndarray and \
                    np.may_share_memory(a, arrays[j]):
                return True
    return False


def _distinct(arrays):
    """Whether the arrays are numpy arrays over allocations of their own, each once: then none
    shares memory with another (the common call, checked without looking for roots)."""
    for a in arrays:
        if a.__class__ is not np.ndarray or a.base is not None or not a.flags.owndata:
            return False
    return len(set(map(id, arrays))) == len(arrays)


def _own_root(a):
    """The array that owns a's memory where numpy allocated it (distinct allocations never
    overlap); None where the memory came from elsewhere (a buffer, another library)."""
    while True:
        b = a.base
        if b is None:
            return a if a.flags.owndata else None
        if type(b) is not np.ndarray:
            return None
        a = b


def may_donate(arrays, donate, distinct=None):
    """Whether the arrays at positions `donate` may take their new values in place this call:
    plain writeable arrays that share no memory with any other input of the call (an
    argument that is a view of a parameter would read overwritten values). Arrays over
    different numpy allocations cannot overlap: only those over one allocation, or over
    memory numpy did not allocate, are compared (one pass, not a test per pair). `distinct`:
    _distinct of these arrays (or more), where the caller knows it."""
    if distinct or (distinct is None and _distinct(arrays)):
        for i in donate:
            if not arrays[i].flags.writeable:
                return False
        return True
    roots = {}
    for i in donate:
        a = arrays[i]
        if type(a) is not np.ndarray or not a.flags.writeable:
            return False
        r = _own_root(a)
        roots.setdefault(None if r is None else id(r), []).append(i)
    foreign = roots.get(None, ())
    for j, b in enumerate(arrays):
        if type(b) is not np.ndarray:
            continue
        r = _own_root(b)
        near = donate if r is None else roots.get(id(r), ())
        for i in (near if r is None else (*near, *foreign)):
            if i != j and np.may_share_memory(arrays[i], b):
                return False
    return True


def _run_pipeline(p, passes, g, header=None):
    """g after each pass of `passes` in turn, verified (_verify_pass), each result a stage of p
    under `header` where one is given. A graph an earlier pass of the pipeline made is the
    pipeline's alone where p keeps no stages: passes that may change a graph handed over
    (passes.HANDED_OVER: dead code) get it to change instead of copying it (a backward's
    dead-value pass dropped 2 of 26,669 values by copying the other 26,667)."""
    from .passes import HANDED_OVER  # deferred: import tracegrad does not load tracegrad.passes
    start = g
    for k, pass_fn in enumerate(passes):
        if pass_fn in HANDED_OVER and g is not start and not p.keep_stages:
            g = pass_fn(g, own=True)
        else:
            g = pass_fn(g)
        _verify_pass(g, k == len(passes) - 1)
        if header is not None:
            p.stage(f"{header} after {pass_fn.__name__}", g)
    return g


VERIFY_EVERY_PASS_NODES = 5000


def _verify_pass(g, last):
    """The verifier after a pass (or on a graph that a pipeline takes next: the traced one,
    the derived backward): on every graph of up to VERIFY_EVERY_PASS_NODES values, and on
    the last result of a pipeline for bigger ones (on a 10,000-op chain verifying each
    pass's result was a tenth of the compile time). The programs the tests compile are
    smaller: every graph is verified there."""
    if last or len(g.nx) <= VERIFY_EVERY_PASS_NODES:
        verify(g)


def traced_names(traced, g, n_args):
    """For each input of the optimised graph g (the call's arguments, then its constants),
    the same input of the traced graph: an argument by position, a constant by the tensor
    it reads; None for a constant a pass made."""
    by_value = {}
    for v in traced.inputs[n_args:]:
        by_value[id(traced[v].get("value"))] = v
    names = list(traced.inputs[:n_args])
    for v in g.inputs[n_args:]:
        names.append(by_value.get(id(g[v].get("value"))))
    return names


def input_masks(g, wrt):
    """For each output of g, a bit mask of the inputs `wrt` (bit j for wrt[j]) that a
    gradient flows from: through ops with a derivative rule and floating-point values, not
    through detach. An input in no output's mask is not part of the autograd graph, as in
    torch: its gradient is None, not zeros. One pass in topological order."""
    mask = {w: 1 << j for j, w in enumerate(wrt)}
    for n in g.nx.nodes:
        a = g[n]
        if a["op"] == "input" or a["op"] == "detach" or (a["prim"] is not None and a["prim"].vjp is None) or \
                not carries_grad(a):
            continue
        m = 0
        for x in a["args"]:
            if isinstance(x, V):
                m |= mask.get(x, 0)
        if m:
            mask[n] = m
    return [mask.get(o, 0) if carries_grad(g[o]) else 0 for o in g.outputs]


SPECULATE_MIN_BYTES = 1 << 20
SPECULATE_AFTER = 2


def speculative_program(p):
    """The joint forward+backward of p (passes/partition.joint) as generated code, and its
    explain stages: built the first time p's calls show that their backward follows."""
    with paused(promote=True):
        return _speculative_program(p)


def _speculative_program(p):
    from .passes import RECOMPUTED_PIPELINE  # deferred: import tracegrad does not load tracegrad.passes
    from .passes.partition import joint  # deferred: import tracegrad does not load tracegrad.passes.partition
    from .passes.fuse import group_fusions  # deferred: import tracegrad does not load tracegrad.passes.fuse
    j = _run_pipeline(p, RECOMPUTED_PIPELINE, joint(p.fwd_ir, p.bwd_opt))
    p.stage("joint forward+backward IR (the gradient of the scalar output taken with it)", j)
    fn = compile_graph(group_fusions(j), _ident(p.__name__) + "_joint")
    p.stage("generated joint forward+backward source", fn.source)
    p.spec_consts = [j[v]["value"] for v in j.inputs[len(p.fwd_ir.inputs):]]
    p.spec = fn
    return fn


def _triton(graph, name):
    """The graph as Triton kernels (codegen/triton_gpu.py); arrays in and out, so it plugs
    into the same calling convention as the numpy backend. Without a GPU it needs
    TRITON_INTERPRET=1 (slow: for tests of small graphs)."""
    from .decompositions import lower  # deferred: import tracegrad does not load tracegrad.decompositions
    prog = lower(graph)
    bf16 = any(getattr(a.get("dtype"), "name", None) == "bfloat16" for a in graph.nx._node.values())

    def run(*arrays):
        if any(a.__class__ is CudaArray for a in arrays):
            res = prog(*[a.t if a.__class__ is CudaArray else a for a in arrays])
            return tuple(None if o is None else CudaArray(o) for o in res)
        if bf16:
            # (the kernels run on the CPU, under Triton's interpreter, which truncates float32 to
            # bfloat16 where a GPU rounds to nearest: its results would not be the GPU's)
            raise RuntimeError(f"{name}: backend=\"triton\" runs bfloat16 on a GPU only: on the CPU, Triton's "
                               f"interpreter rounds float32 to bfloat16 toward zero where a GPU rounds to nearest, "
                               f"so its results would differ. Move the tensors to \"cuda\", or compile with "
                               f"backend=\"numpy\" (the CPU's default).")
        return tuple(None if o is None else o.detach().cpu().numpy() for o in prog(*arrays))
    run.source = prog.source
    run.program = prog
    return run


def _ident(name):
    """A Python identifier from a function's name (it names generated functions): ASCII
    letters, digits and underscores only, never starting with a digit."""
    out = "".join(c if c.isascii() and c.isalnum() else "_" for c in str.__str__(name))
    return out if out and not out[0].isdigit() else "f_" + out


# -- running a program -----------------------------------------------------------------------------

def run_program(p, leaves, distinct=None):
    plain = p.__dict__.get("plain")
    if plain is None:
        plain = p.plain = _plain(p)
    if plain:
        return _run_plain(p, leaves)
    if p.lr_inputs:
        _read_learning_rates(p)
    arrays = [t._data for t in leaves]
    arrays += [c._data for c in p.consts]
    spec = p.needs_grad and STATE.grad_enabled and _speculate(p)
    try:
        if spec:
            res = p.spec(*arrays, *[c._data for c in p.spec_consts])
        elif p.fwd_donate and may_donate(arrays, p.fwd_donate, distinct):
            res = p.fwd_fn(*arrays, donate=True)
        else:
            res = p.fwd_fn(*arrays)
    except ValueError as e:
        # numpy's error from a kernel (an inf norm over an empty dim has no identity): torch's
        # type, as the eager op raises it (tracing._kernel_error)
        raise RuntimeError(f"{p.__name__}: {e}") from e
    n_out = p.n_out
    if p.out_copies:
        res = list(res)
        for k in p.out_copies:
            res[k] = _own_copy(res[k])
    if p.res_views and not spec and p.needs_grad and STATE.grad_enabled:
        # the backward's own copy of a slice of an input (_residual_views), taken before the call
        # writes its inputs back (a residual x[0] of an x the call then wrote read the new value)
        res = list(res)
        for i in p.res_views:
            res[n_out + i] = np.array(res[n_out + i], copy=True)
    if p.writeback:
        ids = [id(a) for a in arrays]
        for o in res[:p.n_user]:
            # an array the function returns (or the one it is a view of) becomes no tensor's storage:
            # a value both returned and written (a gradient that is also the new momentum buffer)
            # would be changed under the caller by the next call's in-place update
            if o.__class__ is np.ndarray:
                ids.append(id(o))
                if o.base is not None:
                    r = _own_root(o)
                    if r is not None:
                        ids.append(id(r))
        if not (p.needs_grad and STATE.grad_enabled):
            arrays.clear()                # the old storages: replaceable where nothing else holds them
        elif p.write_pos:
            # the backward reads (or recomputes from) the inputs as the call found them: the arrays
            # of those it writes are copied first (x[0] * 1 recomputed from an x the call then wrote
            # with sigmoid_ gave the gradient of sigmoid(x[0]) * w, not of x[0] * w)
            n_in = len(arrays)
            for i in p.write_pos:
                if i < n_in and arrays[i].__class__ is np.ndarray:
                    arrays[i] = _own_copy(arrays[i])
        p.write_back(res[p.n_user:n_out], ids, leaves)
    if p.out_orders:
        res = list(res)
        for k, order in p.out_orders:
            res[k] = _laid_out(res[k], order)
    if p.out_strided:
        res = list(res)
        for k, strides in p.out_strided:
            res[k] = _strided_as(res[k], strides)
    res, outs = _user_outputs(p, res)
    if p.needs_grad and STATE.grad_enabled:
        _attach(p, leaves, arrays, outs, () if spec else res[n_out:], res[n_out:] if spec else None)
    for k, srcs in p.out_freed:
        _freed_grad_fn(p, outs[k], srcs, leaves)
    for m, mode in p.training_writes:
        m.training = mode
    values = _sym_values(p, leaves) if p.out_views and p.sym_sources else None
    for k, kind, j, chain, nograd in p.out_views:
        v = leaves[j] if kind == "arg" else outs[j]
        with no_grad() if nograd else contextlib.nullcontext():
            for prim, rest, params in chain:
                if prim.name == "detach":
                    v = detach(v)              # as Tensor.detach: the same memory and version counter
                    continue
                if values is not None:         # a dynamic program's sizes, for this call
                    rest, params = symbolic.substitute(rest, values), symbolic.substitute(params, values)
                v = apply(prim, (v,) + rest, params)
        outs[k] = v
    for k, (kind, j) in p.out_same:
        outs[k] = leaves[j] if kind == "arg" else outs[j]
    for k, t, chain, nograd in p.out_grads_after:
        v = t.tensor if t.__class__ is _RealTensor else t._grad
        with no_grad() if nograd else contextlib.nullcontext():
            for prim, rest, params in chain:
                v = apply(prim, (v,) + rest, params)
        outs[k] = v
    return _shaped(p, outs, leaves)


def _user_outputs(p, res):
    """(the program's results, the user's outputs as tensors), those eager lays out C-contiguous
    made so (Program.out_c)."""
    res = _laid_c(p, res)
    outs = []
    for (shape, dt), o in zip(p.out_meta, res[:p.n_user]):
        if type(o) is not np.ndarray and not hasattr(o, "_tg_device"):
            o = np.asarray(o)
        outs.append(Tensor._make(o, dt))
    return res, outs


def _laid_c(p, res):
    """The program's results, those eager lays out C-contiguous made so (Program.out_c)."""
    for k in p.out_c:
        r = res[k]
        if r.__class__ is np.ndarray and not r.flags.c_contiguous:
            if res.__class__ is not list:
                res = list(res)
            res[k] = np.ascontiguousarray(r)
    return res


def array_runner(p):
    """What run_program does for a plain program that takes no gradient (nothing in it requires
    grad) and returns a flat tuple of tensors, as one generated function of the call's tensors
    that returns the results' arrays: a caller that needs only some of them as tensors
    (tracegrad/chain.py: the last step's results, where the others are values of tensors that
    exist) skips making the rest, and the program's constants are read without a loop. None
    for any other program."""
    shape = p.out_shape
    if shape is None:
        shape = p.out_shape = _out_shape(p)
    if shape != 2 or not p.__dict__.get("plain") or p.needs_grad:
        return None
    table = {"fwd": p.fwd_fn, "ndarray": np.ndarray, "asarray": np.asarray, "contiguous": np.ascontiguousarray,
             "name": p.__name__}
    args = [f"leaves[{i}]._data" for i in range(p.n_args)]
    for i, c in enumerate(p.consts):
        table[f"c{i}"] = c
        args.append(f"c{i}._data")
    lines = ["def run(leaves):", "    try:", f"        res = fwd({', '.join(args)})", "    except ValueError as e:",
             "        raise RuntimeError(f'{name}: {e}') from e"]
    for k in range(p.n_user):
        # (numpy's reduce may return a scalar, or lay its result out otherwise than eager: _user_outputs)
        lines += [f"    r{k} = res[{k}]",
                  f"    if r{k}.__class__ is not ndarray:",
                  f"        if not hasattr(r{k}, '_tg_device'):",
                  f"            r{k} = asarray(r{k})"]
        if k in p.out_c:
            lines += [f"    elif not r{k}.flags.c_contiguous:", f"        r{k} = contiguous(r{k})"]
    lines.append(f"    return [{', '.join(f'r{k}' for k in range(p.n_user))}]")
    exec(builtins.compile("\n".join(lines) + "\n", "<tracegrad:program arrays>", "exec"), table)
    return table["run"]


def _shaped(p, outs, leaves):
    """The call's outputs as the function returns them: one tensor, a tuple, or its structure."""
    shape = p.out_shape
    if shape is None:
        shape = p.out_shape = _out_shape(p)
    if shape == 1:
        return outs[0]
    if shape == 2:
        return tuple(outs)
    return _returned(p, outs, leaves)


def _returned(p, outs, leaves):
    """The call's outputs in the structure the function returns (_out_shape 3)."""
    it = iter(outs)
    consts, spec = (p.out_consts_now if p.out_grads else p.out_consts), p.out_spec
    if p.out_sym:
        values = _sym_values(p, leaves)
        consts = [symbolic.substitute(c, values) for c in consts]
        spec = symbolic.substitute(spec, values)
    flat = [next(it) if c is None else c for c in consts]
    return unflatten(spec, iter(flat))


# what run_program does beyond running the forward and wrapping its outputs (each empty: a plain program)
_EXTRAS = ("lr_inputs", "fwd_donate", "out_copies", "res_views", "writeback", "out_orders", "out_strided", "out_freed",
           "training_writes", "out_views", "out_same", "out_grads_after")


def _plain(p):
    """Whether program p needs none of run_program's extra steps (all are fixed when it is built)."""
    return not any(getattr(p, a, None) for a in _EXTRAS)


def _run_plain(p, leaves):
    """run_program of a plain program (_plain): the same steps, less the ones it has nothing for."""
    arrays = [t._data for t in leaves]
    consts = p.consts
    if consts:
        arrays += [c._data for c in consts]
    spec = p.needs_grad and STATE.grad_enabled and _speculate(p)
    try:
        res = p.spec(*arrays, *[c._data for c in p.spec_consts]) if spec else p.fwd_fn(*arrays)
    except ValueError as e:
        raise RuntimeError(f"{p.__name__}: {e}") from e
    res, outs = _user_outputs(p, res)
    if p.needs_grad and STATE.grad_enabled:
        n_out = p.n_out
        _attach(p, leaves, arrays, outs, () if spec else res[n_out:], res[n_out:] if spec else None)
    return _shaped(p, outs, leaves)


def _rebind_grads(p):
    """The .grad tensors of this call in the places of the constants the program reads them
    from (Program.grad_slots; the step guard checked that each exists, with the metadata of
    the one the trace read)."""
    consts = p.consts
    for i, t in p.grad_slots:
        consts[i] = t._grad
    now = p.out_consts_now
    for k, t in p.out_grads:
        now[k] = t._grad               # as the call starts: what the function read (and returns)


def _read_learning_rates(p):
    """A whole step's learning rates and the other options it reads at every call
    (optim/traced.py): each group's "lr" (or betas[0], ...) into the tensor the program reads
    it from (a float that is the one of the last call is there)."""
    last = p.lr_last
    for i, (holder, group, key, index) in enumerate(p.lr_inputs):
        lr = group[key]
        if index is not None:
            lr = lr[index]
        if lr is last[i] and lr.__class__ is float:
            continue
        holder._data = np.array(float(lr.item() if isinstance(lr, Tensor) else lr), np.float64)
        last[i] = lr


def _out_shape(p):
    """How run_program gives the outputs back: 1 a lone tensor, 2 a tuple of the tensors as
    they come, 3 anything else (unflatten of the output structure)."""
    if all(c is None for c in p.out_consts):
        if p.out_spec is LEAF:
            return 1
        if type(p.out_spec) is tuple and len(p.out_spec) == 2 and p.out_spec[0] is tuple and \
                all(s is LEAF for s in p.out_spec[1]):
            return 2
    return 3


def _speculate(p):
    """Whether this call takes its gradient with the forward: once the backward has run
    after each of the last SPECULATE_AFTER calls (a training loop). A call whose backward
    does not come (an evaluation with grad on) sets the count back to zero."""
    if not p.spec_ok:
        return False
    if p.bwd_count > p.bwd_seen:
        p.streak += 1
    else:
        p.streak = 0
    p.bwd_seen = p.bwd_count
    if p.streak < SPECULATE_AFTER:
        return False
    if p.spec is None:
        speculative_program(p)
    return True


def _as_found(p, inputs, arrays):
    """The call's inputs as the backward recomputes from them (a gradient of some outputs alone,
    create_graph): those the call wrote in place as copies of their values before the write
    (run_program's arrays), at their places in the graph."""
    out = list(inputs)
    for i in p.write_pos:
        if i < len(out) and arrays[i] is not out[i]._data:
            t = out[i]
            if t._grad_fn is not None or not t._req:
                out[i] = Tensor._make(arrays[i], t._dtype, t._req, t._grad_fn, t._output_nr)
    return out


def _attach(p, leaves, arrays, outs, residuals, grads=None):
    """One grad_fn node for the whole call, whose derivative runs the compiled backward
    (or, where the call took its gradient with the forward, scales that by the seed)."""
    consts = p.consts
    inputs = leaves + consts if consts else list(leaves)
    node = object.__new__(_NODE_CLS[0])
    node._seq = next_node_seq()
    node._prim = _COMPILED_CALL
    params = p.__dict__.get("node_params")
    if params is None or params["nout"] != len(outs):
        params = p.node_params = {"cls": p, "nout": len(outs)}
    node._params = params
    metas, edges = [], []
    used = p.used_inputs
    k = 0
    for t in inputs:
        metas.append((t._data.shape, t._dtype))
        if k not in used:
            edges.append((None, 0))          # not in the graph (torch: no edge, a None gradient)
        else:
            fn = t._grad_fn if t._view is None else t.grad_fn
            if fn is not None:
                edges.append((fn, t._output_nr))
            elif t._req:
                edges.append((t._accumulator(), 0))
            else:
                edges.append((None, 0))
        k += 1
    node._args_meta = tuple(metas)
    node.next_functions = tuple(edges)
    d = node.__dict__
    d["_saved_slots"] = (None,) * (len(inputs) + 1)      # the _saved property's value
    node._out_meta = tuple([(o._data.shape, o._dtype) for o in outs])
    d["_residuals"] = residuals
    d["_arrays"] = arrays
    d["_inputs"] = _as_found(p, inputs, arrays) if p.write_pos and arrays else inputs
    d["_untracked"] = UNTRACKED_WRITES[0]
    # the inputs the backward reads, with their versions now: changed in place before the
    # backward, they would give a wrong gradient, so the backward raises torch's error
    d["_read"] = read = [Saved(inputs[i], False) for i in p.bwd_reads] if p.bwd_reads else ()
    if len(p.out_meta) > 1:
        # a backward of some of the outputs alone may recompute the forward from every input
        # (_masked_backward): their versions now too, checked there
        d["_taken"] = [(t._vc, t._vc[0]) for t in inputs]
    saved = p.out_saved_eager
    if residuals:
        # and the outputs whose memory it reads (exp's result is its own derivative): changed in
        # place (y.mul_(2)) before the backward, they too would give a wrong gradient
        saved = set(saved).union(_outputs_saved(residuals, outs)) if saved else _outputs_saved(residuals, outs)
    if saved:
        # (and those eager autograd saves, which it refuses changed in place, as torch)
        if read == ():
            d["_read"] = read = []
        read.extend([Saved(outs[k], True, k) for k in sorted(saved)])
    for s in read:
        if s.tensor is not None and s.tensor._inference:
            raise RuntimeError("Inference tensors cannot be saved for backward. Please do not use Tensors created in "
                               "inference mode in computation tracked by autograd. To work around this, you can make "
                               "a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` "
                               "instead of `torch.inference_mode()`.")
    if grads is not None:
        d["_grads"] = grads
    elif p.bwd_donors:
        d["_donate"] = _donatable(p, residuals, outs)
    out_diff = p.out_diff
    k = 0
    for o in outs:
        if out_diff[k]:
            o._req = True
            o._grad_fn = node                # a new tensor, no view: what the grad_fn setter does
            o._output_nr = k
        k += 1


def _freed_grad_fn(p, o, srcs, leaves, name=None):
    """A whole step's output `o` as eager returns it after the step's backward: requiring
    grad, its grad_fn's saved values freed, edges to the tensors its graph started from
    (Program.out_freed), so that a backward through it again raises torch's error. `name`:
    its class's, where not CompiledFunctionBackward."""
    node = object.__new__(_NODE_CLS[0] if name is None else node_class(name))
    node._prim = _COMPILED_CALL
    node._params = {"cls": p, "nout": 1}
    metas, edges = [], []
    for kind, t in srcs:
        if kind == "arg":
            t = leaves[t]
        metas.append((t._data.shape, t._dtype))
        fn = t.grad_fn
        edges.append((fn, t._output_nr) if fn is not None else (t._accumulator(), 0) if t._req else (None, 0))
    node._args_meta = tuple(metas)
    node.next_functions = tuple(edges)
    node._out_meta = ((o._data.shape, o._dtype),)
    node._saved = None                   # freed, as the step's backward left it
    node._freed = True
    node._seq = next_node_seq()
    o._req = True
    o._grad_fn = node
    o._output_nr = 0


def _stale_grad_fn(p, o, inputs, why, name=None):
    """A grad_fn for `o`, a result of a chain after compiled program p (tracegrad/chain.py)
    whose graph cannot be rebuilt because an input changed since: a backward reaching it raises
    `why`. `name`: the class name of the grad_fn eager gave the result."""
    _freed_grad_fn(p, o, [("arg", i) for i in range(len(inputs))], inputs, name)
    o._grad_fn.__dict__["_why"] = why


def _outputs_saved_by_eager(g, n_user):
    """The positions of the outputs (through views) of ops whose eager derivative saves their
    result (softmax, exp, sigmoid, ...): changed in place before the backward, eager autograd
    raises, whether or not the compiled backward reads them (softmax's reads e and the row sums
    once decomposed)."""
    sources = [v for v in g.inputs if g[v].get("requires_grad") or
               (isinstance(g[v].get("value"), Tensor) and g[v]["value"]._req)]
    if not sources:
        return ()
    reach = differentiable_reach(g, sources)
    pos = []
    for k, o in enumerate(g.outputs[:n_user]):
        if o is None or o not in reach:
            continue
        a = g[o]
        while a["op"] != "input" and a["prim"] is not None and a["prim"].view and a["args"] and \
                a["args"][0].__class__ is V:
            a = g[a["args"][0]]
        prim = a["prim"] if a["op"] != "input" else None
        if prim is not None and a.get("guards_out"):
            pos.append(k)                # a composite's result torch's node saves (tracing.keep_saved)
        elif prim is not None and "out" in prim.saves and type(a["args"]) is tuple:
            # what eager records (tracing._record): the saved values for the arguments that require grad
            req = tuple(x.__class__ is V and x in reach for x in a["args"])
            if prim.saved_positions(len(a["args"]), req)[1]:
                pos.append(k)
    return tuple(pos)


def _own_copy(a):
    """A copy of array a in its layout, a broadcast (stride-0) axis kept a broadcast, as eager's
    expand of a new tensor is."""
    if a.size and 0 in a.strides:
        c = np.array(a[tuple(slice(0, 1) if s == 0 else slice(None) for s in a.strides)], copy=True)
        strides = tuple(0 if s == 0 else t for s, t in zip(a.strides, c.strides))
        return np.lib.stride_tricks.as_strided(c, a.shape, strides)
    return np.array(a, copy=True)


def _view_root(g, x):
    """The value that x is a view of, through a chain of view ops (x itself where none)."""
    while x.__class__ is V and g[x]["op"] != "input":
        b = g[x]
        view = b["prim"].view if b.get("prim") is not None else None
        if not view or not (view is True or view(b["params"])) or not b["args"] or b["args"][0].__class__ is not V:
            break
        x = b["args"][0]
    return x


def _residual_views(g, n_out):
    """The positions among the saved values of forward graph g (its outputs past n_out) of those
    that are views of its inputs (a slice w[:1] the backward multiplies by): numpy views of the
    argument's memory, which an in-place write between the call and its backward would change
    under the backward. Eager saved a tensor of its own there (w[:1] * 1, which simplify made
    the view), or one whose version counter is the argument's (and raises: _inputs_saved_by_eager);
    the call copies these."""
    found = []
    for i, v in enumerate(g.outputs[n_out:]):
        if v.__class__ is V and v in g.nx and g[v]["op"] != "input":
            r = _view_root(g, v)
            if r.__class__ is V and g[r]["op"] == "input":
                found.append(i)
    return tuple(found)


def _input_positions(g, inputs, n_args):
    """{input value of traced graph g: its position in `inputs`} (the call's argument tensors,
    then its constants)."""
    index = {}
    for k, v in enumerate(g.inputs):
        if k < n_args:
            index[v] = k
        else:
            value = g[v].get("value")
            for j in range(n_args, len(inputs)):
                if inputs[j] is value:
                    index[v] = j
                    break
    return index


def _inputs_saved_by_eager(g, inputs, n_args, views_only=False):
    """The positions in `inputs` (the call's argument tensors, then its constants) of the
    tensors an eager derivative of traced graph g saves, as they are or through views (with
    `views_only`, those saved through a view alone: a view op's result, or the view an op makes
    itself, Primitive.saves_inner_view; torch's keeps the input's old memory after `x.data = y`)."""
    sources = [v for v in g.inputs if g[v].get("requires_grad") or
               (isinstance(g[v].get("value"), Tensor) and g[v]["value"]._req)]
    if not sources:
        return set()
    reach = differentiable_reach(g, sources)
    index = _input_positions(g, inputs, n_args)
    found = set()
    for a in g.nx._node.values():
        args = a["args"]
        if a["op"] in ("input", "proj") or a["prim"] is None or type(args) is not tuple:
            continue
        req = tuple(x.__class__ is V and x in reach for x in args)
        if not any(req):
            continue                     # eager records no node for it
        inner = ()
        if views_only and a["prim"].saves_inner_view is not None:
            inner = a["prim"].saves_inner_view([_Rank(len(g[x]["shape"])) if x.__class__ is V else x for x in args])
        if views_only and a["op"] == "matmul" and a["params"].get("op") != "bmm":
            # torch.matmul's node saves the operands it reshapes (a view or a copy), not them
            inner = matmul_reshaped(*[_Rank(len(g[x]["shape"])) if x.__class__ is V else x for x in args])
        for i in a["prim"].saved_positions(len(args), req)[0]:
            arg = args[i] if i < len(args) else None
            x = _view_root(g, arg)
            if x.__class__ is V and x in index and g[x]["op"] == "input" and \
                    (not views_only or arg is not x or i in inner):
                found.add(index[x])
        for x0, _ in a.get("guards", ()):        # what a composite's node saves (tracing.keep_saved)
            x = _view_root(g, x0)
            if x.__class__ is V and x in index and g[x]["op"] == "input" and (not views_only or x0 is not x):
                found.add(index[x])
    return found


def _inputs_copied_by_eager(g, inputs, n_args):
    """The positions in `inputs` of the tensors torch's matmul copies for its node (the operand it
    reshapes by a copy, functional._matmul_copies): a write into their memory through `.data`
    after the call does not reach what torch's backward reads. Told from the call's tensors where
    both operands are inputs as they are; any operand the product reshapes otherwise (a view of
    an input) counts as copied."""
    found = set()
    index = _input_positions(g, inputs, n_args)
    for a in g.nx._node.values():
        if a["op"] != "matmul" or a["params"].get("op") == "bmm" or type(a["args"]) is not tuple:
            continue
        args = a["args"]
        ranks = [_Rank(len(g[x]["shape"])) if x.__class__ is V else x for x in args]
        reshaped = matmul_reshaped(*ranks)
        if not reshaped:
            continue
        direct = [index.get(x) if x.__class__ is V else None for x in args]
        copied = _matmul_copies(*[inputs[k] for k in direct]) if None not in direct else (True, True)
        for i in reshaped:
            x = _view_root(g, args[i])
            if x.__class__ is V and x in index and copied[i]:
                found.add(index[x])
    return found


class _Rank:
    """An argument of a traced op as Primitive.saves_inner_view reads it: its number of dims."""
    __slots__ = ("ndim",)

    def __init__(self, ndim):
        self.ndim = ndim


def _outputs_saved(residuals, outs):
    """The positions of the outputs whose memory is (or is viewed by) a saved value."""
    if len(outs) == 1:
        m = _memory(outs[0]._data)
        for r in residuals:
            if r is None:
                continue
            # (an array that owns its memory is that memory: _memory's answer, without the call)
            if (id(r) if r.__class__ is np.ndarray and r.base is None else _memory(r)) == m:
                return (0,)
        return ()
    saved = {_memory(r) for r in residuals if r is not None}
    return [k for k, o in enumerate(outs) if _memory(o._data) in saved]


def _memory(a):
    """Which memory an array is in: the object at the end of its chain of bases (the numpy
    array that allocated it, or the buffer it was made from), a CUDA array's storage."""
    if a.__class__ is CudaArray:
        return ("cuda", a.t.untyped_storage().data_ptr())
    b = getattr(a, "base", None)
    while b is not None:
        a = b
        b = getattr(a, "base", None)
    return id(a)


def _donatable(p, residuals, outs):
    """Whether the saved values the backward would write over are the node's alone: arrays
    that own their memory and are no output of the call (an output the user holds, or a
    view of one, must keep its values)."""
    for i in p.bwd_donors:
        r = residuals[i]
        if type(r) is not np.ndarray or r.base is not None or not r.flags.writeable:
            return False
        for o in outs:
            if o._data is r or o._data.base is r:
                return False
    return True


def _compiled_vjp(g, out, *inputs, ctx, cls, nout):
    p = cls
    gs = g if isinstance(g, tuple) else (g,)
    live = 0                     # the inputs the outputs with a gradient depend on
    for m, s, d in zip(p.out_masks, gs, p.out_diff):
        if s is not None and d:
            live |= m
    # the gradients' types: the inputs' of this call (a dynamic program's sizes change)
    metas = tuple([(tuple(inputs[i].shape), inputs[i].dtype) for i in p.wrt_pos])
    res = apply(P["compiled_backward"], tuple(gs) + (ctx,), {"prog": p, "metas": metas})
    grads = [None] * len(inputs)
    for j, i in enumerate(p.wrt_pos):
        if live >> j & 1:
            grads[i] = res[j]
    return tuple(grads)


def _seeds(p, gs, zeros, ctx):
    if len(gs) < len(p.out_meta):         # the written-back values (functionalize) get no gradient
        gs = tuple(gs) + (None,) * (len(p.out_meta) - len(gs))
    else:
        for g in gs:
            if g is None:
                break
        else:
            return list(gs)
    metas = p.out_meta
    if p.sym_sources:                      # a dynamic program's output shapes, for this call
        metas = symbolic.substitute(metas, _sym_values(p, ctx.__dict__["_inputs"]))
    return [zeros(shape, dt) if g is None else g for g, (shape, dt) in zip(gs, metas)]


def _grad_metas(p, ctx):
    """(shape, dtype) of each input the program differentiates, as the call that made the
    node `ctx` passed it (what torch's zeros for a missing gradient take)."""
    meta = ctx._args_meta
    return [meta[i] for i in p.wrt_pos]


def _start_backward(p, ctx, counts=True):
    """What every backward through a compiled call does first: refuse a freed graph and
    inputs changed in place since the forward, and count the backward (for _speculate:
    a create_graph backward runs its own program and does not count, or the forward would
    take gradients nobody reads)."""
    if ctx._saved is None:
        raise RuntimeError(ctx.__dict__.get("_why") or FREED_MSG)      # (_why: _stale_grad_fn)
    for s in ctx.__dict__["_read"]:
        _check_version(s, ctx)
    if counts:
        p.bwd_count += 1


_BIND_SOURCE = {"seed": "s", "in": "a", "res": "r"}        # a backward argument's source; any other kind: a constant


def _bind_picker(binds):
    """The backward's arguments from (seeds, the call's input arrays, the saved values) as one
    generated function of them: a list display instead of a loop over the binds at every
    backward (a constant's array is read when it runs, as the loop read it)."""
    table, items = {}, []
    for kind, i in binds:
        src = _BIND_SOURCE.get(kind)
        if src is None:
            table[f"c{len(table)}"] = i
            items.append(f"c{len(table) - 1}._data")
        else:
            items.append(f"{src}[{int(i)}]")
    code = f"def pick(s, a, r):\n    return [{', '.join(items)}]\n"
    exec(builtins.compile(code, "<tracegrad:backward arguments>", "exec"), table)
    return table["pick"]


def _compiled_backward_kernel(*args, prog, metas=None):
    *gs, ctx = args
    p = prog
    _start_backward(p, ctx)
    d = ctx.__dict__
    seeds = _seeds(p, gs, _zeros_array, ctx)
    mask = _inexact_without(p, gs)
    if mask is not None:
        _check_recomputed(ctx)
        with no_grad():
            res = _masked_backward(p, mask)(*[_as_tensor(s) for s in seeds], *d["_inputs"])
        return _grad_arrays(p, [None if r is None else r._data for r in res], ctx)
    written = d["_untracked"] != UNTRACKED_WRITES[0] and not p.writeback
    arrays = d["_arrays"]
    if written:
        # a write through .data (or x.data = y) since the forward: the backward reads the
        # inputs as they are now, as autograd reads a saved tensor
        _check_untracked_read(p, ctx)
        arrays = [t._data for t in d["_inputs"]]
    if "_grads" in d:
        seed = np.asarray(seeds[p.out_diff.index(True)])
        if not written and (seed == 1).all():
            return _handed_over(p, d, ctx)
        # The forward's gradient is for a seed of one and the inputs as they were: seed * it
        # rounds otherwise than the backward, which carries the seed through every step
        # ((loss / 3).backward()). The forward's saved values are recomputed and the backward
        # runs as for a call that did not take its gradient; later calls do not take it.
        p.spec_ok = False
        del d["_grads"]
        d["_residuals"] = p.fwd_fn(*arrays)[p.n_out:]
    # the backward's arguments: seeds, the call's input arrays, the saved values, constants
    pick = p.__dict__.get("bwd_pick")
    if pick is None:
        pick = p.bwd_pick = _bind_picker(p.bwd_binds)
    bargs = pick(seeds, arrays, d["_residuals"])
    if p.bwd_donors and d.get("_donate") and STATE.freeing_saved:
        d["_donate"] = False              # once: the saved values now hold the results
        res = p.bwd_fn(*bargs, donate=True)
    else:
        res = p.bwd_fn(*bargs)
    return _grad_arrays(p, res, ctx)


def _handed_over(p, d, ctx):
    """The gradients the forward took (for a seed of one): handed over as they are where the
    graph is freed after, else copies."""
    free = STATE.freeing_saved
    res = [r if r is None or free else r.copy() for r in d["_grads"]]
    if free:
        d["_grads"] = (None,) * len(d["_grads"])
    return _grad_arrays(p, res, ctx)


def _grad_arrays(p, res, ctx):
    out = []
    for r, (shape, dt) in zip(res, _grad_metas(p, ctx)):
        if r is None:
            r = np.zeros(shape, dt.np)
        elif r.__class__ is not np.ndarray and hasattr(r, "_tg_device"):
            r = r if r.dtype == dt.np else r.astype(dt.np)
        elif type(r) is not np.ndarray or r.dtype != dt.np:
            r = np.asarray(r, dt.np)
        out.append(r)
    return tuple(out)


def _compiled_backward_eager(*args, prog, metas=None):
    """create_graph=True: the backward as a function of (seeds, inputs), itself compiled
    (forward recomputed, then the backward IR), so its results carry a grad_fn of their
    own and differentiate again: any order of derivative runs generated code."""
    *gs, ctx = args
    p = prog
    _start_backward(p, ctx, counts=False)
    _check_untracked(ctx)
    if p.chain is None:
        p.chain = chain.Record(p)          # the calls that follow this program's are recorded
    seeds, mask = gs, None
    if len(gs) < len(p.out_meta) or _has_none(gs):      # (else every output has its gradient)
        seeds = _seeds(p, gs, _zeros_tensor, ctx)
        mask = _inexact_without(p, gs)
    ks, outs = _outputs_eager_saved(p, ctx)
    if mask is not None:
        _check_recomputed(ctx)
        res = _masked_backward(p, mask, ks)(*seeds, *ctx.__dict__["_inputs"], *outs)
    else:
        double = p.double if not ks else p.__dict__.setdefault("doubles", {}).get(ks)
        if double is None:
            double = CompiledFunction(_backward_function(p, outs=ks), backend=p.backend, name=f"{p.__name__}_grad",
                                      dynamic=False)
            double._warned = True          # where it cannot be traced it runs through the eager ops
            double._chains = False         # (its calls are steps of its caller's chain)
            if ks:
                p.doubles[ks] = double
            else:
                p.double = double
        res = double(*seeds, *ctx.__dict__["_inputs"], *outs)
    if len(res) == len(p.wrt_pos) and not _has_none(res):
        return tuple(res)
    out = []
    for r, (shape, dt) in zip(res, _grad_metas(p, ctx)):
        out.append(creation.zeros(shape, dtype=dt) if r is None else r)
    return tuple(out)


def _outputs_eager_saved(p, ctx):
    """The outputs of the call whose node ctx is that eager's graph saves (exp's result, which
    its derivative reads): their positions, and each as a tensor of the call's graph. The
    create_graph backward reads them as they are, rather than recomputed from the inputs, so
    that its results depend on them as torch's do (a derivative with respect to one, a hook
    on it, its graph freed with theirs)."""
    pos = p.out_saved_eager
    if not pos:
        return (), ()
    found = {s.output_nr: s for s in ctx.__dict__.get("_read") or () if s.tensor is None and s.output_nr in pos}
    ks = tuple([k for k in pos if k in found])
    outs = []
    for k in ks:
        _check_version(found[k], ctx)
        outs.append(_unpack_saved(ctx, found[k]))
    return ks, outs


def _has_none(xs):
    for x in xs:
        if x is None:
            return True
    return False


def _zeros_array(shape, dt):
    return np.zeros(shape, dt.np)


def _zeros_tensor(shape, dt):
    return creation.zeros(shape, dtype=dt)


def _inexact_without(p, gs):
    """None where the program's backward, with zeros for the outputs no gradient reached, gives
    what torch's gives; else the mask of the user outputs that have a gradient. Zeros are exact
    where every op they pass through also carries a present output's gradient (x + 0 is x); an
    op that only the absent outputs reach runs no rule in torch, and its rule on a zero
    gradient may give NaN (sqrt's at 0: 0 / 0) or anything at all (a custom Function's backward,
    which may also be told None for an output: set_materialize_grads(False))."""
    n = p.n_user
    if len(gs) >= n:
        for g in gs[:n]:
            if g is None:
                break
        else:
            return None                   # every output has a gradient: the common case
    mask = tuple(k < len(gs) and gs[k] is not None for k in range(n))
    if all(mask[k] or not p.out_diff[k] for k in range(n)):
        return None
    cache = p.__dict__.setdefault("zeros_exact", {})
    exact = cache.get(mask)
    if exact is None:
        g = p.traced_ir
        outs = g.outputs[:n]
        wrt = [p.traced_names[i] for i in p.wrt_pos]
        present = [o for o, m in zip(outs, mask) if m]
        absent = [o for o, m, d in zip(outs, mask, p.out_diff) if not m and d]
        reach = set(present)
        for o in present:
            reach |= networkx.ancestors(g.nx, o)
        only_absent = needed_values(g, absent, wrt) - reach
        exact = cache[mask] = not any(_runs_a_rule(g, v) for v in only_absent)
    return None if exact else mask


def _runs_a_rule(g, v):
    """Whether a zero gradient reaching value v runs a rule that no gradient would not: an op's,
    or for one output of several, a custom Function's backward told None for it (a multi-output
    op's other rules get zeros for it either way)."""
    a = g[v]
    if a["op"] == "input":
        return False
    if a["op"] == "proj":
        return not g[a["args"][0]]["params"].get("materialize", True)
    return True


def _check_untracked(ctx):
    """Before a backward that recomputes the call's forward from its inputs as they are now
    (_masked_backward, create_graph): an input written through `.data` since the call, or
    given another `.data`, would recompute other values than the forward's, where torch's
    backward reads those its nodes saved (the intermediate values as they were). Autograd
    does not see such a write, so torch's gradient mixes the old and the new values; the
    recomputed one would be neither: it raises rather than give another number."""
    d = ctx.__dict__
    inputs = d["_inputs"]
    arrays = d["_arrays"] or ()
    if untracked_writes_since(d["_untracked"], [*arrays, *[t._data for t in inputs]]):
        raise RuntimeError(
            f"the backward of the compiled function '{ctx._params['cls'].__name__}' recomputes its forward from its "
            f"inputs (create_graph=True, or the gradient of some of its outputs alone), and one of them was written "
            f"through `.data`, or given another `.data`, after the call: autograd does not see such a write, and the "
            f"recomputed gradient would not be the one of the values the call used. Take the gradient before the "
            f"write, or call the function again after it.")


def _check_untracked_read(p, ctx):
    """Before the generated backward reads the inputs as they are now (a write through `.data`
    since the call). torch's nodes read a saved input as it is now, but a view of one (x[None],
    x.reshape(...), vector @ matrix's unsqueezed x) as the forward made it: the old memory after
    `x.data = y`, the new values after a write into it. The backward re-derives views from the
    inputs it is given, and holds copies of some (Program.res_views): it cannot read what torch's
    reads where an input that eager saves through a view (Program.view_saved) was given another
    `.data`, or where the memory of one it copied a view of was written, or of one torch's matmul
    copied for its node (Program.copy_saved: torch's backward reads the copy). It raises there
    rather than give another number."""
    d = ctx.__dict__
    inputs, arrays = d["_inputs"], d["_arrays"] or ()
    skip = set(p.write_pos or ())
    views = p.__dict__.get("view_saved") or ()
    swapped = [i for i, (t, a) in enumerate(zip(inputs, arrays)) if i not in skip and t._data is not a]
    kept = [a for i, a in enumerate(arrays) if i not in swapped]
    copied = [a for i, a in enumerate(arrays) if i in (p.__dict__.get("copy_saved") or ()) and i not in swapped]
    if any(i in views for i in swapped) or (p.res_views and untracked_writes_since(d["_untracked"], kept)) or \
            (copied and untracked_writes_since(d["_untracked"], copied)):
        raise RuntimeError(
            f"the backward of the compiled function '{ctx._params['cls'].__name__}' reads a view of one of its "
            f"inputs, and that input was given another `.data` (or its memory written through `.data`) after the "
            f"call: autograd does not see such a write, and the compiled backward cannot read what torch's saved "
            f"values would. Take the gradient before the write, or call the function again after it.")


def _check_recomputed(ctx):
    """Before _masked_backward, which recomputes the forward from the call's inputs as they
    are now: one written in place since the call would give another gradient than the
    forward's values (torch's, from the values its nodes saved), so it raises torch's error."""
    d = ctx.__dict__
    _check_untracked(ctx)
    for t, (vc, v) in zip(d["_inputs"], d.get("_taken", ())):
        if vc[0] != v:
            s = Saved(t, False)
            s.vc, s.version = vc, v
            _check_version(s, ctx)


def _masked_backward(p, mask, outs=()):
    """The backward of the outputs in `mask` alone, as a compiled function of (seeds...,
    inputs...) that recomputes the forward: what the program runs where zeros for the other
    outputs would not be exact (_inexact_without). `outs`: as _backward_function's."""
    progs = p.__dict__.setdefault("masked", {})
    f = progs.get((mask, outs))
    if f is None:
        f = progs[(mask, outs)] = CompiledFunction(_backward_function(p, mask, outs), backend=p.backend,
                                                   name=f"{p.__name__}_grad", dynamic=False)
        f._warned = True                  # where it cannot be traced it runs through the eager ops
    return f


def _as_tensor(a):
    return a if isinstance(a, Tensor) else Tensor._make(np.asarray(a), D.from_numpy_dtype(np.asarray(a).dtype))


def _backward_function(p, mask=None, outs=()):
    """The forward and backward IR of p as one function of (seeds..., inputs...); with `mask`,
    the backward of the user outputs it marks alone (the others' seeds are not read). `outs`:
    the positions of user outputs given after the inputs, which the backward reads where it
    reads their values (_outputs_eager_saved)."""
    n_out = len(p.out_meta)
    n_given = len(outs)
    prepared = {}
    keep = (lambda k: True) if mask is None else (lambda k: k < len(mask) and mask[k])

    def prepare(values):
        # derived from the graph as traced, not as optimised: a rewrite such as x - x -> 0 must
        # not take an input out of the graph of the next derivative
        fwd = p.traced_ir.copy() if values is None else _concrete_graph(p.traced_ir, values)
        bwd = derive(fwd, [o for k, o in enumerate(fwd.outputs) if keep(k)], [p.traced_names[i] for i in p.wrt_pos])
        where = {v: k for k, v in enumerate(p.traced_names) if v is not None}
        # the traced graph's inputs from the call's: a constant the passes dropped is its own value
        pick = [where.get(v, fwd[v].get("value")) for v in fwd.inputs]
        want = [bwd[n]["fwd"] for n in bwd.inputs if bwd[n]["role"] == "saved"]
        given = {fwd.outputs[k]: j for j, k in enumerate(outs) if fwd.outputs[k] is not None}
        fwd.outputs = [V(w) for w in want]
        return fwd, bwd, pick, want, given

    def backward_of(*args):
        seeds, inputs = args[:n_out], args[n_out:len(args) - n_given]
        # a dynamic program's graph has symbolic sizes: made concrete for the sizes of this call
        values = _sym_values(p, inputs) if p.sym_sources else None
        key = None if values is None else tuple(sorted(values.items()))
        got = prepared.get(key)
        if got is None:
            if len(prepared) >= 8:
                prepared.clear()
            got = prepared[key] = prepare(values)
        fwd, bwd, pick, want, given = got
        vals = dict(zip(want, run_eager(fwd, [inputs[k] if type(k) is int else k for k in pick])))
        for v, j in given.items():
            if v in vals:
                vals[v] = args[len(args) - n_given + j]
        seeds = [sd for k, sd in enumerate(seeds) if keep(k)]
        return tuple(run_eager(bwd, backward_args(bwd, seeds, lambda v, a: vals[v])))
    return backward_of


def _concrete_graph(g, values):
    """A copy of graph g (of a dynamic program) with its symbolic sizes evaluated for `values`."""
    g = g.copy()
    for a in g.nx._node.values():
        for k in ("shape", "params", "args"):
            if symbolic.has_sym(a[k]):
                a[k] = symbolic.substitute(a[k], values)
    return g


def _no_forward(*a, **k):
    raise RuntimeError("a compiled call runs through its program, not the op table")


Primitive("compiled_call", "*xs", _no_forward, shape=lambda *a, **k: _no_forward(), dtype="same", multi=True,
          vjp=_compiled_vjp, takes_ctx=True, grad_fn="CompiledFunctionBackward",
          triton=Refuse("a nested compiled call is not lowered"))
Primitive("compiled_backward", "*gs", _compiled_backward_kernel, shape=lambda *a, prog, metas: list(metas),
          dtype=lambda args: (None, D.float32), multi=True, eager=_compiled_backward_eager,
          grad_fn="CompiledFunctionBackwardBackward", triton=Refuse("a nested compiled call is not lowered"))
Primitive("detach", "x", lambda x: x, shape=lambda x: tuple(x.shape), dtype="same", vjp=lambda g, out, x: (None,),
          grad_fn="DetachBackward0", triton=identity, layout="view_c")
class CompiledFunctionBackward(Node):
    """The grad_fn of a compiled call's outputs. When the engine frees the graph after a
    backward without retain_graph (it sets `_saved` to None), the forward's saved
    values go with it, as torch frees saved tensors."""
    __slots__ = ()

    @property
    def _saved(self):
        return self.__dict__.get("_saved_slots")

    @_saved.setter
    def _saved(self, value):
        d = self.__dict__
        d["_saved_slots"] = value
        if value is None:
            for k in ("_residuals", "_arrays", "_inputs", "_read", "_grads"):
                d.pop(k, None)


_NODE_CLS = [CompiledFunctionBackward]
_COMPILED_CALL = P["compiled_call"]


# -- the compiled callable ------------------------------------------------------------------------

_EAGER = object()
_TENSORS_SPEC = {}          # number of arguments -> the flattened structure of f(t1, ..., tn), and its key


class _Ran:
    """What _compile returns where it ran the function eagerly for this call already."""
    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result


def _all_tensors(args):
    for a in args:
        if not isinstance(a, Tensor):
            return False
    return True


class CompiledFunction:
    """What `compile` returns for a function: call it as the function."""
    _guard_by_identity = True      # its cache and last program change with every call (runtime/sources.py)
    _chains = True                 # the calls after its calls may run as one program (tracegrad/chain.py)

    def __get__(self, obj, objtype=None):
        """A compiled function in a class body is a method, as torch.compile's is: called on an
        instance, the instance is its first argument (guarded as any argument object); a compiled
        staticmethod object takes no instance, as the staticmethod itself."""
        return self if obj is None or self._fn.__class__ is staticmethod else types.MethodType(self, obj)

    def _runs_when_traced(self):
        """What a call of this runs when a trace reaches it (runtime/side_effects.py reads it, so
        it imports nothing of this module)."""
        return self._module if self._module is not None else self._fn

    def __init__(self, fn, backend="auto", fullgraph=False, dynamic=None, module=None, cache_limit=8, name=None):
        if backend not in ("auto", "numpy", "triton"):
            raise ValueError(f"tracegrad.compile: unknown backend {backend!r} (expected 'auto', 'numpy' or 'triton')")
        if module is None and hasattr(fn, "__name__"):
            functools.update_wrapper(self, fn, updated=())
        self._fn = fn
        self._module = module
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.__name__ = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or \
            type(fn).__name__
        self.cache = ProgramCache(self.__name__, cache_limit)
        # a function dropped by its user frees its programs, which the engine's cache may hold
        weakref.finalize(self, self.cache.clear).atexit = False
        self._warned = False
        self._effects = None
        self.last_program = None
        # automatic dynamic shapes: per argument structure (the key without sizes), the
        # sizes of the calls compiled so far and the (leaf, dim) pairs that changed between them
        self._seen = {}
        self._dims = {}

    def __call__(self, *args, **kwargs):
        if _ACTIVE[0] and TRACING.stack:
            return self._fn(*args, **kwargs)    # called inside another trace: inlined into it
        if _DUAL[0]:
            # a program computes no tangents: eagerly, every op carries them (autograd/forward_ad.py)
            warnings.warn(f"tracegrad.compile: {self.__name__} runs eagerly inside a forward AD dual_level "
                          f"(autograd.forward_ad): a compiled program carries no tangents", UserWarning, stacklevel=2)
            return self._fn(*args, **kwargs)
        if _MODULE_HOOKS[0]:
            warnings.warn(f"tracegrad.compile: {self.__name__} runs eagerly while global module backward hooks "
                          f"(register_module_full_backward_hook) are registered, so that they run",
                          UserWarning, stacklevel=2)
            return self._fn(*args, **kwargs)
        if _SAVED_HOOKS[0] and saved_tensors_hooks_active():
            # a compiled program saves its own values for backward, out of the hooks' reach
            warnings.warn(f"tracegrad.compile: {self.__name__} is called under saved_tensors_hooks (or save_on_cpu, "
                          f"checkpoint); it runs eagerly so that the hooks see every tensor saved for backward",
                          UserWarning, stacklevel=2)
            return self._fn(*args, **kwargs)
        if not kwargs and _all_tensors(args):
            leaves = list(args)                 # the common call: tensors only, no keywords
            spec = _TENSORS_SPEC.get(len(args))
            if spec is None:
                spec = flatten(((LEAF,) * len(args), {}), [])
                spec = _TENSORS_SPEC[len(args)] = (spec, canonical(spec))
            spec, cspec = spec
        else:
            leaves = []
            spec = flatten((args, kwargs), leaves)
            cspec = canonical(spec)
        key = guard_key(cspec, leaves)
        env = (args, kwargs)
        p = self.cache.lookup(key, env)
        if p is None and self._dims:
            dims = self._dims.get(_struct_key(key))
            if dims:                  # a program compiled with symbolic sizes, its guards checked
                p = self.cache.lookup(_dynamic_key(key, dims), env, leaves)
        if p is None:
            if self.cache.full():
                self._recompile_limit()
                return self._fn(*args, **kwargs)
            dyn = self._mark(key, leaves)
            p, guards = self._compile(args, kwargs, dyn)
            if p.__class__ is _Ran:
                self.cache.put(key, guards, _EAGER)
                return p.result
            if p is not _EAGER and p.sym_check is not None:
                # (the dims this build marked: another thread's failed build may have dropped them
                # from self._dims since)
                key = _dynamic_key(key, dyn[2])
            self.cache.put(key, guards, p)
        if p is _EAGER:
            return self._fn(*args, **kwargs)
        if p.read_ids is not None and not p.read_ids.isdisjoint([id(t) for t in leaves]):
            return self._arg_is_read(args, kwargs)
        distinct = None
        if p.grad_slots or p.out_grads:
            _rebind_grads(p)
        if p.writeback:
            # the arrays of the call, each an allocation of its own (the common call): no alias,
            # and no donor shares memory with another input (the new learning rates' arrays are new)
            distinct = _distinct([t._data for t in leaves] + [c._data for c in p.consts] +
                                 [t._data for t in p.write_extra])
            if not distinct and writes_alias(p, leaves, False):
                return self._aliased(args, kwargs)
        self.last_program = p
        rec = p.chain
        if rec is not None and self._chains and rec.state is not chain.OFF and not chain.SUSPENDED[0]:
            out = chain.on_call(self, p, rec, args, kwargs, leaves, distinct)
            if out is not chain.NOT_STEP:
                return out
        try:
            return run_program(p, leaves, distinct)
        except IndexError:
            # numpy's error from an index out of range in a kernel (masked_scatter's gather past
            # the end of a source shorter than the mask's count of ones): the eager run raises
            # torch's error, naming the op. The program raised before writing anything back
            return self._fn(*args, **kwargs)

    def _aliased(self, args, kwargs):
        fs = _caller_frame()
        self._warn(f"tracegrad.compile: {self.__name__} writes in place to a tensor that shares memory with another "
                   f"tensor of this call (the same tensor passed twice, a view of it, or a tensor's .data or .detach() "
                   f"written in place where the function also writes the tensor); the program assumes "
                   f"distinct tensors, so this call runs eagerly", fs.filename if fs else "<unknown>",
                   fs.lineno if fs else 0)
        return self._fn(*args, **kwargs)

    def _arg_is_read(self, args, kwargs):
        fs = _caller_frame()
        self._warn(f"tracegrad.compile: {self.__name__} is passed a tensor that it also reads from elsewhere "
                   f"(a global, a closure, a module's parameter); the trace took the argument and that tensor for "
                   f"two (`a is W` was False there), so this call runs eagerly", fs.filename if fs else "<unknown>",
                   fs.lineno if fs else 0)
        return self._fn(*args, **kwargs)

    def _recompile_limit(self):
        """torch's recompile limit: past `cache_limit` programs, one warning, then calls that
        match none of them run eagerly."""
        if self.cache.warned:
            return
        self.cache.warned = True
        why = self.cache.last_miss or "a guard"
        warnings.warn(f"tracegrad.compile: {self.__name__} was recompiled {self.cache.compiles} times and hit its "
                      f"recompile limit (cache_limit={self.cache.limit}); this call needs another program because "
                      f"{why}. Calls that match none of the compiled programs run eagerly from now on: pass values "
                      f"that change every call as tensors, or raise cache_limit.", RuntimeWarning, stacklevel=3)

    def _mark(self, key, leaves):
        """Automatic dynamic shapes (torch's): the dims of the argument tensors that differ
        from a call compiled before with the same structure become symbolic (all of them
        with dynamic=True; none with dynamic=False). -> (symbolic (leaf, dim) pairs, the
        marked dims held at their size 0 or 1 in this call, all the marked dims), or None: compile
        statically."""
        if self.dynamic is False or not leaves:
            return None
        struct = _struct_key(key)
        marked = self._dims.get(struct)
        if marked is None and struct in self._seen and self._seen[struct] is None:
            return None                  # a dynamic build of this structure failed before
        shapes = [t._data.shape for t in leaves]
        if any(t._data.__class__ is not np.ndarray or not t._data.flags.c_contiguous for t in leaves):
            return None                  # the numpy backend, arguments in C order only
        marked = set(marked or ())
        if self.dynamic is True:
            marked.update((i, d) for i, s in enumerate(shapes) for d in range(len(s)))
        seen = self._seen.setdefault(struct, [])
        if seen is None:
            return None                  # a dynamic build of this structure failed meanwhile (another thread's)
        for prev in seen:
            for i, (a, b) in enumerate(zip(prev, shapes)):
                marked.update((i, d) for d, (x, y) in enumerate(zip(a, b)) if x != y)
        if shapes not in seen and len(seen) < 4:
            seen.append(shapes)
        if not marked:
            return None
        self._dims[struct] = frozenset(marked)
        sym = tuple(sorted((i, d) for i, d in marked if shapes[i][d] >= 2))
        fixed = tuple((i, d, shapes[i][d]) for i, d in sorted(marked) if shapes[i][d] < 2)
        return sym, fixed, frozenset(marked)

    def _compile(self, args, kwargs, dyn=None):
        """A program for this call and the guards it holds under (or _EAGER and the guards of
        that decision: a fallback taken on a branch that a global chose is taken again only
        while the global is the same; or an _Ran holding the result of an eager run this
        call made, and its guards). With `dyn` (see _mark) the program's sizes there are
        symbolic where its build allows it; where anything in the build fails with them,
        it is built for this call's sizes alone."""
        effect = self._side_effect(args, kwargs)
        if effect is not None:
            msg = (f"tracegrad.compile: {self.__name__} has a Python side effect at {effect.describe()}; "
                   f"a trace would run it once, with symbolic values")
            if self.fullgraph:
                raise CompileError(msg + " (fullgraph=True)")
            self._warn(msg + "; running it eagerly", effect.filename, effect.lineno)
            return _EAGER, build_guards(self._fn, self._module, args, kwargs)
        reads = {}
        p = None
        if dyn is not None:
            try:
                p = build(self._fn, args, kwargs, self.__name__, self.backend, value_reads=reads, dyn=dyn)
            except Exception as e:
                if _debug() or os.environ.get("TRACEGRAD_DEBUG_DYNAMIC"):
                    print(f"tracegrad.compile: {self.__name__}: symbolic sizes refused ({type(e).__name__}: {e}); "
                          f"compiled for these sizes", file=sys.stderr)
                self._seen[_struct_key_of(args, kwargs)] = None
                self._dims.pop(_struct_key_of(args, kwargs), None)
                reads = {}
        try:
            if p is None:
                p = build(self._fn, args, kwargs, self.__name__, self.backend, value_reads=reads)
        except Exception as e:
            if not isinstance(e, TraceError) and not _untraceable(e):
                raise
            failure = e
        else:
            exempt = frozenset((id(group), key) for _, group, key, _ in p.lr_inputs)      # inputs of every call
            guards = build_guards(self._fn, self._module, args, kwargs, used=p.consts, value_reads=reads,
                                  exempt=exempt)
            if p.guard_spec is not None:
                guards.add(_step_guard(p.guard_spec, frozenset(id(t) for _, t in p.grad_slots + p.out_grads)))
            for i, strides in (p.layout_reads or {}).items():
                guards.add(_strides_guard(i, strides))
            p.read_ids = guards.tensor_ids or None
            return p, guards
        # a function that read an option its programs would read at every call runs eagerly
        # whatever the option's value
        guards = build_guards(self._fn, self._module, args, kwargs, value_reads=reads,
                              exempt=frozenset(getattr(failure, "exempt", ())))
        fs = _user_frame(failure.__traceback__)
        context = ""
        if fs is None:
            # all of the trace ran in tracegrad's code (a library module compiled as it is):
            # name the user's line that made the call
            fs = _caller_frame()
            context = _library_context(failure.__traceback__)
        where = f"{fs.filename}:{fs.lineno}" if fs else "?"
        line = (fs.line or "").strip() if fs else ""
        msg = f"tracegrad.compile: {self.__name__} cannot be traced at {where} (`{line}`): {failure}{context}"
        if self.fullgraph:
            raise CompileError(msg + " (fullgraph=True)") from failure
        if isinstance(failure, Untraceable):
            # the function's code raised under the trace: a construct the trace does not
            # support, or the user's own error (a shape mismatch). The function has no side
            # effect (checked above), so run it eagerly now: the user's error raises here,
            # once and as itself; else the trace's failure was the tracer's, and this call's
            # result is the eager one
            del failure
            result = self._fn(*args, **kwargs)
            self._warn(msg + "; running it eagerly", fs.filename if fs else "<unknown>", fs.lineno if fs else 0)
            return _Ran(result), guards
        self._warn(msg + "; running it eagerly", fs.filename if fs else "<unknown>", fs.lineno if fs else 0)
        return _EAGER, guards

    def _side_effect(self, args, kwargs):
        """The first Python side effect the function would have (runtime/side_effects.py), or None."""
        if self._effects is None:
            self._effects = SideEffects(self._fn, self._module)
        found = self._effects.find(args, kwargs)
        return found[0] if found else None

    def _warn(self, msg, filename, lineno):
        if not self._warned:
            self._warned = True
            warnings.warn_explicit(msg, UserWarning, filename, lineno)


_MARK = None         # a symbolic size's place in a dynamic program's key


def _struct_key(key):
    """guard_key's key with each tensor's shape replaced by its rank."""
    return key[:4] + (tuple([(len(t[0]),) + t[1:] for t in key[4]]),) + key[5:]


def _dynamic_key(key, dims):
    """guard_key's key with the sizes at the (leaf, dim) pairs `dims` replaced by a marker."""
    return key[:4] + (tuple([(tuple([_MARK if (i, d) in dims else n for d, n in enumerate(t[0])]),) + t[1:]
                             for i, t in enumerate(key[4])]),) + key[5:]


def _struct_key_of(args, kwargs):
    leaves = []
    spec = flatten((args, kwargs), leaves)
    return _struct_key(guard_key(canonical(spec), leaves))


def _step_guard(spec, rebound=frozenset()):
    """What a whole step's recorded writes assumed (functionalize.guard_key): the options and
    state layout of the optimizers it stepped, the .grad tensors it read (held here, so that
    the ids the key compares are never another tensor's; those in `rebound`, which the
    program reads afresh at every call, by their metadata)."""
    key = functionalize.guard_key(*spec, rebound)
    held = [t._grad for t in spec[1]]
    return Guard(lambda env, held=held: functionalize.guard_key(*spec, rebound), lambda k: k == key,
                 "an optimizer's options or state, the .grad tensors it read (a .grad made anew outside, "
                 "after zero_grad() set it to None, where the function also writes it; "
                 "zero_grad(set_to_none=False) keeps it), or a hook registered since on a parameter its "
                 "backward() reaches",
                 lambda code: functionalize.emit_guard_key(code, *spec, rebound))


def _strides_guard(i, strides):
    """The strides of argument tensor i, which a view's check in the trace read (an argument
    not in C order): the key holds its memory order only, and another layout of that order
    may not take the view (eager raises there)."""
    def read(env):
        leaves = []
        flatten(env, leaves)
        d = leaves[i]._data
        return tuple(s // d.itemsize for s in d.strides) if d.__class__ is np.ndarray and d.itemsize else None
    return Guard(read, lambda s: s == strides, f"the strides of argument tensor {i} (a view of it was checked "
                 f"against strides {strides})")


def _drop_detach(g):
    """A graph that is differentiated no further (a whole step's, or one nothing in it
    requires grad): its detach ops (gradients backward() made, values computed under
    no_grad) are identities, and as such only cost copies."""
    from .passes.rewrite import rewrite  # deferred: import tracegrad does not load tracegrad.passes.rewrite
    return rewrite(g, lambda b, n, a, args: args[0] if a["op"] == "detach" else None)


def _untraceable(e):
    return isinstance(e, (DerivativeError, NotImplementedError))


class CompiledModule(CompiledFunction):
    """What `compile` returns for an nn.Module: calls run its compiled forward; attributes
    are the module's."""

    _guard_by_identity = False      # a module's state is guarded as any module's

    def __init__(self, module, name=None, **kw):
        super().__init__(module, module=module, **kw)
        self.__name__ = name or type(module).__name__
        self.cache.name = self.__name__

    @property
    def _orig_mod(self):
        return self._module

    def __getattr__(self, item):
        return getattr(self.__dict__["_module"], item)


_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def compile(fn=None, *, backend="auto", fullgraph=False, dynamic=None, mode=None, options=None, name=None,
            disable=False, recompile_limit=None, cache_limit=8):
    """Compile a function or module: `@compile`, `@compile(fullgraph=True)`, `compile(model)`.
    `dynamic`, as torch's: None (automatic) compiles a dimension symbolically once a call
    changed its size; True does so from the first call for every dimension of every
    tensor argument; False compiles a program for each set of sizes.
    torch.compile's other arguments: `backend="inductor"` (torch's default) is "auto"; `mode`
    is checked as torch checks it and changes nothing (there is one way to compile here);
    `options` (Inductor's settings) are ignored with a warning that names them; `name`
    names the function in messages; `disable=True` returns `fn` itself; `recompile_limit` is
    `cache_limit`, the programs kept before calls run eagerly."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if recompile_limit is not None:
        cache_limit = recompile_limit
    if backend == "inductor":
        backend = "auto"
    if fn is None:
        return lambda f: compile(f, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options,
                                 name=name, disable=disable, cache_limit=cache_limit)
    if disable:
        return fn
    if options:
        warnings.warn(f"tracegrad.compile ignores options={sorted(options)!r}: they are Inductor's settings, and "
                      f"tracegrad compiles its own way", UserWarning, stacklevel=2)
    kw = dict(backend=backend, fullgraph=fullgraph, dynamic=dynamic, cache_limit=cache_limit)
    if hasattr(fn, "forward") and hasattr(fn, "parameters"):
        return CompiledModule(fn, name=name, **kw)
    if not callable(fn):
        raise TypeError(f"tracegrad.compile expects a function or a module, got {type(fn).__name__}")
    return CompiledFunction(fn, name=name, **kw)


chain.RUN_PROGRAM[0] = run_program
chain.ARRAY_RUNNER[0] = array_runner
chain.HOOK_COUNTS[:] = [_SAVED_HOOKS, _MODULE_HOOKS]
chain.HIDDEN_HOOKS[0] = hidden_saved_tensors_hooks
chain.STALE_GRAD_FN[0] = _stale_grad_fn
chain.COMPILER[0] = CompiledFunction

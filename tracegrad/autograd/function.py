"""Custom autograd Functions, as torch's: static forward(ctx, ...) / backward(ctx, ...).

In the IR a Function is one node (printed with its class name) that the differentiation
pass treats as opaque: its derivative is a call of the user's backward, bound at run time
to the grad_fn node, which is also the `ctx` (as in torch). Run with create_graph=True,
that call records the user's backward ops, so double backward works through a backward
written in tracegrad ops.

The same run-time call mechanism runs grad_fn hooks (`register_hook`, `register_prehook`).
"""
import functools
import warnings
import traceback
import inspect

import numpy as np

from .. import _dtype as D
from ..grad_mode import STATE, no_grad, enable_grad
from ..tensor import Tensor
from ..ops.lowering import Refuse, identity
from ..ops.primitives import Primitive, PRIMITIVES as P, check_hook_results, handed_out
from .graph import Node, Saved, node_class, _seq
from . import views
from .. import tracing as _tracer
from ..tracing import apply, Proxy, value_of, TraceError, TRACING, _ACTIVE, next_node_seq
from ..ops.primitives import sum_to
from .engine import unpack, _check_version, UNDEFINED_OK, FREED_MSG
from ..autodiff import differentiable_reach
from .. import functionalize
from . import forward_ad


# -- the primitives: the Function node, and the run-time calls in backward graphs ------------------

def _function_vjp(g, out, *inputs, ctx, cls, nout):
    metas = tuple((tuple(x.shape), x.dtype) if isinstance(x, Tensor) else None for x in inputs)
    gs = g if isinstance(g, tuple) else (g,)
    res = apply(P["function_backward"], tuple(gs) + (ctx,), {"metas": metas})
    it = iter(res)
    return tuple(next(it) if m is not None else None for m in metas)


def _no_forward(*a, **k):
    raise RuntimeError("a custom Function's forward runs through Function.apply, not the op table")


Primitive("function", "*xs", _no_forward, shape=lambda *a, **k: _no_forward(), dtype="same", multi=True,
          vjp=_function_vjp, takes_ctx=True, grad_fn=lambda a, p: p["cls"].__name__ + "Backward",
          triton=Refuse("custom autograd Functions call Python"))


def _check_grads(ctx, grads, metas):
    name = type(ctx).__name__
    n_in = len(metas)
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != n_in:
        # torch allows extra trailing Nones
        if len(grads) > n_in and all(g is None for g in grads[n_in:]):
            grads = grads[:n_in]
        else:
            raise RuntimeError(f"function {name} returned an incorrect number of gradients (expected {n_in}, "
                               f"got {len(grads)})")
    return grads


def _check_grad_kind(name, i, g, for_tensor):
    """torch's checks on the gradient a custom backward returned at position i: a Tensor or
    None for a tensor argument, None for any other argument."""
    if not for_tensor:
        if g is not None:
            raise RuntimeError(f"function {name} returned a gradient different than None at position {i + 1}, but "
                               f"the corresponding forward input was not a Variable")
    elif g is not None and not isinstance(g, Tensor):
        raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")


def _fit_grad(name, i, g, meta, as_tensor):
    shape, dtype = meta
    gs = tuple(g.shape)
    if gs != tuple(shape):
        try:
            np.broadcast_shapes(gs, tuple(shape))
            ok = len(shape) >= 0 and np.broadcast_shapes(gs, tuple(shape)) == gs and np.prod(shape) != 0
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"Function {name} returned an invalid gradient at index {i} - got "
                               f"[{', '.join(map(str, gs))}] but expected shape compatible with "
                               f"[{', '.join(map(str, shape))}]")
        g = sum_to(g, tuple(shape)) if as_tensor else None
        if not as_tensor:
            raise AssertionError
    if g.dtype is not dtype and dtype.is_floating_point:
        g = g.to(dtype)
    return g


def _user_backward(cls):
    """The backward a custom Function defines: `backward` or its alias `vjp`, not both."""
    has_bw = getattr(cls.backward, "__func__", cls.backward) is not Function.backward
    has_vjp = getattr(cls.vjp, "__func__", cls.vjp) is not Function.vjp
    if has_bw and has_vjp:
        raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should "
                           "only implement one of them.")
    return cls.vjp if has_vjp else cls.backward


def _materialized(ctx, gs):
    """The gradients a Function's backward is given: zeros for the tensor outputs none reached
    unless set_materialize_grads(False); outputs that are not tensors get None (as in torch)."""
    if not ctx.__dict__.get("_materialize", True):
        return gs
    outs = ctx._out_meta
    is_tensor = ctx.__dict__.get("_tensor_outs") or (True,) * len(outs)
    return [g if g is not None or not t else Tensor._make(np.zeros(shape, dt.np), dt)
            for g, (shape, dt), t in zip(gs, outs, is_tensor)]


def _call_user_backward(ctx, gs, metas, as_tensor):
    cls = ctx._params["cls"]
    gs = _materialized(ctx, gs)
    res = _check_grads(ctx, _user_backward(cls)(ctx, *gs), metas)
    out = []
    name = type(ctx).__name__
    for i, (g, m) in enumerate(zip(res, metas)):
        _check_grad_kind(name, i, g, m is not None)
        if m is None:
            continue
        if g is None:
            if ctx.needs_input_grad[i] and not getattr(UNDEFINED_OK, "on", False):
                # a backward generated as one program needs a value: zeros stand for None
                g = Tensor._make(np.zeros(m[0], m[1].np), m[1])
            else:
                out.append(None)
                continue
        out.append(_fit_grad(name, i, g, m, True))
    return tuple(out)


# whether a Function node with no edge (applied to a view made under no_grad of a tensor that
# requires grad) was ever made: backward() then looks for such nodes among those it reaches
SINKS_MADE = [False]


def call_unreached(ctx, gs):
    """The backward of a Function node with no path to a leaf, as torch's backward() runs it (it
    runs every node it reaches): given the gradients of its outputs (None where none reached
    one). What it returns is checked for its count and kinds alone: torch checks no shape or
    dtype of a gradient for an input without an edge, and nothing takes it."""
    cls = ctx._params.get("cls")
    if not (isinstance(cls, type) and issubclass(cls, Function)):
        return None                  # (a compiled call's node: no user backward to run)
    metas = ctx._args_meta
    res = _check_grads(ctx, _user_backward(cls)(ctx, *_materialized(ctx, list(gs))), metas)
    for i, (g, m) in enumerate(zip(res, metas)):
        _check_grad_kind(type(ctx).__name__, i, g, m is not None)
    return tuple(g for g, m in zip(res, metas) if m is not None)


def _function_backward_kernel(*args, metas):
    *gs, ctx = args
    grads = [None if g is None else Tensor._make(np.asarray(g), dt) for g, (_, dt) in zip(gs, ctx._out_meta)]
    handed_out(*grads)
    with no_grad():
        res = _call_user_backward(ctx, grads, metas, True)
    handed_out(*res)
    return tuple(None if r is None else r._data for r in res)


def _function_backward_eager(*args, metas):
    *gs, ctx = args
    return _call_user_backward(ctx, list(gs), metas, True)


def _function_backward_shape(*args, metas):
    return [m for m in metas if m is not None]


Primitive("function_backward", "*gs", _function_backward_kernel, shape=_function_backward_shape,
          dtype=lambda args: (None, D.float32), multi=True, eager=_function_backward_eager,
          grad_fn="FunctionBackwardBackward", triton=Refuse("custom autograd Functions call Python"))


def _wrap_grads(gs, dtypes=None):
    """The gradients as tensors; `dtypes` (where known) the values' own: a bfloat16 gradient is
    held as float32, and a hook sees bfloat16."""
    out = []
    for k, g in enumerate(gs):
        if g is None or isinstance(g, Tensor):
            out.append(g)
        else:
            a = np.asarray(g)
            dt = dtypes[k] if dtypes is not None and k < len(dtypes) else None
            out.append(Tensor._make(a, dt if dt is not None and dt.np == a.dtype else D.from_numpy_dtype(a.dtype)))
            handed_out(out[-1])
    return tuple(out)


def _differentiable(node):
    """The positions of the node's outputs that take a gradient, or None for all: torch's node
    has no input for an integer output (max(dim)'s indices), and its hooks see none."""
    metas = node._out_meta
    if node._prim is None or node._prim.takes_ctx or len(metas) < 2:
        return None
    keep = [k for k, (_, d) in enumerate(metas) if d.is_floating_point]
    return None if len(keep) == len(metas) else keep


def _arg_dtypes(node, mask):
    metas = node._args_meta or ()
    return [m[1] if type(m) is tuple else None for m, on in zip(metas, mask) if on]


def _unwrap(gs, as_tensor):
    if not as_tensor:
        handed_out(*gs)
    return tuple(g if as_tensor or g is None else g._data for g in gs)


def _spread(gs, present):
    """The gradients of all outputs, None where `present` says none reached them."""
    if present is None:
        return gs
    it = iter(gs)
    return tuple(next(it) if p else None for p in present)


def _prehooks(*args, present=None, as_tensor=False):
    *gs, node = args
    outs = [d for _, d in node._out_meta]
    gs = _spread(_wrap_grads(gs, [d for d, p in zip(outs, present) if p] if present is not None else outs), present)
    keep = _differentiable(node)
    shown = gs if keep is None else tuple(gs[k] for k in keep)
    for h in list((node._pre_hooks or {}).values()):
        r = h(shown)
        if r is not None:
            shown = check_hook_results(h, shown, r)
    if keep is None:
        gs = shown
    else:
        gs = list(gs)
        for k, g in zip(keep, shown):
            gs[k] = g
        gs = tuple(gs)
    if present is not None:
        gs = tuple(g for g, p in zip(gs, present) if p)
    return _unwrap(gs, as_tensor)


def _posthooks(*args, mask, n_out, present=None, as_tensor=False):
    *vals, node = args
    n_in = len(vals) - n_out
    outs = [d for _, d in node._out_meta]
    vals = _wrap_grads(vals, _arg_dtypes(node, mask) +
                       ([d for d, p in zip(outs, present) if p] if present is not None else outs))
    it = iter(vals[:n_in])
    grad_inputs = tuple(next(it) if m else None for m in mask)
    grad_outputs = _spread(vals[n_in:], present)
    keep = _differentiable(node)
    if keep is not None:
        grad_outputs = tuple(grad_outputs[k] for k in keep)
    for h in list((node._hooks or {}).values()):
        r = h(grad_inputs, grad_outputs)
        if r is not None:
            grad_inputs = check_hook_results(h, grad_inputs, r)
    return _unwrap(tuple(g for g, m in zip(grad_inputs, mask) if m), as_tensor)


def _pass_shapes(*args, **p):
    vals = args[:-1]
    n = len(vals) - p.get("n_out", 0)
    return [(tuple(v.shape), v.dtype) for v in vals[:n]]


Primitive("node_prehooks", "*gs", _prehooks, shape=_pass_shapes, dtype=lambda args: (None, D.float32), multi=True,
          eager=functools.partial(_prehooks, as_tensor=True), vjp=lambda g, out, *a, present=None: tuple(g) + (None,),
          grad_fn="NodePreHooksBackward", triton=Refuse("grad_fn hooks call Python"))
Primitive("node_hooks", "*gs", _posthooks, shape=_pass_shapes, dtype=lambda args: (None, D.float32), multi=True,
          eager=functools.partial(_posthooks, as_tensor=True),
          vjp=lambda g, out, *a, mask, n_out, present=None: tuple(g) + (None,) * (len(a) - len(g)),
          grad_fn="NodeHooksBackward", triton=Refuse("grad_fn hooks call Python"))


def _delayed_error_vjp(g, out, *a):
    raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


Primitive("delayed_error", "*xs", lambda x, *rest: x, shape=lambda x, *r: tuple(x.shape), dtype="same",
          vjp=_delayed_error_vjp, grad_fn="Error", triton=identity)


# -- the user-facing classes ------------------------------------------------------------------------

class FunctionCtx:
    """The methods available on `ctx` (mixed into each custom Function's grad_fn class)."""

    def save_for_backward(self, *tensors):
        # checked where apply records the node (a call that records none just runs forward)
        self.__dict__["_to_save"] = tensors

    def save_for_forward(self, *tensors):
        """What jvp reads as ctx.saved_tensors (torch's)."""
        self.__dict__["_for_forward"] = tensors

    @property
    def saved_tensors(self):
        in_jvp = self.__dict__.get("_in_jvp")
        if in_jvp:                           # jvp running: what forward saved for it
            return tuple(self.__dict__.get("_for_forward", ()))
        if self._saved is None:
            raise RuntimeError(FREED_MSG)
        saved = self.__dict__.get("_fn_saved")
        if saved is None:                    # forward still running, or nothing required grad
            return tuple(self.__dict__.get("_to_save", ()))
        if getattr(type(self)._forward_cls, "clear_saved_tensors_on_access", False):
            # torch's opt-in: the saved tensors are handed over once and not kept
            if self.__dict__.get("_saved_accessed"):
                raise RuntimeError("ctx.saved_tensors can only be accessed once when clear_saved_tensors_on_access "
                                   "is set on the Function.")
            self.__dict__["_saved_accessed"] = True
            self.__dict__["_fn_saved"] = [None] * len(saved)
        out = []
        for s in saved:
            if s is None or isinstance(s, Tensor):
                out.append(s)
                continue
            _check_version(s, self)
            out.append(unpack(self, s))
        return tuple(out)

    @property
    def saved_variables(self):
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2)
        return self.saved_tensors

    def mark_dirty(self, *tensors):
        self.__dict__["_dirty"] = tensors

    def mark_non_differentiable(self, *tensors):
        self.__dict__["_non_diff"] = tensors

    def set_materialize_grads(self, value):
        self.__dict__["_materialize"] = bool(value)


class BackwardCFunction(FunctionCtx, Node):
    __slots__ = ()


_fn_classes = {}


def _ctx_class(cls):
    c = _fn_classes.get(cls)
    if c is None:
        c = type(cls.__name__ + "Backward", (BackwardCFunction,), {"__slots__": ()})
        c._forward_cls = cls
        _fn_classes[cls] = c
        cls._backward_cls = c
    return c


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = None


class Function(metaclass=FunctionMeta):
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grad_outputs)`; call `.apply`."""

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self).__name__} should not be instantiated. Methods on autograd functions are all "
                      f"static, so you should invoke them on the class itself.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use new-"
                           "style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """The forward-mode derivative: the outputs' tangents from the inputs' (forward_ad)."""
        raise NotImplementedError(forward_ad.CUSTOM_FUNCTION_MSG)

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        custom_setup = cls.setup_context is not Function.setup_context
        if kwargs and custom_setup:
            # torch binds them to forward's parameters: what stays a keyword is keyword-only
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        if _ACTIVE[0] and (TRACING.stack or any(isinstance(a, Proxy) for a in args + tuple(kwargs.values()))):
            if kwargs:
                raise TraceError(f"{cls.__name__}.apply with keyword arguments inside a compiled function is not "
                                 f"traced yet")
            return _apply_traced(cls, args)
        pos = args
        # keyword arguments count as inputs after the positional ones, as torch's (needs_input_grad,
        # and a gradient for each from backward)
        args = args + tuple(kwargs.values())
        # dual inputs: forward sees their primals alone, jvp gives the outputs' tangents (torch's)
        tangents = forward_ad.tangents_of(args) if _tracer._DUAL[0] else None
        if tangents is not None and getattr(cls.jvp, "__func__", cls.jvp) is Function.jvp:
            raise NotImplementedError(forward_ad.CUSTOM_FUNCTION_MSG)
        ctx = object.__new__(_ctx_class(cls))
        _init_node(ctx)
        # (a view made under no_grad of a tensor that requires grad requires grad too, with no edge: torch's)
        needs = tuple(isinstance(a, Tensor) and (a._req or a.grad_fn is not None
                                                 or (a._view is not None and a._base._req)) for a in args)
        ctx.__dict__["needs_input_grad"] = needs
        if STATE.grad_enabled and any(needs):
            # the inputs' history before forward runs (it may modify them in place: mark_dirty)
            edges = [_edge(a) if isinstance(a, Tensor) else (None, 0) for a in args]
        with no_grad(), forward_ad.primal_only(tangents is not None):
            if custom_setup:
                outputs = cls.forward(*pos, **kwargs)
                cls.setup_context(ctx, _with_defaults(cls.forward, pos) if not kwargs else pos, outputs)
            else:
                outputs = cls.forward(ctx, *pos, **kwargs)
        is_tuple = isinstance(outputs, tuple)
        outs = list(outputs) if is_tuple else [outputs]
        requires = STATE.grad_enabled and any(needs)
        dirty = ctx.__dict__.get("_dirty", ())
        non_diff = ctx.__dict__.get("_non_diff", ())
        for d in dirty:
            if not any(d is a for a in args):
                msg = ("ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have been "
                       "mutated should be passed to ctx.mark_dirty().")
                if d._view is not None:
                    raise RuntimeError(msg)
                warnings.warn(msg, UserWarning, stacklevel=2)
            if not any(d is o for o in outs):
                raise RuntimeError("Some elements marked as dirty during the forward method were not returned as "
                                   "output. The inputs that are modified inplace must all be outputs of the Function.")
            d._vc[0] += 1
        if not requires:
            n_tensors = sum(isinstance(o, Tensor) for o in outs)
            for k, o in enumerate(outs):
                if isinstance(o, Tensor) and any(o is a for a in args) and not any(o is d for d in dirty):
                    outs[k] = _alias(o, views.NO_GRAD_MODE if not STATE.grad_enabled else views.DEFAULT)
                elif isinstance(o, Tensor) and o._view is not None and STATE.grad_enabled \
                        and not any(o is d for d in dirty):
                    # a view made inside forward: an in-place op on it may not rewrite history
                    o._view.creation = views.MULTI_OUTPUT_NODE if n_tensors > 1 else views.IN_CUSTOM_FUNCTION
            if tangents is not None:
                forward_ad.function_tangents(cls, ctx, args, tangents, outs)
            return tuple(outs) if is_tuple else outs[0]
        if _tracer._ANOMALY[0]:
            ctx._trace = traceback.format_stack()[:-1]
            if _tracer._ANOMALY_PARENT[0] is not None:
                ctx.__dict__["_anomaly_parent"] = _tracer._ANOMALY_PARENT[0]
        ctx._prim = P["function"]
        ctx._params = {"cls": cls, "nout": len(outs)}
        metas = [(a._data.shape, a._dtype) if isinstance(a, Tensor) else None for a in args]
        ctx._args_meta = tuple(metas)
        ctx.next_functions = tuple(edges)
        ctx._saved = (None,) * (len(args) + 1)
        if all(e[0] is None for e in edges):
            SINKS_MADE[0] = True           # (a node with no path to a leaf: backward() calls its backward)
        n_tensors = sum(isinstance(o, Tensor) for o in outs)
        pure_view = bool(ctx.__dict__.get("_is_pure_view"))
        if pure_view and (n_tensors != 1 or sum(isinstance(a, Tensor) for a in args) != 1):
            raise RuntimeError("Pure view custom Function can only have one input Tensor and one output Tensor. Open "
                               "an issue if you need to support more.")
        rebased = []
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor):
                continue
            is_input = any(o is a for a in args)
            # asked before an input returned as is is replaced by its alias, which no mark names
            nd = any(o is x for x in non_diff)
            if any(o is d for d in dirty):
                if o._grad_fn is None and o._req:
                    raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
                if o._view is not None:
                    # modified in place through a view: the base's history is rewritten (CopySlices)
                    if n_tensors > 1:
                        raise RuntimeError(_DIRTY_VIEW_MSG)
                    views.check_inplace_on_view(o)
                    rebased.append(k)
            elif is_input and nd:
                o = outs[k] = o.detach()   # a non-differentiable input returned as is: a detached alias (torch's)
            elif is_input:
                # an input returned as is: the output is a new tensor viewing it
                o = outs[k] = _alias(o, views.IN_CUSTOM_FUNCTION)
            elif o._view is not None:
                if pure_view:
                    # a pure view (torch's ctx._is_pure_view): an ordinary view of its base, which
                    # an in-place op may rebase; a base made inside forward stands as a leaf
                    if not any(o._base is a or o._base is getattr(a, "_base", None) for a in args) \
                            and o._base._grad_fn is None:
                        o._base._req = True
                    o._view.creation = views.DEFAULT
                else:
                    o._view.creation = views.MULTI_OUTPUT_NODE if n_tensors > 1 else views.IN_CUSTOM_FUNCTION
            if nd or not o._dtype.is_floating_point:
                continue
            o._req = True
            o.grad_fn = ctx
            o._output_nr = k
        ctx._out_meta = tuple(((o._data.shape, o._dtype) if isinstance(o, Tensor) else ((), D.float32))
                              for o in outs)
        ctx.__dict__["_tensor_outs"] = tuple(isinstance(o, Tensor) for o in outs)
        for k in rebased:
            o = outs[k]
            views.rebase(o, Tensor._make(o._data, o._dtype, True, ctx, k))
        saved = []
        for i, t in enumerate(ctx.__dict__.pop("_to_save", ())):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
            if t is None:
                saved.append(None)
            elif t._grad_fn is ctx:
                saved.append(Saved(t, True, t._output_nr))
            else:
                saved.append(Saved(t, False))
        ctx.__dict__["_fn_saved"] = saved
        if tangents is not None:
            forward_ad.function_tangents(cls, ctx, args, tangents, outs)
        return tuple(outs) if is_tuple else outs[0]


_DIRTY_VIEW_MSG = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function cannot return more "
    "than one Tensor. This is not supported by the current autograd engine. You should either make sure the input is "
    "not a view (using .clone() for example) or make your Function only return one Tensor (potentially splitting it "
    "into two Functions: one doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do this change.")


def _with_defaults(forward, args):
    """The inputs setup_context sees: forward's arguments with its defaults filled in (torch's)."""
    try:
        bound = inspect.signature(forward).bind(*args)
    except (TypeError, ValueError):
        return args
    bound.apply_defaults()
    return tuple(bound.args)


def _edge(a):
    fn = a.grad_fn
    if fn is not None:
        return fn, a._output_nr
    return (a._accumulator(), 0) if a._req else (None, 0)


def _alias(t, creation):
    """A new tensor viewing `t` whole (what a Function returns for an input returned as is)."""
    return views.make_view(Tensor._make(t._data, t._dtype), t, creation)


def _init_node(node):
    node._seq = next_node_seq()
    node._prim = None
    node._params = None
    node._args_meta = ()
    node.next_functions = ()
    node._saved = ()
    node._out_meta = ()


class InplaceFunction(Function):
    pass


class NestedIOFunction(Function):
    pass


def _fake_requiring_grad(o):
    t = o.detach()
    t.requires_grad_()
    return t


def once_differentiable(fn):
    """Run a backward under no_grad; differentiating its result again raises."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        if ctx.__dict__.get("_traced"):      # traced into a backward graph: _traced_vjp marks it
            return fn(ctx, *args)
        with no_grad():
            outputs = fn(ctx, *args)
        if not STATE.grad_enabled:
            return outputs
        if not any(isinstance(a, Tensor) and a._req for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        # torch's: each result gets a node that raises when a backward runs it, whose edge goes to
        # a new leaf (a detached alias that requires grad), not to the gradients the backward read:
        # autograd.grad(..., inputs) of a later derivative treats the result as a constant (the node
        # leads to none of the inputs, so it does not run); a backward() runs it and raises
        wrapped = tuple(apply(P["delayed_error"], (_fake_requiring_grad(o),), {}) if isinstance(o, Tensor) else o
                        for o in outs)
        return wrapped[0] if single else wrapped
    wrapper._once_differentiable = True
    return wrapper


# -- a custom Function inside a traced function (compile) -------------------------------------------
#
# Its forward runs on the symbolic inputs, detached, so its ops are traced into the graph but
# no gradient flows through them; its outputs then pass through one `traced_function` node
# whose arguments are the Function's tensor inputs, the forward's outputs, the saved tensors
# and the tensors kept as ctx attributes. The node's derivative calls the user's backward on
# symbolic values (the saved ones as values of the forward graph), so the backward is traced
# into the backward graph: no Python runs in the compiled program.

def _traced_fn_impl(*xs, n_in, n_out, **k):
    return tuple(np.array(x, copy=True) for x in xs[n_in:n_in + n_out])


def _traced_fn_shape(*xs, n_in, n_out, **k):
    return [(tuple(x.shape), x.dtype) for x in xs[n_in:n_in + n_out]]


def _traced_fn_vjp(g, out, *xs, ctx, n_in, n_out, n_saved, attrs, once, out_refs=(), **k):
    cls = ctx._params_cls
    if out_refs:                    # saved outputs of the Function: this node's outputs
        outs = out if isinstance(out, tuple) else (out,)
        xs = list(xs)
        for j, kk in out_refs:
            xs[n_in + n_out + j] = outs[kk]
    tc = object.__new__(type(ctx))
    _init_node(tc)
    tc.__dict__.update(ctx.__dict__)
    tc._saved = ()
    tc.__dict__["_traced"] = True
    tc.__dict__["_fn_saved"] = list(xs[n_in + n_out:n_in + n_out + n_saved])
    for name, x in zip(attrs, xs[n_in + n_out + n_saved:]):
        tc.__dict__[name] = x
    gs = g if isinstance(g, tuple) else (g,)
    metas = [(tuple(x.shape), x.dtype) for x in xs[:n_in]]
    res = _check_grads(tc, cls.backward(tc, *gs), (None,) * ctx.__dict__["_n_args"])
    name = cls.__name__ + "Backward"
    grads = []
    tpos = ctx.__dict__["_tensor_pos"]
    for i, gi in enumerate(res):
        _check_grad_kind(name, i, gi, i in tpos)
    for k, i in enumerate(tpos):
        gi = res[i]
        if gi is None:
            grads.append(None)
            continue
        gi = _fit_grad(name, i, gi, metas[k], True)
        if once:
            # @once_differentiable, as torch's: the backward runs without recording, so its
            # result has no history of what it read (the saved x); differentiating it with
            # respect to the incoming gradients raises (DelayedError), and where those
            # carry no gradient the result requires none
            gi = apply(P["once_differentiable"], (apply(P["detach"], (gi,), {}),) +
                       tuple(x for x in gs if isinstance(x, Tensor)), {})
        grads.append(gi)
    return tuple(grads) + (None,) * (len(xs) - n_in)


_ONCE_MSG = "trying to differentiate twice a function that was marked with @once_differentiable"


def _once_vjp(g, out, x, *gs):
    # as torch's DelayedError: the error comes when this derivative runs, not when it is derived
    return (None,) + tuple(apply(P["once_differentiable_error"], (g, x), {}) for x in gs)


def _once_error(g, *like):
    raise RuntimeError(_ONCE_MSG)


Primitive("traced_function", "*xs", _traced_fn_impl, shape=_traced_fn_shape, dtype=lambda args: (None, D.float32),
          multi=True, vjp=_traced_fn_vjp, grad_fn=lambda a, p: p["ctx"]._params_cls.__name__ + "Backward",
          triton=Refuse("a custom autograd.Function's node is removed before lowering"))
# the gradient of an incoming gradient of a @once_differentiable backward: shaped as `like`
# (that gradient), computed from g so that it runs with the derivative and no sooner
Primitive("once_differentiable_error", "*gs", _once_error,
          shape=lambda g, *like: tuple((like[0] if like else g).shape), dtype="same",
          triton=Refuse(_ONCE_MSG))
Primitive("once_differentiable", "*xs", lambda x, *gs: np.array(x, copy=True), shape=lambda x, *gs: tuple(x.shape),
          dtype="same", vjp=_once_vjp, grad_fn="Error", triton=identity)


def _requires_grad_traced(graph, t):
    """Whether a value of the graph being traced depends differentiably on something that
    requires grad (the arguments that do, the parameters the function read)."""
    if not isinstance(t, Proxy):
        return t._req
    sources = [v for v in graph.inputs
               if graph[v].get("requires_grad") or
               (graph[v]["role"] == "const" and isinstance(graph[v].get("value"), Tensor) and graph[v]["value"]._req)]
    return value_of(graph, t) in differentiable_reach(graph, sources)


def _is_view(t):
    """Whether t, a value forward returned, is a view (of an input or of a value forward made)."""
    if not isinstance(t, Proxy):
        return t._view is not None
    v = t.__dict__.get("_view")
    while v is not None:
        if v[1].name != "detach":     # (under no_grad every value is a detach alias of itself)
            return True
        v = v[0].__dict__.get("_view")
    return False


def _apply_traced(cls, args):
    graph = next((a.__dict__["_graph"] for a in args if isinstance(a, Proxy)), None) or TRACING.stack[-1]
    ctx = object.__new__(_ctx_class(cls))
    _init_node(ctx)
    # in a custom backward being traced into a backward graph (autodiff.derive), what requires grad
    # is decided when that graph is differentiated in turn (create_graph): any floating input may
    deriving = graph.name == "backward"
    needs = tuple(isinstance(a, Tensor) and STATE.grad_enabled and
                  ((deriving and a.dtype.is_floating_point) or _requires_grad_traced(graph, a)) for a in args)
    ctx.__dict__["needs_input_grad"] = needs
    # the forward's inputs detached without the alias Proxy.detach() makes: an in-place write
    # to one (with mark_dirty) becomes this Function's output, and the input's new value takes
    # the Function's history below (a write through the alias would give it the forward's value
    # without a gradient)
    fargs = tuple(apply(P["detach"], (a,), {}) if isinstance(a, Proxy) and any(needs) else
                  a.detach() if isinstance(a, Tensor) else a for a in args)
    # (where no input requires grad, Proxy.detach()'s alias: what forward returns of an input, or
    # views of it, share its values as in eager, so a write through one reaches it)
    before = [fa.__dict__.get("_gen", 0) if isinstance(fa, Proxy) and any(needs) else None for fa in fargs]
    with no_grad():
        if cls.setup_context is not Function.setup_context:
            outputs = cls.forward(*fargs)
            cls.setup_context(ctx, _with_defaults(cls.forward, fargs), outputs)   # (forward's defaults: torch's)
        else:
            outputs = cls.forward(ctx, *fargs)
    is_tuple = isinstance(outputs, tuple)
    outs = list(outputs) if is_tuple else [outputs]
    dirty = ctx.__dict__.pop("_dirty", ())
    non_diff = ctx.__dict__.pop("_non_diff", ())
    for i, fa in enumerate(fargs):
        if before[i] is not None and fa.__dict__.get("_gen", 0) != before[i] and not any(fa is d for d in dirty):
            # forward wrote an input in place without mark_dirty: in eager (and torch) the
            # argument shares the write's storage, so it holds the new value and keeps its history
            if _requires_grad_traced(graph, args[i]):
                raise TraceError(f"{cls.__name__}.forward modifies an input that requires grad in place without "
                                 f"ctx.mark_dirty: inside a compiled function this is not traced yet")
            functionalize.commit_traced(args[i], fa)
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            raise TraceError(f"a custom autograd.Function ({cls.__name__}) that returns a "
                             f"{type(o).__name__} inside a compiled function is not traced yet")
    if not any(needs):
        res = outs
    else:
        saved = ctx.__dict__.pop("_to_save", ())
        for i, t in enumerate(saved):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
        if any(s is None for s in saved):
            raise TraceError(f"save_for_backward(None) in {cls.__name__} inside a compiled function is not traced yet")
        attrs = [(k, v) for k, v in ctx.__dict__.items() if isinstance(v, Tensor) and k != "needs_input_grad"]

        def source(t):
            # what the backward reads: the Function's own input (with its history, as torch
            # saves it, so double backward reaches it), its output (through this node), or
            # a value the forward made
            for i, fa in enumerate(fargs):
                if fa is t:
                    return args[i]
            for k, o in enumerate(outs):
                if o is t:
                    return ("out", k)
            return t
        saved = [source(t) for t in saved]
        attrs = [(k, source(v)) for k, v in attrs]
        out_refs = tuple((j, v[1]) for j, v in enumerate(saved + [v for _, v in attrs]) if isinstance(v, tuple))
        saved = [None if isinstance(v, tuple) else v for v in saved]
        attrs = [(k, None if isinstance(v, tuple) else v) for k, v in attrs]
        tpos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        ctx.__dict__["_tensor_pos"] = tpos
        ctx.__dict__["_n_args"] = len(args)
        ctx._params_cls = cls
        once = bool(getattr(cls.backward, "_once_differentiable", False))
        node_args = tuple(args[i] for i in tpos) + tuple(outs) + tuple(saved) + tuple(v for _, v in attrs)
        res = list(apply(P["traced_function"], node_args,
                         {"ctx": ctx, "n_in": len(tpos), "n_out": len(outs), "n_saved": len(saved),
                          "attrs": tuple(k for k, _ in attrs), "once": once, "out_refs": out_refs,
                          "materialize": ctx.__dict__.get("_materialize", True)}))
        n_tensors = len(outs)
        for k, o in enumerate(outs):
            if any(o is nd for nd in non_diff) or not o.dtype.is_floating_point:
                res[k] = res[k].detach()
            elif not any(o is d for d in dirty) and (any(o is fa for fa in fargs) or _is_view(o)):
                # an input returned as is, or a view: an in-place op on it raises torch's error, as
                # eagerly (views.check_rebase), instead of writing through to the input
                creation = views.MULTI_OUTPUT_NODE if n_tensors > 1 and not any(o is fa for fa in fargs) \
                    else views.IN_CUSTOM_FUNCTION
                res[k].__dict__["_fn_view"] = (creation, ctx, k)
        for k, o in enumerate(outs):
            # one tensor returned at several places is one output, as torch's (and eager's):
            # its history is the last place's, so every use's gradient reaches that slot
            # of backward and the earlier slots get zeros
            res[k] = res[max(j for j, p in enumerate(outs) if p is o)]
    for d in dirty:                         # mark_dirty: the argument itself now holds the output
        for i, fa in enumerate(fargs):
            if fa is d:
                k = next(k for k, o in enumerate(outs) if o is d)
                functionalize.commit_traced(args[i], res[k])
                res[k] = args[i]
    return tuple(res) if is_tuple else res[0]

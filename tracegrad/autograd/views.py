"""Views and in-place ops, as torch's autograd handles them.

A view shares its base's storage and version counter. What autograd keeps for a view
(torch's DifferentiableViewMeta): how it was made (its creation meta, which decides
whether an in-place op on it may rewrite the base's history) and the version at which
its grad_fn was last set. An in-place op on a view gives the base the history
`as_strided_scatter(old base, result)` (torch's CopySlices); every view of that base
whose grad_fn predates the change gets, when its grad_fn is next read, a new one:
`as_strided` of the base's new history (torch's AsStridedBackward0).

The geometry of a view is written as (shape, strides, offset) in elements of its base's
row-major layout, whatever the base's own strides are.
"""
import weakref

import numpy as np

from ..grad_mode import STATE
from ..tensor import Above
from .. import tracing as _tracing
from ..tracing import _record
from ..ops.primitives import PRIMITIVES as P
from ..tensor import Tensor
from .graph import op_name

DEFAULT = 0
NO_GRAD_MODE = 1
INFERENCE_MODE = 2
MULTI_OUTPUT_NODE = 3
IN_CUSTOM_FUNCTION = 4


class ViewMeta:
    __slots__ = ("creation", "attr_version")

    def __init__(self, creation, attr_version):
        self.creation = creation
        self.attr_version = attr_version


def creation_meta(multi=False):
    """The creation meta of a view made now (torch's as_view)."""
    if STATE.inference:
        return INFERENCE_MODE
    if not STATE.grad_enabled:
        return NO_GRAD_MODE
    return MULTI_OUTPUT_NODE if multi else DEFAULT


def make_view(t, base, creation):
    """Make `t` a differentiable view of `base` (a view of a view has the root as base)."""
    t._vc = base._vc
    if base._inference:
        t._inference = True         # a view of an inference tensor is one, and no view to autograd
        return t
    if base._view is not None:
        prev = base._view.creation
        # torch's propagate_creation_meta
        if creation == DEFAULT or prev == INFERENCE_MODE:
            creation = prev
    t._base = base._base if base._base is not None else base
    t._inference = False
    t._view = ViewMeta(creation, t._vc[0])
    return t


def check_rebase(t, indirect=False):
    """torch's handle_view_on_rebase: raise where the view's history may not be rewritten."""
    meta = t._view
    creation = meta.creation
    if creation == DEFAULT:
        return
    raise RuntimeError(rebase_message(creation, t._grad_fn, t._output_nr, indirect))


def rebase_message(creation, fn, output_nr, indirect=False):
    """torch's error for an in-place op on a view of kind `creation`, output `output_nr` of fn."""
    modified = "its base or another view of its base has been" if indirect else "is being"
    if creation in (INFERENCE_MODE, NO_GRAD_MODE) or fn is None:
        prefix = (f"Output {output_nr} of {op_name(fn)} is a view of a view which was created in" if fn is not None
                  else "A view was created in")
        if creation == INFERENCE_MODE:
            msg = f"{prefix} inference mode and {modified} modified inplace in normal mode."
        else:
            msg = f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    else:
        msg = f"Output {output_nr} of {op_name(fn)} is a view and {modified} modified inplace."
    if creation == MULTI_OUTPUT_NODE:
        msg += (" This view is the output of a function that returns multiple views. Such functions do not allow the "
                "output views to be modified inplace. You should replace the inplace operation by an out-of-place one.")
    elif creation == NO_GRAD_MODE:
        msg += (" Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
                "moving both the view and the inplace either both inside the no_grad block (if you don't want the "
                "inplace to be tracked) or both outside (if you want the inplace to be tracked).")
    elif creation == INFERENCE_MODE:
        msg += (" Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
                "moving both the view and the inplace either both inside the inference_mode block (if you don't want "
                "the inplace to be tracked) or both outside (if you want the inplace to be tracked).")
    else:
        msg += (" This view was created inside a custom Function (or because an input was returned as-is) and the "
                "autograd logic to handle view+inplace would override the custom backward associated with the custom "
                "Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning "
                "the output of the custom Function.")
    return msg


def check_inplace_on_view(t):
    """The checks of an in-place op that requires grad, run with grad mode on, on view `t`."""
    check_rebase(t)
    # torch's: a view that requires grad, of a base that is a leaf (whether or not the base
    # requires grad: a view made a leaf by requires_grad_() has a base that does not)
    if t._base._grad_fn is None and t.requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def view_grad_fn(t):
    """A view's grad_fn, made again where its base (or another view of it) changed in place
    since it was set (torch's VariableHooks::grad_fn)."""
    meta = t._view
    fn = t._grad_fn
    base = t._base
    if fn is None and not base._req:
        return None
    if meta.attr_version == t._vc[0]:
        return fn
    check_rebase(t, indirect=True)
    # (a base without grad since, detach_()'d: as_strided of it all the same, whose gradient goes
    # nowhere, as torch's; the view stays no leaf)
    _regenerate(t)
    return t._grad_fn


def _layout(a):
    """(address of element 0, strides), both in elements of the storage."""
    if a.__class__ is not np.ndarray and hasattr(a, "_tg_device"):
        return a.t.storage_offset(), tuple(a.t.stride())
    item = a.itemsize
    ptr = a.__array_interface__["data"][0]
    return ptr // item, tuple(s // item for s in a.strides)


def geometry(view_data, base_data):
    """The view's (shape, strides, offset) in elements of the base's row-major layout."""
    if not view_data.size or not base_data.size:
        # an empty view names no element (a view of an empty base raised NotImplementedError where
        # torch writes it: mutation fuzzer seed 7549)
        strides, n = [], 1
        for size in reversed(view_data.shape):
            strides.append(n)
            n *= max(size, 1)
        return {"shape": tuple(view_data.shape), "strides": tuple(reversed(strides)), "offset": 0}
    b0, bst = _layout(base_data)
    v0, vst = _layout(view_data)
    shape = tuple(base_data.shape)
    # the base is a root tensor: no two of its elements share memory, so an address inside
    # it names one multi-index; its row-major position is what as_strided works in
    order = sorted((d for d in range(len(shape)) if shape[d] > 1), key=lambda d: -abs(bst[d]))
    row = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        row[d] = row[d + 1] * shape[d + 1]

    def position(addr):
        rem = addr - b0
        pos = 0
        for d in order:
            s = bst[d]
            if s <= 0:
                raise _unsupported()
            j = min(rem // s, shape[d] - 1)
            if j < 0:
                raise _unsupported()
            rem -= j * s
            pos += j * row[d]
        if rem != 0:
            raise _unsupported()
        return pos

    offset = position(v0)
    strides = []
    for k, (size, s) in enumerate(zip(view_data.shape, vst)):
        strides.append(position(v0 + s) - offset if size > 1 else 1)
    return {"shape": tuple(view_data.shape), "strides": tuple(strides), "offset": offset}


def _unsupported():
    return NotImplementedError("an in-place op on a view of a tensor whose elements are not laid out as a strided "
                               "array without overlaps or negative strides is not supported; clone() the base first")


def _regenerate(t):
    """Give view `t` the grad_fn as_strided(base) (torch's AsStridedBackward0)."""
    old_fn, old_nr = t._grad_fn, t._output_nr
    params = geometry(t._data, t._base._data)
    t._output_nr = 0
    _record(P["as_strided"], (t._base,), params, (t,))     # sets t.grad_fn, hence attr_version
    move_retained(t, old_fn, old_nr)


def move_retained(t, old_fn, old_nr):
    """retain_grad() follows the tensor to its new grad_fn (torch moves the retains_grad hook)."""
    if not t._retains_grad or old_fn is None:
        return
    ret = old_fn.__dict__.get("_retained")
    if ret is not None:
        ref = ret.get(old_nr)
        if ref is not None and ref() is t:
            del ret[old_nr]
    new = t._grad_fn
    if new is not None:
        new.__dict__.setdefault("_retained", {})[t._output_nr] = weakref.ref(t)


def old_value(view):
    """A copy of `view`'s value whose grad_fn is as_strided of its base's history now: the self a
    composite in-place op on the view computes from (every node of the decomposition that reads
    self then sends its gradient to the old base, as torch's CopySlices sends its op's gradient
    for self; the view's old grad_fn, and its tensor hooks, get only what other operands send).
    None where the write will not rebase the view (see commit)."""
    base = view._base
    if view._view is None or base is None or view._grad_fn is None or not base._req or \
            view._view.creation != DEFAULT:
        return None
    old_base = Tensor._make(base._data, base._dtype, base._req, base._grad_fn, base._output_nr, vc=[base._vc[0]])
    alias = Tensor._make(view._data.copy(), view._dtype)
    _record(P["as_strided"], (old_base,), geometry(view._data, base._data), (alias,))
    return alias


def rebase(view, result, routed=False):
    """After an in-place op on `view` whose result (with its history) is `result`: the base
    becomes as_strided_scatter(old base, result) (CopySlices), the view as_strided of it.
    `routed`: the op computed from old_value(view), whose node already leads to the old base."""
    base = view._base
    params = geometry(view._data, base._data)
    old_base = Tensor._make(base._data, base._dtype, base._req, base._grad_fn, base._output_nr, vc=[base._vc[0]])
    old_fn, old_nr = view._grad_fn, view._output_nr
    node = result._grad_fn
    if node is not None and old_fn is not None and old_base._req and not routed:
        # as torch's CopySlices, the op's gradient for the view's old value goes to the old
        # base directly, not through the view's old grad_fn (whose tensor hooks then stay quiet).
        # That is the gradient of the op's self, its first input: the view passed again as
        # another operand (v.sub_(v)) keeps its edge to the old grad_fn, whose hooks then run
        # with that operand's gradient, as torch's
        edges = list(node._edges)
        for i, (fn, nr) in enumerate(edges):
            if fn is old_fn and nr == old_nr:
                alias = Tensor._make(view._data, view._dtype)
                _record(P["as_strided"], (old_base,), params, (alias,))
                # numbered before the op's node, which reads it: the nodes stay in creation
                # order, which the engine runs backwards as torch's runs CopySlices (the op
                # inside), so hooks fire in torch's order (a walk of the graph did not)
                alias._grad_fn._seq, node._seq = node._seq, alias._grad_fn._seq
                edges[i] = (alias._grad_fn, 0)
                break
        node._edges = tuple(edges)
    base_fn, base_nr = base._grad_fn, base._output_nr
    _record(P["as_strided_scatter"], (old_base, result), params, (base,))
    move_retained(base, base_fn, base_nr)
    view._output_nr = 0
    _record(P["as_strided"], (base,), params, (view,))
    move_retained(view, old_fn, old_nr)
    return view


Above.view_grad_fn = view_grad_fn        # Tensor.grad_fn of a view


_tracing.Above.make_view, _tracing.Above.creation_meta = make_view, creation_meta        # views made by recording

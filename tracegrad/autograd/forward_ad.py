"""torch.autograd.forward_ad: dual tensors, whose tangents every op carries forward.

No op has a forward-mode rule of its own. A primitive's derivative rule (the op table's
vector-Jacobian product, linear in its output's gradient u) is transposed instead: for
y = f(x1, ..., xn) with tangents t_i,

    J t = d/du  sum_i < vjp_i(u), t_i >

which the reverse engine computes by differentiating the rule's result with respect to u
(the rule is written in tracegrad's own ops, so it differentiates again). Composites
decompose into primitives, so every op carries tangents through the one recording call
(tracing.apply), which hands a call to `apply_dual` only while a level exists.

A view is linear in its base: its tangent is the same view of its base's tangent (its
memory, as torch's), and a view made before its base had a tangent reads its part of the
base's tangent (`tangent_of`). An in-place op writes its result's tangent into the
written tensor's own (`written`), so that its views see it.

One level exists at a time (torch's "Nested forward mode AD is not supported"); leaving it
drops every tangent made in it. Complex tangents are refused (NotImplementedError): the
transpose of a complex rule is not J t without the conjugations torch's formulas make.
"""
import re
import threading
import weakref
from typing import NamedTuple

import numpy as np

from .. import autograd             # autograd.grad: autograd/__init__ imports this module
from .. import tracing
from ..grad_mode import STATE, _DecoratorContextManager, enable_grad
from ..ops.primitives import PRIMITIVES as P, sum_to, DerivativeNotImplemented, EFFICIENT_ZERO, \
    FORWARD_AD_NOT_IMPLEMENTED, FORWARD_AD_CUSTOM_FUNCTION
from ..ops import functional as F
from ..tensor import Tensor, FW_TANGENT as _KEY
from ..tracing import apply_primal, _DUAL
from .views import geometry

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "dual_level"]

_WRITTEN = "_fw_written"  # set on a base whose tangent an in-place write made: its older views read it


class _Level(threading.local):
    def __init__(self):
        self.inner = 0          # > 0 while a tangent is being computed: its own ops carry none


_LEVEL = [-1]             # the current level (torch's _current_level), one for the process as torch's
_DUALS = []               # weak references to the tensors given a tangent at the current level
_COMPACT = [4096]         # the length of _DUALS at which the references to dead tensors are dropped
_INNER = _Level()

_NOT_IMPLEMENTED = FORWARD_AD_NOT_IMPLEMENTED
CUSTOM_FUNCTION_MSG = FORWARD_AD_CUSTOM_FUNCTION


# == levels ========================================================================================

def enter_dual_level():
    """Enter a new forward grad level (torch.autograd.forward_ad.enter_dual_level); returns it."""
    if _LEVEL[0] >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _LEVEL[0] = 0
    _DUAL[0] = 1
    return 0


def exit_dual_level(*, level=None):
    """Exit the current forward grad level, deleting every tangent made in it."""
    if level is None:
        level = _LEVEL[0]
    if level != _LEVEL[0]:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is not "
                           "supported.")
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    for ref in _DUALS:
        t = ref()
        if t is not None:
            t.__dict__.pop(_KEY, None)
            t.__dict__.pop(_WRITTEN, None)
    _DUALS.clear()
    _LEVEL[0] = -1
    _DUAL[0] = 0


class dual_level(_DecoratorContextManager):
    """Context manager (and decorator) inside which dual tensors are made and carried:
    `with dual_level(): ...`. Levels do not nest."""

    def __init__(self, orig_func=None):
        pass

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


# == dual tensors ==================================================================================

class UnpackedDualTensor(NamedTuple):
    """What unpack_dual returns: the primal (a view of the tensor) and its tangent (or None)."""
    primal: Tensor
    tangent: "Tensor | None"


def _attach(t, tangent):
    t.__dict__[_KEY] = tangent
    _DUALS.append(weakref.ref(t))
    if len(_DUALS) >= _COMPACT[0]:
        # a long computation in one level: the references to tensors gone are dropped now and then
        _DUALS[:] = [r for r in _DUALS if r() is not None]
        _COMPACT[0] = max(4096, 2 * len(_DUALS))


def tangent_of(t):
    """t's tangent at the current level, or None. A view with none of its own whose base was
    made dual by an in-place write reads its part of the base's tangent (a view made before the
    write, as torch's; a view made after it has one of its own, the same view of the tangent)."""
    d = t.__dict__
    tan = d.get(_KEY)
    if tan is not None or _LEVEL[0] < 0:
        return tan
    base = t._base
    if base is None or t._view is None or "_fw_primal" in d:
        return None
    bd = base.__dict__
    bt = bd.get(_KEY)
    if bt is None or _WRITTEN not in bd:
        return None
    _INNER.inner += 1
    try:
        tan = apply_primal(P["as_strided"], (bt,), geometry(t._data, base._data))
    finally:
        _INNER.inner -= 1
    _attach(t, tan)
    return tan


def make_dual(tensor, tangent, *, level=None):
    """A new tensor aliasing `tensor` (a view of it) with `tangent` as its tangent: as it is
    where it has tensor's layout, else a copy in tensor's layout. Differentiable."""
    if level is None:
        level = _LEVEL[0]
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if level != 0:
        raise RuntimeError("Invalid level given to _make_dual")
    if _LEVEL[0] < 0:
        raise RuntimeError("Trying to access a forward AD level with an invalid index. This index was either not "
                           "created or is already deleted.")
    if tensor.is_complex() or tangent.is_complex():
        raise NotImplementedError("forward-mode AD of complex tensors is not supported by tracegrad")
    if tangent_of(tensor) is not None:
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward gradient at the same "
                           "level 0 is not supported.")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    _INNER.inner += 1
    try:
        dual = F.view_as(tensor, tensor)
        if tangent.stride() != tensor.stride():
            laid = Tensor._make(np.empty_like(tensor._data, dtype=tangent._data.dtype), tangent._dtype)
            tangent = laid.copy_(tangent)
    finally:
        _INNER.inner -= 1
    _attach(dual, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent): a view of tensor with no tangent, and its tangent as it is (or None)."""
    if level is None:
        level = _LEVEL[0]
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    if level != 0:
        raise RuntimeError("Invalid level given to _fw_primal")
    # (none inside a custom Function's forward, which computes primals alone)
    tangent = tangent_of(tensor) if _LEVEL[0] == 0 and not _INNER.inner else None
    _INNER.inner += 1
    try:
        primal = F.view_as(tensor, tensor)
    finally:
        _INNER.inner -= 1
    primal.__dict__["_fw_primal"] = True     # a view of tensor that reads no tangent of its base
    return UnpackedDualTensor(primal, tangent)


# == carrying tangents =============================================================================

def apply_dual(prim, args, params):
    """tracing.apply while a level exists: the primitive's result, with tangents where an
    input has one."""
    if _INNER.inner or STATE.inference:
        return apply_primal(prim, args, params)
    tangents = None
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            tan = tangent_of(a)
            if tan is not None:
                if tangents is None:
                    tangents = [None] * len(args)
                tangents[i] = tan
    if tangents is None:
        return apply_primal(prim, args, params)
    out = apply_primal(prim, args, params)
    outs = out if prim.multi else (out,)
    wanted = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and k not in prim.nondiff_outputs and
              (o._dtype.is_floating_point or o._dtype.is_complex)]
    if not wanted or prim.vjp is None:
        return out          # integer outputs, and ops torch's autograd does not differentiate, carry none
    _INNER.inner += 1
    try:
        new = _output_tangents(prim, args, params, out, outs, tangents, wanted)
    finally:
        _INNER.inner -= 1
    for k, tan in zip(wanted, new):
        _attach(outs[k], tan)
    return out


def _is_view(prim, params):
    return prim.view is True or (prim.view and prim.view(params))


def _output_tangents(prim, args, params, out, outs, tangents, wanted):
    """J t for each wanted output of prim(*args)."""
    if prim.takes_ctx:
        raise NotImplementedError(CUSTOM_FUNCTION_MSG)
    if prim.no_forward_ad is not None:
        raise NotImplementedError(prim.no_forward_ad)
    if any(t is not None and t._dtype.is_complex for t in tangents) or any(outs[k]._dtype.is_complex for k in wanted):
        raise NotImplementedError(f"forward-mode AD of complex tensors is not supported by tracegrad (op {prim.name})")
    if _is_view(prim, params) and all(t is None for t in tangents[1:]):
        # a view is linear in its base: the same view of the base's tangent, sharing its memory
        r = apply_primal(prim, (tangents[0],) + tuple(args[1:]), params)
        rs = r if prim.multi else (r,)
        return [rs[k] for k in wanted]
    graph = STATE.grad_enabled and (any(isinstance(a, Tensor) and a.requires_grad for a in args) or
                                    any(t is not None and t.requires_grad for t in tangents))
    with enable_grad():
        us = {k: Tensor._make(np.zeros(outs[k]._data.shape, outs[k]._data.dtype), outs[k]._dtype, True)
              for k in wanted}
        g = tuple(us.get(k) for k in range(len(outs))) if prim.multi else us[0]
        try:
            res = prim.vjp(g, out, *args, **params)
        except (DerivativeNotImplemented, NotImplementedError) as e:
            raise NotImplementedError(_NOT_IMPLEMENTED.format(_op_name(prim, e))) from None
        if not isinstance(res, tuple):
            res = (res,)
        s = None
        for i, tan in enumerate(tangents):
            r = res[i] if i < len(res) else None
            if tan is None or r is None or r is EFFICIENT_ZERO:
                continue
            a = args[i]
            if tuple(r.shape) != tuple(a.shape):
                r = sum_to(r, tuple(a.shape))
            if r._dtype is not a._dtype and a._dtype.is_floating_point:
                r = F.convert(r, a._dtype)
            term = F.sum(F.mul(r, tan))
            s = term if s is None else F.add(s, term)
        if s is None or not s.requires_grad:
            return [_zeros(outs[k]) for k in wanted]
        try:
            grads = autograd.grad(s, [us[k] for k in wanted], allow_unused=True, create_graph=graph)
        except DerivativeNotImplemented as e:
            # the rule itself has no derivative (ctc_loss's): its transpose cannot be taken
            raise NotImplementedError(f"forward-mode AD of {prim.name} is not supported by tracegrad: its derivative "
                                      f"rule is not differentiable ({e})") from None
    return [_zeros(outs[k]) if gk is None else gk for k, gk in zip(wanted, grads)]


def _op_name(prim, err):
    """The op a rule's refusal names (aten::floor_divide, 'zeta'), else the primitive's name."""
    found = re.search(r"aten::(\w+)|derivative for '(\w+)", str(err))
    if found:
        return found.group(1) or found.group(2)
    return prim.name[:-len("_inplace")] + "_" if prim.name.endswith("_inplace") else prim.name


def _zeros(o):
    return Tensor._make(np.zeros(o._data.shape, o._data.dtype), o._dtype)


class primal_only:
    """While active (`on`), ops carry no tangents (a custom Function's forward: its jvp gives them)."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        if self.on:
            _INNER.inner += 1

    def __exit__(self, *exc):
        if self.on:
            _INNER.inner -= 1


def tangents_of(args):
    """Each argument's tangent (None for one without), or None where none has one."""
    if _INNER.inner or STATE.inference:
        return None
    found = [tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    return found if any(t is not None for t in found) else None


def function_tangents(cls, ctx, args, tangents, outs):
    """A custom Function's outputs get the tangents its jvp(ctx, *tangents) returns (zeros for
    a tensor input without one, None for an argument that is no tensor, as torch passes them)."""
    given = [t if t is not None or not isinstance(a, Tensor) else _zeros(a) for a, t in zip(args, tangents)]
    ctx.__dict__["_in_jvp"] = True           # (ctx.saved_tensors: what save_for_forward saved)
    try:
        with primal_only(True):
            res = cls.jvp(ctx, *given)
    finally:
        ctx.__dict__.pop("_in_jvp", None)
    res = res if isinstance(res, tuple) else (res,)
    if len(res) != len(outs):
        raise RuntimeError(f"function {cls.__name__}.jvp returned an incorrect number of forward gradients (expected "
                           f"{len(outs)}, got {len(res)})")
    for o, t in zip(outs, res):
        if t is None or not isinstance(o, Tensor) or not (o._dtype.is_floating_point or o._dtype.is_complex):
            continue
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the "
                               f"original Tensor, this is not supported. Tensor is of size {list(o.shape)} while the "
                               f"given forward gradient is of size {list(t.shape)}.")
        _attach(o, t)


def refuse_backward(outputs, what):
    """A backward of a tensor that carries a tangent would give gradients without the tangents
    torch's carry (forward-over-reverse): refused, never gradients whose tangents went missing."""
    if _INNER.inner:
        return
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    if any(isinstance(o, Tensor) and tangent_of(o) is not None for o in outs):
        raise NotImplementedError(f"{what} of a dual tensor (forward-mode AD over reverse mode) is not supported by "
                                  f"tracegrad: its gradients would carry no tangents. Differentiate "
                                  f"unpack_dual(t).primal, or leave the dual level first")


def moved(self, new):
    """An in-place view op made self the view `new` of itself: its tangent becomes new's."""
    if _INNER.inner:
        return
    tan = new.__dict__.get(_KEY)
    if tan is not None:
        _attach(self, tan)
    else:
        self.__dict__.pop(_KEY, None)


def involved(self, other=None):
    """Whether an in-place write of `other` into `self` carries a tangent."""
    return not _INNER.inner and (tangent_of(self) is not None or
                                 isinstance(other, Tensor) and tangent_of(other) is not None)


def carry(self, src):
    """src (a copy of self's value an in-place op computes from) gets self's tangent."""
    if not _INNER.inner:
        tan = tangent_of(self)
        if tan is not None:
            _attach(src, tan)


def written(self, result):
    """After an in-place op wrote `result` into `self`: self's tangent becomes result's (zeros
    where result has none), written into self's own tangent so that its views see it. A
    tensor without one gets one (a view: its base does, and the view its part of it)."""
    if _INNER.inner or STATE.inference:
        return
    new = tangent_of(result) if result is not self else None
    old = tangent_of(self)
    if new is None and old is None:
        return
    if not (self._dtype.is_floating_point or self._dtype.is_complex):
        return
    _INNER.inner += 1
    try:
        if old is None:
            base = self._base if self._view is not None else None
            if base is not None:
                if "_fw_primal" in self.__dict__ or base.__dict__.get(_KEY) is not None:
                    # (a view that does not share its base's tangent: torch gives it one of its own)
                    raise NotImplementedError("forward AD: an in-place op writing a tangent into a view that has "
                                              "none of its own (unpack_dual's primal, or a view of a dual tensor "
                                              "made under it) is not supported by tracegrad")
                _attach(base, _zeros(base))         # (C-contiguous: as_strided views share its memory)
                base.__dict__[_WRITTEN] = True
                old = tangent_of(self)
            else:
                old = _zeros(self)
                _attach(self, old)
                self.__dict__[_WRITTEN] = True
        if new is None:
            old.zero_()
        else:
            old.copy_(new)
    finally:
        _INNER.inner -= 1


tracing.Above.apply_dual = apply_dual

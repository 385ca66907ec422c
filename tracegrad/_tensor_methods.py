"""Tensor methods and operators, bound from the public ops; in-place ops.

An in-place op computes its result out of place, checks it fits (dtype, shape, the
leaf rule), then writes it into the tensor's storage, bumps the version counter and
moves the tensor's history onto the new node, as torch does.
"""
import functools
import math
import numbers
import re
import sys
import types
import warnings
import weakref

import numpy as np

from . import _dtype as D
from .grad_mode import STATE, no_grad
from .tensor import Tensor, Above, _VALUE_READS, memory_root, escaped, check_format_rank
from .ops import functional as F
from .autograd.graph import Saved, _HOOK_USERS, saved_tensors_hooks_active, RETAIN_USED
from .autograd import views
from .autograd import forward_ad
from .creation import _wrap_np, tensor, takes_generator, RNG, stored_scalar
from . import creation as _creation
from .tracing import TraceError, _ACTIVE, TRACING, _DUAL, rename_grad_fn, note_composite_inputs
from .ops.primitives import np_index_set, PRIMITIVES, sum_to
from .functionalize import commit_traced, may_overlap, traced_layouts, write_starts
from .autograd.graph import RemovableHandle, node_class, Engine

_METHODS = """neg negative abs absolute sign exp exp2 log log2 log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid erf erfc
relu floor ceil round isnan isinf isfinite logical_not logical_and logical_or logical_xor clone add sub subtract mul
multiply div divide true_divide floor_divide remainder pow square reciprocal maximum minimum clamp clip clamp_min
clamp_max eq ne lt le gt ge greater greater_equal less less_equal not_equal lerp bitwise_and bitwise_or bitwise_xor
bitwise_left_shift bitwise_right_shift sum mean prod max min amax amin argmax argmin var std logsumexp norm softmax log_softmax all any count_nonzero
view view_as reshape reshape_as flatten unflatten squeeze unsqueeze permute transpose swapaxes swapdims t expand
expand_as broadcast_to contiguous split chunk tensor_split unbind select narrow flip fliplr flipud roll repeat tile
gather scatter scatter_add index_select masked_fill tril triu nonzero matmul mm bmm mv dot outer ger
index_put type_as""".split()

for _name in _METHODS:
    setattr(Tensor, _name, getattr(F, _name))



def _dims_method(fn):
    """A method taking its dims as several ints or one sequence (x.flip(0, -1), x.tile(2)), as
    torch's methods do; the function itself takes the sequence."""
    def method(self, *dims, **kwargs):
        if not kwargs and len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return fn(self, *([tuple(dims)] if dims else []), **kwargs)
    method.__name__ = fn.__name__
    return method


Tensor.flip = _dims_method(F.flip)
Tensor.tile = _dims_method(F.tile)
Tensor.T = property(F._T)
Tensor.mT = property(F._mT)
Tensor.H = property(F._H)
Tensor.mH = property(F._mH)
Tensor.adjoint = F.adjoint


def _where(self, condition, other):
    """Tensor.where(condition, other): self where condition holds, else other."""
    return F.where(condition, self, other)


Tensor.where = _where


def _numpy_of(self):
    if self._req:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    return self.numpy()


def _with_ndarray(ufunc, self, other):
    """tensor (op) ndarray as torch gives it: torch's operator declines the array and numpy's own
    operator computes it on the tensor's values (numpy's promotion: float32 with a float64 array
    is float64) and hands back a tensor."""
    return _wrap_np(np.asarray(ufunc(_numpy_of(self), other)))


# the operators torch leaves to numpy when the other operand is an ndarray (tensor on the left);
# with the array on the left torch computes only `/` (as reciprocal(tensor) * array) and `==`
_NUMPY_LEFT = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "pow": np.power,
               "matmul": np.matmul, "remainder": np.remainder, "floor_divide": np.floor_divide,
               "eq": np.equal, "ne": np.not_equal, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
               "bitwise_xor": np.bitwise_xor}


def _binop(fn, reflected=False):
    # an operand no op takes gives NotImplemented, so that Python raises its own TypeError (as torch)
    name = getattr(fn, "__name__", "")

    def op(self, other):
        if isinstance(other, np.ndarray):
            if name == "_rtruediv":
                return fn(self, other)
            if name in ("eq", "ne") or (not reflected and name in _NUMPY_LEFT):
                return _with_ndarray(_NUMPY_LEFT[name], self, other)
            return NotImplemented
        try:
            return fn(other, self) if reflected else fn(self, other)
        except TypeError:
            if isinstance(other, (Tensor, numbers.Number, np.ndarray)):
                raise
            return NotImplemented
    return op


def _rmul(self, other):
    # torch's __rmul__ is mul(self, other): the number second, where mul reads it at float32 precision
    # for float16 and bfloat16 tensors (0.1 * x is x * 0.1, bit for bit)
    return F.mul(self, other)


def _rsub(self, other):
    return F.rsub(self, other)


def _rtruediv(self, other):
    # torch computes `other / self` as reciprocal(self) * other
    if isinstance(other, np.ndarray):
        return _with_ndarray(np.multiply, F.reciprocal(self), other)
    return F.mul(F.reciprocal(self), other)


def _rpow(self, other):
    return F.pow(other, self)


def _rfloordiv(self, other):
    return F.floor_divide(other, self)


def _rmod(self, other):
    return F.remainder(other, self)


def _invert(self):
    if self.dtype is D.bool_:
        return F.logical_not(self)
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return F.sub(F.neg(self), 1)


def _and(self, other):
    if isinstance(other, np.ndarray):
        return _with_ndarray(np.bitwise_and, self, other)
    if self.dtype is D.bool_ and (getattr(other, "dtype", None) is D.bool_ or isinstance(other, bool)):
        return F.logical_and(self, other if isinstance(other, Tensor) else F.full((), other, dtype=D.bool_))
    return F.bitwise_and(self, other)


def _or(self, other):
    if isinstance(other, np.ndarray):
        return _with_ndarray(np.bitwise_or, self, other)
    if self.dtype is D.bool_ and (getattr(other, "dtype", None) is D.bool_ or isinstance(other, bool)):
        return F.logical_or(self, other if isinstance(other, Tensor) else F.full((), other, dtype=D.bool_))
    return F.bitwise_or(self, other)


def _xor(self, other):
    if isinstance(other, np.ndarray):
        return _with_ndarray(np.bitwise_xor, self, other)
    if self.dtype is D.bool_ and (getattr(other, "dtype", None) is D.bool_ or isinstance(other, bool)):
        return F.logical_xor(self, other if isinstance(other, Tensor) else F.full((), other, dtype=D.bool_))
    return F.bitwise_xor(self, other)


def _declining_arrays(fn):
    # torch computes no reflected bitwise operator with an ndarray on the left (Python's TypeError)
    def op(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else fn(self, other)
    return op


Tensor.__add__ = _binop(F.add)
Tensor.__radd__ = _binop(F.add, True)
Tensor.__sub__ = _binop(F.sub)
Tensor.__rsub__ = _binop(_rsub)
Tensor.__mul__ = _binop(F.mul)
Tensor.__rmul__ = _binop(_rmul)
Tensor.__truediv__ = _binop(F.div)
Tensor.__rtruediv__ = _binop(_rtruediv)
Tensor.__floordiv__ = _binop(F.floor_divide)
Tensor.__rfloordiv__ = _binop(_rfloordiv)
Tensor.__mod__ = _binop(F.remainder)
Tensor.__rmod__ = _binop(_rmod)
Tensor.__pow__ = _binop(F.pow)
Tensor.__rpow__ = _binop(_rpow)
Tensor.__matmul__ = _binop(F.matmul)
Tensor.__rmatmul__ = _binop(F.matmul, True)
Tensor.__neg__ = F.neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = F.abs
Tensor.__invert__ = _invert
Tensor.__and__ = _and
Tensor.__rand__ = _declining_arrays(_and)
Tensor.__or__ = _or
Tensor.__ror__ = _declining_arrays(_or)
Tensor.__xor__ = _xor
Tensor.__rxor__ = _declining_arrays(_xor)
Tensor.__eq__ = _binop(F.eq)
Tensor.__ne__ = _binop(F.ne)
Tensor.__lt__ = _binop(F.lt)
Tensor.__le__ = _binop(F.le)
Tensor.__gt__ = _binop(F.gt)
Tensor.__ge__ = _binop(F.ge)
Tensor.__getitem__ = F.getitem
Tensor.__hash__ = lambda self: id(self)


# == in-place ======================================================================================

def check_inplace(self):
    if _ACTIVE[0] and TRACING.stack:
        write_starts(self)
    if self._grad_fn is None and self._req and STATE.grad_enabled:
        if self.__class__ is not Tensor and self.__dict__.get("_nonleaf_arg"):
            # a compiled function's argument with history (x = w * 2): eager allows the write
            raise TraceError("an in-place op on an argument that has autograd history (not a leaf) is not traced "
                             "yet")
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if self._inference and not STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
                           "clone to get a normal tensor before doing inplace update.See "
                           "https://github.com/pytorch/rfcs/pull/17 for more details.")
    if self._view is not None and STATE.grad_enabled and self.requires_grad:
        views.check_inplace_on_view(self)
        if self._grad_fn is None:
            # a view made before its base gained history (b.copy_(x) after v = b.mT), whose
            # grad_fn nothing has made since: a leaf that requires grad, to torch's check as here
            # (reading v.grad_fn, or computing with v, makes it and lets the write run)
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def _tracing():
    """Whether compile is tracing in this thread (checked by every in-place op)."""
    return _ACTIVE[0] and TRACING.stack


def commit(self, result, routed=False):
    """Write `result` into `self` (the second half of every in-place op). `routed`: computed from
    views.old_value(self) (see views.rebase). Under forward AD, self's tangent becomes result's."""
    if _tracing():
        return commit_traced(self, result)      # inside compile: rewritten out of place
    if _DUAL[0]:
        out = _commit(self, result, routed)
        forward_ad.written(self, result)
        return out
    return _commit(self, result, routed)


def _commit(self, result, routed):
    if self._data is None or result._data is None:
        raise TraceError("in-place ops (such as batch_norm's update of its running statistics in training mode) "
                         "inside a compiled function are not traced yet")
    if result._dtype is not self._dtype and result._dtype._kind > self._dtype._kind:
        raise RuntimeError(f"result type {D.SCALAR_NAME[result._dtype]} can't be cast to the desired output type "
                           f"{D.SCALAR_NAME[self._dtype]}")
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    if not self._data.flags.writeable:
        # a (view of an) expanded tensor: raises where the written elements share memory
        self._data = _writeable_region(self._data, (), ())
    node = result._grad_fn if result._dtype is self._dtype or self._dtype.is_floating_point else None
    if self._view is not None and STATE.grad_enabled and (node is not None or self.requires_grad):
        # the op requires grad (torch's compute_requires_grad over all its inputs)
        views.check_inplace_on_view(self)
        if node is None:          # the op's inputs need no grad, the view's base does: a constant result
            node = (F.clone(result.detach()) + self * 0)._grad_fn
            result = Tensor._make(result._data, self._dtype, True, node)
        _keep_old_self(self, node)
        np.copyto(self._data, _stored_as(result, self._dtype), casting="unsafe")
        self._vc[0] += 1
        _save_as_self(self, node)
        return views.rebase(self, result, routed)
    if node is not None:
        _keep_old_self(self, node)
    np.copyto(self._data, _stored_as(result, self._dtype), casting="unsafe")
    self._vc[0] += 1
    if node is not None:
        old_fn, old_nr = self._grad_fn, self._output_nr
        self.grad_fn = node
        self._output_nr = result._output_nr
        self._req = True
        views.move_retained(self, old_fn, old_nr)
        _save_as_self(self, node)
    return self


def _stored_as(t, dtype):
    """t's values as dtype stores them, converted as torch converts: a bfloat16 tensor's float32 storage
    took a float32 result unrounded (x16.add_(y32), b.copy_(y32) and b[:] = y32 left every element a
    float32 value in a bfloat16 tensor), and float64 reaches float16 through float32."""
    data = t._data
    if t._dtype is not dtype and (dtype is D.bfloat16 or dtype is D.float16 and data.dtype == np.float64):
        return D.cast(data, dtype)
    return data


def _save_as_self(self, node):
    """The op's result, where its derivative reads it (exp_, sigmoid_), is self now: saved with
    self's version counter, so that a later write to self, its base or another view of the
    base makes the backward raise as torch's (the result's own counter never moves)."""
    if node._saved is not None and node._saved[0] is not None:
        for s in node._saved[0]:
            s.vc = self._vc
            s.version = self._vc[0]
            s.data = self._data
    if node._guarded and node._saved is not None:
        for s in node._saved[len(node._args_meta) + 1:]:
            if s.tensor is None:            # a composite's result (sgn_'s), kept as self now too
                s.vc, s.version, s.data = self._vc, self._vc[0], self._data


def _keep_old_self(self, node):
    """The derivative may need self's value from before the op: save a copy instead, as torch
    saves a clone of the original self. Only the op's self (its first input) is the copy: self
    passed again as another operand (y.mul_(y), y.clamp_(w, y)) stays saved as self, at the
    version before the write, so that its backward raises "modified by an inplace operation" as
    torch's does (the copy gave a gradient there)."""
    saved = node._saved
    if node._guarded and saved is not None:
        # a composite's self, kept for its version alone (tracing.keep_saved): torch's copy of the
        # original self is never written, so its counter is one of its own
        for g in saved[len(node._args_meta) + 1:]:
            if g.is_self and g.tensor is self:
                g.vc, g.nonleaf = [g.version], False
    if saved is None or len(saved) < 2:
        return
    s = saved[1]
    if not isinstance(s, Saved):
        return
    hooked = s.hook is not None and s.hook[3] == id(self)
    if s.tensor is self or hooked:
        old = Tensor._make(self._data.copy(), self._dtype, self._req, self.grad_fn, self._output_nr)
        if hooked:                       # what the pack hook kept may be self: pack the old value
            s.pack(old, False, s.hook[4])
        else:
            s.tensor, s.vc, s.version = old, old._vc, 0


# in-place ops whose operands torch checks for any overlap with the written tensor, itself too
# (assert_no_overlap: x.index_add_(0, i, x) raises), and those whose operands it does not check
# (a number taken from a tensor, or a kernel that reads into a buffer first); the rest partial
# overlap only (TensorIterator's assert_no_partial_overlap: x.mul_(x) runs, x.mul_(x.t()) raises)
_FULL_OVERLAP_CHECKED = frozenset("scatter scatter_add index_add index_copy index_put scatter_reduce put".split())
_OVERLAP_UNCHECKED = frozenset("masked_fill index_fill masked_scatter addmv addbmm renorm ldexp float_power".split())


def _check_overlap(self, operands, full=False, key=None):
    """torch's check that an in-place op's operands do not overlap what it writes (self, or the
    part of it basic key `key` selects): F.check_operand_overlap, on the arrays eager holds, or
    inside a trace on the values' layouts within their bases (compiled raises as eager does)."""
    if _tracing():
        arrays = traced_layouts([self, *operands])
        target = arrays[0]
        if target is None:
            return
        if key is not None:
            target = _region(target, key)
        others = [a for a in arrays[1:] if a is not None]
        F.check_operand_overlap(target, others, full)
        for a in others:
            if a is not target and np.shares_memory(target, a) and not (
                    a.__array_interface__["data"][0] == target.__array_interface__["data"][0]
                    and a.shape == target.shape and a.strides == target.strides):
                # a layout torch does not judge, read before it is written (x[:, :2].add_(x[:, 1:]);
                # one written first raised above): left to eager's kernel, as the trace does not
                # model the order numpy's reads and writes the shared elements in
                raise TraceError("an in-place op whose operand shares memory with the written-to tensor in a "
                                 "layout that is not dense is not traced (its result depends on the order "
                                 "elements are written in)")
        return
    F.check_operand_overlap(self if key is None or self._data.__class__ is not np.ndarray else
                            _region(self._data, key), operands, full)


Above.check_overlap = _check_overlap       # out= (ops/functional.py)


def _operands(args, kwargs):
    ops = [a for a in args if isinstance(a, Tensor)]
    if kwargs:
        ops += [a for a in kwargs.values() if isinstance(a, Tensor)]
    return ops


def _operand_check(name):
    """The check of in-place op `name`'s tensor operands against self (_check_overlap), or None
    where torch checks none."""
    if name in _OVERLAP_UNCHECKED:
        return None
    full = name in _FULL_OVERLAP_CHECKED

    if name == "index_put":
        def check(self, args, kwargs):
            # torch counts the indices first (a 0-dim target and one index tensor: IndexError,
            # not the overlap error of a value that views the target's base)
            indices = args[0] if args else kwargs.get("indices")
            if isinstance(indices, (tuple, list)) and len(indices) > self.ndim:
                raise IndexError(f"too many indices for tensor of dimension {self.ndim} (got {len(indices)})")
            operands = _operands(args, kwargs)
            _, values, accumulate = _index_put_args(args, kwargs)
            if not accumulate and isinstance(values, Tensor) and values.numel() == 1 and \
                    isinstance(indices, (tuple, list)) and len(indices) == 1 and isinstance(indices[0], Tensor) \
                    and indices[0]._dtype in (D.bool_, D.uint8):
                return None    # torch's masked_fill_ (one mask, one value), which reads the value first
            if operands:
                try:
                    _check_overlap(self, operands, full)
                except RuntimeError as e:
                    if str(e) != F._ORDER_DEPENDENT_MSG:
                        raise
                    # values viewing self in a layout torch does not judge: torch's one-thread loop
                    # writes and reads in its order, which is run here (the error where it cannot be)
                    return _sequenced_index_put(self, args, kwargs, e)
        return check

    def check(self, args, kwargs):
        if kwargs or len(args) > 1:
            operands = _operands(args, kwargs)
            if operands:
                _check_overlap(self, operands, full)
        elif isinstance(args[0], Tensor):          # (most in-place ops: one operand)
            d, t = args[0]._data, self._data
            # two arrays that own their memory share none: the check's cost spared
            if d is t or d.__class__ is not np.ndarray or t.__class__ is not np.ndarray or \
                    d.base is not None or t.base is not None:
                _check_overlap(self, args, full)
    return check


def _index_put_args(args, kwargs):
    """index_put_'s (indices, values, accumulate), given by position or by name."""
    return (args[0] if args else kwargs.get("indices"), args[1] if len(args) > 1 else kwargs.get("values"),
            args[2] if len(args) > 2 else kwargs.get("accumulate", False))


def _sequenced_index_put(self, args, kwargs, err):
    """index_put_'s values viewing self, not dense (_operand_check): the values torch's loop
    leaves in self (F.sequential_index_put), with the error to raise in its place where they
    cannot be told."""
    indices, values, accumulate = _index_put_args(args, kwargs)
    if not isinstance(values, Tensor) or not isinstance(indices, (tuple, list)) or \
            self._data.__class__ is not np.ndarray or values._data.__class__ is not np.ndarray or \
            not all(isinstance(i, Tensor) and not i._dtype.is_floating_point and i._data.__class__ is np.ndarray
                    for i in indices) or values._dtype is not self._dtype:
        raise err
    arrays = []
    for i in indices:
        if i._dtype is D.bool_:
            # torch's expandTensors: a mask stands for the columns of its nonzero(), an (n, ndim)
            # matrix, one index for each of the dims it covers
            if not i.ndim:
                raise err
            cols = np.stack(np.nonzero(i._data), axis=1)
            arrays.extend(cols[:, d] for d in range(i.ndim))
        else:
            arrays.append(i._data)
    if len(arrays) > self.ndim:
        raise err
    out = F.sequential_index_put(self._data, values._data, arrays, bool(accumulate))
    if out is None:
        raise err
    return (err,) if out is False else out


def _sequenced(out, seq):
    """The op's result, its values those of torch's loop where the check ran it (seq). (err,):
    arguments the op refuses (its error raised before this), or else the check's error."""
    if seq is not None:
        if seq.__class__ is tuple:
            raise seq[0]
        out._data = seq.astype(out._data.dtype, copy=False)
    return out


def _inplace(fn):
    name = fn.__name__
    check = _operand_check(name)

    def op(self, *args, **kwargs):
        check_inplace(self)
        seq = None
        if check is not None and (args or kwargs):
            seq = check(self, args, kwargs)
        if self._view is not None and STATE.grad_enabled and self._req and not _tracing():
            # on a view, a copy at the old base's place in the graph (views.old_value): every node
            # of a decomposition (lerp_'s) that reads self sends that gradient to the old base (a
            # copy, as _old_self's below: a pack hook sees it once)
            src = views.old_value(self)
            if src is not None:
                if _DUAL[0]:
                    forward_ad.carry(self, src)     # the copy computes with self's tangent
                return commit(self, _sequenced(fn(src, *args, **kwargs), seq), routed=True)
        if _HOOK_USERS[0] and STATE.grad_enabled and saved_tensors_hooks_active() and not _tracing():
            # torch saves a clone of self's old value, and its pack hook sees that clone, once;
            # the op saving self and then its copy (_keep_old_self) called the hook twice
            old = _old_self(self)
            if _DUAL[0]:
                forward_ad.carry(self, old)
            return commit(self, _sequenced(fn(old, *args, **kwargs), seq))
        return commit(self, _sequenced(fn(self, *args, **kwargs), seq))
    op.__name__ = name + "_"
    return op


def _old_self(self):
    """A copy of self's value, at self's place in the graph (no node of its own; a leaf that
    requires grad was refused by check_inplace)."""
    fn = self.grad_fn
    if fn is None:
        return Tensor._make(self._data.copy(), self._dtype)
    return Tensor._make(self._data.copy(), self._dtype, True, fn, self._output_nr)


for _name in """add sub mul div pow neg abs sign exp log sqrt rsqrt sin cos tanh sigmoid relu floor ceil round clamp
clip clamp_min clamp_max masked_fill scatter scatter_add tril triu lerp remainder floor_divide exp2 log1p expm1 erf erfc
logical_not square reciprocal t""".split():
    setattr(Tensor, _name + "_", _inplace(getattr(F, _name)))



def index_put(self, indices, values, accumulate=False):
    return F.index_put(self, indices, values, accumulate, _op="index_put_")


Tensor.index_put_ = _inplace(index_put)
Tensor.__iadd__ = Tensor.add_
Tensor.__isub__ = Tensor.sub_
Tensor.__imul__ = Tensor.mul_
Tensor.__itruediv__ = Tensor.div_
Tensor.__ipow__ = Tensor.pow_
Tensor.__ifloordiv__ = Tensor.floor_divide_
Tensor.__imod__ = Tensor.remainder_


def _cast_checked(fn):
    """An in-place bitwise op or shift: torch checks that the operands' result type can be written
    to self before it looks for a kernel, so x.bitwise_and_(1.5) of an int64 x raises the cast's
    RuntimeError (tracegrad raised the float kernel's NotImplementedError)."""
    def op(self, other):
        if isinstance(other, np.ndarray):        # (numpy's rules, as the out-of-place operator)
            return fn(self, other)
        d = D.result_type((self, other))
        if d._kind > self._dtype._kind:
            raise RuntimeError(f"result type {D.SCALAR_NAME[d]} can't be cast to the desired output type "
                               f"{D.SCALAR_NAME[self._dtype]}")
        return fn(self, other)
    op.__name__ = fn.__name__
    return op


def _iand(self, other):
    check_inplace(self)
    return commit(self, _and(self, other))


def _ior(self, other):
    check_inplace(self)
    return commit(self, _or(self, other))


def _ixor(self, other):
    check_inplace(self)
    return commit(self, _xor(self, other))


# (without __ixor__ Python ran x = x ^ y: a new tensor, x's other names left unchanged, and a
# bool x ^= an int64 tensor became int64 where torch raises)
Tensor.__iand__ = _cast_checked(_iand)
Tensor.__ior__ = _cast_checked(_ior)
Tensor.__ixor__ = _cast_checked(_ixor)
Tensor.bitwise_left_shift_ = _cast_checked(_inplace(F.bitwise_left_shift))
Tensor.bitwise_right_shift_ = _cast_checked(_inplace(F.bitwise_right_shift))
Tensor.__lshift__ = _binop(F.bitwise_left_shift)
Tensor.__rlshift__ = _binop(F.bitwise_left_shift, True)
Tensor.__rshift__ = _binop(F.bitwise_right_shift)
Tensor.__rrshift__ = _binop(F.bitwise_right_shift, True)
Tensor.__ilshift__ = Tensor.bitwise_left_shift_
Tensor.__irshift__ = Tensor.bitwise_right_shift_


def _named_inplace(name):
    """An in-place op whose recorded node takes torch's name for it (`name(*args)`): the ops it
    is written in made the node (fill_ as full(...) + self * 0 was AddBackward0, where torch's
    is FillBackward2). Through a view the node stays CopySlices."""
    def wrap(op):
        def named(self, *args, **kwargs):
            old = self._grad_fn
            out = op(self, *args, **kwargs)
            if self._grad_fn is not old and self._grad_fn is not None and not _tracing():
                name_grad_fn(self, name(*args))
            return out
        named.__name__ = op.__name__
        named.__doc__ = op.__doc__
        return named
    return wrap


@_named_inplace(lambda: "ZeroBackward0")
def zero_(self):
    return _fill(self, 0)


@_named_inplace(lambda value: "FillBackward3" if isinstance(value, Tensor) else "FillBackward2")
def fill_(self, value):
    return _fill(self, value)


def _overwrite(self, new, src=None):
    """`new`, linked with self's history by a zero gradient (torch's FillBackward2 and
    CopyBackwards give the overwritten history zeros): a where() with an always-true mask, not
    new + self * 0, which wrote NaN where self held inf or NaN. Its node's inputs, for a direct
    call (y.grad_fn(g)), are torch's node's: self's history, and `src` where given (copy_'s
    source, fill_'s value tensor), not where's operands (FillBackward2's call gave (None, zeros))."""
    out = F.where(F.full((), True, dtype=D.bool_), new, self)
    if not _tracing() and out._grad_fn is not None:
        note_composite_inputs(out._grad_fn, None, (self,) if src is None else (self, src))
    return out


def _fill(self, value):
    check_inplace(self)
    from_tensor = isinstance(value, Tensor)
    if _DUAL[0] and forward_ad.involved(self, value) and not _tracing():
        # self's tangent becomes the value's (zeros for a number), through commit
        if from_tensor and value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               f"dimensions.")
        v = F.convert(value, self.dtype) if from_tensor else F.full((), value, dtype=self.dtype)
        new = F.clone(F.expand(v, tuple(self.shape)))
        if STATE.grad_enabled and self.grad_fn is not None:
            new = _overwrite(self, new, value if from_tensor else None)
        return commit(self, new)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
        if value._req and STATE.grad_enabled:
            if self._view is None and self._grad_fn is not None and not _tracing():
                # the overwritten history stays linked with a zero gradient, as torch's
                # FillBackward3 keeps it (its leaves' .grad became zeros there, not None here)
                return commit(self, F.masked_fill(self, F.full((), True, dtype=D.bool_), F.convert(value, self.dtype)))
            return commit(self, F.expand(F.convert(value, self.dtype), tuple(self.shape)) * 1)
        # copied as a tensor, converted without torch's check of a number (fill_(tensor(1e6)) is inf in
        # float16, fill_(tensor(300)) 44 in int8; as numbers they raise)
        given, value = value, F.convert(value, self.dtype).item()
    if _tracing():
        new = F.full(tuple(self.shape), value, dtype=self.dtype)
        # a value that requires grad stays linked with a zero gradient, as eager's (below)
        return commit(self, _overwrite(self, new) if self.requires_grad and STATE.grad_enabled else new)
    if STATE.grad_enabled and self.grad_fn is not None:
        return commit(self, _overwrite(self, F.full(tuple(self.shape), value, dtype=self.dtype),
                                       given if from_tensor else None))
    # torch's checked conversion (uint8 takes -1 as 255; int8 refuses 200 with its RuntimeError)
    plain = _plain_number(value) and self._data.__class__ is np.ndarray
    target = self._data
    if not target.flags.writeable and target.__class__ is np.ndarray:
        # an expanded or overlapping view: one number written to every element is the same
        # whichever element writes last, and torch's fill_(number) and zero_ write it (its
        # fill_(tensor) refuses)
        if from_tensor:
            raise RuntimeError(_OVERLAP_MSG)
        target = _writeable_alias(target)
    target[...] = stored_scalar(value, self.dtype, self.numel()) if plain else value
    self._vc[0] += 1
    return self


def _setitem_scalar(v, dt):
    """A Python number written by x[k] = v, as torch converts it: an int beyond int64 is the
    binding's ValueError; then fill_'s checked conversion (uint8 takes -1 as 255, int8 refuses
    200, float32 refuses 1e39), but into a 16-bit float, rounded (70000 is inf in float16)."""
    if v.__class__ is int and not -2 ** 63 <= v < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    if dt is D.float16 or dt is D.bfloat16:
        return Tensor._make(D.cast(np.asarray(float(v)), dt), dt)
    return Tensor._make(stored_scalar(v, dt), dt)


def _plain_number(v):
    return v.__class__ in (int, float, bool) or isinstance(v, (np.integer, np.floating, np.bool_))


@_named_inplace(lambda src, non_blocking=False: "CopyBackwards")
def copy_(self, src, non_blocking=False):
    check_inplace(self)
    if not isinstance(src, Tensor):
        src = tensor(src)
    else:
        _check_overlap(self, (src,))
    try:
        b = tuple(F.broadcast_shapes(tuple(self.shape), tuple(src.shape)))
    except RuntimeError:
        raise RuntimeError(f"The size of tensor a ({self.shape[-1] if self.ndim else 1}) must match the size of tensor "
                           f"b ({src.shape[-1] if src.ndim else 1}) at non-singleton dimension "
                           f"{max(self.ndim, src.ndim) - 1}") from None
    if b != tuple(self.shape):
        # src broadcasts with self only to a larger shape (self [1, 1], src [2, 1]): numpy's
        # broadcast_to raised its ValueError here
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(b)}")
    if _tracing():
        # a copy, not a broadcast view of src: the program's array of self must not be src's memory
        r = F.clone(F.expand(F.convert(src, self.dtype), tuple(self.shape)))
        if self.requires_grad and STATE.grad_enabled and \
                (self._view is None or not (src.requires_grad and self._dtype.is_floating_point)):
            r = _overwrite(self, r)        # the overwritten history keeps a zero gradient, as eager's below
        return commit(self, r)
    if src._req and STATE.grad_enabled and self._dtype.is_floating_point:
        r = F.expand(F.convert(src, self.dtype), tuple(self.shape))
        r = F.clone(r)
        if self._view is None and self._grad_fn is not None:
            # the history self had gets a zero gradient, as torch's CopyBackwards gives it
            # (it was cut off: its leaves' .grad stayed None)
            r = _overwrite(self, r, src)
        return commit(self, r)
    if _DUAL[0] and forward_ad.involved(self, src):
        # self's tangent becomes src's (zeros where src has none), through commit
        if STATE.grad_enabled and self.grad_fn is not None:
            return commit(self, _overwrite(self, F.clone(F.expand(F.convert(src, self.dtype), tuple(self.shape))),
                                           src))
        return commit(self, F.clone(F.expand(F.convert(src, self.dtype), tuple(self.shape))))
    if STATE.grad_enabled and self.grad_fn is not None:
        # the old value is overwritten: its gradient is zero from here on
        return commit(self, _overwrite(self, F.clone(F.expand(F.convert(src.detach(), self.dtype), tuple(self.shape))),
                                       src))
    target = self._data
    if not target.flags.writeable:
        # a (view of an) expanded tensor: raises where the written elements share memory (a
        # size-1 dim's zero stride repeats nothing: x[:1].expand(3, n).narrow(0, 0, 1) is written)
        target = _writeable_region(target, (), ())
    np.copyto(target, np.broadcast_to(_stored_as(src, self._dtype), target.shape), casting="unsafe")
    self._vc[0] += 1
    return self


def _setitem(self, key, value):
    if key is False:
        return                # torch's: selects nothing, writes nothing, checks nothing
    if self._grad_fn is None and self._req and STATE.grad_enabled and self._view is None:
        # torch indexes first (a bad key raises its IndexError) and writes into the view the
        # key's basic part makes, if it makes one: then its error is about a view of a leaf
        k, _ = F._normalize_key(self, key)
        if _makes_view(self._data, k):
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if self._grad_fn is None and self._view is not None and STATE.grad_enabled and self.__class__ is Tensor and \
            self.requires_grad and _makes_view(self._data, F._normalize_key(self, key)[0]):
        # a view made before its base gained history (e = b[1:]; e[0:1] += x writes b through
        # e[0:1]): torch writes through the view its key makes, which reads e.grad_fn (and so makes
        # it) first; check_inplace(e) took e for a leaf that requires grad (mutation fuzzer seed 19279)
        self.grad_fn
    check_inplace(self)
    F._refuse_byte_mask_fill(key, value)
    number = not isinstance(value, Tensor)
    if number:
        if isinstance(value, (list, tuple, np.ndarray)):
            value = tensor(value, dtype=self.dtype)
        elif _plain_number(value) and not _tracing() and self._data.__class__ is np.ndarray:
            value = _setitem_scalar(value, self.dtype)
        elif isinstance(value, (int, float, complex, np.number, np.bool_)) or hasattr(value, "__float__"):
            value = F._scalar(value)     # a number (a symbolic size too)
        else:
            # None, a str or bytes, any other object: torch's TypeError (not a NaN or a parsed number)
            t = type(value)
            name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
            raise TypeError(f"can't assign a {name} to a {self.type()}")
    k, idx = F._normalize_key(self, key)
    seq = None                 # the values torch's loop leaves in self, where values view it (below)
    mask = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    if not number and idx and value._dtype is not self._dtype and value.ndim == 0 and isinstance(mask, Tensor) \
            and mask._dtype is D.bool_:
        F.check_scalar_value(value, self._dtype, "masked_fill_")     # (torch's masked_fill_: its value checked)
    elif not number and idx and value._dtype is not self._dtype:
        # torch writes through index_put_, which takes no other dtype (a 0-dim value under one bool
        # mask is a masked_fill): b16[idx] = y32 raised in torch and stored y32's values in tracegrad
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{D.SCALAR_NAME[self._dtype]} for the destination and {D.SCALAR_NAME[value._dtype]} "
                           f"for the source.")
    if isinstance(value, Tensor):
        shape = PRIMITIVES["getitem"].shape(self, *idx, key=k)
        checked = not number and (idx or tuple(value.shape) == tuple(shape)) and not (
            # one mask and one value: torch's index_put_ is a masked_fill_, which reads it first
            isinstance(mask, Tensor) and mask._dtype in (D.bool_, D.uint8) and value.numel() == 1)
        value = _strip_leading_ones(value, len(shape))
        _check_setitem_shape(self, k, idx, value)
        if checked:
            # torch writes a basic key through copy_ into the view it selects, an advanced one
            # with index_put_, which refuses any overlap of the values with self; a value it
            # expands, or a 0-dim one it fills with, is not checked
            try:
                _check_overlap(self, (value,), bool(idx), _basic_key(k))
            except RuntimeError as e:
                # index tensors alone, on the leading dims: index_put_'s loop (_sequenced_index_put)
                if str(e) != F._ORDER_DEPENDENT_MSG or \
                        not all(type(q) is tuple and q[0] == "t" and q[1] == j for j, q in enumerate(k)):
                    raise
                seq = _sequenced_index_put(self, (tuple(idx), value), {}, e)
                if seq.__class__ is tuple or not self._data.flags.writeable:
                    raise e from None
    needs_graph = STATE.grad_enabled and (self.requires_grad or (isinstance(value, Tensor) and value._req)) or \
        _DUAL[0] and forward_ad.involved(self, value)      # (a tangent is written through commit too)
    if seq is not None and not needs_graph:
        self._data[...] = seq
        self._vc[0] += 1
        return
    if seq is not None:
        commit(self, _sequenced(F.index_put_prim(self, value, idx, k), seq))
        return
    if _tracing():
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=self.dtype)
        commit(self, F.index_put_prim(self, value, idx, k))
        return
    if not needs_graph:
        target = self._data
        if not target.flags.writeable:
            # an expanded tensor: torch refuses only a write whose target elements share memory
            target = _writeable_region(target, k, idx, number)
        np_index_set(target, k, [i._data for i in idx], _stored_as(value, self._dtype) if isinstance(value, Tensor)
                     else value)
        self._vc[0] += 1
        return
    if not idx and not _makes_view(self._data, k):
        # the whole tensor (x[...] = v, x[:] = v), not through a view: torch's copy_to fills it
        # from a 0-dim value on the CPU (a number is one) where it has more dims, else copies
        # (FillBackward3, CopyBackwards; a 0-dim tensor's x[...] = 0.5 is a copy_). fill_ reads its
        # value before it writes (x[:] = x[19]: copy_ raised its overlap error)
        _copy_to(self, value, self.dtype)
        return
    if not idx and self._data.__class__ is np.ndarray and not self._data.flags.writeable:
        # an expanded (or overlapping) tensor, b.expand(3, 2)[0] = v: torch writes the view the key
        # selects (copy_, or fill_ of a number), whose elements are distinct though self's are not;
        # the write of the whole of self raised its overlap error
        view = self[key]
        if number:
            fill_(view, value if isinstance(value, Tensor) else F.full((), value, dtype=self.dtype))
        else:
            copy_(view, value)
        return
    if not idx and self.device.type == "cpu" and \
            not any(isinstance(p, Tensor) for p in (key if isinstance(key, tuple) else (key,))):
        # a basic key that selects a view: torch's copy_to writes that view (fill_ from a 0-dim value
        # on the CPU, as above), which rebases the view and self's base; self, where a view itself,
        # takes its grad_fn again only when read: after its base's detach_(), one whose gradient goes
        # nowhere (view seeds 410500, 446030: x's gradient kept reaching it through self). (A 0-dim
        # mask, z[z > 0] = c, makes a basic key too, but torch indexes a copy with it: index_put_. A CUDA
        # tensor's write stays index_put's: its fill_ and copy_ with a host value are not this path's)
        _copy_to(self[key], value, self.dtype)
        return
    commit(self, F.index_put_prim(self, value, idx, k))


def _copy_to(target, value, dtype):
    """torch's copy_to: target filled from a 0-dim value on the CPU (a number is one) where target has
    dims (FillBackward3), else copied (CopyBackwards)."""
    value = value if isinstance(value, Tensor) else F.full((), value, dtype=dtype)
    if value.ndim == 0 and target.ndim and value.device.type == "cpu":
        fill_(target, value)
    else:
        copy_(target, value)


def _region(data, key):
    """The view of `data` that basic key `key` selects, a 0-dim array where it picks one element."""
    r = data[key]
    return r if r.__class__ is np.ndarray else data[key + (Ellipsis,)]


def _strip_leading_ones(value, ndim):
    """value without the leading size-1 dims that it has beyond `ndim`: torch drops a value's
    leading 1s before it writes (x[0] = v of shape (1, 1, n) for a row of n)."""
    n = 0
    while value.ndim - n > ndim and value.shape[n] == 1:
        n += 1
    return value.reshape(tuple(value.shape)[n:]) if n else value


def _makes_view(data, k):
    """Whether the basic part of normalized key `k` (ints, slices, None, bools) selects other
    than the whole array as it is: torch then writes through a view (a full slice is no view)."""
    v = data[_basic_key(k)]
    return v.shape != data.shape or v.strides != data.strides


_OVERLAP_MSG = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location. Please clone() the tensor before performing the operation.")


def _basic_key(k):
    """The numpy key of the basic part of normalized key `k` (ints, slices, None, bools)."""
    return tuple(slice(None) if isinstance(p, tuple) and p[0] == "t" else
                 slice(*p[1:]) if isinstance(p, tuple) else p for p in k)


def _writeable_alias(target):
    """A writeable array over the memory of the read-only (expanded or overlapping) view
    `target`, with its shape and strides; torch's error where there is none to make."""
    if not isinstance(target, np.ndarray):
        raise RuntimeError(_OVERLAP_MSG)
    base = target
    while True:
        up = base.base
        if not isinstance(up, np.ndarray):
            up = getattr(up, "base", None)        # as_strided's array holds its source through one more object
        if not isinstance(up, np.ndarray):
            break
        base = up
    if not base.flags.writeable:
        raise RuntimeError(_OVERLAP_MSG)
    return np.asarray(_Memory(target, base))


class _Memory:
    """`target`'s memory, shape and strides, written through: the memory is `base`'s, which
    is writeable (numpy's own as_strided works the same way)."""
    def __init__(self, target, base):
        face = dict(target.__array_interface__)
        face["data"] = (face["data"][0], False)
        self.__array_interface__ = face
        self.base = base


def _writeable_region(target, k, idx, number=False):
    """A writeable alias of the read-only (expanded or overlapping) array `target`, where the
    elements that `target[k]` writes are distinct in memory, or one `number` is written to
    overlapping windows (torch's copy of it there); torch's error otherwise. An op whose result would depend on the
    order the shared elements are written in (`mul_` on overlapping `unfold` windows: torch
    multiplies a shared element once per window) raises."""
    if idx:
        # torch's index_put_ checks the whole tensor: an element repeated by a zero stride
        # raises; a size-1 dim's zero stride (x.expand(1, n, m)) repeats nothing
        if any(st == 0 and n > 1 for st, n in zip(target.strides, target.shape)) or \
                (not number and may_overlap(target.shape, target.strides, target.itemsize)):
            raise RuntimeError(_OVERLAP_MSG)
        return _writeable_alias(target)
    alias = _writeable_alias(target)
    try:
        region = alias[_basic_key(k)]
    except (IndexError, TypeError):
        raise RuntimeError(_OVERLAP_MSG) from None
    if isinstance(region, np.ndarray):
        if any(st == 0 and n > 1 for st, n in zip(region.strides, region.shape)):
            raise RuntimeError(_OVERLAP_MSG)     # torch's check: an element repeated by a zero stride
        if not number and may_overlap(region.shape, region.strides, region.itemsize):
            raise RuntimeError(_OVERLAP_MSG)
    return alias


def _check_setitem_shape(self, k, idx, value):
    """torch's errors for a value that does not fit: index_put's with index tensors, else
    those of copy_ into the indexed view (expand's)."""
    sub = tuple(PRIMITIVES["getitem"].shape(self, *idx, key=k))
    if idx:
        try:
            ok = np.broadcast_shapes(tuple(value.shape), sub) == sub
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                               f"indexing result of shape {list(sub)}")
    else:
        with no_grad():
            F.expand(value, sub)


Tensor.zero_ = zero_
Tensor.fill_ = fill_
Tensor.copy_ = copy_
Tensor.__setitem__ = _setitem


def _takes_generator(fn):
    return takes_generator(fn)


def _write_drawn(self, values, name):
    """Write freshly drawn values into `self`. Where autograd records the write, it is an
    in-place op with a constant result: the history `self` had gets a zero gradient (torch's
    UniformBackward0 and the like; CopySlices on a view), where it used to keep its old
    grad_fn and pass the gradient on as if the values had not been replaced. A bfloat16 tensor
    gets its values rounded to bfloat16's (its storage is float32's)."""
    if self._dtype is D.bfloat16:
        values = D.round_bfloat16(np.asarray(values, np.float32))
    if STATE.grad_enabled and self.requires_grad or _DUAL[0] and forward_ad.involved(self):
        # (a dual tensor's tangent becomes zeros, through copy_, as torch's)
        src = Tensor._make(np.asarray(values, dtype=self._data.dtype), self._dtype)
        copy_(self, src if not self.is_cuda else src.to(self.device))
        name_grad_fn(self, name)
        return self
    if not self._data.flags.writeable:
        raise RuntimeError(_OVERLAP_MSG)
    self._data[...] = values
    self._vc[0] += 1
    return self


def name_grad_fn(self, name):
    """Give the node an in-place op just recorded on `self` torch's name for that op (the
    node was made by the ops the in-place op is written in); a view's stays CopySlices."""
    fn = self._grad_fn
    if self._view is None and fn is not None:
        fn.__class__ = node_class(name)


@_takes_generator
def _uniform_(self, a=0.0, b=1.0, generator=None):
    check_inplace(self)
    return _write_drawn(self, RNG.gen.uniform(a, b, self._data.shape), "UniformBackward0")


@_takes_generator
def _normal_(self, mean=0.0, std=1.0, generator=None):
    check_inplace(self)
    return _write_drawn(self, RNG.gen.normal(mean, std, self._data.shape), "NormalBackward0")


@_takes_generator
def _bernoulli_(self, p=0.5, generator=None):
    check_inplace(self)
    return _write_drawn(self, RNG.gen.random(self._data.shape) < p,
                        "BernoulliBackward1" if isinstance(p, Tensor) else "BernoulliBackward2")


@_takes_generator
def _exponential_(self, lambd=1.0, generator=None):
    check_inplace(self)
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _write_drawn(self, RNG.gen.exponential(1.0 / lambd, self._data.shape), "ExponentialBackward0")


@_takes_generator
def _log_normal_(self, mean=1.0, std=2.0, generator=None):
    """exp of normal(mean, std) draws (tracegrad's stream, not torch's)."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    if not self._dtype.is_floating_point:
        raise NotImplementedError(f"\"log_normal_cpu\" not implemented for '{D.SCALAR_NAME[self._dtype]}'")
    check_inplace(self)
    return _write_drawn(self, RNG.gen.lognormal(mean, std, self._data.shape), "LogNormalBackward0")


@_takes_generator
def _geometric_(self, p, generator=None):
    """The number of Bernoulli(p) trials to the first success: 1, 2, ... (integer dtypes too)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if self._dtype is D.bool_:
        raise NotImplementedError("\"geometric_cpu\" not implemented for 'Bool'")
    check_inplace(self)
    return _write_drawn(self, RNG.gen.geometric(p, self._data.shape), "GeometricBackward0")


@_takes_generator
def _cauchy_(self, median=0.0, sigma=1.0, generator=None):
    """median + sigma * tan(pi (U - 1/2)) draws (tracegrad's stream, not torch's)."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    if not self._dtype.is_floating_point:
        raise RuntimeError(f"Cauchy distribution is a continuous probability distribution. dtype must be a floating "
                           f"point but you specified {_C_NAMES[self._dtype]}")
    check_inplace(self)
    return _write_drawn(self, median + sigma * RNG.gen.standard_cauchy(self._data.shape), "CauchyBackward0")


# random_: the integers a float holds exactly run to 2^digits; torch's names of the C types
_RANDOM_DIGITS = {D.float16: (11, "c10::Half"), D.bfloat16: (8, "c10::BFloat16"), D.float32: (24, "float"),
                  D.float64: (53, "double")}
_C_NAMES = {D.int8: "signed char", D.uint8: "unsigned char", D.int16: "short int", D.int32: "int",
            D.int64: "long int", D.bool_: "bool"}
_RANDOM_SIGNATURES = ("random_() received an invalid combination of arguments - got ({}), but expected one of:\n"
                      " * (*, torch.Generator generator = None)\n"
                      " * (int from, int to, *, torch.Generator generator = None)\n"
                      " * (int to, *, torch.Generator generator = None)\n")


def _random_bounds(dt):
    """The values random_() draws from, both ends included."""
    if dt in _RANDOM_DIGITS:
        return 0, 2 ** _RANDOM_DIGITS[dt][0]
    if dt is D.bool_:
        return 0, 1
    return 0, int(np.iinfo(dt.np).max)


def _check_random_range(dt, ends):
    """torch's checks of random_(from, to)'s from and to - 1 (`ends`: (what, value) pairs): an
    error outside an integer dtype's values, a warning outside the integers a float dtype holds
    exactly."""
    if dt in _RANDOM_DIGITS:
        digits, cname = _RANDOM_DIGITS[dt]
        for what, v in ends:
            if not -(2 ** digits) <= v <= 2 ** digits:
                warnings.warn(f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations "
                              f"{cname} can support discrete uniform distribution only within this range. This warning "
                              f"will become an error in version 1.7 release, please fix the code in advance",
                              UserWarning, stacklevel=4)
        return
    bot, top = (0, 1) if dt is D.bool_ else (int(np.iinfo(dt.np).min), int(np.iinfo(dt.np).max))
    for what, v in ends:
        if not bot <= v <= top:
            raise RuntimeError(f"{what} is out of bounds for {_C_NAMES[dt]}")


@_takes_generator
def _random_(self, *args, generator=None, **kwargs):
    """random_(): integers over the dtype's range ([0, 2^digits] of a float's); random_(to):
    [0, to); random_(from, to): [from, to), to=None the dtype's top. Values are drawn from
    tracegrad's stream, not torch's."""
    if "from" in kwargs:
        args = (kwargs.pop("from"),) + args
    if "to" in kwargs:
        args = args + (kwargs.pop("to"),) if args else (0, kwargs.pop("to"))
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if len(args) > 2:
        raise TypeError(f"random_() takes 2 positional arguments but {len(args)} were given")
    for a in args:
        if a is not None and (not isinstance(a, numbers.Integral) or isinstance(a, (bool, np.bool_))):
            raise TypeError(_RANDOM_SIGNATURES.format(", ".join(type(x).__name__ for x in args)))
        if a is not None and not -2 ** 63 <= a < 2 ** 63:
            raise ValueError("Overflow when unpacking long long")
    check_inplace(self)
    dt = self._dtype
    name = ("RandomBackward2", "RandomBackward1", "RandomBackward0")[len(args)]
    if not args:
        lo, hi = _random_bounds(dt)
    else:
        lo, to = (0, args[0]) if len(args) == 1 else args
        if to is None:
            hi = _random_bounds(dt)[1]
            name = "RandomBackward0"
            _check_random_range(dt, (("from", lo),))
            if lo > hi:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' "
                                   f"casted to dtype, but got from={lo} > to_inc={hi}")
        else:
            if lo >= to:
                raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={to}")
            hi = to - 1
            _check_random_range(dt, (("from", lo), ("to - 1", hi)))
    values = RNG.gen.integers(lo, hi, size=self._data.shape, endpoint=True,
                              dtype=np.int64 if hi < 2 ** 63 else np.uint64)
    if dt is D.bfloat16:
        values = D.round_bfloat16(values.astype(np.float32))      # (past 2^8, to the values bfloat16 has)
    return _write_drawn(self, values, name)


Tensor.random_ = _random_
Tensor.exponential_ = _exponential_
Tensor.uniform_ = _uniform_
Tensor.normal_ = _normal_
Tensor.bernoulli_ = _bernoulli_
Tensor.log_normal_ = _log_normal_
Tensor.geometric_ = _geometric_
Tensor.cauchy_ = _cauchy_


def _retain_grad(self):
    if not self._req:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self._retains_grad:
        # before its grad_fn is asked for, as torch's: a piece of chunk() whose base changed in place
        # since raises only where its grad_fn is made again (view seed 435907)
        return
    if self.grad_fn is None:
        return
    self._retains_grad = True
    RETAIN_USED[0] = True
    self.grad_fn.__dict__.setdefault("_retained", {})[self._output_nr] = weakref.ref(self)


def _register_hook(self, hook):
    if not self._req:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        hooks = self.grad_fn.__dict__.setdefault("_tensor_hooks", {}).setdefault(self._output_nr, {})
    else:
        if self._hooks is None:
            self._hooks = {}
        hooks = self._hooks
    h = RemovableHandle(hooks)
    hooks[h.id] = hook
    if Engine.current_task is not None:
        _warn_if_missed(self)
    return h


def _warn_if_missed(t):
    """A hook registered while a backward runs, on a tensor of its graph that had none when it
    started: the running backward has no place to call it (torch's runs it if the tensor's node
    is still to run). Said, not skipped silently."""
    task = Engine.current_task()
    spec = getattr(task, "spec", None) if task is not None else None
    if spec is None:
        return
    if t.grad_fn is not None:
        node, slot = t.grad_fn, t._output_nr
    else:
        node = t._grad_acc() if t._grad_acc is not None else None
        slot = 0
    if node is not None and id(node) in task.index and (node, slot) not in spec:
        warnings.warn("register_hook() during a backward, on a tensor of its graph that had no hooks when it "
                      "started: the hook runs from the next backward on, not in this one (torch's engine runs it "
                      "in this one where the tensor's grad_fn has not run yet). Register the hook before calling "
                      "backward().", UserWarning, stacklevel=3)


Tensor.retain_grad = _retain_grad
Tensor.register_hook = _register_hook


def _is_inference(self):
    if _VALUE_READS[0]:
        self._read_flags()
    return self._inference


def _is_view(self):
    return self._view is not None


Tensor._is_view = _is_view
Tensor.equal = F.equal
Tensor.allclose = F.allclose
Tensor.isclose = F.isclose
Tensor.is_inference = _is_inference


# inverse and hyperbolic functions, scans, sorting (ops/math_functional.py)
for _name in """asin acos atan sinh cosh asinh acosh atanh arcsin arccos arctan arcsinh arccosh arctanh atan2 arctan2
signbit copysign hypot cumsum cumprod sort argsort topk msort kthvalue median quantile nanquantile unique
unique_consecutive diag repeat_interleave
index_add frexp""".split():
    setattr(Tensor, _name, getattr(F, _name))
for _name in "asin acos atan sinh cosh atan2 copysign hypot cumsum cumprod index_add".split():
    setattr(Tensor, _name + "_", _inplace(getattr(F, _name)))


def _no_derivative_inplace(name):
    """asinh_, acosh_, atanh_: the op's values, with torch's node that has no derivative."""
    prim = PRIMITIVES[name + "_inplace"]

    def fn(self):
        F._check_tensor(self, name + "_")
        return F.apply(prim, (self,), {})
    fn.__name__ = name
    return _inplace(fn)


for _name in "asinh acosh atanh".split():
    setattr(Tensor, _name + "_", _no_derivative_inplace(_name))
    setattr(Tensor, "arc" + _name[1:] + "_", getattr(Tensor, _name + "_"))


# the gamma family and erfinv (ops/gamma_primitives.py): x.polygamma(n) takes n second, as torch's
# method; polygamma_ is torch's other overload (PolygammaBackward1)
for _name in "lgamma digamma erfinv mvlgamma".split():
    setattr(Tensor, _name, getattr(F, _name))
    setattr(Tensor, _name + "_", _inplace(getattr(F, _name)))
Tensor.mode = F.mode


def _polygamma(self, n):
    return F.polygamma(n, self)


def _polygamma_(self, n):
    check_inplace(self)
    return commit(self, rename_grad_fn(F.polygamma(n, self), "PolygammaBackward1"))


Tensor.polygamma = _polygamma
Tensor.polygamma_ = _polygamma_


def _inverse(self):
    from .linalg import inv          # cycle: linalg loads after this module (its inv is column by column, as torch's)
    return inv(self)


Tensor.inverse = _inverse
Tensor.det = F.linalg_det


def _inplace_view(name, inplace_name):
    """In-place view ops (transpose_, t_, squeeze_, ...): the tensor becomes the view the
    out-of-place op makes of it, as torch's in-place view ops: an in-place op (a leaf that
    requires grad refuses it, a view checks as for any in-place op, the version moves) whose
    grad_fn takes torch's in-place name (`inplace_name` of the out-of-place op's node name:
    TransposeBackward0 -> TransposeBackward1). Without grad recording the history stays, as
    torch leaves it (a leaf keeps requires_grad)."""
    def op(self, *args, **kwargs):
        if _tracing():
            # a traced value has no layout to change in place: the call runs eagerly (compile
            # warns), where the trace lost the change and gave a wrong answer
            raise TraceError(f"{name}_ (an in-place view op) inside a compiled function is not traced yet")
        check_inplace(self)
        if not (STATE.grad_enabled and self.requires_grad):
            with no_grad():
                new = getattr(self, name)(*args, **kwargs)
            self._data = new._data
            self._vc[0] += 1
            if _DUAL[0]:
                forward_ad.moved(self, new)     # the tangent becomes the same view of itself
            return self
        creation = self._view.creation if self._view is not None else None
        new = getattr(self, name)(*args, **kwargs)
        if _DUAL[0]:
            forward_ad.moved(self, new)
        old_fn, old_nr = self._grad_fn, self._output_nr
        self._data = new._data
        self._grad_fn = new._grad_fn
        self._output_nr = new._output_nr
        self._req = new._req
        self._grad_fn.__class__ = node_class(inplace_name(type(new._grad_fn).__name__))
        self._vc[0] += 1
        if creation is not None:          # a view stays a view of its base, as it was made
            self._view = new._view
            self._view.creation = creation
            self._view.attr_version = self._vc[0]
        views.move_retained(self, old_fn, old_nr)
        return self
    op.__name__ = name + "_"
    return op


def _next_overload(by):
    """torch's in-place view ops' node names: the out-of-place name's number plus `by`."""
    return lambda n: re.sub(r"\d+$", lambda d: str(int(d.group()) + by), n)


# (t_ was an in-place write of the transposed values: wrong for a non-square matrix, and for a
# square one it moved the data under the tensor's other views)
for _name, _by in (("transpose", 1), ("t", 1), ("squeeze", 3), ("unsqueeze", 1), ("swapdims", 1), ("swapaxes", 1)):
    setattr(Tensor, _name + "_", _inplace_view(_name, _next_overload(_by)))

# decompositions into the ops above (ops/composite.py)
for _name in """diagonal trace diag_embed log10 trunc fix frac fmax fmin fmod masked_select movedim moveaxis ravel
nan_to_num argwhere bincount histc matrix_power matrix_exp logaddexp xlogy addmm baddbmm index_fill index_copy take
scatter_reduce logaddexp2 deg2rad rad2deg logit sinc sgn positive float_power heaviside addcmul addcdiv nansum nanmean
diff aminmax bitwise_not""".split():
    setattr(Tensor, _name, getattr(F, _name))


def _inplace_composite(fn):
    """The in-place form of a decomposition: with autograd, computed from a clone of self, whose
    nodes may read self's value (log10_'s log did: backward raised "modified by an inplace
    operation" once the write changed self)."""
    check = _operand_check(fn.__name__)

    def op(self, *args, **kwargs):
        check_inplace(self)
        if check is not None and (args or kwargs):
            check(self, args, kwargs)
        if not (STATE.grad_enabled and self.requires_grad):
            return commit(self, fn(self, *args, **kwargs))
        # on a view, a copy at the old base's place in the graph (views.old_value), as torch's
        # CopySlices routes the gradient of the op's self
        src = views.old_value(self) if self._view is not None and not _tracing() else None
        if src is not None:
            return commit(self, fn(src, *args, **kwargs), routed=True)
        return commit(self, fn(self.clone(), *args, **kwargs))
    op.__name__ = fn.__name__ + "_"
    return op


for _name in """trunc fix frac fmod nan_to_num log10 index_fill index_copy scatter_reduce deg2rad rad2deg logit sinc sgn
heaviside addcmul addcdiv bitwise_not""".split():
    setattr(Tensor, _name + "_", _inplace_composite(getattr(F, _name)))


# -- in-place forms, casts and questions torch's Tensor also has -------------------------------------
# (each in-place form is the out-of-place op written back: a result of another dtype is cast to
# self's, or refused as torch refuses it, by the write)
def _compared(fn, name):
    """A comparison written in place: on a float self with grad (or beside an other that requires it),
    torch's node (EqBackward0, LtBackward1, ...) whose gradient is zero for both."""
    def cmp(self, other):
        c = fn(self, other)
        if STATE.grad_enabled and self._dtype.is_floating_point and (
                self.requires_grad or (isinstance(other, Tensor) and other.requires_grad)):
            return F.apply(PRIMITIVES["compare_inplace"], (self, c) + ((other,) if isinstance(other, Tensor) else ()),
                           {"name": name})
        return c
    cmp.__name__ = fn.__name__
    return _inplace(cmp)


for _name, _node in (("eq", "Eq"), ("ne", "Ne"), ("lt", "Lt"), ("le", "Le"), ("gt", "Gt"), ("ge", "Ge"),
                     ("greater", "Gt"), ("less", "Lt"), ("greater_equal", "Ge"), ("less_equal", "Le"),
                     ("not_equal", "Ne")):
    setattr(Tensor, _name + "_", _compared(getattr(Tensor, _name), _node))


def _kept_gradient(fn):
    """logical_and_, ... in place: torch keeps self's node (the gradient flows on through the write as
    if nothing had been written); a trace has no value with one value's data and another's
    gradient, so the call runs eagerly (compiled, the result required no grad: backward raised)."""
    def op(self, *args):
        if _tracing() and STATE.grad_enabled and self.requires_grad and self._dtype.is_floating_point:
            raise TraceError(f"{fn.__name__} on a value that requires grad (eager keeps the value's gradient "
                             f"through the write) is not traced")
        return fn(self, *args)
    op.__name__ = fn.__name__
    return op


for _name in """eq ne lt le gt ge greater less greater_equal less_equal not_equal logical_and logical_or logical_xor
bitwise_and bitwise_or bitwise_xor multiply divide subtract true_divide absolute negative arccos arcsin arctan arccosh
arcsinh arctanh arctan2 tan log2 xlogy""".split():
    if hasattr(Tensor, _name) and not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace(getattr(Tensor, _name)))
for _name in "logical_and logical_or logical_xor logical_not".split():
    setattr(Tensor, _name + "_", _kept_gradient(getattr(Tensor, _name + "_")))
for _name in "bitwise_and_ bitwise_or_ bitwise_xor_".split():
    setattr(Tensor, _name, _cast_checked(getattr(Tensor, _name)))
Tensor.byte = lambda self: self.to(D.uint8)
Tensor.char = lambda self: self.to(D.int8)
Tensor.short = lambda self: self.to(D.int16)
Tensor.is_cpu = property(lambda self: not self.is_cuda)
Tensor.is_signed = lambda self: self.dtype is not D.bool_ and self.dtype is not D.uint8
Tensor.is_same_size = lambda self, other: tuple(self.shape) == tuple(other.shape)
Tensor.is_conj = lambda self: False          # no complex dtypes: nothing is conjugated or negated lazily
Tensor.is_neg = lambda self: False
Tensor.resolve_conj = Tensor.resolve_neg = Tensor.conj = lambda self: self


def _is_nonzero(self):
    if self.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if self.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())


Tensor.is_nonzero = _is_nonzero


def _unfold(self, dimension, size, step):
    """Every window of `size` elements along `dimension`, `step` apart, as a last dimension: a view
    (writes through it reach self), as torch's Tensor.unfold."""
    if self.ndim == 0:                  # torch: the value as one window of `size` (at most 1)
        out = _unfold(self.reshape(1), 0 if dimension in (0, -1) else dimension, size, step).reshape(size)
        return rename_grad_fn(out, "UnfoldBackward0")
    d = F.S.normalize_dim(dimension, self.ndim)
    n = self.shape[d]
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return F.apply(PRIMITIVES["unfold"], (self,), {"dim": d, "size": int(size), "step": int(step)})


Tensor.unfold = _unfold


# more of torch's methods, decompositions in ops/composite_more.py
from .ops import composite_more as _more  # noqa: E402  (the module's own ops, loaded above)

for _name in """cross inner kron vdot addmv addr addbmm dist cov corrcoef rot90 take_along_dim split_with_sizes hsplit
vsplit dsplit cummax cummin logcumsumexp isin diagflat ldexp nanmedian fill_diagonal_ select_scatter slice_scatter
diagonal_scatter masked_scatter put renorm""".split():
    setattr(Tensor, _name, getattr(_more, _name))
for _name in "masked_scatter put renorm".split():
    setattr(Tensor, _name + "_", _inplace_composite(getattr(_more, _name)))
for _name in "addmv addr addbmm".split():
    setattr(Tensor, _name + "_", _inplace(getattr(_more, _name)))
Tensor.ldexp_ = _inplace(_more.ldexp)
_float_power_ = _inplace_composite(F.float_power)


def float_power_(self, exponent):
    """self ** exponent in place, as torch's: self must be float64, the dtype of the result."""
    if self.dtype is not D.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {D.SCALAR_NAME[self.dtype]} but the "
                           f"operation's result requires dtype Double")
    return _float_power_(self, exponent)


Tensor.float_power_ = float_power_


# ops/functional_extra.py: i0 (torch.special's i0e, i1, i1e have no methods)
from .ops import functional_extra as _extra  # noqa: E402

Tensor.i0 = _extra.i0
Tensor.i0_ = _inplace(_extra.i0)
Tensor.angle = _extra.angle

# ops/special_functional.py: the incomplete gamma functions (torch.special's others have no methods)
from .ops import special_functional as _special  # noqa: E402

Tensor.igamma, Tensor.igammac = _special.igamma, _special.igammac
Tensor.igamma_, Tensor.igammac_ = _inplace(_special.igamma), _inplace(_special.igammac)


def _conj_physical_(self):
    """In place on a real tensor: its value stays, its version moves and, recording, its node becomes
    torch's ConjPhysicalBackward1 (the gradient passes unchanged), as torch's conj_physical_."""
    check_inplace(self)
    return commit(self, rename_grad_fn(F.clone(self), "ConjPhysicalBackward1"))


Tensor.conj_physical = _extra.conj_physical
Tensor.conj_physical_ = _conj_physical_


def _cast_checked(fn):
    """An in-place binary op whose result dtype is checked against self's before its kernel's dtype
    check, as torch's TensorIterator does (int8.gcd_(float) is the cast error, not gcd's)."""
    inplace = _inplace(fn)

    def op(self, other):
        if isinstance(self, Tensor) and isinstance(other, Tensor):
            d = D.result_type([self, other])
            if d is not self._dtype and d._kind > self._dtype._kind:
                raise RuntimeError(f"result type {D.SCALAR_NAME[d]} can't be cast to the desired output type "
                                   f"{D.SCALAR_NAME[self._dtype]}")
        return inplace(self, other)
    op.__name__ = inplace.__name__
    return op


for _name in "gcd lcm nextafter".split():
    setattr(Tensor, _name, getattr(_extra, _name))
    setattr(Tensor, _name + "_", _cast_checked(getattr(_extra, _name)))
Tensor.as_strided = _extra.as_strided
Tensor.as_strided_ = _inplace_view("as_strided", _next_overload(1))
Tensor.index_reduce = _extra.index_reduce
Tensor.index_reduce_ = _inplace_composite(_extra.index_reduce)


def _resize_(self, *size, memory_format=None):
    """self as a C-contiguous (or channels_last) tensor of `size` over its storage from its storage
    offset, as torch's resize_: the storage's elements in their order (a transposed tensor's too),
    the storage grown where it is too short (the new elements uninitialized: zeros here); the
    version moves. torch's errors: a tensor that requires grad, a negative size, a storage numpy
    code outside tracegrad shares (from_numpy) that would have to grow. Where tracegrad cannot keep
    torch's sharing it raises: growing a storage other tensors view (torch grows it in place, under
    them), resizing a view, a CUDA tensor, or inside a compiled function."""
    if _tracing():
        raise TraceError("resize_ inside a compiled function is not traced yet")
    if _DUAL[0] and forward_ad.tangent_of(self) is not None:
        raise RuntimeError("cannot resize variables that has a forward grad")
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not size:
        raise TypeError('resize_() missing 1 required positional arguments: "size"')
    for i, n in enumerate(size):
        if not isinstance(n, (int, np.integer)) and not (isinstance(n, Tensor) and n.ndim == 0 and
                                                          not n.dtype.is_floating_point):
            raise TypeError(f"resize_(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                            f"\"type must be tuple of ints,but got {type(n).__name__}\"")
    size = tuple(int(n) for n in size)
    if any(n < 0 for n in size):
        raise RuntimeError("numel: integer multiplication overflow")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    layout = getattr(memory_format, "_name", None)
    if layout == "channels_last":
        check_format_rank(len(size), layout)
    if layout not in (None, "contiguous_format", "preserve_format", "channels_last"):
        raise RuntimeError(f"resize_ with memory_format={memory_format} is not supported")
    if self.is_cuda:
        raise RuntimeError("resize_ of a CUDA tensor is not supported yet")
    if size == tuple(self.shape) and layout in (None, "preserve_format"):
        return self                         # (torch keeps the geometry, strides included, and the version)
    if self._view is not None:
        raise RuntimeError("resize_ of a view is not supported: tracegrad would not keep it a view of its base as "
                           "torch does; resize the base, or a clone")
    n = math.prod(size)
    root = memory_root(self._data)
    item = self._data.itemsize
    off = self.storage_offset()
    storage = root.nbytes // item
    if off + n <= storage:
        if not root.flags.c_contiguous:
            raise RuntimeError("resize_ of a tensor whose storage is a strided numpy array is not supported")
        flat = root.reshape(-1).view(self._data.dtype)[off:off + n]
    else:
        if escaped(self._data):
            raise RuntimeError("Trying to resize storage that is not resizable")
        # held here, by self._data and by getrefcount's argument: any other holder is a view
        if self._data is not root or sys.getrefcount(root) > 3:
            raise RuntimeError("resize_ growing a storage that other tensors view is not supported (torch grows it "
                               "under them, which numpy cannot): resize a clone, or before taking the views")
        flat = np.zeros(off + n, dtype=self._data.dtype)
        flat[:storage] = root.reshape(-1)
        flat = flat[off:]
    if layout == "channels_last":
        b, c, h, w = size
        new = flat.reshape(b, h, w, c).transpose(0, 3, 1, 2)
    else:
        new = flat.reshape(size)
    self._data = new
    self._vc[0] += 1
    return self


def _resize_as_(self, the_template, *, memory_format=None):
    return _resize_(self, tuple(the_template.shape), memory_format=memory_format)


Tensor.resize_ = _resize_
Tensor.resize_as_ = _resize_as_


# torch's less used methods, of ops/functional_extra.py, creation.py and composites
for _name in "isposinf isneginf isreal logdet slogdet pinverse".split():
    setattr(Tensor, _name, getattr(_extra, _name))
Tensor.addmm_ = _inplace(F.addmm)
Tensor.baddbmm_ = _inplace(F.baddbmm)


Tensor.bernoulli = _creation.bernoulli
Tensor.multinomial = _creation.multinomial


def _sum_to_size(self, *size):
    """torch's Tensor.sum_to_size: the sum of the dims `size` broadcasts along."""
    size = F._size_args(size, "sum_to_size")
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{[{', '.join(map(str, size))}]}} is not expandable to size "
                           f"{{[{', '.join(map(str, shape))}]}}.")
    return sum_to(self, size)


def _narrow_copy(self, dim, start, length):
    return rename_grad_fn(F.clone(F.narrow(self, dim, start, length), memory_format=F.contiguous_format),
                          "NarrowCopyBackward0")


Tensor.sum_to_size = _sum_to_size
Tensor.narrow_copy = _narrow_copy
for _name in "is_meta is_sparse is_sparse_csr is_quantized is_nested is_mkldnn".split():
    setattr(Tensor, _name, property(lambda self: False, doc=f"False: tracegrad has dense tensors alone ({_name})"))
Tensor.is_pinned = lambda self, device=None: False

# share_memory_: tracegrad's tensors live in host memory that a forked process shares already; the
# memory a tensor was moved to "shared" is remembered, so that is_shared() answers as torch's
_SHARED = {}                   # id of the memory's owner -> a weak reference to it


def _share_memory_(self):
    root = memory_root(self._data)
    key = id(root)
    _SHARED[key] = weakref.ref(root, lambda _r, key=key: _SHARED.pop(key, None))
    return self


def _is_shared(self):
    root = memory_root(self._data)
    ref = _SHARED.get(id(root))
    return ref is not None and ref() is root


Tensor.share_memory_ = _share_memory_
Tensor.is_shared = _is_shared


def _python_elementwise(name, self, fn, others):
    """apply_/map_/map2_: fn of the elements (and the broadcast elements of `others`), Python
    numbers in and out, written into self (CPU tensors that do not require grad, as torch's)."""
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() instead.")
    args = [self._data] + [np.broadcast_to(o._data, self._data.shape) for o in others]
    conv = bool if self._dtype is D.bool_ else int if not self._dtype.is_floating_point else float
    values = np.empty(self._data.shape, object)
    for i in np.ndindex(self._data.shape):
        values[i] = conv(fn(*(a[i].item() for a in args)))
    return _write_drawn(self, values.astype(self._data.dtype) if values.size else values.astype(self._data.dtype),
                        name)


Tensor.apply_ = lambda self, callable: _python_elementwise("apply_", self, callable, ())
Tensor.map_ = lambda self, tensor, callable: _python_elementwise("map_", self, callable, (tensor,))
Tensor.map2_ = lambda self, x, y, callable: _python_elementwise("map2_", self, callable, (x, y))

_TENSOR_OPTION_NAMES = {D.float64: "double", D.float32: "float", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
                        D.int64: "long int", D.int32: "int", D.int16: "short int", D.int8: "signed char",
                        D.uint8: "unsigned char", D.bool_: "bool"}


def _new(self, *args, **kwargs):
    """The legacy constructor x.new(...): no arguments, an empty tensor; sizes (ints or a
    torch.Size), an uninitialized one; data (a list or tuple), a tensor of it; a tensor of x's
    dtype, an alias of it; all of x's dtype."""
    if kwargs:
        raise TypeError(f"new() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if not args:
        return _creation.empty((0,), dtype=self._dtype)
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if t._dtype is not self._dtype:
            opts = "TensorOptions(dtype={}, device=cpu, layout=Strided, requires_grad=false (default), " \
                   "pinned_memory=false (default), memory_format=(nullopt))"
            raise TypeError(f"expected {opts.format(_TENSOR_OPTION_NAMES[self._dtype])} (got "
                            f"{opts.format(_TENSOR_OPTION_NAMES[t._dtype])})")
        return t.detach()
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args) or \
            (len(args) == 1 and type(args[0]).__name__ == "Size"):
        return _creation.empty(*args, dtype=self._dtype)
    if len(args) == 1:
        return tensor(args[0], dtype=self._dtype)
    raise TypeError(f"new() received an invalid combination of arguments - got "
                    f"({', '.join(type(a).__name__ for a in args)})")


Tensor.new = _new


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                       pin_memory=False):
    return _creation.empty_strided(size, stride, dtype=dtype if dtype is not None else self._dtype,
                                   requires_grad=requires_grad)


Tensor.new_empty_strided = _new_empty_strided


# -- torch's methods number their arguments after self ------------------------------------------------
# The methods above are the public ops themselves (or their in-place forms), whose TypeErrors number
# the arguments as the function does: x.maximum("a") said "argument 'other' (position 2)" where
# torch's method says position 1 (and add_'s error named add). Each method renumbers its own op's.
_ARGUMENT_ERROR = re.compile(r"(\w+)\(\): argument '(\w+)' \(position (\d+)\)")


def _numbered_as_method(fn, name):
    own = (name, name[:-1]) if name.endswith("_") else (name,)

    @functools.wraps(fn)
    def method(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            m = _ARGUMENT_ERROR.match(str(e)) if len(e.args) == 1 and isinstance(e.args[0], str) else None
            if m is not None and m.group(1) in own and int(m.group(3)) > 1:
                e.args = (f"{name}(): argument '{m.group(2)}' (position {int(m.group(3)) - 1})"
                          + e.args[0][m.end():],)
            raise
    return method


for _name, _fn in list(vars(Tensor).items()):
    # (adjoint takes self alone, and its 0-d warning names the caller's line, a frame up)
    if _fn.__class__ is types.FunctionType and not _name.startswith("_") and \
            _name not in ("where", "polygamma", "adjoint") \
            and (_fn.__module__.startswith("tracegrad.ops") or _fn.__module__ == __name__):
        setattr(Tensor, _name, _numbered_as_method(_fn, _name))

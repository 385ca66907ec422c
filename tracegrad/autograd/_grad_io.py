"""What backward() and grad() start from and answer, shared by the autograd engine's entry
points (autograd/__init__.py), traced grad (autodiff.py) and traced backward
(functionalize.py): the seed gradient of each output and the checked result for each input.
It imports only the tensor and creation, below all three."""
import numpy as np

from ..tensor import Tensor
from ..creation import ones_like_data, zeros
from ..ops.functional import _dense


def _seeds(outputs, grads, create_graph, what="grad_tensors", ones=None):
    """The gradient each output starts from; `ones(o)` makes an implicit one (by default
    a concrete tensor; a traced grad makes a symbolic one)."""
    concrete = ones is None
    if concrete and not grads:           # the common call: an implicit one for each output
        seeds = []
        for o in outputs:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not o.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {o.dtype}")
            seeds.append(ones_like_data(o))     # the output's shape and dtype already
        return seeds
    ones = ones or ones_like_data
    if len(grads) == 0:
        grads = [None] * len(outputs)
    for g in grads:
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    # torch pairs outputs with gradients as zip does: extra gradients go unused
    if len(grads) < len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    grads = grads[:len(outputs)]
    seeds = []
    for i, (o, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not o.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {o.dtype}")
            g = ones(o)
            if concrete:                 # ones_like_data: the output's shape and dtype already
                seeds.append(g)
                continue
        if tuple(g.shape) != tuple(o.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a "
                               f"shape of {o.shape}.")
        # torch only refuses a complex/real mismatch (tracegrad has no complex dtype); any other
        # grad_output dtype is cast to the output's
        if g.dtype is not o.dtype:
            g = g.to(o.dtype)
        seeds.append(g)
    return seeds


def _results(inputs, res, allow_unused, materialize_grads, create_graph=False):
    """grad()'s answer: torch's error for an unused input, or None, or zeros."""
    out = []
    for i, (t, g) in enumerate(zip(inputs, res)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                                   f"graph. Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                g = zeros(tuple(t.shape), dtype=t.dtype, device=t.device, requires_grad=create_graph)
        out.append(g)
    return tuple(out)


# -- the layout of a leaf's .grad (torch's gradient layout contract) --------------------------------

def _copy_obeying(g, v):
    """A copy of gradient array g laid out as leaf array v where v is dense (torch's
    clone_obey_contract: empty_strided(v's sizes and strides).copy_(g)), else C-contiguous."""
    if v.flags.c_contiguous or not _dense(v):
        return np.array(g, order="C", copy=True)
    out = np.empty_like(v, dtype=g.dtype)          # order "K": v's order of dims
    out[...] = g
    return out


def _obeys_layout(g, v):
    """torch's obeys_layout_contract(grad, variable) on arrays: where the leaf is dense, the
    gradient's strides are the leaf's in every dim of more than one element; else the gradient
    is C-contiguous (AccumulateGrad then keeps it as it is)."""
    if g.shape == v.shape and g.flags.c_contiguous and v.flags.c_contiguous:
        return True                 # (the common case: both C-contiguous)
    if not _dense(v):
        return g.flags.c_contiguous
    item, vi = g.itemsize, v.itemsize
    for k, n in enumerate(g.shape):
        if n != 1:
            if k >= v.ndim or g.strides[k] // item != v.strides[k] // vi:
                return False
        elif g.strides[k] == 0:
            return False
    return True


def grad_array_for(a, v):
    """The array to become a new .grad of leaf array v from gradient array a: a itself where it
    obeys the layout contract, else a copy laid out as v (torch's AccumulateGrad)."""
    if _obeys_layout(a, v):
        return a
    return _copy_obeying(a, v)

"""Pruning: zero chosen entries of a module's parameter and keep them zero while it trains.

Pruning `module.weight` leaves three things on the module:
  weight_orig  the parameter itself (what an optimizer updates),
  weight_mask  a buffer of the parameter's shape, 1 where an entry survives and 0 where it is pruned,
  a forward pre-hook (the pruning method) that sets `module.weight = weight_mask * weight_orig`
  before every call, so gradients reach `weight_orig` through the product, zero where pruned.
Pruning the same parameter again narrows the same mask (the methods gather in a PruningContainer);
`remove` folds the mask into the parameter and takes the hook away.

Which entries a method prunes:
  L1Unstructured      the `amount` entries of smallest magnitude;
  LnStructured        the `amount` slices along `dim` of smallest L`n` norm;
  RandomUnstructured  `amount` entries, RandomStructured `amount` slices, drawn at random;
  CustomFromMask      the zeros of a given mask.
`amount` is a count (an int >= 0) or a fraction (a float in [0, 1]) of the entries or slices still
alive, rounded to the nearest count (halves to even, as Python's round).

Ties: among equal magnitudes (or norms) the entry (or slice) with the lower flat index is pruned first,
as a stable ascending sort would order them; NaN ranks above every number, so it is pruned last. torch
leaves that order unspecified (its CPU and CUDA kernels pick differently); every other choice is torch's.
"""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np

from ... import creation as C
from ..._dtype import bfloat16
from ...grad_mode import no_grad
from ...tracing import Proxy, TraceError
from ...ops import functional as O
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


# == amounts ======================================================================================================

def _check_amount(amount):
    """An amount must be a non-negative int or a float in [0, 1] (checked when a method is made)."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    is_count = isinstance(amount, numbers.Integral)
    if (is_count and amount < 0) or (not is_count and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count(amount, size):
    """How many of `size` entries (or slices) `amount` prunes; more than there are is an error."""
    k = amount if isinstance(amount, numbers.Integral) else round(amount * size)
    if k > size:
        raise ValueError(f"amount={k} should be smaller than the number of parameters to prune={size}")
    return k


def _array(t):
    """`t`'s values as a numpy array (bfloat16, which numpy lacks, read exactly as float32)."""
    t = t.detach()
    return (t.float() if t.dtype == bfloat16 else t).numpy()


# == choosing what to prune =======================================================================================

def _lowest(scores, k):
    """The positions of the k lowest of the 1-d array `scores`, ties to the lower position, NaN last."""
    return np.argsort(scores, kind="stable")[:k]


def _check_slices(t, dim):
    """Structured pruning cuts a tensor of 2 or more dims into slices along `dim`."""
    if len(t.shape) <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of shape "
                         f"{t.shape} with {len(t.shape)} dims")
    if not -t.dim() <= dim < t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _slice_norms(t, n, dim):
    """The L`n` norm of each slice of `t` along `dim` (a 1-d numpy array)."""
    others = [d for d in range(t.dim()) if d != dim % t.dim()]
    return _array(O.norm(t.detach(), n, others))


# == building masks ===============================================================================================

def _without(mask, flat_positions):
    """A copy of `mask` with the entries at `flat_positions` (of the flattened mask) set to 0."""
    out = _array(mask).copy()
    out.reshape(-1)[flat_positions] = 0
    return C.tensor(out, dtype=mask.dtype)


def _slices_mask(t, dim, pruned, default_mask):
    """`default_mask` (in t's dtype) with the slices `pruned` of `t` along `dim` set to 0."""
    out = _array(default_mask.to(dtype=t.dtype)).copy()
    index = [slice(None)] * t.dim()
    index[dim] = pruned
    out[tuple(index)] = 0
    return C.tensor(out, dtype=t.dtype)


def _narrowed(method, t, mask):
    """`mask` narrowed by `method`, which sees only what is still alive: the entries where the mask is 1
    (unstructured), the slices along `method.dim` not yet all zero (structured), or all of `t` (global).
    The result has t's dtype."""
    mask = mask.to(dtype=t.dtype)
    kind = method.PRUNING_TYPE
    if kind == "unstructured":
        where = _array(mask) == 1
    elif kind == "structured":
        if not hasattr(method, "dim"):
            raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute `dim` '
                                 'defined.')
        n_dims = t.dim()
        dim = method.dim + n_dims if method.dim < 0 else method.dim
        if dim < 0:
            raise IndexError(f"Index is out of bounds for tensor with dimensions {n_dims}")
        alive = _array(mask).sum(axis=tuple(d for d in range(n_dims) if d != dim)) != 0
        where = tuple(alive if d == dim else slice(None) for d in range(n_dims))
    elif kind == "global":
        where = (slice(None),) * t.dim()
    else:
        raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
    values, out = _array(t), _array(mask).copy()
    part = method.compute_mask(C.tensor(values[where], dtype=t.dtype), default_mask=C.tensor(out[where],
                                                                                              dtype=mask.dtype))
    out[where] = _array(part.to(dtype=mask.dtype))
    return C.tensor(out, dtype=mask.dtype)


# == the pruning methods ==========================================================================================

class BasePruningMethod(ABC):
    """A way to choose what to prune (`compute_mask`), and the forward pre-hook that applies it.

    A subclass sets PRUNING_TYPE ("unstructured", "structured" with a `dim` attribute, or "global"), which
    says what of a tensor pruned before it sees when it prunes again, and defines compute_mask."""
    _tensor_name = None

    def __call__(self, module, inputs):
        weight = self.apply_mask(module)
        if weight.__class__ is Proxy:
            # (the module's attribute would keep a value of the trace, and a program's later calls
            # would not set it again: compile runs the module eagerly, as with weight_norm)
            raise TraceError(f"pruning's hook sets {type(module).__name__}.{self._tensor_name} before each forward, "
                             f"which a compiled program cannot do to the module")
        setattr(module, self._tensor_name, weight)

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask that prunes `t` further than `default_mask` (ones and zeros of t's shape) does."""

    def apply_mask(self, module):
        """The pruned tensor: `<name>_mask * <name>_orig`, in the parameter's dtype."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        orig = getattr(module, self._tensor_name + "_orig")
        return getattr(module, self._tensor_name + "_mask").to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune `module.<name>` with `cls(*args, **kwargs)`, choosing by `importance_scores` (default: the
        parameter's values), and return the hook now on the module (a PruningContainer when it was pruned
        before). Nothing on the module changes when choosing fails."""
        earlier = [key for key, hook in module._forward_pre_hooks.items()
                   if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
        if len(earlier) > 1:
            raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                                 f"{module}. Use a PruningContainer.")
        method = cls(*args, **kwargs)
        method._tensor_name = name
        param = getattr(module, name)
        if importance_scores is None:
            importance_scores = param
        elif importance_scores.shape != param.shape:
            raise AssertionError(f"importance_scores should have the same shape as parameter {name} of {module}, "
                                 f"got {importance_scores.shape} vs {param.shape}")
        with no_grad():
            if earlier:
                mask = _narrowed(method, importance_scores, getattr(module, name + "_mask").detach().clone())
            else:
                mask = method.compute_mask(importance_scores, default_mask=C.ones_like(param))
        if earlier:
            hook = module._forward_pre_hooks.pop(earlier[0])
            if not isinstance(hook, PruningContainer):
                hook = PruningContainer(hook)
            hook.add_pruning_method(method)
            method = hook
        else:
            module.register_parameter(name + "_orig", param)
            del module._parameters[name]
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """`t` times this method's mask (chosen by `importance_scores`, default `t`), on top of `default_mask`."""
        if importance_scores is None:
            importance_scores = t
        elif importance_scores.shape != t.shape:
            raise AssertionError(f"importance_scores should have the same shape as tensor t, got "
                                 f"{importance_scores.shape} vs {t.shape}")
        with no_grad():
            mask = self.compute_mask(importance_scores,
                                     default_mask=C.ones_like(t) if default_mask is None else default_mask)
        return t * mask

    def remove(self, module):
        """Make the pruning permanent: `<name>` is the parameter again (the same object as `<name>_orig`,
        so an optimizer keeps it), holding mask * orig; `<name>_orig` and `<name>_mask` go."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        pruned = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        param = module._parameters.pop(name + "_orig")
        del module._buffers[name + "_mask"]
        param.data = pruned.data
        setattr(module, name, param)


class PruningContainer(BasePruningMethod):
    """The methods that pruned one tensor, in order; its mask is the last one's, chosen among what the
    earlier ones left alive."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        if methods:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if method is None:
            return
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method._tensor_name != self._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        return _narrowed(self._pruning_methods[-1], t, default_mask)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (a parameter gets `_orig`, `_mask` and the hook all the same)."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` entries of smallest magnitude (the lower flat index first among equal ones)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count(self.amount, t.numel())
        return _without(default_mask, _lowest(np.abs(_array(t)).reshape(-1), k))

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` entries drawn at random (tracegrad's generator: see manual_seed)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count(self.amount, t.numel())
        if k == 0:
            return default_mask.clone()
        draws = _array(C.rand_like(t)).reshape(-1)
        return _without(default_mask, _lowest(draws, k))

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class LnStructured(BasePruningMethod):
    """Prunes the `amount` slices along `dim` of smallest L`n` norm (the lower index first among equal ones);
    `n` is a number, inf, -inf or "fro"."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_slices(t, self.dim)
        size = t.shape[self.dim]
        k = _count(self.amount, size)
        norms = _slice_norms(t, self.n, self.dim)
        if k == 0:
            return default_mask
        return _slices_mask(t, self.dim, _lowest(norms, k), default_mask)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` slices along `dim` drawn at random."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_slices(t, self.dim)
        size = t.shape[self.dim]
        k = _count(self.amount, size)
        if k == 0:
            return default_mask
        return _slices_mask(t, self.dim, _lowest(_array(C.rand(size)), k), default_mask)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given `mask` is 0 (the mask multiplies the earlier one)."""
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match self.mask shape "
                                 f"{self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# == the functions ================================================================================================

def identity(module, name):
    """Give `module.<name>` an all-ones mask (and `_orig`, the hook); returns the module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` random entries of `module.<name>`; returns the module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the `amount` entries of `module.<name>` of smallest magnitude (of `importance_scores`, when
    given); returns the module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` random slices of `module.<name>` along `dim`; returns the module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the `amount` slices of `module.<name>` along `dim` of smallest L`n` norm (of
    `importance_scores`, when given); returns the module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    """Prune `module.<name>` where `mask` is 0; returns the module."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) `parameters` as one: `pruning_method(**kwargs)` (an unstructured method)
    chooses among all their live entries together (by `importance_scores[(module, name)]` where given),
    and each parameter gets its part of that mask as a custom mask."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    if importance_scores is None:
        importance_scores = {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f'{pruning_method} of type {method.PRUNING_TYPE}')
    with no_grad():
        scores = parameters_to_vector([importance_scores.get((module, name), getattr(module, name))
                                       for module, name in parameters])
        masks = parameters_to_vector([getattr(module, name + "_mask") if hasattr(module, name + "_mask")
                                      else C.ones_like(getattr(module, name)) for module, name in parameters])
        mask = _narrowed(method, scores, masks)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=mask[start:start + param.numel()].view_as(param))
        start += param.numel()


def remove(module, name):
    """Make the pruning of `module.<name>` permanent (see BasePruningMethod.remove); returns the module."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """Whether `module` or any module inside it carries a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for sub in module.modules() for hook in sub._forward_pre_hooks.values())

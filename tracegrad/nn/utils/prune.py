"""torch.nn.utils.prune: a pruned parameter `name` becomes `name_orig` (the parameter) and
`name_mask` (a buffer), and a forward pre-hook recomputes `name = name_mask * name_orig` before
every forward, as torch's.

Pruning by magnitude keeps torch's choice among tied magnitudes: torch picks the k smallest
(or largest) with std::partial_sort or std::nth_element (libstdc++'s, on CPU), whose pick among
equal values depends on the algorithms' steps; `_topk_indices` replays those steps where a tie
straddles the k-th value (elsewhere the set is the values' own)."""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np

from ... import creation as C
from ...grad_mode import no_grad
from ...tracing import Proxy, TraceError
from ...ops import functional as O
from ...ops.math_functional import kthvalue
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


# == torch's CPU topk: which of the tied values it keeps =========================================================

def _comp(largest):
    """torch's topk comparators: NaN ranks above every number, either way."""
    if largest:
        return lambda x, y: (x[0] != x[0] and y[0] == y[0]) or x[0] > y[0]
    return lambda x, y: (x[0] == x[0] and y[0] != y[0]) or x[0] < y[0]


def _adjust_heap(q, first, hole, length, value, comp):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if comp(q[first + child], q[first + child - 1]):
            child -= 1
        q[first + hole] = q[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        q[first + hole] = q[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and comp(q[first + parent], value):
        q[first + hole] = q[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    q[first + hole] = value


def _heap_select(q, first, middle, last, comp):
    length = middle - first
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            _adjust_heap(q, first, parent, length, q[first + parent], comp)
            if parent == 0:
                break
            parent -= 1
    for i in range(middle, last):
        if comp(q[i], q[first]):
            value = q[i]
            q[i] = q[first]
            _adjust_heap(q, first, 0, length, value, comp)


def _insertion_sort(q, first, last, comp):
    for i in range(first + 1, last):
        val = q[i]
        if comp(val, q[first]):
            q[first + 1:i + 1] = q[first:i]
            q[first] = val
        else:
            j = i
            while comp(val, q[j - 1]):
                q[j] = q[j - 1]
                j -= 1
            q[j] = val


def _move_median_to_first(q, result, a, b, c, comp):
    if comp(q[a], q[b]):
        if comp(q[b], q[c]):
            m = b
        elif comp(q[a], q[c]):
            m = c
        else:
            m = a
    elif comp(q[a], q[c]):
        m = a
    elif comp(q[b], q[c]):
        m = c
    else:
        m = b
    q[result], q[m] = q[m], q[result]


def _unguarded_partition(q, first, last, pivot, comp):
    while True:
        while comp(q[first], q[pivot]):
            first += 1
        last -= 1
        while comp(q[pivot], q[last]):
            last -= 1
        if not first < last:
            return first
        q[first], q[last] = q[last], q[first]
        first += 1


def _nth_element(q, nth, comp):
    first, last = 0, len(q)
    if nth == last:
        return
    depth = 2 * (last.bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(q, first, nth + 1, last, comp)
            q[first], q[nth] = q[nth], q[first]
            return
        depth -= 1
        mid = first + (last - first) // 2
        _move_median_to_first(q, first, first + 1, mid, last - 1, comp)
        cut = _unguarded_partition(q, first + 1, last, first, comp)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(q, first, last, comp)


def _topk_indices(values, k, largest):
    """The positions torch.topk(values, k, largest=largest) returns on CPU, as a set (an int64
    array in no particular order): libstdc++'s partial_sort where k * 64 <= n, else nth_element."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    n = values.size
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.isnan(values).any():
        key = -values if largest else values
        kth = np.partition(key, k - 1)[k - 1]
        before = key < kth
        if before.sum() + (key == kth).sum() == k:       # no tie across the k-th value: the set is plain
            return np.flatnonzero(before | (key == kth))
    q = list(zip(values.tolist(), range(n)))
    comp = _comp(largest)
    if k * 64 <= n:
        _heap_select(q, 0, k, n, comp)
    else:
        _nth_element(q, k - 1, comp)
    return np.array([i for _, i in q[:k]], dtype=np.int64)


# == pruning methods ============================================================================================

class BasePruningMethod(ABC):
    """A forward pre-hook that recomputes `module.<name>` as `<name>_mask * <name>_orig`."""
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
        """The mask for `t`, combined with `default_mask`."""

    def apply_mask(self, module):
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        def _get_composite_method(cls, module, name, *args, **kwargs):
            old_method = None
            found = 0
            hooks_to_remove = []
            for k, hook in module._forward_pre_hooks.items():
                if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                    old_method = hook
                    hooks_to_remove.append(k)
                    found += 1
            if found > 1:
                raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                                     f"{module}. Use a PruningContainer.")
            for k in hooks_to_remove:
                del module._forward_pre_hooks[k]
            method = cls(*args, **kwargs)
            method._tensor_name = name
            if old_method is not None:
                if isinstance(old_method, PruningContainer):
                    old_method.add_pruning_method(method)
                    method = old_method
                elif isinstance(old_method, BasePruningMethod):
                    container = PruningContainer(old_method)
                    container.add_pruning_method(method)
                    method = container
            return method

        method = _get_composite_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as parameter {name} of {module}, "
                                     f"got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig
        if not isinstance(method, PruningContainer):
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = C.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with no_grad():
                mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if not isinstance(method, PruningContainer):
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError(f"importance_scores should have the same shape as tensor t, got "
                                     f"{importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else C.ones_like(t)
        with no_grad():
            mask = self.compute_mask(importance_scores, default_mask=default_mask)
        return t * mask

    def remove(self, module):
        """Make the pruning permanent: `name` becomes the parameter again, holding mask * orig."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _masked(default_mask, flat_indices):
    """default_mask (a copy) with the flat positions `flat_indices` zeroed."""
    m = default_mask.detach().numpy().copy()
    m.reshape(-1)[flat_indices] = 0
    return C.tensor(m, dtype=default_mask.dtype)


class PruningContainer(BasePruningMethod):
    """Successive pruning of one tensor: each method prunes what the ones before left."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if not isinstance(args, Iterable):
            self._tensor_name = args._tensor_name
            self.add_pruning_method(args)
        elif len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        elif method is not None and self._tensor_name != method._tensor_name:
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
        """The last method's mask computed on the entries (unstructured) or channels (structured)
        the earlier ones left, written into default_mask."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype)
        if method.PRUNING_TYPE == "unstructured":
            slc = (default_mask == 1).numpy()
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute `dim` '
                                     'defined.')
            n_dims = t.dim()
            dim = method.dim
            if dim < 0:
                dim = n_dims + dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {n_dims}")
            keep = (default_mask.sum(dim=[d for d in range(n_dims) if d != dim]) != 0).numpy()
            slc = tuple(keep if d == dim else slice(None) for d in range(n_dims))
        elif method.PRUNING_TYPE == "global":
            slc = (slice(None),) * len(t.shape)
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        tn, mn = t.detach().numpy(), new_mask.detach().numpy().copy()
        partial = method.compute_mask(C.tensor(tn[slc], dtype=t.dtype), default_mask=C.tensor(mn[slc],
                                                                                                 dtype=new_mask.dtype))
        mn[slc] = partial.to(dtype=new_mask.dtype).numpy()
        return C.tensor(mn, dtype=new_mask.dtype)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` entries chosen at random."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        tensor_size = t.nelement()
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        _validate_pruning_amount(nparams_toprune, tensor_size)
        if nparams_toprune == 0:
            return default_mask.clone()
        prob = C.rand_like(t).numpy().reshape(-1)
        return _masked(default_mask, _topk_indices(prob, nparams_toprune, True))

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` entries of smallest magnitude (torch's pick among tied magnitudes)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        tensor_size = t.nelement()
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        _validate_pruning_amount(nparams_toprune, tensor_size)
        if nparams_toprune == 0:
            return default_mask.clone()
        return _masked(default_mask, _topk_indices(np.abs(t.detach().numpy()), nparams_toprune, False))

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, keep):
    """Ones on the channels `keep` (a bool array or indices) of dim `dim`, zeros elsewhere."""
    m = np.zeros(tuple(t.shape), dtype=t.dtype.np)
    slc = [slice(None)] * len(t.shape)
    slc[dim] = keep
    m[tuple(slc)] = 1
    return C.tensor(m, dtype=t.dtype)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` channels along `dim` chosen at random."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        tensor_size = t.shape[self.dim]
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        _validate_pruning_amount(nparams_toprune, tensor_size)
        if nparams_toprune == 0:
            return default_mask
        prob = C.rand(tensor_size)
        threshold = kthvalue(prob, nparams_toprune).values
        mask = _channel_mask(t, self.dim, (prob > threshold).numpy())
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the `amount` channels along `dim` of smallest L`n` norm."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        tensor_size = t.shape[self.dim]
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        nparams_tokeep = tensor_size - nparams_toprune
        _validate_pruning_amount(nparams_toprune, tensor_size)
        norm = _compute_norm(t, self.n, self.dim)
        keep = _topk_indices(norm.numpy(), nparams_tokeep, True)
        if nparams_toprune == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, keep)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
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


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) parameters together: the method's mask over all of them as one
    vector, applied to each as a custom mask."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    with no_grad():
        relevant = parameters_to_vector([importance_scores.get((module, name), getattr(module, name))
                                         for module, name in parameters])
        default_mask = parameters_to_vector([getattr(module, name + "_mask", C.ones_like(getattr(module, name)))
                                             for module, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f'{pruning_method} of type {method.PRUNING_TYPE}')
    container.add_pruning_method(method)
    with no_grad():
        final_mask = container.compute_mask(relevant, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        num_param = param.numel()
        custom_from_mask(module, name, mask=final_mask[pointer:pointer + num_param].view_as(param))
        pointer += num_param


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    for _, submodule in module.named_modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


def _validate_pruning_amount_init(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount, tensor_size):
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _validate_structured_pruning(t):
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of shape "
                         f"{shape} with {len(shape)} dims")


def _compute_nparams_toprune(amount, tensor_size):
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(t, dim):
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_norm(t, n, dim):
    dims = list(range(t.dim()))
    if dim < 0:
        dim = dims[dim]
    dims.remove(dim)
    return O.norm(t.detach(), n, dims)

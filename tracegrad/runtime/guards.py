"""Guards: what a compiled program assumed about its call, as one hashable key.

A tensor contributes its shape, dtype, device and requires_grad; a Python constant its
type and value; containers their structure. Grad mode, a module's parameters (by
identity) and training flag, and the tensors a function captures from its closure or
globals (by identity) are part of the key too. Equal keys may share a program.
"""
from ..grad_mode import STATE
from ..tensor import Tensor


class _Leaf:
    """Marks a tensor position in a flattened argument structure."""
    __slots__ = ()

    def __repr__(self):
        return "T"


LEAF = _Leaf()


def flatten(obj, leaves):
    """Append obj's tensors to `leaves`; return its structure with tensors as LEAF."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return LEAF
    t = type(obj)
    if t is tuple or t is list:
        return (t, tuple(flatten(o, leaves) for o in obj))
    if t is dict:
        return (dict, tuple((k, flatten(obj[k], leaves)) for k in obj))
    return obj


def unflatten(spec, leaves):
    """Rebuild a structure from `flatten`'s spec, taking tensors from the iterator `leaves`."""
    if spec is LEAF:
        return next(leaves)
    if type(spec) is tuple and len(spec) == 2 and spec[0] in (tuple, list, dict):
        kind, items = spec
        if kind is dict:
            return {k: unflatten(v, leaves) for k, v in items}
        return kind(unflatten(s, leaves) for s in items)
    return spec


def _const_key(spec):
    """A hashable stand-in for the Python constants of a spec (by value; unhashable ones by identity)."""
    try:
        hash(spec)
        return (type(spec), spec)
    except TypeError:
        return (type(spec), id(spec))


def captured_tensors(fn):
    """Identities of the tensors fn reads from its closure and its module's globals (by
    name): rebinding one (w = w - lr * g) must recompile, not reuse the old tensor."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    ids = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, Tensor):
            ids.append(id(v))
    g = getattr(fn, "__globals__", {})
    for name in code.co_names:
        v = g.get(name)
        if isinstance(v, Tensor):
            ids.append(id(v))
    return tuple(ids)


def guard_key(spec, leaves, module=None, fn=None):
    tensors = tuple((t._data.shape, t._dtype, t._req, t._data.__class__) for t in leaves)
    key = (STATE.grad_enabled, _const_key(spec), tensors)
    if module is not None:
        key += (module.training, tuple(id(p) for p in module.parameters()))
    elif fn is not None:
        key += captured_tensors(fn)
    return key

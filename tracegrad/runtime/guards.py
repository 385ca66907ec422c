"""Guards: what a compiled program assumed about its call, as one hashable key.

A tensor contributes its shape, dtype, device, requires_grad and memory order; a Python
constant its type and bit pattern; containers their structure; grad mode and the default dtype too.
Equal keys may share a program, once its guards (sources.py) hold as well.
"""
from .. import _dtype as D
from ..grad_mode import STATE
from ..tensor import Tensor
from ..ir.layout import tensor_order
from ..amp.policy import autocast_key


class _Leaf:
    """Marks a tensor position in a flattened argument structure."""
    __slots__ = ()

    def __repr__(self):
        return "T"


LEAF = _Leaf()


class _Struct:
    """Marks a namedtuple (torch.return_types: sort's, slogdet's, qr's results) in a structure:
    its items are flattened and the result is rebuilt by its class."""


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
    if isinstance(obj, tuple) and (hasattr(t, "_fields") or any(isinstance(o, Tensor) for o in obj)):
        return (_Struct, t, tuple(flatten(o, leaves) for o in obj))
    return obj


def unflatten(spec, leaves):
    """Rebuild a structure from `flatten`'s spec, taking tensors from the iterator `leaves`."""
    if spec is LEAF:
        return next(leaves)
    if type(spec) is tuple and len(spec) == 3 and spec[0] is _Struct:
        return spec[1](*(unflatten(s, leaves) for s in spec[2]))
    if type(spec) is tuple and len(spec) == 2 and spec[0] in (tuple, list, dict):
        kind, items = spec
        if kind is dict:
            return {k: unflatten(v, leaves) for k, v in items}
        return kind(unflatten(s, leaves) for s in items)
    return spec


def guard_key(cspec, leaves):
    """The key of a call's arguments: grad and inference mode, default dtype and float32 matmul precision,
    the argument structure with its Python constants by type and bits (`cspec`: sources.canonical of flatten's spec), and each tensor's shape, dtype, requires_grad and
    device. What else the function read is checked by the program's guards (sources.py)."""
    # and each tensor's memory order (True: C-contiguous): matmul's derivative picks its
    # products by its operands' layouts, as the trace recorded them (ir/layout.py)
    # and each tensor's class (`isinstance(x, nn.Parameter)` branches)
    # and whether it is an inference tensor, and the names of the Python attributes set on it
    # (`getattr(x, "scale", 1.0)`; the trace refuses to read their values)
    tensors = tuple([(t._data.shape, t._dtype, t._req, t._data.__class__,
                      t._data.flags.c_contiguous or tensor_order(t._data), t.__class__, t._inference,
                      tuple(t.__dict__)) for t in leaves])
    # grad mode with inference mode: a function may ask is_inference_mode_enabled(), and
    # inference_mode's values are inference tensors
    # and which arguments are one tensor passed twice (the trace makes them one value)
    alias = None
    if len(leaves) > 1:
        ids = [id(t) for t in leaves]
        if len(set(ids)) < len(ids):
            alias = tuple([ids.index(i) for i in ids])
    # and autocast's state: a program traced in an autocast region holds its casts
    return ((STATE.grad_enabled, STATE.inference), D.get_default_dtype(), D.get_float32_matmul_precision(), cspec,
            tensors, alias, autocast_key())

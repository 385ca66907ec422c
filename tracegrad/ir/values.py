"""Values of the IR and their types: `V`, a reference to a value inside an argument list, the
helpers that walk argument lists, and a type's text (`f32[2, 3]`). A value's type is its
shape and its dtype; the graph and the printer both build on this module.
"""
from .symbolic import Sym


class V(str):
    """A reference to a value of the graph, inside an argument list."""
    __slots__ = ()


def refs(args):
    """The value names an argument list refers to, in order (nested tuples included)."""
    if args.__class__ is V or isinstance(args, V):
        return [args]
    out = []
    for a in args:
        c = a.__class__
        if c is V:
            out.append(a)
        elif c is float or c is int:        # the common literals, without the isinstance calls
            continue
        elif isinstance(a, V):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(refs(a))
    return out


def map_args(args, fn):
    """Rebuild an argument list with fn applied to each value reference."""
    if isinstance(args, V):
        return fn(args)
    if isinstance(args, tuple):
        return tuple([map_args(a, fn) if isinstance(a, (V, tuple, list)) else a for a in args])
    if isinstance(args, list):
        return [map_args(a, fn) if isinstance(a, (V, tuple, list)) else a for a in args]
    return args


def exact_shape(shape):
    """shape with a user's int subclass (reshape(MyInt(3), 2)) as a plain int: shapes are
    written into generated source, where the subclass's own __repr__ must not run."""
    for d in shape:
        if type(d) is not int:
            break
    else:
        return shape
    out = [int.__index__(d) if isinstance(d, int) else exact_shape(d) if isinstance(d, (tuple, list)) else d
           for d in shape]
    return type(shape)(out) if type(shape) in (tuple, list) else tuple(out)


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8"}


def type_str(shape, dtype):
    if isinstance(dtype, (list, tuple)):
        return "(" + ", ".join(type_str(s, d) for s, d in zip(shape, dtype)) + ")"
    return f"{_SHORT.get(dtype.name, dtype.name)}[{', '.join(map(_dim_str, shape))}]"


def _dim_str(d):
    # int's own text for a user's int subclass: its __str__ never runs (type strings go into generated source)
    if type(d) is Sym:
        return d.display()           # a symbolic size (ir/symbolic.py): its expression, no guard
    return int.__repr__(d) if isinstance(d, int) else str(d)

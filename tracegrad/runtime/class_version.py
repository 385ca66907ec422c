"""Whether a class's own attributes changed since a moment, cheaply enough to ask at every call.

`Tensor.relu = f` after a trace must not leave the traced `relu` in the program, but a
metaclass that saw the write made every `isinstance(x, Tensor)` of another type 3x slower,
and comparing Tensor's ~550 attributes costs ~9 µs a call. CPython gives every dict a version
tag (PEP 509) that any write to it changes, and a class's attributes live in a dict: reading
that tag costs ~40 ns. It is no part of the language, so it is trusted only where a probe at
import sees it behave (a write changes it, a read does not, and the dict's size sits beside
it); elsewhere the attributes themselves are compared, by identity.
"""
import ctypes
import gc
import sys

# PyDictObject: the object header, ma_used (Py_ssize_t), ma_version_tag (uint64)
_USED = 2 * ctypes.sizeof(ctypes.c_void_p)
_TAG = _USED + ctypes.sizeof(ctypes.c_ssize_t)


def _dict_of(klass):
    """The dict behind klass.__dict__ (a read-only proxy of it)."""
    ds = [r for r in gc.get_referents(klass.__dict__) if type(r) is dict]
    return ds[0] if len(ds) == 1 else None


def _tag_works():
    if sys.implementation.name != "cpython":
        return False
    try:
        class Probe:
            pass
        d = _dict_of(Probe)
        if d is None:
            return False
        tag = ctypes.c_uint64.from_address(id(d) + _TAG)
        used = ctypes.c_ssize_t.from_address(id(d) + _USED)
        seen = {tag.value}
        for i in range(3):
            if used.value != len(d):
                return False
            Probe.a = object()                   # a write: a tag not seen before
            if tag.value in seen:
                return False
            seen.add(tag.value)
            _ = Probe.a, len(Probe.__dict__), Probe.__dict__.get("b")       # reads: the same tag
            if tag.value not in seen or used.value != len(d):
                return False
        t = tag.value
        _ = Probe.a, Probe.__dict__.get("a")
        if tag.value != t:
            return False
        del Probe.a
        return used.value == len(d) and tag.value not in seen
    except Exception:
        return False


_TAG_WORKS = _tag_works()


class ClassVersion:
    """`same()` is True while no attribute of klass was set, replaced or deleted since this
    object was made; `emit(code)` writes the same test into a guard check (check_code.py)."""
    __slots__ = ("klass", "dict", "tag", "v0", "names", "values")

    def __init__(self, klass):
        self.klass = klass
        d = _dict_of(klass) if _TAG_WORKS else None
        self.dict = d
        if d is not None:
            self.tag = ctypes.c_uint64.from_address(id(d) + _TAG)
            self.v0 = self.tag.value
        else:
            self.tag = None
            self.names, self.values = tuple(vars(klass)), tuple(vars(klass).values())

    def same(self):
        if self.tag is not None:
            return self.tag.value == self.v0
        d = vars(self.klass)
        return tuple(d) == self.names and all(x is y for x, y in zip(d.values(), self.values))

    def emit(self, code):
        if self.tag is not None:
            code.need(f"{code.const(self.tag)}.value == {code.const(self.v0)}")
        else:
            code.need(f"{code.const(self.same)}()")

"""tracegrad.save / tracegrad.load: tensors and state dicts in a .npz file, never pickled.

The format is numpy's .npz (a zip of .npy arrays) with one extra member:

  __tracegrad__.npy   a 1-D uint8 array holding UTF-8 JSON:
                      {"format": "tracegrad", "version": 1, "root": NODE}
  t0.npy, t1.npy ...  one array per distinct storage: tensors that share memory (tied
                      weights, detached copies, views such as w.t() or w[0]) store it once
                      and load back sharing it, as torch's storages do; a tensor object saved
                      twice loads back as one

NODE is the saved object as JSON:
  null, true/false, integers, strings, finite floats      themselves
  lists                                                   JSON arrays
  {"$float": "nan" | "inf" | "-inf"}                      non-finite floats
  {"$tuple": [NODE, ...]}, {"$size": [int, ...]}          tuples, tracegrad.Size
  {"$dict": [[KEY, NODE], ...], "ordered": bool}          dicts (keys are NODEs too:
                                                          str, int, float, bool, None, tuple),
                                                          "ordered" for OrderedDict
  {"$tensor": "t3", "id": 0, "dtype": "float32", "requires_grad": bool, "parameter": bool,
   "view": {"offset": int, "shape": [int, ...], "strides": [int, ...]}}
                                                          "view" (version 2) where the tensor
                                                          is a view of the stored array, in
                                                          elements of its memory
  {"$ndarray": "t4"}                                      a numpy array
  {"$dtype": "float16"}                                   a tracegrad dtype

Each array is stored with numpy's own dtype, bit for bit (-0.0, subnormals, inf and
NaN payloads included). bfloat16 has no numpy dtype: it is stored as the float32 values
that carry it and tagged "bfloat16". Loading uses np.load(allow_pickle=False) and checks
every array's dtype against its tag, so no code from the file ever runs; a pickle
(including a file written by torch.save, a zip with a data.pkl inside) is refused
before anything is read from it.
"""
import io
import json
import math
import os
import zipfile
from collections import OrderedDict

import numpy as np

from . import _dtype as D
from .tensor import Tensor, Size
from .creation import _check_device
from .nn.parameter import Parameter

__all__ = ["save", "load"]

_HEADER = "__tracegrad__"
_VERSION = 2
_READS = (1, 2)             # version 1 has no views: every tensor is its array
# a tracegrad dtype name -> the numpy dtype its storage must have on disk
_STORAGE = {d.name: d.np for d in D.ALL}


class _Writer:
    def __init__(self):
        self.arrays = {}
        self.array_keys = {}
        self.tensor_ids = {}
        self.keep = []           # objects whose id() is a key above stay alive until written

    def array(self, data):
        key = self.array_keys.get(id(data))
        if key is None:
            key = f"t{len(self.arrays)}"
            self.array_keys[id(data)] = key
            self.arrays[key] = data
            self.keep.append(data)
        return key

    def tensor_id(self, t):
        n = self.tensor_ids.get(id(t))
        if n is None:
            n = self.tensor_ids[id(t)] = len(self.tensor_ids)
            self.keep.append(t)
        return n

    def node(self, x):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            if math.isfinite(x):
                return x
            return {"$float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
        if isinstance(x, Tensor):
            if x._data is None:
                raise TypeError("cannot save a symbolic tensor (one being traced)")
            root, view = _storage_of(x._data)
            meta = {"$tensor": self.array(root), "id": self.tensor_id(x), "dtype": x._dtype.name,
                    "requires_grad": bool(x._req), "parameter": bool(x._is_param)}
            if view is not None:
                meta["view"] = view
            return meta
        if isinstance(x, np.ndarray):
            if x.dtype.hasobject:
                raise TypeError("cannot save a numpy array of Python objects")
            return {"$ndarray": self.array(x)}
        if isinstance(x, (np.bool_, np.integer, np.floating)):
            return self.node(x.item())
        if isinstance(x, D.dtype):
            return {"$dtype": x.name}
        if isinstance(x, Size):
            return {"$size": [int(s) for s in x]}
        if isinstance(x, tuple):
            return {"$tuple": [self.node(v) for v in x]}
        if isinstance(x, list):
            return [self.node(v) for v in x]
        if isinstance(x, dict):
            return {"$dict": [[self.node(k), self.node(v)] for k, v in x.items()],
                    "ordered": isinstance(x, OrderedDict)}
        raise TypeError(f"tracegrad.save cannot save an object of type {type(x).__module__}.{type(x).__qualname__}: "
                        f"it stores tensors, numpy arrays, dtypes and nested dicts, lists and tuples of them and of "
                        f"None, bool, int, float and str")


def _storage_of(a):
    """(the array that owns `a`'s memory, where `a` sits in it) or (a, None) where `a` is not a
    view of another array of its dtype laid out in one block."""
    if not isinstance(a, np.ndarray):
        return a, None
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is a or root.dtype != a.dtype or not (root.flags.c_contiguous or root.flags.f_contiguous):
        return a, None
    item = a.itemsize
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if offset % item or any(st % item for st in a.strides):
        return a, None
    return root, {"offset": offset // item, "shape": [int(n) for n in a.shape],
                  "strides": [int(st // item) for st in a.strides]}


def _view(root, v):
    """The view `v` ({"offset", "shape", "strides"} in elements) of the loaded array `root`, checked
    to stay inside it."""
    try:
        offset, shape, strides = int(v["offset"]), tuple(int(n) for n in v["shape"]), tuple(int(n) for n in v["strides"])
    except (KeyError, TypeError, ValueError):
        raise RuntimeError(f"tracegrad.load: a malformed view {v!r}") from None
    if len(shape) != len(strides) or any(n < 0 for n in shape):
        raise RuntimeError(f"tracegrad.load: a malformed view {v!r}")
    flat = root.reshape(-1, order="A")         # the memory in order (the array is one C or F block)
    if all(shape):
        lo = offset + sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
        hi = offset + sum((n - 1) * st for n, st in zip(shape, strides) if st > 0)
        if lo < 0 or hi >= flat.size:
            raise RuntimeError(f"tracegrad.load: a view {v!r} reaches outside its array of {flat.size} elements")
    elif not 0 <= offset <= flat.size:
        raise RuntimeError(f"tracegrad.load: a view {v!r} reaches outside its array of {flat.size} elements")
    item = flat.itemsize
    start = flat[offset:] if offset < flat.size else flat[:0]
    return np.lib.stride_tricks.as_strided(start, shape, tuple(st * item for st in strides))


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write `obj` (a tensor, a state dict, nested containers of them) to `f` (a path or a
    binary file object) in the .npz format described in this module's docstring."""
    if pickle_module is not None:
        raise ValueError("tracegrad.save never pickles; pickle_module is not supported")
    w = _Writer()
    root = w.node(obj)
    header = json.dumps({"format": "tracegrad", "version": _VERSION, "root": root}, allow_nan=False)
    members = {_HEADER: np.frombuffer(header.encode("utf-8"), dtype=np.uint8)}
    members.update(w.arrays)
    if isinstance(f, (str, os.PathLike)):
        # open the file ourselves: np.savez would add ".npz" to a name without it
        with open(f, "wb") as fh:
            np.savez(fh, **members)
    else:
        np.savez(f, **members)


class UnpicklingRefused(RuntimeError):
    """The file is a pickle (or holds one); tracegrad.load never unpickles."""


def _refuse(what):
    raise UnpicklingRefused(f"tracegrad.load refuses to read {what}: tracegrad never unpickles (unpickling can run "
                            f"arbitrary code). Save with tracegrad.save, which writes numpy arrays and JSON only.")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Read an object written by tracegrad.save. Never runs code from the file: a pickle is
    refused with UnpicklingRefused before any of it is read."""
    if pickle_module is not None:
        raise ValueError("tracegrad.load never unpickles; pickle_module is not supported")
    if map_location is not None and str(map_location).split(":")[0] not in ("cpu",):
        _check_device(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            raw = fh.read()
    else:
        raw = f.read()
    if raw[:1] == b"\x80" or (raw[:1] and raw[:1] in b"()]}cdlNIFSVGJKLMTUX" and raw[:4] != b"PK\x03\x04"):
        # protocol 2+ starts with PROTO (0x80); protocols 0 and 1 with an opcode such as MARK,
        # GLOBAL or EMPTY_DICT
        _refuse("a pickle")
    if raw[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise RuntimeError("tracegrad.load: not a tracegrad file (expected a .npz zip archive written by "
                           "tracegrad.save)")
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        names = z.namelist()
    if any(n.endswith(".pkl") or "/data/" in n for n in names):
        _refuse("a file written by torch.save (a zip holding a pickle)")
    if _HEADER + ".npy" not in names:
        raise RuntimeError("tracegrad.load: this .npz file was not written by tracegrad.save (no __tracegrad__ member)")
    if any(not n.endswith(".npy") for n in names):
        raise RuntimeError(f"tracegrad.load: unexpected members in the archive: {[n for n in names if not n.endswith('.npy')]}")
    with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
        try:
            header = json.loads(bytes(npz[_HEADER]).decode("utf-8"))
        except ValueError as e:
            if "pickle" in str(e).lower():
                _refuse("an archive member that holds a pickle")
            raise RuntimeError(f"tracegrad.load: the header is not valid JSON ({e})") from None
        if header.get("format") != "tracegrad" or header.get("version") not in _READS:
            raise RuntimeError(f"tracegrad.load: unsupported format {header.get('format')!r} version "
                               f"{header.get('version')!r}")
        cache = {}

        def array(key):
            if key not in cache:
                if key + ".npy" not in names:
                    raise RuntimeError(f"tracegrad.load: the archive has no array {key!r}")
                try:
                    cache[key] = npz[key]
                except ValueError as e:
                    if "pickle" in str(e).lower():
                        _refuse(f"array {key!r}, which holds Python objects (a pickle)")
                    raise
            return cache[key]

        tensors = {}

        def node(x):
            if x is None or isinstance(x, (bool, int, float, str)):
                return x
            if isinstance(x, list):
                return [node(v) for v in x]
            if "$tensor" in x:
                n = x.get("id")
                if n not in tensors:
                    tensors[n] = _tensor(array(x["$tensor"]), x)
                return tensors[n]
            if "$ndarray" in x:
                return array(x["$ndarray"])
            if "$float" in x:
                return float(x["$float"])
            if "$tuple" in x:
                return tuple(node(v) for v in x["$tuple"])
            if "$size" in x:
                return Size(int(v) for v in x["$size"])
            if "$dtype" in x:
                return D._lookup(x["$dtype"])
            if "$dict" in x:
                items = [(_key(node(k)), node(v)) for k, v in x["$dict"]]
                return OrderedDict(items) if x.get("ordered") else dict(items)
            raise RuntimeError(f"tracegrad.load: unknown node {sorted(x)}")

        return node(header["root"])


def _key(k):
    return tuple(_key(v) for v in k) if isinstance(k, list) else k


def _tensor(arr, meta):
    name = meta["dtype"]
    if name not in _STORAGE:
        raise RuntimeError(f"tracegrad.load: unknown dtype {name!r}")
    if arr.dtype != _STORAGE[name]:
        raise RuntimeError(f"tracegrad.load: a tensor tagged {name} is stored as {arr.dtype}")
    if "view" in meta:
        arr = _view(arr, meta["view"])
    dt = D._lookup(name)
    t = Tensor._make(arr, dt)
    if meta.get("parameter"):
        return Parameter(t, requires_grad=bool(meta.get("requires_grad")))
    if meta.get("requires_grad"):
        t.requires_grad_(True)
    return t

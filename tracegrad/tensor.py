"""Tensor: numpy storage plus the grad_fn node that produced it.

Methods are thin: each calls the public op of the same name in `ops/functional.py`,
which builds on the op table in `ops/primitives.py`; most are bound onto the class by
`_tensor_methods.py`, which also holds the in-place ops.
"""
import collections
import threading
import warnings
import weakref

import numpy as np

from . import _dtype as D
from .grad_mode import STATE
from .ops.shapes import normalize_dim
from .ir.symbolic import Sym

# How many threads are tracing a function for compile now: 0 on the eager path (one test of it
# there); each tracing thread's {id(tensor): version} of the concrete tensors it reads by value
# is in _READS, that thread's own (another thread's eager .item() is no read of the trace)
_VALUE_READS = [0]
_TRACES_LOCK = threading.Lock()


class _Reads(threading.local):
    reads = None


_READS = _Reads()


def begin_value_reads(reads):
    """This thread's trace starts noting the tensors it reads by value into `reads`; -> what
    end_value_reads takes back."""
    prev = _READS.reads
    _READS.reads = reads
    with _TRACES_LOCK:
        _VALUE_READS[0] += 1
    return prev


def end_value_reads(prev):
    _READS.reads = prev
    with _TRACES_LOCK:
        _VALUE_READS[0] -= 1


def read_setting(name, get):
    """While compile traces on this thread: the function read a setting of the process in
    Python (`is_anomaly_enabled()`, the print options a tensor's text follows), which no
    call's key holds; the program is guarded on `get()`, its value now."""
    r = _READS.reads
    if r is not None:
        r.setdefault(("setting", name), get)


class Above:
    """What Tensor's own methods call of modules above it, which import this one: plugged in
    by each as it is imported, so that this module imports none of them. `construct` (the
    legacy constructor, _legacy.py), `Parameter` (nn/parameter.py), `tensor_repr` (_tensor_str.py),
    `functionalize_local` (functionalize.LOCAL), `view_grad_fn` (autograd/views.py),
    `AccumulateGrad` and `RemovableHandle` (autograd/graph.py), `backward` (autograd),
    `transfer`, `parse` and `to_device` (cuda.py; creation.py and ops/functional.py move
    tensors between devices with them too), `to`, `detach` and `_cname` (ops/functional.py),
    `tensor`, `zeros`, `ones`, `full` and `empty` (creation.py), `check_overlap` (_tensor_methods.py:
    torch's memory-overlap check of an out= argument, eager and traced), `user_frame` (tracing.py:
    whether a frame above runs the user's code, not tracegrad's), `chain_memory` (chain.py:
    a chain pending on memory handed out, through .data or to numpy, runs first)."""
    construct = Parameter = tensor_repr = functionalize_local = view_grad_fn = check_overlap = None
    AccumulateGrad = RemovableHandle = backward = transfer = parse = to_device = to = detach = _cname = None
    tensor = zeros = ones = full = empty = None
    user_frame = None
    chain_memory = None


class Size(tuple):
    def __new__(cls, sizes=()):
        items = []
        for i, s in enumerate(sizes):
            if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
                items.append(int(s))
            elif type(s) is Sym:
                items.append(s)          # a symbolic size while a dynamic program is built (ir/symbolic.py)
            elif hasattr(s, "__index__") and not isinstance(s, (bool, np.bool_)):
                items.append(s.__index__())
            else:
                raise TypeError(f"torch.Size() takes an iterable of 'int' (item {i} is '{type(s).__name__}')")
        return tuple.__new__(cls, items)

    def __repr__(self):
        return f"torch.Size([{', '.join(str(s) for s in self)}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __reduce__(self):
        return (Size, (tuple(self),))


class device:
    __slots__ = ("type", "index")

    def __init__(self, type_or_str, index=None):
        if isinstance(type_or_str, device):
            self.type, self.index = type_or_str.type, type_or_str.index
            return
        s = str(type_or_str)
        if ":" in s:
            s, idx = s.split(":")
            index = int(idx)
        if s not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {s}")
        self.type = s
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return isinstance(other, device) and self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self):
        return hash((self.type, self.index or 0))


CPU = device("cpu")


# How many threads are making a functionalized trace now (functionalize.begin): 0 on the eager
# path; each thread's own trace (functionalize.Shadow) is _shadow_here(), None in the others
_SHADOW = [0]


def _shadow_here():
    return Above.functionalize_local.shadow


class TraceError(RuntimeError):
    """An operation that a symbolic trace cannot record (it needs concrete values)."""


UNTRACKED_WRITES = [0]
# the last writes UNTRACKED_WRITES counted: (the count after it, a weak reference to the array
# written or replaced): a backward that recomputes a compiled call's forward from its inputs
# tells from them whether one of its inputs was the one written (untracked_writes_since)
UNTRACKED_RECENT = collections.deque(maxlen=256)
ESCAPES = [0]                                  # arrays handed to numpy so far (a count)
CHAINS_LIVE = [0]       # chains open (chain.LIVE): memory handed out unseen first settles those that read it
_ESCAPED = weakref.WeakValueDictionary()       # id -> the memory's root array, of those


def memory_root(a):
    """The array that owns `a`'s memory (numpy's base chain, through as_strided's holder)."""
    while True:
        up = a.base
        if not isinstance(up, np.ndarray):
            up = getattr(up, "base", None)
        if not isinstance(up, np.ndarray):
            return a
        a = up


def escape(a):
    """Note that numpy code outside tracegrad holds `a`'s memory: it can write it unseen
    by any version counter (`t.numpy()[:] = ...`, an array given to from_numpy)."""
    if type(a) is np.ndarray:
        r = memory_root(a)
        _ESCAPED[id(r)] = r
        ESCAPES[0] += 1
        if CHAINS_LIVE[0]:
            Above.chain_memory(r)


def escaped(a):
    """Whether numpy code outside tracegrad may hold `a`'s memory."""
    r = memory_root(a)
    return _ESCAPED.get(id(r)) is r


class _UntrackedVersion(list):
    """The version counter of a `.data` tensor. Writes through it are not autograd's to see (as
    in torch: a saved tensor changed this way is read as it is by the backward), but each one
    counts in UNTRACKED_WRITES, as does `x.data = y`: a compiled call that took its gradient
    with the forward, before the write, knows from the count that it must not hand it over."""
    __slots__ = ("array",)

    def __setitem__(self, i, v):
        list.__setitem__(self, i, v)
        untracked_write(self.array)


def untracked_write(a):
    """Count a write autograd does not see, into (or replacing) the array `a`."""
    UNTRACKED_WRITES[0] += 1
    try:
        ref = weakref.ref(a)
    except TypeError:                  # (an array type without weak references: any input's, then)
        ref = None
    UNTRACKED_RECENT.append((UNTRACKED_WRITES[0], ref))


def untracked_writes_since(n, arrays):
    """Whether a write counted in UNTRACKED_WRITES since it was `n` may have gone into the memory
    of one of `arrays` (True where the record of recent writes does not reach back that far)."""
    since = UNTRACKED_WRITES[0] - n
    if since <= 0:
        return False
    recent = [r for k, r in UNTRACKED_RECENT if k > n]
    if len(recent) < since:
        return True
    for r in recent:
        if r is None:
            return True
        w = r()
        if w is None:
            continue                   # (freed: no input's, as the inputs' arrays are alive)
        for a in arrays:
            if a.__class__ is not np.ndarray or w.__class__ is not np.ndarray or np.may_share_memory(w, a):
                return True
    return False


# patches of tracegrad's own code after import: a function of one of its modules rebound
# (`tracegrad.nn.functional.linear = f`); compiled programs traced the code as it was, and are
# reused only while the count is the same. (A Tensor method replaced on the class is not
# counted here: a metaclass that saw it made every isinstance(x, Tensor) of another type 3x
# slower; the guards read the version of the class's dict instead, runtime/class_version.py.)
LIBRARY_PATCHES = [0]


def _count_patch(d, name, value):
    if name in d and d[name] is not value:
        LIBRARY_PATCHES[0] += 1



class memory_format:
    """torch.memory_format: the layout clone() and contiguous() give their result, and the one
    is_contiguous(memory_format=...) asks about."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"torch.{self._name}"


_MemoryFormat = memory_format      # (the name is_contiguous's argument shadows)

# torch's channels-last orders, innermost dimension first (c10's is_channels_last_strides)
_LAST_ORDERS = {"channels_last": (4, (1, 3, 2, 0)), "channels_last_3d": (5, (1, 4, 3, 2, 0))}


def check_format_rank(ndim, name):
    """torch's error for a channels-last memory format (by name) asked of a tensor of another rank."""
    rank = {"channels_last": 4, "channels_last_3d": 5}.get(name)
    if rank is not None and ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")


def _contiguous_as(a, memory_format):
    """Tensor.is_contiguous(memory_format=...): whether array a is dense in that format's order,
    size-1 dimensions aside, as torch answers (a channels-last query was answered as a C one)."""
    if not isinstance(memory_format, _MemoryFormat):
        raise TypeError(f"is_contiguous(): argument 'memory_format' must be torch.memory_format, not "
                        f"{type(memory_format).__name__}")
    last = _LAST_ORDERS.get(memory_format._name)
    if last is None:                            # contiguous_format (and preserve_format, as torch)
        return a.flags.c_contiguous
    ndim, order = last
    if a.ndim != ndim:
        return False
    expected = a.itemsize
    for d in order:
        if a.shape[d] != 1:
            if a.strides[d] != expected:
                return False
            expected *= a.shape[d]
    return True

class UntypedStorage:
    """torch.UntypedStorage of a CPU tensor, as far as numpy shows it: the bytes of the array
    that owns the tensor's memory (views of one tensor share it: the same data_ptr and nbytes)."""

    def __init__(self, root=0, bfloat16=False):
        if isinstance(root, int) and not isinstance(root, bool):
            root = np.zeros(root, dtype=np.uint8)          # (torch.UntypedStorage(n): n bytes of its own)
        if not isinstance(root, np.ndarray):
            raise TypeError(f"UntypedStorage(): expected a size in bytes, got {type(root).__name__}")
        self._root = root
        # a bfloat16 tensor's values live in float32 elements: its storage is their high halves,
        # two bytes an element, as torch's
        self._bfloat16 = bfloat16

    def nbytes(self):
        return self._root.nbytes // 2 if self._bfloat16 else self._root.nbytes

    def size(self):
        return self.nbytes()

    __len__ = size

    def element_size(self):
        return 1

    def data_ptr(self):
        return self._root.__array_interface__["data"][0]

    @property
    def device(self):
        return CPU

    @property
    def is_cuda(self):
        return False

    def _bytes(self):
        r = self._root
        if not (r.flags.c_contiguous or r.flags.f_contiguous):
            raise RuntimeError("the bytes of a storage that is a strided numpy array are not supported")
        r = (r if r.flags.c_contiguous else r.T).reshape(-1)                      # (in memory's order)
        if self._bfloat16:
            r = (r.view(np.uint32) >> 16).astype("<u2")
        return r.view(np.uint8)

    def __getitem__(self, i):
        b = self._bytes()
        return UntypedStorage(b[i]) if isinstance(i, slice) else int(b[i])       # (a slice: a storage of those bytes)

    def tolist(self):
        return self._bytes().tolist()

    def __repr__(self):
        return "".join(f" {v}\n" for v in self.tolist()) + \
            f"[torch.storage.UntypedStorage(device=cpu) of size {self.size()}]"


FW_TANGENT = "_fw_tangent"    # the key of a tensor's forward-mode tangent in its __dict__ (autograd/forward_ad.py)


class Tensor:
    """An n-dimensional array with autograd, stored in a numpy array."""
    __slots__ = ("_data", "_dtype", "_req", "_grad_fn_slot", "_output_nr", "_grad", "_vc", "_base", "_view",
                 "_grad_acc", "_retains_grad", "_hooks", "_is_param", "_inference", "_post_acc_hooks",
                 "__weakref__", "__dict__")
    __array_priority__ = 1000

    def __new__(cls, *args, device=None):
        """The legacy constructor: Tensor(data) or Tensor(*sizes), of the default dtype."""
        return Above.construct(None, args, device)

    def __init__(self, *args, **kwargs):
        pass

    # -- construction -------------------------------------------------------
    @classmethod
    def _make(cls, data, dtype, requires_grad=False, grad_fn=None, output_nr=0, vc=None, base=None):
        t = object.__new__(cls)
        t._data = data
        t._dtype = dtype
        t._req = requires_grad
        t._grad_fn_slot = grad_fn
        t._output_nr = output_nr
        t._grad = None
        t._vc = [0] if vc is None else vc
        t._base = base
        t._view = None
        t._grad_acc = None
        t._retains_grad = False
        t._hooks = None
        t._is_param = False
        t._inference = STATE.inference
        t._post_acc_hooks = None
        return t

    # -- attributes -----------------------------------------------------------
    @property
    def shape(self):
        return tuple.__new__(Size, self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return tuple.__new__(Size, self._data.shape)
        return self._data.shape[self._dim_index(dim)]

    def _dim_index(self, dim):
        if self._data.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return normalize_dim(dim, self._data.ndim)

    def dim(self):
        return self._data.ndim

    ndimension = dim

    @property
    def ndim(self):
        return self._data.ndim

    def numel(self):
        return self._data.size

    nelement = numel

    @property
    def dtype(self):
        return self._dtype

    # a numpy array first: getattr's default costs a caught AttributeError
    @property
    def device(self):
        d = self._data
        return CPU if d.__class__ is np.ndarray else getattr(d, "_tg_device", CPU)

    @property
    def is_cuda(self):
        d = self._data
        return d.__class__ is not np.ndarray and getattr(d, "_tg_device", CPU) is not CPU

    def get_device(self):
        return 0 if self.is_cuda else -1

    @property
    def layout(self):
        return "torch.strided"

    def element_size(self):
        return self._dtype.itemsize

    @property
    def itemsize(self):
        return self._dtype.itemsize

    @property
    def nbytes(self):
        return self._dtype.itemsize * self._data.size

    def is_floating_point(self):
        return self._dtype.is_floating_point

    def is_complex(self):
        return False

    def stride(self, dim=None):
        if _VALUE_READS[0]:
            self._read_layout()
        if self._data.size == 0:
            # numpy gives an empty array 0 strides; torch keeps the row-major ones (a size-0 dim counts as 1)
            st, n = [], 1
            for size in reversed(self._data.shape):
                st.append(n)
                n *= max(size, 1)
            st = tuple(reversed(st))
        else:
            st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[self._dim_index(dim)]

    def is_contiguous(self, memory_format=None):
        if _VALUE_READS[0]:
            self._read_layout()
        if memory_format is None:
            return self._data.flags.c_contiguous
        return _contiguous_as(self._data, memory_format)

    def _read_layout(self):
        # while compile traces, a concrete tensor's strides read in Python are baked into the
        # program (`w.t_()` or `w.data = v.t()` later changes them, not its shape)
        r = _READS.reads
        if r is not None:
            r.setdefault(("layout", id(self)), self)

    def _column_major(self):
        """Whether this is a matrix laid out column by column (a transposed contiguous one, both
        sizes above 1): matmul's derivative picks its products by it, as torch's
        mm_mat1_backward / mm_mat2_backward do. Derivative rules run on traced values, which
        answer from their graph what the eager tensor answers here (ir/layout.py)."""
        d = self._data
        s = d.shape
        if len(s) != 2 or s[0] < 2 or s[1] < 2:
            return False
        st, item = d.strides, d.itemsize
        return st[0] == item and st[1] == item * s[0]

    def data_ptr(self):
        if _VALUE_READS[0]:
            self._read_history("memory")
        if self.is_cuda:
            return self._data.t.data_ptr()
        p = self._data.__array_interface__["data"][0]
        if self._dtype is D.bfloat16:
            # two bytes an element past the storage's start, as torch's (the values live in float32 elements)
            r = memory_root(self._data).__array_interface__["data"][0]
            return r + (p - r) // 2
        return p

    def untyped_storage(self):
        """The memory the tensor views, as bytes (torch's UntypedStorage): the numpy array that
        owns its data, shared by every view of it."""
        self.data_ptr()                        # (of a traced value: raises, the function runs eagerly)
        if self.is_cuda:
            raise RuntimeError("untyped_storage() of a CUDA tensor is not supported")
        return UntypedStorage(memory_root(self._data), self._dtype is D.bfloat16)

    def storage_offset(self):
        if _VALUE_READS[0]:
            self._read_history("memory")
        # (memory_root: an as_strided view's array holds its source through one more object)
        base = memory_root(self._data)
        return (self._data.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // self._data.itemsize

    @property
    def _version(self):
        if self._inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        if _VALUE_READS[0]:
            self._read_history("version")
        return self._vc[0]

    @property
    def grad_fn(self):
        if _VALUE_READS[0]:
            self._read_history("history")
        if self._view is None:
            return self._grad_fn
        return Above.view_grad_fn(self)

    def _read_history(self, kind):
        # while compile traces, the user's code read a concrete tensor's autograd history (its
        # grad_fn, is_leaf, output_nr), version counter or memory (data_ptr()) in Python: baked
        # into the program, and changed between calls without a new tensor (`w.mul_(2)` gives
        # w another grad_fn and version, `w.data = v` another address). tracegrad's own reads
        # (an optimizer's is_leaf test, the saved tensors' version checks) are not the user's
        # decisions: they are left out, or every step's update would be a new program.
        r = _READS.reads
        if r is None or not Above.user_frame(2):
            return
        sh = _SHADOW[0] and _shadow_here()
        if sh:
            sh.read_history(self, kind)     # raises where the trace wrote it: its history is the trace's
        r.setdefault((kind, id(self)), self)

    @grad_fn.setter
    def grad_fn(self, node):
        self._grad_fn = node
        if self._view is not None:
            self._view.attr_version = self._vc[0]

    @property
    def is_leaf(self):
        if _VALUE_READS[0]:
            self._read_history("history")
        return (self._grad_fn if self._view is None else Above.view_grad_fn(self)) is None

    @property
    def requires_grad(self):
        # a view whose base requires grad does too, as in torch (even one made in no_grad)
        return self._req or (self._view is not None and self._base._req)

    @requires_grad.setter
    def requires_grad(self, value):
        # (torch's is_leaf() reads the node as set: a view whose base changed in place since
        # does not make its node again here, nor raise where that would)
        if self._grad_fn is not None:
            if value:
                return
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        if value and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if value and self._inference and not STATE.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._req = bool(value)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._grad_fn is None and not self._dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = requires_grad
        return self


    @property
    def grad(self):
        sh = _SHADOW[0] and _shadow_here()
        if sh:
            return sh.get_grad(self)          # inside a trace: the symbolic gradient (functionalize.py)
        if self.grad_fn is not None and not self._retains_grad and not getattr(self, "_warned_grad", False):
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated "
                "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf "
                "Tensor by mistake, make sure you access the leaf Tensor instead. See "
                "github.com/pytorch/pytorch/pull/30531 for more information.", UserWarning, stacklevel=2)
        return self._grad

    @grad.deleter
    def grad(self):
        self._grad = None

    @grad.setter
    def grad(self, value):
        sh = _SHADOW[0] and _shadow_here()
        if sh and (value is None or getattr(value, "_data", 0) is None):
            if value is not None and (value._dtype is not self._dtype or tuple(value.shape) != tuple(self.shape)):
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' and dtype "
                                   f"{value._dtype} to a tensor of size '{list(self.shape)}' and dtype {self._dtype}")
            sh.set_grad(self, value)
            return
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value._dtype is not self._dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{Above._cname(value._dtype)}' to a tensor with grad_dtype "
                    f"'{D.SCALAR_NAME[self._dtype]}'. The gradient must match the tensor's grad_dtype (defaults to the "
                    f"tensor's dtype). You can set the tensor's grad_dtype attribute with a specific dtype, or None to "
                    f"allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and its gradient "
                    f"may break downstream systems that assume they match.")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
                                   f"'{list(self.shape)}'. Please ensure that the gradient and the tensor are the same "
                                   f"size")
            if value._data.__class__ is not self._data.__class__ and value.device != self.device:
                raise RuntimeError("assigned grad has data located on a different device")
        if sh:
            sh.set_grad(self, value)
            return
        self._grad = value

    @property
    def data(self):
        if CHAINS_LIVE[0]:
            Above.chain_memory(self._data)
        vc = _UntrackedVersion([0])
        vc.array = self._data
        t = Tensor._make(self._data, self._dtype, vc=vc)
        if _VALUE_READS[0]:
            t.__dict__["_value_of"] = self     # while compile traces: a read of t's values reads self's
        return t

    @data.deleter
    def data(self):
        raise RuntimeError("can't delete the data of a Tensor")

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if self._req and not (value._dtype.is_floating_point or value._dtype.is_complex):
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        if self._grad_acc is not None and (value._dtype is not self._dtype or value.device != self.device):
            # torch's set_data: a gradient accumulator made for the old dtype or device (alive while a graph
            # through it is) is not the new data's; the next graph makes its own
            self._grad_acc = None
        if CHAINS_LIVE[0]:
            Above.chain_memory(self._data)
        old = self._data
        self._data = value._data
        self._dtype = value._dtype
        self._inference = value._inference
        untracked_write(old)

    @property
    def retains_grad(self):
        if _VALUE_READS[0]:
            self._read_flags()
        return self._retains_grad

    def _read_flags(self):
        # while compile traces, a concrete tensor's retains_grad or is_inference() read in Python is
        # baked into the program (`w.retain_grad()`, `w.data = t` of an inference tensor change them)
        r = _READS.reads
        if r is not None:
            r.setdefault(("flags", id(self)), self)

    @property
    def output_nr(self):
        if _VALUE_READS[0]:
            self._read_history("history")
        return self._output_nr

    @property
    def _grad_fn_or_acc(self):
        return self.grad_fn

    def _accumulator(self):
        """The AccumulateGrad node of a leaf that requires grad (made once, held weakly here)."""
        acc = self._grad_acc() if self._grad_acc is not None else None
        if acc is None:
            acc = Above.AccumulateGrad(self)
            self._grad_acc = weakref.ref(acc)
        return acc

    # -- conversion -----------------------------------------------------------
    def _read_by_value(self):
        # while compile traces, a concrete tensor read in Python bakes its values into the program
        sh = _SHADOW[0] and _shadow_here()
        if sh:
            sh.read_by_value(self)        # raises where the trace wrote it: its value is symbolic
        r = _READS.reads
        if r is not None:
            src = self.__dict__.get("_value_of")
            if src is not None:
                src._read_by_value()
            r.setdefault(id(self), self._version)
            r.setdefault(("tensor", id(self)), self)   # the tensor itself, found or not by the guards' walk

    def _values(self, op=None):
        """The array, for code that turns the values into Python decisions or constants (a
        mask's positions, equal()): while compile traces, a read by value (guarded, or traced
        again when they change); a traced value has none, and `op` cannot be traced."""
        if self._data is None:
            raise TraceError(f"{op} needs the values of a tensor the trace computes (a data-dependent result)")
        if _VALUE_READS[0]:
            self._read_by_value()
        return self._data

    def item(self):
        if _VALUE_READS[0]:
            self._read_by_value()
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self):
        if _VALUE_READS[0]:
            self._read_by_value()
        return self._data.tolist()

    def numpy(self, *, force=False):
        if self.is_cuda:
            if not force:
                raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                                f"the tensor to host memory first.")
            return self.cpu()._data
        if self._req and not force and _grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self._dtype is D.bfloat16:
            raise TypeError("Got unsupported ScalarType BFloat16")
        if _VALUE_READS[0]:
            self._read_by_value()
        escape(self._data)
        return self._data

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None:
            return a.astype(dtype, copy=bool(copy))
        return a.copy() if copy else a

    def __dlpack__(self, *args, **kwargs):
        if self._req:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        if self._dtype is D.bfloat16:
            raise BufferError("bfloat16 tensors are stored as float32 and cannot be exported through DLPack")
        escape(self._data)
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def _scalar(self):
        if _VALUE_READS[0]:
            self._read_by_value()
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self._data.reshape(()).item()

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __bool__(self):
        if _VALUE_READS[0]:
            self._read_by_value()
        if self._data.size == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()).item())

    def __index__(self):
        if self._dtype._kind == 2 or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __repr__(self, *, tensor_contents=None):
        if _VALUE_READS[0] and self._data is not None:
            self._read_by_value()         # its text holds its values (`str(w)` in a compiled function)
        return Above.tensor_repr(self)

    def __format__(self, spec):
        # as torch: a 0-dim tensor (one that requires grad too, not a subclass) formats as its number
        if self._data.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(spec)
        return object.__format__(self, spec) if spec else repr(self)

    def __reduce_ex__(self, protocol):
        # as torch: the data, dtype and requires_grad travel; the copy is a leaf
        if self.is_cuda:
            raise RuntimeError("tracegrad CUDA tensors are not pickled; move them with .cpu() first, or use "
                               "tracegrad.save()")
        return (_rebuild_tensor, (np.array(self._data, copy=True), self._dtype, bool(self._req)))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.  If you were attempting to deepcopy a module, this may "
                               "be because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        t = Tensor._make(self._data.copy(), self._dtype, self._req)
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        if self._is_param:
            t = Above.Parameter(t, self._req)
        memo[id(self)] = t
        return t

    @property
    def _backward_hooks(self):
        # torch's private attribute (None unless set): only stored here, for code that sets it
        return self.__dict__.get("_backward_hooks")

    @_backward_hooks.setter
    def _backward_hooks(self, value):
        self.__dict__["_backward_hooks"] = value

    # -- autograd -------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        Above.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self):
        return Above.detach(self)

    def detach_(self):
        if self._base is not None:        # (any view, as torch's: one of a tensor without grad too)
            raise RuntimeError("Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                               "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of "
                               "DDP buckets, and hence detach_() cannot be called on these gradients. To fix this error, "
                               "please refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the "
                               "solution.")
        fn = self.grad_fn
        if fn is not None:
            # the hooks registered while it had a grad_fn (kept on that node, _register_hook) stay the
            # tensor's, as torch's _backward_hooks: they run at its accumulation once it requires grad
            # again as a leaf (t.register_hook(h); t.detach_(); t.requires_grad_())
            hooks = fn.__dict__.get("_tensor_hooks", {}).get(self._output_nr)
            if hooks:
                if self._hooks is None:
                    self._hooks = hooks
                else:
                    self._hooks.update(hooks)
        self.grad_fn = None
        self._output_nr = 0
        self._req = False
        self.__dict__.pop(FW_TANGENT, None)       # (and its tangent, as torch's)
        return self

    def retain_grad(self):
        if not self._req:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None:
            self._retains_grad = True

    def register_hook(self, hook):
        if not self._req:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._hooks is None:
            self._hooks = {}
        h = Above.RemovableHandle(self._hooks)
        self._hooks[h.id] = hook
        return h

    def register_post_accumulate_grad_hook(self, hook):
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        h = Above.RemovableHandle(self._post_acc_hooks)
        self._post_acc_hooks[h.id] = hook
        return h

    # -- device / dtype conversion ---------------------------------------------
    def cpu(self, memory_format=None):
        if not self.is_cuda:
            return self
        return Above.transfer(self, "cpu")

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        Above.parse("cuda" if device is None else device)
        return Above.transfer(self, "cuda")

    def to(self, *args, **kwargs):
        return Above.to(self, *args, **kwargs)

    def type(self, dtype=None):
        if dtype is None:
            return "torch." + D.LEGACY[self._dtype]
        return self.to(D.as_dtype(dtype))

    def float(self):
        return self.to(D.float32)

    def double(self):
        return self.to(D.float64)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def long(self):
        return self.to(D.int64)

    def int(self):
        return self.to(D.int32)

    def bool(self):
        return self.to(D.bool_)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return Above.tensor(data, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return Above.zeros(*size, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return Above.ones(*size, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return Above.full(size, fill_value, dtype=dtype or self._dtype, device=device or self.device,
                    requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return Above.empty(*size, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad)


# Attributes torch refuses to delete. Each refuses through a deleter of its own: a Python
# __delattr__ on the class would route every attribute write on every tensor through a
# Python-level lookup of __setattr__ (several times slower).
def _undeletable(name):
    def fdel(self):
        raise RuntimeError(f"can't delete the attribute '{name}' of a Tensor")
    return fdel


# _grad_fn: the slot's own descriptor as getter and setter (C calls), with a deleter that refuses
_slot = Tensor.__dict__["_grad_fn_slot"]
Tensor._grad_fn = property(_slot.__get__, _slot.__set__, _undeletable("_grad_fn"))
for _name in ("requires_grad", "grad_fn", "_backward_hooks", "is_leaf", "_version"):
    setattr(Tensor, _name, Tensor.__dict__[_name].deleter(_undeletable(_name)))
del _slot, _name


def _grad_enabled():
    return STATE.grad_enabled


def _rebuild_tensor(data, dtype, requires_grad):
    """Unpickling a tensor (see Tensor.__reduce_ex__)."""
    return Tensor._make(data, dtype, requires_grad)

"""The "cuda" device: GPU storage and eager dispatch through the Triton lowering.

Storage: a CUDA tensor's `_data` is a `CudaArray`, a small numpy-like wrapper around a
torch tensor used only as a memory carrier (allocation, host<->device copies, views).
torch is imported lazily, when the first CUDA tensor is made.

Dispatch: once a CUDA tensor exists, `_apply_eager` (tracing.py) hands every op with
a CUDA argument to `apply_cuda`, which traces the primitive into a one-op IR graph,
lowers it with `decompositions.lower` (decomposition, then `codegen.triton_gpu.lower`)
and runs the resulting Triton program; the programs are cached by (primitive, parameters,
Python constants, input shapes and dtypes); convolutions are implicit-GEMM kernels,
pooling and einsum are decomposed by the lowering into views, copies and matmul /
reduction / scatter kernels like any other op. Calls the lowering refuses (custom Functions and hooks call Python;
integer convolutions, which tl.dot does not lower) run their numpy kernel on a host copy
and the result is copied back.

Without a GPU, setting TRITON_INTERPRET=1 before tracegrad (and triton) are imported
makes "cuda" run on Triton's CPU interpreter, with CPU torch tensors as carriers: the
whole device path (eager ops, autograd, optimizers, compile) then runs on the CPU.
"""
import collections
import os
import warnings

import numpy as np

from . import _dtype as D
from .tensor import Tensor, Above, device as _device
from . import tracing as _tracing
from .creation import manual_seed as seed_all
from .ops import functional as F
from .grad_mode import STATE, no_grad
from .ir.graph import Graph, V
from .ops.primitives import Primitive, PRIMITIVES, check_hook_result, handed_out
from .tracing import TraceError, _record, apply, trace, proxy_input
from . import tracing as tracer
from .interpret import run_eager, walk

CUDA0 = _device("cuda", 0)
_ON = _tracing._CUDA         # set once a CUDA tensor exists (read by tracing.py and the engine)
_KERNELS = {}                # (prim, params, args) -> TritonProgram or _HOST
_HOST = object()
STATS = collections.Counter()      # how device ops ran: triton / host (eager), backward_triton / backward_eager
HOST_OPS = collections.Counter()   # primitives that ran on a host copy
HOST_WHY = {}                      # primitive -> why the lowering refused it (the last reason)
_TORCH = [None]
_UNAVAILABLE = ("Torch not compiled with CUDA enabled: no CUDA device is available to tracegrad. The cuda device "
                "needs an NVIDIA GPU with triton and a CUDA build of torch, or set TRITON_INTERPRET=1 before "
                "importing tracegrad to run it on Triton's CPU interpreter.")


def interpreting():
    return os.environ.get("TRITON_INTERPRET") == "1"


def _torch_or_none():
    if _TORCH[0] is None:
        try:
            import torch  # lazy: torch is optional
            import triton  # noqa: F401  lazy: triton is optional
        except ImportError:
            return None
        _TORCH[0] = torch
    return _TORCH[0]


def is_available():
    torch = _torch_or_none()
    if torch is None:
        return False
    return interpreting() or torch.cuda.is_available()


def device_count():
    if not is_available():
        return 0
    return 1 if interpreting() else _TORCH[0].cuda.device_count()


def current_device():
    _check()
    return 0


def synchronize(device=None):
    _check()
    if not interpreting():
        _TORCH[0].cuda.synchronize()


def manual_seed(seed):
    """CUDA tensors draw their random numbers on the host (the same stream as the CPU)."""
    seed_all(seed)


manual_seed_all = manual_seed


def empty_cache():
    if is_available() and not interpreting():
        _TORCH[0].cuda.empty_cache()


def get_device_name(device=None):
    _check()
    return "Triton interpreter (CPU)" if interpreting() else _TORCH[0].cuda.get_device_name(0)


def _check():
    if not is_available():
        raise RuntimeError(_UNAVAILABLE)
    _ON[0] = 1
    return _TORCH[0]


def _torch_dtype(torch, d):
    return torch.bool if d is D.bool_ else getattr(torch, d.name)


def _np_dtype(t):
    name = str(t.dtype).rsplit(".", 1)[-1]
    return np.dtype(np.float32) if name == "bfloat16" else np.dtype(name)


class _Flags:
    __slots__ = ("c_contiguous", "writeable", "owndata")

    def __init__(self, c):
        self.c_contiguous = c
        self.writeable = True
        self.owndata = True


class CudaArray:
    """Device storage of one tensor: a torch tensor as memory carrier, numpy's attributes."""
    __slots__ = ("t",)
    _tg_device = CUDA0
    __array_priority__ = 2000

    def __init__(self, t):
        self.t = t

    shape = property(lambda self: tuple(self.t.shape))
    ndim = property(lambda self: self.t.dim())
    size = property(lambda self: self.t.numel())
    dtype = property(lambda self: _np_dtype(self.t))
    itemsize = property(lambda self: self.t.element_size())
    nbytes = property(lambda self: self.t.element_size() * self.t.numel())
    flags = property(lambda self: _Flags(self.t.is_contiguous()))
    strides = property(lambda self: tuple(s * self.t.element_size() for s in self.t.stride()))

    def __len__(self):
        return self.t.shape[0]

    def __repr__(self):
        return f"CudaArray({to_host(self)!r})"

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return CudaArray(self.t.reshape(tuple(shape)))

    def item(self):
        return to_host(self).item()

    def tolist(self):
        return to_host(self).tolist()

    def copy(self, order=None):
        return CudaArray(self.t.clone(memory_format=_TORCH[0].contiguous_format))

    def astype(self, dtype, copy=True, casting=None):
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self.copy() if copy else self
        return F.convert(_as_tensor(self), D.from_numpy_dtype(dtype))._data

    def __array__(self, dtype=None, copy=None):
        a = to_host(self)
        return a if dtype is None else a.astype(dtype)

    def __setitem__(self, key, value):
        if isinstance(value, CudaArray):
            self.t[key] = value.t
        elif isinstance(value, np.ndarray):
            self.t[key] = to_device(value).t
        else:
            self.t[key] = value.item() if isinstance(value, np.generic) else value

    def __getitem__(self, key):
        return CudaArray(self.t[key])

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__
        if name == "copyto":
            dst, src = args[0], args[1]
            if isinstance(dst, CudaArray):
                if not isinstance(src, CudaArray):
                    src = to_device(np.asarray(src))
                dst.t.copy_(src.t.expand(dst.t.shape) if src.t.dim() <= dst.t.dim() else src.t)
                return None
        if name == "broadcast_to" and isinstance(args[0], CudaArray):
            return CudaArray(args[0].t.expand(tuple(args[1] if len(args) > 1 else kwargs["shape"])))
        if name in ("zeros_like", "empty_like"):
            return CudaArray(_TORCH[0].zeros_like(args[0].t))
        if name == "full_like" and isinstance(args[0], CudaArray) and len(args) == 2 and not kwargs:
            # Adagrad's accumulator, made where its parameter is (a host array beside it would mix devices)
            return CudaArray(_TORCH[0].full_like(args[0].t, args[1]))
        if name in ("may_share_memory", "shares_memory"):
            a, b = args[0], args[1]
            return isinstance(a, CudaArray) and isinstance(b, CudaArray) and \
                a.t.untyped_storage().data_ptr() == b.t.untyped_storage().data_ptr()
        host = [to_host(a) if isinstance(a, CudaArray) else a for a in args]
        kw = {k: to_host(v) if isinstance(v, CudaArray) else v for k, v in kwargs.items()}
        return func(*host, **kw)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fname = _UFUNCS.get(ufunc.__name__)
        out = kwargs.pop("out", None)
        if method == "__call__" and fname is not None and not kwargs:
            r = _op(fname, *inputs)
            if out is not None:
                out[0].t.copy_(r.t)
                return out[0]
            return r
        host = [to_host(a) if isinstance(a, CudaArray) else a for a in inputs]
        return getattr(ufunc, method)(*host, **kwargs)


_UFUNCS = {"add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div",
           "negative": "neg", "sqrt": "sqrt", "maximum": "maximum", "minimum": "minimum", "exp": "exp",
           "log": "log", "absolute": "abs", "power": "pow"}


def _as_tensor(x):
    if isinstance(x, CudaArray):
        return Tensor._make(x, D.bfloat16 if str(x.t.dtype) == "torch.bfloat16" else D.from_numpy_dtype(x.dtype))
    if isinstance(x, np.ndarray):
        return Tensor._make(x, D.from_numpy_dtype(x.dtype)) if x.ndim else x.item()
    if isinstance(x, np.generic):
        return x.item()
    return x


def _op(name, *xs):
    with no_grad():
        return getattr(F, name)(*[_as_tensor(x) for x in xs])._data


def _binary(name, reflected=False, inplace=False):
    def op(self, other):
        r = _op(name, other, self) if reflected else _op(name, self, other)
        if inplace:
            self.t.copy_(r.t)
            return self
        return r
    return op


for _n, _f in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div")):
    setattr(CudaArray, f"__{_n}__", _binary(_f))
    setattr(CudaArray, f"__r{_n}__", _binary(_f, reflected=True))
    setattr(CudaArray, f"__i{_n}__", _binary(_f, inplace=True))
CudaArray.__neg__ = lambda self: _op("neg", self)


def _host_binary(name):
    def op(self, other):
        return getattr(to_host(self), name)(to_host(other) if isinstance(other, CudaArray) else other)
    return op


for _n in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor", "rand", "ror"):
    setattr(CudaArray, f"__{_n}__", _host_binary(f"__{_n}__"))
CudaArray.__invert__ = lambda self: ~to_host(self)
CudaArray.__bool__ = lambda self: bool(to_host(self))
CudaArray.__float__ = lambda self: float(to_host(self))
CudaArray.__int__ = lambda self: int(to_host(self))
CudaArray.__iter__ = lambda self: iter(to_host(self))


def _host_attr(self, name):
    """Reads of numpy methods (min, max, any, ravel, ...) on a host copy, as for validation checks."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(to_host(self), name)


CudaArray.__getattr__ = _host_attr


# == transfers ===================================================================================

def to_device(a, dtype=None):
    """A host array copied to the device."""
    torch = _check()
    a = np.asarray(a)
    t = torch.from_numpy(np.array(a, order="C", copy=True))
    if dtype is D.bfloat16:
        t = t.to(torch.bfloat16)
    if not interpreting():
        t = t.cuda()
    return CudaArray(t)


def to_host(c):
    """A device array copied to the host (a fresh numpy array)."""
    t = c.t.detach()
    if str(t.dtype) == "torch.bfloat16":
        t = t.float()
    return np.array(t.cpu().numpy(), copy=True)


def is_cuda_data(d):
    return d.__class__ is CudaArray


def parse(dev):
    """'cuda' / 'cuda:0' / device -> 'cuda' or 'cpu' (errors as torch's)."""
    d = _device(dev) if not isinstance(dev, int) else _device("cuda", dev)
    if d.type == "cuda":
        if d.index not in (None, 0) and is_available() and d.index >= device_count():
            raise RuntimeError("CUDA error: invalid device ordinal")
        _check()
    return d.type


def transfer(t, dev):
    """t on device `dev` ('cuda' or 'cpu'); differentiable (ToCopyBackward0)."""
    if t._data is None:
        raise TraceError("moving a tensor between devices inside a compiled function is not traced")
    src = "cuda" if t._data.__class__ is CudaArray else "cpu"
    if src == dev:
        return t
    data = to_device(t._data, t._dtype) if dev == "cuda" else to_host(t._data)
    out = Tensor._make(data, t._dtype)
    if t._req and STATE.grad_enabled:
        _record(_to_prim(), (t,), {"device": dev, "src": src}, (out,))
    return out


def _to_apply(x, device, src):
    return apply(_to_prim(), (x,), {"device": device, "src": src})


def _to_eager(x, device, src):
    return transfer(x, device)


def _to_impl(x, device, src):
    return to_device(x) if device == "cuda" else to_host(x)


def _to_prim():
    if "to_copy" in PRIMITIVES:
        return PRIMITIVES["to_copy"]
    return Primitive("to_copy", "x", _to_impl, shape=lambda x, **p: tuple(x.shape), dtype="same",
                     vjp=lambda g, out, x, device, src: (_to_apply(g, src, device),), eager=_to_eager,
                     grad_fn="ToCopyBackward0")



# == eager dispatch ================================================================================

def _mixed(cpu_first=False, prim=None, args=()):
    a, b = ("cpu", "cuda:0") if cpu_first else ("cuda:0", "cpu")
    named = _CHECKED_ARGS.get(prim.name) if prim is not None else None
    if named is not None:
        # ops with a device check per named argument (torch's generated wrappers) name the argument
        wrapper, names = named(args) if callable(named) else named
        tensors = [(n, t) for n, t in zip(names, args) if isinstance(t, Tensor)]
        common = tensors[0][1].is_cuda if tensors and wrapper else None
        for n, t in tensors[1:] if common is not None else ():
            if t.is_cuda != common:
                return RuntimeError(f"Expected all tensors to be on the same device, but got {n} is on "
                                    f"{t.device}, different from other tensors on {a} (when "
                                    f"checking argument in method {wrapper})")
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!")


def _matmul_check(args):
    nd = [getattr(t, "ndim", 0) for t in args[:2]]
    if nd == [2, 2]:
        return "wrapper_CUDA_mm", ("self", "mat2")
    if nd == [3, 3]:
        return "wrapper_CUDA_bmm", ("self", "mat2")
    return None, ()


_CHECKED_ARGS = {"index_select": ("wrapper_CUDA__index_select", ("self", "index")),
                 "gather": ("wrapper_CUDA_gather", ("self", "index")),
                 "matmul": _matmul_check}


NOT_CUDA = object()
_DEFAULT = [False]           # ops without tensor arguments (full) make device tensors (a backward run op by op)
_DIRECT = {"compiled_backward", "call_hooks", "node_prehooks", "node_hooks", "function", "function_backward",
           "delayed_error"}     # kernels that take device arrays themselves (Python calls: hooks, Functions)
_INDEXING = {"getitem", "getitem_backward", "index_put"}


def _call_hooks_device(g, fns, dtype=None, none=False):
    if none:                             # hooks of an output no gradient reached: they see None
        for fn in fns:
            check_hook_result(fn, None, fn(None))
        return g
    t = None if g is None else Tensor._make(g, dtype if dtype is not None and dtype.np == g.dtype else
                                            D.from_numpy_dtype(g.dtype))
    handed_out(t)
    for fn in fns:
        r = fn(t)
        if r is not None:
            check_hook_result(fn, t, r)
            t = r
    if t is None:
        return None
    handed_out(t)
    return t._data


_DIRECT_IMPL = {"call_hooks": _call_hooks_device}


def apply_cuda(prim, args, params):
    """Run one primitive on CUDA tensors; NOT_CUDA when no argument is on the device."""
    first = None
    cpu_first = False
    for a in args:
        if isinstance(a, Tensor):
            c = a._data.__class__ is CudaArray
            if first is None:
                first = c
                cpu_first = not c
            if c:
                break
    else:
        if not _DEFAULT[0] or first is not None:
            return NOT_CUDA
        cpu_first = False
    new = list(args)
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and a._data.__class__ is not CudaArray:
            if (a._data.ndim == 0 and prim.elementwise) or (prim.name in _INDEXING and i and
                                                            not a._dtype.is_floating_point):
                # a CPU scalar, or CPU index tensors of an indexing op, as torch allows
                new[i] = Tensor._make(to_device(a._data, a._dtype), a._dtype)
            else:
                raise _mixed(cpu_first, prim, args)
    cdt, odt = prim.dtype_rule(args)
    if odt is None:
        odt = params["dtype"]
    if prim.name in _DIRECT:
        out = _DIRECT_IMPL.get(prim.name, prim.impl)(*[a._data if isinstance(a, Tensor) else a for a in new], **params)
        outs = [o if o.__class__ is CudaArray else to_device(o) for o in (out if prim.multi else (out,))]
        dtypes = [dt for _, dt in prim.shape(*args, **params)] if prim.multi else [odt]
        shares = False
    else:
        outs, dtypes, shares = _run(prim, new, params, cdt, odt)
    req = STATE.grad_enabled and not STATE.inference and prim.vjp is not None and \
        any(isinstance(a, Tensor) and a._req for a in args)
    view = prim.view and (prim.view is True or prim.view(params))
    base = args[0] if view and shares else None
    if view and not shares and prim.name == "reshape":
        params = dict(params, view=False)
    made = tuple(tracer._make_out(o, dt, base, prim.multi) for o, dt in zip(outs, dtypes))
    if req:
        tracer._record(prim, args, params, made)
    return made if prim.multi else made[0]


def _key(prim, args, params):
    metas = []
    for a in args:
        if isinstance(a, Tensor):
            metas.append((a._data.shape, a._dtype, a._data.t.is_contiguous()))
        else:
            metas.append(("c", type(a).__name__, repr(a)))
    try:
        pk = tuple(params.items())
        hash(pk)
    except TypeError:
        pk = repr(sorted(params.items(), key=lambda kv: kv[0]))
    return (prim.name, pk, tuple(metas), D.get_float32_matmul_precision())


def _build(prim, args, params):
    g = Graph(prim.name)
    with trace(g):
        ins = tuple(proxy_input(g, tuple(a.shape), a._dtype) if isinstance(a, Tensor) else a for a in args)
        out = apply(prim, ins, params)
    outs = out if isinstance(out, tuple) else (out,)
    g.outputs = [V(o.__dict__["_name"]) for o in outs]
    from .decompositions import lower  # deferred: import tracegrad does not load tracegrad.decompositions
    return lower(g), [g[o]["dtype"] for o in g.outputs]


# arithmetic whose Python float operand becomes a 0-d device argument of the kernel rather
# than a literal in its source: an optimizer's step-dependent scalars (Adam's bias
# corrections, a scheduled learning rate) then reuse one kernel instead of making one a step
_SCALAR_OPERAND = {"add", "sub", "rsub", "mul", "div"}


def _scalars_as_arguments(prim, args, odt):
    """args with each Python float made a 0-d device tensor (float32, or float64 for a float64
    result), where the op's result dtype stays what the constant gives; else args."""
    if prim.name not in _SCALAR_OPERAND or not any(type(a) is float for a in args) or \
            not getattr(odt, "is_floating_point", False):
        return args
    d = D.float64 if odt is D.float64 else D.float32
    new = [Tensor._make(to_device(np.array(a, dtype=d.np)), d) if type(a) is float else a for a in args]
    try:
        same = prim.dtype_rule(new)[1] is odt      # a 0-d tensor promotes as the scalar did
    except Exception:
        same = False
    return new if same else args


_WARNED = set()


def _warn_host(prim, e):
    """A kernel that failed to build or launch is never silent: the op runs on a host copy
    from then on, and says so once per primitive."""
    if prim.name not in _WARNED:
        _WARNED.add(prim.name)
        warnings.warn(f"tracegrad cuda: the Triton kernel of {prim.name} failed ({type(e).__name__}: "
                      f"{str(e)[:300]}); {prim.name} runs on a host copy instead", RuntimeWarning, stacklevel=4)


def _run(prim, args, params, cdt, odt):
    args = _scalars_as_arguments(prim, args, odt)
    key = _key(prim, args, params)
    entry = _KERNELS.get(key)
    if entry is None:
        try:
            entry = _build(prim, args, params)
        except Exception as e:
            if isinstance(e, (RuntimeError, IndexError, TypeError, ValueError)):
                prim.shape(*args, **params)          # torch's error for bad arguments
            HOST_WHY[prim.name] = f"{type(e).__name__}: {e}"
            if not isinstance(e, NotImplementedError):      # a refusal is by design; anything else is not
                _warn_host(prim, e)
            entry = _HOST
        _KERNELS[key] = entry
    if entry is not _HOST:
        prog, dtypes = entry
        carriers = [a._data.t for a in args if isinstance(a, Tensor)]
        try:
            res = prog(*carriers)
        except Exception as e:
            HOST_WHY[prim.name] = f"{type(e).__name__}: {e}"
            _warn_host(prim, e)
            _KERNELS[key] = _HOST
        else:
            STATS["triton"] += 1
            ptrs = {c.untyped_storage().data_ptr() for c in carriers[:1]}
            shares = any(r.untyped_storage().data_ptr() in ptrs for r in res)
            return [CudaArray(r) for r in res], dtypes, shares
    return _run_host(prim, args, params, cdt, odt)


def _run_host(prim, args, params, cdt, odt):
    """A primitive the lowering refuses: its numpy kernel on host copies, the result copied back."""
    STATS["host"] += 1
    HOST_OPS[prim.name] += 1
    arrays = []
    cast = prim.cast
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            d = to_host(a._data)
            if cdt is not None and a._dtype is not cdt and (cast is None or i in cast):
                d = d.astype(cdt.np)
            arrays.append(d)
        else:
            arrays.append(a)
    try:
        out = prim.impl(*arrays, **params)
    except (ValueError, IndexError) as e:
        tracer._kernel_error(prim, args, params, e)
    if prim.multi:
        shapes = prim.shape(*args, **params) if prim.nondiff_outputs else None
        dts = [odt if shapes is None or shapes[k][1] is None else shapes[k][1] for k in range(len(out))]
        outs = list(out)
    else:
        dts, outs = [odt], [out]
    return [to_device(tracer._wrap(o, dt), dt) for o, dt in zip(outs, dts)], dts, False


# == autograd ======================================================================================

def _run_backward_graph(graph, args, run_eager):
    """run_eager, except that a compiled call's backward (no create_graph here) launches the
    partitioned backward program (`impl`) rather than the differentiable one (`eager`), which
    traces the forward again and recomputes it, matmuls included."""
    bwd = [n for n in graph.nodes() if graph[n]["op"] == "compiled_backward"]
    if not bwd:
        return run_eager(graph, args)

    def resolve(x, env):
        if isinstance(x, V):
            return env[x]
        if isinstance(x, (tuple, list)):
            return type(x)(resolve(y, env) for y in x)
        return x

    def compute(n, a, xs):
        prim = a["prim"]
        if a["op"] == "compiled_backward":
            raw = [x._data if isinstance(x, Tensor) else x for x in xs]
            res = prim.impl(*raw, **a["params"])
            metas = a["params"]["prog"].grad_metas
            return tuple(Tensor._make(r if r.__class__ is CudaArray else to_device(r, dt), dt)
                         for r, (_, dt) in zip(res, metas))
        return prim.eager(*xs, **a["params"]) if prim.eager else apply(prim, tuple(xs), a["params"])
    return walk(graph, args, compute, resolve)


def run_backward(p, args):
    """The engine's backward program on device data: the graph lowered to Triton once per
    program, or (transfers between devices, hooks, custom Functions) run op by op."""
    # lowered once per program and float32 matmul precision (p.triton: (precision, program))
    precision = D.get_float32_matmul_precision()
    prog = p.triton[1] if p.triton is not None and p.triton[0] == precision else None
    if prog is None:
        prog = False
        if not any(p.bwd[n]["op"] == "to_copy" for n in p.bwd.nodes()) and \
                all(p.bwd[n]["role"] in ("grad", "saved", "const") for n in p.bwd.inputs):
            try:
                from .decompositions import lower  # deferred: import tracegrad does not load tracegrad.decompositions
                prog = lower(p.bwd)
            except Exception:
                prog = False
        p.triton = (precision, prog)
    if prog is not False:
        carriers = []
        for n, a in zip(p.bwd.inputs, args):
            if isinstance(a, np.ndarray) or isinstance(a, np.generic):
                a = to_device(a, p.bwd[n]["dtype"])
            carriers.append(a.t if isinstance(a, CudaArray) else a)
        try:
            res = prog(*carriers)
        except Exception as e:
            p.triton = (precision, False)
            _warn_host(type("backward", (), {"name": "a backward program"}), e)
        else:
            STATS["backward_triton"] += 1
            return [None if r is None else CudaArray(r) for r in res]
    on_device = any(a.__class__ is CudaArray for a in args) and not p.transfers
    targs = []
    for n, a in zip(p.bwd.inputs, args):
        if isinstance(a, np.ndarray) and on_device:
            a = to_device(a, p.bwd[n]["dtype"])
        if isinstance(a, (np.ndarray, CudaArray)):
            a = Tensor._make(a, p.bwd[n]["dtype"])
        targs.append(a)
    STATS["backward_eager"] += 1
    _DEFAULT[0] = on_device
    try:
        with no_grad():
            outs = _run_backward_graph(p.bwd, targs, run_eager)
    finally:
        _DEFAULT[0] = False
    return [None if o is None else (o._data if isinstance(o, Tensor) else o) for o in outs]


# Tensor.cpu() and .cuda(), creation on a device, .to(device)
Above.transfer, Above.parse, Above.to_device = transfer, parse, to_device


_tracing.Above.apply_cuda, _tracing.Above.NOT_CUDA = apply_cuda, NOT_CUDA        # the eager path's CUDA branch

"""numpy code generation: an IR graph becomes a readable Python function.

Each op calls its numpy kernel from the op table (`k_<op>`); parameters that are not
plain literals live in the function's globals. The source is kept on the function
(`fn.source`) for inspection.

Groups marked by passes/fuse.py become one function each, run over chunks of rows of
about CHUNK_BYTES (1 MiB: intermediates stay in L2) on THREADS threads (numpy releases
the GIL inside a ufunc): ufuncs write with `out=` into per-thread scratch buffers reused
across chunks and calls (in place over an argument that dies there), row sums go
through BLAS (`x @ ones`), sums over the first axis become per-chunk partial sums.
Big arrays a group writes for later statements or for the caller are recycled from
call to call once nothing references them (`recycled`); an output goes over a temporary
of the program that dies in the group (a matrix product under its bias add and relu),
and a member may wait in an output's chunk until the output is written there, so a
step's groups touch no memory besides their arguments and results. Outside groups,
ufuncs, matrix products, transposes, integer where, exact conversions and row gathers
and scatters are called directly (no kernel frame), and expands that their users
broadcast anyway cost nothing.
Graphs whose values all have one element run on scalars of their dtype instead (a numpy
call on a [1]-shaped array costs ~0.4 µs; a Python float op ~0.03 µs, a numpy float32
scalar op ~0.1 µs), falling back to the numpy version on arithmetic errors so inf and
nan come out as numpy's.
"""
import itertools
import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._dtype import round_bfloat16
from ..ir import symbolic
from ..ir.graph import V, refs, type_str
from ..ir.layout import array_order, dense_axes
from ..ir.printer import comment_text
from ..ops.primitives import BLAS_OPS, check_index_bounds

_ids = itertools.count()


def _literal(x, env):
    """x as source: a value name, a literal of Python's own None/bool/int/float/str (whose
    repr is always a literal), else a name in the function's globals bound to x itself:
    a user's int subclass is passed as it is, its __repr__ never becomes code."""
    if isinstance(x, V):
        return str(x)
    t = type(x)
    if x is None or t is bool or t is int or t is str or (t is float and math.isfinite(x)):
        return repr(x)
    if t is symbolic.Sym or (t is tuple and symbolic.has_sym(x)):
        # a symbolic size: its expression where the function binds its symbols, else its
        # value in the call being compiled (guarded: ir/symbolic.py)
        return repr(x) if t is symbolic.Sym else \
            "(" + "".join(_literal(a, env) + ", " for a in x) + ")"
    name = f"CONST_{len(env)}"           # upper case: never a value name (t3, s1, c2...)
    env[name] = x
    return name


def _comment(a):
    """A statement's comment: its type and the user's source line, escaped (a file name
    may hold a newline or a quote; nothing in a comment may end it)."""
    text = type_str(a["shape"], a["dtype"])
    if a.get("source"):
        text += f"  {a['source']}"
    return comment_text(text)


def generate(graph, name=None, donors=()):
    """Python source for `graph` and the globals it needs. `donors` names inputs whose
    arrays the caller may hand over: called with donate=True, the function writes a
    result into such an array where that input is read for the last time (a saved
    forward value the backward frees anyway), instead of into a fresh one. A dict
    {input: output} pairs each donor with the one output it may hold (a whole step's
    new parameter value over the parameter's own array: the update made in place, as
    the eager optimizer makes it); such a donor may also be read by statements before
    the group that writes it, views of it included, as long as all of them run before."""
    name = name or f"{graph.name}_{next(_ids)}"
    env = {"__name__": "tracegrad.codegen.generated", "np": np, "inf": math.inf, "nan": math.nan,
           "run_chunks": run_chunks, "recycled": recycled, "DONATED": []}
    params = ", ".join(graph.inputs)
    head = [f"def {name}({params}):"]
    # a dynamic program's symbols, bound at the top from an input whose shape holds one
    # (`s0 = x0.shape[0]`); sizes over them print as expressions in this function
    binds = {}
    if symbolic.current() is not None:
        for x in graph.inputs:
            for d, n in enumerate(graph[x]["shape"]):
                s = symbolic.symbol_name(n)
                if s is not None and s not in binds:
                    binds[s] = f"    {s} = {x}.shape[{d}]"
    with symbolic.bound(binds):
        stmts, keep = _statements(graph, name, donors, env)
    if env["DONATED"]:
        head = [f"def {name}({params}{', ' if params else ''}donate=False):"]
    head += list(binds.values())
    return _assemble(graph, head, stmts, keep, env)


def _statements(graph, name, donors, env):
    keep = set(o for o in graph.outputs if o is not None)
    # statements: (values defined, values read, lines); a fused group is one statement,
    # placed where its first member stands
    stmts = []
    groups = {}
    for n in graph.nodes():
        gid = graph[n].get("group")
        if gid is not None:
            groups.setdefault(gid, []).append(n)
    done = set()
    # BLAS's worker threads spin on the other core for ~100 ms after a parallel call: in a
    # program with matrix products, a second chunk thread fights them and both lose
    # (a whole MLP step's SGD update ran 2-4x slower on two threads than on one)
    env["SERIAL"] = any(graph[n]["op"] in BLAS_OPS for n in graph.nodes())
    implicit = _implicit_expands(graph, keep)
    # arrays a statement outside the groups makes afresh (a ufunc's or a matrix product's
    # result), no output of the program: a group where all their readers are may write an
    # output of the same shape over one of them instead of a new array, memory still warm
    temps = frozenset(n for n in graph.nodes() if n not in keep and n not in implicit and _fresh(graph, graph[n]))
    before, seen = set(), 0
    checked = set()
    for n in graph.nodes():
        a = graph[n]
        op = a["op"]
        if op == "input":
            continue
        if n in implicit:
            stmts.append(([n], refs(a["args"]), [f"{n} = {a['args'][0]}  # expand: its users broadcast"]))
            continue
        gid = a.get("group")
        if gid is not None:
            if gid not in done:
                done.add(gid)
                if isinstance(donors, dict):           # the values defined by the statements so far
                    for d, _, _ in stmts[seen:]:
                        before.update(d)
                    seen = len(stmts)
                stmts.append(_group_stmt(graph, gid, groups[gid], keep, env, name, donors, before, temps))
            continue
        if op == "proj":
            stmts.append(([n], refs(a["args"]), [f"{n} = {a['args'][0]}[{a['params']['index']}]"]))
            continue
        lines = [_direct(graph, n, a, env, checked) or _call(n, a, env)]
        if a.get("mem") is not None:
            # an elementwise op of operands in two orders: eager lays its result out in torch's
            # order (tracing.eager_layout), numpy's ufunc in its own, and a sum of it then adds
            # in another order (the mean of x.mT + y, x.mT * y summed over two dims: 1 ulp apart)
            env["in_order"] = in_order
            lines.append(f"{n} = in_order({n}, {a['mem']!r})")
        stmts.append(([n], refs(a["args"]), lines))
    return stmts, keep


def in_order(x, order):
    """Array x in the dense layout of `order` (ir/layout.py: its axes of size above 1,
    outermost first), copied where numpy laid it out otherwise."""
    if x.__class__ is not np.ndarray or not x.itemsize or any(st % x.itemsize for st in x.strides):
        return x
    order = tuple(k for k in order if x.shape[k] > 1)      # (a symbolic size that is 1 at this call)
    if array_order(x.shape, tuple(st // x.itemsize for st in x.strides)) == order:
        return x
    axes = dense_axes(x.shape, order)
    out = np.empty(tuple(x.shape[k] for k in axes), x.dtype).transpose(np.argsort(axes))
    np.copyto(out, x)
    return out


def _assemble(graph, head, stmts, keep, env):
    # free each value after its last use, so big temporaries go back to the allocator
    # (and are reused without page faults) instead of living to the end of the call
    last_use = {}
    for i, (_, uses, _) in enumerate(stmts):
        for r in uses:
            last_use[r] = i
    dying = {}
    for v, i in last_use.items():
        if v not in keep:
            dying.setdefault(i, []).append(v)
    lines = list(head)
    # small values are freed a few at a time: a `del` statement of its own after every op
    # is half of what Python's compile() spends on a long program of small values
    pending = []
    for i, (_, _, code) in enumerate(stmts):
        lines.extend("    " + c for c in code)
        if i in dying:
            now = []
            for v in sorted(set(dying[i])):
                (pending if _small(graph[v]) else now).append(v)
            if len(pending) >= SMALL_DEL_BATCH:
                now += pending
                pending = []
            if now:
                lines.append(f"    del {', '.join(now)}")
    outs = ", ".join(str(o) if o is not None else "None" for o in graph.outputs)
    lines.append(f"    return ({outs}{',' if len(graph.outputs) == 1 else ''})")
    return "\n".join(lines) + "\n", env


SMALL_DEL_BYTES = 1 << 14       # values under this size wait for a batch to be freed together
SMALL_DEL_BATCH = 32            # (at most this many: under half a MiB held a little longer)


def _small(a):
    dt = a["dtype"]
    if isinstance(dt, (list, tuple)):
        return False
    return math.prod(symbolic.hint(a["shape"])) * dt.itemsize < SMALL_DEL_BYTES     # (when to free: no guard)


def _implicit_expands(graph, keep):
    """Expands whose users are all elementwise ops that broadcast them anyway (another
    argument has the full shape): numpy's broadcasting does the expand for free."""
    found = set()
    for n in graph.nodes():
        a = graph[n]
        if a["op"] != "expand" or a.get("group") is not None or n in keep:
            continue
        users = list(graph.users(n))
        if users and all(_broadcasts(graph, u, n) for u in users):
            found.add(n)
    return found


def _broadcasts(graph, u, n):
    a = graph[u]
    if a.get("group") is not None or a["prim"] is None or not a["prim"].elementwise or \
            a["shape"] != graph[n]["shape"]:
        return False
    return any(isinstance(x, V) and x != n and graph[x]["shape"] == a["shape"] and graph[x]["op"] != "expand"
               for x in a["args"])


def _direct(graph, n, a, env, checked=None):
    """A ufunc or a reshape called directly rather than through its kernel: on small
    arrays the Python call in between is a good part of the cost. `checked`: the (index,
    size) pairs whose bounds statements before this one checked already."""
    comment = _comment(a)
    if _ufunc_ok(graph, a):
        args = [_literal(x, env) for x in a["args"]]
        if a["op"] == "rsub":
            args = args[::-1]
        return f"{n} = {_UFUNCS[a['op']]}({', '.join(args)})  # {comment}"
    red = _REDUCE_UFUNCS.get(a["op"])
    x = a["args"][0] if a["args"] else None
    if _reduce_ufunc_ok(graph, a):
        # what the kernel's np.add.reduce call comes to, its axes normalized here
        dims, nd = a["params"].get("dims"), len(graph[x]["shape"])
        axes = None if dims is None else tuple(sorted({d % nd for d in ((dims,) if isinstance(dims, int) else dims)}))
        return f"{n} = {red}({x}, axis={axes!r}, keepdims={bool(a['params'].get('keepdim', False))!r})  # {comment}"
    if a["op"] in ("reshape", "squeeze", "unsqueeze") and isinstance(a["args"][0], V):
        # squeeze and unsqueeze only drop or add dims of size 1: a reshape, a view always;
        # the array's own method where the value is surely an ndarray or a numpy scalar
        # (np.reshape is two Python frames around it)
        if _numpy_value(graph, a["args"][0]):
            return f"{n} = {a['args'][0]}.reshape({tuple(a['shape'])!r})  # {comment}"
        return f"{n} = np.reshape({a['args'][0]}, {tuple(a['shape'])!r})  # {comment}"
    # the calls the kernels below make, without the Python frame of the kernel around them
    # (a few µs each on a cold cache: a step's small statements are dozens of them)
    op, args = a["op"], a["args"]
    if op == "permute" and isinstance(x, V):
        return f"{n} = np.transpose({x}, {tuple(a['params']['dims'])!r})  # {comment}"
    if op == "detach" and isinstance(x, V):
        return f"{n} = {x}  # {comment}"
    if op == "matmul" and all(isinstance(v, V) and graph[v]["dtype"] is a["dtype"] for v in args) and \
            a["dtype"].name in _NATIVE_FLOATS:
        return f"{n} = np.matmul({args[0]}, {args[1]})  # {comment}"
    if op in _COMPARES and not a["params"] and all(isinstance(v, V) or type(v) in (int, float) for v in args):
        # the kernel is the comparison ufunc itself (labels == ignore_index)
        return f"{n} = {_COMPARES[op]}({', '.join(_literal(v, env) for v in args)})  # {comment}"
    if op == "where" and not a["dtype"].is_floating_point:
        # the kernel's bit-mask form is for float values only: for the others it is np.where
        return f"{n} = np.where({', '.join(_literal(v, env) for v in args)})  # {comment}"
    if op == "convert" and isinstance(x, V) and graph[x]["shape"] and _exact_cast(graph[x]["dtype"], a["params"]["dtype"]):
        if graph[x]["op"] in ("input", "expand"):
            # an argument or a broadcast may have stride 0: its cast is C-contiguous, as torch's
            # (numpy's order 'K' makes the stride-0 axis the innermost: (1, 4) for (4, 4))
            t = f"np.{a['params']['dtype'].np.name}"
            return f"{n} = {x}.astype({t}) if 0 not in {x}.strides else {x}.astype({t}, order='C')  # {comment}"
        return f"{n} = {x}.astype(np.{a['params']['dtype'].np.name})  # {comment}"
    if op == "convert" and isinstance(x, V) and not graph[x]["shape"] and graph[x]["dtype"].name == "float64" and \
            getattr(a["params"]["dtype"], "name", None) == "float32" and set(a["params"]) == {"dtype"}:
        # a float64 scalar (a learning rate) to float32: within float32's range the cast cannot
        # overflow, so it needs none of the kernel's warning handling; else the kernel
        env["k_convert"] = a["prim"].impl
        env["F32_MAX"] = float(np.finfo(np.float32).max)
        return f"{n} = np.array({x}, np.float32) if -F32_MAX <= {x} <= F32_MAX else " \
               f"k_convert({x}, dtype={_literal(a['params']['dtype'], env)})  # {comment}"
    rows = _row_pick(graph, a)
    if rows is not None and (symbolic.is_sym(a["shape"][0]) or symbolic.is_sym(graph[args[0]]["shape"][1])):
        # a symbolic number of rows or row length: the kernel's call (the flat offsets below are
        # numbers made at build time; over a symbolic length they were an array of symbols,
        # which is no index)
        rows = None
    if rows is not None:
        env[rows] = np.arange(a["shape"][0]).reshape(-1, 1)
        size = graph[args[0]]["shape"][1]
        # the kernel's bounds check (numpy would wrap a negative index) once per index and
        # size: the statements run in order, so a later pick of the same index is checked
        check = checked is None or (args[1], size) not in checked
        if checked is not None:
            checked.add((args[1], size))
        if graph[args[1]]["dtype"].np.kind == "i":
            # positions in the flattened rows: one index array instead of two broadcast ones
            offsets = f"ROWOFF_{a['shape'][0]}_{size}"
            env[offsets] = env[rows] * size
            index = f"check_rows({args[1]}, {size})" if check else args[1]
            env["check_rows"] = check_rows
            if op == "gather":
                return f"{n} = {args[0]}.reshape(-1)[{offsets} + {index}]  # {comment}"
            env["scatter_flat"] = scatter_flat
            return f"{n} = scatter_flat({args[0]}, {offsets} + {index}, {args[2]}, " \
                   f"{a['params'].get('reduce') == 'add'})  # {comment}"
        if op == "gather":
            # the kernel's bounds check first: numpy indexing would wrap a negative index
            env["check_index_bounds"] = check_index_bounds
            index = f"check_index_bounds({args[1]}, {size}, 1)" if check else args[1]
            return f"{n} = {args[0]}[{rows}, {index}]  # {comment}"
        env["scatter_rows"] = scatter_rows
        return f"{n} = scatter_rows({args[0]}, {rows}, {args[1]}, {args[2]}, " \
               f"{a['params'].get('reduce') == 'add'}{'' if check else ', False'})  # {comment}"
    return None


def _reduce_ufunc_ok(graph, a):
    """Whether a sum is written as its reduce ufunc (the call its kernel makes)."""
    x = a["args"][0] if a["args"] else None
    return a["op"] in _REDUCE_UFUNCS and isinstance(x, V) and a["dtype"].name in _REDUCING_FLOATS and \
        graph[x]["dtype"] is a["dtype"] and bool(graph[x]["shape"]) and set(a["params"]) <= {"dims", "keepdim"}


def _numpy_value(graph, x, depth=0):
    """Whether value x is an ndarray or a numpy scalar whatever the call: an input, a member
    of a group (its chunks are written into arrays), or the result of a statement written as
    a numpy call here (a ufunc, a matrix product, a reduce ufunc, a reshape of such a value)."""
    a = graph[x]
    if a["op"] == "input" or a.get("group") is not None or _fresh(graph, a):
        return True
    if a.get("group") is None and (_ufunc_ok(graph, a) or _reduce_ufunc_ok(graph, a)):
        return True
    if a["op"] == "where" and not a["dtype"].is_floating_point:
        return True                                # np.where
    if a["op"] == "convert" and isinstance(a["args"][0], V) and graph[a["args"][0]]["shape"] and \
            _exact_cast(graph[a["args"][0]]["dtype"], a["params"]["dtype"]):
        return True                                # .astype of an array
    if _row_pick(graph, a) is not None:
        return True                                # fancy indexing, scatter_rows
    return a["op"] in ("reshape", "squeeze", "unsqueeze") and depth < 8 and isinstance(a["args"][0], V) and \
        _numpy_value(graph, a["args"][0], depth + 1)


def _fresh(graph, a):
    """Whether the statement of node a (outside groups) returns a new array that nothing
    else refers to: a ufunc called directly, or a matrix product (see _direct)."""
    if a.get("group") is not None or a["op"] == "input" or not a["shape"]:
        return False
    if a["op"] == "matmul":
        return a["dtype"].name in _NATIVE_FLOATS and all(isinstance(v, V) and graph[v]["dtype"] is a["dtype"]
                                                         for v in a["args"])
    return _ufunc_ok(graph, a)


def _exact_cast(src, dst):
    """Whether converting src to dst is numpy's astype alone (the kernel's other steps,
    bfloat16 rounding, float16 through float32 and the overflow warnings they silence,
    cannot apply): bool or integer to float32/64, float32 to float64, and no change."""
    if getattr(dst, "name", None) not in _REDUCING_FLOATS:
        return False
    return src.name == "bool" or src.np.kind in "iu" or (src.name == "float32" and dst.name == "float64") or \
        src is dst


def _row_pick(graph, a):
    """For gather or scatter along the last dim of a 2-d value, with an integer index of
    the value's rows (scatter: a src of the index's shape and the value's dtype, and one
    index per row where it adds, so no position is written twice): the name of the row
    numbers' column, a constant; else None. Such a gather is x[rows, index], the same
    indexing np.take_along_axis does; the scatter writes the same positions np.add.at
    would, each once."""
    op = a["op"]
    if op not in ("gather", "scatter"):
        return None
    args = a["args"]
    x, index = args[0], args[1]
    if not isinstance(x, V) or not isinstance(index, V):
        return None
    xs, ix = graph[x]["shape"], graph[index]["shape"]
    if len(xs) != 2 or len(ix) != 2 or ix[0] != xs[0] or a["params"].get("dim") % 2 != 1 or \
            graph[index]["dtype"].np.kind not in "iu":
        return None
    if op == "scatter":
        src, reduce = args[2], a["params"].get("reduce")
        if not isinstance(src, V) or tuple(graph[src]["shape"]) != tuple(ix) or \
                graph[src]["dtype"] is not graph[x]["dtype"] or reduce not in (None, "add") or \
                (reduce == "add" and ix[1] != 1):
            return None
    return f"ROWS_{xs[0]}"


def check_rows(index, n):
    """check_index_bounds(index, n, 1) for a signed integer index, in one pass: a negative
    entry viewed as unsigned is above any n."""
    if index.size and index.view(index.dtype.str.replace("i", "u")).max() >= n:
        check_index_bounds(index, n, 1)            # torch's error, naming the entry
    return index


def scatter_flat(x, flat, src, add):
    """scatter(x, 1, index, src) of a 2-d x (see _row_pick), with `flat` the positions of
    (row, index) in x's rows laid end to end (index checked): a copy of x with src
    written, or added, there."""
    out = x.copy()                                 # C order: its flat view is out itself
    f = out.reshape(-1)
    if add:
        f[flat] += src
    else:
        f[flat] = src
    return out


def scatter_rows(x, rows, index, src, add, check=True):
    """scatter(x, 1, index, src) of a 2-d x (see _row_pick): a copy of x with src written,
    or added, at (row, index) of each row."""
    if check:
        check_index_bounds(index, x.shape[1], 1)
    out = x.copy()
    if add:
        out[rows, index] += src
    else:
        out[rows, index] = src
    return out


def _call(n, a, env, args_fn=None):
    k = f"k_{a['op']}"
    impl = a["prim"].impl
    if args_fn is not None and a["prim"].chunk_impl is not None:     # over a fused group's chunk
        k, impl = k + "_chunk", a["prim"].chunk_impl
    env[k] = impl
    args = [args_fn(x) if args_fn and isinstance(x, V) else _literal(x, env) for x in a["args"]]
    for key, val in a["params"].items():
        args.append(f"{key}={_literal(val, env)}")
    comment = _comment(a)
    call = f"{k}({', '.join(args)})"
    if getattr(a["dtype"], "name", None) == "bfloat16":      # stored as float32, rounded after each op
        env["round_bfloat16"] = round_bfloat16
        call = f"round_bfloat16({call})"
    return f"{n} = {call}  # {comment}"


# -- fused groups: run in chunks of rows that stay in L2, over two threads --------------------

CHUNK_BYTES = 1 << 20
THREADS = 2


def _l2_bytes(default=1 << 20):
    """One core's L2 cache in bytes, as Linux's sysfs gives it (else `default`)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith("index"):
                continue
            with open(f"{base}/{d}/level") as f:
                level = f.read().strip()
            with open(f"{base}/{d}/type") as f:
                kind = f.read().strip()
            if level == "2" and kind in ("Unified", "Data"):
                with open(f"{base}/{d}/size") as f:
                    size = f.read().strip()
                unit = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                return int(size.rstrip("KM")) * unit
    except (OSError, ValueError):
        pass
    return default


# Groups of a program with matrix products run on the calling thread, after products that
# pushed everything else out of the caches: a chunk of half the L2 keeps what a member writes
# there until the next member reads it back. (A whole step's SGD update, the gradient times
# -lr into a scratch buffer and then added to the parameter, 334-row chunks of 1 MiB on a
# 512 KiB L2: 320-350 µs; 83 rows, 256 KiB: 262-276 µs.)
SERIAL_CHUNK_BYTES = max(1 << 16, _l2_bytes() // 2)
_UFUNCS = {"add": "np.add", "sub": "np.subtract", "mul": "np.multiply", "div": "np.true_divide",
           "neg": "np.negative", "exp": "np.exp", "log": "np.log", "tanh": "np.tanh", "sqrt": "np.sqrt",
           "sin": "np.sin", "cos": "np.cos", "abs": "np.abs", "rsub": "np.subtract", "maximum": "np.maximum",
           "minimum": "np.minimum"}
# (amax and amin run their kernels: numpy's reduce gives a tie of 0.0 and -0.0 the sign torch does not,
# primitives._sign_of_zero)
_REDUCE_UFUNCS = {"sum": "np.add.reduce"}
_pool = []


# numpy's ufunc buffer size while chunks run: with the default (8192 elements) a binary
# ufunc with a broadcast operand (a row's mean, a column's weight) over rows of ~1,000 to
# 8,000 elements takes a buffered path ~1.7x slower than the same op on two full arrays;
# at 1024 it runs as fast (measured on rows of 1,000-4,096 float32). Set per thread and
# put back after, so the caller's numpy settings are untouched.
UFUNC_BUFSIZE = 1024
# rows up to this long run as fast with the default buffer (measured: 512-element rows no
# faster at 1024, rows of 768-2,048 1.6-5x faster): their groups leave the setting alone
BUFSIZE_ROW = 512


def _walk(fn, run, args, bufsize=True):
    if not bufsize:
        for lo, hi in run:
            fn(lo, hi, *args)
        return
    old = np.getbufsize()
    np.setbufsize(UFUNC_BUFSIZE)
    try:
        for lo, hi in run:
            fn(lo, hi, *args)
    finally:
        np.setbufsize(old)


def run_chunks(fn, rows, step, args, serial=False, bufsize=True):
    """fn(lo, hi, *args) over [0, rows) in chunks of `step` rows, on THREADS threads (on
    the calling thread alone where `serial`). `bufsize`: the group broadcasts an operand
    over rows longer than BUFSIZE_ROW, which runs faster with numpy's buffer at
    UFUNC_BUFSIZE (setting it and putting it back costs a few µs: groups that need not,
    do not)."""
    bounds = [(lo, min(lo + step, rows)) for lo in range(0, rows, step)] if rows > step else [(0, rows)]
    if serial or THREADS <= 1 or len(bounds) == 1:
        _walk(fn, bounds, args, bufsize)
        return
    if not _pool:
        _pool.append(ThreadPoolExecutor(THREADS, thread_name_prefix="tracegrad-chunk"))
    # each thread walks its own contiguous run of chunks: one hand-over per thread rather
    # than one per chunk, and the memory each reads streams in order
    k = min(THREADS, len(bounds))
    runs = [bounds[i * len(bounds) // k:(i + 1) * len(bounds) // k] for i in range(k)]
    for _ in _pool[0].map(lambda run: _walk(fn, run, args, bufsize), runs):
        pass


def set_threads(n):
    """The number of threads fused groups run on (torch.set_num_threads); a pool of the old size
    finishes what it was given."""
    global THREADS
    if n != THREADS:
        THREADS = n
        if _pool:
            _pool.pop().shutdown(wait=False)


def _after_fork_in_child():
    """A forked child has only the thread that forked: a pool started before the fork
    still counts its workers, takes work and never runs it (the call hangs). The child
    starts its own pool on first use; a lock some other thread held is new too."""
    global _RECYCLE_LOCK
    _pool.clear()
    _RECYCLE_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def scratch(bufs, slot, rows, rowshape, dtype, cap):
    """A (rows, *rowshape) view of this thread's buffer `slot` of a fused group."""
    key = (threading.get_ident(), slot)
    b = bufs.get(key)
    if b is None:
        b = bufs[key] = np.empty(cap, dtype)
    n = rows
    for d in rowshape:
        n *= d
    return b[:n].reshape((rows,) + rowshape)


RECYCLE_BYTES = 1 << 20
RECYCLE_KEEP = 2
_RECYCLE_LOCK = threading.Lock()


def recycled(pool, shape, dtype):
    """A big array for a group's output: one this statement made before if nothing else
    references it any more (the caller dropped the tensor that held it), else a new one.
    A fresh 16 MiB array page-faults in at every call (~1 µs per 4 KiB page) once glibc
    has given the memory back to the OS; a recycled one is already mapped. At most
    RECYCLE_KEEP arrays per statement stay alive for reuse."""
    with _RECYCLE_LOCK:
        for i in range(len(pool)):
            # only the pool holds it (and it has the shape: a dynamic program's sizes change)
            if sys.getrefcount(pool[i]) == 2 and pool[i].shape == shape:
                return pool[i]
        a = np.empty(shape, dtype)
        if len(pool) < RECYCLE_KEEP:
            pool.append(a)
        else:
            for i in range(len(pool)):
                if sys.getrefcount(pool[i]) == 2:      # free, of another shape: this one takes its place
                    pool[i] = a
                    break
        return a


_NATIVE_FLOATS = frozenset({"float16", "float32", "float64"})     # bfloat16 is rounded by its kernels
# reductions written here (BLAS row sums, softmax rows) accumulate in the array's own dtype:
# float16 ones go through their kernels, which accumulate in float32 as torch does
_REDUCING_FLOATS = frozenset({"float32", "float64"})
_ONES = {}


def _ones(n, dtype):
    o = _ONES.get((n, dtype))
    if o is None:
        o = _ONES[(n, dtype)] = np.ones(n, dtype)
    return o


def row_sum(x, shape, count=None):
    """Sum over the last axis of a 2-d chunk as a BLAS matrix-vector product with ones
    (about 5x faster than np.sum along rows); result reshaped to `shape`'s row form. With
    `count`, the mean: the sum divided by it, as np.mean does (not times 1/count)."""
    if x.ndim == 2 and x.strides[1] == x.itemsize and x.dtype.kind == "f":
        r = np.dot(x, _ones(x.shape[1], x.dtype))
    else:
        r = np.add.reduce(x, axis=-1)
    if count is not None:
        r /= count
    return r.reshape((x.shape[0],) + shape[1:])


def col_sum(x, shape):
    """Sum over the first axis of a 2-d chunk, as ones @ x."""
    if x.ndim == 2 and x.strides[1] == x.itemsize and x.dtype.kind == "f":
        r = np.dot(_ones(x.shape[0], x.dtype), x)
    else:
        r = np.add.reduce(x, axis=0)
    return r.reshape(shape)


_VIEWS = frozenset({"expand", "reshape", "squeeze", "unsqueeze", "permute", "detach"})


def _last_dim(graph, a):
    x = a["args"][0]
    s = graph[x]["shape"] if isinstance(x, V) else ()
    return len(s) == 2 and a["params"].get("dim") % 2 == 1


def _last_dims(graph, a):
    x = a["args"][0]
    s = graph[x]["shape"] if isinstance(x, V) else ()
    dims = a["params"].get("dims")
    return len(s) == 2 and dims is not None and tuple(d % 2 for d in dims) == (1,)


_TMP = threading.local()


def _temp(shape, dtype):
    """A per-thread temporary, grown as needed and reused across calls."""
    n = math.prod(shape)
    b = getattr(_TMP, "buf", None)
    if b is None or b.dtype != dtype or b.size < n:
        b = _TMP.buf = np.empty(n, dtype)
    return b[:n].reshape(shape)


_MASK = threading.local()
_BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _mask_temp(shape, dtype):
    """A per-thread integer mask buffer, grown as needed and reused across calls."""
    n = math.prod(shape)
    b = getattr(_MASK, dtype.__name__, None)
    if b is None or b.size < n:
        b = np.empty(n, dtype)
        setattr(_MASK, dtype.__name__, b)
    return b[:n].reshape(shape)


def relu_into(x, out, mask=None):
    """torch's relu, x < 0 ? 0 : x (-0.0 and NaN pass through), into out (which may be x):
    the bits of x and a mask of all ones where x is kept, three passes and no branch per
    element; the values are the op table's kernel's. The mask is one byte per element
    (an int8 -1 widens to all bits set in the and): a quarter of the memory of a mask of
    x's width, which a step touches cold after its matrix products. `mask`: a bool array
    of x's shape to hold it (a comparison's output written later: memory the group touches
    anyway), else a per-thread buffer."""
    if mask is None:
        mask = _mask_temp(x.shape, np.bool_)
    m = np.less(x, 0, out=mask).view(np.int8)     # 0 or 1: np.less's own bools
    np.subtract(m, 1, out=m)                       # 0 where x < 0, -1 (all bits set) elsewhere
    ints = _BITS[x.dtype]
    np.bitwise_and(x.view(ints), m, out=out.view(ints))
    return out


def where_zero(c, keep, v, out, spare=False):
    """where(c, v, 0) (keep=True) or where(c, 0, v) (keep=False) for a bool c and a float v of
    c's shape, into out: v's bits under a mask (relu's backward, threshold_backward), so
    NaN and infinity are kept or dropped exactly as np.where would. `spare`: c is read here
    for the last time, in memory of the program's own: the mask is written over it."""
    # an int8 mask, -1 where v is kept (widened to all bits set in the and); c is cast to
    # int8 by the ufunc, so any nonzero byte of a bool counts as True, as in the kernel
    m = c.view(np.int8) if spare else _mask_temp(c.shape, np.int8)
    if keep:
        np.negative(c, out=m, dtype=np.int8)       # -1 where c
    else:
        np.subtract(c, 1, out=m, dtype=np.int8)    # -1 where not c
    np.bitwise_and(v.view(_BITS[v.dtype]), m, out=out.view(_BITS[v.dtype]))
    return out


def _where_zero(graph, a):
    """For where(c, v, 0) or where(c, 0, v) with a bool c and a float32/64 v of the result's
    shape and dtype: (keep, v); else None."""
    if a["op"] != "where" or a["dtype"].np not in _BITS:
        return None
    c, x, y = a["args"]
    if not isinstance(c, V) or graph[c]["dtype"].name != "bool" or tuple(graph[c]["shape"]) != tuple(a["shape"]):
        return None
    for keep, v, zero in ((True, x, y), (False, y, x)):
        if isinstance(v, V) and graph[v]["dtype"] is a["dtype"] and tuple(graph[v]["shape"]) == tuple(a["shape"]) \
                and type(zero) in (int, float) and zero == 0 and math.copysign(1.0, zero) > 0:
            return keep, v
    return None


def scatter_into(out, index, src, dim, reduce=None):
    """scatter written into `out` itself (a scratch buffer that dies here): no copy."""
    src = np.broadcast_to(np.asarray(src, dtype=out.dtype), index.shape) if np.ndim(src) == 0 else src
    if index.shape != src.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    if reduce == "add":
        np.add.at(out, tuple(idx), src)
    else:
        out[tuple(idx)] = src
    return out


def log_softmax_rows(x, out):
    """log_softmax over the last axis of a 2-d chunk, into out (row sums by BLAS)."""
    m = np.maximum.reduce(x, axis=1, keepdims=True)
    np.subtract(x, m, out=out)
    e = np.exp(out, out=_temp(out.shape, out.dtype))
    s = row_sum(e, (x.shape[0], 1))
    np.log(s, out=s)
    return np.subtract(out, s, out=out)


def logsumexp_rows(x, out):
    """log(sum(exp(x))) over the last axis of a 2-d chunk, shifted by the row maximum,
    into the (rows, 1) array out."""
    m = np.maximum.reduce(x, axis=1, keepdims=True)
    if not np.isfinite(m).all():
        m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    e = np.subtract(x, m, out=_temp(x.shape, x.dtype))
    np.exp(e, out=e)
    s = row_sum(e, out.shape)
    np.log(s, out=out)
    return np.add(out, m, out=out)


def softmax_rows(x, out):
    """softmax over the last axis of a 2-d chunk, into out."""
    m = np.maximum.reduce(x, axis=1, keepdims=True)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    s = row_sum(out, (x.shape[0], 1))
    return np.divide(out, s, out=out)


def _blas_reduction(graph, a):
    """'row' or 'col' where a is a sum/mean over the last or first axis of a 2-d float value."""
    if a["op"] not in ("sum", "mean") or a["dtype"].name not in _REDUCING_FLOATS:
        return None
    x = a["args"][0]
    if not isinstance(x, V):
        return None
    s = graph[x]["shape"]
    if len(s) != 2 or graph[x]["dtype"] is not a["dtype"]:
        return None
    dims = a["params"].get("dims")
    if dims is None:
        return None
    dims = tuple(d % 2 for d in ((dims,) if isinstance(dims, int) else dims))
    if dims == (1,):
        return "row"
    if dims == (0,) and a["op"] == "sum":
        return "col"
    return None


def _ufunc_ok(graph, a):
    if a["op"] not in _UFUNCS or a["dtype"].name not in _NATIVE_FLOATS:
        return False
    for x in a["args"]:
        if isinstance(x, V):
            if graph[x]["dtype"] is not a["dtype"]:
                return False
        elif not isinstance(x, (int, float)) or isinstance(x, bool):
            return False
    return True


_COMPARES = {"eq": "np.equal", "ne": "np.not_equal", "lt": "np.less", "le": "np.less_equal", "gt": "np.greater",
             "ge": "np.greater_equal"}


def _compare_ok(graph, a):
    """A comparison whose kernel is its ufunc on these very operands: values of one float
    dtype of the result's shape, or a Python number beside one."""
    vals = [x for x in a["args"] if isinstance(x, V)]
    if not vals or len({graph[x]["dtype"] for x in vals}) != 1 or graph[vals[0]]["dtype"].name not in _NATIVE_FLOATS:
        return False
    if any(tuple(graph[x]["shape"]) != tuple(a["shape"]) for x in vals):
        return False
    return all(isinstance(x, V) or (type(x) in (int, float)) for x in a["args"])


def _donor_for(graph, o, members, cut, into_out, keep, donors, taken, before=()):
    """An input of the group whose array can hold output o: a donor of o's shape and
    dtype, cut into the same rows, read nowhere outside the group (or, for a donor paired
    with o, only by statements `before` the group, views of it read there too), and read
    inside it (itself or through views of it) no later than o's rows are first written,
    where that first write is an elementwise ufunc over the same positions."""
    pos = {n: i for i, n in enumerate(members)}
    writer = next((x for x, t in into_out.items() if t == o), o)
    first_write = pos[writer]
    a = graph[o]
    paired = isinstance(donors, dict)
    for s in cut:
        if s not in donors or (paired and donors[s] != o) or s in taken or s in keep or \
                graph[s]["dtype"] is not a["dtype"] or tuple(graph[s]["shape"]) != tuple(a["shape"]):
            continue
        if not all(u in pos or (paired and _read_before(graph, u, pos, keep, before)) for u in graph.users(s)):
            continue
        alias = {s}
        for m in members:
            if graph[m]["op"] in _VIEWS and graph[m]["args"] and graph[m]["args"][0] in alias:
                alias.add(m)
        reads = [pos[m] for m in members if any(r in alias for r in refs(graph[m]["args"]))]
        last = max(reads)
        if last < first_write or (last == first_write and _elementwise_writer(graph, graph[writer]) and
                                  tuple(graph[writer]["shape"]) == tuple(a["shape"]) and
                                  not any(graph[m]["op"] in _VIEWS and pos[m] < last for m in alias - {s})):
            return s
    return None


def _broadcast_row(graph, a):
    """The row length (elements after the first dim) of member a where it broadcasts an
    argument of another shape over its own (the case UFUNC_BUFSIZE is for; a one-element
    argument, a scalar, runs alike with either buffer), else 0."""
    if not a["shape"] or not any(isinstance(x, V) and tuple(graph[x]["shape"]) != tuple(a["shape"]) and
                                 math.prod(graph[x]["shape"]) > 1 for x in a["args"]):
        return 0
    return math.prod(a["shape"][1:])


def _elementwise_writer(graph, a):
    """Whether the group statement of node a reads each position of its arguments before it
    writes that position of its result, and no other: it may write over an argument."""
    if _ufunc_ok(graph, a):
        return True
    if a["op"] == "relu" and a["dtype"].np in _BITS and isinstance(a["args"][0], V) and \
            graph[a["args"][0]]["dtype"] is a["dtype"]:
        return True                                # relu_into: np.less, then the and, in place
    if a["op"] in _COMPARES and a["dtype"].name == "bool" and _compare_ok(graph, a):
        return True
    return _where_zero(graph, a) is not None       # where_zero: the mask of c, then the and


def _read_before(graph, u, group, keep, before):
    """Whether statement u, a reader of a donor outside its group, runs before the group and
    leaves nothing that reads the donor after it: u itself is done, and where u is a view
    (no copy) of the donor, so is every reader of u, and u is no output of the program."""
    if u not in before:
        return False
    if graph[u]["op"] not in _VIEWS:
        return True
    return u not in keep and all(_read_before(graph, w, group, keep, before) for w in graph.users(u))


def _group_stmt(graph, gid, members, keep, env, name, donors=(), before=(), temps=frozenset()):
    senv = symbolic.current()
    if senv is None:
        return _group_stmt_in(graph, gid, members, keep, env, name, donors, before, temps)
    # the group's own function binds no symbol: sizes written there specialize (guarded);
    # its call in the function being written sees that function's symbols
    outer = senv.bound
    senv.bound = frozenset()
    try:
        return _group_stmt_in(graph, gid, members, keep, env, name, donors, before, temps, outer)
    finally:
        senv.bound = outer


def _group_stmt_in(graph, gid, members, keep, env, name, donors=(), before=(), temps=frozenset(), outer=None):
    mset = set(members)
    first = members[0]
    rows = graph[first]["fuse_rows"]
    ext = []
    for n in members:
        for r in refs(graph[n]["args"]):
            if r not in mset and r not in ext:
                ext.append(r)
    cols = [n for n in members if graph[n].get("fuse_kind") == "col"]
    outs = [n for n in members if n in keep or n in cols or any(u not in mset for u in graph.users(n))]
    fname = f"{name}_group{gid}"
    def slices(x, n):
        s, a = graph[x]["shape"], graph[n]
        if not s or s[0] != rows:
            return False
        return not a["prim"].elementwise or len(s) == len(a["shape"])

    cut = [x for x in ext if any(slices(x, n) for n in members if x in refs(graph[n]["args"]))]
    # a chunk's rows are sized by the widest row the group reads or writes
    row_elems = max(int(np.prod(graph[n]["shape"][1:], dtype=np.int64)) * graph[n]["dtype"].itemsize
                    for n in members + cut)
    chunk = min(CHUNK_BYTES, SERIAL_CHUNK_BYTES) if env.get("SERIAL") else CHUNK_BYTES
    step = max(1, chunk // max(1, row_elems))
    body = [f"def {fname}(lo, hi, {', '.join(ext + ['o_' + o for o in outs])}):"]
    for x in cut:
        body.append(f"    {x}_c = {x}[lo:hi]")
    # chunk temporaries live in per-thread scratch buffers, reused across chunks and calls;
    # a ufunc writes over an argument that dies at it (in place) when the types agree
    last = {}
    for i, n in enumerate(members):
        for r in refs(graph[n]["args"]):
            if r in mset:
                last[r] = i
    for i in range(len(members) - 1, -1, -1):      # a view keeps its base's buffer alive
        n = members[i]
        if graph[n]["op"] in _VIEWS and graph[n]["args"][0] in mset:
            x = graph[n]["args"][0]
            last[x] = max(last.get(x, i), last.get(n, i))
    slot_of, free, slots = {}, {}, []
    scr = f"SCRATCH_{next(_ids)}"
    env[scr] = {}
    alloc = []

    # a scatter that makes an output in place over a ufunc's result: the ufunc writes
    # straight into the output, so the scatter finishes it there without a copy
    into_out = {}
    for n in outs:
        a = graph[n]
        x = a["args"][0] if a["args"] else None
        if a["op"] == "scatter" and n not in cols and x in mset and x not in outs and list(graph.users(x)) == [n] \
                and graph[x]["shape"] == a["shape"] and _ufunc_ok(graph, graph[x]) and \
                a["params"].get("dim", 0) % len(a["shape"]) != 0:
            into_out[x] = n

    # where each output lives: over an input the caller may donate, over a temporary of the
    # program that dies here, in a recycled big array or in a new one
    nchunks = -(-rows // step)
    placed, used = {}, []
    for o in outs:
        a = graph[o]
        shape = (nchunks,) + tuple(a["shape"]) if o in cols else tuple(a["shape"])
        # (a size's hint, no guard: recycled() hands out an array of the asked shape only)
        big = math.prod(symbolic.hint(shape)) * a["dtype"].itemsize >= RECYCLE_BYTES
        donor = _donor_for(graph, o, members, cut, into_out, keep, donors, env["DONATED"], before) \
            if big and donors and o not in cols else None
        temp = _donor_for(graph, o, members, cut, into_out, keep, temps, used) \
            if donor is None and temps and o not in cols else None
        if temp is not None:
            used.append(temp)
        if donor is not None:
            env["DONATED"].append(donor)
        placed[o] = (shape, big, donor, temp)
    pos = {n: i for i, n in enumerate(members)}
    writes = {o: pos[next((x for x, t in into_out.items() if t == o), o)] for o in outs if o not in cols}
    claimed = set(into_out.values())

    def in_output(n, a):
        """An output whose chunk can hold member n until the output is written there (a
        bias add before an activation writes where the activation's result goes): one of
        n's shape and dtype, written later, by a statement that is n's last reader or after
        it, and if it reads n, does so position by position; its memory free by now (over
        an array the group reads, every read of that array done, or done by n itself
        position by position)."""
        i = pos[n]
        for o, w in writes.items():
            if o in claimed or w <= i or graph[o]["dtype"] is not a["dtype"] or \
                    tuple(graph[o]["shape"]) != tuple(a["shape"]):
                continue
            end = last.get(n, i)
            if end > w or (end == w and not (n in graph[members[w]]["args"] and
                                            _elementwise_writer(graph, graph[members[w]]))):
                continue
            over = placed[o][2] or placed[o][3]
            if over is not None:
                alias = {over} | {m for m in members if graph[m]["op"] in _VIEWS and graph[m]["args"][0] == over}
                reads = [pos[m] for m in members if any(r in alias for r in refs(graph[m]["args"]))]
                if any(r > i for r in reads) or (i in reads and (len(alias) > 1 or not _elementwise_writer(graph, a))):
                    continue
            claimed.add(o)
            return o
        return None

    def mask_output(n, a):
        """A bool output of n's shape that a comparison of the group writes later, in an
        array of its own (no input's memory) where no value waits: its chunk can hold
        relu's mask until then."""
        for o in outs:
            b = graph[o]
            if o not in cols and o not in claimed and pos[o] > pos[n] and b["dtype"].name == "bool" \
                    and tuple(b["shape"]) == tuple(a["shape"]) and b["op"] in _COMPARES and \
                    _compare_ok(graph, b) and placed[o][2] is None and placed[o][3] is None and o not in masks:
                masks.add(o)
                return o
        return None
    masks = set()

    def target(n, a, dying, inplace=True):
        """Where member n's chunk goes: its output array, an output's chunk until that output
        is written, or a scratch buffer (in place over an argument dying here when allowed
        and the types agree)."""
        if n in outs:
            claimed.add(n)
            return f"o_{n}[lo:hi]"
        if n in into_out:
            return f"o_{into_out[n]}[lo:hi]"
        o = in_output(n, a) if inplace else None
        if o is not None:
            return f"o_{o}[lo:hi]"
        key = (tuple(a["shape"][1:]), a["dtype"].np.name)
        reuse = [r for r in dying if inplace and graph[r]["shape"] == a["shape"] and
                 (tuple(graph[r]["shape"][1:]), graph[r]["dtype"].np.name) == key]
        if reuse:
            k = slot_of[reuse[0]]
            dying.remove(reuse[0])
        elif free.get(key):
            k = free[key].pop()
        else:
            k = len(slots)
            slots.append(key)
        slot_of[n] = k
        return f"b{k}"

    for i, n in enumerate(members):
        a = graph[n]
        def arg(x, n=n):
            return f"{x}_c" if x in mset or slices(x, n) else x
        dying = [r for r in dict.fromkeys(refs(a["args"])) if r in slot_of and last.get(r) == i]
        blas = _blas_reduction(graph, a)
        op = a["op"]
        copy_out = False
        if n in cols and blas == "col":
            body.append(f"    o_{n}[lo // {step}] = col_sum({arg(a['args'][0])}, {tuple(a['shape'])!r})  # sum")
        elif n in cols:
            body.append("    " + _call(f"o_{n}[lo // {step}]", a, env, arg))
        elif blas == "row":
            x = a["args"][0]
            scale = f", {_literal(int(graph[x]['shape'][1]), env)}" if op == "mean" else ""
            # (row_sum reads the shape's dims after the first)
            body.append(f"    {n}_c = row_sum({arg(x)}, {(0,) + tuple(a['shape'][1:])!r}{scale})  # {op}")
            copy_out = True
        elif op == "full":
            out = target(n, a, dying)
            body.append(f"    {n}_c = {out}")
            body.append(f"    {n}_c.fill({_literal(a['params']['value'], env)})  # full")
        elif op == "scatter" and into_out.get(a["args"][0]) == n:
            rest = ", ".join(arg(v) if isinstance(v, V) else _literal(v, env) for v in a["args"][1:])
            body.append(f"    {n}_c = scatter_into({a['args'][0]}_c, {rest}, {_literal(a['params']['dim'], env)}, "
                        f"{_literal(a['params'].get('reduce'), env)})  # scatter, in place in the output")
        elif op == "scatter" and a["args"][0] in slot_of and a["args"][0] in dying and \
                graph[a["args"][0]]["shape"] == a["shape"] and a["params"].get("dim", 0) % len(a["shape"]) != 0:
            x = a["args"][0]
            dying.remove(x)
            slot_of[n] = slot_of[x]
            rest = ", ".join(arg(v) if isinstance(v, V) else _literal(v, env) for v in a["args"][1:])
            body.append(f"    {n}_c = scatter_into({x}_c, {rest}, {_literal(a['params']['dim'], env)}, "
                        f"{_literal(a['params'].get('reduce'), env)})  # scatter, in place")
            copy_out = True
        elif op == "logsumexp" and _last_dims(graph, a) and a["params"].get("keepdim") and \
                a["dtype"].name in _REDUCING_FLOATS:
            out = target(n, a, dying, inplace=False)
            body.append(f"    {n}_c = logsumexp_rows({arg(a['args'][0])}, {out})  # logsumexp")
        elif op in ("softmax", "log_softmax") and _last_dim(graph, a) and a["dtype"].name in _REDUCING_FLOATS:
            out = target(n, a, dying, inplace=False)
            body.append(f"    {n}_c = {op}_rows({arg(a['args'][0])}, {out})  # {op}")
        elif op == "reshape":
            body.append(f"    {n}_c = {arg(a['args'][0])}.reshape((hi - lo,) + {tuple(a['shape'][1:])!r})  # reshape")
            copy_out = True
        elif op == "expand":
            body.append(f"    {n}_c = np.broadcast_to({arg(a['args'][0])}, (hi - lo,) + {tuple(a['shape'][1:])!r})"
                        f"  # expand")
            copy_out = True
        elif op == "relu" and a["dtype"].np in _BITS and isinstance(a["args"][0], V) and \
                graph[a["args"][0]]["dtype"] is a["dtype"]:
            out = target(n, a, dying)
            m = mask_output(n, a)
            body.append(f"    {n}_c = relu_into({arg(a['args'][0])}, {out}{f', o_{m}[lo:hi]' if m else ''})  # relu")
        elif op in _COMPARES and a["dtype"].name == "bool" and _compare_ok(graph, a):
            args = [arg(x) if isinstance(x, V) else _literal(x, env) for x in a["args"]]
            out = target(n, a, dying)
            body.append(f"    {n}_c = {_COMPARES[op]}({', '.join(args)}, out={out})  # {op}")
        elif _where_zero(graph, a) is not None:
            kept, v = _where_zero(graph, a)
            out = target(n, a, dying)
            c = a["args"][0]
            # a mask read by this member alone, made by this program (another group's output,
            # or an array a statement made afresh): its memory is free for the int8 mask
            spare = c not in mset and c not in keep and set(graph.users(c)) == {n} and \
                (graph[c].get("group") is not None or c in temps)
            spare = ", True" if spare else ""
            body.append(f"    {n}_c = where_zero({arg(c)}, {kept}, {arg(v)}, {out}{spare})  # where")
        elif _ufunc_ok(graph, a):
            args = [arg(x) if isinstance(x, V) else _literal(x, env) for x in a["args"]]
            if op == "rsub":
                args = args[::-1]
            out = target(n, a, dying)
            body.append(f"    {n}_c = {_UFUNCS[op]}({', '.join(args)}, out={out})  # {op}")
        else:
            body.append("    " + _call(f"{n}_c", a, env, arg))
            copy_out = True
        if copy_out and n in outs:
            body.append(f"    o_{n}[lo:hi] = {n}_c")
        for r in dying:
            k = slot_of[r]
            free.setdefault(slots[k], []).append(k)
    for k, (rowshape, dt) in enumerate(slots):
        cap = step * int(np.prod(rowshape, dtype=np.int64))
        alloc.append(f"    b{k} = scratch({scr}, {k}, hi - lo, {rowshape!r}, np.{dt}, {cap})")
    body[1:1] = alloc
    env["scratch"] = scratch
    env["relu_into"] = relu_into
    env["where_zero"] = where_zero
    env["row_sum"] = row_sum
    env["col_sum"] = col_sum
    env["softmax_rows"] = softmax_rows
    env["scatter_into"] = scatter_into
    env["log_softmax_rows"] = log_softmax_rows
    env["logsumexp_rows"] = logsumexp_rows
    src = "\n".join(body) + "\n"
    exec(compile(src, f"<tracegrad:{fname}>", "exec"), env)
    env[fname].source = src
    env.setdefault("GROUP_SOURCES", []).append(src)
    if outer is not None:
        symbolic.current().bound = outer      # the lines below go into the function being written
    lines = [f"# fused group {gid}: {', '.join(graph[n]['op'] for n in members)} in chunks of {step} rows"]
    for o in outs:
        a = graph[o]
        shape, big, donor, temp = placed[o]
        if big and temp is None:
            pool = f"OUTPUTS_{next(_ids)}"
            env[pool] = []
            fresh = f"recycled({pool}, {shape!r}, np.{a['dtype'].np.name})"
        if temp is not None:
            lines.append(f"{o} = {temp}  # over {temp}, a temporary read here for the last time")
        elif donor is not None:
            lines.append(f"{o} = {donor} if donate else {fresh}  # over {donor}: read here for the last time")
        elif big:
            lines.append(f"{o} = {fresh}")
        else:
            lines.append(f"{o} = np.empty({shape!r}, np.{a['dtype'].np.name})")
    serial = ", serial=True" if env.get("SERIAL") else ""
    bufsize = any(_broadcast_row(graph, graph[n]) > BUFSIZE_ROW for n in members)
    if not bufsize:
        serial += ", bufsize=False"
    if env.get("SERIAL") and not symbolic.is_sym(nchunks) and nchunks == 1 and not bufsize:
        lines.append(f"{fname}(0, {rows}, {', '.join(ext + outs)})  # one chunk, on this thread")
    else:
        lines.append(f"run_chunks({fname}, {rows}, {step}, ({', '.join(ext + outs)}"
                     f"{',' if len(ext + outs) == 1 else ''}){serial})")
    for o in cols:
        if symbolic.is_sym(nchunks) and graph[o]["dtype"].name in _REDUCING_FLOATS:
            # one chunk or more, as this call's rows come
            lines.append(f"{o} = np.add({o}[0], 0.0) if {o}.shape[0] == 1 else np.asarray({o}.sum(0))")
        elif nchunks == 1 and graph[o]["dtype"].name in _REDUCING_FLOATS:
            # the sum over one partial sum: 0.0 plus it (-0.0 becomes 0.0, as there)
            lines.append(f"{o} = np.add({o}[0], 0.0)  # the one chunk's sum")
        else:
            lines.append(f"{o} = np.asarray({o}.sum(0))  # partial sums of the chunks, in order")
    return outs, ext, lines


# -- tiny graphs: every value one element, run on scalars ---------------------------------------
#
# Each value is a scalar of its own dtype: a Python float for float64 (the same IEEE double
# arithmetic numpy does), a numpy float32 scalar for float32 (numpy's float32 arithmetic
# and ufunc loops, about 7x cheaper than on a [1]-shaped array), so every op rounds as the
# op table's kernel does. Python's own + - * / on float32 values would compute in double
# and never round to float32 (exp(100) * 1e-30 would be 2.7e13, not inf).

# ops written as Python expressions: exact IEEE operations on either kind of scalar
_SCALAR = {"add": "{0} + {1}", "sub": "{0} - {1}", "rsub": "{1} - {0}", "mul": "{0} * {1}", "div": "{0} / {1}",
           "neg": "-{0}", "abs": "abs({0})", "reciprocal": "1.0 / {0}", "gt": "{0} > {1}", "lt": "{0} < {1}",
           "ge": "{0} >= {1}", "le": "{0} <= {1}", "where": "({1} if {0} else {2})",
           # a sum or mean of one element is that element plus the reduction's +0.0 start (-0.0 -> 0.0)
           "sum": "{0} + 0.0", "mean": "{0} + 0.0"}
# ops whose kernel is this numpy ufunc: called on the scalar (the same loop as on an array)
_SCALAR_UFUNC = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
                 "sqrt": "sqrt", "log1p": "log1p", "expm1": "expm1"}
_SCALAR_SAME = frozenset({"reshape", "expand", "squeeze", "unsqueeze", "clone", "amax", "amin", "permute",
                          "detach"})
_SCALAR_DTYPES = frozenset({"float32", "float64", "bool"})


def scalar_ok(graph):
    """Whether every value of graph has one element, a float32, float64 or bool dtype, and
    every op a scalar form above."""
    for n in graph.nodes():
        a = graph[n]
        if isinstance(a["dtype"], (list, tuple)) or a["dtype"].name not in _SCALAR_DTYPES:
            return False
        if symbolic.has_sym(a["shape"]) or int(np.prod(a["shape"], dtype=np.int64)) != 1:
            return False
        op = a["op"]
        if op == "input":
            continue
        if op == "full":
            if not isinstance(a["params"].get("value"), (int, float)):
                return False
            continue
        if op == "convert":
            continue
        if op not in _SCALAR and op not in _SCALAR_SAME and op not in _SCALAR_UFUNC:
            return False
        if op in ("sum", "mean") and a["dtype"].name == "bool":
            return False
        if any(not isinstance(x, (V, int, float)) for x in a["args"]):
            return False
    return len(graph) > 0


def _as_float(x):
    """A constant as a Python float (bools stay): int's and float's own conversions, so a
    user's subclass is read by its value, not by its methods."""
    if isinstance(x, bool):
        return x
    return int.__float__(x) if isinstance(x, int) else float.__float__(x)


def _scalar_kind(dt):
    return {"float64": "float", "float32": "np.float32", "bool": "bool"}[dt.name]


def generate_scalar(graph, name, fallback):
    """Scalar source for a graph of one-element values; numpy's result dtypes and shapes
    at the end. Arithmetic errors (x / 0 and sqrt(-1) on Python floats) go to `fallback`,
    the numpy function, for numpy's inf and nan."""
    env = {"__name__": "tracegrad.codegen.generated", "np": np, "_m": math, "inf": math.inf, "nan": math.nan,
           "FALLBACK": fallback}
    params = ", ".join(graph.inputs)
    lines = [f"def {name}({params}):", "    try:"]
    for x in graph.inputs:
        a = graph[x]
        if a["dtype"].name == "float64":
            lines.append(f"        v_{x} = {x}.item()")
        else:
            lines.append(f"        v_{x} = {x}[{(0,) * len(a['shape'])!r}]")
    for n in graph.nodes():
        a = graph[n]
        op = a["op"]
        if op == "input":
            continue
        args = [f"v_{x}" if isinstance(x, V) else _literal(_as_float(x), env) for x in a["args"]]
        kind = _scalar_kind(a["dtype"])
        if op == "full":                          # a seed of one, in a joint forward+backward
            value = _as_float(a["params"]["value"])
            rhs = _literal(np.array(value, np.float32)[()] if kind == "np.float32" else
                           value if kind == "float" else bool(value), env)
        elif op == "convert":
            rhs = f"{kind}({args[0]})"
        elif op in _SCALAR_SAME:
            rhs = args[0]
        elif op in _SCALAR_UFUNC:
            rhs = f"np.{_SCALAR_UFUNC[op]}({args[0]})"
            if kind == "float":
                rhs = f"float({rhs})"
        else:
            rhs = _SCALAR[op].format(*args)
            if op == "where" and any(not isinstance(x, V) for x in a["args"][1:]):
                rhs = f"{kind}{rhs}"              # a literal branch: a scalar of the value's dtype
        lines.append(f"        v_{n} = {rhs}  # {op}: {_comment(a)}")
    outs = []
    ins = set(graph.inputs)
    for o in graph.outputs:
        if o is None:
            outs.append("None")
        elif o in ins:
            outs.append(str(o))
        else:
            a = graph[o]
            dt = f"np.{a['dtype'].np.name}"
            outs.append(f"np.array(v_{o}, {dt})" if a["shape"] == () else
                        f"np.full({tuple(a['shape'])!r}, v_{o}, {dt})")
    lines.append("    except (ArithmeticError, ValueError, AttributeError, TypeError):")
    lines.append(f"        return FALLBACK({params})")
    lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    return "\n".join(lines) + "\n", env


def compile_graph(graph, name=None, donors=()):
    """exec the generated source; the function carries `.source` and `.donated` (the
    inputs it writes over when called with donate=True; see generate)."""
    fn = _compile_numpy(graph, name, donors)
    if scalar_ok(graph):
        src, env = generate_scalar(graph, (name or graph.name) + "_scalar", fn)
        exec(compile(src, f"<tracegrad:{graph.name}_scalar>", "exec"), env)
        sfn = env[(name or graph.name) + "_scalar"]
        sfn.source = src + "\n" + fn.source
        sfn.donated = ()
        return sfn
    return fn


def _compile_numpy(graph, name=None, donors=()):
    src, env = generate(graph, name, donors)
    code = compile(src, f"<tracegrad:{graph.name}>", "exec")
    exec(code, env)
    fn = [v for k, v in env.items() if callable(v) and getattr(v, "__code__", None) is not None
          and v.__code__.co_filename.startswith("<tracegrad:")][-1]
    fn.source = src + "".join("\n" + g for g in env.get("GROUP_SOURCES", ()))
    fn.donated = tuple(env["DONATED"])
    return fn


def interpret_graph(graph):
    """A runner for graphs too big to be worth generating source for: one closure call
    per op, values freed at last use (same contract as compile_graph's function)."""
    order = graph.nodes()
    slot = {n: i for i, n in enumerate(order)}
    last_use = {}
    for i, n in enumerate(order):
        for r in refs(graph[n]["args"]):
            last_use[r] = i
    keep = set(o for o in graph.outputs if o is not None)
    steps = []
    for i, n in enumerate(order):
        a = graph[n]
        if a["op"] == "input":
            continue
        args = tuple((True, slot[x]) if isinstance(x, V) else (False, x) for x in a["args"])
        free = tuple(slot[v] for v in refs(a["args"]) if last_use.get(v) == i and v not in keep)
        if a["op"] == "proj":
            steps.append((None, args, a["params"]["index"], slot[n], free))
        else:
            steps.append((a["prim"].impl, args, a["params"], slot[n], free))
    in_slots = [slot[n] for n in graph.inputs]
    out_slots = [None if o is None else slot[o] for o in graph.outputs]
    size = len(order)

    def run(*inputs):
        env = [None] * size
        for s, v in zip(in_slots, inputs):
            env[s] = v
        for impl, args, params, out, free in steps:
            vals = [env[x] if is_ref else x for is_ref, x in args]
            env[out] = vals[0][params] if impl is None else impl(*vals, **params)
            for f in free:
                env[f] = None
        return tuple(None if s is None else env[s] for s in out_slots)
    run.source = None
    return run

"""The memory traffic of a lowered Triton program, and its kernels compiled for a GPU target.

`traffic(prog)` counts the bytes each step of a TritonProgram's launch plan moves against the
least the program needs (its inputs read once, its outputs written once): for a memory-bound
GPU program the ratio predicts its speed. A kernel reads each value it loads (a broadcast view
costs its base's bytes, views of one value the sum of theirs up to the value's bytes; a row
reduction that loops over blocks reads its inputs once per pass)
and writes each value it stores; a glue copy (cat, flip, gather, ...) writes its value and reads
at most as much of each argument; an atomic add reads and writes its target (a scatter's every
index element, a row kernel's column sums once per program, after zeroing the output).

`compile_kernel` compiles one kernel with the real Triton compiler for cuda sm_<arch> (no GPU
needed) and reads its registers and spills from the cubin; `compile_all` does that for distinct
kernels in worker processes. explain(..., backend="triton") and benchmarks/triton_traffic.py
report both; tests/test_triton_sm90.py holds every emitted kernel to them."""
import multiprocessing as mp
import os
import pickle
import re
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..ir.graph import refs
from . import triton_gpu as T

# tracegrad dtype name -> Triton signature type
SIG = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
       "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


def _nbytes(g, v):
    a = g[v]
    return int(np.prod(a["shape"], dtype=np.int64)) * a["dtype"].itemsize


class Traffic:
    """steps: [(step, bytes moved)] in launch order (a kernel's name or a glue copy's value);
    moved: their sum; least: the program's minimum bytes; ratio: moved / least."""

    def __init__(self, steps, least):
        self.steps = steps
        self.moved = sum(b for _, b in steps)
        self.least = least

    @property
    def ratio(self):
        return self.moved / self.least if self.least else float("nan")

    def __iter__(self):                # moved, least = traffic(prog)
        return iter((self.moved, self.least))


def traffic(prog):
    """The Traffic of a TritonProgram's launch plan."""
    g = prog.graph
    view_of = {}
    for u in prog.units:
        if u.kind == "glue":
            a = g[u.root]
            if a["op"] == "proj" or T._glue_of(a).view:
                xs = list(refs(a["args"]))
                if xs:
                    view_of[u.root] = xs[0]

    def read_bytes(x):
        b, base = _nbytes(g, x), x
        while base in view_of:
            base = view_of[base]
        return min(b, _nbytes(g, base)), base

    steps = []
    for u in prog.units:
        if u.kind == "glue":
            if u.root in view_of or g[u.root]["op"] == "proj":
                continue
            # a copy writes its value and reads each argument, at most as much of it as it
            # writes (a gather reads the indexed elements, not the whole source)
            out = _nbytes(g, u.root) if not g[u.root]["prim"].multi else 0
            moved = out + sum(min(read_bytes(x)[0], out or read_bytes(x)[0]) for x in refs(g[u.root]["args"]))
            steps.append((f"{u.root} = {g[u.root]['op']}(...)", moved))
            continue
        moved = 0
        passes = 1
        if u.kind == "reduce" and not u.whole:
            passes = max(1, u.source.count("for start in range("))
        # views of one value read the elements they hold: a strided view a part, several
        # views (a window's offsets) their sum, all of them together at most the value once
        per_base = {}
        for x in u.reads:
            b, base = read_bytes(x)
            per_base[base] = min(per_base.get(base, 0) + b, _nbytes(g, base))
        moved += passes * sum(per_base.values())
        moved += sum(_nbytes(g, w) for w in u.writes)
        if u.kind == "scatter":
            # atomic adds read and write each target element they touch; an index kernel over
            # any key also reads each element's position, which the launcher makes (a range
            # of out's size, indexed)
            a = g[u.root]
            n = u.numel
            moved += 2 * n * a["dtype"].itemsize
            if any(what[0] == "pos" for _, what in u.params):
                moved += 8 * n + 8 * _nbytes(g, u.root) // a["dtype"].itemsize + 16 * n
        for w in getattr(u, "col_stages", ()):
            # column sums: the output zeroed, then each program atomically adds (reads and
            # writes) its partial sums
            programs = -(-u.M // u.rows)
            moved += _nbytes(g, w) + 2 * programs * _nbytes(g, w)
        steps.append((u.name, moved))
    ins = set()
    for u in prog.units:
        for x in (u.reads if u.kind != "glue" else refs(g[u.root]["args"])):
            base = x
            while base in view_of:
                base = view_of[base]
            if g[base]["op"] == "input":
                ins.add(base)
    least = sum(_nbytes(g, v) for v in ins)
    least += sum(_nbytes(g, o) for o in set(o for o in g.outputs if o is not None and g[o]["op"] != "input"))
    return Traffic(steps, least)


# -- compiling for a GPU target --------------------------------------------------------------------

def _contiguous_strides(shape):
    out, inner = [], 1
    for n in reversed(tuple(shape)):
        out.append(inner)
        inner *= n
    return out[::-1]


def _stride_value(g, what):
    """The stride a launch passes for a stride parameter when every value is contiguous."""
    shape = tuple(g[what[1]]["shape"])
    if what[0] == "stride2" and len(shape) == 1:
        shape = (1,) + shape if what[3] == "a" else shape + (1,)
    return _contiguous_strides(shape)[what[2]]


def kernel_specs(prog):
    """One (name, source, signature, constexprs, kind, attrs) per kernel of a TritonProgram,
    specialised as a launch on a GPU specialises it when every value is contiguous: pointers
    16-byte aligned, strides of 1 constants and strides that are multiples of 16 marked so
    (what lets the compiler emit vector loads), contiguous-input flags true."""
    g = prog.graph
    out = []
    for u in prog.kernels:
        sig, attrs, fixed = {}, {}, {}
        for i, (pname, what) in enumerate(u.params):
            if what[0] in ("ptr", "out"):
                sig[pname] = "*" + SIG[g[what[1]]["dtype"].name]
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif what[0] == "pos":
                sig[pname] = "*i64"
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif what[0] == "contig":
                sig[pname] = "constexpr"
                fixed[pname] = True
            else:
                sig[pname] = "i32"
                if what[0] in ("stride", "stride2"):
                    st = _stride_value(g, what)
                    if st == 1:
                        sig[pname] = "constexpr"
                        fixed[pname] = 1
                    elif st % 16 == 0:
                        attrs[(i,)] = [["tt.divisibility", 16]]
        if u.kind == "reduce" and u.whole:
            consts = {"BLOCK_SIZE": u.block}
        elif u.kind == "scatter":
            consts = {"BLOCK_SIZE": 256}
        else:
            consts = dict(T.configs(u)[0])
        for c in consts:
            sig[c] = "constexpr"
        consts.update(fixed)
        out.append((u.name, prog.source, sig, consts, u.kind, attrs))
    return out


def _tool(name):
    import triton  # lazy: triton is optional
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def compile_kernel(spec, arch=90, options=None):
    """Compile one kernel for cuda sm_<arch> with the backend's compiler options (or
    `options`); returns a dict: name, kind, regs, spill bytes (local memory), shared, ptx mma
    (whether the PTX holds MMA instructions), fma (fused multiply-adds in the PTX), loads
    (global loads in the PTX by width), error."""
    name, source, sig, consts, kind, attrs = spec
    os.environ.pop("TRITON_INTERPRET", None)
    import triton  # lazy: triton is optional
    from triton.backends.compiler import GPUTarget  # lazy: triton is optional
    from triton.compiler import ASTSource  # lazy: triton is optional
    res = {"name": name, "kind": kind, "arch": arch}
    try:
        mod = T._load(source)
        fn = getattr(mod, name)
        c = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", arch, 32),
                            options=dict(T.KERNEL_OPTIONS if options is None else options))
        ptx = c.asm["ptx"]
        res["mma"] = bool(re.search(r"\b(w?gmma|mma)\.", ptx))
        res["fma"] = len(re.findall(r"\bfma\.rn", ptx))
        # approximate float32 division and roots (IEEE ones are div.rn / sqrt.rn)
        res["approx"] = sorted(set(re.findall(r"\b(div\.full\.f32|r?sqrt\.approx[\w.]*)", ptx)))
        # a float `%` (frem) becomes fma(-trunc(x / y), y, x): a round-to-zero convert marks it
        res["frem"] = len(re.findall(r"\bcvt\.rzi\.f(?:32|64)\.f(?:32|64)", ptx))
        # global loads by width: 128-bit and 64-bit vectors, and single elements
        res["loads"] = {"v4": len(re.findall(r"ld\.global[\w.]*\.v4", ptx)),
                        "v2": len(re.findall(r"ld\.global[\w.]*\.v2", ptx)),
                        "scalar": len(re.findall(r"ld\.global(?![\w.]*\.v[24])[\w.]*\s", ptx))}
        res["dot"] = "tl.dot(" in source.split(f"def {name}(")[1].split("@triton.jit")[0]
        res["shared"] = c.metadata.shared
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(c.asm["cubin"])
            f.flush()
            r = subprocess.run([_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True)
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", r.stdout)
        res["regs"] = int(m.group(1)) if m else None
        res["spill"] = int(m.group(2)) + int(m.group(3)) if m else None
    except Exception as e:       # reported, never swallowed: callers fail or show it
        res["error"] = f"{type(e).__name__}: {str(e)[-1500:] or repr(e)}"
    return res


def _init_worker():
    os.environ.pop("TRITON_INTERPRET", None)
    warnings.simplefilter("ignore")


def _key(s):
    body = s[1].split(f"def {s[0]}(")[1].split("@triton.jit")[0]
    return body, tuple(sorted(s[2].items())), tuple(sorted(s[3].items())), repr(sorted(s[5].items()))


def _compile_distinct(specs, arch, workers, options=None):
    if workers <= 1 or len(specs) <= 1:
        return [compile_kernel(s, arch, options) for s in specs]
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                             initializer=_init_worker) as ex:
        return list(ex.map(compile_kernel, specs, [arch] * len(specs), [options] * len(specs)))


def _serve():
    """A compiling process: reads (specs, arch, workers, options) pickled on stdin, writes the results."""
    _init_worker()
    specs, arch, workers, options = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(_compile_distinct(specs, arch, workers, options)))


def compile_all(specs, arch=90, workers=2, options=None):
    """compile_kernel over distinct kernels (by source text and name). Unless it is one
    worker in a process that is not interpreting, in a fresh Python process (which starts
    `workers` processes of its own): triton imported for its interpreter compiles nothing, and
    worker processes started from here would run an unguarded __main__ script again."""
    distinct = {}
    for s in specs:
        distinct.setdefault(_key(s), s)
    todo = list(distinct.values())
    if workers <= 1 and os.environ.get("TRITON_INTERPRET") != "1":
        results = _compile_distinct(todo, arch, 1, options)
    else:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                "from tracegrad.codegen.triton_traffic import _serve; _serve()")
        r = subprocess.run([sys.executable, "-c", code], input=pickle.dumps((todo, arch, workers, options)),
                           capture_output=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"compiling {len(todo)} Triton kernels for sm_{arch} failed: "
                               f"{r.stderr.decode(errors='replace')[-2000:]}")
        results = pickle.loads(r.stdout)
    by_key = dict(zip(distinct.keys(), results))
    return [by_key[_key(s)] for s in specs]


def report_lines(prog, arch=None, workers=1):
    """explain's lines for one program: each kernel's bytes moved (and, with arch, its
    registers and spills compiled for sm_<arch>), the program's minimum and the ratio."""
    t = traffic(prog)
    compiled = {}
    if arch is not None:
        specs = kernel_specs(prog)
        compiled = {s[0]: r for s, r in zip(specs, compile_all(specs, arch, workers))}
    lines = []
    for step, b in t.steps:
        line = f"{step:<48} {b:>14,} bytes"
        r = compiled.get(step)
        if r is not None:
            line += (f"  error: {r['error']}" if "error" in r else
                     f"  {r['regs']} registers, {r['spill']} bytes spilled (sm_{arch})")
        lines.append(line)
    lines.append(f"{'moved':<48} {t.moved:>14,} bytes")
    lines.append(f"{'minimum (inputs read once, outputs written once)':<48} {t.least:>14,} bytes")
    lines.append(f"{'ratio':<48} {t.ratio:>14.2f}x")
    return lines

"""Every kernel the Triton backend emits for a set of representative programs, compiled by
the real Triton compiler for a GPU target (no GPU needed), with the bytes each program's
kernels move against the least it needs.

    python benchmarks/triton_traffic.py              # the table, sm_90
    python benchmarks/triton_traffic.py --arch 80    # for sm_80
    python benchmarks/triton_traffic.py --no-compile # traffic only (no PTX)

Per program (forward or backward of a case): kernels, bytes moved by kernels and copies,
the minimum (inputs read once, outputs written once), their ratio, the most registers a
kernel uses and the kernels that spill. Bytes come from the launch plan: a kernel reads
each value it loads (a broadcast view costs its base's bytes; a row reduction that loops
over blocks reads its inputs once per pass) and writes each value it stores; a glue copy
(cat, flip, gather, ...) writes its value and reads at most as much of each argument; an atomic
add reads and writes its target (a scatter's every index element, a row kernel's column sums
once per program, after zeroing the output). Registers and spills come from the cubin
(cuobjdump -res-usage of triton's own binary). tests/test_triton_sm90.py runs the same
cases in CI.
"""
import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# tracegrad dtype name -> Triton signature type
SIG = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
       "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


# -- the cases -------------------------------------------------------------------------------------

def cases():
    """(name, fn, args): fn(tg, *tensors) -> a tensor; float tensors of args take gradients."""
    import tracegrad as tg
    F = tg.nn.functional
    r = np.random.default_rng(0)

    def t(shape, dtype=None, grad=True):
        a = tg.tensor(r.standard_normal(shape).astype(np.float32), dtype=dtype)
        return a.requires_grad_(grad)

    labels = tg.tensor(r.integers(0, 1000, 64))

    def mlp(m, x, w1, b1, w2, b2, y):
        h = m.nn.functional.relu(x @ w1 + b1)
        return m.nn.functional.cross_entropy(h @ w2 + b2, y)

    return [
        ("elementwise chain", lambda m, x, w: (m.tanh(x * w) + x).sigmoid() * 2, [t((256, 512)), t((512,))]),
        ("gelu", lambda m, x: m.nn.functional.gelu(x), [t((256, 512))]),
        ("three reductions", lambda m, x: x.sum(1) + x.amax(1) + x.var(1), [t((256, 512))]),
        ("softmax", lambda m, x: m.softmax(x, 1), [t((64, 1000))]),
        ("log_softmax", lambda m, x: m.log_softmax(x, 1), [t((64, 1000))]),
        ("cross_entropy", lambda m, x, y: m.nn.functional.cross_entropy(x, y), [t((64, 1000)), labels]),
        ("layer_norm", lambda m, x, w, b: m.nn.functional.layer_norm(x, (512,), w, b),
         [t((256, 512)), t((512,)), t((512,))]),
        ("matmul epilogue", lambda m, a, w, b: m.relu(a @ w + b), [t((128, 256)), t((256, 64)), t((64,))]),
        ("conv2d + max_pool2d", lambda m, x, w: m.nn.functional.max_pool2d(m.nn.functional.conv2d(x, w, padding=1), 2),
         [t((8, 3, 16, 16)), t((8, 3, 3, 3))]),
        ("MLP training step", mlp, [t((64, 32)), t((32, 64)), t((64,)), t((64, 10)), t((10,)),
                                    tg.tensor(r.integers(0, 10, 64))]),
        ("softmax float16", lambda m, x: m.softmax(x, 1), [t((64, 1000), dtype=tg.float16)]),
        ("matmul float16", lambda m, a, w: (a @ w).relu(), [t((128, 256), tg.float16), t((256, 64), tg.float16)]),
        ("layer_norm bfloat16", lambda m, x, w, b: m.nn.functional.layer_norm(x, (512,), w, b),
         [t((256, 512), tg.bfloat16), t((512,), tg.bfloat16), t((512,), tg.bfloat16)]),
        ("matmul bfloat16", lambda m, a, w: (a @ w) * 2, [t((128, 256), tg.bfloat16), t((256, 64), tg.bfloat16)]),
        ("indexing", lambda m, x, i: x[i, i].exp().sum() + m.index_put(x, (i, i), x[i, 0] * 2, accumulate=True)[1:, 0],
         [t((256, 512)), tg.tensor(r.integers(0, 256, 1000))]),
    ]


def programs(fn, args):
    """[(label, TritonProgram)]: the forward and backward of fn compiled with backend="triton"
    (built only: nothing runs)."""
    import tracegrad as tg
    f = tg.compile(lambda *xs: fn(tg, *xs), backend="triton", fullgraph=True)
    p = f._compile(tuple(args), {})
    if isinstance(p, tuple):           # (program, the guards it holds under)
        p = p[0]
    out = [("forward", p.fwd_fn.program)]
    if p.bwd_fn is not None:
        out.append(("backward", p.bwd_fn.program))
    return out


# -- traffic ---------------------------------------------------------------------------------------

def _nbytes(g, v):
    a = g[v]
    return int(np.prod(a["shape"], dtype=np.int64)) * a["dtype"].itemsize


def traffic(prog):
    """(bytes moved, minimum bytes) of a TritonProgram's launch plan."""
    from tracegrad.codegen import triton_gpu as T
    g = prog.graph
    view_of = {}
    for u in prog.units:
        if u.kind == "glue":
            a = g[u.root]
            if a["op"] == "proj" or T._glue_of(a).view:
                xs = [x for x in T.refs(a["args"])]
                if xs:
                    view_of[u.root] = xs[0]

    def read_bytes(x):
        b, base = _nbytes(g, x), x
        while base in view_of:
            base = view_of[base]
        return min(b, _nbytes(g, base)), base

    moved = 0
    for u in prog.units:
        if u.kind == "glue":
            if u.root in view_of or g[u.root]["op"] == "proj":
                continue
            # a copy writes its value and reads each argument, at most as much of it as it
            # writes (a gather reads the indexed elements, not the whole source)
            out = _nbytes(g, u.root) if not g[u.root]["prim"].multi else 0
            moved += out + sum(min(read_bytes(x)[0], out or read_bytes(x)[0]) for x in T.refs(g[u.root]["args"]))
            continue
        passes = 1
        if u.kind == "reduce" and not u.whole:
            passes = max(1, u.source.count("for start in range("))
        seen = set()
        for x in u.reads:
            b, base = read_bytes(x)
            if base not in seen:
                seen.add(base)
                moved += b * passes
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
    ins = set()
    for u in prog.units:
        for x in (u.reads if u.kind != "glue" else T.refs(g[u.root]["args"])):
            base = x
            while base in view_of:
                base = view_of[base]
            if g[base]["op"] == "input":
                ins.add(base)
    least = sum(_nbytes(g, v) for v in ins)
    least += sum(_nbytes(g, o) for o in set(o for o in g.outputs if o is not None and g[o]["op"] != "input"))
    return moved, least


# -- compiling for a GPU target --------------------------------------------------------------------

def kernel_specs(prog):
    """One (name, source, signature, constexprs, kind) per kernel of a TritonProgram."""
    from tracegrad.codegen import triton_gpu as T
    g = prog.graph
    out = []
    for u in prog.kernels:
        sig = {}
        for pname, what in u.params:
            if what[0] in ("ptr", "out"):
                sig[pname] = "*" + SIG[g[what[1]]["dtype"].name]
            elif what[0] == "pos":
                sig[pname] = "*i64"
            else:
                sig[pname] = "i32"
        if u.kind == "reduce" and u.whole:
            consts = {"BLOCK_SIZE": u.block}
        elif u.kind == "scatter":
            consts = {"BLOCK_SIZE": 256}
        else:
            consts = dict(T.CONFIGS[u.kind][0])
        for c in consts:
            sig[c] = "constexpr"
        out.append((u.name, prog.source, sig, consts, u.kind))
    return out


def _tool(name):
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def compile_kernel(spec, arch=90):
    """Compile one kernel for cuda sm_<arch>; returns a dict: name, kind, regs, spill bytes
    (local memory), shared, ptx mma (whether the PTX holds MMA instructions), error."""
    name, source, sig, consts, kind = spec
    os.environ.pop("TRITON_INTERPRET", None)
    import tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from tracegrad.codegen import triton_gpu as T
    res = {"name": name, "kind": kind, "arch": arch}
    try:
        mod = T._load(source)
        fn = getattr(mod, name)
        c = triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", arch, 32))
        ptx = c.asm["ptx"]
        res["mma"] = bool(re.search(r"\b(w?gmma|mma)\.", ptx))
        res["dot"] = "tl.dot(" in source.split(f"def {name}(")[1].split("@triton.jit")[0]
        res["shared"] = c.metadata.shared
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(c.asm["cubin"])
            f.flush()
            r = subprocess.run([_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True)
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", r.stdout)
        res["regs"] = int(m.group(1)) if m else None
        res["spill"] = int(m.group(2)) + int(m.group(3)) if m else None
    except Exception as e:       # reported, never swallowed: the test fails on it
        res["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    return res


def _init_worker():
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import warnings
    warnings.simplefilter("ignore")


def compile_all(specs, arch=90, workers=2):
    """compile_kernel over distinct kernels (by source text and name), in worker processes."""
    distinct = {}
    for s in specs:
        body = s[1].split(f"def {s[0]}(")[1].split("@triton.jit")[0]
        distinct.setdefault((body, tuple(sorted(s[2].items())), tuple(sorted(s[3].items()))), s)
    import multiprocessing as mp
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                             initializer=_init_worker) as ex:
        results = list(ex.map(compile_kernel, distinct.values(), [arch] * len(distinct)))
    by_key = dict(zip(distinct.keys(), results))
    out = []
    for s in specs:
        body = s[1].split(f"def {s[0]}(")[1].split("@triton.jit")[0]
        out.append(by_key[(body, tuple(sorted(s[2].items())), tuple(sorted(s[3].items())))])
    return out


def report(arch=90, compile_kernels=True, workers=2):
    """Rows: (case, program, kernels, moved, least, ratio, max regs, spilling kernels, errors)."""
    os.environ.pop("TRITON_INTERPRET", None)
    rows, specs, where = [], [], []
    for name, fn, args in cases():
        for label, prog in programs(fn, args):
            moved, least = traffic(prog)
            rows.append([name, label, len(prog.kernels), moved, least])
            for s in kernel_specs(prog):
                specs.append(s)
                where.append(len(rows) - 1)
    results = compile_all(specs, arch, workers) if compile_kernels else []
    per_row = [[] for _ in rows]
    for i, res in zip(where, results):
        per_row[i].append(res)
    table = []
    for row, res in zip(rows, per_row):
        regs = max((r.get("regs") or 0 for r in res), default=None)
        spills = [r["name"] for r in res if r.get("spill")]
        errors = [f"{r['name']}: {r['error']}" for r in res if "error" in r]
        table.append(row + [row[3] / row[4] if row[4] else float("nan"), regs, spills, errors])
    return table, results


def main():
    from tracegrad._cli import HelpFormatter
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    ap.add_argument("--arch", type=int, default=90, help="the CUDA compute capability to compile for")
    ap.add_argument("--no-compile", action="store_true", help="count bytes only, no PTX, registers or spills")
    ap.add_argument("--workers", type=int, default=2, help="processes compiling kernels")
    a = ap.parse_args()
    table, _ = report(a.arch, not a.no_compile, a.workers)
    print(f"{'case':<22} {'program':<9} {'kernels':>7} {'bytes moved':>12} {'minimum':>10} {'ratio':>6} "
          f"{'regs':>5}  spills / errors")
    for case, label, k, moved, least, ratio, regs, spills, errors in table:
        print(f"{case:<22} {label:<9} {k:>7} {moved:>12,} {least:>10,} {ratio:>6.2f} {regs if regs else '-':>5}  "
              f"{', '.join(spills + errors)}")


if __name__ == "__main__":
    main()

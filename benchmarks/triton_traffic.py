"""Every kernel the Triton backend emits for a set of representative programs, compiled by
the real Triton compiler for a GPU target (no GPU needed), with the bytes each program's
kernels move against the least it needs.

    python benchmarks/triton_traffic.py              # the table, sm_90
    python benchmarks/triton_traffic.py --arch 80    # for sm_80
    python benchmarks/triton_traffic.py --no-compile # traffic only (no PTX)

Per program (forward or backward of a case): kernels, bytes moved by kernels and copies,
the minimum (inputs read once, outputs written once), their ratio, the most registers a
kernel uses and the kernels that spill. tracegrad/codegen/triton_traffic.py counts the bytes
from the launch plan and reads registers and spills from the cubin (cuobjdump -res-usage of
triton's own binary); explain(..., backend="triton") shows the same per kernel. tests/test_triton_sm90.py runs the same
cases in CI.
"""
import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tracegrad.codegen.triton_traffic import compile_all, kernel_specs, traffic  # noqa: E402


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

    def digits_cnn(m, x, c1, d1, c2, d2, w1, b1, w2, b2, y):
        """tracegrad.demo's DigitsCNN and its loss, on a batch of 64 8x8 images (which take no
        gradient, as in training)."""
        F_ = m.nn.functional
        h = F_.max_pool2d(F_.relu(F_.conv2d(x, c1, d1, padding=1)), 2)
        h = F_.max_pool2d(F_.relu(F_.conv2d(h, c2, d2, padding=1)), 2)
        h = F_.relu(h.reshape(h.shape[0], -1) @ w1 + b1)
        return F_.cross_entropy(h @ w2 + b2, y)

    return [
        ("elementwise chain", lambda m, x, w: (m.tanh(x * w) + x).sigmoid() * 2, [t((256, 512)), t((512,))]),
        ("gelu", lambda m, x: m.nn.functional.gelu(x), [t((256, 512))]),
        ("three reductions", lambda m, x: x.sum(1) + x.amax(1) + x.var(1), [t((256, 512))]),
        ("whole-tensor reductions", lambda m, x: x.sum() + x.amax(), [t((1024, 1024))]),
        ("softmax", lambda m, x: m.softmax(x, 1), [t((64, 1000))]),
        ("log_softmax", lambda m, x: m.log_softmax(x, 1), [t((64, 1000))]),
        ("cross_entropy", lambda m, x, y: m.nn.functional.cross_entropy(x, y), [t((64, 1000)), labels]),
        ("layer_norm", lambda m, x, w, b: m.nn.functional.layer_norm(x, (512,), w, b),
         [t((256, 512)), t((512,)), t((512,))]),
        ("matmul epilogue", lambda m, a, w, b: m.relu(a @ w + b), [t((128, 256)), t((256, 64)), t((64,))]),
        ("conv2d", lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, padding=1),
         [t((8, 3, 16, 16)), t((8, 3, 3, 3)), t((8,))]),
        ("conv2d + max_pool2d", lambda m, x, w: m.nn.functional.max_pool2d(m.nn.functional.conv2d(x, w, padding=1), 2),
         [t((8, 3, 16, 16)), t((8, 3, 3, 3))]),
        ("digits CNN", digits_cnn, [t((64, 1, 8, 8), grad=False), t((16, 1, 3, 3)), t((16,)), t((32, 16, 3, 3)), t((32,)),
                                    t((128, 64)), t((64,)), t((64, 10)), t((10,)),
                                    tg.tensor(r.integers(0, 10, 64))]),
        ("MLP training step", mlp, [t((64, 32)), t((32, 64)), t((64,)), t((64, 10)), t((10,)),
                                    tg.tensor(r.integers(0, 10, 64))]),
        ("softmax float16", lambda m, x: m.softmax(x, 1), [t((64, 1000), dtype=tg.float16)]),
        ("matmul float16", lambda m, a, w: (a @ w).relu(), [t((128, 256), tg.float16), t((256, 64), tg.float16)]),
        ("layer_norm bfloat16", lambda m, x, w, b: m.nn.functional.layer_norm(x, (512,), w, b),
         [t((256, 512), tg.bfloat16), t((512,), tg.bfloat16), t((512,), tg.bfloat16)]),
        ("conv2d + pool float16", lambda m, x, w, b: m.nn.functional.max_pool2d(
            m.nn.functional.conv2d(x, w, b, padding=1), 2),
         [t((8, 3, 16, 16), tg.float16), t((8, 3, 3, 3), tg.float16), t((8,), tg.float16)]),
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

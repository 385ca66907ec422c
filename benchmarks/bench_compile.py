"""@tracegrad.compile against torch eager, torch.compile (and JAX jit when installed), in one
process, interleaved, medians, float32; ratios to torch eager.

  W1 chain of 100 elementwise ops on shape [1], forward+backward (µs per op)
  W2 MLP 784-512-512-10 training step, batch 128, ReLU, cross-entropy, SGD
  W3 GELU (tanh form) forward+backward on 4,194,304 elements
  W4 LayerNorm forward+backward on (4096, 1024) with weight and bias
  W5 softmax + cross-entropy forward+backward on (4096, 1000)
  W6 Hessian-vector product of a 64-64-64-10 tanh MLP's loss, batch 32
  W7 first call (trace + compile + run) of the W2 step in a fresh process
  W8 third derivative of sum(tanh(x)**2), x of shape [1000]

W6 and W8 take derivatives of derivatives. torch.compile compiles the loss and leaves the
derivatives to eager autograd (its double backward raises); tracegrad.compile compiles
the whole function, autograd.grad calls included, into one program.

W3-W5 also run hand-fused numpy (chunked, threaded, written once by hand): the ceiling
for generated numpy code. Memory-bound rows report their fraction of the copy-bandwidth
roofline (inputs read once, gradients written once, at numpy's memcpy speed).

Run: python benchmarks/bench_compile.py [--repeat N] [--only W3,W4] [--torch-threads 1|2] [--out DIR]
Writes DIR/bench_compile.json and DIR/bench_compile.png (DIR defaults to benchmarks/out).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import tracegrad as tg  # noqa: E402
import tracegrad.nn as tnn  # noqa: E402
import tracegrad.nn.functional as TF  # noqa: E402

try:
    import jax  # noqa: F401
    HAVE_JAX = True
except ImportError:
    HAVE_JAX = False

torch.set_num_threads(2)
RNG = np.random.default_rng(0)


def progress(i, n, label):
    bar = "#" * int(30 * i / n)
    print(f"\r[{bar:<30}] {i}/{n} {label:<40}", end="", file=sys.stderr, flush=True)


def interleaved(fns, repeat, warmup=3):
    """Median seconds per call of each fn, run in turn so drift hits all alike."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def try_compile_torch(fn):
    try:
        c = torch.compile(fn)
        c()
        return c, None
    except Exception as e:           # torch.compile cannot do some workloads (double backward)
        return None, f"fails: {type(e).__name__}: {str(e).splitlines()[0][:100]}"


def copy_bandwidth():
    a = np.ones(16 << 20, np.float32)
    b = np.empty_like(a)
    ts = []
    for _ in range(10):
        t0 = time.perf_counter()
        np.copyto(b, a)
        ts.append(time.perf_counter() - t0)
    return 2 * a.nbytes / min(ts)


# -- workloads: each returns {contender: zero-arg callable}, a checker, and bytes moved ------

def w1():
    x0 = RNG.standard_normal(1).astype(np.float32)

    def chain(m, y):
        for _ in range(25):
            y = m.sin(y)
            y = y * 1.01
            y = y + 0.1
            y = m.tanh(y)
        return y.sum()

    xt = torch.tensor(x0, requires_grad=True)
    xg = tg.tensor(x0, requires_grad=True)
    cg = tg.compile(lambda x: chain(tg, x))

    def t_eager():
        xt.grad = None
        chain(torch, xt).backward()
        return xt.grad

    def tg_comp():
        xg.grad = None
        cg(xg).backward()
        return xg.grad
    tc = torch.compile(lambda x: chain(torch, x))

    def t_comp():
        xt.grad = None
        tc(xt).backward()
        return xt.grad
    return {"torch eager": t_eager, "torch.compile": t_comp, "tracegrad.compile": tg_comp}, None, None


def mlp_setup():
    x = RNG.standard_normal((128, 784)).astype(np.float32)
    y = RNG.integers(0, 10, 128)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                             torch.nn.ReLU(), torch.nn.Linear(512, 10))
    gm = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(), tnn.Linear(512, 10))
    with torch.no_grad(), tg.no_grad():
        for p, q in zip(tm.parameters(), gm.parameters()):
            q.copy_(tg.tensor(p.detach().numpy()))
    return x, y, tm, gm


def w2():
    x, y, tm, gm = mlp_setup()
    xt, yt = torch.tensor(x), torch.tensor(y)
    xg, yg = tg.tensor(x), tg.tensor(y)
    topt = torch.optim.SGD(tm.parameters(), lr=1e-3)
    gopt = tg.optim.SGD(gm.parameters(), lr=1e-3)
    tloss = lambda: torch.nn.functional.cross_entropy(tm(xt), yt)   # noqa: E731
    gloss = tg.compile(lambda x, y: TF.cross_entropy(gm(x), y))
    tcloss = torch.compile(lambda x, y: torch.nn.functional.cross_entropy(tm(x), y))

    def t_eager():
        topt.zero_grad()
        tloss().backward()
        topt.step()

    def t_comp():
        topt.zero_grad()
        tcloss(xt, yt).backward()
        topt.step()

    def g_comp():
        gopt.zero_grad()
        gloss(xg, yg).backward()
        gopt.step()
    return {"torch eager": t_eager, "torch.compile": t_comp, "tracegrad.compile": g_comp}, None, None


def gelu_tanh(m, x):
    return 0.5 * x * (1 + m.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def w3():
    n = 4194304
    x = RNG.standard_normal(n).astype(np.float32)
    g = RNG.standard_normal(n).astype(np.float32)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g)
    xg, gg = tg.tensor(x, requires_grad=True), tg.tensor(g)
    cg = tg.compile(lambda x: gelu_tanh(tg, x))
    tc = torch.compile(lambda x: gelu_tanh(torch, x))

    def t_eager():
        y = gelu_tanh(torch, xt)
        return y, torch.autograd.grad(y, xt, gt)[0]

    def t_comp():
        y = tc(xt)
        return y, torch.autograd.grad(y, xt, gt)[0]

    def g_comp():
        y = cg(xg)
        return y, tg.autograd.grad(y, xg, gg)[0]
    hand = HandGelu(x.size)
    return ({"torch eager": t_eager, "torch.compile": t_comp, "tracegrad.compile": g_comp,
             "hand-fused numpy": lambda: hand(x, g)}, (t_eager, g_comp, lambda: hand(x, g)), 4 * n * 4)


class HandGelu:
    """GELU-tanh forward and backward in one chunked, threaded pass (out= buffers)."""

    def __init__(self, n, chunk=1 << 18):
        from concurrent.futures import ThreadPoolExecutor
        self.pool = ThreadPoolExecutor(2)
        self.chunk = chunk
        self.y = np.empty(n, np.float32)
        self.dx = np.empty(n, np.float32)
        self.bufs = {}

    def part(self, x, g, lo, hi):
        import threading
        k = threading.get_ident()
        if k not in self.bufs:
            self.bufs[k] = [np.empty(self.chunk, np.float32) for _ in range(3)]
        a, b, c = (buf[:hi - lo] for buf in self.bufs[k])
        xc = x[lo:hi]
        np.multiply(xc, xc, out=a)
        np.multiply(a, 0.044715 * 0.7978845608028654, out=b)
        np.add(b, 0.7978845608028654, out=b)
        np.multiply(b, xc, out=b)                     # inner
        np.tanh(b, out=b)                             # t
        np.multiply(a, 3 * 0.044715 * 0.7978845608028654, out=a)
        np.add(a, 0.7978845608028654, out=a)          # d inner / dx
        np.add(b, 1, out=c)
        np.multiply(c, 0.5, out=c)                    # 0.5 (1 + t)
        np.multiply(c, xc, out=self.y[lo:hi])
        np.multiply(b, b, out=b)
        np.subtract(1, b, out=b)
        np.multiply(b, a, out=b)
        np.multiply(b, xc, out=b)
        np.multiply(b, 0.5, out=b)
        np.add(b, c, out=b)
        np.multiply(b, g[lo:hi], out=self.dx[lo:hi])

    def __call__(self, x, g):
        n = x.size
        list(self.pool.map(lambda lo: self.part(x, g, lo, min(lo + self.chunk, n)), range(0, n, self.chunk)))
        return self.y, self.dx


class HandChunks:
    """Shared frame of the hand-fused kernels: chunks of rows over a 2-thread pool,
    per-thread scratch buffers."""

    def __init__(self, rows, cols, chunk_bytes=1 << 20):
        import threading
        from concurrent.futures import ThreadPoolExecutor
        self.pool = ThreadPoolExecutor(2)
        self.step = max(1, chunk_bytes // (cols * 4))
        self.rows, self.cols = rows, cols
        self.local = threading.local()

    def bufs(self, k):
        b = getattr(self.local, "b", None)
        if b is None:
            b = self.local.b = [np.empty((self.step, self.cols), np.float32) for _ in range(k)]
        return b

    def run(self, fn):
        n, step = self.rows, self.step
        return list(self.pool.map(lambda lo: fn(lo, min(lo + step, n)), range(0, n, step)))


class HandLayerNorm(HandChunks):
    """LayerNorm forward and backward (x, w, b, g) -> (y, dx, dw, db), one chunked pass each."""

    def __call__(self, x, w, b, g):
        d = self.cols
        ones = np.ones(d, np.float32)
        y, dx = np.empty_like(x), np.empty_like(x)

        def part(lo, hi):
            xh, t = (a[:hi - lo] for a in self.bufs(2))
            xc, gc = x[lo:hi], g[lo:hi]
            mu = (xc @ ones)[:, None] / d
            np.subtract(xc, mu, out=xh)
            np.multiply(xh, xh, out=t)
            rstd = 1 / np.sqrt((t @ ones)[:, None] / d + 1e-5)
            np.multiply(xh, rstd, out=xh)                  # x hat
            np.multiply(xh, w, out=y[lo:hi])
            np.add(y[lo:hi], b, out=y[lo:hi])
            db = ones[:hi - lo] @ gc
            np.multiply(gc, xh, out=t)
            dw = ones[:hi - lo] @ t
            np.multiply(gc, w, out=t)                      # g w
            a = (t @ ones)[:, None] / d
            np.multiply(t, xh, out=dx[lo:hi])
            c = (dx[lo:hi] @ ones)[:, None] / d
            np.multiply(xh, c, out=xh)
            np.subtract(t, xh, out=t)
            np.subtract(t, a, out=t)
            np.multiply(t, rstd, out=dx[lo:hi])
            return dw, db
        parts = self.run(part)
        return y, dx, sum(p[0] for p in parts), sum(p[1] for p in parts)


class HandSoftmaxCE(HandChunks):
    """Mean cross-entropy of softmax and its gradient, one chunked pass."""

    def __call__(self, x, y):
        n = self.rows
        ones = np.ones(self.cols, np.float32)
        dx = np.empty_like(x)

        def part(lo, hi):
            xc = x[lo:hi]
            m = np.maximum.reduce(xc, axis=1, keepdims=True)
            e = dx[lo:hi]
            np.subtract(xc, m, out=e)
            picked = e[np.arange(hi - lo), y[lo:hi]].copy()
            np.exp(e, out=e)
            s = (e @ ones)[:, None]
            loss = float(np.sum(np.log(s[:, 0]) - picked))
            np.multiply(e, (1.0 / n) / s, out=e)
            e[np.arange(hi - lo), y[lo:hi]] -= 1.0 / n
            return loss
        return sum(self.run(part)) / n, dx


def w4():
    shape = (4096, 1024)
    x = RNG.standard_normal(shape).astype(np.float32)
    g = RNG.standard_normal(shape).astype(np.float32)
    w = (1 + 0.1 * RNG.standard_normal(1024)).astype(np.float32)
    b = (0.1 * RNG.standard_normal(1024)).astype(np.float32)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    gx, gw, gb = (tg.tensor(a, requires_grad=True) for a in (x, w, b))
    tgt, ggt = torch.tensor(g), tg.tensor(g)
    cg = tg.compile(lambda x, w, b: TF.layer_norm(x, (1024,), w, b))
    tc = torch.compile(lambda x, w, b: torch.nn.functional.layer_norm(x, (1024,), w, b))

    def t_eager():
        y = torch.nn.functional.layer_norm(tx, (1024,), tw, tb)
        return (y,) + torch.autograd.grad(y, (tx, tw, tb), tgt)

    def t_comp():
        y = tc(tx, tw, tb)
        return (y,) + torch.autograd.grad(y, (tx, tw, tb), tgt)

    def g_comp():
        y = cg(gx, gw, gb)
        return (y,) + tg.autograd.grad(y, (gx, gw, gb), ggt)
    hand = HandLayerNorm(*shape)
    return {"torch eager": t_eager, "torch.compile": t_comp, "tracegrad.compile": g_comp,
            "hand-fused numpy": lambda: hand(x, w, b, g)}, (t_eager, g_comp, lambda: hand(x, w, b, g)), 3 * x.nbytes


def w5():
    shape = (4096, 1000)
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.integers(0, 1000, 4096)
    tx, gx = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    ty, gy = torch.tensor(y), tg.tensor(y)
    cg = tg.compile(lambda x, y: TF.cross_entropy(x, y))
    tc = torch.compile(lambda x, y: torch.nn.functional.cross_entropy(x, y))

    def t_eager():
        loss = torch.nn.functional.cross_entropy(tx, ty)
        return loss, torch.autograd.grad(loss, tx)[0]

    def t_comp():
        loss = tc(tx, ty)
        return loss, torch.autograd.grad(loss, tx)[0]

    def g_comp():
        loss = cg(gx, gy)
        return loss, tg.autograd.grad(loss, gx)[0]
    hand = HandSoftmaxCE(*shape)
    return {"torch eager": t_eager, "torch.compile": t_comp, "tracegrad.compile": g_comp,
            "hand-fused numpy": lambda: hand(x, y)}, (t_eager, g_comp, lambda: hand(x, y)), 2 * x.nbytes


def w6():
    sizes = [64, 64, 64, 10]
    ws = [RNG.standard_normal((a, b)).astype(np.float32) / math.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    vs = [RNG.standard_normal(w.shape).astype(np.float32) for w in ws]
    x = RNG.standard_normal((32, 64)).astype(np.float32)

    def loss(m, x, *ws):
        h = x
        for w in ws[:-1]:
            h = m.tanh(h @ w)
        return ((h @ ws[-1]) ** 2).mean()
    tws = [torch.tensor(w, requires_grad=True) for w in ws]
    gws = [tg.tensor(w, requires_grad=True) for w in ws]
    tvs, gvs = [torch.tensor(v) for v in vs], [tg.tensor(v) for v in vs]
    txx, gxx = torch.tensor(x), tg.tensor(x)
    tc = torch.compile(lambda x, *ws: loss(torch, x, *ws))

    def hvp(lib, f, x, ws, vs):
        gs = lib.autograd.grad(f(x, *ws), ws, create_graph=True)
        return lib.autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)), ws)

    cg = tg.compile(lambda x, ws, vs: hvp(tg, lambda x, *w: loss(tg, x, *w), x, ws, vs), fullgraph=True)
    fns = {"torch eager": lambda: hvp(torch, lambda x, *w: loss(torch, x, *w), txx, tws, tvs),
           "torch.compile": lambda: hvp(torch, tc, txx, tws, tvs),
           "tracegrad.compile": lambda: cg(gxx, gws, gvs)}
    return fns, (fns["torch eager"], fns["tracegrad.compile"], None), None


def w8():
    x = RNG.standard_normal(1000).astype(np.float32)
    tx, gx = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    tc = torch.compile(lambda x: (torch.tanh(x) ** 2).sum())

    def third(lib, f, x):
        y = f(x)
        (g1,) = lib.autograd.grad(y, x, create_graph=True)
        (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
        return lib.autograd.grad(g2.sum(), x)

    cg = tg.compile(lambda x: third(tg, lambda x: (tg.tanh(x) ** 2).sum(), x), fullgraph=True)
    fns = {"torch eager": lambda: third(torch, lambda x: (torch.tanh(x) ** 2).sum(), tx),
           "torch.compile": lambda: third(torch, tc, tx),
           "tracegrad.compile": lambda: cg(gx)}
    return fns, (fns["torch eager"], fns["tracegrad.compile"], None), None


W7_SCRIPT = r"""
import sys, time
sys.path.insert(0, {root!r})
import numpy as np, {lib}
t0 = time.perf_counter()
{body}
print(time.perf_counter() - t0)
"""
W7_TG = """
import tracegrad as tg, tracegrad.nn as nn, tracegrad.nn.functional as F
m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = tg.optim.SGD(m.parameters(), lr=1e-3)
x = tg.tensor(np.random.rand(128, 784).astype(np.float32)); y = tg.tensor(np.random.randint(0, 10, 128))
t0 = time.perf_counter()
step = tg.compile(lambda x, y: F.cross_entropy(m(x), y))
step(x, y).backward(); opt.step()
"""
W7_TORCH = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                        torch.nn.Linear(512, 10))
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
x = torch.rand(128, 784); y = torch.randint(0, 10, (128,))
t0 = time.perf_counter()
step = torch.compile(lambda x, y: torch.nn.functional.cross_entropy(m(x), y))
step(x, y).backward(); opt.step()
"""


def w7():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    out = {}
    for name, lib, body in (("tracegrad.compile", "tracegrad", W7_TG), ("torch.compile", "torch", W7_TORCH)):
        src = W7_SCRIPT.format(root=root, lib=lib, body=body)
        r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=600)
        try:
            out[name] = float(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            out[name] = f"fails: {r.stderr.strip().splitlines()[-1][:100] if r.stderr.strip() else '?'}"
    return out


def check(ref, got, rtol=2e-3, atol=2e-4):
    def flat(o):
        if isinstance(o, (tuple, list)):
            return [a for x in o for a in flat(x)]
        if o is None:
            return []
        if hasattr(o, "detach"):
            o = o.detach()
        return [np.asarray(o.numpy() if hasattr(o, "numpy") else o, np.float64)]
    for a, b in zip(flat(ref()), flat(got())):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W8": w8}
UNIT = {"W1": "µs/op", "W7": "s"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default="")
    ap.add_argument("--torch-threads", type=int, default=2,
                    help="torch's intra-op threads (2 = the machine's cores; 1 avoids OpenMP stalls when "
                         "other processes share the cores)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    args = ap.parse_args()
    torch.set_num_threads(args.torch_threads)
    names = [w for w in ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"] if not args.only or w in args.only.split(",")]
    bw = copy_bandwidth()
    results = {}
    for i, w in enumerate(names):
        progress(i, len(names), f"{w}: setting up")
        if w == "W7":
            results[w] = {"times": w7()}
            continue
        fns, checker, nbytes = WORKLOADS[w]()
        row = {"times": {}, "errors": {}}
        if "torch.compile" in fns:
            try:
                progress(i, len(names), f"{w}: torch.compile (compiling)")
                fns["torch.compile"]()
            except Exception as e:
                row["errors"]["torch.compile"] = f"fails: {type(e).__name__}: {str(e).splitlines()[0][:90]}"
                del fns["torch.compile"]
        t0 = time.perf_counter()
        fns["tracegrad.compile"]()
        row["first call tracegrad.compile s"] = time.perf_counter() - t0
        if checker is not None:
            ref, got, hand = checker
            check(ref, got)
            if hand is not None:
                check(ref, hand)
        progress(i, len(names), f"{w}: timing")
        row["times"] = interleaved(fns, args.repeat)
        if nbytes:
            row["roofline"] = {k: (nbytes / bw) / t for k, t in row["times"].items()}
        results[w] = row
    progress(len(names), len(names), "done")
    print(file=sys.stderr)
    report(results, bw)
    os.makedirs(args.out, exist_ok=True)
    meta = {"machine": platform.platform(), "python": sys.version.split()[0], "numpy": np.__version__,
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(), "copy_bandwidth_GBs": bw / 1e9,
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}}
    with open(os.path.join(args.out, "bench_compile.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1, default=str)
    chart(results, os.path.join(args.out, "bench_compile.png"))


def fmt_time(w, t):
    if isinstance(t, str):
        return t
    if w == "W1":
        return f"{t / 100 * 1e6:.2f} µs/op"
    if w == "W7":
        return f"{t:.2f} s"
    return f"{t * 1e3:.3f} ms"


def report(results, bw):
    cols = ["torch eager", "torch.compile", "tracegrad.compile", "hand-fused numpy"]
    print(f"copy bandwidth {bw / 1e9:.1f} GB/s; ratios to torch eager (lower is faster)")
    print(f"{'':4} " + " | ".join(f"{c:>24}" for c in cols) + " | tracegrad roofline | tracegrad 1st call")
    for w, row in results.items():
        times = row["times"]
        base = times.get("torch eager")
        cells = []
        for c in cols:
            t = times.get(c, row.get("errors", {}).get(c, "-"))
            if isinstance(t, str) or base is None:
                cells.append(f"{fmt_time(w, t):>24}")
            else:
                cells.append(f"{fmt_time(w, t)} ({t / base:.2f}x)".rjust(24))
        roof = row.get("roofline", {}).get("tracegrad.compile")
        first = row.get("first call tracegrad.compile s")
        print(f"{w:4} " + " | ".join(cells) + f" | {'' if roof is None else f'{roof * 100:.0f} %':>18} | "
              f"{'' if first is None else f'{first:.3f} s'}")


def chart(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    cols = ["torch.compile", "tracegrad.compile", "hand-fused numpy"]
    ws = [w for w in results if "torch eager" in results[w]["times"]]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(cols)
    for k, c in enumerate(cols):
        vals = [results[w]["times"].get(c) for w in ws]
        ratios = [v / results[w]["times"]["torch eager"] if isinstance(v, float) else 0 for v, w in zip(vals, ws)]
        ax.bar([i + k * width for i in range(len(ws))], ratios, width, label=c)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([i + width for i in range(len(ws))], ws)
    ax.set_ylabel("time / torch eager (lower is faster; 0 = fails)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()

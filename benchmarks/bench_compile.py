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

--device cuda runs W2-W8 with every contender on the GPU: torch on "cuda", tracegrad's
tensors and modules on "cuda" (compile's backend "auto" then lowers to Triton). The clock
is read after torch.cuda.synchronize() (tracegrad's CUDA tensors are torch memory, so
torch's stream covers the Triton launches too), after warm-up calls (Triton compiles and
autotunes on first calls). The roofline is a device-to-device copy, and W3-W5 report every
contender's fraction of it. No hand-fused numpy (it would measure the host); W1 (launch
overhead on a [1] tensor) is left out. Under TRITON_INTERPRET=1 (set before the run) "cuda"
is Triton's CPU interpreter and the torch contenders stay on the CPU, which checks the
GPU path without a GPU; --smoke shrinks every workload, times 1-2 calls and skips
torch.compile (minutes of compiling) for that.

Run: python benchmarks/bench_compile.py [--device cpu|cuda] [--smoke] [--repeat N] [--only W3,W4]
                                        [--torch-threads 1|2] [--out DIR]
Writes DIR/bench_compile.json and DIR/bench_compile.png, bench_compile_cuda.* with --device cuda, so
a GPU run leaves the CPU figures in place (DIR defaults to benchmarks/out).
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


class CFG:
    """Where the contenders run, set once by main(): the workloads read it when they build their tensors.
    torch_device differs from device only under TRITON_INTERPRET=1, where tracegrad's "cuda" is the
    interpreter on CPU tensors and torch has no CUDA."""
    device = "cpu"          # tracegrad's tensors and modules
    torch_device = "cpu"    # torch's
    smoke = False


def on_gpu():
    return CFG.device == "cuda"


def sync():
    """Wait for queued device work before the clock is read; a no-op on the CPU and under the interpreter."""
    if CFG.torch_device == "cuda":
        torch.cuda.synchronize()


def size(full, smoke):
    return smoke if CFG.smoke else full


def tt(a, requires_grad=False):
    """A torch tensor of numpy array a on the torch contenders' device."""
    return torch.tensor(a, requires_grad=requires_grad, device=CFG.torch_device)


def gt(a, requires_grad=False):
    """A tracegrad tensor of numpy array a on tracegrad's device."""
    return tg.tensor(a, requires_grad=requires_grad, device=CFG.device)


def tcompile(fn):
    """torch.compile(fn), or None under --smoke: building the wrapper alone imports dynamo (seconds)."""
    return None if CFG.smoke else torch.compile(fn)


def contenders(fns):
    """Drop the contenders that do not run in this mode (torch.compile under --smoke)."""
    return {k: f for k, f in fns.items() if f is not None}


def progress(i, n, label):
    bar = "#" * int(30 * i / n)
    print(f"\r[{bar:<30}] {i}/{n} {label:<40}", end="", file=sys.stderr, flush=True)


BLOCK = 3
SETTLE_S = 0.15
WARM_S = 0.2


def interleaved(fns, repeat, warmup=3):
    """Median seconds per call of each fn. The contenders take turns in blocks, so drift hits
    all alike: each turn waits SETTLE_S, makes untimed calls for WARM_S (one at least), then
    times BLOCK calls in a row. The wait lets the previous contender's worker threads go to
    sleep: after a parallel BLAS call numpy's OpenBLAS workers spin for ~100 ms, torch's
    OpenMP workers for ~8 ms after its ops (measured as process CPU time while the main
    thread sleeps), and on 2 cores a spinning thread takes a core from whoever runs next
    (tracegrad's W4 ran ~30 % slower right after torch; torch's W2 step up to 2x slower right
    after numpy matmuls). The untimed calls bring the contender back to its steady state:
    after a pause the first calls ran up to 1.6x slower, for 50-80 ms of work on this
    virtual machine. The clock
    is read with the device idle (sync before and after), so a call's time includes its
    queued kernels."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times = {k: [] for k in fns}
    block = 1 if CFG.smoke else BLOCK
    for _ in range(max(1, -(-repeat // block))):
        for k, f in fns.items():
            if not CFG.smoke:
                time.sleep(SETTLE_S)
                end = time.perf_counter() + WARM_S
                f()
                while time.perf_counter() < end:
                    f()
            for _ in range(block):
                sync()
                t0 = time.perf_counter()
                f()
                sync()
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


def device_copy_bandwidth():
    """Read + write bytes per second of a device-to-device copy, best of several. 256 MB per
    tensor, far past any L2; ten copies per sample, so the synchronize around them is noise."""
    n, inner = size(64 << 20, 1 << 16), size(10, 2)
    a = torch.ones(n, device=CFG.torch_device)
    b = torch.empty_like(a)
    b.copy_(a)
    ts = []
    for _ in range(size(5, 2)):
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            b.copy_(a)
        sync()
        ts.append((time.perf_counter() - t0) / inner)
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
    tc = tcompile(lambda x: chain(torch, x))

    def t_comp():
        xt.grad = None
        tc(xt).backward()
        return xt.grad
    return contenders({"torch eager": t_eager, "torch.compile": None if tc is None else t_comp,
                       "tracegrad.compile": tg_comp}), None, None


def mlp_shape():
    """(batch, layer widths) of W2 and W7."""
    return size((128, (784, 512, 512, 10)), (8, (64, 32, 32, 10)))


def mlp_setup():
    n, (a, b, c, d) = mlp_shape()
    x = RNG.standard_normal((n, a)).astype(np.float32)
    y = RNG.integers(0, d, n)
    tm = torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, c),
                             torch.nn.ReLU(), torch.nn.Linear(c, d))
    gm = tnn.Sequential(tnn.Linear(a, b), tnn.ReLU(), tnn.Linear(b, c), tnn.ReLU(), tnn.Linear(c, d))
    with torch.no_grad(), tg.no_grad():
        for p, q in zip(tm.parameters(), gm.parameters()):
            q.copy_(tg.tensor(p.detach().numpy()))
    return x, y, tm.to(CFG.torch_device), gm.to(CFG.device)


def w2():
    x, y, tm, gm = mlp_setup()
    xt, yt = tt(x), tt(y)
    xg, yg = gt(x), gt(y)
    topt = torch.optim.SGD(tm.parameters(), lr=1e-3)
    gopt = tg.optim.SGD(gm.parameters(), lr=1e-3)
    tloss = lambda: torch.nn.functional.cross_entropy(tm(xt), yt)   # noqa: E731
    gloss = tg.compile(lambda x, y: TF.cross_entropy(gm(x), y))
    tcloss = tcompile(lambda x, y: torch.nn.functional.cross_entropy(tm(x), y))

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

    @tg.compile
    def g_whole(x, y):
        # the whole step as one program: forward, backward and SGD's update, written back
        gopt.zero_grad()
        loss = TF.cross_entropy(gm(x), y)
        loss.backward()
        gopt.step()
        return loss

    def t_grads():
        # the warm-up calls stepped the two models unequally: compare from tracegrad's weights
        with torch.no_grad():
            for p, q in zip(tm.parameters(), gm.parameters()):
                p.copy_(torch.from_numpy(q.detach().cpu().numpy()))
        topt.zero_grad()
        loss = tloss()
        loss.backward()
        return [loss] + [p.grad for p in tm.parameters()]

    def g_grads():
        gopt.zero_grad()
        loss = gloss(xg, yg)
        loss.backward()
        return [loss] + [p.grad for p in gm.parameters()]
    # the step's loss and gradients are checked in GPU mode (new kernels); CPU mode runs as it always has
    checker = (t_grads, g_grads, None) if on_gpu() else None
    return contenders({"torch eager": t_eager, "torch.compile": None if tcloss is None else t_comp,
                       "tracegrad.compile": g_comp,
                       "compile (whole step)": lambda: g_whole(xg, yg),
                       GEMMS: None if on_gpu() else gemms_alone(x, [q.detach().numpy() for q in gm.parameters()])}), \
        checker, None


GEMMS = "numpy's matrix products alone"


def gemms_alone(x, params):
    """The floor of any numpy step of W2: its eight matrix products (three forward, three
    weight gradients, two input gradients), at the step's shapes and layouts, into arrays
    allocated once, and nothing else. torch eager runs its own BLAS; where these take most
    of torch's whole step, no numpy program can come much under it."""
    ws = params[0::2]                       # Linear weights, (out, in): the forward multiplies by w.T
    hs = [x]
    for w in ws:
        hs.append(np.maximum(hs[-1] @ w.T, 0))
    g = np.ones_like(hs[-1]) / hs[-1].size
    fwd = [np.empty_like(h) for h in hs[1:]]
    gws = [np.empty_like(w) for w in ws]
    ghs = [np.empty_like(h) for h in hs[1:-1]]

    def run():
        for i, w in enumerate(ws):
            np.matmul(hs[i], w.T, out=fwd[i])
        gi = g
        for i in range(len(ws) - 1, -1, -1):
            np.matmul(gi.T, hs[i], out=gws[i])
            if i:
                gi = np.matmul(gi, ws[i], out=ghs[i - 1])
    return run


def gelu_tanh(m, x):
    return 0.5 * x * (1 + m.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def w3():
    n = size(4194304, 4096)
    x = RNG.standard_normal(n).astype(np.float32)
    g = RNG.standard_normal(n).astype(np.float32)
    xt, gtt = tt(x, requires_grad=True), tt(g)
    xg, gg = gt(x, requires_grad=True), gt(g)
    cg = tg.compile(lambda x: gelu_tanh(tg, x))
    tc = tcompile(lambda x: gelu_tanh(torch, x))

    def t_eager():
        y = gelu_tanh(torch, xt)
        return y, torch.autograd.grad(y, xt, gtt)[0]

    def t_comp():
        y = tc(xt)
        return y, torch.autograd.grad(y, xt, gtt)[0]

    def g_comp():
        y = cg(xg)
        return y, tg.autograd.grad(y, xg, gg)[0]
    hand = None if on_gpu() else HandGelu(x.size)
    hand_fn = None if hand is None else (lambda: hand(x, g))
    fns = contenders({"torch eager": t_eager, "torch.compile": None if tc is None else t_comp,
                      "tracegrad.compile": g_comp, "hand-fused numpy": hand_fn})
    return fns, (t_eager, g_comp, hand_fn), 4 * n * 4


def in_runs(pool, n, step, fn):
    """fn(lo, hi) over [0, n) in chunks of `step`, each of the pool's 2 threads walking one
    contiguous half of the chunks (one hand-over per thread, not per chunk); results in order."""
    bounds = [(lo, min(lo + step, n)) for lo in range(0, n, step)]
    half = (len(bounds) + 1) // 2
    runs = [bounds[:half], bounds[half:]]
    return [r for part in pool.map(lambda run: [fn(lo, hi) for lo, hi in run], runs) for r in part]


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
        in_runs(self.pool, n, self.chunk, lambda lo, hi: self.part(x, g, lo, hi))
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
        return in_runs(self.pool, self.rows, self.step, fn)


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
    shape = size((4096, 1024), (32, 128))
    d = shape[1]
    x = RNG.standard_normal(shape).astype(np.float32)
    g = RNG.standard_normal(shape).astype(np.float32)
    w = (1 + 0.1 * RNG.standard_normal(d)).astype(np.float32)
    b = (0.1 * RNG.standard_normal(d)).astype(np.float32)
    tx, tw, tb = (tt(a, requires_grad=True) for a in (x, w, b))
    gx, gw, gb = (gt(a, requires_grad=True) for a in (x, w, b))
    tgt, ggt = tt(g), gt(g)
    cg = tg.compile(lambda x, w, b: TF.layer_norm(x, (d,), w, b))
    tc = tcompile(lambda x, w, b: torch.nn.functional.layer_norm(x, (d,), w, b))

    def t_eager():
        y = torch.nn.functional.layer_norm(tx, (d,), tw, tb)
        return (y,) + torch.autograd.grad(y, (tx, tw, tb), tgt)

    def t_comp():
        y = tc(tx, tw, tb)
        return (y,) + torch.autograd.grad(y, (tx, tw, tb), tgt)

    def g_comp():
        y = cg(gx, gw, gb)
        return (y,) + tg.autograd.grad(y, (gx, gw, gb), ggt)
    hand = None if on_gpu() else HandLayerNorm(*shape)
    hand_fn = None if hand is None else (lambda: hand(x, w, b, g))
    fns = contenders({"torch eager": t_eager, "torch.compile": None if tc is None else t_comp,
                      "tracegrad.compile": g_comp, "hand-fused numpy": hand_fn})
    return fns, (t_eager, g_comp, hand_fn), 3 * x.nbytes


def w5():
    shape = size((4096, 1000), (32, 100))
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.integers(0, shape[1], shape[0])
    tx, gx = tt(x, requires_grad=True), gt(x, requires_grad=True)
    ty, gy = tt(y), gt(y)
    cg = tg.compile(lambda x, y: TF.cross_entropy(x, y))
    tc = tcompile(lambda x, y: torch.nn.functional.cross_entropy(x, y))

    def t_eager():
        loss = torch.nn.functional.cross_entropy(tx, ty)
        return loss, torch.autograd.grad(loss, tx)[0]

    def t_comp():
        loss = tc(tx, ty)
        return loss, torch.autograd.grad(loss, tx)[0]

    def g_comp():
        loss = cg(gx, gy)
        return loss, tg.autograd.grad(loss, gx)[0]
    hand = None if on_gpu() else HandSoftmaxCE(*shape)
    hand_fn = None if hand is None else (lambda: hand(x, y))
    fns = contenders({"torch eager": t_eager, "torch.compile": None if tc is None else t_comp,
                      "tracegrad.compile": g_comp, "hand-fused numpy": hand_fn})
    return fns, (t_eager, g_comp, hand_fn), 2 * x.nbytes


def w6():
    sizes, batch = size(([64, 64, 64, 10], 32), ([16, 16, 16, 10], 8))
    ws = [RNG.standard_normal((a, b)).astype(np.float32) / math.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    vs = [RNG.standard_normal(w.shape).astype(np.float32) for w in ws]
    x = RNG.standard_normal((batch, sizes[0])).astype(np.float32)

    def loss(m, x, *ws):
        h = x
        for w in ws[:-1]:
            h = m.tanh(h @ w)
        return ((h @ ws[-1]) ** 2).mean()
    tws = [tt(w, requires_grad=True) for w in ws]
    gws = [gt(w, requires_grad=True) for w in ws]
    tvs, gvs = [tt(v) for v in vs], [gt(v) for v in vs]
    txx, gxx = tt(x), gt(x)
    tc = tcompile(lambda x, *ws: loss(torch, x, *ws))

    def hvp(lib, f, x, ws, vs):
        gs = lib.autograd.grad(f(x, *ws), ws, create_graph=True)
        return lib.autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)), ws)

    cg = tg.compile(lambda x, ws, vs: hvp(tg, lambda x, *w: loss(tg, x, *w), x, ws, vs), fullgraph=True)
    cl = tg.compile(lambda x, *ws: loss(tg, x, *ws))
    fns = contenders({"torch eager": lambda: hvp(torch, lambda x, *w: loss(torch, x, *w), txx, tws, tvs),
                      "torch.compile": None if tc is None else (lambda: hvp(torch, tc, txx, tws, tvs)),
                      "tracegrad.compile": lambda: cg(gxx, gws, gvs),
                      # torch's way: the loss compiled, the derivatives taken outside it
                      "tracegrad.compile (loss only)": lambda: hvp(tg, cl, gxx, gws, gvs)})
    return fns, (fns["torch eager"], fns["tracegrad.compile"], None), None


def w8():
    x = RNG.standard_normal(size(1000, 100)).astype(np.float32)
    tx, gx = tt(x, requires_grad=True), gt(x, requires_grad=True)
    tc = tcompile(lambda x: (torch.tanh(x) ** 2).sum())

    def third(lib, f, x):
        y = f(x)
        (g1,) = lib.autograd.grad(y, x, create_graph=True)
        (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
        return lib.autograd.grad(g2.sum(), x)

    cg = tg.compile(lambda x: third(tg, lambda x: (tg.tanh(x) ** 2).sum(), x), fullgraph=True)
    cl = tg.compile(lambda x: (tg.tanh(x) ** 2).sum())
    fns = contenders({"torch eager": lambda: third(torch, lambda x: (torch.tanh(x) ** 2).sum(), tx),
                      "torch.compile": None if tc is None else (lambda: third(torch, tc, tx)),
                      "tracegrad.compile": lambda: cg(gx),
                      "tracegrad.compile (loss only)": lambda: third(tg, cl, gx)})
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
m = nn.Sequential(nn.Linear({a}, {b}), nn.ReLU(), nn.Linear({b}, {c}), nn.ReLU(), nn.Linear({c}, {d})).to({dev!r})
opt = tg.optim.SGD(m.parameters(), lr=1e-3)
x = tg.tensor(np.random.rand({n}, {a}).astype(np.float32), device={dev!r})
y = tg.tensor(np.random.randint(0, {d}, {n}), device={dev!r})
t0 = time.perf_counter()
step = tg.compile(lambda x, y: F.cross_entropy(m(x), y))
step(x, y).backward(); opt.step()
{sync}
"""
W7_TORCH = """
import torch
m = torch.nn.Sequential(torch.nn.Linear({a}, {b}), torch.nn.ReLU(), torch.nn.Linear({b}, {c}), torch.nn.ReLU(),
                        torch.nn.Linear({c}, {d})).to({dev!r})
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
x = torch.rand({n}, {a}, device={dev!r}); y = torch.randint(0, {d}, ({n},), device={dev!r})
t0 = time.perf_counter()
step = torch.compile(lambda x, y: torch.nn.functional.cross_entropy(m(x), y))
step(x, y).backward(); opt.step()
{sync}
"""


def w7():
    """Each contender's first step in a fresh process, on the device the others run on (the
    subprocess inherits TRITON_INTERPRET); the clock stops after the device is done."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    n, (a, b, c, d) = mlp_shape()
    out = {}
    for name, lib, body, dev, sync_src in (
            ("tracegrad.compile", "tracegrad", W7_TG, CFG.device, "tg.cuda.synchronize()"),
            ("torch.compile", "torch", W7_TORCH, CFG.torch_device, "torch.cuda.synchronize()")):
        if CFG.smoke and lib == "torch":
            out[name] = "skipped (--smoke)"
            continue
        body = body.format(a=a, b=b, c=c, d=d, n=n, dev=dev, sync=sync_src if dev == "cuda" else "")
        src = W7_SCRIPT.format(root=root, lib=lib, body=body)
        r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=600)
        try:
            out[name] = float(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            out[name] = f"fails: {r.stderr.strip().splitlines()[-1][:100] if r.stderr.strip() else '?'}"
    return out


def check(ref, got, rtol=2e-3, atol=2e-4, scaled=False):
    """Compare every array got() returns with ref()'s. scaled: atol is relative to each reference
    array's largest magnitude (a mean loss's gradients are ~1/N each, below any fixed atol)."""
    def flat(o):
        if isinstance(o, (tuple, list)):
            return [a for x in o for a in flat(x)]
        if o is None:
            return []
        if hasattr(o, "detach"):
            o = o.detach()
        if hasattr(o, "cpu"):            # device tensors (torch's and tracegrad's) to the host
            o = o.cpu()
        return [np.asarray(o.numpy() if hasattr(o, "numpy") else o, np.float64)]
    refs, gots = flat(ref()), flat(got())
    assert len(refs) == len(gots), (len(refs), len(gots))
    for a, b in zip(refs, gots):
        tol = (atol * float(np.abs(a).max(initial=0)) or atol) if scaled else atol
        np.testing.assert_allclose(b, a, rtol=rtol, atol=tol)


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W8": w8}
UNIT = {"W1": "µs/op", "W7": "s"}


def parse_args():
    from tracegrad._cli import HelpFormatter
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0],
                                 formatter_class=HelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cuda: W2-W8 with every contender on the GPU (or on Triton's CPU interpreter when "
                         "TRITON_INTERPRET=1 is set; torch then stays on the CPU)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny shapes, 1-2 timed calls, no torch.compile: checks that every row runs")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default="")
    ap.add_argument("--torch-threads", type=int, default=2,
                    help="torch's intra-op threads (2 = the machine's cores; 1 avoids OpenMP stalls when "
                         "other processes share the cores)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    return ap.parse_args()


def set_device(args):
    """Fill CFG. tracegrad's "cuda" exists with a GPU or under TRITON_INTERPRET=1; torch follows
    it to the GPU where torch has one (under the interpreter it has none and stays on the CPU)."""
    CFG.device, CFG.smoke = args.device, args.smoke
    if args.device == "cuda":
        if not tg.cuda.is_available():
            sys.exit("--device cuda: no CUDA device (or triton) for tracegrad; set TRITON_INTERPRET=1 to run the "
                     "GPU path on Triton's CPU interpreter")
        CFG.torch_device = "cuda" if torch.cuda.is_available() and not tg.cuda.interpreting() else "cpu"


def run_row(w, say, repeat, bw):
    """One workload: compile warm-ups, tracegrad's first call, the check against torch eager, the timing."""
    if w == "W7":
        return {"times": w7()}
    fns, checker, nbytes = WORKLOADS[w]()
    row = {"times": {}, "errors": {}}
    if CFG.smoke:
        row["errors"]["torch.compile"] = "skipped (--smoke)"
    if "torch.compile" in fns:
        try:
            say(f"{w}: torch.compile (compiling)")
            fns["torch.compile"]()
        except Exception as e:
            row["errors"]["torch.compile"] = f"fails: {type(e).__name__}: {str(e).splitlines()[0][:90]}"
            del fns["torch.compile"]
    sync()
    t0 = time.perf_counter()
    fns["tracegrad.compile"]()
    sync()
    row["first call tracegrad.compile s"] = time.perf_counter() - t0
    if checker is not None:
        ref, got, hand = checker
        # GPU kernels reduce in other orders than torch's: float32 tolerances, relative to each array's scale
        check(ref, got, **(dict(rtol=1e-3, atol=1e-4, scaled=True) if on_gpu() else {}))
        if hand is not None:
            check(ref, hand)
    say(f"{w}: timing")
    # a few more warm-up calls on the GPU: autotuning and compiling may happen on later calls (backward)
    row["times"] = interleaved(fns, repeat, warmup=1 if CFG.smoke else 5 if on_gpu() else 3)
    if nbytes:
        row["roofline"] = {k: (nbytes / bw) / t for k, t in row["times"].items()}
        if on_gpu():
            row["bandwidth_GBs"] = {k: nbytes / t / 1e9 for k, t in row["times"].items()}
            row["bytes"] = nbytes
    return row


BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def numpy_blas():
    """numpy's BLAS as threadpoolctl reports it (library, version, the kernels it picked, threads),
    or None without threadpoolctl. Some machines set OPENBLAS_CORETYPE (see PERF-NOTES): the
    kernels then differ from those OpenBLAS picks for the CPU, and every numpy product with them."""
    try:
        from threadpoolctl import threadpool_info  # lazy: an optional package, read once per run
    except ImportError:
        return None
    return [{k: info.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for info in threadpool_info() if info.get("user_api") == "blas"]


def blas_line():
    blas = numpy_blas()
    what = "unknown (no threadpoolctl)" if blas is None else ", ".join(
        f"{b['internal_api']} {b['version']} {b['architecture']} kernels on {b['num_threads']} threads" for b in blas)
    env = ", ".join(f"{k}={os.environ[k]}" for k in BLAS_ENV if k in os.environ) or "no OPENBLAS_* settings"
    return f"numpy's BLAS: {what} ({env})"


def meta_of(bw):
    meta = {"machine": platform.platform(), "python": sys.version.split()[0], "numpy": np.__version__,
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(), "copy_bandwidth_GBs": bw / 1e9,
            "env": {k: os.environ.get(k) for k in BLAS_ENV}, "numpy_blas": numpy_blas()}
    if CFG.smoke:
        meta["smoke"] = True
    if on_gpu():
        import triton
        meta.update(device=device_name(), torch_device=CFG.torch_device, triton=triton.__version__,
                    torch_cuda=torch.version.cuda, triton_interpret=tg.cuda.interpreting())
    return meta


def device_name():
    return torch.cuda.get_device_name() if CFG.torch_device == "cuda" else tg.cuda.get_device_name()


def main():
    args = parse_args()
    set_device(args)
    torch.set_num_threads(args.torch_threads)
    names = [w for w in ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"] if not args.only or w in args.only.split(",")]
    if on_gpu() and "W1" in names:
        names.remove("W1")           # 400 launches on a [1] tensor: launch latency, no GPU work to compare
        if not names:
            sys.exit("--device cuda runs W2-W8 (W1 measures per-op overhead on the CPU)")
    repeat = min(args.repeat, 2) if args.smoke else args.repeat
    bw = device_copy_bandwidth() if on_gpu() else copy_bandwidth()
    results = {}
    for i, w in enumerate(names):
        say = lambda label, i=i: progress(i, len(names), label)   # noqa: E731
        say(f"{w}: setting up")
        results[w] = run_row(w, say, repeat, bw)
    progress(len(names), len(names), "done")
    print(file=sys.stderr)
    report(results, bw)
    os.makedirs(args.out, exist_ok=True)
    stem = "bench_compile_cuda" if on_gpu() else "bench_compile"
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump({"meta": meta_of(bw), "results": results}, f, indent=1, default=str)
    chart(results, os.path.join(args.out, stem + ".png"))


def fmt_time(w, t):
    if isinstance(t, str):
        return t
    if w == "W1":
        return f"{t / 100 * 1e6:.2f} µs/op"
    if w == "W7":
        return f"{t:.2f} s"
    return f"{t * 1e3:.3f} ms"


def report(results, bw):
    if on_gpu():
        return report_gpu(results, bw)
    cols = ["torch eager", "torch.compile", "tracegrad.compile", "hand-fused numpy"]
    print(blas_line())
    print(f"copy bandwidth {bw / 1e9:.1f} GB/s; ratios to torch eager (lower is faster)")
    print(f"{'':4} " + " | ".join(f"{c:>24}" for c in cols) + " | tracegrad roofline | tracegrad 1st call")
    for w, row in results.items():
        roof = row.get("roofline", {}).get("tracegrad.compile")
        first = row.get("first call tracegrad.compile s")
        print(f"{w:4} " + " | ".join(cells(w, row, cols, 24)) +
              f" | {'' if roof is None else f'{roof * 100:.0f} %':>18} | {'' if first is None else f'{first:.3f} s'}")
    report_others(results, cols)


def report_others(results, cols):
    """The contenders of one workload only (W2's whole step), then W6 and W8 torch's way."""
    for w, row in results.items():
        for c in row["times"]:
            if c not in cols and c != TORCH_WAY:
                print(f"{w:4} {c}: {cells(w, row, [c], 0)[0].strip()}")
    report_torch_way(results)


def report_torch_way(results):
    """W6 and W8 written torch's way (the loss compiled, autograd.grad(create_graph=True)
    outside it): the time and its ratio to the same derivative compiled whole."""
    for w, row in results.items():
        t, whole = row["times"].get(TORCH_WAY), row["times"].get("tracegrad.compile")
        if isinstance(t, float) and isinstance(whole, float):
            print(f"{w:4} {TORCH_WAY}: {fmt_time(w, t)}, {t / whole:.2f}x tracegrad.compile of the whole function")


TORCH_WAY = "tracegrad.compile (loss only)"


def report_gpu(results, bw):
    """As report, without hand-fused numpy; the memory-bound rows give every contender's fraction
    of the copy bandwidth in its cell, since on the GPU torch's kernels are near it too."""
    cols = ["torch eager", "torch.compile", "tracegrad.compile"]
    print(f"{device_name()} ({CFG.torch_device} torch): copy bandwidth {bw / 1e9:.1f} GB/s; ratios to torch eager "
          f"(lower is faster); W3-W5: % of the copy bandwidth")
    print(f"{'':4} " + " | ".join(f"{c:>32}" for c in cols) + " | tracegrad 1st call")
    for w, row in results.items():
        first = row.get("first call tracegrad.compile s")
        print(f"{w:4} " + " | ".join(cells(w, row, cols, 32, roofline=True)) +
              f" | {'' if first is None else f'{first:.3f} s'}")
    report_others(results, cols)


def cells(w, row, cols, width, roofline=False):
    """One table cell per contender: its time and ratio to torch eager (and, with roofline,
    its fraction of the copy bandwidth), or why it has none."""
    times = row["times"]
    base = times.get("torch eager")
    out = []
    for c in cols:
        t = times.get(c, row.get("errors", {}).get(c, "-"))
        if isinstance(t, str) or base is None:
            out.append(f"{fmt_time(w, t):>{width}}")
            continue
        roof = row.get("roofline", {}).get(c) if roofline else None
        out.append((f"{fmt_time(w, t)} ({t / base:.2f}x)" + ("" if roof is None else f" {roof * 100:.0f} %"))
                   .rjust(width))
    return out


def chart(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    cols = ["torch.compile", "tracegrad.compile"] + ([] if on_gpu() else ["hand-fused numpy"])
    ws = [w for w in results if "torch eager" in results[w]["times"]]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(cols)
    for k, c in enumerate(cols):
        vals = [results[w]["times"].get(c) for w in ws]
        ratios = [v / results[w]["times"]["torch eager"] if isinstance(v, float) else 0 for v, w in zip(vals, ws)]
        ax.bar([i + k * width for i in range(len(ws))], ratios, width, label=c)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([i + width * (len(cols) - 1) / 2 for i in range(len(ws))], ws)
    ax.set_ylabel("time / torch eager (lower is faster; 0 = fails)")
    if on_gpu():
        ax.set_title(device_name())
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()

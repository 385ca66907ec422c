"""Eager overhead against torch eager, in one process, interleaved; medians; ratios.

  A. chain of 100 elementwise ops on a [1]-shaped tensor: forward, and forward+backward
     (µs per op), tracegrad vs torch eager.
  B. the same kind of chain on 1M elements, forward+backward, tracegrad vs numpy written
     by hand (forward and the chain rule, no autodiff), and vs torch eager.

Run: python benchmarks/bench_eager.py [--repeat N] [--json out.json]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

# the checkout's tracegrad, installed or not
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def chain(m, x, n_blocks=25):
    y = x
    for _ in range(n_blocks):        # 4 ops a block: 100 ops
        y = m.sin(y)
        y = y * 1.01
        y = y + 0.1
        y = m.tanh(y)
    return y


def numpy_chain_fwd_bwd(x, n_blocks=25):
    """The same chain by hand: forward keeping what backward needs, then the chain rule."""
    saved = []
    y = x
    for _ in range(n_blocks):
        s = np.sin(y)
        saved.append(y)
        y = np.tanh(s * np.float32(1.01) + np.float32(0.1))
        saved.append(y)
    g = np.ones_like(y)
    for i in range(n_blocks - 1, -1, -1):
        t = saved[2 * i + 1]
        g = g * (1 - t * t) * np.float32(1.01) * np.cos(saved[2 * i])
    return y, g


def timeit(fn, repeat, number=1):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter() - t0) / number)
    return statistics.median(ts)


def run(repeat):
    import torch
    import tracegrad
    torch.set_num_threads(2)
    results = {}

    def tiny(m, backward):
        x = m.tensor([0.5], requires_grad=True)

        def step():
            y = chain(m, x).sum()
            if backward:
                y.backward()
        return step

    for backward in (False, True):
        name = "A. 100 ops on [1], " + ("fwd+bwd" if backward else "fwd")
        fns = {"torch": tiny(torch, backward), "tracegrad": tiny(tracegrad, backward)}
        for f in fns.values():
            f()
        times = {k: [] for k in fns}
        for _ in range(repeat):                       # interleaved
            for k, f in fns.items():
                times[k].append(timeit(f, 1, 5))
        med = {k: statistics.median(v) / 100 * 1e6 for k, v in times.items()}
        results[name] = {"us_per_op": med, "ratio_vs_torch": med["tracegrad"] / med["torch"]}

    n = 1 << 20
    rng = np.random.default_rng(0)
    data = rng.standard_normal(n).astype(np.float32)

    def big(m):
        x = m.tensor(data, requires_grad=True)

        def step():
            x.grad = None
            chain(m, x, 5).sum().backward()
        return step
    fns = {"numpy_by_hand": lambda: numpy_chain_fwd_bwd(data, 5), "torch": big(torch), "tracegrad": big(tracegrad)}
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(max(3, repeat // 3)):
        for k, f in fns.items():
            times[k].append(timeit(f, 1, 3))
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    results["B. 20 ops on 1M elements, fwd+bwd"] = {
        "ms": med, "ratio_vs_numpy_by_hand": med["tracegrad"] / med["numpy_by_hand"],
        "ratio_vs_torch": med["tracegrad"] / med["torch"]}
    # check the gradients agree before trusting the times
    x = tracegrad.tensor(data, requires_grad=True)
    chain(tracegrad, x, 5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), numpy_chain_fwd_bwd(data, 5)[1], rtol=1e-4, atol=1e-5)
    return results


def main(argv=None):
    from tracegrad._cli import HelpFormatter
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0],
                                 formatter_class=HelpFormatter)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = run(args.repeat)
    print(f"{'workload':40s} {'numbers':>52s}  ratio")
    for name, r in res.items():
        nums = ", ".join(f"{k} {v:.2f}" for k, v in (r.get("us_per_op") or r["ms"]).items())
        unit = "us/op" if "us_per_op" in r else "ms"
        ratios = ", ".join(f"{k.replace('ratio_', '')} {v:.2f}x" for k, v in r.items() if k.startswith("ratio"))
        print(f"{name:40s} {nums + ' ' + unit:>52s}  {ratios}")
    if args.json:
        meta = {"python": sys.version.split()[0], "numpy": np.__version__, "machine": platform.machine(),
                "processor": platform.processor()}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": res}, f, indent=2)


if __name__ == "__main__":
    main()

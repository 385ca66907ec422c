"""W2-like whole training step (MLP 784-512-512-10, SGD, float32) compiled over varying
batch sizes: programs compiled and the time per call, automatic dynamic shapes against
one program per size (dynamic=False). Run: PYTHONPATH=. python benchmarks/bench_dynamic.py"""
import time

import numpy as np

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F

SIZES = [128, 96, 128, 64, 200, 128, 33, 256, 128, 100, 150, 128]


def make(dynamic):
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = tg.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return tg.compile(step, dynamic=dynamic, cache_limit=64)


def main():
    rng = np.random.default_rng(0)
    data = {n: (tg.tensor(rng.standard_normal((n, 784)).astype(np.float32)), tg.tensor(rng.integers(0, 10, n)))
            for n in set(SIZES)}
    for dynamic in (None, False):
        f = make(dynamic)
        t0 = time.perf_counter()
        for n in SIZES:
            f(*data[n])
        first = time.perf_counter() - t0
        times = {}
        for _ in range(5):                      # steady state: every size compiled
            for n in SIZES:
                t = time.perf_counter()
                f(*data[n])
                times.setdefault(n, []).append(time.perf_counter() - t)
        per = "  ".join(f"{n}:{1e3 * min(v):.2f}" for n, v in sorted(times.items()))
        print(f"dynamic={dynamic}: {f.cache.compiles} programs, first pass over {len(SIZES)} calls "
              f"{first:.2f} s; ms per call by batch size  {per}")


if __name__ == "__main__":
    main()

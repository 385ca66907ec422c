"""W6 and W8 written torch's way (the loss compiled, autograd.grad outside it) against the same
derivative compiled whole, in tight alternation: ROUNDS rounds of N calls of each, the minimum
and the median per-round ratio. bench_compile.py times each contender in blocks of three calls
after a pause (its `interleaved`), which suits milliseconds; these calls take 30-300 us, where
a pause's cold caches and a collection of the garbage collector in one of three calls move its
median by tens of percent between runs.

    python benchmarks/bench_torch_way.py [ROUNDS]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_compile as B           # noqa: E402  (its W6 and W8 definitions)

TORCH_WAY = B.TORCH_WAY


def measure(fns, rounds, n):
    whole, tway = fns["tracegrad.compile"], fns[TORCH_WAY]
    for _ in range(30):
        whole()
        tway()
    a, b, r = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            whole()
        t1 = time.perf_counter()
        for _ in range(n):
            tway()
        t2 = time.perf_counter()
        a.append((t1 - t0) / n)
        b.append((t2 - t1) / n)
        r.append((t2 - t1) / (t1 - t0))
    return min(a), min(b), statistics.median(r)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    B.CFG.smoke = False
    for name, make, n in (("W6", B.w6, 20), ("W8", B.w8, 100)):
        fns, _, _ = make()
        a, b, r = measure(fns, rounds, n)
        print(f"{name}: whole function {a * 1e6:.1f} us, torch's way {b * 1e6:.1f} us (minimum of {rounds} rounds "
              f"of {n} calls): {b / a:.2f}x; median per-round ratio {r:.2f}x")


if __name__ == "__main__":
    main()

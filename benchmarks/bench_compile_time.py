"""Compile time of long programs: the first call of a compiled function (trace, derive,
passes, partition, fusion groups, code generation) and its backward, in CPU seconds of
this process (on a shared machine wall time measures the neighbours too).

  chain   N elementwise ops: x = x * 1.0001 + 0.001 repeated, then a sum
  sincos  N elementwise ops: x = cos(sin(x)) * 1.01 repeated, then a sum
  inputs  a function of N tensors: their sum, each input scaled
  eager   N eager ops, then the engine's backward (derived and compiled per structure)

Run: python benchmarks/bench_compile_time.py [chain|sincos|inputs|eager] [N]   (default: all, N=10000)
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import tracegrad as tg  # noqa: E402


def chain(n):
    def f(x):
        for _ in range(n // 2):
            x = x * 1.0001 + 0.001
        return x.sum()
    return f, [tg.randn(16, requires_grad=True)]


def sincos(n):
    def f(x):
        for _ in range(n // 3):
            x = x.sin().cos() * 1.01
        return x.sum()
    return f, [tg.randn(16, requires_grad=True)]


def inputs(n):
    def f(*xs):
        s = xs[0]
        for x in xs[1:]:
            s = s + x * 0.5
        return s.sum()
    return f, [tg.randn(4, requires_grad=True) for _ in range(n)]


def compiled(kind, n):
    f, args = {"chain": chain, "sincos": sincos, "inputs": inputs}[kind](n)
    cf = tg.compile(f)
    t0 = time.process_time()
    y = cf(*args)
    t1 = time.process_time()
    y.backward()
    t2 = time.process_time()
    print(f"{kind:7s} {n:6d}: first call {t1 - t0:6.2f} s  backward {t2 - t1:5.2f} s  total {t2 - t0:6.2f} s")


def eager(n):
    x = tg.randn(16, requires_grad=True)
    y = x
    for _ in range(n // 3):
        y = y.sin().cos() * 1.01
    y = y.sum()
    t0 = time.process_time()
    y.backward()
    print(f"eager   {n:6d}: backward {time.process_time() - t0:6.2f} s")


def main():
    import argparse
    from tracegrad._cli import HelpFormatter
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0], formatter_class=HelpFormatter)
    ap.add_argument("kind", nargs="?", choices=("chain", "sincos", "inputs", "eager", "all"), default="all",
                    help="which program to compile")
    ap.add_argument("n", nargs="?", type=int, default=10000, help="its number of ops (or inputs)")
    args = ap.parse_args()
    kinds = ["chain", "sincos", "inputs", "eager"] if args.kind == "all" else [args.kind]
    n = args.n
    for kind in kinds:
        eager(n) if kind == "eager" else compiled(kind, n)


if __name__ == "__main__":
    main()

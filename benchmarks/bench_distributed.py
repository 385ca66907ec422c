"""Data-parallel training of the W2 MLP (784-512-512-10, ReLU, cross-entropy, SGD) on 1 and
2 MPI processes: step time, scaling efficiency, and how much of the gradient all-reduce
the backward hides.

  python benchmarks/bench_distributed.py [--steps 60] [--batch 128] [--dtype float32]

The script starts `mpiexec -n 1` and `mpiexec -n 2` of itself (the mpich wheel's mpiexec,
beside python) and prints one table. Each process uses one BLAS thread.

  strong scaling  the global batch (--batch) split across the processes; efficiency is
                  T(1) / (2 T(2)) (1.0: twice as fast on two processes)
  weak scaling    --batch images per process; efficiency T(1) / T(2)
  all-reduce      the buckets all-reduced on their own, nothing else running (per step)
  waited          how long a step waits for the all-reduces once its backward is done
  hidden          1 - waited / all-reduce: the part of the all-reduce that ran while the
                  backward still computed
  after backward  the same steps with every bucket all-reduced only once the backward has
                  finished (no overlap): what the overlap saves is against this

The three kinds of step (overlap, after-backward, all-reduce alone) are interleaved, each
after a barrier, and the medians are reported. On a machine with fewer cores than processes (plus their
communication threads) the numbers mostly measure contention.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def worker(args):
    import numpy as np
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:
        pass
    import tracegrad as tg
    import tracegrad.distributed as dist
    import tracegrad.nn as nn
    import tracegrad.nn.functional as F
    from tracegrad.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = getattr(tg, args.dtype)
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(dtype)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = tg.optim.SGD(model.parameters(), lr=1e-3)
    results = {}
    for scaling in ("strong", "weak"):
        per_rank = args.batch // world if scaling == "strong" else args.batch
        rng = np.random.default_rng(rank)
        x = tg.tensor(rng.standard_normal((per_rank, 784)), dtype=dtype)
        y = tg.tensor(rng.integers(0, 10, per_rank))
        rows = {"overlap": [], "after": [], "alone": []}
        for k in range(args.steps + args.warmup):
            for mode in ("overlap", "after", "alone"):
                dist.barrier()
                t0 = time.perf_counter()
                if mode == "alone":
                    # the same buckets all-reduced with nothing else running: the all-reduce time
                    for b in ddp._buckets:
                        ddp._launch(b)
                    for b in ddp._buckets:
                        b.work.wait()
                    t1 = time.perf_counter()
                    if k >= args.warmup:
                        rows[mode].append((t1 - t0, t1 - t0))
                    continue
                ddp.__dict__["_overlap"] = mode == "overlap"
                opt.zero_grad()
                F.cross_entropy(ddp(x), y).backward()
                opt.step()
                t1 = time.perf_counter()
                tm = ddp._timings
                if k >= args.warmup:
                    # the step's wait for all-reduces once its backward is done
                    wait = 0.0 if tm is None else max(0.0, tm["wait_end"] - tm["backward_end"])
                    rows[mode].append((t1 - t0, wait))
        ddp.__dict__["_overlap"] = True
        med = {m: {"step_ms": 1e3 * statistics.median(r[0] for r in rs),
                   "wait_ms": 1e3 * statistics.median(r[1] for r in rs)} for m, rs in rows.items()}
        med["per_rank_batch"] = per_rank
        results[scaling] = med
    gathered = [None] * world
    payload = json.dumps(results)
    t = tg.tensor(np.frombuffer(payload.encode().ljust(8192), np.uint8).copy())
    outs = [tg.zeros(8192, dtype=tg.uint8) for _ in range(world)]
    dist.all_gather(outs, t)
    gathered = [json.loads(bytes(o.numpy()).decode().strip()) for o in outs]
    if rank == 0:
        buckets = [[n for n, p in model.named_parameters() if any(p is ddp._params[i] for i in b.params)]
                   for b in ddp._buckets]
        sizes = [int(b.flat.nbytes) for b in ddp._buckets]
        print("RESULT " + json.dumps({"world": world, "ranks": gathered, "buckets": buckets, "bytes": sizes}),
              flush=True)
    dist.destroy_process_group()


def run(n, args):
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = here if os.path.exists(here) else "mpiexec"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--batch", str(args.batch), "--dtype", args.dtype,
           *(["--bucket-cap-mb", str(args.bucket_cap_mb)] if args.bucket_cap_mb is not None else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not line:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return json.loads(line[0][7:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=60, help="measured steps per configuration")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=128, help="global batch (strong) / per-process batch (weak)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--bucket-cap-mb", type=float, default=None,
                   help="DDP's bucket_cap_mb (default: torch's, 25 MiB after a first bucket of 1 MiB)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    one, two = run(1, args), run(2, args)
    print(f"W2 MLP 784-512-512-10, SGD, {args.dtype}, {args.steps} steps per configuration (medians); "
          f"DDP buckets (bucket_cap_mb={args.bucket_cap_mb}): {two['buckets']}")
    last = two["bytes"][-1]
    print(f"bucket sizes {two['bytes']} bytes: the last bucket ({100 * last / sum(two['bytes']):.0f}% of the bytes) "
          f"holds the backward's last gradients; it starts when they are ready and overlaps only the rest of the "
          f"backward after them (the engine's tail up to its final callback)")
    for scaling in ("strong", "weak"):
        t1 = one["ranks"][0][scaling]["overlap"]["step_ms"]
        print(f"\n{scaling} scaling (batch {args.batch}{' global' if scaling == 'strong' else ' per process'})")
        print(f"  1 process : step {t1:7.2f} ms")
        for r, res in enumerate(two["ranks"]):
            o, a, alone = res[scaling]["overlap"], res[scaling]["after"], res[scaling]["alone"]["step_ms"]
            eff = t1 / (2 * o["step_ms"]) if scaling == "strong" else t1 / o["step_ms"]
            hidden = max(0.0, 1 - o["wait_ms"] / alone)
            print(f"  2 processes, rank {r}: step {o['step_ms']:7.2f} ms (efficiency {eff:.2f}); all-reduce alone "
                  f"{alone:.2f} ms, waited after the backward {o['wait_ms']:.2f} ms: hidden {100 * hidden:.0f}%")
            cut = 1 - o["wait_ms"] / a["wait_ms"] if a["wait_ms"] > 0 else 0.0
            print(f"      all-reduce after the backward instead: step {a['step_ms']:7.2f} ms, waited "
                  f"{a['wait_ms']:.2f} ms (the overlap cuts the wait by {100 * cut:.0f}%)")


if __name__ == "__main__":
    main()

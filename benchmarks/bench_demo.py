"""The demo's training step (python -m tracegrad.demo): tracegrad eager against torch eager.

One step = zero_grad, forward of the demo's CNN (conv-relu-pool x2, linear-relu-linear)
on a batch of 64 8x8 images, cross-entropy, backward, Adam. Both libraries run the same
model from the same weights on the same batches, in one process, interleaved; the
results are checked to agree before anything is timed. Reported: the first step (cold:
tracegrad derives and generates its backward program there), then the median of the
steady-state steps and the ratio tracegrad / torch.

Both libraries get the same number of threads, for each count in --threads (default
"1,2"): torch through set_num_threads, numpy's BLAS through threadpoolctl when it is
installed (it comes with scikit-learn, a demo extra); without it numpy keeps its own
default and a line says so. On a machine whose cores are busy with other work, the
2-thread numbers of both libraries mostly measure waiting for the other core.

Run: python benchmarks/bench_demo.py [--repeat 30] [--threads 1,2] [--batch 64] [--json out.json]
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


def build(lib):
    """The demo's DigitsCNN, written once for either library."""
    nn, F = lib.nn, lib.nn.functional

    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
            self.fc1 = nn.Linear(32 * 2 * 2, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = lib.flatten(x, 1)
            x = F.relu(self.fc1(x))
            return self.fc2(x)
    return DigitsCNN()


def make_step(lib, model, batches):
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    F = lib.nn.functional
    data = [(lib.tensor(x), lib.tensor(y)) for x, y in batches]
    state = {"i": 0}

    def step():
        x, y = data[state["i"] % len(data)]
        state["i"] += 1
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def limit_threads(n):
    import torch
    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print(f"threadpoolctl is not installed: numpy's BLAS keeps its default thread count (torch uses {n})")
        return None
    return threadpool_limits(limits=n, user_api="blas")


def run(repeat, threads, batch):
    limiter = limit_threads(threads)
    try:
        return _run(repeat, threads, batch)
    finally:
        if limiter is not None:
            limiter.restore_original_limits()


def _run(repeat, threads, batch):
    import torch
    import tracegrad
    rng = np.random.default_rng(0)
    from tracegrad.demo import load_data
    x_tr, y_tr, _, _ = load_data()
    batches = []
    for _ in range(8):
        idx = rng.choice(len(y_tr), batch, replace=False)
        batches.append((x_tr[idx], y_tr[idx]))

    torch.manual_seed(0)
    m_t = build(torch)
    m_g = build(tracegrad)
    m_g.load_state_dict({k: tracegrad.tensor(v.numpy()) for k, v in m_t.state_dict().items()})
    steps = {"torch": make_step(torch, m_t, batches), "tracegrad": make_step(tracegrad, m_g, batches)}

    first = {}
    losses = {}
    for k, f in steps.items():
        t0 = time.perf_counter()
        losses[k] = [f().item()]
        first[k] = time.perf_counter() - t0
    for _ in range(9):
        for k, f in steps.items():
            losses[k].append(f().item())
    # check before timing: the same training trajectory
    np.testing.assert_allclose(losses["tracegrad"], losses["torch"], rtol=1e-4, atol=1e-5)

    times = {k: [] for k in steps}
    for _ in range(repeat):                          # interleaved rounds of 5 steps each
        for k, f in steps.items():
            t0 = time.perf_counter()
            for _ in range(5):
                f()
            times[k].append((time.perf_counter() - t0) / 5)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return {"threads": threads, "batch": batch, "first_step_ms": {k: v * 1e3 for k, v in first.items()},
            "median_step_ms": med, "ratio_tracegrad_vs_torch": med["tracegrad"] / med["torch"]}


def main(argv=None):
    from tracegrad._cli import HelpFormatter
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0],
                                 formatter_class=HelpFormatter)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts to measure")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    results = []
    for n in (int(t) for t in args.threads.split(",")):
        r = run(args.repeat, n, args.batch)
        results.append(r)
        print(f"demo training step (batch {r['batch']}, {r['threads']} thread(s)), forward + backward + Adam:")
        print(f"  first step      torch {r['first_step_ms']['torch']:8.2f} ms   tracegrad "
              f"{r['first_step_ms']['tracegrad']:8.2f} ms")
        print(f"  median step     torch {r['median_step_ms']['torch']:8.2f} ms   tracegrad "
              f"{r['median_step_ms']['tracegrad']:8.2f} ms")
        print(f"  ratio tracegrad / torch: {r['ratio_tracegrad_vs_torch']:.2f}x")
    if args.json:
        meta = {"python": sys.version.split()[0], "numpy": np.__version__, "machine": platform.machine(),
                "processor": platform.processor()}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()

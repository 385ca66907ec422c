"""Train a small convolutional network on handwritten digits, written as a PyTorch user
would write it, with only the import changed.

  python -m tracegrad.demo [--epochs 15] [--compile] [--device cuda] [--out demo_out]
  mpiexec -n 2 python -m tracegrad.demo --distributed     # data-parallel over MPI processes

The data is scikit-learn's `load_digits` (1,797 real 8x8 grey-scale images, shipped with
scikit-learn: no download), split 80/20 with a fixed seed. The demo prints a progress bar
per epoch, the test accuracy, the time per training step and the start of the graph that
tracegrad recorded for the loss; it writes the training curves (loss and accuracy per
epoch) to <out>/training_curves.png and the trained weights to <out>/digits_cnn.npz
(tracegrad.save's format). Needs the demo extras: scikit-learn, matplotlib, tqdm.

With --distributed, every process started by mpiexec holds a replica of the model wrapped
in DistributedDataParallel and takes its share of each batch of --batch-size images; the
gradients are averaged across the processes in the backward, so the replicas take the
steps one process takes on the whole batches (the same accuracy, to round-off). Rank 0
reports and writes the outputs. Needs the distributed extra (mpi4py, mpich).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import tracegrad as torch
import tracegrad.nn as nn
import tracegrad.nn.functional as F
import tracegrad.distributed as dist
from tracegrad._cli import HelpFormatter


class DigitsCNN(nn.Module):
    """conv(1->16) relu pool -> conv(16->32) relu pool -> linear(128->64) relu -> linear(64->10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)        # 16 x 4 x 4
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)        # 32 x 2 x 2
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def load_data(seed=0, subset=None):
    """(x_train, y_train, x_test, y_test) as float32 images (N, 1, 8, 8) in [0, 1] and int64 labels."""
    from sklearn.datasets import load_digits  # lazy: sklearn is optional
    from sklearn.model_selection import train_test_split  # lazy: sklearn is optional
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    if subset is not None:
        x, y = x[:subset], y[:subset]
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y if subset is None
                                              else None)
    return x_tr, y_tr, x_te, y_te


def accuracy(model, x, y, batch_size=512):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y), batch_size):
            logits = model(x[i:i + batch_size])
            correct += int((logits.argmax(1) == y[i:i + batch_size]).sum())
    model.train()
    return correct / len(y)


def check_device(name):
    """The device to train on; a clear message (and None) when it cannot be used."""
    if name == "cpu":
        return "cpu"
    try:
        torch.zeros(1, device=name)
    except RuntimeError as e:
        print(f"--device {name}: not available here ({e}). Run without --device to train on the CPU.",
              file=sys.stderr)
        return None
    return name


def short_graph(graph, lines=14):
    text = str(graph).splitlines()
    if len(text) > lines:
        text = text[:lines] + [f"    ... ({len(text) - lines} more lines)"]
    return "\n".join(text)


def plot_curves(history, path):
    import matplotlib  # lazy: matplotlib is optional
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib is optional
    epochs = range(1, len(history["loss"]) + 1)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    a1.plot(epochs, history["loss"], marker="o")
    a1.set_xlabel("epoch")
    a1.set_ylabel("training loss (cross-entropy)")
    a1.set_title("loss")
    a2.plot(epochs, [100 * a for a in history["train_acc"]], marker="o", label="train")
    a2.plot(epochs, [100 * a for a in history["test_acc"]], marker="o", label="test")
    a2.set_xlabel("epoch")
    a2.set_ylabel("accuracy (%)")
    a2.set_title("accuracy")
    a2.legend()
    fig.suptitle("tracegrad: small CNN on scikit-learn's digits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m tracegrad.demo", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--lr-decay", type=float, default=0.8, help="learning rate factor per epoch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true", help="train through tracegrad.compile")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--out", default="demo_out", help="directory for the PNG and the saved weights")
    p.add_argument("--subset", type=int, default=None, help="use only the first N images (quick checks)")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads for numpy (default 1: this model's matrices are small, and more threads "
                        "mostly add synchronisation)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel training: run under `mpiexec -n N`; each process takes 1/N of every batch")
    return p.parse_args(argv)


def limit_blas_threads(n):
    """Cap numpy's BLAS thread pool (threadpoolctl comes with scikit-learn); returns the
    limiter, which restores the previous setting when closed."""
    try:
        from threadpoolctl import threadpool_limits  # lazy: threadpoolctl is optional
    except ImportError:
        return None
    return threadpool_limits(limits=n, user_api="blas")


def main(argv=None):
    args = parse_args(argv)
    device = check_device(args.device)
    if device is None:
        return 2
    if args.distributed:
        if device != "cpu":
            print("--distributed trains on the CPU (the MPI backend averages CPU tensors)", file=sys.stderr)
            return 2
        dist.init_process_group("mpi")
    limiter = limit_blas_threads(args.threads)
    try:
        return train(args, device)
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
        if args.distributed:
            dist.destroy_process_group()


def train(args, device):
    from tqdm import tqdm  # lazy: tqdm is optional
    rank, world = 0, 1
    if args.distributed:
        rank, world = dist.get_rank(), dist.get_world_size()
    show = print if rank == 0 else (lambda *a, **k: None)
    quiet = args.quiet or rank != 0
    torch.manual_seed(args.seed)
    x_tr, y_tr, x_te, y_te = load_data(args.seed, args.subset)
    x_tr, y_tr = torch.tensor(x_tr, device=device), torch.tensor(y_tr, device=device)
    x_te, y_te = torch.tensor(x_te, device=device), torch.tensor(y_te, device=device)
    show(f"digits: {len(y_tr)} training and {len(y_te)} test images of 8x8 pixels, 10 classes")

    model = DigitsCNN().to(device)
    show(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    net = model
    if args.distributed:
        # rank 0's initial weights reach every replica; the backward averages the gradients
        net = nn.parallel.DistributedDataParallel(torch.compile(model) if args.compile else model)
        show(f"data-parallel on {world} MPI processes: each takes 1/{world} of every batch of {args.batch_size}"
             + (" (the model's forward compiled)" if args.compile else ""))

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss

    def shard_step(xb, yb, batch):
        # this rank's images of a batch of `batch`: the sum of their losses over the batch size,
        # times the world size, which DDP's average divides back out: the batch's mean loss
        optimizer.zero_grad()
        loss = F.cross_entropy(net(xb), yb, reduction="sum") * (world / batch)
        loss.backward()
        optimizer.step()
        return loss

    step = train_step
    if args.distributed:
        step = shard_step
    elif args.compile:
        # the whole step (forward, backward, Adam's update) as one program; the parameters,
        # their .grad and Adam's state are written back after every call
        step = torch.compile(train_step)
        print("training through tracegrad.compile (the whole step: forward, backward and Adam as one program)")

    rng = np.random.default_rng(args.seed)
    history = {"loss": [], "train_acc": [], "test_acc": []}
    step_times = []
    loss = None
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_tr))
        batches = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
        total, seen = 0.0, 0
        bar = tqdm(batches, desc=f"epoch {epoch:2d}/{args.epochs}", unit="step", leave=True, disable=quiet)
        for idx in bar:
            if args.distributed:
                mine = idx[rank::world]
                xb, yb = x_tr[torch.tensor(mine)], y_tr[torch.tensor(mine)]
                t0 = time.perf_counter()
                loss = step(xb, yb, len(idx))
                step_times.append(time.perf_counter() - t0)
                total += loss.item() * len(idx) / world     # this rank's part of the batch's loss sum
            else:
                xb, yb = x_tr[torch.tensor(idx)], y_tr[torch.tensor(idx)]
                t0 = time.perf_counter()
                loss = step(xb, yb)
                step_times.append(time.perf_counter() - t0)
                total += loss.item() * len(idx)
            seen += len(idx)
            bar.set_postfix(loss=f"{total / seen * world:.4f}" if args.distributed else f"{total / seen:.4f}")
        if args.distributed:
            t = torch.tensor([total], dtype=torch.float64)
            dist.all_reduce(t)
            total = t.item()
        for group in optimizer.param_groups:
            group["lr"] *= args.lr_decay
        history["loss"].append(total / seen)
        history["train_acc"].append(accuracy(model, x_tr, y_tr))
        history["test_acc"].append(accuracy(model, x_te, y_te))
        if not quiet:
            bar.write(f"epoch {epoch:2d}: loss {total / seen:.4f}, train accuracy "
                      f"{100 * history['train_acc'][-1]:.1f}%, test accuracy {100 * history['test_acc'][-1]:.1f}%")

    test_acc = history["test_acc"][-1]
    steady = step_times[1:] or step_times
    result = {"history": history, "test_accuracy": test_acc, "step_ms": 1e3 * statistics.median(steady)}
    if rank != 0:
        return result
    print()
    print(f"test accuracy: {100 * test_acc:.2f}% ({round(test_acc * len(y_te))}/{len(y_te)})")
    print(f"time per training step (batch {args.batch_size}, forward + backward + Adam"
          f"{f', on {world} processes' if args.distributed else ''}): median "
          f"{1e3 * statistics.median(steady):.2f} ms; first step {1e3 * step_times[0]:.1f} ms")
    print()
    if args.distributed:
        print(f"the gradients were averaged across {world} processes in the backward (DistributedDataParallel)")
    elif args.compile and step.last_program is not None:
        print("the compiled step's traced program (forward, backward and Adam's update):")
        print(short_graph(step.last_program.stages[0][1]))
    elif args.compile:
        print("the step ran eagerly (its warning above says why)")
    else:
        print("the graph tracegrad recorded for the last loss (tracegrad.ir.graph_of(loss)):")
        print(short_graph(torch.ir.graph_of(loss)))

    os.makedirs(args.out, exist_ok=True)
    png = os.path.join(args.out, "training_curves.png")
    plot_curves(history, png)
    weights = os.path.join(args.out, "digits_cnn.npz")
    torch.save(model.state_dict(), weights)
    print()
    print(f"wrote {png} and {weights}")
    return dict(result, png=png, weights=weights)


if __name__ == "__main__":
    r = main()
    sys.exit(r if isinstance(r, int) else 0)

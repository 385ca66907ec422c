"""Train a character-level language model (an LSTM) on Python's own standard-library sources,
written as a PyTorch user would write it, with only the import changed.

  python -m tracegrad.demo_text [--seconds 60] [--compile] [--out demo_out]

The text is the source of a fixed list of standard-library modules (on every machine that
has Python: no download), split 90/10 into training and held-out text. The model embeds
each character, runs a one-layer LSTM over windows of `--seq` characters and predicts the
next character; it trains with Adam, a OneCycle learning-rate schedule, gradient clipping
and a DataLoader, for `--seconds` of wall time. It prints a progress bar, the held-out loss
against the unigram baseline (the entropy of the character frequencies), and text sampled
from the model; it writes the loss curve to <out>/text_loss.png. `--compile` compiles the
whole training step (forward, backward, clipping and the update) into one program. Needs the demo extras: matplotlib, tqdm.
"""
import argparse
import math
import os
import sysconfig
import time

import numpy as np

import tracegrad as torch
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from tracegrad.utils.data import DataLoader, Dataset
from tracegrad._cli import HelpFormatter
from tracegrad.demo import limit_blas_threads

MODULES = ("string", "textwrap", "shlex", "fnmatch", "glob", "bisect", "heapq", "colorsys", "calendar", "getopt",
           "abc", "copy", "queue", "sched", "this", "keyword", "token", "reprlib", "struct", "base64", "difflib",
           "cmd", "code", "dis", "ast", "tokenize", "inspect", "argparse")


def load_text(max_chars=400_000):
    """The sources of MODULES from this Python's standard library, concatenated."""
    root = sysconfig.get_paths()["stdlib"]
    parts = []
    for name in MODULES:
        path = os.path.join(root, name + ".py")
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                parts.append(f.read())
    text = "\n".join(parts)[:max_chars]
    text = "".join(c if c == "\n" or 32 <= ord(c) < 127 else "?" for c in text)      # printable ASCII
    if len(text) < 10_000:
        raise RuntimeError(f"found too little standard-library source under {root}")
    return text


class Windows(Dataset):
    """(input, target) windows of `seq` characters; the target is the input shifted by one."""

    def __init__(self, ids, seq):
        self.ids, self.seq = ids, seq

    def __len__(self):
        return (len(self.ids) - 1) // self.seq

    def __getitem__(self, i):
        s = i * self.seq
        return self.ids[s:s + self.seq], self.ids[s + 1:s + self.seq + 1]


class CharLSTM(nn.Module):
    def __init__(self, vocab, embed=32, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, state=None):
        out, state = self.lstm(self.embed(x), state)
        return self.head(out), state


def unigram_entropy(ids, vocab):
    p = np.bincount(ids, minlength=vocab) / len(ids)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def evaluate(model, ids, seq, batch=64, max_windows=256):
    model.eval()
    data = Windows(ids, seq)
    n = min(len(data), max_windows)
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, n, batch):
            xs, ys = zip(*(data[i] for i in range(start, min(start + batch, n))))
            x, y = torch.tensor(np.stack(xs)), torch.tensor(np.stack(ys))
            logits, _ = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
            count += y.numel()
    model.train()
    return total / count


def sample(model, chars, start, length=300, temperature=0.8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    idx = {c: i for i, c in enumerate(chars)}
    model.eval()
    out = list(start)
    with torch.no_grad():
        x = torch.tensor([[idx[c] for c in start if c in idx]])
        logits, state = model(x)
        for _ in range(length):
            probs = F.softmax(logits[0, -1] / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=gen).item()
            out.append(chars[nxt])
            logits, state = model(torch.tensor([[nxt]]), state)
    model.train()
    return "".join(out)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m tracegrad.demo_text", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="training time budget")
    p.add_argument("--seq", type=int, default=32, help="characters per training window")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=96)
    p.add_argument("--lr", type=float, default=1e-2, help="peak learning rate of the OneCycle schedule")
    p.add_argument("--max-steps", type=int, default=1000, help="schedule length (training stops at the budget)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true", help="compile the training step with tracegrad.compile")
    p.add_argument("--out", default="demo_out", help="directory for the loss curve PNG")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads for numpy")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    limiter = limit_blas_threads(args.threads)       # small matrices: more BLAS threads mostly synchronise
    try:
        return _train(args)
    finally:
        if limiter is not None:
            limiter.restore_original_limits()


def _train(args):
    torch.manual_seed(args.seed)
    text = load_text()
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.int64) if len(chars) < 8 else \
        np.searchsorted(np.array(chars), np.array(list(text))).astype(np.int64)
    split = int(len(ids) * 0.9)
    train_ids, val_ids = ids[:split], ids[split:]
    vocab = len(chars)
    baseline = unigram_entropy(train_ids, vocab)
    model = CharLSTM(vocab, hidden=args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # the learning rate cycles; Adam's beta1 stays (a compiled step reads the rate at every call)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.max_steps + 1,
                                                cycle_momentum=False)
    loader = DataLoader(Windows(train_ids, args.seq), batch_size=args.batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(args.seed))

    def train_step(x, y):
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    # --compile: forward, backward, clipping and Adam's update as one program
    step = torch.compile(train_step) if args.compile else train_step
    print(f"{len(text):,} characters of standard-library source, {vocab} distinct; unigram baseline "
          f"{baseline:.3f} nats/char")
    from tqdm import tqdm  # lazy: tqdm is optional
    losses, steps = [], 0
    t0 = time.perf_counter()
    bar = tqdm(total=args.max_steps, unit="step", disable=args.quiet)
    done = False
    while not done:
        for x, y in loader:
            loss = step(x, y)
            sched.step()
            losses.append(loss.item())
            steps += 1
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
            if time.perf_counter() - t0 > args.seconds or steps >= args.max_steps:
                done = True
                break
    bar.close()
    train_time = time.perf_counter() - t0
    val = evaluate(model, val_ids, args.seq)
    print(f"{steps} steps in {train_time:.1f} s ({1000 * train_time / steps:.1f} ms/step)")
    print(f"held-out loss {val:.3f} nats/char against the unigram baseline {baseline:.3f} "
          f"({val / baseline:.0%} of it)")
    print("sampled text:\n" + sample(model, chars, "def ", seed=args.seed))
    if not args.no_plot:
        os.makedirs(args.out, exist_ok=True)
        import matplotlib  # lazy: matplotlib is optional
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: matplotlib is optional
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(losses, lw=0.8, label="training loss")
        ax.axhline(baseline, color="gray", ls="--", label="unigram baseline")
        ax.axhline(val, color="C1", ls=":", label="held-out loss")
        ax.set_xlabel("step")
        ax.set_ylabel("nats / char")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "text_loss.png"), dpi=100)
        print(f"loss curve: {os.path.join(args.out, 'text_loss.png')}")
    return {"val": val, "baseline": baseline, "steps": steps, "seconds": train_time}


if __name__ == "__main__":
    main()

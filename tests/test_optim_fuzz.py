"""Optimizers with random options against torch, in float64: random parameter shapes (0-dim
too), one or two param groups, a learning-rate scheduler, steps with fresh gradients, a None
gradient, zero_grad (to zeros or None) and a state_dict round trip into a new optimizer. After
every step the parameters and learning rates must equal torch's.

Run more seeds: python tests/test_optim_fuzz.py LO HI
"""
import os
import random
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

MAX = [False, False, True]      # maximize, a third of the time


def _m(r):
    return r.choice(MAX)


OPTS = {
    "SGD": lambda r: dict(lr=r.choice([0.1, 0.01]), momentum=r.choice([0, 0.9]), dampening=r.choice([0, 0.1]),
                          weight_decay=r.choice([0, 0.01]), nesterov=False, maximize=_m(r)),
    "SGDn": lambda r: dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=r.choice([0, 0.01]), maximize=_m(r)),
    "Adam": lambda r: dict(lr=r.choice([1e-3, 0.1]), betas=r.choice([(0.9, 0.999), (0.5, 0.9)]),
                           eps=r.choice([1e-8, 1e-3]), weight_decay=r.choice([0, 0.1]), amsgrad=r.random() < 0.5,
                           maximize=_m(r)),
    "AdamW": lambda r: dict(lr=r.choice([1e-3, 0.1]), weight_decay=r.choice([0, 0.01, 0.5]),
                            amsgrad=r.random() < 0.5, maximize=_m(r)),
    "Adagrad": lambda r: dict(lr=r.choice([0.1, 0.01]), lr_decay=r.choice([0, 0.1]), weight_decay=r.choice([0, 0.1]),
                              initial_accumulator_value=r.choice([0, 0.5]), eps=r.choice([1e-10, 1e-3]),
                              maximize=_m(r)),
    "RMSprop": lambda r: dict(lr=r.choice([0.01, 0.001]), alpha=r.choice([0.99, 0.5]), eps=1e-8,
                              weight_decay=r.choice([0, 0.1]), momentum=r.choice([0, 0.9]),
                              centered=r.random() < 0.5, maximize=_m(r)),
    "Adamax": lambda r: dict(lr=r.choice([0.002, 0.1]), weight_decay=r.choice([0, 0.1]), maximize=_m(r)),
    "NAdam": lambda r: dict(lr=r.choice([0.002, 0.1]), weight_decay=r.choice([0, 0.1]),
                            momentum_decay=r.choice([4e-3, 1e-2]), decoupled_weight_decay=r.random() < 0.5,
                            maximize=_m(r)),
    "RAdam": lambda r: dict(lr=r.choice([1e-3, 0.1]), weight_decay=r.choice([0, 0.1]),
                            decoupled_weight_decay=r.random() < 0.5, maximize=_m(r)),
    "Adadelta": lambda r: dict(lr=r.choice([1.0, 0.5]), rho=r.choice([0.9, 0.5]), weight_decay=r.choice([0, 0.1]),
                               maximize=_m(r)),
    "Rprop": lambda r: dict(lr=r.choice([0.01, 0.1]), etas=r.choice([(0.5, 1.2), (0.3, 1.5)]), step_sizes=(1e-6, 50),
                            maximize=_m(r)),
    "ASGD": lambda r: dict(lr=r.choice([0.01, 0.1]), lambd=r.choice([1e-4, 1e-2]), alpha=0.75, t0=r.choice([1e6, 2]),
                           weight_decay=r.choice([0, 0.1]), maximize=_m(r)),
}
SCHED = [None, "StepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR", "ReduceLROnPlateau",
         "LinearLR", "PolynomialLR", "CosineAnnealingWarmRestarts"]


def gen(seed):
    r = random.Random(seed)
    name = r.choice(list(OPTS))
    opts = OPTS[name](r)
    shapes = [r.choice([(3,), (2, 3), (4, 1), ()]) for _ in range(r.randint(1, 3))]
    two_groups = r.random() < 0.3 and len(shapes) > 1
    g2 = {"lr": 0.05} if two_groups else None
    sched = r.choice(SCHED)
    if name in ("Adadelta", "Rprop", "Adagrad", "ASGD") and sched in ("OneCycleLR", "CyclicLR"):
        sched = None
    steps = []
    for k in range(r.randint(2, 8)):
        ev = r.random()
        steps.append(("none" if ev < 0.1 else "zero" if ev < 0.2 else "sd" if ev < 0.3 else "grad", r.random() < 0.2))
    return name, opts, shapes, g2, sched, steps, r.randint(0, 10**6)


def run(L, seed):
    name, opts, shapes, g2, sched, steps, dseed = gen(seed)
    rs = np.random.RandomState(dseed)
    ps = [L.nn.Parameter(L.tensor(rs.uniform(-1, 1, size=s), dtype=L.float64)) for s in shapes]
    cls = getattr(L.optim, "SGD" if name == "SGDn" else name)
    if g2:
        groups = [{"params": ps[:1]}, {"params": ps[1:], **g2}]
    else:
        groups = ps
    opt = cls(groups, **opts)
    sch = None
    if sched == "StepLR":
        sch = L.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    elif sched == "ExponentialLR":
        sch = L.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
    elif sched == "CosineAnnealingLR":
        sch = L.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=0.001)
    elif sched == "OneCycleLR":
        sch = L.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20)
    elif sched == "CyclicLR":
        sch = L.optim.lr_scheduler.CyclicLR(opt, base_lr=0.001, max_lr=0.1, step_size_up=3)
    elif sched == "ReduceLROnPlateau":
        sch = L.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    elif sched == "LinearLR":
        sch = L.optim.lr_scheduler.LinearLR(opt, start_factor=0.3, total_iters=4)
    elif sched == "PolynomialLR":
        sch = L.optim.lr_scheduler.PolynomialLR(opt, total_iters=5, power=2.0)
    elif sched == "CosineAnnealingWarmRestarts":
        sch = L.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    trace = []
    for kind, partial in steps:
        if kind == "zero":
            opt.zero_grad(set_to_none=partial)
        elif kind == "sd":
            sd = opt.state_dict()
            opt2 = cls(groups if not g2 else [{"params": ps[:1]}, {"params": ps[1:], **g2}], **opts)
            opt2.load_state_dict(sd)
            opt = opt2
            if sch is not None and sched != "ReduceLROnPlateau":
                sch.optimizer = opt
        else:
            for i, p in enumerate(ps):
                if kind == "none" and i == 0:
                    p.grad = None
                else:
                    p.grad = L.tensor(rs.uniform(-1, 1, size=p.shape), dtype=L.float64)
            loss = float(rs.uniform(0, 1))
            opt.step()
            if sch is not None:
                if sched == "ReduceLROnPlateau":
                    sch.step(loss)
                else:
                    sch.step()
        trace.append(([p.detach().numpy().copy() for p in ps], [g["lr"] for g in opt.param_groups]))
    return trace


def compare(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            a = run(torch, seed)
        except Exception as e:
            a = ("raise", type(e).__name__, str(e)[:100])
        try:
            b = run(tg, seed)
        except Exception as e:
            b = ("raise", type(e).__name__, str(e)[:100])
    if isinstance(a, tuple) or isinstance(b, tuple):
        if isinstance(a, tuple) and isinstance(b, tuple) and a[1] == b[1]:
            return []
        return [f"raise: {a if isinstance(a, tuple) else 'ok'} / {b if isinstance(b, tuple) else 'ok'}"]
    for k, ((pa, la), (pb, lb)) in enumerate(zip(a, b)):
        if not np.allclose(la, lb, rtol=1e-12, atol=0):
            return [f"step {k} lr {la} vs {lb}"]
        for i, (x, y) in enumerate(zip(pa, pb)):
            if not np.allclose(x, y, rtol=1e-10, atol=1e-12):
                return [f"step {k} param {i}: {x.ravel()[:3]} vs {y.ravel()[:3]}"]
    return []


SEEDS = int(os.environ.get("TRACEGRAD_OPTIM_FUZZ", "200"))


@pytest.mark.parametrize("chunk", range(0, SEEDS, 50))
def test_optimizers_match_torch(chunk):
    bad = {}
    for seed in range(chunk, min(chunk + 50, SEEDS)):
        p = compare(seed)
        if p:
            bad[seed] = (gen(seed)[:2], p)
    assert not bad, bad


def test_sgd_momentum_buffer_of_a_0dim_parameter_moves():
    """With weight decay or maximize, numpy's arithmetic on the 0-dim gradient gave a number: the
    momentum buffer made from it never changed (the parameter moved by its first step's buffer)."""
    got = []
    for m in (tg, torch):
        q = m.nn.Parameter(m.tensor(0.2, dtype=m.float64))
        opt = m.optim.SGD([q], lr=0.05, momentum=0.9, weight_decay=0.01, maximize=True)
        row = []
        for k in range(3):
            q.grad = m.tensor(0.3 * (k + 1), dtype=m.float64)
            opt.step()
            row.append((q.item(), opt.state[q]["momentum_buffer"].item(), opt.state[q]["momentum_buffer"].dim()))
        got.append(row)
    np.testing.assert_allclose(np.array(got[0]), np.array(got[1]), rtol=1e-14)


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    bad = 0
    for s in range(lo, hi):
        p = compare(s)
        if p:
            bad += 1
            g = gen(s)
            print(s, g[0], g[1], g[4], [st[0] for st in g[5]], "|", p[0][:250])
    print("bad", bad, "of", hi - lo)

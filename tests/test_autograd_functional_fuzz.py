"""autograd.functional at random against torch: vjp, jvp, jacobian, hessian, vhp and hvp of
random functions of one tensor or a tuple of them, returning one tensor or a tuple (an output
that does not depend on an input, one independent of every input, a 0-dim one), with
create_graph, strict and vectorize. Compared: the result's nesting (tensor,
tuple, tuple of tuples), every value, requires_grad, and each error's type.

Run more seeds: python tests/test_autograd_functional_fuzz.py LO HI
"""
import random
import sys
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

APIS = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]
TERMS = ["sin", "sq", "mul", "exp_sum", "const", "tanh_other", "cube"]


def gen(seed):
    r = random.Random(seed)
    api = r.choice(APIS)
    n_in = r.choice([1, 1, 2])
    tuple_in = n_in > 1 or r.random() < 0.3
    shapes = [r.choice([(3,), (2, 2), ()]) for _ in range(n_in)]
    scalar = api in ("hessian", "vhp", "hvp")
    n_out = 1 if scalar else r.choice([1, 1, 2])
    tuple_out = n_out > 1 or (not scalar and r.random() < 0.3)
    outs = []
    for _ in range(n_out):
        terms = [(r.choice(TERMS), r.randrange(n_in), r.randrange(n_in)) for _ in range(r.randint(1, 2))]
        outs.append((terms, scalar or r.random() < 0.3))
    opts = dict(create_graph=r.random() < 0.3, strict=r.random() < 0.25)
    # (strategy="forward-mode": tests/test_functional.py compares jacobian's with torch's and holds
    # hessian's refusal)
    if api in ("jacobian", "hessian"):
        opts["vectorize"] = r.random() < 0.4
    v_none = r.random() < 0.15
    return api, tuple_in, shapes, tuple_out, outs, opts, v_none, r.randint(0, 10**6)


def term(L, kind, a, b):
    if kind == "sin":
        return a.sin()
    if kind == "sq":
        return a * a
    if kind == "mul":
        return a * b.sum() if a.shape != b.shape else a * b
    if kind == "exp_sum":
        return a.exp().sum() + a * 0
    if kind == "const":
        return L.ones_like(a) * 2
    if kind == "tanh_other":
        return b.tanh().sum() * L.ones_like(a)
    return a * a * a


def make(L, spec):
    api, tuple_in, shapes, tuple_out, outs, opts, v_none, _ = spec

    def f(*xs):
        res = []
        for terms, reduce in outs:
            y = None
            for kind, i, j in terms:
                t = term(L, kind, xs[i], xs[j])
                y = t if y is None else (y + t if y.shape == t.shape else y.sum() + t.sum())
            res.append(y.sum() if reduce else y)
        return tuple(res) if tuple_out else res[0]
    return f


def structure(x):
    if isinstance(x, tuple):
        return tuple(structure(e) for e in x)
    if x is None:
        return None
    return ("T", tuple(x.shape), bool(x.requires_grad))


def values(x):
    if isinstance(x, tuple):
        return [values(e) for e in x]
    return None if x is None else x.detach().numpy().copy()


def run(L, seed, compiled=False):
    spec = gen(seed)
    api, tuple_in, shapes, tuple_out, outs, opts, v_none, dseed = spec
    rs = np.random.RandomState(dseed)
    xs = tuple(L.tensor(rs.uniform(-1, 1, size=s), dtype=L.float64) for s in shapes)
    inputs = xs if tuple_in else xs[0]
    f = make(L, spec)
    if compiled:
        f = tg.compile(f)
    F = L.autograd.functional
    try:
        if api in ("vjp", "jvp", "vhp", "hvp"):
            if api == "vjp":
                with L.no_grad():
                    out = f(*xs)
                like = out
            else:
                like = inputs
            v = None if v_none else (tuple(L.tensor(rs.uniform(-1, 1, size=tuple(o.shape)), dtype=L.float64)
                                           for o in like) if isinstance(like, tuple)
                                     else L.tensor(rs.uniform(-1, 1, size=tuple(like.shape)), dtype=L.float64))
            res = getattr(F, api)(f, inputs, v, **opts)
        else:
            res = getattr(F, api)(f, inputs, **opts)
    except Exception as e:                 # noqa: BLE001 - the error type is compared
        return ("error", type(e).__name__, str(e).split("\n")[0][:100])
    return ("ok", structure(res), values(res))


def same(a, b, path=""):
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (u, v) in enumerate(zip(a, b)):
            d = same(u, v, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=1e-14):
            return None
    elif a is None and b is None:
        return None
    return f"{path}: {a!r} vs {b!r}"


def check(seed):
    for compiled in (False, True):
        check_one(seed, compiled)


def check_one(seed, compiled):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = run(torch, seed)
        got = run(tg, seed, compiled)
    assert got[0] == want[0], (seed, got, want, gen(seed))
    if want[0] == "error":
        assert got[1] == want[1], (seed, got, want, gen(seed))
        return
    assert got[1] == want[1], (seed, "structure", got[1], want[1], gen(seed))
    d = same(got[2], want[2])
    assert d is None, (seed, d, gen(seed))


@pytest.mark.parametrize("chunk", range(8))
def test_functional_api_matches_torch(chunk):
    for seed in range(chunk * 25, chunk * 25 + 25):
        check(seed)


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    bad = []
    for s in range(lo, hi):
        try:
            check(s)
        except AssertionError as e:
            bad.append(s)
            print(str(e)[:700])
        except Exception as e:            # noqa: BLE001
            bad.append(s)
            print(s, "CRASH", type(e).__name__, str(e)[:300])
    print("bad", bad)

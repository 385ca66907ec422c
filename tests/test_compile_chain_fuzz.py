"""A fuzzer of chains (tracegrad/chain.py) against the same calls run as written.

Each seed draws a random program (test_compile_random's), compiles it twice, and takes its
first derivative (create_graph) and a second one outside it, call after call: once through a
compiled function whose chains speculate, once through one whose chains are off (the calls
run as written, one program each). At one call after the chain speculates, one thing a user
might do happens at a random point of the chain: read a value, use a result in another op,
register a hook, write an input in place, enter no_grad, drop the results, ask for a grad_fn,
change a constant (in some seeds for good, so that a second chain speculates), differentiate a
result again, write an input through .data after the last step (whose results alive then take
their values when read: from copies of the inputs as the call took them). Both runs must then agree: the same values
(within test_compile_random's tolerance: the whole chain is one program), the same errors,
the same grad_fn names, the same hook calls; the one difference allowed is the documented
one, the in-place error a speculated chain raises where an input changed before its last
step. Run more seeds: `python tests/test_compile_chain_fuzz.py LO HI`."""
import os
import sys
import warnings

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import tracegrad as tg                                                   # noqa: E402
from test_compile_random import draw_program, run, weights, assert_close  # noqa: E402

CALLS = 6                  # the chain speculates from the fourth call on
DEVIATIONS = ("none", "read", "other_op", "hook", "inplace", "no_grad", "drop", "grad_fn", "constant",
              "again", "requires_grad", "detach", "data")
STALE = "changed after the call of compiled"


def _chain(plan, xs, f, vs, wts, dev, at, log):
    """The calls: f(*xs), order 1 (create_graph), sum(g * v), order 2; `dev` happens after step
    `at` (0: after the compiled call). -> the results (or the error raised) and what `log` saw."""
    out = []
    step = [0]

    def maybe(vals):
        if step[0] == at:
            _deviate(dev, vals, xs, log)
        step[0] += 1

    outs = f(*xs)
    maybe(list(outs))
    wrt = [x for x in xs if x.requires_grad]
    k = -2.5 if dev == "constant" else 1.5
    loss = sum(((o * w).sum() * k for o, w in zip(outs, wts)), tg.zeros((), dtype=outs[0].dtype))
    maybe([loss])
    if not loss.requires_grad or not wrt:
        return out
    gs = tg.autograd.grad(loss, wrt, create_graph=True, allow_unused=True)
    maybe([g for g in gs if g is not None])
    terms = [(g * v).sum() for g, v in zip(gs, vs) if g is not None and g.requires_grad]
    if not terms:
        return list(outs) + [g for g in gs]
    s = sum(terms[1:], terms[0])
    maybe([s])
    hs = tg.autograd.grad(s, wrt, allow_unused=True)
    maybe([h for h in hs if h is not None])
    return list(outs) + list(gs) + list(hs) + [loss, s]


def _deviate(dev, vals, xs, log):
    v = vals[-1] if vals else None
    if dev == "read" and v is not None:
        log.append(("read", float(v.detach().sum().item()) if False else v.tolist()))
    elif dev == "other_op" and v is not None:
        log.append(("other_op", tg.sin(v).tolist()))
    elif dev == "hook":
        x = next((x for x in xs if x.requires_grad), None)
        if x is not None:
            x.register_hook(lambda g: log.append(("hook", tuple(g.shape))))
    elif dev == "inplace":
        with tg.no_grad():
            xs[0].add_(0.25)
    elif dev == "no_grad" and v is not None:
        with tg.no_grad():
            log.append(("no_grad", (v * 2).requires_grad))
    elif dev == "drop":
        vals.clear()
    elif dev == "grad_fn" and v is not None:
        log.append(("grad_fn", None if v.grad_fn is None else type(v.grad_fn).__name__.replace("Compiled", "")))
    elif dev == "again" and v is not None and v.requires_grad:
        x = next((x for x in xs if x.requires_grad), None)
        log.append(("again", [None if g is None else g.tolist()
                              for g in tg.autograd.grad(v.sum(), [x], retain_graph=True, allow_unused=True)]))
    elif dev == "requires_grad":
        xs[-1].requires_grad_(not xs[-1].requires_grad) if xs[-1].grad_fn is None else None
    elif dev == "detach" and v is not None:
        log.append(("detach", v.detach().tolist()))
    elif dev == "data":
        xs[0].data.mul_(1.5)          # (unseen by autograd; after the last step: results read afterwards)


def _attempt(plan, arrays, req, dtype, f, vs, wts, dev, at):
    xs = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    log = []
    try:
        res = _chain(plan, xs, f, vs, wts, dev, at, log)
    except RuntimeError as e:
        return ("error", str(e)), log
    return ("ok", res), log


def check_chain_deviation(seed, dtype=None):
    """One seed; raises AssertionError on a difference. -> whether the chain speculated."""
    from tracegrad import chain
    r = np.random.default_rng(seed + 77_000)
    dtype = dtype or ("float64" if r.random() < 0.5 else "float32")
    plan = draw_program(seed)
    shapes, req, ins, outs = plan
    arrays = [(np.random.default_rng(seed).standard_normal(s) * 1.5).astype(dtype) for s in shapes]
    fs = tg.compile(lambda *xs: run(tg, plan, xs), fullgraph=True)
    fp = tg.compile(lambda *xs: run(tg, plan, xs), fullgraph=True)
    fp._chains = False                          # its calls run as written
    xs0 = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=q) for a, q in zip(arrays, req)]
    o0 = run(tg, plan, xs0)
    wts = [tg.tensor(w) for w in weights([tuple(o.shape) for o in o0], seed, dtype)]
    wrt = [x for x in xs0 if x.requires_grad]
    vs = [tg.tensor(v) for v in weights([tuple(x.shape) for x in wrt] or [()], seed + 1, dtype)]
    dev = DEVIATIONS[int(r.integers(0, len(DEVIATIONS)))]
    at = int(r.integers(0, 5)) if dev != "data" else 4
    # a changed constant that stays: the second chain is recorded and speculates in turn
    persist = dev == "constant" and r.random() < 0.5
    speculated = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in range(CALLS + (4 if persist else 0)):
            # (a write through .data at the first speculated call: its results alive are left for later)
            d = dev if call == CALLS - (3 if dev == "data" else 2) or (persist and call > CALLS - 2) else "none"
            got, glog = _attempt(plan, arrays, req, dtype, fs, vs, wts, d, at)
            want, wlog = _attempt(plan, arrays, req, dtype, fp, vs, wts, d, at)
            rec = fs.last_program.chain if fs.last_program is not None else None
            speculated = speculated or (rec is not None and rec.state == chain.READY)
            what = f"seed {seed} {dtype} call {call} deviation {d} after step {at}"
            if got[0] == "error" and STALE in got[1] and d == "inplace":
                continue                        # (documented: a speculated chain refuses here)
            assert got[0] == want[0], f"{what}: {got[0]} vs {want[0]}: {got[1] if got[0] == 'error' else want[1]}"
            if got[0] == "error":
                assert got[1] == want[1], f"{what}: errors differ:\n{got[1]}\n{want[1]}"
                continue
            assert len(got[1]) == len(want[1]), what
            for i, (a, b) in enumerate(zip(got[1], want[1])):
                assert_close(a, b, dtype, f"{what} result {i}")
                if a is not None:
                    assert a.requires_grad == b.requires_grad, f"{what} result {i}: requires_grad"
            assert len(glog) == len(wlog), f"{what}: {glog} vs {wlog}"
            for (ka, va), (kb, vb) in zip(glog, wlog):
                assert ka == kb, what
                if ka in ("read", "other_op", "detach", "again"):
                    np.testing.assert_allclose(np.asarray(va, dtype=float), np.asarray(vb, dtype=float),
                                               rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-6, err_msg=what)
                else:
                    assert va == vb, f"{what}: {ka} {va} vs {vb}"
    return speculated


@pytest.mark.parametrize("block", range(4))
def test_chains_with_a_deviation_at_a_random_point_agree_with_the_calls_run_as_written(block):
    n = int(os.environ.get("TRACEGRAD_CHAIN_FUZZ", "40"))
    spec = [check_chain_deviation(seed) for seed in range(block * n, (block + 1) * n)]
    assert sum(spec) >= n // 4


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    bad = []
    for seed in range(lo, hi):
        try:
            check_chain_deviation(seed)
        except Exception as e:           # noqa: BLE001 (a fuzzer reports every failure)
            bad.append(seed)
            print(f"seed {seed}: {type(e).__name__}: {str(e)[:600]}")
    print(f"{hi - lo} seeds, {len(bad)} failed: {bad[:40]}")

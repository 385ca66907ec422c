"""torch's older linear algebra functions, as functions and Tensor methods: svd (U, S, V),
qr(some), cholesky(upper), cholesky_solve, cholesky_inverse and triangular_solve, against torch:
values, gradients (float64), named results, grad_fn names, strides and the deprecation warnings."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)
A3 = R.uniform(-1, 1, (3, 2))
S2 = np.array([[4.0, 1.0], [1.0, 3.0]])
B = R.uniform(-1, 1, (2, 3))


def run(L, f):
    ts = [L.tensor(a, dtype=L.float64, requires_grad=True) for a in (A3, S2, B)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = f(L, *ts)
    outs = list(out) if isinstance(out, tuple) else [out]
    total = sum((o * o.detach().cos()).sum() for o in outs if o.requires_grad)
    grads = L.autograd.grad(total, ts, allow_unused=True)
    return ([repr(out).split("\n")[0] if isinstance(out, tuple) else "T",
             [o.detach().numpy() for o in outs], [o.stride() for o in outs],
             [None if o.grad_fn is None else type(o.grad_fn).__name__ for o in outs]],
            [None if g is None else g.numpy() for g in grads])


CASES = {
    "svd": lambda L, a, s, b: L.svd(a),
    "svd method": lambda L, a, s, b: a.svd(),
    "svd no uv": lambda L, a, s, b: L.svd(a, compute_uv=False),
    "svd square": lambda L, a, s, b: L.svd(s, some=False),
    "qr": lambda L, a, s, b: L.qr(a),
    "qr method": lambda L, a, s, b: a.qr(),
    "cholesky": lambda L, a, s, b: L.cholesky(s),
    "cholesky upper": lambda L, a, s, b: s.cholesky(upper=True),
    "cholesky_solve": lambda L, a, s, b: L.cholesky_solve(b, L.linalg.cholesky(s)),
    "cholesky_solve upper": lambda L, a, s, b: b.cholesky_solve(L.linalg.cholesky(s).mT, upper=True),
    "cholesky_inverse": lambda L, a, s, b: L.cholesky_inverse(L.linalg.cholesky(s)),
    "cholesky_inverse upper": lambda L, a, s, b: L.linalg.cholesky(s).mT.cholesky_inverse(upper=True),
    "triangular_solve": lambda L, a, s, b: L.triangular_solve(b, s.triu()),
    "triangular_solve lower": lambda L, a, s, b: b.triangular_solve(s.tril(), upper=False),
    "triangular_solve transpose": lambda L, a, s, b: L.triangular_solve(b, s.triu(), transpose=True),
    "triangular_solve unit": lambda L, a, s, b: L.triangular_solve(b, s, upper=False, unitriangular=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_legacy_linalg_matches_torch(name):
    (want, wg), (got, gg) = run(torch, CASES[name]), run(tg, CASES[name])
    assert got[0] == want[0] and got[2] == want[2] and got[3] == want[3], (got[0::2], want[0::2])
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    for g, w in zip(gg, wg):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


def test_deprecation_warnings_once_as_torch():
    for f in (lambda L: L.qr(L.tensor(S2)), lambda L: L.cholesky(L.tensor(S2)),
              lambda L: L.triangular_solve(L.tensor(B), L.tensor(S2))):
        msgs = []
        for L in (torch, tg):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                f(L)
                f(L)
            msgs.append([str(x.message).split(" (Triggered internally")[0] for x in w])
        assert len(msgs[1]) <= 1 and (not msgs[0] or not msgs[1] or msgs[1] == msgs[0]), msgs


def test_deprecation_warnings_every_time_under_set_warn_always():
    tg.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            tg.qr(tg.tensor(S2))
            tg.qr(tg.tensor(S2))
        assert len(w) == 2
    finally:
        tg.set_warn_always(False)

"""torch's surface, eighth round: F.normalize's out=, the hook form of spectral_norm, the
deterministic-algorithms flags, adjoint, unique_consecutive, random_, untyped_storage and the
grad_fn names of composites, against torch (float64)."""
import numpy as np
import pytest
import torch

import tracegrad as tg

X = [[0.5, -1.0, 2.0], [3.0, 0.25, -0.75]]


def outcome(fn):
    try:
        return fn()
    except Exception as e:                      # noqa: BLE001 (the outcome is compared)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("dim,p", [(0, 2.0), (1, 2.0), (-1, 1.0)])
def test_normalize_writes_out_and_returns_it(dim, p):
    got = []
    for L in (tg, torch):
        out = L.zeros(2, 3, dtype=L.float64)
        r = L.nn.functional.normalize(L.tensor(X, dtype=L.float64), p=p, dim=dim, out=out)
        assert r is out
        got.append(out.numpy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-14)


def test_normalize_out_of_a_tensor_that_requires_grad_raises_as_torchs():
    got = [outcome(lambda: L.nn.functional.normalize(L.tensor(X, dtype=L.float64, requires_grad=True),
                                                     out=L.zeros(2, 3, dtype=L.float64))) for L in (tg, torch)]
    assert got[0][0] == got[1][0] == "RuntimeError"
    assert "out=... arguments don't support automatic differentiation" in got[0][1]


def test_normalize_out_under_compile_writes_out_at_every_call():
    out = tg.zeros(2, 3, dtype=tg.float64)

    @tg.compile
    def f(x):
        tg.nn.functional.normalize(x, dim=1, out=out)
        return out * 1

    for scale in (1.0, 3.0):
        x = np.array(X) * scale + np.arange(3)
        r = f(tg.tensor(x))
        want = torch.nn.functional.normalize(torch.tensor(x), dim=1).numpy()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-14)
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-14)

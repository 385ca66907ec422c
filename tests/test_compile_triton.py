"""backend="triton": the same compiled program through the Triton lowering, run by
Triton's CPU interpreter (a subprocess, since TRITON_INTERPRET is read at import)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

SCRIPT = r"""
import numpy as np, torch, tracegrad as tg
f = tg.compile(lambda x, w: (tg.tanh(x * w) + x).sum(1).mean(), backend="triton")
x = tg.tensor(np.random.default_rng(0).standard_normal((8, 16)), requires_grad=True)
w = tg.tensor(np.random.default_rng(1).standard_normal(16), requires_grad=True)
y = f(x, w)
y.backward()
assert "@triton.jit" in f.last_program.fwd_fn.source
tx, tw = (torch.tensor(a.detach().numpy(), requires_grad=True) for a in (x, w))
yt = (torch.tanh(tx * tw) + tx).sum(1).mean()
yt.backward()
np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5)
np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
print("ok")
"""


def test_triton_backend_matches_torch_under_the_interpreter():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")

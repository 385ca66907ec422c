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


LAYER_NORM_SCRIPT = r"""
import numpy as np, torch, tracegrad as tg
# the backward's weight and bias gradients are column sums, each program adding its rows'
# partials: programs take more than 8 rows where the rows move few bytes, so that those
# partials stay a small share of the traffic; 150 rows leave the last program short (and are
# over the 32 KiB below which the forward saves values for the backward instead of its inputs)
F = tg.nn.functional
for dt, tt, tol in ((tg.float32, torch.float32, 1e-4), (tg.float64, torch.float64, 1e-10)):
    r = np.random.default_rng(0)
    a = [r.standard_normal(s) for s in ((150, 64), (64,), (64,))]
    gy = r.standard_normal((150, 64))
    xs = [tg.tensor(v, dtype=dt).requires_grad_(True) for v in a]
    f = tg.compile(lambda x, w, b: F.layer_norm(x, (64,), w, b), backend="triton")
    f(*xs).backward(tg.tensor(gy, dtype=dt))
    (k,) = f.last_program.bwd_fn.program.kernels
    # float64 rows move twice the bytes of float32 ones: fewer rows per program suffice
    assert len(k.col_stages) == 2 and (k.rows > 8 if dt is tg.float32 else k.rows >= 8), k.rows
    ts = [torch.tensor(v, dtype=tt, requires_grad=True) for v in a]
    torch.nn.functional.layer_norm(ts[0], (64,), ts[1], ts[2]).backward(torch.tensor(gy, dtype=tt))
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
print("ok")
"""


def test_layer_norm_backward_programs_take_enough_rows_for_their_column_sums():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", LAYER_NORM_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")


BF16_CPU_SCRIPT = r"""
import numpy as np, torch, tracegrad as tg
# CPU tensors of bfloat16 through backend="triton" run under the interpreter, which rounds
# float32 to bfloat16 toward zero (a GPU rounds to nearest): it raises, naming the way out,
# where it crashed in numpy's conversion; float16 runs
f = tg.compile(lambda x: (x.sin() * 2).sum(), backend="triton")
x = tg.tensor([1.0, 2.0, 3.0], dtype=tg.bfloat16, requires_grad=True)
try:
    f(x)
except RuntimeError as e:
    assert "bfloat16 on a GPU only" in str(e) and 'backend="numpy"' in str(e), e
else:
    raise AssertionError("no error")
h = tg.tensor([1.0, 2.0, 3.0], dtype=tg.float16)
t = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
assert float(f(h)) == float((t.sin() * 2).sum()), (float(f(h)), float((t.sin() * 2).sum()))
print("ok")
"""


def test_bfloat16_on_the_cpu_through_the_triton_backend_raises_naming_the_way_out():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", BF16_CPU_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")

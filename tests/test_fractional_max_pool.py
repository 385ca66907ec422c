"""Fractional max pooling (F.fractional_max_pool2d/3d, nn.FractionalMaxPool2d/3d) against torch,
given the same random samples: values, indices and gradients bit for bit over random shapes,
kernels, output sizes, dtypes, ties and NaN; torch's errors (its 3-d check is strict: the last
window may not reach the input's end); the layers' arguments."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def run(m, nd, xa, sa, kernel, out, dt):
    try:
        x = m.tensor(xa.tolist(), dtype=getattr(m, dt), requires_grad=True)
        s = m.tensor(sa.tolist(), dtype=getattr(m, dt))
        f = getattr(m.nn.functional, f"fractional_max_pool{nd}d")
        v, i = f(x, kernel, output_size=out, return_indices=True, _random_samples=s)
        (v * m.arange(v.numel(), dtype=v.dtype).reshape(v.shape)).sum().backward()
        return (np.array(v.detach().tolist()), np.array(i.tolist()), np.array(x.grad.tolist()),
                type(v.grad_fn).__name__)
    except RuntimeError as e:
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("chunk", range(4))
def test_random_configurations_as_torch(chunk):
    rs = np.random.RandomState(chunk)
    for trial in range(60):
        nd = 2 if trial % 3 else 3
        spatial = tuple(rs.randint(2, 12, nd))
        kernel = tuple(int(rs.randint(1, s + 1)) for s in spatial)
        out = tuple(int(rs.randint(1, s - k + 2)) for s, k in zip(spatial, kernel))
        n, c = rs.randint(1, 3), rs.randint(1, 3)
        dt = ["float32", "float64"][trial % 2]
        xa = rs.randn(n, c, *spatial)
        if trial % 7 == 0:
            xa = np.round(xa)                       # ties: the first maximum in scan order
        if trial % 11 == 0:
            xa.flat[rs.randint(xa.size)] = np.nan   # a NaN wins its windows
        sa = rs.rand(n, c, nd)
        want, got = run(torch, nd, xa, sa, kernel, out, dt), run(tg, nd, xa, sa, kernel, out, dt)
        if isinstance(want, str) or isinstance(got, str):
            assert got == want
            continue
        for a, b in zip(got[:3], want[:3]):
            np.testing.assert_array_equal(a, b)
        assert got[3] == want[3]


def test_unbatched_ratio_and_drawn_samples():
    x = tg.rand(3, 9, 10, requires_grad=True)
    v, i = tg.nn.functional.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
    assert tuple(v.shape) == (3, 4, 5) and tuple(i.shape) == (3, 4, 5)
    flat = x.detach().reshape(3, -1)
    np.testing.assert_array_equal(v.detach().numpy(), np.take_along_axis(flat.numpy(), i.reshape(3, -1).numpy(),
                                                                         1).reshape(3, 4, 5))
    v.sum().backward()
    assert float(x.grad.sum()) == v.numel()


def test_errors_and_layers_as_torch():
    def outcome(m, f):
        try:
            r = f(m)
            return repr(r) if isinstance(r, m.nn.Module) else tuple(r.shape)
        except (ValueError, RuntimeError, IndexError) as e:
            return f"{type(e).__name__}: {e}"
    x = np.random.RandomState(0).rand(1, 2, 7, 9)
    cases = [
        lambda m: m.nn.functional.fractional_max_pool2d(m.tensor(x.tolist()), 2),
        lambda m: m.nn.functional.fractional_max_pool2d(m.tensor(x.tolist()), 2, output_size=(3, 4),
                                                         _random_samples=m.rand(1, 2, 3)),
        lambda m: m.nn.functional.fractional_max_pool2d(m.tensor(x.tolist()), 2, output_size=(3, 4),
                                                         _random_samples=m.rand(1, 2, 2, dtype=m.float64)),
        lambda m: m.nn.functional.fractional_max_pool2d(m.tensor(x.tolist())[0, 0], 2, output_size=(3, 4)),
        lambda m: m.nn.functional.fractional_max_pool2d(m.tensor(x.tolist()), 3, output_size=(6, 8)),
        lambda m: m.nn.FractionalMaxPool2d(2),
        lambda m: m.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5),
        lambda m: m.nn.FractionalMaxPool2d(2, output_ratio=1.5),
        lambda m: m.nn.FractionalMaxPool3d((2, 2, 1), output_ratio=0.5, return_indices=True),
        lambda m: m.nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.6))(m.tensor(x.tolist())),
        lambda m: m.nn.FractionalMaxPool3d(2, output_size=(2, 3, 4))(m.rand(1, 2, 5, 6, 7)),
    ]
    for f in cases:
        assert outcome(tg, f) == outcome(torch, f)

"""bfloat16 cumsum and cumprod keep their running values in float32, as torch's do: a float64
running product kept 1e-30 * 1e-30 from underflowing, so cumprod gave inf after an inf where
torch's 0 * inf gives nan, and 1e30 * 1e30 * 1e-30 came back to 1e30 where torch's is inf."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

CASES = [[1e-30, 1e-30, np.inf, -1.0, np.nan], [1e30, 1e30, 1e-30, 2.0], [3e38, 10.0, 0.1, 0.5],
         [1e-20, 1e-20, 1e20, 1e20], [-0.0, 1.0, -2.0, 0.0]]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_bfloat16_scans_as_torch(case, name, compiled):
    x = np.array(CASES[case])
    f = (lambda t: getattr(tg, name)(t, 0))
    if compiled:
        f = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = f(tg.tensor(x, dtype=tg.bfloat16)).float().numpy()
        want = getattr(torch, name)(torch.tensor(x, dtype=torch.bfloat16), 0).float().numpy()
    np.testing.assert_array_equal(got, want)
    real = ~np.isnan(want)          # (a NaN's sign bit is the CPU's, not the op's)
    np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))


def test_bfloat16_scans_of_random_values_and_gradients_as_torch():
    x = np.random.default_rng(0).standard_normal((3, 200)) * 3
    for name in ("cumsum", "cumprod"):
        t, tt = tg.tensor(x, dtype=tg.bfloat16, requires_grad=True), torch.tensor(x, dtype=torch.bfloat16,
                                                                                  requires_grad=True)
        y, ty = getattr(tg, name)(t, 1), getattr(torch, name)(tt, 1)
        np.testing.assert_array_equal(y.float().detach().numpy(), ty.float().detach().numpy())
        y[:, :8].sum().backward()
        ty[:, :8].sum().backward()
        np.testing.assert_allclose(t.grad.float().numpy(), tt.grad.float().numpy(), rtol=2e-2, atol=1e-2)

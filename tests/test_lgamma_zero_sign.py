"""lgamma(1) is +0.0 in torch (its series around 1 gave tracegrad -0.0: z * (negative) with z = 0),
in every dtype, eagerly and compiled, through torch.special.gammaln too."""
import numpy as np
import pytest
import torch

import tracegrad as tg

X = [1.0, 2.0, 0.9999999, 1.0000001, 0.5, 1.5, 2.5, -0.5, 3.0]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["lgamma", "special.gammaln"])
@pytest.mark.parametrize("compiled", [False, True])
def test_lgamma_values_and_zero_signs_as_torch(dtype, name, compiled):
    def fn(lib, x):
        f = lib.lgamma if name == "lgamma" else lib.special.gammaln
        return f(x)
    f = (lambda x: fn(tg, x))
    if compiled:
        f = tg.compile(f)
    got = f(tg.tensor(X, dtype=getattr(tg, dtype))).float().numpy()
    want = fn(torch, torch.tensor(X, dtype=getattr(torch, dtype))).float().numpy()
    np.testing.assert_allclose(got, want, rtol={"float64": 1e-15, "float32": 1e-6}.get(dtype, 0))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))

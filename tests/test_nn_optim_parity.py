"""tracegrad.nn and tracegrad.optim against torch: corners of modules, losses and optimizers."""
import numpy as np
import torch

import tracegrad as tg


def _close(a, b, **kw):
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **kw)


def test_kl_div_negative_target_is_nan_and_target_gradient_as_xlogy():
    # torch: xlogy(target, target) - target * input, so a negative target gives NaN and the
    # target's gradient is xlogy's (NaN at 0 and below)
    x = np.array([[0.3, -0.2], [0.1, 0.5]])
    t = np.array([[-0.5, 0.0], [0.2, 1.0]])
    out = {}
    for lib in (torch, tg):
        a = lib.tensor(x, requires_grad=True)
        b = lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.kl_div(a, b, reduction="none")
        loss.sum().backward()
        out[lib] = (loss, a.grad, b.grad)
    for p, q in zip(out[torch], out[tg]):
        _close(p, q, rtol=1e-12, atol=0, equal_nan=True)

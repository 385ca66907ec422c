"""nn.AdaptiveLogSoftmaxWithLoss against torch (float64, weights copied): output, loss, the
gradients of input and parameters, log_prob, predict, unbatched calls, repr, state_dict keys and
torch's errors."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def _pair(cutoffs, head_bias, div_value, classes=10, features=8):
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(features, classes, cutoffs, div_value=div_value, head_bias=head_bias)
    tm = tm.double()
    gm = tg.nn.AdaptiveLogSoftmaxWithLoss(features, classes, cutoffs, div_value=div_value, head_bias=head_bias).double()
    assert list(tm.state_dict()) == list(gm.state_dict())
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    assert repr(gm) == repr(tm)
    return tm, gm


@pytest.mark.filterwarnings("ignore:Initializing zero-element")
@pytest.mark.parametrize("cutoffs,head_bias,div_value", [([3, 6], False, 4.0), ([2], True, 2.0), ([1, 4, 8], False, 1.5),
                                                         ([5], True, 1.0)])
@pytest.mark.parametrize("seed", range(4))
def test_matches_torch(cutoffs, head_bias, div_value, seed):
    tm, gm = _pair(cutoffs, head_bias, div_value)
    r = np.random.default_rng(seed)
    x = r.standard_normal((9, 8))
    t = r.integers(0, 10, 9) if seed else np.zeros(9, np.int64)      # (seed 0: the shortlist alone)
    res = []
    for L, m in ((torch, tm), (tg, gm)):
        a = L.tensor(x, requires_grad=True)
        out = m(a, L.tensor(t))
        (out.output.sin().sum() + out.loss).backward()
        one = m(a[1], L.tensor(t[1]))
        res.append([out.output.detach().numpy(), out.loss.detach().numpy(), a.grad.numpy()] +
                   [np.zeros(0) if p.grad is None else p.grad.numpy() for p in m.parameters()] +
                   [m.log_prob(a).detach().numpy(), m.predict(a).numpy(), one.output.detach().numpy(),
                    one.loss.detach().numpy()])
    for g, w in zip(res[1], res[0]):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


ERRORS = [
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, []),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 2]),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [0, 2]),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2, 10]),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2, 2]),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(L.zeros(4, 8), L.zeros(3, dtype=L.int64)),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(L.zeros(8), L.zeros(1, dtype=L.int64)),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(L.zeros(4, 8), L.zeros((), dtype=L.int64)),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(L.zeros(4, 8), L.zeros(4, 1, dtype=L.int64)),
    lambda L: L.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(L.zeros(2, 8), L.tensor([1, 10])),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_torch(case):
    msgs = []
    for L in (torch, tg):
        with pytest.raises((ValueError, RuntimeError)) as e:
            ERRORS[case](L)
        msgs.append((type(e.value).__name__, str(e.value).replace("torch.Size", "Size")))
    assert msgs[0][0] == msgs[1][0]
    assert msgs[0][1].split(" but found inputs")[0] == msgs[1][1].split(" but found inputs")[0]

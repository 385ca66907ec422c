"""torch.optim.Adafactor and torch.optim.swa_utils (AveragedModel with SWA and EMA averages,
SWALR, update_bn) against torch: parameters, states and rates after several steps, errors."""
import numpy as np
import pytest
import torch
from torch.optim import swa_utils as TS

import tracegrad as tg
from tracegrad.optim import swa_utils as GS

R = np.random.default_rng(0)
SHAPES = [(5, 4), (7,), (2, 3, 4), (), (1, 6)]


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-14), ("float32", 3e-6)])
@pytest.mark.parametrize("kw", [dict(), dict(lr=0.1, weight_decay=0.01, maximize=True),
                                dict(eps=(1e-5, 1e-2), d=2.0, beta2_decay=-0.5), dict(lr=torch.tensor(0.05))])
def test_adafactor_matches_torch(kw, dtype, tol):
    ps = [R.standard_normal(s) for s in SHAPES]
    tp = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in ps]
    gp = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=True) for a in ps]
    gkw = {k: (tg.tensor(float(v)) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    to, go = torch.optim.Adafactor(tp, **kw), tg.optim.Adafactor(gp, **gkw)
    for _ in range(6):
        gs = [R.standard_normal(s) for s in SHAPES]
        for t, g, a in zip(tp, gp, gs):
            t.grad = torch.tensor(a, dtype=t.dtype)
            g.grad = tg.tensor(a, dtype=g.dtype)
        to.step()
        go.step()
    for t, g in zip(tp, gp):
        np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
        ts, gs_ = to.state[t], go.state[g]
        assert sorted(ts) == sorted(gs_)
        for k in ts:
            assert tuple(gs_[k].shape) == tuple(ts[k].shape)
            np.testing.assert_allclose(gs_[k].numpy(), ts[k].numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("kw", [dict(lr=-1.0), dict(beta2_decay=0.5), dict(eps=(-1.0, 1e-3)), dict(eps=(None, -1.0)),
                                dict(d=0.5), dict(weight_decay=-1.0)])
def test_adafactor_errors_as_torch(kw):
    msgs = []
    for L in (torch, tg):
        with pytest.raises(ValueError) as e:
            L.optim.Adafactor([L.zeros(2, requires_grad=True)], **kw)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def _build(L):
    m = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.BatchNorm1d(4), L.nn.ReLU(), L.nn.Linear(4, 2)).double()
    return m


def _avg_kwargs(kind, S):
    return {"swa": {}, "ema": dict(avg_fn=S.get_ema_avg_fn(0.9)), "ema_multi": dict(multi_avg_fn=S.get_ema_multi_avg_fn(0.9)),
            "swa_multi": dict(multi_avg_fn=S.get_swa_multi_avg_fn()), "buffers": dict(use_buffers=True),
            "ema_buffers": dict(multi_avg_fn=S.get_ema_multi_avg_fn(0.8), use_buffers=True)}[kind]


@pytest.mark.parametrize("kind", ["swa", "ema", "ema_multi", "swa_multi", "buffers"])
@pytest.mark.parametrize("strategy,anneal", [("cos", 3), ("linear", 2), ("cos", 0)])
def test_averaged_model_swalr_and_update_bn_match_torch(kind, strategy, anneal):
    torch.manual_seed(0)
    tm = _build(torch)
    gm = _build(tg)
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    ta, ga = TS.AveragedModel(tm, **_avg_kwargs(kind, TS)), GS.AveragedModel(gm, **_avg_kwargs(kind, GS))
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)
    tsch = TS.SWALR(topt, swa_lr=0.05, anneal_epochs=anneal, anneal_strategy=strategy)
    gsch = GS.SWALR(gopt, swa_lr=0.05, anneal_epochs=anneal, anneal_strategy=strategy)
    r = np.random.default_rng(1)
    for _ in range(5):
        x = r.standard_normal((8, 3))
        for L, m, o in ((torch, tm, topt), (tg, gm, gopt)):
            o.zero_grad()
            m(L.tensor(x)).pow(2).sum().backward()
            o.step()
        ta.update_parameters(tm)
        ga.update_parameters(gm)
        tsch.step()
        gsch.step()
        np.testing.assert_allclose(gsch.get_last_lr(), tsch.get_last_lr(), rtol=1e-15)
    batches = [r.standard_normal((8, 3)) for _ in range(3)]
    TS.update_bn([(torch.tensor(b), 0) for b in batches], ta)
    GS.update_bn([(tg.tensor(b), 0) for b in batches], ga)
    st, sg = ta.state_dict(), ga.state_dict()
    assert list(st) == list(sg)
    for k in st:
        np.testing.assert_allclose(sg[k].numpy().astype(float), st[k].numpy().astype(float), rtol=1e-13, atol=1e-14)
    x = r.standard_normal((4, 3))
    ta.eval()
    ga.eval()
    np.testing.assert_allclose(ga(tg.tensor(x)).detach().numpy(), ta(torch.tensor(x)).detach().numpy(), rtol=1e-12)


def test_swa_errors_as_torch():
    for f in (lambda L, S: S.SWALR(L.optim.SGD([L.zeros(1, requires_grad=True)], lr=1.0), 0.1, anneal_strategy="x"),
              lambda L, S: S.SWALR(L.optim.SGD([L.zeros(1, requires_grad=True)], lr=1.0), 0.1, anneal_epochs=-1),
              lambda L, S: S.get_ema_avg_fn(1.5), lambda L, S: S.get_ema_multi_avg_fn(-0.1)):
        msgs = []
        for L, S in ((torch, TS), (tg, GS)):
            with pytest.raises(ValueError) as e:
                f(L, S)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


def test_update_bn_without_batchnorm_leaves_the_model_alone():
    m = tg.nn.Linear(2, 2)
    m.eval()
    GS.update_bn([tg.zeros(1, 2)], m)
    assert not m.training


def test_ema_of_integer_buffers_truncates_as_torch():
    """torch's EMA of a BatchNorm's num_batches_tracked (use_buffers=True): the float average
    copied into the int64 buffer, truncated."""
    x = R.standard_normal((5, 3))
    res = []
    for L, S in ((torch, TS), (tg, GS)):
        torch.manual_seed(3)
        m = _build(L)
        if L is tg:
            m.load_state_dict({k: tg.tensor(v) for k, v in start.items()})
        else:
            start = {k: v.numpy().copy() for k, v in m.state_dict().items()}
        avg = S.AveragedModel(m, multi_avg_fn=S.get_ema_multi_avg_fn(0.8), use_buffers=True)
        for _ in range(4):
            m(L.tensor(x))
            avg.update_parameters(m)
        res.append({k: v.numpy().astype(float) for k, v in avg.state_dict().items()})
    for k in res[0]:
        np.testing.assert_allclose(res[1][k], res[0][k], rtol=1e-13, atol=1e-14)

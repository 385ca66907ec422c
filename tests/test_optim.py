"""tracegrad.optim against torch.optim: 100-step trajectories of each optimizer,
state_dict round trips, zero_grad, parameter groups, errors; and a small model trained
for 100 steps under both libraries from the same initial weights."""
import numpy as np
import pytest
import torch

import tracegrad
import tracegrad.nn.functional as TF
from conftest import assert_close


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # small ops: torch's thread pool only adds contention on a 2-core machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

SHAPES = [(5, 4), (4,), (3, 2, 2)]


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    targets = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    scales = [rng.uniform(0.1, 3.0, s).astype(np.float32) for s in SHAPES]
    return init, targets, scales


def _grad(p, target, scale, step):
    """A gradient that depends on the current parameter (a badly scaled quadratic with a
    bounded wobble), computed in float32 the same way for both libraries."""
    return (scale * (p - target) + np.float32(0.1) * np.sin(np.float32(step) * p)).astype(np.float32)


def _run(lib, make_opt, steps=100, seed=0, groups=False):
    init, targets, scales = _problem(seed)
    params = [lib.tensor(a.copy(), requires_grad=True) for a in init]
    if groups:
        opt = make_opt(lib, [{"params": params[:1]}, {"params": params[1:], "lr": 0.003}])
    else:
        opt = make_opt(lib, params)
    traj = []
    for step in range(steps):
        opt.zero_grad()
        for p, t, s in zip(params, targets, scales):
            cur = p.detach().numpy()
            p.grad = lib.tensor(_grad(cur, t, s, step))
        opt.step()
        traj.append([p.detach().numpy().copy() for p in params])
    return traj, opt, params


OPTIMIZERS = {
    "sgd": lambda lib, P: lib.optim.SGD(P, lr=0.05),
    "sgd_momentum": lambda lib, P: lib.optim.SGD(P, lr=0.05, momentum=0.9),
    "sgd_dampening_wd": lambda lib, P: lib.optim.SGD(P, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
    "sgd_nesterov": lambda lib, P: lib.optim.SGD(P, lr=0.03, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda lib, P: lib.optim.Adam(P, lr=0.01),
    "adam_wd": lambda lib, P: lib.optim.Adam(P, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
    "adam_amsgrad": lambda lib, P: lib.optim.Adam(P, lr=0.01, amsgrad=True),
    "adamw": lambda lib, P: lib.optim.AdamW(P, lr=0.01),
    "adamw_amsgrad": lambda lib, P: lib.optim.AdamW(P, lr=0.02, weight_decay=0.1, amsgrad=True),
    "adam_decoupled": lambda lib, P: lib.optim.Adam(P, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("groups", [False, True])
def test_trajectory_matches_torch(name, groups):
    ref, _, _ = _run(torch, OPTIMIZERS[name], groups=groups)
    got, _, _ = _run(tracegrad, OPTIMIZERS[name], groups=groups)
    for step, (a, b) in enumerate(zip(got, ref)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6, err_msg=f"{name}, step {step}")


def test_maximize_matches_torch():
    make = lambda lib, P: lib.optim.Adam(P, lr=0.01, maximize=True)      # noqa: E731
    ref, _, _ = _run(torch, make, steps=30)
    got, _, _ = _run(tracegrad, make, steps=30)
    np.testing.assert_allclose(got[-1][0], ref[-1][0], rtol=1e-5, atol=1e-6)
    make = lambda lib, P: lib.optim.SGD(P, lr=0.01, momentum=0.5, maximize=True)    # noqa: E731
    ref, _, _ = _run(torch, make, steps=30)
    got, _, _ = _run(tracegrad, make, steps=30)
    np.testing.assert_allclose(got[-1][0], ref[-1][0], rtol=1e-5, atol=1e-6)


def _to_torch_state(sd):
    return {"state": {k: {n: torch.tensor(v.numpy()) if isinstance(v, tracegrad.Tensor) else v
                          for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": sd["param_groups"]}


@pytest.mark.parametrize("name", ["sgd_momentum", "adam_amsgrad", "adamw"])
def test_state_dict_layout_and_round_trip(name, tmp_path):
    make = OPTIMIZERS[name]
    _, opt_t, _ = _run(torch, make, steps=3)
    _, opt_g, _ = _run(tracegrad, make, steps=3)
    sd_t, sd_g = opt_t.state_dict(), opt_g.state_dict()
    assert sd_g["param_groups"] == sd_t["param_groups"]
    assert sorted(sd_g["state"]) == sorted(sd_t["state"])
    for k in sd_t["state"]:
        assert list(sd_g["state"][k]) == list(sd_t["state"][k])
        for n, v in sd_t["state"][k].items():
            assert_close(sd_g["state"][k][n], v, rtol=1e-5, atol=1e-6)
    # 50 steps, save through tracegrad.save, a fresh optimizer loads it and runs 50 more:
    # the same as 100 uninterrupted steps
    full, _, _ = _run(tracegrad, make, steps=100)
    init, targets, scales = _problem()
    params = [tracegrad.tensor(a.copy(), requires_grad=True) for a in init]
    opt = make(tracegrad, params)
    for step in range(100):
        if step == 50:
            tracegrad.save(opt.state_dict(), tmp_path / "opt.pt")
            opt = make(tracegrad, params)
            opt.load_state_dict(tracegrad.load(tmp_path / "opt.pt"))
        opt.zero_grad()
        for p, t, s in zip(params, targets, scales):
            p.grad = tracegrad.tensor(_grad(p.detach().numpy(), t, s, step))
        opt.step()
    for a, b in zip(params, full[-1]):
        np.testing.assert_array_equal(a.detach().numpy(), b)


def test_load_torch_state_dict_and_continue():
    make = OPTIMIZERS["adam_amsgrad"]
    init, targets, scales = _problem()
    pt = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    ot = make(torch, pt)
    for step in range(20):
        ot.zero_grad()
        for p, t, s in zip(pt, targets, scales):
            p.grad = torch.tensor(_grad(p.detach().numpy(), t, s, step))
        ot.step()
    pg = [tracegrad.tensor(p.detach().numpy().copy(), requires_grad=True) for p in pt]
    og = make(tracegrad, pg)
    sd = ot.state_dict()
    og.load_state_dict({"state": {k: {n: tracegrad.tensor(v.numpy()) for n, v in s.items()}
                                  for k, s in sd["state"].items()}, "param_groups": sd["param_groups"]})
    for step in range(20, 40):
        for opt, ps, lib in ((ot, pt, torch), (og, pg, tracegrad)):
            opt.zero_grad()
            for p, t, s in zip(ps, targets, scales):
                p.grad = lib.tensor(_grad(p.detach().numpy(), t, s, step))
            opt.step()
    for a, b in zip(pg, pt):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_zero_grad_skips_and_versions():
    w = tracegrad.ones(3, requires_grad=True)
    frozen = tracegrad.ones(2, requires_grad=True)
    opt = tracegrad.optim.SGD([w, frozen], lr=0.5)
    (w * 2).sum().backward()
    v = w._version
    opt.step()
    assert w._version > v
    np.testing.assert_array_equal(w.detach().numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(frozen.detach().numpy(), [1.0, 1.0])        # no grad: untouched
    assert w.grad_fn is None and w.requires_grad and w.is_leaf
    opt.zero_grad(set_to_none=False)
    assert w.grad is not None and np.all(w.grad.numpy() == 0)
    opt.zero_grad()
    assert w.grad is None


def test_step_runs_under_no_grad_and_closure():
    w = tracegrad.tensor([1.0, -2.0], requires_grad=True)
    opt = tracegrad.optim.Adam([w], lr=0.1)
    seen = []

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        seen.append(tracegrad.is_grad_enabled())
        return loss

    loss = opt.step(closure)
    assert seen == [True] and float(loss) == 5.0
    assert w.grad_fn is None and w.requires_grad


def test_param_group_api_and_repr():
    a, b = tracegrad.zeros(2, requires_grad=True), tracegrad.zeros(3, requires_grad=True)
    ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    og = tracegrad.optim.SGD([a], lr=0.1, momentum=0.9)
    ot = torch.optim.SGD([ta], lr=0.1, momentum=0.9)
    og.add_param_group({"params": b, "lr": 0.01})
    ot.add_param_group({"params": tb, "lr": 0.01})
    assert repr(og) == repr(ot)
    assert og.param_groups[1]["momentum"] == 0.9 and og.param_groups[1]["params"] == [b]
    assert repr(tracegrad.optim.AdamW([a])) == repr(torch.optim.AdamW([ta]))


@pytest.mark.parametrize("call", [
    lambda lib, p: lib.optim.SGD(p, lr=-1),
    lambda lib, p: lib.optim.SGD(p, lr=0.1, momentum=-1),
    lambda lib, p: lib.optim.SGD(p, lr=0.1, weight_decay=-1),
    lambda lib, p: lib.optim.SGD(p, lr=0.1, nesterov=True),
    lambda lib, p: lib.optim.Adam(p, lr=-1),
    lambda lib, p: lib.optim.Adam(p, eps=-1),
    lambda lib, p: lib.optim.Adam(p, betas=(1.0, 0.9)),
    lambda lib, p: lib.optim.Adam(p, betas=(0.9, -0.1)),
    lambda lib, p: lib.optim.AdamW(p, weight_decay=-1),
    lambda lib, p: lib.optim.Adam([]),
    lambda lib, p: lib.optim.Adam(p[0]),
    lambda lib, p: lib.optim.Adam([{"params": p}, {"params": p}]),
    lambda lib, p: lib.optim.Adam([p[0] * 2]),
])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as ref:
        call(torch, [torch.zeros(2, requires_grad=True)])
    with pytest.raises(Exception) as got:
        call(tracegrad, [tracegrad.zeros(2, requires_grad=True)])
    assert type(got.value) is type(ref.value)
    assert str(got.value).replace("tracegrad", "torch") == str(ref.value)


def _digits_like_batches(n_steps, batch=32, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((10, 1, 8, 8)).astype(np.float32)
    out = []
    for _ in range(n_steps):
        y = rng.integers(0, 10, batch)
        x = centers[y] + 0.5 * rng.standard_normal((batch, 1, 8, 8)).astype(np.float32)
        out.append((x, y))
    return out


def _small_cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.SiLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(64, 32), nn.LayerNorm(32), nn.Tanh(),
                         nn.Linear(32, 10))


@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_training_matches_torch_for_100_steps(opt):
    """The same model, same initial weights and same batches, trained for 100 steps with
    each library: the loss curves agree to float32 tolerance."""
    torch.manual_seed(0)
    mt = _small_cnn(torch)
    mg = _small_cnn(tracegrad)
    mg.load_state_dict({k: tracegrad.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    if opt == "adam":
        ot, og = torch.optim.Adam(mt.parameters(), lr=1e-3), tracegrad.optim.Adam(mg.parameters(), lr=1e-3)
    else:
        ot = torch.optim.SGD(mt.parameters(), lr=0.02, momentum=0.9)
        og = tracegrad.optim.SGD(mg.parameters(), lr=0.02, momentum=0.9)
    lt, lg = [], []
    for x, y in _digits_like_batches(100):
        ot.zero_grad()
        loss = torch.nn.functional.cross_entropy(mt(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        ot.step()
        lt.append(loss.item())
        og.zero_grad()
        loss = TF.cross_entropy(mg(tracegrad.tensor(x)), tracegrad.tensor(y))
        loss.backward()
        og.step()
        lg.append(loss.item())
    assert lt[-1] < 0.5 * lt[0]                 # it learned something
    np.testing.assert_allclose(lg, lt, rtol=1e-4, atol=1e-5)
    for (n, a), b in zip(mg.state_dict().items(), mt.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-4, err_msg=n)

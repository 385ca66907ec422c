"""Adamax, NAdam, RAdam, Adadelta, Rprop and ASGD against torch's: parameters over twelve steps of
the same gradients (float64 to 1e-12, float32 to an ulp or two), with their options, state
saved and restored mid-way, torch's errors; inside a compiled step they run eagerly and say so."""
import copy
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

R = np.random.default_rng(0)
W = [R.standard_normal((4, 3)), R.standard_normal(3)]
GRADS = [[R.standard_normal(w.shape) for w in W] for _ in range(12)]
GRADS[5][0][1, 1] = 0.0                              # Rprop: a zero gradient keeps the step size

CONFIGS = [
    ("Adamax", dict(lr=0.01)), ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True, betas=(0.7, 0.8))),
    ("NAdam", dict(lr=0.01)), ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01, betas=(0.9, 0.5))),       # rectified from the 2nd step
    ("RAdam", dict(lr=0.01, weight_decay=0.2, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, weight_decay=0.2, betas=(0.6, 0.7), maximize=True)),
    ("Adadelta", dict()), ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
    ("Rprop", dict(lr=0.01)), ("Rprop", dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict(lr=0.05)), ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1, maximize=True)),
]


def run(m, name, kw, dtype, reload_at=None):
    ps = [m.tensor(w.astype(dtype), requires_grad=True) for w in W]
    opt = getattr(m.optim, name)(ps, **kw)
    for i, gs in enumerate(GRADS):
        for p, g in zip(ps, gs):
            p.grad = m.tensor(g.astype(dtype))
        opt.step()
        if i == reload_at:
            sd = copy.deepcopy(opt.state_dict())
            opt = getattr(m.optim, name)(ps, **kw)
            opt.load_state_dict(sd)
    return [p.detach().numpy() for p in ps], opt


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, kw", CONFIGS, ids=[f"{n}{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_parameters_follow_torchs(name, kw, dtype):
    want, topt = run(torch, name, kw, dtype)
    got, gopt = run(tg, name, kw, dtype)
    for a, b in zip(got, want):
        if dtype == "float64":
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        else:
            np.testing.assert_allclose(a, b, rtol=3e-7, atol=1e-7)
    assert sorted(gopt.state_dict()["state"][0]) == sorted(topt.state_dict()["state"][0])
    assert gopt.state_dict()["param_groups"][0].keys() == topt.state_dict()["param_groups"][0].keys()


@pytest.mark.parametrize("name, kw", CONFIGS[::2], ids=[n for n, _ in CONFIGS[::2]])
def test_state_saved_and_restored_mid_way(name, kw):
    want, _ = run(torch, name, kw, "float64", reload_at=4)
    got, _ = run(tg, name, kw, "float64", reload_at=4)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_errors_as_torchs():
    cases = [("Adamax", dict(lr=-1)), ("Adamax", dict(eps=-1)), ("Adamax", dict(betas=(1.0, 0.9))),
             ("Adamax", dict(weight_decay=-1)), ("NAdam", dict(momentum_decay=-1)), ("NAdam", dict(betas=(0.9, 1.5))),
             ("RAdam", dict(eps=-1e-8)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(eps=-1)),
             ("Rprop", dict(etas=(1.2, 0.5))), ("Rprop", dict(lr=-0.1))]
    for name, kw in cases:
        with pytest.raises(Exception) as want:
            getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
        with pytest.raises(type(want.value)) as got:
            getattr(tg.optim, name)([tg.zeros(2, requires_grad=True)], **kw)
        assert str(got.value) == str(want.value)


def test_inside_a_compiled_step_they_run_eagerly_and_say_so():
    w = tg.tensor(W[0], requires_grad=True)
    w2 = tg.tensor(W[0], requires_grad=True)
    opt, opt2 = tg.optim.NAdam([w], lr=0.01), tg.optim.NAdam([w2], lr=0.01)

    def body(p, o):
        o.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        o.step()
        return loss
    step = tg.compile(lambda: body(w, opt))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            step()
            body(w2, opt2)
    assert any("NAdam.step() inside a compiled function is not traced yet" in str(c.message) for c in caught)
    np.testing.assert_array_equal(w.detach().numpy(), w2.detach().numpy())


SCHEDULES = {
    "polynomial": lambda m, o: m.optim.lr_scheduler.PolynomialLR(o, total_iters=7, power=2.0),
    "polynomial_default": lambda m, o: m.optim.lr_scheduler.PolynomialLR(o),
    "warm_restarts": lambda m, o: m.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3),
    "warm_restarts_mult": lambda m, o: m.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2,
                                                                                        eta_min=0.01),
}
EPOCHS = [0.5, 1.5, 2.7, 3.0, 7.2, 12.0, 1.0, 30.5] + [i * 0.7 for i in range(12)]


def schedule(m, make, epochs=None, reload_at=None):
    p = m.zeros(2, requires_grad=True)
    opt = m.optim.SGD([p], lr=0.5)
    s = make(m, opt)
    out = [s.get_last_lr()[0]]
    for i in range(20):
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")            # the epoch argument's deprecation warning
            s.step() if epochs is None else s.step(epochs[i])
        if i == reload_at:
            sd = s.state_dict()
            s = make(m, m.optim.SGD([p], lr=0.5))
            s.optimizer = opt
            s.load_state_dict(sd)
        out.append(s.get_last_lr()[0])
    return out


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_equal_torchs(name):
    make = SCHEDULES[name]
    assert schedule(tg, make) == schedule(torch, make)
    assert schedule(tg, make, EPOCHS) == schedule(torch, make, EPOCHS)          # fractional and jumping epochs
    assert schedule(tg, make, reload_at=6) == schedule(torch, make, reload_at=6)


def test_warm_restarts_errors_as_torchs():
    for kw in (dict(T_0=0), dict(T_0=2.5), dict(T_0=2, T_mult=0), dict(T_0=2, eta_min="x")):
        with pytest.raises(ValueError) as want:
            torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(torch.optim.SGD([torch.zeros(1)], lr=0.1), **kw)
        with pytest.raises(ValueError) as got:
            tg.optim.lr_scheduler.CosineAnnealingWarmRestarts(tg.optim.SGD([tg.zeros(1)], lr=0.1), **kw)
        assert str(got.value) == str(want.value)


CYCLIC = {
    "triangular": (lambda m, o: m.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=3), "SGD"),
    "triangular2": (lambda m, o: m.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=2, step_size_down=4,
                                                               mode="triangular2"), "SGD"),
    "exp_range": (lambda m, o: m.optim.lr_scheduler.CyclicLR(o, [0.01], [0.1], step_size_up=3, mode="exp_range",
                                                             gamma=0.9), "SGD"),
    "custom_iterations": (lambda m, o: m.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                                     scale_fn=lambda x: 1 / (1 + x),
                                                                     scale_mode="iterations"), "SGD"),
    "adam_beta1": (lambda m, o: m.optim.lr_scheduler.CyclicLR(o, 0.001, 0.01, step_size_up=3, base_momentum=0.85,
                                                              max_momentum=0.95), "Adam"),
    "no_momentum": (lambda m, o: m.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=3, cycle_momentum=False),
                    "Adagrad"),
}


@pytest.mark.parametrize("name", sorted(CYCLIC))
def test_cyclic_lr_equals_torchs(name):
    make, opt_name = CYCLIC[name]
    res = []
    for m in (torch, tg):
        p = m.zeros(2, requires_grad=True)
        kw = {"momentum": 0.9} if opt_name == "SGD" else {}
        opt = getattr(m.optim, opt_name)([p], lr=0.5, **kw)
        s = make(m, opt)
        seq = []
        for _ in range(14):
            opt.step()
            s.step()
            g = opt.param_groups[0]
            seq.append((s.get_last_lr()[0], g.get("momentum"), g.get("betas")))
        res.append(seq)
    assert res[0] == res[1]
    with pytest.raises(ValueError) as want:
        torch.optim.lr_scheduler.CyclicLR(torch.optim.Adagrad([torch.zeros(1)]), 0.1, 1.0)
    with pytest.raises(ValueError) as got:
        tg.optim.lr_scheduler.CyclicLR(tg.optim.Adagrad([tg.zeros(1)]), 0.1, 1.0)
    assert str(got.value) == str(want.value)

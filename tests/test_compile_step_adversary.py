"""A whole training step compiled as one program, against the same step run eagerly and
torch's, while the user changes things between (and inside) the steps: the optimizer's
options set by hand and by every lr scheduler, its state cleared or loaded, gradients
changed, parameters converted or replaced. After every step the parameters, gradients,
optimizer state and module buffers of the compiled run equal the eager run's bit for bit
(float32), and torch's to rounding; where a program cannot give that, the call runs
eagerly after a warning."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg

TOL = dict(rtol=2e-5, atol=2e-6)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _model(lib, bn=False):
    """The same small network in tracegrad or torch, with the same initial values."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(12, 16)] + ([torch.nn.BatchNorm1d(16)] if bn else []) + \
        [torch.nn.ReLU(), torch.nn.Linear(16, 5)]
    tm = torch.nn.Sequential(*layers)
    if lib is torch:
        return tm
    layers = [tg.nn.Linear(12, 16)] + ([tg.nn.BatchNorm1d(16)] if bn else []) + [tg.nn.ReLU(), tg.nn.Linear(16, 5)]
    gm = tg.nn.Sequential(*layers)
    with tg.no_grad():
        for p, q in zip(tm.parameters(), gm.parameters()):
            p = p.detach().numpy()
            q.copy_(tg.tensor(p, dtype=tg.float32))
    return gm


def _np(t):
    return t.detach().cpu().numpy().copy() if isinstance(t, (tg.Tensor, torch.Tensor)) else t


def _snapshot(model, opts):
    """Parameters, their .grad, buffers and each optimizer's state (by parameter order), as numpy."""
    snap = {}
    for n, p in model.named_parameters():
        snap["param " + n] = _np(p)
        snap["grad " + n] = None if p.grad is None else _np(p.grad)
    for n, b in model.named_buffers():
        snap["buffer " + n] = _np(b)
    for j, opt in enumerate(opts):
        for k, p in enumerate(q for g in opt.param_groups for q in g["params"]):
            for key, v in (opt.state[p].items() if p in opt.state else ()):
                snap[f"optimizer {j} param {k} {key}"] = _np(v)
    return snap


def _train(lib, make_opt, body, between=None, steps=6, compiled=False, bn=False, **kw):
    """`steps` calls of body(lib, model, opts, x, y) (compiled with tracegrad.compile where
    `compiled`), between(i, lib, model, opts) before each -> (snapshots after each call, the
    calls' results, the compiled function or None)."""
    model = _model(lib, bn)
    opts = make_opt(lib, model)
    opts = opts if isinstance(opts, tuple) else (opts,)

    def step(x, y):
        return body(lib, model, opts, x, y)
    f = tg.compile(step, **kw) if compiled else step
    rng = np.random.default_rng(1)
    snaps, outs = [], []
    for i in range(steps):
        x = lib.tensor(rng.standard_normal((8, 12)), dtype=lib.float32)
        y = lib.tensor(rng.integers(0, 5, 8))
        if between is not None:
            between(i, lib, model, opts)
        outs.append(f(x, y))
        snaps.append(_snapshot(model, opts))
    return snaps, outs, (f if compiled else None)


def _same(a, b, exact, what):
    assert a.keys() == b.keys(), (what, sorted(set(a) ^ set(b)))
    for k in a:
        x, y = a[k], b[k]
        assert (x is None) == (y is None), (what, k)
        if x is None:
            continue
        assert np.shape(x) == np.shape(y), (what, k)
        if exact:
            assert np.asarray(x).dtype == np.asarray(y).dtype, (what, k)
            np.testing.assert_array_equal(x, y, err_msg=f"{what}: {k}")
        else:
            np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), err_msg=f"{what}: {k}",
                                       **TOL)


def _check(make_opt, body, between=None, steps=6, torch_too=True, warns=False, bn=False, **kw):
    """The compiled run equals the eager one bit for bit after every step, and torch's to
    rounding. Warnings raise unless `warns` (a call that runs eagerly says so). -> the
    compiled function and the warnings it gave."""
    eager, eager_out, _ = _train(tg, make_opt, body, between, steps, bn=bn)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        comp, comp_out, f = _train(tg, make_opt, body, between, steps, compiled=True, bn=bn, **kw)
    if not warns:
        assert not w, [str(x.message) for x in w]
    for i, (a, b) in enumerate(zip(eager, comp)):
        _same(a, b, True, f"step {i}, compiled against eager")
    for i, (a, b) in enumerate(zip(eager_out, comp_out)):
        for x, y in zip(_leaves(a), _leaves(b), strict=True):
            np.testing.assert_array_equal(_np(x), _np(y), err_msg=f"the result of step {i}")
    if torch_too:
        ref, ref_out, _ = _train(torch, make_opt, body, between, steps, bn=bn)
        for i, (a, b) in enumerate(zip(comp, ref)):
            _same(a, b, False, f"step {i}, compiled against torch")
    return f, [str(x.message) for x in w]


def _leaves(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _step(lib, model, opts, x, y):
    opt = opts[0]
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


SGD = lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)  # noqa: E731
ADAM = lambda lib, m: lib.optim.Adam(m.parameters(), lr=0.01)  # noqa: E731


# -- parameters converted between the steps ----------------------------------------------------------

def test_a_module_converted_to_double_between_steps_gets_gradients_of_its_new_dtype():
    """m.double() while the last step's loss (and its graph) is alive: the next backward
    accumulates gradients of the parameters' new dtype, as torch's (the gradient
    accumulator of the old graph was made for float32)."""
    def between(i, lib, model, opts):
        if i == 3:
            model.double()

    def body(lib, model, opts, x, y):
        opt = opts[0]
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x.to(model[0].weight.dtype)), y)
        loss.backward()
        opt.step()
        return loss
    plain = lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1)  # noqa: E731
    _check(plain, body, between)

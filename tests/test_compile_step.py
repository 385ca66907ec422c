"""A whole training step compiled as one program: zero_grad, forward, backward() and
optimizer.step inside @tracegrad.compile, against eager tracegrad and torch over several
steps (parameters, .grad and optimizer state); writes to real tensors (in-place ops on
inputs and buffers) written back after each call."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F

TG_DTYPE = {torch.float64: tg.float64, torch.float32: tg.float32}
TOL = {torch.float64: dict(rtol=1e-12, atol=1e-13), torch.float32: dict(rtol=2e-5, atol=2e-6)}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _models(dtype, seed=0):
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)).to(dtype)
    mk = lambda: nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5)).to(TG_DTYPE[dtype])  # noqa: E731
    gm, em = mk(), mk()
    with tg.no_grad():
        for p, q, r in zip(tm.parameters(), gm.parameters(), em.parameters()):
            q.copy_(tg.tensor(p.detach().numpy()))
            r.copy_(tg.tensor(p.detach().numpy()))
    return tm, gm, em


def _close(a, b, dtype):
    a = a.detach().numpy() if isinstance(a, (tg.Tensor, torch.Tensor)) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, (tg.Tensor, torch.Tensor)) else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, **TOL[dtype])


OPTIMIZERS = {
    "sgd": (lambda lib, ps: lib.optim.SGD(ps, lr=0.1)),
    "sgd_momentum": (lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1)),
    "sgd_nesterov_wd": (lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "adam": (lambda lib, ps: lib.optim.Adam(ps, lr=0.01, weight_decay=0.01)),
    "adam_amsgrad": (lambda lib, ps: lib.optim.Adam(ps, lr=0.01, amsgrad=True)),
    "adamw": (lambda lib, ps: lib.optim.AdamW(ps, lr=0.01)),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_whole_step_matches_eager_and_torch(name, dtype):
    make = OPTIMIZERS[name]
    tm, gm, em = _models(dtype)
    topt, gopt, eopt = make(torch, tm.parameters()), make(tg, gm.parameters()), make(tg, em.parameters())

    @tg.compile(fullgraph=True)
    def step(x, y):
        gopt.zero_grad()
        loss = F.cross_entropy(gm(x), y)
        loss.backward()
        gopt.step()
        return loss

    rng = np.random.default_rng(1)
    for i in range(5):
        xn, yn = rng.standard_normal((8, 12)), rng.integers(0, 5, 8)
        x, y = tg.tensor(xn, dtype=TG_DTYPE[dtype]), tg.tensor(yn)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = step(x, y)
        eopt.zero_grad()
        le = F.cross_entropy(em(x), y)
        le.backward()
        eopt.step()
        topt.zero_grad()
        lt = torch.nn.functional.cross_entropy(tm(torch.tensor(xn, dtype=dtype)), torch.tensor(yn))
        lt.backward()
        topt.step()
        _close(loss, lt, dtype)
        _close(loss, le, dtype)
        for p, q, r in zip(gm.parameters(), tm.parameters(), em.parameters()):
            _close(p, q, dtype)
            _close(p, r, dtype)
            _close(p.grad, q.grad, dtype)
            _close(p.grad, r.grad, dtype)
        if i == 2:                     # a learning-rate change between calls takes effect
            for o in (topt, gopt, eopt):
                o.param_groups[0]["lr"] *= 0.3
    for p, q in zip(gm.parameters(), tm.parameters()):
        sg, st = gopt.state[p], topt.state[q]
        assert set(sg) == set(st)
        for k in st:
            _close(sg[k], st[k], dtype)
    # the first step (state created), the later ones (state read), and the learning-rate
    # change (the optimizer's options are guarded): at most three programs
    assert len(step.cache) <= 3


def test_whole_step_is_one_program_that_writes_in_place():
    tm, gm, em = _models(torch.float64)
    opt = tg.optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)

    @tg.compile(fullgraph=True)
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(gm(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = tg.randn(8, 12, dtype=tg.float64), tg.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    params = list(gm.parameters())
    arrays = [p._data for p in params]
    versions = [p._version for p in params]
    for _ in range(3):
        loss = step(x, y)
    # as eager returns it: requiring grad, its graph freed by the step's backward
    assert loss.requires_grad and not loss.is_leaf
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    # the parameters' storage is updated in place (views and .data aliases see it) and
    # their versions are bumped, as by an in-place update
    assert all(p._data is a for p, a in zip(params, arrays))
    assert all(p._version > v for p, v in zip(params, versions))
    prog = step.last_program
    assert prog.whole_step and prog.bwd_fn is None
    # the backward and the update are in the forward program itself
    src = prog.fwd_fn.source
    assert "matmul" in src or "dot" in src


def test_zero_grad_keep_and_accumulation_match_eager():
    """zero_grad(set_to_none=False) zeroes .grad in place; a step without zero_grad
    accumulates into .grad (the program is guarded on the .grad tensors it read)."""
    tm, gm, em = _models(torch.float64)
    gopt, eopt = tg.optim.SGD(gm.parameters(), lr=0.1), tg.optim.SGD(em.parameters(), lr=0.1)

    def body(model, opt, x, y, zero):
        if zero:
            opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = tg.compile(body)
    rng = np.random.default_rng(3)
    for i in range(4):
        x, y = tg.tensor(rng.standard_normal((8, 12))), tg.tensor(rng.integers(0, 5, 8))
        zero = i % 2 == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            step(gm, gopt, x, y, zero)
        body(em, eopt, x, y, zero)
        for p, r in zip(gm.parameters(), em.parameters()):
            _close(p, r, torch.float64)
            _close(p.grad, r.grad, torch.float64)


def test_manual_sgd_under_no_grad_and_grad_clipping():
    """A hand-written update (p -= lr * p.grad under no_grad) and a read of .grad after
    backward are traced too."""
    tm, gm, em = _models(torch.float64)

    def body(model, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        with tg.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad.clamp(-0.05, 0.05)
                p.grad = None
        return loss

    step = tg.compile(body, fullgraph=True)
    rng = np.random.default_rng(4)
    for _ in range(3):
        x, y = tg.tensor(rng.standard_normal((8, 12))), tg.tensor(rng.integers(0, 5, 8))
        _close(step(gm, x, y), body(em, x, y), torch.float64)
        for p, r in zip(gm.parameters(), em.parameters()):
            _close(p, r, torch.float64)
            assert p.grad is None and r.grad is None


def test_backward_twice_inside_raises_torchs_error():
    tm, gm, em = _models(torch.float64)

    @tg.compile(fullgraph=True)
    def twice(x):
        loss = gm(x).sum()
        loss.backward()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        twice(tg.randn(3, 12, dtype=tg.float64))


def test_backward_of_nothing_that_requires_grad_raises_torchs_error():
    @tg.compile(fullgraph=True)
    def f(x):
        loss = (x * 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        f(tg.randn(3))


def test_inplace_on_input_and_buffer_written_back():
    """In-place ops on an input and on a module buffer (BatchNorm's running statistics in
    training) are written back to the real tensors after each call, as eager does."""
    torch.manual_seed(0)
    tbn = torch.nn.BatchNorm1d(4).double()
    gbn, ebn = nn.BatchNorm1d(4).double(), nn.BatchNorm1d(4).double()

    def body(bn, x, acc):
        acc.add_(x.sum(0))
        acc.mul_(0.5)
        return bn(x) * 2

    f = tg.compile(body)
    rng = np.random.default_rng(5)
    acc_g, acc_e, acc_t = tg.zeros(4, dtype=tg.float64), tg.zeros(4, dtype=tg.float64), torch.zeros(4).double()
    for _ in range(3):
        xn = rng.standard_normal((6, 4))
        x = tg.tensor(xn)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = f(gbn, x, acc_g)
        oe = body(ebn, x, acc_e)
        ot = body(tbn, torch.tensor(xn), acc_t)
        _close(out, ot, torch.float64)
        _close(out, oe, torch.float64)
        _close(acc_g, acc_t, torch.float64)
        _close(gbn.running_mean, tbn.running_mean, torch.float64)
        _close(gbn.running_var, tbn.running_var, torch.float64)
    assert int(gbn.num_batches_tracked) == int(tbn.num_batches_tracked) == 3


def _views_body(m, x):
    y = x * 2
    y[0] = 5.0
    y[:, 1].mul_(3)
    v = y.t()
    v.add_(1)
    r = y[1:]
    r.sub_(0.5)
    z = y.view(-1)
    z[2] = -7.0
    idx = m.tensor([0, 2])
    y[idx] = y[idx] * 10
    y.relu_()
    return y * r.sum()


def test_inplace_on_intermediates_and_their_views_is_functionalized():
    """setitem, in-place ops on views (a column, a transpose, a slice, a flattened view)
    and on the base: compiled values and gradients equal torch's, with no fallback; a
    view read later sees the writes made through its base and its sibling views."""
    xn = np.random.default_rng(0).standard_normal((3, 4))
    xt = torch.tensor(xn, requires_grad=True)
    yt = _views_body(torch, xt)
    yt.sum().backward()
    xc = tg.tensor(xn, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yc = tg.compile(_views_body, fullgraph=True)(tg, xc)
    yc.sum().backward()
    _close(yc, yt, torch.float64)
    _close(xc.grad, xt.grad, torch.float64)
    with tg.no_grad():
        _close(_views_body(tg, tg.tensor(xn)), yt, torch.float64)
    xe = tg.tensor(xn, requires_grad=True)             # eager autograd through the same views agrees too
    _views_body(tg, xe).sum().backward()
    _close(xe.grad, xt.grad, torch.float64)


def test_inplace_on_an_input_is_written_back_and_on_a_leaf_raises_torchs_error():
    def body(x, y):
        x.mul_(2)
        x[0] += y.sum()
        return x + 1
    xn, yn = np.arange(6.0).reshape(2, 3), np.ones(3)
    f = tg.compile(body, fullgraph=True)
    xg, xt = tg.tensor(xn), torch.tensor(xn)
    for _ in range(2):
        out = f(xg, tg.tensor(yn))
        ot = body(xt, torch.tensor(yn))
        _close(out, ot, torch.float64)
        _close(xg, xt, torch.float64)
    leaf = tg.tensor(xn, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        f(leaf, tg.tensor(yn))


def test_a_compiled_model_inside_a_compiled_step_is_inlined():
    tm, gm, em = _models(torch.float64)
    cm = tg.compile(gm)
    gopt, eopt = tg.optim.Adam(gm.parameters(), lr=0.01), tg.optim.Adam(em.parameters(), lr=0.01)

    @tg.compile(fullgraph=True)
    def step(x, y):
        gopt.zero_grad()
        loss = F.cross_entropy(cm(x), y)
        loss.backward()
        gopt.step()
        return loss

    rng = np.random.default_rng(7)
    for _ in range(3):
        x, y = tg.tensor(rng.standard_normal((8, 12))), tg.tensor(rng.integers(0, 5, 8))
        loss = step(x, y)
        eopt.zero_grad()
        le = F.cross_entropy(em(x), y)
        le.backward()
        eopt.step()
        _close(loss, le, torch.float64)
        for p, r in zip(gm.parameters(), em.parameters()):
            _close(p, r, torch.float64)
    assert len(cm.cache) == 0          # traced as part of the step, not compiled on its own


def test_no_grad_inside_a_compiled_function_stops_gradients_as_in_eager():
    def f(m, x):
        with m.no_grad():
            y = x * 2
        return (y * x).sum()

    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    f(torch, xt).backward()
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tg.compile(f)(tg, x).backward()
    _close(x.grad, xt.grad, torch.float64)

    tm, gm, em = _models(torch.float64)
    w = tg.ones(5, dtype=tg.float64, requires_grad=True)

    @tg.compile(fullgraph=True)
    def step(x):
        with tg.no_grad():
            h = gm(x)
        loss = (h * w).sum()
        loss.backward()
        return loss
    step(tg.ones(3, 12, dtype=tg.float64))
    assert all(p.grad is None for p in gm.parameters())
    _close(w.grad, gm(tg.ones(3, 12, dtype=tg.float64)).sum(0), torch.float64)


def test_a_schedule_changing_the_learning_rate_every_step_needs_no_recompile():
    """The learning rate is read at every call: neither the whole step's own guards nor the
    guards on what the function reads (the optimizer's param_groups) recompile for it."""
    import tracegrad.nn as tnn
    for compiled in (False, True):
        tg.manual_seed(0)
        model = tnn.Linear(3, 2, dtype=tg.float64)
        opt = tg.optim.Adam(model.parameters(), lr=0.1)
        sched = tg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20, cycle_momentum=False)

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).sum()
            loss.backward()
            opt.step()
            return loss

        f = tg.compile(step) if compiled else step
        x = tg.tensor(np.arange(12.0).reshape(4, 3) / 10)
        for _ in range(12):
            f(x)
            sched.step()
        if compiled:
            assert f.cache.compiles <= 2
            np.testing.assert_array_equal(model.weight.detach().numpy(), want)
        else:
            want = model.weight.detach().numpy().copy()


def _big_models(seed=0):
    # a first layer of more than 1 MiB (float64 384x384): the generated step writes its new
    # values, and its momentum buffer's, over their own arrays
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(torch.nn.Linear(384, 384), torch.nn.ReLU(), torch.nn.Linear(384, 4)).double()
    gm = nn.Sequential(nn.Linear(384, 384), nn.ReLU(), nn.Linear(384, 4)).to(tg.float64)
    with tg.no_grad():
        for p, q in zip(tm.parameters(), gm.parameters()):
            q.copy_(tg.tensor(p.detach().numpy()))
    return tm, gm


def _steps(model, opt, lib):
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


@pytest.mark.parametrize("hold_views", [False, True], ids=["no-views", "views-held"])
def test_whole_step_updates_big_parameters_in_place_as_torch(hold_views):
    tm, gm = _big_models()
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    gopt = tg.optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)
    tstep, gstep = _steps(tm, topt, torch), tg.compile(_steps(gm, gopt, tg), fullgraph=True)
    rng = np.random.default_rng(1)
    x0, y0 = rng.standard_normal((64, 384)), rng.integers(0, 4, 64)
    tw, gw = tm[0].weight, gm[0].weight
    tptr, gptr = tw.data_ptr(), gw.data_ptr()
    views = (tw.detach()[:3], gw.detach()[:3]) if hold_views else None
    for _ in range(4):
        lt = tstep(torch.tensor(x0), torch.tensor(y0))
        lg = gstep(tg.tensor(x0), tg.tensor(y0))
        _close(lg, lt, torch.float64)
    for p, q in zip(tm.parameters(), gm.parameters()):
        _close(q, p, torch.float64)
        _close(q.grad, p.grad, torch.float64)
        _close(gopt.state[q]["momentum_buffer"], topt.state[p]["momentum_buffer"], torch.float64)
    # the storage stays the parameter's own, as torch's in-place update keeps it; a view taken
    # before the steps sees the new values
    assert tw.data_ptr() == tptr and gw.data_ptr() == gptr
    if hold_views:
        _close(views[1], views[0], torch.float64)
        _close(views[1], gw[:3], torch.float64)
    assert "donate" in gstep.last_program.fwd_fn.source


def test_whole_step_whose_input_is_a_view_of_a_parameter_matches_torch():
    # the input reads the weight's own memory: the update may not be written over it while
    # the step still reads the input, and the input sees the update afterwards, as in torch
    tm, gm = _big_models()
    topt = torch.optim.SGD(tm.parameters(), lr=0.5)
    gopt = tg.optim.SGD(gm.parameters(), lr=0.5)
    tstep, gstep = _steps(tm, topt, torch), tg.compile(_steps(gm, gopt, tg), fullgraph=True)
    y0 = np.arange(64) % 4
    tx, gx = tm[0].weight.detach()[:64], gm[0].weight.detach()[:64]
    for _ in range(3):
        lt = tstep(tx, torch.tensor(y0))
        lg = gstep(gx, tg.tensor(y0))
        _close(lg, lt, torch.float64)
        _close(gx, tx, torch.float64)
    for p, q in zip(tm.parameters(), gm.parameters()):
        _close(q, p, torch.float64)


def test_may_donate_refuses_every_input_that_shares_memory_with_a_donor():
    from tracegrad.compile import may_donate
    w, b, x = np.zeros((8, 4)), np.zeros(4), np.ones((3, 4))
    assert may_donate([x, w, b], (1, 2))
    assert not may_donate([w[:3], w, b], (1, 2))            # an argument that views a donor
    assert not may_donate([x, w, w.T], (1, 2))              # two donors over one array
    flat = np.zeros(36)
    assert may_donate([x, flat[:32].reshape(8, 4), flat[32:]], (1, 2))   # one allocation, no overlap
    assert not may_donate([flat[30:33], flat[:32].reshape(8, 4), flat[32:]], (1, 2))
    # memory numpy did not allocate: arrays over one buffer made separately
    buf = bytearray(8 * 40)
    a1, a2 = np.frombuffer(buf, np.float64)[:32].reshape(8, 4), np.frombuffer(buf, np.float64)[30:34]
    assert not may_donate([a2, a1, b], (1, 2))
    assert not may_donate([x, a1, np.frombuffer(buf, np.float64)[4:8]], (1, 2))
    assert may_donate([np.frombuffer(buf, np.float64)[32:], a1, b], (1, 2))
    ro = np.zeros(4)
    ro.flags.writeable = False
    assert not may_donate([x, w, ro], (1, 2))

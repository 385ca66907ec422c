"""A compiled training step against torch where state outside the call changes between
calls: .grad tensors made anew by an eager backward, learning-rate schedules and
optimizer options set around or inside the step. Each compiled result equals torch's
(and eager tracegrad's), or the call runs eagerly after a warning."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn.functional as F

from test_compile_step import _close, _models


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _batch(rng, dtype=torch.float64):
    xn, yn = rng.standard_normal((8, 12)), rng.integers(0, 5, 8)
    return (tg.tensor(xn, dtype=tg.float64 if dtype == torch.float64 else tg.float32), tg.tensor(yn),
            torch.tensor(xn, dtype=dtype), torch.tensor(yn))


def _same_params(gm, tm, dtype=torch.float64):
    for p, q in zip(gm.parameters(), tm.parameters()):
        _close(p, q, dtype)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            _close(p.grad, q.grad, dtype)


@pytest.mark.parametrize("make", [lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda lib, ps: lib.optim.Adam(ps, lr=0.01)], ids=["sgd", "adam"])
def test_compiled_optimizer_step_reads_the_gradients_of_each_call(make):
    # the backward runs eagerly and zero_grad() sets .grad to None: every call has new .grad
    # tensors, which the program reads at each call (it read the first call's before)
    tm, gm, _ = _models(torch.float64)
    topt, gopt = make(torch, tm.parameters()), make(tg, gm.parameters())
    step = tg.compile(gopt.step)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(10):
            xg, yg, xt, yt = _batch(rng)
            gopt.zero_grad()
            F.cross_entropy(gm(xg), yg).backward()
            step()
            topt.zero_grad()
            torch.nn.functional.cross_entropy(tm(xt), yt).backward()
            topt.step()
            _same_params(gm, tm)
    assert len(step.cache) == 2          # the first call found no optimizer state; then one program


def test_a_step_that_writes_gradients_made_outside_matches_torch():
    # clipping writes the .grad tensors an eager backward made: the program writes into the
    # ones the trace saw, so each new set compiles again (past cache_limit, eagerly)
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.Adam(tm.parameters(), lr=0.01), tg.optim.Adam(gm.parameters(), lr=0.01)

    def clip_and_step(lib, model, opt):
        lib.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
    step = tg.compile(lambda: clip_and_step(tg, gm, gopt))
    rng = np.random.default_rng(10)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(10):
            xg, yg, xt, yt = _batch(rng)
            for lib, model, opt, x, y, run in ((tg, gm, gopt, xg, yg, step),
                                               (torch, tm, topt, xt, yt, lambda: clip_and_step(torch, tm, topt))):
                opt.zero_grad()
                lib.nn.functional.cross_entropy(model(x), y).backward()
                run()
            _same_params(gm, tm)
    assert any("recompile limit" in str(x.message) for x in w)


def test_a_step_that_steps_every_other_call_matches_torch():
    # gradients accumulate over two calls; the calls that step read .grad tensors the other
    # program made anew at each of its calls
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.Adam(tm.parameters(), lr=0.01), tg.optim.Adam(gm.parameters(), lr=0.01)

    def body(lib, model, opt, x, y, do_step):
        loss = lib.nn.functional.cross_entropy(model(x), y) / 2
        loss.backward()
        if do_step:
            opt.step()
            opt.zero_grad()
        return loss

    step = tg.compile(lambda x, y, do_step: body(tg, gm, gopt, x, y, do_step))
    rng = np.random.default_rng(1)
    for i in range(8):
        xg, yg, xt, yt = _batch(rng)
        _close(step(xg, yg, i % 2 == 1), body(torch, tm, topt, xt, yt, i % 2 == 1), torch.float64)
        _same_params(gm, tm)


def _train(lib, model, opt, x, y):
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_a_schedule_stepped_inside_the_compiled_step_runs_eagerly_as_torch():
    # the trace would step the schedule once (the first call then used the next rate) and the
    # program never again: the step runs eagerly, after a warning naming the schedule's line
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)
    tsched = torch.optim.lr_scheduler.StepLR(topt, 1, gamma=0.5)
    gsched = tg.optim.lr_scheduler.StepLR(gopt, 1, gamma=0.5)

    @tg.compile
    def step(x, y):
        loss = _train(tg, gm, gopt, x, y)
        gsched.step()
        return loss

    rng = np.random.default_rng(2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(4):
            xg, yg, xt, yt = _batch(rng)
            _close(step(xg, yg), _train(torch, tm, topt, xt, yt), torch.float64)
            tsched.step()
            assert gopt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
            _same_params(gm, tm)
    msgs = [str(x.message) for x in w if "StepLR.step() inside a compiled function" in str(x.message)]
    assert len(msgs) == 1 and "gsched.step()" in msgs[0]


def test_a_learning_rate_set_inside_the_step_by_a_helper_runs_eagerly_as_torch():
    # the program reads each group's rate as the call starts, before the function sets it; a
    # rate set outside between calls (to 5.0) then won over the one set inside
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)

    def set_lr(opt, lr):
        for group in opt.param_groups:
            group["lr"] = lr

    def body(lib, model, opt, x, y, lr):
        set_lr(opt, lr)
        return _train(lib, model, opt, x, y)

    step = tg.compile(lambda x, y, lr: body(tg, gm, gopt, x, y, lr))
    rng = np.random.default_rng(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            set_lr(gopt, 5.0)
            set_lr(topt, 5.0)
            xg, yg, xt, yt = _batch(rng)
            _close(step(xg, yg, 0.05), body(torch, tm, topt, xt, yt, 0.05), torch.float64)
            _same_params(gm, tm)
    # the helper's write into the group (an object the call does not own) is found before a trace
    assert any("writes an item of `opt.param_groups[...]`" in str(x.message) for x in w)


def test_a_failed_trace_leaves_the_optimizers_options_as_they_were():
    # the trace set the rate (halving it), then failed; the eager run that follows halves it once
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)

    def halve(opt):
        for group in opt.param_groups:
            group["lr"] *= 0.5

    def body(lib, model, opt, x, y):
        halve(opt)
        return _train(lib, model, opt, x, y).item()        # .item() of a traced value: not traced

    step = tg.compile(lambda x, y: body(tg, gm, gopt, x, y))
    rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(3):
            xg, yg, xt, yt = _batch(rng)
            assert step(xg, yg) == pytest.approx(body(torch, tm, topt, xt, yt), rel=1e-12)
            assert gopt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
            _same_params(gm, tm)


def _bn_models():
    torch.manual_seed(5)
    tm = torch.nn.Sequential(torch.nn.Linear(12, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 5)).double()
    gm = tg.nn.Sequential(tg.nn.Linear(12, 6), tg.nn.BatchNorm1d(6), tg.nn.Linear(6, 5)).double()
    with tg.no_grad():
        for p, q in zip(tm.parameters(), gm.parameters()):
            q.copy_(tg.tensor(p.detach().numpy()))
    return tm, gm


def test_train_and_eval_inside_the_step_set_the_flags_at_every_call_as_torch():
    # the function reads the model in the mode the call finds, then switches it: the trace
    # switched it once and the guards saw the flags it left, so the next call (eval, as the
    # last one left it) ran a program traced in training mode
    tm, gm = _bn_models()
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)

    def body(lib, model, opt, x, y):
        before = model(x)                   # in the mode the model is in as the call starts
        model.train()
        _train(lib, model, opt, x, y)
        model.eval()
        return before

    step = tg.compile(lambda x, y: body(tg, gm, gopt, x, y))
    rng = np.random.default_rng(6)
    for i in range(4):
        if i == 2:
            tm.train()
            gm.train()
        xg, yg, xt, yt = _batch(rng)
        _close(step(xg, yg), body(torch, tm, topt, xt, yt), torch.float64)
        assert [m.training for m in gm.modules()] == [m.training for m in tm.modules()]
        _same_params(gm, tm)
        _close(gm[1].running_mean, tm[1].running_mean, torch.float64)
        _close(gm[1].running_var, tm[1].running_var, torch.float64)
    assert len(step.cache) == 2          # one program per mode the calls found


def test_a_step_that_calls_train_needs_no_program_per_call():
    # model.train() at the start of the step, model.eval() outside between the calls: the
    # guards see the eval flags each call starts with, so one program serves them all
    tm, gm = _bn_models()
    # (not Adam: the gradient of the bias before the batch norm is rounding noise, whose sign it follows)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    gopt = tg.optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)

    def body(lib, model, opt, x, y):
        model.train()
        return _train(lib, model, opt, x, y)

    step = tg.compile(lambda x, y: body(tg, gm, gopt, x, y))
    rng = np.random.default_rng(7)
    for _ in range(4):
        gm.eval()
        tm.eval()
        xg, yg, xt, yt = _batch(rng)
        _close(step(xg, yg), body(torch, tm, topt, xt, yt), torch.float64)
        assert gm.training and gm[1].training
        _same_params(gm, tm)
        _close(gm[1].running_mean, tm[1].running_mean, torch.float64)
    assert len(step.cache) == 2          # the first call found no momentum buffers


def test_optimizer_step_hooks_run_at_every_call_as_torch():
    # a hook with a Python side effect ran once, as the trace was made: such a step runs
    # eagerly; a hook of tensor ops alone (scaling the gradients) is traced with the step
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)
    seen = {"torch": [], "tg": []}

    def halve(opt, args, kwargs):
        for group in opt.param_groups:
            for p in group["params"]:
                p.grad.mul_(0.5)
    for opt, key in ((topt, "torch"), (gopt, "tg")):
        opt.register_step_pre_hook(halve)
        opt.register_step_post_hook(lambda opt, args, kwargs, key=key: seen[key].append(len(seen[key])))
    step = tg.compile(lambda x, y: _train(tg, gm, gopt, x, y))
    rng = np.random.default_rng(8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            xg, yg, xt, yt = _batch(rng)
            _close(step(xg, yg), _train(torch, tm, topt, xt, yt), torch.float64)
            _same_params(gm, tm)
    assert seen["tg"] == seen["torch"] == [0, 1, 2]
    assert any("a step hook of SGD has a Python side effect" in str(x.message) for x in w)

    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)
    topt.register_step_pre_hook(halve)
    gopt.register_step_pre_hook(halve)
    step = tg.compile(lambda x, y: _train(tg, gm, gopt, x, y), fullgraph=True)
    for _ in range(3):
        xg, yg, xt, yt = _batch(rng)
        _close(step(xg, yg), _train(torch, tm, topt, xt, yt), torch.float64)
        _same_params(gm, tm)


def test_a_gan_step_with_two_backwards_through_a_detach_compiles_as_torch():
    # the discriminator's loss reads the generator's output through detach(): its backward
    # neither reaches nor frees the generator's graph, which the generator's loss then uses
    def nets(lib):
        lib.manual_seed(0)
        g = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.Tanh(), lib.nn.Linear(6, 6)).double()
        d = lib.nn.Sequential(lib.nn.Linear(6, 5), lib.nn.Tanh(), lib.nn.Linear(5, 1)).double()
        return g, d
    tg_g, tg_d = nets(tg)
    t_g, t_d = nets(torch)
    with tg.no_grad():
        for p, q in zip([*t_g.parameters(), *t_d.parameters()], [*tg_g.parameters(), *tg_d.parameters()]):
            q.copy_(tg.tensor(p.detach().numpy()))
    opts = {}
    for lib, g, d in ((tg, tg_g, tg_d), (torch, t_g, t_d)):
        opts[lib] = (lib.optim.Adam(g.parameters(), lr=0.01, betas=(0.5, 0.9)),
                     lib.optim.SGD(d.parameters(), lr=0.05, momentum=0.5))

    def body(lib, g, d, z, real):
        og, od = opts[lib]
        od.zero_grad()
        fake = g(z)
        ld = lib.nn.functional.softplus(-d(real)).mean() + lib.nn.functional.softplus(d(fake.detach())).mean()
        ld.backward()
        od.step()
        og.zero_grad()
        lg = lib.nn.functional.softplus(-d(fake)).mean()
        lg.backward()
        og.step()
        return ld, lg

    step = tg.compile(lambda z, real: body(tg, tg_g, tg_d, z, real), fullgraph=True)
    rng = np.random.default_rng(9)
    for _ in range(3):
        zn, rn = rng.standard_normal((5, 4)), rng.standard_normal((5, 6))
        got = step(tg.tensor(zn), tg.tensor(rn))
        want = body(torch, t_g, t_d, torch.tensor(zn), torch.tensor(rn))
        for a, b in zip(got, want):
            _close(a, b, torch.float64)
        _same_params(tg_g, t_g)
        _same_params(tg_d, t_d)


def test_a_gradient_the_step_only_reads_and_returns_is_that_calls():
    # the program reads each call's .grad (a backward outside made new ones); a .grad it
    # returns is that call's too, the very tensor, as eager returns it
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)

    def body(model, opt):
        opt.step()
        return {"grad": model[0].weight.grad, "norm": model[0].weight.grad.norm()}

    step = tg.compile(lambda: body(gm, gopt))
    rng = np.random.default_rng(13)
    for _ in range(4):
        xg, yg, xt, yt = _batch(rng)
        gopt.zero_grad()
        F.cross_entropy(gm(xg), yg).backward()
        got = step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(xt), yt).backward()
        want = body(tm, topt)
        assert got["grad"] is gm[0].weight.grad
        _close(got["grad"], want["grad"], torch.float64)
        _close(got["norm"], want["norm"], torch.float64)
        _same_params(gm, tm)


def test_a_clone_of_the_gradient_returned_by_the_step_is_not_the_momentum_buffers_storage():
    # the first momentum buffer is a clone of the gradient, as is what the step returns: one
    # value of the graph, whose array became the buffer's storage, and the next call's
    # in-place update of the buffer changed the tensor the caller held
    torch.manual_seed(12)
    tm = torch.nn.Linear(3, 2).double()
    gm = tg.nn.Linear(3, 2).double()
    with tg.no_grad():
        for p, q in zip(tm.parameters(), gm.parameters()):
            q.copy_(tg.tensor(p.detach().numpy()))
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    gopt = tg.optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)

    def body(lib, model, opt, x, y):
        opt.zero_grad()
        lib.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        return model.weight.grad.clone(), model.bias.grad.clone()[1:]

    step = tg.compile(lambda x, y: body(tg, gm, gopt, x, y), fullgraph=True)
    rng = np.random.default_rng(11)
    held = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            xn, yn = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
            held.append((step(tg.tensor(xn), tg.tensor(yn)), body(torch, tm, topt, torch.tensor(xn), torch.tensor(yn))))
            for got, want in held:
                for a, b in zip(got, want):
                    _close(a, b, torch.float64)
            _same_params(gm, tm)


def test_a_gradient_the_step_returns_is_the_grad_tensor_the_next_calls_accumulate_into():
    # without zero_grad the calls accumulate into .grad in place: a returned .grad (or a view
    # of it) is that tensor, as in eager, so what the caller holds follows the accumulation
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)

    def body(lib, model, opt, x, y):
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        return model[0].weight.grad, model[2].bias.grad[1:], model[2].bias.grad * 1

    step = tg.compile(lambda x, y: body(tg, gm, gopt, x, y), fullgraph=True)
    rng = np.random.default_rng(14)
    held = []
    for _ in range(4):
        xg, yg, xt, yt = _batch(rng)
        got = step(xg, yg)
        assert got[0] is gm[0].weight.grad
        held.append((got, body(torch, tm, topt, xt, yt)))
        for got, want in held:
            for a, b in zip(got, want):
                _close(a, b, torch.float64)
        _same_params(gm, tm)


def test_in_place_ops_on_views_of_parameters_inside_the_step_write_them_as_torch():
    # the padding row of an embedding zeroed after the update, a pruning mask set through
    # indexing, a row scaled through a view taken before the step: views of real tensors
    # were values of their own, and the writes through them were lost
    def make(lib):
        lib.manual_seed(0)
        return lib.nn.Embedding(6, 4).double(), lib.nn.Linear(4, 3).double()
    (te, tl), (ge, gl) = make(torch), make(tg)
    with tg.no_grad():
        for p, q in zip([*te.parameters(), *tl.parameters()], [*ge.parameters(), *gl.parameters()]):
            q.copy_(tg.tensor(p.detach().numpy()))
    mask_n = np.abs(tl.weight.detach().numpy()) < 0.2
    topt = torch.optim.SGD([*te.parameters(), *tl.parameters()], lr=0.5, momentum=0.9)
    gopt = tg.optim.SGD([*ge.parameters(), *gl.parameters()], lr=0.5, momentum=0.9)

    def body(lib, emb, lin, opt, mask, idx, y):
        row = lin.weight[:, 1]                  # a view, taken before the update
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(lin(emb(idx).mean(1)), y)
        loss.backward()
        opt.step()
        with lib.no_grad():
            emb.weight[0].zero_()
            lin.weight[mask] = 0.0
            row.mul_(0.5)
            lin.bias.narrow(0, 1, 2).clamp_(-0.1, 0.1)
        return loss, row * 1

    step = tg.compile(lambda idx, y: body(tg, ge, gl, gopt, tg.tensor(mask_n), idx, y), fullgraph=True)
    rng = np.random.default_rng(15)
    for _ in range(4):
        idx, y = rng.integers(0, 6, (5, 3)), rng.integers(0, 3, 5)
        got = step(tg.tensor(idx), tg.tensor(y))
        want = body(torch, te, tl, topt, torch.tensor(mask_n), torch.tensor(idx), torch.tensor(y))
        for a, b in zip(got, want):
            _close(a, b, torch.float64)
        _same_params(ge, te)
        _same_params(gl, tl)


def test_in_place_op_on_a_view_of_a_parameter_with_grad_on_raises_torchs_error():
    m = tg.nn.Linear(3, 2)

    def body(x):
        m.weight[0].zero_()
        return m(x).sum()

    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place"):
        tg.compile(body)(tg.ones(2, 3))
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place"):
        body(tg.ones(2, 3))


def test_a_decorated_methods_reads_are_guarded():
    # no_grad() on a method wraps it in tracegrad's own function, whose code the guards did
    # not read, nor what it wraps: a changed attribute the method reads kept its old value
    def decorated(lib):
        class Decorated:
            scale = 2.0

            @lib.no_grad()
            def scaled(self, x):
                return x * self.scale
        return Decorated()

    g, t = decorated(tg), decorated(torch)
    f = tg.compile(lambda x: g.scaled(x))
    for scale in (2.0, 3.0, -0.5):
        g.scale = t.scale = scale
        _close(f(tg.ones(3, dtype=tg.float64)), t.scaled(torch.ones(3, dtype=torch.float64)), torch.float64)


def _momentum_sgd(lib):
    class MomentumSGD(lib.optim.Optimizer):
        """A user's optimizer that makes its state at its first step, as many do."""

        def __init__(self, params, lr, momentum):
            super().__init__(params, dict(lr=lr, momentum=momentum))

        @lib.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "buf" not in state:
                        state["buf"] = p.grad.clone()
                    else:
                        state["buf"].mul_(group["momentum"]).add_(p.grad)
                    p.add_(state["buf"], alpha=-group["lr"])
    return MomentumSGD


def test_a_users_optimizer_that_makes_its_state_in_step_matches_torch():
    # the trace stored its symbolic buffers into the optimizer's state, and the program never
    # made them: that call runs eagerly (the state restored first), and once the state
    # exists the step, which updates it in place, compiles
    tm, gm, _ = _models(torch.float64)
    topt = _momentum_sgd(torch)(tm.parameters(), lr=0.1, momentum=0.9)
    gopt = _momentum_sgd(tg)(gm.parameters(), lr=0.1, momentum=0.9)
    step = tg.compile(lambda x, y: _train(tg, gm, gopt, x, y))
    rng = np.random.default_rng(16)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(4):
            xg, yg, xt, yt = _batch(rng)
            _close(step(xg, yg), _train(torch, tm, topt, xt, yt), torch.float64)
            _same_params(gm, tm)
            for p, q in zip(gm.parameters(), tm.parameters()):
                assert type(gopt.state[p]["buf"]) is tg.Tensor
                _close(gopt.state[p]["buf"], topt.state[q]["buf"], torch.float64)
    assert sum("changes MomentumSGD.state" in str(x.message) for x in w) == 1
    assert step.last_program is not None          # the later calls ran a program


def test_autograd_grad_of_parameters_inside_the_step_matches_torch():
    # autograd.grad with respect to a module's parameters inside a compiled step (a gradient
    # penalty, a manual update): the trace differentiated with respect to its inputs only,
    # raised "does not require grad" and ran the step eagerly, or failed under fullgraph
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.Adam(tm.parameters(), lr=0.01), tg.optim.Adam(gm.parameters(), lr=0.01)

    def body(lib, model, opt, x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        grads = lib.autograd.grad(loss, list(model.parameters()), create_graph=True)
        penalty = sum((g ** 2).sum() for g in grads)
        (loss + 0.1 * penalty).backward()
        opt.step()
        return loss, penalty

    step = tg.compile(lambda x, y: body(tg, gm, gopt, x, y), fullgraph=True)
    rng = np.random.default_rng(17)
    for _ in range(3):
        xg, yg, xt, yt = _batch(rng)
        for a, b in zip(step(xg, yg), body(torch, tm, topt, xt, yt)):
            _close(a, b, torch.float64)
        _same_params(gm, tm)


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_gradient_clipping_in_a_whole_step_traces_under_fullgraph(clip):
    """clip_grad_norm_/clip_grad_value_ scale .grad in place under no_grad; a Linear weight's
    gradient is a transpose of a value of the derivative, which the graph connects to the
    parameters but which requires no grad in eager (backward without create_graph): the write
    through it is traced, not refused as a write to a value that requires grad."""
    tm, gm, _ = _models(torch.float64)
    topt, gopt = torch.optim.SGD(tm.parameters(), lr=0.1), tg.optim.SGD(gm.parameters(), lr=0.1)

    def step(lib, model, opt, x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if clip == "norm":
            lib.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        else:
            lib.nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss
    cstep = tg.compile(lambda x, y: step(tg, gm, gopt, x, y), fullgraph=True)
    rng = np.random.default_rng(3)
    for _ in range(3):
        xg, yg, xt, yt = _batch(rng)
        _close(cstep(xg, yg), step(torch, tm, topt, xt, yt), torch.float64)
        _same_params(gm, tm)


def test_views_of_parameters_returned_from_a_step_follow_later_steps_as_eager():
    """m.weight[0], m.weight.t() returned from a compiled step are views of the parameter, as
    eager's: they share its memory, carry its history and show what later steps write (the
    program returned snapshots of the values)."""
    def run(compiled):
        tg.manual_seed(0)
        m = tg.nn.Linear(3, 2)
        opt = tg.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss, m.weight[0], m.weight.t(), m.bias.detach()
        f = tg.compile(step) if compiled else step
        rng = np.random.default_rng(0)
        held = [f(tg.tensor(rng.standard_normal((4, 3)), dtype=tg.float32), tg.tensor(rng.standard_normal((4, 2)), dtype=tg.float32))
                for _ in range(3)]
        return m, held
    (me, he), (mc, hc) = run(False), run(True)
    for e, c in zip(he, hc):
        for k in (1, 2, 3):
            np.testing.assert_array_equal(c[k].detach().numpy(), e[k].detach().numpy())
            assert c[k].requires_grad == e[k].requires_grad
            base = mc.weight if k < 3 else mc.bias
            assert np.shares_memory(c[k].detach().numpy(), base.detach().numpy())
    np.testing.assert_array_equal(hc[0][1].detach().numpy(), mc.weight.detach().numpy()[0])   # the first call's view, now

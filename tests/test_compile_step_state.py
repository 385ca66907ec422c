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
    # tensors, which the program must read (it read the first call's before)
    tm, gm, _ = _models(torch.float64)
    topt, gopt = make(torch, tm.parameters()), make(tg, gm.parameters())
    step = tg.compile(gopt.step)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # past cache_limit: eager, after a warning
        for _ in range(5):
            xg, yg, xt, yt = _batch(rng)
            gopt.zero_grad()
            F.cross_entropy(gm(xg), yg).backward()
            step()
            topt.zero_grad()
            torch.nn.functional.cross_entropy(tm(xt), yt).backward()
            topt.step()
            _same_params(gm, tm)


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

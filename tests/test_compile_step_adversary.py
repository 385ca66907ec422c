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
    if not isinstance(t, (tg.Tensor, torch.Tensor)):
        return t
    t = t.detach().cpu()
    return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy().copy()


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
            # float32 rounding, grown over steps where an element cancels (a momentum buffer's
            # small entry among large ones): relative to the tensor's scale
            y = np.asarray(y, np.float64)
            scale = float(np.abs(y).max()) if y.size else 0.0
            np.testing.assert_allclose(np.asarray(x, np.float64), y, err_msg=f"{what}: {k}", rtol=TOL["rtol"],
                                       atol=TOL["atol"] + TOL["rtol"] * scale)


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


# -- the optimizer's options changed between the steps ---------------------------------------------

_SCHEDULES = {}      # id(optimizer) -> its schedule (outside what the step reads)


def _schedule(make):
    def between(i, lib, model, opts):
        opt = opts[0]
        if i == 0:
            _SCHEDULES[id(opt)] = make(lib.optim.lr_scheduler, opt)
        elif isinstance(_SCHEDULES[id(opt)], lib.optim.lr_scheduler.ReduceLROnPlateau):
            _SCHEDULES[id(opt)].step(1.0)         # never better: the rate falls at every step
        else:
            _SCHEDULES[id(opt)].step()
    return between


SCHEDULES = {
    "StepLR": lambda s, opt: s.StepLR(opt, 1, gamma=0.7),
    "CosineAnnealingLR": lambda s, opt: s.CosineAnnealingLR(opt, 4),
    "OneCycleLR": lambda s, opt: s.OneCycleLR(opt, max_lr=0.05, total_steps=20),       # momentum or beta1 too
    "CyclicLR": lambda s, opt: s.CyclicLR(opt, 0.001, 0.05, step_size_up=3),          # momentum or beta1 too
    "ReduceLROnPlateau": lambda s, opt: s.ReduceLROnPlateau(opt, patience=0, factor=0.5),
}


@pytest.mark.parametrize("make_opt", [SGD, ADAM, lambda lib, m: lib.optim.AdamW(m.parameters(), lr=0.01)],
                         ids=["sgd", "adam", "adamw"])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_every_schedule_takes_effect_at_the_next_step_without_a_program_per_step(schedule, make_opt):
    """The learning rate, and the momentum or Adam's beta1 that OneCycleLR and CyclicLR
    cycle, are read by the program at every call: no recompile per step (which would reach
    the recompile limit and run eagerly after a warning)."""
    f, _ = _check(make_opt, _step, _schedule(SCHEDULES[schedule]), steps=7)
    assert f.cache.compiles <= 2          # the first step makes the optimizer's state: a second program


@pytest.mark.parametrize("make_opt, key, values", [
    (SGD, "lr", [0.1, 0.05, 0.2, 1]),
    (SGD, "momentum", [0.9, 0.5, 0.0, 0.9, 0.7]),
    (SGD, "dampening", [0.0, 0.5, 0.25]),
    (SGD, "weight_decay", [0.0, 0.1, 0.2, 0]),
    (SGD, "nesterov", [False, True]),
    (SGD, "maximize", [False, True]),
    (ADAM, "lr", [0.01, 0.02, 0.005]),
    (ADAM, "betas", [(0.9, 0.999), (0.8, 0.99), (0.5, 0.9)]),
    (ADAM, "eps", [1e-8, 1e-3, 0.5]),
    (ADAM, "weight_decay", [0.0, 0.1, 0.01]),
    (ADAM, "maximize", [False, True]),
    (ADAM, "foreach", [None, False]),
    (lambda lib, m: lib.optim.AdamW(m.parameters(), lr=0.01), "weight_decay", [0.01, 0.1, 0.0, 0.3]),
    (lambda lib, m: lib.optim.Adam(m.parameters(), lr=0.01, amsgrad=True), "betas", [(0.9, 0.999), (0.8, 0.9)]),
])
def test_an_option_set_by_hand_between_steps_takes_effect_at_the_next_step(make_opt, key, values):
    def between(i, lib, model, opts):
        opts[0].param_groups[0][key] = values[i % len(values)]
    f, _ = _check(make_opt, _step, between, steps=7)
    # float options are read at every call; a program for each optimizer state and each of
    # them being zero or not, and for each value of a flag
    zero = {v == 0 for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert f.cache.compiles <= 2 * max(len(zero), 1) if key not in ("nesterov", "maximize", "foreach") else \
        f.cache.compiles <= 2 * len(values)


def test_a_tensor_learning_rate_changed_in_place_needs_no_program_per_step():
    def make(lib, m):
        return lib.optim.Adam(m.parameters(), lr=lib.tensor(0.01))

    def between(i, lib, model, opts):
        opts[0].param_groups[0]["lr"].fill_(0.01 / (i + 1))
    f, _ = _check(make, _step, between)
    assert f.cache.compiles <= 2


@pytest.mark.parametrize("read", ["scale", "return", "momentum", "betas", "caught"])
def test_a_step_that_reads_an_option_in_python_runs_eagerly_as_torch(read):
    """An option the program reads at every call, read by the function's own Python code
    (scaling the loss by the learning rate, returning it) would keep the first call's value:
    the step runs eagerly after a warning (also where the function caught the trace's error),
    and needs no trace per new value."""
    def body(lib, model, opts, x, y):
        opt = opts[0]
        group = opt.param_groups[0]
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        if read == "scale":
            loss = loss * (group["lr"] * 10)
        if read == "caught":
            try:
                scale = float(group["lr"])
            except Exception:
                scale = 0.1
            loss = loss * scale
        loss.backward()
        opt.step()
        if read == "momentum":
            return loss.detach() * group["momentum"]
        if read == "betas":
            return loss.detach() * group["betas"][0]
        return (loss, group["lr"]) if read == "return" else loss

    def between(i, lib, model, opts):
        group = opts[0].param_groups[0]
        group["lr"] = 0.1 / (i + 1)
        if "momentum" in group:
            group["momentum"] = 0.9 - 0.1 * (i % 3)
        else:
            group["betas"] = (0.9 - 0.1 * (i % 3), 0.999)
    make = ADAM if read == "betas" else SGD
    f, w = _check(make, body, between, warns=True)
    key = {"betas": "betas", "momentum": "momentum"}.get(read, "lr")
    assert len(w) == 1 and f"reads the option '{key}'" in w[0], w
    assert f.cache.compiles <= 2          # (the optimizer state made by the first call is guarded)


def _converted(i, lib, model, opts, to="double"):
    if i == 3:
        getattr(model, to)()


def _step_any_dtype(lib, model, opts, x, y):
    opt = opts[0]
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(model(x.to(model[0].weight.dtype)).float(), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("to", ["double", "half"])
def test_momentum_buffers_of_another_dtype_than_their_parameters_run_eagerly(to):
    """m.double() or m.half() after the momentum buffers were made: the eager update computes
    them in their own dtype, which the traced one did not (float16 parameters differed from
    eager by 6e-5): the step runs eagerly after a warning."""
    f, w = _check(SGD, _step_any_dtype, lambda *a: _converted(*a, to=to), torch_too=to == "double", warns=True)
    assert len(w) == 1 and "momentum_buffer" in w[0] and "not traced" in w[0], w


def test_adam_state_replaced_by_one_of_another_dtype_runs_eagerly():
    def between(i, lib, model, opts):
        if i == 3:
            opt = opts[0]
            for p in model.parameters():
                opt.state[p]["exp_avg"] = opt.state[p]["exp_avg"].double()
    f, w = _check(ADAM, _step, between, torch_too=False, warns=True)      # torch's lerp_ raises
    assert len(w) == 1 and "'exp_avg'" in w[0], w


RMSPROP_ADAGRAD = {
    "rmsprop": lambda lib, m: lib.optim.RMSprop(m.parameters(), lr=0.01),
    "rmsprop_momentum_centered": lambda lib, m: lib.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.9,
                                                                  centered=True, weight_decay=0.1),
    "rmsprop_maximize": lambda lib, m: lib.optim.RMSprop(m.parameters(), lr=0.01, maximize=True, centered=True),
    "adagrad": lambda lib, m: lib.optim.Adagrad(m.parameters(), lr=0.1),
    "adagrad_decay": lambda lib, m: lib.optim.Adagrad(m.parameters(), lr=0.1, lr_decay=0.1, weight_decay=0.1,
                                                      initial_accumulator_value=0.5, maximize=True),
}


@pytest.mark.parametrize("name", list(RMSPROP_ADAGRAD))
def test_rmsprop_and_adagrad_steps_compile_whole_as_eager_and_torch(name):
    """RMSprop's and Adagrad's updates traced too (they ran eagerly after a warning), their
    options read at every call."""
    keys = ("alpha", "eps") if name.startswith("rmsprop") else ("lr_decay", "eps")

    def between(i, lib, model, opts):
        group = opts[0].param_groups[0]
        group["lr"] = 0.05 / (i + 1)
        group[keys[0]] = [0.9, 0.99, 0.5][i % 3] if keys[0] == "alpha" else [0.0, 0.1, 0.3][i % 3]
        group[keys[1]] = [1e-8, 1e-3][i % 2]
    f, _ = _check(RMSPROP_ADAGRAD[name], _step, between, fullgraph=True)
    assert f.cache.compiles <= 2


def test_rmsprop_momentum_cycled_by_one_cycle_needs_no_program_per_step():
    make = lambda lib, m: lib.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.9)  # noqa: E731
    f, _ = _check(make, _step, _schedule(SCHEDULES["OneCycleLR"]), steps=7)
    assert f.cache.compiles <= 2


@pytest.mark.parametrize("make", [
    lambda lib, m: lib.optim.Adam(m.parameters(), lr=0.01, amsgrad=True),
    lambda lib, m: lib.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.5, centered=True),
    lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
], ids=["adam_amsgrad", "rmsprop_centered_momentum", "sgd_momentum"])
def test_the_state_a_compiled_step_makes_is_laid_out_as_torchs(make):
    """The keys of each parameter's state in torch's order (state_dict gives them so)."""
    layouts = {}
    for lib, compiled in ((torch, False), (tg, False), (tg, True)):
        model = _model(lib)
        opt = make(lib, model)

        def step(x, y):
            return _step(lib, model, (opt,), x, y)
        f = tg.compile(step) if compiled else step
        f(lib.ones(8, 12), lib.tensor([0, 1, 2, 3, 4, 0, 1, 2]))
        layouts[lib.__name__, compiled] = [list(s) for s in opt.state_dict()["state"].values()]
    assert layouts["tracegrad", True] == layouts["tracegrad", False] == layouts["torch", False]


def test_an_eager_step_in_another_thread_while_a_step_is_traced_reads_its_options():
    """While a step is traced, the options its program reads at every call are stand-ins in
    the param groups; another thread's eager step (and copies of its state_dict) see them as
    their values."""
    from tracegrad import functionalize
    from tracegrad.ir.graph import Graph
    import copy
    import threading

    def train(opt, model):
        model(tg.ones(2, 12)).sum().backward()
        opt.step()
        return copy.deepcopy(opt.state_dict()["param_groups"][0]["betas"]), model[0].weight.detach().numpy().copy()
    results = []
    for traced in (False, True):
        model = _model(tg)
        opt = tg.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.1)
        functionalize.begin(Graph("g")) if traced else None
        try:
            if traced:
                with pytest.raises(functionalize.OptionRead):
                    float(opt.param_groups[0]["lr"])      # in the tracing thread: the trace's error
            t = threading.Thread(target=lambda: results.append(train(opt, model)))
            t.start()
            t.join()
        finally:
            functionalize.end() if traced else None
        assert type(opt.param_groups[0]["lr"]) is float and type(opt.param_groups[0]["betas"][0]) is float
    assert results[0][0] == results[1][0] == (0.9, 0.999)
    np.testing.assert_array_equal(results[0][1], results[1][1])


# -- module buffers --------------------------------------------------------------------------------

@pytest.mark.parametrize("momenta", [[None], [None, 0.1, 0.5], [0.1, 0.3]], ids=["cumulative", "switched", "changed"])
def test_batchnorm_running_stats_and_count_follow_eager_and_torch(momenta):
    """momentum=None (a cumulative average, its factor 1 / num_batches_tracked, which ran
    eagerly after a warning) and a momentum changed between steps."""
    def between(i, lib, model, opts):
        model[1].momentum = momenta[i % len(momenta)]
    f, _ = _check(SGD, _step, between, steps=7, bn=True)
    assert f.cache.compiles <= 2 * len(momenta)


def test_batchnorm_in_train_and_eval_between_steps_follows_eager_and_torch():
    def between(i, lib, model, opts):
        model.train(i % 3 != 1)
        model[1].momentum = None
    # (not Adam: the bias before the BatchNorm has a gradient of rounding errors alone, which
    # Adam's normalization would make steps of the learning rate's size)
    _check(SGD, _step, between, steps=7, bn=True)


# -- gradients -------------------------------------------------------------------------------------

@pytest.mark.parametrize("zero", ["model", "model_keep", "optimizer_keep", "by_hand", "none"])
def test_each_way_of_zeroing_gradients_needs_no_program_per_step(zero):
    """model.zero_grad() read each .grad before dropping it: the step guard then held the
    .grad tensors that each call makes anew, and every call recompiled (reaching the
    recompile limit). Without zeroing, gradients accumulate over the steps as in eager."""
    def body(lib, model, opts, x, y):
        opt = opts[0]
        if zero == "model":
            model.zero_grad()
        elif zero == "model_keep":
            model.zero_grad(set_to_none=False)
        elif zero == "optimizer_keep":
            opt.zero_grad(set_to_none=False)
        elif zero == "by_hand":
            for p in model.parameters():
                p.grad = None
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    f, _ = _check(SGD, body, steps=7)
    assert f.cache.compiles <= 3 if zero != "none" else f.cache.compiles <= 2


@pytest.mark.parametrize("make", [SGD, ADAM, lambda lib, m: lib.optim.RMSprop(m.parameters(), lr=0.01),
                                  lambda lib, m: lib.optim.Adagrad(m.parameters(), lr=0.1)],
                         ids=["sgd", "adam", "rmsprop", "adagrad"])
def test_a_step_on_bfloat16_parameters_runs_eagerly(make):
    """The eager update of bfloat16 parameters computes in float32 and rounds each tensor it
    writes once; the traced one rounded every op (parameters one bfloat16 step off from
    eager's after the first step): the step runs eagerly after one warning, and, the
    decision not depending on the options, no trace per learning rate."""
    def between(i, lib, model, opts):
        if i == 0:
            model.to(lib.bfloat16)
        opts[0].param_groups[0]["lr"] *= 0.9
    f, w = _check(make, _step_any_dtype, between, torch_too=False, warns=True)
    assert len(w) == 1 and "bfloat16" in w[0], w
    assert f.cache.compiles <= 2


# -- the rest of the user's changes between steps: each as eager and torch, without a warning ------

def _between_cases():
    def add_group(i, lib, model, opts):
        if i == 2:
            model.extra = lib.nn.Parameter(lib.ones(5))
            opts[0].add_param_group({"params": [model.extra], "lr": 0.05})

    def clear_state(i, lib, model, opts):
        if i == 3:
            opts[0].state.clear()

    def load_opt(i, lib, model, opts):
        if i == 1:
            _SCHEDULES[id(opts[0])] = opts[0].state_dict()      # (the tensors: written in place later)
            _SCHEDULES[id(opts[0])] = {"state": {k: {n: v.clone() for n, v in s.items()} for k, s in
                                                 _SCHEDULES[id(opts[0])]["state"].items()},
                                       "param_groups": _SCHEDULES[id(opts[0])]["param_groups"]}
        if i == 4:
            opts[0].load_state_dict(_SCHEDULES[id(opts[0])])

    def grads(fn):
        def between(i, lib, model, opts):
            if i % 2 == 1:
                for p in model.parameters():
                    fn(lib, p)
        return between

    def load_model(i, lib, model, opts):
        if i == 2:
            model.load_state_dict({k: v * 0.5 for k, v in model.state_dict().items()})

    def copy_no_grad(i, lib, model, opts):
        if i == 2:
            with lib.no_grad():
                model[0].weight.copy_(model[0].weight * 2)

    def set_data(i, lib, model, opts):
        if i == 2:
            model[0].weight.data = model[0].weight.data * 2

    def freeze(i, lib, model, opts):
        if i == 2:
            model[0].weight.requires_grad_(False)
        if i == 4:
            model[0].weight.requires_grad_(True)

    return {
        "add_param_group": add_group,
        "state_clear": clear_state,
        "optimizer_load_state_dict": load_opt,
        "grad_mul_": grads(lambda lib, p: p.grad.mul_(0.5)),
        "grad_none": grads(lambda lib, p: setattr(p, "grad", None)),
        "grad_other_tensor": grads(lambda lib, p: setattr(p, "grad", lib.ones_like(p) * 0.1)),
        "model_load_state_dict": load_model,
        "copy_under_no_grad": copy_no_grad,
        "data_set": set_data,
        "freeze_unfreeze": freeze,
    }


def _step_extra(lib, model, opts, x, y):
    """_step, with the parameter `extra` (registered by a later step) added to the output."""
    opt = opts[0]
    opt.zero_grad()
    out = model(x)
    if hasattr(model, "extra"):
        out = out + model.extra
    loss = lib.nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return loss


def _step_accumulating(lib, model, opts, x, y):
    loss = lib.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opts[0].step()
    return loss


@pytest.mark.parametrize("make", [SGD, ADAM], ids=["sgd", "adam"])
@pytest.mark.parametrize("case", list(_between_cases()))
@pytest.mark.parametrize("zero", [True, False], ids=["zero_grad", "accumulating"])
def test_state_changed_between_steps_is_seen_by_the_next_step(case, make, zero):
    body = _step_extra if zero else _step_accumulating
    _check(make, body, _between_cases()[case], steps=6)


def test_a_second_optimizer_on_the_same_parameters():
    def make(lib, m):
        return SGD(lib, m), ADAM(lib, m)

    def body(lib, model, opts, x, y):
        opts[0].zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opts[0].step()
        opts[1].step()
        return loss

    def between(i, lib, model, opts):
        opts[0].param_groups[0]["lr"] = 0.1 / (i + 1)
        opts[1].param_groups[0]["betas"] = (0.9 - 0.05 * i, 0.999)
    f, _ = _check(make, body, between)
    assert f.cache.compiles <= 2


@pytest.mark.parametrize("clip", ["norm", "norm_inf", "value"])
def test_gradient_clipping_inside_the_step_with_its_bound_changed_between_steps(clip):
    bounds = [0.1, 0.5, 0.01]

    def body(lib, model, opts, x, y):
        opt = opts[0]
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        bound = bounds[len(opt.state) and int(opt.param_groups[0]["clip_index"])]
        if clip == "value":
            lib.nn.utils.clip_grad_value_(model.parameters(), bound)
            norm = loss
        else:
            norm = lib.nn.utils.clip_grad_norm_(model.parameters(), bound,
                                                norm_type=float("inf") if clip == "norm_inf" else 2.0)
        opt.step()
        return loss, norm

    def between(i, lib, model, opts):
        opts[0].param_groups[0]["clip_index"] = i % 3        # a group option of the user's, guarded
    f, _ = _check(SGD, body, between)
    assert f.cache.compiles <= 4


@pytest.mark.parametrize("way", ["logits", "retain_graph", "inputs", "closure", "closure_again"])
def test_steps_of_other_shapes(way):
    def body(lib, model, opts, x, y):
        opt = opts[0]
        F = lib.nn.functional

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss
        if way.startswith("closure"):
            loss = opt.step(closure)
            return (loss, closure().detach()) if way == "closure_again" else loss
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        if way == "retain_graph":
            loss.backward(retain_graph=True)
            (loss * 0.5).backward()
        elif way == "inputs":
            loss.backward(inputs=[model[0].weight, model[2].bias])
        else:
            loss.backward()
        opt.step()
        return (loss, out.detach()) if way == "logits" else loss
    f, _ = _check(ADAM, body)
    assert f.cache.compiles <= 2


def test_an_exception_after_backward_leaves_what_eager_leaves():
    """A step that raises after backward() (before the optimizer's step) at one call: the
    gradients are those of that call, the parameters and state not stepped, as in eager."""
    def body(lib, model, opts, x, y):
        opt = opts[0]
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if opt.param_groups[0].get("fail"):
            raise ValueError("a failing step")
        opt.step()
        return loss

    def between(i, lib, model, opts):
        opts[0].param_groups[0]["fail"] = i == 3

    def guarded(lib, model, opts, x, y):
        try:
            return body(lib, model, opts, x, y)
        except ValueError as e:
            return lib.tensor(float(len(str(e))))
    for fn in (body, guarded):
        runs = []
        for compiled in (False, True):
            model = _model(tg)
            opts = (ADAM(tg, model),)
            f = tg.compile(lambda x, y: fn(tg, model, opts, x, y)) if compiled else \
                (lambda x, y: fn(tg, model, opts, x, y))
            rng = np.random.default_rng(1)
            snaps = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                for i in range(5):
                    x, y = tg.tensor(rng.standard_normal((8, 12)), dtype=tg.float32), tg.tensor(rng.integers(0, 5, 8))
                    between(i, tg, model, opts)
                    if fn is body and i == 3:
                        with pytest.raises(ValueError, match="a failing step"):
                            f(x, y)
                    else:
                        f(x, y)
                    snaps.append(_snapshot(model, opts))
            runs.append(snaps)
        for i, (a, b) in enumerate(zip(*runs)):
            _same(a, b, True, f"step {i}, compiled against eager")


def test_a_tensor_learning_rate_written_inside_the_step_before_it_steps_runs_eagerly():
    """The program reads a tensor learning rate as the call starts: one the function halves
    before opt.step() runs the step eagerly (as it did before the rate's trace-time read
    stopped being a guarded value read)."""
    def make(lib, m):
        return lib.optim.SGD(m.parameters(), lr=lib.tensor(0.1), momentum=0.9)

    def body(lib, model, opts, x, y):
        opt = opts[0]
        with lib.no_grad():
            opt.param_groups[0]["lr"].mul_(0.5)
        return _step(lib, model, opts, x, y)
    f, w = _check(make, body, warns=True)
    assert len(w) == 1 and "learning rate tensor written in place" in w[0], w


@pytest.mark.parametrize("lib", ["eager", "compiled", "torch"])
def test_values_a_step_returns_after_its_backward_are_as_eager_returns_them(lib):
    """The loss and logits a whole step returns after `loss.backward()`: eager's (and
    torch's) require grad, have a grad_fn and are no leaves; a backward through them again
    raises that the graph was freed, and so does autograd.grad. Compiled, they did not require
    grad, and a second backward said "element 0 of tensors does not require grad"."""
    m = torch if lib == "torch" else tg
    model = _model(m)
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    x, y = m.tensor(rng.standard_normal((8, 12)), dtype=m.float32), m.tensor(rng.integers(0, 5, 8))

    def step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = m.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss, out, out.detach()
    f = tg.compile(step) if lib == "compiled" else step
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # compiled whole, no fallback
        for _ in range(3):
            loss, out, det = f(x, y)
    assert loss.requires_grad and out.requires_grad and not det.requires_grad
    assert loss.grad_fn is not None and not loss.is_leaf and det.grad_fn is None
    for fn in (lambda: loss.backward(), lambda: (out * 2).sum().backward(),
               lambda: m.autograd.grad(loss, list(model.parameters()))):
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            fn()
    grads = [p.grad.clone() for p in model.parameters()]
    assert all(g.abs().sum() > 0 for g in grads)
    with pytest.raises(RuntimeError, match="does not require grad"):
        det.sum().backward()

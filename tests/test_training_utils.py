"""Training utilities a tutorial reaches for, against torch: learning-rate schedules, data
loading, gradient clipping, parameter vectors, RMSprop and Adagrad, and generators."""
import math
import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.optim as toptim
from tracegrad.utils import data as tdata


def _params(lib, seed=0, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in ((3, 2), (4,))]


def _grads(seed, shapes, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


# -- learning-rate schedules ---------------------------------------------------------------------

SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 8], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.001)),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.95 ** e + 0.01 * e)),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9)),
    ("ConstantLR", dict(factor=0.5, total_iters=3)),
    ("LinearLR", dict(start_factor=0.2, end_factor=0.9, total_iters=6)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=12)),
    ("OneCycleLR", dict(max_lr=[0.5, 0.2], epochs=3, steps_per_epoch=4, anneal_strategy="linear", three_phase=True)),
]


def _run_schedule(lib, optim_mod, name, kw, opt_name="SGD", steps=11):
    a, b = _params(lib)
    opt_kw = dict(lr=0.1, momentum=0.9) if opt_name == "SGD" else dict(lr=0.1)
    opt = getattr(optim_mod, opt_name)([{"params": [a]}, {"params": [b], "lr": 0.05}], **opt_kw)
    sched = getattr(optim_mod.lr_scheduler, name)(opt, **kw)
    seen = [list(sched.get_last_lr())]
    for _ in range(steps):
        opt.step()
        sched.step()
        seen.append(list(sched.get_last_lr()))
        seen.append([g.get("momentum", g.get("betas")) for g in opt.param_groups])
    return seen


@pytest.mark.parametrize("name,kw", SCHEDULES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULES)])
def test_schedules_give_torchs_learning_rates_bit_for_bit(name, kw):
    steps = 11 if name != "OneCycleLR" else 11
    ours = _run_schedule(tg, toptim, name, kw, steps=steps)
    theirs = _run_schedule(torch, torch.optim, name, kw, steps=steps)
    assert ours == theirs


def test_one_cycle_cycles_adams_beta1_and_refuses_to_overstep():
    ours = _run_schedule(tg, toptim, "OneCycleLR", dict(max_lr=0.3, total_steps=6), "Adam", steps=5)
    theirs = _run_schedule(torch, torch.optim, "OneCycleLR", dict(max_lr=0.3, total_steps=6), "Adam", steps=5)
    assert ours == theirs
    for lib, om in ((tg, toptim), (torch, torch.optim)):
        opt = om.SGD(_params(lib), lr=0.1, momentum=0.9)
        s = om.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s.step()
            s.step()
            with pytest.raises(ValueError, match="Tried to step 3 times. The specified number of total steps is 2"):
                s.step()


def test_reduce_lr_on_plateau_follows_the_metric():
    metrics = [1.0, 0.9, 0.91, 0.92, 0.93, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    out = []
    for lib, om in ((tg, toptim), (torch, torch.optim)):
        opt = om.SGD(_params(lib), lr=0.1)
        s = om.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=0.01)
        seq = []
        for m in metrics:
            s.step(m)
            seq.append((opt.param_groups[0]["lr"], s.num_bad_epochs, s.cooldown_counter))
        out.append(seq)
    assert out[0] == out[1]
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        toptim.lr_scheduler.ReduceLROnPlateau(toptim.SGD(_params(tg), lr=0.1), factor=1.5)


def test_schedule_state_dict_round_trip_and_the_order_warning():
    opt = toptim.SGD(_params(tg), lr=0.1)
    s = toptim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        s.step()
    for _ in range(3):
        opt.step()
        s.step()
    state = s.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 4
    opt2 = toptim.SGD(_params(tg), lr=0.1)
    s2 = toptim.lr_scheduler.StepLR(opt2, step_size=7, gamma=0.9)
    s2.load_state_dict(state)
    assert s2.step_size == 2 and s2.last_epoch == 4
    with pytest.raises(TypeError, match="is not an Optimizer"):
        toptim.lr_scheduler.StepLR(object(), step_size=1)


# -- optimizers ---------------------------------------------------------------------------------

OPTS = [
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.8, centered=True)),
    ("RMSprop", dict(lr=0.02, momentum=0.5, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.2, initial_accumulator_value=0.3, eps=1e-8)),
    ("Adagrad", dict(lr=0.1, maximize=True)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", OPTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTS)])
def test_rmsprop_and_adagrad_follow_torch(name, kw, dtype):
    trajs = []
    for lib, om in ((tg, toptim), (torch, torch.optim)):
        ps = _params(lib, dtype=dtype)
        opt = getattr(om, name)(ps, **kw)
        for step in range(6):
            for p, g in zip(ps, _grads(step, [(3, 2), (4,)], dtype)):
                p.grad = lib.tensor(g)
            opt.step()
        trajs.append([p.detach().numpy().copy() for p in ps])
        trajs.append(sorted(str(k) for st in opt.state.values() for k in st))
    tol = dict(rtol=1e-13, atol=1e-15) if dtype == "float64" else dict(rtol=2e-6, atol=1e-7)
    for a, b in zip(trajs[0], trajs[2]):
        np.testing.assert_allclose(a, b, **tol)
    assert trajs[1] == trajs[3]


def test_optimizer_argument_errors_match_torch():
    for name, kw, msg in (("RMSprop", dict(lr=-1), "Invalid learning rate: -1"),
                          ("RMSprop", dict(alpha=-0.5), "Invalid alpha value: -0.5"),
                          ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value: -1"),
                          ("Adagrad", dict(initial_accumulator_value=-1),
                           "Invalid initial_accumulator_value value: -1")):
        for lib, om in ((tg, toptim), (torch, torch.optim)):
            with pytest.raises(ValueError, match=msg):
                getattr(om, name)(_params(lib), **kw)


# -- gradient clipping and parameter vectors -----------------------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf])
def test_clip_grad_norm_matches_torch(norm_type):
    res = []
    for lib in (tg, torch):
        ps = _params(lib)
        for p, g in zip(ps, _grads(5, [(3, 2), (4,)])):
            p.grad = lib.tensor(g * 3)
        total = getattr(lib.nn.utils, "clip_grad_norm_")(ps, max_norm=1.5, norm_type=norm_type)
        res.append((float(total), [p.grad.numpy().copy() for p in ps]))
    assert res[0][0] == pytest.approx(res[1][0], rel=1e-12)
    for a, b in zip(res[0][1], res[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_clip_grad_norm_edge_cases():
    p = tg.ones(2, requires_grad=True)
    assert float(tnn.utils.clip_grad_norm_([p], 1.0)) == 0.0          # no gradients at all
    p.grad = tg.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                           "non-finite, so it cannot be clipped"):
        tnn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    q = tg.ones(3, requires_grad=True)
    q.grad = tg.tensor([0.1, 0.2, 0.2])                                # under the bound: unchanged
    tnn.utils.clip_grad_norm_(q, 10.0)
    np.testing.assert_allclose(q.grad.numpy(), [0.1, 0.2, 0.2], rtol=1e-6)


def test_clip_grad_value_and_parameter_vectors():
    res = []
    for lib in (tg, torch):
        ps = _params(lib)
        for p, g in zip(ps, _grads(7, [(3, 2), (4,)])):
            p.grad = lib.tensor(g)
        lib.nn.utils.clip_grad_value_(ps, 0.5)
        vec = lib.nn.utils.parameters_to_vector(ps)
        lib.nn.utils.vector_to_parameters(vec * 2, ps)
        res.append(([p.grad.numpy().copy() for p in ps], vec.detach().numpy().copy(),
                    [p.detach().numpy().copy() for p in ps], vec.requires_grad))
    for a, b in zip(res[0][0], res[1][0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(res[0][1], res[1][1])
    for a, b in zip(res[0][2], res[1][2]):
        np.testing.assert_array_equal(a, b)
    assert res[0][3] == res[1][3]
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        tnn.utils.vector_to_parameters([1.0], _params(tg))


# -- data ---------------------------------------------------------------------------------------

def _as_np(x):
    if isinstance(x, (tg.Tensor, torch.Tensor)):
        return (x.numpy(), str(x.dtype).replace("torch.", ""))
    if isinstance(x, dict):
        return {k: _as_np(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_as_np(v) for v in x]
    return x


def _same(a, b):
    a, b = _as_np(a), _as_np(b)
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], np.ndarray):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == b[1]
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same_np(a[k], b[k])
    elif isinstance(a, tuple):
        assert a[0] == b[0] and len(a[1]) == len(b[1])
        for x, y in zip(a[1], b[1]):
            _same_np(x, y)
    else:
        assert a == b


def _same_np(a, b):
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], np.ndarray):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == b[1]
    elif isinstance(a, dict):
        for k in a:
            _same_np(a[k], b[k])
    elif isinstance(a, tuple):
        assert a[0] == b[0]
        for x, y in zip(a[1], b[1]):
            _same_np(x, y)
    else:
        assert a == b


Pair = namedtuple("Pair", "x y")


class Samples:
    """A map-style dataset of mixed samples, the same for both libraries."""

    def __init__(self, lib, kind):
        self.lib, self.kind = lib, kind

    def __len__(self):
        return 7

    def __getitem__(self, i):
        lib = self.lib
        x = lib.tensor(np.arange(3, dtype=np.float32) + i)
        if self.kind == "tuple":
            return x, i, float(i) / 2, f"s{i}"
        if self.kind == "dict":
            return {"x": x, "n": np.array([i, -i], dtype=np.int32), "label": i % 2}
        return Pair(x, np.float64(i))


@pytest.mark.parametrize("kind", ["tuple", "dict", "namedtuple"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_dataloader_batches_and_collates_as_torch(kind, drop_last):
    ours = tdata.DataLoader(Samples(tg, kind), batch_size=3, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(Samples(torch, kind), batch_size=3, drop_last=drop_last)
    assert len(ours) == len(theirs)
    a, b = list(ours), list(theirs)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        _same(x, y)


def test_dataloader_shuffles_with_a_seeded_generator_and_covers_every_sample():
    ds = tdata.TensorDataset(tg.arange(20.), tg.arange(20))
    runs = []
    for _ in range(2):
        dl = tdata.DataLoader(ds, batch_size=6, shuffle=True, generator=tg.Generator().manual_seed(3))
        runs.append([y.tolist() for _, y in dl])
    assert runs[0] == runs[1]
    flat = sum(runs[0], [])
    assert sorted(flat) == list(range(20)) and flat != list(range(20))
    dl = tdata.DataLoader(ds, batch_size=6, shuffle=True, generator=tg.Generator().manual_seed(3))
    assert [y.tolist() for _, y in dl] == runs[0]
    assert [y.tolist() for _, y in dl] != runs[0]          # the next epoch takes the next permutation


def test_dataloader_without_batching_and_with_iterable_datasets():
    class Stream(tdata.IterableDataset):
        def __iter__(self):
            return iter(range(5))

    class TStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(5))

    for bs, drop in ((2, False), (2, True), (None, False)):
        a = list(tdata.DataLoader(Stream(), batch_size=bs, drop_last=drop))
        b = list(torch.utils.data.DataLoader(TStream(), batch_size=bs, drop_last=drop))
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_np(_as_np(x), _as_np(y))
    ds = tdata.TensorDataset(tg.arange(4.))
    items = list(tdata.DataLoader(ds, batch_size=None))
    assert len(items) == 4 and items[2][0].shape == ()


def test_dataloader_argument_errors_match_torch():
    ds, tds = tdata.TensorDataset(tg.arange(4.)), torch.utils.data.TensorDataset(torch.arange(4.))
    cases = [
        (dict(sampler=[0, 1], shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive with batch_size"),
        (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            tdata.DataLoader(ds, **kw)
        with pytest.raises(ValueError, match=msg):
            torch.utils.data.DataLoader(tds, **kw)
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        tdata.TensorDataset(tg.zeros(3), tg.zeros(4))
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
        tdata.default_collate([object(), object()])


def test_random_split_subset_and_concat():
    ds = tdata.TensorDataset(tg.arange(10.))
    for lengths in ([0.33, 0.33, 0.34], [3, 7], [0.5, 0.5], [0.1, 0.2, 0.3, 0.4]):
        ours = tdata.random_split(ds, lengths, generator=tg.Generator().manual_seed(1))
        theirs = torch.utils.data.random_split(torch.utils.data.TensorDataset(torch.arange(10.)), lengths,
                                               generator=torch.Generator().manual_seed(1))
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(i for s in ours for i in s.indices) == list(range(10))
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset!"):
        tdata.random_split(ds, [3, 3])
    sub = tdata.Subset(ds, [4, 1])
    assert float(sub[1][0]) == 1.0 and len(sub) == 2
    cat = ds + tdata.TensorDataset(tg.arange(3.) + 100)
    assert len(cat) == 13 and float(cat[11][0]) == 101.0 and float(cat[-1][0]) == 102.0


# -- generators ---------------------------------------------------------------------------------

def test_generators_are_independent_streams_with_state():
    g = tg.Generator().manual_seed(42)
    a = tg.randn(5, generator=g)
    tg.manual_seed(0)
    tg.randn(3)                                     # the global stream moves; g's does not
    b = tg.randn(5, generator=tg.Generator().manual_seed(42))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    state = g.get_state()
    x = tg.rand(4, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(tg.rand(4, generator=g).numpy(), x.numpy())
    s = tg.get_rng_state()
    y = tg.randint(0, 100, (6,))
    tg.set_rng_state(s)
    np.testing.assert_array_equal(tg.randint(0, 100, (6,)).numpy(), y.numpy())
    assert g.initial_seed() == 42 and isinstance(tg.seed(), int)
    with pytest.raises(TypeError, match="argument 'generator' must be torch.Generator"):
        tg.rand(2, generator=3)


def test_a_generator_inside_a_compiled_function_is_never_baked_in():
    g = tg.Generator().manual_seed(0)

    def f(x):
        return x + tg.rand(3, generator=g)

    cf = tg.compile(f)
    x = tg.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = cf(x), cf(x)
    assert not np.array_equal(a.numpy(), b.numpy())

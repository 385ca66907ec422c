"""Checks of tracegrad.distributed run under `mpiexec -n K` (tests/test_distributed.py).

Every rank runs every check in the same order and prints `PASS name` or `FAIL name: why`.
Each rank knows every rank's data (seeded by rank), so expected results are computed
locally with numpy or with a single-process model on the whole batch.
"""
import sys
import traceback
import warnings

import numpy as np

import tracegrad as tg
import tracegrad.distributed as dist
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from tracegrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi", timeout=60)
RANK, WORLD = dist.get_rank(), dist.get_world_size()
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def data(r, shape, dtype, salt=0):
    rng = np.random.default_rng(1000 * salt + r)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(-5, 6, shape).astype(dtype)


@check
def process_group():
    assert dist.is_initialized() and dist.get_backend() == "mpi"
    assert 0 <= RANK < WORLD and WORLD == int(sys.argv[1])
    try:
        dist.init_process_group("mpi")
    except RuntimeError as e:
        assert "twice" in str(e)
    else:
        raise AssertionError("a second init_process_group did not raise")
    t = tg.tensor([float(RANK)])
    dist.all_reduce(t, op="max")          # ReduceOp by name
    assert t.item() == WORLD - 1


@check
def collectives_all_reduce():
    ops = {"SUM": np.sum, "MAX": np.max, "MIN": np.min, "PRODUCT": np.prod, "AVG": np.mean}
    for dtype in (np.float64, np.float32, np.int64, np.int32):
        for name, ref in ops.items():
            if name == "AVG" and np.dtype(dtype).kind != "f":
                continue
            mine = data(RANK, (3, 5), dtype, salt=len(name))
            allv = np.stack([data(r, (3, 5), dtype, salt=len(name)) for r in range(WORLD)])
            t = tg.tensor(mine)
            assert dist.all_reduce(t, op=getattr(dist.ReduceOp, name)) is None
            want = ref(allv, axis=0).astype(dtype)
            tol = 1e-6 if dtype == np.float32 else 1e-14
            np.testing.assert_allclose(t.numpy(), want, rtol=tol, atol=tol, err_msg=f"{name} {dtype}")
            assert t.dtype == tg.tensor(mine).dtype
    # a non-contiguous view is reduced in place into its base
    base = tg.tensor(data(RANK, (4, 6), np.float64, salt=9))
    view = base.t()
    dist.all_reduce(view)
    want = sum(data(r, (4, 6), np.float64, salt=9) for r in range(WORLD))
    np.testing.assert_allclose(base.numpy(), want, rtol=1e-14)
    b = tg.tensor(data(RANK, (7,), np.bool_, salt=3))
    dist.all_reduce(b, op=dist.ReduceOp.MAX)
    np.testing.assert_array_equal(b.numpy(), np.any([data(r, (7,), np.bool_, salt=3) for r in range(WORLD)], 0))
    try:
        dist.all_reduce(tg.tensor([1, 2]), op=dist.ReduceOp.AVG)
    except RuntimeError as e:
        assert "AVG" in str(e)
    else:
        raise AssertionError("AVG of an integer tensor did not raise")


@check
def collectives_broadcast_gather_scatter():
    for src in range(WORLD):
        t = tg.tensor(data(RANK, (2, 3), np.float32, salt=src))
        dist.broadcast(t, src)
        np.testing.assert_array_equal(t.numpy(), data(src, (2, 3), np.float32, salt=src))
    outs = [tg.zeros(2, 3, dtype=tg.int64) for _ in range(WORLD)]
    dist.all_gather(outs, tg.tensor(data(RANK, (2, 3), np.int64)))
    for r in range(WORLD):
        np.testing.assert_array_equal(outs[r].numpy(), data(r, (2, 3), np.int64))
    out = tg.zeros(WORLD * 2, 3)
    dist.all_gather_into_tensor(out, tg.tensor(data(RANK, (2, 3), np.float32)))
    np.testing.assert_array_equal(out.numpy(), np.concatenate([data(r, (2, 3), np.float32) for r in range(WORLD)]))
    # reduce_scatter: rank r receives the sum over ranks of their input_list[r]
    inputs = [tg.tensor(data(RANK, (4,), np.float64, salt=10 + k)) for k in range(WORLD)]
    o = tg.zeros(4, dtype=tg.float64)
    dist.reduce_scatter(o, inputs)
    np.testing.assert_allclose(o.numpy(), sum(data(r, (4,), np.float64, salt=10 + RANK) for r in range(WORLD)),
                               rtol=1e-14)
    big = tg.tensor(data(RANK, (WORLD * 2, 3), np.float64, salt=20))
    o = tg.zeros(2, 3, dtype=tg.float64)
    dist.reduce_scatter_tensor(o, big, op=dist.ReduceOp.MAX)
    want = np.max([data(r, (WORLD * 2, 3), np.float64, salt=20) for r in range(WORLD)], 0)[2 * RANK:2 * RANK + 2]
    np.testing.assert_array_equal(o.numpy(), want)
    t = tg.tensor(data(RANK, (5,), np.float64, salt=30))
    dist.reduce(t, dst=WORLD - 1)
    if RANK == WORLD - 1:
        np.testing.assert_allclose(t.numpy(), sum(data(r, (5,), np.float64, salt=30) for r in range(WORLD)),
                                   rtol=1e-14)
    else:
        np.testing.assert_array_equal(t.numpy(), data(RANK, (5,), np.float64, salt=30))
    dist.barrier()


@check
def async_work_handles():
    ts = [tg.tensor(data(RANK, (1000,), np.float64, salt=40 + k)) for k in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in works:
        assert isinstance(w, dist.Work)
        assert w.wait() is True
        assert w.is_completed() and w.is_success() and w.exception() is None
    for k, t in enumerate(ts):
        np.testing.assert_allclose(t.numpy(), sum(data(r, (1000,), np.float64, salt=40 + k) for r in range(WORLD)),
                                   rtol=1e-13)
    w = dist.broadcast(tg.zeros(3), 0, async_op=True)
    w.wait()
    assert len(w.result()) == 1
    assert dist.barrier(async_op=True).wait()


@check
def differentiable_all_reduce():
    from tracegrad.distributed.nn.functional import all_reduce
    x = tg.tensor(data(RANK, (3, 4), np.float64, salt=50), requires_grad=True)
    y = all_reduce(x)
    np.testing.assert_allclose(y.detach().numpy(), sum(data(r, (3, 4), np.float64, salt=50) for r in range(WORLD)),
                               rtol=1e-14)
    w = tg.tensor(data(RANK, (3, 4), np.float64, salt=51))
    (y * w).sum().backward()
    # d/dx_rank of sum_r <w_r, sum_s x_s> = sum_r w_r: the backward all-reduces the output gradients
    np.testing.assert_allclose(x.grad.numpy(), sum(data(r, (3, 4), np.float64, salt=51) for r in range(WORLD)),
                               rtol=1e-14)


def w2_mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).double()


def global_batch(n=128, salt=0):
    rng = np.random.default_rng(77 + salt)
    return tg.tensor(rng.standard_normal((n, 784))), tg.tensor(rng.integers(0, 10, n))


def shard(t):
    n = t.shape[0] // WORLD
    return t[RANK * n:(RANK + 1) * n]


def copy_of(model, make):
    ref = make()
    with tg.no_grad():
        for p, q in zip(ref.parameters(), model.parameters()):
            p.copy_(q)
    return ref


def assert_same_on_all_ranks(tensors, what):
    flat = np.concatenate([t.detach().numpy().reshape(-1) for t in tensors])
    outs = [tg.zeros(flat.size, dtype=tg.float64) for _ in range(WORLD)]
    dist.all_gather(outs, tg.tensor(flat))
    for r in range(WORLD):
        assert np.array_equal(outs[r].numpy(), flat), f"{what} differ between rank {RANK} and rank {r}"


def close(a, b, what, tol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol, err_msg=what)


@check
def ddp_w2_matches_single_process():
    """The bar: 2 (or 4) ranks of DDP SGD on the W2 MLP, batch 128 global, float64, take the
    same steps as one process on the whole batch."""
    tg.manual_seed(RANK)                         # different on every rank: DDP broadcasts rank 0's
    model = w2_mlp()
    ddp = DDP(model, bucket_cap_mb=1)
    assert ddp.module is model
    assert_same_on_all_ranks(list(model.parameters()), "parameters after wrapping")
    ref = copy_of(model, w2_mlp)
    opt = tg.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = tg.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for step in range(4):
        x, y = global_batch(salt=step)
        opt.zero_grad()
        F.cross_entropy(ddp(shard(x)), shard(y)).backward()
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        if step == 0:
            for (n, p), q in zip(model.named_parameters(), ref.parameters()):
                close(p.grad, q.grad, f"gradient of {n}")
        opt.step()
        ref_opt.step()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"{n} after 4 steps")
    assert_same_on_all_ranks(list(model.parameters()), "parameters after 4 steps")
    assert set(ddp.state_dict()) == {"module." + k for k in model.state_dict()}
    assert len(ddp._buckets) > 1


@check
def ddp_no_sync_accumulates():
    tg.manual_seed(0)
    model = w2_mlp()
    ddp = DDP(model)
    ref = copy_of(model, w2_mlp)
    (xa, ya), (xb, yb) = global_batch(64, salt=5), global_batch(64, salt=6)
    with ddp.no_sync():
        F.cross_entropy(ddp(shard(xa)), shard(ya)).backward()
    local = [p.grad.clone() for p in model.parameters()]
    F.cross_entropy(ddp(shard(xb)), shard(yb)).backward()
    F.cross_entropy(ref(xa), ya).backward()
    F.cross_entropy(ref(xb), yb).backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.grad, q.grad, f"accumulated gradient of {n}")
    # inside no_sync nothing was averaged: rank-local gradients of the first micro-batch
    solo = copy_of(model, w2_mlp)
    F.cross_entropy(solo(shard(xa)), shard(ya)).backward()
    for g, q in zip(local, solo.parameters()):
        close(g, q.grad, "gradient inside no_sync", 1e-13)
    # autograd.grad runs no AccumulateGrad (torch's DDP hooks do not fire): nothing averaged, .grad untouched
    before = [p.grad.clone() for p in model.parameters()]
    gs = tg.autograd.grad(F.cross_entropy(ddp(shard(xa)), shard(ya)), list(model.parameters()))
    for g, q, b, p in zip(gs, solo.parameters(), before, model.parameters()):
        close(g, q.grad, "autograd.grad through DDP", 1e-13)
        assert np.array_equal(b.numpy(), p.grad.numpy())


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 4)
        self.b = nn.Linear(6, 4)        # used by rank 0 only
        self.never = nn.Linear(6, 4)    # used by no rank

    def forward(self, x, use_b):
        return self.a(x) + self.b(x) if use_b else self.a(x)


@check
def ddp_find_unused_parameters():
    tg.manual_seed(3)
    model = Branchy().double()
    ddp = DDP(model, find_unused_parameters=True)
    rng = np.random.default_rng(5)
    xs = [tg.tensor(rng.standard_normal((3, 6))) for _ in range(WORLD)]
    for it in range(2):
        ddp.zero_grad(set_to_none=True)
        ddp(xs[RANK], RANK == 0).sum().backward()
        want = {}
        for r in range(WORLD):
            solo = copy_of(model, lambda: Branchy().double())
            solo(xs[r], r == 0).sum().backward()
            for n, p in solo.named_parameters():
                g = p.grad.numpy() if p.grad is not None else None
                if g is not None:
                    want[n] = want.get(n, 0) + g / WORLD
        for n, p in model.named_parameters():
            if n.startswith("never"):
                assert p.grad is None, f"{n}: unused on every rank, its grad must stay None"
            else:
                np.testing.assert_allclose(p.grad.numpy(), want[n], rtol=1e-13, atol=1e-15, err_msg=n)
    # without find_unused_parameters an unused parameter is an error, as in torch
    ddp2 = DDP(Branchy().double())
    try:
        ddp2(xs[RANK], True).sum().backward()
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e) and "never.weight" in str(e), str(e)
    else:
        raise AssertionError("an unused parameter without find_unused_parameters did not raise")
    dist.barrier()


@check
def ddp_broadcasts_buffers():
    tg.manual_seed(RANK)
    model = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4)).double()
    with tg.no_grad():
        model[1].running_mean.fill_(float(RANK))
    ddp = DDP(model)
    assert model[1].running_mean.numpy().tolist() == [0.0] * 4           # rank 0's, at wrap time
    x = tg.tensor(data(RANK, (6, 5), np.float64, salt=60))
    with tg.no_grad():
        model[1].running_mean.fill_(float(RANK) + 1)
    ddp(x).sum().backward()
    # rank 0's buffers before the forward, then this rank's batch statistics: momentum 0.1
    want = 0.9 * 1.0 + 0.1 * np.mean(model[0](x).detach().numpy(), 0)
    np.testing.assert_allclose(model[1].running_mean.numpy(), want, rtol=1e-12)
    if RANK == 0:                   # evaluation by one rank alone: no collective, no hang
        ddp.eval()
        with tg.no_grad():
            ddp(x)
        ddp.train()
    dist.barrier()


class Reversed(nn.Module):
    """Parameters declared in the opposite order to their use."""

    def __init__(self):
        super().__init__()
        self.last = nn.Linear(16, 4)
        self.first = nn.Linear(8, 16)

    def forward(self, x):
        return self.last(F.relu(self.first(x)))


@check
def ddp_rebuilds_buckets_in_ready_order():
    tg.manual_seed(7)
    model = Reversed().double()
    ddp = DDP(model, bucket_cap_mb=1e-4)            # 104 bytes: about one parameter per bucket
    ref = copy_of(model, lambda: Reversed().double())
    names = [n for n, _ in model.named_parameters()]
    first = [[names[i] for i in b.params] for b in ddp._buckets]
    assert first == [names], first                   # torch's first assignment: one bucket
    unused = DDP(Reversed().double(), bucket_cap_mb=1e-4, find_unused_parameters=True)
    # with find_unused_parameters: assigned in declaration order, the buckets reversed
    assert [[names[i] for i in b.params] for b in unused._buckets] == [
        ["first.bias"], ["last.bias", "first.weight"], ["last.weight"]]
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = tg.optim.SGD(ref.parameters(), lr=0.1)
    rng = np.random.default_rng(8)
    for step in range(3):
        x = tg.tensor(rng.standard_normal((4 * WORLD, 8)))
        opt.zero_grad()
        ddp(shard(x)).pow(2).mean().backward()
        opt.step()
        ref_opt.zero_grad()
        ref(x).pow(2).mean().backward()
        ref_opt.step()
        if step == 0:
            # rebuilt after the first backward: the last layer's gradients come first
            rebuilt = [names[i] for b in ddp._buckets for i in b.params]
            assert rebuilt[:2] in (["last.bias", "last.weight"], ["last.weight", "last.bias"]), rebuilt
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"{n} after rebuilt buckets")


@check
def ddp_compiled_forward():
    tg.manual_seed(4)
    model = w2_mlp()
    ddp = DDP(tg.compile(model))
    ref = copy_of(model, w2_mlp)
    opt = tg.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = tg.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(3):
        x, y = global_batch(salt=10 + step)
        opt.zero_grad()
        F.cross_entropy(ddp(shard(x)), shard(y)).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    assert ddp._call.last_program is not None, "the forward did not run compiled"
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"{n} (compiled forward)")


@check
def ddp_compile_of_ddp():
    """tracegrad.compile(DDP(model)), torch's usual order: the compiled program runs without
    DDP's forward, and the gradients are still averaged (no_sync around the backward too)."""
    tg.manual_seed(6)
    model = w2_mlp()
    ddp = tg.compile(DDP(model))
    ref = copy_of(model, w2_mlp)
    opt = tg.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = tg.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(3):
        x, y = global_batch(salt=30 + step)
        opt.zero_grad()
        F.cross_entropy(ddp(shard(x)), shard(y)).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    assert ddp.last_program is not None, "the forward did not run compiled"
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"{n} (compile of DDP)")
    (xa, ya), (xb, yb) = global_batch(64, salt=40), global_batch(64, salt=41)
    opt.zero_grad()
    ref_opt.zero_grad()
    loss = F.cross_entropy(ddp(shard(xa)), shard(ya))
    with ddp.no_sync():
        loss.backward()
    F.cross_entropy(ddp(shard(xb)), shard(yb)).backward()
    F.cross_entropy(ref(xa), ya).backward()
    F.cross_entropy(ref(xb), yb).backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.grad, q.grad, f"accumulated gradient of {n} (compile of DDP)")


@check
def ddp_compiled_whole_step():
    tg.manual_seed(5)
    model = w2_mlp()
    ddp = DDP(model)
    ref = copy_of(model, w2_mlp)
    opt = tg.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = tg.optim.SGD(ref.parameters(), lr=0.05)

    @tg.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            x, y = global_batch(salt=20 + k)
            step(shard(x), shard(y))
            ref_opt.zero_grad()
            F.cross_entropy(ref(x), y).backward()
            ref_opt.step()
    # the step cannot be traced with DDP's hooks: it says so and runs eagerly, averaging as always
    assert any("DistributedDataParallel's gradient hooks" in str(w.message) for w in caught), \
        [str(w.message) for w in caught]
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"{n} (compiled step)")


def main():
    failed = 0
    for fn in CHECKS:
        try:
            fn()
            print(f"PASS {fn.__name__}", flush=True)
        except Exception as e:
            failed += 1
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}\n{traceback.format_exc()}", flush=True)
        dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

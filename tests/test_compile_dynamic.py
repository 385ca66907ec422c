"""Automatic dynamic shapes: once a call changes an argument's size, that dimension is
compiled symbolically (torch.compile's automatic dynamic), and every later size that passes
the program's guards runs the same program. Each case is checked against eager tracegrad
and torch over many batch sizes, with the number of programs compiled kept small."""
import threading
import tracemalloc

import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F

SIZES = [5, 7, 1, 2, 3, 16, 33, 64, 65, 128, 300, 1000, 9, 2]


def arr(t):
    return np.asarray(t.detach().numpy())


def check(cfn, fn, make, sizes=SIZES, max_programs=3, rtol=1e-12, atol=1e-12):
    """cfn(*make(n)) equals fn(*make(n)) (eager) for every n; at most max_programs compiled."""
    for n in sizes:
        args = make(n)
        got, want = cfn(*args), fn(*args)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            assert g.shape == w.shape, n
            np.testing.assert_allclose(arr(g), arr(w), rtol=rtol, atol=atol, err_msg=f"size {n}")
    assert cfn.cache.compiles <= max_programs, cfn.cache.compiles
    return cfn


def rng_tensor(shape, seed, dtype=np.float64, req=False):
    r = np.random.default_rng(seed)
    return tg.tensor(r.standard_normal(shape).astype(dtype), requires_grad=req)


def test_elementwise_chain_one_program_for_every_size():
    def fn(x, y):
        return ((x * 2 + 1).exp().tanh() * y - x / 3).relu()
    cfn = tg.compile(fn)
    check(cfn, fn, lambda n: (rng_tensor((n, 6), n), rng_tensor((n, 6), n + 1)))
    p = cfn.last_program
    assert p.sym_check is not None and not p.sym_static      # the last calls ran the symbolic program
    assert "s0 = x0.shape[0]" in p.fwd_fn.source


def test_elementwise_bit_for_bit_with_a_static_program_and_torch():
    def fn(x):
        return (x * 3 - 1).sigmoid() * x
    cfn = tg.compile(fn)
    for n in [4, 9, 2, 300, 17]:
        x = rng_tensor((n, 5), n, np.float32)
        got = cfn(x)
        static = tg.compile(fn, dynamic=False)(x)
        np.testing.assert_array_equal(arr(got), arr(static))
        np.testing.assert_array_equal(arr(got), arr(fn(x)))
        tx = torch.tensor(arr(x))
        np.testing.assert_allclose(arr(got), ((tx * 3 - 1).sigmoid() * tx).numpy(), rtol=1e-6, atol=1e-7)
    assert cfn.cache.compiles == 2


def _mlp(seed=0):
    tg.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 6)).double()


def test_mlp_forward_backward_weight_grads_match_eager_and_torch():
    model = _mlp()
    tmodel = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 6)).double()
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.tensor(arr(p)))

    def loss_fn(x, y):
        return F.cross_entropy(model(x), y)
    cfn = tg.compile(loss_fn)
    for n in SIZES:
        x = rng_tensor((n, 12), n)
        y = tg.tensor(np.random.default_rng(n).integers(0, 6, n))
        for p in model.parameters():
            p.grad = None
        loss = cfn(x, y)
        loss.backward()
        got = [arr(p.grad) for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        want_loss = loss_fn(x, y)
        want_loss.backward()
        np.testing.assert_allclose(arr(loss), arr(want_loss), rtol=1e-12)
        for g, p in zip(got, model.parameters()):
            np.testing.assert_allclose(g, arr(p.grad), rtol=1e-10, atol=1e-12)
        tmodel.zero_grad()
        tl = torch.nn.functional.cross_entropy(tmodel(torch.tensor(arr(x))), torch.tensor(arr(y)))
        tl.backward()
        np.testing.assert_allclose(arr(loss), tl.item(), rtol=1e-10)
        for g, tp in zip(got, tmodel.parameters()):
            np.testing.assert_allclose(g, tp.grad.numpy(), rtol=1e-8, atol=1e-10)
    assert cfn.cache.compiles <= 3


def test_softmax_and_log_softmax_rows():
    def fn(x):
        return F.softmax(x, dim=1), F.log_softmax(x * 2, dim=-1)
    cfn = tg.compile(fn)
    check(cfn, fn, lambda n: (rng_tensor((n, 10), n),))
    for n in (3, 50):
        x = rng_tensor((n, 10), n)
        s, ls = cfn(x)
        tx = torch.tensor(arr(x))
        np.testing.assert_allclose(arr(s), torch.softmax(tx, 1).numpy(), rtol=1e-12)
        np.testing.assert_allclose(arr(ls), torch.log_softmax(tx * 2, -1).numpy(), rtol=1e-12, atol=1e-14)


def test_sum_and_mean_over_the_dynamic_dim():
    def fn(x):
        return x.sum(0), x.mean(0), x.mean(), (x * x).sum(dim=1)
    cfn = tg.compile(fn)
    check(cfn, fn, lambda n: (rng_tensor((n, 7), n),), rtol=1e-10, atol=1e-12)
    x = rng_tensor((77, 7), 1)
    tx = torch.tensor(arr(x))
    got = cfn(x)
    for g, w in zip(got, (tx.sum(0), tx.mean(0), tx.mean(), (tx * tx).sum(1))):
        np.testing.assert_allclose(arr(g), w.numpy(), rtol=1e-10)


def test_view_with_the_dynamic_size():
    def fn(x):
        return x.view(x.shape[0], -1) * 2
    cfn = tg.compile(fn)
    check(cfn, fn, lambda n: (rng_tensor((n, 3, 4), n),))
    assert cfn(rng_tensor((6, 3, 4), 0)).shape == (6, 12)
    assert cfn.last_program.sym_check is not None


def test_broadcasting_with_a_size_one_dim():
    def fn(x, y, z):
        return x + y, x * z
    cfn = tg.compile(fn)
    check(cfn, fn, lambda n: (rng_tensor((n, 1, 4), n), rng_tensor((1, 3, 4), 1), rng_tensor((n, 3, 1), 2)))
    x, y = rng_tensor((1, 1, 4), 0), rng_tensor((1, 3, 4), 1)
    tx, ty = torch.tensor(arr(x)), torch.tensor(arr(y))
    np.testing.assert_allclose(arr(cfn(x, y, rng_tensor((1, 3, 1), 2))[0]), (tx + ty).numpy())


def test_whole_training_step_inside():
    def run(compiled):
        model = _mlp(3)
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        losses = []
        for n in SIZES:
            x = rng_tensor((n, 12), n)
            y = tg.tensor(np.random.default_rng(n).integers(0, 6, n))
            losses.append(arr(f(x, y)))
        return losses, [arr(p) for p in model.parameters()], f
    (lc, pc, f), (le, pe, _) = run(True), run(False)
    np.testing.assert_allclose(np.array(lc), np.array(le), rtol=1e-10)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert f.cache.compiles <= 3


def test_a_guard_that_fails_recompiles_with_the_right_answer_on_both_sides():
    def fn(x):
        if x.shape[0] > 64:
            return x * 2
        return x * 3
    cfn = tg.compile(fn)
    for n in [10, 20, 30, 100, 200, 64, 65, 5, 300]:
        x = rng_tensor((n, 2), n)
        np.testing.assert_array_equal(arr(cfn(x)), arr(x) * (2 if n > 64 else 3))
    assert cfn.cache.compiles == 3        # 10 (static), 20 (n <= 64), 100 (n > 64)


def test_dynamic_true_compiles_symbolic_from_the_first_call():
    def fn(x):
        return x.sum(1) + 1
    cfn = tg.compile(fn, dynamic=True)
    # one symbolic program for both dims, one for the batch of 1 (sizes 0 and 1 specialize, as in torch)
    check(cfn, fn, lambda n: (rng_tensor((n, n % 5 + 2), n),), max_programs=2, rtol=1e-10)
    assert len(cfn.last_program.sym_sources) == 2


def test_dynamic_false_compiles_each_size():
    def fn(x):
        return x + 1
    cfn = tg.compile(fn, dynamic=False)
    for n in (3, 4, 5):
        cfn(rng_tensor((n,), n))
    assert cfn.cache.compiles == 3


def test_memory_flat_over_200_sizes():
    model = _mlp(5)

    def fn(x):
        return model(x).relu().sum(1)
    cfn = tg.compile(fn)
    for n in range(2, 40):
        cfn(rng_tensor((n, 12), n))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for n in range(40, 240):
            cfn(rng_tensor((n, 12), n))
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert cfn.cache.compiles <= 3
    assert grown < 1 << 20, grown


def test_threads_share_one_dynamic_program():
    def fn(x, w):
        return (x @ w).tanh().sum(1)
    cfn = tg.compile(fn)
    w = rng_tensor((8, 8), 0)
    cfn(rng_tensor((3, 8), 3), w)
    cfn(rng_tensor((4, 8), 4), w)        # now symbolic
    errors = []

    def work(k):
        try:
            for i in range(30):
                n = 2 + (k * 31 + i * 7) % 90
                x = rng_tensor((n, 8), n)
                np.testing.assert_allclose(arr(cfn(x, w)), arr(fn(x, w)), rtol=1e-12, atol=1e-12)
        except Exception as e:          # reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert cfn.cache.compiles <= 3


def test_symbolic_sizes_never_reach_run_time():
    from tracegrad.ir import symbolic
    env = symbolic.ShapeEnv()
    with env:
        s = env.symbol(5, (0, 0))
        t = s * 2 + 1
        assert t > 3 and int(t) == 11
    with pytest.raises(RuntimeError, match="symbolic size reached run time"):
        int(s)
    with pytest.raises(RuntimeError, match="symbolic size reached run time"):
        str(t)
    with pytest.raises(RuntimeError, match="symbolic size reached run time"):
        _ = s == 5


@pytest.mark.parametrize("ret", ["int", "size", "numel", "nested"])
def test_sizes_the_function_returns_are_the_calls_own(ret):
    """x.shape[0] returned beside a tensor is a plain int of this call (a symbolic size kept in
    the output structure reached the caller as a symbol and raised at its first use)."""
    def fn(x):
        y = x * 2
        if ret == "int":
            return y, x.shape[0]
        if ret == "size":
            return y, x.shape
        if ret == "numel":
            return y, x.numel()
        return {"y": y, "n": [x.shape[0] * 3, x.size(1)]}
    cfn = tg.compile(fn)
    for n in [4, 6, 9, 2, 13]:
        x = rng_tensor((n, 3), n)
        got, want = cfn(x), fn(x)
        if ret == "nested":
            assert got["n"] == want["n"] == [3 * n, 3] and all(type(v) is int for v in got["n"])
            np.testing.assert_array_equal(arr(got["y"]), arr(want["y"]))
            continue
        assert got[1] == want[1] and type(got[1]) is type(want[1]), (n, got[1], want[1])
        np.testing.assert_array_equal(arr(got[0]), arr(want[0]))
    assert cfn.last_program.sym_check is not None


def test_second_derivative_through_a_dynamic_program():
    """create_graph=True through a program with a symbolic batch size: the next derivative
    is the eager one's for every size."""
    w0 = np.random.default_rng(1).standard_normal((3, 4))

    def fn(x, w):
        return ((x @ w).tanh() ** 2).sum()
    cfn = tg.compile(fn)
    for n in [4, 6, 9, 2, 13]:
        x = rng_tensor((n, 3), n, req=True)
        w = tg.tensor(w0, requires_grad=True)
        out = []
        for f in (cfn, fn):
            gx, gw = tg.autograd.grad(f(x, w), (x, w), create_graph=True)
            out.append(tg.autograd.grad((gx * gx).sum() + (gw * gw).sum(), (x, w)))
        for a, b in zip(*out):
            np.testing.assert_allclose(arr(a), arr(b), rtol=1e-10, atol=1e-12, err_msg=f"size {n}")
    assert cfn.cache.compiles <= 3


def test_floor_division_and_modulo_by_a_product_of_sizes():
    """A symbolic size divided by a product (`numel // (2 * n)`) was written without parentheses
    around the divisor: `(24 * s0 // 2 * s0)`, right at the first call only; a reshape inferring
    -1 next to a symbolic dim (GroupNorm's) then raised where eager works."""
    import warnings
    f = lambda x: (x.numel() // (2 * x.shape[0]), (5 * x.shape[0] + 1) % (2 * x.shape[0]),  # noqa: E731
                   tg.ones(x.numel() // (2 * x.shape[0])).shape)
    g = lambda x: x.reshape(x.shape[0], 2, -1).sum(-1)  # noqa: E731
    h = lambda x: tg.nn.functional.group_norm(x, 2)  # noqa: E731
    cf, cg, ch = tg.compile(f), tg.compile(g), tg.compile(h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in [2, 3, 5, 2, 7]:
            x = tg.randn(n, 4, 6)
            assert cf(x) == f(x)
            np.testing.assert_array_equal(cg(x).numpy(), g(x).numpy())
            np.testing.assert_array_equal(ch(x).numpy(), h(x).numpy())

"""Fused groups run in chunks over threads: with tiny chunks (many of them, a ragged
last one) compiled values and gradients still equal eager tracegrad's and torch's."""
import numpy as np
import pytest
import torch

import tracegrad as tg
from tracegrad.codegen import numpy_cpu
from tracegrad.passes import fuse
from conftest import to_torch


@pytest.fixture(params=[64, 1 << 20], ids=["tiny-chunks", "1MiB-chunks"])
def chunk_bytes(request, monkeypatch):
    monkeypatch.setattr(numpy_cpu, "CHUNK_BYTES", request.param)
    monkeypatch.setattr(fuse, "MIN_BYTES", 0)          # these small cases run fused too
    if request.param == 64:
        # and their outputs are recycled, and written over saved values the backward frees
        monkeypatch.setattr(numpy_cpu, "RECYCLE_BYTES", 0)
    return request.param


def leaf(*shape, seed=0):
    return tg.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tg.float64, requires_grad=True)


CASES = {
    "gelu_tanh": (lambda m, x, w, b: (0.5 * x * (1 + m.tanh(0.79788456 * (x + 0.044715 * x ** 3)))).sum(), (37, 5)),
    "layer_norm": (lambda m, x, w, b: (m.nn.functional.layer_norm(x, (5,), w, b) ** 2).sum(), (37, 5)),
    "softmax_ce": (lambda m, x, w, b: m.nn.functional.cross_entropy(x * w, m.arange(37) % 5), (37, 5)),
    "row_and_column_sums": (lambda m, x, w, b: ((x.exp() * w).sum(0) * b).sum() + (x - x.mean(1, keepdim=True))
                            .pow(2).sum(1).sqrt().sum(), (37, 5)),
    "softmax_rows": (lambda m, x, w, b: (m.softmax(x * w, dim=1) * m.log_softmax(x + b, dim=-1)).sum(), (37, 5)),
    "vector": (lambda m, x, w, b: (m.sin(x) * m.cos(x) + x ** 2).sum(), (1001,)),
}


@pytest.mark.parametrize("calls", [1, 4], ids=["split", "joint"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_chunks_match_eager_and_torch(case, chunk_bytes, calls):
    fn, shape = CASES[case]
    x, w, b = leaf(*shape, seed=1), leaf(shape[-1], seed=2), leaf(shape[-1], seed=3)
    cf = tg.compile(lambda x, w, b: fn(tg, x, w, b))
    for _ in range(calls):                # after a few calls each followed by its backward,
        y = cf(x, w, b)                   # the gradient is taken with the forward
        gs = tg.autograd.grad(y, (x, w, b), allow_unused=True)
    prog = cf.last_program
    assert "run_chunks" in prog.fwd_fn.source + (prog.bwd_fn.source if prog.bwd_fn else "")
    assert (prog.spec is not None) == (calls > 1)
    ye = fn(tg, x, w, b)
    ge = tg.autograd.grad(ye, (x, w, b), allow_unused=True)
    tx, tw, tb = (to_torch(t) for t in (x, w, b))
    yt = fn(torch, tx, tw, tb)
    gt = torch.autograd.grad(yt, (tx, tw, tb), allow_unused=True)
    np.testing.assert_allclose(y.detach().numpy(), ye.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-10)
    for a, e, t in zip(gs, ge, gt):
        if t is None:
            continue
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)


def test_repeated_calls_reuse_buffers_without_corrupting_results(chunk_bytes):
    cf = tg.compile(lambda x: (x.tanh() * 2 + 1).exp())
    xs = [leaf(50, 3, seed=s) for s in range(3)]
    outs = [cf(x) for x in xs]
    for x, o in zip(xs, outs):
        np.testing.assert_allclose(o.detach().numpy(), np.exp(np.tanh(x.detach().numpy()) * 2 + 1), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_matches_eager_bitwise(dtype, chunk_bytes):
    dt = getattr(tg, dtype)
    x = tg.tensor(np.random.default_rng(0).standard_normal((40, 6)), dtype=dt)
    fn = lambda x: (x.tanh() * 3 + x).softmax(1) * 2   # noqa: E731
    got = tg.compile(fn)(x)
    assert got.dtype is dt
    np.testing.assert_array_equal(got.float().numpy(), fn(x).float().numpy())


def test_recycled_output_arrays_are_reused_only_once_dropped(chunk_bytes, monkeypatch):
    monkeypatch.setattr(numpy_cpu, "RECYCLE_BYTES", 0)
    cf = tg.compile(lambda x: (x.tanh() * 2 + 1).exp())
    xs = [leaf(50, 3, seed=s) for s in range(4)]
    want = [np.exp(np.tanh(x.detach().numpy()) * 2 + 1) for x in xs]
    held = [cf(xs[0]), cf(xs[1])]
    view = cf(xs[2]).detach().numpy()[:5]          # only a view of the output survives
    first = id(held[0].detach().numpy())
    del held[0]
    again = cf(xs[3])
    assert id(again.detach().numpy()) == first      # the dropped output's array came back
    np.testing.assert_allclose(held[0].detach().numpy(), want[1], rtol=1e-12)
    np.testing.assert_allclose(view, want[2][:5], rtol=1e-12)
    np.testing.assert_allclose(again.detach().numpy(), want[3], rtol=1e-12)


def test_cross_entropy_on_wide_rows_matches_torch(chunk_bytes):
    x = leaf(300, 70, seed=4)
    t = tg.tensor(np.random.default_rng(5).integers(0, 70, 300))
    t._data[::7] = -100
    cf = tg.compile(lambda x, t: tg.nn.functional.cross_entropy(x * 2, t))
    loss = cf(x, t)
    g, = tg.autograd.grad(loss, x)
    tx = to_torch(x)
    tl = torch.nn.functional.cross_entropy(tx * 2, torch.tensor(t.numpy()))
    tgx, = torch.autograd.grad(tl, tx)
    np.testing.assert_allclose(loss.detach().numpy(), tl.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(g.numpy(), tgx.numpy(), rtol=1e-10, atol=1e-14)
    assert "np.exp(" not in cf.last_program.bwd_fn.source      # the forward's exponentials are read back


def test_a_saved_value_holds_a_result_only_once_nothing_reads_it_after(monkeypatch):
    from tracegrad.compile import trace_function
    monkeypatch.setattr(numpy_cpu, "RECYCLE_BYTES", 0)
    rng = np.random.default_rng(6)
    s_, g_ = rng.standard_normal((64, 8)), rng.standard_normal((64, 8))
    # u's rows are written first (into s, were s its donor) while v still reads s after:
    # s can only hold v, whose ufunc reads and writes the same positions
    graph, _, _, outs = trace_function(lambda s, g: (s + g, (s * 3) * g), (tg.tensor(s_), tg.tensor(g_)), {}, "f")
    graph.outputs = [o._name for o in outs]
    graph = fuse.group_fusions(graph, min_bytes=0)
    s_in = graph.inputs[0]
    fn = numpy_cpu.compile_graph(graph, "f", donors=(s_in,))
    assert fn.donated == (s_in,)
    assert f"{graph.outputs[0]} = {s_in} if donate" not in fn.source
    want = fn(s_.copy(), g_)
    arg = s_.copy()
    got = fn(arg, g_, donate=True)
    for w, o in zip(want, got):
        np.testing.assert_array_equal(o, w)
    assert any(o is arg for o in got)
    np.testing.assert_array_equal(want[0], s_ + g_)
    np.testing.assert_array_equal(want[1], (s_ * 3) * g_)


def test_chunks_leave_the_callers_numpy_buffer_size_alone(chunk_bytes):
    old = np.getbufsize()
    np.setbufsize(4096)
    try:
        cf = tg.compile(lambda x, w: (x - x.mean(1, keepdim=True)) * w)
        x, w = leaf(300, 70, seed=7), leaf(70, seed=8)
        y = cf(x, w)
        assert "run_chunks" in cf.last_program.fwd_fn.source
        assert np.getbufsize() == 4096
        xe, we = x.detach().numpy(), w.detach().numpy()
        # x - mean(x) cancels: each result is exact only to the rounding of the mean's sum (70 terms of
        # size |x|, summed in another order by chunks), whatever the result's own size
        bound = 70 * np.finfo(np.float64).eps * np.abs(xe).max() * np.abs(we).max()
        np.testing.assert_allclose(y.detach().numpy(), (xe - xe.mean(1, keepdims=True)) * we, rtol=1e-12,
                                   atol=bound)
    finally:
        np.setbufsize(old)


def _special(shape, dtype, seed, every=7):
    """Random values with -0.0, 0.0, NaN, infinities and tiny numbers of both signs spread in
    (at every `every`-th element)."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    specials = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-30, -1e-30], dtype)
    flat[::every] = np.resize(specials, flat[::every].shape)
    return a


def _check_outputs(got, eager, want, dtype):
    """Compiled outputs: the eager kernels' values bit for bit, torch's within the dtype's
    tolerance (BLAS sums in its own order); booleans exactly."""
    for a, e, t in zip(got, eager, want):
        _same_values(a.numpy(), e.numpy())
        if t.dtype == torch.bool:
            _same_values(a.numpy(), t.numpy())
        else:
            tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(a.numpy(), t.numpy(), **tol)


def _same_values(a, b):
    """Equal as IEEE values, NaN where NaN, and the sign of every zero the same."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    zero = (a == 0) & (b == 0)
    assert (np.signbit(a[zero]) == np.signbit(b[zero])).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_comparisons_and_masked_gradients_in_fused_groups_keep_special_values(dtype):
    # relu, comparisons and where-with-zero (relu's backward among them) run in fused groups
    # through bit masks: -0.0, NaN and infinities come out as torch's own kernels give them
    x0, b0, g0, h0 = (_special((256, 256), dtype, s) for s in range(4))
    b0 = b0[0]

    def f(m, x, b):
        y = m.relu(x * 1.5 + b)
        z = m.where(x > 0.25, x * 2, 0.0)
        return y, z, y <= 0

    xg, bg = tg.tensor(x0, requires_grad=True), tg.tensor(b0)
    cf = tg.compile(lambda x, b: f(tg, x, b))
    y, z, mask = cf(xg, bg)
    gx, = tg.autograd.grad((y, z), xg, (tg.tensor(g0), tg.tensor(h0)))
    xt = torch.tensor(x0, requires_grad=True)
    yt, zt, mt = f(torch, xt, torch.tensor(b0))
    gt, = torch.autograd.grad((yt, zt), xt, (torch.tensor(g0), torch.tensor(h0)))
    for a, b in ((y, yt), (z, zt), (mask, mt), (gx, gt)):
        _same_values(a.detach().numpy(), b.detach().numpy())
    src = cf.last_program.fwd_fn.source + cf.last_program.bwd_fn.source
    assert "relu_into" in src and "where_zero" in src


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_zero_and_relu_masks_match_numpy_for_every_bool_byte(dtype):
    # where_zero's mask is an int8 from the bool cast by the ufunc: a bool array whose bytes
    # are not 0/1 (a view of other data) counts every nonzero byte as True, as np.where does
    v = _special((64, 33), dtype, 5)
    c = np.random.default_rng(6).integers(0, 4, v.shape).astype(np.uint8).view(np.bool_)
    for keep in (True, False):
        out = np.empty_like(v)
        got = numpy_cpu.where_zero(c, keep, v, out)
        want = np.where(c, v, dtype(0)) if keep else np.where(c, dtype(0), v)
        assert got is out
        _same_values(got, want)
    r = numpy_cpu.relu_into(v, np.empty_like(v))
    _same_values(r, torch.relu(torch.tensor(v)).numpy())
    inplace = v.copy()
    _same_values(numpy_cpu.relu_into(inplace, inplace), r)


REUSE_CASES = {
    # a matrix product's result dies in the group: the activation is written over it, and the
    # bias add goes where the activation's result will be
    "linear_relu": lambda m, x, w, b: m.relu(x @ w + b),
    # the product is read after the group too: no group output may take its memory
    "product_read_after": lambda m, x, w, b: (lambda y: (m.relu(y + b), x.T @ y))(x @ w),
    # the bias add is read after the activation's write: it cannot wait in the output's chunk
    "sum_read_after_activation": lambda m, x, w, b: (lambda t: (m.relu(t), t * 3, m.tanh(t) - t))(x @ w + b),
    # the activation's output is read back by later members of the same group
    "chain_after_output": lambda m, x, w, b: (lambda r: (r, r * r + b, r <= 0))(m.relu(x @ w - b)),
    # an output written before the product it could take dies
    "two_products": lambda m, x, w, b: m.relu(x @ w + b) * m.relu(x @ w * 2 - b),
}


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(REUSE_CASES))
def test_groups_writing_over_dying_temporaries_match_torch(case, dtype, chunk_bytes):
    f = REUSE_CASES[case]
    x0 = np.random.default_rng(0).standard_normal((37, 16)).astype(dtype)   # the bias brings -0.0, NaN, inf
    w0 = np.random.default_rng(1).standard_normal((16, 24)).astype(dtype)
    b0 = _special((24,), dtype, 2)
    g = tg.compile(lambda x, w, b: f(tg, x, w, b))
    ins = [tg.tensor(x0), tg.tensor(w0), tg.tensor(b0)]
    for _ in range(2):                         # the second call reuses what the first left
        got = g(*ins)
    got = got if isinstance(got, tuple) else (got,)
    eager = f(tg, *ins)
    eager = eager if isinstance(eager, tuple) else (eager,)
    want = f(torch, torch.tensor(x0), torch.tensor(w0), torch.tensor(b0))
    want = want if isinstance(want, tuple) else (want,)
    _check_outputs(got, eager, want, dtype)
    np.testing.assert_array_equal(ins[0].numpy(), x0)     # inputs untouched
    np.testing.assert_array_equal(ins[2].numpy(), b0)


def test_linear_relu_group_writes_over_the_product():
    x, w, b = (tg.tensor(np.random.default_rng(s).standard_normal(sh).astype(np.float32))
               for s, sh in ((0, (256, 128)), (1, (128, 256)), (2, (256,))))
    g = tg.compile(lambda x, w, b: tg.relu(x @ w + b))
    g(x, w, b)
    src = g.last_program.fwd_fn.source
    assert "a temporary read here for the last time" in src
    assert "# one chunk, on this thread" in src and "run_chunks" not in src
    assert "np.add(" in src and "out=o_" in src.split("np.add(")[1].split("\n")[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_of_a_one_chunk_group_keep_special_values(dtype):
    # a group run in one chunk adds 0.0 to its one partial sum rather than summing over the
    # chunks: zero signs, NaN and infinities as torch gives them; the rest to rounding
    x0 = np.random.default_rng(0).standard_normal((64, 300)).astype(dtype)
    x0[3] = -0.0
    x0[5] = 0.0
    x0[7, ::2] = -0.0
    x0[7, 1::2] = 0.0
    x0[9] = -0.0
    x0[9, 4] = np.nan
    x0[11] = -0.0
    x0[11, 8] = -np.inf
    x0[13, 2] = np.inf

    def f(m, x):                                       # one sum of a strided input, one of a product
        return x.T.sum(0), (x.T * 2).sum(0), (x.T * -1).sum(0)

    cf = tg.compile(lambda x: f(tg, x))
    got = cf(tg.tensor(x0))
    assert "the one chunk's sum" in cf.last_program.fwd_fn.source
    special = [3, 5, 7, 9, 11, 13]
    for a, e, t in zip(got, f(tg, tg.tensor(x0)), f(torch, torch.tensor(x0))):
        _same_values(a.numpy()[special], t.numpy()[special])
        _same_values(a.numpy()[special], e.numpy()[special])
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.numpy(), t.numpy(), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_mask_held_in_a_later_comparisons_output(dtype, chunk_bytes):
    # relu's mask goes in the chunk of a bool output that a comparison writes after it: the
    # outputs written before the relu, the relu and the comparisons come out as torch's
    x0, b0 = _special((64, 40), dtype, 0), _special((40,), dtype, 1)

    def f(m, x, b):
        early = x > 0                                  # written before the relu: left alone
        y = m.relu(x * 2 + b)
        return early, y, y <= 0, x < 1

    cf = tg.compile(lambda x, b: f(tg, x, b))
    got = cf(tg.tensor(x0), tg.tensor(b0))
    for a, e, t in zip(got, f(tg, tg.tensor(x0), tg.tensor(b0)), f(torch, torch.tensor(x0), torch.tensor(b0))):
        _same_values(a.numpy(), e.numpy())
        _same_values(a.numpy(), t.numpy())
    src = cf.last_program.fwd_fn.source
    assert any(line.count(", o_") == 2 for line in src.split("\n") if "relu_into(" in line)


MASK_CASES = {
    # the mask of a relu, made by one group and read by another's where alone: the where's
    # int8 mask is written over it
    "read_once": lambda m, a, p, mask: (m.where(mask, 0.0, p * 2),),
    # read twice, or returned: left as it is
    "read_twice": lambda m, a, p, mask: (m.where(mask, 0.0, p * 2), m.where(mask, p, 0.0) + a),
    "returned": lambda m, a, p, mask: (m.where(mask, 0.0, p * 2), mask),
}


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(MASK_CASES))
def test_where_writes_its_mask_over_a_dying_comparison(case, dtype, chunk_bytes):
    x0, w0, w1 = _special((48, 16), dtype, 0), _special((16, 24), dtype, 1), _special((24, 24), dtype, 2)
    b0 = _special((24,), dtype, 3)

    def f(m, x, w, w1, b):
        a = m.relu(x @ w + b)
        mask = a <= 0
        return MASK_CASES[case](m, a, a @ w1, mask)

    cf = tg.compile(lambda *t: f(tg, *t))
    ins = [tg.tensor(v) for v in (x0, w0, w1, b0)]
    for _ in range(2):
        got = cf(*ins)
    want = f(torch, *(torch.tensor(v) for v in (x0, w0, w1, b0)))
    _check_outputs(got, f(tg, *ins), want, dtype)
    src = cf.last_program.fwd_fn.source
    assert ("where_zero(" in src and ", True)  # where" in src) == (case == "read_once")

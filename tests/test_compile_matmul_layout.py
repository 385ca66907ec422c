"""matmul's derivative picks its products by its operands' layouts, as torch's
mm_mat1_backward / mm_mat2_backward do, and picks alike eagerly and compiled.

BLAS adds a product's terms in another order when its operands swap roles ((a @ b).T and
b.T @ a.T differ in the last bits for about a quarter of shapes), so a compiled gradient
equals the eager one bit for bit only where both run the same product. Here they are
compared on their raw bits; against torch within the dtype's tolerance.
"""
import numpy as np
import pytest
import torch

import tracegrad as tg
import tracegrad.nn as tnn
from tracegrad.ir.graph import Graph
from tracegrad.ir.layout import c_contiguous, order_attr, tensor_order
from tracegrad.tracing import proxy_input, trace

DTYPES = {"float32": (np.float32, tg.float32, torch.float32, 1e-5),
          "float64": (np.float64, tg.float64, torch.float64, 1e-12)}

# (m, k, n): the W2 layers (batch 128, 784-512-512-10), odd sizes, one row, one column
SHAPES = [(128, 784, 512), (128, 512, 512), (128, 512, 10), (7, 13, 5), (33, 17, 65), (1, 784, 512),
          (128, 512, 1), (1, 7, 1), (2, 1, 3), (65, 3, 129)]

# (name, shapes of the two arguments for (m, k, n), the function): each a different layout of
# the operands: Linear's x @ W.T, plain, a transposed first operand, both transposed
PATTERNS = [
    ("x @ w.t()", lambda m, k, n: [(m, k), (n, k)], lambda x, w: x @ w.t()),
    ("x @ w", lambda m, k, n: [(m, k), (k, n)], lambda x, w: x @ w),
    ("x.t() @ w", lambda m, k, n: [(k, m), (k, n)], lambda x, w: x.t() @ w),
    ("x.t() @ w.t()", lambda m, k, n: [(k, m), (n, k)], lambda x, w: x.t() @ w.t()),
    ("linear", lambda m, k, n: [(m, k), (n, k)], lambda x, w: tg.nn.functional.linear(x, w)),
    ("relu(x.t()) @ (w.t() * 2)", lambda m, k, n: [(k, m), (n, k)], lambda x, w: x.t().relu() @ (w.t() * 2)),
    ("x @ w.t().contiguous()", lambda m, k, n: [(m, k), (n, k)], lambda x, w: x @ w.t().contiguous()),
]


def bits(t):
    a = np.ascontiguousarray(t.detach().numpy() if isinstance(t, tg.Tensor) else t)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_same_bits(got, want, what):
    assert got.shape == want.shape, what
    g, w = bits(got), bits(want)
    assert np.array_equal(g, w), f"{what}: {int(np.sum(g != w))} of {g.size} elements differ"


def _grads(fn, arrays, seed, tdt):
    ins = [tg.tensor(a, dtype=tdt, requires_grad=True) for a in arrays]
    return tg.autograd.grad(fn(*ins), ins, tg.tensor(seed, dtype=tdt))


def _torch_grads(fn, arrays, seed):
    ins = [torch.tensor(a, requires_grad=True) for a in arrays]
    return torch.autograd.grad(fn(*ins), ins, torch.tensor(seed))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("pattern", [p[0] for p in PATTERNS])
def test_matmul_gradients_compiled_equal_eager_bit_for_bit(pattern, dtype):
    _, shapes, fn = next(p for p in PATTERNS if p[0] == pattern)
    npd, tdt, _, tol = DTYPES[dtype]
    rng = np.random.default_rng(0)
    tfn = (lambda x, w: torch.nn.functional.linear(x, w)) if pattern == "linear" else fn
    for m, k, n in SHAPES:
        if pattern.startswith("relu") and 1 in (m, n):
            # a matrix-vector product: BLAS's gemv adds in an order of its operand's layout, and
            # the generated code lays relu(x.t()) out C-contiguous where eager keeps it transposed
            continue
        compiled = tg.compile(fn)
        arrays = [rng.standard_normal(s).astype(npd) for s in shapes(m, k, n)]
        seed = rng.standard_normal((m, n)).astype(npd)
        eager = _grads(fn, arrays, seed, tdt)
        for call in range(2):           # the first call traces, the second runs the cached program
            got = _grads(compiled, arrays, seed, tdt)
            for i, (c, e) in enumerate(zip(got, eager)):
                assert_same_bits(c, e, f"{pattern} {dtype} {(m, k, n)} call {call}: gradient of input {i}")
        for i, (e, t) in enumerate(zip(eager, _torch_grads(tfn, arrays, seed))):
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=tol, atol=tol * np.sqrt(k),
                                       err_msg=f"{pattern} {dtype} {(m, k, n)} input {i} vs torch")


def test_weight_gradient_comes_out_contiguous_eagerly_as_torch_s():
    # torch's mm_mat2_backward: weight.T is column-major, so grad(weight.T) is (g.T @ x).T
    # and weight.grad the contiguous g.T @ x
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((9, 6)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    wg = tg.tensor(w, requires_grad=True)
    tg.nn.functional.linear(tg.tensor(x), wg).sum().backward()
    wt = torch.tensor(w, requires_grad=True)
    torch.nn.functional.linear(torch.tensor(x), wt).sum().backward()
    assert wg.grad.stride() == wt.grad.stride() == (6, 1)
    np.testing.assert_allclose(wg.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-5)
    # a column-major first operand: grad(a) is (b @ g.T).T, contiguous after a's transpose
    ag = tg.tensor(x.T.copy(), requires_grad=True)
    (ag.t() @ tg.tensor(w.T.copy())).sum().backward()
    at = torch.tensor(x.T.copy(), requires_grad=True)
    (at.t() @ torch.tensor(w.T.copy())).sum().backward()
    assert ag.grad.stride() == at.grad.stride() == (9, 1)
    np.testing.assert_allclose(ag.grad.numpy(), at.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_transposed_arguments_and_batched_products(dtype):
    npd, tdt, _, tol = DTYPES[dtype]
    rng = np.random.default_rng(2)
    cases = [
        # a transposed tensor passed in: the trace records its layout, and a contiguous
        # argument of the same shape gets a program of its own
        ("transposed argument", lambda x, w: x @ w, [(128, 784), (784, 512)], [False, True]),
        ("batched 3-d", lambda x, w: x @ w, [(4, 33, 17), (4, 17, 65)], [False, False]),
        ("3-d @ w.t()", lambda x, w: x @ w.t(), [(4, 33, 17), (65, 17)], [False, False]),
        ("bmm of transposes", lambda x, w: torch_like_bmm(x.transpose(1, 2), w), [(3, 17, 33), (3, 17, 9)],
         [False, False]),
        ("vector @ matrix", lambda x, w: x @ w.t(), [(17,), (9, 17)], [False, False]),
        ("matrix @ vector", lambda x, w: x.t() @ w, [(17, 9), (17,)], [False, False]),
    ]
    for name, fn, shapes, transposed in cases:
        compiled = tg.compile(fn)
        for flip in (False, True, False):
            arrays = [rng.standard_normal(s[::-1] if t and flip else s).astype(npd) for s, t in zip(shapes, transposed)]
            leaves_e = [tg.tensor(a, dtype=tdt, requires_grad=True) for a in arrays]
            leaves_c = [tg.tensor(a, dtype=tdt, requires_grad=True) for a in arrays]
            ins_e = [a.t() if t and flip else a for a, t in zip(leaves_e, transposed)]
            ins_c = [a.t() if t and flip else a for a, t in zip(leaves_c, transposed)]
            out = fn(*ins_e)
            seed = tg.tensor(rng.standard_normal(tuple(out.shape)).astype(npd), dtype=tdt)
            want = tg.autograd.grad(out, leaves_e, seed)
            got = tg.autograd.grad(compiled(*ins_c), leaves_c, seed)
            for i, (c, e) in enumerate(zip(got, want)):
                assert_same_bits(c, e, f"{name} {dtype} {'transposed' if flip else 'contiguous'} input {i}")
            tins = [torch.tensor(a, requires_grad=True) for a in arrays]
            tuse = [a.t() if t and flip else a for a, t in zip(tins, transposed)]
            tfn = (lambda x, w: torch.bmm(x.transpose(1, 2), w)) if name == "bmm of transposes" else fn
            tw = torch.autograd.grad(tfn(*tuse), tins, torch.tensor(seed.numpy()))
            for e, t in zip(want, tw):
                np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=tol, atol=tol * 10)


def torch_like_bmm(a, b):
    return tg.bmm(a, b)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("bias", [False, True])
def test_linear_layers_compiled_equal_eager_bit_for_bit(dtype, bias):
    npd, tdt, tdd, tol = DTYPES[dtype]
    rng = np.random.default_rng(3)
    for batch, sizes in [(128, (784, 512, 512, 10)), (1, (13, 7, 3)), (33, (65, 17, 2))]:
        tg.manual_seed(0)
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [tnn.Linear(a, b, bias=bias, dtype=tdt), tnn.ReLU()]
        model = tnn.Sequential(*layers[:-1])
        x = tg.tensor(rng.standard_normal((batch, sizes[0])).astype(npd), requires_grad=True)
        seed = tg.tensor(rng.standard_normal((batch, sizes[-1])).astype(npd))
        params = [x] + list(model.parameters())
        want = tg.autograd.grad(model(x), params, seed)
        compiled = tg.compile(lambda x: model(x))
        for call in range(2):
            got = tg.autograd.grad(compiled(x), params, seed)
            for i, (p, c, e) in enumerate(zip(params, got, want)):
                if p.ndim == 2:
                    assert_same_bits(c, e, f"{dtype} {sizes} call {call} gradient {i}")
                else:
                    # a bias's gradient is a sum over the batch, which the generated code adds up
                    # in its own order: equal to the dtype's rounding
                    np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=tol, atol=tol * np.sqrt(batch))
                if p.ndim == 2 and p is not x:
                    assert c.numpy().flags.c_contiguous


def _mlp(sizes, tdt):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [tnn.Linear(a, b, bias=False, dtype=tdt), tnn.ReLU()]
    return tnn.Sequential(*layers[:-1])


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_whole_training_step_compiled_equal_eager_bit_for_bit(dtype, momentum):
    # loss.backward(); opt.step() inside @compile: one program for forward, backward and the
    # update; after a few steps every parameter has eager training's bits. (The loss's own
    # backward is elementwise here: a bias's and cross-entropy's sums over the batch are added
    # up in another order by the generated code.)
    npd, tdt, _, _ = DTYPES[dtype]
    rng = np.random.default_rng(4)
    sizes = (784, 512, 512, 10)
    x = tg.tensor(rng.standard_normal((128, sizes[0])).astype(npd))
    t = tg.tensor(rng.standard_normal((128, sizes[-1])).astype(npd))
    tg.manual_seed(0)
    eager_model = _mlp(sizes, tdt)
    model = _mlp(sizes, tdt)
    model.load_state_dict(eager_model.state_dict())
    eager_opt = tg.optim.SGD(eager_model.parameters(), lr=1e-2, momentum=momentum)
    opt = tg.optim.SGD(model.parameters(), lr=1e-2, momentum=momentum)

    def loss_of(m, x, t):
        return ((m(x) - t) ** 2).mean()

    @tg.compile
    def step(x, t):
        opt.zero_grad()
        loss = loss_of(model, x, t)
        loss.backward()
        opt.step()
        return loss

    for k in range(4):
        eager_opt.zero_grad()
        loss_of(eager_model, x, t).backward()
        eager_opt.step()
        step(x, t)
        for (name, p), q in zip(model.named_parameters(), eager_model.parameters()):
            assert_same_bits(p, q, f"{dtype} momentum {momentum} step {k} {name}")
            assert_same_bits(p.grad, q.grad, f"{dtype} momentum {momentum} step {k} {name}.grad")


def test_matmul_derivative_gradcheck_and_second_order_against_torch():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4))
    w = rng.standard_normal((3, 4))
    for transposed in (False, True):
        a = tg.tensor(x.T.copy() if transposed else x, requires_grad=True)
        b = tg.tensor(w, requires_grad=True)

        def f(a, b):
            return (a.t() if transposed else a) @ b.t()
        assert tg.autograd.gradcheck(f, (a, b))
        assert tg.autograd.gradgradcheck(f, (a, b))
        assert tg.autograd.gradcheck(tg.compile(f), (a, b))
    # a batch of rows times a matrix: the batch folded into the rows, as torch does
    a3 = tg.tensor(rng.standard_normal((2, 5, 4)), requires_grad=True)
    b = tg.tensor(w, requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: a @ b.t(), (a3, b))
    assert tg.autograd.gradgradcheck(lambda a, b: a @ b.t(), (a3, b))
    c = tg.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    assert tg.autograd.gradgradcheck(lambda a, c: a.transpose(1, 2) @ c.t(), (a3, c))
    # second order through matmul (an HVP of tanh(x @ w.T)), eager and compiled, vs torch
    v = rng.standard_normal((3, 4))

    def hvp(m, x, w, v):
        gw, = m.autograd.grad((x @ w.t()).tanh().pow(2).sum(), w, create_graph=True)
        return m.autograd.grad((gw * v).sum(), (x, w))

    def run_tg(fn):
        xs, ws = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
        return fn(xs, ws)
    eager = run_tg(lambda xs, ws: hvp(tg, xs, ws, tg.tensor(v)))
    compiled_whole = tg.compile(lambda xs, ws, vs: hvp(tg, xs, ws, vs))
    whole = run_tg(lambda xs, ws: compiled_whole(xs, ws, tg.tensor(v)))
    loss = tg.compile(lambda xs, ws: (xs @ ws.t()).tanh().pow(2).sum())

    def torch_way(xs, ws):
        gw, = tg.autograd.grad(loss(xs, ws), ws, create_graph=True)
        return tg.autograd.grad((gw * tg.tensor(v)).sum(), (xs, ws))
    outside = run_tg(torch_way)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    want = hvp(torch, xt, wt, torch.tensor(v))
    for got in (eager, whole, outside):
        for g, t in zip(got, want):
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    for g, e in zip(whole, eager):
        assert_same_bits(g, e, "second order compiled whole vs eager")


def _traced_column_major(fn, args):
    g = Graph()
    with trace(g):
        ps = [proxy_input(g, tuple(a.shape), a.dtype, **order_attr(tensor_order(a), tuple(a.shape))) for a in args]
        out = fn(*ps)
        return out._column_major(), c_contiguous(g, out._name)


def test_traced_values_answer_for_their_eager_layout():
    # the one question the derivative asks (is the operand laid out column by column?) gets
    # the eager tensor's answer from the traced graph: views, elementwise ops, copies (and
    # contiguous() copies where eager copies)
    rng = np.random.default_rng(6)
    w = tg.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    c = tg.tensor(rng.standard_normal((3, 5)).astype(np.float32))
    b = tg.tensor(rng.standard_normal((5,)).astype(np.float32))
    exprs = [lambda w, c, b: w.t(), lambda w, c, b: w.T, lambda w, c, b: w.transpose(0, 1), lambda w, c, b: w.mT,
             lambda w, c, b: w.t().relu(), lambda w, c, b: w.t() * 2, lambda w, c, b: 2 * w.t(),
             lambda w, c, b: w.t() + b, lambda w, c, b: w.t() + c, lambda w, c, b: c + w.t(),
             lambda w, c, b: w.t().tanh(), lambda w, c, b: -w.t(), lambda w, c, b: w.t().clone(),
             lambda w, c, b: w.t().contiguous(), lambda w, c, b: w.t().reshape(3, 5),
             lambda w, c, b: w.t().reshape(5, 3), lambda w, c, b: w.t().t().t(), lambda w, c, b: w.t().t(),
             lambda w, c, b: w.t().double(), lambda w, c, b: tg.where(w.t() > 0, w.t(), 0.0),
             lambda w, c, b: tg.where(c > 0, w.t(), c), lambda w, c, b: w.t().sigmoid(), lambda w, c, b: w.t() ** 2,
             lambda w, c, b: w.t() * w.t(), lambda w, c, b: w.t() + b.expand(3, 5), lambda w, c, b: b.expand(3, 5),
             lambda w, c, b: w.t().detach(), lambda w, c, b: c, lambda w, c, b: c.t().t(), lambda w, c, b: w.t() @ w,
             lambda w, c, b: w.t().clamp(-1, 1), lambda w, c, b: w.t() / 3,
             lambda w, c, b: w.reshape(5, 3, 1).permute(2, 1, 0).squeeze(0),
             lambda w, c, b: w.t().unsqueeze(0).squeeze(0), lambda w, c, b: w.t().unsqueeze(1).reshape(3, 5)]
    seen = set()
    for k, fn in enumerate(exprs):
        for args in ((w, c, b), (c.t(), w.t(), b)):       # contiguous and transposed arguments
            out = fn(*args)
            want = (out._column_major(), out.is_contiguous())
            assert _traced_column_major(fn, args) == want, f"expression {k}"
            seen.add(want)
    assert {(True, False), (False, True)} <= seen      # both answers were asked for


def test_a_transposed_tensor_without_grad_mixed_into_the_operand_keeps_eager_s_choice():
    # eager autograd's graph knows its leaves' layouts, not those of the other tensors it
    # read; the compiled trace takes them as eager does (here w.t() * mask, mask transposed)
    rng = np.random.default_rng(7)
    x = tg.tensor(rng.standard_normal((128, 784)).astype(np.float32))
    w = rng.standard_normal((512, 784)).astype(np.float32)
    mask = tg.tensor((rng.random((512, 784)) > 0.5).astype(np.float32)).t()
    fn = lambda x, w, mask: x @ (w.t() * mask)    # noqa: E731
    compiled = tg.compile(fn)
    seed = tg.tensor(rng.standard_normal((128, 512)).astype(np.float32))
    we = tg.tensor(w, requires_grad=True)
    want, = tg.autograd.grad(fn(x, we, mask), we, seed)
    for _ in range(2):
        wc = tg.tensor(w, requires_grad=True)
        got, = tg.autograd.grad(compiled(x, wc, mask), wc, seed)
        assert_same_bits(got, want, "w.grad")


def test_eager_backward_cache_keys_a_leafs_layout():
    """A cached eager backward chose its products by its leaves' layouts: a column-major leaf's
    program is not reused for a row-major leaf of the same graph (the gradients stay the
    products the row-major rule makes, bit for bit, whatever ran before)."""
    rng = np.random.default_rng(7)
    for m, k, n in [(129, 781, 509), (67, 391, 203), (7, 33, 5), (33, 17, 65)]:
        xs = rng.standard_normal((m, k)).astype(np.float32)
        ws = rng.standard_normal((k, n)).astype(np.float32)
        g = np.ones((m, n), np.float32)
        for w in (tg.tensor(ws.T.copy()).t().detach().requires_grad_(), tg.tensor(ws, requires_grad=True)):
            x = tg.tensor(xs, requires_grad=True)
            (x @ w).sum().backward()
        assert w._data.flags.c_contiguous
        assert np.array_equal(x.grad.numpy(), np.matmul(g, ws.T))
        assert np.array_equal(w.grad.numpy(), np.matmul(xs.T, g))

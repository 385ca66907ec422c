"""An LSTM step compiled with backend="triton" and run by Triton's interpreter: nn.LSTMCell
(its gates: matmuls, sigmoid, tanh, the cell update) and a short unrolled sequence with a
loss, forward and backward, against torch with the same weights, and against the numpy
backend. A fused recurrent step is the point of compiling recurrent code."""
import numpy as np
import pytest
import torch

# the interpreter's set-up (TRITON_INTERPRET while triton is imported, and for this module's
# tests): test_triton_interpret's, with its module-wide fixture
from test_triton_interpret import triton, triton_interpreter  # noqa: E402,F401

import tracegrad as tg  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

F32 = dict(rtol=2e-5, atol=2e-6)


def twin_cells(n_in, n_hidden, seed=0):
    """An nn.LSTMCell in each library with the same weights."""
    rng = np.random.default_rng(seed)
    cell, tcell = tg.nn.LSTMCell(n_in, n_hidden), torch.nn.LSTMCell(n_in, n_hidden)
    with tg.no_grad(), torch.no_grad():
        for p, tp in zip(cell.parameters(), tcell.parameters()):
            w = (rng.standard_normal(tuple(p.shape)) * 0.4).astype(np.float32)
            p.copy_(tg.tensor(w))
            tp.copy_(torch.from_numpy(w))
    return cell, tcell


def data(*shapes, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_lstm_cell_step_matches_torch_and_the_numpy_backend():
    cell, tcell = twin_cells(5, 6)
    x, h, c = data((4, 5), (4, 6), (4, 6))

    def step(x, h, c):
        h1, c1 = cell(x, (h, c))
        return h1, c1

    outs = {}
    for backend in ("triton", "numpy"):
        f = tg.compile(step, backend=backend, fullgraph=True)
        xs = [tg.tensor(a.copy(), requires_grad=True) for a in (x, h, c)]
        h1, c1 = f(*xs)
        (h1.sum() * 2 + (c1 * c1).sum()).backward()
        outs[backend] = [h1.detach().numpy(), c1.detach().numpy()] + [t.grad.numpy() for t in xs] + \
            [p.grad.numpy().copy() for p in cell.parameters()]
        cell.zero_grad()
        if backend == "triton":
            program = f.last_program
            assert program.fwd_fn.program.kernels and program.bwd_fn.program.kernels
    txs = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, h, c)]
    th, tc = tcell(txs[0], (txs[1], txs[2]))
    (th.sum() * 2 + (tc * tc).sum()).backward()
    want = [th.detach().numpy(), tc.detach().numpy()] + [t.grad.numpy() for t in txs] + \
        [p.grad.numpy() for p in tcell.parameters()]
    for got_t, got_n, w in zip(outs["triton"], outs["numpy"], want):
        np.testing.assert_allclose(got_t, w, **F32)
        np.testing.assert_allclose(got_t, got_n, **F32)


def test_unrolled_lstm_with_a_loss_trains_as_torch():
    """Three steps of a sequence, a linear head and cross-entropy, one compiled function; two
    SGD updates on the same weights as torch's."""
    cell, tcell = twin_cells(3, 4, seed=2)
    head, thead = tg.nn.Linear(4, 2), torch.nn.Linear(4, 2)
    with tg.no_grad(), torch.no_grad():
        w, b = data((2, 4), (2,), seed=3)
        head.weight.copy_(tg.tensor(w)), head.bias.copy_(tg.tensor(b))
        thead.weight.copy_(torch.from_numpy(w)), thead.bias.copy_(torch.from_numpy(b))
    (seq,) = data((3, 5, 3), seed=4)
    target = np.array([0, 1, 1, 0, 1])

    def loss_of(lib, cell, head, seq, target):
        h = lib.zeros(seq.shape[1], 4)
        c = lib.zeros(seq.shape[1], 4)
        for t in range(seq.shape[0]):
            h, c = cell(seq[t], (h, c))
        return lib.nn.functional.cross_entropy(head(h), target)

    f = tg.compile(lambda s, y: loss_of(tg, cell, head, s, y), backend="triton", fullgraph=True)
    params = list(cell.parameters()) + list(head.parameters())
    tparams = list(tcell.parameters()) + list(thead.parameters())
    opt, topt = tg.optim.SGD(params, lr=0.3), torch.optim.SGD(tparams, lr=0.3)
    S, Y = tg.tensor(seq), tg.tensor(target)
    for _ in range(2):
        opt.zero_grad()
        loss = f(S, Y)
        loss.backward()
        opt.step()
        topt.zero_grad()
        tloss = loss_of(torch, tcell, thead, torch.from_numpy(seq), torch.from_numpy(target))
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-4, atol=1e-6)
    assert len(f.cache) == 1 and f.last_program.fwd_fn.program.kernels

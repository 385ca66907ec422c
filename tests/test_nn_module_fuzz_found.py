"""What tests/test_nn_module_fuzz.py found, each as a direct comparison with torch naming its seed
(the seeds of the fuzzer's first version, commit 2dc4b29; its menu has grown since)."""
import numpy as np
import pytest
import torch

import tracegrad as tg


def _close(a, b, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("cls", ["InstanceNorm1d", "InstanceNorm2d"])
def test_instance_norm_momentum_none_keeps_the_running_statistics(cls):
    # seed 336: momentum=None raised a TypeError; torch passes 0.0 (it is no cumulative average
    # here, as it is in batch norm), so the running statistics stay where they are
    shape = (2, 3, 5) if cls == "InstanceNorm1d" else (2, 3, 4, 3)
    x0 = np.random.RandomState(0).uniform(-1, 1, shape)
    got = []
    for L in (torch, tg):
        m = getattr(L.nn, cls)(3, affine=True, track_running_stats=True, momentum=None).double()
        with L.no_grad():
            m.running_mean.copy_(L.tensor([0.1, -0.2, 0.3], dtype=L.float64))
        x = L.tensor(x0, requires_grad=True)
        y = m(x)
        y.pow(2).sum().backward()
        m.eval()
        got.append((y, x.grad, m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone(),
                    m(x)))
    for a, b in zip(*got):
        _close(b, a)


def test_functional_instance_norm_momentum_none_raises_as_torch():
    x = np.ones((1, 2, 3))
    for L in (torch, tg):
        with pytest.raises(TypeError, match="argument 'momentum' .* must be float, not NoneType"):
            L.nn.functional.instance_norm(L.tensor(x), L.zeros(2, dtype=L.float64), L.ones(2, dtype=L.float64),
                                          momentum=None)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("flat", [False, True])
def test_embedding_bag_max_norm_renormalizes_the_rows_it_picks(mode, flat):
    # seeds 11, 16, 100: EmbeddingBag(max_norm=...) raised NotImplementedError; torch renormalizes
    # in place every row an index picks (the padding row too), then sums, averages or takes maxima
    g = np.random.RandomState(1)
    w0 = g.uniform(-1, 1, (7, 3)) * 2
    idx = np.array([[1, 4, 4], [0, 6, 1]])
    got = []
    for L in (torch, tg):
        m = L.nn.EmbeddingBag(7, 3, max_norm=1.0, mode=mode, padding_idx=4).double()
        with L.no_grad():
            m.weight.copy_(L.tensor(w0))
        if flat:
            out = m(L.tensor(idx.ravel()), L.tensor([0, 2, 2]))
        else:
            out = m(L.tensor(idx))
        (out * L.tensor(np.arange(out.numel(), dtype=float).reshape(tuple(out.shape)))).sum().backward()
        got.append((out, m.weight, m.weight.grad))
    for a, b in zip(*got):
        _close(b, a)
    assert not np.allclose(got[1][1].detach().numpy(), w0)


@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss_counts_a_nan_term_as_zero(p):
    # seed 145: an LPPool1d of negative values gave NaN to MultiMarginLoss; torch's kernel adds a
    # term only where margin - x[y] + x[j] > 0, so a NaN term is 0 (its gradient too), where
    # tracegrad's relu carried the NaN into the loss
    x0 = np.array([[0.3, np.nan, 0.1, 0.5], [np.nan, 0.2, 0.4, -0.1], [0.2, 0.1, 0.9, 0.3]])
    got = []
    for L in (torch, tg):
        x = L.tensor(x0, requires_grad=True)
        w = L.tensor([1.0, 2.0, 3.0, 4.0], dtype=L.float64)
        loss = L.nn.functional.multi_margin_loss(x, L.tensor([0, 1, 2]), p=p, weight=w, reduction="none")
        loss.sum().backward()
        got.append((loss, x.grad))
    for a, b in zip(*got):
        _close(b, a)
    assert np.isfinite(got[1][0].detach().numpy()).all()


@pytest.mark.parametrize("bias_kv,zero_attn", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("mask", [None, "bool", "float", "key_padding"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_add_bias_kv_and_add_zero_attn(bias_kv, zero_attn, mask, batch_first):
    # seeds 87, 229, 398: MultiheadAttention(add_bias_kv=True or add_zero_attn=True) raised
    # NotImplementedError; torch appends a learned key and value (bias_k, bias_v, in the
    # state_dict) and/or a zero key and value to every sequence, the masks padded to allow them
    g = np.random.RandomState(3)
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(6, 2, add_bias_kv=bias_kv, add_zero_attn=zero_attn,
                                     batch_first=batch_first).double()
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    x0 = g.uniform(-1, 1, (3, 4, 6))
    n, s = (3, 4) if batch_first else (4, 3)
    am = g.rand(s, s) < 0.4
    kp = g.rand(n, s) < 0.4
    got = []
    for L in (torch, tg):
        m = L.nn.MultiheadAttention(6, 2, add_bias_kv=bias_kv, add_zero_attn=zero_attn,
                                    batch_first=batch_first).double()
        assert list(m.state_dict()) == list(sd)
        m.load_state_dict({k: L.tensor(v) for k, v in sd.items()})
        x = L.tensor(x0, requires_grad=True)
        kw = {"bool": dict(attn_mask=L.tensor(am)), "float": dict(attn_mask=L.tensor(np.where(am, -2.0, 0.5))),
              "key_padding": dict(key_padding_mask=L.tensor(kp)), None: {}}[mask]
        y, w = m(x, x, x, need_weights=True, average_attn_weights=False, **kw)
        (y.pow(2).sum() + 0.3 * (w * L.tensor(np.arange(w.numel(), dtype=float).reshape(tuple(w.shape)))).sum()
         ).backward()
        got.append([y, w, x.grad] + [p.grad for p in m.parameters()])
    for a, b in zip(*got):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("given_state", [False, True])
def test_lstm_proj_size(num_layers, bidirectional, given_state):
    # seeds 52, 118, 182: LSTM(proj_size > 0) raised NotImplementedError; torch projects each
    # hidden state down (h = W_hr (o * tanh(c)), weight_hr_l{k} in the state_dict), the next layer
    # and the recurrence read the projected state, the cell state keeps hidden_size
    g = np.random.RandomState(2)
    torch.manual_seed(0)
    kw = dict(num_layers=num_layers, bidirectional=bidirectional, proj_size=2, batch_first=True)
    tm = torch.nn.LSTM(3, 5, **kw).double()
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    d = 2 if bidirectional else 1
    x0 = g.uniform(-1, 1, (2, 4, 3))
    s0 = (g.uniform(-1, 1, (num_layers * d, 2, 2)), g.uniform(-1, 1, (num_layers * d, 2, 5)))
    got = []
    for L in (torch, tg):
        m = L.nn.LSTM(3, 5, **kw).double()
        assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [(k, v.shape) for k, v in sd.items()]
        assert repr(m) == repr(tm)
        m.load_state_dict({k: L.tensor(v) for k, v in sd.items()})
        x = L.tensor(x0, requires_grad=True)
        state = tuple(L.tensor(a, requires_grad=True) for a in s0) if given_state else None
        y, (h, c) = m(x, state)
        (y.pow(2).sum() + 0.3 * h.sum() + 0.2 * c.pow(2).sum()).backward()
        got.append([y, h, c, x.grad] + [p.grad for p in m.parameters()] + ([a.grad for a in state] if state else []))
    for a, b in zip(*got):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_lstm_proj_size_errors_as_torch():
    for L in (torch, tg):
        with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
            L.nn.LSTM(3, 5, proj_size=5)
        with pytest.raises(ValueError, match="only supported for LSTM, not RNN or GRU"):
            L.nn.GRU(3, 5, proj_size=0)
        m = L.nn.LSTM(3, 5, proj_size=2)
        with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 2\), got \[1, 2, 5\]"):
            m(L.zeros(4, 2, 3), (L.zeros(1, 2, 5), L.zeros(1, 2, 5)))
        with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 2, 5\), got \[1, 2, 2\]"):
            m(L.zeros(4, 2, 3), (L.zeros(1, 2, 2), L.zeros(1, 2, 2)))


@pytest.mark.parametrize("return_indices", [False, True])
@pytest.mark.parametrize("shape,size", [((2, 3, 5, 7), (2, 3)), ((3, 4, 7), (3, 5)), ((2, 2, 5, 3), (3, 2)),
                                        ((2, 3, 7), None)])
def test_adaptive_max_pool_windows_that_do_not_tile(shape, size, return_indices):
    # seeds 298, 328, 370: return_indices=True raised NotImplementedError where the output size
    # does not divide the input's; and without it the maxima were amax over each window, which
    # shares the gradient among equal maxima where torch gives it all to the first (values
    # rounded to one decimal make such ties)
    x0 = np.random.RandomState(0).uniform(-1, 1, shape).round(1)
    got = []
    for L in (torch, tg):
        x = L.tensor(x0, requires_grad=True)
        if size is None:
            r = L.nn.functional.adaptive_max_pool1d(x, 4, return_indices=return_indices)
        else:
            r = L.nn.functional.adaptive_max_pool2d(x, size, return_indices=return_indices)
        y, idx = r if return_indices else (r, None)
        (y * L.tensor(np.arange(y.numel(), dtype=float).reshape(tuple(y.shape)))).sum().backward()
        got.append((y.detach().numpy(), None if idx is None else idx.numpy(), x.grad.numpy(),
                    type(y.grad_fn).__name__))
    (ya, ia, ga, na), (yb, ib, gb, nb) = got
    np.testing.assert_array_equal(yb, ya)
    np.testing.assert_array_equal(gb, ga)
    assert nb == na
    if return_indices:
        np.testing.assert_array_equal(ib, ia)


@pytest.mark.parametrize("compiled", [False, True])
def test_embedding_bag_max_gives_the_gradient_to_the_first_maximum(compiled):
    # found beside seeds 298/328 (the same amax tie): mode="max" took amax over each bag, which
    # shares the gradient among equal maxima where torch gives it whole to the first member that
    # holds it; a column whose members are all -inf gives -inf and its gradient to the first member
    w0 = np.ones((6, 3))
    w0[2] = [1.0, 2.0, 0.0]
    w0[5, 1] = w0[4, 1] = -np.inf
    idx = np.array([[0, 1, 2], [3, 3, 1], [5, 4, 4]])
    got = []
    for L in (torch, tg):
        m = L.nn.EmbeddingBag(6, 3, mode="max", padding_idx=1).double()
        with L.no_grad():
            m.weight.copy_(L.tensor(w0))
        f = tg.compile(m) if compiled and L is tg else m
        y = f(L.tensor(idx))
        (y * L.tensor(np.arange(9.0).reshape(3, 3))).sum().backward()
        got.append((y.detach().numpy(), m.weight.grad.numpy()))
    np.testing.assert_array_equal(got[1][0], got[0][0])
    np.testing.assert_array_equal(got[1][1], got[0][1])


def test_max_pool_window_of_padding_alone_as_torch():
    # seed 2388 (fuzzer at 4205971): MaxPool1d(2, stride=1, padding=1, dilation=2) over a length of
    # one: the window's taps (-1 and 1) are both padding. torch returns -inf with the index 1,
    # outside the input (its backward adds that gradient past the plane: not run here); tracegrad's
    # backward failed inside numpy. Now the forward is torch's and the gradient goes nowhere
    x0 = np.array([[[0.5]], [[0.2]], [[0.3]]])
    with torch.no_grad():
        want = torch.nn.functional.max_pool1d(torch.tensor(x0), 2, stride=1, padding=1, dilation=2,
                                              return_indices=True)
    x = tg.tensor(x0, requires_grad=True)
    got = tg.nn.functional.max_pool1d(x, 2, stride=1, padding=1, dilation=2, return_indices=True)
    np.testing.assert_array_equal(got[0].detach().numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    got[0].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(x0.shape))


def test_dilated_max_pool_reaching_into_padding_matches_torch():
    got = []
    for L in (torch, tg):
        x = L.tensor(np.arange(12.0).reshape(1, 1, 3, 4), requires_grad=True)
        y, i = L.nn.functional.max_pool2d(x, 2, stride=1, padding=1, dilation=3, return_indices=True)
        (y * L.tensor(np.arange(1.0, 7.0).reshape(1, 1, 2, 3))).sum().backward()
        got.append((y.detach().numpy(), i.numpy(), x.grad.numpy()))
    for a, b in zip(*got):
        np.testing.assert_array_equal(b, a)


def test_cdist_inf_gives_every_tied_coordinate_the_gradient():
    # a probe of ties beside the fuzzer's: torch's cdist backward for p=inf gives grad * sign(diff)
    # to every coordinate that attains the distance; tracegrad's (vector_norm's) shared it among them
    g = np.random.RandomState(0)
    for a0, b0 in [(np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0]]), np.array([[0.5, 1.5, 1.5, 0.0]])),
                   (g.uniform(-1, 1, (2, 4, 3)).round(0), g.uniform(-1, 1, (2, 5, 3)).round(0)),
                   (g.uniform(-1, 1, (3, 4)), g.uniform(-1, 1, (2, 4)))]:
        got = []
        for L in (torch, tg):
            a, b = L.tensor(a0, requires_grad=True), L.tensor(b0, requires_grad=True)
            y = L.cdist(a, b, p=float("inf"))
            (y * L.tensor(np.arange(1.0, y.numel() + 1).reshape(tuple(y.shape)))).sum().backward()
            got.append((y.detach().numpy(), a.grad.numpy(), b.grad.numpy(), type(y.grad_fn).__name__))
        for u, v in zip(got[0], got[1]):
            np.testing.assert_array_equal(v, u)


@pytest.mark.parametrize("beta,threshold", [(0.5, 0.5), (2.0, 1.0), (1.0, 0.0)])
def test_softplus_at_the_threshold_has_torchs_second_derivative(beta, threshold):
    # seed 50800 (fuzzer at 72d053b..): Softplus(beta=0.5, threshold=0.5) on an input of one decimal
    # (x = 1.0, beta * x == threshold): torch's first derivative there is the smooth one (its test
    # is beta * x > threshold) and its second is 0 (softplus_double_backward tests < threshold);
    # tracegrad gave the smooth second derivative
    x0 = np.array([-1.0, 0.0, threshold / beta, 0.9 * threshold / beta, 1.5, 3.0])
    got = []
    for L in (torch, tg):
        x = L.tensor(x0, requires_grad=True)
        y = L.nn.functional.softplus(x, beta, threshold)
        g, = L.autograd.grad((y * y).sum(), x, create_graph=True)
        gg, = L.autograd.grad(g.pow(2).sum(), x)
        got.append((y, g, gg))
    for a, b in zip(*got):
        _close(b, a)

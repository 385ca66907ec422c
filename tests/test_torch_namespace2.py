"""torch.* forms that were missing: deprecated range, fill, frombuffer, the in-place activation
forms, constant_pad_nd, the dropout forms, native_layer_norm, the aten recurrent cells, pools with
indices, ctc_loss with an integer reduction, get/set_default_device; against torch."""
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def _x(m):
    return m.tensor([-1., 0.5, 2.], requires_grad=True)


CASES = {
    "range": lambda m: m.range(0, 3), "range_step": lambda m: m.range(0, 1, 0.25, dtype=m.float64),
    "range_down": lambda m: m.range(3, 0, -0.5), "range_no_end": lambda m: m.range(3),
    "fill": lambda m: m.fill(_x(m), 2.0), "fill_tensor": lambda m: m.fill(_x(m), m.tensor(3.)),
    "fill_2d": lambda m: m.fill(_x(m), m.ones(2)),
    "frombuffer": lambda m: m.frombuffer(bytearray(b"\x00\x00\x80?\x00\x00\x00@\x00\x00@@"), dtype=m.float32, count=2,
                                         offset=4),
    "hardshrink": lambda m: m.hardshrink(_x(m), 0.6), "selu_": lambda m: m.selu_(_x(m).detach().clone()),
    "celu_": lambda m: m.celu_(_x(m).detach().clone(), 2.0), "threshold_": lambda m: m.threshold_(
        _x(m).detach().clone(), 0.6, 9.),
    "constant_pad_nd": lambda m: m.constant_pad_nd(_x(m), [1, 2], 5.),
    "feature_dropout_eval": lambda m: m.feature_dropout(_x(m).reshape(1, 3), 0.5, False),
    "native_layer_norm": lambda m: m.native_layer_norm(_x(m).reshape(1, 3), [3], None, None, 1e-5),
    "max_pool1d_with_indices": lambda m: m.max_pool1d_with_indices(_x(m).reshape(1, 1, 3), 2),
    "adaptive_max_pool1d": lambda m: m.adaptive_max_pool1d(_x(m).reshape(1, 1, 3), 2),
    "lstm_cell": lambda m: m.lstm_cell(m.ones(1, 2) * 0.3, (m.ones(1, 3) * 0.1, m.ones(1, 3) * 0.2),
                                       m.linspace(-1, 1, 24).reshape(12, 2), m.linspace(-1, 1, 36).reshape(12, 3),
                                       m.ones(12) * 0.1, m.ones(12) * -0.1),
    "gru_cell": lambda m: m.gru_cell(m.ones(1, 2) * 0.3, m.ones(1, 3) * 0.2, m.linspace(-1, 1, 18).reshape(9, 2),
                                     m.linspace(-1, 1, 27).reshape(9, 3), m.ones(9), m.ones(9)),
    "rnn_tanh_cell": lambda m: m.rnn_tanh_cell(m.ones(1, 2) * 0.3, m.ones(1, 3) * 0.2, m.ones(3, 2) * 0.1,
                                               m.ones(3, 3) * 0.2),
    "rnn_relu_cell": lambda m: m.rnn_relu_cell(m.ones(1, 2) * 0.3, m.ones(1, 3) * 0.2, m.ones(3, 2) * -0.1,
                                               m.ones(3, 3) * 0.2, m.ones(3)),
    "ctc_loss": lambda m: m.ctc_loss(m.linspace(-1, 1, 12).reshape(4, 1, 3).log_softmax(2), m.tensor([[1]]),
                                     m.tensor([4]), m.tensor([1]), 0, 2),
}


def _outcome(m, f):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        try:
            r = f(m)
        except Exception as e:      # noqa: BLE001
            return ("error", type(e).__name__, str(e)), [str(w.message) for w in rec]
    r = r if isinstance(r, tuple) else (r,)
    return [(str(t.dtype).split(".")[-1], t.detach().numpy().tolist(), type(t.grad_fn).__name__) for t in r], \
        [str(w.message) for w in rec]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    want, got = _outcome(torch, CASES[name]), _outcome(tg, CASES[name])
    assert got[1] == want[1]
    if want[0][0] == "error":
        assert got[0] == want[0]
        return
    assert len(got[0]) == len(want[0])
    for g, w in zip(got[0], want[0]):
        assert g[0] == w[0] and g[2] == w[2]
        np.testing.assert_allclose(g[1], w[1], rtol=1e-6, atol=1e-7)


def test_fill_gradients_as_torch():
    res = []
    for m in (torch, tg):
        x = _x(m)
        v = m.tensor(3., requires_grad=True)
        (m.fill(x, v) * m.tensor([1., 2., 3.])).sum().backward()
        res.append((x.grad.numpy().tolist(), float(v.grad)))
    assert res[0] == res[1]


def test_frombuffer_shares_the_buffer():
    buf = bytearray(8)
    t = tg.frombuffer(buf, dtype=tg.float32)
    t[1] = 2.0
    assert bytes(buf[4:]) == np.float32(2.0).tobytes()


def test_default_device():
    assert str(tg.get_default_device()) == str(torch.get_default_device()) == "cpu"
    tg.set_default_device("cpu")
    tg.set_default_device(None)
    with pytest.raises(NotImplementedError, match="CPU tensors"):
        tg.set_default_device("cuda")


def test_dropout_forms_in_training_drop_and_scale():
    tg.manual_seed(0)
    x = tg.ones(2000, 4, 1)
    y = tg.feature_dropout(x, 0.25, True)
    kept = y[:, :, 0].numpy()
    assert set(np.unique(kept).tolist()) <= {0.0, float(np.float32(4 / 3))} and abs((kept == 0).mean() - 0.25) < 0.03
    z = x.clone()
    assert tg.dropout_(z, 0.5, True) is z and set(np.unique(z.numpy()).tolist()) <= {0.0, 2.0}


def test_broadcast_tensors_returns_a_tensor_of_the_common_shape_itself():
    for m in (torch, tg):
        a = m.ones(3, requires_grad=True)
        b = m.ones(3)
        c = m.ones(2, 3)
        x, y = m.broadcast_tensors(a, b)
        assert x is a and y is b and x.grad_fn is None
        x, y = m.broadcast_tensors(a, c)
        assert y is c and type(x.grad_fn).__name__ == "ExpandBackward0"

"""Modules as torch prints and lists them: repr, state_dict keys and shapes, parameter and buffer
names, for common layers and containers; GroupNorm's bias=False (torch 2's keyword) computes
as torch's."""
import numpy as np
import pytest
import torch

import tracegrad as tg

MODULES = [
    "Linear(3, 4)", "Linear(3, 4, bias=False)", "Conv2d(3, 4, 3, stride=2, padding=1)", "Conv1d(2, 3, 2, dilation=2)",
    "BatchNorm1d(4)", "BatchNorm2d(4, momentum=None)", "LayerNorm([4, 5], elementwise_affine=False)",
    "GroupNorm(2, 4)", "GroupNorm(2, 4, bias=False)", "GroupNorm(2, 4, affine=False)",
    "Embedding(10, 3, padding_idx=0)", "Dropout(0.3)", "ReLU()", "LeakyReLU(0.2)", "GELU(approximate='tanh')",
    "Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))", "ModuleList([nn.Linear(2, 2), nn.Tanh()])",
    "MaxPool2d(2)", "AvgPool2d(3, stride=1, padding=1)", "LSTM(3, 4, num_layers=2, batch_first=True)", "GRU(3, 4)",
    "RNN(3, 4, nonlinearity='relu')", "MultiheadAttention(8, 2)", "TransformerEncoderLayer(8, 2, dim_feedforward=16)",
    "Flatten()", "Softmax(dim=1)", "CrossEntropyLoss(label_smoothing=0.1)", "Identity()", "Bilinear(2, 3, 4)",
    "ConvTranspose2d(2, 3, 3, stride=2)", "InstanceNorm2d(3, affine=True)", "PReLU()",
    "Upsample(scale_factor=2, mode='nearest')", "AdaptiveAvgPool2d((1, 1))", "Unflatten(1, (2, 2))",
]


def _describe(lib, expr):
    lib.manual_seed(0)
    m = eval("nn." + expr, {"nn": lib.nn})
    return (repr(m), [(k, tuple(v.shape)) for k, v in m.state_dict().items()],
            [n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()])


@pytest.mark.parametrize("expr", MODULES)
def test_module_listed_as_torch(expr):
    assert _describe(tg, expr) == _describe(torch, expr)


def test_group_norm_without_bias_as_torch():
    x = np.random.default_rng(0).standard_normal((2, 4, 3))
    outs = []
    for lib in (tg, torch):
        m = lib.nn.GroupNorm(2, 4, bias=False).double()
        with lib.no_grad():
            m.weight.copy_(lib.tensor([0.5, 1.0, 1.5, 2.0], dtype=lib.float64))
        xt = lib.tensor(x, requires_grad=True)
        y = m(xt)
        y.pow(2).sum().backward()
        assert m.bias is None
        outs.append((y.detach().numpy(), xt.grad.numpy(), m.weight.grad.numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)

"""Views of float16 and bfloat16 tensors share their base's memory, as torch's: writes through a
view reach the base, and the view's strides are torch's. (bfloat16 values live in float32 arrays,
rounded after each kernel: that rounding copied every view, so `w[:, ::2].add_(1)` or
`w.t()[1].zero_()` left w unchanged.)"""
import numpy as np
import pytest
import torch

import tracegrad as tg

VIEWS = {
    "slice step": lambda x: x[..., ::2],
    "select": lambda x: x[1],
    "column": lambda x: x[:, 1],
    "t": lambda x: x.t(),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.permute(1, 0),
    "view": lambda x: x.view(4, 6),
    "reshape": lambda x: x.reshape(2, 12),
    "flatten": lambda x: x.flatten(),
    "unflatten": lambda x: x.unflatten(1, (2, 4)),
    "narrow": lambda x: x.narrow(1, 2, 3),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "diagonal": lambda x: x.diagonal(),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 8)),
    "split": lambda x: x.split(3, dim=1)[1],
    "chunk": lambda x: x.chunk(2, dim=0)[1],
    "unbind": lambda x: x.unbind(1)[5],
    "movedim": lambda x: x.movedim(0, 1),
    "mT": lambda x: x.mT,
    "none index": lambda x: x[None, 1:, ::3],
    "view as": lambda x: x.view_as(x),
    "expand of a row": lambda x: x[0:1],
    "squeeze": lambda x: x[0:1].squeeze(0),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_writes_through_a_view_reach_the_base(name, dtype):
    base = np.arange(24, dtype=np.float32).reshape(3, 8) / 4
    results = []
    for m in (tg, torch):
        x = m.tensor(base).to(getattr(m, dtype))
        v = VIEWS[name](x)
        # (a size-1 dim's stride is left out: tracegrad's can differ from torch's there, for every dtype)
        strides = tuple(st for st, n in zip(v.stride(), v.shape) if n != 1)
        contiguous = v.is_contiguous()
        v.mul_(3).add_(0.5)
        results.append((x.float().tolist(), v.float().tolist(), strides, contiguous))
    assert results[0] == results[1]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_view_of_a_view_and_the_base_written_after(dtype):
    out = []
    for m in (tg, torch):
        x = m.zeros(4, 6, dtype=getattr(m, dtype))
        v = x.t()[1:, ::2]
        x.add_(1.5)                       # the base written: the view sees it
        v.sub_(0.25)                      # the view written: the base sees it
        out.append((x.float().tolist(), v.float().tolist(), v.stride()))
    assert out[0] == out[1]


def test_a_bfloat16_view_keeps_autograd_of_its_base():
    outs = []
    for m in (tg, torch):
        w = m.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=m.bfloat16, requires_grad=True)
        y = w * 2
        y[:, ::2].mul_(3)
        y.sum().backward()
        outs.append((y.float().tolist(), w.grad.float().tolist()))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_untyped_storage_bytes_as_torch(dtype):
    out = []
    for m in (tg, torch):
        x = m.tensor([[1.5, -2.25, 3.0], [4.0, 5.0, -6.5e-3]], dtype=getattr(m, dtype))
        views = (x, x.t(), x[1], x[:, 1:])
        out.append([(v.untyped_storage().nbytes(), v.untyped_storage().tolist(), v.storage_offset())
                    for v in views])
    assert out[0] == out[1]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_data_ptr_offsets_as_torch(dtype):
    out = []
    for m in (tg, torch):
        x = m.zeros(4, 6, dtype=getattr(m, dtype))
        out.append([v.data_ptr() - x.data_ptr() for v in (x[1], x[:, 3], x.t()[2], x[2:, 1:], x.view(-1)[5:])])
    assert out[0] == out[1]

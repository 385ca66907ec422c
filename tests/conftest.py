import numpy as np
import pytest
import torch

import tracegrad


@pytest.fixture(autouse=True)
def _defaults():
    tracegrad.set_default_dtype(tracegrad.float32)
    torch.set_default_dtype(torch.float32)
    # (torch.compile's first use turns torch's default validate_args off for the process: the
    # reference checks distributions' arguments as by default)
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    tracegrad.set_default_dtype(tracegrad.float32)
    torch.set_default_dtype(torch.float32)


def to_torch(t, requires_grad=None):
    """A torch copy of a tracegrad tensor (a leaf)."""
    x = torch.from_numpy(np.array(t._data, copy=True))
    if t.dtype is tracegrad.bfloat16:
        x = x.to(torch.bfloat16)
    if requires_grad if requires_grad is not None else t.requires_grad:
        x.requires_grad_(True)
    return x


def to_tg(x, requires_grad=None):
    """A tracegrad copy of a torch tensor (a leaf)."""
    a = x.detach()
    if a.dtype == torch.bfloat16:
        t = tracegrad.tensor(a.float().numpy(), dtype=tracegrad.bfloat16)
    else:
        t = tracegrad.tensor(a.numpy().copy())
    if requires_grad if requires_grad is not None else x.requires_grad:
        t.requires_grad_(True)
    return t


def assert_close(tg, ref, rtol=1e-5, atol=1e-6, check_dtype=True):
    """Compare a tracegrad tensor with a torch tensor (values, shape, dtype)."""
    assert tg is not None and ref is not None, (tg, ref)
    assert tuple(tg.shape) == tuple(ref.shape), (tuple(tg.shape), tuple(ref.shape))
    if check_dtype:
        assert str(tg.dtype) == str(ref.dtype), (tg.dtype, ref.dtype)
    r = ref.detach()
    if r.dtype == torch.bfloat16:
        r = r.float()
    np.testing.assert_allclose(np.asarray(tg._data, dtype=np.float64) if tg.dtype.is_floating_point else tg._data,
                               r.numpy().astype(np.float64) if r.is_floating_point() else r.numpy(),
                               rtol=rtol, atol=atol, equal_nan=True)

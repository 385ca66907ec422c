"""Tensor attributes against torch: shape and torch.Size, sizes, strides, views of the data,
conversions to Python and numpy, DLPack, version counters, leaf and requires_grad flags, and the
errors of the Python protocols (len, iter, bool, float, int, index)."""
import pickle
import warnings

import numpy as np
import pytest
import torch

import tracegrad as tg


def run(fn, m):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(m), None
    except Exception as e:      # noqa: BLE001  (the exception itself is compared)
        return None, e


def check(fn):
    """fn(torch) and fn(tracegrad) give equal plain Python results (reprs for tensors, sizes, dtypes,
    devices), or raise the same exception type with the same message."""
    r, re = run(fn, torch)
    g, ge = run(fn, tg)
    if re is not None:
        assert ge is not None, ("torch raised", re, "tracegrad gave", g)
        assert type(ge) is type(re) and str(ge) == str(re), (ge, re)
        return
    assert ge is None, ("tracegrad raised", ge, "torch gave", r)
    if isinstance(r, (torch.Tensor, torch.Size, torch.dtype, torch.device)):
        assert repr(g) == repr(r), (g, r)
        assert type(g).__name__ == type(r).__name__
    else:
        assert g == r and type(g) is type(r), (g, r)


def check_all(fns):
    for fn in fns:
        check(fn)


def test_shape_and_size_objects():
    check_all([
        lambda m: m.ones(2, 3).shape, lambda m: str(m.ones(2, 3).shape), lambda m: m.ones(()).shape,
        lambda m: m.ones(0, 4).shape, lambda m: m.Size([2, 3]), lambda m: m.Size([]), lambda m: m.Size((5,)),
        lambda m: m.ones(2, 3).shape[1:], lambda m: m.ones(2, 3).shape[::-1], lambda m: m.ones(2, 3).shape[0],
        lambda m: m.ones(2, 3).shape + (1,), lambda m: (1,) + m.ones(2, 3).shape, lambda m: m.Size([2, 3]) * 2,
        lambda m: 2 * m.Size([2, 3]), lambda m: m.ones(2, 3).shape == (2, 3), lambda m: m.ones(2, 3).shape.numel(),
        lambda m: m.Size([]).numel(), lambda m: hash(m.Size([2, 3])) == hash((2, 3)), lambda m: m.Size([2, 3]).count(2),
        lambda m: m.Size([m.tensor(2), np.int64(3)]), lambda m: m.Size((2.5,)), lambda m: m.Size([2, None]),
        lambda m: list(m.ones(2, 3, 4).shape), lambda m: tuple(m.ones(2, 3).shape),
        lambda m: pickle.loads(pickle.dumps(m.Size([2, 3]))), lambda m: m.ones(2, 3).size(),
    ])


def test_size_dim_ndim_numel():
    check_all([
        lambda m: m.ones(2, 3).size(-1), lambda m: m.ones(2, 3).size(0), lambda m: m.ones(2, 3).size(dim=1),
        lambda m: m.ones(2, 3).size(2), lambda m: m.ones(2, 3).size(-3), lambda m: m.ones(()).size(0),
        lambda m: m.ones(()).size(-1), lambda m: m.ones(2, 3, 4).dim(), lambda m: m.ones(()).dim(),
        lambda m: m.ones(2, 3).ndim, lambda m: m.ones(2, 3).ndimension(), lambda m: m.ones(2, 3).numel(),
        lambda m: m.ones(0, 3).numel(), lambda m: m.ones(()).numel(), lambda m: m.ones(2, 3).nelement(),
        lambda m: m.numel(m.ones(4, 5)),
    ])


def test_dtype_device_and_storage_attributes():
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        check_all([
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).dtype,
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).element_size(),
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).itemsize,
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).nbytes,
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).is_floating_point(),
            lambda m: m.is_floating_point(m.ones(2, 3, dtype=getattr(m, name))),
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).type(),
            lambda m: m.ones(2, 3, dtype=getattr(m, name)).stride(),
        ])
    check_all([
        lambda m: m.ones(2).device, lambda m: str(m.ones(2).device), lambda m: m.ones(2).device == "cpu",
        lambda m: m.ones(2).device.type, lambda m: m.ones(2).is_cuda, lambda m: m.device("cpu"),
        lambda m: m.ones(2).is_complex(), lambda m: m.is_tensor(m.ones(2)), lambda m: m.is_tensor([1]),
    ])


def test_transposes():
    check_all([
        lambda m: m.ones(2, 3).T.shape, lambda m: m.ones(3).T.shape, lambda m: m.ones(()).T.shape,
        lambda m: m.ones(2, 3, 4).T.shape, lambda m: m.ones(2, 3, 4).mT.shape, lambda m: m.ones(2, 3).mT.stride(),
        lambda m: m.ones(3).mT, lambda m: m.arange(6).reshape(2, 3).T, lambda m: m.arange(6.0).reshape(2, 3).mT,
        lambda m: m.arange(24).reshape(2, 3, 4).mT.stride(), lambda m: m.arange(6).reshape(2, 3).T.is_contiguous(),
    ])


def test_strides_and_contiguity():
    check_all([
        lambda m: m.ones(2, 3, 4).stride(), lambda m: m.ones(2, 3, 4).stride(-1), lambda m: m.ones(2, 3, 4).stride(0),
        lambda m: m.ones(2, 3, 4).stride(3), lambda m: m.ones(()).stride(), lambda m: m.ones(()).stride(0),
        lambda m: m.ones(2, 3).t().stride(), lambda m: m.ones(2, 3).t().is_contiguous(),
        lambda m: m.ones(2, 3, 4).permute(2, 0, 1).stride(), lambda m: m.ones(2, 3, 4).transpose(0, 2).stride(),
        lambda m: m.ones(2, 3, 4)[:, ::2].stride(), lambda m: m.ones(2, 3, 4)[:, 1].is_contiguous(),
        lambda m: m.ones(2, 3, 4)[1].is_contiguous(), lambda m: m.ones(1, 3).expand(4, 3).stride(),
        lambda m: m.ones(1, 3).expand(4, 3).is_contiguous(), lambda m: m.ones(4, 1).t().is_contiguous(),
        lambda m: m.ones(0, 3).t().is_contiguous(), lambda m: m.ones(2, 3)[:, 1:].is_contiguous(),
        lambda m: m.ones(2, 3)[1:].is_contiguous(),
        lambda m: m.ones(2, 3)[1].storage_offset(), lambda m: m.ones(2, 3)[1:, 1:].storage_offset(),
        lambda m: m.ones(2, 3).t().storage_offset(), lambda m: m.ones(2, 3, 4).unsqueeze(1).stride(),
        lambda m: m.ones(6).view(2, 3).stride(),
    ])


def test_contiguous_copy_has_row_major_strides():
    check(lambda m: m.ones(2, 3).t().contiguous().is_contiguous())
    check(lambda m: m.ones(2, 3).t().contiguous().stride())


def test_item_and_tolist():
    check_all([
        lambda m: m.tensor(2.5).item(), lambda m: m.tensor([2.5]).item(), lambda m: m.tensor([[7]]).item(),
        lambda m: m.tensor(0.1).item(), lambda m: m.tensor(0.1, dtype=m.float64).item(),
        lambda m: m.tensor(0.1, dtype=m.float16).item(), lambda m: m.tensor(0.1, dtype=m.bfloat16).item(),
        lambda m: m.tensor(2).item(), lambda m: m.tensor(True).item(), lambda m: m.tensor(200, dtype=m.uint8).item(),
        lambda m: m.tensor(-3, dtype=m.int8).item(), lambda m: m.ones(1, requires_grad=True).item(),
        lambda m: m.tensor([2.5, 1]).item(), lambda m: m.tensor([]).item(),
        lambda m: m.tensor([[1, 2], [3, 4]]).tolist(), lambda m: m.tensor([[0.1]]).tolist(),
        lambda m: m.tensor(3).tolist(), lambda m: m.tensor([True]).tolist(), lambda m: m.ones(0, 2).tolist(),
        lambda m: m.tensor([1.5, 0.1], dtype=m.bfloat16).tolist(), lambda m: m.tensor([0.1], dtype=m.float16).tolist(),
        lambda m: m.ones(2, requires_grad=True).tolist(), lambda m: m.arange(6).reshape(2, 3).t().tolist(),
    ])


def test_numpy_and_array_protocol():
    for m in (torch, tg):
        t = m.ones(3)
        a = t.numpy()
        a[0] = 5
        assert t[0].item() == 5
        b = np.asarray(t)
        b[1] = 7
        assert t[1].item() == 7
        assert np.asarray(t, dtype=np.int32).dtype == np.int32
        assert np.array(t).dtype == np.float32
        assert t.numpy().dtype == np.float32
        u = m.ones(2, requires_grad=True)
        assert u.numpy(force=True).tolist() == [1.0, 1.0]
        assert u.detach().numpy().tolist() == [1.0, 1.0]
    check_all([
        lambda m: m.ones(2, requires_grad=True).numpy(), lambda m: np.asarray(m.ones(2, requires_grad=True)),
        lambda m: m.ones(2, dtype=m.bfloat16).numpy(), lambda m: np.asarray(m.ones(2, dtype=m.bfloat16)),
        lambda m: m.ones(2, requires_grad=True).__array__(),
    ])
    for name in ("float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        got, want = tg.arange(6).to(getattr(tg, name)).numpy(), torch.arange(6).to(getattr(torch, name)).numpy()
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_dlpack():
    t = tg.arange(6.0).reshape(2, 3)
    a = np.from_dlpack(t)
    a[0, 0] = -1
    assert t[0, 0].item() == -1
    x = torch.from_dlpack(t.t())
    assert x.stride() == t.t().stride() and x.tolist() == t.t().tolist()
    assert tg.from_dlpack(t) is not t and tg.from_dlpack(t)._data is t._data
    check_all([
        lambda m: m.ones(2, requires_grad=True).__dlpack__(), lambda m: m.from_dlpack(m.ones(2, requires_grad=True)),
        lambda m: m.ones(2).__dlpack_device__(),
    ])


def test_data_get_and_set():
    def get(m):
        a = m.ones(3, requires_grad=True)
        d = a.data
        d.add_(1)
        return a, d, a._version, d._version, d.requires_grad, d.is_leaf, d.grad_fn is None

    def get_nonleaf(m):
        b = m.ones(3, requires_grad=True) * 2
        return b.data, b.data.requires_grad, b.data.is_leaf

    def set_(m):
        a, b = m.ones(3), m.zeros(2)
        a.data = b
        b.add_(5)
        return a, a._version, a.shape

    def set_dtype(m):
        a = m.ones(3, requires_grad=True)
        a.data = m.zeros(2, dtype=m.float64)
        return a, a.dtype, a.requires_grad, a.is_leaf

    def set_grad_graph(m):
        w = m.ones(2, requires_grad=True)
        w.data = m.tensor([2.0, 3.0])
        (w * w).sum().backward()
        return w.grad

    for fn in (get, get_nonleaf, set_, set_dtype, set_grad_graph):
        r, g = fn(torch), fn(tg)
        assert repr(g) == repr(r), fn
    check_all([lambda m: setattr(m.ones(3), "data", 5), lambda m: setattr(m.ones(3), "data", [1.0])])


def test_version_counter():
    def history(m):
        a = m.zeros(4)
        v = [a._version]
        for op in (lambda: a.add_(1), lambda: a.mul_(2), lambda: a.zero_(), lambda: a.fill_(3),
                   lambda: a.copy_(m.ones(4)), lambda: a.__setitem__(0, 5.0), lambda: a[1:].sub_(1),
                   lambda: a.clamp_(0, 2), lambda: a.add(1), lambda: a.view(2, 2).div_(2)):
            op()
            v.append(a._version)
        view = a[1:]
        view.add_(1)
        v += [a._version, view._version, a.clone()._version, a.detach()._version]
        return v
    assert history(tg) == history(torch)


def test_leaf_and_requires_grad_flags():
    check_all([
        lambda m: m.ones(2).is_leaf, lambda m: m.ones(2, requires_grad=True).is_leaf,
        lambda m: (m.ones(2, requires_grad=True) * 2).is_leaf, lambda m: (m.ones(2) * 2).is_leaf,
        lambda m: m.ones(2, requires_grad=True).detach().is_leaf, lambda m: m.ones(2).requires_grad_().requires_grad,
        lambda m: m.ones(2).requires_grad_(False).requires_grad, lambda m: m.ones(2).requires_grad,
        lambda m: m.ones(2, dtype=m.int64).requires_grad_(False).requires_grad,
        lambda m: (m.ones(2, requires_grad=True) * 2).requires_grad_(True).requires_grad,
        lambda m: (m.ones(2, requires_grad=True) * 2).requires_grad_(False),
        lambda m: m.ones(2, dtype=m.int64).requires_grad_(), lambda m: m.ones(2, dtype=m.bool).requires_grad_(True),
        lambda m: setattr(m.ones(2, dtype=m.int64), "requires_grad", True),
        lambda m: setattr(m.ones(2, requires_grad=True) * 2, "requires_grad", False),
        lambda m: m.ones(2, dtype=m.float16).requires_grad_().requires_grad,
        lambda m: m.ones(2, dtype=m.bfloat16).requires_grad_(), lambda m: m.ones(2).requires_grad_(),
    ])
    for m in (torch, tg):
        t = m.ones(2)
        assert t.requires_grad_() is t


def test_python_protocol_errors():
    check_all([
        lambda m: len(m.ones(3, 2)), lambda m: len(m.ones(0)), lambda m: len(m.tensor(1.0)),
        lambda m: iter(m.tensor(1.0)), lambda m: [x.item() for x in m.tensor([1.0, 2.0])],
        lambda m: [x.shape for x in m.ones(2, 3)], lambda m: bool(m.tensor([1.0, 2.0])), lambda m: bool(m.tensor([])),
        lambda m: bool(m.tensor([0.0])), lambda m: bool(m.tensor(float("nan"))), lambda m: bool(m.tensor([[3]])),
        lambda m: float(m.tensor([1.0, 2.0])), lambda m: float(m.tensor([])), lambda m: int(m.tensor([1.0, 2.0])),
        lambda m: int(m.tensor(2.7)), lambda m: int(m.tensor(-2.7)), lambda m: float(m.tensor(3)),
        lambda m: float(m.tensor([[3.5]])), lambda m: int(m.tensor(True)), lambda m: float(m.ones(1, requires_grad=True)),
        lambda m: [1, 2, 3][m.tensor(1)], lambda m: [1, 2, 3][m.tensor(1.0)], lambda m: [1, 2, 3][m.tensor([1])],
        lambda m: [1, 2, 3][m.tensor([1, 2])], lambda m: [1, 2, 3][m.tensor(True)],
        lambda m: [1, 2, 3][m.tensor(1, dtype=m.uint8)], lambda m: m.ones(2).__index__(), lambda m: range(m.tensor(3)),
        lambda m: f"{m.tensor(2.5):.3f}", lambda m: f"{m.tensor(7):>4}",
    ])

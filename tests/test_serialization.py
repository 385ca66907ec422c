"""tracegrad.save / tracegrad.load: bit-exact round trips of every dtype, state dicts and
nested Python values, and refusal of pickles before anything in them runs."""
import io
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

import tracegrad
import tracegrad.nn as tnn
from tracegrad.serialization import UnpicklingRefused

SPECIAL = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, 1e-310, 2.0 ** -1022])


def _round_trip(obj, path=None):
    if path is None:
        buf = io.BytesIO()
        tracegrad.save(obj, buf)
        buf.seek(0)
        return tracegrad.load(buf)
    tracegrad.save(obj, path)
    return tracegrad.load(path)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a.view(f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32",
                                   "int64", "bool"])
def test_every_dtype_round_trips_bit_for_bit(dtype):
    dt = getattr(tracegrad, dtype)
    if dt.is_floating_point:
        with np.errstate(over="ignore"):
            data = SPECIAL.astype(dt.np)                        # 3.4e38 overflows float16 to inf
        nan_payload = np.array([0x7FC00001 if dt.np == np.float32 else 0], dtype=np.uint32)
        t = tracegrad.tensor(data, dtype=dt)
        if dt.np == np.float32 and dt is tracegrad.float32:
            t._data[6] = nan_payload.view(np.float32)[0]        # a NaN with a payload
    elif dtype == "bool":
        t = tracegrad.tensor([True, False, True])
    else:
        info = np.iinfo(dt.np)
        t = tracegrad.tensor(np.array([info.min, -1 if info.min < 0 else 0, 0, 1, info.max], dtype=dt.np))
    r = _round_trip(t)
    assert r.dtype is dt and tuple(r.shape) == tuple(t.shape)
    np.testing.assert_array_equal(_bits(r._data), _bits(t._data))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1, 1, 1), (2, 3, 4)])
def test_shapes_including_zero_sizes(shape):
    t = tracegrad.randn(shape, dtype=tracegrad.float64)
    r = _round_trip({"t": t, "i": tracegrad.zeros(shape, dtype=tracegrad.int64)})
    assert tuple(r["t"].shape) == shape and r["t"].dtype is tracegrad.float64
    np.testing.assert_array_equal(r["t"]._data, t._data)
    assert tuple(r["i"].shape) == shape


def test_views_requires_grad_and_parameters():
    base = tracegrad.arange(12, dtype=tracegrad.float32).reshape(3, 4)
    view = base.t()                                         # not contiguous
    p = tnn.Parameter(tracegrad.ones(2))
    frozen = tnn.Parameter(tracegrad.ones(2), requires_grad=False)
    leaf = tracegrad.ones(3, requires_grad=True)
    r = _round_trip([view, p, frozen, leaf])
    np.testing.assert_array_equal(r[0]._data, view._data)
    assert isinstance(r[1], tnn.Parameter) and r[1].requires_grad
    assert isinstance(r[2], tnn.Parameter) and not r[2].requires_grad
    assert not isinstance(r[3], tnn.Parameter) and r[3].requires_grad and r[3].is_leaf


def test_python_values_and_containers():
    obj = OrderedDict([
        ("ints", [0, -1, 2 ** 70]), ("floats", (1.5, -0.0, math.inf, -math.inf, math.nan, 1e-320)),
        ("str", "héllo\n"), ("none", None), ("bools", [True, False]),
        ("int_keys", {0: "a", 3: [1, 2]}), ("tuple_keys", {(1, "x"): 2.5, None: 1, 2.5: "f", True: "t"}),
        ("size", tracegrad.Size([2, 3])), ("dtype", tracegrad.float16), ("array", np.arange(6).reshape(2, 3)),
        ("nested", {"a": [{"b": (tracegrad.zeros(1),)}]}),
    ])
    r = _round_trip(obj)
    assert type(r) is OrderedDict and list(r) == list(obj)
    assert r["ints"] == [0, -1, 2 ** 70]
    f = r["floats"]
    assert isinstance(f, tuple) and f[0] == 1.5 and math.copysign(1, f[1]) == -1 and f[2] == math.inf
    assert f[3] == -math.inf and math.isnan(f[4]) and f[5] == 1e-320
    assert r["str"] == "héllo\n" and r["none"] is None and r["bools"] == [True, False]
    assert r["int_keys"] == {0: "a", 3: [1, 2]} and type(r["int_keys"]) is dict
    assert r["tuple_keys"] == {(1, "x"): 2.5, None: 1, 2.5: "f", True: "t"}
    assert isinstance(r["size"], tracegrad.Size) and r["size"] == (2, 3)
    assert r["dtype"] is tracegrad.float16
    np.testing.assert_array_equal(r["array"], np.arange(6).reshape(2, 3))
    assert isinstance(r["nested"]["a"][0]["b"][0], tracegrad.Tensor)


def test_shared_tensors_stay_shared():
    t = tracegrad.randn(3)
    r = _round_trip({"a": t, "b": t, "c": t.detach()})
    assert r["a"] is r["b"]
    assert r["c"] is not r["a"] and np.shares_memory(r["c"]._data, r["a"]._data)


def test_model_and_optimizer_state_dicts(tmp_path):
    tracegrad.manual_seed(0)
    model = tnn.Sequential(tnn.Conv2d(1, 4, 3), tnn.BatchNorm2d(4), tnn.Flatten(), tnn.Linear(4 * 4 * 4, 3))
    opt = tracegrad.optim.Adam(model.parameters(), lr=0.01, amsgrad=True)
    x = tracegrad.randn(5, 1, 6, 6)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    path = tmp_path / "checkpoint.pt"                        # any name: no ".npz" is added
    tracegrad.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}, path)
    assert os.path.exists(path) and not os.path.exists(str(path) + ".npz")
    ck = tracegrad.load(path)
    assert ck["epoch"] == 3
    model2 = tnn.Sequential(tnn.Conv2d(1, 4, 3), tnn.BatchNorm2d(4), tnn.Flatten(), tnn.Linear(4 * 4 * 4, 3))
    model2.load_state_dict(ck["model"])
    for (k, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        np.testing.assert_array_equal(a._data, b._data, err_msg=k)
        assert a.dtype is b.dtype
    model.eval()
    model2.eval()
    np.testing.assert_array_equal(model(x)._data, model2(x)._data)
    sd = opt.state_dict()
    assert ck["optim"]["param_groups"] == sd["param_groups"]
    assert ck["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert sorted(ck["optim"]["state"]) == sorted(sd["state"]) == [0, 1, 2, 3, 4, 5]
    opt2 = tracegrad.optim.Adam(model2.parameters(), lr=0.01, amsgrad=True)
    opt2.load_state_dict(ck["optim"])
    assert float(opt2.state[model2[0].weight]["step"]) == 3.0


def test_format_is_plain_npz_with_a_json_header():
    buf = io.BytesIO()
    tracegrad.save({"w": tracegrad.ones(2, dtype=tracegrad.bfloat16)}, buf)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        assert set(z.files) == {"__tracegrad__", "t0"}
        import json
        header = json.loads(bytes(z["__tracegrad__"]).decode())
        assert header["format"] == "tracegrad" and header["version"] == 2
        node = header["root"]["$dict"][0][1]
        assert node["dtype"] == "bfloat16" and z["t0"].dtype == np.float32


class _Payload:
    """Unpickling this runs code: it writes a marker file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (exec, (f"open({str(self.path)!r}, 'w').write('ran')",))


def _assert_refused(data, marker):
    with pytest.raises(UnpicklingRefused, match="never unpickles"):
        tracegrad.load(io.BytesIO(data))
    assert not marker.exists()


def test_refuses_a_pickle_before_running_it(tmp_path):
    marker = tmp_path / "marker"
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        _assert_refused(pickle.dumps(_Payload(marker), protocol=protocol), marker)
    # sanity: this payload does run when unpickled
    pickle.loads(pickle.dumps(_Payload(marker)))
    assert marker.exists()


def test_refuses_torch_save_files(tmp_path):
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    _assert_refused(buf.getvalue(), tmp_path / "marker")


def test_refuses_object_arrays_inside_an_npz(tmp_path):
    marker = tmp_path / "marker"
    header = ('{"format": "tracegrad", "version": 1, "root": {"$ndarray": "t0"}}').encode()
    buf = io.BytesIO()
    obj = np.empty(1, dtype=object)
    obj[0] = _Payload(marker)
    np.savez(buf, __tracegrad__=np.frombuffer(header, dtype=np.uint8), t0=obj)
    _assert_refused(buf.getvalue(), marker)


def test_rejects_other_files_and_objects():
    buf = io.BytesIO()
    np.savez(buf, a=np.zeros(2))
    with pytest.raises(RuntimeError, match="not written by tracegrad.save"):
        tracegrad.load(io.BytesIO(buf.getvalue()))
    with pytest.raises(RuntimeError, match="not a tracegrad file"):
        tracegrad.load(io.BytesIO(b"hello world"))
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("__tracegrad__.npy", b"junk")
        z.writestr("script.py", b"print('x')")
    with pytest.raises(RuntimeError, match="unexpected members"):
        tracegrad.load(io.BytesIO(zbuf.getvalue()))
    with pytest.raises(TypeError, match="cannot save an object of type"):
        tracegrad.save({"f": lambda: 0}, io.BytesIO())
    forged = io.BytesIO()
    header = b'{"format": "tracegrad", "version": 1, "root": {"$tensor": "t0", "id": 0, "dtype": "float32"}}'
    np.savez(forged, __tracegrad__=np.frombuffer(header, dtype=np.uint8), t0=np.zeros(2, np.int64))
    with pytest.raises(RuntimeError, match="tagged float32 is stored as int64"):
        tracegrad.load(io.BytesIO(forged.getvalue()))


def _torch_round_trip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


def _views(m, base):
    return {"w": base, "wt": base.t(), "row": base[1], "cols": base[:, 1::2], "flat": base.reshape(-1)[2:7],
            "last": base[-1, -1]}


def test_views_share_storage_after_load_as_in_torch():
    # torch saves storages, not tensors: views of one tensor load back as views of one storage
    data = np.arange(12.0).reshape(3, 4)
    rg = _round_trip(_views(tracegrad, tracegrad.tensor(data)))
    rt = _torch_round_trip(_views(torch, torch.tensor(data)))
    for k in rt:
        np.testing.assert_array_equal(rg[k]._data, rt[k].numpy(), err_msg=k)
    with tracegrad.no_grad():
        rg["w"][1, 1] = -7.0
        rg["row"][3] = 40.0
    rt["w"][1, 1] = -7.0
    rt["row"][3] = 40.0
    for k in rt:
        np.testing.assert_array_equal(rg[k]._data, rt[k].numpy(), err_msg=k)
        assert np.shares_memory(rg[k]._data, rg["w"]._data) == (rt[k].untyped_storage().data_ptr() ==
                                                                rt["w"].untyped_storage().data_ptr())


def test_tied_weights_state_dict_stays_tied():
    class Tied(tnn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tnn.Embedding(5, 3)
            self.out = tnn.Linear(3, 5, bias=False)
            self.out.weight = self.emb.weight

    class TiedT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5, 3)
            self.out = torch.nn.Linear(3, 5, bias=False)
            self.out.weight = self.emb.weight

    sg = _round_trip(Tied().state_dict())
    st = _torch_round_trip(TiedT().state_dict())
    assert list(sg) == list(st)
    with tracegrad.no_grad():
        sg["emb.weight"][0, 0] = 123.0
    st["emb.weight"][0, 0] = 123.0
    assert sg["out.weight"][0, 0].item() == st["out.weight"][0, 0].item() == 123.0
    model = Tied()
    model.load_state_dict(sg)
    assert model.out.weight is model.emb.weight


def test_a_view_reaching_outside_its_array_is_refused(tmp_path):
    path = tmp_path / "v.npz"
    base = tracegrad.arange(6.0)
    tracegrad.save({"v": base[2:]}, path)
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    header = bytes(members["__tracegrad__"]).decode().replace('"offset": 2', '"offset": 5')
    members["__tracegrad__"] = np.frombuffer(header.encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    with pytest.raises(RuntimeError, match="reaches outside its array"):
        tracegrad.load(path)

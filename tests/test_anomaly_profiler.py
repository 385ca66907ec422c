"""detect_anomaly, the profiler, inference_mode: against torch where torch has the same call."""
import json

import pytest
import torch

import tracegrad as tg


def test_detect_anomaly_names_forward_op_and_traceback():
    x = tg.tensor([0., 1.], requires_grad=True)
    with pytest.warns(UserWarning):
        with tg.autograd.detect_anomaly():
            y = x.sqrt() * 0 + x                   # sqrt's derivative at 0 is inf; * 0 makes NaN
            with pytest.warns(UserWarning, match="Error detected in SqrtBackward0") as rec:
                with pytest.raises(RuntimeError) as e:
                    y.sum().backward()
    tx = torch.tensor([0., 1.], requires_grad=True)
    with pytest.warns(UserWarning):
        with torch.autograd.detect_anomaly():
            ty = tx.sqrt() * 0 + tx
            with pytest.raises(RuntimeError) as te:
                ty.sum().backward()
    assert str(e.value) == str(te.value)
    text = "".join(str(w.message) for w in rec)
    assert "test_anomaly_profiler.py" in text        # where the forward op was created
    # anomaly mode is off again, and the engine still works
    assert not tg.autograd.is_anomaly_enabled()
    z = tg.tensor([1., 4.], requires_grad=True)
    z.sqrt().sum().backward()
    assert z.grad.tolist() == [0.5, 0.25]


def test_set_detect_anomaly_toggles():
    tg.autograd.set_detect_anomaly(True)
    assert tg.autograd.is_anomaly_enabled()
    tg.autograd.set_detect_anomaly(False)
    assert not tg.autograd.is_anomaly_enabled()


def test_profiler_counts_forward_ops_and_backward_nodes(tmp_path):
    with tg.autograd.profiler.profile(record_shapes=True) as prof:
        x = tg.randn(8, 8, requires_grad=True)
        for _ in range(3):
            y = (x @ x).tanh().sum()
            y.backward()
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["aten::matmul"].count == 3
    assert avg["aten::tanh"].count == 3
    assert avg["MmBackward0"].count == 3
    assert avg["TanhBackward0"].count == 3
    assert all(e.cpu_time_total >= 0 for e in avg.values())
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    assert "Name" in table and "# of Calls" in table and "MmBackward0" in table
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    names = {ev["name"] for ev in data["traceEvents"]}
    assert {"aten::matmul", "MmBackward0"} <= names
    assert all(ev["ph"] == "X" and ev["dur"] >= 0 for ev in data["traceEvents"])


def test_profiler_off_records_nothing():
    with tg.autograd.profiler.profile(enabled=False) as prof:
        (tg.ones(2) * 2).sum()
    assert len(prof.function_events) == 0


def test_inference_mode_tensors_cannot_enter_autograd():
    def run(m):
        out = []
        with m.inference_mode():
            t = m.ones(3)
            out.append(m.is_inference_mode_enabled())
            out.append(not (t * 2).requires_grad)
        w = m.ones(3, requires_grad=True)
        for f in (lambda: (t * w).sum().backward(), lambda: t.requires_grad_(), lambda: t.add_(1)):
            try:
                f()
                out.append(None)
            except RuntimeError as e:
                out.append(str(e))
        return out
    assert run(tg) == run(torch)


def test_inference_mode_decorator_and_disable():
    @tg.inference_mode()
    def f(x):
        return x * 2
    x = tg.ones(2, requires_grad=True)
    assert f(x).grad_fn is None
    with tg.inference_mode():
        with tg.inference_mode(False):
            assert (x * 2).grad_fn is not None

"""The training demo (python -m tracegrad.demo): on a tiny budget it trains, reports,
writes its PNG and its weights, and trains the same through compile; the full run
reaches the 95% test accuracy the README promises."""
import warnings

import numpy as np
import pytest

import tracegrad
from tracegrad import demo


def test_demo_trains_and_writes_its_outputs(tmp_path, capsys):
    r = demo.main(["--epochs", "2", "--subset", "300", "--quiet", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert len(r["history"]["loss"]) == 2 and r["history"]["loss"][1] < r["history"]["loss"][0]
    assert 0.0 <= r["test_accuracy"] <= 1.0 and r["step_ms"] > 0
    assert "test accuracy:" in out and "time per training step" in out
    assert "conv2d(" in out and "max_pool2d(" in out            # the short view of the traced graph
    with open(r["png"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    state = tracegrad.load(r["weights"])
    model = demo.DigitsCNN()
    assert list(state) == list(model.state_dict())
    model.load_state_dict(state)
    x = tracegrad.tensor(np.zeros((2, 1, 8, 8), np.float32))
    assert tuple(model(x).shape) == (2, 10)


def test_demo_data_split_is_fixed():
    a = demo.load_data(seed=0)
    b = demo.load_data(seed=0)
    assert a[0].shape == (1437, 1, 8, 8) and a[2].shape == (360, 1, 8, 8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert a[0].dtype == np.float32 and a[1].dtype == np.int64 and a[0].max() <= 1.0


def test_demo_reports_an_unavailable_device(tmp_path, capsys):
    try:
        tracegrad.zeros(1, device="cuda")
        pytest.skip("a CUDA device is available here")
    except RuntimeError:
        pass
    assert demo.main(["--device", "cuda", "--epochs", "1", "--out", str(tmp_path)]) == 2
    assert "--device cuda: not available" in capsys.readouterr().err


def test_the_full_run_reaches_95_percent(tmp_path):
    r = demo.main(["--quiet", "--out", str(tmp_path)])
    assert r["test_accuracy"] >= 0.95


def test_demo_trains_through_compile_as_eagerly(tmp_path, capsys):
    args = ["--epochs", "2", "--subset", "200", "--quiet"]
    eager = demo.main(args + ["--out", str(tmp_path / "eager")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")         # the whole step is traced: no fallback warning
        compiled = demo.main(args + ["--compile", "--out", str(tmp_path / "compiled")])
    out = capsys.readouterr().out
    assert "training through tracegrad.compile (the whole step" in out
    assert "Adam's update" in out
    np.testing.assert_allclose(compiled["history"]["loss"], eager["history"]["loss"], rtol=1e-4)


def test_demo_model_parameters():
    m = demo.DigitsCNN()
    assert [n for n, _ in m.named_parameters()] == ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                                    "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert sum(p.numel() for p in m.parameters()) == (16 * 9 + 16) + (32 * 16 * 9 + 32) + (128 * 64 + 64) + \
        (64 * 10 + 10)
    assert isinstance(m.conv1, tracegrad.nn.Conv2d)

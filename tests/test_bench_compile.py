"""benchmarks/bench_compile.py's GPU mode without a GPU: under TRITON_INTERPRET=1 tracegrad's
"cuda" is Triton's CPU interpreter (torch's contenders stay on the CPU), so --device cuda
--smoke runs every GPU row on tiny shapes, checks tracegrad against torch and writes the JSON.
The variable is read when triton and tracegrad are imported, hence the subprocess."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpu_mode_smoke_runs_every_row_under_the_interpreter(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, os.path.join("benchmarks", "bench_compile.py"), "--device", "cuda",
                        "--smoke", "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    with open(tmp_path / "bench_compile_cuda.json") as f:
        out = json.load(f)
    assert sorted(out["results"]) == ["W2", "W3", "W4", "W5", "W6", "W7", "W8"]
    assert out["meta"]["device"] and out["meta"]["triton_interpret"] is True
    for w in ("W3", "W4", "W5"):
        assert set(out["results"][w]["roofline"]) == {"torch eager", "tracegrad.compile"}, w
    for w, row in out["results"].items():
        assert isinstance(row["times"]["tracegrad.compile"], float), (w, row["times"])
    assert "copy bandwidth" in r.stdout and "hand-fused" not in r.stdout

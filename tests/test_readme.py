"""The README's examples run and print what it says."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_block_runs_and_prints_grad():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "tensor([10.])"
    assert "MulBackward0" in out.stdout and "AddBackward0" in out.stdout


def test_readme_ir_listings_match_what_tracegrad_prints():
    import tracegrad as torch
    text = (ROOT / "README.md").read_text()
    w = torch.tensor([1.], requires_grad=True)
    x = torch.tensor([2.], requires_grad=True)
    y = torch.mul(torch.add(w, x), torch.add(w, 1))
    assert str(torch.ir.graph_of(y)) in text
    assert str(torch.ir.backward_graph_of(y)) in text


def test_tour_runs():
    out = subprocess.run([sys.executable, "-m", "tracegrad.tour"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "w.grad = tensor([10.])" in out.stdout
    assert "def backward(" in out.stdout


def test_import_does_not_import_torch():
    code = "import sys, tracegrad; x = tracegrad.ones(2, requires_grad=True); (x * 2).sum().backward(); " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_readme_compile_examples_run():
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "torch.compile" in b]
    assert len(blocks) == 3
    step = subprocess.run([sys.executable, "-c", blocks[2] + "\nprint('step ok', float(loss) < 1.2, "
                           "opt.state[model[0].weight]['momentum_buffer'].shape)\n"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert step.returncode == 0 and "Warning" not in step.stderr, step.stderr
    assert "step ok True torch.Size([16, 4])" in step.stdout, step.stdout
    code = blocks[0] + blocks[1] + (
        "\nx = torch.randn(5, dtype=torch.float64, requires_grad=True)\n"
        "t = torch.tanh(x)\n"
        "s = 1 - t * t\n"
        "want = -16 * t * s * s + 8 * t ** 3 * s\n"          # d3/dx3 of tanh(x)**2
        "print('third ok', bool(torch.allclose(third(x), want)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "==== generated forward source ====" in out.stdout
    assert out.stdout.strip().endswith("third ok True")


def test_python_dash_m_tracegrad_runs_the_tour():
    out = subprocess.run([sys.executable, "-m", "tracegrad"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "w.grad = tensor([10.])" in out.stdout


def test_command_lines_show_their_defaults():
    for args in (["-m", "tracegrad.demo"], [str(ROOT / "benchmarks" / "bench_compile.py")],
                 [str(ROOT / "benchmarks" / "bench_eager.py")], [str(ROOT / "benchmarks" / "bench_demo.py")],
                 [str(ROOT / "benchmarks" / "bench_compile_time.py")], [str(ROOT / "benchmarks" / "triton_traffic.py")],
                 ["-m", "tracegrad.demo_text"]):
        out = subprocess.run([sys.executable, *args, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert out.returncode == 0, out.stderr
        options = [line for line in out.stdout.splitlines() if line.strip().startswith("--")]
        text = " ".join(out.stdout.split())
        assert text.count("(default:") >= max(1, len([o for o in options if "--help" not in o]) - 2), out.stdout


def test_readme_examples_write_no_tracked_file():
    text = (ROOT / "README.md").read_text()
    for path in re.findall(r"render\(\"([^\"]+)\"", text):
        assert "/" not in path and not (ROOT / (path + ".svg")).exists()


def test_license_matches_the_declared_one():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()

"""Every kernel the Triton backend emits for benchmarks/triton_traffic.py's cases (elementwise
chains, GELU, reductions of rows and of a whole tensor, softmax, log_softmax, cross-entropy,
layer_norm, matmul epilogues, conv/pool, the digits CNN, an MLP step, float16/bfloat16), compiled by
the real Triton compiler for Hopper (sm_90) and Ampere (sm_80), no GPU needed: each compiles,
no kernel spills (float32 IEEE matmuls and convolutions at their spill-free first tiles), a
float16/bfloat16 tl.dot becomes MMA instructions. Distinct kernels compile once per target,
in two worker processes."""
import os
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import triton_traffic as TT  # noqa: E402


@pytest.fixture(scope="module")
def built():
    """[(case, program label, TritonProgram)], lowered for a GPU (not interpreted)."""
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        return [(name, label, prog) for name, fn, args in TT.cases() for label, prog in TT.programs(fn, args)]
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before


def _check(results):
    errors = [f"{r['name']}: {r['error']}" for r in results if "error" in r]
    assert not errors, "\n".join(errors)
    spills = [r["name"] for r in results if r["spill"]]
    assert not spills, f"kernels spill: {spills}"
    assert all(r["regs"] for r in results), "no register count read from a cubin"
    no_mma = [r["name"] for r in results if r["dot"] and r.get("half") and not r["mma"]]
    assert not no_mma, f"half-precision tl.dot without MMA instructions: {no_mma}"


def _specs(built, only=None):
    specs, halves = [], []
    for name, label, prog in built:
        half = "float16" in name
        for s in TT.kernel_specs(prog):
            specs.append(s)
            halves.append(half)
    keep = [i for i in range(len(specs)) if only is None or only(specs[i], halves[i])]
    return [specs[i] for i in keep], [halves[i] for i in keep]


@pytest.mark.parametrize("arch", [90, 80])
def test_every_emitted_kernel_compiles(built, arch):
    """Hopper (sm_90) and Ampere (sm_80): every distinct kernel of every case."""
    specs, halves = _specs(built)
    kinds = {s[4] for s in specs}
    assert {"pointwise", "reduce", "matmul", "scatter"} <= kinds
    results = TT.compile_all(specs, arch=arch)
    assert len(results) == len(specs)
    for r, h in zip(results, halves):
        r["half"] = h
    _check(results)
    assert any(r["dot"] and r["half"] and r["mma"] for r in results)
    # contiguous inputs are loaded in vectors: the elementwise chain's and GELU's kernels
    # (rows of 512, inputs contiguous) hold no single-element load
    for case in ("elementwise chain", "gelu"):
        names = {k.name for name, label, prog in built if name == case for k in prog.kernels}
        got = [r for s, r in zip(specs, results) if s[0] in names and r["kind"] == "pointwise"]
        assert got and all(r["loads"]["v4"] and not r["loads"]["scalar"] for r in got), [
            (r["name"], r["loads"]) for r in got]


def test_fused_programs_move_their_minimum_bytes(built):
    """Elementwise chains, GELU, matmul epilogues, softmax, log_softmax and cross-entropy
    (forward and backward, float32 and float16), layer_norm's forward and three reductions of
    one input read inputs once and write outputs once (the row on chip); layer_norm's backward
    is one kernel whose weight and bias gradients are column sums added once per program."""
    ratios = {(name, label): TT.traffic(prog) for name, label, prog in built}
    kernels = {(name, label): len(prog.kernels) for name, label, prog in built}
    for key in [("elementwise chain", "forward"), ("gelu", "forward"),
                ("gelu", "backward"), ("matmul epilogue", "forward"), ("softmax", "forward"), ("softmax", "backward"),
                ("log_softmax", "forward"), ("log_softmax", "backward"), ("softmax float16", "forward"),
                ("softmax float16", "backward"), ("layer_norm", "forward"), ("three reductions", "forward")]:
        moved, least = ratios[key]
        assert moved == least and kernels[key] == 1, (key, moved, least, kernels[key])
    # the bar: softmax, log_softmax, cross-entropy and layer_norm, forward and backward,
    # at most 1.3x their minimum bytes
    for case in ("softmax", "log_softmax", "cross_entropy", "layer_norm"):
        for label in ("forward", "backward"):
            moved, least = ratios[(case, label)]
            assert moved <= 1.3 * least, (case, label, moved, least)
    # cross-entropy: one row kernel reads the logits (the target's logit a stage of it, the
    # one-hot gradient a comparison in it); the others touch one value per row
    for label in ("forward", "backward"):
        prog = next(p for name, lab, p in built if (name, lab) == ("cross_entropy", label))
        assert sum(k.kind == "reduce" and k.M == 64 for k in prog.kernels) == 1, prog.plan
        assert not any(k.kind == "scatter" for k in prog.kernels) and "= gather(" not in prog.plan, prog.plan
    assert kernels[("layer_norm", "backward")] == 1
    # convolutions are implicit GEMMs (no padded, unfolded or flipped copy), at most 2x their
    # minimum bytes forward and backward: the weight gradient's kernel sums the bias gradient;
    # max pooling's window offsets are accumulators of the convolution's kernel (its output is
    # never stored), and its gradient, an elementwise gather where windows do not overlap, is
    # computed where both gradient GEMMs load their tiles (no full-size map, zeros or atomics)
    for case, kernels_of in (("conv2d", {"forward": 1, "backward": 2}),
                             ("conv2d + max_pool2d", {"forward": 1, "backward": 2}),
                             ("conv2d + pool float16", {"forward": 1, "backward": 2})):
        for label in ("forward", "backward"):
            prog = next(p for name, lab, p in built if (name, lab) == (case, label))
            t = TT.traffic(prog)
            copies = [step for step, _ in t.steps if "_kernel" not in step]
            assert not copies, (case, label, copies)
            assert [k.kind for k in prog.kernels] == ["matmul"] * kernels_of[label], (case, label, prog.plan)
            assert t.moved <= 2.0 * t.least, (case, label, t.moved, t.least)
    fwd = next(p for name, lab, p in built if (name, lab) == ("conv2d + max_pool2d", "forward"))
    assert TT.traffic(fwd).moved == TT.traffic(fwd).least
    # the digits CNN's training step (conv, relu, pool twice, two linear layers): its pooled
    # convolutions store only the relu kept for the backward
    for label in ("forward", "backward"):
        moved, least = ratios[("digits CNN", label)]
        assert moved <= 2.0 * least, (label, moved, least)
    # every other program moves at least its minimum, and the report counts something
    for key, (moved, least) in ratios.items():
        assert 0 < least <= moved, (key, moved, least)


def test_explain_shows_registers_and_spills_from_the_real_compiler():
    """explain(..., backend="triton", arch=90): each kernel's line carries its registers and
    spilled bytes read from the sm_90 cubin, beside its bytes moved."""
    import io
    import re
    import numpy as np
    import tracegrad as tg
    x = tg.tensor(np.random.default_rng(0).standard_normal((64, 300)).astype(np.float32), requires_grad=True)
    f = tg.compile(lambda a: a.log_softmax(1).sum(), backend="triton")
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        text = tg.explain(f, x, arch=90, file=io.StringIO())
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    for stem in ("forward", "backward"):
        section = text.split(f"==== Triton traffic ({stem}) ====")[1].split("====")[0]
        lines = [ln for ln in section.splitlines() if "_kernel " in ln]
        assert lines, section
        for ln in lines:
            m = re.search(r"[\d,]+ bytes  (\d+) registers, (\d+) bytes spilled \(sm_90\)$", ln)
            assert m and 0 < int(m.group(1)) <= 255 and int(m.group(2)) == 0, ln


@pytest.mark.parametrize("arch", [90, 80])
def test_float32_matmul_with_tf32_uses_tensor_cores(arch):
    """set_float32_matmul_precision("high"): a float32 matmul's tl.dot becomes MMA
    instructions on Hopper and Ampere, with no spill at the first tile size."""
    import numpy as np
    import tracegrad as tg
    rng = np.random.default_rng(0)
    a = tg.tensor(rng.standard_normal((128, 256)).astype(np.float32), requires_grad=True)
    w = tg.tensor(rng.standard_normal((256, 64)).astype(np.float32), requires_grad=True)
    before = os.environ.pop("TRITON_INTERPRET", None)
    tg.set_float32_matmul_precision("high")
    try:
        progs = TT.programs(lambda m, x, y: (x @ y).relu(), [a, w])
    finally:
        tg.set_float32_matmul_precision("highest")
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog) if s[4] == "matmul"]
    assert len(specs) >= 3           # the forward's and both gradients' matmuls
    results = TT.compile_all(specs, arch=arch)
    assert not [r for r in results if "error" in r], results
    assert all(r["dot"] and r["mma"] and r["spill"] == 0 for r in results), results


def test_kernels_round_products_and_sums_apart():
    """No FP contraction: a product added to a value stays a rounded multiply and a rounded
    add, as the eager ops compute it (Triton's default fuses them into one FMA, which rounds
    once). The same kernel with Triton's defaults does hold an FMA: the check can fail."""
    import numpy as np
    import tracegrad as tg
    rng = np.random.default_rng(0)
    x, y, z = (tg.tensor(rng.standard_normal(4096).astype(np.float32)) for _ in range(3))
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        progs = TT.programs(lambda m, a, b, c: a * b + c, [x, y, z])
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog)]
    assert specs
    ours = TT.compile_all(specs, arch=90)
    fused = TT.compile_all(specs, arch=90, options={"enable_fp_fusion": True})
    assert not [r for r in ours + fused if "error" in r], ours + fused
    assert all(r["fma"] == 0 for r in ours), [(r["name"], r["fma"]) for r in ours]
    assert any(r["fma"] > 0 for r in fused), [(r["name"], r["fma"]) for r in fused]


def test_float32_division_and_roots_round_as_ieee():
    """On a GPU Triton's `/` is div.full.f32 and tl.sqrt sqrt.approx.ftz.f32 (up to 2 ulp off torch,
    and a subnormal's root 0: pow(1e-40, 0.5) came out 0 on an H200): division, sqrt, rsqrt and
    the means, variances, norms and softmax of reductions, and the helpers' divisions (sigmoid, tanh,
    log1p, expm1, floor_divide) compile to div.rn / sqrt.rn."""
    import numpy as np
    import tracegrad as tg
    r = np.random.default_rng(0)
    x, y = (tg.tensor(r.random((64, 96)).astype(np.float32) + 0.5, requires_grad=True) for _ in range(2))
    n = tg.tensor(r.integers(1, 9, (64, 96)))

    def f(m, a, b, k):
        return (a / b + m.sqrt(a) + m.rsqrt(b) + a ** 0.5 + k / 3 + a.mean(1, keepdim=True) + a.var(1, keepdim=True)
                + a.std(0) + m.linalg.vector_norm(b, dim=1, keepdim=True) + m.softmax(a, 1) + a.mean(0)
                + m.sigmoid(a) + m.tanh(b) + m.log1p(a) + m.expm1(b) + m.floor_divide(a.detach(), b.detach())).sum()
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        progs = TT.programs(f, [x, y, n])
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog)]
    results = TT.compile_all(specs, arch=90)
    assert not [r["error"] for r in results if "error" in r]
    assert not {r["name"]: r["approx"] for r in results if r["approx"]}


def test_fmod_remainder_and_floor_division_do_not_use_the_gpus_frem():
    """A float `%` compiles to fma(-trunc(x / y), y, x) on a GPU: fmod(1e10, 3) was 256 and
    fmod(-4, 2) +0.0 on an H200. fmod, remainder and floor_divide (float16, float32, float64)
    compile for sm_90 without it (their exact reduction runs under the interpreter in
    tests/test_triton_special_values.py: the `*-large-quotients-*` cases), with no spills.
    float16 floor division is refused by name (torch rounds each of its steps to float16)."""
    import numpy as np
    import tracegrad as tg
    r = np.random.default_rng(0)
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        progs = []
        for dt in (np.float16, np.float32, np.float64):
            a, b = (tg.tensor(r.random(300).astype(dt) + 0.5) for _ in range(2))
            if dt is np.float16:
                with pytest.raises(Exception, match="floor division of float16"):
                    TT.programs(lambda m, x, y: m.floor_divide(x, y), [a, b])
                progs += TT.programs(lambda m, x, y: m.fmod(x, y) + m.remainder(x, y), [a, b])
                continue
            progs += TT.programs(lambda m, x, y: m.fmod(x, y) + m.remainder(x, y) + m.floor_divide(x, y), [a, b])
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog)]
    assert len({s[1].split("def _fmod(")[1][:40] for s in specs}) == 1     # one helper, in every program
    results = TT.compile_all(specs, arch=90)
    assert not [r["error"] for r in results if "error" in r]
    assert not [r["name"] for r in results if r["spill"]]
    assert not {r["name"]: r["frem"] for r in results if r["frem"]}


def test_signbit_copysign_and_hypot_compile_for_sm90():
    """The _signbit (a bitcast per float width), _hypot, _xlogy and _xlog1py helpers, and copysign
    by a tensor and by a negative number, in float16, float32 and float64: they compile for sm_90,
    without spills."""
    import numpy as np
    import tracegrad as tg
    r = np.random.default_rng(0)
    before = os.environ.pop("TRITON_INTERPRET", None)
    try:
        progs = []
        for dt in (np.float16, np.float32, np.float64):
            a, b = (tg.tensor(r.standard_normal(300).astype(dt)) for _ in range(2))
            progs += TT.programs(lambda m, x, y: (m.copysign(x, y), m.copysign(x, -0.0), m.hypot(x, y),
                                                  m.signbit(y), m.xlogy(x, y.abs()), m.special.xlog1py(x, y.abs())),
                                 [a, b])
    finally:
        if before is not None:
            os.environ["TRITON_INTERPRET"] = before
    specs = [s for _, prog in progs for s in TT.kernel_specs(prog)]
    assert all("_hypot(" in s[1] and "_signbit(" in s[1] for s in specs)
    results = TT.compile_all(specs, arch=90)
    assert not [r["error"] for r in results if "error" in r]
    assert not [r["name"] for r in results if r["spill"]]

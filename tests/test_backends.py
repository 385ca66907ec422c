"""torch.backends as training scripts use it: the cuDNN flags set and read back (and restored by
flags()), cuda.matmul.allow_tf32 as the float32 matmul precision, the availability questions
answered for tracegrad (no cuDNN, MPS, MKL, oneDNN or OpenMP), the CPU capability as torch's."""
import os

import pytest
import torch

import tracegrad as tg


def test_cudnn_flags_as_torchs():
    for b in (torch.backends, tg.backends):
        assert (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.allow_tf32) == \
            (True, False, False, True)
        assert b.cudnn.is_available() is False and b.cudnn.version() is None     # (torch's CPU build)
    seen = []
    for b in (torch.backends, tg.backends):
        with b.cudnn.flags(enabled=False, benchmark=True, deterministic=True):
            inside = (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic)
        seen.append((inside, (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic)))
    assert seen[0] == seen[1] == ((False, True, True), (True, False, False))
    import tracegrad.backends.cudnn as cudnn
    cudnn.benchmark = True
    try:
        assert tg.backends.cudnn.benchmark is True
    finally:
        cudnn.benchmark = False


def test_matmul_allow_tf32_is_the_float32_matmul_precision():
    for lib in (torch, tg):
        m = lib.backends.cuda.matmul
        assert m.allow_tf32 is False and lib.get_float32_matmul_precision() == "highest"
        m.allow_tf32 = True
        assert lib.get_float32_matmul_precision() == "high"
        lib.set_float32_matmul_precision("medium")
        assert m.allow_tf32 is True
        lib.set_float32_matmul_precision("highest")
        assert m.allow_tf32 is False
        assert m.allow_bf16_reduced_precision_reduction is True
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            m.foo = 1
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            m.foo


def test_availability_answered_for_tracegrad():
    b = tg.backends
    assert (b.mps.is_available(), b.mps.is_built(), b.mkl.is_available(), b.mkldnn.is_available(),
            b.openmp.is_available()) == (False, False, False, False, False)
    assert b.cuda.is_built() is True                      # Triton is a dependency
    assert all(f() for f in (b.cuda.flash_sdp_enabled, b.cuda.math_sdp_enabled, b.cuda.mem_efficient_sdp_enabled))
    b.cuda.enable_flash_sdp(False)
    try:
        assert b.cuda.flash_sdp_enabled() is False
    finally:
        b.cuda.enable_flash_sdp(True)


@pytest.mark.skipif("ATEN_CPU_CAPABILITY" in os.environ, reason="torch's capability set by hand")
def test_cpu_capability_as_torchs():
    assert tg.backends.cpu.get_cpu_capability() == torch.backends.cpu.get_cpu_capability()

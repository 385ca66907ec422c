"""torch.backends: the flags training scripts set (`backends.cudnn.benchmark = True`,
`backends.cuda.matmul.allow_tf32 = True`) and the questions they ask (`backends.mps.is_available()`),
answered for tracegrad: its CPU kernels are numpy's and its GPU ones Triton's, so cuDNN, MPS, MKL,
oneDNN and OpenMP are not there, and the cuDNN flags change nothing but themselves.
`cuda.matmul.allow_tf32` is torch's other spelling of set_float32_matmul_precision."""
from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]

"""torch.backends.mkl: tracegrad's CPU kernels are numpy's (its BLAS, not MKL through torch)."""


def is_available():
    return False

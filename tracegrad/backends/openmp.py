"""torch.backends.openmp: tracegrad's CPU parallelism is numpy's BLAS threads and its own thread pool."""


def is_available():
    return False

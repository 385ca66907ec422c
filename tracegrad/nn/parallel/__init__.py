"""torch.nn.parallel: data parallelism across processes (DistributedDataParallel, on MPI)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]

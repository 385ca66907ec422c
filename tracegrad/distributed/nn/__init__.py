"""torch.distributed.nn: collectives that autograd differentiates."""
from . import functional  # noqa: F401

"""tracegrad.optim: torch.optim's SGD, Adam and AdamW over tracegrad parameters."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]

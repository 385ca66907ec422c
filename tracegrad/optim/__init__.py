"""tracegrad.optim: torch.optim's SGD, Adam, AdamW, RMSprop and Adagrad over tracegrad
parameters, and the learning-rate schedules of torch.optim.lr_scheduler."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]

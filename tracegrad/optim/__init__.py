"""tracegrad.optim: torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam, Adadelta,
Rprop, ASGD and LBFGS over tracegrad parameters, and the learning-rate schedules of torch.optim.lr_scheduler."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .more import Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD
from .lbfgs import LBFGS
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Rprop",
           "ASGD", "LBFGS", "lr_scheduler"]

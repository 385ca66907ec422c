"""tracegrad.optim: torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam, Adadelta,
Rprop, ASGD, Adafactor and LBFGS over tracegrad parameters, and the learning-rate schedules of torch.optim.lr_scheduler."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .more import Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD, Adafactor
from .lbfgs import LBFGS
from . import lr_scheduler
from . import swa_utils

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Rprop",
           "ASGD", "Adafactor", "LBFGS", "lr_scheduler", "swa_utils"]

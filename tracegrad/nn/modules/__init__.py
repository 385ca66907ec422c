"""torch.nn's modules: the Module base, containers, layers and losses."""
from .module import Module
from .container import Sequential, ModuleList, ModuleDict, ParameterList
from .layers import (Identity, Linear, Conv2d, ConvTranspose2d, ReLU, LeakyReLU, GELU, SiLU, Sigmoid, Tanh, Softplus,
                     Softmax, LogSoftmax, Dropout, LayerNorm, BatchNorm1d, BatchNorm2d, Embedding, Flatten,
                     Unflatten, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d)
from .loss import L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss

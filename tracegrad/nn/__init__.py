"""tracegrad.nn: torch.nn's modules, parameters, functional API and initializers.

Layers hold Parameters and call `nn.functional`, whose composites decompose into the
op table's primitives (convolution and pooling are primitives of their own, in
ops/nn_primitives.py).
"""
from .parameter import Parameter, Buffer, UninitializedParameter, UninitializedBuffer
# functional_extra adds its functions to nn.functional; before the layers, which read them.
from . import functional, functional_extra, functional_nd  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module
from . import functional, init, modules, utils, parallel  # noqa: F401

"""torch.nn.utils: gradient clipping, parameters as one vector, weight and spectral normalization,
parametrizations, pruning, conv/linear-batch-norm fusion, skip_init."""
from .clip_grad import clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, clip_grads_with_norm_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .weight_norm import weight_norm, remove_weight_norm
from .spectral_norm import spectral_norm, remove_spectral_norm
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .init import skip_init
from . import rnn, parametrize, parametrizations, stateless, prune, fusion  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm", "spectral_norm",
           "remove_spectral_norm", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "skip_init"]

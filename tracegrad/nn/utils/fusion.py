"""Folding an eval-mode batch norm into the convolution or linear layer that feeds it.

In eval mode a batch norm is a fixed affine map per channel c:
    bn(y)[c] = (y[c] - mean[c]) * s[c] + beta[c],    s[c] = gamma[c] / sqrt(var[c] + eps),
and the layer before it is affine in its weight and bias, so one layer computes both:
    w'[c] = w[c] * s[c],    b'[c] = (b[c] - mean[c]) * s[c] + beta[c].
The output channels are dim 0 of a convolution's or a linear layer's weight and dim 1 of a transposed
convolution's. A missing bias counts as 0, a batch norm without affine parameters as gamma = 1, beta = 0.
The fused weight and bias keep the layer's dtypes."""
import copy

from ... import creation as C
from ...ops import functional as O
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _check_eval(layer, bn):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")


def _check_running_stats(bn):
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def _folded(weight, bias, bn_rm, bn_rv, bn_eps, bn_w, bn_b, channel_dim, linear):
    """The fused weight and bias as Parameters (see the module's docstring). The rounding follows torch's:
    for a linear layer the scale is rounded to the weight's dtype before the product and the bias is
    (b - mean) * s + beta; for a convolution the product is rounded once and the bias is
    (b - mean) / sqrt(var + eps) * gamma + beta."""
    weight_dtype = weight.dtype
    bias_dtype = weight_dtype if bias is None else bias.dtype
    if bias is None:
        bias = C.zeros_like(bn_rm)
    gamma = C.ones_like(bn_rm) if bn_w is None else bn_w
    beta = C.zeros_like(bn_rm) if bn_b is None else bn_b
    inv_std = O.rsqrt(bn_rv + bn_eps)
    per_channel = [1] * weight.dim()
    per_channel[channel_dim] = -1
    scale = gamma * inv_std
    if linear:
        new_weight = weight * scale.reshape(per_channel).to(dtype=weight_dtype)
        new_bias = (bias - bn_rm) * scale + beta
    else:
        new_weight = (weight * scale.reshape(per_channel)).to(dtype=weight_dtype)
        new_bias = (bias - bn_rm) * inv_std * gamma + beta
    new_bias = new_bias.to(dtype=bias_dtype)
    return Parameter(new_weight, weight.requires_grad), Parameter(new_bias, bias.requires_grad)


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The weight and bias (Parameters) of a convolution that computes `bn(conv(x))`; `transpose` for a
    transposed convolution's weight."""
    return _folded(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, 1 if transpose else 0, linear=False)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of `conv` (both in eval mode) that computes `bn(conv(x))`."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    _check_running_stats(bn)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias (Parameters) of a linear layer that computes `bn(linear(x))`."""
    return _folded(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, 0, linear=True)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` (both in eval mode) that computes `bn(linear(x))`; the batch norm's features are
    the linear layer's outputs, or a single one shared by all."""
    _check_eval(linear, bn)
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(f"To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
                             f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}")
    _check_running_stats(bn)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused

"""torch.nn's 3-d convolution, pooling and normalization layers, max unpooling, alpha dropout and
TripletMarginWithDistanceLoss: thin modules over nn.functional with torch's constructor
arguments, parameters and reprs."""
from .. import functional as F
from .module import Module
from .layers import (_ConvNd, _MaxPoolNd, AvgPool2d, _AdaptivePool, _BatchNorm, _InstanceNorm, Dropout,
                     PairwiseDistance)
from .loss import _Loss

__all__ = ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
           "BatchNorm3d", "InstanceNorm3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "AlphaDropout",
           "FeatureAlphaDropout", "TripletMarginWithDistanceLoss", "FractionalMaxPool2d", "FractionalMaxPool3d"]


def _ntuple(n):
    return lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


_single, _pair, _triple = _ntuple(1), _ntuple(2), _ntuple(3)


class Conv3d(_ConvNd):
    """3-D convolution; weight (out, in/groups, kd, kh, kw) ~ kaiming_uniform(a=sqrt(5))."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _triple(kernel_size), _triple(stride),
                         padding if isinstance(padding, str) else _triple(padding), _triple(dilation), False,
                         (0, 0, 0), groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            return F.conv3d(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), weight,
                            bias, self.stride, (0, 0, 0), self.dilation, self.groups)
        return F.conv3d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class ConvTranspose3d(_ConvNd):
    """Transposed 3-D convolution; weight (in, out/groups, kd, kh, kw)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        super().__init__(in_channels, out_channels, _triple(kernel_size), _triple(stride), _triple(padding),
                         _triple(dilation), True, _triple(output_padding), groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class MaxPool3d(_MaxPoolNd):
    _pool = "max_pool3d"


class AvgPool3d(AvgPool2d):
    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(_AdaptivePool):
    _fn = staticmethod(F.adaptive_avg_pool3d)


class AdaptiveMaxPool3d(_AdaptivePool):
    _fn = staticmethod(F.adaptive_max_pool3d)


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class InstanceNorm3d(_InstanceNorm):
    _batched_dim = 5


class _MaxUnpoolNd(Module):
    _tuple = None
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = type(self)._tuple(kernel_size)
        self.stride = type(self)._tuple(stride if stride is not None else kernel_size)
        self.padding = type(self)._tuple(padding)

    def forward(self, input, indices, output_size=None):
        return getattr(F, type(self)._fn)(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _tuple, _fn = staticmethod(_single), "max_unpool1d"


class MaxUnpool2d(_MaxUnpoolNd):
    _tuple, _fn = staticmethod(_pair), "max_unpool2d"


class MaxUnpool3d(_MaxUnpoolNd):
    _tuple, _fn = staticmethod(_triple), "max_unpool3d"


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling over pseudo-random windows (F.fractional_max_pool2d/3d); the samples,
    where given, are a buffer (torch's _random_samples)."""
    _tuple = _fn = None

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = self._tuple(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = self._tuple(output_size) if output_size is not None else None
        self.output_ratio = self._tuple(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return getattr(F, type(self)._fn)(input, self.kernel_size, self.output_size, self.output_ratio,
                                          self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _tuple, _fn = staticmethod(_pair), "fractional_max_pool2d"


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _tuple, _fn = staticmethod(_triple), "fractional_max_pool3d"


class AlphaDropout(Dropout):
    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             f"instead")
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)

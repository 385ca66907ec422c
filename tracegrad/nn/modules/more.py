"""More of torch.nn's layers, each a thin module over a function of nn.functional: the padding
layers, channel dropout, ConvTranspose1d, PixelUnshuffle, ChannelShuffle, Softmax2d and the
fixed-mode upsampling layers, with torch's constructor arguments and reprs."""
import math

from ... import creation as C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .layers import _ConvNd, Upsample, Dropout

__all__ = ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d", "Dropout1d", "Dropout2d", "Dropout3d", "ConvTranspose1d", "PixelUnshuffle",
           "ChannelShuffle", "Softmax2d", "UpsamplingNearest2d", "UpsamplingBilinear2d", "Bilinear"]


class _PadNd(Module):
    """F.pad with `padding` (an int for every side, or one (left, right, ...) pair per dim)."""
    dims = 1
    mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * self.dims)
        if len(self.padding) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: expected padding of length {2 * self.dims}, got "
                             f"{len(self.padding)}")
        self.value = value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding, value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _pad_class(name, base, dims, mode="constant"):
    return type(name, (base,), {"dims": dims, "mode": mode, "__module__": __name__})


ZeroPad1d, ZeroPad2d, ZeroPad3d = (_pad_class(f"ZeroPad{d}d", _ZeroPadNd, d) for d in (1, 2, 3))
ConstantPad1d, ConstantPad2d, ConstantPad3d = (_pad_class(f"ConstantPad{d}d", _ConstantPadNd, d) for d in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (_pad_class(f"ReflectionPad{d}d", _PadNd, d, "reflect")
                                                     for d in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (_pad_class(f"ReplicationPad{d}d", _PadNd, d, "replicate")
                                                        for d in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (_pad_class(f"CircularPad{d}d", _PadNd, d, "circular")
                                               for d in (1, 2, 3))


class Dropout1d(Dropout):
    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class ConvTranspose1d(_ConvNd):
    """Transposed 1-D convolution; weight (in, out/groups, k)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        one = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,)      # noqa: E731
        super().__init__(in_channels, out_channels, one(kernel_size), one(stride), one(padding), one(dilation), True,
                         one(output_padding), groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Softmax2d(Module):
    """softmax over the channels of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Bilinear(Module):
    """y = x1^T A x2 + b; weight (out, in1, in2) and bias ~ U(-1/sqrt(in1), 1/sqrt(in1)), as torch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(C.empty(out_features, in1_features, in2_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(C.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")

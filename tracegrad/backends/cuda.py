"""torch.backends.cuda: tracegrad's CUDA tensors run Triton kernels. `matmul.allow_tf32` reads and
sets the float32 matmul precision (True: "high", TF32 inputs on tensor cores; False: "highest"),
as torch's; the scaled-dot-product-attention switches keep what scripts set."""
import importlib.util

from .. import _dtype


def is_built():
    """Whether tracegrad's GPU backend can be used here: Triton is installed."""
    return importlib.util.find_spec("triton") is not None


class _Matmul:
    """torch.backends.cuda.matmul: allow_tf32 and the reduced-precision reduction flags."""
    _FLAGS = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self):
        object.__setattr__(self, "_reduced", {"allow_fp16_reduced_precision_reduction": True,
                                              "allow_bf16_reduced_precision_reduction": True})

    def __getattr__(self, name):
        if name == "allow_tf32":
            return _dtype.get_float32_matmul_precision() != "highest"
        if name in self._reduced:
            return self._reduced[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            _dtype.set_float32_matmul_precision("high" if value else "highest")
        elif name in self._reduced:
            self._reduced[name] = bool(value)
        else:
            raise AttributeError(f"Unknown attribute {name}")


matmul = _Matmul()
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def flash_sdp_enabled():
    return _SDP["flash"]


def enable_flash_sdp(enabled):
    _SDP["flash"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _SDP["mem_efficient"]


def enable_mem_efficient_sdp(enabled):
    _SDP["mem_efficient"] = bool(enabled)


def math_sdp_enabled():
    return _SDP["math"]


def enable_math_sdp(enabled):
    _SDP["math"] = bool(enabled)


def cudnn_sdp_enabled():
    return _SDP["cudnn"]


def enable_cudnn_sdp(enabled):
    _SDP["cudnn"] = bool(enabled)

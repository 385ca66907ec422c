"""Parameters as one flat vector and back (torch.nn.utils.parameters_to_vector)."""
from ...tensor import Tensor
from ...ops import functional as F

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, device):
    if device is None:
        return param.device
    if param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return device


def parameters_to_vector(parameters):
    device = None
    vec = []
    for p in parameters:
        device = _check_same_device(p, device)
        vec.append(p.view(-1))
    return F.cat(vec)


def vector_to_parameters(vec, parameters):
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device = None
    pointer = 0
    for p in parameters:
        device = _check_same_device(p, device)
        n = p.numel()
        p.data = vec[pointer:pointer + n].view_as(p).data
        pointer += n

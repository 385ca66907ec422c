"""torch's legacy constructors, still common in older notebooks: `torch.Tensor(data)` and
`torch.Tensor(2, 3)` (the default dtype), `torch.FloatTensor([...])`, `torch.LongTensor(3)` and
the others, with `isinstance(x, torch.FloatTensor)` true for a float32 tensor."""
from . import _dtype as D
from .tensor import Tensor, Size, Above
from .creation import tensor, zeros, _creation_dtype


def construct(dtype, args, device=None):
    """From data (a sequence, an array or a tensor) or from sizes (uninitialised in torch; zeros here)."""
    dt = _creation_dtype(None) if dtype is None else dtype
    if len(args) == 1 and not isinstance(args[0], int) and not isinstance(args[0], Size):
        data = args[0]
        if isinstance(data, Tensor):
            return data.to(dt)
        return tensor(data, dtype=dt, device=device)
    sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else (args or (0,))
    if not all(isinstance(s, int) for s in sizes):
        raise TypeError(f"new(): invalid data type '{type(sizes[0]).__name__}'")
    return zeros(sizes, dtype=dt, device=device)


Above.construct = construct        # Tensor(...) is the legacy constructor of the default dtype


class _LegacyType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args, device=None):
        return construct(cls.dtype, args, device)

    def __repr__(cls):
        return f"<class 'torch.{cls.__name__}'>"


def _legacy_class(dtype, name):
    return _LegacyType(name, (), {"dtype": dtype})


TYPES = {name: _legacy_class(dt, name) for dt, name in D.LEGACY.items()}

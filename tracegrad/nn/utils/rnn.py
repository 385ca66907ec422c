"""torch.nn.utils.rnn: padding a list of variable-length sequences into one tensor (a stack of
padded copies, so the gradient flows back to each sequence). Packed sequences are not
supported yet: the recurrent layers take padded batches."""
from ...ops import functional as O
from ...tensor import Tensor

__all__ = ["pad_sequence", "unpad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """(L_max, B, *) (or (B, L_max, *) with batch_first) from B tensors of shape (L_i, *)."""
    if isinstance(sequences, Tensor):
        sequences = list(O.unbind(sequences, 0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"The size of tensor a ({s.shape[1] if s.ndim > 1 else 0}) must match the size of "
                               f"tensor b ({trailing[0] if trailing else 0}) at non-singleton dimension 1")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        if extra:
            fill = O.full((extra,) + trailing, padding_value, dtype=s.dtype)
            s = O.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return O.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    x = padded_sequences if batch_first else O.transpose(padded_sequences, 0, 1)
    return [x[i, :int(n)] for i, n in enumerate(lengths.tolist() if isinstance(lengths, Tensor) else lengths)]


def _packed(name):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"nn.utils.rnn.{name}: packed sequences are not supported yet; pad the batch "
                                  f"with pad_sequence and pass it to the recurrent layer (mask or pick the last "
                                  f"valid step by length)")
    refuse.__name__ = name
    return refuse


pack_padded_sequence = _packed("pack_padded_sequence")
pad_packed_sequence = _packed("pad_packed_sequence")
pack_sequence = _packed("pack_sequence")
